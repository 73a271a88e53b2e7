//! Rotary position embeddings (RoPE, Su et al. 2021) as transformers' Llama computes them: the
//! "rotate half" convention, where dimension `i` of a head pairs with `i + head_dim/2`, and the
//! inverse frequencies of the `default`, `linear`, `llama3` and `longrope` rope types
//! (`transformers/modeling_rope_utils.py`), llama.cpp's per-frequency divisors (a GGUF file's
//! `rope_freqs.weight`), and partial rotary embeddings (the first `rotary_dim` values of each
//! head rotated, the rest kept: Phi-3's `partial_rotary_factor`).
//!
//! The rotation is applied in place to the query and key vectors of the fused projection's output,
//! before [`super::attention()`] reads them, so the captured q/k are the rotated ones: the vectors
//! whose dot product the softmax saw.
//!
//! Arithmetic follows transformers' float32 steps: `inv_freq = 1 / θ^(2i/d)` in f32, the angle
//! `position · inv_freq` as one f32 product, its cosine and sine rounded to f32, then
//! `x·cos + rotate_half(x)·sin` with each product rounded before the sum.

use rayon::prelude::*;

use super::PARALLEL_MIN;

/// How the inverse frequencies are scaled (transformers' `rope_type`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RopeScaling {
    /// `default`: none.
    None,
    /// `linear`: every frequency divided by `factor` (positions interpolated).
    Linear {
        /// The divisor.
        factor: f64,
    },
    /// `llama3`: low frequencies divided by `factor`, high ones kept, those between blended.
    Llama3 {
        /// The divisor of the low frequencies.
        factor: f64,
        /// Wavelengths above `original / low_freq_factor` are divided by `factor`.
        low_freq_factor: f64,
        /// Wavelengths below `original / high_freq_factor` are kept.
        high_freq_factor: f64,
        /// The context length of pre-training.
        original_max_position_embeddings: f64,
    },
}

/// YaRN's settings (transformers' `rope_parameters` of `rope_type: "yarn"`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Yarn {
    /// How much longer the context is made (`factor`).
    pub factor: f64,
    /// Rotations in the original context above which a dimension is kept (`beta_fast`, 32).
    pub beta_fast: f64,
    /// Rotations below which it is divided by `factor` (`beta_slow`, 1).
    pub beta_slow: f64,
    /// The context length of pre-training (`original_max_position_embeddings`).
    pub original: f64,
    /// Whether the ramp's ends are rounded to whole dimensions (`truncate`, default true).
    pub truncate: bool,
    /// The factor on the cosines and sines (`attention_factor`, else
    /// [`yarn_attention_factor`]).
    pub attention_factor: f64,
}

/// YaRN's default attention factor for a scaling `factor` (transformers' `get_mscale`):
/// `0.1·ln(factor) + 1`, or 1 for a factor of at most 1.
pub fn yarn_attention_factor(factor: f64) -> f64 {
    if factor <= 1.0 {
        1.0
    } else {
        0.1 * factor.ln() + 1.0
    }
}

/// The largest RoPE scaling factor accepted (real ones are 2–64: positions are divided by it).
pub const MAX_ROPE_FACTOR: f64 = 1e6;

/// A RoPE scaling factor that is unusable: it divides every position, so it must be positive,
/// finite and not absurdly large (0 gave "weights overflow on this input"; −1e30 was accepted).
#[derive(Clone, Copy, Debug, PartialEq, thiserror::Error)]
#[error("is {factor:?}; a RoPE scaling factor divides the positions, so it must be above 0 and at most {MAX_ROPE_FACTOR:e}")]
pub struct RopeFactorError {
    /// The factor refused.
    pub factor: f64,
}

/// Refuse a RoPE scaling factor out of range (see [`RopeFactorError`]).
pub fn rope_factor_in_range(factor: f64) -> Result<(), RopeFactorError> {
    if factor.is_finite() && factor > 0.0 && factor <= MAX_ROPE_FACTOR {
        Ok(())
    } else {
        Err(RopeFactorError { factor })
    }
}

/// The inverse frequencies of one model's rotary embedding.
#[derive(Clone, Debug, PartialEq)]
pub struct Rope {
    inv_freq: Vec<f32>,
    /// The size of a head: the first `2·inv_freq.len()` values are rotated.
    head_dim: usize,
    /// LongRoPE's frequencies for sequences longer than the `usize` positions of pre-training
    /// (`inv_freq` holds the short ones).
    long: Option<(Vec<f32>, usize)>,
    /// A factor on the cosines and sines (LongRoPE's attention factor; 1 otherwise).
    attention_factor: f32,
}

