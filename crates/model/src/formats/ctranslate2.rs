//! CTranslate2's `model.bin`, read with bounds: the format as its `models/model.cc` reads it
//! and `ctranslate2/specs/model_spec.py` writes it (binary versions 1 to 6), all
//! little-endian:
//!
//! ```text
//! u32 binary_version
//! (version ≥ 2) string spec_name, u32 spec_revision
//! u32 variable_count, then per variable:
//!     string name, u8 rank, rank × u32 dims,
//!     (version ≥ 4) u8 dtype id (0 float32, 1 int8, 2 int16, 3 int32, 4 float16, 5 bfloat16), u32 byte count
//!     (version < 4) u8 item size (4 float32, 2 int16, 1 int8), u32 element count
//!     the bytes
//! (version ≥ 3) u32 alias_count, then per alias: string alias, string variable name
//! ```
//!
//! where a string is a u16 length counting a final NUL, then that many bytes. Every count and
//! size is checked against what is left of the file before anything is allocated for it; each
//! malformation is a [`Ct2Problem`]. The file is memory-mapped; [`Ct2Model::tensor`] gives a
//! variable as f32 (float16 and bfloat16 widened, int8 and int16 weights dequantised with their
//! `<name>_scale` companion as CTranslate2 does: `value × (1 / scale)`, one scale per row).
//! The model folder's `config.json` and vocabulary (`vocabulary.json` or `vocabulary.txt`) are
//! read by [`read_config`] and [`read_vocabulary`].

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use memmap2::Mmap;
use serde_json::Value;

use crate::small_file::{self, ReadError};

/// The newest binary version this reader knows (CTranslate2 4.x writes 6).
pub const MAX_BINARY_VERSION: u32 = 6;
/// The highest rank a variable may have (CTranslate2's are at most 3).
pub const MAX_RANK: usize = 8;
/// The largest `config.json` read.
const MAX_CONFIG_BYTES: u64 = 16 << 20;
/// The largest vocabulary file read (Whisper's is 0.5 MB, large NLLB ones about 5 MB).
const MAX_VOCABULARY_BYTES: u64 = 64 << 20;

/// A variable's element type, by CTranslate2's `DataType` id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ct2Dtype {
    /// 0
    F32,
    /// 1 (weights come with a float32 `<name>_scale`)
    I8,
    /// 2
    I16,
    /// 3
    I32,
    /// 4
    F16,
    /// 5
    BF16,
}

impl Ct2Dtype {
    fn from_id(id: u8) -> Option<Ct2Dtype> {
        Some(match id {
            0 => Ct2Dtype::F32,
            1 => Ct2Dtype::I8,
            2 => Ct2Dtype::I16,
            3 => Ct2Dtype::I32,
            4 => Ct2Dtype::F16,
            5 => Ct2Dtype::BF16,
            _ => return None,
        })
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Ct2Dtype::I8 => 1,
            Ct2Dtype::I16 | Ct2Dtype::F16 | Ct2Dtype::BF16 => 2,
            Ct2Dtype::F32 | Ct2Dtype::I32 => 4,
        }
    }

    /// CTranslate2's name for it (`float16`, `int8`, …).
    pub fn name(self) -> &'static str {
        match self {
            Ct2Dtype::F32 => "float32",
            Ct2Dtype::I8 => "int8",
            Ct2Dtype::I16 => "int16",
            Ct2Dtype::I32 => "int32",
            Ct2Dtype::F16 => "float16",
            Ct2Dtype::BF16 => "bfloat16",
        }
    }
}

/// One stored variable: where its bytes are, not the bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct Ct2Variable {
    /// Its name (`encoder/layer_0/self_attention/linear_0/weight`).
    pub name: String,
    /// Its dimensions (empty for a scalar).
    pub shape: Vec<usize>,
    /// Its element type.
    pub dtype: Ct2Dtype,
    /// Where its bytes start in the file.
    pub offset: usize,
    /// How many bytes (`product(shape) × dtype.size()`).
    pub len: usize,
}

