//! What a tokenizer file may cost: checked before the `tokenizers` crate builds anything from it.
//!
//! The crate trusts its input. It allocates a vocabulary and merge table of whatever size the
//! file states (10⁷ merges take 6 GB, a 10⁷-line vocab.txt 3.1 GB), expands a `Replace`
//! normalizer's content for every match (a 1 MiB content aborted on a 12.6 GB allocation), and
//! indexes a SentencePiece `precompiled_charsmap` without bounds checks (`spm_precompiled`
//! panics on an empty trie or an offset past its end). So each of those is bounded or checked
//! here, by what real tokenizers need:
//!
//! - **vocabulary** at most [`MAX_VOCAB`] (2²¹ = 2,097,152) entries and **merges** at most
//!   [`MAX_MERGES`] (2²¹): the largest public vocabularies have about 900k entries (XLM-V),
//!   the largest merge lists a few hundred thousand (Llama 3: 280k, Gemma: 514k).
//! - **tokenizer.json** at most [`MAX_TOKENIZER_JSON`] (128 MiB; Gemma's, among the largest,
//!   is 33 MB), read through the shared bounded reader, so a FIFO or device is refused.
//! - **`Replace` and `Prepend`** patterns and contents at most [`MAX_REPLACE_BYTES`] (256)
//!   bytes: real ones swap one character for another (`▁` ↔ space) or squeeze spaces.
//! - **`precompiled_charsmap`** at most [`MAX_CHARSMAP_BYTES`] (4 MiB; SentencePiece's
//!   nmt_nfkc map is 240 KB), and its double-array trie walked once: every node a lookup can
//!   reach lies inside the array and every replacement it points to inside the string table, on
//!   a character boundary.

use std::collections::HashSet;

use base64::Engine;
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

/// The most vocabulary entries read (tokenizer.json's `model.vocab`, vocab.txt's lines, a GGUF's
/// `tokenizer.ggml.tokens`).
pub const MAX_VOCAB: u64 = 1 << 21;
/// The most merges read (tokenizer.json's `model.merges`, a GGUF's `tokenizer.ggml.merges`, or
/// those rebuilt from a SentencePiece vocabulary's scores).
pub const MAX_MERGES: u64 = 1 << 21;
/// The largest tokenizer.json read.
pub const MAX_TOKENIZER_JSON: u64 = 128 << 20;
/// The largest vocab.txt (or SentencePiece model, or Marian vocab.json) read.
pub const MAX_VOCAB_FILE: u64 = 64 << 20;
/// The longest `Replace` pattern or content, or `Prepend` string.
pub const MAX_REPLACE_BYTES: usize = 256;
/// The largest `precompiled_charsmap`.
pub const MAX_CHARSMAP_BYTES: usize = 4 << 20;

/// A count over its bound: `has N entries, more than …`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("has {n} entries, more than the {max} any real tokenizer needs; the file is damaged or not a tokenizer")]
pub struct TooManyEntries {
    /// Entries found.
    pub n: u64,
    /// The most read.
    pub max: u64,
}

/// A count over its bound, naming the field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field} {entries}")]
pub struct TooMany {
    /// The field (`model.merges`, `metadata tokenizer.ggml.tokens`).
    pub field: String,
    /// The count and its bound.
    pub entries: TooManyEntries,
}

