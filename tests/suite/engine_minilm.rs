//! The real all-MiniLM-L6-v2 through our encoder: shapes, probabilities, tokens, batching, the
//! captured query/key vectors and the length limit. (Agreement with Hugging Face transformers is
//! tested against committed reference outputs in the fidelity tests.)

use crate::support::engine as engine_support;

use std::sync::OnceLock;

use attnviz::model::{EncodeOptions, Model};
use engine_support::*;

fn model() -> &'static Model {
    static MODEL: OnceLock<Model> = OnceLock::new();
    MODEL.get_or_init(|| {
        let start = std::time::Instant::now();
        let m = Model::from_dir(&minilm_dir()).unwrap();
        eprintln!("MiniLM loaded in {:?}", start.elapsed());
        m
    })
}

fn vocab() -> Vec<String> {
    std::fs::read_to_string(minilm_dir().join("vocab.txt"))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn shapes_probabilities_and_tokens() {
    let m = model();
    assert_eq!(m.max_positions(), 512);
    let info = m.info();
    assert_eq!(
        (info.layers, info.heads, info.hidden_size, info.head_dim),
        (6, 12, 384, 32)
    );
    assert_eq!(info.revision, None);

    let out = m
        .encode(
            "The quick brown fox jumps over the lazy dog.",
            None,
            &EncodeOptions::default(),
        )
        .unwrap();
    let att = &out.attention;
    let n = att.len();
    let units = att.queries();
    assert_eq!(att.tokens().first().map(String::as_str), Some("[CLS]"));
    assert_eq!(att.tokens().last().map(String::as_str), Some("[SEP]"));
    assert_eq!(units.roles.first(), Some(&attnviz::attention::Role::Start));
    assert_eq!(units.roles.last(), Some(&attnviz::attention::Role::End));
    assert_eq!(units.roles.iter().filter(|r| r.is_special()).count(), 2);
    assert!(units.type_ids.iter().all(|&t| t == 0));
    assert_eq!(att.sentence_b_start(), None);
    assert_eq!(att.model.family, "BERT");
    // Ids and tokens agree with the model's own vocab.txt (line number = id).
    let vocab = vocab();
    for (tok, &id) in att.tokens().iter().zip(&units.ids) {
        assert_eq!(&vocab[id as usize], tok);
    }
    assert_eq!(att.weights().len(), 6 * 12 * n * n);
    assert_eq!(out.hidden.len(), n * 384);
    assert!(att.query_key.is_none());
    for l in 0..6 {
        for h in 0..12 {
            for row in att.head(l, h).chunks(n) {
                let sum: f32 = row.iter().sum();
                assert!(
                    (sum - 1.0).abs() < 1e-5,
                    "layer {l} head {h}: row sums to {sum}"
                );
                assert!(row.iter().all(|&w| (0.0..=1.0).contains(&w)));
            }
        }
    }
    // Heads differ from one another (a broadcasting slip would make them equal).
    assert!(max_diff(att.head(0, 0), att.head(0, 1)) > 1e-3);
    assert!(max_diff(att.head(0, 0), att.head(5, 0)) > 1e-3);
}

#[test]
fn pair_has_segments_and_continuing_word_ids() {
    let out = model()
        .encode(
            "The cat sat.",
            Some("It was tired."),
            &EncodeOptions::default(),
        )
        .unwrap();
    let att = &out.attention;
    // [CLS] the cat sat . [SEP] it was tired . [SEP]
    assert_eq!(att.len(), 11);
    assert_eq!(att.sentence_b_start(), Some(6));
    assert_eq!(
        att.queries().type_ids,
        vec![0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1]
    );
    assert_eq!(att.queries().segments, att.queries().type_ids);
    assert_eq!(
        att.queries().word_ids,
        vec![
            None,
            Some(0),
            Some(1),
            Some(2),
            Some(3),
            None,
            Some(4),
            Some(5),
            Some(6),
            Some(7),
            None
        ]
    );
    assert_eq!(att.pair.as_deref(), Some("It was tired."));
}

#[test]
fn batch_equals_single_sequences() {
    let m = model();
    let tok = m.tokenizer();
    let inputs = [
        ("Short one.", None),
        (
            "A somewhat longer sentence, with a comma and more words in it.",
            Some("And a pair."),
        ),
        ("Middle length sentence here.", None),
    ];
    let encoded: Vec<_> = inputs
        .iter()
        .map(|(t, p)| tok.encode(t, *p, 512, false).unwrap())
        .collect();
    let batch: Vec<(&[u32], &[u32])> = encoded
        .iter()
        .map(|e| (e.ids.as_slice(), e.type_ids.as_slice()))
        .collect();
    let together = m.forward_batch(&batch, true).unwrap();
    assert_eq!(together.len(), 3);
    for (e, got) in encoded.iter().zip(&together) {
        let alone = m.forward(&e.ids, &e.type_ids, true).unwrap();
        let n = e.ids.len();
        assert_eq!(got.weights.len(), 6 * 12 * n * n);
        let dw = max_diff(&got.weights, &alone.weights);
        let dh = max_diff(&got.hidden, &alone.hidden);
        let (gq, aq) = (
            got.query_key.as_ref().unwrap(),
            alone.query_key.as_ref().unwrap(),
        );
        let dq = max_diff(&gq.queries, &aq.queries).max(max_diff(&gq.keys, &aq.keys));
        eprintln!("n={n}: batch vs single max |Δ| weights {dw:e}, hidden {dh:e}, q/k {dq:e}");
        assert!(
            dw <= 1e-5 && dh <= 1e-4 && dq <= 1e-4,
            "n={n}: {dw} {dh} {dq}"
        );
    }
    assert!(m.forward_batch(&[], false).unwrap().is_empty());
}

#[test]
fn captured_queries_and_keys_reproduce_the_attention() {
    let out = model()
        .encode(
            "Queries meet keys.",
            Some("Softmax decides."),
            &EncodeOptions {
                truncate: false,
                capture_query_key: true,
                ..EncodeOptions::default()
            },
        )
        .unwrap();
    let att = &out.attention;
    let (n, d) = (att.len(), 32);
    assert_eq!(
        att.query_key.as_ref().unwrap().queries.len(),
        6 * 12 * n * d
    );
    let scale = 1.0 / (d as f32).sqrt();
    for l in 0..6 {
        for h in 0..12 {
            for q in 0..n {
                let qv = att.query(l, h, q).unwrap();
                let scores: Vec<f32> = (0..n)
                    .map(|k| {
                        let kv = att.key(l, h, k).unwrap();
                        qv.iter().zip(kv).map(|(a, b)| a * b).sum::<f32>() * scale
                    })
                    .collect();
                let max = scores.iter().cloned().fold(f32::MIN, f32::max);
                let exps: Vec<f32> = scores.iter().map(|s| (s - max).exp()).collect();
                let total: f32 = exps.iter().sum();
                for (k, e) in exps.iter().enumerate() {
                    let want = e / total;
                    let got = att.weight(l, h, q, k);
                    assert!(
                        (want - got).abs() < 1e-5,
                        "l{l} h{h} q{q} k{k}: {got} vs {want}"
                    );
                }
            }
        }
    }
}

#[test]
fn length_limit_and_truncation() {
    let m = model();
    let long = "word ".repeat(600);
    let err = m
        .encode(&long, None, &EncodeOptions::default())
        .unwrap_err();
    assert!(
        matches!(
            err,
            attnviz::model::Error::Tokenize(attnviz::tokenize::Error::TooLong {
                tokens: 602,
                max: 512
            })
        ),
        "{err}"
    );
    let err = err.to_string();
    assert_one_line(&err);
    // The library says what to do without naming a flag; the CLI adds `--truncate`
    // (tests/suite/cli.rs).
    assert!(
        err.contains("602 tokens") && err.contains("at most 512") && err.contains("shorten it"),
        "{err}"
    );

    let out = m
        .encode(
            &long,
            Some("a short pair"),
            &EncodeOptions {
                truncate: true,
                capture_query_key: false,
                ..EncodeOptions::default()
            },
        )
        .unwrap();
    assert_eq!(out.truncated_from, Some(606));
    let att = &out.attention;
    assert_eq!(att.len(), 512);
    assert_eq!(att.tokens().last().map(String::as_str), Some("[SEP]"));
    // Longest first: the short pair survives whole.
    let b: Vec<_> = att.tokens()[att.sentence_b_start().unwrap()..].to_vec();
    assert_eq!(b, ["a", "short", "pair", "[SEP]"]);
    for row in att.head(5, 11).chunks(512) {
        assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-5);
    }
}

#[test]
fn forward_rejects_bad_input() {
    let m = model();
    let check = |ids: &[u32], types: &[u32], want: &str| {
        let err = m.forward(ids, types, false).unwrap_err().to_string();
        assert_one_line(&err);
        assert!(err.contains(want), "{err}");
    };
    check(&[], &[], "no input tokens");
    check(&[101, 102], &[0], "2 input ids but 1 token type ids");
    check(&[101, 40000, 102], &[0, 0, 0], "token id 40000");
    check(&[101, 102], &[0, 2], "token type id 2");
    check(&vec![100; 513], &vec![0; 513], "513 tokens");
}
