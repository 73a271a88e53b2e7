//! CPU kernels for the encoder's hot loops, on plain `f32` slices.
//!
//! Why they exist instead of candle's own operations (MiniLM, 512 tokens, 2 threads; figures in
//! `docs/performance.md`):
//! - **Attention.** candle's batched matmul runs one multi-threaded gemm per head on small
//!   products (`[512, 32] × [32, 512]`), at 42–94 GFLOP/s, and the scores then take separate
//!   passes for the scale, the mask and the softmax, and another copy to leave the model.
//!   [`attention`] works one head and one block of query rows at a time, on one thread each:
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
//! Every kernel is checked against a plain reference in the tests below (softmax against f64,
//! `erf` against libm over a dense grid, the attention against naive loops).
//!
//! The element-wise loops are compiled three times (AVX-512, AVX2+FMA and the baseline) and the
//! best one the CPU supports is picked at run time (`multiversion!`). All three compute the
//! same thing in the same order, so results do not depend on the CPU.

use std::sync::OnceLock;

use gemm::Parallelism;
use rayon::prelude::*;

/// Which vector instructions the element-wise loops may use on this CPU.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Isa {
    Avx512,
    Avx2,
    Baseline,
}

#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn isa() -> Isa {
    static ISA: OnceLock<Isa> = OnceLock::new();
    *ISA.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx512f")
                && is_x86_feature_detected!("avx512bw")
                && is_x86_feature_detected!("avx512dq")
                && is_x86_feature_detected!("avx512vl")
                && is_x86_feature_detected!("fma")
            {
                return Isa::Avx512;
            }
            if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
                return Isa::Avx2;
            }
        }
        Isa::Baseline
    })
}

/// Define a function whose body is compiled for AVX-512, for AVX2 and for the baseline target,
/// and dispatch to the best one the CPU supports. The body must call only `#[inline(always)]`
/// helpers, so they are compiled with the same features.
macro_rules! multiversion {
    ($(#[$attr:meta])* $vis:vis fn $name:ident($($arg:ident : $ty:ty),* $(,)?) $body:block) => {
        $(#[$attr])*
        $vis fn $name($($arg: $ty),*) {
            #[inline(always)]
            fn body($($arg: $ty),*) $body
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
                unsafe fn avx512($($arg: $ty),*) {
                    body($($arg),*)
                }
                #[target_feature(enable = "avx2,fma")]
                unsafe fn avx2($($arg: $ty),*) {
                    body($($arg),*)
                }
                match isa() {
                    // SAFETY: `isa()` checked at run time that the CPU has these features.
                    Isa::Avx512 => return unsafe { avx512($($arg),*) },
                    Isa::Avx2 => return unsafe { avx2($($arg),*) },
                    Isa::Baseline => {}
                }
            }
            body($($arg),*)
        }
    };
}

/// Lanes of the partial sums in reductions. Sixteen independent accumulators let the compiler
/// use one AVX-512 register (two AVX2, four SSE) without reordering floating-point additions,
/// which it may not do on its own.
const LANES: usize = 16;

/// `eˣ` in f32, branch-free so that loops over it vectorise.
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

/// GELU with the error function, as transformers' `gelu`: `x · ½ · (1 + erf(x/√2))`.
#[inline(always)]
pub fn gelu_erf(x: f32) -> f32 {
    x * 0.5 * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// GELU's tanh approximation (`gelu_new`): `½x(1 + tanh(√(2/π)(x + 0.044715x³)))`, with
/// `tanh(u) = 1 − 2/(e²ᵘ + 1)`.
#[inline(always)]
pub fn gelu_tanh(x: f32) -> f32 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    let u = SQRT_2_OVER_PI * (x + 0.044_715 * x * x * x);
    let tanh = 1.0 - 2.0 / (exp(2.0 * u) + 1.0);
    0.5 * x * (1.0 + tanh)
}

#[inline(always)]
fn max_of(xs: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; LANES];
    let chunks = xs.chunks_exact(LANES);
    let rest = chunks.remainder();
    for c in chunks {
        for i in 0..LANES {
            acc[i] = if c[i] > acc[i] { c[i] } else { acc[i] };
        }
    }
    let mut m = f32::NEG_INFINITY;
    for &v in acc.iter().chain(rest) {
        m = if v > m { v } else { m };
    }
    m
}

