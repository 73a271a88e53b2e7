//! `pytorch_model.bin`: the zip format of `torch.save` (torch ≥ 1.6) and its legacy pre-1.6
//! stream, read through our bounded unpickler ([`super::pickle`]), never through `torch.load`'s
//! semantics: the only callables understood are torch's tensor-rebuild functions, and they are
//! interpreted, not called.
//!
//! Every number in the pickle is checked against the file before it is used: a storage must lie
//! inside the file, a tensor inside its storage, and no tensor may hold more bytes than the file
//! does (a stride-0 view could otherwise expand a few bytes into terabytes).
//!
//! Layouts:
//! - zip: `PREFIX/data.pkl` (the state dict, storages as persistent ids
//!   `('storage', torch.FloatStorage, KEY, 'cpu', NUMEL)`), one uncompressed entry
//!   `PREFIX/data/KEY` per storage, `PREFIX/byteorder`.
//! - legacy (torch/serialization.py `_legacy_save`): pickle(magic number), pickle(protocol
//!   version), pickle(sys_info), pickle(state dict, persistent ids
//!   `('storage', TYPE, KEY, LOCATION, NUMEL, VIEW_METADATA)`), pickle(sorted storage keys); then
//!   per key, in that order, an int64 element count and the storage's bytes.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};

use super::pickle::{self, Budget, Limits, Value};

mod problem;

pub use problem::{BinError, BinProblem, RecordProblem};

/// Which of the two formats a file is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// torch ≥ 1.6: a zip archive.
    Zip,
    /// Before torch 1.6: a stream of pickles followed by the raw storages.
    Legacy,
}

fn fail<T>(format: Format, problem: BinProblem) -> Result<T, BinError> {
    Err(BinError {
        format: Some(format),
        problem,
    })
}

/// A storage's element type, from its class (`torch.FloatStorage`, …).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StorageType {
    /// `FloatStorage`.
    F32,
    /// `DoubleStorage`.
    F64,
    /// `HalfStorage`.
    F16,
    /// `BFloat16Storage`.
    BF16,
    /// `LongStorage`.
    I64,
    /// `IntStorage`.
    I32,
    /// `ShortStorage`.
    I16,
    /// `CharStorage`.
    I8,
    /// `ByteStorage`.
    U8,
    /// `BoolStorage`.
    Bool,
}

impl StorageType {
    fn from_class(name: &str) -> Option<StorageType> {
        Some(match name {
            "FloatStorage" => StorageType::F32,
            "DoubleStorage" => StorageType::F64,
            "HalfStorage" => StorageType::F16,
            "BFloat16Storage" => StorageType::BF16,
            "LongStorage" => StorageType::I64,
            "IntStorage" => StorageType::I32,
            "ShortStorage" => StorageType::I16,
            "CharStorage" => StorageType::I8,
            "ByteStorage" => StorageType::U8,
            "BoolStorage" => StorageType::Bool,
            _ => return None,
        })
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            StorageType::F64 | StorageType::I64 => 8,
            StorageType::F32 | StorageType::I32 => 4,
            StorageType::F16 | StorageType::BF16 | StorageType::I16 => 2,
            StorageType::I8 | StorageType::U8 | StorageType::Bool => 1,
        }
    }

    /// Whether it holds floating-point numbers.
    pub fn is_float(self) -> bool {
        matches!(
            self,
            StorageType::F32 | StorageType::F64 | StorageType::F16 | StorageType::BF16
        )
    }

    /// torch's name for it (`torch.float32`, …).
    pub fn name(self) -> &'static str {
        match self {
            StorageType::F32 => "torch.float32",
            StorageType::F64 => "torch.float64",
            StorageType::F16 => "torch.float16",
            StorageType::BF16 => "torch.bfloat16",
            StorageType::I64 => "torch.int64",
            StorageType::I32 => "torch.int32",
            StorageType::I16 => "torch.int16",
            StorageType::I8 => "torch.int8",
            StorageType::U8 => "torch.uint8",
            StorageType::Bool => "torch.bool",
        }
    }

    fn candle(self) -> Option<DType> {
        Some(match self {
            StorageType::F32 => DType::F32,
            StorageType::F64 => DType::F64,
            StorageType::F16 => DType::F16,
            StorageType::BF16 => DType::BF16,
            StorageType::I64 => DType::I64,
            StorageType::I32 => DType::I32,
            StorageType::I16 => DType::I16,
            StorageType::U8 => DType::U8,
            StorageType::I8 | StorageType::Bool => return None,
        })
    }
}

