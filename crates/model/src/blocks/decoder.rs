//! The pre-norm decoder stack that decoder-only families share (GPT-2, Llama, Qwen2, Mistral):
//! token embeddings (plus learned positions, or rotary embeddings inside attention), then layers
//! of `h += attention(norm(h))` and `h += feed_forward(norm(h))` under a causal mask, a final
//! norm, and the language-model head.
//!
//! A family fills in the parts ([`DecoderStack`]: which norm, how q/k/v are projected, which
//! feed-forward block, which head) from its tensors, as the encoder families fill in
//! [`super::encoder`]. The stack runs two ways:
//!
//! - [`Network::forward`]: a padded batch, every layer's attention written into the captures;
//! - [`CausalLm::step`]: the next tokens of one sequence against a [`KvCache`] of the keys and
//!   values of the tokens before them (greedy generation), capturing nothing.
//!
//! Both go through the same layer code; keys are cached after the rotary embedding, as
//! transformers caches them.

use super::capture::SequenceCapture;
use super::experts::Routing;
use super::layers::{
    add_in_place, matrix_forward, part, FeedForward, FfnNames, Linear, Norm, NormKind,
};
use super::lens;
use super::network::{
    Architecture, Batch, CausalLm, HeadOutputs, Inserted, Interventions, KvCache, LayerCache,
    Network, Unembedding, ValueZeroing,
};
use super::values::{self, After, LayerTaps, Values};
use crate::error::Error;
use crate::formats::tensors::Name;
use crate::formats::weights::{MatrixWeight, Weight};
use crate::kernels::{
    self, Activation, AttentionSpec, Block, CaptureSink, EmbeddingTables, Layout, Output, Rope,
    RopeTable,
};

/// How positions reach the model.
pub enum Positional {
    /// A learned table `[max_positions, hidden]` added to the token embeddings (GPT-2).
    Learned(Weight),
    /// Rotary embeddings of q and k inside attention (Llama).
    Rotary(Rope),
}

/// Where a pre-norm decoder layer's tensors are (module paths, inside the base model).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecoderLayerNames {
    /// Normalisation before attention.
    pub attention_norm: Name,
    /// The q, k and v projections: one fused map (GPT-2's `c_attn`) or three.
    pub qkv: Vec<Name>,
    /// The output projection.
    pub output: Name,
    /// Normalisation before the feed-forward block.
    pub ffn_norm: Name,
    /// The feed-forward block.
    pub ffn: FfnNames,
}

/// One pre-norm decoder layer.
pub struct DecoderLayer {
    /// Normalisation before attention (`ln_1`, `input_layernorm`).
    pub attention_norm: Norm,
    /// The q, k and v projections, written side by side into one `[rows, (heads + 2·kv_heads) ·
    /// head_dim]` buffer: one fused map (GPT-2's `c_attn`) or three.
    pub qkv: Vec<Linear>,
    /// The output projection (`c_proj`, `o_proj`).
    pub output: Linear,
    /// Normalisation before the feed-forward block (`ln_2`, `post_attention_layernorm`).
    pub ffn_norm: Norm,
    /// The feed-forward block.
    pub ffn: FeedForward,
    /// Factor on `q·k` (`1/√head_dim`; GPT-2 may also divide by the layer number; Gemma's
    /// `query_pre_attn_scalar^-½`).
    pub scale: f32,
    /// What only some families' layers have (q/k norms, post-norms, a window, soft-capping).
    pub options: LayerOptions,
}

/// The parts of a decoder layer that only some families have; `LayerOptions::default()` for a
/// plain Llama/GPT-2 layer.
#[derive(Default)]
pub struct LayerOptions {
    /// RMSNorms over each query head and each key head (`[head_dim]` weights), before the
    /// rotary embedding (Qwen3's and Gemma 3's `q_norm`, `k_norm`).
    pub qk_norm: Option<(Norm, Norm)>,
    /// Norms of the attention's and of the feed-forward block's outputs, before each is added
    /// to the residual stream (Gemma 2/3's `post_attention_layernorm`,
    /// `post_feedforward_layernorm`).
    pub post_norms: Option<(Norm, Norm)>,
    /// The sliding attention window of this layer ([`Architecture::window`]).
    pub window: Option<usize>,
    /// Soft-capping of the attention scores, `tanh(s/c)·c` (Gemma 2).
    pub softcap: Option<f32>,
    /// Whether this layer rotates with the stack's local table
    /// ([`StackOptions::local_rope`]: Gemma 3's sliding layers) rather than the global one.
    pub local_rope: bool,
    /// Whether this layer leaves its queries and keys unrotated (SmolLM3's NoPE layers, whose
    /// `no_rope_layers` entry is 0): it sees positions only through the causal mask.
    pub no_rope: bool,
    /// A learned sink logit per query head that takes a share of every row's softmax
    /// (gpt-oss's `self_attn.sinks`); `None`: none.
    pub sink_logits: Option<Vec<f32>>,
    /// Multi-head latent attention (DeepSeek-V2/V3): the queries, keys and values come from
    /// these projections ([`super::latent`]) instead of [`DecoderLayer::qkv`] (left empty).
    pub latent: Option<Box<super::latent::LatentProjection>>,
    /// Where the rotated values of each query and key head start (0: the head's first values;
    /// DeepSeek's `qk_nope_head_dim`: its rotary part comes last).
    pub rope_offset: usize,
}

