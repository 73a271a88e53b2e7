//! Checkpoint files → named f32 tensors, whatever the file format and key layout.
//!
//! Formats: `model.safetensors` (memory-mapped, possibly sharded), `pytorch_model.bin` in torch's
//! zip format (torch ≥ 1.6), and `pytorch_model.bin` in the legacy pre-1.6 format (read with
//! candle's pickle parser plus the storage layout below).
//!
//! Key layouts: tensors named with or without a prefix (`bert.` for checkpoints saved from
//! `BertForMaskedLM` and friends), detected from the word-embedding tensor's name; LayerNorm
//! parameters as `weight/bias` or the original TensorFlow port's `gamma/beta`. Everything else
//! in the file (`embeddings.position_ids`, `cls.*`, the pooler) is never read.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use candle_core::pickle::{Object, PthTensors, Stack};
use candle_core::safetensors::MmapedSafetensors;
use candle_core::{DType, Device, Tensor};

use super::candle_message;

/// The tensor every BERT checkpoint has; its name reveals the key prefix.
const ANCHOR: &str = "embeddings.word_embeddings.weight";

/// An error reading weights.
#[derive(Debug, thiserror::Error)]
pub enum WeightsError {
    /// The file cannot be opened or parsed.
    #[error("cannot read weights {}: {reason}", path.display())]
    Read {
        /// The weight file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A pre-1.6 pickle that cannot be read.
    #[error("{} is a legacy (pre-1.6) PyTorch pickle attnviz cannot read ({reason}); convert it with: python -c \"import torch; torch.save(torch.load('{0}'), '{0}')\"", path.display())]
    LegacyPickle {
        /// The weight file.
        path: PathBuf,
        /// What failed.
        reason: String,
    },
    /// No BERT word embeddings: not a BERT checkpoint.
    #[error("{} has no tensor named {ANCHOR} (with or without a prefix such as 'bert.'); is it a BERT checkpoint?", path.display())]
    NotBert {
        /// The weight file.
        path: PathBuf,
    },
    /// A tensor the encoder needs is absent.
    #[error("tensor {name} is missing from {}", path.display())]
    Missing {
        /// Full tensor name (with prefix).
        name: String,
        /// The weight file.
        path: PathBuf,
    },
    /// A tensor has the wrong shape for config.json.
    #[error("tensor {name} in {} has shape {found:?}, but config.json implies {expected:?}", path.display())]
    Shape {
        /// Full tensor name (with prefix).
        name: String,
        /// The weight file.
        path: PathBuf,
        /// Shape the config implies.
        expected: Vec<usize>,
        /// Shape in the file.
        found: Vec<usize>,
    },
    /// A tensor holds integers where weights belong, or another unusable type.
    #[error("tensor {name} in {} has type {dtype}, not floating point", path.display())]
    DType {
        /// Full tensor name.
        name: String,
        /// The weight file.
        path: PathBuf,
        /// Its type.
        dtype: String,
    },
}

enum Backend {
    Safetensors(MmapedSafetensors),
    Zip(PthTensors),
    Legacy(LegacyPickle),
}

/// An open checkpoint: look tensors up by their name inside the encoder
/// (`encoder.layer.0.attention.self.query.weight`), whatever prefix or LayerNorm naming it uses.
pub struct Checkpoint {
    backend: Backend,
    /// File named in errors (the first shard for sharded checkpoints).
    path: PathBuf,
    /// Prefix in front of every encoder tensor name: `""` or `"bert."`.
    prefix: String,
    /// Shape of every tensor in the file, by full name.
    shapes: HashMap<String, Vec<usize>>,
}

impl Checkpoint {
    /// Open weight files: `.safetensors` (one or the shards of one checkpoint) or one `.bin`.
    pub fn open(paths: &[PathBuf]) -> Result<Checkpoint, WeightsError> {
        let path = paths.first().cloned().unwrap_or_default();
        let read_err = |reason: String| WeightsError::Read {
            path: path.clone(),
            reason,
        };
        let is_bin = paths.len() == 1 && path.extension().is_some_and(|e| e != "safetensors");
        let (backend, shapes) = if is_bin {
            open_bin(&path)?
        } else {
            // SAFETY: the files are mapped read-only; like every mmap user we rely on nobody
            // truncating them while we run.
            let st = unsafe { MmapedSafetensors::multi(paths) }
                .map_err(|e| read_err(candle_message(&e)))?;
            let shapes = st
                .tensors()
                .into_iter()
                .map(|(name, view)| (name, view.shape().to_vec()))
                .collect();
            (Backend::Safetensors(st), shapes)
        };
        let prefix = shapes
            .keys()
            .filter_map(|k| k.strip_suffix(ANCHOR))
            .filter(|p| p.is_empty() || p.ends_with('.'))
            .min_by_key(|p| p.len())
            .map(str::to_string)
            .ok_or(WeightsError::NotBert { path: path.clone() })?;
        Ok(Checkpoint {
            backend,
            path,
            prefix,
            shapes,
        })
    }

