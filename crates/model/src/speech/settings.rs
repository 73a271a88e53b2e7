//! What Whisper's `generation_config.json` says about decoding (transformers'
//! `WhisperGenerationConfig` fields): the language and task tokens, `<|notimestamps|>`, the
//! suppressed tokens, the alignment heads. config.json's copies are read where
//! generation_config.json has none (older checkpoints keep `suppress_tokens` there).

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::error::{ConfigFileProblem, Error, InputError};

/// Whisper's decoding settings, each token id checked to be in the vocabulary.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpeechSettings {
    /// The language tokens (`<|en|>` → id), in the file's order; empty for English-only models.
    pub languages: Vec<(String, u32)>,
    /// The task tokens (`transcribe`, `translate` → id); empty for English-only models.
    pub tasks: Vec<(String, u32)>,
    /// `<|notimestamps|>`; the timestamps are the ids after it.
    pub no_timestamps: Option<u32>,
    /// Never generated (`suppress_tokens`).
    pub suppress_tokens: Vec<u32>,
    /// Never generated first (`begin_suppress_tokens`).
    pub begin_suppress_tokens: Vec<u32>,
    /// `(layer, head)` pairs of the decoder's cross-attention that align words with the audio
    /// (`alignment_heads`); `None`: not given.
    pub alignment_heads: Option<Vec<(usize, usize)>>,
    /// The latest first timestamp, in timestamp steps (`max_initial_timestamp_index`).
    pub max_initial_timestamp_index: Option<usize>,
    /// `is_multilingual` (else: whether it has language tokens).
    pub multilingual: bool,
}

impl SpeechSettings {
    /// Read `generation_config.json` beside config.json at `config` (config.json's fields where
    /// it has none), for a model of `vocab` tokens whose decoder has `layers` × `heads`.
    pub fn read(
        config: &Path,
        vocab: usize,
        layers: usize,
        heads: usize,
    ) -> Result<SpeechSettings, Error> {
        let dir = config.parent().unwrap_or(Path::new("."));
        let generation = dir.join("generation_config.json");
        let files = [
            (generation.clone(), read_object(&generation)?),
            (config.to_path_buf(), read_object(config)?),
        ];
        Self::from_objects(&files, vocab, layers, heads)
    }

