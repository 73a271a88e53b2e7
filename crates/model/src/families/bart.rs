//! BART, mBART and Marian: the encoder–decoder stack ([`crate::blocks::seq2seq`]) with BART's tensor
//! names. Mirrors transformers' `models/bart/modeling_bart.py`, `models/mbart/modeling_mbart.py`
//! and `models/marian/modeling_marian.py`:
//!
//! - **BART**: post-LayerNorm sublayers, learned positions with an offset of 2 (position `p`
//!   reads row `p + 2`), `layernorm_embedding` after token + position embeddings;
//! - **mBART**: pre-LayerNorm sublayers, `layernorm_embedding`, and a final `layer_norm` after
//!   each stack; embeddings scaled by `√d_model` (`scale_embedding`);
//! - **Marian**: post-LayerNorm, no `layernorm_embedding`, sinusoidal positions (sines in the
//!   first half of each row, cosines in the second, computed as transformers computes them).
//!
//! All three: `1/√head_dim` scaling, the head tied to the shared embeddings (`lm_head.weight`
//! when the checkpoint stores one of its own), and `final_logits_bias` added to the logits.
//! Checkpoints are read with and without the `model.` prefix.

use crate::attention::PositionScheme;
use crate::blocks::family::{DecoderStart, Family, FamilyConfig, Quirks};
use crate::blocks::layers::{out_in_linear, Linear, Norm};
use crate::blocks::network::{Architecture, Network};
use crate::blocks::seq2seq::{
    LayerShape, Placement, Seq2SeqHead, Seq2SeqLayer, Seq2SeqLayerNames, Seq2SeqNet, Side, Stack,
    StackPositions,
};
use crate::error::Error;
use crate::formats::config::{ConfigError, ConfigFile, ConfigProblem, Oversize, Unsupported};
use crate::formats::source::{
    TokenizerFiles, TOKENIZERS_WITH_SETTINGS, TOKENIZER_JSON_WITH_SETTINGS, VOCAB_TXT,
};
use crate::formats::tensors::{Name, Tensors};
use crate::formats::validate::{ConfigCount, ConfigDim};
use crate::formats::weights::{Anchor, Checkpoint, Weight};
use crate::kernels::positions::{sinusoidal_table, SinusoidalLayout};
use crate::kernels::{Activation, Layout, Mask};
use crate::tokenize;

/// BART in the family registry.
pub static BART: Family = Family {
    name: "BART",
    model_types: &["bart"],
    class_prefixes: &["Bart"],
    anchor: ANCHOR,
    config: |file| Ok(Box::new(BartConfig::read(file, Variant::Bart)?)),
    quirks: Quirks {
        tokenizer_files: TOKENIZERS_WITH_SETTINGS,
        ..Quirks::NONE
    },
};

/// mBART in the family registry.
pub static MBART: Family = Family {
    name: "mBART",
    model_types: &["mbart"],
    class_prefixes: &["MBart"],
    anchor: ANCHOR,
    config: |file| Ok(Box::new(BartConfig::read(file, Variant::MBart)?)),
    quirks: Quirks {
        tokenizer_files: TOKENIZERS_WITH_SETTINGS,
        decoder_start: DecoderStart::LastLabel,
        target_language_code: true,
        ..Quirks::NONE
    },
};

/// Marian in the family registry.
pub static MARIAN: Family = Family {
    name: "Marian",
    model_types: &["marian"],
    class_prefixes: &["Marian"],
    anchor: ANCHOR,
    config: |file| Ok(Box::new(BartConfig::read(file, Variant::Marian)?)),
    quirks: Quirks {
        tokenizer_files: &[TOKENIZER_JSON_WITH_SETTINGS, MARIAN_SPM, VOCAB_TXT],
        target_tokenizer: Some(|dir| tokenize::marian::from_dir(dir, "target.spm")),
        ..Quirks::NONE
    },
};

/// Marian's tokenizers (opus-mt): one SentencePiece model per side and one vocabulary that
/// numbers both (`tokenize::marian`).
const MARIAN_SPM: TokenizerFiles = TokenizerFiles {
    required: &["source.spm", "vocab.json"],
    optional: &[
        "target.spm",
        "tokenizer_config.json",
        "special_tokens_map.json",
    ],
};

const ANCHOR: Anchor = Anchor {
    tensor: "shared.weight",
    family: "BART",
    prefix: "model",
};

/// Which of the three.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// BART.
    Bart,
    /// mBART.
    MBart,
    /// Marian.
    Marian,
}

impl Variant {
    fn family(self) -> &'static Family {
        match self {
            Variant::Bart => &BART,
            Variant::MBart => &MBART,
            Variant::Marian => &MARIAN,
        }
    }
}

