//! Reading the reference outputs that `tests/reference/make_reference.py` wrote with Hugging Face
//! transformers, and comparing our numbers with them.

use std::collections::HashMap;
use std::fmt::Display;
use std::path::{Path, PathBuf};

use candle_core::{Device, Tensor};
use serde::Deserialize;

/// Largest |Δ| allowed between our attention probabilities and HF's (issue 2, requirement 6).
pub const ATTENTION_TOL: f32 = 1e-5;
/// Largest |Δ| allowed between our last hidden state and HF's (issue 2, requirement 6).
pub const HIDDEN_TOL: f32 = 1e-4;
/// Largest |Δ| allowed for the captured query/key vectors: like the hidden state, they are
/// projections of LayerNorm outputs, so they get the hidden state's tolerance.
pub const QUERY_KEY_TOL: f32 = 1e-4;

pub use crate::support::cli::{fixture, repo};

/// Unwraps a result whose error only promises `Display` (the engine's and candle's errors alike).
pub fn ok<T, E: Display>(result: Result<T, E>, what: impl Display) -> T {
    match result {
        Ok(value) => value,
        Err(err) => panic!("{what}: {err}"),
    }
}

pub use crate::support::models::minilm::minilm_dir;

/// One tensor named in a manifest.
#[derive(Debug, Deserialize)]
pub struct TensorRef {
    pub tensor: String,
    pub shape: Vec<usize>,
}

/// HF's tokenization of one input, and (for forward cases) the names of its reference tensors.
#[derive(Debug, Deserialize)]
pub struct Case {
    pub name: String,
    pub text: String,
    pub pair: Option<String>,
    pub max_len: usize,
    pub truncate: bool,
    pub untruncated_len: usize,
    pub tokens: Vec<String>,
    pub input_ids: Vec<u32>,
    pub token_type_ids: Vec<u32>,
    pub special_tokens_mask: Vec<u8>,
    pub word_ids: Vec<Option<usize>>,
    #[serde(default)]
    pub n: usize,
    pub attentions: Option<TensorRef>,
    pub hidden: Option<TensorRef>,
    pub query: Option<TensorRef>,
    pub key: Option<TensorRef>,
}

/// The model shape the references were made with.
#[derive(Debug, Deserialize)]
pub struct ConfigSummary {
    pub layers: usize,
    pub heads: usize,
    pub hidden_size: usize,
    pub head_dim: usize,
    pub max_position_embeddings: usize,
}

#[derive(Debug, Deserialize)]
struct Manifest {
    config: ConfigSummary,
    versions: HashMap<String, String>,
    tensors: String,
    cases: Vec<Case>,
    tokenize_only: Vec<Case>,
}

/// A reference set: `tests/reference/<label>.json` and the tensors in `<label>.safetensors`.
pub struct Reference {
    pub label: String,
    pub config: ConfigSummary,
    /// Cases with a forward pass (attentions, hidden state, maybe query/key).
    pub cases: Vec<Case>,
    /// Cases with only HF's tokenization (long inputs truncated at the model's limit).
    pub tokenize_only: Vec<Case>,
    tensors: HashMap<String, Tensor>,
}

impl Reference {
    /// Loads `tests/reference/<label>.json` and its tensors.
    pub fn load(label: &str) -> Reference {
        let dir = repo().join("tests/reference");
        let json_path = dir.join(format!("{label}.json"));
        let text = ok(std::fs::read_to_string(&json_path), json_path.display());
        let manifest: Manifest = ok(serde_json::from_str(&text), json_path.display());
        let tensor_path = dir.join(&manifest.tensors);
        let tensors = ok(
            candle_core::safetensors::load(&tensor_path, &Device::Cpu),
            tensor_path.display(),
        );
        eprintln!(
            "[{label}] references from torch {} / transformers {}",
            manifest.versions.get("torch").map_or("?", String::as_str),
            manifest
                .versions
                .get("transformers")
                .map_or("?", String::as_str),
        );
        Reference {
            label: label.to_string(),
            config: manifest.config,
            cases: manifest.cases,
            tokenize_only: manifest.tokenize_only,
            tensors,
        }
    }

