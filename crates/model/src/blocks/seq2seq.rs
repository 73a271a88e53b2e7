//! The encoder–decoder stack that BART, mBART, Marian and T5 share: an encoder (bidirectional
//! self-attention), a decoder (causal self-attention, then cross-attention over the encoder's
//! output) and the language-model head.
//!
//! A family fills in the parts ([`Seq2SeqNet`]: post- or pre-norm sublayers, LayerNorm or
//! RMSNorm, learned, sinusoidal or relative positions, a plain or gated feed-forward block, the
//! head and its scale and bias) from its tensors. One run captures three kinds of attention,
//! each in a [`SequenceCapture`] of its own:
//!
//! - encoder self-attention, `[encoder layers, heads, source, source]`;
//! - decoder self-attention, `[decoder layers, heads, target, target]` under the causal mask;
//! - cross-attention, `[decoder layers, heads, target, source]`: decoder queries over the
//!   encoder's keys.
//!
//! The decoder always runs against a [`Seq2SeqCache`]: the keys and values of its own earlier
//! tokens, and each layer's cross-attention keys and values, computed once from the encoder's
//! output. A teacher-forced pass is one call over every decoder token with an empty cache (and
//! captures); greedy generation is one call per token (without captures). Both go through the
//! same layer code.

use super::capture::SequenceCapture;
use super::generate::{self, Generation};
use super::layers::{add_in_place, part, FeedForward, FfnNames, Linear, LinearReader, Norm};
use super::network::{
    Architecture, Batch, DecoderPass, EncodedSource, Forward, KvCache, Network, Seq2Seq,
    Seq2SeqForward,
};
use crate::attention::QueryKey;
use crate::error::Error;
use crate::formats::tensors::Name;
use crate::formats::validate;
use crate::formats::weights::Weight;
use crate::kernels::screen::{screened_logits, LogitScreen};
use crate::kernels::{self, Activation, AttentionSpec, CaptureSink, Layout, Mask, Matrix, Output};
use std::sync::{Arc, Mutex, OnceLock};

/// Where a sublayer's normalisation sits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// `h = norm(h + f(h))` (BART, Marian).
    Post,
    /// `h = h + f(norm(h))` (mBART, T5).
    Pre,
}

/// How a stack learns where its tokens are.
pub enum StackPositions {
    /// A table `[rows, hidden]` added to the token embeddings; position `p` reads row
    /// `p + offset` (BART and mBART: offset 2; Marian's sinusoidal table: 0).
    Table {
        /// The rows.
        table: Weight,
        /// Rows before position 0's.
        offset: usize,
    },
    /// T5's relative position buckets, a bias on the attention scores.
    Relative(RelativeBuckets),
    /// Added before the stack by the family (Whisper's encoder, whose input is no tokens:
    /// [`Seq2SeqNet::run_encoder_rows`]).
    Embedded,
}

/// T5's relative position buckets and the bias of each bucket per head
/// (`relative_attention_bias`, `[buckets, heads]`), mirroring transformers'
/// `T5Attention._relative_position_bucket`.
pub struct RelativeBuckets {
    /// `[buckets, heads]`.
    pub table: Weight,
    /// `relative_attention_num_buckets`.
    pub buckets: usize,
    /// `relative_attention_max_distance`.
    pub max_distance: usize,
    /// Whether a key after the query has buckets of its own (the encoder) or shares bucket 0
    /// with the query itself (the decoder).
    pub bidirectional: bool,
}

impl RelativeBuckets {
    /// The bucket of `relative = key position − query position`, computed in f32 as
    /// transformers computes it, so that the boundaries agree.
    pub fn bucket(&self, relative: i64) -> usize {
        let mut buckets = self.buckets as i64;
        let mut bucket = 0i64;
        let distance = if self.bidirectional {
            buckets /= 2;
            if relative > 0 {
                bucket += buckets;
            }
            relative.abs()
        } else {
            (-relative).max(0)
        };
        let exact = buckets / 2;
        if distance < exact {
            return (bucket + distance) as usize;
        }
        let ratio = (distance as f32 / exact as f32).ln();
        let span = (self.max_distance as f64 / exact as f64).ln() as f32;
        let large = exact + (ratio / span * (buckets - exact) as f32) as i64;
        (bucket + large.min(buckets - 1)) as usize
    }

