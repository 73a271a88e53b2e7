//! Attention from elsewhere: our own JSON export (every format version), `.npz` and
//! `.safetensors` files, and arrays handed over in memory (the Python package). Each becomes an
//! [`Attention`], checked, so every renderer draws it like attention the model computed.
//!
//! What a file holds (`docs/render.md` has the full description):
//!
//! - **attnviz JSON** (`--json`), format version 1 or 2: everything, read as written. The
//!   attention array is streamed into one flat buffer, never built as a tree of values.
//! - **`.npz`** (numpy's `np.savez` / `np.savez_compressed`): an `attention` array `[layers,
//!   heads, queries, keys]` (float16/32/64; `[layers, 1, heads, queries, keys]`, what stacking
//!   transformers' `outputs.attentions` gives, is accepted too) and `tokens`, a string array.
//!   Optional: `sentence_b_start` (an integer), `roles` and `text`/`pair`. An encoder–decoder's
//!   `encoder_attention`, `decoder_attention` and `cross_attention` with `encoder_tokens` and
//!   `decoder_tokens` (bertviz's names) give one [`Attention`] per kind.
//! - **`.safetensors`**: the same arrays as tensors; the tokens (and the optional fields) as
//!   JSON strings in the header's `__metadata__` (`{"tokens": "[\"[CLS]\", …]"}`).
//!
//! Tokens given by label alone get their roles, words and surfaces from the labels
//! ([`labels::infer`]): the only place attnviz reads meaning into label text, because nothing
//! else is known. Roles given in the file win.
//!
//! Every check fails with one line that names the array and says what to do: wrong rank, tokens
//! that don't match the array, NaN or infinity, weights outside [0, 1]. Rows that don't sum to 1
//! are drawn as given, with a [`Warning`] that says by how much. Sizes are checked from the
//! file's headers before anything is allocated, and no array may hold more than
//! [`MAX_WEIGHTS`] weights.

mod budget;
mod check;
mod file_error;
mod image;
pub(crate) mod json;
mod json_error;
pub mod labels;
mod npy;
mod saved;
mod store;
mod tensors;

use std::fmt;
use std::ops::Range;
use std::path::Path;

use crate::attention::{
    Attention, AttentionKind, AttentionParts, Holds, LabelScheme, Level, MaskKind, ModelInfo,
    PositionScheme, RecordedWord, Recording, Role, Units,
};

pub use budget::{default_budget, Budget, Cost};
pub use check::{size as check_size, At, CheckError, RowSums, SpanFault, ROW_SUM_TOLERANCE};
pub use file_error::FileError;
pub use json_error::{DocProblem, JsonDocError, TextOverAllowance};

/// The most weights (layers × heads × queries × keys) one attention array may hold: 2²⁸, 1 GiB
/// as f32. More than any view can show usefully; a bigger file is refused before it is read.
pub const MAX_WEIGHTS: usize = 1 << 28;

/// The most tokens one side may have (the longest context a view can label is far shorter).
pub const MAX_TOKENS: usize = 1 << 20;

