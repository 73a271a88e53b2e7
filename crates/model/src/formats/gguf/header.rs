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

use crate::kernels::quant::QuantType;

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
    /// The tensors stored in MXFP4, which candle's reader does not know: each one's name and
    /// the offset of its type field, which [`super::GgufFile::open`] hides from candle.
    pub(crate) mxfp4: Vec<(String, usize)>,
}

/// What is wrong with a GGUF header. Each variant displays as one line naming the field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// The first four bytes are not `GGUF`.
    #[error("not a GGUF file (magic number {magic:#010x}, expected 0x46554747 'GGUF')")]
    Magic {
        /// The number found.
        magic: u32,
    },
    /// A version other than 1, 2 or 3.
    #[error("GGUF version {0} is not supported (1, 2 or 3)")]
    Version(u32),
    /// More entries than the file's bytes can hold.
    #[error("header declares {tensors} tensors and {entries} metadata entries, more than the file's {file_len} bytes can hold")]
    TooManyEntries {
        /// Tensors declared.
        tensors: u64,
        /// Metadata entries declared.
        entries: u64,
        /// The file's size.
        file_len: usize,
    },
    /// A metadata key given twice.
    #[error("metadata key {key:?} appears twice; a GGUF holds each key once")]
    DuplicateKey {
        /// The key.
        key: String,
    },
    /// An alignment that is not a power of two up to 1 MiB.
    #[error("metadata general.alignment is {0}, not a power of two up to 1 MiB")]
    Alignment(i64),
    /// A metadata value that cannot be walked.
    #[error("metadata {key}: {problem}")]
    Value {
        /// The key.
        key: String,
        /// What is wrong with its value.
        problem: Box<HeaderError>,
    },
    /// A tensor given twice.
    #[error("tensor {name:?} appears twice (the second is number {index}); a GGUF holds each tensor once")]
    DuplicateTensor {
        /// The tensor.
        name: String,
        /// The second one's index.
        index: u64,
    },
    /// A tensor of more than 4 dimensions.
    #[error("tensor {name} has {dims} dimensions; GGUF allows at most 4")]
    Dimensions {
        /// The tensor.
        name: String,
        /// Its dimension count.
        dims: u32,
    },
    /// A tensor stored in a type attnviz cannot dequantise.
    #[error("tensor {name} (number {index}) {dtype}")]
    TensorType {
        /// The tensor.
        name: String,
        /// Its index.
        index: u64,
        /// The type.
        dtype: UnsupportedType,
    },
    /// Tensor data that would start past the end of the file.
    #[error("tensor data would start at byte {offset}, past the end of the {file_len}-byte file")]
    DataPastEnd {
        /// Where the data would start.
        offset: u64,
        /// The file's size.
        file_len: usize,
    },
    /// The file ends inside the header.
    #[error("ends at byte {0}, inside the header")]
    EndsInHeader(usize),
    /// A field that needs more bytes than are left.
    #[error("{what} needs {needs} bytes at offset {offset}, but the file ends at {file_len}")]
    Truncated {
        /// The field.
        what: &'static str,
        /// Bytes it needs.
        needs: u64,
        /// Where it starts.
        offset: usize,
        /// The file's size.
        file_len: usize,
    },
    /// More metadata values than the walk allows (2²³).
    #[error(
        "the metadata holds more than {MAX_METADATA_VALUES} values; no real model needs that many"
    )]
    TooManyValues,
    /// Arrays nested too deep.
    #[error("arrays nested more than {MAX_DEPTH} deep")]
    TooDeep,
    /// An array longer than the metadata may hold.
    #[error(
        "an array of {0} elements; the metadata may hold at most {MAX_METADATA_VALUES} values"
    )]
    LongArray(u64),
    /// A boolean array holding something other than 0 or 1.
    #[error("a boolean array holds a value other than 0 or 1")]
    BoolArray,
    /// A value type GGUF does not define.
    #[error("unknown value type {0}")]
    ValueType(u32),
    /// A boolean other than 0 or 1.
    #[error("boolean value {0} is neither 0 nor 1")]
    Bool(u8),
}

/// A ggml type attnviz cannot dequantise (displays after the tensor's name).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("is stored as {name} (ggml type {id}), which attnviz cannot dequantise; supported: {}. Use a GGUF quantised with one of those", super::dequant::SUPPORTED)]
pub struct UnsupportedType {
    /// The ggml type id.
    pub id: u32,
    /// Its name, as llama.cpp gives it.
    pub name: &'static str,
}

