//! A self-contained HTML page of a [`Comparison`]: A and B side by side, A − B, and the ranked
//! layers × heads heatmap of Jensen–Shannon distances; clicking a cell of the heatmap (or a
//! line of the ranking) selects that head.
//!
//! As the report (`crate::html`): one file, its style and script inline and allowed by
//! hash in its Content-Security-Policy (nothing may load from anywhere, no other script may
//! run), every text from the input escaped (the data is JSON inside a `<script
//! type="application/json">` element, with `<`, `>`, `&`, U+2028 and U+2029 written as
//! `\uXXXX`; the page sets text with `textContent` only).

use std::io::{self, Write};
use std::path::Path;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::html::{escape_html, escape_json_for_script};
use crate::output::{write_output, OutputError};
use attnviz_analysis::compare::Comparison;

const SCRIPT: &str = include_str!("page.js");
const STYLE: &str = include_str!("page.css");

/// What the page opens on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompareHtmlOptions {
    /// The head selected when the page opens; `None`: the farthest apart.
    pub head: Option<(usize, usize)>,
    /// Label units by the tokenizer's own pieces.
    pub raw_tokens: bool,
}

fn csp() -> String {
    let hash = |s: &str| STANDARD.encode(Sha256::digest(s.as_bytes()));
    format!(
        "default-src 'none'; script-src 'sha256-{}'; style-src 'sha256-{}'; base-uri 'none'; \
         form-action 'none'",
        hash(SCRIPT),
        hash(STYLE)
    )
}

/// Weights to 5 decimals (the page shows 4).
fn rounded(v: &[f32]) -> Vec<Value> {
    v.iter()
        .map(|&x| json!((x as f64 * 1e5).round() / 1e5))
        .collect()
}

/// The page's data: the comparison's summary, labels, and every compared head's A and B.
fn data(c: &Comparison, sources: (Option<&str>, Option<&str>), opts: &CompareHtmlOptions) -> Value {
    let mut doc = super::json::summary(c, sources, false);
    let raw = opts.raw_tokens;
    doc["row_labels"] = json!(c.query_labels(raw));
    doc["col_labels"] = json!(c.key_labels(raw));
    doc["lines"] = json!(super::side_lines(c));
    doc["notes"] = json!(super::alignment_lines(c, raw));
    doc["mask_notes"] = json!(super::mask_lines(c, true));
    doc["layer_names"] = json!((0..c.layers).map(|l| c.layer_name(l)).collect::<Vec<_>>());
    let start = opts
        .head
        .or(c.ranked().first().map(|h| (h.layer, h.head)))
        .unwrap_or((0, 0));
    doc["start"] = json!([start.0, start.1]);
    let masks = |f: fn(&Comparison, usize) -> &[bool]| -> Vec<Vec<u8>> {
        (0..c.layers)
            .map(|l| f(c, l).iter().map(|&v| u8::from(v)).collect())
            .collect()
    };
    // Each side's own mask (its panel hatches what it cannot attend), and the cells compared.
    doc["visible"] = json!(masks(Comparison::visible_layer));
    doc["a_visible"] = json!(masks(Comparison::a_visible_layer));
    doc["b_visible"] = json!(masks(Comparison::b_visible_layer));
    doc["masks_differ"] = json!(c.masks_differ());
    let heads = |f: &dyn Fn(usize, usize) -> Vec<Value>| -> Vec<Vec<Vec<Value>>> {
        (0..c.layers)
            .map(|l| (0..c.heads).map(|h| f(l, h)).collect())
            .collect()
    };
    doc["a_weights"] = json!(heads(&|l, h| rounded(c.a_head(l, h))));
    doc["b_weights"] = json!(heads(&|l, h| rounded(c.b_head(l, h))));
    if c.masks_differ() {
        // What A − B is taken of: each row's shares of the keys both can attend.
        doc["a_shares"] = json!(heads(&|l, h| rounded(&c.a_compared(l, h))));
        doc["b_shares"] = json!(heads(&|l, h| rounded(&c.b_compared(l, h))));
    }
    doc
}

/// Write the page to `w`.
pub fn write_compare_html(
    c: &Comparison,
    sources: (Option<&str>, Option<&str>),
    opts: &CompareHtmlOptions,
    w: &mut dyn Write,
) -> io::Result<()> {
    let data = serde_json::to_string(&data(c, sources, opts))?;
    let title = format!(
        "attnviz · compare {} vs {}",
        c.a.model.name(),
        c.b.model.name()
    );
    write!(
        w,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"{csp}\">\n\
         <meta name=\"color-scheme\" content=\"light dark\">\n<meta name=\"generator\" content=\"attnviz\">\n\
         <title>{title}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n\
         <header><h1>Comparing A and B</h1><div id=\"lines\"></div><div id=\"notes\" class=\"muted\"></div><div id=\"mask-notes\" class=\"note\"></div></header>\n\
         <main>\n<section id=\"distance-panel\" aria-label=\"Jensen–Shannon distance per head\">\n\
         <h2>Jensen–Shannon distance per head</h2>\n\
         <p class=\"muted\">0: the two heads attend alike; 1: to disjoint keys. Click a head.</p>\n\
         <canvas id=\"distance\" tabindex=\"0\"></canvas>\n<h3>Farthest apart</h3>\n<ol id=\"ranked\"></ol>\n\
         </section>\n<section id=\"head-panel\" aria-label=\"The selected head\">\n\
         <h2 id=\"head-title\"></h2>\n<div class=\"matrices\">\n\
         <figure><figcaption>A</figcaption><canvas id=\"matrix-a\"></canvas></figure>\n\
         <figure><figcaption>B</figcaption><canvas id=\"matrix-b\"></canvas></figure>\n\
         <figure><figcaption>A − B <span class=\"muted\">(red: A more, blue: B more)</span></figcaption><canvas id=\"matrix-d\"></canvas></figure>\n\
         </div>\n<p id=\"mask-key\" class=\"muted\" hidden><canvas id=\"mask-swatch\" width=\"14\" height=\"14\"></canvas> cannot attend (masked)</p>\n\
         <p id=\"cell\" class=\"muted\">Point at a cell for its weights.</p>\n</section>\n</main>\n\
         <script type=\"application/json\" id=\"compare-data\">{data}</script>\n\
         <script>{SCRIPT}</script>\n</body>\n</html>\n",
        csp = csp(),
        title = escape_html(&title),
        data = escape_json_for_script(&data),
    )
}

/// Write the page to `path` (atomically; `-` writes to standard output).
pub fn write_compare_html_file(
    c: &Comparison,
    sources: (Option<&str>, Option<&str>),
    opts: &CompareHtmlOptions,
    path: &Path,
) -> Result<(), OutputError> {
    write_output(path, |w: &mut dyn Write| {
        write_compare_html(c, sources, opts, w)
    })
}
