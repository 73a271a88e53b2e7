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
//! - `--shard K/N` processes lines K, K + N, … ([`shard`]); every run writes its exact state to
//!   `corpus_partial.json` ([`partial`]) when it starts, every [`CHECKPOINT_EVERY`] and when it
//!   ends, and journals each finished sentence (`journal`), so `attnviz merge` can combine
//!   shards exactly ([`merge`]) and `--resume` can continue a killed run where it stopped.
//! - The input may be plain text or JSON Lines, gzip- or zstd-compressed ([`input`]).

mod accumulate;
pub mod damage;
pub mod folder;
pub mod ids;
pub mod input;
mod interrupt;
mod journal;
pub mod ledger;
pub mod lines;
pub mod merge;
pub mod notice;
mod out_dir;
pub mod partial;
pub mod provenance;
mod report;
pub mod resume;
mod run;
pub mod shard;
mod summary;

use std::collections::{BTreeMap, VecDeque};
use std::fs::{self, File};
use std::io::{self, BufRead, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

use rayon::prelude::*;

use crate::analysis::Stat;
use crate::analysis::{AnalysisError, ViewOptions};
use crate::attention::{AttentionKind, KindError};
use crate::model::{self, Model};
use crate::output::OutputError;
use crate::progress::Stage;
use crate::render::json::JsonOptions;
use crate::render::json::JsonSection;
use crate::render::stats_table::{write_stats_table, StatsTableOptions};
use crate::render::terminal::escape_controls;
use crate::render::ColorChoice;
use crate::request::{RequestError, RunRequest};
use crate::tokenize::{self, Encoded};
use attnviz_formats::doc::corpus::{CorpusOptionsDoc, ModelFilesDoc};
use attnviz_formats::doc::ModelDoc;

pub use accumulate::{CorpusStats, SentenceCounts};
pub use folder::OutFolder;
use folder::Place;
use ids::Names;
pub use input::{Compression, InputFormat};
use journal::Journaled;
use ledger::{Event, Ledger, Tally};
use lines::{BadLine, InputDigest, LineReader, RawLine};
pub use notice::{Listener, Notice, Stderr};
pub use partial::{RunIdentity, PARTIAL_FILE};
pub use shard::{AutoShardError, Scheduler, Shard, ShardSpec};

pub use out_dir::{earlier_run_files, sentence_file, sentence_path};
use out_dir::{prepare_out_dir, remove_earlier_run, remove_temporaries};
use report::end_to_result;
pub use report::{print_table, thousands};
pub use run::{process, run};

/// Name of the corpus summary in the output folder.
pub const SUMMARY_FILE: &str = "corpus_stats.json";
/// Folder, inside the output folder, of the per-sentence outputs.
pub const SENTENCES_DIR: &str = "sentences";
/// Bad lines listed one by one in the summary (all are counted).
pub const LISTED_BAD_LINES: usize = 1000;
/// Truncated lines noted one by one on stderr (all are counted).
const NOTED_TRUNCATIONS: usize = 5;
/// Bad lines of each kind warned about one by one on stderr; the others of that kind are
/// counted in one line at the end (all are counted in the summary).
pub const WARNED_PER_KIND: usize = 10;
/// Most input a resumed run reads ahead, past its checkpoint, to check the journal's lines
/// against the input before it starts (bytes of the lines, plus [`READ_AHEAD_LINE_COST`] per
/// line). Journaled lines beyond it are computed again rather than checked.
const READ_AHEAD_BYTES: usize = 64 << 20;
/// What one line read ahead costs besides its bytes (its digest and bookkeeping).
const READ_AHEAD_LINE_COST: usize = 200;
/// How often a running corpus writes its partial file (its checkpoint for `--resume`).
pub const CHECKPOINT_EVERY: Duration = Duration::from_secs(10);

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
    /// The output folder is in use, or holds another run's results.
    #[error("the output folder {}: {reason}", path.display())]
    Folder {
        /// The folder.
        path: PathBuf,
        /// What is wrong, and what to do.
        reason: folder::FolderProblem,
    },
    /// A bad line with `--on-bad-line stop`.
    #[error("line {line}: {reason}; stopped at the first bad line. {done}")]
    Stopped {
        /// Its number, from 1.
        line: usize,
        /// What is wrong with it.
        reason: BadLine,
        /// What was kept.
        done: String,
    },
    /// Ctrl-C, or SIGTERM (what schedulers send before they kill a job).
    #[error("{}. {done}; resume it with the same command to continue", if *signal == 15 { "terminated (SIGTERM)" } else { "interrupted" })]
    Interrupted {
        /// What was kept.
        done: String,
        /// The signal (2 for SIGINT, 15 for SIGTERM).
        signal: i32,
    },
    /// A run cannot be resumed in its output folder.
    #[error("cannot resume the run in {}: {reason}{}", dir.display(), reason.fix())]
    Resume {
        /// The output folder.
        dir: PathBuf,
        /// Why (and, by [`resume::ResumeProblem::fix`], what to do).
        reason: Box<resume::ResumeProblem>,
    },
    /// The attention kind asked for is not one the model has (or needs targets the lines
    /// don't give).
    #[error(transparent)]
    Kind(#[from] KindError),
    /// Hashing the model's files for the partial file.
    #[error("cannot read the model's files to fingerprint them: {0}")]
    Fingerprint(io::Error),
    /// An input without lines.
    #[error("{input} has no lines; give one sentence (or a tab-separated pair) per line")]
    NoLines {
        /// The input's name.
        input: String,
    },
    /// Every line of the input (or of the shard) was bad.
    #[error("none of the {} lines of {input}{} could be used (see the warnings above)", thousands(*.lines as u64), if .shard.is_whole() { String::new() } else { format!(" in shard {}", .shard) })]
    NoUsableLines {
        /// The lines (of the shard).
        lines: usize,
        /// The input's name.
        input: String,
        /// The shard.
        shard: Shard,
    },
    /// A folder of images given to a text model.
    #[error("{input} is a folder, which is read as a corpus of images, and {model} is no vision model; give a file of sentences, one per line")]
    FolderForText {
        /// The input's name.
        input: String,
        /// The model's name.
        model: String,
    },
    /// JSON Lines given to a vision model.
    #[error("{input} is JSON Lines, but a vision model's corpus is a folder of images or a file of image paths, one per line")]
    JsonlForImages {
        /// The input's name.
        input: String,
    },
    /// The journal cannot be written.
    #[error("cannot write the journal in {}: {source}", dir.display())]
    Journal {
        /// The output folder.
        dir: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A sentence's run without the attention the corpus accumulates.
    #[error("the run holds no {} attention", kind.as_str())]
    NoKind {
        /// The kind accumulated.
        kind: AttentionKind,
    },
    /// A sentence's run failed.
    #[error(transparent)]
    Request(Box<crate::request::RequestError>),
    /// A sentence's outputs could not be made.
    #[error(transparent)]
    Report(Box<crate::report::ReportError>),
    /// A fatal error while the lines were processed (reading the input, writing a file, the
    /// model); the summary covers the sentences finished before it.
    #[error("{failure}. {done}")]
    Failed {
        /// What failed.
        failure: Failure,
        /// What was kept.
        done: String,
    },
    /// Writing the statistics table.
    #[error("cannot write to standard output: {0}")]
    Stdout(io::Error),
    /// The worker pool (`--threads`).
    #[error("cannot start {threads} worker threads: {source}")]
    Threads {
        /// How many were asked for.
        threads: usize,
        /// Why not.
        source: rayon::ThreadPoolBuildError,
    },
}

/// What to do about a run that cannot be resumed ([`resume::ResumeProblem::fix`]). Each displays
/// as the words that follow the reason, naming no option: a front end words them in its own
/// terms (the CLI names `--force` for starting over).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResumeFix {
    /// Nothing to say.
    None,
    /// Start over (replacing the folder's files), or use another folder.
    StartOver,
    /// Resume with the earlier run's settings, or start over.
    SameSettings,
    /// Resume with the input the earlier run read.
    SameInput,
    /// Resume with the input the earlier run read, or start over.
    SameInputOrStartOver,
    /// The folder's files are damaged: start over.
    Damaged,
}

impl std::fmt::Display for ResumeFix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ResumeFix::None => "",
            ResumeFix::StartOver => "; start over, replacing the folder's files, or use another folder",
            ResumeFix::SameSettings => {
                "; resume with what the earlier run used, or start over, replacing the folder's files"
            }
            ResumeFix::SameInput => "; resume with the same input",
            ResumeFix::SameInputOrStartOver => {
                "; resume with the same input, or start over, replacing the folder's files"
            }
            ResumeFix::Damaged => " (start over, replacing the folder's files)",
        })
    }
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
    Json => ("json", "The JSON export with its statistics, as a single TEXT's JSON export (sentences/000042.json)"),
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
    /// Continue the earlier run in `out_dir` (`--resume`).
    pub resume: bool,
    /// Which lines to process (`--shard K/N`).
    pub shard: Shard,
    /// The input's format, or [`InputFormat::Auto`] to tell it from the content.
    pub input_format: InputFormat,
    /// Print neither the statistics table nor the summary line.
    pub quiet: bool,
    /// The statistic the table shows as a heatmap; `None`: the overview.
    pub stat: Option<Stat>,
    /// Colour in the table.
    pub color: ColorChoice,
    /// The attention of an encoder–decoder whose statistics are accumulated; `None`:
    /// cross-attention when the lines carry targets, else the encoder's.
    pub kind: Option<AttentionKind>,
    /// Record a local model and the input by their full paths in the summary, the partial file
    /// and the per-sentence JSON; otherwise by their names (their SHA-256 digests identify
    /// them all the same).
    pub full_paths: bool,
}

