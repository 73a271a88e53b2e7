//! Value zeroing (Mohebbi et al. 2023) against `tests/reference/make_value_zeroing.py`, which
//! re-runs transformers' whole model once per layer and token with a hook zeroing that token's
//! row of the value projection, and takes the layer's output from a hook: the tiny BERT
//! (post-norm), GPT-2 and Llama (pre-norm, grouped-query attention) fixtures, and real
//! all-MiniLM-L6-v2 and SmolLM2-135M (GGUF). Run in release; `-- --nocapture` prints each
//! case's largest difference.

use std::path::PathBuf;

use serde::Deserialize;

use attnviz::analysis::ValueZeroing;
use attnviz::model::Model;
use attnviz::progress::Silent;
use attnviz::request::RunRequest;

use crate::support::models::minilm::minilm_dir;
use crate::support::models::smollm2::smollm2_gguf;

/// Shares of a row: |Δ| ≤ TOL.
const TOL: f64 = 1e-4;

#[derive(Deserialize)]
struct File {
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    text: String,
    input_ids: Vec<u32>,
    causal: bool,
    /// `[layers][n][n]`.
    per_layer: Vec<Vec<Vec<f64>>>,
    aggregated: Vec<Vec<Vec<f64>>>,
}

fn case(name: &str) -> Case {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/reference/value_zeroing.json");
    let file: File = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    file.cases
        .into_iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no reference case {name}"))
}

fn model(name: &str) -> Model {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    match name {
        "minilm" => Model::from_dir(&minilm_dir()).unwrap(),
        "smollm2" => Model::from_gguf(&smollm2_gguf()).unwrap(),
        tiny => Model::from_dir(&root.join("tests/fixtures").join(tiny)).unwrap(),
    }
}

fn largest(ours: &[f32], want: &[Vec<f64>]) -> f64 {
    let n = want.len();
    let mut worst = 0f64;
    for (i, row) in want.iter().enumerate() {
        for (j, &w) in row.iter().enumerate() {
            worst = worst.max((ours[i * n + j] as f64 - w).abs());
        }
    }
    worst
}

fn run(name: &str, case: &Case) -> ValueZeroing {
    let run = RunRequest {
        value_zeroing: true,
        ..RunRequest::new(case.text.clone())
    }
    .run(&model(name), &Silent)
    .unwrap();
    assert_eq!(
        run.set.primary().queries().ids,
        case.input_ids,
        "[{name}] our tokens differ from the reference's"
    );
    // Value zeroing alone hands back neither ALTI nor value-weighted attention.
    assert!(run.measured.alti.is_none() && run.value_weighted.is_none());
    run.measured
        .value_zeroing
        .expect("value zeroing was asked for")
}

fn check(name: &str) {
    let case = case(name);
    let v = run(name, &case);
    assert_eq!(v.per_layer.len(), case.per_layer.len(), "[{name}] layers");
    for (l, (want_c, want_a)) in case.per_layer.iter().zip(&case.aggregated).enumerate() {
        let c = largest(&v.per_layer[l], want_c);
        let g = largest(&v.aggregated[l], want_a);
        println!("[{name}] layer {l}: max |Δ| per layer {c:.2e}, aggregated {g:.2e}");
        assert!(
            c <= TOL && g <= TOL,
            "[{name}] layer {l}: |Δ| per layer {c:.2e}, aggregated {g:.2e} over {TOL:e}"
        );
    }
    let n = v.tokens;
    for m in &v.per_layer {
        for (i, row) in m.chunks_exact(n).enumerate() {
            // Rows are shares, and a causal model's token never reads a later one.
            let total: f32 = row.iter().sum();
            assert!((total - 1.0).abs() < 1e-4, "[{name}] a row sums to {total}");
            if case.causal {
                assert!(row[i + 1..].iter().all(|&x| x == 0.0), "[{name}] row {i}");
            }
        }
    }
}

