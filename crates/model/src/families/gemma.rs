//! Gemma 2 and Gemma 3 (text): the pre-norm decoder stack with embeddings scaled by
//! `√hidden_size`, RMSNorm as `x·(1 + w)`, norms before *and after* both the attention and the
//! feed-forward block, GeGLU with tanh GELU, scores scaled by `query_pre_attn_scalar^-½`, and
//! sliding-window layers between global ones (Gemma 2: every other layer; Gemma 3: five in six).
//! Gemma 2 soft-caps the attention scores and the final logits (`tanh(x/c)·c`); Gemma 3 norms
//! each query and key head and rotates its sliding layers with their own RoPE base
//! (`rope_local_base_freq`), its global ones with `rope_theta` (and linear scaling).
//! Mirrors transformers' `models/gemma2/modeling_gemma2.py` and `models/gemma3/modeling_gemma3.py`
//! (`Gemma3ForCausalLM`, `model_type` `gemma3_text`). A multimodal Gemma 3 checkpoint
//! (`Gemma3ForConditionalGeneration`, `model_type` `gemma3`): the text model's config is its
//! `text_config` and its weights under `language_model.model.` (or `model.language_model.`)
//! are found by the anchor; with a `vision_config` it reads pictures too
//! ([`super::gemma3_vision`]), and text alone runs through the same text model.
//!
//! GGUF files of llama.cpp's `gemma2` and `gemma3` architectures (Gemma 3's text tower: the
//! converter writes the vision tower to a separate file) come through [`GemmaConfig::from_gguf`]:
//! their norm weights are stored already plus one (convert_hf_to_gguf.py adds 1 to every
//! `norm.weight`), and what the metadata does not state is llama.cpp's: scores scaled by
//! `head_dim^-½` (by `(hidden/heads)^-½` on the 27B shapes), every other layer sliding for Gemma 2
//! and five in six for Gemma 3, whose sliding layers rotate with base 10,000.

use serde_json::Value;

use super::gemma3_vision::Gemma3VisionConfig;
use crate::attention::PositionScheme;
use crate::blocks::decoder::{
    DecoderLayer, DecoderLayerNames, DecoderStack, LayerOptions, LmHead, Positional, StackOptions,
};
use crate::blocks::family::{Family, FamilyConfig, GgufConfig, GgufReader, Quirks};
use crate::blocks::layers::{out_in_linear, FeedForward, FfnNames, Linear, Norm};
use crate::blocks::network::{Architecture, Network, SlidingWindow, MAX_LAYERS};
use crate::blocks::rope::{read_rope, read_rope_in, MAX_ROTARY_POSITIONS};
use crate::error::{Error, GgufMetadataProblem};
use crate::formats::config::{
    ConfigError, ConfigFile, ConfigProblem, Expected, Field, FieldValue, Instead, Limit,
    RopeProblem, Unsupported,
};
use crate::formats::gguf::{DecoderParams, RopeScaling as GgufRopeScaling};
use crate::formats::source::TOKENIZERS_WITH_SETTINGS;
use crate::formats::tensors::{Name, TensorMap, Tensors};
use crate::formats::validate::{ConfigCount, ConfigDim};
use crate::formats::weights::{Anchor, Checkpoint, Weight};
use crate::kernels::{Activation, Layout, Mask, Rope, RopeScaling};

const ANCHOR: Anchor = Anchor {
    tensor: "embed_tokens.weight",
    family: "Gemma",
    prefix: "model",
};

/// Gemma (1) in the family registry.
pub static GEMMA: Family = Family {
    name: "Gemma",
    model_types: &["gemma"],
    class_prefixes: &["GemmaForCausalLM"],
    anchor: ANCHOR,
    config: |file| Ok(Box::new(GemmaConfig::read(file, Variant::Gemma1)?)),
    quirks: Quirks {
        tokenizer_files: TOKENIZERS_WITH_SETTINGS,
        ..Quirks::NONE
    },
};

/// Gemma 2 in the family registry.
pub static GEMMA2: Family = Family {
    name: "Gemma 2",
    model_types: &["gemma2"],
    class_prefixes: &["Gemma2"],
    anchor: ANCHOR,
    config: |file| Ok(Box::new(GemmaConfig::read(file, Variant::Gemma2)?)),
    quirks: Quirks {
        tokenizer_files: TOKENIZERS_WITH_SETTINGS,
        gguf: Some(GgufReader {
            architectures: &["gemma2"],
            config: gguf_config,
        }),
        ..Quirks::NONE
    },
};

