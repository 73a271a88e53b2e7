//! Stores built in a temporary folder: the names, the defaults per system, and hostile stores
//! (each refused in one line, nothing written).

use std::fs;
use std::path::{Path, PathBuf};

use sha2::Digest;

use super::*;

fn vars<'a>(list: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
    move |k| {
        list.iter()
            .find(|(name, _)| *name == k)
            .map(|(_, v)| v.to_string())
    }
}

#[test]
fn default_folders_follow_each_program_and_system() {
    let linux = Stores::from_vars(vars(&[("HOME", "/home/u")]), Os::Linux);
    assert_eq!(
        linux.ollama,
        [
            PathBuf::from("/home/u/.ollama/models"),
            PathBuf::from("/usr/share/ollama/.ollama/models")
        ]
    );
    assert_eq!(
        linux.lmstudio,
        [
            PathBuf::from("/home/u/.lmstudio/models"),
            PathBuf::from("/home/u/.cache/lm-studio/models")
        ]
    );
    assert_eq!(linux.llamacpp, [PathBuf::from("/home/u/.cache/llama.cpp")]);
    let xdg = Stores::from_vars(
        vars(&[("HOME", "/home/u"), ("XDG_CACHE_HOME", "/xdg")]),
        Os::Linux,
    );
    assert_eq!(xdg.llamacpp, [PathBuf::from("/xdg/llama.cpp")]);
    let mac = Stores::from_vars(vars(&[("HOME", "/Users/u")]), Os::MacOs);
    assert_eq!(mac.ollama, [PathBuf::from("/Users/u/.ollama/models")]);
    assert_eq!(
        mac.llamacpp,
        [PathBuf::from("/Users/u/Library/Caches/llama.cpp")]
    );
    let win = Stores::from_vars(
        vars(&[("USERPROFILE", "C:/Users/u"), ("LOCALAPPDATA", "C:/L")]),
        Os::Windows,
    );
    assert_eq!(
        win.ollama,
        [Path::new("C:/Users/u").join(".ollama").join("models")]
    );
    assert_eq!(win.llamacpp, [Path::new("C:/L").join("llama.cpp")]);
    // The variables win, alone; an empty one counts as unset.
    let set = Stores::from_vars(
        vars(&[
            ("HOME", "/home/u"),
            ("OLLAMA_MODELS", "/o"),
            ("LMSTUDIO_MODELS", "/l"),
            ("LLAMA_CACHE", ""),
        ]),
        Os::Linux,
    );
    assert_eq!(set.ollama, [PathBuf::from("/o")]);
    assert_eq!(set.lmstudio, [PathBuf::from("/l")]);
    assert_eq!(set.llamacpp, [PathBuf::from("/home/u/.cache/llama.cpp")]);
    assert_eq!(
        Stores::from_vars(vars(&[]), Os::MacOs).ollama,
        Vec::<PathBuf>::new()
    );
}

#[test]
fn lm_studio_settings_may_move_its_folder() {
    let home = tempfile::tempdir().unwrap();
    fs::create_dir(home.path().join(".lmstudio")).unwrap();
    fs::write(
        home.path().join(".lmstudio/settings.json"),
        r#"{"downloadsFolder": "/big/disk/models", "other": 1}"#,
    )
    .unwrap();
    let h = home.path().to_str().unwrap();
    let stores = Stores::from_vars(vars(&[("HOME", h)]), Os::Linux);
    assert_eq!(stores.lmstudio[0], PathBuf::from("/big/disk/models"));
    assert_eq!(stores.lmstudio[1], home.path().join(".lmstudio/models"));
}

#[test]
fn prefixes_name_the_store() {
    assert_eq!(split("ollama:tiny"), Some((StoreKind::Ollama, "tiny")));
    assert_eq!(split("lmstudio:a/b"), Some((StoreKind::LmStudio, "a/b")));
    assert_eq!(split("llamacpp:x"), Some((StoreKind::LlamaCpp, "x")));
    assert_eq!(split("ollama"), None);
    assert_eq!(split("bert-base-uncased"), None);
    assert_eq!(split("./ollama:x"), None);
    let none = Stores::default();
    assert_eq!(resolve("gpt2", &none), Ok(None));
}

/// A GGUF-looking blob: the magic and `len - 4` more bytes.
fn fake_gguf(len: usize) -> Vec<u8> {
    let mut b = b"GGUF".to_vec();
    b.resize(len, 7);
    b
}

fn sha(bytes: &[u8]) -> String {
    super::hex(&sha2::Sha256::digest(bytes))
}

