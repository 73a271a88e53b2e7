//! `attnviz serve` against a running server on a free loopback port: the guard (Host, Origin,
//! token), the report it serves (the bytes `--html` writes), a fuzz of malformed requests, a
//! client that leaves mid-request, the bounded queue, and a bounded load test (printed
//! latencies; only success and a flat RSS are asserted).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use super::support::cli::{
    assert_browsers_ready, attnviz, fixture, node_test, repo, tiny, wait_for,
};
use super::support::pictures::{png_with_profile, progressive_jpeg, Scans};

/// A server child, killed when dropped.
pub(super) struct Server {
    child: Child,
    pub(super) port: u16,
    pub(super) url: String,
    /// Every line it wrote on stderr so far.
    log: Arc<Mutex<Vec<String>>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// `--test-hold`: let one held run go on to its forward pass.
    fn release(&mut self) {
        let stdin = self.child.stdin.as_mut().expect("started with --test-hold");
        stdin.write_all(b"go\n").unwrap();
        stdin.flush().unwrap();
    }

    pub(super) fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

pub(super) fn serve(models: &[&std::path::Path], extra: &[&str]) -> Server {
    let mut cmd = attnviz();
    cmd.arg("serve");
    for m in models {
        cmd.arg("-m").arg(m);
    }
    cmd.args(["--port", "0", "--threads", "1"]).args(extra);
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("attnviz serve starts");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let log = Arc::new(Mutex::new(Vec::new()));
    let lines = Arc::clone(&log);
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(rest) = line.split("open ").nth(1) {
                let _ = tx.send(rest.split_whitespace().next().unwrap_or("").to_string());
            }
            lines.lock().unwrap().push(line);
        }
    });
    let url = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the server prints its address");
    let port = url
        .trim_start_matches("http://")
        .split(['/', ':'])
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("a port in the address");
    Server {
        child,
        port,
        url,
        log,
    }
}

/// One raw HTTP/1.1 exchange; returns the status (0 when the server closed without one) and
/// the body.
pub(super) fn exchange(port: u16, raw: &[u8]) -> (u16, Vec<u8>) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connects");
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let _ = s.write_all(raw);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| out[i + 4..].to_vec())
        .unwrap_or_default();
    (status, body)
}

pub(super) fn request(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, Vec<u8>) {
    let mut raw =
        format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n");
    for (k, v) in headers {
        raw.push_str(&format!("{k}: {v}\r\n"));
    }
    raw.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    let mut bytes = raw.into_bytes();
    bytes.extend_from_slice(body);
    exchange(port, &bytes)
}

pub(super) fn post_run(port: u16, json: &str) -> (u16, serde_json::Value) {
    let (status, body) = request(
        port,
        "POST",
        "/api/run",
        &[("Content-Type", "application/json")],
        json.as_bytes(),
    );
    (
        status,
        serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null),
    )
}

fn health(port: u16) -> serde_json::Value {
    let (status, body) = request(port, "GET", "/api/health", &[], b"");
    assert_eq!(status, 200);
    serde_json::from_slice(&body).unwrap()
}

#[test]
fn wrong_host_or_origin_is_403_and_the_right_ones_are_served() {
    let server = serve(&[&tiny()], &[]);
    let port = server.port;
    let raw = |host: &str, origin: Option<&str>| {
        let origin = origin
            .map(|o| format!("Origin: {o}\r\n"))
            .unwrap_or_default();
        exchange(
            port,
            format!(
                "GET /api/models HTTP/1.1\r\nHost: {host}\r\n{origin}Connection: close\r\n\r\n"
            )
            .as_bytes(),
        )
        .0
    };
    assert_eq!(raw(&format!("127.0.0.1:{port}"), None), 200);
    assert_eq!(
        raw(
            &format!("localhost:{port}"),
            Some(&format!("http://localhost:{port}"))
        ),
        200
    );
    // DNS rebinding: a name the attacker controls, resolved to 127.0.0.1.
    assert_eq!(raw(&format!("attacker.example:{port}"), None), 403);
    assert_eq!(raw("127.0.0.1", None), 403);
    // CSRF: another site's page posting to the server.
    assert_eq!(
        raw(
            &format!("127.0.0.1:{port}"),
            Some("http://attacker.example")
        ),
        403
    );
    assert_eq!(raw(&format!("127.0.0.1:{port}"), Some("null")), 403);
    let (status, _) = request(
        port,
        "POST",
        "/api/run",
        &[
            ("Origin", "http://attacker.example"),
            ("Content-Type", "application/json"),
        ],
        br#"{"text":"hello"}"#,
    );
    assert_eq!(status, 403);
    assert!(
        server.url.starts_with("http://127.0.0.1:"),
        "{}",
        server.url
    );
}

