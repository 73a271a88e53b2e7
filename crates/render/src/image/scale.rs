//! From attention values to cell colours: resampling a matrix to the cells shown, the colour
//! scale, and its tick marks.

use super::theme::Rgb;
use crate::colormap::Ramp;

/// Resample an `n × n` matrix (row-major) to `m × m` display cells. With `m >= n` each cell takes
/// the value of the matrix cell under it; with `m < n` each is the **largest** value of the block
/// of matrix cells it covers. Averaging would dim a sharp pattern (a previous-token diagonal
/// pooled 5 × 5 keeps a fifth of its weight) until it looks like a broad head; the maximum keeps
/// sharp heads bright and broad heads dim, which is what an overview must show.
#[cfg(test)]
pub(crate) fn resample(values: &[f32], n: usize, m: usize) -> Vec<f32> {
    resample2(values, (n, n), (m, m))
}

/// [`resample`] of an `nq × nk` matrix into `mq × mk` display cells.
pub(crate) fn resample2(
    values: &[f32],
    (nq, nk): (usize, usize),
    (mq, mk): (usize, usize),
) -> Vec<f32> {
    debug_assert_eq!(values.len(), nq * nk);
    if mq == nq && mk == nk {
        return values.to_vec();
    }
    let spans = |n: usize, m: usize| -> Vec<std::ops::Range<usize>> {
        (0..m)
            .map(|p| {
                let a = p * n / m;
                let b = ((p + 1) * n / m).max(a + 1).min(n);
                a..b
            })
            .collect()
    };
    resample_spans(values, nk, &spans(nq, mq), &spans(nk, mk))
}

/// [`resample2`] onto the cells of two grids (which may give a segment more cells than its
/// share: [`super::layout::Grid::segmented`]).
pub(crate) fn resample_grids(
    values: &[f32],
    (rows, cols): (&super::layout::Grid, &super::layout::Grid),
) -> Vec<f32> {
    if rows.split.is_none() && cols.split.is_none() {
        return resample2(values, (rows.n, cols.n), (rows.m, cols.m));
    }
    let spans = |g: &super::layout::Grid| (0..g.m).map(|p| g.span(p)).collect::<Vec<_>>();
    resample_spans(values, cols.n, &spans(rows), &spans(cols))
}

/// [`resample_mask`] onto the cells of two grids.
pub(crate) fn resample_mask_grids(
    mask: &[bool],
    grids: (&super::layout::Grid, &super::layout::Grid),
) -> Vec<bool> {
    let as_values: Vec<f32> = mask.iter().map(|&b| if b { 0.0 } else { 1.0 }).collect();
    resample_grids(&as_values, grids)
        .into_iter()
        .map(|v| v == 0.0)
        .collect()
}

/// Each display cell the largest value of the matrix cells under it.
fn resample_spans(
    values: &[f32],
    nk: usize,
    row_spans: &[std::ops::Range<usize>],
    col_spans: &[std::ops::Range<usize>],
) -> Vec<f32> {
    let (mq, mk) = (row_spans.len(), col_spans.len());
    let mut out = Vec::with_capacity(mq * mk);
    for rows in row_spans {
        for cols in col_spans {
            let mut max = f32::NEG_INFINITY;
            for r in rows.clone() {
                let row = &values[r * nk..(r + 1) * nk];
                max = row[cols.clone()].iter().copied().fold(max, f32::max);
            }
            out.push(max);
        }
    }
    out
}

/// Resample an `n × n` cell mask like [`resample`]: a display cell is masked when every matrix
/// cell under it is.
pub(crate) fn resample_mask(mask: &[bool], n: (usize, usize), m: (usize, usize)) -> Vec<bool> {
    let as_values: Vec<f32> = mask.iter().map(|&b| if b { 0.0 } else { 1.0 }).collect();
    resample2(&as_values, n, m)
        .into_iter()
        .map(|v| v == 0.0)
        .collect()
}

/// How values map to colours (`--scale`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ColorScale {
    /// [`ColorScale::Sqrt`] where a linear scale would show one colour, else
    /// [`ColorScale::Linear`]: see [`ColorScale::resolve`]. The figure says which it chose, and
    /// why.
    #[default]
    Auto,
    /// Colour proportional to the value, from 0 to the largest value shown.
    Linear,
    /// Colour proportional to the square root: weak links become visible, zero stays zero.
    Sqrt,
    /// Colour proportional to the logarithm, over [`LOG_DECADES`] decades below the largest
    /// value; smaller values get the lowest colour.
    Log,
}

crate::choice!(ColorScale {
    Auto => ("auto", "Square root over 64 tokens, or when the first token holds most of the attention; else linear"),
    Linear => ("linear", "Proportional to the weight"),
    Sqrt => ("sqrt", "Proportional to the square root of the weight"),
    Log => ("log", "Logarithmic, three decades below the largest weight"),
});

/// Over this many units (rows or columns), [`ColorScale::Auto`] draws on a square-root scale: a
/// weight spread over 65 keys is about 0.015, a sixtieth of the colour range on a linear scale.
pub const AUTO_SQRT_UNITS: usize = 64;

