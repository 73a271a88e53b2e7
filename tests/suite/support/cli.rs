//! Running the `attnviz` binary in tests: the command, the test models, and the checks every
//! failure must pass (one line, exit 1, no panic) and every run must leave (no temporary file).

#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

pub use super::models::minilm::minilm_dir as minilm;

/// The release binary, offline, without colour, without a default model from the environment.
pub fn attnviz() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_attnviz"));
    cmd.env_remove("ATTNVIZ_MODEL")
        .env_remove("RAYON_NUM_THREADS")
        .env("HF_HUB_OFFLINE", "1")
        .env("NO_COLOR", "1");
    cmd
}

/// Run with `args` and collect the output.
pub fn run(args: &[&str]) -> Output {
    attnviz().args(args).output().expect("attnviz runs")
}

/// The tiny 3-layer BERT fixture (64 positions).
pub fn tiny() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiny-bert")
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A failed run: exit status 1, one line on stderr starting with `error:`, no panic.
pub fn assert_clean_failure(out: &Output, mentions: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(1), "stderr: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "not one line: {err}");
    assert!(err.starts_with("error: "), "{err}");
    assert!(err.contains(mentions), "expected `{mentions}` in: {err}");
}

/// Every path under `dir` (recursively), relative to it, sorted.
pub fn tree(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
        let Ok(rd) = fs::read_dir(dir) else { return };
        for e in rd.flatten() {
            let p = e.path();
            out.push(p.strip_prefix(base).unwrap().display().to_string());
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                walk(base, &p, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// The temporary files and folders attnviz makes (`.NAME.XXXXXX.tmp`) under `dir`.
pub fn temp_files(dir: &Path) -> Vec<String> {
    tree(dir)
        .into_iter()
        .filter(|p| {
            let name = Path::new(p)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            name.starts_with('.') && name.ends_with(".tmp")
        })
        .collect()
}

/// Wait until `ready()` holds, at most `limit`; panics naming `what` when it never does.
pub fn wait_for(what: &str, limit: Duration, mut ready: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ready() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// About 700 tokens of English for all-MiniLM-L6-v2 (truncated to 512 with `--truncate`):
/// a 512-token run whose JSON export is about 220 MB.
pub fn long_text() -> String {
    ["The quick brown fox jumps over the lazy dog near the river bank."; 50].join(" ")
}

/// Copy the files of the model folder `from` into a new folder `to`.
pub fn copy_model(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap().flatten() {
        if e.file_type().unwrap().is_file() {
            fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}
