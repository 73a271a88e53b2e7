//! Corpus mode: `--input FILE --out-dir DIR` runs every line of FILE (a sentence, or a
//! tab-separated pair) through the model, writes each sentence's outputs into `DIR/sentences/`,
//! and averages the per-head statistics over the corpus into `DIR/corpus_stats.json`.
//!
//! How it runs (see `docs/corpus.md` for the why and the figures):
//! - The model is loaded once and shared by every worker.
//! - One thread reads and checks lines in order (UTF-8, tabs, emptiness, and, through the
//!   tokenizer, length); good lines go to a rayon pool, one sentence per task. A worker runs
//!   the forward pass, the statistics and the writers for its sentence, adds the statistics to
//!   a fixed-size accumulator, and drops the attention. At most one sentence per worker is in
//!   flight, so memory does not grow with the corpus.
//! - Bad lines are reported on stderr with their line number and skipped, or, with
//!   `--on-bad-line stop`, end the run after the lines before them are done. Either way, and on
//!   a first Ctrl-C, `corpus_stats.json` is written for what was processed. A second Ctrl-C (or
//!   SIGTERM) ends the run at once and removes its unfinished files ([`crate::cleanup`]).

mod accumulate;
mod interrupt;
pub mod lines;
mod summary;

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, BufRead, BufReader, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};
use rayon::prelude::*;

use crate::analysis::Stat;
use crate::analysis::{self, Analysis, AnalysisError, HeadStats, StatsSection, ViewOptions};
use crate::model::{self, Model};
use crate::output::{write_output_unsynced, OutputError};
use crate::render::json::JsonSection;
use crate::render::json::{json_sections, write_json_with, JsonOptions};
use crate::render::stats_table::{write_stats_table, StatsTableOptions};
use crate::render::ColorChoice;
use crate::tokenize::{self, Encoded};

pub use accumulate::{CorpusStats, SentenceCounts};
use lines::{BadLine, LineReader, RawLine};

/// Name of the corpus summary in the output folder.
pub const SUMMARY_FILE: &str = "corpus_stats.json";
/// Folder, inside the output folder, of the per-sentence outputs.
pub const SENTENCES_DIR: &str = "sentences";
/// Bad lines listed one by one in the summary (all are counted).
pub const LISTED_BAD_LINES: usize = 1000;
/// Truncated lines noted one by one on stderr (all are counted).
const NOTED_TRUNCATIONS: usize = 5;

