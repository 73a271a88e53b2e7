//! Fidelity of the encoder–decoder families (BART, mBART, T5, T5 v1.1, Marian) against Hugging
//! Face transformers, on the tiny random checkpoints `tests/reference/make_families.py` made
//! (eager attention, float32): for every teacher-forced case and every generation's re-run,
//! every layer and head of the encoder self-attention, the decoder self-attention (causal) and
//! the cross-attention (≤ 1e-5), both stacks' outputs and the logits (≤ 1e-4), the captured
//! query/key vectors; greedy generation with the KV cache gives transformers' tokens; and,
//! where the fixture ships a tokenizer.json, the source, the target's labels and the shifted
//! decoder input are tokenized as transformers tokenizes them.
//!
//! `cargo test --release --test suite fidelity::seq2seq -- --nocapture` prints max |Δ| per case.

use std::collections::HashMap;

use attnviz::model::encdec::{DecoderInput, Seq2SeqForward};
use attnviz::model::{family, EncodeOptions, Model};
use candle_core::Device;
use serde::Deserialize;

use super::reference::{
    fixture, ok, repo, weights_file, MaxDiff, TensorRef, ATTENTION_TOL, HIDDEN_TOL, QUERY_KEY_TOL,
};

/// Logits are sums over the hidden size; HF's own float32-vs-float64 gap is of this order.
const LOGITS_TOL: f32 = 1e-4;

#[derive(Debug, Deserialize)]
struct Case {
    name: String,
    text: String,
    tokens: Vec<String>,
    input_ids: Vec<u32>,
    #[serde(default)]
    target: Option<String>,
    #[serde(default)]
    labels: Option<Vec<u32>>,
    decoder_input_ids: Vec<u32>,
    decoder_tokens: Vec<String>,
    #[serde(default)]
    generated_ids: Option<Vec<u32>>,
    #[serde(default)]
    stopped_at_eos: Option<bool>,
    tensors: HashMap<String, TensorRef>,
}

#[derive(Debug, Deserialize)]
struct Manifest {
    tensors: String,
    cases: Vec<Case>,
    generations: Vec<Case>,
}

struct Reference {
    manifest: Manifest,
    tensors: HashMap<String, candle_core::Tensor>,
}

