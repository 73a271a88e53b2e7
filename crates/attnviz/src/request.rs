//! One run of a model on one input, as every front end asks for it: the CLI, the Python package
//! and corpus mode build a [`RunRequest`] and get back a [`Run`] holding the captured
//! [`AttentionSet`]. What running a model on a text *means* is decided here, once:
//!
//! - an encoder–decoder (BART, T5, Marian) reads the text as its source; its decoder is
//!   teacher-forced with the [`RunRequest::target`], or generates [`RunRequest::generate`] tokens
//!   greedily (the checkpoint's default length when neither is given); the set holds the encoder,
//!   decoder and cross-attention;
//! - a decoder (GPT-2, Llama, …) generates after the text with [`RunRequest::generate`], wrapped
//!   in its chat template with [`RunRequest::chat`], or reads the text as given;
//! - an encoder reads the text, or a sentence pair with [`RunRequest::pair`];
//! - [`RunRequest::layers`] and [`RunRequest::max_memory`] bound what is captured.
//!
//! Generated tokens are flagged in the units' `generated` flags of the values that hold them.
//! Requests that don't fit the model are refused with a [`RequestError`] that names the request's
//! fields, never a front end's spelling of them: the CLI words them as flags, Python as keywords.
//! Generation reports its progress through [`Progress`] ([`Stage::Generate`], in tokens).

use crate::analysis::alti::alti;
use crate::analysis::attribution::{HeadAblation, HeadAttribution};
use crate::analysis::lens::LogitLens;
use crate::analysis::value_zeroing::ValueZeroing;
use crate::analysis::weighting::{norm_weights, NormWeights};
use crate::attention::{Attention, AttentionSet, ShapeError, ShapeProblem};
use crate::cancel::Cancel;
use crate::model::encdec::DecoderInput;
use crate::model::rerun::RerunLimit;
use crate::model::{
    Capture, CaptureTooBig, EncodeOptions, Encoding, GenerateOptions, Generation, HeadOutputs,
    InputError, LayerSink, Mask, Model, MultimodalUnsupported, VisionUnsupported,
};
use crate::pixels::ImageSource;
use crate::progress::{Progress, Stage};
use crate::report::Measured;
use crate::tokenize::Encoded;

/// What to run through a model, front-end neutral. [`RunRequest::new`] gives a plain run of
/// `text`; set the other fields as asked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunRequest {
    /// The text: an encoder's sentence, a decoder's prompt, an encoder–decoder's source.
    pub text: String,
    /// Sentence B of a pair (encoders only).
    pub pair: Option<String>,
    /// The output an encoder–decoder's decoder is teacher-forced with (it takes precedence
    /// over `generate`).
    pub target: Option<String>,
    /// Generate up to this many new tokens greedily (decoders and encoder–decoders); `None`:
    /// none for a decoder, the checkpoint's default length for an encoder–decoder without a
    /// target.
    pub generate: Option<usize>,
    /// Wrap the text in the checkpoint's chat template, as one user message with the
    /// assistant's turn opened (decoders).
    pub chat: bool,
    /// Capture only these layers (ascending, numbered from 0); `None`: every layer.
    pub layers: Option<Vec<usize>>,
    /// The most bytes the captured attention may take; `None`: the model's default budget.
    pub max_memory: Option<u64>,
    /// Cut input longer than the model takes instead of refusing it.
    pub truncate: bool,
    /// Keep each head's query and key vectors (the neuron view).
    pub query_key: bool,
    /// Weigh the attention by what it moves: value-weighted and norm-aware attention
    /// ([`Run::value_weighted`]; self-attention of encoders and decoders).
    pub value_weighted: bool,
    /// ALTI, each input token's share in each output token through the whole network
    /// (Ferrando et al. 2022; [`Measured::alti`]): self-attention of encoders and decoders, every
    /// layer captured. Off by default: it costs several forward passes.
    pub alti: bool,
    /// Value zeroing, how far each token's output moves when a context token's value vector
    /// is zeroed, per layer and rolled out (Mohebbi et al. 2023; [`Measured::value_zeroing`]):
    /// self-attention of encoders and decoders, every layer. Off by default: it costs about
    /// as many forward passes as there are tokens.
    pub value_zeroing: bool,
    /// The pictures: one for a vision model (ViT, DeiT, …), which then reads no `text`; one or
    /// more for a vision-language model (LLaVA), which reads them with `text` (its prompt). Each
    /// a file, or a file's bytes in memory (a server's upload, decoded without touching the
    /// file system), named in the views by the file's or the bytes' name. Empty: a text run.
    pub images: Vec<ImageSource>,
    /// For a vision-language model: its vision tower's own self-attention over the (one)
    /// picture, labelled by patch as a vision model's, instead of the language model's; the
    /// text is not read.
    pub tower: bool,
    /// For a vision-language model: Gemma 3's pan-and-scan, each long picture given whole and
    /// then as its crops ([`EncodeOptions::pan_and_scan`]).
    pub pan_and_scan: bool,
    /// A GGUF text model's projector file (llama.cpp's `mmproj-*.gguf`: its vision tower and
    /// projector), which the model is loaded with ([`Model::load_with_projector`]); `None`: the
    /// model alone, or the projector its store keeps beside it.
    pub mmproj: Option<std::path::PathBuf>,
    /// The logit lens with this many tokens per cell ([`Measured::lens`]; decoders, and encoders
    /// with a masked-LM head).
    pub lens: Option<usize>,
    /// Per-head direct logit attribution at the last position ([`Measured::head_attribution`];
    /// decoders with a language-model head).
    pub attribution: bool,
    /// Head ablation at the last position, each head in turn ([`Measured::head_ablation`]).
    pub ablate: Option<AblationMode>,
    /// The token (as text: one token of the vocabulary) whose logit the attribution takes
    /// apart and whose log-probability the ablation follows; `None`: the model's own
    /// prediction of the next token.
    pub target_token: Option<String>,
    /// A token whose logit the attribution subtracts from the target's (a logit difference).
    pub contrast: Option<String>,
    /// How long the re-runs of value zeroing and of head ablation may each take, estimated
    /// before they start ([`crate::model::rerun`]); `None`: the default limit.
    pub analysis_time: Option<std::time::Duration>,
    /// A recording (WAV, FLAC, MP3, OGG) for a speech model (Whisper), which then reads no
    /// `text`: its first window is transcribed (or its decoder reads `generate` tokens).
    pub audio: Option<AudioSource>,
    /// A speech model's language (`en`, `english`); `None`: detected (multilingual models).
    pub language: Option<String>,
    /// A speech model's task: translate into English rather than transcribe.
    pub translate: bool,
    /// A speech model writes timestamp tokens.
    pub timestamps: bool,
    /// Summarise each captured layer while it is computed instead of keeping it
    /// ([`crate::attention::summary`]): per head, each query's top keys, sink mass and entropy,
    /// the distance profile, a pooled map, and the full rows of the queries named. For long
    /// inputs (encoders and decoders reading a text), whose full capture would not fit: the
    /// run's attention then holds no layer, and [`Measured::summary`] the summaries.
    pub summary: Option<crate::attention::summary::SummarySpec>,
    /// Which window of a recording longer than one window the attention is captured from
    /// (from 0; `None`: the first). The transcript and the word timings cover every window.
    pub window: Option<usize>,
}

