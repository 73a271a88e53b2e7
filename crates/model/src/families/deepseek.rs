//! DeepSeek-V2 and DeepSeek-V3 (`deepseek_v2`, `deepseek_v3`): pre-norm decoders with RMSNorm,
//! multi-head latent attention ([`crate::blocks::latent`]: queries through a low-rank
//! bottleneck or one `q_proj`, keys and values expanded from a compressed latent, one rotary
//! key shared by every head, the rotary values in interleaved pairs), and after the first
//! `first_k_dense_replace` dense layers a mixture of experts: routed experts chosen by
//! DeepSeek's routers ([`crate::blocks::experts::GroupRouting`]) plus `n_shared_experts` shared
//! ones every token runs through. Mirrors transformers 5's `models/deepseek_v2` and
//! `models/deepseek_v3` (eager attention and experts):
//!
//! - V2's router: the softmax over all experts, the top k (`topk_method` `greedy`) or the top k
//!   within the `topk_group` groups of best single expert (`group_limited_greedy`), times
//!   `routed_scaling_factor`. transformers 5 does not read V2's `norm_topk_prob`, and neither
//!   does this.
//! - V3's router: each logit's sigmoid; the choice reads it plus `e_score_correction_bias`,
//!   within the `topk_group` of `n_group` groups whose two best experts sum highest (`noaux_tc`);
//!   the weights are the chosen sigmoids, divided by their sum where `norm_topk_prob`, times
//!   `routed_scaling_factor`.
//! - The softmax scale is `(qk_nope + qk_rope)^-½`, times `mscale²` with
//!   `mscale = 0.1·mscale_all_dim·ln(factor) + 1` when the rotary embedding is scaled (YaRN) and
//!   `mscale_all_dim` is set; YaRN's attention factor multiplies the rotary values' cosines and
//!   sines as transformers does.
//!
//! Checkpoints are `DeepseekV2ForCausalLM`'s / `DeepseekV3ForCausalLM`'s (`model.` prefix,
//! `lm_head.weight` outside it), experts one by one or merged. V3's multi-token-prediction
//! layers (past `num_hidden_layers`) are not read. Each head's values take a slot as wide as
//! its query and key (`qk_nope + qk_rope`), zero beyond `v_head_dim`, with the output
//! projection's columns there zero: the attention is exact; the output projection is held
//! `(qk_nope + qk_rope) / v_head_dim` times its size.

use crate::attention::PositionScheme;
use crate::blocks::decoder::{
    DecoderLayer, DecoderStack, LayerOptions, LmHead, Positional, StackOptions,
};
use crate::blocks::experts::{
    ExpertNames, Experts, GroupRouting, GroupScore, RouterSettings, Scoring,
};
use crate::blocks::family::{Family, FamilyConfig, GgufConfig, GgufReader, Quirks};
use crate::blocks::latent::{LatentProjection, LatentQuery, LowRankQuery};
use crate::blocks::layers::{out_in_linear, FeedForward, FfnNames, Linear, Norm};
use crate::blocks::network::{Architecture, Network, MAX_LAYERS};
use crate::blocks::rope::{read_rope_based, rope_factor_in_range, Partial, MAX_ROTARY_POSITIONS};
use crate::error::{Error, GgufMetadataProblem};
use crate::formats::config::{
    ConfigError, ConfigFile, ConfigProblem, FieldValue, Instead, Limit, Oversize, RopeProblem,
    Unsupported,
};
use crate::formats::gguf::{DecoderParams, RopeScaling as GgufRopeScaling};
use crate::formats::source::TOKENIZERS_WITH_SETTINGS;
use crate::formats::tensors::{Name, TensorMap, Tensors};
use crate::formats::validate::{ConfigCount, ConfigDim};
use crate::formats::weights::{Anchor, Checkpoint, Weight};
use crate::kernels::{yarn_attention_factor, Activation, Layout, Mask, Rope, RopeScaling, Yarn};

/// DeepSeek-V2 in the family registry.
pub static DEEPSEEK_V2: Family = Family {
    name: "DeepSeek-V2",
    model_types: &["deepseek_v2"],
    class_prefixes: &["DeepseekV2"],
    anchor: Anchor {
        tensor: "embed_tokens.weight",
        family: "DeepSeek-V2",
        prefix: "model",
    },
    config: |file| Ok(Box::new(DeepseekConfig::read(file, Version::V2)?)),
    quirks: Quirks {
        tokenizer_files: TOKENIZERS_WITH_SETTINGS,
        gguf: Some(GGUF_DEEPSEEK2),
        ..Quirks::NONE
    },
};

/// GGUF files of llama.cpp's `deepseek2` architecture: DeepSeek-V2, V2-Lite and V3 alike
/// ([`DeepseekConfig::from_gguf`] tells them apart by `expert_gating_func`).
const GGUF_DEEPSEEK2: GgufReader = GgufReader {
    architectures: &["deepseek2"],
    config: |p, origin| Ok(Box::new(DeepseekConfig::from_gguf(p, origin)?)),
};

/// DeepSeek-V3 in the family registry.
pub static DEEPSEEK_V3: Family = Family {
    name: "DeepSeek-V3",
    model_types: &["deepseek_v3"],
    class_prefixes: &["DeepseekV3"],
    anchor: Anchor {
        tensor: "embed_tokens.weight",
        family: "DeepSeek-V3",
        prefix: "model",
    },
    config: |file| Ok(Box::new(DeepseekConfig::read(file, Version::V3)?)),
    quirks: Quirks {
        tokenizer_files: TOKENIZERS_WITH_SETTINGS,
        ..Quirks::NONE
    },
};

/// The most experts a router may have (a bound on a size read from the config).
const MAX_EXPERTS: usize = 4096;

/// The widest query/key or value head read from a GGUF file.
const MAX_HEAD: usize = 4096;

