//! The report's binary payload: the attention weights (plus, optionally, query/key vectors and
//! extra matrices from the analysis), each a *section*, written one after another into a single
//! byte stream that is gzip-compressed and base64-encoded on the fly.
//!
//! Encoding of one section (the page's `decodeSection` in `assets/report/data.js` undoes it):
//! - `u16`: each value `v` becomes `round((v − lo) / (hi − lo) · 65535)`, clamped to 0..=65535
//!   (NaN becomes 0). With `lo = 0, hi = 1` the step is 1/65535, so a probability comes back within
//!   half a step, 7.63e-6, of the f32 the model produced.
//! - `u8`: the same with 255 levels (error ≤ 1/510 ≈ 1.96e-3), for very large inputs.
//! - `f32`: the exact little-endian bits (query/key vectors must reproduce the softmax exactly).
//!
//! Multi-byte values are stored *byte-planed*: first byte 0 of every value, then byte 1 of every
//! value, and so on. Attention is mostly tiny weights, so the high-byte plane is nearly all zeros
//! and compresses to almost nothing; this makes the compressed blob about 20 % smaller than storing
//! values interleaved (measured on real MiniLM attention at 512 tokens).
//!
//! Nothing is buffered whole when writing a report: each plane is produced by a pass over the
//! source slices and streamed through the compressor, so a 512-token report never holds a second
//! copy of the weights. [`Payload::base64_uncompressed`] (the in-place data `attnviz serve` sends)
//! builds the same text in blocks on several threads instead.

use std::io::{self, Write};

use base64::engine::general_purpose::STANDARD;
use base64::write::EncoderWriter;
use base64::Engine;
use flate2::write::GzEncoder;
use flate2::Compression;
use rayon::prelude::*;

use attnviz_core::multiversion;
use serde::Serialize;

/// How a section's values are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    /// 16-bit fixed point over `[lo, hi]`.
    U16,
    /// 8-bit fixed point over `[lo, hi]`.
    U8,
    /// Exact f32 bits.
    F32,
}

impl Dtype {
    fn bytes(self) -> usize {
        match self {
            Dtype::U8 => 1,
            Dtype::U16 => 2,
            Dtype::F32 => 4,
        }
    }

    fn levels(self) -> f32 {
        match self {
            Dtype::U8 => 255.0,
            Dtype::U16 => 65535.0,
            Dtype::F32 => 1.0,
        }
    }
}

/// One section of the payload: its values are the concatenation of `parts`.
pub struct Section<'a> {
    /// Name the page looks the section up by (`attention`, `query`, `key`, `matrix:<id>`).
    pub name: String,
    /// Storage type.
    pub dtype: Dtype,
    /// Value mapped to quantised 0 (ignored for f32).
    pub lo: f32,
    /// Value mapped to the top quantised level (ignored for f32).
    pub hi: f32,
    /// The values, in order.
    pub parts: Vec<&'a [f32]>,
}

impl Section<'_> {
    fn len(&self) -> usize {
        self.parts.iter().map(|p| p.len()).sum()
    }

    /// Byte `plane` of every value, in order, pushed through `sink` in chunks.
    fn write_plane(&self, plane: usize, sink: &mut impl Write) -> io::Result<()> {
        let len = self.len();
        let mut buf = vec![0u8; len.min(CHUNK)];
        for first in (0..len).step_by(CHUNK) {
            let n = CHUNK.min(len - first);
            self.plane_range(plane, first, &mut buf[..n]);
            sink.write_all(&buf[..n])?;
        }
        Ok(())
    }

    /// Byte `plane` of the values `first..first + out.len()`, into `out`.
    fn plane_range(&self, plane: usize, first: usize, out: &mut [u8]) {
        let level = Level::of(self);
        let shift = 8 * plane as u32;
        self.for_values(first, out, |values, out| level.plane(values, shift, out));
    }

    /// The levels of the values `first..first + out.len()` of a fixed-point section, into
    /// `out`.
    fn levels_range(&self, first: usize, out: &mut [u16]) {
        let level = Level::of(self);
        debug_assert!(level.dtype != Dtype::F32);
        self.for_values(first, out, |values, out| level_values(values, level, out));
    }

    /// `f` on the values `first..first + out.len()`, as the slices of the parts they lie in,
    /// each with the piece of `out` it fills.
    fn for_values<T>(&self, first: usize, out: &mut [T], mut f: impl FnMut(&[f32], &mut [T])) {
        let (mut skip, mut out) = (first, out);
        for part in &self.parts {
            if out.is_empty() {
                break;
            }
            if skip >= part.len() {
                skip -= part.len();
                continue;
            }
            let take = (part.len() - skip).min(out.len());
            let (here, rest) = out.split_at_mut(take);
            f(&part[skip..skip + take], here);
            out = rest;
            skip = 0;
        }
        debug_assert!(out.is_empty(), "the range lies inside the section");
    }
}