/// `xs[i] = exp(xs[i] − shift)`; returns the sum of the results.
#[inline(always)]
fn exp_shifted_sum(xs: &mut [f32], shift: f32) -> f32 {
    let mut acc = [0f32; LANES];
    let mut chunks = xs.chunks_exact_mut(LANES);
    for c in &mut chunks {
        for i in 0..LANES {
            c[i] = exp(c[i] - shift);
            acc[i] += c[i];
        }
    }
    let mut tail = 0f32;
    for v in chunks.into_remainder() {
        *v = exp(*v - shift);
        tail += *v;
    }
    acc.iter().sum::<f32>() + tail
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

multiversion! {
    /// Softmax of each row of `block` (rows of `width` values), in place:
    /// `exp(x − max) / Σ exp(x − max)`.
    pub fn softmax_rows(block: &mut [f32], width: usize) {
        for row in block.chunks_exact_mut(width) {
            let max = max_of(row);
            let sum = exp_shifted_sum(row, max);
            let inv = 1.0 / sum;
            for v in row.iter_mut() {
                *v *= inv;
            }
        }
    }
}

multiversion! {
    /// [`gelu_erf`] on every element, in place.
    pub fn gelu_erf_in_place(xs: &mut [f32]) {
        for v in xs.iter_mut() {
            *v = gelu_erf(*v);
        }
    }
}

multiversion! {
    /// [`gelu_tanh`] on every element, in place.
    pub fn gelu_tanh_in_place(xs: &mut [f32]) {
        for v in xs.iter_mut() {
            *v = gelu_tanh(*v);
        }
    }
}

/// Element-wise function applied to a linear map's output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// None: `x·W + b`.
    Identity,
    /// [`gelu_erf`].
    GeluErf,
    /// [`gelu_tanh`].
    GeluTanh,
    /// `max(x, 0)`.
    Relu,
}

/// Below this many output elements, element-wise work stays on the calling thread.
const PARALLEL_MIN: usize = 32 * 1024;

fn apply(out: &mut [f32], activation: Activation) {
    let f: fn(&mut [f32]) = match activation {
        Activation::Identity => return,
        Activation::GeluErf => gelu_erf_in_place,
        Activation::GeluTanh => gelu_tanh_in_place,
        Activation::Relu => |xs| xs.iter_mut().for_each(|v| *v = v.max(0.0)),
    };
    if out.len() < PARALLEL_MIN {
        f(out);
    } else {
        out.par_chunks_mut(16 * 1024).for_each(f);
    }
}

/// A linear map on `rows` rows: `out = activation(x · W + bias)`.
///
/// `x`: `[rows, inputs]`; `w`: `[inputs, outputs]` (the checkpoint's weight transposed);
/// `bias`: `[outputs]`; `out`: `[rows, outputs]`. The bias is written first and gemm adds the
/// product onto it (`bias + x·W` rounds exactly as `x·W + bias`), saving a pass.
pub fn linear(
    x: &[f32],
    rows: usize,
    w: &[f32],
    bias: &[f32],
    out: &mut [f32],
    activation: Activation,
) {
    let outputs = bias.len();
    let inputs = w.len() / outputs.max(1);
    assert_eq!(w.len(), inputs * outputs, "weight shape");
    assert_eq!(x.len(), rows * inputs, "input shape");
    assert_eq!(out.len(), rows * outputs, "output shape");
    if rows == 0 || outputs == 0 {
        return;
    }
    for row in out.chunks_exact_mut(outputs) {
        row.copy_from_slice(bias);
    }
    // SAFETY: every pointer/stride pair addresses exactly the slices checked above: dst
    // [rows, outputs] row-major, lhs [rows, inputs] row-major, rhs [inputs, outputs] row-major.
    unsafe {
        gemm::gemm(
            rows,
            outputs,
            inputs,
            out.as_mut_ptr(),
            1,
            outputs as isize,
            true,
            x.as_ptr(),
            1,
            inputs as isize,
            w.as_ptr(),
            1,
            outputs as isize,
            1.0,
            1.0,
            false,
            false,
            false,
            Parallelism::Rayon(0),
        );
    }
    apply(out, activation);
}

