//! What a corpus run tells its user as it goes, typed: the front end words each [`Notice`] (the
//! CLI with its flags) and draws the progress ([`Listener`] is a [`Progress`] with notices).
//! [`Notice`]'s `Display` is the library's own wording, which names no flag.

use std::fmt;

use crate::progress::Progress;

use super::lines::BadLine;
use super::{thousands, Outcome, SUMMARY_FILE};

/// Something for the user's eyes while (or when) a corpus run goes.
#[derive(Debug)]
pub enum Notice<'a> {
    /// A bad line, skipped.
    BadLine {
        /// Its number, from 1.
        line: usize,
        /// What is wrong with it.
        bad: &'a BadLine,
        /// The last of its kind shown one by one (the others are counted at the end).
        last_shown: bool,
    },
    /// Bad lines of one kind that were counted, not shown one by one.
    Withheld {
        /// The kind ([`BadLine::kind`]).
        kind: &'static str,
        /// How many were not shown.
        withheld: usize,
        /// How many of the kind there were in all.
        total: usize,
    },
    /// A line cut to the model's maximum (truncation asked for).
    Truncated {
        /// Its number.
        line: usize,
        /// Its token count.
        from: usize,
        /// The tokens kept.
        kept: usize,
        /// The last truncation listed one by one.
        last_listed: bool,
    },
    /// A resumed run on another thread count than the earlier one.
    ThreadsDiffer {
        /// The earlier run's threads.
        earlier: usize,
        /// This run's.
        now: usize,
    },
    /// The closing line: what was done, how fast, where it went.
    Summary(&'a Outcome),
}

impl fmt::Display for Notice<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Notice::BadLine {
                line,
                bad,
                last_shown,
            } => bad_line(f, *line, &bad.to_string(), bad.kind(), *last_shown),
            Notice::Withheld {
                kind,
                withheld,
                total,
            } => write!(
                f,
                "warning: {} more `{kind}` line{} skipped ({} in all; every bad line is counted \
                 in {SUMMARY_FILE})",
                thousands(*withheld as u64),
                if *withheld == 1 { "" } else { "s" },
                thousands(*total as u64)
            ),
            Notice::Truncated {
                line,
                from,
                kept,
                last_listed,
            } => truncated(f, *line, *from, *kept, *last_listed, ""),
            Notice::ThreadsDiffer { earlier, now } => threads_differ(f, *earlier, *now),
            Notice::Summary(outcome) => f.write_str(&summary_line(outcome, "")),
        }
    }
}

/// The warning about bad line `line` (`reason` worded by the caller).
pub fn bad_line(
    f: &mut dyn fmt::Write,
    line: usize,
    reason: &str,
    kind: &str,
    last_shown: bool,
) -> fmt::Result {
    if last_shown {
        write!(
            f,
            "warning: line {line}: {reason}; skipped (further `{kind}` lines are counted at the \
             end, not shown)"
        )
    } else {
        write!(f, "warning: line {line}: {reason}; skipped")
    }
}

/// The note about a truncated line; `why` follows the counts (` (--truncate)` on the CLI).
pub fn truncated(
    f: &mut dyn fmt::Write,
    line: usize,
    from: usize,
    kept: usize,
    last_listed: bool,
    why: &str,
) -> fmt::Result {
    let more = if last_listed {
        " (further truncations are counted in corpus_stats.json, not listed here)"
    } else {
        ""
    };
    write!(
        f,
        "note: line {line}: {from} tokens, truncated to {kept}{why}{more}"
    )
}

/// The note about a resumed run's thread count.
pub fn threads_differ(f: &mut dyn fmt::Write, earlier: usize, now: usize) -> fmt::Result {
    write!(
        f,
        "note: the earlier run used {earlier} threads and this one {now}: the statistics agree \
         to about 1e-6, not bit for bit, with those of a run with one thread count"
    )
}

/// The closing line; `resumed` follows the count of sentences the earlier run did (` (--resume)`
/// on the CLI).
pub fn summary_line(outcome: &Outcome, resumed: &str) -> String {
    let s = &outcome.tally.stats;
    let lines_read = outcome.tally.lines;
    let secs = outcome.elapsed.as_secs_f64();
    let new = s.sentences.saturating_sub(outcome.done_before);
    let rate = if secs > 0.0 { new as f64 / secs } else { 0.0 };
    let shard = if outcome.shard.is_whole() {
        String::new()
    } else {
        format!(" (shard {})", outcome.shard)
    };
    let mut line = format!(
        "Analysed {} sentence{} ({} tokens) of {} line{}{shard} in {:.1} s ({:.1} sentences/s, {} thread{})",
        thousands(s.sentences),
        if s.sentences == 1 { "" } else { "s" },
        thousands(s.tokens),
        thousands(lines_read as u64),
        if lines_read == 1 { "" } else { "s" },
        secs,
        rate,
        outcome.threads,
        if outcome.threads == 1 { "" } else { "s" },
    );
    if outcome.done_before > 0 {
        line += &format!(
            "; {} of them done by the earlier run{resumed}",
            thousands(outcome.done_before)
        );
    }
    let bad = &outcome.tally.bad;
    let skipped = match outcome.end {
        super::End::Stopped { .. } => bad.count.saturating_sub(1),
        _ => bad.count,
    };
    if skipped > 0 {
        line += &format!(
            "; {} bad line{} skipped",
            thousands(skipped as u64),
            if skipped == 1 { "" } else { "s" }
        );
    }
    if s.truncated > 0 {
        line += &format!("; {} truncated", thousands(s.truncated));
    }
    line += &format!(". Results in {}", outcome.out_dir.display());
    line
}

/// A corpus run's listener: its progress ([`crate::progress::Stage::Corpus`], in lines) and
/// its notices. The default words a notice with [`Notice`]'s `Display` and hands it to
/// [`Progress::message`].
pub trait Listener: Progress {
    /// Whether progress is shown at all (the run then counts the input's lines for a total).
    fn shows_progress(&self) -> bool {
        false
    }
    /// `notice` for the user.
    fn notice(&self, notice: &Notice<'_>) {
        self.message(&notice.to_string());
    }
}

/// Lines on standard error, no progress: for library callers that pass no listener of their own.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stderr;

impl Progress for Stderr {
    fn message(&self, line: &str) {
        // Not eprintln!: a closed stderr (`2>&1 | head`) must not panic. A line may quote the
        // input: control characters are shown, not sent to the terminal.
        let _ = crate::render::term::write_message(&mut std::io::stderr(), line);
    }
}

impl Listener for Stderr {}