/// Anything that ends a corpus run early or makes it fail. One line each, saying what to do.
#[derive(Debug, thiserror::Error)]
pub enum CorpusError {
    /// Loading or running the model.
    #[error(transparent)]
    Model(#[from] model::Error),
    /// Writing an output file.
    #[error(transparent)]
    Output(#[from] OutputError),
    /// Building the word-level or special-excluded view.
    #[error(transparent)]
    Analysis(#[from] AnalysisError),
    /// The input cannot be opened or read.
    #[error("cannot read {path}: {source}")]
    Input {
        /// The input as given.
        path: String,
        /// Why.
        source: io::Error,
    },
    /// The output folder cannot be created.
    #[error("cannot create the output folder {}: {source}", path.display())]
    OutDir {
        /// The folder.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A bad line with `--on-bad-line stop`.
    #[error("line {line}: {reason}; stopped (--on-bad-line stop). {done}")]
    Stopped {
        /// Its number, from 1.
        line: usize,
        /// What is wrong with it.
        reason: BadLine,
        /// What was kept.
        done: String,
    },
    /// Ctrl-C.
    #[error("interrupted. {done}")]
    Interrupted {
        /// What was kept.
        done: String,
    },
    /// Every line was bad, or there were none.
    #[error("{0}")]
    NothingUsable(String),
    /// A fatal error while the lines were processed (reading the input, writing a file, the
    /// model); the summary covers the sentences finished before it.
    #[error("{0}")]
    Failed(String),
    /// Writing the statistics table.
    #[error("cannot write to standard output: {0}")]
    Stdout(io::Error),
    /// The worker pool (`--threads`).
    #[error("cannot start {threads} worker threads: {reason}")]
    Threads {
        /// How many were asked for.
        threads: usize,
        /// Why not.
        reason: String,
    },
}

/// What to do with a bad line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnBadLine {
    /// Report it with its line number and go on.
    #[default]
    Skip,
    /// Report it and stop; what was written stays, and corpus_stats.json covers it.
    Stop,
}

crate::choice!(OnBadLine {
    Skip => ("skip", "Report it with its line number and go on"),
    Stop => ("stop", "Report it and stop; what was written stays, and corpus_stats.json covers it"),
});

/// An output written for each sentence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PerSentence {
    /// The JSON export with its statistics, as --json writes it (sentences/000042.json).
    Json,
    /// No per-sentence files, only the corpus statistics.
    None,
}

crate::choice!(PerSentence {
    Json => ("json", "The JSON export with its statistics, as --json writes it (sentences/000042.json)"),
    None => ("none", "No per-sentence files, only the corpus statistics"),
});

impl PerSentence {
    /// The name on the command line.
    pub fn as_str(self) -> &'static str {
        crate::choice::Choice::name(self)
    }
}

/// One corpus run as a front end asks for it, its flags already checked (the command line's
/// plan step): which model, which input and folder, and how to report.
#[derive(Clone, Debug, PartialEq)]
pub struct CorpusJob {
    /// Hub repo id or local folder of the model.
    pub model: String,
    /// Hub revision.
    pub revision: String,
    /// The input file, `-` for standard input.
    pub input: PathBuf,
    /// The output folder.
    pub out_dir: PathBuf,
    /// Per-sentence outputs, without duplicates; empty for none.
    pub per_sentence: Vec<PerSentence>,
    /// Skip bad lines, or stop at the first.
    pub on_bad_line: OnBadLine,
    /// Truncate lines longer than the model takes instead of calling them bad.
    pub truncate: bool,
    /// Word level and/or special tokens excluded.
    pub view: ViewOptions,
    /// Number format of the JSON exports.
    pub json: JsonOptions,
    /// Optional sections of the JSON exports.
    pub json_include: Vec<JsonSection>,
    /// Replace an earlier run's files in `out_dir`.
    pub force: bool,
    /// Print neither the statistics table nor the summary line.
    pub quiet: bool,
    /// The statistic the table shows as a heatmap; `None`: the overview.
    pub stat: Option<Stat>,
    /// Colour in the table.
    pub color: ColorChoice,
}

/// What a corpus run does, apart from the model and the input.
#[derive(Clone, Debug, PartialEq)]
pub struct CorpusOptions {
    /// The input's name for messages and the summary (`-` for standard input).
    pub input_name: String,
    /// The output folder.
    pub out_dir: PathBuf,
    /// What to write for each sentence into `out_dir/sentences/`.
    pub per_sentence: Vec<PerSentence>,
    /// Skip bad lines, or stop at the first.
    pub on_bad_line: OnBadLine,
    /// Truncate lines longer than the model takes instead of calling them bad.
    pub truncate: bool,
    /// Word level and/or special tokens excluded (outputs and statistics alike).
    pub view: ViewOptions,
    /// Number format of the JSON exports.
    pub json: JsonOptions,
    /// Optional sections of the JSON exports (`--json-include`).
    pub json_include: Vec<JsonSection>,
    /// Worker threads; `None`: as many as candle uses (`RAYON_NUM_THREADS`, else the number of
    /// physical cores).
    pub threads: Option<usize>,
    /// Show a progress bar on stderr (drawn only when stderr is a terminal).
    pub progress: bool,
    /// Total number of lines, when known, for the progress bar.
    pub total_lines: Option<u64>,
}

/// How a run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum End {
    /// Every line was read.
    Complete,
    /// At a bad line, with `--on-bad-line stop`.
    Stopped {
        /// Its number.
        line: usize,
        /// What is wrong with it.
        reason: BadLine,
    },
    /// Ctrl-C, after the given line.
    Interrupted {
        /// The last line handed out (every line up to it is done).
        after_line: usize,
    },
    /// A fatal error (reading the input, writing an output, the model).
    Failed(String),
}

/// Bad lines seen: all counted, the first [`LISTED_BAD_LINES`] kept.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BadLines {
    /// How many.
    pub count: usize,
    /// How many of each [`BadLine::kind`].
    pub by_kind: BTreeMap<&'static str, usize>,
    /// The first ones, with their line numbers.
    pub listed: Vec<(usize, BadLine)>,
}

impl BadLines {
    fn add(&mut self, line: usize, bad: BadLine) {
        self.count += 1;
        *self.by_kind.entry(bad.kind()).or_default() += 1;
        if self.listed.len() < LISTED_BAD_LINES {
            self.listed.push((line, bad));
        }
    }

