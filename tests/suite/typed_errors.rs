//! The library's errors are typed (issue 41): no function of a library crate returns
//! `Result<_, String>`, and no reader builds an `ImportError::Invalid` from a sentence. The
//! source of `crates/*/src` is scanned (comments and `#[cfg(test)]` modules left out), and each
//! offence is named by `file:line`.
//!
//! [`NOT_YET_TYPED`] lists what is still being converted; an entry that no longer matches
//! anything fails the test too, so the list only shrinks. Further along: the files of
//! [`FACTS_ONLY`] (config.json's errors) and [`FACT_FILES`] hold no sentence of ours at all, only
//! facts (a third party's own message may stay text, marked as the external cause).

use std::path::{Path, PathBuf};

/// Files (or folders, ending in `/`) still being converted, each with the text that marks the
/// lines allowed in it (`""`: every line). Remove an entry once its code is typed.
const NOT_YET_TYPED: &[(&str, &str)] = &[];

/// Files whose errors hold facts, not sentences: no `reason: String` or `detail: String` in
/// their code (a field, or a closure's parameter that builds one).
const FACTS_ONLY: &[&str] = &[
    "crates/model/src/formats/config.rs",
    "crates/model/src/formats/config_problem.rs",
    "crates/model/src/formats/validate.rs",
];

/// Files whose errors carry facts, not sentences (issue 41): in them, no field named `reason`,
/// `cause`, `message` or `why` holds a `String` unless its doc comment says that it is
/// [`EXTERNAL`], a third party's own message (an io::Error's, minijinja's, libjpeg's).
const FACT_FILES: &[&str] = &[
    "crates/model/src/formats/gguf/chat.rs",
    "crates/model/src/formats/gguf/chat/problem.rs",
    "crates/model/src/formats/pytorch.rs",
    "crates/model/src/formats/pytorch/problem.rs",
    "crates/model/src/formats/source.rs",
    "crates/model/src/formats/source/local.rs",
    "crates/model/src/formats/weights.rs",
    "crates/model/src/formats/weights/problem.rs",
    "crates/model/src/pixels/jpeg.rs",
    "crates/model/src/pixels/mod.rs",
    "crates/model/src/pixels/read.rs",
];

/// What the doc comment of a field holding a third party's message says.
const EXTERNAL: &str = "(the external cause)";

/// Fields of [`FACT_FILES`] that still hold a sentence of ours, each by its file and the text
/// of its doc comment: the hub's reasons, which mix our words with ureq's and hf-hub's
/// messages. Remove an entry once its field is typed.
const LEFT_AS_TEXT: &[(&str, &str)] = &[];

/// One place that breaks the rule.
#[derive(Debug)]
struct Offence {
    /// The file, relative to the workspace root, with `/` separators.
    file: String,
    /// 1-based.
    line: usize,
    /// The line's text, trimmed.
    text: String,
}

#[test]
fn library_crates_have_no_string_errors() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for krate in std::fs::read_dir(root.join("crates")).expect("crates/") {
        let src = krate.expect("a crate").path().join("src");
        if src.is_dir() {
            rust_files(&src, &mut files);
        }
    }
    files.sort();
    assert!(files.len() > 50, "found only {} files", files.len());

    let mut offences = Vec::new();
    let mut used = vec![false; NOT_YET_TYPED.len()];
    for path in &files {
        let rel = path
            .strip_prefix(root)
            .expect("under the root")
            .to_string_lossy()
            .replace('\\', "/");
        let text = std::fs::read_to_string(path).expect("readable source");
        for (line, what) in offending_lines(&text) {
            let allowed = NOT_YET_TYPED.iter().position(|(file, marker)| {
                let here = if file.ends_with('/') {
                    rel.starts_with(file)
                } else {
                    rel == *file
                };
                here && what.contains(marker)
            });
            match allowed {
                Some(i) => used[i] = true,
                None => offences.push(Offence {
                    file: rel.clone(),
                    line,
                    text: what,
                }),
            }
        }
    }
    let listed: Vec<String> = offences
        .iter()
        .map(|o| format!("{}:{}: {}", o.file, o.line, o.text))
        .collect();
    assert!(
        listed.is_empty(),
        "String errors in the library (give each a thiserror type whose variants carry the \
         facts):\n{}",
        listed.join("\n")
    );
    assert_none_stale(
        "NOT_YET_TYPED lists code that is typed now",
        NOT_YET_TYPED,
        &used,
    );
}

