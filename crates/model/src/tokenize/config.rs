//! A tokenizer folder's settings, read once: `tokenizer_config.json` and
//! `special_tokens_map.json`. Every reader of those files (the WordPiece and SMILES builders,
//! special-token roles, the tokenizer's `model_max_length`, mBART's language codes, the chat
//! template) asks a [`TokenizerConfig`], so each file is parsed in one place, with its size
//! bounded as config.json's is.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::{Error, LoadProblem};

/// The largest tokenizer_config.json or special_tokens_map.json read. Real ones are kilobytes;
/// the largest, with thousands of added tokens and a chat template, a few megabytes.
pub const MAX_BYTES: u64 = 16 << 20;

/// tokenizer_config.json and special_tokens_map.json of one folder; a missing file reads as
/// empty.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TokenizerConfig {
    /// tokenizer_config.json, when the folder has one.
    path: Option<PathBuf>,
    config: Map<String, Value>,
    map: Map<String, Value>,
}

impl TokenizerConfig {
    /// Read the two files in `dir`. A file that is there but cannot be read, is larger than
    /// [`MAX_BYTES`] or is not a JSON object is an error naming it.
    pub fn read(dir: &Path) -> Result<TokenizerConfig, Error> {
        let (path, config) = read_object(&dir.join("tokenizer_config.json"))?;
        let (_, map) = read_object(&dir.join("special_tokens_map.json"))?;
        Ok(TokenizerConfig { path, config, map })
    }

    /// The two files' contents (`Null` for a file that is not there).
    pub fn from_values(config: Value, map: Value) -> TokenizerConfig {
        let object = |v: Value| match v {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        TokenizerConfig {
            path: None,
            config: object(config),
            map: object(map),
        }
    }

    /// tokenizer_config.json, when the folder has one (for messages).
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// tokenizer_config.json's `key`, when set and not `null`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.config.get(key).filter(|v| !v.is_null())
    }

    /// tokenizer_config.json's `key` as a flag.
    pub fn flag(&self, key: &str) -> Option<bool> {
        self.get(key)?.as_bool()
    }

    /// tokenizer_config.json's `key` as a string.
    pub fn string(&self, key: &str) -> Option<&str> {
        self.get(key)?.as_str()
    }

    /// The special token named by `key` (`cls_token`): tokenizer_config.json's, else
    /// special_tokens_map.json's, each a string or `{"content": …}`.
    pub fn special(&self, key: &str) -> Option<String> {
        [&self.config, &self.map]
            .into_iter()
            .find_map(|m| content(m.get(key)?))
    }

    /// The special tokens listed under `key` (`additional_special_tokens`) in both files.
    pub fn specials(&self, key: &str) -> Vec<String> {
        [&self.config, &self.map]
            .into_iter()
            .filter_map(|m| m.get(key)?.as_array())
            .flatten()
            .filter_map(content)
            .collect()
    }

    /// `model_max_length`, when it states a real limit (transformers writes 10³⁰ for "none").
    pub fn model_max_length(&self) -> Option<usize> {
        let n = self.get("model_max_length")?.as_f64()?;
        (1.0..1e15).contains(&n).then_some(n as usize)
    }

    /// The chat template: `chat_template` as a string, or the entry named `default` of a list
    /// of named templates.
    pub fn chat_template(&self) -> Option<&str> {
        match self.get("chat_template")? {
            Value::String(s) => Some(s),
            Value::Array(named) => named
                .iter()
                .find(|t| t.get("name").and_then(Value::as_str) == Some("default"))
                .and_then(|t| t.get("template")?.as_str()),
            _ => None,
        }
    }
}

/// A special token's text: a string, or an object's `content`.
fn content(v: &Value) -> Option<String> {
    v.as_str()
        .or_else(|| v.get("content")?.as_str())
        .map(str::to_string)
}

/// The JSON object in `path`, read through a bound; empty (and no path) when there is no such
/// file.
fn read_object(path: &Path) -> Result<(Option<PathBuf>, Map<String, Value>), Error> {
    let load = |problem: LoadProblem| Error::Load {
        path: path.to_path_buf(),
        problem,
    };
    let text = match crate::small_file::read_text(
        path,
        MAX_BYTES,
        "a tokenizer's settings are a few kilobytes",
    ) {
        Ok(text) => text,
        Err(crate::small_file::ReadError::NotFound) => return Ok((None, Map::new())),
        Err(e) => return Err(load(e.into())),
    };
    match serde_json::from_str(&text).map_err(|e| load(LoadProblem::Json(e)))? {
        Value::Object(map) => Ok((Some(path.to_path_buf()), map)),
        _ => Err(load(LoadProblem::NotAnObject)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn settings_come_from_the_config_then_the_map() {
        let c = TokenizerConfig::from_values(
            json!({"cls_token": {"content": "[CLS]"}, "do_lower_case": false,
                   "model_max_length": 1e30, "additional_special_tokens": ["<a>"],
                   "src_lang": "en_XX", "chat_template": [{"name": "default", "template": "T"}]}),
            json!({"cls_token": "<cls>", "sep_token": "[SEP]",
                   "additional_special_tokens": [{"content": "<b>"}]}),
        );
        assert_eq!(c.special("cls_token").as_deref(), Some("[CLS]"));
        assert_eq!(c.special("sep_token").as_deref(), Some("[SEP]"));
        assert_eq!(c.special("pad_token"), None);
        assert_eq!(c.specials("additional_special_tokens"), ["<a>", "<b>"]);
        assert_eq!(c.flag("do_lower_case"), Some(false));
        assert_eq!(c.model_max_length(), None, "10^30 means no limit");
        assert_eq!(c.string("src_lang"), Some("en_XX"));
        assert_eq!(c.chat_template(), Some("T"));
        let limited = TokenizerConfig::from_values(json!({"model_max_length": 512}), Value::Null);
        assert_eq!(limited.model_max_length(), Some(512));
    }

    #[test]
    fn files_are_bounded_and_must_be_objects() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            TokenizerConfig::read(dir.path()).unwrap(),
            TokenizerConfig::default()
        );
        std::fs::write(dir.path().join("tokenizer_config.json"), "[1]").unwrap();
        let err = TokenizerConfig::read(dir.path()).unwrap_err().to_string();
        assert!(err.contains("tokenizer_config.json") && err.contains("not a JSON object"));
        // One byte over the bound, in a sparse file: refused after reading the bound.
        let big = std::fs::File::create(dir.path().join("tokenizer_config.json")).unwrap();
        big.set_len(MAX_BYTES + 1).unwrap();
        let err = TokenizerConfig::read(dir.path()).unwrap_err().to_string();
        assert!(err.contains("larger than 16 MiB"), "{err}");
        assert!(!err.contains('\n'));
        std::fs::write(dir.path().join("tokenizer_config.json"), "{}").unwrap();
        std::fs::write(dir.path().join("special_tokens_map.json"), "{not json").unwrap();
        let err = TokenizerConfig::read(dir.path()).unwrap_err().to_string();
        assert!(err.contains("special_tokens_map.json"), "{err}");
    }
}
