//! Per-head direct logit attribution and head ablation against
//! `tests/reference/make_lens.py`, which catches each attention block's output-projection input
//! with PyTorch pre-hooks on transformers' modules (split by head, times that head's columns of
//! W_O, through the final norm frozen at the real residual, onto lm_head's row of the target),
//! and ablates a head by editing that input and running the model again: the tiny GPT-2 and
//! Llama (grouped-query attention) fixtures and real SmolLM2-135M (GGUF). Run in release;
//! `-- --nocapture` prints each case's largest difference.

use std::path::PathBuf;

use serde::Deserialize;

use attnviz::model::Model;

use crate::support::models::smollm2::smollm2_gguf;

/// |Δ| ≤ TOL · max(1, |reference|).
const TOL: f64 = 1e-4;

#[derive(Deserialize)]
struct File {
    attributions: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    text: String,
    input_ids: Vec<u32>,
    target: u32,
    contrast: u32,
    /// `[layers][heads]`.
    per_head: Vec<Vec<f64>>,
    per_head_diff: Vec<Vec<f64>>,
    logit: f64,
    base_log_prob: f64,
    ablate_zero: Vec<Vec<f64>>,
    ablate_mean: Vec<Vec<f64>>,
}

fn case(name: &str) -> Case {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/reference/lens.json");
    let file: File = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    file.attributions
        .into_iter()
        .find(|c| c.name == name)
        .unwrap()
}

fn model(name: &str) -> Model {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    match name {
        "smollm2" => Model::from_gguf(&smollm2_gguf()).unwrap(),
        tiny => Model::from_dir(&root.join("tests/fixtures").join(tiny)).unwrap(),
    }
}

/// The largest relative-above-1 difference, after asserting each within TOL.
fn compare(what: &str, ours: &[f32], want: &[Vec<f64>]) -> f64 {
    let want: Vec<f64> = want.iter().flatten().copied().collect();
    assert_eq!(ours.len(), want.len(), "{what}: shape");
    let mut worst = 0f64;
    for (i, (&o, &w)) in ours.iter().zip(&want).enumerate() {
        let d = (o as f64 - w).abs() / w.abs().max(1.0);
        assert!(d <= TOL, "{what}[{i}]: {o} vs {w}");
        worst = worst.max(d);
    }
    worst
}

fn attribution(name: &str) {
    let c = case(name);
    let model = model(name);
    // The default target is the model's own prediction, as the reference's.
    assert_eq!(model.predicted_next(&c.input_ids).unwrap(), c.target);
    let a = model
        .head_attribution(&c.input_ids, c.target, None)
        .unwrap();
    let worst = compare(&format!("{name} per head"), &a.per_head, &c.per_head);
    // Without a target, the same pass finds the prediction (the reference's target) itself.
    let own = model.head_attribution_of(&c.input_ids, None, None).unwrap();
    assert_eq!(own.target, c.target, "{name}: the prediction");
    compare(
        &format!("{name} per head, own target"),
        &own.per_head,
        &c.per_head,
    );
    let d = model
        .head_attribution(&c.input_ids, c.target, Some(c.contrast))
        .unwrap();
    let worst_diff = compare(&format!("{name} contrast"), &d.per_head, &c.per_head_diff);
    // The components add up to the logit of the whole residual, which is the model's.
    let sum = a.embeddings as f64
        + a.per_head.iter().map(|&v| v as f64).sum::<f64>()
        + a.rest.iter().map(|&v| v as f64).sum::<f64>()
        + a.norm_bias as f64;
    assert!(
        (sum - a.total as f64).abs() <= TOL * a.total.abs().max(1.0) as f64,
        "{name}: the parts sum to {sum}, the logit is {}",
        a.total
    );
    assert!(
        (a.total as f64 - c.logit).abs() <= TOL * c.logit.abs().max(1.0),
        "{name}: logit {} vs the reference's {}",
        a.total,
        c.logit
    );
    println!(
        "{name}: attribution {worst:.2e}, contrast {worst_diff:.2e}, Σ parts − logit {:.2e}",
        sum - a.total as f64
    );
}

fn ablation(name: &str) {
    let c = case(name);
    let model = model(name);
    let zero = model.head_ablation(&c.input_ids, c.target, false).unwrap();
    assert!((zero.base as f64 - c.base_log_prob).abs() <= TOL);
    let wz = compare(&format!("{name} zero"), &zero.delta, &c.ablate_zero);
    let mean = model.head_ablation(&c.input_ids, c.target, true).unwrap();
    let wm = compare(&format!("{name} mean"), &mean.delta, &c.ablate_mean);
    println!("{name}: ablation zero {wz:.2e}, mean {wm:.2e}");
}

#[test]
fn tiny_gpt2_attribution_matches_the_hooks() {
    attribution("tiny-gpt2");
}

#[test]
fn tiny_llama_gqa_attribution_matches_the_hooks() {
    attribution("tiny-llama");
}

#[test]
fn smollm2_attribution_matches_the_hooks() {
    attribution("smollm2");
}

#[test]
fn tiny_gpt2_ablation_matches_the_hooks() {
    ablation("tiny-gpt2");
}

#[test]
fn tiny_llama_gqa_ablation_matches_the_hooks() {
    ablation("tiny-llama");
}

#[test]
fn smollm2_ablation_matches_the_hooks() {
    ablation("smollm2");
}

