//! What a run has done, kept in line order so that it can be written down exactly at any time.
//!
//! Workers finish sentences out of order. Each line's result (an [`Event`]: a sentence's
//! statistics and counts, or why it is bad) waits in the [`Ledger`] until every line of the
//! shard before it has its result; then it is applied to the [`Tally`]. So the tally always
//! describes exactly the lines `1..=tally.lines` (those of this shard among them): its sums,
//! counts and lists are what an uninterrupted run over that prefix gives, bit for bit. That is
//! what the partial file records, what a resumed run starts from, and what merging combines.
//!
//! Results of finished sentences not yet applied (a slower sentence before them is still
//! running) are also appended to the journal (`super::journal`), so a killed run loses none
//! of them. The wait is short: at most the lines that finish while the oldest sentence in
//! flight runs.

use std::collections::BTreeMap;
use std::io;

use super::journal::{Journal, Journaled};
use super::lines::{BadLine, InputDigest};
use super::shard::Shard;
use super::{BadLines, CorpusStats, SentenceCounts, LISTED_BAD_LINES};
use crate::analysis::HeadStats;

/// What one line came to.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// A sentence analysed: its statistics (`[layer][head]`), its counts, and the name of its
    /// output files (the line number or the JSON Lines id).
    Sentence {
        /// Per-head statistics.
        stats: Vec<Vec<HeadStats>>,
        /// Pair, truncation, tokens, units.
        counts: SentenceCounts,
        /// Output name (without the extension).
        name: String,
        /// A mixture-of-experts model's expert load for the sentence's tokens.
        load: Option<attnviz_formats::doc::router::ExpertLoadDoc>,
    },
    /// A bad line.
    Bad(BadLine),
}

/// Everything a run has done over the lines `1..=lines`: exact sums, counts and lists.
#[derive(Clone, Debug)]
pub struct Tally {
    /// The summed statistics and sentence counts.
    pub stats: CorpusStats,
    /// Every line up to this one is done (read, and if it is this shard's, analysed or found
    /// bad).
    pub lines: usize,
    /// The SHA-256 of the input through the end of line `lines`.
    pub digest: InputDigest,
    /// Bad lines.
    pub bad: BadLines,
    /// The first [`LISTED_BAD_LINES`] truncated lines.
    pub truncated_lines: Vec<usize>,
}

impl Tally {
    /// Nothing done yet, for a model of `layers × heads`.
    pub fn new(layers: usize, heads: usize) -> Tally {
        Tally {
            stats: CorpusStats::new(layers, heads),
            lines: 0,
            digest: InputDigest::empty(),
            bad: BadLines::default(),
            truncated_lines: Vec::new(),
        }
    }

    /// Add line `line`'s result (lines must come in increasing order).
    pub fn apply(&mut self, line: usize, event: &Event) {
        match event {
            Event::Sentence {
                stats,
                counts,
                load,
                ..
            } => {
                self.stats.add(stats, *counts);
                if let Some(load) = load {
                    self.stats.add_load(load);
                }
                if counts.truncated && self.truncated_lines.len() < LISTED_BAD_LINES {
                    self.truncated_lines.push(line);
                }
            }
            Event::Bad(bad) => self.bad.add(line, bad.clone()),
        }
    }
}

/// A result waiting for the lines before it.
#[derive(Debug)]
struct Pending {
    event: Event,
    digest: InputDigest,
    /// From a worker (so in the journal), not from the reader.
    journaled: bool,
}

/// The tally, the results waiting to be applied, and the journal.
#[derive(Debug)]
pub struct Ledger {
    tally: Tally,
    shard: Shard,
    /// The next line of this shard to apply.
    next: usize,
    pending: BTreeMap<usize, Pending>,
    /// Results of an earlier run's journal, waiting for the reader to pass their lines.
    resumed: BTreeMap<usize, Journaled>,
    journal: Option<Journal>,
}

