//! gpt-oss (`gpt_oss`, OpenAI's open-weight mixture-of-experts decoders): a pre-norm decoder
//! with RMSNorm, grouped-query attention whose q, k, v and output projections have biases, a
//! learned sink logit per head in every softmax (`self_attn.sinks`: the rows' probabilities over
//! the tokens sum to less than 1, the rest is the sink's), sliding and full attention layers as
//! `layer_types` says (alternating, sliding first, by default), YaRN rotary embeddings, and
//! routed experts on every layer: a router with a bias whose top-k logits are softmaxed, each
//! chosen expert's merged, interleaved gate/up map through a clamped SwiGLU
//! ([`crate::blocks::experts::Experts::load_gpt_oss`]). Mirrors transformers 5's
//! `models/gpt_oss/modeling_gpt_oss.py` (eager attention and experts).
//!
//! Checkpoints are `GptOssForCausalLM`'s (`model.` prefix, `lm_head.weight` outside it) with the
//! experts in float32 or bfloat16, or in MXFP4 as the released checkpoints store them
//! (`gate_up_proj_blocks`/`_scales`, `down_proj_blocks`/`_scales`), kept 4-bit. GGUF files of
//! llama.cpp's `gpt-oss` architecture are read too ([`GGUF_GPT_OSS`]): experts merged in
//! `ffn_{gate,up,down}_exps` in their block format (MXFP4, Q8_0, F32, …), one expert's rows
//! decoded only when a token is routed to it.

use crate::attention::PositionScheme;
use crate::blocks::decoder::{
    DecoderLayer, DecoderStack, LayerOptions, LmHead, Positional, StackOptions,
};
use crate::blocks::experts::{ClampedSwiglu, ExpertNames, Experts, RouterSettings};
use crate::blocks::family::{Family, FamilyConfig, GgufConfig, GgufReader, Quirks};
use crate::blocks::layers::{out_in_linear, FeedForward, Linear, Norm};
use crate::blocks::network::{Architecture, Network, SlidingWindow, MAX_LAYERS};
use crate::blocks::rope::{read_rope_based, rope_factor_in_range, Partial, MAX_ROTARY_POSITIONS};
use crate::error::{Error, GgufMetadataProblem};
use crate::families::llama::check_gguf_shape;
use crate::formats::config::{
    ConfigError, ConfigFile, ConfigProblem, Limit, Oversize, RopeProblem,
};
use crate::formats::gguf::{DecoderParams, RopeScaling as GgufRopeScaling};
use crate::formats::source::TOKENIZERS_WITH_SETTINGS;
use crate::formats::tensors::{Name, TensorMap, Tensors};
use crate::formats::validate::{ConfigCount, ConfigDim};
use crate::formats::weights::{Anchor, Checkpoint};
use crate::kernels::{yarn_attention_factor, Layout, Mask, Rope, RopeScaling, Yarn};

/// gpt-oss in the family registry.
pub static GPT_OSS: Family = Family {
    name: "gpt-oss",
    model_types: &["gpt_oss"],
    class_prefixes: &["GptOss"],
    anchor: Anchor {
        tensor: "embed_tokens.weight",
        family: "gpt-oss",
        prefix: "model",
    },
    config: |file| Ok(Box::new(GptOssConfig::read(file)?)),
    quirks: Quirks {
        tokenizer_files: TOKENIZERS_WITH_SETTINGS,
        gguf: Some(GGUF_GPT_OSS),
        ..Quirks::NONE
    },
};

/// GGUF files of llama.cpp's `gpt-oss` architecture (convert_hf_to_gguf.py's `GptOssModel`):
/// q/k unpermuted; `attn_sinks`; the router `ffn_gate_inp` with its bias; the experts split
/// into `ffn_gate_exps` and `ffn_up_exps` (transformers' interleaved columns taken apart) and
/// `ffn_down_exps`, each with a merged bias; sliding and full layers alternating, sliding
/// first (llama.cpp's swa pattern 2) when `gpt-oss.attention.sliding_window` is stated;
/// YaRN from `rope.scaling.*` with `yarn_beta_fast`/`yarn_beta_slow` when stated (else
/// transformers' 32 and 1) and its correction range not truncated, as the released configs
/// say (`truncate: false`; llama.cpp floors and ceils it); the SwiGLU clamp from
/// `gpt-oss.swiglu_clamp_exp` when stated, else 7.0 (what llama.cpp's graph fixes).
pub const GGUF_GPT_OSS: GgufReader = GgufReader {
    architectures: &["gpt-oss"],
    config: |p, origin| Ok(Box::new(GptOssGguf(GptOssConfig::from_gguf(p, origin)?))),
};

