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
//! Nothing is buffered whole: each plane is produced by a pass over the source slices and streamed
//! through the compressor, so a 512-token report never holds a second copy of the weights.

use std::io::{self, Write};

use base64::engine::general_purpose::STANDARD;
use base64::write::EncoderWriter;
use flate2::write::GzEncoder;
use flate2::Compression;
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
        let mut buf = Vec::with_capacity(1 << 16);
        // f64 so that rounding to the nearest level is exact (f32 would add up to 0.004 of a step).
        let levels = self.dtype.levels() as f64;
        let lo = self.lo as f64;
        let scale = if self.hi > self.lo {
            levels / (self.hi as f64 - lo)
        } else {
            0.0
        };
        let shift = 8 * plane as u32;
        for part in &self.parts {
            for &v in *part {
                let bits: u32 = match self.dtype {
                    Dtype::F32 => v.to_bits(),
                    // `as` saturates and maps NaN to 0, which is what we document.
                    _ => ((v as f64 - lo) * scale).round().clamp(0.0, levels) as u32,
                };
                buf.push((bits >> shift) as u8);
                if buf.len() == buf.capacity() {
                    sink.write_all(&buf)?;
                    buf.clear();
                }
            }
        }
        sink.write_all(&buf)
    }
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;
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
}
