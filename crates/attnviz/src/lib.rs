//! attnviz: see what a Transformer's attention heads look at.
//!
//! The pipeline is load → tokenize → encode (capture) → analyse → render. One value,
//! [`Attention`], carries the captured attention from the encoder to every analysis and renderer;
//! renderers never touch the model. Layers and heads are numbered from 0 everywhere.
//!
//! The library knows nothing of the command line: each part takes its own option types (named
//! through [`choice::Choice`]); the `attnviz` binary's application layer turns flags into them.

pub mod corpus;
pub mod report;
pub mod request;

pub use attnviz_analysis as analysis;
pub use attnviz_analysis::compare;
pub use attnviz_core::attention;
pub use attnviz_core::{cancel, choice, cleanup, output, progress, small_file, threads};
pub use attnviz_formats::{import, save};
pub use attnviz_model as model;
pub use attnviz_model::{pixels, tokenize};
pub use attnviz_render as render;

pub use attention::{Attention, AttentionSet, HeadSel, Level, ModelInfo, QueryKey};
