//! The model: find its files, read its config and weights, tokenize, and run our implementation
//! of the model's family, capturing the attention of every layer and head.
//!
//! Three layers, each importing only those below it, as candle's core / nn / transformers:
//!
//! - [`formats`]: model files as stored (the `-m` value's files, config.json, safetensors and
//!   `.bin` checkpoints, GGUF, tensors by name, the checks that bound hostile files);
//! - [`blocks`]: what networks are made of (the encoder, decoder and encoder–decoder stacks,
//!   layers, capture, generation) and the seam they sit behind ([`blocks::network::Network`],
//!   [`blocks::family::Family`]);
//! - [`families`]: one file per family, a table of its tensor names, its config and its quirks
//!   as data, and the [`families::registry`] that lists them, chosen by config.json's
//!   `model_type`.
//!
//! [`kernels`] holds the arithmetic they all run. [`Model`] (this file, and [`encdec`] for
//! encoder–decoders) sits on top and names no family. `docs/architecture.md` describes the
//! pipeline and how to add a family.
//!
//! ```no_run
//! use attnviz_model::{EncodeOptions, Model};
//! let model = Model::load("sentence-transformers/all-MiniLM-L6-v2", "main")?;
//! let out = model.encode("The cat sat on the mat.", None, &EncodeOptions::default())?;
//! println!("{} tokens, layer 0 head 0 row 0: {:?}", out.attention.len(), &out.attention.head(0, 0)[..3]);
//! # Ok::<(), attnviz_model::Error>(())
//! ```

pub mod audio;
pub mod pixels;
pub mod tokenize;

// The core layer's modules, under the names this crate's code has always used, and its
// `multiversion!` for the kernels' element-wise loops.
use attnviz_core::{attention, cancel, progress, small_file, threads};
#[macro_use]
extern crate attnviz_core;

pub mod blocks;
pub mod catalog;
pub mod encdec;
pub mod error;
pub mod families;
pub mod formats;
pub mod kernels;
pub mod lens;
pub mod multimodal;
pub mod rerun;
pub mod speech;
pub mod vision;
pub mod zeroing;

use std::path::Path;

use crate::attention::summary::{AttentionSummary, SummarySpec};
use crate::attention::{Attention, ModelInfo, QueryKey, Router, RouterLayer, Units};
use crate::tokenize::TextTokenizer;

use families::registry;
use formats::tensors::TensorMap;

// The modules and items code outside `model/` reaches by their old paths.
pub use blocks::capture::{CapturedLayer, LayerSink, SequenceCapture};
pub use blocks::family::{Family, FamilyConfig};
pub use blocks::generate::{ChatUnavailable, Generation, GenerationConfig};
pub use blocks::network::{
    Architecture, Batch, CausalLm, Forward, HeadOutputs, Inserted, KvCache, Multimodal, Network,
    TokenMixing,
};
pub use blocks::values::LayerValues;
pub use blocks::{capture, decoder, encoder, generate, layers, seq2seq};
pub use error::{
    format_bytes, Capture, CaptureTooBig, ConfigFileProblem, Error, ForwardError,
    GgufMetadataProblem, InputError, MultimodalUnsupported, TargetError, VisionUnsupported,
};
pub use families::bert::BertConfig;
pub use families::registry as family;
pub use families::{albert, bart, bert, distilbert, electra, gpt2, llama, roberta, t5};
pub use formats::config::{ConfigError, ConfigProblem};
pub use formats::source::stores::{StoreError, StoreKind, StoreModel, Stores};
pub use formats::source::{Hub, ModelFiles, SourceError};
pub use formats::validate::BadRow;
pub use formats::weights::{Checkpoint, WeightsError};
pub use formats::{config, gguf, pickle, pytorch, validate, weights};
pub use kernels::Mask;
pub use lens::{AblationForward, AttributionForward, LensForward};
pub use zeroing::ZeroingForward;

/// Finding a model's files ([`formats::source`]), with the tokenizer files its family reads
/// (its quirks' `tokenizer_files`, by config.json).
pub mod source {
    pub use super::formats::source::*;

    use super::families::registry;

    /// Find the files of `model`: a local folder if one exists at that path, else a hub repo
    /// id at `revision`, from the cache or downloaded ([`resolve_with`]).
    pub fn resolve(model: &str, revision: &str, hub: &Hub) -> Result<ModelFiles, SourceError> {
        resolve_with(model, revision, hub, &registry::tokenizer_files)
    }

    /// The files of a model in a local folder ([`from_dir_with`]).
    pub fn from_dir(dir: &std::path::Path, id: &str) -> Result<ModelFiles, SourceError> {
        from_dir_with(dir, id, &registry::tokenizer_files)
    }
}

/// Options for [`Model::encode`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EncodeOptions {
    /// Cut input longer than the model's maximum positions instead of failing.
    pub truncate: bool,
    /// Keep each head's query and key vectors (for the neuron view).
    pub capture_query_key: bool,
    /// Keep what the norm-based analyses need: each head's value norms and the residual and
    /// normalisation terms of every captured layer ([`LayerValues`]).
    pub capture_values: bool,
    /// Also keep each layer's ALTI contributions ([`LayerValues::mixing`], Ferrando et al.
    /// 2022): implies `capture_values`, and costs several times the value terms.
    pub alti: bool,
    /// Capture only these layers (ascending, numbered from 0); `None`: every layer.
    pub layers: Option<Vec<usize>>,
    /// The most bytes the captured attention may take; `None`: [`default_capture_budget`].
    pub max_memory: Option<u64>,
    /// Keep the residual stream at the last position taken apart by layer and head
    /// ([`Encoding::head_outputs`]), what per-head direct logit attribution reads
    /// ([`Model::head_attribution_from`]), from the same forward pass: decoders with a
    /// language-model head ([`Model::has_head_interventions`]); others keep nothing.
    pub head_outputs: bool,
    /// A vision-language run ([`Model::encode_with_images`]): also keep each picture's
    /// vision-tower attention, every tower layer ([`multimodal::MultimodalEncoding::towers`]), each checked
    /// against `max_memory` on its own. Off, the tower runs without capturing anything.
    pub towers: bool,
    /// A vision-language run: cut long pictures into Gemma 3's pan-and-scan crops
    /// ([`pixels::PanAndScan`]) with the processor's settings, or its defaults when its file
    /// does not ask for them (as transformers' `processor(..., do_pan_and_scan=True)`).
    /// Refused for a model whose prompt has no place for crops.
    pub pan_and_scan: bool,
    /// Summarise each captured layer while it is computed, keeping no probabilities
    /// ([`attnviz_core::attention::summary`]): the encoding's attention then holds the units
    /// and no layer, and [`Encoding::summary`] the summaries. For inputs whose full capture
    /// would not fit (thousands of tokens); one text only, no value terms or query/key vectors.
    pub summary: Option<SummarySpec>,
}

/// Which value terms a forward pass keeps per captured layer ([`LayerValues`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ValueTerms {
    /// None.
    #[default]
    Off,
    /// What value-weighted and norm-aware attention need.
    Norms,
    /// Those and each layer's ALTI contributions ([`LayerValues::mixing`]).
    NormsAndAlti,
}

impl ValueTerms {
    /// What `opts` asks for.
    pub fn of(opts: &EncodeOptions) -> ValueTerms {
        match (opts.capture_values, opts.alti) {
            (_, true) => ValueTerms::NormsAndAlti,
            (true, false) => ValueTerms::Norms,
            (false, false) => ValueTerms::Off,
        }
    }

    /// Whether any value terms are kept.
    pub fn any(self) -> bool {
        self != ValueTerms::Off
    }
}

/// The capture budget when none is given: half of this machine's memory (`MemTotal` in
/// /proc/meminfo), which leaves room for the weights and for the outputs made from the capture;
/// 4 GiB where the system does not say.
pub fn default_capture_budget() -> u64 {
    validate::total_memory().map_or(4 << 30, |m| m / 2)
}