    /// The bias for `queries` queries at positions `query_offset..` over `keys` keys at
    /// positions `0..keys`.
    fn bias(&self, heads: usize, query_offset: usize, keys: usize) -> RelativeBias {
        // Every relative position from −(last query) to +(last key).
        let low = -((query_offset + keys) as i64);
        let high = keys as i64;
        let span = (high - low + 1) as usize;
        let mut values = vec![0f32; heads * span];
        for (i, rel) in (low..=high).enumerate() {
            let row = &self.table[self.bucket(rel) * heads..][..heads];
            for (h, &v) in row.iter().enumerate() {
                values[h * span + i] = v;
            }
        }
        RelativeBias {
            values,
            span,
            low,
            query_offset,
        }
    }
}

/// One call's relative position bias, by head and relative position.
struct RelativeBias {
    /// `[heads, span]`: the bias of relative position `low + i`.
    values: Vec<f32>,
    span: usize,
    low: i64,
    query_offset: usize,
}

impl kernels::ScoreBias for RelativeBias {
    fn add(&self, _sequence: usize, head: usize, query: usize, scores: &mut [f32]) {
        let q = (query + self.query_offset) as i64;
        let row = &self.values[head * self.span..][..self.span];
        for (k, s) in scores.iter_mut().enumerate() {
            *s += row[(k as i64 - q - self.low) as usize];
        }
    }
}

/// One of the two stacks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The encoder.
    Encoder,
    /// The decoder.
    Decoder,
}

impl Side {
    /// Its module in the checkpoints of BART and T5 (`encoder`, `decoder`).
    pub fn module(self) -> &'static str {
        match self {
            Side::Encoder => "encoder",
            Side::Decoder => "decoder",
        }
    }
}

/// Where an attention sublayer's tensors are (module paths).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttentionNames {
    /// Queries.
    pub q: Name,
    /// Keys.
    pub k: Name,
    /// Values.
    pub v: Name,
    /// The output map.
    pub output: Name,
    /// The sublayer's normalisation.
    pub norm: Name,
}

/// Where one layer's tensors are (module paths).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seq2SeqLayerNames {
    /// Self-attention.
    pub self_attention: AttentionNames,
    /// Cross-attention (decoder layers).
    pub cross: Option<AttentionNames>,
    /// The feed-forward block.
    pub ffn: FfnNames,
    /// Its normalisation.
    pub ffn_norm: Name,
}

impl Seq2SeqLayerNames {
    /// Layer `i` of a stack as BART names it, which mBART, Marian and Whisper share:
    /// `{encoder,decoder}.layers.i.` then `self_attn` and `encoder_attn` (`q_proj`, `k_proj`,
    /// `v_proj`, `out_proj`, each with its `*_layer_norm`), `fc1`, `fc2` and `final_layer_norm`.
    pub fn bart(side: Side, i: usize) -> Seq2SeqLayerNames {
        let layer = Name::root().pp(side.module()).pp("layers").pp(i);
        let attention = |module: &str| {
            let a = layer.pp(module);
            AttentionNames {
                q: a.pp("q_proj"),
                k: a.pp("k_proj"),
                v: a.pp("v_proj"),
                output: a.pp("out_proj"),
                norm: layer.pp(format!("{module}_layer_norm")),
            }
        };
        Seq2SeqLayerNames {
            self_attention: attention("self_attn"),
            cross: (side == Side::Decoder).then(|| attention("encoder_attn")),
            ffn: FfnNames::Plain {
                expand: layer.pp("fc1"),
                project: layer.pp("fc2"),
            },
            ffn_norm: layer.pp("final_layer_norm"),
        }
    }
}

/// Reads a normalisation of a block by name, as the family stores it (LayerNorm or RMSNorm).
pub type NormReader<'a> = &'a dyn Fn(&Name) -> Result<Norm, Error>;

/// The sizes of one layer's maps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LayerShape {
    /// The hidden size.
    pub hidden: usize,
    /// Heads × head size (the hidden size but for T5's `d_kv`).
    pub inner: usize,
    /// The feed-forward block's inner size.
    pub ffn: usize,
    /// Its activation.
    pub activation: Activation,
}

