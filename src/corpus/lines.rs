//! Reading the corpus one line at a time, and telling good lines from bad ones.
//!
//! Lines are read as bytes with a cap (the model's [`crate::tokenize::byte_limit`]), so a huge
//! line (or a binary file without newlines) never sits whole in memory. A line ends at `\n`; a
//! `\r` before it and a UTF-8 byte-order mark at the start of line 1 are dropped.

use std::fmt;
use std::io::{self, BufRead};

/// One line of input, as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawLine {
    /// Line number, from 1.
    pub number: usize,
    /// Its bytes without the line ending (at most the reader's limit).
    pub bytes: Vec<u8>,
    /// Length of the whole line in bytes (more than `bytes.len()` when cut).
    pub len: usize,
}

/// Reads [`RawLine`]s from a buffered reader.
pub struct LineReader<R> {
    reader: R,
    number: usize,
    max_bytes: usize,
}

impl<R: BufRead> LineReader<R> {
    /// Read lines from `reader`, keeping at most `max_bytes` of each: a longer line is
    /// measured, its bytes beyond that read and dropped, and [`parse`] calls it bad. Far above
    /// what a model input needs, so only a mistake (a binary file, a file with no newlines)
    /// hits it.
    pub fn new(reader: R, max_bytes: usize) -> Self {
        LineReader {
            reader,
            number: 0,
            max_bytes,
        }
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
            let room = self.max_bytes.saturating_sub(bytes.len());
            bytes.extend_from_slice(&chunk[..chunk.len().min(room)]);
            len += chunk.len();
            let used = newline.map_or(chunk.len(), |i| i + 1);
            self.reader.consume(used);
            if newline.is_some() {
                break;
            }
        }
        self.number += 1;
        if len <= self.max_bytes && bytes.last() == Some(&b'\r') {
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
    /// Longer than the byte limit of the model ([`crate::tokenize::byte_limit`]).
    TooManyBytes {
        /// The line's length in bytes.
        len: usize,
        /// The limit.
        limit: usize,
    },
    /// More tokens than the model takes, and `--truncate` was not given.
    TooLong {
        /// Tokens the line needs (with the special tokens).
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
            BadLine::TooManyBytes { len, limit } => write!(
                f,
                "{len} bytes long, over the limit of {limit} bytes per line for this model \
                 (even with --truncate); split it"
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
/// everything that needs no tokenizer; a line over `max_bytes` is bad.
pub fn parse(line: &RawLine, max_bytes: usize) -> Result<Sentence<'_>, BadLine> {
    if line.len > max_bytes {
        return Err(BadLine::TooManyBytes {
            len: line.len,
            limit: max_bytes,
        });
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

    const LIMIT: usize = 1000;

    fn read_all(input: &[u8]) -> Vec<RawLine> {
        let mut r = LineReader::new(io::BufReader::with_capacity(7, input), LIMIT);
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
        let mut input = vec![b'a'; LIMIT + 10];
        input.extend_from_slice(b"\nnext\n");
        let lines = read_all(&input);
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].bytes.len(), LIMIT);
        assert_eq!(lines[0].len, LIMIT + 10);
        assert_eq!(
            parse(&lines[0], LIMIT),
            Err(BadLine::TooManyBytes {
                len: LIMIT + 10,
                limit: LIMIT
            })
        );
        assert_eq!(lines[1].bytes, b"next");
        assert_eq!(lines[1].number, 2);
        // Exactly at the limit is fine.
        let lines = read_all(&vec![b'a'; LIMIT]);
        assert!(parse(&lines[0], LIMIT).is_ok());
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
            parse(&raw(b"The cat sat."), LIMIT),
            Ok(Sentence {
                text: "The cat sat.",
                pair: None
            })
        );
        assert_eq!(
            parse(&raw(b"A.\tB."), LIMIT),
            Ok(Sentence {
                text: "A.",
                pair: Some("B.")
            })
        );
        assert_eq!(parse(&raw(b""), LIMIT), Err(BadLine::Empty));
        assert_eq!(parse(&raw(b" \t "), LIMIT), Err(BadLine::Empty));
        assert_eq!(
            parse(&raw(b"\tB."), LIMIT),
            Err(BadLine::EmptyPart { which: "first" })
        );
        assert_eq!(
            parse(&raw(b"A.\t  "), LIMIT),
            Err(BadLine::EmptyPart { which: "second" })
        );
        assert_eq!(
            parse(&raw(b"a\tb\tc"), LIMIT),
            Err(BadLine::Tabs { count: 2 })
        );
        assert_eq!(
            parse(&raw(b"caf\xC3\xA9 \xFF"), LIMIT),
            Err(BadLine::InvalidUtf8 { at: 6 })
        );
        assert_eq!(
            BadLine::InvalidUtf8 { at: 6 }.to_string(),
            "not valid UTF-8 (byte 7)"
        );
    }
}
