//! The model: find its files, read its config and weights, tokenize, and run our implementation
//! of the model's family, capturing the attention of every layer and head.
//!
//! Families (BERT, RoBERTa, XLM-R, DistilBERT, ALBERT, ELECTRA) sit behind one seam,
//! [`family::Network`], chosen by config.json's `model_type` ([`family::FAMILIES`]); their shared
//! math is in [`kernels`]. `docs/architecture.md` describes the pipeline and how to add a family.
//!
//! ```no_run
//! use attnviz::model::{EncodeOptions, Model};
//! let model = Model::load("sentence-transformers/all-MiniLM-L6-v2", "main")?;
//! let out = model.encode("The cat sat on the mat.", None, &EncodeOptions::default())?;
//! println!("{} tokens, layer 0 head 0 row 0: {:?}", out.attention.len(), &out.attention.head(0, 0)[..3]);
//! # Ok::<(), attnviz::model::Error>(())
//! ```

pub mod albert;
pub mod bert;
pub mod capture;
pub mod config;
pub mod distilbert;
pub mod electra;
pub mod encoder;
pub mod family;
pub mod gguf;
pub mod kernels;
pub mod layers;
pub mod pickle;
pub mod pytorch;
pub mod roberta;
pub mod source;
pub mod validate;
pub mod weights;

use std::path::Path;

use crate::attention::{Attention, ModelInfo, QueryKey, Units};
use crate::tokenize::{self, TextTokenizer};

pub use bert::BertConfig;
pub use capture::SequenceCapture;
pub use config::ConfigError;
pub use family::{Architecture, Batch, Network};
pub use kernels::Mask;
pub use source::{Hub, ModelFiles, SourceError};
pub use validate::BadRow;
pub use weights::{Checkpoint, WeightsError};