/// What a corpus run does, apart from the model and the input.
#[derive(Clone, Debug, PartialEq)]
pub struct CorpusOptions {
    /// The input's name for messages, as given (`-` for standard input).
    pub input_name: String,
    /// What the summary and the partial file record of the input: its file's name, or its full
    /// path when the job asks ([`CorpusJob::full_paths`]); `-` for standard input.
    pub recorded_input: String,
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
    /// Report progress to the listener (whose [`Listener::shows_progress`] said so).
    pub progress: bool,
    /// Total number of lines, when known, for the progress bar.
    pub total_lines: Option<u64>,
    /// Which lines to process.
    pub shard: Shard,
    /// The input's format (as detected: text or JSON Lines).
    pub format: InputFormat,
    /// The input's compression (as detected).
    pub compression: Compression,
    /// The SHA-256 of the model's files ([`provenance::fingerprint`]); `None` when unknown
    /// (library use), which no other run's matches.
    pub model_files: Option<ModelFilesDoc>,
    /// Continue from the partial file and journal in `out_dir`, if there are any.
    pub resume: bool,
    /// Each line carries a target that an encoder–decoder's decoder is teacher-forced with.
    pub targets: bool,
    /// For a vision model: each line is the path of an image, relative to this folder when
    /// not absolute (the input file's folder, the folder of images given as the input, or the
    /// working directory for standard input). `None`: lines are text.
    pub images_from: Option<PathBuf>,
    /// The attention whose statistics are accumulated: self-attention for an encoder or a
    /// decoder; for an encoder–decoder, its encoder's without targets, cross-attention by
    /// default with them.
    pub kind: AttentionKind,
}

