//! Model sources: local folders, the Hugging Face cache (offline, cache-first), an unreachable
//! hub, and downloads from a stand-in hub served on localhost.

use crate::support::engine as engine_support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use attnviz::model::source::{self, DownloadProblem, Hub, HubProblem, SourceError};
use attnviz::model::{EncodeOptions, Model};
use engine_support::*;

const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";
const FILES: [&str; 4] = [
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
];

fn hub(cache: &Path, endpoint: &str, offline: bool) -> Hub {
    Hub {
        cache_dir: cache.to_path_buf(),
        endpoint: Some(endpoint.to_string()),
        offline,
        token: None,
        request_timeout: Duration::from_secs(10),
        stall_timeout: Duration::from_secs(30),
        progress: attnviz::progress::silent(),
    }
}

/// A local address nothing listens on (a port just bound and released): connections are
/// refused at once, so any network access by the code under test fails.
fn refused() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    format!("http://{}", listener.local_addr().unwrap())
}

/// Fill `cache` the way huggingface_hub does: blobs, snapshot symlinks, refs/main.
fn populate_cache(cache: &Path, repo: &str, src: &Path) -> PathBuf {
    let root = cache.join(format!("models--{}", repo.replace('/', "--")));
    let snapshot = root.join("snapshots").join(COMMIT);
    std::fs::create_dir_all(root.join("blobs")).unwrap();
    std::fs::create_dir_all(&snapshot).unwrap();
    std::fs::create_dir_all(root.join("refs")).unwrap();
    for (i, file) in FILES.iter().enumerate() {
        let blob = root.join("blobs").join(format!("blob{i}"));
        std::fs::copy(src.join(file), &blob).unwrap();
        std::os::unix::fs::symlink(format!("../../blobs/blob{i}"), snapshot.join(file)).unwrap();
    }
    std::fs::write(root.join("refs").join("main"), COMMIT).unwrap();
    snapshot
}

#[test]
fn offline_and_not_cached_fails_with_remedy() {
    let cache = tempfile::tempdir().unwrap();
    let start = Instant::now();
    let err = source::resolve(
        "bert-base-uncased",
        "main",
        &hub(cache.path(), &refused(), true),
    )
    .unwrap_err();
    let msg = err.to_string();
    eprintln!("offline, empty cache: {:?}: {msg}", start.elapsed());
    assert!(matches!(err, SourceError::NotCachedOffline { .. }));
    assert_one_line(&msg);
    assert!(msg.contains("'bert-base-uncased'"), "{msg}");
    assert!(msg.contains(&cache.path().display().to_string()), "{msg}");
    // The library names no flag (the CLI adds `--model DIR`: tests/suite/cli.rs).
    assert!(
        msg.contains("use a local copy") && msg.contains("HF_HUB_OFFLINE") && !msg.contains("--"),
        "{msg}"
    );
}

#[test]
fn unreachable_hub_and_not_cached_fails_fast() {
    let cache = tempfile::tempdir().unwrap();
    let start = Instant::now();
    let err = source::resolve(
        "google-bert/bert-base-uncased",
        "main",
        &hub(cache.path(), &refused(), false),
    )
    .unwrap_err();
    let elapsed = start.elapsed();
    let msg = err.to_string();
    eprintln!("unreachable hub: {elapsed:?}: {msg}");
    assert!(
        matches!(
            err,
            SourceError::Unreachable {
                reason: HubProblem::Request { .. },
                ..
            }
        ),
        "{msg}"
    );
    assert_one_line(&msg);
    assert!(msg.contains("'google-bert/bert-base-uncased'"), "{msg}");
    assert!(msg.contains(&cache.path().display().to_string()), "{msg}");
    assert!(
        msg.contains("use a local copy") && !msg.contains("--"),
        "{msg}"
    );
    // A hang guard, not a timing test.
    assert!(elapsed < Duration::from_secs(15), "took {elapsed:?}");
}

#[test]
fn silent_hub_times_out() {
    // A server that accepts connections and never answers: the listing request must give up.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    let cache = tempfile::tempdir().unwrap();
    let mut h = hub(cache.path(), &format!("http://{addr}"), false);
    h.request_timeout = Duration::from_secs(2);
    let start = Instant::now();
    let err = source::resolve("org/model", "main", &h).unwrap_err();
    let elapsed = start.elapsed();
    eprintln!("silent hub: {elapsed:?}: {err}");
    assert!(
        matches!(
            &err,
            SourceError::Unreachable {
                reason: HubProblem::Request { cause },
                ..
            } if cause == "timed out"
        ),
        "{err}"
    );
    assert!(err.to_string().contains("timed out"), "{err}");
    assert!(elapsed < Duration::from_secs(15), "took {elapsed:?}");
}