/// The result of [`Model::encode`].
#[derive(Clone, Debug)]
pub struct Encoding {
    /// Tokens, segments and the attention of every layer and head.
    pub attention: Attention,
    /// Last hidden state `[n, hidden]`.
    pub hidden: Vec<f32>,
    /// Token count of the full input when it was truncated (`--truncate`); say so to the user.
    pub truncated_from: Option<usize>,
    /// Whether the text was first cut to [`tokenize::byte_limit`] bytes (`--truncate`).
    pub bytes_cut: bool,
    /// What was generated ([`Model::encode_generated`]).
    pub generation: Option<Generation>,
    /// Per captured layer, what the norm-based analyses need, when
    /// [`EncodeOptions::capture_values`] asked for it.
    pub values: Option<Vec<LayerValues>>,
    /// The residual stream at the last position taken apart by layer and head, when
    /// [`EncodeOptions::head_outputs`] asked for it and the model has them.
    pub head_outputs: Option<HeadOutputs>,
    /// Each captured layer's summary, when [`EncodeOptions::summary`] asked for them (the
    /// attention then holds no layer).
    pub summary: Option<AttentionSummary>,
}

/// What a batched forward pass keeps beyond the attention
/// ([`Model::forward_batch_values`]'s internals).
#[derive(Clone, Debug, Default)]
struct Extras {
    /// The value terms per captured layer.
    values: ValueTerms,
    /// Each sequence's residual stream at its last position, taken apart by layer and head.
    head_outputs: bool,
    /// Summarise the captured layers instead of keeping them (one sequence).
    summary: Option<SummarySpec>,
    /// Keep the linear-attention layers' token-mixing matrices (a hybrid model, every layer
    /// captured, nothing streamed or summarised).
    mixing: bool,
}

impl From<ValueTerms> for Extras {
    fn from(values: ValueTerms) -> Extras {
        Extras {
            values,
            head_outputs: false,
            summary: None,
            mixing: false,
        }
    }
}

/// What a batched forward pass gives, one entry per sequence.
struct BatchRun {
    forwards: Vec<Forward>,
    values: Vec<Option<Vec<LayerValues>>>,
    head_outputs: Vec<Option<HeadOutputs>>,
    /// Each sequence's summary, when [`Extras::summary`] asked for one.
    summaries: Vec<Option<AttentionSummary>>,
    /// Each sequence's token-mixing matrices (layer number, `[heads, n, n]`), when
    /// [`Extras::mixing`] asked for them.
    mixing: Vec<Option<LayerMixing>>,
}

/// One sequence's token-mixing matrices: each linear-attention layer's number and its
/// `[heads, n, n]` matrices.
type LayerMixing = Vec<(usize, Vec<f32>)>;

/// What [`Model::encode_generated`] generates before it captures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GenerateOptions {
    /// The most tokens to generate (fewer when an EOS token comes first).
    pub max_new_tokens: usize,
    /// Wrap the text in the checkpoint's chat template, as one user message with the
    /// assistant's turn opened.
    pub chat: bool,
}

/// A loaded model: its family's network with weights, its tokenizer and description.
pub struct Model {
    info: ModelInfo,
    /// Its family, whose quirks say what the shared code does differently for it.
    family: &'static Family,
    network: std::sync::Arc<dyn Network>,
    tokenizer: TextTokenizer,
    /// The target side's tokenizer where it differs from the source's (Marian's target.spm).
    target_tokenizer: Option<TextTokenizer>,
    /// EOS tokens and chat template (decoders).
    generation: GenerationConfig,
    /// The tokenizer's `model_max_length` (tokenizer_config.json), when it says.
    model_max_length: Option<usize>,
    /// A vision model's image processor (preprocessor_config.json).
    image_processor: Option<crate::pixels::ImageProcessor>,
    /// A speech model's decoding and feature settings.
    speech: Option<speech::SpeechConfig>,
    /// The full path of a local folder or file the model was loaded from (`None`: a hub
    /// model), which [`Model::with_full_path`] makes its id.
    location: Option<String>,
    /// The store it was found in by name (`ollama:NAME`), and what the store keeps beside it.
    store: Option<Box<StoreModel>>,
    /// Whether it was read from a GGUF file (a picture then asks for its projector file).
    gguf: bool,
    /// Why the projector its store keeps beside it was not joined (a type not read here, or
    /// one made for another model): it then runs as the text model, and a picture is refused
    /// with this.
    projector_problem: Option<std::sync::Arc<Error>>,
}

/// The GGUF file `model` names (a path ending in `.gguf` that is not a folder), which
/// [`Model::load`] reads with [`Model::from_gguf`]; `None` for a folder or a hub id.
pub fn gguf_file(model: &str) -> Option<&Path> {
    let path = Path::new(model);
    (path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gguf"))
        && !path.is_dir())
    .then_some(path)
}

/// What [`Model::from_gguf_within`] checks of an open GGUF file before it reads a tensor: its
/// hyper-parameters, a family that reads its architecture, that family's config, and the memory
/// its weights take (against `max_memory`). [`catalog`] asks the same of the files it lists.
pub(crate) fn gguf_checks(
    file: &gguf::GgufFile,
    origin: &str,
    max_memory: Option<u64>,
) -> Result<
    (
        gguf::DecoderParams,
        &'static Family,
        Box<dyn blocks::family::GgufConfig>,
    ),
    Error,
> {
    let params = file.decoder_params()?;
    let (family, reader) = registry::gguf_family(&params.architecture, origin)?;
    let config = (reader.config)(&params, origin)?;
    // Only the tensors the network is built from are read; its matrices stay in the file, in
    // their block format, and its norms and biases are dequantised.
    let used = |name: &str| gguf::hf_tensor_name_for(&params.architecture, name).is_some();
    file.check_memory(used, gguf::Representation::InPlace, max_memory)?;
    Ok((params, family, config))
}

/// A speech model's decoding tables (the 8-bit screen of its head) made on a thread of their
/// own while the caller goes on (decoding the recording, computing its spectrogram: work for
/// one core of the two this project's machines have). Made when first needed otherwise: a
/// thread that cannot start changes nothing but when.
fn prepare_in_background(network: &std::sync::Arc<dyn Network>) {
    if network.speech().is_none() {
        return;
    }
    let network = std::sync::Arc::clone(network);
    let _ = std::thread::Builder::new()
        .name("attnviz-prepare".into())
        .spawn(move || {
            // On a pool of its own: the caller's pool may have one thread, which then waits
            // for these tables (`--threads 1`) and could never run their parallel parts.
            if let Ok(pool) = rayon::ThreadPoolBuilder::new().num_threads(1).build() {
                pool.install(|| {
                    if let Some(speech) = network.speech() {
                        speech.prepare_decoding();
                    }
                });
            }
        });
}

/// A speech model's settings: generation_config.json (config.json's fields where it has none)
/// and preprocessor_config.json (transformers' defaults without one).
fn speech_config(files: &ModelFiles, network: &dyn Network) -> Result<speech::SpeechConfig, Error> {
    let (layers, heads) = network
        .seq2seq()
        .map(|n| {
            let d = n.decoder_architecture();
            (d.layers, d.heads)
        })
        .unwrap_or_default();
    let vocab = network.architecture().vocab_size;
    let settings = speech::SpeechSettings::read(&files.config, vocab, layers, heads)?;
    let preprocessor = files.tokenizer_dir.join("preprocessor_config.json");
    let features = if preprocessor.exists() {
        audio::FeatureConfig::from_file(&preprocessor)?
    } else {
        audio::FeatureConfig::default()
    };
    Ok(speech::SpeechConfig { settings, features })
}