/// A speech model's recording: a file, or a file's bytes held in memory (an upload), decoded
/// alike under the same limits ([`crate::model::audio::AudioLimits`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AudioSource {
    /// A recording file.
    File(std::path::PathBuf),
    /// A recording file's bytes.
    Bytes {
        /// What names the recording in messages and views (`upload.wav`); its extension is a
        /// hint to the format.
        name: String,
        /// The file's bytes.
        bytes: std::sync::Arc<[u8]>,
    },
}

impl AudioSource {
    /// The recording's name in the views: a file's name (without its folder), or the bytes'.
    pub fn name(&self) -> String {
        match self {
            AudioSource::File(path) => path.file_name().map_or_else(
                || path.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            ),
            AudioSource::Bytes { name, .. } => name.clone(),
        }
    }

    /// The recording decoded (mono, its own rate) within `limits`.
    fn load(
        &self,
        limits: &crate::model::audio::AudioLimits,
    ) -> Result<crate::model::audio::Audio, crate::model::audio::AudioError> {
        match self {
            AudioSource::File(path) => crate::model::audio::load(path, limits),
            AudioSource::Bytes { name, bytes } => {
                crate::model::audio::load_bytes(bytes.to_vec(), std::path::Path::new(name), limits)
            }
        }
    }
}

/// A request's target (`None`: the model's prediction) and contrast token ids.
type HeadTokens = (Option<u32>, Option<u32>);

/// How head ablation removes a head.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AblationMode {
    /// The head's output set to 0 (Michel et al. 2019).
    #[default]
    Zero,
    /// The head's output set to its mean over the input's positions (Wang et al. 2022).
    Mean,
}

/// Which of a request's tokens is meant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenRole {
    /// [`RunRequest::target_token`].
    Target,
    /// [`RunRequest::contrast`].
    Contrast,
}

/// What a request asks that the model cannot do. Each names the fields involved; the front end
/// words them (`--target` on the command line, `target=` in Python).
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// Loading or running the model (its own messages).
    #[error(transparent)]
    Model(#[from] crate::model::Error),
    /// The tower asked for without exactly one picture.
    #[error("the vision tower's attention is over one picture; {given} were given")]
    TowerPictures {
        /// The pictures given.
        given: usize,
    },
    /// The tower asked for with what only the language model gives (generation, chat, head
    /// attribution or ablation).
    #[error(
        "the vision tower reads the picture alone: generation, chat and head attribution or \
         ablation are the language model's"
    )]
    TowerReadsThePicture,
    /// A target for a model that is no encoder–decoder.
    #[error(
        "a target is for encoder–decoder models (BART, T5, Marian); {model} is a {family} model"
    )]
    TargetNeedsEncoderDecoder {
        /// The model's name.
        model: String,
        /// Its family.
        family: &'static str,
        /// Whether it is a decoder (which can generate instead).
        decoder: bool,
    },
    /// Chat for an encoder–decoder, which has no chat template.
    #[error("{model} is an encoder–decoder model ({family}), with no chat template")]
    ChatForEncoderDecoder {
        /// The model's name.
        model: String,
        /// Its family.
        family: &'static str,
    },
    /// A pair for an encoder–decoder, which reads one source text.
    #[error("{model} is an encoder–decoder model ({family}), which reads one source text")]
    PairForEncoderDecoder {
        /// The model's name.
        model: String,
        /// Its family.
        family: &'static str,
    },
    /// A pair for a decoder, which reads one text.
    #[error("{model} is a decoder ({family}), which reads one text: sentence pairs are for encoders such as BERT")]
    PairForDecoder {
        /// The model's name.
        model: String,
        /// Its family.
        family: &'static str,
    },
    /// A pair together with generation or chat.
    #[error("generation reads one text: a pair cannot be generated from")]
    PairWithGeneration,
    /// An empty (or whitespace-only) target.
    #[error("the target is empty; give the output to teacher-force")]
    EmptyTarget,
    /// Zero new tokens asked for.
    #[error("generating 0 tokens generates nothing")]
    GenerateNothing,
    /// Layers picked for an encoder–decoder, which captures all of them.
    #[error("picking layers is not supported for encoder–decoder models ({family}): every layer of the encoder and the decoder is captured")]
    LayersForEncoderDecoder {
        /// Its family.
        family: &'static str,
    },
    /// A layer to capture that the model does not have.
    #[error("layer {layer} does not exist: the model has {layers} layers, numbered from 0")]
    LayerOutOfRange {
        /// The layer asked for.
        layer: usize,
        /// How many the model has.
        layers: usize,
    },
    /// A streamed capture asked of an encoder–decoder, whose three attentions are captured
    /// together (run it whole, then write its layers).
    #[error("an encoder–decoder model ({family}) captures its three attentions together; they cannot be streamed layer by layer")]
    StreamForEncoderDecoder {
        /// Its family.
        family: &'static str,
    },
    /// Value-weighted attention for an encoder–decoder, which does not keep its value terms yet.
    #[error("value-weighted and norm-aware attention are not available for encoder–decoder models ({family}) yet; they are for encoders and decoders")]
    ValueWeightedForEncoderDecoder {
        /// Its family.
        family: &'static str,
    },
    /// A target or contrast token that is not one token of the model's vocabulary.
    #[error(
        "{token:?} is not one token of {model}'s vocabulary: {}",
        describe_pieces(pieces)
    )]
    NotOneToken {
        /// Which token of the request.
        role: TokenRole,
        /// As given.
        token: String,
        /// The model's name.
        model: String,
        /// The pieces the tokenizer splits it into, decoded (empty: none, or only the unknown
        /// token).
        pieces: Vec<String>,
    },
    /// Head attribution or ablation asked of a model that has no language-model head to read
    /// them through (encoders, encoder–decoders, vision models, bare decoders).
    #[error("per-head attribution and ablation are for decoders with a language-model head (GPT-2, Llama, Qwen, Gemma, Phi-3); {model} is a {family} model{}", if *bare { " without a head in its checkpoint" } else { "" })]
    HeadsNeedDecoder {
        /// The model's name.
        model: String,
        /// Its family.
        family: &'static str,
        /// Whether it is a decoder whose checkpoint lacks the head.
        bare: bool,
    },
    /// More tokens per logit-lens cell than the lens keeps ([`crate::analysis::lens::MAX_TOP`]).
    #[error("the logit lens keeps at most {max} tokens per cell; {asked} were asked for")]
    LensTopTooLarge {
        /// Tokens per cell asked for.
        asked: usize,
        /// The most it keeps.
        max: usize,
    },
    /// More than one picture for a vision model, which reads one.
    #[error("{model} is a vision model ({family}); it reads one picture, not {given}")]
    SeveralPictures {
        /// The model's name.
        model: String,
        /// Its family.
        family: &'static str,
        /// How many pictures were given.
        given: usize,
    },
    /// Text given with a recording to a speech model, which reads the recording alone.
    #[error("{model} reads the recording alone; it takes no text with it")]
    TextWithAudio {
        /// The model's name.
        model: String,
    },
    /// A summarised run asked for with what needs the attention in full, or of a model whose
    /// run is not one text through one stack.
    #[error("a summarised run keeps no attention matrix, only its summaries; {0}")]
    Summarised(SummaryConflict),
    /// A speech setting (language, task, timestamps) without a recording.
    #[error("the language, the task, timestamps and the window are settings of a recording's transcription; give a recording to a speech model")]
    SpeechSettingsWithoutAudio,
    /// A window of the recording asked for that it does not have.
    #[error("the recording was read in {windows} window{} of up to {seconds:.0} s, numbered from 0; window {asked} is not one of them", if *windows == 1 { "" } else { "s" })]
    NoSuchWindow {
        /// The window asked for.
        asked: usize,
        /// The windows read.
        windows: usize,
        /// The most seconds a window holds.
        seconds: f64,
    },
    /// The three attentions of an encoder–decoder run don't fit together (a bug).
    #[error("{0}")]
    Shape(#[from] ShapeError),
}