impl Seq2SeqLayer {
    /// The layer `names` gives, of `shape`, its maps read by `linear` and its norms by `norm`.
    pub fn load(
        names: &Seq2SeqLayerNames,
        shape: LayerShape,
        linear: LinearReader<'_>,
        norm: NormReader<'_>,
    ) -> Result<Seq2SeqLayer, Error> {
        let (d, inner) = (shape.hidden, shape.inner);
        let a = &names.self_attention;
        let cross = match &names.cross {
            Some(c) => Some(CrossAttention {
                q: linear(&c.q, d, inner)?,
                kv: Linear::stack(vec![linear(&c.k, d, inner)?, linear(&c.v, d, inner)?]),
                output: linear(&c.output, inner, d)?,
                norm: norm(&c.norm)?,
            }),
            None => None,
        };
        Ok(Seq2SeqLayer {
            self_attention: SelfAttention {
                qkv: Linear::stack(vec![
                    linear(&a.q, d, inner)?,
                    linear(&a.k, d, inner)?,
                    linear(&a.v, d, inner)?,
                ]),
                output: linear(&a.output, inner, d)?,
                norm: norm(&a.norm)?,
            },
            cross,
            ffn: FeedForward::load(&names.ffn, d, shape.ffn, shape.activation, linear)?,
            ffn_norm: norm(&names.ffn_norm)?,
        })
    }
}

/// Self-attention: q, k and v side by side from one input, and the output map.
pub struct SelfAttention {
    /// q | k | v, `[hidden] → [3 · heads · head_dim]`.
    pub qkv: Linear,
    /// Back to the hidden size.
    pub output: Linear,
    /// Its sublayer's normalisation.
    pub norm: Norm,
}

/// Cross-attention: queries from the decoder, keys and values from the encoder's output.
pub struct CrossAttention {
    /// Queries, `[hidden] → [heads · head_dim]`.
    pub q: Linear,
    /// k | v of the encoder's output, `[hidden] → [2 · heads · head_dim]`.
    pub kv: Linear,
    /// Back to the hidden size.
    pub output: Linear,
    /// Its sublayer's normalisation.
    pub norm: Norm,
}

/// One layer of either stack.
pub struct Seq2SeqLayer {
    /// Self-attention (bidirectional in the encoder, causal in the decoder).
    pub self_attention: SelfAttention,
    /// Cross-attention (decoder layers only).
    pub cross: Option<CrossAttention>,
    /// The feed-forward block.
    pub ffn: FeedForward,
    /// Its normalisation.
    pub ffn_norm: Norm,
}

/// One stack (encoder or decoder).
pub struct Stack {
    /// Its layers, first to last.
    pub layers: Vec<Seq2SeqLayer>,
    /// Positions.
    pub positions: StackPositions,
    /// Normalisation of the embeddings (BART's `layernorm_embedding`).
    pub embed_norm: Option<Norm>,
    /// Normalisation after the last layer (mBART's `layer_norm`, T5's `final_layer_norm`).
    pub final_norm: Option<Norm>,
}

/// The language-model head.
pub enum Seq2SeqHead {
    /// The shared token embeddings.
    Tied,
    /// A matrix of its own (`lm_head.weight`, `[vocab, hidden]`).
    Separate(Linear),
}

/// An encoder–decoder network with its weights.
pub struct Seq2SeqNet {
    /// The encoder's shape (what [`Network::architecture`] reports: its forward pass runs the
    /// encoder alone).
    pub encoder_arch: Architecture,
    /// The decoder's shape (mask causal); cross-attention has the decoder's layers and heads.
    pub decoder_arch: Architecture,
    /// Token embeddings `[vocab, hidden]`, shared by both stacks.
    pub shared: Weight,
    /// Factor on the token embeddings (`√d_model` with `scale_embedding`, else 1).
    pub embed_scale: f32,
    /// Pre- or post-norm sublayers.
    pub placement: Placement,
    /// Factor on `q·k` (`1/√head_dim`; 1 for T5).
    pub scale: f32,
    /// The encoder.
    pub encoder: Stack,
    /// The decoder.
    pub decoder: Stack,
    /// The language-model head.
    pub head: Seq2SeqHead,
    /// Factor on the decoder's output before the head (T5's `d_model^-0.5`; else 1).
    pub output_scale: f32,
    /// Added to the logits (`final_logits_bias`), when the checkpoint has it.
    pub logits_bias: Option<Weight>,
    /// The token the decoder starts from (`decoder_start_token_id`).
    pub decoder_start: u32,
    /// The padding token (`pad_token_id`).
    pub pad: u32,
    /// The tied head's 8-bit screen for greedy decoding, made at the first long generation
    /// (`None` inside: the head cannot be screened).
    pub screen: OnceLock<Option<LogitScreen>>,
}

