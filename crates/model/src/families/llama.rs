//! The Llama family: Llama 1–3, SmolLM2, TinyLlama, and through the same code Qwen2/2.5 (q/k/v
//! biases), Qwen3 (per-head q/k RMSNorm, an explicit `head_dim`) and Mistral (sliding window;
//! Qwen2/3 slide on the layers `use_sliding_window` and `max_window_layers` or `layer_types`
//! say) and SmolLM3 (layers without rotary positions: `no_rope_layers`, or every
//! `no_rope_layer_interval`-th layer). RMSNorm, rotary position embeddings with
//! `rope_theta` (and `linear` or `llama3` scaling), SwiGLU, grouped-query attention
//! (`num_key_value_heads`), and a tied or separate output projection. Mirrors transformers'
//! `models/llama/modeling_llama.py` (and `qwen2`, `qwen3`, `mistral`, `smollm3`).
//!
//! The mixture-of-experts decoders built the same way, their feed-forward blocks routed experts
//! ([`crate::blocks::experts`]): Mixtral (a Mistral whose `block_sparse_moe` renormalises its
//! top-k), Qwen3-MoE (Qwen3 with `mlp.experts`, dense layers where `mlp_only_layers` or
//! `decoder_sparse_step` say, `norm_topk_prob`) and OLMoE (RMSNorm over the whole q and k
//! projections, `norm_topk_prob` false by default).
//!
//! Checkpoints are the `ForCausalLM` classes' (`model.` prefix, `lm_head.weight` outside it) or
//! the bare model's (no prefix, no head: shown, but it cannot generate); a GGUF file of the
//! `llama` architecture comes through [`LlamaConfig::from_gguf`] and [`LlamaConfig::build_from`]
//! with its matrices kept in their block format.

use crate::attention::PositionScheme;
use crate::blocks::decoder::{
    DecoderLayer, DecoderLayerNames, DecoderStack, LayerOptions, LmHead, Positional, StackOptions,
};
use crate::blocks::experts::{ExpertNames, Experts, RouterSettings};
use crate::blocks::family::{Family, FamilyConfig, GgufConfig, GgufReader, Quirks};
use crate::blocks::layers::{out_in_linear, FeedForward, FfnNames};
use crate::blocks::layers::{Linear, Norm};
use crate::blocks::network::{Architecture, Network, SlidingWindow, MAX_LAYERS};
use crate::blocks::rope::{read_rope, read_rope_based, rope_factor_in_range, Partial};
use crate::error::{Error, GgufMetadataProblem};
use crate::formats::config::{
    ConfigError, ConfigFile, ConfigProblem, FieldValue, Instead, Limit, Oversize, RopeProblem,
    Unsupported,
};
use crate::formats::gguf::{DecoderParams, RopeScaling as GgufRopeScaling};
use crate::formats::source::TOKENIZERS_WITH_SETTINGS;
use crate::formats::tensors::{Name, TensorMap, Tensors};
use crate::formats::validate::{ConfigCount, ConfigDim};
use crate::formats::weights::{Anchor, Checkpoint};
use crate::kernels::{Activation, Layout, Mask, Rope, RopeScaling};

const ANCHOR: Anchor = Anchor {
    tensor: "embed_tokens.weight",
    family: "Llama",
    prefix: "model",
};

/// Llama (and SmolLM2, TinyLlama) in the family registry.
pub static LLAMA: Family = Family {
    name: "Llama",
    model_types: &["llama"],
    class_prefixes: &["Llama"],
    anchor: ANCHOR,
    config: |file| Ok(Box::new(LlamaConfig::read(file, Variant::Llama)?)),
    quirks: Quirks {
        tokenizer_files: TOKENIZERS_WITH_SETTINGS,
        gguf: Some(GGUF_LLAMA),
        ..Quirks::NONE
    },
};

/// Qwen2 and Qwen2.5 in the family registry.
pub static QWEN2: Family = Family {
    name: "Qwen2",
    model_types: &["qwen2"],
    class_prefixes: &["Qwen2"],
    anchor: ANCHOR,
    config: |file| Ok(Box::new(LlamaConfig::read(file, Variant::Qwen2)?)),
    quirks: Quirks {
        tokenizer_files: TOKENIZERS_WITH_SETTINGS,
        gguf: Some(GGUF_QWEN2),
        ..Quirks::NONE
    },
};

/// Qwen3 (dense) in the family registry.
pub static QWEN3: Family = Family {
    name: "Qwen3",
    model_types: &["qwen3"],
    class_prefixes: &["Qwen3"],
    anchor: ANCHOR,
    config: |file| Ok(Box::new(LlamaConfig::read(file, Variant::Qwen3)?)),
    quirks: Quirks {
        tokenizer_files: TOKENIZERS_WITH_SETTINGS,
        gguf: Some(GGUF_QWEN3),
        ..Quirks::NONE
    },
};

/// Mistral in the family registry.
pub static MISTRAL: Family = Family {
    name: "Mistral",
    model_types: &["mistral"],
    class_prefixes: &["Mistral"],
    anchor: ANCHOR,
    config: |file| Ok(Box::new(LlamaConfig::read(file, Variant::Mistral)?)),
    quirks: Quirks {
        tokenizer_files: TOKENIZERS_WITH_SETTINGS,
        ..Quirks::NONE
    },
};

/// SmolLM3 in the family registry.
pub static SMOLLM3: Family = Family {
    name: "SmolLM3",
    model_types: &["smollm3"],
    class_prefixes: &["SmolLM3"],
    anchor: ANCHOR,
    config: |file| Ok(Box::new(LlamaConfig::read(file, Variant::SmolLm3)?)),
    quirks: Quirks {
        tokenizer_files: TOKENIZERS_WITH_SETTINGS,
        gguf: Some(GGUF_SMOLLM3),
        ..Quirks::NONE
    },
};

/// Mixtral in the family registry.
pub static MIXTRAL: Family = Family {
    name: "Mixtral",
    model_types: &["mixtral"],
    class_prefixes: &["Mixtral"],
    anchor: ANCHOR,
    config: |file| Ok(Box::new(LlamaConfig::read(file, Variant::Mixtral)?)),
    quirks: Quirks {
        tokenizer_files: TOKENIZERS_WITH_SETTINGS,
        ..Quirks::NONE
    },
};

/// Qwen3-MoE in the family registry.
pub static QWEN3_MOE: Family = Family {
    name: "Qwen3-MoE",
    model_types: &["qwen3_moe"],
    class_prefixes: &["Qwen3Moe"],
    anchor: ANCHOR,
    config: |file| Ok(Box::new(LlamaConfig::read(file, Variant::Qwen3Moe)?)),
    quirks: Quirks {
        tokenizer_files: TOKENIZERS_WITH_SETTINGS,
        gguf: Some(GGUF_QWEN3_MOE),
        ..Quirks::NONE
    },
};

/// OLMoE in the family registry.
pub static OLMOE: Family = Family {
    name: "OLMoE",
    model_types: &["olmoe"],
    class_prefixes: &["Olmoe"],
    anchor: ANCHOR,
    config: |file| Ok(Box::new(LlamaConfig::read(file, Variant::Olmoe)?)),
    quirks: Quirks {
        tokenizer_files: TOKENIZERS_WITH_SETTINGS,
        gguf: Some(GGUF_OLMOE),
        ..Quirks::NONE
    },
};

/// GGUF files of llama.cpp's `llama` architecture (Llama, SmolLM2, TinyLlama, Mistral, and
/// Mixtral: a `llama` file with `llama.expert_count` experts).
const GGUF_LLAMA: GgufReader = GgufReader {
    architectures: &["llama"],
    config: gguf_config,
};