/// Cosines and sines for a list of positions: `[positions, rotary_dim/2]` each.
pub struct RopeTable {
    cos: Vec<f32>,
    sin: Vec<f32>,
    half: usize,
    head_dim: usize,
}

/// `1 / (factor[i] · θ^(2i/d))` in f32 as transformers' LongRoPE forms it (`factor` 1: the
/// default frequencies).
fn frequencies(dim: usize, theta: f64, factors: Option<&[f64]>) -> Vec<f32> {
    let base = theta as f32;
    (0..dim / 2)
        .map(|i| {
            let exponent = (2 * i) as f32 / dim as f32;
            let pow = (base as f64).powf(exponent as f64) as f32;
            match factors {
                Some(f) => 1.0 / (f[i] as f32 * pow),
                None => 1.0 / pow,
            }
        })
        .collect()
}

impl Rope {
    /// The frequencies for heads of `head_dim` (even) values, base `theta`.
    pub fn new(head_dim: usize, theta: f64, scaling: RopeScaling) -> Rope {
        assert!(
            head_dim >= 2 && head_dim.is_multiple_of(2),
            "rotary head size {head_dim}"
        );
        // base ** (arange(0, dim, 2).float() / dim), in f32.
        let mut inv_freq = frequencies(head_dim, theta, None);
        match scaling {
            RopeScaling::None => {}
            RopeScaling::Linear { factor } => {
                let factor = factor as f32;
                inv_freq.iter_mut().for_each(|f| *f /= factor);
            }
            RopeScaling::Llama3 {
                factor,
                low_freq_factor,
                high_freq_factor,
                original_max_position_embeddings: old,
            } => {
                let low_wavelen = old / low_freq_factor;
                let high_wavelen = old / high_freq_factor;
                let (factor, low, high, old) = (
                    factor as f32,
                    low_freq_factor as f32,
                    high_freq_factor as f32,
                    old as f32,
                );
                for f in &mut inv_freq {
                    let wavelen = (2.0 * std::f64::consts::PI) as f32 / *f;
                    let w = wavelen as f64;
                    let scaled = if w > low_wavelen { *f / factor } else { *f };
                    // Neither below the high-frequency bound nor above the low one (as transformers writes it).
                    let medium = (high_wavelen..=low_wavelen).contains(&w);
                    if medium {
                        let smooth = (old / wavelen - low) / (high - low);
                        *f = (1.0 - smooth) * scaled / factor + smooth * scaled;
                    } else {
                        *f = scaled;
                    }
                }
            }
        }
        Rope {
            inv_freq,
            head_dim,
            long: None,
            attention_factor: 1.0,
        }
    }

    /// YaRN (transformers' `rope_type: "yarn"`, `_compute_yarn_parameters`): frequencies
    /// blended between the plain ones (high frequencies, extrapolated) and the ones divided by
    /// `factor` (low frequencies, interpolated) along a linear ramp over the dimensions whose
    /// rotations in `original` positions fall between `beta_slow` and `beta_fast`, and the
    /// cosines and sines multiplied by `attention_factor` (transformers' default: `0.1·ln(factor)
    /// + 1`, [`yarn_attention_factor`]).
    pub fn yarn(head_dim: usize, theta: f64, yarn: Yarn) -> Rope {
        assert!(
            head_dim >= 2 && head_dim.is_multiple_of(2),
            "rotary head size {head_dim}"
        );
        let dim = head_dim as f64;
        // find_correction_dim: the dimension that turns `rotations` times in `original`
        // positions.
        let correction = |rotations: f64| {
            dim * (yarn.original / (rotations * 2.0 * std::f64::consts::PI)).ln()
                / (2.0 * theta.ln())
        };
        let (mut low, mut high) = (correction(yarn.beta_fast), correction(yarn.beta_slow));
        if yarn.truncate {
            low = low.floor();
            high = high.ceil();
        }
        let (low, mut high) = (low.max(0.0), high.min(dim - 1.0));
        if low == high {
            high += 0.001;
        }
        let factor = yarn.factor as f32;
        let base = theta as f32;
        let inv_freq = (0..head_dim / 2)
            .map(|i| {
                // pos_freqs = θ^(2i/d) in f32 (as `frequencies`); 1/pos and 1/(factor·pos).
                let exponent = (2 * i) as f32 / head_dim as f32;
                let pos = (base as f64).powf(exponent as f64) as f32;
                let extrapolated = 1.0 / pos;
                let interpolated = 1.0 / (factor * pos);
                let ramp = ((i as f32 - low as f32) / (high - low) as f32).clamp(0.0, 1.0);
                let extrapolation = 1.0 - ramp;
                interpolated * (1.0 - extrapolation) + extrapolated * extrapolation
            })
            .collect();
        Rope {
            inv_freq,
            head_dim,
            long: None,
            attention_factor: yarn.attention_factor as f32,
        }
    }

