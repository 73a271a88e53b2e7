//! Encoder–decoder models (BART, mBART, Marian, T5) behind [`Model`]: the source text runs
//! through the encoder, and the decoder reads either a target the user gives (teacher forcing:
//! the target's labels shifted right behind the decoder start token, as transformers'
//! `shift_tokens_right` does) or what greedy decoding generates. One run captures three
//! [`Attention`] values: encoder self-attention, decoder self-attention (causal) and
//! cross-attention (decoder tokens × encoder tokens).

use super::blocks::family::DecoderStart;
use super::blocks::generate::Generation;
use super::blocks::network::{Architecture, Seq2Seq};
use super::error::Error;
use super::{Capture, CaptureTooBig, EncodeOptions, Model, TargetError};
use crate::attention::{Attention, AttentionKind, ModelInfo, PositionScheme, Units};
use crate::tokenize::{self, Encoded};

/// transformers' default `max_length` for generation: 20 decoder tokens, the start token
/// included.
pub const DEFAULT_MAX_LENGTH: usize = 20;

/// What the decoder reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecoderInput<'a> {
    /// A target to teacher-force (`--target`).
    Target(&'a str),
    /// Greedy decoding of up to this many new tokens (`--generate N`, or the default).
    Generate(usize),
}

pub use super::blocks::network::Seq2SeqForward;

/// The result of [`Model::encode_seq2seq`].
#[derive(Clone, Debug)]
pub struct Seq2SeqEncoding {
    /// Encoder self-attention, decoder self-attention and cross-attention, in that order.
    pub attentions: Vec<Attention>,
    /// The encoder's output `[source tokens, hidden]`.
    pub encoder_hidden: Vec<f32>,
    /// The decoder's output `[decoder tokens, hidden]`.
    pub decoder_hidden: Vec<f32>,
    /// The target's labels (teacher forcing): what the decoder is trained to predict.
    pub labels: Option<Vec<u32>>,
    /// What was generated: the decoder start token and the new tokens.
    pub generation: Option<Generation>,
    /// Token count of the source when it was truncated (`--truncate`).
    pub truncated_from: Option<usize>,
    /// Token count of the target's labels when they were truncated.
    pub target_truncated_from: Option<usize>,
    /// Whether the source was first cut to [`tokenize::byte_limit`] bytes (`--truncate`).
    pub bytes_cut: bool,
    /// Whether the target was first cut to the decoder's byte limit (`--truncate`).
    pub target_bytes_cut: bool,
}

impl Model {
    /// The encoder–decoder network, or an error naming what this model is.
    fn seq2seq_net(&self) -> Result<&dyn Seq2Seq, Error> {
        self.network.seq2seq().ok_or_else(|| Error::NotSeq2Seq {
            model: self.info.name().to_string(),
            family: self.family().to_string(),
        })
    }

    /// Whether this is an encoder–decoder model (BART, mBART, Marian, T5).
    pub fn is_seq2seq(&self) -> bool {
        self.network.seq2seq().is_some()
    }

    /// The token the decoder starts from (`decoder_start_token_id`), for encoder–decoders.
    pub fn decoder_start(&self) -> Option<u32> {
        self.network.seq2seq().map(|n| n.decoder_start())
    }

    /// How many tokens an encoder–decoder generates when not told: the checkpoint's
    /// `max_length` (generation_config.json, then config.json) less the start token, at most
    /// transformers' default of 20 decoder tokens.
    pub fn default_generation_length(&self) -> usize {
        let max_length = self
            .generation
            .max_length
            .map_or(DEFAULT_MAX_LENGTH, |m| m.min(DEFAULT_MAX_LENGTH));
        max_length.saturating_sub(1).max(1)
    }

    /// The longest decoder input: the decoder's positions and the tokenizer's
    /// `model_max_length`.
    pub fn max_target_positions(&self) -> usize {
        let longest = self.network.seq2seq().map_or(0, |n| n.decoder_positions());
        self.model_max_length.map_or(longest, |m| m.min(longest))
    }

    /// The decoder's positions (encoder–decoders).
    pub fn seq2seq_decoder_positions(&self) -> Option<usize> {
        self.network.seq2seq().map(|n| n.decoder_positions())
    }

    /// The decoder's layers and heads (those of its self- and cross-attention), `None` for a
    /// model that is no encoder–decoder.
    pub fn decoder_shape(&self) -> Option<(usize, usize)> {
        let dec = self.network.seq2seq()?.decoder_architecture();
        Some((dec.layers, dec.heads))
    }

