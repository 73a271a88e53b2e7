//! GGUF files of the mixture-of-experts decoders (Mixtral as llama.cpp's `llama` with experts,
//! `qwen3moe`, `olmoe`): llama.cpp's merged expert tensors (`ffn_{gate,up,down}_exps`), each
//! expert a slice kept in its block format, through `Model::from_gguf`.
//!
//! The F32 copies of the tiny fixtures are held to everything their safetensors are
//! (`decoders::check_gguf` against `tests/reference/tiny-<name>.json`: every layer and head, q/k,
//! hidden state, logits, greedy generation) and to the same router decisions (`moe`'s checks).
//! Every file, F32, Q8_0 and Q6_K (256-wide random models, since K-quant rows are 256 values), is
//! held to transformers run on the weights gguf-py dequantises from that file
//! (`tests/reference/make_gguf_moe.py`, `gguf-moe.{json,safetensors}`): attention at every layer
//! and head within `ATTENTION_TOL` (1e-5), the chosen experts identical and in the same order,
//! their weights and every expert's probability within `ROUTER_TOL` (1e-5), the last position's
//! logits within 1e-4, and the same greedy generation.
//!
//! `cargo test --release --test suite fidelity::gguf_moe -- --nocapture` prints each gap.

use std::collections::HashMap;

use attnviz::model::Model;
use candle_core::quantized::gguf_file::{self, Value};
use candle_core::{Device, Tensor};
use serde::Deserialize;

use super::decoders::check_gguf;
use super::moe::{check_router_of, ROUTER_TOL};
use super::reference::{compare_attention, ok, repo, MaxDiff, ATTENTION_TOL};

/// Logits are sums over the hidden size; as for the safetensors decoders.
const LOGITS_TOL: f32 = 1e-4;

#[derive(Deserialize)]
struct Gap {
    attention: f32,
    logits: f32,
    same_experts: bool,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    text: String,
    input_ids: Vec<u32>,
    max_len: usize,
    truncate: bool,
    n: usize,
    sequence: Vec<u32>,
    routed_layers: usize,
    vs_f32: Option<Gap>,
}

