//! The ggml block formats, decoded to f32: one marker type per format, each with the layout of
//! its blocks and a decoder that gives, value for value and bit for bit, what candle's
//! `GgmlType::to_float` (llama.cpp's `dequantize_row_*`) gives (tested against it).
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

use candle_core::quantized::GgmlDType;

/// A block format: `VALUES` weights stored in `BYTES` bytes.
pub(crate) trait Block: Send + Sync + 'static {
    /// Weights per block.
    const VALUES: usize;
    /// Bytes per block.
    const BYTES: usize;
    /// Decodes whole blocks: `src` holds `n × BYTES` bytes, `out` `n × VALUES` values (whatever
    /// is left over in either is untouched).
    fn decode(src: &[u8], out: &mut [f32]);
}

/// `(values, bytes)` per block of `dtype`.
pub(crate) fn layout(dtype: GgmlDType) -> (usize, usize) {
    with_block!(dtype, B => (B::VALUES, B::BYTES))
}

/// Runs `$body` with `$b` the marker type of the ggml type `$dtype`.
macro_rules! with_block {
    ($dtype:expr, $b:ident => $body:expr) => {{
        use candle_core::quantized::GgmlDType as D;
        use $crate::model::kernels::quant::blocks as blk;
        match $dtype {
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
        }
    }};
}
pub(crate) use with_block;