/// A gpt-oss config read from a GGUF file's metadata, building from its tensors.
#[derive(Clone, Debug, PartialEq)]
pub struct GptOssGguf(pub GptOssConfig);

impl GgufConfig for GptOssGguf {
    fn stack(&self, tensors: &TensorMap) -> Result<DecoderStack, Error> {
        self.0.build_with(tensors, true)
    }
}

/// `GptOssConfig.default_theta`.
const DEFAULT_THETA: f64 = 150_000.0;

/// The most experts a router may have (a bound on a size read from the config).
const MAX_EXPERTS: usize = 4096;

/// How the rotary frequencies are made.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum GptOssRope {
    /// YaRN (gpt-oss's own).
    Yarn(Yarn),
    /// One of the plain scalings (default, linear, llama3).
    Plain(RopeScaling),
}

/// A gpt-oss config, with `GptOssConfig`'s defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct GptOssConfig {
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Hidden size.
    pub hidden_size: usize,
    /// Each expert's inner size (`intermediate_size`).
    pub intermediate_size: usize,
    /// Layers.
    pub num_hidden_layers: usize,
    /// Query heads.
    pub num_attention_heads: usize,
    /// Key/value heads.
    pub num_key_value_heads: usize,
    /// Size of one head (`head_dim`, 64).
    pub head_dim: usize,
    /// The longest input.
    pub max_position_embeddings: usize,
    /// RMSNorm ε.
    pub rms_norm_eps: f64,
    /// RoPE base.
    pub rope_theta: f64,
    /// RoPE scaling.
    pub rope: GptOssRope,
    /// Whether the output projection is the token embedding matrix.
    pub tie_word_embeddings: bool,
    /// Whether the attention projections have biases (`attention_bias`, true).
    pub attention_bias: bool,
    /// The sliding window of the sliding layers.
    pub sliding_window: Option<usize>,
    /// Per layer, whether it slides (`layer_types`).
    pub sliding_layers: Vec<bool>,
    /// The router.
    pub router: RouterSettings,
    /// The experts' activation (`swiglu_alpha`, `swiglu_limit`).
    pub swiglu: ClampedSwiglu,
}

