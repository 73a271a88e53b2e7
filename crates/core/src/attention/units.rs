//! The units along one side of the attention matrices (the queries, or the keys) and the role of
//! each: what the tokenizer says a token is, never guessed from its text.

use std::ops::Range;

use serde::Serialize;

use super::display::{self, LabelScheme};

/// What a unit is, as the tokenizer defines it (from its special tokens, its post-processor and
/// its word ids; see `attnviz::tokenize`), never from matching label text. Every view, statistic
/// and export asks this, whatever the model family calls its tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The token that opens a sequence: `[CLS]` (BERT), `<s>` (RoBERTa, XLM-R, BART), BOS
    /// (Llama).
    Start,
    /// A separator or the token that ends a sequence: `[SEP]` (BERT), `</s>` (RoBERTa, T5),
    /// EOS.
    End,
    /// Padding.
    Pad,
    /// Any other special token (a language code such as mBART's `en_XX`, a chat-template
    /// marker).
    Special,
    /// An ordinary token that starts a word (a whole word, or its first piece).
    Word,
    /// An ordinary token that continues the word before it (`##ly`, `ck` after `Ġqui`).
    Piece,
}

impl Role {
    /// Every role, in the order of the enum.
    pub const ALL: [Role; 6] = [
        Role::Start,
        Role::End,
        Role::Pad,
        Role::Special,
        Role::Word,
        Role::Piece,
    ];

    /// Whether the tokenizer added (or defines) this unit as a special token rather than text.
    pub fn is_special(self) -> bool {
        matches!(self, Role::Start | Role::End | Role::Pad | Role::Special)
    }

    /// The name in JSON and the HTML report's data (`start`, `end`, `pad`, `special`, `word`,
    /// `piece`).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Start => "start",
            Role::End => "end",
            Role::Pad => "pad",
            Role::Special => "special",
            Role::Word => "word",
            Role::Piece => "piece",
        }
    }

    /// The role named `name` (as [`Role::as_str`] writes it).
    pub fn from_name(name: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.as_str() == name)
    }
}

/// The units (tokens, or words) along one side of the attention: every vector has one entry per
/// unit, except [`Units::ids`], which is empty at word level.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Units {
    /// The raw label: the token as the tokenizer's vocabulary has it (`[CLS]`, `##ly`, `Ġquick`),
    /// or at word level the word's text.
    pub labels: Vec<String>,
    /// What a person reads for each unit: the label decoded by [`Units::scheme`]'s rules
    /// (`Ġquick` → `quick`, `Ċ` → `↵`; see [`display`]). Views show these unless asked for the
    /// raw labels.
    pub display: Vec<String>,
    /// The kind of tokenizer the labels come from, which decides [`Units::display`].
    pub scheme: LabelScheme,
    /// Vocabulary id of each token; empty at word level, and for tokens whose ids are unknown
    /// (attention imported with its labels only, see `attnviz::import`).
    pub ids: Vec<u32>,
    /// Token type (segment) id the tokenizer gave each token (its first token at word level).
    pub type_ids: Vec<u32>,
    /// Which input each unit belongs to: 0 for the text (sentence A), 1 for the pair (sentence
    /// B). Taken from the tokenizer's sequence ids, so it is right for models whose token types
    /// are all 0 (RoBERTa's `<s> A </s></s> B </s>`).
    pub segments: Vec<u32>,
    /// What each unit is.
    pub roles: Vec<Role>,
    /// Word index of each unit within the whole input (sentence B's words continue after A's);
    /// `None` for special tokens.
    pub word_ids: Vec<Option<usize>>,
    /// The input text each token stands for (its offsets' slice of the text it came from), so
    /// that a word's text is the concatenation of its pieces' surfaces, trimmed; at word level
    /// the word's text. Empty for special tokens, and for pieces that share a character with the
    /// piece before them (byte-level pieces of one emoji).
    pub surfaces: Vec<String>,
    /// The range of tokens each unit covers (`i..i+1` at token level), in the order the model
    /// saw them: what a causal mask compares.
    pub spans: Vec<Range<usize>>,
    /// Whether the model generated the unit rather than read it (decoders with generation).
    pub generated: Vec<bool>,
}

impl Units {
    /// Token-level units: `labels`, `ids`, `type_ids`, `segments`, `roles`, `word_ids` and
    /// `surfaces` as the tokenizer gave them, one per token; spans `i..i+1`, none generated;
    /// display texts by the [`LabelScheme::Plain`] rules until [`Units::relabel`] names the
    /// tokenizer's kind. Lengths are checked when the units go into an [`super::Attention`].
    #[allow(clippy::too_many_arguments)]
    pub fn tokens(
        labels: Vec<String>,
        ids: Vec<u32>,
        type_ids: Vec<u32>,
        segments: Vec<u32>,
        roles: Vec<Role>,
        word_ids: Vec<Option<usize>>,
        surfaces: Vec<String>,
    ) -> Units {
        let n = labels.len();
        let display = labels
            .iter()
            .zip(&roles)
            .map(|(l, &r)| display::display_label(l, r, LabelScheme::Plain))
            .collect();
        Units {
            labels,
            display,
            scheme: LabelScheme::Plain,
            ids,
            type_ids,
            segments,
            roles,
            word_ids,
            surfaces,
            spans: (0..n).map(|i| i..i + 1).collect(),
            generated: vec![false; n],
        }
    }