impl Ct2Variable {
    /// Elements (1 for a scalar).
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
}

/// A variable as f32.
#[derive(Debug, Clone, PartialEq)]
pub struct Ct2Tensor {
    /// Its dimensions.
    pub shape: Vec<usize>,
    /// Its values, row-major.
    pub values: Vec<f32>,
}

/// What is wrong inside a `model.bin`.
#[derive(Debug, Clone, PartialEq)]
pub enum Ct2Problem {
    /// The file ends before `what` (at byte `offset`, `need` bytes, `have` left).
    Truncated {
        /// What was being read.
        what: String,
        /// Where.
        offset: usize,
        /// Bytes it needs.
        need: u64,
        /// Bytes left.
        have: usize,
    },
    /// A binary version this reader does not know (0, or newer than [`MAX_BINARY_VERSION`]).
    Version(u32),
    /// A string with length 0, no final NUL, or not UTF-8.
    BadString {
        /// Where it starts.
        offset: usize,
        /// What is wrong.
        problem: &'static str,
    },
    /// More than [`MAX_RANK`] dimensions.
    Rank {
        /// The variable.
        name: String,
        /// Its rank.
        rank: usize,
    },
    /// Dimensions whose product overflows.
    ShapeOverflow {
        /// The variable.
        name: String,
    },
    /// An element type id (or, before version 4, an item size) CTranslate2 does not have.
    Dtype {
        /// The variable.
        name: String,
        /// The id or size.
        id: u8,
    },
    /// The byte count is not `product(shape) × element size`.
    PayloadSize {
        /// The variable.
        name: String,
        /// The byte count stored.
        bytes: u64,
        /// What the shape and type need.
        expected: u64,
    },
    /// Two variables (or an alias and a variable) with one name.
    Duplicate(String),
    /// An alias to a variable that is not there.
    AliasTarget {
        /// The alias.
        alias: String,
        /// The name it points at.
        target: String,
    },
    /// Bytes after the last alias.
    Trailing(usize),
}

impl fmt::Display for Ct2Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ct2Problem::Truncated {
                what,
                offset,
                need,
                have,
            } => write!(
                f,
                "it ends inside {what} at byte {offset}: {need} bytes needed, {have} left"
            ),
            Ct2Problem::Version(v) => write!(
                f,
                "binary version {v}, this reader knows 1 to {MAX_BINARY_VERSION}"
            ),
            Ct2Problem::BadString { offset, problem } => {
                write!(f, "the string at byte {offset} {problem}")
            }
            Ct2Problem::Rank { name, rank } => {
                write!(
                    f,
                    "variable {name} has {rank} dimensions, at most {MAX_RANK} are read"
                )
            }
            Ct2Problem::ShapeOverflow { name } => {
                write!(f, "variable {name} has dimensions whose product overflows")
            }
            Ct2Problem::Dtype { name, id } => {
                write!(f, "variable {name} has an unknown element type ({id})")
            }
            Ct2Problem::PayloadSize {
                name,
                bytes,
                expected,
            } => write!(
                f,
                "variable {name} stores {bytes} bytes, its shape and type need {expected}"
            ),
            Ct2Problem::Duplicate(name) => write!(f, "the name {name} appears twice"),
            Ct2Problem::AliasTarget { alias, target } => {
                write!(
                    f,
                    "alias {alias} points at {target}, which is not a variable"
                )
            }
            Ct2Problem::Trailing(n) => write!(f, "{n} bytes follow the last alias"),
        }
    }
}

