//! Comparing two captures (`attnviz::compare`, `attnviz diff`): the library's numbers against
//! an independent numpy implementation (`tests/reference/make_compare.py`, whose outputs are
//! committed under `tests/fixtures/compare/`), and every output of the subcommand: written,
//! parsed, and bad input refused in one line.

use std::fs;
use std::path::PathBuf;

use attnviz::compare::{compare, Basis, CompareOptions, Comparison};
use attnviz::import::{self, ReadOptions};
use attnviz::Attention;
use serde_json::Value;

use crate::support::cli::{assert_clean_failure, run, stderr, tree};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/compare")
        .join(name)
}

fn s(p: &std::path::Path) -> &str {
    p.to_str().unwrap()
}

fn read(name: &str) -> Attention {
    let mut imported = import::read(&fixture(name), &ReadOptions::default())
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(imported.kinds.len(), 1);
    imported.kinds.pop().unwrap()
}

fn reference(case: &str) -> Value {
    let text = fs::read_to_string(fixture(&format!("{case}.reference.json"))).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn pairs(v: &Value) -> Vec<(usize, usize)> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p[0].as_u64().unwrap() as usize,
                p[1].as_u64().unwrap() as usize,
            )
        })
        .collect()
}

fn indices(v: &Value) -> Vec<usize> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|i| i.as_u64().unwrap() as usize)
        .collect()
}

/// attnviz's comparison of the case's two files, checked against numpy's to 1e-6.
fn check_case(case: &str) -> Comparison {
    let r = reference(case);
    let a = read(r["a"].as_str().unwrap());
    let b = read(r["b"].as_str().unwrap());
    let opts = CompareOptions {
        words: r["words"].as_bool().unwrap(),
        shared_only: r["shared"].as_bool().unwrap(),
    };
    let c = compare(&a, &b, opts).unwrap_or_else(|e| panic!("{case}: {e}"));
    assert_eq!(c.basis.as_str(), r["basis"], "{case}");
    assert_eq!(c.level.as_str(), r["level"], "{case}");
    assert_eq!(
        (c.layers as u64, c.heads as u64),
        (r["layers"].as_u64().unwrap(), r["heads"].as_u64().unwrap())
    );
    assert_eq!(c.queries.pairs, pairs(&r["query_pairs"]), "{case}");
    assert_eq!(c.queries.only_a, indices(&r["only_a"]), "{case}");
    assert_eq!(c.queries.only_b, indices(&r["only_b"]), "{case}");
    assert_eq!(
        c.masks_differ(),
        r["masks_differ"].as_bool().unwrap(),
        "{case}"
    );
    let (mut worst_d, mut worst_js) = (0f64, 0f64);
    for l in 0..c.layers {
        for h in 0..c.heads {
            let want = &r["distance"][l][h];
            match c.distance(l, h) {
                Some(d) => worst_js = worst_js.max((d - want.as_f64().unwrap()).abs()),
                None => assert!(want.is_null(), "{case} layer {l} head {h}"),
            }
            assert_eq!(c.rows(l, h) as u64, r["rows"][l][h].as_u64().unwrap());
            let diff = c.diff(l, h);
            let n = c.n_keys();
            for (i, &v) in diff.iter().enumerate() {
                let want = r["diff"][l][h][i / n][i % n].as_f64().unwrap();
                worst_d = worst_d.max((v as f64 - want).abs());
            }
        }
    }
    assert!(worst_js <= 1e-6, "{case}: JS distance off by {worst_js:e}");
    assert!(worst_d <= 1e-6, "{case}: A − B off by {worst_d:e}");
    let ranked: Vec<(usize, usize)> = c.ranked().iter().map(|h| (h.layer, h.head)).collect();
    // Ties (equal distances) may order differently only where the distances agree to 1e-12.
    let want = pairs(&r["ranked"]);
    assert_eq!(ranked.len(), want.len());
    for (got, want) in ranked.iter().zip(&want) {
        if got != want {
            let d = |lh: &(usize, usize)| c.distance(lh.0, lh.1).unwrap();
            assert!(
                (d(got) - d(want)).abs() < 1e-9,
                "{case}: ranked {got:?} for {want:?}"
            );
        }
    }
    c
}

