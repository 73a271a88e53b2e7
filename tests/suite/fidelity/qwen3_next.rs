//! Fidelity of Qwen3-Next against Hugging Face transformers, on the tiny random checkpoint
//! `tests/reference/make_qwen3_next.py` made (eager attention and experts, transformers' torch
//! fallbacks of the gated delta rule and the causal convolution, float32; layers linear, full,
//! linear, full; partial rotary; routed experts with a gated shared expert):
//!
//! - the full-attention layers' probabilities, every head and row, within [`ATTENTION_TOL`];
//! - the last hidden state within 1e-5, and every position's next-token logits within 1e-5 of
//!   the largest logit's magnitude (at least 1e-5);
//! - every router's choices identical and weights within 1e-5;
//! - each gated delta layer's token-mixing matrix: times the values transformers' rule read, it
//!   gives transformers' rule output (`torch_chunk_gated_delta_rule`) within 1e-5, and our own
//!   values and recurrence match transformers' within 1e-5 too.
//!
//! `cargo test --release --test suite fidelity::qwen3_next -- --nocapture` prints max |Δ| per case.
//!
//! The checks are shared with Qwen3.5's (`fidelity::qwen3_5`): [`matches_hf`] and
//! [`mixing_reproduces_hf`] take the fixture's label.

use std::collections::HashMap;

use attnviz::model::Model;
use candle_core::Device;
use serde::Deserialize;

use super::reference::{fixture, ok, repo, MaxDiff, TensorRef, ATTENTION_TOL};

const LABEL: &str = "tiny-qwen3_next";
/// The brief's bound on the hidden state, logits, router weights and the linear layers.
const TOL: f32 = 1e-5;

#[derive(Debug, Deserialize)]
struct Case {
    name: String,
    input_ids: Vec<u32>,
    tensors: HashMap<String, TensorRef>,
}

#[derive(Debug, Deserialize)]
struct Manifest {
    layer_types: Vec<String>,
    tensors: String,
    cases: Vec<Case>,
}

/// A hybrid model's references, as `make_qwen3_next.py` and `make_qwen3_5.py` write them.
pub(super) struct Reference {
    manifest: Manifest,
    tensors: HashMap<String, candle_core::Tensor>,
}

impl Reference {
    pub(super) fn load(label: &str) -> Reference {
        let dir = repo().join("tests/reference");
        let path = dir.join(format!("{label}.json"));
        let text = ok(std::fs::read_to_string(&path), path.display());
        let manifest: Manifest = ok(serde_json::from_str(&text), path.display());
        let tensors = ok(
            candle_core::safetensors::load(dir.join(&manifest.tensors), &Device::Cpu),
            &manifest.tensors,
        );
        Reference { manifest, tensors }
    }

    /// The model's layers of `kind` (`full_attention`, `linear_attention`).
    fn layers(&self, kind: &str) -> Vec<usize> {
        (0..self.manifest.layer_types.len())
            .filter(|&i| self.manifest.layer_types[i] == kind)
            .collect()
    }

    fn values(&self, case: &Case, key: &str) -> (Vec<f32>, Vec<usize>) {
        let what = &case.tensors[key];
        let t = &self.tensors[&what.tensor];
        assert_eq!(t.dims(), what.shape.as_slice(), "{}", what.tensor);
        let v = ok(
            t.flatten_all().and_then(|t| t.to_vec1::<f32>()),
            &what.tensor,
        );
        (v, what.shape.clone())
    }
}

fn check(label: &str, problems: &mut Vec<String>, what: String, d: MaxDiff, tol: f32) {
    eprintln!("[{label}] {what:<40} max |Δ| {:.2e}", d.value);
    if d.exceeds(tol) {
        problems.push(format!("{what}: max |Δ| {:.3e} > {tol:e}", d.value));
    }
}

#[test]
fn tiny_qwen3_next_matches_hf() {
    matches_hf(LABEL);
}

