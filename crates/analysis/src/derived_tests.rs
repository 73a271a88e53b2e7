//! Tests of the attention value through the views this crate derives from it (words, special
//! tokens left out): the mask, the sink, and the marks that travel with a derived value.

use crate::attention::fixtures::*;
use crate::attention::*;

#[test]
fn causal_mask_hides_later_keys_by_token_position() {
    let att = synthetic(&["<s>", "Ġa", "b", "Ġc"], 1, 1).with_mask(MaskKind::Causal);
    assert!(!att.is_masked(1, 1) && !att.is_masked(1, 0));
    assert!(att.is_masked(1, 2) && att.is_masked(0, 3));
    assert_eq!(att.visible_keys(0), 1);
    assert_eq!(att.visible_keys(3), 4);
    // Merged into words, a word sees keys that start before it ends.
    let words = crate::to_words(&att);
    assert_eq!(words.tokens(), ["<s>", "ab", "c"]);
    assert!(!words.is_masked(1, 1) && words.is_masked(1, 2));
}

#[test]
fn the_sink_is_the_first_position_of_a_causal_value() {
    let causal = synthetic(&["ĠThe", "Ġc", "at", "Ġsat"], 1, 1).with_mask(MaskKind::Causal);
    assert_eq!(causal.sink(), Some(0));
    // Merged into words, the word holding token 0.
    assert_eq!(crate::to_words(&causal).sink(), Some(0));
    // A BOS token is the first position: it is the sink; removed, there is none.
    let bos = synthetic(&["<s>", "Ġa", "Ġb"], 1, 1).with_mask(MaskKind::Causal);
    assert_eq!(bos.sink(), Some(0));
    let without = crate::without_special(&bos).unwrap();
    assert_eq!(without.sink(), None);
    // Bidirectional attention has no sink.
    assert_eq!(synthetic(&["[CLS]", "a"], 1, 1).sink(), None);
}

#[test]
fn position_scheme_and_generated_units_travel_with_derived_values() {
    let base = synthetic(&["Ġa", "b", "Ġc"], 1, 1);
    let mut units = base.queries().clone();
    units.generated[2] = true;
    let att = base
        .derive(Level::Token, false, units, None, base.weights().to_vec())
        .unwrap()
        .with_positions(PositionScheme::Rotary);
    assert_eq!(att.first_generated(), Some(2));
    let words = crate::to_words(&att);
    assert_eq!(words.positions, PositionScheme::Rotary);
    assert_eq!(words.tokens(), ["ab", "c"]);
    assert_eq!(words.first_generated(), Some(1));
    assert_eq!(PositionScheme::Rotary.as_str(), "rotary");
}
