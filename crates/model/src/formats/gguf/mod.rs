//! GGUF checkpoints (llama.cpp's single-file format): metadata, tensors kept in their block
//! format ([`GgufFile::stored`]) or dequantised to f32, the tokenizer and the chat template the
//! file carries.
//!
//! The file is memory-mapped, walked once with bounds checks (`header`), parsed with candle's
//! GGUF reader, and every tensor record is checked against the file size before anything is
//! allocated for it. Tensors are dequantised on request with candle's CPU kernels, straight from
//! the mapping into transformers' layout: llama.cpp's q/k row permutation is undone.
//!
//! ```no_run
//! use attnviz_model::gguf::GgufFile;
//! let gguf = GgufFile::open("SmolLM2-135M-Instruct.Q4_1.gguf".as_ref())?;
//! let params = gguf.decoder_params()?;
//! let q = gguf.dequantize("blk.0.attn_q.weight")?; // [576, 576], transformers' row order
//! let tokenizer = gguf.tokenizer()?;
//! let prompt = gguf.chat_template()?.render_user_message("Hi")?;
//! # Ok::<(), attnviz_model::gguf::GgufError>(())
//! ```

mod chat;
mod dequant;
mod header;
mod params;
mod tokenizer;

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use candle_core::quantized::gguf_file::{Content, Value};
use rayon::prelude::*;

use crate::kernels::quant::QuantType;

pub use chat::{ChatError, ChatMessage, ChatProblem, ChatTemplate};
pub use dequant::{type_name, unpermute_rows, F32Tensor};

/// The architectures whose q and k rows llama.cpp's converter permutes for its interleaved RoPE
/// (`LlamaModel.permute` in convert_hf_to_gguf.py, which `SmolLM3Model` inherits); the reader
/// undoes it so that transformers' rotate-half convention applies.
const PERMUTED_QK: &[&str] = &["llama", "smollm3"];
pub use header::{HeaderError, UnsupportedType};
pub use params::{
    gguf_expert_slice_for, gguf_tensor_name, gguf_tensor_name_for, hf_tensor_name,
    hf_tensor_name_for, DecoderParams, ExpertParams, ExtraParams, RopeScaling,
};
pub use tokenizer::{GgufTokenizer, TokenizerProblem};

use super::weights::StoredMatrix;
use super::CandleError;

/// Anything wrong with a GGUF file or what it describes. Each variant displays as one line
/// naming the file and the field, tensor or key.
#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    /// The file cannot be opened or mapped.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a regular file (a folder, a FIFO, a device).
    #[error("cannot read {}: not a regular file", path.display())]
    NotAFile {
        /// The path.
        path: PathBuf,
    },
    /// A big-endian machine, where tensors cannot be read in place.
    #[error("cannot read {}: GGUF tensors are read in place, which needs a little-endian machine", path.display())]
    BigEndian {
        /// The file.
        path: PathBuf,
    },
    /// The file is not a well-formed GGUF file (the problem names the field).
    #[error("{} is not a valid GGUF file: {problem}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, naming the field.
        problem: Box<InvalidProblem>,
    },
    /// A tensor record does not fit the file, or is stored in a type attnviz cannot read.
    #[error("{}: tensor {name} {problem}", path.display())]
    Tensor {
        /// The file.
        path: PathBuf,
        /// The tensor's GGUF name.
        name: String,
        /// What is wrong.
        problem: Box<TensorProblem>,
    },
    /// The weights would take more memory than the run may use.
    #[error("{}: its {count} tensors take {} {}, more than {} ({}); use a smaller model or allow more memory", path.display(), gigabytes(*.need), .repr.how(), if *.given { "the memory limit given" } else { "the memory this process may use" }, gigabytes(*.budget))]
    Memory {
        /// The file.
        path: PathBuf,
        /// Tensors counted.
        count: usize,
        /// Bytes they take.
        need: u64,
        /// How they would be held.
        repr: Representation,
        /// The budget in bytes.
        budget: u64,
        /// Whether the caller gave the budget (else it is what this process may use).
        given: bool,
    },
    /// A tensor the caller asked for is not in the file.
    #[error("{} has no tensor named {name}", path.display())]
    MissingTensor {
        /// The file.
        path: PathBuf,
        /// The GGUF name asked for.
        name: String,
    },
    /// A metadata key is missing or has an unusable value.
    #[error("{}: metadata {key} {problem}", path.display())]
    Metadata {
        /// The file.
        path: PathBuf,
        /// The GGUF key.
        key: String,
        /// What is wrong with it.
        problem: MetadataProblem,
    },
    /// The tokenizer the metadata describes cannot be built.
    #[error("{}: cannot build the tokenizer: {problem}", path.display())]
    Tokenizer {
        /// The file.
        path: PathBuf,
        /// Why.
        problem: TokenizerProblem,
    },
    /// The file has no chat template.
    #[error("{} carries no chat template (metadata tokenizer.chat_template), so the prompt cannot be wrapped as a chat; run it as plain text", path.display())]
    NoChatTemplate {
        /// The file.
        path: PathBuf,
    },
    /// The chat template fails to compile or render.
    #[error(transparent)]
    Chat(#[from] ChatError),
}

