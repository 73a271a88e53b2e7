//! GGUF files of the tiny Gemma 2, Gemma 3, Phi-3, Qwen3 and Llama models in F32, Q8_0 and Q6_K
//! (`tests/fixtures/gguf/*.{F32,Q8_0,Q6_K}.gguf`, llama.cpp's layout), through
//! `Model::from_gguf` with the matrices kept in their block format, against transformers loading
//! the same file (`tests/reference/make_gguf_quantized.py`): every layer and head within
//! `ATTENTION_TOL` (1e-5) and the last position's logits within 1e-4, for the quantised files too,
//! since transformers runs on the dequantised weights and attnviz decodes the same blocks. What
//! the quantisation itself moves (transformers on the quantised file against the F32 one) is in
//! the manifest as `vs_f32` and printed beside, not held to a bound.
//!
//! `cargo test --release --test suite fidelity::gguf_quantized -- --nocapture` prints each gap.

use std::collections::HashMap;

use attnviz::model::Model;
use candle_core::{Device, Tensor};
use serde::Deserialize;

use super::reference::{compare_attention, ok, repo, MaxDiff};

/// Logits are sums over the hidden size; as for the safetensors decoders.
const LOGITS_TOL: f32 = 1e-4;

#[derive(Deserialize)]
struct Gap {
    attention: f32,
    logits: f32,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    text: String,
    input_ids: Vec<u32>,
    n: usize,
    vs_f32: Option<Gap>,
}

#[derive(Deserialize)]
struct File {
    file: String,
    #[serde(rename = "type")]
    kind: String,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Manifest {
    files: Vec<File>,
}

fn manifest() -> (Manifest, HashMap<String, Tensor>) {
    let dir = repo().join("tests/reference");
    let text = ok(
        std::fs::read_to_string(dir.join("gguf-quantized.json")),
        "gguf-quantized.json",
    );
    let m: Manifest = ok(serde_json::from_str(&text), "gguf-quantized.json");
    let tensors = ok(
        candle_core::safetensors::load(dir.join("gguf-quantized.safetensors"), &Device::Cpu),
        "gguf-quantized.safetensors",
    );
    (m, tensors)
}

fn values(t: &HashMap<String, Tensor>, name: &str) -> Vec<f32> {
    let t = t.get(name).unwrap_or_else(|| panic!("no reference {name}"));
    ok(t.flatten_all().and_then(|t| t.to_vec1()), name)
}

/// Every file whose name starts with one of `prefixes`, against its reference.
fn check(prefixes: &[&str]) {
    let (m, tensors) = manifest();
    let mut problems = Vec::new();
    let mut checked = Vec::new();
    for f in m
        .files
        .iter()
        .filter(|f| prefixes.iter().any(|p| f.file.starts_with(p)))
    {
        let path = repo().join("tests/fixtures/gguf").join(&f.file);
        let model = ok(Model::from_gguf(&path), &f.file);
        let arch = model.architecture().clone();
        for case in &f.cases {
            let what = format!("[{}] {}", f.file, case.name);
            let enc = ok(
                model.tokenizer().encode(&case.text, None, 512, false),
                &what,
            );
            if enc.ids != case.input_ids {
                problems.push(format!(
                    "{what}: token ids {:?}, transformers {:?}",
                    enc.ids, case.input_ids
                ));
            }
            let out = ok(
                model.forward(&case.input_ids, &vec![0; case.n], false),
                &what,
            );
            let key = format!("{}/{}", f.file, case.name);
            let want = values(&tensors, &format!("{key}/attentions"));
            let (d, lines) =
                compare_attention(&out.weights, &want, arch.layers, arch.heads, case.n);
            problems.extend(lines.into_iter().map(|l| format!("{what} {l}")));
            let logits = ok(model.next_token_logits(&case.input_ids), &what);
            let l = MaxDiff::of(&logits, &values(&tensors, &format!("{key}/logits")));
            if l.exceeds(LOGITS_TOL) {
                problems.push(format!("{what} logits max |Δ| {:.3e}", l.value));
            }
            let gap = case.vs_f32.as_ref().map_or(String::new(), |g| {
                format!(
                    "; transformers {} vs F32: attention {:.2e}, logits {:.2e}",
                    f.kind, g.attention, g.logits
                )
            });
            eprintln!(
                "{what:<32} n={:<3} attention max |Δ| {:.2e}; logits {:.2e}{gap}",
                case.n, d.value, l.value
            );
        }
        checked.push(f.file.clone());
    }
    assert!(
        !checked.is_empty(),
        "no reference file matches {prefixes:?}"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn gemma2_gguf_f32_q8_0_q6_k_match_transformers() {
    // Soft-capped scores and logits, sliding layers (window 5) before global ones, norms stored
    // plus one.
    check(&["tiny-gemma2.", "wide-gemma2."]);
}

#[test]
fn gemma3_gguf_f32_q8_0_q6_k_match_transformers() {
    // Five sliding layers to one global, q/k norms, linear scaling on the global layers.
    check(&["tiny-gemma3.", "wide-gemma3."]);
}

#[test]
fn phi3_gguf_f32_q8_0_q6_k_match_transformers() {
    // Fused attn_qkv and ffn_up, half of each head rotated, LongRoPE's short factors on the short
    // input and its long ones past original_context_length 16, a sliding window of 12.
    check(&["tiny-phi3.", "wide-phi3."]);
}

#[test]
fn qwen3_and_llama_gguf_q8_0_q6_k_match_transformers() {
    check(&[
        "tiny-qwen3-128.",
        "tiny-llama.",
        "wide-qwen3.",
        "wide-llama.",
    ]);
}