    /// The bytes the three captures take for `n` source and `m` decoder tokens, or `None` on
    /// overflow.
    pub fn seq2seq_capture_bytes(&self, n: usize, m: usize, query_key: bool) -> Option<u64> {
        let net = self.network.seq2seq()?;
        let (enc, dec) = (net.encoder_architecture(), net.decoder_architecture());
        let part = |layers: usize, heads: usize, d: usize, q: usize, k: usize| -> Option<u64> {
            let mut per_head = (q as u64).checked_mul(k as u64)?;
            if query_key {
                per_head = per_head.checked_add(((q + k) as u64).checked_mul(d as u64)?)?;
            }
            per_head
                .checked_mul(layers as u64)?
                .checked_mul(heads as u64)?
                .checked_mul(4)
        };
        part(enc.layers, enc.heads, enc.head_dim, n, n)?
            .checked_add(part(dec.layers, dec.heads, dec.head_dim, m, m)?)?
            .checked_add(part(dec.layers, dec.heads, dec.head_dim, m, n)?)
    }

    pub(crate) fn check_seq2seq_capture(
        &self,
        n: usize,
        m: usize,
        query_key: bool,
        max_memory: Option<u64>,
    ) -> Result<(), Error> {
        let budget = max_memory.unwrap_or_else(super::default_capture_budget);
        let needs = self.seq2seq_capture_bytes(n, m, query_key);
        if needs.is_some_and(|b| b <= budget) {
            return Ok(());
        }
        Err(Error::TooBig(CaptureTooBig {
            capture: Capture::EncoderDecoder {
                source: n,
                decoder: m,
            },
            needs,
            budget,
            budget_given: max_memory.is_some(),
        }))
    }

    /// `max_new_tokens` and the start token within the decoder's positions.
    fn check_generation_length(&self, max_new_tokens: usize) -> Result<(), Error> {
        let longest = self.max_target_positions();
        if max_new_tokens >= longest {
            return Err(crate::InputError::DecoderTooShort {
                new: max_new_tokens,
                longest,
            }
            .into());
        }
        Ok(())
    }

    fn check_ids(&self, which: &str, ids: &[u32], longest: usize) -> Result<(), Error> {
        let vocab = self.architecture().vocab_size;
        if ids.is_empty() {
            return Err(crate::InputError::NoSideTokens {
                which: which.to_string(),
            }
            .into());
        }
        if ids.len() > longest {
            return Err(Error::SideTooLong {
                which: which.to_string(),
                tokens: ids.len(),
                max: longest,
            });
        }
        if let Some(&id) = ids.iter().find(|&&id| id as usize >= vocab) {
            return Err(crate::InputError::SideIdOutsideVocabulary {
                which: which.to_string(),
                id,
                vocab,
            }
            .into());
        }
        Ok(())
    }

    /// Run `source` ids through the encoder and `decoder` ids through the decoder (teacher
    /// forcing: the decoder input as given, its first id the start token), capturing all three
    /// kinds of attention.
    pub fn forward_seq2seq(
        &self,
        source: &[u32],
        decoder: &[u32],
        capture_query_key: bool,
        max_memory: Option<u64>,
    ) -> Result<Seq2SeqForward, Error> {
        let net = self.seq2seq_net()?;
        self.check_ids("source", source, self.max_positions())?;
        self.check_ids("decoder input", decoder, self.max_target_positions())?;
        let (n, m) = (source.len(), decoder.len());
        self.check_seq2seq_capture(n, m, capture_query_key, max_memory)?;
        net.forward_ids(source, decoder, capture_query_key)
    }

    /// Greedy decoding of up to `max_new_tokens` after the decoder start token, for `source`
    /// ids, with the decoder's self-attention and cross-attention keys and values cached;
    /// stops after an EOS token (kept). Applies the checkpoint's `forced_bos_token_id` (first
    /// token) and `forced_eos_token_id` (a last token at the length limit), as transformers'
    /// logits processors do. The returned ids start with the start token (`prompt_len` 1).
    pub fn generate_seq2seq(
        &self,
        source: &[u32],
        max_new_tokens: usize,
        progress: &mut (dyn FnMut(usize) + Send),
    ) -> Result<Generation, Error> {
        let net = self.seq2seq_net()?;
        self.check_ids("source", source, self.max_positions())?;
        self.check_generation_length(max_new_tokens)?;
        let g = &self.generation;
        net.greedy(
            source,
            max_new_tokens,
            &g.eos_token_ids,
            (g.forced_bos_token_id, g.forced_eos_token_id),
            progress,
        )
    }