#[test]
fn two_sentences_on_minilm_agree_with_numpy() {
    let c = check_case("minilm-two-sentences");
    assert_eq!(c.basis, Basis::AlignedTokens);
    assert_eq!(c.unmatched_a(false), ["cat", "."]);
    assert!(c.max_distance() > 0.05, "{}", c.max_distance());
}

#[test]
fn the_same_file_twice_is_zero_apart() {
    let c = check_case("same-file");
    assert_eq!(c.basis, Basis::SameUnits);
    assert_eq!(c.max_distance(), 0.0);
}

#[test]
fn two_models_of_one_tokenizer_agree_with_numpy() {
    let c = check_case("two-models-one-tokenizer");
    assert_eq!(c.basis, Basis::SameUnits);
    assert_ne!(c.a.model.family, c.b.model.family);
}

#[test]
fn two_tokenizers_are_compared_by_words_as_numpy_does() {
    let c = check_case("two-tokenizers");
    assert_eq!(c.basis, Basis::Words);
    assert_eq!(c.query_label(2, false), "cat");
}

#[test]
fn causal_masks_are_left_out_as_numpy_does() {
    let c = check_case("causal-two-sentences");
    assert!(!c.is_visible(0, 0, 1));
    // The first row sees one key on both sides: nothing to compare, so not counted as equal.
    assert_eq!(c.rows(0, 0), c.n_queries() - 1);
    check_case("forced-words");
}

/// A bidirectional encoder (MiniLM) against a causal decoder (tiny GPT-2) on one sentence: each
/// side keeps its own mask, and neither A − B nor the distances come from what the causal
/// mask alone hides.
#[test]
fn a_bidirectional_model_against_a_causal_one_compares_what_both_can_attend() {
    let c = check_case("bidirectional-against-causal");
    assert!(c.masks_differ());
    // A's [CLS] and [SEP] have no partner: compared row 0 is the first word.
    assert_eq!(c.query_label(0, false), "The");
    // A sees the keys after each query, B does not; the cells compared are B's.
    let (first, last) = (0, c.n_keys() - 1);
    assert!(c.a_visible_layer(0)[first * c.n_keys() + last]);
    assert!(!c.b_visible_layer(0)[first * c.n_keys() + last]);
    assert_eq!(c.visible_layer(0), c.b_visible_layer(0));
    for l in 0..c.layers {
        for h in 0..c.heads {
            // Every compared row is a distribution over the keys both can attend, on both sides.
            let (a, b) = (c.a_compared(l, h), c.b_compared(l, h));
            for q in 0..c.n_queries() {
                let row = q * c.n_keys()..(q + 1) * c.n_keys();
                for side in [&a[row.clone()], &b[row.clone()]] {
                    let sum: f32 = side.iter().sum();
                    assert!(sum == 0.0 || (sum - 1.0).abs() < 1e-5, "{l} {h} {q}: {sum}");
                }
            }
            // “The” sees itself alone on B's side: no difference there, and the row is not
            // among those counted.
            assert_eq!(c.diff(l, h)[first * c.n_keys() + first], 0.0);
            assert!(c.rows(l, h) < c.n_queries(), "{l} {h}");
        }
    }
}

