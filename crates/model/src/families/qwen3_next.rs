//! Qwen3-Next (`qwen3_next`): a hybrid decoder whose layers are either gated full attention or
//! gated delta-rule linear attention (`layer_types`, else every `full_attention_interval`-th
//! layer full), each followed by routed experts with a gated shared expert (dense MLPs where
//! `mlp_only_layers` or `decoder_sparse_step` say). Mirrors transformers 5's
//! `models/qwen3_next/modeling_qwen3_next.py` (eager attention, eager experts, and the torch
//! fallbacks `torch_chunk_gated_delta_rule` and `causal_conv1d_fn`):
//!
//! - every RMSNorm but the gated one scales by `1 + w` (zero-centred weights);
//! - full attention: `q_proj` writes each head's query and an output gate side by side; q and
//!   k are RMS-normalised per head, the first `head_dim × partial_rotary_factor` values rotated,
//!   and the attention output is multiplied by `sigmoid(gate)` before `o_proj`;
//! - linear attention ([`GatedDeltaNet`]): `in_proj_qkvz` and `in_proj_ba` give q, k, v, the
//!   output gate z and the per-value-head β and decay inputs, grouped per key head; q, k and v
//!   go through a depthwise causal convolution and SiLU; then per value head, with q and k
//!   L2-normalised and q scaled by `1/√d_k`, `S_t = α_t (I − β_t k_t k_tᵀ) S_{t−1} + β_t k_t
//!   v_tᵀ`, `o_t = S_tᵀ q_t` (α_t = exp(g_t), g = −exp(A_log)·softplus(a + dt_bias), β =
//!   sigmoid(b)); `o` through an RMSNorm gated by `silu(z)`, then `out_proj`.
//!
//! A gated delta layer has no softmax map, but its token mixing is linear in the values: `o_t =
//! Σ_{s≤t} A_{t,s} v_s` with `A_{t,s} = β_s k_sᵀ M_{s+1}ᵀ⋯M_tᵀ q_t`, `M_r = α_r (I − β_r k_r
//! k_rᵀ)` ([`GatedDeltaNet::mixing`] writes it out per value head). The captured attention is
//! that of the full-attention layers only: the network's layers for the views are them, in
//! order ([`Qwen3Next::full_layers`] maps them back to the model's numbers). Generation runs the
//! whole sequence again at each step (the recurrent state is not cached).
//!
//! Checkpoints are `Qwen3NextForCausalLM`'s (`model.` prefix, `lm_head.weight` outside it) with
//! the experts numbered (`mlp.experts.{e}.gate_proj`) or merged (`gate_up_proj`, `down_proj`).

use crate::attention::PositionScheme;
use crate::blocks::capture::SequenceCapture;
use crate::blocks::experts::{ExpertNames, Experts, RouterSettings};
use crate::blocks::family::{Family, FamilyConfig, GgufConfig, GgufReader, Quirks};
use crate::blocks::layers::{
    add_in_place, matrix_forward, out_in_linear, part, FeedForward, FfnNames, Linear, Norm,
};
use crate::blocks::network::{
    Architecture, Batch, CausalLm, Inserted, KvCache, Network, TokenMixing, MAX_LAYERS,
};
use crate::blocks::rope::{read_rope_of, Partial, MAX_ROTARY_POSITIONS};
use crate::error::{Error, GgufMetadataProblem};
use crate::formats::config::{
    ConfigError, ConfigFile, ConfigProblem, Expected, Field, FieldValue, Instead, Limit,
    RopeProblem, Unsupported,
};
use crate::formats::gguf::{DecoderParams, RopeScaling as GgufRopeScaling};
use crate::formats::source::TOKENIZERS_WITH_SETTINGS;
use crate::formats::tensors::{Name, TensorMap, Tensors};
use crate::formats::validate::{ConfigCount, ConfigDim};
use crate::formats::weights::{Anchor, Checkpoint, MatrixWeight, Weight};
use crate::kernels::{
    self, Activation, AttentionSpec, CaptureSink, Layout, Mask, Output, Rope, RopeScaling,
    RopeTable,
};

/// Qwen3-Next in the family registry.
pub static QWEN3_NEXT: Family = Family {
    name: "Qwen3-Next",
    model_types: &["qwen3_next"],
    class_prefixes: &["Qwen3Next"],
    anchor: Anchor {
        tensor: "embed_tokens.weight",
        family: "Qwen3-Next",
        prefix: "model",
    },
    config: |file| Ok(Box::new(Qwen3NextConfig::read(file)?)),
    quirks: Quirks {
        tokenizer_files: TOKENIZERS_WITH_SETTINGS,
        gguf: Some(GGUF_QWEN3NEXT),
        ..Quirks::NONE
    },
};

/// GGUF files of llama.cpp's `qwen3next` architecture ([`Qwen3NextConfig::from_gguf`]).
const GGUF_QWEN3NEXT: GgufReader = GgufReader {
    architectures: &["qwen3next"],
    config: |p, origin| Ok(Box::new(Qwen3NextConfig::from_gguf(p, origin)?)),
};

/// The widest gated delta head, and the most of its heads, read from a GGUF file.
const MAX_LINEAR: usize = 4096;

/// The most experts a router may have (a bound on a size read from the config).
const MAX_EXPERTS: usize = 4096;

/// The widest causal convolution read from a config.
const MAX_CONV_KERNEL: usize = 64;

/// A Qwen3-Next config, with `Qwen3NextConfig`'s defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct Qwen3NextConfig {
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Hidden size.
    pub hidden_size: usize,
    /// The dense MLPs' inner size.
    pub intermediate_size: usize,
    /// Layers.
    pub num_hidden_layers: usize,
    /// Query heads of the full-attention layers.
    pub num_attention_heads: usize,
    /// Key/value heads of the full-attention layers.
    pub num_key_value_heads: usize,
    /// Size of one full-attention head.
    pub head_dim: usize,
    /// The rotated values of each head (`head_dim × partial_rotary_factor`).
    pub rotary_dim: usize,
    /// The longest input.
    pub max_position_embeddings: usize,
    /// RMSNorm ε (every norm, the gated one included).
    pub rms_norm_eps: f64,
    /// RoPE base.
    pub rope_theta: f64,
    /// RoPE scaling.
    pub rope_scaling: RopeScaling,
    /// Whether the output projection is the token embedding matrix.
    pub tie_word_embeddings: bool,
    /// Whether the attention projections have biases.
    pub attention_bias: bool,
    /// Per layer, whether it is a full-attention layer (else gated delta).
    pub full_layers: Vec<bool>,
    /// The gated delta layers' shape.
    pub linear: LinearShape,
    /// The router (its `experts` 0: no routed layers).
    pub router: RouterSettings,
    /// Each routed expert's inner size.
    pub moe_intermediate_size: usize,
    /// The shared expert's inner size.
    pub shared_expert_intermediate_size: usize,
    /// Per layer, whether its feed-forward block is routed.
    pub sparse_layers: Vec<bool>,
    /// Whether the tensors are as llama.cpp's converter stores them (a GGUF file): the
    /// zero-centred norms as `1 + w`, `in_proj_qkvz` split into `in_proj_qkv` (every key
    /// head's queries, then keys, then values) and `in_proj_z`, the decay rates as `-exp(A_log)`
    /// (`ssm_a`), the convolution `[channels, kernel]`.
    pub gguf: bool,
}

