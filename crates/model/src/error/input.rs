//! Input a model refuses: what was asked of it, or found in its files, that it cannot run.

use std::path::PathBuf;

use crate::formats::gguf::ChatError;
use crate::pixels::PixelsError;
use crate::small_file::ReadError;

/// Input a model cannot run, with the facts that say why. Each variant displays as one line
/// that says what was wrong and what to do.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// Next-token logits asked of an encoder.
    #[error("{model} is an encoder ({family}); only decoder models predict the next token")]
    EncoderPredicts {
        /// The model's name.
        model: String,
        /// Its family.
        family: &'static str,
    },
    /// Generation asked of an encoder.
    #[error(
        "{model} is an encoder ({family}); only decoder models (GPT-2, Llama, …) generate text"
    )]
    EncoderGenerates {
        /// The model's name.
        model: String,
        /// Its family.
        family: &'static str,
    },
    /// Generation or a chat prompt asked of an encoder.
    #[error("{model} is an encoder ({family}); only decoder models (GPT-2, Llama, …) generate text or have a chat template")]
    EncoderChats {
        /// The model's name.
        model: String,
        /// Its family.
        family: &'static str,
    },
    /// Text or token ids given to a speech model, whose encoder reads a recording.
    #[error("{family} reads a recording, not text; give it an audio file")]
    NeedsAudio {
        /// Its family.
        family: &'static str,
    },
    /// Audio given to a model that reads text or pictures.
    #[error("{model} is a {family} model, which does not read audio; give the recording to a speech model such as Whisper")]
    AudioToText {
        /// The model's name.
        model: String,
        /// Its family.
        family: &'static str,
    },
    /// A spectrogram window of another shape than the speech model reads.
    #[error("{model} reads windows of {mel_bins} mel bins × {frames} frames, not {got_bins} × {got_frames}; compute the features with its preprocessor_config.json")]
    SpeechWindow {
        /// The model's name.
        model: String,
        /// Its mel bins.
        mel_bins: usize,
        /// Its frames per window.
        frames: usize,
        /// The window's bins.
        got_bins: usize,
        /// The window's frames.
        got_frames: usize,
    },
    /// A language asked of an English-only speech model.
    #[error("{model} is English-only (it has no language tokens), so it cannot be told the language '{language}'; leave the language out")]
    EnglishOnly {
        /// The model's name.
        model: String,
        /// The language asked for.
        language: String,
    },
    /// A language the speech model has no token for.
    #[error("the model has no language '{language}'; its languages are {}", .known.join(", "))]
    UnknownLanguage {
        /// The language asked for.
        language: String,
        /// The codes it knows.
        known: Vec<String>,
    },
    /// A task the speech model has no token for (translation on an English-only model).
    #[error("{model} cannot {task}: its generation config has no '{task}' task token")]
    SpeechTask {
        /// The model's name.
        model: String,
        /// The task.
        task: &'static str,
    },
    /// Timestamps asked of a speech model without timestamp tokens.
    #[error("{model} has no timestamp tokens (no no_timestamps_token_id in its generation config), so it cannot write timestamps")]
    NoTimestampTokens {
        /// The model's name.
        model: String,
    },
    /// Text given to a vision model.
    #[error("{model} is a vision model ({family}); give it an image, not text")]
    TextToVision {
        /// The model's name.
        model: String,
        /// Its family.
        family: &'static str,
    },
    /// A picture given to a text model read from a GGUF file without its projector file.
    #[error(
        "{model} is a GGUF text model: to read pictures it needs the projector file that came \
         with it (mmproj-*.gguf, llama.cpp's vision tower and projector)"
    )]
    ImageNeedsProjector {
        /// The model's name.
        model: String,
    },
    /// A projector file given with a GGUF text model of a family that reads no pictures.
    #[error(
        "{family} GGUF models read no pictures, so no projector file (mmproj-*.gguf) joins them; \
         leave the projector out"
    )]
    ProjectorTextOnly {
        /// The text model's family.
        family: &'static str,
    },
    /// A projector file given with a model that is not read from a GGUF file.
    #[error(
        "a projector file (mmproj-*.gguf) goes with a GGUF text model, but {model} is not a \
         .gguf file; give the text model's GGUF file, or leave the projector out"
    )]
    ProjectorNeedsGguf {
        /// The model as given.
        model: String,
    },
    /// A projector file that is not one (another GGUF file).
    #[error(
        "{origin} is not a projector file: its general.architecture is '{architecture}', not \
         'clip'; give the mmproj-*.gguf file that came with the model"
    )]
    NotAProjector {
        /// The file.
        origin: String,
        /// Its `general.architecture`.
        architecture: String,
    },
    /// A projector type not read here.
    #[error(
        "{origin} holds a '{projector}' projector, which attnviz does not run; it runs {}",
        projector_list(known)
    )]
    UnknownProjector {
        /// The file.
        origin: String,
        /// Its `clip.projector_type`.
        projector: String,
        /// The types read, each with its family.
        known: &'static [(&'static str, &'static str)],
    },
    /// A projector that goes with another kind of text model.
    #[error(
        "{origin} is a '{projector}' projector, which goes with {} text models, but {model} is \
         '{architecture}'; give the projector made for this model",
        goes_with.join(" or ")
    )]
    ProjectorText {
        /// The projector file.
        origin: String,
        /// Its type.
        projector: String,
        /// The text architectures it joins.
        goes_with: &'static [&'static str],
        /// The text model.
        model: String,
        /// Its `general.architecture`.
        architecture: String,
    },
    /// A projector whose embeddings are not as wide as the text model's.
    #[error(
        "{origin} projects pictures into {width}-wide embeddings, but {model}'s text model is \
         {hidden} wide; give the projector made for this model"
    )]
    ProjectorWidth {
        /// The projector file.
        origin: String,
        /// Its output width.
        width: usize,
        /// The text model.
        model: String,
        /// Its hidden size.
        hidden: usize,
    },
    /// A picture for a store's model whose projector (kept beside it in the store) could not
    /// be joined to it.
    #[error("{model} reads no pictures here: {problem}")]
    StoreProjector {
        /// The model's name.
        model: String,
        /// Why its projector was not joined.
        problem: std::sync::Arc<crate::error::Error>,
    },
    /// A text model whose vocabulary lacks a token that stands for a picture.
    #[error(
        "{model}'s vocabulary has no {token} token, which stands for a picture's image tokens; \
         it cannot read pictures"
    )]
    NoPictureToken {
        /// The text model.
        model: String,
        /// The token.
        token: &'static str,
    },
    /// An image given to a vision-language checkpoint read as its language model only (its
    /// vision tower is not run).
    #[error(
        "{model} is read as its language model ({family}): attnviz does not run its vision tower \
         yet, so it reads text, not images"
    )]
    VisionTowerNotRun {
        /// The model's name.
        model: String,
        /// Its family.
        family: &'static str,
    },
    /// An image given to a text model.
    #[error("{model} is a text model ({family}); it reads text, not images")]
    ImageToText {
        /// The model's name.
        model: String,
        /// Its family.
        family: &'static str,
    },
    /// Pan-and-scan crops (asked for, or `do_pan_and_scan` in the processor's file) for a model
    /// whose prompt has no words for them (only Gemma 3's processor writes crops).
    #[error("{model} has no pan-and-scan crops: only Gemma 3's processor writes them into its prompt{}", if *.asked { "" } else { "; set do_pan_and_scan to false in its preprocessor_config.json" })]
    PanAndScan {
        /// The model's name.
        model: String,
        /// Whether the run asked for them ([`crate::EncodeOptions::pan_and_scan`]) rather than
        /// the processor's file.
        asked: bool,
    },
    /// A vision-language model run without a picture.
    #[error("{model} reads pictures with its prompt; give it at least one image")]
    NoPicture {
        /// The model's name.
        model: String,
    },
    /// A prompt that marks another number of pictures than were given.
    #[error(
        "the prompt marks {marks} picture{} with {mark} but {pictures} {} given; mark each \
         picture once, or none to put them all before the text",
        if *.marks == 1 { "" } else { "s" },
        if *.pictures == 1 { "was" } else { "were" }
    )]
    PictureMarks {
        /// The image token as written.
        mark: String,
        /// The marks in the prompt.
        marks: usize,
        /// The pictures given.
        pictures: usize,
    },
    /// A streamed capture asked for a batch of several sequences.
    #[error("a streamed capture runs one sequence at a time")]
    StreamedBatch,
    /// A streamed capture asked for the value vectors.
    #[error("value-weighted attention needs the whole capture; it cannot be streamed")]
    StreamedValues,
    /// An empty list of layers to capture.
    #[error("no layers to capture")]
    NoLayers,
    /// A layer of a hybrid model that mixes tokens without a softmax (Qwen3-Next's gated
    /// delta layers): it has no attention map to capture.
    #[error("layer {layer} of {model} is a {kind} layer: token mixing, not softmax, with no attention map; choose one of its attention layers {attention} (the view of the attention layer it feeds draws its mixing matrix)")]
    NotAttentionLayer {
        /// The layer asked for.
        layer: usize,
        /// The model's name.
        model: String,
        /// What mixes its tokens (`gated delta`).
        kind: &'static str,
        /// The attention layers, for people (`3, 7, 11`).
        attention: String,
    },
    /// A layer the model does not have.
    #[error("layer {layer} is out of range: {model} has layers 0–{} (numbered from 0)", .layers - 1)]
    LayerOutOfRange {
        /// The layer asked for.
        layer: usize,
        /// The model's name.
        model: String,
        /// Its layers (at least 1).
        layers: usize,
    },
    /// Layers listed out of order or more than once.
    #[error("layers {layers:?} must be listed in ascending order, each once")]
    LayersOutOfOrder {
        /// The list as given.
        layers: Vec<usize>,
    },
    /// More new tokens asked for than the model has positions.
    #[error("{new} new tokens leave no room for a prompt: the model takes at most {longest} tokens; generate fewer")]
    NoRoomForPrompt {
        /// Tokens asked for.
        new: usize,
        /// The model's positions.
        longest: usize,
    },
    /// A sequence without tokens.
    #[error("no input tokens{}", sequence_note(*.index))]
    NoTokens {
        /// Which sequence of the batch (0: the only or first one).
        index: usize,
    },
    /// Token ids and token type ids of different lengths.
    #[error("{ids} input ids but {types} token type ids{}", sequence_note(*.index))]
    TypesMismatch {
        /// Token ids.
        ids: usize,
        /// Token type ids.
        types: usize,
        /// Which sequence of the batch.
        index: usize,
    },
    /// A token id outside the vocabulary (a tokenizer of another model).
    #[error("token id {id}{} is outside the vocabulary of {vocab} tokens; does the tokenizer belong to this model?", sequence_note(*.index))]
    IdOutsideVocabulary {
        /// The id.
        id: u32,
        /// Which sequence of the batch.
        index: usize,
        /// The vocabulary's size.
        vocab: usize,
    },
    /// A token type id outside the model's segment types.
    #[error("token type id {id}{} is outside the model's {types} segment types{}", sequence_note(*.index), if *.types == 1 { "; this model cannot encode sentence pairs" } else { "" })]
    TypeOutsideSegments {
        /// The token type id.
        id: u32,
        /// Which sequence of the batch.
        index: usize,
        /// The model's segment types.
        types: usize,
    },
    /// A target or contrast token outside the vocabulary.
    #[error("token id {token} is outside the vocabulary of {vocab} tokens")]
    TokenOutsideVocabulary {
        /// The token id.
        token: u32,
        /// The vocabulary's size.
        vocab: usize,
    },
    /// Value zeroing asked of a model without a self-attention pass for it.
    #[error("value zeroing is for the self-attention of encoders and decoders; {model} ({family}) has no such pass")]
    NoValueZeroing {
        /// The model's name.
        model: String,
        /// Its family.
        family: &'static str,
    },
    /// The logit lens asked of an encoder checkpoint without its masked-LM head.
    #[error("this checkpoint has no masked-LM head: {model} is a {family} encoder without one (a base, sentence-embedding or task checkpoint), and the logit lens reads the model's own head; use a checkpoint that has it ({class}ForMaskedLM, e.g. {example})")]
    NoMaskedLmHead {
        /// The model's name.
        model: String,
        /// Its family.
        family: &'static str,
        /// The transformers class prefix of the family's masked-LM checkpoints.
        class: &'static str,
        /// A checkpoint that has the head.
        example: &'static str,
    },
    /// The logit lens asked of a hybrid decoder whose layers it does not read yet.
    #[error("the logit lens does not read {family} models yet: their {kind} layers are not a softmax decoder stack; {model}'s attention views work")]
    LensOnHybrid {
        /// The model's name.
        model: String,
        /// Its family.
        family: &'static str,
        /// What its other layers are (`gated delta`).
        kind: &'static str,
    },
    /// The logit lens asked of a decoder checkpoint without its language-model head.
    #[error("{model} has no language-model head in its checkpoint (a bare base model): the logit lens needs one; use a checkpoint that has it (…ForCausalLM)")]
    NoLmHeadForLens {
        /// The model's name.
        model: String,
    },
    /// An analysis that re-runs a decoder with interventions, asked of another model.
    #[error("{what} is for decoders with a language-model head (GPT-2, Llama, Qwen, Gemma, Phi-3); {model} is a {family} model{}", if *.headless_decoder { " without a head in its checkpoint" } else { "" })]
    NoInterventions {
        /// The analysis asked for.
        what: String,
        /// The model's name.
        model: String,
        /// Its family.
        family: &'static str,
        /// Whether it is a decoder whose checkpoint lacks the head.
        headless_decoder: bool,
    },
    /// Head outputs that do not fit the model.
    #[error(
        "head outputs of another shape than {model}'s {layers} layers × {heads} heads × {hidden}"
    )]
    HeadOutputsShape {
        /// The model's name.
        model: String,
        /// Its layers.
        layers: usize,
        /// Heads per layer.
        heads: usize,
        /// The hidden size.
        hidden: usize,
    },
    /// Head attribution asked of a model whose head is not linear after its final norm.
    #[error("head attribution needs a head that is linear after its final norm; {model}'s is not")]
    HeadNotLinear {
        /// The model's name.
        model: String,
    },
    /// A generation longer than an encoder–decoder's decoder positions.
    #[error("{new} new tokens and the start token are more than the decoder's {longest} positions; generate at most {}", .longest.saturating_sub(1))]
    DecoderTooShort {
        /// Tokens asked for.
        new: usize,
        /// The decoder's positions.
        longest: usize,
    },
    /// One side of an encoder–decoder's input without tokens.
    #[error("no {which} tokens")]
    NoSideTokens {
        /// `source` or `decoder`.
        which: String,
    },
    /// A token id outside the vocabulary on one side of an encoder–decoder's input.
    #[error("{which} token id {id} is outside the vocabulary of {vocab} tokens; does the tokenizer belong to this model?")]
    SideIdOutsideVocabulary {
        /// `source` or `decoder`.
        which: String,
        /// The id.
        id: u32,
        /// The vocabulary's size.
        vocab: usize,
    },
    /// Generation asked of a checkpoint without its language-model head.
    #[error("this {family} checkpoint has no language-model head (lm_head.weight): it is a bare base model, which can be shown but cannot generate; use the ForCausalLM checkpoint")]
    BareBaseModel {
        /// The model's family.
        family: &'static str,
    },
    /// A generation config, config.json or chat template file that cannot be used.
    #[error("{}: {problem}", path.display())]
    ConfigFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        problem: ConfigFileProblem,
    },
    /// A chat template that does not compile or render.
    #[error(transparent)]
    Chat(#[from] ChatError),
    /// The GGUF metadata that holds the chat template cannot be read.
    #[error(transparent)]
    ChatMetadata(std::sync::Arc<crate::formats::gguf::GgufError>),
    /// An image that cannot be read or prepared, or an image processor config that cannot be
    /// used.
    #[error(transparent)]
    Image(#[from] PixelsError),
    /// An image asked of a model without an image processor.
    #[error("the model has no image processor: its folder has no preprocessor_config.json (the checkpoint's processor ships one)")]
    NoImageProcessor,
    /// An image processor whose input is smaller than one patch.
    #[error("the model's input is {width}×{height} pixels, smaller than one {patch}×{patch} patch; its preprocessor_config.json makes no patch grid")]
    SmallerThanPatch {
        /// The prepared width.
        width: usize,
        /// The prepared height.
        height: usize,
        /// The patch size.
        patch: usize,
    },
    /// A tensor missing from a GGUF file.
    #[error("{origin} has no tensor {name}")]
    NoTensor {
        /// The file.
        origin: String,
        /// The tensor's transformers name.
        name: String,
    },
    /// A GGUF tensor of another shape than the config says.
    #[error("{origin}: tensor {name} has shape {shape:?}, expected {expected:?}")]
    TensorShape {
        /// The file.
        origin: String,
        /// The tensor's transformers name.
        name: String,
        /// Its shape in the file.
        shape: Vec<usize>,
        /// The shape the config makes.
        expected: Vec<usize>,
    },
    /// A GGUF tensor holding a value that is not finite.
    #[error("{origin}: tensor {name} holds {value} at index {index}; the file is damaged")]
    TensorNotFinite {
        /// The file.
        origin: String,
        /// The tensor's transformers name.
        name: String,
        /// The value.
        value: f32,
        /// Its index in the tensor.
        index: usize,
    },
    /// A config's head count that does not make the rows of its projection.
    #[error("{field} {heads} × head_dim {head_dim} makes {rows} rows, but tensor {tensor} has shape {shape:?}; the config does not describe these weights")]
    ProjectionRows {
        /// The config field of the head count.
        field: &'static str,
        /// The head count.
        heads: usize,
        /// The head size.
        head_dim: usize,
        /// The rows they make.
        rows: usize,
        /// The tensor.
        tensor: String,
        /// Its shape.
        shape: Vec<usize>,
    },
    /// A per-frequency RoPE factor tensor holding a value that is not a positive number.
    #[error("tensor {tensor} holds {value}; {} factors divide the frequencies, so each must be a positive number", if *.long_rope { "LongRoPE" } else { "per-frequency RoPE" })]
    RopeFactors {
        /// The tensor.
        tensor: String,
        /// The value.
        value: f32,
        /// Whether these are LongRoPE factors (Phi-3) rather than llama3's.
        long_rope: bool,
    },
    /// MXFP4 expert weights whose shape makes no whole blocks.
    #[error("tensor {tensor}: {problem}")]
    Mxfp4 {
        /// The tensor.
        tensor: String,
        /// What is wrong.
        #[source]
        problem: crate::kernels::quant::QuantError,
    },
    /// Phi-3's fused gate and up projection that cannot be split.
    #[error("gate_up_proj: {0}")]
    GateUp(#[source] crate::kernels::quant::QuantError),
    /// A GGUF file's metadata that describes no model attnviz runs.
    #[error("{origin}: {problem}")]
    GgufMetadata {
        /// The file.
        origin: String,
        /// What is wrong.
        problem: GgufMetadataProblem,
    },
    /// A run that reads an image asked for what vision models do not give.
    #[error(transparent)]
    Vision(#[from] VisionUnsupported),
    /// What a vision-language model cannot give yet.
    #[error(transparent)]
    Multimodal(#[from] MultimodalUnsupported),
    /// Text given to a vision model together with its picture.
    #[error("{model} is a vision model ({family}); it reads the picture alone, not text with it")]
    TextWithPicture {
        /// The model's name.
        model: String,
        /// Its family.
        family: &'static str,
    },
    /// A capture streamed layer by layer asked for ALTI, which needs every layer at once.
    #[error(
        "ALTI needs the whole capture of every layer; a capture streamed to a file cannot give it"
    )]
    StreamedAlti,
    /// ALTI asked of an encoder–decoder.
    #[error("ALTI is not available for encoder–decoder models ({family}) yet; it is for the self-attention of encoders and decoders")]
    AltiOnEncoderDecoder {
        /// The model's family.
        family: &'static str,
    },
    /// Value zeroing asked of an encoder–decoder.
    #[error("value zeroing is not available for encoder–decoder models ({family}) yet; it is for the self-attention of encoders and decoders")]
    ZeroingOnEncoderDecoder {
        /// The model's family.
        family: &'static str,
    },
    /// ALTI asked of a capture of some layers.
    #[error("ALTI multiplies the contributions of every layer; it needs every layer captured, not a choice of layers")]
    AltiNeedsEveryLayer,
    /// Value zeroing asked of a capture of some layers.
    #[error("value zeroing rolls out the scores of every layer; it needs every layer captured, not a choice of layers")]
    ZeroingNeedsEveryLayer,
    /// The logit lens asked of an encoder–decoder.
    #[error("the logit lens is not available for encoder–decoder models ({family}) yet; it is for decoders and encoders with a masked-LM head")]
    LensOnEncoderDecoder {
        /// The model's family.
        family: &'static str,
    },
}

/// What is wrong with a generation config, config.json or chat template file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigFileProblem {
    /// It cannot be read.
    #[error("cannot read it: {0}")]
    Unreadable(#[source] ReadError),
    /// It holds JSON other than an object.
    #[error("it is not a JSON object")]
    NotAnObject,
    /// It is not JSON.
    #[error("it is not valid JSON ({0}); fix or remove the file")]
    NotJson(#[source] serde_json::Error),
    /// A token id field holding something other than a token of the vocabulary.
    #[error("{key} is {value}, not a token id of the model's {vocab}-token vocabulary")]
    NotATokenId {
        /// The field.
        key: String,
        /// Its value, as JSON.
        value: String,
        /// The vocabulary's size.
        vocab: usize,
    },
    /// A field of the wrong shape.
    #[error("{key} is {value}, not {expected}")]
    BadField {
        /// The field.
        key: String,
        /// Its value, as JSON.
        value: String,
        /// What it should be.
        expected: &'static str,
    },
}

/// What a vision model cannot give yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum VisionUnsupported {
    /// A capture streamed layer by layer.
    #[error("a vision model's capture is not streamed layer by layer; run it whole and save the attention from the run")]
    Streamed,
    /// Value-weighted or norm-aware attention.
    #[error("value-weighted and norm-aware attention are not available for vision models yet")]
    ValueWeighted,
    /// ALTI.
    #[error("ALTI is not available for vision models yet")]
    Alti,
    /// Value zeroing.
    #[error("value zeroing is not available for vision models yet")]
    ValueZeroing,
    /// The logit lens.
    #[error("the logit lens is for text models with a language-model or masked-LM head, not vision models")]
    Lens,
}

/// What a vision-language model cannot give yet: the analyses that run the language model
/// again (they would run it without its pictures) and the streamed capture.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MultimodalUnsupported {
    /// A capture streamed layer by layer.
    #[error("a vision-language model's capture is not streamed layer by layer yet; run it whole")]
    Streamed,
    /// Value-weighted or norm-aware attention.
    #[error(
        "value-weighted and norm-aware attention are not available for vision-language models yet"
    )]
    ValueWeighted,
    /// ALTI.
    #[error("ALTI is not available for vision-language models yet")]
    Alti,
    /// Value zeroing.
    #[error("value zeroing is not available for vision-language models yet")]
    ValueZeroing,
    /// The logit lens.
    #[error("the logit lens is not available for vision-language models yet")]
    Lens,
    /// Head attribution and ablation.
    #[error("head attribution and ablation are not available for vision-language models yet")]
    Heads,
}

