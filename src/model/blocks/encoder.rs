//! The post-LayerNorm Transformer encoder that BERT, RoBERTa, XLM-R, DistilBERT, ALBERT and
//! ELECTRA share (Vaswani et al. 2017; Devlin et al. 2019), written to read like the paper, with
//! the attention probabilities captured on one line. What differs between those families is data:
//! tensor names, the embedding tables and position scheme, an embedding projection, and which
//! layer weights run at which depth (ALBERT shares them). Each family's file fills these in.
//!
//! Shapes: `b` sequences in a batch, `n` tokens (padded), `h` heads of size `d`, hidden `h·d`.
//! Everything is f32 on the CPU, in plain buffers; the arithmetic of each step is one of the
//! shared kernels in [`crate::model::kernels`].

use super::capture::SequenceCapture;
use super::layers::{part, Linear, Norm};
use super::network::{Architecture, Batch, Network};
use crate::attention::PositionScheme;
use crate::model::formats::config::{ConfigError, ConfigFile};
use crate::model::formats::weights::{Checkpoint, Weight, WeightsError};
use crate::model::kernels::positions::Positions;
use crate::model::kernels::{self, Activation, CaptureSink, EmbeddingTables, Mask};

/// The config.json fields of a BERT-style encoder, with a family's defaults where they are
/// missing or null.
#[derive(Clone, Debug, PartialEq)]
pub struct EncoderConfig {
    /// Vocabulary size (rows of the word embeddings).
    pub vocab_size: usize,
    /// Hidden size.
    pub hidden_size: usize,
    /// Width of the embeddings (ALBERT, ELECTRA); the hidden size for the others.
    pub embedding_size: usize,
    /// Number of layers.
    pub num_hidden_layers: usize,
    /// Attention heads per layer.
    pub num_attention_heads: usize,
    /// Inner size of the feed-forward block.
    pub intermediate_size: usize,
    /// Feed-forward activation.
    pub hidden_act: Activation,
    /// Rows of the position embeddings.
    pub max_position_embeddings: usize,
    /// Rows of the token type embeddings.
    pub type_vocab_size: usize,
    /// LayerNorm epsilon.
    pub layer_norm_eps: f64,
    /// `pad_token_id`, if set.
    pub pad_token_id: Option<u32>,
}

/// A family's defaults for [`EncoderConfig`] (transformers' `*Config.__init__` defaults).
pub struct EncoderDefaults {
    /// `vocab_size`.
    pub vocab_size: usize,
    /// `hidden_size`.
    pub hidden_size: usize,
    /// `embedding_size`; `None`: the hidden size, and the field is refused when it differs.
    pub embedding_size: Option<usize>,
    /// `num_hidden_layers`.
    pub num_hidden_layers: usize,
    /// `num_attention_heads`.
    pub num_attention_heads: usize,
    /// `intermediate_size`.
    pub intermediate_size: usize,
    /// `hidden_act`.
    pub hidden_act: &'static str,
    /// `max_position_embeddings`.
    pub max_position_embeddings: usize,
    /// `type_vocab_size`.
    pub type_vocab_size: usize,
    /// `layer_norm_eps`.
    pub layer_norm_eps: f64,
    /// `pad_token_id`.
    pub pad_token_id: Option<u32>,
}

