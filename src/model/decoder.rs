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
use super::error::Error;
use super::family::{Architecture, Batch, Network};
use super::formats::tensors::Tensors;
use super::formats::weights::Weight;
use super::kernels::{
    self, Activation, AttentionSpec, CaptureSink, EmbeddingTables, Layout, Matrix, Operand, Output,
    Rope, RopeTable,
};
use super::layers::{Linear, Norm};

/// A linear map on a weight stored `[outputs, inputs]` (PyTorch's `nn.Linear`), with an optional
/// bias.
pub fn out_in_linear(
    t: &dyn Tensors,
    name: &str,
    inputs: usize,
    outputs: usize,
    bias: bool,
) -> Result<Linear, Error> {
    let weight = t.weight(&format!("{name}.weight"), &[outputs, inputs])?;
    let bias = if bias {
        Some(t.weight(&format!("{name}.bias"), &[outputs])?)
    } else {
        None
    };
    Ok(Linear::new(weight, Layout::OutIn, bias))
}

/// How positions reach the model.
pub enum Positional {
    /// A learned table `[max_positions, hidden]` added to the token embeddings (GPT-2).
    Learned(Weight),
    /// Rotary embeddings of q and k inside attention (Llama).
    Rotary(Rope),
}

/// The position-wise feed-forward block.
pub enum FeedForward {
    /// `project(act(expand(x)))` (GPT-2's `c_fc`, `c_proj`).
    Plain {
        /// To the inner size, with the activation.
        expand: Linear,
        /// Its activation.
        activation: Activation,
        /// Back to the hidden size.
        project: Linear,
    },
    /// `down(act(gate(x)) · up(x))` (SwiGLU: Llama's `gate_proj`, `up_proj`, `down_proj`).
    Gated {
        /// The gate, through the activation.
        gate: Linear,
        /// The linear half.
        up: Linear,
        /// The gate's activation.
        activation: Activation,
        /// Back to the hidden size.
        down: Linear,
    },
}

impl FeedForward {
    /// `rows` rows of `x` through the block.
    pub(crate) fn forward(&self, x: &[f32], rows: usize) -> Vec<f32> {
        match self {
            FeedForward::Plain {
                expand,
                activation,
                project,
            } => {
                let inner = expand.forward(x, rows, *activation);
                project.forward(&inner, rows, Activation::Identity)
            }
            FeedForward::Gated {
                gate,
                up,
                activation,
                down,
            } => {
                let mut g = gate.forward(x, rows, Activation::Identity);
                let u = up.forward(x, rows, Activation::Identity);
                kernels::activation::gate(&mut g, &u, *activation);
                drop(u);
                down.forward(&g, rows, Activation::Identity)
            }
        }
    }
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
    /// Factor on `q·k` (`1/√head_dim`; GPT-2 may also divide by the layer number).
    pub scale: f32,
}

/// Where a layer's attention finds its keys and values.
enum Keys<'a> {
    /// Those of the same padded batch (a forward pass over whole sequences).
    Batch(&'a Batch<'a>),
    /// A cache holding `past` earlier tokens' keys and values, to which this call's are added.
    Cache {
        layer: &'a mut CachedLayer,
        past: usize,
    },
}

