//! The largest logit of a large vocabulary without reading the whole f32 output matrix: an
//! 8-bit copy of it (ggml's Q8_0 blocks, 4.25 times fewer bytes) gives every row's logit to
//! within a bound proved for that row, and only the rows whose bound reaches the best lower
//! bound are computed again in f32 by [`linear`](fn@super::linear). Greedy decoding takes the
//! same token as it would from the full f32 product, ties included, while reading about a
//! quarter of the bytes: at one token per step the product is bound by memory, not arithmetic
//! (Whisper tiny's tied embedding is 80 MB of f32 read for every token).
//!
//! The bound for row `r` and input `h`: `|exact_r − approx_r| ≤ ‖h‖₁ · slack_r`, with
//! `slack_r = e_r + γ · (max|w_r| + max|ŵ_r|)`, where `e_r` is the row's largest quantisation
//! error `|w − ŵ|` (measured, not assumed) and `γ = n·u / (1 − n·u)` bounds the rounding of an
//! f32 dot product of length `n` in any order (u = 2⁻²⁴), once for each of the two products.

use attnviz_core::multiversion;
use candle_core::quantized::GgmlDType;
use half::f16;
use rayon::prelude::*;

use super::linear::{linear, Layout, Matrix, Output};
use super::quant::{linear_quant, QuantMatrix};
use super::Activation;

/// Weights per Q8_0 block, and bytes per block (an f16 scale and 32 signed bytes).
const BLOCK: usize = 32;
const BLOCK_BYTES: usize = 34;

/// An `[outputs, inputs]` f32 matrix's 8-bit copy with each row's error bound.
pub struct LogitScreen {
    q8: Vec<u8>,
    slack: Vec<f32>,
    outputs: usize,
    inputs: usize,
}

impl LogitScreen {
    /// The screen of `w` (`[outputs, inputs]`, row-major), or `None` when its rows are not
    /// whole Q8_0 blocks or it holds a value that is not finite or beyond ±10⁶.
    pub fn new(w: &[f32], outputs: usize, inputs: usize) -> Option<LogitScreen> {
        if inputs == 0 || !inputs.is_multiple_of(BLOCK) || w.len() != outputs * inputs {
            return None;
        }
        // Scales stay well inside f16 (65504).
        let in_range = w
            .par_chunks(64 * 1024)
            .all(|c| c.iter().fold(true, |ok, x| ok & (x.abs() < 1e6)));
        if !in_range {
            return None;
        }
        let blocks = inputs / BLOCK;
        let mut q8 = vec![0u8; outputs * blocks * BLOCK_BYTES];
        let mut slack = vec![0f32; outputs];
        // Two more terms than weights: the kernels may scale each block's sum by its scale.
        let gamma = dot_rounding(inputs + 2);
        const ROWS: usize = 256;
        w.par_chunks(ROWS * inputs)
            .zip(q8.par_chunks_mut(ROWS * blocks * BLOCK_BYTES))
            .zip(slack.par_chunks_mut(ROWS))
            .for_each(|((w, q8), slack)| {
                for ((row, bytes), slack) in w
                    .chunks_exact(inputs)
                    .zip(q8.chunks_exact_mut(blocks * BLOCK_BYTES))
                    .zip(slack)
                {
                    let mut stats = [0f32; 3];
                    quantise_row(row, bytes, &mut stats);
                    let [err, max_w, max_q] = stats.map(f64::from);
                    // Rounded up a little: `err` and the maxima are exact.
                    *slack = ((err + gamma * (max_w + max_q)) * (1.0 + 1e-6)) as f32;
                }
            });
        Some(LogitScreen {
            q8,
            slack,
            outputs,
            inputs,
        })
    }

    /// Bytes the screen reads per product.
    pub fn bytes(&self) -> usize {
        self.q8.len()
    }

