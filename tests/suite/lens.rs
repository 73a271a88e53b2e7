//! The logit lens against `tests/reference/make_lens.py`, which catches the residual stream
//! with PyTorch hooks on transformers' decoder layers and puts it through the model's own
//! final norm and head: the tiny GPT-2, Llama (grouped-query attention, RoPE, separate head) and
//! Gemma 2 (final soft cap, tied head) fixtures, and real SmolLM2-135M (GGUF). Run in release;
//! `-- --nocapture` prints each case's largest difference.

use std::path::PathBuf;

use serde::Deserialize;

use attnviz::model::Model;
use attnviz::request::RunRequest;

use crate::support::models::smollm2::smollm2_gguf;

/// Probabilities: |Δ| ≤ TOL.
const TOL: f64 = 1e-4;

#[derive(Deserialize)]
struct File {
    top: usize,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    text: String,
    input_ids: Vec<u32>,
    stages: usize,
    /// `[stages][positions][top]`, most probable first.
    top_ids: Vec<Vec<Vec<u32>>>,
    top_probs: Vec<Vec<Vec<f64>>>,
}

fn reference() -> File {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/reference/lens.json");
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn model(name: &str) -> Model {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    match name {
        "smollm2" => Model::from_gguf(&smollm2_gguf()).unwrap(),
        tiny => Model::from_dir(&root.join("tests/fixtures").join(tiny)).unwrap(),
    }
}

/// Our top-k against the reference's (which keeps more tokens per cell): the i-th probability
/// equals the reference's i-th (whatever a near tie does to the order), and each of our tokens
/// has its reference probability wherever the reference kept it. The largest difference.
fn check(case: &Case, k: usize, top: usize) -> f64 {
    let model = model(&case.name);
    let run = RunRequest {
        lens: Some(k),
        ..RunRequest::new(case.text.clone())
    }
    .run(&model, &attnviz::progress::Silent)
    .unwrap();
    assert_eq!(
        run.set.primary().queries().ids,
        case.input_ids,
        "[{}] our tokens differ from the reference's",
        case.name
    );
    let lens = run.lens.expect("asked for");
    assert_eq!(lens.top.len(), case.stages, "[{}] stages", case.name);
    assert_eq!(lens.stages.first().map(String::as_str), Some("embeddings"));
    let mut worst = 0f64;
    for (s, (ours, (ids, probs))) in lens
        .top
        .iter()
        .zip(case.top_ids.iter().zip(&case.top_probs))
        .enumerate()
    {
        assert_eq!(ours.len(), ids.len(), "[{}] positions", case.name);
        for (p, (cell, (ids, probs))) in ours.iter().zip(ids.iter().zip(probs)).enumerate() {
            assert_eq!(cell.len(), k.min(top));
            for (i, t) in cell.iter().enumerate() {
                let d = (t.prob as f64 - probs[i]).abs();
                worst = worst.max(d);
                assert!(
                    d <= TOL,
                    "[{}] stage {s} position {p} rank {i}: {} vs {}",
                    case.name,
                    t.prob,
                    probs[i]
                );
                if let Some(r) = ids.iter().position(|&id| id == t.id) {
                    let d = (t.prob as f64 - probs[r]).abs();
                    worst = worst.max(d);
                    assert!(d <= TOL, "[{}] token {} at stage {s}", case.name, t.id);
                } else {
                    panic!(
                        "[{}] stage {s} position {p}: our token {} is not in the reference's top {top}",
                        case.name, t.id
                    );
                }
            }
            // The top token itself, unless the reference's first two are a near tie.
            if probs[0] - probs[1] > TOL {
                assert_eq!(
                    cell[0].id, ids[0],
                    "[{}] top-1 at stage {s}, {p}",
                    case.name
                );
            }
        }
    }
    worst
}

fn run_case(name: &str) {
    let file = reference();
    let case = file.cases.iter().find(|c| c.name == name).unwrap();
    let worst = check(case, 5, file.top);
    println!("{name}: largest |Δp| {worst:.2e}");
}

#[test]
fn tiny_gpt2_matches_the_hooks() {
    run_case("tiny-gpt2");
}

#[test]
fn tiny_llama_gqa_matches_the_hooks() {
    run_case("tiny-llama");
}

#[test]
fn tiny_gemma2_with_its_soft_cap_matches_the_hooks() {
    run_case("tiny-gemma2");
}

#[test]
fn smollm2_gguf_matches_the_hooks() {
    run_case("smollm2");
}

#[test]
fn the_last_stage_is_the_model_s_own_prediction() {
    // Independent of the lens pass: the next token generation picks (its own logits).
    let model = model("smollm2");
    let run = RunRequest {
        lens: Some(1),
        generate: Some(1),
        ..RunRequest::new("The capital of France is")
    }
    .run(&model, &attnviz::progress::Silent)
    .unwrap();
    let generated = run.generation.unwrap().generated()[0];
    let lens = run.lens.unwrap();
    let n = lens.positions.len();
    // The position before the generated token predicted it.
    assert_eq!(lens.top.last().unwrap()[n - 2][0].id, generated);
}

#[test]
fn a_sentence_encoder_without_a_head_is_refused_in_one_line() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let model = Model::from_dir(&root.join("tests/fixtures/tiny-bert")).unwrap();
    let err = RunRequest {
        lens: Some(5),
        ..RunRequest::new("the cat")
    }
    .run(&model, &attnviz::progress::Silent)
    .unwrap_err()
    .to_string();
    assert!(err.contains("is an encoder (BERT)"), "{err}");
    assert!(err.contains("does not read masked-LM heads yet"), "{err}");
    assert!(!err.contains('\n'), "{err}");
}
