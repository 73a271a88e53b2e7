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

/// Which of the two formats a file is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// torch ≥ 1.6: a zip archive.
    Zip,
    /// Before torch 1.6: a stream of pickles followed by the raw storages.
    Legacy,
}

/// Why a `.bin` file cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinError {
    /// The format, when it was recognised.
    pub format: Option<Format>,
    /// What is wrong, one line.
    pub reason: String,
    /// Whether the file is damaged or malicious (out-of-bounds numbers, a broken or oversized
    /// pickle), as opposed to valid but using something this reader does not support. Only
    /// the latter is worth converting with torch (`torch.load` runs a malicious pickle's code).
    pub damaged: bool,
}

fn fail<T>(format: Format, reason: impl Into<String>) -> Result<T, BinError> {
    Err(BinError {
        format: Some(format),
        reason: reason.into(),
        damaged: true,
    })
}

fn unsupported<T>(format: Format, reason: impl Into<String>) -> Result<T, BinError> {
    Err(BinError {
        format: Some(format),
        reason: reason.into(),
        damaged: false,
    })
}

impl BinError {
    fn pickle(format: Format, e: pickle::PickleError) -> BinError {
        BinError {
            format: Some(format),
            damaged: !matches!(e, pickle::PickleError::Unsupported { .. }),
            reason: e.to_string(),
        }
    }
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
        let unknown = |reason: String| BinError {
            format: None,
            reason,
            damaged: false,
        };
        let mut file = File::open(path).map_err(|e| unknown(e.to_string()))?;
        let len = file.metadata().map_err(|e| unknown(e.to_string()))?.len();
        let mut budget = Budget::new(limits(len));
        let mut head = [0u8; 4];
        file.read_exact(&mut head)
            .map_err(|_| unknown("not a PyTorch checkpoint (shorter than 4 bytes)".into()))?;
        file.rewind().map_err(|e| unknown(e.to_string()))?;
        let format = if head == *b"PK\x03\x04" {
            Format::Zip
        } else if head[0] == 0x80 {
            Format::Legacy
        } else {
            return Err(unknown(
                "not a PyTorch checkpoint (neither a zip archive nor a pickle)".into(),
            ));
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
            let bad = |what: String| fail(self.format, format!("tensor {name}: {what}"));
            let Some(region) = self.regions.get(&r.storage) else {
                return bad(format!("its storage {} is not in the file", r.storage));
            };
            let elem = r.dtype.size() as u64;
            if r.numel.checked_mul(elem).is_none_or(|b| b > region.len) {
                return bad(format!(
                    "its storage {} should hold {} elements but has {} bytes",
                    r.storage, r.numel, region.len
                ));
            }
            let count = r
                .shape
                .iter()
                .try_fold(1u64, |acc, &d| acc.checked_mul(d as u64));
            match count.and_then(|c| c.checked_mul(elem)) {
                Some(bytes) if bytes <= file_len => {}
                _ => {
                    return bad(format!(
                        "shape {:?} holds more data than the whole file ({file_len} bytes)",
                        r.shape
                    ))
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
                return bad(format!(
                    "size {:?}, stride {:?} and offset {} reach past the end of its storage of {} elements",
                    r.shape, r.stride, r.offset, r.numel
                ));
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
            .map_err(|e| TensorReadError::Candle(super::CandleError(e)))
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
    Candle(super::CandleError),
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
    let err = |reason: String| BinError {
        format: Some(Format::Zip),
        reason,
        damaged: true,
    };
    let zip_err = |e: zip::result::ZipError| err(format!("not a readable zip archive ({e})"));
    let mut archive = zip::ZipArchive::new(BufReader::new(file)).map_err(zip_err)?;
    let pkl = archive
        .file_names()
        .filter_map(Result::ok)
        .filter(|n| n.ends_with("data.pkl") && n.matches('/').count() <= 1)
        .min_by_key(|n| n.len())
        .map(|n| n.to_string());
    let Some(pkl) = pkl else {
        return fail(
            Format::Zip,
            "a zip archive without data.pkl (not a torch.save file)",
        );
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
                .map_err(|e| err(e.to_string()))?;
            big_endian = order.trim_ascii() != b"little";
            continue;
        }
        let Some(key) = name.strip_prefix(&data_prefix) else {
            continue;
        };
        if entry.compression() != zip::CompressionMethod::Stored {
            return unsupported(
                Format::Zip,
                format!("storage {key} is compressed, which torch.save never does"),
            );
        }
        let start = entry
            .data_start()
            .ok_or_else(|| err(format!("storage {key} has no data offset")))?;
        let size = entry.compressed_size();
        if start.checked_add(size).is_none_or(|end| end > len) {
            return Err(err(format!(
                "storage {key} claims {size} bytes, past the end of the file"
            )));
        }
        regions.insert(key.to_string(), Region { start, len: size });
    }
    if big_endian {
        return unsupported(Format::Zip, "it was written on a big-endian machine");
    }

    let entry = archive.by_name(&pkl).map_err(zip_err)?;
    let mut reader = BufReader::new(entry.take(len));
    let state = pickle::read(&mut reader, budget).map_err(|e| BinError::pickle(Format::Zip, e))?;
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
    let err = |reason: String| BinError {
        format: Some(Format::Legacy),
        reason,
        damaged: true,
    };
    let mut r = BufReader::new(file);
    let mut magic = [0u8; LEGACY_MAGIC.len()];
    if r.read_exact(&mut magic).is_err() || magic != LEGACY_MAGIC {
        return unsupported(
            Format::Legacy,
            "it does not start with torch's magic number",
        );
    }
    let mut next = || pickle::read(&mut r, budget).map_err(|e| BinError::pickle(Format::Legacy, e));
    if next()?.as_int() != Some(1001) {
        return unsupported(Format::Legacy, "unknown legacy protocol version");
    }
    if let Value::Dict(info) = next()? {
        let big_endian = info
            .items
            .iter()
            .any(|(k, v)| k.as_str() == Some("little_endian") && *v == Value::Bool(false));
        if big_endian {
            return unsupported(Format::Legacy, "it was written on a big-endian machine");
        }
    }
    let state = next()?;
    let keys = next()?;
    let data_start = r.stream_position().map_err(|e| err(e.to_string()))?;
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
        _ => return fail(Format::Legacy, "the storage key list is missing"),
    };
    let mut r = BufReader::new(file);
    let mut regions = HashMap::new();
    let mut pos = stream.data_start;
    for key in keys {
        let Some(key) = key.as_str() else {
            return fail(Format::Legacy, "a storage key is not a string");
        };
        let Some(storage) = storages.get(key) else {
            return fail(
                Format::Legacy,
                format!("storage {key} belongs to no tensor"),
            );
        };
        let mut count = [0u8; 8];
        r.seek(SeekFrom::Start(pos))
            .and_then(|_| r.read_exact(&mut count))
            .or_else(|_| {
                fail(
                    Format::Legacy,
                    format!("the file ends before storage {key}"),
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
                    format!("storage {key} claims {count} elements, past the end of the file"),
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
        return fail(
            format,
            format!("it holds {} where a state dict belongs", state.kind()),
        );
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
                        format!("tensor {name}: storage {storage} is described in two ways"),
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
            Err(Bad::Damaged(what)) => return fail(format, format!("tensor {name}: {what}")),
            Err(Bad::Unsupported(what)) => {
                return unsupported(format, format!("tensor {name}: {what}"))
            }
        }
    }
    Ok((tensors, storages))
}

type Parts = (String, StorageRef, (Vec<usize>, Vec<usize>, usize));

/// Why a tensor record cannot be used.
enum Bad {
    Damaged(String),
    Unsupported(String),
}

fn damaged<T>(what: impl Into<String>) -> Result<T, Bad> {
    Err(Bad::Damaged(what.into()))
}

/// If `value` is a tensor record, its storage and layout. The callables understood are torch's
/// own rebuild functions, matched by name; nothing is called.
fn tensor_parts(value: &Value) -> Result<Option<Parts>, Bad> {
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
                None => return damaged("a parameter without data"),
            },
            ("torch._tensor", "_rebuild_from_type_v2") => {
                // (func, type, args, state): the tensor is func(*args).
                let (Some(func @ Value::Global(_)), Some(Value::Tuple(inner))) =
                    (args.first(), args.get(2))
                else {
                    return damaged("_rebuild_from_type_v2 with unexpected arguments");
                };
                return rebuild_tensor(func.as_global(), &inner.items);
            }
            _ => return rebuild_tensor(Some(callee), args),
        }
    }
    damaged("tensor wrappers nested too deep")
}