/// Why attention could not be imported. Each displays as one line that says what to do.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The file could not be opened or read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// What went wrong.
        source: std::io::Error,
    },
    /// A JSON file that is not attnviz's export, or not JSON.
    #[error("{shown} is not a readable attnviz JSON export: {source}")]
    Unreadable {
        /// The file, as messages name it.
        shown: String,
        /// The parser's error.
        source: serde_json::Error,
    },
    /// An attnviz JSON export (or a saved capture's metadata) that is not attention attnviz
    /// can draw.
    #[error(transparent)]
    Json(#[from] json_error::JsonDocError),
    /// Weights that are not attention attnviz draws (too many, not probabilities, masks that
    /// hide weights).
    #[error(transparent)]
    Check(#[from] CheckError),
    /// A file, or the arrays and tokens in it, that attnviz cannot draw.
    #[error(transparent)]
    File(#[from] FileError),
    /// An `.npz` archive or an array in it that cannot be read.
    #[error(transparent)]
    Npz(#[from] npy::NpzError),
    /// A saved capture that cannot be read.
    #[error(transparent)]
    Saved(#[from] saved::SavedError),
    /// A file of token labels (for arrays stored without them) cannot be used.
    #[error("the token file {path}: {problem}")]
    TokenFile {
        /// The file, as given.
        path: String,
        /// What is wrong with it.
        problem: TokenFileProblem,
    },
    /// Token labels given apart from the file, for a file of encoder–decoder attention.
    #[error("token labels given apart from the file label one self-attention array, but {file} holds encoder–decoder attention; store encoder_tokens and decoder_tokens in the file instead")]
    TokensForEncoderDecoder {
        /// The file.
        file: String,
    },
    /// An array stored without the tokens that label it.
    #[error("{file} has `{array}` but no `{field}`; store the tokens as a string array (np.array(tokens, dtype=str)){}", if *.field == "tokens" { ", or give them apart from the file" } else { "" })]
    NoTokens {
        /// The file.
        file: String,
        /// The array found.
        array: String,
        /// The tokens field missing.
        field: String,
    },
    /// Reading and drawing the file would take more memory than the budget; nothing was
    /// inflated or allocated.
    #[error(
        "{what} needs about {} of memory to read and draw, more than {budget}; save a part of it \
         (fewer layers or heads, a shorter input: a[:, :, :512, :512]) or raise the budget",
        crate::model::format_bytes(*needs)
    )]
    TooBig {
        /// The file and its largest array.
        what: String,
        /// The estimate, in bytes.
        needs: u64,
        /// The budget it exceeds.
        budget: Budget,
    },
}

/// What is wrong with a file of token labels (displays after its name).
#[derive(Debug, thiserror::Error)]
pub enum TokenFileProblem {
    /// It cannot be read.
    #[error("{0}")]
    Io(#[source] std::io::Error),
    /// Not a regular file, or too large.
    #[error(
        "give a regular file of at most 64 MiB with one token per line, or a JSON array of strings"
    )]
    NotAFile,
    /// Not UTF-8.
    #[error("not UTF-8 text; give one token per line, or a JSON array of strings")]
    NotUtf8,
    /// A JSON array of something other than strings.
    #[error("starts like a JSON array but is not one of strings: {0}")]
    NotStrings(#[source] serde_json::Error),
    /// No tokens.
    #[error("the file is empty")]
    Empty,
}

/// Something worth telling the user about attention that was still imported.
#[derive(Clone, Debug, PartialEq)]
pub enum Warning {
    /// Rows that don't sum to 1.
    RowSums {
        /// Which array (`attention`, `cross_attention`).
        array: String,
        /// What was found.
        sums: RowSums,
    },
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::RowSums { array, sums } => write!(f, "{array}: {sums}"),
        }
    }
}

/// The tokens along one side of an attention array, as a file or a caller gives them: labels,
/// and whatever else is known.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tokens {
    /// Label of each token.
    pub labels: Vec<String>,
    /// Role of each token; `None`: inferred from the labels ([`labels::infer`]).
    pub roles: Option<Vec<Role>>,
    /// Word index of each token (`None` for special tokens); `None`: inferred.
    pub word_ids: Option<Vec<Option<usize>>>,
    /// Vocabulary ids, if known.
    pub ids: Option<Vec<u32>>,
    /// Token type ids, if known; `None`: the segments.
    pub type_ids: Option<Vec<u32>>,
    /// The text each token stands for; `None`: from the labels.
    pub surfaces: Option<Vec<String>>,
    /// First token of the pair's second sentence, if the input was a pair.
    pub sentence_b_start: Option<usize>,
    /// The tokens each unit covers, for units that are words (a JSON export at word level);
    /// `None`: one token each.
    pub spans: Option<Vec<Range<usize>>>,
    /// Whether each token was generated; `None`: none was.
    pub generated: Option<Vec<bool>>,
    /// Show each label as bertviz's `prettify_tokens` does (`Ġ` and `▁` as spaces, `</w>`
    /// dropped), after its role was read from the label as given.
    pub prettify: bool,
    /// The kind of tokenizer the labels come from, when known (a JSON export says): the
    /// display texts follow its rules ([`crate::attention::display`]); `None`: the labels are
    /// shown as they are.
    pub scheme: Option<LabelScheme>,
}

impl Tokens {
    /// Tokens known by label only.
    pub fn labels(labels: Vec<String>) -> Tokens {
        Tokens {
            labels,
            ..Tokens::default()
        }
    }
}