/// The parts of a decoder stack that only some families have; `StackOptions::default()` for
/// Llama and GPT-2.
#[derive(Default)]
pub struct StackOptions {
    /// A factor on the token embeddings (Gemma's `√hidden_size`).
    pub embed_scale: Option<f32>,
    /// Soft-capping of the final logits, `tanh(x/c)·c` (Gemma 2's `final_logit_softcapping`).
    pub final_softcap: Option<f32>,
    /// A second rotary embedding for the layers marked [`LayerOptions::local_rope`] (Gemma 3's
    /// `rope_local_base_freq` on its sliding layers).
    pub local_rope: Option<Rope>,
    /// Whether each run of inserted rows (a picture's image tokens) attends to itself in full
    /// under the causal mask (Gemma 3's `token_type_ids` mask); LLaVA's stays causal.
    pub image_blocks: bool,
    /// The rotary position of the first token (PaliGemma's positions count from 1; rotary
    /// attention sees only their differences, but its rounding sees the angles).
    pub rope_from: usize,
    /// Multimodal RoPE (Qwen2.5-VL's `mrope_section`): the rotary frequencies cut into runs
    /// that read the temporal, height and width rows of [`Inserted::positions`]; `None`: one
    /// position per token.
    pub mrope_section: Option<Vec<usize>>,
}

/// Where a layer's attention finds its keys and values.
enum Keys<'a> {
    /// Those of the same padded batch (a forward pass over whole sequences), with the runs of
    /// positions that see each other in full.
    Batch(&'a Batch<'a>, &'a [Block]),
    /// A cache holding `past` earlier tokens' keys and values, to which this call's are added,
    /// with the runs of positions (counted from the first cached one) that see each other.
    Cache {
        layer: &'a mut LayerCache,
        past: usize,
        blocks: &'a [Block],
    },
}