/// The summary's `options`: every option that shapes a run's results or files. Runs merged or
/// resumed together must agree on all of them.
pub fn options_json(opts: &CorpusOptions) -> CorpusOptionsDoc {
    // An encoder–decoder's runs record the attention they accumulate (other models have one).
    let seq2seq = opts.kind != AttentionKind::SelfAttention;
    CorpusOptionsDoc {
        full_precision: opts.json.full_precision,
        input_format: opts.format.as_str().to_string(),
        json_include: opts
            .json_include
            .iter()
            .map(|s| crate::choice::Choice::name(*s).to_string())
            .collect(),
        kind: seq2seq.then(|| opts.kind.as_str().to_string()),
        no_special: opts.view.no_special,
        on_bad_line: crate::choice::Choice::name(opts.on_bad_line).to_string(),
        per_sentence: opts
            .per_sentence
            .iter()
            .map(|k| k.as_str().to_string())
            .collect(),
        targets: seq2seq.then_some(opts.targets),
        truncate: opts.truncate,
        words: opts.view.words,
        later: Default::default(),
    }
}

/// The identity of a run of `model` with `opts` on `threads` threads (see [`RunIdentity`]).
pub fn run_identity(model: &Model, opts: &CorpusOptions, threads: usize) -> RunIdentity {
    let names = |role| {
        let tokens = model.tokenizer().role_tokens(role);
        if tokens.is_empty() {
            "none".to_string()
        } else {
            tokens.join("/")
        }
    };
    RunIdentity {
        attnviz: env!("CARGO_PKG_VERSION").to_string(),
        model: ModelDoc::of(model.info()),
        model_files: opts.model_files.clone(),
        token_names: (
            names(crate::attention::Role::Start),
            names(crate::attention::Role::End),
        ),
        input: opts.recorded_input.clone(),
        input_format: opts.format.as_str().to_string(),
        compression: opts.compression.as_str().to_string(),
        options: options_json(opts),
        shard: opts.shard,
        threads,
        // Measured once per run, by `run::process`.
        induction: Value::Null,
    }
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
    /// Ctrl-C or SIGTERM, after the given line.
    Interrupted {
        /// The last line handed out (every line up to it is done).
        after_line: usize,
        /// The signal.
        signal: i32,
    },
    /// A fatal error (reading the input, writing an output, the model).
    Failed(Failure),
}