/// Where one tensor's elements are.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Record {
    storage: String,
    dtype: StorageType,
    /// Elements in the storage, as its persistent id says.
    numel: u64,
    shape: Vec<usize>,
    stride: Vec<usize>,
    /// Offset into the storage, in elements.
    offset: usize,
}

/// A storage named by a persistent id: its type and element count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct StorageRef {
    dtype: StorageType,
    numel: u64,
}

/// A byte range of the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Region {
    start: u64,
    len: u64,
}

/// An open `pytorch_model.bin`: the shape and place of every tensor, checked against the file.
#[derive(Debug)]
pub struct TorchFile {
    path: PathBuf,
    format: Format,
    tensors: HashMap<String, Record>,
    regions: HashMap<String, Region>,
}

impl TorchFile {
    /// Open `path` (either format), with pickle limits derived from the file's size.
    pub fn open(path: &Path) -> Result<TorchFile, BinError> {
        Self::open_with(path, Limits::for_file)
    }

    /// [`TorchFile::open`] with the pickle limits `limits(file size)` (tests use small ones).
    pub fn open_with(
        path: &Path,
        limits: impl FnOnce(u64) -> Limits,
    ) -> Result<TorchFile, BinError> {
        let unknown = |problem: BinProblem| BinError {
            format: None,
            problem,
        };
        let mut file = File::open(path).map_err(|e| unknown(BinProblem::Io(e)))?;
        let len = file
            .metadata()
            .map_err(|e| unknown(BinProblem::Io(e)))?
            .len();
        let mut budget = Budget::new(limits(len));
        let mut head = [0u8; 4];
        file.read_exact(&mut head)
            .map_err(|_| unknown(BinProblem::TooShort))?;
        file.rewind().map_err(|e| unknown(BinProblem::Io(e)))?;
        let format = if head == *b"PK\x03\x04" {
            Format::Zip
        } else if head[0] == 0x80 {
            Format::Legacy
        } else {
            return Err(unknown(BinProblem::NotTorch));
        };
        let (tensors, regions) = match format {
            Format::Zip => {
                let (state, regions) = open_zip(&file, len, &mut budget)?;
                let (tensors, _) = records(format, &state)?;
                (tensors, regions)
            }
            Format::Legacy => {
                let stream = open_legacy(&file, &mut budget)?;
                let (tensors, storages) = records(format, &stream.state)?;
                let regions = legacy_regions(&file, len, &stream, &storages)?;
                (tensors, regions)
            }
        };
        let file = TorchFile {
            path: path.to_path_buf(),
            format,
            tensors,
            regions,
        };
        file.check(len)?;
        Ok(file)
    }

    /// Which format the file is in.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Every tensor's name and shape.
    pub fn shapes(&self) -> impl Iterator<Item = (&str, &[usize])> {
        self.tensors
            .iter()
            .map(|(name, r)| (name.as_str(), r.shape.as_slice()))
    }

    /// The element type of tensor `name`.
    pub fn dtype(&self, name: &str) -> Option<StorageType> {
        self.tensors.get(name).map(|r| r.dtype)
    }

    /// Every tensor lies inside its storage, every storage inside the file, and no tensor holds
    /// more bytes than the file.
    fn check(&self, file_len: u64) -> Result<(), BinError> {
        for (name, r) in &self.tensors {
            let bad = |problem: RecordProblem| {
                fail(
                    self.format,
                    BinProblem::Tensor {
                        name: name.clone(),
                        problem,
                    },
                )
            };
            let Some(region) = self.regions.get(&r.storage) else {
                return bad(RecordProblem::StorageMissing {
                    storage: r.storage.clone(),
                });
            };
            let elem = r.dtype.size() as u64;
            if r.numel.checked_mul(elem).is_none_or(|b| b > region.len) {
                return bad(RecordProblem::StorageTooSmall {
                    storage: r.storage.clone(),
                    numel: r.numel,
                    bytes: region.len,
                });
            }
            let count = r
                .shape
                .iter()
                .try_fold(1u64, |acc, &d| acc.checked_mul(d as u64));
            match count.and_then(|c| c.checked_mul(elem)) {
                Some(bytes) if bytes <= file_len => {}
                _ => {
                    return bad(RecordProblem::LargerThanFile {
                        shape: r.shape.as_slice().into(),
                        file_len,
                    })
                }
            }
            if count == Some(0) {
                continue;
            }
            // The last element the tensor reaches: offset + Σ (size − 1)·stride.
            let last = r
                .shape
                .iter()
                .zip(&r.stride)
                .try_fold(r.offset as u64, |acc, (&d, &s)| {
                    (d as u64 - 1)
                        .checked_mul(s as u64)
                        .and_then(|x| acc.checked_add(x))
                });
            if last.is_none_or(|last| last >= r.numel) {
                return bad(RecordProblem::PastStorage {
                    shape: r.shape.as_slice().into(),
                    stride: r.stride.as_slice().into(),
                    offset: r.offset,
                    numel: r.numel,
                });
            }
        }
        Ok(())
    }

