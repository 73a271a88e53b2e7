//! The model-family seam: every family (BERT, RoBERTa, ALBERT, …) is one file behind the
//! [`Network`] trait, listed once in [`FAMILIES`] and chosen by config.json's `model_type`.
//!
//! Loading goes the same way for every family (`load`):
//! 1. config.json's `model_type` (or, in configs older than transformers 2, the class names in
//!    `architectures`) picks the [`Family`]; anything else is refused with one line listing the
//!    supported types;
//! 2. the family reads its own fields ([`Family::config`]), with transformers' defaults;
//! 3. the checkpoint is opened, its key prefix found from the family's [`Anchor`];
//! 4. the config values that size tensors are checked against the checkpoint before anything
//!    is allocated ([`FamilyConfig::checks`], [`validate::config_matches`]);
//! 5. the family builds its network from named tensors ([`FamilyConfig::build`]), read in place
//!    from the memory map where the file allows, each checked to be finite.
//!
//! The rest of the pipeline sees only [`Architecture`] (the numbers a caller needs: layers,
//! heads, key/value heads and the head map, mask, limits) and [`Network::forward`].

use std::path::PathBuf;

use super::{albert, bart, bert, distilbert, electra, gpt2, llama, roberta, t5};
use crate::model::blocks::family::Family;
use crate::model::blocks::network::Network;
use crate::model::error::Error;
use crate::model::formats::config::{ConfigError, ConfigFile};
use crate::model::formats::validate;
use crate::model::formats::weights::Checkpoint;

/// The families attnviz runs, in the order `--help` and errors list them. Adding a family: its
/// file, one line here, and its tests (`docs/architecture.md` has the checklist).
pub static FAMILIES: &[&Family] = &[
    &bert::FAMILY,
    &roberta::ROBERTA,
    &roberta::XLM_ROBERTA,
    &distilbert::FAMILY,
    &albert::FAMILY,
    &electra::FAMILY,
    &gpt2::FAMILY,
    &llama::LLAMA,
    &llama::QWEN2,
    &llama::MISTRAL,
    &bart::BART,
    &bart::MBART,
    &bart::MARIAN,
    &t5::FAMILY,
];

/// The family config.json describes.
pub fn family_of(config: &ConfigFile) -> Result<&'static Family, ConfigError> {
    let supported = || {
        FAMILIES
            .iter()
            .flat_map(|f| f.model_types.iter().copied())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match config.model_type()? {
        Some(t) => FAMILIES
            .iter()
            .copied()
            .find(|f| f.model_types.contains(&t.as_str()))
            .ok_or_else(|| {
                config.unsupported(format!(
                    "model_type '{t}' is not supported; attnviz runs model types {}",
                    supported()
                ))
            }),
        None => {
            // Configs written before transformers 2.x have no model_type: the class names say
            // which family, and a file that names none is a BERT config.
            let classes = config.architectures()?;
            if classes.is_empty() {
                return Ok(&bert::FAMILY);
            }
            FAMILIES
                .iter()
                .copied()
                .find(|f| {
                    classes
                        .iter()
                        .all(|c| f.class_prefixes.iter().any(|p| c.starts_with(p)))
                })
                .ok_or_else(|| {
                    config.unsupported(format!(
                        "it has no model_type, and architectures {classes:?} name no supported family; attnviz runs model types {}",
                        supported()
                    ))
                })
        }
    }
}

/// Load the network described by `config` from the checkpoint `weights`, following the steps
/// in the module documentation.
pub fn load(config: &std::path::Path, weights: &[PathBuf]) -> Result<Box<dyn Network>, Error> {
    let file = ConfigFile::load(config)?;
    let family = family_of(&file)?;
    let family_config = (family.config)(&file)?;
    let ckpt = Checkpoint::open(weights, &family.anchor)?;
    let (dims, counts) = family_config.checks();
    validate::config_matches(config, &ckpt, &dims, &counts)?;
    family_config.build(&ckpt)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn family(text: &str) -> Result<&'static str, String> {
        let c = ConfigFile::parse(text, Path::new("config.json")).unwrap();
        family_of(&c).map(|f| f.name).map_err(|e| e.to_string())
    }

    #[test]
    fn model_type_picks_the_family() {
        assert_eq!(family(r#"{"model_type": "bert"}"#).unwrap(), "BERT");
        assert_eq!(family(r#"{"model_type": "roberta"}"#).unwrap(), "RoBERTa");
        assert_eq!(
            family(r#"{"model_type": "xlm-roberta"}"#).unwrap(),
            "XLM-RoBERTa"
        );
        assert_eq!(
            family(r#"{"model_type": "distilbert"}"#).unwrap(),
            "DistilBERT"
        );
        assert_eq!(family(r#"{"model_type": "albert"}"#).unwrap(), "ALBERT");
        assert_eq!(family(r#"{"model_type": "electra"}"#).unwrap(), "ELECTRA");
        assert_eq!(family(r#"{"model_type": "gpt2"}"#).unwrap(), "GPT-2");
        assert_eq!(family(r#"{"model_type": "llama"}"#).unwrap(), "Llama");
        assert_eq!(family(r#"{"model_type": "qwen2"}"#).unwrap(), "Qwen2");
        assert_eq!(family(r#"{"model_type": "mistral"}"#).unwrap(), "Mistral");
    }

    #[test]
    fn old_configs_are_recognised_by_class_name() {
        assert_eq!(
            family(r#"{"architectures": ["BertModel"]}"#).unwrap(),
            "BERT"
        );
        assert_eq!(family(r#"{"hidden_size": 64}"#).unwrap(), "BERT");
        assert_eq!(
            family(r#"{"architectures": ["AlbertForMaskedLM"]}"#).unwrap(),
            "ALBERT"
        );
        assert_eq!(
            family(r#"{"architectures": ["DistilBertForMaskedLM"]}"#).unwrap(),
            "DistilBERT"
        );
        assert_eq!(
            family(r#"{"architectures": ["GPT2LMHeadModel"]}"#).unwrap(),
            "GPT-2"
        );
        assert_eq!(
            family(r#"{"architectures": ["T5ForConditionalGeneration"]}"#).unwrap(),
            "T5"
        );
        let err = family(r#"{"architectures": ["WhisperForConditionalGeneration"]}"#).unwrap_err();
        assert!(err.contains("name no supported family"), "{err}");
    }

    #[test]
    fn unsupported_types_get_one_line_listing_the_supported_ones() {
        assert_eq!(family(r#"{"model_type": "t5"}"#).unwrap(), "T5");
        assert_eq!(family(r#"{"model_type": "mbart"}"#).unwrap(), "mBART");
        let err = family(r#"{"model_type": "whisper"}"#).unwrap_err();
        assert!(
            err.contains(
                "model_type 'whisper' is not supported; attnviz runs model types bert, roberta, \
                 xlm-roberta, distilbert, albert, electra, gpt2, llama, qwen2, mistral, bart, \
                 mbart, marian, t5"
            ),
            "{err}"
        );
        assert!(!err.contains('\n'));
    }
}