impl DecoderLayer {
    /// `h += attention(norm(h)); h += ffn(norm(h))` for `rows` rows of `h`; `taps` takes the
    /// values for the norm-based analyses when asked. Returns the router's decisions of a
    /// routed-experts block ([`FeedForward::Routed`]); `None` for a dense one.
    #[allow(clippy::too_many_arguments)]
    fn forward(
        &self,
        h: &mut [f32],
        rows: usize,
        tables: [Option<&RopeTable>; 2],
        arch: &Architecture,
        keys: Keys<'_>,
        sinks: &mut [CaptureSink<'_>],
        taps: Option<&mut LayerTaps>,
    ) -> Option<Routing> {
        let (heads, kv, d) = (arch.heads, arch.kv_heads, arch.head_dim);
        let width = (heads + 2 * kv) * d;
        let x = self.attention_norm.forward(h, None);
        let mut qkv = match &self.options.latent {
            Some(latent) => latent.project(&x, rows),
            None => vec![0f32; rows * width],
        };
        let mut col = 0;
        for map in &self.qkv {
            let out = Output {
                data: &mut qkv,
                stride: width,
                col0: col,
            };
            map.forward_into(&x, rows, out, Activation::Identity);
            col += map.outputs();
        }
        drop(x);
        if let Some((qn, kn)) = &self.options.qk_norm {
            norm_heads(qn, &mut qkv, rows, width, 0, heads * d);
            norm_heads(kn, &mut qkv, rows, width, heads * d, kv * d);
        }
        let rope = if self.options.no_rope {
            None
        } else if self.options.local_rope {
            tables[1]
        } else {
            tables[0]
        };
        if let Some(table) = rope {
            let at = self.options.rope_offset;
            table.rotate(&mut qkv, width, at, heads);
            table.rotate(&mut qkv, width, heads * d + at, kv);
        }
        if let (Some(t), Keys::Batch(batch, _)) = (taps.as_deref(), &keys) {
            values::zero_values(t, &mut qkv, batch.tokens, width, (heads + kv) * d, kv * d);
        }
        let mut context = vec![0f32; rows * heads * d];
        // ── capture ── the kernel writes P (and Q, K on request) straight into `sinks`.
        match keys {
            Keys::Batch(batch, blocks) => {
                let spec = AttentionSpec {
                    scale: self.scale,
                    window: self.options.window,
                    softcap: self.options.softcap,
                    blocks,
                    sink_logits: self.options.sink_logits.as_deref(),
                    ..arch.attention(batch.lengths.len(), batch.tokens, batch.tokens)
                };
                kernels::attention(
                    part(&qkv, 0, width),
                    part(&qkv, heads * d, width),
                    part(&qkv, (heads + kv) * d, width),
                    &spec,
                    batch.lengths,
                    batch.lengths,
                    sinks,
                    &mut context,
                );
            }
            Keys::Cache {
                layer,
                past,
                blocks,
            } => {
                let kw = kv * d;
                layer.store(past, &qkv, width, heads * d, kw);
                let total = past + rows;
                let spec = AttentionSpec {
                    scale: self.scale,
                    window: self.options.window,
                    softcap: self.options.softcap,
                    blocks,
                    sink_logits: self.options.sink_logits.as_deref(),
                    ..arch.attention(1, rows, total)
                };
                kernels::attention(
                    part(&qkv, 0, width),
                    part(&layer.keys, 0, kw),
                    part(&layer.values, 0, kw),
                    &spec,
                    &[rows],
                    &[total],
                    sinks,
                    &mut context,
                );
            }
        }
        let mut taps = taps;
        if let Some(t) = taps.as_deref_mut() {
            lens::edit_context(t, &mut context, rows, heads, d);
            if t.keep_context {
                t.context = context.clone();
            }
        }
        let mut attended = self.output.forward(&context, rows, Activation::Identity);
        drop(context);
        if let Some(taps) = taps {
            // The norm-based analyses read the values and a post-norm's input (opt-in).
            if self.options.post_norms.is_some() || taps.keep_context {
                taps.norm_input = Some(attended.clone());
            }
            taps.qkv = qkv;
        }
        if let Some((post, _)) = &self.options.post_norms {
            attended = post.forward(&attended, None);
        }
        add_in_place(h, &attended);
        let x = self.ffn_norm.forward(h, None);
        let (mut out, routing) = match &self.ffn {
            FeedForward::Routed(experts) => {
                let (out, routing) = experts.forward(&x, rows);
                (out, Some(routing))
            }
            ffn => (ffn.forward(&x, rows), None),
        };
        if let Some((_, post)) = &self.options.post_norms {
            out = post.forward(&out, None);
        }
        add_in_place(h, &out);
        routing
    }
}

/// Normalise every head vector (`norm.width()` values) in columns `col0..col0 + cols` of each of
/// `rows` rows of `data` (rows of `stride` values), in place.
fn norm_heads(norm: &Norm, data: &mut [f32], rows: usize, stride: usize, col0: usize, cols: usize) {
    let mut gathered = Vec::with_capacity(rows * cols);
    for r in 0..rows {
        gathered.extend_from_slice(&data[r * stride + col0..][..cols]);
    }
    let normed = norm.forward(&gathered, None);
    for r in 0..rows {
        data[r * stride + col0..][..cols].copy_from_slice(&normed[r * cols..][..cols]);
    }
}

/// The language-model head.
pub enum LmHead {
    /// The token embedding matrix, shared (`tie_word_embeddings`).
    Tied,
    /// A matrix of its own (`lm_head.weight`, `[vocab, hidden]`).
    Separate(Linear),
    /// None in the checkpoint (a bare base model): it can be shown but cannot generate.
    Missing,
}

/// A decoder-only network with its weights.
pub struct DecoderStack {
    /// Its shape (mask causal).
    pub arch: Architecture,
    /// Token embeddings `[vocab, hidden]` (kept in its block format from a GGUF file: only
    /// the rows of the tokens run are decoded).
    pub embed: MatrixWeight,
    /// Learned positions or rotary embeddings.
    pub positional: Positional,
    /// The layers, first to last.
    pub layers: Vec<DecoderLayer>,
    /// The final normalisation (`ln_f`, `norm`).
    pub final_norm: Norm,
    /// The language-model head.
    pub lm_head: LmHead,
    /// What only some families' stacks have (embedding scale, logit soft-capping, a local
    /// rotary embedding).
    pub options: StackOptions,
}

impl DecoderStack {
    /// The runs of `inserted`'s rows (rows of sequences of `tokens` rows, the first at
    /// position `past`) that see each other in full, when the stack has them
    /// ([`StackOptions::image_blocks`]): transformers' `get_block_sequence_ids_for_mask`, one
    /// block per run of consecutive image tokens.
    ///
    /// Or, when `inserted` has a prefix ([`Inserted::prefix`], PaliGemma), one unwindowed
    /// block over it in each sequence of `rows` rows, while the call's rows reach into it.
    fn image_blocks(
        &self,
        inserted: Option<&Inserted>,
        rows: usize,
        tokens: usize,
        past: usize,
    ) -> Vec<Block> {
        let mut blocks: Vec<Block> = Vec::new();
        let Some(inserted) = inserted else {
            return blocks;
        };
        if inserted.prefix > past {
            blocks.extend((0..rows / tokens).map(|sequence| Block {
                sequence,
                start: 0,
                end: inserted.prefix,
                windowed: false,
            }));
            return blocks;
        }
        if !self.options.image_blocks {
            return blocks;
        }
        for &r in &inserted.rows {
            let (sequence, at) = (r / tokens, past + r % tokens);
            match blocks.last_mut() {
                Some(b) if b.sequence == sequence && b.end == at => b.end += 1,
                _ => blocks.push(Block {
                    sequence,
                    start: at,
                    end: at + 1,
                    windowed: true,
                }),
            }
        }
        blocks
    }