/// What a summarised run cannot be combined with ([`RequestError::Summarised`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SummaryConflict {
    /// Pictures, a recording or an encoder–decoder: runs of several attentions.
    #[error("it is for encoders and decoders reading a text, not {0}")]
    Kind(&'static str),
    /// Generation or a chat template.
    #[error("generation is not summarised yet: give the whole text to read")]
    Generation,
    /// An analysis that reads the full matrices or the value vectors.
    #[error("{0} needs the full attention")]
    Analysis(&'static str),
    /// The query and key vectors.
    #[error("the query and key vectors are not kept")]
    QueryKey,
    /// No key to keep per query.
    #[error("keep at least one key per query")]
    NoKeys,
}

/// What a run captured, with what a front end tells its user about it.
#[derive(Clone, Debug)]
pub struct Run {
    /// Every attention of the run: one value, or an encoder–decoder's three. Token level,
    /// labelled for people by the rules of the tokenizers that made them (`Ġ`, `▁`, bytes).
    pub set: AttentionSet,
    /// The last hidden state `[n, hidden]` of the primary value's queries (the decoder's for an
    /// encoder–decoder).
    pub hidden: Vec<f32>,
    /// Token count of the input (an encoder–decoder's source) when it was truncated.
    pub truncated_from: Option<usize>,
    /// Whether the input was first cut to the model's byte limit.
    pub bytes_cut: bool,
    /// What was generated: the prompt's (or the decoder start token's) ids, then the new ones.
    pub generation: Option<Generation>,
    /// The generated tokens, decoded.
    pub generated_text: Option<String>,
    /// The length an encoder–decoder generated to by default (neither target nor generate
    /// given); front ends say so.
    pub default_generation: Option<usize>,
    /// The target's label count when it was truncated (encoder–decoders).
    pub target_truncated_from: Option<usize>,
    /// Whether the target was first cut to the decoder's byte limit.
    pub target_bytes_cut: bool,
    /// How many target labels the decoder read (teacher forcing).
    pub target_kept: usize,
    /// Value-weighted and norm-aware attention of the primary value, when
    /// [`RunRequest::value_weighted`] asked for them.
    pub value_weighted: Option<NormWeights>,
    /// What the run measured beyond the attention, as [`RunRequest`] asked: ALTI, value
    /// zeroing, the logit lens, head attribution and ablation (of the primary value's tokens).
    /// The induction probe is the model's, not the run's ([`induction_probe`]): a front end
    /// that shows it sets [`Measured::induction`].
    pub measured: Measured,
}

/// How [`RequestError::NotOneToken`] lists the pieces.
pub fn describe_pieces(pieces: &[String]) -> String {
    match pieces.len() {
        0 => "the tokenizer does not know it".to_string(),
        n => format!(
            "it is {n} tokens ({})",
            pieces
                .iter()
                .map(|p| format!("{p:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

impl RunRequest {
    /// A plain run of `text`: no pair, no target, no generation, every layer, default budget.
    pub fn new(text: impl Into<String>) -> RunRequest {
        RunRequest {
            text: text.into(),
            ..RunRequest::default()
        }
    }

    /// Whether the request generates tokens after a decoder's prompt (`generate` or `chat`).
    pub fn generates(&self) -> bool {
        self.generate.is_some() || self.chat
    }

    fn encode_options(&self) -> EncodeOptions {
        EncodeOptions {
            truncate: self.truncate,
            capture_query_key: self.query_key,
            capture_values: self.value_weighted,
            alti: self.alti,
            layers: self.layers.clone(),
            max_memory: self.max_memory,
            // Attribution reads the main pass's head outputs at the last position.
            head_outputs: self.attribution,
            // The views draw the language model's attention; a picture's own tower is a run of
            // its own (`encode_tower`).
            towers: false,
            pan_and_scan: self.pan_and_scan,
            summary: self.summary.clone(),
        }
    }

    /// Check the request against `model` without running anything: the combinations of fields
    /// that the model's kind rules out.
    pub fn check(&self, model: &Model) -> Result<(), RequestError> {
        let name = || model.info().name().to_string();
        let family = model.family();
        if self.generate == Some(0) {
            return Err(RequestError::GenerateNothing);
        }
        let max = crate::analysis::lens::MAX_TOP;
        if let Some(asked) = self.lens.filter(|&k| k > max) {
            return Err(RequestError::LensTopTooLarge { asked, max });
        }
        if model.is_seq2seq() {
            if self.chat {
                return Err(RequestError::ChatForEncoderDecoder {
                    model: name(),
                    family,
                });
            }
            if self.pair.is_some() {
                return Err(RequestError::PairForEncoderDecoder {
                    model: name(),
                    family,
                });
            }
            if self.target.as_deref().is_some_and(|t| t.trim().is_empty()) {
                return Err(RequestError::EmptyTarget);
            }
            if self.layers.is_some() {
                return Err(RequestError::LayersForEncoderDecoder { family });
            }
            if self.value_weighted {
                return Err(RequestError::ValueWeightedForEncoderDecoder { family });
            }
            if self.alti {
                return Err(input(InputError::AltiOnEncoderDecoder { family }));
            }
            if self.value_zeroing {
                return Err(input(InputError::ZeroingOnEncoderDecoder { family }));
            }
            return Ok(());
        }
        let layers = model.info().layers;
        if self.alti && self.layers.is_some() {
            return Err(input(InputError::AltiNeedsEveryLayer));
        }
        if self.value_zeroing && self.layers.is_some() {
            return Err(input(InputError::ZeroingNeedsEveryLayer));
        }
        // A hybrid model (Qwen3-Next) numbers its attention layers as the model does; the
        // model checks them.
        let hybrid = model.captured_layer_numbers().is_some();
        if let Some(&layer) = self
            .layers
            .iter()
            .flatten()
            .find(|&&l| l >= layers && !hybrid)
        {
            return Err(RequestError::LayerOutOfRange { layer, layers });
        }
        let decoder = model.architecture().mask == Mask::Causal;
        if self.target.is_some() {
            return Err(RequestError::TargetNeedsEncoderDecoder {
                model: name(),
                family,
                decoder,
            });
        }
        if self.pair.is_some() {
            if self.generates() {
                return Err(RequestError::PairWithGeneration);
            }
            if decoder {
                return Err(RequestError::PairForDecoder {
                    model: name(),
                    family,
                });
            }
        }
        Ok(())
    }

    /// Run the request through `model`; generation reports to `progress`.
    pub fn run(&self, model: &Model, progress: &dyn Progress) -> Result<Run, RequestError> {
        self.run_with(model, progress, None, &Cancel::new())
    }

    /// [`RunRequest::run`] that stops with [`crate::model::Error::Cancelled`] once `cancel` is
    /// set (a server whose request timed out): a picture's decoding between rows and scans, a
    /// vision model between layers.
    pub fn run_until(
        &self,
        model: &Model,
        progress: &dyn Progress,
        cancel: &Cancel,
    ) -> Result<Run, RequestError> {
        self.run_with(model, progress, None, cancel)
    }

    /// Run the request through `model`, handing each captured layer to `sink` as soon as the
    /// forward pass computed it, so the capture never has to fit in memory (`max_memory`
    /// bounds one layer's buffer). The run's set then holds the units, masks and settings and
    /// no layer of its own (`model.layers` is 0), and no query/key vectors. Encoders and
    /// decoders (generation included: the final pass over prompt and generated tokens is
    /// streamed); an encoder–decoder is refused ([`RequestError::StreamForEncoderDecoder`]).
    pub fn run_into(
        &self,
        model: &Model,
        progress: &dyn Progress,
        sink: &mut dyn LayerSink,
    ) -> Result<Run, RequestError> {
        self.run_with(model, progress, Some(sink), &Cancel::new())
    }

    fn run_with(
        &self,
        model: &Model,
        progress: &dyn Progress,
        sink: Option<&mut dyn LayerSink>,
        cancel: &Cancel,
    ) -> Result<Run, RequestError> {
        crate::threads::on_pool(|| self.run_in_pool(model, progress, sink, cancel))
    }

    fn run_in_pool(
        &self,
        model: &Model,
        progress: &dyn Progress,
        sink: Option<&mut dyn LayerSink>,
        cancel: &Cancel,
    ) -> Result<Run, RequestError> {
        if let Some(audio) = &self.audio {
            if sink.is_some() {
                return Err(RequestError::StreamForEncoderDecoder {
                    family: model.family(),
                });
            }
            return self.run_speech(model, audio, progress);
        }
        if model.is_speech() {
            return Err(input(InputError::NeedsAudio {
                family: model.family(),
            }));
        }
        if self.language.is_some() || self.translate || self.timestamps || self.window.is_some() {
            return Err(RequestError::SpeechSettingsWithoutAudio);
        }
        if self.summary.is_some() {
            self.check_summary(model, sink.is_some())?;
        }
        if self.tower {
            return self.run_tower(model, sink.is_some(), cancel);
        }
        if !self.images.is_empty() {
            if model.is_multimodal() {
                return self.run_multimodal(model, &self.images, progress, sink.is_some(), cancel);
            }
            if model.is_vision() && self.images.len() > 1 {
                return Err(RequestError::SeveralPictures {
                    model: model.info().name().to_string(),
                    family: model.family(),
                    given: self.images.len(),
                });
            }
            if model.is_vision() && !self.text.is_empty() {
                return Err(input(InputError::TextWithPicture {
                    model: model.info().name().to_string(),
                    family: model.family(),
                }));
            }
        }
        let heads = self.head_tokens(model)?;
        if let Some(picture) = self.images.first() {
            if sink.is_some() {
                return Err(input(VisionUnsupported::Streamed.into()));
            }
            if self.value_weighted {
                return Err(input(VisionUnsupported::ValueWeighted.into()));
            }
            if self.alti {
                return Err(input(VisionUnsupported::Alti.into()));
            }
            if self.value_zeroing {
                return Err(input(VisionUnsupported::ValueZeroing.into()));
            }
            if self.lens.is_some() {
                return Err(input(VisionUnsupported::Lens.into()));
            }
            let encoding =
                model.encode_image_until(picture.clone(), &self.encode_options(), cancel)?;
            return single_run(model, encoding, self);
        }
        if model.is_vision() {
            return Err(input(InputError::TextToVision {
                model: model.info().name().to_string(),
                family: model.family(),
            }));
        }
        self.check(model)?;
        if self.alti && sink.is_some() {
            return Err(input(InputError::StreamedAlti));
        }
        if model.is_seq2seq() {
            if sink.is_some() {
                return Err(RequestError::StreamForEncoderDecoder {
                    family: model.family(),
                });
            }
            if self.lens.is_some() {
                return Err(input(InputError::LensOnEncoderDecoder {
                    family: model.family(),
                }));
            }
            return self.run_seq2seq(model, progress);
        }
        if self.lens.is_some() && !model.has_unembedding() {
            // Refused before the run, with the model's own words.
            model.logit_lens(&[], &[], 1)?;
        }
        let opts = self.encode_options();
        let mut encoding = if self.generates() {
            let generate = GenerateOptions {
                max_new_tokens: self.generate.unwrap_or(0),
                chat: self.chat,
            };
            let total = generate.max_new_tokens;
            let mut report = Generating::new(progress, total);
            let encoding = model.encode_generated_into(
                &self.text,
                &opts,
                generate,
                &mut |d| report.done(d),
                sink,
            );
            report.finish();
            encoding?
        } else {
            model.encode_into(&self.text, self.pair.as_deref(), &opts, sink)?
        };
        let head_outputs = encoding.head_outputs.take();
        let summary = encoding.summary.take();
        let mut run = single_run(model, encoding, self)?;
        run.measured.summary = summary;
        if self.value_zeroing {
            run.measured.value_zeroing =
                Some(zeroing_of(model, &run, self.rerun_limit(), progress)?);
        }
        if let Some(k) = self.lens {
            run.measured.lens = Some(lens_of(model, &run, k, self.max_memory)?);
        }
        if let Some((target, contrast)) = heads {
            let outputs = head_outputs.as_ref();
            self.heads_of(model, &mut run, outputs, (target, contrast), progress)?;
        }
        Ok(run)
    }

    /// Refuse a summarised run that is not one text through an encoder or a decoder, or that
    /// asks for what needs the full attention.
    fn check_summary(&self, model: &Model, streamed: bool) -> Result<(), RequestError> {
        use SummaryConflict as C;
        let conflict = if self.tower || !self.images.is_empty() || model.is_vision() {
            Some(C::Kind("pictures"))
        } else if model.is_seq2seq() {
            Some(C::Kind("an encoder–decoder"))
        } else if self.generates() {
            Some(C::Generation)
        } else if self.value_weighted {
            Some(C::Analysis("value-weighted attention"))
        } else if self.alti {
            Some(C::Analysis("ALTI"))
        } else if self.value_zeroing {
            Some(C::Analysis("value zeroing"))
        } else if self.lens.is_some() {
            Some(C::Analysis("the logit lens"))
        } else if self.wants_heads() {
            Some(C::Analysis("head attribution or ablation"))
        } else if streamed {
            Some(C::Analysis("saving the capture"))
        } else if self.query_key {
            Some(C::QueryKey)
        } else if self.summary.as_ref().is_some_and(|s| s.top_k == 0) {
            Some(C::NoKeys)
        } else {
            None
        };
        conflict.map_or(Ok(()), |c| Err(RequestError::Summarised(c)))
    }

    /// Run a vision-language model's vision tower alone over its one picture: the tower's
    /// self-attention, as a vision model's run.
    fn run_tower(
        &self,
        model: &Model,
        streamed: bool,
        cancel: &Cancel,
    ) -> Result<Run, RequestError> {
        let [picture] = self.images.as_slice() else {
            return Err(RequestError::TowerPictures {
                given: self.images.len(),
            });
        };
        if streamed {
            return Err(input(MultimodalUnsupported::Streamed.into()));
        }
        if self.value_weighted {
            return Err(input(VisionUnsupported::ValueWeighted.into()));
        }
        if self.alti {
            return Err(input(VisionUnsupported::Alti.into()));
        }
        if self.value_zeroing {
            return Err(input(VisionUnsupported::ValueZeroing.into()));
        }
        if self.lens.is_some() {
            return Err(input(VisionUnsupported::Lens.into()));
        }
        if self.wants_heads() || self.generate.is_some() || self.chat {
            return Err(RequestError::TowerReadsThePicture);
        }
        let encoding = model.encode_tower(picture, &self.encode_options(), cancel)?;
        single_run(model, encoding, self)
    }

    /// Run a vision-language model over the prompt and its pictures (generating first when
    /// asked), refusing the analyses it cannot give yet.
    fn run_multimodal(
        &self,
        model: &Model,
        pictures: &[ImageSource],
        progress: &dyn Progress,
        streamed: bool,
        cancel: &Cancel,
    ) -> Result<Run, RequestError> {
        let refuse = |what: MultimodalUnsupported| Err(input(what.into()));
        if streamed {
            return refuse(MultimodalUnsupported::Streamed);
        }
        if self.value_weighted {
            return refuse(MultimodalUnsupported::ValueWeighted);
        }
        if self.alti {
            return refuse(MultimodalUnsupported::Alti);
        }
        if self.value_zeroing {
            return refuse(MultimodalUnsupported::ValueZeroing);
        }
        if self.lens.is_some() {
            return refuse(MultimodalUnsupported::Lens);
        }
        if self.wants_heads() {
            return refuse(MultimodalUnsupported::Heads);
        }
        self.check(model)?;
        let generate = GenerateOptions {
            max_new_tokens: self.generate.unwrap_or(0),
            chat: self.chat,
        };
        let mut report = Generating::new(progress, generate.max_new_tokens);
        let run = model.encode_with_images(
            &self.text,
            pictures,
            &self.encode_options(),
            Some(generate),
            &mut |d| report.done(d),
            cancel,
        );
        report.finish();
        single_run(model, run?.encoding, self)
    }

    /// The time limit of the analyses that re-run the model.
    fn rerun_limit(&self) -> RerunLimit {
        RerunLimit {
            given: self.analysis_time,
        }
    }

    /// Whether the request asks for per-head attribution or ablation.
    pub fn wants_heads(&self) -> bool {
        self.attribution || self.ablate.is_some()
    }

    /// Refuse head attribution and ablation for a model without the pass they need, and
    /// resolve the target and contrast tokens to ids, before anything runs: `None` when
    /// neither is asked for, else the target (`None`: the model's prediction) and contrast.
    fn head_tokens(&self, model: &Model) -> Result<Option<HeadTokens>, RequestError> {
        if !self.wants_heads() {
            return Ok(None);
        }
        if model.is_seq2seq() || model.is_vision() || !model.has_head_interventions() {
            return Err(RequestError::HeadsNeedDecoder {
                model: model.info().name().to_string(),
                family: model.family(),
                bare: model.architecture().mask == Mask::Causal && !model.is_seq2seq(),
            });
        }
        let resolve = |role, token: &Option<String>| match token {
            Some(t) => one_token(model, role, t).map(Some),
            None => Ok(None),
        };
        Ok(Some((
            resolve(TokenRole::Target, &self.target_token)?,
            resolve(TokenRole::Contrast, &self.contrast)?,
        )))
    }

    /// Fill `run`'s attribution and ablation at its last position; the attribution from
    /// `outputs`, the head outputs the run's forward pass kept there, when it kept them.
    fn heads_of(
        &self,
        model: &Model,
        run: &mut Run,
        outputs: Option<&HeadOutputs>,
        (target, contrast): HeadTokens,
        progress: &dyn Progress,
    ) -> Result<(), RequestError> {
        let units = run.set.primary().queries();
        let ids = &units.ids;
        let Some(at) = ids.len().checked_sub(1) else {
            return Ok(());
        };
        let label = units.named(false)[at].clone();
        let tokenizer = model.tokenizer();
        let decode = |id: u32| tokenizer.decode(&[id]).unwrap_or_default();
        let mut target = target;
        if self.attribution {
            // From the run's own pass (the model's prediction too), without one of its own.
            let forward = match outputs {
                Some(outputs) => model.head_attribution_from(outputs, target, contrast)?,
                None => model.head_attribution_of(ids, target, contrast)?,
            };
            target = Some(forward.target);
            run.measured.head_attribution =
                Some(HeadAttribution::new(&forward, at, label.clone(), decode));
        }
        let target = match target {
            Some(t) => t,
            None => model.predicted_next(ids)?,
        };
        if let Some(mode) = self.ablate {
            let mean = mode == AblationMode::Mean;
            let forward =
                model.head_ablation_within(ids, target, mean, self.rerun_limit(), progress)?;
            run.measured.head_ablation = Some(HeadAblation::new(&forward, at, label, decode));
        }
        Ok(())
    }

    /// Run the request's text already tokenized by [`Model::tokenizer`] (with its pair, for an
    /// encoder: corpus mode tokenizes each line once to check it). Neither generation nor
    /// layers: every layer of the text as given (an encoder–decoder's encoder).
    pub fn run_encoded(&self, model: &Model, encoded: Encoded) -> Result<Run, RequestError> {
        self.check(model)?;
        let encoding =
            model.encode_tokens(&self.text, self.pair.as_deref(), encoded, self.query_key)?;
        let mut run = single_run(model, encoding, self)?;
        if self.value_zeroing {
            let silent = &crate::progress::Silent;
            run.measured.value_zeroing = Some(zeroing_of(model, &run, self.rerun_limit(), silent)?);
        }
        Ok(run)
    }

    /// A speech model's run on the recording `source`: decoded, resampled, read in
    /// consecutive windows ([`crate::model::speech::long`]), each window's log-mel spectrogram
    /// through the encoder and its transcript generated (up to `generate` tokens, else the
    /// decoder's positions less the prompt) under Whisper's rules; the three attentions of
    /// window `window` (the first by default), the recording's transcript and every word's
    /// timing.
    fn run_speech(
        &self,
        model: &Model,
        source: &AudioSource,
        progress: &dyn Progress,
    ) -> Result<Run, RequestError> {
        use crate::model::audio;
        use crate::model::speech::{SpeechOptions, Task};
        let Some(features) = model.feature_config() else {
            return Err(input(InputError::AudioToText {
                model: model.info().name().to_string(),
                family: model.family(),
            }));
        };
        if !self.text.trim().is_empty() {
            return Err(RequestError::TextWithAudio {
                model: model.info().name().to_string(),
            });
        }
        if self.target.is_some() {
            return Err(RequestError::TargetNeedsEncoderDecoder {
                model: model.info().name().to_string(),
                family: model.family(),
                decoder: false,
            });
        }
        let sound = source
            .load(&audio::AudioLimits::default())
            .map_err(crate::model::Error::from)?;
        let chunk = features.chunk_length as f64;
        let longest = model
            .seq2seq_decoder_positions()
            .unwrap_or(crate::model::encdec::DEFAULT_MAX_LENGTH);
        // The prompt takes up to four positions (transformers caps max_new_tokens the same
        // way: max_target_positions less the prompt).
        let new = self.generate.unwrap_or(longest.saturating_sub(4));
        let options = SpeechOptions {
            language: self.language.clone(),
            task: if self.translate {
                Task::Translate
            } else {
                Task::Transcribe
            },
            timestamps: self.timestamps,
            max_new_tokens: new,
        };
        let capture = self.window.unwrap_or(0);
        // Each window's generation reported as one of its own.
        let mut report = (usize::MAX, Generating::new(progress, new));
        let long = model.encode_speech_windows(
            &sound.samples,
            features,
            capture,
            &options,
            &self.encode_options(),
            &mut |window, d| {
                if report.0 != window {
                    report.1.finish();
                    report = (window, Generating::new(progress, new));
                }
                report.1.done(d);
            },
        );
        report.1.finish();
        let long = long?;
        if long.captured != capture {
            return Err(RequestError::NoSuchWindow {
                asked: capture,
                windows: long.windows.len(),
                seconds: chunk,
            });
        }
        let transcript = long.transcript();
        let words: Vec<crate::doc::speech::WordDoc> = long
            .words()
            .map(|(window, w)| crate::doc::speech::WordDoc {
                word: w.word.clone(),
                tokens: w.tokens.clone(),
                window,
                rows: w.rows,
                start_frame: w.start_frame,
                end_frame: w.end_frame,
                start: w.start,
                end: w.end,
            })
            .collect();
        let window_count = long.windows.len();
        let window_seconds = long.windows[capture].seconds;
        // The captured window's spectrogram, for the views (the run made it and let it go).
        let seek =
            (long.windows[capture].start_seconds * features.sampling_rate as f64).round() as usize;
        let end = (seek + features.n_samples).min(sound.samples.len());
        let mut mel = audio::log_mel(&sound.samples[seek.min(end)..end], features)
            .into_iter()
            .next()
            .expect("log_mel gives at least one window");
        mel.start_seconds = long.windows[capture].start_seconds;
        let out = long.encoding;
        let [encoder, decoder, cross]: [Attention; 3] = out
            .seq2seq
            .attentions
            .try_into()
            .map_err(|_| ShapeError(ShapeProblem::NotThree))?;
        let views = crate::recording::recording(
            source.name(),
            (&sound.samples, sound.sample_rate),
            (
                &mel,
                features.hop_length as f64 / features.sampling_rate as f64,
                window_seconds,
            ),
            &out.words,
            (&decoder.queries().ids, out.prompt.len()),
            &out.alignment_heads,
        );
        let set = AttentionSet::encoder_decoder(encoder, decoder, cross, None)?
            .relabel(
                crate::attention::LabelScheme::Plain,
                model.tokenizer().label_scheme(),
            )
            .with_recording(views)?;
        let generated_text = out.seq2seq.generation.as_ref().map(|g| {
            if self.timestamps {
                model.tokenizer().decode(g.generated()).unwrap_or_default()
            } else {
                out.transcript.clone()
            }
        });
        let section = crate::doc::speech::SpeechSection {
            audio: source.name(),
            duration: sound.duration,
            window_start: out.start_seconds,
            window_seconds,
            windows: window_count,
            window: capture,
            frame_seconds: crate::model::speech::FRAME_SECONDS,
            language: out.language.clone(),
            language_detected: out.language_detected,
            task: options.task.as_str().to_string(),
            timestamps: self.timestamps,
            prompt: out.prompt.clone(),
            transcript,
            window_transcript: out.transcript.clone(),
            alignment_heads: out.alignment_heads.iter().map(|&(l, h)| [l, h]).collect(),
            alignment_heads_given: out.alignment_heads_given,
            words,
        };
        Ok(Run {
            set,
            hidden: out.seq2seq.decoder_hidden,
            truncated_from: None,
            bytes_cut: false,
            generation: out.seq2seq.generation,
            generated_text,
            default_generation: None,
            target_truncated_from: None,
            target_bytes_cut: false,
            target_kept: 0,
            value_weighted: None,
            measured: Measured {
                speech: Some(section),
                ..Measured::default()
            },
        })
    }

    fn run_seq2seq(&self, model: &Model, progress: &dyn Progress) -> Result<Run, RequestError> {
        let mut default_generation = None;
        let input = match (&self.target, self.generate) {
            (Some(target), _) => DecoderInput::Target(target),
            (None, Some(n)) => DecoderInput::Generate(n),
            (None, None) => {
                let n = model.default_generation_length();
                default_generation = Some(n);
                DecoderInput::Generate(n)
            }
        };
        let total = match input {
            DecoderInput::Generate(n) => n,
            DecoderInput::Target(_) => 0,
        };
        let mut report = Generating::new(progress, total);
        let out = model.encode_seq2seq(&self.text, input, &self.encode_options(), &mut |d| {
            report.done(d)
        });
        report.finish();
        let out = out?;
        let [encoder, decoder, cross]: [Attention; 3] = out
            .attentions
            .try_into()
            .map_err(|_| ShapeError(ShapeProblem::NotThree))?;
        let set = AttentionSet::encoder_decoder(encoder, decoder, cross, self.target.clone())?
            .relabel(
                model.tokenizer().label_scheme(),
                model.target_side().label_scheme(),
            );
        let generated_text = out
            .generation
            .as_ref()
            .map(|g| model.tokenizer().decode(g.generated()).unwrap_or_default());
        Ok(Run {
            set,
            hidden: out.decoder_hidden,
            truncated_from: out.truncated_from,
            bytes_cut: out.bytes_cut,
            generation: out.generation,
            generated_text,
            default_generation,
            target_truncated_from: out.target_truncated_from,
            target_bytes_cut: out.target_bytes_cut,
            target_kept: out.labels.as_ref().map_or(0, Vec::len),
            value_weighted: None,
            measured: Measured::default(),
        })
    }
}

/// A request refused for its input, in the library's words.
fn input(refusal: InputError) -> RequestError {
    RequestError::Model(refusal.into())
}

/// The run of a single-kind model's encoding, labelled for people, with the analyses of the
/// value terms that `request` asked for.
fn single_run(
    model: &Model,
    encoding: Encoding,
    request: &RunRequest,
) -> Result<Run, RequestError> {
    let value_weighted = match &encoding.values {
        Some(values) if request.value_weighted => Some(norm_weights(&encoding.attention, values)?),
        _ => None,
    };
    let alti = match &encoding.values {
        Some(values) if request.alti => Some(alti(encoding.attention.layer_numbers(), values)?),
        _ => None,
    };
    let scheme = model.tokenizer().label_scheme();
    let generated_text = encoding
        .generation
        .as_ref()
        .map(|g| model.tokenizer().decode(g.generated()).unwrap_or_default());
    Ok(Run {
        set: AttentionSet::single(encoding.attention.relabel(scheme, scheme)),
        hidden: encoding.hidden,
        truncated_from: encoding.truncated_from,
        bytes_cut: encoding.bytes_cut,
        generation: encoding.generation,
        generated_text,
        default_generation: None,
        target_truncated_from: None,
        target_bytes_cut: false,
        target_kept: 0,
        value_weighted,
        measured: Measured {
            alti,
            ..Measured::default()
        },
    })
}

/// Value zeroing of `run`'s primary tokens (its own passes over the model, within `limit`).
fn zeroing_of(
    model: &Model,
    run: &Run,
    limit: RerunLimit,
    progress: &dyn Progress,
) -> Result<ValueZeroing, RequestError> {
    let units = run.set.primary().queries();
    let forward = model.value_zeroing_within(&units.ids, &units.type_ids, limit, progress)?;
    Ok(ValueZeroing::new(&forward))
}

/// The logit lens of `run`'s tokens (prompt and generated ones alike), labelled as its views
/// label them; refused before its pass when it would take more than `max_memory` (`None`: the
/// default capture budget).
fn lens_of(
    model: &Model,
    run: &Run,
    k: usize,
    max_memory: Option<u64>,
) -> Result<LogitLens, RequestError> {
    let units = run.set.primary().queries();
    let arch = model.architecture();
    let (stages, tokens) = (arch.layers + 1, units.ids.len());
    let k = k.clamp(1, arch.vocab_size.max(1));
    let budget = max_memory.unwrap_or_else(crate::model::default_capture_budget);
    let needs = crate::analysis::lens::lens_bytes(stages, tokens, k);
    if needs.is_none_or(|b| b > budget) {
        return Err(crate::model::Error::TooBig(CaptureTooBig {
            capture: Capture::LogitLens { stages, tokens, k },
            needs,
            budget,
            budget_given: max_memory.is_some(),
        })
        .into());
    }
    let forward = model.logit_lens(&units.ids, &units.type_ids, k)?;
    let tokenizer = model.tokenizer();
    // The positions as every view shows tokens (`capital`, not the vocabulary's `Ġcapital`;
    // repeats told apart by their index).
    Ok(LogitLens::new(&forward, units.named(false), |id| {
        tokenizer.decode(&[id]).unwrap_or_default()
    }))
}

/// The id of `token`, typed as one token of `model`'s vocabulary: the vocabulary entry itself
/// (`Ġthe`), or a text the tokenizer reads as exactly one token (` the`).
fn one_token(model: &Model, role: TokenRole, token: &str) -> Result<u32, RequestError> {
    let tokenizer = model.tokenizer();
    let refuse = |pieces: Vec<String>| RequestError::NotOneToken {
        role,
        token: token.to_string(),
        model: model.info().name().to_string(),
        pieces,
    };
    if token.is_empty() {
        return Err(refuse(Vec::new()));
    }
    let ids = tokenizer
        .encode_plain(token)
        .map_err(crate::model::Error::from)?;
    let decode = |id: u32| tokenizer.decode(&[id]).unwrap_or_default();
    if let [id] = ids[..] {
        // A text read as the unknown token is not known, unless it is that token.
        let unknown = tokenizer.is_special(id) && tokenizer.token(id).as_deref() != Some(token);
        if !unknown {
            return Ok(id);
        }
        return Err(refuse(Vec::new()));
    }
    if let Some(id) = tokenizer.vocab_id(token) {
        return Ok(id);
    }
    Err(refuse(ids.into_iter().map(decode).collect()))
}

/// A generation's progress: the model counts tokens done, [`Progress`] takes increments.
struct Generating<'a> {
    progress: &'a dyn Progress,
    done: usize,
    started: bool,
    total: usize,
}

impl<'a> Generating<'a> {
    fn new(progress: &'a dyn Progress, total: usize) -> Self {
        Generating {
            progress,
            done: 0,
            started: false,
            total,
        }
    }

    fn done(&mut self, done: usize) {
        if !self.started {
            self.progress
                .start(&Stage::Generate, Some(self.total as u64));
            self.started = true;
        }
        if done > self.done {
            self.progress.advance((done - self.done) as u64);
            self.done = done;
        }
    }

    fn finish(&mut self) {
        if self.started {
            self.progress.finish();
            self.started = false;
        }
    }
}

/// The induction probe of TransformerLens's head detector (`docs/stats.md`, "Head
/// detectors"): run `model` on [`INDUCTION_PERIOD`](crate::analysis::detectors::INDUCTION_PERIOD) random ordinary tokens repeated
/// twice ([`repeated_sequence`](crate::analysis::detectors::repeated_sequence), seed [`INDUCTION_SEED`](crate::analysis::detectors::INDUCTION_SEED); fewer tokens
/// when the model's context is shorter), wrapped in the special tokens its tokenizer puts around
/// a text, and score every head on it. `None` for models it does not apply to: encoder–decoders
/// and vision models. One extra forward pass of about 50 tokens, once per model.
pub fn induction_probe(
    model: &Model,
) -> Result<Option<crate::analysis::detectors::Induction>, RequestError> {
    use crate::analysis::detectors::{self, Induction};
    if model.is_seq2seq() || model.is_vision() {
        return Ok(None);
    }
    let tok = model.tokenizer();
    let max = model.max_positions();
    // The special tokens the tokenizer wraps a text in: those before and after "x".
    let wrap = tok
        .encode("x", None, max, false)
        .map_err(crate::model::Error::from)?;
    let lead = wrap.roles.iter().take_while(|r| r.is_special()).count();
    let trail = wrap.roles[lead..]
        .iter()
        .rev()
        .take_while(|r| r.is_special())
        .count();
    let keep = |range: std::ops::Range<usize>| -> Vec<usize> { range.collect() };
    let around: Vec<usize> = keep(0..lead)
        .into_iter()
        .chain(keep(wrap.ids.len() - trail..wrap.ids.len()))
        .collect();
    let period = detectors::INDUCTION_PERIOD.min(max.saturating_sub(around.len()) / 2);
    let specials = tok.specials();
    let vocab = model.architecture().vocab_size;
    let body = detectors::repeated_sequence(vocab, period, detectors::INDUCTION_SEED, |id| {
        tok.token(id).is_some()
            && !tok.is_special(id)
            && ![
                &specials.start,
                &specials.end,
                &specials.pad,
                &specials.other,
                &specials.ordinary,
            ]
            .iter()
            .any(|set| set.contains(&id))
    });
    if body.len() < 4 {
        return Ok(None);
    }
    let mut enc = Encoded {
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
    let mut push = |token: String, id: u32, role: crate::attention::Role, word: Option<usize>| {
        enc.surfaces.push(token.clone());
        enc.tokens.push(token);
        enc.ids.push(id);
        enc.type_ids.push(0);
        enc.segments.push(0);
        enc.special.push(role.is_special());
        enc.roles.push(role);
        enc.word_ids.push(word);
    };
    for &i in &around[..lead] {
        push(wrap.tokens[i].clone(), wrap.ids[i], wrap.roles[i], None);
    }
    for (w, &id) in body.iter().enumerate() {
        let token = tok.token(id).unwrap_or_default();
        push(token, id, crate::attention::Role::Word, Some(w));
    }
    for &i in &around[lead..] {
        push(wrap.tokens[i].clone(), wrap.ids[i], wrap.roles[i], None);
    }
    let text = enc.tokens.join(" ");
    let encoding = model.encode_tokens(&text, None, enc, false)?;
    Ok(Induction::of(
        &encoding.attention,
        period,
        detectors::INDUCTION_SEED,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Records what it is told.
    #[derive(Default)]
    struct Recorder(Mutex<Vec<String>>);

    impl Progress for Recorder {
        fn start(&self, stage: &Stage, total: Option<u64>) {
            self.0
                .lock()
                .unwrap()
                .push(format!("start {stage:?} {total:?}"));
        }
        fn advance(&self, units: u64) {
            self.0.lock().unwrap().push(format!("+{units}"));
        }
        fn finish(&self) {
            self.0.lock().unwrap().push("finish".into());
        }
    }

    #[test]
    fn generation_progress_is_reported_in_increments() {
        let rec = Recorder::default();
        let mut g = Generating::new(&rec, 4);
        for d in [1, 2, 2, 4] {
            g.done(d);
        }
        g.finish();
        g.finish();
        assert_eq!(
            *rec.0.lock().unwrap(),
            ["start Generate Some(4)", "+1", "+1", "+2", "finish"]
        );
    }

    #[test]
    fn nothing_is_reported_without_generation() {
        let rec = Recorder::default();
        Generating::new(&rec, 0).finish();
        assert!(rec.0.lock().unwrap().is_empty());
    }
}
