//! The SMILES tokenizer of chemistry models such as rxnmapper: a regular expression splits a
//! (reaction) SMILES string into atoms, bonds, rings and branches, and each piece is looked up
//! whole in `vocab.txt` (`[UNK]` when absent), between `[CLS]` and `[SEP]`. No lower-casing, no
//! `##` pieces: read as BERT's WordPiece, the same vocabulary would lower-case `Cl` and split
//! `[K+]` and `>>` into pieces the model never saw.
//!
//! rxnmapper's `SmilesTokenizer` runs `re.findall(SMI_REGEX_PATTERN, text)` (characters the
//! pattern does not match, such as spaces, are dropped). Here the same is a tokenizers-library
//! tokenizer: `Split(pattern, Removed, invert)` (keep the matches, drop the rest), `WordLevel`
//! on the vocabulary, and a `[CLS] A [SEP] (B [SEP])` template.
//!
//! A folder gets this tokenizer when it has `vocab.txt` and no `tokenizer.json`, and every entry
//! of its vocabulary other than the special tokens and `[unusedN]` is one whole match of the
//! pattern: a SMILES vocabulary. A WordPiece vocabulary (English words, `##` pieces) never is.

use std::path::Path;

use serde_json::json;
use tokenizers::Tokenizer;

use super::{Error, LoadProblem, TextTokenizer, TokenizerConfig};

/// rxnmapper's `SMI_REGEX_PATTERN` (rxnmapper 0.4.3, `smiles_utils.py`).
pub const PATTERN: &str = r"(\[[^\]]+]|Br?|Cl?|N|O|S|P|F|I|b|c|n|o|s|p|\(|\)|\.|=|#|-|\+|\\|\/|:|~|@|\?|>>?|\*|\$|\%[0-9]{2}|[0-9])";

/// The special tokens BERT-style vocabularies use, as `special_tokens_map.json` (or
/// `tokenizer_config.json`) names them.
struct Specials {
    unk: String,
    cls: String,
    sep: String,
    pad: String,
    mask: String,
}

impl Specials {
    fn of(settings: &TokenizerConfig) -> Specials {
        let token =
            |key: &str, default: &str| settings.special(key).unwrap_or_else(|| default.to_string());
        Specials {
            unk: token("unk_token", "[UNK]"),
            cls: token("cls_token", "[CLS]"),
            sep: token("sep_token", "[SEP]"),
            pad: token("pad_token", "[PAD]"),
            mask: token("mask_token", "[MASK]"),
        }
    }

    fn all(&self) -> [&str; 5] {
        [&self.pad, &self.unk, &self.cls, &self.sep, &self.mask]
    }
}

