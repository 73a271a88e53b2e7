//! A capture saved layer by layer (`crate::save`, `docs/save.md`), read back reading only the
//! layers asked for: the header is read (at most [`MAX_HEADER`] bytes), and then each wanted
//! layer's bytes with positioned reads, converted a chunk at a time. Nothing else of the file
//! is touched, so a file whose other layers are damaged or cut off still gives the asked ones.
//!
//! Each kind's metadata is a version-2 JSON body without its attention, read by the JSON
//! reader (`json::SavedBody`), so a saved capture labels its tokens exactly as the JSON export
//! of the same run does.

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;

use crate::attention::AttentionKind;
use crate::save::{tensor_name, FORMAT, FORMAT_VERSION, MAX_HEADER};

use super::budget::{Declared, Estimate};
use super::store::{Assembled, Plan, Skipped};
use super::{check, json, ImportError};

/// Weights converted per read.
const CHUNK: usize = 1 << 18;

/// What parsing a header of `n` bytes holds at most, per byte of it: the metadata's strings
/// (at most the header's bytes), one record per tensor (about 100 bytes for the 60 or more a
/// record takes in the header), and the reader's buffer.
const HEADER_COST: u64 = 3;

/// A saved capture that cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {problem}")]
pub struct SavedError {
    /// The file.
    pub file: String,
    /// What is wrong with it.
    pub problem: SavedProblem,
}

