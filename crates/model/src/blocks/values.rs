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
use crate::kernels::{self, Activation, Layout};
use rayon::prelude::*;

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
///
/// Per head, one product `[keys, head_dim] × [head_dim, hidden]` gives f_h(x_j) for every key
/// token; its rows are then only reduced (a norm, a dot product with the query's residual
/// term), never copied, and kept only for ALTI.
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
    if !wanted(captures, layer) {
        return;
    }
    let (heads, d) = (arch.heads, arch.head_dim);
    let hidden = output.outputs();
    let maps = HeadMaps::of(output, heads, d);
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
        let alti = capture.values.as_ref().is_some_and(|v| v.alti);
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
        // The residual's terms per query: ‖M x_i‖², and w_i = Nᵀ M x_i, so that
        // ⟨N f, M x_i⟩ = ⟨f, w_i⟩ for every head's f.
        let mut residual_sq = Vec::new();
        let mut residual_w = Vec::new();
        if let Some(x) = residual {
            let m = residual_normed.then_some(norm).flatten();
            residual_sq = Vec::with_capacity(queries);
            residual_w = Vec::with_capacity(queries * hidden);
            for i in 0..queries {
                let mx = apply(m, &x[(row0 + i) * hidden..][..hidden]);
                residual_sq.push(sum_sq(&mx));
                residual_w.extend(transpose_applied(norm, mx));
            }
        }
        // Each key/value head's value vectors, `[keys, head_dim]`.
        let kv_values: Vec<Vec<f32>> = (0..arch.kv_heads)
            .map(|kv| {
                let mut v = Vec::with_capacity(keys * d);
                for j in 0..keys {
                    let at = (row0 + j) * values.stride + values.offset + kv * d;
                    v.extend_from_slice(&values.data[at..at + d]);
                }
                v
            })
            .collect();
        // Heads in parallel, each with its own buffer for f_h(x_j) of every key token j.
        let with_residual = residual.is_some();
        let per_head: Vec<HeadTerms> = (0..heads)
            .into_par_iter()
            .map_init(
                || vec![0f32; keys * hidden],
                |f, h| {
                    maps.product(h, &kv_values[arch.kv_head[h]], keys, f);
                    let mut terms = HeadTerms {
                        value_norms: Vec::with_capacity(keys),
                        normed_norms: Vec::with_capacity(keys),
                        residual_dot: Vec::new(),
                        f: None,
                    };
                    for row in f.chunks_exact(hidden) {
                        let size = sum_sq(row).sqrt();
                        terms.value_norms.push(size);
                        terms.normed_norms.push(match norm {
                            None => size,
                            Some(n) => normed_sq(n, row).sqrt(),
                        });
                    }
                    if with_residual {
                        terms.residual_dot = residual_w
                            .chunks_exact(hidden)
                            .zip(f.chunks_exact(hidden))
                            .map(|(w, row)| dot(row, w))
                            .collect();
                    }
                    if alti {
                        terms.f = Some(f.clone());
                    }
                    terms
                },
            )
            .collect();
        let mut value_norms = Vec::with_capacity(heads * keys);
        let mut normed_norms = Vec::with_capacity(heads * keys);
        let mut residual_dot = Vec::with_capacity(if with_residual { heads * queries } else { 0 });
        let mut f_rows = Vec::with_capacity(if alti { heads } else { 0 });
        for terms in per_head {
            value_norms.extend(terms.value_norms);
            normed_norms.extend(terms.normed_norms);
            residual_dot.extend(terms.residual_dot);
            f_rows.extend(terms.f);
        }
        // ALTI (`blocks::mixing`), when asked: self-attention only, where the residual is the
        // same tokens.
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

