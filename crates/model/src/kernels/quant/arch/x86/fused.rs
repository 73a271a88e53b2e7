//! One input row (a generated token) against the weights, decoded in registers: no buffer
//! between decoding and the multiply-adds. For the formats a model's linear maps mostly come in
//! (Q4_0, Q4_K, Q6_K, Q8_0, F16, BF16, and gpt-oss's MXFP4 experts); the others take [`crate::kernels::quant::small`]'s path, which decodes
//! through an L1 buffer (about 1.5× slower for one row: the store and the load back per vector
//! are a third of the work; `docs/performance.md`).
//!
//! Every weight is decoded exactly as [`crate::kernels::quant::codecs`] decodes it (the same exact products, one
//! rounding in the same place), so only the order of the sums differs from the other paths.
//! The 256-bit kernels take 4 weight rows at a time, two accumulators per row (8 FMA chains),
//! and ask for the next group's bytes as they read their own.
//!
//! AVX2 with FMA and F16C (256-bit vectors): what every AVX2 CPU has, and every AVX-512 one
//! runs too. On AVX-512, Q4_K and Q6_K (most of a Q4_K_M model's weights) take
//! [`rows_avx512`] instead: one row at a time, eight accumulators, Q4_K's weights picked from
//! a 16-entry table per group by a permute, scales broadcast from memory. Streaming weights
//! from memory on 2 threads, Q4_K 13.0 → 16.6 GB/s and Q6_K 15.3 → 18.9 GB/s against its first
//! form (four rows interleaved, as the 256-bit kernels); a generated token on a
//! Qwen3-4B-shaped Q4_K_M file 0.19 → 0.15 s (`cargo bench --bench gguf_sizes`).

use std::arch::x86_64::*;

use crate::kernels::quant::{codecs, Cpu, Job, QuantType};
use crate::kernels::{Isa, SharedMut};

/// A copy of an input row that starts on a 64-byte boundary (a cache line, a 512-bit vector).
pub(crate) struct Aligned {
    lines: Vec<Line>,
    len: usize,
}

#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([f32; 16]);

impl Aligned {
    /// `x`, copied.
    pub(crate) fn of(x: &[f32]) -> Aligned {
        let mut lines = vec![Line([0.0; 16]); x.len().div_ceil(16)];
        for (line, part) in lines.iter_mut().zip(x.chunks(16)) {
            line.0[..part.len()].copy_from_slice(part);
        }
        Aligned {
            lines,
            len: x.len(),
        }
    }

    /// The copy, as floats.
    pub(crate) fn as_slice(&self) -> &[f32] {
        // SAFETY: `lines` is `len.div_ceil(16)` arrays of 16 f32 laid out one after another
        // (`repr(C)`, size 64 = 16 × 4, no padding), so its first `len` floats are initialised
        // and in bounds, aligned for f32.
        unsafe { std::slice::from_raw_parts(self.lines.as_ptr().cast::<f32>(), self.len) }
    }
}

/// Whether [`band`] has a kernel for `dtype` on `cpu`.
pub(crate) fn available(cpu: Cpu, dtype: QuantType) -> bool {
    use QuantType as D;
    cpu.isa != Isa::Baseline
        && cpu.f16c
        && matches!(
            dtype,
            D::Q4_0 | D::Q4K | D::Q6K | D::Q8_0 | D::F16 | D::BF16 | D::Mxfp4
        )
}

