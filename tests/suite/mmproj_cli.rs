//! A GGUF text model with llama.cpp's projector file on the command line (`-m model.gguf
//! --mmproj mmproj-*.gguf`), the projector an Ollama store keeps beside a model used by itself,
//! and the one-line refusals: a projector beside a model that is not a GGUF file, a projector
//! file that is not one, a projector type attnviz does not run, a projector made for another
//! kind or width of text model, and a picture given to a GGUF text model without its projector.
//! The pairs are `tests/reference/make_mmproj.py`'s.

use std::fs;
use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::support::cli::{assert_clean_failure, attnviz, fixture, run, stderr};

fn gguf(name: &str) -> String {
    fixture("gguf").join(name).display().to_string()
}

fn image(name: &str) -> String {
    fixture("images").join(name).display().to_string()
}

/// The JSON export of one run, without its model description (which names the model as it was
/// given).
fn attention_json(cmd: &mut Command, out: &std::path::Path) -> Value {
    let done = cmd.arg("--json").arg(out).output().unwrap();
    assert!(done.status.success(), "{}", stderr(&done));
    let mut v: Value = serde_json::from_str(&fs::read_to_string(out).unwrap()).unwrap();
    v.as_object_mut().unwrap().remove("model");
    v
}

#[test]
fn a_gguf_text_model_with_its_projector_reads_pictures() {
    let out = run(&[
        "-m",
        &gguf("tiny-llava.gguf"),
        "--mmproj",
        &gguf("mmproj-tiny-llava.gguf"),
        "--image",
        &image("wide45x37.png"),
        "What is this?",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    // Sixteen image tokens, labelled by picture and grid cell.
    assert!(
        text.contains("<img1 0,0>") && text.contains("<img1 3,3>"),
        "{text}"
    );
}

/// Ollama keeps a vision model's projector as a layer of its own: a model named in the store
/// runs with it without --mmproj, as the pair of files does.
#[test]
fn a_store_model_uses_its_projector_layer() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for d in ["home", "ollama/blobs", "lmstudio", "llamacpp", "hf"] {
        fs::create_dir_all(root.join(d)).unwrap();
    }
    let mut layers = Vec::new();
    for (kind, file) in [
        ("model", "tiny-gemma3-vlm.gguf"),
        ("projector", "mmproj-tiny-gemma3-vlm.gguf"),
    ] {
        let bytes = fs::read(gguf(file)).unwrap();
        let hex: String = Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        fs::write(root.join(format!("ollama/blobs/sha256-{hex}")), &bytes).unwrap();
        layers.push(serde_json::json!({
            "mediaType": format!("application/vnd.ollama.image.{kind}"),
            "digest": format!("sha256:{hex}"),
            "size": bytes.len(),
        }));
    }
    let manifests = root.join("ollama/manifests/registry.ollama.ai/library/tinyvlm");
    fs::create_dir_all(&manifests).unwrap();
    fs::write(
        manifests.join("latest"),
        serde_json::json!({"schemaVersion": 2, "layers": layers}).to_string(),
    )
    .unwrap();
    let cmd = |model: &str| {
        let mut cmd = attnviz();
        cmd.env("HOME", root.join("home"))
            .env("OLLAMA_MODELS", root.join("ollama"))
            .env("LMSTUDIO_MODELS", root.join("lmstudio"))
            .env("LLAMA_CACHE", root.join("llamacpp"))
            .env("HF_HUB_CACHE", root.join("hf"))
            .env_remove("HF_HOME")
            .env_remove("XDG_CACHE_HOME")
            .args(["-m", model, "--image", &image("big80x64.png"), "Where?"]);
        cmd
    };
    let from_store = attention_json(&mut cmd("ollama:tinyvlm"), &root.join("store.json"));
    let mut pair = cmd(&gguf("tiny-gemma3-vlm.gguf"));
    pair.args(["--mmproj", &gguf("mmproj-tiny-gemma3-vlm.gguf")]);
    let from_files = attention_json(&mut pair, &root.join("pair.json"));
    assert_eq!(from_store, from_files);
    assert!(
        from_store.to_string().contains("pictures"),
        "the store's model read the picture"
    );
}

#[test]
fn a_picture_for_a_gguf_text_model_asks_for_its_projector() {
    let out = run(&[
        "-m",
        &gguf("tiny-llava.gguf"),
        "--image",
        &image("wide45x37.png"),
        "What is this?",
    ]);
    assert_clean_failure(&out, "needs the projector file");
    assert_clean_failure(&out, "--mmproj FILE");
}

#[test]
fn a_projector_beside_a_model_folder_is_refused() {
    let out = run(&[
        "-m",
        &fixture("tiny-llava").display().to_string(),
        "--mmproj",
        &gguf("mmproj-tiny-llava.gguf"),
        "--image",
        &image("wide45x37.png"),
        "What?",
    ]);
    assert_clean_failure(&out, "is not a .gguf file");
    assert_clean_failure(&out, "--mmproj");
}

#[test]
fn a_text_model_given_as_the_projector_is_refused() {
    let out = run(&[
        "-m",
        &gguf("tiny-llava.gguf"),
        "--mmproj",
        &gguf("tiny-llava.gguf"),
        "--image",
        &image("wide45x37.png"),
        "What?",
    ]);
    assert_clean_failure(
        &out,
        "is not a projector file: its general.architecture is 'llama'",
    );
}

/// mmproj-tiny-llava.gguf with its `clip.projector_type` rewritten in place: `mlp` → `ldp`
/// (MobileVLM's, which clip.cpp reads and attnviz does not).
fn unknown_projector() -> (tempfile::TempDir, PathBuf) {
    let mut bytes = fs::read(gguf("mmproj-tiny-llava.gguf")).unwrap();
    let key = b"clip.projector_type";
    let at = bytes
        .windows(key.len())
        .position(|w| w == key)
        .expect("the key");
    // The key, its value's type (u32 8: a string), the string's length (u64 3), then `mlp`.
    let value = at + key.len() + 4 + 8;
    assert_eq!(&bytes[value..value + 3], b"mlp");
    bytes[value..value + 3].copy_from_slice(b"ldp");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mmproj-ldp.gguf");
    fs::write(&path, bytes).unwrap();
    (dir, path)
}

#[test]
fn an_unknown_projector_type_is_refused_naming_the_known_ones() {
    let (_dir, path) = unknown_projector();
    let out = run(&[
        "-m",
        &gguf("tiny-llava.gguf"),
        "--mmproj",
        &path.display().to_string(),
        "--image",
        &image("wide45x37.png"),
        "What?",
    ]);
    assert_clean_failure(
        &out,
        "holds a 'ldp' projector, which attnviz does not run; it runs 'mlp' (LLaVA) and \
         'gemma3' (Gemma 3)",
    );
}

#[test]
fn a_projector_for_another_kind_of_text_model_is_refused() {
    let out = run(&[
        "-m",
        &gguf("tiny-llava.gguf"),
        "--mmproj",
        &gguf("mmproj-tiny-gemma3-vlm.gguf"),
        "--image",
        &image("wide45x37.png"),
        "What?",
    ]);
    assert_clean_failure(
        &out,
        "is a 'gemma3' projector, which goes with gemma3 text models, but tiny-llava.gguf is \
         'llama'",
    );
}

#[test]
fn a_projector_of_another_width_is_refused() {
    // tiny-qwen2 is 32 wide; LLaVA's projector makes 64-wide embeddings.
    let out = run(&[
        "-m",
        &gguf("tiny-qwen2.gguf"),
        "--mmproj",
        &gguf("mmproj-tiny-llava.gguf"),
        "--image",
        &image("wide45x37.png"),
        "What?",
    ]);
    assert_clean_failure(
        &out,
        "projects pictures into 64-wide embeddings, but tiny-qwen2.gguf's text model is 32 wide",
    );
}
