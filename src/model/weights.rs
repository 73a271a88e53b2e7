//! Checkpoint files → named f32 tensors, whatever the file format and key layout.
//!
//! Formats: `model.safetensors` (memory-mapped, possibly sharded), and `pytorch_model.bin` in
//! torch's zip format (torch ≥ 1.6) or its legacy pre-1.6 format, both read by
//! [`super::pytorch`] through our bounded unpickler.
//!
//! Every tensor read is checked for NaN and ±inf, and the bytes read are counted: a checkpoint
//! whose tensors share storage could otherwise make a small file load as a huge model, so
//! reading more than [`READ_BUDGET_FACTOR`] times the files' size is refused.
//!
//! Key layouts: tensors named with or without a prefix (`bert.` for checkpoints saved from
//! `BertForMaskedLM` and friends), detected from the word-embedding tensor's name; LayerNorm
//! parameters as `weight/bias` or the original TensorFlow port's `gamma/beta`. Everything else
//! in the file (`embeddings.position_ids`, `cls.*`, the pooler) is never read.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use candle_core::safetensors::MmapedSafetensors;
use candle_core::{CpuStorage, DType, Device, Storage, Tensor};

use super::candle_message;
use super::pytorch::{self, TorchFile};
use super::validate::first_non_finite;

/// Reading more than this many times the weight files' size is refused (see the module doc).
/// f16 checkpoints read as f32 take twice their size; 4 leaves room for that and more.
pub const READ_BUDGET_FACTOR: u64 = 4;

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
    /// A tensor holds NaN or ±inf.
    #[error("tensor {name} in {} holds {value} (element {index} of shape {shape:?}); the checkpoint is corrupt: re-download or re-save it", path.display())]
    NonFinite {
        /// Full tensor name.
        name: String,
        /// The weight file.
        path: PathBuf,
        /// The value (NaN, inf or -inf).
        value: f32,
        /// Its index, row-major.
        index: usize,
        /// The tensor's shape.
        shape: Vec<usize>,
    },
    /// Reading the tensors would take far more memory than the files hold (tensors that share
    /// storage many times over).
    #[error("reading tensor {name} from {} would bring the weights read to over {limit} bytes, {READ_BUDGET_FACTOR} times the size of the weight files; its tensors share storage in a way no real checkpoint does", path.display())]
    ReadBudget {
        /// The tensor that went over.
        name: String,
        /// The weight file.
        path: PathBuf,
        /// The limit in bytes.
        limit: u64,
    },
    /// No weight files were given.
    #[error("no weight files to read (an empty list of safetensors shards)")]
    NoFiles,
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
    Torch(TorchFile),
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
    /// Bytes of tensor data read so far (as f32), and the most that may be.
    read: AtomicU64,
    read_limit: u64,
}

