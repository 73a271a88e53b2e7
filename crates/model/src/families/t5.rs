//! T5, T5 v1.1 and Flan-T5: the encoder–decoder stack ([`crate::blocks::seq2seq`]) with T5's parts.
//! Mirrors transformers' `models/t5/modeling_t5.py` (`T5ForConditionalGeneration`):
//!
//! - pre-norm sublayers with T5's layer norm (RMS: no mean subtraction, no bias) and a final
//!   norm after each stack;
//! - no absolute positions: a bias from relative position buckets is added to the scores,
//!   bidirectional in the encoder and unidirectional in the decoder, from the first layer's
//!   `relative_attention_bias` of each stack (the other layers reuse it); cross-attention has
//!   none;
//! - no `1/√d` scaling of `q·k`;
//! - the feed-forward block from `feed_forward_proj`: `relu` (T5), or gated (`gated-gelu`:
//!   `wo(gelu_new(wi_0·x) · wi_1·x)`, T5 v1.1 and Flan-T5);
//! - the head: `lm_head.weight` when the checkpoint stores one, else the shared embeddings; the
//!   decoder output is multiplied by `d_model^-0.5` first when the head is tied (transformers 5
//!   writes this as `scale_decoder_outputs`; older configs say it with `tie_word_embeddings`).

use crate::attention::PositionScheme;
use crate::blocks::family::{Family, FamilyConfig, Quirks};
use crate::blocks::layers::{out_in_linear, FfnNames, Linear, Norm};
use crate::blocks::network::{Architecture, Network};
use crate::blocks::seq2seq::{
    AttentionNames, LayerShape, Placement, RelativeBuckets, Seq2SeqHead, Seq2SeqLayer,
    Seq2SeqLayerNames, Seq2SeqNet, Side, Stack, StackPositions,
};
use crate::error::Error;
use crate::formats::config::{ConfigError, ConfigFile, ConfigProblem, Oversize, Unsupported};
use crate::formats::source::TOKENIZERS_WITH_SETTINGS;
use crate::formats::tensors::{Name, Tensors};
use crate::formats::validate::{ConfigCount, ConfigDim};
use crate::formats::weights::{Anchor, Checkpoint};
use crate::kernels::{Activation, Layout, Mask};

/// T5 in the family registry.
pub static FAMILY: Family = Family {
    name: "T5",
    model_types: &["t5"],
    class_prefixes: &["T5"],
    anchor: Anchor {
        tensor: "shared.weight",
        family: "T5",
        prefix: "",
    },
    config: |file| Ok(Box::new(T5Config::read(file)?)),
    quirks: Quirks {
        tokenizer_files: TOKENIZERS_WITH_SETTINGS,
        ..Quirks::NONE
    },
};

/// The longest input T5 is run on: relative positions set no limit, the tokenizer's
/// `model_max_length` usually does (512), and the capture budget bounds the rest.
const T5_MAX_POSITIONS: usize = 1 << 16;

/// T5's config.json fields, with transformers' defaults (those of `t5-small`).
#[derive(Clone, Debug, PartialEq)]
pub struct T5Config {
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Hidden size.
    pub d_model: usize,
    /// Size of one head's vectors.
    pub d_kv: usize,
    /// Feed-forward size.
    pub d_ff: usize,
    /// Encoder layers.
    pub num_layers: usize,
    /// Decoder layers (`num_layers` when absent).
    pub num_decoder_layers: usize,
    /// Heads.
    pub num_heads: usize,
    /// Relative position buckets.
    pub relative_attention_num_buckets: usize,
    /// Distance from which buckets stop growing.
    pub relative_attention_max_distance: usize,
    /// Layer norm ε.
    pub layer_norm_epsilon: f64,
    /// The feed-forward activation.
    pub activation: Activation,
    /// Whether the feed-forward block is gated.
    pub gated: bool,
    /// Whether the decoder output is scaled by `d_model^-0.5` before the head.
    pub scale_decoder_outputs: bool,
    /// `pad_token_id`.
    pub pad_token_id: u32,
    /// `decoder_start_token_id`.
    pub decoder_start_token_id: u32,
}

