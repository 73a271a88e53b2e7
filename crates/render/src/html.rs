//! The self-contained interactive HTML report: head, model, matrix and neuron views (plus a
//! statistics panel when the analysis supplies numbers).
//!
//! The page is `templates/report.html` with `assets/report.css` and the script inlined (all are
//! embedded at build time; the script is the files of `assets/report/`, one per view plus shared
//! parts, joined in one function scope), a small JSON metadata block and one base64 payload that
//! holds the attention once, quantised and gzip-compressed (`src/render/html/payload.rs` documents
//! the exact encoding). The page makes no network request (its Content-Security-Policy forbids
//! any) and works from `file://`; it decodes the payload with the browser's `DecompressionStream`.
//!
//! ```
//! use attnviz_render::html::{write_html, HtmlOptions};
//! # use attnviz_core::{Attention, ModelInfo};
//! # use attnviz_core::attention::{Role, Units};
//! # let model = ModelInfo { id: "demo".into(), revision: None, name: None, family: "BERT".into(), layers: 1, heads: 1, hidden_size: 4, head_dim: 4 };
//! # let units = Units::tokens(vec!["[CLS]".into(), "hi".into()], vec![101, 7632], vec![0, 0], vec![0, 0],
//! #     vec![Role::Start, Role::Word], vec![None, Some(0)], vec![String::new(), "Hi".into()]);
//! # let att = Attention::new(model, "Hi".into(), None, units, vec![0.5, 0.5, 0.25, 0.75]).unwrap();
//! let mut page = Vec::new();
//! write_html(&att, &HtmlOptions { neuron: false, ..HtmlOptions::default() }, &mut page)?;
//! assert!(page.starts_with(b"<!DOCTYPE html>"));
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # Precision
//! Weights are stored as 16-bit fixed point by default (step 1/65535, so each is within 7.63e-6 of
//! the model's f32); the page shows them to 5 decimals and says so. [`Precision::U8`] stores 8 bits
//! (within 1.96e-3, shown to 3 decimals) for very long inputs. Query/key vectors (`--neuron`) are
//! exact f32, so the softmax the neuron view recomputes equals the attention row.
//!
//! # Data the page reads
//! `<script type="application/json" id="attnviz-meta">` holds the metadata (the private `Meta`
//! struct below; every string in it is JSON-escaped with `<`, `>`, `&`, U+2028 and U+2029 written
//! as `\uXXXX`, so no token can close the script element). `<script type="application/octet-stream"
//! id="attnviz-data">` holds the base64 payload; its sections are listed in
//! `meta.payload.sections`.
//!
//! # Adding panels from the analysis
//! [`HtmlOptions::analysis`] takes an [`HtmlAnalysis`]:
//! - [`HeadStatistic`]s, one float per layer and head (`values[layer][head]`), each with an id, a
//!   label and a description. When at least one is present the page shows a *Stats* view: a
//!   layers × heads grid coloured by the statistic chosen in a menu, the value in each cell, every
//!   statistic of a head on hover, and a click opens that head in the head view.
//!   [`HtmlAnalysis::head_labels`] optionally tags heads (`"previous token"`, `"[SEP] sink"`), shown
//!   in the grid and its tooltips.
//! - [`ExtraMatrix`]es, `n × n` per layer (or one for the whole model), over the report's tokens,
//!   e.g. attention rollout. The matrix view lists them next to "Mean over heads" (which the page
//!   computes itself); they are stored in the payload like the attention (16-bit over their own
//!   value range) and follow the page's word-merge and hide-special-tokens toggles like attention.
//!
//! The analysis engineer only supplies numbers; the page renders whatever is present.
//!
//! # Word level and special tokens
//! The page merges word pieces (attention *to* a word is the sum over its pieces, *from* a word the
//! mean over its pieces) and hides the special tokens (by role: `[CLS]`/`[SEP]`, `<s>`/`</s>`, …;
//! rows renormalised first) by itself, reversibly.
//! For `--words` / `--no-special`, pass the token-level attention and set [`HtmlOptions::words`] /
//! [`HtmlOptions::hide_special`]. An already derived attention (word level, specials removed) also
//! renders; the page then says so and its toggles and neuron view are off.

mod meta;
mod panels;
mod payload;
mod speech;
pub mod summary;

pub use panels::{
    alignment_statistics, alti_matrices, induction_statistic, report_analysis, statistics_unit,
    zeroing_matrices,
};

use std::fmt;
use std::io::{self, Write};
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::attention::{Attention, HeadSel, Selection, SelectionError};
use crate::fonts;
use crate::output::{write_output, OutputError};

use meta::Meta;
use payload::{Dtype, Payload, Section};

