//! `corpus_partial.json`: the exact state of a run (or a shard of one), for `attnviz merge` and
//! `--resume`.
//!
//! Where `corpus_stats.json` holds means (floating point, for people), the partial file holds the
//! fixed-point sums and every count and list they come from, so partial files add up exactly:
//! merging the N shards of a corpus gives, bit for bit, the statistics of one run over it. With
//! them it records what must agree for that to hold (the run's identity: attnviz version, model
//! and the SHA-256 of its files, options, input format, shard) and how far the run got (`end`,
//! `lines`, and the SHA-256 of the input through that line).
//!
//! A run writes it when it starts, every [`super::CHECKPOINT_EVERY`] while it runs (`"end":
//! "running"`), and when it ends. It always describes a prefix of the input: every line up to
//! `lines` (see [`super::ledger`]). The layout is documented in `docs/corpus.md`.

use std::fs;
use std::path::Path;

use attnviz_formats::doc::corpus::{
    BadLineDoc, BadLinesDoc, CorpusOptionsDoc, CorpusPartial, ModelFilesDoc, ShardDoc,
    TokenNamesDoc,
};
use attnviz_formats::doc::lines::write_document;
use attnviz_formats::doc::ModelDoc;
use serde::Deserialize;
use serde_json::Value;

use super::accumulate::{CorpusStats, SumsError};
use super::folder::{read_bounded, OutFolder, Place};
use super::ledger::Tally;
use super::lines::{BadLine, InputDigest};
use super::shard::{Shard, ShardError};
use super::{thousands, BadLines, LISTED_BAD_LINES};
use crate::output::OutputError;

/// Name of the partial-statistics file in the output folder.
pub const PARTIAL_FILE: &str = "corpus_partial.json";
/// `format` of a partial file.
pub const FORMAT: &str = "attnviz-corpus-partial";
/// Version of the layout; bumped on any incompatible change.
/// 2: ten statistics, each with the sentences and rows that define it (`defined`,
/// `defined_rows`). 3: twelve statistics (the head detectors' previous-token and
/// duplicate-token scores added).
pub const FORMAT_VERSION: u64 = 3;
/// `format` of a corpus summary, which is not a partial file.
const SUMMARY_FORMAT: &str = "attnviz-corpus-stats";
/// Largest partial file read (a real one is tens to hundreds of KB).
pub(crate) const MAX_BYTES: u64 = 64 << 20;

/// Everything that must agree for two partial files to be merged, or for a run to resume
/// another.
#[derive(Clone, Debug, PartialEq)]
pub struct RunIdentity {
    /// attnviz version that wrote it.
    pub attnviz: String,
    /// The model as the summary names it (id, revision, family, shape).
    pub model: ModelDoc,
    /// SHA-256 of the model's config, weights and tokenizer files ([`super::provenance`]);
    /// `None` when not known.
    pub model_files: Option<ModelFilesDoc>,
    /// The start and end tokens' names, for the statistics table.
    pub token_names: (String, String),
    /// The input's name as given.
    pub input: String,
    /// `text` or `jsonl`.
    pub input_format: String,
    /// `none`, `gzip` or `zstd`.
    pub compression: String,
    /// The options that shape the results (the summary's `options`).
    pub options: CorpusOptionsDoc,
    /// Which shard.
    pub shard: Shard,
    /// Worker threads (the engine's matrix products may round differently with another count).
    pub threads: usize,
    /// The model's induction scores on the head detector's probe, as the summary writes them
    /// (`null`: not measured): a property of the model and the threads, so equal across the
    /// shards of one corpus, and the merge takes them from its files.
    pub induction: Value,
}

