//! Normalisations over the last dimension, with the residual add fused in: LayerNorm (BERT and
//! its relatives, GPT-2, BART) and RMSNorm (Llama, T5).

use rayon::prelude::*;

use super::{LANES, PARALLEL_MIN};

/// The sum of `v`, in [`LANES`] partial sums (which vectorises) and then the tail.
#[inline(always)]
fn lane_sum(v: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut acc = [0f32; LANES];
    let chunks = v.chunks_exact(LANES);
    let rest = chunks.remainder();
    for c in chunks {
        for i in 0..LANES {
            acc[i] += f(c[i]);
        }
    }
    acc.iter().sum::<f32>() + rest.iter().map(|&x| f(x)).sum::<f32>()
}

/// One row of LayerNorm, in place: `(v − mean)/√(var + ε)·γ + β`, with the population variance
/// as transformers (and torch) compute it.
#[inline(always)]
pub(super) fn normalize_row(v: &mut [f32], gamma: &[f32], beta: &[f32], eps: f32) {
    let width = v.len() as f32;
    let mean = lane_sum(v, |x| x) / width;
    let var = lane_sum(v, |x| (x - mean) * (x - mean)) / width;
    let rstd = 1.0 / (var + eps).sqrt();
    for ((x, g), b) in v.iter_mut().zip(gamma).zip(beta) {
        *x = (*x - mean) * rstd * g + b;
    }
}

/// One row of RMSNorm, in place: `v / √(mean(v²) + ε) · w`, as transformers' LlamaRMSNorm and
/// T5LayerNorm compute it (no mean subtracted, no bias; the weight multiplies last).
#[inline(always)]
fn rms_row(v: &mut [f32], weight: &[f32], eps: f32) {
    let mean_square = lane_sum(v, |x| x * x) / v.len() as f32;
    let rstd = 1.0 / (mean_square + eps).sqrt();
    for (x, w) in v.iter_mut().zip(weight) {
        *x = w * (*x * rstd);
    }
}

/// How rows are normalised.
#[derive(Clone, Copy)]
enum Norm<'a> {
    Layer { gamma: &'a [f32], beta: &'a [f32] },
    Rms { weight: &'a [f32] },
}

multiversion! {
    /// `out[r] = norm(x[r] + residual[r])` (or `norm(x[r])`) for each row of `width` values.
    fn norm_rows(
        x: &[f32],
        residual: Option<&[f32]>,
        norm: Norm<'_>,
        eps: f32,
        width: usize,
        out: &mut [f32],
    ) {
        for (r, (o, a)) in out
            .chunks_exact_mut(width)
            .zip(x.chunks_exact(width))
            .enumerate()
        {
            match residual {
                Some(res) => {
                    for ((o, a), b) in o.iter_mut().zip(a).zip(&res[r * width..][..width]) {
                        *o = a + b;
                    }
                }
                None => o.copy_from_slice(a),
            }
            match norm {
                Norm::Layer { gamma, beta } => normalize_row(o, gamma, beta, eps),
                Norm::Rms { weight } => rms_row(o, weight, eps),
            }
        }
    }
}

fn run(x: &[f32], residual: Option<&[f32]>, norm: Norm<'_>, eps: f32, out: &mut [f32]) {
    let width = match norm {
        Norm::Layer { gamma, beta } => {
            assert!(beta.len() == gamma.len(), "LayerNorm weights");
            gamma.len()
        }
        Norm::Rms { weight } => weight.len(),
    };
    assert!(width > 0, "normalisation weights");
    assert!(
        x.len() == out.len()
            && residual.is_none_or(|r| r.len() == out.len())
            && out.len().is_multiple_of(width),
        "normalisation input shape"
    );
    if out.len() < PARALLEL_MIN {
        return norm_rows(x, residual, norm, eps, width, out);
    }
    let rows_per_task = (8 * 1024 / width).max(1);
    let chunk = rows_per_task * width;
    out.par_chunks_mut(chunk)
        .zip(x.par_chunks(chunk))
        .enumerate()
        .for_each(|(i, (o, a))| {
            let res = residual.map(|r| &r[i * chunk..][..o.len()]);
            norm_rows(a, res, norm, eps, width, o)
        });
}

