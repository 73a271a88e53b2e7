//! A CTranslate2 model folder (`model.bin`, its `config.json`, `tokenizer.json`) loaded as it
//! is, with no conversion: the spec in `model.bin` picks the family
//! ([`registry::ct2_family`]: Whisper is the one read, every other spec is refused in one
//! line), the family lays the file out as transformers' checkpoint of the same model
//! ([`crate::formats::ctranslate2::Ct2Layout`]: config.json and generation_config.json as JSON,
//! its tensors by transformers' names), and from there the model loads as from transformers'
//! folder: the family's own config reader and checks, its network built from the named tensors
//! ([`Checkpoint::from_ctranslate2`]), the speech settings read from the generation config.
//! The feature extractor is transformers' default at the model's mel bins (CTranslate2 folders
//! ship no preprocessor_config.json).

use std::path::Path;

use crate::audio::FeatureConfig;
use crate::blocks::generate::{ChatUnavailable, GenerationConfig};
use crate::error::Error;
use crate::families::registry;
use crate::formats::config::ConfigFile;
use crate::formats::ctranslate2::{read_config, Ct2Model, Ct2Tokens};
use crate::formats::source::{self, ModelFiles};
use crate::formats::validate;
use crate::formats::weights::{Checkpoint, WeightsError};
use crate::tokenize::TextTokenizer;
use crate::Model;

use super::{SpeechConfig, SpeechSettings};

impl Ct2Tokens for TextTokenizer {
    fn id(&self, token: &str) -> Option<u32> {
        self.vocab_id(token)
    }

    fn token(&self, id: u32) -> Option<String> {
        TextTokenizer::token(self, id)
    }
}

/// A JSON value's object (empty for anything else).
fn object(v: &serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    v.as_object().cloned().unwrap_or_default()
}

impl Model {
    /// Load the CTranslate2 model whose files `files` names (its weights one `model.bin`,
    /// [`crate::formats::ctranslate2::is_model_bin`]), as the module documentation says.
    pub fn from_ctranslate2(files: &ModelFiles) -> Result<Model, Error> {
        let bin = &files.weights[0];
        let dir = bin.parent().unwrap_or(Path::new("."));
        let ct2 = Ct2Model::open(bin).map_err(WeightsError::from)?;
        let (family, reader) = registry::ct2_family(&ct2).map_err(WeightsError::from)?;
        let ct2_config = read_config(dir).map_err(WeightsError::from)?;
        let tokenizer = TextTokenizer::from_dir(&files.tokenizer_dir)?;
        let layout =
            (reader.layout)(&ct2, ct2_config.as_ref(), &tokenizer).map_err(WeightsError::from)?;
        // Messages about the config name CTranslate2's config.json, whose values these are.
        let config_path = dir.join("config.json");
        let file = ConfigFile::parse(&layout.config.to_string(), &config_path)?;
        let family_config = (family.config)(&file)?;
        let ckpt = Checkpoint::from_ctranslate2(ct2, layout.names)?;
        let (dims, counts) = family_config.checks();
        validate::config_matches(&config_path, &ckpt, &dims, &counts)?;
        let network = family_config.build(&ckpt)?;
        let vocab = network.architecture().vocab_size;
        let eos = layout.generation["eos_token_id"]
            .as_u64()
            .and_then(|id| u32::try_from(id).ok())
            .filter(|&id| (id as usize) < vocab);
        let generation = GenerationConfig {
            eos_token_ids: eos.into_iter().collect(),
            chat_template: Err(ChatUnavailable::Missing {
                origin: dir.display().to_string(),
                searched: "a CTranslate2 folder has no chat template".to_string(),
            }),
            max_length: layout.generation["max_length"].as_u64().map(|n| n as usize),
            forced_bos_token_id: None,
            forced_eos_token_id: None,
        };
        let mut model = Self::assemble(
            files.id.clone(),
            files.revision.clone(),
            source::display_name(files),
            family,
            network,
            tokenizer,
            generation,
        );
        model.model_max_length = model.tokenizer.settings().model_max_length();
        if let Some(speech) = model.network.speech() {
            let (layers, heads) = model
                .network
                .seq2seq()
                .map(|n| {
                    let d = n.decoder_architecture();
                    (d.layers, d.heads)
                })
                .unwrap_or_default();
            let objects = [
                (config_path.clone(), Some(object(&layout.generation))),
                (config_path.clone(), Some(object(&layout.config))),
            ];
            let features = FeatureConfig {
                feature_size: speech.mel_bins(),
                ..FeatureConfig::default()
            };
            model.speech = Some(SpeechConfig {
                settings: SpeechSettings::from_objects(&objects, vocab, layers, heads)?,
                features,
            });
        }
        if files.revision.is_none() {
            let path = Path::new(&files.id);
            model.info.id = source::local_name(path);
            model.location = Some(source::full_path(path));
        }
        Ok(model)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `model.bin` of binary version 6 with spec `spec` and one float32 scalar.
    fn model_bin(spec: &str) -> Vec<u8> {
        let mut out = 6u32.to_le_bytes().to_vec();
        let string = |out: &mut Vec<u8>, s: &str| {
            out.extend_from_slice(&(s.len() as u16 + 1).to_le_bytes());
            out.extend_from_slice(s.as_bytes());
            out.push(0);
        };
        string(&mut out, spec);
        out.extend_from_slice(&1u32.to_le_bytes()); // revision
        out.extend_from_slice(&1u32.to_le_bytes()); // one variable
        string(&mut out, "encoder/scale");
        out.push(0); // rank 0
        out.push(0); // float32
        out.extend_from_slice(&4u32.to_le_bytes());
        out.extend_from_slice(&1f32.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes()); // no aliases
        out
    }

    fn folder(spec: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(crate::formats::ctranslate2::MODEL_BIN),
            model_bin(spec),
        )
        .unwrap();
        std::fs::write(dir.path().join("config.json"), "{}").unwrap();
        std::fs::write(dir.path().join("tokenizer.json"), "{}").unwrap();
        dir
    }

    #[test]
    fn a_ctranslate2_folder_of_another_spec_is_refused_in_one_line() {
        let dir = folder("TransformerSpec");
        let err = Model::from_dir(dir.path())
            .err()
            .expect("refused")
            .to_string();
        assert!(
            err.contains("holds a CTranslate2 TransformerSpec model")
                && err.contains("CTranslate2 folders of Whisper (WhisperSpec) only")
                && !err.contains('\n'),
            "{err}"
        );
    }

    #[test]
    fn a_ctranslate2_folder_without_tokenizer_json_says_so() {
        let dir = folder("WhisperSpec");
        std::fs::remove_file(dir.path().join("tokenizer.json")).unwrap();
        let err = Model::from_dir(dir.path())
            .err()
            .expect("refused")
            .to_string();
        assert!(err.contains("has no tokenizer.json"), "{err}");
    }

    #[test]
    fn a_whisper_spec_without_whisper_tensors_names_what_is_missing() {
        let dir = folder("WhisperSpec");
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/tiny-whisper/tokenizer.json");
        std::fs::copy(fixture, dir.path().join("tokenizer.json")).unwrap();
        let err = Model::from_dir(dir.path())
            .err()
            .expect("refused")
            .to_string();
        assert!(
            err.contains("encoder/num_heads is missing") && !err.contains('\n'),
            "{err}"
        );
    }
}