    /// Qwen2.5-VL's vision rotary embedding ("axial"): the frequencies of heads of
    /// `head_dim / 2` values, twice, for heads of `head_dim` values: a 2-D position's row
    /// turns the first copy and its column the second ([`Rope::table_sections`]).
    pub fn axial(head_dim: usize, theta: f64) -> Rope {
        assert!(
            head_dim >= 4 && head_dim.is_multiple_of(4),
            "axial rotary head {head_dim}"
        );
        let one = frequencies(head_dim / 2, theta, None);
        Rope {
            inv_freq: [one.clone(), one].concat(),
            head_dim,
            long: None,
            attention_factor: 1.0,
        }
    }

    /// LongRoPE (Phi-3.5, Phi-4-mini): frequencies `1/(short[i]·θ^(2i/d))` for sequences of at
    /// most `original` positions and `1/(long[i]·θ^(2i/d))` for longer ones (chosen per call by
    /// the largest position, as transformers' `longrope_frequency_update`), cosines and sines
    /// times `attention_factor`. `short` and `long` hold `rotary_dim/2` factors each.
    pub fn longrope(
        rotary_dim: usize,
        theta: f64,
        short: &[f64],
        long: &[f64],
        original: usize,
        attention_factor: f64,
    ) -> Rope {
        assert!(
            rotary_dim >= 2
                && rotary_dim.is_multiple_of(2)
                && short.len() == rotary_dim / 2
                && long.len() == rotary_dim / 2,
            "longrope factors for a rotary size of {rotary_dim}"
        );
        Rope {
            inv_freq: frequencies(rotary_dim, theta, Some(short)),
            head_dim: rotary_dim,
            long: Some((frequencies(rotary_dim, theta, Some(long)), original)),
            attention_factor: attention_factor as f32,
        }
    }

    /// The same frequencies, each divided by `factors[i]` (llama.cpp's `rope_freqs.weight`, Llama
    /// 3.1's scaling as a GGUF file stores it: the angle of frequency `i` is divided by it).
    pub fn with_freq_factors(mut self, factors: &[f32]) -> Rope {
        assert_eq!(
            factors.len(),
            self.inv_freq.len(),
            "one factor per frequency"
        );
        for (f, d) in self.inv_freq.iter_mut().zip(factors) {
            *f /= d;
        }
        self
    }

    /// The same rotation inside heads of `head_dim` values, of which it rotates the first
    /// `rotary_dim` and keeps the rest (partial rotary embeddings).
    pub fn with_head_dim(mut self, head_dim: usize) -> Rope {
        assert!(head_dim >= 2 * self.inv_freq.len(), "head of {head_dim}");
        self.head_dim = head_dim;
        self
    }

    /// LongRoPE's original context: sequences longer than this many positions use the long
    /// factors; `None` for other rotary embeddings.
    pub fn long_after(&self) -> Option<usize> {
        self.long.as_ref().map(|(_, original)| *original)
    }

    /// The size of a head (of which the first `2·inv_freq().len()` values are rotated).
    pub fn head_dim(&self) -> usize {
        self.head_dim
    }

    /// The inverse frequencies, `head_dim/2` of them.
    pub fn inv_freq(&self) -> &[f32] {
        &self.inv_freq
    }

