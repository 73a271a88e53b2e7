//! attnviz-formats: attention as files. The JSON documents ([`json`]: written here, read back
//! by [`import`]), saved captures ([`save`]: layer by layer, read back by [`import`]), and
//! arrays from NumPy files.

pub mod doc;
pub mod import;
pub mod json;
pub mod save;

// The layers below, under the names this crate's code has always used.
use attnviz_analysis as analysis;
use attnviz_core::{attention, choice, output};
use attnviz_model as model;
