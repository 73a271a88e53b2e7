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
//! Key layouts: tensors named with or without a prefix (`bert.`, `roberta.`, `albert.` … for
//! checkpoints saved from `*ForMaskedLM` and friends), detected from the name of a tensor every
//! checkpoint of the family has (its *anchor*, such as `embeddings.word_embeddings.weight`);
//! LayerNorm parameters as `weight/bias` or the original TensorFlow port's `gamma/beta`.
//! Everything else in the file (`embeddings.position_ids`, `cls.*`, the pooler) is never read.
//!
//! Tensors are [`Weight`]s: f32 tensors of a safetensors file are read in place from its memory
//! map (nothing is copied; the pages come from the page cache as the forward pass first touches
//! them, after the NaN/inf scan has touched them once), everything else is converted into
//! memory of our own.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use candle_core::quantized::GgmlDType;
use candle_core::safetensors::MmapedSafetensors;
use candle_core::{DType, Device, Tensor};

use super::ctranslate2::{Ct2Error, Ct2Model, Ct2Slice};
use super::pytorch::{self, TorchFile};
use crate::kernels::first_non_finite;
use crate::kernels::quant::{QuantError, QuantMatrix, QuantType};

mod problem;

pub use problem::{ReadProblem, TensorProblem};

/// Reading more than this many times the weight files' size is refused (see the module doc).
/// f16 checkpoints read as f32 take twice their size; 4 leaves room for that and more.
pub const READ_BUDGET_FACTOR: u64 = 4;

/// An error reading weights.
#[derive(Debug, thiserror::Error)]
pub enum WeightsError {
    /// The file cannot be opened or parsed.
    #[error("cannot read weights {}: {problem}", path.display())]
    Read {
        /// The weight file.
        path: PathBuf,
        /// Why.
        problem: ReadProblem,
    },
    /// A pre-1.6 pickle that cannot be read.
    #[error("{} is a legacy (pre-1.6) PyTorch pickle attnviz cannot read ({problem}); convert it with: python -c \"import torch; torch.save(torch.load('{0}'), '{0}')\"", path.display())]
    LegacyPickle {
        /// The weight file.
        path: PathBuf,
        /// What our reader does not support (boxed, as [`ReadProblem::Bin`] is).
        problem: Box<pytorch::BinProblem>,
    },
    /// The tensor every checkpoint of the family has is absent: another kind of checkpoint.
    #[error("{} has no tensor named {anchor} (with or without a prefix such as '{example}.'); is it a {family} checkpoint, as config.json says?", path.display())]
    NoAnchor {
        /// The weight file.
        path: PathBuf,
        /// The tensor looked for.
        anchor: String,
        /// The family config.json names.
        family: String,
        /// A typical prefix of the family's checkpoints (`roberta`).
        example: String,
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
    /// A CTranslate2 `model.bin` that cannot be read, or a variable of it.
    #[error(transparent)]
    Ctranslate2(Box<Ct2Error>),
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
    /// A tensor that should hold bytes as stored (MXFP4 blocks and scales) holds another type.
    #[error("tensor {name} in {} has type {dtype}; MXFP4 blocks and scales are unsigned bytes (U8) in a safetensors file", path.display())]
    NotBytes {
        /// Full tensor name.
        name: String,
        /// The weight file.
        path: PathBuf,
        /// Its type.
        dtype: String,
    },
}

impl From<Ct2Error> for WeightsError {
    fn from(e: Ct2Error) -> WeightsError {
        WeightsError::Ctranslate2(Box::new(e))
    }
}

enum Backend {
    Safetensors(Arc<MmapedSafetensors>),
    Torch(TorchFile),
    /// A CTranslate2 `model.bin`, its variables (or blocks of their rows) under the names a
    /// family gave them.
    Ct2 {
        model: Ct2Model,
        names: HashMap<String, Ct2Slice>,
    },
}

/// An open checkpoint: look tensors up by their name inside the base model
/// (`encoder.layer.0.attention.self.query.weight`), whatever prefix or LayerNorm naming it uses.
pub struct Checkpoint {
    backend: Arc<Backend>,
    /// File named in errors (the first shard for sharded checkpoints).
    path: PathBuf,
    /// Prefix in front of every base-model tensor name: `""`, `"bert."`, `"roberta."`, ….
    prefix: String,
    /// Shape of every tensor in the file, by full name.
    shapes: HashMap<String, Vec<usize>>,
    /// Bytes of tensor data read so far (as f32), and the most that may be.
    read: Arc<AtomicU64>,
    read_limit: u64,
}

/// A tensor every checkpoint of a family has, whose stored name reveals the key prefix.
#[derive(Clone, Copy, Debug)]
pub struct Anchor {
    /// Its name without prefix (`embeddings.word_embeddings.weight`).
    pub tensor: &'static str,
    /// The family, for the error when it is absent (`RoBERTa`).
    pub family: &'static str,
    /// The prefix its task checkpoints usually carry, for that error (`roberta`).
    pub prefix: &'static str,
}

impl Checkpoint {
    /// Open weight files: `.safetensors` (one or the shards of one checkpoint) or one `.bin`;
    /// the key prefix is wherever `anchor` is found.
    pub fn open(paths: &[PathBuf], anchor: &Anchor) -> Result<Checkpoint, WeightsError> {
        let path = paths.first().cloned().ok_or(WeightsError::NoFiles)?;
        let read_err = |problem: ReadProblem| WeightsError::Read {
            path: path.clone(),
            problem,
        };
        let is_bin = paths.len() == 1 && path.extension().is_some_and(|e| e != "safetensors");
        let (backend, shapes) = if is_bin {
            open_bin(&path)?
        } else {
            // SAFETY: the files are mapped read-only; like every mmap user we rely on nobody
            // truncating them while we run.
            let st = unsafe { MmapedSafetensors::multi(paths) }
                .map_err(|e| read_err(ReadProblem::Candle(Box::new(e))))?;
            let shapes = st
                .tensors()
                .into_iter()
                .map(|(name, view)| (name, view.shape().to_vec()))
                .collect();
            (Backend::Safetensors(Arc::new(st)), shapes)
        };
        let mut size = 0u64;
        for p in paths {
            size += std::fs::metadata(p)
                .map_err(|e| read_err(ReadProblem::Io(e)))?
                .len();
        }
        let prefix = shapes
            .keys()
            .filter_map(|k| k.strip_suffix(anchor.tensor))
            .filter(|p| p.is_empty() || p.ends_with('.'))
            .min_by_key(|p| p.len())
            .map(str::to_string)
            .ok_or_else(|| WeightsError::NoAnchor {
                path: path.clone(),
                anchor: anchor.tensor.to_string(),
                family: anchor.family.to_string(),
                example: anchor.prefix.to_string(),
            })?;
        Ok(Checkpoint {
            backend: Arc::new(backend),
            path,
            prefix,
            shapes,
            read: Arc::new(AtomicU64::new(0)),
            read_limit: size
                .saturating_mul(READ_BUDGET_FACTOR)
                .saturating_add(1 << 20),
        })
    }

