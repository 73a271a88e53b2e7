//! Chat templates: the Jinja template a checkpoint ships (`tokenizer.chat_template` in a GGUF,
//! the same key in tokenizer_config.json), rendered as transformers' `apply_chat_template` renders
//! it, with minijinja.
//!
//! transformers renders with jinja2's `trim_blocks` and `lstrip_blocks`, the loop-controls
//! extension, a `tojson` filter that writes Python's `json.dumps` (`ensure_ascii=False`), and two
//! globals: `raise_exception(message)` and `strftime_now(format)`. The special tokens are passed
//! as variables (`bos_token`, `eos_token`). All of that is reproduced here; Python's string
//! methods (`.strip()`, `.startswith()`, …) come from minijinja-contrib's pycompat.
//!
//! A template is part of the checkpoint file, so it is bounded like any other input:
//!
//! - **work and memory**: minijinja's fuel charges every instruction and every byte or list slot
//!   a template creates; a render gets [`BASE_FUEL`] plus a share of the messages' size
//!   ([`fuel_for`]), which bounds the memory its values can take to a few megabytes.
//! - **depth**: printing a value, `tojson` and `pprint` refuse one nested more than
//!   [`MAX_DEPTH`] deep.
//!   Values deeper than that can still be built (a namespace in a loop), and minijinja compares,
//!   joins and drops them recursively, so the render runs on a thread of its own whose stack
//!   holds the deepest value the fuel can build ([`stack_for`]): a hostile template fails with
//!   one line instead of overflowing the stack.
//! - **output**: the rendered prompt may not exceed [`max_output`]; `tojson`'s indent is at most
//!   [`MAX_INDENT`], and `str.format` widths and precisions at most [`MAX_FORMAT_WIDTH`] in all.

use minijinja::syntax::SyntaxConfig;
use minijinja::value::{Kwargs, Value, ValueKind};
use minijinja::{Environment, ErrorKind};

mod problem;

pub use problem::{ChatError, ChatProblem};

/// One message of a conversation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatMessage {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The text.
    pub content: String,
    /// Where the text marks pictures: when set, the content is passed as transformers passes a
    /// multimodal message's, a list of parts (`{"type": "text", "text": …}` between the marks,
    /// `{"type": "image"}` for each mark), for the template to write the pictures where it
    /// puts them.
    pub image_mark: Option<String>,
}