/// What one head gives [`fill`] for one sequence.
struct HeadTerms {
    /// ‖f_h(x_j)‖ per key token.
    value_norms: Vec<f32>,
    /// ‖N f_h(x_j)‖ per key token.
    normed_norms: Vec<f32>,
    /// ⟨N f_h(x_i), M x_i⟩ per query token (empty without a residual).
    residual_dot: Vec<f32>,
    /// f_h(x_j) `[keys, hidden]`, kept for ALTI only.
    f: Option<Vec<f32>>,
}

/// An output projection read head by head: head h's `[head_dim → hidden]` map is rows
/// h·d..(h + 1)·d of `W` (`[heads · d, hidden]`), read in place through strides in either
/// layout the weight is kept in.
struct HeadMaps<'a> {
    weight: std::borrow::Cow<'a, [f32]>,
    layout: Layout,
    heads: usize,
    d: usize,
    hidden: usize,
}

impl<'a> HeadMaps<'a> {
    fn of(output: &'a Linear, heads: usize, d: usize) -> HeadMaps<'a> {
        let hidden = output.outputs();
        let (weight, layout) = output.dense();
        assert_eq!(weight.len(), heads * d * hidden, "output projection shape");
        HeadMaps {
            weight,
            layout,
            heads,
            d,
            hidden,
        }
    }

    /// `out = v · W_h` for head `h`: f_h of `rows` value vectors `v` (`[rows, d]`), into `out`
    /// (`[rows, hidden]`), by gemm.
    fn product(&self, h: usize, v: &[f32], rows: usize, out: &mut [f32]) {
        let (heads, d, hidden) = (self.heads, self.d, self.hidden);
        assert!(
            h < heads && v.len() == rows * d && out.len() == rows * hidden,
            "head product shape"
        );
        if rows == 0 || d == 0 || hidden == 0 {
            out.fill(0.0);
            return;
        }
        // W_h's element (c, o): W[h·d + c][o] for [in, out]; W[o][h·d + c] for [out, in].
        let (offset, rhs_cs, rhs_rs) = match self.layout {
            Layout::InOut => (h * d * hidden, 1, hidden as isize),
            Layout::OutIn => (h * d, (heads * d) as isize, 1),
        };
        // SAFETY: `out` is [rows, hidden] row-major, `v` [rows, d] row-major (both checked
        // above); the weight holds heads·d × hidden values (checked in `of`) and every (c, o)
        // with c < d, o < hidden addresses offset + c·rhs_rs + o·rhs_cs inside it in either
        // layout, since h < heads.
        unsafe {
            kernels::gemm::gemm(
                rows,
                hidden,
                d,
                out.as_mut_ptr(),
                1,
                hidden as isize,
                false,
                v.as_ptr(),
                1,
                d as isize,
                self.weight.as_ptr().add(offset),
                rhs_cs,
                rhs_rs,
                1.0,
                1.0,
                // The caller runs heads in parallel.
                kernels::gemm::Parallelism::None,
            );
        }
    }
}

/// Σ v², in sixteen interleaved sums (which vectorise).
fn sum_sq(v: &[f32]) -> f32 {
    dot(v, v)
}

/// Σ a·b, in sixteen interleaved sums (which vectorise).
fn dot(a: &[f32], b: &[f32]) -> f32 {
    const LANES: usize = 16;
    let mut acc = [0f32; LANES];
    let (ca, cb) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for k in 0..LANES {
            acc[k] += x[k] * y[k];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// ‖N row‖² for the linear part of a normalisation N: γ ⊙ (row − mean(row)) for LayerNorm,
/// γ ⊙ row for RMSNorm, with no buffer for N row.
fn normed_sq((gamma, kind, _): (&[f32], NormKind, f32), row: &[f32]) -> f32 {
    const LANES: usize = 16;
    let mean = match kind {
        NormKind::Layer => row.iter().sum::<f32>() / row.len() as f32,
        NormKind::Rms => 0.0,
    };
    let mut acc = [0f32; LANES];
    let (cr, cg) = (row.chunks_exact(LANES), gamma.chunks_exact(LANES));
    let tail: f32 = cr
        .remainder()
        .iter()
        .zip(cg.remainder())
        .map(|(x, g)| ((x - mean) * g).powi(2))
        .sum();
    for (x, g) in cr.zip(cg) {
        for k in 0..LANES {
            let v = (x[k] - mean) * g[k];
            acc[k] += v * v;
        }
    }
    acc.iter().sum::<f32>() + tail
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

/// Nᵀ y for the linear part N of a normalisation (see [`apply`]), so that ⟨N f, y⟩ = ⟨f, Nᵀ y⟩:
/// γ ⊙ y, less its mean for LayerNorm (the centring is symmetric); y itself without a norm.
fn transpose_applied(norm: Option<(&[f32], NormKind, f32)>, mut y: Vec<f32>) -> Vec<f32> {
    if let Some((gamma, kind, _)) = norm {
        y.iter_mut().zip(gamma).for_each(|(v, g)| *v *= g);
        if kind == NormKind::Layer {
            let mean = y.iter().sum::<f32>() / y.len() as f32;
            y.iter_mut().for_each(|v| *v -= mean);
        }
    }
    y
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::weights::Weight;
    use crate::kernels::testing::random;

    /// The weight `[heads · d, hidden]` as a map in each layout the analyses read in place.
    fn maps(w: &[f32], width: usize, hidden: usize) -> [Linear; 2] {
        let mut t = vec![0f32; w.len()];
        for c in 0..width {
            for o in 0..hidden {
                t[o * width + c] = w[c * hidden + o];
            }
        }
        [
            Linear::new(
                Weight::owned(w.to_vec(), vec![width, hidden]),
                Layout::InOut,
                None,
            ),
            Linear::new(Weight::owned(t, vec![hidden, width]), Layout::OutIn, None),
        ]
    }

    #[test]
    fn each_head_s_product_reads_either_layout_as_its_rows_of_w() {
        let (heads, d, hidden, rows) = (3, 5, 37, 11);
        let width = heads * d;
        let w = random(width * hidden, 1, 1.0);
        let v = random(rows * d, 2, 1.0);
        for linear in maps(&w, width, hidden) {
            let maps = HeadMaps::of(&linear, heads, d);
            for h in 0..heads {
                let mut out = vec![f32::NAN; rows * hidden];
                maps.product(h, &v, rows, &mut out);
                for r in 0..rows {
                    for o in 0..hidden {
                        let want: f64 = (0..d)
                            .map(|c| v[r * d + c] as f64 * w[(h * d + c) * hidden + o] as f64)
                            .sum();
                        let got = out[r * hidden + o] as f64;
                        assert!(
                            (got - want).abs() < 1e-5,
                            "head {h} ({r}, {o}): {got} vs {want}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn the_reductions_follow_their_definitions() {
        // 37 values: two blocks of sixteen and a tail.
        let n = 37;
        let (f, y) = (random(n, 3, 2.0), random(n, 4, 2.0));
        let gamma: Vec<f32> = random(n, 5, 1.0).iter().map(|g| g + 1.5).collect();
        let close = |got: f32, want: f64| {
            assert!(
                (got as f64 - want).abs() <= 1e-5 * want.abs().max(1.0),
                "{got} vs {want}"
            )
        };
        let exact_dot = |a: &[f32], b: &[f32]| -> f64 {
            a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum()
        };
        close(sum_sq(&f), exact_dot(&f, &f));
        close(dot(&f, &y), exact_dot(&f, &y));
        for norm in [
            None,
            Some((&gamma[..], NormKind::Layer, 1e-5)),
            Some((&gamma[..], NormKind::Rms, 1e-5)),
        ] {
            let nf = apply(norm, &f);
            // ⟨N f, y⟩ = ⟨f, Nᵀ y⟩.
            close(
                dot(&f, &transpose_applied(norm, y.clone())),
                exact_dot(&nf, &y),
            );
            if let Some(n) = norm {
                close(normed_sq(n, &f), exact_dot(&nf, &nf));
            }
        }
    }
}
