//! The tokenizer a GGUF file describes in its `tokenizer.ggml.*` metadata, built with the
//! tokenizers crate.
//!
//! - `tokenizer.ggml.model = "gpt2"`, byte-level BPE: the vocabulary and merges from the file,
//!   the pre-tokenizer regexes llama.cpp uses for the file's `tokenizer.ggml.pre` name (SmolLM's
//!   `smollm` splits digits one by one before GPT-2's regex; `llama-bpe` is Llama 3's regex, …).
//! - `tokenizer.ggml.model = "llama"`, SentencePiece BPE (Llama 2, TinyLlama): byte fallback,
//!   `▁` for spaces, merges implied by the pieces' scores, as transformers builds it.
//!
//! Both: control tokens (`token_type` 3) and the BOS/EOS/UNK/padding tokens are special added
//! tokens, user-defined ones (4) plain added tokens, and BOS/EOS are added when
//! `add_bos_token`/`add_eos_token` say so (else llama.cpp's default: BOS for SentencePiece and
//! Llama 3).
//!
//! candle's `quantized::tokenizer::TokenizerFromGguf` covers part of this, but treats every
//! `pre` it does not know (SmolLM's `smollm` among them) as GPT-2, reads the unknown-token id from
//! a key llama.cpp does not write (`unk_token_id` for `unknown_token_id`), respells no vocabulary
//! entry written outside the byte alphabet, and has no SentencePiece; hence our own.

use tokenizers::decoders::byte_fallback::ByteFallback;
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::decoders::fuse::Fuse;
use tokenizers::decoders::sequence::Sequence as DecoderSequence;
use tokenizers::decoders::strip::Strip;
use tokenizers::decoders::DecoderWrapper;
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::normalizers::replace::Replace;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::metaspace::{Metaspace, PrependScheme};
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::processors::template::TemplateProcessing;
use tokenizers::{AddedToken, PreTokenizerWrapper, SplitDelimiterBehavior, Tokenizer};

use candle_core::quantized::gguf_file::Value;

use super::{GgufError, GgufFile};
use crate::tokenize::bounds::{too_many, TooMany, MAX_MERGES, MAX_VOCAB};

