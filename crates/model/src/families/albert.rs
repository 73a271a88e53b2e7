//! ALBERT (Lan et al. 2020): factorised embeddings (`embedding_size` projected to
//! `hidden_size`) and layer weights shared across depth. Mirrors transformers'
//! `models/albert/modeling_albert.py` (`AlbertModel`).
//!
//! Sharing: the weights come in `num_hidden_groups` groups of `inner_group_num` layers each. Hidden
//! layer `i` (of `num_hidden_layers`) runs group `⌊i / (num_hidden_layers / num_hidden_groups)⌋`
//! (a float division, as `AlbertTransformer` computes it), that is all of the group's inner
//! layers in turn. Every inner layer run is one captured attention map, as transformers returns
//! them: `num_hidden_layers × inner_group_num` maps per input.
//!
//! Segments: ALBERT was pre-trained with segment ids (sentence-order prediction), so a pair's
//! second sentence gets segment 1 whenever the config has two segment types, as transformers
//! computes it when `token_type_ids` are passed (its version 5 tokenizer no longer returns
//! them, so a transformers 5 pipeline feeds zeros unless asked).

use crate::blocks::encoder::{
    encoder_architecture, encoder_dims, EmbeddingNames, Embeddings, EncoderConfig, EncoderDefaults,
    EncoderLayer, LayerNames, PostNormEncoder,
};
use crate::blocks::family::{Family, FamilyConfig, Quirks};
use crate::blocks::mlm_head::{MlmHead, MlmHeadNames};
use crate::blocks::network::Network;
use crate::error::Error;
use crate::formats::config::{ConfigError, ConfigFile, ConfigProblem, Limit, Oversize};
use crate::formats::tensors::Name;
use crate::formats::validate::{ConfigCount, ConfigDim};
use crate::formats::weights::{Anchor, Checkpoint};
use crate::kernels::positions::Positions;

/// ALBERT in the family registry.
pub static FAMILY: Family = Family {
    name: "ALBERT",
    model_types: &["albert"],
    class_prefixes: &["Albert"],
    anchor: Anchor {
        tensor: "embeddings.word_embeddings.weight",
        family: "ALBERT",
        prefix: "albert",
    },
    config: |file| Ok(Box::new(AlbertConfig::read(file)?)),
    quirks: Quirks::NONE,
};

/// `AlbertForMaskedLM`'s head (`AlbertMLMHead`): `predictions.dense` from the hidden size to
/// `embedding_size`, the config's `hidden_act`, `predictions.LayerNorm`, then the decoder (tied to
/// the word embeddings) with `predictions.bias`.
pub const MLM_HEAD: MlmHeadNames = MlmHeadNames {
    dense: "predictions.dense",
    norm: "predictions.LayerNorm",
    decoder: "predictions.decoder",
    bias: &["predictions.bias", "predictions.decoder.bias"],
};

/// transformers' `AlbertConfig` defaults.
const DEFAULTS: EncoderDefaults = EncoderDefaults {
    vocab_size: 30000,
    hidden_size: 4096,
    embedding_size: Some(128),
    num_hidden_layers: 12,
    num_attention_heads: 64,
    intermediate_size: 16384,
    hidden_act: "gelu_new",
    max_position_embeddings: 512,
    type_vocab_size: 2,
    layer_norm_eps: 1e-12,
    pad_token_id: Some(0),
};

/// The most layer runs per input. The count is not backed by tensors (the layers share them),
/// so config.json alone could ask for any number; real ALBERTs run 12 or 24.
const MAX_LAYER_RUNS: usize = 1024;

/// An ALBERT config.
#[derive(Clone, Debug, PartialEq)]
pub struct AlbertConfig {
    /// The encoder's fields (`embedding_size` may differ from `hidden_size`).
    pub encoder: EncoderConfig,
    /// Groups of layer weights.
    pub num_hidden_groups: usize,
    /// Layers per group.
    pub inner_group_num: usize,
}

impl AlbertConfig {
    /// Read config.json with ALBERT's defaults.
    pub fn read(file: &ConfigFile) -> Result<AlbertConfig, ConfigError> {
        let c = AlbertConfig {
            encoder: EncoderConfig::read(file, &DEFAULTS)?,
            num_hidden_groups: file.positive("num_hidden_groups", 1)?,
            inner_group_num: file.positive("inner_group_num", 1)?,
        };
        let runs = c
            .encoder
            .num_hidden_layers
            .checked_mul(c.inner_group_num)
            .filter(|&r| r <= MAX_LAYER_RUNS);
        if runs.is_none() {
            return Err(file.invalid(Oversize::LayerRuns {
                layers: c.encoder.num_hidden_layers,
                inner_group_num: c.inner_group_num,
                max: MAX_LAYER_RUNS,
            }));
        }
        if c.num_hidden_groups > c.encoder.num_hidden_layers {
            return Err(file.invalid(ConfigProblem::TooMany {
                field: "num_hidden_groups",
                value: c.num_hidden_groups,
                limit: Limit::Field {
                    field: "num_hidden_layers",
                    value: c.encoder.num_hidden_layers,
                },
            }));
        }
        Ok(c)
    }