/// GGUF files of the `qwen2` architecture, and `qwen2vl` (Qwen2-VL's and Qwen2.5-VL's language
/// model: a Qwen2 whose M-RoPE, `qwen2vl.rope.dimension_sections`, is plain RoPE on text alone;
/// with its projector file [`super::mmproj`] runs the sections).
const GGUF_QWEN2: GgufReader = GgufReader {
    architectures: &["qwen2", "qwen2vl"],
    config: gguf_config,
};

/// GGUF files of the `qwen3` architecture.
const GGUF_QWEN3: GgufReader = GgufReader {
    architectures: &["qwen3"],
    config: gguf_config,
};

/// GGUF files of the `qwen3moe` architecture (q/k stored unpermuted; the top-k always
/// renormalised, as llama.cpp's `llm_build_qwen3moe` does).
const GGUF_QWEN3_MOE: GgufReader = GgufReader {
    architectures: &["qwen3moe"],
    config: gguf_config,
};

/// GGUF files of the `olmoe` architecture (q/k stored unpermuted; the top-k not renormalised,
/// as llama.cpp's `llm_build_olmoe` does).
const GGUF_OLMOE: GgufReader = GgufReader {
    architectures: &["olmoe"],
    config: gguf_config,
};

/// GGUF files of the `smollm3` architecture (q/k permuted as `llama`'s; no key says which
/// layers skip RoPE: llama.cpp fixes it at every fourth, [`GGUF_NO_ROPE_STEP`]).
const GGUF_SMOLLM3: GgufReader = GgufReader {
    architectures: &["smollm3"],
    config: gguf_config,
};

/// llama.cpp's `n_no_rope_layer_step` for `smollm3` (llama-model.cpp sets it in code, not from
/// the file): layer `i` applies no RoPE when `(i + 1) % 4 == 0`, transformers' default
/// `no_rope_layer_interval`.
pub const GGUF_NO_ROPE_STEP: usize = 4;

/// SmolLM3's default RoPE base (`SmolLM3Config.default_theta`).
const SMOLLM3_THETA: f64 = 2_000_000.0;

fn gguf_config(p: &DecoderParams, origin: &str) -> Result<Box<dyn GgufConfig>, Error> {
    Ok(Box::new(LlamaConfig::from_gguf(p, origin)?))
}

pub use crate::blocks::rope::MAX_ROTARY_POSITIONS;

/// Which member of the family a config describes: its defaults and its biases.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// `llama` (SmolLM2, TinyLlama, Llama 1–3).
    Llama,
    /// `qwen2`: q, k and v projections with biases.
    Qwen2,
    /// `qwen3`: RMSNorm over each query and key head before the rotary embedding.
    Qwen3,
    /// `mistral`: a sliding attention window.
    Mistral,
    /// `smollm3`: some layers without rotary positions (NoPE).
    SmolLm3,
    /// `mixtral`: a Mistral whose feed-forward blocks are routed experts, the top-k
    /// renormalised.
    Mixtral,
    /// `qwen3_moe`: a Qwen3 whose feed-forward blocks are routed experts.
    Qwen3Moe,
    /// `olmoe`: routed experts, and RMSNorm over the whole q and k projections.
    Olmoe,
}

impl Variant {
    fn family(self) -> &'static Family {
        match self {
            Variant::Llama => &LLAMA,
            Variant::Qwen2 => &QWEN2,
            Variant::Qwen3 => &QWEN3,
            Variant::Mistral => &MISTRAL,
            Variant::SmolLm3 => &SMOLLM3,
            Variant::Mixtral => &MIXTRAL,
            Variant::Qwen3Moe => &QWEN3_MOE,
            Variant::Olmoe => &OLMOE,
        }
    }
}

/// A Llama-family config, with the defaults of transformers' config class for each variant.
#[derive(Clone, Debug, PartialEq)]
pub struct LlamaConfig {
    /// Which member.
    pub variant: Variant,
    /// `model_type` as written.
    pub model_type: String,
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Hidden size.
    pub hidden_size: usize,
    /// SwiGLU inner size.
    pub intermediate_size: usize,
    /// Layers.
    pub num_hidden_layers: usize,
    /// Query heads.
    pub num_attention_heads: usize,
    /// Key/value heads (grouped-query attention when fewer than the query heads).
    pub num_key_value_heads: usize,
    /// Size of one head (`head_dim`, else `hidden_size / num_attention_heads`).
    pub head_dim: usize,
    /// The gate's activation (`hidden_act`).
    pub hidden_act: Activation,
    /// The longest input.
    pub max_position_embeddings: usize,
    /// RMSNorm ε.
    pub rms_norm_eps: f64,
    /// RoPE base (`rope_theta`).
    pub rope_theta: f64,
    /// RoPE frequency scaling.
    pub rope_scaling: RopeScaling,
    /// Whether the output projection is the token embedding matrix.
    pub tie_word_embeddings: bool,
    /// Whether the q, k and v projections have biases (Qwen2; Llama's `attention_bias`).
    pub qkv_bias: bool,
    /// Whether the output projection has a bias (Llama's `attention_bias`).
    pub output_bias: bool,
    /// Whether the feed-forward projections have biases (`mlp_bias`).
    pub mlp_bias: bool,
    /// The sliding attention window, when one applies.
    pub sliding_window: Option<usize>,
    /// Which layers slide (all of them for Mistral; Qwen's from `max_window_layers` on, or as
    /// `layer_types` says); empty without a window.
    pub sliding_layers: Vec<bool>,
    /// Whether each query and key head is RMS-normalised before RoPE (Qwen3).
    pub qk_norm: bool,
    /// Which layers apply no rotary embedding (SmolLM3's NoPE layers: `no_rope_layers` 0); empty
    /// when every layer rotates.
    pub nope_layers: Vec<bool>,
    /// Whether the frequencies are divided by a tensor's per-frequency factors (a GGUF file's
    /// `rope_freqs.weight`: Llama 3.1–3.3's scaling as llama.cpp stores it).
    pub rope_freqs: bool,
    /// Whether the q and k norms span the whole projection rather than each head (OLMoE's
    /// `q_norm` over `hidden_size`, `k_norm` over the key heads' width).
    pub qk_norm_whole: bool,
    /// The routed experts of a mixture-of-experts variant; `None` for a dense model.
    pub experts: Option<MoeConfig>,
}

/// The routed experts of a mixture-of-experts config.
#[derive(Clone, Debug, PartialEq)]
pub struct MoeConfig {
    /// The router's settings.
    pub router: RouterSettings,
    /// The config field that gave the number of experts (`num_experts`,
    /// `num_local_experts`).
    pub experts_field: &'static str,
    /// Each expert's inner size (Qwen3-MoE's `moe_intermediate_size`; else
    /// `intermediate_size`).
    pub inner: usize,
    /// Which layers route (the others run a dense MLP of `intermediate_size`: Qwen3-MoE's
    /// `mlp_only_layers` and `decoder_sparse_step`).
    pub sparse_layers: Vec<bool>,
}

