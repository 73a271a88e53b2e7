//! Models found by name in other programs' stores (`-m ollama:tiny`, `lmstudio:…`,
//! `llamacpp:…`) and `attnviz models`, on stores this file builds in a temporary folder from the
//! tiny GGUF fixtures (no Ollama needed). Every command gets HOME and every store's variable
//! pointed into that folder, so no test reads this machine's own stores.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::support::cli::{assert_clean_failure, attnviz, fixture, stderr};

/// The model the stores hold: a tiny Llama, Q8_0.
fn tiny_gguf() -> PathBuf {
    fixture("gguf/tiny-llama.Q8_0.gguf")
}

fn sha(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A temporary HOME with an Ollama store, an LM Studio folder and a llama.cpp cache in it.
struct Stores {
    dir: tempfile::TempDir,
}

impl Stores {
    fn new() -> Stores {
        let s = Stores {
            dir: tempfile::tempdir().unwrap(),
        };
        for d in [
            "home",
            "ollama/blobs",
            "ollama/manifests",
            "lmstudio",
            "llamacpp",
            "hf",
        ] {
            fs::create_dir_all(s.path(d)).unwrap();
        }
        s
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// attnviz with HOME and every store's variable inside this folder.
    fn cmd(&self) -> Command {
        let mut cmd = attnviz();
        cmd.env("HOME", self.path("home"))
            .env("OLLAMA_MODELS", self.path("ollama"))
            .env("LMSTUDIO_MODELS", self.path("lmstudio"))
            .env("LLAMA_CACHE", self.path("llamacpp"))
            .env("HF_HUB_CACHE", self.path("hf"))
            .env_remove("HF_HOME")
            .env_remove("XDG_CACHE_HOME");
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().unwrap()
    }

    /// Store `bytes` as a blob; its digest.
    fn blob(&self, bytes: &[u8]) -> String {
        let hex = sha(bytes);
        fs::write(self.path(&format!("ollama/blobs/sha256-{hex}")), bytes).unwrap();
        hex
    }

    /// An Ollama manifest `library/NAME/TAG` listing `layers` (media type suffix, bytes).
    fn ollama(&self, name: &str, tag: &str, layers: &[(&str, &[u8])]) {
        let entries: Vec<Value> = layers
            .iter()
            .map(|(kind, bytes)| {
                serde_json::json!({
                    "mediaType": format!("application/vnd.ollama.image.{kind}"),
                    "digest": format!("sha256:{}", self.blob(bytes)),
                    "size": bytes.len(),
                })
            })
            .collect();
        self.manifest(
            name,
            tag,
            &serde_json::json!({"schemaVersion": 2, "layers": entries}).to_string(),
        );
    }

    fn manifest(&self, name: &str, tag: &str, text: &str) {
        let dir = self.path(&format!(
            "ollama/manifests/registry.ollama.ai/library/{name}"
        ));
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join(tag), text).unwrap();
    }
}

/// An attention document without its model description (which names the model as it was
/// given), to compare two runs of the same file.
fn attention_of(path: &Path) -> Value {
    let mut v: Value = serde_json::from_str(&fs::read_to_string(path).unwrap()).unwrap();
    v.as_object_mut().unwrap().remove("model");
    v
}

/// Every file under `dir` and its bytes (links as links): what a lookup must leave as it was.
fn contents(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap().flatten() {
            let t = e.file_type().unwrap();
            if t.is_dir() {
                stack.push(e.path());
            } else if t.is_symlink() {
                let target = fs::read_link(e.path()).unwrap();
                out.push((e.path(), target.to_string_lossy().as_bytes().to_vec()));
            } else {
                let len = fs::metadata(e.path()).unwrap().len();
                // A sparse 64 MiB manifest is compared by size.
                let bytes = if len > 1 << 20 {
                    len.to_le_bytes().to_vec()
                } else {
                    fs::read(e.path()).unwrap()
                };
                out.push((e.path(), bytes));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn a_model_named_in_each_store_runs_as_its_gguf_file_does() {
    let s = Stores::new();
    let model = fs::read(tiny_gguf()).unwrap();
    s.ollama(
        "tiny",
        "latest",
        &[
            ("model", &model),
            ("template", b"{{ .System }} {{ .Prompt }}"),
            ("params", br#"{"stop": ["</s>"], "temperature": 0.2}"#),
        ],
    );
    fs::create_dir_all(s.path("lmstudio/someone/Tiny-GGUF")).unwrap();
    fs::copy(
        tiny_gguf(),
        s.path("lmstudio/someone/Tiny-GGUF/tiny-Q8_0.gguf"),
    )
    .unwrap();
    fs::copy(
        fixture("gguf/tiny-llama.gguf"),
        s.path("lmstudio/someone/Tiny-GGUF/tiny-F32.gguf"),
    )
    .unwrap();
    fs::copy(
        tiny_gguf(),
        s.path("llamacpp/someone_Tiny-GGUF_tiny-Q8_0.gguf"),
    )
    .unwrap();
    let before = contents(s.dir.path());

    let direct = s.path("direct.json");
    let text = "The cat sat on the mat.";
    let ok = |args: &[&str]| {
        let out = s.run(args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        stderr(&out)
    };
    ok(&[
        "-m",
        tiny_gguf().to_str().unwrap(),
        text,
        "--json",
        direct.to_str().unwrap(),
        "-q",
    ]);
    let want = attention_of(&direct);
    for (spec, named) in [
        ("ollama:tiny", "ollama:tiny:latest"),
        ("ollama:library/tiny:latest", "ollama:tiny:latest"),
        (
            "lmstudio:someone/Tiny-GGUF/tiny-Q8_0.gguf",
            "lmstudio:someone/Tiny-GGUF/tiny-Q8_0.gguf",
        ),
        ("llamacpp:tiny-q8", "llamacpp:someone_Tiny-GGUF_tiny-Q8_0"),
    ] {
        let json = s.path("store.json");
        ok(&["-m", spec, text, "--json", json.to_str().unwrap(), "-q"]);
        assert_eq!(attention_of(&json), want, "{spec}");
        let v: Value = serde_json::from_str(&fs::read_to_string(&json).unwrap()).unwrap();
        assert_eq!(v["model"]["id"], named, "{spec}");
    }
    // LM Studio's folder has two quantisations: the first by name is taken, and said.
    let json = s.path("lm.json");
    let said = ok(&[
        "-m",
        "lmstudio:someone/Tiny-GGUF",
        text,
        "--json",
        json.to_str().unwrap(),
        "-q",
    ]);
    assert!(
        said.contains("holds 2 GGUF files; using tiny-F32.gguf")
            && said.contains("lmstudio:someone/Tiny-GGUF/tiny-Q8_0.gguf"),
        "{said}"
    );
    assert_eq!(
        contents(s.dir.path()).len(),
        before.len() + 3,
        "only the outputs were added"
    );
    let now = contents(s.dir.path());
    for entry in &before {
        assert!(now.contains(entry), "{} changed", entry.0.display());
    }
}

#[test]
fn hostile_stores_are_refused_in_one_line_and_left_as_they_were() {
    let s = Stores::new();
    let model = fs::read(tiny_gguf()).unwrap();
    // Truncated: an interrupted download.
    s.ollama("short", "latest", &[("model", &model)]);
    let hex = sha(&model);
    fs::write(
        s.path(&format!("ollama/blobs/sha256-{hex}")),
        &model[..model.len() / 2],
    )
    .unwrap();
    // Missing.
    let mut other = model.clone();
    other.push(0);
    s.ollama("gone", "latest", &[("model", &other)]);
    fs::remove_file(s.path(&format!("ollama/blobs/sha256-{}", sha(&other)))).unwrap();
    // Not GGUF.
    s.ollama("zip", "latest", &[("model", b"PK\x03\x04 not a model")]);
    // A link out of the store.
    let outside = s.path("outside.gguf");
    fs::copy(tiny_gguf(), &outside).unwrap();
    let mut third = model.clone();
    third.extend_from_slice(b"xx");
    s.ollama("link", "latest", &[("model", &third)]);
    let linked = s.path(&format!("ollama/blobs/sha256-{}", sha(&third)));
    fs::remove_file(&linked).unwrap();
    std::os::unix::fs::symlink(&outside, &linked).unwrap();
    // Huge, malformed.
    s.manifest("bad", "latest", "{\"layers\": [{\"mediaType\": ");
    s.manifest("huge", "latest", "");
    fs::File::create(s.path("ollama/manifests/registry.ollama.ai/library/huge/latest"))
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    let before = contents(s.dir.path());
    for (spec, says) in [
        ("ollama:short", "is truncated"),
        ("ollama:gone", "is missing"),
        ("ollama:zip", "is not a GGUF file"),
        ("ollama:link", "is a link out of the store"),
        ("ollama:bad", "is not an Ollama manifest"),
        ("ollama:huge", "larger than the 1048576 bytes"),
        ("ollama:../../x", "starts with a dot"),
        (
            "ollama:nothing",
            "Ollama has no model 'ollama:nothing:latest'",
        ),
        ("lmstudio:../../etc", "starts with a dot"),
        ("llamacpp:tiny", "llama.cpp has no model 'llamacpp:tiny'"),
    ] {
        let out = s.run(&["-m", spec, "the cat"]);
        assert_clean_failure(&out, says);
    }
    // The same in corpus mode.
    let input = s.path("in.txt");
    fs::write(&input, "the cat\n").unwrap();
    let out = s.run(&[
        "-m",
        "ollama:short",
        "--input",
        input.to_str().unwrap(),
        "--out-dir",
        s.path("c").to_str().unwrap(),
    ]);
    assert_clean_failure(&out, "is truncated");
    fs::remove_file(&input).unwrap();
    let _ = fs::remove_dir_all(s.path("c"));
    assert_eq!(
        contents(s.dir.path()),
        before,
        "nothing written in the store"
    );
}

#[test]
fn a_blob_whose_bytes_changed_is_found_by_models_verify_and_by_corpus_mode() {
    let s = Stores::new();
    let model = fs::read(tiny_gguf()).unwrap();
    s.ollama("tiny", "latest", &[("model", &model)]);
    let blob = s.path(&format!("ollama/blobs/sha256-{}", sha(&model)));
    // Without --verify, a listing checks sizes and headers: it runs.
    let out = s.run(&["models", "--verify"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("ollama:tiny:latest"));
    // A byte changed in the last tensor's data: same size, same header.
    let mut changed = model.clone();
    let last = changed.len() - 1;
    changed[last] ^= 0x01;
    fs::write(&blob, &changed).unwrap();
    let out = s.run(&["models", "--json", "--verify"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let tiny = &v["models"][0];
    assert_eq!(tiny["name"], "ollama:tiny:latest");
    assert_eq!(tiny["runnable"], false);
    let reason = tiny["reason"].as_str().unwrap();
    assert!(
        reason.contains("does not match its digest") && !reason.contains('\n'),
        "{reason}"
    );
    let out = s.run(&["models", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["models"][0]["runnable"], true,
        "without --verify the digest is not read"
    );
    // Corpus mode hashes the file anyway, and refuses it.
    let input = s.path("in.txt");
    fs::write(&input, "the cat\n").unwrap();
    let out = s.run(&[
        "-m",
        "ollama:tiny",
        "--input",
        input.to_str().unwrap(),
        "--out-dir",
        s.path("c").to_str().unwrap(),
        "-q",
    ]);
    assert_clean_failure(&out, "does not match its digest");
}

#[test]
fn models_lists_every_store_with_its_verdict_and_validates_against_its_schema() {
    let s = Stores::new();
    // An empty machine says where it looked.
    let out = s.run(&["models"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    for line in [
        format!("Ollama: no model in {}", s.path("ollama").display()),
        format!("LM Studio: no model in {}", s.path("lmstudio").display()),
        format!("llama.cpp: no model in {}", s.path("llamacpp").display()),
        format!("Hugging Face cache: no model in {}", s.path("hf").display()),
    ] {
        assert!(table.contains(&line), "{line}\n{table}");
    }
    let gone = s
        .cmd()
        .env("OLLAMA_MODELS", s.path("nowhere"))
        .arg("models")
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&gone.stdout).into_owned();
    assert!(
        table.contains(&format!(
            "Ollama: no folder: looked in {}",
            s.path("nowhere").display()
        )),
        "{table}"
    );

    let model = fs::read(tiny_gguf()).unwrap();
    s.ollama(
        "tiny",
        "q8",
        &[
            ("model", &model),
            ("template", b"{{ .Prompt }}"),
            ("params", br#"{"num_ctx": 64}"#),
        ],
    );
    s.ollama("zip", "latest", &[("model", b"PK\x03\x04 not a model")]);
    // A GGUF of an architecture attnviz does not run: the loader's own reason.
    fs::copy(
        fixture("gguf/unsupported.gguf"),
        s.path("llamacpp/x_y_odd.gguf"),
    )
    .unwrap();
    fs::create_dir_all(s.path("lmstudio/p/m")).unwrap();
    fs::copy(
        fixture("gguf/tiny-qwen2.gguf"),
        s.path("lmstudio/p/m/qwen.gguf"),
    )
    .unwrap();
    // A Hugging Face cache entry: the tiny BERT fixture as a snapshot.
    let snap = s.path("hf/models--org--tiny-bert/snapshots/abc123");
    crate::support::cli::copy_model(&fixture("tiny-bert"), &snap);
    fs::create_dir_all(s.path("hf/models--org--tiny-bert/refs")).unwrap();
    fs::write(s.path("hf/models--org--tiny-bert/refs/main"), "abc123").unwrap();
    // A quantised checkpoint: its quantization is its method, not the bytes its blocks are.
    let snap = s.path("hf/models--org--tiny-gpt-oss-mxfp4/snapshots/def456");
    crate::support::cli::copy_model(&fixture("tiny-gpt_oss-mxfp4"), &snap);

    let out = s.run(&["models"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    println!("{table}");
    let row = |name: &str| {
        table
            .lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("no row {name}:\n{table}"))
            .split_whitespace()
            .collect::<Vec<_>>()
    };
    assert_eq!(
        row("ollama:tiny:q8")[1..],
        ["llama", "132", "kB", "Q8_0", "yes"]
    );
    assert_eq!(row("ollama:zip:latest").last(), Some(&"no"));
    assert_eq!(row("lmstudio:p/m/qwen.gguf")[1], "qwen2");
    assert_eq!(row("org/tiny-bert")[1], "bert");
    assert_eq!(row("org/tiny-bert").last(), Some(&"yes"));
    assert!(table.contains("is not a GGUF file"), "{table}");
    assert!(
        table.contains("Ollama layers: template (13 bytes), parameters {\"num_ctx\":64}"),
        "{table}"
    );

    let out = s.run(&["models", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let file = s.path("models.json");
    fs::write(&file, &out.stdout).unwrap();
    crate::json_schema::validate("models.schema.json", &[&file]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let by_name = |n: &str| {
        v["models"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == n)
            .unwrap_or_else(|| panic!("no {n}"))
            .clone()
    };
    let tiny = by_name("ollama:tiny:q8");
    assert_eq!(tiny["runnable"], true);
    assert_eq!(tiny["size_bytes"], model.len());
    assert_eq!(tiny["template"], "{{ .Prompt }}");
    assert_eq!(tiny["parameters"]["num_ctx"], 64);
    let odd = by_name("llamacpp:x_y_odd");
    assert_eq!(odd["runnable"], false);
    // The reason a run gives.
    let run = s.run(&["-m", "llamacpp:x_y_odd", "the cat"]);
    let said = stderr(&run);
    let said = said.trim_end().strip_prefix("error: ").unwrap();
    assert_eq!(odd["reason"].as_str().unwrap(), said);
    let bert = by_name("org/tiny-bert");
    assert_eq!(bert["revision"], "main");
    assert_eq!(bert["family"], "bert");
    assert_eq!(bert["quantization"], "F32");
    let mxfp4 = by_name("org/tiny-gpt-oss-mxfp4");
    assert_eq!(mxfp4["quantization"], "MXFP4");
    assert_eq!(mxfp4["runnable"], true, "{mxfp4}");
    // `-m` takes every name the listing gives.
    for m in v["models"].as_array().unwrap() {
        if m["runnable"] == true && m["store"] != "huggingface" {
            let out = s.run(&["-m", m["name"].as_str().unwrap(), "the cat", "-q"]);
            assert!(out.status.success(), "{}: {}", m["name"], stderr(&out));
        }
    }
}
