//! A capture saved layer by layer (`crate::save`, `docs/save.md`), read back reading only the
//! layers asked for: the header is read (at most [`MAX_HEADER`] bytes), and then each wanted
//! layer's bytes with positioned reads, converted a chunk at a time. Nothing else of the file
//! is touched, so a file whose other layers are damaged or cut off still gives the asked ones.
//!
//! Each kind's metadata is a version-2 JSON body without its attention, read by the JSON
//! reader (`json::saved_body`), so a saved capture labels its tokens exactly as the JSON export
//! of the same run does.

use std::fs::File;
use std::path::Path;

use serde_json::Value;

use crate::attention::AttentionKind;
use crate::save::{tensor_name, FORMAT, FORMAT_VERSION, MAX_HEADER};

use super::budget::{Declared, Estimate};
use super::store::{Assembled, Plan, Skipped};
use super::{check, json, ImportError};

/// Weights converted per read.
const CHUNK: usize = 1 << 18;

/// Read `path` if it is a saved capture (its `__metadata__` says `format` is [`FORMAT`]):
/// the layers `layers` (the model's numbers; `None`: every layer saved) of every kind, or of
/// `plan.only`'s kind alone. `Ok(None)`: a safetensors file of another kind.
pub fn read(
    path: &Path,
    shown: &str,
    plan: &Plan,
    layers: Option<&[usize]>,
) -> Result<Option<Assembled>, ImportError> {
    let io = |source| ImportError::Io {
        path: shown.to_string(),
        source,
    };
    let file = File::open(path).map_err(io)?;
    let file_len = file.metadata().map_err(io)?.len();
    let bad = |m: String| ImportError::invalid(format!("{shown}: {m}"));
    let mut len = [0u8; 8];
    read_at(&file, &mut len, 0).map_err(io)?;
    let header_len = u64::from_le_bytes(len);
    if header_len > MAX_HEADER.min(file_len.saturating_sub(8)) {
        return Err(bad(format!(
            "its safetensors header claims {header_len} bytes, more than the file ({file_len} \
             bytes) or the {MAX_HEADER} a header may hold; the file is damaged"
        )));
    }
    let mut header = vec![0u8; header_len as usize];
    read_at(&file, &mut header, 8).map_err(io)?;
    let header: Value = serde_json::from_slice(&header)
        .map_err(|e| bad(format!("its safetensors header is not JSON: {e}")))?;
    let meta = header.get("__metadata__").and_then(Value::as_object);
    let field = |name: &str| meta.and_then(|m| m.get(name)).and_then(Value::as_str);
    if field("format") != Some(FORMAT) {
        return Ok(None);
    }
    let version = field("format_version").unwrap_or("");
    if version
        .parse::<u32>()
        .map_or(true, |v| v == 0 || v > FORMAT_VERSION)
    {
        return Err(bad(format!(
            "format version `{version}` of a saved capture is not one this attnviz reads (1 to \
             {FORMAT_VERSION}); a newer attnviz wrote it, so update attnviz"
        )));
    }
    let kinds: Vec<AttentionKind> = field("kinds")
        .and_then(|k| serde_json::from_str(k).ok())
        .filter(|k: &Vec<AttentionKind>| !k.is_empty())
        .ok_or_else(|| bad("its metadata names no `kinds`".into()))?;
    let data_start = 8 + header_len;
    let only = plan.only.filter(|k| kinds.contains(k));
    let mut estimate = Estimate::default();
    let mut wanted = Vec::new();
    let mut skipped = Vec::new();
    for &kind in &kinds {
        let name = kind.as_str();
        let shown_kind = format!("{shown}: {name}");
        let body = field(name).ok_or_else(|| bad(format!("its metadata has no `{name}` body")))?;
        if only.is_some_and(|k| k != kind) {
            let (queries, text) = json::saved_tokens(body, &shown_kind)?;
            skipped.push(Skipped {
                kind,
                queries,
                text,
            });
            continue;
        }
        let parsed: Value = serde_json::from_str(body)
            .map_err(|e| bad(format!("its `{name}` metadata is not JSON: {e}")))?;
        let numbers: Vec<usize> = parsed
            .get("layer_numbers")
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .ok_or_else(|| bad(format!("its `{name}` metadata has no `layer_numbers`")))?;
        let count = |field: &str| parsed.get(field).and_then(Value::as_array).map(Vec::len);
        let heads = parsed
            .pointer("/model/heads")
            .and_then(Value::as_u64)
            .ok_or_else(|| bad(format!("its `{name}` metadata has no `model.heads`")))?
            as usize;
        let queries =
            count("tokens").ok_or_else(|| bad(format!("its `{name}` metadata has no `tokens`")))?;
        let keys = if kind == AttentionKind::Cross {
            count("key_tokens")
                .ok_or_else(|| bad(format!("its `{name}` metadata has no `key_tokens`")))?
        } else {
            queries
        };
        let keep: Vec<usize> = match layers {
            None => (0..numbers.len()).collect(),
            Some(asked) => asked
                .iter()
                .map(|l| {
                    numbers.iter().position(|n| n == l).ok_or_else(|| {
                        bad(format!(
                            "it holds layers {} of the {name} attention; layer {l} is not among \
                             them",
                            crate::attention::layer_list(&numbers)
                        ))
                    })
                })
                .collect::<Result<_, _>>()?,
        };
        let shape = [keep.len(), heads, queries, keys];
        check::size(&shown_kind, &shape)?;
        let mut tensors = Vec::new();
        for &i in &keep {
            let tensor = tensor_name(kind, numbers[i]);
            let entry = header.get(&tensor).ok_or_else(|| {
                bad(format!(
                    "its metadata lists layer {} but it has no tensor {tensor}",
                    numbers[i]
                ))
            })?;
            tensors.push(locate(
                entry,
                &tensor,
                [heads, queries, keys],
                data_start,
                file_len,
                shown,
            )?);
        }
        let declared = Declared {
            shape: shape.to_vec(),
            decoded: 4 * shape.iter().map(|&d| d as u64).product::<u64>(),
            transient: 4 * CHUNK as u64,
        };
        estimate.add_attention(&format!("{name} attention"), &declared);
        wanted.push((kind, shown_kind, body, shape, tensors, keep));
    }
    estimate.check(shown, plan.cost, plan.budget)?;
    let mut arrays = Vec::new();
    for (kind, shown_kind, body, shape, tensors, keep) in wanted {
        let count = shape.iter().product::<usize>();
        let mut weights = Vec::with_capacity(count);
        let mut half = false;
        for t in &tensors {
            half |= t.dtype != Dtype::F32;
            read_weights(&file, t, &mut weights).map_err(io)?;
        }
        let mut a = json::saved_body(body, &shown_kind, shape, weights, &keep)?;
        a.kind = kind;
        if half {
            a.tolerance = a.tolerance.max(2e-2);
        }
        arrays.push(a);
    }
    Ok(Some(Assembled {
        arrays,
        skipped,
        held: kinds,
    }))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dtype {
    F32,
    F16,
    Bf16,
}

impl Dtype {
    fn size(self) -> u64 {
        match self {
            Dtype::F32 => 4,
            Dtype::F16 | Dtype::Bf16 => 2,
        }
    }
}

/// Where one layer's weights lie in the file.
struct Located {
    dtype: Dtype,
    offset: u64,
    count: usize,
}

/// A tensor's header entry checked against the shape the metadata gives and the file's size.
fn locate(
    entry: &Value,
    tensor: &str,
    shape: [usize; 3],
    data_start: u64,
    file_len: u64,
    shown: &str,
) -> Result<Located, ImportError> {
    let bad = |m: String| ImportError::invalid(format!("{shown}: {tensor} {m}"));
    let dtype = match entry.get("dtype").and_then(Value::as_str) {
        Some("F32") => Dtype::F32,
        Some("F16") => Dtype::F16,
        Some("BF16") => Dtype::Bf16,
        other => {
            return Err(bad(format!(
                "is {}; a saved capture holds F32, F16 or BF16 weights",
                other.unwrap_or("of no dtype")
            )))
        }
    };
    let got: Option<Vec<usize>> = entry
        .get("shape")
        .and_then(|s| serde_json::from_value(s.clone()).ok());
    if got.as_deref() != Some(&shape[..]) {
        return Err(bad(format!(
            "has shape {}, but the metadata gives {} heads × {} queries × {} keys; the file is \
             damaged",
            got.map_or("none".into(), |g| format!("{g:?}")),
            shape[0],
            shape[1],
            shape[2]
        )));
    }
    let offsets: Option<[u64; 2]> = entry
        .get("data_offsets")
        .and_then(|s| serde_json::from_value(s.clone()).ok());
    let Some([begin, end]) = offsets else {
        return Err(bad("has no data_offsets [begin, end]".into()));
    };
    let count = shape.iter().map(|&d| d as u64).product::<u64>();
    if end < begin || end - begin != count.saturating_mul(dtype.size()) {
        return Err(bad(format!(
            "spans bytes {begin}–{end}, not the {} its shape needs; the file is damaged",
            count.saturating_mul(dtype.size())
        )));
    }
    if data_start.saturating_add(end) > file_len {
        return Err(bad(format!(
            "runs past the end of the file (to byte {}, of {file_len}): the file is cut off",
            data_start.saturating_add(end)
        )));
    }
    Ok(Located {
        dtype,
        offset: data_start + begin,
        count: count as usize,
    })
}

/// Append one layer's weights, read and converted a chunk at a time.
fn read_weights(file: &File, t: &Located, out: &mut Vec<f32>) -> std::io::Result<()> {
    let size = t.dtype.size() as usize;
    let mut buf = vec![0u8; CHUNK * size];
    let mut done = 0usize;
    while done < t.count {
        let n = (t.count - done).min(CHUNK);
        let bytes = &mut buf[..n * size];
        read_at(file, bytes, t.offset + (done * size) as u64)?;
        match t.dtype {
            Dtype::F32 => out.extend(
                bytes
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes"))),
            ),
            Dtype::F16 => out.extend(
                bytes
                    .chunks_exact(2)
                    .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32()),
            ),
            Dtype::Bf16 => out.extend(
                bytes
                    .chunks_exact(2)
                    .map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32()),
            ),
        }
        done += n;
    }
    Ok(())
}

#[cfg(unix)]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

#[cfg(not(unix))]
fn read_at(mut file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    file.seek(SeekFrom::Start(offset))?;
    file.read_exact(buf)
}
