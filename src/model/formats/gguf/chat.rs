//! Chat templates: the Jinja template a checkpoint ships (`tokenizer.chat_template` in a GGUF,
//! the same key in tokenizer_config.json), rendered as transformers' `apply_chat_template` renders
//! it, with minijinja.
//!
//! transformers renders with jinja2's `trim_blocks` and `lstrip_blocks`, the loop-controls
//! extension, a `tojson` filter that writes Python's `json.dumps` (`ensure_ascii=False`), and two
//! globals: `raise_exception(message)` and `strftime_now(format)`. The special tokens are passed
//! as variables (`bos_token`, `eos_token`). All of that is reproduced here; Python's string
//! methods (`.strip()`, `.startswith()`, …) come from minijinja-contrib's pycompat.

use minijinja::syntax::SyntaxConfig;
use minijinja::value::{Kwargs, Value, ValueKind};
use minijinja::{Environment, ErrorKind};

/// A chat template that failed to compile or render: one line naming where it came from.
#[derive(Debug, thiserror::Error)]
#[error("{origin}: the chat template {reason}")]
pub struct ChatError {
    /// Where the template came from (a file and key).
    pub origin: String,
    /// What failed.
    pub reason: String,
}

/// One message of a conversation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatMessage {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The text.
    pub content: String,
}

/// A checkpoint's chat template, checked to compile.
#[derive(Clone, Debug)]
pub struct ChatTemplate {
    origin: String,
    source: String,
    bos_token: Option<String>,
    eos_token: Option<String>,
}

impl ChatTemplate {
    /// Compile `source` (from `origin`, named in errors) with the special tokens it may use.
    pub fn new(
        origin: impl Into<String>,
        source: impl Into<String>,
        bos_token: Option<String>,
        eos_token: Option<String>,
    ) -> Result<ChatTemplate, ChatError> {
        let template = ChatTemplate {
            origin: origin.into(),
            source: source.into(),
            bos_token,
            eos_token,
        };
        let env = environment();
        env.template_from_str(&template.source)
            .map_err(|e| template.error(&format!("does not compile: {}", one_line(&e))))?;
        Ok(template)
    }

    /// The Jinja source.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The prompt for one user message, followed by the assistant's turn
    /// (`add_generation_prompt=True`): what `--chat` feeds the model.
    pub fn render_user_message(&self, text: &str) -> Result<String, ChatError> {
        self.render(
            &[ChatMessage {
                role: "user".into(),
                content: text.into(),
            }],
            true,
        )
    }