    /// Add lines found bad by the workers (after the forward pass, so out of order), keeping
    /// the listed ones the first by line number.
    fn merge(&mut self, found: Vec<(usize, BadLine)>) {
        for (_, bad) in &found {
            self.count += 1;
            *self.by_kind.entry(bad.kind()).or_default() += 1;
        }
        self.listed.extend(found);
        self.listed.sort_by_key(|(line, _)| *line);
        self.listed.truncate(LISTED_BAD_LINES);
    }
}

/// The result of [`process`].
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The accumulated statistics and counts.
    pub stats: CorpusStats,
    /// Lines read from the input (good and bad).
    pub lines_read: usize,
    /// The bad ones.
    pub bad: BadLines,
    /// Line numbers of the first truncated lines (all are counted in `stats.truncated`).
    pub truncated_lines: Vec<usize>,
    /// How it ended.
    pub end: End,
    /// Wall time of the run (model loading excluded).
    pub elapsed: Duration,
    /// Worker threads used.
    pub threads: usize,
    /// Where the summary was written.
    pub summary_path: PathBuf,
}

/// Run `job` (flags already checked by the command line's plan step): load the model once with
/// `threads` workers, process every line, print the averaged statistics table on stdout and a
/// one-line summary on stderr (neither with `quiet`; warnings about bad lines are always
/// printed). Bad lines in stop mode and Ctrl-C end with an error after the summary is written.
pub fn run(job: &CorpusJob, threads: usize) -> Result<(), CorpusError> {
    let input = &job.input;
    let out_dir = job.out_dir.clone();
    let from_stdin = input.as_os_str() == "-";
    let input_name = input.display().to_string();
    let reader: Box<dyn BufRead + Send> = if from_stdin {
        Box::new(BufReader::with_capacity(1 << 16, io::stdin()))
    } else {
        let file = File::open(input).map_err(|source| CorpusError::Input {
            path: input_name.clone(),
            source,
        })?;
        Box::new(BufReader::with_capacity(1 << 16, file))
    };
    let per_sentence = job.per_sentence.clone();
    prepare_out_dir(&out_dir, &per_sentence)?;
    let progress = io::stderr().is_terminal();
    let total_lines = if progress && !from_stdin {
        count_lines(input).ok()
    } else {
        None
    };
    let model = Model::load(&job.model, &job.revision)?;
    if job.force {
        remove_earlier_run(&out_dir)?;
    }
    let opts = CorpusOptions {
        input_name,
        out_dir,
        per_sentence,
        on_bad_line: job.on_bad_line,
        truncate: job.truncate,
        view: job.view,
        json: job.json,
        json_include: job.json_include.clone(),
        threads: Some(threads),
        progress,
        total_lines,
    };
    interrupt::install();
    let outcome = process(&model, &opts, reader);
    interrupt::uninstall();
    let outcome = outcome?;

    if !job.quiet {
        if outcome.stats.sentences > 0 {
            print_table(&outcome, job, &model)?;
        }
        // Not eprintln!: a closed stderr (`2>&1 | head`) must not panic.
        let _ = writeln!(io::stderr(), "{}", summary_line(&outcome, &opts));
    }
    end_to_result(&outcome, &opts)
}

/// Process every line of `input` with `model`: per-sentence outputs into
/// `opts.out_dir/sentences/`, and the summary into `opts.out_dir/corpus_stats.json` (written
/// however the run ends, for the sentences that were done). Errors only for what stops the
/// run before or after the lines (the pool, the summary itself); how the lines went is in the
/// [`Outcome`].
pub fn process(
    model: &Model,
    opts: &CorpusOptions,
    input: impl BufRead + Send,
) -> Result<Outcome, CorpusError> {
    let threads = opts
        .threads
        .unwrap_or_else(candle_core::utils::get_num_threads);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| CorpusError::Threads {
            threads,
            reason: e.to_string(),
        })?;
    let outcome = pool.install(|| process_in_pool(model, opts, input));
    summary::write(&opts.out_dir.join(SUMMARY_FILE), model, opts, &outcome)?;
    Ok(outcome)
}

