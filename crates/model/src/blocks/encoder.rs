//! The post-LayerNorm Transformer encoder that BERT, RoBERTa, XLM-R, DistilBERT, ALBERT and
//! ELECTRA share (Vaswani et al. 2017; Devlin et al. 2019), written to read like the paper, with
//! the attention probabilities captured on one line. What differs between those families is data:
//! tensor names, the embedding tables and position scheme, an embedding projection, and which
//! layer weights run at which depth (ALBERT shares them). Each family's file fills these in.
//!
//! Shapes: `b` sequences in a batch, `n` tokens (padded), `h` heads of size `d`, hidden `h·d`.
//! Everything is f32 on the CPU, in plain buffers; the arithmetic of each step is one of the
//! shared kernels in [`crate::kernels`].

use super::capture::SequenceCapture;
use super::layers::{part, Linear, Norm};
use super::lens;
use super::mlm_head::{MlmHead, MlmHeadNames, MlmHeadSpec};
use super::network::{Architecture, Batch, Network, Unembedding, ValueZeroing};
use super::values::{self, After, LayerTaps, Values};
use crate::attention::PositionScheme;
use crate::formats::config::{
    ConfigError, ConfigFile, ConfigProblem, FieldValue, Instead, Unsupported,
};
use crate::formats::tensors::Name;
use crate::formats::validate::{ConfigCount, ConfigDim};
use crate::formats::weights::{Checkpoint, Weight, WeightsError};
use crate::kernels::positions::Positions;
use crate::kernels::{self, Activation, CaptureSink, EmbeddingTables, Mask};

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
    /// `tie_word_embeddings` (default true): whether a masked-LM head's decoder is the word
    /// embeddings.
    pub tie_word_embeddings: bool,
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
                return Err(file.unsupported(Unsupported::Value {
                    field: "position_embedding_type",
                    value: Some(FieldValue::Name(p)),
                    note: None,
                    instead: Instead::Runs("only 'absolute' position embeddings are"),
                }));
            }
        }
        if file.boolean("is_decoder")? == Some(true)
            || file.boolean("add_cross_attention")? == Some(true)
        {
            return Err(file.unsupported(Unsupported::Decoder));
        }
        let hidden_size = file.positive("hidden_size", d.hidden_size)?;
        let embedding_size = match (file.count("embedding_size")?, d.embedding_size) {
            (Some(e), None) if e != hidden_size => {
                return Err(file.unsupported(Unsupported::Differs {
                    field: "embedding_size",
                    value: e,
                    other: "hidden_size",
                    other_value: hidden_size,
                    why: ", but this family's embeddings have the hidden size",
                }))
            }
            (given, default) => given.or(default).unwrap_or(hidden_size),
        };
        if embedding_size == 0 {
            return Err(file.invalid(ConfigProblem::Zero {
                field: "embedding_size",
            }));
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
            tie_word_embeddings: file.boolean("tie_word_embeddings")?.unwrap_or(true),
        };
        if !cfg.hidden_size.is_multiple_of(cfg.num_attention_heads) {
            return Err(file.invalid(ConfigProblem::NotDivisible {
                field: "hidden_size",
                value: cfg.hidden_size,
                by_field: "num_attention_heads",
                by: cfg.num_attention_heads,
            }));
        }
        Ok(cfg)
    }

    /// Size of one head.
    pub fn head_dim(&self) -> usize {
        self.hidden_size / self.num_attention_heads
    }

    /// The masked-LM head of these sizes under `names`, its dense map followed by
    /// `activation`: from the hidden size to the embedding width, tied as config.json says.
    pub fn mlm_head(&self, names: MlmHeadNames, activation: Activation) -> MlmHeadSpec {
        MlmHeadSpec {
            names,
            hidden: self.hidden_size,
            width: self.embedding_size,
            vocab: self.vocab_size,
            activation,
            eps: self.layer_norm_eps,
            tied: self.tie_word_embeddings,
        }
    }
}

