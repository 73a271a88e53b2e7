//! Excluding special tokens: drop the rows and columns of the units whose role is special (the
//! tokens the tokenizer adds: `[CLS]`/`[SEP]`, `<s>`/`</s>`, BOS/EOS, …) and renormalise each
//! remaining row over the remaining units.

use rayon::prelude::*;

use super::AnalysisError;
use crate::attention::Attention;

/// Drop every special unit (by [`crate::attention::Role`], on both sides) and divide each
/// remaining row by the mass it kept, so it sums to 1 again.
///
/// A row whose mass was *all* on special units has nothing left to renormalise: it stays all
/// zeros (the statistics skip such rows; see `docs/stats.md`). Real softmax rows are never exactly
/// zero, so this only happens with hand-made or underflowed weights.
///
/// Works at token and word level; the per-unit vectors (spans, word ids, segments) of the kept
/// units are kept as they were, so spans still point at the original tokens. The result has
/// `special_excluded` set. If `att` has no special units it is returned unchanged (flag set).
///
/// Fails if nothing but special units is left.
pub fn without_special(att: &Attention) -> Result<Attention, AnalysisError> {
    let ordinary = |units: &crate::attention::Units| -> Vec<usize> {
        (0..units.len()).filter(|&i| !units.is_special(i)).collect()
    };
    let keep_q = ordinary(att.queries());
    let keep_k = if att.is_square() {
        keep_q.clone()
    } else {
        ordinary(att.keys())
    };
    if keep_q.is_empty() || keep_k.is_empty() {
        return Err(AnalysisError::NothingLeft {
            names: att.special_names(),
        });
    }
    let (nq, nk) = (att.n_queries(), att.n_keys());
    let weights = if keep_q.len() == nq && keep_k.len() == nk {
        att.weights().to_vec()
    } else {
        drop_matrices(att.weights(), nq, nk, &keep_q, &keep_k)
    };
    let queries = att.queries().select(&keep_q);
    let keys = (!att.is_square()).then(|| att.keys().select(&keep_k));
    Ok(att
        .derive(att.level, true, queries, keys, weights)
        .expect("dropping units keeps units and weights consistent"))
}

/// Restrict every `nq × nk` matrix of the stack `weights` to the rows `keep_q` and columns
/// `keep_k`, and renormalise each row to sum 1 (rows with no mass left stay zero).
pub(crate) fn drop_matrices(
    weights: &[f32],
    nq: usize,
    nk: usize,
    keep_q: &[usize],
    keep_k: &[usize],
) -> Vec<f32> {
    let (mq, mk) = (keep_q.len(), keep_k.len());
    // Kept columns as contiguous runs (one or two for BERT inputs), copied slice by slice.
    let mut runs: Vec<std::ops::Range<usize>> = Vec::new();
    for &k in keep_k {
        match runs.last_mut() {
            Some(r) if r.end == k => r.end = k + 1,
            _ => runs.push(k..k + 1),
        }
    }
    let mut out = vec![0f32; weights.len() / (nq * nk) * mq * mk];
    out.par_chunks_mut(mq * mk)
        .zip(weights.par_chunks(nq * nk))
        .for_each(|(kept, matrix)| {
            for (row_out, &q) in kept.chunks_mut(mk).zip(keep_q) {
                let row = &matrix[q * nk..(q + 1) * nk];
                let mass: f64 = runs.iter().map(|r| sum_f64(&row[r.clone()])).sum();
                if mass > 0.0 {
                    let inv = 1.0 / mass;
                    let mut at = 0;
                    for r in &runs {
                        let dst = &mut row_out[at..at + r.len()];
                        for (o, &w) in dst.iter_mut().zip(&row[r.clone()]) {
                            *o = (w as f64 * inv) as f32;
                        }
                        at += r.len();
                    }
                }
            }
        });
    out
}