    /// The flattened f32 values of a tensor named by a manifest, checked against its shape.
    pub fn values(&self, what: &TensorRef) -> Vec<f32> {
        let tensor = self
            .tensors
            .get(&what.tensor)
            .unwrap_or_else(|| panic!("{}: no tensor {}", self.label, what.tensor));
        assert_eq!(tensor.dims(), what.shape.as_slice(), "{}", what.tensor);
        ok(
            tensor.flatten_all().and_then(|t| t.to_vec1::<f32>()),
            &what.tensor,
        )
    }
}

/// The largest |Δ| between two tensors and where it is. NaN counts as infinitely far.
#[derive(Clone, Copy, Debug, Default)]
pub struct MaxDiff {
    pub value: f32,
    pub index: usize,
}

impl MaxDiff {
    pub fn of(ours: &[f32], theirs: &[f32]) -> MaxDiff {
        assert_eq!(ours.len(), theirs.len(), "tensor sizes differ");
        let mut worst = MaxDiff::default();
        for (index, (a, b)) in ours.iter().zip(theirs).enumerate() {
            let d = (a - b).abs();
            let d = if d.is_nan() { f32::INFINITY } else { d };
            if d > worst.value {
                worst = MaxDiff { value: d, index };
            }
        }
        worst
    }

    /// Whether the difference is over `tol` (never NaN: [`MaxDiff::of`] maps NaN to infinity).
    pub fn exceeds(self, tol: f32) -> bool {
        self.value > tol
    }

    pub fn max(self, other: MaxDiff) -> MaxDiff {
        if other.value > self.value {
            other
        } else {
            self
        }
    }
}

/// Compares attention `[layers, heads, n, n]` head by head. Returns the overall worst |Δ| and, for
/// every head over the tolerance, a line naming layer, head, query and key positions.
pub fn compare_attention(
    ours: &[f32],
    theirs: &[f32],
    layers: usize,
    heads: usize,
    n: usize,
) -> (MaxDiff, Vec<String>) {
    assert_eq!(
        ours.len(),
        layers * heads * n * n,
        "attention has {} values, expected layers {layers} × heads {heads} × {n} × {n}",
        ours.len()
    );
    let mut worst = MaxDiff::default();
    let mut failures = Vec::new();
    let block = n * n;
    for layer in 0..layers {
        for head in 0..heads {
            let start = (layer * heads + head) * block;
            let d = MaxDiff::of(&ours[start..start + block], &theirs[start..start + block]);
            if d.exceeds(ATTENTION_TOL) {
                let (q, k) = (d.index / n, d.index % n);
                failures.push(format!(
                    "layer {layer} head {head}: max |Δ| {:.3e} at query {q} key {k} (ours {}, HF {})",
                    d.value,
                    ours[start + d.index],
                    theirs[start + d.index]
                ));
            }
            worst = worst.max(MaxDiff {
                value: d.value,
                index: start + d.index,
            });
        }
    }
    (worst, failures)
}

/// Says where a flat index of a `[tokens, hidden]` tensor is.
pub fn row_col(index: usize, cols: usize) -> String {
    format!("token {} dim {}", index / cols, index % cols)
}

/// Where a flat index of a `[layers, heads, n, last]` tensor is.
pub fn layer_head_pos(index: usize, heads: usize, n: usize, last: usize) -> String {
    let pos = index / last;
    let (layer, head, t) = (pos / (heads * n), (pos / n) % heads, pos % n);
    format!(
        "layer {layer} head {head} token {t} component {}",
        index % last
    )
}

/// Path to the weights file of a model folder (safetensors preferred, like the engine).
pub fn weights_file(dir: &Path) -> PathBuf {
    let safetensors = dir.join("model.safetensors");
    if safetensors.is_file() {
        safetensors
    } else {
        dir.join("pytorch_model.bin")
    }
}