/// The shape of the gated delta (linear attention) layers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinearShape {
    /// Query/key heads (`linear_num_key_heads`).
    pub key_heads: usize,
    /// Value heads (`linear_num_value_heads`), a multiple of the key heads.
    pub value_heads: usize,
    /// Size of a query/key head.
    pub key_dim: usize,
    /// Size of a value head.
    pub value_dim: usize,
    /// The causal convolution's width (`linear_conv_kernel_dim`).
    pub conv_kernel: usize,
}

impl LinearShape {
    /// The convolved channels: queries, keys, values.
    fn conv_channels(&self) -> usize {
        2 * self.key_heads * self.key_dim + self.value_heads * self.value_dim
    }
}

/// A list of layer numbers (`mlp_only_layers`).
fn layer_list(file: &ConfigFile, field: &'static str) -> Result<Vec<usize>, ConfigError> {
    match file.get(field) {
        None | Some(serde_json::Value::Null) => Ok(Vec::new()),
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
                    field,
                    value: Some(FieldValue::Json(v.clone())),
                    note: None,
                    instead: Instead::Runs("; write a list of layer numbers"),
                })
            }),
    }
}

impl Qwen3NextConfig {
    /// Read config.json.
    pub fn read(file: &ConfigFile) -> Result<Qwen3NextConfig, ConfigError> {
        let hidden_size = file.positive("hidden_size", 2048)?;
        let heads = file.positive("num_attention_heads", 16)?;
        let kv = file.positive("num_key_value_heads", 2)?;
        let head_dim = file.positive("head_dim", 256)?;
        if heads % kv != 0 {
            return Err(file.invalid(ConfigProblem::NotMultiple {
                field: "num_attention_heads",
                value: heads,
                of_field: "num_key_value_heads",
                of: kv,
            }));
        }
        let layers = file.positive("num_hidden_layers", 48)?;
        if layers > MAX_LAYERS {
            return Err(file.invalid(ConfigProblem::TooMany {
                field: "num_hidden_layers",
                value: layers,
                limit: Limit::Layers(MAX_LAYERS),
            }));
        }
        let max_position_embeddings = file.positive("max_position_embeddings", 32768)?;
        if max_position_embeddings > MAX_ROTARY_POSITIONS {
            return Err(file.invalid(ConfigProblem::TooMany {
                field: "max_position_embeddings",
                value: max_position_embeddings,
                limit: Limit::RotaryPositions(MAX_ROTARY_POSITIONS),
            }));
        }
        let (rope_theta, rope_scaling) = read_rope_of(file, Partial::Read)?;
        let partial = match file
            .get("rope_parameters")
            .and_then(|p| p.get("partial_rotary_factor"))
            .filter(|v| !v.is_null())
        {
            Some(v) => v.as_f64(),
            None => file.number("partial_rotary_factor")?,
        }
        // Qwen3NextConfig's default.
        .unwrap_or(0.25);
        if !(partial > 0.0 && partial <= 1.0) {
            return Err(file.invalid(ConfigProblem::WrongType {
                field: Field::Top("partial_rotary_factor"),
                value: FieldValue::Number(partial),
                expected: Expected::Between {
                    above: 0.0,
                    at_most: 1.0,
                },
            }));
        }
        // transformers: int(head_dim * partial_rotary_factor).
        let rotary_dim = (head_dim as f64 * partial) as usize;
        if rotary_dim < 2 || !rotary_dim.is_multiple_of(2) {
            return Err(file.invalid(RopeProblem::RotatedValues {
                head_dim,
                partial,
                rotary_dim,
            }));
        }
        let full_layers: Vec<bool> = match file.strings("layer_types")? {
            Some(types) if types.len() != layers => {
                return Err(file.invalid(ConfigProblem::Entries {
                    field: "layer_types",
                    len: types.len(),
                    layers,
                }))
            }
            Some(types) => {
                if let Some(other) = types
                    .iter()
                    .find(|t| *t != "full_attention" && *t != "linear_attention")
                {
                    return Err(file.unsupported(Unsupported::Value {
                        field: "layer_types",
                        value: Some(FieldValue::Json(serde_json::Value::String(other.clone()))),
                        note: None,
                        instead: Instead::Runs("; write full_attention or linear_attention"),
                    }));
                }
                types.iter().map(|t| t == "full_attention").collect()
            }
            None => {
                let interval = file.positive("full_attention_interval", 4)?;
                (0..layers).map(|i| (i + 1) % interval == 0).collect()
            }
        };
        let key_heads = file.positive("linear_num_key_heads", 16)?;
        let value_heads = file.positive("linear_num_value_heads", 32)?;
        if value_heads % key_heads != 0 {
            return Err(file.invalid(ConfigProblem::NotMultiple {
                field: "linear_num_value_heads",
                value: value_heads,
                of_field: "linear_num_key_heads",
                of: key_heads,
            }));
        }
        let conv_kernel = file.positive("linear_conv_kernel_dim", 4)?;
        if conv_kernel > MAX_CONV_KERNEL {
            return Err(file.invalid(ConfigProblem::TooMany {
                field: "linear_conv_kernel_dim",
                value: conv_kernel,
                limit: Limit::Number(MAX_CONV_KERNEL),
            }));
        }
        let linear = LinearShape {
            key_heads,
            value_heads,
            key_dim: file.positive("linear_key_head_dim", 128)?,
            value_dim: file.positive("linear_value_head_dim", 128)?,
            conv_kernel,
        };
        let experts = file.count("num_experts")?.unwrap_or(512);
        if experts > MAX_EXPERTS {
            return Err(file.invalid(ConfigProblem::TooMany {
                field: "num_experts",
                value: experts,
                limit: Limit::Number(MAX_EXPERTS),
            }));
        }
        let top_k = file.positive("num_experts_per_tok", 10)?;
        if experts > 0 && top_k > experts {
            return Err(file.invalid(ConfigProblem::TooMany {
                field: "num_experts_per_tok",
                value: top_k,
                limit: Limit::Field {
                    field: "num_experts",
                    value: experts,
                },
            }));
        }
        let step = file.positive("decoder_sparse_step", 1)?;
        let dense = layer_list(file, "mlp_only_layers")?;
        let sparse_layers = (0..layers)
            .map(|i| !dense.contains(&i) && experts > 0 && (i + 1) % step == 0)
            .collect();
        if file.get("hidden_act").is_some() {
            let act = file.activation("hidden_act", "silu")?;
            if act != Activation::Silu {
                return Err(file.unsupported(Unsupported::Value {
                    field: "hidden_act",
                    value: file.get("hidden_act").cloned().map(FieldValue::Json),
                    note: None,
                    instead: Instead::Runs("; Qwen3-Next runs with silu"),
                }));
            }
        }
        Ok(Qwen3NextConfig {
            vocab_size: file.positive("vocab_size", 151936)?,
            hidden_size,
            intermediate_size: file.positive("intermediate_size", 5632)?,
            num_hidden_layers: layers,
            num_attention_heads: heads,
            num_key_value_heads: kv,
            head_dim,
            rotary_dim,
            max_position_embeddings,
            rms_norm_eps: file.epsilon("rms_norm_eps", 1e-6)?,
            rope_theta,
            rope_scaling,
            tie_word_embeddings: file.boolean("tie_word_embeddings")?.unwrap_or(false),
            attention_bias: file.boolean("attention_bias")?.unwrap_or(false),
            full_layers,
            linear,
            router: RouterSettings {
                experts,
                top_k,
                norm_topk_prob: file.boolean("norm_topk_prob")?.unwrap_or(true),
            },
            moe_intermediate_size: file.positive("moe_intermediate_size", 512)?,
            shared_expert_intermediate_size: file
                .positive("shared_expert_intermediate_size", 512)?,
            sparse_layers,
            gguf: false,
        })
    }