    /// The target's labels as the tokenizer's `text_target` gives them: the target with the
    /// tokenizer's special tokens, mBART's target-language code in place of the source's.
    pub fn target_labels(&self, target: &str, truncate: bool) -> Result<Encoded, Error> {
        let mut enc = self
            .target_side()
            .encode(target, None, self.max_target_positions(), truncate)
            .map_err(|e| match e {
                tokenize::Error::Empty { .. } => Error::Target(TargetError::Empty),
                // The tokenizer's errors speak of the input: these say it is the target.
                tokenize::Error::TooLong { tokens, max } => {
                    Error::Target(TargetError::TooLong { tokens, max })
                }
                tokenize::Error::TooManyBytes { bytes, limit, .. } => {
                    Error::Target(TargetError::TooManyBytes { bytes, limit })
                }
                tokenize::Error::NoTokens { .. } => Error::Target(TargetError::NoTokens),
                other => other.into(),
            })?;
        if let Some((source, target)) = self.language_codes() {
            if enc.tokens.last() == Some(&source) {
                if let Some(id) = self.tokenizer.encode_plain(&target)?.first().copied() {
                    let last = enc.ids.len() - 1;
                    enc.ids[last] = id;
                    enc.tokens[last] = target;
                }
            }
        }
        Ok(enc)
    }

    /// The tokenizer of the target side: Marian's target.spm, else the model's one tokenizer.
    pub fn target_side(&self) -> &crate::tokenize::TextTokenizer {
        self.target_tokenizer.as_ref().unwrap_or(&self.tokenizer)
    }

    /// The source and target language codes (tokenizer_config.json's `src_lang` and
    /// `tgt_lang`) of a family whose target labels end with one, when both are set.
    fn language_codes(&self) -> Option<(String, String)> {
        if !self.family.quirks.target_language_code {
            return None;
        }
        let settings = self.tokenizer.settings();
        let code = |k: &str| settings.string(k).map(str::to_string);
        Some((code("src_lang")?, code("tgt_lang")?))
    }

    /// The decoder's input for teacher forcing: `labels` shifted right behind the start token
    /// (BART, T5, Marian: `decoder_start_token_id`; mBART: the last label, its language code,
    /// wrapped to the front), the last label dropped, as transformers' `shift_tokens_right`.
    pub fn decoder_input(&self, labels: &Encoded) -> Result<Encoded, Error> {
        let net = self.seq2seq_net()?;
        let start = match self.family.quirks.decoder_start {
            DecoderStart::LastLabel => *labels.ids.last().unwrap_or(&net.decoder_start()),
            DecoderStart::Config => net.decoder_start(),
        };
        let mut out = self.start_unit(start);
        let keep = labels.ids.len().saturating_sub(1);
        out.tokens.extend_from_slice(&labels.tokens[..keep]);
        out.ids.extend_from_slice(&labels.ids[..keep]);
        out.type_ids.extend(std::iter::repeat_n(0, keep));
        out.segments.extend(std::iter::repeat_n(0, keep));
        out.roles.extend_from_slice(&labels.roles[..keep]);
        out.special.extend_from_slice(&labels.special[..keep]);
        out.word_ids.extend_from_slice(&labels.word_ids[..keep]);
        out.surfaces.extend_from_slice(&labels.surfaces[..keep]);
        Ok(out)
    }

    /// The one-token encoding of the decoder start token.
    pub(crate) fn start_unit(&self, start: u32) -> Encoded {
        let empty = Encoded {
            tokens: Vec::new(),
            ids: Vec::new(),
            type_ids: Vec::new(),
            segments: Vec::new(),
            roles: Vec::new(),
            special: Vec::new(),
            word_ids: Vec::new(),
            surfaces: Vec::new(),
            truncated_from: None,
            bytes_cut: false,
        };
        self.target_side().continuation(&empty, &[start])
    }

