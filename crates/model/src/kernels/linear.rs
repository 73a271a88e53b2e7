//! Linear maps `y = act(x·Wᵀ + b)` on weights in either layout, written into any column range of
//! a wider output (so that Q, K and V land side by side in one buffer).
//!
//! Two ways to multiply, chosen by the weight's layout:
//! - **`[in, out]`** (GPT-2's Conv1D as stored, and the packed copies [`super::super::layers`]
//!   makes for long inputs): gemm, which reads a row-major right-hand side without packing it
//!   when few rows are run and packs it well when many are.
//! - **`[out, in]`** (PyTorch's `nn.Linear`, read in place from the checkpoint's memory map): our
//!   own dot-product kernel. Each output is the dot product of an input row with a weight row,
//!   both contiguous, so blocks of 4 input rows × 4 weight rows (AVX-512; 3 × 4 with AVX2) keep
//!   16 (12) accumulators in registers and stream the weights once. gemm on this layout is 2–9× slower
//!   for short inputs (it reads the matrix column by column, 3–12 KB apart), which is why the
//!   weights used to be transposed at load; for few rows this kernel is as fast as gemm on the
//!   transposed copy, so loading no longer copies anything. For many rows (where the matrix is
//!   reused from cache many times) gemm's packing wins, and the caller switches to a packed copy.

use super::gemm::Parallelism;
use rayon::prelude::*;

use super::{Activation, SharedMut};

/// How a weight matrix of a map `inputs → outputs` is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// `[outputs, inputs]`, row-major: PyTorch's `nn.Linear.weight`.
    OutIn,
    /// `[inputs, outputs]`, row-major: GPT-2's `Conv1D.weight`, and packed copies.
    InOut,
}

/// A weight matrix.
#[derive(Clone, Copy, Debug)]
pub struct Matrix<'a> {
    /// The values, `inputs × outputs` of them.
    pub data: &'a [f32],
    /// Input size.
    pub inputs: usize,
    /// Output size.
    pub outputs: usize,
    /// How they are stored.
    pub layout: Layout,
}

/// Where a linear map writes: columns `col0..col0 + outputs` of rows of `stride` values.
pub struct Output<'a> {
    /// The buffer, `rows × stride` values.
    pub data: &'a mut [f32],
    /// Values per row.
    pub stride: usize,
    /// First column written.
    pub col0: usize,
}

/// `out[r][col0..col0 + outputs] = activation(x[r] · W + bias)` for `rows` rows of `x`
/// (`[rows, inputs]`, row-major). Without a bias, `x · W`. gemm for `[in, out]` weights, our
/// dot-product kernel for `[out, in]` ones.
pub fn linear(
    x: &[f32],
    rows: usize,
    w: Matrix<'_>,
    bias: Option<&[f32]>,
    out: Output<'_>,
    activation: Activation,
) {
    run_linear(x, rows, w, bias, out, activation, w.layout == Layout::InOut)
}

/// [`linear`] through gemm whatever the layout: on an `[out, in]` weight gemm reads Wᵀ with
/// strides and packs it block by block itself. For many rows this is within about 10 % of gemm on
/// an `[in, out]` copy (576 → 1536 at 512 rows, two threads: 8.8 against 8.6 ms, the dot kernel
/// 9.5), without the copy; for a weight that is already our own memory (dequantised from GGUF)
/// that saves holding it twice.
pub fn linear_gemm(
    x: &[f32],
    rows: usize,
    w: Matrix<'_>,
    bias: Option<&[f32]>,
    out: Output<'_>,
    activation: Activation,
) {
    run_linear(x, rows, w, bias, out, activation, true)
}