    /// A CTranslate2 `model.bin` seen as a checkpoint whose tensors are `names` (transformers'
    /// names inside the base model, no prefix; [`super::ctranslate2::Ct2Layout::names`]): each
    /// a variable or a block of its rows, read as f32 when a family asks for it
    /// ([`Ct2Model::slice`]), checked to be finite and counted against the read budget as the
    /// other formats are.
    pub fn from_ctranslate2(
        model: Ct2Model,
        names: Vec<(String, Ct2Slice)>,
    ) -> Result<Checkpoint, WeightsError> {
        let path = model.path().to_path_buf();
        let mut shapes = HashMap::with_capacity(names.len());
        for (name, slice) in &names {
            shapes.insert(name.clone(), model.slice_shape(slice)?);
        }
        let size = std::fs::metadata(&path).map_or(0, |m| m.len());
        Ok(Checkpoint {
            backend: Arc::new(Backend::Ct2 {
                model,
                names: names.into_iter().collect(),
            }),
            path,
            prefix: String::new(),
            shapes,
            read: Arc::new(AtomicU64::new(0)),
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
    pub fn error(&self, e: candle_core::Error) -> WeightsError {
        WeightsError::Read {
            path: self.path.clone(),
            problem: ReadProblem::Candle(Box::new(e)),
        }
    }

    /// The detected key prefix (`""` or `"bert."`).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The same checkpoint seen from the module `sub` inside the base model (`language_model.`):
    /// names are looked up under the prefix followed by `sub`. The views share the file and
    /// its read budget.
    pub fn under(&self, sub: &str) -> Checkpoint {
        Checkpoint {
            backend: Arc::clone(&self.backend),
            path: self.path.clone(),
            prefix: format!("{}{sub}", self.prefix),
            shapes: self.shapes.clone(),
            read: Arc::clone(&self.read),
            read_limit: self.read_limit,
        }
    }

    /// The same checkpoint seen with names under `prefix` from the file's root (a
    /// vision-language model's parts that lie beside its language model, not inside it).
    pub fn at(&self, prefix: &str) -> Checkpoint {
        Checkpoint {
            prefix: prefix.to_string(),
            ..self.under("")
        }
    }

    /// The view [`Checkpoint::at`] the first of `prefixes` (from the file's root) under which
    /// the file holds `probe`, else at the first (a multimodal checkpoint's parts, whose
    /// prefixes differ between layouts).
    pub fn at_first(&self, prefixes: &[&str], probe: &str) -> Checkpoint {
        let found = prefixes
            .iter()
            .find(|p| self.has_full(&format!("{p}{probe}")))
            .unwrap_or(&prefixes[0]);
        self.at(found)
    }

    /// Whether the file holds a tensor named `full` (the whole stored name, any prefix
    /// included).
    pub fn has_full(&self, full: &str) -> bool {
        self.shapes.contains_key(full)
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
        self.resolve_full(format!("{}{name}", self.prefix))
    }

    /// The stored name of the full name `full` (LayerNorm `weight/bias` found as `gamma/beta`
    /// too), if the file has it.
    fn resolve_full(&self, full: String) -> Option<String> {
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

    /// Tensor `name` (without the prefix) as f32, checked against `shape` and checked to be
    /// finite.
    ///
    /// A safetensors file that stores the tensor as aligned little-endian f32 is read in place,
    /// from the memory map: nothing is copied. Any other storage (a `.bin`, f16, bf16) is loaded
    /// and converted.
    pub fn weight(&self, name: &str, shape: &[usize]) -> Result<Weight, WeightsError> {
        let full = self.locate(name, shape)?;
        self.read_tensor(full, shape)
    }

    /// Tensor `name` stored outside the base model, under exactly that name whatever the
    /// prefix (a causal LM's `lm_head.weight` beside `model.*`, a masked LM's
    /// `cls.predictions.*` beside `bert.*`; LayerNorm `weight/bias` found as `gamma/beta` too),
    /// read as [`Checkpoint::weight`] reads; `None` when the file has no such tensor.
    pub fn top_level_weight(
        &self,
        name: &str,
        shape: &[usize],
    ) -> Result<Option<Weight>, WeightsError> {
        let Some(full) = self.resolve_full(name.to_string()) else {
            return Ok(None);
        };
        let found = &self.shapes[&full];
        if found.as_slice() != shape {
            return Err(WeightsError::Shape {
                name: full,
                path: self.path.clone(),
                expected: shape.to_vec(),
                found: found.clone(),
            });
        }
        self.read_tensor(full, shape).map(Some)
    }

    /// The stored tensor `full`, whose shape was checked to be `shape`.
    fn read_tensor(&self, full: String, shape: &[usize]) -> Result<Weight, WeightsError> {
        self.charge(&full, shape)?;
        let count: usize = shape.iter().product();
        if let Backend::Safetensors(st) = self.backend.as_ref() {
            if let Ok(view) = st.get(&full) {
                let bytes = view.data();
                if cfg!(target_endian = "little")
                    && view.dtype() == safetensors::Dtype::F32
                    && bytes.len() == count * 4
                    && (bytes.as_ptr() as usize).is_multiple_of(std::mem::align_of::<f32>())
                {
                    let weight = Weight {
                        ptr: bytes.as_ptr().cast::<f32>(),
                        len: count,
                        shape: shape.to_vec(),
                        _keep: Keep::Mapped(Arc::clone(st)),
                    };
                    self.check_finite(&full, shape, &weight)?;
                    return Ok(weight);
                }
            }
        }
        if let Backend::Ct2 { model, names } = self.backend.as_ref() {
            let values = model.slice(&names[&full])?.values;
            self.check_finite(&full, shape, &values)?;
            return Ok(Weight::owned(values, shape.to_vec()));
        }
        let tensor = self.load_f32(&full)?;
        let values = tensor
            .flatten_all()
            .and_then(|t| t.to_vec1::<f32>())
            .map_err(|e| self.error(e))?;
        self.check_finite(&full, shape, &values)?;
        Ok(Weight::owned(values, shape.to_vec()))
    }

    /// The stored tensor `full`, as contiguous f32; integer types are refused.
    fn load_f32(&self, full: &str) -> Result<Tensor, WeightsError> {
        let read_err = |problem: TensorProblem| WeightsError::Read {
            path: self.path.clone(),
            problem: ReadProblem::Tensor {
                name: full.to_string(),
                problem,
            },
        };
        let dtype_err = |dtype: String| WeightsError::DType {
            name: full.to_string(),
            path: self.path.clone(),
            dtype,
        };
        let tensor = match self.backend.as_ref() {
            Backend::Safetensors(st) => st
                .load(full, &Device::Cpu)
                .map_err(|e| read_err(TensorProblem::Candle(Box::new(e))))?,
            Backend::Torch(file) => {
                if let Some(t) = file.dtype(full).filter(|t| !t.is_float()) {
                    return Err(dtype_err(t.name().to_string()));
                }
                file.read(full)
                    .map_err(|e| read_err(e.into()))?
                    .ok_or_else(|| read_err(TensorProblem::NotFound))?
            }
            Backend::Ct2 { model, names } => {
                let slice = names
                    .get(full)
                    .ok_or_else(|| read_err(TensorProblem::NotFound))?;
                let t = model.slice(slice)?;
                Tensor::from_vec(t.values, t.shape, &Device::Cpu)
                    .map_err(|e| read_err(TensorProblem::Candle(Box::new(e))))?
            }
        };
        match tensor.dtype() {
            DType::F32 | DType::F16 | DType::BF16 | DType::F64 => {}
            other => return Err(dtype_err(format!("{other:?}"))),
        }
        tensor
            .to_dtype(DType::F32)
            .and_then(|t| t.contiguous())
            .map_err(|e| read_err(TensorProblem::Candle(Box::new(e))))
    }
}

/// What keeps a [`Weight`]'s values alive (held, never read: `Weight::ptr` points into it).
#[allow(dead_code)]
enum Keep {
    /// The memory map of the safetensors file they sit in.
    Mapped(Arc<MmapedSafetensors>),
    /// Our own copy (the pointer is into this vector's heap buffer, which never moves).
    Owned(Vec<f32>),
}

/// The f32 values of one tensor, row-major: in place in a checkpoint's memory map, or owned.
///
/// Cheap to keep: a mapped weight costs no memory of its own (its pages belong to the page
/// cache and are shared with every other process reading the file).
pub struct Weight {
    ptr: *const f32,
    len: usize,
    shape: Vec<usize>,
    _keep: Keep,
}

// SAFETY: a Weight is read-only: its values are never written after construction, and what
// holds them (a read-only file mapping or a Vec that only the Weight owns) lives as long as it.
unsafe impl Send for Weight {}
// SAFETY: as for Send; shared references only read.
unsafe impl Sync for Weight {}

impl Weight {
    /// Values of our own, of `shape`.
    pub fn owned(values: Vec<f32>, shape: Vec<usize>) -> Weight {
        assert_eq!(
            values.len(),
            shape.iter().product::<usize>(),
            "weight shape"
        );
        Weight {
            ptr: values.as_ptr(),
            len: values.len(),
            shape,
            _keep: Keep::Owned(values),
        }
    }

    /// The tensor's shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Whether the values are read in place from a memory map.
    pub fn is_mapped(&self) -> bool {
        matches!(self._keep, Keep::Mapped(_))
    }

    /// Drop this weight's pages from the process (not from the page cache) when it is read in
    /// place: after a packed copy has taken over its work, it need not stay resident. Reading it
    /// again later simply maps the pages again.
    pub fn release_pages(&self) {
        if self.is_mapped() {
            // SAFETY: `ptr` points at `len` initialised f32 values, `len * 4` bytes, that `_keep`
            // keeps alive.
            let bytes = unsafe { std::slice::from_raw_parts(self.ptr.cast::<u8>(), self.len * 4) };
            super::pages::release_mapped(bytes);
        }
    }
}

impl std::ops::Deref for Weight {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        // SAFETY: `ptr` points at `len` initialised, aligned f32 values that `_keep` keeps
        // alive and that nothing writes.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl std::fmt::Debug for Weight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Weight")
            .field("shape", &self.shape)
            .field("mapped", &self.is_mapped())
            .finish()
    }
}

/// Open a `pytorch_model.bin` (either of torch's formats).
fn open_bin(path: &Path) -> Result<(Backend, HashMap<String, Vec<usize>>), WeightsError> {
    let file = TorchFile::open(path).map_err(|e| match e.format {
        Some(pytorch::Format::Legacy) if !e.damaged() => WeightsError::LegacyPickle {
            path: path.to_path_buf(),
            problem: Box::new(e.problem),
        },
        _ => WeightsError::Read {
            path: path.to_path_buf(),
            problem: ReadProblem::Bin(Box::new(e)),
        },
    })?;
    let shapes = file
        .shapes()
        .map(|(name, shape)| (name.to_string(), shape.to_vec()))
        .collect();
    Ok((Backend::Torch(file), shapes))
}

/// What keeps a [`StoredMatrix`]'s bytes alive (held, never read: `StoredMatrix::ptr` points
/// into it).
#[allow(dead_code)]
enum KeepBytes {
    /// The memory map of the GGUF file they sit in.
    Gguf(Arc<memmap2::Mmap>),
    /// The memory map of the safetensors file they sit in.
    Safetensors(Arc<MmapedSafetensors>),
    /// Our own copy (a GGUF q/k projection with llama.cpp's row order undone).
    Owned(Vec<u8>),
}

/// A weight matrix `[outputs, inputs]` kept in its file's storage format (a GGUF block type,
/// or 16-bit floats), decoded inside the kernels ([`crate::kernels::quant`]): in place
/// in the file's memory map, or, where rows had to be reordered, a copy of the same bytes.
pub struct StoredMatrix {
    ptr: *const u8,
    len: usize,
    dtype: QuantType,
    outputs: usize,
    inputs: usize,
    _keep: KeepBytes,
}

// SAFETY: as for `Weight`: read-only bytes kept alive by `_keep`, never written.
unsafe impl Send for StoredMatrix {}
// SAFETY: as for Send; shared references only read.
unsafe impl Sync for StoredMatrix {}

impl StoredMatrix {
    fn checked(
        bytes: &[u8],
        dtype: impl Into<QuantType>,
        outputs: usize,
        inputs: usize,
        keep: KeepBytes,
    ) -> Result<StoredMatrix, QuantError> {
        let dtype = dtype.into();
        QuantMatrix::new(bytes, dtype, outputs, inputs)?;
        Ok(StoredMatrix {
            ptr: bytes.as_ptr(),
            len: bytes.len(),
            dtype,
            outputs,
            inputs,
            _keep: keep,
        })
    }

    /// `bytes` (inside `map`) as an `outputs × inputs` matrix of `dtype`, read in place.
    pub fn in_map(
        map: &Arc<memmap2::Mmap>,
        range: std::ops::Range<usize>,
        dtype: impl Into<QuantType>,
        outputs: usize,
        inputs: usize,
    ) -> Result<StoredMatrix, QuantError> {
        let bytes = map.get(range).unwrap_or(&[]);
        StoredMatrix::checked(
            bytes,
            dtype,
            outputs,
            inputs,
            KeepBytes::Gguf(Arc::clone(map)),
        )
    }

    /// Bytes of our own as an `outputs × inputs` matrix of `dtype`.
    pub fn owned(
        bytes: Vec<u8>,
        dtype: impl Into<QuantType>,
        outputs: usize,
        inputs: usize,
    ) -> Result<StoredMatrix, QuantError> {
        // The pointer is into the vector's heap buffer, which never moves.
        let (ptr, len) = (bytes.as_ptr(), bytes.len());
        // SAFETY: `ptr`/`len` describe `bytes`, which the matrix keeps.
        let view = unsafe { std::slice::from_raw_parts(ptr, len) };
        StoredMatrix::checked(view, dtype, outputs, inputs, KeepBytes::Owned(bytes))
    }

    /// The storage format.
    pub fn dtype(&self) -> QuantType {
        self.dtype
    }

    /// The stored bytes.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr` points at `len` bytes that `_keep` keeps alive and nothing writes.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The matrix, for the kernels.
    pub fn matrix(&self) -> QuantMatrix<'_> {
        QuantMatrix::new(self.bytes(), self.dtype, self.outputs, self.inputs)
            .expect("checked when the matrix was made")
    }

    /// `(outputs, inputs)`.
    pub fn shape(&self) -> [usize; 2] {
        [self.outputs, self.inputs]
    }

    /// The first weight that decodes to NaN or ±inf (row-major index) and its value. Decodes
    /// every weight once, in parallel stretches of rows, into small buffers.
    pub fn first_non_finite(&self) -> Option<(usize, f32)> {
        use rayon::prelude::*;
        let m = self.matrix();
        if self.inputs == 0 || self.outputs == 0 {
            return None;
        }
        let rows = (16 * 1024 / self.inputs).max(1);
        (0..self.outputs.div_ceil(rows))
            .into_par_iter()
            .find_map_first(|chunk| {
                let first = chunk * rows;
                let n = rows.min(self.outputs - first);
                let mut buf = vec![0f32; n * self.inputs];
                m.dequantize_rows(first, &mut buf);
                first_non_finite(&buf).map(|i| (first * self.inputs + i, buf[i]))
            })
    }
}

impl std::fmt::Debug for StoredMatrix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredMatrix")
            .field("dtype", &self.dtype)
            .field("shape", &self.shape())
            .finish()
    }
}

/// A matrix weight as a file holds it: f32 ([`Weight`], in place or converted) or in a storage
/// format the kernels decode on the fly ([`StoredMatrix`]: GGUF blocks, 16-bit floats).
pub enum MatrixWeight {
    /// f32 values, `[rows, cols]`.
    F32(Weight),
    /// As stored, `[outputs, inputs]`.
    Stored(StoredMatrix),
}

impl From<Weight> for MatrixWeight {
    fn from(w: Weight) -> MatrixWeight {
        MatrixWeight::F32(w)
    }
}

impl From<StoredMatrix> for MatrixWeight {
    fn from(m: StoredMatrix) -> MatrixWeight {
        MatrixWeight::Stored(m)
    }
}

impl MatrixWeight {
    /// The tensor's shape.
    pub fn shape(&self) -> Vec<usize> {
        match self {
            MatrixWeight::F32(w) => w.shape().to_vec(),
            MatrixWeight::Stored(m) => m.shape().to_vec(),
        }
    }