impl Model {
    /// Load a model from a local folder, a GGUF file, a model in Ollama's, LM Studio's or
    /// llama.cpp's store named by name (`ollama:NAME[:TAG]`, [`Stores::from_env`]) or a
    /// Hugging Face repo id at `revision`, using the hub settings of the environment
    /// ([`Hub::from_env`]).
    pub fn load(model: &str, revision: &str) -> Result<Model, Error> {
        Self::load_with(model, revision, &Hub::from_env())
    }

    /// [`Model::load`] with explicit hub settings.
    pub fn load_with(model: &str, revision: &str, hub: &Hub) -> Result<Model, Error> {
        Self::load_within(model, revision, hub, None)
    }

    /// [`Model::load_with`], with the weights of a GGUF file checked against `max_memory`
    /// bytes before they are read (see [`Model::from_gguf_within`]).
    pub fn load_within(
        model: &str,
        revision: &str,
        hub: &Hub,
        max_memory: Option<u64>,
    ) -> Result<Model, Error> {
        Self::load_with_projector(model, revision, hub, max_memory, None)
    }

    /// [`Model::load_within`], with a vision-language model's projector file (`projector`,
    /// llama.cpp's `mmproj-*.gguf`: its vision tower and projector) joined to a GGUF text model
    /// ([`Model::from_gguf_pair`]). A model found in a store uses the projector the store keeps
    /// beside it when none is given. Refused for a model not read from a GGUF file.
    pub fn load_with_projector(
        model: &str,
        revision: &str,
        hub: &Hub,
        max_memory: Option<u64>,
        projector: Option<&Path>,
    ) -> Result<Model, Error> {
        if let Some(found) =
            source::stores::resolve(model, &Stores::from_env()).map_err(SourceError::from)?
        {
            return Self::from_store_with(found, max_memory, projector);
        }
        if let Some(path) = gguf_file(model) {
            return Self::from_gguf_pair(path, projector, max_memory);
        }
        if projector.is_some() {
            return Err(InputError::ProjectorNeedsGguf {
                model: model.to_string(),
            }
            .into());
        }
        let files = source::resolve(model, revision, hub)
            .map_err(|e| unsupported_first(e, Path::new(model)))?;
        Self::from_files(&files)
    }

    /// Load the model in a local folder.
    pub fn from_dir(dir: &Path) -> Result<Model, Error> {
        let files = source::from_dir(dir, &dir.display().to_string())
            .map_err(|e| unsupported_first(e, dir))?;
        Self::from_files(&files)
    }

    /// Load a model from its located files.
    pub fn from_files(files: &ModelFiles) -> Result<Model, Error> {
        if formats::ctranslate2::is_model_bin(&files.weights) {
            return Self::from_ctranslate2(files);
        }
        // The tokenizer loads on a thread of its own while the weights are read: reading the
        // weights in place is mostly waiting on page mappings, which leaves a core free.
        let (loaded, tokenizer) = std::thread::scope(|scope| {
            let tokenizer = scope.spawn(|| TextTokenizer::from_dir(&files.tokenizer_dir));
            let loaded = registry::load_family(&files.config, &files.weights);
            let tokenizer = tokenizer
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (loaded, tokenizer)
        });
        let (family, network) = loaded?;
        // A vision model has no tokenizer: its preprocessor_config.json says how an image
        // becomes its input.
        let (tokenizer, image_processor) = match network.vision() {
            Some(_) => (
                TextTokenizer::none(&files.tokenizer_dir),
                Some(vision::image_processor(&files.tokenizer_dir)?),
            ),
            // A vision-language model has both: a tokenizer and an image processor. Without
            // preprocessor_config.json it still reads text alone (tiny-gemma3-mm is saved so);
            // a picture then asks for the file.
            None if network.multimodal().is_some() => {
                let images = files
                    .tokenizer_dir
                    .join("preprocessor_config.json")
                    .exists()
                    .then(|| vision::image_processor(&files.tokenizer_dir))
                    .transpose()?;
                (tokenizer?, images)
            }
            None => (tokenizer?, None),
        };
        let generation = if network.causal_lm().is_some() || network.seq2seq().is_some() {
            GenerationConfig::with_settings(
                &files.config,
                &files.tokenizer_dir,
                tokenizer.settings(),
                network.architecture().vocab_size,
            )?
        } else {
            GenerationConfig::none(&files.tokenizer_dir.display().to_string())
        };
        let mut model = Self::assemble(
            files.id.clone(),
            files.revision.clone(),
            source::display_name(files),
            family,
            network,
            tokenizer,
            generation,
        );
        model.model_max_length = model.tokenizer.settings().model_max_length();
        model.image_processor = image_processor;
        if model.network.speech().is_some() {
            model.speech = Some(speech_config(files, model.network.as_ref())?);
        }
        if files.revision.is_none() {
            // A local folder: named by its name, not by where it is on this machine.
            let path = Path::new(&files.id);
            model.info.id = source::local_name(path);
            model.location = Some(source::full_path(path));
        }
        if let Some(target) = family.quirks.target_tokenizer {
            model.target_tokenizer = target(&files.tokenizer_dir)?;
        }
        Ok(model)
    }

    fn assemble(
        id: String,
        revision: Option<String>,
        name: String,
        family: &'static Family,
        network: Box<dyn Network>,
        tokenizer: TextTokenizer,
        generation: GenerationConfig,
    ) -> Model {
        let network: std::sync::Arc<dyn Network> = network.into();
        prepare_in_background(&network);
        let arch = network.architecture();
        let info = ModelInfo {
            id,
            revision,
            name: Some(name),
            family: arch.family.to_string(),
            layers: arch.layers,
            heads: arch.heads,
            hidden_size: arch.hidden_size,
            head_dim: arch.head_dim,
        };
        Model {
            info,
            family,
            network,
            tokenizer,
            target_tokenizer: None,
            generation,
            model_max_length: None,
            image_processor: None,
            speech: None,
            location: None,
            store: None,
            gguf: false,
            projector_problem: None,
        }
    }

    /// Name the model by the full path of its local folder or file rather than by that
    /// folder's or file's name, when `full`: its [`ModelInfo::id`], which every export writes
    /// (JSON, the report, saved captures, corpus summaries). A hub model keeps its repo id.
    #[must_use]
    pub fn with_full_path(mut self, full: bool) -> Model {
        if let (true, Some(path)) = (full, &self.location) {
            self.info.id.clone_from(path);
        }
        self
    }

    /// Load the GGUF file of a model found in a store ([`source::stores::resolve`]), named by
    /// its name there (`ollama:tiny:latest`), with what the store keeps beside it
    /// ([`Model::store`]); [`Model::from_gguf_within`]'s `max_memory`.
    pub fn from_store(found: StoreModel, max_memory: Option<u64>) -> Result<Model, Error> {
        Self::from_store_with(found, max_memory, None)
    }

    /// [`Model::from_store`] with `projector` instead of the store's (when given); the store's
    /// projector otherwise, when it keeps one beside the model.
    pub fn from_store_with(
        found: StoreModel,
        max_memory: Option<u64>,
        projector: Option<&Path>,
    ) -> Result<Model, Error> {
        let given = projector.is_some();
        let projector = projector.or(found.projector.as_deref());
        let mut model = match Self::from_gguf_pair(&found.gguf, projector, max_memory) {
            // The store's own projector, of a kind not joined here: the text model still runs.
            Err(e) if !given && projector.is_some() && e.is_projector_problem() => {
                let mut model = Self::from_gguf_pair(&found.gguf, None, max_memory)?;
                model.projector_problem = Some(std::sync::Arc::new(e));
                model
            }
            loaded => loaded?,
        };
        model.info.id.clone_from(&found.name);
        model.info.name = Some(found.name.clone());
        model.store = Some(Box::new(found));
        Ok(model)
    }

