//! Text → tokens: `tokenizer.json` when the model has one, otherwise BERT's WordPiece tokenizer
//! built from `vocab.txt` (with `do_lower_case` and friends from `tokenizer_config.json`), both
//! through the tokenizers crate. Each token gets its role, sentence, word and text from what the
//! tokenizer says about it (`roles`), never from its label.
//!
//! Padding and truncation saved in a tokenizer.json are switched off (all-MiniLM-L6-v2 ships
//! `padding: Fixed(128)` and `truncation: 128`); length limits are ours: too long is an error
//! unless the caller asks to truncate, and then we say by how much.

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub mod bounds;
pub mod config;
pub mod marian;
mod roles;
pub mod smiles;

pub use config::TokenizerConfig;
pub use roles::{SpecialIds, TokenInfo, TokenNames};

use crate::attention::{LabelScheme, Role};

use tokenizers::decoders::wordpiece::WordPiece as WordPieceDecoder;
use tokenizers::models::wordpiece::WordPiece;
use tokenizers::normalizers::BertNormalizer;
use tokenizers::pre_tokenizers::bert::BertPreTokenizer;
use tokenizers::processors::bert::BertProcessing;
use tokenizers::{
    AddedToken, EncodeInput, Model as _, Tokenizer, TruncationDirection, TruncationParams,
    TruncationStrategy,
};

/// Bytes of text accepted per position of the model: [`byte_limit`]. Ordinary text needs 3–6
/// bytes per token (English about 4.5, CJK 3), so this is over 40× what any real input of the
/// model's maximum length needs, and it bounds the time and memory a huge input costs before
/// the tokenizer says it is too long.
pub const BYTES_PER_POSITION: usize = 256;

/// The longest text (each of a pair) read or tokenized for a model of `max_positions`
/// positions: 128 KiB for 512 positions.
pub fn byte_limit(max_positions: usize) -> usize {
    max_positions.saturating_mul(BYTES_PER_POSITION)
}

