//! The hybrid decoder of Qwen3-Next and Qwen3.5: layers that are either gated full attention
//! or gated delta-rule linear attention ([`crate::blocks::gated_delta`]), as `layer_types` says
//! (else every `full_attention_interval`-th layer full), each followed by a dense gated MLP or
//! routed experts with a gated shared expert. A family gives a [`HybridSpec`] (transformers'
//! defaults, how its gated delta projections are stored, which layers route); the rest is
//! shared. Mirrors transformers 5's `modeling_qwen3_next.py`, `modeling_qwen3_5.py` and
//! `modeling_qwen3_5_moe.py` (eager attention, eager experts):
//!
//! - every RMSNorm but the gated one scales by `1 + w` (zero-centred weights);
//! - full attention: `q_proj` writes each head's query and an output gate side by side; q and
//!   k are RMS-normalised per head, the first `head_dim × partial_rotary_factor` values rotated,
//!   and the attention output is multiplied by `sigmoid(gate)` before `o_proj`. Qwen3.5's
//!   multimodal rotary sections (`mrope_section`) give every section the same position for
//!   text, which is the plain rotary embedding;
//! - the routers take the softmax over the experts, the top k, renormalised where
//!   `norm_topk_prob` says (always for Qwen3.5-MoE); the shared expert is scaled by
//!   `sigmoid(shared_expert_gate(x))`.
//!
//! The captured attention is that of the full-attention layers only: the network's layers for
//! the views are them, in order ([`HybridNet::full_layers`] maps them back to the model's
//! numbers); each gated delta layer's exact token-mixing matrix comes from
//! [`Network::token_mixing`]. Generation runs the whole sequence again at each step (the
//! recurrent state is not cached).
//!
//! Checkpoints are a causal LM's (`model.` prefix, `lm_head.weight` outside it) or, for
//! Qwen3.5, a vision-language model's (`model.language_model.`, `lm_head.weight`), with the
//! experts numbered (`mlp.experts.{e}.gate_proj`) or merged (`gate_up_proj`, `down_proj`).

use crate::attention::PositionScheme;
use crate::blocks::capture::SequenceCapture;
use crate::blocks::experts::{ExpertNames, Experts, RouterSettings};
use crate::blocks::family::{FamilyConfig, GgufConfig};
use crate::blocks::gated_delta::{sigmoid, DeltaLayout, GatedDeltaNet, LinearShape};
use crate::blocks::layers::{
    add_in_place, matrix_forward, out_in_linear, part, FeedForward, FfnNames, Linear, Norm,
};
use crate::blocks::network::{
    Architecture, Batch, CausalLm, Inserted, KvCache, Network, TokenMixing, MAX_LAYERS,
};
use crate::blocks::rope::{read_rope_of, Partial, MAX_ROTARY_POSITIONS};
use crate::error::Error;
use crate::formats::config::{
    ConfigError, ConfigFile, ConfigProblem, Expected, Field, FieldValue, Instead, Limit,
    RopeProblem, Unsupported,
};
use crate::formats::tensors::{Name, TensorMap, Tensors};
use crate::formats::validate::{ConfigCount, ConfigDim};
use crate::formats::weights::{Checkpoint, MatrixWeight, Weight};
use crate::kernels::{
    self, Activation, AttentionSpec, CaptureSink, Layout, Mask, Output, Rope, RopeScaling,
    RopeTable,
};

/// What sets one hybrid family apart, as data: its names, transformers' defaults for the
/// fields its config may leave out, how its gated delta projections are stored and which of
/// its layers route.
#[derive(Clone, Copy, Debug)]
pub struct HybridSpec {
    /// The family's name for people (`Qwen3-Next`).
    pub family: &'static str,
    /// The `model_type` its architecture reports (`qwen3_next`).
    pub model_type: &'static str,
    /// transformers' defaults.
    pub defaults: HybridDefaults,
    /// How the gated delta layers' input projections are stored.
    pub layout: DeltaLayout,
    /// Which layers' feed-forward blocks are routed.
    pub routing: Routing,
}

/// A config class's defaults for the fields that differ between the hybrids.
#[derive(Clone, Copy, Debug)]
pub struct HybridDefaults {
    /// `vocab_size`.
    pub vocab_size: usize,
    /// `hidden_size`.
    pub hidden_size: usize,
    /// `intermediate_size` (the dense MLPs').
    pub intermediate_size: usize,
    /// `num_hidden_layers`.
    pub num_hidden_layers: usize,
    /// `num_key_value_heads`.
    pub num_key_value_heads: usize,
    /// `num_experts`.
    pub num_experts: usize,
    /// `num_experts_per_tok`.
    pub num_experts_per_tok: usize,
}

