//! The registry: the one list of the families attnviz runs ([`FAMILIES`]), and the lookups
//! over it. It is only a table; each family is a file of its own behind the seam of
//! [`crate::blocks::family`] and [`crate::blocks::network`].
//!
//! Loading goes the same way for every family ([`load`]):
//! 1. config.json's `model_type` (or, in configs older than transformers 2, the class names in
//!    `architectures`) picks the [`Family`]; anything else is refused with one line listing the
//!    supported types;
//! 2. the family reads its own fields (`Family::config`), with transformers' defaults;
//! 3. the checkpoint is opened, its key prefix found from the family's anchor;
//! 4. the config values that size tensors are checked against the checkpoint before anything
//!    is allocated (`FamilyConfig::checks`, [`validate::config_matches`]);
//! 5. the family builds its network from named tensors (`FamilyConfig::build`), read in place
//!    from the memory map where the file allows, each checked to be finite.
//!
//! The rest of the pipeline sees only the network's `Architecture` and its `forward`, and the
//! family's quirks as data.

use std::path::{Path, PathBuf};

use super::{
    albert, bart, bert, clip, deepseek, dinov2, distilbert, electra, gemma, gpt2, gpt_oss,
    idefics3, llama, llava, paligemma, phi3, qwen2_5_vl, qwen3_5, qwen3_next, roberta, siglip, t5,
    vit, whisper,
};
use crate::blocks::family::{Family, GgufReader};
use crate::blocks::network::Network;
use crate::error::Error;
use crate::formats::config::{ConfigError, ConfigFile, FieldValue, Instead, Unsupported};
use crate::formats::ctranslate2::{Ct2Error, Ct2Model, Ct2Reader};
use crate::formats::source::{TokenizerFiles, TOKENIZERS};
use crate::formats::validate;
use crate::formats::weights::Checkpoint;

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
    &llama::QWEN3,
    &llama::MISTRAL,
    &llama::SMOLLM3,
    &llama::MIXTRAL,
    &llama::QWEN3_MOE,
    &llama::OLMOE,
    &gpt_oss::GPT_OSS,
    &deepseek::DEEPSEEK_V2,
    &deepseek::DEEPSEEK_V3,
    &qwen3_next::QWEN3_NEXT,
    &qwen3_5::QWEN3_5,
    &qwen3_5::QWEN3_5_MOE,
    &gemma::GEMMA,
    &gemma::GEMMA2,
    &gemma::GEMMA3,
    &phi3::PHI3,
    &bart::BART,
    &bart::MBART,
    &bart::MARIAN,
    &t5::FAMILY,
    &vit::VIT,
    &vit::DEIT,
    &dinov2::DINOV2,
    &dinov2::DINOV2_REGISTERS,
    &clip::CLIP_VISION,
    &siglip::SIGLIP_VISION,
    &llava::LLAVA,
    &paligemma::PALIGEMMA,
    &idefics3::IDEFICS3,
    &qwen2_5_vl::QWEN2_5_VL,
    &qwen2_5_vl::QWEN2_VL,
    &whisper::WHISPER,
];

/// The families that read CTranslate2 model folders (`model.bin`), and how.
pub static CT2_FAMILIES: &[(&Family, &Ct2Reader)] = &[(&whisper::WHISPER, &whisper::CT2)];

/// The family that reads the CTranslate2 `model`'s spec, and how; an error naming the file and
/// the specs read otherwise.
pub fn ct2_family(model: &Ct2Model) -> Result<(&'static Family, &'static Ct2Reader), Ct2Error> {
    CT2_FAMILIES
        .iter()
        .find(|(_, r)| r.specs.contains(&model.spec.as_str()))
        .map(|&(f, r)| (f, r))
        .ok_or_else(|| Ct2Error::Spec {
            path: model.path().to_path_buf(),
            spec: if model.spec.is_empty() {
                "unnamed".to_string()
            } else {
                model.spec.clone()
            },
            known: CT2_FAMILIES
                .iter()
                .flat_map(|(f, r)| r.specs.iter().map(move |s| format!("{} ({s})", f.name)))
                .collect(),
        })
}

