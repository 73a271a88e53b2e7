//! Speech models (Whisper) behind [`Model`]: a window of log-mel spectrogram through the
//! encoder, and a decoder that reads Whisper's prompt (`<|startoftranscript|>`, the language,
//! the task, `<|notimestamps|>` unless timestamps are asked) and then either a transcript it
//! generates greedily under Whisper's rules ([`rules`]) or token ids given to it. One run
//! captures the three [`Attention`] values of the text encoder–decoders (encoder
//! self-attention over the audio frames, labelled by their time; decoder self-attention;
//! cross-attention, decoder tokens × frames), and the words' timings from the alignment heads
//! ([`timing`]).

pub mod ctranslate2;
pub mod long;
pub mod rules;
pub mod settings;
pub mod timing;

use crate::attention::{Attention, AttentionKind, ModelInfo, PositionScheme, Role, Units};
use crate::audio::{FeatureConfig, LogMel};
use crate::blocks::network::{Architecture, EncodedSource, Speech};
use crate::encdec::Seq2SeqEncoding;
use crate::error::{Error, InputError};
use crate::{EncodeOptions, Model};

pub use settings::SpeechSettings;
pub use timing::{WordTiming, FRAME_SECONDS};

/// What a speech model keeps beside its network: its decoding settings and its feature
/// extractor's.
#[derive(Clone, Debug, PartialEq)]
pub struct SpeechConfig {
    /// generation_config.json's decoding settings.
    pub settings: SpeechSettings,
    /// preprocessor_config.json's (transformers' defaults when the folder has none).
    pub features: FeatureConfig,
}

/// Whisper's task.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Task {
    /// Write what is said, in its language.
    #[default]
    Transcribe,
    /// Write it in English.
    Translate,
}

impl Task {
    /// Its name in `task_to_id` (`transcribe`, `translate`).
    pub fn as_str(self) -> &'static str {
        match self {
            Task::Transcribe => "transcribe",
            Task::Translate => "translate",
        }
    }
}

/// How to decode one window.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpeechOptions {
    /// The language (`en`, `<|en|>`, `english`); `None`: detected by the model (multilingual
    /// models), none for English-only models.
    pub language: Option<String>,
    /// Transcribe or translate.
    pub task: Task,
    /// Generate timestamp tokens (`<|0.00|>` …).
    pub timestamps: bool,
    /// The most tokens to generate after the prompt.
    pub max_new_tokens: usize,
}

/// The result of [`Model::encode_speech`].
#[derive(Clone, Debug)]
pub struct SpeechEncoding {
    /// The three attentions, the stacks' outputs and the generation, as for text
    /// encoder–decoders.
    pub seq2seq: Seq2SeqEncoding,
    /// The prompt: `<|startoftranscript|>`, language, task, `<|notimestamps|>`.
    pub prompt: Vec<u32>,
    /// The language token used (`<|en|>`), when the model has languages.
    pub language: Option<String>,
    /// Whether the language was detected rather than given.
    pub language_detected: bool,
    /// The transcript: the generated text tokens decoded.
    pub transcript: String,
    /// Each word's start and end.
    pub words: Vec<WordTiming>,
    /// The alignment heads the timings read, `(layer, head)`.
    pub alignment_heads: Vec<(usize, usize)>,
    /// Whether those are the model's own (`alignment_heads`) rather than openai-whisper's
    /// default (every head of the decoder's second half).
    pub alignment_heads_given: bool,
    /// Seconds of audio in the window (the frames the timings cover).
    pub audio_seconds: f64,
    /// Where the window starts in the recording, in seconds.
    pub start_seconds: f64,
}

/// The language token a window is decoded in.
#[derive(Clone, Copy, Debug)]
enum LanguageChoice {
    /// Given (or none: English-only models).
    Given(Option<u32>),
    /// To be found by the model.
    Detect,
}

/// The label of encoder frame `i`: its time (`0.00s`, `0.02s`, …) from `start` seconds.
pub fn frame_label(i: usize, start: f64) -> String {
    format!("{:.2}s", start + i as f64 * FRAME_SECONDS)
}