impl LlamaConfig {
    /// Read config.json for `variant`.
    pub fn read(file: &ConfigFile, variant: Variant) -> Result<LlamaConfig, ConfigError> {
        let (vocab, inter, max_pos, kv_default) = match variant {
            Variant::Llama => (32000, 11008, 2048, None),
            Variant::Qwen2 | Variant::Qwen3 => (151936, 22016, 32768, None),
            Variant::Mistral => (32000, 14336, 4096 * 32, Some(8)),
            Variant::SmolLm3 => (128256, 11008, 32768, Some(4)),
            Variant::Mixtral => (32000, 14336, 4096 * 32, Some(8)),
            Variant::Qwen3Moe => (151936, 6144, 32768, Some(4)),
            Variant::Olmoe => (50304, 2048, 4096, None),
        };
        let hidden_size = file.positive("hidden_size", 4096)?;
        let heads = file.positive("num_attention_heads", 32)?;
        let kv = file.positive("num_key_value_heads", kv_default.unwrap_or(heads))?;
        let head_dim = match file.count("head_dim")? {
            Some(0) => return Err(file.invalid(ConfigProblem::Zero { field: "head_dim" })),
            Some(d) => d,
            None if variant == Variant::Qwen3 => 128,
            None if variant == Variant::Olmoe && hidden_size % heads == 0 => hidden_size / heads,
            None => {
                if hidden_size % heads != 0 {
                    return Err(file.invalid(ConfigProblem::NotDivisible {
                        field: "hidden_size",
                        value: hidden_size,
                        by_field: "num_attention_heads",
                        by: heads,
                    }));
                }
                hidden_size / heads
            }
        };
        if heads % kv != 0 {
            return Err(file.invalid(ConfigProblem::NotMultiple {
                field: "num_attention_heads",
                value: heads,
                of_field: "num_key_value_heads",
                of: kv,
            }));
        }
        if head_dim % 2 != 0 {
            return Err(file.invalid(RopeProblem::OddHeadDim { head_dim }));
        }
        if heads.checked_mul(head_dim).is_none() {
            return Err(file.invalid(Oversize::Product {
                field: "num_attention_heads",
                value: heads,
                by_field: "head_dim",
                by: head_dim,
            }));
        }
        let max_position_embeddings = file.positive("max_position_embeddings", max_pos)?;
        if max_position_embeddings > MAX_ROTARY_POSITIONS {
            return Err(file.invalid(ConfigProblem::TooMany {
                field: "max_position_embeddings",
                value: max_position_embeddings,
                limit: Limit::RotaryPositions(MAX_ROTARY_POSITIONS),
            }));
        }
        let (rope_theta, rope_scaling) = match variant {
            Variant::SmolLm3 => read_rope_based(file, Partial::Refused, SMOLLM3_THETA)?,
            _ => read_rope(file)?,
        };
        let attention_bias = file.boolean("attention_bias")?.unwrap_or(false);
        let layers = file.positive("num_hidden_layers", 32)?;
        if layers > MAX_LAYERS {
            return Err(file.invalid(ConfigProblem::TooMany {
                field: "num_hidden_layers",
                value: layers,
                limit: Limit::Layers(MAX_LAYERS),
            }));
        }
        let layer_types = file.strings("layer_types")?;
        if let Some(types) = &layer_types {
            if types.len() != layers {
                return Err(file.invalid(ConfigProblem::Entries {
                    field: "layer_types",
                    len: types.len(),
                    layers,
                }));
            }
        }
        let nope_layers = match variant {
            Variant::SmolLm3 => smollm3_nope_layers(file, layers)?,
            _ => Vec::new(),
        };
        let (sliding_window, sliding_layers) = match variant {
            Variant::Llama | Variant::Olmoe => (None, Vec::new()),
            Variant::SmolLm3 => {
                // SmolLM3Config: the window applies where `layer_types` says
                // "sliding_attention", by default on the NoPE layers, and only with
                // use_sliding_window and a sliding_window.
                let uses = file.boolean("use_sliding_window")?.unwrap_or(false);
                let window = file.count("sliding_window")?;
                let sliding: Vec<bool> = match &layer_types {
                    Some(types) => types.iter().map(|t| t == "sliding_attention").collect(),
                    None => nope_layers.clone(),
                };
                match window.filter(|_| uses && sliding.contains(&true)) {
                    Some(w) => (Some(w), sliding),
                    None => (None, Vec::new()),
                }
            }
            Variant::Mixtral => match file.count("sliding_window")? {
                // MixtralConfig's default is no window.
                Some(w) => (Some(w), vec![true; layers]),
                None => (None, Vec::new()),
            },
            Variant::Mistral => {
                let window = match file.get("sliding_window") {
                    // Absent: MistralConfig's default; null: none.
                    None if file.has_field("sliding_window") => None,
                    None => Some(4096),
                    Some(_) => file.count("sliding_window")?,
                };
                (window, vec![true; layers])
            }
            Variant::Qwen2 | Variant::Qwen3 | Variant::Qwen3Moe => {
                let uses = file.boolean("use_sliding_window")?.unwrap_or(false);
                let window = if file.has_field("sliding_window") {
                    file.count("sliding_window")?
                } else {
                    Some(4096)
                };
                let from = file.count("max_window_layers")?.unwrap_or(28);
                let sliding: Vec<bool> = match &layer_types {
                    Some(types) => types.iter().map(|t| t == "sliding_attention").collect(),
                    None => (0..layers).map(|i| i >= from).collect(),
                };
                match window.filter(|_| uses && sliding.contains(&true)) {
                    Some(w) => (Some(w), sliding),
                    None => (None, Vec::new()),
                }
            }
        };
        if sliding_window == Some(0) {
            return Err(file.invalid(ConfigProblem::Zero {
                field: "sliding_window",
            }));
        }
        let experts = read_experts(file, variant, layers)?;
        if variant == Variant::Olmoe {
            if let Some(clip) = file.number("clip_qkv")? {
                return Err(file.unsupported(Unsupported::Value {
                    field: "clip_qkv",
                    value: Some(FieldValue::Number(clip)),
                    note: None,
                    instead: Instead::Runs("; attnviz runs OLMoE with clip_qkv null"),
                }));
            }
        }
        let qk_norm_whole = variant == Variant::Olmoe;
        if qk_norm_whole && heads * head_dim != hidden_size {
            return Err(file.invalid(ConfigProblem::NotDivisible {
                field: "hidden_size",
                value: hidden_size,
                by_field: "num_attention_heads",
                by: heads,
            }));
        }
        Ok(LlamaConfig {
            variant,
            model_type: file
                .model_type()?
                .unwrap_or_else(|| variant.family().model_types[0].to_string()),
            vocab_size: file.positive("vocab_size", vocab)?,
            hidden_size,
            intermediate_size: file.positive("intermediate_size", inter)?,
            num_hidden_layers: file.positive("num_hidden_layers", 32)?,
            num_attention_heads: heads,
            num_key_value_heads: kv,
            head_dim,
            hidden_act: file.activation("hidden_act", "silu")?,
            max_position_embeddings,
            rms_norm_eps: file.epsilon("rms_norm_eps", 1e-6)?,
            rope_theta,
            rope_scaling,
            // SmolLM3Config ties by default; the others do not.
            tie_word_embeddings: file
                .boolean("tie_word_embeddings")?
                .unwrap_or(variant == Variant::SmolLm3),
            qkv_bias: variant == Variant::Qwen2 || attention_bias,
            output_bias: matches!(
                variant,
                Variant::Llama
                    | Variant::Qwen3
                    | Variant::SmolLm3
                    | Variant::Qwen3Moe
                    | Variant::Olmoe
            ) && attention_bias,
            mlp_bias: matches!(variant, Variant::Llama | Variant::SmolLm3)
                && file.boolean("mlp_bias")?.unwrap_or(false),
            sliding_window,
            sliding_layers,
            qk_norm: matches!(variant, Variant::Qwen3 | Variant::Qwen3Moe | Variant::Olmoe),
            nope_layers,
            rope_freqs: false,
            qk_norm_whole,
            experts,
        })
    }