    /// Tensor `name` as stored (its own type), or `None` if the file has no such tensor.
    pub fn read(&self, name: &str) -> Result<Option<Tensor>, TensorReadError> {
        let Some(r) = self.tensors.get(name) else {
            return Ok(None);
        };
        let dtype = r
            .dtype
            .candle()
            .ok_or(TensorReadError::Unsupported(r.dtype.name()))?;
        let region = self.regions[&r.storage];
        let elem = r.dtype.size();
        let count: usize = r.shape.iter().product();
        let mut file = File::open(&self.path).map_err(TensorReadError::Io)?;
        let bytes = if count == 0 {
            Vec::new()
        } else if is_contiguous(&r.shape, &r.stride) {
            let mut bytes = vec![0u8; count * elem];
            file.seek(SeekFrom::Start(region.start + (r.offset * elem) as u64))
                .and_then(|_| file.read_exact(&mut bytes))
                .map_err(TensorReadError::Io)?;
            bytes
        } else {
            // A strided view (a transposed tensor saved as is): read the span it covers, then
            // gather its elements in row-major order. `check` bounded the span by the storage.
            let last: usize = r.offset
                + r.shape
                    .iter()
                    .zip(&r.stride)
                    .map(|(&d, &s)| (d - 1) * s)
                    .sum::<usize>();
            let mut span = vec![0u8; (last - r.offset + 1) * elem];
            file.seek(SeekFrom::Start(region.start + (r.offset * elem) as u64))
                .and_then(|_| file.read_exact(&mut span))
                .map_err(TensorReadError::Io)?;
            gather(&span, &r.shape, &r.stride, elem)
        };
        Tensor::from_raw_buffer(&bytes, dtype, &r.shape, &Device::Cpu)
            .map(Some)
            .map_err(|e| TensorReadError::Candle(Box::new(super::CandleError(e))))
    }
}

