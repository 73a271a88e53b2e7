use super::*;

fn labels(s: &[&str]) -> Vec<String> {
    s.iter().map(|t| t.to_string()).collect()
}

/// Row-normalised weights of `shape` with a little structure.
fn weights(shape: [usize; 4], causal: bool) -> Vec<f32> {
    let [l, h, q, k] = shape;
    let mut w = Vec::new();
    for m in 0..l * h {
        for row in 0..q {
            let visible = if causal { row + 1 } else { k };
            let raw: Vec<f32> = (0..k)
                .map(|c| {
                    if c < visible {
                        1.0 + ((m + row * 3 + c) % 5) as f32
                    } else {
                        0.0
                    }
                })
                .collect();
            let s: f32 = raw.iter().sum();
            w.extend(raw.iter().map(|x| x / s));
        }
    }
    w
}

fn arrays(shape: [usize; 4], tokens: &[&str]) -> Arrays {
    Arrays {
        name: "attention".into(),
        kind: AttentionKind::SelfAttention,
        shape,
        weights: weights(shape, false),
        queries: Tokens::labels(labels(tokens)),
        keys: None,
        mask: None,
        text: None,
        pair: None,
        source: "/data/run/att.npz".into(),
        tolerance: ROW_SUM_TOLERANCE,
        origin: None,
    }
}

#[test]
fn labels_become_units_with_roles_words_and_text() {
    let mut a = arrays(
        [2, 3, 6, 6],
        &["[CLS]", "the", "un", "##fit", "[SEP]", "ok"],
    );
    a.queries.sentence_b_start = Some(5);
    let (att, warning) = build(a).unwrap();
    assert!(warning.is_none());
    assert_eq!(att.model.name(), "att.npz");
    assert_eq!(att.model.family, "");
    assert_eq!(att.text, "the unfit");
    assert_eq!(att.pair.as_deref(), Some("ok"));
    assert_eq!(att.sentence_b_start(), Some(5));
    assert_eq!(att.mask, MaskKind::Bidirectional);
    let q = att.queries();
    assert_eq!(q.roles[3], Role::Piece);
    assert_eq!(q.word_ids, [None, Some(0), Some(1), Some(1), None, Some(2)]);
    assert!(q.ids.is_empty(), "ids unknown");
    assert_eq!(
        att.weight(1, 2, 3, 4),
        weights([2, 3, 6, 6], false)[((3 + 2) * 6 + 3) * 6 + 4]
    );
    // The word view merges the pieces inferred from the labels.
    let words = crate::analysis::to_words(&att);
    assert_eq!(words.tokens(), ["[CLS]", "the", "unfit", "[SEP]", "ok"]);
}

#[test]
fn given_roles_win_over_labels() {
    let mut a = arrays([1, 1, 3, 3], &["<x>", "a", "b"]);
    a.queries.roles = Some(vec![Role::Word, Role::Word, Role::Piece]);
    let (att, _) = build(a).unwrap();
    assert_eq!(att.queries().roles, [Role::Word, Role::Word, Role::Piece]);
    assert_eq!(att.queries().word_ids, [Some(0), Some(1), Some(1)]);
}

#[test]
fn a_causal_array_is_found_causal() {
    let mut a = arrays([1, 2, 4, 4], &["<|endoftext|>", "The", "Ġcat", "Ġsat"]);
    a.weights = weights([1, 2, 4, 4], true);
    let (att, _) = build(a).unwrap();
    assert_eq!(att.mask, MaskKind::Causal);
    assert!(att.is_masked(1, 2));
    assert_eq!(att.queries().roles[0], Role::Start);
}

#[test]
fn shapes_and_tokens_that_disagree_get_one_line() {
    let e = build(arrays([1, 1, 3, 3], &["a", "b"]))
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "attention has 3 queries but 2 tokens are given; give one token per row"
    );
    let mut a = arrays([1, 1, 3, 3], &["a", "b", "c"]);
    a.shape = [1, 1, 3, 2];
    a.weights.truncate(6);
    let e = build(a).unwrap_err().to_string();
    assert!(e.starts_with("attention is 3 queries × 2 keys"), "{e}");
    let mut a = arrays([1, 1, 3, 3], &["a", "b", "c"]);
    a.queries.sentence_b_start = Some(3);
    let e = build(a).unwrap_err().to_string();
    assert!(
        e.starts_with("sentence_b_start 3 is not inside the 3 tokens"),
        "{e}"
    );
    let mut a = arrays([1, 1, 3, 3], &["a", "b", "c"]);
    a.queries.roles = Some(vec![Role::Word]);
    let e = build(a).unwrap_err().to_string();
    assert_eq!(e, "tokens: 1 roles for 3 tokens; give one per token");
    let mut a = arrays([1, 1, 3, 3], &["a", "b", "c"]);
    a.weights[4] = f32::NAN;
    let e = build(a).unwrap_err().to_string();
    assert!(
        e.starts_with("attention holds NaN at layer 0, head 0, query 1, key 1"),
        "{e}"
    );
}