impl Checkpoint {
    /// Open weight files: `.safetensors` (one or the shards of one checkpoint) or one `.bin`.
    pub fn open(paths: &[PathBuf]) -> Result<Checkpoint, WeightsError> {
        let path = paths.first().cloned().ok_or(WeightsError::NoFiles)?;
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
        let mut size = 0u64;
        for p in paths {
            size += std::fs::metadata(p)
                .map_err(|e| read_err(e.to_string()))?
                .len();
        }
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
            read: AtomicU64::new(0),
            read_limit: size
                .saturating_mul(READ_BUDGET_FACTOR)
                .saturating_add(1 << 20),
        })
    }

    /// The weight file named in errors (the first shard of a sharded checkpoint).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The stored name and shape of `name` (given without the prefix; LayerNorm `weight/bias`
    /// found as `gamma/beta` too), if the file has it.
    pub fn shape_of(&self, name: &str) -> Option<(String, &[usize])> {
        let full = self.resolve(name)?;
        let shape = self.shapes.get(&full)?;
        Some((full, shape.as_slice()))
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

    /// Check that tensor `name` is present with `shape`, reading nothing.
    pub fn check_shape(&self, name: &str, shape: &[usize]) -> Result<(), WeightsError> {
        self.locate(name, shape).map(drop)
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

    /// Count `shape`'s elements (as f32) against the read budget.
    fn charge(&self, full: &str, shape: &[usize]) -> Result<(), WeightsError> {
        let bytes = shape
            .iter()
            .fold(4u64, |acc, &d| acc.saturating_mul(d as u64));
        let total = self
            .read
            .fetch_add(bytes, Ordering::Relaxed)
            .saturating_add(bytes);
        if total > self.read_limit {
            return Err(WeightsError::ReadBudget {
                name: full.to_string(),
                path: self.path.clone(),
                limit: self.read_limit,
            });
        }
        Ok(())
    }

    /// NaN or ±inf in `values` (tensor `full` of `shape`) as an error.
    fn check_finite(
        &self,
        full: &str,
        shape: &[usize],
        values: &[f32],
    ) -> Result<(), WeightsError> {
        match first_non_finite(values) {
            None => Ok(()),
            Some(index) => Err(WeightsError::NonFinite {
                name: full.to_string(),
                path: self.path.clone(),
                value: values[index],
                index,
                shape: shape.to_vec(),
            }),
        }
    }

    /// Run `f` on the elements of tensor `name` as f32 (row-major, checked against `shape`, and
    /// checked to be finite).
    ///
    /// A safetensors file that stores the tensor as f32 is read in place, from the memory map:
    /// the encoder copies (or transposes) its big matrices from there straight into their final
    /// buffers, one pass instead of two. Any other storage is loaded and converted first.
    pub fn with_f32<R>(
        &self,
        name: &str,
        shape: &[usize],
        f: impl FnOnce(&[f32]) -> R,
    ) -> Result<R, WeightsError> {
        let full = self.locate(name, shape)?;
        self.charge(&full, shape)?;
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
                    self.check_finite(&full, shape, values)?;
                    let result = f(values);
                    release_pages(bytes);
                    return Ok(result);
                }
            }
        }
        let tensor = self.load_f32(&full)?;
        with_values(&tensor, |values| {
            self.check_finite(&full, shape, values)?;
            Ok(f(values))
        })
        .map_err(|e| self.error(&e))?
    }

    /// The tensor `name` (relative to the encoder, without prefix) as contiguous f32, checked
    /// against `shape` and checked to be finite.
    pub fn tensor(&self, name: &str, shape: &[usize]) -> Result<Tensor, WeightsError> {
        let full = self.locate(name, shape)?;
        self.charge(&full, shape)?;
        let tensor = self.load_f32(&full)?;
        with_values(&tensor, |values| self.check_finite(&full, shape, values))
            .map_err(|e| self.error(&e))??;
        Ok(tensor)
    }

    /// The stored tensor `full`, as contiguous f32; integer types are refused.
    fn load_f32(&self, full: &str) -> Result<Tensor, WeightsError> {
        let read_err = |reason: String| WeightsError::Read {
            path: self.path.clone(),
            reason: format!("tensor {full}: {reason}"),
        };
        let dtype_err = |dtype: String| WeightsError::DType {
            name: full.to_string(),
            path: self.path.clone(),
            dtype,
        };
        let tensor = match &self.backend {
            Backend::Safetensors(st) => st
                .load(full, &Device::Cpu)
                .map_err(|e| read_err(candle_message(&e)))?,
            Backend::Torch(file) => {
                if let Some(t) = file.dtype(full).filter(|t| !t.is_float()) {
                    return Err(dtype_err(t.name().to_string()));
                }
                file.read(full)
                    .map_err(read_err)?
                    .ok_or_else(|| read_err("not found".into()))?
            }
        };
        match tensor.dtype() {
            DType::F32 | DType::F16 | DType::BF16 | DType::F64 => {}
            other => return Err(dtype_err(format!("{other:?}"))),
        }
        tensor
            .to_dtype(DType::F32)
            .and_then(|t| t.contiguous())
            .map_err(|e| read_err(candle_message(&e)))
    }
}

/// Run `f` on the elements of an f32 tensor on the CPU, in place when it is contiguous.
fn with_values<R>(t: &Tensor, f: impl FnOnce(&[f32]) -> R) -> candle_core::Result<R> {
    {
        let (storage, layout) = t.storage_and_layout();
        if let (Storage::Cpu(CpuStorage::F32(v)), Some((start, end))) =
            (&*storage, layout.contiguous_offsets())
        {
            return Ok(f(&v[start..end]));
        }
    }
    Ok(f(&t.flatten_all()?.to_vec1::<f32>()?))
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

/// Open a `pytorch_model.bin` (either of torch's formats).
fn open_bin(path: &Path) -> Result<(Backend, HashMap<String, Vec<usize>>), WeightsError> {
    let file = TorchFile::open(path).map_err(|e| match e.format {
        Some(pytorch::Format::Legacy) if !e.damaged => WeightsError::LegacyPickle {
            path: path.to_path_buf(),
            reason: e.reason,
        },
        _ => WeightsError::Read {
            path: path.to_path_buf(),
            reason: e.reason,
        },
    })?;
    let shapes = file
        .shapes()
        .map(|(name, shape)| (name.to_string(), shape.to_vec()))
        .collect();
    Ok((Backend::Torch(file), shapes))
}