#[test]
fn config_errors_hold_facts_not_sentences() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut listed = Vec::new();
    for file in FACTS_ONLY {
        let text = std::fs::read_to_string(root.join(file)).expect("a file of FACTS_ONLY");
        for (line, what) in reason_or_detail_lines(&text) {
            listed.push(format!("{file}:{line}: {what}"));
        }
    }
    assert!(
        listed.is_empty(),
        "a sentence where these errors hold facts (give the variant the facts, and its \
         Display the words):\n{}",
        listed.join("\n")
    );
}

#[test]
fn the_reason_or_detail_scan_finds_what_it_looks_for() {
    let src = "\
/// A `reason: String` in a doc comment is fine.
enum E {
    Invalid { path: PathBuf, reason: String },
    Mismatch {
        detail:   String,
    },
    Fine { model_type: String }, // reason: String
}
fn f() { let bad = |reason: String| E::Invalid { path, reason }; }

#[cfg(test)]
mod tests {
    struct T { reason: String }
}
";
    let lines: Vec<usize> = reason_or_detail_lines(src)
        .into_iter()
        .map(|(l, _)| l)
        .collect();
    assert_eq!(lines, [3, 5, 9]);
}

#[test]
fn the_scan_finds_what_it_looks_for() {
    let src = "\
/// Result<u32, String> in a doc comment is fine.
fn a() -> Result<u32, String> { todo!() }
fn b() -> Result<Option<Vec<String>>, MyError> { todo!() }
fn c(
    x: u8,
) -> Result<
    HashMap<String, u32>,
    String,
> { todo!() }
type Visit<'a> = dyn FnMut(&[u8]) -> Result<(), String> + 'a;
impl FromStr for X { type Err = String; }
fn d() { ImportError::invalid(format!(\"x\")); }
fn e() -> std::result::Result<(), std::string::String> { todo!() }

#[cfg(test)]
mod tests {
    fn helper() -> Result<u32, String> { todo!() }
}
";
    let lines: Vec<usize> = offending_lines(src).into_iter().map(|(l, _)| l).collect();
    assert_eq!(lines, [2, 6, 10, 11, 12, 13]);
}

#[test]
fn converted_errors_hold_facts_not_sentences() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut offences = Vec::new();
    let mut used = vec![false; LEFT_AS_TEXT.len()];
    for file in FACT_FILES {
        let text = std::fs::read_to_string(root.join(file))
            .unwrap_or_else(|e| panic!("{file}: {e} (update FACT_FILES if it moved)"));
        for (line, field, doc) in sentence_fields(&text) {
            let left = LEFT_AS_TEXT
                .iter()
                .position(|(f, d)| f == file && doc.contains(d));
            match left {
                Some(i) => used[i] = true,
                None => offences.push(format!("{file}:{line}: {field} (doc: {doc:?})")),
            }
        }
    }
    assert!(
        offences.is_empty(),
        "sentences held as String where the error should carry facts (give the field a type \
         whose variants hold them; a third party's own message may stay text if its doc says \
         {EXTERNAL:?}):\n{}",
        offences.join("\n")
    );
    assert_none_stale(
        "LEFT_AS_TEXT lists fields that are typed now",
        LEFT_AS_TEXT,
        &used,
    );
}

#[test]
fn the_fact_scan_finds_sentence_fields() {
    let src = "\
pub enum E {
    A {
        /// What failed.
        reason: String,
        /// The decoder's own message (the external cause).
        cause: String,
        /// The tensor.
        name: String,
        /// Typed.
        reason: Problem,
    },
    B {
        /// Said in two lines,
        /// with an attribute between.
        #[source]
        pub message: std::string::String,
    },
}

#[cfg(test)]
mod tests {
    struct T { reason: String }
}
";
    let found: Vec<(usize, String, String)> = sentence_fields(src);
    assert_eq!(
        found,
        [
            (4, "reason: String,".into(), "What failed.".into()),
            (
                16,
                "pub message: std::string::String,".into(),
                "Said in two lines, with an attribute between.".into()
            ),
        ]
    );
}

/// The fields named `reason`, `cause`, `message` or `why` whose type is `String` in `text`
/// (before its inline tests) and whose doc comment does not say [`EXTERNAL`], each with its
/// line (1-based), its text, and its doc comment's text (its lines joined by spaces).
fn sentence_fields(text: &str) -> Vec<(usize, String, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (i, line) in lines[..code_end(&lines)].iter().enumerate() {
        let field = line.trim();
        let bare = field
            .strip_prefix("pub(crate) ")
            .or_else(|| field.strip_prefix("pub "))
            .unwrap_or(field);
        let Some((name, ty)) = bare.split_once(':') else {
            continue;
        };
        if !["reason", "cause", "message", "why"].contains(&name.trim()) || !is_string(ty) {
            continue;
        }
        let mut doc = Vec::new();
        for above in lines[..i].iter().rev().map(|l| l.trim()) {
            if let Some(words) = above.strip_prefix("///") {
                doc.push(words.trim());
            } else if !above.starts_with("#[") {
                break;
            }
        }
        doc.reverse();
        let doc = doc.join(" ");
        if !doc.contains(EXTERNAL) {
            found.push((i + 1, field.to_string(), doc));
        }
    }
    found
}

/// The index of the line where `lines`' inline tests begin (a `#[cfg(test)]` that opens a
/// module), or their count.
fn code_end(lines: &[&str]) -> usize {
    lines
        .windows(2)
        .position(|pair| {
            let next = pair[1].trim();
            pair[0].trim() == "#[cfg(test)]"
                && (next.starts_with("mod ") || next.starts_with("pub mod "))
                && next.ends_with('{')
        })
        .unwrap_or(lines.len())
}

/// The `.rs` files under `dir`, leaving out those a `#[cfg(test)] mod name;` declares.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut test_modules = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("a source folder")
        .map(|e| e.expect("an entry").path())
        .collect();
    entries.sort();
    for path in &entries {
        if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(path).expect("readable source");
            test_modules.extend(declared_test_modules(&text));
        }
    }
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned());
            if !stem.is_some_and(|s| test_modules.contains(&s)) {
                out.push(path);
            }
        }
    }
}