/// Why a file is not a well-formed GGUF file (displays after the file's name).
#[derive(Debug, thiserror::Error)]
pub enum InvalidProblem {
    /// An empty file.
    #[error("the file is empty")]
    Empty,
    /// The bounded header walk refused it.
    #[error(transparent)]
    Header(#[from] HeaderError),
    /// candle's reader refused it.
    #[error(transparent)]
    Candle(#[from] CandleError),
    /// candle's reader and the header walk disagree on where the tensor data starts.
    #[error("tensor data offset {candle} disagrees with the header walk's {walk}")]
    DataOffset {
        /// candle's offset.
        candle: u64,
        /// The walk's.
        walk: u64,
    },
    /// Two tensors sharing bytes.
    #[error("tensors {first:?} and {second:?} overlap (bytes {start}–{end} belong to both); each tensor must have bytes of its own")]
    Overlap {
        /// The tensor that starts first.
        first: String,
        /// The other.
        second: String,
        /// Where the second starts.
        start: usize,
        /// Where the first ends.
        end: usize,
    },
}

/// What is wrong with one tensor of a GGUF file (displays after its name).
#[derive(Debug, thiserror::Error)]
pub enum TensorProblem {
    /// Not a matrix where one is needed.
    #[error("has shape {0:?}, not a matrix")]
    NotAMatrix(Vec<usize>),
    /// Not a stack of matrices (`[experts, outputs, inputs]`) where one is needed.
    #[error("has shape {0:?}, not one matrix per expert ([experts, outputs, inputs])")]
    NotExperts(Vec<usize>),
    /// An expert the merged tensor does not hold.
    #[error("holds {total} experts; expert {expert} does not exist")]
    NoExpert {
        /// Experts it holds.
        total: usize,
        /// The expert asked for.
        expert: usize,
    },
    /// The matrix cannot be kept as stored.
    #[error(transparent)]
    Stored(#[from] crate::kernels::quant::QuantError),
    /// A row asked for that the tensor does not have.
    #[error("has {total} rows; row {row} does not exist")]
    NoRow {
        /// Its rows.
        total: usize,
        /// The row asked for.
        row: usize,
    },
    /// Rows that llama.cpp's q/k permutation cannot have made.
    #[error("has {rows} rows, which {key} = {heads} does not split into heads of an even size")]
    Unpermute {
        /// Its rows.
        rows: usize,
        /// The head count's key.
        key: String,
        /// The head count.
        heads: usize,
    },
    /// A shape whose element count overflows.
    #[error("has shape {0:?}, whose element count overflows")]
    ElementsOverflow(Vec<usize>),
    /// Rows that are not whole blocks of its type.
    #[error("has rows of {cols} values, not a multiple of {dtype}'s block of {block}")]
    Block {
        /// Values per row.
        cols: usize,
        /// The type's name.
        dtype: &'static str,
        /// The type's block size.
        block: usize,
    },
    /// A shape whose byte size overflows.
    #[error("has shape {0:?}, whose byte size overflows")]
    BytesOverflow(Vec<usize>),
    /// A start past the end of the file.
    #[error("starts at offset {offset} past the tensor data start {data_offset}, beyond the end of the {file_len}-byte file")]
    StartsPastEnd {
        /// Its offset.
        offset: u64,
        /// Where tensor data starts.
        data_offset: u64,
        /// The file's size.
        file_len: usize,
    },
    /// Data running past the end of the file.
    #[error("({dtype} {dims:?}) needs {bytes} bytes at byte {start}, but the file ends at {file_len}; is it truncated?")]
    Truncated {
        /// The type's name.
        dtype: &'static str,
        /// Its shape.
        dims: Vec<usize>,
        /// Bytes it needs.
        bytes: usize,
        /// Where it starts.
        start: usize,
        /// The file's size.
        file_len: usize,
    },
}

/// What is wrong with a metadata entry (displays after its key).
#[derive(Debug, thiserror::Error)]
pub enum MetadataProblem {
    /// Not there.
    #[error("is missing")]
    Missing,
    /// 0 where a count is needed.
    #[error("is 0")]
    Zero,
    /// No layers.
    #[error("is 0; a model has at least one layer")]
    NoLayers,
    /// A sliding window of 0 tokens.
    #[error("is 0; a sliding window holds at least one token")]
    NoWindow,
    /// Key/value heads that do not divide the query heads.
    #[error("is {kv_heads}, which does not divide the {heads} query heads")]
    KvHeads {
        /// Key/value heads.
        kv_heads: usize,
        /// Query heads.
        heads: usize,
    },
    /// A hidden size the heads do not divide, and no head size.
    #[error("({hidden}) is not a multiple of the {heads} heads and no attention.key_length says the head size")]
    NoHeadSize {
        /// The hidden size.
        hidden: usize,
        /// The heads.
        heads: usize,
    },
    /// No vocabulary size anywhere.
    #[error("is missing, and neither tokenizer.ggml.tokens nor token_embd.weight gives the vocabulary size")]
    NoVocabSize,
    /// More tokens than any real tokenizer has.
    #[error(transparent)]
    TooManyTokens(#[from] crate::tokenize::bounds::TooManyEntries),
    /// A vocabulary size over the bound.
    #[error("is {vocab}, more than the {max} tokens any real tokenizer has")]
    VocabTooLarge {
        /// The size.
        vocab: usize,
        /// The bound.
        max: u64,
    },
    /// More tokens than embedding rows.
    #[error("has {tokens} tokens, but token_embd.weight has only {rows} rows; the tokenizer does not belong to these weights")]
    TokensExceedRows {
        /// Tokens.
        tokens: usize,
        /// Embedding rows.
        rows: usize,
    },
    /// A vocabulary size other than the embedding's rows.
    #[error("(or the token count) is {vocab}, but token_embd.weight has {rows} rows")]
    VocabRows {
        /// The vocabulary size.
        vocab: usize,
        /// Embedding rows.
        rows: usize,
    },
    /// A RoPE scaling type without its factor.
    #[error("is missing for rope scaling type {0}")]
    NoScalingFactor(String),
    /// A value of the wrong type.
    #[error("is {found}, expected {expected}")]
    Type {
        /// What the file holds, described (`the string "x"`, `an array of 3 values`).
        found: String,
        /// What was expected (`a string`, `a number`).
        expected: &'static str,
    },
    /// An id too large for a token id.
    #[error("is {0}, too large for a token id")]
    TooLargeForId(u64),
    /// A size no real model has.
    #[error("is {0}, implausibly large")]
    Implausible(u64),
    /// No experts in an architecture that always has them.
    #[error("is missing or 0, but this architecture's feed-forward blocks are routed experts")]
    NoExperts,
    /// More experts chosen per token than there are.
    #[error("is {used}, more than the {count} experts of expert_count")]
    UsedExperts {
        /// Experts chosen per token.
        used: usize,
        /// Experts.
        count: usize,
    },
    /// A number that is not finite.
    #[error("is {0}, expected a finite number")]
    NotFinite(f64),
}

/// Where one tensor lies in the file, checked against the file size at open.
#[derive(Clone, Debug)]
struct Entry {
    dtype: QuantType,
    shape: Vec<usize>,
    /// Byte range inside the mapping.
    start: usize,
    len: usize,
}

/// One tensor as the file declares it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    /// The GGUF name (`blk.0.attn_q.weight`).
    pub name: String,
    /// The ggml type, as llama.cpp names it (`Q4_1`).
    pub dtype: &'static str,
    /// Dimensions, outermost first (transformers' order: `[out, in]` for a linear weight).
    pub shape: Vec<usize>,
    /// Bytes it occupies in the file.
    pub bytes: usize,
}

/// An open GGUF file: its metadata, and its tensors, dequantised on request.
pub struct GgufFile {
    path: PathBuf,
    mmap: Arc<memmap2::Mmap>,
    content: Content,
    entries: BTreeMap<String, Entry>,
}

impl std::fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufFile")
            .field("path", &self.path)
            .field("tensors", &self.entries.len())
            .field("metadata", &self.content.metadata.len())
            .finish()
    }
}

impl GgufFile {
    /// Map and parse a `.gguf` file. Fails with one line when the file is not GGUF, is
    /// truncated, declares more than its size can hold, or stores a tensor in a type candle
    /// cannot dequantise (naming the type and the tensor).
    pub fn open(path: &Path) -> Result<GgufFile, GgufError> {
        let read_err = |source: std::io::Error| GgufError::Read {
            path: path.to_path_buf(),
            source,
        };
        let invalid = |problem: InvalidProblem| GgufError::Invalid {
            path: path.to_path_buf(),
            problem: Box::new(problem),
        };
        if cfg!(target_endian = "big") {
            return Err(GgufError::BigEndian {
                path: path.to_path_buf(),
            });
        }
        // Checked before opening: opening a FIFO for reading would wait for a writer.
        let meta = std::fs::metadata(path).map_err(read_err)?;
        if !meta.is_file() {
            return Err(GgufError::NotAFile {
                path: path.to_path_buf(),
            });
        }
        let file = File::open(path).map_err(read_err)?;
        let len = file.metadata().map_err(read_err)?.len();
        if len == 0 {
            return Err(invalid(InvalidProblem::Empty));
        }
        // SAFETY: the file is mapped read-only; like every mmap user we rely on nobody
        // truncating it while we run.
        let mmap = unsafe { memmap2::Mmap::map(&file) }.map_err(read_err)?;
        let header = header::walk(&mmap).map_err(|e| invalid(e.into()))?;
        // candle's reader stops at a type it does not know: MXFP4 tensors are shown to it as
        // F32 (it reads names, shapes and offsets only; their type is the walk's).
        let content = if header.mxfp4.is_empty() {
            Content::read(&mut std::io::Cursor::new(&mmap[..]))
        } else {
            let end = (header.data_offset as usize).min(mmap.len());
            let mut copy = mmap[..end].to_vec();
            for &(_, at) in &header.mxfp4 {
                copy[at..at + 4].copy_from_slice(&0u32.to_le_bytes());
            }
            Content::read(&mut std::io::Cursor::new(&copy[..]))
        }
        .map_err(|e| invalid(CandleError(e).into()))?;
        let mxfp4: std::collections::HashSet<&str> =
            header.mxfp4.iter().map(|(n, _)| n.as_str()).collect();
        if content.tensor_data_offset != header.data_offset {
            return Err(invalid(InvalidProblem::DataOffset {
                candle: content.tensor_data_offset,
                walk: header.data_offset,
            }));
        }

        let mut entries = BTreeMap::new();
        for (name, info) in &content.tensor_infos {
            let dtype = if mxfp4.contains(name.as_str()) {
                QuantType::Mxfp4
            } else {
                info.ggml_dtype.into()
            };
            let entry = check_tensor(
                dtype,
                info.shape.dims(),
                info.offset,
                header.data_offset,
                mmap.len(),
            )
            .map_err(|problem| GgufError::Tensor {
                path: path.to_path_buf(),
                name: name.clone(),
                problem: Box::new(problem),
            })?;
            entries.insert(name.clone(), entry);
        }
        check_overlaps(&entries).map_err(invalid)?;
        Ok(GgufFile {
            path: path.to_path_buf(),
            mmap: Arc::new(mmap),
            content,
            entries,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every metadata entry, as candle parsed it.
    pub fn metadata(&self) -> &HashMap<String, Value> {
        &self.content.metadata
    }

    /// `general.architecture` (`llama`, `qwen2`, …).
    pub fn architecture(&self) -> Result<&str, GgufError> {
        self.require_str("general.architecture")
    }

    /// The tensors in the file, by name.
    pub fn tensors(&self) -> Vec<TensorInfo> {
        self.entries
            .iter()
            .map(|(name, e)| TensorInfo {
                name: name.clone(),
                dtype: type_name(e.dtype),
                shape: e.shape.clone(),
                bytes: e.len,
            })
            .collect()
    }

    /// One tensor's record, if the file has it.
    pub fn tensor_info(&self, name: &str) -> Option<TensorInfo> {
        self.entries.get(name).map(|e| TensorInfo {
            name: name.to_string(),
            dtype: type_name(e.dtype),
            shape: e.shape.clone(),
            bytes: e.len,
        })
    }

    /// Whether the file has a tensor of this GGUF name.
    pub fn has_tensor(&self, name: &str) -> bool {
        self.entries.contains_key(name)
    }

    /// The decoder's hyper-parameters from `{arch}.*` metadata, named as transformers'
    /// `LlamaConfig` names them. Which architectures a model family accepts is the family's call.
    pub fn decoder_params(&self) -> Result<DecoderParams, GgufError> {
        let arch = self.architecture()?.to_string();
        let key = |name: &str| format!("{arch}.{name}");
        let layers = self.require_usize(&key("block_count"))?;
        if layers == 0 {
            return Err(self.meta_err(&key("block_count"), MetadataProblem::NoLayers));
        }
        let hidden = self.require_usize(&key("embedding_length"))?;
        let ffn = match self.get_usize(&key("feed_forward_length"))? {
            None if DENSE_FFN_OPTIONAL.contains(&arch.as_str()) => 0,
            _ => self.require_usize(&key("feed_forward_length"))?,
        };
        let heads = self.require_usize(&key("attention.head_count"))?;
        if heads == 0 {
            return Err(self.meta_err(&key("attention.head_count"), MetadataProblem::Zero));
        }
        let kv_heads = self
            .get_usize(&key("attention.head_count_kv"))?
            .unwrap_or(heads);
        if kv_heads == 0 || heads % kv_heads != 0 {
            return Err(self.meta_err(
                &key("attention.head_count_kv"),
                MetadataProblem::KvHeads { kv_heads, heads },
            ));
        }
        let rope_dims = self.get_usize(&key("rope.dimension_count"))?;
        // llama.cpp's rule: key_length, else hidden / heads. RoPE's dimension count is the
        // head size only as a last resort: Phi-3 rotates part of each head.
        let key_length = self.get_usize(&key("attention.key_length"))?;
        let head_dim = match key_length {
            Some(d) => d,
            None if hidden % heads == 0 => hidden / heads,
            None if rope_dims.is_some() => rope_dims.unwrap_or(0),
            None => {
                return Err(self.meta_err(
                    &key("embedding_length"),
                    MetadataProblem::NoHeadSize { hidden, heads },
                ))
            }
        };
        if head_dim == 0 {
            return Err(self.meta_err(&key("attention.key_length"), MetadataProblem::Zero));
        }
        let rope_theta = self.get_f64(&key("rope.freq_base"))?.unwrap_or(10_000.0);
        let eps_key = key("attention.layer_norm_rms_epsilon");
        let rms_norm_eps = self
            .get_f64(&eps_key)?
            .ok_or_else(|| self.meta_err(&eps_key, MetadataProblem::Missing))?;
        let vocab_size = match self.get_usize(&key("vocab_size"))? {
            Some(v) => v,
            None => match self.metadata().get("tokenizer.ggml.tokens") {
                Some(Value::Array(tokens)) => tokens.len(),
                _ => self
                    .entries
                    .get("token_embd.weight")
                    .and_then(|e| e.shape.first().copied())
                    .ok_or_else(|| {
                        self.meta_err(&key("vocab_size"), MetadataProblem::NoVocabSize)
                    })?,
            },
        };
        self.check_vocabulary(&key("vocab_size"), vocab_size)?;
        // Checked here for every family: a window of 0 tokens leaves a query nothing to attend
        // to (Llama and Qwen panicked building its mask).
        let window_key = key("attention.sliding_window");
        let sliding_window = match self.get_usize(&window_key)? {
            Some(0) => return Err(self.meta_err(&window_key, MetadataProblem::NoWindow)),
            w => w,
        };
        Ok(DecoderParams {
            num_hidden_layers: layers,
            hidden_size: hidden,
            intermediate_size: ffn,
            num_attention_heads: heads,
            num_key_value_heads: kv_heads,
            head_dim,
            rope_dimension_count: rope_dims.unwrap_or(head_dim),
            rope_theta,
            rope_scaling: self.rope_scaling(&arch)?,
            rope_freqs_tensor: self.has_tensor("rope_freqs.weight"),
            rms_norm_eps,
            max_position_embeddings: self.require_usize(&key("context_length"))?,
            sliding_window,
            vocab_size,
            tie_word_embeddings: !self.has_tensor("output.weight"),
            attention_bias: self.has_tensor("blk.0.attn_q.bias"),
            bos_token_id: self.get_u32("tokenizer.ggml.bos_token_id")?,
            eos_token_id: self.get_u32("tokenizer.ggml.eos_token_id")?,
            pad_token_id: self.get_u32("tokenizer.ggml.padding_token_id")?,
            attn_logit_softcapping: self.get_f64(&key("attn_logit_softcapping"))?,
            final_logit_softcapping: self.get_f64(&key("final_logit_softcapping"))?,
            rope_yarn_beta_fast: self.get_f64(&key("rope.scaling.yarn_beta_fast"))?,
            rope_yarn_beta_slow: self.get_f64(&key("rope.scaling.yarn_beta_slow"))?,
            rope_attn_factor: self.get_f64(&key("rope.scaling.attn_factor"))?,
            rope_original_context_length: self
                .get_usize(&key("rope.scaling.original_context_length"))?,
            rope_factors_tensors: self.has_tensor("rope_factors_long.weight")
                && self.has_tensor("rope_factors_short.weight"),
            rope_sections: self
                .get_usize_array(&key("rope.dimension_sections"))?
                .unwrap_or_default(),
            swiglu_clamp_exp: self
                .get_f64_array(&key("swiglu_clamp_exp"))?
                .unwrap_or_default(),
            experts: self.expert_params(&arch, layers)?,
            extra: self.extra_params(&arch)?,
            architecture: arch,
        })
    }

    /// The keys only some architectures write ([`ExtraParams`]), as stated.
    fn extra_params(&self, arch: &str) -> Result<ExtraParams, GgufError> {
        let count = |name: &str| self.get_usize(&format!("{arch}.{name}"));
        let number = |name: &str| self.get_f64(&format!("{arch}.{name}"));
        Ok(ExtraParams {
            q_lora_rank: count("attention.q_lora_rank")?,
            kv_lora_rank: count("attention.kv_lora_rank")?,
            key_length_mla: count("attention.key_length_mla")?,
            value_length_mla: count("attention.value_length_mla")?,
            value_length: count("attention.value_length")?,
            leading_dense_block_count: count("leading_dense_block_count")?,
            expert_shared_count: count("expert_shared_count")?,
            expert_shared_feed_forward_length: count("expert_shared_feed_forward_length")?,
            expert_weights_scale: number("expert_weights_scale")?,
            expert_gating_func: self.get_u64(&format!("{arch}.expert_gating_func"))?,
            expert_group_count: count("expert_group_count")?,
            expert_group_used_count: count("expert_group_used_count")?,
            yarn_log_multiplier: number("rope.scaling.yarn_log_multiplier")?,
            yarn_attn_factor: number("rope.scaling.yarn_attn_factor")?,
            yarn_beta_fast: number("rope.scaling.yarn_beta_fast")?,
            yarn_beta_slow: number("rope.scaling.yarn_beta_slow")?,
            ssm_conv_kernel: count("ssm.conv_kernel")?,
            ssm_state_size: count("ssm.state_size")?,
            ssm_group_count: count("ssm.group_count")?,
            ssm_time_step_rank: count("ssm.time_step_rank")?,
            ssm_inner_size: count("ssm.inner_size")?,
            full_attention_interval: count("full_attention_interval")?,
            recurrent_layers: self.get_bool_array(&format!("{arch}.attention.recurrent_layers"))?,
        })
    }

    /// The routed experts `{arch}.expert_count` and its sibling keys describe, with the layers
    /// that hold a router; `None` when the file states no experts (or 0, as llama.cpp's
    /// converter writes for a dense model).
    fn expert_params(&self, arch: &str, layers: usize) -> Result<Option<ExpertParams>, GgufError> {
        let key = |name: &str| format!("{arch}.{name}");
        let count = match self.get_usize(&key("expert_count"))? {
            // llama.cpp refuses these without experts ("n_expert must be > 0").
            None | Some(0) if MOE_ONLY.contains(&arch) => {
                return Err(self.meta_err(&key("expert_count"), MetadataProblem::NoExperts))
            }
            None | Some(0) => return Ok(None),
            Some(n) if n > MAX_EXPERTS => {
                return Err(
                    self.meta_err(&key("expert_count"), MetadataProblem::Implausible(n as u64))
                )
            }
            Some(n) => n,
        };
        let used_key = key("expert_used_count");
        let used = self.require_usize(&used_key)?;
        if used == 0 {
            return Err(self.meta_err(&used_key, MetadataProblem::Zero));
        }
        if used > count {
            return Err(self.meta_err(&used_key, MetadataProblem::UsedExperts { used, count }));
        }
        let ffn_key = key("expert_feed_forward_length");
        let feed_forward_length = self.get_usize(&ffn_key)?;
        if feed_forward_length == Some(0) {
            return Err(self.meta_err(&ffn_key, MetadataProblem::Zero));
        }
        // Bounded: the layer count is checked against the most layers a model may have later,
        // and a router name is looked up per layer only.
        let layers = (0..layers.min(1 << 16))
            .map(|i| self.has_tensor(&format!("blk.{i}.ffn_gate_inp.weight")))
            .collect();
        Ok(Some(ExpertParams {
            count,
            used,
            feed_forward_length,
            weights_norm: self.get_bool(&key("expert_weights_norm"))?,
            layers,
        }))
    }

    /// The vocabulary's sizes agree before anything is built from them (a 4M-token vocabulary
    /// took 28 s and 1.9 GB to become a tokenizer before the embedding's 49k rows said it was
    /// wrong): at most [`MAX_VOCAB`](crate::tokenize::bounds::MAX_VOCAB) tokens, no more tokens
    /// than the embedding has rows, and `vocab_size` equal to those rows.
    fn check_vocabulary(&self, vocab_key: &str, vocab_size: usize) -> Result<(), GgufError> {
        use crate::tokenize::bounds::{TooManyEntries, MAX_VOCAB};
        const TOKENS: &str = "tokenizer.ggml.tokens";
        let tokens = match self.metadata().get(TOKENS) {
            Some(Value::Array(tokens)) => Some(tokens.len()),
            _ => None,
        };
        if let Some(n) = tokens.filter(|&n| n as u64 > MAX_VOCAB) {
            let entries = TooManyEntries {
                n: n as u64,
                max: MAX_VOCAB,
            };
            return Err(self.meta_err(TOKENS, entries.into()));
        }
        if vocab_size as u64 > MAX_VOCAB {
            return Err(self.meta_err(
                vocab_key,
                MetadataProblem::VocabTooLarge {
                    vocab: vocab_size,
                    max: MAX_VOCAB,
                },
            ));
        }
        let Some(rows) = self
            .entries
            .get("token_embd.weight")
            .and_then(|e| e.shape.first().copied())
        else {
            return Ok(());
        };
        if let Some(n) = tokens.filter(|&n| n > rows) {
            return Err(self.meta_err(
                TOKENS,
                MetadataProblem::TokensExceedRows { tokens: n, rows },
            ));
        }
        if vocab_size != rows {
            return Err(self.meta_err(
                vocab_key,
                MetadataProblem::VocabRows {
                    vocab: vocab_size,
                    rows,
                },
            ));
        }
        Ok(())
    }

    fn rope_scaling(&self, arch: &str) -> Result<Option<RopeScaling>, GgufError> {
        let key = |name: &str| format!("{arch}.rope.{name}");
        let factor = self.get_f64(&key("scaling.factor"))?;
        let kind = match self.get_str(&key("scaling.type"))? {
            Some(kind) => kind.to_string(),
            None => match self.get_f64(&key("scale_linear"))? {
                Some(f) if f != 1.0 => return Ok(Some(RopeScaling::Linear { factor: f })),
                _ => return Ok(None),
            },
        };
        let need_factor = || {
            factor.ok_or_else(|| {
                self.meta_err(
                    &key("scaling.factor"),
                    MetadataProblem::NoScalingFactor(kind.clone()),
                )
            })
        };
        Ok(match kind.as_str() {
            "none" | "" => None,
            "linear" => Some(RopeScaling::Linear {
                factor: need_factor()?,
            }),
            "yarn" => Some(RopeScaling::Yarn {
                factor: need_factor()?,
                original_max_position_embeddings: self
                    .get_usize(&key("scaling.original_context_length"))?,
            }),
            _ => Some(RopeScaling::Other { kind, factor }),
        })
    }

    /// Tensor `name` (a GGUF name) dequantised to f32, in transformers' layout: for the `llama`
    /// architecture the q and k projections (weights and biases) get llama.cpp's row permutation
    /// undone (see [`unpermute_rows`]). Every type candle supports is read; the file was checked
    /// at open, so only a missing tensor or an unusable head count fails here.
    pub fn dequantize(&self, name: &str) -> Result<F32Tensor, GgufError> {
        let row_map = self.qk_row_map(name)?;
        self.dequantize_with(name, row_map.as_deref())
    }

    /// Matrix `name` (a GGUF name, two dimensions) kept in its block format, for the kernels
    /// to decode inside their products ([`crate::kernels::quant`]): in place in the
    /// memory map, except the q and k projections of `llama` files, whose rows are copied into
    /// transformers' order (see [`unpermute_rows`]; rows are whole blocks, so moving them is
    /// exact) and whose mapped pages are then released.
    pub fn stored(&self, name: &str) -> Result<StoredMatrix, GgufError> {
        let entry = self.entry(name)?;
        let tensor_err = |problem: TensorProblem| GgufError::Tensor {
            path: self.path.clone(),
            name: name.to_string(),
            problem: Box::new(problem),
        };
        let &[outputs, inputs] = entry.shape.as_slice() else {
            return Err(tensor_err(TensorProblem::NotAMatrix(entry.shape.clone())));
        };
        let range = entry.start..entry.start + entry.len;
        let made = match self.qk_row_map(name)? {
            None => StoredMatrix::in_map(&self.mmap, range, entry.dtype, outputs, inputs),
            Some(map) => {
                let bytes = &self.mmap[range];
                let row = bytes.len().checked_div(outputs).unwrap_or(0);
                let mut owned = Vec::with_capacity(bytes.len());
                for &r in &map {
                    owned.extend_from_slice(&bytes[r * row..(r + 1) * row]);
                }
                crate::formats::pages::release_mapped(bytes);
                StoredMatrix::owned(owned, entry.dtype, outputs, inputs)
            }
        };
        made.map_err(|e| tensor_err(e.into()))
    }

    /// Expert `expert`'s matrix of the merged 3-D tensor `name` (`blk.0.ffn_gate_exps.weight`,
    /// `[experts, outputs, inputs]`), kept in its block format in place in the memory map: the
    /// expert's rows are whole blocks, one contiguous run of the tensor's bytes. Nothing of the
    /// other experts is read.
    pub fn stored_slice(&self, name: &str, expert: usize) -> Result<StoredMatrix, GgufError> {
        let entry = self.entry(name)?;
        let tensor_err = |problem: TensorProblem| GgufError::Tensor {
            path: self.path.clone(),
            name: name.to_string(),
            problem: Box::new(problem),
        };
        let &[total, outputs, inputs] = entry.shape.as_slice() else {
            return Err(tensor_err(TensorProblem::NotExperts(entry.shape.clone())));
        };
        if expert >= total {
            return Err(tensor_err(TensorProblem::NoExpert { total, expert }));
        }
        // The record was checked at open: `len` is `total` equal runs of whole blocks.
        let each = entry.len / total;
        let start = entry.start + expert * each;
        StoredMatrix::in_map(
            &self.mmap,
            start..start + each,
            entry.dtype,
            outputs,
            inputs,
        )
        .map_err(|e| tensor_err(e.into()))
    }

    /// Tensor `name` dequantised as stored, without undoing any permutation (what gguf-py's
    /// `dequantize` gives).
    pub fn dequantize_as_stored(&self, name: &str) -> Result<F32Tensor, GgufError> {
        self.dequantize_with(name, None)
    }

    /// Some rows of a tensor, dequantised: `[rows.len(), row length]` (for an embedding lookup of
    /// a few tokens without the whole table: SmolLM2's is 113 MB in f32). Rows are counted as in
    /// [`GgufFile::dequantize`]'s result (transformers' order, for q/k projections too).
    pub fn dequantize_rows(&self, name: &str, rows: &[usize]) -> Result<F32Tensor, GgufError> {
        let entry = self.entry(name)?;
        let cols = entry.shape.last().copied().unwrap_or(1);
        let total = entry.shape.iter().rev().skip(1).product::<usize>();
        if let Some(&bad) = rows.iter().find(|&&r| r >= total) {
            return Err(GgufError::Tensor {
                path: self.path.clone(),
                name: name.to_string(),
                problem: Box::new(TensorProblem::NoRow { total, row: bad }),
            });
        }
        let map = self.qk_row_map(name)?;
        let stored: Vec<usize> = match &map {
            Some(map) => rows.iter().map(|&r| map[r]).collect(),
            None => rows.to_vec(),
        };
        let bytes = &self.mmap[entry.start..entry.start + entry.len];
        let data = dequant::dequantize(entry.dtype, bytes, total, cols, Some(&stored));
        Ok(F32Tensor {
            shape: vec![rows.len(), cols],
            data,
        })
    }

    /// The memory the tensors named `used` take in `repr`, checked against `budget` bytes
    /// (`None`: `default_weight_budget`) before any is read: an 8B-shaped Q4_0 file aborted
    /// at 3.4 GB on "memory allocation failed" when dequantised to f32 under an 8 GiB limit.
    pub fn check_memory(
        &self,
        used: impl Fn(&str) -> bool,
        repr: Representation,
        budget: Option<u64>,
    ) -> Result<u64, GgufError> {
        let (count, need) = self
            .entries
            .iter()
            .filter(|(name, _)| used(name))
            .fold((0usize, 0u64), |(n, total), (_, e)| {
                (n + 1, total.saturating_add(repr.bytes(e)))
            });
        let (budget, given) = match budget {
            Some(b) => (Some(b), true),
            None => (default_weight_budget(self.mmap.len() as u64), false),
        };
        if let Some(budget) = budget.filter(|&b| need > b) {
            return Err(GgufError::Memory {
                path: self.path.clone(),
                count,
                need,
                repr,
                budget,
                given,
            });
        }
        Ok(need)
    }

    /// Every tensor, dequantised as [`GgufFile::dequantize`] does, in parallel (largest first,
    /// so the big embedding does not finish last), keyed by GGUF name.
    pub fn dequantize_all(&self) -> Result<BTreeMap<String, F32Tensor>, GgufError> {
        self.dequantize_used(|_| true)
    }

    /// [`GgufFile::dequantize_all`] for the tensors named `used` only: the others are neither
    /// read nor dequantised.
    pub fn dequantize_used(
        &self,
        used: impl Fn(&str) -> bool,
    ) -> Result<BTreeMap<String, F32Tensor>, GgufError> {
        let mut names: Vec<(&String, usize)> = self
            .entries
            .iter()
            .filter(|(name, _)| used(name))
            .map(|(name, e)| (name, e.shape.iter().product::<usize>()))
            .collect();
        names.sort_by_key(|&(_, n)| std::cmp::Reverse(n));
        names
            .par_iter()
            .map(|(name, _)| Ok(((*name).clone(), self.dequantize(name)?)))
            .collect()
    }

    fn dequantize_with(
        &self,
        name: &str,
        row_map: Option<&[usize]>,
    ) -> Result<F32Tensor, GgufError> {
        let entry = self.entry(name)?;
        let cols = entry.shape.last().copied().unwrap_or(1);
        let rows = entry.shape.iter().rev().skip(1).product::<usize>();
        let bytes = &self.mmap[entry.start..entry.start + entry.len];
        let data = dequant::dequantize(entry.dtype, bytes, rows, cols, row_map);
        crate::formats::pages::release_mapped(bytes);
        Ok(F32Tensor {
            shape: entry.shape.clone(),
            data,
        })
    }

    fn entry(&self, name: &str) -> Result<&Entry, GgufError> {
        self.entries
            .get(name)
            .ok_or_else(|| GgufError::MissingTensor {
                path: self.path.clone(),
                name: name.to_string(),
            })
    }

    /// The row map undoing llama.cpp's permutation, for the q/k tensors of the architectures in
    /// [`PERMUTED_QK`].
    fn qk_row_map(&self, name: &str) -> Result<Option<Vec<usize>>, GgufError> {
        let Some(stem) = name.strip_prefix("blk.") else {
            return Ok(None);
        };
        let is_q = stem.ends_with(".attn_q.weight") || stem.ends_with(".attn_q.bias");
        let is_k = stem.ends_with(".attn_k.weight") || stem.ends_with(".attn_k.bias");
        let arch = self.architecture()?;
        if !(is_q || is_k) || !PERMUTED_QK.contains(&arch) {
            return Ok(None);
        }
        let Some(entry) = self.entries.get(name) else {
            return Ok(None);
        };
        let heads_key = if is_q {
            format!("{arch}.attention.head_count")
        } else {
            format!("{arch}.attention.head_count_kv")
        };
        let heads = match self.get_usize(&heads_key)? {
            Some(h) => h,
            // llama.cpp writes no head_count_kv when it equals head_count.
            None if is_k => self.require_usize(&format!("{arch}.attention.head_count"))?,
            None => return Err(self.meta_err(&heads_key, MetadataProblem::Missing)),
        };
        let rows = entry.shape.first().copied().unwrap_or(0);
        unpermute_rows(rows, heads)
            .map(Some)
            .ok_or_else(|| GgufError::Tensor {
                path: self.path.clone(),
                name: name.to_string(),
                problem: Box::new(TensorProblem::Unpermute {
                    rows,
                    key: heads_key.clone(),
                    heads,
                }),
            })
    }

    /// The tokenizer the metadata describes (`tokenizer.ggml.*`): byte-level BPE (`gpt2`) or
    /// SentencePiece BPE (`llama`); any other kind is one clear error.
    pub fn tokenizer(&self) -> Result<GgufTokenizer, GgufError> {
        tokenizer::build(self).map_err(|problem| GgufError::Tokenizer {
            path: self.path.clone(),
            problem,
        })
    }

    /// The chat template (`tokenizer.chat_template`), ready to render, or
    /// [`GgufError::NoChatTemplate`].
    pub fn chat_template(&self) -> Result<ChatTemplate, GgufError> {
        let source =
            self.get_str("tokenizer.chat_template")?
                .ok_or_else(|| GgufError::NoChatTemplate {
                    path: self.path.clone(),
                })?;
        let token = |key: &str| -> Result<Option<String>, GgufError> {
            let Some(id) = self.get_u32(key)? else {
                return Ok(None);
            };
            Ok(match self.metadata().get("tokenizer.ggml.tokens") {
                Some(Value::Array(tokens)) => tokens
                    .get(id as usize)
                    .and_then(|t| t.to_string().ok())
                    .cloned(),
                _ => None,
            })
        };
        Ok(ChatTemplate::new(
            format!("{} (tokenizer.chat_template)", self.path.display()),
            source,
            token("tokenizer.ggml.bos_token_id")?,
            token("tokenizer.ggml.eos_token_id")?,
        )?)
    }

    // Typed metadata access: each error names the key and what was found.

    pub(crate) fn meta_err(&self, key: &str, problem: MetadataProblem) -> GgufError {
        GgufError::Metadata {
            path: self.path.clone(),
            key: key.to_string(),
            problem,
        }
    }

    fn type_err(&self, key: &str, found: &Value, expected: &'static str) -> GgufError {
        self.meta_err(
            key,
            MetadataProblem::Type {
                found: describe(found),
                expected,
            },
        )
    }

    /// A string value; `None` when absent, an error when of another type.
    pub fn get_str(&self, key: &str) -> Result<Option<&str>, GgufError> {
        match self.metadata().get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(self.type_err(key, other, "a string")),
        }
    }

    fn require_str(&self, key: &str) -> Result<&str, GgufError> {
        self.get_str(key)?
            .ok_or_else(|| self.meta_err(key, MetadataProblem::Missing))
    }

    /// A non-negative integer of any width; `None` when absent.
    pub fn get_u64(&self, key: &str) -> Result<Option<u64>, GgufError> {
        match self.metadata().get(key) {
            None => Ok(None),
            Some(v) => integer(v)
                .map(Some)
                .ok_or_else(|| self.type_err(key, v, "a non-negative integer")),
        }
    }

    fn get_u32(&self, key: &str) -> Result<Option<u32>, GgufError> {
        match self.get_u64(key)? {
            None => Ok(None),
            Some(v) => u32::try_from(v)
                .map(Some)
                .map_err(|_| self.meta_err(key, MetadataProblem::TooLargeForId(v))),
        }
    }

    pub(crate) fn get_usize(&self, key: &str) -> Result<Option<usize>, GgufError> {
        match self.get_u64(key)? {
            None => Ok(None),
            // Sizes beyond 2^32 are no real model's; refusing them keeps later products small.
            Some(v) if v <= u64::from(u32::MAX) => Ok(Some(v as usize)),
            Some(v) => Err(self.meta_err(key, MetadataProblem::Implausible(v))),
        }
    }

    pub(crate) fn require_usize(&self, key: &str) -> Result<usize, GgufError> {
        self.get_usize(key)?
            .ok_or_else(|| self.meta_err(key, MetadataProblem::Missing))
    }

    /// A finite float (f32 widened exactly, or f64); `None` when absent.
    pub fn get_f64(&self, key: &str) -> Result<Option<f64>, GgufError> {
        let v = match self.metadata().get(key) {
            None => return Ok(None),
            Some(Value::F32(v)) => f64::from(*v),
            Some(Value::F64(v)) => *v,
            Some(other) => return Err(self.type_err(key, other, "a number")),
        };
        if v.is_finite() {
            Ok(Some(v))
        } else {
            Err(self.meta_err(key, MetadataProblem::NotFinite(v)))
        }
    }

    /// An array of numbers (each f32 widened exactly, or f64), each finite; `None` when
    /// absent.
    pub fn get_f64_array(&self, key: &str) -> Result<Option<Vec<f64>>, GgufError> {
        let items = match self.metadata().get(key) {
            None => return Ok(None),
            Some(Value::Array(items)) => items,
            Some(other) => return Err(self.type_err(key, other, "an array of numbers")),
        };
        let mut out = Vec::with_capacity(items.len());
        for v in items {
            let x = match v {
                Value::F32(x) => f64::from(*x),
                Value::F64(x) => *x,
                other => return Err(self.type_err(key, other, "an array of numbers")),
            };
            if !x.is_finite() {
                return Err(self.meta_err(key, MetadataProblem::NotFinite(x)));
            }
            out.push(x);
        }
        Ok(Some(out))
    }

    /// An array of non-negative integers, each at most `u32::MAX`; `None` when absent.
    pub fn get_usize_array(&self, key: &str) -> Result<Option<Vec<usize>>, GgufError> {
        let items = match self.metadata().get(key) {
            None => return Ok(None),
            Some(Value::Array(items)) => items,
            Some(other) => return Err(self.type_err(key, other, "an array of integers")),
        };
        let mut out = Vec::with_capacity(items.len());
        for v in items {
            match integer(v) {
                Some(n) if n <= u64::from(u32::MAX) => out.push(n as usize),
                Some(n) => return Err(self.meta_err(key, MetadataProblem::Implausible(n))),
                None => return Err(self.type_err(key, v, "an array of non-negative integers")),
            }
        }
        Ok(Some(out))
    }

    /// An array of booleans; `None` when absent.
    pub fn get_bool_array(&self, key: &str) -> Result<Option<Vec<bool>>, GgufError> {
        let items = match self.metadata().get(key) {
            None => return Ok(None),
            Some(Value::Array(items)) => items,
            Some(other) => return Err(self.type_err(key, other, "an array of booleans")),
        };
        let mut out = Vec::with_capacity(items.len());
        for v in items {
            match v {
                Value::Bool(b) => out.push(*b),
                other => return Err(self.type_err(key, other, "an array of booleans")),
            }
        }
        Ok(Some(out))
    }

    /// A boolean; `None` when absent.
    pub fn get_bool(&self, key: &str) -> Result<Option<bool>, GgufError> {
        match self.metadata().get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(self.type_err(key, other, "a boolean")),
        }
    }
}

/// The architectures whose every model routes its feed-forward blocks to experts.
const MOE_ONLY: &[&str] = &["qwen3moe", "olmoe", "gpt-oss", "qwen3next", "qwen35moe"];

/// The architectures whose converter writes no `feed_forward_length` when no layer is dense
/// (Qwen3.5-MoE's config has no `intermediate_size`): read as 0 when absent.
const DENSE_FFN_OPTIONAL: &[&str] = &["qwen35moe"];

/// The most experts a router may have in a file read here (the largest released models have
/// 384): a bound on `{arch}.expert_count`.
pub const MAX_EXPERTS: usize = 4096;

/// A metadata value's type, for messages.
fn describe(v: &Value) -> String {
    match v {
        Value::String(s) if s.len() > 40 => "a string".to_string(),
        Value::String(s) => format!("the string {s:?}"),
        Value::Array(a) => format!("an array of {} values", a.len()),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::F32(x) => format!("the float {x}"),
        Value::F64(x) => format!("the float {x}"),
        other => match integer(other) {
            Some(n) => format!("the integer {n}"),
            None => format!("{other:?}"),
        },
    }
}

/// Any integer value that is not negative, widened.
fn integer(v: &Value) -> Option<u64> {
    match *v {
        Value::U8(x) => Some(u64::from(x)),
        Value::U16(x) => Some(u64::from(x)),
        Value::U32(x) => Some(u64::from(x)),
        Value::U64(x) => Some(x),
        Value::I8(x) => u64::try_from(x).ok(),
        Value::I16(x) => u64::try_from(x).ok(),
        Value::I32(x) => u64::try_from(x).ok(),
        Value::I64(x) => u64::try_from(x).ok(),
        _ => None,
    }
}

/// Tensors may not share bytes: llama.cpp writes each once, in order, so two records over one
/// block can only be a file made to multiply its size (1,000 records on one 8 MB block reached
/// 7.9 GB when dequantised).
fn check_overlaps(entries: &BTreeMap<String, Entry>) -> Result<(), InvalidProblem> {
    let mut spans: Vec<(usize, usize, &str)> = entries
        .iter()
        .filter(|(_, e)| e.len > 0)
        .map(|(name, e)| (e.start, e.start + e.len, name.as_str()))
        .collect();
    spans.sort_unstable();
    for pair in spans.windows(2) {
        let ((_, end, a), (start, _, b)) = (pair[0], pair[1]);
        if start < end {
            return Err(InvalidProblem::Overlap {
                first: a.to_string(),
                second: b.to_string(),
                start,
                end,
            });
        }
    }
    Ok(())
}

/// How tensors are held once loaded, for the up-front memory estimate
/// ([`GgufFile::check_memory`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Representation {
    /// Dequantised to f32 in memory (4 bytes per weight): how every tensor is held today.
    F32,
    /// Read in place from the mapping, as stored (a quantised tensor kept quantised): its bytes
    /// in the file.
    InPlace,
}

impl Representation {
    /// How the tensors would be held, for messages.
    fn how(self) -> &'static str {
        match self {
            Representation::F32 => "dequantised to f32",
            Representation::InPlace => "as stored",
        }
    }