    /// Cosines and sines at `positions`.
    pub fn table(&self, positions: impl IntoIterator<Item = usize>) -> RopeTable {
        let positions: Vec<usize> = positions.into_iter().collect();
        let half = self.inv_freq.len();
        let longest = positions.iter().max().map_or(0, |&p| p + 1);
        let inv_freq = match &self.long {
            Some((long, original)) if longest > *original => long,
            _ => &self.inv_freq,
        };
        let scale = self.attention_factor;
        let (mut cos, mut sin) = (Vec::new(), Vec::new());
        for p in positions {
            for &f in inv_freq {
                let angle = p as f32 * f;
                if scale == 1.0 {
                    cos.push((angle as f64).cos() as f32);
                    sin.push((angle as f64).sin() as f32);
                } else {
                    cos.push((angle as f64).cos() as f32 * scale);
                    sin.push((angle as f64).sin() as f32 * scale);
                }
            }
        }
        RopeTable {
            cos,
            sin,
            half,
            head_dim: self.head_dim,
        }
    }
}

impl Rope {
    /// Cosines and sines where each frequency takes its position from one of several rows of
    /// positions: the frequencies are cut into runs of `sections[i]` (which sum to
    /// `head_dim/2`), run `i` reading row `i % rows.len()`, every row as long as the first.
    /// Qwen2.5-VL's multimodal RoPE (M-RoPE: rows t, h, w, `mrope_section`) and its vision
    /// tower's 2-D RoPE (rows h, w, two equal runs) as transformers'
    /// `recomposition_frequencies` lays them out; with equal rows, [`Rope::table`].
    pub fn table_sections(&self, rows: &[&[usize]], sections: &[usize]) -> RopeTable {
        let half = self.inv_freq.len();
        assert!(
            !rows.is_empty()
                && rows.iter().all(|r| r.len() == rows[0].len())
                && sections.iter().sum::<usize>() == half
                && self.long.is_none(),
            "rotary sections {sections:?} over {half} frequencies"
        );
        let source: Vec<usize> = sections
            .iter()
            .enumerate()
            .flat_map(|(i, &n)| std::iter::repeat_n(i % rows.len(), n))
            .collect();
        let scale = self.attention_factor;
        let (mut cos, mut sin) = (Vec::new(), Vec::new());
        // Position p of every row, frequency by frequency.
        let mut at: Vec<std::slice::Iter<'_, usize>> = rows.iter().map(|r| r.iter()).collect();
        for _ in 0..rows[0].len() {
            let here: Vec<usize> = at
                .iter_mut()
                .map(|r| r.next().copied().unwrap_or(0))
                .collect();
            for (&f, &row) in self.inv_freq.iter().zip(&source) {
                let angle = here[row] as f32 * f;
                cos.push((angle as f64).cos() as f32 * scale);
                sin.push((angle as f64).sin() as f32 * scale);
            }
        }
        RopeTable {
            cos,
            sin,
            half,
            head_dim: self.head_dim,
        }
    }
}

impl RopeTable {
    /// Positions in the table.
    pub fn len(&self) -> usize {
        self.cos.len() / self.half.max(1)
    }

    /// Whether it has no positions.
    pub fn is_empty(&self) -> bool {
        self.cos.is_empty()
    }