impl Model {
    /// The speech side, or an error saying this model reads text.
    fn speech_net(&self) -> Result<(&dyn Speech, &SpeechConfig), Error> {
        match (self.network.speech(), &self.speech) {
            (Some(net), Some(config)) => Ok((net, config)),
            _ => Err(InputError::AudioToText {
                model: self.info.name().to_string(),
                family: self.family(),
            }
            .into()),
        }
    }

    /// Whether this model reads audio (Whisper).
    pub fn is_speech(&self) -> bool {
        self.speech.is_some()
    }

    /// Its feature extractor's settings (speech models).
    pub fn feature_config(&self) -> Option<&FeatureConfig> {
        self.speech.as_ref().map(|s| &s.features)
    }

    /// Its decoding settings (speech models).
    pub fn speech_settings(&self) -> Option<&SpeechSettings> {
        self.speech.as_ref().map(|s| &s.settings)
    }

    /// Whisper's prompt for `options`: `<|startoftranscript|>`, then the language and task
    /// tokens (multilingual models), then `<|notimestamps|>` unless timestamps are asked, as
    /// transformers' `_retrieve_init_tokens` builds it. `language` is the language token's id
    /// where one is needed.
    fn speech_prompt(
        &self,
        config: &SpeechConfig,
        options: &SpeechOptions,
        language: Option<u32>,
    ) -> Result<Vec<u32>, Error> {
        let s = &config.settings;
        let start = self.decoder_start().unwrap_or_default();
        let mut prompt = vec![start];
        if let Some(id) = language {
            prompt.push(id);
        }
        if !s.tasks.is_empty() {
            let task = s
                .task(options.task.as_str())
                .ok_or_else(|| InputError::SpeechTask {
                    model: self.info.name().to_string(),
                    task: options.task.as_str(),
                })?;
            prompt.push(task);
        } else if options.task == Task::Translate {
            return Err(InputError::SpeechTask {
                model: self.info.name().to_string(),
                task: options.task.as_str(),
            }
            .into());
        }
        match (options.timestamps, s.no_timestamps) {
            (false, Some(id)) => prompt.push(id),
            (true, None) => {
                return Err(InputError::NoTimestampTokens {
                    model: self.info.name().to_string(),
                }
                .into())
            }
            _ => {}
        }
        Ok(prompt)
    }

    /// The language token asked for, or whether the model must find it (multilingual models
    /// with no language given); `Given(None)` for English-only models.
    fn speech_language(
        &self,
        config: &SpeechConfig,
        asked: Option<&str>,
    ) -> Result<LanguageChoice, Error> {
        let s = &config.settings;
        match asked {
            Some(code) if s.languages.is_empty() => Err(InputError::EnglishOnly {
                model: self.info.name().to_string(),
                language: code.to_string(),
            }
            .into()),
            Some(code) => s
                .language(code)
                .map(|id| LanguageChoice::Given(Some(id)))
                .ok_or_else(|| {
                    InputError::UnknownLanguage {
                        language: code.to_string(),
                        known: s.language_codes(),
                    }
                    .into()
                }),
            None if s.languages.is_empty() || !s.multilingual => Ok(LanguageChoice::Given(None)),
            None => Ok(LanguageChoice::Detect),
        }
    }

    /// The language token the model finds likeliest after `<|startoftranscript|>` for the
    /// window in `source` (transformers' `detect_language`).
    fn detect_language(
        &self,
        net: &dyn Speech,
        config: &SpeechConfig,
        source: &EncodedSource,
    ) -> Result<Option<u32>, Error> {
        let languages: Vec<u32> = config
            .settings
            .languages
            .iter()
            .map(|&(_, id)| id)
            .collect();
        let mut only_languages = |_: &[u32], logits: &mut [f32]| {
            for (i, x) in logits.iter_mut().enumerate() {
                if !languages.contains(&(i as u32)) {
                    *x = f32::NEG_INFINITY;
                }
            }
        };
        let start = self.decoder_start().unwrap_or_default();
        let g = net.greedy_encoded(
            source,
            &[start],
            1,
            &[],
            &mut only_languages,
            true,
            &mut |_| {},
        )?;
        Ok(g.generated().first().copied())
    }