/// Whether `vocab` is a SMILES vocabulary: at least one ordinary entry, and every ordinary entry
/// (not a special token, not `[unusedN]`) one whole match of [`PATTERN`].
fn is_smiles_vocabulary(vocab: &[String], specials: &Specials) -> bool {
    let Ok(whole) = regex::Regex::new(&format!("^{PATTERN}$")) else {
        return false;
    };
    let unused = |t: &str| {
        t.strip_prefix("[unused")
            .and_then(|r| r.strip_suffix(']'))
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    let mut ordinary = vocab
        .iter()
        .filter(|t| !specials.all().contains(&t.as_str()) && !unused(t))
        .peekable();
    ordinary.peek().is_some() && ordinary.all(|t| whole.is_match(t))
}

/// The SMILES tokenizer for the model in `dir`, when its `vocab.txt` is a SMILES vocabulary
/// (see the module documentation); `None` otherwise.
pub fn from_dir(dir: &Path) -> Result<Option<TextTokenizer>, Error> {
    let path = dir.join("vocab.txt");
    let load_err = |problem: LoadProblem| Error::Load {
        path: path.clone(),
        problem,
    };
    let vocab: Vec<String> = super::vocab_lines(&path)?
        .into_iter()
        .map(|l| l.trim_end_matches('\r').to_string())
        .collect();
    let settings = TokenizerConfig::read(dir)?;
    let specials = Specials::of(&settings);
    if !is_smiles_vocabulary(&vocab, &specials) {
        return Ok(None);
    }
    let tokenizer = build(&vocab, &specials).map_err(load_err)?;
    Ok(Some(
        TextTokenizer::with_settings(tokenizer, path, settings)
            .with_label_scheme(crate::attention::LabelScheme::Smiles),
    ))
}

/// The tokenizer, assembled as a tokenizer.json document (the library's own format for each
/// part) and loaded from it.
fn build(vocab: &[String], specials: &Specials) -> Result<Tokenizer, LoadProblem> {
    let mut ids = serde_json::Map::new();
    for (i, token) in vocab.iter().enumerate() {
        // The first occurrence wins, as in BERT's load_vocab.
        ids.entry(token.clone()).or_insert(json!(i));
    }
    let id = |t: &str| {
        ids.get(t)
            .and_then(|v| v.as_u64())
            .ok_or_else(|| LoadProblem::NoToken(t.to_string()))
    };
    let (cls, sep) = (id(&specials.cls)?, id(&specials.sep)?);
    id(&specials.unk)?;
    let special = |t: &str, type_id: u32| json!({"SpecialToken": {"id": t, "type_id": type_id}});
    let sequence = |s: &str, type_id: u32| json!({"Sequence": {"id": s, "type_id": type_id}});
    let added: Vec<serde_json::Value> = specials
        .all()
        .iter()
        .filter_map(|t| {
            let id = ids.get(*t)?;
            Some(
                json!({"id": id, "content": t, "single_word": false, "lstrip": false,
                        "rstrip": false, "normalized": false, "special": true}),
            )
        })
        .collect();
    let doc = json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": null,
        "pre_tokenizer": {
            "type": "Split",
            "pattern": {"Regex": PATTERN},
            "behavior": "Removed",
            "invert": true
        },
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [special(&specials.cls, 0), sequence("A", 0), special(&specials.sep, 0)],
            "pair": [special(&specials.cls, 0), sequence("A", 0), special(&specials.sep, 0),
                     sequence("B", 1), special(&specials.sep, 1)],
            "special_tokens": {
                specials.cls.clone(): {"id": specials.cls, "ids": [cls], "tokens": [specials.cls]},
                specials.sep.clone(): {"id": specials.sep, "ids": [sep], "tokens": [specials.sep]}
            }
        },
        "decoder": null,
        "model": {"type": "WordLevel", "vocab": ids, "unk_token": specials.unk}
    });
    doc.to_string()
        .parse::<Tokenizer>()
        .map_err(LoadProblem::Tokenizers)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn specials() -> Specials {
        Specials {
            unk: "[UNK]".into(),
            cls: "[CLS]".into(),
            sep: "[SEP]".into(),
            pad: "[PAD]".into(),
            mask: "[MASK]".into(),
        }
    }

    fn vocab(tokens: &[&str]) -> Vec<String> {
        tokens.iter().map(|t| t.to_string()).collect()
    }

    #[test]
    fn recognises_smiles_vocabularies_only() {
        let s = specials();
        let smiles = vocab(&[
            "[PAD]",
            "[unused1]",
            "[UNK]",
            "[CLS]",
            "[SEP]",
            "[MASK]",
            "c",
            "C",
            "Cl",
            "[K+]",
            ">>",
            "%10",
            "(",
            "=",
        ]);
        assert!(is_smiles_vocabulary(&smiles, &s));
        let words = vocab(&[
            "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "##s", "C",
        ]);
        assert!(!is_smiles_vocabulary(&words, &s));
        // Nothing but special tokens is no SMILES vocabulary either.
        assert!(!is_smiles_vocabulary(&vocab(&["[PAD]", "[UNK]"]), &s));
    }

    #[test]
    fn splits_as_rxnmapper_does() {
        let v = vocab(&[
            "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "C", "Cl", "O", ">>", "[K+]", "(", ")",
            "=", "%10", "1", ".",
        ]);
        let t = build(&v, &specials()).unwrap();
        let enc = t.encode("ClC(=O)[K+] . C%10>>X1", true).unwrap();
        // The space is dropped (re.findall keeps only matches); X matches nothing and is
        // dropped too; [K+] and %10 stay whole; Cl is one token.
        assert_eq!(
            enc.get_tokens(),
            &["[CLS]", "Cl", "C", "(", "=", "O", ")", "[K+]", ".", "C", "%10", ">>", "1", "[SEP]"]
        );
        assert_eq!(enc.get_special_tokens_mask()[0], 1);
        // A bracket atom outside the vocabulary is unknown, whole.
        let enc = t.encode("[Bk]C", true).unwrap();
        assert_eq!(enc.get_ids(), &[2, 1, 5, 3]);
        let pair = t.encode(("C", "O"), true).unwrap();
        assert_eq!(pair.get_ids(), &[2, 5, 3, 7, 3]);
        assert_eq!(pair.get_type_ids(), &[0, 0, 0, 1, 1]);
    }
}
