//! Helpers shared by integration tests and benchmarks: attention values that look like an
//! encoder's (softmax of random query/key vectors) and the sidecar the browser tests read.

use std::path::Path;

use attnviz::attention::{Role, Units};
use attnviz::render::html::HtmlOptions;
use attnviz::{Attention, ModelInfo, QueryKey};

/// A small deterministic generator (xorshift64*), so tests need no extra crate.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    /// Uniform in [-1, 1).
    pub fn next(&mut self) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let x = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 40;
        x as f32 / (1u64 << 23) as f32 - 1.0
    }
}

/// Attention whose weights are `softmax(q·k/√d)` of random vectors, with the vectors kept, over
/// `tokens` (`[CLS]`/`[SEP]` are special; from `b_start` on the tokens are sentence B).
/// `shape` is (layers, heads, head_dim).
pub fn random_attention(
    text: &str,
    pair: Option<&str>,
    tokens: &[&str],
    b_start: Option<usize>,
    shape: (usize, usize, usize),
    seed: u64,
) -> Attention {
    let (layers, heads, d) = shape;
    let n = tokens.len();
    let mut rng = Rng::new(seed);
    let total = layers * heads * n * d;
    // Some heads sharper than others, like a real model.
    let sharp: Vec<f32> = (0..layers * heads)
        .map(|_| 1.5 + 1.5 * (rng.next() + 1.0))
        .collect();
    let queries: Vec<f32> = (0..total)
        .map(|i| sharp[i / (n * d)] * rng.next())
        .collect();
    let keys: Vec<f32> = (0..total).map(|_| 1.7 * rng.next()).collect();
    let weights = softmax_weights(&queries, &keys, layers * heads, n, d);
    Attention::new(
        ModelInfo {
            id: "test/random-softmax".into(),
            revision: None,
            name: None,
            family: "BERT".into(),
            layers,
            heads,
            hidden_size: heads * d,
            head_dim: d,
        },
        text.into(),
        pair.map(Into::into),
        units_for(tokens, b_start),
        weights,
    )
    .and_then(|a| {
        a.with_query_key(Some(QueryKey {
            queries,
            keys,
            scale: None,
        }))
    })
    .expect("consistent attention")
}

/// Token units for test labels as a BERT tokenizer would give them: `[CLS]` opens the input and
/// every other bracketed label is a separator; each other label is a word of its own, standing
/// for its own text; units from `b_start` on are sentence B.
pub fn units_for(tokens: &[&str], b_start: Option<usize>) -> Units {
    let n = tokens.len();
    let special = |t: &str| t.starts_with('[') && t.ends_with(']');
    let mut word = 0;
    let mut roles = Vec::with_capacity(n);
    let mut word_ids = Vec::with_capacity(n);
    for (i, t) in tokens.iter().enumerate() {
        if special(t) {
            roles.push(if i == 0 { Role::Start } else { Role::End });
            word_ids.push(None);
        } else {
            roles.push(Role::Word);
            word_ids.push(Some(word));
            word += 1;
        }
    }
    let segments: Vec<u32> = (0..n)
        .map(|i| u32::from(b_start.is_some_and(|b| i >= b)))
        .collect();
    let surfaces = tokens
        .iter()
        .map(|t| {
            if special(t) {
                String::new()
            } else {
                t.to_string()
            }
        })
        .collect();
    Units::tokens(
        tokens.iter().map(|t| t.to_string()).collect(),
        (0..n as u32).map(|i| 1000 + i).collect(),
        segments.clone(),
        segments,
        roles,
        word_ids,
        surfaces,
    )
}

/// `softmax(q·k/√d)` per head, rows = queries; vectors are `[heads_total, n, d]`.
pub fn softmax_weights(
    queries: &[f32],
    keys: &[f32],
    heads_total: usize,
    n: usize,
    d: usize,
) -> Vec<f32> {
    let mut weights = Vec::with_capacity(heads_total * n * n);
    let scale = 1.0 / (d as f32).sqrt();
    for lh in 0..heads_total {
        for q in 0..n {
            let qv = &queries[(lh * n + q) * d..][..d];
            let scores: Vec<f32> = (0..n)
                .map(|k| {
                    let kv = &keys[(lh * n + k) * d..][..d];
                    qv.iter().zip(kv).map(|(a, b)| a * b).sum::<f32>() * scale
                })
                .collect();
            let top = scores.iter().copied().fold(f32::MIN, f32::max);
            let z: f32 = scores.iter().map(|s| (s - top).exp()).sum();
            weights.extend(scores.iter().map(|s| (s - top).exp() / z));
        }
    }
    weights
}

/// Write what a browser test needs to check a report independently: the exact f32 weights and
/// the labels, plus any analysis numbers.
pub fn write_expectations(path: &Path, att: &Attention, opts: &HtmlOptions) {
    let a = &opts.analysis;
    let value = serde_json::json!({
        "layers": att.layers(),
        "heads": att.heads(),
        "head_dim": att.model.head_dim,
        "n": att.len(),
        "text": att.text,
        "pair": att.pair,
        "tokens": att.tokens(),
        "display": att.queries().display,
        "segments": att.queries().segments,
        "roles": att.queries().roles,
        "special": att.queries().roles.iter().map(|r| r.is_special()).collect::<Vec<_>>(),
        "word_ids": att.queries().word_ids,
        "surfaces": att.queries().surfaces,
        "mask": att.mask,
        "positions": att.positions,
        "kv_head": att.kv_head(),
        "generated": att.queries().generated,
        "sink": att.sink(),
        "threshold": opts.threshold_for(att.len()),
        "neuron": opts.neuron && att.query_key.is_some(),
        "weights": att.weights(),
        "stats": a.stats.iter().map(|s| serde_json::json!({"id": s.id, "label": s.label, "values": s.values})).collect::<Vec<_>>(),
        "head_labels": a.head_labels,
        "matrices": a.matrices.iter().map(|m| serde_json::json!({"id": m.id, "label": m.label, "layers": m.layers})).collect::<Vec<_>>(),
    });
    std::fs::write(path, serde_json::to_string(&value).unwrap()).unwrap();
}

#[allow(unused_imports)]
pub use super::models::minilm::minilm_dir;
