//! The reference codecs of the ggml block formats, as ggml's `ggml-quants.c` holds them: one
//! marker type per format, each with the layout of its blocks and a portable decoder to f32
//! that gives, value for value and bit for bit, what candle's `GgmlType::to_float` (llama.cpp's
//! `dequantize_row_*`) gives (tested against it). The products that run on them are generic
//! ([`super::small`], [`super::tiled`]); what one instruction set does faster lives in
//! [`super::arch`].
//!
//! Bit for bit, not just close: every weight is `a·q`, `a·q + m` or `a·q − m` with `a` an f16
//! scale times a small integer and `q` a small integer, and those products are exact in f32 (at
//! most 11 + 7 + 6 = 24 significant bits), so the only rounding is the one candle does too, in
//! the same operation. Matrix products on decoded weights therefore differ from
//! dequantise-then-multiply only in the order of their sums.
//!
//! The decoders read bytes (little-endian fields through `from_le_bytes`), never a `repr(C)`
//! view of the block, so a block may sit at any address in the memory map. They are written as
//! plain loops over fixed-size arrays, which the compiler vectorises for each instruction set
//! the kernels are compiled for (`#[inline(always)]`, so they take the caller's features).

use super::QuantType;

/// A block format: `VALUES` weights stored in `BYTES` bytes.
pub(crate) trait Block: Send + Sync + 'static {
    /// Weights per block.
    const VALUES: usize;
    /// Bytes per block.
    const BYTES: usize;
    /// IEEE halves, which x86's F16C converts in one instruction per 8 (see [`decode_with`]).
    const HALF: bool = false;
    /// MXFP4, which x86's AVX2 decodes with one table lookup (`pshufb`) per 16 codes (see
    /// [`decode_with`]).
    const MXFP4: bool = false;
    /// Decodes whole blocks: `src` holds `n × BYTES` bytes, `out` `n × VALUES` values (whatever
    /// is left over in either is untouched). `M` does the `a·q ± m` steps: their product is
    /// exact, so fused or not, the result is the same; fused is one instruction fewer.
    fn decode<M: MulAdd>(src: &[u8], out: &mut [f32]);
}

/// `a·b + c` for the decoders, where `a·b` is exact (so rounding once or twice is the same).
pub(crate) trait MulAdd {
    fn mul_add(a: f32, b: f32, c: f32) -> f32;
}

/// One FMA instruction: for functions compiled with `fma` (elsewhere `mul_add` is a slow
/// library call).
pub(crate) struct Fused;

impl MulAdd for Fused {
    #[inline(always)]
    fn mul_add(a: f32, b: f32, c: f32) -> f32 {
        a.mul_add(b, c)
    }
}

/// A multiply and an add.
pub(crate) struct Split;

impl MulAdd for Split {
    #[inline(always)]
    fn mul_add(a: f32, b: f32, c: f32) -> f32 {
        a * b + c
    }
}

