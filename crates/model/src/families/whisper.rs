//! Whisper (and distil-whisper, the same `model_type` with fewer decoder layers): the
//! encoder–decoder stack ([`crate::blocks::seq2seq`]) whose encoder reads a log-mel spectrogram
//! instead of tokens. Mirrors transformers' `models/whisper/modeling_whisper.py`:
//!
//! - the encoder's input `[num_mel_bins, 2 · max_source_positions]` goes through two Conv1d
//!   (kernel 3, padding 1; stride 1, then 2), each followed by GELU (erf), and gets the fixed
//!   sinusoidal positions the checkpoint stores (`encoder.embed_positions`): one row per 20 ms
//!   of audio, 1500 for a 30-second window;
//! - pre-LayerNorm layers with BART's tensor names, a final `layer_norm` after each stack;
//!   queries, values and outputs have biases, keys none;
//! - the decoder has learned positions (`decoder.embed_positions`, offset 0) and its head is
//!   tied to its token embeddings (`proj_out`, unless the checkpoint stores one of its own).
//!
//! The decoding rules (prompt, suppressed tokens, timestamps) and word timings are
//! [`crate::speech`]'s; this file is the network, and how CTranslate2's `WhisperSpec` files
//! map onto it ([`CT2`]).

use crate::attention::PositionScheme;
use crate::blocks::capture::SequenceCapture;
use crate::blocks::family::{Family, FamilyConfig, Quirks};
use crate::blocks::generate::Generation;
use crate::blocks::layers::{out_in_linear, FfnNames, Linear, Norm};
use crate::blocks::network::{
    Architecture, Batch, DecoderPass, EncodedSource, Network, Seq2Seq, Seq2SeqForward, Speech,
};
use crate::blocks::seq2seq::{
    LayerShape, Placement, Seq2SeqHead, Seq2SeqLayer, Seq2SeqLayerNames, Seq2SeqNet, Side, Stack,
    StackPositions,
};
use crate::error::Error;
use crate::formats::config::{ConfigError, ConfigFile, ConfigProblem};
use crate::formats::ctranslate2::{Ct2Error, Ct2Layout, Ct2Model, Ct2Reader, Ct2Slice, Ct2Tokens};
use crate::formats::source::TOKENIZERS_WITH_SETTINGS;
use crate::formats::tensors::Name;
use crate::formats::validate::{ConfigCount, ConfigDim};
use crate::formats::weights::{Anchor, Checkpoint, Weight};
use crate::kernels::{Activation, Layout, Mask};

/// Whisper in the family registry.
pub static WHISPER: Family = Family {
    name: "Whisper",
    model_types: &["whisper"],
    class_prefixes: &["Whisper"],
    anchor: Anchor {
        tensor: "decoder.embed_tokens.weight",
        family: "Whisper",
        prefix: "model",
    },
    config: |file| Ok(Box::new(WhisperConfig::read(file)?)),
    quirks: Quirks {
        tokenizer_files: TOKENIZERS_WITH_SETTINGS,
        ..Quirks::NONE
    },
};

/// The config.json fields of Whisper, with transformers' defaults (`WhisperConfig`).
#[derive(Clone, Debug, PartialEq)]
pub struct WhisperConfig {
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Mel bins of the input (`num_mel_bins`: 80, or 128 for large-v3).
    pub num_mel_bins: usize,
    /// Hidden size (`d_model`).
    pub d_model: usize,
    /// Encoder layers.
    pub encoder_layers: usize,
    /// Decoder layers.
    pub decoder_layers: usize,
    /// Encoder heads.
    pub encoder_attention_heads: usize,
    /// Decoder heads (self- and cross-attention).
    pub decoder_attention_heads: usize,
    /// Encoder feed-forward size.
    pub encoder_ffn_dim: usize,
    /// Decoder feed-forward size.
    pub decoder_ffn_dim: usize,
    /// Encoder frames of one window (1500: 30 s at 20 ms).
    pub max_source_positions: usize,
    /// The longest decoder input (448).
    pub max_target_positions: usize,
    /// Feed-forward activation.
    pub activation: Activation,
    /// Whether token embeddings are multiplied by `√d_model`.
    pub scale_embedding: bool,
    /// `pad_token_id`.
    pub pad_token_id: u32,
    /// `decoder_start_token_id` (`<|startoftranscript|>`).
    pub decoder_start_token_id: u32,
}