    /// Token embeddings (plus learned positions) for `ids` at `positions`.
    fn embed(&self, ids: &[u32], positions: &[usize]) -> Vec<f32> {
        let mut out = self.embed_unscaled(ids, positions);
        // Gemma's √hidden, on stored (GGUF) tables as on f32 ones.
        if let Some(scale) = self.options.embed_scale {
            out.iter_mut().for_each(|v| *v *= scale);
        }
        out
    }

    fn embed_unscaled(&self, ids: &[u32], positions: &[usize]) -> Vec<f32> {
        let width = self.arch.hidden_size;
        let Some(word) = self.embed.as_f32() else {
            let mut out = vec![0f32; ids.len() * width];
            self.embed.gather(ids, &mut out);
            if let Positional::Learned(table) = &self.positional {
                for (row, &p) in out.chunks_exact_mut(width).zip(positions) {
                    add_in_place(row, &table[p * width..][..width]);
                }
            }
            return out;
        };
        let tables = EmbeddingTables {
            word,
            position: match &self.positional {
                Positional::Learned(table) => Some(table),
                Positional::Rotary(_) => None,
            },
            token_type: None,
            norm: None,
            width,
        };
        let mut out = vec![0f32; ids.len() * width];
        kernels::embed(&tables, ids, &[], positions, &mut out);
        out
    }

    /// The global and the local rotary tables at `positions` (for M-RoPE, the rows of
    /// `inserted`'s positions there, and past them the plain position moved by `delta`).
    fn rope_tables(
        &self,
        positions: &[usize],
        inserted: Option<&Inserted>,
        delta: isize,
    ) -> [Option<RopeTable>; 2] {
        let from = self.options.rope_from;
        let at = || positions.iter().map(move |p| p + from);
        let global = match (&self.positional, &self.options.mrope_section) {
            (Positional::Rotary(rope), Some(sections)) => {
                let given = inserted.map_or(&[][..], |i| &i.positions[..]);
                let mut rows: [Vec<usize>; 3] = Default::default();
                for &p in positions {
                    let at = given
                        .get(p)
                        .copied()
                        .unwrap_or_else(|| [(p as isize + delta).max(0) as usize; 3]);
                    for (row, v) in rows.iter_mut().zip(at) {
                        row.push(v);
                    }
                }
                Some(rope.table_sections(&[&rows[0], &rows[1], &rows[2]], sections))
            }
            (Positional::Rotary(rope), None) => Some(rope.table(at())),
            (Positional::Learned(_), _) => None,
        };
        let local = self
            .options
            .local_rope
            .as_ref()
            .map(|rope| rope.table(at()));
        [global, local]
    }

    /// `[vocab]` logits of one final hidden row (after the final norm).
    fn logits(&self, row: &[f32]) -> Result<Vec<f32>, Error> {
        let vocab = self.arch.vocab_size;
        let mut out = vec![0f32; vocab];
        let output = Output {
            data: &mut out,
            stride: vocab,
            col0: 0,
        };
        match &self.lm_head {
            LmHead::Tied => matrix_forward(&self.embed, row, 1, output),
            LmHead::Separate(head) => head.forward_into(row, 1, output, Activation::Identity),
            LmHead::Missing => {
                return Err(crate::InputError::BareBaseModel {
                    family: self.arch.family,
                }
                .into())
            }
        }
        if let Some(cap) = self.options.final_softcap {
            out.iter_mut().for_each(|v| *v = (*v / cap).tanh() * cap);
        }
        Ok(out)
    }
}

impl Network for DecoderStack {
    fn architecture(&self) -> &Architecture {
        &self.arch
    }

    fn forward(&self, batch: &Batch<'_>, captures: &mut [SequenceCapture]) -> Vec<f32> {
        let rows = batch.ids.len();
        let positions: Vec<usize> = (0..rows).map(|r| r % batch.tokens).collect();
        let mut h = self.embed(batch.ids, &positions);
        if let Some(inserted) = batch.inserted {
            inserted.apply(&mut h, self.arch.hidden_size);
        }
        let delta = batch.inserted.map_or(0, Inserted::rope_delta);
        let tables = self.rope_tables(&positions, batch.inserted, delta);
        let blocks = self.image_blocks(batch.inserted, rows, batch.tokens, 0);
        let residual = lens::wanted(captures);
        let heads_wanted = captures.iter().any(|c| c.head_outputs.is_some());
        let hidden = self.arch.hidden_size;
        if heads_wanted {
            keep_head_stage(captures, 0, &h, batch.tokens, hidden);
        }
        for (l, layer) in self.layers.iter().enumerate() {
            if residual {
                lens::keep(captures, l, &h, batch.tokens, hidden);
            }
            let want = values::wanted(captures, l);
            let mut sinks: Vec<CaptureSink> = captures.iter_mut().map(|c| c.layer(l)).collect();
            let tables = [tables[0].as_ref(), tables[1].as_ref()];
            if !want && !heads_wanted {
                let routing = layer.forward(
                    &mut h,
                    rows,
                    tables,
                    &self.arch,
                    Keys::Batch(batch, &blocks),
                    &mut sinks,
                    None,
                );
                drop(sinks);
                keep_routing(captures, l, routing, batch.tokens);
                continue;
            }
            let entering = h.clone();
            let mut taps = LayerTaps {
                keep_context: heads_wanted,
                ..LayerTaps::default()
            };
            let keys = Keys::Batch(batch, &blocks);
            let routing = layer.forward(
                &mut h,
                rows,
                tables,
                &self.arch,
                keys,
                &mut sinks,
                Some(&mut taps),
            );
            drop(sinks);
            keep_routing(captures, l, routing, batch.tokens);
            if heads_wanted {
                self.keep_head_outputs(captures, l, &taps, &entering, &h, batch.tokens);
                keep_head_stage(captures, l + 1, &h, batch.tokens, hidden);
            }
            if !want {
                continue;
            }
            let (heads, kv, d) = (self.arch.heads, self.arch.kv_heads, self.arch.head_dim);
            let after = match &layer.options.post_norms {
                Some((post, _)) => After::Output(post),
                None => After::Nothing,
            };
            values::fill(
                captures,
                l,
                &self.arch,
                batch.tokens,
                Values {
                    data: &taps.qkv,
                    stride: (heads + 2 * kv) * d,
                    offset: (heads + kv) * d,
                },
                &layer.output,
                Some(&entering),
                after,
                taps.norm_input.as_deref(),
            );
        }
        if residual {
            lens::keep(captures, self.layers.len(), &h, batch.tokens, hidden);
        }
        self.final_norm.forward(&h, None)
    }

