//! attnviz's analyses against the independent numpy implementation in
//! `tests/reference/analysis_reference.py`, on real all-MiniLM-L6-v2 attentions (and one synthetic
//! edge case) committed in `tests/reference/analysis/`. Everything must agree to 1e-6.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use attnviz::analysis::{self, Analysis, HeadStats, ViewOptions};
use attnviz::attention::{Role, Units};
use attnviz::{Attention, Level, ModelInfo};
use candle_core::{Device, Tensor};
use serde_json::Value;

const TOL: f64 = 1e-6;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reference/analysis")
}

fn load_json(name: &str) -> Value {
    let text = std::fs::read_to_string(dir().join(name)).expect("reference JSON is committed");
    serde_json::from_str(&text).expect("reference JSON parses")
}

fn load_tensors(name: &str) -> HashMap<String, Tensor> {
    candle_core::safetensors::load(dir().join(name), &Device::Cpu)
        .expect("reference tensors are committed")
}

fn flat_f64(t: &Tensor) -> Vec<f64> {
    t.to_dtype(candle_core::DType::F64)
        .and_then(|t| t.flatten_all())
        .and_then(|t| t.to_vec1())
        .unwrap()
}

use crate::support::data::strings;

fn u32s(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

fn bools(v: &Value) -> Vec<bool> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_bool().unwrap())
        .collect()
}

fn word_ids(v: &Value) -> Vec<Option<usize>> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().map(|w| w as usize))
        .collect()
}

/// The units of a committed BERT input as the tokenizer layer gives them: roles from the special
/// flags (the first special token opens the input, the others are separators) and the word ids
/// (a piece continues its word), surfaces from the labels (these inputs are lower-cased BERT
/// tokens, whose text is the token without its `##`, as the reference script's word labels are).
fn units(case: &Value) -> Units {
    let tokens = strings(&case["tokens"]);
    let special = bools(&case["special"]);
    let words = word_ids(&case["word_ids"]);
    let roles = (0..tokens.len())
        .map(|i| match (special[i], i) {
            (true, 0) => Role::Start,
            (true, _) => Role::End,
            (false, i) if i > 0 && words[i].is_some() && words[i] == words[i - 1] => Role::Piece,
            _ => Role::Word,
        })
        .collect();
    let surfaces = tokens
        .iter()
        .zip(&special)
        .map(|(t, &s)| {
            if s {
                String::new()
            } else {
                t.strip_prefix("##").unwrap_or(t).to_string()
            }
        })
        .collect();
    let types = u32s(&case["token_type_ids"]);
    Units::tokens(
        tokens,
        u32s(&case["input_ids"]),
        types.clone(),
        types,
        roles,
        words,
        surfaces,
    )
}

/// The committed input of one case as an [`Attention`], built like the engine builds it.
fn input(case: &Value, tensors: &HashMap<String, Tensor>) -> Attention {
    let name = case["name"].as_str().unwrap();
    let m = &case["model"];
    let weights: Vec<f32> = tensors[name].flatten_all().unwrap().to_vec1().unwrap();
    Attention::new(
        ModelInfo {
            id: m["id"].as_str().unwrap().into(),
            revision: None,
            name: None,
            family: "BERT".into(),
            layers: m["layers"].as_u64().unwrap() as usize,
            heads: m["heads"].as_u64().unwrap() as usize,
            hidden_size: m["hidden_size"].as_u64().unwrap() as usize,
            head_dim: m["head_dim"].as_u64().unwrap() as usize,
        },
        case["text"].as_str().unwrap().into(),
        case["pair"].as_str().map(String::from),
        units(case),
        weights,
    )
    .expect("reference input is consistent")
}