fn process_in_pool(model: &Model, opts: &CorpusOptions, input: impl BufRead + Send) -> Outcome {
    let start = Instant::now();
    let log = Log::new(opts.progress, opts.total_lines);
    let info = model.info();
    let acc = Mutex::new(CorpusStats::new(info.layers, info.heads));
    let abort = AtomicBool::new(false);
    let mut feed = Feed {
        lines: LineReader::new(input, tokenize::byte_limit(model.max_positions())),
        model,
        opts,
        log: &log,
        abort: &abort,
        lines_read: 0,
        bad: BadLines::default(),
        truncated_lines: Vec::new(),
        truncations: 0,
        end: None,
    };
    let found_bad = Mutex::new(Vec::new());
    let worker = Worker {
        model,
        opts,
        acc: &acc,
        log: &log,
        bad: &found_bad,
    };
    let result = (&mut feed).par_bridge().try_for_each(|item| {
        let res = worker.process(item);
        if res.is_err() {
            abort.store(true, Ordering::Relaxed);
        } else {
            log.bar.inc(1);
        }
        res
    });
    log.bar.finish_and_clear();
    let mut found_bad = found_bad.into_inner().unwrap_or_else(|e| e.into_inner());
    let end = match (result, feed.end.take()) {
        (Err(CorpusError::Stopped { line, reason, .. }), _) => {
            found_bad.push((line, reason.clone()));
            End::Stopped { line, reason }
        }
        (Err(e), _) => End::Failed(e.to_string()),
        (Ok(()), Some(end)) => end,
        (Ok(()), None) => End::Complete,
    };
    feed.bad.merge(found_bad);
    Outcome {
        stats: acc.into_inner().unwrap_or_else(|e| e.into_inner()),
        lines_read: feed.lines_read,
        bad: feed.bad,
        truncated_lines: feed.truncated_lines,
        end,
        elapsed: start.elapsed(),
        threads: rayon::current_num_threads(),
        summary_path: opts.out_dir.join(SUMMARY_FILE),
    }
}

/// A good line on its way to a worker.
struct Item {
    line: usize,
    text: String,
    pair: Option<String>,
    encoded: Encoded,
}

/// Reads lines in order, reports bad ones, and hands out good ones (tokenized) to the workers.
struct Feed<'a, R> {
    lines: LineReader<R>,
    model: &'a Model,
    opts: &'a CorpusOptions,
    log: &'a Log,
    abort: &'a AtomicBool,
    lines_read: usize,
    bad: BadLines,
    truncated_lines: Vec<usize>,
    truncations: usize,
    end: Option<End>,
}

impl<R: BufRead> Iterator for Feed<'_, R> {
    type Item = Item;

    fn next(&mut self) -> Option<Item> {
        loop {
            if self.end.is_some() || self.abort.load(Ordering::Relaxed) {
                return None;
            }
            if interrupt::requested() {
                self.end = Some(End::Interrupted {
                    after_line: self.lines_read,
                });
                return None;
            }
            let raw = match self.lines.next_line(interrupt::requested) {
                Ok(Some(raw)) => raw,
                Ok(None) if interrupt::requested() => continue,
                Ok(None) => return None,
                Err(e) => {
                    self.end = Some(End::Failed(
                        CorpusError::Input {
                            path: self.opts.input_name.clone(),
                            source: e,
                        }
                        .to_string(),
                    ));
                    return None;
                }
            };
            self.lines_read = raw.number;
            match self.check(&raw) {
                Ok(item) => return Some(item),
                Err(bad) => {
                    self.log.bar.inc(1);
                    if self.opts.on_bad_line == OnBadLine::Stop {
                        self.bad.add(raw.number, bad.clone());
                        self.end = Some(End::Stopped {
                            line: raw.number,
                            reason: bad,
                        });
                        return None;
                    }
                    self.log
                        .message(&format!("warning: line {}: {bad}; skipped", raw.number));
                    self.bad.add(raw.number, bad);
                }
            }
        }
    }
}

