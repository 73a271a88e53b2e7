//! Opt-in capture of what the norm-based analyses need (Kobayashi et al. 2020, 2021): per
//! layer, head and token, the size of what a head moves from a token, ‖f_h(x_j)‖ with
//! f_h(x) = (x W_V^h + b_V^h) W_O^h, and the terms that put the residual connection and the
//! normalisation after it into the picture.
//!
//! Nothing here runs unless a capture asks for it ([`SequenceCapture::with_values`]), and
//! ALTI's per-layer matrices (`super::mixing`) only when it asks for them too: a
//! network's layer hands its value vectors and the input of the norm that follows attention
//! to [`fill`] only then. The arithmetic is one product per head with the head's rows of the
//! output projection (`[tokens, head_dim] × [head_dim, hidden]`): together as much as the
//! output projection itself.
//!
//! What is kept, per captured layer ([`LayerValues`]), is enough to rebuild both views exactly
//! from the attention probabilities α (`crate::analysis::weighting`):
//!
//! - value-weighted: ‖α_ij f_h(x_j)‖ = α_ij · `value_norms[h, j]`;
//! - norm-aware: each contribution through the linear part of the normalisation that follows
//!   (γ ⊙ centring, divided by the row's spread σ_i, the spread of the real sum), and the
//!   residual x_i added on the diagonal: ‖s_i N(α_ij f_h(x_j)) + δ_ij t_i M(x_i)‖, whose square
//!   is α² s² ‖N f‖² + 2 α s t ⟨N f_h(x_i), M x_i⟩ + t² ‖M x_i‖².
//!
//! Post-norm blocks (BERT) normalise the residual sum: N = M = γ ⊙ centring, s = t = 1/σ_i.
//! Pre-norm blocks (GPT-2, Llama) add the attention output to the residual stream without a
//! norm after it (the norm before attention is inside f already): N = M = identity, s = t = 1.
//! A norm on the attention output alone before the residual (Gemma's post-norm) gives N = its
//! γ, s = its 1/σ, M = identity, t = 1.

use super::architecture::Architecture;
use super::capture::SequenceCapture;
pub use super::capture::{LayerValues, ValueCapture};
use super::layers::{Linear, Norm, NormKind};
use super::mixing;
use crate::model::kernels::{self, Activation, Layout, Matrix, Output};

/// What a layer hands over when its values are asked for (moved, never copied on the plain
/// path).
#[derive(Default)]
pub struct LayerTaps {
    /// The projected q/k/v rows as the attention read them.
    pub qkv: Vec<f32>,
    /// The input of the norm that follows attention (post-norm: residual + attention output;
    /// Gemma: the attention output), when the block has one.
    pub norm_input: Option<Vec<f32>>,
    /// Head ablation (`blocks::lens`): per sequence of the batch, the head whose output is
    /// removed before the output projection; empty: none.
    pub ablate: Vec<Option<usize>>,
    /// An ablated head's output becomes its mean over the sequence's positions, not zero.
    pub ablate_mean: bool,
    /// Value zeroing (Mohebbi et al. 2023): per sequence of the batch, the token whose value
    /// vector is set to 0 in every head before attention reads it; empty: none.
    pub zero_value: Vec<Option<usize>>,
    /// Keep the output projection's input in `context` (head attribution, `blocks::lens`).
    pub keep_context: bool,
    /// Each head's Σ_j α_ij v_j, `[rows, heads · head_dim]`, when `keep_context` asked.
    pub context: Vec<f32>,
}

/// Zero the value vectors `taps.zero_value` asks for in `qkv` (rows of `stride` values, each
/// sequence `tokens` rows, its values the `width` columns from `offset` on).
pub fn zero_values(
    taps: &LayerTaps,
    qkv: &mut [f32],
    tokens: usize,
    stride: usize,
    offset: usize,
    width: usize,
) {
    for (s, token) in taps.zero_value.iter().enumerate() {
        if let Some(j) = *token {
            qkv[(s * tokens + j) * stride + offset..][..width].fill(0.0);
        }
    }
}