/// Outputs `o0..o1` of the product of `job`'s one input row.
///
/// # Safety
/// `available(cpu, job.w.dtype)` for this CPU's [`Cpu::get`]; `job.rows == 1`; `dst` points
/// at the checked `[1, stride]` output of `job`, whose columns `col0 + o0 .. col0 + o1` the
/// caller owns; `o0 ≤ o1 ≤ outputs`.
pub(crate) unsafe fn band(cpu: Cpu, job: &Job<'_>, o0: usize, o1: usize, dst: SharedMut) {
    use QuantType as D;
    // SAFETY (each arm): `available` saw AVX2, FMA and F16C, and `cpu.isa` AVX-512 where it
    // is asked for; the rest is the caller's contract.
    unsafe {
        match job.w.dtype {
            D::Q4K if cpu.isa == Isa::Avx512 => rows_avx512::<Q4K>(job, o0, o1, dst),
            D::Q6K if cpu.isa == Isa::Avx512 => rows_avx512::<Q6K>(job, o0, o1, dst),
            D::Q4_0 => rows::<Q4_0>(job, o0, o1, dst),
            D::Q4K => rows::<Q4K>(job, o0, o1, dst),
            D::Q6K => rows::<Q6K>(job, o0, o1, dst),
            D::Q8_0 => rows::<Q8_0>(job, o0, o1, dst),
            D::Mxfp4 => rows::<Mxfp4>(job, o0, o1, dst),
            D::F16 => rows::<F16>(job, o0, o1, dst),
            D::BF16 => rows::<BF16>(job, o0, o1, dst),
            _ => {}
        }
    }
}

/// The rows of a band on AVX-512, one after another, for the K formats that make up a Q4_K_M
/// model's weights (Q4_K, and Q6_K for its output matrix and some layers' `attn_v` and
/// `ffn_down`). Each row keeps eight accumulators in registers for its whole length, so no
/// chain of multiply-adds waits on another's latency and nothing goes through memory between
/// blocks (four rows interleaved, two accumulators each, held their sums on the stack and
/// waited on 8 FMA latencies per block: Q4_K one row 2048 → 8192, one thread, in cache
/// 1.23 → 1.04 ms). Each weight is decoded as the 256-bit [`Fused::step`] decodes it (the same
/// exact products, one rounding in the same place), so the weights are the same floats and only
/// the order of the sums differs.
///
/// # Safety
/// As [`band`], with `job.w.dtype` the format of `F`; the CPU has AVX-512 (F, BW, DQ, VL), FMA
/// and F16C.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")]
unsafe fn rows_avx512<F: Wide>(job: &Job<'_>, o0: usize, o1: usize, dst: SharedMut) {
    let rb = job.w.row_bytes();
    let steps = job.w.inputs / 256;
    let x = job.x.as_ptr();
    let out = dst.ptr();
    for o in o0..o1 {
        // SAFETY: o < o1 ≤ outputs: a row of the matrix.
        let row = unsafe { job.w.bytes.as_ptr().add(o * rb) };
        let mut acc = [_mm512_setzero_ps(); 8];
        for s in 0..steps {
            let w = row.wrapping_add(s * F::BYTES);
            // The same place two rows on, a line per 64 bytes: this VM's hardware prefetcher
            // alone leaves the kernel at a third of its speed from memory.
            let ahead = w.wrapping_add(2 * rb);
            let mut at = 0;
            while at < F::BYTES {
                // SAFETY: a prefetch never faults, whatever the address.
                _mm_prefetch::<_MM_HINT_T1>(ahead.wrapping_add(at).cast());
                at += 64;
            }
            // SAFETY: block s of row o: bytes s·BYTES.. + BYTES ≤ rb of a matrix row; inputs
            // 256s..256s + 256 ≤ inputs of the input row.
            unsafe { F::block(w, x.add(s * 256), &mut acc) };
        }
        let pairs: [__m512; 4] = std::array::from_fn(|i| _mm512_add_ps(acc[i], acc[i + 4]));
        let sum = _mm512_reduce_add_ps(_mm512_add_ps(
            _mm512_add_ps(pairs[0], pairs[2]),
            _mm512_add_ps(pairs[1], pairs[3]),
        ));
        let b = job.bias.map_or(0.0, |b| b[o]);
        // SAFETY: column col0 + o, o0 ≤ o < o1, of the output's one row: the caller's columns.
        unsafe { *out.add(job.col0 + o) = b + sum };
    }
}

