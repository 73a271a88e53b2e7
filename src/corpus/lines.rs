//! Reading the corpus one line at a time, and telling good lines from bad ones.
//!
//! Lines are read as bytes with a cap ([`MAX_LINE_BYTES`]), so a huge line (or a binary file
//! without newlines) never sits whole in memory. A line ends at `\n`; a `\r` before it and a
//! UTF-8 byte-order mark at the start of line 1 are dropped.

use std::fmt;
use std::io::{self, BufRead};

/// The longest line kept, in bytes. A longer line is reported as bad and its bytes beyond
/// this are read and dropped. Far above what a BERT input needs (512 tokens of ordinary text
/// are a few kilobytes), so only a mistake (a binary file, a file with no newlines) hits it.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// One line of input, as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawLine {
    /// Line number, from 1.
    pub number: usize,
    /// Its bytes without the line ending (at most [`MAX_LINE_BYTES`]).
    pub bytes: Vec<u8>,
    /// Length of the whole line in bytes (more than `bytes.len()` when cut).
    pub len: usize,
}

/// Reads [`RawLine`]s from a buffered reader.
pub struct LineReader<R> {
    reader: R,
    number: usize,
}

impl<R: BufRead> LineReader<R> {
    /// Read lines from `reader`.
    pub fn new(reader: R) -> Self {
        LineReader { reader, number: 0 }
    }

    /// The next line; `None` at the end of the input. A read interrupted by a signal is
    /// retried unless `stop()` says to give up (then it ends the input).
    pub fn next_line(&mut self, stop: impl Fn() -> bool) -> io::Result<Option<RawLine>> {
        let mut bytes = Vec::new();
        let mut len = 0usize;
        let mut any = false;
        loop {
            let available = match self.reader.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                    if stop() {
                        return Ok(None);
                    }
                    continue;
                }
                Err(e) => return Err(e),
            };
            if available.is_empty() {
                if !any {
                    return Ok(None);
                }
                break;
            }
            any = true;
            let newline = available.iter().position(|&b| b == b'\n');
            let chunk = &available[..newline.unwrap_or(available.len())];
            let room = MAX_LINE_BYTES.saturating_sub(bytes.len());
            bytes.extend_from_slice(&chunk[..chunk.len().min(room)]);
            len += chunk.len();
            let used = newline.map_or(chunk.len(), |i| i + 1);
            self.reader.consume(used);
            if newline.is_some() {
                break;
            }
        }
        self.number += 1;
        if len <= MAX_LINE_BYTES && bytes.last() == Some(&b'\r') {
            bytes.pop();
            len -= 1;
        }
        if self.number == 1 && bytes.starts_with(b"\xEF\xBB\xBF") {
            bytes.drain(..3);
            len -= 3;
        }
        Ok(Some(RawLine {
            number: self.number,
            bytes,
            len,
        }))
    }
}

/// Why a line cannot be used. Displays as the reason, in a few words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BadLine {
    /// Empty, or only whitespace.
    Empty,
    /// One side of a tab-separated pair is empty or only whitespace.
    EmptyPart {
        /// `first` or `second`.
        which: &'static str,
    },
    /// More than one tab.
    Tabs {
        /// How many.
        count: usize,
    },
    /// Not valid UTF-8.
    InvalidUtf8 {
        /// Byte offset (0-based) of the first invalid byte.
        at: usize,
    },
    /// Longer than [`MAX_LINE_BYTES`].
    TooManyBytes {
        /// The line's length in bytes.
        len: usize,
    },
    /// More tokens than the model takes, and `--truncate` was not given.
    TooLong {
        /// Tokens the line needs (with [CLS]/[SEP]).
        tokens: usize,
        /// The model's maximum.
        max: usize,
    },
    /// Nothing the tokenizer can read (control characters only, say).
    NoTokens,
    /// A pair, but the model has a single segment type.
    PairUnsupported,
    /// The tokenizer failed.
    Tokenizer(String),
    /// The model's attention for this line is not a set of probability distributions (NaN,
    /// inf, or rows that do not sum to 1: the weights overflow on it).
    Attention(String),
}

impl BadLine {
    /// A short fixed name for counting, as used in `corpus_stats.json`.
    pub fn kind(&self) -> &'static str {
        match self {
            BadLine::Empty | BadLine::EmptyPart { .. } => "empty",
            BadLine::Tabs { .. } => "tabs",
            BadLine::InvalidUtf8 { .. } => "invalid-utf8",
            BadLine::TooManyBytes { .. } | BadLine::TooLong { .. } => "too-long",
            BadLine::NoTokens => "no-tokens",
            BadLine::PairUnsupported => "pair-unsupported",
            BadLine::Tokenizer(_) => "tokenizer",
            BadLine::Attention(_) => "bad-attention",
        }
    }
}

