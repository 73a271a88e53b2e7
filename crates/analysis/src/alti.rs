//! ALTI, Aggregation of Layer-wise Token-to-token Interactions (Ferrando et al. 2022,
//! "Measuring the Mixing of Contextual Information in the Transformer"): how much each input
//! token contributes to each output token, through the whole network. Formulas and when to
//! trust it: `docs/analyses.md`.
//!
//! Each layer's matrix C_l (row = output token i, column = source token j, rows summing to 1)
//! comes from the forward pass ([`LayerValues::mixing`], computed by `model::blocks::mixing`
//! from the value vectors, the residual and the norm after attention). The network's matrix is
//! their product, later layers on the left, as the paper aggregates them: A_1 = C_1,
//! A_l = C_l · A_{l−1}. Unlike rollout no identity is added: the residual is inside C_l already.

use serde::Serialize;

use crate::attention::{ShapeError, ShapeProblem};
use crate::model::LayerValues;

/// ALTI of one sequence's self-attention.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Alti {
    /// The model's number of each layer.
    pub layers: Vec<usize>,
    /// Tokens (rows and columns).
    pub tokens: usize,
    /// Each layer's own contributions C_l, `[layers][tokens × tokens]` row-major.
    pub per_layer: Vec<Vec<f32>>,
    /// The contributions through layers up to and including each one, A_l,
    /// `[layers][tokens × tokens]` row-major; the last is the network's.
    pub aggregated: Vec<Vec<f32>>,
}

/// ALTI from the value terms of the layers `layers` (the network's numbers of the captured
/// layers, in order, each consecutive: ALTI multiplies every layer's matrix, so a capture
/// that skipped layers cannot give it).
pub fn alti(layers: &[usize], values: &[LayerValues]) -> Result<Alti, ShapeError> {
    if values.len() != layers.len() || values.is_empty() {
        return Err(ShapeProblem::TermsLayers {
            terms: values.len(),
            layers: layers.len(),
        }
        .into());
    }
    if layers.windows(2).any(|w| w[1] != w[0] + 1) || layers[0] != 0 {
        return Err(ShapeProblem::AltiLayers.into());
    }
    let cells = values[0].mixing.len();
    let tokens = (cells as f64).sqrt() as usize;
    if tokens == 0 || tokens * tokens != cells || values.iter().any(|v| v.mixing.len() != cells) {
        return Err(ShapeProblem::AltiTokens.into());
    }
    let per_layer: Vec<Vec<f32>> = values.iter().map(|v| v.mixing.clone()).collect();
    let aggregated = aggregate(&per_layer, tokens);
    Ok(Alti {
        layers: layers.to_vec(),
        tokens,
        per_layer,
        aggregated,
    })
}

/// The products through each layer of per-layer `tokens × tokens` matrices, later layers on
/// the left: A_1 = C_1, A_l = C_l · A_{l−1} (no identity added).
pub(crate) fn aggregate(per_layer: &[Vec<f32>], tokens: usize) -> Vec<Vec<f32>> {
    let mut aggregated: Vec<Vec<f32>> = Vec::with_capacity(per_layer.len());
    for c in per_layer {
        let next = match aggregated.last() {
            None => c.clone(),
            Some(prev) => product(c, prev, tokens),
        };
        aggregated.push(next);
    }
    aggregated
}

/// `a · b` for `n × n` row-major matrices, summed in f64.
fn product(a: &[f32], b: &[f32], n: usize) -> Vec<f32> {
    let mut out = vec![0f32; n * n];
    for i in 0..n {
        for j in 0..n {
            let s: f64 = (0..n)
                .map(|k| a[i * n + k] as f64 * b[k * n + j] as f64)
                .sum();
            out[i * n + j] = s as f32;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer(mixing: Vec<f32>) -> LayerValues {
        LayerValues {
            value_norms: vec![],
            normed_norms: vec![],
            residual_dot: vec![],
            residual_sq: vec![],
            value_scale: vec![],
            residual_scale: vec![],
            mixing,
        }
    }

    #[test]
    fn layers_multiply_later_on_the_left() {
        let c1 = vec![1.0, 0.0, 0.5, 0.5];
        let c2 = vec![0.5, 0.5, 0.0, 1.0];
        let a = alti(&[0, 1], &[layer(c1.clone()), layer(c2)]).unwrap();
        assert_eq!(a.aggregated[0], c1);
        // C2 · C1 = [[0.75, 0.25], [0.5, 0.5]].
        assert_eq!(a.aggregated[1], vec![0.75, 0.25, 0.5, 0.5]);
    }

    #[test]
    fn skipped_layers_and_cross_attention_are_refused() {
        let c = vec![1.0];
        assert!(alti(&[0, 2], &[layer(c.clone()), layer(c.clone())]).is_err());
        assert!(alti(&[0], &[layer(vec![])]).is_err());
        assert!(alti(&[0], &[]).is_err());
    }
}