/// The most encoder frames read (a 30-second window has 1500; the spectrogram of a window is
/// twice as long).
const MAX_SOURCE_POSITIONS: usize = 1 << 14;

impl WhisperConfig {
    /// Read config.json.
    pub fn read(file: &ConfigFile) -> Result<WhisperConfig, ConfigError> {
        let d_model = file.positive("d_model", 384)?;
        let c = WhisperConfig {
            vocab_size: file.positive("vocab_size", 51865)?,
            num_mel_bins: file.positive("num_mel_bins", 80)?,
            d_model,
            encoder_layers: file.positive("encoder_layers", 4)?,
            decoder_layers: file.positive("decoder_layers", 4)?,
            encoder_attention_heads: file.positive("encoder_attention_heads", 6)?,
            decoder_attention_heads: file.positive("decoder_attention_heads", 6)?,
            encoder_ffn_dim: file.positive("encoder_ffn_dim", 1536)?,
            decoder_ffn_dim: file.positive("decoder_ffn_dim", 1536)?,
            max_source_positions: file.positive("max_source_positions", 1500)?,
            max_target_positions: file.positive("max_target_positions", 448)?,
            activation: file.activation("activation_function", "gelu")?,
            scale_embedding: file.boolean("scale_embedding")?.unwrap_or(false),
            pad_token_id: file.token_id("pad_token_id")?.unwrap_or(50256),
            decoder_start_token_id: file.token_id("decoder_start_token_id")?.unwrap_or(50257),
        };
        for (field, heads) in [
            ("encoder_attention_heads", c.encoder_attention_heads),
            ("decoder_attention_heads", c.decoder_attention_heads),
        ] {
            if !d_model.is_multiple_of(heads) {
                return Err(file.invalid(ConfigProblem::NotDivisible {
                    field: "d_model",
                    value: d_model,
                    by_field: field,
                    by: heads,
                }));
            }
        }
        if c.max_source_positions > MAX_SOURCE_POSITIONS {
            return Err(file.invalid(ConfigProblem::NotBelow {
                field: "max_source_positions",
                value: c.max_source_positions,
                limit_field: "the most encoder frames attnviz reads",
                limit: MAX_SOURCE_POSITIONS + 1,
            }));
        }
        if c.decoder_start_token_id as usize >= c.vocab_size {
            return Err(file.invalid(ConfigProblem::NotBelow {
                field: "decoder_start_token_id",
                value: c.decoder_start_token_id as usize,
                limit_field: "vocab_size",
                limit: c.vocab_size,
            }));
        }
        Ok(c)
    }

    fn arch(&self, layers: usize, heads: usize, mask: Mask, max_positions: usize) -> Architecture {
        Architecture {
            family: WHISPER.name,
            model_type: WHISPER.model_types[0].to_string(),
            layers,
            heads,
            kv_heads: heads,
            kv_head: Architecture::identity_heads(heads),
            head_dim: self.d_model / heads,
            hidden_size: self.d_model,
            vocab_size: self.vocab_size,
            max_positions,
            token_types: 0,
            tokenizer_types: false,
            mask,
            sliding_window: None,
            positions: PositionScheme::Absolute,
        }
    }

    /// The encoder's shape (its positions: encoder frames).
    pub fn encoder_architecture(&self) -> Architecture {
        self.arch(
            self.encoder_layers,
            self.encoder_attention_heads,
            Mask::Bidirectional,
            self.max_source_positions,
        )
    }

    /// The decoder's shape.
    pub fn decoder_architecture(&self) -> Architecture {
        self.arch(
            self.decoder_layers,
            self.decoder_attention_heads,
            Mask::Causal,
            self.max_target_positions,
        )
    }