impl EncoderConfig {
    /// Read the fields from `file`, refusing what this encoder cannot run exactly: relative
    /// position embeddings, decoders, sizes that do not divide into heads.
    pub fn read(file: &ConfigFile, d: &EncoderDefaults) -> Result<EncoderConfig, ConfigError> {
        if let Some(p) = file.string("position_embedding_type")? {
            if p != "absolute" {
                return Err(file.unsupported(format!(
                    "position_embedding_type '{p}' is not supported; only 'absolute' position embeddings are"
                )));
            }
        }
        if file.boolean("is_decoder")? == Some(true)
            || file.boolean("add_cross_attention")? == Some(true)
        {
            return Err(file.unsupported(
                "it is configured as a decoder (is_decoder/add_cross_attention); attnviz runs this family as a bidirectional encoder",
            ));
        }
        let hidden_size = file.positive("hidden_size", d.hidden_size)?;
        let embedding_size = match (file.count("embedding_size")?, d.embedding_size) {
            (Some(e), None) if e != hidden_size => {
                return Err(file.unsupported(format!(
                    "embedding_size {e} differs from hidden_size {hidden_size}, but this family's embeddings have the hidden size"
                )))
            }
            (given, default) => given.or(default).unwrap_or(hidden_size),
        };
        if embedding_size == 0 {
            return Err(file.invalid("embedding_size is 0"));
        }
        let cfg = EncoderConfig {
            vocab_size: file.positive("vocab_size", d.vocab_size)?,
            hidden_size,
            embedding_size,
            num_hidden_layers: file.positive("num_hidden_layers", d.num_hidden_layers)?,
            num_attention_heads: file.positive("num_attention_heads", d.num_attention_heads)?,
            intermediate_size: file.positive("intermediate_size", d.intermediate_size)?,
            hidden_act: file.activation("hidden_act", d.hidden_act)?,
            max_position_embeddings: file
                .positive("max_position_embeddings", d.max_position_embeddings)?,
            type_vocab_size: file.positive("type_vocab_size", d.type_vocab_size)?,
            layer_norm_eps: file.epsilon("layer_norm_eps", d.layer_norm_eps)?,
            pad_token_id: match file.get("pad_token_id") {
                Some(_) => file.token_id("pad_token_id")?,
                None => d.pad_token_id,
            },
        };
        if !cfg.hidden_size.is_multiple_of(cfg.num_attention_heads) {
            return Err(file.invalid(format!(
                "hidden_size {} is not divisible by num_attention_heads {}",
                cfg.hidden_size, cfg.num_attention_heads
            )));
        }
        Ok(cfg)
    }

    /// Size of one head.
    pub fn head_dim(&self) -> usize {
        self.hidden_size / self.num_attention_heads
    }
}

/// The checkpoint names of one encoder layer's tensors (each a module path: `.weight` and
/// `.bias` are appended).
pub struct LayerNames {
    /// Query projection.
    pub query: String,
    /// Key projection.
    pub key: String,
    /// Value projection.
    pub value: String,
    /// Attention output projection.
    pub output: String,
    /// LayerNorm after attention.
    pub attention_norm: String,
    /// Feed-forward expansion.
    pub expand: String,
    /// Feed-forward projection back.
    pub project: String,
    /// LayerNorm after the feed-forward block.
    pub output_norm: String,
}

/// One encoder layer: multi-head self-attention, then the position-wise feed-forward block,
/// each followed by its residual connection and LayerNorm.
pub struct EncoderLayer {
    /// The query, key and value projections, side by side.
    qkv: Linear,
    output: Linear,
    attention_norm: Norm,
    expand: Linear,
    activation: Activation,
    project: Linear,
    output_norm: Norm,
}

impl EncoderLayer {
    /// Load a layer's tensors by `names`.
    pub fn load(
        ckpt: &Checkpoint,
        names: &LayerNames,
        hidden: usize,
        intermediate: usize,
        activation: Activation,
        eps: f64,
    ) -> Result<EncoderLayer, WeightsError> {
        Ok(EncoderLayer {
            qkv: Linear::load_stacked(
                ckpt,
                &[&names.query, &names.key, &names.value],
                hidden,
                hidden,
            )?,
            output: Linear::load(ckpt, &names.output, hidden, hidden)?,
            attention_norm: Norm::layer(ckpt, &names.attention_norm, hidden, eps)?,
            expand: Linear::load(ckpt, &names.expand, hidden, intermediate)?,
            activation,
            project: Linear::load(ckpt, &names.project, intermediate, hidden)?,
            output_norm: Norm::layer(ckpt, &names.output_norm, hidden, eps)?,
        })
    }