/// [`ColorScale::Auto`] also draws on a square-root scale when the first column (a causal
/// model's attention sink, BERT's `[CLS]`) holds more than this share of every row on average:
/// the rest of the matrix is then nearly one colour on a linear scale.
pub const AUTO_SQRT_FIRST_SHARE: f64 = 0.5;

impl ColorScale {
    /// The name on the command line and in captions.
    pub fn as_str(self) -> &'static str {
        crate::choice::Choice::name(self)
    }

    /// The scale to draw `matrices` (each `nq × nk`, row-major) on, and why when
    /// [`ColorScale::Auto`] chose it: square root when there are more than `AUTO_SQRT_UNITS`
    /// rows or columns (`why`: "over 64 tokens"), or when the first column holds more than
    /// `AUTO_SQRT_FIRST_SHARE` of the rows' weight on average ("the first token holds 81%
    /// of each row on average"); else linear, with no reason. Any other scale is itself, with no
    /// reason. `unit` names a row ("token", "word").
    pub fn resolve<'a>(
        self,
        matrices: impl IntoIterator<Item = &'a [f32]>,
        (nq, nk): (usize, usize),
        unit: &str,
    ) -> (ColorScale, Option<String>) {
        if self != ColorScale::Auto {
            return (self, None);
        }
        if nq.max(nk) > AUTO_SQRT_UNITS {
            return (
                ColorScale::Sqrt,
                Some(format!("over {AUTO_SQRT_UNITS} {unit}s")),
            );
        }
        let share = first_column_share(matrices, nk);
        if share > AUTO_SQRT_FIRST_SHARE {
            return (
                ColorScale::Sqrt,
                Some(format!(
                    "the first {unit} holds {:.0}% of each row on average",
                    share * 100.0
                )),
            );
        }
        (ColorScale::Linear, None)
    }
}

/// The mean, over every row of every matrix, of the row's weight in the first column.
pub fn first_column_share<'a>(matrices: impl IntoIterator<Item = &'a [f32]>, nk: usize) -> f64 {
    if nk == 0 {
        return 0.0;
    }
    let (mut sum, mut rows) = (0f64, 0usize);
    for m in matrices {
        for row in m.chunks_exact(nk) {
            sum += row[0] as f64;
            rows += 1;
        }
    }
    if rows == 0 {
        0.0
    } else {
        sum / rows as f64
    }
}

/// Decades a log scale spans below its largest value: attention of 512 tokens spread evenly is
/// 0.002, so three decades below a top weight near 1 still tell "even" from "ignored".
pub const LOG_DECADES: i32 = 3;

/// A colour scale from 0 (or, on a log scale, `max / 10^LOG_DECADES`) to `max`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Scale {
    pub max: f32,
    pub kind: ColorScale,
}

