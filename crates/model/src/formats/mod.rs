//! The bottom layer of `model/`: model files as they are stored, and nothing about what any
//! family does with them. Finding a model's files ([`source`]), config.json field by field
//! ([`config`]), checkpoints as named f32 tensors ([`weights`]: safetensors, and `.bin` through
//! [`pytorch`] and our bounded unpickler [`pickle`]), GGUF files ([`gguf`]), tensors by name
//! wherever they come from ([`tensors`]), and the checks that keep hostile files bounded
//! ([`validate`]).
//!
//! Nothing here imports `blocks/` or `families/`: what a family needs from its files (which
//! tokenizer files, which config values size which tensors) it says as data that these modules
//! read.

pub mod config;
mod config_problem;
pub mod ctranslate2;
pub mod gguf;
mod pages;
pub mod pickle;
pub mod pytorch;
pub mod source;
pub mod tensors;
pub mod validate;
pub mod weights;

/// A candle error, shown as the first line of its message, without the backtrace candle may
/// append.
#[derive(Debug, thiserror::Error)]
#[error("{}", candle_message(.0))]
pub struct CandleError(pub candle_core::Error);

/// A candle error as one line, without the backtrace that candle appends to its Display when
/// `RUST_BACKTRACE` is set.
pub(crate) fn candle_message(e: &candle_core::Error) -> String {
    use candle_core::Error as E;
    let text = match e {
        E::WithBacktrace { inner, .. } => return candle_message(inner),
        E::WithPath { inner, path } => format!("{}: {}", path.display(), candle_message(inner)),
        E::Context { inner, context } => format!("{context}: {}", candle_message(inner)),
        other => other.to_string(),
    };
    text.lines().next().unwrap_or_default().trim().to_string()
}