impl<R> Feed<'_, R> {
    /// Parse and tokenize a line, or say why it cannot be used.
    fn check(&mut self, raw: &RawLine) -> Result<Item, BadLine> {
        let limit = tokenize::byte_limit(self.model.max_positions());
        let sentence = lines::parse(raw, limit)?;
        if sentence.pair.is_some() && !self.model.accepts_pairs() {
            return Err(BadLine::PairUnsupported);
        }
        let encoded = self
            .model
            .tokenizer()
            .encode(
                sentence.text,
                sentence.pair,
                self.model.max_positions(),
                self.opts.truncate,
            )
            .map_err(|e| match e {
                tokenize::Error::Empty { .. } => BadLine::Empty,
                tokenize::Error::NoTokens { .. } => BadLine::NoTokens,
                tokenize::Error::TooLong { tokens, max } => BadLine::TooLong { tokens, max },
                tokenize::Error::TooManyBytes { bytes, limit, .. } => {
                    BadLine::TooManyBytes { len: bytes, limit }
                }
                other => BadLine::Tokenizer(other.to_string()),
            })?;
        if let Some(from) = encoded.truncated_from {
            self.truncations += 1;
            if self.truncated_lines.len() < LISTED_BAD_LINES {
                self.truncated_lines.push(raw.number);
            }
            if self.truncations <= NOTED_TRUNCATIONS {
                let more = if self.truncations == NOTED_TRUNCATIONS {
                    " (further truncations are counted in corpus_stats.json, not listed here)"
                } else {
                    ""
                };
                self.log.message(&format!(
                    "note: line {}: {from} tokens, truncated to {} (--truncate){more}",
                    raw.number,
                    encoded.ids.len()
                ));
            }
        }
        Ok(Item {
            line: raw.number,
            text: sentence.text.to_string(),
            pair: sentence.pair.map(str::to_string),
            encoded,
        })
    }
}

/// What each worker needs: shared, read-only, except the accumulator and the bad lines found.
struct Worker<'a> {
    model: &'a Model,
    opts: &'a CorpusOptions,
    acc: &'a Mutex<CorpusStats>,
    log: &'a Log,
    /// Lines whose attention came out bad (found after the forward pass, out of order).
    bad: &'a Mutex<Vec<(usize, BadLine)>>,
}

impl Worker<'_> {
    /// Forward pass, view, statistics, per-sentence outputs, accumulate. The same steps as
    /// the single-sentence CLI, so each JSON file equals what `attnviz TEXT --json` writes.
    fn process(&self, item: Item) -> Result<(), CorpusError> {
        let counts_pair = item.pair.is_some();
        let truncated = item.encoded.truncated_from.is_some();
        let encoding =
            match self
                .model
                .encode_tokens(&item.text, item.pair.as_deref(), item.encoded, false)
            {
                // The model's numbers overflow on this sentence: a bad line, like the others.
                Err(model::Error::Attention(row)) => {
                    let bad = BadLine::Attention(row.to_string());
                    if self.opts.on_bad_line == OnBadLine::Stop {
                        return Err(CorpusError::Stopped {
                            line: item.line,
                            reason: bad,
                            done: String::new(),
                        });
                    }
                    self.log
                        .message(&format!("warning: line {}: {bad}; skipped", item.line));
                    self.bad
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((item.line, bad));
                    return Ok(());
                }
                other => other?,
            };
        let tokens = encoding.attention.len();
        // The means and rollout only when the JSON carries them (the rollout costs L·n³).
        let (view, analysis) = if self.opts.json_include.is_empty() {
            (analysis::view(&encoding.attention, self.opts.view)?, None)
        } else {
            let (view, a) = Analysis::compute_view(&encoding.attention, self.opts.view)?;
            (view, Some(a))
        };
        let stats = match &analysis {
            Some(a) => a.stats.clone(),
            None => analysis::head_stats(&view),
        };
        self.write_outputs(item.line, &view, &stats, analysis.as_ref())?;
        let counts = SentenceCounts {
            pair: counts_pair,
            truncated,
            tokens,
            units: view.len(),
        };
        self.acc
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .add(&stats, counts);
        Ok(())
    }

    /// Every per-sentence output asked for, named by line number.
    fn write_outputs(
        &self,
        line: usize,
        view: &crate::Attention,
        stats: &[Vec<HeadStats>],
        analysis: Option<&Analysis>,
    ) -> Result<(), CorpusError> {
        for kind in &self.opts.per_sentence {
            match kind {
                PerSentence::Json => {
                    let path = sentence_path(&self.opts.out_dir, line, "json");
                    let section = serde_json::to_value(StatsSection::new(stats))
                        .expect("statistics serialise");
                    let sections =
                        json_sections(&self.opts.json_include, analysis).unwrap_or_default();
                    write_output_unsynced(&path, |w| {
                        write_json_with(view, &[("stats", section)], &sections, self.opts.json, w)
                    })?;
                }
                PerSentence::None => {}
            }
        }
        Ok(())
    }
}