/// What is wrong with a tokenizer.json's sizes. Each variant displays as one line naming the
/// field.
#[derive(Debug, thiserror::Error)]
pub enum TokenizerJsonError {
    /// Not JSON, or not shaped as a tokenizer.json.
    #[error("not a valid tokenizer.json ({0})")]
    Json(#[source] serde_json::Error),
    /// Too many entries.
    #[error(transparent)]
    TooMany(#[from] TooMany),
    /// A `Replace` or `Prepend` string longer than [`MAX_REPLACE_BYTES`].
    #[error("{field}: a {kind} {key} of {len} bytes; real ones are a character or two (at most {MAX_REPLACE_BYTES} bytes are accepted)")]
    LongString {
        /// `normalizer`, `pre_tokenizer` or `decoder`.
        field: &'static str,
        /// The component's type (`Replace`).
        kind: String,
        /// `content`, `pattern` or `prepend`.
        key: &'static str,
        /// Its length in bytes.
        len: usize,
    },
    /// A `precompiled_charsmap` that is not base64.
    #[error("{field}: precompiled_charsmap is not base64 ({source})")]
    Base64 {
        /// The component's field.
        field: &'static str,
        /// The decoder's error.
        source: base64::DecodeError,
    },
    /// A `precompiled_charsmap` that `spm_precompiled` cannot read safely.
    #[error("{field}: precompiled_charsmap {problem}")]
    Charsmap {
        /// The component's field.
        field: &'static str,
        /// What is wrong with it.
        problem: CharsmapError,
    },
}

/// What is wrong with a SentencePiece `precompiled_charsmap` (displays after its name).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CharsmapError {
    /// More than [`MAX_CHARSMAP_BYTES`].
    #[error("is {bytes} bytes, more than {} MiB; SentencePiece's own maps are about 240 KB", MAX_CHARSMAP_BYTES >> 20)]
    TooLarge {
        /// Its size.
        bytes: usize,
    },
    /// No room for the header.
    #[error("is shorter than its 4-byte header")]
    NoHeader,
    /// A trie of no units.
    #[error("has an empty trie")]
    EmptyTrie,
    /// A trie longer than the bytes after the header.
    #[error("declares a trie of {trie_bytes} bytes, but only {follow} follow its header")]
    TrieTooLong {
        /// The trie's declared size.
        trie_bytes: usize,
        /// Bytes after the header.
        follow: usize,
    },
    /// A string table that is not UTF-8.
    #[error("has a string table that is not UTF-8")]
    NotUtf8,
    /// A node that points outside the trie.
    #[error("has a trie node pointing at unit {pos}, past its {units} units")]
    NodeOutside {
        /// The unit pointed at.
        pos: usize,
        /// The trie's units.
        units: usize,
    },
    /// A replacement outside the string table or inside a character.
    #[error("has a replacement at byte {at} of its {len}-byte string table, past its end or inside a character")]
    Replacement {
        /// Where it starts.
        at: usize,
        /// The table's length.
        len: usize,
    },
}

/// Check a tokenizer.json's sizes before the `tokenizers` crate parses it: entries are counted
/// without being kept. The error is one line naming the field.
pub fn check_tokenizer_json(bytes: &[u8]) -> Result<(), TokenizerJsonError> {
    let shape: Shape = serde_json::from_slice(bytes).map_err(TokenizerJsonError::Json)?;
    if let Some(model) = &shape.model {
        for (field, count, max) in [
            ("model.vocab", model.vocab, MAX_VOCAB),
            ("model.merges", model.merges, MAX_MERGES),
        ] {
            if let Some(Count(n)) = count {
                if n > max {
                    return Err(too_many(field, n, max).into());
                }
            }
        }
    }
    if let Some(Count(n)) = shape.added_tokens {
        if n > MAX_VOCAB {
            return Err(too_many("added_tokens", n, MAX_VOCAB).into());
        }
    }
    for (field, value) in [
        ("normalizer", &shape.normalizer),
        ("pre_tokenizer", &shape.pre_tokenizer),
        ("decoder", &shape.decoder),
    ] {
        if let Some(value) = value {
            check_components(field, value)?;
        }
    }
    Ok(())
}

/// A count over its bound, naming the field.
pub fn too_many(field: impl Into<String>, n: u64, max: u64) -> TooMany {
    TooMany {
        field: field.into(),
        entries: TooManyEntries { n, max },
    }
}

/// Walk a normalizer, pre-tokenizer or decoder (and the sequences inside it).
fn check_components(field: &'static str, value: &Value) -> Result<(), TokenizerJsonError> {
    match value {
        Value::Array(items) => items.iter().try_for_each(|v| check_components(field, v)),
        Value::Object(map) => {
            let kind = map.get("type").and_then(Value::as_str).unwrap_or("");
            let long = |key: &'static str, s: &str| -> Result<(), TokenizerJsonError> {
                if s.len() > MAX_REPLACE_BYTES {
                    return Err(TokenizerJsonError::LongString {
                        field,
                        kind: kind.to_string(),
                        key,
                        len: s.len(),
                    });
                }
                Ok(())
            };
            match kind {
                "Replace" => {
                    if let Some(Value::String(s)) = map.get("content") {
                        long("content", s)?;
                    }
                    if let Some(Value::Object(p)) = map.get("pattern") {
                        for s in p.values().filter_map(Value::as_str) {
                            long("pattern", s)?;
                        }
                    }
                }
                "Prepend" => {
                    if let Some(Value::String(s)) = map.get("prepend") {
                        long("prepend", s)?;
                    }
                }
                "Precompiled" => {
                    if let Some(Value::String(s)) = map.get("precompiled_charsmap") {
                        let bytes = base64::engine::general_purpose::STANDARD
                            .decode(s)
                            .map_err(|source| TokenizerJsonError::Base64 { field, source })?;
                        check_charsmap(&bytes)
                            .map_err(|problem| TokenizerJsonError::Charsmap { field, problem })?;
                    }
                }
                _ => {}
            }
            map.values()
                .filter(|v| v.is_array() || v.is_object())
                .try_for_each(|v| check_components(field, v))
        }
        _ => Ok(()),
    }
}

