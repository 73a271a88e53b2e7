//! The per-unit metadata of an [`Attention`], detached from its weights, so the word merge and the
//! special-token exclusion can run on any stack of `n × n` matrices (attention heads, or the
//! per-layer rollout) with one implementation.

use std::ops::Range;

use crate::attention::{Attention, Level};

/// Labels and per-unit vectors of an [`Attention`]; all have one entry per unit, except
/// `input_ids`, which is empty at word level.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Units {
    pub level: Level,
    pub special_excluded: bool,
    pub tokens: Vec<String>,
    pub input_ids: Vec<u32>,
    pub token_type_ids: Vec<u32>,
    pub special: Vec<bool>,
    pub spans: Vec<Range<usize>>,
    pub word_ids: Vec<Option<usize>>,
}

impl Units {
    pub fn of(att: &Attention) -> Self {
        Units {
            level: att.level,
            special_excluded: att.special_excluded,
            tokens: att.tokens.clone(),
            input_ids: att.input_ids.clone(),
            token_type_ids: att.token_type_ids.clone(),
            special: att.special.clone(),
            spans: att.spans.clone(),
            word_ids: att.word_ids.clone(),
        }
    }

    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Build the derived [`Attention`] with these units and `weights`.
    ///
    /// Units and weights come from our own transforms of a checked value, so a shape error here
    /// is a bug in this module, not bad input.
    pub fn into_attention(self, from: &Attention, weights: Vec<f32>) -> Attention {
        from.derive(
            self.level,
            self.tokens,
            self.input_ids,
            self.token_type_ids,
            self.special,
            self.spans,
            self.word_ids,
            self.special_excluded,
            weights,
        )
        .expect("analysis transforms keep per-unit vectors and weights consistent")
    }
}