    /// Tokenize `text` as the source, run the decoder over `input` (a target, teacher-forced, or
    /// a greedy generation), and capture encoder, decoder and cross-attention. Generated decoder
    /// units are marked [`Units::generated`]. `progress` is told how many tokens are generated
    /// after each.
    pub fn encode_seq2seq(
        &self,
        text: &str,
        input: DecoderInput<'_>,
        opts: &EncodeOptions,
        progress: &mut (dyn FnMut(usize) + Send),
    ) -> Result<Seq2SeqEncoding, Error> {
        self.seq2seq_net()?;
        if opts.layers.is_some() {
            return Err(Error::LayersOnSeq2Seq {
                family: self.family().to_string(),
            });
        }
        let longest = self.max_positions();
        let source = self.tokenizer.encode(text, None, longest, opts.truncate)?;
        let limit = tokenize::byte_limit(longest);
        let recorded = tokenize::cut_to_bytes(text, limit).to_string();
        let (decoder, labels, generation, target_truncated_from, target_cut) = match input {
            DecoderInput::Target(target) => {
                let labels = self.target_labels(target, opts.truncate)?;
                let decoder = self.decoder_input(&labels)?;
                let (from, cut) = (labels.truncated_from, labels.bytes_cut);
                (decoder, Some(labels.ids), None, from, cut)
            }
            DecoderInput::Generate(new) => {
                // The length first: it says how many tokens the decoder can take at all.
                self.check_generation_length(new)?;
                self.check_seq2seq_capture(
                    source.ids.len(),
                    new + 1,
                    opts.capture_query_key,
                    opts.max_memory,
                )?;
                let generation = self.generate_seq2seq(&source.ids, new, progress)?;
                let start = self.start_unit(generation.ids[0]);
                let decoder = self
                    .target_side()
                    .continuation(&start, generation.generated());
                (decoder, None, Some(generation), None, false)
            }
        };
        let out = self.forward_seq2seq(
            &source.ids,
            &decoder.ids,
            opts.capture_query_key,
            opts.max_memory,
        )?;
        let net = self.seq2seq_net()?;
        let info = |arch: &Architecture| ModelInfo {
            layers: arch.layers,
            heads: arch.heads,
            head_dim: arch.head_dim,
            hidden_size: arch.hidden_size,
            ..self.info.clone()
        };
        let units = |e: &Encoded| {
            Units::tokens(
                e.tokens.clone(),
                e.ids.clone(),
                e.type_ids.clone(),
                e.segments.clone(),
                e.roles.clone(),
                e.word_ids.clone(),
                e.surfaces.clone(),
            )
        };
        // What the decoder's rows read, for views to quote: the target, or the generation
        // decoded (as `generate` prints it).
        let target_text = match (input, &generation) {
            (DecoderInput::Target(target), _) => Some(target.to_string()),
            (_, Some(g)) => self.tokenizer.decode(g.generated()).ok(),
            _ => None,
        };
        let mut decoder_units = units(&decoder);
        if generation.is_some() {
            decoder_units.generated = (0..decoder.ids.len()).map(|i| i >= 1).collect();
        }
        let shape = |e: crate::attention::ShapeError| Error::from(crate::ForwardError::from(e));
        let encoder = Attention::new(
            info(net.encoder_architecture()),
            recorded.clone(),
            None,
            units(&source),
            out.encoder.weights,
        )
        .map(|a| a.with_positions(net.encoder_architecture().positions))
        .and_then(|a| a.with_kind(AttentionKind::Encoder))
        .and_then(|a| a.with_query_key(out.encoder.query_key))
        .map_err(shape)?;
        let decoder_attention = Attention::new(
            info(net.decoder_architecture()),
            recorded.clone(),
            None,
            decoder_units.clone(),
            out.decoder.weights,
        )
        .map(|a| a.with_positions(net.decoder_architecture().positions))
        .and_then(|a| a.with_kind(AttentionKind::Decoder))
        .map(|a| a.with_mask(crate::attention::MaskKind::Causal))
        .map(|a| a.with_target_text(target_text.clone()))
        .and_then(|a| a.with_query_key(out.decoder.query_key))
        .map_err(shape)?;
        let cross = Attention::cross(
            info(net.decoder_architecture()),
            recorded,
            None,
            decoder_units,
            units(&source),
            out.cross.weights,
        )
        // Cross-attention's scores are q·k alone: T5 adds no position bias to them.
        .map(|a| a.with_positions(PositionScheme::Absolute))
        .map(|a| a.with_target_text(target_text))
        .and_then(|a| a.with_query_key(out.cross.query_key))
        .map_err(shape)?;
        Ok(Seq2SeqEncoding {
            attentions: vec![encoder, decoder_attention, cross],
            encoder_hidden: out.encoder.hidden,
            decoder_hidden: out.decoder.hidden,
            labels,
            generation,
            truncated_from: source.truncated_from,
            target_truncated_from,
            bytes_cut: source.bytes_cut,
            target_bytes_cut: target_cut,
        })
    }
}
