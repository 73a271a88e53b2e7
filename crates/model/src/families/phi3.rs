//! Phi-3, Phi-3.5 and Phi-4-mini (`phi3`): the pre-norm decoder stack with q, k and v in one
//! fused `qkv_proj` and the SwiGLU gate and up maps in one `gate_up_proj` (gate first), partial
//! rotary embeddings (`partial_rotary_factor`: Phi-4-mini rotates 3/4 of each head), `longrope`
//! scaling (short factors up to `original_max_position_embeddings` positions, long ones beyond,
//! cosines and sines times the attention factor), and an optional sliding window on every
//! layer. Mirrors transformers' `models/phi3/modeling_phi3.py`.
//!
//! GGUF files of llama.cpp's `phi3` architecture come through [`Phi3Config::from_gguf`]: the
//! same fused `attn_qkv` and `ffn_up` (gate and up) maps, `rope.dimension_count` rotated values
//! per head, and LongRoPE's factors as the tensors `rope_factors_short`/`rope_factors_long`
//! with `rope.scaling.original_context_length` and `.attn_factor` (which factors apply is
//! chosen by the input's length, as transformers does).

use serde_json::Value;

use crate::attention::PositionScheme;
use crate::blocks::decoder::{
    DecoderLayer, DecoderLayerNames, DecoderStack, LayerOptions, LmHead, Positional, StackOptions,
};
use crate::blocks::family::{Family, FamilyConfig, GgufConfig, GgufReader, Quirks};
use crate::blocks::layers::{out_in_linear, FeedForward, FfnNames, Linear, Norm};
use crate::blocks::network::{Architecture, Network, SlidingWindow};
use crate::blocks::rope::{read_rope_of, Partial, MAX_ROTARY_POSITIONS};
use crate::error::{Error, GgufMetadataProblem};
use crate::formats::config::{
    ConfigError, ConfigFile, ConfigProblem, Expected, Field, FieldValue, Limit, Oversize,
    RopeProblem, Unsupported,
};
use crate::formats::gguf::DecoderParams;
use crate::formats::source::TOKENIZERS_WITH_SETTINGS;
use crate::formats::tensors::{Name, TensorMap, Tensors};
use crate::formats::validate::{ConfigCount, ConfigDim};
use crate::formats::weights::{Anchor, Checkpoint, MatrixWeight, StoredMatrix, Weight};
use crate::kernels::{Activation, Layout, Mask, Rope, RopeScaling};

const ANCHOR: Anchor = Anchor {
    tensor: "embed_tokens.weight",
    family: "Phi-3",
    prefix: "model",
};

/// Phi-3/3.5 and Phi-4-mini in the family registry.
pub static PHI3: Family = Family {
    name: "Phi-3",
    model_types: &["phi3"],
    class_prefixes: &["Phi3"],
    anchor: ANCHOR,
    config: |file| Ok(Box::new(Phi3Config::read(file)?)),
    quirks: Quirks {
        tokenizer_files: TOKENIZERS_WITH_SETTINGS,
        gguf: Some(GgufReader {
            architectures: &["phi3"],
            config: |p, origin| Ok(Box::new(Phi3Config::from_gguf(p, origin)?)),
        }),
        ..Quirks::NONE
    },
};

/// LongRoPE's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct LongRope {
    /// Frequency divisors up to `original` positions.
    pub short_factor: Vec<f64>,
    /// Frequency divisors beyond.
    pub long_factor: Vec<f64>,
    /// `original_max_position_embeddings`.
    pub original: usize,
    /// The factor on cosines and sines.
    pub attention_factor: f64,
    /// Whether the factors are read with the weights (a GGUF file's `rope_factors_short` and
    /// `rope_factors_long` tensors) rather than given here.
    pub factors_in_tensors: bool,
}

