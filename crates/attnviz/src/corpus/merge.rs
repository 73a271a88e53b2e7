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
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::ledger::Tally;
use super::partial::{self, Partial, RunIdentity};
use super::shard::Shard;
use super::summary::{self, Summary};
use super::{thousands, End, LISTED_BAD_LINES};
use serde_json::Value;

use crate::output::OutputError;
use crate::render::term::write_message;

/// Why a merge was refused. One line that names the file and says what to do.
#[derive(Debug)]
pub enum MergeError {
    /// The files cannot be merged, or the merge cannot be written: what and why, in words.
    Refused(String),
    /// Two shards accumulated different attentions of an encoder–decoder (encoder, decoder or
    /// cross-attention).
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
}

impl fmt::Display for MergeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MergeError::Refused(s) => f.write_str(s),
            MergeError::KindsDiffer {
                file,
                kind,
                first,
                first_kind,
            } => write!(
                f,
                "{file} holds the statistics of {kind} attention and {first} those of \
                 {first_kind} attention; the shards of one corpus must accumulate the same \
                 attention: cannot merge them"
            ),
        }
    }
}

impl std::error::Error for MergeError {}

impl From<OutputError> for MergeError {
    fn from(e: OutputError) -> Self {
        MergeError::Refused(e.to_string())
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

    fn read(&self) -> Result<Partial, String> {
        match self {
            PartialSource::File(p) if p.is_dir() => {
                let file = p.join(super::PARTIAL_FILE);
                if !file.is_file() {
                    return Err(format!("the folder holds no {}", super::PARTIAL_FILE));
                }
                partial::read(&file)
            }
            PartialSource::File(p) => partial::read(p),
            PartialSource::Bytes { bytes, .. } => {
                if bytes.len() as u64 > partial::MAX_BYTES {
                    return Err(format!(
                        "larger than the {} bytes a partial file may have",
                        partial::MAX_BYTES
                    ));
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
        return Err(MergeError::Refused(
            "give the partial files to merge (DIR/corpus_partial.json of each shard)".into(),
        ));
    };
    let label = |p: &Path| p.display().to_string();
    let mut first: Option<(RunIdentity, Tally)> = None;
    // Shard index → its file. A map, not a vector of `count` entries: a damaged file may claim
    // any count.
    let mut seen: BTreeMap<usize, PathBuf> = BTreeMap::new();
    let mut notes = Vec::new();
    let mut total: Option<Tally> = None;
    for (source, path) in sources.iter().zip(paths) {
        let p: Partial = source
            .read()
            .map_err(|e| MergeError::Refused(format!("{}: {e}", path.display())))?;
        if p.end != "complete" {
            let how = match p.end.as_str() {
                "running" => "is still running, or was killed".to_string(),
                other => format!("ended \"{other}\""),
            };
            return Err(MergeError::Refused(format!(
                "{}: shard {} {how} after line {}{}; finish it (rerun its command with --resume), \
                 then merge",
                path.display(),
                p.identity.shard,
                thousands(p.tally.lines as u64),
                p.end_reason
                    .as_deref()
                    .map_or(String::new(), |r| format!(" ({r})")),
            )));
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
                let kind = |id: &RunIdentity| match id.options.get("kind") {
                    Some(Value::String(k)) => k.clone(),
                    _ => "self".to_string(),
                };
                if kind(&p.identity) != kind(id) {
                    return Err(MergeError::KindsDiffer {
                        file: labels.0,
                        kind: kind(&p.identity),
                        first: labels.1,
                        first_kind: kind(id),
                    });
                }
                if let Some(c) = p.identity.conflict(id, (&labels.0, &labels.1), false) {
                    return Err(MergeError::Refused(format!("{c}; cannot merge them")));
                }
                if p.tally.lines != tally.lines || p.tally.digest != tally.digest {
                    return Err(MergeError::Refused(format!(
                        "{} read another input than {} ({} lines, {} bytes, SHA-256 {}… against \
                         {} lines, {} bytes, {}…); merge the shards of one corpus",
                        labels.0,
                        labels.1,
                        thousands(p.tally.lines as u64),
                        p.tally.digest.bytes,
                        short(&p.tally.digest.hex()),
                        thousands(tally.lines as u64),
                        tally.digest.bytes,
                        short(&tally.digest.hex()),
                    )));
                }
                if p.identity.threads != id.threads {
                    notes.push(format!(
                        "note: {} ran with {} threads and {} with {}: statistics agree to about \
                         1e-6 with a run of either, not bit for bit",
                        labels.0, p.identity.threads, labels.1, id.threads
                    ));
                }
                if p.identity.model["id"] != id.model["id"] {
                    notes.push(format!(
                        "note: {} names its model {} and {} {}: the same files (SHA-256), so \
                         merged; the summary names the first",
                        labels.0, p.identity.model["id"], labels.1, id.model["id"]
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
            return Err(MergeError::Refused(format!(
                "shard {} is given twice: {} and {}; give each shard once",
                p.identity.shard,
                other.display(),
                path.display()
            )));
        }
        seen.insert(index, path.clone());
        let t = total.as_mut().expect("set with the first file");
        let damaged = |e: String| {
            MergeError::Refused(format!(
                "{}: {e}; the file is damaged or was edited, so the shards cannot be merged",
                path.display()
            ))
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
        let shown: Vec<String> = (1..=count)
            .filter(|k| !seen.contains_key(k))
            .take(20)
            .map(|k| format!("{k}/{count}"))
            .collect();
        let more = if missing > 20 {
            format!(" and {} more", thousands(missing as u64 - 20))
        } else {
            String::new()
        };
        return Err(MergeError::Refused(format!(
            "{} of the {} shards {} missing: {}{more}; run {} (or give {} partial file{}) \
             and merge again",
            thousands(missing as u64),
            thousands(count as u64),
            if missing == 1 { "is" } else { "are" },
            shown.join(", "),
            if missing == 1 { "it" } else { "them" },
            if missing == 1 { "its" } else { "their" },
            if missing == 1 { "" } else { "s" },
        )));
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
    let per_sentence = id.options["per_sentence"]
        .as_array()
        .is_some_and(|a| !a.is_empty());
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
                .map_err(|e| MergeError::Refused(e.to_string()))?;
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
