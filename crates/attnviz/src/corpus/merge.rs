//! `attnviz merge PARTIAL... --out corpus_stats.json`: combine the partial files of the shards of
//! one corpus into the summary one run over the whole corpus writes, byte for byte.
//!
//! The sums are fixed-point integers, so adding them is exact and order-free; the counts add;
//! the listed bad and truncated lines are the first [`super::LISTED_BAD_LINES`] by line number
//! over all shards (each shard lists its own first ones, which include every one of the global
//! first ones in that shard). The summary is then written by the code a run uses.
//!
//! Before anything is added, every file must be a complete shard of the same split of the same
//! input, run by the same attnviz with the same model files and options; the first difference
//! is refused naming the file. Missing and duplicate shards are refused too. Files are read one
//! at a time, so merging a thousand shards needs the memory of one.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::accumulate::SumsError;
use super::ledger::Tally;
use super::partial::{self, Conflict, Partial, PartialError, RunIdentity};
use super::shard::Shard;
use super::summary::{self, Summary};
use super::{thousands, End, LISTED_BAD_LINES};
use serde_json::Value;

use crate::output::OutputError;
use crate::render::term::write_message;

/// A shard that did not finish, as its partial file says. Displays as the facts ("FILE: shard
/// 2/4 is still running, or was killed after line 1,200"); what to do is the front end's to say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unfinished {
    /// The file.
    pub file: String,
    /// Its shard.
    pub shard: Shard,
    /// How it ended (`running`: it has not, yet).
    pub end: String,
    /// The lines it had done.
    pub lines: usize,
    /// Why it stopped, if it says.
    pub reason: Option<String>,
}

impl std::fmt::Display for Unfinished {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: shard {} ", self.file, self.shard)?;
        if self.end == "running" {
            f.write_str("is still running, or was killed")?;
        } else {
            write!(f, "ended \"{}\"", self.end)?;
        }
        write!(f, " after line {}", thousands(self.lines as u64))?;
        match &self.reason {
            Some(r) => write!(f, " ({r})"),
            None => Ok(()),
        }
    }
}

/// Why a merge was refused. Each displays as one line that names the file and says what to do.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// No file given.
    #[error("give the partial files to merge (DIR/corpus_partial.json of each shard)")]
    NoFiles,
    /// A file that cannot be read back.
    #[error("{file}: {source}")]
    Unreadable {
        /// The file.
        file: String,
        /// Why.
        source: PartialError,
    },
    /// A shard that did not finish.
    #[error("{0}; finish it (resume its run), then merge")]
    Unfinished(Unfinished),
    /// Two shards accumulated different attentions of an encoder–decoder (encoder, decoder or
    /// cross-attention).
    #[error("{file} holds the statistics of {kind} attention and {first} those of {first_kind} attention; the shards of one corpus must accumulate the same attention: cannot merge them")]
    KindsDiffer {
        /// The file that differs.
        file: String,
        /// The kind it accumulated.
        kind: String,
        /// The first file.
        first: String,
        /// The kind the first file accumulated.
        first_kind: String,
    },
    /// Two runs that cannot be combined.
    #[error("{0}; cannot merge them")]
    Conflict(Box<Conflict>),
    /// A shard of another input.
    #[error("{file} read another input than {first} ({} lines, {} bytes, SHA-256 {}… against {} lines, {} bytes, {}…); merge the shards of one corpus",
        thousands(.read[0].lines as u64), .read[0].bytes, short(&.read[0].sha256),
        thousands(.read[1].lines as u64), .read[1].bytes, short(&.read[1].sha256))]
    OtherInput {
        /// The file.
        file: String,
        /// The first file.
        first: String,
        /// What each read: the file, then the first file.
        read: Box<[InputRead; 2]>,
    },
    /// One shard given twice.
    #[error("shard {shard} is given twice: {first} and {second}; give each shard once")]
    Twice {
        /// The shard.
        shard: Shard,
        /// Its first file.
        first: String,
        /// Its second file.
        second: String,
    },
    /// Numbers that cannot be added to the others'.
    #[error("{file}: {source}; the file is damaged or was edited, so the shards cannot be merged")]
    Damaged {
        /// The file.
        file: String,
        /// What is wrong.
        source: SumsError,
    },
    /// Shards not given.
    #[error("{} of the {} shards {} missing: {}{}; run {} (or give {} partial file{}) and merge again",
        thousands(*.missing as u64), thousands(*.count as u64), if *.missing == 1 { "is" } else { "are" },
        .shown.iter().map(|k| format!("{k}/{count}")).collect::<Vec<_>>().join(", "),
        if *.missing > .shown.len() { format!(" and {} more", thousands((*.missing - .shown.len()) as u64)) } else { String::new() },
        if *.missing == 1 { "it" } else { "them" }, if *.missing == 1 { "its" } else { "their" },
        if *.missing == 1 { "" } else { "s" })]
    Missing {
        /// How many are missing.
        missing: usize,
        /// The shards of the split.
        count: usize,
        /// The first missing ones' indices.
        shown: Vec<usize>,
    },
    /// Writing the summary, or the table.
    #[error(transparent)]
    Write(#[from] OutputError),
    /// Printing the table.
    #[error(transparent)]
    Print(Box<super::CorpusError>),
}