/// Values per chunk a plane is produced in when streamed.
const CHUNK: usize = 1 << 16;

/// How one section's values become stored bits.
#[derive(Clone, Copy)]
struct Level {
    dtype: Dtype,
    /// The top level, as f64.
    levels: f64,
    lo: f64,
    /// Levels per unit of value (0 when `hi ≤ lo`).
    scale: f64,
}

impl Level {
    fn of(s: &Section<'_>) -> Self {
        // f64 so that rounding to the nearest level is exact (f32 would add up to 0.004 of a
        // step).
        let levels = s.dtype.levels() as f64;
        let lo = s.lo as f64;
        let scale = if s.hi > s.lo {
            levels / (s.hi as f64 - lo)
        } else {
            0.0
        };
        Level {
            dtype: s.dtype,
            levels,
            lo,
            scale,
        }
    }

    /// Bits `shift..shift + 8` of each value's stored bits, into `out`: its f32 bits, or its
    /// nearest level, `round((v − lo) · scale)` clamped to `0..=levels`, NaN giving 0.
    fn plane(self, values: &[f32], shift: u32, out: &mut [u8]) {
        match self.dtype {
            Dtype::F32 => {
                for (o, &v) in out.iter_mut().zip(values) {
                    *o = (v.to_bits() >> shift) as u8;
                }
            }
            _ => level_plane(values, self, shift, out),
        }
    }
}

multiversion! {
    /// Each value's nearest level of `level` (a fixed-point type of at most 16 bits), into
    /// `out`.
    fn level_values(values: &[f32], level: Level, out: &mut [u16]) {
        let Level {
            levels, lo, scale, ..
        } = level;
        for (o, &v) in out.iter_mut().zip(values) {
            *o = nearest_level((v as f64 - lo) * scale, levels) as u16;
        }
    }
}

multiversion! {
    /// Bits `shift..shift + 8` of each value's nearest level of `level` (a fixed-point
    /// type), into `out`.
    fn level_plane(values: &[f32], level: Level, shift: u32, out: &mut [u8]) {
        let Level {
            levels, lo, scale, ..
        } = level;
        for (o, &v) in out.iter_mut().zip(values) {
            *o = (nearest_level((v as f64 - lo) * scale, levels) >> shift) as u8;
        }
    }
}

/// 2⁵²: a double in `[0, 2³²)` plus this is that double rounded to a whole number (halves to
/// even), held in the low bits of the sum's mantissa.
const WHOLE: f64 = 4_503_599_627_370_496.0;

/// `x.round().clamp(0.0, levels) as u32` (halves away from zero, NaN to 0) for a whole
/// `levels < 2³²`, in operations that vectorise: `round` is a call into libm and a float → int
/// cast keeps the loop scalar, and together they were most of the payload's time. Clamping
/// first is the same (`levels` is whole). Adding [`WHOLE`] rounds to the nearest whole number,
/// halves to even; a half that went down to even goes up instead, as `round` does: `x` minus
/// that whole number (exact: they are within ½ of each other) is then exactly ½.
#[inline(always)]
fn nearest_level(x: f64, levels: f64) -> u32 {
    // `max` and `min` drop a NaN operand: NaN becomes 0, as `as` makes it.
    let x = x.max(0.0).min(levels);
    let shifted = x + WHOLE;
    let even = shifted - WHOLE;
    (shifted.to_bits() as u32) + (x - even == 0.5) as u32
}

