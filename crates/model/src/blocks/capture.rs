//! What a forward pass captures for one sequence: buffers of their final size, which the
//! attention kernel fills in place, layer by layer. A capture may keep only some layers
//! (`--layers`): the others run without keeping their probabilities. A streamed capture
//! ([`SequenceCapture::streaming`]) keeps one layer's buffer and hands each layer to a
//! [`LayerSink`] as soon as the forward pass has finished it, so the capture never needs to fit
//! in memory.

use std::io;

use super::architecture::Architecture;
use crate::formats::validate;
use crate::kernels::{capture_buffer, CaptureSink};
use attnviz_core::attention::summary::{AttentionSummary, SummaryBuilder, SummarySpec};

/// A [`LayerSink`] that hands its layers on under the model's numbers: a network that captures
/// some of its layers only (a hybrid's full-attention ones) counts them among themselves.
pub(crate) struct Renumbered<'s> {
    /// Where the layers go.
    pub inner: &'s mut dyn LayerSink,
    /// The model's number of each captured layer, by captured index.
    pub numbers: Vec<usize>,
}

impl LayerSink for Renumbered<'_> {
    fn layer(&mut self, layer: CapturedLayer<'_>) -> std::io::Result<()> {
        let number = self.numbers.get(layer.layer).copied().ok_or_else(|| {
            std::io::Error::other(format!(
                "captured layer {} is not among the model's {} captured layers",
                layer.layer,
                self.numbers.len()
            ))
        })?;
        self.inner.layer(CapturedLayer {
            layer: number,
            ..layer
        })
    }
}

/// One layer's attention, handed to a [`LayerSink`] as soon as the forward pass finished it.
#[derive(Clone, Copy, Debug)]
pub struct CapturedLayer<'a> {
    /// The model's number of the layer (from 0).
    pub layer: usize,
    /// Its sliding attention window, if it has one (a query sees the `window` tokens ending at
    /// its own).
    pub window: Option<usize>,
    /// Query heads.
    pub heads: usize,
    /// Query tokens.
    pub queries: usize,
    /// Key tokens.
    pub keys: usize,
    /// The probabilities `[heads, queries, keys]`, every row checked (finite, summing to 1).
    pub probs: &'a [f32],
}

/// Where a streamed capture puts each layer (a file, a network stream, a reduction): the
/// library calls [`LayerSink::layer`] once per captured layer, in ascending order, while the
/// forward pass runs. The buffer is reused for the next layer once the call returns.
pub trait LayerSink: Send {
    /// Take one layer. An error stops the capture: the run fails with it.
    fn layer(&mut self, layer: CapturedLayer<'_>) -> io::Result<()>;
}

/// A streamed capture's sink and the layer its buffer holds.
struct Stream<'s> {
    sink: &'s mut dyn LayerSink,
    /// The network's layer whose probabilities the buffer holds, not yet handed over.
    pending: Option<usize>,
    windows: Vec<Option<usize>>,
    heads: usize,
    /// Whether the rows may sum to less than 1 (a softmax with a learned sink).
    sinks: bool,
    /// The first failure (the sink's, or a row that is not a distribution); later layers are
    /// not handed over.
    failed: Option<StreamError>,
}

/// Why a streamed capture failed.
#[derive(Debug)]
pub enum StreamError {
    /// The sink could not take a layer.
    Sink(io::Error),
    /// A captured row is not a probability distribution (the weights overflow on this input).
    Rows(validate::BadRow),
}

