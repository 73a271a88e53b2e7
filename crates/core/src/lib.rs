//! attnviz-core: the types every other layer of attnviz shares. The captured attention
//! ([`Attention`], [`AttentionSet`]) and its units, the named choices of every option
//! ([`choice::Choice`]), progress reports, output files written whole or not at all, the text
//! escaping every view uses, and the run-time choice of SIMD code.
//!
//! Nothing here knows a model, an analysis or a renderer: those are the crates above
//! (`attnviz-model`, `attnviz-analysis`, `attnviz-formats`, `attnviz-render`, `attnviz`).

pub mod attention;
pub mod cancel;
pub mod choice;
pub mod cleanup;
pub mod escape;
pub mod output;
pub mod progress;
pub mod simd;
pub mod small_file;
pub mod threads;

pub use attention::{Attention, AttentionSet, HeadSel, Level, ModelInfo, QueryKey};
