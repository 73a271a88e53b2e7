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
        // The tokens as every view shows them (`crates/core/src/attention/display.rs`) and the model's
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

/// What a file's name or a file's field may hold: an OSC 52 clipboard write (ESC `]52;c;` …
/// BEL) and a right-to-left override.
const HOSTILE: &str = "x\u{1b}]52;c;aGk=\u{7}y\u{202E}z";

/// [`HOSTILE`] as every view and message shows it.
const HOSTILE_SHOWN: &str = "x<U+001B>]52;c;aGk=<U+0007>y<U+202E>z";

/// The control and bidirectional characters of `shown` other than line ends and the colours
/// the views send (SGR sequences).
fn raw_controls(shown: &str) -> Vec<String> {
    let sgr = regex::Regex::new(r"\x1b\[[0-9;]*m").unwrap();
    sgr.replace_all(shown, "")
        .chars()
        .filter(|&c| (c.is_control() && c != '\n') || is_bidi(c))
        .map(|c| format!("U+{:04X}", c as u32))
        .collect()
}

/// Run attnviz with `args`; its stdout and stderr, each checked for raw controls.
fn shown(args: &[&std::ffi::OsStr]) -> (bool, String, String) {
    let out = attnviz().args(args).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    for (name, text) in [("stdout", &stdout), ("stderr", &stderr)] {
        assert_eq!(
            raw_controls(text),
            Vec::<String>::new(),
            "attnviz {args:?}: raw controls on {name}: {text:?}"
        );
    }
    (out.status.success(), stdout, stderr)
}

#[test]
fn names_paths_and_file_fields_reach_the_terminal_escaped() {
    use std::ffi::OsStr;
    let dir = tempfile::tempdir().unwrap();
    let deit = crate::support::cli::fixture("tiny-deit");
    let picture = dir.path().join(format!("{HOSTILE}.png"));
    fs::copy(
        crate::support::cli::fixture("images/wide45x37.png"),
        &picture,
    )
    .unwrap();
    let os = |s: &'static str| OsStr::new(s);
    // A picture's file name: the image view's title, plain and in colour.
    for color in ["never", "always"] {
        let (ok, out, err) = shown(&[
            os("-m"),
            deit.as_os_str(),
            os("--image"),
            picture.as_os_str(),
            os("--color"),
            OsStr::new(color),
        ]);
        assert!(ok, "{err}");
        assert!(out.contains(HOSTILE_SHOWN), "{out}");
    }
    // A render file whose fields say anything: the picture's source, the model's id, the
    // text; and a text model's tokens. The file's own name too.
    let json = dir.path().join("run.json");
    let (ok, _, err) = shown(&[
        os("-m"),
        deit.as_os_str(),
        os("--image"),
        picture.as_os_str(),
        os("--json"),
        json.as_os_str(),
        os("-q"),
    ]);
    assert!(ok, "{err}");
    let mut doc: serde_json::Value = serde_json::from_slice(&fs::read(&json).unwrap()).unwrap();
    doc["image"]["source"] = HOSTILE.into();
    doc["model"]["id"] = format!("/models/{HOSTILE}").into();
    let hostile_json = dir.path().join(format!("{HOSTILE}.json"));
    fs::write(&hostile_json, doc.to_string()).unwrap();
    let tiny_json = dir.path().join("text.json");
    let (ok, _, err) = shown(&[
        os("-m"),
        tiny().as_os_str(),
        os("the quick fox"),
        os("--json"),
        tiny_json.as_os_str(),
        os("-q"),
    ]);
    assert!(ok, "{err}");
    let mut doc: serde_json::Value =
        serde_json::from_slice(&fs::read(&tiny_json).unwrap()).unwrap();
    doc["model"]["id"] = format!("/models/{HOSTILE}").into();
    // The views name a model by its name when the document has one (the export writes it).
    doc["model"]["name"] = HOSTILE.into();
    doc["text"] = HOSTILE.into();
    doc["tokens"][2] = HOSTILE.into();
    let text_json = dir.path().join(format!("{HOSTILE}.text.json"));
    fs::write(&text_json, doc.to_string()).unwrap();
    for extra in [
        &[][..],
        &["--color", "always"],
        &["--stats"],
        &["--raw-tokens"],
    ] {
        for file in [&hostile_json, &text_json] {
            let mut args = vec![os("render"), file.as_os_str()];
            args.extend(extra.iter().map(OsStr::new));
            let (ok, out, err) = shown(&args);
            assert!(ok, "{err}");
            assert!(
                out.contains(HOSTILE_SHOWN) || out.contains("x<U+001B>]52;c"),
                "{extra:?}: {out}"
            );
        }
    }
    // Two such files compared: their names and texts in the comparison.
    let (ok, out, err) = shown(&[
        os("diff"),
        text_json.as_os_str(),
        text_json.as_os_str(),
        os("--color"),
        os("always"),
    ]);
    assert!(ok, "{err}");
    assert!(out.contains(HOSTILE_SHOWN), "{out}");
    // Messages: a picture that is not there, named so; the error stays one line.
    let missing = dir.path().join(format!("gone{HOSTILE}.png"));
    let (ok, _, err) = shown(&[
        os("-m"),
        deit.as_os_str(),
        os("--image"),
        missing.as_os_str(),
    ]);
    assert!(!ok);
    assert!(err.contains(HOSTILE_SHOWN), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}