/// Which of the two.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    /// DeepSeek-V2 (and V2-Lite, V2.5).
    V2,
    /// DeepSeek-V3 (and R1).
    V3,
}

/// The rotary embedding: YaRN, or one of the plain scalings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum DeepseekRope {
    /// YaRN, with the softmax scale's `mscale` (1 when `mscale_all_dim` is unset).
    Yarn(Yarn, f64),
    /// Default, linear, llama3 …
    Plain(RopeScaling),
}

/// The mixture of experts.
#[derive(Clone, Debug, PartialEq)]
pub struct DeepseekMoe {
    /// The router's counts.
    pub router: RouterSettings,
    /// Each expert's inner size (`moe_intermediate_size`).
    pub inner: usize,
    /// Shared experts (`n_shared_experts`; 0: none), run as one MLP `inner · n` wide.
    pub shared: usize,
    /// How the router scores and chooses (without the bias, which is a tensor).
    pub routing: GroupRouting,
    /// The first routed layer (`first_k_dense_replace`).
    pub first: usize,
}

/// A DeepSeek-V2/V3 config, with transformers' defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct DeepseekConfig {
    /// V2 or V3.
    pub version: Version,
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Hidden size.
    pub hidden_size: usize,
    /// The dense layers' inner size.
    pub intermediate_size: usize,
    /// Layers.
    pub num_hidden_layers: usize,
    /// Heads.
    pub num_attention_heads: usize,
    /// The queries' low rank (`q_lora_rank`; `None`: one `q_proj`).
    pub q_lora_rank: Option<usize>,
    /// The keys' and values' latent size.
    pub kv_lora_rank: usize,
    /// Query/key values without positions per head.
    pub qk_nope_head_dim: usize,
    /// Rotary values per head.
    pub qk_rope_head_dim: usize,
    /// Value size per head.
    pub v_head_dim: usize,
    /// The longest input.
    pub max_position_embeddings: usize,
    /// RMSNorm ε.
    pub rms_norm_eps: f64,
    /// RoPE base.
    pub rope_theta: f64,
    /// RoPE scaling.
    pub rope: DeepseekRope,
    /// Whether the rotary values come in interleaved pairs (V2 always; V3's `rope_interleave`).
    pub rope_interleave: bool,
    /// Whether the output projection is the token embedding matrix.
    pub tie_word_embeddings: bool,
    /// Whether `q_a_proj`, `kv_a_proj_with_mqa` (and `q_proj`: never) and `o_proj` have biases.
    pub attention_bias: bool,
    /// Whether the MLPs' maps have biases (V2's `mlp_bias`).
    pub mlp_bias: bool,
    /// The gate's activation.
    pub hidden_act: Activation,
    /// The experts; `None` when every layer is dense.
    pub moe: Option<DeepseekMoe>,
}

impl DeepseekConfig {
    /// Read config.json.
    pub fn read(file: &ConfigFile, version: Version) -> Result<DeepseekConfig, ConfigError> {
        let v3 = version == Version::V3;
        let hidden_size = file.positive("hidden_size", if v3 { 7168 } else { 4096 })?;
        let heads = file.positive("num_attention_heads", if v3 { 128 } else { 32 })?;
        let layers = file.positive("num_hidden_layers", if v3 { 61 } else { 32 })?;
        if layers > MAX_LAYERS {
            return Err(file.invalid(ConfigProblem::TooMany {
                field: "num_hidden_layers",
                value: layers,
                limit: Limit::Layers(MAX_LAYERS),
            }));
        }
        let q_lora_rank = match file.get("q_lora_rank") {
            None if file.has_field("q_lora_rank") => None,
            None => Some(1536),
            Some(_) => Some(file.positive("q_lora_rank", 1536)?),
        };
        let kv_lora_rank = file.positive("kv_lora_rank", 512)?;
        let nope = file.positive("qk_nope_head_dim", 128)?;
        let rope_dim = file.positive("qk_rope_head_dim", 64)?;
        let value = file.positive("v_head_dim", 128)?;
        if rope_dim % 2 != 0 {
            return Err(file.invalid(RopeProblem::OddHeadDim { head_dim: rope_dim }));
        }
        let slot = (nope + rope_dim).max(value);
        if heads
            .checked_mul(slot)
            .and_then(|w| w.checked_mul(3))
            .is_none()
        {
            return Err(file.invalid(Oversize::Product {
                field: "num_attention_heads",
                value: heads,
                by_field: "qk_nope_head_dim",
                by: slot,
            }));
        }
        let max_position_embeddings =
            file.positive("max_position_embeddings", if v3 { 4096 } else { 2048 })?;
        if max_position_embeddings > MAX_ROTARY_POSITIONS {
            return Err(file.invalid(ConfigProblem::TooMany {
                field: "max_position_embeddings",
                value: max_position_embeddings,
                limit: Limit::RotaryPositions(MAX_ROTARY_POSITIONS),
            }));
        }
        let (rope_theta, rope) = read_deepseek_rope(file, max_position_embeddings)?;
        let moe = read_moe(file, version, layers)?;
        Ok(DeepseekConfig {
            version,
            vocab_size: file.positive("vocab_size", if v3 { 129280 } else { 102400 })?,
            hidden_size,
            intermediate_size: file
                .positive("intermediate_size", if v3 { 18432 } else { 11008 })?,
            num_hidden_layers: layers,
            num_attention_heads: heads,
            q_lora_rank,
            kv_lora_rank,
            qk_nope_head_dim: nope,
            qk_rope_head_dim: rope_dim,
            v_head_dim: value,
            max_position_embeddings,
            rms_norm_eps: file.epsilon("rms_norm_eps", 1e-6)?,
            rope_theta,
            rope,
            rope_interleave: !v3 || file.boolean("rope_interleave")?.unwrap_or(true),
            tie_word_embeddings: file.boolean("tie_word_embeddings")?.unwrap_or(false),
            attention_bias: file.boolean("attention_bias")?.unwrap_or(false),
            mlp_bias: !v3 && file.boolean("mlp_bias")?.unwrap_or(false),
            hidden_act: file.activation("hidden_act", "silu")?,
            moe,
        })
    }