/// A 256-weight block format for [`rows_avx512`].
trait Wide {
    /// Bytes per block.
    const BYTES: usize;
    /// `acc[0] + … + acc[7] += ` the block at `w` times the 256 inputs at `x`.
    ///
    /// # Safety
    /// `w` readable for `BYTES`, `x` for 256 values; AVX-512 (F, BW, DQ, VL), FMA and F16C.
    unsafe fn block(w: *const u8, x: *const f32, acc: &mut [__m512; 8]);
}

impl Wide for Q4K {
    const BYTES: usize = 144;
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")]
    #[inline]
    unsafe fn block(w: *const u8, x: *const f32, acc: &mut [__m512; 8]) {
        // SAFETY: 144 readable bytes at w and 256 values at x (the caller's contract); the
        // 16-byte load at w + 4 ends at byte 20, inside the block.
        unsafe {
            // The 12 scale bytes unpacked to 8 six-bit scales (bytes 0–7) and 8 mins (8–15),
            // in the vector unit (as `scale_min_k4`, four bytes at a time): dwords u0 u1 u2 →
            // u0 & 3f, (u2 & 0f) | (u0 >> 6 & 03) << 4,
            // u1 & 3f, (u2 >> 4 & 0f) | (u1 >> 6 & 03) << 4.
            let u = _mm_loadu_si128(w.add(4).cast());
            let a = _mm_shuffle_epi32::<0b10_01_10_00>(u);
            let b = _mm_shuffle_epi32::<0b01_01_00_00>(u);
            let low = _mm_and_si128(a, _mm_set1_epi8(0x3f));
            let high = _mm_or_si128(
                _mm_and_si128(
                    _mm_srlv_epi32(a, _mm_set_epi32(4, 0, 0, 0)),
                    _mm_set1_epi8(0x0f),
                ),
                _mm_slli_epi32::<4>(_mm_and_si128(_mm_srli_epi32::<6>(b), _mm_set1_epi8(0x03))),
            );
            let sm = _mm_blend_epi32::<0b1010>(low, high);
            // Lanes 0–7 take d (for the scales), 8–15 dmin (for the mins): d·s and dmin·m,
            // exact products of an f16 and a 6-bit integer.
            let halves = std::ptr::read_unaligned(w.cast::<i32>());
            let dd = _mm_cvtph_ps(_mm_cvtsi32_si128(halves));
            let d = _mm512_permutexvar_ps(
                _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0),
                _mm512_castps128_ps512(dd),
            );
            let f = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(sm)), d);
            let mut fs = [0f32; 16];
            _mm512_storeu_ps(fs.as_mut_ptr(), f);
            // Group g's 16 possible weights, d·s·q − dmin·m for q = 0..15, each rounded once
            // as the 256-bit kernel rounds it; a nibble then picks its weight with one
            // permute (which reads only an index's low 4 bits, so no mask is needed).
            let iota = _mm512_set_ps(
                15.0, 14.0, 13.0, 12.0, 11.0, 10.0, 9.0, 8.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0,
                0.0,
            );
            let table = |g: usize| _mm512_fmsub_ps(iota, broadcast(&fs[g]), broadcast(&fs[8 + g]));
            for j in 0..4 {
                // Bytes 32j.. hold groups 2j (low nibbles) and 2j + 1 (high nibbles).
                let (lo_t, hi_t) = (table(2 * j), table(2 * j + 1));
                let xj = x.add(64 * j);
                for h in 0..2 {
                    let q =
                        _mm512_cvtepu8_epi32(_mm_loadu_si128(w.add(16 + 32 * j + 16 * h).cast()));
                    let wl = _mm512_permutexvar_ps(q, lo_t);
                    let wh = _mm512_permutexvar_ps(_mm512_srli_epi32::<4>(q), hi_t);
                    let a = 4 * (j % 2) + 2 * h;
                    acc[a] = _mm512_fmadd_ps(wl, _mm512_loadu_ps(xj.add(16 * h)), acc[a]);
                    acc[a + 1] =
                        _mm512_fmadd_ps(wh, _mm512_loadu_ps(xj.add(32 + 16 * h)), acc[a + 1]);
                }
            }
        }
    }
}