/// Why a CTranslate2 model (or one of its variables or files) cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum Ct2Error {
    /// The file cannot be opened or mapped.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The system's reason.
        source: std::io::Error,
    },
    /// A small sibling file (config, vocabulary) cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    ReadSmall {
        /// The file.
        path: PathBuf,
        /// Why.
        source: ReadError,
    },
    /// The file is not a well-formed `model.bin`.
    #[error("{} is not a valid CTranslate2 model.bin ({problem}); convert the model again with ct2-transformers-converter", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: Ct2Problem,
    },
    /// A variable the caller asked for is not there.
    #[error("{} has no variable {name}", path.display())]
    Missing {
        /// The file.
        path: PathBuf,
        /// The name asked for.
        name: String,
    },
    /// An integer weight whose scale is missing or does not fit it.
    #[error("{}: variable {name} cannot be dequantised ({problem})", path.display())]
    Scale {
        /// The file.
        path: PathBuf,
        /// The variable.
        name: String,
        /// What is wrong with its `_scale`.
        problem: String,
    },
    /// A sibling JSON file that is not what CTranslate2 writes.
    #[error("{} is not valid ({problem})", path.display())]
    BadFile {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// A model of a spec no family here reads (a translation `TransformerSpec`, …).
    #[error("{} holds a CTranslate2 {spec} model; attnviz reads CTranslate2 folders of {} only: use the model's transformers checkpoint (config.json and model.safetensors) instead", path.display(), known.join(", "))]
    Spec {
        /// The file.
        path: PathBuf,
        /// Its spec name (`TransformerSpec`; empty before binary version 2).
        spec: String,
        /// The specs read, with their families (`WhisperSpec (Whisper)`).
        known: Vec<String>,
    },
    /// A scalar attribute of the spec with a value the family's network does not have.
    #[error("{}: {name} is {value} where {expected}; this CTranslate2 model is not one attnviz reads", path.display())]
    Attribute {
        /// The file.
        path: PathBuf,
        /// The attribute (`decoder/activation`).
        name: String,
        /// Its value (`missing` when absent).
        value: String,
        /// What the family needs.
        expected: String,
    },
    /// A fused variable whose rows do not split into the parts asked for.
    #[error("{}: variable {name} has {rows} rows, which do not split into {parts} equal parts", path.display())]
    Split {
        /// The file.
        path: PathBuf,
        /// The variable.
        name: String,
        /// Its first dimension.
        rows: usize,
        /// The parts asked for.
        parts: usize,
    },
}

/// The file name of a CTranslate2 model's weights, beside its `config.json` and vocabulary.
pub const MODEL_BIN: &str = "model.bin";

/// Whether `weights` is a CTranslate2 `model.bin` (what a folder's weights are when it has no
/// transformers checkpoint; `pytorch_model.bin` is named otherwise).
pub fn is_model_bin(weights: &[PathBuf]) -> bool {
    matches!(weights, [one] if one.file_name().is_some_and(|n| n == MODEL_BIN))
}

/// Part of a variable under another name: the whole of it, or one of `parts` equal blocks of
/// its rows (CTranslate2 fuses a layer's query, key and value maps into one `linear_0`, and a
/// cross-attention's key and value maps into one `linear_1`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ct2Slice {
    /// The stored variable (or alias).
    pub variable: String,
    /// Which block of rows (0-based).
    pub part: usize,
    /// How many blocks the rows split into (1: the whole variable).
    pub parts: usize,
}

impl Ct2Slice {
    /// The whole of `variable`.
    pub fn whole(variable: impl Into<String>) -> Ct2Slice {
        Ct2Slice {
            variable: variable.into(),
            part: 0,
            parts: 1,
        }
    }

    /// Block `part` of `parts` of `variable`'s rows.
    pub fn rows(variable: impl Into<String>, part: usize, parts: usize) -> Ct2Slice {
        Ct2Slice {
            variable: variable.into(),
            part,
            parts,
        }
    }
}

/// What a family makes of a CTranslate2 model: the config.json and generation_config.json
/// transformers' checkpoint of the same model has (as JSON values, which the family's own
/// readers then read), and its tensors under transformers' names (inside the base model).
#[derive(Clone, Debug)]
pub struct Ct2Layout {
    /// transformers' config.json.
    pub config: Value,
    /// transformers' generation_config.json.
    pub generation: Value,
    /// Each tensor the family reads, by its transformers name, and where it is in the file.
    pub names: Vec<(String, Ct2Slice)>,
}

