//! `--shard K/N`: which lines of the corpus a run processes.
//!
//! Shard K of N takes the lines whose number n (from 1) has `(n − 1) mod N = K − 1`: lines K,
//! K + N, K + 2N, … Round-robin by line number, so each shard's lines depend only on the input
//! (never on where or when it ran), the shards are balanced for any corpus whose line lengths do
//! not follow a period of N, and no shard needs to know the number of lines in advance (standard
//! input and compressed files work). Every shard reads the whole input (cheap next to the
//! forward passes: reading and hashing run at hundreds of MB/s) and processes its own lines.

use std::fmt;
use std::str::FromStr;

/// Shard `index` of `count` (both from 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Shard {
    /// This shard, 1 to `count`.
    pub index: usize,
    /// How many shards the corpus is split into.
    pub count: usize,
}

impl Shard {
    /// The whole corpus: shard 1 of 1.
    pub const WHOLE: Shard = Shard { index: 1, count: 1 };

    /// Shard `index` of `count`, checked.
    pub fn new(index: usize, count: usize) -> Result<Shard, String> {
        if count == 0 {
            return Err("the number of shards must be at least 1".into());
        }
        if index == 0 {
            return Err(format!(
                "shards are numbered from 1 to {count}; for a 0-based task index (Kubernetes' \
                 JOB_COMPLETION_INDEX, `--array=0-…`) pass $((INDEX + 1))/{count}"
            ));
        }
        if index > count {
            return Err(format!(
                "shard {index} of {count} does not exist; shards are numbered from 1 to {count}"
            ));
        }
        Ok(Shard { index, count })
    }

    /// Whether line `line` (from 1) is this shard's.
    pub fn owns(self, line: usize) -> bool {
        line >= 1 && (line - 1) % self.count == self.index - 1
    }

    /// Whether this is the whole corpus (1/1).
    pub fn is_whole(self) -> bool {
        self.count == 1
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Shard {
    type Err = String;

    /// `K/N`, as `--shard` takes it.
    fn from_str(s: &str) -> Result<Shard, String> {
        let Some((k, n)) = s.split_once('/') else {
            return Err(format!(
                "`{s}` is not a shard; write K/N (shard K of N, from 1), e.g. 3/8"
            ));
        };
        let num = |v: &str, what: &str| {
            v.trim().parse::<usize>().map_err(|_| {
                format!(
                    "`{s}` is not a shard: {what} `{v}` is not a whole number; write K/N, e.g. 3/8"
                )
            })
        };
        Shard::new(num(k, "K")?, num(n, "N")?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_split_lines_round_robin_and_cover_each_once() {
        for count in [1, 3, 7] {
            for line in 1..=50 {
                let owners: Vec<usize> = (1..=count)
                    .filter(|&k| Shard::new(k, count).unwrap().owns(line))
                    .collect();
                assert_eq!(owners.len(), 1, "line {line} of {count} shards");
                assert_eq!(owners[0], (line - 1) % count + 1);
            }
        }
        assert!(!Shard::WHOLE.owns(0));
    }

    #[test]
    fn shard_syntax_is_k_of_n_from_1() {
        assert_eq!("3/8".parse::<Shard>(), Ok(Shard { index: 3, count: 8 }));
        assert_eq!("1/1".parse::<Shard>(), Ok(Shard::WHOLE));
        for (bad, says) in [
            ("0/8", "JOB_COMPLETION_INDEX"),
            ("9/8", "does not exist"),
            ("1/0", "at least 1"),
            ("3", "write K/N"),
            ("a/8", "whole number"),
            ("-1/8", "whole number"),
        ] {
            let e = bad.parse::<Shard>().unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        assert_eq!(Shard::new(2, 5).unwrap().to_string(), "2/5");
    }
}
