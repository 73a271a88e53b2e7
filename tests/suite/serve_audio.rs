//! `attnviz serve` with a speech model: a recording posted to `/api/audio` runs the library's
//! request the command line makes of `--audio FILE` (the real tiny.en on beckett.wav: the same
//! transcript, words and times as the CLI's JSON export, and the report the bytes `--html`
//! writes); a recording sent to a text model, a file that is no recording, a body over the bound
//! and a request from another host or site are refused in one line.

use std::path::Path;

use super::serve::{exchange, post_run, request, serve};
use super::support::cli::{attnviz, fixture, repo, tiny};

/// A recording posted to `/api/audio?QUERY` as the body.
fn post_audio(port: u16, query: &str, bytes: &[u8]) -> (u16, serde_json::Value) {
    let (status, body) = request(
        port,
        "POST",
        &format!("/api/audio?{query}"),
        &[("Content-Type", "application/octet-stream")],
        bytes,
    );
    (
        status,
        serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null),
    )
}

/// The real tiny.en (its CTranslate2 folder, as scripts/fetch-whisper-tiny.sh ships it) and
/// beckett.wav (scripts/fetch-beckett.sh).
fn real() -> (std::path::PathBuf, std::path::PathBuf) {
    let cache = repo().join(".cache");
    let (model, wav) = (
        cache.join("models/whisper-tiny.en"),
        cache.join("audio/beckett.wav"),
    );
    assert!(
        model.join("model.bin").is_file() && wav.is_file(),
        "{} or {} is missing: run scripts/fetch-whisper-tiny.sh and scripts/fetch-beckett.sh",
        model.display(),
        wav.display()
    );
    (model, wav)
}

