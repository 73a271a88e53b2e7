//! config.json, read field by field: the family-independent part of reading a model's
//! configuration. Each family reads its own fields from a [`ConfigFile`], with transformers'
//! defaults for that family (see `bert::BertConfig`, `distilbert::DistilBertConfig`, …).
//!
//! Files written by transformers 4.x (`torch_dtype`, `gradient_checkpointing`, …) and 5.x
//! (`dtype`, explicit `null`s) read the same: a missing field and a `null` both take the
//! family's default. Each field is checked for its type on its own, so an error names the field
//! (serde's derive would report a line and column instead). Only what changes the forward pass
//! is read; everything else in the file is ignored. What a family cannot run exactly (another
//! architecture, relative positions, a decoder) is refused with a message, never approximated.

use std::path::{Path, PathBuf};

use crate::kernels::Activation;
use crate::small_file::ReadError;

use super::config_problem::InSection;
pub use super::config_problem::{
    ConfigProblem, Expected, ExpectedRule, Field, FieldValue, Held, HeldAgainst, Instead, Limit,
    Oversize, RopeProblem, Unsupported,
};

/// An error reading config.json.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// config.json.
        path: PathBuf,
        /// Why: missing, not a regular file, too large, not UTF-8, or the system's error.
        source: ReadError,
    },
    /// The file is not valid JSON or a field has the wrong type.
    #[error("{} is not a valid model config: {}{problem}", path.display(), InSection(within.as_deref()))]
    Invalid {
        /// config.json.
        path: PathBuf,
        /// The object inside the file the problem is in (`text_config`); `None`: the file.
        within: Option<String>,
        /// What is wrong (boxed: the facts are larger than the rest of the error).
        problem: Box<ConfigProblem>,
    },
    /// A value that disagrees with the checkpoint's tensors (checked before anything is
    /// allocated from it).
    #[error("{}: {field} is {value}, but {}; config.json does not describe these weights", path.display(), held.against(field))]
    Mismatch {
        /// config.json.
        path: PathBuf,
        /// The field.
        field: &'static str,
        /// Its value.
        value: usize,
        /// What the checkpoint holds instead (boxed, as `problem` is).
        held: Box<Held>,
    },
    /// Something we cannot run exactly.
    #[error("{} describes a model attnviz cannot run: {}{what}", path.display(), InSection(within.as_deref()))]
    Unsupported {
        /// config.json.
        path: PathBuf,
        /// The object inside the file it is in (`text_config`); `None`: the file.
        within: Option<String>,
        /// What and why, with what would work (boxed, as `problem` is).
        what: Box<Unsupported>,
    },
}

/// The largest config.json read (real ones are a few kilobytes).
pub const MAX_CONFIG_BYTES: u64 = 16 << 20;

/// A parsed config.json: typed access to its fields, errors that name the field and the file.
#[derive(Debug)]
pub struct ConfigFile {
    path: PathBuf,
    fields: serde_json::Map<String, serde_json::Value>,
    /// The object this is, inside the file (`text_config`), named in errors; `None`: the file.
    within: Option<String>,
}

impl ConfigFile {
    /// Read and parse `path`.
    pub fn load(path: &Path) -> Result<ConfigFile, ConfigError> {
        let text = crate::small_file::read_text(
            path,
            MAX_CONFIG_BYTES,
            "a config.json is a few kilobytes",
        )
        .map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Parse the text of a config.json (`path` only names it in errors).
    pub fn parse(text: &str, path: &Path) -> Result<ConfigFile, ConfigError> {
        let invalid = |problem: ConfigProblem| ConfigError::Invalid {
            path: path.to_path_buf(),
            within: None,
            problem: Box::new(problem),
        };
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| invalid(ConfigProblem::NotJson(e)))?;
        let serde_json::Value::Object(fields) = value else {
            return Err(invalid(ConfigProblem::NotAnObject));
        };
        Ok(ConfigFile {
            path: path.to_path_buf(),
            fields,
            within: None,
        })
    }