impl Wide for Q6K {
    const BYTES: usize = 210;
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")]
    #[inline]
    unsafe fn block(w: *const u8, x: *const f32, acc: &mut [__m512; 8]) {
        // SAFETY: 210 readable bytes at w and 256 values at x (the caller's contract).
        unsafe {
            // The 16 scales times d: exact products of an f16 and an i8.
            let d = _mm512_broadcastss_ps(_mm256_castps256_ps128(half_at(w.add(208))));
            let sc = _mm512_cvtepi8_epi32(_mm_loadu_si128(w.add(192).cast()));
            let mut f = [0f32; 16];
            _mm512_storeu_ps(f.as_mut_ptr(), _mm512_mul_ps(_mm512_cvtepi32_ps(sc), d));
            // The 256 values q − 32 as bytes, made 32 at a time as the 256-bit kernel makes
            // them, then widened 16 at a time.
            let mut q = [0i8; 256];
            let m4 = _mm256_set1_epi8(0x0f);
            let m2 = _mm256_set1_epi8(0x03);
            let bias = _mm256_set1_epi8(32);
            for half in 0..2 {
                let qh = _mm256_loadu_si256(w.add(128 + 32 * half).cast());
                for k in 0..4 {
                    let ql = _mm256_loadu_si256(w.add(64 * half + 32 * (k % 2)).cast());
                    let nibble = if k < 2 {
                        _mm256_and_si256(ql, m4)
                    } else {
                        _mm256_and_si256(_mm256_srli_epi16(ql, 4), m4)
                    };
                    let shift = _mm_cvtsi32_si128(2 * k as i32);
                    let high = _mm256_and_si256(_mm256_srl_epi16(qh, shift), m2);
                    let v =
                        _mm256_sub_epi8(_mm256_or_si256(nibble, _mm256_slli_epi16(high, 4)), bias);
                    _mm256_storeu_si256(q.as_mut_ptr().add(128 * half + 32 * k).cast(), v);
                }
            }
            // Weights 16i..16i + 16 share scale i (8·half + 2k + l/16 in the block's order).
            for i in 0..16 {
                let v = _mm512_cvtepi8_epi32(_mm_loadu_si128(q.as_ptr().add(16 * i).cast()));
                let wv = _mm512_mul_ps(_mm512_cvtepi32_ps(v), broadcast(&f[i]));
                acc[i % 8] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x.add(16 * i)), acc[i % 8]);
            }
        }
    }
}

/// A format's block, decoded into vectors and multiplied into a row's accumulators.
trait Fused {
    /// Weights per step (a block; 16 values for the float formats).
    const VALUES: usize;
    /// Bytes per step.
    const BYTES: usize;
    /// `acc[0] += …, acc[1] += …`: the step's weights at `w` times the inputs at `x`,
    /// alternating between the two accumulators vector by vector.
    ///
    /// # Safety
    /// `w` readable for `BYTES`, `x` for `VALUES` values; AVX2, FMA and F16C.
    unsafe fn step(w: *const u8, x: *const f32, acc: &mut [__m256; 2]);
    /// One weight of a tail shorter than a step (float formats only: a quantised row holds
    /// whole blocks, and blocks are steps).
    ///
    /// # Safety
    /// `w` readable for one value.
    unsafe fn one(w: *const u8) -> f32;
}

