//! attnviz: see what a Transformer's attention heads look at.
//!
//! The pipeline is load → tokenize → encode (capture) → analyse → render. One value,
//! [`Attention`], carries the captured attention from the encoder to every analysis and renderer;
//! renderers never touch the model. Layers and heads are numbered from 0 everywhere.

pub mod analysis;
pub mod attention;
pub mod checks;
pub mod cleanup;
pub mod cli;
pub mod corpus;
pub mod model;
pub mod output;
pub mod render;
pub mod run;
pub mod threads;
pub mod tokenize;

pub use attention::{Attention, HeadSel, Level, ModelInfo, QueryKey};