    /// Render a conversation, as `apply_chat_template(messages, tokenize=False,
    /// add_generation_prompt=…)` does.
    pub fn render(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> Result<String, ChatError> {
        let env = environment();
        let template = env
            .template_from_str(&self.source)
            .map_err(|e| self.error(&format!("does not compile: {}", one_line(&e))))?;
        let messages: Vec<Value> = messages
            .iter()
            .map(|m| {
                minijinja::context! {
                    role => m.role.as_str(),
                    content => m.content.as_str(),
                }
            })
            .collect();
        let ctx = minijinja::context! {
            messages => messages,
            add_generation_prompt => add_generation_prompt,
            bos_token => self.bos_token.as_deref(),
            eos_token => self.eos_token.as_deref(),
        };
        template
            .render(ctx)
            .map_err(|e| self.error(&format!("failed to render: {}", one_line(&e))))
    }

    fn error(&self, reason: &str) -> ChatError {
        ChatError {
            origin: self.origin.clone(),
            reason: reason.to_string(),
        }
    }
}

/// Instructions a template may execute: a chat template runs a few hundred per message; the
/// cap bounds a hostile one (a template is part of the checkpoint file).
const FUEL: u64 = 5_000_000;

/// minijinja set up as transformers sets up jinja2.
fn environment<'source>() -> Environment<'source> {
    let mut env = Environment::new();
    let syntax = SyntaxConfig::builder()
        .trim_blocks(true)
        .lstrip_blocks(true)
        .build();
    // Both settings are always valid; keep minijinja's defaults if that ever changes.
    if let Ok(syntax) = syntax {
        env.set_syntax(syntax);
    }
    env.set_fuel(Some(FUEL));
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_filter("tojson", tojson);
    env.add_function(
        "raise_exception",
        |message: String| -> Result<Value, minijinja::Error> {
            Err(minijinja::Error::new(
                ErrorKind::InvalidOperation,
                format!("raised an exception: {message}"),
            ))
        },
    );
    env.add_function("strftime_now", |format: String| strftime_utc(&format));
    env
}

/// A minijinja error on one line (its Display may carry the template location after a newline).
fn one_line(e: &minijinja::Error) -> String {
    e.to_string()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Python's `json.dumps(value, ensure_ascii=False, indent=…, sort_keys=…)`: `", "` and `": "`
/// between items without indent, `","` and newlines with it; non-ASCII text left as is.
fn tojson(value: Value, kwargs: Kwargs) -> Result<String, minijinja::Error> {
    let indent: Option<usize> = kwargs.get("indent")?;
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    // Accepted and ignored: our output never escapes non-ASCII, as transformers' default.
    let _: Option<bool> = kwargs.get("ensure_ascii")?;
    kwargs.assert_all_used()?;
    let mut out = String::new();
    write_json(&value, indent, sort_keys.unwrap_or(false), 0, &mut out)?;
    Ok(out)
}

fn write_json(
    value: &Value,
    indent: Option<usize>,
    sort_keys: bool,
    level: usize,
    out: &mut String,
) -> Result<(), minijinja::Error> {
    let newline = |out: &mut String, level: usize| {
        if let Some(n) = indent {
            out.push('\n');
            out.push_str(&" ".repeat(n * level));
        }
    };
    let item_sep = if indent.is_some() { "," } else { ", " };
    match value.kind() {
        ValueKind::Undefined | ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if value.is_true() { "true" } else { "false" }),
        ValueKind::Number => {
            if let Ok(i) = i64::try_from(value.clone()) {
                out.push_str(&i.to_string());
            } else {
                let f = f64::try_from(value.clone()).unwrap_or(f64::NAN);
                out.push_str(&python_float(f));
            }
        }
        ValueKind::String | ValueKind::Bytes => {
            let text = value
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| value.to_string());
            out.push_str(&serde_json::to_string(&text).unwrap_or_default());
        }
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = value.try_iter()?.collect();
            if items.is_empty() {
                out.push_str("[]");
                return Ok(());
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(item_sep);
                }
                newline(out, level + 1);
                write_json(item, indent, sort_keys, level + 1, out)?;
            }
            newline(out, level);
            out.push(']');
        }
        ValueKind::Map => {
            let mut keys: Vec<Value> = value.try_iter()?.collect();
            if sort_keys {
                keys.sort();
            }
            if keys.is_empty() {
                out.push_str("{}");
                return Ok(());
            }
            out.push('{');
            for (i, key) in keys.iter().enumerate() {
                if i > 0 {
                    out.push_str(item_sep);
                }
                newline(out, level + 1);
                let name = key
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| key.to_string());
                out.push_str(&serde_json::to_string(&name).unwrap_or_default());
                out.push_str(": ");
                write_json(&value.get_item(key)?, indent, sort_keys, level + 1, out)?;
            }
            newline(out, level);
            out.push('}');
        }
        _ => {
            return Err(minijinja::Error::new(
                ErrorKind::InvalidOperation,
                format!("tojson cannot serialise a {}", value.kind()),
            ))
        }
    }
    Ok(())
}

/// A float as Python's `json.dumps` writes it (`1.0`, `0.5`, `1e-05`, `NaN`).
fn python_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    let abs = f.abs();
    if abs != 0.0 && !(1e-4..1e16).contains(&abs) {
        // Python's repr switches to exponent form outside [1e-4, 1e16): 1e-05, 1e+16.
        let s = format!("{f:e}");
        let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
        let exp: i32 = exp.parse().unwrap_or(0);
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exp.abs());
    }
    let s = f.to_string();
    if s.contains('.') {
        s
    } else {
        format!("{s}.0")
    }
}

