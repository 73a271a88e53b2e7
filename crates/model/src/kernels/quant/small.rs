//! The few-rows kernel: tasks own bands of outputs; within a band, groups of `O` weight rows are
//! decoded a stretch of [`CHUNK`] weights at a time into a buffer that stays in L1, and blocks
//! of `R` input rows × `O` weight rows accumulate over it in registers (`L` lanes each). Every
//! input row passes over a stretch before the next one is decoded, so each weight is decoded
//! once per call, and its bytes are read once, in their compact form.
//!
//! The partial sums of each (input row, weight row) pair live in a vector's lanes across
//! stretches, so the result is the same whatever the stretch length; the lanes are added
//! pairwise at the end, then the bias, as in [`super::super::linear`]'s dot kernel.
//!
//! One body, compiled for each instruction set with its own vector type and block shape (see
//! [`band_for_cpu`]); the decoders are plain loops the compiler vectorises with the same
//! features.

use rayon::prelude::*;

use super::codecs::{decode_with, Block, MulAdd, Split};
use super::{Cpu, Job};
use crate::kernels::SharedMut;

/// Weights decoded per stretch: a multiple of every block size (256 for the K formats, 32 for
/// the others), so stretches hold whole blocks. `O × CHUNK` f32 (16 KiB with `O = 4`) stay in
/// L1 while the input rows pass over them.
const CHUNK: usize = 1024;

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
    let cpu = Cpu::get();
    #[cfg(target_arch = "x86_64")]
    let fused = rows == 1 && super::arch::x86::fused::available(cpu, job.w.dtype);
    // The fused kernels load the input row 64 bytes at a time; from an allocator's 16-byte
    // alignment every such load spans two cache lines. A copy on a 64-byte boundary costs a
    // pass over `inputs` floats; Q4_K one row 2048 → 8192: 0.94 → 0.91 ms.
    #[cfg(target_arch = "x86_64")]
    let aligned;
    #[cfg(target_arch = "x86_64")]
    let job = &if fused && job.x.as_ptr().align_offset(64) != 0 {
        aligned = super::arch::x86::fused::Aligned::of(job.x);
        Job {
            x: aligned.as_slice(),
            ..*job
        }
    } else {
        *job
    };
    let work = |b: usize| {
        let o0 = b * band;
        let o1 = (o0 + band).min(outputs);
        // SAFETY (both calls): this task writes only columns col0 + o0 .. col0 + o1 of each row
        // of `out` ([rows, stride], col0 + outputs ≤ stride, checked by `linear_quant`), and
        // bands are disjoint, so no two tasks write the same element; `fused::available`
        // checked the CPU for the fused kernels, and `rows == 1`.
        #[cfg(target_arch = "x86_64")]
        if fused {
            unsafe { super::arch::x86::fused::band(cpu, job, o0, o1, dst) };
            return;
        }
        unsafe { band_for_cpu::<B>(cpu, job, o0, o1, dst) };
    };
    if bands == 1 || rows * outputs * inputs < 64 * 1024 {
        (0..bands).for_each(work);
    } else {
        (0..bands).into_par_iter().for_each(work);
    }
}

