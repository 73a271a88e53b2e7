//! What the analyses that re-run the model cost, estimated before they run: value zeroing
//! re-runs every layer once per token (about n forward passes for n tokens), head ablation the
//! layers from each one on once per head (about heads × (layers + 1) / 2 passes). Each first
//! makes one forward pass of its own over the input; its time, times the passes still to come,
//! is the estimate. Past the time limit ([`RerunLimit`]) the analysis is refused with
//! [`TooSlow`] before its re-runs start; past [`WARN_AFTER`] the caller's
//! [`Progress`](crate::progress::Progress) is told how long to expect, in one line.

use std::time::Duration;

/// An analysis that re-runs the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rerun {
    /// Value zeroing (every layer once per token).
    ValueZeroing,
    /// Head ablation (the layers from each one on, once per head).
    HeadAblation,
}

impl Rerun {
    /// The analysis's name in a sentence.
    pub fn name(self) -> &'static str {
        match self {
            Rerun::ValueZeroing => "value zeroing",
            Rerun::HeadAblation => "head ablation",
        }
    }

    /// Forward passes (of the whole input through every layer) the re-runs amount to, for
    /// `tokens` tokens in a model of `layers` layers × `heads` heads.
    pub fn passes(self, tokens: usize, layers: usize, heads: usize) -> u64 {
        match self {
            // Each layer runs over n copies of the input: n passes in all.
            Rerun::ValueZeroing => tokens as u64,
            // Layer l runs with each of its heads removed through layers l..L:
            // Σ_l (L − l) × H layer-runs, H (L + 1) / 2 passes.
            Rerun::HeadAblation => {
                let layers = layers.max(1) as u64;
                (heads as u64 * layers * (layers + 1) / 2).div_ceil(layers)
            }
        }
    }
}

/// How long the re-runs of one analysis may take.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RerunLimit {
    /// The caller's limit; `None`: [`DEFAULT_LIMIT`].
    pub given: Option<Duration>,
}

impl RerunLimit {
    /// The limit in force.
    pub fn limit(self) -> Duration {
        self.given.unwrap_or(DEFAULT_LIMIT)
    }
}

/// The default time limit of one analysis's re-runs: longer runs are refused unless the caller
/// raises it.
pub const DEFAULT_LIMIT: Duration = Duration::from_secs(600);

/// Estimates at least this long are announced before the re-runs start.
pub const WARN_AFTER: Duration = Duration::from_secs(10);

/// The cost of an analysis's re-runs, from the passes they amount to and one pass measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RerunCost {
    /// Which analysis.
    pub analysis: Rerun,
    /// Tokens of the input.
    pub tokens: usize,
    /// Forward passes the re-runs amount to ([`Rerun::passes`]).
    pub passes: u64,
    /// How long the analysis's own forward pass took.
    pub pass: Duration,
}

impl RerunCost {
    /// The estimated time of the re-runs.
    pub fn estimate(&self) -> Duration {
        self.pass
            .saturating_mul(u32::try_from(self.passes).unwrap_or(u32::MAX))
    }

    /// Refuse the re-runs when the estimate is over `limit`.
    pub fn check(self, limit: RerunLimit) -> Result<(), TooSlow> {
        if self.estimate() <= limit.limit() {
            return Ok(());
        }
        Err(TooSlow {
            cost: self,
            limit: limit.limit(),
            limit_given: limit.given.is_some(),
        })
    }

    /// "value zeroing of 512 tokens re-runs the model about 512 times (one pass took 0.31 s):
    /// about 2.6 min".
    pub fn describe(&self) -> String {
        format!(
            "{} of {} tokens re-runs the model about {} times (one pass took {}): about {}",
            self.analysis.name(),
            self.tokens,
            self.passes,
            format_duration(self.pass),
            format_duration(self.estimate())
        )
    }

    /// The line that announces a long estimate, if it is one.
    pub fn notice(&self) -> Option<String> {
        (self.estimate() >= WARN_AFTER).then(|| format!("{}; it runs now", self.describe()))
    }
}

/// An analysis whose re-runs would take longer than the limit; nothing was re-run.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{}, more than the {} time limit of {}; use a shorter input", .cost.describe(), if *.limit_given { "given" } else { "default" }, format_duration(*.limit))]
pub struct TooSlow {
    /// The estimate.
    pub cost: RerunCost,
    /// The limit it is over.
    pub limit: Duration,
    /// Whether the caller gave the limit (else it is [`DEFAULT_LIMIT`]).
    pub limit_given: bool,
}

impl TooSlow {
    /// A limit that would let the analysis run: the estimate, rounded up to a whole minute
    /// (seconds under a minute), in seconds.
    pub fn enough_seconds(&self) -> u64 {
        let s = self.cost.estimate().as_secs_f64().ceil() as u64;
        if s < 60 {
            s.max(1)
        } else {
            s.div_ceil(60) * 60
        }
    }
}

/// `0.31 s`, `45 s`, `2.6 min`, `1.5 h`.
pub fn format_duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 10.0 {
        format!("{s:.2} s")
    } else if s < 60.0 {
        format!("{s:.0} s")
    } else if s < 3600.0 {
        format!("{:.1} min", s / 60.0)
    } else {
        format!("{:.1} h", s / 3600.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_count_the_re_runs() {
        assert_eq!(Rerun::ValueZeroing.passes(512, 30, 9), 512);
        // 2 layers × 4 heads: layer 0's heads run 2 layers each, layer 1's one: 12
        // layer-runs, 6 passes.
        assert_eq!(Rerun::HeadAblation.passes(7, 2, 4), 6);
        assert_eq!(Rerun::HeadAblation.passes(7, 30, 9), 140);
    }

    #[test]
    fn the_estimate_is_checked_against_the_limit() {
        let cost = RerunCost {
            analysis: Rerun::ValueZeroing,
            tokens: 512,
            passes: 512,
            pass: Duration::from_millis(300),
        };
        assert_eq!(cost.estimate(), Duration::from_millis(153_600));
        assert!(cost.check(RerunLimit::default()).is_ok());
        let e = cost
            .check(RerunLimit {
                given: Some(Duration::from_secs(60)),
            })
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "value zeroing of 512 tokens re-runs the model about 512 times (one pass took \
             0.30 s): about 2.6 min, more than the given time limit of 1.0 min; use a shorter \
             input"
        );
        assert_eq!(e.enough_seconds(), 180);
        assert!(cost
            .notice()
            .unwrap()
            .ends_with("about 2.6 min; it runs now"));
        let quick = RerunCost {
            pass: Duration::from_millis(1),
            ..cost
        };
        assert_eq!(quick.notice(), None);
    }
}