    /// The store the model was found in by name, and what it keeps beside the model (Ollama's
    /// template, parameters, system prompt and projector); `None` for a model named by path or
    /// repo id.
    pub fn store(&self) -> Option<&StoreModel> {
        self.store.as_deref()
    }

    /// Load a GGUF file of an architecture a family reads (`llama`, `qwen2`): its matrices kept
    /// in their block format in the memory-mapped file (decoded inside the kernels; the token
    /// embeddings row by row, for the tokens run), its norms and biases dequantised to f32 (in
    /// transformers' layout), the tokenizer and chat template from its metadata.
    pub fn from_gguf(path: &Path) -> Result<Model, Error> {
        Self::from_gguf_within(path, None)
    }

    /// [`Model::from_gguf`], refusing before anything is read when the weights would take more
    /// than `max_memory` bytes (`None`: the memory this process may use).
    pub fn from_gguf_within(path: &Path, max_memory: Option<u64>) -> Result<Model, Error> {
        Self::from_gguf_pair(path, None, max_memory)
    }

    /// [`Model::from_gguf_within`], joined with the vision tower and projector of `projector`
    /// (llama.cpp's `mmproj-*.gguf`, [`families::mmproj`]) when given: a vision-language model
    /// whose pictures are prepared as the projector file says. Refused when the projector file
    /// is not one, holds a projector type not read here, goes with another kind of text model or
    /// projects into embeddings of another width.
    pub fn from_gguf_pair(
        path: &Path,
        projector: Option<&Path>,
        max_memory: Option<u64>,
    ) -> Result<Model, Error> {
        let file = gguf::GgufFile::open(path)?;
        let origin = path.display().to_string();
        let mmproj = projector
            .map(|p| families::mmproj::open(p, max_memory))
            .transpose()?;
        let (params, family, config) = gguf_checks(&file, &origin, max_memory)?;
        // The tokenizer is built on a thread of its own while the tensors are read.
        // With a projector the text model is built as its decoder stack, which the projector's
        // network then holds (its vocabulary names the picture tokens, so the join waits for
        // the tokenizer).
        enum Built {
            Text(Box<dyn Network>),
            Stack(Box<decoder::DecoderStack>),
        }
        let (built, tokenizer) = std::thread::scope(|scope| {
            let tokenizer = scope.spawn(|| file.tokenizer());
            let tensors = TensorMap::new(&file, origin.clone());
            let built = match &mmproj {
                None => config.build(&tensors).map(Built::Text),
                Some(_) => config.stack(&tensors).map(|s| Built::Stack(Box::new(s))),
            };
            let tokenizer = tokenizer
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (built, tokenizer)
        });
        let (built, tokenizer) = (built?, tokenizer?);
        let name = source::local_name(path);
        let (network, image_processor) = match (built, &mmproj) {
            (Built::Stack(stack), Some((mm_file, mm))) => {
                let token = |t: &str| tokenizer.tokenizer.token_to_id(t);
                let joined = mm.join(mm_file, *stack, &name, &params, &token)?;
                (joined, Some(mm.image_processor()?))
            }
            (Built::Stack(stack), None) => (stack as Box<dyn Network>, None),
            (Built::Text(network), _) => (network, None),
        };
        let eos_token_ids = tokenizer
            .eos_token_id
            .or(params.eos_token_id)
            .into_iter()
            .collect();
        let generation = GenerationConfig {
            eos_token_ids,
            chat_template: file.chat_template().map_err(|e| match e {
                gguf::GgufError::NoChatTemplate { path } => ChatUnavailable::Missing {
                    origin: path.display().to_string(),
                    searched: "metadata tokenizer.chat_template".to_string(),
                },
                gguf::GgufError::Chat(e) => ChatUnavailable::Invalid(e),
                e => ChatUnavailable::Unreadable(std::sync::Arc::new(e)),
            }),
            ..GenerationConfig::none(&origin)
        };
        // The file states its special tokens by id.
        let named = |id: Option<u32>| id.and_then(|id| tokenizer.token(id)).into_iter().collect();
        let names = tokenize::TokenNames {
            start: named(tokenizer.bos_token_id),
            end: named(tokenizer.eos_token_id),
            pad: named(tokenizer.pad_token_id),
            ordinary: named(tokenizer.unk_token_id),
            other: Vec::new(),
        };
        let mut model = Self::assemble(
            name.clone(),
            None,
            name,
            family,
            network,
            TextTokenizer::with_names(tokenizer.tokenizer.clone(), path.to_path_buf(), &names),
            generation,
        );
        model.location = Some(source::full_path(path));
        model.image_processor = image_processor;
        model.gguf = true;
        Ok(model)
    }

    /// Why the model reads no pictures: a text model read from a GGUF file without its
    /// projector file needs that file; any other text model reads text alone.
    pub(crate) fn image_refusal(&self) -> Error {
        if let Some(problem) = &self.projector_problem {
            InputError::StoreProjector {
                model: self.info.name().to_string(),
                problem: problem.clone(),
            }
            .into()
        } else if self.network.unread_vision_tower() {
            InputError::VisionTowerNotRun {
                model: self.info.name().to_string(),
                family: self.family(),
            }
            .into()
        } else if self.gguf {
            InputError::ImageNeedsProjector {
                model: self.info.name().to_string(),
            }
            .into()
        } else {
            InputError::ImageToText {
                model: self.info.name().to_string(),
                family: self.family(),
            }
            .into()
        }
    }

    /// What the checkpoint says about generating: EOS tokens and the chat template.
    pub fn generation_config(&self) -> &GenerationConfig {
        &self.generation
    }

    /// The checkpoint's chat template, or why there is none.
    fn chat_template(&self) -> Result<&crate::formats::gguf::ChatTemplate, Error> {
        self.generation
            .chat_template
            .as_ref()
            .map_err(|why| match why {
                ChatUnavailable::Missing { origin, searched } => Error::NoChatTemplate {
                    origin: origin.clone(),
                    searched: searched.clone(),
                },
                ChatUnavailable::Invalid(why) => InputError::Chat(why.clone()).into(),
                ChatUnavailable::Unreadable(e) => InputError::ChatMetadata(e.clone()).into(),
            })
    }

    /// The prompt `text` wrapped in the checkpoint's chat template as one user message, with
    /// the assistant's turn opened (`--chat`); an error when the checkpoint has none.
    pub fn chat_prompt(&self, text: &str) -> Result<String, Error> {
        self.chat_template()?
            .render_user_message(text)
            .map_err(|e| InputError::Chat(e).into())
    }

    /// [`Model::chat_prompt`] for a vision-language model's message, `text` with its pictures
    /// marked by `mark`: the template gets the message as a list of text and image parts, as
    /// a processor's `apply_chat_template` passes it, and writes each picture's mark where it
    /// puts pictures.
    pub fn chat_prompt_with_images(&self, text: &str, mark: &str) -> Result<String, Error> {
        self.chat_template()?
            .render_user_message_with_images(text, mark)
            .map_err(|e| InputError::Chat(e).into())
    }

    /// The layers that mix tokens without a softmax (Qwen3-Next's gated delta layers), each
    /// with the exact token-mixing matrix it applies to its values for `ids`; empty for a model
    /// whose every layer is softmax attention.
    pub fn token_mixing(&self, ids: &[u32]) -> Result<Vec<TokenMixing>, Error> {
        let arch = self.network.architecture();
        check_input(arch, 0, ids, &vec![0; ids.len()])?;
        Ok(self.network.token_mixing(ids))
    }

    /// A hybrid model's layers that mix tokens without a softmax, in words: `layers 0, 2 are
    /// gated delta token mixing, not probabilities`; `None` where every layer is attention.
    pub fn non_softmax_note(&self) -> Option<String> {
        self.network.non_softmax_layers().map(|(kind, layers)| {
            format!(
                "layers {} are {kind} token mixing, not probabilities",
                crate::attention::layer_list(&layers)
            )
        })
    }