/// What a shard read of its input: how far, and the SHA-256 of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputRead {
    /// Lines.
    pub lines: usize,
    /// Bytes.
    pub bytes: u64,
    /// Their SHA-256, in hex.
    pub sha256: String,
}

impl InputRead {
    fn of(tally: &Tally) -> InputRead {
        InputRead {
            lines: tally.lines,
            bytes: tally.digest.bytes,
            sha256: tally.digest.hex(),
        }
    }
}

/// The merged result.
#[derive(Debug)]
pub struct Merged {
    /// The identity the shards share (the first file's; shard 1/1).
    pub identity: RunIdentity,
    /// The whole corpus.
    pub tally: Tally,
    /// How many shards.
    pub shards: usize,
    /// Things worth knowing that did not stop the merge (different thread counts, input names).
    pub notes: Vec<String>,
    /// Time spent reading and adding.
    pub elapsed: Duration,
}

/// One shard's partial statistics to merge: a partial file (or the output folder that holds
/// it), or a partial file's bytes (what a program holds after reading one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PartialSource {
    /// A partial file, or a shard's output folder (its `corpus_partial.json`).
    File(PathBuf),
    /// A partial file's bytes, named `label` in messages.
    Bytes {
        /// How messages name it (`partial 3`).
        label: String,
        /// Its JSON.
        bytes: Vec<u8>,
    },
}

impl PartialSource {
    /// How messages name it: its path, or its label.
    fn label(&self) -> PathBuf {
        match self {
            PartialSource::File(p) => p.clone(),
            PartialSource::Bytes { label, .. } => PathBuf::from(label),
        }
    }

    fn read(&self) -> Result<Partial, PartialError> {
        match self {
            PartialSource::File(p) if p.is_dir() => {
                let file = p.join(super::PARTIAL_FILE);
                if !file.is_file() {
                    return Err(PartialError::NoneInFolder);
                }
                partial::read(&file)
            }
            PartialSource::File(p) => partial::read(p),
            PartialSource::Bytes { bytes, .. } => {
                if bytes.len() as u64 > partial::MAX_BYTES {
                    return Err(PartialError::TooLarge {
                        max: partial::MAX_BYTES,
                    });
                }
                partial::parse_bytes(bytes)
            }
        }
    }
}

/// Read and check every partial file in `paths` and add them up.
pub fn merge_files(paths: &[PathBuf]) -> Result<Merged, MergeError> {
    let sources: Vec<PartialSource> = paths.iter().cloned().map(PartialSource::File).collect();
    merge_sources(&sources)
}