/// An IEEE half-precision value's bits → f32, exactly (subnormals, infinities; NaNs stay NaN,
/// made quiet as the hardware conversion does). Branch-free, so loops over it vectorise: the
/// exponent and mantissa move into f32's positions and a multiplication by 2¹¹² rebiases the
/// exponent (and normalises a subnormal, exactly: a power of two).
#[inline(always)]
pub(crate) fn f16_to_f32(h: u16) -> f32 {
    let h = h as u32;
    let sign = (h & 0x8000) << 16;
    let magnitude = h & 0x7fff;
    let scaled = f32::from_bits(magnitude << 13) * f32::from_bits(0x7780_0000); // × 2¹¹²
    let bits = if magnitude >= 0x7c00 {
        // Infinity or NaN: all exponent bits, the mantissa kept (a NaN's made quiet).
        let quiet = if magnitude > 0x7c00 { 0x0040_0000 } else { 0 };
        0x7f80_0000 | ((magnitude & 0x03ff) << 13) | quiet
    } else {
        scaled.to_bits()
    };
    f32::from_bits(bits | sign)
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
            fn decode(src: &[u8], out: &mut [f32]) {
                let (blocks, _) = src.as_chunks::<$bytes>();
                let (outs, _) = out.as_chunks_mut::<$values>();
                for (b, y) in blocks.iter().zip(outs) {
                    $decode(b, y);
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
block!(
    /// One f32.
    F32, 1, 4, f32_value
);
block!(
    /// One IEEE half.
    F16, 1, 2, f16_value
);
block!(
    /// One bfloat16.
    BF16, 1, 2, bf16_value
);

#[inline(always)]
fn f32_value(b: &[u8; 4], y: &mut [f32; 1]) {
    y[0] = f32::from_le_bytes(*b);
}

#[inline(always)]
fn f16_value(b: &[u8; 2], y: &mut [f32; 1]) {
    y[0] = f16_to_f32(u16::from_le_bytes(*b));
}

#[inline(always)]
fn bf16_value(b: &[u8; 2], y: &mut [f32; 1]) {
    y[0] = f32::from_bits((u16::from_le_bytes(*b) as u32) << 16);
}

// Block layouts: llama.cpp's `ggml-common.h` (candle's `k_quants.rs` has the same structs).

/// `{ d: f16, qs: [u8; 16] }`: byte j holds weights j (low nibble) and j + 16 (high).
#[inline(always)]
fn q4_0(b: &[u8; 18], y: &mut [f32; 32]) {
    let d = f16_at(b, 0);
    let qs = &b[2..18];
    for j in 0..16 {
        y[j] = ((qs[j] & 0x0f) as i32 - 8) as f32 * d;
        y[j + 16] = ((qs[j] >> 4) as i32 - 8) as f32 * d;
    }
}

/// `{ d: f16, m: f16, qs: [u8; 16] }`.
#[inline(always)]
fn q4_1(b: &[u8; 20], y: &mut [f32; 32]) {
    let (d, m) = (f16_at(b, 0), f16_at(b, 2));
    let qs = &b[4..20];
    for j in 0..16 {
        y[j] = (qs[j] & 0x0f) as f32 * d + m;
        y[j + 16] = (qs[j] >> 4) as f32 * d + m;
    }
}

/// `{ d: f16, qh: [u8; 4], qs: [u8; 16] }`: bit j of `qh` is weight j's fifth bit.
#[inline(always)]
fn q5_0(b: &[u8; 22], y: &mut [f32; 32]) {
    let d = f16_at(b, 0);
    let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
    let qs = &b[6..22];
    for j in 0..16 {
        let h0 = ((qh >> j) << 4) & 0x10;
        let h1 = (qh >> (j + 12)) & 0x10;
        y[j] = (((qs[j] & 0x0f) as u32 | h0) as i32 - 16) as f32 * d;
        y[j + 16] = (((qs[j] >> 4) as u32 | h1) as i32 - 16) as f32 * d;
    }
}

/// `{ d: f16, m: f16, qh: [u8; 4], qs: [u8; 16] }`.
#[inline(always)]
fn q5_1(b: &[u8; 24], y: &mut [f32; 32]) {
    let (d, m) = (f16_at(b, 0), f16_at(b, 2));
    let qh = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    let qs = &b[8..24];
    for j in 0..16 {
        let h0 = ((qh >> j) << 4) & 0x10;
        let h1 = (qh >> (j + 12)) & 0x10;
        y[j] = ((qs[j] & 0x0f) as u32 | h0) as f32 * d + m;
        y[j + 16] = ((qs[j] >> 4) as u32 | h1) as f32 * d + m;
    }
}

/// `{ d: f16, qs: [i8; 32] }`.
#[inline(always)]
fn q8_0(b: &[u8; 34], y: &mut [f32; 32]) {
    let d = f16_at(b, 0);
    for j in 0..32 {
        y[j] = b[2 + j] as i8 as f32 * d;
    }
}

/// `{ d: f16, s: f16, qs: [i8; 32] }`.
#[inline(always)]
fn q8_1(b: &[u8; 36], y: &mut [f32; 32]) {
    let d = f16_at(b, 0);
    for j in 0..32 {
        y[j] = b[4 + j] as i8 as f32 * d;
    }
}

/// `{ scales: [u8; 16], qs: [u8; 64], d: f16, dmin: f16 }`: each half of 128 weights takes 32
/// bytes of `qs`, four 2-bit planes of them; each group of 16 its own scale (low nibble) and min
/// (high nibble).
#[inline(always)]
fn q2k(b: &[u8; 84], y: &mut [f32; 256]) {
    let (d, min) = (f16_at(b, 80), f16_at(b, 82));
    for half in 0..2 {
        let qs = &b[16 + 32 * half..][..32];
        for plane in 0..4 {
            for group in 0..2 {
                let sc = b[half * 8 + plane * 2 + group];
                let dl = d * (sc & 0x0f) as f32;
                let ml = min * (sc >> 4) as f32;
                let q = &qs[16 * group..][..16];
                let y = &mut y[128 * half + 32 * plane + 16 * group..][..16];
                for i in 0..16 {
                    y[i] = dl * ((q[i] >> (2 * plane)) & 3) as f32 - ml;
                }
            }
        }
    }
}

/// `{ hmask: [u8; 32], qs: [u8; 64], scales: [u8; 12], d: f16 }`: 2-bit planes as in Q2_K, a
/// third bit in `hmask` (set: no −4), sixteen 6-bit scales packed into 12 bytes.
#[inline(always)]
fn q3k(b: &[u8; 110], y: &mut [f32; 256]) {
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
        let s = (aux[i / 4] >> (8 * (i % 4))) as u8 as i8;
        *dl = d * (s as f32 - 32.0);
    }
    let hmask = &b[0..32];
    for half in 0..2 {
        let qs = &b[32 + 32 * half..][..32];
        for plane in 0..4 {
            let bit = 1u8 << (4 * half + plane);
            for group in 0..2 {
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
fn q4k(b: &[u8; 144], y: &mut [f32; 256]) {
    let (d, min) = (f16_at(b, 0), f16_at(b, 2));
    let scales = &b[4..16];
    for j in 0..4 {
        let q = &b[16 + 32 * j..][..32];
        let (s1, m1) = scale_min_k4(2 * j, scales);
        let (s2, m2) = scale_min_k4(2 * j + 1, scales);
        let (d1, m1) = (d * s1 as f32, min * m1 as f32);
        let (d2, m2) = (d * s2 as f32, min * m2 as f32);
        let y = &mut y[64 * j..][..64];
        for i in 0..32 {
            y[i] = d1 * (q[i] & 0x0f) as f32 - m1;
            y[i + 32] = d2 * (q[i] >> 4) as f32 - m2;
        }
    }
}

/// `{ d: f16, dmin: f16, scales: [u8; 12], qh: [u8; 32], qs: [u8; 128] }`: as Q4_K, with a
/// fifth bit per weight in `qh` (bit 2j for the low nibbles of group pair j, 2j + 1 for the
/// high).
#[inline(always)]
fn q5k(b: &[u8; 176], y: &mut [f32; 256]) {
    let (d, min) = (f16_at(b, 0), f16_at(b, 2));
    let scales = &b[4..16];
    let qh = &b[16..48];
    for j in 0..4 {
        let q = &b[48 + 32 * j..][..32];
        let (s1, m1) = scale_min_k4(2 * j, scales);
        let (s2, m2) = scale_min_k4(2 * j + 1, scales);
        let (d1, m1) = (d * s1 as f32, min * m1 as f32);
        let (d2, m2) = (d * s2 as f32, min * m2 as f32);
        let (u1, u2) = (1u8 << (2 * j), 2u8 << (2 * j));
        let y = &mut y[64 * j..][..64];
        for i in 0..32 {
            let h1 = if qh[i] & u1 != 0 { 16 } else { 0 };
            let h2 = if qh[i] & u2 != 0 { 16 } else { 0 };
            y[i] = d1 * ((q[i] & 0x0f) as u32 + h1) as f32 - m1;
            y[i + 32] = d2 * ((q[i] >> 4) as u32 + h2) as f32 - m2;
        }
    }
}

/// `{ ql: [u8; 128], qh: [u8; 64], scales: [i8; 16], d: f16 }`: each half of 128 weights takes
/// 64 bytes of `ql` (low 4 bits) and 32 of `qh` (high 2 bits, four weights a byte).
#[inline(always)]
fn q6k(b: &[u8; 210], y: &mut [f32; 256]) {
    let d = f16_at(b, 208);
    for half in 0..2 {
        let ql = &b[64 * half..][..64];
        let qh = &b[128 + 32 * half..][..32];
        let sc = &b[192 + 8 * half..][..8];
        let y = &mut y[128 * half..][..128];
        for group in 0..2 {
            let s = |k: usize| d * sc[group + 2 * k] as i8 as f32;
            let (s1, s2, s3, s4) = (s(0), s(1), s(2), s(3));
            for l in 16 * group..16 * group + 16 {
                let q1 = ((ql[l] & 0x0f) | ((qh[l] & 3) << 4)) as i32 - 32;
                let q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) as i32 - 32;
                let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i32 - 32;
                let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i32 - 32;
                y[l] = s1 * q1 as f32;
                y[l + 32] = s2 * q2 as f32;
                y[l + 64] = s3 * q3 as f32;
                y[l + 96] = s4 * q4 as f32;
            }
        }
    }
}

/// `{ d: f32, qs: [i8; 256], bsums: [i16; 16] }`.
#[inline(always)]
fn q8k(b: &[u8; 292], y: &mut [f32; 256]) {
    let d = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    for j in 0..256 {
        y[j] = d * b[4 + j] as i8 as f32;
    }
}
