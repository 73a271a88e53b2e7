//! Head detectors, as TransformerLens's `head_detector` defines them (its default `"mul"`
//! measure): a head's score for a detection pattern `P` (0/1 over query × key) is the share of
//! its attention that falls on the pattern, `Σ_qk a_qk P_qk / Σ_qk a_qk`. Three patterns:
//!
//! - **previous token**: `P_q,q−1 = 1`;
//! - **duplicate token**: `P_qk = 1` where key `k ≠ q` is the same token as query `q` (same
//!   vocabulary id; at word level, the same word text). TransformerLens keeps only earlier
//!   duplicates (`k < q`); under a causal mask the later ones carry no weight, so the score is
//!   the same, and for bidirectional attention attnviz counts both sides;
//! - **induction**: `P_qk = 1` where the token before key `k` is the same token as query `q`
//!   (`k − 1 < q`): on a sequence repeated twice, a head that looks at the token after the
//!   previous copy of the current one. It is measured on a repeated random-token sequence the
//!   library builds ([`repeated_sequence`]), not on the input.
//!
//! Definitions and differences from TransformerLens: `docs/stats.md`, "Head detectors".

use serde::Serialize;

use crate::attention::Attention;

/// Tokens in each half of the induction probe (at most; fewer when the model's context is
/// shorter): TransformerLens's tutorials use 50, this keeps the extra run small.
pub const INDUCTION_PERIOD: usize = 25;

/// Seed of the induction probe's random tokens: the same sequence every run, for a model.
pub const INDUCTION_SEED: u64 = 0;

/// For each query unit, the key units that are the same token (`k ≠ q`), by position: grouped by
/// vocabulary id when the units have ids (token level), else by label (word level).
fn same_token_groups(att: &Attention) -> Option<(Vec<usize>, Vec<Vec<usize>>)> {
    if !att.is_square() {
        return None;
    }
    let units = att.queries();
    let n = units.len();
    let mut keys: Vec<(String, usize)> = (0..n)
        .map(|i| {
            let key = if units.ids.len() == n {
                format!("#{}", units.ids[i])
            } else {
                format!("@{}", units.labels[i])
            };
            (key, i)
        })
        .collect();
    keys.sort();
    let mut group = vec![0usize; n];
    let mut members: Vec<Vec<usize>> = Vec::new();
    let mut last: Option<&str> = None;
    for (key, i) in &keys {
        if last != Some(key.as_str()) {
            members.push(Vec::new());
            last = Some(key.as_str());
        }
        let g = members.len() - 1;
        members[g].push(*i);
        group[*i] = g;
    }
    Some((group, members))
}

/// `Σ a·P / Σ a` over one row-major `n × n` matrix, with `pattern(q)` the keys of row `q` on the
/// pattern; NaN when the matrix has no mass.
fn pattern_score(matrix: &[f32], n: usize, pattern: impl Fn(usize, &mut dyn FnMut(usize))) -> f64 {
    let (mut hit, mut total) = (0f64, 0f64);
    for q in 0..matrix.len().checked_div(n).unwrap_or(0) {
        let row = &matrix[q * n..(q + 1) * n];
        total += row.iter().map(|&w| w as f64).sum::<f64>();
        pattern(q, &mut |k| hit += row[k] as f64);
    }
    if total > 0.0 {
        hit / total
    } else {
        f64::NAN
    }
}

/// Previous-token score of one square `n × n` matrix: `Σ_q a_q,q−1 / Σ a` (TransformerLens's
/// `previous_token_head`; every row counts, the first one too).
pub fn prev_token_score(matrix: &[f32], n: usize) -> f64 {
    pattern_score(matrix, n, |q, hit| {
        if q >= 1 {
            hit(q - 1)
        }
    })
}

/// Duplicate-token score of one square matrix, with `group`/`members` from the units (see the
/// module docs): the share on other positions of the query's own token. The definition
/// [`TokenGroups::scores`] computes together with the previous-token score (a test holds them
/// equal).
#[cfg(test)]
fn duplicate_score(matrix: &[f32], n: usize, group: &[usize], members: &[Vec<usize>]) -> f64 {
    pattern_score(matrix, n, |q, hit| {
        for &k in &members[group[q]] {
            if k != q {
                hit(k)
            }
        }
    })
}

/// Induction score of one square matrix: the share on keys `k` whose previous unit is the
/// query's token (`k − 1 < q`, TransformerLens's `induction_head` pattern).
fn induction_score(matrix: &[f32], n: usize, group: &[usize], members: &[Vec<usize>]) -> f64 {
    pattern_score(matrix, n, |q, hit| {
        for &j in &members[group[q]] {
            if j < q {
                hit(j + 1)
            }
        }
    })
}