/// The decoder's state for one source: each layer's cross-attention keys and values (from the
/// encoder's output), and the self-attention keys and values of the decoder tokens run so far.
pub struct Seq2SeqCache {
    /// Per decoder layer, `[source, 2 · heads · head_dim]`: k | v (shared by every decoder
    /// pass over the same encoder output).
    cross: Arc<Vec<Vec<f32>>>,
    /// The decoder's own keys and values, `[capacity, heads · head_dim]` per layer.
    own: KvCache,
    source: usize,
}

impl Seq2SeqCache {
    /// Decoder tokens cached.
    pub fn len(&self) -> usize {
        self.own.len()
    }

    /// Whether no decoder token is cached yet.
    pub fn is_empty(&self) -> bool {
        self.own.is_empty()
    }

    /// Source tokens the cross-attention reads.
    pub fn source_len(&self) -> usize {
        self.source
    }
}

/// The capture sinks of one layer, or none.
fn sink_of<'a>(capture: &'a mut Option<&mut SequenceCapture>, layer: usize) -> CaptureSink<'a> {
    match capture {
        Some(c) => c.layer(layer),
        None => CaptureSink {
            probs: None,
            query_key: None,
            summary: None,
        },
    }
}

impl Seq2SeqNet {
    fn hidden(&self) -> usize {
        self.encoder_arch.hidden_size
    }

    /// The embeddings of `ids` (one sequence per `tokens` rows, position `r % tokens + past`),
    /// scaled, plus the stack's position table, normalised where the stack does.
    fn embed(&self, stack: &Stack, ids: &[u32], tokens: usize, past: usize) -> Vec<f32> {
        let w = self.hidden();
        let mut out = vec![0f32; ids.len() * w];
        for (r, (row, &id)) in out.chunks_exact_mut(w).zip(ids).enumerate() {
            let word = &self.shared[id as usize * w..][..w];
            for (o, &x) in row.iter_mut().zip(word) {
                *o = x * self.embed_scale;
            }
            if let StackPositions::Table { table, offset } = &stack.positions {
                let p = r % tokens + past + offset;
                for (o, &x) in row.iter_mut().zip(&table[p * w..][..w]) {
                    *o += x;
                }
            }
        }
        match &stack.embed_norm {
            Some(norm) => norm.forward(&out, None),
            None => out,
        }
    }

    /// `h ← h + f(norm(h))` or `h ← norm(h + f(h))`.
    fn sublayer(&self, h: &mut Vec<f32>, norm: &Norm, f: impl FnOnce(&[f32]) -> Vec<f32>) {
        match self.placement {
            Placement::Pre => {
                let x = norm.forward(h, None);
                let y = f(&x);
                add_in_place(h, &y);
            }
            Placement::Post => {
                let y = f(h);
                *h = norm.forward(&y, Some(h));
            }
        }
    }

    /// The encoder over a padded batch, each sequence's attention into its capture (one per
    /// sequence, or none at all); returns its output `[sequences · tokens, hidden]`.
    pub fn run_encoder(
        &self,
        ids: &[u32],
        lengths: &[usize],
        tokens: usize,
        captures: &mut [&mut SequenceCapture],
    ) -> Vec<f32> {
        let h = self.embed(&self.encoder, ids, tokens, 0);
        self.run_encoder_rows(h, lengths, tokens, captures)
    }

