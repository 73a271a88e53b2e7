//! Unit tests of the comparison on synthetic values. The agreement with an independent numpy
//! implementation on real exports is tested in `tests/suite/diff.rs`.

use super::*;
use crate::attention::fixtures::{decoder, info, peaked, synthetic, units_for};
use crate::attention::{LabelScheme, MaskKind};

#[test]
fn a_value_against_itself_is_zero_everywhere() {
    let a = synthetic(&["[CLS]", "the", "cat", "sat", "[SEP]"], 2, 3);
    let c = compare(&a, &a, CompareOptions::default()).unwrap();
    assert_eq!(c.basis, Basis::SameUnits);
    assert_eq!((c.layers, c.heads, c.n_queries()), (2, 3, 5));
    for l in 0..2 {
        for h in 0..3 {
            assert_eq!(c.distance(l, h), Some(0.0));
            assert!(c.diff(l, h).iter().all(|&d| d == 0.0));
            assert_eq!(c.rows(l, h), 5);
        }
    }
    assert_eq!(c.ranked().len(), 6);
}

#[test]
fn disjoint_rows_are_one_apart_and_known_rows_match_the_formula() {
    // One head, two tokens: A's rows are one-hot on key 0, B's on key 1: distance 1.
    let units = || units_for(&["x", "y"]);
    let one = |w: Vec<f32>| Attention::new(info(1, 1), "x y".into(), None, units(), w).unwrap();
    let a = one(vec![1.0, 0.0, 1.0, 0.0]);
    let b = one(vec![0.0, 1.0, 0.0, 1.0]);
    let c = compare(&a, &b, CompareOptions::default()).unwrap();
    assert!((c.distance(0, 0).unwrap() - 1.0).abs() < 1e-12);
    assert_eq!(c.diff(0, 0), [1.0, -1.0, 1.0, -1.0]);
    // P = (1, 0), Q = (½, ½): M = (¾, ¼); JSD = ½·log2(4/3) + ½·(¼·log2(2/3) + ¼·log2(2)).
    let b = one(vec![0.5, 0.5, 0.5, 0.5]);
    let c = compare(&a, &b, CompareOptions::default()).unwrap();
    let jsd = 0.5 * (4.0f64 / 3.0).log2() + 0.5 * (0.5 * (2.0f64 / 3.0).log2() + 0.5);
    assert!((c.distance(0, 0).unwrap() - jsd.sqrt()).abs() < 1e-9);
}

#[test]
fn different_tokens_are_aligned_and_the_rest_listed() {
    let a = synthetic(&["[CLS]", "the", "cat", "sat", "[SEP]"], 1, 2);
    let b = synthetic(&["[CLS]", "the", "big", "dog", "sat", "[SEP]"], 1, 2);
    let c = compare(&a, &b, CompareOptions::default()).unwrap();
    assert_eq!(c.basis, Basis::AlignedTokens);
    assert_eq!(c.queries.pairs, [(0, 0), (1, 1), (3, 4), (4, 5)]);
    assert_eq!(c.unmatched_a(false), ["cat"]);
    assert_eq!(c.unmatched_b(false), ["big", "dog"]);
    // Rows renormalised over the keys kept: each still sums to 1.
    for q in 0..c.n_queries() {
        let s: f32 = c.a_head(0, 1)[q * 4..(q + 1) * 4].iter().sum();
        assert!((s - 1.0).abs() < 1e-6, "{s}");
    }
}

#[test]
fn two_tokenizers_are_compared_by_words() {
    let scheme = |att: Attention, scheme: LabelScheme| {
        let units = att.queries().clone().relabel(scheme);
        att.derive(Level::Token, false, units, None, att.weights().to_vec())
            .unwrap()
    };
    let a = synthetic(&["[CLS]", "the", "un", "##real", "cat", "[SEP]"], 1, 1);
    let b = synthetic(&["<s>", "ĠThe", "Ġunreal", "Ġc", "at", "</s>"], 1, 1);
    // One tokenizer's labels, of no known kind: token by token.
    let c = compare(&a, &b, CompareOptions::default()).unwrap();
    assert_eq!(c.basis, Basis::AlignedTokens);
    let (a, b) = (
        scheme(a, LabelScheme::WordPiece),
        scheme(b, LabelScheme::ByteLevel),
    );
    let c = compare(&a, &b, CompareOptions::default()).unwrap();
    assert_eq!((c.basis, c.level), (Basis::Words, Level::Word));
    assert_eq!(c.n_queries(), 5);
    assert!(c.queries.is_complete());
    assert_eq!(c.query_label(0, false), "[CLS]/<s>");
    assert_eq!(c.query_label(1, false), "the/The");
    assert_eq!(c.query_label(2, false), "unreal");
}

