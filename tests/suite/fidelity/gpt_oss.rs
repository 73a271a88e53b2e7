//! Fidelity of gpt-oss against Hugging Face transformers, on the tiny random checkpoint
//! `tests/reference/make_gpt_oss.py` made (eager attention and experts, float32; sliding and
//! full layers, YaRN, a clamped SwiGLU, 4 experts top-2): everything the other
//! mixture-of-experts decoders are held to (every layer and head, q/k, hidden state, logits,
//! greedy generation; every router's choices identical and weights within 1e-5), plus each
//! row's share on the learned sink (`1 − Σ row` of the captured attention) against the sink
//! column of transformers' softmax, at every layer, head and row, within [`ATTENTION_TOL`].
//!
//! `cargo test --release --test suite fidelity::gpt_oss -- --nocapture` prints max |Δ| per case.

use std::collections::HashMap;

use attnviz::model::Model;
use serde::Deserialize;

use super::decoders::check_decoder;
use super::families::FamilyReference;
use super::moe::check_router;
use super::reference::{fixture, ok, repo, MaxDiff, TensorRef, ATTENTION_TOL};

const LABEL: &str = "tiny-gpt_oss";

#[derive(Debug, Deserialize)]
struct Run {
    name: String,
    #[serde(default)]
    input_ids: Vec<u32>,
    #[serde(default)]
    sequence: Vec<u32>,
    tensors: HashMap<String, TensorRef>,
}

#[derive(Debug, Deserialize)]
struct Manifest {
    cases: Vec<Run>,
    generations: Vec<Run>,
}

fn manifest() -> Manifest {
    let path = repo().join(format!("tests/reference/{LABEL}.json"));
    let text = ok(std::fs::read_to_string(&path), path.display());
    ok(serde_json::from_str(&text), path.display())
}

/// Each row's sink share, `1 − Σ row` in f64, `[layers, heads, n]`, of `[layers, heads, n, n]`
/// probabilities.
fn sink_shares(weights: &[f32], n: usize) -> Vec<f32> {
    weights
        .chunks_exact(n)
        .map(|row| (1.0 - row.iter().map(|&p| p as f64).sum::<f64>()) as f32)
        .collect()
}

#[test]
fn tiny_gpt_oss_matches_hf() {
    check_decoder(LABEL, LABEL);
    check_router(LABEL, LABEL);
}

#[test]
fn tiny_gpt_oss_sinks_match_hf() {
    let m = manifest();
    let reference = FamilyReference::load(LABEL);
    let model = ok(Model::from_dir(&fixture(LABEL)), LABEL);
    let mut problems = Vec::new();
    let mut spread = (f32::INFINITY, 0f32);
    for run in m.cases.iter().chain(&m.generations) {
        let ids = if run.sequence.is_empty() {
            &run.input_ids
        } else {
            &run.sequence
        };
        let n = ids.len();
        let out = ok(model.forward(ids, &vec![0; n], false), &run.name);
        let ours = sink_shares(&out.weights, n);
        let want = reference.values(&run.tensors["sinks"]);
        for &s in &want {
            spread = (spread.0.min(s), spread.1.max(s));
        }
        let d = MaxDiff::of(&ours, &want);
        eprintln!(
            "[{LABEL}] {:<12} n={n:<3} sinks max |Δ| {:.2e}",
            run.name, d.value
        );
        if d.exceeds(ATTENTION_TOL) {
            problems.push(format!("{}: sinks max |Δ| {:.3e}", run.name, d.value));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // The fixture's sinks take from almost nothing to most of a row: a model that ignored them
    // (rows summing to 1) would be off by far more than the bound.
    assert!(spread.0 < 0.01 && spread.1 > 0.9, "sink shares {spread:?}");
}
