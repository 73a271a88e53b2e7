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

fn origin(heads: usize, kv_head: Option<Vec<usize>>, level: Level) -> Origin {
    Origin {
        model: ModelInfo {
            id: "m".into(),
            revision: None,
            name: None,
            family: "llama".into(),
            layers: 1,
            heads,
            hidden_size: 0,
            head_dim: 0,
        },
        level,
        special_excluded: false,
        holds: Holds::Raw,
        windows: None,
        kv_head,
        positions: PositionScheme::Rotary,
        layer_numbers: None,
        image: None,
        pictures: Vec::new(),
        prefix: 0,
        router: None,
        non_softmax: None,
        sink_shares: None,
        speech: None,
        target: None,
        generated_text: None,
    }
}

#[test]
fn metadata_that_contradicts_the_arrays_is_refused() {
    // A key/value head that is not one of the heads.
    let mut a = arrays([1, 2, 3, 3], &["a", "b", "c"]);
    a.origin = Some(origin(2, Some(vec![0, 7]), Level::Token));
    let e = build(a).unwrap_err().to_string();
    assert_eq!(
        e,
        "attention: kv_head says head 1 reads key/value head 7, but there are 2 heads (0 to 1); \
         give each head's key/value head, or drop kv_head"
    );
    let mut a = arrays([1, 2, 3, 3], &["a", "b", "c"]);
    a.origin = Some(origin(2, Some(vec![0, 0]), Level::Token));
    assert!(build(a).is_ok(), "grouped-query heads sharing head 0");

    // "causal" over a weight above the diagonal (the weights here see every key).
    let mut a = arrays([1, 1, 3, 3], &["a", "b", "c"]);
    a.mask = Some(MaskKind::Causal);
    let e = build(a).unwrap_err().to_string();
    assert!(
        e.starts_with(
            "attention says its mask is causal, but layer 0, head 0, query 0 attends to the \
             later key 1 with weight"
        ),
        "{e}"
    );
    let mut a = arrays([1, 1, 3, 3], &["a", "b", "c"]);
    a.weights = weights([1, 1, 3, 3], true);
    a.mask = Some(MaskKind::Causal);
    assert_eq!(build(a).unwrap().0.mask, MaskKind::Causal);

    // Spans past the longest input, overlapping, empty, or wider than a token at token level.
    let bad_spans = [
        (
            vec![0..1, 1..2, 2..1_000_000_000_000],
            "span 2 of tokens, [2, 1000000000000], ends past the longest input",
        ),
        (
            vec![0..2, 1..3, 3..4],
            "span 1 of tokens, [1, 3], overlaps the unit before it",
        ),
        (
            vec![0..1, 1..1, 1..2],
            "span 1 of tokens, [1, 1], is empty or reversed",
        ),
    ];
    for (spans, want) in bad_spans {
        let mut a = arrays([1, 1, 3, 3], &["a", "b", "c"]);
        a.origin = Some(origin(1, None, Level::Word));
        a.queries.spans = Some(spans);
        let e = build(a).unwrap_err().to_string();
        assert!(e.starts_with(&format!("attention: {want}")), "{e}");
    }
    let mut a = arrays([1, 1, 3, 3], &["a", "b", "c"]);
    a.queries.spans = Some(vec![0..1, 1..3, 3..4]);
    let e = build(a).unwrap_err().to_string();
    assert!(
        e.contains("covers more than one token at token level"),
        "{e}"
    );
    let mut a = arrays([1, 1, 3, 3], &["a", "b", "c"]);
    a.origin = Some(origin(1, None, Level::Word));
    a.queries.spans = Some(vec![1..3, 3..4, 6..9]);
    assert!(
        build(a).is_ok(),
        "words with special tokens removed leave gaps"
    );

    // Word ids beyond the units.
    let mut a = arrays([1, 1, 3, 3], &["a", "b", "c"]);
    a.queries.word_ids = Some(vec![None, Some(0), Some(1_000_000_000_000_000_000)]);
    let e = build(a).unwrap_err().to_string();
    assert!(
        e.starts_with("attention: unit 2 of tokens has word id 1000000000000000000, but 3 units hold at most 3 words"),
        "{e}"
    );
}

/// A `.npz` in memory: `(name, .npy bytes)` entries, deflated.
fn npz(entries: &[(&str, Vec<u8>)]) -> Vec<u8> {
    use std::io::Write;
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .large_file(true);
    for (name, bytes) in entries {
        zip.start_file(format!("{name}.npy"), opts).unwrap();
        zip.write_all(bytes).unwrap();
    }
    zip.finish().unwrap().into_inner()
}

/// A `.npy` of `descr` and `shape` with `data` after its header.
fn npy(descr: &str, fortran: bool, shape: &[usize], data: &[u8]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    let dims = if shape.len() == 1 {
        format!("{},", dims[0])
    } else {
        dims.join(", ")
    };
    let mut h = format!(
        "{{'descr': '{descr}', 'fortran_order': {}, 'shape': ({dims}), }}",
        if fortran { "True" } else { "False" }
    );
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(h.len() as u16).to_le_bytes());
    out.extend_from_slice(h.as_bytes());
    out.extend_from_slice(data);
    out
}

