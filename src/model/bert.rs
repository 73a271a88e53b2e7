//! Our BERT encoder on candle-core tensors, written to read like the paper (Devlin et al. 2019;
//! attention from Vaswani et al. 2017), with the attention probabilities captured on one line.
//!
//! Shapes: `b` sequences in a batch, `n` tokens (padded), `h` heads of size `d`, hidden `h·d`.
//! Everything is f32 on the CPU.

use candle_core::{Device, Tensor};

use super::config::{Activation, BertConfig};
use super::weights::{Checkpoint, WeightsError};

type Result<T> = candle_core::Result<T>;

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
        let weight = ckpt.tensor(&format!("{name}.weight"), &[outputs, inputs])?;
        let bias = ckpt.tensor(&format!("{name}.bias"), &[outputs])?;
        Linear::from_parts(&[weight], &[bias]).map_err(|e| ckpt.error(&e))
    }

    /// Several linear maps over the same input stacked into one (`[W₁; W₂; …]`), so that one
    /// matrix product computes them all.
    fn from_parts(weights: &[Tensor], biases: &[Tensor]) -> Result<Linear> {
        Ok(Linear {
            weight_t: Tensor::cat(weights, 0)?.t()?.contiguous()?,
            bias: Tensor::cat(biases, 0)?,
        })
    }

    /// `x`: `[b, n, in]` → `[b, n, out]`.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let (b, n, inputs) = x.dims3()?;
        let y = x.reshape((b * n, inputs))?.matmul(&self.weight_t)?;
        y.broadcast_add(&self.bias)?.reshape((b, n, ()))
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

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        candle_nn::ops::layer_norm(&x.contiguous()?, &self.weight, &self.bias, self.eps)
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
    fn forward(&self, input_ids: &Tensor, token_type_ids: &Tensor) -> Result<Tensor> {
        let (b, n) = input_ids.dims2()?;
        let lookup = |table: &Tensor, ids: &Tensor| {
            table
                .index_select(&ids.flatten_all()?, 0)?
                .reshape((b, n, ()))
        };
        let words = lookup(&self.word, input_ids)?;
        let types = lookup(&self.token_type, token_type_ids)?;
        let positions = self.position.narrow(0, 0, n)?;
        // Same order of additions as transformers: (words + types) + positions.
        let x = (words + types)?.broadcast_add(&positions)?;
        self.norm.forward(&x)
    }
}

/// What one layer's attention hands back besides its output.
pub struct LayerCapture {
    /// Attention probabilities `[b, h, n, n]`: row = query, column = key.
    pub probs: Tensor,
    /// Query and key vectors `[b, h, n, d]` (before the 1/√d scaling), when asked for.
    pub query_key: Option<(Tensor, Tensor)>,
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
    /// `x`: `[b, n, hidden]`; `mask`: additive `[b, 1, 1, n]` (0 for tokens, −∞ for padding), or
    /// `None` when nothing is padded.
    fn forward(
        &self,
        x: &Tensor,
        mask: Option<&Tensor>,
        keep_query_key: bool,
    ) -> Result<(Tensor, LayerCapture)> {
        let (b, n, _) = x.dims3()?;
        let (h, d) = (self.heads, self.head_dim);

        // Q, K, V projections (one product), split into heads: each [b, h, n, d].
        let qkv = self
            .qkv
            .forward(x)?
            .reshape((b, n, 3, h, d))?
            .permute((2, 0, 3, 1, 4))?;
        let q = qkv.get(0)?.contiguous()?;
        let k = qkv.get(1)?.contiguous()?;
        let v = qkv.get(2)?.contiguous()?;

        // scores = Q·Kᵀ/√d_k (the scale applied to Q: n·d products instead of n·n).
        let scale = 1.0 / (d as f64).sqrt();
        let scores = (&q * scale)?.matmul(&k.t()?)?;
        let scores = match mask {
            Some(mask) => scores.broadcast_add(mask)?,
            None => scores,
        };
        let probs = candle_nn::ops::softmax_last_dim(&scores)?;

        // ── capture ── the probabilities [b, h, n, n] (and Q, K on request) leave the model here.
        let capture = LayerCapture {
            probs: probs.clone(),
            query_key: keep_query_key.then(|| (q.clone(), k.clone())),
        };

        // context = P·V, heads concatenated back to [b, n, h·d].
        let context = probs.matmul(&v)?.transpose(1, 2)?.reshape((b, n, h * d))?;

        // Output projection, residual, LayerNorm.
        let out = (self.output.forward(&context)? + x)?;
        Ok((self.norm.forward(&out)?, capture))
    }
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
        let inner = activate(&self.expand.forward(x)?, self.activation)?;
        let out = (self.project.forward(&inner)? + x)?;
        self.norm.forward(&out)
    }
}