/// Check a SentencePiece `precompiled_charsmap` (`[u32 trie size][trie: u32 units][strings]`)
/// as `spm_precompiled` will read it: every trie unit a lookup can reach is inside the array,
/// and every replacement it names starts inside the UTF-8 string table on a character boundary.
/// An empty map means "no normalization" and is fine. The error says what is wrong, without the
/// field name.
pub fn check_charsmap(bytes: &[u8]) -> Result<(), CharsmapError> {
    if bytes.is_empty() {
        return Ok(());
    }
    if bytes.len() > MAX_CHARSMAP_BYTES {
        return Err(CharsmapError::TooLarge { bytes: bytes.len() });
    }
    let Some(head) = bytes.get(..4) else {
        return Err(CharsmapError::NoHeader);
    };
    let trie_bytes = u32::from_le_bytes(head.try_into().unwrap()) as usize;
    let units = trie_bytes / 4;
    let rest = &bytes[4..];
    if units == 0 {
        return Err(CharsmapError::EmptyTrie);
    }
    if units * 4 > rest.len() {
        return Err(CharsmapError::TrieTooLong {
            trie_bytes,
            follow: rest.len(),
        });
    }
    let array: Vec<usize> = rest[..units * 4]
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()) as usize)
        .collect();
    let normalized = std::str::from_utf8(&rest[units * 4..]).map_err(|_| CharsmapError::NotUtf8)?;
    // The unit layout of Darts' double array, as spm_precompiled reads it.
    let offset = |u: usize| (u >> 10) << ((u & (1 << 9)) >> 6);
    let label = |u: usize| u & ((1 << 31) | 0xFF);
    let has_leaf = |u: usize| (u >> 8) & 1 == 1;
    let value = |u: usize| u & ((1 << 31) - 1);
    let out = |pos: usize| CharsmapError::NodeOutside { pos, units };

    // Every position a lookup can stand on, visited once: what it may do next depends only on
    // the position.
    let mut seen = HashSet::new();
    let mut stack = vec![offset(array[0])];
    while let Some(node) = stack.pop() {
        if !seen.insert(node) {
            continue;
        }
        for c in 1..=255usize {
            let pos = node ^ c;
            let Some(&unit) = array.get(pos) else {
                // spm_precompiled indexes `array[pos]` for every byte of the key.
                return Err(out(pos));
            };
            if label(unit) != c {
                continue;
            }
            let next = pos ^ offset(unit);
            if has_leaf(unit) {
                let leaf = *array.get(next).ok_or_else(|| out(next))?;
                let at = value(leaf);
                if at > normalized.len() || !normalized.is_char_boundary(at) {
                    return Err(CharsmapError::Replacement {
                        at,
                        len: normalized.len(),
                    });
                }
            }
            stack.push(next);
        }
    }
    Ok(())
}

/// What tokenizer.json's sizes are checked from; everything else is skipped unread.
#[derive(Deserialize)]
struct Shape {
    #[serde(default)]
    model: Option<ModelShape>,
    #[serde(default)]
    added_tokens: Option<Count>,
    #[serde(default)]
    normalizer: Option<Value>,
    #[serde(default)]
    pre_tokenizer: Option<Value>,
    #[serde(default)]
    decoder: Option<Value>,
}

#[derive(Deserialize)]
struct ModelShape {
    #[serde(default)]
    vocab: Option<Count>,
    #[serde(default)]
    merges: Option<Count>,
}