impl RunIdentity {
    /// The first difference that forbids combining run `a` (this one) with run `b` (merge:
    /// other shards of one corpus; resume, `same_shard`: the same shard again), naming the runs
    /// by `labels`; `None` when they agree.
    pub fn conflict(
        &self,
        b: &RunIdentity,
        labels: (&str, &str),
        same_shard: bool,
    ) -> Option<Conflict> {
        let (a_label, b_label) = (labels.0.to_string(), labels.1.to_string());
        if self.attnviz != b.attnviz {
            return Some(Conflict::Version {
                a: a_label,
                a_version: self.attnviz.clone(),
                b: b_label,
                b_version: b.attnviz.clone(),
            });
        }
        if let Some(difference) =
            super::provenance::difference(self.model_files.as_ref(), b.model_files.as_ref())
        {
            return Some(Conflict::ModelFiles {
                a: a_label,
                b: b_label,
                difference,
            });
        }
        // Compared as written, option by option: the first that differs is named.
        let written = |o: &CorpusOptionsDoc| match serde_json::to_value(o) {
            Ok(Value::Object(map)) => map,
            _ => serde_json::Map::new(),
        };
        let (oa, ob) = (written(&self.options), written(&b.options));
        let keys = oa.keys().chain(ob.keys().filter(|k| !oa.contains_key(*k)));
        for key in keys {
            let (va, vb) = (
                oa.get(key).unwrap_or(&Value::Null),
                ob.get(key).unwrap_or(&Value::Null),
            );
            if va != vb {
                return Some(Conflict::Option {
                    a: a_label,
                    a_value: va.clone(),
                    b: b_label,
                    b_value: vb.clone(),
                    key: key.clone(),
                });
            }
        }
        if self.induction != b.induction {
            return Some(Conflict::Induction {
                a: a_label,
                b: b_label,
            });
        }
        if self.shard.count != b.shard.count || (same_shard && self.shard != b.shard) {
            return Some(Conflict::Shard {
                a: a_label,
                a_shard: self.shard,
                b: b_label,
                b_shard: b.shard,
            });
        }
        None
    }
}

/// Why two runs' results cannot be combined: the first thing in which they differ.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum Conflict {
    /// Written by different versions of attnviz.
    #[error("{a} is from attnviz {a_version}, {b} from attnviz {b_version}")]
    Version {
        /// The first run's name.
        a: String,
        /// Its attnviz version.
        a_version: String,
        /// The second run's name.
        b: String,
        /// Its attnviz version.
        b_version: String,
    },
    /// Run with different model files.
    #[error("{a} and {b} used {difference}")]
    ModelFiles {
        /// The first run's name.
        a: String,
        /// The second run's name.
        b: String,
        /// Which files differ.
        difference: super::provenance::Difference,
    },
    /// Run with a different option.
    #[error("{a} was run with {key} = {a_value}, {b} with {key} = {b_value}")]
    Option {
        /// The first run's name.
        a: String,
        /// Its value of the option.
        a_value: Value,
        /// The second run's name.
        b: String,
        /// Its value.
        b_value: Value,
        /// The option, as the summary's `options` names it.
        key: String,
    },
    /// Different induction scores (another build or thread count).
    #[error(
        "{a} and {b} measured different induction scores on the model's probe: run every shard \
         with the same attnviz and thread count"
    )]
    Induction {
        /// The first run's name.
        a: String,
        /// The second run's name.
        b: String,
    },
    /// Another shard (of another split, or another one where the same was expected).
    #[error("{a} is shard {a_shard}, {b} shard {b_shard}{}", if .a_shard.count != .b_shard.count { ": merge the shards of one split" } else { "" })]
    Shard {
        /// The first run's name.
        a: String,
        /// Its shard.
        a_shard: Shard,
        /// The second run's name.
        b: String,
        /// Its shard.
        b_shard: Shard,
    },
}

/// A partial file, read back.
#[derive(Clone, Debug)]
pub struct Partial {
    /// What run wrote it.
    pub identity: RunIdentity,
    /// `running`, `complete`, `interrupted`, `stopped` or `failed`.
    pub end: String,
    /// Why it stopped or failed.
    pub end_reason: Option<String>,
    /// Lines of this shard among `tally.lines`.
    pub lines_in_shard: usize,
    /// The exact state through line `tally.lines`.
    pub tally: Tally,
}