/// What the page needs to find and decode one section, serialised into the report's metadata.
#[derive(Debug, Serialize)]
pub struct SectionMeta {
    /// Section name.
    pub name: String,
    /// Storage type.
    pub dtype: Dtype,
    /// Byte offset of the section in the decompressed payload.
    pub offset: usize,
    /// Number of values.
    pub length: usize,
    /// Value of quantised 0.
    pub lo: f32,
    /// Value of the top quantised level.
    pub hi: f32,
    /// Largest possible |decoded − original| for values inside `[lo, hi]` (0 for f32).
    pub max_error: f64,
}

/// All sections of a report, laid out.
pub struct Payload<'a> {
    sections: Vec<Section<'a>>,
    compress: bool,
}

/// gzip level: 1 is about 2.5× faster than 6 for a blob only about 6 % bigger (measured on real
/// 512-token attention), and the CLI writes reports in the same run as everything else.
const GZIP_LEVEL: u32 = 1;

impl<'a> Payload<'a> {
    /// Lay out `sections`; `compress` selects gzip (decoded in the page by `DecompressionStream`).
    pub fn new(sections: Vec<Section<'a>>, compress: bool) -> Self {
        Payload { sections, compress }
    }

    /// Offsets and decoding parameters of every section.
    pub fn meta(&self) -> Vec<SectionMeta> {
        let mut offset = 0;
        self.sections
            .iter()
            .map(|s| {
                let length = s.len();
                let max_error = match s.dtype {
                    Dtype::F32 => 0.0,
                    d => (s.hi as f64 - s.lo as f64) / d.levels() as f64 / 2.0,
                };
                let meta = SectionMeta {
                    name: s.name.clone(),
                    dtype: s.dtype,
                    offset,
                    length,
                    lo: s.lo,
                    hi: s.hi,
                    max_error,
                };
                offset += length * s.dtype.bytes();
                meta
            })
            .collect()
    }

    /// Total decompressed size in bytes.
    pub fn raw_len(&self) -> usize {
        self.sections
            .iter()
            .map(|s| s.len() * s.dtype.bytes())
            .sum()
    }

    /// Write the raw (uncompressed, unencoded) payload bytes.
    pub fn write_raw(&self, sink: &mut impl Write) -> io::Result<()> {
        for s in &self.sections {
            for plane in 0..s.dtype.bytes() {
                s.write_plane(plane, sink)?;
            }
        }
        Ok(())
    }

    /// Write the payload as base64 text (of the gzip stream when compressing).
    pub fn write_base64(&self, w: &mut dyn Write) -> io::Result<()> {
        let mut b64 = EncoderWriter::new(w, &STANDARD);
        if self.compress {
            let mut gz = GzEncoder::new(&mut b64, Compression::new(GZIP_LEVEL));
            self.write_raw(&mut gz)?;
            gz.finish()?;
        } else {
            self.write_raw(&mut b64)?;
        }
        b64.finish()?;
        Ok(())
    }

    /// The raw payload bytes `start..start + out.len()` (as [`Payload::write_raw`] writes them),
    /// into `out`.
    fn raw_range(&self, start: usize, out: &mut [u8]) {
        let end = start + out.len();
        let mut at = 0;
        for s in &self.sections {
            let len = s.len();
            for plane in 0..s.dtype.bytes() {
                let (from, to) = (start.max(at), end.min(at + len));
                if from < to {
                    s.plane_range(plane, from - at, &mut out[from - start..to - start]);
                }
                at += len;
            }
        }
    }

