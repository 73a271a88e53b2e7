//! Where the real rxnmapper ALBERT checkpoint lives for tests.

use std::path::PathBuf;

/// rxnmapper's ALBERT: `$ATTNVIZ_RXNMAPPER_DIR`, else `<repo>/.cache/models/rxnmapper-albert`.
///
/// Tests that use it are never skipped: a missing model is a failure that says how to get it.
#[allow(dead_code)]
pub fn rxnmapper_dir() -> PathBuf {
    let dir = match std::env::var_os("ATTNVIZ_RXNMAPPER_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".cache/models/rxnmapper-albert"),
    };
    for file in ["config.json", "pytorch_model.bin", "vocab.txt"] {
        assert!(
            dir.join(file).is_file(),
            "rxnmapper's checkpoint not found: {} is missing. Run scripts/fetch-rxnmapper.sh \
             (or set ATTNVIZ_RXNMAPPER_DIR to a folder holding it).",
            dir.join(file).display()
        );
    }
    dir
}