#[derive(Deserialize)]
struct File {
    file: String,
    #[serde(rename = "type")]
    kind: String,
    experts: usize,
    top_k: usize,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Manifest {
    new_tokens: usize,
    files: Vec<File>,
}

/// The manifest `tests/reference/{stem}.json` and its tensors (`gguf-moe`, or
/// `make_gguf_hybrid.py`'s `gguf-hybrid` in the same format).
fn manifest(stem: &str) -> (Manifest, HashMap<String, Tensor>) {
    let dir = repo().join("tests/reference");
    let json = format!("{stem}.json");
    let text = ok(std::fs::read_to_string(dir.join(&json)), &json);
    let m: Manifest = ok(serde_json::from_str(&text), &json);
    let st = format!("{stem}.safetensors");
    let tensors = ok(
        candle_core::safetensors::load(dir.join(&st), &Device::Cpu),
        &st,
    );
    (m, tensors)
}

fn values(t: &HashMap<String, Tensor>, name: &str) -> Vec<f32> {
    let t = t.get(name).unwrap_or_else(|| panic!("no reference {name}"));
    ok(t.flatten_all().and_then(|t| t.to_vec1()), name)
}

/// Every file of the manifest `tests/reference/<stem>.json` whose name starts with one of
/// `prefixes` (a `.gguf` file under `tests/fixtures/gguf`, else a checkpoint folder under
/// `tests/fixtures`), against transformers on its dequantised weights; where the reference
/// holds each row's share on a learned sink (`<case>/sinks`), that too, within
/// `ATTENTION_TOL`.
pub(super) fn check(stem: &str, prefixes: &[&str]) {
    let (m, tensors) = manifest(stem);
    let mut problems = Vec::new();
    let mut checked = Vec::new();
    for f in m
        .files
        .iter()
        .filter(|f| prefixes.iter().any(|p| f.file.starts_with(p)))
    {
        let model = if f.file.ends_with(".gguf") {
            ok(
                Model::from_gguf(&repo().join("tests/fixtures/gguf").join(&f.file)),
                &f.file,
            )
        } else {
            ok(
                Model::from_dir(&repo().join("tests/fixtures").join(&f.file)),
                &f.file,
            )
        };
        let arch = model.architecture().clone();
        let (e, k) = (f.experts, f.top_k);
        for case in &f.cases {
            let what = format!("[{}] {}", f.file, case.name);
            let enc = ok(
                model
                    .tokenizer()
                    .encode(&case.text, None, case.max_len, case.truncate),
                &what,
            );
            if enc.ids != case.input_ids {
                problems.push(format!(
                    "{what}: token ids {:?}, transformers {:?}",
                    enc.ids, case.input_ids
                ));
            }
            let n = case.n;
            let out = ok(model.forward(&case.input_ids, &vec![0; n], false), &what);
            let key = format!("{}/{}", f.file, case.name);
            let want = values(&tensors, &format!("{key}/attentions"));
            let (d, lines) = compare_attention(&out.weights, &want, arch.layers, arch.heads, n);
            problems.extend(lines.into_iter().map(|l| format!("{what} {l}")));
            let mut sink_gap = String::new();
            if tensors.contains_key(&format!("{key}/sinks")) {
                // Each row's sink share: what its probabilities over the tokens leave.
                let ours: Vec<f32> = out
                    .weights
                    .chunks_exact(n)
                    .map(|row| (1.0 - row.iter().map(|&p| p as f64).sum::<f64>()) as f32)
                    .collect();
                let s = MaxDiff::of(&ours, &values(&tensors, &format!("{key}/sinks")));
                if s.exceeds(ATTENTION_TOL) {
                    problems.push(format!("{what} sinks max |Δ| {:.3e}", s.value));
                }
                sink_gap = format!("; sinks {:.2e}", s.value);
            }

            // The routers: the same experts in the same order, weights and probabilities close.
            let chosen = values(&tensors, &format!("{key}/router_chosen"));
            let weights = values(&tensors, &format!("{key}/router_weights"));
            let probs = values(&tensors, &format!("{key}/router_probs"));
            if out.routing.len() != case.routed_layers {
                problems.push(format!(
                    "{what}: {} routed layers, transformers {}",
                    out.routing.len(),
                    case.routed_layers
                ));
            }
            let (mut worst_w, mut worst_p) = (0f32, 0f32);
            for (i, (layer, r)) in out.routing.iter().enumerate().take(case.routed_layers) {
                assert_eq!((r.experts, r.top_k), (e, k), "{what}: router shape");
                let ours: Vec<f32> = r.chosen.iter().map(|&c| c as f32).collect();
                if ours != chosen[i * n * k..][..n * k] {
                    problems.push(format!(
                        "{what} layer {layer}: chose {:?}, transformers {:?}",
                        r.chosen,
                        &chosen[i * n * k..][..n * k]
                    ));
                }
                let w = MaxDiff::of(&r.weights, &weights[i * n * k..][..n * k]);
                let p = MaxDiff::of(&r.probs, &probs[i * n * e..][..n * e]);
                worst_w = worst_w.max(w.value);
                worst_p = worst_p.max(p.value);
                if w.exceeds(ROUTER_TOL) || p.exceeds(ROUTER_TOL) {
                    problems.push(format!(
                        "{what} layer {layer}: router weights max |Δ| {:.3e}, probabilities {:.3e}",
                        w.value, p.value
                    ));
                }
            }

            let logits = ok(model.next_token_logits(&case.input_ids), &what);
            let l = MaxDiff::of(&logits, &values(&tensors, &format!("{key}/logits")));
            if l.exceeds(LOGITS_TOL) {
                problems.push(format!("{what} logits max |Δ| {:.3e}", l.value));
            }
            let new = case.sequence.len() - n;
            assert!(new <= m.new_tokens, "{what}: generation length");
            let generated = if new == 0 {
                // No room left in the model's positions: transformers generated nothing either.
                case.input_ids.clone()
            } else {
                ok(model.generate(&case.input_ids, new, &mut |_| {}), &what).ids
            };
            if generated != case.sequence {
                problems.push(format!(
                    "{what}: generated {:?}, transformers {:?}",
                    &generated[n.min(generated.len())..],
                    &case.sequence[n..]
                ));
            }
            let gap = case.vs_f32.as_ref().map_or(String::new(), |g| {
                format!(
                    "; transformers {} vs F32: attention {:.2e}, logits {:.2e}, same experts {}",
                    f.kind, g.attention, g.logits, g.same_experts
                )
            });
            eprintln!(
                "{what:<34} n={n:<3} attention max |Δ| {:.2e}{sink_gap}; router weights \
                 {worst_w:.2e}, probabilities {worst_p:.2e}; logits {:.2e}{gap}",
                d.value, l.value
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

/// The F32 copy of a tiny fixture against the fixture's own transformers references: the dense
/// decoders' checks and the router decisions of every case and generation.
pub(super) fn check_f32(file: &str, label: &str) {
    check_gguf(file, label);
    let path = repo().join("tests/fixtures/gguf").join(file);
    let model = ok(Model::from_gguf(&path), file);
    check_router_of(&model, file, label);
}

#[test]
fn mixtral_gguf_as_llama_with_experts_matches_transformers() {
    // `llama` with llama.expert_count: q/k permuted, the top-2 renormalised.
    check_f32("tiny-mixtral.F32.gguf", "tiny-mixtral");
    check("gguf-moe", &["tiny-mixtral.", "wide-mixtral."]);
}

#[test]
fn qwen3_moe_gguf_with_a_dense_layer_matches_transformers() {
    // `qwen3moe`: per-head q/k norms, expert_feed_forward_length 32 beside a dense layer of 48.
    check_f32("tiny-qwen3_moe.F32.gguf", "tiny-qwen3_moe");
    check("gguf-moe", &["tiny-qwen3_moe.", "wide-qwen3_moe."]);
}

#[test]
fn olmoe_gguf_matches_transformers() {
    // `olmoe`: q/k norms over the whole projections, the top-2 not renormalised.
    check_f32("tiny-olmoe.F32.gguf", "tiny-olmoe");
    check("gguf-moe", &["tiny-olmoe.", "wide-olmoe."]);
}

#[test]
fn experts_stay_in_their_block_format() {
    // The merged expert tensors are read in place, one slice per expert: nothing dequantised.
    use attnviz::model::gguf::GgufFile;
    let path = repo().join("tests/fixtures/gguf/tiny-olmoe.Q8_0.gguf");
    let file = ok(GgufFile::open(&path), "tiny-olmoe.Q8_0.gguf");
    let info = file.tensor_info("blk.0.ffn_down_exps.weight").unwrap();
    assert_eq!(
        (info.dtype, info.shape.as_slice()),
        ("Q8_0", &[8, 64, 32][..])
    );
    let whole = ok(
        file.dequantize_as_stored("blk.0.ffn_down_exps.weight"),
        "dequantize",
    );
    for e in [0, 5, 7] {
        let slice = ok(file.stored_slice("blk.0.ffn_down_exps.weight", e), "slice");
        assert_eq!(slice.dtype(), candle_core::quantized::GgmlDType::Q8_0);
        assert_eq!(slice.bytes().len(), info.bytes / 8);
        let mut rows = vec![0f32; 64 * 32];
        slice.matrix().dequantize_rows(0, &mut rows);
        assert_eq!(rows, whole.data[e * 64 * 32..][..64 * 32]);
    }
    let err = file
        .stored_slice("blk.0.ffn_down_exps.weight", 8)
        .unwrap_err()
        .to_string();
    assert!(err.contains("expert 8 does not exist"), "{err}");
    let err = file
        .stored_slice("blk.0.attn_q.weight", 0)
        .unwrap_err()
        .to_string();
    assert!(err.contains("not one matrix per expert"), "{err}");
}

/// Fixture `gguf/{name}` rewritten with candle's writer (tensors copied as they are) after
/// `edit` changed its metadata; the error `Model::from_gguf` gives for it.
pub(super) fn load_edited(name: &str, edit: impl FnOnce(&mut Vec<(String, Value)>)) -> String {
    load_edited_keeping(name, edit, |_| true)
}

/// [`load_edited`], with only the tensors `keep` names copied.
pub(super) fn load_edited_keeping(
    name: &str,
    edit: impl FnOnce(&mut Vec<(String, Value)>),
    keep: impl Fn(&str) -> bool,
) -> String {
    let src = repo().join("tests/fixtures/gguf").join(name);
    let mut file = std::fs::File::open(&src).unwrap();
    let content = gguf_file::Content::read(&mut file).unwrap();
    let mut metadata: Vec<(String, Value)> = content.metadata.clone().into_iter().collect();
    metadata.sort_by(|a, b| a.0.cmp(&b.0));
    edit(&mut metadata);
    let mut names: Vec<&String> = content.tensor_infos.keys().filter(|n| keep(n)).collect();
    names.sort();
    let tensors: Vec<(String, candle_core::quantized::QTensor)> = names
        .iter()
        .map(|n| {
            (
                (*n).clone(),
                content.tensor(&mut file, n, &Device::Cpu).unwrap(),
            )
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("edited.gguf");
    let mut out = std::fs::File::create(&path).unwrap();
    let md: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let ts: Vec<(&str, &candle_core::quantized::QTensor)> =
        tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    gguf_file::write(&mut out, &md, &ts).unwrap();
    drop(out);
    match Model::from_gguf(&path) {
        Ok(_) => String::new(),
        Err(e) => e.to_string(),
    }
}

pub(super) fn set(metadata: &mut Vec<(String, Value)>, key: &str, value: Value) {
    metadata.retain(|(k, _)| k != key);
    metadata.push((key.to_string(), value));
}

#[test]
fn expert_metadata_that_cannot_be_run_is_one_clear_line() {
    // The rewrite itself keeps the file usable, so each refusal below is its edit's.
    assert_eq!(load_edited("tiny-olmoe.Q8_0.gguf", |_| {}), "");
    type Edit = fn(&mut Vec<(String, Value)>);
    let cases: [(&str, Edit, &[&str]); 5] = [
        (
            "tiny-olmoe.Q8_0.gguf",
            |md| set(md, "olmoe.expert_used_count", Value::U32(9)),
            &["olmoe.expert_used_count is 9, more than the 8 experts"],
        ),
        (
            "tiny-olmoe.Q8_0.gguf",
            |md| md.retain(|(k, _)| k != "olmoe.expert_count"),
            &["olmoe.expert_count is missing or 0", "routed experts"],
        ),
        (
            "tiny-qwen3_moe.Q8_0.gguf",
            |md| set(md, "qwen3moe.expert_count", Value::U32(1 << 30)),
            &["qwen3moe.expert_count is 1073741824, implausibly large"],
        ),
        (
            // More experts than the merged tensors hold: the router's shape says so first.
            "tiny-mixtral.Q8_0.gguf",
            |md| set(md, "llama.expert_count", Value::U32(9)),
            &["block_sparse_moe.gate.weight has shape [8, 64], expected [9, 64]"],
        ),
        (
            // Experts wider than stored: the slice's shape is named.
            "tiny-qwen3_moe.Q8_0.gguf",
            |md| set(md, "qwen3moe.expert_feed_forward_length", Value::U32(64)),
            &["mlp.experts.0.gate_proj.weight has shape [8, 32, 64], expected [8, 64, 64]"],
        ),
    ];
    for (file, edit, says) in cases {
        let err = load_edited(file, edit);
        assert!(!err.is_empty(), "{file}: loaded");
        assert!(!err.contains('\n'), "{err}");
        for s in says {
            assert!(err.contains(s), "expected `{s}` in: {err}");
        }
    }
}

/// The command line on a quantised GGUF file: the JSON's `router` section holds transformers'
/// decisions on the file's dequantised weights.
#[test]
fn a_gguf_file_s_router_reaches_the_json() {
    use crate::support::cli::run;
    let (m, tensors) = manifest("gguf-moe");
    let f = m
        .files
        .iter()
        .find(|f| f.file == "tiny-qwen3_moe.Q8_0.gguf")
        .expect("the file in the manifest");
    let case = &f.cases[0];
    let path = repo().join("tests/fixtures/gguf").join(&f.file);
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("moe.json");
    let out = run(&[
        "-m",
        path.to_str().unwrap(),
        &case.text,
        "--json",
        json.to_str().unwrap(),
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
    let (n, k) = (case.n, f.top_k);
    assert_eq!(router["experts"], f.experts);
    let layers = router["layers"].as_array().unwrap();
    // Layers 0 and 2 route; layer 1 is dense.
    let numbers: Vec<u64> = layers
        .iter()
        .map(|l| l["layer"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, [0, 2]);
    let want = values(&tensors, &format!("{}/{}/router_chosen", f.file, case.name));
    for (i, layer) in layers.iter().enumerate() {
        for t in 0..n {
            for r in 0..k {
                assert_eq!(
                    layer["chosen"][t][r].as_f64().unwrap() as f32,
                    want[i * n * k + t * k + r],
                    "layer {i} token {t}"
                );
            }
        }
    }
}