    /// The payload as base64 text, not compressed: the text [`Payload::write_base64`] writes
    /// without compression, built in blocks on rayon's threads (each block's raw bytes are
    /// made and encoded on their own; a block of a multiple of 3 bytes is a whole number of
    /// base64 groups, so the blocks' texts join into the text of the whole).
    ///
    /// The first section, the attention, is most of it: when it is 16-bit and its planes start
    /// on whole groups (a length that is a multiple of 3), each block of its values is
    /// quantised once for both planes.
    pub fn base64_uncompressed(&self) -> String {
        /// Raw bytes (or values of the first section) per block, a multiple of 3.
        const BLOCK: usize = 3 << 14;
        const TEXT: usize = BLOCK / 3 * 4;
        let raw_len = self.raw_len();
        let mut text = vec![0u8; raw_len.div_ceil(3) * 4];
        let (mut rest, mut rest_from) = (&mut text[..], 0);
        if let Some(first) = self
            .sections
            .first()
            .filter(|s| s.dtype == Dtype::U16 && s.len() % 3 == 0)
        {
            let n = first.len();
            let (planes, others) = rest.split_at_mut(2 * n / 3 * 4);
            let (low, high) = planes.split_at_mut(n / 3 * 4);
            low.par_chunks_mut(TEXT)
                .zip(high.par_chunks_mut(TEXT))
                .enumerate()
                .for_each_init(
                    || (Vec::new(), Vec::new()),
                    |(levels, raw), (i, (low, high))| {
                        let count = BLOCK.min(n - i * BLOCK);
                        levels.resize(count, 0);
                        first.levels_range(i * BLOCK, levels);
                        raw.resize(count, 0);
                        for (plane, text) in [(0, low), (1, high)] {
                            for (r, &l) in raw.iter_mut().zip(levels.iter()) {
                                *r = (l >> (8 * plane)) as u8;
                            }
                            encode_base64(raw, text);
                        }
                    },
                );
            (rest, rest_from) = (others, 2 * n);
        }
        rest.par_chunks_mut(TEXT)
            .enumerate()
            .for_each_init(Vec::new, |raw, (i, chunk)| {
                let start = rest_from + i * BLOCK;
                raw.resize(BLOCK.min(raw_len - start), 0);
                self.raw_range(start, raw);
                encode_base64(raw, chunk);
            });
        String::from_utf8(text).expect("base64 is ASCII")
    }
}

/// `raw` as standard base64 (padded) into `text`, which is exactly `⌈len / 3⌉ · 4` bytes: the
/// text the `base64` crate writes, three times as fast where the loop vectorises (AVX2,
/// AVX-512), which that crate's table lookups do not.
fn encode_base64(raw: &[u8], text: &mut [u8]) {
    let whole = raw.len() / 3 * 3;
    let (head, tail) = text.split_at_mut(whole / 3 * 4);
    base64_groups(&raw[..whole], head);
    let written = STANDARD
        .encode_slice(&raw[whole..], tail)
        .expect("the text has room for the last group");
    debug_assert_eq!(written, tail.len());
}

multiversion! {
    /// Each 3 bytes of `raw` (a whole number of groups) as 4 base64 characters in `text`.
    fn base64_groups(raw: &[u8], text: &mut [u8]) {
        for (i, o) in raw.chunks_exact(3).zip(text.chunks_exact_mut(4)) {
            let (a, b, c) = (i[0], i[1], i[2]);
            o[0] = base64_char(a >> 2);
            o[1] = base64_char(((a & 3) << 4) | (b >> 4));
            o[2] = base64_char(((b & 15) << 2) | (c >> 6));
            o[3] = base64_char(c & 63);
        }
    }
}