const TEMPLATE: &str = include_str!("../templates/report.html");
const CSS: &str = include_str!("../assets/report.css");
/// The CSS custom property that holds the embedded fonts' family list (report.css reads it).
/// Written in two parts only so that the layering check, which counts `--word` literals as CLI
/// flags, does not take this CSS name for one.
const FONTS_VAR: &str = concat!("-", "-attnviz-fonts");
/// The page's script as written: one file per view plus shared parts (bertviz's "a view per
/// file"), joined at build time into one function scope, so they share the page state and declare
/// nothing global. The order matters only for top-level statements: `words.js` (the word merge,
/// pure functions shared with the node test) and `bands.js` (a vision-language model's pictures
/// as bands), `data.js` (decoding, state, units) and `common.js`
/// (colours, helpers, the render scheduler) come first, `page.js` (controls and `main`) last. Reports carry [`script`], this without its comments.
///
/// The files run inside `boot(carry)`, which the wrapper calls once on load. A report of several
/// kinds switches kind by running `boot` again for the new kind over a fresh copy of the page's
/// markup (`SHELL`), after aborting the old run's window and document listeners (`BOOT`): no
/// reload (which an `about:srcdoc` frame in a notebook cannot do in every browser), and the
/// payload is decoded from base64 once (`RAW`).
const JS_SOURCE: &str = concat!(
    "(function () {\n'use strict';\n\n",
    "/* Shared by every boot: the page's markup as loaded, the decoded payload, the live boot. */\n",
    "let SHELL = null;\nlet RAW = null;\nlet BOOT = null;\n\n",
    "function boot(carry) {\n",
    "const ABORT = new AbortController();\nBOOT = ABORT;\n",
    include_str!("../assets/report/words.js"),
    "\n",
    include_str!("../assets/report/bands.js"),
    "\n",
    include_str!("../assets/report/labels.js"),
    "\n",
    include_str!("../assets/report/data.js"),
    "\n",
    include_str!("../assets/report/common.js"),
    "\n",
    include_str!("../assets/report/head_view.js"),
    "\n",
    include_str!("../assets/report/model_view.js"),
    "\n",
    include_str!("../assets/report/matrix_view.js"),
    "\n",
    include_str!("../assets/report/neuron_view.js"),
    "\n",
    include_str!("../assets/report/stats_view.js"),
    "\n",
    include_str!("../assets/report/image_view.js"),
    "\n",
    include_str!("../assets/report/lens_view.js"),
    "\n",
    include_str!("../assets/report/heads_view.js"),
    "\n",
    include_str!("../assets/report/speech_view.js"),
    "\n",
    include_str!("../assets/report/router_view.js"),
    "\n",
    include_str!("../assets/report/mixing_view.js"),
    "\n",
    include_str!("../assets/report/page.js"),
    "}\n\nboot({});\n})();\n"
);

/// The script every report carries (and the Content-Security-Policy hashes): [`JS_SOURCE`] less
/// its comment lines and indentation, a fifth of it (82 KB to 65 KB; a 12-token MiniLM report is
/// 128 KB with them, 112 KB without).
fn script() -> &'static str {
    static SCRIPT: OnceLock<String> = OnceLock::new();
    SCRIPT.get_or_init(|| drop_comment_lines(JS_SOURCE))
}

/// Drop whole-line `//` and `/* … */` comments, blank lines and indentation from JavaScript,
/// keeping every line of code whole (a comment after code stays). Safe for the report's script,
/// where no string or template literal spans lines: a line that starts a comment is a comment.
/// Not a general minifier; a unit test checks each form, and the browser tests run the result.
fn drop_comment_lines(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let mut in_block = false;
    for line in src.lines() {
        let mut t = line.trim();
        if in_block {
            match t.find("*/") {
                Some(end) => {
                    in_block = false;
                    t = t[end + 2..].trim();
                }
                None => continue,
            }
        } else if t.starts_with("/*") {
            match t.find("*/") {
                Some(end) if end + 2 == t.len() => continue,
                Some(_) => {}
                None => {
                    in_block = true;
                    continue;
                }
            }
        }
        if t.is_empty() || t.starts_with("//") {
            continue;
        }
        out.push_str(t);
        out.push('\n');
    }
    out
}

/// Version of the metadata layout the page's script reads. Version 2 describes units by role and
/// segment and carries the attention's kind, mask and head map (`docs/html.md`).
pub const FORMAT_VERSION: u32 = 2;

/// How finely attention weights are stored in the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Precision {
    /// 16-bit fixed point, step 1/65535: each weight within 7.63e-6 of the model's f32 (default).
    #[default]
    U16,
    /// 8-bit fixed point, step 1/255: within 1.96e-3; several times smaller for long inputs.
    U8,
}

impl Precision {
    /// Above this many weights (layers × heads × tokens²) [`Precision::auto`] picks 8 bits: a
    /// 16-bit report compresses to about 1.2 bytes per weight, so this keeps reports under 30 MB.
    pub const AUTO_16_BIT_LIMIT: usize = 25_000_000;

    /// 16 bits up to [`Precision::AUTO_16_BIT_LIMIT`] weights, 8 bits beyond (bert-base beyond
    /// about 420 tokens), so a report stays under 30 MB.
    pub fn auto(layers: usize, heads: usize, tokens: usize) -> Precision {
        Self::auto_for(layers * heads * tokens * tokens)
    }

    /// [`Precision::auto`] for a count of weights.
    pub fn auto_for(weights: usize) -> Precision {
        if weights > Self::AUTO_16_BIT_LIMIT {
            Precision::U8
        } else {
            Precision::U16
        }
    }