/// The run request reads attribution from its own forward pass (each head's output kept at
/// the last position beside the capture, `EncodeOptions::head_outputs`), with no pass of its
/// own: the model's standalone pass above gives the same numbers, whatever else the run
/// captures (value terms, a choice of layers, generated tokens), on families with output
/// biases (GPT-2), grouped queries (Llama), a norm after attention (Gemma 2) and GGUF blocks.
#[test]
fn the_run_request_attributes_from_its_own_pass() {
    use attnviz::progress::Silent;
    use attnviz::request::RunRequest;
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    for name in [
        "tiny-gpt2",
        "tiny-llama",
        "tiny-gemma2",
        "gguf/tiny-llama.Q8_0.gguf",
    ] {
        let path = root.join(name);
        let model = if name.ends_with(".gguf") {
            Model::from_gguf(&path).unwrap()
        } else {
            Model::from_dir(&path).unwrap()
        };
        let plain = RunRequest {
            attribution: true,
            ..RunRequest::new("The cat sat on the mat because it")
        };
        for request in [
            plain.clone(),
            RunRequest {
                value_weighted: true,
                layers: Some(vec![0]),
                ..plain.clone()
            },
            RunRequest {
                generate: Some(3),
                ..plain.clone()
            },
        ] {
            let run = request.run(&model, &Silent).unwrap();
            let got = run.measured.head_attribution.expect("asked for");
            let ids = &run.set.primary().queries().ids;
            let want = model.head_attribution_of(ids, None, None).unwrap();
            assert_eq!(got.target.id, want.target, "{name}: the prediction");
            let close = |what: &str, a: &[f32], b: &[f32]| {
                assert_eq!(a.len(), b.len(), "{name} {what}");
                for (x, y) in a.iter().zip(b) {
                    assert!(
                        (x - y).abs() <= 1e-6 * y.abs().max(1.0),
                        "{name} {what}: {x} vs {y} ({request:?})"
                    );
                }
            };
            close("per head", &got.per_head.concat(), &want.per_head);
            close("rest", &got.rest, &want.rest);
            close(
                "embeddings, bias, total",
                &[got.embeddings, got.norm_bias, got.logit],
                &[want.embeddings, want.norm_bias, want.total],
            );
        }
    }
}

#[test]
fn an_encoder_is_refused_in_one_line() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let model = Model::from_dir(&root.join("tests/fixtures/tiny-bert")).unwrap();
    let err = model
        .head_attribution(&[1, 2], 1, None)
        .unwrap_err()
        .to_string();
    assert!(err.contains("is for decoders"), "{err}");
    assert!(!err.contains('\n'));
}

/// The CLI's JSON sections carry the library's numbers, which the hooks above check: the
/// default target (the model's prediction), each head's attribution and zero ablation.
#[test]
fn the_cli_json_sections_match_the_hooks() {
    let c = case("tiny-gpt2");
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    let png = dir.path().join("attribution.png");
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out = crate::support::cli::attnviz()
        .arg(&c.text)
        .arg("--model")
        .arg(root.join("tests/fixtures/tiny-gpt2"))
        .args(["--attribution", "--ablate", "--figure", "attribution", "-q"])
        .arg("--json")
        .arg(&json)
        .arg("--png")
        .arg(&png)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let ids: Vec<u32> = serde_json::from_value(doc["input_ids"].clone()).unwrap();
    assert_eq!(ids, c.input_ids);
    let a = &doc["head_attribution"];
    assert_eq!(a["target"]["id"], c.target);
    let per_head: Vec<Vec<f32>> = serde_json::from_value(a["per_head"].clone()).unwrap();
    let flat: Vec<f32> = per_head.into_iter().flatten().collect();
    compare("cli per head", &flat, &c.per_head);
    let b = &doc["head_ablation"];
    assert_eq!(b["mode"], "zero");
    let delta: Vec<Vec<f32>> = serde_json::from_value(b["delta"].clone()).unwrap();
    let flat: Vec<f32> = delta.into_iter().flatten().collect();
    compare("cli ablation", &flat, &c.ablate_zero);
    assert!(std::fs::read(&png).unwrap().starts_with(b"\x89PNG"));
}

/// A target the tokenizer splits is refused in one line that names it and its pieces.
#[test]
fn a_target_of_several_tokens_is_refused_in_one_line() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out = crate::support::cli::attnviz()
        .arg("the cat sat")
        .arg("--model")
        .arg(root.join("tests/fixtures/tiny-gpt2"))
        .args(["--target-token", "the cat sat on"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("--target-token \"the cat sat on\"") && err.contains("tokens"),
        "{err}"
    );
}

/// `tests/reference/make_transformer_lens.py`: TransformerLens's per-head direct logit
/// attribution (`stack_head_results` with the final norm frozen, onto the difference of two
/// tokens' residual directions), a second implementation beside the hooks. Its unembedding is
/// centred, which shifts each token's logit alike, so the logit difference is compared.
#[derive(Deserialize)]
struct LensFile {
    attributions: Vec<LensCase>,
}

#[derive(Deserialize)]
struct LensCase {
    name: String,
    input_ids: Vec<u32>,
    target: u32,
    contrast: u32,
    per_head_diff: Vec<Vec<f64>>,
}

fn transformer_lens_attribution(name: &str) {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/reference/transformer_lens.json");
    let file: LensFile = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let c = file.attributions.iter().find(|c| c.name == name).unwrap();
    let model = model(name);
    assert_eq!(model.predicted_next(&c.input_ids).unwrap(), c.target);
    let d = model
        .head_attribution(&c.input_ids, c.target, Some(c.contrast))
        .unwrap();
    let worst = compare(&format!("{name} contrast"), &d.per_head, &c.per_head_diff);
    println!("{name} against TransformerLens: contrast {worst:.2e}");
}

#[test]
fn tiny_gpt2_attribution_matches_transformer_lens() {
    transformer_lens_attribution("tiny-gpt2");
}

#[test]
fn tiny_llama_gqa_attribution_matches_transformer_lens() {
    transformer_lens_attribution("tiny-llama");
}
