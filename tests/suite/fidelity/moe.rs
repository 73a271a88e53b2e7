//! Fidelity of the mixture-of-experts decoders (Mixtral, Qwen3-MoE, OLMoE) against Hugging Face
//! transformers, on the tiny random checkpoints `tests/reference/make_moe.py` made (eager
//! attention and experts, float32): everything the dense decoders are held to
//! (`decoders::check_decoder`: every layer and head, q/k, hidden state, logits, greedy
//! generation), plus every routed layer's router decisions for every case and generation: the
//! chosen experts identical, in the same order, and their weights and the probabilities of all
//! experts within [`ROUTER_TOL`]. The script made sure no token's ranking has a near-tie.
//!
//! `cargo test --release --test suite fidelity::moe -- --nocapture` prints max |Δ| per case.

use std::collections::HashMap;

use attnviz::model::{EncodeOptions, Model};
use serde::Deserialize;

use super::decoders::check_decoder;
use super::families::FamilyReference;
use super::reference::{fixture, ok, repo, MaxDiff, TensorRef};

/// Router weights and probabilities: the bound.
pub(super) const ROUTER_TOL: f32 = 1e-5;

#[derive(Debug, Deserialize)]
struct RouterInfo {
    experts: usize,
    top_k: usize,
    norm_topk_prob: bool,
    routed_layers: Vec<usize>,
}

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
    router: RouterInfo,
    cases: Vec<Run>,
    generations: Vec<Run>,
}

/// Every case's and generation's router decisions against transformers'.
pub(super) fn check_router(folder: &str, label: &str) {
    let model = ok(Model::from_dir(&fixture(folder)), folder);
    check_router_of(&model, folder, label);
}

/// [`check_router`] for a model already loaded (`folder` names it in messages): from a GGUF
/// copy of the fixture too.
pub(super) fn check_router_of(model: &Model, folder: &str, label: &str) {
    let path = repo().join(format!("tests/reference/{label}.json"));
    let text = ok(std::fs::read_to_string(&path), path.display());
    let m: Manifest = ok(serde_json::from_str(&text), path.display());
    let reference = FamilyReference::load(label);
    let (e, k) = (m.router.experts, m.router.top_k);
    let mut problems = Vec::new();
    for run in m.cases.iter().chain(&m.generations) {
        let ids = if run.sequence.is_empty() {
            &run.input_ids
        } else {
            &run.sequence
        };
        let n = ids.len();
        let out = ok(model.forward(ids, &vec![0; n], false), &run.name);
        let layers: Vec<usize> = out.routing.iter().map(|(l, _)| *l).collect();
        assert_eq!(layers, m.router.routed_layers, "[{folder}] routed layers");
        let want_chosen = reference.values(&run.tensors["router.chosen"]);
        let want_weights = reference.values(&run.tensors["router.weights"]);
        let want_probs = reference.values(&run.tensors["router.probs"]);
        let (mut worst_w, mut worst_p) = (0f32, 0f32);
        for (i, (layer, r)) in out.routing.iter().enumerate() {
            assert_eq!((r.experts, r.top_k), (e, k), "[{folder}] router shape");
            assert_eq!(r.renormalised, m.router.norm_topk_prob, "[{folder}]");
            let chosen: Vec<f32> = r.chosen.iter().map(|&c| c as f32).collect();
            if chosen != want_chosen[i * n * k..][..n * k] {
                problems.push(format!(
                    "[{folder}] {} layer {layer}: chose {:?}, transformers {:?}",
                    run.name,
                    r.chosen,
                    &want_chosen[i * n * k..][..n * k]
                ));
            }
            let w = MaxDiff::of(&r.weights, &want_weights[i * n * k..][..n * k]);
            let p = MaxDiff::of(&r.probs, &want_probs[i * n * e..][..n * e]);
            worst_w = worst_w.max(w.value);
            worst_p = worst_p.max(p.value);
            if w.exceeds(ROUTER_TOL) || p.exceeds(ROUTER_TOL) {
                problems.push(format!(
                    "[{folder}] {} layer {layer}: weights max |Δ| {:.3e}, probabilities {:.3e}",
                    run.name, w.value, p.value
                ));
            }
        }
        eprintln!(
            "[{folder}] {:<12} n={n:<3} router weights max |Δ| {worst_w:.2e}; probabilities \
             {worst_p:.2e}",
            run.name
        );
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));

    // The captured attention carries the same decisions, labelled by its tokens.
    let case = &m.cases[0];
    let enc = ok(
        model.encode(
            &reference.cases[0].text,
            None,
            &EncodeOptions {
                truncate: true,
                ..EncodeOptions::default()
            },
        ),
        &case.name,
    );
    let router = enc.attention.router.as_ref().expect("a router capture");
    assert_eq!(router.tokens, reference.cases[0].tokens);
    let out = ok(
        model.forward(&case.input_ids, &vec![0; case.input_ids.len()], false),
        &case.name,
    );
    for ((layer, r), kept) in out.routing.iter().zip(&router.layers) {
        assert_eq!(kept.layer, *layer);
        assert_eq!(kept.chosen, r.chosen);
        assert_eq!(kept.weights, r.weights);
    }
}