    fn stack(&self, ckpt: &Checkpoint, side: Side) -> Result<Stack, Error> {
        let d = self.d_model;
        let (layers, ffn) = match side {
            Side::Decoder => (self.decoder_layers, self.decoder_ffn_dim),
            Side::Encoder => (self.encoder_layers, self.encoder_ffn_dim),
        };
        // Keys have no bias (`k_proj` is `bias=False`); every other map has one.
        let linear = |name: &Name, i, o| {
            let bias = !name.to_string().ends_with("k_proj");
            out_in_linear(ckpt, name, i, o, bias)
        };
        let norm = |name: &Name| Ok(Norm::layer(ckpt, name, d, 1e-5)?);
        let shape = LayerShape {
            hidden: d,
            inner: d,
            ffn,
            activation: self.activation,
        };
        let layers = (0..layers)
            .map(|i| Seq2SeqLayer::load(&Names::layer(side, i), shape, &linear, &norm))
            .collect::<Result<Vec<_>, Error>>()?;
        let names = Names::stack(side);
        let positions = match side {
            Side::Encoder => StackPositions::Embedded,
            Side::Decoder => StackPositions::Table {
                table: ckpt.weight(&names.positions.weight(), &[self.max_target_positions, d])?,
                offset: 0,
            },
        };
        Ok(Stack {
            layers,
            positions,
            embed_norm: None,
            final_norm: Some(norm(&names.final_norm)?),
        })
    }
}

/// Whisper's tensor names inside the base model (`model.`): BART's layers, its own front.
struct Names {
    /// Positions (`embed_positions`).
    positions: Name,
    /// The LayerNorm after the last layer (`layer_norm`).
    final_norm: Name,
}

impl Names {
    /// The decoder's token embeddings (the head's too).
    fn tokens() -> Name {
        Name::root().pp("decoder").pp("embed_tokens")
    }

    /// The encoder's convolution `i` (1 or 2).
    fn conv(i: usize) -> Name {
        Name::root().pp("encoder").pp(format!("conv{i}"))
    }

    fn stack(side: Side) -> Names {
        let stack = Name::root().pp(side.module());
        Names {
            positions: stack.pp("embed_positions"),
            final_norm: stack.pp("layer_norm"),
        }
    }

    fn layer(side: Side, i: usize) -> Seq2SeqLayerNames {
        Seq2SeqLayerNames::bart(side, i)
    }
}

impl FamilyConfig for WhisperConfig {
    fn checks(&self) -> (Vec<ConfigDim>, Vec<ConfigCount>) {
        let tokens = Names::tokens().weight();
        let ffn = |side| Names::layer(side, 0).ffn.first().weight();
        let dims = vec![
            ConfigDim::new("vocab_size", self.vocab_size, &tokens, 0),
            ConfigDim::new("d_model", self.d_model, &tokens, 1),
            ConfigDim::new(
                "num_mel_bins",
                self.num_mel_bins,
                Names::conv(1).weight(),
                1,
            ),
            ConfigDim::new(
                "encoder_ffn_dim",
                self.encoder_ffn_dim,
                ffn(Side::Encoder),
                0,
            ),
            ConfigDim::new(
                "decoder_ffn_dim",
                self.decoder_ffn_dim,
                ffn(Side::Decoder),
                0,
            ),
            ConfigDim::new(
                "max_source_positions",
                self.max_source_positions,
                Names::stack(Side::Encoder).positions.weight(),
                0,
            ),
            ConfigDim::new(
                "max_target_positions",
                self.max_target_positions,
                Names::stack(Side::Decoder).positions.weight(),
                0,
            ),
        ];
        let count = |field, value, block, side| {
            ConfigCount::new(field, value, block, move |i| {
                Names::layer(side, i).ffn.first().weight()
            })
        };
        let counts = vec![
            count(
                "encoder_layers",
                self.encoder_layers,
                "encoder layer",
                Side::Encoder,
            ),
            count(
                "decoder_layers",
                self.decoder_layers,
                "decoder layer",
                Side::Decoder,
            ),
        ];
        (dims, counts)
    }