fn run_linear(
    x: &[f32],
    rows: usize,
    w: Matrix<'_>,
    bias: Option<&[f32]>,
    out: Output<'_>,
    activation: Activation,
    gemm: bool,
) {
    let Matrix {
        inputs, outputs, ..
    } = w;
    assert_eq!(w.data.len(), inputs * outputs, "weight shape");
    assert_eq!(x.len(), rows * inputs, "input shape");
    assert!(bias.is_none_or(|b| b.len() == outputs), "bias shape");
    assert!(
        out.col0 + outputs <= out.stride && out.data.len() == rows * out.stride,
        "output shape"
    );
    if rows == 0 || outputs == 0 {
        return;
    }
    let Output {
        data: out,
        stride,
        col0,
    } = out;
    if inputs == 0 {
        for row in out.chunks_exact_mut(stride) {
            let dst = &mut row[col0..col0 + outputs];
            match bias {
                Some(b) => dst.copy_from_slice(b),
                None => dst.fill(0.0),
            }
        }
    } else {
        if gemm {
            gemm_rows(x, rows, w, bias, out, stride, col0);
        } else {
            dot_out_in(x, rows, w, bias, out, stride, col0);
        }
    }
    if col0 == 0 && stride == outputs {
        activation.apply(out);
    } else if activation != Activation::Identity {
        for row in out.chunks_exact_mut(stride) {
            activation.apply(&mut row[col0..col0 + outputs]);
        }
    }
}

/// From this many rows on, [`gemm_rows`] runs the packed kernels ([`super::packed`]) where the
/// instruction set has them; below, gemm (`cargo bench --bench packed`).
const PACKED_ROWS: usize = 64;

/// gemm on a weight in either layout (an `[out, in]` one read as Wᵀ through strides). The bias
/// is written first and gemm adds the product onto it (`bias + x·W` rounds exactly as `x·W +
/// bias`), saving a pass.
fn gemm_rows(
    x: &[f32],
    rows: usize,
    w: Matrix<'_>,
    bias: Option<&[f32]>,
    out: &mut [f32],
    stride: usize,
    col0: usize,
) {
    let (inputs, outputs) = (w.inputs, w.outputs);
    if let Some(bias) = bias {
        for row in out.chunks_exact_mut(stride) {
            row[col0..col0 + outputs].copy_from_slice(bias);
        }
    }
    if rows >= PACKED_ROWS {
        let done = match w.layout {
            Layout::OutIn => {
                let src = super::packed::OutIn {
                    data: w.data,
                    inputs,
                    outputs,
                };
                super::packed::product(x, rows, &src, out, stride, col0, bias.is_some())
            }
            Layout::InOut => {
                let src = super::packed::InOut {
                    data: w.data,
                    inputs,
                    outputs,
                };
                super::packed::product(x, rows, &src, out, stride, col0, bias.is_some())
            }
        };
        if done {
            return;
        }
    }
    // Wᵀ's element (i, o): W[i][o] for [in, out]; W[o][i] for [out, in].
    let (rhs_cs, rhs_rs) = match w.layout {
        Layout::InOut => (1, outputs as isize),
        Layout::OutIn => (inputs as isize, 1),
    };
    // SAFETY: every pointer/stride pair addresses only the slices checked in `linear`: dst rows
    // of `stride` values from column col0, `outputs` wide (col0 + outputs ≤ stride); lhs
    // [rows, inputs] row-major; rhs the inputs × outputs weight in its layout.
    unsafe {
        super::gemm::gemm(
            rows,
            outputs,
            inputs,
            out.as_mut_ptr().add(col0),
            1,
            stride as isize,
            bias.is_some(),
            x.as_ptr(),
            1,
            inputs as isize,
            w.data.as_ptr(),
            rhs_cs,
            rhs_rs,
            1.0,
            1.0,
            Parallelism::Rayon(0),
        );
    }
}

/// Rows of `x` handled together by one pass over a band of weight rows: their values stay in
/// L2 while the band streams past.
const ROW_TILE: usize = 32;