/// Anything that can go wrong loading or running a model. Every variant displays as one line
/// that says what was wrong and what to do.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Finding the model's files.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// Reading config.json.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Reading the weights.
    #[error(transparent)]
    Weights(#[from] WeightsError),
    /// Loading the tokenizer or tokenizing.
    #[error(transparent)]
    Tokenize(#[from] tokenize::Error),
    /// Invalid input to a forward pass.
    #[error("{0}")]
    Input(String),
    /// The captured attention is not a set of probability distributions (the weights overflow
    /// on this input); nothing is written from it.
    #[error(transparent)]
    Attention(#[from] BadRow),
    /// The captured attention would not fit in memory.
    #[error("{0}")]
    TooBig(String),
    /// The tensor computation failed (a bug; the message says where).
    #[error("forward pass failed: {0}")]
    Forward(String),
}

impl From<candle_core::Error> for Error {
    fn from(e: candle_core::Error) -> Self {
        Error::Forward(candle_message(&e))
    }
}

/// A candle error as one line, without the backtrace that candle appends to its Display when
/// `RUST_BACKTRACE` is set.
pub(crate) fn candle_message(e: &candle_core::Error) -> String {
    use candle_core::Error as E;
    let text = match e {
        E::WithBacktrace { inner, .. } => return candle_message(inner),
        E::WithPath { inner, path } => format!("{}: {}", path.display(), candle_message(inner)),
        E::Context { inner, context } => format!("{context}: {}", candle_message(inner)),
        other => other.to_string(),
    };
    text.lines().next().unwrap_or_default().trim().to_string()
}

/// Options for [`Model::encode`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EncodeOptions {
    /// Cut input longer than the model's maximum positions instead of failing.
    pub truncate: bool,
    /// Keep each head's query and key vectors (for the neuron view).
    pub capture_query_key: bool,
}

/// Raw forward outputs for one sequence.
#[derive(Clone, Debug, PartialEq)]
pub struct Forward {
    /// Attention probabilities `[layers, heads, n, n]`, row-major; row = query, column = key.
    pub weights: Vec<f32>,
    /// Last hidden state `[n, hidden]`.
    pub hidden: Vec<f32>,
    /// Query/key vectors `[layers, heads, n, head_dim]`, when asked for.
    pub query_key: Option<QueryKey>,
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
}

/// A loaded model: its family's network with weights, its tokenizer and description.
pub struct Model {
    info: ModelInfo,
    network: Box<dyn Network>,
    tokenizer: TextTokenizer,
}

impl Model {
    /// Load a model from a local folder or a Hugging Face repo id at `revision`, using the hub
    /// settings of the environment ([`Hub::from_env`]).
    pub fn load(model: &str, revision: &str) -> Result<Model, Error> {
        Self::load_with(model, revision, &Hub::from_env())
    }

    /// [`Model::load`] with explicit hub settings.
    pub fn load_with(model: &str, revision: &str, hub: &Hub) -> Result<Model, Error> {
        let files = source::resolve(model, revision, hub)?;
        Self::from_files(&files)
    }

    /// Load the model in a local folder.
    pub fn from_dir(dir: &Path) -> Result<Model, Error> {
        let files = source::from_dir(dir, &dir.display().to_string())?;
        Self::from_files(&files)
    }

    /// Load a model from its located files.
    pub fn from_files(files: &ModelFiles) -> Result<Model, Error> {
        // The tokenizer loads on a thread of its own while the weights are read: reading the
        // weights in place is mostly waiting on page mappings, which leaves a core free.
        let (network, tokenizer) = std::thread::scope(|scope| {
            let tokenizer = scope.spawn(|| TextTokenizer::from_dir(&files.tokenizer_dir));
            let network = family::load(&files.config, &files.weights);
            let tokenizer = tokenizer
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (network, tokenizer)
        });
        let (network, tokenizer) = (network?, tokenizer?);
        let arch = network.architecture();
        let info = ModelInfo {
            id: files.id.clone(),
            revision: files.revision.clone(),
            name: Some(source::display_name(files)),
            family: arch.family.to_string(),
            layers: arch.layers,
            heads: arch.heads,
            hidden_size: arch.hidden_size,
            head_dim: arch.head_dim,
        };
        Ok(Model {
            info,
            network,
            tokenizer,
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

    /// The longest input the model takes, in tokens (with its special tokens).
    pub fn max_positions(&self) -> usize {
        self.network.architecture().max_positions
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
        if batch.is_empty() {
            return Ok(Vec::new());
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
        self.check_capture_size(&lengths, capture_query_key)?;
        let ids = pad(batch.iter().map(|(ids, _)| *ids).collect());
        let types = pad(batch.iter().map(|(_, t)| *t).collect());
        let mut captures: Vec<SequenceCapture> = lengths
            .iter()
            .map(|&len| SequenceCapture::new(arch, len, len, capture_query_key))
            .collect();
        let hidden = self.network.forward(
            &Batch {
                ids: &ids,
                types: &types,
                lengths: &lengths,
                tokens: n,
            },
            &mut captures,
        );
        let info = &self.info;
        for capture in &captures {
            validate::check_rows(&capture.probs, info.layers, info.heads, capture.queries())?;
        }

        // The captures already have each sequence's own size; the hidden state is cut here.
        let hidden_size = arch.hidden_size;
        let results = captures
            .into_iter()
            .enumerate()
            .map(|(s, capture)| {
                let len = capture.queries();
                Forward {
                    weights: capture.probs,
                    hidden: hidden[s * n * hidden_size..][..len * hidden_size].to_vec(),
                    query_key: capture
                        .query_key
                        .map(|(queries, keys)| QueryKey { queries, keys }),
                }
            })
            .collect();
        Ok(results)
    }

    /// Refuse a batch whose captured attention would not fit in this machine's memory (or
    /// whose size overflows), before allocating it.
    fn check_capture_size(&self, lengths: &[usize], query_key: bool) -> Result<(), Error> {
        let info = &self.info;
        let shape = validate::CaptureShape {
            layers: info.layers,
            heads: info.heads,
            head_dim: info.head_dim,
            query_key,
        };
        let tokens = lengths.iter().max().copied().unwrap_or(0);
        let too_big = |needs: String| {
            Error::TooBig(format!(
                "capturing the attention of {} layers × {} heads for {tokens} tokens needs {needs}; use a shorter input",
                info.layers, info.heads
            ))
        };
        let Some(bytes) = validate::capture_bytes(shape, lengths) else {
            return Err(too_big("more bytes than a computer can address".into()));
        };
        if let Some(memory) = validate::physical_memory() {
            if bytes > memory / 4 * 3 {
                return Err(too_big(format!(
                    "{:.1} GB, more than this machine's {:.1} GB of memory can spare",
                    bytes as f64 / 1e9,
                    memory as f64 / 1e9
                )));
            }
        }
        Ok(())
    }

    /// Tokenize `text` (and `pair`) and run it through the model: the [`Attention`] of every
    /// layer and head, with the tokens, segments and word ids that label it.
    pub fn encode(
        &self,
        text: &str,
        pair: Option<&str>,
        opts: &EncodeOptions,
    ) -> Result<Encoding, Error> {
        let enc = self
            .tokenizer
            .encode(text, pair, self.max_positions(), opts.truncate)?;
        // A text cut to the byte limit is recorded as analysed, not as given.
        let limit = tokenize::byte_limit(self.max_positions());
        let text = tokenize::cut_to_bytes(text, limit);
        let pair = pair.map(|p| tokenize::cut_to_bytes(p, limit));
        self.encode_tokens(text, pair, enc, opts.capture_query_key)
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
        // Segment ids reach the model only where transformers passes them (see
        // `Architecture::tokenizer_types`); the views still get the tokenizer's.
        let arch = self.architecture();
        let out = if arch.tokenizer_types {
            self.forward(&enc.ids, &enc.type_ids, capture_query_key)?
        } else {
            self.forward(&enc.ids, &vec![0; enc.ids.len()], capture_query_key)?
        };
        let units = Units::tokens(
            enc.tokens,
            enc.ids,
            enc.type_ids,
            enc.segments,
            enc.roles,
            enc.word_ids,
            enc.surfaces,
        );
        let attention = Attention::new(
            self.info.clone(),
            text.to_string(),
            pair.map(str::to_string),
            units,
            out.weights,
        )
        // Mask and head map as the network computed them (one source: its Architecture).
        .and_then(|a| {
            a.with_mask(arch.mask)
                .with_kv_heads(arch.kv_head.clone())?
                .with_query_key(out.query_key)
        })
        .map_err(|e| Error::Forward(e.to_string()))?;
        Ok(Encoding {
            attention,
            hidden: out.hidden,
            truncated_from: enc.truncated_from,
            bytes_cut: enc.bytes_cut,
        })
    }
}

/// Refuse input the network cannot take, with a message that says why.
fn check_input(arch: &Architecture, index: usize, ids: &[u32], types: &[u32]) -> Result<(), Error> {
    let which = if index == 0 {
        String::new()
    } else {
        format!(" (sequence {index})")
    };
    if ids.is_empty() {
        return Err(Error::Input(format!("no input tokens{which}")));
    }
    if ids.len() != types.len() {
        return Err(Error::Input(format!(
            "{} input ids but {} token type ids{which}",
            ids.len(),
            types.len()
        )));
    }
    if ids.len() > arch.max_positions {
        return Err(Error::Input(format!(
            "{} tokens{which}, but the model takes at most {}; pass --truncate",
            ids.len(),
            arch.max_positions
        )));
    }
    if let Some(id) = ids.iter().find(|&&id| id as usize >= arch.vocab_size) {
        return Err(Error::Input(format!(
            "token id {id}{which} is outside the vocabulary of {} tokens; does the tokenizer belong to this model?",
            arch.vocab_size
        )));
    }
    // A model without segment embeddings ignores the ids.
    if arch.token_types > 0 {
        if let Some(t) = types.iter().find(|&&t| t as usize >= arch.token_types) {
            return Err(Error::Input(format!(
                "token type id {t}{which} is outside the model's {} segment types{}",
                arch.token_types,
                if arch.token_types == 1 {
                    "; this model cannot encode sentence pairs"
                } else {
                    ""
                }
            )));
        }
    }
    Ok(())
}