    /// Bytes one tensor takes in this representation.
    fn bytes(self, entry: &Entry) -> u64 {
        match self {
            Representation::F32 => (entry.shape.iter().product::<usize>() as u64).saturating_mul(4),
            Representation::InPlace => entry.len as u64,
        }
    }
}

/// The memory a run may use for its weights when no budget is given: this machine's memory,
/// and, under an address-space limit (`ulimit -v`), that limit less the file's own mapping.
fn default_weight_budget(file_len: u64) -> Option<u64> {
    let machine = crate::formats::validate::total_memory();
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we pass.
    let space = if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut limit) } == 0
        && limit.rlim_cur != libc::RLIM_INFINITY
    {
        // Code, stacks and the tokenizer take some too; a quarter of the limit is left to them.
        Some((limit.rlim_cur / 4 * 3).saturating_sub(file_len))
    } else {
        None
    };
    match (machine, space) {
        (Some(m), Some(s)) => Some(m.min(s)),
        (m, s) => m.or(s),
    }
}

/// `1.5 GB`, `850 MB`, `463 KB`.
fn gigabytes(bytes: u64) -> String {
    if bytes >= 1_000_000_000 {
        format!("{:.1} GB", bytes as f64 / 1e9)
    } else if bytes >= 1_000_000 {
        format!("{:.0} MB", bytes as f64 / 1e6)
    } else {
        format!("{:.0} KB", bytes as f64 / 1e3)
    }
}