    /// A read error on this checkpoint from a candle error.
    pub fn error(&self, e: &candle_core::Error) -> WeightsError {
        WeightsError::Read {
            path: self.path.clone(),
            reason: candle_message(e),
        }
    }

    /// The detected key prefix (`""` or `"bert."`).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Number of tensors in the file (used and unused).
    pub fn len(&self) -> usize {
        self.shapes.len()
    }

    /// Whether the file holds no tensors.
    pub fn is_empty(&self) -> bool {
        self.shapes.is_empty()
    }

    /// The full name under which `name` is stored: with the prefix, and with LayerNorm
    /// `weight/bias` mapped to `gamma/beta` where the file uses those.
    fn resolve(&self, name: &str) -> Option<String> {
        let full = format!("{}{name}", self.prefix);
        if self.shapes.contains_key(&full) {
            return Some(full);
        }
        let (stem, last) = full.rsplit_once('.')?;
        if !stem.ends_with("LayerNorm") {
            return None;
        }
        let alias = match last {
            "weight" => "gamma",
            "bias" => "beta",
            _ => return None,
        };
        let alias = format!("{stem}.{alias}");
        self.shapes.contains_key(&alias).then_some(alias)
    }

    /// The full stored name of `name`, checked to have `shape`.
    fn locate(&self, name: &str, shape: &[usize]) -> Result<String, WeightsError> {
        let full = self.resolve(name).ok_or_else(|| {
            let mut name = format!("{}{name}", self.prefix);
            if name.contains("LayerNorm.") {
                name = name.replace("LayerNorm.weight", "LayerNorm.weight (or .gamma)");
                name = name.replace("LayerNorm.bias", "LayerNorm.bias (or .beta)");
            }
            WeightsError::Missing {
                name,
                path: self.path.clone(),
            }
        })?;
        let found = &self.shapes[&full];
        if found.as_slice() != shape {
            return Err(WeightsError::Shape {
                name: full,
                path: self.path.clone(),
                expected: shape.to_vec(),
                found: found.clone(),
            });
        }
        Ok(full)
    }