impl T5Config {
    /// Read config.json.
    pub fn read(file: &ConfigFile) -> Result<T5Config, ConfigError> {
        let num_layers = file.positive("num_layers", 6)?;
        let proj = file
            .string("feed_forward_proj")?
            .unwrap_or_else(|| "relu".to_string());
        let parts: Vec<&str> = proj.split('-').collect();
        let (gated, act) = match parts.as_slice() {
            [act] => (false, *act),
            ["gated", act] => (true, *act),
            _ => return Err(file.invalid(ConfigProblem::FeedForwardProj { proj: proj.clone() })),
        };
        // transformers: "gated-gelu" means the tanh approximation (gelu_new).
        let act = if proj == "gated-gelu" {
            "gelu_new"
        } else {
            act
        };
        let activation = Activation::from_hf_name(act).ok_or_else(|| {
            file.unsupported(Unsupported::FeedForwardActivation {
                proj: proj.clone(),
                activation: act.to_string(),
            })
        })?;
        let pad_token_id = file.token_id("pad_token_id")?.unwrap_or(0);
        let scale_decoder_outputs = match file.boolean("scale_decoder_outputs")? {
            Some(s) => s,
            None => file.boolean("tie_word_embeddings")? != Some(false),
        };
        let c = T5Config {
            vocab_size: file.positive("vocab_size", 32128)?,
            d_model: file.positive("d_model", 512)?,
            d_kv: file.positive("d_kv", 64)?,
            d_ff: file.positive("d_ff", 2048)?,
            num_layers,
            num_decoder_layers: file.positive("num_decoder_layers", num_layers)?,
            num_heads: file.positive("num_heads", 8)?,
            relative_attention_num_buckets: file.positive("relative_attention_num_buckets", 32)?,
            relative_attention_max_distance: file
                .positive("relative_attention_max_distance", 128)?,
            layer_norm_epsilon: file.epsilon("layer_norm_epsilon", 1e-6)?,
            activation,
            gated,
            scale_decoder_outputs,
            pad_token_id,
            decoder_start_token_id: file
                .token_id("decoder_start_token_id")?
                .unwrap_or(pad_token_id),
        };
        if c.relative_attention_num_buckets < 4 {
            return Err(file.invalid(ConfigProblem::TooFew {
                field: "relative_attention_num_buckets",
                value: c.relative_attention_num_buckets,
                min: 4,
            }));
        }
        if c.num_heads.checked_mul(c.d_kv).is_none() {
            return Err(file.invalid(Oversize::Product {
                field: "num_heads",
                value: c.num_heads,
                by_field: "d_kv",
                by: c.d_kv,
            }));
        }
        if c.decoder_start_token_id as usize >= c.vocab_size {
            return Err(file.invalid(ConfigProblem::NotBelow {
                field: "decoder_start_token_id",
                value: c.decoder_start_token_id as usize,
                limit_field: "vocab_size",
                limit: c.vocab_size,
            }));
        }
        Ok(c)
    }

    fn arch(&self, layers: usize, mask: Mask) -> Architecture {
        Architecture {
            family: FAMILY.name,
            model_type: "t5".to_string(),
            layers,
            heads: self.num_heads,
            kv_heads: self.num_heads,
            kv_head: Architecture::identity_heads(self.num_heads),
            head_dim: self.d_kv,
            hidden_size: self.d_model,
            vocab_size: self.vocab_size,
            max_positions: T5_MAX_POSITIONS,
            token_types: 0,
            tokenizer_types: false,
            mask,
            sliding_window: None,
            positions: PositionScheme::Relative,
        }
    }

    /// The encoder's shape.
    pub fn encoder_architecture(&self) -> Architecture {
        self.arch(self.num_layers, Mask::Bidirectional)
    }

    /// The decoder's shape.
    pub fn decoder_architecture(&self) -> Architecture {
        self.arch(self.num_decoder_layers, Mask::Causal)
    }