    fn causal_lm(&self) -> Option<&dyn CausalLm> {
        Some(self)
    }

    fn unembedding(&self) -> Option<&dyn Unembedding> {
        match self.lm_head {
            LmHead::Missing => None,
            _ => Some(self),
        }
    }

    fn interventions(&self) -> Option<&dyn Interventions> {
        match self.lm_head {
            LmHead::Missing => None,
            _ => Some(self),
        }
    }

    fn value_zeroing(&self) -> Option<&dyn ValueZeroing> {
        Some(self)
    }

    fn attention_sinks(&self) -> bool {
        self.layers.iter().any(|l| l.options.sink_logits.is_some())
    }
}

impl ValueZeroing for DecoderStack {
    fn zeroed_layer(
        &self,
        entering: &[f32],
        tokens: usize,
        layer: usize,
        zero: &[usize],
    ) -> Vec<f32> {
        let copies = zero.len();
        let mut h = Vec::with_capacity(copies * entering.len());
        for _ in 0..copies {
            h.extend_from_slice(entering);
        }
        let mut taps = LayerTaps {
            zero_value: zero.iter().copied().map(Some).collect(),
            ..LayerTaps::default()
        };
        self.run_from(&mut h, copies, tokens, layer..layer + 1, Some(&mut taps));
        h
    }
}

impl DecoderStack {
    /// Run layers `layers` over `h`, the residual stream entering the first of them of `seqs`
    /// sequences of `tokens` tokens each, the first with `taps`; `h` becomes the last one's
    /// output (before the final norm).
    fn run_from(
        &self,
        h: &mut [f32],
        seqs: usize,
        tokens: usize,
        layers: std::ops::Range<usize>,
        mut taps: Option<&mut LayerTaps>,
    ) {
        let from = layers.start;
        let rows = seqs * tokens;
        let positions: Vec<usize> = (0..rows).map(|r| r % tokens).collect();
        let tables = self.rope_tables(&positions, None, 0);
        let ids = vec![0u32; rows];
        let lengths = vec![tokens; seqs];
        let batch = Batch {
            ids: &ids,
            types: &ids,
            lengths: &lengths,
            tokens,
            inserted: None,
        };
        for (l, layer) in self.layers.iter().enumerate().take(layers.end).skip(from) {
            let mut sinks: Vec<CaptureSink> = (0..seqs)
                .map(|_| CaptureSink {
                    probs: None,
                    query_key: None,
                    summary: None,
                })
                .collect();
            let t = if l == from { taps.take() } else { None };
            layer.forward(
                h,
                rows,
                [tables[0].as_ref(), tables[1].as_ref()],
                &self.arch,
                Keys::Batch(&batch, &[]),
                &mut sinks,
                t,
            );
        }
    }
}

impl Interventions for DecoderStack {
    fn head_outputs(&self, batch: &Batch<'_>, at: usize) -> HeadOutputs {
        // The forward pass keeps them, capturing no attention.
        let n = batch.tokens;
        let mut captures = [SequenceCapture::for_layers(&self.arch, n, n, false, &[])
            .with_head_outputs(&self.arch, at)];
        self.forward(batch, &mut captures);
        let [capture] = captures;
        capture.head_outputs.expect("asked for").outputs
    }

    fn ablated_logits(
        &self,
        entering: &[f32],
        tokens: usize,
        layer: usize,
        mean: bool,
        at: usize,
    ) -> Vec<f32> {
        let heads = self.arch.heads;
        let hidden = self.arch.hidden_size;
        let mut h = Vec::with_capacity(heads * entering.len());
        for _ in 0..heads {
            h.extend_from_slice(entering);
        }
        let mut taps = LayerTaps {
            ablate: (0..heads).map(Some).collect(),
            ablate_mean: mean,
            ..LayerTaps::default()
        };
        let all = layer..self.layers.len();
        self.run_from(&mut h, heads, tokens, all, Some(&mut taps));
        let last: Vec<f32> = (0..heads)
            .flat_map(|s| h[(s * tokens + at) * hidden..][..hidden].to_vec())
            .collect();
        self.logits_of(&last, heads)
    }