/// Write the partial file into `folder` (atomically, and synced to disk: it is the checkpoint
/// `--resume` continues from, so it must not outlive an OS crash that loses what it counts).
pub fn write(
    folder: &OutFolder,
    identity: &RunIdentity,
    tally: &Tally,
    end: &str,
    end_reason: Option<&str>,
) -> Result<(), OutputError> {
    let doc = document(identity, tally, end, end_reason);
    folder.write(Place::Top, PARTIAL_FILE, true, |w| {
        write_document(&doc, &["sums"], w)
    })
}

/// Lines of `shard` among lines `1..=lines`.
pub fn lines_in_shard(shard: Shard, lines: usize) -> usize {
    if lines < shard.index {
        0
    } else {
        (lines - shard.index) / shard.count + 1
    }
}

fn document(id: &RunIdentity, tally: &Tally, end: &str, end_reason: Option<&str>) -> CorpusPartial {
    let s = &tally.stats;
    CorpusPartial {
        format: FORMAT.into(),
        format_version: FORMAT_VERSION,
        attnviz: id.attnviz.clone(),
        shard: ShardDoc {
            index: id.shard.index,
            count: id.shard.count,
        },
        model: id.model.clone(),
        model_files: id.model_files.clone(),
        token_names: TokenNamesDoc {
            start: id.token_names.0.clone(),
            end: id.token_names.1.clone(),
        },
        input: id.input.clone(),
        input_format: id.input_format.clone(),
        compression: id.compression.clone(),
        options: id.options.clone(),
        threads: id.threads,
        induction: id.induction.clone(),
        end: end.into(),
        end_reason: end_reason.map(str::to_string),
        lines: tally.lines,
        input_bytes: tally.digest.bytes,
        input_sha256: tally.digest.hex(),
        lines_in_shard: lines_in_shard(id.shard, tally.lines),
        sentences: s.sentences,
        skipped: tally.bad.count,
        pairs: s.pairs,
        truncated: s.truncated,
        tokens: s.tokens,
        units: s.units,
        truncated_lines: tally.truncated_lines.clone(),
        bad_lines: bad_lines_doc(&tally.bad),
        sums: s.sums_doc(),
    }
}

/// The `bad_lines` object of the summary and the partial file.
pub fn bad_lines_doc(bad: &BadLines) -> BadLinesDoc {
    BadLinesDoc {
        count: bad.count,
        by_kind: bad
            .by_kind
            .iter()
            .map(|(k, n)| (k.to_string(), *n))
            .collect(),
        listed: bad
            .listed
            .iter()
            .map(|(line, bad)| BadLineDoc {
                line: *line,
                kind: bad.kind().into(),
                reason: bad.to_string(),
            })
            .collect(),
    }
}