/// One attention array with its tokens, before checking.
#[derive(Clone, Debug)]
pub struct Arrays {
    /// Name of the array for messages (`attention`, `encoder_attention`).
    pub name: String,
    /// Which attention it is.
    pub kind: AttentionKind,
    /// `[layers, heads, queries, keys]`.
    pub shape: [usize; 4],
    /// The weights, row-major in `shape`.
    pub weights: Vec<f32>,
    /// The query tokens (every token, for self-attention).
    pub queries: Tokens,
    /// The key tokens of cross-attention; `None` for every other kind.
    pub keys: Option<Tokens>,
    /// Which cells a query could not see; `None`: found from the weights (a square array whose
    /// every weight above the diagonal is 0 is causal; encoder and cross-attention never are).
    pub mask: Option<MaskKind>,
    /// Sentence A; `None`: the query tokens' text.
    pub text: Option<String>,
    /// Sentence B.
    pub pair: Option<String>,
    /// What the attention came from (a file's path, `arrays`), as the model id in titles.
    pub source: String,
    /// Row sums further than this from 1 are reported ([`ROW_SUM_TOLERANCE`] for f32 input; more
    /// for f16).
    pub tolerance: f32,
    /// What attnviz's own JSON says about the run that wrote it; `None` for plain arrays.
    pub origin: Option<Origin>,
}

/// What an attnviz JSON export records beyond the arrays.
#[derive(Clone, Debug)]
pub struct Origin {
    /// The model that computed the attention (its layers and heads are the array's).
    pub model: ModelInfo,
    /// Tokens or words.
    pub level: Level,
    /// Whether the special tokens were removed.
    pub special_excluded: bool,
    /// What the weights are (`attention_holds`): probabilities, or shares of a weighting
    /// ([`Attention::holds`]).
    pub holds: Holds,
    /// The key/value head of each query head.
    pub kv_head: Option<Vec<usize>>,
    /// How the model encoded positions.
    pub positions: PositionScheme,
    /// The model's number of each captured layer (`--layers`); `None`: every layer.
    pub layer_numbers: Option<Vec<usize>>,
    /// Each captured layer's sliding window (`layer_masks`); `None`: no layer has one.
    pub windows: Option<Vec<Option<usize>>>,
    /// The teacher-forced target of an encoder–decoder run (version 3).
    pub target: Option<String>,
    /// What an encoder–decoder run's decoder generated, decoded (version 3).
    pub generated_text: Option<String>,
    /// A vision model's picture, its patch grid and pooling head (the JSON's `image`).
    pub image: Option<crate::attention::image::ImageInput>,
    /// A vision-language model's pictures, each a run of image tokens (the JSON's
    /// `pictures`).
    pub pictures: Vec<crate::attention::image::PictureTokens>,
    /// How many tokens at the start see each other in full (the JSON's `prefix`, in units).
    pub prefix: usize,
    /// A mixture-of-experts model's router decisions (the JSON's `router`).
    pub router: Option<crate::attention::Router>,
    /// A hybrid model's layers that mix tokens without a softmax, with their mixing matrices
    /// when captured (the JSON's `non_softmax`).
    pub non_softmax: Option<crate::attention::NonSoftmaxLayers>,
    /// Each row's share on a learned attention sink, `[layers, heads, queries]` flat (the
    /// JSON's `sink_shares`).
    pub sink_shares: Option<Vec<f32>>,
    /// A speech run's section (the cross-attention's `speech`): its words are placed on the
    /// decoder's rows and travel on the attention as its [`Recording`], without the
    /// spectrogram or the samples, which the JSON does not carry.
    pub speech: Option<crate::doc::speech::SpeechSection>,
}

/// A speech run's recording, read with its cross-attention, travels on every kind read, as a
/// run's does ([`crate::attention::AttentionSet::with_recording`]), when its words fit the
/// encoder's frames and the decoder's tokens read with it; otherwise on none.
fn share_recording(kinds: &mut [Attention]) {
    let Some(rec) = kinds.iter().find_map(|a| a.recording.clone()) else {
        return;
    };
    let fits = kinds.iter().all(|a| match a.kind {
        AttentionKind::Encoder => rec
            .words
            .iter()
            .all(|w| w.end_frame <= a.queries().token_count()),
        AttentionKind::Decoder | AttentionKind::Cross => rec
            .words
            .iter()
            .all(|w| w.rows.end <= a.queries().token_count()),
        _ => true,
    });
    for a in kinds {
        a.recording = fits.then(|| rec.clone());
    }
}