impl Reference {
    fn load(label: &str) -> Reference {
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

    fn values(&self, case: &Case, what: &str) -> Option<Vec<f32>> {
        let r = case.tensors.get(what)?;
        let t = &self.tensors[&r.tensor];
        assert_eq!(t.dims(), r.shape.as_slice(), "{}", r.tensor);
        Some(ok(
            t.flatten_all().and_then(|t| t.to_vec1::<f32>()),
            &r.tensor,
        ))
    }
}

/// Attention of `shape` `[layers, heads, queries, keys]`, row by row: the worst |Δ|, and a line
/// for every row over the tolerance naming its layer, head and query.
pub(super) fn compare_rows(
    ours: &[f32],
    theirs: &[f32],
    shape: &[usize],
    what: &str,
) -> (MaxDiff, Vec<String>) {
    assert_eq!(ours.len(), theirs.len(), "{what}: sizes differ");
    let (heads, queries, keys) = (shape[1], shape[2], shape[3]);
    let mut worst = MaxDiff::default();
    let mut failures = Vec::new();
    for (i, (a, b)) in ours.chunks(keys).zip(theirs.chunks(keys)).enumerate() {
        let d = MaxDiff::of(a, b);
        if d.exceeds(ATTENTION_TOL) {
            failures.push(format!(
                "{what} layer {} head {} query {}: max |Δ| {:.3e} at key {} (ours {}, HF {})",
                i / (heads * queries),
                (i / queries) % heads,
                i % queries,
                d.value,
                d.index,
                a[d.index],
                b[d.index]
            ));
        }
        worst = worst.max(MaxDiff {
            value: d.value,
            index: i * keys + d.index,
        });
    }
    (worst, failures)
}

fn compare_case(
    label: &str,
    reference: &Reference,
    case: &Case,
    out: &Seq2SeqForward,
    problems: &mut Vec<String>,
) {
    let (n, m) = (case.input_ids.len(), case.decoder_input_ids.len());
    let mut line = format!("[{label}] {:<12} n={n:<3} m={m:<3}", case.name);
    for (kind, forward) in [
        ("encoder", &out.encoder),
        ("decoder", &out.decoder),
        ("cross", &out.cross),
    ] {
        let want = reference
            .values(case, &format!("{kind}.attentions"))
            .unwrap_or_else(|| panic!("[{label}] {}: no {kind} attentions", case.name));
        let shape = &case.tensors[&format!("{kind}.attentions")].shape;
        let (d, lines) = compare_rows(&forward.weights, &want, shape, kind);
        line += &format!(" {kind} {:.1e}", d.value);
        problems.extend(
            lines
                .into_iter()
                .take(3)
                .map(|l| format!("[{label}] {} {l}", case.name)),
        );
        if let (Some(qk), Some(q), Some(k)) = (
            &forward.query_key,
            reference.values(case, &format!("{kind}.query")),
            reference.values(case, &format!("{kind}.key")),
        ) {
            let dq = MaxDiff::of(&qk.queries, &q);
            let dk = MaxDiff::of(&qk.keys, &k);
            line += &format!(" (q {:.1e} k {:.1e})", dq.value, dk.value);
            if dq.exceeds(QUERY_KEY_TOL) || dk.exceeds(QUERY_KEY_TOL) {
                problems.push(format!(
                    "[{label}] {} {kind} q/k: max |Δ| {:.3e}/{:.3e}",
                    case.name, dq.value, dk.value
                ));
            }
        }
    }
    for (kind, ours) in [
        ("encoder.hidden", &out.encoder.hidden),
        ("decoder.hidden", &out.decoder.hidden),
        ("logits", &out.logits),
    ] {
        let want = reference.values(case, kind).expect(kind);
        let d = MaxDiff::of(ours, &want);
        line += &format!(" {kind} {:.1e}", d.value);
        let tol = if kind == "logits" {
            LOGITS_TOL
        } else {
            HIDDEN_TOL
        };
        if d.exceeds(tol) {
            problems.push(format!(
                "[{label}] {} {kind}: max |Δ| {:.3e} > {tol:e}",
                case.name, d.value
            ));
        }
    }
    eprintln!("{line}");
}

/// Every case and generation of `tiny-<label>`, the network read as `attnviz::model::family`
/// reads it (Marian's fixture has no tokenizer.json, so this goes below `Model`).
fn check_network(label: &str) {
    let dir = fixture(label);
    let net = ok(
        family::load(&dir.join("config.json"), &[weights_file(&dir)]),
        label,
    );
    let s2s = net.seq2seq().expect("an encoder-decoder network");
    let reference = Reference::load(label);
    let eos: Vec<u32> = {
        let text = ok(
            std::fs::read_to_string(dir.join("generation_config.json")),
            "generation_config.json",
        );
        let v: serde_json::Value = ok(serde_json::from_str(&text), "generation_config.json");
        vec![v["eos_token_id"].as_u64().expect("eos_token_id") as u32]
    };
    let mut problems = Vec::new();
    let m = &reference.manifest;
    assert!(
        m.cases.len() >= 4 && m.generations.len() >= 3,
        "[{label}] references"
    );
    for case in m.cases.iter().chain(&m.generations) {
        let out = ok(
            s2s.forward_ids(&case.input_ids, &case.decoder_input_ids, true),
            &case.name,
        );
        compare_case(label, &reference, case, &out, &mut problems);
    }
    for g in &m.generations {
        let want = g.generated_ids.as_ref().expect("generated ids");
        let out = ok(
            s2s.greedy(&g.input_ids, want.len(), &eos, (None, None), &mut |_| {}),
            &g.name,
        );
        eprintln!(
            "[{label}] {:<12} generated {:?} (transformers {want:?})",
            g.name,
            out.generated()
        );
        if out.ids != g.decoder_input_ids {
            problems.push(format!(
                "[{label}] {}: generated {:?}, transformers {:?}",
                g.name, out.ids, g.decoder_input_ids
            ));
        }
        assert_eq!(
            Some(out.stopped_at_eos),
            g.stopped_at_eos,
            "[{label}] {}",
            g.name
        );
    }
    assert!(
        problems.is_empty(),
        "{} problem(s) against HF transformers:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// Through `Model`: the source, the target's labels and the decoder input tokenized as
/// transformers does, and `encode_seq2seq` gives the three kinds of attention of the
/// references, for a target and for a generation.
fn check_model(label: &str) {
    let model = ok(Model::from_dir(&fixture(label)), label);
    assert!(model.is_seq2seq());
    let reference = Reference::load(label);
    // The references cut long sources and targets to the tokenizer's 32 tokens.
    let opts = EncodeOptions {
        truncate: true,
        ..EncodeOptions::default()
    };
    let mut problems = Vec::new();
    for case in &reference.manifest.cases {
        let target = case.target.as_deref().expect("a target");
        let enc = ok(
            model.encode_seq2seq(&case.text, DecoderInput::Target(target), &opts, &mut |_| {}),
            &case.name,
        );
        let [encoder, decoder, cross] = &enc.attentions[..] else {
            panic!("three attentions")
        };
        assert_eq!(
            encoder.queries().ids,
            case.input_ids,
            "{label} {} source",
            case.name
        );
        assert_eq!(
            encoder.tokens(),
            case.tokens,
            "{label} {} source tokens",
            case.name
        );
        assert_eq!(
            enc.labels.as_ref(),
            case.labels.as_ref(),
            "{label} {} labels",
            case.name
        );
        assert_eq!(
            decoder.queries().ids,
            case.decoder_input_ids,
            "{label} {}",
            case.name
        );
        assert_eq!(
            decoder.tokens(),
            case.decoder_tokens,
            "{label} {}",
            case.name
        );
        assert_eq!(cross.queries().ids, case.decoder_input_ids);
        assert_eq!(cross.keys().ids, case.input_ids);
        assert_eq!(
            (
                encoder.kind.as_str(),
                decoder.kind.as_str(),
                cross.kind.as_str()
            ),
            ("encoder", "decoder", "cross")
        );
        assert_eq!(decoder.mask.as_str(), "causal");
        assert_eq!(cross.mask.as_str(), "bidirectional");
        let out = Seq2SeqForward {
            encoder: attnviz::model::Forward {
                weights: encoder.weights().to_vec(),
                hidden: enc.encoder_hidden.clone(),
                query_key: None,
                routing: Vec::new(),
            },
            decoder: attnviz::model::Forward {
                weights: decoder.weights().to_vec(),
                hidden: enc.decoder_hidden.clone(),
                query_key: None,
                routing: Vec::new(),
            },
            cross: attnviz::model::Forward {
                weights: cross.weights().to_vec(),
                hidden: Vec::new(),
                query_key: None,
                routing: Vec::new(),
            },
            logits: reference.values(case, "logits").expect("logits"),
        };
        compare_case(label, &reference, case, &out, &mut problems);
    }
    let g = &reference.manifest.generations[0];
    let want = g.generated_ids.as_ref().expect("generated ids");
    let enc = ok(
        model.encode_seq2seq(
            &g.text,
            DecoderInput::Generate(want.len()),
            &opts,
            &mut |_| {},
        ),
        &g.name,
    );
    let decoder = &enc.attentions[1];
    assert_eq!(
        decoder.queries().ids,
        g.decoder_input_ids,
        "{label} generation"
    );
    assert!(!decoder.queries().generated[0] && decoder.queries().generated[1..].iter().all(|&g| g));
    assert!(
        problems.is_empty(),
        "{} problem(s) against HF transformers:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn tiny_bart_matches_hf() {
    check_network("tiny-bart");
    check_model("tiny-bart");
}

#[test]
fn tiny_mbart_matches_hf() {
    check_network("tiny-mbart");
    check_model("tiny-mbart");
}

#[test]
fn tiny_t5_matches_hf() {
    check_network("tiny-t5");
    check_model("tiny-t5");
}

#[test]
fn tiny_t5_v1_1_matches_hf() {
    check_network("tiny-t5-v1_1");
    check_model("tiny-t5-v1_1");
}

#[test]
fn tiny_marian_matches_hf() {
    check_network("tiny-marian");
    // source.spm and target.spm through vocab.json, as MarianTokenizer.
    check_model("tiny-marian");
}

/// T5 v1.1 and Flan-T5 keep `lm_head.weight` apart from `shared.weight` and scale nothing
/// before it. transformers 5 builds every T5 tied (its T5Config forces
/// `tie_word_embeddings=True`), so the reference script gives the head weights of its own and
/// transformers loads them apart; this checks the fixture really holds two different matrices
/// (so `tiny_t5_v1_1_matches_hf` runs the untied head) and that the rescale tied T5 applies
/// would move the logits far past the tolerance (so that test would catch it).
#[test]
fn tiny_t5_v1_1_has_its_own_unscaled_head() {
    let dir = fixture("tiny-t5-v1_1");
    let tensors = ok(
        candle_core::safetensors::load(dir.join("model.safetensors"), &Device::Cpu),
        "tiny-t5-v1_1",
    );
    let matrix = |name: &str| {
        let t = tensors
            .get(name)
            .unwrap_or_else(|| panic!("{name} in the fixture"));
        ok(t.flatten_all().and_then(|t| t.to_vec1::<f32>()), name)
    };
    let (head, shared) = (matrix("lm_head.weight"), matrix("shared.weight"));
    assert_eq!(head.len(), shared.len());
    assert!(MaxDiff::of(&head, &shared).value > 0.1, "the head is tied");
    let config: serde_json::Value = ok(
        serde_json::from_str(&ok(
            std::fs::read_to_string(dir.join("config.json")),
            "config.json",
        )),
        "config.json",
    );
    assert_eq!(config["scale_decoder_outputs"], false);

    // The same checkpoint read as if the head were tied T5's (scaled by d_model^-0.5).
    let tmp = tempfile::tempdir().unwrap();
    let mut scaled = config.clone();
    scaled["scale_decoder_outputs"] = true.into();
    let config_path = tmp.path().join("config.json");
    std::fs::write(&config_path, scaled.to_string()).unwrap();
    let reference = Reference::load("tiny-t5-v1_1");
    let case = &reference.manifest.cases[0];
    let want = reference.values(case, "logits").expect("logits");
    let logits = |config: &std::path::Path| {
        let net = ok(family::load(config, &[weights_file(&dir)]), "tiny-t5-v1_1");
        let s2s = net.seq2seq().expect("an encoder-decoder network");
        ok(
            s2s.forward_ids(&case.input_ids, &case.decoder_input_ids, false),
            &case.name,
        )
        .logits
    };
    let right = MaxDiff::of(&logits(&dir.join("config.json")), &want).value;
    let wrong = MaxDiff::of(&logits(&config_path), &want).value;
    eprintln!("logits max |Δ|: unscaled {right:.1e}, scaled as tied T5 {wrong:.1e}");
    assert!(right <= LOGITS_TOL, "{right}");
    assert!(wrong > 100.0 * LOGITS_TOL, "{wrong}");
}
