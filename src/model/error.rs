//! What can go wrong loading or running a model, as one type for the whole of `model/`.

use super::formats::config::ConfigError;
use super::formats::gguf::GgufError;
use super::formats::source::SourceError;
use super::formats::validate::BadRow;
use super::formats::weights::WeightsError;
use crate::tokenize;

/// Anything that can go wrong loading or running a model. Every variant displays as one line
/// that says what was wrong and what to do.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Finding the model's files.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// Reading config.json.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Reading the weights.
    #[error(transparent)]
    Weights(#[from] WeightsError),
    /// Reading a GGUF file.
    #[error(transparent)]
    Gguf(#[from] GgufError),
    /// Loading the tokenizer or tokenizing.
    #[error(transparent)]
    Tokenize(#[from] tokenize::Error),
    /// Invalid input to a forward pass.
    #[error("{0}")]
    Input(String),
    /// The captured attention is not a set of probability distributions (the weights overflow
    /// on this input); nothing is written from it.
    #[error(transparent)]
    Attention(#[from] BadRow),
    /// The captured attention would not fit in memory.
    #[error("{0}")]
    TooBig(String),
    /// The tensor computation failed (a bug; the message says where).
    #[error("forward pass failed: {0}")]
    Forward(String),
}

impl From<candle_core::Error> for Error {
    fn from(e: candle_core::Error) -> Self {
        Error::Forward(super::formats::candle_message(&e))
    }
}