/// Why the tokenizer a GGUF file describes cannot be built (displays after the file's name).
#[derive(Debug, thiserror::Error)]
pub enum TokenizerProblem {
    /// A metadata entry of the wrong type.
    #[error(transparent)]
    Metadata(Box<GgufError>),
    /// No `tokenizer.ggml.model`.
    #[error("metadata tokenizer.ggml.model is missing; the file carries no tokenizer")]
    NoModel,
    /// A tokenizer type attnviz does not build.
    #[error("tokenizer.ggml.model is \"{model}\", {}, which attnviz does not build from GGUF metadata (only \"gpt2\", byte-level BPE, and \"llama\", SentencePiece BPE); use the model's Hugging Face folder with its tokenizer.json instead", model_kind(.model))]
    Model {
        /// The type the file names.
        model: String,
    },
    /// A pre-tokenizer name attnviz does not know.
    #[error(
        "tokenizer.ggml.pre is \"{0}\", a pre-tokenizer attnviz does not know (known: {KNOWN_PRE})"
    )]
    Pre(String),
    /// No `tokenizer.ggml.tokens`.
    #[error("metadata tokenizer.ggml.tokens is missing")]
    NoTokens,
    /// More entries than any real tokenizer has.
    #[error(transparent)]
    TooMany(#[from] TooMany),
    /// A token type that is not an integer.
    #[error("metadata tokenizer.ggml.token_type holds a non-integer value")]
    TokenTypeValue,
    /// Token types that are not an array.
    #[error("metadata tokenizer.ggml.token_type is not an array")]
    TokenTypeNotArray,
    /// Token types of another count than the tokens.
    #[error("metadata tokenizer.ggml.token_type has {types} entries for {tokens} tokens")]
    TokenTypeCount {
        /// Token types.
        types: usize,
        /// Tokens.
        tokens: usize,
    },
    /// A special token id outside the vocabulary.
    #[error("metadata {key} is {id}, outside the {tokens} tokens")]
    IdOutside {
        /// The key.
        key: String,
        /// Its id.
        id: u64,
        /// The vocabulary's size.
        tokens: usize,
    },
    /// Byte-level BPE without merges.
    #[error("metadata tokenizer.ggml.merges is missing; byte-level BPE needs them")]
    NoMerges,
    /// A byte-level merge that is not two tokens.
    #[error("metadata tokenizer.ggml.merges entry {index} ({merge:?}) is not two tokens separated by a space")]
    Merge {
        /// Its index.
        index: usize,
        /// The entry.
        merge: String,
    },
    /// A SentencePiece merge that is not two tokens.
    #[error("metadata tokenizer.ggml.merges entry {0} is not two tokens")]
    SentencePieceMerge(usize),
    /// A pre-tokenizer regex the tokenizers crate refuses.
    #[error("pre-tokenizer regex for {pre}: {source}")]
    PreRegex {
        /// The pre-tokenizer's name.
        pre: String,
        /// The tokenizers crate's error.
        source: tokenizers::Error,
    },
    /// A part of the tokenizer the tokenizers crate refuses.
    #[error("{part}: {source}")]
    Build {
        /// The part (`special tokens`, `BOS/EOS template`, …).
        part: &'static str,
        /// The tokenizers crate's error.
        source: tokenizers::Error,
    },
    /// BOS or EOS asked for without its id.
    #[error("tokenizer.ggml.add_{0}_token is true but tokenizer.ggml.{0}_token_id is missing")]
    NoSpecialId(&'static str),
    /// A score that is not a float.
    #[error("metadata tokenizer.ggml.scores holds a non-float value")]
    ScoreValue,
    /// Scores of another count than the tokens.
    #[error("metadata tokenizer.ggml.scores is not an array of {0} floats")]
    ScoresShape(usize),
    /// A SentencePiece vocabulary without scores or merges.
    #[error("metadata tokenizer.ggml.scores is missing; a SentencePiece vocabulary needs them (or merges)")]
    NoScores,
    /// Scores that imply more merges than any real vocabulary.
    #[error("the merges implied by tokenizer.ggml.scores exceed {MAX_MERGES} merges or {} MiB (stopped at piece {piece:?}); no real SentencePiece vocabulary needs that many", MAX_MERGE_BYTES >> 20)]
    ImpliedMerges {
        /// The first 20 characters of the piece where it stopped.
        piece: String,
    },
    /// An array entry that is not a string.
    #[error("metadata {key} entry {index} is not a string")]
    NotString {
        /// The key.
        key: String,
        /// The entry.
        index: usize,
    },
    /// An entry that is not an array.
    #[error("metadata {0} is not an array")]
    NotArray(String),
}

impl From<GgufError> for TokenizerProblem {
    fn from(e: GgufError) -> Self {
        TokenizerProblem::Metadata(Box::new(e))
    }
}

/// `WordPiece`, `Unigram`, …: what a tokenizer type attnviz does not build is.
fn model_kind(model: &str) -> &'static str {
    match model {
        "bert" => "WordPiece",
        "t5" => "Unigram",
        "rwkv" => "RWKV's",
        _ => "a tokenizer type",
    }
}

/// The error for `part` of the tokenizer, from the tokenizers crate's.
fn build_err<E: Into<tokenizers::Error>>(part: &'static str) -> impl Fn(E) -> TokenizerProblem {
    move |e| TokenizerProblem::Build {
        part,
        source: e.into(),
    }
}

/// A tokenizer built from GGUF metadata, with the special token ids the file states.
#[derive(Clone)]
pub struct GgufTokenizer {
    /// The tokenizer: `encode(text, true)` adds BOS/EOS as the file asks.
    pub tokenizer: Tokenizer,
    /// `tokenizer.ggml.model` (`gpt2` or `llama`).
    pub model: String,
    /// `tokenizer.ggml.pre`, or `default` when the file has none (unused for `llama`).
    pub pre: String,
    /// `tokenizer.ggml.bos_token_id`.
    pub bos_token_id: Option<u32>,
    /// `tokenizer.ggml.eos_token_id`.
    pub eos_token_id: Option<u32>,
    /// `tokenizer.ggml.padding_token_id`.
    pub pad_token_id: Option<u32>,
    /// `tokenizer.ggml.unknown_token_id`.
    pub unk_token_id: Option<u32>,
    /// Whether encoding adds BOS: `tokenizer.ggml.add_bos_token`, else llama.cpp's default for
    /// the pre-tokenizer (true for Llama 3's).
    pub add_bos_token: bool,
    /// Whether encoding adds EOS: `tokenizer.ggml.add_eos_token`, else false.
    pub add_eos_token: bool,
}