impl GptOssConfig {
    /// Read config.json.
    pub fn read(file: &ConfigFile) -> Result<GptOssConfig, ConfigError> {
        let hidden_size = file.positive("hidden_size", 2880)?;
        let heads = file.positive("num_attention_heads", 64)?;
        let kv = file.positive("num_key_value_heads", 8)?;
        let head_dim = file.positive("head_dim", 64)?;
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
        let max_position_embeddings = file.positive("max_position_embeddings", 131072)?;
        if max_position_embeddings > MAX_ROTARY_POSITIONS {
            return Err(file.invalid(ConfigProblem::TooMany {
                field: "max_position_embeddings",
                value: max_position_embeddings,
                limit: Limit::RotaryPositions(MAX_ROTARY_POSITIONS),
            }));
        }
        let layers = file.positive("num_hidden_layers", 36)?;
        if layers > MAX_LAYERS {
            return Err(file.invalid(ConfigProblem::TooMany {
                field: "num_hidden_layers",
                value: layers,
                limit: Limit::Layers(MAX_LAYERS),
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
            // GptOssConfig: sliding on even layers, full on odd ones.
            None => (0..layers).map(|i| i % 2 == 0).collect(),
        };
        let sliding_window = match file.get("sliding_window") {
            None if file.has_field("sliding_window") => None,
            None => Some(128),
            Some(_) => file.count("sliding_window")?,
        };
        if sliding_window == Some(0) {
            return Err(file.invalid(ConfigProblem::Zero {
                field: "sliding_window",
            }));
        }
        let (rope_theta, rope) = read_gpt_oss_rope(file)?;
        let experts_field = if file.has_field("num_local_experts") || !file.has_field("num_experts")
        {
            "num_local_experts"
        } else {
            "num_experts"
        };
        let experts = file.positive(experts_field, 128)?;
        if experts > MAX_EXPERTS {
            return Err(file.invalid(ConfigProblem::TooMany {
                field: experts_field,
                value: experts,
                limit: Limit::Number(MAX_EXPERTS),
            }));
        }
        let top_k = file.positive("num_experts_per_tok", 4)?;
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
        let alpha = file.number("swiglu_alpha")?.unwrap_or(1.702);
        let limit = file.number("swiglu_limit")?.unwrap_or(7.0);
        Ok(GptOssConfig {
            vocab_size: file.positive("vocab_size", 201088)?,
            hidden_size,
            intermediate_size: file.positive("intermediate_size", 2880)?,
            num_hidden_layers: layers,
            num_attention_heads: heads,
            num_key_value_heads: kv,
            head_dim,
            max_position_embeddings,
            rms_norm_eps: file.epsilon("rms_norm_eps", 1e-5)?,
            rope_theta,
            rope,
            tie_word_embeddings: file.boolean("tie_word_embeddings")?.unwrap_or(false),
            attention_bias: file.boolean("attention_bias")?.unwrap_or(true),
            sliding_window: sliding_window.filter(|_| sliding_layers.contains(&true)),
            sliding_layers,
            router: RouterSettings {
                experts,
                top_k,
                // The softmax over the top k logits is the softmax over all experts divided
                // by the chosen ones' sum.
                norm_topk_prob: true,
            },
            swiglu: ClampedSwiglu {
                alpha: alpha as f32,
                limit: limit as f32,
            },
        })
    }

    /// Its shape in family-independent terms.
    pub fn architecture(&self) -> Architecture {
        let group = self.num_attention_heads / self.num_key_value_heads;
        Architecture {
            family: GPT_OSS.name,
            model_type: "gpt_oss".to_string(),
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

    /// The config a GGUF file's metadata describes (`origin` names the file in errors).
    pub fn from_gguf(p: &DecoderParams, origin: &str) -> Result<GptOssConfig, Error> {
        let refuse = |problem: GgufMetadataProblem| {
            Err(Error::from(crate::InputError::GgufMetadata {
                origin: origin.to_string(),
                problem,
            }))
        };
        if p.architecture != "gpt-oss" {
            return refuse(GgufMetadataProblem::NotInFamily {
                architecture: p.architecture.clone(),
                family: "gpt-oss",
                runs: "; it runs GGUF files of the gpt-oss architecture",
            });
        }
        check_gguf_shape(p, origin)?;
        if p.rope_dimension_count != p.head_dim {
            return refuse(GgufMetadataProblem::PartialRope {
                rotated: p.rope_dimension_count,
                head_dim: p.head_dim,
                gemma: false,
            });
        }
        let Some(experts) = p.experts.as_ref() else {
            return refuse(GgufMetadataProblem::NoExperts {
                architecture: p.architecture.clone(),
            });
        };
        let rope = match &p.rope_scaling {
            None => GptOssRope::Plain(RopeScaling::None),
            Some(GgufRopeScaling::Yarn {
                factor,
                original_max_position_embeddings,
            }) => {
                if let Err(factor) = rope_factor_in_range(*factor) {
                    return refuse(GgufMetadataProblem::RopeFactor {
                        key: "gpt-oss.rope.scaling.factor".to_string(),
                        factor,
                    });
                }
                let Some(original) = *original_max_position_embeddings else {
                    return refuse(GgufMetadataProblem::RopeScaling {
                        scaling: "type 'yarn' without rope.scaling.original_context_length"
                            .to_string(),
                        runs: "; YaRN needs the context it extends",
                    });
                };
                let positive = |v: Option<f64>, default: f64| {
                    v.filter(|b| b.is_finite() && *b > 0.0).unwrap_or(default)
                };
                GptOssRope::Yarn(Yarn {
                    factor: *factor,
                    beta_fast: positive(p.rope_yarn_beta_fast, 32.0),
                    beta_slow: positive(p.rope_yarn_beta_slow, 1.0),
                    original: original as f64,
                    truncate: false,
                    attention_factor: yarn_attention_factor(*factor),
                })
            }
            Some(GgufRopeScaling::Linear { .. }) => {
                return refuse(GgufMetadataProblem::RopeScaling {
                    scaling: "type 'linear'".to_string(),
                    runs: "; gpt-oss runs YaRN or no scaling",
                })
            }
            Some(GgufRopeScaling::Other { kind, .. }) => {
                return refuse(GgufMetadataProblem::RopeScaling {
                    scaling: format!("type '{kind}'"),
                    runs: "; gpt-oss runs YaRN or no scaling",
                })
            }
        };
        let limit = match p.swiglu_clamp_exp.first() {
            None => 7.0,
            Some(&l) if l.is_finite() && l > 0.0 => l,
            Some(&l) => {
                return refuse(GgufMetadataProblem::SoftCap {
                    architecture: p.architecture.clone(),
                    key: "swiglu_clamp_exp".to_string(),
                    value: l,
                })
            }
        };
        let layers = p.num_hidden_layers;
        Ok(GptOssConfig {
            vocab_size: p.vocab_size,
            hidden_size: p.hidden_size,
            intermediate_size: experts.feed_forward_length.unwrap_or(p.intermediate_size),
            num_hidden_layers: layers,
            num_attention_heads: p.num_attention_heads,
            num_key_value_heads: p.num_key_value_heads,
            head_dim: p.head_dim,
            max_position_embeddings: p.max_position_embeddings,
            rms_norm_eps: p.rms_norm_eps,
            rope_theta: p.rope_theta,
            rope,
            tie_word_embeddings: p.tie_word_embeddings,
            attention_bias: p.attention_bias,
            sliding_window: p.sliding_window,
            // llama.cpp's `set_swa_pattern(2)`: the even layers slide.
            sliding_layers: (0..layers)
                .map(|i| p.sliding_window.is_some() && i % 2 == 0)
                .collect(),
            router: RouterSettings {
                experts: experts.count,
                top_k: experts.used,
                norm_topk_prob: true,
            },
            swiglu: ClampedSwiglu {
                alpha: 1.702,
                limit: limit as f32,
            },
        })
    }

    /// Build the network from tensors named as inside transformers' base model.
    pub fn build_from(&self, t: &dyn Tensors) -> Result<DecoderStack, Error> {
        self.build_with(t, false)
    }

    /// [`GptOssConfig::build_from`]; `gguf`: the sinks are named `self_attn.sinks.weight`, as
    /// llama.cpp's `attn_sinks.weight` maps.
    fn build_with(&self, t: &dyn Tensors, gguf: bool) -> Result<DecoderStack, Error> {
        let (hidden, eps) = (self.hidden_size, self.rms_norm_eps);
        let (heads, d) = (self.num_attention_heads, self.head_dim);
        let (q_out, kv_out) = (heads * d, self.num_key_value_heads * d);
        let rms = |name: &Name| -> Result<Norm, Error> {
            Ok(Norm::from_weights(
                t.weight(&name.weight(), &[hidden])?,
                None,
                eps,
            ))
        };
        let bias = self.attention_bias;
        let linear = |name: &Name, inputs, outputs| out_in_linear(t, name, inputs, outputs, bias);
        let router = |name: &Name, inputs, outputs| out_in_linear(t, name, inputs, outputs, true);
        let arch = self.architecture();
        let layers = (0..self.num_hidden_layers)
            .map(|i| {
                let layer = Name::root().pp("layers").pp(i);
                let a = layer.pp("self_attn");
                let sinks_name = if gguf {
                    a.pp("sinks").weight()
                } else {
                    a.tensor("sinks")
                };
                let sinks = t.weight(&sinks_name, &[heads])?;
                Ok(DecoderLayer {
                    attention_norm: rms(&layer.pp("input_layernorm"))?,
                    qkv: vec![Linear::stack(vec![
                        linear(&a.pp("q_proj"), hidden, q_out)?,
                        linear(&a.pp("k_proj"), hidden, kv_out)?,
                        linear(&a.pp("v_proj"), hidden, kv_out)?,
                    ])],
                    output: linear(&a.pp("o_proj"), q_out, hidden)?,
                    ffn_norm: rms(&layer.pp("post_attention_layernorm"))?,
                    ffn: FeedForward::Routed(Box::new(Experts::load_gpt_oss(
                        t,
                        &expert_names(i),
                        hidden,
                        self.intermediate_size,
                        self.router,
                        self.swiglu,
                        &router,
                    )?)),
                    scale: (d as f64).powf(-0.5) as f32,
                    options: LayerOptions {
                        window: arch.window(i),
                        sink_logits: Some(sinks.to_vec()),
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
            GptOssRope::Yarn(yarn) => Rope::yarn(d, self.rope_theta, yarn),
            GptOssRope::Plain(scaling) => Rope::new(d, self.rope_theta, scaling),
        };
        Ok(DecoderStack {
            arch,
            embed: t.matrix(&embed().weight(), &[self.vocab_size, hidden])?,
            positional: Positional::Rotary(rope),
            layers,
            final_norm: rms(&Name::root().pp("norm"))?,
            lm_head,
            options: StackOptions::default(),
        })
    }
}

/// The token embeddings.
fn embed() -> Name {
    Name::root().pp("embed_tokens")
}

/// Layer `i`'s router (`mlp.router`) and experts (`mlp.experts`).
fn expert_names(i: usize) -> ExpertNames {
    let m = Name::root().pp("layers").pp(i).pp("mlp");
    ExpertNames {
        router: m.pp("router"),
        experts: m.pp("experts"),
        leaves: ["gate_proj", "up_proj", "down_proj"],
    }
}

/// The rotary settings: `rope_parameters` (or 4.x's `rope_scaling` with `rope_theta`) of type
/// `yarn`, with transformers' defaults (`beta_fast` 32, `beta_slow` 1, `truncate` true, the
/// attention factor from `factor`, or `mscale`/`mscale_all_dim`); any other type as the other
/// rotary families read it.
fn read_gpt_oss_rope(file: &ConfigFile) -> Result<(f64, GptOssRope), ConfigError> {
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
        let (theta, scaling) = read_rope_based(file, Partial::Refused, DEFAULT_THETA)?;
        return Ok((theta, GptOssRope::Plain(scaling)));
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
            None => DEFAULT_THETA,
        },
    };
    let factor = positive("factor")?.ok_or_else(|| needs("factor"))?;
    rope_factor_in_range(factor).map_err(|why| s.invalid(RopeProblem::Factor(why)))?;
    let original = match positive("original_max_position_embeddings")? {
        Some(o) => o,
        None => file
            .count("original_max_position_embeddings")?
            .map(|o| o as f64)
            .ok_or_else(|| needs("original_max_position_embeddings"))?,
    };
    let attention_factor = match positive("attention_factor")? {
        Some(a) => a,
        None => match (positive("mscale")?, positive("mscale_all_dim")?) {
            (Some(m), Some(all)) => {
                let get = |m: f64| {
                    if factor <= 1.0 {
                        1.0
                    } else {
                        0.1 * m * factor.ln() + 1.0
                    }
                };
                get(m) / get(all)
            }
            _ => yarn_attention_factor(factor),
        },
    };
    Ok((
        theta,
        GptOssRope::Yarn(Yarn {
            factor,
            beta_fast: positive("beta_fast")?.unwrap_or(32.0),
            beta_slow: positive("beta_slow")?.unwrap_or(1.0),
            original,
            truncate: s.boolean("truncate")?.unwrap_or(true),
            attention_factor,
        }),
    ))
}

impl FamilyConfig for GptOssConfig {
    fn checks(&self) -> (Vec<ConfigDim>, Vec<ConfigCount>) {
        let dims = vec![
            ConfigDim::new("vocab_size", self.vocab_size, embed().weight(), 0),
            ConfigDim::new("hidden_size", self.hidden_size, embed().weight(), 1),
            ConfigDim::new(
                "num_local_experts",
                self.router.experts,
                expert_names(0).router.weight(),
                0,
            ),
        ];
        let counts = vec![ConfigCount::new(
            "num_hidden_layers",
            self.num_hidden_layers,
            "layer",
            |i| {
                Name::root()
                    .pp("layers")
                    .pp(i)
                    .pp("self_attn")
                    .pp("q_proj")
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

    fn read(text: &str) -> Result<GptOssConfig, String> {
        let file = ConfigFile::parse(text, Path::new("config.json")).unwrap();
        GptOssConfig::read(&file).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_are_gpt_oss_20b_s() {
        let c = read("{}").unwrap();
        assert_eq!(
            (c.num_attention_heads, c.num_key_value_heads, c.head_dim),
            (64, 8, 64)
        );
        assert_eq!((c.router.experts, c.router.top_k), (128, 4));
        assert_eq!(c.sliding_window, Some(128));
        assert_eq!(&c.sliding_layers[..4], &[true, false, true, false]);
        assert!(c.attention_bias && !c.tie_word_embeddings);
        assert_eq!(c.rope_theta, 150_000.0);
        assert_eq!(
            c.swiglu,
            ClampedSwiglu {
                alpha: 1.702,
                limit: 7.0
            }
        );
    }

    #[test]
    fn yarn_is_read_from_either_spelling_and_needs_its_context() {
        let c = read(
            r#"{"rope_parameters": {"rope_type": "yarn", "rope_theta": 1000.0, "factor": 8.0,
                "beta_fast": 16.0, "beta_slow": 2.0, "truncate": false,
                "original_max_position_embeddings": 32}}"#,
        )
        .unwrap();
        assert_eq!(c.rope_theta, 1000.0);
        let GptOssRope::Yarn(y) = c.rope else {
            panic!("{:?}", c.rope)
        };
        assert_eq!(
            (y.factor, y.beta_fast, y.beta_slow, y.original),
            (8.0, 16.0, 2.0, 32.0)
        );
        assert!(!y.truncate);
        assert!((y.attention_factor - (0.1 * 8f64.ln() + 1.0)).abs() < 1e-12);
        let old = read(
            r#"{"rope_theta": 500.0, "rope_scaling": {"type": "yarn", "factor": 4.0,
                "original_max_position_embeddings": 64}}"#,
        )
        .unwrap();
        assert_eq!(old.rope_theta, 500.0);
        assert!(matches!(old.rope, GptOssRope::Yarn(y) if y.truncate && y.beta_fast == 32.0));
        let err = read(r#"{"rope_parameters": {"rope_type": "yarn", "factor": 4.0}}"#).unwrap_err();
        assert!(err.contains("original_max_position_embeddings"), "{err}");
        assert!(!err.contains('\n'));
        let plain =
            read(r#"{"rope_parameters": {"rope_type": "default", "rope_theta": 10.0}}"#).unwrap();
        assert_eq!(plain.rope, GptOssRope::Plain(RopeScaling::None));
    }

    #[test]
    fn layer_types_pick_the_sliding_layers() {
        let c = read(
            r#"{"num_hidden_layers": 3, "sliding_window": 4,
                "layer_types": ["full_attention", "sliding_attention", "full_attention"]}"#,
        )
        .unwrap();
        assert_eq!(c.sliding_layers, [false, true, false]);
        let arch = c.architecture();
        assert_eq!(
            (arch.window(0), arch.window(1), arch.window(2)),
            (None, Some(4), None)
        );
        let err =
            read(r#"{"num_hidden_layers": 3, "layer_types": ["full_attention"]}"#).unwrap_err();
        assert!(err.contains("layer_types"), "{err}");
        let err = read(r#"{"num_local_experts": 2, "num_experts_per_tok": 3}"#).unwrap_err();
        assert!(err.contains("num_experts_per_tok 3"), "{err}");
    }
}