/// An Ollama store with one model `name` (`library/NAME/TAG`) whose layers are `layers`
/// (media type suffix, bytes); returns the blob paths by suffix.
fn ollama_store(root: &Path, model: &str, tag: &str, layers: &[(&str, Vec<u8>)]) {
    fs::create_dir_all(root.join("blobs")).unwrap();
    let dir = root
        .join("manifests/registry.ollama.ai/library")
        .join(model);
    fs::create_dir_all(&dir).unwrap();
    let mut entries = Vec::new();
    for (kind, bytes) in layers {
        let hex = sha(bytes);
        fs::write(root.join(format!("blobs/sha256-{hex}")), bytes).unwrap();
        entries.push(serde_json::json!({
            "mediaType": format!("application/vnd.ollama.image.{kind}"),
            "digest": format!("sha256:{hex}"),
            "size": bytes.len(),
        }));
    }
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": {"mediaType": "application/vnd.docker.container.image.v1+json",
                   "digest": format!("sha256:{}", "0".repeat(64)), "size": 2},
        "layers": entries,
    });
    fs::write(dir.join(tag), manifest.to_string()).unwrap();
}

fn stores(root: &Path) -> Stores {
    Stores {
        ollama: vec![root.to_path_buf()],
        lmstudio: vec![root.to_path_buf()],
        llamacpp: vec![root.to_path_buf()],
    }
}

/// Every file under `dir` with its bytes, to show a lookup wrote nothing.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let t = e.file_type().unwrap();
            if t.is_dir() {
                stack.push(p);
            } else if t.is_file() {
                out.push((p.clone(), fs::read(&p).unwrap()));
            } else {
                out.push((p.clone(), Vec::new()));
            }
        }
    }
    out.sort();
    out
}

fn err(spec: &str, s: &Stores) -> String {
    let e = resolve(spec, s).unwrap_err().to_string();
    assert!(!e.contains('\n'), "{e}");
    e
}

#[test]
fn an_ollama_manifest_names_the_model_blob_and_its_layers() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let model = fake_gguf(100);
    let params = br#"{"stop": ["<|im_end|>"], "temperature": 0.7}"#.to_vec();
    ollama_store(
        root,
        "tiny",
        "latest",
        &[
            ("model", model.clone()),
            ("template", b"{{ .Prompt }}".to_vec()),
            ("params", params),
            ("system", b"Be brief.".to_vec()),
            ("projector", fake_gguf(40)),
            ("license", b"MIT".to_vec()),
        ],
    );
    let before = snapshot(root);
    let s = stores(root);
    let found = resolve("ollama:tiny", &s).unwrap().unwrap();
    assert_eq!(found.name, "ollama:tiny:latest");
    assert_eq!(found.store, StoreKind::Ollama);
    assert_eq!(found.size, 100);
    assert_eq!(found.sha256.as_deref(), Some(sha(&model).as_str()));
    assert_eq!(
        found.gguf,
        fs::canonicalize(root.join(format!("blobs/sha256-{}", sha(&model)))).unwrap()
    );
    assert_eq!(found.layers.template.as_deref(), Some("{{ .Prompt }}"));
    assert_eq!(found.layers.system.as_deref(), Some("Be brief."));
    assert_eq!(
        found.layers.parameters.as_deref(),
        Some(r#"{"stop":["<|im_end|>"],"temperature":0.7}"#)
    );
    assert!(found.projector.is_some());
    assert_eq!(resolve("ollama:tiny:latest", &s).unwrap().unwrap(), found);
    assert_eq!(resolve("ollama:library/tiny", &s).unwrap().unwrap(), found);
    assert_eq!(
        resolve("ollama:registry.ollama.ai/library/tiny:latest", &s)
            .unwrap()
            .unwrap(),
        found
    );
    verify(&found).unwrap();
    let (listed, folders) = list(StoreKind::Ollama, &s);
    assert_eq!(folders, [root.to_path_buf()]);
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].name, "ollama:tiny:latest");
    assert_eq!(listed[0].model.as_ref().unwrap(), &found);
    let e = err("ollama:tiny:q8", &s);
    assert!(
        e.contains("has no model 'ollama:tiny:q8'") && e.contains("it has ollama:tiny:latest"),
        "{e}"
    );
    assert_eq!(snapshot(root), before, "nothing written in the store");
}

