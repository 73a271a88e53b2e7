//! Fidelity of the decoder families (GPT-2, Llama, Qwen2, Mistral) against Hugging Face
//! transformers, on the tiny random checkpoints `tests/reference/make_families.py` made (eager
//! attention, float32): everything `families::check_fixture` checks for encoders (every layer
//! and head under the causal mask, the last hidden state, q/k after the rotary embedding, a padded
//! batch, the tokenizer), plus the logits at the last position and greedy generation with the KV
//! cache: the same 16 tokens as `model.generate`, and the attention over prompt + generated
//! tokens.
//!
//! `cargo test --release --test suite fidelity::decoders -- --nocapture` prints max |Δ| per case.

use std::collections::HashMap;

use attnviz::model::Model;
use serde::Deserialize;

use super::families::{check_fixture, FamilyReference};
use super::reference::{
    compare_attention, fixture, layer_head_pos, ok, MaxDiff, TensorRef, ATTENTION_TOL, HIDDEN_TOL,
};

/// Logits are sums over the hidden size: HF's own float32-vs-float64 gap reaches 4e-5 on these
/// models (README), so they get a looser bound than the attention.
const LOGITS_TOL: f32 = 1e-4;

#[derive(Debug, Deserialize)]
struct GenerationCase {
    name: String,
    input_ids: Vec<u32>,
    generated_ids: Vec<u32>,
    sequence: Vec<u32>,
    stopped_at_eos: bool,
    tensors: HashMap<String, TensorRef>,
}

#[derive(Debug, Deserialize)]
struct Generations {
    generations: Vec<GenerationCase>,
}

fn generations(label: &str) -> Vec<GenerationCase> {
    let path = super::reference::repo().join(format!("tests/reference/{label}.json"));
    let text = ok(std::fs::read_to_string(&path), path.display());
    let g: Generations = ok(serde_json::from_str(&text), path.display());
    g.generations
}

/// Everything for one decoder fixture; panics listing every mismatch.
fn check_decoder(folder: &str, label: &str) {
    check_fixture(folder, label);
    let reference = FamilyReference::load(label);
    let model = ok(Model::from_dir(&fixture(folder)), folder);
    let arch = model.architecture().clone();
    let mut problems = Vec::new();

    for case in &reference.cases {
        let Some(want) = case.tensors.get("logits").map(|t| reference.values(t)) else {
            continue;
        };
        let logits = ok(model.next_token_logits(&case.input_ids), &case.name);
        let d = MaxDiff::of(&logits, &want);
        eprintln!(
            "[{folder}] {:<12} logits max |Δ| {:.2e} (token {})",
            case.name, d.value, d.index
        );
        if d.exceeds(LOGITS_TOL) {
            problems.push(format!(
                "[{folder}] {} logits: max |Δ| {:.3e} > {LOGITS_TOL:e} at token {}",
                case.name, d.value, d.index
            ));
        }
    }

    let gens = generations(label);
    assert!(gens.len() >= 3, "[{label}] three generation prompts");
    for g in &gens {
        let new = g.generated_ids.len();
        let out = ok(
            model.generate(&g.input_ids, new, &mut |_| {}),
            format!("[{folder}] {}: generate", g.name),
        );
        eprintln!(
            "[{folder}] {:<12} generated {:?} (transformers {:?})",
            g.name,
            out.generated(),
            g.generated_ids
        );
        if out.ids != g.sequence {
            problems.push(format!(
                "[{folder}] {}: generated {:?}, transformers {:?}",
                g.name,
                out.generated(),
                g.generated_ids
            ));
        }
        assert_eq!(
            out.stopped_at_eos, g.stopped_at_eos,
            "[{folder}] {}",
            g.name
        );
        // The attention over prompt + generated tokens, from one pass over the whole sequence.
        let n = g.sequence.len();
        let fwd = ok(
            model.forward(&g.sequence, &vec![0; n], false),
            format!("[{folder}] {}: forward", g.name),
        );
        let want = reference.values(&g.tensors["attentions"]);
        let (d, lines) = compare_attention(&fwd.weights, &want, arch.layers, arch.heads, n);
        eprintln!(
            "[{folder}] {:<12} n={n:<3} attention over prompt + generated max |Δ| {:.2e} ({})",
            g.name,
            d.value,
            layer_head_pos(d.index, arch.heads, n, n).replace("component", "key")
        );
        problems.extend(
            lines
                .into_iter()
                .map(|l| format!("[{folder}] {} {l}", g.name)),
        );
        let hidden = MaxDiff::of(&fwd.hidden, &reference.values(&g.tensors["hidden"]));
        if hidden.exceeds(HIDDEN_TOL) {
            problems.push(format!(
                "[{folder}] {} hidden: max |Δ| {:.3e}",
                g.name, hidden.value
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "{} problem(s) against HF transformers (attention tolerance {ATTENTION_TOL:e}):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn tiny_gpt2_matches_hf() {
    check_decoder("tiny-gpt2", "tiny-gpt2");
}

#[test]
fn tiny_gpt2_without_prefix_matches_hf() {
    // GPT2Model's keys without `transformer.`, as the hub's gpt2 stores them.
    check_decoder("tiny-gpt2-bare", "tiny-gpt2");
}

#[test]
fn tiny_llama_with_gqa_and_linear_rope_matches_hf() {
    check_decoder("tiny-llama", "tiny-llama");
}

#[test]
fn tiny_llama_tied_with_llama3_rope_matches_hf() {
    check_decoder("tiny-llama-tied", "tiny-llama-tied");
}

#[test]
fn tiny_qwen2_with_qkv_bias_matches_hf() {
    check_decoder("tiny-qwen2", "tiny-qwen2");
}

#[test]
fn tiny_mistral_multi_query_matches_hf() {
    check_decoder("tiny-mistral", "tiny-mistral");
}
