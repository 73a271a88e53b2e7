//! The second half of the pipeline: from a finished run to its outputs.
//!
//! A front end describes the outputs it wants once, as a [`Plan`] (the view, the kind and the
//! layer/head selection, the files, the terminal view and the tables, and their options), and
//! hands a finished run ([`Finished`]: its attention, what else it [`Measured`], the settings
//! for the report's About panel) to [`write()`], which computes the analyses the plan needs and
//! writes every output. The command line, corpus mode, `attnviz serve` and the Python package
//! all go through it (or through the one part of it they need: [`write_json`] for corpus mode's
//! per-sentence files, [`html_kinds`] for a served report), so an output looks the same
//! whichever front end wrote it.
//!
//! [`Plan::check`] refuses, before anything is written, what the plan asks of an attention that
//! cannot give it (a patch off the picture's grid, a picture option without a picture). Nothing
//! here prints: terminal text goes to the writers of a [`Sink`], notes to its callback, and
//! errors are typed ([`ReportError`]) for the front end to word.

mod analysed;
mod check;
mod error;
mod figures;
mod html;
mod json;
mod measured;
mod plan;
mod select;
mod summarised;
mod terminal;
mod write;

pub use analysed::{analyse, Analysed, InView};
pub use error::ReportError;
pub use html::html_kinds;
pub use json::write_json;
pub use measured::Measured;
pub use plan::{
    folder_files, FigurePlan, Files, HtmlPlan, JsonPlan, Plan, TerminalPlan, TerminalView,
    REPORT_HTML, REPORT_JSON,
};
pub use select::{Among, Choose, SelectionFault};
pub use summarised::write_summarised;
pub use write::{write, Finished, Note, Sink};