impl ChatMessage {
    /// The content as the template reads it: the text, or its parts ([`ChatMessage::image_mark`]).
    fn value(&self) -> Value {
        let Some(mark) = self.image_mark.as_deref().filter(|m| !m.is_empty()) else {
            return Value::from(self.content.as_str());
        };
        let mut parts = Vec::new();
        for (i, text) in self.content.split(mark).enumerate() {
            if i > 0 {
                parts.push(minijinja::context! { type => "image" });
            }
            if !text.is_empty() {
                parts.push(minijinja::context! { type => "text", text => text });
            }
        }
        Value::from(parts)
    }
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
        let env = environment(1 << 20);
        env.template_from_str(&template.source).map_err(|e| {
            template.error(ChatProblem::Compile {
                cause: one_line(&e),
            })
        })?;
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
                image_mark: None,
            }],
            true,
        )
    }

    /// [`ChatTemplate::render_user_message`] for a message with pictures: `text` with each
    /// picture marked by `mark`, passed to the template as a list of text and image parts, as
    /// a processor's `apply_chat_template` passes `[{"type": "image"}, {"type": "text", …}]`.
    pub fn render_user_message_with_images(
        &self,
        text: &str,
        mark: &str,
    ) -> Result<String, ChatError> {
        self.render(
            &[ChatMessage {
                role: "user".into(),
                content: text.into(),
                image_mark: Some(mark.into()),
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
        let fuel = fuel_for(messages);
        // Its own thread, with a stack that holds the deepest value the fuel can build (module
        // docs); scoped, so it borrows the messages.
        let rendered = std::thread::scope(|scope| {
            std::thread::Builder::new()
                .name("chat-template".into())
                .stack_size(stack_for(fuel))
                .spawn_scoped(scope, || {
                    self.render_here(messages, add_generation_prompt, fuel)
                })
                .map(|thread| thread.join())
        });
        match rendered {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(self.error(ChatProblem::RendererStopped)),
            Err(e) => Err(self.error(ChatProblem::NoThread {
                cause: e.to_string(),
            })),
        }
    }

    /// [`ChatTemplate::render`] on the calling thread, with `fuel`.
    fn render_here(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
        fuel: u64,
    ) -> Result<String, ChatError> {
        let limit = max_output(messages);
        let mut env = environment(limit);
        env.set_fuel(Some(fuel));
        let template = env.template_from_str(&self.source).map_err(|e| {
            self.error(ChatProblem::Compile {
                cause: one_line(&e),
            })
        })?;
        let values: Vec<Value> = messages
            .iter()
            .map(|m| {
                minijinja::context! {
                    role => m.role.as_str(),
                    content => m.value(),
                }
            })
            .collect();
        let ctx = minijinja::context! {
            messages => values,
            add_generation_prompt => add_generation_prompt,
            bos_token => self.bos_token.as_deref(),
            eos_token => self.eos_token.as_deref(),
        };
        let mut out = LimitedWriter {
            bytes: Vec::new(),
            limit,
        };
        let rendered = template.render_captured_to(ctx, &mut out).map(drop);
        if out.bytes.len() > limit {
            return Err(self.error(ChatProblem::TooLong { limit }));
        }
        rendered.map_err(|e| self.render_error(&e, fuel))?;
        String::from_utf8(out.bytes).map_err(|_| self.error(ChatProblem::NotUtf8))
    }

    fn render_error(&self, e: &minijinja::Error, fuel: u64) -> ChatError {
        if e.kind() == ErrorKind::OutOfFuel {
            return self.error(ChatProblem::OutOfFuel { fuel });
        }
        self.error(ChatProblem::Render { cause: one_line(e) })
    }

    fn error(&self, problem: ChatProblem) -> ChatError {
        ChatError {
            origin: self.origin.clone(),
            problem,
        }
    }
}

/// The fuel of every render: minijinja charges one per instruction, and one per 64 bytes (or two
/// list slots) a template creates. A chat template spends a few hundred to a few thousand per
/// message; this bounds a hostile one to about 6 MB of values.
pub const BASE_FUEL: u64 = 100_000;

/// The fuel of a render of `messages`: [`BASE_FUEL`], 1,000 a message and enough for every byte
/// of the messages to be copied eight times (a template concatenates each message a few times:
/// Qwen2's `'<|im_start|>' + role + '\n' + content + …` copies it five times).
pub fn fuel_for(messages: &[ChatMessage]) -> u64 {
    let bytes: u64 = messages
        .iter()
        .map(|m| (m.role.len() + m.content.len()) as u64)
        .sum();
    BASE_FUEL
        .saturating_add(1_000u64.saturating_mul(messages.len() as u64))
        .saturating_add(bytes / 8)
}

/// The stack of the rendering thread for `fuel`: room for minijinja's recursion through a value
/// nested as deep as `fuel` can build (a list level costs 1.5 fuel: an instruction and a slot;
/// comparing, joining and dropping it take under 400 bytes of stack a level, measured), plus
/// the ordinary stack of a render.
pub fn stack_for(fuel: u64) -> usize {
    const BYTES_PER_LEVEL: u64 = 1024;
    let levels = fuel.saturating_mul(2) / 3;
    usize::try_from(levels.saturating_mul(BYTES_PER_LEVEL))
        .unwrap_or(usize::MAX)
        .saturating_add(16 << 20)
}

/// The longest prompt a render of `messages` may write: 1 MiB (system prompts, tool
/// descriptions) plus twice the messages.
pub fn max_output(messages: &[ChatMessage]) -> usize {
    let bytes: usize = messages
        .iter()
        .map(|m| m.role.len() + m.content.len())
        .sum();
    (1usize << 20).saturating_add(bytes.saturating_mul(2))
}

/// The deepest value a template may print or pass to `tojson` (tool schemas nest about ten
/// deep; Python's own `json.dumps` stops near 1,000).
pub const MAX_DEPTH: usize = 128;

/// The widest `tojson` indent (Python allows any; templates use 2 or 4).
pub const MAX_INDENT: usize = 64;

/// The most characters the widths and precisions of one `str.format` call may ask for, in all.
pub const MAX_FORMAT_WIDTH: u64 = 1 << 16;

/// What a template writes, up to `limit` bytes (one chunk beyond it is kept, so the caller sees
/// that it went over); then writing fails, which stops the render.
struct LimitedWriter {
    bytes: Vec<u8>,
    limit: usize,
}

impl std::io::Write for LimitedWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.bytes.len() > self.limit {
            return Err(std::io::Error::other("the chat template writes too much"));
        }
        let room = self.limit + 1 - self.bytes.len();
        let n = buf.len().min(room);
        self.bytes.extend_from_slice(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// minijinja set up as transformers sets up jinja2, with the bounds of the module docs (fuel is
/// set per render); `tojson` writes at most `max_output` bytes.
fn environment<'source>(max_output: usize) -> Environment<'source> {
    let mut env = Environment::new();
    let syntax = SyntaxConfig::builder()
        .trim_blocks(true)
        .lstrip_blocks(true)
        .build();
    // Both settings are always valid; keep minijinja's defaults if that ever changes.
    if let Ok(syntax) = syntax {
        env.set_syntax(syntax);
    }
    env.set_fuel(Some(BASE_FUEL));
    env.set_unknown_method_callback(|state, value, method, args| {
        if method == "format" {
            if let Some(format) = value.as_str() {
                check_format_widths(format)?;
            }
        }
        minijinja_contrib::pycompat::unknown_method_callback(state, value, method, args)
    });
    env.set_formatter(|out, state, value| {
        check_depth(value, "print")?;
        minijinja::escape_formatter(out, state, value)
    });
    // minijinja's pprint indents every level by four more spaces (a value nested n deep
    // writes n² bytes) and charges its fuel only afterwards.
    env.add_filter("pprint", move |value: Value| {
        let bytes = check_depth(&value, "pprint")?;
        if bytes > max_output as u64 {
            return Err(invalid(format!(
                "pprint would write about {bytes} bytes, more than {max_output}"
            )));
        }
        Ok(minijinja::filters::pprint(&value))
    });
    env.add_filter("tojson", move |value: Value, kwargs: Kwargs| {
        tojson(value, kwargs, max_output)
    });
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
/// `indent` may be a number of spaces or a string, as in Python; each is at most [`MAX_INDENT`]
/// wide, the value at most [`MAX_DEPTH`] deep, and the text at most `limit` bytes (the render's
/// [`max_output`], checked as it grows).
fn tojson(value: Value, kwargs: Kwargs, limit: usize) -> Result<String, minijinja::Error> {
    let indent: Option<Value> = kwargs.get("indent")?;
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    // Accepted and ignored: our output never escapes non-ASCII, as transformers' default.
    let _: Option<bool> = kwargs.get("ensure_ascii")?;
    kwargs.assert_all_used()?;
    let indent = match indent {
        None => None,
        Some(v) if v.is_none() => None,
        Some(v) => Some(match v.as_str() {
            Some(s) if s.chars().count() <= MAX_INDENT => s.to_string(),
            Some(_) => {
                return Err(invalid(format!(
                    "tojson's indent string is longer than {MAX_INDENT} characters"
                )))
            }
            None => {
                // Python indents by nothing (newlines only) for 0 and negative numbers.
                let n = i64::try_from(v.clone()).map_err(|_| {
                    invalid(format!(
                        "tojson's indent `{v}` is neither a number nor a string"
                    ))
                })?;
                if n > MAX_INDENT as i64 {
                    return Err(invalid(format!(
                        "tojson's indent of {n} is more than {MAX_INDENT} spaces"
                    )));
                }
                " ".repeat(n.max(0) as usize)
            }
        }),
    };
    let mut out = String::new();
    let json = Json {
        indent: indent.as_deref(),
        sort_keys: sort_keys.unwrap_or(false),
        limit,
    };
    json.write(&value, 0, &mut out)?;
    Ok(out)
}

fn invalid(message: String) -> minijinja::Error {
    minijinja::Error::new(ErrorKind::InvalidOperation, message)
}

/// Refuse a value nested more than [`MAX_DEPTH`] deep before `what` (print, tojson) recurses
/// into it; walked with a stack of its own, so a deep value cannot overflow this check.
/// Returns how many bytes `pprint` may write for it: four spaces of indent a level for every
/// item, and every string escaped (at most 6 bytes a byte).
fn check_depth(value: &Value, what: &str) -> Result<u64, minijinja::Error> {
    let mut todo = vec![(value.clone(), 0usize)];
    let mut pretty: u64 = 0;
    while let Some((v, depth)) = todo.pop() {
        pretty = pretty.saturating_add(16 + 4 * depth as u64);
        if let Some(s) = v.as_str() {
            pretty = pretty.saturating_add(6 * s.len() as u64);
        }
        if !matches!(v.kind(), ValueKind::Seq | ValueKind::Map) {
            continue;
        }
        if depth >= MAX_DEPTH {
            return Err(invalid(format!(
                "cannot {what} a value nested more than {MAX_DEPTH} deep"
            )));
        }
        let Ok(items) = v.try_iter() else { continue };
        if v.kind() == ValueKind::Map {
            for key in items {
                if let Ok(item) = v.get_item(&key) {
                    todo.push((item, depth + 1));
                }
            }
        } else {
            todo.extend(items.map(|item| (item, depth + 1)));
        }
    }
    Ok(pretty)
}

/// Refuse a `str.format` string whose widths and precisions ask for more than
/// [`MAX_FORMAT_WIDTH`] characters in all (`'{:>4000000000}'`): minijinja formats it without
/// charging fuel. Every run of digits inside a replacement field counts, which can only
/// overestimate.
fn check_format_widths(format: &str) -> Result<(), minijinja::Error> {
    let mut total: u64 = 0;
    let mut in_field = false;
    let mut number: u64 = 0;
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        if !in_field {
            if c == '{' {
                if chars.peek() == Some(&'{') {
                    chars.next();
                } else {
                    in_field = true;
                }
            }
            continue;
        }
        if let Some(d) = c.to_digit(10) {
            number = number.saturating_mul(10).saturating_add(u64::from(d));
            continue;
        }
        total = total.saturating_add(number);
        number = 0;
        if c == '}' {
            in_field = false;
        }
    }
    total = total.saturating_add(number);
    if total > MAX_FORMAT_WIDTH {
        return Err(invalid(format!(
            "str.format asks for widths of {total} characters, more than {MAX_FORMAT_WIDTH}"
        )));
    }
    Ok(())
}

/// How [`tojson`] writes.
struct Json<'a> {
    /// What one level indents by; `None`: everything on one line.
    indent: Option<&'a str>,
    sort_keys: bool,
    /// The most bytes the text may have.
    limit: usize,
}

impl Json<'_> {
    fn write(&self, value: &Value, level: usize, out: &mut String) -> Result<(), minijinja::Error> {
        if level > MAX_DEPTH {
            return Err(invalid(format!(
                "cannot tojson a value nested more than {MAX_DEPTH} deep"
            )));
        }
        if out.len() > self.limit {
            return Err(invalid(format!(
                "tojson writes more than {} bytes",
                self.limit
            )));
        }
        let indent = self.indent;
        let sort_keys = self.sort_keys;
        let newline = |out: &mut String, level: usize| {
            if let Some(unit) = indent {
                out.push('\n');
                for _ in 0..level {
                    out.push_str(unit);
                }
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
                    self.write(item, level + 1, out)?;
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
                    self.write(&value.get_item(key)?, level + 1, out)?;
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
        let err = render(source, "").unwrap_err();
        let fuel = fuel_for(&[ChatMessage {
            role: "user".into(),
            content: String::new(),
            image_mark: None,
        }]);
        assert_eq!(err.problem, ChatProblem::OutOfFuel { fuel }, "{err}");
        assert!(err.to_string().contains("fuel"), "{err}");
    }

    #[test]
    fn compile_errors_are_reported_at_construction() {
        let err = ChatTemplate::new("x.gguf", "{% for %}", None, None).unwrap_err();
        assert!(
            matches!(&err.problem, ChatProblem::Compile { cause } if cause.contains("syntax error")),
            "{err:?}"
        );
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

    /// A list nested `depth` deep (ten levels a loop iteration, in two loops: minijinja's
    /// `range` stops at 100,000), then `then`.
    fn nested(depth: usize, then: &str) -> String {
        let iterations = depth / 10;
        format!(
            "{{% set ns = namespace(x=[]) %}}{{% for i in range({}) %}}{{% for j in range({}) %}}\
             {{% set ns.x = [[[[[[[[[[ns.x]]]]]]]]]] %}}{{% endfor %}}{{% endfor %}}{then}",
            (iterations / 1000).max(1),
            iterations.min(1000)
        )
    }

    fn refused(source: &str, content: &str, mentions: &str) {
        let err = render(source, content).unwrap_err().to_string();
        assert!(err.contains(mentions), "expected `{mentions}` in: {err}");
        assert!(!err.contains('\n'), "{err}");
        assert!(
            err.starts_with("test: the chat template failed to render"),
            "{err}"
        );
    }

    #[test]
    fn tojson_indent_is_bounded_and_takes_python_forms() {
        refused(
            "{{ messages | tojson(indent=100000000000) }}",
            "",
            "tojson's indent of 100000000000 is more than 64 spaces",
        );
        refused(
            "{{ messages | tojson(indent='x' * 100) }}",
            "",
            "indent string is longer than 64",
        );
        // Python: a string indents by itself; 0 and negative numbers give newlines only.
        let source = "{{ [1] | tojson(indent='\t') }}|{{ [1] | tojson(indent=0) }}|{{ [1] | tojson(indent=-3) }}|{{ [1] | tojson(indent=none) }}";
        assert_eq!(render(source, "").unwrap(), "[\n\t1\n]|[\n1\n]|[\n1\n]|[1]");
    }

    #[test]
    fn deep_values_are_refused_where_they_are_printed() {
        // 10,000 levels (within the fuel): printing and tojson refuse before recursing.
        refused(
            &nested(10_000, "{{ ns.x | tojson }}"),
            "",
            "cannot tojson a value nested more than 128 deep",
        );
        refused(
            &nested(10_000, "{{ ns.x }}"),
            "",
            "cannot print a value nested more than 128 deep",
        );
        // pprint indents each level further: n levels would write n² bytes.
        refused(
            &nested(10_000, "{{ ns.x | pprint }}"),
            "",
            "cannot pprint a value nested more than 128 deep",
        );
        refused(
            "{{ range(90000) | list | pprint | length }}",
            "",
            "pprint would write about",
        );
        // Under the limit they print: 120 levels around the empty list.
        let ok = nested(120, "{{ ns.x | tojson | length }}/{{ ns.x | length }}");
        assert_eq!(render(&ok, "").unwrap(), "242/1");
    }

    #[test]
    fn the_deepest_value_the_fuel_builds_is_compared_joined_and_dropped_on_the_renders_stack() {
        // As deep as the fuel allows (it runs out while building), or built whole and then
        // compared, joined to a string, sorted or dropped: minijinja recurses through each, and
        // the rendering thread's stack holds it (a stack overflow would abort this test).
        for then in [
            "x",
            "{{ ns.x == ns.x }}",
            "{{ (ns.x ~ '') | length }}",
            "{{ (ns.x | string) | length }}",
            "{{ [ns.x, ns.x] | sort | length }}",
            "{{ [ns.x, ns.x] | unique | list | length }}",
            "{{ ns.x in [ns.x] }}",
            "{% set ns.x = 0 %}{{ ns.x }}",
        ] {
            for depth in [40_000, 10_000_000] {
                let source = nested(depth, then);
                match render(&source, "") {
                    Ok(out) => assert!(depth < 10_000_000, "{then}: {out}"),
                    Err(e) => {
                        let e = e.to_string();
                        assert!(e.contains("ran out of its fuel"), "{then} at {depth}: {e}")
                    }
                }
            }
        }
    }

    #[test]
    fn format_widths_are_bounded() {
        refused(
            "{{ '{:>4000000000}'.format('x') }}",
            "",
            "str.format asks for widths of 4000000000 characters, more than 65536",
        );
        refused("{{ '{:.1000000000f}'.format(1.5) }}", "", "more than 65536");
        refused(
            &format!("{{{{ '{}'.format(1) }}}}", "{:>60000}".repeat(2)),
            "",
            "widths of 120000 characters",
        );
        // Ordinary formats, and braces that are text.
        assert_eq!(
            render("{{ '{:>5}|{:.2f}|{{}}'.format('ab', 1.5) }}", "").unwrap(),
            "   ab|1.50|{}"
        );
    }

    #[test]
    fn memory_and_output_are_bounded() {
        // A string doubled 40 times runs out of fuel within a few megabytes.
        refused(
            "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}",
            "",
            "ran out of its fuel of",
        );
        refused(
            "{% for i in range(40) %}{{ 'x' * 100000000 }}{% endfor %}",
            "",
            "ran out of its fuel",
        );
        // Output beyond 1 MiB plus twice the message ("user" and ""): stopped as it is
        // written.
        refused(
            "{% for i in range(100) %}{{ 'x' * 20000 }}{% endfor %}",
            "",
            "it writes more than 1048584 bytes",
        );
    }

    #[test]
    fn long_messages_get_fuel_and_room_in_proportion() {
        // Qwen2's template over a 1 MiB message: five copies of it, and 1 MiB of output.
        let source = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";
        let text = "ab ".repeat(350_000);
        let out = render(source, &text).unwrap();
        assert_eq!(
            out.len(),
            text.len() + "<|im_start|>user\n<|im_end|>\n<|im_start|>assistant\n".len()
        );
        let messages = [ChatMessage {
            role: "user".into(),
            content: text,
            image_mark: None,
        }];
        assert_eq!(fuel_for(&messages), BASE_FUEL + 1_000 + (4 + 1_050_000) / 8);
        assert_eq!(max_output(&messages), (1 << 20) + 2 * 1_050_004);
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
