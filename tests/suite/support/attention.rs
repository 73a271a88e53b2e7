//! Every synthetic attention value of the integration tests and benchmarks, and the sidecar the
//! browser tests read: softmax of random query/key vectors (like an encoder's, vectors kept),
//! banded heads (a sink and a diagonal, for the output benchmarks) and random softmax rows
//! (large shapes made cheaply, for the analysis benchmarks). The unit tests' builders are in
//! crates/core/src/attention/fixtures.rs.

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

/// An attention shaped like real heads, for the output benchmarks (writing it costs what a real
/// one does): `layers × heads` heads over `n` tokens, each row a `[CLS]` sink, a diagonal band
/// and a little noise, summing to 1; WordPiece-like labels.
pub fn banded_attention(n: usize, layers: usize, heads: usize) -> Attention {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut rand = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f32 / (1u64 << 53) as f32
    };
    let mut weights = Vec::with_capacity(layers * heads * n * n);
    for l in 0..layers {
        for h in 0..heads {
            let offset = (l + h) % 3;
            for q in 0..n {
                let row: Vec<f32> = (0..n)
                    .map(|k| {
                        let mut w = 0.02 * rand();
                        if k == 0 {
                            w += 0.5;
                        }
                        if k + offset == q + 1 {
                            w += 0.4;
                        }
                        w
                    })
                    .collect();
                let sum: f32 = row.iter().sum();
                weights.extend(row.iter().map(|w| w / sum));
            }
        }
    }
    let tokens: Vec<String> = (0..n)
        .map(|i| match i {
            0 => "[CLS]".into(),
            i if i == n - 1 => "[SEP]".into(),
            i => ["the", "attention", "##s", "head", "looks", ",", "at"][i % 7].into(),
        })
        .collect();
    let roles = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| match (i, t.starts_with('[')) {
            (0, _) => Role::Start,
            (_, true) => Role::End,
            _ if t.starts_with("##") => Role::Piece,
            _ => Role::Word,
        })
        .collect();
    let surfaces = tokens
        .iter()
        .map(|t| t.trim_start_matches('#').to_string())
        .collect();
    let units = Units::tokens(
        tokens.clone(),
        (0..n as u32).collect(),
        vec![0; n],
        vec![0; n],
        roles,
        (0..n).map(Some).collect(),
        surfaces,
    );
    Attention::new(
        ModelInfo {
            id: "bench".into(),
            revision: None,
            name: None,
            family: "BERT".into(),
            layers,
            heads,
            hidden_size: heads * 32,
            head_dim: 32,
        },
        tokens.join(" "),
        None,
        units,
        weights,
    )
    .unwrap()
}

/// `layers × heads` heads over `n` tokens whose rows are softmaxes of random scores (no query/key
/// vectors, so large shapes are cheap to make), for the analysis benchmarks; `[CLS] w1 ##p2 …
/// [SEP]` labels, every other token continuing a word.
pub fn random_rows_attention(n: usize, layers: usize, heads: usize) -> Attention {
    let mut state = 0x9e3779b97f4a7c15u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 40) as f32 / (1u64 << 24) as f32
    };
    let mut weights = Vec::with_capacity(layers * heads * n * n);
    let mut row = vec![0f32; n];
    for _ in 0..layers * heads * n {
        row.iter_mut().for_each(|x| *x = (6.0 * next()).exp());
        let sum: f32 = row.iter().sum();
        weights.extend(row.iter().map(|x| x / sum));
    }
    // [CLS] w0 ##p w1 ##p … [SEP]: every other token continues a word
    let tokens: Vec<String> = (0..n)
        .map(|i| match i {
            0 => "[CLS]".into(),
            i if i == n - 1 => "[SEP]".into(),
            i if i % 2 == 0 => format!("##p{i}"),
            i => format!("w{i}"),
        })
        .collect();
    let roles = (0..n)
        .map(|i| match i {
            0 => Role::Start,
            i if i == n - 1 => Role::End,
            i if i % 2 == 0 => Role::Piece,
            _ => Role::Word,
        })
        .collect();
    let word_ids = (0..n)
        .map(|i| (i != 0 && i != n - 1).then_some((i - 1) / 2))
        .collect();
    let surfaces = tokens
        .iter()
        .map(|t| t.trim_start_matches('#').to_string())
        .collect();
    let units = Units::tokens(
        tokens,
        (0..n as u32).collect(),
        vec![0; n],
        vec![0; n],
        roles,
        word_ids,
        surfaces,
    );
    Attention::new(
        ModelInfo {
            id: "random".into(),
            revision: None,
            name: None,
            family: "BERT".into(),
            layers,
            heads,
            hidden_size: 768,
            head_dim: 64,
        },
        String::new(),
        None,
        units,
        weights,
    )
    .unwrap()
}