/// A Phi-3 config, with the defaults of transformers' `Phi3Config`.
#[derive(Clone, Debug, PartialEq)]
pub struct Phi3Config {
    /// `model_type` as written.
    pub model_type: String,
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Hidden size.
    pub hidden_size: usize,
    /// SwiGLU inner size (`gate_up_proj` has twice as many rows).
    pub intermediate_size: usize,
    /// Layers.
    pub num_hidden_layers: usize,
    /// Query heads.
    pub num_attention_heads: usize,
    /// Key/value heads.
    pub num_key_value_heads: usize,
    /// Size of one head.
    pub head_dim: usize,
    /// The rotated part of each head (`head_dim × partial_rotary_factor`).
    pub rotary_dim: usize,
    /// The gate's activation.
    pub hidden_act: Activation,
    /// The longest input.
    pub max_position_embeddings: usize,
    /// RMSNorm ε.
    pub rms_norm_eps: f64,
    /// RoPE base.
    pub rope_theta: f64,
    /// LongRoPE, when `rope_type` is `longrope` (or `su`).
    pub longrope: Option<LongRope>,
    /// The sliding window on every layer, if any.
    pub sliding_window: Option<usize>,
    /// Whether the output projection is the token embedding matrix.
    pub tie_word_embeddings: bool,
}

