//! `.safetensors` files: the attention arrays as tensors (F16, BF16, F32 or F64), the tokens and
//! other fields as tensors or as JSON strings in the header's `__metadata__`
//! (`{"tokens": "[\"[CLS]\", \"hi\"]", "sentence_b_start": "3", "text": "hi"}`).
//!
//! The file is memory-mapped; the `safetensors` crate checks the header (at most 100 MB) and
//! every tensor's offsets against the file, and a tensor is only converted to f32 after its
//! shape passed [`super::check::size`].

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;

use safetensors::{Dtype, SafeTensors};

use super::budget::Declared;
use super::store::{Assembled, Plan, Store, Value};
use super::{check, FileError, ImportError};

/// Whether the first bytes look like a safetensors header: a little-endian length that fits in
/// the file, then `{`.
pub fn looks_like_safetensors(head: &[u8], file_len: u64) -> bool {
    if head.len() < 9 {
        return false;
    }
    let n = u64::from_le_bytes(head[..8].try_into().expect("8 bytes"));
    n >= 2 && n <= file_len.saturating_sub(8) && head[8] == b'{'
}

/// Read the attention arrays of the `.safetensors` file at `path`, as `plan` says.
pub fn read(path: &Path, shown: &str, plan: &Plan) -> Result<Assembled, ImportError> {
    let file = File::open(path).map_err(|source| ImportError::Io {
        path: shown.to_string(),
        source,
    })?;
    // SAFETY: the map is only read, while this function runs. Another process truncating the
    // file meanwhile could fault the read (the same caveat as every memory-mapped checkpoint);
    // the file is a regular file, checked by the caller.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|source| ImportError::Io {
        path: shown.to_string(),
        source,
    })?;
    let bad = |source: safetensors::SafeTensorError| FileError::Safetensors {
        file: shown.to_string(),
        source,
    };
    let (_, meta) = SafeTensors::read_metadata(&map).map_err(bad)?;
    let tensors = SafeTensors::deserialize(&map).map_err(bad)?;
    let mut store = TensorStore {
        tensors,
        metadata: meta.metadata().clone().unwrap_or_default(),
        shown: shown.to_string(),
    };
    super::store::assemble(&mut store, shown, plan)
}

struct TensorStore<'a> {
    tensors: SafeTensors<'a>,
    metadata: HashMap<String, String>,
    shown: String,
}

impl Store for TensorStore<'_> {
    fn declared(&mut self, name: &str) -> Result<Option<Declared>, ImportError> {
        let Ok(t) = self.tensors.tensor(name) else {
            // Metadata strings are in memory with the header already.
            return Ok(None);
        };
        let shape = t.shape().to_vec();
        check::size(&format!("{}: {name}", self.shown), &shape)?;
        let count = shape.iter().map(|&d| d as u64).product::<u64>();
        let each = match t.dtype() {
            Dtype::F32 | Dtype::F64 | Dtype::F16 | Dtype::BF16 => 4,
            _ => 8,
        };
        Ok(Some(Declared {
            shape,
            decoded: count.saturating_mul(each),
            // The mapped data is read in, page by page, as it is converted.
            transient: t.data().len() as u64,
        }))
    }

    fn get(&mut self, name: &str) -> Result<Option<Value>, ImportError> {
        let shown = &self.shown;
        if let Ok(t) = self.tensors.tensor(name) {
            let shape = t.shape().to_vec();
            check::size(&format!("{shown}: {name}"), &shape)?;
            let data = t.data();
            let value = match t.dtype() {
                Dtype::F32 => floats(shape, data, 4, false, |b| {
                    f32::from_le_bytes(b.try_into().expect("4 bytes"))
                }),
                Dtype::F64 => floats(shape, data, 8, false, |b| {
                    f64::from_le_bytes(b.try_into().expect("8 bytes")) as f32
                }),
                Dtype::F16 => floats(shape, data, 2, true, |b| {
                    half::f16::from_le_bytes(b.try_into().expect("2 bytes")).to_f32()
                }),
                Dtype::BF16 => floats(shape, data, 2, true, |b| {
                    half::bf16::from_le_bytes(b.try_into().expect("2 bytes")).to_f32()
                }),
                Dtype::I64 => ints(shape, data, 8),
                Dtype::I32 => ints(shape, data, 4),
                Dtype::I16 => ints(shape, data, 2),
                Dtype::I8 | Dtype::U8 | Dtype::BOOL => ints(shape, data, 1),
                other => {
                    return Err(FileError::Dtype {
                        file: shown.to_string(),
                        name: name.to_string(),
                        dtype: format!("{other:?}"),
                    }
                    .into())
                }
            };
            return Ok(Some(value));
        }
        let Some(raw) = self.metadata.get(name) else {
            return Ok(None);
        };
        Ok(Some(metadata_value(raw)))
    }
}

fn floats(
    shape: Vec<usize>,
    data: &[u8],
    size: usize,
    half: bool,
    read: impl Fn(&[u8]) -> f32,
) -> Value {
    Value::Floats {
        shape,
        values: data.chunks_exact(size).map(read).collect(),
        half,
    }
}

fn ints(shape: Vec<usize>, data: &[u8], size: usize) -> Value {
    let values = data
        .chunks_exact(size)
        .map(|b| match size {
            8 => i64::from_le_bytes(b.try_into().expect("8 bytes")),
            4 => i64::from(i32::from_le_bytes(b.try_into().expect("4 bytes"))),
            2 => i64::from(i16::from_le_bytes(b.try_into().expect("2 bytes"))),
            _ => i64::from(b[0]),
        })
        .collect();
    Value::Ints { shape, values }
}

/// A `__metadata__` string as a value: a JSON array of strings, a JSON array of integers (null
/// standing for −1, "none"), an integer, or else the string itself.
fn metadata_value(raw: &str) -> Value {
    if let Ok(strings) = serde_json::from_str::<Vec<String>>(raw) {
        return Value::Strings {
            shape: vec![strings.len()],
            values: strings,
        };
    }
    if let Ok(ints) = serde_json::from_str::<Vec<Option<i64>>>(raw) {
        return Value::Ints {
            shape: vec![ints.len()],
            values: ints.into_iter().map(|i| i.unwrap_or(-1)).collect(),
        };
    }
    if let Ok(i) = raw.trim().parse::<i64>() {
        return Value::Ints {
            shape: vec![],
            values: vec![i],
        };
    }
    Value::Strings {
        shape: vec![],
        values: vec![raw.to_string()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_values() {
        assert_eq!(
            metadata_value(r#"["[CLS]", "a"]"#),
            Value::Strings {
                shape: vec![2],
                values: vec!["[CLS]".into(), "a".into()]
            }
        );
        assert_eq!(
            metadata_value("[0, null, 2]"),
            Value::Ints {
                shape: vec![3],
                values: vec![0, -1, 2]
            }
        );
        assert_eq!(
            metadata_value("7"),
            Value::Ints {
                shape: vec![],
                values: vec![7]
            }
        );
        assert_eq!(
            metadata_value("The cat."),
            Value::Strings {
                shape: vec![],
                values: vec!["The cat.".into()]
            }
        );
    }

    #[test]
    fn header_sniffing() {
        let mut head = 10u64.to_le_bytes().to_vec();
        head.push(b'{');
        assert!(looks_like_safetensors(&head, 100));
        assert!(!looks_like_safetensors(&head, 12));
        head[8] = b'x';
        assert!(!looks_like_safetensors(&head, 100));
    }
}