/// The model's tokens, as its tokenizer knows them (special tokens' ids, language tokens'
/// texts), for the ids transformers' configs name.
pub trait Ct2Tokens {
    /// The id of `token` (`<|endoftext|>`).
    fn id(&self, token: &str) -> Option<u32>;
    /// The text of token `id`.
    fn token(&self, id: u32) -> Option<String>;
}

/// How a family reads CTranslate2 models: the spec names it reads, and the function that lays
/// a model out as transformers' checkpoint (from the `model.bin`, the folder's `config.json`
/// when there is one, and the model's tokens).
#[derive(Clone, Copy)]
pub struct Ct2Reader {
    /// The spec names (`WhisperSpec`).
    pub specs: &'static [&'static str],
    /// The layout.
    pub layout: fn(&Ct2Model, Option<&Value>, &dyn Ct2Tokens) -> Result<Ct2Layout, Ct2Error>,
}

impl fmt::Debug for Ct2Reader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ct2Reader")
            .field("specs", &self.specs)
            .finish()
    }
}

enum Bytes {
    Map(Mmap),
    Owned(Vec<u8>),
}

impl std::ops::Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Map(m) => m,
            Bytes::Owned(v) => v,
        }
    }
}

/// A parsed `model.bin`: its header, its variables (in file order) and aliases, and the file's
/// bytes (memory-mapped) for reading them.
pub struct Ct2Model {
    path: PathBuf,
    bytes: Bytes,
    /// The binary version (1 to 6).
    pub binary_version: u32,
    /// The spec's name (`WhisperSpec`, `TransformerSpec`, …; empty before version 2).
    pub spec: String,
    /// The spec's revision (1 before version 2).
    pub revision: u32,
    variables: Vec<Ct2Variable>,
    aliases: Vec<(String, String)>,
    index: HashMap<String, usize>,
}

impl fmt::Debug for Ct2Model {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ct2Model")
            .field("path", &self.path)
            .field("binary_version", &self.binary_version)
            .field("spec", &self.spec)
            .field("revision", &self.revision)
            .field("variables", &self.variables.len())
            .field("aliases", &self.aliases)
            .finish()
    }
}

/// A bounds-checked reader over the file's bytes.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn left(&self) -> usize {
        self.bytes.len() - self.at
    }

    fn take(&mut self, n: u64, what: impl Fn() -> String) -> Result<&'a [u8], Ct2Problem> {
        if n > self.left() as u64 {
            return Err(Ct2Problem::Truncated {
                what: what(),
                offset: self.at,
                need: n,
                have: self.left(),
            });
        }
        let s = &self.bytes[self.at..self.at + n as usize];
        self.at += n as usize;
        Ok(s)
    }

    fn u8(&mut self, what: impl Fn() -> String) -> Result<u8, Ct2Problem> {
        Ok(self.take(1, what)?[0])
    }

    fn u16(&mut self, what: impl Fn() -> String) -> Result<u16, Ct2Problem> {
        let b = self.take(2, what)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&mut self, what: impl Fn() -> String) -> Result<u32, Ct2Problem> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn string(&mut self, what: impl Fn() -> String + Copy) -> Result<String, Ct2Problem> {
        let start = self.at;
        let n = self.u16(what)?;
        if n == 0 {
            return Err(Ct2Problem::BadString {
                offset: start,
                problem: "has length 0",
            });
        }
        let b = self.take(u64::from(n), what)?;
        let (text, nul) = b.split_at(b.len() - 1);
        if nul != [0] {
            return Err(Ct2Problem::BadString {
                offset: start,
                problem: "does not end with a NUL byte",
            });
        }
        String::from_utf8(text.to_vec()).map_err(|_| Ct2Problem::BadString {
            offset: start,
            problem: "is not UTF-8",
        })
    }
}

/// Fewest bytes a variable record can take: a 1-byte string (2 + 1), rank, type, byte count.
const MIN_VARIABLE_RECORD: usize = 3 + 1 + 1 + 4;
/// Fewest bytes an alias record can take: two 1-byte strings.
const MIN_ALIAS_RECORD: usize = 6;