    /// The encoder's layers (and its final norm) over input rows `h` `[sequences · tokens,
    /// hidden]` that are embedded already (Whisper's convolutions and positions), each
    /// sequence's attention into its capture (one per sequence, or none at all); returns its
    /// output.
    pub fn run_encoder_rows(
        &self,
        mut h: Vec<f32>,
        lengths: &[usize],
        tokens: usize,
        captures: &mut [&mut SequenceCapture],
    ) -> Vec<f32> {
        let arch = &self.encoder_arch;
        let rows = h.len() / self.hidden();
        let width = 3 * arch.heads * arch.head_dim;
        let hd = arch.heads * arch.head_dim;
        let bias = match &self.encoder.positions {
            StackPositions::Relative(b) => Some(b.bias(arch.heads, 0, tokens)),
            StackPositions::Table { .. } | StackPositions::Embedded => None,
        };
        for (l, layer) in self.encoder.layers.iter().enumerate() {
            let block = &layer.self_attention;
            self.sublayer(&mut h, &block.norm, |x| {
                let qkv = block.qkv.forward(x, rows, Activation::Identity);
                let mut context = vec![0f32; rows * hd];
                // Without captures (generation), every sequence gets an empty sink.
                let mut sinks: Vec<CaptureSink> = if captures.is_empty() {
                    (0..lengths.len())
                        .map(|_| CaptureSink {
                            probs: None,
                            query_key: None,
                            summary: None,
                        })
                        .collect()
                } else {
                    captures.iter_mut().map(|c| c.layer(l)).collect()
                };
                let spec = AttentionSpec {
                    scale: self.scale,
                    mask: Mask::Bidirectional,
                    bias: bias.as_ref().map(|b| b as &dyn kernels::ScoreBias),
                    ..arch.attention(lengths.len(), tokens, tokens)
                };
                // ── capture ── encoder self-attention.
                kernels::attention(
                    part(&qkv, 0, width),
                    part(&qkv, hd, width),
                    part(&qkv, 2 * hd, width),
                    &spec,
                    lengths,
                    lengths,
                    &mut sinks,
                    &mut context,
                );
                block.output.forward(&context, rows, Activation::Identity)
            });
            self.sublayer(&mut h, &layer.ffn_norm, |x| layer.ffn.forward(x, rows));
        }
        match &self.encoder.final_norm {
            Some(norm) => norm.forward(&h, None),
            None => h,
        }
    }

    /// A cache for up to `capacity` decoder tokens over `source` rows of encoder output
    /// (`[source, hidden]`): each decoder layer's cross-attention keys and values.
    pub fn start(&self, encoder_output: &[f32], source: usize, capacity: usize) -> Seq2SeqCache {
        self.start_from(
            Arc::new(self.cross_kv(encoder_output, source)),
            source,
            capacity,
        )
    }

    /// A cache for up to `capacity` decoder tokens over cross-attention keys and values
    /// computed already ([`Seq2SeqNet::cross_kv`]).
    fn start_from(
        &self,
        cross: Arc<Vec<Vec<f32>>>,
        source: usize,
        capacity: usize,
    ) -> Seq2SeqCache {
        let arch = &self.decoder_arch;
        let hd = arch.heads * arch.head_dim;
        Seq2SeqCache {
            cross,
            own: KvCache::new(self.decoder.layers.len(), capacity, hd),
            source,
        }
    }

    /// Each decoder layer's cross-attention keys and values `[source, 2 · heads · head_dim]`
    /// over `source` rows of encoder output.
    fn cross_kv(&self, encoder_output: &[f32], source: usize) -> Vec<Vec<f32>> {
        assert_eq!(
            encoder_output.len(),
            source * self.hidden(),
            "encoder output"
        );
        self.decoder
            .layers
            .iter()
            .map(|layer| {
                let block = layer.cross.as_ref().expect("decoder layers cross-attend");
                block
                    .kv
                    .forward(encoder_output, source, Activation::Identity)
            })
            .collect()
    }