/// The dot-product kernel on an `[out, in]` weight: tasks own bands of outputs; within a band,
/// blocks of input rows × weight rows accumulate in registers.
fn dot_out_in(
    x: &[f32],
    rows: usize,
    w: Matrix<'_>,
    bias: Option<&[f32]>,
    out: &mut [f32],
    stride: usize,
    col0: usize,
) {
    let (inputs, outputs) = (w.inputs, w.outputs);
    let kernel = DotKernel::for_cpu();
    let threads = rayon::current_num_threads().max(1);
    // Bands a multiple of the block width; about four per thread so that a thread slowed by
    // other work is made up for, but at least 16 outputs so each task has work.
    let band = outputs
        .div_ceil(4 * threads)
        .next_multiple_of(kernel.outputs)
        .max(16);
    let bands = outputs.div_ceil(band);
    let dst = SharedMut(out.as_mut_ptr());
    let run = |b: usize| {
        let o0 = b * band;
        let o1 = (o0 + band).min(outputs);
        for r0 in (0..rows).step_by(ROW_TILE) {
            let r1 = (r0 + ROW_TILE).min(rows);
            // SAFETY: this task writes only columns col0 + o0 .. col0 + o1 of rows r0..r1, a
            // region no other task touches (bands are disjoint); every read stays inside x
            // ([rows, inputs]), w ([outputs, inputs]) and bias ([outputs]) as checked in
            // `linear`, and every write inside `out` ([rows, stride], col0 + outputs ≤ stride).
            unsafe {
                kernel.run(
                    x.as_ptr().add(r0 * inputs),
                    r1 - r0,
                    w.data.as_ptr().add(o0 * inputs),
                    o1 - o0,
                    inputs,
                    bias.map(|b| b.as_ptr().add(o0)),
                    dst.ptr().add(r0 * stride + col0 + o0),
                    stride,
                );
            }
        }
    };
    if bands == 1 || rows * outputs * inputs < 64 * 1024 {
        (0..bands).for_each(run);
    } else {
        (0..bands).into_par_iter().for_each(run);
    }
}

/// `rows` rows of x (stride `k`) against `outs` weight rows (stride `k`), into `out` (row stride
/// `os`), adding `bias` (`outs` values) when given.
type BlockFn =
    unsafe fn(*const f32, usize, *const f32, usize, usize, Option<*const f32>, *mut f32, usize);

/// The dot-product kernel for this CPU, and how many weight rows its blocks take.
struct DotKernel {
    run: BlockFn,
    outputs: usize,
}

impl DotKernel {
    fn for_cpu() -> DotKernel {
        #[cfg(target_arch = "x86_64")]
        match super::isa() {
            super::Isa::Avx512 => {
                return DotKernel {
                    run: x86::band_avx512,
                    outputs: 4,
                }
            }
            super::Isa::Avx2 => {
                return DotKernel {
                    run: x86::band_avx2,
                    outputs: 4,
                }
            }
            super::Isa::Baseline => {}
        }
        DotKernel {
            run: band_portable,
            outputs: 1,
        }
    }

    /// Runs the kernel on a band.
    ///
    /// # Safety
    /// `x` must hold `rows × k` values, `w` `outs × k`, `bias` (if any) `outs`, and `out` must
    /// be writable at `r·os + o` for every `r < rows`, `o < outs`.
    #[allow(clippy::too_many_arguments)]
    unsafe fn run(
        &self,
        x: *const f32,
        rows: usize,
        w: *const f32,
        outs: usize,
        k: usize,
        bias: Option<*const f32>,
        out: *mut f32,
        os: usize,
    ) {
        // SAFETY: forwarded from the caller; `for_cpu` chose a kernel the CPU supports.
        unsafe { (self.run)(x, rows, w, outs, k, bias, out, os) }
    }
}