/// What [`parse`] finds: version, spec name, revision, variables, aliases.
type Parsed = (u32, String, u32, Vec<Ct2Variable>, Vec<(String, String)>);

fn parse(bytes: &[u8]) -> Result<Parsed, Ct2Problem> {
    let mut c = Cursor { bytes, at: 0 };
    let version = c.u32(|| "the binary version".into())?;
    if version == 0 || version > MAX_BINARY_VERSION {
        return Err(Ct2Problem::Version(version));
    }
    let (spec, revision) = if version >= 2 {
        let spec = c.string(|| "the spec name".into())?;
        (spec, c.u32(|| "the spec revision".into())?)
    } else {
        (String::new(), 1)
    };
    let count = c.u32(|| "the variable count".into())? as usize;
    if count > c.left() / MIN_VARIABLE_RECORD {
        return Err(Ct2Problem::Truncated {
            what: format!("{count} variables"),
            offset: c.at,
            need: (count as u64) * MIN_VARIABLE_RECORD as u64,
            have: c.left(),
        });
    }
    let mut variables = Vec::with_capacity(count);
    let mut seen = HashMap::with_capacity(count);
    for i in 0..count {
        let name = c.string(|| format!("the name of variable {i}"))?;
        let what = || format!("variable {name}");
        let rank = c.u8(what)? as usize;
        if rank > MAX_RANK {
            return Err(Ct2Problem::Rank { name, rank });
        }
        let mut shape = Vec::with_capacity(rank);
        for _ in 0..rank {
            shape.push(c.u32(what)? as usize);
        }
        let numel = shape
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(d as u64))
            .ok_or_else(|| Ct2Problem::ShapeOverflow { name: name.clone() })?;
        let (dtype, bytes) = if version >= 4 {
            let id = c.u8(what)?;
            let dtype = Ct2Dtype::from_id(id).ok_or_else(|| Ct2Problem::Dtype {
                name: name.clone(),
                id,
            })?;
            (dtype, u64::from(c.u32(what)?))
        } else {
            let size = c.u8(what)?;
            let dtype = match size {
                4 => Ct2Dtype::F32,
                2 => Ct2Dtype::I16,
                1 => Ct2Dtype::I8,
                _ => {
                    return Err(Ct2Problem::Dtype {
                        name: name.clone(),
                        id: size,
                    })
                }
            };
            (dtype, u64::from(c.u32(what)?) * u64::from(size))
        };
        let expected = numel
            .checked_mul(dtype.size() as u64)
            .ok_or_else(|| Ct2Problem::ShapeOverflow { name: name.clone() })?;
        if bytes != expected {
            return Err(Ct2Problem::PayloadSize {
                name,
                bytes,
                expected,
            });
        }
        let offset = c.at;
        c.take(bytes, what)?;
        if seen.insert(name.clone(), i).is_some() {
            return Err(Ct2Problem::Duplicate(name));
        }
        variables.push(Ct2Variable {
            name,
            shape,
            dtype,
            offset,
            len: bytes as usize,
        });
    }
    let mut aliases = Vec::new();
    if version >= 3 {
        let count = c.u32(|| "the alias count".into())? as usize;
        if count > c.left() / MIN_ALIAS_RECORD {
            return Err(Ct2Problem::Truncated {
                what: format!("{count} aliases"),
                offset: c.at,
                need: (count as u64) * MIN_ALIAS_RECORD as u64,
                have: c.left(),
            });
        }
        for i in 0..count {
            let alias = c.string(|| format!("alias {i}"))?;
            let target = c.string(|| format!("the target of alias {i}"))?;
            if !seen.contains_key(&target) {
                return Err(Ct2Problem::AliasTarget { alias, target });
            }
            if seen.contains_key(&alias) || aliases.iter().any(|(a, _)| a == &alias) {
                return Err(Ct2Problem::Duplicate(alias));
            }
            aliases.push((alias, target));
        }
    }
    if c.left() != 0 {
        return Err(Ct2Problem::Trailing(c.left()));
    }
    Ok((version, spec, revision, variables, aliases))
}