fn assert_close(what: &str, got: impl IntoIterator<Item = f64>, want: &[f64]) {
    let got: Vec<f64> = got.into_iter().collect();
    assert_eq!(got.len(), want.len(), "{what}: length");
    let (i, diff) = got
        .iter()
        .zip(want)
        .map(|(g, w)| (g - w).abs())
        .enumerate()
        .fold((0, 0.0), |acc, (i, d)| if d > acc.1 { (i, d) } else { acc });
    assert!(
        diff <= TOL,
        "{what}: max |diff| {diff:e} at {i} (got {}, want {})",
        got[i],
        want[i]
    );
}

fn check_units(what: &str, got: &Attention, want: &Value) {
    let level = if got.level == Level::Word {
        "word"
    } else {
        "token"
    };
    assert_eq!(level, want["level"].as_str().unwrap(), "{what}: level");
    assert_eq!(
        got.special_excluded,
        want["special_excluded"].as_bool().unwrap(),
        "{what}: special_excluded"
    );
    let units = got.queries();
    assert_eq!(units.labels, strings(&want["tokens"]), "{what}: labels");
    assert_eq!(
        units.segments,
        u32s(&want["token_type_ids"]),
        "{what}: segments"
    );
    let special: Vec<bool> = units.roles.iter().map(|r| r.is_special()).collect();
    assert_eq!(special, bools(&want["special"]), "{what}: special");
    assert_eq!(
        units.word_ids,
        word_ids(&want["word_ids"]),
        "{what}: word ids"
    );
    let spans: Vec<[usize; 2]> = units.spans.iter().map(|s| [s.start, s.end]).collect();
    let want_spans: Vec<[usize; 2]> = serde_json::from_value(want["spans"].clone()).unwrap();
    assert_eq!(spans, want_spans, "{what}: spans");
}