/// The families that read images (their checkpoints carry an image processor, no tokenizer),
/// in [`FAMILIES`]' order.
pub fn vision_families() -> impl Iterator<Item = &'static Family> {
    FAMILIES
        .iter()
        .copied()
        .filter(|f| f.quirks.tokenizer_files == crate::formats::source::IMAGE_PROCESSOR)
}

/// The family of a config that names none (neither `model_type` nor `architectures`): BERT's
/// configs before transformers 2.
static UNNAMED: &Family = &bert::FAMILY;

/// The family config.json describes.
pub fn family_of(config: &ConfigFile) -> Result<&'static Family, ConfigError> {
    let supported = || {
        FAMILIES
            .iter()
            .flat_map(|f| f.model_types.iter().copied())
            .collect::<Vec<_>>()
    };
    match config.model_type()? {
        Some(t) => FAMILIES
            .iter()
            .copied()
            .find(|f| f.model_types.contains(&t.as_str()))
            .ok_or_else(|| {
                config.unsupported(Unsupported::Value {
                    field: "model_type",
                    value: Some(FieldValue::Name(t.clone())),
                    note: None,
                    instead: Instead::ModelTypes(supported()),
                })
            }),
        None => {
            // Configs written before transformers 2.x have no model_type: the class names say
            // which family, and a file that names none is a BERT config.
            let classes = config.architectures()?;
            if classes.is_empty() {
                return Ok(UNNAMED);
            }
            // The family whose class prefix is the longest match (`Qwen2_5_VL` before
            // `Qwen2`), the first listed among equals.
            let matched = |f: &Family| -> Option<usize> {
                classes
                    .iter()
                    .map(|c| {
                        f.class_prefixes
                            .iter()
                            .filter(|p| c.starts_with(*p))
                            .map(|p| p.len())
                            .max()
                    })
                    .collect::<Option<Vec<usize>>>()
                    .and_then(|lens| lens.into_iter().min())
            };
            FAMILIES
                .iter()
                .copied()
                .filter_map(|f| matched(f).map(|len| (f, len)))
                .fold(
                    None,
                    |best: Option<(&Family, usize)>, (f, len)| match best {
                        Some((_, l)) if l >= len => best,
                        _ => Some((f, len)),
                    },
                )
                .map(|(f, _)| f)
                .ok_or_else(|| {
                    config.unsupported(Unsupported::Architectures {
                        classes: classes.clone(),
                        supported: supported(),
                    })
                })
        }
    }
}

/// Load the network described by `config` from the checkpoint `weights`, following the steps
/// in the module documentation.
pub fn load(config: &Path, weights: &[PathBuf]) -> Result<Box<dyn Network>, Error> {
    load_family(config, weights).map(|(_, network)| network)
}

/// [`load`], with the family the config named.
pub fn load_family(
    config: &Path,
    weights: &[PathBuf],
) -> Result<(&'static Family, Box<dyn Network>), Error> {
    let file = ConfigFile::load(config)?;
    let family = family_of(&file)?;
    let family_config = (family.config)(&file)?;
    let ckpt = Checkpoint::open(weights, &family.anchor)?;
    let (dims, counts) = family_config.checks();
    validate::config_matches(config, &ckpt, &dims, &counts)?;
    Ok((family, family_config.build(&ckpt)?))
}

/// The ways the tokenizer of the model whose config.json is at `config` may be stored: its
/// family's; the common ones ([`TOKENIZERS`]) when config.json cannot be read or names no
/// family (loading it says why).
pub fn tokenizer_files(config: &Path) -> &'static [TokenizerFiles] {
    ConfigFile::load(config)
        .ok()
        .and_then(|file| family_of(&file).ok())
        .map_or(TOKENIZERS, |f| f.quirks.tokenizer_files)
}

/// Why the config.json at `config` names no family attnviz runs (an unknown `model_type`), or
/// `None` when it names one or cannot be read. A folder's missing tokenizer is a guess from the
/// family, so this is what a loader says first.
pub fn unsupported(config: &Path) -> Option<ConfigError> {
    ConfigFile::load(config)
        .ok()
        .and_then(|file| family_of(&file).err())
}