/// Why a partial file cannot be read back: each displays as one line that says what is wrong
/// (without the file's name, which the caller adds).
#[derive(Debug, thiserror::Error)]
pub enum PartialError {
    /// It cannot be opened or read.
    #[error("{0}")]
    Read(#[from] std::io::Error),
    /// A folder, a FIFO, a device.
    #[error("not a file")]
    NotAFile,
    /// A shard's output folder without a partial file.
    #[error("the folder holds no {PARTIAL_FILE}")]
    NoneInFolder,
    /// More bytes than a partial file may have.
    #[error("larger than the {max} bytes a partial file may have")]
    TooLarge {
        /// The most it may have.
        max: u64,
    },
    /// Not UTF-8.
    #[error("not UTF-8 ({0})")]
    NotUtf8(#[from] std::str::Utf8Error),
    /// Not JSON (a number out of range, NaN, a cut file).
    #[error("not JSON ({source}{})", in_field(.field))]
    NotJson {
        /// The parser's error.
        source: serde_json::Error,
        /// The top-level field of the line it is on.
        field: Option<String>,
    },
    /// A corpus summary given for a partial file.
    #[error(
        "this is a corpus summary (corpus_stats.json); merge the partial files \
         (corpus_partial.json) beside them"
    )]
    Summary,
    /// Another kind of file.
    #[error("not an attnviz partial-statistics file (no \"format\": \"{FORMAT}\")")]
    NotPartial,
    /// Another version of the layout.
    #[error("format version {found} (this attnviz reads {FORMAT_VERSION}); merge with the attnviz that wrote it")]
    Version {
        /// The version it claims, as written.
        found: Value,
    },
    /// A field missing, or of another type than the layout's.
    #[error("{}{}", without_position(.source), in_field(.field))]
    Field {
        /// The reader's error.
        source: serde_json::Error,
        /// The top-level field of the line it is on.
        field: Option<String>,
    },
    /// A shard that cannot be.
    #[error(transparent)]
    Shard(#[from] ShardError),
    /// Sums no run writes.
    #[error(transparent)]
    Sums(#[from] SumsError),
    /// A bad line of a kind no run records.
    #[error("unknown bad-line kind {kind:?}")]
    BadLineKind {
        /// The kind, as written.
        kind: String,
    },
    /// No threads.
    #[error("\"threads\" is 0")]
    NoThreads,
    /// More lines than bytes.
    #[error("\"lines\" is {}, but \"input_bytes\" is {}: every line takes at least one byte", thousands(*.lines as u64), thousands(*.bytes))]
    LinesOverBytes {
        /// Lines.
        lines: usize,
        /// Bytes.
        bytes: u64,
    },
    /// `lines_in_shard` that is not the shard's share of `lines`.
    #[error("\"lines_in_shard\" is {}, but shard {shard} has {} of the first {} lines", thousands(*.found as u64), thousands(*.own as u64), thousands(*.lines as u64))]
    LinesInShard {
        /// What the file says.
        found: usize,
        /// The shard.
        shard: Shard,
        /// Its lines among `lines`.
        own: usize,
        /// Lines read.
        lines: usize,
    },
    /// Sentences and bad lines that do not add up to the shard's lines.
    #[error("\"sentences\" ({}) and \"bad_lines.count\" ({}) do not add up to the {} lines of shard {shard} among the first {} (\"lines\"): each line is a sentence or a bad line", thousands(*.sentences), thousands(*.bad as u64), thousands(*.own as u64), thousands(*.lines as u64))]
    Unaccounted {
        /// Sentences.
        sentences: u64,
        /// Bad lines.
        bad: usize,
        /// The shard's lines.
        own: usize,
        /// The shard.
        shard: Shard,
        /// Lines read.
        lines: usize,
    },
    /// Bad lines by kind that do not add up to their count.
    #[error("\"bad_lines.by_kind\" does not add up to \"bad_lines.count\" ({})", thousands(*.count as u64))]
    ByKind {
        /// `bad_lines.count`.
        count: usize,
    },
    /// A listed line that is not one of the shard's lines read.
    #[error("\"{list}\" lists line {line}, which is not one of the {} lines of shard {shard} among the first {}", thousands(*.own as u64), thousands(*.lines as u64))]
    ListedElsewhere {
        /// `bad_lines.listed` or `truncated_lines`.
        list: &'static str,
        /// The line.
        line: usize,
        /// The shard's lines.
        own: usize,
        /// The shard.
        shard: Shard,
        /// Lines read.
        lines: usize,
    },
    /// More listed lines than the list holds.
    #[error("\"{list}\" lists {listed} lines, more than the {most} it can hold")]
    ListedTooMany {
        /// `bad_lines.listed` or `truncated_lines`.
        list: &'static str,
        /// Lines listed.
        listed: usize,
        /// The most it holds.
        most: usize,
    },
}

fn in_field(field: &Option<String>) -> String {
    field
        .as_deref()
        .map_or(String::new(), |f| format!(", in \"{f}\""))
}

/// A reader's error without its " at line L column C" (the field is named instead).
fn without_position(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.rfind(" at line ") {
        Some(at) if e.line() > 0 => text[..at].to_string(),
        _ => text,
    }
}

/// Read the partial file at `path` (a path given on the command line: a link to it is
/// followed). It is opened without blocking and must be a regular file (a FIFO or a device is
/// refused at once) of at most 64 MiB.
pub fn read(path: &Path) -> Result<Partial, PartialError> {
    let mut opts = fs::OpenOptions::new();
    opts.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.custom_flags(libc::O_NONBLOCK);
    }
    let file = opts.open(path)?;
    if !file.metadata()?.is_file() {
        return Err(PartialError::NotAFile);
    }
    parse_bytes(&read_bounded(file, MAX_BYTES)?)
}

/// Read the partial file of the run in `folder`, if there is one (see [`OutFolder`]: never
/// through a link, never blocking).
pub fn read_in(folder: &OutFolder) -> Result<Option<Partial>, PartialError> {
    match folder.read_regular(Place::Top, PARTIAL_FILE, MAX_BYTES)? {
        Some(bytes) => parse_bytes(&bytes).map(Some),
        None => Ok(None),
    }
}

/// A partial file's bytes, parsed and checked.
pub fn parse_bytes(bytes: &[u8]) -> Result<Partial, PartialError> {
    let text = std::str::from_utf8(bytes)?;
    // One field per line: name the field an error is in from its line.
    let field = |e: &serde_json::Error| {
        text.lines()
            .nth(e.line().saturating_sub(1))
            .and_then(|l| l.trim_start().strip_prefix('"'))
            .and_then(|l| l.split_once('"'))
            .map(|(key, _)| key.to_string())
    };
    /// What says which file this is, read before the rest.
    #[derive(Deserialize)]
    struct Head {
        format: Option<Value>,
        format_version: Option<Value>,
    }
    // Its fields are any JSON: what fails here is not JSON (or a number JSON cannot hold).
    let head: Head = serde_json::from_str(text).map_err(|e| {
        let field = field(&e);
        PartialError::NotJson { source: e, field }
    })?;
    match head.format.as_ref().and_then(Value::as_str) {
        Some(FORMAT) => {}
        Some(SUMMARY_FORMAT) => return Err(PartialError::Summary),
        _ => return Err(PartialError::NotPartial),
    }
    if head.format_version.as_ref().and_then(Value::as_u64) != Some(FORMAT_VERSION) {
        return Err(PartialError::Version {
            found: head.format_version.unwrap_or(Value::Null),
        });
    }
    let doc: CorpusPartial = serde_json::from_str(text).map_err(|e| {
        let field = field(&e);
        match e.classify() {
            serde_json::error::Category::Data => PartialError::Field { source: e, field },
            _ => PartialError::NotJson { source: e, field },
        }
    })?;
    from_document(doc)
}

fn from_document(doc: CorpusPartial) -> Result<Partial, PartialError> {
    let shard = Shard::new(doc.shard.index, doc.shard.count)?;
    if doc.threads == 0 {
        return Err(PartialError::NoThreads);
    }
    let identity = RunIdentity {
        attnviz: doc.attnviz,
        model: doc.model,
        model_files: doc.model_files,
        token_names: (doc.token_names.start, doc.token_names.end),
        input: doc.input,
        input_format: doc.input_format,
        compression: doc.compression,
        options: doc.options,
        shard,
        threads: doc.threads,
        induction: doc.induction,
    };
    let counts = [
        doc.sentences,
        doc.pairs,
        doc.truncated,
        doc.tokens,
        doc.units,
    ];
    let stats = CorpusStats::from_sums(&doc.sums, counts)?;
    let kind = |kind: &str| {
        BadLine::kind_named(kind).ok_or_else(|| PartialError::BadLineKind { kind: kind.into() })
    };
    let mut bad = BadLines {
        count: doc.bad_lines.count,
        ..BadLines::default()
    };
    for (name, n) in &doc.bad_lines.by_kind {
        bad.by_kind.insert(kind(name)?, *n);
    }
    for item in doc.bad_lines.listed {
        bad.listed.push((
            item.line,
            BadLine::Recorded {
                kind: kind(&item.kind)?,
                reason: item.reason,
            },
        ));
    }
    let tally = Tally {
        stats,
        lines: doc.lines,
        digest: InputDigest::recorded(doc.input_sha256, doc.input_bytes),
        bad,
        truncated_lines: doc.truncated_lines,
    };
    let partial = Partial {
        identity,
        end: doc.end,
        end_reason: doc.end_reason,
        lines_in_shard: doc.lines_in_shard,
        tally,
    };
    check_counts(&partial)?;
    Ok(partial)
}

/// Refuse counts no run writes (a damaged or edited file), naming the field. A partial file
/// describes the lines `1..=lines` exactly: each of the shard's lines among them is a sentence
/// or a bad line, each line takes at least one byte of input, and the listed lines are among
/// them.
fn check_counts(p: &Partial) -> Result<(), PartialError> {
    let t = &p.tally;
    let shard = p.identity.shard;
    let own = lines_in_shard(shard, t.lines);
    if t.lines as u64 > t.digest.bytes {
        return Err(PartialError::LinesOverBytes {
            lines: t.lines,
            bytes: t.digest.bytes,
        });
    }
    if p.lines_in_shard != own {
        return Err(PartialError::LinesInShard {
            found: p.lines_in_shard,
            shard,
            own,
            lines: t.lines,
        });
    }
    let accounted = t.stats.sentences.checked_add(t.bad.count as u64);
    if accounted != Some(own as u64) {
        return Err(PartialError::Unaccounted {
            sentences: t.stats.sentences,
            bad: t.bad.count,
            own,
            shard,
            lines: t.lines,
        });
    }
    let by_kind = t
        .bad
        .by_kind
        .values()
        .try_fold(0usize, |a, &n| a.checked_add(n));
    if by_kind != Some(t.bad.count) {
        return Err(PartialError::ByKind { count: t.bad.count });
    }
    let listed_ok = |list: &'static str, lines: &mut dyn Iterator<Item = usize>, most: usize| {
        let mut listed = 0;
        for line in lines {
            listed += 1;
            if !shard.owns(line) || line > t.lines {
                return Err(PartialError::ListedElsewhere {
                    list,
                    line,
                    own,
                    shard,
                    lines: t.lines,
                });
            }
        }
        if listed > most {
            return Err(PartialError::ListedTooMany { list, listed, most });
        }
        Ok(())
    };
    listed_ok(
        "bad_lines.listed",
        &mut t.bad.listed.iter().map(|(l, _)| *l),
        t.bad.count.min(LISTED_BAD_LINES),
    )?;
    listed_ok(
        "truncated_lines",
        &mut t.truncated_lines.iter().copied(),
        (t.stats.truncated as usize).min(LISTED_BAD_LINES),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{HeadLabel, HeadStats};
    use crate::corpus::ledger::Event;
    use crate::corpus::SentenceCounts;
    use serde_json::json;

    /// A partial file's fields read back, the error in words.
    fn parse(v: &Value) -> Result<Partial, String> {
        parse_bytes(&serde_json::to_vec(v).unwrap()).map_err(|e| e.to_string())
    }

    pub(crate) fn identity(shard: Shard) -> RunIdentity {
        RunIdentity {
            attnviz: "0.1.0".into(),
            model: ModelDoc {
                id: Some("m".into()),
                layers: Some(1),
                heads: Some(2),
                ..ModelDoc::default()
            },
            model_files: Some(ModelFilesDoc {
                config: Some(super::super::provenance::FileHash {
                    file: "config.json".into(),
                    bytes: 2,
                    sha256: "ab".into(),
                }),
                tokenizer: Vec::new(),
                weights: Vec::new(),
            }),
            token_names: ("[CLS]".into(), "[SEP]".into()),
            input: "in.txt".into(),
            input_format: "text".into(),
            compression: "none".into(),
            options: CorpusOptionsDoc {
                truncate: true,
                ..CorpusOptionsDoc::default()
            },
            shard,
            threads: 2,
            induction: Value::Null,
        }
    }

    #[test]
    fn a_partial_file_reads_back_what_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let folder = OutFolder::open(dir.path(), false).unwrap();
        let path = dir.path().join(PARTIAL_FILE);
        let mut tally = Tally::new(1, 2);
        let s = HeadStats {
            entropy: 0.3,
            entropy_norm: 0.1,
            distance: 1.25,
            to_start: 0.5,
            to_end: 0.25,
            to_first: f64::NAN,
            to_punct: 0.0,
            to_self: 0.1,
            to_prev: 0.2,
            to_next: 0.7,
            prev_token_score: 0.2,
            duplicate_token_score: 0.1,
            rows: 5,
            label: HeadLabel::PositionalNext,
        };
        let counts = SentenceCounts {
            pair: true,
            truncated: true,
            tokens: 7,
            units: 5,
        };
        tally.apply(
            3,
            &Event::Sentence {
                stats: vec![vec![s, s]],
                counts,
                name: "000003".into(),
                load: None,
            },
        );
        tally.apply(6, &Event::Bad(BadLine::Tabs { count: 2 }));
        tally.lines = 7;
        tally.digest = InputDigest::recorded("ab".repeat(32), 70);
        let shard = Shard::new(3, 3).unwrap();
        write(&folder, &identity(shard), &tally, "complete", None).unwrap();
        let back = read(&path).unwrap();
        assert_eq!(back.identity, identity(shard));
        assert_eq!(back.end, "complete");
        assert_eq!(back.tally.stats, tally.stats);
        assert_eq!(back.tally.lines, 7);
        assert_eq!(back.lines_in_shard, 2); // lines 3 and 6
        assert_eq!(back.tally.truncated_lines, [3]);
        assert_eq!(back.tally.bad.count, 1);
        assert_eq!(back.tally.bad.listed[0].0, 6);
        assert_eq!(back.tally.bad.listed[0].1.kind(), "tabs");
        assert_eq!(
            back.tally.bad.listed[0].1.to_string(),
            BadLine::Tabs { count: 2 }.to_string()
        );
        assert_eq!(back.tally.digest, tally.digest);
    }