    /// The config a GGUF file of llama.cpp's `deepseek2` architecture describes, as llama.cpp's
    /// converter writes one (`convert_hf_to_gguf.py`'s `DeepseekV2Model`): the latent ranks
    /// (`attention.q_lora_rank`, absent for one `attn_q`; `attention.kv_lora_rank`), a query/key
    /// head's size `attention.key_length_mla` (older files: `attention.key_length`, with as many
    /// key/value heads as heads) of which `rope.dimension_count` rotate, the value head's
    /// `attention.value_length_mla` (else `attention.value_length`); the routed experts after
    /// `leading_dense_block_count` dense layers, `expert_shared_count` shared ones, and the router
    /// `expert_gating_func` names: softmax (V2; absent too, as llama.cpp reads it) or sigmoid with
    /// the `exp_probs_b` bias (V3), within `expert_group_used_count` of `expert_group_count`
    /// groups, the weights normalised where `expert_weights_norm` and times
    /// `expert_weights_scale`. A group scores as transformers scores it: V2 by its best expert, V3
    /// by its two best (llama.cpp sums the two best of every file's groups, so a V2 file with
    /// expert groups is run as transformers runs V2, not as llama.cpp does). YaRN as llama.cpp's `deepseek2` graph runs it: the cosines and sines
    /// times `rope.scaling.yarn_attn_factor` (1 when absent), the softmax scale times `mscale²`
    /// with `mscale = yarn_attn_factor · (1 + yarn_log_multiplier · ln factor)` (transformers'
    /// `mscale_all_dim` is `yarn_log_multiplier / 0.1`; a file cannot state transformers'
    /// `mscale`, which llama.cpp takes to equal `mscale_all_dim`). The rotary values come in
    /// interleaved pairs (llama.cpp rotates every `deepseek2` file so).
    pub fn from_gguf(p: &DecoderParams, origin: &str) -> Result<DeepseekConfig, Error> {
        crate::families::llama::check_gguf_shape(p, origin)?;
        let x = &p.extra;
        let refuse = |key: &str, value: String, why: &str| {
            crate::families::llama::gguf_value_error(p, origin, key, value, why)
        };
        let shown = |v: Option<usize>| v.map_or("missing".to_string(), |v| v.to_string());
        let kv_lora_rank = match x.kv_lora_rank {
            Some(r) if r > 0 && r <= p.hidden_size * 4 => r,
            other => {
                return Err(refuse(
                    "attention.kv_lora_rank",
                    shown(other),
                    "a deepseek2 file states its key/value latent's size, a positive number \
                     of at most four times the embedding length",
                ))
            }
        };
        let q_lora_rank = match x.q_lora_rank {
            None => None,
            Some(r) if r > 0 && r <= p.hidden_size * 4 => Some(r),
            Some(r) => {
                return Err(refuse(
                    "attention.q_lora_rank",
                    r.to_string(),
                    "the queries' low rank is a positive number of at most four times the \
                     embedding length (absent: one attn_q)",
                ))
            }
        };
        let rope_dim = p.rope_dimension_count;
        let key_length = x.key_length_mla.unwrap_or(p.head_dim);
        if rope_dim == 0 || !rope_dim.is_multiple_of(2) || key_length <= rope_dim {
            return Err(refuse(
                "rope.dimension_count",
                rope_dim.to_string(),
                &format!(
                    "the rotary part of a query/key head is even, at least 2 and less than the \
                     head's {key_length} values (attention.key_length_mla)"
                ),
            ));
        }
        let value = match x.value_length_mla.or(x.value_length) {
            Some(v) if v > 0 && v <= MAX_HEAD => v,
            other => {
                return Err(refuse(
                    "attention.value_length_mla",
                    shown(other),
                    &format!("a value head's size is between 1 and {MAX_HEAD}"),
                ))
            }
        };
        if key_length > MAX_HEAD {
            return Err(refuse(
                "attention.key_length_mla",
                key_length.to_string(),
                &format!("a query/key head's size is at most {MAX_HEAD}"),
            ));
        }
        let v3 = match x.expert_gating_func {
            None | Some(1) => false,
            Some(2) => true,
            Some(other) => {
                return Err(refuse(
                    "expert_gating_func",
                    other.to_string(),
                    "DeepSeek routes by softmax (1) or sigmoid (2)",
                ))
            }
        };
        let version = if v3 { Version::V3 } else { Version::V2 };
        let rope = match &p.rope_scaling {
            None => DeepseekRope::Plain(RopeScaling::None),
            Some(GgufRopeScaling::Linear { factor }) => {
                rope_factor_in_range(*factor).map_err(|why| {
                    refuse("rope.scaling.factor", factor.to_string(), &why.to_string())
                })?;
                DeepseekRope::Plain(RopeScaling::Linear { factor: *factor })
            }
            Some(GgufRopeScaling::Yarn {
                factor,
                original_max_position_embeddings,
            }) => {
                rope_factor_in_range(*factor).map_err(|why| {
                    refuse("rope.scaling.factor", factor.to_string(), &why.to_string())
                })?;
                let original = original_max_position_embeddings.ok_or_else(|| {
                    refuse(
                        "rope.scaling.original_context_length",
                        "missing".to_string(),
                        "YaRN needs the context length of pre-training",
                    )
                })?;
                let positive = |key: &str, v: Option<f64>, default: f64| match v {
                    None => Ok(default),
                    Some(v) if v.is_finite() && v > 0.0 => Ok(v),
                    Some(v) => Err(refuse(key, v.to_string(), "it must be a positive number")),
                };
                let attn = positive("rope.scaling.yarn_attn_factor", x.yarn_attn_factor, 1.0)?;
                let log_mul = match x.yarn_log_multiplier {
                    None => 0.0,
                    Some(m) if m.is_finite() && m >= 0.0 => m,
                    Some(m) => {
                        return Err(refuse(
                            "rope.scaling.yarn_log_multiplier",
                            m.to_string(),
                            "it must be a number of at least 0",
                        ))
                    }
                };
                let mscale = if *factor <= 1.0 {
                    attn
                } else {
                    attn * (1.0 + log_mul * factor.ln())
                };
                DeepseekRope::Yarn(
                    Yarn {
                        factor: *factor,
                        beta_fast: positive("rope.scaling.yarn_beta_fast", x.yarn_beta_fast, 32.0)?,
                        beta_slow: positive("rope.scaling.yarn_beta_slow", x.yarn_beta_slow, 1.0)?,
                        original: original as f64,
                        truncate: true,
                        attention_factor: attn,
                    },
                    mscale,
                )
            }
            Some(GgufRopeScaling::Other { kind, .. }) => {
                return Err(Error::from(crate::InputError::GgufMetadata {
                    origin: origin.to_string(),
                    problem: GgufMetadataProblem::RopeScaling {
                        scaling: format!("'{kind}'"),
                        runs: "; DeepSeek runs default, linear and yarn rotary embeddings",
                    },
                }))
            }
        };
        let moe = match &p.experts {
            None => None,
            Some(e) => {
                let first = x.leading_dense_block_count.unwrap_or(0);
                let inner = match e.feed_forward_length {
                    Some(f) => f,
                    None => {
                        return Err(refuse(
                            "expert_feed_forward_length",
                            "missing".to_string(),
                            "a deepseek2 file states its experts' inner size",
                        ))
                    }
                };
                let shared = x.expert_shared_count.unwrap_or(0);
                if inner
                    .checked_mul(shared.max(1))
                    .is_none_or(|w| w > p.hidden_size * 64)
                {
                    return Err(refuse(
                        "expert_shared_count",
                        shared.to_string(),
                        "the shared experts are at most 64 times as wide as the embeddings",
                    ));
                }
                let groups = x.expert_group_count.unwrap_or(1);
                let kept = x.expert_group_used_count.unwrap_or(groups);
                match group_misfit(e.count, e.used, groups, kept) {
                    None => {}
                    Some(GroupMisfit::NoGroups) | Some(GroupMisfit::NotDivisible) => {
                        return Err(refuse(
                            "expert_group_count",
                            groups.to_string(),
                            &format!("the groups divide the {} experts", e.count),
                        ))
                    }
                    Some(GroupMisfit::KeptGroups) => {
                        return Err(refuse(
                            "expert_group_used_count",
                            kept.to_string(),
                            &format!("between 1 and the {groups} groups are kept"),
                        ))
                    }
                    Some(GroupMisfit::Chosen { fit }) => {
                        return Err(refuse(
                            "expert_used_count",
                            e.used.to_string(),
                            &format!("the kept groups hold {fit} experts"),
                        ))
                    }
                }
                let scaling = match x.expert_weights_scale {
                    None => 1.0,
                    Some(s) if s.is_finite() => s,
                    Some(s) => {
                        return Err(refuse(
                            "expert_weights_scale",
                            s.to_string(),
                            "it must be a finite number",
                        ))
                    }
                };
                let normalise = e.weights_norm.unwrap_or(false);
                (first < p.num_hidden_layers).then_some(DeepseekMoe {
                    router: RouterSettings {
                        experts: e.count,
                        top_k: e.used,
                        norm_topk_prob: normalise,
                    },
                    inner,
                    shared,
                    routing: GroupRouting {
                        scoring: if v3 {
                            Scoring::Sigmoid
                        } else {
                            Scoring::Softmax
                        },
                        groups,
                        topk_group: kept,
                        group_score: if v3 {
                            GroupScore::TopTwoSum
                        } else {
                            GroupScore::Max
                        },
                        bias: None,
                        masked: if v3 { f32::NEG_INFINITY } else { 0.0 },
                        weights_from_choice: !v3,
                        normalise,
                        scaling: scaling as f32,
                    },
                    first,
                })
            }
        };
        Ok(DeepseekConfig {
            version,
            vocab_size: p.vocab_size,
            hidden_size: p.hidden_size,
            intermediate_size: p.intermediate_size,
            num_hidden_layers: p.num_hidden_layers,
            num_attention_heads: p.num_attention_heads,
            q_lora_rank,
            kv_lora_rank,
            qk_nope_head_dim: key_length - rope_dim,
            qk_rope_head_dim: rope_dim,
            v_head_dim: value,
            max_position_embeddings: p.max_position_embeddings,
            rms_norm_eps: p.rms_norm_eps,
            rope_theta: p.rope_theta,
            rope,
            rope_interleave: true,
            tie_word_embeddings: p.tie_word_embeddings,
            attention_bias: false,
            mlp_bias: false,
            hidden_act: Activation::Silu,
            moe,
        })
    }

