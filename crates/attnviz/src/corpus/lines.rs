//! Reading the corpus one line at a time, and telling good lines from bad ones.
//!
//! Lines are read as bytes with a cap (the model's [`crate::tokenize::byte_limit`]), so a huge
//! line (or a binary file without newlines) never sits whole in memory. A line ends at `\n`; a
//! `\r` before it and a UTF-8 byte-order mark at the start of line 1 are dropped. Every byte
//! consumed goes through a SHA-256, so a run can name (and a resumed run check) exactly what it
//! read.
//!
//! A line is plain text (a sentence, or a tab-separated pair: [`parse`]) or a JSON Lines record
//! (`text`, optional `pair`, optional `id`: [`parse_json`]).

use std::borrow::Cow;
use std::fmt;
use std::io::{self, BufRead};

use sha2::{Digest, Sha256};

use super::ids::{BadId, Id};

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
    hash: Sha256,
    bytes: u64,
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
            hash: Sha256::new(),
            bytes: 0,
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
            self.hash.update(&available[..used]);
            self.bytes += used as u64;
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

/// The SHA-256 of the input read so far (running, or as an earlier run recorded it), and its
/// length.
#[derive(Clone, Debug)]
pub struct InputDigest {
    hash: Hash,
    /// Bytes read.
    pub bytes: u64,
}

/// A digest still running over what is read, or one an earlier run wrote down (hex).
#[derive(Clone, Debug)]
enum Hash {
    Running(Sha256),
    Recorded(String),
}

impl InputDigest {
    /// Nothing read.
    pub fn empty() -> Self {
        InputDigest {
            hash: Hash::Running(Sha256::new()),
            bytes: 0,
        }
    }

    /// A digest as written down (`hex`, of `bytes` bytes).
    pub fn recorded(hex: String, bytes: u64) -> Self {
        InputDigest {
            hash: Hash::Recorded(hex),
            bytes,
        }
    }

    /// The SHA-256 of the bytes read (`None` for a recorded digest that is not 64 hex digits).
    pub fn sha256(&self) -> Option<[u8; 32]> {
        match &self.hash {
            Hash::Running(h) => Some(h.clone().finalize().into()),
            Hash::Recorded(recorded) => {
                let bytes = recorded.as_bytes();
                if bytes.len() != 64 {
                    return None;
                }
                let mut out = [0u8; 32];
                for (o, pair) in out.iter_mut().zip(bytes.chunks(2)) {
                    *o = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
                }
                Some(out)
            }
        }
    }

    /// A digest as a journal records it: the SHA-256 of `bytes` bytes.
    pub fn from_sha256(sha256: &[u8; 32], bytes: u64) -> Self {
        InputDigest::recorded(hex(sha256), bytes)
    }

    /// The SHA-256 of the bytes read, in hex (what `sha256sum` prints for them).
    pub fn hex(&self) -> String {
        match &self.hash {
            Hash::Running(h) => hex(&h.clone().finalize()),
            Hash::Recorded(recorded) => recorded.clone(),
        }
    }
}

impl PartialEq for InputDigest {
    fn eq(&self, other: &Self) -> bool {
        self.bytes == other.bytes && self.hex() == other.hex()
    }
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

impl<R> LineReader<R> {
    /// The most bytes of a line kept.
    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// Lines read so far.
    pub fn lines(&self) -> usize {
        self.number
    }

    /// The SHA-256 and length of every byte consumed so far (through the end of the last line
    /// returned).
    pub fn digest(&self) -> InputDigest {
        InputDigest {
            hash: Hash::Running(self.hash.clone()),
            bytes: self.bytes,
        }
    }
}

/// Why a line cannot be used. Displays as the reason, in a few words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BadLine {
    /// Empty, or only whitespace.
    Empty,
    /// A JSON Lines record whose `text` is empty or only whitespace.
    EmptyText,
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
    /// A pair (JSON Lines' `pair`) for an encoder–decoder, which reads one source text.
    PairForEncoderDecoder,
    /// No target, in a run whose lines carry targets (encoder–decoders).
    NoTarget,
    /// A target, but the model is no encoder–decoder, or the run's lines carry none (its
    /// first line had none).
    TargetUnsupported {
        /// The model is an encoder–decoder (so the run has no targets).
        seq2seq: bool,
    },
    /// A target the decoder cannot read (empty, too long, no tokens).
    Target(String),
    /// The tokenizer failed.
    Tokenizer(String),
    /// The model's attention for this line is not a set of probability distributions (NaN,
    /// inf, or rows that do not sum to 1: the weights overflow on it).
    Attention(String),
    /// A JSON Lines record that is not a JSON object with a `text` string.
    Json(String),
    /// An image line (a vision model's corpus) whose picture cannot be read: missing, not a
    /// regular file, corrupt, too large, animated.
    Image(String),
    /// A bad line as a partial file recorded it: its kind (one of [`BadLine::KINDS`]) and reason.
    Recorded {
        /// [`BadLine::kind`].
        kind: &'static str,
        /// Its message.
        reason: String,
    },
    /// A JSON Lines record whose `id` cannot name a file.
    Id(BadId),
    /// A JSON Lines record whose output name is already taken by an earlier line.
    DuplicateName {
        /// The name (the id, or the line number for a record without one).
        name: String,
        /// The line that took it.
        first: usize,
        /// The name is this line's id (else its line number).
        this_from_id: bool,
        /// The name is the id of the first line (else its line number).
        first_from_id: bool,
    },
}