fn json_of(path: &std::path::Path) -> Value {
    serde_json::from_str(&fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn diff_writes_every_output_and_they_parse() {
    let dir = tempfile::tempdir().unwrap();
    let out = |n: &str| dir.path().join(n);
    let (a, b) = (fixture("minilm-cat.json"), fixture("minilm-dog.json"));
    let o = run(&[
        "diff",
        s(&a),
        s(&b),
        "--json",
        s(&out("c.json")),
        "--png",
        s(&out("d.png")),
        "--svg",
        s(&out("d.svg")),
        "--html",
        s(&out("c.html")),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let view = String::from_utf8_lossy(&o.stdout);
    assert!(view.contains("Farthest apart"), "{view}");
    assert!(view.contains("Only in A: cat ."), "{view}");
    let doc = json_of(&out("c.json"));
    assert_eq!(doc["format"], "attnviz-comparison");
    assert_eq!(doc["basis"], "aligned_tokens");
    // The JSON's numbers are the library's (6 significant digits).
    let r = reference("minilm-two-sentences");
    let top = &doc["ranked"][0];
    let (l, h) = (
        top["layer"].as_u64().unwrap() as usize,
        top["head"].as_u64().unwrap() as usize,
    );
    let want = r["distance"][l][h].as_f64().unwrap();
    assert!((top["distance"].as_f64().unwrap() - want).abs() < 1e-5 * want.max(1e-3));
    assert_eq!(doc["diff"].as_array().unwrap().len(), 6);
    assert_eq!(doc["diff"][0][0].as_array().unwrap().len(), 7);
    assert!(fs::read(out("d.png")).unwrap().starts_with(b"\x89PNG"));
    assert!(fs::read_to_string(out("d.svg")).unwrap().contains("<svg"));
    let html = fs::read_to_string(out("c.html")).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>") && html.contains("Content-Security-Policy"));
    for figure in ["head", "layer"] {
        let png = out(&format!("{figure}.png"));
        let o = run(&[
            "diff",
            s(&a),
            s(&b),
            "--figure",
            figure,
            "--png",
            s(&png),
            "-q",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(o.stdout.is_empty());
        assert!(fs::read(&png).unwrap().starts_with(b"\x89PNG"));
    }
}

#[test]
fn the_same_file_twice_is_allowed_and_zero() {
    let dir = tempfile::tempdir().unwrap();
    let a = fixture("gpt2-a.json");
    let j = dir.path().join("same.json");
    let o = run(&["diff", s(&a), s(&a), "--json", s(&j), "-q"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc = json_of(&j);
    assert_eq!(doc["basis"], "same_units");
    for row in doc["distance"].as_array().unwrap() {
        for d in row.as_array().unwrap() {
            assert_eq!(d.as_f64(), Some(0.0));
        }
    }
}

#[test]
fn bad_input_is_one_line_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let j = dir.path().join("out.json");
    let (bert, roberta) = (fixture("minilm-cat.json"), fixture("roberta-cat.json"));
    // Mismatched shapes: 6 × 12 against 2 × 4.
    let o = run(&["diff", s(&bert), s(&roberta), "--json", s(&j)]);
    assert_clean_failure(&o, "--shared");
    // … compared on what they share when asked.
    let o = run(&[
        "diff",
        s(&bert),
        s(&roberta),
        "--shared",
        "--json",
        s(&j),
        "-q",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(json_of(&j)["shared_only"], true);
    fs::remove_file(&j).unwrap();
    // An unreadable file.
    let missing = dir.path().join("missing.json");
    let o = run(&["diff", s(&missing), s(&bert), "--json", s(&j)]);
    assert_clean_failure(&o, "missing.json");
    let garbage = dir.path().join("garbage.json");
    fs::write(&garbage, b"{\"format\": 3").unwrap();
    let o = run(&["diff", s(&bert), s(&garbage), "--json", s(&j)]);
    assert_clean_failure(&o, "garbage.json");
    // A head the comparison lacks.
    let o = run(&["diff", s(&bert), s(&bert), "--head", "12", "--json", s(&j)]);
    assert_clean_failure(&o, "--head 12 is out of range");
    // Nothing in common.
    assert_eq!(tree(dir.path()), ["garbage.json"]);
}

/// `attnviz diff --words --shared` of a bidirectional export against a causal one: every view
/// says the masks differ, and the head's largest differences never come from the mask alone
/// (the first word sees itself alone on B's side: A − B is 0 there).
#[test]
fn diff_of_a_bidirectional_and_a_causal_export_says_the_masks_differ() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("c.html");
    let (a, b) = (fixture("minilm-cat.json"), fixture("gpt2-a.json"));
    let o = run(&[
        "diff",
        s(&a),
        s(&b),
        "--words",
        "--shared",
        "--color",
        "never",
        "--top",
        "100",
        "--html",
        s(&html),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let view = String::from_utf8_lossy(&o.stdout);
    assert!(
        view.contains("Masks differ: A is bidirectional, B causal."),
        "{view}"
    );
    let table = view.split("largest differences").nth(1).unwrap();
    assert!(!table.contains("The → The"), "{table}");
    let page = fs::read_to_string(&html).unwrap();
    assert!(page.contains("\"masks_differ\":true"));
    assert!(page.contains("Masks differ: A is bidirectional, B causal"));
}