/// The family that reads GGUF files of `architecture` (`general.architecture`), and how; an
/// error naming the file (`origin`) and the architectures attnviz reads otherwise.
pub fn gguf_family(
    architecture: &str,
    origin: &str,
) -> Result<(&'static Family, GgufReader), Error> {
    let readers = || FAMILIES.iter().filter_map(|f| Some((*f, f.quirks.gguf?)));
    readers()
        .find(|(_, r)| r.architectures.contains(&architecture))
        .ok_or_else(|| {
            let known: Vec<&str> = readers()
                .flat_map(|(_, r)| r.architectures.iter().copied())
                .collect();
            Error::from(crate::InputError::GgufMetadata {
                origin: origin.to_string(),
                problem: crate::GgufMetadataProblem::Architecture {
                    architecture: architecture.to_string(),
                    known,
                },
            })
        })
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
        assert_eq!(family(r#"{"model_type": "smollm3"}"#).unwrap(), "SmolLM3");
        assert_eq!(family(r#"{"model_type": "mixtral"}"#).unwrap(), "Mixtral");
        assert_eq!(
            family(r#"{"model_type": "qwen3_moe"}"#).unwrap(),
            "Qwen3-MoE"
        );
        assert_eq!(family(r#"{"model_type": "olmoe"}"#).unwrap(), "OLMoE");
        assert_eq!(family(r#"{"model_type": "gpt_oss"}"#).unwrap(), "gpt-oss");
        assert_eq!(
            family(r#"{"model_type": "deepseek_v2"}"#).unwrap(),
            "DeepSeek-V2"
        );
        assert_eq!(
            family(r#"{"model_type": "deepseek_v3"}"#).unwrap(),
            "DeepSeek-V3"
        );
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
        assert_eq!(
            family(r#"{"architectures": ["Qwen2_5_VLForConditionalGeneration"]}"#).unwrap(),
            "Qwen2.5-VL"
        );
        assert_eq!(
            family(r#"{"architectures": ["Qwen2ForCausalLM"]}"#).unwrap(),
            "Qwen2"
        );
        assert_eq!(
            family(r#"{"architectures": ["Qwen3MoeForCausalLM"]}"#).unwrap(),
            "Qwen3-MoE"
        );
        assert_eq!(
            family(r#"{"architectures": ["WhisperForConditionalGeneration"]}"#).unwrap(),
            "Whisper"
        );
        let err = family(r#"{"architectures": ["Wav2Vec2ForCTC"]}"#).unwrap_err();
        assert!(err.contains("name no supported family"), "{err}");
    }

    #[test]
    fn unsupported_types_get_one_line_listing_the_supported_ones() {
        assert_eq!(family(r#"{"model_type": "t5"}"#).unwrap(), "T5");
        assert_eq!(family(r#"{"model_type": "mbart"}"#).unwrap(), "mBART");
        assert_eq!(family(r#"{"model_type": "whisper"}"#).unwrap(), "Whisper");
        let err = family(r#"{"model_type": "wav2vec2"}"#).unwrap_err();
        assert!(
            err.contains(
                "model_type 'wav2vec2' is not supported; attnviz runs model types bert, roberta, \
                 xlm-roberta, distilbert, albert, electra, gpt2, llama, qwen2, qwen3, mistral, \
                 smollm3, mixtral, qwen3_moe, olmoe, gpt_oss, deepseek_v2, deepseek_v3, qwen3_next, \
                 qwen3_5, qwen3_5_text, qwen3_5_moe, qwen3_5_moe_text, \
                 gemma, gemma2, gemma3_text, gemma3, phi3, bart, mbart, marian, t5, vit, deit, \
                 dinov2, dinov2_with_registers, clip_vision_model, clip, siglip_vision_model, siglip, \
                 llava, paligemma, idefics3, smolvlm, qwen2_5_vl, qwen2_vl, whisper"
            ),
            "{err}"
        );
        assert!(!err.contains('\n'));
    }
}
