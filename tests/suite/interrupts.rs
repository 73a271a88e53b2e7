//! Ctrl-C (SIGINT) and SIGTERM leave nothing behind: real runs of the binary are interrupted at
//! several points (during the model load, the forward pass, the writing of a 220 MB JSON file
//! and of a report folder, and in corpus mode once and twice), and each must end with status
//! 130 (143 for SIGTERM) and no temporary file or folder left.
//!
//! The runs use all-MiniLM-L6-v2 at 512 tokens so there is time to interrupt them; every wait
//! polls for what it waits for (a temporary file appearing) and is bounded.

#![cfg(unix)]

use std::fs;
use std::io::Write;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::support::cli::{attnviz, long_text, minilm, temp_files, tree, wait_for};

const LIMIT: Duration = Duration::from_secs(120);

fn signal(child: &Child, sig: libc::c_int) {
    // SAFETY: signalling our own child process.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, sig) }, 0);
}

/// Wait for `child` at most [`LIMIT`], killing it (and failing) past that. Returns its status
/// and its stderr.
fn finish(mut child: Child) -> (ExitStatus, String) {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                use std::io::Read;
                e.read_to_string(&mut err).unwrap();
            }
            return (status, err);
        }
        if start.elapsed() > LIMIT {
            let _ = child.kill();
            panic!("attnviz did not end within {LIMIT:?} of the signal");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn assert_interrupted(status: ExitStatus, err: &str, code: i32, dir: &Path) {
    assert_eq!(
        status.code(),
        Some(code),
        "status {status:?}, stderr: {err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    let last = err.trim_end().lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: interrupted") || last.starts_with("error: terminated"),
        "{err}"
    );
    assert!(
        temp_files(dir).is_empty(),
        "temporary files left: {:?}",
        tree(dir)
    );
}

/// A single-sentence run of MiniLM at 512 tokens, its text on stdin (written at once).
fn long_run(dir: &Path, outputs: &[&str]) -> Child {
    let m = minilm();
    let mut child = attnviz()
        .current_dir(dir)
        .args(["-m", m.to_str().unwrap(), "-", "--truncate", "-q"])
        .args(outputs)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(long_text().as_bytes()).unwrap();
    drop(stdin);
    child
}

#[test]
fn ctrl_c_while_the_json_is_written_removes_the_temporary_file() {
    for (sig, code) in [(libc::SIGINT, 130), (libc::SIGTERM, 143)] {
        let dir = tempfile::tempdir().unwrap();
        let child = long_run(dir.path(), &["--json", "big.json"]);
        wait_for("the JSON's temporary file", LIMIT, || {
            !temp_files(dir.path()).is_empty()
        });
        let before = temp_files(dir.path());
        assert!(before[0].starts_with(".big.json."), "{before:?}");
        signal(&child, sig);
        let (status, err) = finish(child);
        assert_interrupted(status, &err, code, dir.path());
        assert!(err.contains("removed 1 unfinished output"), "{err}");
        assert!(tree(dir.path()).is_empty(), "{:?}", tree(dir.path()));
    }
}

#[test]
fn ctrl_c_while_a_report_is_built_leaves_no_folder() {
    let dir = tempfile::tempdir().unwrap();
    let child = long_run(dir.path(), &["--report", "rep", "--json", "big.json"]);
    // The report is built after the JSON: wait for its hidden staging folder.
    wait_for("the report's staging folder", LIMIT, || {
        tree(dir.path()).iter().any(|p| p.starts_with(".rep."))
    });
    signal(&child, libc::SIGINT);
    let (status, err) = finish(child);
    assert_interrupted(status, &err, 130, dir.path());
    // The finished JSON stays (complete); no report folder, whole or partial.
    assert_eq!(tree(dir.path()), ["big.json"]);
}

/// Whether the main thread of `pid` is blocked reading its standard input (`read(0, …)`).
fn reading_stdin(pid: u32) -> bool {
    let Ok(text) = fs::read_to_string(format!("/proc/{pid}/syscall")) else {
        return false;
    };
    let mut fields = text.split_whitespace();
    fields.next() == Some(&libc::SYS_read.to_string()) && fields.next() == Some("0x0")
}

