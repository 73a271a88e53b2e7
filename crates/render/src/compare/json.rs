//! A [`Comparison`]'s numbers as JSON (`attnviz diff --json`; fields in `docs/json.md`,
//! "Comparison"): both sides, how the units were paired, the per-head Jensen–Shannon distances
//! and their ranking, and A − B for every compared head. The `diff` array is written a head at
//! a time, never built as a tree of values.

use std::io::{self, Write};
use std::path::Path;

use serde_json::Value;

use crate::output::{write_output, OutputError};
use attnviz_analysis::compare::{Alignment, Basis as CompareBasis, Comparison, Side};
use attnviz_formats::doc::comparison::{
    AlignmentDoc, Basis, ComparisonDoc, RankedDoc, SideDoc, Unpaired,
};
use attnviz_formats::doc::{ModelDoc, Numbering};

pub use attnviz_formats::doc::comparison::{FORMAT, FORMAT_VERSION};

/// What the document holds besides the numbers every comparison has.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompareJsonOptions {
    /// Write numbers at full f32 precision instead of 6 significant digits.
    pub full_precision: bool,
    /// Leave out the `diff` array (the per-head numbers only).
    pub no_diff: bool,
}

/// `v` as written: rounded to 6 significant digits unless `full`; `None` (null) when it is not
/// finite.
fn number(v: f64, full: bool) -> Option<f64> {
    if !v.is_finite() {
        return None;
    }
    if full {
        return Some(v);
    }
    Some(format!("{v:.5e}").parse::<f64>().unwrap_or(v))
}

fn side_doc(side: &Side, source: Option<&str>) -> SideDoc {
    SideDoc {
        attention_holds: side.holds,
        display: side.queries.display.clone(),
        layer_numbers: side.layer_numbers.clone(),
        mask: side.mask,
        model: ModelDoc::of(&side.model),
        pair: side.pair.clone(),
        roles: side.queries.roles.clone(),
        source: source.map(str::to_string),
        text: side.text.clone(),
        tokens: side.queries.labels.clone(),
        windows: side.windows.clone(),
    }
}

fn alignment_doc(
    al: &Alignment,
    a: &crate::attention::Units,
    b: &crate::attention::Units,
) -> AlignmentDoc {
    let unpaired = |units: &crate::attention::Units, indices: &[usize]| {
        indices
            .iter()
            .map(|&index| Unpaired {
                index,
                label: units.display[index].clone(),
            })
            .collect()
    };
    AlignmentDoc {
        only_a: unpaired(a, &al.only_a),
        only_b: unpaired(b, &al.only_b),
        pairs: al.pairs.iter().map(|&(a, b)| [a, b]).collect(),
    }
}

/// The document without `diff`.
pub fn document(
    c: &Comparison,
    sources: (Option<&str>, Option<&str>),
    full: bool,
) -> ComparisonDoc {
    let grid = |f: &dyn Fn(usize, usize) -> Option<f64>| -> Vec<Vec<Option<f64>>> {
        (0..c.layers)
            .map(|l| (0..c.heads).map(|h| f(l, h)).collect())
            .collect()
    };
    let square = c.is_square();
    ComparisonDoc {
        a: side_doc(&c.a, sources.0),
        b: side_doc(&c.b, sources.1),
        basis: match c.basis {
            CompareBasis::SameUnits => Basis::SameUnits,
            CompareBasis::AlignedTokens => Basis::AlignedTokens,
            CompareBasis::Words => Basis::Words,
        },
        distance: grid(&|l, h| c.distance(l, h).and_then(|d| number(d, full))),
        format: FORMAT.into(),
        format_version: FORMAT_VERSION,
        heads: c.heads,
        key_labels: (!square).then(|| (0..c.n_keys()).map(|i| c.key_label(i, false)).collect()),
        keys: (!square).then(|| alignment_doc(&c.keys, &c.a.keys, &c.b.keys)),
        kind: c.kind,
        labels: (0..c.n_queries())
            .map(|i| c.query_label(i, false))
            .collect(),
        layer_numbers: (0..c.layers)
            .map(|l| {
                let (a, b) = c.layer_numbers(l);
                [a, b]
            })
            .collect(),
        layers: c.layers,
        level: c.level,
        masks_differ: c.masks_differ(),
        numbering: Numbering::ZeroBased,
        queries: alignment_doc(&c.queries, &c.a.queries, &c.b.queries),
        ranked: c
            .ranked()
            .iter()
            .map(|h| RankedDoc {
                distance: number(h.distance, full),
                head: h.head,
                layer: h.layer,
                rows: h.rows,
            })
            .collect(),
        rows: (0..c.layers)
            .map(|l| (0..c.heads).map(|h| c.rows(l, h)).collect())
            .collect(),
        shared_only: c.shared_only,
        diff: None,
    }
}

/// The document without `diff`, as a value (what a server answers with).
pub fn summary(c: &Comparison, sources: (Option<&str>, Option<&str>), full: bool) -> Value {
    serde_json::to_value(document(c, sources, full)).expect("a comparison serialises")
}

/// Write the whole document to `w`.
pub fn write_comparison_json(
    c: &Comparison,
    sources: (Option<&str>, Option<&str>),
    opts: CompareJsonOptions,
    w: &mut dyn Write,
) -> io::Result<()> {
    let doc = serde_json::to_string(&document(c, sources, opts.full_precision))?;
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
                    match number(v as f64, opts.full_precision) {
                        Some(x) => line.push_str(&serde_json::to_string(&x)?),
                        None => line.push_str("null"),
                    }
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