/// `strftime_now(format)`: the current time (UTC; transformers uses local time, the same on a
/// machine whose clock is set to UTC) with the directives chat templates use.
fn strftime_utc(format: &str) -> Result<String, minijinja::Error> {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    Ok(format_time(secs, format))
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const WEEKDAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

/// `secs` since the Unix epoch formatted with strftime's `%d %m %Y %y %b %B %a %A %H %M %S %j %%`
/// (other directives are copied through).
fn format_time(secs: i64, format: &str) -> String {
    let days = secs.div_euclid(86_400);
    let time = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let weekday = (days + 3).rem_euclid(7) as usize; // 1970-01-01 was a Thursday
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let before: [i64; 12] = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];
    let yday = before[(month - 1) as usize] + day + i64::from(leap && month > 2);

    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('d') => out.push_str(&format!("{day:02}")),
            Some('m') => out.push_str(&format!("{month:02}")),
            Some('Y') => out.push_str(&year.to_string()),
            Some('y') => out.push_str(&format!("{:02}", year.rem_euclid(100))),
            Some('b') => out.push_str(&MONTHS[(month - 1) as usize][..3]),
            Some('B') => out.push_str(MONTHS[(month - 1) as usize]),
            Some('a') => out.push_str(&WEEKDAYS[weekday][..3]),
            Some('A') => out.push_str(WEEKDAYS[weekday]),
            Some('H') => out.push_str(&format!("{:02}", time / 3600)),
            Some('M') => out.push_str(&format!("{:02}", time / 60 % 60)),
            Some('S') => out.push_str(&format!("{:02}", time % 60)),
            Some('j') => out.push_str(&format!("{yday:03}")),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(source: &str, content: &str) -> Result<String, ChatError> {
        ChatTemplate::new("test", source, Some("<s>".into()), Some("</s>".into()))?
            .render_user_message(content)
    }

    #[test]
    fn trims_blocks_like_transformers() {
        // trim_blocks drops the newline after a block tag; lstrip_blocks the indent before one.
        let source = "{% for m in messages %}\n    {% if m.role == 'user' %}\n[{{ m.content }}]\n    {% endif %}\n{% endfor %}\n{% if add_generation_prompt %}>{% endif %}";
        assert_eq!(render(source, "hi").unwrap(), "[hi]\n>");
    }

    #[test]
    fn messages_are_dicts_in_insertion_order() {
        let source = "{{ messages[0]['role'] }}/{{ messages[0].content }}/{{ messages | tojson }}";
        assert_eq!(
            render(source, "hi").unwrap(),
            "user/hi/[{\"role\": \"user\", \"content\": \"hi\"}]"
        );
    }

    #[test]
    fn special_tokens_and_python_methods() {
        let source = "{{ bos_token }}{{ messages[0]['content'].strip().upper() }}{{ eos_token }}";
        assert_eq!(render(source, "  hi  ").unwrap(), "<s>HI</s>");
    }

    #[test]
    fn raise_exception_is_one_line_error() {
        let source = "{{ raise_exception('Conversation roles must alternate\nuser/assistant') }}";
        let err = render(source, "x").unwrap_err().to_string();
        assert!(
            err.contains("raised an exception: Conversation roles must alternate user/assistant"),
            "{err}"
        );
        assert!(!err.contains('\n'), "{err}");
        assert!(
            err.starts_with("test: the chat template failed to render"),
            "{err}"
        );
    }

    #[test]
    fn runaway_templates_run_out_of_fuel() {
        let source =
            "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}";
        let err = render(source, "").unwrap_err().to_string();
        assert!(err.contains("fuel"), "{err}");
    }

    #[test]
    fn compile_errors_are_reported_at_construction() {
        let err = ChatTemplate::new("x.gguf", "{% for %}", None, None).unwrap_err();
        assert!(err
            .to_string()
            .starts_with("x.gguf: the chat template does not compile:"));
    }

    /// Expected strings are Python's `json.dumps(..., ensure_ascii=False)` output.
    #[test]
    fn tojson_writes_python_json() {
        let source = "{{ {'a': [1, 2.5, none, true], 'é': 'x\"y'} | tojson }}|{{ 'ü' | tojson }}|{{ {'b': 1, 'a': {}} | tojson(sort_keys=true) }}|{{ [1, [2]] | tojson(indent=2) }}|{{ 0.00001 | tojson }}";
        assert_eq!(
            render(source, "").unwrap(),
            "{\"a\": [1, 2.5, null, true], \"é\": \"x\\\"y\"}|\"ü\"|{\"a\": {}, \"b\": 1}|[\n  1,\n  [\n    2\n  ]\n]|1e-05"
        );
    }

    #[test]
    fn strftime_matches_known_dates() {
        // 2024-07-26 12:34:56 UTC was a Friday, the 208th day of a leap year.
        let t = 1_722_000_000 - 1_722_000_000 % 86_400 + 12 * 3600 + 34 * 60 + 56;
        assert_eq!(
            format_time(t, "%d %b %Y|%B %m %y|%a %A|%H:%M:%S|%j|%%|%q"),
            "26 Jul 2024|July 07 24|Fri Friday|12:34:56|208|%|%q"
        );
        assert_eq!(format_time(0, "%Y-%m-%d %a"), "1970-01-01 Thu");
        assert_eq!(format_time(951_782_400, "%Y-%m-%d %j"), "2000-02-29 060");
    }
}