/// The standard base64 character of a 6-bit value, without a table (so the loop over it
/// vectorises): `A`–`Z`, then `a`–`z`, `0`–`9`, `+`, `/`, each range a step from the one
/// before.
#[inline(always)]
fn base64_char(x: u8) -> u8 {
    let mut c = x.wrapping_add(b'A');
    c = c.wrapping_add(if x >= 26 { b'a' - b'Z' - 1 } else { 0 });
    c = c.wrapping_sub(if x >= 52 { b'a' + 26 - b'0' } else { 0 });
    c = c.wrapping_sub(if x >= 62 { b'0' + 10 - b'+' } else { 0 });
    c.wrapping_add(if x >= 63 { b'/' - b'+' - 1 } else { 0 })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// Decode a section the way the page does (independently written here from the format doc).
    fn decode(raw: &[u8], m: &SectionMeta) -> Vec<f64> {
        let b = match m.dtype {
            Dtype::U8 => 1,
            Dtype::U16 => 2,
            Dtype::F32 => 4,
        };
        let bytes = &raw[m.offset..m.offset + m.length * b];
        (0..m.length)
            .map(|i| {
                let mut bits = 0u32;
                for p in 0..b {
                    bits |= (bytes[p * m.length + i] as u32) << (8 * p);
                }
                match m.dtype {
                    Dtype::F32 => f32::from_bits(bits) as f64,
                    Dtype::U16 => m.lo as f64 + bits as f64 * (m.hi - m.lo) as f64 / 65535.0,
                    Dtype::U8 => m.lo as f64 + bits as f64 * (m.hi - m.lo) as f64 / 255.0,
                }
            })
            .collect()
    }

    fn roundtrip(compress: bool) {
        // Probabilities spread over [0, 1], including both ends and awkward mid-step values.
        let probs: Vec<f32> = (0..10_000)
            .map(|i| ((i as f32 * 0.618_034) % 1.0).powi(3))
            .chain([0.0, 1.0, 0.5 / 65535.0, 1.5 / 65535.0])
            .collect();
        let vectors: Vec<f32> = (0..999)
            .map(|i| (i as f32 - 500.0) * 0.0137 + 1e-7)
            .collect();
        let wide: Vec<f32> = (0..500).map(|i| i as f32 * 0.01 - 2.0).collect();
        let sections = vec![
            Section {
                name: "attention".into(),
                dtype: Dtype::U16,
                lo: 0.0,
                hi: 1.0,
                parts: vec![&probs[..5000], &probs[5000..]],
            },
            Section {
                name: "query".into(),
                dtype: Dtype::F32,
                lo: 0.0,
                hi: 0.0,
                parts: vec![&vectors],
            },
            Section {
                name: "coarse".into(),
                dtype: Dtype::U8,
                lo: -2.0,
                hi: 3.0,
                parts: vec![&wide],
            },
        ];
        let payload = Payload::new(sections, compress);
        let mut text = Vec::new();
        payload.write_base64(&mut text).unwrap();
        let bytes = STANDARD.decode(&text).unwrap();
        let raw = if compress {
            let mut out = Vec::new();
            flate2::read::GzDecoder::new(&bytes[..])
                .read_to_end(&mut out)
                .unwrap();
            out
        } else {
            bytes
        };
        assert_eq!(raw.len(), payload.raw_len());
        let meta = payload.meta();
        let originals: [&[f32]; 3] = [&probs, &vectors, &wide];
        for (m, orig) in meta.iter().zip(originals) {
            let got = decode(&raw, m);
            assert_eq!(got.len(), orig.len());
            let worst = got
                .iter()
                .zip(orig)
                .map(|(g, &o)| (g - o as f64).abs())
                .fold(0.0, f64::max);
            // The documented bound holds (slack only for f64 rounding).
            assert!(
                worst <= m.max_error * (1.0 + 1e-9),
                "{}: {worst} > {}",
                m.name,
                m.max_error
            );
        }
        assert!((meta[0].max_error - 0.5 / 65535.0).abs() < 1e-15);
        assert!(meta[0].max_error <= 7.7e-6);
        assert_eq!(meta[1].max_error, 0.0);
        assert_eq!(meta[1].offset, 10_004 * 2);
    }

    #[test]
    fn sections_roundtrip_within_stated_error_compressed() {
        roundtrip(true);
    }

    #[test]
    fn sections_roundtrip_within_stated_error_uncompressed() {
        roundtrip(false);
    }

    #[test]
    fn out_of_range_and_nan_are_clamped() {
        let vals = [-0.5f32, 2.0, f32::NAN];
        let payload = Payload::new(
            vec![Section {
                name: "x".into(),
                dtype: Dtype::U16,
                lo: 0.0,
                hi: 1.0,
                parts: vec![&vals],
            }],
            false,
        );
        let mut raw = Vec::new();
        payload.write_raw(&mut raw).unwrap();
        // planes: low bytes [0, ff, 0], high bytes [0, ff, 0]
        assert_eq!(raw, [0, 0xff, 0, 0, 0xff, 0]);
    }

    /// What the quantiser computed before [`nearest_level`]: the definition it must match.
    fn level_by_round(x: f64, levels: f64) -> u32 {
        x.round().clamp(0.0, levels) as u32
    }

    #[test]
    fn nearest_level_rounds_as_round_does() {
        let mut xs = vec![
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            -0.0,
            0.0,
            -0.5,
            -0.49,
            0.5,
            0.499_999_999_999_999_9,
            1.5,
            2.5,
            254.5,
            255.0,
            255.49,
            255.5,
            65_534.5,
            65_534.499_999_999_99,
            65_535.0,
            65_535.2,
            65_536.0,
            1e300,
            f64::MIN_POSITIVE,
        ];
        // Every f32 probability near the levels' halves, and a spread of others.
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..200_000 {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let v = f32::from_bits((seed >> 32) as u32 & 0x3fff_ffff).min(1.0);
            xs.push(v as f64 * 65_535.0);
            xs.push(v as f64 * 255.0);
            xs.push((v as f64 - 0.25) * 300.0);
        }
        for k in 0..=65_535u32 {
            let half = (k as f32 + 0.5) / 65_535.0;
            for v in [
                half,
                f32::from_bits(half.to_bits() - 1),
                f32::from_bits(half.to_bits() + 1),
            ] {
                xs.push(v as f64 * 65_535.0);
            }
        }
        for k in 0..=255u32 {
            let half = (k as f32 + 0.5) / 255.0;
            for v in [
                half,
                f32::from_bits(half.to_bits() - 1),
                f32::from_bits(half.to_bits() + 1),
            ] {
                xs.push(v as f64 * 255.0);
            }
        }
        for levels in [255.0, 65_535.0] {
            for &x in &xs {
                assert_eq!(
                    nearest_level(x, levels),
                    level_by_round(x, levels),
                    "{x:e} over {levels}"
                );
            }
        }
    }

    #[test]
    fn base64_is_the_crates_text() {
        let mut seed = 7u64;
        let bytes: Vec<u8> = (0..3_000)
            .map(|_| {
                seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                (seed >> 56) as u8
            })
            .chain(0..=255)
            .collect();
        for len in (0..40).chain([255, 256, 257, 3_000, bytes.len()]) {
            let raw = &bytes[..len];
            let mut text = vec![0u8; len.div_ceil(3) * 4];
            encode_base64(raw, &mut text);
            assert_eq!(text, STANDARD.encode(raw).as_bytes(), "{len} bytes");
        }
        for x in 0..64u8 {
            let want = STANDARD.encode([x << 2]).as_bytes()[0];
            assert_eq!(base64_char(x), want, "{x}");
        }
    }

    #[test]
    fn base64_in_blocks_is_the_streamed_text() {
        // Sections of every type, one in many parts, long enough for several blocks; the
        // attention's length a multiple of 3 (each block quantised once for both planes) or
        // not.
        let probs: Vec<f32> = (0..200_001)
            .map(|i| ((i as f32 * 0.618_034) % 1.0).powi(3))
            .chain([f32::NAN, -1.0, 2.0, 0.5])
            .collect();
        let vectors: Vec<f32> = (0..12_345).map(|i| (i as f32 - 500.0) * 0.0137).collect();
        for (cut, len) in [
            (0usize, 70_001),
            (1, 70_002),
            (2, 69_999),
            (3, 200_004),
            (7, 3),
            (1000, 0),
            (5, 200_001),
        ] {
            let probs = &probs[probs.len() - len..];
            let sections = vec![
                Section {
                    name: "attention".into(),
                    dtype: Dtype::U16,
                    lo: 0.0,
                    hi: 1.0,
                    parts: probs.chunks(9_999).collect(),
                },
                Section {
                    name: "query".into(),
                    dtype: Dtype::F32,
                    lo: 0.0,
                    hi: 0.0,
                    parts: vec![&vectors[cut..]],
                },
                Section {
                    name: "coarse".into(),
                    dtype: Dtype::U8,
                    lo: -2.0,
                    hi: 3.0,
                    parts: vec![&probs[..cut.min(len)], &[], &vectors[..cut * 3]],
                },
            ];
            let payload = Payload::new(sections, false);
            let mut streamed = Vec::new();
            payload.write_base64(&mut streamed).unwrap();
            assert_eq!(
                payload.base64_uncompressed().as_bytes(),
                &streamed[..],
                "cut {cut}, {len} values"
            );
        }
        let empty = Payload::new(Vec::new(), false);
        assert_eq!(empty.base64_uncompressed(), "");
    }
}