impl BadLine {
    /// Every [`BadLine::kind`].
    pub const KINDS: [&'static str; 15] = [
        "empty",
        "tabs",
        "invalid-utf8",
        "too-long",
        "no-tokens",
        "pair-unsupported",
        "tokenizer",
        "bad-attention",
        "bad-json",
        "bad-id",
        "duplicate-id",
        "no-target",
        "target-unsupported",
        "bad-target",
        "bad-image",
    ];

    /// The kind named `kind` (one of [`BadLine::KINDS`]), as a static name.
    pub fn kind_named(kind: &str) -> Option<&'static str> {
        Self::KINDS.into_iter().find(|k| *k == kind)
    }

    /// A short fixed name for counting, as used in `corpus_stats.json`.
    pub fn kind(&self) -> &'static str {
        match self {
            BadLine::Empty | BadLine::EmptyText | BadLine::EmptyPart { .. } => "empty",
            BadLine::Tabs { .. } => "tabs",
            BadLine::InvalidUtf8 { .. } => "invalid-utf8",
            BadLine::TooManyBytes { .. } | BadLine::TooLong { .. } => "too-long",
            BadLine::NoTokens => "no-tokens",
            BadLine::PairUnsupported | BadLine::PairForEncoderDecoder => "pair-unsupported",
            BadLine::Tokenizer(_) => "tokenizer",
            BadLine::Attention(_) => "bad-attention",
            BadLine::Json(_) => "bad-json",
            BadLine::Id(_) => "bad-id",
            BadLine::DuplicateName { .. } => "duplicate-id",
            BadLine::NoTarget => "no-target",
            BadLine::TargetUnsupported { .. } => "target-unsupported",
            BadLine::Target(_) => "bad-target",
            BadLine::Image(_) => "bad-image",
            BadLine::Recorded { kind, .. } => kind,
        }
    }
}

impl fmt::Display for BadLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadLine::Empty => f.write_str("empty line"),
            BadLine::EmptyText => f.write_str("empty \"text\""),
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
                 (even when truncating); split it"
            ),
            BadLine::TooLong { tokens, max } => write!(
                f,
                "{tokens} tokens, but the model takes at most {max}; shorten it or truncate it"
            ),
            BadLine::NoTokens => f.write_str("no tokens the model can read"),
            BadLine::PairUnsupported => f.write_str(
                "a tab-separated pair, but the model has a single segment type and cannot encode pairs",
            ),
            BadLine::PairForEncoderDecoder => f.write_str(
                "a \"pair\", but an encoder–decoder model reads one source text: give the \
                 output to teacher-force as \"target\"",
            ),
            BadLine::NoTarget => f.write_str(
                "no target; the run teacher-forces a target on every line (its first line has \
                 one): give each line its target after a tab, or as \"target\" in JSON Lines",
            ),
            BadLine::TargetUnsupported { seq2seq: false } => f.write_str(
                "a target, but targets are for encoder–decoder models (BART, T5, Marian)",
            ),
            BadLine::TargetUnsupported { seq2seq: true } => f.write_str(
                "a target, but the run's first line has none, so the run reads no targets: give \
                 every line a target, or none",
            ),
            BadLine::Target(e) => f.write_str(e),
            BadLine::Tokenizer(e) => write!(f, "tokenization failed: {e}"),
            BadLine::Attention(e) => f.write_str(e),
            BadLine::Json(e) => f.write_str(e),
            BadLine::Image(e) => f.write_str(e),
            BadLine::Recorded { reason, .. } => f.write_str(reason),
            BadLine::Id(e) => write!(f, "{e}"),
            BadLine::DuplicateName {
                name,
                first,
                this_from_id: true,
                first_from_id: true,
            } => write!(
                f,
                "id \"{name}\" is already used by line {first} (ids name the output files, so \
                 they must be unique, ignoring case)"
            ),
            BadLine::DuplicateName {
                name,
                first,
                this_from_id: true,
                ..
            } => write!(
                f,
                "id \"{name}\" is the output name of line {first}, which has no id and is named \
                 by its number; ids must be unique"
            ),
            BadLine::DuplicateName { name, first, .. } => write!(
                f,
                "its output name {name} (its line number) is already the id of line {first}; \
                 give it an id"
            ),
        }
    }
}