/// The band kernel for this CPU: AVX-512 blocks of 4 rows × 4 weight rows (16 of 32 vector
/// registers accumulate), AVX2 3 × 4 (12 of 16, as the f32 dot kernel), baseline 2 × 2 on
/// 4-lane arrays without FMA.
///
/// # Safety
/// As [`band`]; `cpu` must describe this CPU ([`Cpu::get`]).
unsafe fn band_for_cpu<B: Block>(cpu: Cpu, job: &Job<'_>, o0: usize, o1: usize, dst: SharedMut) {
    let f16c = cpu.f16c;
    #[cfg(target_arch = "x86_64")]
    {
        use crate::kernels::Isa;

        #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
        unsafe fn avx512<B: Block>(job: &Job<'_>, o0: usize, o1: usize, d: SharedMut, h: bool) {
            // SAFETY: forwarded from the caller; the CPU has AVX-512 (the caller checked).
            unsafe { band::<B, super::arch::x86::simd::Avx512, 4, 4>(job, o0, o1, d, h) }
        }
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2<B: Block>(job: &Job<'_>, o0: usize, o1: usize, d: SharedMut, h: bool) {
            // SAFETY: forwarded from the caller; the CPU has AVX2 and FMA (the caller checked).
            unsafe { band::<B, super::arch::x86::simd::Avx2, 3, 4>(job, o0, o1, d, h) }
        }
        match cpu.isa {
            // SAFETY: `Cpu::get` checked at run time that the CPU has these features; the rest
            // is forwarded from the caller.
            Isa::Avx512 => return unsafe { avx512::<B>(job, o0, o1, dst, f16c) },
            // SAFETY: as above.
            Isa::Avx2 => return unsafe { avx2::<B>(job, o0, o1, dst, f16c) },
            Isa::Baseline => {}
        }
    }
    // SAFETY: forwarded from the caller.
    unsafe { band::<B, Portable, 2, 2>(job, o0, o1, dst, f16c) }
}

/// The vector operations the kernel needs, on one instruction set's registers.
///
/// # Safety
/// Implementations may use instructions the CPU must have; callers run them only in functions
/// compiled for (and dispatched to) that instruction set.
pub(crate) unsafe trait Simd {
    /// Lanes per vector (at most [`MAX_LANES`]).
    const LANES: usize;
    /// How the decoders multiply and add on this instruction set.
    type M: MulAdd;
    type V: Copy;
    /// All lanes zero.
    unsafe fn zero() -> Self::V;
    /// `LANES` values from `p` (any alignment).
    unsafe fn load(p: *const f32) -> Self::V;
    /// `LANES` values to `p` (any alignment).
    unsafe fn store(p: *mut f32, v: Self::V);
    /// `a·b + c`, lane by lane.
    unsafe fn mul_add(a: Self::V, b: Self::V, c: Self::V) -> Self::V;
    /// `a + b`, lane by lane.
    unsafe fn add(a: Self::V, b: Self::V) -> Self::V;
}

/// The widest vector, in lanes: the size of a stored accumulator.
const MAX_LANES: usize = 16;

/// One (input row, weight row) pair's partial sums between stretches: a vector's lanes, and
/// the tail of a row whose length is not a multiple of the lanes (float formats) in one value.
#[derive(Clone, Copy)]
struct Partial {
    lanes: [f32; MAX_LANES],
    tail: f32,
}

const ZERO: Partial = Partial {
    lanes: [0.0; MAX_LANES],
    tail: 0.0,
};

impl Partial {
    /// The lanes' sum, pairwise (the same order for every instruction set with the same
    /// lanes), then the tail.
    fn sum(&self, lanes: usize) -> f32 {
        let mut v = self.lanes;
        let mut width = lanes;
        while width > 1 {
            width /= 2;
            for l in 0..width {
                v[l] += v[l + width];
            }
        }
        v[0] + self.tail
    }
}

/// Weights decoded between two prefetches (a multiple of every block size).
const PIECE: usize = 256;

/// Asks for the `len` bytes at `p` to be brought into L2, a line at a time. `p` need not be
/// valid (past the matrix's end for the last group): a prefetch never faults, and the address
/// is computed with wrapping arithmetic.
///
/// The weights stream from memory once, and decoding them keeps the core busy between loads,
/// so the hardware prefetcher alone left the few-rows kernel waiting on memory: one row of
/// 2048 → 2048 in BF16 read 5.7 GB/s, the f32 dot kernel (which prefetches the same way, see
/// `linear.rs`) 14.6.
#[inline(always)]
fn prefetch(p: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T1};
        let mut at = 0;
        while at < len {
            // SAFETY: a prefetch is a hint that never faults and reads nothing
            // architecturally, whatever the address; SSE is part of x86_64's baseline.
            unsafe { _mm_prefetch::<_MM_HINT_T1>(p.wrapping_add(at).cast()) };
            at += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, len);
}

