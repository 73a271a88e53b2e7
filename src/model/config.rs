//! config.json → [`BertConfig`], for files written by transformers 4.x (`torch_dtype`,
//! `gradient_checkpointing`, …) and 5.x (`dtype`, explicit `null`s).
//!
//! Only what changes the forward pass is read; everything else in the file is ignored. What we
//! cannot run exactly (another architecture, relative positions, a decoder) is refused with a
//! message, never approximated.

use std::path::{Path, PathBuf};

use std::io::Read;

/// The feed-forward activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// `gelu` (or `gelu_python`): x·Φ(x) with the exact error function (BERT's original).
    GeluErf,
    /// `gelu_new`, `gelu_pytorch_tanh`, `gelu_fast`: the tanh approximation
    /// 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
    GeluTanh,
    /// `relu`.
    Relu,
}

impl Activation {
    fn parse(name: &str) -> Option<Activation> {
        match name {
            "gelu" | "gelu_python" => Some(Activation::GeluErf),
            "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" => Some(Activation::GeluTanh),
            "relu" => Some(Activation::Relu),
            _ => None,
        }
    }
}

/// The shape and settings of a BERT encoder.
#[derive(Clone, Debug, PartialEq)]
pub struct BertConfig {
    /// Vocabulary size (rows of the word embeddings).
    pub vocab_size: usize,
    /// Hidden size.
    pub hidden_size: usize,
    /// Number of encoder layers.
    pub num_hidden_layers: usize,
    /// Attention heads per layer.
    pub num_attention_heads: usize,
    /// Inner size of the feed-forward block.
    pub intermediate_size: usize,
    /// Feed-forward activation.
    pub hidden_act: Activation,
    /// Maximum sequence length (rows of the position embeddings).
    pub max_position_embeddings: usize,
    /// Number of segment types (rows of the token type embeddings).
    pub type_vocab_size: usize,
    /// LayerNorm epsilon.
    pub layer_norm_eps: f64,
}

impl BertConfig {
    /// Size of one head (`hidden_size / num_attention_heads`).
    pub fn head_dim(&self) -> usize {
        self.hidden_size / self.num_attention_heads
    }
}

