//! GPT-2 (Radford et al. 2019), and distilgpt2 and gpt2-medium through the same code: learned
//! absolute positions, pre-LayerNorm blocks, Conv1D weights stored `[in, out]` (`c_attn` packs
//! q, k and v along its output axis), tanh GELU (`gelu_new`), causal self-attention, and the
//! output projection tied to the token embeddings. Mirrors transformers'
//! `models/gpt2/modeling_gpt2.py` (`GPT2Model`, `GPT2LMHeadModel`).
//!
//! Checkpoints are read with the `transformer.` prefix (`GPT2LMHeadModel`) and without it (the
//! hub's `gpt2` stores `GPT2Model`'s keys: `h.0.attn.c_attn.weight`, `wte.weight`).

use crate::attention::PositionScheme;
use crate::blocks::decoder::{
    DecoderLayer, DecoderLayerNames, DecoderStack, LayerOptions, LmHead, Positional, StackOptions,
};
use crate::blocks::family::{Family, FamilyConfig, Quirks};
use crate::blocks::layers::{FeedForward, FfnNames, Linear, Norm};
use crate::blocks::network::{Architecture, Network};
use crate::error::Error;
use crate::formats::config::{ConfigError, ConfigFile, ConfigProblem, Oversize, Unsupported};
use crate::formats::source::TOKENIZERS_WITH_SETTINGS;
use crate::formats::tensors::{Name, Tensors};
use crate::formats::validate::{ConfigCount, ConfigDim};
use crate::formats::weights::{Anchor, Checkpoint};
use crate::kernels::{Activation, Layout, Mask};

/// GPT-2 in the family registry.
pub static FAMILY: Family = Family {
    name: "GPT-2",
    model_types: &["gpt2"],
    class_prefixes: &["GPT2"],
    anchor: Anchor {
        tensor: "wte.weight",
        family: "GPT-2",
        prefix: "transformer",
    },
    config: |file| Ok(Box::new(Gpt2Config::read(file)?)),
    quirks: Quirks {
        tokenizer_files: TOKENIZERS_WITH_SETTINGS,
        ..Quirks::NONE
    },
};

/// GPT-2's config.json fields, with transformers' defaults (those of the 124M `gpt2`).
#[derive(Clone, Debug, PartialEq)]
pub struct Gpt2Config {
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Hidden size (`n_embd`).
    pub n_embd: usize,
    /// Layers (`n_layer`).
    pub n_layer: usize,
    /// Heads (`n_head`).
    pub n_head: usize,
    /// Feed-forward inner size (`n_inner`; `4 · n_embd` when null).
    pub n_inner: usize,
    /// Rows of the position table (`n_positions`): the longest input.
    pub n_positions: usize,
    /// LayerNorm ε (`layer_norm_epsilon`).
    pub layer_norm_epsilon: f64,
    /// Feed-forward activation (`activation_function`).
    pub activation: Activation,
    /// Whether scores are divided by `√head_dim` (`scale_attn_weights`).
    pub scale_attn_weights: bool,
    /// Whether layer `i`'s scores are also divided by `i + 1`
    /// (`scale_attn_by_inverse_layer_idx`).
    pub scale_attn_by_inverse_layer_idx: bool,
    /// Whether the output projection is the token embedding matrix (`tie_word_embeddings`).
    pub tie_word_embeddings: bool,
}