/// `torch._utils._rebuild_tensor_v2(storage, offset, size, stride, …)` (or the older
/// `_rebuild_tensor`, same first four arguments).
fn rebuild_tensor(callee: Option<(&str, &str)>, args: &[Value]) -> Result<Option<Parts>, Bad> {
    match callee {
        Some(("torch._utils", "_rebuild_tensor_v2" | "_rebuild_tensor")) => {}
        _ => return Ok(None),
    }
    let [storage, offset, size, stride, ..] = args else {
        return damaged(format!("_rebuild_tensor with {} arguments", args.len()));
    };
    let Value::PersistentId(pid) = storage else {
        return damaged("its storage is not a persistent id");
    };
    let [tag, class, key, _location, numel, rest @ ..] = pid.items.as_slice() else {
        return damaged("its storage id is not ('storage', type, key, location, size)");
    };
    if tag.as_str() != Some("storage") {
        return damaged("its storage id does not start with 'storage'");
    }
    let class = class.as_global().map(|(_, name)| name).unwrap_or_default();
    let Some(dtype) = StorageType::from_class(class) else {
        return Err(Bad::Unsupported(format!(
            "storage type '{class}' is not supported"
        )));
    };
    let Some(key) = key.as_str() else {
        return damaged("its storage key is not a string");
    };
    let Some(numel) = numel.as_int().and_then(|n| u64::try_from(n).ok()) else {
        return damaged("its storage size is not a count");
    };
    if rest.first().is_some_and(|v| *v != Value::None) {
        return Err(Bad::Unsupported(
            "legacy storage views are not supported".into(),
        ));
    }
    let (Some(offset), Some(shape), Some(stride)) = (count(offset), counts(size), counts(stride))
    else {
        return damaged("its offset, size or stride is not made of counts");
    };
    if shape.len() != stride.len() {
        return damaged(format!(
            "size {shape:?} and stride {stride:?} differ in length"
        ));
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