/// The report `attnviz -m MODEL TEXT ARGS --html FILE --threads 1` writes.
fn html_of_the_command_line(model: &std::path::Path, text: &str, args: &[&str]) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("r.html");
    let out = attnviz()
        .arg("-m")
        .arg(model)
        .arg(text)
        .args(args)
        .arg("--html")
        .arg(&file)
        .args(["--threads", "1"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read(&file).unwrap()
}

#[test]
fn the_served_report_is_the_bytes_of_the_html_flag() {
    // An encoder (alone and with a pair), a decoder generating, an encoder–decoder
    // teacher-forced: "Save report" downloads what the command line writes for that input.
    let text = "The quick brown fox jumps over the lazy dog.";
    let cases: [(&str, serde_json::Value, &[&str]); 4] = [
        ("tiny-bert", serde_json::json!({ "model": 0 }), &[]),
        (
            "tiny-bert",
            serde_json::json!({ "model": 0, "pair": "It was asleep." }),
            &["--pair", "It was asleep."],
        ),
        (
            "tiny-gpt2",
            serde_json::json!({ "model": 1, "generate": 4 }),
            &["--generate", "4"],
        ),
        (
            "tiny-bart",
            serde_json::json!({ "model": 2, "target": "A fox jumps." }),
            &["--target", "A fox jumps."],
        ),
    ];
    let models = [
        fixture("tiny-bert"),
        fixture("tiny-gpt2"),
        fixture("tiny-bart"),
    ];
    let refs: Vec<&std::path::Path> = models.iter().map(|m| m.as_path()).collect();
    let server = serve(&refs, &[]);
    for (name, mut json, args) in cases {
        json["text"] = text.into();
        let (status, answer) = post_run(server.port, &json.to_string());
        assert_eq!(status, 200, "{name} {args:?}: {answer}");
        let path = answer["report"].as_str().unwrap().to_string();
        let (status, served) = request(server.port, "GET", &format!("{path}?download=1"), &[], b"");
        assert_eq!(status, 200);
        let written = html_of_the_command_line(&fixture(name), text, args);
        assert!(
            served == written,
            "{name} {args:?}: the served report differs from --html's ({} vs {} bytes)",
            served.len(),
            written.len()
        );
    }
}

/// A mixture-of-experts model in the live app (tiny Qwen3-MoE, tiny gpt-oss): the run's report
/// carries the router (the page's Router tab) and gpt-oss's sink shares, and is the bytes
/// `--html` writes for the same text.
#[test]
fn a_mixture_of_experts_model_is_served_with_its_router() {
    let text = "The quick brown fox jumps over the lazy dog.";
    let models = [fixture("tiny-qwen3_moe"), fixture("tiny-gpt_oss")];
    let refs: Vec<&std::path::Path> = models.iter().map(|m| m.as_path()).collect();
    let server = serve(&refs, &[]);
    for (i, name) in ["tiny-qwen3_moe", "tiny-gpt_oss"].into_iter().enumerate() {
        let json = serde_json::json!({ "model": i, "text": text });
        let (status, answer) = post_run(server.port, &json.to_string());
        assert_eq!(status, 200, "{name}: {answer}");
        let path = answer["report"].as_str().unwrap().to_string();
        let (status, served) = request(server.port, "GET", &format!("{path}?download=1"), &[], b"");
        assert_eq!(status, 200);
        let page = String::from_utf8_lossy(&served);
        assert!(
            page.contains("\"router\":{\"experts\""),
            "{name}: the router reaches the page"
        );
        assert_eq!(
            page.contains("\"sinks\":\"sinks\""),
            name == "tiny-gpt_oss",
            "{name}: the sink shares only where the model has sinks"
        );
        assert!(
            served == html_of_the_command_line(&fixture(name), text, &[]),
            "{name}: the served report differs from --html's"
        );
    }
}

/// The report `attnviz -m MODEL --image FILE --html OUT --threads 1` writes.
fn html_of_the_image_flag(
    model: &std::path::Path,
    picture: &std::path::Path,
    prompt: Option<&str>,
) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("r.html");
    let out = attnviz()
        .arg("-m")
        .arg(model)
        .arg("--image")
        .arg(picture)
        .args(prompt)
        .arg("--html")
        .arg(&file)
        .args(["--threads", "1", "-q"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read(&file).unwrap()
}

/// `text` for a URL's query: every byte but the unreserved ones as `%XX`.
fn query_text(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A picture posted to `/api/image?QUERY` as the body.
fn post_image(port: u16, query: &str, bytes: &[u8]) -> (u16, serde_json::Value) {
    let (status, body) = request(
        port,
        "POST",
        &format!("/api/image?{query}"),
        &[("Content-Type", "application/octet-stream")],
        bytes,
    );
    (
        status,
        serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null),
    )
}

#[test]
fn an_uploaded_picture_is_served_as_the_image_flag_writes_it() {
    // A DeiT (class and distillation tokens) and a SigLIP (no class token), a PNG and a JPEG,
    // and a name that is markup: the report of the bytes uploaded under a name is the report
    // `--image` writes for a file of that name, and Save names it after the picture.
    let models = [fixture("tiny-deit"), fixture("tiny-siglip")];
    let refs: Vec<&std::path::Path> = models.iter().map(|m| m.as_path()).collect();
    let server = serve(&refs, &[]);
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            0,
            "wide45x37.png",
            "wide45x37.png",
            "attnviz-report-wide45x37.html",
        ),
        (
            0,
            "wide45x37.jpg",
            "wide45x37.jpg",
            "attnviz-report-wide45x37.html",
        ),
        (
            1,
            "big80x64.png",
            "big80x64.png",
            "attnviz-report-big80x64.html",
        ),
        (
            0,
            "own32.png",
            "<img src=x onerror=alert(1)>.png",
            "attnviz-report-img-src-x-onerror-alert-1.html",
        ),
    ];
    for (model, source, name, saved_as) in cases {
        let bytes = std::fs::read(fixture("images").join(source)).unwrap();
        let picture = dir.path().join(name);
        std::fs::write(&picture, &bytes).unwrap();
        let query = format!("model={model}&name={}", query_text(name));
        let (status, answer) = post_image(server.port, &query, &bytes);
        assert_eq!(status, 200, "{name}: {answer}");
        assert_eq!(answer["name"], name, "{answer}");
        assert_eq!(answer["filename"], saved_as, "{answer}");
        assert!(answer["tokens"].as_u64().unwrap() > 4, "{answer}");
        let path = answer["report"].as_str().unwrap().to_string();
        let (status, served) = request(server.port, "GET", &format!("{path}?download=1"), &[], b"");
        assert_eq!(status, 200);
        let written = html_of_the_image_flag(&models[model], &picture, None);
        assert!(
            served == written,
            "{name}: the served report differs from --image --html's ({} vs {} bytes)",
            served.len(),
            written.len()
        );
        // The name is in the report as text only.
        let markup = served.windows(9).any(|w| w == b"<img src=");
        assert!(!markup, "{name}: the name reached the report's markup");
    }
    let log = server.log();
    assert!(
        log.iter().any(|l| l.starts_with("POST /api/image 200 ")),
        "{log:?}"
    );
}

/// A vision-language model's picture is uploaded with its prompt (`text=`): the run reads both,
/// as the processor does (its token count is the reference's, tests/reference/tiny-llava.json);
/// a vision model given text with its picture, and a prompt marking more pictures than one,
/// are refused in the library's words.
#[test]
fn an_uploaded_picture_goes_with_its_prompt_to_a_vision_language_model() {
    let reference: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("tests/reference/tiny-llava.json")).unwrap(),
    )
    .unwrap();
    let case = reference["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "describe")
        .unwrap();
    let models = [fixture("tiny-llava"), fixture("tiny-deit")];
    let refs: Vec<&std::path::Path> = models.iter().map(|m| m.as_path()).collect();
    let server = serve(&refs, &[]);
    let name = case["images"][0].as_str().unwrap();
    let bytes = std::fs::read(fixture("images").join(name)).unwrap();
    let prompt = case["text"].as_str().unwrap();
    let query = format!("model=0&name={name}&text={}", query_text(prompt));
    let (status, answer) = post_image(server.port, &query, &bytes);
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["tokens"], case["n"], "{answer}");
    assert_eq!(answer["name"], name, "{answer}");
    let two = query_text("USER: <image>\n<image>\nCompare them. ASSISTANT:");
    let (status, answer) = post_image(server.port, &format!("model=0&text={two}"), &bytes);
    assert_eq!(status, 400, "{answer}");
    assert!(
        answer["error"]
            .as_str()
            .is_some_and(|e| e.contains("marks 2 pictures with <image> but 1 was given")),
        "{answer}"
    );
    let (status, answer) = post_image(server.port, "model=1&text=a%20caption", &bytes);
    assert_eq!(status, 400, "{answer}");
    assert!(
        answer["error"]
            .as_str()
            .is_some_and(|e| e.contains("it reads the picture alone, not text with it")),
        "{answer}"
    );
    // Generation with the picture in the prompt, as `--generate` gives it.
    let (status, answer) = post_image(server.port, &format!("{query}&generate=2"), &bytes);
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["tokens"],
        case["n"].as_u64().unwrap() + 2,
        "{answer}"
    );
    assert!(answer["generated"].is_string(), "{answer}");
    for (asked, words) in [
        ("model=1&generate=2", "generates nothing"),
        (
            "model=0&generate=100000",
            "is more than this server generates",
        ),
    ] {
        let (status, answer) = post_image(server.port, asked, &bytes);
        assert_eq!(status, 400, "{answer}");
        assert!(
            answer["error"].as_str().is_some_and(|e| e.contains(words)),
            "{asked}: {answer}"
        );
    }
}