    fn stack(&self, ckpt: &Checkpoint, side: Side) -> Result<Stack, Error> {
        let (d, eps) = (self.d_model, self.layer_norm_epsilon);
        let layers = match side {
            Side::Decoder => self.num_decoder_layers,
            Side::Encoder => self.num_layers,
        };
        let linear = |name: &Name, i, o| out_in_linear(ckpt, name, i, o, false);
        let norm = |name: &Name| Ok(Norm::rms(ckpt, name, d, eps)?);
        let shape = LayerShape {
            hidden: d,
            inner: self.num_heads * self.d_kv,
            ffn: self.d_ff,
            activation: self.activation,
        };
        let layers = (0..layers)
            .map(|i| {
                let names = Names::layer(side, i, self.gated);
                Seq2SeqLayer::load(&names, shape, &linear, &norm)
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let table = ckpt.weight(
            &Names::relative_bias(side).weight(),
            &[self.relative_attention_num_buckets, self.num_heads],
        )?;
        Ok(Stack {
            layers,
            positions: StackPositions::Relative(RelativeBuckets {
                table,
                buckets: self.relative_attention_num_buckets,
                max_distance: self.relative_attention_max_distance,
                bidirectional: side == Side::Encoder,
            }),
            embed_norm: None,
            final_norm: Some(norm(&Names::final_norm(side))?),
        })
    }
}

/// T5's tensor names (`encoder.block.3.layer.0.SelfAttention.q`, `shared`), inside the base
/// model: one table, built from parts, that the config checks and the loading read.
struct Names;

impl Names {
    /// The token embeddings both stacks share.
    fn shared() -> Name {
        Name::root().pp("shared")
    }

    /// Block `i`'s sublayers (`encoder.block.{i}.layer`): self-attention, cross-attention
    /// (decoder), the feed-forward block.
    fn sublayers(side: Side, i: usize) -> Name {
        Name::root().pp(side.module()).pp("block").pp(i).pp("layer")
    }

    /// Block `i` of a stack, with a gated feed-forward block or not.
    fn layer(side: Side, i: usize, gated: bool) -> Seq2SeqLayerNames {
        let p = Names::sublayers(side, i);
        let attention = |sublayer: usize, module: &str| {
            let a = p.pp(sublayer).pp(module);
            AttentionNames {
                q: a.pp("q"),
                k: a.pp("k"),
                v: a.pp("v"),
                output: a.pp("o"),
                norm: p.pp(sublayer).pp("layer_norm"),
            }
        };
        let decoder = side == Side::Decoder;
        let f = p.pp(if decoder { 2 } else { 1 });
        let dense = f.pp("DenseReluDense");
        Seq2SeqLayerNames {
            self_attention: attention(0, "SelfAttention"),
            cross: decoder.then(|| attention(1, "EncDecAttention")),
            ffn: if gated {
                FfnNames::Gated {
                    gate: dense.pp("wi_0"),
                    up: dense.pp("wi_1"),
                    down: dense.pp("wo"),
                }
            } else {
                FfnNames::Plain {
                    expand: dense.pp("wi"),
                    project: dense.pp("wo"),
                }
            },
            ffn_norm: f.pp("layer_norm"),
        }
    }

    /// The relative position buckets' biases, in a stack's first block.
    fn relative_bias(side: Side) -> Name {
        Names::sublayers(side, 0)
            .pp(0)
            .pp("SelfAttention")
            .pp("relative_attention_bias")
    }

    /// The RMSNorm after a stack's last block.
    fn final_norm(side: Side) -> Name {
        Name::root().pp(side.module()).pp("final_layer_norm")
    }
}

impl FamilyConfig for T5Config {
    fn checks(&self) -> (Vec<ConfigDim>, Vec<ConfigCount>) {
        let shared = Names::shared().weight();
        let bias = Names::relative_bias(Side::Encoder).weight();
        let first = Names::layer(Side::Encoder, 0, self.gated);
        let dims = vec![
            ConfigDim::new("vocab_size", self.vocab_size, &shared, 0),
            ConfigDim::new("d_model", self.d_model, &shared, 1),
            ConfigDim::new("num_heads", self.num_heads, &bias, 1),
            ConfigDim::new(
                "relative_attention_num_buckets",
                self.relative_attention_num_buckets,
                &bias,
                0,
            ),
            // The inner size, heads × d_kv, is the query map's rows.
            ConfigDim::new(
                "d_kv",
                self.num_heads * self.d_kv,
                first.self_attention.q.weight(),
                0,
            ),
            ConfigDim::new("d_ff", self.d_ff, first.ffn.last().weight(), 1),
        ];
        let count = |field, value, block, side| {
            ConfigCount::new(field, value, block, move |i| {
                Names::layer(side, i, false).self_attention.q.weight()
            })
        };
        let counts = vec![
            count(
                "num_layers",
                self.num_layers,
                "encoder block",
                Side::Encoder,
            ),
            count(
                "num_decoder_layers",
                self.num_decoder_layers,
                "decoder block",
                Side::Decoder,
            ),
        ];
        (dims, counts)
    }

    fn build(&self, ckpt: &Checkpoint) -> Result<Box<dyn Network>, Error> {
        let (d, vocab) = (self.d_model, self.vocab_size);
        // The inner size (heads × d_kv) is backed by the query map's rows.
        let inner = self.num_heads * self.d_kv;
        ckpt.check_shape(
            &Names::layer(Side::Encoder, 0, self.gated)
                .self_attention
                .q
                .weight(),
            &[inner, d],
        )?;
        let head = match Tensors::lm_head(ckpt, &[vocab, d])? {
            Some(w) => Seq2SeqHead::Separate(Linear::new(w, Layout::OutIn, None)),
            None => Seq2SeqHead::Tied,
        };
        Ok(Box::new(Seq2SeqNet {
            encoder_arch: self.encoder_architecture(),
            decoder_arch: self.decoder_architecture(),
            shared: ckpt.weight(&Names::shared().weight(), &[vocab, d])?,
            embed_scale: 1.0,
            placement: Placement::Pre,
            scale: 1.0,
            encoder: self.stack(ckpt, Side::Encoder)?,
            decoder: self.stack(ckpt, Side::Decoder)?,
            head,
            output_scale: if self.scale_decoder_outputs {
                (d as f64).powf(-0.5) as f32
            } else {
                1.0
            },
            logits_bias: None,
            decoder_start: self.decoder_start_token_id,
            pad: self.pad_token_id,
            screen: Default::default(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn the_anchor_is_a_tensor_of_the_table() {
        assert_eq!(FAMILY.anchor.tensor, Names::shared().weight());
    }

    fn read(text: &str) -> Result<T5Config, String> {
        let file = ConfigFile::parse(text, Path::new("config.json")).unwrap();
        T5Config::read(&file).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_are_t5_small() {
        let c = read(r#"{"model_type": "t5"}"#).unwrap();
        assert_eq!(
            (
                c.d_model,
                c.d_kv,
                c.d_ff,
                c.num_layers,
                c.num_decoder_layers,
                c.num_heads
            ),
            (512, 64, 2048, 6, 6, 8)
        );
        assert_eq!((c.activation, c.gated), (Activation::Relu, false));
        assert!(c.scale_decoder_outputs);
        assert_eq!(c.decoder_start_token_id, 0);
        let v11 = read(
            r#"{"feed_forward_proj": "gated-gelu", "tie_word_embeddings": false, "num_decoder_layers": 3}"#,
        )
        .unwrap();
        assert_eq!((v11.activation, v11.gated), (Activation::GeluTanh, true));
        assert!(!v11.scale_decoder_outputs);
        assert_eq!(v11.decoder_architecture().layers, 3);
        // transformers 5 writes the scale explicitly (and tie_word_embeddings true).
        let saved =
            read(r#"{"scale_decoder_outputs": false, "tie_word_embeddings": true}"#).unwrap();
        assert!(!saved.scale_decoder_outputs);
        let silu = read(r#"{"feed_forward_proj": "gated-silu"}"#).unwrap();
        assert_eq!(silu.activation, Activation::Silu);
    }

    #[test]
    fn refusals() {
        for (config, want) in [
            (
                r#"{"feed_forward_proj": "gated-gelu-x"}"#,
                "is not of the form",
            ),
            (
                r#"{"feed_forward_proj": "swiglu2"}"#,
                "activation 'swiglu2'",
            ),
            (r#"{"relative_attention_num_buckets": 2}"#, "below 4"),
            (r#"{"num_heads": 1e15, "d_kv": 1e15}"#, "too large"),
            (
                r#"{"vocab_size": 5, "pad_token_id": 9}"#,
                "decoder_start_token_id 9",
            ),
        ] {
            let err = read(config).unwrap_err();
            assert!(err.contains(want), "{config}: {err}");
        }
    }
}
