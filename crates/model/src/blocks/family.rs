//! What a family is, as data the shared code reads: a [`Family`] is a static (its name, how to
//! recognise its config, where its checkpoints' key prefix shows, its [`Quirks`]) with a
//! function that reads its config into a [`FamilyConfig`], which says which config values size
//! which tensors and builds the family's [`Network`]. Whatever sets a family apart is a value
//! here that shared code reads, never a test of the family's name.

use std::path::Path;

use super::network::Network;
use crate::error::Error;
use crate::formats::config::{ConfigError, ConfigFile};
use crate::formats::gguf::DecoderParams;
use crate::formats::source::{TokenizerFiles, TOKENIZERS};
use crate::formats::tensors::TensorMap;
use crate::formats::validate::{ConfigCount, ConfigDim};
use crate::formats::weights::{Anchor, Checkpoint};
use crate::tokenize::{self, TextTokenizer};

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
    /// What else sets it apart, for the code outside its file.
    pub quirks: Quirks,
}

/// A family's particulars that code outside its file acts on, as data: where its tokenizer's
/// files are, how an encoder–decoder's target side differs from its source side, and how its
/// GGUF files are read. [`Quirks::NONE`] for a family without any.
#[derive(Clone, Copy)]
pub struct Quirks {
    /// The ways its checkpoints store their tokenizer, by preference: what a hub download
    /// fetches and a local folder must hold ([`TOKENIZERS`] for most).
    pub tokenizer_files: &'static [TokenizerFiles],
    /// The tokenizer of the target side where it is not the source's (Marian's `target.spm`),
    /// built from the model folder; `Ok(None)` when the folder has none.
    pub target_tokenizer: Option<TargetTokenizer>,
    /// The first token of a teacher-forced decoder input.
    pub decoder_start: DecoderStart,
    /// Whether the target's labels end with a language code: the tokenizer appends the source
    /// language's (tokenizer_config.json's `src_lang`) to every text, and the target gets
    /// `tgt_lang`'s in its place, as mBART's tokenizer does for `text_target`.
    pub target_language_code: bool,
    /// How its GGUF files are read; `None`: it has none.
    pub gguf: Option<GgufReader>,
}

impl Quirks {
    /// Nothing particular: tokenizer.json or vocab.txt, the target read as the source,
    /// `decoder_start_token_id` first, no GGUF files.
    pub const NONE: Quirks = Quirks {
        tokenizer_files: TOKENIZERS,
        target_tokenizer: None,
        decoder_start: DecoderStart::Config,
        target_language_code: false,
        gguf: None,
    };
}

/// Builds the target side's tokenizer from a model folder.
pub type TargetTokenizer = fn(&Path) -> Result<Option<TextTokenizer>, tokenize::Error>;

/// Where a teacher-forced decoder input starts, before the labels shifted right.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecoderStart {
    /// config.json's `decoder_start_token_id` (BART, T5, Marian; transformers'
    /// `shift_tokens_right`).
    Config,
    /// The labels' last token, wrapped to the front: the target language's code (mBART's
    /// `shift_tokens_right`).
    LastLabel,
}

/// How a family reads GGUF files: the values of `general.architecture` it reads, and the
/// config their metadata describes.
#[derive(Clone, Copy)]
pub struct GgufReader {
    /// `general.architecture` values (`llama`).
    pub architectures: &'static [&'static str],
    /// The config of a file's metadata (`origin` names the file in errors).
    pub config: GgufConfigReader,
}

/// Reads a family's config from a GGUF file's metadata (`origin` names the file in errors).
pub type GgufConfigReader = fn(&DecoderParams, &str) -> Result<Box<dyn GgufConfig>, Error>;

/// A family's config read from a GGUF file's metadata.
pub trait GgufConfig: Send + Sync {
    /// Build the decoder stack from the file's tensors under transformers' names (matrices
    /// kept in their block format, norms and biases dequantised).
    fn stack(&self, tensors: &TensorMap) -> Result<crate::blocks::decoder::DecoderStack, Error>;

    /// The network [`GgufConfig::stack`] builds, boxed.
    fn build(&self, tensors: &TensorMap) -> Result<Box<dyn Network>, Error> {
        Ok(Box::new(self.stack(tensors)?))
    }
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