#[test]
fn rows_off_by_more_than_the_tolerance_warn_with_the_amount() {
    let mut a = arrays([1, 1, 3, 3], &["a", "b", "c"]);
    for w in &mut a.weights[3..6] {
        *w *= 0.5;
    }
    let (att, warning) = build(a).unwrap();
    let w = warning.expect("a warning").to_string();
    assert!(
        w.starts_with("attention: 1 of 3 rows don't sum to 1 (by more than 0.001); the furthest, layer 0 head 0 query 1, sums to 0.500000"),
        "{w}"
    );
    // Drawn as given.
    assert!((att.head(0, 0)[3..6].iter().sum::<f32>() - 0.5).abs() < 1e-6);
}

#[test]
fn cross_attention_has_two_sides() {
    let shape = [2, 2, 3, 5];
    let a = Arrays {
        name: "cross_attention".into(),
        kind: AttentionKind::Cross,
        shape,
        weights: weights(shape, false),
        queries: Tokens::labels(labels(&["</s>", "<s>", "ĠDer"])),
        keys: Some(Tokens::labels(labels(&["<s>", "The", "Ġcat", ".", "</s>"]))),
        mask: None,
        text: None,
        pair: None,
        source: "x.npz".into(),
        tolerance: ROW_SUM_TOLERANCE,
        origin: None,
    };
    let (att, _) = build(a.clone()).unwrap();
    assert_eq!((att.n_queries(), att.n_keys()), (3, 5));
    assert_eq!(att.kind, AttentionKind::Cross);
    assert_eq!(att.keys().roles[4], Role::End);
    let mut short = a;
    short.keys = Some(Tokens::labels(labels(&["a"])));
    let e = build(short).unwrap_err().to_string();
    assert_eq!(
        e,
        "cross_attention has 5 keys but 1 encoder_tokens are given; give one token per row and column"
    );
}

#[test]
fn token_files_are_lines_or_a_json_array() {
    let dir = tempfile::tempdir().unwrap();
    let lines = dir.path().join("t.txt");
    std::fs::write(&lines, "[CLS]\nhi\r\n\n[SEP]\n").unwrap();
    assert_eq!(
        read_token_file(&lines).unwrap(),
        ["[CLS]", "hi", "", "[SEP]"]
    );
    let json = dir.path().join("t.json");
    std::fs::write(&json, r#"["a", "b\nc"]"#).unwrap();
    assert_eq!(read_token_file(&json).unwrap(), ["a", "b\nc"]);
    std::fs::write(&json, "[\"a\", 2]").unwrap();
    assert!(read_token_file(&json)
        .unwrap_err()
        .to_string()
        .contains("not one of strings"));
}

#[test]
fn files_attnviz_cannot_read_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let e = read(dir.path(), &ReadOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("is a folder"), "{e}");
    let f = dir.path().join("x.bin");
    std::fs::write(&f, b"\x00\x01garbage").unwrap();
    let e = read(&f, &ReadOptions::default()).unwrap_err().to_string();
    assert!(
        e.contains("is not an attnviz JSON export, an .npz or a .safetensors file"),
        "{e}"
    );
    std::fs::write(&f, b"{\"a\": 1}").unwrap();
    let e = read(&f, &ReadOptions::default()).unwrap_err().to_string();
    assert!(e.contains("not an attnviz export"), "{e}");
    std::fs::write(
        &f,
        b"{\"format\": \"attnviz-attention\", \"format_version\": 9}",
    )
    .unwrap();
    let e = read(&f, &ReadOptions::default()).unwrap_err().to_string();
    assert!(
        e.contains("format version 9 is not one this attnviz reads"),
        "{e}"
    );
    let missing = dir.path().join("nope.npz");
    let e = read(&missing, &ReadOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("cannot read"), "{e}");
}
