//! A GGUF text model with llama.cpp's projector file on the command line (`-m model.gguf
//! --mmproj mmproj-*.gguf`), the projector an Ollama store keeps beside a model used by itself,
//! and the one-line refusals: a projector beside a model that is not a GGUF file, a projector
//! file that is not one, a projector type attnviz does not run, a projector made for another
//! kind or width of text model, a picture given to a GGUF text model without its projector, and
//! Qwen2.5-VL's text file without its M-RoPE sections. The pairs are `tests/reference/make_mmproj.py`'s.

use std::fs;
use std::path::{Path, PathBuf};
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
        "--expand-pictures",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    // Sixteen image tokens, labelled by picture and grid cell (one band without
    // --expand-pictures).
    assert!(
        text.contains("<img1 0,0>") && text.contains("<img1 3,3>"),
        "{text}"
    );
}

/// A temporary Ollama store (and empty other stores) holding `library/NAME:latest` with the
/// model and projector layers `files`; a command with every store's variable pointed into it,
/// running the model `-m` names with `args`.
struct Store {
    dir: tempfile::TempDir,
}

impl Store {
    fn new(name: &str, files: [&Path; 2]) -> Store {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for d in ["home", "ollama/blobs", "lmstudio", "llamacpp", "hf"] {
            fs::create_dir_all(root.join(d)).unwrap();
        }
        let mut layers = Vec::new();
        for (kind, file) in ["model", "projector"].into_iter().zip(files) {
            let bytes = fs::read(file).unwrap();
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
        let manifests = root.join(format!(
            "ollama/manifests/registry.ollama.ai/library/{name}"
        ));
        fs::create_dir_all(&manifests).unwrap();
        fs::write(
            manifests.join("latest"),
            serde_json::json!({"schemaVersion": 2, "layers": layers}).to_string(),
        )
        .unwrap();
        Store { dir }
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let root = self.dir.path();
        let mut cmd = attnviz();
        cmd.env("HOME", root.join("home"))
            .env("OLLAMA_MODELS", root.join("ollama"))
            .env("LMSTUDIO_MODELS", root.join("lmstudio"))
            .env("LLAMA_CACHE", root.join("llamacpp"))
            .env("HF_HUB_CACHE", root.join("hf"))
            .env_remove("HF_HOME")
            .env_remove("XDG_CACHE_HOME")
            .args(args);
        cmd
    }
}

/// A store's projector of a type attnviz does not run leaves the text model running; a picture
/// is refused in one line that says why.
#[test]
fn a_store_projector_that_cannot_be_joined_leaves_the_text_model_running() {
    let (_tmp, ldp) = unknown_projector();
    let text = fixture("gguf/tiny-llava.gguf");
    let store = Store::new("tinyldp", [&text, &ldp]);
    let out = store
        .cmd(&["-m", "ollama:tinyldp", "The cat"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let out = store
        .cmd(&[
            "-m",
            "ollama:tinyldp",
            "--image",
            &image("wide45x37.png"),
            "What?",
        ])
        .output()
        .unwrap();
    assert_clean_failure(&out, "ollama:tinyldp:latest reads no pictures here: ");
    assert_clean_failure(&out, "holds a 'ldp' projector, which attnviz does not run");
}

/// Ollama keeps a vision model's projector as a layer of its own: a model named in the store
/// runs with it without --mmproj, as the pair of files does.
#[test]
fn a_store_model_uses_its_projector_layer() {
    let (text, projector) = (
        fixture("gguf/tiny-gemma3-vlm.gguf"),
        fixture("gguf/mmproj-tiny-gemma3-vlm.gguf"),
    );
    let store = Store::new("tinyvlm", [&text, &projector]);
    let root = store.dir.path();
    let picture = image("big80x64.png");
    let from_store = attention_json(
        &mut store.cmd(&["-m", "ollama:tinyvlm", "--image", &picture, "Where?"]),
        &root.join("store.json"),
    );
    let from_files = attention_json(
        &mut store.cmd(&[
            "-m",
            &gguf("tiny-gemma3-vlm.gguf"),
            "--mmproj",
            &gguf("mmproj-tiny-gemma3-vlm.gguf"),
            "--image",
            &picture,
            "Where?",
        ]),
        &root.join("pair.json"),
    );
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
        "holds a 'ldp' projector, which attnviz does not run; it runs 'mlp' (LLaVA), \
         'gemma3' (Gemma 3), 'idefics3' (SmolVLM, Idefics3), 'qwen2.5vl_merger' (Qwen2.5-VL) \
         and 'qwen2vl_merger' (Qwen2-VL)",
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

#[test]
fn a_projector_in_corpus_mode_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    fs::write(&input, "one\n").unwrap();
    let out = run(&[
        "-m",
        &gguf("tiny-llava.gguf"),
        "--mmproj",
        &gguf("mmproj-tiny-llava.gguf"),
        "--input",
        &input.display().to_string(),
        "--out-dir",
        &dir.path().join("out").display().to_string(),
    ]);
    assert_clean_failure(&out, "--mmproj is for a single input");
    assert!(!dir.path().join("out").exists());
}

/// The projector's tensors are counted against the memory limit before one is read, as a text
/// model's are.
#[test]
fn a_projector_over_the_memory_limit_is_refused_before_it_is_read() {
    let out = run(&[
        "-m",
        &gguf("tiny-llava.gguf"),
        "--mmproj",
        &gguf("mmproj-tiny-llava.gguf"),
        "--image",
        &image("wide45x37.png"),
        "--max-memory",
        "50000",
        "What?",
    ]);
    assert_clean_failure(
        &out,
        "mmproj-tiny-llava.gguf: its 41 tensors take 121 KB as stored, more than the memory \
         limit given (50 KB)",
    );
}

/// Qwen2.5-VL's `qwen2vl` text file runs alone as a Qwen2 (its M-RoPE is plain RoPE on text);
/// with its projector but without `qwen2vl.rope.dimension_sections` it is refused in one line
/// naming the key, not run with positions llama.cpp would not give it.
#[test]
fn a_qwen2vl_text_file_runs_alone_and_needs_its_rope_sections_for_pictures() {
    let alone = run(&["-m", &gguf("tiny-qwen2_5_vl.gguf"), "describe the red part"]);
    assert!(alone.status.success(), "{}", stderr(&alone));
    let mut bytes = fs::read(gguf("tiny-qwen2_5_vl.gguf")).unwrap();
    let key = b"qwen2vl.rope.dimension_sections";
    let at = bytes
        .windows(key.len())
        .position(|w| w == key)
        .expect("the key");
    bytes[at + key.len() - 1] = b'z';
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny-qwen2_5_vl.gguf");
    fs::write(&path, bytes).unwrap();
    let out = run(&[
        "-m",
        &path.display().to_string(),
        "--mmproj",
        &gguf("mmproj-tiny-qwen2_5_vl.gguf"),
        "--image",
        &image("wide45x37.png"),
        "What?",
    ]);
    assert_clean_failure(
        &out,
        "metadata qwen2vl.rope.dimension_sections is missing; multimodal RoPE needs three runs",
    );
}
