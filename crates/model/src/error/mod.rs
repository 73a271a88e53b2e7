//! What can go wrong loading or running a model, as one type for the whole of `model/`.

use super::formats::config::ConfigError;
use super::formats::gguf::GgufError;
use super::formats::source::SourceError;
use super::formats::validate::BadRow;
use super::formats::weights::WeightsError;
use crate::tokenize;

mod forward;
mod input;

pub use forward::ForwardError;
pub use input::{
    ConfigFileProblem, GgufMetadataProblem, InputError, MultimodalUnsupported, VisionUnsupported,
};

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
    Gguf(Box<GgufError>),
    /// Loading the tokenizer or tokenizing.
    #[error(transparent)]
    Tokenize(#[from] tokenize::Error),
    /// Input the model cannot run, or a file of it that it cannot use.
    #[error(transparent)]
    Input(Box<InputError>),
    /// Reading an audio file.
    #[error(transparent)]
    Audio(Box<crate::audio::AudioError>),
    /// Reading a speech model's preprocessor_config.json.
    #[error(transparent)]
    Features(Box<crate::audio::FeatureConfigError>),
    /// The captured attention is not a set of probability distributions (the weights overflow
    /// on this input); nothing is written from it.
    #[error(transparent)]
    Attention(#[from] BadRow),
    /// The captured attention would not fit in memory.
    #[error(transparent)]
    TooBig(#[from] CaptureTooBig),
    /// An analysis's re-runs of the model would take longer than its time limit.
    #[error(transparent)]
    TooSlow(#[from] super::rerun::TooSlow),
    /// A target (teacher forcing) given to a model without a decoder.
    #[error("{model} is not an encoder–decoder model ({family}), so it takes no target text")]
    NotSeq2Seq {
        /// The model's name.
        model: String,
        /// Its family.
        family: String,
    },
    /// A sentence pair given to a decoder, which reads one text.
    #[error("{model} is a decoder ({family}), which reads one text: sentence pairs are for encoders such as BERT")]
    PairOnDecoder {
        /// The model's name.
        model: String,
        /// Its family.
        family: String,
    },
    /// A token sequence longer than the model's positions.
    #[error("{tokens} tokens{}, but the model takes at most {max}; shorten the input", input::sequence_note(*.index))]
    TooManyTokens {
        /// Tokens in the sequence.
        tokens: usize,
        /// Which sequence of the batch (0: the only or first one).
        index: usize,
        /// The model's maximum.
        max: usize,
    },
    /// One side of an encoder–decoder's input is longer than its positions.
    #[error("the {which} is {tokens} tokens, but the model takes at most {max}; shorten it")]
    SideTooLong {
        /// `source` or `decoder`.
        which: String,
        /// Tokens it has.
        tokens: usize,
        /// The maximum.
        max: usize,
    },
    /// A choice of layers for an encoder–decoder, which captures all of them.
    #[error("capturing only some layers is not supported for encoder–decoder models ({family}): every layer of the encoder and the decoder is captured")]
    LayersOnSeq2Seq {
        /// The model's family.
        family: String,
    },
    /// A prompt that leaves no room for the tokens asked to be generated.
    #[error("the prompt is {tokens} tokens and {new} more were asked for, but the model takes at most {longest}; generate at most {} tokens or shorten the prompt", .longest.saturating_sub(*.tokens))]
    PromptTooLong {
        /// The prompt's tokens.
        tokens: usize,
        /// Tokens asked for.
        new: usize,
        /// The model's maximum.
        longest: usize,
    },
    /// A chat prompt asked of a model that has no chat template.
    #[error("{origin} carries no chat template ({searched}), so the prompt cannot be wrapped as a chat message")]
    NoChatTemplate {
        /// The file or folder searched.
        origin: String,
        /// Where in it a template would be.
        searched: String,
    },
    /// The target text of an encoder–decoder cannot be tokenized for the decoder.
    #[error(transparent)]
    Target(#[from] TargetError),
    /// The tensor computation failed (a bug; the message says where).
    #[error("forward pass failed: {0}")]
    Forward(Box<ForwardError>),
    /// A streamed capture's sink could not take a layer (its own message, e.g. a write error
    /// that names the file).
    #[error("{0}")]
    Sink(std::io::Error),
    /// The run was stopped: its [`crate::cancel::Cancel`] flag was set (a server request that
    /// timed out or whose client left).
    #[error("the run was cancelled")]
    Cancelled,
}

/// `bytes` for people: `4.5 GB`, `512 MB`.
pub fn format_bytes(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= 1e9 {
        format!("{:.1} GB", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.0} MB", b / 1e6)
    } else {
        format!("{:.0} kB", (b / 1e3).max(1.0))
    }
}

/// What a capture that does not fit would have held.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Capture {
    /// Self-attention of `layers` layers × `heads` heads over `tokens` tokens.
    SelfAttention {
        /// Layers captured.
        layers: usize,
        /// Heads per layer.
        heads: usize,
        /// Tokens of the longest sequence.
        tokens: usize,
        /// A hybrid model's token-mixing matrices captured beside it: `(layers, heads)`.
        mixing: Option<(usize, usize)>,
    },
    /// An encoder–decoder's three attentions.
    EncoderDecoder {
        /// Source tokens.
        source: usize,
        /// Decoder tokens.
        decoder: usize,
    },
    /// Summaries of `layers` layers × `heads` heads over `tokens` tokens, `top_k` keys per
    /// query ([`attnviz_core::attention::summary`]).
    Summary {
        /// Layers summarised.
        layers: usize,
        /// Heads per layer.
        heads: usize,
        /// Tokens.
        tokens: usize,
        /// Keys kept per query.
        top_k: usize,
    },
    /// The logit lens: `k` tokens at each of `stages` stages and `tokens` positions.
    LogitLens {
        /// Stages (the embeddings, then each layer).
        stages: usize,
        /// Positions.
        tokens: usize,
        /// Tokens kept per cell.
        k: usize,
    },
}

/// The captured attention would take more memory than the budget allows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaptureTooBig {
    /// What would have been captured.
    pub capture: Capture,
    /// Bytes it needs (`None`: more than a `u64` counts).
    pub needs: Option<u64>,
    /// The budget in bytes.
    pub budget: u64,
    /// Whether the caller gave the budget (else it is the default).
    pub budget_given: bool,
}

impl std::fmt::Display for CaptureTooBig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let budget = if self.budget_given {
            "memory budget given"
        } else {
            "default memory budget (half of this machine's memory)"
        };
        let fix = match self.capture {
            Capture::SelfAttention { layers, .. } if layers > 1 => {
                "capture fewer layers or use a shorter input"
            }
            Capture::SelfAttention { .. } => "use a shorter input",
            Capture::EncoderDecoder { .. } => {
                "use a shorter source or target, or generate fewer tokens"
            }
            Capture::LogitLens { .. } => "keep fewer tokens per cell or use a shorter input",
            Capture::Summary { .. } => {
                "keep fewer keys per query, summarise fewer layers or use a shorter input"
            }
        };
        write!(
            f,
            "{} needs {}, more than {} of the {budget}; {fix}",
            self.what(),
            self.needs_text(),
            format_bytes(self.budget)
        )
    }
}