/// Why a tensor of a `.bin` checkpoint could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TensorReadError {
    /// A storage type candle does not hold.
    #[error("type {0} is not supported")]
    Unsupported(&'static str),
    /// The file could not be read.
    #[error("{0}")]
    Io(#[source] std::io::Error),
    /// candle could not make the tensor.
    #[error(transparent)]
    Candle(Box<super::CandleError>),
}

/// Whether `stride` is the row-major stride of `shape` (dimensions of size 1 may have any).
fn is_contiguous(shape: &[usize], stride: &[usize]) -> bool {
    let mut expected = 1;
    for (&d, &s) in shape.iter().zip(stride).rev() {
        if d != 1 && s != expected {
            return false;
        }
        expected *= d;
    }
    true
}

/// The elements of a strided view, row-major; `span` starts at the view's first element.
fn gather(span: &[u8], shape: &[usize], stride: &[usize], elem: usize) -> Vec<u8> {
    let count: usize = shape.iter().product();
    let mut out = Vec::with_capacity(count * elem);
    let mut index = vec![0usize; shape.len()];
    for _ in 0..count {
        let at: usize = index.iter().zip(stride).map(|(i, s)| i * s).sum();
        out.extend_from_slice(&span[at * elem..][..elem]);
        for d in (0..shape.len()).rev() {
            index[d] += 1;
            if index[d] < shape[d] {
                break;
            }
            index[d] = 0;
        }
    }
    out
}

fn open_zip(
    file: &File,
    len: u64,
    budget: &mut Budget,
) -> Result<(Value, HashMap<String, Region>), BinError> {
    let err = |problem: BinProblem| BinError {
        format: Some(Format::Zip),
        problem,
    };
    let zip_err = |e: zip::result::ZipError| err(BinProblem::Zip(e));
    let mut archive = zip::ZipArchive::new(BufReader::new(file)).map_err(zip_err)?;
    let pkl = archive
        .file_names()
        .filter_map(Result::ok)
        .filter(|n| n.ends_with("data.pkl") && n.matches('/').count() <= 1)
        .min_by_key(|n| n.len())
        .map(|n| n.to_string());
    let Some(pkl) = pkl else {
        return fail(Format::Zip, BinProblem::NoDataPkl);
    };
    let prefix = pkl.strip_suffix("data.pkl").unwrap_or_default().to_string();
    let data_prefix = format!("{prefix}data/");
    let byteorder = format!("{prefix}byteorder");

    let mut regions = HashMap::new();
    let mut big_endian = false;
    for i in 0..archive.len() {
        let mut entry = archive.by_index_raw(i).map_err(zip_err)?;
        let name = entry.name().map_err(zip_err)?.to_string();
        if name == byteorder {
            let mut order = Vec::new();
            (&mut entry)
                .take(16)
                .read_to_end(&mut order)
                .map_err(|e| err(BinProblem::Io(e)))?;
            big_endian = order.trim_ascii() != b"little";
            continue;
        }
        let Some(key) = name.strip_prefix(&data_prefix) else {
            continue;
        };
        if entry.compression() != zip::CompressionMethod::Stored {
            return fail(
                Format::Zip,
                BinProblem::Compressed {
                    key: key.to_string(),
                },
            );
        }
        let start = entry.data_start().ok_or_else(|| {
            err(BinProblem::NoDataOffset {
                key: key.to_string(),
            })
        })?;
        let size = entry.compressed_size();
        if start.checked_add(size).is_none_or(|end| end > len) {
            return Err(err(BinProblem::BytesPastEnd {
                key: key.to_string(),
                size,
            }));
        }
        regions.insert(key.to_string(), Region { start, len: size });
    }
    if big_endian {
        return fail(Format::Zip, BinProblem::BigEndian);
    }

    let entry = archive.by_name(&pkl).map_err(zip_err)?;
    let mut reader = BufReader::new(entry.take(len));
    let state = pickle::read(&mut reader, budget).map_err(|e| err(e.into()))?;
    Ok((state, regions))
}

/// `pickle.dumps(0x1950a86a20f9469cfc6c, protocol=2)`: torch's legacy magic number.
const LEGACY_MAGIC: [u8; 15] = [
    0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, 0x2e,
];

/// The pickles of a legacy file, and where its storages begin.
struct LegacyStream {
    state: Value,
    keys: Value,
    data_start: u64,
}

fn open_legacy(file: &File, budget: &mut Budget) -> Result<LegacyStream, BinError> {
    let err = |problem: BinProblem| BinError {
        format: Some(Format::Legacy),
        problem,
    };
    let mut r = BufReader::new(file);
    let mut magic = [0u8; LEGACY_MAGIC.len()];
    if r.read_exact(&mut magic).is_err() || magic != LEGACY_MAGIC {
        return fail(Format::Legacy, BinProblem::NoMagic);
    }
    let mut next = || pickle::read(&mut r, budget).map_err(|e| err(e.into()));
    if next()?.as_int() != Some(1001) {
        return fail(Format::Legacy, BinProblem::UnknownProtocol);
    }
    if let Value::Dict(info) = next()? {
        let big_endian = info
            .items
            .iter()
            .any(|(k, v)| k.as_str() == Some("little_endian") && *v == Value::Bool(false));
        if big_endian {
            return fail(Format::Legacy, BinProblem::BigEndian);
        }
    }
    let state = next()?;
    let keys = next()?;
    let data_start = r.stream_position().map_err(|e| err(BinProblem::Io(e)))?;
    Ok(LegacyStream {
        state,
        keys,
        data_start,
    })
}

/// Where each storage of a legacy file lies: per key, in the order listed, an int64 element
/// count and the elements, whose size the storage's type (from the state dict) gives.
fn legacy_regions(
    file: &File,
    len: u64,
    stream: &LegacyStream,
    storages: &HashMap<String, StorageRef>,
) -> Result<HashMap<String, Region>, BinError> {
    let keys = match &stream.keys {
        Value::List(s) | Value::Tuple(s) => &s.items,
        _ => return fail(Format::Legacy, BinProblem::NoKeyList),
    };
    let mut r = BufReader::new(file);
    let mut regions = HashMap::new();
    let mut pos = stream.data_start;
    for key in keys {
        let Some(key) = key.as_str() else {
            return fail(Format::Legacy, BinProblem::KeyNotString);
        };
        let Some(storage) = storages.get(key) else {
            return fail(
                Format::Legacy,
                BinProblem::OrphanStorage {
                    key: key.to_string(),
                },
            );
        };
        let mut count = [0u8; 8];
        r.seek(SeekFrom::Start(pos))
            .and_then(|_| r.read_exact(&mut count))
            .or_else(|_| {
                fail(
                    Format::Legacy,
                    BinProblem::EndsBefore {
                        key: key.to_string(),
                    },
                )
            })?;
        let count = u64::from_le_bytes(count);
        let start = pos + 8;
        let end = count
            .checked_mul(storage.dtype.size() as u64)
            .and_then(|bytes| Some((bytes, bytes.checked_add(start)?)));
        match end {
            Some((bytes, end)) if end <= len => {
                regions.insert(key.to_string(), Region { start, len: bytes });
                pos = end;
            }
            _ => {
                return fail(
                    Format::Legacy,
                    BinProblem::ElementsPastEnd {
                        key: key.to_string(),
                        count,
                    },
                )
            }
        }
    }
    Ok(regions)
}

/// The tensor records of a state dict (`{name: tensor}`; values that are not tensors are
/// skipped), and the storages they name.
#[allow(clippy::type_complexity)]
fn records(
    format: Format,
    state: &Value,
) -> Result<(HashMap<String, Record>, HashMap<String, StorageRef>), BinError> {
    let Value::Dict(d) = state else {
        return fail(format, BinProblem::NotAStateDict { kind: state.kind() });
    };
    let mut tensors = HashMap::new();
    let mut storages: HashMap<String, StorageRef> = HashMap::new();
    for (key, value) in &d.items {
        let Some(name) = key.as_str() else { continue };
        match tensor_parts(value) {
            Ok(Some((storage, s, (shape, stride, offset)))) => {
                if storages
                    .insert(storage.clone(), s)
                    .is_some_and(|seen| seen != s)
                {
                    return fail(
                        format,
                        BinProblem::Tensor {
                            name: name.to_string(),
                            problem: RecordProblem::StorageTwoWays { storage },
                        },
                    );
                }
                tensors.insert(
                    name.to_string(),
                    Record {
                        storage,
                        dtype: s.dtype,
                        numel: s.numel,
                        shape,
                        stride,
                        offset,
                    },
                );
            }
            Ok(None) => {}
            Err(problem) => {
                return fail(
                    format,
                    BinProblem::Tensor {
                        name: name.to_string(),
                        problem,
                    },
                )
            }
        }
    }
    Ok((tensors, storages))
}

type Parts = (String, StorageRef, (Vec<usize>, Vec<usize>, usize));

/// If `value` is a tensor record, its storage and layout. The callables understood are torch's
/// own rebuild functions, matched by name; nothing is called.
fn tensor_parts(value: &Value) -> Result<Option<Parts>, RecordProblem> {
    let mut value = value;
    // Unwrap at most a few layers of Parameter / subclass wrappers.
    for _ in 0..4 {
        let Value::Call(call) = value else {
            return Ok(None);
        };
        let Some(callee) = call.callable.as_global() else {
            return Ok(None);
        };
        let args = call.args.as_tuple().unwrap_or_default();
        match callee {
            ("torch._utils", "_rebuild_parameter")
            | ("torch._utils", "_rebuild_parameter_with_state") => match args.first() {
                Some(data) => value = data,
                None => return Err(RecordProblem::ParameterWithoutData),
            },
            ("torch._tensor", "_rebuild_from_type_v2") => {
                // (func, type, args, state): the tensor is func(*args).
                let (Some(func @ Value::Global(_)), Some(Value::Tuple(inner))) =
                    (args.first(), args.get(2))
                else {
                    return Err(RecordProblem::FromTypeArguments);
                };
                return rebuild_tensor(func.as_global(), &inner.items);
            }
            _ => return rebuild_tensor(Some(callee), args),
        }
    }
    Err(RecordProblem::NestedTooDeep)
}

/// `torch._utils._rebuild_tensor_v2(storage, offset, size, stride, …)` (or the older
/// `_rebuild_tensor`, same first four arguments).
fn rebuild_tensor(
    callee: Option<(&str, &str)>,
    args: &[Value],
) -> Result<Option<Parts>, RecordProblem> {
    match callee {
        Some(("torch._utils", "_rebuild_tensor_v2" | "_rebuild_tensor")) => {}
        _ => return Ok(None),
    }
    let [storage, offset, size, stride, ..] = args else {
        return Err(RecordProblem::RebuildArguments { count: args.len() });
    };
    let Value::PersistentId(pid) = storage else {
        return Err(RecordProblem::StorageNotPersistentId);
    };
    let [tag, class, key, _location, numel, rest @ ..] = pid.items.as_slice() else {
        return Err(RecordProblem::StorageIdShape);
    };
    if tag.as_str() != Some("storage") {
        return Err(RecordProblem::StorageIdTag);
    }
    let class = class.as_global().map(|(_, name)| name).unwrap_or_default();
    let Some(dtype) = StorageType::from_class(class) else {
        return Err(RecordProblem::StorageType {
            class: class.to_string(),
        });
    };
    let Some(key) = key.as_str() else {
        return Err(RecordProblem::StorageKey);
    };
    let Some(numel) = numel.as_int().and_then(|n| u64::try_from(n).ok()) else {
        return Err(RecordProblem::StorageSize);
    };
    if rest.first().is_some_and(|v| *v != Value::None) {
        return Err(RecordProblem::StorageView);
    }
    let (Some(offset), Some(shape), Some(stride)) = (count(offset), counts(size), counts(stride))
    else {
        return Err(RecordProblem::NotCounts);
    };
    if shape.len() != stride.len() {
        return Err(RecordProblem::StrideLength {
            shape: shape.into(),
            stride: stride.into(),
        });
    }
    Ok(Some((
        key.to_string(),
        StorageRef { dtype, numel },
        (shape, stride, offset),
    )))
}

fn count(v: &Value) -> Option<usize> {
    v.as_int().and_then(|i| usize::try_from(i).ok())
}

fn counts(v: &Value) -> Option<Vec<usize>> {
    v.as_tuple()?.iter().map(count).collect()
}

/// Test files: a torch ≥ 1.6 `.bin` written by hand.
#[cfg(test)]
pub(crate) mod testing {
    use std::io::Write;
    use std::path::Path;

    /// The pickle of `{"w": _rebuild_tensor_v2(('storage', torch.FloatStorage, '0', 'cpu',
    /// numel), 0, size, stride, False, ())}` (protocol 2, the opcodes torch.save writes),
    /// each number at most 255.
    pub fn one_tensor_pickle(numel: u8, size: &[u8], stride: &[u8]) -> Vec<u8> {
        let text = |p: &mut Vec<u8>, s: &str| {
            p.push(b'X');
            p.extend((s.len() as u32).to_le_bytes());
            p.extend(s.as_bytes());
        };
        let mut p = b"\x80\x02}".to_vec();
        text(&mut p, "w");
        p.extend(b"ctorch._utils\n_rebuild_tensor_v2\n((");
        text(&mut p, "storage");
        p.extend(b"ctorch\nFloatStorage\n");
        text(&mut p, "0");
        text(&mut p, "cpu");
        p.extend([b'K', numel, b't', b'Q', b'K', 0]);
        for numbers in [size, stride] {
            p.push(b'(');
            for &n in numbers {
                p.extend([b'K', n]);
            }
            p.push(b't');
        }
        p.extend(b"\x89)tRs.");
        p
    }

    /// A zip `.bin` at `path`: `archive/data.pkl` holding `pickle` and storage `0` holding
    /// `storage`, both stored uncompressed as torch.save stores them.
    pub fn write_zip_bin(path: &Path, pickle: &[u8], storage: &[u8]) {
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored);
        let mut zip = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
        zip.start_file("archive/data.pkl", options).unwrap();
        zip.write_all(pickle).unwrap();
        zip.start_file("archive/data/0", options).unwrap();
        zip.write_all(storage).unwrap();
        zip.start_file("archive/byteorder", options).unwrap();
        zip.write_all(b"little").unwrap();
        zip.finish().unwrap();
    }
}