#[test]
fn tiny_mixtral_matches_hf() {
    check_decoder("tiny-mixtral", "tiny-mixtral");
    check_router("tiny-mixtral", "tiny-mixtral");
}

#[test]
fn tiny_qwen3_moe_with_a_dense_layer_matches_hf() {
    check_decoder("tiny-qwen3_moe", "tiny-qwen3_moe");
    check_router("tiny-qwen3_moe", "tiny-qwen3_moe");
}

#[test]
fn tiny_qwen3_moe_with_merged_experts_matches_hf() {
    // transformers 5's in-memory layout (experts.gate_up_proj, experts.down_proj), same weights.
    check_decoder("tiny-qwen3_moe-merged", "tiny-qwen3_moe");
    check_router("tiny-qwen3_moe-merged", "tiny-qwen3_moe");
}

#[test]
fn tiny_olmoe_with_whole_projection_qk_norm_matches_hf() {
    check_decoder("tiny-olmoe", "tiny-olmoe");
    check_router("tiny-olmoe", "tiny-olmoe");
}

#[test]
fn dense_decoders_capture_no_router() {
    let model = ok(Model::from_dir(&fixture("tiny-qwen3")), "tiny-qwen3");
    let enc = ok(
        model.encode("The quick brown fox", None, &EncodeOptions::default()),
        "encode",
    );
    assert!(enc.attention.router.is_none());
}

