//! Unit tests of the attention value.

use super::fixtures::*;
use super::*;

#[test]
fn indexing_follows_layer_head_query_key() {
    let att = synthetic(&["[CLS]", "a", "b", "[SEP]"], 2, 3);
    // layer 1, head 2, query 0 peaks at key (0+1+2)%4 = 3
    assert!((att.weight(1, 2, 0, 3) - 0.7).abs() < 1e-6);
    assert_eq!(att.head(1, 2).len(), 16);
    assert_eq!(att.layer(1).len(), 48);
}

#[test]
fn head_mean_averages_heads() {
    let att = synthetic(&["[CLS]", "a", "b", "[SEP]"], 1, 2);
    let mean = att.head_mean(0);
    for q in 0..4 {
        for k in 0..4 {
            let want = (att.weight(0, 0, q, k) + att.weight(0, 1, q, k)) / 2.0;
            assert!((mean[q * 4 + k] - want).abs() < 1e-7);
        }
    }
}

#[test]
fn model_name_is_short_for_folders() {
    let mut info = synthetic(&["a"], 1, 1).model;
    info.id = "/models/all-MiniLM-L6-v2/".into();
    assert_eq!(info.name(), "all-MiniLM-L6-v2");
    info.id = "sentence-transformers/all-MiniLM-L6-v2".into();
    info.revision = Some("main".into());
    assert_eq!(info.name(), "sentence-transformers/all-MiniLM-L6-v2");
}

#[test]
fn rejects_wrong_weight_count_and_unit_vectors() {
    let att = synthetic(&["a", "b"], 1, 1);
    let err = Attention::new(
        att.model.clone(),
        String::new(),
        None,
        att.queries().clone(),
        vec![0.0; 3],
    )
    .unwrap_err();
    assert!(err.to_string().contains("expected 1 layers"), "{err}");
    let mut units = att.queries().clone();
    units.roles.pop();
    let err =
        Attention::new(att.model.clone(), String::new(), None, units, vec![0.0; 4]).unwrap_err();
    assert!(err.to_string().contains("roles has 1 entries"), "{err}");
}

#[test]
fn cross_attention_is_not_square_and_never_masked() {
    let q = units_for(&["<s>", "Ġein", "</s>"]);
    let k = units_for(&["<s>", "Ġa", "Ġcat", "</s>"]);
    let weights = vec![0.25f32; 3 * 4 * 2];
    let att = Attention::cross(info(1, 2), "a cat".into(), None, q, k, weights)
        .unwrap()
        .with_mask(MaskKind::Bidirectional);
    assert_eq!((att.n_queries(), att.n_keys()), (3, 4));
    assert!(!att.is_square());
    assert_eq!(att.head(0, 1).len(), 12);
    assert_eq!(att.weight(0, 1, 2, 3), 0.25);
    assert!(!att.is_masked(0, 3));
    assert_eq!(att.keys().labels[2], "Ġcat");
    // A cross value cannot pretend to be self-attention.
    assert!(att.clone().with_kind(AttentionKind::Encoder).is_err());
}

#[test]
fn grouped_query_heads_read_their_key_value_head() {
    // 1 layer, 4 query heads over 2 key/value heads, 2 tokens, head_dim 4.
    let base = synthetic(&["a", "b"], 1, 4);
    let queries: Vec<f32> = (0..4 * 2 * 4).map(|i| i as f32).collect();
    let keys: Vec<f32> = (0..2 * 2 * 4).map(|i| 100.0 + i as f32).collect();
    let att = base
        .with_kv_heads(vec![0, 0, 1, 1])
        .unwrap()
        .with_query_key(Some(QueryKey {
            queries,
            keys,
            scale: None,
        }))
        .unwrap();
    assert_eq!(att.kv_heads(), 2);
    assert_eq!(att.query(0, 3, 1).unwrap()[0], ((3 * 2 + 1) * 4) as f32);
    // Heads 2 and 3 share key/value head 1.
    assert_eq!(att.key(0, 2, 1), att.key(0, 3, 1));
    assert_eq!(att.key(0, 3, 1).unwrap()[0], 100.0 + ((2 + 1) * 4) as f32);
    assert!(att.clone().with_kv_heads(vec![0, 1]).is_err());
}

#[test]
fn special_tokens_are_named_by_their_labels_and_roles() {
    let bert = synthetic(&["[CLS]", "a", "[SEP]", "b", "[SEP]"], 1, 1);
    assert_eq!(bert.role_name(Role::Start).as_deref(), Some("[CLS]"));
    assert_eq!(bert.special_names(), "[CLS]/[SEP]");
    let roberta = synthetic(&["<s>", "Ġa", "</s>"], 1, 1);
    assert_eq!(roberta.special_names(), "<s>/</s>");
    let gpt2 = synthetic(&["Ġa", "b"], 1, 1);
    assert_eq!(gpt2.special_names(), "special tokens");
    assert_eq!(gpt2.role_name(Role::End), None);
}

#[test]
fn selections_are_checked_against_the_model() {
    let m = info(2, 3);
    assert!(m
        .check_selection(Selection::new(1, HeadSel::Index(2)))
        .is_ok());
    assert_eq!(
        m.check_selection(Selection::new(2, HeadSel::Mean)),
        Err(SelectionError::Layer {
            layer: 2,
            layers: 2
        })
    );
    let e = m
        .check_selection(Selection::new(0, HeadSel::Index(3)))
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "head 3 does not exist: the model has heads 0–2 per layer (numbered from 0)"
    );
}