/// The [`Recording`] of a speech section read back: the captured window's words on the rows of
/// the decoder `ids`, no spectrogram and no samples; `None` when its parts do not fit.
fn recording_of(speech: &crate::doc::speech::SpeechSection, ids: &[u32]) -> Option<Recording> {
    let words = RecordedWord::place(
        speech
            .words
            .iter()
            .filter(|w| w.window == speech.window)
            .map(|w| {
                (
                    w.word.as_str(),
                    w.tokens.as_slice(),
                    w.start_frame,
                    w.end_frame,
                )
            }),
        ids,
        speech.prompt.len(),
    );
    let rec = Recording {
        name: speech.audio.clone(),
        window_start: speech.window_start,
        window_seconds: speech.window_seconds,
        frame_seconds: speech.frame_seconds,
        mel_seconds: speech.frame_seconds / 2.0,
        mel_bins: 0,
        mel_frames: 0,
        mel: Vec::new(),
        words,
        alignment_heads: speech
            .alignment_heads
            .iter()
            .map(|&[l, h]| (l, h))
            .collect(),
        samples: Vec::new(),
        sample_rate: 0,
    };
    (rec.check().is_ok() && !rec.words.is_empty()).then_some(rec)
}

/// Attention read from a file: one value per kind it holds (or per kind [`ReadOptions::only`]
/// asked for), in the order self, encoder, decoder, cross.
#[derive(Debug)]
pub struct Imported {
    /// The attention of each kind read.
    pub kinds: Vec<Attention>,
    /// Every kind the file holds, read or not.
    pub held: Vec<AttentionKind>,
    /// What the user should know (rows that don't sum to 1).
    pub warnings: Vec<Warning>,
    /// What kind of file it was (`attnviz JSON, format version 1`, `.npz`).
    pub format: String,
    /// The teacher-forced target of an encoder–decoder run, when the file says.
    pub target: Option<String>,
    /// What an encoder–decoder run's decoder generated, decoded, when the file says.
    pub generated_text: Option<String>,
}

impl Imported {
    /// The attention of `kind`, if the file holds it.
    pub fn kind(&self, kind: AttentionKind) -> Option<&Attention> {
        self.kinds.iter().find(|a| a.kind == kind)
    }

    /// The kinds the file holds, by name (`self`, `encoder`, …).
    pub fn kind_names(&self) -> Vec<&'static str> {
        self.held.iter().map(|k| k.as_str()).collect()
    }

    /// The kinds in words: `encoder, decoder and cross`.
    pub fn kinds_in_words(&self) -> String {
        match self.kind_names().as_slice() {
            [] => String::new(),
            [one] => one.to_string(),
            [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
        }
    }
}

/// How to read a file.
#[derive(Clone, Debug, Default)]
pub struct ReadOptions {
    /// Labels for the tokens of a self-attention array, replacing (or standing in for) the
    /// file's (`--tokens FILE`).
    pub tokens: Option<Vec<String>>,
    /// The memory reading and drawing the file may take, in bytes; `None`: [`default_budget`].
    /// Checked from the file's headers before anything is inflated or converted.
    pub max_memory: Option<u64>,
    /// What the caller's outputs cost beyond the weights (added to the estimate).
    pub cost: Cost,
    /// Of a file that holds an encoder–decoder's kinds, decode only this one's weights (the
    /// outputs that show one kind need no more); the others' tokens are still read and
    /// checked. `None`, a self-attention file, or a kind the file lacks: every kind. `.npz`
    /// and `.safetensors` files only (JSON is read whole).
    pub only: Option<AttentionKind>,
    /// Of a capture saved layer by layer (`crate::save`), read only these layers (the model's
    /// numbers); `None`: every layer. The other formats hold one array and are read whole, so
    /// they refuse a selection.
    pub layers: Option<Vec<usize>>,
    /// Name attention that says nothing of its model (plain arrays, a JSON export without a
    /// model id) by the file's full path rather than by the file's name.
    pub full_path: bool,
}