/// Walk the header in `bytes` (the whole file). The error names the field.
pub(crate) fn walk(bytes: &[u8]) -> Result<Header, HeaderError> {
    let mut r = Reader {
        bytes,
        pos: 0,
        wide: true,
    };
    let magic = r.u32("the magic number")?;
    if magic != 0x4655_4747 {
        return Err(HeaderError::Magic { magic });
    }
    let version = r.u32("the version")?;
    r.wide = match version {
        1 => false,
        2 | 3 => true,
        v => return Err(HeaderError::Version(v)),
    };
    let tensor_count = r.len("the tensor count")?;
    let kv_count = r.len("the metadata count")?;
    // The smallest metadata entry and tensor record take 13 and 24 bytes.
    let minimum = kv_count
        .saturating_mul(13)
        .saturating_add(tensor_count.saturating_mul(24));
    if minimum > r.remaining() as u64 {
        return Err(HeaderError::TooManyEntries {
            tensors: tensor_count,
            entries: kv_count,
            file_len: bytes.len(),
        });
    }

    let mut values = 0u64;
    let mut alignment = 32u64;
    // candle keeps the last of two entries with one name, so a second `general.architecture`
    // or tensor would silently replace the first: both are refused here.
    let mut keys = std::collections::HashSet::new();
    for _ in 0..kv_count {
        let key = r.string("a metadata key")?;
        if !keys.insert(key) {
            return Err(HeaderError::DuplicateKey {
                key: String::from_utf8_lossy(key).into_owned(),
            });
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
                    return Err(HeaderError::Alignment(v as i64));
                }
                alignment = v;
            }
        }
        r.skip_value(kind, 0, &mut values)
            .map_err(|e| HeaderError::Value {
                key: String::from_utf8_lossy(key).into_owned(),
                problem: Box::new(e),
            })?;
    }

    let mut names = std::collections::HashSet::new();
    let mut mxfp4 = Vec::new();
    for index in 0..tensor_count {
        let name = r.string("a tensor name")?;
        if !names.insert(name) {
            return Err(HeaderError::DuplicateTensor {
                name: String::from_utf8_lossy(name).into_owned(),
                index,
            });
        }
        let name = String::from_utf8_lossy(name);
        let dims = r.u32("a tensor's dimension count")?;
        if dims > 4 {
            return Err(HeaderError::Dimensions {
                name: name.into_owned(),
                dims,
            });
        }
        for _ in 0..dims {
            if r.wide {
                r.u64("a tensor dimension")?;
            } else {
                r.u32("a tensor dimension")?;
            }
        }
        let at = r.pos;
        let kind = r.u32("a tensor type")?;
        match dtype_from_id(kind) {
            Err(dtype) => {
                return Err(HeaderError::TensorType {
                    name: name.into_owned(),
                    index,
                    dtype,
                })
            }
            Ok(QuantType::Mxfp4) => mxfp4.push((name.into_owned(), at)),
            Ok(_) => {}
        }
        r.u64("a tensor offset")?;
    }
    let data_offset = (r.pos as u64).div_ceil(alignment) * alignment;
    // A file without tensors (a vocabulary-only GGUF) may end without the padding.
    if tensor_count > 0 && data_offset > bytes.len() as u64 {
        return Err(HeaderError::DataPastEnd {
            offset: data_offset,
            file_len: bytes.len(),
        });
    }
    Ok(Header { data_offset, mxfp4 })
}

/// The ggml type with this id, or why not: candle dequantises these, the kernels decode MXFP4
/// too; the others are named.
pub(crate) fn dtype_from_id(id: u32) -> Result<QuantType, UnsupportedType> {
    use QuantType as D;
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
        39 => D::Mxfp4,
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
                40 => "NVFP4",
                41 => "Q1_0",
                _ => "an unknown type",
            };
            return Err(UnsupportedType { id: other, name });
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

    fn peek(&self, n: usize) -> Result<&'a [u8], HeaderError> {
        self.bytes
            .get(self.pos..self.pos.saturating_add(n))
            .ok_or(HeaderError::EndsInHeader(self.bytes.len()))
    }

    fn take(&mut self, n: u64, what: &'static str) -> Result<&'a [u8], HeaderError> {
        if n > self.remaining() as u64 {
            return Err(HeaderError::Truncated {
                what,
                needs: n,
                offset: self.pos,
                file_len: self.bytes.len(),
            });
        }
        let slice = &self.bytes[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(slice)
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, HeaderError> {
        Ok(u32::from_le_bytes(self.take(4, what)?.try_into().unwrap()))
    }

    fn u64(&mut self, what: &'static str) -> Result<u64, HeaderError> {
        Ok(u64::from_le_bytes(self.take(8, what)?.try_into().unwrap()))
    }

    fn len(&mut self, what: &'static str) -> Result<u64, HeaderError> {
        if self.wide {
            self.u64(what)
        } else {
            self.u32(what).map(u64::from)
        }
    }

    fn string(&mut self, what: &'static str) -> Result<&'a [u8], HeaderError> {
        let n = self.len(what)?;
        self.take(n, what)
    }

    /// Skip one metadata value of type `kind`, counting it (and its elements) in `values`.
    fn skip_value(&mut self, kind: u32, depth: usize, values: &mut u64) -> Result<(), HeaderError> {
        *values += 1;
        if *values > MAX_METADATA_VALUES {
            return Err(HeaderError::TooManyValues);
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
                    return Err(HeaderError::TooDeep);
                }
                let inner = self.u32("an array's element type")?;
                let count = self.len("an array's length")?;
                if count > MAX_METADATA_VALUES {
                    return Err(HeaderError::LongArray(count));
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
                        return Err(HeaderError::TooManyValues);
                    }
                    self.take(count.saturating_mul(width), "an array")?;
                    if inner == 7 {
                        // candle rejects a bool other than 0 or 1; so do we, naming the field.
                        let start = self.pos - count as usize;
                        if self.bytes[start..self.pos].iter().any(|&b| b > 1) {
                            return Err(HeaderError::BoolArray);
                        }
                    }
                    return Ok(());
                }
                for _ in 0..count {
                    self.skip_value(inner, depth + 1, values)?;
                }
                return Ok(());
            }
            other => return Err(HeaderError::ValueType(other)),
        };
        let bytes = self.take(width, "a value")?;
        if kind == 7 && bytes[0] > 1 {
            return Err(HeaderError::Bool(bytes[0]));
        }
        Ok(())
    }
}
