//! BERT (Devlin et al. 2019): word + position + token type embeddings, then post-LN encoder
//! layers. Mirrors transformers' `models/bert/modeling_bert.py` (`BertModel`).
//!
//! Its tensor names (`encoder.layer.N.attention.self.query`, …), which RoBERTa, XLM-R and
//! ELECTRA checkpoints share, are the shared encoder's `EncoderNames::BERT`.

use crate::blocks::encoder::{
    encoder_architecture, plain_schedule, Embeddings, EncoderConfig, EncoderDefaults, EncoderNames,
    PostNormEncoder,
};
use crate::blocks::family::{Family, FamilyConfig, Quirks};
use crate::blocks::mlm_head::{MlmHead, MlmHeadNames};
use crate::blocks::network::Network;
use crate::error::Error;
use crate::formats::config::{ConfigError, ConfigFile};
use crate::formats::validate::{ConfigCount, ConfigDim};
use crate::formats::weights::{Anchor, Checkpoint};
use crate::kernels::positions::Positions;

/// BERT in the family registry.
pub static FAMILY: Family = Family {
    name: "BERT",
    model_types: &["bert"],
    class_prefixes: &["Bert"],
    anchor: Anchor {
        tensor: "embeddings.word_embeddings.weight",
        family: "BERT",
        prefix: "bert",
    },
    config: |file| Ok(Box::new(BertConfig::read(file)?)),
    quirks: Quirks::NONE,
};

/// `BertForMaskedLM`'s head (`BertLMPredictionHead`): `cls.predictions.transform.dense`, the
/// config's `hidden_act`, `transform.LayerNorm`, then the decoder (tied to the word embeddings)
/// with `cls.predictions.bias`.
pub const MLM_HEAD: MlmHeadNames = MlmHeadNames {
    dense: "cls.predictions.transform.dense",
    norm: "cls.predictions.transform.LayerNorm",
    decoder: "cls.predictions.decoder",
    bias: &["cls.predictions.bias", "cls.predictions.decoder.bias"],
};

/// transformers' `BertConfig` defaults.
const DEFAULTS: EncoderDefaults = EncoderDefaults {
    vocab_size: 30522,
    hidden_size: 768,
    embedding_size: None,
    num_hidden_layers: 12,
    num_attention_heads: 12,
    intermediate_size: 3072,
    hidden_act: "gelu",
    max_position_embeddings: 512,
    type_vocab_size: 2,
    layer_norm_eps: 1e-12,
    pad_token_id: Some(0),
};

/// The shape and settings of a BERT encoder.
#[derive(Clone, Debug, PartialEq)]
pub struct BertConfig(pub EncoderConfig);

impl BertConfig {
    /// Read config.json with BERT's defaults.
    pub fn read(file: &ConfigFile) -> Result<BertConfig, ConfigError> {
        EncoderConfig::read(file, &DEFAULTS).map(BertConfig)
    }
}

impl FamilyConfig for BertConfig {
    fn checks(&self) -> (Vec<ConfigDim>, Vec<ConfigCount>) {
        EncoderNames::BERT.checks(&self.0, None)
    }

