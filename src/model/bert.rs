//! Our BERT encoder on candle-core tensors, written to read like the paper (Devlin et al. 2019;
//! attention from Vaswani et al. 2017), with the attention probabilities captured on one line.
//!
//! Shapes: `b` sequences in a batch, `n` tokens (padded), `h` heads of size `d`, hidden `h·d`.
//! Everything is f32 on the CPU. candle tensors hold the weights and carry the activations from
//! step to step; the arithmetic of each step is one of our kernels in [`super::kernels`] (fused
//! attention with capture, linear maps with their bias and activation, residual + LayerNorm),
//! which run about four times faster than the same steps as candle operations (see there, and
//! `docs/performance.md`).

use candle_core::{CpuStorage, Device, Storage, StorageRef, Tensor};

use super::config::{Activation, BertConfig};
use super::kernels::{self, AttentionShape, CaptureSink, EmbeddingTables};
use super::validate::{ConfigCount, ConfigDim};
use super::weights::{Checkpoint, WeightsError};

type Result<T> = candle_core::Result<T>;

/// Read access to the elements of a contiguous f32 tensor on the CPU (what the kernels take).
struct Data<'a> {
    storage: StorageRef<'a>,
    start: usize,
    end: usize,
}

impl std::ops::Deref for Data<'_> {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        match &*self.storage {
            Storage::Cpu(CpuStorage::F32(v)) => &v[self.start..self.end],
            _ => unreachable!("checked in data()"),
        }
    }
}

fn data(t: &Tensor) -> Result<Data<'_>> {
    let (storage, layout) = t.storage_and_layout();
    let Some((start, end)) = layout.contiguous_offsets() else {
        candle_core::bail!("the encoder's kernels need contiguous tensors");
    };
    if !matches!(&*storage, Storage::Cpu(CpuStorage::F32(_))) {
        candle_core::bail!("the encoder runs in f32 on the CPU");
    }
    Ok(Data {
        storage,
        start,
        end,
    })
}

/// A new `[b, n, width]` tensor filled by `fill`.
fn new_tensor(b: usize, n: usize, width: usize, fill: impl FnOnce(&mut [f32])) -> Result<Tensor> {
    let mut out = vec![0f32; b * n * width];
    fill(&mut out);
    Tensor::from_vec(out, (b, n, width), &Device::Cpu)
}

/// A linear map `y = x·Wᵀ + b`, with `W` stored transposed (`[in, out]`, contiguous) so the
/// product needs no transpose at run time.
struct Linear {
    weight_t: Tensor,
    bias: Tensor,
}

impl Linear {
    fn load(
        ckpt: &Checkpoint,
        name: &str,
        inputs: usize,
        outputs: usize,
    ) -> std::result::Result<Linear, WeightsError> {
        Linear::load_stacked(ckpt, &[name.to_string()], inputs, outputs)
    }

    /// Several linear maps over the same input, each `inputs → outputs`, stacked into one
    /// (`[W₁; W₂; …]`) so that one matrix product computes them all. Each weight is transposed
    /// straight from the checkpoint (in place in the file's memory map when it can be) into its
    /// columns: one pass over the weights, where loading them and then transposing took two.
    fn load_stacked(
        ckpt: &Checkpoint,
        names: &[String],
        inputs: usize,
        outputs: usize,
    ) -> std::result::Result<Linear, WeightsError> {
        // Check every shape before allocating from them.
        for name in names {
            ckpt.check_shape(&format!("{name}.weight"), &[outputs, inputs])?;
            ckpt.check_shape(&format!("{name}.bias"), &[outputs])?;
        }
        let total = outputs * names.len();
        let mut weight_t = vec![0f32; inputs * total];
        let mut biases = Vec::with_capacity(names.len());
        for (i, name) in names.iter().enumerate() {
            ckpt.with_f32(&format!("{name}.weight"), &[outputs, inputs], |w| {
                kernels::transpose_into(w, outputs, inputs, &mut weight_t, total, i * outputs)
            })?;
            biases.push(ckpt.tensor(&format!("{name}.bias"), &[outputs])?);
        }
        let build = || -> Result<Linear> {
            Ok(Linear {
                weight_t: Tensor::from_vec(weight_t, (inputs, total), &Device::Cpu)?,
                bias: Tensor::cat(&biases, 0)?.contiguous()?,
            })
        };
        build().map_err(|e| ckpt.error(&e))
    }