/// Everything captured for one sequence.
pub struct SequenceCapture<'s> {
    /// Attention probabilities `[captured layers, heads, queries, keys]`: row = query, column =
    /// key.
    pub probs: Vec<f32>,
    /// Query vectors `[captured layers, heads, queries, head_dim]` and key vectors `[captured
    /// layers, kv_heads, keys, head_dim]`, as the scores used them (before the scale), when
    /// asked for.
    pub query_key: Option<(Vec<f32>, Vec<f32>)>,
    /// What the norm-based analyses need, when asked for ([`SequenceCapture::with_values`]).
    pub values: Option<ValueCapture>,
    /// The residual stream `[layers + 1, queries, hidden]` at each stage (the embeddings, then
    /// every layer's output), when asked for ([`SequenceCapture::with_residual`]).
    pub residual: Option<Vec<f32>>,
    /// Each head's write to the residual stream at one position, when asked for
    /// ([`SequenceCapture::with_head_outputs`]: per-head direct logit attribution).
    pub head_outputs: Option<HeadCapture>,
    /// What each mixture-of-experts layer's router decided for this sequence's tokens (its
    /// layer number and the routing of its `queries` rows), every such layer whichever layers
    /// the attention keeps; empty for a dense model.
    pub routing: Vec<(usize, super::experts::Routing)>,
    /// Each linear-attention layer's exact token-mixing matrices for this sequence (its layer
    /// number and `[heads, queries, queries]`), when asked for
    /// ([`SequenceCapture::with_mixing`]); a network without such layers leaves it empty.
    pub mixing: Option<Vec<(usize, Vec<f32>)>>,
    queries: usize,
    keys: usize,
    per_layer: usize,
    q_per_layer: usize,
    k_per_layer: usize,
    /// Where each of the network's layers goes in the buffers; `None`: not captured.
    slots: Vec<Option<usize>>,
    stream: Option<Stream<'s>>,
    /// A summarised capture's builders, one per captured layer ([`SequenceCapture::summarising`]).
    summaries: Option<Vec<SummaryBuilder>>,
}