    /// A hybrid model's token-mixing layers and their heads (`(layers, heads)`), whose
    /// matrices a run that captures every layer keeps beside the attention; `None` where every
    /// layer is attention.
    pub fn mixing_shape(&self) -> Option<(usize, usize)> {
        self.network
            .non_softmax_layers()
            .map(|(_, layers)| (layers.len(), self.network.mixing_heads()))
    }

    /// The model's number of each captured layer where the model captures only some of its
    /// layers (Qwen3-Next: its full-attention layers); `None`: captured layer `l` is the
    /// model's layer `l`.
    pub fn captured_layer_numbers(&self) -> Option<Vec<usize>> {
        self.network.captured_layer_numbers().map(<[usize]>::to_vec)
    }

    /// The logits `[vocab]` a decoder gives for the token after `ids`.
    pub fn next_token_logits(&self, ids: &[u32]) -> Result<Vec<f32>, Error> {
        let arch = self.network.architecture();
        let lm = self.network.causal_lm().ok_or_else(|| {
            Error::from(InputError::EncoderPredicts {
                model: self.info.name().to_string(),
                family: arch.family,
            })
        })?;
        check_input(arch, 0, ids, &vec![0; ids.len()])?;
        let mut cache = lm.new_cache(ids.len());
        lm.step(ids, &mut cache)
    }

    /// Greedy generation of up to `max_new_tokens` after `prompt` (token ids), with a KV cache,
    /// stopping after an EOS token; `progress` is told how many tokens are done after each.
    pub fn generate(
        &self,
        prompt: &[u32],
        max_new_tokens: usize,
        progress: &mut (dyn FnMut(usize) + Send),
    ) -> Result<Generation, Error> {
        self.generate_from(prompt, None, max_new_tokens, progress)
    }

    /// [`Model::generate`] with the rows of `inserted` (indices into `prompt`) given their
    /// embeddings (a vision-language model's image tokens).
    pub(crate) fn generate_from(
        &self,
        prompt: &[u32],
        inserted: Option<&Inserted>,
        max_new_tokens: usize,
        progress: &mut (dyn FnMut(usize) + Send),
    ) -> Result<Generation, Error> {
        let arch = self.network.architecture();
        let Some(lm) = self.network.causal_lm() else {
            return Err(Error::from(InputError::EncoderGenerates {
                model: self.info.name().to_string(),
                family: arch.family,
            }));
        };
        check_input(arch, 0, prompt, &vec![0; prompt.len()])?;
        let longest = self.max_positions();
        if prompt.len() + max_new_tokens > longest {
            return Err(Error::PromptTooLong {
                tokens: prompt.len(),
                new: max_new_tokens,
                longest,
            });
        }
        // The cache is made when the first step runs (no step runs for 0 new tokens).
        let mut cache = None;
        // The prompt runs in the first step: it takes the inserted rows.
        let mut inserted = inserted;
        let mut step = |ids: &[u32]| {
            let cache = cache.get_or_insert_with(|| lm.new_cache(prompt.len() + max_new_tokens));
            lm.step_with(ids, inserted.take(), cache)
        };
        // One token's forward pass is hundreds of short parallel steps: run them from a pool
        // thread (see `on_pool`).
        crate::threads::on_pool(|| {
            generate::greedy(
                prompt,
                max_new_tokens,
                &self.generation.eos_token_ids,
                (None, None),
                &mut step,
                progress,
            )
        })
    }

    /// Which model this is, and its shape.
    pub fn info(&self) -> &ModelInfo {
        &self.info
    }

    /// The network's shape in family-independent terms: family, layers, heads, key/value
    /// heads and the query-head → key/value-head map, mask kind, limits.
    pub fn architecture(&self) -> &Architecture {
        self.network.architecture()
    }

