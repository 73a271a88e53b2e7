//! What the CLI draws on standard error while the library works: the library reports through
//! [`Progress`] (and corpus mode's [`Listener`]); these decide what it looks like
//! (indicatif draws nothing when standard error is not a terminal).

use std::io::{self, IsTerminal, Write};
use std::sync::Mutex;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};

use attnviz::corpus::{Listener, Notice};
use attnviz::progress::{Progress, Stage};

use super::error::note;
use super::words;

/// Progress of a generation on standard error: a line redrawn in place after each token when
/// standard error is a terminal; otherwise, for long generations only (from
/// [`GenerateBar::LONG`] tokens), a line at each quarter.
pub(super) struct GenerateBar {
    terminal: bool,
    state: Mutex<BarState>,
}

#[derive(Default)]
struct BarState {
    total: u64,
    done: u64,
    shown: bool,
}

impl GenerateBar {
    /// Generations at least this long report progress on a standard error that is no terminal.
    const LONG: u64 = 64;

    pub(super) fn new() -> GenerateBar {
        GenerateBar {
            terminal: io::stderr().is_terminal(),
            state: Mutex::new(BarState::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, BarState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Progress for GenerateBar {
    fn start(&self, stage: &Stage, total: Option<u64>) {
        if *stage == Stage::Generate {
            let mut s = self.state();
            s.total = total.unwrap_or(0);
            s.done = 0;
        }
    }

    fn advance(&self, units: u64) {
        let mut s = self.state();
        s.done += units;
        let (done, total) = (s.done, s.total);
        let mut err = io::stderr().lock();
        if self.terminal {
            let _ = write!(err, "\rgenerating: {done}/{total} tokens");
            let _ = err.flush();
            s.shown = true;
        } else if total >= Self::LONG && done < total && done.is_multiple_of(total / 4) {
            let _ = writeln!(err, "generating: {done}/{total} tokens");
        }
    }

    fn message(&self, line: &str) {
        self.finish();
        note(line);
    }

    /// Clear the line drawn in place.
    fn finish(&self) {
        let mut s = self.state();
        if s.shown {
            let _ = write!(io::stderr().lock(), "\r\x1b[2K");
            s.shown = false;
        }
    }
}

/// Corpus mode's progress bar on a terminal's standard error (nothing elsewhere), with the
/// warnings printed above it so they don't tear it.
pub(super) struct CorpusBar {
    bar: ProgressBar,
    terminal: bool,
}

impl CorpusBar {
    pub(super) fn new() -> CorpusBar {
        // Hidden until the run starts: it is shown once its length and style are set, so the
        // first frame drawn is the finished one.
        CorpusBar {
            bar: ProgressBar::hidden(),
            terminal: io::stderr().is_terminal(),
        }
    }
}

impl Progress for CorpusBar {
    fn start(&self, stage: &Stage, total: Option<u64>) {
        if *stage != Stage::Corpus || !self.terminal {
            return;
        }
        let template = if total.is_some() {
            "{spinner} {human_pos}/{human_len} lines [{wide_bar}] {rate} ETA {eta}"
        } else {
            "{spinner} {human_pos} lines, {rate}, {elapsed}"
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            let rate = |state: &ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{:.0} lines/s", state.per_sec());
            };
            self.bar
                .set_style(style.progress_chars("=> ").with_key("rate", rate));
        }
        if let Some(total) = total {
            self.bar.set_length(total);
        }
        self.bar.set_draw_target(ProgressDrawTarget::stderr());
        self.bar.enable_steady_tick(Duration::from_millis(120));
    }

    fn advance(&self, units: u64) {
        self.bar.inc(units);
    }

    /// A line on stderr, above the bar when there is one. It may quote the input (a bad id, a
    /// line's text): control characters are shown (`<U+001B>`), not sent to the terminal.
    fn message(&self, line: &str) {
        if self.bar.is_hidden() {
            note(line);
        } else {
            self.bar.suspend(|| note(line));
        }
    }

    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl Listener for CorpusBar {
    fn shows_progress(&self) -> bool {
        self.terminal
    }

    fn notice(&self, notice: &Notice<'_>) {
        self.message(&words::notice(notice));
    }
}

/// A bar per stage on standard error, one at a time.
#[derive(Default)]
pub struct Bars {
    bar: Mutex<Option<ProgressBar>>,
}

impl Bars {
    fn with_bar(&self, f: impl FnOnce(&ProgressBar)) {
        if let Ok(bar) = self.bar.lock() {
            if let Some(bar) = bar.as_ref() {
                f(bar);
            }
        }
    }
}

impl Progress for Bars {
    fn start(&self, stage: &Stage, total: Option<u64>) {
        let bar = total.map_or_else(ProgressBar::no_length, ProgressBar::new);
        let (template, message) = match stage {
            Stage::Download { file } => (
                "{msg} [{elapsed_precise}] [{wide_bar}] {bytes}/{total_bytes} {bytes_per_sec} ({eta})",
                format!(
                    "downloading {}",
                    attnviz::render::term::escape_controls(file)
                ),
            ),
            Stage::Corpus => ("{msg} [{wide_bar}] {pos}/{len} lines", "corpus".to_string()),
            Stage::Generate => (
                "{msg} [{wide_bar}] {pos}/{len} tokens",
                "generating".to_string(),
            ),
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style);
        }
        bar.set_message(message);
        if let Ok(mut slot) = self.bar.lock() {
            *slot = Some(bar);
        }
    }

    fn advance(&self, units: u64) {
        self.with_bar(|bar| bar.inc(units));
    }

    fn message(&self, line: &str) {
        let line = attnviz::render::terminal::escape_controls(line).into_owned();
        let mut shown = false;
        self.with_bar(|bar| {
            bar.println(&line);
            shown = true;
        });
        if !shown {
            let _ = attnviz::render::term::write_message(&mut std::io::stderr(), &line);
        }
    }

    fn finish(&self) {
        // A finished download stays on screen: it records what was fetched.
        if let Ok(mut slot) = self.bar.lock() {
            if let Some(bar) = slot.take() {
                bar.finish();
            }
        }
    }
}