/// Where an encoder's embedding tensors are in its checkpoint (module paths; `.weight` and
/// `.bias` are appended).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmbeddingNames {
    /// Word embeddings, `[vocab, embedding width]`.
    pub word: Name,
    /// Position embeddings, `[rows, embedding width]`.
    pub position: Name,
    /// Token type embeddings, `[type_vocab, embedding width]`; `None`: the family has none.
    pub token_type: Option<Name>,
    /// The LayerNorm over their sum.
    pub norm: Name,
    /// The projection from the embedding width to the hidden size (ALBERT, ELECTRA), when the
    /// checkpoint has one.
    pub project: Option<Name>,
}

impl EmbeddingNames {
    /// BERT's (`embeddings.word_embeddings`, …), which RoBERTa, XLM-R, DistilBERT, ALBERT and
    /// ELECTRA checkpoints share.
    pub fn bert() -> EmbeddingNames {
        let e = Name::root().pp("embeddings");
        EmbeddingNames {
            word: e.pp("word_embeddings"),
            position: e.pp("position_embeddings"),
            token_type: Some(e.pp("token_type_embeddings")),
            norm: e.pp("LayerNorm"),
            project: None,
        }
    }
}

/// Where one encoder layer's tensors are in its checkpoint (module paths; `.weight` and `.bias`
/// are appended).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayerNames {
    /// Query projection.
    pub query: Name,
    /// Key projection.
    pub key: Name,
    /// Value projection.
    pub value: Name,
    /// Attention output projection.
    pub output: Name,
    /// LayerNorm after attention.
    pub attention_norm: Name,
    /// Feed-forward expansion.
    pub expand: Name,
    /// Feed-forward projection back.
    pub project: Name,
    /// LayerNorm after the feed-forward block.
    pub output_norm: Name,
}

impl LayerNames {
    /// BERT's layer `i` (`encoder.layer.{i}.attention.self.query`, …), which RoBERTa, XLM-R
    /// and ELECTRA checkpoints share.
    pub fn bert(i: usize) -> LayerNames {
        let layer = Name::root().pp("encoder").pp("layer").pp(i);
        let attention = layer.pp("attention");
        LayerNames {
            query: attention.pp("self").pp("query"),
            key: attention.pp("self").pp("key"),
            value: attention.pp("self").pp("value"),
            output: attention.pp("output").pp("dense"),
            attention_norm: attention.pp("output").pp("LayerNorm"),
            expand: layer.pp("intermediate").pp("dense"),
            project: layer.pp("output").pp("dense"),
            output_norm: layer.pp("output").pp("LayerNorm"),
        }
    }
}

/// A post-LN encoder's tensor names: the one table its config checks ([`EncoderNames::checks`])
/// and its loading ([`Embeddings::load`], [`EncoderLayer::load`]) both read.
#[derive(Clone, Copy, Debug)]
pub struct EncoderNames {
    /// The embedding tables.
    pub embeddings: fn() -> EmbeddingNames,
    /// Layer `i`'s tensors.
    pub layer: fn(usize) -> LayerNames,
}

impl EncoderNames {
    /// BERT's names, which RoBERTa, XLM-R and ELECTRA checkpoints share.
    pub const BERT: EncoderNames = EncoderNames {
        embeddings: EmbeddingNames::bert,
        layer: LayerNames::bert,
    };

    /// The config values (BERT's field names) that size the encoder's tensors, as the tensor
    /// dimensions they must equal, and `num_hidden_layers` as the layers the checkpoint must
    /// hold: checked against the checkpoint before anything is allocated (see
    /// [`crate::formats::validate::config_matches`]). `project`: the embedding
    /// projection, when the checkpoint has one.
    pub fn checks(
        &self,
        c: &EncoderConfig,
        project: Option<&Name>,
    ) -> (Vec<ConfigDim>, Vec<ConfigCount>) {
        let embeddings = EmbeddingNames {
            project: project.cloned(),
            ..(self.embeddings)()
        };
        let dims = encoder_dims(c, &embeddings, &(self.layer)(0));
        let layer = self.layer;
        let counts = vec![ConfigCount::new(
            "num_hidden_layers",
            c.num_hidden_layers,
            "layer",
            move |i| layer(i).query.weight(),
        )];
        (dims, counts)
    }

