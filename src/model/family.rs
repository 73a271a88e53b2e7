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

use super::capture::SequenceCapture;
use super::decoder::CausalLm;
use super::error::Error;
use super::formats::config::{ConfigError, ConfigFile};
use super::formats::validate::{self, ConfigCount, ConfigDim};
use super::formats::weights::{Anchor, Checkpoint};
use super::kernels::Mask;
use super::seq2seq::Seq2SeqNet;
use super::{albert, bart, bert, distilbert, electra, gpt2, llama, roberta, t5};
use crate::attention::PositionScheme;

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

/// One model family: how to recognise its config and read its checkpoints.
pub struct Family {
    /// Its name for people (`RoBERTa`).
    pub name: &'static str,
    /// The `model_type` values it runs (`roberta`).
    pub model_types: &'static [&'static str],
    /// Class-name prefixes in `architectures` that mark its configs when `model_type` is
    /// missing (`Roberta` for `RobertaForMaskedLM`).
    pub class_prefixes: &'static [&'static str],
    /// The tensor whose stored name reveals the checkpoint's key prefix.
    pub anchor: Anchor,
    /// Read its config from config.json.
    pub config: fn(&ConfigFile) -> Result<Box<dyn FamilyConfig>, ConfigError>,
}

/// A family's configuration, read and checked.
pub trait FamilyConfig {
    /// The config values that size tensors, as the tensor dimensions they must equal, and the
    /// counts of numbered blocks the checkpoint must hold.
    fn checks(&self) -> (Vec<ConfigDim>, Vec<ConfigCount>);

    /// Build the network from the checkpoint (after [`FamilyConfig::checks`] passed), reading
    /// and checking every tensor it needs.
    fn build(&self, ckpt: &Checkpoint) -> Result<Box<dyn Network>, Error>;
}

/// What a network is, in terms every family shares: what callers need to size, check and label
/// its inputs and captures.
#[derive(Clone, Debug, PartialEq)]
pub struct Architecture {
    /// The family's name (`ALBERT`).
    pub family: &'static str,
    /// config.json's `model_type` (`albert`).
    pub model_type: String,
    /// Attention maps captured per input: one per layer run (ALBERT runs `inner_group_num`
    /// layers per hidden layer, and each counts).
    pub layers: usize,
    /// Query heads per layer.
    pub heads: usize,
    /// Key/value heads per layer (`heads` unless grouped-query attention).
    pub kv_heads: usize,
    /// The key/value head each query head reads (the identity unless grouped-query attention).
    pub kv_head: Vec<usize>,
    /// Size of one head's vectors.
    pub head_dim: usize,
    /// Width of the hidden state.
    pub hidden_size: usize,
    /// Vocabulary size: token ids must be below it.
    pub vocab_size: usize,
    /// The longest input in tokens, special tokens included.
    pub max_positions: usize,
    /// Segment (token type) ids the model takes; 0 when it has none (DistilBERT).
    pub token_types: usize,
    /// Whether transformers passes the tokenizer's segment ids to this model. When not (its
    /// tokenizer returns no `token_type_ids` in transformers 5: RoBERTa, XLM-R, ALBERT), the
    /// model sees zeros, and so it does here.
    pub tokenizer_types: bool,
    /// Which keys a query sees.
    pub mask: Mask,
    /// The sliding attention window of a decoder that has one (Mistral): a query sees at most
    /// this many keys. attnviz computes full causal attention, so longer inputs are refused.
    pub sliding_window: Option<usize>,
    /// How the model encodes positions (rotary: the captured q and k are the rotated ones).
    pub positions: PositionScheme,
}

impl Architecture {
    /// `heads` query heads, each with its own key/value head.
    pub fn identity_heads(heads: usize) -> Vec<usize> {
        (0..heads).collect()
    }

    /// Whether the model can tell the two sentences of a pair apart: by segment ids, or by the
    /// separators its tokenizer puts between them when it takes no segment ids.
    pub fn accepts_pairs(&self) -> bool {
        self.mask == Mask::Bidirectional && (!self.tokenizer_types || self.token_types >= 2)
    }

    /// The longest input the network runs exactly: its positions, and its sliding window where
    /// it has one.
    pub fn longest_input(&self) -> usize {
        self.sliding_window
            .map_or(self.max_positions, |w| w.min(self.max_positions))
    }
}

/// One padded batch of token ids.
#[derive(Clone, Copy, Debug)]
pub struct Batch<'a> {
    /// Token ids `[sequences · tokens]`, each sequence right-padded to `tokens`.
    pub ids: &'a [u32],
    /// Segment ids, laid out as `ids`.
    pub types: &'a [u32],
    /// Each sequence's real length (at least 1).
    pub lengths: &'a [usize],
    /// The padded length.
    pub tokens: usize,
}

/// A family's network with its weights.
pub trait Network: Send + Sync {
    /// Its shape, in family-independent terms.
    fn architecture(&self) -> &Architecture;

    /// Run a batch whose ids, types and lengths the caller checked against
    /// [`Network::architecture`], filling one capture per sequence (sized by
    /// [`SequenceCapture::new`] for its length) in place. Returns the last hidden state,
    /// `[sequences · tokens, hidden_size]` (rows of padding included).
    fn forward(&self, batch: &Batch<'_>, captures: &mut [SequenceCapture]) -> Vec<f32>;

    /// The next-token side of a decoder (logits, a KV cache) for generation; `None` for
    /// encoders.
    fn causal_lm(&self) -> Option<&dyn CausalLm> {
        None
    }

    /// The encoder–decoder side (encoder, decoder with cross-attention, head) of BART, T5 and
    /// Marian; `None` for the others.
    fn seq2seq(&self) -> Option<&Seq2SeqNet> {
        None
    }
}

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
