//! Attention rollout with a choice of head fusion and a discard ratio, as vit-explain (Jacob
//! Gildenblat's `vit_rollout.py`, the script most people draw ViT rollout with) computes it:
//! for each layer, fuse the heads (mean, max or min), zero the smallest `discard_ratio` of the
//! fused matrix's entries (never the first token's attention to itself: the class token's, in a
//! ViT), add the identity, halve, renormalise the rows and multiply through the layers, later
//! layers on the left.
//!
//! One difference from the script, on purpose: it divides `a / a.sum(dim=-1)`, which in torch
//! broadcasts the row sums along the *columns* (entry `(i, j)` is divided by row `j`'s sum), so
//! its rows do not sum to 1 once entries are discarded or heads fused by max or min. Here every
//! row is divided by its own sum, as [`super::rollout`] (Abnar & Zuidema) does; with mean fusion
//! and no discarding the two agree exactly, and this equals [`super::rollout`].
//! `tests/reference/make_vision.py` checks it against a numpy reimplementation.

use crate::attention::Attention;

/// How a layer's heads are fused into one matrix before rolling out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HeadFusion {
    /// The mean over heads (Abnar & Zuidema's rollout).
    #[default]
    Mean,
    /// The largest weight of any head.
    Max,
    /// The smallest weight of any head.
    Min,
}

crate::choice!(HeadFusion {
    Mean => ("mean", "the mean over the layer's heads"),
    Max => ("max", "each weight's largest value over the heads"),
    Min => ("min", "each weight's smallest value over the heads"),
});

/// Why a rollout cannot be computed.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum FusedRolloutError {
    /// The ratio is not in `[0, 1)`.
    #[error("the discard ratio {0} is not between 0 and 1 (0 keeps every weight, 0.9 drops the smallest 90 %)")]
    Ratio(f32),
    /// Not self-attention over one set of units.
    #[error("rollout follows the residual stream through one set of tokens; this attention's queries and keys differ")]
    NotSquare,
}

/// The fused rollout of `att` through each layer: `[layer]` → `n × n` row-major (row = query),
/// rows summing to 1. See the module documentation.
pub fn fused_rollout(
    att: &Attention,
    fusion: HeadFusion,
    discard_ratio: f32,
) -> Result<Vec<Vec<f32>>, FusedRolloutError> {
    if !att.is_square() {
        return Err(FusedRolloutError::NotSquare);
    }
    fused_rollout_of(
        att.weights(),
        att.layers(),
        att.heads(),
        att.len(),
        fusion,
        discard_ratio,
    )
}

/// [`fused_rollout`] over raw weights `[layers][heads][n][n]` (row-major).
pub fn fused_rollout_of(
    weights: &[f32],
    layers: usize,
    heads: usize,
    n: usize,
    fusion: HeadFusion,
    discard_ratio: f32,
) -> Result<Vec<Vec<f32>>, FusedRolloutError> {
    if !(0.0..1.0).contains(&discard_ratio) {
        return Err(FusedRolloutError::Ratio(discard_ratio));
    }
    assert_eq!(
        weights.len(),
        layers * heads * n * n,
        "weights of the stated shape"
    );
    let nn = n * n;
    let mut acc: Option<Vec<f64>> = None;
    let mut out = Vec::with_capacity(layers);
    for l in 0..layers {
        let mut fused = vec![0f64; nn];
        for (i, f) in fused.iter_mut().enumerate() {
            let vals = (0..heads).map(|h| weights[(l * heads + h) * nn + i] as f64);
            *f = match fusion {
                HeadFusion::Mean => vals.sum::<f64>() / heads as f64,
                HeadFusion::Max => vals.fold(f64::NEG_INFINITY, f64::max),
                HeadFusion::Min => vals.fold(f64::INFINITY, f64::min),
            };
        }
        // The smallest `floor(n² · ratio)` entries (ties by position, as a stable sort takes
        // them), less entry 0 where it is among them.
        let drop = (nn as f64 * discard_ratio as f64) as usize;
        if drop > 0 {
            let mut order: Vec<usize> = (0..nn).collect();
            order.sort_by(|&a, &b| fused[a].total_cmp(&fused[b]).then(a.cmp(&b)));
            for &i in order[..drop].iter().filter(|&&i| i != 0) {
                fused[i] = 0.0;
            }
        }
        for q in 0..n {
            let row = &mut fused[q * n..(q + 1) * n];
            row[q] += 1.0;
            row.iter_mut().for_each(|v| *v *= 0.5);
            let sum: f64 = row.iter().sum();
            if sum > 0.0 {
                row.iter_mut().for_each(|v| *v /= sum);
            }
        }
        let next = match &acc {
            None => fused,
            Some(prev) => {
                let mut c = vec![0f64; nn];
                for i in 0..n {
                    for k in 0..n {
                        let a = fused[i * n + k];
                        if a != 0.0 {
                            let (src, dst) =
                                (&prev[k * n..(k + 1) * n], &mut c[i * n..(i + 1) * n]);
                            dst.iter_mut().zip(src).for_each(|(d, s)| *d += a * s);
                        }
                    }
                }
                c
            }
        };
        out.push(next.iter().map(|&v| v as f32).collect());
        acc = Some(next);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::fixtures::irregular;

    #[test]
    fn mean_fusion_without_discarding_is_the_plain_rollout() {
        let att = irregular(3, 2, 5);
        let plain = super::super::rollout(&att);
        let fused = fused_rollout(&att, HeadFusion::Mean, 0.0).unwrap();
        for (p, f) in plain.iter().flatten().zip(fused.iter().flatten()) {
            assert!((p - f).abs() < 1e-6, "{p} vs {f}");
        }
    }

    #[test]
    fn rows_sum_to_one_for_every_fusion_and_ratio() {
        let att = irregular(2, 3, 6);
        for fusion in [HeadFusion::Mean, HeadFusion::Max, HeadFusion::Min] {
            for ratio in [0.0, 0.5, 0.9] {
                let r = fused_rollout(&att, fusion, ratio).unwrap();
                for row in r[1].chunks(6) {
                    let s: f32 = row.iter().sum();
                    assert!((s - 1.0).abs() < 1e-5, "{fusion:?} {ratio}: {s}");
                }
            }
        }
    }

    #[test]
    fn a_ratio_outside_zero_to_one_is_refused() {
        let att = irregular(1, 1, 3);
        for r in [-0.1, 1.0, f32::NAN] {
            assert!(fused_rollout(&att, HeadFusion::Max, r).is_err());
        }
    }
}