impl Scale {
    /// The scale for values whose largest finite value is `max` (0 and non-finite fall back to 1,
    /// so an all-zero matrix still draws).
    pub(crate) fn up_to<'a>(values: impl IntoIterator<Item = &'a f32>, kind: ColorScale) -> Self {
        let max = values
            .into_iter()
            .copied()
            .filter(|v| v.is_finite())
            .fold(0f32, f32::max);
        Scale {
            max: if max > 0.0 { max } else { 1.0 },
            kind,
        }
    }

    /// The smallest value the scale tells apart from lower ones.
    fn floor(&self) -> f64 {
        match self.kind {
            ColorScale::Log => self.max as f64 / 10f64.powi(LOG_DECADES),
            _ => 0.0,
        }
    }

    /// Position of `v` on the scale, in `[0, 1]` (NaN at 0).
    pub(crate) fn unit(&self, v: f32) -> f32 {
        let t = (v / self.max).clamp(0.0, 1.0);
        let t = if t.is_nan() { 0.0 } else { t };
        match self.kind {
            ColorScale::Linear | ColorScale::Auto => t,
            ColorScale::Sqrt => t.sqrt(),
            ColorScale::Log => {
                if t <= 0.0 {
                    0.0
                } else {
                    (1.0 + t.log10() / LOG_DECADES as f32).clamp(0.0, 1.0)
                }
            }
        }
    }

    /// Colours of `values`.
    pub(crate) fn colors(&self, ramp: &Ramp, values: &[f32]) -> Vec<Rgb> {
        values.iter().map(|&v| ramp.at(self.unit(v))).collect()
    }

    /// What the colour bar caption adds for this scale.
    pub(crate) fn caption_suffix(&self) -> &'static str {
        match self.kind {
            ColorScale::Linear | ColorScale::Auto => "",
            ColorScale::Sqrt => " (square-root scale)",
            ColorScale::Log => " (log scale)",
        }
    }

    /// Tick values with their labels, at real values wherever the scale puts them: on a linear
    /// scale "nice" round numbers from 0 to at most `max`, 3 to 6 of them, all with the same
    /// decimals; on square-root and log scales 1-2-5 numbers (and 0 on square-root) no closer
    /// than a tenth of the bar to each other.
    pub(crate) fn ticks(&self) -> Vec<(f32, String)> {
        match self.kind {
            ColorScale::Linear | ColorScale::Auto => self.linear_ticks(),
            _ => self.spread_ticks(),
        }
    }

    fn linear_ticks(&self) -> Vec<(f32, String)> {
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

    fn spread_ticks(&self) -> Vec<(f32, String)> {
        let max = self.max as f64;
        let floor = self.floor();
        let top = max.log10().floor() as i32;
        // candidates, largest first: 5, 2, 1 × 10^e for every decade down to the floor
        let mut candidates: Vec<(f64, usize)> = Vec::new();
        for e in (top - LOG_DECADES - 1..=top).rev() {
            for m in [5.0, 2.0, 1.0] {
                let v = m * 10f64.powi(e);
                if v <= max * (1.0 + 1e-9) && v >= floor * (1.0 - 1e-9) && v > 0.0 {
                    candidates.push((v, e.min(0).unsigned_abs() as usize));
                }
            }
        }
        if self.kind == ColorScale::Sqrt {
            candidates.push((0.0, 0));
        }
        // powers of ten first, then 5s, then 2s, so a crowded bar keeps the most telling ticks
        // (0 on a square-root scale before everything: a tick close above it gives way.)
        let rank = |v: f64| {
            let m = (v / 10f64.powf(v.log10().floor())).round();
            if v == 0.0 {
                -1
            } else if m == 1.0 {
                0
            } else if m == 5.0 {
                1
            } else {
                2
            }
        };
        candidates.sort_by(|a, b| rank(a.0).cmp(&rank(b.0)).then(b.0.total_cmp(&a.0)));
        let mut chosen: Vec<(f64, usize)> = Vec::new();
        for (v, decimals) in candidates {
            let u = self.unit(v as f32);
            if chosen
                .iter()
                .all(|&(w, _)| (self.unit(w as f32) - u).abs() >= 0.095)
            {
                chosen.push((v, decimals));
            }
        }
        chosen.sort_by(|a, b| a.0.total_cmp(&b.0));
        chosen
            .into_iter()
            .map(|(v, d)| (v as f32, format!("{v:.d$}")))
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
        let t = |max: f32| {
            Scale {
                max,
                kind: ColorScale::Linear,
            }
            .ticks()
        };
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

#[cfg(test)]
mod scale_kinds {
    use super::*;

    fn scale(max: f32, kind: ColorScale) -> Scale {
        Scale { max, kind }
    }

    #[test]
    fn sqrt_and_log_put_ticks_at_their_real_values() {
        for kind in [ColorScale::Sqrt, ColorScale::Log] {
            for max in [1.0f32, 0.93, 0.3, 0.05, 0.0021] {
                let s = scale(max, kind);
                let ticks = s.ticks();
                assert!(ticks.len() >= 3, "{kind:?} {max}: {ticks:?}");
                for (v, label) in &ticks {
                    // the label is the value, and the value is where the scale puts it
                    let parsed: f32 = label.parse().unwrap();
                    assert!((parsed - v).abs() <= v * 1e-5, "{label} vs {v}");
                    assert!(*v <= max * 1.000_01);
                    let u = s.unit(*v);
                    let expect = match kind {
                        ColorScale::Sqrt => (v / max).sqrt(),
                        _ => 1.0 + (v / max).log10() / LOG_DECADES as f32,
                    };
                    assert!((u - expect).abs() < 1e-5, "{kind:?} {v}: {u} vs {expect}");
                }
                // ticks are apart on the bar
                for w in ticks.windows(2) {
                    assert!(s.unit(w[1].0) - s.unit(w[0].0) >= 0.094, "{ticks:?}");
                }
            }
        }
        let labels = |t: Vec<(f32, String)>| t.into_iter().map(|(_, l)| l).collect::<Vec<_>>();
        assert_eq!(
            labels(scale(1.0, ColorScale::Log).ticks()),
            ["0.001", "0.002", "0.005", "0.01", "0.02", "0.05", "0.1", "0.2", "0.5", "1"]
        );
        assert_eq!(
            labels(scale(1.0, ColorScale::Sqrt).ticks()),
            ["0", "0.01", "0.1", "0.2", "0.5", "1"]
        );
    }

    #[test]
    fn scales_spread_small_values() {
        // 512 tokens of even attention (0.002) against a top weight of 0.9: nearly the lowest
        // colour on a linear scale, a visible step up on sqrt and log
        let (v, max) = (0.002f32, 0.9f32);
        assert!(scale(max, ColorScale::Linear).unit(v) < 0.003);
        assert!(scale(max, ColorScale::Sqrt).unit(v) > 0.04);
        assert!(scale(max, ColorScale::Log).unit(v) > 0.1);
        // every scale keeps order, 0 at the bottom, max at the top
        for kind in [ColorScale::Linear, ColorScale::Sqrt, ColorScale::Log] {
            let s = scale(max, kind);
            assert_eq!((s.unit(0.0), s.unit(max)), (0.0, 1.0));
            assert_eq!(s.unit(f32::NAN), 0.0);
            let mut last = -1.0;
            for i in 0..=1000 {
                let u = s.unit(max * i as f32 / 1000.0);
                assert!(u >= last);
                last = u;
            }
        }
    }
}
