//! attnviz: see what a Transformer's attention heads look at.
//!
//! The pipeline is load → tokenize → encode (capture) → analyse → render. One value,
//! [`Attention`], carries the captured attention from the encoder to every analysis and renderer;
//! renderers never touch the model. Layers and heads are numbered from 0 everywhere.
//!
//! # Where to start
//!
//! - [`Model`] loads a model from a local folder, a GGUF file or a Hugging Face repo id
//!   ([`Model::load`], [`Model::from_dir`]) and encodes text or an image ([`Model::encode`] with
//!   [`EncodeOptions`]).
//! - [`RunRequest`] is one run as the command line makes it: the text (or [`ImageSource`]), a
//!   pair, a target, generation, the layers to capture and the analyses to add; its
//!   [`RunRequest::run`] gives a [`Run`], whose [`AttentionSet`] holds the [`Attention`] of each
//!   kind (one self-attention, or an encoder–decoder's three), labelled by [`ModelInfo`].
//! - [`Analysis::compute_view`] gives per-head statistics, head means and the rollout;
//!   [`rollout`], [`alti()`], [`norm_weights`] and the [`analysis`] module hold the rest.
//! - [`render`] draws an attention (terminal, PNG/SVG, the HTML report) and [`save`] and
//!   [`import`] write and read it (JSON, `.npz`, safetensors).
//! - Errors are typed: [`ModelError`] (loading and running a model, with [`InputError`] for
//!   input it refuses), [`RequestError`] (a request that does not fit its model),
//!   [`AnalysisError`] and [`ImportError`]. Each displays as one line that says what was wrong
//!   and what to do.
//!
//! The library knows nothing of the command line: each part takes its own option types (named
//! through [`choice::Choice`]); the `attnviz` binary's application layer turns flags into them.
//! Every layer crate is also here under its module name ([`model`], [`analysis`], [`render`],
//! ...), for what the list above leaves out.
//!
//! ```no_run
//! use attnviz::{Model, RunRequest};
//!
//! let model = Model::from_dir("models/all-MiniLM-L6-v2".as_ref())?;
//! let run = RunRequest::new("The cat sat on the mat.").run(&model, &attnviz::progress::Silent)?;
//! let attention = run.set.primary();
//! // Layer 0, head 3: a queries × keys matrix, row-major (row = query, column = key).
//! let head = attention.head(0, 3);
//! let keys = attention.n_keys();
//! println!("{:?} attends to {:?}", attention.tokens()[1], &head[keys..2 * keys]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

pub mod corpus;
mod recording;
pub mod report;
pub mod request;

pub use attnviz_analysis as analysis;
pub use attnviz_analysis::compare;
pub use attnviz_core::attention;
pub use attnviz_core::{cancel, choice, output, progress};
#[doc(hidden)]
pub use attnviz_core::{cleanup, small_file, threads};
pub use attnviz_formats::{doc, import, save};
pub use attnviz_model as model;
pub use attnviz_model::{pixels, tokenize};
pub use attnviz_render as render;

pub use attention::{Attention, AttentionSet, HeadSel, Level, ModelInfo, QueryKey};

// The short list a user of the library needs, at the crate root.
pub use attnviz_analysis::{
    alti, norm_weights, rollout, Analysis, AnalysisError, ViewOptions, Weighting,
};
pub use attnviz_formats::import::ImportError;
pub use attnviz_model::pixels::ImageSource;
pub use attnviz_model::{EncodeOptions, Encoding, Error as ModelError, InputError, Model};
pub use cancel::Cancel;
pub use progress::Progress;
pub use request::{RequestError, Run, RunRequest, SummaryConflict};

/// The README's examples, compiled as doctests (`cargo test --doc -p attnviz`).
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