/// `name` of each `#[cfg(test)]` followed by `mod name;`.
fn declared_test_modules(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    lines
        .windows(2)
        .filter(|w| w[0] == "#[cfg(test)]")
        .filter_map(|w| {
            let rest = w[1].strip_prefix("pub ").unwrap_or(w[1]);
            rest.strip_prefix("mod ")?
                .strip_suffix(';')
                .map(str::to_string)
        })
        .collect()
}

/// The lines (1-based, with their text) of `text` with a `reason: String` or `detail: String`
/// (however spaced), comments and the tests left out as in [`offending_lines`].
fn reason_or_detail_lines(text: &str) -> Vec<(usize, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let end = code_end(&lines);
    let mut found = Vec::new();
    for (n, line) in lines[..end].iter().enumerate() {
        let code = match line.find("//") {
            Some(at) if !inside_string(&line[..at]) => &line[..at],
            _ => line,
        };
        let squeezed: String = code.chars().filter(|c| !c.is_whitespace()).collect();
        if ["reason:String", "detail:String"]
            .iter()
            .any(|field| squeezed.contains(field))
        {
            found.push((n + 1, line.trim().to_string()));
        }
    }
    found
}

/// The lines (1-based, with their text) of `text` that return or build a String error: a
/// `Result` whose error type is `String`, `type Err = String`, or `ImportError::invalid(`/
/// `ImportError::Invalid(`. Comments are left out, and so is everything from the first
/// `#[cfg(test)]` that opens an inline module (the tests, which end a file here).
fn offending_lines(text: &str) -> Vec<(usize, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let end = code_end(&lines);
    // The code without comments, and the line each byte is on.
    let mut code = String::new();
    let mut line_of = Vec::new();
    for (n, line) in lines[..end].iter().enumerate() {
        let kept = match line.find("//") {
            Some(at) if !inside_string(&line[..at]) => &line[..at],
            _ => line,
        };
        code.push_str(kept);
        code.push('\n');
        line_of.extend(std::iter::repeat_n(n + 1, kept.len() + 1));
    }

    let mut found = Vec::new();
    let mut push = |at: usize| {
        let line = line_of[at];
        if found.last().map(|&(l, _)| l) != Some(line) {
            found.push((line, lines[line - 1].trim().to_string()));
        }
    };
    let bytes = code.as_bytes();
    let mut at = 0;
    while let Some(off) = code[at..].find("Result<") {
        let start = at + off;
        at = start + "Result<".len();
        // Only the word `Result`, not `MyResult<`.
        if start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_') {
            continue;
        }
        if let Some(args) = generic_args(&code[at..]) {
            if args.len() == 2 && is_string(&args[1]) {
                push(start);
            }
        }
    }
    for needle in [
        "type Err = String",
        "ImportError::invalid(",
        "ImportError::Invalid(",
    ] {
        let mut from = 0;
        while let Some(off) = code[from..].find(needle) {
            push(from + off);
            from += off + needle.len();
        }
    }
    found.sort();
    found.dedup_by_key(|(l, _)| *l);
    found
}

