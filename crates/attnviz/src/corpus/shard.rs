//! `--shard K/N`: which lines of the corpus a run processes.
//!
//! Shard K of N takes the lines whose number n (from 1) has `(n − 1) mod N = K − 1`: lines K,
//! K + N, K + 2N, … Round-robin by line number, so each shard's lines depend only on the input
//! (never on where or when it ran), the shards are balanced for any corpus whose line lengths do
//! not follow a period of N, and no shard needs to know the number of lines in advance (standard
//! input and compressed files work). Every shard reads the whole input (cheap next to the
//! forward passes: reading and hashing run at hundreds of MB/s) and processes its own lines.
//!
//! `--shard auto` takes K and N from the scheduler that started the process ([`from_scheduler`],
//! a pure function of the variables): a Slurm array task's `SLURM_ARRAY_TASK_ID`, counted from
//! `SLURM_ARRAY_TASK_MIN` in steps of `SLURM_ARRAY_TASK_STEP`, of `SLURM_ARRAY_TASK_COUNT`; a
//! Kubernetes Indexed Job's `JOB_COMPLETION_INDEX` (from 0), of the count given with it
//! (`auto/N`: Kubernetes does not tell a pod its Job's completions).

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
    /// Neither `K/N` nor `auto` (where `auto` is taken).
    #[error("`{text}` is not a shard; write K/N (shard K of N, from 1), e.g. 3/8, or auto")]
    SyntaxOrAuto {
        /// What was given.
        text: String,
    },
    /// `auto/N` whose N is not a whole number of at least 1.
    #[error("`{text}` is not a shard: N `{value}` is not a whole number of at least 1; write auto/N, e.g. auto/8")]
    AutoCount {
        /// What was given.
        text: String,
        /// Its N.
        value: String,
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

/// What `--shard` takes: a shard, or `auto` (with the number of shards, or without).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShardSpec {
    /// `K/N`.
    Fixed(Shard),
    /// `auto` or `auto/N`: K (and N) from the scheduler's variables ([`from_scheduler`]).
    Auto {
        /// N when given.
        count: Option<usize>,
    },
}

impl ShardSpec {
    /// The shard, reading a scheduler's variables through `var` for `auto`; where it came from.
    pub fn resolve(
        self,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<(Shard, Option<Scheduler>), AutoShardError> {
        match self {
            ShardSpec::Fixed(shard) => Ok((shard, None)),
            ShardSpec::Auto { count } => {
                from_scheduler(count, var).map(|(shard, s)| (shard, Some(s)))
            }
        }
    }
}

impl FromStr for ShardSpec {
    type Err = ShardError;

    /// `K/N`, `auto` or `auto/N`.
    fn from_str(s: &str) -> Result<ShardSpec, ShardError> {
        let t = s.trim();
        if t.eq_ignore_ascii_case("auto") {
            return Ok(ShardSpec::Auto { count: None });
        }
        if let Some(n) = t
            .split_once('/')
            .filter(|(k, _)| k.trim().eq_ignore_ascii_case("auto"))
            .map(|(_, n)| n.trim())
        {
            let count = n.parse::<usize>().ok().filter(|&c| c >= 1).ok_or_else(|| {
                ShardError::AutoCount {
                    text: s.into(),
                    value: n.into(),
                }
            })?;
            return Ok(ShardSpec::Auto { count: Some(count) });
        }
        s.parse().map(ShardSpec::Fixed).map_err(|e| match e {
            ShardError::Syntax { text } => ShardError::SyntaxOrAuto { text },
            e => e,
        })
    }
}

/// The scheduler a shard was taken from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheduler {
    /// A Slurm array job.
    Slurm,
    /// A Kubernetes Indexed Job.
    Kubernetes,
}