fn strings_npy(tokens: &[&str]) -> Vec<u8> {
    let width = tokens.iter().map(|t| t.chars().count()).max().unwrap_or(1);
    let mut data = Vec::new();
    for t in tokens {
        let mut chars: Vec<u32> = t.chars().map(u32::from).collect();
        chars.resize(width, 0);
        data.extend(chars.iter().flat_map(|c| c.to_le_bytes()));
    }
    npy(&format!("<U{width}"), false, &[tokens.len()], &data)
}

#[test]
fn fortran_order_f64_across_many_chunks_reads_back_in_c_order() {
    // 3 × 5 × 40 × 40 = 24,000 weights of 8 bytes (192 KB) split over chunks too: written in
    // Fortran order (first axis fastest), each weight a function of its C-order position.
    let shape = [3usize, 5, 40, 40];
    let [l, h, q, k] = shape;
    let want = weights(shape, false);
    let c_index = |a: usize, b: usize, c: usize, d: usize| ((a * h + b) * q + c) * k + d;
    let mut data = Vec::new();
    for d in 0..k {
        for c in 0..q {
            for b in 0..h {
                for a in 0..l {
                    data.extend_from_slice(&f64::from(want[c_index(a, b, c, d)]).to_be_bytes());
                }
            }
        }
    }
    let tokens: Vec<String> = (0..q).map(|i| format!("t{i}")).collect();
    let refs: Vec<&str> = tokens.iter().map(String::as_str).collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.npz");
    std::fs::write(
        &path,
        npz(&[
            ("attention", npy(">f8", true, &shape, &data)),
            ("tokens", strings_npy(&refs)),
        ]),
    )
    .unwrap();
    let imported = read(&path, &ReadOptions::default()).unwrap();
    assert_eq!(imported.kinds[0].weights(), want.as_slice());
    assert_eq!(imported.kinds[0].tokens()[39], "t39");
}

#[test]
fn a_file_over_the_budget_is_refused_from_its_headers() {
    let shape = [2, 3, 4, 4];
    let w = weights(shape, false);
    let data: Vec<u8> = w.iter().flat_map(|v| v.to_le_bytes()).collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b.npz");
    std::fs::write(
        &path,
        npz(&[
            ("attention", npy("<f4", false, &shape, &data)),
            ("tokens", strings_npy(&["a", "b", "c", "d"])),
        ]),
    )
    .unwrap();
    // 96 weights of 4 bytes, 4 tokens of 24 + 4 bytes, and the 384 bytes of the attention's
    // data read while it is decoded.
    let needs = 96 * 4 + 4 * 28 + 384;
    let with = |max_memory: u64, cost: Cost| ReadOptions {
        max_memory: Some(max_memory),
        cost,
        ..ReadOptions::default()
    };
    assert!(read(&path, &with(needs, Cost::default())).is_ok());
    let e = read(&path, &with(needs - 1, Cost::default()))
        .unwrap_err()
        .to_string();
    assert!(
        e.ends_with(
            "b.npz: its attention (96 weights, attention [2, 3, 4, 4]) needs about 1 kB of \
             memory to read and draw, more than the memory budget of 1 kB; save a part of it \
             (fewer layers or heads, a shorter input: a[:, :, :512, :512]) or raise the budget"
        ),
        "{e}"
    );
    // The outputs' cost: 10 bytes a weight and 100 a cell of one 4 × 4 matrix.
    let cost = Cost {
        per_weight: 10,
        per_cell: 100,
    };
    let needs = needs + 960 + 1600;
    assert!(read(&path, &with(needs, cost)).is_ok());
    assert!(matches!(
        read(&path, &with(needs - 1, cost)),
        Err(ImportError::TooBig { needs: n, .. }) if n == needs
    ));
}