    /// Number of weights.
    pub fn elements(&self) -> usize {
        self.shape().iter().product()
    }

    /// The f32 values, when it holds f32.
    pub fn as_f32(&self) -> Option<&Weight> {
        match self {
            MatrixWeight::F32(w) => Some(w),
            MatrixWeight::Stored(_) => None,
        }
    }

    /// The stored matrix, when it is kept in its storage format.
    pub fn as_stored(&self) -> Option<&StoredMatrix> {
        match self {
            MatrixWeight::F32(_) => None,
            MatrixWeight::Stored(m) => Some(m),
        }
    }

    /// Whether nothing of it was converted into memory of our own (in place in a map, or kept
    /// in its storage format): such a weight is never packed at load.
    pub fn is_mapped(&self) -> bool {
        match self {
            MatrixWeight::F32(w) => w.is_mapped(),
            MatrixWeight::Stored(_) => true,
        }
    }

    /// Rows `ids` of a `[rows, width]` matrix, decoded, one after the other into `out`
    /// (`ids.len() × width`): an embedding lookup that decodes only the rows it reads. Ids must
    /// be inside the table (the model checks its inputs first); out of range, this panics.
    pub fn gather(&self, ids: &[u32], out: &mut [f32]) {
        let width = self.shape().last().copied().unwrap_or(0);
        assert_eq!(out.len(), ids.len() * width, "gather output shape");
        if width == 0 {
            return;
        }
        for (dst, &id) in out.chunks_exact_mut(width).zip(ids) {
            match self {
                MatrixWeight::F32(w) => {
                    dst.copy_from_slice(&w[id as usize * width..][..width]);
                }
                MatrixWeight::Stored(m) => {
                    let got = m.matrix().dequantize_rows(id as usize, dst);
                    assert_eq!(got, 1, "row {id} of a table of {} rows", m.outputs);
                }
            }
        }
    }

