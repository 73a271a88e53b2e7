//! A long input's attention, summarised while it is computed: per layer and head, what a person
//! reads off the full `n × n` matrix, without the matrix. The attention kernel hands each block
//! of query rows to [`SummaryShape::summarise`] (added up by [`SummaryBuilder::merge`]) as soon as their softmax is done, and forgets
//! them; what is kept grows with `n` (top keys, entropy, sink mass per query) or not at all
//! (distance profile, pooled map), never with `n²`:
//!
//! - each query's **top keys**: the `top_k` keys with the largest weights, largest first (fewer
//!   when the query sees fewer keys);
//! - each query's **sink mass**: the weight on the first key (the "attention sink" most decoders
//!   park spare attention on);
//! - each query's **entropy**, `−Σ p ln p` in nats (0: all on one key; `ln n`: spread evenly);
//! - the **distance profile**: the mean, over queries, of the mass given to keys at relative
//!   distance `d = |query − key|` (positions, the query's own counted from the first key), in
//!   log-spaced bins: `d = 0`, then `[1, 2)`, `[2, 4)`, `[4, 8)`, …;
//! - the **pooled map**: the matrix summed over square blocks of `pool` queries × `pool` keys
//!   (`pool = ⌈n / 256⌉`, so at most 256 × 256 cells), exact sums, so each row of blocks adds up
//!   to the number of queries in it;
//! - the **full rows** of the queries asked for, whatever the length.
//!
//! Sums are accumulated in f64 and stored in f32, so a summary equals the one computed from the
//! full matrix to f32 rounding.

use serde::{Deserialize, Serialize};

/// What to keep of a long input's attention.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SummarySpec {
    /// Keys kept per query (16 by default).
    pub top_k: usize,
    /// Queries whose full rows are kept (query positions, from 0), ascending.
    pub rows: Vec<usize>,
}

impl Default for SummarySpec {
    fn default() -> Self {
        SummarySpec {
            top_k: 16,
            rows: Vec::new(),
        }
    }
}

/// The side of the pooled map's blocks for `n` tokens: `⌈n / 256⌉`, at least 1.
pub fn pool_size(n: usize) -> usize {
    n.div_ceil(256).max(1)
}

/// Distance bins for keys up to `keys` positions away: bin 0 holds distance 0, bin `b ≥ 1`
/// distances `[2^(b−1), 2^b)`. Returns each bin's lower edge.
pub fn distance_bins(keys: usize) -> Vec<usize> {
    let mut edges = vec![0];
    let mut edge = 1;
    while edge < keys.max(1) {
        edges.push(edge);
        edge *= 2;
    }
    edges
}

/// The bin of a distance (see [`distance_bins`]).
#[inline]
pub fn distance_bin(distance: usize) -> usize {
    if distance == 0 {
        0
    } else {
        (usize::BITS - distance.leading_zeros()) as usize
    }
}

/// One kept key of a query: its position and weight.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TopKey {
    /// The key's position (from 0).
    pub key: u32,
    /// Its weight.
    pub weight: f32,
}

/// One layer's summary of one sequence, every head.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LayerSummary {
    /// The model's number of the layer (from 0).
    pub layer: usize,
    /// Each query's top keys, `[heads, queries, top_k]`; a query that sees fewer keys than
    /// `top_k` has the rest as key `u32::MAX`, weight 0.
    pub top: Vec<TopKey>,
    /// Each query's weight on the first key, `[heads, queries]`.
    pub sink: Vec<f32>,
    /// Each query's entropy in nats, `[heads, queries]`.
    pub entropy: Vec<f32>,
    /// The mean mass per distance bin, `[heads, bins]`.
    pub distance: Vec<f32>,
    /// The pooled map, `[heads, pooled queries, pooled keys]`.
    pub pooled: Vec<f32>,
    /// The full rows asked for, `[heads, rows, keys]`.
    pub rows: Vec<f32>,
    /// Each query's share on a learned attention sink (gpt-oss), `1 − Σ row`, `[heads,
    /// queries]`; empty for a softmax without one.
    #[serde(default)]
    pub learned_sink: Vec<f32>,
}

