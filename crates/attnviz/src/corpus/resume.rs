//! Why a run cannot be resumed in its output folder, as a typed error: the facts, and apart
//! from them what to do ([`ResumeFix`]), which each front end words in its own terms.

use super::damage::JournalError;
use super::partial::{Conflict, PartialError, PARTIAL_FILE};
use super::{thousands, ResumeFix};

/// Why a run cannot be resumed. Each displays as words that follow "cannot resume the run in
/// DIR: ", and are followed by [`ResumeProblem::fix`].
#[derive(Debug, thiserror::Error)]
pub enum ResumeProblem {
    /// Per-sentence files that no partial file describes.
    #[error("it holds per-sentence files but no {PARTIAL_FILE} (written by a run of an older attnviz, or another program)")]
    NoPartialFile,
    /// The partial file cannot be read back.
    #[error("{PARTIAL_FILE}: {0}")]
    PartialFile(PartialError),
    /// The earlier run differs from this one.
    #[error(transparent)]
    Conflict(Conflict),
    /// Sums of another shape than the model's.
    #[error("{PARTIAL_FILE} holds sums for {layers} layers × {heads} heads, and the model has {model_layers} × {model_heads}; the file is damaged or was edited")]
    Shape {
        /// Layers of the sums.
        layers: usize,
        /// Heads of the sums.
        heads: usize,
        /// The model's layers.
        model_layers: usize,
        /// The model's heads.
        model_heads: usize,
    },
    /// A journal that cannot be used.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// An input shorter than what the earlier run had done.
    #[error("{input} has {} lines, and the earlier run had done {}", thousands(*.lines as u64), thousands(*.done as u64))]
    InputShorter {
        /// The input's name.
        input: String,
        /// Its lines.
        lines: usize,
        /// The lines the earlier run had done.
        done: usize,
    },
    /// An input whose first lines are not the ones the earlier run read.
    #[error("the first {} lines of {input} are not the ones the earlier run read (SHA-256 {sha256}, {bytes} bytes; the earlier run's: {earlier_sha256}, {earlier_bytes} bytes)", thousands(*.lines as u64))]
    InputChanged {
        /// The lines compared.
        lines: usize,
        /// The input's name.
        input: String,
        /// The start of their SHA-256 now.
        sha256: String,
        /// Their bytes now.
        bytes: u64,
        /// The start of the SHA-256 the earlier run recorded.
        earlier_sha256: String,
        /// The bytes it recorded.
        earlier_bytes: u64,
    },
    /// An input shorter than the journal's last line.
    #[error("{input} has {} lines, but the earlier run had finished line {} (its journal says so)", thousands(*.lines as u64), thousands(*.last as u64))]
    ShorterThanJournal {
        /// The input's name.
        input: String,
        /// Its lines.
        lines: usize,
        /// The journal's last line.
        last: usize,
    },
    /// A journaled line that is not the one the earlier run read.
    #[error("line {} of {input} is not the one the earlier run read (the input through it: SHA-256 {sha256}, {bytes} bytes; the earlier run's journal: {earlier_sha256}, {earlier_bytes} bytes)", thousands(*.line as u64))]
    LineChanged {
        /// The line.
        line: usize,
        /// The input's name.
        input: String,
        /// The start of the SHA-256 through it now.
        sha256: String,
        /// Bytes through it now.
        bytes: u64,
        /// The start of the SHA-256 the journal holds.
        earlier_sha256: String,
        /// The bytes it holds.
        earlier_bytes: u64,
    },
}

impl ResumeProblem {
    /// What to do about it: start over, resume with what the earlier run used, … (nothing to
    /// say for a journal that cannot be opened or read).
    pub fn fix(&self) -> ResumeFix {
        match self {
            ResumeProblem::NoPartialFile | ResumeProblem::PartialFile(_) => ResumeFix::StartOver,
            ResumeProblem::Conflict(_) => ResumeFix::SameSettings,
            ResumeProblem::Shape { .. }
            | ResumeProblem::Journal(JournalError::Impossible { .. }) => ResumeFix::Damaged,
            ResumeProblem::Journal(JournalError::Open { .. } | JournalError::Read { .. }) => {
                ResumeFix::None
            }
            ResumeProblem::InputShorter { .. } => ResumeFix::SameInput,
            ResumeProblem::InputChanged { .. }
            | ResumeProblem::ShorterThanJournal { .. }
            | ResumeProblem::LineChanged { .. } => ResumeFix::SameInputOrStartOver,
        }
    }
}
