//! Fidelity of Whisper against Hugging Face transformers, on the tiny random checkpoint
//! `tests/reference/make_whisper.py` made (eager attention, float32) and the log-mel features it
//! recorded: every layer and head of the encoder self-attention, the decoder self-attention and
//! the cross-attention (≤ 1e-5), both stacks' outputs (≤ 1e-4) and the logits (≤ 1e-4), for a
//! teacher-forced input and for the re-run of each of transformers' generations.
//!
//! `cargo test --release --test suite fidelity::whisper -- --nocapture` prints max |Δ| per case.

use std::collections::HashMap;

use attnviz::model::encdec::Seq2SeqForward;
use attnviz::model::family;
use candle_core::Device;
use serde::Deserialize;

use super::reference::{fixture, ok, repo, weights_file, MaxDiff, TensorRef, HIDDEN_TOL};
use super::seq2seq::compare_rows;

const LOGITS_TOL: f32 = 1e-4;

#[derive(Debug, Deserialize)]
pub(super) struct Case {
    pub name: String,
    #[serde(default)]
    pub decoder_input_ids: Option<Vec<u32>>,
    #[serde(default)]
    pub generated_ids: Option<Vec<u32>>,
    #[serde(default)]
    pub prompt_len: Option<usize>,
    #[serde(default)]
    pub timestamps: Option<bool>,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub stopped_at_eos: Option<bool>,
    pub tensors: HashMap<String, TensorRef>,
}

impl Case {
    pub fn ids(&self) -> &[u32] {
        self.decoder_input_ids
            .as_deref()
            .or(self.generated_ids.as_deref())
            .expect("decoder ids")
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct Word {
    pub word: String,
    pub tokens: Vec<u32>,
    pub start_frame: usize,
    pub end_frame: usize,
}

#[derive(Debug, Deserialize)]
pub(super) struct Timing {
    pub name: String,
    pub heads: Vec<[usize; 2]>,
    pub frames: usize,
    pub words: Vec<Word>,
}

#[derive(Debug, Deserialize)]
pub(super) struct WordTimings {
    pub decoder_input_ids: Vec<u32>,
    pub text_ids: Vec<u32>,
    pub cases: Vec<Timing>,
}

#[derive(Debug, Deserialize)]
pub(super) struct Manifest {
    tensors: String,
    pub prompt: Vec<u32>,
    pub eot: u32,
    pub cases: Vec<Case>,
    pub generations: Vec<Case>,
    pub word_timings: WordTimings,
}

pub(super) struct Reference {
    pub manifest: Manifest,
    tensors: HashMap<String, candle_core::Tensor>,
}

impl Reference {
    pub fn load() -> Reference {
        let dir = repo().join("tests/reference");
        let path = dir.join("tiny-whisper.json");
        let text = ok(std::fs::read_to_string(&path), path.display());
        let manifest: Manifest = ok(serde_json::from_str(&text), path.display());
        let tensors = ok(
            candle_core::safetensors::load(dir.join(&manifest.tensors), &Device::Cpu),
            &manifest.tensors,
        );
        Reference { manifest, tensors }
    }

    pub fn tensor(&self, name: &str) -> Vec<f32> {
        ok(
            self.tensors[name]
                .flatten_all()
                .and_then(|t| t.to_vec1::<f32>()),
            name,
        )
    }

    pub fn features(&self) -> Vec<f32> {
        self.tensor("features")
    }
}

/// Every kind the case recorded (the generations leave the encoder's out: it is the
/// teacher-forced case's), the hidden states and the logits.
fn compare(reference: &Reference, case: &Case, out: &Seq2SeqForward, problems: &mut Vec<String>) {
    let mut line = format!("[tiny-whisper] {:<10} m={:<3}", case.name, case.ids().len());
    for (kind, forward) in [
        ("encoder", &out.encoder),
        ("decoder", &out.decoder),
        ("cross", &out.cross),
    ] {
        let key = format!("{kind}.attentions");
        let Some(r) = case.tensors.get(&key) else {
            continue;
        };
        let want = reference.tensor(&r.tensor);
        let (d, lines) = compare_rows(&forward.weights, &want, &r.shape, kind);
        line += &format!(" {kind} {:.1e}", d.value);
        problems.extend(
            lines
                .into_iter()
                .take(3)
                .map(|l| format!("{} {l}", case.name)),
        );
    }
    for (kind, ours, tol) in [
        ("encoder.hidden", &out.encoder.hidden, HIDDEN_TOL),
        ("decoder.hidden", &out.decoder.hidden, HIDDEN_TOL),
        ("logits", &out.logits, LOGITS_TOL),
    ] {
        let Some(r) = case.tensors.get(kind) else {
            continue;
        };
        let d = MaxDiff::of(ours, &reference.tensor(&r.tensor));
        line += &format!(" {kind} {:.1e}", d.value);
        if d.exceeds(tol) {
            problems.push(format!(
                "{} {kind}: max |Δ| {:.3e} > {tol:e}",
                case.name, d.value
            ));
        }
    }
    eprintln!("{line}");
}

#[test]
fn tiny_whisper_network_matches_transformers() {
    let dir = fixture("tiny-whisper");
    let net = ok(
        family::load(&dir.join("config.json"), &[weights_file(&dir)]),
        "tiny-whisper",
    );
    let speech = net.speech().expect("Whisper reads speech");
    assert_eq!((speech.mel_bins(), speech.window_frames()), (80, 300));
    let reference = Reference::load();
    let features = reference.features();
    let m = &reference.manifest;
    assert_eq!(m.generations.len(), 2);
    let mut problems = Vec::new();
    for case in m.cases.iter().chain(&m.generations) {
        let out = ok(
            speech.forward_features(&features, case.ids(), false),
            &case.name,
        );
        compare(&reference, case, &out, &mut problems);
    }
    assert!(
        problems.is_empty(),
        "{} problem(s) against transformers:\n{}",
        problems.len(),
        problems.join("\n")
    );
}
