//! How long library operations report how far they are: through a [`Progress`] the caller
//! passes in. The library never draws; the application layer (the CLI's bars on stderr,
//! Python's tqdm) decides what a report looks like, or ignores it ([`Silent`]).

use std::sync::Arc;

/// What is under way.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stage {
    /// A model file being downloaded; units are bytes.
    Download {
        /// The file's name in the model repository.
        file: String,
    },
    /// Lines of a corpus being run; units are lines.
    Corpus,
    /// Tokens being generated; units are tokens.
    Generate,
}

/// Told about a stage as it runs. Every method has an empty default, so an implementation
/// picks what it shows. Called from worker threads, hence `Send + Sync` and `&self`.
pub trait Progress: Send + Sync {
    /// `stage` begins; `total` units when known.
    fn start(&self, _stage: &Stage, _total: Option<u64>) {}
    /// `units` more are done.
    fn advance(&self, _units: u64) {}
    /// A line for the user (a warning) that a drawn bar must not tear.
    fn message(&self, _line: &str) {}
    /// The stage is over.
    fn finish(&self) {}
}

/// Reports nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct Silent;

impl Progress for Silent {}

/// A shared [`Silent`], for options structs that hold an `Arc<dyn Progress>`.
pub fn silent() -> Arc<dyn Progress> {
    Arc::new(Silent)
}
