//! Per-head direct logit attribution (Elhage et al. 2021, "A Mathematical Framework for
//! Transformer Circuits"; TransformerLens's convention) and head ablation (Michel et al. 2019,
//! "Are Sixteen Heads Really Better than One?"; mean ablation as in Wang et al. 2022), labelled
//! for people: layers × heads of numbers at the last position, and the heads ranked. The
//! numbers come from `crate::model::lens`; when to trust them: `docs/analyses.md`.

use serde::Serialize;

use crate::model::{AblationForward, AttributionForward};

/// A token of the vocabulary, as text.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct TokenRef {
    /// Vocabulary id.
    pub id: u32,
    /// Decoded by the model's tokenizer (leading space kept).
    pub text: String,
}

/// One head and its number.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct RankedHead {
    /// Layer, from 0.
    pub layer: usize,
    /// Head, from 0.
    pub head: usize,
    /// Its value.
    pub value: f32,
}

/// How many heads the ranked lists keep.
pub const RANKED: usize = 20;

fn ranked(values: &[f32], heads: usize) -> Vec<RankedHead> {
    let mut all: Vec<RankedHead> = values
        .iter()
        .enumerate()
        .map(|(i, &value)| RankedHead {
            layer: i / heads,
            head: i % heads,
            value,
        })
        .collect();
    all.sort_by(|a, b| b.value.abs().total_cmp(&a.value.abs()));
    all.truncate(RANKED);
    all
}

fn grid(values: &[f32], heads: usize) -> Vec<Vec<f32>> {
    values.chunks(heads.max(1)).map(<[f32]>::to_vec).collect()
}

/// Each head's direct contribution to the target's logit (or to the logit difference of a
/// contrast) at the last position.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct HeadAttribution {
    /// The position taken apart (the last), from 0.
    pub position: usize,
    /// The token at that position.
    pub position_token: String,
    /// The token whose logit is taken apart (by default the model's own prediction).
    pub target: TokenRef,
    /// The token whose logit is subtracted (a contrast), if any.
    pub contrast: Option<TokenRef>,
    /// Layers.
    pub layers: usize,
    /// Heads per layer.
    pub heads: usize,
    /// `per_head[layer][head]`: the head's output at the position (Σ_j α_ij f_h(x_j), without
    /// the output bias) through the final norm frozen at the real residual, on the target's
    /// unembedding (minus the contrast's).
    pub per_head: Vec<Vec<f32>>,
    /// The embeddings' share.
    pub embeddings: f32,
    /// Each layer's other writes (output-projection bias, feed-forward block).
    pub rest: Vec<f32>,
    /// The final norm's bias through the head (0 for RMSNorm).
    pub norm_bias: f32,
    /// The logit (difference) of the whole residual, which the components above sum to,
    /// before any soft cap.
    pub logit: f32,
    /// The model's soft cap on final logits, which the components are not put through.
    pub softcap: Option<f32>,
    /// The heads with the largest |value|, largest first.
    pub ranked: Vec<RankedHead>,
    /// How the final norm is handled.
    pub convention: &'static str,
}

impl HeadAttribution {
    /// Label `forward`, the attribution at `position` (whose token is `position_token`), with
    /// `decode` (a token id → its text).
    pub fn new(
        forward: &AttributionForward,
        position: usize,
        position_token: String,
        decode: impl Fn(u32) -> String,
    ) -> HeadAttribution {
        HeadAttribution {
            position,
            position_token,
            target: TokenRef {
                id: forward.target,
                text: decode(forward.target),
            },
            contrast: forward.contrast.map(|id| TokenRef {
                id,
                text: decode(id),
            }),
            layers: forward.layers,
            heads: forward.heads,
            per_head: grid(&forward.per_head, forward.heads),
            embeddings: forward.embeddings,
            rest: forward.rest.clone(),
            norm_bias: forward.norm_bias,
            logit: forward.total,
            softcap: forward.softcap,
            ranked: ranked(&forward.per_head, forward.heads),
            convention: "final norm frozen: each component scaled by 1/σ of the whole residual \
                         at the position (TransformerLens's apply_ln_to_stack), a LayerNorm's \
                         centring applied to each, its bias counted apart",
        }
    }
}

/// The change in the target's log-probability at the last position when each head is removed.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct HeadAblation {
    /// The position read (the last), from 0.
    pub position: usize,
    /// The token at that position.
    pub position_token: String,
    /// The token whose log-probability is followed.
    pub target: TokenRef,
    /// `zero` (the head's output set to 0) or `mean` (its mean over the input's positions).
    pub mode: &'static str,
    /// The target's log-probability with every head in place.
    pub base_log_prob: f32,
    /// Layers.
    pub layers: usize,
    /// Heads per layer.
    pub heads: usize,
    /// `delta[layer][head]`: log p(target | head removed) − `base_log_prob`.
    pub delta: Vec<Vec<f32>>,
    /// The heads with the largest |delta|, largest first.
    pub ranked: Vec<RankedHead>,
}

impl HeadAblation {
    /// Label `forward` (see [`HeadAttribution::new`]).
    pub fn new(
        forward: &AblationForward,
        position: usize,
        position_token: String,
        decode: impl Fn(u32) -> String,
    ) -> HeadAblation {
        HeadAblation {
            position,
            position_token,
            target: TokenRef {
                id: forward.target,
                text: decode(forward.target),
            },
            mode: if forward.mean { "mean" } else { "zero" },
            base_log_prob: forward.base,
            layers: forward.layers,
            heads: forward.heads,
            delta: grid(&forward.delta, forward.heads),
            ranked: ranked(&forward.delta, forward.heads),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_rank_by_size_whatever_their_sign() {
        let r = ranked(&[0.1, -2.0, 0.5, 1.0], 2);
        let got: Vec<(usize, usize)> = r.iter().map(|h| (h.layer, h.head)).collect();
        assert_eq!(got, [(0, 1), (1, 1), (1, 0), (0, 0)]);
        assert_eq!(
            grid(&[1.0, 2.0, 3.0, 4.0], 2),
            [vec![1.0, 2.0], vec![3.0, 4.0]]
        );
    }
}
