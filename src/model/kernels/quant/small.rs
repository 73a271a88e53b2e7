//! The few-rows kernel: tasks own bands of outputs; within a band, groups of `O` weight rows are
//! decoded a stretch of [`CHUNK`] weights at a time into a buffer that stays in L1, and blocks
//! of `R` input rows × `O` weight rows accumulate over it in registers (`L` lanes each). Every
//! input row passes over a stretch before the next one is decoded, so each weight is decoded
//! once per call, and its bytes are read once, in their compact form.
//!
//! The partial sums of each (input row, weight row) pair live in `L` lanes across stretches, so
//! the result is the same whatever the stretch length; the lanes are added pairwise at the end,
//! then the bias, as in [`super::super::linear`]'s dot kernel.
//!
//! One body, compiled for each instruction set with its own block shape (see [`band`]): the
//! compiler vectorises the lane loops, and `mul_add` becomes one FMA where the CPU has it.

use rayon::prelude::*;

use super::blocks::Block;
use super::{Cpu, Job};
use crate::model::kernels::SharedMut;

/// Weights decoded per stretch: a multiple of every block size (256 for the K formats, 32 for
/// the others), so stretches hold whole blocks. `O × CHUNK` f32 (16 KiB with `O = 4`) stay in
/// L1 while the input rows pass over them.
const CHUNK: usize = 1024;

/// Multiply-add of one lane: fused where the instruction set has FMA, else a multiply and an
/// add (`mul_add` without hardware FMA is a slow library call).
trait MulAdd {
    fn mul_add(a: f32, b: f32, c: f32) -> f32;
}

/// `a·b + c` rounded once (an FMA instruction in functions compiled with `fma`).
struct Fused;
impl MulAdd for Fused {
    #[inline(always)]
    fn mul_add(a: f32, b: f32, c: f32) -> f32 {
        a.mul_add(b, c)
    }
}

/// `a·b + c` rounded twice.
struct Split;
impl MulAdd for Split {
    #[inline(always)]
    fn mul_add(a: f32, b: f32, c: f32) -> f32 {
        a * b + c
    }
}

/// Runs the product of `job` into `out` (its checked `[rows, stride]` buffer).
pub(super) fn run<B: Block>(job: &Job<'_>, out: &mut [f32]) {
    let (rows, inputs, outputs) = (job.rows, job.w.inputs, job.w.outputs);
    let threads = rayon::current_num_threads().max(1);
    // Bands a multiple of the largest block width (4), about four per thread so that a thread
    // slowed by other work is made up for, at least 16 outputs each.
    let band = outputs.div_ceil(4 * threads).next_multiple_of(4).max(16);
    let bands = outputs.div_ceil(band);
    let dst = SharedMut(out.as_mut_ptr());
    // Chosen here, on the calling thread (a test's forced choice is per thread).
    let isa = Cpu::get();
    let work = |b: usize| {
        let o0 = b * band;
        let o1 = (o0 + band).min(outputs);
        // SAFETY: this task writes only columns col0 + o0 .. col0 + o1 of each row of `out`
        // ([rows, stride], col0 + outputs ≤ stride, checked by `linear_quant`), and bands are
        // disjoint, so no two tasks write the same element.
        unsafe { band_for_cpu::<B>(isa, job, o0, o1, dst) };
    };
    if bands == 1 || rows * outputs * inputs < 64 * 1024 {
        (0..bands).for_each(work);
    } else {
        (0..bands).into_par_iter().for_each(work);
    }
}

/// The band kernel for this CPU: AVX-512 blocks of 4 rows × 4 weight rows × 16 lanes (16 of 32
/// registers accumulate), AVX2 3 × 4 × 8 (12 of 16, as the f32 dot kernel), baseline 2 × 2 × 8
/// (8 of SSE2's 16) without FMA.
///
/// # Safety
/// As [`band`]; `isa` must be one the CPU has ([`Cpu::get`]).
unsafe fn band_for_cpu<B: Block>(isa: Cpu, job: &Job<'_>, o0: usize, o1: usize, dst: SharedMut) {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::model::kernels::Isa;

        #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
        unsafe fn avx512<B: Block>(job: &Job<'_>, o0: usize, o1: usize, dst: SharedMut) {
            // SAFETY: forwarded from the caller.
            unsafe { band::<B, Fused, 16, 4, 4>(job, o0, o1, dst) }
        }
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2<B: Block>(job: &Job<'_>, o0: usize, o1: usize, dst: SharedMut) {
            // SAFETY: forwarded from the caller.
            unsafe { band::<B, Fused, 8, 3, 4>(job, o0, o1, dst) }
        }
        match isa.0 {
            // SAFETY: `isa()` checked at run time that the CPU has these features; the rest is
            // forwarded from the caller.
            Isa::Avx512 => return unsafe { avx512::<B>(job, o0, o1, dst) },
            // SAFETY: as above.
            Isa::Avx2 => return unsafe { avx2::<B>(job, o0, o1, dst) },
            Isa::Baseline => {}
        }
    }
    // SAFETY: forwarded from the caller.
    unsafe { band::<B, Split, 8, 2, 2>(job, o0, o1, dst) }
}