impl std::fmt::Debug for GgufTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufTokenizer")
            .field("model", &self.model)
            .field("pre", &self.pre)
            .field("vocab", &self.tokenizer.get_vocab_size(true))
            .field("bos_token_id", &self.bos_token_id)
            .field("eos_token_id", &self.eos_token_id)
            .field("add_bos_token", &self.add_bos_token)
            .finish()
    }
}

impl GgufTokenizer {
    /// The vocabulary entry of `id`, as the file spells it (`Ġthe`, `▁the`).
    pub fn token(&self, id: u32) -> Option<String> {
        self.tokenizer.id_to_token(id)
    }
}

/// GPT-2's split (llama.cpp's spelling: no trailing `|\s+`; text it leaves unmatched still
/// becomes its own piece).
const GPT2: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)";
/// Llama 3's split (and DBRX's, Smaug's, ChatGLM 4's): numbers in groups of up to three.
const LLAMA3: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen 2's split: Llama 3's with single digits.
const QWEN2: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Mistral's Tekken split, as its tokenizer.json writes it.
const TEKKEN: &str = r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// GPT-4o's split (Llama 4's), as its tokenizer.json writes it.
const GPT4O: &str = r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// How llama.cpp pre-tokenizes for a `tokenizer.ggml.pre` name: the regexes, applied in turn
/// (each splits the pieces of the one before), whether a piece found whole in the vocabulary
/// skips the merges, and whether BOS is added when the file does not say.
struct PreTokenizer {
    splits: &'static [&'static str],
    ignore_merges: bool,
    add_bos: bool,
}

/// The `tokenizer.ggml.pre` names supported, grouped as llama.cpp's `llama-vocab.cpp` groups them.
fn pre_tokenizer(pre: &str) -> Option<PreTokenizer> {
    let (splits, ignore_merges, add_bos): (&'static [&'static str], bool, bool) =
        match pre {
            // A file without the key: transformers reads it as GPT-2's byte-level BPE.
            "default" | "gpt-2" | "phi-2" | "jina-es" | "jina-de" | "gigachat" | "jina-v2-es"
            | "jina-v2-de" | "a.x-4.0" | "mellum" | "modern-bert" | "jina-v1-en"
            | "jina-v2-code" | "roberta-bpe" | "exaone4" | "mpt" | "olmo" | "jais" | "trillion"
            | "granite-docling" => (&[GPT2], false, false),
            "smollm" | "starcoder" | "refact" | "command-r" | "codeshell" | "exaone"
            | "minerva-7b" => (&[r"\p{N}", GPT2], false, false),
            "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral"
            | "midm-2.0" | "lfm2" | "jina-v5-nano" => (&[LLAMA3], true, true),
            "dbrx" | "smaug-bpe" | "chatglm-bpe" | "glm4" => (&[LLAMA3], false, false),
            "qwen2" | "deepseek-r1-qwen" | "kormo" | "f2llmv2" | "megrez" | "stablelm2" => {
                (&[QWEN2], false, false)
            }
            "tekken" => (&[TEKKEN], true, true),
            "gpt-4o" | "llama4" | "kanana2" | "talkie" | "minimax-m2" => (&[GPT4O], false, false),
            _ => return None,
        };
    Some(PreTokenizer {
        splits,
        ignore_merges,
        add_bos,
    })
}

/// The names [`pre_tokenizer`] knows, for the error message.
const KNOWN_PRE: &str = "gpt-2, smollm, starcoder, llama-bpe (llama3), qwen2, dbrx, smaug-bpe, tekken, gpt-4o and their aliases";

