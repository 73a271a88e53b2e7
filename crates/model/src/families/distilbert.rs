//! DistilBERT (Sanh et al. 2019): BERT's post-LN layers under their own names, word + position
//! embeddings (no token types), LayerNorm ε fixed at 1e-12. Mirrors transformers'
//! `models/distilbert/modeling_distilbert.py` (`DistilBertModel`).
//!
//! With `sinusoidal_pos_embds`, transformers initialises the position table with interleaved
//! sines and cosines; checkpoints store the table anyway, and it is read from there. A checkpoint
//! without it gets the table transformers would have made.

use crate::blocks::encoder::{
    encoder_architecture, plain_schedule, EmbeddingNames, Embeddings, EncoderConfig, EncoderLayer,
    LayerNames, PostNormEncoder,
};
use crate::blocks::family::{Family, FamilyConfig, Quirks};
use crate::blocks::layers::Norm;
use crate::blocks::mlm_head::{MlmHead, MlmHeadNames};
use crate::blocks::network::Network;
use crate::error::Error;
use crate::formats::config::{ConfigError, ConfigFile, ConfigProblem, Limit};
use crate::formats::tensors::Name;
use crate::formats::validate::{ConfigCount, ConfigDim};
use crate::formats::weights::{Anchor, Checkpoint, Weight};
use crate::kernels::positions::{sinusoidal_table, Positions, SinusoidalLayout};
use crate::kernels::Activation;

/// DistilBERT in the family registry.
pub static FAMILY: Family = Family {
    name: "DistilBERT",
    model_types: &["distilbert"],
    class_prefixes: &["DistilBert"],
    anchor: Anchor {
        tensor: "embeddings.word_embeddings.weight",
        family: "DistilBERT",
        prefix: "distilbert",
    },
    config: |file| Ok(Box::new(DistilBertConfig::read(file)?)),
    quirks: Quirks::NONE,
};

/// `DistilBertForMaskedLM`'s head: `vocab_transform`, the config's `activation`,
/// `vocab_layer_norm` (ε 1e-12), then `vocab_projector` (tied to the word embeddings) with its
/// bias.
pub const MLM_HEAD: MlmHeadNames = MlmHeadNames {
    dense: "vocab_transform",
    norm: "vocab_layer_norm",
    decoder: "vocab_projector",
    bias: &["vocab_projector.bias"],
};

/// The most rows of a sinusoidal position table computed rather than read.
const MAX_COMPUTED_POSITIONS: usize = 1 << 16;

/// The LayerNorm ε transformers hard-codes for DistilBERT.
const EPS: f64 = 1e-12;

/// DistilBERT's config.json fields (`dim`, `n_layers`, …), with transformers' defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct DistilBertConfig {
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Hidden size (`dim`).
    pub dim: usize,
    /// Layers (`n_layers`).
    pub n_layers: usize,
    /// Heads (`n_heads`).
    pub n_heads: usize,
    /// Feed-forward inner size (`hidden_dim`).
    pub hidden_dim: usize,
    /// Feed-forward activation (`activation`).
    pub activation: Activation,
    /// Rows of the position table.
    pub max_position_embeddings: usize,
    /// Whether the position table is sinusoidal.
    pub sinusoidal_pos_embds: bool,
    /// Whether the masked-LM head's decoder is the word embeddings.
    pub tie_word_embeddings: bool,
}

impl DistilBertConfig {
    /// Read config.json.
    pub fn read(file: &ConfigFile) -> Result<DistilBertConfig, ConfigError> {
        let c = DistilBertConfig {
            vocab_size: file.positive("vocab_size", 30522)?,
            dim: file.positive("dim", 768)?,
            n_layers: file.positive("n_layers", 6)?,
            n_heads: file.positive("n_heads", 12)?,
            hidden_dim: file.positive("hidden_dim", 4 * 768)?,
            activation: file.activation("activation", "gelu")?,
            max_position_embeddings: file.positive("max_position_embeddings", 512)?,
            sinusoidal_pos_embds: file.boolean("sinusoidal_pos_embds")?.unwrap_or(false),
            tie_word_embeddings: file.boolean("tie_word_embeddings")?.unwrap_or(true),
        };
        // A computed table is sized by config.json alone (nothing in the checkpoint backs it):
        // keep it bounded.
        if c.sinusoidal_pos_embds && c.max_position_embeddings > MAX_COMPUTED_POSITIONS {
            return Err(file.invalid(ConfigProblem::TooMany {
                field: "max_position_embeddings",
                value: c.max_position_embeddings,
                limit: Limit::SinusoidalPositions(MAX_COMPUTED_POSITIONS),
            }));
        }
        if !c.dim.is_multiple_of(c.n_heads) {
            return Err(file.invalid(ConfigProblem::NotDivisible {
                field: "dim",
                value: c.dim,
                by_field: "n_heads",
                by: c.n_heads,
            }));
        }
        Ok(c)
    }

