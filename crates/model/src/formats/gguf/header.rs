//! A bounded walk over a GGUF header, before candle's reader parses it.
//!
//! candle's `gguf_file::Content::read` already checks string and array lengths against the bytes
//! left in the file. Three things it leaves to us, each of which this walk settles without
//! allocating anything:
//!
//! - **Amplification:** every metadata array element becomes a 32-byte `Value`, so a 1-byte
//!   element costs 32 bytes of memory. The walk caps the total number of metadata elements.
//! - **`general.alignment` = 0:** candle divides by it (a panic). The walk rejects it, and any
//!   alignment that is not a power of two, as llama.cpp does.
//! - **Unsupported tensor types:** candle stops at the first one with a message that names
//!   neither the type nor the tensor. The walk names both.

use candle_core::quantized::GgmlDType;

/// At most this many metadata values in all (array elements included). A 256k-token vocabulary
/// with scores, types and merges needs about a million; the cap bounds candle's `Value` storage
/// to about 270 MB whatever the file says.
pub(crate) const MAX_METADATA_VALUES: u64 = 1 << 23;

/// Nesting depth of metadata arrays (candle allows 64; real files use 1).
const MAX_DEPTH: usize = 8;

/// What the walk learned: nothing is kept but the alignment, which tells where tensor data starts.
#[derive(Debug)]
pub(crate) struct Header {
    /// Bytes from the start of the file to the first tensor's data (after alignment padding).
    pub(crate) data_offset: u64,
}

/// Walk the header in `bytes` (the whole file). The error is one line naming the field.
pub(crate) fn walk(bytes: &[u8]) -> Result<Header, String> {
    let mut r = Reader {
        bytes,
        pos: 0,
        wide: true,
    };
    let magic = r.u32("the magic number")?;
    if magic != 0x4655_4747 {
        return Err(format!(
            "not a GGUF file (magic number {magic:#010x}, expected 0x46554747 'GGUF')"
        ));
    }
    let version = r.u32("the version")?;
    r.wide = match version {
        1 => false,
        2 | 3 => true,
        v => return Err(format!("GGUF version {v} is not supported (1, 2 or 3)")),
    };
    let tensor_count = r.len("the tensor count")?;
    let kv_count = r.len("the metadata count")?;
    // The smallest metadata entry and tensor record take 13 and 24 bytes.
    let minimum = kv_count
        .saturating_mul(13)
        .saturating_add(tensor_count.saturating_mul(24));
    if minimum > r.remaining() as u64 {
        return Err(format!(
            "header declares {tensor_count} tensors and {kv_count} metadata entries, more than the file's {} bytes can hold",
            bytes.len()
        ));
    }

    let mut values = 0u64;
    let mut alignment = 32u64;
    // candle keeps the last of two entries with one name, so a second `general.architecture`
    // or tensor would silently replace the first: both are refused here.
    let mut keys = std::collections::HashSet::new();
    for _ in 0..kv_count {
        let key = r.string("a metadata key")?;
        if !keys.insert(key) {
            return Err(format!(
                "metadata key {:?} appears twice; a GGUF holds each key once",
                String::from_utf8_lossy(key)
            ));
        }
        let kind = r.u32("a metadata value type")?;
        if key == b"general.alignment" {
            // candle reads the alignment from these six integer types and ignores any other.
            let value = match kind {
                0 => Some(u64::from(r.peek(1)?[0])),
                1 => Some(r.peek(1)?[0] as i8 as u64),
                2 => Some(u64::from(u16::from_le_bytes(
                    r.peek(2)?.try_into().unwrap(),
                ))),
                3 => Some(i16::from_le_bytes(r.peek(2)?.try_into().unwrap()) as u64),
                4 => Some(u64::from(u32::from_le_bytes(
                    r.peek(4)?.try_into().unwrap(),
                ))),
                5 => Some(i32::from_le_bytes(r.peek(4)?.try_into().unwrap()) as u64),
                _ => None,
            };
            if let Some(v) = value {
                if v == 0 || !v.is_power_of_two() || v > 1 << 20 {
                    return Err(format!(
                        "metadata general.alignment is {}, not a power of two up to 1 MiB",
                        v as i64
                    ));
                }
                alignment = v;
            }
        }
        r.skip_value(kind, 0, &mut values)
            .map_err(|e| format!("metadata {}: {e}", String::from_utf8_lossy(key)))?;
    }

    let mut names = std::collections::HashSet::new();
    for index in 0..tensor_count {
        let name = r.string("a tensor name")?;
        if !names.insert(name) {
            return Err(format!(
                "tensor {:?} appears twice (the second is number {index}); a GGUF holds each tensor once",
                String::from_utf8_lossy(name)
            ));
        }
        let name = String::from_utf8_lossy(name);
        let dims = r.u32("a tensor's dimension count")?;
        if dims > 4 {
            return Err(format!(
                "tensor {name} has {dims} dimensions; GGUF allows at most 4"
            ));
        }
        for _ in 0..dims {
            if r.wide {
                r.u64("a tensor dimension")?;
            } else {
                r.u32("a tensor dimension")?;
            }
        }
        let kind = r.u32("a tensor type")?;
        if let Err(e) = dtype_from_id(kind) {
            return Err(format!("tensor {name} (number {index}) {e}"));
        }
        r.u64("a tensor offset")?;
    }
    let data_offset = (r.pos as u64).div_ceil(alignment) * alignment;
    // A file without tensors (a vocabulary-only GGUF) may end without the padding.
    if tensor_count > 0 && data_offset > bytes.len() as u64 {
        return Err(format!(
            "tensor data would start at byte {data_offset}, past the end of the {}-byte file",
            bytes.len()
        ));
    }
    Ok(Header { data_offset })
}