/// Write the transpose of `src` (`[rows, cols]`, row-major) into columns `col0..col0 + rows` of
/// `dst` (`[cols, dst_cols]`, row-major): `dst[c][col0 + r] = src[r][c]`.
///
/// Linear maps keep their weights transposed (`[in, out]`): gemm then reads them without packing
/// when few tokens are run (2–5× faster at 12 tokens than the checkpoint's `[out, in]`), and
/// stacked maps (Q, K, V) sit side by side as column ranges. Tiled, so both sides are read and
/// written a cache line at a time, and parallel over bands of output rows; at load time this
/// replaced candle's strided copy, which was the largest single cost of loading.
pub fn transpose_into(
    src: &[f32],
    rows: usize,
    cols: usize,
    dst: &mut [f32],
    dst_cols: usize,
    col0: usize,
) {
    const TILE: usize = 32;
    assert_eq!(src.len(), rows * cols, "transpose source shape");
    assert!(
        col0 + rows <= dst_cols && dst.len() == cols * dst_cols,
        "transpose target shape"
    );
    if cols == 0 {
        return;
    }
    dst.par_chunks_mut(TILE * dst_cols)
        .enumerate()
        .for_each(|(band, out)| {
            let c0 = band * TILE;
            let width = out.len() / dst_cols;
            for r0 in (0..rows).step_by(TILE) {
                let r1 = (r0 + TILE).min(rows);
                for dc in 0..width {
                    let line = &mut out[dc * dst_cols + col0..][..rows];
                    for r in r0..r1 {
                        line[r] = src[r * cols + c0 + dc];
                    }
                }
            }
        });
}

/// One row of LayerNorm, in place: `(v − mean)/√(var + ε)·γ + β`, with the population variance
/// as transformers (and torch) compute it.
#[inline(always)]
fn normalize_row(v: &mut [f32], gamma: &[f32], beta: &[f32], eps: f32) {
    let width = v.len() as f32;
    let mut acc = [0f32; LANES];
    let chunks = v.chunks_exact(LANES);
    let rest = chunks.remainder();
    for c in chunks {
        for i in 0..LANES {
            acc[i] += c[i];
        }
    }
    let mean = (acc.iter().sum::<f32>() + rest.iter().sum::<f32>()) / width;
    let mut acc = [0f32; LANES];
    let chunks = v.chunks_exact(LANES);
    let rest = chunks.remainder();
    for c in chunks {
        for i in 0..LANES {
            let d = c[i] - mean;
            acc[i] += d * d;
        }
    }
    let var = (acc.iter().sum::<f32>() + rest.iter().map(|x| (x - mean) * (x - mean)).sum::<f32>())
        / width;
    let rstd = 1.0 / (var + eps).sqrt();
    for ((x, g), b) in v.iter_mut().zip(gamma).zip(beta) {
        *x = (*x - mean) * rstd * g + b;
    }
}

multiversion! {
    /// `out[r] = LayerNorm(x[r] + residual[r])` for each row of `gamma.len()` values.
    fn add_layer_norm_rows(
        x: &[f32],
        residual: &[f32],
        gamma: &[f32],
        beta: &[f32],
        eps: f32,
        out: &mut [f32],
    ) {
        let width = gamma.len();
        for ((o, a), b) in out
            .chunks_exact_mut(width)
            .zip(x.chunks_exact(width))
            .zip(residual.chunks_exact(width))
        {
            for ((o, a), b) in o.iter_mut().zip(a).zip(b) {
                *o = a + b;
            }
            normalize_row(o, gamma, beta, eps);
        }
    }
}

/// `out = LayerNorm(x + residual)` row by row (rows of `gamma.len()` values), the residual
/// connection and normalisation of every BERT sub-layer.
pub fn add_layer_norm(
    x: &[f32],
    residual: &[f32],
    gamma: &[f32],
    beta: &[f32],
    eps: f32,
    out: &mut [f32],
) {
    let width = gamma.len();
    assert!(width > 0 && beta.len() == width, "LayerNorm weights");
    assert!(
        x.len() == out.len() && residual.len() == out.len() && out.len() % width == 0,
        "LayerNorm input shape"
    );
    if out.len() < PARALLEL_MIN {
        return add_layer_norm_rows(x, residual, gamma, beta, eps, out);
    }
    let rows_per_task = (8 * 1024 / width).max(1);
    let chunk = rows_per_task * width;
    out.par_chunks_mut(chunk)
        .zip(x.par_chunks(chunk))
        .zip(residual.par_chunks(chunk))
        .for_each(|((o, a), r)| add_layer_norm_rows(a, r, gamma, beta, eps, o));
}

/// Embedding tables and their LayerNorm.
pub struct EmbeddingTables<'a> {
    /// `[vocab, hidden]`.
    pub word: &'a [f32],
    /// `[max_positions, hidden]`.
    pub position: &'a [f32],
    /// `[type_vocab, hidden]`.
    pub token_type: &'a [f32],
    /// LayerNorm γ, `[hidden]`.
    pub gamma: &'a [f32],
    /// LayerNorm β, `[hidden]`.
    pub beta: &'a [f32],
    /// LayerNorm ε.
    pub eps: f32,
}