fn activate(x: &Tensor, activation: Activation) -> Result<Tensor> {
    match activation {
        Activation::GeluErf => x.gelu_erf(),
        Activation::GeluTanh => x.gelu(),
        Activation::Relu => x.relu(),
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
    /// One capture per layer.
    pub layers: Vec<LayerCapture>,
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
            word: ckpt.tensor("embeddings.word_embeddings.weight", &[c.vocab_size, hs])?,
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
            let part = |name: &str| -> std::result::Result<(Tensor, Tensor), WeightsError> {
                let name = format!("{p}.attention.self.{name}");
                Ok((
                    ckpt.tensor(&format!("{name}.weight"), &[hs, hs])?,
                    ckpt.tensor(&format!("{name}.bias"), &[hs])?,
                ))
            };
            let (q, k, v) = (part("query")?, part("key")?, part("value")?);
            let qkv = Linear::from_parts(&[q.0, k.0, v.0], &[q.1, k.1, v.1])
                .map_err(|e| ckpt.error(&e))?;
            layers.push(EncoderLayer {
                attention: SelfAttention {
                    qkv,
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

    /// Run a batch. `input_ids`/`token_type_ids`: `[b, n]` (u32), right-padded; `lengths`: the
    /// real length of each row. Padding is masked out of every key position, so the real rows
    /// get exactly what they would get alone.
    pub fn forward(
        &self,
        input_ids: &Tensor,
        token_type_ids: &Tensor,
        lengths: &[usize],
        keep_query_key: bool,
    ) -> Result<BatchOutput> {
        let (_, n) = input_ids.dims2()?;
        let mask = padding_mask(lengths, n)?;
        let mut x = self.embeddings.forward(input_ids, token_type_ids)?;
        let mut captures = Vec::with_capacity(self.layers.len());
        for layer in &self.layers {
            let (attended, capture) = layer.attention.forward(&x, mask.as_ref(), keep_query_key)?;
            x = layer.feed_forward.forward(&attended)?;
            captures.push(capture);
        }
        Ok(BatchOutput {
            hidden: x,
            layers: captures,
        })
    }
}

/// The additive key mask `[b, 1, 1, n]`: 0 where a token is, −∞ where padding is; `None` when no
/// row is padded (so the common single-sequence case pays nothing).
fn padding_mask(lengths: &[usize], n: usize) -> Result<Option<Tensor>> {
    if lengths.iter().all(|&len| len == n) {
        return Ok(None);
    }
    let values: Vec<f32> = lengths
        .iter()
        .flat_map(|&len| (0..n).map(move |k| if k < len { 0.0 } else { f32::NEG_INFINITY }))
        .collect();
    Ok(Some(Tensor::from_vec(
        values,
        (lengths.len(), 1, 1, n),
        &Device::Cpu,
    )?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn activations_follow_their_formulas() {
        let xs: Vec<f32> = (-800..=800).map(|i| i as f32 / 100.0).collect();
        let t = Tensor::new(xs.as_slice(), &Device::Cpu).unwrap();
        let run = |a| activate(&t, a).unwrap().to_vec1::<f32>().unwrap();
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
