//! Helpers shared by the engine's integration tests: where the real MiniLM lives, and tiny random
//! BERT checkpoints written from Rust in any key layout.
#![allow(dead_code)]

use std::path::Path;

use candle_core::{DType, Device, Tensor};

#[allow(unused_imports)]
pub use super::models::minilm::minilm_dir;

/// The shape of a tiny BERT.
#[derive(Clone, Copy, Debug)]
pub struct Tiny {
    pub vocab: usize,
    pub hidden: usize,
    pub layers: usize,
    pub heads: usize,
    pub intermediate: usize,
    pub positions: usize,
    pub types: usize,
}

impl Default for Tiny {
    fn default() -> Self {
        Tiny {
            vocab: TINY_VOCAB.len(),
            hidden: 32,
            layers: 2,
            heads: 4,
            intermediate: 37,
            positions: 40,
            types: 2,
        }
    }
}

/// The vocabulary written beside tiny models.
pub const TINY_VOCAB: [&str; 24] = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "a", "dog",
    "ran", ".", ",", "##s", "##ing", "it", "was", "tired", "and", "big", "red", "!",
];

/// The suite's one generator ([`super::attention::Rng`], xorshift64*), here also drawing
/// tensors.
pub use super::attention::Rng;

impl Rng {
    pub fn tensor(&mut self, shape: &[usize], scale: f32, offset: f32) -> Tensor {
        let n: usize = shape.iter().product();
        let values: Vec<f32> = (0..n).map(|_| offset + scale * self.next()).collect();
        Tensor::from_vec(values, shape, &Device::Cpu).unwrap()
    }
}

/// A random tiny BERT state dict under its canonical names (no prefix, LayerNorm weight/bias).
/// LayerNorm weights are 1 ± 0.1 and biases ± 0.05, so dropping them changes the output.
pub fn tiny_tensors(t: &Tiny, seed: u64) -> Vec<(String, Tensor)> {
    let mut rng = Rng::new(seed);
    let h = t.hidden;
    let mut out = Vec::new();
    let mut push = |name: String, tensor: Tensor| out.push((name, tensor));
    push(
        "embeddings.word_embeddings.weight".into(),
        rng.tensor(&[t.vocab, h], 0.5, 0.0),
    );
    push(
        "embeddings.position_embeddings.weight".into(),
        rng.tensor(&[t.positions, h], 0.5, 0.0),
    );
    push(
        "embeddings.token_type_embeddings.weight".into(),
        rng.tensor(&[t.types, h], 0.5, 0.0),
    );
    let ln = |rng: &mut Rng, name: &str, push: &mut dyn FnMut(String, Tensor)| {
        push(format!("{name}.weight"), rng.tensor(&[h], 0.1, 1.0));
        push(format!("{name}.bias"), rng.tensor(&[h], 0.05, 0.0));
    };
    ln(&mut rng, "embeddings.LayerNorm", &mut push);
    for l in 0..t.layers {
        let p = format!("encoder.layer.{l}");
        for part in ["query", "key", "value"] {
            push(
                format!("{p}.attention.self.{part}.weight"),
                rng.tensor(&[h, h], 0.4, 0.0),
            );
            push(
                format!("{p}.attention.self.{part}.bias"),
                rng.tensor(&[h], 0.1, 0.0),
            );
        }
        push(
            format!("{p}.attention.output.dense.weight"),
            rng.tensor(&[h, h], 0.3, 0.0),
        );
        push(
            format!("{p}.attention.output.dense.bias"),
            rng.tensor(&[h], 0.1, 0.0),
        );
        ln(
            &mut rng,
            &format!("{p}.attention.output.LayerNorm"),
            &mut push,
        );
        push(
            format!("{p}.intermediate.dense.weight"),
            rng.tensor(&[t.intermediate, h], 0.3, 0.0),
        );
        push(
            format!("{p}.intermediate.dense.bias"),
            rng.tensor(&[t.intermediate], 0.1, 0.0),
        );
        push(
            format!("{p}.output.dense.weight"),
            rng.tensor(&[h, t.intermediate], 0.3, 0.0),
        );
        push(format!("{p}.output.dense.bias"), rng.tensor(&[h], 0.1, 0.0));
        ln(&mut rng, &format!("{p}.output.LayerNorm"), &mut push);
    }
    out
}