/// Outputs `o0..o1` of every row: `dst[r·stride + col0 + o] = bias[o] + x[r] · W[o]`.
///
/// # Safety
/// `dst` must point at the checked `[rows, stride]` output of `job` and the caller must own
/// columns `col0 + o0 .. col0 + o1` of it (no other thread reads or writes them meanwhile);
/// `o0 ≤ o1 ≤ outputs`.
#[inline(always)]
unsafe fn band<B: Block, M: MulAdd, const L: usize, const R: usize, const O: usize>(
    job: &Job<'_>,
    o0: usize,
    o1: usize,
    dst: SharedMut,
) {
    let (rows, k) = (job.rows, job.w.inputs);
    let row_bytes = job.w.row_bytes();
    // Whole blocks per stretch (floats: any length).
    let chunk = (CHUNK / B::VALUES).max(1) * B::VALUES;
    let mut decoded = vec![0f32; O * chunk];
    let mut acc = vec![[[0f32; L]; O]; rows];
    let mut g0 = o0;
    while g0 < o1 {
        let on = (o1 - g0).min(O);
        acc.fill([[0.0; L]; O]);
        let mut c0 = 0;
        while c0 < k {
            let cn = (k - c0).min(chunk);
            for (o, buf) in decoded.chunks_exact_mut(chunk).enumerate() {
                let buf = &mut buf[..cn];
                if o < on {
                    let start = (g0 + o) * row_bytes + c0 / B::VALUES * B::BYTES;
                    B::decode(&job.w.bytes[start..][..cn / B::VALUES * B::BYTES], buf);
                } else {
                    // Rows past the band's end (its last group only): zeros, never written out.
                    buf.fill(0.0);
                }
            }
            let w = decoded.as_ptr();
            let mut r = 0;
            while r < rows {
                let rn = (rows - r).min(R);
                let xp = job.x[r * k + c0..].as_ptr();
                let a = &mut acc[r..r + rn];
                // SAFETY: rows r..r + rn of x have k values from column c0 ≥ cn (x is [rows,
                // k]); the O decoded rows have `chunk` ≥ cn values each; `a` has rn entries.
                unsafe {
                    match rn {
                        n if n == R => block::<M, L, R, O>(xp, k, w, chunk, cn, a),
                        3 => block::<M, L, 3, O>(xp, k, w, chunk, cn, a),
                        2 => block::<M, L, 2, O>(xp, k, w, chunk, cn, a),
                        _ => block::<M, L, 1, O>(xp, k, w, chunk, cn, a),
                    }
                }
                r += rn;
            }
            c0 += cn;
        }
        let out = dst.ptr();
        for (r, acc) in acc.iter().enumerate() {
            for (o, lanes) in acc.iter().enumerate().take(on) {
                let b = job.bias.map_or(0.0, |b| b[g0 + o]);
                // SAFETY: row r < rows, column col0 + g0 + o with o0 ≤ g0 + o < o1: inside the
                // output and inside this band's columns (the caller's contract).
                unsafe { *out.add(r * job.stride + job.col0 + g0 + o) = b + sum_lanes(*lanes) };
            }
        }
        g0 += on;
    }
}

/// The lanes' sum, pairwise (the same order for every instruction set with the same `L`).
#[inline(always)]
fn sum_lanes<const L: usize>(mut v: [f32; L]) -> f32 {
    let mut width = L;
    while width > 1 {
        width /= 2;
        for l in 0..width {
            v[l] += v[l + width];
        }
    }
    v[0]
}

/// `acc[r][o][lane] += Σ x[r][i]·w[o][i]` over `i < n`, `i ≡ lane (mod L)`, for the `RN` input
/// rows at `x` (stride `xs`) and the `O` decoded rows at `w` (stride `ws`). A tail shorter
/// than `L` (float formats only) goes into lane 0.
///
/// # Safety
/// `x` must be readable at `r·xs + i` and `w` at `o·ws + i` for `r < RN`, `o < O`, `i < n`;
/// `acc` must have at least `RN` entries.
#[inline(always)]
// Indices name the register block's row, column and lane; iterators would hide that.
#[allow(clippy::needless_range_loop)]
unsafe fn block<M: MulAdd, const L: usize, const RN: usize, const O: usize>(
    x: *const f32,
    xs: usize,
    w: *const f32,
    ws: usize,
    n: usize,
    acc: &mut [[[f32; L]; O]],
) {
    let mut a = [[[0f32; L]; O]; RN];
    a.copy_from_slice(&acc[..RN]);
    let full = n / L * L;
    let mut i = 0;
    // SAFETY (every read below): indices r·xs + i + l and o·ws + i + l with r < RN, o < O and
    // i + l < n, inside what the caller vouched for; unaligned reads of plain f32s.
    unsafe {
        while i < full {
            let mut xv = [[0f32; L]; RN];
            for r in 0..RN {
                xv[r] = std::ptr::read_unaligned(x.add(r * xs + i).cast::<[f32; L]>());
            }
            for o in 0..O {
                let wv = std::ptr::read_unaligned(w.add(o * ws + i).cast::<[f32; L]>());
                for r in 0..RN {
                    for l in 0..L {
                        a[r][o][l] = M::mul_add(xv[r][l], wv[l], a[r][o][l]);
                    }
                }
            }
            i += L;
        }
        while i < n {
            for r in 0..RN {
                let xv = *x.add(r * xs + i);
                for o in 0..O {
                    a[r][o][0] = M::mul_add(xv, *w.add(o * ws + i), a[r][o][0]);
                }
            }
            i += 1;
        }
    }
    acc[..RN].copy_from_slice(&a);
}