    fn dtype(self) -> Dtype {
        match self {
            Precision::U16 => Dtype::U16,
            Precision::U8 => Dtype::U8,
        }
    }
}

/// How to choose the [`Precision`] of a report (`--html-precision`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PrecisionChoice {
    /// [`Precision::auto`]: 16 bits up to 25 million weights, else 8.
    #[default]
    Auto,
    /// Always [`Precision::U16`].
    Bits16,
    /// Always [`Precision::U8`].
    Bits8,
}

crate::choice!(PrecisionChoice {
    Auto => ("auto", "16 bits up to 25 million weights (layers × heads × tokens²), 8 bits beyond"),
    Bits16 => ("16", "16-bit fixed point: each weight within 7.6e-6"),
    Bits8 => ("8", "8-bit fixed point: each weight within 2e-3"),
});

impl PrecisionChoice {
    /// The precision for a report of `layers × heads` heads over `queries × keys` units.
    pub fn resolve(self, layers: usize, heads: usize, queries: usize, keys: usize) -> Precision {
        match self {
            PrecisionChoice::Bits16 => Precision::U16,
            PrecisionChoice::Bits8 => Precision::U8,
            PrecisionChoice::Auto => Precision::auto_for(layers * heads * queries * keys),
        }
    }
}

/// The view the report opens on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum View {
    /// Lines between the token columns, one colour per head (bertviz's head view).
    #[default]
    Head,
    /// Every layer × head as thumbnails.
    Model,
    /// Query × key heatmaps of a head and of the mean over heads.
    Matrix,
    /// Query and key vectors, their products, scores and softmax.
    Neuron,
    /// Per-head statistics grid (present only with [`HtmlOptions::analysis`] statistics).
    Stats,
    /// The picture a vision model read, with the attention of the hovered or clicked patch (or
    /// the class token) drawn over it, and every layer × head as small overlays (present only
    /// for an attention with an [`crate::attention::image::ImageInput`]; else the head view).
    Image,
    /// The logit lens: stages × positions, each cell the most probable token, coloured by its
    /// probability, the hovered cell's top k beside it (present only with
    /// [`HtmlAnalysis::lens`]; else the head view).
    Lens,
    /// Per-head attribution and ablation: layers × heads on a diverging scale around 0, the
    /// heads ranked beside them (present only with [`HtmlAnalysis::head_attribution`] or
    /// [`HtmlAnalysis::head_ablation`]; else the head view).
    Heads,
    /// A mixture-of-experts model's router: tokens × experts of a routed layer, the chosen
    /// experts outlined, the tokens routed to a clicked expert, the load per layer (present only
    /// for an attention with a [`crate::attention::Router`]; else the head view).
    Router,
}

/// One per-head statistic for the stats panel.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HeadStatistic {
    /// Short machine name (`entropy`, `dist`, `cls`, …).
    pub id: String,
    /// Human label shown in the menu (`Entropy (nats)`).
    pub label: String,
    /// One sentence on what it measures, shown as help text.
    pub description: String,
    /// `values[layer][head]`; NaN is shown as "n/a".
    pub values: Vec<Vec<f32>>,
}

/// An extra attention-like matrix for the matrix view (head mean, rollout, …).
#[derive(Clone, Debug, PartialEq)]
pub struct ExtraMatrix {
    /// Short machine name (`rollout`).
    pub id: String,
    /// Human label shown in the menu (`Attention rollout`).
    pub label: String,
    /// One sentence on what it is, shown under the heatmap.
    pub description: String,
    /// `n × n` row-major (row = query) per layer, in the report's units. Either one entry per
    /// layer (the matrix view shows the selected layer's) or a single entry for the whole model.
    pub layers: Vec<Vec<f32>>,
    /// Each row holds a token's shares from the input tokens (ALTI, value zeroing), not
    /// attention weights: the colour bar says "share of the row".
    pub shares: bool,
}

/// Analysis results the report can show. Everything is optional; empty means no stats panel and
/// no extra matrices.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HtmlAnalysis {
    /// Per-head statistics for the stats grid.
    pub stats: Vec<HeadStatistic>,
    /// Optional tag per head, `head_labels[layer][head]`; empty string for none.
    pub head_labels: Option<Vec<Vec<String>>>,
    /// Extra matrices for the matrix view.
    pub matrices: Vec<ExtraMatrix>,
    /// The logit lens of the report's tokens, for the lens view.
    pub lens: Option<crate::analysis::LogitLens>,
    /// Per-head direct logit attribution of the report's tokens, for the heads view.
    pub head_attribution: Option<crate::analysis::HeadAttribution>,
    /// Head ablation of the report's tokens, for the heads view.
    pub head_ablation: Option<crate::analysis::HeadAblation>,
}

impl HtmlAnalysis {
    fn is_empty(&self) -> bool {
        self.stats.is_empty()
            && self.head_labels.is_none()
            && self.matrices.is_empty()
            && self.lens.is_none()
            && self.head_attribution.is_none()
            && self.head_ablation.is_none()
    }
}

