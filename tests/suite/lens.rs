//! The logit lens against `tests/reference/make_lens.py`, which catches the residual stream
//! with PyTorch hooks on transformers' decoder layers and puts it through the model's own
//! final norm and head: the tiny GPT-2, Llama (grouped-query attention, RoPE, separate head) and
//! Gemma 2 (final soft cap, tied head) fixtures, and real SmolLM2-135M (GGUF). Encoders against
//! `tests/reference/make_mlm_lens.py`, which puts transformers' `output_hidden_states` through
//! each model's own masked-LM head module: the tiny BERT, RoBERTa, ALBERT, DistilBERT and
//! ELECTRA-generator masked LMs, and real rxnmapper (ALBERT). Run in release; `-- --nocapture`
//! prints each case's largest difference.

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

/// `tests/reference/mlm_lens.json`: the same cases under `models`.
#[derive(Deserialize)]
struct MlmFile {
    top: usize,
    models: Vec<Case>,
}

fn mlm_reference() -> MlmFile {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/reference/mlm_lens.json");
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
fn check(case: &Case, model: &Model, k: usize, top: usize) -> f64 {
    let run = RunRequest {
        lens: Some(k),
        ..RunRequest::new(case.text.clone())
    }
    .run(model, &attnviz::progress::Silent)
    .unwrap();
    assert_eq!(
        run.set.primary().queries().ids,
        case.input_ids,
        "[{}] our tokens differ from the reference's",
        case.name
    );
    let lens = run.measured.lens.expect("asked for");
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
    let worst = check(case, &model(name), 5, file.top);
    println!("{name}: largest |Δp| {worst:.2e}");
}

/// An encoder's lens through its masked-LM head, against `mlm_lens.json`.
fn run_mlm_case(name: &str) {
    let file = mlm_reference();
    let case = file.models.iter().find(|c| c.name == name).unwrap();
    let dir = match name {
        // Never skipped: a missing checkpoint fails with how to get it.
        "rxnmapper" => crate::support::models::rxnmapper::rxnmapper_dir(),
        tiny => PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(tiny),
    };
    let model = Model::from_dir(&dir).unwrap();
    // Every token the reference keeps, so that each of ours is checked against it.
    let worst = check(case, &model, file.top, file.top);
    println!("{name}: largest |Δp| {worst:.2e}");
}

#[test]
fn every_encoder_of_the_reference_is_tested() {
    let names: Vec<String> = mlm_reference().models.into_iter().map(|c| c.name).collect();
    assert_eq!(
        names,
        [
            "tiny-bert-mlm",
            "tiny-roberta-mlm",
            "tiny-albert-mlm",
            "tiny-distilbert-mlm",
            "tiny-electra-generator",
            "rxnmapper"
        ]
    );
}

#[test]
fn tiny_bert_masked_lm_head_matches_transformers() {
    run_mlm_case("tiny-bert-mlm");
}

#[test]
fn tiny_roberta_masked_lm_head_matches_transformers() {
    run_mlm_case("tiny-roberta-mlm");
}

#[test]
fn tiny_albert_masked_lm_head_matches_transformers() {
    run_mlm_case("tiny-albert-mlm");
}

#[test]
fn tiny_distilbert_masked_lm_head_matches_transformers() {
    run_mlm_case("tiny-distilbert-mlm");
}

#[test]
fn tiny_electra_generator_head_matches_transformers() {
    run_mlm_case("tiny-electra-generator");
}

#[test]
fn rxnmapper_albert_masked_lm_head_matches_transformers() {
    run_mlm_case("rxnmapper");
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
    let lens = run.measured.lens.unwrap();
    let n = lens.positions.len();
    // The position before the generated token predicted it.
    assert_eq!(lens.top.last().unwrap()[n - 2][0].id, generated);
}

fn lens_error(dir: &std::path::Path) -> String {
    let model = Model::from_dir(dir).unwrap();
    RunRequest {
        lens: Some(5),
        ..RunRequest::new("the cat")
    }
    .run(&model, &attnviz::progress::Silent)
    .unwrap_err()
    .to_string()
}

#[test]
fn a_bare_encoder_without_a_head_is_refused_in_one_line() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let err = lens_error(&root.join("tests/fixtures/tiny-bert"));
    assert!(
        err.contains("this checkpoint has no masked-LM head"),
        "{err}"
    );
    assert!(
        err.contains("BertForMaskedLM, e.g. bert-base-uncased"),
        "{err}"
    );
    assert!(!err.contains("language-model head"), "{err}");
    assert!(!err.contains('\n'), "{err}");
    // ELECTRA's discriminator has a head, but not a masked-LM one: the generator has.
    let err = lens_error(&root.join("tests/fixtures/tiny-electra-mlm"));
    assert!(
        err.contains("this checkpoint has no masked-LM head"),
        "{err}"
    );
    assert!(err.contains("electra-small-generator"), "{err}");
}

#[test]
fn minilm_sentence_encoder_has_no_masked_lm_head() {
    let err = lens_error(&crate::support::models::minilm::minilm_dir());
    assert!(
        err.starts_with("this checkpoint has no masked-LM head"),
        "{err}"
    );
    assert!(err.contains("all-MiniLM-L6-v2"), "{err}");
    assert!(err.contains("bert-base-uncased"), "{err}");
    assert!(!err.contains('\n') && !err.contains("--"), "{err}");
}

/// `tests/reference/make_transformer_lens.py`: the same lens from TransformerLens (its
/// residual stream cache, each stage through the bridge's own final norm and unembedding), a
/// second implementation beside the hooks.
fn transformer_lens_case(name: &str) {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/reference/transformer_lens.json");
    let file: File = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let case = file.cases.iter().find(|c| c.name == name).unwrap();
    let worst = check(case, &model(name), 5, file.top);
    println!("{name} against TransformerLens: largest |Δ| {worst:.2e}");
}

#[test]
fn tiny_gpt2_matches_transformer_lens() {
    transformer_lens_case("tiny-gpt2");
}

#[test]
fn tiny_llama_gqa_matches_transformer_lens() {
    transformer_lens_case("tiny-llama");
}