/// [`merge_files`] over partial files or their bytes, in any order: the result is the same
/// for every order (the sums are integers; the listed lines are sorted).
pub fn merge_sources(sources: &[PartialSource]) -> Result<Merged, MergeError> {
    let start = Instant::now();
    let labels: Vec<PathBuf> = sources.iter().map(PartialSource::label).collect();
    let paths = &labels;
    let Some(first_path) = paths.first() else {
        return Err(MergeError::NoFiles);
    };
    let label = |p: &Path| p.display().to_string();
    let mut first: Option<(RunIdentity, Tally)> = None;
    // Shard index → its file. A map, not a vector of `count` entries: a damaged file may claim
    // any count.
    let mut seen: BTreeMap<usize, PathBuf> = BTreeMap::new();
    let mut notes = Vec::new();
    let mut total: Option<Tally> = None;
    for (source, path) in sources.iter().zip(paths) {
        let p: Partial = source.read().map_err(|source| MergeError::Unreadable {
            file: label(path),
            source,
        })?;
        if p.end != "complete" {
            return Err(MergeError::Unfinished(Unfinished {
                file: label(path),
                shard: p.identity.shard,
                end: p.end,
                lines: p.tally.lines,
                reason: p.end_reason,
            }));
        }
        match &first {
            None => {
                let (layers, heads) = p.tally.stats.shape();
                let mut t = Tally::new(layers, heads);
                t.lines = p.tally.lines;
                t.digest = p.tally.digest.clone();
                total = Some(t);
                first = Some((p.identity.clone(), p.tally.clone()));
            }
            Some((id, tally)) => {
                let labels = (label(path), label(first_path));
                let kind =
                    |id: &RunIdentity| id.options.kind.clone().unwrap_or_else(|| "self".into());
                if kind(&p.identity) != kind(id) {
                    return Err(MergeError::KindsDiffer {
                        file: labels.0,
                        kind: kind(&p.identity),
                        first: labels.1,
                        first_kind: kind(id),
                    });
                }
                if let Some(c) = p.identity.conflict(id, (&labels.0, &labels.1), false) {
                    return Err(MergeError::Conflict(Box::new(c)));
                }
                if p.tally.lines != tally.lines || p.tally.digest != tally.digest {
                    return Err(MergeError::OtherInput {
                        file: labels.0,
                        first: labels.1,
                        read: Box::new([InputRead::of(&p.tally), InputRead::of(tally)]),
                    });
                }
                if p.identity.threads != id.threads {
                    notes.push(format!(
                        "note: {} ran with {} threads and {} with {}: statistics agree to about \
                         1e-6 with a run of either, not bit for bit",
                        labels.0, p.identity.threads, labels.1, id.threads
                    ));
                }
                if p.identity.model.id != id.model.id {
                    // Each id as JSON writes it (quoted), as the files hold it.
                    let quoted = |id: &RunIdentity| Value::from(id.model.id.clone());
                    notes.push(format!(
                        "note: {} names its model {} and {} {}: the same files (SHA-256), so \
                         merged; the summary names the first",
                        labels.0,
                        quoted(&p.identity),
                        labels.1,
                        quoted(id)
                    ));
                }
                if p.identity.input != id.input {
                    notes.push(format!(
                        "note: {} read {:?} and {} {:?}: the same content (SHA-256); the summary \
                         names the first",
                        labels.0, p.identity.input, labels.1, id.input
                    ));
                }
            }
        }
        let index = p.identity.shard.index;
        if let Some(other) = seen.get(&index) {
            return Err(MergeError::Twice {
                shard: p.identity.shard,
                first: label(other),
                second: label(path),
            });
        }
        seen.insert(index, path.clone());
        let t = total.as_mut().expect("set with the first file");
        let damaged = |source| MergeError::Damaged {
            file: label(path),
            source,
        };
        t.stats.merge(&p.tally.stats).map_err(damaged)?;
        t.bad.merge(&p.tally.bad).map_err(damaged)?;
        t.truncated_lines
            .extend(p.tally.truncated_lines.iter().copied());
        t.truncated_lines.sort_unstable();
        t.truncated_lines.truncate(LISTED_BAD_LINES);
    }
    let (identity, _) = first.expect("at least one file");
    let count = identity.shard.count;
    let missing = count - seen.len();
    if missing > 0 {
        let shown = (1..=count)
            .filter(|k| !seen.contains_key(k))
            .take(20)
            .collect();
        return Err(MergeError::Missing {
            missing,
            count,
            shown,
        });
    }
    Ok(Merged {
        identity: RunIdentity {
            shard: Shard::WHOLE,
            ..identity
        },
        tally: total.expect("at least one file"),
        shards: count,
        notes,
        elapsed: start.elapsed(),
    })
}

