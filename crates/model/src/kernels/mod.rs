//! CPU kernels for the forward pass's hot loops, on plain `f32` slices, shared by every model
//! family. Each variation between families is a parameter, never a copy:
//!
//! - [`linear`](mod@linear): matrix products with their bias and activation, on weights read in place from the
//!   checkpoint (`[out, in]`, as PyTorch stores them) or in the `[in, out]` layout (GPT-2's
//!   Conv1D, and our packed copies for long inputs);
//! - [`attention`](mod@attention): multi-head scaled dot-product attention with capture, an optional causal mask,
//!   a query-head → key/value-head map (grouped-query attention), any scale (T5 uses none), an
//!   optional bias added to the scores (relative positions), and queries and keys from different
//!   sequences (cross-attention);
//! - [`norm`]: LayerNorm and RMSNorm, with the residual add fused in;
//! - [`activation`]: GELU (erf and tanh), SiLU, ReLU, and SwiGLU gating;
//! - [`positions`] and [`embed`](mod@embed): position schemes (learned absolute, RoBERTa's padding offset,
//!   sinusoidal tables) and the embedding gather;
//! - [`rotary`]: rotary position embeddings (Llama and its relatives), applied to q and k in
//!   place.
//!
//! Why they exist instead of candle's own operations (MiniLM, 512 tokens, 2 threads; figures in
//! `docs/performance.md`):
//! - **Attention.** candle's batched matmul runs one multi-threaded gemm per head on small
//!   products (`[512, 32] × [32, 512]`), at 42–94 GFLOP/s, and the scores then take separate
//!   passes for the scale, the mask and the softmax, and another copy to leave the model.
//!   [`attention()`] works one head and one block of query rows at a time, on one thread each:
//!   `QKᵀ·scale` into the capture buffer, softmax in place while the block is still in cache,
//!   then `P·V` straight into the heads-concatenated context. The probabilities are written once,
//!   where the caller keeps them.
//! - **Softmax and GELU.** candle calls libm's `exp` and `erf` per element, scalar (and GELU on
//!   one thread). [`exp`] and [`erf`] here are branch-free polynomials the compiler vectorises.
//! - **Element-wise passes.** candle's bias add and residual add each take a pass over memory on
//!   a thread pool whose caller spin-waits for its workers; on a busy machine that spin took a
//!   quarter of the forward time in one profile. Here the bias rides in the matrix product,
//!   GELU runs on its output, and the residual add is fused into LayerNorm.
//!
//! Every kernel is checked against a plain reference in its tests (softmax against f64, `erf`
//! against libm over a dense grid, the attention against naive loops with causal masks and
//! grouped heads).
//!
//! The element-wise loops are compiled three times (AVX-512, AVX2+FMA and the baseline) and the
//! best one the CPU supports is picked at run time (`multiversion!`). All three compute the
//! same thing in the same order, so results do not depend on the CPU.

pub use attnviz_core::simd::{instruction_set, isa, Isa};
#[cfg(test)]
use attnviz_core::simd::{isa_levels, with_isa};

/// Lanes of the partial sums in reductions. Sixteen independent accumulators let the compiler
/// use one AVX-512 register (two AVX2, four SSE) without reordering floating-point additions,
/// which it may not do on its own.
const LANES: usize = 16;

/// `eˣ` in f32, branch-free so that loops over it vectorise.
pub mod activation;
pub mod attention;
pub mod embed;
pub mod gemm;
pub mod linear;
pub mod norm;
pub mod packed;
pub mod positions;
pub mod quant;
pub mod rotary;
pub mod screen;
#[cfg(test)]
mod summary_tests;

pub use activation::Activation;
pub use attention::{
    attention, capture_buffer, AttentionSpec, Block, CaptureSink, Mask, Operand, ScoreBias,
};
pub use embed::{embed, EmbeddingTables};
pub use linear::{linear, transpose_into, Layout, Matrix, Output};
pub use norm::{add_layer_norm, add_rms_norm, layer_norm};
pub use rotary::{yarn_attention_factor, Rope, RopeScaling, RopeTable, Yarn};

