//! `corpus_stats.json`: what was processed, how the run ended, and the per-head statistics
//! averaged over the corpus. The layout is documented in `docs/corpus.md`.

use std::io::{self, Write};
use std::path::Path;

use serde_json::{json, Map, Value};

use super::{CorpusOptions, End, Outcome, SENTENCES_DIR};
use crate::analysis::{HeadStats, Stat, StatsSection};
use crate::model::Model;
use crate::output::{write_output, OutputError};
use crate::render::json::model_json;

/// Version of the layout; bumped on any incompatible change.
pub const FORMAT_VERSION: u32 = 2;

/// Write the summary of `outcome` to `path` (atomically, synced).
pub fn write(
    path: &Path,
    model: &Model,
    opts: &CorpusOptions,
    outcome: &Outcome,
) -> Result<(), OutputError> {
    let fields = fields(model, opts, outcome);
    write_output(path, |w| write_fields(&fields, w))
}

fn fields(model: &Model, opts: &CorpusOptions, outcome: &Outcome) -> Vec<(&'static str, Value)> {
    let m = model.info();
    let s = &outcome.stats;
    let (end, stopped_at, reason) = match &outcome.end {
        End::Complete => ("complete", None, None),
        End::Stopped { line, reason } => ("stopped", Some(*line), Some(reason.to_string())),
        End::Interrupted { after_line } => ("interrupted", Some(*after_line), None),
        End::Failed(msg) => ("failed", None, Some(msg.clone())),
    };
    let per_sentence: Vec<&str> = opts.per_sentence.iter().map(|k| k.as_str()).collect();
    let mut fields: Vec<(&'static str, Value)> = vec![
        ("format", json!("attnviz-corpus-stats")),
        ("format_version", json!(FORMAT_VERSION)),
        ("numbering", json!("0-based")),
        ("model", model_json(m)),
        ("input", json!(opts.input_name)),
        (
            "options",
            json!({
                "words": opts.view.words,
                "no_special": opts.view.no_special,
                "truncate": opts.truncate,
                "full_precision": opts.json.full_precision,
                "per_sentence": per_sentence,
                "on_bad_line": crate::choice::Choice::name(opts.on_bad_line),
            }),
        ),
        ("end", json!(end)),
        ("end_line", json!(stopped_at)),
        ("end_reason", json!(reason)),
        ("lines_read", json!(outcome.lines_read)),
        ("sentences", json!(s.sentences)),
        ("pairs", json!(s.pairs)),
        ("truncated", json!(s.truncated)),
        ("truncated_lines", json!(outcome.truncated_lines)),
        ("tokens", json!(s.tokens)),
        ("units", json!(s.units)),
        (
            "bad_lines",
            json!({
                "count": outcome.bad.count,
                "by_kind": outcome.bad.by_kind,
                "listed": outcome.bad.listed.iter().map(|(line, bad)| json!({
                    "line": line, "kind": bad.kind(), "reason": bad.to_string(),
                })).collect::<Vec<_>>(),
            }),
        ),
        (
            "sentence_files",
            if opts.per_sentence.is_empty() {
                Value::Null
            } else {
                json!(format!("{SENTENCES_DIR}/NNNNNN.<ext>, NNNNNN = line number (from 1, at least 6 digits)"))
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

/// The nine statistics of `grid` as `[layer][head]` arrays.
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

/// One top-level field per line; the fields of the statistics sections one per line too,
/// each value compact (a `[layer][head]` grid on one line).
fn write_fields(fields: &[(&str, Value)], w: &mut dyn Write) -> io::Result<()> {
    let compact =
        |w: &mut dyn Write, v: &Value| serde_json::to_writer(w, v).map_err(io::Error::from);
    w.write_all(b"{")?;
    for (i, (name, value)) in fields.iter().enumerate() {
        w.write_all(if i == 0 { b"\n  " } else { b",\n  " })?;
        compact(w, &json!(name))?;
        w.write_all(b": ")?;
        match value {
            Value::Object(map) if name.starts_with("stats") => {
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
