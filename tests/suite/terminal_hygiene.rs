//! What reaches the terminal: a reader that stops early (`| head -c 10`) ends every mode
//! quietly with status 0, and bidirectional control characters in tokens or names are shown as
//! escapes, never raw.

#![cfg(unix)]

use std::fs;
use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::support::cli::{attnviz, copy_model, long_text, minilm, tiny};

/// Run with stdout into a reader that takes 10 bytes and closes the pipe, like `| head -c 10`
/// (with `merge`, stderr goes into the same pipe, like `2>&1 | head -c 10`); returns attnviz's
/// own exit status and, without `merge`, its stderr.
fn into_short_reader(args: &[&str], stdin: Option<&str>, merge: bool) -> (Option<i32>, String) {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills the two-element array; close-on-exec so the child holds no read end.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both descriptors were just created and are owned here alone.
    let (read_end, write_end) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let mut cmd = attnviz();
    cmd.args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::from(write_end.try_clone().unwrap()));
    if merge {
        cmd.stderr(Stdio::from(write_end));
    } else {
        drop(write_end);
        cmd.stderr(Stdio::piped());
    }
    let mut child = cmd.spawn().unwrap();
    drop(cmd); // our copies of the write end
    if let (Some(text), Some(mut w)) = (stdin, child.stdin.take()) {
        use std::io::Write;
        // The run may stop reading at its limit; a broken pipe here is expected.
        let _ = w.write_all(text.as_bytes());
    }
    let mut out = fs::File::from(read_end);
    let mut first = [0u8; 10];
    out.read_exact(&mut first).unwrap();
    drop(out);
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        e.read_to_string(&mut err).unwrap();
    }
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(start.elapsed() < Duration::from_secs(120), "hangs");
        std::thread::sleep(Duration::from_millis(10));
    };
    (status.code(), err)
}

#[test]
fn a_reader_that_stops_early_ends_every_mode_quietly() {
    let m = minilm();
    let m = m.to_str().unwrap();
    let text = long_text();
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    // An empty line: a warning on stderr.
    fs::write(&input, "the quick brown fox .\n\nthe lazy dog .\n").unwrap();
    let out_dir = dir.path().join("out");
    let cases: Vec<Vec<&str>> = vec![
        // JSON on stdout, 220 MB at 512 tokens
        vec!["-m", m, "-", "--truncate", "--json", "-"],
        vec![
            "-m",
            m,
            "-",
            "--truncate",
            "--json",
            "-",
            "--words",
            "--no-special",
        ],
        vec!["-m", m, "-", "--truncate", "--json", "-", "--stats"],
        vec!["-m", m, "-", "--truncate", "--json", "/proc/self/fd/1"],
        // images and the report on stdout
        vec!["-m", m, "-", "--truncate", "--png", "-"],
        vec!["-m", m, "-", "--truncate", "--svg", "-"],
        vec!["-m", m, "-", "--truncate", "--html", "-"],
        // the terminal view and the statistics
        vec!["-m", m, "-", "--truncate"],
        vec!["-m", m, "-", "--truncate", "--color", "always"],
        vec!["-m", m, "-", "--truncate", "--stats", "-q"],
        vec!["-m", m, "-", "--truncate", "--stat", "entropy", "-q"],
    ];
    for merge in [false, true] {
        for args in &cases {
            let (code, err) = into_short_reader(args, Some(&text), merge);
            assert_eq!(code, Some(0), "{args:?} (stderr too: {merge}): {err}");
            assert!(
                !err.contains("error") && !err.contains("panicked"),
                "{args:?}: {err}"
            );
        }
        // Corpus mode prints its table on stdout, and warnings and a summary on stderr.
        let _ = fs::remove_dir_all(&out_dir);
        let (code, err) = into_short_reader(
            &[
                "-m",
                tiny().to_str().unwrap(),
                "--input",
                input.to_str().unwrap(),
                "--out-dir",
                out_dir.to_str().unwrap(),
            ],
            None,
            merge,
        );
        assert_eq!(code, Some(0), "corpus (stderr too: {merge}): {err}");
        assert!(!err.contains("error") && !err.contains("panicked"), "{err}");
    }
}

/// tiny-bert with a tokenizer.json that keeps bidirectional controls (no BERT clean-up) and has
/// two of them in its vocabulary, in a folder whose name holds one too.
fn bidi_model(dir: &Path) -> std::path::PathBuf {
    let model = dir.join("tiny\u{202E}bert");
    copy_model(&tiny(), &model);
    let vocab_txt = fs::read_to_string(model.join("vocab.txt")).unwrap();
    let mut vocab = serde_json::Map::new();
    for (id, token) in vocab_txt.lines().enumerate() {
        let token = match token {
            "?" => "\u{202E}",
            "!" => "x\u{2066}y",
            t => t,
        };
        vocab.insert(token.to_string(), id.into());
    }
    let special = |id: usize, content: &str| {
        serde_json::json!({"id": id, "content": content, "single_word": false, "lstrip": false,
            "rstrip": false, "normalized": false, "special": true})
    };
    let tokenizer = serde_json::json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": [special(0, "[PAD]"), special(1, "[UNK]"), special(2, "[CLS]"),
            special(3, "[SEP]"), special(4, "[MASK]")],
        "normalizer": null,
        "pre_tokenizer": {"type": "WhitespaceSplit"},
        "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 3], "cls": ["[CLS]", 2]},
        "decoder": null,
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
            "max_input_chars_per_word": 100, "vocab": vocab}
    });
    fs::write(model.join("tokenizer.json"), tokenizer.to_string()).unwrap();
    model
}

fn is_bidi(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}')
}

#[test]
fn bidirectional_controls_reach_the_terminal_as_escapes() {
    let dir = tempfile::tempdir().unwrap();
    let model = bidi_model(dir.path());
    let text = "the \u{202E} fox x\u{2066}y dog";
    for extra in [&[][..], &["--words"], &["--color", "always"]] {
        let out = attnviz()
            .arg("-m")
            .arg(&model)
            .arg(text)
            .args(extra)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let shown = String::from_utf8(out.stdout).unwrap();
        assert!(!shown.chars().any(is_bidi), "raw bidi control in: {shown}");
        // The tokens as every view shows them (`src/attention/display.rs`) and the model's
        // name as the terminal escapes it.
        assert!(shown.contains("⟨U+202E⟩"), "{shown}");
        assert!(shown.contains("x⟨U+2066⟩y"), "{shown}");
        assert!(shown.contains("tiny<U+202E>bert"), "{shown}");
    }
    // The raw tokens, escaped by the terminal view itself.
    let out = attnviz()
        .arg("-m")
        .arg(&model)
        .args([text, "--raw-tokens"])
        .output()
        .unwrap();
    let shown = String::from_utf8(out.stdout).unwrap();
    assert!(!shown.chars().any(is_bidi), "raw bidi control in: {shown}");
    assert!(shown.contains("x<U+2066>y"), "{shown}");
    // The JSON keeps the tokens as they are (JSON strings are data, not terminal text).
    let out = attnviz()
        .arg("-m")
        .arg(&model)
        .args([text, "--json", "-"])
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["tokens"][2], "\u{202E}");
}
