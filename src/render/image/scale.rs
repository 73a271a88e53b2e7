//! From attention values to cell colours: resampling a matrix to the cells shown, the colour
//! scale, and its tick marks.

use super::theme::Rgb;
use crate::render::colormap::Ramp;

/// Resample an `n × n` matrix (row-major) to `m × m` display cells. With `m >= n` each cell takes
/// the value of the matrix cell under it; with `m < n` each is the **largest** value of the block
/// of matrix cells it covers. Averaging would dim a sharp pattern (a previous-token diagonal
/// pooled 5 × 5 keeps a fifth of its weight) until it looks like a broad head; the maximum keeps
/// sharp heads bright and broad heads dim, which is what an overview must show.
pub(crate) fn resample(values: &[f32], n: usize, m: usize) -> Vec<f32> {
    debug_assert_eq!(values.len(), n * n);
    if m == n {
        return values.to_vec();
    }
    let span = |p: usize| {
        let a = p * n / m;
        let b = ((p + 1) * n / m).max(a + 1).min(n);
        a..b
    };
    let spans: Vec<_> = (0..m).map(span).collect();
    let mut out = Vec::with_capacity(m * m);
    for rows in &spans {
        for cols in &spans {
            let mut max = f32::NEG_INFINITY;
            for r in rows.clone() {
                let row = &values[r * n..(r + 1) * n];
                max = row[cols.clone()].iter().copied().fold(max, f32::max);
            }
            out.push(max);
        }
    }
    out
}

/// A linear colour scale from 0 to `max`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Scale {
    pub max: f32,
}

impl Scale {
    /// The scale for values whose largest finite value is `max` (0 and non-finite fall back to 1,
    /// so an all-zero matrix still draws).
    pub(crate) fn up_to<'a>(values: impl IntoIterator<Item = &'a f32>) -> Self {
        let max = values
            .into_iter()
            .copied()
            .filter(|v| v.is_finite())
            .fold(0f32, f32::max);
        Scale {
            max: if max > 0.0 { max } else { 1.0 },
        }
    }

    /// Position of `v` on the scale, in `[0, 1]`.
    pub(crate) fn unit(&self, v: f32) -> f32 {
        (v / self.max).clamp(0.0, 1.0)
    }

    /// Colours of `values`.
    pub(crate) fn colors(&self, ramp: &Ramp, values: &[f32]) -> Vec<Rgb> {
        values.iter().map(|&v| ramp.at(self.unit(v))).collect()
    }

    /// Tick values: "nice" round numbers from 0 to at most `max`, 3 to 6 of them, with labels
    /// that all use the same number of decimals.
    pub(crate) fn ticks(&self) -> Vec<(f32, String)> {
        let max = self.max as f64;
        let raw = max / 4.0;
        let mag = 10f64.powf(raw.log10().floor());
        let step = [1.0, 2.0, 2.5, 5.0, 10.0]
            .iter()
            .map(|m| m * mag)
            .find(|s| max / s <= 5.0 + 1e-9)
            .unwrap_or(10.0 * mag);
        let decimals = if step >= 1.0 {
            0
        } else {
            // enough decimals to show the step exactly (0.25 needs 2, 0.2 needs 1)
            (0..6)
                .find(|&d| {
                    let p = 10f64.powi(d);
                    ((step * p).round() - step * p).abs() < 1e-6
                })
                .unwrap_or(6) as usize
        };
        let count = (max / step + 1e-9).floor() as usize;
        (0..=count)
            .map(|i| {
                let v = i as f64 * step;
                (v as f32, format!("{v:.decimals$}"))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upsampling_repeats_and_downsampling_keeps_block_maxima() {
        let m = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(
            resample(&m, 2, 4),
            vec![1., 1., 2., 2., 1., 1., 2., 2., 3., 3., 4., 4., 3., 3., 4., 4.]
        );
        let big: Vec<f32> = (0..16).map(|i| i as f32).collect();
        // 4×4 → 2×2: maxima of the 2×2 blocks
        assert_eq!(resample(&big, 4, 2), vec![5.0, 7.0, 13.0, 15.0]);
        // uneven: 3 → 2 takes blocks {0}, {1, 2}
        let three: Vec<f32> = (0..9).map(|i| i as f32).collect();
        assert_eq!(resample(&three, 3, 2), vec![0.0, 2.0, 6.0, 8.0]);
    }

    #[test]
    fn a_sharp_diagonal_stays_bright_when_pooled() {
        let n = 512;
        let mut vals = vec![0.0f32; n * n];
        for i in 0..n {
            vals[i * n + i] = 1.0;
        }
        let pooled = resample(&vals, n, 112);
        for p in 0..112 {
            assert_eq!(pooled[p * 112 + p], 1.0);
        }
        assert_eq!(pooled[5], 0.0);
    }

    #[test]
    fn ticks_are_round_and_within_range() {
        let t = |max: f32| Scale { max }.ticks();
        let labels = |max| t(max).into_iter().map(|(_, s)| s).collect::<Vec<_>>();
        assert_eq!(labels(1.0), ["0.0", "0.2", "0.4", "0.6", "0.8", "1.0"]);
        assert_eq!(labels(0.93), ["0.0", "0.2", "0.4", "0.6", "0.8"]);
        assert_eq!(labels(0.5), ["0.0", "0.1", "0.2", "0.3", "0.4", "0.5"]);
        assert_eq!(labels(0.3), ["0.0", "0.1", "0.2", "0.3"]);
        assert_eq!(labels(0.013), ["0.000", "0.005", "0.010"]);
        for max in [0.013f32, 0.07, 0.3, 0.77, 1.0, 3.5, 250.0] {
            let ticks = t(max);
            assert!((3..=7).contains(&ticks.len()), "{max}: {ticks:?}");
            assert!(
                ticks.iter().all(|&(v, _)| v <= max * 1.000_01),
                "{max}: {ticks:?}"
            );
        }
    }
}
