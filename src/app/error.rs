//! The application's one error type, [`Error`], and [`note`], a line on standard error: shared
//! by every flow of the command line.

use std::io;

use attnviz::analysis::AnalysisError;
use attnviz::output::OutputError;
use attnviz::render::image::ImageError;

use super::words;

/// Anything that stops a run. Each displays as one line that says what to do.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Loading or running the model.
    #[error("{}", words::model(.0))]
    Model(#[from] attnviz::model::Error),
    /// Writing an output file.
    #[error(transparent)]
    Output(#[from] OutputError),
    /// Building the word-level or special-excluded view.
    #[error("{}", words::analysis(.0))]
    Analysis(#[from] AnalysisError),
    /// Drawing or writing an image.
    #[error("{}", words::image(.0))]
    Image(#[from] ImageError),
    /// Writing a run's outputs.
    #[error("{}", words::report(.0))]
    Report(#[from] attnviz::report::ReportError),
    /// Arguments that don't fit the model or each other.
    #[error("{0}")]
    Usage(String),
    /// Reading the text from standard input.
    #[error("cannot read the text from standard input: {0}")]
    Stdin(io::Error),
    /// Writing the terminal view or the statistics table.
    #[error("cannot write to the terminal: {0}")]
    Stdout(io::Error),
    /// Corpus mode (`--input`).
    #[error(transparent)]
    Corpus(#[from] attnviz::corpus::CorpusError),
    /// Reading attention from a file (`attnviz render`).
    #[error("{}", words::import(.0))]
    Import(#[from] attnviz::import::ImportError),
    /// `attnviz merge`.
    #[error(transparent)]
    Merge(#[from] attnviz::corpus::merge::MergeError),
    /// A corpus run stopped by a signal (its message worded for the command line).
    #[error("{message}")]
    Interrupted {
        /// What was kept, and how to continue.
        message: String,
        /// The signal (2 for SIGINT, 15 for SIGTERM).
        signal: i32,
    },
}

impl Error {
    /// The exit status for this error: 130 for a run stopped by Ctrl-C and 143 by SIGTERM (as
    /// when the signal ends it at once), 1 for everything else.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Interrupted { signal, .. } => u8::try_from(128 + signal).unwrap_or(130),
            _ => 1,
        }
    }
}

/// A line on standard error that must never fail the run (a closed stderr is ignored).
pub(super) fn note(msg: &str) {
    // Notes quote file contents and names too: escaped as errors are (`main`).
    let _ = attnviz::render::term::write_message(&mut io::stderr(), msg);
}