    /// Run decoder tokens `ids` after those in `cache` (adding theirs to it); returns the
    /// decoder's output rows `[ids, hidden]` (after its final norm). With `captures` (decoder
    /// self-attention, cross-attention), the cache must be empty: the captures cover all of
    /// `ids`.
    pub fn run_decoder(
        &self,
        ids: &[u32],
        cache: &mut Seq2SeqCache,
        mut captures: Option<(&mut SequenceCapture, &mut SequenceCapture)>,
    ) -> Vec<f32> {
        let arch = &self.decoder_arch;
        let (past, rows, source) = (cache.own.len, ids.len(), cache.source);
        assert!(
            rows > 0 && past + rows <= cache.own.capacity,
            "{rows} decoder tokens after {past} in a cache of {}",
            cache.own.capacity
        );
        assert!(
            captures.is_none() || past == 0,
            "captures cover a whole run"
        );
        let total = past + rows;
        let hd = arch.heads * arch.head_dim;
        let width = 3 * hd;
        let bias = match &self.decoder.positions {
            StackPositions::Relative(b) => Some(b.bias(arch.heads, past, total)),
            StackPositions::Table { .. } | StackPositions::Embedded => None,
        };
        let (mut own_capture, mut cross_capture) = match captures.take() {
            Some((a, b)) => (Some(a), Some(b)),
            None => (None, None),
        };
        let mut h = self.embed(&self.decoder, ids, rows, past);
        for (l, layer) in self.decoder.layers.iter().enumerate() {
            let block = &layer.self_attention;
            let own = &mut cache.own.layers[l];
            self.sublayer(&mut h, &block.norm, |x| {
                let qkv = block.qkv.forward(x, rows, Activation::Identity);
                own.store(past, &qkv, width, hd, hd);
                let mut context = vec![0f32; rows * hd];
                let spec = AttentionSpec {
                    scale: self.scale,
                    mask: Mask::Causal,
                    bias: bias.as_ref().map(|b| b as &dyn kernels::ScoreBias),
                    ..arch.attention(1, rows, total)
                };
                // ── capture ── decoder self-attention (causal).
                kernels::attention(
                    part(&qkv, 0, width),
                    part(&own.keys, 0, hd),
                    part(&own.values, 0, hd),
                    &spec,
                    &[rows],
                    &[total],
                    &mut [sink_of(&mut own_capture, l)],
                    &mut context,
                );
                block.output.forward(&context, rows, Activation::Identity)
            });
            let cross = layer.cross.as_ref().expect("decoder layers cross-attend");
            let kv = &cache.cross[l];
            self.sublayer(&mut h, &cross.norm, |x| {
                let q = cross.q.forward(x, rows, Activation::Identity);
                let mut context = vec![0f32; rows * hd];
                let spec = AttentionSpec {
                    scale: self.scale,
                    mask: Mask::Bidirectional,
                    ..arch.attention(1, rows, source)
                };
                // ── capture ── cross-attention: decoder queries over encoder keys.
                kernels::attention(
                    part(&q, 0, hd),
                    part(kv, 0, 2 * hd),
                    part(kv, hd, 2 * hd),
                    &spec,
                    &[rows],
                    &[source],
                    &mut [sink_of(&mut cross_capture, l)],
                    &mut context,
                );
                cross.output.forward(&context, rows, Activation::Identity)
            });
            self.sublayer(&mut h, &layer.ffn_norm, |x| layer.ffn.forward(x, rows));
        }
        cache.own.len = total;
        match &self.decoder.final_norm {
            Some(norm) => norm.forward(&h, None),
            None => h,
        }
    }

    /// The logits `[vocab]` that follow one decoder output row.
    pub fn logits(&self, row: &[f32]) -> Vec<f32> {
        let vocab = self.decoder_arch.vocab_size;
        let scaled: Vec<f32>;
        let row = if self.output_scale == 1.0 {
            row
        } else {
            scaled = row.iter().map(|x| x * self.output_scale).collect();
            &scaled
        };
        let mut out = vec![0f32; vocab];
        let output = Output {
            data: &mut out,
            stride: vocab,
            col0: 0,
        };
        match &self.head {
            Seq2SeqHead::Tied => kernels::linear(
                row,
                1,
                Matrix {
                    data: &self.shared,
                    inputs: self.hidden(),
                    outputs: vocab,
                    layout: Layout::OutIn,
                },
                None,
                output,
                Activation::Identity,
            ),
            Seq2SeqHead::Separate(head) => head.forward_into(row, 1, output, Activation::Identity),
        }
        if let Some(bias) = &self.logits_bias {
            add_in_place(&mut out, bias);
        }
        out
    }
}

impl Seq2Seq for Seq2SeqNet {
    fn encoder_architecture(&self) -> &Architecture {
        &self.encoder_arch
    }

    fn decoder_architecture(&self) -> &Architecture {
        &self.decoder_arch
    }

    fn decoder_start(&self) -> u32 {
        self.decoder_start
    }

    fn decoder_positions(&self) -> usize {
        self.decoder_arch.max_positions
    }

    fn forward_ids(
        &self,
        source: &[u32],
        decoder: &[u32],
        capture_query_key: bool,
    ) -> Result<Seq2SeqForward, Error> {
        let n = source.len();
        let h = self.embed(&self.encoder, source, n, 0);
        self.forward_rows(h, decoder, capture_query_key)
    }

    fn greedy(
        &self,
        source: &[u32],
        max_new_tokens: usize,
        eos: &[u32],
        forced: (Option<u32>, Option<u32>),
        progress: &mut (dyn FnMut(usize) + Send),
    ) -> Result<Generation, Error> {
        let n = source.len();
        let encoder_hidden = self.run_encoder(source, &[n], n, &mut []);
        let mut cache = self.start(&encoder_hidden, n, max_new_tokens + 1);
        let width = self.hidden();
        let mut step = |ids: &[u32]| {
            let out = self.run_decoder(ids, &mut cache, None);
            Ok(self.logits(&out[(ids.len() - 1) * width..]))
        };
        generate::greedy(
            &[self.decoder_start],
            max_new_tokens,
            eos,
            forced,
            &mut step,
            progress,
        )
    }
}