    /// `x`: `[b, n, in]` → `activation(x·Wᵀ + b)`: `[b, n, out]`.
    fn forward(&self, x: &Tensor, activation: kernels::Activation) -> Result<Tensor> {
        let (b, n, _) = x.dims3()?;
        let (w, bias) = (data(&self.weight_t)?, data(&self.bias)?);
        let input = data(x)?;
        new_tensor(b, n, bias.len(), |out| {
            kernels::linear(&input, b * n, &w, &bias, out, activation)
        })
    }
}

/// LayerNorm over the last dimension: `(x − mean) / √(var + ε) · γ + β`.
struct LayerNorm {
    weight: Tensor,
    bias: Tensor,
    eps: f32,
}

impl LayerNorm {
    fn load(
        ckpt: &Checkpoint,
        name: &str,
        size: usize,
        eps: f64,
    ) -> std::result::Result<LayerNorm, WeightsError> {
        Ok(LayerNorm {
            weight: ckpt.tensor(&format!("{name}.weight"), &[size])?,
            bias: ckpt.tensor(&format!("{name}.bias"), &[size])?,
            eps: eps as f32,
        })
    }

    /// `LayerNorm(x + residual)`.
    fn forward(&self, x: &Tensor, residual: &Tensor) -> Result<Tensor> {
        let (b, n, width) = x.dims3()?;
        let (x, residual) = (data(x)?, data(residual)?);
        let (gamma, beta) = (data(&self.weight)?, data(&self.bias)?);
        new_tensor(b, n, width, |out| {
            kernels::add_layer_norm(&x, &residual, &gamma, &beta, self.eps, out)
        })
    }
}

/// Word + position + token type embeddings, then LayerNorm.
struct Embeddings {
    word: Tensor,
    position: Tensor,
    token_type: Tensor,
    norm: LayerNorm,
}

impl Embeddings {
    /// `ids`, `types`: `[b·n]` → `[b, n, hidden]`.
    fn forward(&self, ids: &[u32], types: &[u32], b: usize, n: usize) -> Result<Tensor> {
        let (word, position, token_type) = (
            data(&self.word)?,
            data(&self.position)?,
            data(&self.token_type)?,
        );
        let (gamma, beta) = (data(&self.norm.weight)?, data(&self.norm.bias)?);
        let tables = EmbeddingTables {
            word: &word,
            position: &position,
            token_type: &token_type,
            gamma: &gamma,
            beta: &beta,
            eps: self.norm.eps,
        };
        new_tensor(b, n, gamma.len(), |out| {
            kernels::embed(&tables, ids, types, n, out)
        })
    }
}

/// Everything captured for one sequence: buffers of their final size, which the attention
/// kernel fills in place, layer by layer.
pub struct SequenceCapture {
    /// Attention probabilities `[layers, heads, len, len]`: row = query, column = key.
    pub probs: Vec<f32>,
    /// Query and key vectors `[layers, heads, len, head_dim]` each (before the 1/√d scaling),
    /// when asked for.
    pub query_key: Option<(Vec<f32>, Vec<f32>)>,
    len: usize,
    per_layer: usize,
    qk_per_layer: usize,
}

impl SequenceCapture {
    fn new(config: &BertConfig, len: usize, query_key: bool) -> SequenceCapture {
        let (layers, heads, d) = (
            config.num_hidden_layers,
            config.num_attention_heads,
            config.head_dim(),
        );
        let qk_per_layer = heads * len * d;
        SequenceCapture {
            probs: kernels::capture_buffer(layers * heads * len * len),
            query_key: query_key.then(|| {
                (
                    vec![0.0; layers * qk_per_layer],
                    vec![0.0; layers * qk_per_layer],
                )
            }),
            len,
            per_layer: heads * len * len,
            qk_per_layer,
        }
    }