/// A long input's attention, summarised (see the module's documentation).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AttentionSummary {
    /// Heads per layer.
    pub heads: usize,
    /// Query positions.
    pub queries: usize,
    /// Key positions.
    pub keys: usize,
    /// Keys kept per query.
    pub top_k: usize,
    /// The lower edge of each distance bin ([`distance_bins`]).
    pub distance_bins: Vec<usize>,
    /// The side of the pooled map's blocks, in tokens.
    pub pool: usize,
    /// The queries whose full rows are kept, ascending.
    pub rows: Vec<usize>,
    /// Whether the softmax had a learned sink (each layer's `learned_sink` is filled).
    #[serde(default)]
    pub learned_sink: bool,
    /// The summarised layers, ascending.
    pub layers: Vec<LayerSummary>,
}

impl AttentionSummary {
    /// Pooled cells along the queries.
    pub fn pooled_queries(&self) -> usize {
        self.queries.div_ceil(self.pool)
    }

    /// Pooled cells along the keys.
    pub fn pooled_keys(&self) -> usize {
        self.keys.div_ceil(self.pool)
    }

    /// The top keys of `query` in head `head` of layer slot `slot` (padding left out).
    pub fn top_keys(&self, slot: usize, head: usize, query: usize) -> &[TopKey] {
        let row =
            &self.layers[slot].top[(head * self.queries + query) * self.top_k..][..self.top_k];
        let kept = row.iter().take_while(|t| t.key != u32::MAX).count();
        &row[..kept]
    }
}

/// The shape of one layer's summary: what [`SummaryShape::summarise`] needs to summarise a
/// block of rows, small enough to copy to every thread.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SummaryShape {
    /// Heads.
    pub heads: usize,
    /// Query positions.
    pub queries: usize,
    /// Key positions.
    pub keys: usize,
    /// Keys kept per query.
    pub top_k: usize,
    /// The side of the pooled map's blocks.
    pub pool: usize,
    /// Distance bins.
    pub bins: usize,
    /// The queries whose full rows are kept, ascending.
    pub rows: Vec<usize>,
    /// Whether rows leave a share to a learned sink, kept per query.
    pub learned_sink: bool,
}

/// The part of a block of rows that [`SummaryBuilder::merge`] adds to the layer's summary: kept
/// apart so that blocks can be summarised in parallel and merged under a lock.
#[derive(Debug)]
pub struct RowsPart {
    head: usize,
    first: usize,
    distance: Vec<f64>,
    /// Pooled cells of the block rows `first / pool ..`, `[block rows, pooled keys]`.
    pooled: Vec<f64>,
    top: Vec<TopKey>,
    sink: Vec<f32>,
    entropy: Vec<f32>,
    learned: Vec<f32>,
    /// (row index within `rows`, the row).
    full: Vec<(usize, Vec<f32>)>,
}

impl SummaryShape {
    /// Summarise the finished rows of queries `first..first + n` of head `head`: row `i` is
    /// `block[i·stride ..][..keys]`, its query at key position `first + i + shift` (`shift`: the
    /// keys before the first query, as with a cache). Entries a row does not see must be 0.
    /// The part is added to the layer's builder by [`SummaryBuilder::merge`].
    pub fn summarise(
        &self,
        head: usize,
        first: usize,
        block: &[f32],
        stride: usize,
        shift: usize,
    ) -> RowsPart {
        let n = block.len() / stride;
        let (pool, keys, k) = (self.pool, self.keys, self.top_k);
        let pooled_keys = keys.div_ceil(pool);
        let first_block = first / pool;
        let block_rows = (first + n).div_ceil(pool) - first_block;
        let mut part = RowsPart {
            head,
            first,
            distance: vec![0.0; self.bins],
            pooled: vec![0.0; block_rows * pooled_keys],
            top: Vec::with_capacity(n * k),
            sink: Vec::with_capacity(n),
            entropy: Vec::with_capacity(n),
            learned: Vec::new(),
            full: Vec::new(),
        };
        let mut best: Vec<TopKey> = Vec::with_capacity(k + 1);
        for (i, row) in block.chunks(stride).take(n).enumerate() {
            let row = &row[..keys];
            let query = first + i;
            let position = query + shift;
            let cells =
                &mut part.pooled[(query / pool - first_block) * pooled_keys..][..pooled_keys];
            let (mut entropy, mut total) = (0f64, 0f64);
            best.clear();
            for (key, &w) in row.iter().enumerate() {
                if w == 0.0 {
                    continue;
                }
                let w64 = w as f64;
                total += w64;
                entropy -= w64 * w64.ln();
                part.distance[distance_bin(position.abs_diff(key))] += w64;
                cells[key / pool] += w64;
                if k > 0 && (best.len() < k || w > best[best.len() - 1].weight) {
                    // Largest first; among equal weights the earlier key first.
                    let at = best.partition_point(|t| t.weight >= w);
                    best.insert(
                        at,
                        TopKey {
                            key: key as u32,
                            weight: w,
                        },
                    );
                    best.truncate(k);
                }
            }
            part.top.extend_from_slice(&best);
            part.top.resize(
                (i + 1) * k,
                TopKey {
                    key: u32::MAX,
                    weight: 0.0,
                },
            );
            part.sink.push(row[0]);
            part.entropy.push(entropy as f32);
            if self.learned_sink {
                part.learned.push((1.0 - total).max(0.0) as f32);
            }
            if let Ok(r) = self.rows.binary_search(&query) {
                part.full.push((r, row.to_vec()));
            }
        }
        part
    }
}