/// The ggml type with this id, or why not: candle dequantises these; the others are named.
pub(crate) fn dtype_from_id(id: u32) -> Result<GgmlDType, String> {
    use GgmlDType as D;
    Ok(match id {
        0 => D::F32,
        1 => D::F16,
        2 => D::Q4_0,
        3 => D::Q4_1,
        6 => D::Q5_0,
        7 => D::Q5_1,
        8 => D::Q8_0,
        9 => D::Q8_1,
        10 => D::Q2K,
        11 => D::Q3K,
        12 => D::Q4K,
        13 => D::Q5K,
        14 => D::Q6K,
        15 => D::Q8K,
        30 => D::BF16,
        other => {
            let name = match other {
                4 | 5 => "Q4_2/Q4_3 (removed from ggml in 2023)",
                16 => "IQ2_XXS",
                17 => "IQ2_XS",
                18 => "IQ3_XXS",
                19 => "IQ1_S",
                20 => "IQ4_NL",
                21 => "IQ3_S",
                22 => "IQ2_S",
                23 => "IQ4_XS",
                24 => "I8",
                25 => "I16",
                26 => "I32",
                27 => "I64",
                28 => "F64",
                29 => "IQ1_M",
                31..=33 => "Q4_0_N_M (removed from ggml in 2024)",
                34 => "TQ1_0",
                35 => "TQ2_0",
                36..=38 => "IQ4_NL_N_M (removed from ggml in 2024)",
                39 => "MXFP4",
                40 => "NVFP4",
                41 => "Q1_0",
                _ => "an unknown type",
            };
            return Err(format!(
                "is stored as {name} (ggml type {other}), which attnviz cannot dequantise; \
                 supported: {}. Use a GGUF quantised with one of those",
                super::dequant::SUPPORTED
            ));
        }
    })
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// GGUF v2/v3 lengths are u64; v1's are u32.
    wide: bool,
}

impl<'a> Reader<'a> {
    fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    fn peek(&self, n: usize) -> Result<&'a [u8], String> {
        self.bytes
            .get(self.pos..self.pos.saturating_add(n))
            .ok_or_else(|| format!("ends at byte {}, inside the header", self.bytes.len()))
    }

    fn take(&mut self, n: u64, what: &str) -> Result<&'a [u8], String> {
        if n > self.remaining() as u64 {
            return Err(format!(
                "{what} needs {n} bytes at offset {}, but the file ends at {}",
                self.pos,
                self.bytes.len()
            ));
        }
        let slice = &self.bytes[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(slice)
    }

    fn u32(&mut self, what: &str) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.take(4, what)?.try_into().unwrap()))
    }

    fn u64(&mut self, what: &str) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.take(8, what)?.try_into().unwrap()))
    }

    fn len(&mut self, what: &str) -> Result<u64, String> {
        if self.wide {
            self.u64(what)
        } else {
            self.u32(what).map(u64::from)
        }
    }

    fn string(&mut self, what: &str) -> Result<&'a [u8], String> {
        let n = self.len(what)?;
        self.take(n, what)
    }

    /// Skip one metadata value of type `kind`, counting it (and its elements) in `values`.
    fn skip_value(&mut self, kind: u32, depth: usize, values: &mut u64) -> Result<(), String> {
        *values += 1;
        if *values > MAX_METADATA_VALUES {
            return Err(format!(
                "the metadata holds more than {MAX_METADATA_VALUES} values; no real model needs that many"
            ));
        }
        let width = match kind {
            0 | 1 | 7 => 1,
            2 | 3 => 2,
            4..=6 => 4,
            10..=12 => 8,
            8 => {
                self.string("a string value")?;
                return Ok(());
            }
            9 => {
                if depth >= MAX_DEPTH {
                    return Err(format!("arrays nested more than {MAX_DEPTH} deep"));
                }
                let inner = self.u32("an array's element type")?;
                let count = self.len("an array's length")?;
                if count > MAX_METADATA_VALUES {
                    return Err(format!(
                        "an array of {count} elements; the metadata may hold at most {MAX_METADATA_VALUES} values"
                    ));
                }
                let fixed = match inner {
                    0 | 1 | 7 => Some(1u64),
                    2 | 3 => Some(2),
                    4..=6 => Some(4),
                    10..=12 => Some(8),
                    _ => None,
                };
                if let Some(width) = fixed {
                    // Fixed-width elements: check and skip them in one step.
                    *values += count;
                    if *values > MAX_METADATA_VALUES {
                        return Err(format!(
                            "the metadata holds more than {MAX_METADATA_VALUES} values; no real model needs that many"
                        ));
                    }
                    self.take(count.saturating_mul(width), "an array")?;
                    if inner == 7 {
                        // candle rejects a bool other than 0 or 1; so do we, naming the field.
                        let start = self.pos - count as usize;
                        if self.bytes[start..self.pos].iter().any(|&b| b > 1) {
                            return Err("a boolean array holds a value other than 0 or 1".into());
                        }
                    }
                    return Ok(());
                }
                for _ in 0..count {
                    self.skip_value(inner, depth + 1, values)?;
                }
                return Ok(());
            }
            other => return Err(format!("unknown value type {other}")),
        };
        let bytes = self.take(width, "a value")?;
        if kind == 7 && bytes[0] > 1 {
            return Err(format!("boolean value {} is neither 0 nor 1", bytes[0]));
        }
        Ok(())
    }
}