impl Seq2SeqNet {
    /// [`Seq2Seq::forward_ids`] from the encoder's input rows `h` `[source, hidden]`, embedded
    /// already (token ids, or Whisper's spectrogram through its convolutions).
    pub fn forward_rows(
        &self,
        h: Vec<f32>,
        decoder: &[u32],
        capture_query_key: bool,
    ) -> Result<Seq2SeqForward, Error> {
        let source = self.encode_rows(h, true, capture_query_key)?;
        let pass = self.decode_encoded(&source, decoder, capture_query_key)?;
        Ok(Seq2SeqForward {
            encoder: source.encoder,
            decoder: pass.decoder,
            cross: pass.cross,
            logits: pass.logits,
        })
    }

    /// The encoder over its input rows `h` `[source, hidden]` (embedded already), kept for the
    /// decoder passes that follow ([`Seq2SeqNet::greedy_encoded`],
    /// [`Seq2SeqNet::decode_encoded`]): its self-attention captured when `capture` is set
    /// (each row checked to be a distribution), and each decoder layer's cross-attention keys
    /// and values.
    pub fn encode_rows(
        &self,
        h: Vec<f32>,
        capture: bool,
        capture_query_key: bool,
    ) -> Result<EncodedSource, Error> {
        let n = h.len() / self.hidden();
        let enc = &self.encoder_arch;
        let mut cap = capture.then(|| SequenceCapture::new(enc, n, n, capture_query_key));
        let hidden = match cap.as_mut() {
            Some(c) => self.run_encoder_rows(h, &[n], n, &mut [c]),
            None => self.run_encoder_rows(h, &[n], n, &mut []),
        };
        let (weights, query_key) = match cap {
            Some(c) => {
                validate::check_rows(&c.probs, enc.layers, enc.heads, n)?;
                (c.probs, c.query_key)
            }
            None => (Vec::new(), None),
        };
        let cross = Arc::new(self.cross_kv(&hidden, n));
        Ok(EncodedSource {
            encoder: Forward {
                weights,
                hidden,
                query_key: query_key.map(|(queries, keys)| QueryKey {
                    queries,
                    keys,
                    scale: Some(self.scale),
                }),
                routing: Vec::new(),
            },
            cross,
            source: n,
        })
    }

    /// A teacher-forced decoder pass over `decoder` ids against an encoder pass kept in
    /// `source`, capturing the decoder's self-attention and the cross-attention (each row
    /// checked to be a distribution).
    pub fn decode_encoded(
        &self,
        source: &EncodedSource,
        decoder: &[u32],
        capture_query_key: bool,
    ) -> Result<DecoderPass, Error> {
        let (n, m) = (source.source, decoder.len());
        let dec = &self.decoder_arch;
        let mut dec_cap = SequenceCapture::new(dec, m, m, capture_query_key);
        let mut cross_cap = SequenceCapture::new(dec, m, n, capture_query_key);
        let mut cache = self.start_from(source.cross.clone(), n, m);
        let decoder_hidden =
            self.run_decoder(decoder, &mut cache, Some((&mut dec_cap, &mut cross_cap)));
        let width = dec.hidden_size;
        let logits = self.logits(&decoder_hidden[(m - 1) * width..]);
        validate::check_rows(&dec_cap.probs, dec.layers, dec.heads, m)?;
        validate::check_rect_rows(&cross_cap.probs, dec.layers, dec.heads, m, n)?;
        let forward = |cap: SequenceCapture, hidden: Vec<f32>| Forward {
            weights: cap.probs,
            hidden,
            query_key: cap.query_key.map(|(queries, keys)| QueryKey {
                queries,
                keys,
                scale: Some(self.scale),
            }),
            routing: Vec::new(),
        };
        Ok(DecoderPass {
            decoder: forward(dec_cap, decoder_hidden),
            cross: forward(cross_cap, Vec::new()),
            logits,
        })
    }

