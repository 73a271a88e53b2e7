//! A mixture-of-experts model's `router` section (`docs/json.md`, "Router"): per routed layer
//! and token, the chosen experts and their weights, the probability of every expert, and the
//! expert load (how many tokens chose each expert).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::attention::{Router, RouterLayer, RouterShapeError};

/// What is wrong with a `router` section.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RouterDocError {
    /// A layer whose rows are not one per token of the stated widths.
    #[error("layer {layer}: chosen, weights and probs need {tokens} rows of {top_k}, {top_k} and {experts} values")]
    Rows {
        /// The layer's number.
        layer: usize,
        /// Tokens (rows) wanted.
        tokens: usize,
        /// Chosen experts per row.
        top_k: usize,
        /// Experts (probabilities per row).
        experts: usize,
    },
    /// A layer whose `load` does not count its chosen experts.
    #[error("layer {layer}: load {load:?} does not count the chosen experts")]
    Load {
        /// The layer's number.
        layer: usize,
        /// Its `load`.
        load: Vec<usize>,
    },
    /// The router the section makes does not fit together.
    #[error(transparent)]
    Shape(#[from] RouterShapeError),
}

/// The routers' decisions for the input's tokens.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RouterDoc {
    /// Experts per routed layer.
    pub experts: usize,
    /// Experts chosen per token.
    pub top_k: usize,
    /// Whether each token's weights are its chosen experts' probabilities renormalised to sum
    /// to 1 (Mixtral; `norm_topk_prob`), rather than the probabilities themselves.
    pub renormalised: bool,
    /// The model's tokens the decisions are for (token level, whatever the attention's
    /// `level`).
    pub tokens: Vec<String>,
    /// The routed layers, ascending (a model's dense layers are absent).
    pub layers: Vec<RouterLayerDoc>,
}

/// One routed layer's decisions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RouterLayerDoc {
    /// The model's number of the layer (from 0).
    pub layer: usize,
    /// How many tokens chose each expert: `load[expert]`.
    pub load: Vec<usize>,
    /// Each token's chosen experts, most probable first: `chosen[token][rank]`.
    pub chosen: Vec<Vec<u32>>,
    /// The weight each chosen expert's output was added with: `weights[token][rank]`.
    pub weights: Vec<Vec<f32>>,
    /// The probability of every expert (the softmax over all of them):
    /// `probs[token][expert]`.
    pub probs: Vec<Vec<f32>>,
}

impl RouterDoc {
    /// The section of `router`.
    pub fn of(router: &Router) -> RouterDoc {
        let (e, k) = (router.experts, router.top_k);
        let rows = |v: &[f32], w: usize| v.chunks(w.max(1)).map(<[f32]>::to_vec).collect();
        RouterDoc {
            experts: e,
            top_k: k,
            renormalised: router.renormalised,
            tokens: router.tokens.clone(),
            layers: router
                .layers
                .iter()
                .map(|l| RouterLayerDoc {
                    layer: l.layer,
                    load: l.load(e),
                    chosen: l.chosen.chunks(k.max(1)).map(<[u32]>::to_vec).collect(),
                    weights: rows(&l.weights, k),
                    probs: rows(&l.probs, e),
                })
                .collect(),
        }
    }

    /// The router the section describes, or what is wrong with it (rows of the wrong length,
    /// an expert out of range, a `load` that does not count the choices).
    pub fn router(self) -> Result<Router, RouterDocError> {
        let (e, k, n) = (self.experts, self.top_k, self.tokens.len());
        let mut layers = Vec::with_capacity(self.layers.len());
        for l in self.layers {
            let fits =
                |rows: &[Vec<f32>], w: usize| rows.len() == n && rows.iter().all(|r| r.len() == w);
            if !fits(&l.weights, k)
                || !fits(&l.probs, e)
                || l.chosen.len() != n
                || l.chosen.iter().any(|r| r.len() != k)
            {
                return Err(RouterDocError::Rows {
                    layer: l.layer,
                    tokens: n,
                    top_k: k,
                    experts: e,
                });
            }
            let layer = RouterLayer {
                layer: l.layer,
                probs: l.probs.concat(),
                chosen: l.chosen.concat(),
                weights: l.weights.concat(),
            };
            if layer.chosen.iter().all(|&c| (c as usize) < e) && layer.load(e) != l.load {
                return Err(RouterDocError::Load {
                    layer: l.layer,
                    load: l.load,
                });
            }
            layers.push(layer);
        }
        let router = Router {
            experts: e,
            top_k: k,
            renormalised: self.renormalised,
            tokens: self.tokens,
            layers,
        };
        router.check()?;
        Ok(router)
    }
}

/// A mixture-of-experts model's expert load summed over many inputs (corpus mode's
/// `expert_load`): per routed layer, how many tokens chose each expert. Integer counts, so
/// shards and resumed runs add up exactly to one run over the whole corpus.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ExpertLoadDoc {
    /// Experts per routed layer.
    pub experts: usize,
    /// Experts chosen per token.
    pub top_k: usize,
    /// Tokens routed (each chose `top_k` experts in every routed layer).
    pub tokens: u64,
    /// The routed layers' numbers in the model, ascending.
    pub layers: Vec<usize>,
    /// `load[i][expert]`: the tokens that chose the expert in routed layer `layers[i]`.
    pub load: Vec<Vec<u64>>,
}

/// Two expert loads that cannot be added: another router's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("expert_load: {found} where the other has {expected}; the files are not of one model")]
pub struct LoadMismatch {
    /// The other's shape, in words.
    pub expected: String,
    /// This one's.
    pub found: String,
}

impl ExpertLoadDoc {
    /// The load of one input's router.
    pub fn of(router: &Router) -> ExpertLoadDoc {
        ExpertLoadDoc {
            experts: router.experts,
            top_k: router.top_k,
            tokens: router.tokens.len() as u64,
            layers: router.layers.iter().map(|l| l.layer).collect(),
            load: router
                .layers
                .iter()
                .map(|l| {
                    l.load(router.experts)
                        .into_iter()
                        .map(|c| c as u64)
                        .collect()
                })
                .collect(),
        }
    }

    fn shape(&self) -> String {
        format!(
            "{} experts, top {}, layers {:?}",
            self.experts, self.top_k, self.layers
        )
    }

    /// Whether its counts can be a run's: one row of `experts` counts per layer, each row
    /// summing to `tokens × top_k`.
    pub fn is_consistent(&self) -> bool {
        self.load.len() == self.layers.len()
            && self.load.iter().all(|row| {
                row.len() == self.experts
                    && row.iter().try_fold(0u64, |a, &c| a.checked_add(c))
                        == self.tokens.checked_mul(self.top_k as u64)
            })
    }

    /// Add `other`'s counts (another shape is refused and nothing changes; counts that would
    /// overflow 64 bits too).
    pub fn merge(&mut self, other: &ExpertLoadDoc) -> Result<(), LoadMismatch> {
        if (self.experts, self.top_k, &self.layers) != (other.experts, other.top_k, &other.layers) {
            return Err(LoadMismatch {
                expected: self.shape(),
                found: other.shape(),
            });
        }
        let overflow = || LoadMismatch {
            expected: "counts that fit 64 bits".into(),
            found: "a sum that overflows".into(),
        };
        let mut out = self.clone();
        out.tokens = out.tokens.checked_add(other.tokens).ok_or_else(overflow)?;
        for (a, b) in out.load.iter_mut().zip(&other.load) {
            for (x, y) in a.iter_mut().zip(b) {
                *x = x.checked_add(*y).ok_or_else(overflow)?;
            }
        }
        *self = out;
        Ok(())
    }
}