/// Read attention from `path`: attnviz JSON (`.json`), `.npz` or `.safetensors`, chosen by the
/// file's first bytes (the extension only names what was expected in messages).
pub fn read(path: &Path, opts: &ReadOptions) -> Result<Imported, ImportError> {
    let shown = path.display().to_string();
    let io = |source| ImportError::Io {
        path: shown.clone(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    if meta.is_dir() {
        return Err(FileError::Folder {
            file: shown.clone(),
        }
        .into());
    }
    if !meta.is_file() {
        // A FIFO or a device would block or never end; only regular files are read.
        return Err(FileError::NotRegular {
            file: shown.clone(),
        }
        .into());
    }
    let mut head = [0u8; 16];
    let got = {
        use std::io::Read;
        let mut f = std::fs::File::open(path).map_err(io)?;
        let mut n = 0;
        while n < head.len() {
            match f.read(&mut head[n..]).map_err(io)? {
                0 => break,
                k => n += k,
            }
        }
        n
    };
    let head = &head[..got];
    let plan = store::Plan {
        budget: Budget::new(opts.max_memory),
        cost: opts.cost,
        only: opts.only,
    };
    let (format, assembled) = if head.starts_with(b"PK\x03\x04") || head.starts_with(b"PK\x05\x06")
    {
        (".npz".to_string(), npy::read_npz(path, &shown, &plan)?)
    } else if head
        .first()
        .is_some_and(|b| b.is_ascii_whitespace() || *b == b'{')
    {
        let (version, arrays) = json::read(path, &shown, &plan)?;
        let held = arrays.iter().map(|a| a.kind).collect();
        let assembled = store::Assembled {
            arrays,
            skipped: Vec::new(),
            held,
        };
        (format!("attnviz JSON, format version {version}"), assembled)
    } else if tensors::looks_like_safetensors(head, meta.len()) {
        match saved::read(path, &shown, &plan, opts.layers.as_deref())? {
            Some(assembled) => ("saved capture (.safetensors)".to_string(), assembled),
            None => (
                ".safetensors".to_string(),
                tensors::read(path, &shown, &plan)?,
            ),
        }
    } else if head.starts_with(b"\x93NUMPY") {
        return Err(FileError::SingleNpy {
            file: shown.clone(),
        }
        .into());
    } else {
        return Err(FileError::UnknownFormat {
            file: shown.clone(),
        }
        .into());
    };
    if opts.layers.is_some() && !format.starts_with("saved capture") {
        return Err(FileError::LayersOfWhole {
            file: shown.clone(),
            format,
        }
        .into());
    }
    let store::Assembled {
        mut arrays,
        skipped,
        mut held,
    } = assembled;
    // Attention from a file that does not name its model is named after the file: by the
    // file's name, or its full path when asked (never as given, which may say where it is).
    let named = if opts.full_path {
        crate::model::source::full_path(path)
    } else {
        crate::model::source::local_name(path)
    };
    for a in &mut arrays {
        if a.source == shown {
            a.source.clone_from(&named);
        }
        if let Some(origin) = a.origin.as_mut().filter(|o| o.model.id == shown) {
            origin.model.id.clone_from(&named);
        }
    }
    if let Some(tokens) = &opts.tokens {
        match arrays.as_mut_slice() {
            [one] if one.kind.is_self() && one.keys.is_none() && skipped.is_empty() => {
                one.queries = Tokens::labels(tokens.clone());
                one.text = None;
                one.pair = None;
            }
            _ => {
                return Err(ImportError::TokensForEncoderDecoder {
                    file: shown.to_string(),
                })
            }
        }
    }
    let target = arrays
        .iter()
        .find_map(|a| a.origin.as_ref().and_then(|o| o.target.clone()));
    let generated_text = arrays
        .iter()
        .find_map(|a| a.origin.as_ref().and_then(|o| o.generated_text.clone()));
    let mut kinds = Vec::new();
    let mut warnings = Vec::new();
    for a in arrays {
        let (att, warning) = build(a)?;
        kinds.push(att);
        warnings.extend(warning);
    }
    kinds.sort_by_key(|a| kind_order(a.kind));
    share_recording(&mut kinds);
    held.sort_by_key(|&k| kind_order(k));
    if !skipped.is_empty() {
        as_one_run(&mut kinds, &skipped, generated_text.as_deref());
    }
    Ok(Imported {
        kinds,
        held,
        warnings,
        target,
        generated_text,
        format,
    })
}

/// The kinds read of an encoder–decoder file some of whose kinds were not ([`ReadOptions::only`]),
/// labelled as when the whole run is read: the decoder's and cross-attention's text is the
/// source (the encoder's), and they quote the decoder's text (what was generated, or the
/// target) where it differs from it.
fn as_one_run(kinds: &mut [Attention], skipped: &[store::Skipped], generated: Option<&str>) {
    let text_of = |kind: AttentionKind| -> Option<String> {
        if let Some(a) = kinds.iter().find(|a| a.kind == kind) {
            return Some(a.text.clone());
        }
        let s = skipped.iter().find(|s| s.kind == kind)?;
        Some(
            s.text
                .clone()
                .unwrap_or_else(|| labels::text_of(&units(s.queries.clone(), false), 0)),
        )
    };
    let (Some(source), Some(decoder)) = (
        text_of(AttentionKind::Encoder),
        text_of(AttentionKind::Decoder),
    ) else {
        return;
    };
    let quoted = generated
        .map(str::to_string)
        .or_else(|| (decoder != source).then_some(decoder));
    for a in kinds.iter_mut() {
        if matches!(a.kind, AttentionKind::Decoder | AttentionKind::Cross) {
            a.text.clone_from(&source);
            a.pair = None;
            a.target_text.clone_from(&quoted);
        }
    }
}

fn kind_order(kind: AttentionKind) -> u8 {
    match kind {
        AttentionKind::SelfAttention => 0,
        AttentionKind::Encoder => 1,
        AttentionKind::Decoder => 2,
        AttentionKind::Cross => 3,
    }
}

/// Read token labels from a file (`--tokens FILE`): a JSON array of strings, or one token per
/// line (a final newline is not a token).
pub fn read_token_file(path: &Path) -> Result<Vec<String>, ImportError> {
    let shown = path.display().to_string();
    let bad = |problem: TokenFileProblem| ImportError::TokenFile {
        path: shown.clone(),
        problem,
    };
    let meta = std::fs::metadata(path).map_err(|e| bad(TokenFileProblem::Io(e)))?;
    // Tokens of the longest input, written one per line, are far under this.
    const LIMIT: u64 = 64 << 20;
    if !meta.is_file() || meta.len() > LIMIT {
        return Err(bad(TokenFileProblem::NotAFile));
    }
    let text = std::fs::read_to_string(path).map_err(|e| {
        bad(if e.kind() == std::io::ErrorKind::InvalidData {
            TokenFileProblem::NotUtf8
        } else {
            TokenFileProblem::Io(e)
        })
    })?;
    // A JSON array of strings opens with `[` then `"` (or is empty); a first line `[CLS]` does not.
    let json = text
        .trim_start()
        .strip_prefix('[')
        .is_some_and(|rest| rest.trim_start().starts_with(['"', ']']));
    if json {
        return serde_json::from_str::<Vec<String>>(&text)
            .map_err(|e| bad(TokenFileProblem::NotStrings(e)));
    }
    let body = text.strip_suffix('\n').unwrap_or(&text);
    let body = body.strip_suffix('\r').unwrap_or(body);
    if body.is_empty() {
        return Err(bad(TokenFileProblem::Empty));
    }
    Ok(body
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l).to_string())
        .collect())
}