    fn build(&self, ckpt: &Checkpoint) -> Result<Box<dyn Network>, Error> {
        let (d, vocab) = (self.d_model, self.vocab_size);
        let head = match ckpt.top_level_weight("proj_out.weight", &[vocab, d])? {
            Some(w) => Seq2SeqHead::Separate(Linear::new(w, Layout::OutIn, None)),
            None => Seq2SeqHead::Tied,
        };
        let encoder_arch = self.encoder_architecture();
        let net = Seq2SeqNet {
            scale: (encoder_arch.head_dim as f64).powf(-0.5) as f32,
            decoder_arch: self.decoder_architecture(),
            encoder_arch,
            shared: ckpt.weight(&Names::tokens().weight(), &[vocab, d])?,
            embed_scale: if self.scale_embedding {
                (d as f64).sqrt() as f32
            } else {
                1.0
            },
            placement: Placement::Pre,
            encoder: self.stack(ckpt, Side::Encoder)?,
            decoder: self.stack(ckpt, Side::Decoder)?,
            head,
            output_scale: 1.0,
            logits_bias: None,
            decoder_start: self.decoder_start_token_id,
            pad: self.pad_token_id,
            screen: Default::default(),
        };
        let conv = |i: usize, inputs: usize| -> Result<Conv1d, Error> {
            let name = Names::conv(i);
            let w = ckpt.weight(&name.weight(), &[d, inputs, 3])?;
            Ok(Conv1d {
                map: Linear::new(
                    Weight::owned(w.to_vec(), vec![d, inputs * 3]),
                    Layout::OutIn,
                    Some(ckpt.weight(&name.bias(), &[d])?),
                ),
                inputs,
                stride: i,
            })
        };
        Ok(Box::new(WhisperNet {
            conv1: conv(1, self.num_mel_bins)?,
            conv2: conv(2, d)?,
            positions: ckpt.weight(
                &Names::stack(Side::Encoder).positions.weight(),
                &[self.max_source_positions, d],
            )?,
            mel_bins: self.num_mel_bins,
            net,
        }))
    }
}

/// Whisper from CTranslate2's files (`WhisperSpec`, what `ct2-transformers-converter` writes):
/// the same network under other names, as tests/reference/ct2_to_transformers.py converts it.
pub static CT2: Ct2Reader = Ct2Reader {
    specs: &["WhisperSpec"],
    layout: ct2_layout,
};

/// The most layers counted in a CTranslate2 stack (large-v3 has 32).
const MAX_CT2_LAYERS: usize = 1024;

/// CTranslate2's name of layer `i` of `side` (`encoder/layer_3`).
fn ct2_layer(side: Side, i: usize) -> String {
    format!("{}/layer_{i}", side.module())
}

/// Layers of `side` in the file: `layer_0`, `layer_1`, … while each has a feed-forward map.
fn ct2_layers(model: &Ct2Model, side: Side) -> usize {
    (0..MAX_CT2_LAYERS)
        .take_while(|&i| {
            model
                .get(&format!("{}/ffn/linear_0/weight", ct2_layer(side, i)))
                .is_some()
        })
        .count()
}