#[test]
fn only_the_kind_asked_for_is_decoded_and_it_reads_as_part_of_its_run() {
    let enc = [1, 2, 3, 3];
    let dec = [1, 2, 2, 2];
    let cross = [1, 2, 2, 3];
    let f32s = |shape: [usize; 4], causal| -> Vec<u8> {
        weights(shape, causal)
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect()
    };
    // The decoder's data stops short: reading it fails, so a read that succeeds did not.
    let mut truncated = npy("<f4", false, &dec, &f32s(dec, true));
    truncated.truncate(truncated.len() - 4);
    let entries = |decoder: Vec<u8>| {
        npz(&[
            (
                "encoder_attention",
                npy("<f4", false, &enc, &f32s(enc, false)),
            ),
            ("decoder_attention", decoder),
            (
                "cross_attention",
                npy("<f4", false, &cross, &f32s(cross, false)),
            ),
            ("encoder_tokens", strings_npy(&["<s>", "Hi", "</s>"])),
            ("decoder_tokens", strings_npy(&["<s>", "Bon"])),
        ])
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ed.npz");
    std::fs::write(&path, entries(truncated)).unwrap();
    let e = read(&path, &ReadOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("decoder_attention: the data stops after"), "{e}");
    let only = |kind| ReadOptions {
        only: Some(kind),
        ..ReadOptions::default()
    };
    let cross_only = read(&path, &only(AttentionKind::Cross)).unwrap();
    assert_eq!(cross_only.kinds.len(), 1);
    assert_eq!(cross_only.kind_names(), ["encoder", "decoder", "cross"]);
    let c = &cross_only.kinds[0];
    assert_eq!(c.kind, AttentionKind::Cross);
    // As in a whole run: the source's text, quoting the decoder's.
    assert_eq!(c.text, "Hi");
    assert_eq!(c.target_text.as_deref(), Some("Bon"));
    assert_eq!(
        read(&path, &only(AttentionKind::Encoder)).unwrap().kinds[0].text,
        "Hi"
    );

    // With the decoder whole, the kind read alone is the one read with the others.
    std::fs::write(&path, entries(npy("<f4", false, &dec, &f32s(dec, true)))).unwrap();
    let all = read(&path, &ReadOptions::default()).unwrap();
    let alone = read(&path, &only(AttentionKind::Cross)).unwrap();
    let full = all.kind(AttentionKind::Cross).unwrap();
    assert_eq!(alone.kinds[0].weights(), full.weights());
    assert_eq!(alone.kinds[0].queries(), full.queries());
    assert_eq!(alone.kinds[0].keys(), full.keys());
}

/// A document of value-weighted (or norm-aware) shares says so in `attention_holds`, and reads
/// back as what it holds, with the model's title that names the weighting; a raw one reads
/// back raw.
#[test]
fn what_attention_holds_survives_a_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    for holds in [Holds::Raw, Holds::ValueWeighted, Holds::NormAware] {
        let mut att = crate::attention::fixtures::synthetic(&["[CLS]", "a", "b", "[SEP]"], 2, 2);
        att.holds = holds;
        att.model.name = Some(format!("tiny · {}", holds.as_str()));
        let path = dir.path().join("a.json");
        let mut out = Vec::new();
        crate::json::write_json(&att, &[], Default::default(), &mut out).unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(doc["attention_holds"], holds.as_str());
        assert_eq!(doc["model"]["name"], format!("tiny · {}", holds.as_str()));
        std::fs::write(&path, &out).unwrap();
        let back = read(&path, &ReadOptions::default()).unwrap();
        let a = &back.kinds[0];
        assert_eq!(a.holds, holds);
        assert_eq!(a.model.name(), format!("tiny · {}", holds.as_str()));
    }
}

/// A mixture-of-experts model's `router` section is written with its load and reads back as the
/// same decisions; one that does not fit together is refused in one line.
#[test]
fn the_router_section_survives_a_round_trip() {
    use crate::attention::{Router, RouterLayer};
    let dir = tempfile::tempdir().unwrap();
    let router = Router {
        experts: 3,
        top_k: 2,
        renormalised: false,
        tokens: labels(&["<s>", "a", "b"]),
        layers: vec![RouterLayer {
            layer: 1,
            probs: vec![0.5, 0.3, 0.2, 0.1, 0.2, 0.7, 0.25, 0.5, 0.25],
            chosen: vec![0, 1, 2, 1, 1, 0],
            weights: vec![0.5, 0.3, 0.7, 0.2, 0.5, 0.25],
        }],
    };
    let att = crate::attention::fixtures::synthetic(&["<s>", "a", "b"], 2, 2)
        .with_router(Some(router.clone()))
        .unwrap();
    let mut out = Vec::new();
    crate::json::write_json(&att, &[], Default::default(), &mut out).unwrap();
    let mut doc: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(
        doc["router"]["layers"][0]["load"],
        serde_json::json!([2, 3, 1])
    );
    assert_eq!(
        doc["router"]["layers"][0]["chosen"][1],
        serde_json::json!([2, 1])
    );
    let path = dir.path().join("moe.json");
    std::fs::write(&path, &out).unwrap();
    let back = read(&path, &ReadOptions::default()).unwrap();
    assert_eq!(back.kinds[0].router.as_deref(), Some(&router));

    doc["router"]["layers"][0]["load"] = serde_json::json!([1, 3, 2]);
    std::fs::write(&path, doc.to_string()).unwrap();
    let err = read(&path, &ReadOptions::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("does not count the chosen experts"), "{err}");
    assert!(!err.contains('\n'));
    doc["router"]["layers"][0]["chosen"][0] = serde_json::json!([0, 7]);
    std::fs::write(&path, doc.to_string()).unwrap();
    let err = read(&path, &ReadOptions::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("expert 7 of 3"), "{err}");
}
