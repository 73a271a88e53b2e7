//! Every helper of the integration tests, in one place (the suite mounts it as
//! `crate::support`; `tests/hub_environment.rs` and the benchmarks mount it with `#[path]`):
//!
//! - [`attention`]: synthetic attention values (softmax of random query/key vectors) and the
//!   sidecar the browser tests read;
//! - [`cli`]: running the `attnviz` binary (plain or under memory and time limits), the
//!   fixtures, and checking what a run left behind; the page's node tests;
//! - [`data`]: the committed JSON that tests compare against;
//! - [`engine`]: tiny random BERT checkpoints written on the fly, and comparisons of forward
//!   passes and tensors;
//! - [`models`]: where the real models of `scripts/fetch-*.sh` live;
//! - [`pictures`]: hostile pictures (progressive JPEGs of many scans, PNG profile bombs).

// Each crate that mounts this uses only some of it.
#![allow(dead_code, unused_imports)]

pub mod attention;
pub mod cli;
pub mod data;
pub mod engine;
pub mod models;
pub mod pictures;