/// transformers' names of Whisper's tensors and where CTranslate2 keeps each: its attention
/// maps fused (self-attention's q | k | v in `linear_0`, cross-attention's k | v in
/// `linear_1`), LayerNorms as `gamma`/`beta`, the keys' zero bias dropped (transformers' keys
/// have none; a bias on the keys adds one constant to each query's scores, which the softmax
/// takes away).
fn ct2_names(
    model: &Ct2Model,
    encoder_layers: usize,
    decoder_layers: usize,
) -> Vec<(String, Ct2Slice)> {
    let mut names = Vec::new();
    let mut whole = |hf: String, ct: String| names.push((hf, Ct2Slice::whole(ct)));
    let linear = |hf: &Name, ct: &str, put: &mut dyn FnMut(String, String)| {
        put(hf.weight(), format!("{ct}/weight"));
        put(hf.bias(), format!("{ct}/bias"));
    };
    let norm = |hf: &Name, ct: &str, put: &mut dyn FnMut(String, String)| {
        put(hf.weight(), format!("{ct}/gamma"));
        put(hf.bias(), format!("{ct}/beta"));
    };
    let mut parts = Vec::new();
    for (side, layers) in [
        (Side::Encoder, encoder_layers),
        (Side::Decoder, decoder_layers),
    ] {
        let stack = Names::stack(side);
        let module = side.module();
        whole(
            stack.positions.weight(),
            format!("{module}/position_encodings/encodings"),
        );
        norm(
            &stack.final_norm,
            &format!("{module}/layer_norm"),
            &mut whole,
        );
        for i in 0..layers {
            let (hf, ct) = (Names::layer(side, i), ct2_layer(side, i));
            let a = &hf.self_attention;
            let fused = format!("{ct}/self_attention/linear_0");
            for (part, name) in [&a.q, &a.k, &a.v].into_iter().enumerate() {
                parts.push((
                    name.weight(),
                    Ct2Slice::rows(format!("{fused}/weight"), part, 3),
                ));
                if part != 1 {
                    parts.push((
                        name.bias(),
                        Ct2Slice::rows(format!("{fused}/bias"), part, 3),
                    ));
                }
            }
            linear(
                &a.output,
                &format!("{ct}/self_attention/linear_1"),
                &mut whole,
            );
            norm(
                &a.norm,
                &format!("{ct}/self_attention/layer_norm"),
                &mut whole,
            );
            if let Some(c) = &hf.cross {
                linear(&c.q, &format!("{ct}/attention/linear_0"), &mut whole);
                let fused = format!("{ct}/attention/linear_1");
                for (part, name) in [&c.k, &c.v].into_iter().enumerate() {
                    parts.push((
                        name.weight(),
                        Ct2Slice::rows(format!("{fused}/weight"), part, 2),
                    ));
                    if part != 0 {
                        parts.push((
                            name.bias(),
                            Ct2Slice::rows(format!("{fused}/bias"), part, 2),
                        ));
                    }
                }
                linear(&c.output, &format!("{ct}/attention/linear_2"), &mut whole);
                norm(&c.norm, &format!("{ct}/attention/layer_norm"), &mut whole);
            }
            if let FfnNames::Plain { expand, project } = &hf.ffn {
                linear(expand, &format!("{ct}/ffn/linear_0"), &mut whole);
                linear(project, &format!("{ct}/ffn/linear_1"), &mut whole);
            }
            norm(&hf.ffn_norm, &format!("{ct}/ffn/layer_norm"), &mut whole);
        }
    }
    for i in 1..=2 {
        linear(&Names::conv(i), &format!("encoder/conv{i}"), &mut whole);
    }
    whole(Names::tokens().weight(), "decoder/embeddings/weight".into());
    // The head: tied to the embeddings (an alias), else a matrix of its own.
    let (head, embeddings) = ("decoder/projection/weight", "decoder/embeddings/weight");
    let resolved = |name: &str| model.get(name).map(|v| v.name.clone());
    if resolved(head).is_some() && resolved(head) != resolved(embeddings) {
        whole("proj_out.weight".into(), head.into());
    }
    names.extend(parts);
    names
}

/// The first dimension (`dim` 0) or another of variable `name`.
fn ct2_dim(model: &Ct2Model, name: &str, dim: usize) -> Result<usize, Ct2Error> {
    let v = model.get(name).ok_or_else(|| Ct2Error::Missing {
        path: model.path().to_path_buf(),
        name: name.to_string(),
    })?;
    v.shape
        .get(dim)
        .copied()
        .ok_or_else(|| Ct2Error::Attribute {
            path: model.path().to_path_buf(),
            name: name.to_string(),
            value: format!("of shape {:?}", v.shape),
            expected: format!("Whisper's has at least {} dimensions", dim + 1),
        })
}