#[test]
fn tiny_bert_matches_transformers() {
    check("tiny-bert");
}

#[test]
fn tiny_gpt2_matches_transformers() {
    check("tiny-gpt2");
}

#[test]
fn tiny_llama_with_grouped_query_attention_matches_transformers() {
    check("tiny-llama");
}

#[test]
fn minilm_matches_transformers() {
    check("minilm");
}

#[test]
fn smollm2_matches_transformers() {
    check("smollm2");
}

#[test]
fn value_zeroing_is_opt_in_and_refuses_a_choice_of_layers() {
    let case = case("tiny-bert");
    let model = model("tiny-bert");
    let plain = RunRequest::new(case.text.clone())
        .run(&model, &Silent)
        .unwrap();
    assert!(plain.measured.value_zeroing.is_none());
    let err = RunRequest {
        value_zeroing: true,
        layers: Some(vec![0]),
        ..RunRequest::new(case.text.clone())
    }
    .run(&model, &Silent)
    .unwrap_err();
    assert!(err.to_string().contains("every layer"), "{err}");
}

#[test]
fn encoder_decoders_are_refused_in_words() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let model = Model::from_dir(&root.join("tests/fixtures/tiny-bart")).unwrap();
    let err = RunRequest {
        value_zeroing: true,
        ..RunRequest::new("the cat sat")
    }
    .run(&model, &Silent)
    .unwrap_err();
    assert!(
        err.to_string().contains("value zeroing is not available"),
        "{err}"
    );
}

fn cli(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_attnviz"))
        .args(args)
        .env("HF_HUB_OFFLINE", "1")
        .output()
        .unwrap()
}

/// `[layers][n][n]` of a JSON section, flattened per layer.
fn section(doc: &serde_json::Value, key: &str) -> Vec<Vec<f32>> {
    let layers = doc[key]
        .as_array()
        .unwrap_or_else(|| panic!("no `{key}` section"));
    layers
        .iter()
        .map(|m| {
            m.as_array()
                .unwrap()
                .iter()
                .flat_map(|row| row.as_array().unwrap().iter())
                .map(|v| v.as_f64().unwrap() as f32)
                .collect()
        })
        .collect()
}

#[test]
fn the_cli_writes_value_zeroing_to_json_png_and_html_only_when_asked() {
    let case = case("tiny-gpt2");
    let dir = tempfile::tempdir().unwrap();
    let model = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiny-gpt2");
    let model = model.to_str().unwrap();
    let (json, png, html) = (
        dir.path().join("a.json"),
        dir.path().join("a.png"),
        dir.path().join("a.html"),
    );
    let out = cli(&[
        "-m",
        model,
        &case.text,
        "--quiet",
        "--json",
        json.to_str().unwrap(),
        "--figure",
        "value-zeroing",
        "--png",
        png.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let (aggregated, per_layer) = (
        section(&doc, "value_zeroing"),
        section(&doc, "value_zeroing_per_layer"),
    );
    assert_eq!(aggregated.len(), case.aggregated.len());
    for l in 0..aggregated.len() {
        let a = largest(&aggregated[l], &case.aggregated[l]);
        let c = largest(&per_layer[l], &case.per_layer[l]);
        assert!(a <= TOL && c <= TOL, "layer {l}: |Δ| {a:.2e}, {c:.2e}");
    }
    assert!(std::fs::read(&png).unwrap().starts_with(b"\x89PNG"));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains(r#""id":"value_zeroing""#),
        "the report offers it"
    );

    // Not asked: no section.
    let out = cli(&["-m", model, &case.text, "--quiet", "--json", "-"]);
    assert!(out.status.success());
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(doc.get("value_zeroing").is_none());

    // A choice of layers cannot give it: refused with the flag to drop.
    let out = cli(&["-m", model, &case.text, "--value-zeroing", "--layers", "0"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("drop --layers") && err.lines().count() == 1,
        "{err}"
    );
}