/// A PNG header claiming 100000 × 100000 pixels, an animated PNG, a JPEG claiming 60000 ×
/// 60000, a JPEG of too many scans, a PNG whose profile is a bomb, each with the words the
/// library's refusal has.
fn bad_pictures() -> Vec<(&'static str, Vec<u8>, &'static str)> {
    let png = std::fs::read(fixture("images/own32.png")).unwrap();
    let jpeg = std::fs::read(fixture("images/wide45x37.jpg")).unwrap();
    let mut bomb = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut bomb, 1, 1);
        enc.set_color(png::ColorType::Rgb);
        enc.write_header()
            .unwrap()
            .write_image_data(&[1, 2, 3])
            .unwrap();
    }
    bomb[16..20].copy_from_slice(&100_000u32.to_be_bytes());
    bomb[20..24].copy_from_slice(&100_000u32.to_be_bytes());
    let mut huge = jpeg.clone();
    let sof = (0..huge.len() - 1)
        .find(|&i| huge[i] == 0xFF && matches!(huge[i + 1], 0xC0 | 0xC2))
        .expect("a frame header");
    huge[sof + 5..sof + 9].copy_from_slice(&[0xEA, 0x60, 0xEA, 0x60]);
    let mut apng = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut apng, 2, 2);
        enc.set_color(png::ColorType::Rgb);
        enc.set_animated(2, 0).unwrap();
        let mut w = enc.write_header().unwrap();
        w.write_image_data(&[0; 12]).unwrap();
        w.write_image_data(&[255; 12]).unwrap();
    }
    vec![
        (
            "notes.txt",
            b"hello, not a picture".to_vec(),
            "is not a readable image",
        ),
        ("cut.png", png[..60].to_vec(), "is not a readable image"),
        ("cut.jpg", jpeg[..jpeg.len() * 2 / 3].to_vec(), "truncated"),
        ("bomb.png", bomb, "bomb.png"),
        (
            "huge.jpg",
            huge,
            "60000×60000 pixels, more than attnviz decodes",
        ),
        ("moving.png", apng, "is animated (APNG)"),
        // Made to hold the decoder: 600 scans; a colour profile that inflates to 2 MiB.
        (
            "scans.jpg",
            progressive_jpeg(8, 8, 1, Scans::EmptyAc(600)),
            "is a progressive JPEG of more than 500 scans",
        ),
        (
            "profile.png",
            png_with_profile(2 << 20),
            "has a colour profile (iCCP) chunk that inflates past 1 MiB",
        ),
    ]
}

#[test]
fn uploads_are_bounded_and_bad_pictures_get_a_4xx_in_one_line() {
    let server = serve(&[&fixture("tiny-deit"), &tiny()], &[]);
    let port = server.port;
    let good = std::fs::read(fixture("images/wide45x37.png")).unwrap();
    // Over the bound by its length alone: 413 at once, before a byte of the body is sent (the
    // server would otherwise wait for it).
    let (status, body) = exchange(
        port,
        format!(
            "POST /api/image?model=0 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            (20 << 20) + 1
        )
        .as_bytes(),
    );
    assert_eq!(status, 413, "{}", String::from_utf8_lossy(&body));
    assert!(
        String::from_utf8_lossy(&body).contains("20 MiB"),
        "{}",
        String::from_utf8_lossy(&body)
    );
    // Without a length (chunked): cut off with 413 once past the bound.
    let (status, body) = chunked_upload(port, 24 << 20);
    assert_eq!(status, 413, "{}", String::from_utf8_lossy(&body));
    // Pictures the library cannot read: 400, its one line, naming the picture.
    for (name, bytes, words) in bad_pictures() {
        let (status, answer) = post_image(port, &format!("model=0&name={name}"), &bytes);
        assert_eq!(status, 400, "{name}: {answer}");
        let message = answer["error"].as_str().unwrap();
        assert!(
            message.contains(words) && message.contains(name) && !message.contains('\n'),
            "{name}: {message}"
        );
    }
    // Inputs the model does not take, and requests that are not uploads.
    let refused: [(&str, &[u8], u16, &str); 5] = [
        ("model=1&name=a.png", &good, 400, "text model"),
        ("model=2&name=a.png", &good, 404, "this server has 2"),
        ("model=0&name=a.png", b"", 400, "empty"),
        ("model=0&path=%2Fetc%2Fpasswd", &good, 400, "unknown field"),
        ("model=-1", &good, 400, "model"),
    ];
    for (query, bytes, code, words) in refused {
        let (status, answer) = post_image(port, query, bytes);
        assert_eq!(status, code, "{query}: {answer}");
        let message = answer["error"].as_str().unwrap();
        assert!(message.contains(words), "{query}: {message}");
    }
    let (status, answer) = post_run(port, r#"{"model": 0, "text": "a cat"}"#);
    assert_eq!(status, 400, "{answer}");
    assert!(
        answer["error"].as_str().unwrap().contains("vision model"),
        "{answer}"
    );
    // Still up, nothing left in flight, and a good picture runs.
    assert_eq!(health(port)["in_flight"], 0);
    let (status, answer) = post_image(port, "model=0&name=wide45x37.png", &good);
    assert_eq!(status, 200, "{answer}");
}

/// A chunked upload of `total` bytes (zeros, 1 MiB a chunk) sent from a thread while the answer
/// is read: the server may answer, and close, before it is all sent.
fn chunked_upload(port: u16, total: usize) -> (u16, Vec<u8>) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut writer = s.try_clone().unwrap();
    let sending = std::thread::spawn(move || {
        let head = format!(
            "POST /api/image?model=0&name=big.png HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        );
        if writer.write_all(head.as_bytes()).is_err() {
            return;
        }
        let chunk = vec![0u8; 1 << 20];
        for _ in 0..total / chunk.len() {
            let mut piece = format!("{:x}\r\n", chunk.len()).into_bytes();
            piece.extend_from_slice(&chunk);
            piece.extend_from_slice(b"\r\n");
            if writer.write_all(&piece).is_err() {
                return; // the server has answered and hung up
            }
        }
        let _ = writer.write_all(b"0\r\n\r\n");
    });
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let _ = sending.join();
    let text = String::from_utf8_lossy(&out);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| out[i + 4..].to_vec())
        .unwrap_or_default();
    (status, body)
}