    /// `x`: `[b·n, hidden]` → the layer's output, capturing into one sink per sequence.
    fn forward(
        &self,
        x: &[f32],
        batch: &Batch<'_>,
        arch: &Architecture,
        capture: &mut [CaptureSink<'_>],
    ) -> Vec<f32> {
        let hidden = arch.hidden_size;
        let rows = batch.lengths.len() * batch.tokens;

        // Q, K and V side by side in one buffer: each row is [q | k | v], heads side by side.
        let qkv = self.qkv.forward(x, rows, Activation::Identity);

        // For each head, in one fused kernel: scores = Q·Kᵀ/√d_k, masked where padding is;
        // P = softmax(scores); context = P·V, heads concatenated back to [b·n, hidden].
        // ── capture ── the kernel writes P (and Q, K on request) straight into `capture`.
        let spec = arch.attention(batch.lengths.len(), batch.tokens, batch.tokens);
        let third = |p: usize| part(&qkv, p * hidden, 3 * hidden);
        let mut context = vec![0f32; rows * hidden];
        kernels::attention(
            third(0),
            third(1),
            third(2),
            &spec,
            batch.lengths,
            batch.lengths,
            capture,
            &mut context,
        );
        drop(qkv);

        // Output projection, residual, LayerNorm.
        let projected = self.output.forward(&context, rows, Activation::Identity);
        let attended = self.attention_norm.forward(&projected, Some(x));

        // Feed-forward: expand with the activation, project back, residual, LayerNorm.
        let inner = self.expand.forward(&attended, rows, self.activation);
        let out = self.project.forward(&inner, rows, Activation::Identity);
        self.output_norm.forward(&out, Some(&attended))
    }
}

/// The embedding tables and what follows them before the first layer.
pub struct Embeddings {
    /// `[vocab, width]`.
    pub word: Weight,
    /// `[rows, width]`; `None` for none.
    pub position: Option<Weight>,
    /// Which position row each token reads.
    pub positions: Positions,
    /// `[type_vocab, width]`; `None` for none.
    pub token_type: Option<Weight>,
    /// LayerNorm over the sum.
    pub norm: Norm,
    /// A projection from the embedding width to the hidden size (ALBERT, ELECTRA).
    pub project: Option<Linear>,
}

impl Embeddings {
    /// `[b·n, hidden]` for the batch.
    fn forward(&self, batch: &Batch<'_>) -> Vec<f32> {
        let width = self.norm.width();
        let mut positions = Vec::with_capacity(batch.ids.len());
        for seq in batch.ids.chunks(batch.tokens) {
            self.positions.rows(seq, &mut positions);
        }
        let tables = EmbeddingTables {
            word: &self.word,
            position: self.position.as_deref(),
            token_type: self.token_type.as_deref(),
            norm: self.norm.layer_params(),
            width,
        };
        let mut out = vec![0f32; batch.ids.len() * width];
        kernels::embed(&tables, batch.ids, batch.types, &positions, &mut out);
        match &self.project {
            Some(p) => p.forward(&out, batch.ids.len(), Activation::Identity),
            None => out,
        }
    }
}

/// A post-LN encoder: embeddings, then layers, each layer's weights possibly run at several
/// depths.
pub struct PostNormEncoder {
    /// Its shape.
    pub arch: Architecture,
    /// Embeddings.
    pub embeddings: Embeddings,
    /// The distinct layer weights.
    pub layers: Vec<EncoderLayer>,
    /// Which layer weights run at each depth, first to last: `0, 1, …` for a plain stack,
    /// repeats for ALBERT. One attention map is captured per entry.
    pub schedule: Vec<usize>,
}

impl Network for PostNormEncoder {
    fn architecture(&self) -> &Architecture {
        &self.arch
    }

    fn forward(&self, batch: &Batch<'_>, captures: &mut [SequenceCapture]) -> Vec<f32> {
        let mut x = self.embeddings.forward(batch);
        for (depth, &l) in self.schedule.iter().enumerate() {
            let mut sinks: Vec<CaptureSink> = captures.iter_mut().map(|c| c.layer(depth)).collect();
            x = self.layers[l].forward(&x, batch, &self.arch, &mut sinks);
        }
        x
    }
}

/// A plain stack: layer weights `0..layers`, in order.
pub fn plain_schedule(layers: usize) -> Vec<usize> {
    (0..layers).collect()
}

/// Architecture of a multi-head (not grouped) bidirectional encoder.
pub fn encoder_architecture(
    family: &'static str,
    model_type: &str,
    cfg: &EncoderConfig,
    layers: usize,
    max_positions: usize,
    token_types: usize,
    tokenizer_types: bool,
) -> Architecture {
    Architecture {
        family,
        model_type: model_type.to_string(),
        layers,
        heads: cfg.num_attention_heads,
        kv_heads: cfg.num_attention_heads,
        kv_head: Architecture::identity_heads(cfg.num_attention_heads),
        head_dim: cfg.head_dim(),
        hidden_size: cfg.hidden_size,
        vocab_size: cfg.vocab_size,
        max_positions,
        token_types,
        tokenizer_types,
        mask: Mask::Bidirectional,
        sliding_window: None,
        positions: PositionScheme::Absolute,
    }
}