/// Gemma 3's text model in the family registry.
pub static GEMMA3: Family = Family {
    name: "Gemma 3",
    model_types: &["gemma3_text", "gemma3"],
    class_prefixes: &["Gemma3ForCausalLM", "Gemma3ForConditionalGeneration"],
    anchor: ANCHOR,
    config: gemma3_config,
    quirks: Quirks {
        tokenizer_files: TOKENIZERS_WITH_SETTINGS,
        gguf: Some(GgufReader {
            architectures: &["gemma3"],
            config: gguf_config,
        }),
        ..Quirks::NONE
    },
};

/// A Gemma 3 config: with pictures when a multimodal config has a `vision_config`.
fn gemma3_config(file: &ConfigFile) -> Result<Box<dyn FamilyConfig>, ConfigError> {
    let with_vision = file.model_type()?.as_deref() == Some("gemma3")
        && matches!(file.get("vision_config"), Some(Value::Object(_)));
    if with_vision {
        return Ok(Box::new(Gemma3VisionConfig::read(file)?));
    }
    Ok(Box::new(GemmaConfig::read_gemma3(file)?))
}

fn gguf_config(p: &DecoderParams, origin: &str) -> Result<Box<dyn GgufConfig>, Error> {
    Ok(Box::new(GemmaConfig::from_gguf(p, origin)?))
}

/// Which Gemma.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// `gemma`: a Llama-shaped stack (no post-norms, no soft-capping, no sliding window),
    /// scores scaled by `head_dim^-½`.
    Gemma1,
    /// `gemma2`: soft-capping, alternating sliding layers.
    Gemma2,
    /// `gemma3_text`: q/k norms, 5 sliding layers to 1 global, two RoPE bases.
    Gemma3,
}

/// A Gemma config, with the defaults of transformers' config classes.
#[derive(Clone, Debug, PartialEq)]
pub struct GemmaConfig {
    /// Which Gemma.
    pub variant: Variant,
    /// `model_type` as written.
    pub model_type: String,
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Hidden size.
    pub hidden_size: usize,
    /// GeGLU inner size.
    pub intermediate_size: usize,
    /// Layers.
    pub num_hidden_layers: usize,
    /// Query heads.
    pub num_attention_heads: usize,
    /// Key/value heads.
    pub num_key_value_heads: usize,
    /// Size of one head (`head_dim`: 256 by default, not `hidden/heads`).
    pub head_dim: usize,
    /// The gate's activation (`hidden_activation`, tanh GELU).
    pub activation: Activation,
    /// The longest input.
    pub max_position_embeddings: usize,
    /// RMSNorm ε.
    pub rms_norm_eps: f64,
    /// Scores are scaled by `query_pre_attn_scalar^-½`.
    pub query_pre_attn_scalar: f64,
    /// The global layers' RoPE base and scaling.
    pub rope: (f64, RopeScaling),
    /// The sliding layers' RoPE (Gemma 3's `rope_local_base_freq`); `None`: the global one.
    pub local_rope: Option<(f64, RopeScaling)>,
    /// The sliding window.
    pub sliding_window: usize,
    /// Which layers slide (`layer_types`).
    pub sliding_layers: Vec<bool>,
    /// `attn_logit_softcapping`.
    pub attn_softcap: Option<f32>,
    /// `final_logit_softcapping`.
    pub final_softcap: Option<f32>,
    /// Whether the output projection is the token embedding matrix.
    pub tie_word_embeddings: bool,
    /// Whether the norm weights are stored as `1 + w` (llama.cpp's GGUF files) rather than `w`.
    pub norms_plus_one: bool,
}

/// A soft-capping value: absent or null for none, else a positive number.
fn softcap(
    file: &ConfigFile,
    field: &'static str,
    default: Option<f64>,
) -> Result<Option<f32>, ConfigError> {
    let value = match file.get(field) {
        None if file.has_field(field) => None,
        None => default,
        Some(_) => file.number(field)?,
    };
    match value {
        Some(c) if !(c.is_finite() && c > 0.0) => Err(file.invalid(ConfigProblem::WrongType {
            field: Field::Top(field),
            value: FieldValue::Number(c),
            expected: Expected::PositiveNumber,
        })),
        c => Ok(c.map(|c| c as f32)),
    }
}