/// Why the scheduler's variables give no shard. Each displays as one line.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AutoShardError {
    /// Neither scheduler's variable is set.
    #[error("found no scheduler to take the shard from: neither SLURM_ARRAY_TASK_ID (a Slurm array job) nor JOB_COMPLETION_INDEX (a Kubernetes Indexed Job) is set; give the shard as K/N")]
    NoScheduler,
    /// Both are set.
    #[error("both SLURM_ARRAY_TASK_ID ({slurm}) and JOB_COMPLETION_INDEX ({kubernetes}) are set, so the scheduler is unclear; give the shard as K/N")]
    Both {
        /// Slurm's value.
        slurm: String,
        /// Kubernetes' value.
        kubernetes: String,
    },
    /// A variable is not a whole number.
    #[error("{var} is '{value}', not a whole number")]
    NotANumber {
        /// The variable.
        var: &'static str,
        /// Its value (the first characters).
        value: String,
    },
    /// Kubernetes' index, without the number of shards.
    #[error("JOB_COMPLETION_INDEX is {index}, but Kubernetes does not tell a pod how many completions its Job has: give the number of shards with it (the Job's completions)")]
    NoCount {
        /// The index.
        index: usize,
    },
    /// Slurm's task id without the array's size.
    #[error("SLURM_ARRAY_TASK_ID is {id} but SLURM_ARRAY_TASK_COUNT is not set: give the number of shards with it")]
    NoSlurmCount {
        /// The task id.
        id: usize,
    },
    /// Slurm's task id below the array's first.
    #[error("SLURM_ARRAY_TASK_ID {id} is below SLURM_ARRAY_TASK_MIN {min}")]
    BelowMin {
        /// The task id.
        id: usize,
        /// The array's first id.
        min: usize,
    },
    /// Slurm's task id off the array's step.
    #[error("SLURM_ARRAY_TASK_ID {id} is not on the array's step: it runs from {min} in steps of {step}")]
    OffStep {
        /// The task id.
        id: usize,
        /// The array's first id.
        min: usize,
        /// Its step.
        step: usize,
    },
    /// Slurm's array size and the number of shards given differ.
    #[error("the Slurm array has {array} tasks (SLURM_ARRAY_TASK_COUNT) but the shards given are {given}: run an array of {given} tasks (resubmit the whole array to redo failed tasks: finished shards end at once when resumed), or take the number of shards from the array")]
    CountDiffers {
        /// SLURM_ARRAY_TASK_COUNT.
        array: usize,
        /// The number given.
        given: usize,
    },
    /// The index makes a shard beyond the count.
    #[error("{from} makes shard {index} of {count}, which does not exist")]
    OutOfRange {
        /// The variables it came from, in words.
        from: String,
        /// Shard (from 1).
        index: usize,
        /// Of.
        count: usize,
    },
}

