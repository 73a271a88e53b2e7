//! Roles, segments, words and surfaces of tokens, from what the tokenizer itself says.
//!
//! Nothing here looks at a token's label. The special tokens come from the tokenizer's own
//! definitions: the names in `tokenizer_config.json` / `special_tokens_map.json` (`cls_token`,
//! `bos_token`, `sep_token`, `eos_token`, `pad_token`, …), the post-processor that adds them
//! (BERT's and RoBERTa's processors name their cls and sep; a template puts tokens before or
//! after each sequence), the added-vocabulary tokens marked special, and the encoding's
//! special-tokens mask. Words come from the encoding's word ids, refined by its offsets into the
//! text: a token that starts after whitespace starts a word even when the tokenizer's
//! pre-tokenizer does not split there (Llama's SentencePiece numbers a whole sentence as one
//! word). The text of a word is the text its tokens' offsets cover, so merging works the same
//! for WordPiece (`##`), byte-level BPE (`Ġ`) and SentencePiece (`▁`) without knowing any of
//! those marks.

use std::collections::HashSet;

use serde_json::Value;
use tokenizers::{Encoding, Tokenizer};

use super::config::TokenizerConfig;

use crate::attention::Role;

/// The ids of a tokenizer's special tokens, by role.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpecialIds {
    /// Sequence start: the cls and bos tokens.
    pub start: HashSet<u32>,
    /// Separator or sequence end: the sep and eos tokens.
    pub end: HashSet<u32>,
    /// Padding.
    pub pad: HashSet<u32>,
    /// Every other special token of the vocabulary (language codes, sentinels, chat markers).
    pub other: HashSet<u32>,
    /// Tokens the vocabulary marks special that stand for text when they occur in it: the
    /// unknown token and the mask token (a `[MASK]` fills a word's place).
    pub ordinary: HashSet<u32>,
}

/// The special-token names of a model's tokenizer_config.json and special_tokens_map.json
/// (the first wins), each a string or `{"content": …}`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TokenNames {
    /// `cls_token`, `bos_token`.
    pub start: Vec<String>,
    /// `sep_token`, `eos_token`.
    pub end: Vec<String>,
    /// `pad_token`.
    pub pad: Vec<String>,
    /// `unk_token`, `mask_token`.
    pub ordinary: Vec<String>,
    /// `additional_special_tokens`, `extra_special_tokens`.
    pub other: Vec<String>,
}

impl TokenNames {
    /// The names a tokenizer folder's settings give (tokenizer_config.json first, then
    /// special_tokens_map.json).
    pub fn from_config(config: &TokenizerConfig) -> TokenNames {
        let one = |key: &str| -> Vec<String> { config.special(key).into_iter().collect() };
        TokenNames {
            start: [one("cls_token"), one("bos_token")].concat(),
            end: [one("sep_token"), one("eos_token")].concat(),
            pad: one("pad_token"),
            ordinary: [one("unk_token"), one("mask_token")].concat(),
            other: [
                config.specials("additional_special_tokens"),
                config.specials("extra_special_tokens"),
            ]
            .concat(),
        }
    }

    fn is_empty(&self) -> bool {
        self.start.is_empty() && self.end.is_empty() && self.pad.is_empty()
    }
}

impl SpecialIds {
    /// The special tokens of `tokenizer`, named by `names` where the model's config names them,
    /// else by where its post-processor puts them.
    pub fn of(tokenizer: &Tokenizer, names: &TokenNames) -> SpecialIds {
        let id = |t: &String| tokenizer.token_to_id(t);
        let ids = |v: &[String]| -> HashSet<u32> { v.iter().filter_map(id).collect() };
        let mut s = SpecialIds {
            start: ids(&names.start),
            end: ids(&names.end),
            pad: ids(&names.pad),
            other: ids(&names.other),
            ordinary: ids(&names.ordinary),
        };
        let (pp_start, pp_end, pp_other) = post_processor_tokens(tokenizer);
        let named = !names.is_empty();
        for t in pp_start {
            if !s.knows(t) {
                s.start.insert(t);
            }
        }
        for t in pp_end {
            if !s.knows(t) {
                // With the config's names, a token after the sequence that it does not call sep
                // or eos (mBART's language code) is some other special token.
                if named && !s.end.is_empty() {
                    s.other.insert(t);
                } else {
                    s.end.insert(t);
                }
            }
        }
        for t in pp_other {
            if !s.knows(t) {
                s.other.insert(t);
            }
        }
        for (t, added) in tokenizer.get_added_tokens_decoder() {
            if added.special && !s.knows(t) {
                s.other.insert(t);
            }
        }
        // A token that is both unknown and a sequence marker (GPT-2's <|endoftext|>) is a
        // marker.
        let markers: HashSet<u32> = s
            .start
            .iter()
            .chain(&s.end)
            .chain(&s.pad)
            .copied()
            .collect();
        s.ordinary.retain(|t| !markers.contains(t));
        s.other
            .retain(|t| !markers.contains(t) && !s.ordinary.contains(t));
        s
    }