    #[test]
    fn lines_in_shard_counts_the_round_robin_lines() {
        for count in 1..5 {
            for index in 1..=count {
                let shard = Shard::new(index, count).unwrap();
                for lines in 0..15 {
                    let want = (1..=lines).filter(|&l| shard.owns(l)).count();
                    assert_eq!(lines_in_shard(shard, lines), want);
                }
            }
        }
    }

    #[test]
    fn conflicts_name_what_differs() {
        let labels = ("a.json", "b.json");
        let a = identity(Shard::new(1, 3).unwrap());
        let mut b = identity(Shard::new(2, 3).unwrap());
        assert_eq!(a.conflict(&b, labels, false), None);
        let e = a.conflict(&b, labels, true).unwrap().to_string();
        assert_eq!(e, "a.json is shard 1/3, b.json shard 2/3");
        b.options.words = true;
        let e = a.conflict(&b, labels, false).unwrap().to_string();
        assert_eq!(
            e,
            "a.json was run with words = false, b.json with words = true"
        );
        b.options.words = false;
        // An option of a later attnviz's, which this one does not know.
        b.options.later.insert("extra".into(), json!(1));
        let e = a.conflict(&b, labels, false).unwrap().to_string();
        assert!(e.contains("extra = null"), "{e}");
        let mut c = identity(Shard::new(2, 4).unwrap());
        assert!(a
            .conflict(&c, labels, false)
            .unwrap()
            .to_string()
            .contains("2/4"));
        c.attnviz = "9.9.9".into();
        let e = a.conflict(&c, labels, false).unwrap().to_string();
        assert!(e.contains("b.json from attnviz 9.9.9"), "{e}");
    }