/// Check one tensor record against the file: shape, element count, block size and byte range.
fn check_tensor(
    dtype: QuantType,
    dims: &[usize],
    offset: u64,
    data_offset: u64,
    file_len: usize,
) -> Result<Entry, TensorProblem> {
    let elements = dims
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .ok_or_else(|| TensorProblem::ElementsOverflow(dims.to_vec()))?;
    let (block, block_bytes) = crate::kernels::quant::block_layout(dtype);
    let cols = dims.last().copied().unwrap_or(1);
    if cols % block != 0 {
        return Err(TensorProblem::Block {
            cols,
            dtype: type_name(dtype),
            block,
        });
    }
    let bytes = (elements / block)
        .checked_mul(block_bytes)
        .ok_or_else(|| TensorProblem::BytesOverflow(dims.to_vec()))?;
    let start = data_offset
        .checked_add(offset)
        .filter(|&s| s <= file_len as u64)
        .ok_or(TensorProblem::StartsPastEnd {
            offset,
            data_offset,
            file_len,
        })? as usize;
    if bytes > file_len - start {
        return Err(TensorProblem::Truncated {
            dtype: type_name(dtype),
            dims: dims.to_vec(),
            bytes,
            start,
            file_len,
        });
    }
    Ok(Entry {
        dtype,
        shape: dims.to_vec(),
        start,
        len: bytes,
    })
}