    /// The settings in `files` (generation_config.json's object, then config.json's, each
    /// named by the file its messages name; `None` for a file that is not there): the first
    /// that has a field gives it. A CTranslate2 model's are the objects transformers' files
    /// would hold ([`crate::formats::ctranslate2::Ct2Layout`]).
    pub fn from_objects(
        files: &[(PathBuf, Option<Map<String, Value>>)],
        vocab: usize,
        layers: usize,
        heads: usize,
    ) -> Result<SpeechSettings, Error> {
        // The first file that has the field (a null counts as absent).
        let field = |key: &str| -> Option<(&PathBuf, &Value)> {
            files.iter().find_map(|(path, map)| {
                map.as_ref()
                    .and_then(|m| m.get(key))
                    .filter(|v| !v.is_null())
                    .map(|v| (path, v))
            })
        };
        let bad = |path: &Path, key: &str, value: &Value, expected: &'static str| -> Error {
            InputError::ConfigFile {
                path: path.to_path_buf(),
                problem: ConfigFileProblem::BadField {
                    key: key.to_string(),
                    value: short(value),
                    expected,
                },
            }
            .into()
        };
        let token = |path: &Path, key: &str, v: &Value| -> Result<u32, Error> {
            match v.as_u64() {
                Some(id) if (id as usize) < vocab => Ok(id as u32),
                _ => Err(InputError::ConfigFile {
                    path: path.to_path_buf(),
                    problem: ConfigFileProblem::NotATokenId {
                        key: key.to_string(),
                        value: short(v),
                        vocab,
                    },
                }
                .into()),
            }
        };
        // Lists of ids; ids beyond the vocabulary are ignored, as transformers' processors
        // ignore them (config.json's defaults name the real vocabulary's).
        let ids = |key: &str| -> Result<Vec<u32>, Error> {
            let Some((path, v)) = field(key) else {
                return Ok(Vec::new());
            };
            let list = v
                .as_array()
                .ok_or_else(|| bad(path, key, v, "a list of token ids"))?;
            list.iter()
                .map(|x| {
                    x.as_u64()
                        .ok_or_else(|| bad(path, key, v, "a list of token ids"))
                })
                .filter(|r| r.as_ref().map_or(true, |&id| (id as usize) < vocab))
                .map(|r| r.map(|id| id as u32))
                .collect()
        };
        let table = |key: &str| -> Result<Vec<(String, u32)>, Error> {
            let Some((path, v)) = field(key) else {
                return Ok(Vec::new());
            };
            let map = v
                .as_object()
                .ok_or_else(|| bad(path, key, v, "an object of token ids"))?;
            map.iter()
                .map(|(name, id)| Ok((name.clone(), token(path, key, id)?)))
                .collect()
        };
        let no_timestamps = field("no_timestamps_token_id")
            .map(|(path, v)| token(path, "no_timestamps_token_id", v))
            .transpose()?;
        let alignment_heads = match field("alignment_heads") {
            None => None,
            Some((path, v)) => {
                let expected = "a list of [layer, head] pairs of the decoder";
                let pairs = v
                    .as_array()
                    .ok_or_else(|| bad(path, "alignment_heads", v, expected))?;
                let pair = |p: &Value| -> Option<(usize, usize)> {
                    match p.as_array()?.as_slice() {
                        [l, h] => Some((l.as_u64()? as usize, h.as_u64()? as usize)),
                        _ => None,
                    }
                };
                let heads_of = pairs
                    .iter()
                    .map(|p| pair(p).filter(|&(l, h)| l < layers && h < heads))
                    .collect::<Option<Vec<_>>>()
                    .filter(|p| !p.is_empty())
                    .ok_or_else(|| bad(path, "alignment_heads", v, expected))?;
                Some(heads_of)
            }
        };
        let max_initial_timestamp_index = match field("max_initial_timestamp_index") {
            None => None,
            Some((path, v)) => Some(
                v.as_u64()
                    .ok_or_else(|| bad(path, "max_initial_timestamp_index", v, "a whole number"))?
                    as usize,
            ),
        };
        let languages = table("lang_to_id")?;
        let multilingual = match field("is_multilingual") {
            Some((_, v)) => v.as_bool().unwrap_or(!languages.is_empty()),
            None => !languages.is_empty(),
        };
        Ok(SpeechSettings {
            tasks: table("task_to_id")?,
            languages,
            no_timestamps,
            suppress_tokens: ids("suppress_tokens")?,
            begin_suppress_tokens: ids("begin_suppress_tokens")?,
            alignment_heads,
            max_initial_timestamp_index,
            multilingual,
        })
    }

    /// The id of language `code` (`en`, `<|en|>` or a name such as `english`).
    pub fn language(&self, code: &str) -> Option<u32> {
        let lower = code.trim().to_lowercase();
        let token = if lower.starts_with("<|") {
            lower.clone()
        } else {
            format!("<|{}|>", language_code(&lower).unwrap_or(&lower))
        };
        self.languages
            .iter()
            .find(|(name, _)| *name == token)
            .map(|&(_, id)| id)
    }

    /// The language codes the model knows (`en`, `de`, …).
    pub fn language_codes(&self) -> Vec<String> {
        self.languages
            .iter()
            .map(|(t, _)| {
                t.trim_start_matches("<|")
                    .trim_end_matches("|>")
                    .to_string()
            })
            .collect()
    }

    /// The id of `task` (`transcribe`, `translate`).
    pub fn task(&self, task: &str) -> Option<u32> {
        self.tasks
            .iter()
            .find(|(name, _)| name == task)
            .map(|&(_, id)| id)
    }

    /// The first timestamp token (`<|0.00|>`), when the model has them.
    pub fn timestamp_begin(&self) -> Option<u32> {
        self.no_timestamps.map(|id| id + 1)
    }
}