impl Gpt2Config {
    /// Read config.json.
    pub fn read(file: &ConfigFile) -> Result<Gpt2Config, ConfigError> {
        let n_embd = file.positive("n_embd", 768)?;
        let c = Gpt2Config {
            vocab_size: file.positive("vocab_size", 50257)?,
            n_embd,
            n_layer: file.positive("n_layer", 12)?,
            n_head: file.positive("n_head", 12)?,
            n_inner: match file.count("n_inner")? {
                Some(n) => n,
                None => n_embd.checked_mul(4).ok_or_else(|| {
                    file.invalid(Oversize::Field {
                        field: "n_embd",
                        value: n_embd,
                    })
                })?,
            },
            n_positions: file.positive("n_positions", 1024)?,
            layer_norm_epsilon: file.epsilon("layer_norm_epsilon", 1e-5)?,
            activation: file.activation("activation_function", "gelu_new")?,
            scale_attn_weights: file.boolean("scale_attn_weights")?.unwrap_or(true),
            scale_attn_by_inverse_layer_idx: file
                .boolean("scale_attn_by_inverse_layer_idx")?
                .unwrap_or(false),
            tie_word_embeddings: file.boolean("tie_word_embeddings")?.unwrap_or(true),
        };
        if !c.n_embd.is_multiple_of(c.n_head) {
            return Err(file.invalid(ConfigProblem::NotDivisible {
                field: "n_embd",
                value: c.n_embd,
                by_field: "n_head",
                by: c.n_head,
            }));
        }
        if file.boolean("add_cross_attention")? == Some(true) {
            return Err(file.unsupported(Unsupported::Setting {
                field: "add_cross_attention",
                value: true,
                why: "GPT-2 as the decoder of an encoder-decoder model is not supported; attnviz \
                      runs GPT-2 language models",
            }));
        }
        Ok(c)
    }

    fn head_dim(&self) -> usize {
        self.n_embd / self.n_head
    }

    /// Its shape in family-independent terms.
    pub fn architecture(&self) -> Architecture {
        Architecture {
            family: FAMILY.name,
            model_type: "gpt2".to_string(),
            layers: self.n_layer,
            heads: self.n_head,
            kv_heads: self.n_head,
            kv_head: Architecture::identity_heads(self.n_head),
            head_dim: self.head_dim(),
            hidden_size: self.n_embd,
            vocab_size: self.vocab_size,
            max_positions: self.n_positions,
            token_types: 0,
            tokenizer_types: false,
            mask: Mask::Causal,
            sliding_window: None,
            positions: PositionScheme::Absolute,
        }
    }

    /// Layer `i`'s factor on `q·k`.
    fn scale(&self, i: usize) -> f32 {
        let mut scale = 1.0f64;
        if self.scale_attn_weights {
            scale = (self.head_dim() as f64).powf(-0.5);
        }
        if self.scale_attn_by_inverse_layer_idx {
            scale /= (i + 1) as f64;
        }
        scale as f32
    }
}

/// GPT-2's tensors outside its layers, inside the base model: one table, built from parts, that
/// the config checks and the loading read.
struct Names {
    /// Token embeddings.
    wte: Name,
    /// Position embeddings.
    wpe: Name,
    /// The final LayerNorm.
    ln_f: Name,
}

impl Names {
    fn new() -> Names {
        let root = Name::root();
        Names {
            wte: root.pp("wte"),
            wpe: root.pp("wpe"),
            ln_f: root.pp("ln_f"),
        }
    }

    /// Layer `i`'s tensors (`h.{i}.attn.c_attn`, …).
    fn layer(i: usize) -> DecoderLayerNames {
        let h = Name::root().pp("h").pp(i);
        DecoderLayerNames {
            attention_norm: h.pp("ln_1"),
            qkv: vec![h.pp("attn").pp("c_attn")],
            output: h.pp("attn").pp("c_proj"),
            ffn_norm: h.pp("ln_2"),
            ffn: FfnNames::Plain {
                expand: h.pp("mlp").pp("c_fc"),
                project: h.pp("mlp").pp("c_proj"),
            },
        }
    }
}

/// A Conv1D map (`[inputs, outputs]` weight and a bias).
fn conv1d(ckpt: &Checkpoint, name: &Name, inputs: usize, outputs: usize) -> Result<Linear, Error> {
    let weight = ckpt.weight(&name.weight(), &[inputs, outputs])?;
    let bias = ckpt.weight(&name.bias(), &[outputs])?;
    Ok(Linear::new(weight, Layout::InOut, Some(bias)))
}

impl FamilyConfig for Gpt2Config {
    fn checks(&self) -> (Vec<ConfigDim>, Vec<ConfigCount>) {
        let names = Names::new();
        let dims = vec![
            ConfigDim::new("vocab_size", self.vocab_size, names.wte.weight(), 0),
            ConfigDim::new("n_embd", self.n_embd, names.wte.weight(), 1),
            ConfigDim::new("n_positions", self.n_positions, names.wpe.weight(), 0),
            ConfigDim::new(
                "n_inner",
                self.n_inner,
                Names::layer(0).ffn.first().weight(),
                1,
            ),
        ];
        let counts = vec![ConfigCount::new("n_layer", self.n_layer, "layer", |i| {
            Names::layer(i).qkv[0].weight()
        })];
        (dims, counts)
    }