/// Whether `prefix` (a line up to a `//`) ends inside a string literal.
fn inside_string(prefix: &str) -> bool {
    let mut inside = false;
    let mut escaped = false;
    for c in prefix.chars() {
        match c {
            '\\' if inside => escaped = !escaped,
            '"' if !escaped => inside = !inside,
            _ => escaped = false,
        }
    }
    inside
}

/// The top-level arguments of a generic list whose `<` has been read: `u32, String>` gives
/// `["u32", "String"]`. `None` when it does not close.
fn generic_args(rest: &str) -> Option<Vec<String>> {
    let mut depth = 0usize;
    let mut args = vec![String::new()];
    let mut prev = ' ';
    for c in rest.chars() {
        match c {
            '<' | '(' | '[' => depth += 1,
            // `->` inside a `dyn Fn(..) -> T` is no closing bracket.
            '>' if prev == '-' => {}
            '>' | ')' | ']' if depth > 0 => depth -= 1,
            '>' => {
                return Some(
                    args.into_iter()
                        .map(|a| a.trim().to_string())
                        .filter(|a| !a.is_empty())
                        .collect(),
                )
            }
            ',' if depth == 0 => {
                args.push(String::new());
                prev = c;
                continue;
            }
            ';' | '{' => return None,
            _ => {}
        }
        args.last_mut()?.push(c);
        prev = c;
    }
    None
}

/// `String`, however it is spelled.
fn is_string(ty: &str) -> bool {
    let ty: String = ty.chars().filter(|c| !c.is_whitespace()).collect();
    let ty = ty.trim_end_matches(',');
    matches!(
        ty,
        "String" | "std::string::String" | "alloc::string::String"
    )
}

/// Fail, naming them, when entries of an exception list matched nothing (`used[i]` is whether
/// entry `i` did): such a list only shrinks.
fn assert_none_stale<T: std::fmt::Debug>(what: &str, entries: &[T], used: &[bool]) {
    let stale: Vec<_> = entries
        .iter()
        .zip(used)
        .filter(|(_, &u)| !u)
        .map(|(entry, _)| format!("{entry:?}"))
        .collect();
    assert!(stale.is_empty(), "{what}; remove: {}", stale.join(", "));
}