/// The rows of a band, four at a time.
///
/// # Safety
/// As [`band`], with `F` the matrix's format.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn rows<F: Fused>(job: &Job<'_>, o0: usize, o1: usize, dst: SharedMut) {
    let k = job.w.inputs;
    let rb = job.w.row_bytes();
    let steps = k / F::VALUES;
    let base = job.w.bytes.as_ptr();
    let x = job.x.as_ptr();
    let mut g = o0;
    while g < o1 {
        let on = (o1 - g).min(4);
        // Rows past the band's end (its last group only) repeat its last row; never written.
        let row: [*const u8; 4] = std::array::from_fn(|r| {
            // SAFETY: g + min(r, on − 1) < o1 ≤ outputs: a row of the matrix.
            unsafe { base.add((g + r.min(on - 1)) * rb) }
        });
        let mut acc = [[_mm256_setzero_ps(); 2]; 4];
        for s in 0..steps {
            let (off, xs) = (s * F::BYTES, s * F::VALUES);
            for r in 0..4 {
                // Two rows on at the same place, a line per 64 bytes.
                let ahead = row[r].wrapping_add(4 * rb + off);
                if (off & 63) < F::BYTES || F::BYTES >= 64 {
                    let mut at = 0;
                    while at < F::BYTES {
                        // SAFETY: a prefetch never faults, whatever the address (computed
                        // with wrapping arithmetic).
                        _mm_prefetch::<_MM_HINT_T1>(ahead.wrapping_add(at).cast());
                        at += 64;
                    }
                }
                // SAFETY: step s of row r: bytes off..off + BYTES ≤ rb of a matrix row, inputs
                // xs..xs + VALUES ≤ k of the input row.
                unsafe { F::step(row[r].add(off), x.add(xs), &mut acc[r]) };
            }
        }
        let out = dst.ptr();
        for (r, acc) in acc.iter().enumerate().take(on) {
            let mut sum = sum8(_mm256_add_ps(acc[0], acc[1]));
            for i in steps * F::VALUES..k {
                // SAFETY: value i < k of row r and of the input row.
                sum += unsafe { F::one(row[r].add(i * F::BYTES / F::VALUES)) * *x.add(i) };
            }
            let b = job.bias.map_or(0.0, |b| b[g + r]);
            // SAFETY: column col0 + g + r, o0 ≤ g + r < o1, of the output's one row: the
            // caller's columns.
            unsafe { *out.add(job.col0 + g + r) = b + sum };
        }
        g += on;
    }
}

/// `*p` in all 16 lanes, loaded as such from memory. Written out because the compiler, which
/// sees where the value was stored, otherwise builds it with two lane shuffles from the vector
/// it was stored from, and shuffles run on the one port that the kernels' permutes and byte
/// widenings also need; a broadcast load takes a load port instead (Q4_K one row 2048 → 8192,
/// one thread, in cache: 1.24 → 1.17 ms).
#[target_feature(enable = "avx512f")]
#[inline]
fn broadcast(p: &f32) -> __m512 {
    let v: __m512;
    // SAFETY: reads the 4 bytes of `*p`, a valid reference; writes only the output register.
    unsafe {
        std::arch::asm!(
            "vbroadcastss {v}, dword ptr [{p}]",
            p = in(reg) p,
            v = out(zmm_reg) v,
            options(pure, readonly, nostack, preserves_flags),
        );
    }
    v
}

/// The sum of a vector's eight lanes, pairwise.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn sum8(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    _mm_cvtss_f32(s)
}

/// An f16 at `p`, broadcast: exact (F16C).
///
/// # Safety
/// `p` readable for 2 bytes; F16C.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn half_at(p: *const u8) -> __m256 {
    // SAFETY: 2 readable bytes (the caller's contract).
    let bits = unsafe { std::ptr::read_unaligned(p.cast::<u16>()) };
    _mm256_broadcastss_ps(_mm_cvtph_ps(_mm_cvtsi32_si128(bits as i32)))
}

