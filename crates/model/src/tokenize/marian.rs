//! Marian's tokenizers (opus-mt): no tokenizer.json, but two SentencePiece models
//! (`source.spm`, `target.spm`) and one `vocab.json` that numbers the pieces of both.
//!
//! transformers' `MarianTokenizer` segments the text with the side's SentencePiece model, looks
//! each piece up in `vocab.json` (`<unk>` when absent) and appends `</s>`. This builds the same
//! as a `tokenizers` pipeline: the model's normalizer (its precompiled character map, and
//! runs of spaces collapsed), `▁` before each word, a unigram model over the side's pieces with
//! their scores, numbered as in `vocab.json`, and `</s>` after the text. Entries of `vocab.json`
//! the side's model does not have (the other side's pieces) get a score far below any of its
//! own, so they are only chosen where the model has no piece at all: for a character its model
//! does not know, whose text SentencePiece passes through and `vocab.json` may still number.
//!
//! The `.spm` files are protobuf (`sentencepiece_model.proto`); the few fields needed are read
//! here (the pieces with their scores and types, and the normalizer's character map) rather
//! than through a protobuf crate.

use std::collections::HashMap;
use std::path::Path;

use tokenizers::models::unigram::Unigram;
use tokenizers::normalizers::{precompiled::Precompiled, Replace, Sequence};
use tokenizers::pre_tokenizers::metaspace::{Metaspace, PrependScheme};
use tokenizers::processors::template::TemplateProcessing;
use tokenizers::{AddedToken, DecoderWrapper, NormalizerWrapper, Tokenizer};

use super::{Error, LoadProblem, TextTokenizer};

/// The score per character of a `vocab.json` entry the side's model lacks.
const FOREIGN_SCORE: f64 = -1e6;

/// The tokenizer of `dir` for one side (`source.spm` or `target.spm`), when the folder is a
/// Marian one (that file and `vocab.json`); `None` otherwise.
pub fn from_dir(dir: &Path, spm: &str) -> Result<Option<TextTokenizer>, Error> {
    let (model_path, vocab_path) = (dir.join(spm), dir.join("vocab.json"));
    if !model_path.is_file() || !vocab_path.is_file() {
        return Ok(None);
    }
    let err = |path: &Path, problem: LoadProblem| Error::Load {
        path: path.to_path_buf(),
        problem,
    };
    let vocab_text = crate::small_file::read_text(
        &vocab_path,
        super::bounds::MAX_VOCAB_FILE,
        "a Marian vocab.json is a few megabytes",
    )
    .map_err(|e| err(&vocab_path, e.into()))?;
    let vocab: HashMap<String, u32> =
        serde_json::from_str(&vocab_text).map_err(|e| err(&vocab_path, LoadProblem::Json(e)))?;
    if vocab.len() as u64 > super::bounds::MAX_VOCAB {
        let why = super::bounds::too_many("it", vocab.len() as u64, super::bounds::MAX_VOCAB);
        return Err(err(&vocab_path, why.into()));
    }
    let mut by_id = vec![None; vocab.len()];
    for (piece, &id) in &vocab {
        match by_id.get_mut(id as usize) {
            Some(slot @ None) => *slot = Some(piece.clone()),
            _ => {
                return Err(err(
                    &vocab_path,
                    LoadProblem::Ids {
                        last: vocab.len() - 1,
                        id,
                    },
                ))
            }
        }
    }
    let bytes = crate::small_file::read_bytes(
        &model_path,
        super::bounds::MAX_VOCAB_FILE,
        "a SentencePiece model is a few megabytes",
    )
    .map_err(|e| err(&model_path, e.into()))?;
    let model = SpmModel::parse(&bytes).map_err(|e| err(&model_path, e.into()))?;
    let unk = *vocab
        .get("<unk>")
        .ok_or_else(|| err(&vocab_path, LoadProblem::NoPiece("<unk>")))?;
    let eos = *vocab
        .get("</s>")
        .ok_or_else(|| err(&vocab_path, LoadProblem::NoPiece("</s>")))?;
    let pieces: Vec<(String, f64)> = by_id
        .into_iter()
        .map(|p| {
            let p = p.expect("every id filled");
            // Per character: a foreign piece of several characters never beats its characters
            // one by one (SentencePiece passes unknown characters through one at a time).
            let score = model
                .scores
                .get(&p)
                .copied()
                .unwrap_or(FOREIGN_SCORE * p.chars().count().max(1) as f64);
            (p, score)
        })
        .collect();
    let unigram = Unigram::from(pieces, Some(unk as usize), false)
        .map_err(|e| err(&model_path, LoadProblem::Tokenizers(e)))?;
    let mut tokenizer = Tokenizer::new(unigram);
    let mut normalizers: Vec<NormalizerWrapper> = Vec::new();
    if !model.charsmap.is_empty() {
        super::bounds::check_charsmap(&model.charsmap)
            .map_err(|e| err(&model_path, LoadProblem::Charsmap(e)))?;
        let precompiled = Precompiled::from(&model.charsmap)
            .map_err(|e| err(&model_path, LoadProblem::Tokenizers(e.into())))?;
        normalizers.push(precompiled.into());
    }
    normalizers.push(
        Replace::new(
            tokenizers::normalizers::replace::ReplacePattern::Regex(" {2,}".into()),
            " ",
        )
        .map_err(|e| err(&model_path, LoadProblem::Tokenizers(e)))?
        .into(),
    );
    tokenizer
        .with_normalizer(Some(Sequence::new(normalizers)))
        .map_err(|e| err(&model_path, LoadProblem::Tokenizers(e)))?;
    tokenizer.with_pre_tokenizer(Some(Metaspace::new(
        '\u{2581}',
        PrependScheme::Always,
        true,
    )));
    tokenizer.with_decoder(Some(DecoderWrapper::Metaspace(
        tokenizers::decoders::metaspace::Metaspace::new('\u{2581}', PrependScheme::Always, true),
    )));
    let post = TemplateProcessing::builder()
        .try_single("$A </s>")
        .and_then(|b| b.try_pair("$A $B </s>"))
        .map_err(|e| err(&model_path, LoadProblem::Tokenizers(e.into())))?
        .special_tokens(vec![("</s>", eos)])
        .build()
        .map_err(|e| err(&model_path, LoadProblem::Tokenizers(e.into())))?;
    tokenizer.with_post_processor(Some(post));
    let specials: Vec<AddedToken> = ["</s>", "<unk>", "<pad>"]
        .into_iter()
        .filter(|t| vocab.contains_key(*t))
        .map(|t| AddedToken::from(t, true))
        .collect();
    tokenizer
        .add_special_tokens(specials)
        .map_err(|e| err(&model_path, LoadProblem::Tokenizers(e)))?;
    TextTokenizer::from_tokenizer(tokenizer, model_path).map(Some)
}