/// Check `arrays` and build the [`Attention`] it describes, with a warning when rows don't sum
/// to 1.
pub fn build(arrays: Arrays) -> Result<(Attention, Option<Warning>), ImportError> {
    let Arrays {
        name,
        kind,
        shape,
        weights,
        queries,
        keys,
        mask,
        text,
        pair,
        source,
        tolerance,
        mut origin,
    } = arrays;
    let [layers, heads, nq, nk] = shape;
    check::size(&name, &shape)?;
    if weights.len() != layers * heads * nq * nk {
        return Err(FileError::ValueCount {
            name,
            values: weights.len(),
            shape,
        }
        .into());
    }
    if layers == 0 || heads == 0 || nq == 0 || nk == 0 {
        return Err(FileError::Empty { name, shape }.into());
    }
    let cross = kind == AttentionKind::Cross;
    if !cross && nq != nk {
        return Err(FileError::NotSquare {
            name,
            queries: nq,
            keys: nk,
            kind: kind.as_str(),
        }
        .into());
    }
    let word_level = origin.as_ref().is_some_and(|o| o.level == Level::Word);
    check_tokens(
        &name,
        "queries",
        nq,
        &queries,
        if cross { "decoder_tokens" } else { "tokens" },
        word_level,
    )?;
    if let Some(k) = &keys {
        check_tokens(&name, "keys", nk, k, "encoder_tokens", word_level)?;
    }
    check::values(&name, &shape, &weights)?;
    // The units of each picture whose image tokens see each other in full (Gemma 3): their
    // rows may weigh the run's later keys under a causal mask.
    // The units inside a prefix-LM mask's prefix, which see each other in full.
    let prefix_units = origin.as_ref().map_or(0, |o| match &queries.spans {
        Some(spans) => spans.iter().filter(|s| s.start < o.prefix).count(),
        None => o.prefix,
    });
    let mut open: Vec<Range<usize>> = origin.as_ref().map_or_else(Vec::new, |o| {
        o.pictures
            .iter()
            .filter(|p| p.bidirectional)
            .filter_map(|p| {
                let first = match &queries.spans {
                    Some(spans) => spans.iter().position(|s| s.start == p.first)?,
                    None => p.first,
                };
                Some(first..first + p.image.cells.len())
            })
            .collect()
    });
    if prefix_units > 0 {
        open.insert(0, 0..prefix_units);
    }
    check::stated_mask(&name, mask, &shape, &weights, &open)?;
    if let Some(kv) = origin.as_ref().and_then(|o| o.kv_head.as_deref()) {
        check::kv_heads(&name, kv, heads)?;
    }
    let mask = mask.unwrap_or_else(|| match kind {
        AttentionKind::Encoder | AttentionKind::Cross => MaskKind::Bidirectional,
        _ if check::is_causal(&shape, &weights) => MaskKind::Causal,
        _ => MaskKind::Bidirectional,
    });
    // A learned sink's share makes up what its row leaves.
    let sink_shares = origin.as_mut().and_then(|o| o.sink_shares.take());
    let sums = match &sink_shares {
        Some(shares) if shares.len() * shape[3] == weights.len() => {
            let mut whole = weights.clone();
            for (row, &s) in whole.chunks_exact_mut(shape[3]).zip(shares) {
                row[0] += s;
            }
            check::row_sums(&shape, &whole, tolerance)
        }
        _ => check::row_sums(&shape, &weights, tolerance),
    };
    let warning = sums.map(|sums| Warning::RowSums {
        array: name.clone(),
        sums,
    });
    let query_units = units(queries, word_level);
    let text = text.unwrap_or_else(|| labels::text_of(&query_units, 0));
    let pair = pair.or_else(|| {
        query_units
            .segment_b_start()
            .map(|_| labels::text_of(&query_units, 1))
    });
    let key_units = keys.map(|k| units(k, word_level));
    let (positions, layer_numbers, windows) = origin
        .as_ref()
        .map(|o| (o.positions, o.layer_numbers.clone(), o.windows.clone()))
        .unwrap_or_default();
    if let Some(windows) = &windows {
        check::windows(&name, windows, mask, &shape, &weights, prefix_units)?;
    }
    let image = origin.as_mut().and_then(|o| o.image.take());
    let pictures = origin
        .as_mut()
        .map(|o| std::mem::take(&mut o.pictures))
        .unwrap_or_default();
    let holds = origin.as_ref().map_or(Holds::Raw, |o| o.holds);
    let prefix = origin.as_ref().map_or(0, |o| o.prefix);
    let router = origin.as_mut().and_then(|o| o.router.take());
    let non_softmax = origin.as_mut().and_then(|o| o.non_softmax.take());
    let recording = origin
        .as_mut()
        .and_then(|o| o.speech.take())
        .filter(|_| kind == AttentionKind::Cross)
        .and_then(|s| recording_of(&s, &query_units.ids));
    let (model, level, special_excluded, kv_head) = match origin {
        Some(o) => (o.model, o.level, o.special_excluded, o.kv_head),
        None => (
            ModelInfo {
                id: source.clone(),
                revision: None,
                name: Some(labels::source_name(&source)),
                family: String::new(),
                layers,
                heads,
                hidden_size: 0,
                head_dim: 0,
            },
            Level::Token,
            false,
            None,
        ),
    };
    let att = Attention::from_parts(AttentionParts {
        model,
        text,
        pair,
        kind,
        mask,
        positions,
        level,
        special_excluded,
        queries: query_units,
        keys: key_units,
        kv_head,
        weights,
    })
    .and_then(|a| match layer_numbers {
        Some(numbers) => a.with_layer_numbers(numbers),
        None => Ok(a),
    })
    .and_then(|a| match windows {
        Some(windows) if windows.iter().any(Option::is_some) => a.with_windows(windows),
        _ => Ok(a),
    })
    .and_then(|a| a.with_pictures(pictures))
    .and_then(|a| a.with_prefix(prefix))
    .and_then(|a| a.with_router(router))
    .and_then(|a| a.with_sink_shares(sink_shares))
    .map(|mut a| {
        a.image = image.map(std::sync::Arc::new);
        a.recording = recording.map(std::sync::Arc::new);
        a.holds = holds;
        a.non_softmax = non_softmax;
        a
    })
    .map_err(|source| FileError::Shape { name, source })?;
    Ok((att, warning))
}