impl Ct2Model {
    /// Maps and parses `path` (a `model.bin`).
    pub fn open(path: &Path) -> Result<Ct2Model, Ct2Error> {
        let read_err = |source| Ct2Error::Read {
            path: path.to_path_buf(),
            source,
        };
        let file = small_file::open_regular(path).map_err(|e| match e {
            ReadError::Io(e) => read_err(e),
            ReadError::NotFound => read_err(std::io::ErrorKind::NotFound.into()),
            other => read_err(std::io::Error::other(other.to_string())),
        })?;
        // SAFETY: the map is read-only and private; a file truncated underneath it by another
        // process is the one case memmap2 cannot guard, as for every mapped checkpoint here.
        let map = unsafe { Mmap::map(&file) }.map_err(read_err)?;
        Self::from_bytes_at(Bytes::Map(map), path)
    }

    /// Parses a `model.bin` held in memory; `path` is only for messages.
    pub fn from_bytes(bytes: Vec<u8>, path: &Path) -> Result<Ct2Model, Ct2Error> {
        Self::from_bytes_at(Bytes::Owned(bytes), path)
    }

    fn from_bytes_at(bytes: Bytes, path: &Path) -> Result<Ct2Model, Ct2Error> {
        let (binary_version, spec, revision, variables, aliases) =
            parse(&bytes).map_err(|problem| Ct2Error::Corrupt {
                path: path.to_path_buf(),
                problem,
            })?;
        let index = variables
            .iter()
            .enumerate()
            .map(|(i, v)| (v.name.clone(), i))
            .collect();
        Ok(Ct2Model {
            path: path.to_path_buf(),
            bytes,
            binary_version,
            spec,
            revision,
            variables,
            aliases,
            index,
        })
    }

    /// The file this was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The variables in file order.
    pub fn variables(&self) -> &[Ct2Variable] {
        &self.variables
    }

    /// The aliases: `(alias, variable name)` (`decoder/projection/weight` →
    /// `decoder/embeddings/weight` for tied embeddings). CTranslate2 also aliases each one's
    /// `_scale`, which [`Ct2Model::tensor`] follows.
    pub fn aliases(&self) -> &[(String, String)] {
        &self.aliases
    }

    /// Variable `name`, following an alias.
    pub fn get(&self, name: &str) -> Option<&Ct2Variable> {
        let name = self
            .aliases
            .iter()
            .find(|(a, _)| a == name)
            .map_or(name, |(_, t)| t.as_str());
        self.index.get(name).map(|&i| &self.variables[i])
    }

    /// The stored bytes of `var` (little-endian elements).
    pub fn raw(&self, var: &Ct2Variable) -> &[u8] {
        &self.bytes[var.offset..var.offset + var.len]
    }

    /// A scalar integer variable (`encoder/num_heads`, `decoder/pre_norm`), when `name` is one.
    pub fn scalar_int(&self, name: &str) -> Option<i64> {
        let v = self.get(name)?;
        if !v.shape.is_empty() {
            return None;
        }
        let b = self.raw(v);
        Some(match v.dtype {
            Ct2Dtype::I8 => i64::from(b[0] as i8),
            Ct2Dtype::I16 => i64::from(i16::from_le_bytes([b[0], b[1]])),
            Ct2Dtype::I32 => i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            _ => return None,
        })
    }

