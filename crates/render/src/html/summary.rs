//! The HTML report of a summarised run (a long input's attention kept as summaries, never as
//! matrices; [`crate::attention::summary`]): one self-contained page with three views, drawn
//! from what the summaries hold and from nothing else.
//!
//! - **Matrix**: the pooled map of a layer and head. Every layer and head has an *overview*
//!   (the pooled map summed again into at most [`OVERVIEW_SIDE`]² blocks); the *detail layer*
//!   (the one asked for) has the pooled map itself (blocks of `⌈n / 256⌉` tokens), and, where a
//!   window is zoomed to a few hundred tokens, single tokens: the stored top keys of each query
//!   and the full rows of the queries asked for. Each cell's share is exact (a sum of weights
//!   over the block, divided by its queries), quantised to 16 bits; a token cell that is not a
//!   stored top key is unknown (it is at most the query's smallest stored weight), and the page
//!   says so.
//! - **Head**: the detail layer's top keys as links, every head a colour, over a window of
//!   queries; keys outside the window are drawn beside it, gaps marked.
//! - **Stats**: every layer × head by sink mass, entropy or mean distance (computed from the
//!   distance profile), with a head's distance profile and its sink and entropy along the input.
//!
//! # Size
//! Everything per query of every head would not fit a file of a few MB at 32k tokens (a 1B
//! model's 512 heads × 32 768 queries × 16 top keys are 268 million links), so the page holds
//! what fits a fixed budget and says what it left out:
//!
//! - per layer and head (all): the distance profile, the means, the sink and the entropy
//!   averaged over each pooled block of queries (`f32`), and the overview map
//!   (at most 64 × 64 `u16`): 512 heads × (8 KB + 2 KB) ≈ 5 MB before compression, mostly the
//!   upper triangle's zeros under a causal mask;
//! - the detail layer: the pooled map (at most 256 × 256 `u16`: 32 heads × 128 KB = 4 MB raw,
//!   half zeros under a causal mask);
//! - the detail layer's links: at most [`MAX_LINKS`], the strongest kept when there are more
//!   (every link above a threshold the page shows), 6 bytes each (key `f32`, weight `u16`),
//!   plus one count per head and query (`f32`, mostly zero bytes);
//! - the full rows of the queries asked for, in the detail layer: at most [`MAX_ROW_VALUES`]
//!   weights (`u16`), the first rows that fit.
//!
//! The payload is byte-planed, gzip-compressed and base64-encoded as the main report's
//! (`html/payload.rs`); a unit test writes a synthetic 32 768-token, 16-layer × 32-head summary
//! and holds the page under [`SIZE_LIMIT`].

use std::io::{self, Write};

use serde::Serialize;

use super::payload::{Dtype, Payload, Section, SectionMeta};
use super::{csp_hash, escape_html, escape_json_for_script, font_css, non_ascii_chars, CSS};
use crate::attention::summary::AttentionSummary;
use crate::attention::{Attention, MaskKind};

/// The page: its own markup around the report's style; the same slots as `report.html`.
const TEMPLATE: &str = include_str!("../../templates/summary.html");
/// The page's own style, after `report.css`.
const SUMMARY_CSS: &str = include_str!("../../assets/summary.css");
/// The page's script, one function scope.
const JS: &str = concat!(
    "(function () {\n'use strict';\n",
    include_str!("../../assets/summary/summary.js"),
    "\n})();\n"
);

/// The overview maps' largest side, in blocks.
pub const OVERVIEW_SIDE: usize = 64;
/// The most top-key links the page stores (of the detail layer).
pub const MAX_LINKS: usize = 400_000;
/// The most weights of full rows the page stores (of the detail layer).
pub const MAX_ROW_VALUES: usize = 2_100_000;
/// What a 32 768-token report of a 16-layer, 32-head model stays under (tested).
pub const SIZE_LIMIT: usize = 8_000_000;

/// Options of the summarised report.
#[derive(Clone, Debug, PartialEq)]
pub struct SummaryHtmlOptions {
    /// The page title; default `"attnviz — <the input's start>"`.
    pub title: Option<String>,
    /// The detail layer: its index among the summarised layers.
    pub layer: usize,
    /// The head the matrix view opens on.
    pub head: usize,
    /// Label tokens as the tokenizer spells them.
    pub raw_tokens: bool,
    /// gzip the payload.
    pub compress: bool,
    /// Label/value pairs for the About panel (escaped).
    pub settings: Vec<(String, String)>,
}