/// `(previous-token, duplicate-token)` scores of every head of `att`, `[layer][head]`; `None`
/// for cross-attention (its queries and keys are different units).
pub fn token_scores(att: &Attention) -> Option<Vec<Vec<(f64, f64)>>> {
    let groups = TokenGroups::of(att)?;
    Some(
        (0..att.layers())
            .map(|l| {
                (0..att.heads())
                    .map(|h| groups.scores(att.head(l, h)))
                    .collect()
            })
            .collect(),
    )
}

/// Which units are the same token, made once for the [`token_scores`] of many heads (one
/// head at a time, so the heads can be scored in parallel).
pub(crate) struct TokenGroups {
    n: usize,
    group: Vec<usize>,
    members: Vec<Vec<usize>>,
}

impl TokenGroups {
    /// The groups of `att`'s units; `None` for cross-attention.
    pub(crate) fn of(att: &Attention) -> Option<Self> {
        let (group, members) = same_token_groups(att)?;
        Some(TokenGroups {
            n: att.n_keys(),
            group,
            members,
        })
    }

    /// `(previous-token, duplicate-token)` scores of one head's matrix: the values
    /// [`prev_token_score`] and [`duplicate_score`] give, with the rows summed once for both.
    pub(crate) fn scores(&self, matrix: &[f32]) -> (f64, f64) {
        /// Rows summed side by side: each row's sum is a chain of dependent additions, and
        /// several chains at once keep the adder busy.
        const ROWS: usize = 4;
        let n = self.n;
        let rows = matrix.len().checked_div(n).unwrap_or(0);
        let (mut prev, mut duplicate, mut total) = (0f64, 0f64, 0f64);
        for first in (0..rows).step_by(ROWS) {
            let group = first..(first + ROWS).min(rows);
            let row = |q: usize| &matrix[q * n..(q + 1) * n];
            // Each row's sum, its values added in order; trailing zeros (a causal row's
            // masked keys) add nothing, so the rows stop at the longest one's last value.
            let len = group
                .clone()
                .map(|q| crate::stats::without_trailing_zeros(row(q)).len())
                .max()
                .unwrap_or(0);
            let mut sums = [0f64; ROWS];
            if group.len() == ROWS {
                let [a, b, c, d] = std::array::from_fn(|r| &row(first + r)[..len]);
                for (((&a, &b), &c), &d) in a.iter().zip(b).zip(c).zip(d) {
                    for (sum, w) in sums.iter_mut().zip([a, b, c, d]) {
                        *sum += w as f64;
                    }
                }
            } else {
                for (sum, q) in sums.iter_mut().zip(group.clone()) {
                    *sum = row(q)[..len].iter().fold(0.0, |s, &w| s + w as f64);
                }
            }
            for (sum, q) in sums.iter().zip(group) {
                let row = row(q);
                total += sum;
                if q >= 1 {
                    prev += row[q - 1] as f64;
                }
                for &k in &self.members[self.group[q]] {
                    if k != q {
                        duplicate += row[k] as f64;
                    }
                }
            }
        }
        if total > 0.0 {
            (prev / total, duplicate / total)
        } else {
            (f64::NAN, f64::NAN)
        }
    }
}

/// Induction scores of every head of `att`, `[layer][head]` (any square attention; meant for the
/// probe [`repeated_sequence`] builds); `None` for cross-attention.
pub fn induction_scores(att: &Attention) -> Option<Vec<Vec<f64>>> {
    let (group, members) = same_token_groups(att)?;
    let n = att.n_keys();
    Some(
        (0..att.layers())
            .map(|l| {
                (0..att.heads())
                    .map(|h| induction_score(att.head(l, h), n, &group, &members))
                    .collect()
            })
            .collect(),
    )
}

/// SplitMix64 (Steele, Lea, Flood 2014): a tiny generator the reference script reimplements.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// `period` distinct random token ids below `vocab` for which `ordinary(id)` holds (a real,
/// non-special vocabulary entry), drawn with SplitMix64 from `seed` (`x mod vocab`, rejected
/// when not ordinary or already drawn), then the same ids again: the body of the induction
/// probe, `r₁ … r_T r₁ … r_T`. Fewer than `period` when the vocabulary has fewer ordinary ids
/// (at most `64 · vocab` draws).
pub fn repeated_sequence(
    vocab: usize,
    period: usize,
    seed: u64,
    ordinary: impl Fn(u32) -> bool,
) -> Vec<u32> {
    let mut rng = SplitMix64(seed);
    let mut drawn: Vec<u32> = Vec::with_capacity(period);
    let mut seen = std::collections::HashSet::new();
    let mut tries = 0usize;
    while drawn.len() < period && vocab > 0 && tries < 64 * vocab.max(period) {
        tries += 1;
        let id = (rng.next() % vocab as u64) as u32;
        if ordinary(id) && seen.insert(id) {
            drawn.push(id);
        }
    }
    let mut out = drawn.clone();
    out.extend_from_slice(&drawn);
    out
}