    /// The same token-level units with display texts by `scheme`'s rules (see [`display`]).
    pub fn relabel(mut self, scheme: LabelScheme) -> Units {
        self.display = self
            .labels
            .iter()
            .zip(&self.roles)
            .map(|(l, &r)| display::display_label(l, r, scheme))
            .collect();
        self.scheme = scheme;
        self
    }

    /// The labels a view shows: the display texts, or with `raw` the tokenizer's own labels.
    pub fn shown(&self, raw: bool) -> &[String] {
        if raw {
            &self.labels
        } else {
            &self.display
        }
    }

    /// [`Units::shown`] with each label that occurs more than once followed by the unit's index
    /// in subscript digits (`C₇`), so that repeated tokens are told apart
    /// ([`display::positioned`]).
    pub fn named(&self, raw: bool) -> Vec<String> {
        let shown = self.shown(raw);
        display::positioned(shown, &(0..shown.len()).collect::<Vec<_>>())
    }

    /// The units before which a view draws a reaction divider: in reaction SMILES, each `>>` (and
    /// `>`, which separates reagents) between reactants and products. Empty for other text.
    pub fn reaction_arrows(&self) -> Vec<usize> {
        if self.scheme != LabelScheme::Smiles {
            return Vec::new();
        }
        (1..self.len())
            .filter(|&i| !self.is_special(i) && matches!(self.labels[i].as_str(), ">>" | ">"))
            .collect()
    }

    /// Number of units.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// Whether unit `i` is a special token.
    pub fn is_special(&self, i: usize) -> bool {
        self.roles[i].is_special()
    }

    /// The index of the first unit of the pair's second sentence, if any.
    pub fn segment_b_start(&self) -> Option<usize> {
        self.segments.iter().position(|&s| s != 0)
    }

    /// Segment label of unit `i`: `"A"` or `"B"`.
    pub fn segment_label(&self, i: usize) -> &'static str {
        if self.segments[i] == 0 {
            "A"
        } else {
            "B"
        }
    }

    /// The first generated unit, if any.
    pub fn first_generated(&self) -> Option<usize> {
        self.generated.iter().position(|&g| g)
    }

    /// The distinct labels of the units with `role`, in order of appearance (`["[CLS]"]`,
    /// `["</s>"]`): how the views name the model's own special tokens.
    pub fn labels_of(&self, role: Role) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for (label, &r) in self.labels.iter().zip(&self.roles) {
            if r == role && !out.contains(&label.as_str()) {
                out.push(label);
            }
        }
        out
    }

    /// The units at `keep`, in that order.
    pub fn select(&self, keep: &[usize]) -> Units {
        fn pick<T: Clone>(v: &[T], keep: &[usize]) -> Vec<T> {
            keep.iter().map(|&i| v[i].clone()).collect()
        }
        Units {
            labels: pick(&self.labels, keep),
            display: pick(&self.display, keep),
            scheme: self.scheme,
            ids: if self.ids.is_empty() {
                Vec::new()
            } else {
                pick(&self.ids, keep)
            },
            type_ids: pick(&self.type_ids, keep),
            segments: pick(&self.segments, keep),
            roles: pick(&self.roles, keep),
            word_ids: pick(&self.word_ids, keep),
            surfaces: pick(&self.surfaces, keep),
            spans: pick(&self.spans, keep),
            generated: pick(&self.generated, keep),
        }
    }

    /// Check that every vector has one entry per unit (`ids` too when `token_level` and they are
    /// known).
    pub(crate) fn check(&self, side: &'static str, token_level: bool) -> Result<(), UnitsMismatch> {
        let n = self.len();
        let lens = [
            ("display", self.display.len()),
            ("type_ids", self.type_ids.len()),
            ("segments", self.segments.len()),
            ("roles", self.roles.len()),
            ("word_ids", self.word_ids.len()),
            ("surfaces", self.surfaces.len()),
            ("spans", self.spans.len()),
            ("generated", self.generated.len()),
        ];
        for (name, len) in lens {
            if len != n {
                return Err(UnitsMismatch {
                    side,
                    vector: name,
                    len,
                    n,
                    of: "units",
                });
            }
        }
        if token_level && !self.ids.is_empty() && self.ids.len() != n {
            return Err(UnitsMismatch {
                side,
                vector: "ids",
                len: self.ids.len(),
                n,
                of: "tokens",
            });
        }
        Ok(())
    }

    /// Number of tokens the units cover (the end of the last span).
    pub fn token_count(&self) -> usize {
        self.spans.iter().map(|s| s.end).max().unwrap_or(0)
    }
}

/// A per-unit vector of another length than the units.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{side} {vector} has {len} entries for {n} {of}")]
pub struct UnitsMismatch {
    /// `query` or `key`.
    pub side: &'static str,
    /// The vector (`display`, `roles`, `ids`, …).
    pub vector: &'static str,
    /// Its entries.
    pub len: usize,
    /// The units (or tokens) it should have one entry for.
    pub n: usize,
    /// `units` or `tokens`.
    pub of: &'static str,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_names_round_trip_and_specials_are_the_four() {
        for r in Role::ALL {
            assert_eq!(Role::from_name(r.as_str()), Some(r));
        }
        let special: Vec<Role> = Role::ALL.into_iter().filter(|r| r.is_special()).collect();
        assert_eq!(special, [Role::Start, Role::End, Role::Pad, Role::Special]);
    }
}