    /// A head's slot: `max(qk_nope + qk_rope, v_head_dim)` values.
    pub fn slot(&self) -> usize {
        (self.qk_nope_head_dim + self.qk_rope_head_dim).max(self.v_head_dim)
    }

    /// The softmax scale: `(qk_nope + qk_rope)^-½`, times `mscale²` under YaRN.
    pub fn scale(&self) -> f64 {
        let base = ((self.qk_nope_head_dim + self.qk_rope_head_dim) as f64).powf(-0.5);
        match self.rope {
            DeepseekRope::Yarn(_, mscale) => base * mscale * mscale,
            DeepseekRope::Plain(_) => base,
        }
    }

    /// Its shape in family-independent terms (each head `slot()` values wide).
    pub fn architecture(&self) -> Architecture {
        let heads = self.num_attention_heads;
        let (family, model_type) = match self.version {
            Version::V2 => (DEEPSEEK_V2.name, "deepseek_v2"),
            Version::V3 => (DEEPSEEK_V3.name, "deepseek_v3"),
        };
        Architecture {
            family,
            model_type: model_type.to_string(),
            layers: self.num_hidden_layers,
            heads,
            kv_heads: heads,
            kv_head: (0..heads).collect(),
            head_dim: self.slot(),
            hidden_size: self.hidden_size,
            vocab_size: self.vocab_size,
            max_positions: self.max_position_embeddings,
            token_types: 0,
            tokenizer_types: false,
            mask: Mask::Causal,
            sliding_window: None,
            positions: PositionScheme::Rotary,
        }
    }

