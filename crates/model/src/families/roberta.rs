//! RoBERTa (Liu et al. 2019) and XLM-RoBERTa (Conneau et al. 2020): BERT's tensor names
//! (`EncoderNames::BERT`) and layers,
//! with positions offset past the padding row. Mirrors transformers'
//! `models/roberta/modeling_roberta.py` and `models/xlm_roberta/modeling_xlm_roberta.py`, which
//! are the same network.
//!
//! Positions: token `i` of a sequence without padding reads row `padding_idx + 1 + i` of the
//! position table (`create_position_ids_from_input_ids`), so the table has two rows more than
//! the longest input (514 for roberta-base's 512 tokens). Token types: the tokenizer gives none
//! (`type_vocab_size` is 1), so every token reads type row 0.

use crate::blocks::encoder::{
    encoder_architecture, plain_schedule, Embeddings, EncoderConfig, EncoderDefaults, EncoderNames,
    PostNormEncoder,
};
use crate::blocks::family::{Family, FamilyConfig, Quirks};
use crate::blocks::mlm_head::{MlmHead, MlmHeadNames};
use crate::blocks::network::Network;
use crate::error::Error;
use crate::formats::config::{ConfigError, ConfigFile, ConfigProblem};
use crate::formats::validate::{ConfigCount, ConfigDim};
use crate::formats::weights::{Anchor, Checkpoint};
use crate::kernels::positions::Positions;
use crate::kernels::Activation;

/// `RobertaForMaskedLM`'s and `XLMRobertaForMaskedLM`'s head (`RobertaLMHead`): `lm_head.dense`,
/// GELU (erf, whatever `hidden_act` says), `lm_head.layer_norm`, then the decoder (tied to the
/// word embeddings) with `lm_head.bias`.
pub const MLM_HEAD: MlmHeadNames = MlmHeadNames {
    dense: "lm_head.dense",
    norm: "lm_head.layer_norm",
    decoder: "lm_head.decoder",
    bias: &["lm_head.bias", "lm_head.decoder.bias"],
};

/// RoBERTa in the family registry.
pub static ROBERTA: Family = Family {
    name: "RoBERTa",
    model_types: &["roberta"],
    class_prefixes: &["Roberta"],
    anchor: Anchor {
        tensor: "embeddings.word_embeddings.weight",
        family: "RoBERTa",
        prefix: "roberta",
    },
    config: |file| Ok(Box::new(RobertaConfig::read(file, Variant::Roberta)?)),
    quirks: Quirks::NONE,
};

/// XLM-RoBERTa in the family registry.
pub static XLM_ROBERTA: Family = Family {
    name: "XLM-RoBERTa",
    model_types: &["xlm-roberta"],
    class_prefixes: &["XLMRoberta"],
    anchor: Anchor {
        tensor: "embeddings.word_embeddings.weight",
        family: "XLM-RoBERTa",
        prefix: "roberta",
    },
    config: |file| Ok(Box::new(RobertaConfig::read(file, Variant::XlmRoberta)?)),
    quirks: Quirks::NONE,
};

/// Which of the two configs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// `roberta`.
    Roberta,
    /// `xlm-roberta`.
    XlmRoberta,
}

impl Variant {
    fn family(self) -> &'static Family {
        match self {
            Variant::Roberta => &ROBERTA,
            Variant::XlmRoberta => &XLM_ROBERTA,
        }
    }

    fn model_type(self) -> &'static str {
        self.family().model_types[0]
    }

    /// transformers' `RobertaConfig` and `XLMRobertaConfig` defaults (they differ only in the
    /// vocabulary size).
    fn defaults(self) -> EncoderDefaults {
        EncoderDefaults {
            vocab_size: match self {
                Variant::Roberta => 50265,
                Variant::XlmRoberta => 30522,
            },
            hidden_size: 768,
            embedding_size: None,
            num_hidden_layers: 12,
            num_attention_heads: 12,
            intermediate_size: 3072,
            hidden_act: "gelu",
            max_position_embeddings: 512,
            type_vocab_size: 2,
            layer_norm_eps: 1e-12,
            pad_token_id: Some(1),
        }
    }
}