/// The first line of `shard` after line `after`.
fn next_own_after(shard: Shard, after: usize) -> usize {
    let n = shard.count;
    // The smallest m ≥ after with m ≡ index − 1 (mod n); the line is m + 1.
    let want = shard.index - 1;
    after + (want + n - after % n) % n + 1
}

impl Ledger {
    /// Start from `tally` (empty, or an earlier run's), with the finished sentences of an earlier
    /// run's journal in `resumed` and a journal to append to.
    pub fn new(
        tally: Tally,
        shard: Shard,
        resumed: BTreeMap<usize, Journaled>,
        journal: Option<Journal>,
    ) -> Ledger {
        let next = next_own_after(shard, tally.lines);
        let resumed = resumed.into_iter().filter(|(l, _)| *l >= next).collect();
        Ledger {
            tally,
            shard,
            next,
            pending: BTreeMap::new(),
            resumed,
            journal,
        }
    }

    /// The tally of what is done.
    pub fn tally(&self) -> &Tally {
        &self.tally
    }

    /// Whether an earlier run already finished line `line` (its result came from the journal).
    pub fn is_resumed(&self, line: usize) -> bool {
        self.resumed.contains_key(&line)
    }

    /// The earlier run's result for `line`, now that the reader has passed it (`digest`: the
    /// input through it, which the journal's record was checked against before the run began).
    pub fn take_resumed(&mut self, line: usize, digest: InputDigest) {
        if let Some(j) = self.resumed.remove(&line) {
            self.insert(line, j.event, digest, true);
        }
    }

    /// Line `line`'s result, found by the reader (a bad line: not journaled, a rerun finds it
    /// again) or by a worker (`journaled`: appended to the journal first).
    pub fn record(
        &mut self,
        line: usize,
        event: Event,
        digest: InputDigest,
        journaled: bool,
    ) -> io::Result<()> {
        if journaled {
            if let Some(j) = &mut self.journal {
                j.append(line, &event, &digest)?;
            }
        }
        self.insert(line, event, digest, journaled);
        Ok(())
    }

    fn insert(&mut self, line: usize, event: Event, digest: InputDigest, journaled: bool) {
        if line == self.next {
            // The common case (every line before it is done): applied at once, without a
            // detour through the map.
            self.tally.apply(line, &event);
            self.tally.lines = line;
            self.tally.digest = digest;
            self.next += self.shard.count;
        } else {
            self.pending.insert(
                line,
                Pending {
                    event,
                    digest,
                    journaled,
                },
            );
        }
        while let Some(p) = self.pending.remove(&self.next) {
            self.tally.apply(self.next, &p.event);
            self.tally.lines = self.next;
            self.tally.digest = p.digest;
            self.next += self.shard.count;
        }
    }

    /// The reader has read (and handed out) every line up to `lines`, whose input digest is
    /// `digest`: when every line of the shard up to there is applied, the tally covers them all.
    pub fn read_through(&mut self, lines: usize, digest: InputDigest) {
        if self.next > lines && lines >= self.tally.lines {
            self.tally.lines = lines;
            self.tally.digest = digest;
        }
    }

    /// A copy of the tally to write down, with the journal restarted to hold only the results
    /// it does not cover (so the journal never grows past what is in flight).
    pub fn checkpoint(&mut self) -> io::Result<Tally> {
        if let Some(j) = &mut self.journal {
            let waiting = self
                .pending
                .iter()
                .filter(|(_, p)| p.journaled)
                .map(|(l, p)| (*l, &p.event, &p.digest))
                .chain(self.resumed.iter().map(|(l, j)| (*l, &j.event, &j.digest)));
            j.restart(waiting)?;
        }
        Ok(self.tally.clone())
    }

    /// Remove the journals older than the current one (after a checkpoint covering them is on
    /// disk).
    pub fn prune_journal(&self) {
        if let Some(j) = &self.journal {
            j.remove_older();
        }
    }

