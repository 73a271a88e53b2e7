//! Real outputs of the CLI validate against the committed schemas (`schema/`), checked by an
//! independent validator (Python's `jsonschema`, through `tests/schema/validate.py`): the
//! attention documents of an encoder, a weighted run, a decoder, a vision model and an
//! encoder–decoder, a comparison, a saved capture's metadata, and corpus mode's files.

use std::path::Path;
use std::process::Command;

use crate::support::cli::{fixture, repo, run, run_corpus, stderr, tiny};

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Validate `files` against `schema` (a file name in `schema/`); fail with the validator's
/// first complaint. The Python is `ATTNVIZ_SCHEMA_PYTHON` (scripts/test.sh makes a venv with
/// jsonschema for it), else `python3`.
pub(crate) fn validate(schema: &str, files: &[&Path]) {
    let python = std::env::var("ATTNVIZ_SCHEMA_PYTHON").unwrap_or_else(|_| "python3".into());
    let out = Command::new(python)
        .arg(repo().join("tests/schema/validate.py"))
        .arg(schema)
        .args(files)
        .output()
        .expect("python3 runs (with the jsonschema package: pip install jsonschema, or ATTNVIZ_SCHEMA_PYTHON)");
    assert!(
        out.status.success(),
        "{schema}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn ok(args: &[&str]) {
    let out = run(args);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
}

#[test]
fn attention_documents_validate_against_their_schemas() {
    let dir = tempfile::tempdir().unwrap();
    let at = |n: &str| dir.path().join(n);
    let bert = tiny();
    ok(&[
        "-m",
        s(&bert),
        "the cat sat",
        "--pair",
        "on the mat",
        "--json",
        s(&at("bert.json")),
        "--json-include",
        "means,rollout",
        "-q",
    ]);
    ok(&[
        "-m",
        s(&bert),
        "the cat sat",
        "--words",
        "--no-special",
        "--json",
        s(&at("words.json")),
        "-q",
    ]);
    ok(&[
        "-m",
        s(&bert),
        "the cat sat",
        "--weighting",
        "norm-aware",
        "--json",
        s(&at("weighted.json")),
        "-q",
    ]);
    // A decoder with every section of the whole run: the logit lens, head attribution and
    // ablation, and the model's induction scores in `stats`.
    ok(&[
        "-m",
        s(&fixture("tiny-llama")),
        "the cat sat",
        "--lens",
        "--attribution",
        "--ablate",
        "mean",
        "--json",
        s(&at("llama.json")),
        "-q",
    ]);
    // SigLIP: the picture with its attention-pooling head.
    ok(&[
        "-m",
        s(&fixture("tiny-siglip")),
        "--image",
        s(&fixture("images/own32.png")),
        "--json",
        s(&at("siglip.json")),
        "-q",
    ]);
    ok(&[
        "-m",
        s(&fixture("tiny-deit")),
        "--image",
        s(&fixture("images/own32.png")),
        "--json",
        s(&at("vit.json")),
        "-q",
    ]);
    // LLaVA: the language model's attention with its picture's image tokens.
    ok(&[
        "-m",
        s(&fixture("tiny-llava")),
        "--image",
        s(&fixture("images/wide45x37.png")),
        "What is this?",
        "--json",
        s(&at("llava.json")),
        "-q",
    ]);
    ok(&[
        "render",
        s(&at("weighted.json")),
        "--json",
        s(&at("rendered.json")),
        "-q",
    ]);
    validate(
        "attention-v2.schema.json",
        &[
            &at("bert.json"),
            &at("words.json"),
            &at("weighted.json"),
            &at("llama.json"),
            &at("vit.json"),
            &at("siglip.json"),
            &at("llava.json"),
            &at("rendered.json"),
        ],
    );
    let doc = |n: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(at(n)).unwrap()).unwrap()
    };
    // The typed sections were there to be checked.
    let llama = doc("llama.json");
    for section in ["stats", "logit_lens", "head_attribution", "head_ablation"] {
        assert!(llama[section].is_object(), "llama.json has no {section}");
    }
    assert!(doc("siglip.json")["image"]["pooling"]["weights"].is_array());
    assert!(doc("llava.json")["pictures"][0]["image"]["cells"].is_array());
    assert!(doc("vit.json")["image"]["preprocessing"]["resize"].is_object());
    // What the weighted run's attention holds survives `render`.
    assert_eq!(doc("bert.json")["attention_holds"], "raw");
    assert_eq!(doc("weighted.json")["attention_holds"], "norm-aware");
    assert_eq!(doc("rendered.json")["attention_holds"], "norm-aware");

    ok(&[
        "-m",
        s(&fixture("tiny-bart")),
        "the cat sat",
        "--target",
        "le chat",
        "--json",
        s(&at("bart.json")),
        "-q",
    ]);
    validate("attention-v3.schema.json", &[&at("bart.json")]);

    ok(&[
        "diff",
        s(&at("bert.json")),
        s(&at("bert.json")),
        "--json",
        s(&at("diff.json")),
    ]);
    validate("comparison.schema.json", &[&at("diff.json")]);
    // A weighted export against a raw one is refused in one line.
    let out = run(&[
        "diff",
        s(&at("bert.json")),
        s(&at("weighted.json")),
        "--json",
        s(&at("no.json")),
    ]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("norm-aware"), "{}", stderr(&out));
    assert!(!at("no.json").exists());

    ok(&[
        "-m",
        s(&bert),
        "the cat sat",
        "--save-attention",
        s(&at("cap.safetensors")),
        "-q",
    ]);
    ok(&[
        "-m",
        s(&fixture("tiny-bart")),
        "the cat sat",
        "--target",
        "le chat",
        "--save-attention",
        s(&at("ed.safetensors")),
        "-q",
    ]);
    validate(
        "saved-metadata.schema.json",
        &[&at("cap.safetensors"), &at("ed.safetensors")],
    );
}

#[test]
fn corpus_outputs_validate_against_their_schemas() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    std::fs::write(&input, "the cat sat\n\nthe dog ran\tfar away\n").unwrap();
    let out_dir = dir.path().join("out");
    let out = run_corpus(&tiny(), &input, &out_dir, &["-q"]);
    assert!(out.status.success(), "{}", stderr(&out));
    validate(
        "corpus-stats.schema.json",
        &[&out_dir.join("corpus_stats.json")],
    );
    validate(
        "corpus-partial.schema.json",
        &[&out_dir.join("corpus_partial.json")],
    );
    let sentences: Vec<_> = std::fs::read_dir(out_dir.join("sentences"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(!sentences.is_empty());
    let refs: Vec<&Path> = sentences.iter().map(|p| p.as_path()).collect();
    validate("attention-v2.schema.json", &refs);
}