    /// Run one window of log-mel spectrogram: the prompt Whisper's settings and `options` give,
    /// greedy decoding under Whisper's rules (`decoder` `None`), or the decoder ids given
    /// (teacher forcing: the prompt and what follows it); then one teacher-forced pass that
    /// captures encoder, decoder and cross-attention, and the words' timings from the
    /// alignment heads over the `audio_seconds` the window holds. `progress` is told how many
    /// tokens are generated after each.
    pub fn encode_speech(
        &self,
        window: &LogMel,
        audio_seconds: f64,
        decoder: Option<&[u32]>,
        options: &SpeechOptions,
        opts: &EncodeOptions,
        progress: &mut (dyn FnMut(usize) + Send),
    ) -> Result<SpeechEncoding, Error> {
        let (net, config) = self.speech_net()?;
        if opts.layers.is_some() {
            return Err(Error::LayersOnSeq2Seq {
                family: self.family().to_string(),
            });
        }
        if window.n_mels != net.mel_bins() || window.frames != net.window_frames() {
            return Err(InputError::SpeechWindow {
                model: self.info.name().to_string(),
                mel_bins: net.mel_bins(),
                frames: net.window_frames(),
                got_bins: window.n_mels,
                got_frames: window.frames,
            }
            .into());
        }
        let features = &window.data;
        let seq = self
            .network
            .seq2seq()
            .expect("a speech model is an encoder–decoder");
        let (enc_arch, dec_arch) = (seq.encoder_architecture(), seq.decoder_architecture());
        let source = enc_arch.max_positions;
        let eot = self
            .generation
            .eos_token_ids
            .first()
            .copied()
            .unwrap_or(dec_arch.vocab_size as u32);
        // The encoder runs once: the language, the transcript and the captured pass all read it.
        let (ids, generation, prompt, language, detected, encoded) = match decoder {
            Some(ids) => {
                self.check_speech_ids(ids, dec_arch)?;
                self.check_seq2seq_capture(
                    source,
                    ids.len(),
                    opts.capture_query_key,
                    opts.max_memory,
                )?;
                let prompt_len = ids.iter().position(|&id| id < eot).unwrap_or(ids.len());
                let encoded = net.encode_features(features, true, opts.capture_query_key)?;
                (
                    ids.to_vec(),
                    None,
                    ids[..prompt_len].to_vec(),
                    None,
                    false,
                    encoded,
                )
            }
            None => {
                let choice = self.speech_language(config, options.language.as_deref())?;
                // The prompt's length is known before the language is found: one token.
                let placeholder = match choice {
                    LanguageChoice::Given(id) => id,
                    LanguageChoice::Detect => Some(0),
                };
                let prompt_len = self.speech_prompt(config, options, placeholder)?.len();
                let longest = dec_arch.max_positions;
                if prompt_len + options.max_new_tokens > longest {
                    return Err(Error::PromptTooLong {
                        tokens: prompt_len,
                        new: options.max_new_tokens,
                        longest,
                    });
                }
                self.check_seq2seq_capture(
                    source,
                    prompt_len + options.max_new_tokens,
                    opts.capture_query_key,
                    opts.max_memory,
                )?;
                let encoded = net.encode_features(features, true, opts.capture_query_key)?;
                let (language, detected) = match choice {
                    LanguageChoice::Given(id) => (id, false),
                    LanguageChoice::Detect => (self.detect_language(net, config, &encoded)?, true),
                };
                let prompt = self.speech_prompt(config, options, language)?;
                let rules =
                    rules::Rules::new(&config.settings, prompt.len(), options.timestamps, eot);
                let masks_only = rules.masks_only();
                let mut rule = |ids: &[u32], logits: &mut [f32]| rules.apply(ids, logits);
                let g = net.greedy_encoded(
                    &encoded,
                    &prompt,
                    options.max_new_tokens,
                    &self.generation.eos_token_ids,
                    &mut rule,
                    masks_only,
                    progress,
                )?;
                (g.ids.clone(), Some(g), prompt, language, detected, encoded)
            }
        };
        let m = ids.len();
        self.check_seq2seq_capture(source, m, opts.capture_query_key, opts.max_memory)?;
        let pass = net.decode_encoded(&encoded, &ids, opts.capture_query_key)?;

        let text: Vec<u32> = ids[prompt.len().min(m)..]
            .iter()
            .copied()
            .filter(|&id| id < eot)
            .collect();
        let transcript = self.tokenizer.decode(&text)?.trim().to_string();
        let (alignment_heads, given) = match &config.settings.alignment_heads {
            Some(h) => (h.clone(), true),
            None => (
                timing::default_heads(dec_arch.layers, dec_arch.heads),
                false,
            ),
        };
        let frames = ((audio_seconds / FRAME_SECONDS).round() as usize).clamp(1, source);
        let words = self.word_timings(
            net,
            &encoded,
            (&ids, &pass.cross.weights),
            (&prompt, &text),
            (dec_arch.layers, dec_arch.heads, source),
            eot,
            &alignment_heads,
            frames,
        )?;

        let EncodedSource { encoder: kept, .. } = encoded;
        let info = |arch: &Architecture| ModelInfo {
            layers: arch.layers,
            heads: arch.heads,
            head_dim: arch.head_dim,
            hidden_size: arch.hidden_size,
            ..self.info.clone()
        };
        let start = window.start_seconds;
        let frame_units = Units::tokens(
            (0..source).map(|i| frame_label(i, start)).collect(),
            Vec::new(),
            vec![0; source],
            vec![0; source],
            vec![Role::Word; source],
            (0..source).map(Some).collect(),
            (0..source).map(|i| frame_label(i, start)).collect(),
        );
        let begin = self.start_unit(ids[0]);
        let decoded = self.target_side().continuation(&begin, &ids[1..]);
        let mut decoder_units = Units::tokens(
            decoded.tokens.clone(),
            decoded.ids.clone(),
            decoded.type_ids.clone(),
            decoded.segments.clone(),
            decoded.roles.clone(),
            decoded.word_ids.clone(),
            decoded.surfaces.clone(),
        );
        if let Some(g) = &generation {
            decoder_units.generated = (0..m).map(|i| i >= g.prompt_len).collect();
        }
        let recorded = format!("audio {:.2}–{:.2} s", start, start + audio_seconds);
        let shape = |e: crate::attention::ShapeError| Error::from(crate::ForwardError::from(e));
        let encoder = Attention::new(
            info(enc_arch),
            recorded.clone(),
            None,
            frame_units.clone(),
            kept.weights,
        )
        .map(|a| a.with_positions(PositionScheme::Absolute))
        .and_then(|a| a.with_kind(AttentionKind::Encoder))
        .and_then(|a| a.with_query_key(kept.query_key))
        .map_err(shape)?;
        let target_text = Some(transcript.clone());
        let decoder_attention = Attention::new(
            info(dec_arch),
            recorded.clone(),
            None,
            decoder_units.clone(),
            pass.decoder.weights,
        )
        .map(|a| a.with_positions(PositionScheme::Absolute))
        .and_then(|a| a.with_kind(AttentionKind::Decoder))
        .map(|a| a.with_mask(crate::attention::MaskKind::Causal))
        .map(|a| a.with_target_text(target_text.clone()))
        .and_then(|a| a.with_query_key(pass.decoder.query_key))
        .map_err(shape)?;
        let cross = Attention::cross(
            info(dec_arch),
            recorded,
            None,
            decoder_units,
            frame_units,
            pass.cross.weights,
        )
        .map(|a| a.with_positions(PositionScheme::Absolute))
        .map(|a| a.with_target_text(target_text))
        .and_then(|a| a.with_query_key(pass.cross.query_key))
        .map_err(shape)?;
        let language = language.and_then(|id| self.tokenizer.token(id));
        Ok(SpeechEncoding {
            seq2seq: Seq2SeqEncoding {
                attentions: vec![encoder, decoder_attention, cross],
                encoder_hidden: kept.hidden,
                decoder_hidden: pass.decoder.hidden,
                labels: None,
                generation,
                truncated_from: None,
                target_truncated_from: None,
                bytes_cut: false,
                target_bytes_cut: false,
            },
            prompt,
            language,
            language_detected: detected,
            transcript,
            words,
            alignment_heads,
            alignment_heads_given: given,
            audio_seconds,
            start_seconds: start,
        })
    }