/// transformers' config.json and generation_config.json of the Whisper in `model`, as
/// ct2_to_transformers.py writes them: every size from the tensors, the heads from the spec's
/// `num_heads`, the special tokens' ids from the tokenizer, the alignment heads, suppressed
/// tokens and language ids from CTranslate2's config.json.
fn ct2_layout(
    model: &Ct2Model,
    ct2_config: Option<&serde_json::Value>,
    tokens: &dyn Ct2Tokens,
) -> Result<Ct2Layout, Ct2Error> {
    use serde_json::{json, Value};
    // The decoder's scalar attributes: what the converter writes for every Whisper.
    let gelu = 3; // CTranslate2's ActivationType::GELU (erf).
    model.attribute(
        "decoder/activation",
        &[gelu],
        Some(gelu),
        "Whisper's decoder uses GELU (3)",
    )?;
    model.attribute(
        "decoder/pre_norm",
        &[1],
        Some(1),
        "Whisper's layers are pre-norm (1)",
    )?;
    model.attribute("decoder/alibi", &[0], Some(0), "Whisper has no ALiBi (0)")?;
    let scale = model.attribute(
        "decoder/scale_embeddings",
        &[0, 1],
        Some(0),
        "a flag (0 or 1) is needed",
    )?;
    let heads = |side: &str| {
        model.attribute(
            &format!("{side}/num_heads"),
            &(1..=1024).collect::<Vec<_>>(),
            None,
            "a head count from 1 to 1024 is needed",
        )
    };
    let (encoder_heads, decoder_heads) = (heads("encoder")?, heads("decoder")?);
    let (encoder_layers, decoder_layers) = (
        ct2_layers(model, Side::Encoder),
        ct2_layers(model, Side::Decoder),
    );
    let ffn = |side: Side| {
        ct2_dim(
            model,
            &format!("{}/ffn/linear_0/weight", ct2_layer(side, 0)),
            0,
        )
    };
    let vocab = ct2_dim(model, "decoder/embeddings/weight", 0)?;
    let d_model = ct2_dim(model, "encoder/conv1/weight", 0)?;
    let mel_bins = ct2_dim(model, "encoder/conv1/weight", 1)?;
    let tokenizer = model.path().with_file_name("tokenizer.json");
    let id = |token: &str| {
        tokens.id(token).ok_or_else(|| Ct2Error::BadFile {
            path: tokenizer.clone(),
            problem: format!("it has no {token} token, which every Whisper tokenizer has"),
        })
    };
    let eot = id("<|endoftext|>")?;
    let sot = id("<|startoftranscript|>")?;
    let field = |key: &str| ct2_config.and_then(|c| c.get(key)).cloned();
    let list = |key: &str| field(key).unwrap_or_else(|| json!([]));
    let max_target = ct2_dim(model, "decoder/position_encodings/encodings", 0)?;
    let config = json!({
        "architectures": ["WhisperForConditionalGeneration"],
        "model_type": "whisper",
        "vocab_size": vocab,
        "num_mel_bins": mel_bins,
        "d_model": d_model,
        "encoder_layers": encoder_layers,
        "decoder_layers": decoder_layers,
        "encoder_attention_heads": encoder_heads,
        "decoder_attention_heads": decoder_heads,
        "encoder_ffn_dim": ffn(Side::Encoder)?,
        "decoder_ffn_dim": ffn(Side::Decoder)?,
        "max_source_positions": ct2_dim(model, "encoder/position_encodings/encodings", 0)?,
        "max_target_positions": max_target,
        "activation_function": "gelu",
        "scale_embedding": scale == 1,
        "tie_word_embeddings": true,
        "bos_token_id": eot,
        "eos_token_id": eot,
        "pad_token_id": eot,
        "decoder_start_token_id": sot,
        "suppress_tokens": list("suppress_ids"),
        "begin_suppress_tokens": list("suppress_ids_begin"),
    });
    // transformers' multilingual checkpoints have 51865 tokens or more (large-v3: 51866).
    let multilingual = vocab >= 51865;
    let mut generation = json!({
        "alignment_heads": field("alignment_heads").unwrap_or(Value::Null),
        "begin_suppress_tokens": list("suppress_ids_begin"),
        "suppress_tokens": list("suppress_ids"),
        "bos_token_id": eot,
        "eos_token_id": eot,
        "pad_token_id": eot,
        "decoder_start_token_id": sot,
        "no_timestamps_token_id": id("<|notimestamps|>")?,
        "prev_sot_token_id": tokens.id("<|startofprev|>"),
        "is_multilingual": multilingual,
        "max_initial_timestamp_index": 50,
        "max_length": max_target,
        "return_timestamps": false,
    });
    if multilingual {
        let mut languages = serde_json::Map::new();
        for v in list("lang_ids").as_array().into_iter().flatten() {
            let name = v
                .as_u64()
                .and_then(|i| u32::try_from(i).ok())
                .and_then(|i| Some((tokens.token(i)?, i)));
            let Some((token, i)) = name else {
                return Err(Ct2Error::BadFile {
                    path: model.path().with_file_name("config.json"),
                    problem: format!("lang_ids holds {v}, not a token id of the tokenizer"),
                });
            };
            languages.insert(token, json!(i));
        }
        generation["lang_to_id"] = Value::Object(languages);
        generation["task_to_id"] = json!({
            "transcribe": id("<|transcribe|>")?,
            "translate": id("<|translate|>")?,
        });
    }
    Ok(Ct2Layout {
        config,
        generation,
        names: ct2_names(model, encoder_layers, decoder_layers),
    })
}

