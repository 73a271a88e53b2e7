//! `corpus_stats.json`: what was processed, how the run ended, and the per-head statistics
//! averaged over the corpus. The layout is documented in `docs/corpus.md`.

use std::io::{self, Write};
use std::path::Path;

use serde_json::{json, Map, Value};

use super::folder::{OutFolder, Place};
use super::ledger::Tally;
use super::partial::bad_lines_json;
use super::shard::Shard;
use super::{End, SENTENCES_DIR, SUMMARY_FILE};
use crate::analysis::{HeadStats, Stat, StatsSection};
use crate::output::{write_output, OutputError};

/// Version of the layout; bumped on any incompatible change.
pub const FORMAT_VERSION: u32 = 2;

/// What the summary says: a run's (or a merge's) results and how it went.
#[derive(Clone, Copy, Debug)]
pub struct Summary<'a> {
    /// The model, as `model_json` gives it.
    pub model: &'a Value,
    /// The input's name.
    pub input: &'a str,
    /// `text` or `jsonl`.
    pub input_format: &'a str,
    /// `none`, `gzip` or `zstd`.
    pub compression: &'a str,
    /// The shard this run processed; `None` for the whole corpus (a single run, or a merge).
    pub shard: Option<Shard>,
    /// The options (see [`super::options_json`]).
    pub options: &'a Value,
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
    let fields = fields(summary);
    write_output(path, |w| write_fields(&fields, &["stats"], w))
}

/// `summary` as the bytes [`write`] writes.
pub fn to_bytes(summary: &Summary) -> Vec<u8> {
    let fields = fields(summary);
    let mut bytes = Vec::new();
    write_fields(&fields, &["stats"], &mut bytes).expect("writing to memory cannot fail");
    bytes
}

/// Write `summary` as the `corpus_stats.json` of the run in `folder` (never through a link).
pub fn write_in(folder: &OutFolder, summary: &Summary) -> Result<(), OutputError> {
    let fields = fields(summary);
    folder.write(Place::Top, SUMMARY_FILE, false, |w| {
        write_fields(&fields, &["stats"], w)
    })
}

fn fields(sm: &Summary) -> Vec<(&'static str, Value)> {
    let s = &sm.tally.stats;
    let (end, stopped_at, reason) = match sm.end {
        End::Complete => ("complete", None, None),
        End::Stopped { line, reason } => ("stopped", Some(*line), Some(reason.to_string())),
        End::Interrupted { after_line, .. } => ("interrupted", Some(*after_line), None),
        End::Failed(msg) => ("failed", None, Some(msg.clone())),
    };
    let names = if sm.input_format == "jsonl" {
        format!(
            "{SENTENCES_DIR}/ID.<ext> for a JSON Lines record with an id, else \
             {SENTENCES_DIR}/NNNNNN.<ext>, NNNNNN = line number (from 1, at least 6 digits)"
        )
    } else {
        format!("{SENTENCES_DIR}/NNNNNN.<ext>, NNNNNN = line number (from 1, at least 6 digits)")
    };
    let mut fields: Vec<(&'static str, Value)> = vec![
        ("format", json!("attnviz-corpus-stats")),
        ("format_version", json!(FORMAT_VERSION)),
        ("numbering", json!("0-based")),
        ("model", sm.model.clone()),
        ("input", json!(sm.input)),
        ("input_format", json!(sm.input_format)),
        ("compression", json!(sm.compression)),
        ("shard", json!(sm.shard.map(|s| s.to_string()))),
        ("options", sm.options.clone()),
        ("end", json!(end)),
        ("end_line", json!(stopped_at)),
        ("end_reason", json!(reason)),
        ("lines_read", json!(sm.tally.lines)),
        ("sentences", json!(s.sentences)),
        ("pairs", json!(s.pairs)),
        ("truncated", json!(s.truncated)),
        ("truncated_lines", json!(sm.tally.truncated_lines)),
        ("tokens", json!(s.tokens)),
        ("units", json!(s.units)),
        ("bad_lines", bad_lines_json(&sm.tally.bad)),
        (
            "sentence_files",
            if sm.per_sentence {
                json!(names)
            } else {
                Value::Null
            },
        ),
        (
            "weighting",
            json!({
                "stats": "mean over sentences: each sentence weighs the same (as Clark et al. 2019)",
                "stats_sd": "standard deviation over sentences (population, ddof = 0)",
                "stats_per_row": "mean over every query row of the corpus: longer sentences weigh more",
                "rows": "query rows behind each head's figures, summed over sentences",
                "sentences": "sentences behind each head's figures",
            }),
        ),
    ];
    fields.push(("induction", sm.induction.clone()));
    if s.sentences == 0 {
        fields.extend([
            ("stats", Value::Null),
            ("stats_sd", Value::Null),
            ("stats_per_row", Value::Null),
        ]);
        return fields;
    }
    let mut stats = serde_json::to_value(StatsSection::new(&s.mean_per_sentence()))
        .expect("statistics serialise");
    if let Value::Object(map) = &mut stats {
        map.insert("sentences".into(), json!(s.sentences_per_head()));
    }
    let per_row =
        serde_json::to_value(StatsSection::new(&s.mean_per_row())).expect("statistics serialise");
    fields.extend([
        ("stats", stats),
        ("stats_sd", Value::Object(columns(&s.sd_per_sentence()))),
        ("stats_per_row", per_row),
    ]);
    fields
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

/// One top-level field per line; the fields of objects whose name starts with one of `nested`
/// one per line too, each value compact (a `[layer][head]` grid on one line).
pub fn write_fields(
    fields: &[(&str, Value)],
    nested: &[&str],
    w: &mut dyn Write,
) -> io::Result<()> {
    let compact =
        |w: &mut dyn Write, v: &Value| serde_json::to_writer(w, v).map_err(io::Error::from);
    w.write_all(b"{")?;
    for (i, (name, value)) in fields.iter().enumerate() {
        w.write_all(if i == 0 { b"\n  " } else { b",\n  " })?;
        compact(w, &json!(name))?;
        w.write_all(b": ")?;
        match value {
            Value::Object(map) if nested.iter().any(|n| name.starts_with(n)) => {
                w.write_all(b"{")?;
                for (j, (key, v)) in map.iter().enumerate() {
                    w.write_all(if j == 0 { b"\n    " } else { b",\n    " })?;
                    compact(w, &json!(key))?;
                    w.write_all(b": ")?;
                    compact(w, v)?;
                }
                w.write_all(b"\n  }")?;
            }
            other => compact(w, other)?,
        }
    }
    w.write_all(b"\n}\n")
}