/// `out = LayerNorm(x + residual)` row by row (rows of `gamma.len()` values): the residual
/// connection and normalisation of every post-LN sub-layer (BERT). Without a residual,
/// `LayerNorm(x)` (pre-LN blocks, and embeddings).
pub fn layer_norm(
    x: &[f32],
    residual: Option<&[f32]>,
    gamma: &[f32],
    beta: &[f32],
    eps: f32,
    out: &mut [f32],
) {
    run(x, residual, Norm::Layer { gamma, beta }, eps, out)
}

/// `out = LayerNorm(x + residual)` ([`layer_norm`] with a residual).
pub fn add_layer_norm(
    x: &[f32],
    residual: &[f32],
    gamma: &[f32],
    beta: &[f32],
    eps: f32,
    out: &mut [f32],
) {
    layer_norm(x, Some(residual), gamma, beta, eps, out)
}

/// `out = RMSNorm(x + residual)` (or `RMSNorm(x)`) row by row, rows of `weight.len()` values.
pub fn add_rms_norm(
    x: &[f32],
    residual: Option<&[f32]>,
    weight: &[f32],
    eps: f32,
    out: &mut [f32],
) {
    run(x, residual, Norm::Rms { weight }, eps, out)
}

#[cfg(test)]
mod tests {
    use super::super::testing::random;
    use super::*;

    #[test]
    fn layer_norm_matches_f64() {
        let (rows, width) = (100, 384); // big enough for the parallel path
        let x = random(rows * width, 4, 3.0);
        let res = random(rows * width, 5, 1.0);
        let gamma = random(width, 6, 1.0);
        let beta = random(width, 7, 1.0);
        for with_residual in [true, false] {
            let mut out = vec![0.0; rows * width];
            let residual = with_residual.then_some(res.as_slice());
            layer_norm(&x, residual, &gamma, &beta, 1e-12, &mut out);
            let mut worst: f64 = 0.0;
            for r in 0..rows {
                let v: Vec<f64> = (0..width)
                    .map(|i| {
                        x[r * width + i] as f64
                            + if with_residual {
                                res[r * width + i] as f64
                            } else {
                                0.0
                            }
                    })
                    .collect();
                let mean = v.iter().sum::<f64>() / width as f64;
                let var = v.iter().map(|a| (a - mean).powi(2)).sum::<f64>() / width as f64;
                for i in 0..width {
                    let want =
                        (v[i] - mean) / (var + 1e-12).sqrt() * gamma[i] as f64 + beta[i] as f64;
                    worst = worst.max((out[r * width + i] as f64 - want).abs());
                }
            }
            eprintln!("layer norm (residual {with_residual}): max |error| {worst:.3e}");
            assert!(worst < 2e-6, "layer norm error {worst:e}");
        }
    }

    #[test]
    fn rms_norm_matches_f64() {
        // A width that is not a multiple of the lanes, rows enough for the parallel path.
        let (rows, width) = (90, 576);
        let x = random(rows * width, 14, 3.0);
        let res = random(rows * width, 15, 1.0);
        let weight = random(width, 16, 2.0);
        for with_residual in [true, false] {
            let mut out = vec![0.0; rows * width];
            let residual = with_residual.then_some(res.as_slice());
            add_rms_norm(&x, residual, &weight, 1e-5, &mut out);
            let mut worst: f64 = 0.0;
            for r in 0..rows {
                let v: Vec<f64> = (0..width)
                    .map(|i| {
                        x[r * width + i] as f64
                            + if with_residual {
                                res[r * width + i] as f64
                            } else {
                                0.0
                            }
                    })
                    .collect();
                let ms = v.iter().map(|a| a * a).sum::<f64>() / width as f64;
                for i in 0..width {
                    let want = v[i] / (ms + 1e-5).sqrt() * weight[i] as f64;
                    worst = worst.max((out[r * width + i] as f64 - want).abs());
                }
            }
            eprintln!("rms norm (residual {with_residual}): max |error| {worst:.3e}");
            assert!(worst < 2e-6, "rms norm error {worst:e}");
        }
        // ε keeps an all-zero row finite.
        let mut out = vec![1.0; 4];
        add_rms_norm(&[0.0; 4], None, &[1.0; 4], 1e-6, &mut out);
        assert_eq!(out, vec![0.0; 4]);
    }
}