/// A Conv1d of kernel 3 and padding 1, run as a linear map over each output frame's three
/// input frames (`[inputs · 3]`, channel-major as PyTorch stores the kernel).
struct Conv1d {
    /// `[outputs, inputs · 3]`.
    map: Linear,
    inputs: usize,
    stride: usize,
}

impl Conv1d {
    /// `gelu(conv(x))` for `x` of `frames` frames, read by `at(channel, frame)`; returns
    /// `[frames / stride, outputs]` (frame-major).
    fn forward(&self, frames: usize, at: impl Fn(usize, usize) -> f32) -> Vec<f32> {
        let out_frames = frames.div_ceil(self.stride);
        let width = self.inputs * 3;
        let mut columns = vec![0f32; out_frames * width];
        for (t, row) in columns.chunks_exact_mut(width).enumerate() {
            let centre = t * self.stride;
            for c in 0..self.inputs {
                for k in 0..3 {
                    // Input frame centre + k − 1; the padding is zeros.
                    if let Some(f) = (centre + k).checked_sub(1).filter(|&f| f < frames) {
                        row[c * 3 + k] = at(c, f);
                    }
                }
            }
        }
        self.map.forward(&columns, out_frames, Activation::GeluErf)
    }
}

/// Whisper's network: the convolutions and positions in front of the shared encoder–decoder.
pub struct WhisperNet {
    conv1: Conv1d,
    conv2: Conv1d,
    /// `[max_source_positions, hidden]`, sinusoidal.
    positions: Weight,
    mel_bins: usize,
    net: Seq2SeqNet,
}

impl WhisperNet {
    /// The encoder's input rows `[max_source_positions, hidden]` of `features` (`[mel_bins,
    /// window_frames]`).
    fn front(&self, features: &[f32]) -> Vec<f32> {
        let frames = self.window_frames();
        assert_eq!(features.len(), self.mel_bins * frames, "features");
        let h1 = self.conv1.forward(frames, |c, f| features[c * frames + f]);
        let d = self.net.encoder_arch.hidden_size;
        let mut h = self.conv2.forward(frames, |c, f| h1[f * d + c]);
        for (x, p) in h.iter_mut().zip(self.positions.iter()) {
            *x += p;
        }
        h
    }
}

impl Speech for WhisperNet {
    fn mel_bins(&self) -> usize {
        self.mel_bins
    }

    fn prepare_decoding(&self) {
        self.net.logit_screen();
    }

    fn window_frames(&self) -> usize {
        2 * self.net.encoder_arch.max_positions
    }

    fn encode_features(
        &self,
        features: &[f32],
        capture: bool,
        capture_query_key: bool,
    ) -> Result<EncodedSource, Error> {
        self.net
            .encode_rows(self.front(features), capture, capture_query_key)
    }