    /// Layers `0..num_hidden_layers`.
    pub fn layers(
        &self,
        ckpt: &Checkpoint,
        c: &EncoderConfig,
    ) -> Result<Vec<EncoderLayer>, WeightsError> {
        (0..c.num_hidden_layers)
            .map(|i| EncoderLayer::load(ckpt, &(self.layer)(i), c))
            .collect()
    }
}

/// The config values (BERT's field names) that size an encoder's embedding tables and its
/// layers' tensors, as dimensions of the tensors `embeddings` and `layer` (the first layer, or
/// any) name.
pub fn encoder_dims(
    c: &EncoderConfig,
    embeddings: &EmbeddingNames,
    layer: &LayerNames,
) -> Vec<ConfigDim> {
    let width = if c.embedding_size == c.hidden_size {
        "hidden_size"
    } else {
        "embedding_size"
    };
    let mut dims = vec![
        ConfigDim::new("vocab_size", c.vocab_size, embeddings.word.weight(), 0),
        ConfigDim::new(width, c.embedding_size, embeddings.word.weight(), 1),
        ConfigDim::new(
            "max_position_embeddings",
            c.max_position_embeddings,
            embeddings.position.weight(),
            0,
        ),
    ];
    if let Some(types) = &embeddings.token_type {
        dims.push(ConfigDim::new(
            "type_vocab_size",
            c.type_vocab_size,
            types.weight(),
            0,
        ));
    }
    if let Some(project) = &embeddings.project {
        dims.push(ConfigDim::new(
            "hidden_size",
            c.hidden_size,
            project.weight(),
            0,
        ));
    }
    dims.extend([
        ConfigDim::new("hidden_size", c.hidden_size, layer.query.weight(), 0),
        ConfigDim::new(
            "intermediate_size",
            c.intermediate_size,
            layer.expand.weight(),
            0,
        ),
    ]);
    dims
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
    /// Load a layer's tensors by `names`, sized by `c`.
    pub fn load(
        ckpt: &Checkpoint,
        names: &LayerNames,
        c: &EncoderConfig,
    ) -> Result<EncoderLayer, WeightsError> {
        let (hidden, intermediate, eps) = (c.hidden_size, c.intermediate_size, c.layer_norm_eps);
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
            activation: c.hidden_act,
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
        taps: Option<&mut LayerTaps>,
    ) -> Vec<f32> {
        let hidden = arch.hidden_size;
        let rows = batch.lengths.len() * batch.tokens;

        // Q, K and V side by side in one buffer: each row is [q | k | v], heads side by side.
        let mut qkv = self.qkv.forward(x, rows, Activation::Identity);
        if let Some(t) = taps.as_deref() {
            values::zero_values(t, &mut qkv, batch.tokens, 3 * hidden, 2 * hidden, hidden);
        }

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

        // Output projection, residual, LayerNorm.
        let projected = self.output.forward(&context, rows, Activation::Identity);
        if let Some(taps) = taps {
            // The norm-based analyses read the values and the LayerNorm's input (opt-in).
            let sum = projected.iter().zip(x).map(|(p, x)| p + x).collect();
            taps.norm_input = Some(sum);
            taps.qkv = qkv;
        }
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
    /// The tables `names` gives, of `c.embedding_size` columns, with positions read as
    /// `positions`, their LayerNorm (ε `c.layer_norm_eps`), and the projection to the hidden
    /// size when `names` has one.
    pub fn load(
        ckpt: &Checkpoint,
        names: &EmbeddingNames,
        c: &EncoderConfig,
        positions: Positions,
    ) -> Result<Embeddings, WeightsError> {
        let e = c.embedding_size;
        Ok(Embeddings {
            word: ckpt.weight(&names.word.weight(), &[c.vocab_size, e])?,
            position: Some(ckpt.weight(&names.position.weight(), &[c.max_position_embeddings, e])?),
            positions,
            token_type: match &names.token_type {
                Some(t) => Some(ckpt.weight(&t.weight(), &[c.type_vocab_size, e])?),
                None => None,
            },
            norm: Norm::layer(ckpt, &names.norm, e, c.layer_norm_eps)?,
            project: match &names.project {
                Some(p) => Some(Linear::load(ckpt, p, e, c.hidden_size)?),
                None => None,
            },
        })
    }

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
    /// The masked-LM head, when the checkpoint has one (the logit lens reads it).
    pub head: Option<MlmHead>,
}

impl Network for PostNormEncoder {
    fn architecture(&self) -> &Architecture {
        &self.arch
    }

    fn forward(&self, batch: &Batch<'_>, captures: &mut [SequenceCapture]) -> Vec<f32> {
        let mut x = self.embeddings.forward(batch);
        let residual = lens::wanted(captures);
        let hidden = self.arch.hidden_size;
        if residual {
            lens::keep(captures, 0, &x, batch.tokens, hidden);
        }
        for (depth, &l) in self.schedule.iter().enumerate() {
            let want = values::wanted(captures, depth);
            let mut sinks: Vec<CaptureSink> = captures.iter_mut().map(|c| c.layer(depth)).collect();
            if !want {
                x = self.layers[l].forward(&x, batch, &self.arch, &mut sinks, None);
                if residual {
                    lens::keep(captures, depth + 1, &x, batch.tokens, hidden);
                }
                continue;
            }
            let mut taps = LayerTaps::default();
            let next = self.layers[l].forward(&x, batch, &self.arch, &mut sinks, Some(&mut taps));
            let hidden = self.arch.hidden_size;
            let layer = &self.layers[l];
            values::fill(
                captures,
                depth,
                &self.arch,
                batch.tokens,
                Values {
                    data: &taps.qkv,
                    stride: 3 * hidden,
                    offset: 2 * hidden,
                },
                &layer.output,
                Some(&x),
                After::Residual(&layer.attention_norm),
                taps.norm_input.as_deref(),
            );
            x = next;
            if residual {
                lens::keep(captures, depth + 1, &x, batch.tokens, hidden);
            }
        }
        x
    }

    fn unembedding(&self) -> Option<&dyn Unembedding> {
        self.head.as_ref().map(|_| self as &dyn Unembedding)
    }

    fn value_zeroing(&self) -> Option<&dyn ValueZeroing> {
        Some(self)
    }
}

impl ValueZeroing for PostNormEncoder {
    fn zeroed_layer(
        &self,
        entering: &[f32],
        tokens: usize,
        layer: usize,
        zero: &[usize],
    ) -> Vec<f32> {
        let copies = zero.len();
        let mut x = Vec::with_capacity(copies * entering.len());
        for _ in 0..copies {
            x.extend_from_slice(entering);
        }
        let ids = vec![0u32; copies * tokens];
        let lengths = vec![tokens; copies];
        let batch = Batch {
            ids: &ids,
            types: &ids,
            lengths: &lengths,
            tokens,
            inserted: None,
        };
        let mut sinks: Vec<CaptureSink> = (0..copies)
            .map(|_| CaptureSink {
                probs: None,
                query_key: None,
                summary: None,
            })
            .collect();
        let mut taps = LayerTaps {
            zero_value: zero.iter().copied().map(Some).collect(),
            ..LayerTaps::default()
        };
        self.layers[self.schedule[layer]].forward(
            &x,
            &batch,
            &self.arch,
            &mut sinks,
            Some(&mut taps),
        )
    }
}

/// The masked-LM head over the residual stream: a post-LN encoder's every stage is the output
/// of a LayerNorm already, so the head reads it as it reads the last hidden state (no final
/// norm, no soft cap).
impl Unembedding for PostNormEncoder {
    fn logits(&self, residual: &[f32], rows: usize) -> Vec<f32> {
        let head = self.head.as_ref().expect("handed out with a head only");
        head.logits(residual, rows, &self.embeddings.word)
    }

    /// None: the head's dense map, activation and LayerNorm come before the decoder, so no
    /// logit is a sum of the parts' logits.
    fn direct(
        &self,
        _residual: &[f32],
        _parts: &[f32],
        _rows: usize,
        _tokens: &[u32],
    ) -> Option<(Vec<f32>, Vec<f32>)> {
        None
    }

    fn softcap(&self) -> Option<f32> {
        None
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
