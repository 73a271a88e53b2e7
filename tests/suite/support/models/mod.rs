//! Test helpers shared by the suite, the separate test binaries and the benchmarks.

pub mod minilm;
pub mod rxnmapper;
pub mod smollm2;