///
/// Cephes' `expf`: `x = n·ln 2 + r` with `|r| ≤ ln 2 / 2`, a degree-7 polynomial for `eʳ`, and
/// `2ⁿ` built in the exponent bits. `n` is rounded with the 1.5·2²³ trick rather than a float→int
/// cast, which would keep the loop scalar. Below −87.3 the result is 0 (eˣ < 2⁻¹²⁶), above 88.7
/// it is +∞; NaN stays NaN. Relative error ≤ 2 ulp (tested against f64).
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    const LO: f32 = -87.3;
    const HI: f32 = 88.7;
    const SHIFT: f32 = 12_582_912.0; // 1.5·2²³: x + SHIFT rounds x to an integer in the low bits
    const LN2_HI: f32 = 0.693_359_4; // ln 2 split in two so that n·LN2_HI is exact
    const LN2_LO: f32 = -2.121_944_4e-4;
    let xc = x.clamp(LO, 88.3); // NaN stays NaN
    let t = xc * std::f32::consts::LOG2_E + SHIFT;
    let n = t - SHIFT;
    let r = (xc - n * LN2_HI) - n * LN2_LO;
    let mut p = 1.987_569_1e-4_f32;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 0.5;
    let y = p * (r * r) + r + 1.0;
    // t's bits are 0x4B40_0000 + n; 2ⁿ has exponent field n + 127.
    let exponent = t.to_bits().wrapping_sub(0x4B40_0000).wrapping_add(127);
    let scaled = y * f32::from_bits(exponent << 23);
    if x < LO {
        0.0
    } else if x > HI {
        f32::INFINITY
    } else {
        scaled
    }
}

/// The error function in f32, branch-free so that loops over it vectorise.
///
/// For |x| < 0.75 its Taylor series to x¹⁵ (truncation < 10⁻⁸); above, `1 − erfc(|x|)` with
/// erfc from the Chebyshev fit in Numerical Recipes (§6.2, fractional error < 1.2·10⁻⁷),
/// `erfc(z) = t·exp(−z² + P(t))`, `t = 2/(2 + z)`. Absolute error ≤ 1.5·10⁻⁷ against libm's
/// `erf` (tested over a dense grid); f32 itself spaces values near 1 by 6·10⁻⁸.
#[inline(always)]
pub fn erf(x: f32) -> f32 {
    // 2/√π · (−1)ᵏ / (k!·(2k+1)), k = 0..7
    const TAYLOR: [f32; 8] = [
        std::f32::consts::FRAC_2_SQRT_PI,
        -0.376_126_4,
        0.112_837_92,
        -0.026_866_17,
        0.005_223_977_5,
        -8.548_327e-4,
        1.205_533_3e-4,
        -1.492_930_4e-5,
    ];
    // Numerical Recipes' erfcc, highest degree first.
    const NR: [f32; 10] = [
        0.170_872_77,
        -0.822_152_23,
        1.488_515_9,
        -1.135_204,
        0.278_868_07,
        -0.186_288_06,
        0.096_784_18,
        0.374_091_96,
        1.000_023_7,
        -1.265_512_2,
    ];
    let x2 = x * x;
    let mut p = TAYLOR[7];
    for &c in TAYLOR[..7].iter().rev() {
        p = p * x2 + c;
    }
    let small = x * p;

    let a = x.abs();
    let z = if a < 10.0 { a } else { 10.0 };
    let t = 2.0 / (2.0 + z);
    let mut q = NR[0];
    for &c in &NR[1..] {
        q = q * t + c;
    }
    let erfc = t * exp(-(z * z) + q);
    let large = (1.0 - erfc).copysign(x);
    if a < 0.75 {
        small
    } else {
        large
    }
}

multiversion! {
    /// How many of `values` (at most 2³² of them) are NaN or ±inf, into `count`: all exponent
    /// bits set. A compare and an add per 32-bit lane, so it runs at memory speed.
    pub fn count_non_finite(values: &[f32], count: &mut usize) {
        const EXPONENT: u32 = 0x7f80_0000;
        *count = values
            .iter()
            .map(|v| u32::from(v.to_bits() & EXPONENT == EXPONENT))
            .fold(0u32, u32::wrapping_add) as usize;
    }
}

/// Below this many output elements, element-wise work stays on the calling thread.
const PARALLEL_MIN: usize = 32 * 1024;

/// A raw pointer that tasks writing disjoint parts of one buffer may share.
#[derive(Clone, Copy)]
struct SharedMut(*mut f32);
// SAFETY: only used by kernels whose tasks write disjoint element ranges (see each use).
unsafe impl Send for SharedMut {}
// SAFETY: as above; the pointer itself is never written through by two tasks at one place.
unsafe impl Sync for SharedMut {}

impl SharedMut {
    // A method, so closures capture the whole (Sync) wrapper rather than its raw field.
    fn ptr(self) -> *mut f32 {
        self.0
    }
}