#[test]
fn cached_snapshot_loads_without_network() {
    let cache = tempfile::tempdir().unwrap();
    let snapshot = populate_cache(
        cache.path(),
        "sentence-transformers/all-MiniLM-L6-v2",
        &minilm_dir(),
    );
    for offline in [true, false] {
        // Online with a hub that refuses every connection: only the cache can answer.
        let h = hub(cache.path(), &refused(), offline);
        let files = source::resolve("sentence-transformers/all-MiniLM-L6-v2", "main", &h).unwrap();
        assert_eq!(files.config, snapshot.join("config.json"));
        assert_eq!(files.weights, vec![snapshot.join("model.safetensors")]);
        assert_eq!(files.revision.as_deref(), Some("main"));
    }
    let h = hub(cache.path(), &refused(), true);
    let model = Model::load_with("sentence-transformers/all-MiniLM-L6-v2", "main", &h).unwrap();
    assert_eq!(model.info().id, "sentence-transformers/all-MiniLM-L6-v2");
    assert_eq!(model.info().revision.as_deref(), Some("main"));
    let out = model
        .encode(
            "Cached models need no network.",
            None,
            &EncodeOptions::default(),
        )
        .unwrap();
    assert_eq!(out.attention.layers(), 6);

    // A commit hash as revision finds its snapshot directly; an unknown revision is not cached.
    assert!(source::resolve("sentence-transformers/all-MiniLM-L6-v2", COMMIT, &h).is_ok());
    let err = source::resolve("sentence-transformers/all-MiniLM-L6-v2", "v2", &h).unwrap_err();
    assert!(matches!(err, SourceError::NotCachedOffline { .. }), "{err}");
}

#[test]
fn local_folder_and_bad_names() {
    let h = hub(Path::new("/nonexistent-cache"), &refused(), true);
    let files = source::resolve(&minilm_dir().display().to_string(), "main", &h).unwrap();
    assert_eq!(files.revision, None);
    assert_eq!(files.tokenizer_dir, minilm_dir());

    for bad in ["./no/such/folder", "/no/such", "a/b/c", "bad name", "org/"] {
        let err = source::resolve(bad, "main", &h).unwrap_err();
        assert!(matches!(err, SourceError::NotAModel(_)), "{bad}: {err}");
        assert!(
            err.to_string().contains("a model folder holds config.json"),
            "{err}"
        );
    }

    let tmp = tempfile::tempdir().unwrap();
    std::fs::copy(
        minilm_dir().join("config.json"),
        tmp.path().join("config.json"),
    )
    .unwrap();
    let err = source::resolve(&tmp.path().display().to_string(), "main", &h).unwrap_err();
    assert!(
        err.to_string()
            .contains("has no model.safetensors or pytorch_model.bin"),
        "{err}"
    );
    std::fs::write(tmp.path().join("model.safetensors"), b"").unwrap();
    let err = source::resolve(&tmp.path().display().to_string(), "main", &h).unwrap_err();
    assert!(
        err.to_string()
            .contains("has no tokenizer.json or vocab.txt"),
        "{err}"
    );
}

/// A stand-in for the hub on localhost: the listing API and `resolve/` downloads (honouring the
/// `Range` header hf-hub sends), logging every path requested. `stall` paths hang forever.
struct FakeHub {
    endpoint: String,
    log: Arc<Mutex<Vec<String>>>,
}

fn fake_hub(
    repo: &'static str,
    files: &'static [&'static str],
    src: PathBuf,
    stall: Option<&'static str>,
) -> FakeHub {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let log = Arc::new(Mutex::new(Vec::new()));
    let log2 = log.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (src, log) = (src.clone(), log2.clone());
            std::thread::spawn(move || serve(stream, repo, files, &src, stall, &log));
        }
    });
    FakeHub { endpoint, log }
}

