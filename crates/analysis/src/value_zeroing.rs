//! Value zeroing (Mohebbi, Zuidema, Chrupała and Alishahi 2023, "Quantifying Context Mixing in
//! Transformers"): how much each token's output depends on each context token, measured by
//! removing that token's value vector and seeing how far the output moves. Formulas, cost and
//! when to trust it: `docs/analyses.md`.
//!
//! Each layer's matrix C_l (row = output token i, column = zeroed token j) is the model's
//! cosine distances 1 − cos(x̃_i^{¬j}, x_i) (`model::zeroing`), each row divided by its sum,
//! as the paper's code does. The network's matrix is their rollout without an added identity
//! (the residual is inside each layer's output already), later layers on the left, as for ALTI:
//! A_1 = C_1, A_l = C_l · A_{l−1}.

use serde::Serialize;

use crate::model::ZeroingForward;

/// Value zeroing of one sequence's self-attention.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ValueZeroing {
    /// The model's number of each layer (every layer, from 0).
    pub layers: Vec<usize>,
    /// Tokens (rows and columns).
    pub tokens: usize,
    /// Each layer's own scores C_l, `[layers][tokens × tokens]` row-major, rows summing to 1
    /// (a row whose every distance is 0 stays 0).
    pub per_layer: Vec<Vec<f32>>,
    /// The scores through layers up to and including each one, A_l, laid out as `per_layer`;
    /// the last is the network's.
    pub aggregated: Vec<Vec<f32>>,
}

impl ValueZeroing {
    /// The normalised and aggregated view of the model's distances.
    pub fn new(forward: &ZeroingForward) -> ValueZeroing {
        let n = forward.tokens;
        let per_layer: Vec<Vec<f32>> = forward
            .distances
            .iter()
            .map(|d| normalise_rows(d, n))
            .collect();
        let aggregated = super::alti::aggregate(&per_layer, n);
        ValueZeroing {
            layers: (0..per_layer.len()).collect(),
            tokens: n,
            per_layer,
            aggregated,
        }
    }
}

/// Each row of an `n × n` matrix divided by its sum (in f64); a row summing to 0 stays 0.
fn normalise_rows(m: &[f32], n: usize) -> Vec<f32> {
    let mut out = vec![0f32; m.len()];
    if n == 0 {
        return out;
    }
    for (row, dst) in m.chunks_exact(n).zip(out.chunks_exact_mut(n)) {
        let total: f64 = row.iter().map(|&v| v as f64).sum();
        if total > 0.0 {
            for (o, &v) in dst.iter_mut().zip(row) {
                *o = (v as f64 / total) as f32;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_shares_and_layers_multiply_later_on_the_left() {
        let forward = ZeroingForward {
            tokens: 2,
            distances: vec![vec![2.0, 0.0, 1.0, 1.0], vec![0.1, 0.1, 0.0, 0.0]],
        };
        let v = ValueZeroing::new(&forward);
        assert_eq!(v.per_layer[0], vec![1.0, 0.0, 0.5, 0.5]);
        // A silent row stays 0.
        assert_eq!(v.per_layer[1], vec![0.5, 0.5, 0.0, 0.0]);
        // C2 · C1 = [[0.75, 0.25], [0, 0]].
        assert_eq!(v.aggregated[1], vec![0.75, 0.25, 0.0, 0.0]);
        assert_eq!(v.layers, vec![0, 1]);
    }
}