    /// The rows whose exact logit `w_r · h` may be the largest once `mask` has run, ascending:
    /// `mask` sets to −∞ the logits of rows that may not be chosen, whatever their values (it
    /// is given each row's upper bound). `None` when `h` is not finite (the caller computes
    /// every logit and finds the NaN).
    pub fn candidates(&self, h: &[f32], mask: &mut dyn FnMut(&mut [f32])) -> Option<Vec<usize>> {
        assert_eq!(h.len(), self.inputs, "input");
        let norm: f64 = h.iter().map(|x| f64::from(x.abs())).sum();
        if !norm.is_finite() {
            return None;
        }
        let approx = self.estimates(h);
        // The mask sees the estimates; only which rows it sets to −∞ matters.
        let mut allowed = approx.clone();
        mask(&mut allowed);
        // Bounds in f64, so that adding them rounds nothing away.
        let margin = |s: f32| norm * f64::from(s) * (1.0 + 1e-6);
        let mut best_lower = f64::NEG_INFINITY;
        for ((a, s), m) in approx.iter().zip(&self.slack).zip(&allowed) {
            if *m != f32::NEG_INFINITY {
                best_lower = best_lower.max(f64::from(*a) - margin(*s));
            }
        }
        Some(
            (0..self.outputs)
                .filter(|&r| {
                    allowed[r] != f32::NEG_INFINITY
                        && f64::from(approx[r]) + margin(self.slack[r]) >= best_lower
                })
                .collect(),
        )
    }
}

multiversion! {
    /// One row into Q8_0 blocks (an f16 scale `max|x| / 127`, then each weight rounded to a
    /// byte), and into `stats` the row's largest error `|x − scale · byte|`, its largest `|x|`
    /// and its largest decoded `|scale · byte|`. All three are exact: the decoded value (11
    /// bits times 8) is exact in f32, and so is its difference from `x` (Sterbenz: a non-zero
    /// byte puts `x` within a factor 2 of it; a zero byte leaves `x` itself).
    fn quantise_row(row: &[f32], out: &mut [u8], stats: &mut [f32; 3]) {
        // Adding and subtracting 1.5 · 2²³ rounds an f32 below 2²² to the nearest integer.
        const ROUND: f32 = 12_582_912.0;
        let (mut err, mut max_w, mut max_q) = ([0f32; BLOCK], [0f32; BLOCK], [0f32; BLOCK]);
        for (block, out) in row.chunks_exact(BLOCK).zip(out.chunks_exact_mut(BLOCK_BYTES)) {
            let block: &[f32; BLOCK] = block.try_into().expect("a whole block");
            let mut amax = 0f32;
            for x in block {
                amax = if x.abs() > amax { x.abs() } else { amax };
            }
            let d = f16::from_f32(amax / 127.0);
            let scale = d.to_f32();
            let inv = if scale == 0.0 { 0.0 } else { 1.0 / scale };
            out[..2].copy_from_slice(&d.to_bits().to_le_bytes());
            let mut v = [0f32; BLOCK];
            for (v, x) in v.iter_mut().zip(block) {
                let r = (x * inv + ROUND) - ROUND;
                *v = r.clamp(-127.0, 127.0);
            }
            for (q, v) in out[2..].iter_mut().zip(&v) {
                *q = (*v as i32) as u8;
            }
            for k in 0..BLOCK {
                let back = scale * v[k];
                let e = (block[k] - back).abs();
                err[k] = if e > err[k] { e } else { err[k] };
                max_w[k] = if block[k].abs() > max_w[k] { block[k].abs() } else { max_w[k] };
                max_q[k] = if back.abs() > max_q[k] { back.abs() } else { max_q[k] };
            }
        }
        let most = |a: &[f32; BLOCK]| a.iter().fold(0f32, |m, &x| m.max(x));
        *stats = [most(&err), most(&max_w), most(&max_q)];
    }
}

impl LogitScreen {
    /// Every row's estimate `ŵ_r · h` from the 8-bit copy.
    fn estimates(&self, h: &[f32]) -> Vec<f32> {
        let mut approx = vec![0f32; self.outputs];
        let matrix = QuantMatrix::new(&self.q8, GgmlDType::Q8_0, self.outputs, self.inputs)
            .expect("whole blocks, checked when the screen was made");
        linear_quant(
            h,
            1,
            matrix,
            None,
            Output {
                data: &mut approx,
                stride: self.outputs,
                col0: 0,
            },
            Activation::Identity,
        )
        .expect("shapes checked when the screen was made");
        approx
    }
}

