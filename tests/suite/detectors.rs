//! Head detectors (TransformerLens's head_detector: previous-token, duplicate-token and
//! induction scores, "mul" measure) against `tests/reference/make_detectors.py`, which ports
//! TransformerLens's detection patterns to numpy and applies them to transformers' attentions:
//! the tiny GPT-2, Llama (grouped-query attention, RoPE) and BERT (bidirectional: duplicates on
//! both sides) fixtures and real SmolLM2-135M (GGUF). The induction probe's token ids are
//! compared too: the reference rebuilds them from the documented rule. Run in release;
//! `-- --nocapture` prints each case's largest difference.

use std::path::PathBuf;

use serde::Deserialize;

use attnviz::analysis::{head_stats, StatsSection};
use attnviz::model::{EncodeOptions, Model};
use attnviz::request::induction_probe;

use crate::support::models::smollm2::smollm2_gguf;

const TOL: f64 = 1e-6;

#[derive(Deserialize)]
struct File {
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    text: String,
    input_ids: Vec<u32>,
    prev_token_score: Vec<Vec<f64>>,
    duplicate_token_score: Vec<Vec<f64>>,
    probe_ids: Vec<u32>,
    period: usize,
    induction_score: Vec<Vec<f64>>,
}

fn case(name: &str) -> Case {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/reference/detectors.json");
    let file: File = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    file.cases
        .into_iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no reference case {name}"))
}

fn model(name: &str) -> Model {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    match name {
        "smollm2" => Model::from_gguf(&smollm2_gguf()).unwrap(),
        tiny => Model::from_dir(&root.join("tests/fixtures").join(tiny)).unwrap(),
    }
}

fn largest(ours: &[Vec<f64>], want: &[Vec<f64>], what: &str, name: &str) -> f64 {
    assert_eq!(ours.len(), want.len(), "[{name}] {what}: layers");
    let mut worst = 0f64;
    for (l, (a, b)) in ours.iter().zip(want).enumerate() {
        assert_eq!(a.len(), b.len(), "[{name}] {what}: heads of layer {l}");
        for (h, (x, y)) in a.iter().zip(b).enumerate() {
            let d = (x - y).abs();
            assert!(
                d <= TOL,
                "[{name}] {what} layer {l} head {h}: {x} vs {y} (|Δ| {d:.2e} over {TOL:e})"
            );
            worst = worst.max(d);
        }
    }
    println!("[{name}] {what}: max |Δ| {worst:.2e}");
    worst
}

fn check(name: &str) {
    let case = case(name);
    let model = model(name);
    let enc = model
        .encode(&case.text, None, &EncodeOptions::default())
        .unwrap();
    let att = &enc.attention;
    assert_eq!(att.queries().ids, case.input_ids, "[{name}] tokens");
    // Through the JSON's section, as every surface reads them.
    let section = StatsSection::new(&head_stats(att));
    largest(
        &section.prev_token_score,
        &case.prev_token_score,
        "previous-token",
        name,
    );
    largest(
        &section.duplicate_token_score,
        &case.duplicate_token_score,
        "duplicate-token",
        name,
    );
    let probe = induction_probe(&model).unwrap().expect("a probe");
    assert_eq!(probe.input_ids, case.probe_ids, "[{name}] probe tokens");
    assert_eq!(probe.period, case.period, "[{name}] period");
    largest(&probe.score, &case.induction_score, "induction", name);
}

#[test]
fn tiny_gpt2_matches_transformer_lens_patterns() {
    check("tiny-gpt2");
}

#[test]
fn tiny_llama_with_grouped_query_attention_matches() {
    check("tiny-llama");
}

#[test]
fn tiny_bert_counts_duplicates_on_both_sides() {
    check("tiny-bert");
}

#[test]
fn smollm2_matches_and_has_an_induction_head() {
    check("smollm2");
    // A trained model has induction heads (Olsson et al. 2022): the reference finds one near the
    // pattern's ceiling of just under one half; random tiny models have none.
    let best = case("smollm2")
        .induction_score
        .iter()
        .flatten()
        .fold(0f64, |a, &b| a.max(b));
    assert!(best > 0.3, "SmolLM2's best induction score is {best}");
}

#[test]
fn encoder_decoders_get_no_probe() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let bart = Model::from_dir(&root.join("tests/fixtures/tiny-bart")).unwrap();
    assert!(induction_probe(&bart).unwrap().is_none());
}