/// Which normalisation follows the attention block.
#[derive(Clone, Copy)]
pub enum After<'a> {
    /// None: a pre-norm block adds the attention output to the residual stream as it is.
    Nothing,
    /// A norm of the residual sum (post-norm: BERT, BART).
    Residual(&'a Norm),
    /// A norm of the attention output alone, before the residual add (Gemma's post-norm).
    Output(&'a Norm),
}

/// Where a layer's value vectors are: the vector of key/value head `k` for row `r` is
/// `data[r·stride + offset + k·head_dim ..][..head_dim]`.
pub struct Values<'a> {
    /// The buffer.
    pub data: &'a [f32],
    /// Values per row.
    pub stride: usize,
    /// Where key/value head 0 starts.
    pub offset: usize,
}

/// Whether any of `captures` wants the values of the network's layer `layer`.
pub fn wanted(captures: &[SequenceCapture], layer: usize) -> bool {
    captures
        .iter()
        .any(|c| c.values.is_some() && c.keeps_layer(layer))
}

/// Fill in layer `layer` for every capture that wants it, from the layer's `values` (rows of a
/// batch padded to `tokens`), its output projection, the residual rows `residual` (the layer's
/// input on the query side; `None` for cross-attention) and the norm that follows, whose input
/// rows `norm_input` are (`None` for [`After::Nothing`]).
#[allow(clippy::too_many_arguments)]
pub fn fill(
    captures: &mut [SequenceCapture],
    layer: usize,
    arch: &Architecture,
    tokens: usize,
    values: Values<'_>,
    output: &Linear,
    residual: Option<&[f32]>,
    after: After<'_>,
    norm_input: Option<&[f32]>,
) {
    let (heads, d) = (arch.heads, arch.head_dim);
    let hidden = output.outputs();
    let weight = output.dense_in_out();
    assert_eq!(weight.len(), heads * d * hidden, "output projection shape");
    let (norm, residual_normed) = match after {
        After::Nothing => (None, false),
        After::Residual(n) => (Some(n.linear_part()), true),
        After::Output(n) => (Some(n.linear_part()), false),
    };
    for (s, capture) in captures.iter_mut().enumerate() {
        if capture.values.is_none() || !capture.keeps_layer(layer) {
            continue;
        }
        let (queries, keys) = (capture.queries(), capture.keys());
        let row0 = s * tokens;
        // f_h(x_j) for every head and key token, then its norms.
        let mut value_norms = vec![0f32; heads * keys];
        let mut normed_norms = vec![0f32; heads * keys];
        let mut f_rows = Vec::with_capacity(heads);
        for h in 0..heads {
            let kv = arch.kv_head[h];
            let mut v = vec![0f32; keys * d];
            for (j, dst) in v.chunks_exact_mut(d).enumerate() {
                let at = (row0 + j) * values.stride + values.offset + kv * d;
                dst.copy_from_slice(&values.data[at..at + d]);
            }
            let mut f = vec![0f32; keys * hidden];
            kernels::linear(
                &v,
                keys,
                Matrix {
                    data: &weight[h * d * hidden..(h + 1) * d * hidden],
                    inputs: d,
                    outputs: hidden,
                    layout: Layout::InOut,
                },
                None,
                Output {
                    data: &mut f,
                    stride: hidden,
                    col0: 0,
                },
                Activation::Identity,
            );
            for (j, row) in f.chunks_exact(hidden).enumerate() {
                value_norms[h * keys + j] = norm2(row).sqrt();
                normed_norms[h * keys + j] = norm2(&apply(norm, row)).sqrt();
            }
            f_rows.push(f);
        }
        // The normalisation's factors per query row.
        let spread = |i: usize| -> f32 {
            match (norm, norm_input) {
                (Some((_, kind, eps)), Some(input)) => {
                    1.0 / spread_of(&input[(row0 + i) * hidden..][..hidden], kind, eps)
                }
                _ => 1.0,
            }
        };
        let value_scale: Vec<f32> = (0..queries).map(spread).collect();
        let residual_scale: Vec<f32> = if residual_normed {
            value_scale.clone()
        } else {
            vec![1.0; queries]
        };
        let (mut residual_dot, mut residual_sq) = (Vec::new(), Vec::new());
        if let Some(x) = residual {
            let m = residual_normed.then_some(norm).flatten();
            let mx: Vec<Vec<f32>> = (0..queries)
                .map(|i| apply(m, &x[(row0 + i) * hidden..][..hidden]))
                .collect();
            residual_sq = mx.iter().map(|r| norm2(r)).collect();
            residual_dot = vec![0f32; heads * queries];
            for (h, f) in f_rows.iter().enumerate() {
                for (i, mxi) in mx.iter().enumerate() {
                    let nf = apply(norm, &f[i * hidden..][..hidden]);
                    residual_dot[h * queries + i] = nf.iter().zip(mxi).map(|(a, b)| a * b).sum();
                }
            }
        }
        // ALTI (`blocks::mixing`), when asked: self-attention only, where the residual is the
        // same tokens.
        let alti = capture.values.as_ref().is_some_and(|v| v.alti);
        let mixing = match (residual, capture.layer_probs(layer)) {
            (Some(x), Some(probs)) if alti && queries == keys => {
                // The output projection reads heads · head_dim values, which need not be the
                // hidden size (Gemma's explicit head_dim).
                let out_bias =
                    output.forward(&vec![0f32; output.inputs()], 1, Activation::Identity);
                let zeros = vec![0f32; hidden];
                let beta = match after {
                    After::Residual(n) | After::Output(n) => n.forward(&zeros, None),
                    After::Nothing => zeros.clone(),
                };
                mixing::alti_layer(
                    &mixing::LayerTerms {
                        f: &f_rows,
                        probs,
                        residual: &x[row0 * hidden..(row0 + queries) * hidden],
                        norm,
                        residual_normed,
                        scale: &value_scale,
                        out_bias: &out_bias,
                        beta: &beta,
                    },
                    queries,
                    keys,
                    hidden,
                )
            }
            _ => Vec::new(),
        };
        let values = capture.values.as_mut().expect("checked above");
        values.layers[layer] = Some(LayerValues {
            mixing,
            value_norms,
            normed_norms,
            residual_dot,
            residual_sq,
            value_scale,
            residual_scale,
        });
    }
}

/// Σ v².
fn norm2(v: &[f32]) -> f32 {
    v.iter().map(|x| x * x).sum()
}

/// The linear part of a normalisation applied to `row`: γ ⊙ (row − mean(row)) for LayerNorm,
/// γ ⊙ row for RMSNorm, the row itself without a norm.
fn apply(norm: Option<(&[f32], NormKind, f32)>, row: &[f32]) -> Vec<f32> {
    match norm {
        None => row.to_vec(),
        Some((gamma, kind, _)) => {
            let mean = match kind {
                NormKind::Layer => row.iter().sum::<f32>() / row.len() as f32,
                NormKind::Rms => 0.0,
            };
            row.iter().zip(gamma).map(|(x, g)| (x - mean) * g).collect()
        }
    }
}

/// σ of a normalisation's input row: √(var + ε) for LayerNorm, √(mean(x²) + ε) for RMSNorm.
fn spread_of(row: &[f32], kind: NormKind, eps: f32) -> f32 {
    let n = row.len() as f64;
    let mean = match kind {
        NormKind::Layer => row.iter().map(|&x| x as f64).sum::<f64>() / n,
        NormKind::Rms => 0.0,
    };
    let var = row.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n;
    (var + eps as f64).sqrt() as f32
}