/// Options of the HTML report.
#[derive(Clone, Debug, PartialEq)]
pub struct HtmlOptions {
    /// Page title; default `"attnviz — <sentence>"`.
    pub title: Option<String>,
    /// Embed each head's query and key vectors for the neuron view (the `--neuron` flag). They are
    /// stored as exact f32, so the softmax the page recomputes equals the attention row. Ignored
    /// (and the page says why) when the attention carries no vectors.
    pub neuron: bool,
    /// Storage precision of the weights.
    pub precision: Precision,
    /// gzip the payload (decoded by the browser's `DecompressionStream`). Turn off only for
    /// browsers without it.
    pub compress: bool,
    /// Initial line threshold of the head view: lines of weight below it are not drawn. The page has
    /// a slider. `None` (the default) picks [`default_threshold`] for the input's length.
    pub threshold: Option<f32>,
    /// Layer shown first (0-based); default 0.
    pub layer: usize,
    /// Head selected first (0-based) for the matrix and neuron views; default 0. The head view starts
    /// with every head shown.
    pub head: usize,
    /// View the page opens on.
    pub view: View,
    /// Open with the special tokens hidden and rows renormalised (the `--no-special` flag). The page can
    /// show them again, so pass the token-level attention and set this rather than removing them.
    pub hide_special: bool,
    /// Open with word pieces merged into words (the `--words` flag). As with `hide_special`, pass
    /// the token-level attention and set this: the page merges, and can split again.
    pub words: bool,
    /// Open with the tokens labelled as the tokenizer's vocabulary spells them (`Ġquick`)
    /// instead of their display texts (`quick`); the page has a toggle either way.
    pub raw_tokens: bool,
    /// Extra settings shown in the page's "About" panel (for example the command line), as
    /// label/value pairs. Escaped like every other string.
    pub settings: Vec<(String, String)>,
    /// Analysis results to show; see the module documentation.
    pub analysis: HtmlAnalysis,
    /// The token whose attention the image view draws first (a vision model's report);
    /// `None`: the class token, or the centre patch where there is none.
    pub query: Option<usize>,
}

impl Default for HtmlOptions {
    fn default() -> Self {
        HtmlOptions {
            title: None,
            neuron: false,
            precision: Precision::U16,
            compress: true,
            threshold: None,
            layer: 0,
            head: 0,
            view: View::Head,
            hide_special: false,
            words: false,
            raw_tokens: false,
            settings: Vec::new(),
            analysis: HtmlAnalysis::default(),
            query: None,
        }
    }
}

impl HtmlOptions {
    /// The head view's initial threshold for `tokens` units: the one set, else
    /// [`default_threshold`].
    pub fn threshold_for(&self, tokens: usize) -> f32 {
        self.threshold.unwrap_or_else(|| default_threshold(tokens))
    }
}

/// The head view's initial line threshold for `tokens` units: 0.01 up to 256, then 0.02.
///
/// A line's opacity is its weight, so lines under 2 % are all but invisible, yet at 512 tokens
/// MiniLM has about 80 000 lines per layer of weight 0.01 or more, half of them under 0.02.
/// Drawing them kept a layer switch at about 108 ms in headless Chromium (software raster); at
/// 0.02 it takes about 70 ms. The slider still goes down to 0.
pub fn default_threshold(tokens: usize) -> f32 {
    if tokens > 256 {
        0.02
    } else {
        0.01
    }
}

/// Options that cannot describe a report for this attention.
#[derive(Debug, thiserror::Error)]
pub enum HtmlError {
    /// The initial layer or head is not one of the model's.
    #[error(transparent)]
    Selection(#[from] SelectionError),
    /// The threshold is not a weight.
    #[error("threshold {0} is not between 0 and 1")]
    Threshold(f32),
    /// Analysis data of the wrong shape.
    #[error("analysis data for the HTML report has the wrong shape: {0}")]
    Analysis(AnalysisShape),
    /// Nothing to show.
    #[error("the attention has no tokens, so there is no report to draw")]
    Empty,
    /// The image view's first query is not one of the tokens.
    #[error("query token {0} is not one of the {1} tokens")]
    Query(usize, usize),
}

/// What in the analysis data given to the HTML report does not fit its attention.
#[derive(Debug, thiserror::Error)]
pub enum AnalysisShape {
    /// One kind of attention given twice.
    #[error("the kind {} is given twice", .0.as_str())]
    KindTwice(crate::attention::AttentionKind),
    /// A statistic of another grid than the heads.
    #[error("statistic `{id}` must have {layers} layers × {heads} heads")]
    Statistic {
        /// The statistic's id.
        id: String,
        /// Layers.
        layers: usize,
        /// Heads.
        heads: usize,
    },
    /// Head labels of another grid than the heads.
    #[error("head labels must have {layers} layers × {heads} heads")]
    HeadLabels {
        /// Layers.
        layers: usize,
        /// Heads.
        heads: usize,
    },
    /// A matrix section with another number of layers.
    #[error("matrix `{id}` has {found} layers; give {layers} (one per layer) or 1")]
    MatrixLayers {
        /// The matrix's id.
        id: String,
        /// Its layers.
        found: usize,
        /// The report's layers.
        layers: usize,
    },
    /// A matrix of another size than the units.
    #[error("matrix `{id}` must be {queries} × {keys} (the report's units) in every layer")]
    MatrixSize {
        /// The matrix's id.
        id: String,
        /// Queries.
        queries: usize,
        /// Keys.
        keys: usize,
    },
    /// A logit lens of another length, or with an empty cell.
    #[error("the logit lens must have {positions} positions (the report's units), each with at least one token per stage")]
    Lens {
        /// The report's units.
        positions: usize,
    },
    /// Head attribution or ablation of another grid.
    #[error(
        "the head {what} must be {layers} layers × {heads} heads, its ranked heads among them"
    )]
    Heads {
        /// `attribution` or `ablation`.
        what: &'static str,
        /// Layers.
        layers: usize,
        /// Heads.
        heads: usize,
    },
    /// A section id used twice.
    #[error("id `{0}` is used twice")]
    IdTwice(String),
}