/// Decodes as [`Block::decode`], F16 with F16C's conversion when `f16c` (the caller checked
/// that the CPU has it): exact, as the portable conversion is, and 8 values an instruction.
/// MXFP4 too, with AVX2's byte shuffles, when `f16c` (set only on AVX2 or above:
/// [`super::Cpu::get`]): the same values, each `k · 2^(e − 128)` as one exact product.
#[inline(always)]
pub(crate) fn decode_with<B: Block, M: MulAdd>(f16c: bool, src: &[u8], out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if B::HALF && f16c {
        // SAFETY: the caller checked that the CPU has F16C (and AVX, which every F16C CPU has).
        unsafe { super::arch::x86::f16c::decode(src, out) };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if B::MXFP4 && f16c {
        // SAFETY: `f16c` is set only where the instruction set is AVX2 or above.
        unsafe { super::arch::x86::fused::decode_mxfp4(src, out) };
        return;
    }
    let _ = f16c;
    B::decode::<M>(src, out)
}

/// `(values, bytes)` per block of `dtype`.
pub(crate) fn layout(dtype: QuantType) -> (usize, usize) {
    with_block!(dtype, B => (B::VALUES, B::BYTES))
}

/// Runs `$body` with `$b` the marker type of the ggml type `$dtype`.
macro_rules! with_block {
    ($dtype:expr, $b:ident => $body:expr) => {{
        use $crate::kernels::quant::codecs as blk;
        use $crate::kernels::quant::QuantType as D;
        match D::from($dtype) {
            D::F32 => {
                type $b = blk::F32;
                $body
            }
            D::F16 => {
                type $b = blk::F16;
                $body
            }
            D::BF16 => {
                type $b = blk::BF16;
                $body
            }
            D::Q4_0 => {
                type $b = blk::Q4_0;
                $body
            }
            D::Q4_1 => {
                type $b = blk::Q4_1;
                $body
            }
            D::Q5_0 => {
                type $b = blk::Q5_0;
                $body
            }
            D::Q5_1 => {
                type $b = blk::Q5_1;
                $body
            }
            D::Q8_0 => {
                type $b = blk::Q8_0;
                $body
            }
            D::Q8_1 => {
                type $b = blk::Q8_1;
                $body
            }
            D::Q2K => {
                type $b = blk::Q2K;
                $body
            }
            D::Q3K => {
                type $b = blk::Q3K;
                $body
            }
            D::Q4K => {
                type $b = blk::Q4K;
                $body
            }
            D::Q5K => {
                type $b = blk::Q5K;
                $body
            }
            D::Q6K => {
                type $b = blk::Q6K;
                $body
            }
            D::Q8K => {
                type $b = blk::Q8K;
                $body
            }
            D::Mxfp4 => {
                type $b = blk::Mxfp4;
                $body
            }
        }
    }};
}
pub(crate) use with_block;

/// An IEEE half-precision value's bits → f32, exactly (subnormals, infinities; NaNs stay NaN,
/// made quiet as the hardware conversion does). Branch-free, so loops over it vectorise: the
/// exponent and mantissa move into f32's positions and the exponent is rebiased; a subnormal
/// half is renormalised by one f32 subtraction of two normal numbers (exact, and never a
/// subnormal operand, which would cost a microcode assist of ~100 cycles).
#[inline(always)]
pub(crate) fn f16_to_f32(h: u16) -> f32 {
    const EXPONENT: u32 = 0x7c00 << 13; // a half's exponent bits, in f32's place
    let h = h as u32;
    let sign = (h & 0x8000) << 16;
    let shifted = (h & 0x7fff) << 13;
    let exponent = shifted & EXPONENT;
    let normal = shifted + ((127 - 15) << 23);
    let quiet = if h & 0x03ff != 0 { 0x0040_0000 } else { 0 };
    let special = (normal + ((128 - 16) << 23)) | quiet;
    // 2⁻¹⁴·(1 + m/1024) − 2⁻¹⁴ = m·2⁻²⁴.
    let subnormal = (f32::from_bits(normal + (1 << 23)) - f32::from_bits(113 << 23)).to_bits();
    let bits = if exponent == EXPONENT {
        special
    } else if exponent == 0 {
        subnormal
    } else {
        normal
    };
    f32::from_bits(bits | sign)
}

/// A step the compiler cannot see through, at the top of every loop but a run of values: it
/// keeps the compiler from vectorising across blocks or groups (gathering byte j of eight
/// blocks 18 bytes apart with single-byte inserts and scattering single values, 2–5× slower
/// when it did), so it vectorises each run of 16 or 32 contiguous values instead. Costs
/// nothing itself (an empty statement).
#[inline(always)]
fn opaque() {
    std::hint::black_box(());
}

#[inline(always)]
fn f16_at(b: &[u8], at: usize) -> f32 {
    f16_to_f32(u16::from_le_bytes([b[at], b[at + 1]]))
}

/// Implements [`Block`] for `$name` with a decoder of one block, `fn(&[u8; BYTES], &mut [f32;
/// VALUES])`.
macro_rules! block {
    ($(#[$doc:meta])* $name:ident, $values:literal, $bytes:literal, $decode:ident) => {
        $(#[$doc])*
        pub(crate) struct $name;
        impl Block for $name {
            const VALUES: usize = $values;
            const BYTES: usize = $bytes;
            #[inline(always)]
            fn decode<M: MulAdd>(src: &[u8], out: &mut [f32]) {
                let (blocks, _) = src.as_chunks::<$bytes>();
                let (outs, _) = out.as_chunks_mut::<$values>();
                for (b, y) in blocks.iter().zip(outs) {
                    opaque();
                    $decode::<M>(b, y);
                }
            }
        }
    };
}

block!(
    /// 32 weights `d·(q − 8)`, `q` 4 bits; `d` f16.
    Q4_0, 32, 18, q4_0
);
block!(
    /// 32 weights `d·q + m`, `q` 4 bits; `d`, `m` f16.
    Q4_1, 32, 20, q4_1
);
block!(
    /// 32 weights `d·(q − 16)`, `q` 5 bits (the fifth in a 32-bit mask).
    Q5_0, 32, 22, q5_0
);
block!(
    /// 32 weights `d·q + m`, `q` 5 bits.
    Q5_1, 32, 24, q5_1
);
block!(
    /// 32 weights `d·q`, `q` a signed byte.
    Q8_0, 32, 34, q8_0
);
block!(
    /// 32 weights `d·q`, `q` a signed byte (and their sum, unused here).
    Q8_1, 32, 36, q8_1
);
block!(
    /// 256 weights in 16 groups of 16, `d·sᵢ·q − dmin·mᵢ`, `q` 2 bits, `sᵢ`, `mᵢ` 4 bits.
    Q2K, 256, 84, q2k
);
block!(
    /// 256 weights in 16 groups of 16, `d·(sᵢ − 32)·(q − 4)`, `q` 3 bits, `sᵢ` 6 bits.
    Q3K, 256, 110, q3k
);
block!(
    /// 256 weights in 8 groups of 32, `d·sᵢ·q − dmin·mᵢ`, `q` 4 bits, `sᵢ`, `mᵢ` 6 bits.
    Q4K, 256, 144, q4k
);
block!(
    /// 256 weights in 8 groups of 32, `d·sᵢ·q − dmin·mᵢ`, `q` 5 bits.
    Q5K, 256, 176, q5k
);
block!(
    /// 256 weights in 16 groups of 16, `d·sᵢ·(q − 32)`, `q` 6 bits, `sᵢ` a signed byte.
    Q6K, 256, 210, q6k
);
block!(
    /// 256 weights `d·q`, `q` a signed byte, `d` f32 (and group sums, unused here).
    Q8K, 256, 292, q8k
);
/// 32 weights `2^(e − 128)·k[q]`, `q` 4 bits (an E2M1 code), `k` E2M1's values doubled,
/// `e` one E8M0 byte.
pub(crate) struct Mxfp4;
impl Block for Mxfp4 {
    const VALUES: usize = 32;
    const BYTES: usize = 17;
    const MXFP4: bool = true;
    #[inline(always)]
    fn decode<M: MulAdd>(src: &[u8], out: &mut [f32]) {
        let (blocks, _) = src.as_chunks::<17>();
        let (outs, _) = out.as_chunks_mut::<32>();
        for (b, y) in blocks.iter().zip(outs) {
            opaque();
            mxfp4::<M>(b, y);
        }
    }
}
/// Implements [`Block`] for a float format of `$bytes` bytes a value: one loop over the values,
/// which the compiler vectorises.
macro_rules! float {
    ($(#[$doc:meta])* $name:ident, $bytes:literal, $half:literal, $decode:path) => {
        $(#[$doc])*
        pub(crate) struct $name;
        impl Block for $name {
            const VALUES: usize = 1;
            const BYTES: usize = $bytes;
            const HALF: bool = $half;
            #[inline(always)]
            fn decode<M: MulAdd>(src: &[u8], out: &mut [f32]) {
                let (values, _) = src.as_chunks::<$bytes>();
                for (v, y) in values.iter().zip(out) {
                    *y = $decode(*v);
                }
            }
        }
    };
}

float!(
    /// One f32.
    F32, 4, false, f32::from_le_bytes
);
float!(
    /// One IEEE half.
    F16, 2, true, f16_value
);
float!(
    /// One bfloat16.
    BF16, 2, false, bf16_value
);

#[inline(always)]
fn f16_value(b: [u8; 2]) -> f32 {
    f16_to_f32(u16::from_le_bytes(b))
}

#[inline(always)]
fn bf16_value(b: [u8; 2]) -> f32 {
    f32::from_bits((u16::from_le_bytes(b) as u32) << 16)
}

// Block layouts: llama.cpp's `ggml-common.h` (candle's `k_quants.rs` has the same structs).

/// `{ d: f16, qs: [u8; 16] }`: byte j holds weights j (low nibble) and j + 16 (high).
#[inline(always)]
fn q4_0<M: MulAdd>(b: &[u8; 18], y: &mut [f32; 32]) {
    let d = f16_at(b, 0);
    let qs = &b[2..18];
    // Contiguous runs of stores (one loop per half), which vectorise; interleaved ones do not.
    for j in 0..16 {
        y[j] = ((qs[j] & 0x0f) as i32 - 8) as f32 * d;
    }
    for j in 0..16 {
        y[j + 16] = ((qs[j] >> 4) as i32 - 8) as f32 * d;
    }
}

/// `{ d: f16, m: f16, qs: [u8; 16] }`.
#[inline(always)]
fn q4_1<M: MulAdd>(b: &[u8; 20], y: &mut [f32; 32]) {
    let (d, m) = (f16_at(b, 0), f16_at(b, 2));
    let qs = &b[4..20];
    for j in 0..16 {
        y[j] = M::mul_add((qs[j] & 0x0f) as f32, d, m);
    }
    for j in 0..16 {
        y[j + 16] = M::mul_add((qs[j] >> 4) as f32, d, m);
    }
}

/// `{ d: f16, qh: [u8; 4], qs: [u8; 16] }`: bit j of `qh` is weight j's fifth bit.
#[inline(always)]
fn q5_0<M: MulAdd>(b: &[u8; 22], y: &mut [f32; 32]) {
    let d = f16_at(b, 0);
    let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
    let qs = &b[6..22];
    for j in 0..16 {
        let h0 = ((qh >> j) << 4) & 0x10;
        y[j] = (((qs[j] & 0x0f) as u32 | h0) as i32 - 16) as f32 * d;
    }
    for j in 0..16 {
        let h1 = (qh >> (j + 12)) & 0x10;
        y[j + 16] = (((qs[j] >> 4) as u32 | h1) as i32 - 16) as f32 * d;
    }
}

/// `{ d: f16, m: f16, qh: [u8; 4], qs: [u8; 16] }`.
#[inline(always)]
fn q5_1<M: MulAdd>(b: &[u8; 24], y: &mut [f32; 32]) {
    let (d, m) = (f16_at(b, 0), f16_at(b, 2));
    let qh = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    let qs = &b[8..24];
    for j in 0..16 {
        let h0 = ((qh >> j) << 4) & 0x10;
        y[j] = M::mul_add(((qs[j] & 0x0f) as u32 | h0) as f32, d, m);
    }
    for j in 0..16 {
        let h1 = (qh >> (j + 12)) & 0x10;
        y[j + 16] = M::mul_add(((qs[j] >> 4) as u32 | h1) as f32, d, m);
    }
}

/// `{ d: f16, qs: [i8; 32] }`.
#[inline(always)]
fn q8_0<M: MulAdd>(b: &[u8; 34], y: &mut [f32; 32]) {
    let d = f16_at(b, 0);
    for j in 0..32 {
        y[j] = b[2 + j] as i8 as f32 * d;
    }
}

/// `{ d: f16, s: f16, qs: [i8; 32] }`.
#[inline(always)]
fn q8_1<M: MulAdd>(b: &[u8; 36], y: &mut [f32; 32]) {
    let d = f16_at(b, 0);
    for j in 0..32 {
        y[j] = b[4 + j] as i8 as f32 * d;
    }
}

/// `{ scales: [u8; 16], qs: [u8; 64], d: f16, dmin: f16 }`: each half of 128 weights takes 32
/// bytes of `qs`, four 2-bit planes of them; each group of 16 its own scale (low nibble) and min
/// (high nibble).
#[inline(always)]
fn q2k<M: MulAdd>(b: &[u8; 84], y: &mut [f32; 256]) {
    let (d, min) = (f16_at(b, 80), f16_at(b, 82));
    for half in 0..2 {
        let qs = &b[16 + 32 * half..][..32];
        for plane in 0..4 {
            for group in 0..2 {
                opaque();
                let sc = b[half * 8 + plane * 2 + group];
                let dl = d * (sc & 0x0f) as f32;
                let ml = min * (sc >> 4) as f32;
                let q = &qs[16 * group..][..16];
                let y = &mut y[128 * half + 32 * plane + 16 * group..][..16];
                for i in 0..16 {
                    y[i] = M::mul_add(dl, ((q[i] >> (2 * plane)) & 3) as f32, -ml);
                }
            }
        }
    }
}

/// `{ hmask: [u8; 32], qs: [u8; 64], scales: [u8; 12], d: f16 }`: 2-bit planes as in Q2_K, a
/// third bit in `hmask` (set: no −4), sixteen 6-bit scales packed into 12 bytes.
#[inline(always)]
fn q3k<M: MulAdd>(b: &[u8; 110], y: &mut [f32; 256]) {
    const KMASK1: u32 = 0x0303_0303;
    const KMASK2: u32 = 0x0f0f_0f0f;
    let d = f16_at(b, 108);
    let word = |i: usize| u32::from_le_bytes([b[96 + i], b[97 + i], b[98 + i], b[99 + i]]);
    let (a0, a1, tmp) = (word(0), word(4), word(8));
    let aux = [
        (a0 & KMASK2) | ((tmp & KMASK1) << 4),
        (a1 & KMASK2) | (((tmp >> 2) & KMASK1) << 4),
        ((a0 >> 4) & KMASK2) | (((tmp >> 4) & KMASK1) << 4),
        ((a1 >> 4) & KMASK2) | (((tmp >> 6) & KMASK1) << 4),
    ];
    let mut dl = [0f32; 16];
    for (i, dl) in dl.iter_mut().enumerate() {
        opaque();
        let s = (aux[i / 4] >> (8 * (i % 4))) as u8 as i8;
        *dl = d * (s as f32 - 32.0);
    }
    let hmask = &b[0..32];
    for half in 0..2 {
        let qs = &b[32 + 32 * half..][..32];
        for plane in 0..4 {
            let bit = 1u8 << (4 * half + plane);
            for group in 0..2 {
                opaque();
                let scale = dl[half * 8 + plane * 2 + group];
                let q = &qs[16 * group..][..16];
                let h = &hmask[16 * group..][..16];
                let y = &mut y[128 * half + 32 * plane + 16 * group..][..16];
                for i in 0..16 {
                    let low = ((q[i] >> (2 * plane)) & 3) as i32;
                    let minus = if h[i] & bit == 0 { 4 } else { 0 };
                    y[i] = scale * (low - minus) as f32;
                }
            }
        }
    }
}

/// The 6-bit scale and min of group `j` (of 8) in a Q4_K/Q5_K block's 12 scale bytes.
#[inline(always)]
fn scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// `{ d: f16, dmin: f16, scales: [u8; 12], qs: [u8; 128] }`: each 64 weights take 32 bytes,
/// the first 32 in low nibbles, the next 32 in high nibbles.
#[inline(always)]
fn q4k<M: MulAdd>(b: &[u8; 144], y: &mut [f32; 256]) {
    let (d, min) = (f16_at(b, 0), f16_at(b, 2));
    let scales = &b[4..16];
    for j in 0..4 {
        opaque();
        let q = &b[16 + 32 * j..][..32];
        let (s1, m1) = scale_min_k4(2 * j, scales);
        let (s2, m2) = scale_min_k4(2 * j + 1, scales);
        let (d1, m1) = (d * s1 as f32, min * m1 as f32);
        let (d2, m2) = (d * s2 as f32, min * m2 as f32);
        let y = &mut y[64 * j..][..64];
        for i in 0..32 {
            y[i] = M::mul_add(d1, (q[i] & 0x0f) as f32, -m1);
        }
        for i in 0..32 {
            y[i + 32] = M::mul_add(d2, (q[i] >> 4) as f32, -m2);
        }
    }
}

/// `{ d: f16, dmin: f16, scales: [u8; 12], qh: [u8; 32], qs: [u8; 128] }`: as Q4_K, with a
/// fifth bit per weight in `qh` (bit 2j for the low nibbles of group pair j, 2j + 1 for the
/// high).
#[inline(always)]
fn q5k<M: MulAdd>(b: &[u8; 176], y: &mut [f32; 256]) {
    let (d, min) = (f16_at(b, 0), f16_at(b, 2));
    let scales = &b[4..16];
    let qh = &b[16..48];
    for j in 0..4 {
        opaque();
        let q = &b[48 + 32 * j..][..32];
        let (s1, m1) = scale_min_k4(2 * j, scales);
        let (s2, m2) = scale_min_k4(2 * j + 1, scales);
        let (d1, m1) = (d * s1 as f32, min * m1 as f32);
        let (d2, m2) = (d * s2 as f32, min * m2 as f32);
        let (u1, u2) = (1u8 << (2 * j), 2u8 << (2 * j));
        let y = &mut y[64 * j..][..64];
        for i in 0..32 {
            let h1 = if qh[i] & u1 != 0 { 16 } else { 0 };
            y[i] = M::mul_add(d1, ((q[i] & 0x0f) as u32 + h1) as f32, -m1);
        }
        for i in 0..32 {
            let h2 = if qh[i] & u2 != 0 { 16 } else { 0 };
            y[i + 32] = M::mul_add(d2, ((q[i] >> 4) as u32 + h2) as f32, -m2);
        }
    }
}

/// `{ ql: [u8; 128], qh: [u8; 64], scales: [i8; 16], d: f16 }`: each half of 128 weights takes
/// 64 bytes of `ql` (low 4 bits) and 32 of `qh` (high 2 bits, four weights a byte).
#[inline(always)]
fn q6k<M: MulAdd>(b: &[u8; 210], y: &mut [f32; 256]) {
    let d = f16_at(b, 208);
    for half in 0..2 {
        let ql = &b[64 * half..][..64];
        let qh = &b[128 + 32 * half..][..32];
        let sc = &b[192 + 8 * half..][..8];
        let y = &mut y[128 * half..][..128];
        // Quarter k of the half: weights 32k + l, l < 32, from ql[l] (k even) or ql[l + 32]
        // (k odd), low nibble for k < 2, high for k ≥ 2, and bits 2k, 2k + 1 of qh[l]; the
        // scale of weights 16g..16g + 16 of a quarter is sc[g + 2k].
        for k in 0..4 {
            let low = &ql[32 * (k % 2)..][..32];
            let y = &mut y[32 * k..][..32];
            for group in 0..2 {
                opaque();
                let s = d * sc[group + 2 * k] as i8 as f32;
                for l in 16 * group..16 * group + 16 {
                    let nibble = if k < 2 { low[l] & 0x0f } else { low[l] >> 4 };
                    let q = (nibble | (((qh[l] >> (2 * k)) & 3) << 4)) as i32 - 32;
                    y[l] = s * q as f32;
                }
            }
        }
    }
}

/// `{ d: f32, qs: [i8; 256], bsums: [i16; 16] }`.
#[inline(always)]
fn q8k<M: MulAdd>(b: &[u8; 292], y: &mut [f32; 256]) {
    let d = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    for j in 0..256 {
        y[j] = d * b[4 + j] as i8 as f32;
    }
}

/// E2M1's values doubled, by code (sign bit 3): ggml's `kvalues_mxfp4`.
pub(crate) const MXFP4_VALUES: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/// An E8M0 scale byte `e` → `2^(e − 128)` as f32: half the scale, to go with the doubled
/// values (ggml's `ggml_e8m0_to_fp32_half`; a subnormal for `e` < 2). Exact, and so is its
/// product with any value of [`MXFP4_VALUES`] (at most 4 significant bits), except that
/// `e` = 255 with |k| ≥ 2 overflows to ±inf as it does in ggml.
#[inline(always)]
pub(crate) fn e8m0_half(e: u8) -> f32 {
    let bits = if e < 2 {
        0x0020_0000u32 << e
    } else {
        ((e as u32) - 1) << 23
    };
    f32::from_bits(bits)
}

/// `{ e: u8, qs: [u8; 16] }`: byte j holds weights j (low nibble) and j + 16 (high), as Q4_0.
#[inline(always)]
fn mxfp4<M: MulAdd>(b: &[u8; 17], y: &mut [f32; 32]) {
    let d = e8m0_half(b[0]);
    let qs = &b[1..17];
    for j in 0..16 {
        y[j] = MXFP4_VALUES[(qs[j] & 0x0f) as usize] as f32 * d;
    }
    for j in 0..16 {
        y[j + 16] = MXFP4_VALUES[(qs[j] >> 4) as usize] as f32 * d;
    }
}