    /// The config a GGUF file of llama.cpp's `qwen3next` architecture describes, as llama.cpp's
    /// converter writes one (`convert_hf_to_gguf.py`'s `Qwen3NextModel`): the full-attention
    /// heads (`attention.head_count`, `head_count_kv`, `key_length`), of whose values
    /// `rope.dimension_count` rotate; every `full_attention_interval`-th layer full (4 when
    /// absent, as llama.cpp reads it), the others gated delta layers of `ssm.group_count` key
    /// heads of `ssm.state_size` and `ssm.time_step_rank` value heads sharing `ssm.inner_size`,
    /// convolved over `ssm.conv_kernel` tokens; routed experts of `expert_feed_forward_length`
    /// in the layers with a router (the others dense, `feed_forward_length`), the top
    /// `expert_used_count` renormalised (llama.cpp's qwen3next graph always does), and a shared
    /// expert of `expert_shared_feed_forward_length` behind its gate.
    pub fn from_gguf(p: &DecoderParams, origin: &str) -> Result<Qwen3NextConfig, Error> {
        crate::families::llama::check_gguf_shape(p, origin)?;
        let x = &p.extra;
        let refuse = |key: &str, value: String, why: &str| {
            crate::families::llama::gguf_value_error(p, origin, key, value, why)
        };
        let size = |key: &str, v: Option<usize>, max: usize| match v {
            Some(v) if v > 0 && v <= max => Ok(v),
            other => Err(refuse(
                key,
                other.map_or("missing".to_string(), |v| v.to_string()),
                &format!("a qwen3next file states it, between 1 and {max}"),
            )),
        };
        let conv_kernel = size("ssm.conv_kernel", x.ssm_conv_kernel, MAX_CONV_KERNEL)?;
        let key_dim = size("ssm.state_size", x.ssm_state_size, MAX_LINEAR)?;
        let key_heads = size("ssm.group_count", x.ssm_group_count, MAX_LINEAR)?;
        let value_heads = size("ssm.time_step_rank", x.ssm_time_step_rank, MAX_LINEAR)?;
        if value_heads % key_heads != 0 {
            return Err(refuse(
                "ssm.time_step_rank",
                value_heads.to_string(),
                &format!(
                    "the value heads are a multiple of the {key_heads} key heads (ssm.group_count)"
                ),
            ));
        }
        let inner = size("ssm.inner_size", x.ssm_inner_size, MAX_LINEAR * MAX_LINEAR)?;
        if inner % value_heads != 0 || inner / value_heads > MAX_LINEAR {
            return Err(refuse(
                "ssm.inner_size",
                inner.to_string(),
                &format!("it is the {value_heads} value heads' width, a multiple of them"),
            ));
        }
        let interval = size(
            "full_attention_interval",
            Some(x.full_attention_interval.unwrap_or(4)),
            MAX_LAYERS,
        )?;
        let layers = p.num_hidden_layers;
        let rotary_dim = p.rope_dimension_count;
        if rotary_dim < 2 || !rotary_dim.is_multiple_of(2) || rotary_dim > p.head_dim {
            return Err(refuse(
                "rope.dimension_count",
                rotary_dim.to_string(),
                &format!(
                    "RoPE rotates an even number of at least 2 and at most the head's {} values",
                    p.head_dim
                ),
            ));
        }
        let rope_scaling = match &p.rope_scaling {
            None => RopeScaling::None,
            Some(GgufRopeScaling::Linear { factor }) => {
                crate::blocks::rope::rope_factor_in_range(*factor).map_err(|why| {
                    refuse("rope.scaling.factor", factor.to_string(), &why.to_string())
                })?;
                RopeScaling::Linear { factor: *factor }
            }
            Some(other) => {
                return Err(Error::from(crate::InputError::GgufMetadata {
                    origin: origin.to_string(),
                    problem: GgufMetadataProblem::RopeScaling {
                        scaling: format!("{other:?}"),
                        runs: "; Qwen3-Next runs default and linear rotary embeddings",
                    },
                }))
            }
        };
        let experts = p.experts.as_ref().ok_or_else(|| {
            refuse(
                "expert_count",
                "missing".to_string(),
                "a qwen3next file routes to experts",
            )
        })?;
        let moe = size(
            "expert_feed_forward_length",
            experts.feed_forward_length,
            p.hidden_size.saturating_mul(64),
        )?;
        let shared = size(
            "expert_shared_feed_forward_length",
            x.expert_shared_feed_forward_length,
            p.hidden_size.saturating_mul(64),
        )?;
        Ok(Qwen3NextConfig {
            vocab_size: p.vocab_size,
            hidden_size: p.hidden_size,
            intermediate_size: p.intermediate_size,
            num_hidden_layers: layers,
            num_attention_heads: p.num_attention_heads,
            num_key_value_heads: p.num_key_value_heads,
            head_dim: p.head_dim,
            rotary_dim,
            max_position_embeddings: p.max_position_embeddings,
            rms_norm_eps: p.rms_norm_eps,
            rope_theta: p.rope_theta,
            rope_scaling,
            tie_word_embeddings: p.tie_word_embeddings,
            attention_bias: false,
            full_layers: (0..layers).map(|i| (i + 1) % interval == 0).collect(),
            linear: LinearShape {
                key_heads,
                value_heads,
                key_dim,
                value_dim: inner / value_heads,
                conv_kernel,
            },
            router: RouterSettings {
                experts: experts.count,
                top_k: experts.used,
                norm_topk_prob: true,
            },
            moe_intermediate_size: moe,
            shared_expert_intermediate_size: shared,
            sparse_layers: experts.layers.clone(),
            gguf: true,
        })
    }

