//! A summarised run's `summary` section (`docs/json.md`, "Long inputs"): per captured layer and
//! head, what the attention kernel kept of the matrix it never held: each query's top keys,
//! sink mass and entropy, the mass by relative distance, a pooled map, and the full rows of the
//! queries asked for ([`crate::attention::summary`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::attention::summary::AttentionSummary;

/// Every summarised layer of one input.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SummarySection {
    /// Query positions (tokens).
    pub queries: usize,
    /// Key positions (tokens).
    pub keys: usize,
    /// Keys kept per query (fewer for a query that sees fewer).
    pub top_k: usize,
    /// The side of the pooled map's square blocks, in tokens (`⌈n / 256⌉`).
    pub pool: usize,
    /// The lower edge of each distance bin: bin 0 holds distance 0, bin `b` distances from
    /// `distance_bins[b]` up to the next edge (log-spaced: 1, 2, 4, 8, …).
    pub distance_bins: Vec<usize>,
    /// The queries whose full rows are kept (`rows` of each head), ascending.
    pub rows: Vec<usize>,
    /// The summarised layers, ascending.
    pub layers: Vec<SummaryLayerDoc>,
}

/// One layer's summaries.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SummaryLayerDoc {
    /// The model's number of the layer (from 0).
    pub layer: usize,
    /// Each head's summary, by head number.
    pub heads: Vec<SummaryHeadDoc>,
}

/// One head's summary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SummaryHeadDoc {
    /// The mean over queries of the weight on the first token.
    pub sink_mean: f32,
    /// The mean over queries of the entropy, in nats.
    pub entropy_mean: f32,
    /// Each query's weight on the first token.
    pub sink: Vec<f32>,
    /// Each query's entropy, `−Σ p ln p` in nats.
    pub entropy: Vec<f32>,
    /// The mean over queries of the mass per distance bin (sums to 1).
    pub distance: Vec<f32>,
    /// Each query's top keys, largest weight first: `top_keys[query]`.
    pub top_keys: Vec<Vec<u32>>,
    /// Their weights: `top_weights[query]`.
    pub top_weights: Vec<Vec<f32>>,
    /// The attention summed over blocks of `pool` queries × `pool` keys: `pooled[query
    /// block][key block]`; each row of blocks sums to its number of queries.
    pub pooled: Vec<Vec<f32>>,
    /// The full rows of the queries in `rows`: `rows[i][key]`.
    pub rows: Vec<Vec<f32>>,
    /// Each query's share on the learned attention sink (gpt-oss), `1 − Σ row`; absent for a
    /// softmax without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learned_sink: Option<Vec<f32>>,
    /// Its mean over the queries; absent with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learned_sink_mean: Option<f32>,
}

impl SummarySection {
    /// The section of a summary.
    pub fn of(summary: &AttentionSummary) -> SummarySection {
        let (q, k) = (summary.queries, summary.keys);
        let (pq, pk) = (summary.pooled_queries(), summary.pooled_keys());
        let bins = summary.distance_bins.len();
        let named = summary.rows.len();
        let mean = |xs: &[f32]| xs.iter().map(|&x| x as f64).sum::<f64>() as f32 / q.max(1) as f32;
        let layers = summary
            .layers
            .iter()
            .enumerate()
            .map(|(slot, layer)| SummaryLayerDoc {
                layer: layer.layer,
                heads: (0..summary.heads)
                    .map(|h| {
                        let sink = layer.sink[h * q..(h + 1) * q].to_vec();
                        let entropy = layer.entropy[h * q..(h + 1) * q].to_vec();
                        let tops: Vec<_> = (0..q).map(|i| summary.top_keys(slot, h, i)).collect();
                        let learned = summary
                            .learned_sink
                            .then(|| layer.learned_sink[h * q..(h + 1) * q].to_vec());
                        SummaryHeadDoc {
                            sink_mean: mean(&sink),
                            entropy_mean: mean(&entropy),
                            sink,
                            entropy,
                            distance: layer.distance[h * bins..(h + 1) * bins].to_vec(),
                            top_keys: tops
                                .iter()
                                .map(|t| t.iter().map(|t| t.key).collect())
                                .collect(),
                            top_weights: tops
                                .iter()
                                .map(|t| t.iter().map(|t| t.weight).collect())
                                .collect(),
                            pooled: layer.pooled[h * pq * pk..(h + 1) * pq * pk]
                                .chunks(pk)
                                .map(<[f32]>::to_vec)
                                .collect(),
                            rows: layer.rows[h * named * k..(h + 1) * named * k]
                                .chunks(k.max(1))
                                .map(<[f32]>::to_vec)
                                .collect(),
                            learned_sink_mean: learned.as_deref().map(mean),
                            learned_sink: learned,
                        }
                    })
                    .collect(),
            })
            .collect();
        SummarySection {
            queries: q,
            keys: k,
            top_k: summary.top_k,
            pool: summary.pool,
            distance_bins: summary.distance_bins.clone(),
            rows: summary.rows.clone(),
            layers,
        }
    }
}