/// The CLI's JSON export and HTML report of `--audio WAV` with `args`.
fn cli_outputs(model: &Path, wav: &Path, args: &[&str]) -> (serde_json::Value, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let (json, html) = (dir.path().join("a.json"), dir.path().join("a.html"));
    let out = attnviz()
        .arg("-m")
        .arg(model)
        .arg("--audio")
        .arg(wav)
        .args(args)
        .arg("--json")
        .arg(&json)
        .arg("--html")
        .arg(&html)
        .args(["--threads", "1", "-q"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    (doc, std::fs::read(&html).unwrap())
}

#[test]
fn an_uploaded_recording_is_transcribed_and_timed_as_the_audio_flag_does() {
    let (model, wav) = real();
    let bytes = std::fs::read(&wav).unwrap();
    let server = serve(&[&model, &tiny()], &[]);
    let (status, list) = request(server.port, "GET", "/api/models", &[], b"");
    assert_eq!(status, 200);
    let list: serde_json::Value = serde_json::from_slice(&list).unwrap();
    assert_eq!(list["models"][0]["kind"], "speech", "{list}");
    assert!(list["max_audio"].as_u64().unwrap() >= 1 << 20, "{list}");

    for (query, args) in [("", &[][..]), ("&timestamps=true", &["--timestamps"][..])] {
        let (doc, html) = cli_outputs(&model, &wav, args);
        let cli = &doc["cross"]["speech"];
        let (status, answer) = post_audio(
            server.port,
            &format!("model=0&name=beckett.wav{query}"),
            &bytes,
        );
        assert_eq!(status, 200, "{query}: {answer}");
        let served = &answer["speech"];
        assert_eq!(served["transcript"], cli["transcript"], "{query}");
        assert_eq!(
            cli["transcript"],
            "Ever tried, ever failed. No matter, try again. Fail again. Fail better.",
            "the transcript transformers writes (tests/reference/whisper-tiny.en-hf-beckett.json)"
        );
        assert_eq!(served["words"], cli["words"], "{query}: words and times");
        assert!(served["words"].as_array().unwrap().len() >= 10, "{served}");
        assert_eq!(served["timestamps"], cli["timestamps"], "{query}");
        assert_eq!(served["audio"], "beckett.wav");
        assert_eq!(answer["name"], "beckett.wav");
        assert_eq!(answer["filename"], "attnviz-report-beckett.html");
        let path = answer["report"].as_str().unwrap().to_string();
        let (status, report) = request(server.port, "GET", &format!("{path}?download=1"), &[], b"");
        assert_eq!(status, 200);
        assert!(
            report == html,
            "{query}: the served report differs from --audio --html's ({} vs {} bytes)",
            report.len(),
            html.len()
        );
    }
    let log = server.log();
    assert!(
        log.iter().any(|l| l.starts_with("POST /api/audio 200 ")),
        "{log:?}"
    );
}

#[test]
fn recordings_to_text_models_bad_files_and_big_bodies_get_one_line() {
    let whisper = fixture("tiny-whisper");
    let server = serve(&[&whisper, &tiny(), &fixture("tiny-deit")], &[]);
    let port = server.port;
    let dir = tempfile::tempdir().unwrap();
    let wav = dir.path().join("a.wav");
    crate::cli_whisper::write_wav(&wav, 1.0);
    let good = std::fs::read(&wav).unwrap();
    let one_line = |status: u16, answer: &serde_json::Value, want: u16, says: &str| {
        assert_eq!(status, want, "{answer}");
        let e = answer["error"].as_str().unwrap_or_default();
        assert!(
            e.contains(says) && !e.contains('\n'),
            "{e:?} (wanted {says:?})"
        );
    };
    // The tiny random Whisper runs it.
    let (status, answer) = post_audio(port, "model=0&name=a.wav&language=en&generate=4", &good);
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["speech"]["audio"], "a.wav");
    // A text model and a vision model: refused before the body is read.
    let (status, answer) = post_audio(port, "model=1&name=a.wav", &good);
    one_line(status, &answer, 400, "not recordings; send it a text");
    let (status, answer) = post_audio(port, "model=2&name=a.wav", &good);
    one_line(
        status,
        &answer,
        400,
        "not recordings; upload one (POST /api/image)",
    );
    // Text to the speech model, a picture to it.
    let (status, answer) = post_run(port, r#"{"model":0,"text":"hello"}"#);
    one_line(status, &answer, 400, "POST /api/audio");
    let (status, body) = request(
        port,
        "POST",
        "/api/image?model=0&name=a.png",
        &[],
        &std::fs::read(fixture("images/wide45x37.png")).unwrap(),
    );
    let answer: serde_json::Value = serde_json::from_slice(&body).unwrap();
    one_line(status, &answer, 400, "POST /api/audio");
    // Not a recording, a WAV cut short, nothing at all, a bad task.
    for (name, bytes) in [
        ("junk.wav", b"this is not a recording at all".to_vec()),
        ("cut.wav", good[..60].to_vec()),
        (
            "picture.mp3",
            std::fs::read(fixture("images/wide45x37.png")).unwrap(),
        ),
    ] {
        let (status, answer) = post_audio(port, &format!("model=0&name={name}"), &bytes);
        one_line(status, &answer, 400, name);
    }
    let (status, answer) = post_audio(port, "model=0&name=e.wav", b"");
    one_line(status, &answer, 400, "empty");
    let (status, answer) = post_audio(port, "model=0&name=a.wav&task=sing", &good);
    one_line(status, &answer, 400, "transcribe or translate");
    let (status, answer) = post_audio(port, "model=0&name=a.wav&bogus=1", &good);
    one_line(status, &answer, 400, "/api/audio?model=N");
    // A length over the bound: 413 before the body is sent.
    let raw = format!(
        "POST /api/audio?model=0 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        (32u64 << 20) + 1
    );
    let (status, body) = exchange(port, raw.as_bytes());
    let answer: serde_json::Value = serde_json::from_slice(&body).unwrap();
    one_line(status, &answer, 413, "larger than this server takes");
    // Another host or site: 403, as every route.
    let upload = |host: &str, origin: Option<&str>| {
        let mut raw = format!(
            "POST /api/audio?model=0&name=a.wav&language=en&generate=2 HTTP/1.1\r\nHost: {host}\r\nContent-Length: {}\r\nConnection: close\r\n",
            good.len()
        );
        if let Some(o) = origin {
            raw.push_str(&format!("Origin: {o}\r\n"));
        }
        raw.push_str("\r\n");
        let mut raw = raw.into_bytes();
        raw.extend_from_slice(&good);
        exchange(port, &raw).0
    };
    let here = format!("127.0.0.1:{port}");
    assert_eq!(upload(&format!("attacker.example:{port}"), None), 403);
    assert_eq!(upload(&here, Some("http://attacker.example")), 403);
    assert_eq!(upload(&here, Some("null")), 403);
    assert_eq!(upload(&here, Some(&format!("http://{here}"))), 200);
}

#[test]
#[ignore = "browser suite: scripts/test.sh runs it with --include-ignored"]
fn the_audio_upload_in_chromium_and_firefox() {
    super::support::cli::assert_browsers_ready(&[
        ("/usr/bin/chromium", "chromium"),
        ("/usr/bin/firefox-esr", "firefox-esr"),
    ]);
    let (model, wav) = real();
    let server = serve(&[&tiny(), &model], &[]);
    let dir = repo().join("tests/artifacts/serve-audio");
    std::fs::create_dir_all(&dir).unwrap();
    let (doc, html) = cli_outputs(&model, &wav, &[]);
    let expected = dir.join("expected.html");
    std::fs::write(&expected, html).unwrap();
    let speech = &doc["cross"]["speech"];
    let case = serde_json::json!({
        "url": server.url,
        "recording": wav,
        "expected": expected,
        "words": speech["words"],
        "transcript": speech["transcript"],
        "screens": dir.join("screens"),
    });
    std::fs::write(dir.join("case.json"), case.to_string()).unwrap();
    super::support::cli::node_test("serve_audio.test.mjs", &[("ATTNVIZ_SERVE_AUDIO", &dir)]);
    let log = server.log();
    assert!(
        log.iter().any(|l| l.starts_with("POST /api/audio 200 ")),
        "{log:?}"
    );
}
