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

/// The captured value carries each row's sink share (transformers' sink column), the JSON
/// writes it as `sink_shares` and reads it back, and the terminal draws it after the keys and
/// names it in each row's list of strongest keys.
#[test]
fn sink_shares_reach_the_value_the_json_and_the_terminal() {
    use crate::support::cli::run;
    let m = manifest();
    let reference = FamilyReference::load(LABEL);
    let case = &reference.cases[0];
    let model = ok(Model::from_dir(&fixture(LABEL)), LABEL);
    let enc = ok(
        model.encode(&case.text, None, &attnviz::model::EncodeOptions::default()),
        &case.name,
    );
    let want = reference.values(&m.cases[0].tensors["sinks"]);
    let shares = enc.attention.sink_shares().expect("sink shares");
    let d = MaxDiff::of(shares, &want);
    assert!(
        !d.exceeds(ATTENTION_TOL),
        "sink shares max |Δ| {:.3e}",
        d.value
    );
    // Every row and its share sum to 1.
    let n = enc.attention.n_keys();
    for (row, s) in enc.attention.weights().chunks_exact(n).zip(shares) {
        let sum: f32 = row.iter().sum::<f32>() + s;
        assert!((sum - 1.0).abs() < 1e-5, "{sum}");
    }

    let path = fixture(LABEL);
    let path = path.to_str().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("sinks.json");
    let out = run(&[
        "-m",
        path,
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
    let written: Vec<f32> = doc["sink_shares"]
        .as_array()
        .expect("sink_shares")
        .iter()
        .flat_map(|l| l.as_array().unwrap().iter())
        .flat_map(|h| h.as_array().unwrap().iter())
        .map(|v| v.as_f64().unwrap() as f32)
        .collect();
    assert_eq!(written, shares);

    let view = run(&["-m", path, &case.text, "--layer", "1", "--head", "0"]);
    assert!(
        view.status.success(),
        "{}",
        String::from_utf8_lossy(&view.stderr)
    );
    let text = String::from_utf8(view.stdout).unwrap();
    assert!(text.contains("sink column: each row's share"), "{text}");
    assert!(text.contains("· sink "), "{text}");
    // Row 0's share at layer 1, head 0 (`[layers, heads, n]`), after the column's rule.
    let heads = enc.attention.heads();
    let first = shares[heads * case.input_ids.len()];
    assert!(
        text.contains(&format!(" {first:.3}\n")),
        "{first} in {text}"
    );
    let rendered = run(&[
        "render",
        json.to_str().unwrap(),
        "--layer",
        "1",
        "--head",
        "0",
    ]);
    assert!(
        rendered.status.success(),
        "{}",
        String::from_utf8_lossy(&rendered.stderr)
    );
    let again = String::from_utf8(rendered.stdout).unwrap();
    assert_eq!(again, text, "render reads the shares back");
}

/// The manifest of the MXFP4 and GGUF copies (`tests/reference/make_gpt_oss_mxfp4.py`).
const MXFP4: &str = "gpt_oss-mxfp4";

/// The experts in MXFP4 as the released checkpoints store them (`*_blocks`, `*_scales`), kept
/// 4-bit: attention at every layer and head, the sinks, the routers, logits and generation
/// against transformers on the dequantised weights (which transformers' own MXFP4 reader gives
/// too).
#[test]
fn mxfp4_safetensors_match_transformers_on_the_dequantised_weights() {
    super::gguf_moe::check(MXFP4, &["tiny-gpt_oss-mxfp4"]);
}

/// llama.cpp's `gpt-oss` GGUF files, F32, Q8_0 and MXFP4 experts, and Q6_K on a 256-wide random
/// gpt-oss (K-quant rows are 256 values, the tiny model's 32 or 64), each against transformers
/// on the weights gguf-py dequantises from it.
#[test]
fn gpt_oss_gguf_f32_q8_0_mxfp4_and_q6_k_match_transformers() {
    super::gguf_moe::check(MXFP4, &["tiny-gpt_oss.", "wide-gpt_oss."]);
}

/// The F32 GGUF holds the fixture's own weights: held to everything the safetensors are (q/k,
/// hidden state, logits, generation) and the same router decisions.
#[test]
fn gpt_oss_f32_gguf_matches_the_fixture_s_references() {
    let file = "tiny-gpt_oss.F32.gguf";
    super::decoders::check_gguf(file, LABEL);
    let model = ok(
        Model::from_gguf(&repo().join("tests/fixtures/gguf").join(file)),
        file,
    );
    super::moe::check_router_of(&model, file, LABEL);
}

/// The MXFP4 experts stay 4-bit: each expert a slice of 17-byte blocks of the merged tensor,
/// read in place; a truncated file and a mis-sized MXFP4 tensor in safetensors are refused in
/// one line naming the tensor.
#[test]
fn mxfp4_experts_stay_4_bit_and_bad_ones_are_refused() {
    use attnviz::model::gguf::GgufFile;
    let path = repo().join("tests/fixtures/gguf/tiny-gpt_oss.MXFP4.gguf");
    let file = ok(GgufFile::open(&path), "MXFP4 gguf");
    let info = file.tensor_info("blk.0.ffn_gate_exps.weight").unwrap();
    assert_eq!(
        (info.dtype, info.shape.as_slice()),
        ("MXFP4", &[4, 32, 64][..])
    );
    assert_eq!(info.bytes, 4 * 32 * 2 * 17);
    let slice = ok(file.stored_slice("blk.0.ffn_gate_exps.weight", 3), "slice");
    assert_eq!(
        slice.dtype(),
        attnviz::model::kernels::quant::QuantType::Mxfp4
    );
    assert_eq!(slice.bytes().len(), 32 * 2 * 17);
    assert_eq!(
        file.tensor_info("blk.0.attn_q.weight").unwrap().dtype,
        "F32"
    );

    // Truncated: the last tensor's bytes run past the end.
    let bytes = std::fs::read(&path).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let cut = tmp.path().join("cut.gguf");
    std::fs::write(&cut, &bytes[..bytes.len() - 100]).unwrap();
    let err = GgufFile::open(&cut).unwrap_err().to_string();
    assert!(err.contains("truncated") && !err.contains('\n'), "{err}");

    // A safetensors MXFP4 tensor of the wrong shape.
    let src = repo().join("tests/fixtures/tiny-gpt_oss-mxfp4");
    let dir = tmp.path().join("bad");
    std::fs::create_dir(&dir).unwrap();
    for entry in std::fs::read_dir(&src).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name() != "model.safetensors" {
            std::fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
        }
    }
    let device = candle_core::Device::Cpu;
    let mut tensors = ok(
        candle_core::safetensors::load(src.join("model.safetensors"), &device),
        "fixture",
    );
    let name = "model.layers.1.mlp.experts.down_proj_blocks";
    let short = ok(tensors[name].narrow(1, 0, 63), "narrow");
    tensors.insert(name.to_string(), ok(short.contiguous(), "contiguous"));
    ok(
        candle_core::safetensors::save(&tensors, dir.join("model.safetensors")),
        "save",
    );
    let err = Model::from_dir(&dir).err().expect("refused").to_string();
    assert!(err.contains(name) && !err.contains('\n'), "{err}");
}