    /// Build the network from tensors named as inside transformers' base model.
    pub fn build_from(&self, t: &dyn Tensors) -> Result<DecoderStack, Error> {
        let (hidden, eps) = (self.hidden_size, self.rms_norm_eps);
        let heads = self.num_attention_heads;
        let (nope, rope_dim, value) = (
            self.qk_nope_head_dim,
            self.qk_rope_head_dim,
            self.v_head_dim,
        );
        let (qk, slot) = (nope + rope_dim, self.slot());
        let rms = |name: &Name, width: usize| -> Result<Norm, Error> {
            Ok(Norm::from_weights(
                t.weight(&name.weight(), &[width])?,
                None,
                eps,
            ))
        };
        let attn_bias = self.attention_bias;
        let linear =
            |name: &Name, inputs, outputs, bias| out_in_linear(t, name, inputs, outputs, bias);
        let mlp =
            |name: &Name, inputs, outputs| out_in_linear(t, name, inputs, outputs, self.mlp_bias);
        let plain = |name: &Name, inputs, outputs| out_in_linear(t, name, inputs, outputs, false);
        let layers = (0..self.num_hidden_layers)
            .map(|i| {
                let layer = Name::root().pp("layers").pp(i);
                let a = layer.pp("self_attn");
                let query = match self.q_lora_rank {
                    None => {
                        LatentQuery::Direct(linear(&a.pp("q_proj"), hidden, heads * qk, false)?)
                    }
                    Some(rank) => LatentQuery::LowRank(Box::new(LowRankQuery {
                        down: linear(&a.pp("q_a_proj"), hidden, rank, attn_bias)?,
                        norm: rms(&a.pp("q_a_layernorm"), rank)?,
                        up: linear(&a.pp("q_b_proj"), rank, heads * qk, false)?,
                    })),
                };
                let latent = LatentProjection {
                    query,
                    kv_down: linear(
                        &a.pp("kv_a_proj_with_mqa"),
                        hidden,
                        self.kv_lora_rank + rope_dim,
                        attn_bias,
                    )?,
                    kv_norm: rms(&a.pp("kv_a_layernorm"), self.kv_lora_rank)?,
                    kv_up: if t.shape(&a.pp("kv_b_proj").weight()).is_none()
                        && t.shape(&a.pp("k_b_proj").weight()).is_some()
                    {
                        joined_kv_b(t, &a, heads, self.kv_lora_rank, nope, value)?
                    } else {
                        linear(
                            &a.pp("kv_b_proj"),
                            self.kv_lora_rank,
                            heads * (nope + value),
                            false,
                        )?
                    },
                    heads,
                    nope,
                    rope: rope_dim,
                    value,
                    interleaved: self.rope_interleave,
                };
                let mlp_names = layer.pp("mlp");
                let ffn = match self.moe.as_ref().filter(|m| i >= m.first) {
                    None => FeedForward::load(
                        &gated(&mlp_names),
                        hidden,
                        self.intermediate_size,
                        self.hidden_act,
                        &mlp,
                    )?,
                    Some(moe) => {
                        let names = expert_names(i);
                        let bias = if self.version == Version::V3 {
                            let b = t.weight(
                                &names.router.tensor("e_score_correction_bias"),
                                &[moe.router.experts],
                            )?;
                            Some(b.to_vec())
                        } else {
                            None
                        };
                        let mut experts = Experts::load(
                            t,
                            &names,
                            hidden,
                            moe.inner,
                            self.hidden_act,
                            moe.router,
                            &plain,
                        )?
                        .with_groups(GroupRouting {
                            bias,
                            ..moe.routing.clone()
                        });
                        if moe.shared > 0 {
                            experts = experts.with_shared(FeedForward::load(
                                &gated(&mlp_names.pp("shared_experts")),
                                hidden,
                                moe.inner * moe.shared,
                                self.hidden_act,
                                &mlp,
                            )?);
                        }
                        FeedForward::Routed(Box::new(experts))
                    }
                };
                Ok(DecoderLayer {
                    attention_norm: rms(&layer.pp("input_layernorm"), hidden)?,
                    qkv: Vec::new(),
                    output: padded_output(
                        t,
                        &a.pp("o_proj"),
                        hidden,
                        heads,
                        value,
                        slot,
                        attn_bias,
                    )?,
                    ffn_norm: rms(&layer.pp("post_attention_layernorm"), hidden)?,
                    ffn,
                    scale: self.scale() as f32,
                    options: LayerOptions {
                        latent: Some(Box::new(latent)),
                        rope_offset: nope,
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
        let rope = match self.rope {
            DeepseekRope::Yarn(yarn, _) => Rope::yarn(rope_dim, self.rope_theta, yarn),
            DeepseekRope::Plain(scaling) => Rope::new(rope_dim, self.rope_theta, scaling),
        };
        Ok(DecoderStack {
            arch: self.architecture(),
            embed: t.matrix(&embed().weight(), &[self.vocab_size, hidden])?,
            positional: Positional::Rotary(rope.with_head_dim(slot)),
            layers,
            final_norm: rms(&Name::root().pp("norm"), hidden)?,
            lm_head,
            options: StackOptions::default(),
        })
    }
}

/// `kv_b_proj` (`[heads · (nope + value), rank]`) joined back from the two maps newer llama.cpp
/// converters split it into: `attn_k_b` (`[heads, rank, nope]`, each head's key rows transposed)
/// and `attn_v_b` (`[heads, value, rank]`), dequantised.
fn joined_kv_b(
    t: &dyn Tensors,
    a: &Name,
    heads: usize,
    rank: usize,
    nope: usize,
    value: usize,
) -> Result<Linear, Error> {
    let k = t.weight(&a.pp("k_b_proj").weight(), &[heads, rank, nope])?;
    let v = t.weight(&a.pp("v_b_proj").weight(), &[heads, value, rank])?;
    let width = nope + value;
    let mut w = vec![0f32; heads * width * rank];
    for h in 0..heads {
        for j in 0..nope {
            for r in 0..rank {
                w[(h * width + j) * rank + r] = k[(h * rank + r) * nope + j];
            }
        }
        w[(h * width + nope) * rank..(h + 1) * width * rank]
            .copy_from_slice(&v[h * value * rank..(h + 1) * value * rank]);
    }
    Ok(Linear::new(
        Weight::owned(w, vec![heads * width, rank]),
        Layout::OutIn,
        None,
    ))
}

/// The output projection `[hidden, heads · value]` (`o_proj`), widened to `[hidden, heads ·
/// slot]` with zero columns where a head's slot holds no value.
fn padded_output(
    t: &dyn Tensors,
    name: &Name,
    hidden: usize,
    heads: usize,
    value: usize,
    slot: usize,
    bias: bool,
) -> Result<Linear, Error> {
    if slot == value {
        return out_in_linear(t, name, heads * value, hidden, bias);
    }
    let w = t.weight(&name.weight(), &[hidden, heads * value])?;
    let mut wide = vec![0f32; hidden * heads * slot];
    for (o, row) in w.chunks_exact(heads * value).enumerate() {
        for h in 0..heads {
            wide[o * heads * slot + h * slot..][..value]
                .copy_from_slice(&row[h * value..][..value]);
        }
    }
    let bias = if bias {
        Some(t.weight(&name.bias(), &[hidden])?)
    } else {
        None
    };
    Ok(Linear::new(
        Weight::owned(wide, vec![hidden, heads * slot]),
        Layout::OutIn,
        bias,
    ))
}

/// A gated MLP's maps under `m` (`gate_proj`, `up_proj`, `down_proj`).
fn gated(m: &Name) -> FfnNames {
    FfnNames::Gated {
        gate: m.pp("gate_proj"),
        up: m.pp("up_proj"),
        down: m.pp("down_proj"),
    }
}

/// The token embeddings.
fn embed() -> Name {
    Name::root().pp("embed_tokens")
}

/// Layer `i`'s router (`mlp.gate`) and routed experts (`mlp.experts`).
fn expert_names(i: usize) -> ExpertNames {
    let m = Name::root().pp("layers").pp(i).pp("mlp");
    ExpertNames {
        router: m.pp("gate"),
        experts: m.pp("experts"),
        leaves: ["gate_proj", "up_proj", "down_proj"],
    }
}

/// Why experts, their top-k and their groups cannot route together (config.json's and GGUF's
/// readers say it each in their own words).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GroupMisfit {
    /// No groups.
    NoGroups,
    /// The groups do not divide the experts.
    NotDivisible,
    /// No kept group, or more kept than there are.
    KeptGroups,
    /// More experts chosen than the kept groups hold (`fit`).
    Chosen { fit: usize },
}

/// The first reason `experts` in `groups` groups, `topk_group` of them kept, cannot give
/// `top_k` experts per token; `None` when they can.
fn group_misfit(
    experts: usize,
    top_k: usize,
    groups: usize,
    topk_group: usize,
) -> Option<GroupMisfit> {
    if groups == 0 {
        return Some(GroupMisfit::NoGroups);
    }
    if !experts.is_multiple_of(groups) {
        return Some(GroupMisfit::NotDivisible);
    }
    if topk_group == 0 || topk_group > groups {
        return Some(GroupMisfit::KeptGroups);
    }
    let fit = topk_group * (experts / groups);
    (groups > 1 && top_k > fit).then_some(GroupMisfit::Chosen { fit })
}

/// The experts as the config describes them, with transformers' defaults; `None` when
/// `first_k_dense_replace` covers every layer.
fn read_moe(
    file: &ConfigFile,
    version: Version,
    layers: usize,
) -> Result<Option<DeepseekMoe>, ConfigError> {
    let v3 = version == Version::V3;
    let first = file
        .count("first_k_dense_replace")?
        .unwrap_or(if v3 { 3 } else { 0 });
    let experts_field = if file.has_field("n_routed_experts") || !file.has_field("num_experts") {
        "n_routed_experts"
    } else {
        "num_experts"
    };
    let experts = file.positive(experts_field, if v3 { 256 } else { 64 })?;
    if experts > MAX_EXPERTS {
        return Err(file.invalid(ConfigProblem::TooMany {
            field: experts_field,
            value: experts,
            limit: Limit::Number(MAX_EXPERTS),
        }));
    }
    // V2's default is null, which transformers' router cannot run; V2 and V2-Lite use 6.
    let top_k = file.positive("num_experts_per_tok", if v3 { 8 } else { 6 })?;
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
    let (groups, topk_group, group_score) = if v3 {
        let groups = file.positive("n_group", 8)?;
        (
            groups,
            file.positive("topk_group", 4)?,
            GroupScore::TopTwoSum,
        )
    } else {
        match file.string("topk_method")?.as_deref() {
            None | Some("greedy") => (1, 1, GroupScore::Max),
            Some("group_limited_greedy") => {
                let groups = file
                    .count("n_group")?
                    .ok_or_else(|| file.invalid(ConfigProblem::Zero { field: "n_group" }))?;
                let keep = file.count("topk_group")?.ok_or_else(|| {
                    file.invalid(ConfigProblem::Zero {
                        field: "topk_group",
                    })
                })?;
                (groups, keep, GroupScore::Max)
            }
            Some(other) => {
                return Err(file.unsupported(Unsupported::Value {
                    field: "topk_method",
                    value: Some(FieldValue::Name(other.to_string())),
                    note: None,
                    instead: Instead::Runs(
                        "DeepSeek-V2 routes by 'greedy' or 'group_limited_greedy'",
                    ),
                }))
            }
        }
    };
    match group_misfit(experts, top_k, groups, topk_group) {
        None => {}
        Some(GroupMisfit::NoGroups) => {
            return Err(file.invalid(ConfigProblem::Zero { field: "n_group" }))
        }
        Some(GroupMisfit::NotDivisible) => {
            return Err(file.invalid(ConfigProblem::NotDivisible {
                field: experts_field,
                value: experts,
                by_field: "n_group",
                by: groups,
            }))
        }
        Some(GroupMisfit::KeptGroups) => {
            return Err(file.invalid(ConfigProblem::TooMany {
                field: "topk_group",
                value: topk_group,
                limit: Limit::Field {
                    field: "n_group",
                    value: groups,
                },
            }))
        }
        Some(GroupMisfit::Chosen { fit }) => {
            return Err(file.invalid(ConfigProblem::TooMany {
                field: "num_experts_per_tok",
                value: top_k,
                limit: Limit::Number(fit),
            }))
        }
    }
    let scaling = file
        .number("routed_scaling_factor")?
        .unwrap_or(if v3 { 2.5 } else { 1.0 });
    if !scaling.is_finite() {
        return Err(file.invalid(ConfigProblem::Zero {
            field: "routed_scaling_factor",
        }));
    }
    let normalise = v3 && file.boolean("norm_topk_prob")?.unwrap_or(true);
    let inner = file.positive("moe_intermediate_size", if v3 { 2048 } else { 1407 })?;
    let shared = file
        .count("n_shared_experts")?
        .unwrap_or(if v3 { 1 } else { 2 });
    if inner.checked_mul(shared).is_none() {
        return Err(file.invalid(Oversize::Product {
            field: "moe_intermediate_size",
            value: inner,
            by_field: "n_shared_experts",
            by: shared,
        }));
    }
    if first >= layers {
        return Ok(None);
    }
    Ok(Some(DeepseekMoe {
        router: RouterSettings {
            experts,
            top_k,
            norm_topk_prob: normalise,
        },
        inner,
        shared,
        routing: GroupRouting {
            scoring: if v3 {
                Scoring::Sigmoid
            } else {
                Scoring::Softmax
            },
            groups,
            topk_group,
            group_score,
            bias: None,
            masked: if v3 { f32::NEG_INFINITY } else { 0.0 },
            weights_from_choice: !v3,
            normalise,
            scaling: scaling as f32,
        },
        first,
    }))
}

/// The rotary settings: `rope_parameters` (or 4.x's `rope_scaling` with `rope_theta`) of type
/// `yarn` as transformers reads it (`factor`, else `max_position_embeddings /
/// original_max_position_embeddings`; `beta_fast` 32, `beta_slow` 1; the attention factor
/// `attention_factor`, else from `mscale`/`mscale_all_dim`, else from `factor`), with the
/// softmax scale's `mscale` from `mscale_all_dim`; any other type as the other rotary families
/// read it.
fn read_deepseek_rope(
    file: &ConfigFile,
    max_positions: usize,
) -> Result<(f64, DeepseekRope), ConfigError> {
    let section = match file.section("rope_parameters")? {
        Some(s) => Some(s),
        None => file.section("rope_scaling")?,
    };
    let kind = section.as_ref().and_then(|s| {
        s.get("rope_type")
            .or_else(|| s.get("type"))
            .and_then(|v| v.as_str().map(str::to_string))
    });
    let Some(s) = section.filter(|_| kind.as_deref() == Some("yarn")) else {
        let (theta, scaling) = read_rope_based(file, Partial::Refused, 10000.0)?;
        return Ok((theta, DeepseekRope::Plain(scaling)));
    };
    let needs = |key: &'static str| {
        s.invalid(RopeProblem::Needs {
            rope_type: "yarn".to_string(),
            key,
        })
    };
    let positive = |key: &'static str| -> Result<Option<f64>, ConfigError> {
        match s.number(key)? {
            Some(v) if !(v.is_finite() && v > 0.0) => {
                Err(s.invalid(ConfigProblem::Zero { field: key }))
            }
            other => Ok(other),
        }
    };
    let theta = match positive("rope_theta")? {
        Some(t) => t,
        None => match file.number("rope_theta")? {
            Some(t) if t.is_finite() && t > 0.0 => t,
            Some(_) => {
                return Err(file.invalid(ConfigProblem::Zero {
                    field: "rope_theta",
                }))
            }
            None => 10000.0,
        },
    };
    let original = match positive("original_max_position_embeddings")? {
        Some(o) => o,
        None => file
            .count("original_max_position_embeddings")?
            .map(|o| o as f64)
            .ok_or_else(|| needs("original_max_position_embeddings"))?,
    };
    let factor = positive("factor")?.unwrap_or(max_positions as f64 / original);
    rope_factor_in_range(factor).map_err(|why| s.invalid(RopeProblem::Factor(why)))?;
    let get = |m: f64| {
        if factor <= 1.0 {
            1.0
        } else {
            0.1 * m * factor.ln() + 1.0
        }
    };
    let (mscale, all_dim) = (positive("mscale")?, positive("mscale_all_dim")?);
    let attention_factor = match positive("attention_factor")? {
        Some(a) => a,
        None => match (mscale, all_dim) {
            (Some(m), Some(all)) => get(m) / get(all),
            _ => yarn_attention_factor(factor),
        },
    };
    let softmax_mscale = all_dim.map_or(1.0, get);
    Ok((
        theta,
        DeepseekRope::Yarn(
            Yarn {
                factor,
                beta_fast: positive("beta_fast")?.unwrap_or(32.0),
                beta_slow: positive("beta_slow")?.unwrap_or(1.0),
                original,
                truncate: s.boolean("truncate")?.unwrap_or(true),
                attention_factor,
            },
            softmax_mscale,
        ),
    ))
}

impl GgufConfig for DeepseekConfig {
    fn stack(&self, tensors: &TensorMap) -> Result<DecoderStack, Error> {
        self.build_from(tensors)
    }
}

impl FamilyConfig for DeepseekConfig {
    fn checks(&self) -> (Vec<ConfigDim>, Vec<ConfigCount>) {
        let mut dims = vec![
            ConfigDim::new("vocab_size", self.vocab_size, embed().weight(), 0),
            ConfigDim::new("hidden_size", self.hidden_size, embed().weight(), 1),
        ];
        let attn = |i: usize, leaf: &str| {
            Name::root()
                .pp("layers")
                .pp(i)
                .pp("self_attn")
                .pp(leaf)
                .weight()
        };
        dims.push(ConfigDim::new(
            "kv_lora_rank",
            self.kv_lora_rank,
            attn(0, "kv_a_layernorm"),
            0,
        ));
        if let Some(rank) = self.q_lora_rank {
            dims.push(ConfigDim::new(
                "q_lora_rank",
                rank,
                attn(0, "q_a_layernorm"),
                0,
            ));
        }
        if self.moe.as_ref().is_none_or(|m| m.first > 0) {
            dims.push(ConfigDim::new(
                "intermediate_size",
                self.intermediate_size,
                Name::root()
                    .pp("layers")
                    .pp(0)
                    .pp("mlp")
                    .pp("gate_proj")
                    .weight(),
                0,
            ));
        }
        if let Some(moe) = &self.moe {
            dims.push(ConfigDim::new(
                "n_routed_experts",
                moe.router.experts,
                expert_names(moe.first).router.weight(),
                0,
            ));
        }
        let counts = vec![ConfigCount::new(
            "num_hidden_layers",
            self.num_hidden_layers,
            "layer",
            |i| {
                Name::root()
                    .pp("layers")
                    .pp(i)
                    .pp("input_layernorm")
                    .weight()
            },
        )];
        (dims, counts)
    }

    fn build(&self, ckpt: &Checkpoint) -> Result<Box<dyn Network>, Error> {
        Ok(Box::new(self.build_from(ckpt)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn read(text: &str, version: Version) -> Result<DeepseekConfig, String> {
        let file = ConfigFile::parse(text, Path::new("config.json")).unwrap();
        DeepseekConfig::read(&file, version).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_are_transformers_config_classes() {
        let v2 = read("{}", Version::V2).unwrap();
        assert_eq!(v2.q_lora_rank, Some(1536));
        assert_eq!(
            (v2.qk_nope_head_dim, v2.qk_rope_head_dim, v2.v_head_dim),
            (128, 64, 128)
        );
        let moe = v2.moe.as_ref().unwrap();
        assert_eq!(
            (moe.router.experts, moe.first, moe.shared, moe.inner),
            (64, 0, 2, 1407)
        );
        assert_eq!(moe.routing.scoring, Scoring::Softmax);
        assert_eq!(moe.routing.groups, 1);
        assert!(v2.rope_interleave);
        let v3 = read("{}", Version::V3).unwrap();
        let moe = v3.moe.as_ref().unwrap();
        assert_eq!(
            (moe.router.experts, moe.router.top_k, moe.first, moe.shared),
            (256, 8, 3, 1)
        );
        assert_eq!((moe.routing.groups, moe.routing.topk_group), (8, 4));
        assert_eq!(moe.routing.scaling, 2.5);
        assert!(moe.routing.normalise && moe.routing.scoring == Scoring::Sigmoid);
        // An explicit null: one q_proj.
        let lite = read(r#"{"q_lora_rank": null}"#, Version::V2).unwrap();
        assert_eq!(lite.q_lora_rank, None);
        assert_eq!(lite.slot(), 192);
        assert!((lite.scale() - 192f64.powf(-0.5)).abs() < 1e-15);
    }

    #[test]
    fn yarn_s_mscale_scales_the_softmax() {
        let c = read(
            r#"{"max_position_embeddings": 163840, "rope_scaling": {"type": "yarn", "factor": 40,
                "mscale": 1.0, "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096,
                "beta_fast": 32, "beta_slow": 1}, "rope_theta": 10000}"#,
            Version::V3,
        )
        .unwrap();
        let DeepseekRope::Yarn(y, m) = c.rope else {
            panic!("{:?}", c.rope)
        };
        let want = 0.1 * 40f64.ln() + 1.0;
        assert!((m - want).abs() < 1e-12);
        // mscale = mscale_all_dim: the cosines and sines are not scaled.
        assert!((y.attention_factor - 1.0).abs() < 1e-12);
        assert!((c.scale() - 192f64.powf(-0.5) * want * want).abs() < 1e-12);
    }

    #[test]
    fn bad_routing_is_refused_in_one_line() {
        for (text, needle) in [
            (r#"{"topk_method": "noaux"}"#, "topk_method"),
            (
                r#"{"topk_method": "group_limited_greedy", "n_group": 3, "topk_group": 1}"#,
                "n_group",
            ),
            (r#"{"n_group": 4, "topk_group": 5}"#, "topk_group"),
            (
                r#"{"n_routed_experts": 4, "num_experts_per_tok": 5}"#,
                "num_experts_per_tok",
            ),
        ] {
            let version = if text.contains("topk_method") {
                Version::V2
            } else {
                Version::V3
            };
            let err = read(text, version).unwrap_err();
            assert!(err.contains(needle), "{text}: {err}");
            assert!(!err.contains('\n'));
        }
    }
}