impl fmt::Display for BadLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadLine::Empty => f.write_str("empty line"),
            BadLine::EmptyPart { which } => {
                write!(f, "the {which} sentence of the tab-separated pair is empty")
            }
            BadLine::Tabs { count } => write!(
                f,
                "{count} tabs; a line holds one sentence, or two separated by one tab"
            ),
            BadLine::InvalidUtf8 { at } => write!(f, "not valid UTF-8 (byte {})", at + 1),
            BadLine::TooManyBytes { len } => write!(
                f,
                "{len} bytes long, over the limit of {MAX_LINE_BYTES} bytes per line"
            ),
            BadLine::TooLong { tokens, max } => write!(
                f,
                "{tokens} tokens, but the model takes at most {max}; shorten it or pass --truncate"
            ),
            BadLine::NoTokens => f.write_str("no tokens the model can read"),
            BadLine::PairUnsupported => f.write_str(
                "a tab-separated pair, but the model has a single segment type and cannot encode pairs",
            ),
            BadLine::Tokenizer(e) => write!(f, "tokenization failed: {e}"),
            BadLine::Attention(e) => f.write_str(e),
        }
    }
}

/// A line's text: one sentence, or a pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sentence<'a> {
    /// The sentence (sentence A of a pair).
    pub text: &'a str,
    /// Sentence B of a tab-separated pair.
    pub pair: Option<&'a str>,
}

/// Split a line into a sentence or a tab-separated pair, or say why it is bad. Checks
/// everything that needs no tokenizer.
pub fn parse(line: &RawLine) -> Result<Sentence<'_>, BadLine> {
    if line.len > MAX_LINE_BYTES {
        return Err(BadLine::TooManyBytes { len: line.len });
    }
    let text = std::str::from_utf8(&line.bytes).map_err(|e| BadLine::InvalidUtf8 {
        at: e.valid_up_to(),
    })?;
    if text.trim().is_empty() {
        return Err(BadLine::Empty);
    }
    let mut parts = text.split('\t');
    let a = parts.next().unwrap_or_default();
    let b = parts.next();
    let extra = parts.count();
    if extra > 0 {
        return Err(BadLine::Tabs { count: extra + 1 });
    }
    if a.trim().is_empty() {
        return Err(BadLine::EmptyPart { which: "first" });
    }
    if b.is_some_and(|b| b.trim().is_empty()) {
        return Err(BadLine::EmptyPart { which: "second" });
    }
    Ok(Sentence { text: a, pair: b })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(input: &[u8]) -> Vec<RawLine> {
        let mut r = LineReader::new(io::BufReader::with_capacity(7, input));
        let mut out = Vec::new();
        while let Some(l) = r.next_line(|| false).unwrap() {
            out.push(l);
        }
        out
    }

    #[test]
    fn lines_split_on_newline_with_crlf_bom_and_missing_final_newline() {
        let lines = read_all(b"\xEF\xBB\xBFfirst line\r\n\nthird\tpair\nlast");
        let texts: Vec<&[u8]> = lines.iter().map(|l| l.bytes.as_slice()).collect();
        assert_eq!(
            texts,
            [&b"first line"[..], b"", b"third\tpair", b"last"],
            "{lines:?}"
        );
        assert_eq!(
            lines.iter().map(|l| l.number).collect::<Vec<_>>(),
            [1, 2, 3, 4]
        );
        assert_eq!(lines[0].len, 10);
        assert!(read_all(b"").is_empty());
        assert_eq!(read_all(b"\n").len(), 1);
    }

    #[test]
    fn an_overlong_line_is_cut_in_memory_but_measured() {
        let mut input = vec![b'a'; MAX_LINE_BYTES + 10];
        input.extend_from_slice(b"\nnext\n");
        let lines = read_all(&input);
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].bytes.len(), MAX_LINE_BYTES);
        assert_eq!(lines[0].len, MAX_LINE_BYTES + 10);
        assert_eq!(
            parse(&lines[0]),
            Err(BadLine::TooManyBytes {
                len: MAX_LINE_BYTES + 10
            })
        );
        assert_eq!(lines[1].bytes, b"next");
        assert_eq!(lines[1].number, 2);
    }

    fn raw(bytes: &[u8]) -> RawLine {
        RawLine {
            number: 1,
            bytes: bytes.to_vec(),
            len: bytes.len(),
        }
    }

    #[test]
    fn parse_sorts_good_and_bad_lines() {
        assert_eq!(
            parse(&raw(b"The cat sat.")),
            Ok(Sentence {
                text: "The cat sat.",
                pair: None
            })
        );
        assert_eq!(
            parse(&raw(b"A.\tB.")),
            Ok(Sentence {
                text: "A.",
                pair: Some("B.")
            })
        );
        assert_eq!(parse(&raw(b"")), Err(BadLine::Empty));
        assert_eq!(parse(&raw(b" \t ")), Err(BadLine::Empty));
        assert_eq!(
            parse(&raw(b"\tB.")),
            Err(BadLine::EmptyPart { which: "first" })
        );
        assert_eq!(
            parse(&raw(b"A.\t  ")),
            Err(BadLine::EmptyPart { which: "second" })
        );
        assert_eq!(parse(&raw(b"a\tb\tc")), Err(BadLine::Tabs { count: 2 }));
        assert_eq!(
            parse(&raw(b"caf\xC3\xA9 \xFF")),
            Err(BadLine::InvalidUtf8 { at: 6 })
        );
        assert_eq!(
            BadLine::InvalidUtf8 { at: 6 }.to_string(),
            "not valid UTF-8 (byte 7)"
        );
    }
}