    /// Drop the pages this weight reads in place from the process (see
    /// [`Weight::release_pages`]).
    pub fn release_pages(&self) {
        if let MatrixWeight::F32(w) = self {
            w.release_pages();
        }
    }
}

impl Checkpoint {
    /// Tensor `name` (without the prefix) of unsigned bytes, checked against `shape`, as a
    /// safetensors file stores it (gpt-oss's MXFP4 `*_blocks` and `*_scales`); a tensor of any
    /// other type, or in another format, is refused naming its type.
    pub fn bytes(&self, name: &str, shape: &[usize]) -> Result<&[u8], WeightsError> {
        let full = self.locate(name, shape)?;
        let dtype_err = |dtype: String| WeightsError::NotBytes {
            name: full.clone(),
            path: self.path.clone(),
            dtype,
        };
        let Backend::Safetensors(st) = self.backend.as_ref() else {
            return Err(dtype_err("of a pytorch or CTranslate2 file".to_string()));
        };
        let view = st.get(&full).map_err(|e| WeightsError::Read {
            path: self.path.clone(),
            problem: ReadProblem::Tensor {
                name: full.clone(),
                problem: TensorProblem::Candle(Box::new(e)),
            },
        })?;
        if view.dtype() != safetensors::Dtype::U8 {
            return Err(dtype_err(format!("{:?}", view.dtype())));
        }
        Ok(view.data())
    }