multiversion! {
    fn embed_rows(
        tables: &EmbeddingTables<'_>,
        ids: &[u32],
        types: &[u32],
        positions: &[usize],
        out: &mut [f32],
    ) {
        let hidden = tables.gamma.len();
        for (((o, &id), &ty), &pos) in out.chunks_exact_mut(hidden).zip(ids).zip(types).zip(positions) {
            let word = &tables.word[id as usize * hidden..][..hidden];
            let ty = &tables.token_type[ty as usize * hidden..][..hidden];
            let pos = &tables.position[pos * hidden..][..hidden];
            // Same order as transformers: (words + token types) + positions.
            for (((o, w), t), p) in o.iter_mut().zip(word).zip(ty).zip(pos) {
                *o = (w + t) + p;
            }
            normalize_row(o, tables.gamma, tables.beta, tables.eps);
        }
    }
}

/// BERT's input embeddings for `b` right-padded sequences of `n` tokens:
/// `LayerNorm(word[id] + token_type[type] + position[i])`, into `out` (`[b·n, hidden]`).
/// Ids must be inside the tables ([`super::Bert::forward`] checks them); out of range, this panics.
pub fn embed(tables: &EmbeddingTables<'_>, ids: &[u32], types: &[u32], n: usize, out: &mut [f32]) {
    let hidden = tables.gamma.len();
    assert!(ids.len() == types.len() && out.len() == ids.len() * hidden && n > 0);
    assert!(
        tables.position.len() >= n * hidden,
        "more tokens than positions"
    );
    let positions: Vec<usize> = (0..ids.len()).map(|i| i % n).collect();
    if out.len() < PARALLEL_MIN {
        return embed_rows(tables, ids, types, &positions, out);
    }
    let rows = (8 * 1024 / hidden).max(1);
    out.par_chunks_mut(rows * hidden)
        .zip(ids.par_chunks(rows))
        .zip(types.par_chunks(rows))
        .zip(positions.par_chunks(rows))
        .for_each(|(((o, i), t), p)| embed_rows(tables, i, t, p, o));
}

/// A zeroed buffer of `len` floats for the captured probabilities (75 MB for MiniLM at 512
/// tokens), written once, in full, by [`attention`].
///
/// The memory comes fresh from the kernel (`calloc` of a large block maps new zero pages, so
/// nothing is written here), and on Linux it is marked for transparent huge pages before the
/// first write: the kernel then faults it in 2 MiB at a time instead of 4 KiB, about 40 faults
/// instead of 18 000 for those 75 MB. Measured on MiniLM at 512 tokens: repeated forward passes
/// ran about 20 % faster, and a single CLI run took the same time. (The weights are not marked:
/// on this VM a first-touched huge page often comes from memory the host has taken back, and
/// loading bert-base that way took twice as long.) Without huge pages (disabled, or another OS)
/// it is a plain zeroed `Vec`.
pub fn capture_buffer(len: usize) -> Vec<f32> {
    let mut buf = vec![0f32; len];
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let start = buf.as_mut_ptr() as usize;
        let end = start + len * std::mem::size_of::<f32>();
        let (first, last) = (start.next_multiple_of(HUGE), end / HUGE * HUGE);
        if last > first {
            // SAFETY: advice on pages inside our own allocation; it changes no contents.
            unsafe {
                libc::madvise(
                    first as *mut libc::c_void,
                    last - first,
                    libc::MADV_HUGEPAGE,
                );
            }
        }
    }
    buf
}

/// Where one sequence's captured values for one layer go.
pub struct CaptureSink<'a> {
    /// Attention probabilities `[heads, len, len]`, row = query, column = key.
    pub probs: &'a mut [f32],
    /// Query and key vectors `[heads, len, head_dim]` each, when asked for (unscaled).
    pub query_key: Option<(&'a mut [f32], &'a mut [f32])>,
}

/// A raw pointer that tasks writing disjoint parts of one buffer may share.
#[derive(Clone, Copy)]
struct SharedMut(*mut f32);
// SAFETY: only used by `attention`, whose tasks write disjoint element ranges (see there).
unsafe impl Send for SharedMut {}
unsafe impl Sync for SharedMut {}

impl SharedMut {
    // A method, so closures capture the whole (Sync) wrapper rather than its raw field.
    fn ptr(self) -> *mut f32 {
        self.0
    }
}

/// The shape of a batch going through multi-head attention.
#[derive(Clone, Copy, Debug)]
pub struct AttentionShape {
    /// Sequences in the batch.
    pub batch: usize,
    /// Tokens per sequence, padding included.
    pub tokens: usize,
    /// Heads.
    pub heads: usize,
    /// Size of one head.
    pub head_dim: usize,
}

