//! Aggregates over heads and layers, as plain `n × n` row-major matrices any renderer can draw:
//! the mean over each layer's heads, and attention rollout.

use candle_core::{Device, Tensor};
use rayon::prelude::*;

use crate::attention::Attention;
use attnviz_core::multiversion;

/// The mean over the heads of every layer: `[layer]` → `n_query × n_key`, row = query, column =
/// key.
pub fn layer_means(att: &Attention) -> Vec<Vec<f32>> {
    (0..att.layers()).map(|l| att.head_mean(l)).collect()
}

/// Attention rollout (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers"), one
/// `n × n` row-major matrix per layer.
///
/// For each layer `l`, average the heads, add the identity (the residual connection) and
/// renormalise the rows: `Â_l = rownorm(mean_h A_{l,h} + I)`, which for row-stochastic `A` is
/// `½·mean_h A_{l,h} + ½·I`. Then multiply through the layers, later layers on the **left**:
///
/// ```text
/// rollout[0] = Â_0
/// rollout[l] = Â_l · rollout[l-1] = Â_l · Â_{l-1} · … · Â_0
/// ```
///
/// Row `q`, column `k` of `rollout[l]` is how much the representation of unit `q` after layer `l`
/// draws, through all attention paths, on input unit `k` (the embeddings). Rows sum to 1. The
/// products run in f64 and are stored as f32.
///
/// The identity stands for the residual stream, which exists per token, so this is meant for
/// token-level attention with the special tokens present; [`super::Analysis::compute_view`]
/// computes it there and then maps it to words / drops special tokens like any other matrix.
/// It is defined for self-attention only (the residual stream runs through the same units): for
/// cross-attention every layer's matrix is empty. So it is for a hybrid model (Qwen3-Next):
/// its gated delta layers mix tokens without a softmax (signed rows that need not sum to 1),
/// so a product of its attention layers alone would not be the flow through the model.
pub fn rollout(att: &Attention) -> Vec<Vec<f32>> {
    let (n, layers) = (att.len(), att.layers());
    if n == 0 || !att.is_square() || att.non_softmax.is_some() {
        return vec![Vec::new(); layers];
    }
    let mut out = Vec::with_capacity(layers);
    let mut acc: Option<Tensor> = None;
    for l in 0..layers {
        let a_hat = residual_mean(att, l);
        let a_hat = Tensor::from_vec(a_hat, (n, n), &Device::Cpu).expect(SHAPE_OK);
        let next = match &acc {
            None => a_hat,
            Some(prev) => a_hat.matmul(prev).expect(SHAPE_OK),
        };
        let values: Vec<f64> = next
            .flatten_all()
            .and_then(|t| t.to_vec1())
            .expect(SHAPE_OK);
        out.push(values.into_iter().map(|v| v as f32).collect());
        acc = Some(next);
    }
    out
}

const SHAPE_OK: &str = "n × n f64 CPU tensors of matching shape";

/// Rows of `Â` one rayon job makes at least; a shorter input is one thread's work (handing 32
/// rows of a few heads to other threads costs more than it saves).
const MIN_ROWS_PER_JOB: usize = 64;

/// `rownorm(mean_h A_{l,h} + I)` in f64.
fn residual_mean(att: &Attention, layer: usize) -> Vec<f64> {
    let n = att.len();
    let heads = att.heads();
    let mut a = vec![0f64; n * n];
    let fill = |(q, row): (usize, &mut [f64])| {
        for h in 0..heads {
            add_widened(row, &att.head(layer, h)[q * n..(q + 1) * n]);
        }
        row.iter_mut().for_each(|r| *r /= heads as f64);
        row[q] += 1.0;
        let sum: f64 = row.iter().sum();
        row.iter_mut().for_each(|r| *r /= sum);
    };
    if n < MIN_ROWS_PER_JOB {
        a.chunks_mut(n).enumerate().for_each(fill);
    } else {
        a.par_chunks_mut(n)
            .with_min_len(MIN_ROWS_PER_JOB)
            .enumerate()
            .for_each(fill);
    }
    a
}

multiversion! {
    /// `sum[i] += add[i]`, widened to f64.
    fn add_widened(sum: &mut [f64], add: &[f32]) {
        for (s, &a) in sum.iter_mut().zip(add) {
            *s += a as f64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::fixtures::{irregular, synthetic};

    fn matmul(a: &[f64], b: &[f64], n: usize) -> Vec<f64> {
        let mut c = vec![0.0; n * n];
        for i in 0..n {
            for k in 0..n {
                for j in 0..n {
                    c[i * n + j] += a[i * n + k] * b[k * n + j];
                }
            }
        }
        c
    }

    #[test]
    fn rollout_multiplies_later_layers_on_the_left() {
        let att = irregular(3, 2, 5);
        let n = 5;
        let hat: Vec<Vec<f64>> = (0..3).map(|l| residual_mean(&att, l)).collect();
        let want = matmul(&hat[2], &matmul(&hat[1], &hat[0], n), n);
        let got = rollout(&att);
        assert_eq!(got.len(), 3);
        for (g, w) in got[2].iter().zip(&want) {
            assert!((*g as f64 - w).abs() < 1e-6);
        }
        // the reverse order gives a different matrix for this input
        let reversed = matmul(&hat[0], &matmul(&hat[1], &hat[2], n), n);
        assert!(reversed
            .iter()
            .zip(&want)
            .any(|(r, w)| (r - w).abs() > 1e-3));
        for row in got[2].chunks(n) {
            assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-5);
        }
    }

    #[test]
    fn residual_mean_is_half_attention_half_identity() {
        let att = synthetic(&["a", "b", "c"], 1, 2);
        let hat = residual_mean(&att, 0);
        let mean = att.head_mean(0);
        for q in 0..3 {
            for k in 0..3 {
                let want = 0.5 * mean[q * 3 + k] as f64 + if q == k { 0.5 } else { 0.0 };
                assert!((hat[q * 3 + k] - want).abs() < 1e-7);
            }
        }
    }
}