    fn build(&self, ckpt: &Checkpoint) -> Result<Box<dyn Network>, Error> {
        let c = &self.0;
        let names = EncoderNames::BERT;
        Ok(Box::new(PostNormEncoder {
            arch: encoder_architecture(
                FAMILY.name,
                "bert",
                c,
                c.num_hidden_layers,
                c.max_position_embeddings,
                c.type_vocab_size,
                true,
            ),
            embeddings: Embeddings::load(ckpt, &(names.embeddings)(), c, Positions::Absolute)?,
            layers: names.layers(ckpt, c)?,
            schedule: plain_schedule(c.num_hidden_layers),
            head: MlmHead::load(ckpt, &c.mlm_head(MLM_HEAD, c.hidden_act))?,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::Activation;

    #[test]
    fn the_anchor_is_a_tensor_of_the_table() {
        assert_eq!(
            FAMILY.anchor.tensor,
            crate::blocks::encoder::EmbeddingNames::bert().word.weight()
        );
    }

    use std::path::Path;

    fn p(text: &str) -> Result<EncoderConfig, ConfigError> {
        let file = ConfigFile::parse(text, Path::new("config.json"))?;
        BertConfig::read(&file).map(|c| c.0)
    }

    /// bert-base-uncased's config.json as the hub serves it (transformers 4.x era).
    const BERT_BASE_4X: &str = r#"{
      "architectures": ["BertForMaskedLM"], "attention_probs_dropout_prob": 0.1,
      "gradient_checkpointing": false, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
      "hidden_size": 768, "initializer_range": 0.02, "intermediate_size": 3072,
      "layer_norm_eps": 1e-12, "max_position_embeddings": 512, "model_type": "bert",
      "num_attention_heads": 12, "num_hidden_layers": 12, "pad_token_id": 0,
      "position_embedding_type": "absolute", "transformers_version": "4.6.0.dev0",
      "type_vocab_size": 2, "use_cache": true, "vocab_size": 30522, "torch_dtype": "float32"
    }"#;

    #[test]
    fn reads_transformers_4x() {
        let cfg = p(BERT_BASE_4X).unwrap();
        assert_eq!(cfg.hidden_size, 768);
        assert_eq!(cfg.num_hidden_layers, 12);
        assert_eq!(cfg.head_dim(), 64);
        assert_eq!(cfg.hidden_act, Activation::GeluErf);
        assert_eq!(cfg.layer_norm_eps, 1e-12);
        assert_eq!(cfg.embedding_size, 768);
    }

    #[test]
    fn reads_transformers_5x_with_nulls() {
        // As transformers 5 writes it: `dtype` instead of `torch_dtype`, explicit nulls.
        let cfg = p(r#"{
          "architectures": ["BertModel"], "attention_probs_dropout_prob": 0.1,
          "bos_token_id": null, "classifier_dropout": null, "dtype": "float32",
          "eos_token_id": null, "hidden_act": "gelu", "hidden_size": 32,
          "intermediate_size": 37, "layer_norm_eps": 1e-12, "max_position_embeddings": 64,
          "model_type": "bert", "num_attention_heads": 4, "num_hidden_layers": 2,
          "pad_token_id": 0, "position_embedding_type": null, "tie_word_embeddings": true,
          "transformers_version": "5.0.0", "type_vocab_size": 2, "use_cache": true,
          "vocab_size": 99
        }"#)
        .unwrap();
        assert_eq!(
            (
                cfg.hidden_size,
                cfg.num_attention_heads,
                cfg.intermediate_size,
                cfg.vocab_size
            ),
            (32, 4, 37, 99)
        );
        assert_eq!(cfg.max_position_embeddings, 64);
    }

    #[test]
    fn fills_missing_fields_with_bert_defaults() {
        let cfg =
            p(r#"{"model_type": "bert", "hidden_size": 64, "num_attention_heads": 2}"#).unwrap();
        assert_eq!(cfg.num_hidden_layers, 12);
        assert_eq!(cfg.max_position_embeddings, 512);
        assert_eq!(cfg.type_vocab_size, 2);
        assert_eq!(cfg.vocab_size, 30522);
    }

    #[test]
    fn rejects_relative_positions() {
        let err = p(r#"{"model_type": "bert", "position_embedding_type": "relative_key"}"#)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("position_embedding_type 'relative_key' is not supported"),
            "{err}"
        );
    }

    #[test]
    fn activations() {
        let act = |a: &str| p(&format!(r#"{{"model_type": "bert", "hidden_act": "{a}"}}"#));
        assert_eq!(act("gelu_new").unwrap().hidden_act, Activation::GeluTanh);
        assert_eq!(
            act("gelu_pytorch_tanh").unwrap().hidden_act,
            Activation::GeluTanh
        );
        assert_eq!(act("relu").unwrap().hidden_act, Activation::Relu);
        let err = act("quick_gelu").unwrap_err().to_string();
        assert!(
            err.contains("hidden_act 'quick_gelu' is not supported"),
            "{err}"
        );
        assert!(!err.contains('\n'));
    }

    #[test]
    fn rejects_indivisible_heads() {
        let err = p(r#"{"model_type": "bert", "hidden_size": 100, "num_attention_heads": 12}"#)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("hidden_size 100 is not divisible by num_attention_heads 12"),
            "{err}"
        );
    }

    #[test]
    fn rejects_decoders_factorised_embeddings_and_bad_values() {
        assert!(p(r#"{"model_type": "bert", "is_decoder": true}"#)
            .unwrap_err()
            .to_string()
            .contains("decoder"));
        assert!(p(r#"{"model_type": "bert", "num_attention_heads": 0}"#)
            .unwrap_err()
            .to_string()
            .contains("num_attention_heads is 0"));
        assert!(p(r#"{"model_type": "bert", "hidden_size": "big"}"#)
            .unwrap_err()
            .to_string()
            .contains("not a valid model config"));
        let err = p(r#"{"model_type": "bert", "embedding_size": 128}"#)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("embedding_size 128 differs from hidden_size 768"),
            "{err}"
        );
    }
}