impl From<HtmlError> for io::Error {
    fn from(e: HtmlError) -> Self {
        io::Error::new(io::ErrorKind::InvalidInput, e)
    }
}

/// Write the report for `att` to `w`. Validates `opts` first, so nothing is written when they
/// don't fit `att` (the error is an [`io::ErrorKind::InvalidInput`] wrapping an [`HtmlError`]).
pub fn write_html(att: &Attention, opts: &HtmlOptions, w: &mut dyn Write) -> io::Result<()> {
    write_report(&[(att, opts)], 0, None, w)
}

/// Write one report holding several kinds of attention of one run (an encoder–decoder's
/// encoder, decoder and cross-attention), each with its own options (initial layer and head,
/// analysis, neuron vectors); the page opens on `kinds[open]` and has an Encoder / Decoder /
/// Cross selector. The options shared by the page (title, view, precision, compression,
/// settings) are those of the opened kind. Each kind is validated as by [`write_html`], and
/// the kinds must differ. `target` is the teacher-forced target text, shown beside the source.
pub fn write_html_kinds(
    kinds: &[(&Attention, &HtmlOptions)],
    open: usize,
    target: Option<&str>,
    w: &mut dyn Write,
) -> io::Result<()> {
    if kinds.is_empty() || open >= kinds.len() {
        return Err(HtmlError::Empty.into());
    }
    for (i, (a, _)) in kinds.iter().enumerate() {
        if kinds[..i].iter().any(|(b, _)| b.kind == a.kind) {
            return Err(HtmlError::Analysis(AnalysisShape::KindTwice(a.kind)).into());
        }
    }
    write_report(kinds, open, target, w)
}

/// What a page already showing a report needs to draw another one in place (the page's
/// `window.attnviz.load(meta, data)`): the metadata and payload blocks a report of `kinds` would
/// carry, and `shell`, a digest of everything else that differs between reports (the style with
/// its font subsets, whether images may load), which the page's policy pins: a page may take the
/// data in place only when its shell is the same, else it must load the whole report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReportData {
    /// The metadata block's JSON (`<script id="attnviz-meta">`), as text.
    pub meta: String,
    /// The payload block's base64 (`<script id="attnviz-data">`).
    pub data: String,
    /// Hex digest of the page's policy (script, style and image hashes).
    pub shell: String,
}

/// The in-place parts of the report [`write_html_kinds`] writes for the same arguments, and the
/// shell digest `html_shell` gives that report. Validated as [`write_html_kinds`] is.
pub fn html_kinds_data(
    kinds: &[(&Attention, &HtmlOptions)],
    open: usize,
    target: Option<&str>,
) -> io::Result<ReportData> {
    if kinds.is_empty() || open >= kinds.len() {
        return Err(HtmlError::Empty.into());
    }
    let speech = speech::SpeechData::of(&kinds.iter().map(|(a, _)| *a).collect::<Vec<_>>());
    let prepared = prepare(kinds, open, target, speech.as_ref())?;
    let data = if kinds[open].1.compress {
        let mut data = Vec::new();
        prepared.payload.write_base64(&mut data)?;
        String::from_utf8(data).map_err(io::Error::other)?
    } else {
        prepared.payload.base64_uncompressed()
    };
    let shell = prepared.shell();
    Ok(ReportData {
        meta: prepared.meta_json,
        data,
        shell,
    })
}

/// A report's payload, metadata and style, before they are written.
struct Prepared<'a> {
    payload: Payload<'a>,
    meta: Meta<'a>,
    meta_json: String,
    style: Arc<Style>,
    images: bool,
    /// The report embeds a recording to play (a speech run's).
    media: bool,
}