/// The most rows of Marian's computed position table (no tensor backs the count).
const MAX_SINUSOIDAL_POSITIONS: usize = 1 << 16;

/// The config.json fields of BART, mBART and Marian, with transformers' defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct BartConfig {
    /// Which family.
    pub variant: Variant,
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Hidden size (`d_model`).
    pub d_model: usize,
    /// Encoder layers.
    pub encoder_layers: usize,
    /// Decoder layers.
    pub decoder_layers: usize,
    /// Encoder heads.
    pub encoder_attention_heads: usize,
    /// Decoder heads (self- and cross-attention).
    pub decoder_attention_heads: usize,
    /// Encoder feed-forward size.
    pub encoder_ffn_dim: usize,
    /// Decoder feed-forward size.
    pub decoder_ffn_dim: usize,
    /// The longest input of each stack.
    pub max_position_embeddings: usize,
    /// Feed-forward activation.
    pub activation: Activation,
    /// Whether token embeddings are multiplied by `√d_model`.
    pub scale_embedding: bool,
    /// `pad_token_id`.
    pub pad_token_id: u32,
    /// `decoder_start_token_id`.
    pub decoder_start_token_id: u32,
}

impl BartConfig {
    /// Read config.json for `variant`.
    pub fn read(file: &ConfigFile, variant: Variant) -> Result<BartConfig, ConfigError> {
        let marian = variant == Variant::Marian;
        let d_model = file.positive("d_model", 1024)?;
        let pad_default = if marian { 58100 } else { 1 };
        let pad_token_id = file.token_id("pad_token_id")?.unwrap_or(pad_default);
        let decoder_start_token_id = match file.token_id("decoder_start_token_id")? {
            Some(id) => id,
            // transformers' generate() falls back to the BOS token.
            None => match file.token_id("bos_token_id")? {
                Some(id) => id,
                None if marian => pad_token_id,
                None => 2,
            },
        };
        let c = BartConfig {
            variant,
            vocab_size: file.positive("vocab_size", if marian { 58101 } else { 50265 })?,
            d_model,
            encoder_layers: file.positive("encoder_layers", 12)?,
            decoder_layers: file.positive("decoder_layers", 12)?,
            encoder_attention_heads: file.positive("encoder_attention_heads", 16)?,
            decoder_attention_heads: file.positive("decoder_attention_heads", 16)?,
            encoder_ffn_dim: file.positive("encoder_ffn_dim", 4096)?,
            decoder_ffn_dim: file.positive("decoder_ffn_dim", 4096)?,
            max_position_embeddings: file.positive("max_position_embeddings", 1024)?,
            activation: file.activation("activation_function", "gelu")?,
            scale_embedding: file.boolean("scale_embedding")?.unwrap_or(false),
            pad_token_id,
            decoder_start_token_id,
        };
        for (field, heads) in [
            ("encoder_attention_heads", c.encoder_attention_heads),
            ("decoder_attention_heads", c.decoder_attention_heads),
        ] {
            if !d_model.is_multiple_of(heads) {
                return Err(file.invalid(ConfigProblem::NotDivisible {
                    field: "d_model",
                    value: d_model,
                    by_field: field,
                    by: heads,
                }));
            }
        }
        if marian {
            if file.boolean("share_encoder_decoder_embeddings")? == Some(false) {
                return Err(file.unsupported(Unsupported::Setting {
                    field: "share_encoder_decoder_embeddings",
                    value: false,
                    why: "Marian models with separate source and target embeddings are not \
                          supported",
                }));
            }
            if let Some(v) = file.count("decoder_vocab_size")? {
                if v != c.vocab_size {
                    return Err(file.unsupported(Unsupported::Differs {
                        field: "decoder_vocab_size",
                        value: v,
                        other: "vocab_size",
                        other_value: c.vocab_size,
                        why: ": Marian models with separate vocabularies are not supported",
                    }));
                }
            }
            let cells = c.max_position_embeddings.checked_mul(d_model);
            if c.max_position_embeddings > MAX_SINUSOIDAL_POSITIONS
                || cells.is_none_or(|n| n > 1 << 28)
            {
                return Err(file.invalid(Oversize::SinusoidalTable {
                    positions: c.max_position_embeddings,
                    d_model,
                    max_rows: MAX_SINUSOIDAL_POSITIONS,
                }));
            }
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

    fn arch(&self, layers: usize, heads: usize, mask: Mask) -> Architecture {
        Architecture {
            family: self.variant.family().name,
            model_type: self.variant.family().model_types[0].to_string(),
            layers,
            heads,
            kv_heads: heads,
            kv_head: Architecture::identity_heads(heads),
            head_dim: self.d_model / heads,
            hidden_size: self.d_model,
            vocab_size: self.vocab_size,
            max_positions: self.max_position_embeddings,
            token_types: 0,
            tokenizer_types: false,
            mask,
            sliding_window: None,
            positions: PositionScheme::Absolute,
        }
    }

    /// The encoder's shape.
    pub fn encoder_architecture(&self) -> Architecture {
        self.arch(
            self.encoder_layers,
            self.encoder_attention_heads,
            Mask::Bidirectional,
        )
    }

    /// The decoder's shape.
    pub fn decoder_architecture(&self) -> Architecture {
        self.arch(
            self.decoder_layers,
            self.decoder_attention_heads,
            Mask::Causal,
        )
    }

    fn positions(&self, ckpt: &Checkpoint, side: Side) -> Result<StackPositions, Error> {
        let d = self.d_model;
        Ok(match self.variant {
            Variant::Marian => StackPositions::Table {
                table: Weight::owned(
                    sinusoidal_table(self.max_position_embeddings, d, SinusoidalLayout::Halves),
                    vec![self.max_position_embeddings, d],
                ),
                offset: 0,
            },
            Variant::Bart | Variant::MBart => StackPositions::Table {
                table: ckpt.weight(
                    &Names::stack(side).positions.weight(),
                    &[self.max_position_embeddings + 2, d],
                )?,
                offset: 2,
            },
        })
    }

    fn stack(&self, ckpt: &Checkpoint, side: Side) -> Result<Stack, Error> {
        let d = self.d_model;
        let eps = 1e-5;
        let (layers, ffn) = match side {
            Side::Decoder => (self.decoder_layers, self.decoder_ffn_dim),
            Side::Encoder => (self.encoder_layers, self.encoder_ffn_dim),
        };
        let linear = |name: &Name, i, o| out_in_linear(ckpt, name, i, o, true);
        let norm = |name: &Name| Ok(Norm::layer(ckpt, name, d, eps)?);
        let shape = LayerShape {
            hidden: d,
            inner: d,
            ffn,
            activation: self.activation,
        };
        let layers = (0..layers)
            .map(|i| Seq2SeqLayer::load(&Names::layer(side, i), shape, &linear, &norm))
            .collect::<Result<Vec<_>, Error>>()?;
        let names = Names::stack(side);
        let embed_norm = match self.variant {
            Variant::Marian => None,
            Variant::Bart | Variant::MBart => Some(norm(&names.embed_norm)?),
        };
        let final_norm = match self.variant {
            Variant::MBart => Some(norm(&names.final_norm)?),
            Variant::Bart | Variant::Marian => None,
        };
        Ok(Stack {
            layers,
            positions: self.positions(ckpt, side)?,
            embed_norm,
            final_norm,
        })
    }
}

/// BART's tensor names (`encoder.layers.3.self_attn.q_proj`, `shared`), which mBART and Marian
/// share, inside the base model: one table, built from parts, that the config checks and the
/// loading read.
struct Names {
    /// Learned positions (`embed_positions`).
    positions: Name,
    /// The LayerNorm after the embeddings (`layernorm_embedding`).
    embed_norm: Name,
    /// The LayerNorm after the last layer (mBART's `layer_norm`).
    final_norm: Name,
}

impl Names {
    /// The token embeddings both stacks share.
    fn shared() -> Name {
        Name::root().pp("shared")
    }

    /// A stack's own tensors.
    fn stack(side: Side) -> Names {
        let stack = Name::root().pp(side.module());
        Names {
            positions: stack.pp("embed_positions"),
            embed_norm: stack.pp("layernorm_embedding"),
            final_norm: stack.pp("layer_norm"),
        }
    }

    /// Layer `i` of a stack.
    fn layer(side: Side, i: usize) -> Seq2SeqLayerNames {
        Seq2SeqLayerNames::bart(side, i)
    }
}

impl FamilyConfig for BartConfig {
    fn checks(&self) -> (Vec<ConfigDim>, Vec<ConfigCount>) {
        let shared = Names::shared().weight();
        let ffn = |side| Names::layer(side, 0).ffn.first().weight();
        let mut dims = vec![
            ConfigDim::new("vocab_size", self.vocab_size, &shared, 0),
            ConfigDim::new("d_model", self.d_model, &shared, 1),
            ConfigDim::new(
                "encoder_ffn_dim",
                self.encoder_ffn_dim,
                ffn(Side::Encoder),
                0,
            ),
            ConfigDim::new(
                "decoder_ffn_dim",
                self.decoder_ffn_dim,
                ffn(Side::Decoder),
                0,
            ),
        ];
        if self.variant != Variant::Marian {
            // Learned positions: two rows before position 0's.
            for side in [Side::Encoder, Side::Decoder] {
                dims.push(ConfigDim::new(
                    "max_position_embeddings",
                    self.max_position_embeddings.saturating_add(2),
                    Names::stack(side).positions.weight(),
                    0,
                ));
            }
        }
        let count = |field, value, block, side| {
            ConfigCount::new(field, value, block, move |i| {
                Names::layer(side, i).ffn.first().weight()
            })
        };
        let counts = vec![
            count(
                "encoder_layers",
                self.encoder_layers,
                "encoder layer",
                Side::Encoder,
            ),
            count(
                "decoder_layers",
                self.decoder_layers,
                "decoder layer",
                Side::Decoder,
            ),
        ];
        (dims, counts)
    }

    fn build(&self, ckpt: &Checkpoint) -> Result<Box<dyn Network>, Error> {
        let (d, vocab) = (self.d_model, self.vocab_size);
        let head = match Tensors::lm_head(ckpt, &[vocab, d])? {
            Some(w) => Seq2SeqHead::Separate(Linear::new(w, Layout::OutIn, None)),
            None => Seq2SeqHead::Tied,
        };
        let logits_bias = ckpt.top_level_weight("final_logits_bias", &[1, vocab])?;
        let encoder_arch = self.encoder_architecture();
        Ok(Box::new(Seq2SeqNet {
            scale: (encoder_arch.head_dim as f64).powf(-0.5) as f32,
            decoder_arch: self.decoder_architecture(),
            encoder_arch,
            shared: ckpt.weight(&Names::shared().weight(), &[vocab, d])?,
            embed_scale: if self.scale_embedding {
                (d as f64).sqrt() as f32
            } else {
                1.0
            },
            placement: match self.variant {
                Variant::MBart => Placement::Pre,
                Variant::Bart | Variant::Marian => Placement::Post,
            },
            encoder: self.stack(ckpt, Side::Encoder)?,
            decoder: self.stack(ckpt, Side::Decoder)?,
            head,
            output_scale: 1.0,
            logits_bias,
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
        assert_eq!(BART.anchor.tensor, Names::shared().weight());
        assert_eq!(MBART.anchor.tensor, Names::shared().weight());
        assert_eq!(MARIAN.anchor.tensor, Names::shared().weight());
    }

    fn read(text: &str, variant: Variant) -> Result<BartConfig, String> {
        let file = ConfigFile::parse(text, Path::new("config.json")).unwrap();
        BartConfig::read(&file, variant).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_are_transformers() {
        let c = read(r#"{"model_type": "bart"}"#, Variant::Bart).unwrap();
        assert_eq!(
            (
                c.vocab_size,
                c.d_model,
                c.encoder_layers,
                c.encoder_attention_heads
            ),
            (50265, 1024, 12, 16)
        );
        assert_eq!((c.pad_token_id, c.decoder_start_token_id), (1, 2));
        assert_eq!(c.activation, Activation::GeluErf);
        assert!(!c.scale_embedding);
        let m = read(r#"{"model_type": "marian"}"#, Variant::Marian).unwrap();
        assert_eq!(
            (m.vocab_size, m.pad_token_id, m.decoder_start_token_id),
            (58101, 58100, 58100)
        );
        // No decoder_start_token_id: the BOS token, as generate() falls back to it.
        let mb = read(r#"{"bos_token_id": 0}"#, Variant::MBart).unwrap();
        assert_eq!(mb.decoder_start_token_id, 0);
        assert_eq!(mb.decoder_architecture().mask, Mask::Causal);
        assert_eq!(mb.encoder_architecture().mask, Mask::Bidirectional);
    }

    #[test]
    fn refusals() {
        let err = read(
            r#"{"d_model": 32, "decoder_attention_heads": 3}"#,
            Variant::Bart,
        )
        .unwrap_err();
        assert!(
            err.contains("d_model 32 is not divisible by decoder_attention_heads 3"),
            "{err}"
        );
        let err = read(
            r#"{"share_encoder_decoder_embeddings": false}"#,
            Variant::Marian,
        )
        .unwrap_err();
        assert!(err.contains("share_encoder_decoder_embeddings"), "{err}");
        let err = read(r#"{"max_position_embeddings": 1e12}"#, Variant::Marian).unwrap_err();
        assert!(err.contains("too large"), "{err}");
        let err = read(
            r#"{"vocab_size": 10, "decoder_start_token_id": 10}"#,
            Variant::Bart,
        )
        .unwrap_err();
        assert!(err.contains("decoder_start_token_id 10"), "{err}");
        let err = read(r#"{"activation_function": "quick_gelu"}"#, Variant::Bart).unwrap_err();
        assert!(err.contains("quick_gelu"), "{err}");
    }
}