#[test]
fn hostile_ollama_stores_are_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    let s = stores(&root);
    let good = fake_gguf(64);
    ollama_store(&root, "ok", "latest", &[("model", good.clone())]);
    let blob = |bytes: &[u8]| root.join(format!("blobs/sha256-{}", sha(bytes)));

    // A missing blob.
    ollama_store(&root, "missing", "latest", &[("model", fake_gguf(65))]);
    fs::remove_file(blob(&fake_gguf(65))).unwrap();
    let e = err("ollama:missing", &s);
    assert!(e.contains("model blob") && e.contains("is missing"), "{e}");

    // A truncated blob (an interrupted pull).
    let whole = fake_gguf(1000);
    ollama_store(&root, "short", "latest", &[("model", whole.clone())]);
    fs::write(blob(&whole), &whole[..300]).unwrap();
    let e = err("ollama:short", &s);
    assert!(e.contains("is truncated: 300 bytes of the 1000"), "{e}");

    // Not GGUF.
    let text = b"PK\x03\x04 a zip, not gguf".to_vec();
    ollama_store(&root, "zip", "latest", &[("model", text)]);
    let e = err("ollama:zip", &s);
    assert!(e.contains("is not a GGUF file"), "{e}");

    // A blob whose bytes changed but kept its size: found by verify, one line.
    let orig = fake_gguf(200);
    ollama_store(&root, "swapped", "latest", &[("model", orig.clone())]);
    let mut other = orig.clone();
    other[100] ^= 1;
    fs::write(blob(&orig), &other).unwrap();
    let found = resolve("ollama:swapped", &s).unwrap().unwrap();
    let e = verify(&found).unwrap_err().to_string();
    assert!(
        e.contains("does not match its digest") && e.contains(&sha(&other)[..16]),
        "{e}"
    );
    assert!(!e.contains('\n'));
    // A small layer is checked every time.
    ollama_store(
        &root,
        "tmpl",
        "latest",
        &[("model", good.clone()), ("template", b"T".to_vec())],
    );
    fs::write(blob(b"T"), b"U").unwrap();
    let e = err("ollama:tmpl", &s);
    assert!(
        e.contains("template layer") && e.contains("does not match its digest"),
        "{e}"
    );

    // A blob that is a link out of the store.
    let outside = dir.path().join("outside.gguf");
    let out_bytes = fake_gguf(77);
    fs::write(&outside, &out_bytes).unwrap();
    ollama_store(&root, "link", "latest", &[("model", out_bytes.clone())]);
    fs::remove_file(blob(&out_bytes)).unwrap();
    std::os::unix::fs::symlink(&outside, blob(&out_bytes)).unwrap();
    let e = err("ollama:link", &s);
    assert!(e.contains("is a link out of the store"), "{e}");
    // A manifest that is a link out of the store.
    let tags = root.join("manifests/registry.ollama.ai/library/ok");
    std::os::unix::fs::symlink(&outside, tags.join("evil")).unwrap();
    let e = err("ollama:ok:evil", &s);
    assert!(
        e.contains("manifest") && e.contains("is a link out of the store"),
        "{e}"
    );

    // A huge manifest is not read.
    let big = root.join("manifests/registry.ollama.ai/library/big");
    fs::create_dir_all(&big).unwrap();
    let f = fs::File::create(big.join("latest")).unwrap();
    f.set_len(64 << 20).unwrap();
    let e = err("ollama:big", &s);
    assert!(e.contains("is larger than the 1048576 bytes"), "{e}");

    // Malformed JSON, no model layer, a digest that climbs out of blobs/.
    let m = root.join("manifests/registry.ollama.ai/library");
    for (name, text, says) in [
        ("bad", "{\"layers\": [", "is not an Ollama manifest"),
        ("empty", "{\"layers\": []}", "lists no model layer"),
        (
            "climb",
            r#"{"layers": [{"mediaType": "application/vnd.ollama.image.model", "digest": "sha256:../../../etc/passwd", "size": 1}]}"#,
            "not sha256:<64 hex digits>",
        ),
        (
            "adapter",
            &format!(
                r#"{{"layers": [{{"mediaType": "application/vnd.ollama.image.adapter", "digest": "sha256:{}", "size": 64}}]}}"#,
                sha(&good)
            ),
            "adapter layer",
        ),
    ] {
        fs::create_dir_all(m.join(name)).unwrap();
        fs::write(m.join(name).join("latest"), text).unwrap();
        let e = err(&format!("ollama:{name}"), &s);
        assert!(e.contains(says), "{name}: {e}");
    }

    // Names that climb out of the store never become paths.
    for (spec, says) in [
        ("ollama:../../x", "starts with a dot"),
        ("ollama:a/../../x", "more than three parts"),
        ("ollama:a/../x", "starts with a dot"),
        ("ollama:/etc/passwd", "empty"),
        ("lmstudio:../x", "starts with a dot"),
        ("llamacpp:../x", "starts with a dot"),
        ("llamacpp:a/b", "'/'"),
    ] {
        let e = err(spec, &s);
        assert!(e.contains("is not a") && e.contains(says), "{spec}: {e}");
    }

    // The listing shows each model with its verdict, and the good one resolves.
    let before = snapshot(&root);
    let (listed, _) = list(StoreKind::Ollama, &s);
    let ok: Vec<&str> = listed
        .iter()
        .filter(|l| l.model.is_ok())
        .map(|l| l.name.as_str())
        .collect();
    assert_eq!(ok, ["ollama:ok:latest", "ollama:swapped:latest"]);
    assert!(listed.len() >= 10, "{}", listed.len());
    assert_eq!(snapshot(&root), before, "nothing written in the store");
}