    /// The part of the buffers that layer `l` writes.
    fn layer(&mut self, l: usize) -> CaptureSink<'_> {
        let qk = self.qk_per_layer;
        CaptureSink {
            probs: &mut self.probs[l * self.per_layer..(l + 1) * self.per_layer],
            query_key: self
                .query_key
                .as_mut()
                .map(|(q, k)| (&mut q[l * qk..(l + 1) * qk], &mut k[l * qk..(l + 1) * qk])),
        }
    }

    /// Tokens in this sequence.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the sequence is empty (never, for a sequence that went through the encoder).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Multi-head self-attention followed by the output projection, residual and LayerNorm.
struct SelfAttention {
    /// Q, K and V projections stacked: `[hidden] → [3·hidden]`.
    qkv: Linear,
    output: Linear,
    norm: LayerNorm,
    heads: usize,
    head_dim: usize,
}

impl SelfAttention {
    /// `x`: `[b, n, hidden]`; `lengths`: each sequence's real length (keys past it are padding,
    /// masked out); `capture`: one sink per sequence.
    fn forward(
        &self,
        x: &Tensor,
        lengths: &[usize],
        capture: &mut [CaptureSink<'_>],
    ) -> Result<Tensor> {
        let (b, n, _) = x.dims3()?;
        let shape = AttentionShape {
            batch: b,
            tokens: n,
            heads: self.heads,
            head_dim: self.head_dim,
        };

        // Q, K, V projections in one product; each row of `qkv` is [q | k | v], heads side by side.
        let qkv = self.qkv.forward(x, kernels::Activation::Identity)?;

        // For each head, in one fused kernel (`kernels::attention`): scores = Q·Kᵀ/√d_k, masked
        // where padding is; P = softmax(scores); context = P·V, heads concatenated back to
        // [b, n, hidden].
        // ── capture ── the kernel writes P (and Q, K on request) straight into `capture`.
        let context = multi_head_attention(&qkv, shape, lengths, capture)?;

        // Output projection, residual, LayerNorm.
        let projected = self
            .output
            .forward(&context, kernels::Activation::Identity)?;
        self.norm.forward(&projected, x)
    }
}

/// [`kernels::attention`] on tensors: `qkv` `[b, n, 3·hidden]` → context `[b, n, hidden]`.
fn multi_head_attention(
    qkv: &Tensor,
    shape: AttentionShape,
    lengths: &[usize],
    capture: &mut [CaptureSink<'_>],
) -> Result<Tensor> {
    let hidden = shape.heads * shape.head_dim;
    let qkv = data(qkv)?;
    new_tensor(shape.batch, shape.tokens, hidden, |context| {
        kernels::attention(&qkv, shape, lengths, capture, context)
    })
}

/// The position-wise feed-forward block: expand, activation, project back, residual, LayerNorm.
struct FeedForward {
    expand: Linear,
    project: Linear,
    activation: Activation,
    norm: LayerNorm,
}

impl FeedForward {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let inner = self.expand.forward(x, kernel_activation(self.activation))?;
        let out = self
            .project
            .forward(&inner, kernels::Activation::Identity)?;
        self.norm.forward(&out, x)
    }
}

fn kernel_activation(activation: Activation) -> kernels::Activation {
    match activation {
        Activation::GeluErf => kernels::Activation::GeluErf,
        Activation::GeluTanh => kernels::Activation::GeluTanh,
        Activation::Relu => kernels::Activation::Relu,
    }
}

struct EncoderLayer {
    attention: SelfAttention,
    feed_forward: FeedForward,
}

/// What [`Bert::forward`] returns for a batch.
pub struct BatchOutput {
    /// Last hidden state `[b, n, hidden]`.
    pub hidden: Tensor,
    /// What each sequence's attention captured, cut to its own length.
    pub sequences: Vec<SequenceCapture>,
}

/// A big tensor copied once, straight from the checkpoint (in place in the file's memory map when
/// it can be), not loaded and then copied.
fn load_large(
    ckpt: &Checkpoint,
    name: &str,
    shape: &[usize],
) -> std::result::Result<Tensor, WeightsError> {
    let buf = ckpt.with_f32(name, shape, <[f32]>::to_vec)?;
    Tensor::from_vec(buf, shape, &Device::Cpu).map_err(|e| ckpt.error(&e))
}

/// The config.json values that size BERT's tensors, as the tensor dimensions they must equal,
/// and the layer count as blocks the checkpoint must hold: checked against the checkpoint
/// before anything is allocated (see [`super::validate::config_matches`]).
pub fn config_checks(c: &BertConfig) -> (Vec<ConfigDim>, Vec<ConfigCount>) {
    let dim = |field, value, tensor: &str, axis| ConfigDim {
        field,
        value,
        tensor: tensor.to_string(),
        axis,
    };
    let dims = vec![
        dim(
            "vocab_size",
            c.vocab_size,
            "embeddings.word_embeddings.weight",
            0,
        ),
        dim(
            "hidden_size",
            c.hidden_size,
            "embeddings.word_embeddings.weight",
            1,
        ),
        dim(
            "max_position_embeddings",
            c.max_position_embeddings,
            "embeddings.position_embeddings.weight",
            0,
        ),
        dim(
            "type_vocab_size",
            c.type_vocab_size,
            "embeddings.token_type_embeddings.weight",
            0,
        ),
        dim(
            "intermediate_size",
            c.intermediate_size,
            "encoder.layer.0.intermediate.dense.weight",
            0,
        ),
    ];
    let counts = vec![ConfigCount {
        field: "num_hidden_layers",
        value: c.num_hidden_layers,
        block: "layer",
        tensor: |i| format!("encoder.layer.{i}.attention.self.query.weight"),
    }];
    (dims, counts)
}

/// A BERT encoder with its weights.
pub struct Bert {
    config: BertConfig,
    embeddings: Embeddings,
    layers: Vec<EncoderLayer>,
}

impl Bert {
    /// Build the encoder from a checkpoint, checking every tensor's shape against `config`.
    pub fn load(config: &BertConfig, ckpt: &Checkpoint) -> std::result::Result<Bert, WeightsError> {
        let c = config;
        let hs = c.hidden_size;
        let embeddings = Embeddings {
            word: load_large(
                ckpt,
                "embeddings.word_embeddings.weight",
                &[c.vocab_size, hs],
            )?,
            position: ckpt.tensor(
                "embeddings.position_embeddings.weight",
                &[c.max_position_embeddings, hs],
            )?,
            token_type: ckpt.tensor(
                "embeddings.token_type_embeddings.weight",
                &[c.type_vocab_size, hs],
            )?,
            norm: LayerNorm::load(ckpt, "embeddings.LayerNorm", hs, c.layer_norm_eps)?,
        };
        let mut layers = Vec::with_capacity(c.num_hidden_layers);
        for i in 0..c.num_hidden_layers {
            let p = format!("encoder.layer.{i}");
            let qkv = ["query", "key", "value"].map(|part| format!("{p}.attention.self.{part}"));
            layers.push(EncoderLayer {
                attention: SelfAttention {
                    qkv: Linear::load_stacked(ckpt, &qkv, hs, hs)?,
                    output: Linear::load(ckpt, &format!("{p}.attention.output.dense"), hs, hs)?,
                    norm: LayerNorm::load(
                        ckpt,
                        &format!("{p}.attention.output.LayerNorm"),
                        hs,
                        c.layer_norm_eps,
                    )?,
                    heads: c.num_attention_heads,
                    head_dim: c.head_dim(),
                },
                feed_forward: FeedForward {
                    expand: Linear::load(
                        ckpt,
                        &format!("{p}.intermediate.dense"),
                        hs,
                        c.intermediate_size,
                    )?,
                    project: Linear::load(
                        ckpt,
                        &format!("{p}.output.dense"),
                        c.intermediate_size,
                        hs,
                    )?,
                    activation: c.hidden_act,
                    norm: LayerNorm::load(
                        ckpt,
                        &format!("{p}.output.LayerNorm"),
                        hs,
                        c.layer_norm_eps,
                    )?,
                },
            });
        }
        Ok(Bert {
            config: c.clone(),
            embeddings,
            layers,
        })
    }

