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
    pub fn new(index: usize, count: usize) -> Result<Shard, ShardError> {
        if count == 0 {
            return Err(ShardError::NoShards);
        }
        if index == 0 {
            return Err(ShardError::FromZero { count });
        }
        if index > count {
            return Err(ShardError::Beyond { index, count });
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
    type Err = ShardError;

    /// `K/N`, as `--shard` takes it.
    fn from_str(s: &str) -> Result<Shard, ShardError> {
        let Some((k, n)) = s.split_once('/') else {
            return Err(ShardError::Syntax { text: s.into() });
        };
        let num = |v: &str, part: &'static str| {
            v.trim()
                .parse::<usize>()
                .map_err(|_| ShardError::NotANumber {
                    text: s.into(),
                    part,
                    value: v.into(),
                })
        };
        Shard::new(num(k, "K")?, num(n, "N")?)
    }
}

/// A shard that cannot be: each displays as one line that says how to write one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ShardError {
    /// No shards.
    #[error("the number of shards must be at least 1")]
    NoShards,
    /// A 0-based index.
    #[error(
        "shards are numbered from 1 to {count}; for a 0-based task index (Kubernetes' \
         JOB_COMPLETION_INDEX, `--array=0-…`) pass $((INDEX + 1))/{count}"
    )]
    FromZero {
        /// The shards.
        count: usize,
    },
    /// An index past the count.
    #[error("shard {index} of {count} does not exist; shards are numbered from 1 to {count}")]
    Beyond {
        /// The index given.
        index: usize,
        /// The shards.
        count: usize,
    },
    /// Not `K/N`.
    #[error("`{text}` is not a shard; write K/N (shard K of N, from 1), e.g. 3/8")]
    Syntax {
        /// What was given.
        text: String,
    },
    /// K or N is not a whole number.
    #[error(
        "`{text}` is not a shard: {part} `{value}` is not a whole number; write K/N, e.g. 3/8"
    )]
    NotANumber {
        /// What was given.
        text: String,
        /// `K` or `N`.
        part: &'static str,
        /// Its text.
        value: String,
    },
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
            let e = bad.parse::<Shard>().unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
        assert_eq!(Shard::new(2, 5).unwrap().to_string(), "2/5");
    }
}