    /// Variable `name` (or an alias) as f32: float32 as stored; float16 and bfloat16 widened;
    /// int32 and integer scalars as numbers; int8 and int16 weights dequantised with
    /// `<name>_scale` as CTranslate2's CPU `Dequantize` does (`value × (1 / scale)` in f32,
    /// one scale per row of the weight flattened to `[rows, rest]`, or one for all; an int16
    /// weight without a scale uses CTranslate2's global 1000).
    pub fn tensor(&self, name: &str) -> Result<Ct2Tensor, Ct2Error> {
        let var = self.get(name).ok_or_else(|| Ct2Error::Missing {
            path: self.path.clone(),
            name: name.to_string(),
        })?;
        let b = self.raw(var);
        let values: Vec<f32> = match var.dtype {
            Ct2Dtype::F32 => b
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
            Ct2Dtype::F16 => b
                .chunks_exact(2)
                .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
                .collect(),
            Ct2Dtype::BF16 => b
                .chunks_exact(2)
                .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32())
                .collect(),
            Ct2Dtype::I32 => b
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f32)
                .collect(),
            Ct2Dtype::I8 | Ct2Dtype::I16 => {
                let ints: Vec<f32> = if var.dtype == Ct2Dtype::I8 {
                    b.iter().map(|&x| f32::from(x as i8)).collect()
                } else {
                    b.chunks_exact(2)
                        .map(|c| f32::from(i16::from_le_bytes([c[0], c[1]])))
                        .collect()
                };
                if var.shape.is_empty() {
                    ints
                } else {
                    self.dequantize(var, ints)?
                }
            }
        };
        Ok(Ct2Tensor {
            shape: var.shape.clone(),
            values,
        })
    }

    /// The shape `slice` has: the variable's, its rows divided by the parts.
    pub fn slice_shape(&self, slice: &Ct2Slice) -> Result<Vec<usize>, Ct2Error> {
        let var = self.get(&slice.variable).ok_or_else(|| Ct2Error::Missing {
            path: self.path.clone(),
            name: slice.variable.clone(),
        })?;
        let mut shape = var.shape.clone();
        if slice.parts == 1 {
            return Ok(shape);
        }
        let rows = shape.first().copied().unwrap_or(1);
        if shape.is_empty() || slice.parts == 0 || !rows.is_multiple_of(slice.parts) {
            return Err(Ct2Error::Split {
                path: self.path.clone(),
                name: slice.variable.clone(),
                rows,
                parts: slice.parts,
            });
        }
        shape[0] = rows / slice.parts;
        Ok(shape)
    }

    /// `slice` as f32 ([`Ct2Model::tensor`] of its variable, then its block of rows).
    pub fn slice(&self, slice: &Ct2Slice) -> Result<Ct2Tensor, Ct2Error> {
        let shape = self.slice_shape(slice)?;
        if slice.part >= slice.parts {
            return Err(Ct2Error::Split {
                path: self.path.clone(),
                name: slice.variable.clone(),
                rows: shape.first().copied().unwrap_or(1) * slice.parts,
                parts: slice.parts,
            });
        }
        let mut t = self.tensor(&slice.variable)?;
        if slice.parts == 1 {
            return Ok(t);
        }
        let block: usize = shape.iter().product();
        let start = slice.part * block;
        t.values.truncate(start + block);
        t.values.drain(..start);
        Ok(Ct2Tensor {
            shape,
            values: t.values,
        })
    }

    /// A scalar attribute of the spec (`decoder/activation`) as an integer, checked to be one
    /// of `allowed`; `default` when the file does not have it (older specs).
    pub fn attribute(
        &self,
        name: &str,
        allowed: &[i64],
        default: Option<i64>,
        expected: &str,
    ) -> Result<i64, Ct2Error> {
        let bad = |value: String| Ct2Error::Attribute {
            path: self.path.clone(),
            name: name.to_string(),
            value,
            expected: expected.to_string(),
        };
        let value = match (self.get(name), default) {
            (None, Some(d)) => return Ok(d),
            (None, None) => return Err(bad("missing".into())),
            (Some(_), _) => self
                .scalar_int(name)
                .ok_or_else(|| bad("not an integer scalar".into()))?,
        };
        if allowed.contains(&value) {
            Ok(value)
        } else {
            Err(bad(value.to_string()))
        }
    }

    fn dequantize(&self, var: &Ct2Variable, ints: Vec<f32>) -> Result<Vec<f32>, Ct2Error> {
        // The variable's own name: an alias's scale is its target's.
        let name = var.name.as_str();
        let scale_err = |problem: String| Ct2Error::Scale {
            path: self.path.clone(),
            name: name.to_string(),
            problem,
        };
        let scale_name = format!("{name}_scale");
        let scales: Vec<f32> = match self.get(&scale_name) {
            Some(s) if matches!(s.dtype, Ct2Dtype::F32 | Ct2Dtype::F16 | Ct2Dtype::BF16) => {
                self.tensor(&scale_name)?.values
            }
            Some(s) => {
                return Err(scale_err(format!(
                    "{scale_name} is {}, not a float",
                    s.dtype.name()
                )))
            }
            None if var.dtype == Ct2Dtype::I16 => vec![1000.0],
            None => return Err(scale_err(format!("{scale_name} is missing"))),
        };
        let rows = scales.len();
        if rows == 0 || !ints.len().is_multiple_of(rows) || (rows != 1 && rows != var.shape[0]) {
            return Err(scale_err(format!(
                "{scale_name} has {rows} values for a weight of shape {:?}",
                var.shape
            )));
        }
        let depth = ints.len() / rows;
        let mut out = ints;
        for (row, &s) in out.chunks_mut(depth.max(1)).zip(&scales) {
            let r = 1.0f32 / s;
            for v in row {
                *v *= r;
            }
        }
        Ok(out)
    }
}

