//! The tokenizer: tokenizer.json and the vocab.txt route agree on MiniLM, pairs, truncation and
//! errors.

use crate::support::engine as engine_support;

use std::path::Path;

use attnviz::tokenize::{Error, TextTokenizer};
use engine_support::*;

/// A copy of MiniLM's tokenizer files without tokenizer.json, forcing the vocab.txt route.
fn vocab_only(dir: &Path) -> TextTokenizer {
    for f in [
        "vocab.txt",
        "tokenizer_config.json",
        "special_tokens_map.json",
    ] {
        std::fs::copy(minilm_dir().join(f), dir.join(f)).unwrap();
    }
    let tok = TextTokenizer::from_dir(dir).unwrap();
    assert!(tok.source().ends_with("vocab.txt"));
    tok
}

#[test]
fn vocab_txt_route_equals_tokenizer_json() {
    let json = TextTokenizer::from_dir(&minilm_dir()).unwrap();
    assert!(json.source().ends_with("tokenizer.json"));
    let tmp = tempfile::tempdir().unwrap();
    let vocab = vocab_only(tmp.path());
    let paragraph = "Attention is all you need, they said; ".repeat(30);
    let long_word = "x".repeat(150);
    let cases: Vec<(&str, Option<&str>, usize, bool)> = vec![
        (
            "The quick brown fox jumps over the lazy dog.",
            None,
            512,
            false,
        ),
        (
            "Café déjà vu: naïve façade, Ångström, ÉCOLE.",
            None,
            512,
            false,
        ),
        ("東京は日本の首都です 🚀✨ and 北京", None, 512, false),
        (
            "Tokenization isn't trivial!!! (really) — 3.14 $5 @user #tag",
            None,
            512,
            false,
        ),
        (
            "A [MASK] token and [SEP] inside the text.",
            None,
            512,
            false,
        ),
        ("   leading\ttabs\nand newlines   ", None, 512, false),
        (
            "Supercalifragilisticexpialidocious antidisestablishmentarianism",
            None,
            512,
            false,
        ),
        (&long_word, None, 512, false),
        (
            "The cat sat on the mat.",
            Some("It was very tired."),
            512,
            false,
        ),
        (&paragraph, None, 64, true),
        (&paragraph, Some("short pair sentence"), 40, true),
        ("short first", Some(&paragraph), 40, true),
    ];
    for (text, pair, max, truncate) in cases {
        let a = json.encode(text, pair, max, truncate).unwrap();
        let b = vocab.encode(text, pair, max, truncate).unwrap();
        assert_eq!(a, b, "{text:?} / {pair:?}");
    }
}

#[test]
fn saved_padding_and_truncation_are_off() {
    // MiniLM's tokenizer.json pads to 128 and truncates at 128.
    let tok = TextTokenizer::from_dir(&minilm_dir()).unwrap();
    let short = tok.encode("Hi there.", None, 512, false).unwrap();
    assert_eq!(short.tokens, ["[CLS]", "hi", "there", ".", "[SEP]"]);
    let long = tok.encode(&"word ".repeat(300), None, 512, false).unwrap();
    assert_eq!(long.ids.len(), 302);
    assert_eq!(long.truncated_from, None);
}

#[test]
fn pair_truncation_is_longest_first_and_reported() {
    let tok = TextTokenizer::from_dir(&minilm_dir()).unwrap();
    let enc = tok
        .encode(&"alpha ".repeat(50), Some(&"beta ".repeat(10)), 32, true)
        .unwrap();
    assert_eq!(enc.truncated_from, Some(63));
    assert_eq!(enc.ids.len(), 32);
    let a = enc.tokens.iter().filter(|t| *t == "alpha").count();
    let b = enc.tokens.iter().filter(|t| *t == "beta").count();
    // 29 content tokens: the longer side is cut first until both are equal, then alternately.
    assert_eq!((a, b), (19, 10));
    assert_eq!(enc.type_ids.iter().filter(|&&t| t == 1).count(), 11);
    assert_eq!(enc.special, {
        let mut s = vec![false; 32];
        s[0] = true;
        s[20] = true;
        s[31] = true;
        s
    });
}

#[test]
fn errors_say_what_to_do() {
    let tok = TextTokenizer::from_dir(&minilm_dir()).unwrap();
    let err = |text: &str, pair: Option<&str>, max: usize| {
        let e = tok.encode(text, pair, max, false).unwrap_err();
        assert_one_line(&e.to_string());
        e
    };
    assert!(matches!(err("", None, 512), Error::Empty { which: "text" }));
    assert!(matches!(
        err(" \n\t ", None, 512),
        Error::Empty { which: "text" }
    ));
    assert!(matches!(
        err("fine", Some("  "), 512),
        Error::Empty {
            which: "pair sentence"
        }
    ));
    assert!(matches!(
        err("\u{0}\u{1}\u{7}", None, 512),
        Error::NoTokens { which: "text" }
    ));
    let e = err("one two three four five", None, 5);
    assert!(matches!(e, Error::TooLong { tokens: 7, max: 5 }), "{e}");
    // The library names no flag (the CLI adds `--truncate`: tests/suite/cli.rs).
    assert!(e.to_string().contains("7 tokens") && e.to_string().ends_with("shorten it"));

    let tmp = tempfile::tempdir().unwrap();
    let e = TextTokenizer::from_dir(tmp.path()).unwrap_err();
    assert!(
        e.to_string()
            .contains("neither tokenizer.json nor vocab.txt"),
        "{e}"
    );
    std::fs::write(tmp.path().join("tokenizer.json"), "{").unwrap();
    let e = TextTokenizer::from_dir(tmp.path()).unwrap_err().to_string();
    assert_one_line(&e);
    assert!(e.contains("cannot load tokenizer"), "{e}");
}

#[test]
fn do_lower_case_false_keeps_case() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::copy(minilm_dir().join("vocab.txt"), tmp.path().join("vocab.txt")).unwrap();
    std::fs::write(
        tmp.path().join("tokenizer_config.json"),
        r#"{"do_lower_case": false, "model_max_length": 512}"#,
    )
    .unwrap();
    let tok = TextTokenizer::from_dir(tmp.path()).unwrap();
    let enc = tok.encode("The Cat", None, 512, false).unwrap();
    // MiniLM's vocabulary is lower case: capitalised words are unknown or split.
    assert_ne!(enc.tokens, ["[CLS]", "the", "cat", "[SEP]"]);
    assert!(!enc.tokens.contains(&"the".to_string()));

    // Without tokenizer_config.json, BERT's default is to lower-case.
    std::fs::remove_file(tmp.path().join("tokenizer_config.json")).unwrap();
    let tok = TextTokenizer::from_dir(tmp.path()).unwrap();
    assert_eq!(
        tok.encode("The Cat", None, 512, false).unwrap().tokens,
        ["[CLS]", "the", "cat", "[SEP]"]
    );
}