/// The induction scores of a model, measured once on its repeated random-token probe: what the
/// JSON's `stats.induction` holds (`docs/stats.md`, "Head detectors").
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Induction {
    /// Where the definition comes from.
    pub reference: &'static str,
    /// Random tokens in each half of the probe.
    pub period: usize,
    /// The generator's seed.
    pub seed: u64,
    /// The probe's token ids, the model's own special tokens around them.
    pub input_ids: Vec<u32>,
    /// The model's layer number of each row of `score`.
    pub layers: Vec<usize>,
    /// `[layer][head]` induction score.
    #[schemars(with = "Vec<Vec<Option<f64>>>")]
    pub score: Vec<Vec<f64>>,
}

impl Induction {
    /// The scores of `att`, the probe's attention (built from [`repeated_sequence`] with
    /// `period` and `seed`); `None` for cross-attention.
    pub fn of(att: &Attention, period: usize, seed: u64) -> Option<Induction> {
        Some(Induction {
            reference: "TransformerLens head_detector, induction_head pattern, mul measure, on \
                        a repeated random-token sequence (see docs/stats.md)",
            period,
            seed,
            input_ids: att.queries().ids.clone(),
            layers: att.layer_numbers().to_vec(),
            score: induction_scores(att)?,
        })
    }

    /// The scores of the model's layers `numbers` (a capture's layer numbers), one row each, in
    /// that order; NaN for a layer the probe did not capture.
    pub fn rows_for(&self, numbers: &[usize]) -> Vec<Vec<f64>> {
        let heads = self.score.first().map_or(0, Vec::len);
        numbers
            .iter()
            .map(|n| match self.layers.iter().position(|l| l == n) {
                Some(i) => self.score[i].clone(),
                None => vec![f64::NAN; heads],
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn previous_token_score_is_the_subdiagonal_share_of_all_rows() {
        // 3 × 3 causal: row 0 all on itself, row 1 half on 0, row 2 a quarter on 1.
        let m = [1.0, 0.0, 0.0, 0.5, 0.5, 0.0, 0.25, 0.25, 0.5];
        assert!((prev_token_score(&m, 3) - (0.5 + 0.25) / 3.0).abs() < 1e-12);
    }

    #[test]
    fn duplicate_and_induction_patterns_follow_transformer_lens() {
        // tokens a b a b: duplicates of 2 are {0}, of 3 are {1}; induction keys of 2: {1}, of
        // 3: {2}.
        let group = vec![0, 1, 0, 1];
        let members = vec![vec![0, 2], vec![1, 3]];
        let mut m = vec![0f32; 16];
        m[2 * 4 + 1] = 0.75; // row 2 on key 1 (induction)
        m[2 * 4 + 2] = 0.25;
        m[3 * 4 + 1] = 0.5; // row 3 on key 1 (duplicate)
        m[3 * 4 + 2] = 0.5; // and on key 2 (induction)
        m[0] = 1.0;
        m[4] = 1.0;
        assert!((duplicate_score(&m, 4, &group, &members) - 0.5 / 4.0).abs() < 1e-12);
        assert!((induction_score(&m, 4, &group, &members) - 1.25 / 4.0).abs() < 1e-12);
    }

    #[test]
    fn token_groups_score_as_the_definitions_do_bit_for_bit() {
        let att = crate::attention::fixtures::irregular(2, 3, 7);
        let (group, members) = same_token_groups(&att).unwrap();
        let groups = TokenGroups::of(&att).unwrap();
        for l in 0..2 {
            for h in 0..3 {
                let m = att.head(l, h);
                let (prev, duplicate) = groups.scores(m);
                assert_eq!(prev.to_bits(), prev_token_score(m, 7).to_bits());
                assert_eq!(
                    duplicate.to_bits(),
                    duplicate_score(m, 7, &group, &members).to_bits()
                );
            }
        }
        let empty = [0f32; 49];
        assert!(groups.scores(&empty).0.is_nan() && groups.scores(&empty).1.is_nan());
    }

    #[test]
    fn repeated_sequence_is_distinct_ordinary_ids_twice() {
        let s = repeated_sequence(100, 10, 0, |id| id % 2 == 0);
        assert_eq!(s.len(), 20);
        assert_eq!(s[..10], s[10..]);
        let mut first = s[..10].to_vec();
        first.sort();
        first.dedup();
        assert_eq!(first.len(), 10);
        assert!(s.iter().all(|id| id % 2 == 0 && *id < 100));
        // A vocabulary smaller than the period gives what it has.
        assert_eq!(repeated_sequence(3, 10, 0, |_| true).len(), 6);
    }
}