/// Sum of f32 values in f64, over independent lanes so it vectorises.
pub(crate) fn sum_f64(xs: &[f32]) -> f64 {
    const LANES: usize = 8;
    let mut acc = [0f64; LANES];
    let chunks = xs.chunks_exact(LANES);
    let rest = chunks.remainder();
    for chunk in chunks {
        for i in 0..LANES {
            acc[i] += chunk[i] as f64;
        }
    }
    acc.iter().sum::<f64>() + rest.iter().map(|&x| x as f64).sum::<f64>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::fixtures::synthetic;
    use crate::attention::Level;
    use crate::words::to_words;

    #[test]
    fn drops_special_rows_and_columns_and_renormalises() {
        let att = synthetic(&["[CLS]", "a", "b", "c", "[SEP]"], 2, 2);
        let out = without_special(&att).unwrap();
        assert!(out.special_excluded);
        assert_eq!(out.tokens(), ["a", "b", "c"]);
        assert_eq!(out.queries().spans, vec![1..2, 2..3, 3..4]);
        assert_eq!(out.queries().ids, [1, 2, 3]);
        for l in 0..2 {
            for h in 0..2 {
                for q in 0..3 {
                    let orig: Vec<f32> = (1..4).map(|k| att.weight(l, h, q + 1, k)).collect();
                    let mass: f32 = orig.iter().sum();
                    for (k, w) in orig.iter().enumerate() {
                        let want = w / mass;
                        assert!((out.weight(l, h, q, k) - want).abs() < 1e-6);
                    }
                }
            }
        }
    }

    #[test]
    fn only_special_units_is_an_error() {
        let att = synthetic(&["[CLS]", "[SEP]"], 1, 1);
        let err = without_special(&att).unwrap_err();
        // The library names no flag (the CLI adds `drop --no-special`: src/app/words.rs).
        assert!(err.to_string().contains("keep the special tokens"), "{err}");
        assert!(err.to_string().contains("[CLS]/[SEP]"), "{err}");
        // Whatever the model calls them.
        let att = synthetic(&["<s>", "</s>"], 1, 1);
        let err = without_special(&att).unwrap_err();
        assert!(err.to_string().contains("<s>/</s>"), "{err}");
    }

    #[test]
    fn roles_decide_not_labels() {
        // A RoBERTa-style input, and an ordinary token that merely looks special.
        let mut att = synthetic(&["<s>", "Ġa", "Ġb", "</s>"], 1, 1);
        let mut units = att.queries().clone();
        units.labels[1] = "[SEP]".into();
        att = att
            .derive(att.level, false, units, None, att.weights().to_vec())
            .unwrap();
        let out = without_special(&att).unwrap();
        assert_eq!(out.tokens(), ["[SEP]", "Ġb"]);
    }

    #[test]
    fn row_with_all_mass_on_specials_stays_zero() {
        let out = drop_matrices(
            &[0.5, 0.0, 0.5, 0.2, 0.3, 0.5, 0.1, 0.1, 0.8],
            3,
            3,
            &[1],
            &[1],
        );
        assert_eq!(out, [1.0]);
        let out = drop_matrices(
            &[1.0, 0.0, 0.0, 0.6, 0.0, 0.4, 0.0, 0.5, 0.5],
            3,
            3,
            &[1],
            &[1],
        );
        assert_eq!(out, [0.0]);
    }

    #[test]
    fn composes_with_words_in_either_order() {
        let att = synthetic(
            &["[CLS]", "un", "##bel", "fox", "[SEP]", "ok", "[SEP]"],
            2,
            2,
        );
        let a = to_words(&without_special(&att).unwrap());
        let b = without_special(&to_words(&att)).unwrap();
        for out in [&a, &b] {
            assert_eq!(out.level, Level::Word);
            assert!(out.special_excluded);
            assert_eq!(out.tokens(), ["unbel", "fox", "ok"]);
            assert_eq!(out.queries().spans, vec![1..3, 3..4, 5..6]);
        }
        // both are row-stochastic, but weight the pieces differently, so they differ in general
        assert!(a
            .weights()
            .iter()
            .zip(b.weights())
            .any(|(x, y)| (x - y).abs() > 1e-4));
    }
}