fn check_stats(what: &str, got: &[Vec<HeadStats>], want: &Value) {
    type Field = (&'static str, fn(&HeadStats) -> f64);
    let fields: [Field; 10] = [
        ("entropy", |s| s.entropy),
        ("entropy_norm", |s| s.entropy_norm),
        ("distance", |s| s.distance),
        ("cls", |s| s.to_start),
        ("sep", |s| s.to_end),
        ("punct", |s| s.to_punct),
        ("self", |s| s.to_self),
        ("prev", |s| s.to_prev),
        ("next", |s| s.to_next),
        ("rows", |s| s.rows as f64),
    ];
    for (name, field) in fields {
        let want_grid: Vec<Vec<f64>> = serde_json::from_value(want[name].clone()).unwrap();
        let flat: Vec<f64> = want_grid.concat();
        assert_close(
            &format!("{what}: stat {name}"),
            got.iter().flatten().map(field),
            &flat,
        );
    }
    let want_labels: Vec<Vec<String>> = serde_json::from_value(want["label"].clone()).unwrap();
    for (l, (g, w)) in got.iter().zip(&want_labels).enumerate() {
        let g: Vec<&str> = g.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(g, *w, "{what}: labels of layer {l}");
    }
}

#[test]
fn analyses_match_numpy_reference() {
    let inputs = load_json("inputs.json");
    let expected = load_json("expected.json");
    let in_tensors = load_tensors("inputs.safetensors");
    let want = load_tensors("expected.safetensors");
    let cases = inputs["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 4);
    let mut checked = 0;
    for (case, exp) in cases.iter().zip(expected["cases"].as_array().unwrap()) {
        let name = case["name"].as_str().unwrap();
        assert_eq!(exp["name"].as_str().unwrap(), name);
        let att = input(case, &in_tensors);
        let views: [(&str, Option<ViewOptions>); 5] = [
            ("token", Some(ViewOptions::default())),
            (
                "word",
                Some(ViewOptions {
                    words: true,
                    no_special: false,
                }),
            ),
            (
                "nospecial",
                Some(ViewOptions {
                    words: false,
                    no_special: true,
                }),
            ),
            (
                "nospecial_word",
                Some(ViewOptions {
                    words: true,
                    no_special: true,
                }),
            ),
            // the other order, built by hand (the CLI never makes it)
            ("word_nospecial", None),
        ];
        for (vname, opts) in views {
            let what = format!("{name}/{vname}");
            let key = |t: &str| format!("{what}/{t}");
            let (shown, analysis) = match opts {
                Some(opts) => {
                    let (shown, a) = Analysis::compute_view(&att, opts).unwrap();
                    (shown.into_owned(), Some(a))
                }
                None => {
                    let w = analysis::without_special(&analysis::to_words(&att)).unwrap();
                    (w, None)
                }
            };
            let want_view = &exp["views"][vname];
            check_units(&what, &shown, want_view);
            assert_close(
                &format!("{what}: weights"),
                shown.weights().iter().map(|&w| w as f64),
                &flat_f64(&want[&key("weights")]),
            );
            let own = Analysis::compute(&shown);
            check_stats(&what, &own.stats, &want_view["stats"]);
            assert_close(
                &format!("{what}: layer means"),
                own.layer_means.iter().flatten().map(|&w| w as f64),
                &flat_f64(&want[&key("layer_means")]),
            );
            assert_close(
                &format!("{what}: rollout of the view's own matrices"),
                own.rollout.iter().flatten().map(|&w| w as f64),
                &flat_f64(&want[&key("rollout_own")]),
            );
            if let Some(a) = analysis {
                assert_eq!(a.stats, own.stats, "{what}: compute_view stats");
                assert_eq!(a.layer_means, own.layer_means, "{what}: compute_view means");
                assert_eq!(a.n, shown.len());
                assert_close(
                    &format!("{what}: token rollout mapped to the view"),
                    a.rollout.iter().flatten().map(|&w| w as f64),
                    &flat_f64(&want[&key("rollout")]),
                );
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 20);
}

#[test]
fn reference_cases_cover_pairs_pieces_and_punctuation() {
    let inputs = load_json("inputs.json");
    let tensors = load_tensors("inputs.safetensors");
    let cases = inputs["cases"].as_array().unwrap();
    let pair = input(&cases[1], &tensors);
    assert_eq!(pair.sentence_b_start(), Some(12));
    let words = analysis::to_words(&input(&cases[0], &tensors));
    assert!(words.tokens().contains(&"unbelievably".to_string()));
    let long = analysis::to_words(&input(&cases[2], &tensors));
    assert_eq!(
        long.tokens()[1],
        "pneumonoultramicroscopicsilicovolcanoconiosis"
    );
    assert_eq!(long.queries().spans[1], 1..18);
    let keys = analysis::KeyClasses::of(&long);
    assert!(!keys.punct.is_empty());
}

/// A statistic's `[layer][head]` grid from the reference, `null` (not defined) as NaN.
fn grid_or_nan(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .flat_map(|row| row.as_array().unwrap().iter())
        .map(|x| x.as_f64().unwrap_or(f64::NAN))
        .collect()
}

/// Causal statistics against the numpy reference, on real SmolLM2-135M attention (transformers,
/// eager) committed in `tests/reference/smollm2.safetensors`: rows that see one key left out,
/// `entropy / ln(visible keys)`, no next-token share, the share to the first token (the attention
/// sink) and the first-token-sink label, at token and word level.
#[test]
fn causal_statistics_match_numpy_reference() {
    use attnviz::attention::MaskKind;
    let expected = load_json("expected.json");
    let want = load_tensors("expected.safetensors");
    let real: HashMap<String, Tensor> =
        candle_core::safetensors::load(dir().join("../smollm2.safetensors"), &Device::Cpu)
            .expect("SmolLM2 reference tensors are committed");
    let cases = expected["causal_cases"].as_array().unwrap();
    assert_eq!(cases.len(), 2);
    let mut sinks = 0;
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let tokens = strings(&case["tokens"]);
        let n = tokens.len();
        let roles = strings(&case["roles"])
            .iter()
            .map(|r| Role::from_name(r).unwrap())
            .collect();
        let units = Units::tokens(
            tokens,
            u32s(&case["input_ids"]),
            vec![0; n],
            vec![0; n],
            roles,
            word_ids(&case["word_ids"]),
            strings(&case["surfaces"]),
        );
        let m = &case["model"];
        let size = |k: &str| m[k].as_u64().unwrap() as usize;
        let (heads, kv) = (size("heads"), size("kv_heads"));
        let weights: Vec<f32> = real[&format!("{name}.attentions")]
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap();
        let att = Attention::new(
            ModelInfo {
                id: "SmolLM2-135M-Instruct".into(),
                revision: None,
                name: None,
                family: "Llama".into(),
                layers: size("layers"),
                heads,
                hidden_size: size("hidden_size"),
                head_dim: size("head_dim"),
            },
            case["text"].as_str().unwrap().into(),
            None,
            units,
            weights,
        )
        .unwrap()
        .with_mask(MaskKind::Causal)
        .with_kv_heads((0..heads).map(|h| h / (heads / kv)).collect())
        .unwrap();
        for (vname, shown) in [("token", att.clone()), ("word", analysis::to_words(&att))] {
            let what = format!("causal {name}/{vname}");
            let want_view = &case["views"][vname];
            let spans: Vec<[usize; 2]> = shown
                .queries()
                .spans
                .iter()
                .map(|s| [s.start, s.end])
                .collect();
            let want_spans: Vec<[usize; 2]> =
                serde_json::from_value(want_view["spans"].clone()).unwrap();
            assert_eq!(spans, want_spans, "{what}: spans");
            assert_close(
                &format!("{what}: weights"),
                shown.weights().iter().map(|&w| w as f64),
                &flat_f64(&want[&format!("causal/{name}/{vname}/weights")]),
            );
            let stats = analysis::head_stats(&shown);
            let st = &want_view["stats"];
            type Field = (&'static str, fn(&HeadStats) -> f64);
            let fields: [Field; 9] = [
                ("entropy", |s| s.entropy),
                ("entropy_norm", |s| s.entropy_norm),
                ("distance", |s| s.distance),
                ("cls", |s| s.to_start),
                ("sep", |s| s.to_end),
                ("first", |s| s.to_first),
                ("punct", |s| s.to_punct),
                ("self", |s| s.to_self),
                ("prev", |s| s.to_prev),
            ];
            for (field, get) in fields {
                assert_close(
                    &format!("{what}: stat {field}"),
                    stats.iter().flatten().map(get),
                    &grid_or_nan(&st[field]),
                );
            }
            assert!(grid_or_nan(&st["next"]).iter().all(|v| v.is_nan()));
            assert!(
                stats.iter().flatten().all(|s| s.to_next.is_nan()),
                "{what}: next"
            );
            assert_close(
                &format!("{what}: rows"),
                stats.iter().flatten().map(|s| s.rows as f64),
                &grid_or_nan(&st["rows"]),
            );
            let want_labels: Vec<Vec<String>> =
                serde_json::from_value(st["label"].clone()).unwrap();
            for (l, (g, w)) in stats.iter().zip(&want_labels).enumerate() {
                let g: Vec<&str> = g.iter().map(|s| s.label.as_str()).collect();
                assert_eq!(g, *w, "{what}: labels of layer {l}");
            }
            sinks += stats
                .iter()
                .flatten()
                .filter(|s| s.label == analysis::HeadLabel::FirstTokenSink)
                .count();
        }
    }
    // The real model parks most of its attention on the first token: most heads are sinks.
    assert!(sinks > 2 * 270, "{sinks} first-token sinks");
}

/// One side of a committed cross-attention case, as the reference script gives its units.
fn side_units(v: &Value) -> Units {
    let tokens = strings(&v["tokens"]);
    let n = tokens.len();
    let roles = v["roles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| Role::from_name(r.as_str().unwrap()).expect("a role name"))
        .collect();
    Units::tokens(
        tokens,
        (0..n as u32).collect(),
        vec![0; n],
        vec![0; n],
        roles,
        word_ids(&v["word_ids"]),
        strings(&v["surfaces"]),
    )
}

#[test]
fn cross_attention_alignment_matches_numpy_reference() {
    use attnviz::attention::AttentionKind;
    let expected = load_json("expected.json");
    let want = load_tensors("expected.safetensors");
    let cases = expected["cross_cases"].as_array().unwrap();
    assert_eq!(
        cases.len(),
        6,
        "BART, Marian and T5, long source and long target"
    );
    let mut long_source = 0;
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let token = &want[&format!("cross/{name}/token/weights")];
        let weights: Vec<f32> = token.flatten_all().unwrap().to_vec1().unwrap();
        let (queries, keys) = (side_units(&case["decoder"]), side_units(&case["encoder"]));
        if keys.len() > 2 * queries.len() {
            long_source += 1;
        }
        let layers = case["layers"].as_u64().unwrap() as usize;
        let heads = case["heads"].as_u64().unwrap() as usize;
        let model = ModelInfo {
            id: name.into(),
            revision: None,
            name: None,
            family: "BART".into(),
            layers,
            heads,
            hidden_size: 32,
            head_dim: 32 / heads,
        };
        let att = Attention::cross(model, "source".into(), None, queries, keys, weights).unwrap();
        assert_eq!(att.kind, AttentionKind::Cross);
        for (vname, words, no_special) in [
            ("token", false, false),
            ("word", true, false),
            ("nospecial", false, true),
            ("nospecial_word", true, true),
        ] {
            let what = format!("cross {name}/{vname}");
            let view = &case["views"][vname];
            let opts = ViewOptions { words, no_special };
            let (shown, a) = Analysis::compute_view(&att, opts).unwrap();
            assert_eq!(shown.queries().labels, strings(&view["queries"]), "{what}");
            assert_eq!(shown.keys().labels, strings(&view["keys"]), "{what}");
            assert_close(
                &format!("{what}: weights"),
                shown.weights().iter().map(|&w| w as f64),
                &flat_f64(&want[&format!("cross/{name}/{vname}/weights")]),
            );
            let st = &view["stats"];
            let align = a
                .alignment
                .as_ref()
                .expect("cross-attention has alignment figures");
            type Field = (&'static str, fn(&analysis::AlignmentStats) -> f64);
            let fields: [Field; 4] = [
                ("entropy", |s| s.entropy),
                ("entropy_norm", |s| s.entropy_norm),
                ("argmax_share", |s| s.argmax_share),
                ("rows", |s| s.rows as f64),
            ];
            for (field, get) in fields {
                assert_close(
                    &format!("{what}: {field}"),
                    align.iter().flatten().map(get),
                    &grid_or_nan(&st[field]),
                );
            }
            // The head statistics cross-attention defines agree too; the position ones are
            // undefined.
            type Shared = (&'static str, fn(&HeadStats) -> f64);
            let shared: [Shared; 4] = [
                ("entropy", |s| s.entropy),
                ("to_start", |s| s.to_start),
                ("to_end", |s| s.to_end),
                ("to_punct", |s| s.to_punct),
            ];
            for (field, get) in shared {
                assert_close(
                    &format!("{what}: stat {field}"),
                    a.stats.iter().flatten().map(get),
                    &grid_or_nan(&st[field]),
                );
            }
            assert!(a.stats.iter().flatten().all(|s| s.distance.is_nan()
                && s.to_self.is_nan()
                && s.to_prev.is_nan()
                && s.to_next.is_nan()));
            assert!(a.rollout.iter().all(Vec::is_empty), "{what}: no rollout");
        }
    }
    assert_eq!(long_source, 3, "one long-source case per model");
}