impl<'s> SequenceCapture<'s> {
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
            residual: None,
            head_outputs: None,
            routing: Vec::new(),
            mixing: None,
            queries,
            keys,
            per_layer: heads * queries * keys,
            q_per_layer,
            k_per_layer,
            slots,
            stream: None,
            summaries: None,
        }
    }

    /// A capture of the network's layers `captured` (ascending) that keeps no probabilities,
    /// only their summary ([`attnviz_core::attention::summary`]): the attention kernel
    /// summarises each block of query rows as soon as it is computed. Memory grows with the
    /// sequence (the top keys, sink mass and entropy of each query), never with its square.
    /// [`SequenceCapture::summary`] gives the result after the forward pass. `learned_sink`:
    /// the softmax has a learned sink, whose share of each row is kept too.
    pub fn summarising(
        arch: &Architecture,
        queries: usize,
        keys: usize,
        captured: &[usize],
        spec: &SummarySpec,
        learned_sink: bool,
    ) -> Self {
        let mut capture = Self::for_layers(arch, queries, keys, false, &captured[..0]);
        for (slot, &l) in captured.iter().enumerate() {
            assert!(l < arch.layers, "captured layer {l} of {}", arch.layers);
            capture.slots[l] = Some(slot);
        }
        capture.summaries = Some(
            captured
                .iter()
                .map(|&l| {
                    let b = SummaryBuilder::new(l, arch.heads, queries, keys, spec);
                    if learned_sink {
                        b.with_learned_sink()
                    } else {
                        b
                    }
                })
                .collect(),
        );
        capture
    }

    /// A summarised capture's result, once the forward pass is done; `None` for other captures.
    pub fn summary(&mut self) -> Option<AttentionSummary> {
        let builders = self.summaries.take()?;
        let mut summary = builders.first()?.frame();
        summary.layers = builders.into_iter().map(SummaryBuilder::finish).collect();
        Some(summary)
    }

    /// A capture of the network's layers `captured` (ascending) that keeps one layer's
    /// probabilities and hands each captured layer to `sink` once the forward pass has
    /// finished it (no query/key vectors). Call [`SequenceCapture::finish`] after the forward
    /// pass: it hands over the last layer and says whether every layer reached the sink.
    pub fn streaming(
        arch: &Architecture,
        queries: usize,
        keys: usize,
        captured: &[usize],
        sink: &'s mut dyn LayerSink,
    ) -> Self {
        let mut capture = Self::for_layers(arch, queries, keys, false, &captured[..0]);
        capture.probs = capture_buffer(arch.heads * queries * keys);
        for &l in captured {
            assert!(l < arch.layers, "captured layer {l} of {}", arch.layers);
            capture.slots[l] = Some(0);
        }
        capture.stream = Some(Stream {
            sink,
            pending: None,
            windows: (0..arch.layers).map(|l| arch.window(l)).collect(),
            heads: arch.heads,
            sinks: false,
            failed: None,
        });
        capture
    }

    /// Hand the buffer's layer to the sink, if it holds one not handed over yet.
    fn flush(&mut self) {
        let (queries, keys) = (self.queries, self.keys);
        let Some(stream) = self.stream.as_mut() else {
            return;
        };
        let Some(layer) = stream.pending.take() else {
            return;
        };
        if stream.failed.is_some() {
            return;
        }
        let check = if stream.sinks {
            validate::check_rows_with_sinks
        } else {
            validate::check_rect_rows
        };
        if let Err(e) = check(&self.probs, 1, stream.heads, queries, keys) {
            stream.failed = Some(StreamError::Rows(validate::BadRow { layer, ..e }));
            return;
        }
        let handed = stream.sink.layer(CapturedLayer {
            layer,
            window: stream.windows[layer],
            heads: stream.heads,
            queries,
            keys,
            probs: &self.probs,
        });
        if let Err(e) = handed {
            stream.failed = Some(StreamError::Sink(e));
        }
        // The kernel writes only the cells a query sees: the next layer starts from zeros.
        self.probs.fill(0.0);
    }

    /// After the forward pass of a streamed capture: hand over the last layer, and give the
    /// first failure, if any. Does nothing for a capture kept in memory.
    pub fn finish(&mut self) -> Result<(), StreamError> {
        self.flush();
        match self.stream.as_mut().and_then(|s| s.failed.take()) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The same streamed capture, its rows checked as those of a softmax with a learned sink
    /// (`sinks`: summing to at most 1) rather than summing to 1. A capture kept in memory is
    /// unchanged.
    pub fn with_sinks(mut self, sinks: bool) -> Self {
        if let Some(stream) = self.stream.as_mut() {
            stream.sinks = sinks;
        }
        self
    }

    /// Whether the capture streams its layers to a sink rather than keeping them.
    pub fn is_streaming(&self) -> bool {
        self.stream.is_some()
    }

    /// The part of the buffers that the network's layer `l` writes (nothing when it is not
    /// captured).
    pub fn layer(&mut self, l: usize) -> CaptureSink<'_> {
        // A streamed capture's buffer holds the last layer asked for, which is done once the
        // next one is asked for.
        if self.slots[l].is_some() && self.stream.is_some() {
            self.flush();
            if let Some(stream) = self.stream.as_mut() {
                stream.pending = Some(l);
            }
        }
        if let (Some(slot), Some(builders)) = (self.slots[l], self.summaries.as_mut()) {
            return CaptureSink {
                probs: None,
                query_key: None,
                summary: Some(&mut builders[slot]),
            };
        }
        let Some(slot) = self.slots[l] else {
            return CaptureSink {
                probs: None,
                query_key: None,
                summary: None,
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
            summary: None,
        }
    }

    /// The same capture, also keeping what the norm-based analyses need for its layers
    /// (`blocks::values`), and each layer's ALTI contributions when `alti` asks
    /// ([`LayerValues::mixing`]; they cost more than the rest of the value terms together).
    pub fn with_values(mut self, arch: &Architecture, alti: bool) -> Self {
        let mut values = ValueCapture::new(arch, self.queries, self.keys);
        values.alti = alti;
        self.values = Some(values);
        self
    }

    /// The same capture, also keeping every linear-attention layer's token-mixing matrices
    /// (Qwen3-Next's gated delta layers; see `Network::token_mixing`).
    pub fn with_mixing(mut self) -> Self {
        self.mixing = Some(Vec::new());
        self
    }

    /// The same capture, also keeping the residual stream at every stage (`blocks::lens`).
    pub fn with_residual(mut self, arch: &Architecture) -> Self {
        self.residual = Some(vec![
            0.0;
            (arch.layers + 1) * self.queries * arch.hidden_size
        ]);
        self
    }

    /// The same capture, also keeping the residual stream at position `at` (below the
    /// capture's query count) taken apart by layer and head ([`HeadOutputs`]), which per-head
    /// direct logit attribution reads: filled by the forward pass of a decoder that has such a
    /// side ([`super::network::Network::interventions`]), for a few per cent of the pass.
    pub fn with_head_outputs(mut self, arch: &Architecture, at: usize) -> Self {
        assert!(at < self.queries, "position {at} of {}", self.queries);
        let (layers, hidden) = (arch.layers, arch.hidden_size);
        self.head_outputs = Some(HeadCapture {
            at,
            outputs: HeadOutputs {
                heads: vec![0.0; layers * arch.heads * hidden],
                rest: vec![0.0; layers * hidden],
                residual: vec![0.0; (layers + 1) * hidden],
            },
        });
        self
    }

    /// The probabilities the network's layer `l` wrote, `[heads, queries, keys]`, while the
    /// buffer holds them (a streamed capture: until the next layer starts).
    pub fn layer_probs(&self, l: usize) -> Option<&[f32]> {
        let slot = self.slots.get(l).copied().flatten()?;
        self.probs
            .get(slot * self.per_layer..(slot + 1) * self.per_layer)
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

/// The residual stream of one sequence at one position, taken apart by layer and head, as the
/// forward pass fills it ([`SequenceCapture::with_head_outputs`]).
#[derive(Clone, Debug, PartialEq)]
pub struct HeadCapture {
    /// The position (a query row of the sequence).
    pub at: usize,
    /// What was kept there.
    pub outputs: HeadOutputs,
}

/// What one layer kept for one sequence (see [`super::values`] for the formulas).
#[derive(Clone, Debug, PartialEq)]
pub struct LayerValues {
    /// ‖f_h(x_j)‖, `[heads, keys]`.
    pub value_norms: Vec<f32>,
    /// ‖N f_h(x_j)‖, `[heads, keys]`.
    pub normed_norms: Vec<f32>,
    /// ⟨N f_h(x_i), M x_i⟩, `[heads, queries]`; empty without a residual (cross-attention).
    pub residual_dot: Vec<f32>,
    /// ‖M x_i‖², `[queries]`; empty without a residual.
    pub residual_sq: Vec<f32>,
    /// s_i, `[queries]`: the normalisation's 1/σ_i on the attention's contributions.
    pub value_scale: Vec<f32>,
    /// t_i, `[queries]`: its factor on the residual.
    pub residual_scale: Vec<f32>,
    /// The layer's ALTI contributions `[queries, keys]`, rows summing to 1
    /// (`super::mixing`); empty for cross-attention, and unless [`ValueCapture::alti`] asked.
    pub mixing: Vec<f32>,
}

/// Per captured layer, what [`super::values::fill`] kept for one sequence; `None` where a layer was not run
/// with it (yet).
#[derive(Clone, Debug, PartialEq)]
pub struct ValueCapture {
    /// Query heads.
    pub heads: usize,
    /// Query tokens.
    pub queries: usize,
    /// Key tokens.
    pub keys: usize,
    /// One entry per layer of the network; filled for the captured ones.
    pub layers: Vec<Option<LayerValues>>,
    /// Also compute each layer's ALTI contributions ([`LayerValues::mixing`]).
    pub alti: bool,
}

impl ValueCapture {
    /// Empty, for a network shaped as `arch`.
    pub fn new(arch: &Architecture, queries: usize, keys: usize) -> ValueCapture {
        ValueCapture {
            heads: arch.heads,
            queries,
            keys,
            layers: vec![None; arch.layers],
            alti: false,
        }
    }

    /// The captured layers' values in order, or `None` when one is missing.
    pub fn captured(&self, layers: &[usize]) -> Option<Vec<LayerValues>> {
        layers
            .iter()
            .map(|&l| self.layers.get(l).cloned().flatten())
            .collect()
    }
}

/// One sequence's residual stream at one position, taken apart by layer and head.
#[derive(Clone, Debug, PartialEq)]
pub struct HeadOutputs {
    /// Each head's direct write to the residual stream, `[layers, heads, hidden]`: its share of
    /// the output projection (Σ_j α_ij f_h(x_j), no bias), through the frozen scale of a norm on
    /// the attention output where the block has one (Gemma).
    pub heads: Vec<f32>,
    /// The rest of each layer's write, `[layers, hidden]`: the output projection's bias and the
    /// feed-forward block (the residual's change less the heads' writes).
    pub rest: Vec<f32>,
    /// The residual stream at every stage, `[layers + 1, hidden]` (the embeddings first).
    pub residual: Vec<f32>,
}