/// A few language names to their codes, as transformers' `TO_LANGUAGE_CODE` maps them.
fn language_code(name: &str) -> Option<&'static str> {
    const NAMES: &[(&str, &str)] = &[
        ("english", "en"),
        ("german", "de"),
        ("french", "fr"),
        ("spanish", "es"),
        ("italian", "it"),
        ("portuguese", "pt"),
        ("dutch", "nl"),
        ("russian", "ru"),
        ("chinese", "zh"),
        ("japanese", "ja"),
        ("korean", "ko"),
        ("polish", "pl"),
        ("swedish", "sv"),
        ("turkish", "tr"),
        ("ukrainian", "uk"),
    ];
    NAMES.iter().find(|(n, _)| *n == name).map(|&(_, c)| c)
}

/// A JSON value for a message, cut to 60 characters.
fn short(v: &Value) -> String {
    let s = v.to_string();
    match s.char_indices().nth(60) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s,
    }
}

/// The JSON object at `path`; `None` when there is no such file.
fn read_object(path: &Path) -> Result<Option<Map<String, Value>>, Error> {
    let bad = |problem: ConfigFileProblem| -> Error {
        InputError::ConfigFile {
            path: path.to_path_buf(),
            problem,
        }
        .into()
    };
    let text = match crate::small_file::read_text(
        path,
        crate::formats::config::MAX_CONFIG_BYTES,
        "a generation config is a few kilobytes",
    ) {
        Ok(text) => text,
        Err(crate::small_file::ReadError::NotFound) => return Ok(None),
        Err(e) => return Err(bad(ConfigFileProblem::Unreadable(e))),
    };
    match serde_json::from_str(&text) {
        Ok(Value::Object(map)) => Ok(Some(map)),
        Ok(_) => Err(bad(ConfigFileProblem::NotAnObject)),
        Err(e) => Err(bad(ConfigFileProblem::NotJson(e))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(generation: &str) -> Result<SpeechSettings, String> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("config.json"),
            r#"{"suppress_tokens": [1, 99999]}"#,
        )
        .unwrap();
        std::fs::write(dir.path().join("generation_config.json"), generation).unwrap();
        SpeechSettings::read(&dir.path().join("config.json"), 100, 2, 4).map_err(|e| e.to_string())
    }

    #[test]
    fn fields_are_read_and_checked() {
        let s = settings(
            r#"{"lang_to_id": {"<|en|>": 50, "<|de|>": 51}, "task_to_id": {"transcribe": 52},
                "no_timestamps_token_id": 60, "alignment_heads": [[1, 3], [0, 0]],
                "begin_suppress_tokens": [5, 7]}"#,
        )
        .unwrap();
        assert_eq!(s.language("en"), Some(50));
        assert_eq!(s.language("German"), Some(51));
        assert_eq!(s.language("<|de|>"), Some(51));
        assert_eq!(s.language("fr"), None);
        assert_eq!(s.task("transcribe"), Some(52));
        assert_eq!(s.timestamp_begin(), Some(61));
        assert_eq!(s.alignment_heads, Some(vec![(1, 3), (0, 0)]));
        // From config.json, the id beyond the vocabulary left out.
        assert_eq!(s.suppress_tokens, vec![1]);
        assert_eq!(s.begin_suppress_tokens, vec![5, 7]);
        assert!(s.multilingual);
        let err = settings(r#"{"alignment_heads": [[2, 0]]}"#).unwrap_err();
        assert!(
            err.contains("alignment_heads") && !err.contains('\n'),
            "{err}"
        );
        let err = settings(r#"{"no_timestamps_token_id": 100}"#).unwrap_err();
        assert!(err.contains("no_timestamps_token_id"), "{err}");
        let err = settings(r#"{"lang_to_id": [1]}"#).unwrap_err();
        assert!(err.contains("lang_to_id"), "{err}");
    }
}