    fn stage(&self, ids: &[u32]) -> Vec<Vec<f32>> {
        let n = ids.len();
        let positions: Vec<usize> = (0..n).collect();
        let mut h = self.embed(ids, &positions);
        let mut stages = vec![h.clone()];
        for l in 0..self.layers.len() {
            let mut taps = LayerTaps::default();
            self.run_layer(&mut h, n, l, &mut taps);
            stages.push(h.clone());
        }
        stages
    }
}

/// Each head's share of an output projection, `[heads, hidden]`, for one row `ctx` of its
/// input (`[heads · d]`): Σ_c ctx[h·d + c] · W[h·d + c, :] without the bias, from the dense
/// weight `w` (`[heads · d, hidden]` for [`Layout::InOut`], `[hidden, heads · d]` for
/// [`Layout::OutIn`]). Each output sums its `d` products in order, whatever the layout, so
/// both layouts give the same floats.
fn head_writes(
    w: &[f32],
    layout: Layout,
    ctx: &[f32],
    heads: usize,
    d: usize,
    hidden: usize,
) -> Vec<f32> {
    let width = heads * d;
    let mut out = vec![0f32; heads * hidden];
    for (head, dst) in out.chunks_exact_mut(hidden).enumerate() {
        let x = &ctx[head * d..][..d];
        match layout {
            Layout::InOut => {
                for (c, &xc) in x.iter().enumerate() {
                    let row = &w[(head * d + c) * hidden..][..hidden];
                    for (o, &wv) in dst.iter_mut().zip(row) {
                        *o += xc * wv;
                    }
                }
            }
            Layout::OutIn => {
                // Eight outputs at a time: eight independent sums, each in the order of c.
                const LANES: usize = 8;
                let mut blocks = dst.chunks_exact_mut(LANES);
                for (b, block) in (&mut blocks).enumerate() {
                    let rows: [&[f32]; LANES] =
                        std::array::from_fn(|k| &w[(b * LANES + k) * width + head * d..][..d]);
                    let mut acc = [0f32; LANES];
                    for (c, &xc) in x.iter().enumerate() {
                        for k in 0..LANES {
                            acc[k] += xc * rows[k][c];
                        }
                    }
                    block.copy_from_slice(&acc);
                }
                let done = hidden - blocks.into_remainder().len();
                for (o, v) in dst.iter_mut().enumerate().skip(done) {
                    let row = &w[o * width + head * d..][..d];
                    *v = x.iter().zip(row).fold(0.0, |acc, (a, b)| acc + a * b);
                }
            }
        }
    }
    out
}

/// Keep layer `l`'s router decisions (rows of a batch padded to `tokens`) in each capture, for
/// its own tokens.
fn keep_routing(
    captures: &mut [SequenceCapture],
    l: usize,
    routing: Option<Routing>,
    tokens: usize,
) {
    let Some(routing) = routing else {
        return;
    };
    for (s, capture) in captures.iter_mut().enumerate() {
        let own = routing.rows_range(s * tokens, capture.queries());
        capture.routing.push((l, own));
    }
}

/// Copy stage `stage` of the residual stream (0: the embeddings; `l + 1`: the output of layer
/// `l`) at each capture's head-output position from `h` (rows of a batch padded to `tokens`).
fn keep_head_stage(
    captures: &mut [SequenceCapture],
    stage: usize,
    h: &[f32],
    tokens: usize,
    hidden: usize,
) {
    for (s, capture) in captures.iter_mut().enumerate() {
        if let Some(kept) = capture.head_outputs.as_mut() {
            kept.outputs.residual[stage * hidden..][..hidden]
                .copy_from_slice(&h[(s * tokens + kept.at) * hidden..][..hidden]);
        }
    }
}

impl DecoderStack {
    /// Keep what layer `l` wrote at each asking capture's position ([`HeadOutputs`]): each
    /// head's share of the output projection ([`head_writes`]), through the frozen scale of a
    /// norm on the attention output (Gemma's post-norm), and the rest of the layer's write (the
    /// residual's change less the heads' shares). `taps` holds the layer's kept output-projection input and output,
    /// `entering` and `h` the residual stream before and after the layer (rows of a batch
    /// padded to `tokens`).
    fn keep_head_outputs(
        &self,
        captures: &mut [SequenceCapture],
        l: usize,
        taps: &LayerTaps,
        entering: &[f32],
        h: &[f32],
        tokens: usize,
    ) {
        let (heads, d, hidden) = (self.arch.heads, self.arch.head_dim, self.arch.hidden_size);
        let layer = &self.layers[l];
        let width = heads * d;
        // The output projection, decoded once for every capture that asks.
        let mut dense = None;
        for (s, capture) in captures.iter_mut().enumerate() {
            let Some(kept) = capture.head_outputs.as_mut() else {
                continue;
            };
            let row = s * tokens + kept.at;
            let ctx = &taps.context[row * width..][..width];
            let attended = &taps.norm_input.as_deref().expect("kept")[row * hidden..][..hidden];
            let weight = dense.get_or_insert_with(|| layer.output.dense());
            let mut writes = head_writes(&weight.0, weight.1, ctx, heads, d, hidden);
            // A norm on the attention output (Gemma's post-norm), frozen at the real output.
            if let Some((post, _)) = &layer.options.post_norms {
                let (gamma, kind, eps) = post.linear_part();
                let scale = 1.0 / lens::spread(attended, kind, eps);
                for write in writes.chunks_exact_mut(hidden) {
                    write
                        .iter_mut()
                        .zip(gamma)
                        .for_each(|(v, g)| *v *= g * scale);
                }
            }
            // The rest of the layer's write: the residual's change less the heads' share.
            let before = &entering[row * hidden..][..hidden];
            let after = &h[row * hidden..][..hidden];
            let rest = &mut kept.outputs.rest[l * hidden..][..hidden];
            for i in 0..hidden {
                let mut heads_total = 0f32;
                for head in 0..heads {
                    heads_total += writes[head * hidden + i];
                }
                rest[i] = after[i] - before[i] - heads_total;
            }
            kept.outputs.heads[l * heads * hidden..][..heads * hidden].copy_from_slice(&writes);
        }
    }

