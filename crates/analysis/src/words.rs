//! Word level: merge word pieces into words.
//!
//! Attention *to* a word is the sum of the attention to its pieces (columns are added), and
//! attention *from* a word is the mean of its pieces' rows. With `R` the `m × n` matrix that
//! averages the rows of each word's pieces and `C` the `n × m` matrix that sums their columns,
//! the word-level matrix is `R · A · C`. Rows that summed to 1 still do.
//!
//! Which pieces form a word, and what the word is called, come from the units themselves (word
//! ids, roles and surfaces, which the tokenizer gave), so the merge is the same for WordPiece
//! (`##`), byte-level BPE (`Ġ`) and SentencePiece (`▁`) tokens. The report's page merges with
//! the same rule (`assets/report/words.js`); `tests/word_merge_cases.json` holds the cases both
//! are tested against.

use std::ops::Range;

use rayon::prelude::*;

use super::special::sum_f64;
use crate::attention::{Attention, Level, Units};

/// Merge the word pieces of `att` into words (see the module docs); a no-op clone if `att` is
/// already at word level.
///
/// A word is a run of consecutive ordinary units with the same word id, segment and generated
/// flag. Each special token stays a unit of its own, as does an ordinary unit without a word
/// id. The word's label is its text ([`word_label`]); its span covers its pieces' tokens, and it
/// keeps its first piece's word id, segment, type id and role. Query/key vectors are dropped
/// (they exist per token only). Queries and keys are merged alike (each side by its own words).
pub fn to_words(att: &Attention) -> Attention {
    if att.level == Level::Word {
        return att.clone();
    }
    let row_groups = word_groups(att.queries());
    let queries = merge_units(att.queries(), &row_groups);
    let (col_groups, keys) = if att.is_square() {
        (row_groups.clone(), None)
    } else {
        let groups = word_groups(att.keys());
        let keys = merge_units(att.keys(), &groups);
        (groups, Some(keys))
    };
    let weights = merge_matrices(
        att.weights(),
        att.n_queries(),
        att.n_keys(),
        &row_groups,
        &col_groups,
    );
    att.derive(Level::Word, att.special_excluded, queries, keys, weights)
        .expect("merging words keeps units and weights consistent")
}

/// Consecutive unit ranges that form one word each.
pub fn word_groups(units: &Units) -> Vec<Range<usize>> {
    let mut groups: Vec<Range<usize>> = Vec::new();
    for i in 0..units.len() {
        let joins_previous = i > 0
            && !units.is_special(i)
            && !units.is_special(i - 1)
            && units.word_ids[i].is_some()
            && units.word_ids[i] == units.word_ids[i - 1]
            && units.segments[i] == units.segments[i - 1]
            && units.generated[i] == units.generated[i - 1];
        match groups.last_mut() {
            Some(last) if joins_previous => last.end = i + 1,
            _ => groups.push(i..i + 1),
        }
    }
    groups
}

/// The word-level units for `groups` of `units`.
pub fn merge_units(units: &Units, groups: &[Range<usize>]) -> Units {
    let first = |g: &Range<usize>| g.start;
    let pick = |v: &[u32]| groups.iter().map(|g| v[first(g)]).collect::<Vec<_>>();
    Units {
        labels: groups
            .iter()
            .map(|g| word_label(&units.labels[g.clone()], &units.surfaces[g.clone()]))
            .collect(),
        display: groups
            .iter()
            .map(|g| word_label(&units.display[g.clone()], &units.surfaces[g.clone()]))
            .map(|label| crate::attention::display::visible(&label))
            .collect(),
        scheme: units.scheme,
        ids: Vec::new(),
        type_ids: pick(&units.type_ids),
        segments: pick(&units.segments),
        roles: groups.iter().map(|g| units.roles[first(g)]).collect(),
        word_ids: groups.iter().map(|g| units.word_ids[first(g)]).collect(),
        surfaces: groups
            .iter()
            .map(|g| units.surfaces[g.clone()].concat())
            .collect(),
        spans: groups
            .iter()
            .map(|g| units.spans[g.start].start..units.spans[g.end - 1].end)
            .collect(),
        generated: groups.iter().map(|g| units.generated[first(g)]).collect(),
    }
}