    #[test]
    fn counts_no_run_writes_are_refused_naming_the_field() {
        let dir = tempfile::tempdir().unwrap();
        let folder = OutFolder::open(dir.path(), false).unwrap();
        let mut tally = Tally::new(1, 2);
        tally.apply(1, &Event::Bad(BadLine::Empty));
        tally.apply(2, &Event::Bad(BadLine::Tabs { count: 3 }));
        tally.lines = 2;
        tally.digest = InputDigest::recorded("ab".repeat(32), 10);
        write(&folder, &identity(Shard::WHOLE), &tally, "complete", None).unwrap();
        let path = dir.path().join(PARTIAL_FILE);
        let good: Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
        assert!(parse(&good).is_ok());
        for (field, value, words) in [
            (
                "lines",
                json!(1_000_000_000_000_000_000u64),
                "\"lines\" is 1,000,000,000,000,000,000",
            ),
            (
                "lines",
                json!(3),
                "\"lines_in_shard\" is 2, but shard 1/1 has 3",
            ),
            ("lines_in_shard", json!(5), "\"lines_in_shard\" is 5"),
            (
                "sentences",
                json!(4),
                "\"sentences\" (4) and \"bad_lines.count\" (2) do not add up",
            ),
            ("threads", json!(0), "\"threads\" is 0"),
            (
                "truncated_lines",
                json!([1]),
                "\"truncated_lines\" lists 1 lines",
            ),
        ] {
            let mut v = good.clone();
            v[field] = value;
            let e = parse(&v).unwrap_err();
            assert!(e.contains(words), "{field}: {e}");
        }
        let mut v = good.clone();
        v["bad_lines"]["listed"][0]["line"] = json!(9);
        let e = parse(&v).unwrap_err();
        assert!(e.contains("\"bad_lines.listed\" lists line 9"), "{e}");
        let mut v = good.clone();
        v["bad_lines"]["by_kind"]["empty"] = json!(5);
        assert!(parse(&v).unwrap_err().contains("by_kind"));
        // A number JSON cannot hold: the field is named from the line it is on.
        let text = fs::read_to_string(&path)
            .unwrap()
            .replace("\"tokens\": 0", "\"tokens\": 1e999");
        let e = parse_bytes(text.as_bytes()).unwrap_err().to_string();
        assert!(
            e.starts_with("not JSON") && e.ends_with("in \"tokens\")"),
            "{e}"
        );
    }

    #[test]
    fn unreadable_files_say_why() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.json");
        std::fs::write(&p, "{\"format\": \"attnviz-corpus-stats\"}").unwrap();
        assert!(read(&p)
            .unwrap_err()
            .to_string()
            .contains("corpus_partial.json"));
        std::fs::write(&p, "nope").unwrap();
        assert!(read(&p).unwrap_err().to_string().starts_with("not JSON"));
        std::fs::write(
            &p,
            format!("{{\"format\": \"{FORMAT}\", \"format_version\": 99}}"),
        )
        .unwrap();
        assert!(read(&p)
            .unwrap_err()
            .to_string()
            .contains("format version 99"));
        assert!(read(dir.path())
            .unwrap_err()
            .to_string()
            .contains("not a file"));
    }
}
