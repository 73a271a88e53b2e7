//! The CLI's progress bars: a [`Progress`] that draws library stages on standard error with
//! indicatif (which draws nothing when standard error is not a terminal). The library only
//! reports; this is where a report becomes a bar.

use std::sync::Mutex;

use attnviz::progress::{Progress, Stage};
use indicatif::{ProgressBar, ProgressStyle};

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
                format!("downloading {file}"),
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
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "{line}");
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