    /// Drop from the process the mapped pages of `bytes`, a tensor [`Checkpoint::bytes`] gave
    /// and whose contents have been copied (see [`Weight::release_pages`]). Bytes that are not
    /// in this checkpoint's memory map are left alone.
    pub fn release_bytes(&self, bytes: &[u8]) {
        if let Backend::Safetensors(st) = self.backend.as_ref() {
            let inside = st.tensors().iter().any(|(_, view)| {
                let data = view.data().as_ptr_range();
                let range = bytes.as_ptr_range();
                data.start <= range.start && range.end <= data.end
            });
            if inside {
                super::pages::release_mapped(bytes);
            }
        }
    }

    /// Matrix `name` (without the prefix), checked against `shape` and checked to be finite:
    /// a safetensors file's f16 or bf16 matrix stays 16-bit, in place in its memory map, for the
    /// kernels to decode ([`StoredMatrix`]); anything else is read as [`Checkpoint::weight`]
    /// reads it.
    pub fn matrix(&self, name: &str, shape: &[usize]) -> Result<MatrixWeight, WeightsError> {
        let full = self.locate(name, shape)?;
        if let (Backend::Safetensors(st), &[outputs, inputs]) = (self.backend.as_ref(), shape) {
            if let Ok(view) = st.get(&full) {
                let dtype = match view.dtype() {
                    safetensors::Dtype::F16 => Some(GgmlDType::F16),
                    safetensors::Dtype::BF16 => Some(GgmlDType::BF16),
                    _ => None,
                };
                if let Some(dtype) = dtype.filter(|_| cfg!(target_endian = "little")) {
                    self.charge(&full, shape)?;
                    let bytes = view.data();
                    if let Some((index, value)) = first_non_finite_half(bytes, dtype) {
                        return Err(WeightsError::NonFinite {
                            name: full,
                            path: self.path.clone(),
                            value,
                            index,
                            shape: shape.to_vec(),
                        });
                    }
                    let keep = KeepBytes::Safetensors(Arc::clone(st));
                    return StoredMatrix::checked(bytes, dtype, outputs, inputs, keep)
                        .map(MatrixWeight::Stored)
                        .map_err(|e| WeightsError::Read {
                            path: self.path.clone(),
                            problem: ReadProblem::Tensor {
                                name: full,
                                problem: TensorProblem::Stored(Box::new(e)),
                            },
                        });
                }
            }
        }
        self.read_tensor(full, shape).map(MatrixWeight::F32)
    }
}

/// The first NaN or ±inf among little-endian 16-bit floats (f16 or bf16): its index and value.
fn first_non_finite_half(bytes: &[u8], dtype: GgmlDType) -> Option<(usize, f32)> {
    let (exponent, mantissa) = match dtype {
        GgmlDType::F16 => (0x7c00u16, 0x03ffu16),
        _ => (0x7f80, 0x007f),
    };
    let index = bytes
        .chunks_exact(2)
        .position(|b| u16::from_le_bytes([b[0], b[1]]) & exponent == exponent)?;
    let bits = u16::from_le_bytes([bytes[2 * index], bytes[2 * index + 1]]);
    let value = match (bits & mantissa != 0, bits & 0x8000 != 0) {
        (true, _) => f32::NAN,
        (false, false) => f32::INFINITY,
        (false, true) => f32::NEG_INFINITY,
    };
    Some((index, value))
}