/// `text` cut to at most `limit` bytes, at a character boundary.
pub fn cut_to_bytes(text: &str, limit: usize) -> &str {
    if text.len() <= limit {
        return text;
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// An error loading a tokenizer or encoding text.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Neither tokenizer.json nor vocab.txt.
    #[error("{} has neither tokenizer.json nor vocab.txt; add the model's tokenizer files", .0.display())]
    Missing(PathBuf),
    /// A tokenizer file cannot be read or parsed.
    #[error("cannot load tokenizer {}: {problem}", path.display())]
    Load {
        /// The file.
        path: PathBuf,
        /// Why.
        problem: LoadProblem,
    },
    /// The text (or the pair) is empty or only whitespace.
    #[error("the {which} is empty; give some text to analyse")]
    Empty {
        /// `text` or `pair sentence`.
        which: &'static str,
    },
    /// The text yields no tokens at all (only control characters, say).
    #[error("the {which} contains no tokens the model can read")]
    NoTokens {
        /// `text` or `pair sentence`.
        which: &'static str,
    },
    /// Too many tokens for the model.
    #[error("the input is {tokens} tokens long (with the special tokens) but the model takes at most {max}; shorten it")]
    TooLong {
        /// Tokens the full input needs.
        tokens: usize,
        /// The model's maximum.
        max: usize,
    },
    /// More bytes than [`byte_limit`] allows, without truncation.
    #[error("the {which} is {bytes} bytes long, more than a model of {max} positions can take (at most {limit} bytes are read); shorten it")]
    TooManyBytes {
        /// `text` or `pair sentence`.
        which: &'static str,
        /// Its length.
        bytes: usize,
        /// The limit.
        limit: usize,
        /// The model's maximum positions.
        max: usize,
    },
    /// The tokenizers crate failed.
    #[error("tokenization failed: {0}")]
    Encode(#[source] tokenizers::Error),
}

/// Why a tokenizer file cannot be loaded (displays after the file's name).
#[derive(Debug, thiserror::Error)]
pub enum LoadProblem {
    /// The file cannot be read.
    #[error(transparent)]
    Read(#[from] crate::small_file::ReadError),
    /// A tokenizer.json whose sizes are out of bounds.
    #[error(transparent)]
    Bounds(#[from] bounds::TokenizerJsonError),
    /// More entries than any real tokenizer has.
    #[error(transparent)]
    TooMany(#[from] bounds::TooMany),
    /// A SentencePiece `precompiled_charsmap` that cannot be read safely.
    #[error("its precompiled_charsmap {0}")]
    Charsmap(#[source] bounds::CharsmapError),
    /// The tokenizers crate refused the file or what was built from it.
    #[error("{0}")]
    Tokenizers(#[source] tokenizers::Error),
    /// A settings or vocabulary file that is not JSON.
    #[error("{0}")]
    Json(#[source] serde_json::Error),
    /// A settings file that holds JSON other than an object.
    #[error("it is not a JSON object")]
    NotAnObject,
    /// A special token the vocabulary lacks.
    #[error("the vocabulary has no {0} token")]
    NoToken(String),
    /// A Marian vocab.json whose ids are not 0 to n − 1, each once.
    #[error("ids are not 0–{last} each once (id {id})")]
    Ids {
        /// The largest id expected.
        last: usize,
        /// The id that breaks the rule.
        id: u32,
    },
    /// A Marian vocab.json without one of its special pieces.
    #[error("has no {0}")]
    NoPiece(&'static str),
    /// A SentencePiece model that cannot be read.
    #[error(transparent)]
    Spm(#[from] marian::SpmError),
}

/// One tokenized input: a sentence, or a pair, with the model's special tokens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Encoded {
    /// Token strings (`[CLS]`, `the`, `##ing`, `Ġquick`, `▁fox`, `[SEP]`, …).
    pub tokens: Vec<String>,
    /// Vocabulary ids.
    pub ids: Vec<u32>,
    /// Token type ids as the tokenizer gives them (0 for sentence A and its special tokens, 1
    /// for sentence B, in BERT; all 0 in RoBERTa's pairs).
    pub type_ids: Vec<u32>,
    /// Which sentence each token belongs to: 0 for the text, 1 for the pair (see
    /// [`crate::attention::Units::segments`]).
    pub segments: Vec<u32>,
    /// What each token is, from the tokenizer's special tokens and words (see
    /// [`crate::attention::Role`]).
    pub roles: Vec<Role>,
    /// Whether each token is a special token (its role is one of the special ones).
    pub special: Vec<bool>,
    /// Word index of each token, `None` for special tokens. Numbered across the whole input:
    /// the words of sentence B continue after those of sentence A. The tokenizer's word ids,
    /// also split where a token follows whitespace (which a SentencePiece tokenizer without
    /// word splitting, such as Llama's, does not mark).
    pub word_ids: Vec<Option<usize>>,
    /// The text each token stands for (its offsets' slice of its sentence), for word labels.
    pub surfaces: Vec<String>,
    /// Token count of the full input when it was truncated to fit (of the input cut to
    /// [`byte_limit`] when `bytes_cut`).
    pub truncated_from: Option<usize>,
    /// Whether the text (or the pair) was first cut to [`byte_limit`] bytes (`truncate` only).
    pub bytes_cut: bool,
}

/// A model's tokenizer, from tokenizer.json or (BERT) vocab.txt, with its special tokens by role.
#[derive(Clone)]
pub struct TextTokenizer {
    tokenizer: Tokenizer,
    source: PathBuf,
    specials: SpecialIds,
    /// The folder's tokenizer_config.json and special_tokens_map.json.
    settings: Arc<TokenizerConfig>,
    scheme: LabelScheme,
}

impl std::fmt::Debug for TextTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TextTokenizer")
            .field("source", &self.source)
            .finish()
    }
}

impl TextTokenizer {
    /// Load the tokenizer of the model in `dir`: `tokenizer.json` if present, else `vocab.txt`.
    pub fn from_dir(dir: &Path) -> Result<Self, Error> {
        let json = dir.join("tokenizer.json");
        // Not `is_file`: a FIFO or folder there is refused by name, not passed over.
        if json.exists() {
            return Self::from_tokenizer_json(&json);
        }
        if let Some(marian) = marian::from_dir(dir, "source.spm")? {
            return Ok(marian);
        }
        let vocab = dir.join("vocab.txt");
        if vocab.is_file() {
            if let Some(smiles) = smiles::from_dir(dir)? {
                return Ok(smiles);
            }
            return Self::from_vocab(dir);
        }
        Err(Error::Missing(dir.to_path_buf()))
    }

    /// Load a `tokenizer.json`, switching off its saved padding and truncation.
    pub fn from_tokenizer_json(path: &Path) -> Result<Self, Error> {
        let load = |problem: LoadProblem| Error::Load {
            path: path.to_path_buf(),
            problem,
        };
        let bytes = crate::small_file::read_bytes(
            path,
            bounds::MAX_TOKENIZER_JSON,
            "the largest real tokenizer.json is about 35 MB",
        )
        .map_err(|e| load(e.into()))?;
        bounds::check_tokenizer_json(&bytes).map_err(|e| load(e.into()))?;
        let mut tokenizer =
            Tokenizer::from_bytes(&bytes).map_err(|e| load(LoadProblem::Tokenizers(e)))?;
        tokenizer.with_padding(None);
        tokenizer.with_truncation(None).map_err(Error::Encode)?;
        Self::from_tokenizer(tokenizer, path.to_path_buf())
    }

    /// A tokenizer built by other code (such as [`smiles`]), read from `source`: its special
    /// tokens are named by the tokenizer_config.json and special_tokens_map.json beside
    /// `source`, if any, and by its post-processor.
    pub fn from_tokenizer(tokenizer: Tokenizer, source: PathBuf) -> Result<Self, Error> {
        let settings = match source.parent() {
            Some(dir) => TokenizerConfig::read(dir)?,
            None => TokenizerConfig::default(),
        };
        Ok(Self::with_settings(tokenizer, source, settings))
    }

    /// A tokenizer built by other code, with the settings of its folder, which name its
    /// special tokens.
    pub fn with_settings(tokenizer: Tokenizer, source: PathBuf, settings: TokenizerConfig) -> Self {
        let mut t = Self::with_names(tokenizer, source, &TokenNames::from_config(&settings));
        t.settings = Arc::new(settings);
        t
    }

    /// A tokenizer built by other code, with its special tokens named by `names` (a GGUF file
    /// states its BOS and EOS ids rather than shipping tokenizer_config.json).
    pub fn with_names(tokenizer: Tokenizer, source: PathBuf, names: &TokenNames) -> Self {
        let specials = SpecialIds::of(&tokenizer, names);
        let scheme = label_scheme_of(&tokenizer);
        TextTokenizer {
            tokenizer,
            source,
            specials,
            settings: Arc::default(),
            scheme,
        }
    }

    /// A tokenizer with an empty vocabulary, for a model that reads no text (a vision model,
    /// whose `source` folder holds its preprocessor_config.json instead).
    pub fn none(source: &Path) -> Self {
        let model = tokenizers::models::wordlevel::WordLevel::builder()
            .vocab(Default::default())
            .unk_token("[UNK]".into())
            .build()
            .unwrap_or_default();
        Self::with_names(
            Tokenizer::new(model),
            source.to_path_buf(),
            &TokenNames::default(),
        )
    }

    /// The settings of the tokenizer's folder (tokenizer_config.json and
    /// special_tokens_map.json; empty for a tokenizer read from a GGUF file).
    pub fn settings(&self) -> &TokenizerConfig {
        &self.settings
    }

    /// The same tokenizer, its pieces shown by `scheme`'s rules (a tokenizer built for one
    /// notation, such as [`smiles`], says which).
    pub fn with_label_scheme(mut self, scheme: LabelScheme) -> Self {
        self.scheme = scheme;
        self
    }

    /// The kind of tokenizer this is, for showing its pieces to a person
    /// ([`crate::attention::display`]): byte-level BPE, SentencePiece or WordPiece, from its
    /// decoder, pre-tokenizer and model.
    pub fn label_scheme(&self) -> LabelScheme {
        self.scheme
    }

    /// The ids of the special tokens, by role.
    pub fn specials(&self) -> &SpecialIds {
        &self.specials
    }

    /// The tokens with `role` (`[CLS]`; `<s>`), by id: how a view names them when it has no
    /// input to read them from (corpus mode's table).
    pub fn role_tokens(&self, role: Role) -> Vec<String> {
        let ids = match role {
            Role::Start => &self.specials.start,
            Role::End => &self.specials.end,
            Role::Pad => &self.specials.pad,
            Role::Special => &self.specials.other,
            Role::Word | Role::Piece => return Vec::new(),
        };
        let mut ids: Vec<u32> = ids.iter().copied().collect();
        ids.sort_unstable();
        ids.into_iter()
            .filter_map(|id| self.tokenizer.id_to_token(id))
            .collect()
    }

    /// Build BERT's WordPiece tokenizer from `dir/vocab.txt`, with the options of
    /// `dir/tokenizer_config.json` (and special token names from `special_tokens_map.json`).
    pub fn from_vocab(dir: &Path) -> Result<Self, Error> {
        let vocab = dir.join("vocab.txt");
        let settings = TokenizerConfig::read(dir)?;
        let opts = VocabOptions::of(&settings);
        let load_err = |problem: LoadProblem| Error::Load {
            path: vocab.clone(),
            problem,
        };
        // Checked through the bounded reader first: WordPiece reads any file it is given.
        vocab_lines(&vocab)?;
        let model = WordPiece::from_file(&vocab.to_string_lossy())
            .unk_token(opts.unk.clone())
            .continuing_subword_prefix("##".into())
            .max_input_chars_per_word(100)
            .build()
            .map_err(|e| load_err(LoadProblem::Tokenizers(e)))?;
        let id = |token: &str| {
            model
                .get_vocab()
                .get(token)
                .copied()
                .ok_or_else(|| load_err(LoadProblem::NoToken(token.to_string())))
        };
        let (cls_id, sep_id) = (id(&opts.cls)?, id(&opts.sep)?);
        let mut tokenizer = Tokenizer::new(model);
        tokenizer
            .with_normalizer(Some(BertNormalizer::new(
                true,
                opts.tokenize_chinese_chars,
                opts.strip_accents,
                opts.do_lower_case,
            )))
            .map_err(|e| load_err(LoadProblem::Tokenizers(e)))?;
        tokenizer.with_pre_tokenizer(Some(BertPreTokenizer));
        tokenizer.with_post_processor(Some(BertProcessing::new(
            (opts.sep.clone(), sep_id),
            (opts.cls.clone(), cls_id),
        )));
        tokenizer.with_decoder(Some(WordPieceDecoder::default()));
        let specials: Vec<AddedToken> = [&opts.pad, &opts.unk, &opts.cls, &opts.sep, &opts.mask]
            .into_iter()
            .filter(|t| tokenizer.token_to_id(t).is_some())
            .map(|t| AddedToken::from(t.clone(), true))
            .collect();
        tokenizer
            .add_special_tokens(specials)
            .map_err(|e| load_err(LoadProblem::Tokenizers(e)))?;
        let names = TokenNames {
            start: vec![opts.cls.clone()],
            end: vec![opts.sep.clone()],
            pad: vec![opts.pad.clone()],
            ordinary: vec![opts.unk.clone(), opts.mask.clone()],
            other: Vec::new(),
        };
        let mut t = Self::with_names(tokenizer, vocab, &names);
        t.settings = Arc::new(settings);
        Ok(t)
    }

    /// The file the tokenizer came from (tokenizer.json or vocab.txt).
    pub fn source(&self) -> &Path {
        &self.source
    }

    /// Tokenize `text` (and `pair`) with the model's special tokens. At most `max_len` tokens: a longer input
    /// is an error, or with `truncate` is cut (longest sequence first) and `truncated_from`
    /// says how long it was.
    pub fn encode(
        &self,
        text: &str,
        pair: Option<&str>,
        max_len: usize,
        truncate: bool,
    ) -> Result<Encoded, Error> {
        self.encode_with(text, pair, max_len, truncate, true)
    }

    /// [`TextTokenizer::encode`] of one text without the special tokens the tokenizer would add
    /// around it (BOS): for a prompt a chat template has already wrapped, as transformers'
    /// `apply_chat_template` tokenizes it. Special tokens written in the text are still read.
    pub fn encode_without_specials(
        &self,
        text: &str,
        max_len: usize,
        truncate: bool,
    ) -> Result<Encoded, Error> {
        self.encode_with(text, None, max_len, truncate, false)
    }

    fn encode_with(
        &self,
        text: &str,
        pair: Option<&str>,
        max_len: usize,
        truncate: bool,
        add_specials: bool,
    ) -> Result<Encoded, Error> {
        if text.trim().is_empty() {
            return Err(Error::Empty { which: "text" });
        }
        if pair.is_some_and(|p| p.trim().is_empty()) {
            return Err(Error::Empty {
                which: "pair sentence",
            });
        }
        // Bound the work before tokenizing: a huge input is refused, or cut, by its bytes.
        let limit = byte_limit(max_len);
        let mut bytes_cut = false;
        for (part, which) in [(Some(text), "text"), (pair, "pair sentence")] {
            let bytes = part.map_or(0, str::len);
            if bytes > limit {
                if !truncate {
                    return Err(Error::TooManyBytes {
                        which,
                        bytes,
                        limit,
                        max: max_len,
                    });
                }
                bytes_cut = true;
            }
        }
        let text = cut_to_bytes(text, limit);
        let pair = pair.map(|p| cut_to_bytes(p, limit));
        let input = |t: &str, p: Option<&str>| -> EncodeInput {
            match p {
                Some(p) => (t.to_string(), p.to_string()).into(),
                None => t.to_string().into(),
            }
        };
        let full = self
            .tokenizer
            .encode(input(text, pair), add_specials)
            .map_err(Error::Encode)?;
        let sequences = full.get_sequence_ids();
        for (index, which) in [(0, "text"), (1, "pair sentence")] {
            if (index == 0 || pair.is_some()) && !sequences.contains(&Some(index)) {
                return Err(Error::NoTokens { which });
            }
        }
        let texts: Vec<&str> = std::iter::once(text).chain(pair).collect();
        let tokens = full.len();
        if tokens <= max_len {
            return Ok(self.to_encoded(&full, &texts, None, bytes_cut));
        }
        if !truncate {
            return Err(Error::TooLong {
                tokens,
                max: max_len,
            });
        }
        let mut cutter = self.tokenizer.clone();
        cutter
            .with_truncation(Some(TruncationParams {
                direction: TruncationDirection::Right,
                max_length: max_len,
                strategy: TruncationStrategy::LongestFirst,
                stride: 0,
            }))
            .map_err(Error::Encode)?;
        let cut = cutter
            .encode(input(text, pair), add_specials)
            .map_err(Error::Encode)?;
        Ok(self.to_encoded(&cut, &texts, Some(tokens), bytes_cut))
    }

    fn to_encoded(
        &self,
        enc: &tokenizers::Encoding,
        texts: &[&str],
        truncated_from: Option<usize>,
        bytes_cut: bool,
    ) -> Encoded {
        let info = roles::token_info(enc, texts, &self.specials);
        // A token's label is its vocabulary entry, as transformers' `convert_ids_to_tokens` gives
        // it: a SentencePiece (Unigram) tokenizer reports an unknown piece by its text (`東`)
        // while the model sees the unknown token (`<unk>`).
        let tokens = enc
            .get_tokens()
            .iter()
            .zip(enc.get_ids())
            .map(|(t, &id)| match self.tokenizer.id_to_token(id) {
                Some(entry) if entry != *t => entry,
                _ => t.clone(),
            })
            .collect();
        Encoded {
            tokens,
            ids: enc.get_ids().to_vec(),
            type_ids: enc.get_type_ids().to_vec(),
            special: info.roles.iter().map(|r| r.is_special()).collect(),
            segments: info.segments,
            roles: info.roles,
            word_ids: info.word_ids,
            surfaces: info.surfaces,
            truncated_from,
            bytes_cut,
        }
    }
}

/// The kind of `tokenizer` for display: its decoder says how pieces become text (`ByteLevel`;
/// `Metaspace`, or `Replace(▁)` with `ByteFallback` as Llama's; `WordPiece`), else its
/// pre-tokenizer (`ByteLevel`, `Metaspace`), else its model (WordPiece).
fn label_scheme_of(tokenizer: &Tokenizer) -> LabelScheme {
    fn types(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(map) => {
                if let Some(t) = map.get("type").and_then(|t| t.as_str()) {
                    out.push(t.to_string());
                }
                if map.get("type").and_then(|t| t.as_str()) == Some("Replace")
                    && v.to_string().contains('\u{2581}')
                {
                    out.push("Metaspace".into());
                }
                map.values().for_each(|v| types(v, out));
            }
            serde_json::Value::Array(list) => list.iter().for_each(|v| types(v, out)),
            _ => {}
        }
    }
    let of = |value: Option<serde_json::Value>| {
        let mut found = Vec::new();
        if let Some(v) = value {
            types(&v, &mut found);
        }
        if found.iter().any(|t| t == "ByteLevel") {
            Some(LabelScheme::ByteLevel)
        } else if found
            .iter()
            .any(|t| t == "Metaspace" || t == "ByteFallback")
        {
            Some(LabelScheme::SentencePiece)
        } else if found.iter().any(|t| t == "WordPiece") {
            Some(LabelScheme::WordPiece)
        } else {
            None
        }
    };
    let decoder = tokenizer
        .get_decoder()
        .and_then(|d| serde_json::to_value(d).ok());
    let pre = tokenizer
        .get_pre_tokenizer()
        .and_then(|p| serde_json::to_value(p).ok());
    of(decoder)
        .or_else(|| of(pre))
        .unwrap_or(match tokenizer.get_model() {
            tokenizers::ModelWrapper::WordPiece(_) => LabelScheme::WordPiece,
            _ => LabelScheme::Plain,
        })
}

/// The options of BERT's tokenizer from tokenizer_config.json and special_tokens_map.json,
/// with transformers' defaults.
struct VocabOptions {
    do_lower_case: bool,
    strip_accents: Option<bool>,
    tokenize_chinese_chars: bool,
    unk: String,
    sep: String,
    cls: String,
    pad: String,
    mask: String,
}

impl VocabOptions {
    fn of(settings: &TokenizerConfig) -> Self {
        let token =
            |key: &str, default: &str| settings.special(key).unwrap_or_else(|| default.to_string());
        VocabOptions {
            do_lower_case: settings.flag("do_lower_case").unwrap_or(true),
            strip_accents: settings.flag("strip_accents"),
            tokenize_chinese_chars: settings.flag("tokenize_chinese_chars").unwrap_or(true),
            unk: token("unk_token", "[UNK]"),
            sep: token("sep_token", "[SEP]"),
            cls: token("cls_token", "[CLS]"),
            pad: token("pad_token", "[PAD]"),
            mask: token("mask_token", "[MASK]"),
        }
    }
}

/// What generation needs from a tokenizer: the text of ids, the label of one id, and the units
/// of generated tokens.
impl TextTokenizer {
    /// `prompt` followed by the `generated` ids, with a label, role, word id and surface for each
    /// new token: special tokens by their role (EOS ends), ordinary ones by their text, split into
    /// words as the tokenizer splits a prompt (its normalizer and pre-tokenizer on the generated
    /// text, and the same whitespace rules as `roles::token_info`). Their segment and type id are
    /// the text's.
    pub fn continuation(&self, prompt: &Encoded, generated: &[u32]) -> Encoded {
        let mut out = prompt.clone();
        // Decoding after the last ordinary prompt token keeps the first generated token's
        // leading space (SentencePiece decoders strip one at the start of a text) and lets the
        // pre-tokenizer see what the generated text continues.
        let base: Vec<u32> = prompt
            .ids
            .iter()
            .zip(&prompt.roles)
            .rev()
            .find(|(_, r)| !r.is_special())
            .map(|(&id, _)| vec![id])
            .unwrap_or_default();
        let decoded = |n: usize| -> String {
            let ids: Vec<u32> = base.iter().chain(&generated[..n]).copied().collect();
            self.tokenizer.decode(&ids, false).unwrap_or_default()
        };
        // Each generated token's text and where it starts in the decoded text (bytes of one
        // character may come in several tokens: the character goes to the token that completes
        // it).
        let mut spans = Vec::with_capacity(generated.len());
        let mut before = decoded(0);
        for i in 0..generated.len() {
            let after = decoded(i + 1);
            let kept = before.trim_end_matches('\u{fffd}');
            let surface = after
                .strip_prefix(kept)
                .unwrap_or("")
                .trim_end_matches('\u{fffd}')
                .to_string();
            spans.push((kept.len(), surface));
            before = after;
        }
        let starts = self.word_starts(&before);

        let mut words = prompt.word_ids.iter().flatten().max().map_or(0, |w| w + 1);
        // The previous ordinary token's text, when it is the one just before.
        let mut prev: Option<String> = prompt
            .roles
            .last()
            .filter(|r| !r.is_special())
            .and_then(|_| prompt.surfaces.last().cloned());
        for (&id, (at, surface)) in generated.iter().zip(spans) {
            out.tokens
                .push(self.tokenizer.id_to_token(id).unwrap_or_default());
            out.ids.push(id);
            out.type_ids.push(0);
            out.segments.push(0);
            if let Some(role) = self.specials.role(id, self.is_special(id), false) {
                out.roles.push(role);
                out.special.push(true);
                out.word_ids.push(None);
                out.surfaces.push(String::new());
                prev = None;
                continue;
            }
            let new_word = match &prev {
                None => true,
                Some(p) => {
                    // As for a prompt: a word of the pre-tokenizer starts with this token, or
                    // the token starts with whitespace after a token that is not a lone space
                    // (which belongs to the word after it).
                    let lone_space = !p.is_empty() && p.chars().all(char::is_whitespace);
                    starts.as_ref().is_some_and(|s| s.contains(&at))
                        || (surface.starts_with(char::is_whitespace) && !lone_space)
                }
            };
            if new_word {
                words += 1;
            }
            out.roles
                .push(if new_word { Role::Word } else { Role::Piece });
            out.special.push(false);
            out.word_ids.push(Some(words.max(1) - 1));
            if !surface.is_empty() {
                prev = Some(surface.clone());
            }
            out.surfaces.push(surface);
        }
        out
    }

    /// Where the tokenizer's pre-tokenizer starts a word in `text` (byte offsets, after its
    /// normalizer), or `None` when it has no pre-tokenizer (Llama 2's SentencePiece: whitespace
    /// decides).
    fn word_starts(&self, text: &str) -> Option<std::collections::HashSet<usize>> {
        use tokenizers::{
            NormalizedString, Normalizer, OffsetReferential, OffsetType, PreTokenizedString,
            PreTokenizer,
        };
        let pre = self.tokenizer.get_pre_tokenizer()?;
        let mut normalized = NormalizedString::from(text);
        if let Some(n) = self.tokenizer.get_normalizer() {
            n.normalize(&mut normalized).ok()?;
        }
        let mut pts = PreTokenizedString::from(normalized);
        pre.pre_tokenize(&mut pts).ok()?;
        Some(
            pts.get_splits(OffsetReferential::Original, OffsetType::Byte)
                .iter()
                .map(|(_, (start, _), _)| *start)
                .collect(),
        )
    }

    /// The text `ids` stand for (special tokens written out).
    pub fn decode(&self, ids: &[u32]) -> Result<String, Error> {
        self.tokenizer.decode(ids, false).map_err(Error::Encode)
    }

    /// The vocabulary entry of `id` (`Ġthe`, `▁the`, `<|im_end|>`).
    pub fn token(&self, id: u32) -> Option<String> {
        self.tokenizer.id_to_token(id)
    }

    /// The id of the vocabulary entry `token` (`Ġthe`, `▁the`), if there is one.
    pub fn vocab_id(&self, token: &str) -> Option<u32> {
        self.tokenizer.token_to_id(token)
    }

    /// Whether `id` is one of the tokenizer's special tokens (BOS, EOS, `<|im_start|>`, …).
    pub fn is_special(&self, id: u32) -> bool {
        self.tokenizer
            .get_added_tokens_decoder()
            .get(&id)
            .is_some_and(|t| t.special)
    }

    /// Token ids of `text` without the special tokens the tokenizer would add around it (BOS):
    /// for a prompt that a chat template already wrapped, as transformers' `apply_chat_template`
    /// tokenizes it.
    pub fn encode_plain(&self, text: &str) -> Result<Vec<u32>, Error> {
        self.tokenizer
            .encode(text, false)
            .map(|e| e.get_ids().to_vec())
            .map_err(Error::Encode)
    }
}

/// The lines of a vocabulary file (vocab.txt): read through the shared bounded reader, at most
/// [`bounds::MAX_VOCAB`] of them.
pub(crate) fn vocab_lines(path: &Path) -> Result<Vec<String>, Error> {
    let load = |problem: LoadProblem| Error::Load {
        path: path.to_path_buf(),
        problem,
    };
    let text = crate::small_file::read_text(
        path,
        bounds::MAX_VOCAB_FILE,
        "a vocab.txt is a few megabytes",
    )
    .map_err(|e| load(e.into()))?;
    let lines = text.lines().count() as u64;
    if lines > bounds::MAX_VOCAB {
        return Err(load(
            bounds::too_many("the vocabulary", lines, bounds::MAX_VOCAB).into(),
        ));
    }
    Ok(text.lines().map(str::to_string).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_cut_at_a_character_boundary() {
        assert_eq!(cut_to_bytes("abc", 10), "abc");
        assert_eq!(cut_to_bytes("abc", 2), "ab");
        // "é" is two bytes: a cut inside it keeps the character out.
        assert_eq!(cut_to_bytes("aé", 2), "a");
        assert_eq!(cut_to_bytes("aé", 3), "aé");
        // four-byte emoji
        assert_eq!(cut_to_bytes("🚀🚀", 7), "🚀");
        assert_eq!(byte_limit(512), 131_072);
        assert_eq!(byte_limit(usize::MAX), usize::MAX);
    }
}
