//! ALTI (Ferrando et al. 2022) against `tests/reference/make_alti.py`, which builds every
//! per-token vector T_i(x_j) from transformers' own modules with PyTorch hooks and takes y_i
//! from the block's real output: the tiny BERT (post-norm), GPT-2 and Llama (pre-norm,
//! grouped-query attention) fixtures, and real all-MiniLM-L6-v2 and SmolLM2-135M (GGUF). Run
//! in release; `-- --nocapture` prints each case's largest difference.

use std::path::PathBuf;

use serde::Deserialize;

use attnviz::analysis::alti;
use attnviz::model::{EncodeOptions, Model};
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
    /// `[layers][n][n]`.
    per_layer: Vec<Vec<Vec<f64>>>,
    aggregated: Vec<Vec<Vec<f64>>>,
}

fn case(name: &str) -> Case {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/reference/alti.json");
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

fn check(name: &str) {
    let case = case(name);
    let model = model(name);
    let opts = EncodeOptions {
        alti: true,
        ..EncodeOptions::default()
    };
    let enc = model.encode(&case.text, None, &opts).unwrap();
    assert_eq!(
        enc.attention.queries().ids,
        case.input_ids,
        "[{name}] our tokens differ from the reference's"
    );
    let values = enc.values.as_ref().expect("values were asked for");
    let a = alti(enc.attention.layer_numbers(), values).unwrap();
    assert_eq!(a.per_layer.len(), case.per_layer.len(), "[{name}] layers");
    for (l, (want_c, want_a)) in case.per_layer.iter().zip(&case.aggregated).enumerate() {
        let c = largest(&a.per_layer[l], want_c);
        let g = largest(&a.aggregated[l], want_a);
        println!("[{name}] layer {l}: max |Δ| per layer {c:.2e}, aggregated {g:.2e}");
        assert!(
            c <= TOL && g <= TOL,
            "[{name}] layer {l}: |Δ| per layer {c:.2e}, aggregated {g:.2e} over {TOL:e}"
        );
    }
    // Rows are shares: each sums to 1.
    for row in a.aggregated.last().unwrap().chunks_exact(a.tokens) {
        let total: f32 = row.iter().sum();
        assert!((total - 1.0).abs() < 1e-4, "[{name}] a row sums to {total}");
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
fn alti_runs_where_heads_times_head_dim_is_not_the_hidden_size() {
    // Gemma 2, Gemma 3 and Qwen3 set head_dim apart from hidden / heads (the tiny fixtures:
    // 4 heads × 16 over a hidden size of 32); ALTI read the output projection's bias with an
    // input of the hidden size and panicked there. No reference covers these families: the
    // rows must be shares.
    for name in ["tiny-gemma2", "tiny-gemma3", "tiny-qwen3"] {
        let run = RunRequest {
            alti: true,
            ..RunRequest::new("The cat sat on the mat.")
        }
        .run(&model(name), &Silent)
        .unwrap();
        let a = run.measured.alti.expect("ALTI was asked for");
        for matrix in a.per_layer.iter().chain(&a.aggregated) {
            for row in matrix.chunks_exact(a.tokens) {
                let total: f32 = row.iter().sum();
                assert!(
                    row.iter().all(|v| v.is_finite() && *v >= 0.0) && (total - 1.0).abs() < 1e-4,
                    "[{name}] a row {row:?}"
                );
            }
        }
    }
}

#[test]
fn the_value_capture_alone_leaves_alti_out() {
    // ALTI is opt-in: value-weighted attention's capture does not pay for it.
    let case = case("tiny-bert");
    let opts = EncodeOptions {
        capture_values: true,
        ..EncodeOptions::default()
    };
    let enc = model("tiny-bert").encode(&case.text, None, &opts).unwrap();
    let values = enc.values.expect("values were asked for");
    assert!(values.iter().all(|v| v.mixing.is_empty()));
    assert!(alti(enc.attention.layer_numbers(), &values).is_err());
}

#[test]
fn the_run_request_gives_alti_only_when_asked() {
    let case = case("tiny-gpt2");
    let model = model("tiny-gpt2");
    let plain = RunRequest::new(case.text.clone())
        .run(&model, &Silent)
        .unwrap();
    assert!(plain.measured.alti.is_none() && plain.value_weighted.is_none());
    let run = RunRequest {
        alti: true,
        ..RunRequest::new(case.text.clone())
    }
    .run(&model, &Silent)
    .unwrap();
    // ALTI alone does not hand back value-weighted attention.
    assert!(run.value_weighted.is_none());
    let a = run.measured.alti.expect("ALTI was asked for");
    let last = case.aggregated.last().unwrap();
    let worst = largest(a.aggregated.last().unwrap(), last);
    assert!(worst <= TOL, "|Δ| {worst:.2e}");
    // Every layer is needed: a choice of layers is refused before the run.
    let err = RunRequest {
        alti: true,
        layers: Some(vec![0]),
        ..RunRequest::new(case.text.clone())
    }
    .run(&model, &Silent)
    .unwrap_err();
    assert!(err.to_string().contains("every layer"), "{err}");
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
fn the_cli_writes_alti_to_json_png_and_html_only_when_asked() {
    let case = case("tiny-bert");
    let dir = tempfile::tempdir().unwrap();
    let model = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiny-bert");
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
        "--alti",
        "--quiet",
        "--json",
        json.to_str().unwrap(),
        "--figure",
        "alti",
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
    let (aggregated, per_layer) = (section(&doc, "alti"), section(&doc, "alti_per_layer"));
    assert_eq!(aggregated.len(), case.aggregated.len());
    for l in 0..aggregated.len() {
        let a = largest(&aggregated[l], &case.aggregated[l]);
        let c = largest(&per_layer[l], &case.per_layer[l]);
        assert!(a <= TOL && c <= TOL, "layer {l}: |Δ| {a:.2e}, {c:.2e}");
    }
    assert!(std::fs::read(&png).unwrap().starts_with(b"\x89PNG"));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains(r#""id":"alti""#), "the report offers ALTI");

    // Not asked: no section.
    let out = cli(&["-m", model, &case.text, "--quiet", "--json", "-"]);
    assert!(out.status.success());
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(doc.get("alti").is_none() && doc.get("alti_per_layer").is_none());

    // In the view without special tokens, mapped as rollout is: one row per unit, shares.
    let out = cli(&[
        "-m",
        model,
        &case.text,
        "--alti",
        "--no-special",
        "--quiet",
        "--json",
        "-",
    ]);
    assert!(out.status.success());
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let n = doc["tokens"].as_array().unwrap().len();
    let last = section(&doc, "alti").pop().unwrap();
    assert_eq!(last.len(), n * n);
    for row in last.chunks_exact(n) {
        let total: f32 = row.iter().sum();
        assert!((total - 1.0).abs() < 1e-4, "a row sums to {total}");
    }

    // A choice of layers cannot give it: refused with the flag to drop.
    let out = cli(&["-m", model, &case.text, "--alti", "--layers", "0"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("drop --layers") && err.lines().count() == 1,
        "{err}"
    );
}

#[test]
fn the_terminal_shows_alti_of_the_layer_after_its_attention() {
    let case = case("tiny-gpt2");
    let model = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiny-gpt2");
    let out = cli(&["-m", model.to_str().unwrap(), &case.text, "--alti"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let last = case.aggregated.len() - 1;
    let at = text
        .find(&format!("ALTI (Ferrando et al. 2022) through layer {last}"))
        .unwrap_or_else(|| panic!("no ALTI after the attention view:\n{text}"));
    assert!(
        text[..at].contains("Most attended"),
        "the attention view comes first"
    );
    let alti = &text[at..];
    assert!(alti.contains("columns: input token"), "{alti}");
    // Each row's listed shares are the reference's largest shares of that row, strongest first.
    let rows: Vec<&str> = alti
        .lines()
        .skip_while(|l| !l.starts_with("Largest input shares"))
        .skip(1)
        .collect();
    let want = &case.aggregated[last];
    assert_eq!(rows.len(), want.len(), "{alti}");
    for (q, line) in rows.iter().enumerate() {
        let listed: Vec<f64> = line
            .split_whitespace()
            .filter_map(|w| w.parse::<f64>().ok().filter(|_| w.contains('.')))
            .collect();
        let mut row: Vec<f64> = want[q][..=q].to_vec();
        row.sort_by(|a, b| b.total_cmp(a));
        assert_eq!(listed.len(), row.len().min(3), "row {q}: {line}");
        for (got, w) in listed.iter().zip(&row) {
            assert!(
                (got - w).abs() <= 5e-4,
                "row {q}: {got} against {w}: {line}"
            );
        }
    }
}