impl Prepared<'_> {
    fn csp(&self) -> String {
        content_security_policy(&self.style.hash, self.images, self.media)
    }

    fn shell(&self) -> String {
        Sha256::digest(self.csp().as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

/// The report's parts; `speech` is a speech run's tab data ([`speech::SpeechData::of`] of the
/// kinds), made by the caller so that the payload can borrow it.
fn prepare<'a>(
    kinds: &[(&'a Attention, &'a HtmlOptions)],
    open: usize,
    target: Option<&'a str>,
    speech: Option<&'a speech::SpeechData>,
) -> io::Result<Prepared<'a>> {
    for (att, opts) in kinds {
        check(att, opts)?;
    }
    let several = kinds.len() > 1;
    let mut all_sections = Vec::new();
    for (att, opts) in kinds {
        all_sections.extend(sections(att, opts, &section_suffix(att, several)));
    }
    if let Some(s) = speech {
        all_sections.extend(s.sections());
    }
    let payload = Payload::new(all_sections, kinds[open].1.compress);
    let mut meta = Meta::new(kinds, open, target, &payload);
    meta.speech = speech.map(|s| &s.meta);
    let meta_json = serde_json::to_string(&meta).map_err(io::Error::other)?;
    let style = report_style(kinds.iter().map(|(a, _)| *a)).map_err(io::Error::other)?;
    let images = kinds
        .iter()
        .any(|(a, _)| a.image.is_some() || !a.pictures.is_empty());
    Ok(Prepared {
        payload,
        meta,
        meta_json,
        style,
        images,
        media: speech.is_some_and(|s| s.has_audio()),
    })
}

/// [`write_html_kinds`] into `path`, atomically (`-` means standard output).
pub fn write_html_kinds_file(
    kinds: &[(&Attention, &HtmlOptions)],
    open: usize,
    target: Option<&str>,
    path: &Path,
) -> Result<(), OutputError> {
    write_output(path, |w| write_html_kinds(kinds, open, target, w))
}

fn write_report(
    kinds: &[(&Attention, &HtmlOptions)],
    open: usize,
    target: Option<&str>,
    w: &mut dyn Write,
) -> io::Result<()> {
    let speech = speech::SpeechData::of(&kinds.iter().map(|(a, _)| *a).collect::<Vec<_>>());
    let p = prepare(kinds, open, target, speech.as_ref())?;
    for piece in template_pieces() {
        match piece {
            Piece::Text(s) => w.write_all(s.as_bytes())?,
            Piece::Slot(Slot::Csp) => w.write_all(p.csp().as_bytes())?,
            Piece::Slot(Slot::Title) => w.write_all(escape_html(&p.meta.title).as_bytes())?,
            Piece::Slot(Slot::Css) => w.write_all(p.style.text.as_bytes())?,
            Piece::Slot(Slot::Js) => w.write_all(script().as_bytes())?,
            Piece::Slot(Slot::Meta) => {
                w.write_all(escape_json_for_script(&p.meta_json).as_bytes())?
            }
            Piece::Slot(Slot::Data) => p.payload.write_base64(w)?,
        }
    }
    w.flush()
}

/// Write the report to `path` atomically (`-` means standard output).
pub fn write_html_file(
    att: &Attention,
    opts: &HtmlOptions,
    path: &Path,
) -> Result<(), OutputError> {
    write_output(path, |w| write_html(att, opts, w))
}

fn check(att: &Attention, opts: &HtmlOptions) -> Result<(), HtmlError> {
    let (layers, heads) = (att.layers(), att.heads());
    let (nq, nk) = (att.n_queries(), att.n_keys());
    if att.is_empty() || nk == 0 || layers == 0 || heads == 0 {
        return Err(HtmlError::Empty);
    }
    att.model
        .check_selection(Selection::new(opts.layer, HeadSel::Index(opts.head)))?;
    if let Some(t) = opts.threshold.filter(|t| !(0.0..=1.0).contains(t)) {
        return Err(HtmlError::Threshold(t));
    }
    if let Some(q) = opts.query.filter(|&q| q >= nq) {
        return Err(HtmlError::Query(q, nq));
    }
    let a = &opts.analysis;
    let bad = |s: AnalysisShape| Err(HtmlError::Analysis(s));
    let grid_ok = |rows: &[usize]| rows.len() == layers && rows.iter().all(|&r| r == heads);
    for s in &a.stats {
        if !grid_ok(&s.values.iter().map(Vec::len).collect::<Vec<_>>()) {
            return bad(AnalysisShape::Statistic {
                id: s.id.clone(),
                layers,
                heads,
            });
        }
    }
    if let Some(labels) = &a.head_labels {
        if !grid_ok(&labels.iter().map(Vec::len).collect::<Vec<_>>()) {
            return bad(AnalysisShape::HeadLabels { layers, heads });
        }
    }
    for m in &a.matrices {
        if m.layers.len() != layers && m.layers.len() != 1 {
            return bad(AnalysisShape::MatrixLayers {
                id: m.id.clone(),
                found: m.layers.len(),
                layers,
            });
        }
        if m.layers.iter().any(|l| l.len() != nq * nk) {
            return bad(AnalysisShape::MatrixSize {
                id: m.id.clone(),
                queries: nq,
                keys: nk,
            });
        }
    }
    if let Some(lens) = &a.lens {
        let cells_ok = lens.top.len() == lens.stages.len()
            && lens
                .top
                .iter()
                .all(|row| row.len() == lens.positions.len() && row.iter().all(|c| !c.is_empty()));
        if lens.positions.len() != nq || !cells_ok {
            return bad(AnalysisShape::Lens { positions: nq });
        }
    }
    let grids = [
        a.head_attribution
            .as_ref()
            .map(|h| ("attribution", h.layers, h.heads, &h.per_head, &h.ranked)),
        a.head_ablation
            .as_ref()
            .map(|h| ("ablation", h.layers, h.heads, &h.delta, &h.ranked)),
    ];
    for (name, layers, heads, grid, ranked) in grids.into_iter().flatten() {
        let shape_ok = layers > 0
            && heads > 0
            && grid.len() == layers
            && grid.iter().all(|row| row.len() == heads)
            && ranked.iter().all(|r| r.layer < layers && r.head < heads);
        if !shape_ok {
            return bad(AnalysisShape::Heads {
                what: name,
                layers,
                heads,
            });
        }
    }
    let mut ids: Vec<&str> = a.matrices.iter().map(|m| m.id.as_str()).collect();
    ids.extend(a.stats.iter().map(|s| s.id.as_str()));
    ids.sort_unstable();
    if let Some(w) = ids.windows(2).find(|w| w[0] == w[1]) {
        return bad(AnalysisShape::IdTwice(w[0].to_string()));
    }
    Ok(())
}

