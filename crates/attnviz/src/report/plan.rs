//! [`Plan`]: which outputs a run gets, with their options.

use std::path::PathBuf;

use crate::analysis::{HeadFusion, ViewOptions};
use crate::attention::{AttentionKind, HeadSel};
use crate::render::html::PrecisionChoice;
use crate::render::image::picture::Query;
use crate::render::image::{Figure, FigureSpec, ImageOptions};
use crate::render::json::{JsonOptions, JsonSection};
use crate::render::stats_table::StatsTableOptions;

use super::select::Choose;

/// Name of the JSON export in a report folder.
pub const REPORT_JSON: &str = "attention.json";
/// Name of the HTML report in a report folder.
pub const REPORT_HTML: &str = "report.html";

/// Every file a report folder ([`Files::report`]) holds.
pub fn folder_files() -> Vec<String> {
    let mut names = vec![REPORT_JSON.to_string(), REPORT_HTML.to_string()];
    for (stem, _) in FigureSpec::all(0, HeadSel::Mean, Some(&[][..])) {
        names.extend([format!("{stem}.png"), format!("{stem}.svg")]);
    }
    names
}

/// The outputs of a run, and their options: what [`super::write`] writes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// The view every output shows (word level, special tokens excluded); the HTML report gets
    /// the token-level attention and opens on this view, which the page can undo.
    pub view: ViewOptions,
    /// Which attention the terminal view, the table and the figures show; `None`: the run's
    /// primary one (cross-attention for an encoder–decoder).
    pub kind: Option<AttentionKind>,
    /// The layer and head the single-head outputs show.
    pub choose: Choose,
    /// The files to write.
    pub files: Files,
    /// What the PNG and SVG figures draw, and how they look.
    pub figure: FigurePlan,
    /// The JSON export's number format and optional sections.
    pub json: JsonPlan,
    /// The HTML report's options.
    pub html: HtmlPlan,
    /// What is printed to the terminal.
    pub terminal: TerminalPlan,
    /// Compute the statistics even when no output asks for them (a caller that keeps them,
    /// as corpus mode does for its summary).
    pub keep_stats: bool,
}

/// The files a run writes; `None`: not written. A path of `-` (or `/dev/stdout`) is standard
/// output.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Files {
    /// The JSON export.
    pub json: Option<PathBuf>,
    /// The figure as PNG.
    pub png: Option<PathBuf>,
    /// The figure as SVG.
    pub svg: Option<PathBuf>,
    /// The self-contained HTML report.
    pub html: Option<PathBuf>,
    /// A report folder: the JSON, the HTML report and every figure as PNG and SVG, built aside
    /// and moved into place whole.
    pub report: Option<PathBuf>,
}

/// The PNG and SVG figures.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FigurePlan {
    /// What they draw.
    pub figure: Figure,
    /// How they look.
    pub image: ImageOptions,
    /// The query whose attention a picture's views draw (the class token by default).
    pub query: Query,
    /// The head fusion and discard ratio of a picture's rollout figure; `None`: the plain
    /// rollout.
    pub image_rollout: Option<(HeadFusion, f32)>,
}

/// The JSON export.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JsonPlan {
    /// Number format.
    pub format: JsonOptions,
    /// Optional sections.
    pub include: Vec<JsonSection>,
}

/// The HTML report.
#[derive(Clone, Debug, PartialEq)]
pub struct HtmlPlan {
    /// Offer the query/key (neuron) view.
    pub neuron: bool,
    /// How the report stores weights.
    pub precision: PrecisionChoice,
    /// Label tokens by their raw vocabulary pieces.
    pub raw_tokens: bool,
    /// gzip the payload (off only for a page that is not saved, as a server's frame).
    pub compress: bool,
}

impl Default for HtmlPlan {
    fn default() -> Self {
        HtmlPlan {
            neuron: false,
            precision: PrecisionChoice::default(),
            raw_tokens: false,
            compress: true,
        }
    }
}

/// What is printed: the terminal view to the sink's `out`, the tables to `out` or, when
/// standard output carries a file, to `side`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TerminalPlan {
    /// The terminal view of the selection; `None`: not printed.
    pub view: Option<TerminalView>,
    /// The statistics table (its token names, layer numbers and induction rows are filled in
    /// from the run); `None`: not printed.
    pub stats: Option<StatsTableOptions>,
    /// The logit-lens table, this many columns wide; `None`: not printed.
    pub lens_table: Option<usize>,
    /// The head attribution and ablation tables.
    pub heads_table: bool,
    /// Standard output carries a file: the tables go to the sink's `side` writer.
    pub aside: bool,
}

/// The terminal view's look.
#[derive(Clone, Debug, PartialEq)]
pub struct TerminalView {
    /// 24-bit colour escapes.
    pub color: bool,
    /// Columns available.
    pub width: usize,
    /// Most attended tokens listed per token.
    pub top: usize,
    /// Label tokens by their raw vocabulary pieces.
    pub raw_tokens: bool,
    /// Show a vision-language model's pictures token by token rather than as bands.
    pub expand_pictures: bool,
}

impl Plan {
    /// Whether an HTML report is written (a file or a report folder).
    pub fn html_report(&self) -> bool {
        self.files.html.is_some() || self.files.report.is_some()
    }

    /// Whether a PNG or SVG figure is written.
    pub fn figures(&self) -> bool {
        self.files.png.is_some() || self.files.svg.is_some()
    }

    /// Whether the outputs need the means and rollout of every kind.
    pub fn needs_rollout(&self) -> bool {
        self.files.report.is_some()
            || !self.json.include.is_empty()
            || (self.figure.figure == Figure::Rollout && self.figures())
    }

    /// Whether the outputs need the statistics.
    pub fn needs_stats(&self) -> bool {
        self.keep_stats
            || self.files.json.is_some()
            || self.html_report()
            || self.terminal.stats.is_some()
    }

    /// Whether the outputs show anything at all.
    pub fn draws(&self) -> bool {
        self.terminal.view.is_some()
            || self.terminal.stats.is_some()
            || self.files.json.is_some()
            || self.figures()
            || self.html_report()
    }
}