/// What is wrong with a saved capture (displays after the file's name).
#[derive(Debug, thiserror::Error)]
pub enum SavedProblem {
    /// A header longer than the file or the bound.
    #[error("its safetensors header claims {claims} bytes, more than the file ({file_len} bytes) or the {MAX_HEADER} a header may hold; the file is damaged")]
    HeaderTooLong {
        /// The length it claims.
        claims: u64,
        /// The file's size.
        file_len: u64,
    },
    /// A header that is not JSON.
    #[error("its safetensors header is not JSON: {0}")]
    HeaderJson(#[source] serde_json::Error),
    /// A format version this attnviz does not read.
    #[error("format version `{0}` of a saved capture is not one this attnviz reads (1 to {FORMAT_VERSION}); a newer attnviz wrote it, so update attnviz")]
    Version(String),
    /// No `kinds` in the metadata.
    #[error("its metadata names no `kinds`")]
    NoKinds,
    /// Two tensors over the same bytes.
    #[error("tensors {first} and {second} share the bytes from {begin} to {end}; each layer's weights are its own, so the file is damaged")]
    Overlap {
        /// The tensor that starts first.
        first: String,
        /// The other.
        second: String,
        /// Where the second begins.
        begin: u64,
        /// Where the first ends.
        end: u64,
    },
    /// A kind listed without its body.
    #[error("its metadata has no `{0}` body")]
    NoBody(&'static str),
    /// A body without a field it needs.
    #[error("its `{kind}` metadata has no `{field}`")]
    NoField {
        /// The attention kind.
        kind: &'static str,
        /// The field.
        field: &'static str,
    },
    /// A layer asked for that the capture does not hold.
    #[error("it holds layers {} of the {kind} attention; layer {layer} is not among them", crate::attention::layer_list(.held))]
    NoLayer {
        /// The layers it holds.
        held: Vec<usize>,
        /// The attention kind.
        kind: &'static str,
        /// The layer asked for.
        layer: usize,
    },
    /// A layer listed without its tensor.
    #[error("its metadata lists layer {layer} but it has no tensor {tensor}")]
    NoTensor {
        /// The layer.
        layer: usize,
        /// The tensor's name.
        tensor: String,
    },
    /// A tensor that does not fit the metadata or the file.
    #[error("{tensor} {fault}")]
    Tensor {
        /// The tensor's name.
        tensor: String,
        /// What is wrong with it.
        fault: TensorFault,
    },
}

/// What is wrong with one tensor of a saved capture (displays after its name).
#[derive(Debug, thiserror::Error)]
pub enum TensorFault {
    /// Another dtype than F32, F16 or BF16.
    #[error("is of another dtype; a saved capture holds F32, F16 or BF16 weights")]
    Dtype,
    /// Another shape than the metadata gives.
    #[error("has shape {shape:?}, but the metadata gives {heads} heads × {queries} queries × {keys} keys; the file is damaged")]
    Shape {
        /// Its shape.
        shape: Vec<u64>,
        /// Heads.
        heads: usize,
        /// Queries.
        queries: usize,
        /// Keys.
        keys: usize,
    },
    /// Offsets that do not span its shape's bytes.
    #[error("spans bytes {begin}–{end}, not the {needs} its shape needs; the file is damaged")]
    Span {
        /// Its first byte.
        begin: u64,
        /// One past its last.
        end: u64,
        /// Bytes its shape needs.
        needs: u64,
    },
    /// Bytes past the end of the file.
    #[error("runs past the end of the file (to byte {to}, of {file_len}): the file is cut off")]
    PastEnd {
        /// Where it ends.
        to: u64,
        /// The file's size.
        file_len: u64,
    },
}

/// Read `path` if it is a saved capture (its `__metadata__` says `format` is [`FORMAT`]):
/// the layers `layers` (the model's numbers; `None`: every layer saved) of every kind, or of
/// `plan.only`'s kind alone. `Ok(None)`: a safetensors file of another kind.
///
/// The header is parsed as it is read, into the metadata's strings and one small record per
/// tensor, never into a JSON tree (a 100 MB header took 1.1–2.0 GiB as `serde_json::Value`);
/// what it holds is counted in the estimate, and checked before it is parsed.
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
    let bad = |problem: SavedProblem| -> ImportError {
        SavedError {
            file: shown.to_string(),
            problem,
        }
        .into()
    };
    let mut len = [0u8; 8];
    read_at(&file, &mut len, 0).map_err(io)?;
    let header_len = u64::from_le_bytes(len);
    if header_len > MAX_HEADER.min(file_len.saturating_sub(8)) {
        return Err(bad(SavedProblem::HeaderTooLong {
            claims: header_len,
            file_len,
        }));
    }
    let mut estimate = Estimate::default();
    estimate.add_text(header_len.saturating_mul(HEADER_COST));
    header_fits(&estimate, shown, header_len, plan)?;
    let header = read_header(&file, header_len).map_err(|e| bad(SavedProblem::HeaderJson(e)))?;
    let field = |name: &str| header.metadata.get(name).map(String::as_str);
    if field("format") != Some(FORMAT) {
        return Ok(None);
    }
    let version = field("format_version").unwrap_or("");
    if version
        .parse::<u32>()
        .map_or(true, |v| v == 0 || v > FORMAT_VERSION)
    {
        return Err(bad(SavedProblem::Version(version.to_string())));
    }
    let kinds: Vec<AttentionKind> = field("kinds")
        .and_then(|k| serde_json::from_str(k).ok())
        .filter(|k: &Vec<AttentionKind>| !k.is_empty())
        .ok_or_else(|| bad(SavedProblem::NoKinds))?;
    check_overlaps(&header.tensors).map_err(bad)?;
    let data_start = 8 + header_len;
    let only = plan.only.filter(|k| kinds.contains(k));
    let mut wanted = Vec::new();
    let mut skipped = Vec::new();
    for &kind in &kinds {
        let name = kind.as_str();
        let shown_kind = format!("{shown}: {name}");
        let body = field(name).ok_or_else(|| bad(SavedProblem::NoBody(name)))?;
        json::start_text_budget(plan.budget.bytes.saturating_sub(estimate.total(plan.cost)));
        let parsed = json::SavedBody::parse(body, &shown_kind);
        let text_cost = json::text_charged();
        if json::end_text_budget() {
            return Err(ImportError::TooBig {
                what: format!(
                    "{shown_kind}: its token labels and texts (more than {})",
                    crate::model::format_bytes(text_cost / json::TEXT_COST)
                ),
                needs: estimate.total(plan.cost).saturating_add(text_cost),
                budget: plan.budget,
            });
        }
        estimate.add_text(text_cost);
        let parsed = parsed?;
        if only.is_some_and(|k| k != kind) {
            let (queries, text) = parsed.into_tokens(&shown_kind)?;
            skipped.push(Skipped {
                kind,
                queries,
                text,
            });
            continue;
        }
        let numbers: Vec<usize> = parsed
            .layer_numbers()
            .ok_or_else(|| {
                bad(SavedProblem::NoField {
                    kind: name,
                    field: "layer_numbers",
                })
            })?
            .to_vec();
        let heads = parsed.heads().ok_or_else(|| {
            bad(SavedProblem::NoField {
                kind: name,
                field: "model.heads",
            })
        })?;
        let queries = parsed.queries().ok_or_else(|| {
            bad(SavedProblem::NoField {
                kind: name,
                field: "tokens",
            })
        })?;
        let keys = if kind == AttentionKind::Cross {
            parsed.keys().ok_or_else(|| {
                bad(SavedProblem::NoField {
                    kind: name,
                    field: "key_tokens",
                })
            })?
        } else {
            queries
        };
        let keep: Vec<usize> = match layers {
            None => (0..numbers.len()).collect(),
            Some(asked) => asked
                .iter()
                .map(|l| {
                    numbers.iter().position(|n| n == l).ok_or_else(|| {
                        bad(SavedProblem::NoLayer {
                            held: numbers.clone(),
                            kind: name,
                            layer: *l,
                        })
                    })
                })
                .collect::<Result<_, _>>()?,
        };
        let shape = [keep.len(), heads, queries, keys];
        check::size(&shown_kind, &shape)?;
        let mut tensors = Vec::new();
        for &i in &keep {
            let tensor = tensor_name(kind, numbers[i]);
            let record = header.tensors.get(&tensor).ok_or_else(|| {
                bad(SavedProblem::NoTensor {
                    layer: numbers[i],
                    tensor: tensor.clone(),
                })
            })?;
            tensors.push(locate(
                record,
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
        wanted.push((kind, shown_kind, parsed, shape, tensors, keep));
    }
    estimate.check(shown, plan.cost, plan.budget)?;
    drop(header);
    let mut arrays = Vec::new();
    for (kind, shown_kind, parsed, shape, tensors, keep) in wanted {
        let count = shape.iter().product::<usize>();
        let mut weights = Vec::with_capacity(count);
        let mut half = false;
        for t in &tensors {
            half |= t.dtype != Dtype::F32;
            read_weights(&file, t, &mut weights).map_err(io)?;
        }
        let mut a = parsed.into_arrays(&shown_kind, shape, weights, &keep)?;
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

/// The header of `header_len` bytes after the file's first 8, parsed as it is read.
fn read_header(file: &File, header_len: u64) -> Result<Header, serde_json::Error> {
    use std::io::{Read, Seek, SeekFrom};
    let mut reader = file;
    reader
        .seek(SeekFrom::Start(8))
        .map_err(serde_json::Error::io)?;
    let limited = std::io::BufReader::with_capacity(1 << 16, reader.take(header_len));
    let mut de = serde_json::Deserializer::from_reader(limited);
    let header = Header::deserialize(&mut de)?;
    de.end()?;
    Ok(header)
}

/// Refuse a header whose parse alone would exceed the budget, before it is parsed.
fn header_fits(
    estimate: &Estimate,
    shown: &str,
    header_len: u64,
    plan: &Plan,
) -> Result<(), ImportError> {
    let needs = estimate.total(Default::default());
    if needs <= plan.budget.bytes {
        return Ok(());
    }
    Err(ImportError::TooBig {
        what: format!(
            "{shown}: its safetensors header ({})",
            crate::model::format_bytes(header_len)
        ),
        needs,
        budget: plan.budget,
    })
}

/// The parts of a safetensors header a saved capture needs: the metadata's strings, and each
/// tensor's record.
struct Header {
    metadata: HashMap<String, String>,
    tensors: HashMap<String, Record>,
}

/// A tensor's record in the header.
#[derive(Deserialize)]
struct Record {
    dtype: DtypeName,
    shape: Vec<u64>,
    data_offsets: [u64; 2],
}

/// A record's `dtype`: the ones a saved capture holds, or another.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
enum DtypeName {
    F32,
    F16,
    BF16,
    #[serde(other)]
    Other,
}

impl<'de> Deserialize<'de> for Header {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Entries;
        impl<'de> Visitor<'de> for Entries {
            type Value = Header;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object of tensor records and `__metadata__`")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Header, A::Error> {
                let mut header = Header {
                    metadata: HashMap::new(),
                    tensors: HashMap::new(),
                };
                while let Some(key) = map.next_key::<String>()? {
                    if key == "__metadata__" {
                        if !header.metadata.is_empty() {
                            return Err(de::Error::custom("`__metadata__` appears twice"));
                        }
                        header.metadata = map.next_value()?;
                        continue;
                    }
                    let record: Record = map
                        .next_value()
                        .map_err(|e: A::Error| de::Error::custom(format!("tensor {key}: {e}")))?;
                    if header.tensors.insert(key.clone(), record).is_some() {
                        return Err(de::Error::custom(format!("tensor {key} appears twice")));
                    }
                }
                Ok(header)
            }
        }
        d.deserialize_map(Entries)
    }
}

/// Refuse tensors whose bytes overlap: each layer is its own tensor, so two records over the
/// same bytes would draw one layer's weights as another's.
fn check_overlaps(tensors: &HashMap<String, Record>) -> Result<(), SavedProblem> {
    let mut spans: Vec<(u64, u64, &str)> = tensors
        .iter()
        .map(|(name, r)| (r.data_offsets[0], r.data_offsets[1], name.as_str()))
        .filter(|&(begin, end, _)| end > begin)
        .collect();
    spans.sort_unstable();
    for pair in spans.windows(2) {
        let ((_, end, a), (begin, _, b)) = (pair[0], pair[1]);
        if begin < end {
            return Err(SavedProblem::Overlap {
                first: a.to_string(),
                second: b.to_string(),
                begin,
                end,
            });
        }
    }
    Ok(())
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

/// A tensor's header record checked against the shape the metadata gives and the file's size.
fn locate(
    record: &Record,
    tensor: &str,
    shape: [usize; 3],
    data_start: u64,
    file_len: u64,
    shown: &str,
) -> Result<Located, ImportError> {
    let bad = |fault: TensorFault| -> ImportError {
        SavedError {
            file: shown.to_string(),
            problem: SavedProblem::Tensor {
                tensor: tensor.to_string(),
                fault,
            },
        }
        .into()
    };
    let dtype = match record.dtype {
        DtypeName::F32 => Dtype::F32,
        DtypeName::F16 => Dtype::F16,
        DtypeName::BF16 => Dtype::Bf16,
        DtypeName::Other => return Err(bad(TensorFault::Dtype)),
    };
    let want = shape.map(|d| d as u64);
    if record.shape != want {
        return Err(bad(TensorFault::Shape {
            shape: record.shape.to_vec(),
            heads: shape[0],
            queries: shape[1],
            keys: shape[2],
        }));
    }
    let [begin, end] = record.data_offsets;
    let count = want.iter().product::<u64>();
    if end < begin || end - begin != count.saturating_mul(dtype.size()) {
        return Err(bad(TensorFault::Span {
            begin,
            end,
            needs: count.saturating_mul(dtype.size()),
        }));
    }
    if data_start.saturating_add(end) > file_len {
        return Err(bad(TensorFault::PastEnd {
            to: data_start.saturating_add(end),
            file_len,
        }));
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
