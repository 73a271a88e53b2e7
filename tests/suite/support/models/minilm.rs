//! Where the real all-MiniLM-L6-v2 lives for tests and benchmarks (included with `#[path]`).

use std::path::PathBuf;

/// all-MiniLM-L6-v2: `$ATTNVIZ_MINILM_DIR`, else `<repo>/.cache/models/all-MiniLM-L6-v2`.
///
/// Tests that use it are never skipped: a missing model is a failure that says how to get it.
pub fn minilm_dir() -> PathBuf {
    let dir = match std::env::var_os("ATTNVIZ_MINILM_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".cache/models/all-MiniLM-L6-v2"),
    };
    for file in [
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "vocab.txt",
    ] {
        assert!(
            dir.join(file).is_file(),
            "all-MiniLM-L6-v2 not found: {} is missing. Run scripts/fetch-minilm.sh \
             (or set ATTNVIZ_MINILM_DIR to a folder holding the model).",
            dir.join(file).display()
        );
    }
    dir
}