/// The number of entries of a JSON array or object, counted without keeping them.
#[derive(Clone, Copy)]
struct Count(u64);

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Count, D::Error> {
        struct Counter;
        impl<'de> Visitor<'de> for Counter {
            type Value = Count;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an array or an object")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Count, A::Error> {
                let mut n = 0;
                while seq.next_element::<IgnoredAny>()?.is_some() {
                    n += 1;
                }
                Ok(Count(n))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Count, A::Error> {
                let mut n = 0;
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {
                    n += 1;
                }
                Ok(Count(n))
            }
            fn visit_unit<E>(self) -> Result<Count, E> {
                Ok(Count(0))
            }
        }
        d.deserialize_any(Counter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A charsmap of one mapping, `a` → `b`, laid out as Darts lays it: the root at unit 0 with
    /// offset 1 (children at 1 ^ c), the child for `a` at 1 ^ 0x61 = 0x60 with a leaf, and the
    /// leaf at 0x60 ^ offset.
    fn charsmap_a_to_b(value: u32) -> Vec<u8> {
        let mut units = vec![0u32; 256];
        units[0] = 1 << 10; // offset 1
        let child = 1 ^ 0x61;
        // label 0x61, has_leaf, offset 2 (so the leaf is at child ^ 2)
        units[child] = 0x61 | (1 << 8) | (2 << 10);
        units[child ^ 2] = (1 << 31) | value;
        let mut bytes = ((units.len() * 4) as u32).to_le_bytes().to_vec();
        for u in units {
            bytes.extend(u.to_le_bytes());
        }
        bytes.extend(b"b\0");
        bytes
    }

    #[test]
    fn a_well_formed_charsmap_passes_and_normalizes() {
        let map = charsmap_a_to_b(0);
        check_charsmap(&map).unwrap();
        let p = tokenizers::normalizers::precompiled::Precompiled::from(&map).unwrap();
        assert_eq!(p.normalize_string("cat"), "cbt");
    }

    #[test]
    fn real_charsmaps_pass() {
        // The tiny T5's and XLM-R's tokenizer.json carry maps SentencePiece wrote (1 KB: their
        // training text needed few rules).
        for model in ["tiny-t5", "tiny-xlm-roberta"] {
            let path = format!(
                "{}/../../tests/fixtures/{model}/tokenizer.json",
                env!("CARGO_MANIFEST_DIR")
            );
            let bytes = std::fs::read(path).unwrap();
            let json: Value = serde_json::from_slice(&bytes).unwrap();
            let map = json["normalizer"]["precompiled_charsmap"].as_str().unwrap();
            let map = base64::engine::general_purpose::STANDARD
                .decode(map)
                .unwrap();
            assert!(map.len() > 4, "{model}: {} bytes", map.len());
            check_charsmap(&map).unwrap();
            check_tokenizer_json(&bytes).unwrap();
        }
    }

    #[test]
    fn broken_charsmaps_are_refused_before_spm_precompiled_sees_them() {
        // An empty trie (spm_precompiled indexes unit 0 of it).
        let err = check_charsmap(&0u32.to_le_bytes()).unwrap_err().to_string();
        assert!(err.contains("empty trie"), "{err}");
        // A trie size past the end.
        let mut bytes = 4096u32.to_le_bytes().to_vec();
        bytes.extend([0; 8]);
        assert!(check_charsmap(&bytes)
            .unwrap_err()
            .to_string()
            .contains("only 8 follow"));
        // A root offset pointing past the array.
        let mut map = charsmap_a_to_b(0);
        map[4..8].copy_from_slice(&(1000u32 << 10).to_le_bytes());
        assert!(check_charsmap(&map)
            .unwrap_err()
            .to_string()
            .contains("past its 256 units"));
        // A replacement past the string table, and one inside a character.
        let err = check_charsmap(&charsmap_a_to_b(99))
            .unwrap_err()
            .to_string();
        assert!(err.contains("byte 99 of its 2-byte string table"), "{err}");
        let mut map = charsmap_a_to_b(1);
        let n = map.len();
        map.splice(n - 2.., "é\0".bytes());
        assert!(check_charsmap(&map)
            .unwrap_err()
            .to_string()
            .contains("byte 1 of its 3-byte"));
    }

    #[test]
    fn tokenizer_json_counts_and_replacements_are_bounded() {
        let merges: Vec<String> = (0..MAX_MERGES + 1).map(|_| String::new()).collect();
        let json =
            serde_json::json!({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": merges}});
        let err = check_tokenizer_json(json.to_string().as_bytes())
            .unwrap_err()
            .to_string();
        assert!(err.contains("model.merges has 2097153 entries"), "{err}");

        let json = serde_json::json!({"normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Replace", "pattern": {"String": "a"}, "content": "x".repeat(257)}]}});
        let err = check_tokenizer_json(json.to_string().as_bytes())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("normalizer: a Replace content of 257 bytes"),
            "{err}"
        );

        let ok = serde_json::json!({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
            "decoder": {"type": "Replace", "pattern": {"String": "\u{2581}"}, "content": " "}});
        check_tokenizer_json(ok.to_string().as_bytes()).unwrap();
    }
}