impl GemmaConfig {
    /// Read a Gemma 3 config.json: a text model's (`gemma3_text`), or a multimodal model's
    /// (`gemma3`), whose `text_config` (transformers' defaults where it is absent) describes
    /// the text tower. `tie_word_embeddings` is the text config's, else the outer one's.
    pub fn read_gemma3(file: &ConfigFile) -> Result<GemmaConfig, ConfigError> {
        if file.model_type()?.as_deref() != Some("gemma3") {
            return GemmaConfig::read(file, Variant::Gemma3);
        }
        let text = match file.section("text_config")? {
            Some(text) => text,
            None => ConfigFile::parse("{}", file.path())?,
        };
        let mut config = GemmaConfig::read(&text, Variant::Gemma3)?;
        if !text.has_field("tie_word_embeddings") {
            if let Some(tied) = file.boolean("tie_word_embeddings")? {
                config.tie_word_embeddings = tied;
            }
        }
        Ok(config)
    }

    /// Read config.json for `variant`.
    pub fn read(file: &ConfigFile, variant: Variant) -> Result<GemmaConfig, ConfigError> {
        let gemma3 = variant == Variant::Gemma3;
        let gemma1 = variant == Variant::Gemma1;
        let (vocab, max_pos) = if gemma3 {
            (262_208, 131_072)
        } else {
            (256_000, 8192)
        };
        // transformers' GemmaConfig (gemma-7b's shape) or Gemma2Config's (gemma-2-2b's).
        let (d_layers, d_heads, d_kv, d_hidden, d_inner) = if gemma1 {
            (28, 16, 16, 3072, 24_576)
        } else {
            (26, 8, 4, 2304, 9216)
        };
        let layers = file.positive("num_hidden_layers", d_layers)?;
        if layers > MAX_LAYERS {
            return Err(file.invalid(ConfigProblem::TooMany {
                field: "num_hidden_layers",
                value: layers,
                limit: Limit::Layers(MAX_LAYERS),
            }));
        }
        let heads = file.positive("num_attention_heads", d_heads)?;
        let kv = file.positive("num_key_value_heads", d_kv)?;
        let head_dim = file.positive("head_dim", 256)?;
        if heads % kv != 0 {
            return Err(file.invalid(ConfigProblem::NotMultiple {
                field: "num_attention_heads",
                value: heads,
                of_field: "num_key_value_heads",
                of: kv,
            }));
        }
        if !head_dim.is_multiple_of(2) || heads.checked_mul(head_dim).is_none() {
            return Err(file.invalid(RopeProblem::HeadDim { head_dim, heads }));
        }
        let max_position_embeddings = file.positive("max_position_embeddings", max_pos)?;
        if max_position_embeddings > MAX_ROTARY_POSITIONS {
            return Err(file.invalid(ConfigProblem::TooMany {
                field: "max_position_embeddings",
                value: max_position_embeddings,
                limit: Limit::RotaryModel(MAX_ROTARY_POSITIONS),
            }));
        }
        let sliding_layers: Vec<bool> = match file.strings("layer_types")? {
            Some(types) if types.len() != layers => {
                return Err(file.invalid(ConfigProblem::Entries {
                    field: "layer_types",
                    len: types.len(),
                    layers,
                }))
            }
            Some(types) => types.iter().map(|t| t == "sliding_attention").collect(),
            None if gemma1 => vec![false; layers],
            None if gemma3 => {
                let pattern = match file.count("sliding_window_pattern")? {
                    Some(p) => Some(p),
                    None => file.count("_sliding_window_pattern")?,
                }
                .unwrap_or(6)
                .max(1);
                (0..layers).map(|i| (i + 1) % pattern != 0).collect()
            }
            None => (0..layers).map(|i| !(i + 1).is_multiple_of(2)).collect(),
        };
        let sliding_window = match file.count("sliding_window")? {
            Some(0) => {
                return Err(file.invalid(ConfigProblem::Zero {
                    field: "sliding_window",
                }))
            }
            Some(w) => w,
            None => 4096,
        };
        let (rope, local_rope) = if gemma3 {
            let nested = match file.get("rope_parameters") {
                Some(Value::Object(map)) if map.contains_key("full_attention") => Some(map),
                _ => None,
            };
            let part = |key: &'static str| -> Result<Option<&serde_json::Map<String, Value>>, ConfigError> {
                match nested.and_then(|m| m.get(key)) {
                    None | Some(Value::Null) => Ok(None),
                    Some(Value::Object(p)) => Ok(Some(p)),
                    Some(other) => Err(file.invalid(ConfigProblem::WrongType {
                        field: Field::RopeParameters(key),
                        value: FieldValue::Json(other.clone()),
                        expected: Expected::Object,
                    })),
                }
            };
            let global = match nested {
                Some(_) => read_rope_in(file, part("full_attention")?, "rope_theta", 1e6)?,
                None => {
                    let scaling = match file.get("rope_scaling") {
                        Some(Value::Object(map)) => Some(map),
                        _ => None,
                    };
                    read_rope_in(file, scaling, "rope_theta", 1e6)?
                }
            };
            let local = read_rope_in(
                file,
                part("sliding_attention")?,
                "rope_local_base_freq",
                1e4,
            )?;
            (global, Some(local))
        } else {
            (read_rope(file)?, None)
        };
        // Gemma 1 reads `hidden_act` (its legacy "gelu" meaning the tanh approximation, as
        // transformers' GemmaConfig rewrites it); Gemma 2 and 3 prefer `hidden_activation`.
        let act_field = if file.has_field("hidden_activation") && !gemma1 {
            "hidden_activation"
        } else {
            "hidden_act"
        };
        let activation = match file.string(act_field)?.as_deref() {
            Some("gelu") if gemma1 => Activation::GeluTanh,
            _ => file.activation(act_field, "gelu_pytorch_tanh")?,
        };
        if file.boolean("attention_bias")?.unwrap_or(false) {
            return Err(file.unsupported(Unsupported::Lacks {
                field: "attention_bias",
                value: true,
                why: "Gemma has no attention biases",
            }));
        }
        if file
            .boolean("use_bidirectional_attention")?
            .unwrap_or(false)
        {
            return Err(file.unsupported(Unsupported::Value {
                field: "use_bidirectional_attention",
                value: None,
                note: Some("an embedding model's encoder"),
                instead: Instead::Nothing,
            }));
        }
        let scalar = match file.number("query_pre_attn_scalar")? {
            None if gemma1 => head_dim as f64,
            None => 256.0,
            Some(s) if s.is_finite() && s > 0.0 => s,
            Some(s) => {
                return Err(file.invalid(ConfigProblem::WrongType {
                    field: Field::Top("query_pre_attn_scalar"),
                    value: FieldValue::Number(s),
                    expected: Expected::PositiveNumber,
                }))
            }
        };
        Ok(GemmaConfig {
            variant,
            model_type: file.model_type()?.unwrap_or_else(|| {
                match variant {
                    Variant::Gemma1 => "gemma",
                    Variant::Gemma2 => "gemma2",
                    Variant::Gemma3 => "gemma3_text",
                }
                .into()
            }),
            vocab_size: file.positive("vocab_size", vocab)?,
            hidden_size: file.positive("hidden_size", d_hidden)?,
            intermediate_size: file.positive("intermediate_size", d_inner)?,
            num_hidden_layers: layers,
            num_attention_heads: heads,
            num_key_value_heads: kv,
            head_dim,
            activation,
            max_position_embeddings,
            rms_norm_eps: file.epsilon("rms_norm_eps", 1e-6)?,
            query_pre_attn_scalar: scalar,
            rope,
            local_rope,
            sliding_window,
            sliding_layers,
            attn_softcap: match variant {
                Variant::Gemma2 => softcap(file, "attn_logit_softcapping", Some(50.0))?,
                _ => softcap(file, "attn_logit_softcapping", None)?,
            },
            final_softcap: match variant {
                Variant::Gemma2 => softcap(file, "final_logit_softcapping", Some(30.0))?,
                _ => softcap(file, "final_logit_softcapping", None)?,
            },
            tie_word_embeddings: file.boolean("tie_word_embeddings")?.unwrap_or(true),
            norms_plus_one: false,
        })
    }

    /// The config a GGUF file's metadata describes (`gemma2` or `gemma3`), with llama.cpp's
    /// values for what the metadata leaves out (see the module doc). `origin` names the file
    /// in errors.
    pub fn from_gguf(p: &DecoderParams, origin: &str) -> Result<GemmaConfig, Error> {
        let refuse = |problem: GgufMetadataProblem| {
            Err(Error::from(crate::InputError::GgufMetadata {
                origin: origin.to_string(),
                problem,
            }))
        };
        let (variant, model_type, big_layers) = match p.architecture.as_str() {
            "gemma2" => (Variant::Gemma2, "gemma2", 46),
            "gemma3" => (Variant::Gemma3, "gemma3_text", 62),
            other => {
                return refuse(GgufMetadataProblem::NotInFamily {
                    architecture: other.to_string(),
                    family: "Gemma",
                    runs: "; it runs the gemma2 and gemma3 architectures",
                })
            }
        };
        crate::families::llama::check_gguf_shape(p, origin)?;
        if p.rope_dimension_count != p.head_dim {
            return refuse(GgufMetadataProblem::PartialRope {
                rotated: p.rope_dimension_count,
                head_dim: p.head_dim,
                gemma: true,
            });
        }
        let global_scaling = match &p.rope_scaling {
            None => RopeScaling::None,
            Some(GgufRopeScaling::Linear { factor }) => {
                if let Err(factor) = crate::blocks::rope::rope_factor_in_range(*factor) {
                    return refuse(GgufMetadataProblem::RopeFactor {
                        key: format!("{}.rope.scaling.factor", p.architecture),
                        factor,
                    });
                }
                RopeScaling::Linear { factor: *factor }
            }
            Some(other) => {
                return refuse(GgufMetadataProblem::RopeScaling {
                    scaling: format!("{other:?}"),
                    runs: " for Gemma; attnviz runs its default and linear rotary embeddings",
                })
            }
        };
        let layers = p.num_hidden_layers;
        let gemma3 = variant == Variant::Gemma3;
        let pattern = if gemma3 { 6 } else { 2 };
        let cap = |value: Option<f64>, default: f64, key: &str| -> Result<Option<f32>, Error> {
            match value.unwrap_or(default) {
                c if c.is_finite() && c > 0.0 => Ok(Some(c as f32)),
                c => Err(Error::from(crate::InputError::GgufMetadata {
                    origin: origin.to_string(),
                    problem: GgufMetadataProblem::SoftCap {
                        architecture: p.architecture.clone(),
                        key: key.to_string(),
                        value: c,
                    },
                })),
            }
        };
        let (attn_softcap, final_softcap) = if gemma3 {
            (None, None)
        } else {
            (
                cap(p.attn_logit_softcapping, 50.0, "attn_logit_softcapping")?,
                cap(p.final_logit_softcapping, 30.0, "final_logit_softcapping")?,
            )
        };
        let sliding_window = match p.sliding_window {
            Some(0) => {
                return refuse(GgufMetadataProblem::SlidingWindowZero {
                    architecture: p.architecture.clone(),
                })
            }
            Some(w) => w,
            None => 4096,
        };
        // llama.cpp: 1/sqrt(head_dim), except the 27B shapes' 1/sqrt(hidden/heads).
        let query_pre_attn_scalar = if layers == big_layers {
            (p.hidden_size / p.num_attention_heads) as f64
        } else {
            p.head_dim as f64
        };
        Ok(GemmaConfig {
            variant,
            model_type: model_type.into(),
            vocab_size: p.vocab_size,
            hidden_size: p.hidden_size,
            intermediate_size: p.intermediate_size,
            num_hidden_layers: layers,
            num_attention_heads: p.num_attention_heads,
            num_key_value_heads: p.num_key_value_heads,
            head_dim: p.head_dim,
            activation: Activation::GeluTanh,
            max_position_embeddings: p.max_position_embeddings,
            rms_norm_eps: p.rms_norm_eps,
            query_pre_attn_scalar,
            rope: (p.rope_theta, global_scaling),
            local_rope: gemma3.then_some((10_000.0, RopeScaling::None)),
            sliding_window,
            sliding_layers: (0..layers).map(|i| i % pattern < pattern - 1).collect(),
            attn_softcap,
            final_softcap,
            tie_word_embeddings: p.tie_word_embeddings,
            norms_plus_one: true,
        })
    }

    fn family(&self) -> &'static Family {
        match self.variant {
            Variant::Gemma1 => &GEMMA,
            Variant::Gemma2 => &GEMMA2,
            Variant::Gemma3 => &GEMMA3,
        }
    }

    /// Its shape in family-independent terms.
    pub fn architecture(&self) -> Architecture {
        let group = self.num_attention_heads / self.num_key_value_heads;
        Architecture {
            family: self.family().name,
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
            sliding_window: self.sliding_layers.contains(&true).then(|| SlidingWindow {
                size: self.sliding_window,
                layers: self.sliding_layers.clone(),
            }),
            positions: PositionScheme::Rotary,
        }
    }

    /// Build the network from tensors named as inside transformers' base model.
    pub fn build_from(&self, t: &dyn Tensors) -> Result<DecoderStack, Error> {
        let (hidden, eps, d) = (self.hidden_size, self.rms_norm_eps, self.head_dim);
        let arch = self.architecture();
        // Gemma's RMSNorm multiplies by (1 + w): the sum is taken once, in f32, as
        // transformers' `1.0 + self.weight.float()`.
        let norm = |name: &Name, width: usize| -> Result<Norm, Error> {
            let w = t.weight(&name.weight(), &[width])?;
            if self.norms_plus_one {
                return Ok(Norm::from_weights(w, None, eps));
            }
            let plus_one = Weight::owned(w.iter().map(|x| 1.0 + x).collect(), vec![width]);
            Ok(Norm::from_weights(plus_one, None, eps))
        };
        let (q_out, kv_out) = (self.num_attention_heads * d, self.num_key_value_heads * d);
        let linear = |name: &Name, inputs, outputs| out_in_linear(t, name, inputs, outputs, false);
        let layers = (0..self.num_hidden_layers)
            .map(|i| {
                let n = layer_names(i, self.variant);
                let attn = Name::root().pp("layers").pp(i).pp("self_attn");
                let post = Name::root().pp("layers").pp(i);
                let qk_norm = match self.variant {
                    Variant::Gemma3 => {
                        Some((norm(&attn.pp("q_norm"), d)?, norm(&attn.pp("k_norm"), d)?))
                    }
                    Variant::Gemma1 | Variant::Gemma2 => None,
                };
                let post_norms = match self.variant {
                    Variant::Gemma1 => None,
                    Variant::Gemma2 | Variant::Gemma3 => Some((
                        norm(&post.pp("post_attention_layernorm"), hidden)?,
                        norm(&post.pp("post_feedforward_layernorm"), hidden)?,
                    )),
                };
                Ok(DecoderLayer {
                    attention_norm: norm(&n.attention_norm, hidden)?,
                    qkv: vec![Linear::stack(
                        n.qkv
                            .iter()
                            .zip([q_out, kv_out, kv_out])
                            .map(|(name, rows)| linear(name, hidden, rows))
                            .collect::<Result<_, _>>()?,
                    )],
                    output: linear(&n.output, q_out, hidden)?,
                    ffn_norm: norm(&n.ffn_norm, hidden)?,
                    ffn: FeedForward::load(
                        &n.ffn,
                        hidden,
                        self.intermediate_size,
                        self.activation,
                        &linear,
                    )?,
                    scale: self.query_pre_attn_scalar.powf(-0.5) as f32,
                    options: LayerOptions {
                        qk_norm,
                        post_norms,
                        window: arch.window(i),
                        softcap: self.attn_softcap,
                        local_rope: self.local_rope.is_some() && arch.window(i).is_some(),
                        no_rope: false,
                        sink_logits: None,
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
        let root = Name::root();
        Ok(DecoderStack {
            arch,
            embed: t.matrix(
                &root.pp("embed_tokens").weight(),
                &[self.vocab_size, hidden],
            )?,
            positional: Positional::Rotary(Rope::new(d, self.rope.0, self.rope.1)),
            layers,
            final_norm: norm(&root.pp("norm"), hidden)?,
            lm_head,
            options: StackOptions {
                // transformers: `hidden_size**0.5` as a float32 tensor.
                embed_scale: Some((hidden as f64).sqrt() as f32),
                final_softcap: self.final_softcap,
                local_rope: self.local_rope.map(|(theta, s)| Rope::new(d, theta, s)),
                image_blocks: false,
                rope_from: 0,
                mrope_section: None,
            },
        })
    }
}

/// Layer `i`'s tensors: attention and feed-forward with the norms before them (the norms after
/// them are `post_attention_layernorm` and `post_feedforward_layernorm`).
/// Layer `i`'s tensors: Gemma 1 norms before the feed-forward block with
/// `post_attention_layernorm` (Llama's name), Gemma 2 and 3 with `pre_feedforward_layernorm`.
fn layer_names(i: usize, variant: Variant) -> DecoderLayerNames {
    let layer = Name::root().pp("layers").pp(i);
    let (a, m) = (layer.pp("self_attn"), layer.pp("mlp"));
    DecoderLayerNames {
        attention_norm: layer.pp("input_layernorm"),
        qkv: vec![a.pp("q_proj"), a.pp("k_proj"), a.pp("v_proj")],
        output: a.pp("o_proj"),
        ffn_norm: layer.pp(match variant {
            Variant::Gemma1 => "post_attention_layernorm",
            Variant::Gemma2 | Variant::Gemma3 => "pre_feedforward_layernorm",
        }),
        ffn: FfnNames::Gated {
            gate: m.pp("gate_proj"),
            up: m.pp("up_proj"),
            down: m.pp("down_proj"),
        },
    }
}

impl GgufConfig for GemmaConfig {
    fn stack(&self, tensors: &TensorMap) -> Result<DecoderStack, Error> {
        self.build_from(tensors)
    }
}

impl FamilyConfig for GemmaConfig {
    fn checks(&self) -> (Vec<ConfigDim>, Vec<ConfigCount>) {
        let embed = Name::root().pp("embed_tokens").weight();
        let first = layer_names(0, self.variant);
        let dims = vec![
            ConfigDim::new("vocab_size", self.vocab_size, embed.clone(), 0),
            ConfigDim::new("hidden_size", self.hidden_size, embed, 1),
            ConfigDim::new(
                "intermediate_size",
                self.intermediate_size,
                first.ffn.first().weight(),
                0,
            ),
            ConfigDim::new(
                "num_attention_heads × head_dim",
                self.num_attention_heads * self.head_dim,
                first.qkv[0].weight(),
                0,
            ),
            ConfigDim::new(
                "num_key_value_heads × head_dim",
                self.num_key_value_heads * self.head_dim,
                first.qkv[1].weight(),
                0,
            ),
        ];
        let counts = vec![ConfigCount::new(
            "num_hidden_layers",
            self.num_hidden_layers,
            "layer",
            // The q projection's name is the same in every variant.
            |i| layer_names(i, Variant::Gemma2).qkv[0].weight(),
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

    fn read(text: &str, variant: Variant) -> Result<GemmaConfig, String> {
        let file = ConfigFile::parse(text, Path::new("config.json")).unwrap();
        GemmaConfig::read(&file, variant).map_err(|e| e.to_string())
    }

    #[test]
    fn the_anchor_is_a_tensor_of_the_table() {
        assert_eq!(
            GEMMA2.anchor.tensor,
            Name::root().pp("embed_tokens").weight()
        );
    }

    #[test]
    fn defaults_follow_transformers() {
        // Gemma2Config: every other layer slides (0, 2, …), soft-capping 50 / 30.
        let g2 = read(r#"{"num_hidden_layers": 4}"#, Variant::Gemma2).unwrap();
        assert_eq!(g2.sliding_layers, vec![true, false, true, false]);
        assert_eq!(
            (g2.attn_softcap, g2.final_softcap),
            (Some(50.0), Some(30.0))
        );
        assert_eq!((g2.head_dim, g2.sliding_window), (256, 4096));
        let off = read(r#"{"attn_logit_softcapping": null}"#, Variant::Gemma2).unwrap();
        assert_eq!(off.attn_softcap, None);
        // Gemma3TextConfig: 5 sliding to 1 global; local base 1e4, global 1e6 with the old
        // spelling's rope_scaling.
        let g3 = read(
            r#"{"num_hidden_layers": 7, "rope_local_base_freq": 10000.0,
                "rope_scaling": {"rope_type": "linear", "factor": 8.0}}"#,
            Variant::Gemma3,
        )
        .unwrap();
        assert_eq!(
            g3.sliding_layers,
            vec![true, true, true, true, true, false, true]
        );
        assert_eq!(g3.rope, (1e6, RopeScaling::Linear { factor: 8.0 }));
        assert_eq!(g3.local_rope, Some((1e4, RopeScaling::None)));
        assert_eq!((g3.attn_softcap, g3.final_softcap), (None, None));
        let err = read(r#"{"use_bidirectional_attention": true}"#, Variant::Gemma3).unwrap_err();
        assert!(err.contains("use_bidirectional_attention"), "{err}");
        let err = read(r#"{"layer_types": ["full_attention"]}"#, Variant::Gemma2).unwrap_err();
        assert!(
            err.contains("layer_types has 1 entries for 26 layers"),
            "{err}"
        );
    }
}