#[cfg(test)]
pub(crate) mod testing {
    /// A small deterministic generator (xorshift) for test inputs, uniform in `[-scale, scale)`.
    pub fn random(count: usize, seed: u64, scale: f32) -> Vec<f32> {
        let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..count)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                ((state >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
            })
            .collect()
    }
}

/// The index of the first NaN or ±inf in `values`, if any.
///
/// Blocks of 64 Ki values are counted by a vectorised kernel ([`count_non_finite`],
/// AVX-512, AVX2 or SSE2 as the CPU allows), in parallel for large tensors; only a block that
/// holds one is searched element by element. On bert-base's 435 MB of weights this takes about
/// 40 ms on one thread (see `cargo bench --bench engine`). For weights read in place it is also
/// the first touch of their pages.
pub fn first_non_finite(values: &[f32]) -> Option<usize> {
    use rayon::prelude::*;
    const BLOCK: usize = 1 << 16;
    let holds = |block: &[f32]| {
        let mut count = 0;
        count_non_finite(block, &mut count);
        count != 0
    };
    let b = if values.len() >= 8 * BLOCK {
        values.par_chunks(BLOCK).position_first(holds)?
    } else {
        values.chunks(BLOCK).position(holds)?
    };
    let i = values[b * BLOCK..].iter().position(|v| !v.is_finite())?;
    Some(b * BLOCK + i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ulps(ours: f32, exact: f64) -> f64 {
        let e = exact as f32;
        let spacing = (f32::from_bits(e.abs().to_bits() + 1) - e.abs()) as f64;
        (ours as f64 - exact).abs() / spacing
    }

    #[test]
    fn exp_is_within_two_ulps_of_f64() {
        let mut worst: f64 = 0.0;
        let mut x = -87.0f32;
        while x < 88.0 {
            let u = ulps(exp(x), (x as f64).exp());
            assert!(
                u <= 2.0,
                "exp({x}) = {} vs {}: {u} ulp",
                exp(x),
                (x as f64).exp()
            );
            worst = worst.max(u);
            x += 1.0e-3;
        }
        // Around 0, where softmax spends its time, on a finer grid.
        for i in -200_000..=0 {
            let x = i as f32 * 1e-5;
            worst = worst.max(ulps(exp(x), (x as f64).exp()));
        }
        eprintln!("exp: max error {worst:.2} ulp");
        assert!(worst <= 2.0);
        assert_eq!(exp(-88.0), 0.0);
        assert_eq!(exp(-1000.0), 0.0);
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp(89.0), f32::INFINITY);
        assert!(exp(f32::NAN).is_nan());
        assert_eq!(exp(0.0), 1.0);
    }

    /// erf against the C library's double-precision erf on a grid of step 10⁻⁵ over [−6, 6].
    #[test]
    fn erf_matches_libm_within_1_5e_7() {
        extern "C" {
            fn erf(x: f64) -> f64;
        }
        let mut worst: f64 = 0.0;
        let mut at = 0.0;
        for i in -600_000..=600_000 {
            let x = i as f32 * 1e-5;
            // SAFETY: libm's erf is a pure function of a double.
            let exact = unsafe { erf(x as f64) };
            let e = (super::erf(x) as f64 - exact).abs();
            if e > worst {
                worst = e;
                at = x;
            }
        }
        eprintln!("erf: max |error| {worst:.3e} at x = {at}");
        assert!(worst <= 1.5e-7, "erf error {worst:e} at {at}");
        assert_eq!(super::erf(0.0), 0.0);
        assert_eq!(super::erf(f32::INFINITY), 1.0);
        assert_eq!(super::erf(-30.0), -1.0);
    }

    #[test]
    fn non_finite_values_are_counted_in_every_lane() {
        let input = testing::random(4096, 7, 8.0);
        // NaN, ±inf, the largest finite values and subnormals, in every lane position.
        let mut special = input.clone();
        for (i, v) in [
            f32::NAN,
            f32::INFINITY,
            -f32::NAN,
            f32::NEG_INFINITY,
            f32::MAX,
            1e-40,
        ]
        .into_iter()
        .enumerate()
        {
            special[i * 37 + 3] = v;
        }
        let mut count = 0;
        count_non_finite(&special, &mut count);
        assert_eq!(count, special.iter().filter(|v| !v.is_finite()).count());
        assert_eq!(count, 4);
        eprintln!("dispatched to {:?}", isa());
    }
}