    /// Run `f` on the elements of tensor `name` as f32 (row-major, checked against `shape`).
    ///
    /// A safetensors file that stores the tensor as f32 is read in place, from the memory map:
    /// the encoder copies (or transposes) its big matrices from there straight into their final
    /// buffers, one pass instead of two. Any other storage goes through [`Checkpoint::tensor`].
    pub fn with_f32<R>(
        &self,
        name: &str,
        shape: &[usize],
        f: impl FnOnce(&[f32]) -> R,
    ) -> Result<R, WeightsError> {
        let full = self.locate(name, shape)?;
        if let Backend::Safetensors(st) = &self.backend {
            if let Ok(view) = st.get(&full) {
                let bytes = view.data();
                let count: usize = shape.iter().product();
                if cfg!(target_endian = "little")
                    && view.dtype() == safetensors::Dtype::F32
                    && bytes.len() == count * 4
                    && (bytes.as_ptr() as usize) % std::mem::align_of::<f32>() == 0
                {
                    // SAFETY: `count` f32 values, aligned, little-endian like the file, inside
                    // the mapping that `st` keeps alive for this borrow.
                    let values =
                        unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<f32>(), count) };
                    let result = f(values);
                    release_pages(bytes);
                    return Ok(result);
                }
            }
        }
        let tensor = self.tensor(name, shape)?;
        let values = tensor
            .flatten_all()
            .and_then(|t| t.to_vec1::<f32>())
            .map_err(|e| self.error(&e))?;
        Ok(f(&values))
    }

    /// The tensor `name` (relative to the encoder, without prefix) as contiguous f32, checked
    /// against `shape`.
    pub fn tensor(&self, name: &str, shape: &[usize]) -> Result<Tensor, WeightsError> {
        let full = self.locate(name, shape)?;
        let read_err = |reason: String| WeightsError::Read {
            path: self.path.clone(),
            reason: format!("tensor {full}: {reason}"),
        };
        let tensor = match &self.backend {
            Backend::Safetensors(st) => st.load(&full, &Device::Cpu),
            Backend::Zip(pth) => pth
                .get(&full)
                .and_then(|t| t.ok_or_else(|| candle_core::Error::Msg("not found".into()))),
            Backend::Legacy(legacy) => legacy.load(&full),
        }
        .map_err(|e| read_err(candle_message(&e)))?;
        match tensor.dtype() {
            DType::F32 | DType::F16 | DType::BF16 | DType::F64 => {}
            other => {
                return Err(WeightsError::DType {
                    name: full,
                    path: self.path.clone(),
                    dtype: format!("{other:?}"),
                })
            }
        }
        tensor
            .to_dtype(DType::F32)
            .and_then(|t| t.contiguous())
            .map_err(|e| read_err(candle_message(&e)))
    }
}

/// Drop the whole pages of `bytes`, part of a read-only file mapping, from this process's memory
/// once they have been copied out: they stay in the page cache (a later read maps them again),
/// but the peak resident size of a load no longer counts the checkpoint twice (the MiniLM CLI
/// run: 192 → 104 MB).
fn release_pages(bytes: &[u8]) {
    #[cfg(target_os = "linux")]
    {
        const PAGE: usize = 4096;
        let start = (bytes.as_ptr() as usize).next_multiple_of(PAGE);
        let end = (bytes.as_ptr() as usize + bytes.len()) / PAGE * PAGE;
        if end > start {
            // SAFETY: only advice on whole pages inside a read-only file mapping we keep alive;
            // their contents stay what the file holds.
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED);
            }
        }
    }
}

/// Open a `pytorch_model.bin`: torch's zip format, or the legacy pickle stream.
fn open_bin(path: &Path) -> Result<(Backend, HashMap<String, Vec<usize>>), WeightsError> {
    let read_err = |reason: String| WeightsError::Read {
        path: path.to_path_buf(),
        reason,
    };
    let mut head = [0u8; 4];
    File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .map_err(|e| read_err(e.to_string()))?;
    if head == *b"PK\x03\x04" {
        let pth = PthTensors::new(path, None).map_err(|e| read_err(candle_message(&e)))?;
        let shapes = pth
            .tensor_infos()
            .iter()
            .map(|(name, info)| (name.clone(), info.layout.dims().to_vec()))
            .collect();
        return Ok((Backend::Zip(pth), shapes));
    }
    if head[0] == 0x80 {
        let legacy = LegacyPickle::open(path).map_err(|reason| WeightsError::LegacyPickle {
            path: path.to_path_buf(),
            reason,
        })?;
        let shapes = legacy
            .tensors
            .iter()
            .map(|(name, t)| (name.clone(), t.shape.clone()))
            .collect();
        return Ok((Backend::Legacy(legacy), shapes));
    }
    Err(read_err(
        "not a PyTorch checkpoint (neither a zip archive nor a pickle)".into(),
    ))
}

/// A pre-1.6 `torch.save` file: five pickles, then the raw storages.
///
/// Layout (torch/serialization.py `_legacy_save`): pickle(magic number), pickle(protocol
/// version), pickle(sys_info), pickle(state dict, storages as persistent ids), pickle(sorted
/// storage keys); then per key in that order an int64 element count and the storage's bytes.
struct LegacyPickle {
    path: PathBuf,
    tensors: HashMap<String, LegacyTensor>,
    /// Byte offset of each storage's data in the file.
    storages: HashMap<String, u64>,
}

struct LegacyTensor {
    storage: String,
    dtype: DType,
    shape: Vec<usize>,
    /// Offset in elements into the storage.
    offset: usize,
    contiguous: bool,
}