fn check_tokens(
    name: &str,
    side: &'static str,
    n: usize,
    tokens: &Tokens,
    field: &str,
    word_level: bool,
) -> Result<(), ImportError> {
    let got = tokens.labels.len();
    if got != n {
        return Err(FileError::TokenCount {
            name: name.to_string(),
            n,
            side,
            given: got,
            field: field.to_string(),
        }
        .into());
    }
    let extra = [
        ("roles", tokens.roles.as_ref().map(Vec::len)),
        ("word_ids", tokens.word_ids.as_ref().map(Vec::len)),
        ("input_ids", tokens.ids.as_ref().map(Vec::len)),
        ("surfaces", tokens.surfaces.as_ref().map(Vec::len)),
        ("token_type_ids", tokens.type_ids.as_ref().map(Vec::len)),
        ("spans", tokens.spans.as_ref().map(Vec::len)),
        ("generated", tokens.generated.as_ref().map(Vec::len)),
    ];
    for (what, len) in extra {
        if let Some(len) = len.filter(|&l| l != n) {
            return Err(FileError::PerToken {
                field: field.to_string(),
                len,
                what,
                n,
            }
            .into());
        }
    }
    if let Some(spans) = &tokens.spans {
        check::spans(name, field, spans, !word_level)?;
    }
    if let Some(ids) = &tokens.word_ids {
        check::word_ids(name, field, ids)?;
    }
    if let Some(b) = tokens.sentence_b_start.filter(|&b| b == 0 || b >= n) {
        return Err(FileError::SentenceB { start: b, n }.into());
    }
    Ok(())
}

