//! Roles, words, segments and surfaces for every family's tokenizer, against Hugging Face's own
//! tokenization of the tiny fixtures (`tests/reference/tiny-*.json`: tokens, ids,
//! `special_tokens_mask`, word ids, the names of the special tokens). Tokenizer level only: the
//! forward passes of these families are tested elsewhere.

use std::path::Path;

use attnviz::attention::Role;
use attnviz::tokenize::{Encoded, TextTokenizer};
use serde_json::Value;

use crate::support::cli::repo;

fn reference(model: &str) -> Value {
    let path = repo().join(format!("tests/reference/{model}.json"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// How each fixture's tokenizer is expected to behave, from the template its post-processor
/// uses (documented in each reference's `notes` and in transformers).
struct Family {
    model: &'static str,
    /// Special tokens that open sentence B of a pair before its first word: RoBERTa's second
    /// `</s>` (`<s> A </s></s> B </s>`), Llama's `<s>`; none for BERT (`[CLS] A [SEP] B [SEP]`),
    /// T5 (`A </s> B </s>`) or GPT-2 (no special tokens).
    opens_b: usize,
    /// The tokenizer splits words at whitespace itself, so our word ids equal HF's; Llama's
    /// SentencePiece numbers a whole sentence as one word, and there a word starts at each
    /// token HF writes with `▁`.
    hf_words: bool,
}

const FAMILIES: &[Family] = &[
    Family {
        model: "tiny-roberta",
        opens_b: 1,
        hf_words: true,
    },
    Family {
        model: "tiny-xlm-roberta",
        opens_b: 1,
        hf_words: true,
    },
    Family {
        model: "tiny-bart",
        opens_b: 1,
        hf_words: true,
    },
    Family {
        model: "tiny-distilbert",
        opens_b: 0,
        hf_words: true,
    },
    Family {
        model: "tiny-albert",
        opens_b: 0,
        hf_words: true,
    },
    Family {
        model: "tiny-electra",
        opens_b: 0,
        hf_words: true,
    },
    Family {
        model: "tiny-gpt2",
        opens_b: 0,
        hf_words: true,
    },
    Family {
        model: "tiny-qwen2",
        opens_b: 0,
        hf_words: true,
    },
    Family {
        model: "tiny-t5",
        opens_b: 0,
        hf_words: true,
    },
    Family {
        model: "tiny-mbart",
        opens_b: 0,
        hf_words: true,
    },
    Family {
        model: "tiny-llama",
        opens_b: 1,
        hf_words: false,
    },
    Family {
        model: "tiny-mistral",
        opens_b: 1,
        hf_words: false,
    },
];

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| a.iter().map(|s| s.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

fn opt_usizes(v: &Value) -> Vec<Option<usize>> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_u64().map(|w| w as usize))
        .collect()
}

/// HF's role for each token, from its own data: a token its special-tokens mask marks is the
/// start when it is the model's cls or bos token, the end when it is its sep or eos token, else
/// some other special token; an ordinary token starts a word when its (HF) word id differs from
/// the token before's.
fn hf_roles(reference: &Value, case: &Value, words: &[Option<usize>]) -> Vec<Role> {
    let names = &reference["special_tokens"];
    let named = |keys: &[&str]| -> Vec<String> {
        keys.iter()
            .filter_map(|k| names[*k][0].as_str().map(str::to_string))
            .collect()
    };
    let (start, end) = (
        named(&["cls_token", "bos_token"]),
        named(&["sep_token", "eos_token"]),
    );
    let tokens = strings(&case["tokens"]);
    let mask = case["special_tokens_mask"].as_array().unwrap();
    (0..tokens.len())
        .map(|i| {
            if mask[i].as_u64() == Some(1) {
                if start.contains(&tokens[i]) && (i == 0 || !end.contains(&tokens[i])) {
                    Role::Start
                } else if end.contains(&tokens[i]) {
                    Role::End
                } else {
                    Role::Special
                }
            } else if i > 0 && words[i].is_some() && words[i] == words[i - 1] {
                Role::Piece
            } else {
                Role::Word
            }
        })
        .collect()
}

/// HF's word ids numbered across the pair, as ours are (HF restarts at 0 in sentence B).
fn hf_words_across(words: &[Option<usize>], b_content: Option<usize>) -> Vec<Option<usize>> {
    let in_a = b_content.map_or(words.len(), |b| b);
    let a_words = words[..in_a].iter().flatten().max().map_or(0, |w| w + 1);
    words
        .iter()
        .enumerate()
        .map(|(i, w)| w.map(|w| if i >= in_a { w + a_words } else { w }))
        .collect()
}

/// The first token of sentence B's text: the first token whose HF word id is 0 after a token of
/// a later word.
fn b_content_start(words: &[Option<usize>], pair: bool) -> Option<usize> {
    if !pair {
        return None;
    }
    (1..words.len()).find(|&i| words[i] == Some(0) && words[..i].iter().flatten().any(|&w| w > 0))
}

/// Word ids from HF's tokens for a tokenizer that does not split words itself: a token written
/// with SentencePiece's `▁` starts a word (a test-side reading of the labels, for this check only).
fn words_from_markers(tokens: &[String], mask: &[Value]) -> Vec<Option<usize>> {
    let mut word = 0usize;
    let mut started = false;
    tokens
        .iter()
        .zip(mask)
        .map(|(t, m)| {
            if m.as_u64() == Some(1) {
                started = false;
                return None;
            }
            if t.starts_with('▁') || !started {
                word += 1;
                started = true;
            }
            Some(word - 1)
        })
        .collect()
}

fn encode(tok: &TextTokenizer, case: &Value) -> Encoded {
    tok.encode(
        case["text"].as_str().unwrap(),
        case["pair"].as_str(),
        case["max_len"].as_u64().unwrap() as usize,
        case["truncate"].as_bool().unwrap(),
    )
    .unwrap()
}

#[test]
fn every_family_gets_roles_words_and_segments_from_its_tokenizer() {
    let mut checked = 0;
    for family in FAMILIES {
        let reference = reference(family.model);
        let tok = TextTokenizer::from_dir(&repo().join("tests/fixtures").join(family.model))
            .unwrap_or_else(|e| panic!("{}: {e}", family.model));
        for case in reference["cases"].as_array().unwrap() {
            let what = format!("{} {}", family.model, case["name"].as_str().unwrap());
            let enc = encode(&tok, case);
            let tokens = strings(&case["tokens"]);
            assert_eq!(enc.tokens, tokens, "{what}: tokens");
            let mask = case["special_tokens_mask"].as_array().unwrap();
            let hf_special: Vec<bool> = mask.iter().map(|m| m.as_u64() == Some(1)).collect();
            assert_eq!(enc.special, hf_special, "{what}: special tokens");

            let pair = case["pair"].is_string();
            let hf_words = opt_usizes(&case["word_ids"]);
            let b_content = b_content_start(&hf_words, pair);
            let want_words = if family.hf_words {
                hf_words_across(&hf_words, b_content)
            } else {
                words_from_markers(&tokens, mask)
            };
            assert_eq!(enc.word_ids, want_words, "{what}: word ids");
            assert_eq!(
                enc.roles,
                hf_roles(&reference, case, &want_words),
                "{what}: roles"
            );

            let want_b = b_content.map(|b| b - family.opens_b);
            let b = enc.segments.iter().position(|&s| s == 1);
            assert_eq!(b, want_b, "{what}: first token of sentence B");
            assert!(
                enc.segments.windows(2).all(|w| w[0] <= w[1]),
                "{what}: segments run A then B"
            );

            // The surfaces are the text itself: joined, each sentence gives back its text
            // (without whitespace) when nothing was cut.
            if !case["truncate"].as_bool().unwrap() {
                let squeeze =
                    |s: &str| s.chars().filter(|c| !c.is_whitespace()).collect::<String>();
                for (seg, text) in [case["text"].as_str(), case["pair"].as_str()]
                    .into_iter()
                    .enumerate()
                {
                    let Some(text) = text else { continue };
                    let joined: String = enc
                        .surfaces
                        .iter()
                        .zip(&enc.segments)
                        .filter(|(_, &s)| s == seg as u32)
                        .map(|(t, _)| t.as_str())
                        .collect();
                    assert_eq!(squeeze(&joined), squeeze(text), "{what}: surfaces of {seg}");
                }
            }
            checked += 1;
        }
    }
    assert!(checked >= 40, "{checked} cases");
}

#[test]
fn special_tokens_come_from_the_tokenizer_not_their_text() {
    let dir = |m: &str| repo().join("tests/fixtures").join(m);
    // mBART ends with `</s> en_XX`: the language code is some other special token.
    let mbart = TextTokenizer::from_dir(&dir("tiny-mbart")).unwrap();
    let enc = mbart.encode("Hello there.", None, 64, false).unwrap();
    let n = enc.roles.len();
    assert_eq!(enc.tokens[n - 1], "en_XX");
    assert_eq!(&enc.roles[n - 2..], [Role::End, Role::Special]);
    // T5 adds only an end token.
    let t5 = TextTokenizer::from_dir(&dir("tiny-t5")).unwrap();
    let enc = t5.encode("Hello there.", None, 64, false).unwrap();
    assert_eq!(enc.roles.iter().filter(|r| r.is_special()).count(), 1);
    assert_eq!(enc.roles.last(), Some(&Role::End));
    // GPT-2 adds none, and its `<|endoftext|>` in the text is a special token (both its bos and
    // eos), not text.
    let gpt2 = TextTokenizer::from_dir(&dir("tiny-gpt2")).unwrap();
    let enc = gpt2
        .encode("One.<|endoftext|>Two.", None, 64, false)
        .unwrap();
    let at = enc
        .tokens
        .iter()
        .position(|t| t == "<|endoftext|>")
        .unwrap();
    assert_eq!(enc.roles[at], Role::End);
    assert_eq!(enc.word_ids[at], None);
    // BERT's [MASK] and [UNK] stand for words.
    let bert = TextTokenizer::from_dir(&dir("tiny-distilbert")).unwrap();
    let enc = bert.encode("The [MASK] sat.", None, 64, false).unwrap();
    let at = enc.tokens.iter().position(|t| t == "[MASK]").unwrap();
    assert_eq!(enc.roles[at], Role::Word);
    // A tokenizer.json alone, without the config files that name the tokens: the
    // post-processor's template still says which is which.
    let tmp = tempfile::tempdir().unwrap();
    std::fs::copy(
        dir("tiny-roberta").join("tokenizer.json"),
        tmp.path().join("tokenizer.json"),
    )
    .unwrap();
    let bare = TextTokenizer::from_dir(tmp.path()).unwrap();
    let enc = bare.encode("A b.", Some("C."), 64, false).unwrap();
    assert_eq!(enc.roles.first(), Some(&Role::Start));
    assert_eq!(enc.roles.last(), Some(&Role::End));
    assert_eq!(
        enc.roles.iter().filter(|r| **r == Role::End).count(),
        3,
        "<s> A </s></s> B </s>"
    );
}

#[test]
fn bert_vocab_route_has_the_same_roles() {
    // tiny-bert has only vocab.txt: roles from the names BERT's tokenizer uses.
    let tok = TextTokenizer::from_dir(Path::new(&repo().join("tests/fixtures/tiny-bert"))).unwrap();
    let enc = tok
        .encode("Unbelievably fine.", Some("Yes."), 64, false)
        .unwrap();
    assert_eq!(enc.roles[0], Role::Start);
    let ends: Vec<usize> = (0..enc.roles.len())
        .filter(|&i| enc.roles[i] == Role::End)
        .collect();
    assert_eq!(ends.len(), 2);
    assert_eq!(enc.segments[ends[0]], 0);
    assert_eq!(enc.segments[ends[1]], 1);
    assert_eq!(
        enc.segments, enc.type_ids,
        "BERT's segments are its token types"
    );
    assert!(enc.roles.contains(&Role::Piece), "{:?}", enc.tokens);
}

/// From each family's tokenizer to the merged words: the whole path `--words` takes (roles, word
/// ids and surfaces into [`word_groups`] and [`word_label`]) gives back the words a person typed,
/// whatever the piece markers (`##`, `Ġ`, `▁`) and however small the vocabulary.
#[test]
fn every_family_merges_back_into_the_typed_words() {
    use attnviz::analysis::{word_groups, word_label};
    use attnviz::attention::Units;

    let text = "The quick brown foxes jumped unbelievably high";
    let pair = "Naïve dogs";
    let mut checked = 0;
    for family in FAMILIES {
        let tok = TextTokenizer::from_dir(&repo().join("tests/fixtures").join(family.model))
            .unwrap_or_else(|e| panic!("{}: {e}", family.model));
        let enc = tok.encode(text, Some(pair), 512, false).unwrap();
        let units = Units::tokens(
            enc.tokens.clone(),
            enc.ids,
            enc.type_ids,
            enc.segments,
            enc.roles,
            enc.word_ids,
            enc.surfaces,
        );
        let words: Vec<String> = word_groups(&units)
            .into_iter()
            .filter(|g| !units.is_special(g.start))
            .map(|g| word_label(&units.labels[g.clone()], &units.surfaces[g]))
            .collect();
        let want: Vec<&str> = text.split(' ').chain(pair.split(' ')).collect();
        assert_eq!(words, want, "{}: {:?}", family.model, enc.tokens);
        checked += 1;
    }
    assert_eq!(checked, FAMILIES.len());
}
