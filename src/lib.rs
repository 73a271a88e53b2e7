//! attnviz: see what a Transformer's attention heads look at.
//!
//! The pipeline is load → tokenize → encode (capture) → analyse → render. One value,
//! [`Attention`], carries the captured attention from the encoder to every analysis and renderer;
//! renderers never touch the model. Layers and heads are numbered from 0 everywhere.
//!
//! The library knows nothing of the command line: each part takes its own option types (named
//! through [`choice::Choice`]); the `attnviz` binary's application layer turns flags into them.

pub mod analysis;
pub mod attention;
pub mod cancel;
pub mod choice;
pub mod cleanup;
pub mod compare;
pub mod corpus;
pub mod import;
pub mod model;
pub mod output;
pub mod pixels;
pub mod progress;
pub mod render;
pub mod request;
pub mod save;
pub mod small_file;
pub mod threads;
pub mod tokenize;

pub use attention::{Attention, AttentionSet, HeadSel, Level, ModelInfo, QueryKey};