/// The shard a scheduler gave this process, from its variables (looked up through `var`; an
/// empty one counts as unset) and the number of shards when given (`count`):
///
/// - Slurm (`SLURM_ARRAY_TASK_ID` set): K = (ID − MIN) / STEP + 1 with `SLURM_ARRAY_TASK_MIN`
///   (0 when unset) and `SLURM_ARRAY_TASK_STEP` (1); N = `SLURM_ARRAY_TASK_COUNT`, which a given
///   `count` must equal.
/// - Kubernetes (`JOB_COMPLETION_INDEX` set): K = index + 1; N = `count`, which is required.
pub fn from_scheduler(
    count: Option<usize>,
    var: impl Fn(&str) -> Option<String>,
) -> Result<(Shard, Scheduler), AutoShardError> {
    let var = |k: &str| {
        var(k)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let num = |k: &'static str| -> Result<Option<usize>, AutoShardError> {
        match var(k) {
            None => Ok(None),
            Some(v) => v.parse().map(Some).map_err(|_| AutoShardError::NotANumber {
                var: k,
                value: v.chars().take(40).collect(),
            }),
        }
    };
    let (slurm, kubernetes) = (var("SLURM_ARRAY_TASK_ID"), var("JOB_COMPLETION_INDEX"));
    let (shard, scheduler, from) = match (slurm, kubernetes) {
        (None, None) => return Err(AutoShardError::NoScheduler),
        (Some(slurm), Some(kubernetes)) => return Err(AutoShardError::Both { slurm, kubernetes }),
        (Some(_), None) => {
            let id = num("SLURM_ARRAY_TASK_ID")?.expect("set");
            let min = num("SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
            let step = num("SLURM_ARRAY_TASK_STEP")?.unwrap_or(1).max(1);
            let array = num("SLURM_ARRAY_TASK_COUNT")?;
            if id < min {
                return Err(AutoShardError::BelowMin { id, min });
            }
            if (id - min) % step != 0 {
                return Err(AutoShardError::OffStep { id, min, step });
            }
            let n = match (count, array) {
                (Some(given), Some(array)) if given != array => {
                    return Err(AutoShardError::CountDiffers { array, given })
                }
                (Some(n), _) | (None, Some(n)) => n,
                (None, None) => return Err(AutoShardError::NoSlurmCount { id }),
            };
            let from = format!("SLURM_ARRAY_TASK_ID {id} (from {min}, step {step})");
            (((id - min) / step + 1, n), Scheduler::Slurm, from)
        }
        (None, Some(_)) => {
            let index = num("JOB_COMPLETION_INDEX")?.expect("set");
            let n = count.ok_or(AutoShardError::NoCount { index })?;
            let from = format!("JOB_COMPLETION_INDEX {index} (from 0)");
            ((index + 1, n), Scheduler::Kubernetes, from)
        }
    };
    let (index, count) = shard;
    let shard =
        Shard::new(index, count).map_err(|_| AutoShardError::OutOfRange { from, index, count })?;
    Ok((shard, scheduler))
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

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    fn auto(
        count: Option<usize>,
        vars: &[(&str, &str)],
    ) -> Result<(usize, usize, Scheduler), String> {
        from_scheduler(count, env(vars))
            .map(|(s, by)| (s.index, s.count, by))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn auto_takes_the_shard_from_slurm_arrays_from_any_first_id_and_step() {
        use Scheduler::*;
        let slurm = |id: &'static str, min: &'static str, step: &'static str, n: &'static str| {
            vec![
                ("SLURM_ARRAY_TASK_ID", id),
                ("SLURM_ARRAY_TASK_MIN", min),
                ("SLURM_ARRAY_TASK_STEP", step),
                ("SLURM_ARRAY_TASK_COUNT", n),
            ]
        };
        // --array=1-32: task ids are the shards.
        for id in [1, 7, 32] {
            let s = id.to_string();
            let vars = [
                ("SLURM_ARRAY_TASK_ID", s.as_str()),
                ("SLURM_ARRAY_TASK_MIN", "1"),
                ("SLURM_ARRAY_TASK_COUNT", "32"),
            ];
            assert_eq!(auto(None, &vars), Ok((id, 32, Slurm)));
            assert_eq!(auto(Some(32), &vars), Ok((id, 32, Slurm)));
        }
        // --array=0-7, and --array=10-24:2 (8 tasks).
        assert_eq!(auto(None, &slurm("0", "0", "1", "8")), Ok((1, 8, Slurm)));
        assert_eq!(auto(None, &slurm("7", "0", "1", "8")), Ok((8, 8, Slurm)));
        assert_eq!(auto(None, &slurm("14", "10", "2", "8")), Ok((3, 8, Slurm)));
        // MIN unset: from 0.
        assert_eq!(
            auto(
                None,
                &[
                    ("SLURM_ARRAY_TASK_ID", "2"),
                    ("SLURM_ARRAY_TASK_COUNT", "4")
                ]
            ),
            Ok((3, 4, Slurm))
        );
        // Every task of an array gets a different shard, covering all.
        let mut seen: Vec<usize> = (0..8)
            .map(|t| {
                let id = (10 + 2 * t).to_string();
                auto(None, &slurm(Box::leak(id.into_boxed_str()), "10", "2", "8"))
                    .unwrap()
                    .0
            })
            .collect();
        seen.sort_unstable();
        assert_eq!(seen, (1..=8).collect::<Vec<_>>());
        for (vars, count, says) in [
            (
                slurm("x", "0", "1", "8"),
                None,
                "SLURM_ARRAY_TASK_ID is 'x', not a whole number",
            ),
            (
                slurm("3", "0", "1", "-2"),
                None,
                "SLURM_ARRAY_TASK_COUNT is '-2'",
            ),
            (
                slurm("3", "5", "1", "8"),
                None,
                "is below SLURM_ARRAY_TASK_MIN 5",
            ),
            (slurm("3", "0", "2", "8"), None, "not on the array's step"),
            (
                slurm("8", "0", "1", "8"),
                None,
                "makes shard 9 of 8, which does not exist",
            ),
            (
                slurm("3", "0", "1", "2"),
                Some(32),
                "has 2 tasks (SLURM_ARRAY_TASK_COUNT) but the shards given are 32",
            ),
            (
                vec![("SLURM_ARRAY_TASK_ID", "3")],
                None,
                "SLURM_ARRAY_TASK_COUNT is not set",
            ),
        ] {
            let e = auto(count, &vars).unwrap_err();
            assert!(e.contains(says) && !e.contains('\n'), "{vars:?}: {e}");
        }
    }

    #[test]
    fn auto_takes_the_index_from_kubernetes_and_the_count_as_given() {
        let k8s = |i: &'static str| vec![("JOB_COMPLETION_INDEX", i)];
        assert_eq!(
            auto(Some(16), &k8s("0")),
            Ok((1, 16, Scheduler::Kubernetes))
        );
        assert_eq!(
            auto(Some(16), &k8s("15")),
            Ok((16, 16, Scheduler::Kubernetes))
        );
        for (vars, count, says) in [
            (k8s("3"), None, "does not tell a pod how many completions"),
            (
                k8s("16"),
                Some(16),
                "JOB_COMPLETION_INDEX 16 (from 0) makes shard 17 of 16",
            ),
            (
                k8s("1e3"),
                Some(16),
                "JOB_COMPLETION_INDEX is '1e3', not a whole number",
            ),
            (vec![], Some(4), "found no scheduler"),
            (
                vec![("JOB_COMPLETION_INDEX", ""), ("SLURM_ARRAY_TASK_ID", "")],
                None,
                "found no scheduler",
            ),
            (
                vec![("JOB_COMPLETION_INDEX", "1"), ("SLURM_ARRAY_TASK_ID", "2")],
                Some(4),
                "both SLURM_ARRAY_TASK_ID (2) and JOB_COMPLETION_INDEX (1)",
            ),
        ] {
            let e = auto(count, &vars).unwrap_err();
            assert!(e.contains(says), "{vars:?}: {e}");
        }
    }

    #[test]
    fn shard_specs_are_k_of_n_or_auto() {
        assert_eq!(
            "auto".parse::<ShardSpec>(),
            Ok(ShardSpec::Auto { count: None })
        );
        assert_eq!(
            "AUTO/8".parse::<ShardSpec>(),
            Ok(ShardSpec::Auto { count: Some(8) })
        );
        assert_eq!(
            "3/8".parse::<ShardSpec>(),
            Ok(ShardSpec::Fixed(Shard::new(3, 8).unwrap()))
        );
        for (bad, says) in [
            ("auto/0", "at least 1"),
            ("auto/x", "not a whole number"),
            ("autox", "or auto"),
            ("0/8", "JOB_COMPLETION_INDEX"),
        ] {
            let e = bad.parse::<ShardSpec>().unwrap_err();
            assert!(e.to_string().contains(says), "{bad}: {e}");
        }
    }
}
