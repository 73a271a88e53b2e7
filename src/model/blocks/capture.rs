//! What a forward pass captures for one sequence: buffers of their final size, which the
//! attention kernel fills in place, layer by layer. A capture may keep only some layers
//! (`--layers`): the others run without keeping their probabilities.

use super::network::Architecture;
use super::values::ValueCapture;
use crate::model::kernels::{capture_buffer, CaptureSink};

/// Everything captured for one sequence.
pub struct SequenceCapture {
    /// Attention probabilities `[captured layers, heads, queries, keys]`: row = query, column =
    /// key.
    pub probs: Vec<f32>,
    /// Query vectors `[captured layers, heads, queries, head_dim]` and key vectors `[captured
    /// layers, kv_heads, keys, head_dim]`, as the scores used them (before the scale), when
    /// asked for.
    pub query_key: Option<(Vec<f32>, Vec<f32>)>,
    /// What the norm-based analyses need, when asked for ([`SequenceCapture::with_values`]).
    pub values: Option<ValueCapture>,
    queries: usize,
    keys: usize,
    per_layer: usize,
    q_per_layer: usize,
    k_per_layer: usize,
    /// Where each of the network's layers goes in the buffers; `None`: not captured.
    slots: Vec<Option<usize>>,
}

impl SequenceCapture {
    /// Zeroed buffers for `queries` query tokens over `keys` key tokens (the same count for
    /// self-attention) of a network shaped as `arch`.
    pub fn new(arch: &Architecture, queries: usize, keys: usize, query_key: bool) -> Self {
        Self::for_layers(
            arch,
            queries,
            keys,
            query_key,
            &(0..arch.layers).collect::<Vec<_>>(),
        )
    }

    /// [`SequenceCapture::new`] for the network's layers `captured` only (ascending, each below
    /// `arch.layers`).
    pub fn for_layers(
        arch: &Architecture,
        queries: usize,
        keys: usize,
        query_key: bool,
        captured: &[usize],
    ) -> Self {
        assert!(
            captured.windows(2).all(|w| w[0] < w[1])
                && captured.last().is_none_or(|&l| l < arch.layers),
            "captured layers {captured:?} of {}",
            arch.layers
        );
        let mut slots = vec![None; arch.layers];
        for (slot, &l) in captured.iter().enumerate() {
            slots[l] = Some(slot);
        }
        let (layers, heads, kv, d) = (captured.len(), arch.heads, arch.kv_heads, arch.head_dim);
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
            values: None,
            queries,
            keys,
            per_layer: heads * queries * keys,
            q_per_layer,
            k_per_layer,
            slots,
        }
    }

    /// The part of the buffers that the network's layer `l` writes (nothing when it is not
    /// captured).
    pub fn layer(&mut self, l: usize) -> CaptureSink<'_> {
        let Some(slot) = self.slots[l] else {
            return CaptureSink {
                probs: None,
                query_key: None,
            };
        };
        let (q, k) = (self.q_per_layer, self.k_per_layer);
        CaptureSink {
            probs: Some(&mut self.probs[slot * self.per_layer..(slot + 1) * self.per_layer]),
            query_key: self.query_key.as_mut().map(|(qs, ks)| {
                (
                    &mut qs[slot * q..(slot + 1) * q],
                    &mut ks[slot * k..(slot + 1) * k],
                )
            }),
        }
    }

    /// The same capture, also keeping what the norm-based analyses need for its layers
    /// (`blocks::values`).
    pub fn with_values(mut self, arch: &Architecture) -> Self {
        self.values = Some(ValueCapture::new(arch, self.queries, self.keys));
        self
    }

    /// Whether the network's layer `l` is captured.
    pub fn keeps_layer(&self, l: usize) -> bool {
        self.slots.get(l).is_some_and(Option::is_some)
    }

    /// The network's layers this capture keeps, ascending.
    pub fn captured_layers(&self) -> Vec<usize> {
        (0..self.slots.len())
            .filter(|&l| self.slots[l].is_some())
            .collect()
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