    /// The same numbers in the shared encoder's terms.
    fn encoder(&self) -> EncoderConfig {
        EncoderConfig {
            vocab_size: self.vocab_size,
            hidden_size: self.dim,
            embedding_size: self.dim,
            num_hidden_layers: self.n_layers,
            num_attention_heads: self.n_heads,
            intermediate_size: self.hidden_dim,
            hidden_act: self.activation,
            max_position_embeddings: self.max_position_embeddings,
            type_vocab_size: 1,
            layer_norm_eps: EPS,
            pad_token_id: None,
            tie_word_embeddings: self.tie_word_embeddings,
        }
    }
}

/// DistilBERT's embeddings: BERT's tables without token types.
fn embedding_names() -> EmbeddingNames {
    EmbeddingNames {
        token_type: None,
        ..EmbeddingNames::bert()
    }
}

/// Layer `i`'s tensors (`transformer.layer.{i}.attention.q_lin`, …).
fn layer_names(i: usize) -> LayerNames {
    let layer = Name::root().pp("transformer").pp("layer").pp(i);
    let attention = layer.pp("attention");
    LayerNames {
        query: attention.pp("q_lin"),
        key: attention.pp("k_lin"),
        value: attention.pp("v_lin"),
        output: attention.pp("out_lin"),
        attention_norm: layer.pp("sa_layer_norm"),
        expand: layer.pp("ffn").pp("lin1"),
        project: layer.pp("ffn").pp("lin2"),
        output_norm: layer.pp("output_layer_norm"),
    }
}

impl FamilyConfig for DistilBertConfig {
    fn checks(&self) -> (Vec<ConfigDim>, Vec<ConfigCount>) {
        let names = embedding_names();
        let mut dims = vec![
            ConfigDim::new("vocab_size", self.vocab_size, names.word.weight(), 0),
            ConfigDim::new("dim", self.dim, names.word.weight(), 1),
            ConfigDim::new(
                "hidden_dim",
                self.hidden_dim,
                layer_names(0).expand.weight(),
                0,
            ),
        ];
        if !self.sinusoidal_pos_embds {
            dims.push(ConfigDim::new(
                "max_position_embeddings",
                self.max_position_embeddings,
                names.position.weight(),
                0,
            ));
        }
        let counts = vec![ConfigCount::new("n_layers", self.n_layers, "layer", |i| {
            layer_names(i).query.weight()
        })];
        (dims, counts)
    }

    fn build(&self, ckpt: &Checkpoint) -> Result<Box<dyn Network>, Error> {
        let c = self.encoder();
        let names = embedding_names();
        let positions = names.position.weight();
        let table = [self.max_position_embeddings, self.dim];
        let position = if self.sinusoidal_pos_embds && ckpt.shape_of(&positions).is_none() {
            let values = sinusoidal_table(table[0], table[1], SinusoidalLayout::Interleaved);
            Weight::owned(values, table.to_vec())
        } else {
            ckpt.weight(&positions, &table)?
        };
        let embeddings = Embeddings {
            word: ckpt.weight(&names.word.weight(), &[c.vocab_size, c.hidden_size])?,
            position: Some(position),
            positions: Positions::Absolute,
            token_type: None,
            norm: Norm::layer(ckpt, &names.norm, c.hidden_size, EPS)?,
            project: None,
        };
        let layers = (0..c.num_hidden_layers)
            .map(|i| EncoderLayer::load(ckpt, &layer_names(i), &c))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Box::new(PostNormEncoder {
            arch: encoder_architecture(
                FAMILY.name,
                "distilbert",
                &c,
                c.num_hidden_layers,
                c.max_position_embeddings,
                0,
                false,
            ),
            embeddings,
            layers,
            schedule: plain_schedule(c.num_hidden_layers),
            head: MlmHead::load(ckpt, &c.mlm_head(MLM_HEAD, self.activation))?,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn the_anchor_is_a_tensor_of_the_table() {
        assert_eq!(FAMILY.anchor.tensor, embedding_names().word.weight());
    }

    #[test]
    fn reads_its_own_field_names_with_defaults() {
        let file = ConfigFile::parse(
            r#"{"model_type": "distilbert", "dim": 32, "n_heads": 4, "hidden_dim": 64,
                "activation": "relu"}"#,
            Path::new("config.json"),
        )
        .unwrap();
        let c = DistilBertConfig::read(&file).unwrap();
        assert_eq!((c.dim, c.n_heads, c.n_layers, c.hidden_dim), (32, 4, 6, 64));
        assert_eq!(c.activation, Activation::Relu);
        assert_eq!(c.vocab_size, 30522);
        let file = ConfigFile::parse(r#"{"dim": 30, "n_heads": 4}"#, Path::new("c.json")).unwrap();
        let err = DistilBertConfig::read(&file).unwrap_err().to_string();
        assert!(
            err.contains("dim 30 is not divisible by n_heads 4"),
            "{err}"
        );
    }
}