    /// Layer `l` alone over one sequence of `n` tokens, with `taps`.
    fn run_layer(&self, h: &mut [f32], n: usize, l: usize, taps: &mut LayerTaps) {
        let positions: Vec<usize> = (0..n).collect();
        let tables = self.rope_tables(&positions, None, 0);
        let ids = vec![0u32; n];
        let batch = Batch {
            ids: &ids,
            types: &ids,
            lengths: &[n],
            tokens: n,
            inserted: None,
        };
        let mut sinks = [CaptureSink {
            probs: None,
            query_key: None,
            summary: None,
        }];
        self.layers[l].forward(
            h,
            n,
            [tables[0].as_ref(), tables[1].as_ref()],
            &self.arch,
            Keys::Batch(&batch, &[]),
            &mut sinks,
            Some(taps),
        );
    }

    /// Logits (soft cap included) of final residual rows.
    fn logits_of(&self, residual: &[f32], rows: usize) -> Vec<f32> {
        Unembedding::logits(self, residual, rows)
    }
}

impl Unembedding for DecoderStack {
    fn direct(
        &self,
        residual: &[f32],
        parts: &[f32],
        rows: usize,
        tokens: &[u32],
    ) -> Option<(Vec<f32>, Vec<f32>)> {
        let (gamma, kind, eps) = self.final_norm.linear_part();
        let scale = 1.0 / lens::spread(residual, kind, eps);
        let hidden = self.arch.hidden_size;
        let mut normed = Vec::with_capacity((rows + 1) * hidden);
        for part in parts.chunks_exact(hidden) {
            let mean = match kind {
                NormKind::Layer => part.iter().sum::<f32>() / hidden as f32,
                NormKind::Rms => 0.0,
            };
            normed.extend(part.iter().zip(gamma).map(|(v, g)| (v - mean) * g * scale));
        }
        match self.final_norm.layer_params() {
            Some((_, beta, _)) => normed.extend_from_slice(beta),
            None => normed.extend(std::iter::repeat_n(0.0, hidden)),
        }
        // The unembedding's rows of the tokens, `[tokens, hidden]`.
        let mut unembed = vec![0f32; tokens.len() * hidden];
        let rows_of = match &self.lm_head {
            LmHead::Tied => {
                self.embed.gather(tokens, &mut unembed);
                true
            }
            LmHead::Separate(head) => head.weight_rows(tokens, &mut unembed),
            LmHead::Missing => false,
        };
        let t = tokens.len();
        let mut out = vec![0f32; (rows + 1) * t];
        if rows_of {
            for (r, row) in normed.chunks_exact(hidden).enumerate() {
                for (k, u) in unembed.chunks_exact(hidden).enumerate() {
                    out[r * t + k] = row.iter().zip(u).map(|(a, b)| a * b).sum();
                }
            }
        } else {
            let vocab = self.arch.vocab_size;
            let logits = self.head_only(&normed, rows + 1);
            for r in 0..=rows {
                for (k, &tok) in tokens.iter().enumerate() {
                    out[r * t + k] = logits[r * vocab + tok as usize];
                }
            }
        }
        let bias = out.split_off(rows * t);
        Some((out, bias))
    }

    fn softcap(&self) -> Option<f32> {
        self.options.final_softcap
    }