    /// The tally as the summary reports it: every result found, even past a line that never
    /// finished (a failed or stopped run), with `lines` read in all, and the line that stopped
    /// the run (`--on-bad-line stop`) listed as bad.
    pub fn summary(&self, lines_read: usize, stopped_at: Option<(usize, &BadLine)>) -> Tally {
        let mut tally = self.tally.clone();
        let mut extra: Vec<(usize, Event)> = self
            .pending
            .iter()
            .map(|(l, p)| (*l, p.event.clone()))
            .collect();
        if let Some((line, bad)) = stopped_at {
            extra.push((line, Event::Bad(bad.clone())));
            extra.sort_by_key(|(l, _)| *l);
        }
        for (line, event) in &extra {
            tally.apply(*line, event);
        }
        tally.lines = tally.lines.max(lines_read);
        tally
    }

    /// Whether results are still waiting for an earlier line (the run did not finish it).
    pub fn has_gap(&self) -> bool {
        !self.pending.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::HeadLabel;

    fn stats(v: f64) -> Vec<Vec<HeadStats>> {
        vec![vec![HeadStats {
            entropy: v,
            entropy_norm: v / 4.0,
            distance: v,
            to_start: 0.25,
            to_end: 0.125,
            to_first: f64::NAN,
            to_punct: 0.0,
            to_self: 0.5,
            to_prev: 0.1,
            to_next: 0.2,
            prev_token_score: 0.1,
            duplicate_token_score: 0.0,
            rows: 3,
            label: HeadLabel::None,
        }]]
    }

    fn sentence(v: f64) -> Event {
        Event::Sentence {
            stats: stats(v),
            counts: SentenceCounts {
                tokens: 3,
                units: 3,
                ..Default::default()
            },
            name: String::new(),
            load: None,
        }
    }

    #[test]
    fn next_own_line_follows_the_shard_rule() {
        for count in 1..6 {
            for index in 1..=count {
                let shard = Shard::new(index, count).unwrap();
                for after in 0..20 {
                    let want = (after + 1..).find(|&l| shard.owns(l)).unwrap();
                    assert_eq!(next_own_after(shard, after), want, "{shard} after {after}");
                }
            }
        }
    }

    #[test]
    fn results_apply_in_line_order_whatever_order_they_finish_in() {
        let shard = Shard::new(2, 3).unwrap(); // lines 2, 5, 8, 11
        let d = InputDigest::empty;
        let mut ledger = Ledger::new(Tally::new(1, 1), shard, BTreeMap::new(), None);
        ledger.record(8, sentence(3.0), d(), true).unwrap();
        ledger
            .record(5, Event::Bad(BadLine::Empty), d(), false)
            .unwrap();
        assert_eq!(ledger.tally().lines, 0, "line 2 is not done");
        assert!(ledger.has_gap());
        ledger.record(2, sentence(1.0), d(), true).unwrap();
        assert_eq!(ledger.tally().lines, 8);
        assert_eq!(ledger.tally().stats.sentences, 2);
        assert_eq!(ledger.tally().bad.listed, [(5, BadLine::Empty)]);
        // Lines 9 and 10 belong to other shards: reading through 10 covers them.
        ledger.read_through(10, d());
        assert_eq!(ledger.tally().lines, 10);
        // Line 11 still running, 14 finished: the summary counts 14, the tally does not.
        ledger.record(14, sentence(2.0), d(), true).unwrap();
        ledger.read_through(15, d());
        assert_eq!(ledger.tally().lines, 10);
        let summary = ledger.summary(15, None);
        assert_eq!(summary.stats.sentences, 3);
        assert_eq!(summary.lines, 15);
        // The same results in line order give the same sums.
        let mut direct = Tally::new(1, 1);
        direct.apply(2, &sentence(1.0));
        direct.apply(5, &Event::Bad(BadLine::Empty));
        direct.apply(8, &sentence(3.0));
        assert_eq!(direct.stats, ledger.tally().stats);
    }
}