/// GPT-2's byte alphabet: the printable character standing for each byte.
fn byte_alphabet() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut extra = 0u32;
    for b in 0..=255u8 {
        let printable = matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
        table[b as usize] = if printable {
            char::from(b)
        } else {
            extra += 1;
            char::from_u32(255 + extra).unwrap_or('\u{FFFD}')
        };
    }
    table
}

pub(crate) fn build(gguf: &GgufFile) -> Result<GgufTokenizer, TokenizerProblem> {
    let model = gguf
        .get_str("tokenizer.ggml.model")?
        .ok_or(TokenizerProblem::NoModel)?
        .to_string();
    if model != "gpt2" && model != "llama" {
        return Err(TokenizerProblem::Model { model });
    }
    let byte_level = model == "gpt2";
    let pre_name = gguf
        .get_str("tokenizer.ggml.pre")?
        .unwrap_or("default")
        .to_string();
    let pre = if byte_level {
        pre_tokenizer(&pre_name).ok_or_else(|| TokenizerProblem::Pre(pre_name.clone()))?
    } else {
        // SentencePiece: llama.cpp ignores `pre` and adds BOS unless the file says otherwise.
        PreTokenizer {
            splits: &[],
            ignore_merges: false,
            add_bos: true,
        }
    };

    let tokens = string_array(gguf, "tokenizer.ggml.tokens")?.ok_or(TokenizerProblem::NoTokens)?;
    let merges = string_array(gguf, "tokenizer.ggml.merges")?;
    if tokens.len() as u64 > MAX_VOCAB {
        let why = too_many(
            "metadata tokenizer.ggml.tokens",
            tokens.len() as u64,
            MAX_VOCAB,
        );
        return Err(why.into());
    }
    if let Some(m) = merges.as_ref().filter(|m| m.len() as u64 > MAX_MERGES) {
        let why = too_many("metadata tokenizer.ggml.merges", m.len() as u64, MAX_MERGES);
        return Err(why.into());
    }
    let token_types = match gguf.metadata().get("tokenizer.ggml.token_type") {
        None => Vec::new(),
        Some(Value::Array(values)) => values
            .iter()
            .map(|v| match *v {
                Value::I32(t) => Ok(t),
                Value::U32(t) => Ok(t as i32),
                Value::I8(t) => Ok(i32::from(t)),
                Value::U8(t) => Ok(i32::from(t)),
                _ => Err(TokenizerProblem::TokenTypeValue),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(TokenizerProblem::TokenTypeNotArray),
    };
    if !token_types.is_empty() && token_types.len() != tokens.len() {
        return Err(TokenizerProblem::TokenTypeCount {
            types: token_types.len(),
            tokens: tokens.len(),
        });
    }
    let id = |key: &str| -> Result<Option<u32>, TokenizerProblem> {
        let id = gguf.get_u64(key)?;
        match id {
            Some(id) if id as usize >= tokens.len() => Err(TokenizerProblem::IdOutside {
                key: key.to_string(),
                id,
                tokens: tokens.len(),
            }),
            Some(id) => Ok(Some(id as u32)),
            None => Ok(None),
        }
    };
    let bos = id("tokenizer.ggml.bos_token_id")?;
    let eos = id("tokenizer.ggml.eos_token_id")?;
    let pad = id("tokenizer.ggml.padding_token_id")?;
    let unk = id("tokenizer.ggml.unknown_token_id")?;
    let flag = |key: &str| gguf.get_bool(key);
    let add_bos = flag("tokenizer.ggml.add_bos_token")?.unwrap_or(pre.add_bos);
    let add_eos = flag("tokenizer.ggml.add_eos_token")?.unwrap_or(false);

    // Byte-level vocabulary entries are spelled in GPT-2's byte alphabet; one written otherwise
    // (a raw space, say) is respelled from its UTF-8 bytes, as transformers does.
    let alphabet = byte_alphabet();
    let in_alphabet = |t: &str| !byte_level || t.chars().all(|c| alphabet.contains(&c));
    let spelled: Vec<String> = tokens
        .iter()
        .map(|t| {
            if in_alphabet(t) {
                t.clone()
            } else {
                t.bytes().map(|b| alphabet[b as usize]).collect()
            }
        })
        .collect();
    let vocab: Vocab = spelled
        .iter()
        .enumerate()
        .map(|(i, t)| (t.clone(), i as u32))
        .collect();
    let mut tokenizer = if byte_level {
        let merges = merges
            .ok_or(TokenizerProblem::NoMerges)?
            .into_iter()
            .enumerate()
            .map(|(i, m)| {
                m.split_once(' ')
                    .map(|(a, b)| (a.to_string(), b.to_string()))
                    .ok_or_else(|| TokenizerProblem::Merge {
                        index: i,
                        merge: m.clone(),
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let bpe = BPE::builder()
            .vocab_and_merges(vocab, merges)
            .ignore_merges(pre.ignore_merges)
            .build()
            .map_err(build_err("BPE from tokenizer.ggml.tokens and merges"))?;
        let mut tokenizer = Tokenizer::new(bpe);
        let mut steps: Vec<PreTokenizerWrapper> = Vec::new();
        for regex in pre.splits {
            let split = Split::new(
                SplitPattern::Regex((*regex).to_string()),
                SplitDelimiterBehavior::Isolated,
                false,
            )
            .map_err(|source| TokenizerProblem::PreRegex {
                pre: pre_name.clone(),
                source,
            })?;
            steps.push(split.into());
        }
        steps.push(ByteLevel::new(false, false, false).into());
        tokenizer.with_pre_tokenizer(Some(Sequence::new(steps)));
        tokenizer.with_decoder(Some(ByteLevelDecoder::new(false, false, false)));
        tokenizer
    } else {
        sentencepiece(gguf, &tokens, vocab, merges)?
    };

    // Control tokens are special (never split, skipped when decoding with skip_special_tokens);
    // user-defined ones are matched whole but are ordinary text. A control token spelled outside
    // the byte alphabet is a llama.cpp mislabel: adding it would create a new id, so it is left
    // out, as transformers leaves it out.
    let mut special = Vec::new();
    let mut user = Vec::new();
    for (i, (&kind, token)) in token_types.iter().zip(&tokens).enumerate() {
        match kind {
            3 if in_alphabet(token) => {
                special.push(AddedToken::from(token.clone(), true).normalized(false))
            }
            4 => user.push(AddedToken::from(spelled[i].clone(), false).normalized(false)),
            _ => {}
        }
    }
    // The ids llama.cpp treats as special are special whatever their type says.
    for id in [bos, eos, pad, unk].into_iter().flatten() {
        let token = &tokens[id as usize];
        if in_alphabet(token) && !special.iter().any(|t| t.content == *token) {
            special.push(AddedToken::from(token.clone(), true).normalized(false));
        }
    }
    tokenizer
        .add_special_tokens(special)
        .map_err(build_err("special tokens"))?;
    tokenizer
        .add_tokens(user)
        .map_err(build_err("user-defined tokens"))?;

    if add_bos || add_eos {
        let need = |wanted: bool,
                    id: Option<u32>,
                    what: &'static str|
         -> Result<Option<(String, u32)>, TokenizerProblem> {
            if !wanted {
                return Ok(None);
            }
            let id = id.ok_or(TokenizerProblem::NoSpecialId(what))?;
            Ok(Some((tokens[id as usize].clone(), id)))
        };
        let bos_token = need(add_bos, bos, "bos")?;
        let eos_token = need(add_eos, eos, "eos")?;
        let (mut single, mut pair) = (Vec::new(), Vec::new());
        for (seq, side) in [(0, "A"), (1, "B")] {
            if let Some((token, _)) = &bos_token {
                pair.push(format!("{token}:{seq}"));
                if seq == 0 {
                    single.push(token.clone());
                }
            }
            pair.push(format!("${side}:{seq}"));
            if seq == 0 {
                single.push("$A".to_string());
            }
            if let Some((token, _)) = &eos_token {
                pair.push(format!("{token}:{seq}"));
                if seq == 0 {
                    single.push(token.clone());
                }
            }
        }
        let mut specials: Vec<(String, u32)> = bos_token.into_iter().chain(eos_token).collect();
        specials.dedup();
        let template = TemplateProcessing::builder()
            .try_single(single)
            .and_then(|b| b.try_pair(pair))
            .map_err(build_err("BOS/EOS template"))?
            .special_tokens(specials)
            .build()
            .map_err(build_err("BOS/EOS template"))?;
        tokenizer.with_post_processor(Some(template));
    }

    Ok(GgufTokenizer {
        tokenizer,
        model,
        pre: pre_name,
        bos_token_id: bos,
        eos_token_id: eos,
        pad_token_id: pad,
        unk_token_id: unk,
        add_bos_token: add_bos,
        add_eos_token: add_eos,
    })
}

/// SentencePiece BPE (`tokenizer.ggml.model = "llama"`: Llama 2, TinyLlama, Mistral v0.1), as
/// transformers builds it from a GGUF: a BPE model with byte fallback over the file's pieces, its
/// merges those the file lists or, usually, those its scores imply (transformers'
/// `generate_merges`), `▁` for spaces with one prepended to the text (unless
/// `tokenizer.ggml.add_space_prefix` is false), and the matching decoder.
fn sentencepiece(
    gguf: &GgufFile,
    tokens: &[String],
    vocab: Vocab,
    merges: Option<Vec<String>>,
) -> Result<Tokenizer, TokenizerProblem> {
    let merges = match merges {
        Some(merges) => merges
            .iter()
            .enumerate()
            .map(|(i, m)| {
                m.split_once(' ')
                    .map(|(a, b)| (a.to_string(), b.to_string()))
                    .ok_or(TokenizerProblem::SentencePieceMerge(i))
            })
            .collect::<Result<Vec<_>, _>>()?,
        None => {
            let scores = match gguf.metadata().get("tokenizer.ggml.scores") {
                Some(Value::Array(values)) if values.len() == tokens.len() => values
                    .iter()
                    .map(|v| match *v {
                        Value::F32(x) => Ok(x),
                        _ => Err(TokenizerProblem::ScoreValue),
                    })
                    .collect::<Result<Vec<f32>, _>>()?,
                Some(_) => return Err(TokenizerProblem::ScoresShape(tokens.len())),
                None => return Err(TokenizerProblem::NoScores),
            };
            merges_from_scores(tokens, &scores)?
        }
    };
    let bpe = BPE::builder()
        .vocab_and_merges(vocab, merges)
        .byte_fallback(true)
        .fuse_unk(true)
        .build()
        .map_err(build_err("BPE from tokenizer.ggml.tokens and scores"))?;
    let mut tokenizer = Tokenizer::new(bpe);
    let prefix = gguf
        .get_bool("tokenizer.ggml.add_space_prefix")?
        .unwrap_or(true);
    let scheme = if prefix {
        PrependScheme::First
    } else {
        PrependScheme::Never
    };
    tokenizer.with_pre_tokenizer(Some(Metaspace::new('\u{2581}', scheme, false)));
    let mut decoders: Vec<DecoderWrapper> = vec![
        Replace::new("\u{2581}", " ")
            .map_err(build_err("decoder"))?
            .into(),
        ByteFallback::new().into(),
        Fuse::new().into(),
    ];
    if prefix {
        decoders.push(Strip::new(' ', 1, 0).into());
    }
    tokenizer.with_decoder(Some(DecoderSequence::new(decoders)));
    Ok(tokenizer)
}

/// transformers' `generate_merges(vocab, scores)`: every split of every piece into two pieces of
/// the vocabulary is a merge, ranked by the merged piece's score (highest first), then by the
/// longer left and right parts; splits of one piece in vocabulary order of their parts.
///
/// Linear in the vocabulary's bytes: whether a prefix or suffix of a piece is itself a piece is
/// asked of a set of (length, polynomial hash) pairs, with hashes of every prefix of the piece
/// computed once, so a split costs O(1) instead of hashing its parts (a 1 MB piece took
/// over a minute that way; now 10 ms). Only a hash hit is confirmed by looking the parts up. The
/// merges made are bounded by [`MAX_MERGES`] and [`MAX_MERGE_BYTES`], which no real
/// SentencePiece vocabulary comes near (Llama 2's 32k pieces give 61k merges, 0.5 MB).
fn merges_from_scores(
    tokens: &[String],
    scores: &[f32],
) -> Result<Vec<(String, String)>, TokenizerProblem> {
    let index: std::collections::HashMap<&str, usize> = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.as_str(), i))
        .collect(); // the last id wins for a duplicated piece, as in transformers' vocab dict
                    // Python's dict(zip(tokens, scores)) keeps each piece once, at its first position, with
                    // its last score.
    let mut seen = std::collections::HashMap::new();
    let mut pieces: Vec<(&str, f32)> = Vec::new();
    for (t, &score) in tokens.iter().zip(scores) {
        match seen.get(t.as_str()) {
            Some(&at) => pieces[at] = (t.as_str(), score),
            None => {
                seen.insert(t.as_str(), pieces.len());
                pieces.push((t.as_str(), score));
            }
        }
    }
    let hasher = PrefixHasher::new();
    let known: std::collections::HashSet<(usize, u64)> = tokens
        .iter()
        .map(|t| (t.len(), hasher.whole(t.as_bytes())))
        .collect();
    let mut merges: Vec<(&str, &str, f32)> = Vec::new();
    let mut bytes = 0usize;
    let mut prefix = Vec::new();
    for (piece, score) in pieces {
        hasher.prefixes(piece.as_bytes(), &mut prefix);
        let n = piece.len();
        let mut local: Vec<(&str, &str, f32)> = piece
            .char_indices()
            .skip(1)
            .filter(|&(at, _)| {
                known.contains(&(at, prefix[at]))
                    && known.contains(&(n - at, hasher.range(&prefix, at, n)))
            })
            .map(|(at, _)| (&piece[..at], &piece[at..], score))
            .filter(|(l, r, _)| index.contains_key(l) && index.contains_key(r))
            .collect();
        bytes = bytes.saturating_add(n.saturating_mul(local.len()));
        if merges.len() + local.len() > MAX_MERGES as usize || bytes > MAX_MERGE_BYTES {
            return Err(TokenizerProblem::ImpliedMerges {
                piece: piece.chars().take(20).collect(),
            });
        }
        local.sort_by_key(|(l, r, _)| (index[l], index[r]));
        merges.extend(local);
    }
    // Python's sorted(..., reverse=True) is stable: equal keys keep their order.
    merges.sort_by(|a, b| {
        let key = |m: &(&str, &str, f32)| (m.2, m.0.chars().count(), m.1.chars().count());
        let (ka, kb) = (key(a), key(b));
        kb.0.total_cmp(&ka.0)
            .then(kb.1.cmp(&ka.1))
            .then(kb.2.cmp(&ka.2))
    });
    Ok(merges
        .into_iter()
        .map(|(l, r, _)| (l.to_string(), r.to_string()))
        .collect())
}

/// The most bytes of merge text [`merges_from_scores`] makes.
const MAX_MERGE_BYTES: usize = 64 << 20;

/// Polynomial hashes modulo the Mersenne prime 2⁶¹ − 1, with a base drawn per process (so a
/// file cannot be made to collide on purpose).
struct PrefixHasher {
    base: u64,
}

impl PrefixHasher {
    const P: u64 = (1 << 61) - 1;

    fn new() -> PrefixHasher {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u8(0);
        PrefixHasher {
            base: 256 + h.finish() % (Self::P - 512),
        }
    }

    fn mul(a: u64, b: u64) -> u64 {
        let x = u128::from(a) * u128::from(b);
        let folded = (x & u128::from(Self::P)) + (x >> 61);
        let folded = folded as u64;
        if folded >= Self::P {
            folded - Self::P
        } else {
            folded
        }
    }

    fn step(&self, h: u64, byte: u8) -> u64 {
        let h = Self::mul(h, self.base) + u64::from(byte) + 1;
        if h >= Self::P {
            h - Self::P
        } else {
            h
        }
    }

    fn whole(&self, bytes: &[u8]) -> u64 {
        bytes.iter().fold(0, |h, &b| self.step(h, b))
    }

    /// `out[i]` = hash of `bytes[..i]`, and `out[len + 1 + i]` = base^i, for `range`.
    fn prefixes(&self, bytes: &[u8], out: &mut Vec<u64>) {
        out.clear();
        out.push(0);
        for &b in bytes {
            let last = *out.last().unwrap();
            out.push(self.step(last, b));
        }
        let mut power = 1;
        for _ in 0..=bytes.len() {
            out.push(power);
            power = Self::mul(power, self.base);
        }
    }

    /// The hash of `bytes[from..to]` from the table [`PrefixHasher::prefixes`] made.
    fn range(&self, table: &[u64], from: usize, to: usize) -> u64 {
        let len = (table.len() - 2) / 2;
        let power = table[len + 1 + (to - from)];
        let shifted = Self::mul(table[from], power);
        (table[to] + Self::P - shifted) % Self::P
    }
}

/// An array of strings from the metadata; `None` when absent.
fn string_array(gguf: &GgufFile, key: &str) -> Result<Option<Vec<String>>, TokenizerProblem> {
    match gguf.metadata().get(key) {
        None => Ok(None),
        Some(Value::Array(values)) => values
            .iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::String(s) => Ok(s.clone()),
                _ => Err(TokenizerProblem::NotString {
                    key: key.to_string(),
                    index: i,
                }),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(TokenizerProblem::NotArray(key.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokenizers::{OffsetReferential, OffsetType, PreTokenizedString, PreTokenizer as _};

    fn pieces(pre: &str, text: &str) -> Vec<String> {
        let pre = pre_tokenizer(pre).unwrap();
        let mut steps: Vec<PreTokenizerWrapper> = pre
            .splits
            .iter()
            .map(|r| {
                Split::new(
                    SplitPattern::Regex((*r).to_string()),
                    SplitDelimiterBehavior::Isolated,
                    false,
                )
                .unwrap()
                .into()
            })
            .collect();
        steps.push(ByteLevel::new(false, false, false).into());
        let mut s = PreTokenizedString::from(text);
        Sequence::new(steps).pre_tokenize(&mut s).unwrap();
        s.get_splits(OffsetReferential::Original, OffsetType::Byte)
            .into_iter()
            .map(|(p, _, _)| p.to_string())
            .collect()
    }

    /// The splits below are those of each model's own tokenizer.json (HF tokenizers), which
    /// llama.cpp's regexes reproduce.
    #[test]
    fn digits_split_by_pre_tokenizer() {
        // SmolLM (Digits(individual) then ByteLevel): one digit per piece.
        assert_eq!(pieces("smollm", " 2024!"), ["Ġ", "2", "0", "2", "4", "!"]);
        // Llama 3: groups of up to three.
        assert_eq!(pieces("llama-bpe", " 2024!"), ["Ġ", "202", "4", "!"]);
        // Qwen 2: single digits, the space kept on its own.
        assert_eq!(pieces("qwen2", " 2024!"), ["Ġ", "2", "0", "2", "4", "!"]);
        // GPT-2: the number whole, with its space.
        assert_eq!(pieces("gpt-2", " 2024!"), ["Ġ2024", "!"]);
    }

    #[test]
    fn whitespace_runs_follow_gpt2() {
        assert_eq!(
            pieces("gpt-2", "a  b\n\n\tc "),
            ["a", "Ġ", "Ġb", "ĊĊ", "ĉ", "c", "Ġ"]
        );
    }

    #[test]
    fn unknown_pre_tokenizer_is_none() {
        assert!(pre_tokenizer("no-such-pre").is_none());
    }

    #[test]
    fn byte_alphabet_is_gpt2s() {
        let a = byte_alphabet();
        assert_eq!(a[b' ' as usize], 'Ġ');
        assert_eq!(a[b'\n' as usize], 'Ċ');
        assert_eq!(a[b'\t' as usize], 'ĉ');
        assert_eq!(a[b'A' as usize], 'A');
        assert_eq!(a[0xAD], 'Ń');
        let mut sorted = a.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 256);
    }
}