/// `γ_n = n·u / (1 − n·u)`: the relative bound on the rounding of an f32 sum of `n` products,
/// in any order (Higham, Accuracy and Stability of Numerical Algorithms, §3.1).
fn dot_rounding(n: usize) -> f64 {
    let nu = n as f64 * f64::from(f32::EPSILON) / 2.0;
    nu / (1.0 - nu)
}

/// The logits `w · h` (`w` `[outputs, inputs]`) that greedy decoding needs after `mask`: the
/// `candidates`' computed by [`linear`](fn@super::linear) exactly as the full product computes
/// them, every other row −∞.
pub fn screened_logits(w: &[f32], inputs: usize, h: &[f32], candidates: &[usize]) -> Vec<f32> {
    let outputs = w.len() / inputs;
    let mut logits = vec![f32::NEG_INFINITY; outputs];
    let mut one = [0f32; 1];
    for &r in candidates {
        linear(
            h,
            1,
            Matrix {
                data: &w[r * inputs..][..inputs],
                inputs,
                outputs: 1,
                layout: Layout::OutIn,
            },
            None,
            Output {
                data: &mut one,
                stride: 1,
                col0: 0,
            },
            Activation::Identity,
        );
        logits[r] = one[0];
    }
    logits
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::testing::random;

    fn full(w: &[f32], inputs: usize, h: &[f32]) -> Vec<f32> {
        let outputs = w.len() / inputs;
        let mut out = vec![0f32; outputs];
        linear(
            h,
            1,
            Matrix {
                data: w,
                inputs,
                outputs,
                layout: Layout::OutIn,
            },
            None,
            Output {
                data: &mut out,
                stride: outputs,
                col0: 0,
            },
            Activation::Identity,
        );
        out
    }

    /// The first index of the largest value, as greedy decoding takes it.
    fn first_max(x: &[f32]) -> usize {
        let mut best = 0;
        for (i, v) in x.iter().enumerate() {
            if *v > x[best] {
                best = i;
            }
        }
        best
    }

    /// One row computed alone equals the same row of the whole product, bit for bit, on every
    /// instruction set: the screen's winners are the full product's values.
    #[test]
    fn a_row_alone_equals_the_full_products_row() {
        for isa in [
            crate::kernels::Isa::Avx512,
            crate::kernels::Isa::Avx2,
            crate::kernels::Isa::Baseline,
        ] {
            attnviz_core::simd::with_isa(isa, || {
                let (outputs, inputs) = (1037, 384);
                let w = random(outputs * inputs, 7, 0.2);
                let h = random(inputs, 8, 3.0);
                let all = full(&w, inputs, &h);
                let rows: Vec<usize> = (0..outputs).collect();
                let alone = screened_logits(&w, inputs, &h, &rows);
                assert!(
                    all.iter()
                        .zip(&alone)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{isa:?}"
                );
            });
        }
    }

    /// Over many inputs, including near ties made on purpose: the full product's winner is
    /// always a candidate, the screened logits pick it, and the screen keeps few rows.
    #[test]
    fn the_screen_keeps_the_full_products_winner() {
        let (outputs, inputs) = (4099, 384);
        let mut w = random(outputs * inputs, 11, 0.3);
        // Rows 10 and 20 differ from row 5 in one weight by a hair: near ties.
        let row5: Vec<f32> = w[5 * inputs..6 * inputs].to_vec();
        for (r, bump) in [(10usize, 1e-6f32), (20, -1e-6)] {
            w[r * inputs..(r + 1) * inputs].copy_from_slice(&row5);
            w[r * inputs] += bump;
        }
        let screen = LogitScreen::new(&w, outputs, inputs).expect("whole blocks");
        assert_eq!(screen.bytes(), outputs * inputs / 32 * 34);
        let mut widest = 0;
        for seed in 0..200u64 {
            let mut h = random(inputs, 100 + seed, 2.0);
            if seed % 4 == 0 {
                // Point h along row 5 so that it and its near twins lead.
                h.copy_from_slice(&row5);
            }
            let exact = full(&w, inputs, &h);
            let cands = screen.candidates(&h, &mut |_| {}).expect("finite input");
            widest = widest.max(cands.len());
            let winner = first_max(&exact);
            assert!(cands.contains(&winner), "seed {seed}");
            let screened = screened_logits(&w, inputs, &h, &cands);
            assert_eq!(first_max(&screened), winner, "seed {seed}");
            for &c in &cands {
                assert_eq!(screened[c].to_bits(), exact[c].to_bits());
            }
        }
        assert!(
            widest < outputs / 10,
            "the screen kept {widest} of {outputs} rows"
        );
    }

    /// The bound holds row by row, and is not loose by orders of magnitude: the estimates'
    /// errors reach a good part of it.
    #[test]
    fn every_row_is_within_its_bound() {
        let (outputs, inputs) = (2048, 384);
        let w = random(outputs * inputs, 21, 0.25);
        let screen = LogitScreen::new(&w, outputs, inputs).expect("whole blocks");
        let mut tightest = 0f64;
        for seed in 0..20u64 {
            let h = random(inputs, 900 + seed, 4.0);
            let norm: f64 = h.iter().map(|x| f64::from(x.abs())).sum();
            let exact = full(&w, inputs, &h);
            let approx = screen.estimates(&h);
            for r in 0..outputs {
                let gap = (f64::from(exact[r]) - f64::from(approx[r])).abs();
                let bound = norm * f64::from(screen.slack[r]);
                assert!(gap <= bound, "row {r}: {gap} > {bound}");
                tightest = tightest.max(gap / bound);
            }
        }
        assert!(
            tightest > 0.05,
            "largest error only {tightest} of the bound"
        );
    }

    /// A mask that forbids the best rows moves the winner to the best allowed row, as masking
    /// the full product does.
    #[test]
    fn a_mask_is_applied_before_the_threshold() {
        let (outputs, inputs) = (512, 64);
        let w = random(outputs * inputs, 3, 0.5);
        let screen = LogitScreen::new(&w, outputs, inputs).expect("whole blocks");
        for seed in 0..50u64 {
            let h = random(inputs, 500 + seed, 1.0);
            let mut exact = full(&w, inputs, &h);
            // Forbid the top 20 rows of the exact product and every odd row.
            let mut order: Vec<usize> = (0..outputs).collect();
            order.sort_by(|&a, &b| exact[b].total_cmp(&exact[a]));
            let forbidden: Vec<usize> = order[..20].to_vec();
            let mut mask = |l: &mut [f32]| {
                for &r in &forbidden {
                    l[r] = f32::NEG_INFINITY;
                }
                for r in (1..l.len()).step_by(2) {
                    l[r] = f32::NEG_INFINITY;
                }
            };
            let cands = screen.candidates(&h, &mut mask).expect("finite");
            mask(&mut exact);
            let winner = first_max(&exact);
            let mut screened = screened_logits(&w, inputs, &h, &cands);
            mask(&mut screened);
            assert_eq!(first_max(&screened), winner, "seed {seed}");
        }
    }

    #[test]
    fn rows_of_partial_blocks_or_non_finite_inputs_are_not_screened() {
        assert!(LogitScreen::new(&[0.0; 40], 2, 20).is_none());
        let mut w = vec![0.5f32; 64];
        w[3] = f32::INFINITY;
        assert!(LogitScreen::new(&w, 2, 32).is_none());
        let screen = LogitScreen::new(&[0.5; 64], 2, 32).expect("whole blocks");
        let mut h = vec![1.0f32; 32];
        h[0] = f32::NAN;
        assert!(screen.candidates(&h, &mut |_| {}).is_none());
    }
}