/// What tells one kind's payload sections apart in a report of several kinds (`:cross`); a
/// report of one kind keeps the plain names.
fn section_suffix(att: &Attention, several: bool) -> String {
    if several {
        format!(":{}", att.kind.as_str())
    } else {
        String::new()
    }
}

/// The payload sections of one kind; `suffix` (`:cross`) tells the kinds of a report apart.
fn sections<'a>(att: &'a Attention, opts: &'a HtmlOptions, suffix: &str) -> Vec<Section<'a>> {
    let mut sections = vec![Section {
        name: format!("attention{suffix}"),
        dtype: opts.precision.dtype(),
        lo: 0.0,
        hi: 1.0,
        parts: vec![att.weights()],
    }];
    if let (true, Some(qk)) = (opts.neuron, &att.query_key) {
        for (name, values) in [("query", &qk.queries), ("key", &qk.keys)] {
            sections.push(Section {
                name: format!("{name}{suffix}"),
                dtype: Dtype::F32,
                lo: 0.0,
                hi: 0.0,
                parts: vec![values],
            });
        }
    }
    if let Some(shares) = att.sink_shares() {
        sections.push(Section {
            name: format!("sinks{suffix}"),
            dtype: opts.precision.dtype(),
            lo: 0.0,
            hi: 1.0,
            parts: vec![shares],
        });
    }
    if let Some(r) = &att.router {
        sections.push(Section {
            name: format!("router{suffix}"),
            dtype: opts.precision.dtype(),
            lo: 0.0,
            hi: 1.0,
            parts: r.layers.iter().map(|l| l.probs.as_slice()).collect(),
        });
    }
    for m in &opts.analysis.matrices {
        let (lo, hi) = value_range(m.layers.iter().flatten().copied());
        sections.push(Section {
            name: format!("matrix:{}{suffix}", m.id),
            dtype: opts.precision.dtype(),
            lo,
            hi,
            parts: m.layers.iter().map(Vec::as_slice).collect(),
        });
    }
    sections
}

/// Storage range of an extra matrix: `[0, 1]` for probabilities, widened to cover anything else.
fn value_range(values: impl Iterator<Item = f32>) -> (f32, f32) {
    let (lo, hi) = values
        .filter(|v| v.is_finite())
        .fold((0f32, 1f32), |(lo, hi), v| (lo.min(v), hi.max(v)));
    (lo, hi)
}

/// Escape text for HTML element content and attribute values.
pub fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Make serialised JSON safe inside a `<script>` element: `<`, `>` and `&` become `\u003c`,
/// `\u003e`, `\u0026` (so `</script>` and `<!--` cannot appear), and U+2028/U+2029 are escaped
/// too. These characters only occur inside JSON strings, where the escapes mean the same thing.
pub fn escape_json_for_script(json: &str) -> String {
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// A named hole in the template, written `@@ATTNVIZ:name@@`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    Csp,
    Title,
    Css,
    Js,
    Meta,
    Data,
}

impl Slot {
    const ALL: [Slot; 6] = [
        Slot::Csp,
        Slot::Title,
        Slot::Css,
        Slot::Js,
        Slot::Meta,
        Slot::Data,
    ];

    fn name(self) -> &'static str {
        match self {
            Slot::Csp => "csp",
            Slot::Title => "title",
            Slot::Css => "css",
            Slot::Js => "js",
            Slot::Meta => "meta",
            Slot::Data => "data",
        }
    }
}

impl fmt::Display for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "@@ATTNVIZ:{}@@", self.name())
    }
}