/// The baseline kernel: one weight row against up to four input rows, in eight lanes of
/// separate multiplies and adds (the compiler vectorises them with SSE2).
///
/// # Safety
/// As [`DotKernel::run`].
#[allow(clippy::too_many_arguments)]
unsafe fn band_portable(
    x: *const f32,
    rows: usize,
    w: *const f32,
    outs: usize,
    k: usize,
    bias: Option<*const f32>,
    out: *mut f32,
    os: usize,
) {
    const L: usize = 8;
    // SAFETY: the caller guarantees x: rows × k, w: outs × k, bias: outs values, and out
    // writable at r·os + o; every index below stays inside those.
    unsafe {
        let x = std::slice::from_raw_parts(x, rows * k);
        let w = std::slice::from_raw_parts(w, outs * k);
        for o in 0..outs {
            let wr = &w[o * k..][..k];
            let b = bias.map_or(0.0, |b| *b.add(o));
            for r0 in (0..rows).step_by(4) {
                let n = (rows - r0).min(4);
                let mut acc = [[0f32; L]; 4];
                let mut tail = [0f32; 4];
                for (r, (acc, tail)) in acc.iter_mut().zip(&mut tail).enumerate().take(n) {
                    let xr = &x[(r0 + r) * k..][..k];
                    let xc = xr.chunks_exact(L);
                    let wc = wr.chunks_exact(L);
                    *tail = xc
                        .remainder()
                        .iter()
                        .zip(wc.remainder())
                        .map(|(a, b)| a * b)
                        .sum();
                    for (a, b) in xc.zip(wc) {
                        for l in 0..L {
                            acc[l] += a[l] * b[l];
                        }
                    }
                }
                for r in 0..n {
                    *out.add((r0 + r) * os + o) = b + (acc[r].iter().sum::<f32>() + tail[r]);
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// Generates a band function for one instruction set: blocks of up to `R` input rows × `O`
    /// weight rows, accumulators in registers; the edges of the band take smaller blocks.
    macro_rules! band {
        ($name:ident, $block:ident, $feature:literal, $r:literal, $o:literal, $pf:literal) => {
            /// See [`super::DotKernel::run`].
            ///
            /// # Safety
            /// As [`super::DotKernel::run`]; the CPU must support the target features.
            #[target_feature(enable = $feature)]
            #[allow(clippy::too_many_arguments)]
            pub(super) unsafe fn $name(
                x: *const f32,
                rows: usize,
                w: *const f32,
                outs: usize,
                k: usize,
                bias: Option<*const f32>,
                out: *mut f32,
                os: usize,
            ) {
                let mut o = 0;
                while o < outs {
                    let on = (outs - o).min($o);
                    let b = bias.map(|b| b.add(o));
                    let mut r = 0;
                    // The weight rows after this block, which each pass over it prefetches a
                    // stretch of (see `prefetch_next`): a pointer only, maybe past the band's
                    // end, hence wrapping arithmetic; prefetches never fault.
                    let mut pf = w.wrapping_add((o + on) * k);
                    while r < rows {
                        let rn = (rows - r).min($r);
                        let (xp, wp, op) = (x.add(r * k), w.add(o * k), out.add(r * os + o));
                        // SAFETY: a block of rn ≤ 4 rows × on ≤ O outputs inside the band the
                        // caller vouched for.
                        unsafe {
                            match (rn, on) {
                                (4, $o) => $block::<4, $o>(xp, wp, k, b, op, os, pf),
                                (3, $o) => $block::<3, $o>(xp, wp, k, b, op, os, pf),
                                (2, $o) => $block::<2, $o>(xp, wp, k, b, op, os, pf),
                                (1, $o) => $block::<1, $o>(xp, wp, k, b, op, os, pf),
                                (4, _) => $block::<4, 1>(xp, wp, k, b, op, os, pf),
                                (3, _) => $block::<3, 1>(xp, wp, k, b, op, os, pf),
                                (2, _) => $block::<2, 1>(xp, wp, k, b, op, os, pf),
                                _ => $block::<1, 1>(xp, wp, k, b, op, os, pf),
                            }
                        }
                        pf = pf.wrapping_add($pf * k);
                        r += $r;
                    }
                    o += if on == $o { $o } else { 1 };
                }
            }
        };
    }

    // 4 × 4 blocks (4 × 6 measured 10 % slower: bert-base, 12 tokens, one thread).
    // Each pass prefetches 2 rows of the next block (12 tokens: 3 passes cover its 4 rows).
    band!(band_avx512, block_avx512, "avx512f", 4, 4, 2);
    // 3 × 4 blocks: 12 accumulators, 3 x vectors and one weight vector fill AVX2's 16
    // registers; 12 FMA chains keep both FMA units busy through their latency, for 7 loads.
    // bert-base at 12 tokens, one thread: 46 ms against 61 with 4 × 2 blocks (and 4 × 3, which
    // spills, 68).
    // Each pass prefetches 1 row of the next block (12 tokens: 4 passes cover its 4 rows).
    band!(band_avx2, block_avx2, "avx2,fma", 3, 4, 1);

    /// `R` rows of x × `O` rows of w, 16 lanes; the tail of `k` through masked loads.
    #[target_feature(enable = "avx512f")]
    #[inline]
    // Indices name the register block's row and column; iterators would hide that.
    #[allow(clippy::needless_range_loop)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn block_avx512<const R: usize, const O: usize>(
        x: *const f32,
        w: *const f32,
        k: usize,
        bias: Option<*const f32>,
        out: *mut f32,
        os: usize,
        pf: *const f32,
    ) {
        // SAFETY: reads x rows 0..R and w rows 0..O at columns < k (the masked tail loads
        // nothing past k), writes out at r·os + o for r < R, o < O: the block the caller owns.
        unsafe {
            let mut acc = [[_mm512_setzero_ps(); O]; R];
            let mut i = 0;
            while i + 16 <= k {
                let mut xv = [_mm512_setzero_ps(); R];
                for (r, v) in xv.iter_mut().enumerate() {
                    *v = _mm512_loadu_ps(x.add(r * k + i));
                }
                prefetch_next::<2>(pf, i);
                for o in 0..O {
                    let wv = _mm512_loadu_ps(w.add(o * k + i));
                    for r in 0..R {
                        acc[r][o] = _mm512_fmadd_ps(xv[r], wv, acc[r][o]);
                    }
                }
                i += 16;
            }
            if i < k {
                let m: __mmask16 = ((1u32 << (k - i)) - 1) as __mmask16;
                let mut xv = [_mm512_setzero_ps(); R];
                for (r, v) in xv.iter_mut().enumerate() {
                    *v = _mm512_maskz_loadu_ps(m, x.add(r * k + i));
                }
                for o in 0..O {
                    let wv = _mm512_maskz_loadu_ps(m, w.add(o * k + i));
                    for r in 0..R {
                        acc[r][o] = _mm512_fmadd_ps(xv[r], wv, acc[r][o]);
                    }
                }
            }
            for (r, acc) in acc.iter().enumerate() {
                for (o, a) in acc.iter().enumerate() {
                    let b = bias.map_or(0.0, |b| *b.add(o));
                    *out.add(r * os + o) = b + _mm512_reduce_add_ps(*a);
                }
            }
        }
    }

    /// Prefetches `LINES` lines (16 values each) at `pf + LINES·i` into L2: called once per 16
    /// columns `i` of a pass of a block over its `k` columns, a pass prefetches `LINES` weight
    /// rows of the block after it (the band macro moves `pf` on by as many rows per pass). The
    /// pointer need not be valid: a prefetch never faults, and it is computed with wrapping
    /// arithmetic.
    ///
    /// Short inputs stream each weight from memory once: the first pass of input rows over a
    /// block of weight rows waits for memory, the next ones (the same weights, from cache) keep
    /// the FMA units busy but leave the memory bus idle, since no cache miss trains the hardware
    /// prefetcher. Prefetching the next block's lines from every pass overlaps the two.
    ///
    /// Into L2, not L1 (`_MM_HINT_T1`): L1 tracks only a few outstanding misses, too few to
    /// cover memory's latency at full bandwidth, and each waiting L1 prefetch holds one; L2
    /// tracks many more, and the later passes read the block from L2 fast enough. bert-base at
    /// 12 tokens, AVX2, one thread, CPU time: 45 ms without prefetching, 40 into L1, 34 into L2
    /// (one block ahead; two blocks ahead, or two rows per pass, were no better). AVX-512, whose
    /// 4-row blocks make only 3 passes at 12 tokens, needs two rows per pass: 37 → 30 ms.
    #[inline(always)]
    fn prefetch_next<const LINES: usize>(pf: *const f32, i: usize) {
        for line in 0..LINES {
            // SAFETY: _mm_prefetch is a hint that never faults and reads nothing
            // architecturally, whatever the address; SSE is part of x86_64's baseline.
            unsafe {
                _mm_prefetch::<_MM_HINT_T1>(pf.wrapping_add(LINES * i + 16 * line) as *const i8)
            }
        }
    }

    /// The sum of a vector's eight lanes.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn sum8(v: __m256) -> f32 {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        let s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
        _mm_cvtss_f32(s)
    }

    /// `R` rows of x × `O` rows of w, 8 lanes; the tail of `k` through masked loads.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    // Indices name the register block's row and column; iterators would hide that.
    #[allow(clippy::needless_range_loop)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn block_avx2<const R: usize, const O: usize>(
        x: *const f32,
        w: *const f32,
        k: usize,
        bias: Option<*const f32>,
        out: *mut f32,
        os: usize,
        pf: *const f32,
    ) {
        // SAFETY: as block_avx512: reads inside the R × k and O × k blocks (masked loads read
        // nothing past k), writes inside the R × O block of out.
        unsafe {
            let mut acc = [[_mm256_setzero_ps(); O]; R];
            let mut i = 0;
            while i + 8 <= k {
                let mut xv = [_mm256_setzero_ps(); R];
                for (r, v) in xv.iter_mut().enumerate() {
                    *v = _mm256_loadu_ps(x.add(r * k + i));
                }
                if i % 16 == 0 {
                    prefetch_next::<1>(pf, i);
                }
                for o in 0..O {
                    let wv = _mm256_loadu_ps(w.add(o * k + i));
                    for r in 0..R {
                        acc[r][o] = _mm256_fmadd_ps(xv[r], wv, acc[r][o]);
                    }
                }
                i += 8;
            }
            if i < k {
                let left = (k - i) as i32;
                let m = _mm256_cmpgt_epi32(
                    _mm256_set1_epi32(left),
                    _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                );
                let mut xv = [_mm256_setzero_ps(); R];
                for (r, v) in xv.iter_mut().enumerate() {
                    *v = _mm256_maskload_ps(x.add(r * k + i), m);
                }
                for o in 0..O {
                    let wv = _mm256_maskload_ps(w.add(o * k + i), m);
                    for r in 0..R {
                        acc[r][o] = _mm256_fmadd_ps(xv[r], wv, acc[r][o]);
                    }
                }
            }
            for (r, acc) in acc.iter().enumerate() {
                for (o, a) in acc.iter().enumerate() {
                    let b = bias.map_or(0.0, |b| *b.add(o));
                    *out.add(r * os + o) = b + sum8(*a);
                }
            }
        }
    }
}

/// Write the transpose of `src` (`[rows, cols]`, row-major) into columns `col0..col0 + rows` of
/// `dst` (`[cols, dst_cols]`, row-major): `dst[c][col0 + r] = src[r][c]`.
///
/// Packs `[out, in]` weights into `[in, out]` for gemm when long inputs make that worth it. Tiled,
/// so both sides are read and written a cache line at a time, and parallel over bands of output
/// rows.
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

#[cfg(test)]
mod tests {
    use super::super::activation::gelu_erf;
    use super::super::testing::random;
    use super::*;

    /// The product in f64, for `w` stored `[out, in]`.
    fn naive(x: &[f32], rows: usize, w: &[f32], b: Option<&[f32]>, i: usize, o: usize) -> Vec<f64> {
        let mut out = vec![0.0; rows * o];
        for r in 0..rows {
            for c in 0..o {
                let mut acc = b.map_or(0.0, |b| b[c] as f64);
                for k in 0..i {
                    acc += x[r * i + k] as f64 * w[c * i + k] as f64;
                }
                out[r * o + c] = acc;
            }
        }
        out
    }

    fn transposed(w: &[f32], outputs: usize, inputs: usize) -> Vec<f32> {
        let mut t = vec![0.0; w.len()];
        transpose_into(w, outputs, inputs, &mut t, outputs, 0);
        t
    }

    type LinearFn = fn(&[f32], usize, Matrix<'_>, Option<&[f32]>, Output<'_>, Activation);

    #[test]
    fn both_layouts_match_naive_loops() {
        // Widths with and without a vector tail, rows with and without a 4-row tail, output
        // counts that leave partial blocks, bands that run in parallel.
        for (rows, inputs, outputs) in [
            (1, 3, 2),
            (12, 384, 1152),
            (70, 64, 100),
            (5, 37, 9),
            (33, 20, 31),
            (4, 768, 96),
        ] {
            let x = random(rows * inputs, 1, 1.0);
            let w = random(inputs * outputs, 2, 0.1);
            let b = random(outputs, 3, 0.5);
            let wt = transposed(&w, outputs, inputs);
            for bias in [Some(b.as_slice()), None] {
                let want = naive(&x, rows, &w, bias, inputs, outputs);
                for act in [Activation::Identity, Activation::GeluErf, Activation::Relu] {
                    let ways = [(Layout::OutIn, &w), (Layout::InOut, &wt)]
                        .into_iter()
                        .flat_map(|lw| [(lw, linear as LinearFn), (lw, linear_gemm)]);
                    for (((layout, data), run), isa) in ways.flat_map(|w| {
                        super::super::isa_levels()
                            .into_iter()
                            .map(move |isa| (w, isa))
                    }) {
                        let mut out = vec![0.0; rows * outputs];
                        let m = Matrix {
                            data,
                            inputs,
                            outputs,
                            layout,
                        };
                        let o = Output {
                            data: &mut out,
                            stride: outputs,
                            col0: 0,
                        };
                        super::super::with_isa(isa, || run(&x, rows, m, bias, o, act));
                        for (k, (&got, &acc)) in out.iter().zip(&want).enumerate() {
                            let want = match act {
                                Activation::GeluErf => gelu_erf(acc as f32) as f64,
                                Activation::Relu => acc.max(0.0),
                                _ => acc,
                            };
                            assert!(
                                (got as f64 - want).abs() < 1e-4,
                                "{isa:?} {layout:?} {act:?} bias {} [{}, {}] of {rows}×{inputs}→{outputs}: {got} vs {want}",
                                bias.is_some(),
                                k / outputs,
                                k % outputs
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn outputs_land_in_their_columns_only() {
        // Two maps side by side in a [rows, 3 + 7 + 5 + 2] buffer, at columns 3 and 10; the
        // other columns keep their NaN.
        let (rows, inputs) = (6, 19);
        let x = random(rows * inputs, 4, 1.0);
        let w1 = random(7 * inputs, 5, 0.3);
        let w2 = random(5 * inputs, 6, 0.3);
        let b2 = random(5, 7, 0.3);
        let stride = 17;
        for layout in [Layout::OutIn, Layout::InOut] {
            let mut out = vec![f32::NAN; rows * stride];
            for (w, bias, outputs, col0) in [(&w1, None, 7, 3), (&w2, Some(b2.as_slice()), 5, 10)] {
                let data = match layout {
                    Layout::OutIn => w.clone(),
                    Layout::InOut => transposed(w, outputs, inputs),
                };
                let m = Matrix {
                    data: &data,
                    inputs,
                    outputs,
                    layout,
                };
                let o = Output {
                    data: &mut out,
                    stride,
                    col0,
                };
                linear(&x, rows, m, bias, o, Activation::GeluTanh);
            }
            for r in 0..rows {
                let row = &out[r * stride..][..stride];
                let nan: Vec<bool> = row.iter().map(|v| v.is_nan()).collect();
                let want: Vec<bool> = (0..stride).map(|c| !(3..15).contains(&c)).collect();
                assert_eq!(nan, want, "{layout:?} row {r}");
                let first = naive(&x[r * inputs..][..inputs], 1, &w1, None, inputs, 7);
                for (c, v) in first.iter().enumerate() {
                    let mut g = [*v as f32];
                    Activation::GeluTanh.apply(&mut g);
                    assert!(
                        (row[3 + c] - g[0]).abs() < 1e-5,
                        "{layout:?} row {r} col {c}"
                    );
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
}