    /// The model's numbers of its full-attention layers, in order.
    pub fn full_layer_numbers(&self) -> Vec<usize> {
        (0..self.num_hidden_layers)
            .filter(|&i| self.full_layers[i])
            .collect()
    }

    /// Its shape in family-independent terms: the layers are the full-attention ones.
    pub fn architecture(&self) -> Architecture {
        let group = self.num_attention_heads / self.num_key_value_heads;
        Architecture {
            family: QWEN3_NEXT.name,
            model_type: "qwen3_next".to_string(),
            layers: self.full_layer_numbers().len(),
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
            sliding_window: None,
            positions: PositionScheme::Rotary,
        }
    }

    /// Build the network from tensors named as inside transformers' base model.
    pub fn build_from(&self, t: &dyn Tensors) -> Result<Qwen3Next, Error> {
        let (hidden, eps) = (self.hidden_size, self.rms_norm_eps);
        let (heads, kv, d) = (
            self.num_attention_heads,
            self.num_key_value_heads,
            self.head_dim,
        );
        // Qwen3NextRMSNorm: x/√(mean(x²) + ε)·(1 + w); a GGUF file stores 1 + w.
        let centred = |name: &Name, width: usize| -> Result<Norm, Error> {
            let w = t.weight(&name.weight(), &[width])?;
            if self.gguf {
                return Ok(Norm::from_weights(w, None, eps));
            }
            let plus_one = Weight::owned(w.iter().map(|x| 1.0 + x).collect(), vec![width]);
            Ok(Norm::from_weights(plus_one, None, eps))
        };
        let bias = self.attention_bias;
        let linear = |name: &Name, inputs, outputs| out_in_linear(t, name, inputs, outputs, false);
        let lin = self.linear;
        let layers = (0..self.num_hidden_layers)
            .map(|i| {
                let layer = Name::root().pp("layers").pp(i);
                let mixer = if self.full_layers[i] {
                    let a = layer.pp("self_attn");
                    let proj = |n: &str, o| out_in_linear(t, &a.pp(n), hidden, o, bias);
                    Mixer::Full(Box::new(FullAttention {
                        q_proj: proj("q_proj", 2 * heads * d)?,
                        k_proj: proj("k_proj", kv * d)?,
                        v_proj: proj("v_proj", kv * d)?,
                        o_proj: out_in_linear(t, &a.pp("o_proj"), heads * d, hidden, bias)?,
                        q_norm: centred(&a.pp("q_norm"), d)?,
                        k_norm: centred(&a.pp("k_norm"), d)?,
                    }))
                } else {
                    let a = layer.pp("linear_attn");
                    let (kd, vd) = (lin.key_heads * lin.key_dim, lin.value_heads * lin.value_dim);
                    let channels = lin.conv_channels();
                    let (in_qkvz, conv, neg_a) = if self.gguf {
                        (
                            joined_qkvz(t, &a, lin, hidden)?,
                            t.weight(&a.pp("conv1d").weight(), &[channels, lin.conv_kernel])?
                                .to_vec(),
                            t.weight(&a.tensor("ssm_a"), &[lin.value_heads])?.to_vec(),
                        )
                    } else {
                        let a_log = t.weight(&a.tensor("A_log"), &[lin.value_heads])?;
                        (
                            linear(&a.pp("in_proj_qkvz"), hidden, 2 * kd + 2 * vd)?,
                            t.weight(&a.pp("conv1d").weight(), &[channels, 1, lin.conv_kernel])?
                                .to_vec(),
                            a_log.iter().map(|&x| -x.exp()).collect(),
                        )
                    };
                    Mixer::Linear(Box::new(GatedDeltaNet {
                        shape: lin,
                        in_qkvz,
                        in_ba: linear(&a.pp("in_proj_ba"), hidden, 2 * lin.value_heads)?,
                        conv,
                        dt_bias: t.weight(&a.tensor("dt_bias"), &[lin.value_heads])?.to_vec(),
                        neg_a,
                        norm: t.weight(&a.pp("norm").weight(), &[lin.value_dim])?.to_vec(),
                        eps: eps as f32,
                        out_proj: linear(&a.pp("out_proj"), vd, hidden)?,
                    }))
                };
                let m = layer.pp("mlp");
                let mlp = if self.sparse_layers[i] {
                    let names = expert_names(i);
                    let shared = m.pp("shared_expert");
                    Mlp::Moe {
                        experts: Box::new(Experts::load(
                            t,
                            &names,
                            hidden,
                            self.moe_intermediate_size,
                            Activation::Silu,
                            self.router,
                            &linear,
                        )?),
                        shared: FeedForward::load(
                            &gated(&shared),
                            hidden,
                            self.shared_expert_intermediate_size,
                            Activation::Silu,
                            &linear,
                        )?,
                        shared_gate: linear(&m.pp("shared_expert_gate"), hidden, 1)?,
                    }
                } else {
                    Mlp::Dense(FeedForward::load(
                        &gated(&m),
                        hidden,
                        self.intermediate_size,
                        Activation::Silu,
                        &linear,
                    )?)
                };
                Ok(HybridLayer {
                    input_norm: centred(&layer.pp("input_layernorm"), hidden)?,
                    mixer,
                    post_norm: centred(&layer.pp("post_attention_layernorm"), hidden)?,
                    mlp,
                })
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let lm_head = if self.tie_word_embeddings {
            None
        } else {
            t.lm_head(&[self.vocab_size, hidden])?
                .map(|w| Linear::new(w, Layout::OutIn, None))
        };
        Ok(Qwen3Next {
            arch: self.architecture(),
            full_layers: self.full_layer_numbers(),
            embed: t.matrix(&embed().weight(), &[self.vocab_size, hidden])?,
            rope: Rope::new(self.rotary_dim, self.rope_theta, self.rope_scaling)
                .with_head_dim(self.head_dim),
            layers,
            final_norm: centred(&Name::root().pp("norm"), hidden)?,
            tied: self.tie_word_embeddings,
            lm_head,
        })
    }
}

/// `in_proj_qkvz` (per key head: its query, key, values and output gate) joined back from the
/// two maps llama.cpp's converter splits it into: `in_proj_qkv` (`attn_qkv`: every head's
/// queries, then keys, then values) and `in_proj_z` (`attn_gate`), dequantised.
fn joined_qkvz(
    t: &dyn Tensors,
    a: &Name,
    lin: LinearShape,
    hidden: usize,
) -> Result<Linear, Error> {
    let (kd, vd) = (lin.key_heads * lin.key_dim, lin.value_heads * lin.value_dim);
    let qkv = t.weight(&a.pp("in_proj_qkv").weight(), &[2 * kd + vd, hidden])?;
    let z = t.weight(&a.pp("in_proj_z").weight(), &[vd, hidden])?;
    let group = vd / lin.key_heads;
    let mut w = Vec::with_capacity((2 * kd + 2 * vd) * hidden);
    for h in 0..lin.key_heads {
        let rows = |m: &[f32], first: usize, count: usize| {
            m[first * hidden..(first + count) * hidden].to_vec()
        };
        w.extend(rows(&qkv, h * lin.key_dim, lin.key_dim));
        w.extend(rows(&qkv, kd + h * lin.key_dim, lin.key_dim));
        w.extend(rows(&qkv, 2 * kd + h * group, group));
        w.extend(rows(&z, h * group, group));
    }
    Ok(Linear::new(
        Weight::owned(w, vec![2 * kd + 2 * vd, hidden]),
        Layout::OutIn,
        None,
    ))
}

/// The token embeddings.
fn embed() -> Name {
    Name::root().pp("embed_tokens")
}

/// A gated MLP's maps under `m`.
fn gated(m: &Name) -> FfnNames {
    FfnNames::Gated {
        gate: m.pp("gate_proj"),
        up: m.pp("up_proj"),
        down: m.pp("down_proj"),
    }
}

/// Layer `i`'s router (`mlp.gate`) and experts (`mlp.experts`).
fn expert_names(i: usize) -> ExpertNames {
    let m = Name::root().pp("layers").pp(i).pp("mlp");
    ExpertNames {
        router: m.pp("gate"),
        experts: m.pp("experts"),
        leaves: ["gate_proj", "up_proj", "down_proj"],
    }
}

impl GgufConfig for Qwen3NextConfig {
    /// A hybrid stack is no decoder stack a projector could join.
    fn stack(&self, _tensors: &TensorMap) -> Result<crate::blocks::decoder::DecoderStack, Error> {
        Err(crate::InputError::ProjectorTextOnly {
            family: QWEN3_NEXT.name,
        }
        .into())
    }

    fn build(&self, tensors: &TensorMap) -> Result<Box<dyn Network>, Error> {
        Ok(Box::new(self.build_from(tensors)?))
    }
}

impl FamilyConfig for Qwen3NextConfig {
    fn checks(&self) -> (Vec<ConfigDim>, Vec<ConfigCount>) {
        let dims = vec![
            ConfigDim::new("vocab_size", self.vocab_size, embed().weight(), 0),
            ConfigDim::new("hidden_size", self.hidden_size, embed().weight(), 1),
        ];
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

/// A gated full-attention block.
struct FullAttention {
    /// Each head's query and output gate, side by side (`[heads · 2 · head_dim]`).
    q_proj: Linear,
    k_proj: Linear,
    v_proj: Linear,
    o_proj: Linear,
    q_norm: Norm,
    k_norm: Norm,
}

/// A gated delta-rule (linear attention) block.
pub struct GatedDeltaNet {
    shape: LinearShape,
    in_qkvz: Linear,
    in_ba: Linear,
    /// The depthwise causal convolution, `[channels, kernel]`.
    conv: Vec<f32>,
    dt_bias: Vec<f32>,
    /// `−exp(A_log)` per value head.
    neg_a: Vec<f32>,
    /// The gated RMSNorm's weight (applied as stored, not `1 + w`).
    norm: Vec<f32>,
    eps: f32,
    out_proj: Linear,
}

/// One gated delta layer's inputs to the rule, for one sequence of `n` tokens.
pub struct DeltaInputs {
    /// Tokens.
    pub n: usize,
    /// Per value head and token, the L2-normalised query scaled by `1/√d_k` (`[value_heads,
    /// n, key_dim]`; a key head's query repeated for each of its value heads).
    pub q: Vec<f32>,
    /// The L2-normalised keys, `[value_heads, n, key_dim]`.
    pub k: Vec<f32>,
    /// The values after the convolution and SiLU, `[value_heads, n, value_dim]`.
    pub v: Vec<f32>,
    /// The decay of the state, `α = exp(g)`, `[value_heads, n]`.
    pub alpha: Vec<f32>,
    /// The write strength `β`, `[value_heads, n]`.
    pub beta: Vec<f32>,
    /// The output gate z, `[n, value_heads · value_dim]`.
    z: Vec<f32>,
}

/// `x / √(Σx² + 1e-6)` (transformers' `l2norm`).
fn l2norm(x: &mut [f32]) {
    let s: f32 = x.iter().map(|v| v * v).sum();
    let inv = 1.0 / (s + 1e-6).sqrt();
    x.iter_mut().for_each(|v| *v *= inv);
}

/// `log(1 + eˣ)`, linear past 20 (torch's threshold).
fn softplus(x: f32) -> f32 {
    if x > 20.0 {
        x
    } else {
        x.exp().ln_1p()
    }
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

impl GatedDeltaNet {
    /// The rule's inputs for the `n` rows of `x` (one sequence, after the input norm).
    pub fn inputs(&self, x: &[f32], n: usize) -> DeltaInputs {
        let s = self.shape;
        let (nk, nv, dk, dv) = (s.key_heads, s.value_heads, s.key_dim, s.value_dim);
        let r = nv / nk;
        let (kd, vd) = (nk * dk, nv * dv);
        let qkvz = self.in_qkvz.forward(x, n, Activation::Identity);
        let ba = self.in_ba.forward(x, n, Activation::Identity);
        // fix_query_key_value_ordering: per key head, [q (dk) | k (dk) | v (r·dv) | z (r·dv)];
        // per key head, [b (r) | a (r)].
        let channels = s.conv_channels();
        let group = 2 * dk + 2 * r * dv;
        let mut mixed = vec![0f32; n * channels];
        let mut z = vec![0f32; n * vd];
        let (mut b, mut a) = (vec![0f32; n * nv], vec![0f32; n * nv]);
        for t in 0..n {
            let row = &qkvz[t * (2 * kd + 2 * vd)..][..2 * kd + 2 * vd];
            let out = &mut mixed[t * channels..][..channels];
            for g in 0..nk {
                let src = &row[g * group..][..group];
                out[g * dk..][..dk].copy_from_slice(&src[..dk]);
                out[kd + g * dk..][..dk].copy_from_slice(&src[dk..2 * dk]);
                out[2 * kd + g * r * dv..][..r * dv].copy_from_slice(&src[2 * dk..][..r * dv]);
                z[t * vd + g * r * dv..][..r * dv]
                    .copy_from_slice(&src[2 * dk + r * dv..][..r * dv]);
                let src = &ba[t * 2 * nv + g * 2 * r..][..2 * r];
                b[t * nv + g * r..][..r].copy_from_slice(&src[..r]);
                a[t * nv + g * r..][..r].copy_from_slice(&src[r..]);
            }
        }
        // Depthwise causal convolution (zeros before the first token), then SiLU.
        let kernel = s.conv_kernel;
        let mut conv = vec![0f32; n * channels];
        for t in 0..n {
            for c in 0..channels {
                let w = &self.conv[c * kernel..][..kernel];
                let mut acc = 0f32;
                for (j, &wj) in w.iter().enumerate() {
                    // Tap j reads token t + j − (kernel − 1).
                    if let Some(src) = (t + j).checked_sub(kernel - 1) {
                        acc += wj * mixed[src * channels + c];
                    }
                }
                conv[t * channels + c] = kernels::activation::silu(acc);
            }
        }
        let (mut q, mut k) = (vec![0f32; nv * n * dk], vec![0f32; nv * n * dk]);
        let mut v = vec![0f32; nv * n * dv];
        let (mut alpha, mut beta) = (vec![0f32; nv * n], vec![0f32; nv * n]);
        let scale = 1.0 / (dk as f32).sqrt();
        for h in 0..nv {
            let g = h / r;
            for t in 0..n {
                let row = &conv[t * channels..][..channels];
                let qh = &mut q[(h * n + t) * dk..][..dk];
                qh.copy_from_slice(&row[g * dk..][..dk]);
                l2norm(qh);
                qh.iter_mut().for_each(|x| *x *= scale);
                let kh = &mut k[(h * n + t) * dk..][..dk];
                kh.copy_from_slice(&row[kd + g * dk..][..dk]);
                l2norm(kh);
                v[(h * n + t) * dv..][..dv].copy_from_slice(&row[2 * kd + h * dv..][..dv]);
                let decay = self.neg_a[h] * softplus(a[t * nv + h] + self.dt_bias[h]);
                alpha[h * n + t] = decay.exp();
                beta[h * n + t] = sigmoid(b[t * nv + h]);
            }
        }
        DeltaInputs {
            n,
            q,
            k,
            v,
            alpha,
            beta,
            z,
        }
    }

    /// The rule's output `[value_heads, n, value_dim]`, by the recurrence over the state.
    pub fn recurrent(&self, inp: &DeltaInputs) -> Vec<f32> {
        let s = self.shape;
        let (nv, dk, dv, n) = (s.value_heads, s.key_dim, s.value_dim, inp.n);
        let mut out = vec![0f32; nv * n * dv];
        let mut state = vec![0f32; dk * dv];
        let mut mem = vec![0f32; dv];
        for h in 0..nv {
            state.fill(0.0);
            for t in 0..n {
                let (q, k) = (
                    &inp.q[(h * n + t) * dk..][..dk],
                    &inp.k[(h * n + t) * dk..][..dk],
                );
                let v = &inp.v[(h * n + t) * dv..][..dv];
                let (alpha, beta) = (inp.alpha[h * n + t], inp.beta[h * n + t]);
                state.iter_mut().for_each(|x| *x *= alpha);
                mem.fill(0.0);
                for i in 0..dk {
                    for j in 0..dv {
                        mem[j] += state[i * dv + j] * k[i];
                    }
                }
                for j in 0..dv {
                    mem[j] = (v[j] - mem[j]) * beta;
                }
                for i in 0..dk {
                    for j in 0..dv {
                        state[i * dv + j] += k[i] * mem[j];
                    }
                }
                let o = &mut out[(h * n + t) * dv..][..dv];
                for i in 0..dk {
                    for j in 0..dv {
                        o[j] += state[i * dv + j] * q[i];
                    }
                }
            }
        }
        out
    }

    /// The token-mixing matrix the rule applies to the values, `[value_heads, n, n]`: `o_t =
    /// Σ_{s≤t} A[t, s] · v_s` exactly, with `A[t, s] = β_s k_s · u_s` where `u_t = q_t` and
    /// `u_{s−1} = α_s (u_s − β_s k_s (k_s · u_s))` (the state's updates, read backwards from
    /// the query). Zero above the diagonal; rows need not sum to 1 and may be negative.
    pub fn mixing(&self, inp: &DeltaInputs) -> Vec<f32> {
        let s = self.shape;
        let (nv, dk, n) = (s.value_heads, s.key_dim, inp.n);
        let mut out = vec![0f32; nv * n * n];
        let mut u = vec![0f64; dk];
        for h in 0..nv {
            for t in 0..n {
                for (ui, &qi) in u.iter_mut().zip(&inp.q[(h * n + t) * dk..][..dk]) {
                    *ui = qi as f64;
                }
                for src in (0..=t).rev() {
                    let k = &inp.k[(h * n + src) * dk..][..dk];
                    let ku: f64 = k.iter().zip(&u).map(|(&a, b)| a as f64 * b).sum();
                    let beta = inp.beta[h * n + src] as f64;
                    out[(h * n + t) * n + src] = (beta * ku) as f32;
                    let alpha = inp.alpha[h * n + src] as f64;
                    for (ui, &ki) in u.iter_mut().zip(k) {
                        *ui = alpha * (*ui - beta * ki as f64 * ku);
                    }
                }
            }
        }
        out
    }

    /// The block's output `[n, hidden]` from the rule's output `core` (`[value_heads, n,
    /// value_dim]`): the gated RMSNorm, then `out_proj`.
    fn finish(&self, core: &[f32], inp: &DeltaInputs) -> Vec<f32> {
        let s = self.shape;
        let (nv, dv, n) = (s.value_heads, s.value_dim, inp.n);
        let mut normed = vec![0f32; n * nv * dv];
        for t in 0..n {
            for h in 0..nv {
                let o = &core[(h * n + t) * dv..][..dv];
                let var = o.iter().map(|x| x * x).sum::<f32>() / dv as f32;
                let inv = 1.0 / (var + self.eps).sqrt();
                let z = &inp.z[t * nv * dv + h * dv..][..dv];
                let dst = &mut normed[t * nv * dv + h * dv..][..dv];
                for j in 0..dv {
                    dst[j] = self.norm[j] * (o[j] * inv) * kernels::activation::silu(z[j]);
                }
            }
        }
        self.out_proj.forward(&normed, n, Activation::Identity)
    }

    /// The block over one sequence's `n` rows of `x`.
    fn forward(&self, x: &[f32], n: usize) -> Vec<f32> {
        let inp = self.inputs(x, n);
        let core = self.recurrent(&inp);
        self.finish(&core, &inp)
    }
}

/// A layer's token mixer.
enum Mixer {
    Full(Box<FullAttention>),
    Linear(Box<GatedDeltaNet>),
}

/// A layer's feed-forward block.
enum Mlp {
    Dense(FeedForward),
    /// Routed experts plus a shared expert scaled by `sigmoid(shared_gate(x))`.
    Moe {
        experts: Box<Experts>,
        shared: FeedForward,
        shared_gate: Linear,
    },
}

/// One Qwen3-Next layer.
struct HybridLayer {
    input_norm: Norm,
    mixer: Mixer,
    post_norm: Norm,
    mlp: Mlp,
}

/// A Qwen3-Next network with its weights.
pub struct Qwen3Next {
    arch: Architecture,
    /// The model's number of each full-attention layer (the captured layers, in order).
    full_layers: Vec<usize>,
    embed: MatrixWeight,
    rope: Rope,
    layers: Vec<HybridLayer>,
    final_norm: Norm,
    tied: bool,
    lm_head: Option<Linear>,
}

/// Normalise every `norm.width()`-wide head in columns `col0..col0 + cols` of each row.
fn norm_heads(norm: &Norm, data: &mut [f32], rows: usize, stride: usize, col0: usize, cols: usize) {
    let mut gathered = Vec::with_capacity(rows * cols);
    for r in 0..rows {
        gathered.extend_from_slice(&data[r * stride + col0..][..cols]);
    }
    let normed = norm.forward(&gathered, None);
    for r in 0..rows {
        data[r * stride + col0..][..cols].copy_from_slice(&normed[r * cols..][..cols]);
    }
}

impl Qwen3Next {
    /// The model's number of each captured (full-attention) layer, in order.
    pub fn full_layers(&self) -> &[usize] {
        &self.full_layers
    }

    /// The gated delta block of the model's layer `layer`, if it is one.
    pub fn gated_delta(&self, layer: usize) -> Option<&GatedDeltaNet> {
        match &self.layers.get(layer)?.mixer {
            Mixer::Linear(net) => Some(net),
            Mixer::Full(_) => None,
        }
    }

    /// The residual stream entering each layer and the last layer's output (before the final
    /// norm), for one sequence of ids: `[layers + 1][n · hidden]`.
    pub fn stages(&self, ids: &[u32]) -> Vec<Vec<f32>> {
        let n = ids.len();
        let lengths = [n];
        let batch = Batch {
            ids,
            types: ids,
            lengths: &lengths,
            tokens: n,
            inserted: None,
        };
        let mut stages = Vec::new();
        self.run(&batch, &mut [], Some(&mut stages));
        stages
    }

    /// Run the batch, full-attention layers writing into `captures`; the hidden state before
    /// the final norm.
    fn run(
        &self,
        batch: &Batch<'_>,
        captures: &mut [SequenceCapture],
        mut stages: Option<&mut Vec<Vec<f32>>>,
    ) -> Vec<f32> {
        let rows = batch.ids.len();
        let hidden = self.arch.hidden_size;
        let positions: Vec<usize> = (0..rows).map(|r| r % batch.tokens).collect();
        let mut h = vec![0f32; rows * hidden];
        self.embed.gather(batch.ids, &mut h);
        let table = self.rope.table(positions.iter().copied());
        let mut slot = 0;
        for (l, layer) in self.layers.iter().enumerate() {
            if let Some(s) = stages.as_deref_mut() {
                s.push(h.clone());
            }
            let x = layer.input_norm.forward(&h, None);
            let mixed = match &layer.mixer {
                Mixer::Full(attn) => {
                    // One sink per sequence: blank ones where nothing is captured (a
                    // generation step, the stages of the token mixing).
                    let mut sinks: Vec<CaptureSink> = if captures.is_empty() {
                        (0..batch.lengths.len())
                            .map(|_| CaptureSink {
                                probs: None,
                                query_key: None,
                                summary: None,
                            })
                            .collect()
                    } else {
                        captures.iter_mut().map(|c| c.layer(slot)).collect()
                    };
                    slot += 1;
                    self.full_attention(attn, &x, rows, batch, &table, &mut sinks)
                }
                Mixer::Linear(net) => {
                    let t = batch.tokens;
                    let mut out = Vec::with_capacity(rows * hidden);
                    for s in 0..rows / t {
                        out.extend(net.forward(&x[s * t * hidden..][..t * hidden], t));
                    }
                    out
                }
            };
            drop(x);
            add_in_place(&mut h, &mixed);
            let x = layer.post_norm.forward(&h, None);
            let out = match &layer.mlp {
                Mlp::Dense(ffn) => ffn.forward(&x, rows),
                Mlp::Moe {
                    experts,
                    shared,
                    shared_gate,
                } => {
                    let (mut out, routing) = experts.forward(&x, rows);
                    let gate = shared_gate.forward(&x, rows, Activation::Identity);
                    let s = shared.forward(&x, rows);
                    for r in 0..rows {
                        let g = sigmoid(gate[r]);
                        for (o, v) in out[r * hidden..][..hidden]
                            .iter_mut()
                            .zip(&s[r * hidden..][..hidden])
                        {
                            *o += g * v;
                        }
                    }
                    for (sq, capture) in captures.iter_mut().enumerate() {
                        let own = routing.rows_range(sq * batch.tokens, capture.queries());
                        capture.routing.push((l, own));
                    }
                    out
                }
            };
            add_in_place(&mut h, &out);
        }
        if let Some(s) = stages {
            s.push(h.clone());
        }
        h
    }

    /// A gated full-attention block over `rows` rows of `x`.
    fn full_attention(
        &self,
        attn: &FullAttention,
        x: &[f32],
        rows: usize,
        batch: &Batch<'_>,
        table: &RopeTable,
        sinks: &mut [CaptureSink<'_>],
    ) -> Vec<f32> {
        let (heads, kv, d) = (self.arch.heads, self.arch.kv_heads, self.arch.head_dim);
        let width = (heads + 2 * kv) * d;
        let qg = attn.q_proj.forward(x, rows, Activation::Identity);
        let mut qkv = vec![0f32; rows * width];
        let mut gate = vec![0f32; rows * heads * d];
        for r in 0..rows {
            for h in 0..heads {
                let src = &qg[r * 2 * heads * d + h * 2 * d..][..2 * d];
                qkv[r * width + h * d..][..d].copy_from_slice(&src[..d]);
                gate[r * heads * d + h * d..][..d].copy_from_slice(&src[d..]);
            }
        }
        for (map, col0) in [(&attn.k_proj, heads * d), (&attn.v_proj, (heads + kv) * d)] {
            map.forward_into(
                x,
                rows,
                Output {
                    data: &mut qkv,
                    stride: width,
                    col0,
                },
                Activation::Identity,
            );
        }
        norm_heads(&attn.q_norm, &mut qkv, rows, width, 0, heads * d);
        norm_heads(&attn.k_norm, &mut qkv, rows, width, heads * d, kv * d);
        table.rotate(&mut qkv, width, 0, heads);
        table.rotate(&mut qkv, width, heads * d, kv);
        let mut context = vec![0f32; rows * heads * d];
        let spec = AttentionSpec {
            scale: (d as f32).powf(-0.5),
            ..self
                .arch
                .attention(batch.lengths.len(), batch.tokens, batch.tokens)
        };
        kernels::attention(
            part(&qkv, 0, width),
            part(&qkv, heads * d, width),
            part(&qkv, (heads + kv) * d, width),
            &spec,
            batch.lengths,
            batch.lengths,
            sinks,
            &mut context,
        );
        for (c, g) in context.iter_mut().zip(&gate) {
            *c *= sigmoid(*g);
        }
        attn.o_proj.forward(&context, rows, Activation::Identity)
    }

    /// `[vocab]` logits of one final hidden row (after the final norm).
    fn logits(&self, row: &[f32]) -> Result<Vec<f32>, Error> {
        let vocab = self.arch.vocab_size;
        let mut out = vec![0f32; vocab];
        let output = Output {
            data: &mut out,
            stride: vocab,
            col0: 0,
        };
        match (&self.lm_head, self.tied) {
            (_, true) => matrix_forward(&self.embed, row, 1, output),
            (Some(head), false) => head.forward_into(row, 1, output, Activation::Identity),
            (None, false) => {
                return Err(crate::InputError::BareBaseModel {
                    family: self.arch.family,
                }
                .into())
            }
        }
        Ok(out)
    }
}

impl Network for Qwen3Next {
    fn architecture(&self) -> &Architecture {
        &self.arch
    }

    fn forward(&self, batch: &Batch<'_>, captures: &mut [SequenceCapture]) -> Vec<f32> {
        let h = self.run(batch, captures, None);
        self.final_norm.forward(&h, None)
    }

    fn causal_lm(&self) -> Option<&dyn CausalLm> {
        Some(self)
    }

    fn token_mixing(&self, ids: &[u32]) -> Vec<TokenMixing> {
        let stages = self.stages(ids);
        let n = ids.len();
        self.layers
            .iter()
            .enumerate()
            .filter_map(|(l, layer)| {
                let Mixer::Linear(net) = &layer.mixer else {
                    return None;
                };
                let x = layer.input_norm.forward(&stages[l], None);
                let inp = net.inputs(&x, n);
                Some(TokenMixing {
                    layer: l,
                    kind: "gated delta",
                    heads: net.shape.value_heads,
                    tokens: n,
                    value_dim: net.shape.value_dim,
                    matrix: net.mixing(&inp),
                    output: net.recurrent(&inp),
                    values: inp.v,
                })
            })
            .collect()
    }

    fn captured_layer_numbers(&self) -> Option<&[usize]> {
        Some(&self.full_layers)
    }

    fn non_softmax_layers(&self) -> Option<(&'static str, Vec<usize>)> {
        let linear: Vec<usize> = (0..self.layers.len())
            .filter(|l| !self.full_layers.contains(l))
            .collect();
        (!linear.is_empty()).then_some(("gated delta", linear))
    }
}

impl CausalLm for Qwen3Next {
    fn new_cache(&self, capacity: usize) -> KvCache {
        KvCache::new(0, capacity, 0)
    }

    /// The whole sequence runs again at each step: the cache keeps only its token ids.
    fn step_with(
        &self,
        ids: &[u32],
        _inserted: Option<&Inserted>,
        cache: &mut KvCache,
    ) -> Result<Vec<f32>, Error> {
        let (past, rows) = (cache.len, ids.len());
        assert!(
            rows > 0 && past + rows <= cache.capacity && past + rows <= self.arch.max_positions,
            "{rows} tokens after {past} in a cache of {}",
            cache.capacity
        );
        cache.ids.extend_from_slice(ids);
        cache.len += rows;
        let all = cache.ids.clone();
        let n = all.len();
        let lengths = [n];
        let h = self.run(
            &Batch {
                ids: &all,
                types: &all,
                lengths: &lengths,
                tokens: n,
                inserted: None,
            },
            &mut [],
            None,
        );
        let width = self.arch.hidden_size;
        let last = self
            .final_norm
            .forward(&h[(n - 1) * width..n * width], None);
        self.logits(&last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn read(text: &str) -> Result<Qwen3NextConfig, String> {
        let file = ConfigFile::parse(text, Path::new("config.json")).unwrap();
        Qwen3NextConfig::read(&file).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_are_qwen3_next_80b_s() {
        let c = read("{}").unwrap();
        assert_eq!(
            (c.num_attention_heads, c.num_key_value_heads, c.head_dim),
            (16, 2, 256)
        );
        assert_eq!(c.rotary_dim, 64);
        assert_eq!(&c.full_layers[..4], &[false, false, false, true]);
        assert_eq!(c.architecture().layers, 12);
        assert_eq!((c.router.experts, c.router.top_k), (512, 10));
        assert_eq!((c.linear.key_heads, c.linear.value_heads), (16, 32));
    }

    #[test]
    fn layer_types_and_interval_pick_the_full_layers() {
        let c = read(r#"{"num_hidden_layers": 4, "full_attention_interval": 2}"#).unwrap();
        assert_eq!(c.full_layer_numbers(), [1, 3]);
        let c = read(
            r#"{"num_hidden_layers": 2, "layer_types": ["full_attention", "linear_attention"]}"#,
        )
        .unwrap();
        assert_eq!(c.full_layer_numbers(), [0]);
        let err =
            read(r#"{"num_hidden_layers": 1, "layer_types": ["sliding_attention"]}"#).unwrap_err();
        assert!(err.contains("layer_types") && !err.contains('\n'), "{err}");
        let err = read(r#"{"linear_num_key_heads": 3, "linear_num_value_heads": 4}"#).unwrap_err();
        assert!(err.contains("linear_num_value_heads"), "{err}");
    }

    /// A random gated delta block: the mixing matrix times the values is the recurrence's
    /// output, exactly up to rounding.
    #[test]
    fn the_mixing_matrix_times_the_values_is_the_rule_s_output() {
        use crate::kernels::testing::random;
        let shape = LinearShape {
            key_heads: 2,
            value_heads: 4,
            key_dim: 8,
            value_dim: 6,
            conv_kernel: 3,
        };
        let hidden = 12;
        let (kd, vd) = (16, 24);
        let w = |rows: usize, cols: usize, seed: u64| {
            Linear::new(
                Weight::owned(random(rows * cols, seed, 0.5), vec![rows, cols]),
                Layout::OutIn,
                None,
            )
        };
        let net = GatedDeltaNet {
            shape,
            in_qkvz: w(2 * kd + 2 * vd, hidden, 1),
            in_ba: w(8, hidden, 2),
            conv: random(shape.conv_channels() * 3, 3, 0.5),
            dt_bias: random(4, 4, 0.5),
            neg_a: random(4, 5, 0.5).iter().map(|x| -(x.abs() + 0.1)).collect(),
            norm: vec![1.0; 6],
            eps: 1e-6,
            out_proj: w(hidden, vd, 6),
        };
        let n = 9;
        let inp = net.inputs(&random(n * hidden, 7, 0.5), n);
        let core = net.recurrent(&inp);
        let a = net.mixing(&inp);
        let dv = shape.value_dim;
        let mut worst = 0f32;
        for h in 0..4 {
            for t in 0..n {
                for j in 0..dv {
                    let mut acc = 0f64;
                    for s in 0..n {
                        acc += a[(h * n + t) * n + s] as f64 * inp.v[(h * n + s) * dv + j] as f64;
                    }
                    worst = worst.max((acc as f32 - core[(h * n + t) * dv + j]).abs());
                }
                for s in t + 1..n {
                    assert_eq!(a[(h * n + t) * n + s], 0.0);
                }
            }
        }
        assert!(worst < 1e-5, "{worst}");
        assert!(
            a.iter().any(|&x| x < 0.0),
            "some mixing weights are negative"
        );
    }
}
