//! How tokens are shown to a person (`crates/core/src/attention/display.rs`): the shared cases of
//! `tests/display_label_cases.json` (the page's `crates/render/assets/report/labels.js` is held to the same
//! ones by `tests/browser/labels.test.mjs`, run here), the decoding checked against the
//! tokenizers crate's own decoders over whole vocabularies, which kind each real tokenizer is,
//! and what every output shows by default and with `--raw-tokens`.

use std::path::Path;

use serde_json::Value;

use attnviz::attention::display::{display_label, piece_text, positioned, visible};
use attnviz::attention::{LabelScheme, Role};
use attnviz::tokenize::TextTokenizer;

use crate::support::cli::{fixture, minilm, node_test, run};
use crate::support::data::{json_file, strings};

fn cases() -> Value {
    json_file("tests/display_label_cases.json")
}

#[test]
fn display_texts_meet_the_shared_cases() {
    let cases = cases();
    let list = cases["display"].as_array().unwrap();
    assert!(list.len() >= 30, "{} cases", list.len());
    for c in list {
        let scheme = LabelScheme::from_name(c["scheme"].as_str().unwrap()).unwrap();
        let role = Role::from_name(c["role"].as_str().unwrap()).unwrap();
        let piece = c["piece"].as_str().unwrap();
        assert_eq!(
            display_label(piece, role, scheme),
            c["display"].as_str().unwrap(),
            "{scheme:?} {role:?} {piece:?}"
        );
    }
    for c in cases["visible"].as_array().unwrap() {
        let text = c["text"].as_str().unwrap();
        assert_eq!(visible(text), c["display"].as_str().unwrap(), "{text:?}");
    }
    for c in cases["positioned"].as_array().unwrap() {
        let labels = strings(&c["labels"]);
        let positions: Vec<usize> = c["positions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_u64().unwrap() as usize)
            .collect();
        assert_eq!(
            positioned(&labels, &positions),
            strings(&c["named"]),
            "{labels:?}"
        );
    }
}

#[test]
fn the_page_meets_the_same_cases() {
    let text = node_test("labels.test.mjs", &[]);
    assert!(text.contains("visible: "), "{text}");
}

/// Every piece of `dir`'s vocabulary, decoded alone by the tokenizer's own decoder, is the text
/// our rules give it (a SentencePiece decoder drops the space it starts a text with). Returns how
/// many pieces were compared.
fn agrees_with_its_decoder(dir: &Path, scheme: LabelScheme) -> usize {
    let tok = TextTokenizer::from_dir(dir).unwrap();
    assert_eq!(tok.label_scheme(), scheme, "{}", dir.display());
    let mut compared = 0;
    for id in 0.. {
        let Some(piece) = tok.token(id) else { break };
        if tok.is_special(id) {
            continue;
        }
        let theirs = tok.decode(&[id]).unwrap();
        let mut ours = piece_text(&piece, scheme);
        if scheme == LabelScheme::SentencePiece && !theirs.starts_with(' ') {
            ours = ours.strip_prefix(' ').map(str::to_string).unwrap_or(ours);
        }
        assert_eq!(ours, theirs, "{} id {id} piece {piece:?}", dir.display());
        compared += 1;
    }
    compared
}

#[test]
fn byte_level_and_sentencepiece_pieces_decode_as_their_tokenizers_decode_them() {
    for (name, scheme) in [
        ("tiny-gpt2", LabelScheme::ByteLevel),
        ("tiny-roberta", LabelScheme::ByteLevel),
        ("tiny-bart", LabelScheme::ByteLevel),
        ("tiny-qwen2", LabelScheme::ByteLevel),
        ("tiny-t5", LabelScheme::SentencePiece),
        ("tiny-xlm-roberta", LabelScheme::SentencePiece),
        ("tiny-albert", LabelScheme::SentencePiece),
        ("tiny-llama", LabelScheme::SentencePiece),
    ] {
        let n = agrees_with_its_decoder(&fixture(name), scheme);
        assert!(n >= 100, "{name}: only {n} pieces compared");
    }
}

#[test]
fn each_tokenizer_says_its_kind() {
    let kind = |dir: &Path| TextTokenizer::from_dir(dir).unwrap().label_scheme();
    assert_eq!(kind(&fixture("tiny-bert")), LabelScheme::WordPiece);
    assert_eq!(kind(&fixture("tiny-distilbert")), LabelScheme::WordPiece);
    assert_eq!(kind(&minilm()), LabelScheme::WordPiece);
    assert_eq!(kind(&fixture("tiny-marian")), LabelScheme::SentencePiece);
    assert_eq!(kind(&fixture("tiny-mbart")), LabelScheme::SentencePiece);
    assert_eq!(
        kind(&crate::support::models::rxnmapper::rxnmapper_dir()),
        LabelScheme::Smiles
    );
    // SmolLM2's tokenizer is built from its GGUF metadata: byte-level BPE.
    let gguf = crate::support::models::smollm2::smollm2_gguf();
    let model = attnviz::model::Model::load(gguf.to_str().unwrap(), "main").unwrap();
    assert_eq!(model.tokenizer().label_scheme(), LabelScheme::ByteLevel);
}

#[test]
fn every_output_shows_display_texts_and_raw_tokens_on_request() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("a.json");
    let gpt2 = fixture("tiny-gpt2");
    let text = "The café\n\tis open";
    let out = run(&[
        "-m",
        gpt2.to_str().unwrap(),
        text,
        "--json",
        json.to_str().unwrap(),
        "--color",
        "never",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let view = String::from_utf8_lossy(&out.stdout).into_owned();
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    // The JSON keeps both: the raw pieces and what a reader sees.
    let tokens = strings(&doc["tokens"]);
    let display = strings(&doc["display"]);
    assert_eq!(doc["label_scheme"], "byte-level");
    assert_eq!(tokens.len(), display.len());
    assert!(tokens.iter().any(|t| t.starts_with('Ġ')), "{tokens:?}");
    assert!(display.iter().all(|t| !t.contains('Ġ')), "{display:?}");
    assert!(display.iter().any(|t| t.contains('↵')), "{display:?}");
    assert!(display.iter().any(|t| t.contains('⇥')), "{display:?}");
    for (t, d) in tokens.iter().zip(&display) {
        assert_eq!(d, &display_label(t, Role::Word, LabelScheme::ByteLevel));
    }
    // The terminal shows the display texts; with --raw-tokens the pieces.
    assert!(!view.contains('Ġ') && view.contains('↵'), "{view}");
    let raw = run(&[
        "-m",
        gpt2.to_str().unwrap(),
        text,
        "--raw-tokens",
        "--color",
        "never",
    ]);
    let raw_view = String::from_utf8_lossy(&raw.stdout);
    assert!(
        raw_view.contains("Ġ") && raw_view.contains('Ċ'),
        "{raw_view}"
    );
    // `attnviz render` reads the JSON back with its kind: the same display texts.
    let back = run(&[
        "render",
        json.to_str().unwrap(),
        "--json",
        dir.path().join("b.json").to_str().unwrap(),
        "-q",
    ]);
    assert!(
        back.status.success(),
        "{}",
        String::from_utf8_lossy(&back.stderr)
    );
    let again: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("b.json")).unwrap()).unwrap();
    assert_eq!(again["display"], doc["display"]);
    assert_eq!(again["tokens"], doc["tokens"]);
    // --raw-tokens with no output that labels tokens does nothing, and says so.
    let useless = run(&[
        "-m",
        gpt2.to_str().unwrap(),
        text,
        "--raw-tokens",
        "--json",
        dir.path().join("c.json").to_str().unwrap(),
        "-q",
    ]);
    crate::support::cli::assert_clean_failure(&useless, "--raw-tokens");
}

#[test]
fn repeated_tokens_carry_their_position_and_reactions_their_arrow() {
    let rxn = crate::support::models::rxnmapper::rxnmapper_dir();
    let out = run(&[
        "-m",
        rxn.to_str().unwrap(),
        "CC(=O)O.OCC>>CCOC(C)=O",
        "--color",
        "never",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let view = String::from_utf8_lossy(&out.stdout);
    // Nine carbons and four oxygens (`[CLS]` is token 0): each label says which one it is;
    // the one `>>` is not repeated, and a line divides reactants from products before it.
    for name in ["C₁", "C₂", "O₅", "O₇", "O₉", "C₁₃", "O₂₁"] {
        assert!(view.contains(&format!(" {name} ")), "{name}: {view}");
    }
    assert!(view.contains("12 >> ") && !view.contains(">>₁₂"), "{view}");
    assert!(
        view.contains("reaction: the line before token 12 (>>) divides reactants from products"),
        "{view}"
    );
    let rule = view
        .lines()
        .position(|l| l.trim_start().starts_with("12 >>"))
        .unwrap();
    assert!(view.lines().nth(rule - 1).unwrap().contains('─'), "{view}");
}