    /// Decoder ids given to a speech model: some, within its positions and vocabulary.
    fn check_speech_ids(&self, ids: &[u32], arch: &Architecture) -> Result<(), Error> {
        if ids.is_empty() {
            return Err(InputError::NoSideTokens {
                which: "decoder input".to_string(),
            }
            .into());
        }
        if ids.len() > arch.max_positions {
            return Err(Error::SideTooLong {
                which: "decoder input".to_string(),
                tokens: ids.len(),
                max: arch.max_positions,
            });
        }
        if let Some(&id) = ids.iter().find(|&&id| id as usize >= arch.vocab_size) {
            return Err(InputError::SideIdOutsideVocabulary {
                which: "decoder input".to_string(),
                id,
                vocab: arch.vocab_size,
            }
            .into());
        }
        Ok(())
    }

    /// Word timings of `text` (token ids below `eot`) as openai-whisper aligns them: the
    /// cross-attention of a run over the sot tokens (`prompt` up to `<|notimestamps|>`),
    /// `<|notimestamps|>`, the text and `<|endoftext|>`, read through `heads` over the first
    /// `frames` frames. `ids` and `cross` are the run made already: used when they are that
    /// sequence, else the decoder runs once more over it. Empty without `<|notimestamps|>` in
    /// the vocabulary or without text.
    #[allow(clippy::too_many_arguments)]
    fn word_timings(
        &self,
        net: &dyn Speech,
        encoded: &EncodedSource,
        (ids, cross): (&[u32], &[f32]),
        (prompt, text): (&[u32], &[u32]),
        (layers, heads_per_layer, source): (usize, usize, usize),
        eot: u32,
        heads: &[(usize, usize)],
        frames: usize,
    ) -> Result<Vec<WordTiming>, Error> {
        let Some(no_ts) = self.speech_settings().and_then(|s| s.no_timestamps) else {
            return Ok(Vec::new());
        };
        if text.is_empty() {
            return Ok(Vec::new());
        }
        let sot: Vec<u32> = prompt.iter().copied().filter(|&id| id != no_ts).collect();
        // Within the decoder's positions: a text that fills them leaves its last tokens
        // untimed.
        let longest = self.seq2seq_decoder_positions().unwrap_or(0);
        let text = &text[..text.len().min(longest.saturating_sub(sot.len() + 2))];
        if text.is_empty() {
            return Ok(Vec::new());
        }
        let mut sequence = sot.clone();
        sequence.push(no_ts);
        sequence.extend_from_slice(text);
        sequence.push(eot);
        let rerun;
        let cross = if ids == sequence.as_slice() {
            cross
        } else {
            rerun = net.decode_encoded(encoded, &sequence, false)?.cross.weights;
            &rerun
        };
        let decode = |t: &[u32]| self.tokenizer.decode(t).unwrap_or_default();
        Ok(timing::find_alignment(
            &timing::AlignmentInput {
                cross,
                shape: [layers, heads_per_layer, sequence.len(), source],
                heads,
                sot_len: sot.len(),
                text,
                eot,
                frames,
            },
            &decode,
        ))
    }
}
