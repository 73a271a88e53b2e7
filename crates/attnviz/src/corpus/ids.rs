//! JSON Lines ids: the `id` of a record names its output files (`sentences/ID.json`), so it
//! must be a safe file name, and unique.
//!
//! - **Safe**: 1 to [`MAX_ID_BYTES`] bytes of ASCII letters, digits, `.`, `_` and `-`, starting
//!   with a letter or digit and not ending with `.`. So no path separator, no `..`, no hidden
//!   or temporary-looking name (attnviz's temporaries start with `.`), nothing a shell or
//!   another operating system reads differently. Ids outside this set are refused rather than
//!   rewritten: rewriting (`a/b` → `a_b`) would make two ids one name.
//! - **Unique, ignoring ASCII case** (macOS and Windows file systems fold case): the first line
//!   that carries a name keeps it; a later line with the same name is a bad line. A record
//!   without an id is named by its line number (`000042`), which takes part in the same check.
//! - **Claimed by the first record that carries it, usable or not**: the claim is made as soon
//!   as the record's JSON and id are read, before its text is checked or tokenized. Every shard
//!   reads every record's id (not only its own lines'), so each decides exactly as a single run
//!   would, and the merged result does not depend on how the corpus was split.
//!
//! Memory: a 16-byte hash and a line number per id (about 40 bytes with the table), and one
//! bit per line for records named by their number.

use std::collections::HashMap;
use std::fmt;

use sha2::{Digest, Sha256};

use super::lines::BadLine;

/// Longest id, in bytes.
pub const MAX_ID_BYTES: usize = 100;

/// A checked id: safe as a file name (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Id(String);

/// Why an id cannot name a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BadId {
    /// Not a string or an integer.
    NotStringOrInteger(String),
    /// Empty.
    Empty,
    /// Longer than [`MAX_ID_BYTES`].
    TooLong(usize),
    /// A character outside `A-Z a-z 0-9 . _ -`.
    Character {
        /// The id (shortened when long).
        id: String,
        /// The character.
        ch: char,
    },
    /// Starts with something other than a letter or digit, or ends with `.`.
    Ends(String),
}

impl fmt::Display for BadId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const RULE: &str = "ids name the output files: use letters, digits, '.', '_' and '-', \
                            starting with a letter or digit";
        match self {
            BadId::NotStringOrInteger(v) => write!(f, "id {v} is not a string or an integer"),
            BadId::Empty => write!(f, "id is empty; {RULE}"),
            BadId::TooLong(n) => write!(
                f,
                "id is {n} bytes long, over the limit of {MAX_ID_BYTES}; {RULE}"
            ),
            BadId::Character { id, ch } => write!(f, "id \"{id}\" holds {ch:?}; {RULE}"),
            BadId::Ends(id) => write!(
                f,
                "id \"{id}\" cannot name a file; {RULE}, not ending with '.'"
            ),
        }
    }
}

impl Id {
    /// Check `s` as an id.
    pub fn parse(s: &str) -> Result<Id, BadId> {
        if s.is_empty() {
            return Err(BadId::Empty);
        }
        if s.len() > MAX_ID_BYTES {
            return Err(BadId::TooLong(s.len()));
        }
        if let Some(ch) = s
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
        {
            return Err(BadId::Character { id: shorten(s), ch });
        }
        let first_ok = s.as_bytes()[0].is_ascii_alphanumeric();
        if !first_ok || s.ends_with('.') {
            return Err(BadId::Ends(s.to_string()));
        }
        Ok(Id(s.to_string()))
    }

    /// An id as JSON gives it: a string, or an integer (written in decimal).
    pub fn from_json(v: &serde_json::Value) -> Result<Id, BadId> {
        match v {
            serde_json::Value::String(s) => Id::parse(s),
            serde_json::Value::Number(n) if n.is_i64() || n.is_u64() => Id::parse(&n.to_string()),
            other => {
                let mut text = other.to_string();
                if text.len() > 40 {
                    text = format!("{}…", crate::tokenize::cut_to_bytes(&text, 40));
                }
                Err(BadId::NotStringOrInteger(text))
            }
        }
    }

    /// The id.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

fn shorten(s: &str) -> String {
    if s.chars().count() > 40 {
        format!("{}…", s.chars().take(40).collect::<String>())
    } else {
        s.to_string()
    }
}

/// The output name of a line without an id: its number, at least six digits.
pub fn line_name(line: usize) -> String {
    format!("{line:06}")
}

/// The output names claimed so far (see the module docs).
#[derive(Debug, Default)]
pub struct Names {
    /// Hash of each id (ASCII-lowercased) → the line that carries it.
    ids: HashMap<u128, usize>,
    /// Bit `line` set: that line is named by its number.
    numbered: Vec<u64>,
}

fn key(name: &str) -> u128 {
    let digest = Sha256::digest(name.to_ascii_lowercase().as_bytes());
    u128::from_le_bytes(digest[..16].try_into().expect("16 bytes"))
}

impl Names {
    /// No names claimed.
    pub fn new() -> Self {
        Self::default()
    }