/// The legacy layout: `bert.` prefix, LayerNorm gamma/beta, plus tensors a reader must ignore
/// (`embeddings.position_ids` as I64, the pooler, `cls.*`).
pub fn legacy_layout(t: &Tiny, tensors: &[(String, Tensor)]) -> Vec<(String, Tensor)> {
    let mut out: Vec<(String, Tensor)> = tensors
        .iter()
        .map(|(name, tensor)| {
            let name = format!("bert.{name}")
                .replace("LayerNorm.weight", "LayerNorm.gamma")
                .replace("LayerNorm.bias", "LayerNorm.beta");
            (name, tensor.clone())
        })
        .collect();
    let ids: Vec<i64> = (0..t.positions as i64).collect();
    out.push((
        "bert.embeddings.position_ids".into(),
        Tensor::from_vec(ids, (1, t.positions), &Device::Cpu).unwrap(),
    ));
    out.push((
        "bert.pooler.dense.weight".into(),
        Tensor::zeros((t.hidden, t.hidden), DType::F32, &Device::Cpu).unwrap(),
    ));
    out.push((
        "bert.pooler.dense.bias".into(),
        Tensor::zeros(t.hidden, DType::F32, &Device::Cpu).unwrap(),
    ));
    out.push((
        "cls.predictions.bias".into(),
        Tensor::zeros(t.vocab, DType::F32, &Device::Cpu).unwrap(),
    ));
    out
}

/// config.json for `t` with `hidden_act`.
pub fn tiny_config(t: &Tiny, hidden_act: &str) -> String {
    serde_json::json!({
        "model_type": "bert",
        "architectures": ["BertModel"],
        "vocab_size": t.vocab,
        "hidden_size": t.hidden,
        "num_hidden_layers": t.layers,
        "num_attention_heads": t.heads,
        "intermediate_size": t.intermediate,
        "max_position_embeddings": t.positions,
        "type_vocab_size": t.types,
        "hidden_act": hidden_act,
        "layer_norm_eps": 1e-12,
        "dtype": "float32",
    })
    .to_string()
}

/// Write a model folder: config.json, model.safetensors with `tensors`, vocab.txt.
pub fn write_model(dir: &Path, config: &str, tensors: &[(String, Tensor)]) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("config.json"), config).unwrap();
    let map: std::collections::HashMap<String, Tensor> = tensors.iter().cloned().collect();
    candle_core::safetensors::save(&map, dir.join("model.safetensors")).unwrap();
    std::fs::write(dir.join("vocab.txt"), TINY_VOCAB.join("\n") + "\n").unwrap();
}

/// Maximum absolute difference of two equally long slices.
pub fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "lengths differ");
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// Assert an error message is one line and carries no backtrace.
pub fn assert_one_line(msg: &str) {
    assert!(!msg.contains('\n'), "multi-line error: {msg}");
    assert!(
        !msg.to_lowercase().contains("backtrace"),
        "backtrace in: {msg}"
    );
}

/// Two loads of the same weights computed the same encoder: to f32 rounding. A weight converted
/// into memory of our own (a `.bin`, f16) is stored `[in, out]` and multiplied by gemm, one read
/// in place from a safetensors map by the dot-product kernel for short inputs; the two sum in
/// different orders, so results differ in the last bits. Pair with [`assert_same_tensors`],
/// which checks that the values read are identical.
pub fn assert_same_forward(a: &attnviz::model::Forward, b: &attnviz::model::Forward, what: &str) {
    assert_eq!(a.weights.len(), b.weights.len(), "{what}: attention shape");
    let attention = max_diff(&a.weights, &b.weights);
    let hidden = max_diff(&a.hidden, &b.hidden);
    assert!(attention <= 1e-6, "{what}: attention max |Δ| {attention:e}");
    assert!(hidden <= 1e-5, "{what}: hidden max |Δ| {hidden:e}");
    match (&a.query_key, &b.query_key) {
        (Some(x), Some(y)) => {
            let q = max_diff(&x.queries, &y.queries);
            let k = max_diff(&x.keys, &y.keys);
            assert!(q <= 1e-5 && k <= 1e-5, "{what}: query {q:e}, key {k:e}");
        }
        (None, None) => {}
        _ => panic!("{what}: query/key vectors in one run only"),
    }
}

/// Every tensor of `reference` (a model folder with `model.safetensors`) reads as exactly the
/// same f32 values from `other` (any weight file attnviz reads, with or without the `bert.`
/// prefix and gamma/beta names).
pub fn assert_same_tensors(reference: &Path, other: &Path) {
    use attnviz::model::weights::Anchor;
    use attnviz::model::Checkpoint;
    let anchor = Anchor {
        tensor: "embeddings.word_embeddings.weight",
        family: "BERT",
        prefix: "bert",
    };
    let file = |dir: &Path| {
        ["model.safetensors", "pytorch_model.bin"]
            .iter()
            .map(|f| dir.join(f))
            .find(|p| p.is_file())
            .unwrap_or_else(|| panic!("no weights in {}", dir.display()))
    };
    let bytes = std::fs::read(reference.join("model.safetensors")).unwrap();
    let names = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let a = Checkpoint::open(&[file(reference)], &anchor).unwrap();
    let b = Checkpoint::open(&[file(other)], &anchor).unwrap();
    let mut compared = 0;
    for (name, view) in names.tensors() {
        if name.ends_with("position_ids") {
            continue;
        }
        let x = a.weight(&name, view.shape()).unwrap();
        let y = b
            .weight(&name, view.shape())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(x[..] == y[..], "{name} differs in {}", other.display());
        compared += 1;
    }
    assert!(compared > 10, "only {compared} tensors compared");
}