/// Query rows per task: enough tasks for every thread to stay busy (three per thread, so a
/// thread slowed by other work on the machine is made up for), but as many rows as possible
/// otherwise, since each gemm call packs its operands anew (at 512 tokens, 256-row blocks ran
/// 15 % faster than 64-row ones), and no more than fit a block of scores in a core's L2 cache
/// (512 KiB) between the softmax and `P·V`.
fn block_rows(shape: &AttentionShape, lengths: &[usize]) -> usize {
    let longest = lengths.iter().copied().max().unwrap_or(1).max(1);
    let total_rows = shape.batch * shape.heads * shape.tokens;
    let threads = rayon::current_num_threads().max(1);
    let for_threads = total_rows.div_ceil(3 * threads);
    let for_cache = (128 * 1024 / longest).max(16);
    for_threads.clamp(16, 256).min(for_cache)
}

/// Multi-head scaled dot-product attention with capture.
///
/// `qkv`: `[batch, tokens, 3·hidden]`, each row `[q | k | v]` with heads side by side (the
/// output of the fused projection). For each sequence `s`, only its first `lengths[s]` tokens
/// are keys: padding gets exactly zero probability, as with an additive −∞ mask. For each head:
/// `P = softmax(Q·Kᵀ/√d)`, written into `sinks[s].probs` (rows of padding queries are computed
/// but not kept), then `context = P·V` into `context` (`[batch, tokens, hidden]`, heads
/// concatenated). The query and key vectors go to `sinks[s].query_key` when it is `Some`.
pub fn attention(
    qkv: &[f32],
    shape: AttentionShape,
    lengths: &[usize],
    sinks: &mut [CaptureSink<'_>],
    context: &mut [f32],
) {
    let AttentionShape {
        batch,
        tokens: n,
        heads,
        head_dim: d,
    } = shape;
    let hidden = heads * d;
    let row = 3 * hidden;
    assert_eq!(qkv.len(), batch * n * row, "qkv shape");
    assert_eq!(context.len(), batch * n * hidden, "context shape");
    assert!(
        lengths.len() == batch && sinks.len() == batch,
        "one length and sink per sequence"
    );
    for (sink, &len) in sinks.iter().zip(lengths) {
        assert!(
            len >= 1 && len <= n,
            "sequence length {len} outside 1..={n}"
        );
        assert_eq!(sink.probs.len(), heads * len * len, "probability buffer");
        if let Some((q, k)) = &sink.query_key {
            assert!(
                q.len() == heads * len * d && k.len() == heads * len * d,
                "query/key buffers"
            );
        }
    }
    let scale = 1.0 / (d as f32).sqrt();
    let block = block_rows(&shape, lengths);

    // One task per (sequence, head, block of query rows). Blocks stop at the sequence length,
    // so a block is either all real queries (probabilities go to the sink) or all padding.
    let mut tasks = Vec::new();
    for (s, &len) in lengths.iter().enumerate() {
        for h in 0..heads {
            for (start, end) in [(0, len), (len, n)] {
                let mut r = start;
                while r < end {
                    tasks.push((s, h, r, (r + block).min(end)));
                    r += block;
                }
            }
        }
    }
    let probs: Vec<SharedMut> = sinks
        .iter_mut()
        .map(|k| SharedMut(k.probs.as_mut_ptr()))
        .collect();
    let query_key: Vec<Option<(SharedMut, SharedMut)>> = sinks
        .iter_mut()
        .map(|k| {
            k.query_key
                .as_mut()
                .map(|(q, k)| (SharedMut(q.as_mut_ptr()), SharedMut(k.as_mut_ptr())))
        })
        .collect();
    let context = SharedMut(context.as_mut_ptr());

    tasks.par_iter().for_each(|&(s, h, r0, r1)| {
        let len = lengths[s];
        let rows = r1 - r0;
        let base = s * n * row; // this sequence's first qkv row
        let q = &qkv[base + r0 * row + h * d..];
        let k = &qkv[base + hidden + h * d..];
        let v = &qkv[base + 2 * hidden + h * d..];
        let mut scratch = Vec::new();
        // SAFETY: tasks own disjoint rows. Probabilities: rows r0..r1 (< len) of head h of
        // sequence s, inside sink s's [heads, len, len] buffer (checked above). Context: rows
        // r0..r1, columns h·d..(h+1)·d of sequence s. Query/key: rows r0..r1 of head h.
        let p: &mut [f32] = unsafe {
            if r0 < len {
                std::slice::from_raw_parts_mut(probs[s].ptr().add((h * len + r0) * len), rows * len)
            } else {
                scratch.resize(rows * len, 0.0);
                scratch.as_mut_slice()
            }
        };
        unsafe {
            // scores = (Q·Kᵀ)·scale: lhs Q rows [rows, d], rhs Kᵀ [d, len].
            gemm::gemm(
                rows,
                len,
                d,
                p.as_mut_ptr(),
                1,
                len as isize,
                false,
                q.as_ptr(),
                1,
                row as isize,
                k.as_ptr(),
                row as isize,
                1,
                0.0,
                scale,
                false,
                false,
                false,
                Parallelism::None,
            );
        }
        softmax_rows(p, len);
        unsafe {
            // context rows = P·V: lhs P [rows, len], rhs V [len, d].
            gemm::gemm(
                rows,
                d,
                len,
                context.ptr().add((s * n + r0) * hidden + h * d),
                1,
                hidden as isize,
                false,
                p.as_ptr(),
                1,
                len as isize,
                v.as_ptr(),
                1,
                row as isize,
                0.0,
                1.0,
                false,
                false,
                false,
                Parallelism::None,
            );
        }
        if let (Some((qs, ks)), true) = (query_key[s], r0 < len) {
            for r in r0..r1 {
                let at = (h * len + r) * d;
                let src = base + r * row + h * d;
                unsafe {
                    std::ptr::copy_nonoverlapping(qkv[src..].as_ptr(), qs.ptr().add(at), d);
                    std::ptr::copy_nonoverlapping(
                        qkv[src + hidden..].as_ptr(),
                        ks.ptr().add(at),
                        d,
                    );
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator (xorshift) for test inputs.
    fn random(count: usize, seed: u64, scale: f32) -> Vec<f32> {
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
    fn gelu_follows_its_formulas() {
        extern "C" {
            fn erf(x: f64) -> f64;
        }
        let xs: Vec<f32> = (-10_000..=10_000).map(|i| i as f32 * 1e-3).collect();
        let mut ours = xs.clone();
        gelu_erf_in_place(&mut ours);
        let mut tanh = xs.clone();
        gelu_tanh_in_place(&mut tanh);
        let (mut worst_erf, mut worst_tanh): (f64, f64) = (0.0, 0.0);
        for ((&x, &g), &t) in xs.iter().zip(&ours).zip(&tanh) {
            let x = x as f64;
            // SAFETY: pure libm function.
            let exact = x * 0.5 * (1.0 + unsafe { erf(x / 2f64.sqrt()) });
            worst_erf = worst_erf.max((g as f64 - exact).abs());
            let c = (2.0 / std::f64::consts::PI).sqrt();
            let exact_tanh = 0.5 * x * (1.0 + (c * (x + 0.044715 * x * x * x)).tanh());
            worst_tanh = worst_tanh.max((t as f64 - exact_tanh).abs());
        }
        eprintln!(
            "gelu_erf: max |error| {worst_erf:.3e}; gelu_tanh: {worst_tanh:.3e} on [-10, 10]"
        );
        assert!(worst_erf < 1.5e-6, "gelu_erf error {worst_erf:e}");
        assert!(worst_tanh < 1.5e-6, "gelu_tanh error {worst_tanh:e}");
    }

    fn softmax_f64(row: &[f32]) -> Vec<f64> {
        let max = row.iter().fold(f64::NEG_INFINITY, |m, &x| m.max(x as f64));
        let e: Vec<f64> = row.iter().map(|&x| (x as f64 - max).exp()).collect();
        let sum: f64 = e.iter().sum();
        e.iter().map(|x| x / sum).collect()
    }

    #[test]
    fn softmax_matches_f64() {
        let mut worst: f64 = 0.0;
        for (width, scale) in [
            (1, 1.0),
            (7, 3.0),
            (16, 10.0),
            (33, 20.0),
            (512, 30.0),
            (513, 5.0),
        ] {
            let rows = 9;
            let input = random(rows * width, width as u64, scale);
            let mut ours = input.clone();
            softmax_rows(&mut ours, width);
            for (got, want) in ours.chunks(width).zip(input.chunks(width)) {
                let want = softmax_f64(want);
                let sum: f64 = got.iter().map(|&x| x as f64).sum();
                assert!((sum - 1.0).abs() < 1e-5, "row sum {sum}");
                for (&g, &w) in got.iter().zip(&want) {
                    worst = worst.max((g as f64 - w).abs());
                }
            }
        }
        eprintln!("softmax: max |error| {worst:.3e}");
        assert!(worst < 1e-6, "softmax error {worst:e}");
        // A row with a huge spread: the small entries underflow to exactly 0, never NaN.
        let mut row = vec![0.0, -200.0, 100.0, -1e30];
        softmax_rows(&mut row, 4);
        assert_eq!(row, vec![0.0, 0.0, 1.0, 0.0]);
    }

    #[test]
    fn every_instruction_set_computes_the_same() {
        // The dispatched versions must agree bit for bit with the baseline body.
        let input = random(4096, 7, 8.0);
        let mut dispatched = input.clone();
        gelu_erf_in_place(&mut dispatched);
        let baseline: Vec<f32> = input.iter().map(|&x| gelu_erf(x)).collect();
        assert_eq!(dispatched, baseline);
        let mut dispatched = input.clone();
        softmax_rows(&mut dispatched, 64);
        let mut baseline = input.clone();
        for row in baseline.chunks_exact_mut(64) {
            let max = max_of(row);
            let sum = exp_shifted_sum(row, max);
            row.iter_mut().for_each(|v| *v *= 1.0 / sum);
        }
        assert_eq!(dispatched, baseline);
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

    #[test]
    fn linear_matches_naive_loops() {
        for (rows, inputs, outputs) in [(1, 3, 2), (12, 384, 1152), (70, 64, 100)] {
            let x = random(rows * inputs, 1, 1.0);
            let w = random(inputs * outputs, 2, 0.1);
            let b = random(outputs, 3, 0.5);
            for act in [Activation::Identity, Activation::GeluErf, Activation::Relu] {
                let mut out = vec![0.0; rows * outputs];
                linear(&x, rows, &w, &b, &mut out, act);
                for r in 0..rows {
                    for o in 0..outputs {
                        let mut acc = b[o] as f64;
                        for i in 0..inputs {
                            acc += x[r * inputs + i] as f64 * w[i * outputs + o] as f64;
                        }
                        let want = match act {
                            Activation::GeluErf => gelu_erf(acc as f32) as f64,
                            Activation::Relu => acc.max(0.0),
                            _ => acc,
                        };
                        let got = out[r * outputs + o] as f64;
                        assert!(
                            (got - want).abs() < 1e-4,
                            "{act:?} [{r},{o}]: {got} vs {want}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn transpose_places_each_part_in_its_columns() {
        // Two parts, [3, 70] and [5, 70], side by side in a [70, 10] target at columns 1 and 4.
        let a = random(3 * 70, 21, 1.0);
        let b = random(5 * 70, 22, 1.0);
        let mut dst = vec![f32::NAN; 70 * 10];
        transpose_into(&a, 3, 70, &mut dst, 10, 1);
        transpose_into(&b, 5, 70, &mut dst, 10, 4);
        for c in 0..70 {
            assert!(
                dst[c * 10].is_nan() && dst[c * 10 + 9].is_nan(),
                "outside the parts"
            );
            for r in 0..3 {
                assert_eq!(dst[c * 10 + 1 + r], a[r * 70 + c]);
            }
            for r in 0..5 {
                assert_eq!(dst[c * 10 + 4 + r], b[r * 70 + c]);
            }
        }
    }

    #[test]
    fn layer_norm_matches_f64() {
        let (rows, width) = (100, 384); // big enough for the parallel path
        let x = random(rows * width, 4, 3.0);
        let res = random(rows * width, 5, 1.0);
        let gamma = random(width, 6, 1.0);
        let beta = random(width, 7, 1.0);
        let mut out = vec![0.0; rows * width];
        add_layer_norm(&x, &res, &gamma, &beta, 1e-12, &mut out);
        let mut worst: f64 = 0.0;
        for r in 0..rows {
            let v: Vec<f64> = (0..width)
                .map(|i| (x[r * width + i] + res[r * width + i]) as f64)
                .collect();
            let mean = v.iter().sum::<f64>() / width as f64;
            let var = v.iter().map(|a| (a - mean).powi(2)).sum::<f64>() / width as f64;
            for i in 0..width {
                let want = (v[i] - mean) / (var + 1e-12).sqrt() * gamma[i] as f64 + beta[i] as f64;
                worst = worst.max((out[r * width + i] as f64 - want).abs());
            }
        }
        eprintln!("layer norm: max |error| {worst:.3e}");
        assert!(worst < 2e-6, "layer norm error {worst:e}");
    }

    #[test]
    fn embeddings_sum_three_tables_then_normalize() {
        let (vocab, positions, types, hidden) = (50, 20, 2, 24);
        let word = random(vocab * hidden, 8, 1.0);
        let position = random(positions * hidden, 9, 1.0);
        let token_type = random(types * hidden, 10, 1.0);
        let gamma = random(hidden, 11, 1.0);
        let beta = random(hidden, 12, 1.0);
        let tables = EmbeddingTables {
            word: &word,
            position: &position,
            token_type: &token_type,
            gamma: &gamma,
            beta: &beta,
            eps: 1e-12,
        };
        let (b, n) = (2, 5);
        let ids: Vec<u32> = (0..(b * n) as u32)
            .map(|i| (i * 7) % vocab as u32)
            .collect();
        let tys: Vec<u32> = (0..(b * n) as u32).map(|i| i % 2).collect();
        let mut out = vec![0.0; b * n * hidden];
        embed(&tables, &ids, &tys, n, &mut out);
        for t in 0..b * n {
            let sum: Vec<f32> = (0..hidden)
                .map(|i| {
                    (word[ids[t] as usize * hidden + i] + token_type[tys[t] as usize * hidden + i])
                        + position[(t % n) * hidden + i]
                })
                .collect();
            let mut want = vec![0.0; hidden];
            add_layer_norm(&sum, &vec![0.0; hidden], &gamma, &beta, 1e-12, &mut want);
            assert_eq!(&out[t * hidden..][..hidden], &want[..], "token {t}");
        }
    }

    /// Naive attention in f64 for one sequence of `len` real tokens inside `qkv`.
    fn naive_attention(
        qkv: &[f32],
        s: usize,
        n: usize,
        len: usize,
        heads: usize,
        d: usize,
    ) -> (Vec<f64>, Vec<f64>) {
        let hidden = heads * d;
        let at = |t: usize, part: usize, h: usize, c: usize| {
            qkv[(s * n + t) * 3 * hidden + part * hidden + h * d + c] as f64
        };
        let mut probs = vec![0.0; heads * len * len];
        let mut context = vec![0.0; n * hidden];
        for h in 0..heads {
            for i in 0..n {
                let scores: Vec<f64> = (0..len)
                    .map(|j| {
                        (0..d).map(|c| at(i, 0, h, c) * at(j, 1, h, c)).sum::<f64>()
                            / (d as f64).sqrt()
                    })
                    .collect();
                let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = scores.iter().map(|x| (x - max).exp()).collect();
                let sum: f64 = e.iter().sum();
                for j in 0..len {
                    let p = e[j] / sum;
                    if i < len {
                        probs[(h * len + i) * len + j] = p;
                    }
                    for c in 0..d {
                        context[i * hidden + h * d + c] += p * at(j, 2, h, c);
                    }
                }
            }
        }
        (probs, context)
    }

    #[test]
    fn attention_matches_naive_loops_with_padding_and_capture() {
        for (lengths, n, heads, d) in [
            (vec![5], 5, 2, 4),
            (vec![70, 33, 1], 70, 3, 8),
            (vec![130], 130, 12, 32),
        ] {
            let batch = lengths.len();
            let hidden = heads * d;
            let qkv = random(batch * n * 3 * hidden, n as u64, 2.0);
            let mut bufs: Vec<(Vec<f32>, Vec<f32>, Vec<f32>)> = lengths
                .iter()
                .map(|&len| {
                    (
                        vec![f32::NAN; heads * len * len],
                        vec![0.0; heads * len * d],
                        vec![0.0; heads * len * d],
                    )
                })
                .collect();
            let mut sinks: Vec<CaptureSink> = bufs
                .iter_mut()
                .map(|(p, q, k)| CaptureSink {
                    probs: p,
                    query_key: Some((q, k)),
                })
                .collect();
            let mut context = vec![f32::NAN; batch * n * hidden];
            let shape = AttentionShape {
                batch,
                tokens: n,
                heads,
                head_dim: d,
            };
            attention(&qkv, shape, &lengths, &mut sinks, &mut context);
            drop(sinks);
            for (s, &len) in lengths.iter().enumerate() {
                let (probs, ctx) = naive_attention(&qkv, s, n, len, heads, d);
                let worst_p = bufs[s]
                    .0
                    .iter()
                    .zip(&probs)
                    .map(|(&a, &b)| (a as f64 - b).abs())
                    .fold(0.0, f64::max);
                assert!(
                    worst_p < 1e-6,
                    "probabilities off by {worst_p:e} (lengths {lengths:?})"
                );
                let worst_c = context[s * n * hidden..][..n * hidden]
                    .iter()
                    .zip(&ctx)
                    .map(|(&a, &b)| (a as f64 - b).abs())
                    .fold(0.0, f64::max);
                assert!(
                    worst_c < 1e-5,
                    "context off by {worst_c:e} (lengths {lengths:?})"
                );
                for h in 0..heads {
                    for t in 0..len {
                        for c in 0..d {
                            let src = (s * n + t) * 3 * hidden + h * d + c;
                            assert_eq!(bufs[s].1[(h * len + t) * d + c], qkv[src]);
                            assert_eq!(bufs[s].2[(h * len + t) * d + c], qkv[src + hidden]);
                        }
                    }
                }
            }
        }
    }
}