    /// Rotate `heads` head vectors of each row of `data` in place: row `r` (of `stride` values,
    /// heads from column `offset`) at the table's position `r`; of each head the first
    /// `rotary_dim` values (the whole head unless partial).
    pub fn rotate(&self, data: &mut [f32], stride: usize, offset: usize, heads: usize) {
        let half = self.half;
        let d = self.head_dim;
        let rows = self.len();
        assert!(
            offset + heads * d <= stride && data.len() >= rows * stride,
            "rotary operand shape"
        );
        let run = |r: usize, row: &mut [f32]| {
            let (c, s) = (&self.cos[r * half..][..half], &self.sin[r * half..][..half]);
            for h in 0..heads {
                let x = &mut row[offset + h * d..][..2 * half];
                let (a, b) = x.split_at_mut(half);
                for i in 0..half {
                    let (x1, x2) = (a[i], b[i]);
                    a[i] = x1 * c[i] - x2 * s[i];
                    b[i] = x2 * c[i] + x1 * s[i];
                }
            }
        };
        let data = &mut data[..rows * stride];
        if data.len() < PARALLEL_MIN {
            data.chunks_exact_mut(stride)
                .enumerate()
                .for_each(|(r, row)| run(r, row));
        } else {
            data.par_chunks_exact_mut(stride)
                .enumerate()
                .for_each(|(r, row)| run(r, row));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::random;
    use super::*;

    #[test]
    fn sections_read_their_own_row_and_equal_rows_are_the_plain_table() {
        let rope = Rope::new(8, 100.0, RopeScaling::None);
        let (t, h, w) = ([3usize, 4], [5usize, 7], [9usize, 2]);
        let table = rope.table_sections(&[&t, &h, &w], &[1, 2, 1]);
        // Frequency 0 from t, 1 and 2 from h, 3 from w.
        let f = rope.inv_freq();
        for (p, want) in [[t[0], h[0], h[0], w[0]], [t[1], h[1], h[1], w[1]]]
            .iter()
            .enumerate()
        {
            for i in 0..4 {
                let angle = want[i] as f32 * f[i];
                assert_eq!(table.cos[p * 4 + i], (angle as f64).cos() as f32);
                assert_eq!(table.sin[p * 4 + i], (angle as f64).sin() as f32);
            }
        }
        let same = rope.table_sections(&[&h, &h, &h], &[1, 2, 1]);
        let plain = rope.table(h);
        assert_eq!((same.cos, same.sin), (plain.cos, plain.sin));
    }

    #[test]
    fn yarn_blends_along_its_ramp_and_scales_cos_and_sin() {
        // transformers' _compute_yarn_parameters in f64: head 16, θ 10000, factor 4 over 12
        // original positions, beta_fast 8, beta_slow 1, truncate false (tiny-gpt_oss's).
        let (d, theta, factor, original) = (16usize, 10000f64, 4f64, 12f64);
        let yarn = Yarn {
            factor,
            beta_fast: 8.0,
            beta_slow: 1.0,
            original,
            truncate: false,
            attention_factor: yarn_attention_factor(factor),
        };
        let rope = Rope::yarn(d, theta, yarn);
        let dim = d as f64;
        let corr = |rot: f64| {
            dim * (original / (rot * 2.0 * std::f64::consts::PI)).ln() / (2.0 * theta.ln())
        };
        let (low, high) = (corr(8.0).max(0.0), corr(1.0).min(dim - 1.0));
        for (i, &f) in rope.inv_freq().iter().enumerate() {
            let pos = theta.powf(2.0 * i as f64 / dim);
            let ramp = ((i as f64 - low) / (high - low)).clamp(0.0, 1.0);
            let keep = 1.0 - ramp;
            let want = (1.0 / (factor * pos)) * (1.0 - keep) + (1.0 / pos) * keep;
            assert!((f as f64 - want).abs() <= 1e-6 * want, "{i}: {f} vs {want}");
        }
        // The ramp runs through the middle: the first frequency kept, the last divided.
        let (f, plain) = (rope.inv_freq(), Rope::new(d, theta, RopeScaling::None));
        assert_eq!(f[0], plain.inv_freq()[0]);
        assert!((f[d / 2 - 1] * factor as f32 - plain.inv_freq()[d / 2 - 1]).abs() < 1e-9);
        let table = rope.table([5]);
        let scale = 0.1 * 4f64.ln() + 1.0;
        let angle = (5.0 * rope.inv_freq()[0]) as f64;
        assert!((table.cos[0] as f64 - scale * angle.cos()).abs() < 1e-6);
        assert!((table.sin[0] as f64 - scale * angle.sin()).abs() < 1e-6);
    }

    #[test]
    fn default_frequencies_follow_theta() {
        let rope = Rope::new(8, 10000.0, RopeScaling::None);
        let want = [1.0, 0.1, 0.01, 0.001];
        for (f, w) in rope.inv_freq().iter().zip(want) {
            assert!((*f as f64 - w).abs() <= w * 1e-6, "{f} vs {w}");
        }
        let linear = Rope::new(8, 10000.0, RopeScaling::Linear { factor: 2.0 });
        for (a, b) in linear.inv_freq().iter().zip(rope.inv_freq()) {
            assert_eq!(*a, b / 2.0);
        }
    }

    #[test]
    fn llama3_scaling_keeps_high_divides_low_and_blends_between() {
        // head_dim 8, θ 5000: wavelengths 2π·5000^(i/4) = 6.3, 53, 444, 3736. With original
        // context 64, low factor 1 and high factor 4, the zones are: wavelength < 16 kept,
        // > 64 divided by 8, between blended (tiny-llama-tied's configuration).
        let plain = Rope::new(8, 5000.0, RopeScaling::None);
        let rope = Rope::new(
            8,
            5000.0,
            RopeScaling::Llama3 {
                factor: 8.0,
                low_freq_factor: 1.0,
                high_freq_factor: 4.0,
                original_max_position_embeddings: 64.0,
            },
        );
        let (p, r) = (plain.inv_freq(), rope.inv_freq());
        assert_eq!(r[0], p[0], "high frequency kept");
        assert_eq!(r[2], p[2] / 8.0, "low frequency divided");
        assert_eq!(r[3], p[3] / 8.0, "low frequency divided");
        // Medium: smooth = (64/λ − 1)/3 with λ = 2π/f.
        let f = p[1] as f64;
        let smooth = (64.0 / (2.0 * std::f64::consts::PI / f) - 1.0) / 3.0;
        let want = (1.0 - smooth) * f / 8.0 + smooth * f;
        assert!(
            (r[1] as f64 - want).abs() < 1e-6 * want,
            "{} vs {want}",
            r[1]
        );
    }

    #[test]
    fn longrope_factors_partial_rotation_and_freq_factors() {
        // Short factors up to 16 positions, long ones beyond; cos/sin × the attention factor.
        let (short, long) = ([1.0, 2.0], [3.0, 5.0]);
        let rope = Rope::longrope(4, 100.0, &short, &long, 16, 1.5).with_head_dim(6);
        let plain = Rope::new(4, 100.0, RopeScaling::None);
        for (i, (s, p)) in rope.inv_freq().iter().zip(plain.inv_freq()).enumerate() {
            assert!((s * short[i] as f32 - p).abs() <= 1e-7 * p, "{s} {p}");
        }
        let within = rope.table([15]);
        let beyond = rope.table([16]);
        let angle = |f: f32| (16.0 * f) as f64;
        assert!(
            (within.cos[1] as f64 - 1.5 * (15.0 * rope.inv_freq()[1]).cos() as f64).abs() < 1e-6
        );
        let long_f = 1.0 / (5.0 * 10f32);
        assert!((beyond.cos[1] as f64 - 1.5 * angle(long_f).cos()).abs() < 1e-6);
        // Partial: of each 6-value head the first 4 turn, the last 2 stay.
        let x: Vec<f32> = (0..12).map(|v| v as f32 + 1.0).collect();
        let mut y = x.clone();
        rope.table([3]).rotate(&mut y, 12, 0, 2);
        assert_eq!((&y[4..6], &y[10..12]), (&x[4..6], &x[10..12]));
        assert_ne!(&y[0..4], &x[0..4]);
        // rope_freqs: each frequency divided by its factor.
        let divided = plain.clone().with_freq_factors(&[1.0, 4.0]);
        assert_eq!(
            divided.inv_freq(),
            &[plain.inv_freq()[0], plain.inv_freq()[1] / 4.0]
        );
    }

    #[test]
    fn rotation_matches_rotate_half_in_f64() {
        let (rows, heads, d) = (70, 3, 16);
        let stride = 5 * d + 3; // other columns around the rotated heads stay untouched
        let offset = 2 * d;
        let x = random(rows * stride, 21, 2.0);
        let rope = Rope::new(d, 10000.0, RopeScaling::None);
        let positions: Vec<usize> = (0..rows).map(|r| 5 + 3 * r).collect();
        let mut ours = x.clone();
        rope.table(positions.iter().copied())
            .rotate(&mut ours, stride, offset, heads);
        let half = d / 2;
        let mut worst: f64 = 0.0;
        for r in 0..rows {
            for col in 0..stride {
                let got = ours[r * stride + col] as f64;
                if col < offset || col >= offset + heads * d {
                    assert_eq!(got, x[r * stride + col] as f64, "column {col} untouched");
                    continue;
                }
                let within = (col - offset) % d;
                let base = col - within;
                let i = within % half;
                // The angle as one f32 product, as transformers forms it.
                let angle = (positions[r] as f32 * rope.inv_freq()[i]) as f64;
                let (c, s) = (angle.cos(), angle.sin());
                let (x1, x2) = (
                    x[r * stride + base + i] as f64,
                    x[r * stride + base + half + i] as f64,
                );
                let want = if within < half {
                    x1 * c - x2 * s
                } else {
                    x2 * c + x1 * s
                };
                worst = worst.max((got - want).abs());
            }
        }
        assert!(worst < 1e-5, "rotation off by {worst:e}");
        // Position 0 is the identity.
        let mut one = x[..stride].to_vec();
        rope.table([0]).rotate(&mut one, stride, offset, heads);
        assert_eq!(one, x[..stride]);
    }
}