/// Outputs `o0..o1` of every row: `dst[r·stride + col0 + o] = bias[o] + x[r] · W[o]`, in
/// blocks of `R` input rows × `O` weight rows.
///
/// # Safety
/// `dst` must point at the checked `[rows, stride]` output of `job` and the caller must own
/// columns `col0 + o0 .. col0 + o1` of it (no other thread reads or writes them meanwhile);
/// `o0 ≤ o1 ≤ outputs`; the CPU must have `S`'s instruction set, and F16C if `f16c`.
#[inline(always)]
unsafe fn band<B: Block, S: Simd, const R: usize, const O: usize>(
    job: &Job<'_>,
    o0: usize,
    o1: usize,
    dst: SharedMut,
    f16c: bool,
) {
    let (rows, k) = (job.rows, job.w.inputs);
    let row_bytes = job.w.row_bytes();
    // Whole blocks per stretch (floats: any length).
    let chunk = (CHUNK / B::VALUES).max(1) * B::VALUES;
    let mut decoded = vec![0f32; O * chunk];
    let mut acc = vec![[ZERO; O]; rows];
    let mut g0 = o0;
    while g0 < o1 {
        let on = (o1 - g0).min(O);
        acc.fill([ZERO; O]);
        let mut c0 = 0;
        while c0 < k {
            let cn = (k - c0).min(chunk);
            for (o, buf) in decoded.chunks_exact_mut(chunk).enumerate() {
                let buf = &mut buf[..cn];
                if o < on {
                    let start = (g0 + o) * row_bytes + c0 / B::VALUES * B::BYTES;
                    let src = &job.w.bytes[start..][..cn / B::VALUES * B::BYTES];
                    // Piece by piece, each after asking for the same piece of the next group's
                    // row (O rows on), so that it arrives while this group runs: spread out,
                    // the requests stay within what the memory system keeps in flight.
                    let ahead = job.w.bytes.as_ptr().wrapping_add(start + O * row_bytes);
                    let piece = PIECE.max(B::VALUES);
                    let piece_bytes = piece / B::VALUES * B::BYTES;
                    for (i, (src, buf)) in src
                        .chunks(piece_bytes)
                        .zip(buf.chunks_mut(piece))
                        .enumerate()
                    {
                        prefetch(ahead.wrapping_add(i * piece_bytes), src.len());
                        decode_with::<B, S::M>(f16c, src, buf);
                    }
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
                // k]); the O decoded rows have `chunk` ≥ cn values each; `a` has rn entries;
                // the CPU has S's instructions (the caller's contract).
                unsafe {
                    match rn {
                        n if n == R => block::<S, R, O>(xp, k, w, chunk, cn, a),
                        3 => block::<S, 3, O>(xp, k, w, chunk, cn, a),
                        2 => block::<S, 2, O>(xp, k, w, chunk, cn, a),
                        _ => block::<S, 1, O>(xp, k, w, chunk, cn, a),
                    }
                }
                r += rn;
            }
            c0 += cn;
        }
        let out = dst.ptr();
        for (r, acc) in acc.iter().enumerate() {
            for (o, partial) in acc.iter().enumerate().take(on) {
                let b = job.bias.map_or(0.0, |b| b[g0 + o]);
                // SAFETY: row r < rows, column col0 + g0 + o with o0 ≤ g0 + o < o1: inside the
                // output and inside this band's columns (the caller's contract).
                unsafe { *out.add(r * job.stride + job.col0 + g0 + o) = b + partial.sum(S::LANES) };
            }
        }
        g0 += on;
    }
}

/// `acc[r][o] += x[r][..n] · w[o][..n]` for the `RN` input rows at `x` (stride `xs`) and the
/// `O` decoded rows at `w` (stride `ws`): lane `l` of the partial sums takes the products at
/// `i ≡ l (mod LANES)`, a tail shorter than `LANES` (float formats only) goes to `tail`.
///
/// # Safety
/// `x` must be readable at `r·xs + i` and `w` at `o·ws + i` for `r < RN`, `o < O`, `i < n`;
/// `acc` must have at least `RN` entries; the CPU must have `S`'s instruction set.
#[inline(always)]
// Indices name the register block's row and column; iterators would hide that.
#[allow(clippy::needless_range_loop)]
unsafe fn block<S: Simd, const RN: usize, const O: usize>(
    x: *const f32,
    xs: usize,
    w: *const f32,
    ws: usize,
    n: usize,
    acc: &mut [[Partial; O]],
) {
    // SAFETY (every load and store below): indices r·xs + i + l and o·ws + i + l with r < RN,
    // o < O and i + l < n, inside what the caller vouched for; the accumulators' lanes are
    // MAX_LANES ≥ LANES values each.
    unsafe {
        let mut a = [[S::zero(); O]; RN];
        for r in 0..RN {
            for o in 0..O {
                a[r][o] = S::load(acc[r][o].lanes.as_ptr());
            }
        }
        let full = n / S::LANES * S::LANES;
        let mut i = 0;
        if RN == 1 {
            // One input row: O chains of FMAs are too few to cover an FMA's latency (4–5
            // cycles, two units), so a second set of O accumulators takes every other vector.
            let mut b = [S::zero(); O];
            while i + 2 * S::LANES <= full {
                let (x0, x1) = (S::load(x.add(i)), S::load(x.add(i + S::LANES)));
                for o in 0..O {
                    a[0][o] = S::mul_add(x0, S::load(w.add(o * ws + i)), a[0][o]);
                    b[o] = S::mul_add(x1, S::load(w.add(o * ws + i + S::LANES)), b[o]);
                }
                i += 2 * S::LANES;
            }
            for o in 0..O {
                a[0][o] = S::add(a[0][o], b[o]);
            }
        }
        while i < full {
            let mut xv = [S::zero(); RN];
            for r in 0..RN {
                xv[r] = S::load(x.add(r * xs + i));
            }
            for o in 0..O {
                let wv = S::load(w.add(o * ws + i));
                for r in 0..RN {
                    a[r][o] = S::mul_add(xv[r], wv, a[r][o]);
                }
            }
            i += S::LANES;
        }
        for r in 0..RN {
            for o in 0..O {
                S::store(acc[r][o].lanes.as_mut_ptr(), a[r][o]);
                for j in full..n {
                    acc[r][o].tail += *x.add(r * xs + j) * *w.add(o * ws + j);
                }
            }
        }
    }
}

/// Four lanes in plain arrays, a multiply and an add each (the compiler vectorises them with
/// SSE2; `mul_add` without hardware FMA would be a slow library call).
struct Portable;

// SAFETY: plain Rust on arrays; nothing the baseline lacks.
unsafe impl Simd for Portable {
    const LANES: usize = 4;
    type M = Split;
    type V = [f32; 4];
    #[inline(always)]
    unsafe fn zero() -> [f32; 4] {
        [0.0; 4]
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> [f32; 4] {
        // SAFETY: the caller vouches for 4 readable values at p.
        unsafe { std::ptr::read_unaligned(p.cast()) }
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: [f32; 4]) {
        // SAFETY: the caller vouches for 4 writable values at p.
        unsafe { std::ptr::write_unaligned(p.cast(), v) }
    }
    #[inline(always)]
    unsafe fn mul_add(a: [f32; 4], b: [f32; 4], c: [f32; 4]) -> [f32; 4] {
        std::array::from_fn(|l| a[l] * b[l] + c[l])
    }
    #[inline(always)]
    unsafe fn add(a: [f32; 4], b: [f32; 4]) -> [f32; 4] {
        std::array::from_fn(|l| a[l] + b[l])
    }
}