    /// The configuration the encoder was built with.
    pub fn config(&self) -> &BertConfig {
        &self.config
    }

    /// Run a batch. `input_ids`/`token_type_ids`: `[b·n]`, `b` sequences right-padded to `n`
    /// tokens; `lengths`: the real length of each (at least 1). Padding is masked out of every
    /// key position, so the real rows get exactly what they would get alone. Token ids must be
    /// inside the vocabulary and type ids inside the segment types, or this returns an error.
    pub fn forward(
        &self,
        input_ids: &[u32],
        token_type_ids: &[u32],
        lengths: &[usize],
        keep_query_key: bool,
    ) -> Result<BatchOutput> {
        let b = lengths.len();
        let n = lengths.iter().copied().max().unwrap_or(0);
        if b == 0 || n == 0 || input_ids.len() != b * n || token_type_ids.len() != b * n {
            candle_core::bail!(
                "forward: {b} sequences of up to {n} tokens, {} ids",
                input_ids.len()
            );
        }
        let c = &self.config;
        if lengths.contains(&0)
            || n > c.max_position_embeddings
            || input_ids.iter().any(|&id| id as usize >= c.vocab_size)
            || token_type_ids
                .iter()
                .any(|&t| t as usize >= c.type_vocab_size)
        {
            candle_core::bail!(
                "forward: an empty sequence, more than {} tokens, or an id outside the \
                 vocabulary or the segment types",
                c.max_position_embeddings
            );
        }
        let mut sequences: Vec<SequenceCapture> = lengths
            .iter()
            .map(|&len| SequenceCapture::new(&self.config, len, keep_query_key))
            .collect();
        let mut x = self.embeddings.forward(input_ids, token_type_ids, b, n)?;
        for (l, layer) in self.layers.iter().enumerate() {
            let mut sinks: Vec<CaptureSink> = sequences.iter_mut().map(|s| s.layer(l)).collect();
            let attended = layer.attention.forward(&x, lengths, &mut sinks)?;
            x = layer.feed_forward.forward(&attended)?;
        }
        Ok(BatchOutput {
            hidden: x,
            sequences,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each configured activation reaches the feed-forward kernel with its own formula: a
    /// linear map with identity weights and zero bias returns the activation of its input.
    #[test]
    fn activations_follow_their_formulas() {
        let xs: Vec<f32> = (-800..=800).map(|i| i as f32 / 100.0).collect();
        let identity = Linear {
            weight_t: Tensor::new(&[[1f32]], &Device::Cpu).unwrap(),
            bias: Tensor::new(&[0f32], &Device::Cpu).unwrap(),
        };
        let input = Tensor::from_vec(xs.clone(), (1, xs.len(), 1), &Device::Cpu).unwrap();
        let run = |a| {
            identity
                .forward(&input, kernel_activation(a))
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap()
        };
        // transformers' gelu_new / gelu_pytorch_tanh, in f64.
        let tanh_gelu = |x: f64| {
            0.5 * x
                * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x.powi(3))).tanh())
        };
        for (x, y) in xs.iter().zip(run(Activation::GeluTanh)) {
            assert!(
                (tanh_gelu(*x as f64) - y as f64).abs() < 1e-5,
                "gelu_new({x}) = {y}"
            );
        }
        for (x, y) in xs.iter().zip(run(Activation::Relu)) {
            assert_eq!(y, x.max(0.0));
        }
        // Exact GELU x·Φ(x); expected values from Python: x * 0.5 * (1 + math.erf(x / sqrt(2))).
        let erf = run(Activation::GeluErf);
        let at = |x: f32| erf[xs.iter().position(|&v| v == x).unwrap()] as f64;
        assert!((at(1.0) - 0.841_344_746_068_542_9).abs() < 1e-6);
        assert!((at(-1.0) + 0.158_655_253_931_457_05).abs() < 1e-6);
        assert!((at(2.0) - 1.954_499_736_103_641_6).abs() < 1e-6);
        assert!((at(-3.0) + 0.004_049_694_094_890_31).abs() < 1e-6);
    }
}