    fn logits(&self, residual: &[f32], rows: usize) -> Vec<f32> {
        let normed = self.final_norm.forward(residual, None);
        let mut out = self.head_only(&normed, rows);
        if let Some(cap) = self.options.final_softcap {
            out.iter_mut().for_each(|v| *v = (*v / cap).tanh() * cap);
        }
        out
    }
}

impl DecoderStack {
    /// The head alone over normalised rows: logits `[rows, vocab]`, no soft cap.
    fn head_only(&self, normed: &[f32], rows: usize) -> Vec<f32> {
        let vocab = self.arch.vocab_size;
        let mut out = vec![0f32; rows * vocab];
        let output = Output {
            data: &mut out,
            stride: vocab,
            col0: 0,
        };
        match &self.lm_head {
            LmHead::Tied => matrix_forward(&self.embed, normed, rows, output),
            LmHead::Separate(head) => head.forward_into(normed, rows, output, Activation::Identity),
            // `unembedding` hands out no head then.
            LmHead::Missing => {}
        }
        out
    }
}

impl CausalLm for DecoderStack {
    fn new_cache(&self, capacity: usize) -> KvCache {
        let width = self.arch.kv_heads * self.arch.head_dim;
        KvCache::new(self.layers.len(), capacity, width)
    }

    fn step_with(
        &self,
        ids: &[u32],
        inserted: Option<&Inserted>,
        cache: &mut KvCache,
    ) -> Result<Vec<f32>, Error> {
        // LongRoPE switches from its short to its long factors once a sequence is longer than
        // the original context, and the keys cached under the short ones no longer fit: as
        // transformers' Phi-3 `prepare_inputs_for_generation`, the first step past that point
        // runs the whole sequence again.
        let long_after = match &self.positional {
            Positional::Rotary(rope) => rope.long_after(),
            Positional::Learned(_) => None,
        };
        if let Some(original) = long_after {
            let past = cache.len;
            if past > 0 && past <= original && past + ids.len() > original {
                let mut all = std::mem::take(&mut cache.ids);
                all.extend_from_slice(ids);
                cache.len = 0;
                // Inserted rows index this call's ids: they move back by the cached ones.
                let moved = inserted.map(|i| Inserted {
                    rows: i.rows.iter().map(|r| r + past).collect(),
                    values: i.values.clone(),
                    prefix: i.prefix,
                    positions: i.positions.clone(),
                });
                return self.step_with(&all, moved.as_ref(), cache);
            }
        }
        cache.ids.extend_from_slice(ids);
        let (past, rows) = (cache.len, ids.len());
        assert!(
            rows > 0 && past + rows <= cache.capacity && past + rows <= self.arch.max_positions,
            "{rows} tokens after {past} in a cache of {}",
            cache.capacity
        );
        let positions: Vec<usize> = (past..past + rows).collect();
        let mut h = self.embed(ids, &positions);
        if let Some(inserted) = inserted {
            inserted.apply(&mut h, self.arch.hidden_size);
        }
        if let Some(i) = inserted.filter(|i| !i.positions.is_empty()) {
            cache.rope_delta = i.rope_delta();
        }
        let tables = self.rope_tables(&positions, inserted, cache.rope_delta);
        let blocks = self.image_blocks(inserted, rows, rows, past);
        for (layer, cached) in self.layers.iter().zip(&mut cache.layers) {
            let mut sinks = [CaptureSink {
                probs: None,
                query_key: None,
                summary: None,
            }];
            layer.forward(
                &mut h,
                rows,
                [tables[0].as_ref(), tables[1].as_ref()],
                &self.arch,
                Keys::Cache {
                    layer: cached,
                    past,
                    blocks: &blocks,
                },
                &mut sinks,
                None,
            );
        }
        cache.len += rows;
        let width = self.arch.hidden_size;
        let last = self
            .final_norm
            .forward(&h[(rows - 1) * width..rows * width], None);
        self.logits(&last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::testing::random;

    #[test]
    fn each_head_s_write_is_its_share_of_the_projection_in_either_layout() {
        let (heads, d, hidden) = (3, 4, 21);
        let width = heads * d;
        let w = random(width * hidden, 6, 1.0);
        let ctx = random(width, 7, 1.0);
        let mut t = vec![0f32; w.len()];
        for c in 0..width {
            for o in 0..hidden {
                t[o * width + c] = w[c * hidden + o];
            }
        }
        let in_out = head_writes(&w, Layout::InOut, &ctx, heads, d, hidden);
        let out_in = head_writes(&t, Layout::OutIn, &ctx, heads, d, hidden);
        // The same sums in the same order: the same floats.
        assert_eq!(in_out, out_in);
        for h in 0..heads {
            for o in 0..hidden {
                let want: f64 = (0..d)
                    .map(|c| ctx[h * d + c] as f64 * w[(h * d + c) * hidden + o] as f64)
                    .sum();
                let got = in_out[h * hidden + o] as f64;
                assert!((got - want).abs() < 1e-5, "head {h}, {o}: {got} vs {want}");
            }
        }
        // The heads' writes add up to the projection of the whole row (without its bias).
        for o in 0..hidden {
            let whole: f64 = (0..width)
                .map(|c| ctx[c] as f64 * w[c * hidden + o] as f64)
                .sum();
            let sum: f64 = (0..heads).map(|h| in_out[h * hidden + o] as f64).sum();
            assert!((sum - whole).abs() < 1e-5);
        }
    }
}