/// `pickle.dumps(0x1950a86a20f9469cfc6c, protocol=2)`: torch's legacy magic number.
const LEGACY_MAGIC: [u8; 15] = [
    0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, 0x2e,
];

impl LegacyPickle {
    fn open(path: &Path) -> Result<LegacyPickle, String> {
        let file = File::open(path).map_err(|e| e.to_string())?;
        let mut r = BufReader::new(file);
        let mut magic = [0u8; LEGACY_MAGIC.len()];
        r.read_exact(&mut magic).map_err(|e| e.to_string())?;
        if magic != LEGACY_MAGIC {
            return Err("it does not start with torch's magic number".into());
        }
        let protocol = read_pickle(&mut r)?;
        if protocol.int_or_long().ok() != Some(1001) {
            return Err("unknown legacy protocol version".into());
        }
        let sys_info = read_pickle(&mut r)?;
        if let Object::Dict(items) = sys_info {
            let big_endian = items.iter().any(|(k, v)| {
                *k == Object::Unicode("little_endian".into()) && *v == Object::Bool(false)
            });
            if big_endian {
                return Err("it was written on a big-endian machine".into());
            }
        }
        let state = read_pickle(&mut r)?;
        let Object::Dict(items) = state else {
            return Err("it does not hold a state dict".into());
        };
        let mut tensors = HashMap::new();
        for (name, value) in items {
            let info = match value.into_tensor_info(name, Path::new("")) {
                Ok(Some(info)) => info,
                _ => continue,
            };
            let elem = info.dtype.size_in_bytes();
            tensors.insert(
                info.name.clone(),
                LegacyTensor {
                    storage: info.path.trim_start_matches('/').to_string(),
                    dtype: info.dtype,
                    shape: info.layout.dims().to_vec(),
                    offset: info.layout.start_offset() / elem,
                    contiguous: info.layout.is_contiguous(),
                },
            );
        }
        let keys = match read_pickle(&mut r)? {
            Object::List(keys) | Object::Tuple(keys) => keys,
            _ => return Err("the storage key list is missing".into()),
        };
        let mut storages = HashMap::new();
        for key in keys {
            let key = key
                .unicode()
                .map_err(|_| "a storage key is not a string".to_string())?;
            let mut count = [0u8; 8];
            r.read_exact(&mut count).map_err(|e| e.to_string())?;
            let count = u64::from_le_bytes(count);
            let start = r.stream_position().map_err(|e| e.to_string())?;
            // Every storage is used by some tensor, which tells its element size.
            let elem = tensors
                .values()
                .find(|t| t.storage == key)
                .map(|t| t.dtype.size_in_bytes() as u64)
                .ok_or_else(|| format!("storage {key} belongs to no tensor"))?;
            r.seek(SeekFrom::Start(start + count * elem))
                .map_err(|e| e.to_string())?;
            storages.insert(key, start);
        }
        Ok(LegacyPickle {
            path: path.to_path_buf(),
            tensors,
            storages,
        })
    }

    fn load(&self, name: &str) -> candle_core::Result<Tensor> {
        let t = self
            .tensors
            .get(name)
            .ok_or_else(|| candle_core::Error::Msg("not found".into()))?;
        if !t.contiguous {
            return Err(candle_core::Error::Msg("non-contiguous tensor".into()));
        }
        let start = self
            .storages
            .get(&t.storage)
            .ok_or_else(|| candle_core::Error::Msg(format!("storage {} missing", t.storage)))?;
        let elem = t.dtype.size_in_bytes();
        let count: usize = t.shape.iter().product();
        let mut file = File::open(&self.path)?;
        file.seek(SeekFrom::Start(start + (t.offset * elem) as u64))?;
        let mut bytes = vec![0u8; count * elem];
        file.read_exact(&mut bytes)?;
        Tensor::from_raw_buffer(&bytes, t.dtype, &t.shape, &Device::Cpu)
    }
}

/// Read one pickle (up to its STOP opcode) from `r`.
fn read_pickle<R: BufRead>(r: &mut R) -> Result<Object, String> {
    let mut stack = Stack::empty();
    stack.read_loop(r).map_err(|e| candle_message(&e))?;
    stack.finalize().map_err(|e| candle_message(&e))
}