/// Accumulates one layer's summary of one sequence from blocks of finished rows.
#[derive(Debug)]
pub struct SummaryBuilder {
    layer: usize,
    shape: SummaryShape,
    top: Vec<TopKey>,
    sink: Vec<f32>,
    entropy: Vec<f32>,
    distance: Vec<f64>,
    pooled: Vec<f64>,
    full: Vec<f32>,
    learned: Vec<f32>,
}

impl SummaryBuilder {
    /// An empty summary of layer `layer` with `heads` heads over `queries × keys`.
    pub fn new(
        layer: usize,
        heads: usize,
        queries: usize,
        keys: usize,
        spec: &SummarySpec,
    ) -> Self {
        let pool = pool_size(queries.max(keys));
        let bins = distance_bins(queries.max(keys)).len();
        let rows: Vec<usize> = spec.rows.iter().copied().filter(|&r| r < queries).collect();
        SummaryBuilder {
            layer,
            top: vec![
                TopKey {
                    key: u32::MAX,
                    weight: 0.0
                };
                heads * queries * spec.top_k
            ],
            sink: vec![0.0; heads * queries],
            entropy: vec![0.0; heads * queries],
            distance: vec![0.0; heads * bins],
            pooled: vec![0.0; heads * queries.div_ceil(pool) * keys.div_ceil(pool)],
            full: vec![0.0; heads * rows.len() * keys],
            learned: Vec::new(),
            shape: SummaryShape {
                heads,
                queries,
                keys,
                top_k: spec.top_k,
                pool,
                bins,
                rows,
                learned_sink: false,
            },
        }
    }

    /// The same builder, also keeping each query's share on a learned sink (`1 − Σ row`), for
    /// a softmax with one (gpt-oss).
    pub fn with_learned_sink(mut self) -> Self {
        self.shape.learned_sink = true;
        self.learned = vec![0.0; self.shape.heads * self.shape.queries];
        self
    }

    /// Its shape.
    pub fn shape(&self) -> &SummaryShape {
        &self.shape
    }

    /// Add a part made by [`SummaryShape::summarise`].
    pub fn merge(&mut self, part: RowsPart) {
        let s = &self.shape;
        let (h, q, k) = (part.head, s.queries, s.top_k);
        let n = part.sink.len();
        let at = h * q + part.first;
        self.top[at * k..(at + n) * k].copy_from_slice(&part.top);
        self.sink[at..at + n].copy_from_slice(&part.sink);
        self.entropy[at..at + n].copy_from_slice(&part.entropy);
        if s.learned_sink {
            self.learned[at..at + n].copy_from_slice(&part.learned);
        }
        for (sum, d) in self.distance[h * s.bins..][..s.bins]
            .iter_mut()
            .zip(&part.distance)
        {
            *sum += d;
        }
        let (pq, pk) = (q.div_ceil(s.pool), s.keys.div_ceil(s.pool));
        let start = (h * pq + part.first / s.pool) * pk;
        for (sum, v) in self.pooled[start..][..part.pooled.len()]
            .iter_mut()
            .zip(&part.pooled)
        {
            *sum += v;
        }
        for (r, row) in part.full {
            self.full[(h * s.rows.len() + r) * s.keys..][..s.keys].copy_from_slice(&row);
        }
    }

    /// The layer's summary.
    pub fn finish(self) -> LayerSummary {
        let queries = self.shape.queries.max(1) as f64;
        LayerSummary {
            layer: self.layer,
            top: self.top,
            sink: self.sink,
            entropy: self.entropy,
            distance: self
                .distance
                .iter()
                .map(|&d| (d / queries) as f32)
                .collect(),
            pooled: self.pooled.iter().map(|&v| v as f32).collect(),
            rows: self.full,
            learned_sink: self.learned,
        }
    }