#[test]
fn different_shapes_are_refused_unless_asked() {
    let a = synthetic(&["[CLS]", "a", "[SEP]"], 3, 4);
    let b = synthetic(&["[CLS]", "a", "[SEP]"], 2, 4);
    let e = compare(&a, &b, CompareOptions::default()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "A has 3 layers × 4 heads and B 2 × 4; compare only the layers and heads they share \
         (by index), or compare two captures of one model"
    );
    let c = compare(
        &a,
        &b,
        CompareOptions {
            shared_only: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(c.shared_only);
    assert_eq!((c.layers, c.heads), (2, 4));
    // Layer 1 of both is synthetic's layer 1: the same weights.
    assert_eq!(c.distance(1, 2), Some(0.0));
}

#[test]
fn masked_cells_are_left_out() {
    let t = ["<s>", "Ġa", "Ġb", "Ġc"];
    let a = decoder(&t, 1, vec![0, 1], 4);
    let b = synthetic(&t, 1, 2);
    assert_eq!(
        (a.mask, b.mask),
        (MaskKind::Causal, MaskKind::Bidirectional)
    );
    let c = compare(&a, &b, CompareOptions::default()).unwrap();
    assert!(!c.is_visible(0, 0, 1) && c.is_visible(0, 1, 0));
    assert_eq!(c.diff(0, 0)[1], 0.0);
    // Rows 1–3 see two keys or more in both; row 0 one key alone, which cannot differ.
    assert_eq!(c.rows(0, 0), 3);
    assert_eq!(row_distance(&[1.0, 0.0], &[0.3, 0.7], &[true, false]), None);
    assert_eq!(
        row_distance(&[1.0, 0.0, 0.0], &[0.3, 0.7, 0.0], &[true, true, false]),
        row_distance(&[1.0, 0.0], &[0.3, 0.7], &[true, true])
    );
}

/// A bidirectional value against a causal one whose rows are the same distributions over the
/// keys the causal one sees: nothing differs, however much the bidirectional side gives to
/// keys the causal one cannot attend.
#[test]
fn different_masks_compare_only_what_both_can_attend() {
    let t = ["ĠThe", "Ġcat", "Ġsat", "Ġdown"];
    let n = t.len();
    let causal = peaked(2, 2, n, n, true);
    // Each causal row, then as much again spread over the keys after the query, halved.
    let mut open = causal.clone();
    for (i, row) in open.chunks_mut(n).enumerate() {
        let q = i % n;
        let later = n - q - 1;
        for (k, w) in row.iter_mut().enumerate() {
            *w = if k <= q { *w * 0.5 } else { 0.5 / later as f32 };
        }
        if later == 0 {
            row.iter_mut().for_each(|w| *w *= 2.0);
        }
    }
    let one = |w: Vec<f32>| {
        Attention::new(
            info(2, 2),
            "The cat sat down".into(),
            None,
            units_for(&t),
            w,
        )
        .unwrap()
    };
    let a = one(open);
    let b = one(causal).with_mask(MaskKind::Causal);
    let c = compare(&a, &b, CompareOptions::default()).unwrap();
    assert!(c.masks_differ());
    assert!(c.a_visible_layer(1).iter().all(|&v| v));
    assert_eq!(c.visible_layer(1), c.b_visible_layer(1));
    assert!(!c.b_visible_layer(0)[1] && c.b_visible_layer(0)[n]);
    for l in 0..2 {
        for h in 0..2 {
            // A's rows as shares of the keys B sees are B's rows: A − B is 0 everywhere.
            assert!(
                c.diff(l, h).iter().all(|d| d.abs() < 1e-6),
                "{l} {h}: {:?}",
                c.diff(l, h)
            );
            assert!(c.distance(l, h).unwrap() < 1e-3, "{:?}", c.distance(l, h));
            // The first row sees one key on B's side: it is not counted.
            assert_eq!(c.rows(l, h), n - 1);
            // A is drawn as it is (with its own mask), not as if causal.
            assert_eq!(c.a_head(l, h)[1], a.head(l, h)[1]);
            assert!(c.a_head(l, h)[1] > 0.0);
        }
    }
    assert_eq!(c.a.mask_words(), "bidirectional");
    assert_eq!(c.b.mask_words(), "causal");
    // The same masks on both sides: nothing renormalised, A − B is the plain difference.
    let same = compare(&b, &b, CompareOptions::default()).unwrap();
    assert!(!same.masks_differ());
    assert_eq!(same.a_compared(0, 1), b.head(0, 1));
}

#[test]
fn nothing_in_common_and_other_kinds_are_one_line_errors() {
    let a = synthetic(&["x", "y"], 1, 1);
    let b = synthetic(&["p", "q"], 1, 1);
    let e = compare(&a, &b, CompareOptions::default()).unwrap_err();
    assert!(matches!(e, CompareError::NothingAligned { .. }), "{e}");
    assert!(!e.to_string().contains('\n'));
}