/// The command line: the JSON's `router` section holds transformers' decisions, `render` reads
/// it back into the same terminal view, and the terminal shows each token's experts and the
/// load at the selected layer.
#[test]
fn the_router_reaches_the_json_and_the_terminal() {
    use crate::support::cli::run;
    let model = fixture("tiny-mixtral");
    let model = model.to_str().unwrap();
    let label = "tiny-mixtral";
    let path = repo().join(format!("tests/reference/{label}.json"));
    let m: Manifest = ok(
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()),
        path.display(),
    );
    let reference = FamilyReference::load(label);
    let case = &reference.cases[0];
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("moe.json");
    let out = run(&[
        "-m",
        model,
        &case.text,
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
    let router = &doc["router"];
    let (n, k) = (case.input_ids.len(), m.router.top_k);
    assert_eq!(router["experts"], m.router.experts);
    assert_eq!(router["tokens"].as_array().unwrap().len(), n);
    let want_chosen = reference.values(&m.cases[0].tensors["router.chosen"]);
    let want_weights = reference.values(&m.cases[0].tensors["router.weights"]);
    for (i, layer) in router["layers"].as_array().unwrap().iter().enumerate() {
        assert_eq!(layer["layer"], m.router.routed_layers[i]);
        let load: u64 = layer["load"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .sum();
        assert_eq!(load as usize, n * k);
        for t in 0..n {
            for r in 0..k {
                let at = i * n * k + t * k + r;
                assert_eq!(
                    layer["chosen"][t][r].as_f64().unwrap() as f32,
                    want_chosen[at]
                );
                let w = layer["weights"][t][r].as_f64().unwrap() as f32;
                assert!(
                    (w - want_weights[at]).abs() <= ROUTER_TOL,
                    "{w} vs {}",
                    want_weights[at]
                );
            }
        }
    }
    // The terminal view at layer 1, from the model and from the JSON read back.
    let view = run(&["-m", model, &case.text, "--layer", "1"]);
    assert!(
        view.status.success(),
        "{}",
        String::from_utf8_lossy(&view.stderr)
    );
    let text = String::from_utf8(view.stdout).unwrap();
    assert!(
        text.contains("Router · layer 1 · 8 experts, top 2"),
        "{text}"
    );
    assert!(text.contains("Expert load · layer 1"), "{text}");
    let first = &router["layers"][1]["chosen"][0];
    let line = format!("e{} ", first[0]);
    assert!(text.contains(&line), "{text}");
    let rendered = run(&["render", json.to_str().unwrap(), "--layer", "1"]);
    assert!(
        rendered.status.success(),
        "{}",
        String::from_utf8_lossy(&rendered.stderr)
    );
    let again = String::from_utf8(rendered.stdout).unwrap();
    let router_part = |s: &str| s[s.find("Router · ").unwrap()..].to_string();
    assert_eq!(router_part(&again), router_part(&text));
}

/// `--figure router`: the SVG writes each token's chosen weights at the layer asked for, as
/// transformers computed them (to the two decimals drawn); a dense layer, a dense model and no
/// image file are each refused in one line; a report folder holds `router.png`.
#[test]
fn the_router_figure_draws_transformers_choices() {
    use crate::support::cli::run;
    let label = "tiny-mixtral";
    let model = fixture(label);
    let model = model.to_str().unwrap();
    let path = repo().join(format!("tests/reference/{label}.json"));
    let m: Manifest = ok(
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()),
        path.display(),
    );
    let reference = FamilyReference::load(label);
    let case = &reference.cases[0];
    let tmp = tempfile::tempdir().unwrap();
    let svg = tmp.path().join("router.svg");
    let png = tmp.path().join("router.png");
    let out = run(&[
        "-m",
        model,
        &case.text,
        "--figure",
        "router",
        "--layer",
        "1",
        "--svg",
        svg.to_str().unwrap(),
        "--png",
        png.to_str().unwrap(),
        "-q",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(std::fs::read(&png).unwrap().starts_with(b"\x89PNG"));
    let text = std::fs::read_to_string(&svg).unwrap();
    let weights = reference.values(&m.cases[0].tensors["router.weights"]);
    let (n, k) = (case.input_ids.len(), m.router.top_k);
    let i = m.router.routed_layers.iter().position(|&l| l == 1).unwrap();
    let mut want: HashMap<String, usize> = HashMap::new();
    for w in &weights[i * n * k..(i + 1) * n * k] {
        // Each text on a line of its own.
        *want.entry(format!("\n{w:.2}\n")).or_default() += 1;
    }
    for (cell, count) in want {
        assert!(
            text.matches(&cell).count() >= count,
            "{cell} written {count} times in the SVG"
        );
    }
    // Refusals, one line each.
    let dense_layer = run(&[
        "-m",
        fixture("tiny-qwen3_moe").to_str().unwrap(),
        "The fox",
        "--figure",
        "router",
        "--layer",
        "1",
        "--png",
        png.to_str().unwrap(),
        "-q",
    ]);
    let err = String::from_utf8_lossy(&dense_layer.stderr);
    assert!(
        !dense_layer.status.success() && err.contains("layer 1 is dense"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let dense_model = run(&[
        "-m",
        fixture("tiny-llama").to_str().unwrap(),
        "The fox",
        "--figure",
        "router",
        "--png",
        png.to_str().unwrap(),
        "-q",
    ]);
    let err = String::from_utf8_lossy(&dense_model.stderr);
    assert!(
        !dense_model.status.success() && err.contains("has none"),
        "{err}"
    );
    let no_file = run(&["-m", model, "The fox", "--figure", "router"]);
    let err = String::from_utf8_lossy(&no_file.stderr);
    assert!(
        !no_file.status.success() && err.contains("--png and --svg"),
        "{err}"
    );
    // A report folder holds the router figure.
    let dir = tmp.path().join("report");
    let out = run(&[
        "-m",
        model,
        "The fox",
        "--report",
        dir.to_str().unwrap(),
        "-q",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(dir.join("router.png").is_file() && dir.join("router.svg").is_file());
}
