//! ALBERT (Lan et al. 2020): factorised embeddings (`embedding_size` projected to
//! `hidden_size`) and layer weights shared across depth. Mirrors transformers'
//! `models/albert/modeling_albert.py` (`AlbertModel`).
//!
//! Sharing: the weights come in `num_hidden_groups` groups of `inner_group_num` layers each. Hidden
//! layer `i` (of `num_hidden_layers`) runs group `⌊i / (num_hidden_layers / num_hidden_groups)⌋`
//! (a float division, as `AlbertTransformer` computes it), that is all of the group's inner
//! layers in turn. Every inner layer run is one captured attention map, as transformers returns
//! them: `num_hidden_layers × inner_group_num` maps per input.

use crate::model::blocks::encoder::{
    encoder_architecture, Embeddings, EncoderConfig, EncoderDefaults, EncoderLayer, LayerNames,
    PostNormEncoder,
};
use crate::model::blocks::family::{Family, FamilyConfig, Quirks};
use crate::model::blocks::layers::{Linear, Norm};
use crate::model::blocks::network::Network;
use crate::model::error::Error;
use crate::model::formats::config::{ConfigError, ConfigFile};
use crate::model::formats::validate::{ConfigCount, ConfigDim};
use crate::model::formats::weights::{Anchor, Checkpoint};
use crate::model::kernels::positions::Positions;

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
            return Err(file.invalid(format!(
                "num_hidden_layers {} × inner_group_num {} is more than {MAX_LAYER_RUNS} layer runs",
                c.encoder.num_hidden_layers, c.inner_group_num
            )));
        }
        if c.num_hidden_groups > c.encoder.num_hidden_layers {
            return Err(file.invalid(format!(
                "num_hidden_groups {} is more than num_hidden_layers {}",
                c.num_hidden_groups, c.encoder.num_hidden_layers
            )));
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

fn layer_names(group: usize, inner: usize) -> LayerNames {
    let p = format!("encoder.albert_layer_groups.{group}.albert_layers.{inner}");
    LayerNames {
        query: format!("{p}.attention.query"),
        key: format!("{p}.attention.key"),
        value: format!("{p}.attention.value"),
        output: format!("{p}.attention.dense"),
        attention_norm: format!("{p}.attention.LayerNorm"),
        expand: format!("{p}.ffn"),
        project: format!("{p}.ffn_output"),
        output_norm: format!("{p}.full_layer_layer_norm"),
    }
}

impl FamilyConfig for AlbertConfig {
    fn checks(&self) -> (Vec<ConfigDim>, Vec<ConfigCount>) {
        let c = &self.encoder;
        let dim = |field, value, tensor: &str, axis| ConfigDim {
            field,
            value,
            tensor: tensor.to_string(),
            axis,
        };
        let first = "encoder.albert_layer_groups.0.albert_layers.0";
        let dims = vec![
            dim(
                "vocab_size",
                c.vocab_size,
                "embeddings.word_embeddings.weight",
                0,
            ),
            dim(
                "embedding_size",
                c.embedding_size,
                "embeddings.word_embeddings.weight",
                1,
            ),
            dim(
                "max_position_embeddings",
                c.max_position_embeddings,
                "embeddings.position_embeddings.weight",
                0,
            ),
            dim(
                "type_vocab_size",
                c.type_vocab_size,
                "embeddings.token_type_embeddings.weight",
                0,
            ),
            dim(
                "hidden_size",
                c.hidden_size,
                "encoder.embedding_hidden_mapping_in.weight",
                0,
            ),
            dim(
                "intermediate_size",
                c.intermediate_size,
                &format!("{first}.ffn.weight"),
                0,
            ),
        ];
        let counts = vec![
            ConfigCount {
                field: "num_hidden_groups",
                value: self.num_hidden_groups,
                block: "layer group",
                tensor: |g| {
                    format!(
                        "encoder.albert_layer_groups.{g}.albert_layers.0.attention.query.weight"
                    )
                },
            },
            ConfigCount {
                field: "inner_group_num",
                value: self.inner_group_num,
                block: "inner layer",
                tensor: |j| {
                    format!(
                        "encoder.albert_layer_groups.0.albert_layers.{j}.attention.query.weight"
                    )
                },
            },
        ];
        (dims, counts)
    }

    fn build(&self, ckpt: &Checkpoint) -> Result<Box<dyn Network>, Error> {
        let c = &self.encoder;
        let e = c.embedding_size;
        let embeddings = Embeddings {
            word: ckpt.weight("embeddings.word_embeddings.weight", &[c.vocab_size, e])?,
            position: Some(ckpt.weight(
                "embeddings.position_embeddings.weight",
                &[c.max_position_embeddings, e],
            )?),
            positions: Positions::Absolute,
            token_type: Some(ckpt.weight(
                "embeddings.token_type_embeddings.weight",
                &[c.type_vocab_size, e],
            )?),
            norm: Norm::layer(ckpt, "embeddings.LayerNorm", e, c.layer_norm_eps)?,
            project: Some(Linear::load(
                ckpt,
                "encoder.embedding_hidden_mapping_in",
                e,
                c.hidden_size,
            )?),
        };
        let mut layers = Vec::with_capacity(self.num_hidden_groups * self.inner_group_num);
        for g in 0..self.num_hidden_groups {
            for j in 0..self.inner_group_num {
                layers.push(EncoderLayer::load(
                    ckpt,
                    &layer_names(g, j),
                    c.hidden_size,
                    c.intermediate_size,
                    c.hidden_act,
                    c.layer_norm_eps,
                )?);
            }
        }
        let schedule = self.schedule();
        Ok(Box::new(PostNormEncoder {
            arch: encoder_architecture(
                FAMILY.name,
                "albert",
                c,
                schedule.len(),
                c.max_position_embeddings,
                c.type_vocab_size,
                false,
            ),
            embeddings,
            layers,
            schedule,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

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
        assert_eq!(
            c.encoder.hidden_act,
            crate::model::kernels::Activation::GeluTanh
        );
        let err = read(r#"{"num_hidden_layers": 1000000000000}"#).unwrap_err();
        assert!(err.contains("more than 1024 layer runs"), "{err}");
        let err = read(r#"{"num_hidden_layers": 2, "num_hidden_groups": 3}"#).unwrap_err();
        assert!(
            err.contains("num_hidden_groups 3 is more than num_hidden_layers 2"),
            "{err}"
        );
    }
}