/// A RoBERTa or XLM-R config.
#[derive(Clone, Debug, PartialEq)]
pub struct RobertaConfig {
    /// The encoder's fields.
    pub encoder: EncoderConfig,
    /// The padding id, which is also the padding row of the position table.
    pub padding_idx: u32,
    /// Which config it is.
    pub variant: Variant,
}

impl RobertaConfig {
    /// Read config.json with the variant's defaults.
    pub fn read(file: &ConfigFile, variant: Variant) -> Result<RobertaConfig, ConfigError> {
        let encoder = EncoderConfig::read(file, &variant.defaults())?;
        let padding_idx = encoder
            .pad_token_id
            .ok_or_else(|| file.invalid(ConfigProblem::NoPaddingToken))?;
        if encoder.max_position_embeddings <= padding_idx as usize + 1 {
            return Err(file.invalid(ConfigProblem::NoPositionAfterPadding {
                max_position_embeddings: encoder.max_position_embeddings,
                pad_token_id: padding_idx,
            }));
        }
        Ok(RobertaConfig {
            encoder,
            padding_idx,
            variant,
        })
    }

    fn positions(&self) -> Positions {
        Positions::PaddingOffset {
            padding_idx: self.padding_idx,
        }
    }
}

impl FamilyConfig for RobertaConfig {
    fn checks(&self) -> (Vec<ConfigDim>, Vec<ConfigCount>) {
        EncoderNames::BERT.checks(&self.encoder, None)
    }

    fn build(&self, ckpt: &Checkpoint) -> Result<Box<dyn Network>, Error> {
        let c = &self.encoder;
        let names = EncoderNames::BERT;
        let positions = self.positions();
        Ok(Box::new(PostNormEncoder {
            arch: encoder_architecture(
                self.variant.family().name,
                self.variant.model_type(),
                c,
                c.num_hidden_layers,
                c.max_position_embeddings - positions.offset(),
                c.type_vocab_size,
                false,
            ),
            embeddings: Embeddings::load(ckpt, &(names.embeddings)(), c, positions)?,
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
        assert_eq!(
            ROBERTA.anchor.tensor,
            (EncoderNames::BERT.embeddings)().word.weight()
        );
        assert_eq!(
            XLM_ROBERTA.anchor.tensor,
            (EncoderNames::BERT.embeddings)().word.weight()
        );
    }

    fn p(text: &str, v: Variant) -> Result<RobertaConfig, ConfigError> {
        RobertaConfig::read(&ConfigFile::parse(text, Path::new("config.json"))?, v)
    }

    #[test]
    fn defaults_follow_transformers() {
        let r = p(r#"{"model_type": "roberta"}"#, Variant::Roberta).unwrap();
        assert_eq!((r.encoder.vocab_size, r.padding_idx), (50265, 1));
        let x = p(r#"{"model_type": "xlm-roberta"}"#, Variant::XlmRoberta).unwrap();
        assert_eq!((x.encoder.vocab_size, x.padding_idx), (30522, 1));
        // roberta-base: 514 rows for 512 tokens.
        let base = p(
            r#"{"model_type": "roberta", "max_position_embeddings": 514, "type_vocab_size": 1,
                "layer_norm_eps": 1e-05, "pad_token_id": 1}"#,
            Variant::Roberta,
        )
        .unwrap();
        assert_eq!(
            base.encoder.max_position_embeddings - base.positions().offset(),
            512
        );
    }

    #[test]
    fn refuses_a_table_without_room_for_tokens() {
        let err = p(
            r#"{"max_position_embeddings": 2, "pad_token_id": 1}"#,
            Variant::Roberta,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("leaves no position for a token"), "{err}");
        let err = p(r#"{"pad_token_id": null}"#, Variant::Roberta);
        // null takes the default (1), as transformers does for a missing field.
        assert!(err.is_ok());
    }
}