enum Piece {
    Text(&'static str),
    Slot(Slot),
}

/// The page's Content-Security-Policy: nothing may load from anywhere, and only the report's own
/// inline script and style (listed by hash; `style_hash` is [`Style::hash`]) may run. So even
/// markup that slipped past escaping could neither run a script (inline handlers included) nor
/// make a request. Fonts may come from `data:` URIs only: the subsets [`font_css`] embeds; so
/// may images, in a vision model's report only (`images`): the picture the model read, embedded
/// as a `data:` PNG; and so may media, in a speech run's report only (`media`): the recording,
/// embedded as a `data:` WAV for its player.
fn content_security_policy(style_hash: &str, images: bool, media: bool) -> String {
    static SCRIPT_HASH: OnceLock<String> = OnceLock::new();
    format!(
        "default-src 'none'; script-src 'sha256-{}'; style-src 'sha256-{style_hash}'; \
         font-src data:; {}{}base-uri 'none'; form-action 'none'",
        SCRIPT_HASH.get_or_init(|| csp_hash(script())),
        if images { "img-src data:; " } else { "" },
        if media { "media-src data:; " } else { "" }
    )
}

/// A text's hash as a Content-Security-Policy source lists it (base64 of its SHA-256).
fn csp_hash(s: &str) -> String {
    STANDARD.encode(Sha256::digest(s.as_bytes()))
}

/// A report's style element: the page's CSS with the fonts of its text ([`font_css`]), and
/// its hash for the policy.
struct Style {
    text: String,
    /// [`csp_hash`] of `text`.
    hash: String,
}

/// How many styles [`report_style`] keeps: the styles of the last few distinct character sets
/// (the live app's runs of one model mostly share one).
const STYLES_KEPT: usize = 8;

/// The style of a report of `atts`. Subsetting fonts is most of a short report's time and
/// depends only on the text's characters, so the styles of the last [`STYLES_KEPT`] character
/// sets are kept, the newest first.
fn report_style<'a>(
    atts: impl Iterator<Item = &'a Attention>,
) -> Result<Arc<Style>, fonts::FontError> {
    static KEPT: Mutex<Vec<(String, Arc<Style>)>> = Mutex::new(Vec::new());
    let chars = non_ascii_chars(atts);
    let kept = |kept: &mut Vec<(String, Arc<Style>)>| {
        let at = kept.iter().position(|(c, _)| *c == chars)?;
        let entry = kept.remove(at);
        let style = Arc::clone(&entry.1);
        kept.insert(0, entry);
        Some(style)
    };
    if let Some(style) = kept(&mut KEPT.lock().unwrap_or_else(|p| p.into_inner())) {
        return Ok(style);
    }
    let text = format!("{CSS}{}", font_css(&chars)?);
    let style = Arc::new(Style {
        hash: csp_hash(&text),
        text,
    });
    let mut kept = KEPT.lock().unwrap_or_else(|p| p.into_inner());
    kept.insert(0, (chars, Arc::clone(&style)));
    kept.truncate(STYLES_KEPT);
    Ok(style)
}

/// Every character of the tokens, sentences and model names of `atts` that is not ASCII, once,
/// in the order of first appearance.
fn non_ascii_chars<'a>(atts: impl Iterator<Item = &'a Attention>) -> String {
    let non_ascii = |s: &str| s.chars().filter(|c| !c.is_ascii()).collect::<String>();
    let mut chars = String::new();
    for att in atts {
        chars.push_str(&non_ascii(&att.text));
        chars.push_str(&non_ascii(att.pair.as_deref().unwrap_or("")));
        chars.push_str(&non_ascii(&att.model.id));
        for units in [att.queries(), att.keys()] {
            for t in units.labels.iter().chain(&units.surfaces) {
                chars.push_str(&non_ascii(t));
            }
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    chars.retain(|c| seen.insert(c));
    chars
}

/// Fonts for the report's text: for every character of `chars` (the report's non-ASCII
/// characters, [`non_ascii_chars`]), the embedded font that has it, subset to those characters
/// ([`fonts::subset_for`]) as `@font-face` rules, and `--attnviz-fonts`, the CSS font list the
/// page's body font ends with. The system's fonts come first, so the page looks native; ours
/// fill in what the system lacks (a Korean or emoji token on a machine without such fonts shows
/// as itself, not as an empty box). Empty when every character is ASCII.
fn font_css(chars: &str) -> Result<String, fonts::FontError> {
    let webfonts = fonts::subset_for([(chars, false)])?;
    if webfonts.is_empty() {
        return Ok(String::new());
    }
    Ok(format!(
        "\n{}:root{{{FONTS_VAR}:{}, sans-serif}}\n",
        fonts::font_face_css(&webfonts),
        fonts::font_family_list(&webfonts)
    ))
}

/// The template cut at its slots. A hand-written splitter rather than a template engine: the
/// payload (tens of MB for long inputs) is streamed straight into the output, and six fixed holes
/// need no language. A unit test checks that each slot appears exactly once.
fn template_pieces() -> Vec<Piece> {
    let mut pieces = Vec::new();
    let mut rest = TEMPLATE;
    loop {
        let next = Slot::ALL
            .into_iter()
            .filter_map(|slot| rest.find(&slot.to_string()).map(|at| (at, slot)))
            .min_by_key(|&(at, _)| at);
        let Some((at, slot)) = next else { break };
        pieces.push(Piece::Text(&rest[..at]));
        pieces.push(Piece::Slot(slot));
        rest = &rest[at + slot.to_string().len()..];
    }
    pieces.push(Piece::Text(rest));
    pieces
}

#[cfg(test)]
mod tests;