/// `acc[i % 2] += x[8i..8i + 8] · w` for four vectors of weights.
///
/// # Safety
/// `x` readable for 32 values; AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn fma4(w: [__m256; 4], x: *const f32, acc: &mut [__m256; 2]) {
    // SAFETY: 32 readable values at x (the caller's contract); unaligned loads.
    unsafe {
        acc[0] = _mm256_fmadd_ps(w[0], _mm256_loadu_ps(x), acc[0]);
        acc[1] = _mm256_fmadd_ps(w[1], _mm256_loadu_ps(x.add(8)), acc[1]);
        acc[0] = _mm256_fmadd_ps(w[2], _mm256_loadu_ps(x.add(16)), acc[0]);
        acc[1] = _mm256_fmadd_ps(w[3], _mm256_loadu_ps(x.add(24)), acc[1]);
    }
}

/// Bytes 0..8 of `v` as eight i32 (zero-extended).
#[target_feature(enable = "avx2")]
#[inline]
fn low8_u(v: __m128i) -> __m256 {
    _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v))
}

struct Q4_0;
impl Fused for Q4_0 {
    const VALUES: usize = 32;
    const BYTES: usize = 18;
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn step(w: *const u8, x: *const f32, acc: &mut [__m256; 2]) {
        // SAFETY: 18 readable bytes at w and 32 values at x (the caller's contract).
        unsafe {
            let d = half_at(w);
            let q = _mm_loadu_si128(w.add(2).cast());
            let m = _mm_set1_epi8(0x0f);
            let eight = _mm256_set1_ps(8.0);
            let (lo, hi) = (_mm_and_si128(q, m), _mm_and_si128(_mm_srli_epi16(q, 4), m));
            // (q − 8)·d: q − 8 is exact in f32, and so is its product with d.
            let w = |v: __m128i| _mm256_mul_ps(_mm256_sub_ps(low8_u(v), eight), d);
            let ws = [
                w(lo),
                w(_mm_srli_si128(lo, 8)),
                w(hi),
                w(_mm_srli_si128(hi, 8)),
            ];
            fma4(ws, x, acc);
        }
    }
    unsafe fn one(_: *const u8) -> f32 {
        0.0
    }
}

struct Q8_0;
impl Fused for Q8_0 {
    const VALUES: usize = 32;
    const BYTES: usize = 34;
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn step(w: *const u8, x: *const f32, acc: &mut [__m256; 2]) {
        // SAFETY: 34 readable bytes at w and 32 values at x (the caller's contract).
        unsafe {
            let d = half_at(w);
            let w = |i: usize| {
                let q = _mm_loadl_epi64(w.add(2 + 8 * i).cast());
                _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), d)
            };
            fma4([w(0), w(1), w(2), w(3)], x, acc);
        }
    }
    unsafe fn one(_: *const u8) -> f32 {
        0.0
    }
}

/// An MXFP4 block's 32 weights as four vectors of 8: each code looked up in E2M1's doubled
/// values by a byte shuffle, widened, and multiplied by `2^(e − 128)`: the exact product the
/// codec computes ([`crate::kernels::quant::codecs::e8m0_half`]).
///
/// # Safety
/// `w` readable for 17 bytes; AVX2.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn mxfp4_vectors(w: *const u8) -> [__m256; 4] {
    // SAFETY: 17 readable bytes at w (the caller's contract): the scale, then 16 code bytes.
    unsafe {
        let d = _mm256_set1_ps(codecs::e8m0_half(*w));
        let q = _mm_loadu_si128(w.add(1).cast());
        let m = _mm_set1_epi8(0x0f);
        let table = _mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
        // Byte j: weight j in its low nibble, weight j + 16 in its high one.
        let lo = _mm_shuffle_epi8(table, _mm_and_si128(q, m));
        let hi = _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(q, 4), m));
        let w = |v: __m128i| _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)), d);
        [
            w(lo),
            w(_mm_srli_si128(lo, 8)),
            w(hi),
            w(_mm_srli_si128(hi, 8)),
        ]
    }
}