#[test]
fn ctrl_c_during_the_forward_pass_exits_130_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let m = minilm();
    let mut child = attnviz()
        .current_dir(dir.path())
        .args(["-m", m.to_str().unwrap(), "-", "--truncate", "-q"])
        .args(["--json", "big.json", "--html", "big.html"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The model is loaded before the text is read: wait until the run blocks on its input,
    // then give it the 512-token text; the signal lands in the tokenizer or the forward pass.
    wait_for("the run to wait for its input", LIMIT, || {
        reading_stdin(child.id())
    });
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(long_text().as_bytes()).unwrap();
    drop(stdin);
    std::thread::sleep(Duration::from_millis(20));
    let early = temp_files(dir.path()).is_empty();
    signal(&child, libc::SIGINT);
    let (status, err) = finish(child);
    eprintln!("signalled before any output was started: {early}");
    assert_interrupted(status, &err, 130, dir.path());
    assert!(tree(dir.path()).is_empty(), "{:?}", tree(dir.path()));
}

#[test]
fn ctrl_c_during_the_model_load_exits_130() {
    // A hub that accepts the connection and never answers: the load waits on it.
    let hub = TcpListener::bind("127.0.0.1:0").unwrap();
    hub.set_nonblocking(true).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let child = attnviz()
        .env_remove("HF_HUB_OFFLINE")
        .env(
            "HF_ENDPOINT",
            format!("http://{}", hub.local_addr().unwrap()),
        )
        .env("HF_HOME", cache.path())
        .env_remove("HF_HUB_CACHE")
        .env_remove("HF_TOKEN")
        .current_dir(cache.path())
        .args(["-m", "test-org/never-answers", "text", "--json", "out.json"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut conn = None;
    wait_for("the model load to reach the hub", LIMIT, || {
        conn = hub.accept().ok();
        conn.is_some()
    });
    signal(&child, libc::SIGINT);
    let (status, err) = finish(child);
    assert_interrupted(status, &err, 130, cache.path());
    assert!(!cache.path().join("out.json").exists());
}

/// A corpus of long lines (about 300 tokens each, 60 MB of JSON per sentence), on stdin, which
/// stays open (the run waits for more lines) until the returned handle is dropped.
fn long_corpus(dir: &Path) -> (Child, std::process::ChildStdin) {
    let m = minilm();
    let line = ["The quick brown fox jumps over the lazy dog near the river bank."; 21].join(" ");
    let mut child = attnviz()
        .args([
            "-m",
            m.to_str().unwrap(),
            "--input",
            "-",
            "--threads",
            "2",
            "-q",
        ])
        .arg("--out-dir")
        .arg(dir.join("out"))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for _ in 0..6 {
        writeln!(stdin, "{line}").unwrap();
    }
    stdin.flush().unwrap();
    (child, stdin)
}

#[test]
fn corpus_mode_ctrl_c_once_finishes_in_flight_and_twice_cleans_up() {
    // Once: the sentences in flight are finished and the summary is written; status 130.
    let dir = tempfile::tempdir().unwrap();
    let (child, stdin) = long_corpus(dir.path());
    wait_for("a per-sentence temporary file", LIMIT, || {
        !temp_files(dir.path()).is_empty()
    });
    signal(&child, libc::SIGINT);
    // The reader may be blocked on the open input: closing it lets the run notice the stop.
    std::thread::sleep(Duration::from_millis(100));
    drop(stdin);
    let (status, err) = finish(child);
    assert_eq!(status.code(), Some(130), "{err}");
    assert!(err.contains("interrupted"), "{err}");
    assert!(temp_files(dir.path()).is_empty(), "{:?}", tree(dir.path()));
    let summary: serde_json::Value =
        serde_json::from_slice(&fs::read(dir.path().join("out/corpus_stats.json")).unwrap())
            .unwrap();
    assert_eq!(summary["end"], "interrupted");

    // Twice, while files are being written: the run ends at once, and removes them.
    let dir = tempfile::tempdir().unwrap();
    let (child, _stdin) = long_corpus(dir.path());
    wait_for("a per-sentence temporary file", LIMIT, || {
        !temp_files(dir.path()).is_empty()
    });
    signal(&child, libc::SIGINT);
    std::thread::sleep(Duration::from_millis(5));
    let in_flight = temp_files(dir.path());
    signal(&child, libc::SIGINT);
    let (status, err) = finish(child);
    eprintln!("second Ctrl-C with {in_flight:?} in flight");
    assert_interrupted(status, &err, 130, dir.path());
}