impl Default for SummaryHtmlOptions {
    fn default() -> Self {
        SummaryHtmlOptions {
            title: None,
            layer: 0,
            head: 0,
            raw_tokens: false,
            compress: true,
            settings: Vec::new(),
        }
    }
}

/// What cannot be drawn as a summarised report.
#[derive(Debug, thiserror::Error)]
pub enum SummaryHtmlError {
    /// No layer, head or token.
    #[error("the summary holds no layer, head or token, so there is no report to draw")]
    Empty,
    /// The detail layer is not one of the summarised ones.
    #[error("layer slot {0} is not one of the {1} summarised layers")]
    Layer(usize, usize),
    /// The head is not one of the model's.
    #[error("head {0} is not one of the {1} heads")]
    Head(usize, usize),
    /// The tokens do not match the summary.
    #[error("the attention has {0} tokens and the summary {1}")]
    Tokens(usize, usize),
}

impl From<SummaryHtmlError> for io::Error {
    fn from(e: SummaryHtmlError) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidInput, e)
    }
}

/// The metadata the page reads (`META` in `assets/summary/summary.js`).
#[derive(Serialize)]
struct SummaryMeta<'a> {
    format: u32,
    generator: String,
    title: String,
    text: &'a str,
    model: &'a str,
    model_id: &'a str,
    heads: usize,
    queries: usize,
    keys: usize,
    /// Query labels.
    tokens: &'a [String],
    /// Key labels (the query labels for self-attention).
    key_tokens: &'a [String],
    /// The model's numbers of the summarised layers.
    layers: Vec<usize>,
    /// The detail layer's slot.
    detail: usize,
    head: usize,
    top_k: usize,
    /// The pooled map's block side, in tokens.
    pool: usize,
    /// The overview's block side, in tokens (a multiple of `pool`).
    overview_pool: usize,
    distance_bins: &'a [usize],
    learned_sink: bool,
    /// A causal mask: a query sees no later key.
    causal: bool,
    /// Links of the detail layer kept, of all it has.
    links_kept: usize,
    links_total: usize,
    /// Every link of weight above this is kept (0: every link).
    link_threshold: f32,
    /// The queries whose full rows are stored (of the detail layer).
    rows: Vec<usize>,
    /// The queries asked for whose rows did not fit.
    rows_left_out: Vec<usize>,
    settings: &'a [(String, String)],
    payload: PayloadMeta,
}

#[derive(Serialize)]
struct PayloadMeta {
    compression: &'static str,
    raw_bytes: usize,
    sections: Vec<SectionMeta>,
}

/// The arrays the payload is written from.
struct Arrays {
    overview: Vec<f32>,
    pooled: Vec<f32>,
    sink_blocks: Vec<f32>,
    entropy_blocks: Vec<f32>,
    learned_blocks: Vec<f32>,
    means: Vec<f32>,
    distance: Vec<f32>,
    counts: Vec<f32>,
    link_keys: Vec<f32>,
    link_weights: Vec<f32>,
    rows: Vec<f32>,
    links_total: usize,
    threshold: f32,
    rows_kept: usize,
}

/// Share per query of pooled sums `[q blocks, k blocks]` summed again over `factor × factor`
/// blocks: each cell divided by its queries (`block` tokens per block, `n` in all).
fn coarsen(map: &[f32], qb: usize, kb: usize, factor: usize, block: usize, n: usize) -> Vec<f32> {
    let (cq, ck) = (qb.div_ceil(factor), kb.div_ceil(factor));
    let mut out = vec![0f64; cq * ck];
    for i in 0..qb {
        for j in 0..kb {
            out[(i / factor) * ck + j / factor] += map[i * kb + j] as f64;
        }
    }
    let side = block * factor;
    out.chunks(ck)
        .enumerate()
        .flat_map(|(r, row)| {
            let queries = side.min(n - r * side).max(1) as f64;
            row.iter().map(move |&v| (v / queries) as f32)
        })
        .collect()
}

/// Means of `values` over blocks of `block`.
fn block_means(values: &[f32], block: usize) -> impl Iterator<Item = f32> + '_ {
    values
        .chunks(block)
        .map(|c| (c.iter().map(|&v| v as f64).sum::<f64>() / c.len() as f64) as f32)
}

fn mean(values: &[f32]) -> f32 {
    (values.iter().map(|&v| v as f64).sum::<f64>() / values.len().max(1) as f64) as f32
}