/// What a GGUF file's metadata says that attnviz cannot run.
#[derive(Debug, thiserror::Error)]
pub enum GgufMetadataProblem {
    /// An architecture no family reads.
    #[error("GGUF architecture '{architecture}' is not supported; attnviz runs GGUF files of the architectures {}", .known.join(", "))]
    Architecture {
        /// The file's architecture.
        architecture: String,
        /// The architectures attnviz reads.
        known: Vec<&'static str>,
    },
    /// An architecture the family it was given to does not read.
    #[error("GGUF architecture '{architecture}' is not supported by the {family} family{runs}")]
    NotInFamily {
        /// The file's architecture.
        architecture: String,
        /// The family.
        family: &'static str,
        /// What the family runs instead (`; it runs …`, or nothing).
        runs: &'static str,
    },
    /// Head counts and a head size that cannot be run.
    #[error("{heads} heads over {kv_heads} key/value heads of size {head_dim} cannot be run")]
    Heads {
        /// Query heads.
        heads: usize,
        /// Key/value heads.
        kv_heads: usize,
        /// The head size.
        head_dim: usize,
    },
    /// A context length out of range.
    #[error("context_length {length} is outside 1–{max}")]
    ContextLength {
        /// The file's context length.
        length: usize,
        /// The most attnviz runs.
        max: usize,
    },
    /// A RoPE base that is not positive.
    #[error("rope.freq_base {0} is not positive")]
    RopeBase(f64),
    /// An RMS-norm epsilon out of range.
    #[error("metadata {architecture}.attention.layer_norm_rms_epsilon is {epsilon:?}; an RMS norm's epsilon is a small positive number (at most {max})")]
    RmsEpsilon {
        /// The GGUF architecture.
        architecture: String,
        /// The file's epsilon.
        epsilon: f64,
        /// The largest accepted.
        max: f64,
    },
    /// More layers than attnviz runs.
    #[error("block_count {layers} is more than the {max} layers attnviz runs")]
    TooManyLayers {
        /// The file's layers.
        layers: usize,
        /// The most attnviz runs.
        max: usize,
    },
    /// A layer count too large to lay out.
    #[error("block_count {0} is too large")]
    BlockCount(usize),
    /// RoPE over part of each head, for a family that rotates whole heads.
    #[error("RoPE rotates {rotated} of each head's {head_dim} dimensions; {}", if *.gemma { "Gemma rotates whole heads" } else { "partial rotary embeddings are not supported" })]
    PartialRope {
        /// Dimensions rotated.
        rotated: usize,
        /// The head size.
        head_dim: usize,
        /// Whether the family is Gemma (which says so in its own words).
        gemma: bool,
    },
    /// A RoPE scaling factor out of range.
    #[error("metadata {key} {factor}")]
    RopeFactor {
        /// The metadata key.
        key: String,
        /// The factor and why it is refused.
        factor: crate::blocks::rope::RopeFactorError,
    },
    /// A RoPE scaling the family does not run.
    #[error("RoPE scaling {scaling} is not supported{runs}")]
    RopeScaling {
        /// The scaling as the file names it (quoted or in full).
        scaling: String,
        /// What the family runs instead (`; attnviz runs …`).
        runs: &'static str,
    },
    /// A sliding window of 0 tokens.
    #[error("metadata {architecture}.attention.sliding_window is 0")]
    SlidingWindowZero {
        /// The GGUF architecture.
        architecture: String,
    },
    /// A soft-capping value that is not a positive number.
    #[error("metadata {architecture}.{key} is {value}; it must be a positive number")]
    SoftCap {
        /// The GGUF architecture.
        architecture: String,
        /// The key under it.
        key: String,
        /// The value.
        value: f64,
    },
    /// Phi-3's rotary dimensions out of range.
    #[error("metadata phi3.rope.dimension_count is {rotated}; RoPE rotates an even number of at least 2 and at most the head's {head_dim} values")]
    RotaryDim {
        /// Dimensions rotated.
        rotated: usize,
        /// The head size.
        head_dim: usize,
    },
    /// A mixture-of-experts architecture without experts.
    #[error("metadata {architecture}.expert_count is missing or 0, but this architecture's feed-forward blocks are routed experts")]
    NoExperts {
        /// The GGUF architecture.
        architecture: String,
    },
    /// Phi-3's LongRoPE without the context length that chooses its factors.
    #[error("metadata phi3.rope.scaling.original_context_length is missing; LongRoPE needs it to choose between its short and long factors")]
    NoOriginalContext,
    /// Phi-3's LongRoPE attention factor that is not positive.
    #[error("metadata phi3.rope.scaling.attn_factor is {0}; it must be positive")]
    AttnFactor(f64),
    /// A value of an architecture's own keys (DeepSeek's latent ranks and routing, Qwen3-Next's
    /// gated delta layers) that cannot be run, or a key such a file needs that is missing.
    #[error("metadata {key} is {value}; {why}")]
    Value {
        /// The metadata key.
        key: String,
        /// The value as written (`missing` when absent).
        value: String,
        /// What it must be.
        why: String,
    },
    /// M-RoPE's sections missing, or not three runs filling half a head.
    #[error("metadata {architecture}.rope.dimension_sections is {found}; multimodal RoPE needs three runs of frequencies (and llama.cpp's fourth, 0) that add up to {half}, half a head")]
    RopeSections {
        /// The file's architecture.
        architecture: String,
        /// What the file holds (`missing`, or the runs).
        found: String,
        /// Half the head size.
        half: usize,
    },
}

/// ` (sequence 3)` for a batch's later sequences, nothing for the first.
pub(super) fn sequence_note(index: usize) -> String {
    if index == 0 {
        String::new()
    } else {
        format!(" (sequence {index})")
    }
}

/// The projector types read, as a list in words: `'mlp' (LLaVA), … and 'gemma3' (Gemma 3)`.
fn projector_list(known: &[(&str, &str)]) -> String {
    let named: Vec<String> = known.iter().map(|(t, f)| format!("'{t}' ({f})")).collect();
    match named.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => named.concat(),
    }
}