impl DecoderLayer {
    /// `h += attention(norm(h)); h += ffn(norm(h))` for `rows` rows of `h`.
    fn forward(
        &self,
        h: &mut [f32],
        rows: usize,
        rope: Option<&RopeTable>,
        arch: &Architecture,
        keys: Keys<'_>,
        sinks: &mut [CaptureSink<'_>],
    ) {
        let (heads, kv, d) = (arch.heads, arch.kv_heads, arch.head_dim);
        let width = (heads + 2 * kv) * d;
        let x = self.attention_norm.forward(h, None);
        let mut qkv = vec![0f32; rows * width];
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
        if let Some(table) = rope {
            table.rotate(&mut qkv, width, 0, heads);
            table.rotate(&mut qkv, width, heads * d, kv);
        }
        let mut context = vec![0f32; rows * heads * d];
        // ── capture ── the kernel writes P (and Q, K on request) straight into `sinks`.
        match keys {
            Keys::Batch(batch) => {
                let spec = self.spec(arch, batch.lengths.len(), batch.tokens, batch.tokens);
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
            Keys::Cache { layer, past } => {
                let kw = kv * d;
                for (r, row) in qkv.chunks_exact(width).enumerate() {
                    let at = (past + r) * kw;
                    layer.keys[at..at + kw].copy_from_slice(&row[heads * d..][..kw]);
                    layer.values[at..at + kw].copy_from_slice(&row[(heads + kv) * d..][..kw]);
                }
                let total = past + rows;
                let spec = self.spec(arch, 1, rows, total);
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
        drop(qkv);
        let attended = self.output.forward(&context, rows, Activation::Identity);
        drop(context);
        add_in_place(h, &attended);
        let x = self.ffn_norm.forward(h, None);
        let out = self.ffn.forward(&x, rows);
        add_in_place(h, &out);
    }

    fn spec<'a>(
        &self,
        arch: &'a Architecture,
        batch: usize,
        queries: usize,
        keys: usize,
    ) -> AttentionSpec<'a> {
        AttentionSpec {
            batch,
            query_tokens: queries,
            key_tokens: keys,
            heads: arch.heads,
            kv_heads: arch.kv_heads,
            kv_head: &arch.kv_head,
            head_dim: arch.head_dim,
            scale: self.scale,
            mask: arch.mask,
            bias: None,
        }
    }
}

/// An operand of the attention kernel: rows of `stride` values, heads from `offset` on.
pub(crate) fn part(data: &[f32], offset: usize, stride: usize) -> Operand<'_> {
    Operand {
        data,
        offset,
        stride,
    }
}

/// `h[i] += delta[i]` (the residual connection; transformers adds in the same order, and f32
/// addition is commutative, so the sums agree bit for bit).
pub(crate) fn add_in_place(h: &mut [f32], delta: &[f32]) {
    assert_eq!(h.len(), delta.len(), "residual shapes");
    for (a, b) in h.iter_mut().zip(delta) {
        *a += b;
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
    /// Token embeddings `[vocab, hidden]`.
    pub embed: Weight,
    /// Learned positions or rotary embeddings.
    pub positional: Positional,
    /// The layers, first to last.
    pub layers: Vec<DecoderLayer>,
    /// The final normalisation (`ln_f`, `norm`).
    pub final_norm: Norm,
    /// The language-model head.
    pub lm_head: LmHead,
}

/// One layer's cached keys and values, `[capacity, kv_heads · head_dim]` each.
pub struct CachedLayer {
    keys: Vec<f32>,
    values: Vec<f32>,
}

/// The keys and values of the tokens a sequence has run so far, every layer, after the rotary
/// embedding (a KV cache).
pub struct KvCache {
    layers: Vec<CachedLayer>,
    len: usize,
    capacity: usize,
}

impl KvCache {
    /// Tokens cached.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no token is cached.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The most tokens it can hold.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

/// A decoder that can predict the next token, one step at a time against a [`KvCache`].
pub trait CausalLm: Sync {
    /// An empty cache for up to `capacity` tokens.
    fn new_cache(&self, capacity: usize) -> KvCache;

    /// Run `ids` (at least one; together with those cached at most the cache's capacity and
    /// the model's positions) after the tokens in `cache`, adding theirs to it, and return the
    /// logits `[vocab]` that follow the last of them. Fails when the model has no
    /// language-model head.
    fn step(&self, ids: &[u32], cache: &mut KvCache) -> Result<Vec<f32>, Error>;
}

impl DecoderStack {
    /// Token embeddings (plus learned positions) for `ids` at `positions`.
    fn embed(&self, ids: &[u32], positions: &[usize]) -> Vec<f32> {
        let width = self.arch.hidden_size;
        let tables = EmbeddingTables {
            word: &self.embed,
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

    fn rope_table(&self, positions: &[usize]) -> Option<RopeTable> {
        match &self.positional {
            Positional::Rotary(rope) => Some(rope.table(positions.iter().copied())),
            Positional::Learned(_) => None,
        }
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
            LmHead::Tied => kernels::linear(
                row,
                1,
                Matrix {
                    data: &self.embed,
                    inputs: self.arch.hidden_size,
                    outputs: vocab,
                    layout: Layout::OutIn,
                },
                None,
                output,
                Activation::Identity,
            ),
            LmHead::Separate(head) => head.forward_into(row, 1, output, Activation::Identity),
            LmHead::Missing => {
                return Err(Error::Input(format!(
                    "this {} checkpoint has no language-model head (lm_head.weight): it is a \
                     bare base model, which can be shown but cannot generate; use the \
                     ForCausalLM checkpoint",
                    self.arch.family
                )))
            }
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
        let table = self.rope_table(&positions);
        for (l, layer) in self.layers.iter().enumerate() {
            let mut sinks: Vec<CaptureSink> = captures.iter_mut().map(|c| c.layer(l)).collect();
            layer.forward(
                &mut h,
                rows,
                table.as_ref(),
                &self.arch,
                Keys::Batch(batch),
                &mut sinks,
            );
        }
        self.final_norm.forward(&h, None)
    }

    fn causal_lm(&self) -> Option<&dyn CausalLm> {
        Some(self)
    }
}

impl CausalLm for DecoderStack {
    fn new_cache(&self, capacity: usize) -> KvCache {
        let width = self.arch.kv_heads * self.arch.head_dim;
        KvCache {
            layers: self
                .layers
                .iter()
                .map(|_| CachedLayer {
                    keys: vec![0f32; capacity * width],
                    values: vec![0f32; capacity * width],
                })
                .collect(),
            len: 0,
            capacity,
        }
    }

    fn step(&self, ids: &[u32], cache: &mut KvCache) -> Result<Vec<f32>, Error> {
        let (past, rows) = (cache.len, ids.len());
        assert!(
            rows > 0 && past + rows <= cache.capacity && past + rows <= self.arch.max_positions,
            "{rows} tokens after {past} in a cache of {}",
            cache.capacity
        );
        let positions: Vec<usize> = (past..past + rows).collect();
        let mut h = self.embed(ids, &positions);
        let table = self.rope_table(&positions);
        for (layer, cached) in self.layers.iter().zip(&mut cache.layers) {
            let mut sinks = [CaptureSink {
                probs: None,
                query_key: None,
            }];
            layer.forward(
                &mut h,
                rows,
                table.as_ref(),
                &self.arch,
                Keys::Cache {
                    layer: cached,
                    past,
                },
                &mut sinks,
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
