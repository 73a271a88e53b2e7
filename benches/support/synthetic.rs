//! A synthetic attention for the output benchmarks: shaped like real heads (a [CLS] sink, a
//! diagonal band, noise, rows summing to 1), so that writing it costs what a real one does.

use attnviz::attention::{Role, Units};
use attnviz::{Attention, ModelInfo};

/// `layers × heads` heads over `n` tokens.
pub fn attention(n: usize, layers: usize, heads: usize) -> Attention {
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