/// The label of a word made of pieces with `labels` and `surfaces`: the text the pieces stand
/// for, without the whitespace around it (`Ġqu` `ick` → `quick`, `un` `##bel` → `unbel`, `▁`
/// `fox` → `fox`); when that is empty (a special token, or a lone space token) the pieces'
/// labels joined.
pub fn word_label(labels: &[String], surfaces: &[String]) -> String {
    let text = surfaces.concat();
    let text = text.trim();
    if text.is_empty() {
        labels.concat()
    } else {
        text.to_string()
    }
}

/// Merge every `nq × nk` matrix of the stack `weights` into an `mq × mk` matrix
/// (`mq = row_groups.len()`, `mk = col_groups.len()`): columns of a group summed, rows of a group
/// averaged (accumulated in f64).
///
/// Rows with no mass (only special-token exclusion makes them) are left out of the average, so a
/// word with one such piece gets the mean of its other pieces rather than a row summing to less
/// than 1; a word whose pieces all lack mass gets a zero row.
pub fn merge_matrices(
    weights: &[f32],
    nq: usize,
    nk: usize,
    row_groups: &[Range<usize>],
    col_groups: &[Range<usize>],
) -> Vec<f32> {
    let (mq, mk) = (row_groups.len(), col_groups.len());
    if nq == 0 || nk == 0 {
        return Vec::new();
    }
    let mut out = vec![0f32; weights.len() / (nq * nk) * mq * mk];
    out.par_chunks_mut(mq * mk)
        .zip(weights.par_chunks(nq * nk))
        .for_each(|(merged, matrix)| {
            let mut acc = vec![0f64; mk];
            let mut piece = vec![0f64; mk];
            for (u, group) in row_groups.iter().enumerate() {
                acc.iter_mut().for_each(|a| *a = 0.0);
                let mut live = 0usize;
                for p in group.clone() {
                    let row = &matrix[p * nk..(p + 1) * nk];
                    for (s, to) in piece.iter_mut().zip(col_groups) {
                        *s = sum_f64(&row[to.clone()]);
                    }
                    if piece.iter().sum::<f64>() > 0.0 {
                        live += 1;
                        acc.iter_mut().zip(&piece).for_each(|(a, s)| *a += s);
                    }
                }
                if live > 0 {
                    let scale = 1.0 / live as f64;
                    for (o, a) in merged[u * mk..(u + 1) * mk].iter_mut().zip(&acc) {
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
    use crate::attention::fixtures::{synthetic, units_for};
    use crate::attention::Role;

    #[test]
    fn groups_follow_word_ids_and_segments() {
        let att = synthetic(&["[CLS]", "un", "##bel", "fox", "[SEP]"], 1, 1);
        let groups = word_groups(att.queries());
        assert_eq!(groups, vec![0..1, 1..3, 3..4, 4..5]);
    }

    #[test]
    fn word_ids_restarting_in_sentence_b_do_not_merge_across_segments() {
        let mut units = units_for(&["[CLS]", "a", "b", "[SEP]"]);
        // sentence B without a [SEP] in between: word id 0 in both segments
        units.word_ids = vec![None, Some(0), Some(0), None];
        units.segments = vec![0, 0, 1, 1];
        assert_eq!(word_groups(&units), vec![0..1, 1..2, 2..3, 3..4]);
    }

    #[test]
    fn generated_tokens_do_not_merge_with_the_prompt() {
        let mut units = units_for(&["Ġa", "b", "c"]);
        units.generated = vec![false, false, true];
        assert_eq!(word_groups(&units), vec![0..2, 2..3]);
    }

    #[test]
    fn label_is_the_text_of_the_pieces() {
        let s = |v: &[&str]| v.iter().map(|p| p.to_string()).collect::<Vec<_>>();
        assert_eq!(
            word_label(&s(&["un", "##bel", "##ie"]), &s(&["un", "bel", "ie"])),
            "unbelie"
        );
        assert_eq!(
            word_label(&s(&["Ġqu", "ick"]), &s(&[" qu", "ick"])),
            "quick"
        );
        assert_eq!(word_label(&s(&["▁", "fox"]), &s(&[" ", "fox"])), "fox");
        // No text (a special token, a lone space): the labels.
        assert_eq!(word_label(&s(&["[CLS]"]), &s(&[""])), "[CLS]");
        assert_eq!(word_label(&s(&["Ġ"]), &s(&[" "])), "Ġ");
    }

    #[test]
    fn to_words_sums_columns_and_averages_rows() {
        let att = synthetic(&["[CLS]", "un", "##bel", "fox", "[SEP]"], 2, 3);
        let words = to_words(&att);
        assert_eq!(words.level, Level::Word);
        assert_eq!(words.tokens(), ["[CLS]", "unbel", "fox", "[SEP]"]);
        let q = words.queries();
        assert_eq!(q.spans, vec![0..1, 1..3, 3..4, 4..5]);
        assert!(q.ids.is_empty());
        assert_eq!(q.roles, [Role::Start, Role::Word, Role::Word, Role::End]);
        assert_eq!(q.word_ids, [None, Some(0), Some(1), None]);
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
    fn byte_level_and_sentencepiece_pieces_merge_alike() {
        let roberta = to_words(&synthetic(&["<s>", "ĠThe", "Ġqu", "ick", "</s>"], 1, 1));
        assert_eq!(roberta.tokens(), ["<s>", "The", "quick", "</s>"]);
        let xlmr = to_words(&synthetic(&["<s>", "▁T", "he", "▁", "fox", "</s>"], 1, 1));
        assert_eq!(xlmr.tokens(), ["<s>", "The", "fox", "</s>"]);
    }

    #[test]
    fn cross_attention_merges_each_side_by_its_own_words() {
        let q = units_for(&["<s>", "Ġei", "n", "</s>"]);
        let k = units_for(&["<s>", "Ġa", "Ġc", "at", "</s>"]);
        let weights: Vec<f32> = (0..4 * 5).map(|i| (i % 5) as f32 / 10.0).collect();
        let att = Attention::cross(
            crate::attention::fixtures::info(1, 1),
            "a cat".into(),
            None,
            q,
            k,
            weights,
        )
        .unwrap();
        let words = to_words(&att);
        assert_eq!(words.tokens(), ["<s>", "ein", "</s>"]);
        assert_eq!(words.keys().labels, ["<s>", "a", "cat", "</s>"]);
        // From "ein" (rows 1, 2) to "cat" (columns 2, 3): the mean over rows of the column sum.
        let want = ((0.2 + 0.3) + (0.2 + 0.3)) / 2.0;
        assert!((words.weight(0, 0, 1, 2) - want).abs() < 1e-6);
    }

    #[test]
    fn rows_without_mass_are_left_out_of_the_word_mean() {
        // units: a, ##b (a row without mass), c
        let weights = [0.5, 0.25, 0.25, 0.0, 0.0, 0.0, 0.2, 0.2, 0.6];
        let groups = [0..2, 2..3];
        let merged = merge_matrices(&weights, 3, 3, &groups, &groups);
        assert_eq!(merged, [0.75, 0.25, 0.4, 0.6]);
        let one_word = [Range { start: 0, end: 2 }];
        let dead = merge_matrices(&[0.0, 0.0, 0.0, 0.0], 2, 2, &one_word, &one_word);
        assert_eq!(dead, [0.0]);
    }

    #[test]
    fn to_words_is_idempotent() {
        let att = synthetic(&["[CLS]", "un", "##bel", "fox", "[SEP]"], 1, 2);
        let words = to_words(&att);
        assert_eq!(to_words(&words), words);
    }
}