fn serve(
    mut stream: TcpStream,
    repo: &str,
    files: &[&str],
    src: &Path,
    stall: Option<&str>,
    log: &Mutex<Vec<String>>,
) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
    let mut range: Option<(u64, Option<u64>)> = None;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).unwrap_or(0) == 0 || header.trim().is_empty() {
            break;
        }
        let lower = header.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("range: bytes=") {
            let (a, b) = v.trim().split_once('-').unwrap_or((v.trim(), ""));
            range = Some((a.parse().unwrap_or(0), b.parse().ok()));
        }
    }
    log.lock().unwrap().push(path.clone());
    if stall.is_some_and(|s| path.ends_with(s)) {
        std::thread::sleep(Duration::from_secs(600));
        return;
    }
    let listing = format!("/api/models/{repo}/revision/main");
    let resolve = format!("/{repo}/resolve/main/");
    let (status, headers, body): (&str, String, Vec<u8>) = if path == listing {
        let siblings: Vec<_> = files
            .iter()
            .chain(&["README.md"])
            .map(|f| serde_json::json!({ "rfilename": f }))
            .collect();
        let body = serde_json::json!({ "sha": COMMIT, "siblings": siblings }).to_string();
        (
            "200 OK",
            "Content-Type: application/json\r\n".into(),
            body.into_bytes(),
        )
    } else if let Some(file) = path.strip_prefix(&resolve) {
        match std::fs::read(src.join(file)) {
            Ok(data) => {
                let size = data.len() as u64;
                let (start, end) = range.unwrap_or((0, None));
                let end = end.unwrap_or(size - 1).min(size - 1);
                let body = data[start as usize..=end as usize].to_vec();
                let headers = format!(
                    "ETag: \"etag-{file}\"\r\nX-Repo-Commit: {COMMIT}\r\nContent-Range: bytes {start}-{end}/{size}\r\n"
                );
                ("206 Partial Content", headers, body)
            }
            Err(_) => ("404 Not Found", String::new(), b"not found".to_vec()),
        }
    } else {
        ("404 Not Found", String::new(), b"not found".to_vec())
    };
    let head = format!(
        "HTTP/1.1 {status}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(&body);
    let _ = stream.flush();
    let _ = reader.read(&mut [0u8; 1]);
}

#[test]
fn downloads_into_the_cache_then_reuses_it() {
    let fake = fake_hub("org/mini", &FILES, minilm_dir(), None);
    let cache = tempfile::tempdir().unwrap();
    let h = hub(cache.path(), &fake.endpoint, false);
    let files = source::resolve("org/mini", "main", &h).unwrap();
    let snapshot = cache
        .path()
        .join("models--org--mini/snapshots")
        .join(COMMIT);
    assert_eq!(files.config, snapshot.join("config.json"));
    // tokenizer.json is all the tokenizer needs: tokenizer_config.json is not fetched.
    for file in ["config.json", "model.safetensors", "tokenizer.json"] {
        let got = std::fs::read(snapshot.join(file)).unwrap();
        let want = std::fs::read(minilm_dir().join(file)).unwrap();
        assert!(got == want, "{file} differs after download");
    }
    assert!(!snapshot.join("tokenizer_config.json").exists());
    assert_eq!(
        std::fs::read_to_string(cache.path().join("models--org--mini/refs/main")).unwrap(),
        COMMIT
    );
    let requests = fake.log.lock().unwrap().len();
    assert!(requests > 3, "{requests} requests");

    // Second time: straight from the cache, no request at all.
    let again = source::resolve("org/mini", "main", &h).unwrap();
    assert_eq!(again, files);
    assert_eq!(fake.log.lock().unwrap().len(), requests);
    let model = Model::load_with("org/mini", "main", &hub(cache.path(), &refused(), true)).unwrap();
    assert_eq!(model.info().layers, 6);
}

#[test]
fn vocab_only_repo_fetches_tokenizer_options() {
    const VOCAB_FILES: [&str; 4] = [
        "config.json",
        "model.safetensors",
        "vocab.txt",
        "tokenizer_config.json",
    ];
    let fake = fake_hub("org/vocab", &VOCAB_FILES, minilm_dir(), None);
    let cache = tempfile::tempdir().unwrap();
    let h = hub(cache.path(), &fake.endpoint, false);
    let model = Model::load_with("org/vocab", "main", &h).unwrap();
    assert!(model.tokenizer().source().ends_with("vocab.txt"));
    let snapshot = cache
        .path()
        .join("models--org--vocab/snapshots")
        .join(COMMIT);
    assert!(snapshot.join("tokenizer_config.json").is_file());
}

#[test]
fn stalled_download_is_abandoned() {
    let fake = fake_hub("org/stall", &FILES, minilm_dir(), Some("model.safetensors"));
    let cache = tempfile::tempdir().unwrap();
    let mut h = hub(cache.path(), &fake.endpoint, false);
    h.stall_timeout = Duration::from_secs(2);
    let start = Instant::now();
    let err = source::resolve("org/stall", "main", &h).unwrap_err();
    let elapsed = start.elapsed();
    eprintln!("stalled download: {elapsed:?}: {err}");
    assert!(
        matches!(
            err,
            SourceError::Download {
                reason: DownloadProblem::Stalled(_),
                ..
            }
        ),
        "{err}"
    );
    let msg = err.to_string();
    assert_one_line(&msg);
    assert!(
        msg.contains("model.safetensors") && msg.contains("no data arrived"),
        "{msg}"
    );
    assert!(elapsed < Duration::from_secs(15), "took {elapsed:?}");
}