/// Decodes whole MXFP4 blocks from `src` into `out` (as many as both hold), as
/// [`crate::kernels::quant::codecs`]'s decoder does, bit for bit.
///
/// # Safety
/// The CPU has AVX2.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn decode_mxfp4(src: &[u8], out: &mut [f32]) {
    let (blocks, _) = src.as_chunks::<17>();
    let (outs, _) = out.as_chunks_mut::<32>();
    for (b, y) in blocks.iter().zip(outs) {
        // SAFETY: a block is 17 readable bytes; `y` holds 32 writable f32 (unaligned stores).
        unsafe {
            let v = mxfp4_vectors(b.as_ptr());
            for (i, v) in v.into_iter().enumerate() {
                _mm256_storeu_ps(y.as_mut_ptr().add(8 * i), v);
            }
        }
    }
}

struct Mxfp4;
impl Fused for Mxfp4 {
    const VALUES: usize = 32;
    const BYTES: usize = 17;
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn step(w: *const u8, x: *const f32, acc: &mut [__m256; 2]) {
        // SAFETY: 17 readable bytes at w and 32 values at x (the caller's contract).
        unsafe { fma4(mxfp4_vectors(w), x, acc) }
    }
    unsafe fn one(_: *const u8) -> f32 {
        0.0
    }
}

/// The 6-bit scale and min of group `j` (of 8) in a Q4_K block's 12 scale bytes (as
/// [`crate::kernels::quant::codecs`]).
#[inline(always)]
fn scale_min_k4(j: usize, q: &[u8; 12]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

struct Q4K;
impl Fused for Q4K {
    const VALUES: usize = 256;
    const BYTES: usize = 144;
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn step(w: *const u8, x: *const f32, acc: &mut [__m256; 2]) {
        // SAFETY: 144 readable bytes at w and 256 values at x (the caller's contract).
        unsafe {
            let d = _mm256_cvtss_f32(half_at(w));
            let min = _mm256_cvtss_f32(half_at(w.add(2)));
            let scales = &*w.add(4).cast::<[u8; 12]>();
            let m = _mm256_set1_epi8(0x0f);
            for j in 0..4 {
                let (s1, m1) = scale_min_k4(2 * j, scales);
                let (s2, m2) = scale_min_k4(2 * j + 1, scales);
                // d·s and dmin·m are exact; d·s·q − dmin·m rounds once, as candle's does.
                let (d1, m1) = (
                    _mm256_set1_ps(d * s1 as f32),
                    _mm256_set1_ps(min * m1 as f32),
                );
                let (d2, m2) = (
                    _mm256_set1_ps(d * s2 as f32),
                    _mm256_set1_ps(min * m2 as f32),
                );
                let q = _mm256_loadu_si256(w.add(16 + 32 * j).cast());
                let lo = _mm256_and_si256(q, m);
                let hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m);
                let xs = x.add(64 * j);
                let four = |v: __m256i, d: __m256, m: __m256| {
                    let (a, b) = (_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
                    let w = |v: __m128i| _mm256_fmsub_ps(low8_u(v), d, m);
                    [w(a), w(_mm_srli_si128(a, 8)), w(b), w(_mm_srli_si128(b, 8))]
                };
                fma4(four(lo, d1, m1), xs, acc);
                fma4(four(hi, d2, m2), xs.add(32), acc);
            }
        }
    }
    unsafe fn one(_: *const u8) -> f32 {
        0.0
    }
}

struct Q6K;
impl Fused for Q6K {
    const VALUES: usize = 256;
    const BYTES: usize = 210;
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn step(w: *const u8, x: *const f32, acc: &mut [__m256; 2]) {
        // SAFETY: 210 readable bytes at w and 256 values at x (the caller's contract).
        unsafe {
            let d = _mm256_cvtss_f32(half_at(w.add(208)));
            let m4 = _mm256_set1_epi8(0x0f);
            let m2 = _mm256_set1_epi8(0x03);
            let bias = _mm256_set1_epi8(32);
            for half in 0..2 {
                let qh = _mm256_loadu_si256(w.add(128 + 32 * half).cast());
                let sc = w.add(192 + 8 * half);
                // Quarter k: weights 128·half + 32k + l from the low (k < 2) or high nibble of
                // ql[64·half + 32(k mod 2) + l] and bits 2k, 2k + 1 of qh[l]; scale sc[2k]
                // for l < 16, sc[2k + 1] above.
                for k in 0..4 {
                    let ql = _mm256_loadu_si256(w.add(64 * half + 32 * (k % 2)).cast());
                    let nibble = if k < 2 {
                        _mm256_and_si256(ql, m4)
                    } else {
                        _mm256_and_si256(_mm256_srli_epi16(ql, 4), m4)
                    };
                    let shift = _mm_cvtsi32_si128(2 * k as i32);
                    let high = _mm256_and_si256(_mm256_srl_epi16(qh, shift), m2);
                    let q =
                        _mm256_sub_epi8(_mm256_or_si256(nibble, _mm256_slli_epi16(high, 4)), bias);
                    let s0 = _mm256_set1_ps(d * *sc.add(2 * k) as i8 as f32);
                    let s1 = _mm256_set1_ps(d * *sc.add(2 * k + 1) as i8 as f32);
                    let (a, b) = (_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
                    let w = |v: __m128i, s: __m256| {
                        _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)), s)
                    };
                    let ws = [
                        w(a, s0),
                        w(_mm_srli_si128(a, 8), s0),
                        w(b, s1),
                        w(_mm_srli_si128(b, 8), s1),
                    ];
                    fma4(ws, x.add(128 * half + 32 * k), acc);
                }
            }
        }
    }
    unsafe fn one(_: *const u8) -> f32 {
        0.0
    }
}