    fn decode_encoded(
        &self,
        source: &EncodedSource,
        decoder: &[u32],
        capture_query_key: bool,
    ) -> Result<DecoderPass, Error> {
        self.net.decode_encoded(source, decoder, capture_query_key)
    }

    #[allow(clippy::too_many_arguments)]
    fn greedy_encoded(
        &self,
        source: &EncodedSource,
        prompt: &[u32],
        max_new_tokens: usize,
        eos: &[u32],
        rule: &mut (dyn FnMut(&[u32], &mut [f32]) + Send),
        masks_only: bool,
        progress: &mut (dyn FnMut(usize) + Send),
    ) -> Result<Generation, Error> {
        self.net.greedy_encoded(
            source,
            prompt,
            max_new_tokens,
            eos,
            rule,
            masks_only,
            progress,
        )
    }
}

impl Seq2Seq for WhisperNet {
    fn encoder_architecture(&self) -> &Architecture {
        &self.net.encoder_arch
    }

    fn decoder_architecture(&self) -> &Architecture {
        &self.net.decoder_arch
    }

    fn decoder_start(&self) -> u32 {
        self.net.decoder_start
    }

    fn decoder_positions(&self) -> usize {
        self.net.decoder_arch.max_positions
    }

    /// Whisper's encoder reads a spectrogram, not ids.
    fn forward_ids(&self, _: &[u32], _: &[u32], _: bool) -> Result<Seq2SeqForward, Error> {
        Err(crate::InputError::NeedsAudio {
            family: WHISPER.name,
        }
        .into())
    }

    /// Whisper's encoder reads a spectrogram, not ids.
    fn greedy(
        &self,
        _: &[u32],
        _: usize,
        _: &[u32],
        _: (Option<u32>, Option<u32>),
        _: &mut (dyn FnMut(usize) + Send),
    ) -> Result<Generation, Error> {
        Err(crate::InputError::NeedsAudio {
            family: WHISPER.name,
        }
        .into())
    }
}

impl Network for WhisperNet {
    fn architecture(&self) -> &Architecture {
        &self.net.encoder_arch
    }

    /// Whisper's encoder reads a spectrogram: the model refuses token input before this runs
    /// ([`crate::InputError::NeedsAudio`]); here the captures are left as they are and the
    /// output is zeros.
    fn forward(&self, batch: &Batch<'_>, _captures: &mut [SequenceCapture]) -> Vec<f32> {
        vec![0.0; batch.ids.len() * self.net.encoder_arch.hidden_size]
    }

    fn seq2seq(&self) -> Option<&dyn Seq2Seq> {
        Some(self)
    }

    fn speech(&self) -> Option<&dyn Speech> {
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn read(text: &str) -> Result<WhisperConfig, String> {
        let file = ConfigFile::parse(text, Path::new("config.json")).unwrap();
        WhisperConfig::read(&file).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_are_transformers() {
        let c = read(r#"{"model_type": "whisper"}"#).unwrap();
        assert_eq!(
            (c.vocab_size, c.num_mel_bins, c.d_model, c.encoder_layers),
            (51865, 80, 384, 4)
        );
        assert_eq!(
            (c.max_source_positions, c.max_target_positions),
            (1500, 448)
        );
        assert_eq!((c.pad_token_id, c.decoder_start_token_id), (50256, 50257));
        assert_eq!(c.encoder_architecture().max_positions, 1500);
        assert_eq!(c.decoder_architecture().mask, Mask::Causal);
    }

    #[test]
    fn refusals() {
        let err = read(r#"{"d_model": 64, "encoder_attention_heads": 3}"#).unwrap_err();
        assert!(err.contains("not divisible"), "{err}");
        let err = read(r#"{"max_source_positions": 1000000}"#).unwrap_err();
        assert!(err.contains("max_source_positions"), "{err}");
        let err = read(r#"{"vocab_size": 10}"#).unwrap_err();
        assert!(err.contains("decoder_start_token_id 50257"), "{err}");
    }

    #[test]
    fn the_anchor_is_a_tensor_of_the_table() {
        assert_eq!(WHISPER.anchor.tensor, Names::tokens().weight());
    }
}