    fn knows(&self, t: u32) -> bool {
        self.start.contains(&t)
            || self.end.contains(&t)
            || self.pad.contains(&t)
            || self.other.contains(&t)
            || self.ordinary.contains(&t)
    }

    /// The role of a special token `id` (one the mask marks, or one of the vocabulary's
    /// specials found in the text), or `None` for one that stands for text. `first` says
    /// whether it opens its sequence: a token that is both start and end (GPT-2's
    /// `<|endoftext|>`) starts a sequence there and ends one anywhere else.
    pub(crate) fn role(&self, id: u32, marked: bool, first: bool) -> Option<Role> {
        let (start, end) = (self.start.contains(&id), self.end.contains(&id));
        if start && (first || !end) {
            Some(Role::Start)
        } else if end {
            Some(Role::End)
        } else if self.pad.contains(&id) {
            Some(Role::Pad)
        } else if self.other.contains(&id) || (marked && !self.ordinary.contains(&id)) {
            Some(Role::Special)
        } else {
            None
        }
    }
}

/// The special tokens the post-processor adds: before the first sequence (starts), right after a
/// sequence (ends), and anywhere else (others), by id.
fn post_processor_tokens(tokenizer: &Tokenizer) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
    let Some(pp) = tokenizer.get_post_processor() else {
        return Default::default();
    };
    let Ok(json) = serde_json::to_value(pp) else {
        return Default::default();
    };
    let mut out = (Vec::new(), Vec::new(), Vec::new());
    collect_post_processor(&json, tokenizer, &mut out);
    out
}

fn collect_post_processor(
    json: &Value,
    tokenizer: &Tokenizer,
    out: &mut (Vec<u32>, Vec<u32>, Vec<u32>),
) {
    let pair_id = |v: &Value| v.get(1).and_then(Value::as_u64).map(|i| i as u32);
    match json.get("type").and_then(Value::as_str) {
        Some("BertProcessing") | Some("RobertaProcessing") => {
            out.0.extend(json.get("cls").and_then(pair_id));
            out.1.extend(json.get("sep").and_then(pair_id));
        }
        Some("TemplateProcessing") => {
            // The ids of a template's special token by its name in `special_tokens`.
            let ids = |name: &str| -> Vec<u32> {
                let from_map = json
                    .get("special_tokens")
                    .and_then(|m| m.get(name))
                    .and_then(|t| t.get("ids"))
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|i| i.as_u64().map(|i| i as u32))
                            .collect::<Vec<_>>()
                    });
                from_map.unwrap_or_else(|| tokenizer.token_to_id(name).into_iter().collect())
            };
            for key in ["single", "pair"] {
                let Some(pieces) = json.get(key).and_then(Value::as_array) else {
                    continue;
                };
                let mut seen_sequence = false;
                let mut after_sequence = false;
                for piece in pieces {
                    if piece.get("Sequence").is_some() {
                        seen_sequence = true;
                        after_sequence = true;
                        continue;
                    }
                    let Some(name) = piece
                        .get("SpecialToken")
                        .and_then(|t| t.get("id"))
                        .and_then(Value::as_str)
                    else {
                        continue;
                    };
                    let target = if !seen_sequence {
                        &mut out.0
                    } else if after_sequence {
                        &mut out.1
                    } else {
                        &mut out.2
                    };
                    target.extend(ids(name));
                    after_sequence = false;
                }
            }
        }
        Some("Sequence") => {
            for p in json
                .get("processors")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                collect_post_processor(p, tokenizer, out);
            }
        }
        _ => {}
    }
}

/// Per-token roles, segments, word ids and surfaces of one encoding of `texts` (the text, and
/// the pair's second sentence).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenInfo {
    /// What each token is.
    pub roles: Vec<Role>,
    /// 0 for the text, 1 for the pair.
    pub segments: Vec<u32>,
    /// Word index across the whole input; `None` for special tokens.
    pub word_ids: Vec<Option<usize>>,
    /// The text each token stands for (see [`crate::attention::Units::surfaces`]).
    pub surfaces: Vec<String>,
}