    /// Claim line `line`'s name: its `id`, or its number when it has none. Lines must be claimed
    /// in increasing order. A name already taken is a [`BadLine::DuplicateName`].
    pub fn claim(&mut self, line: usize, id: Option<&Id>) -> Result<(), BadLine> {
        match id {
            Some(id) => {
                let k = key(id.as_str());
                if let Some(&first) = self.ids.get(&k) {
                    return Err(BadLine::DuplicateName {
                        name: id.as_str().to_string(),
                        first,
                        this_from_id: true,
                        first_from_id: true,
                    });
                }
                if let Some(m) = numbered_line(id.as_str()).filter(|&m| m < line) {
                    if self.is_numbered(m) {
                        return Err(BadLine::DuplicateName {
                            name: id.as_str().to_string(),
                            first: m,
                            this_from_id: true,
                            first_from_id: false,
                        });
                    }
                }
                self.ids.insert(k, line);
            }
            None => {
                let name = line_name(line);
                if let Some(&first) = self.ids.get(&key(&name)) {
                    return Err(BadLine::DuplicateName {
                        name,
                        first,
                        this_from_id: false,
                        first_from_id: true,
                    });
                }
                let (word, bit) = (line / 64, line % 64);
                if self.numbered.len() <= word {
                    self.numbered.resize(word + 1, 0);
                }
                self.numbered[word] |= 1 << bit;
            }
        }
        Ok(())
    }

    fn is_numbered(&self, line: usize) -> bool {
        self.numbered
            .get(line / 64)
            .is_some_and(|w| w & (1 << (line % 64)) != 0)
    }
}

/// The line whose number-name `name` is, if it is one (`000042` → 42; `1234567` → 1234567).
fn numbered_line(name: &str) -> Option<usize> {
    if !name.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: usize = name.parse().ok()?;
    (n > 0 && line_name(n) == name).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_must_be_safe_file_names() {
        for good in ["a", "doc-12_3.v2", "0", "X", &"a".repeat(MAX_ID_BYTES)] {
            assert_eq!(Id::parse(good).unwrap().as_str(), good);
        }
        for bad in [
            "",
            "..",
            ".",
            ".hidden",
            "a/b",
            "a\\b",
            "../etc/passwd",
            "-rf",
            "_x",
            "ends.",
            "sp ace",
            "tab\t",
            "nul\0",
            "café",
            "a:b",
            &"a".repeat(MAX_ID_BYTES + 1),
        ] {
            let e = Id::parse(bad).unwrap_err();
            assert!(!e.to_string().contains('\n'), "{e}");
        }
        assert_eq!(
            Id::from_json(&serde_json::json!(42)).unwrap().as_str(),
            "42"
        );
        assert!(Id::from_json(&serde_json::json!(-1)).is_err());
        assert!(Id::from_json(&serde_json::json!(1.5)).is_err());
        assert!(Id::from_json(&serde_json::json!(["a"])).is_err());
        let long = Id::from_json(&serde_json::json!({"k": "v".repeat(100)})).unwrap_err();
        assert!(long.to_string().len() < 200, "{long}");
    }

    #[test]
    fn names_are_unique_ignoring_case_and_line_numbers_take_part() {
        let id = |s: &str| Id::parse(s).unwrap();
        let mut names = Names::new();
        names.claim(1, Some(&id("Doc"))).unwrap();
        names.claim(2, None).unwrap(); // 000002
        let dup = names.claim(3, Some(&id("doc"))).unwrap_err();
        assert!(dup.to_string().contains("line 1"), "{dup}");
        assert_eq!(dup.kind(), "duplicate-id");
        // The id "000002" is line 2's name.
        let dup = names.claim(4, Some(&id("000002"))).unwrap_err();
        assert!(dup.to_string().contains("line 2"), "{dup}");
        // "2" and "0000002" are not line 2's name.
        names.claim(5, Some(&id("2"))).unwrap();
        names.claim(6, Some(&id("0000002"))).unwrap();
        // An id that is a later line's number takes that name from it.
        names.claim(7, Some(&id("000009"))).unwrap();
        let dup = names.claim(9, None).unwrap_err();
        assert!(dup.to_string().contains("give it an id"), "{dup}");
        names.claim(10, None).unwrap();
        names.claim(1_234_567, None).unwrap();
        assert!(names.claim(1_234_568, Some(&id("1234567"))).is_err());
    }
}
