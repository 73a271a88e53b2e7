//! Word level: merge word pieces into words.
//!
//! Attention *to* a word is the sum of the attention to its pieces (columns are added), and
//! attention *from* a word is the mean of its pieces' rows. With `R` the `m × n` matrix that
//! averages the rows of each word's pieces and `C` the `n × m` matrix that sums their columns,
//! the word-level matrix is `R · A · C`. Rows that summed to 1 still do.

use std::ops::Range;

use rayon::prelude::*;

use super::special::sum_f64;
use super::units::Units;
use crate::attention::{Attention, Level};

/// Merge the word pieces of `att` into words (see the module docs); a no-op clone if `att` is
/// already at word level.
///
/// A word is a run of consecutive non-special units with the same word id and segment (sentence
/// B's word ids restart at 0, so the segment matters). Each special token ([CLS], [SEP]) stays a
/// unit of its own, as does a non-special unit without a word id. The word's label joins its
/// pieces, dropping the `##` continuation marks (`un ##bel ##ie ##va ##bly` → `unbelievably`);
/// its span covers its pieces' tokens, and it keeps its first piece's word id, segment and special
/// flag. Query/key vectors are dropped (they exist per token only).
pub fn to_words(att: &Attention) -> Attention {
    if att.level == Level::Word {
        return att.clone();
    }
    let units = Units::of(att);
    let groups = word_groups(&units);
    let weights = merge_matrices(att.weights(), units.len(), &groups);
    merge_units(&units, &groups).into_attention(att, weights)
}

/// Consecutive unit ranges that form one word each.
pub(crate) fn word_groups(units: &Units) -> Vec<Range<usize>> {
    let mut groups: Vec<Range<usize>> = Vec::new();
    for i in 0..units.len() {
        let joins_previous = i > 0
            && !units.special[i]
            && !units.special[i - 1]
            && units.word_ids[i].is_some()
            && units.word_ids[i] == units.word_ids[i - 1]
            && units.token_type_ids[i] == units.token_type_ids[i - 1];
        match groups.last_mut() {
            Some(last) if joins_previous => last.end = i + 1,
            _ => groups.push(i..i + 1),
        }
    }
    groups
}

/// The word-level units for `groups` of `units`.
pub(crate) fn merge_units(units: &Units, groups: &[Range<usize>]) -> Units {
    let first = |g: &Range<usize>| g.start;
    Units {
        level: Level::Word,
        special_excluded: units.special_excluded,
        tokens: groups
            .iter()
            .map(|g| word_label(&units.tokens[g.clone()]))
            .collect(),
        input_ids: Vec::new(),
        token_type_ids: groups
            .iter()
            .map(|g| units.token_type_ids[first(g)])
            .collect(),
        special: groups.iter().map(|g| units.special[first(g)]).collect(),
        spans: groups
            .iter()
            .map(|g| units.spans[g.start].start..units.spans[g.end - 1].end)
            .collect(),
        word_ids: groups.iter().map(|g| units.word_ids[first(g)]).collect(),
    }
}

/// Join word pieces into the word they spell: the first piece as is, continuation pieces without
/// their `##` mark.
pub fn word_label(pieces: &[String]) -> String {
    let mut word = String::new();
    for (i, piece) in pieces.iter().enumerate() {
        match piece.strip_prefix("##") {
            Some(rest) if i > 0 => word.push_str(rest),
            _ => word.push_str(piece),
        }
    }
    word
}