/// Which layers route their tokens to experts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Routing {
    /// Qwen3-Next's rule: with `num_experts` > 0, every `decoder_sparse_step`-th layer not in
    /// `mlp_only_layers`; `norm_topk_prob` says whether the top-k weights are renormalised.
    Stepped,
    /// None: every layer has a dense gated MLP (Qwen3.5).
    Dense,
    /// Every layer, the top-k weights renormalised (Qwen3.5-MoE).
    Every,
}

/// The most experts a router may have (a bound on a size read from the config).
const MAX_EXPERTS: usize = 4096;

/// The widest causal convolution read from a config.
pub(crate) const MAX_CONV_KERNEL: usize = 64;

/// A hybrid decoder's config, read with its family's [`HybridSpec`].
#[derive(Clone, Debug, PartialEq)]
pub struct HybridConfig {
    /// The family's name for people.
    pub family: &'static str,
    /// Its architecture's `model_type`.
    pub model_type: &'static str,
    /// How the gated delta layers' input projections are stored.
    pub layout: DeltaLayout,
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
    /// Whether the checkpoint carries a vision tower beside the language model (not run).
    pub vision_tower: bool,
    /// Whether the tensors are as llama.cpp's converter stores them (a GGUF file): the
    /// zero-centred norms as `1 + w`, the gated delta layers as [`GatedDeltaNet::load`] reads
    /// them with `gguf`.
    pub gguf: bool,
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

/// The router and, per layer, whether its feed-forward block is routed, as `spec` says.
fn read_routing(
    file: &ConfigFile,
    spec: &HybridSpec,
    layers: usize,
) -> Result<(RouterSettings, Vec<bool>), ConfigError> {
    let d = spec.defaults;
    if spec.routing == Routing::Dense {
        let none = RouterSettings {
            experts: 0,
            top_k: 1,
            norm_topk_prob: true,
        };
        return Ok((none, vec![false; layers]));
    }
    let experts = match spec.routing {
        Routing::Every => file.positive("num_experts", d.num_experts)?,
        _ => file.count("num_experts")?.unwrap_or(d.num_experts),
    };
    if experts > MAX_EXPERTS {
        return Err(file.invalid(ConfigProblem::TooMany {
            field: "num_experts",
            value: experts,
            limit: Limit::Number(MAX_EXPERTS),
        }));
    }
    let top_k = file.positive("num_experts_per_tok", d.num_experts_per_tok)?;
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
    if spec.routing == Routing::Every {
        let router = RouterSettings {
            experts,
            top_k,
            norm_topk_prob: true,
        };
        return Ok((router, vec![true; layers]));
    }
    let step = file.positive("decoder_sparse_step", 1)?;
    let dense = layer_list(file, "mlp_only_layers")?;
    let sparse_layers = (0..layers)
        .map(|i| !dense.contains(&i) && experts > 0 && (i + 1) % step == 0)
        .collect();
    let router = RouterSettings {
        experts,
        top_k,
        norm_topk_prob: file.boolean("norm_topk_prob")?.unwrap_or(true),
    };
    Ok((router, sparse_layers))
}

impl HybridConfig {
    /// Read config.json (or the object holding the text model's fields) for `spec`'s family.
    pub fn read(file: &ConfigFile, spec: &HybridSpec) -> Result<HybridConfig, ConfigError> {
        let d = spec.defaults;
        let hidden_size = file.positive("hidden_size", d.hidden_size)?;
        let heads = file.positive("num_attention_heads", 16)?;
        let kv = file.positive("num_key_value_heads", d.num_key_value_heads)?;
        let head_dim = file.positive("head_dim", 256)?;
        if heads % kv != 0 {
            return Err(file.invalid(ConfigProblem::NotMultiple {
                field: "num_attention_heads",
                value: heads,
                of_field: "num_key_value_heads",
                of: kv,
            }));
        }
        let layers = file.positive("num_hidden_layers", d.num_hidden_layers)?;
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
        // Qwen3NextConfig's and Qwen3_5TextConfig's default.
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
        let (router, sparse_layers) = read_routing(file, spec, layers)?;
        if file.get("hidden_act").is_some() {
            let act = file.activation("hidden_act", "silu")?;
            if act != Activation::Silu {
                return Err(file.unsupported(Unsupported::Value {
                    field: "hidden_act",
                    value: file.get("hidden_act").cloned().map(FieldValue::Json),
                    note: None,
                    instead: Instead::Runs("; the hybrid decoders run with silu"),
                }));
            }
        }
        Ok(HybridConfig {
            family: spec.family,
            model_type: spec.model_type,
            layout: spec.layout,
            vocab_size: file.positive("vocab_size", d.vocab_size)?,
            hidden_size,
            intermediate_size: file.positive("intermediate_size", d.intermediate_size)?,
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
            router,
            moe_intermediate_size: file.positive("moe_intermediate_size", 512)?,
            shared_expert_intermediate_size: file
                .positive("shared_expert_intermediate_size", 512)?,
            sparse_layers,
            vision_tower: false,
            gguf: false,
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
            family: self.family,
            model_type: self.model_type.to_string(),
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
    pub fn build_from(&self, t: &dyn Tensors) -> Result<HybridNet, Error> {
        let (hidden, eps) = (self.hidden_size, self.rms_norm_eps);
        let (heads, kv, d) = (
            self.num_attention_heads,
            self.num_key_value_heads,
            self.head_dim,
        );
        // Qwen3NextRMSNorm, Qwen3_5RMSNorm: x/√(mean(x²) + ε)·(1 + w); a GGUF file stores 1 + w.
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
                    Mixer::Linear(Box::new(GatedDeltaNet::load(
                        t,
                        &layer.pp("linear_attn"),
                        self.linear,
                        self.layout,
                        hidden,
                        eps as f32,
                        self.gguf,
                    )?))
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
        Ok(HybridNet {
            arch: self.architecture(),
            full_layers: self.full_layer_numbers(),
            embed: t.matrix(&embed().weight(), &[self.vocab_size, hidden])?,
            rope: Rope::new(self.rotary_dim, self.rope_theta, self.rope_scaling)
                .with_head_dim(self.head_dim),
            layers,
            final_norm: centred(&Name::root().pp("norm"), hidden)?,
            tied: self.tie_word_embeddings,
            lm_head,
            vision_tower: self.vision_tower,
        })
    }
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

impl FamilyConfig for HybridConfig {
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

impl GgufConfig for HybridConfig {
    /// A hybrid stack is no decoder stack a projector could join.
    fn stack(&self, _tensors: &TensorMap) -> Result<crate::blocks::decoder::DecoderStack, Error> {
        Err(crate::InputError::ProjectorTextOnly {
            family: self.family,
        }
        .into())
    }

    fn build(&self, tensors: &TensorMap) -> Result<Box<dyn Network>, Error> {
        Ok(Box::new(self.build_from(tensors)?))
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

/// One hybrid layer.
struct HybridLayer {
    input_norm: Norm,
    mixer: Mixer,
    post_norm: Norm,
    mlp: Mlp,
}

/// A hybrid network with its weights.
pub struct HybridNet {
    arch: Architecture,
    /// The model's number of each full-attention layer (the captured layers, in order).
    full_layers: Vec<usize>,
    embed: MatrixWeight,
    rope: Rope,
    layers: Vec<HybridLayer>,
    final_norm: Norm,
    tied: bool,
    lm_head: Option<Linear>,
    vision_tower: bool,
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

impl HybridNet {
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
                        let inp = net.inputs(&x[s * t * hidden..][..t * hidden], t);
                        let core = net.recurrent(&inp);
                        // The exact mixing matrices, where the sequence's capture asks for
                        // them (its own length: causal, so padding after it changes nothing).
                        if let Some(c) = captures.get_mut(s) {
                            let len = c.queries();
                            if let Some(mixing) = c.mixing.as_mut() {
                                mixing.push((l, net.mixing_prefix(&inp, len)));
                            }
                        }
                        out.extend(net.finish(&core, &inp));
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

impl Network for HybridNet {
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
                let mut inp = net.inputs(&x, n);
                Some(TokenMixing {
                    layer: l,
                    kind: "gated delta",
                    heads: net.shape().value_heads,
                    tokens: n,
                    value_dim: net.shape().value_dim,
                    matrix: net.mixing(&inp),
                    output: net.in_model_order(net.recurrent(&inp)),
                    values: net.in_model_order(std::mem::take(&mut inp.v)),
                })
            })
            .collect()
    }

    fn captured_layer_numbers(&self) -> Option<&[usize]> {
        Some(&self.full_layers)
    }

    fn unread_vision_tower(&self) -> bool {
        self.vision_tower
    }

    fn mixing_heads(&self) -> usize {
        self.layers
            .iter()
            .find_map(|layer| match &layer.mixer {
                Mixer::Linear(net) => Some(net.shape().value_heads),
                Mixer::Full(_) => None,
            })
            .unwrap_or(0)
    }

    fn non_softmax_layers(&self) -> Option<(&'static str, Vec<usize>)> {
        let linear: Vec<usize> = (0..self.layers.len())
            .filter(|l| !self.full_layers.contains(l))
            .collect();
        (!linear.is_empty()).then_some(("gated delta", linear))
    }
}

impl CausalLm for HybridNet {
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