/// Work out [`TokenInfo`] for `enc`, an encoding of `texts[0]` (and `texts[1]`).
pub fn token_info(enc: &Encoding, texts: &[&str], specials: &SpecialIds) -> TokenInfo {
    let n = enc.len();
    let ids = enc.get_ids();
    let mask = enc.get_special_tokens_mask();
    let sequences = enc.get_sequence_ids();
    let offsets = enc.get_offsets();
    let tok_words = enc.get_word_ids();

    // Roles of special tokens first: they decide where words stop.
    let mut special: Vec<Option<Role>> = (0..n)
        .map(|i| {
            let first = i == 0 || sequences[i - 1] != sequences[i] && sequences[i].is_some();
            specials.role(ids[i], mask[i] != 0, first)
        })
        .collect();
    // A token the mask marks is never text, even with an id we could not place.
    for i in 0..n {
        if mask[i] != 0 && special[i].is_none() {
            special[i] = Some(Role::Special);
        }
    }

    let segments = segments(&sequences, &special);
    let text_of = |i: usize| -> &str { texts.get(segments[i] as usize).copied().unwrap_or("") };
    let (mut roles, mut word_ids, mut surfaces) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let mut words = 0usize;
    // The previous ordinary token of the current run: its index and where its text ends.
    let mut prev: Option<(usize, usize)> = None;
    for i in 0..n {
        if let Some(role) = special[i] {
            roles.push(role);
            word_ids.push(None);
            surfaces.push(String::new());
            prev = None;
            continue;
        }
        let text = text_of(i);
        let (start, end) = offsets[i];
        let prev_in_run = prev.filter(|&(p, _)| segments[p] == segments[i]);
        let from = prev_in_run.map_or(start, |(_, e)| start.max(e));
        let surface = text.get(from..end.max(from)).unwrap_or("").to_string();
        let new_word = match prev_in_run {
            None => true,
            Some((p, p_end)) => {
                let gap = text.get(p_end..start).unwrap_or("");
                // The token before, as its own offsets cover it: a lone space (Llama's `▁`
                // before `▁f` in "a  fox") belongs to the word after it.
                let (ps, pe) = offsets[p];
                let prev_text = text.get(ps..pe).unwrap_or("");
                let prev_space =
                    !prev_text.is_empty() && prev_text.chars().all(char::is_whitespace);
                tok_words[p] != tok_words[i]
                    || gap.chars().any(char::is_whitespace)
                    || (surface.starts_with(char::is_whitespace) && !prev_space)
            }
        };
        if new_word {
            words += 1;
        }
        roles.push(if new_word { Role::Word } else { Role::Piece });
        word_ids.push(Some(words - 1));
        surfaces.push(surface);
        prev = Some((i, prev_in_run.map_or(end, |(_, e)| e.max(end))));
    }
    TokenInfo {
        roles,
        segments,
        word_ids,
        surfaces,
    }
}

/// The segment (0 = text, 1 = pair) of every token: its sequence id, or for a special token
/// (which has none) the sequence it belongs to. Specials before the first sequence open it,
/// after the last close it; between two sequences the first end token closes the one before
/// (BERT's `[SEP]`, RoBERTa's first `</s>`) and the rest open the next (RoBERTa's second
/// `</s>`, Llama's `<s>` before sentence B).
fn segments(sequences: &[Option<usize>], special: &[Option<Role>]) -> Vec<u32> {
    let n = sequences.len();
    let content = |i: usize| special[i].is_none().then_some(sequences[i]).flatten();
    let mut out = vec![0u32; n];
    let mut i = 0;
    while i < n {
        if let Some(s) = content(i).or(if special[i].is_none() {
            sequences[i]
        } else {
            None
        }) {
            out[i] = s as u32;
            i += 1;
            continue;
        }
        // A run of tokens without a sequence of their own.
        let run_start = i;
        while i < n && content(i).is_none() {
            i += 1;
        }
        let before = (0..run_start).rev().find_map(content);
        let after = (i..n).find_map(content);
        let mut closed = false;
        for j in run_start..i {
            out[j] = match (before, after) {
                (Some(b), Some(a)) if a != b => {
                    if !closed && special[j] == Some(Role::End) {
                        closed = true;
                        b as u32
                    } else {
                        a as u32
                    }
                }
                (Some(b), _) => b as u32,
                (None, Some(a)) => a as u32,
                (None, None) => sequences[j].unwrap_or(0) as u32,
            };
        }
    }
    out
}
