//! A hybrid model's `non_softmax` section (`docs/json.md`, "Token mixing"): which of its layers
//! mix tokens without a softmax (Qwen3-Next's gated delta layers), and, when the run captured
//! them, each such layer's exact token-mixing matrices per head. They are not attention
//! probabilities: rows need not sum to 1 and entries may be negative.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::attention::{Mixing, MixingLayer, MixingShapeError, NonSoftmaxLayers};

/// What is wrong with a `non_softmax` section.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MixingDocError {
    /// A layer whose matrices are not `heads` square ones of one row and column per token.
    #[error("layer {layer}: weights need {heads} heads of {tokens} rows of {tokens} values")]
    Rows {
        /// The layer's number.
        layer: usize,
        /// Heads wanted.
        heads: usize,
        /// Tokens wanted.
        tokens: usize,
    },
    /// Mixing matrices of a layer the section does not list.
    #[error("mixing of layer {0}, which `layers` does not list")]
    Unlisted(usize),
    /// The mixing the section makes does not fit together.
    #[error(transparent)]
    Shape(#[from] MixingShapeError),
}

/// The layers that mix tokens without a softmax, and their mixing matrices when captured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NonSoftmaxDoc {
    /// What mixes the tokens (`gated delta`).
    pub kind: String,
    /// The model's numbers of those layers, ascending (none of them is in `attention`).
    pub layers: Vec<usize>,
    /// What the matrices are, in words, as every view's legend says it: `token mixing (gated
    /// delta), not attention probabilities`.
    pub legend: String,
    /// Each layer's token-mixing matrices; absent when the run did not capture them (only some
    /// layers captured, or the attention streamed or summarised).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mixing: Option<MixingDoc>,
}

/// The token-mixing matrices of the layers, for the input's tokens.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MixingDoc {
    /// Heads per layer (the layers' value heads; not the attention's heads).
    pub heads: usize,
    /// The model's tokens the matrices are over (token level, whatever the attention's
    /// `level`).
    pub tokens: Vec<String>,
    /// The layers, ascending.
    pub layers: Vec<MixingLayerDoc>,
}

/// One layer's token mixing: `out[t] = Σ_{s≤t} weights[head][t][s] · v[s]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MixingLayerDoc {
    /// The model's number of the layer (from 0).
    pub layer: usize,
    /// `weights[head][output token][source token]`, zero above the diagonal; signed, rows not
    /// normalised.
    pub weights: Vec<Vec<Vec<f32>>>,
}

impl NonSoftmaxDoc {
    /// The section of `layers`.
    pub fn of(layers: &NonSoftmaxLayers) -> NonSoftmaxDoc {
        NonSoftmaxDoc {
            kind: layers.kind.clone(),
            layers: layers.layers.clone(),
            legend: format!(
                "token mixing ({}), not attention probabilities",
                layers.kind
            ),
            mixing: layers.mixing.as_deref().map(|m| {
                let n = m.n().max(1);
                MixingDoc {
                    heads: m.heads,
                    tokens: m.tokens.clone(),
                    layers: m
                        .layers
                        .iter()
                        .map(|l| MixingLayerDoc {
                            layer: l.layer,
                            weights: l
                                .weights
                                .chunks(n * n)
                                .map(|h| h.chunks(n).map(<[f32]>::to_vec).collect())
                                .collect(),
                        })
                        .collect(),
                }
            }),
        }
    }

    /// The layers the section describes, or what is wrong with it.
    pub fn layers(self) -> Result<NonSoftmaxLayers, MixingDocError> {
        let mixing = match self.mixing {
            None => None,
            Some(doc) => {
                let (heads, n) = (doc.heads, doc.tokens.len());
                let mut layers = Vec::with_capacity(doc.layers.len());
                for l in doc.layers {
                    if !self.layers.contains(&l.layer) {
                        return Err(MixingDocError::Unlisted(l.layer));
                    }
                    if l.weights.len() != heads
                        || l.weights
                            .iter()
                            .any(|h| h.len() != n || h.iter().any(|row| row.len() != n))
                    {
                        return Err(MixingDocError::Rows {
                            layer: l.layer,
                            heads,
                            tokens: n,
                        });
                    }
                    layers.push(MixingLayer {
                        layer: l.layer,
                        weights: l.weights.into_iter().flatten().flatten().collect(),
                    });
                }
                let mixing = Mixing {
                    kind: self.kind.clone(),
                    heads,
                    tokens: doc.tokens,
                    layers,
                };
                mixing.check()?;
                Some(Arc::new(mixing))
            }
        };
        Ok(NonSoftmaxLayers {
            kind: self.kind,
            layers: self.layers,
            mixing,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_section_reads_back_and_misfits_are_refused() {
        let layers = NonSoftmaxLayers {
            kind: "gated delta".into(),
            layers: vec![0, 2],
            mixing: Some(Arc::new(Mixing {
                kind: "gated delta".into(),
                heads: 1,
                tokens: vec!["a".into(), "b".into()],
                layers: vec![MixingLayer {
                    layer: 2,
                    weights: vec![0.5, 0.0, -0.25, 1.5],
                }],
            })),
        };
        let doc = NonSoftmaxDoc::of(&layers);
        assert_eq!(
            doc.legend,
            "token mixing (gated delta), not attention probabilities"
        );
        let json = serde_json::to_string(&doc).unwrap();
        let back: NonSoftmaxDoc = serde_json::from_str(&json).unwrap();
        assert_eq!(back.clone().layers().unwrap(), layers);
        let mut bad = back.clone();
        bad.mixing.as_mut().unwrap().layers[0].weights[0].pop();
        assert!(matches!(bad.layers(), Err(MixingDocError::Rows { .. })));
        let mut bad = back;
        bad.mixing.as_mut().unwrap().layers[0].layer = 1;
        assert_eq!(bad.layers(), Err(MixingDocError::Unlisted(1)));
    }
}