impl std::error::Error for CaptureTooBig {}

impl CaptureTooBig {
    /// "capturing the attention of 12 layers × 12 heads for 512 tokens".
    pub fn what(&self) -> String {
        match self.capture {
            Capture::SelfAttention {
                layers,
                heads,
                tokens,
                mixing: None,
            } => format!(
                "capturing the attention of {layers} layers × {heads} heads for {tokens} tokens"
            ),
            Capture::SelfAttention {
                layers,
                heads,
                tokens,
                mixing: Some((ml, mh)),
            } => format!(
                "capturing the attention of {layers} layers × {heads} heads and the token mixing \
                 of {ml} layers × {mh} heads for {tokens} tokens"
            ),
            Capture::EncoderDecoder { source, decoder } => format!(
                "capturing the encoder, decoder and cross-attention for {source} source and \
                 {decoder} decoder tokens"
            ),
            Capture::LogitLens { stages, tokens, k } => format!(
                "the logit lens of {k} tokens per cell at {stages} stages × {tokens} positions"
            ),
            Capture::Summary {
                layers,
                heads,
                tokens,
                top_k,
            } => format!(
                "summarising {layers} layers × {heads} heads for {tokens} tokens ({top_k} keys \
                 per token)"
            ),
        }
    }

    /// The bytes needed, for people.
    pub fn needs_text(&self) -> String {
        self.needs.map_or_else(
            || "more bytes than a computer can address".to_string(),
            format_bytes,
        )
    }
}

/// Why a target text cannot be the decoder's input.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    /// Empty or only whitespace.
    #[error("the target is empty")]
    Empty,
    /// No tokens the model can read.
    #[error("the target contains no tokens the model can read")]
    NoTokens,
    /// Too many tokens for the decoder.
    #[error("the target is {tokens} tokens long (with the special tokens) but the decoder takes at most {max}; shorten it")]
    TooLong {
        /// Tokens it needs.
        tokens: usize,
        /// The decoder's maximum.
        max: usize,
    },
    /// More bytes than the decoder's byte limit.
    #[error("the target is {bytes} bytes long, more than the decoder can take (at most {limit} bytes are read); shorten it")]
    TooManyBytes {
        /// Its length.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
}

impl From<candle_core::Error> for Error {
    fn from(e: candle_core::Error) -> Self {
        Error::Forward(Box::new(ForwardError::Tensor(e)))
    }
}

// Boxed, so that a `Result<_, Error>` stays small however many facts a refusal carries.
impl From<GgufError> for Error {
    fn from(e: GgufError) -> Self {
        Error::Gguf(Box::new(e))
    }
}

impl Error {
    /// Whether a projector file could not be joined to its text model for what it is (not a
    /// projector, a type not read here, made for another kind or width of model, or a model
    /// without the picture tokens), rather than for being unreadable.
    pub fn is_projector_problem(&self) -> bool {
        matches!(
            self,
            Error::Input(i) if matches!(
                **i,
                InputError::NotAProjector { .. }
                    | InputError::UnknownProjector { .. }
                    | InputError::ProjectorText { .. }
                    | InputError::ProjectorWidth { .. }
                    | InputError::NoPictureToken { .. }
            )
        )
    }
}

impl From<InputError> for Error {
    fn from(e: InputError) -> Self {
        Error::Input(Box::new(e))
    }
}

impl From<ForwardError> for Error {
    fn from(e: ForwardError) -> Self {
        Error::Forward(Box::new(e))
    }
}

impl From<crate::audio::AudioError> for Error {
    fn from(e: crate::audio::AudioError) -> Error {
        Error::Audio(Box::new(e))
    }
}

impl From<crate::audio::FeatureConfigError> for Error {
    fn from(e: crate::audio::FeatureConfigError) -> Error {
        Error::Features(Box::new(e))
    }
}