/// Why a SentencePiece model cannot be read (displays after the file's name).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SpmError {
    /// A piece that is not UTF-8.
    #[error("a piece is not UTF-8; is this a SentencePiece model?")]
    NotUtf8,
    /// No pieces at all.
    #[error("holds no pieces; is this a SentencePiece model?")]
    NoPieces,
    /// A number cut off by the end of its message.
    #[error("ends inside a number; the file is damaged")]
    EndsInNumber,
    /// A varint of more than 64 bits.
    #[error("holds a number of more than 64 bits; the file is damaged")]
    LongNumber,
    /// A field cut off by the end of its message.
    #[error("ends inside a field; the file is damaged")]
    EndsInField,
    /// A length that does not fit in memory.
    #[error("a field is too long")]
    LongField,
    /// A wire type protobuf does not define.
    #[error("has a field of wire type {0}; the file is damaged")]
    WireType(u64),
}

/// What attnviz reads of a SentencePiece model.
struct SpmModel {
    /// Ordinary and user-defined pieces, with their scores.
    scores: HashMap<String, f64>,
    /// The normalizer's precompiled character map (empty: none).
    charsmap: Vec<u8>,
}

impl SpmModel {
    /// `ModelProto`: field 1 the pieces (`SentencePiece`: 1 piece, 2 score, 3 type), field 3
    /// the normalizer spec (2: precompiled_charsmap).
    fn parse(bytes: &[u8]) -> Result<SpmModel, SpmError> {
        let mut scores = HashMap::new();
        let mut charsmap = Vec::new();
        for field in Fields::new(bytes) {
            match field? {
                (1, Value::Bytes(piece)) => {
                    let (mut text, mut score, mut kind) = (None, 0f32, 1u64);
                    for f in Fields::new(piece) {
                        match f? {
                            (1, Value::Bytes(b)) => {
                                text = Some(
                                    String::from_utf8(b.to_vec()).map_err(|_| SpmError::NotUtf8)?,
                                )
                            }
                            (2, Value::Fixed32(bits)) => score = f32::from_bits(bits),
                            (3, Value::Varint(k)) => kind = k,
                            _ => {}
                        }
                    }
                    // NORMAL (1) and USER_DEFINED (4); not UNKNOWN, CONTROL, UNUSED or BYTE.
                    if let (Some(text), 1 | 4) = (text, kind) {
                        scores.insert(text, score as f64);
                    }
                }
                (3, Value::Bytes(spec)) => {
                    for f in Fields::new(spec) {
                        if let (2, Value::Bytes(map)) = f? {
                            charsmap = map.to_vec();
                        }
                    }
                }
                _ => {}
            }
        }
        if scores.is_empty() {
            return Err(SpmError::NoPieces);
        }
        Ok(SpmModel { scores, charsmap })
    }
}

/// One protobuf field value.
enum Value<'a> {
    Varint(u64),
    Fixed32(u32),
    Fixed64,
    Bytes(&'a [u8]),
}

/// The fields of one protobuf message, in order.
struct Fields<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Fields<'a> {
    fn new(data: &'a [u8]) -> Fields<'a> {
        Fields { data, at: 0 }
    }

    fn varint(&mut self) -> Result<u64, SpmError> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self.data.get(self.at).ok_or(SpmError::EndsInNumber)?;
            self.at += 1;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(SpmError::LongNumber)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], SpmError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.data.len())
            .ok_or(SpmError::EndsInField)?;
        let out = &self.data[self.at..end];
        self.at = end;
        Ok(out)
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u64, Value<'a>), SpmError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.at >= self.data.len() {
            return None;
        }
        let field = (|| {
            let key = self.varint()?;
            let value = match key & 7 {
                0 => Value::Varint(self.varint()?),
                1 => {
                    self.take(8)?;
                    Value::Fixed64
                }
                2 => {
                    let n = usize::try_from(self.varint()?).map_err(|_| SpmError::LongField)?;
                    Value::Bytes(self.take(n)?)
                }
                5 => Value::Fixed32(u32::from_le_bytes(
                    self.take(4)?.try_into().expect("four bytes"),
                )),
                t => return Err(SpmError::WireType(t)),
            };
            Ok((key >> 3, value))
        })();
        if field.is_err() {
            self.at = self.data.len();
        }
        Some(field)
    }
}
