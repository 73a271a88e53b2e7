//! What a forward pass captures for one sequence: buffers of their final size, which the
//! attention kernel fills in place, layer by layer.

use super::family::Architecture;
use super::kernels::{capture_buffer, CaptureSink};

/// Everything captured for one sequence.
pub struct SequenceCapture {
    /// Attention probabilities `[layers, heads, queries, keys]`: row = query, column = key.
    pub probs: Vec<f32>,
    /// Query vectors `[layers, heads, queries, head_dim]` and key vectors `[layers, kv_heads,
    /// keys, head_dim]`, as the scores used them (before the scale), when asked for.
    pub query_key: Option<(Vec<f32>, Vec<f32>)>,
    queries: usize,
    keys: usize,
    per_layer: usize,
    q_per_layer: usize,
    k_per_layer: usize,
}

impl SequenceCapture {
    /// Zeroed buffers for `queries` query tokens over `keys` key tokens (the same count for
    /// self-attention) of a network shaped as `arch`.
    pub fn new(arch: &Architecture, queries: usize, keys: usize, query_key: bool) -> Self {
        let (layers, heads, kv, d) = (arch.layers, arch.heads, arch.kv_heads, arch.head_dim);
        let q_per_layer = heads * queries * d;
        let k_per_layer = kv * keys * d;
        SequenceCapture {
            probs: capture_buffer(layers * heads * queries * keys),
            query_key: query_key.then(|| {
                (
                    vec![0.0; layers * q_per_layer],
                    vec![0.0; layers * k_per_layer],
                )
            }),
            queries,
            keys,
            per_layer: heads * queries * keys,
            q_per_layer,
            k_per_layer,
        }
    }

    /// The part of the buffers that layer `l` writes.
    pub fn layer(&mut self, l: usize) -> CaptureSink<'_> {
        let (q, k) = (self.q_per_layer, self.k_per_layer);
        CaptureSink {
            probs: &mut self.probs[l * self.per_layer..(l + 1) * self.per_layer],
            query_key: self
                .query_key
                .as_mut()
                .map(|(qs, ks)| (&mut qs[l * q..(l + 1) * q], &mut ks[l * k..(l + 1) * k])),
        }
    }

    /// Query tokens.
    pub fn queries(&self) -> usize {
        self.queries
    }

    /// Key tokens.
    pub fn keys(&self) -> usize {
        self.keys
    }
}