    /// The model family's name (`RoBERTa`).
    pub fn family(&self) -> &'static str {
        self.network.architecture().family
    }

    /// Whether the model can encode sentence pairs (BERT with a single segment type cannot).
    pub fn accepts_pairs(&self) -> bool {
        self.network.architecture().accepts_pairs()
    }

    /// The longest input the model takes, in tokens (with its special tokens): its positions
    /// and the tokenizer's `model_max_length`.
    pub fn max_positions(&self) -> usize {
        let longest = self.network.architecture().longest_input();
        self.model_max_length.map_or(longest, |m| m.min(longest))
    }

    /// The model's tokenizer.
    pub fn tokenizer(&self) -> &TextTokenizer {
        &self.tokenizer
    }

    /// Run one sequence through the encoder.
    pub fn forward(
        &self,
        input_ids: &[u32],
        token_type_ids: &[u32],
        capture_query_key: bool,
    ) -> Result<Forward, Error> {
        let mut out = self.forward_batch(&[(input_ids, token_type_ids)], capture_query_key)?;
        Ok(out.remove(0))
    }

    /// Run several sequences at once, right-padded to the longest with padding masked out; each
    /// result covers only its own tokens and equals what [`Model::forward`] gives for it alone
    /// (up to float rounding).
    pub fn forward_batch(
        &self,
        batch: &[(&[u32], &[u32])],
        capture_query_key: bool,
    ) -> Result<Vec<Forward>, Error> {
        self.forward_batch_with(batch, capture_query_key, None, None)
    }

    /// [`Model::forward_batch`] capturing only `layers` (ascending; `None`: all), refused when
    /// the capture would need more than `max_memory` bytes (`None`:
    /// [`default_capture_budget`]).
    pub fn forward_batch_with(
        &self,
        batch: &[(&[u32], &[u32])],
        capture_query_key: bool,
        layers: Option<&[usize]>,
        max_memory: Option<u64>,
    ) -> Result<Vec<Forward>, Error> {
        let out = self.forward_batch_into(
            batch,
            capture_query_key,
            ValueTerms::Off,
            layers,
            max_memory,
            None,
            None,
        )?;
        Ok(out.forwards)
    }

    /// [`Model::forward_batch_with`], also keeping each sequence's [`LayerValues`] (per
    /// captured layer) when `values` asks for them.
    #[allow(clippy::type_complexity)]
    pub fn forward_batch_values(
        &self,
        batch: &[(&[u32], &[u32])],
        capture_query_key: bool,
        values: bool,
        layers: Option<&[usize]>,
        max_memory: Option<u64>,
    ) -> Result<(Vec<Forward>, Vec<Option<Vec<LayerValues>>>), Error> {
        let values = if values {
            ValueTerms::Norms
        } else {
            ValueTerms::Off
        };
        let out = self.forward_batch_into(
            batch,
            capture_query_key,
            values,
            layers,
            max_memory,
            None,
            None,
        )?;
        Ok((out.forwards, out.values))
    }

    /// [`Model::forward_batch_values`], or with a `sink` (one sequence only) each captured
    /// layer streamed to it as soon as it is computed: the results then hold no weights, and
    /// the budget is checked for one layer's buffer. `values` may ask for the head outputs at
    /// each sequence's last position too ([`Extras::head_outputs`]).
    #[allow(clippy::too_many_arguments)]
    fn forward_batch_into(
        &self,
        batch: &[(&[u32], &[u32])],
        capture_query_key: bool,
        values: impl Into<Extras>,
        layers: Option<&[usize]>,
        max_memory: Option<u64>,
        sink: Option<&mut dyn LayerSink>,
        inserted: Option<&Inserted>,
    ) -> Result<BatchRun, Error> {
        let Extras {
            values,
            head_outputs,
            summary,
            mixing,
        } = values.into();
        // A hybrid network numbers its captured layers among themselves: the sink gets the
        // model's numbers, as the views of a capture kept in memory do.
        let mut renumbered;
        let sink: Option<&mut dyn LayerSink> = match (sink, self.network.captured_layer_numbers()) {
            (Some(inner), Some(numbers)) => {
                renumbered = blocks::capture::Renumbered {
                    inner,
                    numbers: numbers.to_vec(),
                };
                Some(&mut renumbered)
            }
            (sink, _) => sink,
        };
        // Mixing matrices only where every layer is captured and kept.
        let mixing = mixing
            && layers.is_none()
            && sink.is_none()
            && summary.is_none()
            && self.network.non_softmax_layers().is_some();
        if (sink.is_some() || summary.is_some()) && batch.len() != 1 {
            return Err(InputError::StreamedBatch.into());
        }
        if (sink.is_some() || summary.is_some()) && values.any() {
            return Err(InputError::StreamedValues.into());
        }
        let capture_query_key = capture_query_key && sink.is_none() && summary.is_none();
        if batch.is_empty() {
            return Ok(BatchRun {
                forwards: Vec::new(),
                values: Vec::new(),
                head_outputs: Vec::new(),
                summaries: Vec::new(),
                mixing: Vec::new(),
            });
        }
        let arch = self.network.architecture();
        for (i, (ids, types)) in batch.iter().enumerate() {
            check_input(arch, i, ids, types)?;
        }
        let lengths: Vec<usize> = batch.iter().map(|(ids, _)| ids.len()).collect();
        let n = *lengths.iter().max().unwrap_or(&0);
        let pad = |rows: Vec<&[u32]>| -> Vec<u32> {
            let mut flat = Vec::with_capacity(rows.len() * n);
            for row in rows {
                flat.extend_from_slice(row);
                flat.resize(flat.len() + n - row.len(), 0);
            }
            flat
        };
        let all: Vec<usize>;
        let layers = match layers {
            Some(l) => {
                self.check_layers(l)?;
                l
            }
            None => {
                all = (0..arch.layers).collect();
                &all
            }
        };
        match &summary {
            None => {
                let kept = if sink.is_some() { 1 } else { layers.len() };
                self.check_capture_size(&lengths, capture_query_key, kept, mixing, max_memory)?;
            }
            Some(spec) => self.check_summary_size(lengths[0], layers.len(), spec, max_memory)?,
        }
        let ids = pad(batch.iter().map(|(ids, _)| *ids).collect());
        let types = pad(batch.iter().map(|(_, t)| *t).collect());
        let mut captures: Vec<SequenceCapture> = match (sink, &summary) {
            (_, Some(spec)) => vec![SequenceCapture::summarising(
                arch,
                lengths[0],
                lengths[0],
                layers,
                spec,
                self.network.attention_sinks(),
            )],
            (Some(sink), None) => {
                vec![
                    SequenceCapture::streaming(arch, lengths[0], lengths[0], layers, sink)
                        .with_sinks(self.network.attention_sinks()),
                ]
            }
            (None, None) => lengths
                .iter()
                .map(|&len| {
                    let c = SequenceCapture::for_layers(arch, len, len, capture_query_key, layers);
                    let c = if mixing { c.with_mixing() } else { c };
                    if values.any() {
                        c.with_values(arch, values == ValueTerms::NormsAndAlti)
                    } else {
                        c
                    }
                })
                .collect(),
        };
        // Only a network that takes its heads apart fills them (the others ignore the ask).
        let head_outputs = head_outputs && self.network.interventions().is_some();
        if head_outputs {
            captures = captures
                .into_iter()
                .zip(&lengths)
                .map(|(c, &len)| c.with_head_outputs(arch, len - 1))
                .collect();
        }
        let hidden = self.network.forward(
            &Batch {
                ids: &ids,
                types: &types,
                lengths: &lengths,
                tokens: n,
                inserted,
            },
            &mut captures,
        );
        let info = &self.info;
        for capture in &mut captures {
            if capture.is_streaming() {
                // Each layer was checked as it was handed over.
                capture.finish().map_err(|e| match e {
                    blocks::capture::StreamError::Sink(e) => Error::Sink(e),
                    blocks::capture::StreamError::Rows(e) => Error::Attention(e),
                })?;
            } else if summary.is_some() {
                // Summarised: the kernel kept no probabilities to check.
            } else {
                let n = capture.queries();
                if self.network.attention_sinks() {
                    validate::check_rows_with_sinks(
                        &capture.probs,
                        layers.len(),
                        info.heads,
                        n,
                        n,
                    )?;
                } else {
                    validate::check_rows(&capture.probs, layers.len(), info.heads, n)?;
                }
            }
        }
        let summaries: Vec<Option<AttentionSummary>> =
            captures.iter_mut().map(SequenceCapture::summary).collect();

        // The captures already have each sequence's own size; the hidden state is cut here.
        let hidden_size = arch.hidden_size;
        let kept: Vec<Option<Vec<LayerValues>>> = captures
            .iter_mut()
            .map(|c| c.values.take().and_then(|v| v.captured(layers)))
            .collect();
        let heads: Vec<Option<HeadOutputs>> = captures
            .iter_mut()
            .map(|c| c.head_outputs.take().map(|h| h.outputs))
            .collect();
        if values.any() && kept.iter().any(Option::is_none) {
            return Err(ForwardError::NoValueVectors {
                family: arch.family,
            }
            .into());
        }
        let mixing: Vec<Option<LayerMixing>> =
            captures.iter_mut().map(|c| c.mixing.take()).collect();
        let results = captures
            .into_iter()
            .enumerate()
            .map(|(s, capture)| {
                let len = capture.queries();
                // A streamed capture's buffer held one layer at a time, all handed over.
                let streamed = capture.is_streaming() || summary.is_some();
                Forward {
                    weights: if streamed { Vec::new() } else { capture.probs },
                    hidden: hidden[s * n * hidden_size..][..len * hidden_size].to_vec(),
                    query_key: capture.query_key.map(|(queries, keys)| QueryKey {
                        queries,
                        keys,
                        scale: None,
                    }),
                    routing: capture.routing,
                }
            })
            .collect();
        Ok(BatchRun {
            forwards: results,
            values: kept,
            head_outputs: heads,
            summaries,
            mixing,
        })
    }

    /// Check a list of layers to capture: ascending, without repeats, each a layer of the model.
    pub fn check_layers(&self, layers: &[usize]) -> Result<(), Error> {
        let n = self.info.layers;
        if layers.is_empty() {
            return Err(InputError::NoLayers.into());
        }
        if let Some(&l) = layers.iter().find(|&&l| l >= n) {
            return Err(InputError::LayerOutOfRange {
                layer: l,
                model: self.info.name().to_string(),
                layers: n,
            }
            .into());
        }
        if layers.windows(2).any(|w| w[0] >= w[1]) {
            return Err(InputError::LayersOutOfOrder {
                layers: layers.to_vec(),
            }
            .into());
        }
        Ok(())
    }

    /// The capture's own numbers of the model's layers `layers`: themselves, except in a
    /// model that captures some of its layers only (Qwen3-Next's full-attention layers), where
    /// each must be one of those, and is its place among them.
    fn capture_slots(&self, layers: &[usize]) -> Result<Vec<usize>, Error> {
        let Some(map) = self.network.captured_layer_numbers() else {
            return Ok(layers.to_vec());
        };
        layers
            .iter()
            .map(|&layer| match map.iter().position(|&m| m == layer) {
                Some(slot) => Ok(slot),
                None => {
                    let total = map.len()
                        + self
                            .network
                            .non_softmax_layers()
                            .map_or(0, |(_, l)| l.len());
                    if layer >= total {
                        return Err(InputError::LayerOutOfRange {
                            layer,
                            model: self.info.name().to_string(),
                            layers: total,
                        }
                        .into());
                    }
                    Err(InputError::NotAttentionLayer {
                        layer,
                        model: self.info.name().to_string(),
                        kind: self
                            .network
                            .non_softmax_layers()
                            .map_or("linear", |(k, _)| k),
                        attention: crate::attention::layer_list(map),
                    }
                    .into())
                }
            })
            .collect()
    }

    /// The bytes a capture of `layers` layers takes for sequences of `lengths` tokens, or
    /// `None` when the count overflows.
    pub fn capture_bytes(&self, lengths: &[usize], layers: usize, query_key: bool) -> Option<u64> {
        let info = &self.info;
        let shape = validate::CaptureShape {
            layers,
            heads: info.heads,
            head_dim: info.head_dim,
            query_key,
        };
        validate::capture_bytes(shape, lengths)
    }

    /// Refuse a summary of `layers` layers over `tokens` tokens that would take more than
    /// `max_memory` bytes: per query and head the top keys (8 bytes each), sink and entropy;
    /// per head the pooled map and the distance bins (f64 while summing); the full rows asked
    /// for; and the working rows of the attention kernel's tasks.
    fn check_summary_size(
        &self,
        tokens: usize,
        layers: usize,
        spec: &SummarySpec,
        max_memory: Option<u64>,
    ) -> Result<(), Error> {
        let heads = self.info.heads;
        let pool = attention::summary::pool_size(tokens);
        let cells = tokens.div_ceil(pool).pow(2);
        let per_head = |n: usize| -> Option<usize> {
            let per_query = spec.top_k.checked_mul(8)?.checked_add(8)?;
            n.checked_mul(per_query)?
                .checked_add(cells * 8 + 64 * 8)?
                .checked_add(spec.rows.len().checked_mul(n)?.checked_mul(4)?)
        };
        // The kernel's tasks each hold a block of at most 256 rows.
        let working = rayon::current_num_threads().max(1) * 256 * tokens * 4;
        let needs = per_head(tokens)
            .and_then(|b| {
                b.checked_mul(heads)?
                    .checked_mul(layers)?
                    .checked_add(working)
            })
            .map(|b| b as u64);
        let budget = max_memory.unwrap_or_else(default_capture_budget);
        if needs.is_some_and(|b| b <= budget) {
            return Ok(());
        }
        Err(Error::TooBig(CaptureTooBig {
            capture: Capture::Summary {
                layers,
                heads,
                tokens,
                top_k: spec.top_k,
            },
            needs,
            budget,
            budget_given: max_memory.is_some(),
        }))
    }

    /// Refuse a batch whose captured attention would take more than `max_memory` bytes (or
    /// overflows), before allocating it: one line that says how much, and what to do.
    /// With `mixing`, a hybrid model's token-mixing matrices count too (per linear-attention
    /// layer and value head, tokens × tokens, like the attention).
    fn check_capture_size(
        &self,
        lengths: &[usize],
        query_key: bool,
        layers: usize,
        mixing: bool,
        max_memory: Option<u64>,
    ) -> Result<(), Error> {
        let tokens = lengths.iter().max().copied().unwrap_or(0);
        let budget = max_memory.unwrap_or_else(default_capture_budget);
        let mixing = self.mixing_shape().filter(|_| mixing);
        let needs = self
            .capture_bytes(lengths, layers, query_key)
            .and_then(|b| {
                let Some((l, h)) = mixing else {
                    return Some(b);
                };
                lengths.iter().try_fold(b, |acc, &n| {
                    acc.checked_add(attention::mixing::mixing_bytes(l, h, n)?)
                })
            });
        if needs.is_some_and(|b| b <= budget) {
            return Ok(());
        }
        Err(Error::TooBig(CaptureTooBig {
            capture: Capture::SelfAttention {
                layers,
                heads: self.info.heads,
                tokens,
                mixing,
            },
            needs,
            budget,
            budget_given: max_memory.is_some(),
        }))
    }

    /// Tokenize `text` (and `pair`) and run it through the model: the [`Attention`] of every
    /// layer and head, with the tokens, segments and word ids that label it.
    pub fn encode(
        &self,
        text: &str,
        pair: Option<&str>,
        opts: &EncodeOptions,
    ) -> Result<Encoding, Error> {
        self.encode_into(text, pair, opts, None)
    }

    /// [`Model::encode`], each captured layer handed to `sink` as soon as it is computed
    /// (when given): the encoding's attention then holds the units and no layer (its
    /// `model.layers` is 0), and no query/key vectors.
    pub fn encode_into(
        &self,
        text: &str,
        pair: Option<&str>,
        opts: &EncodeOptions,
        sink: Option<&mut dyn LayerSink>,
    ) -> Result<Encoding, Error> {
        if self.network.vision().is_some() {
            return Err(InputError::TextToVision {
                model: self.info.name().to_string(),
                family: self.family(),
            }
            .into());
        }
        if pair.is_some() && self.architecture().mask == Mask::Causal {
            return Err(Error::PairOnDecoder {
                model: self.info.name().to_string(),
                family: self.family().to_string(),
            });
        }
        let enc = self
            .tokenizer
            .encode(text, pair, self.max_positions(), opts.truncate)?;
        // A text cut to the byte limit is recorded as analysed, not as given.
        let limit = tokenize::byte_limit(self.max_positions());
        let text = tokenize::cut_to_bytes(text, limit);
        let pair = pair.map(|p| tokenize::cut_to_bytes(p, limit));
        self.encode_tokens_with(text, pair, enc, opts, 0, sink, None)
    }

    /// [`Model::encode`] for input already tokenized by [`Model::tokenizer`] (corpus mode
    /// tokenizes each line once, to check it, before handing it to a worker).
    pub fn encode_tokens(
        &self,
        text: &str,
        pair: Option<&str>,
        enc: tokenize::Encoded,
        capture_query_key: bool,
    ) -> Result<Encoding, Error> {
        let opts = EncodeOptions {
            capture_query_key,
            ..EncodeOptions::default()
        };
        self.encode_tokens_with(text, pair, enc, &opts, 0, None, None)
    }

    /// Run tokenized input (of which the tokens from `prompt_len` on, when it is above 0, were
    /// generated, and the rows of `inserted` get given embeddings) and label its attention.
    #[allow(clippy::too_many_arguments)]
    fn encode_tokens_with(
        &self,
        text: &str,
        pair: Option<&str>,
        enc: tokenize::Encoded,
        opts: &EncodeOptions,
        prompt_len: usize,
        sink: Option<&mut dyn LayerSink>,
        inserted: Option<&Inserted>,
    ) -> Result<Encoding, Error> {
        // Segment ids reach the model only where transformers passes them (see
        // `Architecture::tokenizer_types`); the views still get the tokenizer's.
        let zeros;
        let types = if self.architecture().tokenizer_types {
            &enc.type_ids
        } else {
            zeros = vec![0; enc.ids.len()];
            &zeros
        };
        let slots = match &opts.layers {
            Some(l) => Some(self.capture_slots(l)?),
            None => None,
        };
        let layers = slots.as_deref();
        let streamed = sink.is_some() || opts.summary.is_some();
        let mut run = self.forward_batch_into(
            &[(&enc.ids, types)],
            opts.capture_query_key,
            Extras {
                values: ValueTerms::of(opts),
                head_outputs: opts.head_outputs,
                summary: opts.summary.clone(),
                mixing: true,
            },
            layers,
            opts.max_memory,
            sink,
            inserted,
        )?;
        let (out, values) = (run.forwards.remove(0), run.values.remove(0));
        let head_outputs = run.head_outputs.remove(0);
        let summary = run.summaries.remove(0);
        let n = enc.ids.len();
        let router = router_of(&out.routing, &enc.tokens);
        let mixing = run.mixing.remove(0).map(|layers| attention::Mixing {
            kind: self
                .network
                .non_softmax_layers()
                .map_or("linear", |(k, _)| k)
                .to_string(),
            heads: self.network.mixing_heads(),
            tokens: enc.tokens.clone(),
            layers: layers
                .into_iter()
                .map(|(layer, weights)| attention::MixingLayer { layer, weights })
                .collect(),
        });
        let mut units = Units::tokens(
            enc.tokens,
            enc.ids,
            enc.type_ids,
            enc.segments,
            enc.roles,
            enc.word_ids,
            enc.surfaces,
        );
        if prompt_len > 0 {
            units.generated = (0..n).map(|i| i >= prompt_len).collect();
        }
        // Streamed: every layer went to the sink, none is kept.
        let numbers = match (streamed, layers) {
            (true, _) => Vec::new(),
            (false, Some(layers)) => layers.to_vec(),
            (false, None) => (0..self.info.layers).collect(),
        };
        // A hybrid model captures some of its layers only (Qwen3-Next's full-attention ones):
        // the views number them as the model does.
        let numbers = match self.network.captured_layer_numbers() {
            Some(model) => numbers.iter().map(|&l| model[l]).collect(),
            None => numbers,
        };
        let info = ModelInfo {
            layers: numbers.len(),
            ..self.info.clone()
        };
        let attention = Attention::new(
            info,
            text.to_string(),
            pair.map(str::to_string),
            units,
            out.weights,
        )
        .and_then(|a| a.with_layer_numbers(numbers))
        .and_then(|a| self.describe(a, out.query_key))
        .and_then(|a| a.with_router(router))
        .map_err(ForwardError::Shape)?
        // A learned sink's share of each row is what the row leaves (gpt-oss).
        .with_sinks_from_rows(self.network.attention_sinks());
        let mut attention = attention;
        attention.non_softmax = self.network.non_softmax_layers().map(|(kind, layers)| {
            crate::attention::NonSoftmaxLayers {
                kind: kind.to_string(),
                layers,
                mixing: mixing.map(std::sync::Arc::new),
            }
        });
        Ok(Encoding {
            attention,
            hidden: out.hidden,
            truncated_from: enc.truncated_from,
            bytes_cut: enc.bytes_cut,
            generation: None,
            values,
            head_outputs,
            summary,
        })
    }

    /// Generate up to `generate.max_new_tokens` tokens greedily after `text` (wrapped in the
    /// checkpoint's chat template with `generate.chat`), then capture the attention over prompt
    /// and generated tokens (these marked [`Units::generated`]) in one pass over the whole
    /// sequence. The capture's size is checked before generating. `progress` is told how many
    /// tokens are done after each.
    pub fn encode_generated(
        &self,
        text: &str,
        opts: &EncodeOptions,
        generate: GenerateOptions,
        progress: &mut (dyn FnMut(usize) + Send),
    ) -> Result<Encoding, Error> {
        self.encode_generated_into(text, opts, generate, progress, None)
    }

    /// [`Model::encode_generated`], the final capture streamed to `sink` when given (as
    /// [`Model::encode_into`]).
    pub fn encode_generated_into(
        &self,
        text: &str,
        opts: &EncodeOptions,
        generate: GenerateOptions,
        progress: &mut (dyn FnMut(usize) + Send),
        sink: Option<&mut dyn LayerSink>,
    ) -> Result<Encoding, Error> {
        let arch = self.architecture();
        if self.network.causal_lm().is_none() {
            return Err(InputError::EncoderChats {
                model: self.info.name().to_string(),
                family: arch.family,
            }
            .into());
        }
        let new = generate.max_new_tokens;
        let longest = self.max_positions();
        if new >= longest {
            return Err(InputError::NoRoomForPrompt { new, longest }.into());
        }
        // The prompt leaves room for the generated tokens (and with --truncate is cut to it).
        let room = longest - new;
        let prompt_text = if generate.chat {
            self.chat_prompt(text)?
        } else {
            text.to_string()
        };
        let enc = if generate.chat {
            self.tokenizer
                .encode_without_specials(&prompt_text, room, opts.truncate)
        } else {
            self.tokenizer
                .encode(&prompt_text, None, room, opts.truncate)
        };
        let enc = enc.map_err(|e| match e {
            tokenize::Error::TooLong { tokens, .. } if new > 0 => Error::PromptTooLong {
                tokens,
                new,
                longest,
            },
            other => other.into(),
        })?;
        let prompt_len = enc.ids.len();
        let layers = match sink {
            Some(_) => 1,
            None => opts.layers.as_ref().map_or(self.info.layers, Vec::len),
        };
        self.check_capture_size(
            &[prompt_len + new],
            opts.capture_query_key && sink.is_none(),
            layers,
            sink.is_none() && opts.layers.is_none() && opts.summary.is_none(),
            opts.max_memory,
        )?;
        let generation = self.generate(&enc.ids, new, progress)?;
        let full = self.tokenizer.continuation(&enc, generation.generated());
        let limit = tokenize::byte_limit(room);
        let recorded = tokenize::cut_to_bytes(&prompt_text, limit).to_string();
        let mut encoding =
            self.encode_tokens_with(&recorded, None, full, opts, prompt_len, sink, None)?;
        encoding.generation = Some(generation);
        Ok(encoding)
    }
}