#[test]
fn an_upload_from_another_host_or_site_is_403() {
    let server = serve(&[&fixture("tiny-deit")], &[]);
    let port = server.port;
    let good = std::fs::read(fixture("images/wide45x37.png")).unwrap();
    let upload = |host: &str, origin: Option<&str>| {
        let mut raw = format!(
            "POST /api/image?model=0&name=a.png HTTP/1.1\r\nHost: {host}\r\nContent-Length: {}\r\nConnection: close\r\n",
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
    assert_eq!(upload(&here, None), 200);
}

#[test]
fn beyond_the_queue_an_upload_gets_503_before_its_body_is_sent() {
    // One upload holds the model (`--test-hold`), one waits in the queue of 1, and the third is
    // refused on its headers alone: its body is never read.
    let mut server = serve(&[&fixture("tiny-deit")], &["--queue", "1", "--test-hold"]);
    let port = server.port;
    let good = std::fs::read(fixture("images/wide45x37.png")).unwrap();
    let upload =
        |bytes: Vec<u8>| std::thread::spawn(move || post_image(port, "model=0&name=a.png", &bytes));
    let first = upload(good.clone());
    wait_for("the first upload", Duration::from_secs(30), || {
        in_flight(port) == 1
    });
    let second = upload(good.clone());
    wait_for("the queued upload", Duration::from_secs(30), || {
        in_flight(port) == 2
    });
    let (status, body) = exchange(
        port,
        format!(
            "POST /api/image?model=0 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            good.len()
        )
        .as_bytes(),
    );
    assert_eq!(status, 503, "{}", String::from_utf8_lossy(&body));
    server.release();
    server.release();
    for (which, handle) in [("first", first), ("second", second)] {
        let (status, answer) = handle.join().unwrap();
        assert_eq!(status, 200, "the {which}: {answer}");
    }
    assert_eq!(in_flight(port), 0);
}

/// What `attnviz diff A.json B.json ARGS --html` writes, A.json and B.json being the command
/// line's full-precision exports of `(model, text)` on each side, in a folder of their own
/// (so the page names them `A.json` and `B.json`, as the served comparison does).
fn diff_of_the_command_line(
    a: (&std::path::Path, &str),
    b: (&std::path::Path, &str),
    args: &[&str],
) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    for (name, (model, text)) in [("A.json", a), ("B.json", b)] {
        let out = attnviz()
            .arg("-m")
            .arg(model)
            .arg(text)
            .args(["--json", name, "--full-precision", "--threads", "1", "-q"])
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = attnviz()
        .args(["diff", "A.json", "B.json", "--html", "c.html", "-q"])
        .args(args)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read(dir.path().join("c.html")).unwrap()
}

/// One comparison case: model A, text A, model B, text B, diff's flags, the basis expected.
type Case<'a> = (usize, &'a str, usize, &'a str, &'a [&'a str], &'a str);

#[test]
fn the_served_comparison_is_the_bytes_of_diff_html() {
    // Two inputs on one model (tokens aligned), one input on two models of one tokenizer (the
    // same units), on two tokenizers (words), and on models of different shapes (refused with
    // one line, then compared on the shared layers when asked).
    let names = [
        "tiny-bert",
        "tiny-distilbert",
        "tiny-electra",
        "tiny-roberta",
    ];
    let models: Vec<std::path::PathBuf> = names.iter().map(|n| fixture(n)).collect();
    let refs: Vec<&std::path::Path> = models.iter().map(|m| m.as_path()).collect();
    let server = serve(&refs, &[]);
    let (cat, dog) = ("The cat sat on the mat.", "The dog sat on the red mat.");
    let cases: [Case; 4] = [
        (0, cat, 0, dog, &[], "aligned_tokens"),
        (1, cat, 2, cat, &[], "same_units"),
        (2, cat, 3, cat, &[], "words"),
        (0, cat, 2, dog, &["--shared"], "aligned_tokens"),
    ];
    for (ma, ta, mb, tb, args, basis) in cases {
        let mut json = serde_json::json!({
            "a": { "model": ma, "text": ta },
            "b": { "model": mb, "text": tb },
        });
        if args.contains(&"--shared") {
            let (status, answer) = post_compare(server.port, &json.to_string());
            assert_eq!(status, 400, "{answer}");
            let message = answer["error"].as_str().unwrap();
            assert!(
                message.contains("3 layers") && !message.contains('\n'),
                "{message}"
            );
            json["shared"] = true.into();
        }
        let (status, answer) = post_compare(server.port, &json.to_string());
        assert_eq!(status, 200, "{json}: {answer}");
        assert_eq!(answer["basis"], basis, "{json}: {answer}");
        let path = answer["report"].as_str().unwrap().to_string();
        let (status, served) = request(server.port, "GET", &format!("{path}?download=1"), &[], b"");
        assert_eq!(status, 200);
        let written = diff_of_the_command_line((&models[ma], ta), (&models[mb], tb), args);
        assert!(
            served == written,
            "{json}: the served comparison differs from diff --html's ({} vs {} bytes)",
            served.len(),
            written.len()
        );
    }
    // The farthest head the answer names is the one the page ranks first.
    let json = serde_json::json!({ "a": { "text": cat }, "b": { "text": dog } });
    let (_, answer) = post_compare(server.port, &json.to_string());
    let d = answer["farthest"]["distance"].as_f64().unwrap();
    assert!(d > 0.0 && d <= 1.0, "{answer}");
    // Malformed comparisons: one line each, 4xx.
    for bad in [
        r#"{"a": {"text": "hi"}}"#,
        r#"{"a": {"text": "hi"}, "b": {"text": ""}}"#,
        r#"{"a": {"text": "hi"}, "b": {"text": "hi", "model": 9}}"#,
        r#"{"a": {"text": "hi"}, "b": {"text": "hi"}, "path": "/etc/passwd"}"#,
    ] {
        let (status, answer) = post_compare(server.port, bad);
        assert!((400..500).contains(&status), "{bad}: {status} {answer}");
        assert!(answer["error"].is_string(), "{bad}: {answer}");
    }
}

fn post_compare(port: u16, json: &str) -> (u16, serde_json::Value) {
    let (status, body) = request(
        port,
        "POST",
        "/api/compare",
        &[("Content-Type", "application/json")],
        json.as_bytes(),
    );
    (
        status,
        serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null),
    )
}

#[test]
fn a_client_that_sends_its_headers_slowly_is_dropped() {
    // Half a request line and one header, then nothing ("slowloris"): the server closes the
    // connection after its header-read bound (10 s), answers others meanwhile, and holds
    // nothing for it afterwards. A client trickling a byte a second is dropped the same way.
    let server = serve(&[&tiny()], &[]);
    let port = server.port;
    let started = Instant::now();
    let mut stalled = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stalled
        .write_all(format!("GET /api/health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n").as_bytes())
        .unwrap();
    let trickler = std::thread::spawn(move || {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
        let request = format!("GET /api/health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Pad: ");
        for b in request.bytes().chain(std::iter::repeat_n(b'a', 60)) {
            if s.write_all(&[b]).is_err() {
                return true; // the server hung up
            }
            std::thread::sleep(Duration::from_millis(1000));
        }
        false
    });
    // Others are served while those two wait.
    assert_eq!(health(port)["in_flight"], 0);
    stalled
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut out = Vec::new();
    let read = stalled.read_to_end(&mut out);
    let waited = started.elapsed();
    assert!(
        read.is_ok() && !String::from_utf8_lossy(&out).contains(" 200 "),
        "the stalled connection was closed without an answer: {read:?} {:?}",
        String::from_utf8_lossy(&out)
    );
    // Closed by the bound, not by the read timeout of this test.
    assert!(waited < Duration::from_secs(60), "{waited:?}");
    assert!(trickler.join().unwrap(), "the trickling client was dropped");
    assert_eq!(health(port)["in_flight"], 0);
    let (status, _) = request(port, "GET", "/", &[], b"");
    assert_eq!(status, 200, "the server is still up");
}

#[test]
fn off_loopback_every_url_needs_the_token() {
    // 0.0.0.0 listens on loopback too, so the test reaches it there.
    let server = serve(&[&tiny()], &["--host", "0.0.0.0"]);
    let token = server
        .url
        .split("token=")
        .nth(1)
        .expect("a token in the printed URL")
        .to_string();
    assert_eq!(token.len(), 48);
    let log = server.log();
    assert!(
        log.iter()
            .any(|l| l.starts_with("warning: listening on 0.0.0.0:") && l.contains("ssh -L")),
        "{log:?}"
    );
    let port = server.port;
    assert_eq!(request(port, "GET", "/api/models", &[], b"").0, 403);
    assert_eq!(
        request(port, "GET", "/api/models?token=nope", &[], b"").0,
        403
    );
    assert_eq!(
        request(port, "GET", &format!("/api/models?token={token}"), &[], b"").0,
        200
    );
    assert_eq!(
        request(
            port,
            "GET",
            "/api/models",
            &[("X-Attnviz-Token", &token)],
            b""
        )
        .0,
        200
    );
}

#[test]
fn a_thousand_malformed_requests_each_get_a_4xx_and_the_server_stays_up() {
    let server = serve(&[&tiny()], &["--max-tokens", "32"]);
    let port = server.port;
    let host = format!("Host: 127.0.0.1:{port}\r\n");
    let long = "word ".repeat(200);
    let mut cases: Vec<Vec<u8>> = vec![
        format!("BREW /api/run HTTP/1.1\r\n{host}Connection: close\r\n\r\n").into_bytes(),
        format!("DELETE / HTTP/1.1\r\n{host}Connection: close\r\n\r\n").into_bytes(),
        format!("PUT /api/run HTTP/1.1\r\n{host}Content-Length: 2\r\nConnection: close\r\n\r\n{{}}").into_bytes(),
        format!("GET /nothing/here HTTP/1.1\r\n{host}Connection: close\r\n\r\n").into_bytes(),
        format!("GET /report/0123 HTTP/1.1\r\n{host}Connection: close\r\n\r\n").into_bytes(),
        format!("GET /../../etc/passwd HTTP/1.1\r\n{host}Connection: close\r\n\r\n").into_bytes(),
        format!("GET /api/models HTTP/1.1\r\n{host}X-Big: {}\r\nConnection: close\r\n\r\n", "a".repeat(512 * 1024)).into_bytes(),
        format!("POST /api/run HTTP/1.1\r\n{host}Content-Type: application/json\r\nContent-Length: 10000000\r\nConnection: close\r\n\r\n{}", "x".repeat(100_000)).into_bytes(),
        b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n".to_vec(),
        b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03garbage\r\n\r\n".to_vec(),
    ];
    let bodies: Vec<Vec<u8>> = vec![
        b"{".to_vec(),
        b"not json".to_vec(),
        b"[]".to_vec(),
        br#"{"text": 3}"#.to_vec(),
        br#"{"text": "hi", "model": 7}"#.to_vec(),
        br#"{"text": "hi", "model": -1}"#.to_vec(),
        br#"{"text": "hi", "path": "/etc/passwd"}"#.to_vec(),
        br#"{"text": ""}"#.to_vec(),
        br#"{"text": "   "}"#.to_vec(),
        br#"{"text": "hi", "generate": 5}"#.to_vec(),
        br#"{"text": "hi", "target": "x"}"#.to_vec(),
        br#"{"text": "hi", "chat": true}"#.to_vec(),
        b"{\"text\": \"\xff\xfe bad utf-8\"}".to_vec(),
        format!(r#"{{"text": "{long}"}}"#).into_bytes(),
        format!(r#"{{"text": "hi", "pair": "{long}"}}"#).into_bytes(),
        format!(r#"{{"text": "{}"}}"#, "a".repeat(40_000)).into_bytes(),
    ];
    for b in &bodies {
        let mut raw = format!(
            "POST /api/run HTTP/1.1\r\n{host}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            b.len()
        )
        .into_bytes();
        raw.extend_from_slice(b);
        cases.push(raw);
    }
    // Uploads that are not: a picture for a text model, a bad query, a length over the bound.
    for query in [
        "model=0&name=a.png",
        "model=x",
        "model=0&model=1",
        "name=%ff%fe",
    ] {
        cases.push(format!("POST /api/image?{query} HTTP/1.1\r\n{host}Content-Length: 4\r\nConnection: close\r\n\r\njunk").into_bytes());
    }
    cases.push(format!("POST /api/image HTTP/1.1\r\n{host}Content-Length: 99999999999\r\nConnection: close\r\n\r\n").into_bytes());
    cases.push(format!("GET /api/image HTTP/1.1\r\n{host}Connection: close\r\n\r\n").into_bytes());
    // The same JSON without its content type.
    cases.push(format!("POST /api/run HTTP/1.1\r\n{host}Content-Length: 15\r\nConnection: close\r\n\r\n{{\"text\": \"hi\"}}").into_bytes());
    let mut seen = std::collections::BTreeMap::new();
    for i in 0..1000 {
        let raw = &cases[i % cases.len()];
        let (status, _) = exchange(port, raw);
        assert!(
            (400..500).contains(&status),
            "case {} got {status}: {}",
            i % cases.len(),
            String::from_utf8_lossy(&raw[..raw.len().min(120)])
        );
        *seen.entry(status).or_insert(0) += 1;
    }
    println!("malformed requests by status: {seen:?}");
    let (status, answer) = post_run(port, r#"{"text": "still up"}"#);
    assert_eq!(status, 200, "{answer}");
}

#[test]
fn beyond_the_connection_bound_a_client_gets_503_and_the_server_stays_up() {
    let server = serve(&[&tiny()], &["--max-connections", "4"]);
    let port = server.port;
    // Four idle connections take every place (the accept loop takes them in order, so they
    // hold their places before the fifth is accepted).
    let idle: Vec<TcpStream> = (0..4)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).expect("connects"))
        .collect();
    for _ in 0..3 {
        let (status, body) = request(port, "GET", "/api/health", &[], b"");
        assert_eq!(status, 503, "{}", String::from_utf8_lossy(&body));
        let answer: serde_json::Value = serde_json::from_slice(&body).expect("a JSON error");
        assert!(
            answer["error"]
                .as_str()
                .unwrap()
                .contains("too many connections"),
            "{answer}"
        );
    }
    // The idle ones leave: their places come back (once the server has seen them go).
    drop(idle);
    let mut status = 0;
    for _ in 0..200 {
        status = request(port, "GET", "/api/health", &[], b"").0;
        if status == 200 {
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    assert_eq!(status, 200, "the places of closed connections are freed");
    let (status, _) = post_run(port, r#"{"text": "the cat sat"}"#);
    assert_eq!(status, 200);
}

#[test]
fn a_client_that_leaves_mid_request_leaves_nothing_behind() {
    let server = serve(&[&tiny()], &[]);
    let port = server.port;
    for _ in 0..20 {
        // Headers, half a body, gone.
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let _ = s.write_all(
            format!("POST /api/run HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: 40\r\n\r\n{{\"text\": \"the cat")
                .as_bytes(),
        );
        drop(s);
        // The whole request, gone before the answer.
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let body = r#"{"text": "the cat sat on the mat"}"#;
        let _ = s.write_all(
            format!("POST /api/run HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len())
                .as_bytes(),
        );
        drop(s);
    }
    let started = Instant::now();
    while health(port)["in_flight"] != 0 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "requests stay in flight: {}",
            health(port)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let h = health(port);
    assert!(h["reports"].as_u64().unwrap() <= 16, "{h}");
    let (status, answer) = post_run(port, r#"{"text": "after them"}"#);
    assert_eq!(status, 200, "{answer}");
}

fn in_flight(port: u16) -> u64 {
    health(port)["in_flight"].as_u64().unwrap()
}

/// A run posted from another thread; its status and answer come back on join.
fn post_in_background(port: u16, text: &str) -> std::thread::JoinHandle<(u16, serde_json::Value)> {
    let json = serde_json::json!({ "text": text }).to_string();
    std::thread::spawn(move || post_run(port, &json))
}

#[test]
fn beyond_the_queue_requests_get_503() {
    // `--test-hold` keeps each run waiting, with its model's turn, until the test releases it:
    // one run holds the model, one waits in the queue of 1, and the third is refused.
    let mut server = serve(&[&tiny()], &["--queue", "1", "--test-hold"]);
    let port = server.port;
    let first = post_in_background(port, "the first holds the model");
    wait_for("the first run", Duration::from_secs(30), || {
        in_flight(port) == 1
    });
    let second = post_in_background(port, "the second waits");
    wait_for("the queued run", Duration::from_secs(30), || {
        in_flight(port) == 2
    });
    let (status, answer) = post_run(port, r#"{"text": "the third finds the queue full"}"#);
    assert_eq!(status, 503, "{answer}");
    assert!(
        answer["error"].as_str().unwrap().contains("queue is full"),
        "{answer}"
    );
    server.release();
    server.release();
    for (which, handle) in [("first", first), ("second", second)] {
        let (status, answer) = handle.join().unwrap();
        assert_eq!(status, 200, "the {which}: {answer}");
    }
    assert_eq!(in_flight(port), 0);
    // The queue has room again.
    let third = post_in_background(port, "the third again");
    wait_for("the third run", Duration::from_secs(30), || {
        in_flight(port) == 1
    });
    server.release();
    assert_eq!(third.join().unwrap().0, 200);
}

/// One raw HTTP/1.1 exchange; the whole answer as text, headers included.
fn exchange_text(port: u16, raw: &[u8]) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connects");
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let _ = s.write_all(raw);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// A GET of `path` from another thread; its status and answer come back on join.
fn get_in_background(port: u16, path: &str) -> std::thread::JoinHandle<(u16, Vec<u8>)> {
    let path = path.to_string();
    std::thread::spawn(move || request(port, "GET", &path, &[], b""))
}

fn writing(port: u16) -> u64 {
    health(port)["writing"].as_u64().unwrap()
}

#[test]
fn reports_are_written_one_at_a_time_and_beyond_their_queue_get_503() {
    // `--test-hold` holds each report, with the writer's turn, until the test releases it: one
    // is written, one waits in the queue of 1, and the third is refused at once, as a run
    // beyond its model's queue is (60 report requests at once used to take every blocking
    // thread and hold the runs back behind them).
    let mut server = serve(&[&tiny()], &["--queue", "1", "--test-hold"]);
    let port = server.port;
    let run = post_in_background(port, "a run to report on");
    wait_for("the run", Duration::from_secs(30), || in_flight(port) == 1);
    server.release();
    let (status, answer) = run.join().unwrap();
    assert_eq!(status, 200, "{answer}");
    let report = answer["report"].as_str().unwrap().to_string();
    let first = get_in_background(port, &report);
    wait_for("the first report", Duration::from_secs(30), || {
        writing(port) == 1
    });
    let second = get_in_background(port, &format!("{report}?download=1"));
    wait_for("the queued report", Duration::from_secs(30), || {
        writing(port) == 2
    });
    let third = exchange_text(
        port,
        format!("GET {report} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n")
            .as_bytes(),
    );
    assert!(third.starts_with("HTTP/1.1 503"), "{third}");
    assert!(
        third
            .to_ascii_lowercase()
            .contains("\r\nretry-after: 1\r\n"),
        "{third}"
    );
    assert!(third.contains("queue is full"), "{third}");
    // A comparison page is kept written: served at once, whatever the writer is doing.
    server.release();
    server.release();
    for (which, handle) in [("first", first), ("second", second)] {
        let (status, html) = handle.join().unwrap();
        assert_eq!(status, 200, "the {which}");
        assert!(html.starts_with(b"<!DOCTYPE html>"), "the {which}");
    }
    assert_eq!(writing(port), 0);
    // A run beyond its model's queue is told when to come back too.
    let held = post_in_background(port, "holds the model");
    wait_for("the held run", Duration::from_secs(30), || {
        in_flight(port) == 1
    });
    let queued = post_in_background(port, "waits");
    wait_for("the queued run", Duration::from_secs(30), || {
        in_flight(port) == 2
    });
    let body = r#"{"text": "refused"}"#;
    let refused = exchange_text(
        port,
        format!(
            "POST /api/run HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: \
             application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    );
    assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
    assert!(
        refused
            .to_ascii_lowercase()
            .contains("\r\nretry-after: 1\r\n"),
        "{refused}"
    );
    server.release();
    server.release();
    assert_eq!(held.join().unwrap().0, 200);
    assert_eq!(queued.join().unwrap().0, 200);
}

#[test]
fn the_kept_runs_are_bounded_by_bytes_the_oldest_dropped_first() {
    // tiny-bert: 2 layers × 2 heads; a run of a dozen tokens keeps a few KiB of weights. With
    // 24 KiB, a handful are kept, far fewer than 16.
    let server = serve(&[&tiny()], &["--keep-memory", "24K"]);
    let port = server.port;
    let mut reports = Vec::new();
    for i in 0..12 {
        let text = format!("run number {i} of a dozen, each of them a few tokens long");
        let (status, answer) = post_run(port, &serde_json::json!({ "text": text }).to_string());
        assert_eq!(status, 200, "{answer}");
        reports.push(answer["report"].as_str().unwrap().to_string());
        let h = health(port);
        let (kept, bytes) = (
            h["reports"].as_u64().unwrap(),
            h["report_bytes"].as_u64().unwrap(),
        );
        assert!(bytes <= 24 * 1024 || kept == 1, "{h}");
    }
    let h = health(port);
    let kept = h["reports"].as_u64().unwrap() as usize;
    assert!((1..12).contains(&kept), "{h}");
    // The newest are there; the oldest are gone, and saying so.
    for (i, path) in reports.iter().enumerate() {
        let (status, body) = request(port, "GET", path, &[], b"");
        if i >= reports.len() - kept {
            assert_eq!(status, 200, "report {i}");
        } else {
            assert_eq!(status, 404, "report {i}");
            assert!(
                String::from_utf8_lossy(&body).contains("--keep-memory"),
                "{}",
                String::from_utf8_lossy(&body)
            );
        }
    }
    // A run larger than the whole budget is still kept (alone): the page loads it next.
    let server = serve(&[&tiny()], &["--keep-memory", "1K"]);
    let (status, answer) = post_run(server.port, r#"{"text": "larger than a kibibyte"}"#);
    assert_eq!(status, 200, "{answer}");
    let path = answer["report"].as_str().unwrap();
    assert_eq!(request(server.port, "GET", path, &[], b"").0, 200);
    assert_eq!(health(server.port)["reports"], 1);
}

#[test]
fn a_host_or_origin_sent_twice_or_contradicted_is_400() {
    let server = serve(&[&tiny()], &[]);
    let port = server.port;
    let ours = format!("127.0.0.1:{port}");
    let status =
        |head: String| exchange(port, format!("{head}Connection: close\r\n\r\n").as_bytes()).0;
    assert_eq!(
        status(format!("GET /api/models HTTP/1.1\r\nHost: {ours}\r\n")),
        200
    );
    for head in [
        format!("GET /api/models HTTP/1.1\r\nHost: {ours}\r\nHost: {ours}\r\n"),
        format!("GET /api/models HTTP/1.1\r\nHost: {ours}\r\nHost: attacker.example\r\n"),
        format!("GET /api/models HTTP/1.1\r\nHost: attacker.example\r\nHost: {ours}\r\n"),
        format!(
            "GET /api/models HTTP/1.1\r\nHost: {ours}\r\nOrigin: http://{ours}\r\n\
             Origin: http://attacker.example\r\n"
        ),
        format!(
            "GET /api/models HTTP/1.1\r\nHost: {ours}\r\nX-Attnviz-Token: a\r\n\
             X-Attnviz-Token: b\r\n"
        ),
        // The request line names another server than the Host header.
        format!("GET http://attacker.example/api/models HTTP/1.1\r\nHost: {ours}\r\n"),
    ] {
        assert_eq!(status(head.clone()), 400, "{head}");
    }
    // The request line's address alone, or agreeing with Host, is the address.
    assert_eq!(
        status(format!(
            "GET http://{ours}/api/models HTTP/1.1\r\nHost: {ours}\r\n"
        )),
        200
    );
    // One log line each, and the server is still up.
    assert_eq!(request(port, "GET", "/api/models", &[], b"").0, 200);
}

#[test]
fn with_the_token_flag_loopback_urls_need_the_token_too() {
    let server = serve(&[&tiny()], &["--token"]);
    assert!(
        server.url.starts_with("http://127.0.0.1:"),
        "{}",
        server.url
    );
    let token = server
        .url
        .split("token=")
        .nth(1)
        .expect("a token in the printed URL")
        .to_string();
    assert_eq!(token.len(), 48);
    let port = server.port;
    assert_eq!(request(port, "GET", "/", &[], b"").0, 403);
    assert_eq!(request(port, "GET", "/api/models", &[], b"").0, 403);
    assert_eq!(
        request(port, "GET", &format!("/?token={token}"), &[], b"").0,
        200
    );
    let (status, _) = request(
        port,
        "POST",
        "/api/run",
        &[
            ("Content-Type", "application/json"),
            ("X-Attnviz-Token", &token),
        ],
        br#"{"text": "with the token"}"#,
    );
    assert_eq!(status, 200);
    // Loopback, so no warning about other machines; the token is never logged.
    let log = server.log();
    assert!(!log.iter().any(|l| l.starts_with("warning:")), "{log:?}");
    assert!(
        !log.iter()
            .filter(|l| !l.contains("open http"))
            .any(|l| l.contains(&token)),
        "{log:?}"
    );
    // Without the flag, loopback needs none.
    let open = serve(&[&tiny()], &[]);
    assert!(!open.url.contains("token="), "{}", open.url);
    assert_eq!(request(open.port, "GET", "/api/models", &[], b"").0, 200);
}

#[test]
fn answers_and_reports_name_a_local_model_by_its_folder_not_its_path() {
    // The test's models are given by their absolute paths, as a user's often are.
    let model = tiny();
    let path = model.display().to_string();
    assert!(model.is_absolute(), "{path}");
    for (extra, full) in [(&[][..], false), (&["--full-paths"][..], true)] {
        let server = serve(&[&model], extra);
        let port = server.port;
        let (_, models) = request(port, "GET", "/api/models", &[], b"");
        let (status, answer) = post_run(port, r#"{"text": "where is the model?"}"#);
        assert_eq!(status, 200, "{answer}");
        let report = answer["report"].as_str().unwrap();
        let (status, html) = request(port, "GET", &format!("{report}?download=1"), &[], b"");
        assert_eq!(status, 200);
        let html = String::from_utf8_lossy(&html).into_owned();
        let answer = answer.to_string();
        let models = String::from_utf8_lossy(&models).into_owned();
        for (what, text) in [("answer", &answer), ("report", &html), ("models", &models)] {
            // JSON inside the page escapes `/` nowhere; the path would appear as it is.
            assert_eq!(
                text.contains(&path),
                full && what != "models",
                "{what} {extra:?}"
            );
        }
        assert!(html.contains("tiny-bert"));
        // The report is still the command line's, with the same flag.
        let args: &[&str] = if full { &["--full-paths"] } else { &[] };
        let written = html_of_the_command_line(&model, "where is the model?", args);
        assert!(
            written == html.as_bytes(),
            "the report differs from --html's"
        );
    }
}

#[test]
fn sigterm_stops_taking_connections_and_lets_the_run_in_flight_finish() {
    let mut server = serve(&[&tiny()], &["--test-hold"]);
    let port = server.port;
    let running = post_in_background(port, "a run in flight when the signal comes");
    wait_for("the run", Duration::from_secs(30), || in_flight(port) == 1);
    // SAFETY: a signal to the server this test started.
    assert_eq!(
        unsafe { libc::kill(server.child.id() as libc::pid_t, libc::SIGTERM) },
        0
    );
    wait_for("the listener to close", Duration::from_secs(30), || {
        TcpStream::connect(("127.0.0.1", port)).is_err()
    });
    server.release();
    let (status, answer) = running.join().unwrap();
    assert_eq!(status, 200, "{answer}");
    let mut exited = None;
    wait_for("the server to exit", Duration::from_secs(30), || {
        exited = server.child.try_wait().unwrap();
        exited.is_some()
    });
    assert_eq!(exited.unwrap().code(), Some(0));
    // The reader thread sees the last lines once the pipe closes.
    wait_for("the last log line", Duration::from_secs(10), || {
        server.log().iter().any(|l| l == "attnviz serve: stopped")
    });
    let log = server.log();
    assert!(
        log.iter().any(|l| l.starts_with("POST /api/run 200 ")),
        "{log:?}"
    );
}

#[test]
fn sigterm_answers_the_requests_still_waiting_at_once() {
    // One run holds the model (`--test-hold`), one waits for it; SIGTERM answers the waiting
    // one 503 without running it, and the one in flight finishes.
    let mut server = serve(&[&tiny()], &["--queue", "2", "--test-hold"]);
    let port = server.port;
    let running = post_in_background(port, "a run in flight when the signal comes");
    wait_for("the run", Duration::from_secs(30), || in_flight(port) == 1);
    let waiting = post_in_background(port, "a run waiting for the model");
    wait_for("the queued run", Duration::from_secs(30), || {
        in_flight(port) == 2
    });
    // SAFETY: a signal to the server this test started.
    assert_eq!(
        unsafe { libc::kill(server.child.id() as libc::pid_t, libc::SIGTERM) },
        0
    );
    wait_for("the waiting run's answer", Duration::from_secs(30), || {
        waiting.is_finished()
    });
    let (status, answer) = waiting.join().unwrap();
    assert_eq!(status, 503, "{answer}");
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("the server is stopping"),
        "{answer}"
    );
    server.release();
    assert_eq!(running.join().unwrap().0, 200);
    let mut exited = None;
    wait_for("the server to exit", Duration::from_secs(30), || {
        exited = server.child.try_wait().unwrap();
        exited.is_some()
    });
    assert_eq!(exited.unwrap().code(), Some(0));
}

#[test]
fn a_run_whose_request_timed_out_is_stopped_not_run_to_its_end() {
    // The run is held (`--test-hold`) until its request has timed out (503 after 1 s); once
    // let go it finds its cancel flag set and stops before decoding the picture.
    let mut server = serve(&[&fixture("tiny-deit")], &["--timeout", "1", "--test-hold"]);
    let port = server.port;
    let picture = std::fs::read(fixture("images/wide45x37.png")).unwrap();
    let upload = std::thread::spawn(move || post_image(port, "model=0&name=late.png", &picture));
    let (status, answer) = upload.join().unwrap();
    assert_eq!(status, 503, "{answer}");
    assert_eq!(in_flight(port), 1, "the run still holds its place");
    server.release();
    wait_for("the run to stop", Duration::from_secs(30), || {
        server
            .log()
            .iter()
            .any(|l| l.contains("a run of tiny-deit stopped") && l.contains("--timeout"))
    });
    wait_for("its place to be freed", Duration::from_secs(30), || {
        in_flight(port) == 0
    });
    // The model serves the next picture.
    let picture = std::fs::read(fixture("images/wide45x37.png")).unwrap();
    let next = std::thread::spawn(move || post_image(port, "model=0&name=next.png", &picture));
    wait_for("the next run", Duration::from_secs(30), || {
        in_flight(port) == 1
    });
    server.release();
    assert_eq!(next.join().unwrap().0, 200);
}

#[test]
fn each_request_is_one_log_line_without_its_query() {
    let server = serve(&[&tiny()], &[]);
    let port = server.port;
    assert_eq!(
        request(port, "GET", "/api/models?token=secret-value", &[], b"").0,
        200
    );
    assert_eq!(request(port, "GET", "/no/such/page", &[], b"").0, 404);
    let (status, _) = request(
        port,
        "GET",
        "/api/models",
        &[("Origin", "http://attacker.example")],
        b"",
    );
    assert_eq!(status, 403);
    let wanted = [
        "GET /api/models 200 ",
        "GET /no/such/page 404 ",
        "GET /api/models 403 ",
    ];
    wait_for("three log lines", Duration::from_secs(10), || {
        server
            .log()
            .iter()
            .filter(|l| wanted.iter().any(|w| l.starts_with(w)))
            .count()
            == 3
    });
    let log = server.log();
    for w in wanted {
        let line = log.iter().find(|l| l.starts_with(w)).unwrap();
        assert!(line.ends_with(" ms"), "{line}");
    }
    assert!(!log.iter().any(|l| l.contains("secret-value")), "{log:?}");
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap()
}

#[test]
fn a_thousand_requests_from_eight_clients_succeed_with_flat_memory() {
    let server = serve(&[&tiny()], &["--queue", "16"]);
    let port = server.port;
    let pid = server.child.id();
    let round = |n: usize| -> Vec<Duration> {
        let handles: Vec<_> = (0..8)
            .map(|c| {
                std::thread::spawn(move || {
                    (0..n / 8)
                        .map(|i| {
                            let text = format!("client {c} sends request number {i}");
                            let started = Instant::now();
                            let (status, answer) =
                                post_run(port, &serde_json::json!({ "text": text }).to_string());
                            assert_eq!(status, 200, "{answer}");
                            started.elapsed()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    };
    round(200); // warm-up
    let warm = rss_kib(pid);
    let mut times = round(1000);
    let after = rss_kib(pid);
    times.sort();
    let p = |q: f64| times[((times.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e3;
    println!(
        "serve load: 1000 requests, 8 clients, tiny-bert: p50 {:.1} ms, p99 {:.1} ms; RSS {warm} KiB after warm-up, {after} KiB after",
        p(0.5),
        p(0.99)
    );
    assert!(
        (after as f64) <= warm as f64 * 1.10,
        "RSS grew from {warm} KiB to {after} KiB"
    );
}

#[test]
#[ignore = "browser suite: scripts/test.sh runs it with --include-ignored"]
fn the_app_in_chromium_and_firefox() {
    assert_browsers_ready(&[
        ("/usr/bin/chromium", "chromium"),
        ("/usr/bin/firefox-esr", "firefox-esr"),
    ]);
    let text = "The cat sat on the mat.";
    // A second model of other layers and a causal mask, for model B.
    let server = serve(&[&tiny(), &fixture("tiny-gpt2")], &[]);
    let dir = repo().join("tests/artifacts/serve");
    std::fs::create_dir_all(&dir).unwrap();
    let expected = dir.join("expected.html");
    std::fs::write(&expected, html_of_the_command_line(&tiny(), text, &[])).unwrap();
    let text_b = "The dog sat on the red mat.";
    let compare_expected = dir.join("compare-expected.html");
    let compared = diff_of_the_command_line((&tiny(), text), (&tiny(), text_b), &[]);
    std::fs::write(&compare_expected, compared).unwrap();
    let case = serde_json::json!({
        "url": server.url,
        "text": text,
        "expected": expected,
        "screens": dir.join("screens"),
        "text_b": text_b,
        "compare_expected": compare_expected,
    });
    std::fs::write(dir.join("case.json"), case.to_string()).unwrap();
    // The server's log says what the page asked for and when: printed when the page's steps fail.
    let steps =
        std::panic::catch_unwind(|| node_test("serve.test.mjs", &[("ATTNVIZ_SERVE", &dir)]));
    let log = server.log();
    if let Err(failed) = steps {
        eprintln!("the server's log:\n{}", log.join("\n"));
        std::panic::resume_unwind(failed);
    }
    assert!(
        log.iter().any(|l| l.starts_with("POST /api/run 200 "))
            && log.iter().any(|l| l.starts_with("POST /api/compare 200 ")),
        "{log:?}"
    );
}

#[test]
#[ignore = "browser suite: scripts/test.sh runs it with --include-ignored"]
fn the_picture_upload_in_chromium_and_firefox() {
    assert_browsers_ready(&[
        ("/usr/bin/chromium", "chromium"),
        ("/usr/bin/firefox-esr", "firefox-esr"),
    ]);
    let deit = fixture("tiny-deit");
    let llava = fixture("tiny-llava");
    let server = serve(&[&tiny(), &deit, &llava], &[]);
    let dir = repo().join("tests/artifacts/serve-image");
    std::fs::create_dir_all(&dir).unwrap();
    let picture = fixture("images/big80x64.png");
    let expected = dir.join("expected.html");
    std::fs::write(&expected, html_of_the_image_flag(&deit, &picture, None)).unwrap();
    // A vision-language model's prompt with the picture, as `-m LLAVA --image FILE PROMPT`.
    let prompt = "What is in this picture?";
    let expected_vlm = dir.join("expected-vlm.html");
    std::fs::write(
        &expected_vlm,
        html_of_the_image_flag(&llava, &picture, Some(prompt)),
    )
    .unwrap();
    let case = serde_json::json!({
        "prompt": prompt,
        "expected_vlm": expected_vlm,
        "url": server.url,
        "picture": picture,
        "second": fixture("images/wide45x37.jpg"),
        "expected": expected,
        "screens": dir.join("screens"),
        "text": "The cat sat on the mat.",
    });
    std::fs::write(dir.join("case.json"), case.to_string()).unwrap();
    node_test("serve_image.test.mjs", &[("ATTNVIZ_SERVE_IMAGE", &dir)]);
    let log = server.log();
    assert!(
        log.iter().any(|l| l.starts_with("POST /api/image 200 ")),
        "{log:?}"
    );
}