/// Where line `line`'s output of kind `ext` goes: `DIR/sentences/000042.ext` (at least six
/// digits, so names sort in line order up to 999,999 lines).
pub fn sentence_path(out_dir: &Path, line: usize, ext: &str) -> PathBuf {
    out_dir.join(SENTENCES_DIR).join(format!("{line:06}.{ext}"))
}

/// The progress bar, and messages that don't tear it.
struct Log {
    bar: ProgressBar,
}

impl Log {
    fn new(show: bool, total: Option<u64>) -> Log {
        let target = if show {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let bar = ProgressBar::with_draw_target(total, target);
        let template = if total.is_some() {
            "{spinner} {human_pos}/{human_len} lines [{wide_bar}] {rate} ETA {eta}"
        } else {
            "{spinner} {human_pos} lines, {rate}, {elapsed}"
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            let rate = |state: &ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{:.0} lines/s", state.per_sec());
            };
            bar.set_style(style.progress_chars("=> ").with_key("rate", rate));
        }
        if !bar.is_hidden() {
            bar.enable_steady_tick(Duration::from_millis(120));
        }
        Log { bar }
    }

    /// A line on stderr, above the bar when there is one.
    fn message(&self, msg: &str) {
        // Not eprintln!: a closed stderr (`2>&1 | head`) must not panic.
        let print = || {
            let _ = writeln!(io::stderr(), "{msg}");
        };
        if self.bar.is_hidden() {
            print();
        } else {
            self.bar.suspend(print);
        }
    }
}

fn prepare_out_dir(out_dir: &Path, per_sentence: &[PerSentence]) -> Result<(), CorpusError> {
    let err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| CorpusError::OutDir { path, source }
    };
    if out_dir.exists() && !out_dir.is_dir() {
        return Err(CorpusError::OutDir {
            path: out_dir.to_path_buf(),
            source: io::Error::other("it is a file; give a folder"),
        });
    }
    fs::create_dir_all(out_dir).map_err(err(out_dir))?;
    if !per_sentence.is_empty() {
        let dir = out_dir.join(SENTENCES_DIR);
        fs::create_dir_all(&dir).map_err(err(&dir))?;
    }
    Ok(())
}

/// How many entries `DIR/sentences/` holds (an earlier run's outputs; the app layer refuses
/// to mix two runs unless `--force`).
pub fn earlier_run_files(out_dir: &Path) -> usize {
    fs::read_dir(out_dir.join(SENTENCES_DIR)).map_or(0, |rd| rd.count())
}

/// `--force`: remove an earlier run's per-sentence files (named by line number, as this mode
/// writes them, or its temporary files) and its summary. Anything else in the folder stays.
fn remove_earlier_run(out_dir: &Path) -> Result<(), CorpusError> {
    let dir = out_dir.join(SENTENCES_DIR);
    let err = |path: PathBuf| move |source| CorpusError::OutDir { path, source };
    let Ok(entries) = fs::read_dir(&dir) else {
        return Ok(());
    };
    for entry in entries {
        let entry = entry.map_err(err(dir.clone()))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let ours = match name.split_once('.') {
            Some((stem, _)) if !stem.is_empty() && stem.bytes().all(|b| b.is_ascii_digit()) => true,
            Some(("", rest)) => rest.ends_with(".tmp"),
            _ => false,
        };
        if ours && entry.file_type().is_ok_and(|t| t.is_file()) {
            fs::remove_file(entry.path()).map_err(err(entry.path()))?;
        }
    }
    let summary = out_dir.join(SUMMARY_FILE);
    if summary.is_file() {
        fs::remove_file(&summary).map_err(err(summary.clone()))?;
    }
    Ok(())
}

/// Number of lines in a file (a last line without a newline counts), for the progress bar.
fn count_lines(path: &Path) -> io::Result<u64> {
    let mut file = File::open(path)?;
    let mut buf = vec![0u8; 1 << 16];
    let (mut lines, mut last) = (0u64, b'\n');
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        lines += buf[..n].iter().filter(|&&b| b == b'\n').count() as u64;
        last = buf[n - 1];
    }
    Ok(lines + u64::from(last != b'\n'))
}