/// The model folder's `config.json` (CTranslate2's converters write one next to `model.bin`;
/// Whisper's names the alignment heads, language ids and suppressed tokens). `None` when absent.
pub fn read_config(dir: &Path) -> Result<Option<Value>, Ct2Error> {
    let path = dir.join("config.json");
    let bytes = match small_file::read_bytes(
        &path,
        MAX_CONFIG_BYTES,
        "a CTranslate2 config.json is a few kilobytes",
    ) {
        Ok(b) => b,
        Err(ReadError::NotFound) => return Ok(None),
        Err(source) => return Err(Ct2Error::ReadSmall { path, source }),
    };
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(v) if v.is_object() => Ok(Some(v)),
        Ok(_) => Err(Ct2Error::BadFile {
            path,
            problem: "not a JSON object".into(),
        }),
        Err(e) => Err(Ct2Error::BadFile {
            path,
            problem: e.to_string(),
        }),
    }
}

/// The model folder's vocabulary, token by id: `vocabulary.json` (a JSON list of strings, what
/// CTranslate2 4 writes) or else `vocabulary.txt` (one token per line, older converters).
/// `None` when neither is there.
pub fn read_vocabulary(dir: &Path) -> Result<Option<Vec<String>>, Ct2Error> {
    let json = dir.join("vocabulary.json");
    match small_file::read_bytes(
        &json,
        MAX_VOCABULARY_BYTES,
        "a vocabulary is a few megabytes",
    ) {
        Ok(bytes) => {
            return serde_json::from_slice::<Vec<String>>(&bytes)
                .map(Some)
                .map_err(|e| Ct2Error::BadFile {
                    path: json,
                    problem: format!("not a JSON list of strings: {e}"),
                })
        }
        Err(ReadError::NotFound) => {}
        Err(source) => return Err(Ct2Error::ReadSmall { path: json, source }),
    }
    let txt = dir.join("vocabulary.txt");
    match small_file::read_text(
        &txt,
        MAX_VOCABULARY_BYTES,
        "a vocabulary is a few megabytes",
    ) {
        Ok(text) => Ok(Some(
            text.strip_suffix('\n')
                .unwrap_or(&text)
                .split('\n')
                .map(|l| l.strip_suffix('\r').unwrap_or(l).to_string())
                .collect(),
        )),
        Err(ReadError::NotFound) => Ok(None),
        Err(source) => Err(Ct2Error::ReadSmall { path: txt, source }),
    }
}

#[cfg(test)]
#[path = "ctranslate2_tests.rs"]
mod tests;