/// An error reading config.json.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file cannot be read.
    #[error("cannot read {}: {reason}", path.display())]
    Read {
        /// config.json.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The file is not valid JSON or a field has the wrong type.
    #[error("{} is not a valid BERT config: {reason}", path.display())]
    Invalid {
        /// config.json.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A value that disagrees with the checkpoint's tensors (checked before anything is
    /// allocated from it).
    #[error("{}: {field} is {value}, but {detail}; config.json does not describe these weights", path.display())]
    Mismatch {
        /// config.json.
        path: PathBuf,
        /// The field.
        field: &'static str,
        /// Its value.
        value: usize,
        /// What the checkpoint holds instead.
        detail: String,
    },
    /// Something we cannot run exactly.
    #[error("{} describes a model attnviz cannot run: {reason}", path.display())]
    Unsupported {
        /// config.json.
        path: PathBuf,
        /// What and why, with what would work.
        reason: String,
    },
}

/// config.json as written by transformers 4.x or 5.x, each field checked for its type on its
/// own so that an error names the field. Every field is optional so that explicit `null`s and
/// missing fields get the same treatment: BERT's defaults where transformers has them, an error
/// where it has none.
#[derive(Debug, Default)]
struct RawConfig {
    model_type: Option<String>,
    architectures: Option<Vec<String>>,
    vocab_size: Option<usize>,
    hidden_size: Option<usize>,
    num_hidden_layers: Option<usize>,
    num_attention_heads: Option<usize>,
    intermediate_size: Option<usize>,
    hidden_act: Option<serde_json::Value>,
    max_position_embeddings: Option<usize>,
    type_vocab_size: Option<usize>,
    layer_norm_eps: Option<f64>,
    position_embedding_type: Option<String>,
    is_decoder: Option<bool>,
    add_cross_attention: Option<bool>,
    embedding_size: Option<usize>,
}

/// Typed access to the fields of a config.json object; errors name the field.
struct Fields(serde_json::Map<String, serde_json::Value>);

impl Fields {
    fn get(&self, field: &str) -> Option<&serde_json::Value> {
        self.0.get(field).filter(|v| !v.is_null())
    }

    /// A count: a whole number ≥ 0 (JSON `12`, or `12.0`).
    fn count(&self, field: &str) -> Result<Option<usize>, String> {
        let Some(v) = self.get(field) else {
            return Ok(None);
        };
        let bad = || format!("{field} is {v}; it must be a whole number such as 12");
        if let Some(n) = v.as_u64() {
            return usize::try_from(n).map(Some).map_err(|_| bad());
        }
        match v.as_f64() {
            // Whole floats up to 2⁵³ are exact.
            Some(f) if f >= 0.0 && f.fract() == 0.0 && f <= 9_007_199_254_740_992.0 => {
                Ok(Some(f as usize))
            }
            Some(f) if f < 0.0 => Err(format!("{field} is {v}; it must not be negative")),
            _ => Err(bad()),
        }
    }

    fn number(&self, field: &str) -> Result<Option<f64>, String> {
        match self.get(field) {
            None => Ok(None),
            Some(v) => v
                .as_f64()
                .map(Some)
                .ok_or_else(|| format!("{field} is {v}; it must be a number")),
        }
    }

    fn string(&self, field: &str) -> Result<Option<String>, String> {
        match self.get(field) {
            None => Ok(None),
            Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
            Some(v) => Err(format!("{field} is {v}; it must be a string")),
        }
    }

    fn boolean(&self, field: &str) -> Result<Option<bool>, String> {
        match self.get(field) {
            None => Ok(None),
            Some(serde_json::Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(format!("{field} is {v}; it must be true or false")),
        }
    }

    fn strings(&self, field: &str) -> Result<Option<Vec<String>>, String> {
        match self.get(field) {
            None => Ok(None),
            Some(serde_json::Value::Array(items)) => items
                .iter()
                .map(|i| i.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .map(Some)
                .ok_or_else(|| format!("{field} must be a list of names")),
            Some(v) => Err(format!("{field} is {v}; it must be a list of names")),
        }
    }
}

impl RawConfig {
    fn parse(text: &str) -> Result<RawConfig, String> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("not valid JSON ({e})"))?;
        let serde_json::Value::Object(map) = value else {
            return Err("not a JSON object".into());
        };
        let f = Fields(map);
        Ok(RawConfig {
            model_type: f.string("model_type")?,
            architectures: f.strings("architectures")?,
            vocab_size: f.count("vocab_size")?,
            hidden_size: f.count("hidden_size")?,
            num_hidden_layers: f.count("num_hidden_layers")?,
            num_attention_heads: f.count("num_attention_heads")?,
            intermediate_size: f.count("intermediate_size")?,
            hidden_act: f.get("hidden_act").cloned(),
            max_position_embeddings: f.count("max_position_embeddings")?,
            type_vocab_size: f.count("type_vocab_size")?,
            layer_norm_eps: f.number("layer_norm_eps")?,
            position_embedding_type: f.string("position_embedding_type")?,
            is_decoder: f.boolean("is_decoder")?,
            add_cross_attention: f.boolean("add_cross_attention")?,
            embedding_size: f.count("embedding_size")?,
        })
    }
}

/// The largest config.json read (real ones are a few kilobytes).
pub const MAX_CONFIG_BYTES: u64 = 16 << 20;

/// Model types whose checkpoints are plain BERT encoders: same tensors, same forward pass.
/// RoBERTa/XLM-R/CamemBERT offset their positions, ELECTRA may project embeddings, DistilBERT and
/// ALBERT name and share tensors differently, Megatron-BERT normalises before each block: none of
/// them would run correctly through this encoder, so they are refused.
const BERT_TYPES: [&str; 1] = ["bert"];

/// Read and check a config.json.
pub fn load(path: &Path) -> Result<BertConfig, ConfigError> {
    let read_err = |reason: String| ConfigError::Read {
        path: path.to_path_buf(),
        reason,
    };
    let file = std::fs::File::open(path).map_err(|e| read_err(e.to_string()))?;
    let mut text = String::new();
    std::io::Read::take(file, MAX_CONFIG_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| read_err(e.to_string()))?;
    if text.len() as u64 > MAX_CONFIG_BYTES {
        return Err(read_err(format!(
            "it is larger than {} MiB; a config.json is a few kilobytes",
            MAX_CONFIG_BYTES >> 20
        )));
    }
    parse(&text, path)
}

/// Parse and check the text of a config.json (`path` only names it in errors).
pub fn parse(text: &str, path: &Path) -> Result<BertConfig, ConfigError> {
    let invalid = |reason: String| ConfigError::Invalid {
        path: path.to_path_buf(),
        reason,
    };
    let unsupported = |reason: String| ConfigError::Unsupported {
        path: path.to_path_buf(),
        reason,
    };
    let raw = RawConfig::parse(text).map_err(invalid)?;

    match raw.model_type.as_deref() {
        Some(t) if BERT_TYPES.contains(&t) => {}
        // Configs written before transformers 2.x have no model_type; accept them if nothing
        // says they are something else.
        None if raw
            .architectures
            .iter()
            .flatten()
            .all(|a| a.starts_with("Bert")) => {}
        Some(t) => {
            return Err(unsupported(format!(
                "model_type '{t}' is not BERT; attnviz runs BERT encoders (model_type 'bert'), such as bert-base-uncased or all-MiniLM-L6-v2"
            )))
        }
        None => {
            return Err(unsupported(format!(
                "no model_type and architectures {:?} are not BERT",
                raw.architectures.unwrap_or_default()
            )))
        }
    }
    if let Some(p) = raw.position_embedding_type.as_deref() {
        if p != "absolute" {
            return Err(unsupported(format!(
                "position_embedding_type '{p}' is not supported; only 'absolute' position embeddings are"
            )));
        }
    }
    if raw.is_decoder == Some(true) || raw.add_cross_attention == Some(true) {
        return Err(unsupported(
            "it is a BERT decoder (is_decoder/add_cross_attention); attnviz runs bidirectional encoders".into(),
        ));
    }

    let act_name = match &raw.hidden_act {
        None | Some(serde_json::Value::Null) => "gelu".to_string(),
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(other) => return Err(invalid(format!("hidden_act {other} is not a name"))),
    };
    let hidden_act = Activation::parse(&act_name).ok_or_else(|| {
        unsupported(format!(
            "hidden_act '{act_name}' is not supported; use gelu, gelu_new, gelu_pytorch_tanh, gelu_fast or relu"
        ))
    })?;

    // transformers' BertConfig defaults, used where a field is missing or null.
    let cfg = BertConfig {
        vocab_size: raw.vocab_size.unwrap_or(30522),
        hidden_size: raw.hidden_size.unwrap_or(768),
        num_hidden_layers: raw.num_hidden_layers.unwrap_or(12),
        num_attention_heads: raw.num_attention_heads.unwrap_or(12),
        intermediate_size: raw.intermediate_size.unwrap_or(3072),
        hidden_act,
        max_position_embeddings: raw.max_position_embeddings.unwrap_or(512),
        type_vocab_size: raw.type_vocab_size.unwrap_or(2),
        layer_norm_eps: raw.layer_norm_eps.unwrap_or(1e-12),
    };
    let positive = [
        ("vocab_size", cfg.vocab_size),
        ("hidden_size", cfg.hidden_size),
        ("num_hidden_layers", cfg.num_hidden_layers),
        ("num_attention_heads", cfg.num_attention_heads),
        ("intermediate_size", cfg.intermediate_size),
        ("max_position_embeddings", cfg.max_position_embeddings),
        ("type_vocab_size", cfg.type_vocab_size),
    ];
    for (name, value) in positive {
        if value == 0 {
            return Err(invalid(format!("{name} is 0")));
        }
    }
    if !(cfg.layer_norm_eps.is_finite() && cfg.layer_norm_eps > 0.0) {
        return Err(invalid(format!(
            "layer_norm_eps {} is not a positive number",
            cfg.layer_norm_eps
        )));
    }
    if cfg.hidden_size % cfg.num_attention_heads != 0 {
        return Err(invalid(format!(
            "hidden_size {} is not divisible by num_attention_heads {}",
            cfg.hidden_size, cfg.num_attention_heads
        )));
    }
    if let Some(e) = raw.embedding_size {
        if e != cfg.hidden_size {
            return Err(unsupported(format!(
                "embedding_size {e} differs from hidden_size {}; attnviz runs BERT, whose embeddings have the hidden size",
                cfg.hidden_size
            )));
        }
    }
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> Result<BertConfig, ConfigError> {
        parse(text, Path::new("config.json"))
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
    }

    #[test]
    fn accepts_old_config_without_model_type() {
        assert!(p(
            r#"{"architectures": ["BertModel"], "hidden_size": 64, "num_attention_heads": 2}"#
        )
        .is_ok());
        assert!(p(r#"{"hidden_size": 64, "num_attention_heads": 2}"#).is_ok());
    }

    #[test]
    fn rejects_other_architectures() {
        let err = p(r#"{"model_type": "roberta"}"#).unwrap_err().to_string();
        assert!(err.contains("model_type 'roberta' is not BERT"), "{err}");
        let err = p(r#"{"architectures": ["DistilBertModel"]}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("not BERT"), "{err}");
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
        let err = act("swish").unwrap_err().to_string();
        assert!(err.contains("hidden_act 'swish' is not supported"), "{err}");
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
    fn rejects_decoders_and_bad_values() {
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
            .contains("not a valid BERT config"));
        assert!(p("not json").is_err());
    }
}