#[test]
fn missing_repo_is_reported() {
    let fake = fake_hub("org/exists", &FILES, minilm_dir(), None);
    let cache = tempfile::tempdir().unwrap();
    let err = source::resolve(
        "org/other",
        "main",
        &hub(cache.path(), &fake.endpoint, false),
    )
    .unwrap_err();
    assert!(
        matches!(err, SourceError::NotFound { status: 404, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("HF_TOKEN"), "{err}");
}

/// An encoder–decoder from the stand-in hub: the tiny T5 (config, weights, tokenizer and
/// generation_config.json, whose EOS generation stops at) downloads, loads, and runs a
/// teacher-forced target and a generation; offline, the cached copy loads without a request.
#[test]
fn encoder_decoder_downloads_and_runs() {
    use attnviz::model::encdec::DecoderInput;
    use attnviz::model::EncodeOptions;
    const T5_FILES: [&str; 4] = [
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "generation_config.json",
    ];
    let src = crate::fidelity::reference::fixture("tiny-t5");
    let fake = fake_hub("org/t5-tiny", &T5_FILES, src.clone(), None);
    let cache = tempfile::tempdir().unwrap();
    let model = Model::load_with(
        "org/t5-tiny",
        "main",
        &hub(cache.path(), &fake.endpoint, false),
    )
    .unwrap();
    assert!(model.is_seq2seq());
    assert_eq!(model.family(), "T5");
    let snapshot = cache
        .path()
        .join("models--org--t5-tiny/snapshots")
        .join(COMMIT);
    assert!(snapshot.join("generation_config.json").is_file());
    let opts = EncodeOptions::default();
    let run = model
        .encode_seq2seq(
            "The house is small.",
            DecoderInput::Target("Das Haus ist klein."),
            &opts,
            &mut |_| {},
        )
        .unwrap();
    let kinds: Vec<&str> = run.attentions.iter().map(|a| a.kind.as_str()).collect();
    assert_eq!(kinds, ["encoder", "decoder", "cross"]);
    let requests = fake.log.lock().unwrap().len();
    // Offline: from the cache, no request.
    let offline =
        Model::load_with("org/t5-tiny", "main", &hub(cache.path(), &refused(), true)).unwrap();
    let generated = offline
        .encode_seq2seq(
            "The house is small.",
            DecoderInput::Generate(4),
            &opts,
            &mut |_| {},
        )
        .unwrap();
    assert_eq!(generated.generation.unwrap().ids.len(), 5);
    assert_eq!(fake.log.lock().unwrap().len(), requests);
}

/// A decoder's family reads the settings beside its tokenizer.json: from the stand-in hub, its
/// tokenizer_config.json comes down with it, and with it the chat template, so `--chat` works on
/// a hub model as on a local folder (an encoder fetches tokenizer.json alone, as above).
#[test]
fn a_hub_decoder_brings_its_chat_template() {
    const LLAMA_FILES: [&str; 5] = [
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
        "generation_config.json",
    ];
    let src = tempfile::tempdir().unwrap();
    let fixture = crate::fidelity::reference::fixture("tiny-llama");
    for f in LLAMA_FILES {
        std::fs::copy(fixture.join(f), src.path().join(f)).unwrap();
    }
    let settings = src.path().join("tokenizer_config.json");
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    config["chat_template"] = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}\
        {% if add_generation_prompt %}<assistant>{% endif %}"
        .into();
    std::fs::write(&settings, config.to_string()).unwrap();
    let fake = fake_hub(
        "org/tiny-llama",
        &LLAMA_FILES,
        src.path().to_path_buf(),
        None,
    );
    let cache = tempfile::tempdir().unwrap();
    let model = Model::load_with(
        "org/tiny-llama",
        "main",
        &hub(cache.path(), &fake.endpoint, false),
    )
    .unwrap();
    assert_eq!(model.family(), "Llama");
    let snapshot = cache
        .path()
        .join("models--org--tiny-llama/snapshots")
        .join(COMMIT);
    assert!(snapshot.join("tokenizer_config.json").is_file());
    assert_eq!(model.chat_prompt("hi").unwrap(), "<user>hi<assistant>");
}
