//! Which unit of A stands for which unit of B: the longest common subsequence of the two lists
//! of units, matched by what they say (a token's label, a word's text in lower case) and special
//! tokens by their role (`[CLS]` and `<s>` both open the sequence).

use serde::Serialize;

use crate::attention::{Level, Units};

/// The most cells the alignment's table may have once the common beginning and end are set
/// aside (2²⁴: 64 MiB of `u32`); two inputs that differ over more are refused.
pub const MAX_ALIGN_CELLS: usize = 1 << 24;

/// How the units of one side (the queries, or the keys) of A and B were paired.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Alignment {
    /// `(unit of A, unit of B)`, ascending on both sides: the rows (or columns) compared.
    pub pairs: Vec<(usize, usize)>,
    /// Units of A with no partner in B.
    pub only_a: Vec<usize>,
    /// Units of B with no partner in A.
    pub only_b: Vec<usize>,
}

impl Alignment {
    /// Every unit paired with the unit at the same index (two inputs of one tokenization).
    pub fn identity(n: usize) -> Alignment {
        Alignment {
            pairs: (0..n).map(|i| (i, i)).collect(),
            only_a: Vec::new(),
            only_b: Vec::new(),
        }
    }

    /// Whether every unit of both sides has a partner.
    pub fn is_complete(&self) -> bool {
        self.only_a.is_empty() && self.only_b.is_empty()
    }

    /// The units of A that were paired, in order.
    pub fn a_units(&self) -> Vec<usize> {
        self.pairs.iter().map(|p| p.0).collect()
    }

    /// The units of B that were paired, in order.
    pub fn b_units(&self) -> Vec<usize> {
        self.pairs.iter().map(|p| p.1).collect()
    }
}

/// What a unit is matched by: a special token by its role, a token by its label, a word by its
/// text in lower case (two tokenizers may disagree on case: `bert-base-uncased` against
/// `roberta-base`).
pub(crate) fn unit_key(units: &Units, i: usize, level: Level) -> String {
    if units.is_special(i) {
        // Not a possible label: a control character opens it.
        return format!("\u{1}{}", units.roles[i].as_str());
    }
    match level {
        Level::Token => units.labels[i].clone(),
        Level::Word => units.labels[i].trim().to_lowercase(),
    }
}

/// The cells the table would need to align `a` against `b`, after the common beginning and
/// end.
pub(crate) fn table_cells(a: &[String], b: &[String]) -> usize {
    let (p, s) = common_ends(a, b);
    (a.len() - p - s) * (b.len() - p - s)
}

fn common_ends(a: &[String], b: &[String]) -> (usize, usize) {
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let suffix = a[prefix..]
        .iter()
        .rev()
        .zip(b[prefix..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    (prefix, suffix)
}

/// Pair the keys `a` and `b` by their longest common subsequence (ties go to the earliest
/// units of A). The caller checks [`table_cells`] against [`MAX_ALIGN_CELLS`] first.
pub(crate) fn align(a: &[String], b: &[String]) -> Alignment {
    let (prefix, suffix) = common_ends(a, b);
    let (ma, mb) = (&a[prefix..a.len() - suffix], &b[prefix..b.len() - suffix]);
    let (n, m) = (ma.len(), mb.len());
    // lcs[i][j]: the longest common subsequence of ma[i..] and mb[j..].
    let mut lcs = vec![0u32; (n + 1) * (m + 1)];
    let at = |i: usize, j: usize| i * (m + 1) + j;
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[at(i, j)] = if ma[i] == mb[j] {
                lcs[at(i + 1, j + 1)] + 1
            } else {
                lcs[at(i + 1, j)].max(lcs[at(i, j + 1)])
            };
        }
    }
    let mut pairs: Vec<(usize, usize)> = (0..prefix).map(|i| (i, i)).collect();
    let (mut only_a, mut only_b) = (Vec::new(), Vec::new());
    let (mut i, mut j) = (0, 0);
    while i < n && j < m {
        if ma[i] == mb[j] {
            pairs.push((prefix + i, prefix + j));
            i += 1;
            j += 1;
        } else if lcs[at(i + 1, j)] >= lcs[at(i, j + 1)] {
            only_a.push(prefix + i);
            i += 1;
        } else {
            only_b.push(prefix + j);
            j += 1;
        }
    }
    only_a.extend((i..n).map(|i| prefix + i));
    only_b.extend((j..m).map(|j| prefix + j));
    pairs.extend((0..suffix).map(|k| (a.len() - suffix + k, b.len() - suffix + k)));
    Alignment {
        pairs,
        only_a,
        only_b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn one_word_changed_pairs_the_rest() {
        let a = s(&["C", "the", "cat", "sat", "E"]);
        let b = s(&["C", "the", "dog", "sat", "E"]);
        let al = align(&a, &b);
        assert_eq!(al.pairs, [(0, 0), (1, 1), (3, 3), (4, 4)]);
        assert_eq!((al.only_a, al.only_b), (vec![2], vec![2]));
    }

    #[test]
    fn insertions_and_identical_lists() {
        let a = s(&["a", "b", "c"]);
        let b = s(&["x", "a", "c", "y"]);
        let al = align(&a, &b);
        assert_eq!(al.pairs, [(0, 1), (2, 2)]);
        assert_eq!((al.only_a, al.only_b), (vec![1], vec![0, 3]));
        assert_eq!(align(&a, &a), Alignment::identity(3));
        let none = align(&s(&["a"]), &s(&["b"]));
        assert!(none.pairs.is_empty());
        assert_eq!(table_cells(&a, &b), 12);
        assert_eq!(table_cells(&a, &a), 0);
    }
}