impl Arrays {
    fn of(s: &AttentionSummary, detail: usize) -> Arrays {
        let (q, k, heads, pool) = (s.queries, s.keys, s.heads, s.pool);
        let (pq, pk) = (s.pooled_queries(), s.pooled_keys());
        let factor = pq.max(pk).div_ceil(OVERVIEW_SIDE).max(1);
        let mut a = Arrays {
            overview: Vec::new(),
            pooled: Vec::new(),
            sink_blocks: Vec::new(),
            entropy_blocks: Vec::new(),
            learned_blocks: Vec::new(),
            means: Vec::new(),
            distance: Vec::new(),
            counts: Vec::new(),
            link_keys: Vec::new(),
            link_weights: Vec::new(),
            rows: Vec::new(),
            links_total: 0,
            threshold: 0.0,
            rows_kept: 0,
        };
        for layer in &s.layers {
            a.distance.extend_from_slice(&layer.distance);
            for h in 0..heads {
                let map = &layer.pooled[h * pq * pk..(h + 1) * pq * pk];
                a.overview.extend(coarsen(map, pq, pk, factor, pool, q));
                let sink = &layer.sink[h * q..(h + 1) * q];
                let entropy = &layer.entropy[h * q..(h + 1) * q];
                a.sink_blocks.extend(block_means(sink, pool));
                a.entropy_blocks.extend(block_means(entropy, pool));
                a.means.push(mean(sink));
                a.means.push(mean(entropy));
                if s.learned_sink {
                    let learned = &layer.learned_sink[h * q..(h + 1) * q];
                    a.learned_blocks.extend(block_means(learned, pool));
                    a.means.push(mean(learned));
                } else {
                    a.means.push(f32::NAN);
                }
            }
        }
        let layer = &s.layers[detail];
        for h in 0..heads {
            let map = &layer.pooled[h * pq * pk..(h + 1) * pq * pk];
            a.pooled.extend(coarsen(map, pq, pk, 1, pool, q));
        }
        // Links: all of them when they fit, else those above the weight that leaves at most
        // MAX_LINKS.
        let mut weights: Vec<f32> = layer
            .top
            .iter()
            .filter(|t| t.key != u32::MAX && t.weight > 0.0)
            .map(|t| t.weight)
            .collect();
        a.links_total = weights.len();
        if weights.len() > MAX_LINKS {
            let at = weights.len() - MAX_LINKS - 1;
            let (_, t, _) = weights.select_nth_unstable_by(at, f32::total_cmp);
            a.threshold = *t;
        }
        drop(weights);
        for h in 0..heads {
            for query in 0..q {
                let kept: Vec<_> = s
                    .top_keys(detail, h, query)
                    .iter()
                    .filter(|t| t.weight > a.threshold)
                    .collect();
                a.counts.push(kept.len() as f32);
                for t in kept {
                    a.link_keys.push(t.key as f32);
                    a.link_weights.push(t.weight);
                }
            }
        }
        // Full rows: the first that fit.
        let named = s.rows.len();
        a.rows_kept = named.min(MAX_ROW_VALUES / (heads * k).max(1));
        for h in 0..heads {
            let head_rows = &layer.rows[h * named * k..(h + 1) * named * k];
            a.rows.extend_from_slice(&head_rows[..a.rows_kept * k]);
        }
        a
    }

    fn sections(&self) -> Vec<Section<'_>> {
        vec![
            section("overview", Dtype::U16, 1.0, &self.overview),
            section("pooled", Dtype::U16, 1.0, &self.pooled),
            section("sink_blocks", Dtype::F32, 1.0, &self.sink_blocks),
            section("entropy_blocks", Dtype::F32, 1.0, &self.entropy_blocks),
            section("learned_blocks", Dtype::F32, 1.0, &self.learned_blocks),
            section("means", Dtype::F32, 1.0, &self.means),
            section("distance", Dtype::F32, 1.0, &self.distance),
            section("counts", Dtype::F32, 1.0, &self.counts),
            section("link_keys", Dtype::F32, 1.0, &self.link_keys),
            section("link_weights", Dtype::U16, 1.0, &self.link_weights),
            section("rows", Dtype::U16, 1.0, &self.rows),
        ]
    }
}

/// A payload section of `values` over `[0, hi]`.
fn section<'a>(name: &str, dtype: Dtype, hi: f32, values: &'a [f32]) -> Section<'a> {
    Section {
        name: name.to_string(),
        dtype,
        lo: 0.0,
        hi,
        parts: vec![values],
    }
}

