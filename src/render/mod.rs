//! Renderers: each takes an [`crate::Attention`] (plus analysis results) and options, and writes
//! one kind of output. None of them knows the model exists.

pub(crate) mod colormap;
mod colormap_tables;
pub mod fonts;
pub mod html;
pub mod image;
pub mod json;
pub mod stats_table;
pub mod terminal;