/// A line's text: one sentence, or a pair.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sentence<'a> {
    /// The sentence (sentence A of a pair).
    pub text: Cow<'a, str>,
    /// Sentence B of a pair (in plain text: the second column).
    pub pair: Option<Cow<'a, str>>,
    /// The target an encoder–decoder is teacher-forced with (JSON Lines' `target`; in plain
    /// text, the second column is read as the target for an encoder–decoder).
    pub target: Option<Cow<'a, str>>,
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
    Ok(Sentence {
        text: Cow::Borrowed(a),
        pair: b.map(Cow::Borrowed),
        target: None,
    })
}

/// A JSON Lines record, as far as it was read: the output name it claims comes first, so that
/// it is claimed whether or not the rest of the record is usable (see [`super::ids`]).
#[derive(Debug)]
pub struct JsonLine<'a> {
    /// `id`, checked; `None` when the record has none (or it is `null`).
    pub id: Option<Id>,
    /// The sentence, or why it cannot be used.
    pub sentence: Result<Sentence<'a>, BadLine>,
}

#[derive(serde::Deserialize)]
struct Record<'a> {
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pair: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    target: Option<Cow<'a, str>>,
    #[serde(default)]
    id: Option<serde_json::Value>,
}

/// Read a JSON Lines record: `{"text": "…", "pair": "…", "id": "…"}`, other fields ignored.
/// `max_line` bounds the record, `max_text` the text and pair together (as a plain line's
/// `text<TAB>pair`). Errors for what makes the whole record unreadable (so no name is claimed).
pub fn parse_json(
    line: &RawLine,
    max_line: usize,
    max_text: usize,
) -> Result<JsonLine<'_>, BadLine> {
    if line.len > max_line {
        return Err(BadLine::TooManyBytes {
            len: line.len,
            limit: max_line,
        });
    }
    let text = std::str::from_utf8(&line.bytes).map_err(|e| BadLine::InvalidUtf8 {
        at: e.valid_up_to(),
    })?;
    if text.trim().is_empty() {
        return Err(BadLine::Empty);
    }
    if !text.trim_start().starts_with('{') {
        return Err(BadLine::Json(
            "not a JSON object; each line is {\"text\": \"…\"} with optional \"pair\", \"target\" and \"id\""
                .into(),
        ));
    }
    let record: Record = serde_json::from_str(text).map_err(|e| {
        BadLine::Json(match e.classify() {
            serde_json::error::Category::Data => format!(
                "not a JSON Lines record ({e}); each line is {{\"text\": \"…\"}} with optional \
                 \"pair\", \"target\" and \"id\" strings"
            ),
            _ => format!("not valid JSON ({e})"),
        })
    })?;
    let id = match record.id {
        None | Some(serde_json::Value::Null) => None,
        Some(v) => Some(Id::from_json(&v).map_err(BadLine::Id)?),
    };
    let sentence = (|| {
        let Some(a) = record.text else {
            return Err(BadLine::Json(
                "no \"text\" field; each line is {\"text\": \"…\"} with optional \"pair\", \
                 \"target\" and \"id\""
                    .into(),
            ));
        };
        let len = a.len()
            + record.pair.as_ref().map_or(0, |b| b.len() + 1)
            + record.target.as_ref().map_or(0, |t| t.len() + 1);
        if len > max_text {
            return Err(BadLine::TooManyBytes {
                len,
                limit: max_text,
            });
        }
        if a.trim().is_empty() {
            return Err(match &record.pair {
                Some(_) => BadLine::EmptyPart { which: "first" },
                None => BadLine::EmptyText,
            });
        }
        if record.pair.as_ref().is_some_and(|b| b.trim().is_empty()) {
            return Err(BadLine::EmptyPart { which: "second" });
        }
        if record.target.as_ref().is_some_and(|t| t.trim().is_empty()) {
            return Err(BadLine::Target("the \"target\" is empty".into()));
        }
        Ok(Sentence {
            text: a,
            pair: record.pair,
            target: record.target,
        })
    })();
    Ok(JsonLine { id, sentence })
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
                text: "The cat sat.".into(),
                pair: None,
                target: None
            })
        );
        assert_eq!(
            parse(&raw(b"A.\tB."), LIMIT),
            Ok(Sentence {
                text: "A.".into(),
                pair: Some("B.".into()),
                target: None
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

    #[test]
    fn the_digest_covers_every_byte_consumed() {
        let input = b"\xEF\xBB\xBFone\r\ntwo\n\nlast";
        let mut r = LineReader::new(io::BufReader::with_capacity(3, &input[..]), 4);
        let empty = r.digest().hex();
        assert_eq!(
            empty,
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        r.next_line(|| false).unwrap();
        assert_eq!(r.digest().bytes, 8);
        assert_eq!(r.digest().hex(), hex(&Sha256::digest(&input[..8])));
        while r.next_line(|| false).unwrap().is_some() {}
        assert_eq!(r.lines(), 4);
        assert_eq!(r.digest().bytes, input.len() as u64);
        assert_eq!(r.digest().hex(), hex(&Sha256::digest(input)));
    }

    #[test]
    fn json_lines_records_are_read_and_checked() {
        let line = raw(br#"{"text": "A \"cat\".", "pair": "B\tC", "id": "x-1", "meta": [1]}"#);
        let ok = parse_json(&line, LIMIT, LIMIT).unwrap();
        assert_eq!(ok.id.unwrap().as_str(), "x-1");
        let s = ok.sentence.unwrap();
        assert_eq!(
            (s.text.as_ref(), s.pair.as_deref()),
            ("A \"cat\".", Some("B\tC"))
        );
        let line = raw(br#"{"text": "src", "target": "tgt"}"#);
        let s = parse_json(&line, LIMIT, LIMIT).unwrap().sentence.unwrap();
        assert_eq!(
            (s.text.as_ref(), s.pair.as_deref(), s.target.as_deref()),
            ("src", None, Some("tgt"))
        );
        let line = raw(br#"{"text": "src", "target": " "}"#);
        let bad = parse_json(&line, LIMIT, LIMIT)
            .unwrap()
            .sentence
            .unwrap_err();
        assert_eq!(bad.kind(), "bad-target");
        let line = raw(br#"{"text": "a", "id": 17}"#);
        let numeric = parse_json(&line, LIMIT, LIMIT).unwrap();
        assert_eq!(numeric.id.unwrap().as_str(), "17");
        let line = raw(br#"{"text": "a", "id": null}"#);
        assert!(parse_json(&line, LIMIT, LIMIT).unwrap().id.is_none());

        let kind = |line: &[u8]| match parse_json(&raw(line), LIMIT, 20) {
            Err(bad) => bad.kind(),
            Ok(j) => j.sentence.err().map_or("ok", |b| b.kind()),
        };
        assert_eq!(kind(b"{\"text\": \"a\""), "bad-json");
        assert_eq!(kind(b"[\"a\"]"), "bad-json");
        assert_eq!(kind(b"{\"text\": 3}"), "bad-json");
        assert_eq!(kind(b"{\"txt\": \"a\"}"), "bad-json");
        assert_eq!(kind(b"{\"text\": \"a\", \"id\": \"../x\"}"), "bad-id");
        assert_eq!(kind(b"{\"text\": \" \"}"), "empty");
        assert_eq!(kind(b"{\"text\": \"a\", \"pair\": \"\"}"), "empty");
        assert_eq!(kind(b"{\"text\": \"aaaaaaaaaaaaaaaaaaaaa\"}"), "too-long");
        assert_eq!(kind(b"{\"text\": \"caf\xff\"}"), "invalid-utf8");
        assert_eq!(kind(b""), "empty");
        // A record too long to read whole claims nothing.
        assert!(parse_json(&raw(&[b'x'; 30]), 20, 20).is_err());
        // A bad text keeps the id (it is claimed anyway).
        let line = raw(br#"{"text": "", "id": "k"}"#);
        let j = parse_json(&line, LIMIT, LIMIT).unwrap();
        assert!(j.id.is_some() && j.sentence.is_err());
    }
}