/// Merge every `n × n` matrix of the stack `weights` into an `m × m` matrix, `m = groups.len()`:
/// columns of a group summed, rows of a group averaged (accumulated in f64).
///
/// Rows with no mass (only special-token exclusion makes them) are left out of the average, so a
/// word with one such piece gets the mean of its other pieces rather than a row summing to less
/// than 1; a word whose pieces all lack mass gets a zero row.
pub(crate) fn merge_matrices(weights: &[f32], n: usize, groups: &[Range<usize>]) -> Vec<f32> {
    let m = groups.len();
    if n == 0 {
        return Vec::new();
    }
    let mut out = vec![0f32; weights.len() / (n * n) * m * m];
    out.par_chunks_mut(m * m)
        .zip(weights.par_chunks(n * n))
        .for_each(|(merged, matrix)| {
            let mut acc = vec![0f64; m];
            let mut piece = vec![0f64; m];
            for (u, group) in groups.iter().enumerate() {
                acc.iter_mut().for_each(|a| *a = 0.0);
                let mut live = 0usize;
                for p in group.clone() {
                    let row = &matrix[p * n..(p + 1) * n];
                    for (s, to) in piece.iter_mut().zip(groups) {
                        *s = sum_f64(&row[to.clone()]);
                    }
                    if piece.iter().sum::<f64>() > 0.0 {
                        live += 1;
                        acc.iter_mut().zip(&piece).for_each(|(a, s)| *a += s);
                    }
                }
                if live > 0 {
                    let scale = 1.0 / live as f64;
                    for (o, a) in merged[u * m..(u + 1) * m].iter_mut().zip(&acc) {
                        *o = (a * scale) as f32;
                    }
                }
            }
        });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::tests::synthetic;

    #[test]
    fn groups_follow_word_ids_and_segments() {
        let att = synthetic(&["[CLS]", "un", "##bel", "fox", "[SEP]"], 1, 1);
        let groups = word_groups(&Units::of(&att));
        assert_eq!(groups, vec![0..1, 1..3, 3..4, 4..5]);
    }

    #[test]
    fn word_ids_restarting_in_sentence_b_do_not_merge_across_segments() {
        let mut units = Units::of(&synthetic(&["[CLS]", "a", "b", "[SEP]"], 1, 1));
        // sentence B without a [SEP] in between: word id 0 in both segments
        units.word_ids = vec![None, Some(0), Some(0), None];
        units.token_type_ids = vec![0, 0, 1, 1];
        assert_eq!(word_groups(&units), vec![0..1, 1..2, 2..3, 3..4]);
    }

    #[test]
    fn label_drops_continuation_marks_only() {
        let pieces = |s: &[&str]| s.iter().map(|p| p.to_string()).collect::<Vec<_>>();
        assert_eq!(
            word_label(&pieces(&["un", "##bel", "##ie", "##va", "##bly"])),
            "unbelievably"
        );
        assert_eq!(word_label(&pieces(&["##"])), "##");
        assert_eq!(word_label(&pieces(&["[CLS]"])), "[CLS]");
    }

    #[test]
    fn to_words_sums_columns_and_averages_rows() {
        let att = synthetic(&["[CLS]", "un", "##bel", "fox", "[SEP]"], 2, 3);
        let words = to_words(&att);
        assert_eq!(words.level, Level::Word);
        assert_eq!(words.tokens, ["[CLS]", "unbel", "fox", "[SEP]"]);
        assert_eq!(words.spans, vec![0..1, 1..3, 3..4, 4..5]);
        assert!(words.input_ids.is_empty());
        assert_eq!(words.special, [true, false, false, true]);
        assert_eq!(words.word_ids, [None, Some(0), Some(1), None]);
        for l in 0..2 {
            for h in 0..3 {
                let w = |q, k| att.weight(l, h, q, k);
                // from "unbel" (pieces 1, 2) to "fox" (3): mean over rows of one column
                let want = (w(1, 3) + w(2, 3)) / 2.0;
                assert!((words.weight(l, h, 1, 2) - want).abs() < 1e-7);
                // from "fox" to "unbel": sum of two columns of one row
                let want = w(3, 1) + w(3, 2);
                assert!((words.weight(l, h, 2, 1) - want).abs() < 1e-7);
                // from "unbel" to itself: mean over rows of the sum over columns
                let want = (w(1, 1) + w(1, 2) + w(2, 1) + w(2, 2)) / 2.0;
                assert!((words.weight(l, h, 1, 1) - want).abs() < 1e-7);
                for q in 0..4 {
                    let sum: f32 = words.head(l, h)[q * 4..(q + 1) * 4].iter().sum();
                    assert!((sum - 1.0).abs() < 1e-6, "row {q} sums to {sum}");
                }
            }
        }
    }

    #[test]
    fn rows_without_mass_are_left_out_of_the_word_mean() {
        // units: a, ##b (a row without mass), c
        let weights = [0.5, 0.25, 0.25, 0.0, 0.0, 0.0, 0.2, 0.2, 0.6];
        let merged = merge_matrices(&weights, 3, &[0..2, 2..3]);
        assert_eq!(merged, [0.75, 0.25, 0.4, 0.6]);
        let one_word = [Range { start: 0, end: 2 }];
        let dead = merge_matrices(&[0.0, 0.0, 0.0, 0.0], 2, &one_word);
        assert_eq!(dead, [0.0]);
    }

    #[test]
    fn to_words_is_idempotent() {
        let att = synthetic(&["[CLS]", "un", "##bel", "fox", "[SEP]"], 1, 2);
        let words = to_words(&att);
        assert_eq!(to_words(&words), words);
    }
}