fn print_table(outcome: &Outcome, job: &CorpusJob, model: &Model) -> Result<(), CorpusError> {
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let n = outcome.stats.sentences;
    let res = writeln!(
        out,
        "Per-head statistics averaged over {} sentence{} (each sentence weighs the same):\n",
        thousands(n),
        if n == 1 { "" } else { "s" }
    )
    .and_then(|_| {
        let names = |role| {
            let tokens = model.tokenizer().role_tokens(role);
            if tokens.is_empty() {
                "none".to_string()
            } else {
                tokens.join("/")
            }
        };
        let opts = StatsTableOptions {
            token_names: Some(format!(
                "{}, {}",
                names(crate::attention::Role::Start),
                names(crate::attention::Role::End)
            )),
            ..StatsTableOptions::for_stdout(job.stat, job.color)
        };
        write_stats_table(&outcome.stats.mean_per_sentence(), &opts, &mut out)
    })
    .and_then(|_| out.flush());
    match res {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(CorpusError::Stdout(e)),
        _ => Ok(()),
    }
}

/// The closing line on stderr: what was done, how fast, where it went.
fn summary_line(outcome: &Outcome, opts: &CorpusOptions) -> String {
    let s = &outcome.stats;
    let secs = outcome.elapsed.as_secs_f64();
    let rate = if secs > 0.0 {
        s.sentences as f64 / secs
    } else {
        0.0
    };
    let mut line = format!(
        "Analysed {} sentence{} ({} tokens) of {} line{} in {:.1} s ({:.1} sentences/s, {} thread{})",
        thousands(s.sentences),
        if s.sentences == 1 { "" } else { "s" },
        thousands(s.tokens),
        thousands(outcome.lines_read as u64),
        if outcome.lines_read == 1 { "" } else { "s" },
        secs,
        rate,
        outcome.threads,
        if outcome.threads == 1 { "" } else { "s" },
    );
    let skipped = match outcome.end {
        End::Stopped { .. } => outcome.bad.count.saturating_sub(1),
        _ => outcome.bad.count,
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
    line += &format!(". Results in {}", opts.out_dir.display());
    line
}

/// Turn an early end into the error `main` prints.
fn end_to_result(outcome: &Outcome, opts: &CorpusOptions) -> Result<(), CorpusError> {
    let kept = |which: &str| {
        let n = outcome.stats.sentences;
        let (noun, verb) = if n == 1 {
            ("sentence", "is")
        } else {
            ("sentences", "are")
        };
        let files = if opts.per_sentence.is_empty() {
            String::new()
        } else {
            format!(
                "{verb} in {} and ",
                opts.out_dir.join(SENTENCES_DIR).display()
            )
        };
        format!(
            "The {} {noun} {which} {files}{verb} summarised in {}",
            thousands(n),
            outcome.summary_path.display()
        )
    };
    match &outcome.end {
        End::Complete if outcome.stats.sentences == 0 => {
            Err(CorpusError::NothingUsable(if outcome.lines_read == 0 {
                format!(
                    "{} has no lines; give one sentence (or a tab-separated pair) per line",
                    opts.input_name
                )
            } else {
                format!(
                    "none of the {} lines of {} could be used (see the warnings above)",
                    thousands(outcome.lines_read as u64),
                    opts.input_name
                )
            }))
        }
        End::Complete => Ok(()),
        End::Stopped { line, reason } => Err(CorpusError::Stopped {
            line: *line,
            reason: reason.clone(),
            done: kept("before it"),
        }),
        End::Interrupted { after_line } => Err(CorpusError::Interrupted {
            done: kept(&format!("up to line {after_line}")),
        }),
        End::Failed(msg) => Err(CorpusError::Failed(format!(
            "{msg}. {}",
            kept("finished before that")
        ))),
    }
}

/// `12345` → `12,345`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1234567), "1,234,567");
    }

    #[test]
    fn sentence_files_are_named_by_line_number() {
        let p = sentence_path(Path::new("out"), 42, "json");
        assert_eq!(p, Path::new("out/sentences/000042.json"));
        let p = sentence_path(Path::new("out"), 1234567, "png");
        assert_eq!(p, Path::new("out/sentences/1234567.png"));
    }

    #[test]
    fn count_lines_counts_a_last_line_without_newline() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("in.txt");
        for (text, want) in [("", 0), ("a", 1), ("a\n", 1), ("a\nb", 2), ("\n\n", 2)] {
            fs::write(&p, text).unwrap();
            assert_eq!(count_lines(&p).unwrap(), want, "{text:?}");
        }
    }
}