    /// Which weights (index `group · inner_group_num + inner`) each layer run uses, in order.
    pub fn schedule(&self) -> Vec<usize> {
        let (layers, groups) = (
            self.encoder.num_hidden_layers as f64,
            self.num_hidden_groups as f64,
        );
        (0..self.encoder.num_hidden_layers)
            .flat_map(|i| {
                // Python: int(i / (num_hidden_layers / num_hidden_groups)).
                let group = (i as f64 / (layers / groups)) as usize;
                (0..self.inner_group_num).map(move |j| group * self.inner_group_num + j)
            })
            .collect()
    }
}

/// ALBERT's embeddings: BERT's tables, projected to the hidden size by
/// `encoder.embedding_hidden_mapping_in`.
fn embedding_names() -> EmbeddingNames {
    EmbeddingNames {
        project: Some(Name::root().pp("encoder").pp("embedding_hidden_mapping_in")),
        ..EmbeddingNames::bert()
    }
}

/// The tensors of inner layer `inner` of layer group `group`
/// (`encoder.albert_layer_groups.{group}.albert_layers.{inner}.attention.query`, …).
fn layer_names(group: usize, inner: usize) -> LayerNames {
    let layer = Name::root()
        .pp("encoder")
        .pp("albert_layer_groups")
        .pp(group)
        .pp("albert_layers")
        .pp(inner);
    let attention = layer.pp("attention");
    LayerNames {
        query: attention.pp("query"),
        key: attention.pp("key"),
        value: attention.pp("value"),
        output: attention.pp("dense"),
        attention_norm: attention.pp("LayerNorm"),
        expand: layer.pp("ffn"),
        project: layer.pp("ffn_output"),
        output_norm: layer.pp("full_layer_layer_norm"),
    }
}

impl FamilyConfig for AlbertConfig {
    fn checks(&self) -> (Vec<ConfigDim>, Vec<ConfigCount>) {
        let c = &self.encoder;
        let dims = encoder_dims(c, &embedding_names(), &layer_names(0, 0));
        let counts = vec![
            ConfigCount::new(
                "num_hidden_groups",
                self.num_hidden_groups,
                "layer group",
                |g| layer_names(g, 0).query.weight(),
            ),
            ConfigCount::new(
                "inner_group_num",
                self.inner_group_num,
                "inner layer",
                |j| layer_names(0, j).query.weight(),
            ),
        ];
        (dims, counts)
    }

    fn build(&self, ckpt: &Checkpoint) -> Result<Box<dyn Network>, Error> {
        let c = &self.encoder;
        let embeddings = Embeddings::load(ckpt, &embedding_names(), c, Positions::Absolute)?;
        let mut layers = Vec::with_capacity(self.num_hidden_groups * self.inner_group_num);
        for g in 0..self.num_hidden_groups {
            for j in 0..self.inner_group_num {
                layers.push(EncoderLayer::load(ckpt, &layer_names(g, j), c)?);
            }
        }
        let schedule = self.schedule();
        Ok(Box::new(PostNormEncoder {
            // Pre-trained with segment ids (sentence-order prediction): the model gets them
            // whenever it has segment embeddings to tell two sentences apart, though
            // transformers 5's tokenizer no longer returns them.
            arch: encoder_architecture(
                FAMILY.name,
                "albert",
                c,
                schedule.len(),
                c.max_position_embeddings,
                c.type_vocab_size,
                c.type_vocab_size > 1,
            ),
            embeddings,
            layers,
            schedule,
            head: MlmHead::load(ckpt, &c.mlm_head(MLM_HEAD, c.hidden_act))?,
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

    fn read(text: &str) -> Result<AlbertConfig, String> {
        let file = ConfigFile::parse(text, Path::new("config.json")).unwrap();
        AlbertConfig::read(&file).map_err(|e| e.to_string())
    }

    #[test]
    fn groups_are_scheduled_as_transformers_does() {
        // tiny-albert-groups: 4 layers over 2 groups of 2 inner layers.
        let c = read(r#"{"num_hidden_layers": 4, "num_hidden_groups": 2, "inner_group_num": 2}"#)
            .unwrap();
        assert_eq!(c.schedule(), vec![0, 1, 0, 1, 2, 3, 2, 3]);
        // One shared layer (albert-base-v2, rxnmapper).
        let c = read(r#"{"num_hidden_layers": 12}"#).unwrap();
        assert_eq!(c.schedule(), vec![0; 12]);
        // Groups that do not divide the layers: Python's int(i / (12 / 5)).
        let c = read(r#"{"num_hidden_layers": 12, "num_hidden_groups": 5}"#).unwrap();
        assert_eq!(c.schedule(), vec![0, 0, 0, 1, 1, 2, 2, 2, 3, 3, 4, 4]);
    }

    #[test]
    fn defaults_and_bounds() {
        let c = read("{}").unwrap();
        assert_eq!(
            (
                c.encoder.embedding_size,
                c.encoder.hidden_size,
                c.encoder.vocab_size
            ),
            (128, 4096, 30000)
        );
        assert_eq!(c.encoder.hidden_act, crate::kernels::Activation::GeluTanh);
        let err = read(r#"{"num_hidden_layers": 1000000000000}"#).unwrap_err();
        assert!(err.contains("more than 1024 layer runs"), "{err}");
        let err = read(r#"{"num_hidden_layers": 2, "num_hidden_groups": 3}"#).unwrap_err();
        assert!(
            err.contains("num_hidden_groups 3 is more than num_hidden_layers 2"),
            "{err}"
        );
    }
}