/// The routers' decisions of a mixture-of-experts network's forward pass over `tokens`, as the
/// attention carries them; `None` for a dense network.
fn router_of(routing: &[(usize, blocks::experts::Routing)], tokens: &[String]) -> Option<Router> {
    let (_, first) = routing.first()?;
    Some(Router {
        experts: first.experts,
        top_k: first.top_k,
        renormalised: first.renormalised,
        tokens: tokens.to_vec(),
        layers: routing
            .iter()
            .map(|(layer, r)| RouterLayer {
                layer: *layer,
                probs: r.probs.clone(),
                chosen: r.chosen.clone(),
                weights: r.weights.clone(),
            })
            .collect(),
    })
}

impl Model {
    /// `attention` with what the network computed: its mask and each layer's sliding window,
    /// its query-head → key/value-head map, and the query/key vectors.
    fn describe(
        &self,
        attention: Attention,
        query_key: Option<QueryKey>,
    ) -> Result<Attention, crate::attention::ShapeError> {
        let arch = self.architecture();
        let windows = attention
            .layer_numbers()
            .iter()
            .map(|&l| arch.window(l))
            .collect();
        attention
            .with_mask(arch.mask)
            .with_windows(windows)?
            .with_positions(arch.positions)
            .with_kv_heads(arch.kv_head.clone())?
            .with_query_key(query_key)
    }
}