/// The same weights from llama.cpp's `qwen3next` GGUF file (`make_gguf_hybrid.py`: norms
/// stored as 1 + w, `in_proj_qkvz` split into `attn_qkv`/`attn_gate`, `ssm_a = -exp(A_log)`,
/// merged experts) against the safetensors fixture's transformers references.
#[test]
fn tiny_qwen3_next_f32_gguf_matches_hf() {
    let model = gguf_model(LABEL);
    model_matches_hf(LABEL, &model);
    model_mixing_reproduces_hf(LABEL, &model);
}

/// The token mixing of every gated delta layer read from the GGUF file is the safetensors
/// model's.
#[test]
fn qwen3_next_gguf_token_mixing_equals_the_safetensors_one() {
    gguf_token_mixing_equals_the_safetensors_one(LABEL);
}

/// The token mixing (matrix and rule output) of every gated delta layer of the F32 GGUF copy
/// of the fixture `label` (`tests/fixtures/gguf/<label>.F32.gguf`) is the safetensors model's,
/// within 1e-5.
pub(super) fn gguf_token_mixing_equals_the_safetensors_one(label: &'static str) {
    let reference = Reference::load(label);
    let gguf = gguf_model(label);
    let st = ok(Model::from_dir(&fixture(label)), label);
    let mut problems = Vec::new();
    for case in &reference.manifest.cases {
        let ours = ok(gguf.token_mixing(&case.input_ids), &case.name);
        let theirs = ok(st.token_mixing(&case.input_ids), &case.name);
        assert_eq!(ours.len(), theirs.len(), "gated delta layers");
        for (a, b) in ours.iter().zip(&theirs) {
            assert_eq!(
                (a.layer, a.heads, a.tokens, a.value_dim),
                (b.layer, b.heads, b.tokens, b.value_dim)
            );
            for (what, ours, theirs) in [
                ("mixing", &a.matrix, &b.matrix),
                ("output", &a.output, &b.output),
                ("values", &a.values, &b.values),
            ] {
                check(
                    label,
                    &mut problems,
                    format!("{} layer {} GGUF vs safetensors {what}", case.name, a.layer),
                    MaxDiff::of(ours, theirs),
                    TOL,
                );
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The F32 GGUF copy of the fixture `label`.
pub(super) fn gguf_model(label: &str) -> Model {
    let file = format!("{label}.F32.gguf");
    let path = repo().join("tests/fixtures/gguf").join(&file);
    ok(Model::from_gguf(&path), &file)
}

/// The full layers' attention, the hidden state, every position's logits and every router
/// against the references of the fixture `label`.
pub(super) fn matches_hf(label: &'static str) {
    model_matches_hf(label, &ok(Model::from_dir(&fixture(label)), label));
}

/// [`matches_hf`] for a model already loaded (from the fixture or its GGUF copy).
pub(super) fn model_matches_hf(label: &'static str, model: &Model) {
    let reference = Reference::load(label);
    let full = reference.layers("full_attention");
    assert_eq!(model.captured_layer_numbers(), Some(full.clone()));
    let mut problems = Vec::new();
    for case in &reference.manifest.cases {
        let ids = &case.input_ids;
        let n = ids.len();
        let out = ok(model.forward(ids, &vec![0; n], false), &case.name);
        let (want, shape) = reference.values(case, "attentions");
        assert_eq!(shape[0], full.len());
        check(
            label,
            &mut problems,
            format!("{} attention (full layers)", case.name),
            MaxDiff::of(&out.weights, &want),
            ATTENTION_TOL,
        );
        let (want, _) = reference.values(case, "hidden");
        check(
            label,
            &mut problems,
            format!("{} hidden", case.name),
            MaxDiff::of(&out.hidden, &want),
            TOL,
        );
        // Every position's next-token logits (each prefix run on its own).
        let (logits, shape) = reference.values(case, "logits");
        let vocab = shape[1];
        let mut worst = MaxDiff::default();
        for t in 0..n {
            let ours = ok(model.next_token_logits(&ids[..=t]), &case.name);
            worst = worst.max(MaxDiff::of(&ours, &logits[t * vocab..][..vocab]));
        }
        // f32 rounding grows with the logits' size (the tied head of Qwen3.5-MoE's fixture
        // reads embeddings of unit scale: logits up to 32): 1e-5 of the largest, at least 1e-5.
        let scale = logits.iter().fold(1f32, |m, x| m.max(x.abs()));
        check(
            label,
            &mut problems,
            format!("{} logits (largest {scale:.1})", case.name),
            worst,
            TOL * scale,
        );
        // Routers (Qwen3-Next's layer 1 is dense: mlp_only_layers; Qwen3.5 has none).
        if !case.tensors.contains_key("router_chosen") {
            assert!(out.routing.is_empty(), "{}: no router", case.name);
            continue;
        }
        let (chosen, shape) = reference.values(case, "router_chosen");
        let (weights, _) = reference.values(case, "router_weights");
        let k = shape[2];
        assert_eq!(out.routing.len(), shape[0], "routed layers");
        for (i, (layer, routing)) in out.routing.iter().enumerate() {
            let ours: Vec<f32> = routing.chosen.iter().map(|&e| e as f32).collect();
            assert_eq!(
                ours,
                chosen[i * n * k..][..n * k],
                "{} layer {layer}: chosen experts",
                case.name
            );
            check(
                label,
                &mut problems,
                format!("{} router weights layer {layer}", case.name),
                MaxDiff::of(&routing.weights, &weights[i * n * k..][..n * k]),
                TOL,
            );
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Each gated delta layer's token-mixing matrix reproduces transformers' rule output from
/// transformers' own values: the matrix is the map the layer applies, not an approximation.
#[test]
fn tiny_qwen3_next_gated_delta_mixing_reproduces_hf() {
    mixing_reproduces_hf(LABEL);
}

/// Each gated delta layer's values, recurrence and token-mixing matrix against the references
/// of the fixture `label` (and, where the script wrote it, its own matrix from the rule's
/// inputs).
pub(super) fn mixing_reproduces_hf(label: &'static str) {
    model_mixing_reproduces_hf(label, &ok(Model::from_dir(&fixture(label)), label));
}

/// [`mixing_reproduces_hf`] for a model already loaded (from the fixture or its GGUF copy).
pub(super) fn model_mixing_reproduces_hf(label: &'static str, model: &Model) {
    let reference = Reference::load(label);
    let linear = reference.layers("linear_attention");
    let mut problems = Vec::new();
    let mut negative = false;
    for case in &reference.manifest.cases {
        let ids = &case.input_ids;
        let n = ids.len();
        let mixing = ok(model.token_mixing(ids), &case.name);
        assert_eq!(
            mixing.iter().map(|m| m.layer).collect::<Vec<_>>(),
            linear,
            "gated delta layers"
        );
        let (values, shape) = reference.values(case, "values");
        let (core, _) = reference.values(case, "core");
        let (heads, dv) = (shape[1], shape[3]);
        let per_layer = heads * n * dv;
        for (i, m) in mixing.iter().enumerate() {
            assert_eq!((m.heads, m.tokens, m.value_dim), (heads, n, dv));
            assert_eq!(m.kind, "gated delta");
            let theirs_v = &values[i * per_layer..][..per_layer];
            let theirs_o = &core[i * per_layer..][..per_layer];
            check(
                label,
                &mut problems,
                format!("{} layer {} values", case.name, m.layer),
                MaxDiff::of(&m.values, theirs_v),
                TOL,
            );
            check(
                label,
                &mut problems,
                format!("{} layer {} recurrence", case.name, m.layer),
                MaxDiff::of(&m.output, theirs_o),
                TOL,
            );
            // The matrix times transformers' values, in f64.
            let mut mixed = vec![0f32; per_layer];
            for h in 0..heads {
                for t in 0..n {
                    for j in 0..dv {
                        let acc: f64 = (0..n)
                            .map(|s| {
                                m.matrix[(h * n + t) * n + s] as f64
                                    * theirs_v[(h * n + s) * dv + j] as f64
                            })
                            .sum();
                        mixed[(h * n + t) * dv + j] = acc as f32;
                    }
                    assert!(
                        m.matrix[(h * n + t) * n + t + 1..(h * n + t + 1) * n]
                            .iter()
                            .all(|&x| x == 0.0),
                        "causal"
                    );
                }
            }
            negative |= m.matrix.iter().any(|&x| x < 0.0);
            if case.tensors.contains_key("mixing") {
                let (theirs, _) = reference.values(case, "mixing");
                let per = heads * n * n;
                check(
                    label,
                    &mut problems,
                    format!("{} layer {} matrix", case.name, m.layer),
                    MaxDiff::of(&m.matrix, &theirs[i * per..][..per]),
                    TOL,
                );
            }
            check(
                label,
                &mut problems,
                format!("{} layer {} matrix × values", case.name, m.layer),
                MaxDiff::of(&mixed, theirs_o),
                TOL,
            );
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // Not a softmax: some weights are negative.
    assert!(negative, "no negative mixing weight");
}

/// The views number the captured layers as the model does (its full-attention layers) and say
/// plainly, in the terminal's and the PNG's titles, that the gated delta layers are token
/// mixing, not softmax, their matrices drawn apart.
#[test]
fn views_say_the_gated_delta_layers_are_not_softmax() {
    use crate::support::cli::run;
    let reference = Reference::load(LABEL);
    let case = &reference.manifest.cases[0];
    let path = fixture(LABEL);
    let path = path.to_str().unwrap();
    let model = ok(Model::from_dir(&fixture(LABEL)), LABEL);
    let enc = ok(
        model.encode(
            "The cat sat on the mat.",
            None,
            &attnviz::model::EncodeOptions::default(),
        ),
        &case.name,
    );
    assert_eq!(enc.attention.layer_numbers(), [1, 3]);
    let other = enc
        .attention
        .non_softmax
        .as_ref()
        .expect("gated delta layers");
    assert_eq!(
        (other.kind.as_str(), other.layers.as_slice()),
        ("gated delta", &[0, 2][..])
    );

    let view = run(&[
        "-m",
        path,
        "The cat sat on the mat.",
        "--layer",
        "3",
        "--head",
        "0",
    ]);
    assert!(
        view.status.success(),
        "{}",
        String::from_utf8_lossy(&view.stderr)
    );
    let text = String::from_utf8(view.stdout).unwrap();
    assert!(text.contains("layer 3 (1, 3)"), "{text}");
    assert!(
        text.contains("layers 0, 2 — gated delta: token mixing, not softmax, signed, drawn apart"),
        "{text}"
    );
    // The logit lens does not read the hybrid stack: refused saying so, not "no head".
    let lens = model
        .logit_lens(&[1, 2, 3], &[0, 0, 0], 3)
        .expect_err("the lens is refused")
        .to_string();
    assert!(
        lens.contains("does not read Qwen3-Next models yet") && lens.contains("gated delta"),
        "{lens}"
    );
    let cli = run(&["-m", path, "The cat sat on the mat.", "--lens"]);
    assert!(!cli.status.success());
    let err = String::from_utf8_lossy(&cli.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("Qwen3-Next"), "{err}");

    // A gated delta layer is not among the captured ones: refused in one line.
    let refused = run(&["-m", path, "The cat sat on the mat.", "--layer", "0"]);
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");

    let tmp = tempfile::tempdir().unwrap();
    let png = tmp.path().join("q.png");
    let out = run(&[
        "-m",
        path,
        "The cat sat on the mat.",
        "--layer",
        "3",
        "--head",
        "0",
        "--png",
        png.to_str().unwrap(),
        "-q",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(std::fs::metadata(&png).unwrap().len() > 0);
    if let Ok(keep) = std::env::var("ATTNVIZ_KEEP_PNG") {
        std::fs::copy(&png, keep).unwrap();
    }
}

/// The gated delta layers' token mixing flows through the captured value into the JSON: each
/// layer's matrices there (full precision) are the library's `Model::token_mixing` (checked
/// against transformers' rule in `tiny_qwen3_next_gated_delta_mixing_reproduces_hf`) within
/// 1e-6, under the legend that says they are not attention probabilities; `attnviz render` of
/// the saved JSON draws them (terminal, figure, HTML).
#[test]
fn the_json_holds_the_exact_mixing_and_render_draws_it() {
    use crate::support::cli::run;
    let path = fixture(LABEL);
    let text = "The quick brown fox jumps over the lazy dog";
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("q.json");
    let out = run(&[
        "-m",
        path.to_str().unwrap(),
        text,
        "--json",
        json.to_str().unwrap(),
        "--full-precision",
        "-q",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let ns = &doc["non_softmax"];
    assert_eq!(ns["kind"], "gated delta");
    assert_eq!(
        ns["legend"],
        "token mixing (gated delta), not attention probabilities"
    );
    let ids: Vec<u32> = doc["input_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as u32)
        .collect();
    let n = ids.len();
    let model = ok(Model::from_dir(&path), LABEL);
    let theirs = ok(model.token_mixing(&ids), "token_mixing");
    let layers = ns["mixing"]["layers"].as_array().unwrap();
    assert_eq!(
        layers.len(),
        theirs.len(),
        "one entry per gated delta layer"
    );
    assert_eq!(ns["mixing"]["heads"], theirs[0].heads);
    assert_eq!(ns["mixing"]["tokens"].as_array().unwrap().len(), n);
    let mut worst = 0f32;
    let mut negative = false;
    for (doc_layer, m) in layers.iter().zip(&theirs) {
        assert_eq!(doc_layer["layer"], m.layer);
        let flat: Vec<f32> = doc_layer["weights"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|h| h.as_array().unwrap())
            .flat_map(|row| row.as_array().unwrap())
            .map(|v| v.as_f64().unwrap() as f32)
            .collect();
        assert_eq!(flat.len(), m.heads * n * n);
        for (a, b) in flat.iter().zip(&m.matrix) {
            worst = worst.max((a - b).abs());
        }
        negative |= flat.iter().any(|&x| x < 0.0);
    }
    println!("JSON mixing vs Model::token_mixing: max |Δ| {worst:.2e}");
    assert!(worst <= 1e-6, "max |Δ| {worst}");
    assert!(negative, "signed: some weight is negative");

    // Render of the saved JSON: the terminal draws the layer feeding layer 3 under its legend.
    let shown = run(&["render", json.to_str().unwrap(), "--layer", "3"]);
    assert!(
        shown.status.success(),
        "{}",
        String::from_utf8_lossy(&shown.stderr)
    );
    let shown = String::from_utf8(shown.stdout).unwrap();
    assert!(
        shown.contains("Token mixing · layer 2 (gated delta)")
            && shown.contains("token mixing (gated delta), not attention probabilities"),
        "{shown}"
    );
    // The figure and the HTML report, from the file alone.
    let png = tmp.path().join("m.png");
    let html = tmp.path().join("m.html");
    let drawn = run(&[
        "render",
        json.to_str().unwrap(),
        "--figure",
        "mixing",
        "--png",
        png.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
        "-q",
    ]);
    assert!(
        drawn.status.success(),
        "{}",
        String::from_utf8_lossy(&drawn.stderr)
    );
    assert!(std::fs::metadata(&png).unwrap().len() > 0);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("\"legend\":\"token mixing (gated delta), not attention probabilities\""),
        "the report carries the mixing and its legend"
    );
    if let Ok(keep) = std::env::var("ATTNVIZ_KEEP_PNG") {
        std::fs::copy(&png, keep).unwrap();
    }
}

/// Statistics that assume probabilities leave the gated delta layers out and say so in one
/// line; the rollout is refused in one line; the captured value's matrices are the library's.
#[test]
fn probability_statistics_leave_the_mixing_layers_out() {
    use crate::support::cli::run;
    let path = fixture(LABEL);
    let p = path.to_str().unwrap();
    let stats = run(&["-m", p, "The cat sat on the mat.", "--stats"]);
    assert!(stats.status.success());
    let stats = String::from_utf8(stats.stdout).unwrap();
    assert!(
        stats.contains(
            "Statistics: layers 0, 2 (gated delta: token mixing, not probabilities) left out"
        ),
        "{stats}"
    );
    for rollout in [
        &["--json-include", "rollout", "--json", "-"][..],
        &["--figure", "rollout", "--png", "-"][..],
    ] {
        let mut args = vec!["-m", p, "The cat sat on the mat.", "-q"];
        args.extend_from_slice(rollout);
        let refused = run(&args);
        assert!(!refused.status.success(), "{rollout:?}");
        let err = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains("gated delta token mixing"), "{err}");
    }
    // The analysis crate's rollout of the hybrid value is empty, not a product of half a model.
    let model = ok(Model::from_dir(&path), LABEL);
    let enc = ok(
        model.encode(
            "The cat sat on the mat.",
            None,
            &attnviz::model::EncodeOptions::default(),
        ),
        LABEL,
    );
    assert!(attnviz::analysis::rollout(&enc.attention)
        .iter()
        .all(Vec::is_empty));
    let mixing = enc.attention.non_softmax.as_ref().unwrap().mixing.clone();
    let mixing = mixing.expect("every layer captured: the matrices are kept");
    let ids = &enc.attention.queries().ids;
    for (ours, lib) in mixing.layers.iter().zip(ok(model.token_mixing(ids), LABEL)) {
        assert_eq!(ours.layer, lib.layer);
        assert_eq!(MaxDiff::of(&ours.weights, &lib.matrix).value, 0.0);
    }
}

/// The memory estimate counts the mixing matrices: a budget the attention alone fits refuses
/// the run that keeps them too, saying so; the same budget with chosen layers (no mixing kept)
/// runs.
#[test]
fn the_memory_estimate_counts_the_mixing_matrices() {
    let model = ok(Model::from_dir(&fixture(LABEL)), LABEL);
    let text = "The cat sat on the mat.";
    let n = model
        .encode(text, None, &attnviz::model::EncodeOptions::default())
        .unwrap()
        .attention
        .len();
    let attention = model.capture_bytes(&[n], 2, false).unwrap();
    let (layers, heads) = model.mixing_shape().expect("a hybrid model");
    assert_eq!((layers, heads), (2, 4));
    let budget = attention + (layers * heads * n * n * 4) as u64 - 1;
    let err = model
        .encode(
            text,
            None,
            &attnviz::model::EncodeOptions {
                max_memory: Some(budget),
                ..Default::default()
            },
        )
        .expect_err("attention plus mixing is over the budget")
        .to_string();
    assert!(
        err.contains("and the token mixing of 2 layers × 4 heads"),
        "{err}"
    );
    let chosen = model.encode(
        text,
        None,
        &attnviz::model::EncodeOptions {
            max_memory: Some(budget),
            layers: Some(vec![1, 3]),
            ..Default::default()
        },
    );
    let chosen = ok(chosen, "chosen layers");
    assert!(chosen.attention.non_softmax.unwrap().mixing.is_none());
}