/// Units for `tokens`: given fields as they are, the rest inferred from the labels. Labels of
/// words (`word_level`) are their text.
fn units(tokens: Tokens, word_level: bool) -> Units {
    let inferred = labels::infer(&tokens.labels);
    let n = tokens.labels.len();
    let segments: Vec<u32> = match tokens.sentence_b_start {
        Some(b) => (0..n).map(|i| u32::from(i >= b)).collect(),
        None => vec![0; n],
    };
    let roles = tokens.roles.unwrap_or(inferred.roles);
    let word_ids = match tokens.word_ids {
        Some(w) => w,
        None => labels::word_ids(&roles, &segments),
    };
    let surfaces = match (tokens.surfaces, word_level) {
        (Some(s), _) => s,
        (None, true) => tokens.labels.clone(),
        (None, false) => inferred.surfaces,
    };
    let labels = if tokens.prettify {
        tokens
            .labels
            .iter()
            .map(|t| t.replace(['Ġ', '▁'], " ").replace("</w>", ""))
            .collect()
    } else {
        tokens.labels
    };
    let mut u = Units::tokens(
        labels,
        if word_level {
            Vec::new()
        } else {
            tokens.ids.unwrap_or_default()
        },
        tokens.type_ids.unwrap_or_else(|| segments.clone()),
        segments,
        roles,
        word_ids,
        surfaces,
    );
    // Labels from a tokenizer of a known kind are shown as its rules say: the kind the file
    // names, else the one the labels' marks point to (`Ġ`, `▁`, `##`).
    if !word_level {
        u = u.relabel(tokens.scheme.unwrap_or(inferred.scheme));
    }
    if let Some(spans) = tokens.spans {
        u.spans = spans;
    }
    if let Some(generated) = tokens.generated {
        u.generated = generated;
    }
    // Special tokens stand for no text, whatever a file says.
    for i in 0..n {
        if u.roles[i].is_special() {
            u.surfaces[i].clear();
        }
    }
    u
}

#[cfg(test)]
mod tests;