/// Check `opts` against `summary` and `att` (whose units label the tokens).
fn check(
    att: &Attention,
    summary: &AttentionSummary,
    opts: &SummaryHtmlOptions,
) -> Result<(), SummaryHtmlError> {
    let layers = summary.layers.len();
    if layers == 0 || summary.heads == 0 || summary.queries == 0 || summary.keys == 0 {
        return Err(SummaryHtmlError::Empty);
    }
    if opts.layer >= layers {
        return Err(SummaryHtmlError::Layer(opts.layer, layers));
    }
    if opts.head >= summary.heads {
        return Err(SummaryHtmlError::Head(opts.head, summary.heads));
    }
    let (nq, nk) = (att.queries().len(), att.keys().len());
    if nq != summary.queries {
        return Err(SummaryHtmlError::Tokens(nq, summary.queries));
    }
    if nk != summary.keys {
        return Err(SummaryHtmlError::Tokens(nk, summary.keys));
    }
    Ok(())
}

/// The page title: the one given, else "attnviz — " and the input's first 60 characters.
fn title(att: &Attention, opts: &SummaryHtmlOptions) -> String {
    opts.title.clone().unwrap_or_else(|| {
        let start: String = att.text.chars().take(60).collect();
        let more = if att.text.chars().nth(60).is_some() {
            "…"
        } else {
            ""
        };
        format!("attnviz — {start}{more}")
    })
}

/// Write the summarised report (see the module's documentation); `att` is the run's attention,
/// which holds no layer but labels the tokens.
pub fn write_summary_html(
    att: &Attention,
    summary: &AttentionSummary,
    opts: &SummaryHtmlOptions,
    w: &mut dyn Write,
) -> io::Result<()> {
    check(att, summary, opts)?;
    let arrays = Arrays::of(summary, opts.layer);
    let payload = Payload::new(arrays.sections(), opts.compress);
    let rows: Vec<usize> = summary.rows[..arrays.rows_kept].to_vec();
    let meta = SummaryMeta {
        format: 1,
        generator: format!("attnviz {}", env!("CARGO_PKG_VERSION")),
        title: title(att, opts),
        text: &att.text,
        model: att.model.name(),
        model_id: &att.model.id,
        heads: summary.heads,
        queries: summary.queries,
        keys: summary.keys,
        tokens: att.queries().shown(opts.raw_tokens),
        key_tokens: att.keys().shown(opts.raw_tokens),
        layers: summary.layers.iter().map(|l| l.layer).collect(),
        detail: opts.layer,
        head: opts.head,
        top_k: summary.top_k,
        pool: summary.pool,
        overview_pool: summary.pool
            * summary
                .pooled_queries()
                .max(summary.pooled_keys())
                .div_ceil(OVERVIEW_SIDE)
                .max(1),
        distance_bins: &summary.distance_bins,
        learned_sink: summary.learned_sink,
        causal: att.mask == MaskKind::Causal,
        links_kept: arrays.link_keys.len(),
        links_total: arrays.links_total,
        link_threshold: arrays.threshold,
        rows_left_out: summary.rows[arrays.rows_kept..].to_vec(),
        rows,
        settings: &opts.settings,
        payload: PayloadMeta {
            compression: if opts.compress { "gzip" } else { "none" },
            raw_bytes: payload.raw_len(),
            sections: payload.meta(),
        },
    };
    let meta_json = serde_json::to_string(&meta).map_err(io::Error::other)?;
    let chars = non_ascii_chars(std::iter::once(att));
    let style = format!(
        "{CSS}{SUMMARY_CSS}{}",
        font_css(&chars).map_err(io::Error::other)?
    );
    let csp = format!(
        "default-src 'none'; script-src 'sha256-{}'; style-src 'sha256-{}'; font-src data:; \
         base-uri 'none'; form-action 'none'",
        csp_hash(JS),
        csp_hash(&style)
    );
    let mut rest = TEMPLATE;
    while let Some(at) = rest.find("@@ATTNVIZ:") {
        w.write_all(&rest.as_bytes()[..at])?;
        let after = &rest[at + "@@ATTNVIZ:".len()..];
        let end = after
            .find("@@")
            .ok_or_else(|| io::Error::other("unclosed slot in templates/summary.html"))?;
        match &after[..end] {
            "csp" => w.write_all(csp.as_bytes())?,
            "title" => w.write_all(escape_html(&meta.title).as_bytes())?,
            "css" => w.write_all(style.as_bytes())?,
            "js" => w.write_all(JS.as_bytes())?,
            "meta" => w.write_all(escape_json_for_script(&meta_json).as_bytes())?,
            "data" => payload.write_base64(w)?,
            other => return Err(io::Error::other(format!("unknown slot {other}"))),
        }
        rest = &after[end + 2..];
    }
    w.write_all(rest.as_bytes())?;
    w.flush()
}

#[cfg(test)]
mod tests;