fn short(hex: &str) -> &str {
    &hex[..hex.len().min(16)]
}

/// Write `merged` as the corpus summary to `out` (`-`: standard output).
pub fn write_summary(merged: &Merged, out: &Path) -> Result<(), MergeError> {
    summary::write(out, &summary_of(merged))?;
    Ok(())
}

/// `merged`'s corpus summary as the bytes [`write_summary`] writes.
pub fn summary_bytes(merged: &Merged) -> Vec<u8> {
    summary::to_bytes(&summary_of(merged))
}

fn summary_of(merged: &Merged) -> Summary<'_> {
    let id = &merged.identity;
    let per_sentence = !id.options.per_sentence.is_empty();
    Summary {
        model: &id.model,
        input: &id.input,
        input_format: &id.input_format,
        compression: &id.compression,
        shard: None,
        options: &id.options,
        per_sentence,
        end: &End::Complete,
        tally: &merged.tally,
        // Every shard measured the same (their identities agree).
        induction: &id.induction,
    }
}

/// What `attnviz merge` does, its flags already checked.
#[derive(Clone, Debug, PartialEq)]
pub struct MergeJob {
    /// The partial files.
    pub partials: Vec<PathBuf>,
    /// Where the summary goes (`-`: standard output).
    pub out: PathBuf,
    /// Print neither the statistics table nor the closing line.
    pub quiet: bool,
    /// The statistic the table shows as a heatmap; `None`: the overview.
    pub stat: Option<crate::analysis::Stat>,
    /// Colour in the table.
    pub color: crate::render::ColorChoice,
}

/// Merge, write the summary, and (unless quiet, or the summary goes to standard output) print
/// the averaged table and a closing line.
pub fn run(job: &MergeJob) -> Result<(), MergeError> {
    let merged = merge_files(&job.partials)?;
    for note in &merged.notes {
        // A note quotes the files (their model ids, input names): shown, not sent to the
        // terminal.
        let _ = write_message(&mut io::stderr(), note);
    }
    write_summary(&merged, &job.out)?;
    let to_stdout = job.out.as_os_str() == "-";
    if !job.quiet && !to_stdout {
        let s = &merged.tally.stats;
        if s.sentences > 0 {
            super::print_table(s, &merged.identity.token_names, job.stat, job.color)
                .map_err(|e| MergeError::Print(Box::new(e)))?;
        }
        let line = format!(
            "Merged {} shard{}: {} sentences ({} tokens) of {} lines, {} bad line{} skipped, in \
             {:.2} s. Summary in {}",
            merged.shards,
            if merged.shards == 1 { "" } else { "s" },
            thousands(s.sentences),
            thousands(s.tokens),
            thousands(merged.tally.lines as u64),
            thousands(merged.tally.bad.count as u64),
            if merged.tally.bad.count == 1 { "" } else { "s" },
            merged.elapsed.as_secs_f64(),
            job.out.display()
        );
        let _ = write_message(&mut io::stderr(), &line);
    }
    Ok(())
}
