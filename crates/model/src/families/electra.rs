//! ELECTRA's discriminator (Clark et al. 2020): BERT's tensors and layers, with embeddings of
//! `embedding_size` projected to `hidden_size` by `embeddings_project` when the two differ.
//! Mirrors transformers' `models/electra/modeling_electra.py` (`ElectraModel`): the embedding
//! LayerNorm runs at the embedding width, before the projection.

use crate::blocks::encoder::{
    encoder_architecture, plain_schedule, EmbeddingNames, Embeddings, EncoderConfig,
    EncoderDefaults, EncoderNames, PostNormEncoder,
};
use crate::blocks::family::{Family, FamilyConfig, Quirks};
use crate::blocks::mlm_head::{MlmHead, MlmHeadNames};
use crate::blocks::network::Network;
use crate::error::Error;
use crate::formats::config::{ConfigError, ConfigFile};
use crate::formats::tensors::Name;
use crate::formats::validate::{ConfigCount, ConfigDim};
use crate::formats::weights::{Anchor, Checkpoint};
use crate::kernels::positions::Positions;
use crate::kernels::Activation;

/// The generator's head (`ElectraForMaskedLM`): `generator_predictions.dense` from the hidden
/// size to `embedding_size`, GELU (erf, whatever `hidden_act` says),
/// `generator_predictions.LayerNorm`, then `generator_lm_head` (tied to the word embeddings)
/// with its bias. The discriminator (`ElectraForPreTraining`) has no masked-LM head.
pub const MLM_HEAD: MlmHeadNames = MlmHeadNames {
    dense: "generator_predictions.dense",
    norm: "generator_predictions.LayerNorm",
    decoder: "generator_lm_head",
    bias: &["generator_lm_head.bias"],
};

/// ELECTRA in the family registry.
pub static FAMILY: Family = Family {
    name: "ELECTRA",
    model_types: &["electra"],
    class_prefixes: &["Electra"],
    anchor: Anchor {
        tensor: "embeddings.word_embeddings.weight",
        family: "ELECTRA",
        prefix: "electra",
    },
    config: |file| Ok(Box::new(ElectraConfig::read(file)?)),
    quirks: Quirks::NONE,
};

/// transformers' `ElectraConfig` defaults.
const DEFAULTS: EncoderDefaults = EncoderDefaults {
    vocab_size: 30522,
    hidden_size: 256,
    embedding_size: Some(128),
    num_hidden_layers: 12,
    num_attention_heads: 4,
    intermediate_size: 1024,
    hidden_act: "gelu",
    max_position_embeddings: 512,
    type_vocab_size: 2,
    layer_norm_eps: 1e-12,
    pad_token_id: Some(0),
};

/// An ELECTRA config.
#[derive(Clone, Debug, PartialEq)]
pub struct ElectraConfig(pub EncoderConfig);

impl ElectraConfig {
    /// Read config.json with ELECTRA's defaults.
    pub fn read(file: &ConfigFile) -> Result<ElectraConfig, ConfigError> {
        EncoderConfig::read(file, &DEFAULTS).map(ElectraConfig)
    }

    fn projects(&self) -> bool {
        self.0.embedding_size != self.0.hidden_size
    }

    /// The projection from the embedding width to the hidden size, where the widths differ.
    fn projection(&self) -> Option<Name> {
        self.projects()
            .then(|| Name::root().pp("embeddings_project"))
    }
}

impl FamilyConfig for ElectraConfig {
    fn checks(&self) -> (Vec<ConfigDim>, Vec<ConfigCount>) {
        EncoderNames::BERT.checks(&self.0, self.projection().as_ref())
    }

    fn build(&self, ckpt: &Checkpoint) -> Result<Box<dyn Network>, Error> {
        let c = &self.0;
        let names = EncoderNames::BERT;
        let embeddings = EmbeddingNames {
            project: self.projection(),
            ..(names.embeddings)()
        };
        Ok(Box::new(PostNormEncoder {
            arch: encoder_architecture(
                FAMILY.name,
                "electra",
                c,
                c.num_hidden_layers,
                c.max_position_embeddings,
                c.type_vocab_size,
                true,
            ),
            embeddings: Embeddings::load(ckpt, &embeddings, c, Positions::Absolute)?,
            layers: names.layers(ckpt, c)?,
            schedule: plain_schedule(c.num_hidden_layers),
            head: MlmHead::load(ckpt, &c.mlm_head(MLM_HEAD, Activation::GeluErf))?,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn the_anchor_is_a_tensor_of_the_table() {
        assert_eq!(FAMILY.anchor.tensor, EmbeddingNames::bert().word.weight());
    }

    #[test]
    fn projects_only_when_the_widths_differ() {
        let read = |t: &str| {
            ElectraConfig::read(&ConfigFile::parse(t, Path::new("c.json")).unwrap()).unwrap()
        };
        // google/electra-small-discriminator: embedding 128, hidden 256.
        let small =
            read(r#"{"embedding_size": 128, "hidden_size": 256, "num_attention_heads": 4}"#);
        assert!(small.projects());
        // electra-base: both 768.
        let base =
            read(r#"{"embedding_size": 768, "hidden_size": 768, "num_attention_heads": 12}"#);
        assert!(!base.projects());
        assert_eq!(read("{}").0.embedding_size, 128);
    }
}