struct F16;
impl Fused for F16 {
    const VALUES: usize = 16;
    const BYTES: usize = 32;
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn step(w: *const u8, x: *const f32, acc: &mut [__m256; 2]) {
        // SAFETY: 32 readable bytes at w and 16 values at x (the caller's contract).
        unsafe {
            let w0 = _mm256_cvtph_ps(_mm_loadu_si128(w.cast()));
            let w1 = _mm256_cvtph_ps(_mm_loadu_si128(w.add(16).cast()));
            acc[0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x), acc[0]);
            acc[1] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x.add(8)), acc[1]);
        }
    }
    unsafe fn one(w: *const u8) -> f32 {
        // SAFETY: 2 readable bytes (the caller's contract).
        crate::kernels::quant::codecs::f16_to_f32(unsafe {
            std::ptr::read_unaligned(w.cast::<u16>())
        })
    }
}

struct BF16;
impl Fused for BF16 {
    const VALUES: usize = 16;
    const BYTES: usize = 32;
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn step(w: *const u8, x: *const f32, acc: &mut [__m256; 2]) {
        // SAFETY: 32 readable bytes at w and 16 values at x (the caller's contract).
        unsafe {
            let widen = |p: *const u8| {
                let h = _mm_loadu_si128(p.cast());
                _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16))
            };
            acc[0] = _mm256_fmadd_ps(widen(w), _mm256_loadu_ps(x), acc[0]);
            acc[1] = _mm256_fmadd_ps(widen(w.add(16)), _mm256_loadu_ps(x.add(8)), acc[1]);
        }
    }
    unsafe fn one(w: *const u8) -> f32 {
        // SAFETY: 2 readable bytes (the caller's contract).
        let bits = unsafe { std::ptr::read_unaligned(w.cast::<u16>()) };
        f32::from_bits((bits as u32) << 16)
    }
}