#[test]
fn kv_notes_name_the_shared_key_value_head() {
    let att = synthetic(&["a", "b"], 1, 6)
        .with_kv_heads(vec![0, 0, 0, 1, 1, 1])
        .unwrap();
    assert!(att.is_grouped());
    assert_eq!(att.heads_of_kv(1), [3, 4, 5]);
    assert_eq!(
        att.kv_note(4).as_deref(),
        Some("kv head 1, shared with heads 3, 5")
    );
    let pairs = att.with_kv_heads(vec![0, 0, 1, 1, 2, 2]).unwrap();
    assert_eq!(
        pairs.kv_note(0).as_deref(),
        Some("kv head 0, shared with head 1")
    );
    let plain = synthetic(&["a", "b"], 1, 2);
    assert!(!plain.is_grouped());
    assert_eq!(plain.kv_note(1), None);
}

/// A picture whose image tokens see each other in full (Gemma 3) unmasks its later tokens for
/// its own rows only; a causal picture (LLaVA) leaves the mask as it is.
#[test]
fn a_bidirectional_picture_sees_its_later_tokens_under_the_causal_mask() {
    use crate::attention::image::PictureTokens;
    let mut image = with_picture("p.png").image.as_deref().cloned().unwrap();
    image.cells.truncate(3);
    let tokens = ["<s>", "a", "i1", "i2", "i3", "b", "c"];
    for bidirectional in [false, true] {
        let att = decoder(&tokens, 1, vec![0], tokens.len())
            .with_pictures(vec![PictureTokens {
                first: 2,
                image: image.clone(),
                bidirectional,
                tile: None,
            }])
            .unwrap();
        // Inside the run: a row sees the later image tokens only when bidirectional.
        assert_eq!(att.is_masked(2, 4), !bidirectional);
        assert_eq!(att.is_masked(3, 4), !bidirectional);
        assert!(!att.is_masked(4, 2));
        // Outside it, the causal mask as ever.
        assert!(att.is_masked(1, 2));
        assert!(att.is_masked(4, 5));
        assert!(att.is_masked(2, 6));
        assert!(!att.is_masked(5, 3));
    }
}

/// A prefix-LM mask (PaliGemma): the prefix's tokens see each other in full, later ones
/// included, and a sliding window does not cut inside it; the tokens after it stay causal and
/// windowed.
#[test]
fn a_prefix_sees_itself_in_full_and_the_rest_stays_causal() {
    let tokens = ["i1", "i2", "<bos>", "a", "b", "gen1", "gen2"];
    let att = decoder(&tokens, 1, vec![0], tokens.len())
        .with_windows(vec![Some(2)])
        .unwrap();
    // Without a prefix: causal and windowed.
    assert!(att.is_masked(0, 4));
    assert!(att.is_masked_in(0, 4, 0));
    assert_eq!(att.visible_keys(1), 2);
    let att = att.with_prefix(5).unwrap();
    assert!(!att.is_masked(0, 4) && !att.is_masked(3, 4));
    // The window keeps out of the prefix: row 4 sees key 0, four back, in a window of 2.
    assert!(!att.is_masked_in(0, 4, 0));
    assert_eq!(att.visible_keys(1), 5);
    assert_eq!(att.visible_keys_in(0, 1), 5);
    // After it: causal, and windowed.
    assert!(att.is_masked(4, 5) && att.is_masked(5, 6));
    assert!(!att.is_masked(6, 0));
    assert!(att.is_masked_in(0, 6, 4) && !att.is_masked_in(0, 6, 5));
    assert_eq!(att.visible_keys(5), 6);
    // A prefix longer than the input is refused.
    let long = decoder(&tokens, 1, vec![0], tokens.len()).with_prefix(8);
    assert!(long.is_err());
}

#[test]
fn sink_shares_are_what_rows_leave_and_follow_derived_values() {
    let base = synthetic(&["a", "b", "c"], 2, 2);
    // Half of every row to the sink: the weights halved.
    let halved: Vec<f32> = base.weights().iter().map(|w| w * 0.5).collect();
    let att = base
        .derive(Level::Token, false, base.queries().clone(), None, halved)
        .unwrap()
        .with_sinks_from_rows(true);
    let shares = att.sink_shares().expect("shares");
    assert_eq!(shares.len(), 2 * 2 * 3);
    assert!(shares.iter().all(|s| (s - 0.5).abs() < 1e-6), "{shares:?}");
    assert!((att.sink_share(1, 1, 2).unwrap() - 0.5).abs() < 1e-6);
    let mean = att.sink_share_row(0, HeadSel::Mean).unwrap();
    assert_eq!(mean.len(), 3);
    // Without a sink, none; a value that holds shares of a weighting shows none either.
    assert!(base.sink_shares().is_none());
    let mut weighted = att.clone();
    weighted.holds = Holds::ValueWeighted;
    assert!(weighted.sink_shares().is_none());
    // Renormalised rows leave nothing to explain: the shares go.
    let excluded = att
        .derive(
            Level::Token,
            true,
            att.queries().clone(),
            None,
            att.weights().to_vec(),
        )
        .unwrap();
    assert!(excluded.sink_shares().is_none());
    // Given shares must be one per layer, head and row.
    let err = att
        .clone()
        .with_sink_shares(Some(vec![0.5; 5]))
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("5 attention-sink shares for 12 rows"),
        "{err}"
    );
}
