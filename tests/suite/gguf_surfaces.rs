//! Every CLI surface on the GGUF files of the new families (issue 22, req 8): the terminal
//! view, the JSON export (each layer's mask and window as llama.cpp's reading of the metadata
//! gives them), PNG and SVG figures, the HTML report, corpus mode, and `--chat --generate` with
//! the chat template from `tokenizer.chat_template`.

use std::path::PathBuf;

use serde_json::Value;

use crate::support::cli::{run, stderr};

fn gguf(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/gguf")
        .join(name)
}

/// (file, layers, each layer's window: `None` for a global layer).
const FILES: [(&str, &[Option<u64>]); 5] = [
    ("tiny-gemma2.Q8_0.gguf", &[Some(5), None, Some(5)]),
    (
        "tiny-gemma3.F32.gguf",
        &[Some(6), Some(6), Some(6), Some(6), Some(6), None],
    ),
    ("tiny-phi3.Q8_0.gguf", &[Some(12), Some(12)]),
    ("wide-qwen3.Q6_K.gguf", &[None]),
    ("wide-llama.Q6_K.gguf", &[None]),
];

#[test]
fn every_surface_runs_on_each_new_gguf_family() {
    let tmp = tempfile::tempdir().unwrap();
    let text = "The quick brown fox jumps over a dog.";
    for (file, windows) in FILES {
        let model = gguf(file);
        let model = model.to_str().unwrap();
        let dir = tmp.path().join(file);
        let (json, png, svg, report) = (
            dir.join("a.json"),
            dir.join("a.png"),
            dir.join("a.svg"),
            dir.join("report"),
        );
        std::fs::create_dir_all(&dir).unwrap();
        let out = run(&["--model", model, text, "--layer", "0"]);
        assert!(out.status.success(), "[{file}] terminal: {}", stderr(&out));
        let screen = String::from_utf8_lossy(&out.stdout);
        assert!(
            screen.contains("layer 0"),
            "[{file}] terminal view:\n{screen}"
        );
        let out = run(&[
            "-q",
            "--model",
            model,
            text,
            "--json",
            json.to_str().unwrap(),
            "--png",
            png.to_str().unwrap(),
            "--svg",
            svg.to_str().unwrap(),
            "--figure",
            "layer",
            "--report",
            report.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "[{file}] files: {}", stderr(&out));
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let masks = v["layer_masks"].as_array().unwrap();
        assert_eq!(masks.len(), windows.len(), "[{file}] layer_masks");
        for (l, (m, w)) in masks.iter().zip(windows).enumerate() {
            assert_eq!(m["window"].as_u64(), *w, "[{file}] layer {l} window");
            let kind = if w.is_some() {
                "sliding_window"
            } else {
                "causal"
            };
            assert_eq!(m["mask"], kind, "[{file}] layer {l} mask");
        }
        assert!(
            std::fs::read(&png).unwrap().starts_with(b"\x89PNG"),
            "[{file}] png"
        );
        assert!(
            std::fs::read_to_string(&svg).unwrap().contains("<svg"),
            "[{file}] svg"
        );
        let html = std::fs::read_to_string(report.join("report.html")).unwrap();
        assert!(html.contains(file), "[{file}] the report names the file");
        let corpus = dir.join("corpus.txt");
        std::fs::write(&corpus, "The cat sat.\nA dog ran.\n").unwrap();
        let out_dir = dir.join("corpus");
        let out = run(&[
            "-q",
            "--model",
            model,
            "--input",
            corpus.to_str().unwrap(),
            "--out-dir",
            out_dir.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "[{file}] corpus: {}", stderr(&out));
        assert!(
            out_dir.join("corpus_stats.json").is_file(),
            "[{file}] corpus stats"
        );
    }
}

#[test]
fn chat_templates_from_phi3_and_qwen3_gguf_wrap_the_prompt() {
    // (file, a token of the template's user turn that "Hi there" cannot give: Phi-3's `<|user|>`
    // is bytes in the tiny vocabulary, its `|` the byte token <0x7C>). The tiny Gemma models
    // take 48 positions, fewer than their chat template's wrapping of a prompt.
    for (file, marker) in [
        ("tiny-phi3.F32.gguf", "<0x7C>"),
        ("wide-qwen3.Q6_K.gguf", "<|im_start|>"),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let json = tmp.path().join("chat.json");
        let model = gguf(file);
        let out = run(&[
            "-q",
            "--model",
            model.to_str().unwrap(),
            "Hi there",
            "--chat",
            "--generate",
            "3",
            "--json",
            json.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "[{file}] chat: {}", stderr(&out));
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let tokens: Vec<String> = v["tokens"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().map_or_else(|| t.to_string(), str::to_string))
            .collect();
        assert!(
            tokens.iter().any(|t| t.contains(marker)),
            "[{file}] the chat template's user turn is in the tokens: {tokens:?}"
        );
    }
}