    /// The object `field` holds (a multimodal model's `text_config`), read as a config of its
    /// own whose errors name it; `None` when the field is missing or `null`.
    pub fn section(&self, field: &'static str) -> Result<Option<ConfigFile>, ConfigError> {
        let name = match &self.within {
            Some(outer) => format!("{outer}.{field}"),
            None => field.to_string(),
        };
        match self.get(field) {
            None => Ok(None),
            Some(serde_json::Value::Object(fields)) => Ok(Some(ConfigFile {
                path: self.path.clone(),
                fields: fields.clone(),
                within: Some(name),
            })),
            Some(other) => Err(self.wrong_type(field, other, Expected::Object)),
        }
    }

    /// The object `field` holds (an empty one where it is missing), refused in one line unless
    /// its `model_type` is absent or one of `types` (a multimodal model's `vision_config`).
    pub fn section_of(
        &self,
        field: &'static str,
        types: &[&'static str],
    ) -> Result<ConfigFile, ConfigError> {
        let section = match self.section(field)? {
            Some(s) => s,
            None => ConfigFile {
                path: self.path.clone(),
                fields: Default::default(),
                within: Some(field.to_string()),
            },
        };
        match section.model_type()? {
            Some(t) if !types.contains(&t.as_str()) => {
                Err(section.unsupported(Unsupported::Value {
                    field: "model_type",
                    value: Some(FieldValue::Name(t)),
                    note: None,
                    instead: Instead::ModelTypes(types.to_vec()),
                }))
            }
            _ => Ok(section),
        }
    }

    /// The same config without `field` (one an outer model overrides, as PaliGemma's
    /// `text_config.use_bidirectional_attention`).
    pub fn without(mut self, field: &str) -> ConfigFile {
        self.fields.remove(field);
        self
    }

    /// The same config with `field` set to `value` (an outer model's reading of it: Qwen2.5-VL's
    /// `mrope` rotary type, which is the default rotation on M-RoPE's positions).
    pub fn with(mut self, field: &str, value: serde_json::Value) -> ConfigFile {
        self.fields.insert(field.to_string(), value);
        self
    }

    /// The file, for messages.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// An "invalid config" error about this file (about the section this is, if it is one).
    pub fn invalid(&self, problem: impl Into<ConfigProblem>) -> ConfigError {
        ConfigError::Invalid {
            path: self.path.clone(),
            within: self.within.clone(),
            problem: Box::new(problem.into()),
        }
    }

    /// A "cannot run this" error about this file (about the section this is, if it is one).
    pub fn unsupported(&self, what: Unsupported) -> ConfigError {
        ConfigError::Unsupported {
            path: self.path.clone(),
            within: self.within.clone(),
            what: Box::new(what),
        }
    }

    /// `field` (a field of this object) holds `value`, not what is `expected`.
    fn wrong_type(
        &self,
        field: &'static str,
        value: &serde_json::Value,
        expected: Expected,
    ) -> ConfigError {
        self.invalid(ConfigProblem::WrongType {
            field: Field::Top(field),
            value: FieldValue::Json(value.clone()),
            expected,
        })
    }

    /// The raw value of `field`; `None` when it is missing or `null`.
    pub fn get(&self, field: &str) -> Option<&serde_json::Value> {
        self.fields.get(field).filter(|v| !v.is_null())
    }

    /// Whether the file has `field` at all, even as `null` (where null and absent mean
    /// different things: Mistral's `sliding_window`).
    pub fn has_field(&self, field: &str) -> bool {
        self.fields.contains_key(field)
    }

    /// A count: a whole number ≥ 0 (JSON `12`, or `12.0`).
    pub fn count(&self, field: &'static str) -> Result<Option<usize>, ConfigError> {
        let Some(v) = self.get(field) else {
            return Ok(None);
        };
        let bad = || self.wrong_type(field, v, Expected::WholeNumber);
        if let Some(n) = v.as_u64() {
            return usize::try_from(n).map(Some).map_err(|_| bad());
        }
        match v.as_f64() {
            // Whole floats up to 2⁵³ are exact.
            Some(f) if f >= 0.0 && f.fract() == 0.0 && f <= 9_007_199_254_740_992.0 => {
                Ok(Some(f as usize))
            }
            Some(f) if f < 0.0 => Err(self.wrong_type(field, v, Expected::NonNegative)),
            _ => Err(bad()),
        }
    }

    /// A count that must be at least 1 when present, else `default`.
    pub fn positive(&self, field: &'static str, default: usize) -> Result<usize, ConfigError> {
        match self.count(field)?.unwrap_or(default) {
            0 => Err(self.invalid(ConfigProblem::Zero { field })),
            n => Ok(n),
        }
    }

    /// A number.
    pub fn number(&self, field: &'static str) -> Result<Option<f64>, ConfigError> {
        match self.get(field) {
            None => Ok(None),
            Some(v) => v
                .as_f64()
                .map(Some)
                .ok_or_else(|| self.wrong_type(field, v, Expected::Number)),
        }
    }

    /// A normalisation epsilon: a positive finite number, else `default`.
    pub fn epsilon(&self, field: &'static str, default: f64) -> Result<f64, ConfigError> {
        let eps = self.number(field)?.unwrap_or(default);
        if eps.is_finite() && eps > 0.0 {
            Ok(eps)
        } else {
            Err(self.invalid(ConfigProblem::NotA {
                field: Field::Top(field),
                value: FieldValue::Number(eps),
                expected: Expected::PositiveNumber,
            }))
        }
    }

    /// A string.
    pub fn string(&self, field: &'static str) -> Result<Option<String>, ConfigError> {
        match self.get(field) {
            None => Ok(None),
            Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
            Some(v) => Err(self.wrong_type(field, v, Expected::String)),
        }
    }

    /// true or false.
    pub fn boolean(&self, field: &'static str) -> Result<Option<bool>, ConfigError> {
        match self.get(field) {
            None => Ok(None),
            Some(serde_json::Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(self.wrong_type(field, v, Expected::Bool)),
        }
    }

    /// A list of names.
    pub fn strings(&self, field: &'static str) -> Result<Option<Vec<String>>, ConfigError> {
        match self.get(field) {
            None => Ok(None),
            Some(serde_json::Value::Array(items)) => items
                .iter()
                .map(|i| i.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .map(Some)
                .ok_or_else(|| self.invalid(ConfigProblem::NotNames { field })),
            Some(v) => Err(self.wrong_type(field, v, Expected::Names)),
        }
    }

    /// A list of per-layer switches written as 0 and 1 (or false and true): SmolLM3's
    /// `no_rope_layers`.
    pub fn flags(&self, field: &'static str) -> Result<Option<Vec<bool>>, ConfigError> {
        match self.get(field) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(v @ serde_json::Value::Array(items)) => items
                .iter()
                .map(|i| match i {
                    serde_json::Value::Bool(b) => Some(*b),
                    _ => match i.as_f64() {
                        Some(0.0) => Some(false),
                        Some(1.0) => Some(true),
                        _ => None,
                    },
                })
                .collect::<Option<Vec<_>>>()
                .map(Some)
                .ok_or_else(|| self.wrong_type(field, v, Expected::Flags)),
            Some(v) => Err(self.wrong_type(field, v, Expected::Flags)),
        }
    }

    /// A token id (`pad_token_id`): a count that fits in 32 bits.
    pub fn token_id(&self, field: &'static str) -> Result<Option<u32>, ConfigError> {
        match self.count(field)? {
            None => Ok(None),
            Some(id) => u32::try_from(id).map(Some).map_err(|_| {
                self.invalid(ConfigProblem::WrongType {
                    field: Field::Top(field),
                    value: FieldValue::Count(id),
                    expected: Expected::TokenId,
                })
            }),
        }
    }

    /// The activation named by `field` (transformers' `ACT2FN` names), else `default`.
    pub fn activation(
        &self,
        field: &'static str,
        default: &str,
    ) -> Result<Activation, ConfigError> {
        let name = match self.get(field) {
            None => default.to_string(),
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(other) => {
                return Err(self.invalid(ConfigProblem::NotA {
                    field: Field::Top(field),
                    value: FieldValue::Json(other.clone()),
                    expected: Expected::Name,
                }))
            }
        };
        Activation::from_hf_name(&name).ok_or_else(|| {
            self.unsupported(Unsupported::Value {
                field,
                value: Some(FieldValue::Name(name)),
                note: None,
                instead: Instead::Activations,
            })
        })
    }

    /// `model_type`, when the file has one.
    pub fn model_type(&self) -> Result<Option<String>, ConfigError> {
        self.string("model_type")
    }

    /// `architectures` (empty when missing).
    pub fn architectures(&self) -> Result<Vec<String>, ConfigError> {
        Ok(self.strings("architectures")?.unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> ConfigFile {
        ConfigFile::parse(text, Path::new("config.json")).unwrap()
    }

    #[test]
    fn a_section_reads_as_a_config_whose_errors_name_it() {
        let c = p(
            r#"{"model_type": "gemma3", "text_config": {"hidden_size": 8, "heads": -2,
                      "inner": {"x": "y"}}, "vision_config": null, "bad": 3}"#,
        );
        let text = c.section("text_config").unwrap().unwrap();
        assert_eq!(text.count("hidden_size").unwrap(), Some(8));
        assert_eq!(text.model_type().unwrap(), None);
        let err = text.count("heads").unwrap_err().to_string();
        assert!(
            err.contains("in text_config: heads is -2; it must not be negative"),
            "{err}"
        );
        let inner = text.section("inner").unwrap().unwrap();
        let err = inner.count("x").unwrap_err().to_string();
        assert!(err.contains("in text_config.inner: x is"), "{err}");
        assert!(c.section("vision_config").unwrap().is_none());
        assert!(c.section("missing").unwrap().is_none());
        let err = c.section("bad").unwrap_err().to_string();
        assert!(err.contains("bad is 3; it must be an object"), "{err}");
    }

    #[test]
    fn fields_are_typed_and_named_in_errors() {
        let c = p(
            r#"{"a": 12, "b": 12.0, "c": -1, "d": 1.5, "e": "x", "f": null, "g": true,
                      "h": ["X", "Y"], "i": [1], "eps": 0, "act": "gelu_new", "bad_act": "quick_gelu"}"#,
        );
        assert_eq!(c.count("a").unwrap(), Some(12));
        assert_eq!(c.count("b").unwrap(), Some(12));
        assert_eq!(c.count("f").unwrap(), None);
        assert_eq!(c.count("missing").unwrap(), None);
        let err = c.count("c").unwrap_err().to_string();
        assert!(err.contains("c is -1; it must not be negative"), "{err}");
        let err = c.count("d").unwrap_err().to_string();
        assert!(err.contains("d is 1.5; it must be a whole number"), "{err}");
        assert!(c.count("e").is_err());
        assert_eq!(c.string("e").unwrap().as_deref(), Some("x"));
        assert_eq!(c.boolean("g").unwrap(), Some(true));
        assert!(c.boolean("a").is_err());
        assert_eq!(c.strings("h").unwrap().unwrap(), vec!["X", "Y"]);
        assert!(c.strings("i").is_err());
        assert!(c
            .epsilon("eps", 1e-12)
            .unwrap_err()
            .to_string()
            .contains("eps 0 is not a positive number"));
        assert_eq!(c.epsilon("missing", 1e-5).unwrap(), 1e-5);
        assert!(c.positive("a", 1).is_ok());
        assert!(c
            .positive("eps", 1)
            .unwrap_err()
            .to_string()
            .contains("eps is 0"));
        use crate::kernels::Activation;
        assert_eq!(c.activation("act", "gelu").unwrap(), Activation::GeluTanh);
        assert_eq!(
            c.activation("missing", "gelu").unwrap(),
            Activation::GeluErf
        );
        let err = c.activation("bad_act", "gelu").unwrap_err().to_string();
        assert!(
            err.contains("bad_act 'quick_gelu' is not supported"),
            "{err}"
        );
        assert!(!err.contains('\n'));
    }

    #[test]
    fn rejects_what_is_not_a_json_object() {
        let err = ConfigFile::parse("not json", Path::new("config.json"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("is not a valid model config: not valid JSON"),
            "{err}"
        );
        assert!(ConfigFile::parse("[1]", Path::new("config.json")).is_err());
    }
}