    /// The summary's frame (everything but the layers), for [`AttentionSummary`].
    pub fn frame(&self) -> AttentionSummary {
        let s = &self.shape;
        AttentionSummary {
            heads: s.heads,
            queries: s.queries,
            keys: s.keys,
            top_k: s.top_k,
            distance_bins: distance_bins(s.queries.max(s.keys)),
            pool: s.pool,
            rows: s.rows.clone(),
            learned_sink: s.learned_sink,
            layers: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A causal matrix of softmaxed rows from a small deterministic generator.
    fn causal(n: usize, seed: u64) -> Vec<f32> {
        let mut state = seed;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 33) as f64 / (1u64 << 31) as f64) * 6.0 - 3.0
        };
        let mut m = vec![0f32; n * n];
        for i in 0..n {
            let scores: Vec<f64> = (0..=i).map(|_| next()).collect();
            let max = scores.iter().cloned().fold(f64::MIN, f64::max);
            let sum: f64 = scores.iter().map(|s| (s - max).exp()).sum();
            for (j, s) in scores.iter().enumerate() {
                m[i * n + j] = ((s - max).exp() / sum) as f32;
            }
        }
        m
    }

    #[test]
    fn bins_are_log_spaced() {
        assert_eq!(distance_bins(1), vec![0]);
        assert_eq!(distance_bins(9), vec![0, 1, 2, 4, 8]);
        for d in 0..100usize {
            let b = distance_bin(d);
            let edges = distance_bins(1000);
            assert!(
                edges[b] <= d && (b + 1 == edges.len() || d < edges[b + 1]),
                "{d}"
            );
        }
    }

    /// Blocks of rows given in any order, split anywhere, give the same summary as the whole
    /// matrix in one block; each pooled row of blocks sums to its number of queries.
    #[test]
    fn blocks_in_any_order_make_one_summary() {
        let n = 600;
        let m = causal(n, 7);
        let spec = SummarySpec {
            top_k: 5,
            rows: vec![0, 599],
        };
        let mut whole = SummaryBuilder::new(3, 1, n, n, &spec);
        let part = whole.shape().summarise(0, 0, &m, n, 0);
        whole.merge(part);
        let mut pieces = SummaryBuilder::new(3, 1, n, n, &spec);
        for (a, b) in [(300, 600), (0, 7), (7, 300)] {
            let part = pieces.shape().summarise(0, a, &m[a * n..b * n], n, 0);
            pieces.merge(part);
        }
        let (w, p) = (whole.finish(), pieces.finish());
        assert_eq!(w.top, p.top);
        assert_eq!(w.sink, p.sink);
        assert_eq!(w.entropy, p.entropy);
        assert_eq!(w.rows, p.rows);
        assert_eq!(&w.rows[n..], &m[599 * n..]);
        for (a, b) in w
            .pooled
            .iter()
            .zip(&p.pooled)
            .chain(w.distance.iter().zip(&p.distance))
        {
            assert!((a - b).abs() <= 1e-6, "{a} {b}");
        }
        let pool = pool_size(n);
        assert_eq!(pool, 3);
        let cells = n.div_ceil(pool);
        for (r, row) in w.pooled.chunks(cells).enumerate() {
            let sum: f32 = row.iter().sum();
            let want = (n - r * pool).min(pool) as f32;
            assert!((sum - want).abs() < 1e-4, "pooled row {r}: {sum} ≠ {want}");
        }
        // The distance profile is a mean of distributions: it sums to 1.
        assert!((w.distance.iter().sum::<f32>() - 1.0).abs() < 1e-5);
        assert!(w.learned_sink.is_empty(), "no learned sink asked for");
    }

    /// Rows that leave a fifth to a learned sink: each query's share is that fifth.
    #[test]
    fn a_learned_sink_s_share_is_what_each_row_leaves() {
        let n = 40;
        let m: Vec<f32> = causal(n, 3).iter().map(|w| w * 0.8).collect();
        let mut b = SummaryBuilder::new(0, 1, n, n, &SummarySpec::default()).with_learned_sink();
        let part = b.shape().summarise(0, 0, &m, n, 0);
        b.merge(part);
        let frame = b.frame();
        assert!(frame.learned_sink);
        let layer = b.finish();
        assert_eq!(layer.learned_sink.len(), n);
        for share in &layer.learned_sink {
            assert!((share - 0.2).abs() < 1e-6, "{share}");
        }
    }
}