    /// Greedy decoding after `prompt` against an encoder pass kept in `source`, `rule`
    /// applied to each step's logits ([`generate::greedy_ruled`]). When `rule` only masks
    /// (sets logits to −∞ whatever their values) and the generation may be long, the tied head
    /// is read through its 8-bit screen ([`LogitScreen`]): the same tokens, a quarter of the
    /// bytes per step.
    #[allow(clippy::too_many_arguments)]
    pub fn greedy_encoded(
        &self,
        source: &EncodedSource,
        prompt: &[u32],
        max_new_tokens: usize,
        eos: &[u32],
        rule: &mut (dyn FnMut(&[u32], &mut [f32]) + Send),
        masks_only: bool,
        progress: &mut (dyn FnMut(usize) + Send),
    ) -> Result<Generation, Error> {
        let mut cache = self.start_from(
            source.cross.clone(),
            source.source,
            prompt.len() + max_new_tokens,
        );
        let width = self.hidden();
        let screen = if masks_only && max_new_tokens >= SCREEN_MIN_TOKENS {
            self.logit_screen()
        } else {
            None
        };
        // The step and the rule both call `rule`, one after the other.
        let rule = Mutex::new(rule);
        let mut seen: Vec<u32> = Vec::new();
        let mut step = |ids: &[u32]| {
            seen.extend_from_slice(ids);
            let out = self.run_decoder(ids, &mut cache, None);
            let row = &out[(ids.len() - 1) * width..];
            if let Some(screen) = screen {
                let mut mask = |l: &mut [f32]| (rule.lock().expect("rule"))(&seen, l);
                if let Some(rows) = screen.candidates(row, &mut mask) {
                    return Ok(screened_logits(&self.shared, width, row, &rows));
                }
            }
            Ok(self.logits(row))
        };
        let mut apply = |ids: &[u32], l: &mut [f32]| (rule.lock().expect("rule"))(ids, l);
        generate::greedy_ruled(prompt, max_new_tokens, eos, &mut apply, &mut step, progress)
    }

    /// The head's screen, made once: for a tied head read as it is (no scale before it, no
    /// bias after it).
    pub(crate) fn logit_screen(&self) -> Option<&LogitScreen> {
        self.screen
            .get_or_init(|| {
                let plain = matches!(self.head, Seq2SeqHead::Tied)
                    && self.output_scale == 1.0
                    && self.logits_bias.is_none();
                plain
                    .then(|| {
                        LogitScreen::new(&self.shared, self.decoder_arch.vocab_size, self.hidden())
                    })
                    .flatten()
            })
            .as_ref()
    }
}

/// Generations shorter than this read the head in full: making the screen reads it once.
const SCREEN_MIN_TOKENS: usize = 16;

impl Network for Seq2SeqNet {
    fn architecture(&self) -> &Architecture {
        &self.encoder_arch
    }

    /// The encoder alone: its self-attention into the captures.
    fn forward(&self, batch: &Batch<'_>, captures: &mut [SequenceCapture]) -> Vec<f32> {
        let mut refs: Vec<&mut SequenceCapture> = captures.iter_mut().collect();
        self.run_encoder(batch.ids, batch.lengths, batch.tokens, &mut refs)
    }

    fn seq2seq(&self) -> Option<&dyn Seq2Seq> {
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buckets(bidirectional: bool) -> RelativeBuckets {
        RelativeBuckets {
            table: Weight::owned(vec![0.0; 32], vec![32, 1]),
            buckets: 32,
            max_distance: 128,
            bidirectional,
        }
    }

    /// Buckets by transformers' formula, in f64 (the boundaries below are far from any
    /// rounding question): exact below 8 (16 each way in the encoder), then logarithmic to 128.
    #[test]
    fn relative_buckets_follow_t5() {
        let enc = buckets(true);
        assert_eq!(enc.bucket(0), 0);
        assert_eq!(enc.bucket(-1), 1);
        assert_eq!(enc.bucket(1), 17);
        assert_eq!(enc.bucket(-7), 7);
        assert_eq!(enc.bucket(7), 23);
        // 8 + floor(ln(d/8)/ln(16)·8)
        assert_eq!(enc.bucket(-8), 8);
        assert_eq!(enc.bucket(-16), 10);
        assert_eq!(enc.bucket(-127), 15);
        assert_eq!(enc.bucket(-1000), 15);
        assert_eq!(enc.bucket(1000), 31);
        let dec = buckets(false);
        assert_eq!(dec.bucket(3), 0, "a later key shares the query's bucket");
        assert_eq!(dec.bucket(-3), 3);
        // 16 + floor(ln(d/16)/ln(8)·16)
        assert_eq!(dec.bucket(-16), 16);
        assert_eq!(dec.bucket(-32), 21);
        assert_eq!(dec.bucket(-500), 31);
    }
}