#[test]
fn a_missing_store_says_where_it_looked() {
    let dir = tempfile::tempdir().unwrap();
    let s = Stores {
        ollama: vec![dir.path().join("nope")],
        ..Stores::default()
    };
    let e = err("ollama:tiny", &s);
    assert!(
        e.contains("found no Ollama folder: looked in")
            && e.contains("nope")
            && e.contains("OLLAMA_MODELS"),
        "{e}"
    );
}

#[test]
fn lm_studio_and_llama_cpp_find_files_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let s = stores(root);
    let m = root.join("pub/Model-GGUF");
    fs::create_dir_all(&m).unwrap();
    for f in [
        "model-Q8_0.gguf",
        "model-Q4_K_M.gguf",
        "mmproj-model-f16.gguf",
    ] {
        fs::write(m.join(f), fake_gguf(50)).unwrap();
    }
    let found = resolve("lmstudio:pub/Model-GGUF", &s).unwrap().unwrap();
    assert_eq!(found.name, "lmstudio:pub/Model-GGUF/model-Q4_K_M.gguf");
    assert_eq!(found.passed_over, ["model-Q8_0.gguf"]);
    assert!(found.projector.unwrap().ends_with("mmproj-model-f16.gguf"));
    let q8 = resolve("lmstudio:pub/Model-GGUF/model-Q8_0", &s)
        .unwrap()
        .unwrap();
    assert_eq!(q8.name, "lmstudio:pub/Model-GGUF/model-Q8_0.gguf");
    assert!(q8.passed_over.is_empty());
    let e = err("lmstudio:pub/Model-GGUF/model-Q2_K.gguf", &s);
    assert!(e.contains("has model-Q4_K_M.gguf, model-Q8_0.gguf"), "{e}");

    for f in [
        "bartowski_Qwen2.5-0.5B-Instruct-GGUF_Qwen2.5-0.5B-Instruct-Q4_K_M.gguf",
        "bartowski_Qwen2.5-0.5B-Instruct-GGUF_Qwen2.5-0.5B-Instruct-Q8_0.gguf",
        "ggml-org_SmolLM2-135M-GGUF_SmolLM2-135M-Q8_0.gguf",
    ] {
        fs::write(root.join(f), fake_gguf(50)).unwrap();
    }
    let found = resolve("llamacpp:smollm2", &s).unwrap().unwrap();
    assert_eq!(
        found.name,
        "llamacpp:ggml-org_SmolLM2-135M-GGUF_SmolLM2-135M-Q8_0"
    );
    assert_eq!(found.store, StoreKind::LlamaCpp);
    let e = err("llamacpp:qwen2.5", &s);
    assert!(
        e.contains("matches 2 llama.cpp models: llamacpp:bartowski_Qwen2.5-0.5B-Instruct-GGUF_Qwen2.5-0.5B-Instruct-Q4_K_M, llamacpp:bartowski"),
        "{e}"
    );
    let found = resolve("llamacpp:qwen2.5-0.5b-instruct-q8_0", &s)
        .unwrap()
        .unwrap();
    assert!(found.name.ends_with("Q8_0"));
    let e = err("llamacpp:llama-3", &s);
    assert!(
        e.contains("has no model 'llamacpp:llama-3'") && e.contains("it has "),
        "{e}"
    );
    // A file that is not GGUF.
    fs::write(root.join("fake.gguf"), b"not gguf").unwrap();
    let e = err("llamacpp:fake", &s);
    assert!(e.contains("is not a GGUF file"), "{e}");
}