/// The error that ended a run, kept with how it ended (and written, in words, into the summary's
/// `end_reason`). Two are equal when they say the same.
#[derive(Clone, Debug)]
pub struct Failure(std::sync::Arc<CorpusError>);

impl Failure {
    /// `e`, as the way a run ended.
    pub fn new(e: CorpusError) -> Failure {
        Failure(std::sync::Arc::new(e))
    }

    /// The error.
    pub fn error(&self) -> &CorpusError {
        &self.0
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl PartialEq for Failure {
    fn eq(&self, other: &Self) -> bool {
        self.to_string() == other.to_string()
    }
}

impl Eq for Failure {}

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
    /// Count `bad` (line `line`), and list it if fewer than [`LISTED_BAD_LINES`] are.
    pub fn add(&mut self, line: usize, bad: BadLine) {
        self.count += 1;
        *self.by_kind.entry(bad.kind()).or_default() += 1;
        if self.listed.len() < LISTED_BAD_LINES {
            self.listed.push((line, bad));
        }
    }

    /// Add `other`'s bad lines, all after this one's (a later part of the same corpus) or
    /// interleaved with them (another shard): the listed ones stay the first by line number. A
    /// count that would overflow (a damaged file) is refused naming it, and nothing is added.
    pub fn merge(&mut self, other: &BadLines) -> Result<(), accumulate::SumsError> {
        let overflow = |field: String| accumulate::SumsError::CountOverflows { field };
        let count = self
            .count
            .checked_add(other.count)
            .ok_or_else(|| overflow("bad_lines.count".into()))?;
        let mut by_kind = self.by_kind.clone();
        for (kind, n) in &other.by_kind {
            let k = by_kind.entry(kind).or_default();
            *k = k
                .checked_add(*n)
                .ok_or_else(|| overflow(format!("bad_lines.by_kind.{kind}")))?;
        }
        self.count = count;
        self.by_kind = by_kind;
        self.listed.extend(other.listed.iter().cloned());
        self.listed.sort_by_key(|(line, _)| *line);
        self.listed.truncate(LISTED_BAD_LINES);
        Ok(())
    }
}

/// The result of [`process`].
#[derive(Clone, Debug)]
pub struct Outcome {
    /// Everything found: statistics, counts, bad and truncated lines (`lines`: lines read).
    pub tally: Tally,
    /// How it ended.
    pub end: End,
    /// Wall time of the run (model loading excluded).
    pub elapsed: Duration,
    /// Worker threads used.
    pub threads: usize,
    /// Where the summary was written.
    pub summary_path: PathBuf,
    /// Sentences an earlier run had done (`--resume`), among `tally.stats.sentences`.
    pub done_before: u64,
    /// The lines processed.
    pub shard: Shard,
    /// The output folder.
    pub out_dir: PathBuf,
}

#[cfg(test)]
mod tests {
    use super::damage::{ImpossibleRecord, JournalError};
    use super::folder::FolderProblem;
    use super::merge::{MergeError, Unfinished};
    use super::partial::{Conflict, PartialError};
    use super::resume::ResumeProblem;
    use super::*;