    /// The config a GGUF file's metadata describes, for the `llama` architecture (whose q/k
    /// rows the GGUF reader un-permutes for transformers' rotary convention) and `qwen2` (stored
    /// unpermuted, with q/k/v biases). `origin` names the file in errors.
    pub fn from_gguf(p: &DecoderParams, origin: &str) -> Result<LlamaConfig, Error> {
        let refuse = |problem: GgufMetadataProblem| {
            Err(Error::from(crate::InputError::GgufMetadata {
                origin: origin.to_string(),
                problem,
            }))
        };
        let variant = match p.architecture.as_str() {
            // Mixtral is llama.cpp's `llama` with experts.
            "llama" if p.experts.is_some() => Variant::Mixtral,
            "llama" => Variant::Llama,
            // Written without llama.cpp's q/k permutation (the reader undoes it for llama only).
            "qwen2" | "qwen2vl" => Variant::Qwen2,
            "qwen3" => Variant::Qwen3,
            "smollm3" => Variant::SmolLm3,
            "qwen3moe" => Variant::Qwen3Moe,
            "olmoe" => Variant::Olmoe,
            other => {
                return refuse(GgufMetadataProblem::NotInFamily {
                    architecture: other.to_string(),
                    family: "Llama",
                    runs: "; it runs GGUF files of the llama (Llama, SmolLM2, TinyLlama, \
                           Mixtral, …), qwen2, qwen2vl, qwen3, smollm3, qwen3moe and olmoe \
                           architectures",
                })
            }
        };
        let scaling = match &p.rope_scaling {
            None => RopeScaling::None,
            Some(GgufRopeScaling::Linear { factor }) => {
                if let Err(factor) = rope_factor_in_range(*factor) {
                    return refuse(GgufMetadataProblem::RopeFactor {
                        key: format!("{}.rope.scaling.factor", p.architecture),
                        factor,
                    });
                }
                RopeScaling::Linear { factor: *factor }
            }
            Some(GgufRopeScaling::Yarn { .. }) => {
                return refuse(GgufMetadataProblem::RopeScaling {
                    scaling: "type 'yarn'".to_string(),
                    runs: LLAMA_ROPE,
                })
            }
            Some(GgufRopeScaling::Other { kind, .. }) => {
                return refuse(GgufMetadataProblem::RopeScaling {
                    scaling: format!("type '{kind}'"),
                    runs: LLAMA_ROPE,
                })
            }
        };
        if p.rope_dimension_count != p.head_dim {
            return refuse(GgufMetadataProblem::PartialRope {
                rotated: p.rope_dimension_count,
                head_dim: p.head_dim,
                gemma: false,
            });
        }
        check_gguf_shape(p, origin)?;
        let heads = p.num_attention_heads;
        Ok(LlamaConfig {
            variant,
            model_type: p.architecture.clone(),
            vocab_size: p.vocab_size,
            hidden_size: p.hidden_size,
            intermediate_size: p.intermediate_size,
            num_hidden_layers: p.num_hidden_layers,
            num_attention_heads: heads,
            num_key_value_heads: p.num_key_value_heads,
            head_dim: p.head_dim,
            hidden_act: Activation::Silu,
            max_position_embeddings: p.max_position_embeddings,
            rms_norm_eps: p.rms_norm_eps,
            rope_theta: p.rope_theta,
            rope_scaling: scaling,
            tie_word_embeddings: p.tie_word_embeddings,
            qkv_bias: p.attention_bias,
            output_bias: false,
            mlp_bias: false,
            sliding_window: p.sliding_window,
            sliding_layers: match p.sliding_window {
                Some(_) if p.num_hidden_layers <= MAX_LAYERS => vec![true; p.num_hidden_layers],
                Some(_) => return refuse(GgufMetadataProblem::BlockCount(p.num_hidden_layers)),
                None => Vec::new(),
            },
            qk_norm: matches!(variant, Variant::Qwen3 | Variant::Qwen3Moe | Variant::Olmoe),
            nope_layers: if variant == Variant::SmolLm3 {
                (0..p.num_hidden_layers)
                    .map(|i| (i + 1) % GGUF_NO_ROPE_STEP == 0)
                    .collect()
            } else {
                Vec::new()
            },
            rope_freqs: p.rope_freqs_tensor,
            qk_norm_whole: variant == Variant::Olmoe,
            experts: gguf_experts(variant, p),
        })
    }

    /// Its shape in family-independent terms.
    pub fn architecture(&self) -> Architecture {
        let group = self.num_attention_heads / self.num_key_value_heads;
        Architecture {
            family: self.variant.family().name,
            model_type: self.model_type.clone(),
            layers: self.num_hidden_layers,
            heads: self.num_attention_heads,
            kv_heads: self.num_key_value_heads,
            kv_head: (0..self.num_attention_heads).map(|h| h / group).collect(),
            head_dim: self.head_dim,
            hidden_size: self.hidden_size,
            vocab_size: self.vocab_size,
            max_positions: self.max_position_embeddings,
            token_types: 0,
            tokenizer_types: false,
            mask: Mask::Causal,
            sliding_window: self.sliding_window.map(|size| SlidingWindow {
                size,
                layers: self.sliding_layers.clone(),
            }),
            positions: PositionScheme::Rotary,
        }
    }

