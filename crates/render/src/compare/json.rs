//! A [`Comparison`]'s numbers as JSON (`attnviz diff --json`; fields in `docs/json.md`,
//! "Comparison"): both sides, how the units were paired, the per-head Jensen–Shannon distances
//! and their ranking, and A − B for every compared head. The `diff` array is written a head at
//! a time, never built as a tree of values.

use std::io::{self, Write};
use std::path::Path;

use serde_json::{json, Value};

use crate::json::model_json;
use crate::output::{write_output, OutputError};
use attnviz_analysis::compare::{Alignment, Comparison, Side};

pub use attnviz_formats::doc::comparison::{FORMAT, FORMAT_VERSION};

/// What the document holds besides the numbers every comparison has.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompareJsonOptions {
    /// Write numbers at full f32 precision instead of 6 significant digits.
    pub full_precision: bool,
    /// Leave out the `diff` array (the per-head numbers only).
    pub no_diff: bool,
}

fn number(v: f64, full: bool) -> Value {
    if !v.is_finite() {
        return Value::Null;
    }
    if full {
        return json!(v);
    }
    let s = format!("{v:.5e}");
    json!(s.parse::<f64>().unwrap_or(v))
}

fn side_json(side: &Side, source: Option<&str>) -> Value {
    json!({
        "source": source,
        "model": model_json(&side.model),
        "attention_holds": side.holds,
        "text": side.text,
        "pair": side.pair,
        "layer_numbers": side.layer_numbers,
        "tokens": side.queries.labels,
        "display": side.queries.display,
        "roles": side.queries.roles,
        "mask": side.mask.as_str(),
        "windows": side.windows,
    })
}

fn alignment_json(
    al: &Alignment,
    a: &crate::attention::Units,
    b: &crate::attention::Units,
) -> Value {
    json!({
        "pairs": al.pairs,
        "only_a": al.only_a.iter().map(|&i| json!({"index": i, "label": a.display[i]})).collect::<Vec<_>>(),
        "only_b": al.only_b.iter().map(|&i| json!({"index": i, "label": b.display[i]})).collect::<Vec<_>>(),
    })
}

/// The document without `diff`, as a value (what a server answers with).
pub fn summary(c: &Comparison, sources: (Option<&str>, Option<&str>), full: bool) -> Value {
    let distance: Vec<Vec<Value>> = (0..c.layers)
        .map(|l| {
            (0..c.heads)
                .map(|h| c.distance(l, h).map_or(Value::Null, |d| number(d, full)))
                .collect()
        })
        .collect();
    let rows: Vec<Vec<usize>> = (0..c.layers)
        .map(|l| (0..c.heads).map(|h| c.rows(l, h)).collect())
        .collect();
    let ranked: Vec<Value> = c
        .ranked()
        .iter()
        .map(|h| {
            json!({"layer": h.layer, "head": h.head, "distance": number(h.distance, full), "rows": h.rows})
        })
        .collect();
    let mut doc = json!({
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "numbering": "0-based",
        "a": side_json(&c.a, sources.0),
        "b": side_json(&c.b, sources.1),
        "kind": c.kind.as_str(),
        "level": c.level.as_str(),
        "basis": c.basis.as_str(),
        "shared_only": c.shared_only,
        "masks_differ": c.masks_differ(),
        "layers": c.layers,
        "heads": c.heads,
        "layer_numbers": (0..c.layers).map(|l| { let (a, b) = c.layer_numbers(l); [a, b] }).collect::<Vec<_>>(),
        "queries": alignment_json(&c.queries, &c.a.queries, &c.b.queries),
        "labels": (0..c.n_queries()).map(|i| c.query_label(i, false)).collect::<Vec<_>>(),
        "distance": distance,
        "rows": rows,
        "ranked": ranked,
    });
    if !c.is_square() {
        doc["keys"] = alignment_json(&c.keys, &c.a.keys, &c.b.keys);
        doc["key_labels"] = json!((0..c.n_keys())
            .map(|i| c.key_label(i, false))
            .collect::<Vec<_>>());
    }
    doc
}

/// Write the whole document to `w`.
pub fn write_comparison_json(
    c: &Comparison,
    sources: (Option<&str>, Option<&str>),
    opts: CompareJsonOptions,
    w: &mut dyn Write,
) -> io::Result<()> {
    let doc = serde_json::to_string(&summary(c, sources, opts.full_precision))?;
    if opts.no_diff {
        w.write_all(doc.as_bytes())?;
        return w.write_all(b"\n");
    }
    // The summary, its closing brace replaced by the `diff` array.
    w.write_all(&doc.as_bytes()[..doc.len() - 1])?;
    w.write_all(b",\"diff\":[")?;
    let nk = c.n_keys();
    let mut line = String::new();
    for l in 0..c.layers {
        w.write_all(if l == 0 { b"[" } else { b",[" })?;
        for h in 0..c.heads {
            line.clear();
            line.push_str(if h == 0 { "[" } else { ",[" });
            for (q, row) in c.diff(l, h).chunks(nk.max(1)).enumerate() {
                line.push_str(if q == 0 { "[" } else { ",[" });
                for (k, &v) in row.iter().enumerate() {
                    if k > 0 {
                        line.push(',');
                    }
                    line.push_str(&number(v as f64, opts.full_precision).to_string());
                }
                line.push(']');
            }
            line.push(']');
            w.write_all(line.as_bytes())?;
        }
        w.write_all(b"]")?;
    }
    w.write_all(b"]}\n")
}

/// Write the document to `path` (atomically; `-` writes to standard output).
pub fn write_comparison_json_file(
    c: &Comparison,
    sources: (Option<&str>, Option<&str>),
    opts: CompareJsonOptions,
    path: &Path,
) -> Result<(), OutputError> {
    write_output(path, |w: &mut dyn Write| {
        write_comparison_json(c, sources, opts, w)
    })
}