    /// Whether `text` names a command-line flag (`--word`).
    fn names_a_flag(text: &str) -> bool {
        text.match_indices("--")
            .any(|(at, _)| text[at + 2..].starts_with(|c: char| c.is_ascii_lowercase()))
    }

    fn resume(reason: ResumeProblem) -> CorpusError {
        CorpusError::Resume {
            dir: PathBuf::from("out"),
            reason: Box::new(reason),
        }
    }

    /// The corpus errors say what was wrong and what to do in words of the library's own: no
    /// flag of the CLI (whose words add them, `src/app/words.rs`).
    #[test]
    fn corpus_errors_name_no_flag_and_still_say_what_to_do() {
        let changed = |lines| ResumeProblem::InputChanged {
            lines,
            input: "in.txt".into(),
            sha256: "ab".into(),
            bytes: 9,
            earlier_sha256: "cd".into(),
            earlier_bytes: 9,
        };
        let errors = [
            (resume(ResumeProblem::NoPartialFile), "start over"),
            (
                resume(ResumeProblem::PartialFile(PartialError::NotAFile)),
                "or use another folder",
            ),
            (
                resume(ResumeProblem::Conflict(Conflict::Version {
                    a: "the earlier run".into(),
                    a_version: "1".into(),
                    b: "this run".into(),
                    b_version: "2".into(),
                })),
                "resume with what the earlier run used, or start over",
            ),
            (
                resume(ResumeProblem::Shape {
                    layers: 2,
                    heads: 2,
                    model_layers: 3,
                    model_heads: 3,
                }),
                "damaged or was edited (start over",
            ),
            (
                resume(ResumeProblem::Journal(JournalError::Impossible {
                    name: ".corpus_journal.0".into(),
                    line: 3,
                    what: ImpossibleRecord::Counts {
                        tokens: 1,
                        units: 2,
                    },
                })),
                "damaged or was edited (start over",
            ),
            (
                resume(ResumeProblem::InputShorter {
                    input: "in.txt".into(),
                    lines: 1,
                    done: 2,
                }),
                "; resume with the same input",
            ),
            (resume(changed(4)), "same input, or start over"),
            (
                resume(ResumeProblem::ShorterThanJournal {
                    input: "in.txt".into(),
                    lines: 1,
                    last: 2,
                }),
                "same input, or start over",
            ),
            (
                resume(ResumeProblem::LineChanged {
                    line: 4,
                    input: "in.txt".into(),
                    sha256: "ab".into(),
                    bytes: 9,
                    earlier_sha256: "cd".into(),
                    earlier_bytes: 9,
                }),
                "same input, or start over",
            ),
            (
                CorpusError::Folder {
                    path: PathBuf::from("out"),
                    reason: FolderProblem::Busy,
                },
                "its own output folder",
            ),
            (
                CorpusError::Folder {
                    path: PathBuf::from("out"),
                    reason: FolderProblem::OtherShard {
                        theirs: Shard::new(1, 2).unwrap(),
                        ours: Shard::new(2, 2).unwrap(),
                    },
                },
                "its own output folder, or start over",
            ),
        ];
        for (e, advice) in errors {
            let text = e.to_string();
            assert!(!names_a_flag(&text), "names a flag: {text}");
            assert!(text.contains(advice), "`{advice}` not in: {text}");
        }
        let e = MergeError::Unfinished(Unfinished {
            file: "p.json".into(),
            shard: Shard::new(2, 4).unwrap(),
            end: "running".into(),
            lines: 1200,
            reason: None,
        });
        assert_eq!(
            e.to_string(),
            "p.json: shard 2/4 is still running, or was killed after line 1,200; finish it \
             (resume its run), then merge"
        );
    }
}