    /// Build the network from tensors named as inside transformers' base model.
    pub fn build_from(&self, t: &dyn Tensors) -> Result<DecoderStack, Error> {
        let (hidden, eps) = (self.hidden_size, self.rms_norm_eps);
        let names = Names::new();
        let (q_out, kv_out) = (
            self.num_attention_heads * self.head_dim,
            self.num_key_value_heads * self.head_dim,
        );
        let rms = |name: &Name| -> Result<Norm, Error> {
            Ok(Norm::from_weights(
                t.weight(&name.weight(), &[hidden])?,
                None,
                eps,
            ))
        };
        // The head counts decide the q/k/v sizes: checked against layer 0's tensors, so that the
        // error names them rather than a tensor.
        let first = Names::layer(0);
        for (name, field, heads, rows) in [
            (
                &first.qkv[0],
                "num_attention_heads",
                self.num_attention_heads,
                q_out,
            ),
            (
                &first.qkv[1],
                "num_key_value_heads",
                self.num_key_value_heads,
                kv_out,
            ),
        ] {
            let tensor = name.weight();
            if let Some(shape) = t.shape(&tensor).filter(|s| s != &[rows, hidden]) {
                return Err(crate::InputError::ProjectionRows {
                    field,
                    heads,
                    head_dim: self.head_dim,
                    rows,
                    tensor,
                    shape: shape.to_vec(),
                }
                .into());
            }
        }
        let linear = |bias: bool| {
            move |name: &Name, inputs, outputs| out_in_linear(t, name, inputs, outputs, bias)
        };
        let (qkv, output, mlp) = (
            linear(self.qkv_bias),
            linear(self.output_bias),
            linear(self.mlp_bias),
        );
        let arch = self.architecture();
        // Per head (Qwen3), or over the whole projection (OLMoE).
        let (q_norm_width, k_norm_width) = if self.qk_norm_whole {
            (q_out, kv_out)
        } else {
            (self.head_dim, self.head_dim)
        };
        let head_rms = |name: &Name, width: usize| -> Result<Norm, Error> {
            Ok(Norm::from_weights(
                t.weight(&name.weight(), &[width])?,
                None,
                eps,
            ))
        };
        let layers = (0..self.num_hidden_layers)
            .map(|i| {
                let n = Names::layer(i);
                let sizes = [q_out, kv_out, kv_out];
                let attn = Name::root().pp("layers").pp(i).pp("self_attn");
                let qk_norm = if self.qk_norm {
                    Some((
                        head_rms(&attn.pp("q_norm"), q_norm_width)?,
                        head_rms(&attn.pp("k_norm"), k_norm_width)?,
                    ))
                } else {
                    None
                };
                Ok(DecoderLayer {
                    attention_norm: rms(&n.attention_norm)?,
                    // One stacked map: long inputs run q, k and v as one product.
                    qkv: vec![Linear::stack(
                        n.qkv
                            .iter()
                            .zip(sizes)
                            .map(|(name, rows)| qkv(name, hidden, rows))
                            .collect::<Result<_, _>>()?,
                    )],
                    output: output(&n.output, q_out, hidden)?,
                    ffn_norm: rms(&n.ffn_norm)?,
                    ffn: match self.experts.as_ref().filter(|m| m.sparse_layers[i]) {
                        Some(moe) => FeedForward::Routed(Box::new(Experts::load(
                            t,
                            &expert_names(self.variant, i),
                            hidden,
                            moe.inner,
                            self.hidden_act,
                            moe.router,
                            &mlp,
                        )?)),
                        None => FeedForward::load(
                            &n.ffn,
                            hidden,
                            self.intermediate_size,
                            self.hidden_act,
                            &mlp,
                        )?,
                    },
                    scale: (self.head_dim as f64).powf(-0.5) as f32,
                    options: LayerOptions {
                        qk_norm,
                        window: arch.window(i),
                        no_rope: self.nope_layers.get(i).copied().unwrap_or(false),
                        ..LayerOptions::default()
                    },
                })
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let lm_head = if self.tie_word_embeddings {
            LmHead::Tied
        } else {
            match t.lm_head(&[self.vocab_size, hidden])? {
                Some(w) => LmHead::Separate(Linear::new(w, Layout::OutIn, None)),
                None => LmHead::Missing,
            }
        };
        Ok(DecoderStack {
            arch,
            embed: t.matrix(&names.embed.weight(), &[self.vocab_size, hidden])?,
            positional: Positional::Rotary({
                let rope = Rope::new(self.head_dim, self.rope_theta, self.rope_scaling);
                if self.rope_freqs {
                    let factors = t.weight("rope_freqs.weight", &[self.head_dim / 2])?;
                    if let Some(bad) = factors.iter().find(|f| !(f.is_finite() && **f > 0.0)) {
                        return Err(crate::InputError::RopeFactors {
                            tensor: "rope_freqs.weight".to_string(),
                            value: *bad,
                            long_rope: false,
                        }
                        .into());
                    }
                    rope.with_freq_factors(&factors)
                } else {
                    rope
                }
            }),
            layers,
            final_norm: rms(&names.norm)?,
            lm_head,
            options: StackOptions::default(),
        })
    }
}

/// The Llama family's tensors outside its layers, inside the base model (`embed_tokens`,
/// `norm`): one table, built from parts, that the config checks and the loading read.
struct Names {
    /// Token embeddings.
    embed: Name,
    /// The final RMSNorm.
    norm: Name,
}

impl Names {
    fn new() -> Names {
        let root = Name::root();
        Names {
            embed: root.pp("embed_tokens"),
            norm: root.pp("norm"),
        }
    }

    /// Layer `i`'s tensors (`layers.{i}.self_attn.q_proj`, …).
    fn layer(i: usize) -> DecoderLayerNames {
        let layer = Name::root().pp("layers").pp(i);
        let (a, m) = (layer.pp("self_attn"), layer.pp("mlp"));
        DecoderLayerNames {
            attention_norm: layer.pp("input_layernorm"),
            qkv: vec![a.pp("q_proj"), a.pp("k_proj"), a.pp("v_proj")],
            output: a.pp("o_proj"),
            ffn_norm: layer.pp("post_attention_layernorm"),
            ffn: FfnNames::Gated {
                gate: m.pp("gate_proj"),
                up: m.pp("up_proj"),
                down: m.pp("down_proj"),
            },
        }
    }
}

/// Where layer `i`'s routed experts are: Mixtral's `block_sparse_moe` with `w1` (gate), `w3`
/// (up) and `w2` (down); the others' `mlp` with `gate_proj`, `up_proj`, `down_proj`.
fn expert_names(variant: Variant, i: usize) -> ExpertNames {
    let layer = Name::root().pp("layers").pp(i);
    let (module, leaves) = match variant {
        Variant::Mixtral => ("block_sparse_moe", ["w1", "w3", "w2"]),
        _ => ("mlp", ["gate_proj", "up_proj", "down_proj"]),
    };
    let m = layer.pp(module);
    ExpertNames {
        router: m.pp("gate"),
        experts: m.pp("experts"),
        leaves,
    }
}

/// The routed experts of a GGUF file (`{arch}.expert_*`), as llama.cpp runs them: the top-k
/// renormalised for `llama` (Mixtral) and `qwen3moe`, not for `olmoe` (each fixed in its
/// `llm_build_*`, whatever `expert_weights_norm` says); each expert's inner size
/// `expert_feed_forward_length` for `qwen3moe` (else `feed_forward_length / expert_used_count`),
/// `feed_forward_length` for the others; the layers with a router route, the others run a dense
/// block.
fn gguf_experts(variant: Variant, p: &DecoderParams) -> Option<MoeConfig> {
    if !matches!(
        variant,
        Variant::Mixtral | Variant::Qwen3Moe | Variant::Olmoe
    ) {
        return None;
    }
    let e = p.experts.as_ref()?;
    let inner = match variant {
        Variant::Qwen3Moe => e
            .feed_forward_length
            .unwrap_or(p.intermediate_size / e.used),
        _ => p.intermediate_size,
    };
    Some(MoeConfig {
        router: RouterSettings {
            experts: e.count,
            top_k: e.used,
            norm_topk_prob: variant != Variant::Olmoe,
        },
        experts_field: "expert_count",
        inner,
        sparse_layers: (0..p.num_hidden_layers)
            .map(|i| e.layers.get(i).copied().unwrap_or(false))
            .collect(),
    })
}

/// The routed experts a mixture-of-experts variant's config describes, with the defaults of
/// transformers' config classes; `None` for the dense variants.
fn read_experts(
    file: &ConfigFile,
    variant: Variant,
    layers: usize,
) -> Result<Option<MoeConfig>, ConfigError> {
    let (experts_field, experts, top_k, norm) = match variant {
        Variant::Mixtral => ("num_local_experts", 8, 2, true),
        Variant::Qwen3Moe => ("num_experts", 128, 8, false),
        Variant::Olmoe => ("num_experts", 64, 8, false),
        _ => return Ok(None),
    };
    // transformers 5 writes either name (an `attribute_map` maps one onto the other: its
    // Qwen3-MoE configs are saved with `num_local_experts`, the hub's with `num_experts`).
    let other = match experts_field {
        "num_experts" => "num_local_experts",
        _ => "num_experts",
    };
    let experts_field = if file.has_field(experts_field) || !file.has_field(other) {
        experts_field
    } else {
        other
    };
    let experts = file.positive(experts_field, experts)?;
    if experts > MAX_EXPERTS {
        return Err(file.invalid(ConfigProblem::TooMany {
            field: experts_field,
            value: experts,
            limit: Limit::Number(MAX_EXPERTS),
        }));
    }
    let top_k = file.positive("num_experts_per_tok", top_k)?;
    if top_k > experts {
        return Err(file.invalid(ConfigProblem::TooMany {
            field: "num_experts_per_tok",
            value: top_k,
            limit: Limit::Field {
                field: experts_field,
                value: experts,
            },
        }));
    }
    let norm_topk_prob = match variant {
        Variant::Mixtral => norm,
        _ => file.boolean("norm_topk_prob")?.unwrap_or(norm),
    };
    let inner = match variant {
        Variant::Qwen3Moe => file.positive("moe_intermediate_size", 768)?,
        _ => file.positive(
            "intermediate_size",
            if variant == Variant::Olmoe {
                2048
            } else {
                14336
            },
        )?,
    };
    let sparse_layers = match variant {
        Variant::Qwen3Moe => {
            let step = file.positive("decoder_sparse_step", 1)?;
            let dense = match file.get("mlp_only_layers") {
                None | Some(serde_json::Value::Null) => Vec::new(),
                Some(v) => v
                    .as_array()
                    .and_then(|items| {
                        items
                            .iter()
                            .map(|i| i.as_u64().map(|n| n as usize))
                            .collect::<Option<Vec<_>>>()
                    })
                    .ok_or_else(|| {
                        file.unsupported(Unsupported::Value {
                            field: "mlp_only_layers",
                            value: Some(FieldValue::Json(v.clone())),
                            note: None,
                            instead: Instead::Runs("; write a list of layer numbers"),
                        })
                    })?,
            };
            (0..layers)
                .map(|i| !dense.contains(&i) && (i + 1) % step == 0)
                .collect()
        }
        _ => vec![true; layers],
    };
    Ok(Some(MoeConfig {
        router: RouterSettings {
            experts,
            top_k,
            norm_topk_prob,
        },
        experts_field,
        inner,
        sparse_layers,
    }))
}

/// The most experts a router may have: a bound on the sizes read from a config (the largest
/// released models have 384).
pub const MAX_EXPERTS: usize = 4096;

impl GgufConfig for LlamaConfig {
    fn stack(&self, tensors: &TensorMap) -> Result<DecoderStack, Error> {
        self.build_from(tensors)
    }
}

impl FamilyConfig for LlamaConfig {
    fn checks(&self) -> (Vec<ConfigDim>, Vec<ConfigCount>) {
        let names = Names::new();
        let mut dims = vec![
            ConfigDim::new("vocab_size", self.vocab_size, names.embed.weight(), 0),
            ConfigDim::new("hidden_size", self.hidden_size, names.embed.weight(), 1),
        ];
        match &self.experts {
            // The router of the first routed layer has one row per expert; the experts' own
            // shapes are checked as they load (numbered or merged).
            Some(moe) => {
                if let Some(first) = moe.sparse_layers.iter().position(|&s| s) {
                    dims.push(ConfigDim::new(
                        moe.experts_field,
                        moe.router.experts,
                        expert_names(self.variant, first).router.weight(),
                        0,
                    ));
                }
            }
            None => dims.push(ConfigDim::new(
                "intermediate_size",
                self.intermediate_size,
                Names::layer(0).ffn.first().weight(),
                0,
            )),
        }
        let counts = vec![ConfigCount::new(
            "num_hidden_layers",
            self.num_hidden_layers,
            "layer",
            |i| Names::layer(i).qkv[0].weight(),
        )];
        (dims, counts)
    }

    fn build(&self, ckpt: &Checkpoint) -> Result<Box<dyn Network>, Error> {
        Ok(Box::new(self.build_from(ckpt)?))
    }
}

/// The checks every family makes of a GGUF file's shape and constants before building from
/// it: head counts that divide, an even head size, a context length and RoPE base in range, a
/// small positive RMS-norm epsilon. `origin` names the file in errors.
pub(crate) fn check_gguf_shape(p: &DecoderParams, origin: &str) -> Result<(), Error> {
    let refuse = |problem: GgufMetadataProblem| {
        Err(Error::from(crate::InputError::GgufMetadata {
            origin: origin.to_string(),
            problem,
        }))
    };
    let heads = p.num_attention_heads;
    if heads == 0
        || p.num_key_value_heads == 0
        || !heads.is_multiple_of(p.num_key_value_heads)
        || !p.head_dim.is_multiple_of(2)
        || p.head_dim == 0
    {
        return refuse(GgufMetadataProblem::Heads {
            heads,
            kv_heads: p.num_key_value_heads,
            head_dim: p.head_dim,
        });
    }
    if p.max_position_embeddings == 0 || p.max_position_embeddings > MAX_ROTARY_POSITIONS {
        return refuse(GgufMetadataProblem::ContextLength {
            length: p.max_position_embeddings,
            max: MAX_ROTARY_POSITIONS,
        });
    }
    if !(p.rope_theta.is_finite() && p.rope_theta > 0.0) {
        return refuse(GgufMetadataProblem::RopeBase(p.rope_theta));
    }
    if !(p.rms_norm_eps > 0.0 && p.rms_norm_eps <= MAX_EPSILON) {
        return refuse(GgufMetadataProblem::RmsEpsilon {
            architecture: p.architecture.clone(),
            epsilon: p.rms_norm_eps,
            max: MAX_EPSILON,
        });
    }
    if p.num_hidden_layers > MAX_LAYERS {
        return refuse(GgufMetadataProblem::TooManyLayers {
            layers: p.num_hidden_layers,
            max: MAX_LAYERS,
        });
    }
    Ok(())
}

/// The one-line refusal of `{arch}.{key}` (as written: `value`, `missing` when absent) in the
/// GGUF file `origin`, saying `why`: for the keys only some architectures write.
pub(crate) fn gguf_value_error(
    p: &DecoderParams,
    origin: &str,
    key: &str,
    value: String,
    why: &str,
) -> Error {
    Error::from(crate::InputError::GgufMetadata {
        origin: origin.to_string(),
        problem: GgufMetadataProblem::Value {
            key: format!("{}.{key}", p.architecture),
            value,
            why: why.to_string(),
        },
    })
}

/// SmolLM3's NoPE layers (true: no rotary embedding) as `SmolLM3Config` derives them:
/// `no_rope_layers` (1 rotates, 0 does not; at least one entry per layer, as transformers indexes
/// it by layer), else every `no_rope_layer_interval`-th layer (default 4) skips RoPE.
fn smollm3_nope_layers(file: &ConfigFile, layers: usize) -> Result<Vec<bool>, ConfigError> {
    match file.flags("no_rope_layers")? {
        Some(rope) if rope.len() < layers => Err(file.invalid(ConfigProblem::Entries {
            field: "no_rope_layers",
            len: rope.len(),
            layers,
        })),
        Some(rope) => Ok(rope.iter().take(layers).map(|r| !r).collect()),
        None => {
            let interval = file.positive("no_rope_layer_interval", 4)?;
            Ok((0..layers).map(|i| (i + 1) % interval == 0).collect())
        }
    }
}

/// What the Llama family runs of RoPE scalings, for the refusal of another.
const LLAMA_ROPE: &str = "; attnviz runs default, linear and llama3 rotary embeddings";

/// The largest RMS-norm epsilon accepted from a GGUF file (real ones are 1e-5 or 1e-6).
const MAX_EPSILON: f64 = 1.0;

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn the_anchor_is_a_tensor_of_the_table() {
        assert_eq!(LLAMA.anchor.tensor, Names::new().embed.weight());
        assert_eq!(QWEN2.anchor.tensor, Names::new().embed.weight());
        assert_eq!(MISTRAL.anchor.tensor, Names::new().embed.weight());
    }

    fn read(text: &str, variant: Variant) -> Result<LlamaConfig, String> {
        let file = ConfigFile::parse(text, Path::new("config.json")).unwrap();
        LlamaConfig::read(&file, variant).map_err(|e| e.to_string())
    }

    #[test]
    fn both_rope_spellings_are_read() {
        // transformers 4.x (TinyLlama's config): rope_theta + rope_scaling {type}.
        let old = read(
            r#"{"hidden_size": 64, "num_attention_heads": 4, "rope_theta": 20000.0,
                "rope_scaling": {"type": "linear", "factor": 2.0}}"#,
            Variant::Llama,
        )
        .unwrap();
        assert_eq!(old.rope_theta, 20000.0);
        assert_eq!(old.rope_scaling, RopeScaling::Linear { factor: 2.0 });
        // transformers 5: rope_parameters {rope_type, rope_theta, …}.
        let new = read(
            r#"{"hidden_size": 48, "num_attention_heads": 6, "head_dim": 8,
                "rope_parameters": {"rope_type": "llama3", "rope_theta": 5000.0, "factor": 8.0,
                "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                "original_max_position_embeddings": 64}}"#,
            Variant::Llama,
        )
        .unwrap();
        assert_eq!(new.rope_theta, 5000.0);
        assert!(matches!(new.rope_scaling, RopeScaling::Llama3 { factor, .. } if factor == 8.0));
        let plain = read(r#"{"rope_scaling": null}"#, Variant::Llama).unwrap();
        assert_eq!(
            (plain.rope_theta, plain.rope_scaling),
            (10000.0, RopeScaling::None)
        );
    }

    #[test]
    fn other_rope_types_get_one_clear_error() {
        for kind in ["yarn", "dynamic", "longrope"] {
            let err = read(
                &format!(r#"{{"rope_scaling": {{"rope_type": "{kind}", "factor": 4.0}}}}"#),
                Variant::Llama,
            )
            .unwrap_err();
            assert!(
                err.contains(&format!("RoPE scaling type '{kind}' is not supported")),
                "{err}"
            );
            assert!(!err.contains('\n'));
        }
        let err = read(r#"{"rope_scaling": {"type": "linear"}}"#, Variant::Llama).unwrap_err();
        assert!(err.contains("needs factor"), "{err}");
    }

    fn smollm2_params() -> DecoderParams {
        DecoderParams {
            architecture: "llama".into(),
            num_hidden_layers: 30,
            hidden_size: 576,
            intermediate_size: 1536,
            num_attention_heads: 9,
            num_key_value_heads: 3,
            head_dim: 64,
            rope_dimension_count: 64,
            rope_theta: 100000.0,
            rope_scaling: None,
            rope_freqs_tensor: false,
            rms_norm_eps: 1e-5,
            max_position_embeddings: 8192,
            sliding_window: None,
            vocab_size: 49152,
            tie_word_embeddings: true,
            attention_bias: false,
            bos_token_id: Some(1),
            eos_token_id: Some(2),
            pad_token_id: Some(2),
            attn_logit_softcapping: None,
            final_logit_softcapping: None,
            rope_yarn_beta_fast: None,
            rope_yarn_beta_slow: None,
            swiglu_clamp_exp: Vec::new(),
            rope_attn_factor: None,
            rope_original_context_length: None,
            rope_factors_tensors: false,
            rope_sections: Vec::new(),
            experts: None,
            extra: Default::default(),
        }
    }

    #[test]
    fn gguf_experts_make_mixtral_qwen3_moe_and_olmoe_as_llama_cpp_runs_them() {
        use crate::formats::gguf::ExpertParams;
        let with_experts = |arch: &str, ffn: Option<usize>| {
            let mut p = smollm2_params();
            p.architecture = arch.into();
            p.num_hidden_layers = 3;
            p.experts = Some(ExpertParams {
                count: 8,
                used: 2,
                feed_forward_length: ffn,
                weights_norm: None,
                layers: vec![true, false, true],
            });
            LlamaConfig::from_gguf(&p, "f.gguf").unwrap()
        };
        let mixtral = with_experts("llama", None);
        assert_eq!(mixtral.variant, Variant::Mixtral);
        assert_eq!(mixtral.architecture().family, "Mixtral");
        let moe = mixtral.experts.unwrap();
        assert_eq!(
            (
                moe.router.experts,
                moe.router.top_k,
                moe.router.norm_topk_prob
            ),
            (8, 2, true)
        );
        assert_eq!(
            (moe.inner, moe.sparse_layers),
            (1536, vec![true, false, true])
        );
        let qwen = with_experts("qwen3moe", Some(96));
        assert_eq!(
            (qwen.variant, qwen.qk_norm, qwen.qk_norm_whole),
            (Variant::Qwen3Moe, true, false)
        );
        assert_eq!(qwen.experts.as_ref().unwrap().inner, 96);
        assert!(qwen.experts.unwrap().router.norm_topk_prob);
        // llama.cpp's fallback for the inner size: feed_forward_length / expert_used_count.
        assert_eq!(with_experts("qwen3moe", None).experts.unwrap().inner, 768);
        let olmoe = with_experts("olmoe", Some(96));
        assert_eq!(
            (olmoe.variant, olmoe.qk_norm, olmoe.qk_norm_whole),
            (Variant::Olmoe, true, true)
        );
        let moe = olmoe.experts.unwrap();
        assert_eq!((moe.inner, moe.router.norm_topk_prob), (1536, false));
        // A dense architecture never routes.
        assert!(with_experts("qwen3", None).experts.is_none());
    }

    #[test]
    fn gguf_metadata_becomes_a_config_or_one_clear_refusal() {
        let c = LlamaConfig::from_gguf(&smollm2_params(), "f.gguf").unwrap();
        assert_eq!(c.architecture().kv_head, vec![0, 0, 0, 1, 1, 1, 2, 2, 2]);
        assert_eq!(
            (c.rope_theta, c.rope_scaling),
            (100000.0, RopeScaling::None)
        );
        let mut p = smollm2_params();
        p.rope_scaling = Some(GgufRopeScaling::Linear { factor: 4.0 });
        let c = LlamaConfig::from_gguf(&p, "f.gguf").unwrap();
        assert_eq!(c.rope_scaling, RopeScaling::Linear { factor: 4.0 });
        type Edit = fn(&mut DecoderParams);
        let refusals: [(Edit, &str); 4] = [
            (
                |p| {
                    p.rope_scaling = Some(GgufRopeScaling::Yarn {
                        factor: 4.0,
                        original_max_position_embeddings: Some(4096),
                    })
                },
                "RoPE scaling type 'yarn' is not supported",
            ),
            (
                |p| {
                    p.rope_scaling = Some(GgufRopeScaling::Other {
                        kind: "longrope".into(),
                        factor: None,
                    })
                },
                "RoPE scaling type 'longrope' is not supported",
            ),
            (|p| p.architecture = "phi3".into(), "architecture 'phi3'"),
            (|p| p.rope_dimension_count = 32, "partial rotary"),
        ];
        for (edit, needle) in refusals {
            let mut p = smollm2_params();
            edit(&mut p);
            let err = LlamaConfig::from_gguf(&p, "f.gguf")
                .unwrap_err()
                .to_string();
            assert!(err.starts_with("f.gguf: ") && err.contains(needle), "{err}");
            assert!(!err.contains('\n'));
        }
    }

    #[test]
    fn a_gguf_refusal_carries_the_file_and_the_numbers() {
        let mut p = smollm2_params();
        p.num_key_value_heads = 4;
        let err = LlamaConfig::from_gguf(&p, "f.gguf").unwrap_err();
        assert!(
            matches!(
                &err,
                Error::Input(input) if matches!(
                    input.as_ref(),
                    crate::InputError::GgufMetadata {
                        origin,
                        problem: GgufMetadataProblem::Heads {
                            heads: 9,
                            kv_heads: 4,
                            head_dim: 64
                        },
                    } if origin == "f.gguf"
                )
            ),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "f.gguf: 9 heads over 4 key/value heads of size 64 cannot be run"
        );
    }

    #[test]
    fn smollm3_reads_its_nope_layers_windows_and_defaults() {
        // no_rope_layers: 1 rotates, 0 does not; a longer list is cut to the layers.
        let c = read(
            r#"{"num_hidden_layers": 4, "no_rope_layers": [1, 0, 1, 1, 0]}"#,
            Variant::SmolLm3,
        )
        .unwrap();
        assert_eq!(c.nope_layers, [false, true, false, false]);
        // Without it, every no_rope_layer_interval-th layer (default 4), as SmolLM3Config.
        let c = read(r#"{"num_hidden_layers": 9}"#, Variant::SmolLm3).unwrap();
        let every_fourth: Vec<bool> = (0..9).map(|i| i == 3 || i == 7).collect();
        assert_eq!(c.nope_layers, every_fourth);
        assert_eq!((c.rope_theta, c.num_key_value_heads), (2_000_000.0, 4));
        assert!(c.tie_word_embeddings && c.sliding_window.is_none());
        let c = read(
            r#"{"num_hidden_layers": 6, "no_rope_layer_interval": 3}"#,
            Variant::SmolLm3,
        )
        .unwrap();
        assert_eq!(c.nope_layers, [false, false, true, false, false, true]);
        // A window slides on the NoPE layers by default, and only with use_sliding_window.
        let c = read(
            r#"{"num_hidden_layers": 4, "use_sliding_window": true, "sliding_window": 7}"#,
            Variant::SmolLm3,
        )
        .unwrap();
        assert_eq!(c.sliding_window, Some(7));
        assert_eq!(c.sliding_layers, [false, false, false, true]);
        let c = read(
            r#"{"num_hidden_layers": 4, "sliding_window": 7}"#,
            Variant::SmolLm3,
        )
        .unwrap();
        assert_eq!(c.sliding_window, None);
        // Other members rotate on every layer.
        let l = read(r#"{"no_rope_layers": [0, 0]}"#, Variant::Llama).unwrap();
        assert!(l.nope_layers.is_empty());
        for (text, needle) in [
            (
                r#"{"num_hidden_layers": 4, "no_rope_layers": [1, 1, 0]}"#,
                "no_rope_layers has 3 entries for 4 layers",
            ),
            (
                r#"{"num_hidden_layers": 2, "no_rope_layers": [1, 2]}"#,
                "a list of 0s and 1s",
            ),
            (r#"{"no_rope_layer_interval": 0}"#, "no_rope_layer_interval"),
        ] {
            let err = read(text, Variant::SmolLm3).unwrap_err();
            assert!(err.contains(needle), "{err}");
            assert!(!err.contains('\n'));
        }
    }

    #[test]
    fn smollm3_gguf_skips_rope_on_every_fourth_layer() {
        let mut p = smollm2_params();
        p.architecture = "smollm3".into();
        p.num_hidden_layers = 9;
        let c = LlamaConfig::from_gguf(&p, "f.gguf").unwrap();
        assert_eq!(c.variant, Variant::SmolLm3);
        let every_fourth: Vec<bool> = (0..9).map(|i| i == 3 || i == 7).collect();
        assert_eq!(c.nope_layers, every_fourth);
        p.architecture = "llama".into();
        assert!(LlamaConfig::from_gguf(&p, "f.gguf")
            .unwrap()
            .nope_layers
            .is_empty());
    }

    #[test]
    fn variants_have_their_defaults_biases_and_windows() {
        let q = read(
            r#"{"hidden_size": 32, "num_attention_heads": 4}"#,
            Variant::Qwen2,
        )
        .unwrap();
        assert!(q.qkv_bias && !q.output_bias);
        assert_eq!(
            q.sliding_window, None,
            "use_sliding_window is false by default"
        );
        assert_eq!(q.vocab_size, 151936);
        let m = read(
            r#"{"hidden_size": 64, "num_attention_heads": 8}"#,
            Variant::Mistral,
        )
        .unwrap();
        assert_eq!(m.sliding_window, Some(4096));
        assert_eq!(m.num_key_value_heads, 8);
        let m = read(r#"{"sliding_window": null}"#, Variant::Mistral).unwrap();
        assert_eq!(m.sliding_window, None);
        let l = read(
            r#"{"num_attention_heads": 32, "num_key_value_heads": 8}"#,
            Variant::Llama,
        )
        .unwrap();
        let arch = l.architecture();
        assert_eq!(arch.kv_head[0..5], [0, 0, 0, 0, 1]);
        assert_eq!(arch.kv_head[31], 7);
        let err = read(
            r#"{"num_attention_heads": 8, "num_key_value_heads": 3}"#,
            Variant::Llama,
        )
        .unwrap_err();
        assert!(err.contains("not a multiple"), "{err}");
        let err = read(r#"{"max_position_embeddings": 100000000}"#, Variant::Llama).unwrap_err();
        assert!(err.contains("max_position_embeddings 100000000"), "{err}");
    }

    #[test]
    fn moe_variants_read_their_experts_with_transformers_defaults() {
        let m = read(
            r#"{"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2}"#,
            Variant::Mixtral,
        )
        .unwrap();
        let moe = m.experts.unwrap();
        assert_eq!(
            (
                moe.router.experts,
                moe.router.top_k,
                moe.router.norm_topk_prob
            ),
            (8, 2, true)
        );
        assert_eq!((moe.inner, m.sliding_window), (14336, None));
        let q = read(
            r#"{"hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 4,
                "num_local_experts": 16, "mlp_only_layers": [1], "decoder_sparse_step": 1,
                "moe_intermediate_size": 24}"#,
            Variant::Qwen3Moe,
        )
        .unwrap();
        let moe = q.experts.unwrap();
        // Either spelling of the count; Qwen3-MoE's top 8 of 16, not renormalised by default.
        assert_eq!(moe.experts_field, "num_local_experts");
        assert_eq!((moe.router.experts, moe.router.top_k), (16, 8));
        assert!(!moe.router.norm_topk_prob && q.qk_norm && !q.qk_norm_whole);
        assert_eq!(moe.sparse_layers, vec![true, false, true, true]);
        assert_eq!(moe.inner, 24);
        let o = read(
            r#"{"hidden_size": 64, "num_attention_heads": 4}"#,
            Variant::Olmoe,
        )
        .unwrap();
        assert!(o.qk_norm && o.qk_norm_whole && !o.experts.unwrap().router.norm_topk_prob);
        for (text, variant, says) in [
            (
                r#"{"num_experts": 4, "num_experts_per_tok": 5}"#,
                Variant::Olmoe,
                "num_experts_per_tok 5 is more than num_experts 4",
            ),
            (
                r#"{"clip_qkv": 8.0}"#,
                Variant::Olmoe,
                "clip_qkv 8 is not supported",
            ),
            (
                r#"{"mlp_only_layers": ["one"]}"#,
                Variant::Qwen3Moe,
                "mlp_only_layers",
            ),
            (
                r#"{"num_local_experts": 0}"#,
                Variant::Mixtral,
                "num_local_experts is 0",
            ),
        ] {
            let err = read(text, variant).unwrap_err();
            assert!(err.contains(says), "{err}");
            assert!(!err.contains('\n'), "{err}");
        }
    }
}
