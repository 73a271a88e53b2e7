//! [`ReportError`]: why a run's outputs could not be written.

use crate::analysis::AnalysisError;
use crate::attention::AttentionKind;
use crate::attention::KindError;
use crate::output::OutputError;
use crate::render::image::ImageError;

use super::select::SelectionFault;

/// Why [`super::write`] (or [`super::Plan::check`]) stopped. The front end words each (the
/// command line with its flags, Python with its keywords).
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The plan's kind is not one of the run's.
    #[error("{0}")]
    Kind(#[from] KindError),
    /// The plan's layer or head does not fit the attention.
    #[error(transparent)]
    Selection(#[from] SelectionFault),
    /// Building the word-level or special-excluded view.
    #[error(transparent)]
    Analysis(#[from] AnalysisError),
    /// Drawing or writing a figure (a query off the picture's grid among them).
    #[error(transparent)]
    Image(#[from] ImageError),
    /// Writing a file.
    #[error(transparent)]
    Output(#[from] OutputError),
    /// Writing the terminal view or a table.
    #[error("cannot write to the terminal: {0}")]
    Terminal(std::io::Error),
    /// A picture's query or rollout options, for attention without a picture.
    #[error(
        "the query and the rollout's head fusion draw on a picture, and this attention has none"
    )]
    NoPicture,
    /// A rollout figure of attention that has no units of its own to roll out through
    /// (cross-attention).
    #[error("the rollout follows the residual stream through one side's own units; {} attention has none", .kind.as_str())]
    RolloutWithoutOwnUnits {
        /// The kind shown.
        kind: AttentionKind,
    },
    /// Figures or a report folder asked of a summarised run, which keeps no matrix to draw.
    #[error("a summarised run keeps no attention matrix to draw: it writes its summaries to the terminal, the JSON export and the HTML report")]
    SummarisedDrawing,
    /// [`super::write_summarised`] given a run that was not summarised.
    #[error("this run was not summarised")]
    NotSummarised,
    /// A rollout asked of a capture of only some layers.
    #[error("attention rollout multiplies every layer's attention, and only some were captured")]
    RolloutNeedsEveryLayer,
}