impl Phi3Config {
    /// Read config.json.
    pub fn read(file: &ConfigFile) -> Result<Phi3Config, ConfigError> {
        let hidden = file.positive("hidden_size", 3072)?;
        let heads = file.positive("num_attention_heads", 32)?;
        let kv = file.positive("num_key_value_heads", heads)?;
        if heads % kv != 0 {
            return Err(file.invalid(ConfigProblem::NotMultiple {
                field: "num_attention_heads",
                value: heads,
                of_field: "num_key_value_heads",
                of: kv,
            }));
        }
        let head_dim = match file.count("head_dim")? {
            Some(0) => return Err(file.invalid(ConfigProblem::Zero { field: "head_dim" })),
            Some(d) => d,
            None if hidden % heads == 0 => hidden / heads,
            None => {
                return Err(file.invalid(ConfigProblem::NotDivisible {
                    field: "hidden_size",
                    value: hidden,
                    by_field: "num_attention_heads",
                    by: heads,
                }))
            }
        };
        if (heads + 2 * kv).checked_mul(head_dim).is_none() {
            return Err(file.invalid(Oversize::FusedQkv {
                heads,
                kv,
                head_dim,
            }));
        }
        let max_position_embeddings = file.positive("max_position_embeddings", 4096)?;
        if max_position_embeddings > MAX_ROTARY_POSITIONS {
            return Err(file.invalid(ConfigProblem::TooMany {
                field: "max_position_embeddings",
                value: max_position_embeddings,
                limit: Limit::RotaryPositions(MAX_ROTARY_POSITIONS),
            }));
        }
        let params = match file
            .get("rope_parameters")
            .or_else(|| file.get("rope_scaling"))
        {
            Some(Value::Object(map)) => Some(map),
            _ => None,
        };
        let param = |key: &str| params.and_then(|p| p.get(key)).filter(|v| !v.is_null());
        let partial = match param("partial_rotary_factor") {
            Some(v) => v.as_f64(),
            None => file.number("partial_rotary_factor")?,
        }
        .unwrap_or(1.0);
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
        let kind = param("rope_type")
            .or_else(|| param("type"))
            .and_then(Value::as_str)
            .unwrap_or("default");
        let original = match param("original_max_position_embeddings") {
            Some(v) => v.as_u64().map(|n| n as usize),
            None => file.count("original_max_position_embeddings")?,
        }
        .unwrap_or(4096);
        let (rope_theta, longrope) = match kind {
            "longrope" | "su" => {
                let theta = match param("rope_theta").and_then(Value::as_f64) {
                    Some(t) => t,
                    None => file.number("rope_theta")?.unwrap_or(10000.0),
                };
                let factors = |key: &'static str| -> Result<Vec<f64>, ConfigError> {
                    let list = param(key)
                        .and_then(Value::as_array)
                        .ok_or_else(|| file.invalid(RopeProblem::LongropeNeeds { key }))?;
                    let values: Option<Vec<f64>> = list
                        .iter()
                        .map(|v| v.as_f64().filter(|x| x.is_finite() && *x > 0.0))
                        .collect();
                    match values {
                        Some(v) if v.len() == rotary_dim / 2 => Ok(v),
                        _ => Err(file.invalid(RopeProblem::LongropeFactors {
                            key,
                            len: list.len(),
                            rotary_dim,
                            head_dim,
                            hidden_size: hidden,
                            heads,
                            partial,
                        })),
                    }
                };
                let factor = param("factor")
                    .and_then(Value::as_f64)
                    .unwrap_or(max_position_embeddings as f64 / original as f64);
                let attention_factor = match param("attention_factor").and_then(Value::as_f64) {
                    Some(a) => a,
                    None if factor <= 1.0 => 1.0,
                    None => (1.0 + factor.ln() / (original as f64).ln()).sqrt(),
                };
                let l = LongRope {
                    short_factor: factors("short_factor")?,
                    long_factor: factors("long_factor")?,
                    original,
                    attention_factor,
                    factors_in_tensors: false,
                };
                (theta, Some(l))
            }
            // The factor was read above, from wherever the config keeps it.
            _ => match read_rope_of(file, Partial::Read)? {
                (theta, RopeScaling::None) => (theta, None),
                (_, other) => return Err(file.unsupported(Unsupported::Phi3Scaling(other))),
            },
        };
        let sliding_window = match file.count("sliding_window")? {
            Some(0) => {
                return Err(file.invalid(ConfigProblem::Zero {
                    field: "sliding_window",
                }))
            }
            w => w,
        };
        Ok(Phi3Config {
            model_type: file.model_type()?.unwrap_or_else(|| "phi3".into()),
            vocab_size: file.positive("vocab_size", 32064)?,
            hidden_size: hidden,
            intermediate_size: file.positive("intermediate_size", 8192)?,
            num_hidden_layers: file.positive("num_hidden_layers", 32)?,
            num_attention_heads: heads,
            num_key_value_heads: kv,
            head_dim,
            rotary_dim,
            hidden_act: file.activation("hidden_act", "silu")?,
            max_position_embeddings,
            rms_norm_eps: file.epsilon("rms_norm_eps", 1e-5)?,
            rope_theta,
            longrope,
            sliding_window,
            tie_word_embeddings: file.boolean("tie_word_embeddings")?.unwrap_or(false),
        })
    }

    /// The config a GGUF file's metadata describes (`phi3`). `origin` names the file in errors.
    pub fn from_gguf(p: &DecoderParams, origin: &str) -> Result<Phi3Config, Error> {
        let refuse = |problem: GgufMetadataProblem| {
            Err(Error::from(crate::InputError::GgufMetadata {
                origin: origin.to_string(),
                problem,
            }))
        };
        if p.architecture != "phi3" {
            return refuse(GgufMetadataProblem::NotInFamily {
                architecture: p.architecture.clone(),
                family: "Phi-3",
                runs: "",
            });
        }
        crate::families::llama::check_gguf_shape(p, origin)?;
        let rotary_dim = p.rope_dimension_count;
        if rotary_dim < 2 || !rotary_dim.is_multiple_of(2) || rotary_dim > p.head_dim {
            return refuse(GgufMetadataProblem::RotaryDim {
                rotated: rotary_dim,
                head_dim: p.head_dim,
            });
        }
        if let Some(kind) = &p.rope_scaling {
            return refuse(GgufMetadataProblem::RopeScaling {
                scaling: format!("{kind:?}"),
                runs: " for Phi-3; attnviz runs its default and longrope (rope_factors_*) \
                       embeddings",
            });
        }
        let longrope = if p.rope_factors_tensors {
            let Some(original) = p.rope_original_context_length.filter(|&n| n > 0) else {
                return refuse(GgufMetadataProblem::NoOriginalContext);
            };
            // convert_hf_to_gguf.py's attention factor when the file does not state one.
            let factor = p.max_position_embeddings as f64 / original as f64;
            let attention_factor = match p.rope_attn_factor {
                Some(a) if a.is_finite() && a > 0.0 => a,
                Some(a) => return refuse(GgufMetadataProblem::AttnFactor(a)),
                None if factor <= 1.0 => 1.0,
                None => (1.0 + factor.ln() / (original as f64).ln()).sqrt(),
            };
            Some(LongRope {
                short_factor: Vec::new(),
                long_factor: Vec::new(),
                original,
                attention_factor,
                factors_in_tensors: true,
            })
        } else {
            None
        };
        Ok(Phi3Config {
            model_type: "phi3".into(),
            vocab_size: p.vocab_size,
            hidden_size: p.hidden_size,
            intermediate_size: p.intermediate_size,
            num_hidden_layers: p.num_hidden_layers,
            num_attention_heads: p.num_attention_heads,
            num_key_value_heads: p.num_key_value_heads,
            head_dim: p.head_dim,
            rotary_dim,
            hidden_act: Activation::Silu,
            max_position_embeddings: p.max_position_embeddings,
            rms_norm_eps: p.rms_norm_eps,
            rope_theta: p.rope_theta,
            longrope,
            sliding_window: match p.sliding_window {
                Some(0) => {
                    return refuse(GgufMetadataProblem::SlidingWindowZero {
                        architecture: "phi3".to_string(),
                    })
                }
                w => w,
            },
            tie_word_embeddings: p.tie_word_embeddings,
        })
    }

    /// Its shape in family-independent terms.
    pub fn architecture(&self) -> Architecture {
        let group = self.num_attention_heads / self.num_key_value_heads;
        Architecture {
            family: PHI3.name,
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
            sliding_window: self
                .sliding_window
                .map(|w| SlidingWindow::every(w, self.num_hidden_layers)),
            positions: PositionScheme::Rotary,
        }
    }

    fn rope(&self, t: &dyn Tensors) -> Result<Rope, Error> {
        let mut longrope = self.longrope.clone();
        if let Some(l) = longrope.as_mut().filter(|l| l.factors_in_tensors) {
            let half = self.rotary_dim / 2;
            let read = |name: &str| -> Result<Vec<f64>, Error> {
                let w = t.weight(name, &[half])?;
                match w.iter().find(|f| !(f.is_finite() && **f > 0.0)) {
                    Some(bad) => Err(crate::InputError::RopeFactors {
                        tensor: name.to_string(),
                        value: *bad,
                        long_rope: true,
                    }
                    .into()),
                    None => Ok(w.iter().map(|&f| f as f64).collect()),
                }
            };
            l.short_factor = read("rope_factors_short.weight")?;
            l.long_factor = read("rope_factors_long.weight")?;
        }
        let rope = match &longrope {
            Some(l) => Rope::longrope(
                self.rotary_dim,
                self.rope_theta,
                &l.short_factor,
                &l.long_factor,
                l.original,
                l.attention_factor,
            ),
            None => Rope::new(self.rotary_dim, self.rope_theta, RopeScaling::None),
        };
        Ok(rope.with_head_dim(self.head_dim))
    }

    /// Build the network from tensors named as inside transformers' base model.
    pub fn build_from(&self, t: &dyn Tensors) -> Result<DecoderStack, Error> {
        let (hidden, eps, inter) = (self.hidden_size, self.rms_norm_eps, self.intermediate_size);
        let arch = self.architecture();
        let rms = |name: &Name| -> Result<Norm, Error> {
            Ok(Norm::from_weights(
                t.weight(&name.weight(), &[hidden])?,
                None,
                eps,
            ))
        };
        let qkv_rows = (self.num_attention_heads + 2 * self.num_key_value_heads) * self.head_dim;
        let layers = (0..self.num_hidden_layers)
            .map(|i| {
                let n = layer_names(i);
                let FfnNames::Gated { gate, down, .. } = &n.ffn else {
                    unreachable!("Phi-3's block is gated")
                };
                // gate_up_proj: [2·inter, hidden], the gate's rows first (`chunk(2, dim=-1)`);
                // a GGUF file's stays in its block format (its rows are whole blocks).
                let fused = t.matrix(&gate.weight(), &[2 * inter, hidden])?;
                let (gate_part, up_part) = split_rows(fused, inter, hidden)?;
                let part = |w: MatrixWeight| Linear::new(w, Layout::OutIn, None);
                Ok(DecoderLayer {
                    attention_norm: rms(&n.attention_norm)?,
                    qkv: vec![out_in_linear(t, &n.qkv[0], hidden, qkv_rows, false)?],
                    output: out_in_linear(
                        t,
                        &n.output,
                        self.num_attention_heads * self.head_dim,
                        hidden,
                        false,
                    )?,
                    ffn_norm: rms(&n.ffn_norm)?,
                    ffn: FeedForward::Gated {
                        gate: part(gate_part),
                        up: part(up_part),
                        activation: self.hidden_act,
                        down: out_in_linear(t, down, inter, hidden, false)?,
                    },
                    scale: (self.head_dim as f64).powf(-0.5) as f32,
                    options: LayerOptions {
                        window: arch.window(i),
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
            positional: Positional::Rotary(self.rope(t)?),
            layers,
            final_norm: rms(&root.pp("norm"))?,
            lm_head,
            options: StackOptions::default(),
        })
    }
}

/// A `[2·inter, hidden]` matrix as its first and last `inter` rows.
fn split_rows(
    fused: MatrixWeight,
    inter: usize,
    hidden: usize,
) -> Result<(MatrixWeight, MatrixWeight), Error> {
    Ok(match fused {
        MatrixWeight::F32(w) => {
            let half = inter * hidden;
            let part =
                |r: std::ops::Range<usize>| Weight::owned(w[r].to_vec(), vec![inter, hidden]);
            (part(0..half).into(), part(half..2 * half).into())
        }
        MatrixWeight::Stored(m) => {
            let bytes = m.bytes();
            let half = bytes.len() / 2;
            let part = |b: &[u8]| {
                StoredMatrix::owned(b.to_vec(), m.dtype(), inter, hidden)
                    .map(MatrixWeight::from)
                    .map_err(|e| Error::from(crate::InputError::GateUp(e)))
            };
            (part(&bytes[..half])?, part(&bytes[half..])?)
        }
    })
}

/// Layer `i`'s tensors: one fused q/k/v map, and the fused gate/up map under the gate's name
/// (`up` names the same tensor).
fn layer_names(i: usize) -> DecoderLayerNames {
    let layer = Name::root().pp("layers").pp(i);
    let (a, m) = (layer.pp("self_attn"), layer.pp("mlp"));
    DecoderLayerNames {
        attention_norm: layer.pp("input_layernorm"),
        qkv: vec![a.pp("qkv_proj")],
        output: a.pp("o_proj"),
        ffn_norm: layer.pp("post_attention_layernorm"),
        ffn: FfnNames::Gated {
            gate: m.pp("gate_up_proj"),
            up: m.pp("gate_up_proj"),
            down: m.pp("down_proj"),
        },
    }
}

impl GgufConfig for Phi3Config {
    fn stack(&self, tensors: &TensorMap) -> Result<DecoderStack, Error> {
        self.build_from(tensors)
    }
}

impl FamilyConfig for Phi3Config {
    fn checks(&self) -> (Vec<ConfigDim>, Vec<ConfigCount>) {
        let embed = Name::root().pp("embed_tokens").weight();
        let first = layer_names(0);
        let dims = vec![
            ConfigDim::new("vocab_size", self.vocab_size, embed.clone(), 0),
            ConfigDim::new("hidden_size", self.hidden_size, embed, 1),
            ConfigDim::new(
                "intermediate_size × 2",
                self.intermediate_size.saturating_mul(2),
                first.ffn.first().weight(),
                0,
            ),
            ConfigDim::new(
                "(num_attention_heads + 2 × num_key_value_heads) × head_dim",
                (self.num_attention_heads + 2 * self.num_key_value_heads) * self.head_dim,
                first.qkv[0].weight(),
                0,
            ),
        ];
        let counts = vec![ConfigCount::new(
            "num_hidden_layers",
            self.num_hidden_layers,
            "layer",
            |i| layer_names(i).qkv[0].weight(),
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

    fn read(text: &str) -> Result<Phi3Config, String> {
        let file = ConfigFile::parse(text, Path::new("config.json")).unwrap();
        Phi3Config::read(&file).map_err(|e| e.to_string())
    }

    #[test]
    fn the_anchor_is_a_tensor_of_the_table() {
        assert_eq!(PHI3.anchor.tensor, Name::root().pp("embed_tokens").weight());
    }

    #[test]
    fn partial_rotary_and_longrope_are_read() {
        // Phi-4-mini's shape: head_dim 128, 3/4 rotated, longrope over 4096 original positions.
        let short: Vec<String> = (0..48)
            .map(|i| format!("{}", 1.0 + i as f64 / 100.0))
            .collect();
        let text = format!(
            r#"{{"hidden_size": 3072, "num_attention_heads": 24, "num_key_value_heads": 8,
                "max_position_embeddings": 131072, "original_max_position_embeddings": 4096,
                "partial_rotary_factor": 0.75,
                "rope_scaling": {{"type": "longrope", "short_factor": [{s}], "long_factor": [{s}]}}}}"#,
            s = short.join(", ")
        );
        let c = read(&text).unwrap();
        assert_eq!((c.head_dim, c.rotary_dim), (128, 96));
        let l = c.longrope.unwrap();
        assert_eq!(l.original, 4096);
        let want = (1.0 + (32f64).ln() / (4096f64).ln()).sqrt();
        assert!((l.attention_factor - want).abs() < 1e-12);
        let err =
            read(r#"{"rope_scaling": {"type": "longrope", "short_factor": [1.0]}}"#).unwrap_err();
        assert!(err.contains("short_factor must hold 48"), "{err}");
        assert!(err.contains("hidden_size 3072"), "{err}");
    }
}
