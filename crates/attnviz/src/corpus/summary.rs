//! `corpus_stats.json`: what was processed, how the run ended, and the per-head statistics
//! averaged over the corpus. The layout is documented in `docs/corpus.md`.

use std::path::Path;

use attnviz_formats::doc::corpus::{CorpusOptionsDoc, CorpusStats as CorpusStatsDoc, WeightingDoc};
use attnviz_formats::doc::lines::write_document;
use attnviz_formats::doc::{ModelDoc, Numbering};

use serde_json::{json, Map, Value};

use super::folder::{OutFolder, Place};
use super::ledger::Tally;
use super::partial::bad_lines_doc;
use super::shard::Shard;
use super::{End, SENTENCES_DIR, SUMMARY_FILE};
use crate::analysis::{HeadStats, Stat, StatsSection};
use crate::output::{write_output, OutputError};

/// Version of the layout; bumped on any incompatible change.
pub const FORMAT_VERSION: u32 = 2;

/// What the summary says: a run's (or a merge's) results and how it went.
#[derive(Clone, Copy, Debug)]
pub struct Summary<'a> {
    /// The model.
    pub model: &'a ModelDoc,
    /// The input's name.
    pub input: &'a str,
    /// `text` or `jsonl`.
    pub input_format: &'a str,
    /// `none`, `gzip` or `zstd`.
    pub compression: &'a str,
    /// The shard this run processed; `None` for the whole corpus (a single run, or a merge).
    pub shard: Option<Shard>,
    /// The options (see [`super::options_json`]).
    pub options: &'a CorpusOptionsDoc,
    /// Whether per-sentence files were written.
    pub per_sentence: bool,
    /// How the run ended.
    pub end: &'a End,
    /// What was done.
    pub tally: &'a Tally,
    /// The model's induction scores, measured once for the corpus on the head detector's
    /// repeated random-token probe, as JSON (`null`: not defined for the model).
    pub induction: &'a Value,
}

/// Write `summary` to `path` (a path given on the command line, `attnviz merge --out`: written as
/// every output file of attnviz is, see [`crate::output`]).
pub fn write(path: &Path, summary: &Summary) -> Result<(), OutputError> {
    let doc = document(summary);
    write_output(path, |w| write_document(&doc, NESTED, w))
}

/// `summary` as the bytes [`write`] writes.
pub fn to_bytes(summary: &Summary) -> Vec<u8> {
    let doc = document(summary);
    let mut bytes = Vec::new();
    write_document(&doc, NESTED, &mut bytes).expect("writing to memory cannot fail");
    bytes
}

/// Write `summary` as the `corpus_stats.json` of the run in `folder` (never through a link).
pub fn write_in(folder: &OutFolder, summary: &Summary) -> Result<(), OutputError> {
    let doc = document(summary);
    folder.write(Place::Top, SUMMARY_FILE, false, |w| {
        write_document(&doc, NESTED, w)
    })
}

/// The sections written one statistic per line.
const NESTED: &[&str] = &["stats", "stats_sd", "stats_per_row"];

fn document(sm: &Summary) -> CorpusStatsDoc {
    let s = &sm.tally.stats;
    let (end, end_line, end_reason) = match sm.end {
        End::Complete => ("complete", None, None),
        End::Stopped { line, reason } => ("stopped", Some(*line), Some(reason.to_string())),
        End::Interrupted { after_line, .. } => ("interrupted", Some(*after_line), None),
        End::Failed(failure) => ("failed", None, Some(failure.to_string())),
    };
    let names = if sm.input_format == "jsonl" {
        format!(
            "{SENTENCES_DIR}/ID.<ext> for a JSON Lines record with an id, else \
             {SENTENCES_DIR}/NNNNNN.<ext>, NNNNNN = line number (from 1, at least 6 digits)"
        )
    } else {
        format!("{SENTENCES_DIR}/NNNNNN.<ext>, NNNNNN = line number (from 1, at least 6 digits)")
    };
    let (stats, stats_sd, stats_per_row) = if s.sentences == 0 {
        (None, None, None)
    } else {
        let object = |v: Value| match v {
            Value::Object(map) => map,
            _ => unreachable!("a statistics section serialises as an object"),
        };
        let mut stats = object(
            serde_json::to_value(StatsSection::new(&s.mean_per_sentence()))
                .expect("statistics serialise"),
        );
        stats.insert("sentences".into(), json!(s.sentences_per_head()));
        let per_row = object(
            serde_json::to_value(StatsSection::new(&s.mean_per_row()))
                .expect("statistics serialise"),
        );
        (
            Some(stats),
            Some(columns(&s.sd_per_sentence())),
            Some(per_row),
        )
    };
    CorpusStatsDoc {
        format: "attnviz-corpus-stats".into(),
        format_version: FORMAT_VERSION,
        numbering: Numbering::ZeroBased,
        model: sm.model.clone(),
        input: sm.input.into(),
        input_format: sm.input_format.into(),
        compression: sm.compression.into(),
        shard: sm.shard.map(|s| s.to_string()),
        options: sm.options.clone(),
        end: end.into(),
        end_line,
        end_reason,
        lines_read: sm.tally.lines,
        sentences: s.sentences,
        pairs: s.pairs,
        truncated: s.truncated,
        truncated_lines: sm.tally.truncated_lines.clone(),
        tokens: s.tokens,
        units: s.units,
        bad_lines: bad_lines_doc(&sm.tally.bad),
        sentence_files: sm.per_sentence.then_some(names),
        weighting: WeightingDoc {
            rows: "query rows behind each head's figures, summed over sentences".into(),
            sentences: "sentences behind each head's figures".into(),
            stats: "mean over sentences: each sentence weighs the same (as Clark et al. 2019)"
                .into(),
            stats_per_row: "mean over every query row of the corpus: longer sentences weigh more"
                .into(),
            stats_sd: "standard deviation over sentences (population, ddof = 0)".into(),
        },
        induction: sm.induction.clone(),
        stats,
        stats_sd,
        stats_per_row,
        expert_load: s.expert_load.clone(),
    }
}

/// The statistics of `grid` as `[layer][head]` arrays.
fn columns(grid: &[Vec<HeadStats>]) -> Map<String, Value> {
    Stat::ALL
        .into_iter()
        .map(|stat| {
            let values: Vec<Vec<f64>> = grid
                .iter()
                .map(|l| l.iter().map(|s| stat.value(s)).collect())
                .collect();
            (stat.name().to_string(), json!(values))
        })
        .collect()
}
