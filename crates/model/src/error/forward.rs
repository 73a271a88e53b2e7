//! A forward pass that failed after its input was accepted.

use crate::attention::ShapeError;

/// Why a forward pass failed: a computation that went wrong (a bug, or weights that overflow
/// on this input), with the facts that say where.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    /// A tensor operation failed (its first line).
    #[error("{}", crate::formats::candle_message(.0))]
    Tensor(#[source] candle_core::Error),
    /// The network does not give the value vectors the norm-based analyses need.
    #[error("{family} does not give the value vectors the norm-based analyses need")]
    NoValueVectors {
        /// The model's family.
        family: &'static str,
    },
    /// A logit of the logit lens that is not finite.
    #[error("the logit lens met a logit that is not finite (the weights overflow on this input)")]
    LensLogit,
    /// Logits holding NaN.
    #[error("the model's logits hold NaN (token {token}); the weights overflow on this input")]
    NanLogit {
        /// The first token whose logit is NaN.
        token: usize,
    },
    /// The captured attention is not of the shape its description says.
    #[error(transparent)]
    Shape(#[from] ShapeError),
}