    fn build(&self, ckpt: &Checkpoint) -> Result<Box<dyn Network>, Error> {
        let (hidden, eps) = (self.n_embd, self.layer_norm_epsilon);
        let names = Names::new();
        let conv = |name: &Name, inputs, outputs| conv1d(ckpt, name, inputs, outputs);
        let layers = (0..self.n_layer)
            .map(|i| {
                let n = Names::layer(i);
                Ok(DecoderLayer {
                    attention_norm: Norm::layer(ckpt, &n.attention_norm, hidden, eps)?,
                    qkv: vec![conv(&n.qkv[0], hidden, 3 * hidden)?],
                    output: conv(&n.output, hidden, hidden)?,
                    ffn_norm: Norm::layer(ckpt, &n.ffn_norm, hidden, eps)?,
                    ffn: FeedForward::load(&n.ffn, hidden, self.n_inner, self.activation, &conv)?,
                    scale: self.scale(i),
                    options: LayerOptions::default(),
                })
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let lm_head = if self.tie_word_embeddings {
            LmHead::Tied
        } else {
            match Tensors::lm_head(ckpt, &[self.vocab_size, hidden])? {
                Some(w) => LmHead::Separate(Linear::new(w, Layout::OutIn, None)),
                None => LmHead::Missing,
            }
        };
        Ok(Box::new(DecoderStack {
            arch: self.architecture(),
            embed: ckpt
                .weight(&names.wte.weight(), &[self.vocab_size, hidden])?
                .into(),
            positional: Positional::Learned(
                ckpt.weight(&names.wpe.weight(), &[self.n_positions, hidden])?,
            ),
            layers,
            final_norm: Norm::layer(ckpt, &names.ln_f, hidden, eps)?,
            lm_head,
            options: StackOptions::default(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn the_anchor_is_a_tensor_of_the_table() {
        assert_eq!(FAMILY.anchor.tensor, Names::new().wte.weight());
    }

    fn read(text: &str) -> Result<Gpt2Config, String> {
        let file = ConfigFile::parse(text, Path::new("config.json")).unwrap();
        Gpt2Config::read(&file).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_are_gpt2_small() {
        let c = read(r#"{"model_type": "gpt2"}"#).unwrap();
        assert_eq!(
            (c.n_embd, c.n_layer, c.n_head, c.n_inner, c.n_positions),
            (768, 12, 12, 3072, 1024)
        );
        assert_eq!(c.activation, Activation::GeluTanh);
        assert!(c.tie_word_embeddings);
        assert_eq!(c.scale(0), (64f64).powf(-0.5) as f32);
        // gpt2-medium's shape, with n_inner null as the hub's config writes it.
        let m = read(r#"{"n_embd": 1024, "n_head": 16, "n_layer": 24, "n_inner": null}"#).unwrap();
        assert_eq!((m.head_dim(), m.n_inner), (64, 4096));
        let arch = m.architecture();
        assert_eq!(arch.mask, Mask::Causal);
        assert!(!arch.accepts_pairs());
    }

    #[test]
    fn layer_scaling_and_refusals() {
        let c = read(r#"{"n_embd": 32, "n_head": 4, "scale_attn_by_inverse_layer_idx": true}"#)
            .unwrap();
        assert_eq!(c.scale(3), ((8f64).powf(-0.5) / 4.0) as f32);
        let err = read(r#"{"n_embd": 30, "n_head": 4}"#).unwrap_err();
        assert!(
            err.contains("n_embd 30 is not divisible by n_head 4"),
            "{err}"
        );
        let err = read(r#"{"add_cross_attention": true}"#).unwrap_err();
        assert!(err.contains("add_cross_attention"), "{err}");
        let err = read(r#"{"activation_function": "quick_gelu"}"#).unwrap_err();
        assert!(err.contains("activation_function 'quick_gelu'"), "{err}");
    }
}