/// Refuse input the network cannot take, with a message that says why.
fn check_input(arch: &Architecture, index: usize, ids: &[u32], types: &[u32]) -> Result<(), Error> {
    if ids.is_empty() {
        return Err(InputError::NoTokens { index }.into());
    }
    if ids.len() != types.len() {
        return Err(InputError::TypesMismatch {
            ids: ids.len(),
            types: types.len(),
            index,
        }
        .into());
    }
    if ids.len() > arch.max_positions {
        return Err(Error::TooManyTokens {
            tokens: ids.len(),
            index,
            max: arch.max_positions,
        });
    }
    if let Some(&id) = ids.iter().find(|&&id| id as usize >= arch.vocab_size) {
        return Err(InputError::IdOutsideVocabulary {
            id,
            index,
            vocab: arch.vocab_size,
        }
        .into());
    }
    // A model without segment embeddings ignores the ids.
    if arch.token_types > 0 {
        if let Some(&id) = types.iter().find(|&&t| t as usize >= arch.token_types) {
            return Err(InputError::TypeOutsideSegments {
                id,
                index,
                types: arch.token_types,
            }
            .into());
        }
    }
    Ok(())
}

/// A local folder that lacks a file, whose config.json names a model type attnviz does not
/// run, gets that said (the tokenizer files asked for were only its family's guess).
fn unsupported_first(err: SourceError, dir: &Path) -> Error {
    if matches!(err, SourceError::MissingFile { .. }) {
        if let Some(e) = families::registry::unsupported(&dir.join("config.json")) {
            return e.into();
        }
    }
    err.into()
}
