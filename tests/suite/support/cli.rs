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

/// The repository's root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A path under `tests/fixtures` (`"gguf/tiny-llama-f32.gguf"`, `"render"`, …).
pub fn fixture(rel: &str) -> PathBuf {
    repo().join("tests/fixtures").join(rel)
}

/// The tiny 3-layer BERT fixture (64 positions).
pub fn tiny() -> PathBuf {
    fixture("tiny-bert")
}

/// A copy of the files of fixture folder `name` in a new temporary folder.
pub fn copy_fixture(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_model(&fixture(name), dir.path());
    dir
}

/// A FIFO at `path` (made in the test's own temporary folder, never under `/dev`); a file
/// already there is replaced.
pub fn mkfifo(path: &Path) {
    let _ = fs::remove_file(path);
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path inside the test's own temporary folder.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// The binary under 1 GiB of address space (`ulimit -v`) and 60 s (`timeout`), offline, without
/// colour or a default model: a hostile input must be refused within those bounds. Add the
/// arguments and run it.
pub fn limited() -> Command {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg("ulimit -v 1048576; exec timeout 60 \"$@\"")
        .arg("sh")
        .arg(env!("CARGO_BIN_EXE_attnviz"))
        .env("HF_HUB_OFFLINE", "1")
        .env("NO_COLOR", "1")
        .env_remove("ATTNVIZ_MODEL");
    cmd
}

/// [`limited`] with `args`, its output collected.
pub fn run_limited(args: &[&str]) -> Output {
    limited().args(args).output().expect("sh runs")
}

/// [`limited`] on `model` with a short text, `--json` into a new temporary folder and `extra`.
/// Returns the output and whether anything was written into that folder.
pub fn run_model_limited(model: &Path, extra: &[&str]) -> (Output, bool) {
    let out_dir = tempfile::tempdir().unwrap();
    let json = out_dir.path().join("a.json");
    let out = limited()
        .arg("-m")
        .arg(model)
        .arg("the cat sat on the mat")
        .arg("--json")
        .arg(&json)
        .args(extra)
        .output()
        .expect("sh runs");
    let wrote = fs::read_dir(out_dir.path()).unwrap().next().is_some();
    (out, wrote)
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

/// Run `node --test FILE` in tests/browser (one test file at a time, spec reporter), with the
/// environment `env`; its output is printed and returned, and a failure fails the test.
pub fn node_test(file: &str, env: &[(&str, &Path)]) -> String {
    let browser_dir = repo().join("tests/browser");
    let mut cmd = Command::new("node");
    cmd.args([
        "--test",
        "--test-concurrency=1",
        "--test-reporter=spec",
        file,
    ])
    .current_dir(&browser_dir);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd
        .output()
        .expect("node must be installed (Node ≥ 20) to run the page's tests");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    println!("{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{file} failed (output above)");
    text
}

/// Checks that the browser suites can run: each `(executable, Debian package)` of `browsers`
/// exists and tests/browser's drivers are installed; the failure says how to get them.
pub fn assert_browsers_ready(browsers: &[(&str, &str)]) {
    for (browser, apt) in browsers {
        assert!(
            Path::new(browser).exists(),
            "{browser} is missing: run `apt-get install -y {apt}` (scripts/test.sh does, as root), \
             or run `ATTNVIZ_SKIP_BROWSER=1 bash scripts/test.sh` to skip the browser suites knowingly"
        );
    }
    let installed = ["playwright-core", "puppeteer-core"]
        .iter()
        .all(|p| repo().join("tests/browser/node_modules").join(p).exists());
    assert!(
        installed,
        "the browser drivers are missing: run `npm ci` in tests/browser (scripts/test.sh does)"
    );
}

/// Corpus mode: `attnviz -m MODEL --input INPUT --out-dir OUT FLAGS`, not yet run.
pub fn corpus_command(model: &Path, input: &Path, out: &Path, flags: &[&str]) -> Command {
    let mut cmd = attnviz();
    cmd.arg("-m")
        .arg(model)
        .arg("--input")
        .arg(input)
        .arg("--out-dir")
        .arg(out)
        .args(flags);
    cmd
}

/// [`corpus_command`] run, its output collected.
pub fn run_corpus(model: &Path, input: &Path, out: &Path, flags: &[&str]) -> Output {
    corpus_command(model, input, out, flags)
        .output()
        .expect("attnviz runs")
}
