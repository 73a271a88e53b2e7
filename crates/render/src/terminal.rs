//! The terminal view: a heatmap of one head (or the mean over a layer's heads) with token labels,
//! and for each token the tokens it attends to most.
//!
//! With colour, cells are 24-bit background colours on the viridis scale; without (not a
//! terminal, `NO_COLOR`, `--color never`) they are shade characters, so the output stays plain
//! text. Inputs too long to draw one cell per token in the available width get a summary instead:
//! a heatmap over blocks of tokens, the strongest links, and the most attended tokens.

use std::io::{self, Write};

use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

use crate::attention::{Attention, AttentionKind, HeadSel, MaskKind, Selection};
use crate::band::{Band, Banded};
use crate::colormap::{viridis, Rgb};
pub use crate::term::{escape_controls, is_bidi_control};
use crate::term::{Line, Paint, Term};

/// How the terminal view is drawn.
#[derive(Clone, Debug)]
pub struct TerminalOptions {
    /// 24-bit colour escapes (otherwise plain text).
    pub color: bool,
    /// Columns available.
    pub width: usize,
    /// How many most-attended tokens to list per token.
    pub top: usize,
    /// Above this many tokens the summary replaces the full view, even if it would fit.
    pub max_full: usize,
    /// Label tokens as the tokenizer's vocabulary has them (`Ġquick`) rather than as a reader
    /// reads them (`quick`; see [`crate::attention::display`]).
    pub raw_tokens: bool,
    /// Show a vision-language model's pictures token by token (`<img1 r,c>`) rather than each
    /// as one band of the matrix (see [`crate::band`]).
    pub expand_pictures: bool,
}

impl Default for TerminalOptions {
    fn default() -> Self {
        TerminalOptions {
            color: false,
            width: 80,
            top: 3,
            max_full: 48,
            raw_tokens: false,
            expand_pictures: false,
        }
    }
}

/// Widest token label in the full view, in terminal columns.
const LABEL_MAX: usize = 12;
/// Shade ramp for plain-text cells, lightest to darkest.
const SHADES: [&str; 5] = [" ·", "░░", "▒▒", "▓▓", "██"];
/// A cell the query could not see (a causal mask's future): blank, unlike a weight of 0.
const MASKED: &str = "  ";
/// What divides the keys from the learned attention sink's column.
const SINK_RULE: &str = " ┃";

/// Write the terminal view of `selection` (a layer, and a head or the mean) of `att`. A selection
/// the model does not have is an [`io::ErrorKind::InvalidInput`] error wrapping a
/// [`crate::attention::SelectionError`].
///
/// Rows are the query units and columns the key units (the same list for self-attention);
/// cells the query could not see ([`Attention::is_masked`]) are left blank. A vision-language
/// model's pictures are one band each ([`crate::band::banded`]) unless the options expand them.
pub fn write_view(
    att: &Attention,
    selection: Selection,
    opts: &TerminalOptions,
    w: &mut dyn Write,
) -> io::Result<()> {
    match (!opts.expand_pictures)
        .then(|| crate::band::banded(att))
        .flatten()
    {
        Some(b) => view_of(&b.attention, selection, opts, Some(&b), w),
        None => view_of(att, selection, opts, None, w),
    }
}

/// [`write_view`] of the view `att` as it is shown: `banded`'s attention, when the pictures are
/// bands.
fn view_of(
    att: &Attention,
    selection: Selection,
    opts: &TerminalOptions,
    banded: Option<&Banded>,
    w: &mut dyn Write,
) -> io::Result<()> {
    let Selection { layer, head } = att
        .model
        .check_selection(selection)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let matrix = att.matrix(layer, head);
    let sinks = att.sink_share_row(layer, head);
    let names = Names::of(att, opts.raw_tokens, banded);
    let note = banded.map(Banded::note);
    let view = View {
        att,
        layer,
        matrix: &matrix,
        opts,
        names: &names,
        text: None,
        band_note: note.as_deref(),
        bands: banded.map_or(&[], |b| &b.bands),
        sinks: sinks.as_deref(),
    };
    let t = &mut Term::new(w, opts.color);
    view.title(layer, head, t)?;
    let (nq, nk) = (att.n_queries(), att.n_keys());
    let index_w = digits(names.widest());
    let label_w = names
        .queries
        .iter()
        .chain(&names.keys)
        .map(|t| escape_controls(t).width().min(LABEL_MAX))
        .max()
        .unwrap_or(0);
    let gutter = index_w + 1 + label_w + 2;
    let dividers = column_dividers(att).len();
    let fits = nq.max(nk) <= opts.max_full && gutter + 2 * nk + dividers <= opts.width;
    if att.kind == AttentionKind::Cross {
        return view.cross(fits, index_w, label_w, t);
    }
    if fits {
        view.full(index_w, label_w, t)
    } else {
        view.summary(t)
    }
}

struct View<'a> {
    att: &'a Attention,
    /// The captured layer shown (its sliding window masks cells too).
    layer: usize,
    matrix: &'a [f32],
    opts: &'a TerminalOptions,
    names: &'a Names,
    /// What the cells are when they are not this layer's attention ([`write_matrix_view`]).
    text: Option<&'a MatrixText>,
    /// What a picture's band holds, when the pictures are banded.
    band_note: Option<&'a str>,
    /// The pictures' bands, when they are banded.
    bands: &'a [Band],
    /// Each row's share on a learned attention sink (gpt-oss), drawn as a column of its own
    /// after the keys; `None` without one.
    sinks: Option<&'a [f32]>,
}

/// The words of a token × token matrix that is not attention (ALTI's contributions), for
/// [`write_matrix_view`].
#[derive(Clone, Debug)]
pub struct MatrixText {
    /// The first line (what the matrix is, through which layer).
    pub title: String,
    /// What rows and columns are (`rows: output token · columns: input token`).
    pub axes: String,
    /// What a cell holds, before the colour ramp (`contribution`).
    pub caption: String,
    /// The heading of the per-row list of the strongest columns, with `{top}` for its length.
    pub top_heading: String,
}

/// A token × token matrix of `att`'s tokens that is not its attention (one of ALTI's), `[nq,
/// nk]` row-major, drawn as the attention view draws a layer: the heatmap where it fits, then
/// each row's strongest columns (the list alone where the heatmap does not fit). Only the causal
/// mask blanks cells: a sliding window does not bound what flows through several layers. A
/// vision-language model's pictures are banded as in [`write_view`].
pub fn write_matrix_view(
    att: &Attention,
    matrix: &[f32],
    text: &MatrixText,
    opts: &TerminalOptions,
    w: &mut dyn Write,
) -> io::Result<()> {
    let (nq, nk) = (att.n_queries(), att.n_keys());
    if matrix.len() != nq * nk {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "a {nq} × {nk} matrix has {} cells, not {}",
                nq * nk,
                matrix.len()
            ),
        ));
    }
    if let Some(b) = (!opts.expand_pictures)
        .then(|| crate::band::banded(att))
        .flatten()
    {
        if let Some(banded) = b.matrix(matrix) {
            return matrix_view_of(&b.attention, &banded, text, opts, Some(&b), w);
        }
    }
    matrix_view_of(att, matrix, text, opts, None, w)
}

/// [`write_matrix_view`] of the view `att` as it is shown.
fn matrix_view_of(
    att: &Attention,
    matrix: &[f32],
    text: &MatrixText,
    opts: &TerminalOptions,
    banded: Option<&Banded>,
    w: &mut dyn Write,
) -> io::Result<()> {
    let (nq, nk) = (att.n_queries(), att.n_keys());
    let names = Names::of(att, opts.raw_tokens, banded);
    let note = banded.map(Banded::note);
    let view = View {
        att,
        layer: 0,
        matrix,
        opts,
        names: &names,
        text: Some(text),
        band_note: note.as_deref(),
        bands: banded.map_or(&[], |b| &b.bands),
        sinks: None,
    };
    let t = &mut Term::new(w, opts.color);
    view.wrap(&text.title, Paint::Bold, t)?;
    let index_w = digits(names.widest());
    let label_w = names
        .queries
        .iter()
        .chain(&names.keys)
        .map(|t| escape_controls(t).width().min(LABEL_MAX))
        .max()
        .unwrap_or(0);
    let gutter = index_w + 1 + label_w + 2;
    let dividers = column_dividers(att).len();
    if nq.max(nk) <= opts.max_full && gutter + 2 * nk + dividers <= opts.width {
        return view.full(index_w, label_w, t);
    }
    view.wrap(
        &format!(
            "{nq} {} are too many to draw one cell each; the strongest columns of each row \
             follow (the PNG and HTML views draw every cell).",
            units_word(att, true)
        ),
        Paint::Dim,
        t,
    )?;
    view.top_list(index_w, label_w, t)
}

/// How the view names each query and key unit: its label (display text or raw) with, where the
/// same label occurs more than once on its side, its index (`C₇`).
struct Names {
    queries: Vec<String>,
    keys: Vec<String>,
    /// The number each query unit is shown with (its index, or with bands its first token).
    qnum: Vec<usize>,
    /// The number each key unit is shown with.
    knum: Vec<usize>,
}

impl Names {
    /// With the pictures `banded`, units are numbered by their first token (`--query N`'s
    /// numbers: a band stands for many tokens), and each band is named by its picture alone
    /// (`picture 1`: the grid would not fit a label's columns; the note under the legend gives
    /// it).
    fn of(att: &Attention, raw: bool, banded: Option<&Banded>) -> Names {
        let side = |units: &crate::attention::Units| {
            if banded.is_none() {
                return ((0..units.len()).collect(), units.named(raw));
            }
            let numbers: Vec<usize> = units.spans.iter().map(|s| s.start).collect();
            let named = crate::attention::display::positioned(units.shown(raw), &numbers);
            (numbers, named)
        };
        let (qnum, queries) = side(att.queries());
        let (knum, keys) = side(att.keys());
        let mut names = Names {
            queries,
            keys,
            qnum,
            knum,
        };
        for b in banded.map_or(&[][..], |b| &b.bands) {
            let name = att.pictures.get(b.picture).map_or_else(
                || format!("picture {}", b.picture + 1),
                |p| p.name(b.picture),
            );
            for side in [&mut names.queries, &mut names.keys] {
                if let Some(n) = side.get_mut(b.unit) {
                    n.clone_from(&name);
                }
            }
        }
        names
    }

    /// The largest number a row or column is given.
    fn widest(&self) -> usize {
        self.qnum
            .iter()
            .chain(&self.knum)
            .copied()
            .max()
            .unwrap_or(0)
    }
}

impl View<'_> {
    /// Whether cell (q, k) is blank: masked in this layer's attention, or for another matrix
    /// only by the causal mask.
    fn masked(&self, q: usize, k: usize) -> bool {
        match self.text {
            None => self.att.is_masked_in(self.layer, q, k),
            Some(_) => self.att.mask == MaskKind::Causal && k > q,
        }
    }

    fn nq(&self) -> usize {
        self.att.n_queries()
    }

    fn nk(&self) -> usize {
        self.att.n_keys()
    }

    fn row(&self, q: usize) -> &[f32] {
        &self.matrix[q * self.nk()..(q + 1) * self.nk()]
    }

    fn query_label(&self, q: usize) -> &str {
        &self.names.queries[q]
    }

    fn key_label(&self, k: usize) -> &str {
        &self.names.keys[k]
    }

    fn title(&self, layer: usize, head: HeadSel, t: &mut Term) -> io::Result<()> {
        let att = self.att;
        let head_desc = match head {
            HeadSel::Index(h) if att.is_grouped() => {
                format!("head {h} (kv head {})", att.kv_head()[h])
            }
            HeadSel::Index(h) => format!("head {h}"),
            HeadSel::Mean if att.is_grouped() => format!(
                "mean of {} heads ({} kv heads)",
                att.heads(),
                att.kv_heads()
            ),
            HeadSel::Mean => format!("mean of {} heads", att.heads()),
        };
        let one = self.nq() == 1 && self.nk() == 1;
        let unit = match (att.level, one) {
            (crate::attention::Level::Token, false) => "tokens",
            (crate::attention::Level::Token, true) => "token",
            (crate::attention::Level::Word, false) => "words",
            (crate::attention::Level::Word, true) => "word",
        };
        let size = if !self.bands.is_empty() && att.is_square() {
            // The pictures' bands are not tokens: say how many tokens each stands for.
            let tokens: usize = self.bands.iter().map(|b| b.units).sum();
            // A tiled picture's runs (its tiles and global view) are one picture.
            let mut names: Vec<String> = Vec::new();
            let (mut runs, mut crops) = (0, false);
            for b in self.bands.iter() {
                let p = att.pictures.get(b.picture);
                let name = (p.map_or(b.picture, |p| p.picture(b.picture)) + 1).to_string();
                runs += usize::from(p.is_some_and(|p| p.tile.is_some()));
                crops |= p.is_some_and(|p| p.tile.is_some_and(|t| t.crop));
                if !names.contains(&name) {
                    names.push(name);
                }
            }
            let tiles = match (runs, crops) {
                (0, _) => String::new(),
                (_, true) => format!(", {runs} runs: whole views and crops"),
                (_, false) => format!(", {runs} runs: tiles and whole views"),
            };
            format!(
                "{} {unit} + picture{} {} ({tokens} image {unit}{tiles})",
                self.nq() - self.bands.len(),
                if names.len() > 1 { "s" } else { "" },
                names.join(", ")
            )
        } else if att.is_square() {
            format!("{} {unit}", self.nq())
        } else {
            // Which side is which: the legend line below names them.
            format!("{} × {} {unit}", self.nq(), self.nk())
        };
        // An encoder–decoder's kind comes first: it decides what rows and columns are.
        let kind = match att.kind {
            AttentionKind::SelfAttention => String::new(),
            kind => format!(" · {}", kind.as_str()),
        };
        let mut title = format!(
            "{}{kind} · layer {} ({}) · {head_desc} · {size}",
            escape_controls(att.model.name()),
            att.layer_number(layer),
            crate::attention::layer_list(att.layer_numbers()),
        );
        if att.mask == MaskKind::Causal {
            title.push_str(" · causal");
        }
        if let Some(w) = att.window(layer) {
            title.push_str(&format!(" · sliding window {w}"));
        }
        if att.special_excluded {
            title.push_str(" · special tokens hidden, rows renormalised");
        }
        if let Some(other) = &att.non_softmax {
            title.push_str(&format!(" · {}", other.note()));
        }
        self.wrap(&title, Paint::Bold, t)?;
        if let HeadSel::Index(h) = head {
            if att.is_grouped() {
                let kv = att.kv_head()[h];
                let heads: Vec<String> =
                    att.heads_of_kv(kv).iter().map(|h| h.to_string()).collect();
                t.say_as(
                    Paint::Dim,
                    &format!(
                        "grouped-query attention: heads {} read key/value head {kv}",
                        heads.join(", ")
                    ),
                )?;
            }
        }
        Ok(())
    }

    /// Write `text` (plain, one paragraph) wrapped at spaces to the view's width, each line
    /// painted by `paint`.
    fn wrap(&self, text: &str, paint: Paint, t: &mut Term) -> io::Result<()> {
        for line in wrap_words(text, self.opts.width.max(40)) {
            t.say_as(paint, &line)?;
        }
        Ok(())
    }

    /// Add a two-column cell for `v` on a scale whose top is `max` to `line`: its colour, or
    /// without colour its shade.
    fn cell(&self, v: f32, max: f32, line: &mut Line) {
        let t = if max > 0.0 { v / max } else { 0.0 };
        if self.opts.color {
            line.paint(Paint::Back(viridis(t)), "  ");
        } else {
            let i = ((t * SHADES.len() as f32) as usize).min(SHADES.len() - 1);
            line.push(SHADES[i]);
        }
    }

    fn legend(&self, max: f32, t: &mut Term) -> io::Result<()> {
        let axes = if let Some(text) = self.text {
            text.axes.clone()
        } else if self.att.is_square() {
            format!("rows: {} · columns: {}", crate::QUERY_AXIS, crate::KEY_AXIS)
        } else {
            "rows: target · decoder (attending from) · columns: source · encoder (attended to)"
                .to_string()
        };
        self.wrap(&axes, Paint::Dim, t)?;
        let caption = self.text.map_or(crate::weight_caption(self.att), |text| {
            text.caption.as_str()
        });
        let mut ramp = Line::new();
        ramp.paint(Paint::Dim, &format!("{caption} 0 "));
        for i in 0..8 {
            self.cell(i as f32 / 7.0 * max, max, &mut ramp);
        }
        ramp.paint(Paint::Dim, &format!(" {}", crate::scale_number(max)));
        t.line(&ramp)?;
        if self.att.mask == MaskKind::Causal {
            t.say_as(
                Paint::Dim,
                "causal mask: blank cells are keys after the query, which it cannot see",
            )?;
            if self.att.pictures.iter().any(|p| p.bidirectional) {
                t.say_as(
                    Paint::Dim,
                    "except within a picture: its image tokens see each other in full",
                )?;
            }
            if self.att.prefix > 0 {
                t.say_as(Paint::Dim, &crate::image::prefix_note(self.att.prefix))?;
            }
        }
        if let Some(note) = self.band_note {
            self.wrap(note, Paint::Dim, t)?;
        }
        if self.sinks.is_some() {
            self.wrap(
                &format!(
                    "{SINK_RULE} sink column: each row's share on the learned attention sink, a \
                     logit per head in the softmax that is no token; the row's cells and it sum \
                     to 1"
                ),
                Paint::Dim,
                t,
            )?;
        }
        if let Some(win) = self.att.window(self.layer).filter(|_| self.text.is_none()) {
            t.say_as(
                Paint::Dim,
                &format!(
                    "sliding window {win}: blank cells before the diagonal are keys {win} or more \
                     tokens back, outside the window"
                ),
            )?;
        }
        Ok(())
    }

    /// What a causal view must say about its units: which is the attention sink, and which
    /// units the model generated.
    fn unit_notes(&self, full: bool, t: &mut Term) -> io::Result<()> {
        let att = self.att;
        if let Some(s) = att.sink() {
            self.wrap(
                &format!(
                    "sink: {} {}: the first {}, where causal heads park unused attention",
                    self.names.qnum.get(s).copied().unwrap_or(s),
                    fit(self.query_label(s), LABEL_MAX),
                    units_word(att, false)
                ),
                Paint::Dim,
                t,
            )?;
        }
        if let Some(g) = att.first_generated() {
            let last = self.nq() - 1;
            let units = units_word(att, last > g);
            let number = |u: usize| self.names.qnum.get(u).copied().unwrap_or(u);
            let which = if last > g {
                format!("{}–{}", number(g), number(last))
            } else {
                number(g).to_string()
            };
            let lines = if full { " (after the ┄ lines)" } else { "" };
            t.say_as(
                Paint::Dim,
                &format!("generated by the model: {units} {which}{lines}"),
            )?;
        }
        Ok(())
    }

    fn full(&self, index_w: usize, label_w: usize, t: &mut Term) -> io::Result<()> {
        let att = self.att;
        let (nq, nk) = (self.nq(), self.nk());
        // The sink column shares the cells' colour scale.
        let max = self
            .matrix
            .iter()
            .chain(self.sinks.unwrap_or_default())
            .copied()
            .fold(0.0, f32::max);
        self.legend(max, t)?;
        self.unit_notes(true, t)?;
        let bq = att.queries().segment_b_start();
        let gq = att.first_generated();
        let arrows = att.queries().reaction_arrows();
        let mut row_rules: Vec<(usize, &str)> = bq.into_iter().map(|b| (b, "─")).collect();
        row_rules.extend(arrows.iter().map(|&a| (a, "─")));
        row_rules.extend(gq.map(|g| (g, "┄")));
        let cols = column_dividers(att);
        let gutter = index_w + 1 + label_w + 2;
        let at: Vec<usize> = cols.iter().map(|&(k, _)| k).collect();
        for line in index_header(&self.names.knum, gutter, &at) {
            t.say_as(Paint::Dim, &line)?;
        }
        for q in 0..nq {
            // A rule above sentence B's first row and each reaction arrow (solid), and the first
            // generated row (dotted).
            for &(row, glyph) in &row_rules {
                if q != row {
                    continue;
                }
                let mut rule = " ".repeat(gutter);
                for k in 0..nk {
                    if at.contains(&k) {
                        rule.push('┼');
                    }
                    rule.push_str(&glyph.repeat(2));
                }
                t.say_as(Paint::Dim, &rule)?;
            }
            let mut line = Line::from(
                format!(
                    "{:>index_w$} {}  ",
                    self.names.qnum[q],
                    pad(&fit(self.query_label(q), label_w), label_w)
                )
                .as_str(),
            );
            for (k, &v) in self.row(q).iter().enumerate() {
                if let Some(&(_, glyph)) = cols.iter().find(|&&(c, _)| c == k) {
                    line.paint(Paint::Dim, glyph);
                }
                if self.masked(q, k) {
                    line.push(MASKED);
                } else {
                    self.cell(v, max, &mut line);
                }
            }
            if let Some(sinks) = self.sinks {
                line.paint(Paint::Dim, SINK_RULE);
                self.cell(sinks[q], max, &mut line);
                line.paint(Paint::Dim, &format!(" {}", weight(sinks[q])));
            }
            // Masked cells at the end of a row (a causal mask's future) leave no spaces behind.
            t.line(line.trim_end())?;
        }
        if let Some(b) = bq.filter(|_| att.is_square()) {
            let units = match att.level {
                crate::attention::Level::Token => "tokens",
                crate::attention::Level::Word => "words",
            };
            t.say_as(
                Paint::Dim,
                &format!(
                    "sentence A: {units} 0–{}, sentence B: {units} {b}–{}",
                    b - 1,
                    nq - 1
                ),
            )?;
        }
        if !arrows.is_empty() {
            let at: Vec<String> = arrows.iter().map(|a| a.to_string()).collect();
            let line = if arrows.len() == 1 {
                format!(
                    "reaction: the line before {} {} ({}) divides reactants from products",
                    units_word(att, false),
                    at[0],
                    self.query_label(arrows[0])
                )
            } else {
                format!(
                    "reaction: the lines before {} {} divide reactants, reagents and products",
                    units_word(att, true),
                    at.join(", ")
                )
            };
            t.say_as(Paint::Dim, &line)?;
        }
        if self.opts.top > 0 {
            t.blank()?;
            self.top_list(index_w, label_w, t)?;
        }
        Ok(())
    }

    /// Each row's strongest columns, one line per row.
    fn top_list(&self, index_w: usize, label_w: usize, t: &mut Term) -> io::Result<()> {
        let att = self.att;
        let nq = self.nq();
        let gq = att.first_generated();
        let top = self.opts.top.min(self.nk()).to_string();
        let heading = match self.text {
            None => format!("Most attended (top {top}):"),
            Some(t) => t.top_heading.replace("{top}", &top),
        };
        t.say_as(Paint::Bold, &heading)?;
        for q in 0..nq {
            if Some(q) == gq && q > 0 {
                let rule = "┄".repeat(index_w + 1 + label_w);
                t.say_as(Paint::Dim, &format!("{rule} generated"))?;
            }
            let visible: Vec<(usize, f32)> = self
                .row(q)
                .iter()
                .copied()
                .enumerate()
                .filter(|&(k, _)| !self.masked(q, k))
                .collect();
            let entries: Vec<String> = top_k(&visible, self.opts.top)
                .into_iter()
                .map(|(k, v)| {
                    format!(
                        "{} {}",
                        pad(&fit(self.key_label(k), label_w), label_w),
                        weight(v)
                    )
                })
                .collect();
            let sink = self
                .sinks
                .map_or(String::new(), |s| format!("  · sink {}", weight(s[q])));
            t.say(&format!(
                "{:>index_w$} {} → {}{sink}",
                self.names.qnum[q],
                pad(&fit(self.query_label(q), label_w), label_w),
                entries.join("  ")
            ))?;
        }
        Ok(())
    }

    /// Cross-attention: the heatmap (target rows, source columns) when it fits, then always
    /// the alignment: for each target (decoder) unit, the source units it attends to most, with
    /// their weights, one line each however long the source is.
    fn cross(&self, fits: bool, index_w: usize, label_w: usize, t: &mut Term) -> io::Result<()> {
        let att = self.att;
        let nk = self.nk();
        let figures = crate::analysis::stats::matrix_alignment(self.matrix, nk);
        t.say_as(
            Paint::Dim,
            &format!(
                "alignment: share on the argmax source {} {:.2} · normalised entropy {:.2}",
                units_word(att, false),
                figures.argmax_share,
                figures.entropy_norm
            ),
        )?;
        if fits {
            let opts = TerminalOptions {
                top: 0,
                ..self.opts.clone()
            };
            View {
                att,
                layer: self.layer,
                matrix: self.matrix,
                opts: &opts,
                names: self.names,
                text: self.text,
                band_note: self.band_note,
                bands: self.bands,
                sinks: self.sinks,
            }
            .full(index_w, label_w, t)?;
        } else {
            // A speech encoder's units are audio frames labelled by their time (`0.00s`).
            let keys = &self.names.keys;
            let frames = keys.iter().all(|l| {
                l.strip_suffix('s')
                    .is_some_and(|t| t.parse::<f64>().is_ok())
            });
            let what = match (frames, keys.first(), keys.last()) {
                (true, Some(a), Some(b)) => format!("audio frames ({a}–{b})"),
                _ => format!("source {}", units_word(att, true)),
            };
            self.wrap(
                &format!(
                    "{nk} {what}: too many to draw here; the alignment only (the PNG and HTML \
                     views draw it)"
                ),
                Paint::Dim,
                t,
            )?;
            self.unit_notes(false, t)?;
        }
        self.alignment(t)
    }

    /// For each target unit, its `top` source units (at least one), strongest first.
    fn alignment(&self, t: &mut Term) -> io::Result<()> {
        let att = self.att;
        let (nq, nk) = (self.nq(), self.nk());
        let top = self.opts.top.clamp(1, nk.max(1));
        let index_w = digits(nq.saturating_sub(1));
        let label_w = self
            .names
            .queries
            .iter()
            .map(|l| escape_controls(l).width().min(LABEL_MAX))
            .max()
            .unwrap_or(0);
        // The source labels of each entry share one width, so the weights line up.
        let key_w = self
            .names
            .keys
            .iter()
            .map(|l| escape_controls(l).width().min(LABEL_MAX))
            .max()
            .unwrap_or(0);
        let kw = digits(self.names.knum.iter().copied().max().unwrap_or(0));
        let entry_w = kw + 1 + key_w + 1 + 5 + 2;
        let room = self.opts.width.saturating_sub(index_w + 1 + label_w + 3);
        let top = top.min((room / entry_w).max(1));
        t.blank()?;
        t.say_as(
            Paint::Bold,
            &format!(
                "Alignment: each target {} → the source {} it attends to most (top {top})",
                units_word(att, false),
                units_word(att, top > 1)
            ),
        )?;
        t.say_as(
            Paint::Dim,
            "a row is a decoder position: it reads its token and predicts the next",
        )?;
        let generated = att.first_generated();
        for q in 0..nq {
            if Some(q) == generated {
                t.say_as(Paint::Dim, &format!("{}┄ generated", " ".repeat(index_w)))?;
            }
            let row: Vec<(usize, f32)> = self.row(q).iter().copied().enumerate().collect();
            let max = row.iter().map(|&(_, v)| v).fold(0.0, f32::max);
            let mut line = Line::from(
                format!(
                    "{:>index_w$} {} → ",
                    self.names.qnum[q],
                    pad(&fit(self.query_label(q), label_w), label_w)
                )
                .as_str(),
            );
            for (i, (k, v)) in top_k(&row, top).into_iter().enumerate() {
                if i > 0 {
                    line.push("  ");
                }
                let label = pad(&fit(self.key_label(k), key_w), key_w);
                line.push(&format!("{:>kw$} {label} ", self.names.knum[k]));
                // The weight on its colour, scaled to the row's strongest.
                let bg = viridis(if max > 0.0 { v / max } else { 0.0 });
                let fg = if bg.0 as u32 + bg.1 as u32 + bg.2 as u32 > 380 {
                    Rgb(0, 0, 0)
                } else {
                    Rgb(255, 255, 255)
                };
                line.paint(Paint::On { fg, bg }, &weight(v));
            }
            t.line(&line)?;
        }
        Ok(())
    }

    fn summary(&self, t: &mut Term) -> io::Result<()> {
        let att = self.att;
        let (nq, nk) = (self.nq(), self.nk());
        let width = self.opts.width.max(40);
        let units = units_word(att, true);
        let unit = units_word(att, false);
        let count = if att.is_square() {
            format!("{nq} {units} are")
        } else {
            format!("{nq} × {nk} {units} are")
        };
        t.say_as(
            Paint::Dim,
            &format!("{count} too many to draw one cell each, so this is a summary."),
        )?;
        t.say_as(
            Paint::Dim,
            &format!("The JSON, HTML and PNG views show every {unit}."),
        )?;
        if let Some(sinks) = self.sinks.filter(|s| !s.is_empty()) {
            let mean = sinks.iter().sum::<f32>() / sinks.len() as f32;
            let (lo, hi) = sinks
                .iter()
                .fold((f32::INFINITY, 0f32), |(lo, hi), &v| (lo.min(v), hi.max(v)));
            t.say_as(
                Paint::Dim,
                &format!(
                    "Learned attention sink: its share of a row is {} on average ({} to {}); \
                     the rows' cells sum to 1 less it.",
                    weight(mean),
                    weight(lo),
                    weight(hi)
                ),
            )?;
        }
        // Heatmap over blocks: cell (I, J) is the share of attention that queries in block I give
        // to keys in block J (mean over the block's queries of the sum over its keys).
        let label_w = 22;
        let max_blocks = ((width - label_w - 2) / 2).clamp(4, 32);
        let qsize = nq.div_ceil(max_blocks).max(1);
        let ksize = nk.div_ceil(max_blocks).max(1);
        let (qblocks, kblocks) = (nq.div_ceil(qsize), nk.div_ceil(ksize));
        let mut grid = vec![0f32; qblocks * kblocks];
        for q in 0..nq {
            for (k, &v) in self.row(q).iter().enumerate() {
                grid[(q / qsize) * kblocks + k / ksize] += v;
            }
        }
        for bi in 0..qblocks {
            let rows = (nq - bi * qsize).min(qsize) as f32;
            for v in &mut grid[bi * kblocks..(bi + 1) * kblocks] {
                *v /= rows;
            }
        }
        let max = grid.iter().copied().fold(0.0, f32::max);
        t.blank()?;
        let blocks_of = if qsize == ksize {
            format!("{qsize} {units}")
        } else {
            format!("{qsize} query and {ksize} key {units}")
        };
        t.say_as(
            Paint::Bold,
            &format!("Attention between blocks of {blocks_of} (row block → column block):"),
        )?;
        self.legend(max, t)?;
        self.unit_notes(false, t)?;
        let blocks: Vec<usize> = (0..kblocks).collect();
        for line in index_header(&blocks, label_w + 2, &[]) {
            t.say_as(Paint::Dim, &line)?;
        }
        let generated = att.first_generated().filter(|&g| g > 0);
        for bi in 0..qblocks {
            let start = bi * qsize;
            let end = (start + qsize).min(nq);
            // Where the model's own tokens begin: a dotted rule before the block that holds the
            // first of them.
            if let Some(g) = generated.filter(|g| (start..end).contains(g)) {
                let within = if g == start {
                    String::new()
                } else {
                    format!(", {} into block {bi}", g - start)
                };
                t.say_as(
                    Paint::Dim,
                    &format!(
                        "{} generated from {unit} {} on{within}",
                        "┄".repeat(label_w),
                        self.names.qnum[g]
                    ),
                )?;
            }
            let words: Vec<&str> = att.queries().shown(self.opts.raw_tokens)[start..end]
                .iter()
                .map(String::as_str)
                .collect();
            let label = format!("{:>2} {}", bi % 100, fit(&words.join(" "), label_w - 3));
            let mut line = Line::from(format!("{}  ", pad(&label, label_w)).as_str());
            for bj in 0..kblocks {
                // A block every query of which could see none of its keys is masked.
                let masked = (start..end).all(|q| {
                    (bj * ksize..((bj + 1) * ksize).min(nk))
                        .all(|k| att.is_masked_in(self.layer, q, k))
                });
                if masked {
                    line.push(MASKED);
                } else {
                    self.cell(grid[bi * kblocks + bj], max, &mut line);
                }
            }
            t.line(line.trim_end())?;
        }
        t.say_as(
            Paint::Dim,
            &if self.bands.is_empty() {
                format!(
                    "block b covers {units} b×{qsize} to b×{qsize}+{}",
                    qsize - 1
                )
            } else {
                format!(
                    "block b covers rows b×{qsize} to b×{qsize}+{} (a picture's band is one row)",
                    qsize - 1
                )
            },
        )?;

        // strongest individual links between ordinary tokens: in long inputs nearly every query
        // puts its largest weight on a special token (a "no-op" sink), which says nothing
        // likewise the attention sink of a causal model, the first token
        let (queries, keys) = (att.queries(), att.keys());
        let has_special =
            (0..nq).any(|q| queries.is_special(q)) || (0..nk).any(|k| keys.is_special(k));
        let sink = att.sink();
        let mut links: Vec<(usize, usize, f32)> = (0..nq)
            .filter(|&q| !queries.is_special(q) && Some(q) != sink)
            .flat_map(|q| {
                self.row(q)
                    .iter()
                    .enumerate()
                    .filter(move |&(k, _)| {
                        !keys.is_special(k)
                            && Some(k) != sink
                            && !att.is_masked_in(self.layer, q, k)
                    })
                    .map(move |(k, &v)| (q, k, v))
            })
            .collect();
        let count = 12.min(links.len());
        if count > 0 {
            let order = |a: &(usize, usize, f32), b: &(usize, usize, f32)| {
                b.2.total_cmp(&a.2).then(a.0.cmp(&b.0)).then(a.1.cmp(&b.1))
            };
            links.select_nth_unstable_by(count - 1, order);
            links.truncate(count);
            links.sort_by(order);
        }
        t.blank()?;
        let left_out = match (has_special, sink.is_some()) {
            (true, true) => Some(format!("{} and the sink left out", att.special_names())),
            (true, false) => Some(format!("{} left out", att.special_names())),
            (false, true) => Some("the sink left out".to_string()),
            (false, false) => None,
        };
        let heading = match left_out {
            Some(what) => {
                format!("Strongest links between ordinary {units} (query → key; {what}):")
            }
            None => "Strongest links (query → key):".to_string(),
        };
        self.wrap(&heading, Paint::Bold, t)?;
        let iw = digits(self.names.widest());
        for (q, k, v) in links {
            t.say(&format!(
                "  {:>iw$} {} → {:>iw$} {}  {}",
                self.names.qnum[q],
                pad(&fit(self.query_label(q), 14), 14),
                self.names.knum[k],
                pad(&fit(self.key_label(k), 14), 14),
                weight(v)
            ))?;
        }

        // tokens that receive the most attention overall
        let mut received = vec![0f32; nk];
        for q in 0..nq {
            for (r, &v) in received.iter_mut().zip(self.row(q)) {
                *r += v;
            }
        }
        t.blank()?;
        t.say_as(
            Paint::Bold,
            &format!("Most attended {units} (mean share of every {unit}'s attention):"),
        )?;
        let mut line = String::from(" ");
        let received: Vec<(usize, f32)> = received.into_iter().enumerate().collect();
        for (k, total) in top_k(&received, 10) {
            let entry = format!(
                " {}:{} {}",
                self.names.knum[k],
                fit(self.key_label(k), 14),
                weight(total / nq as f32)
            );
            if line.width() + entry.width() + 1 > width {
                t.say(&line)?;
                line = String::from(" ");
            }
            line.push_str(&entry);
        }
        t.say(&line)?;
        Ok(())
    }
}

/// The columns before which the full view draws a divider, with its glyph: sentence B's first
/// key (solid) and the first generated key (dotted).
fn column_dividers(att: &Attention) -> Vec<(usize, &'static str)> {
    let mut cols = Vec::new();
    if let Some(b) = att.keys().segment_b_start() {
        cols.push((b, "│"));
    }
    for a in att.keys().reaction_arrows() {
        if !cols.iter().any(|&(c, _)| c == a) {
            cols.push((a, "│"));
        }
    }
    if let Some(g) = att.keys().first_generated() {
        if !cols.iter().any(|&(c, _)| c == g) {
            cols.push((g, "┊"));
        }
    }
    cols.sort_unstable();
    cols
}

/// "tokens" or "words" (one: "token", "word") for the units of `att`.
fn units_word(att: &Attention, plural: bool) -> &'static str {
    match (att.level, plural) {
        (crate::attention::Level::Token, true) => "tokens",
        (crate::attention::Level::Token, false) => "token",
        (crate::attention::Level::Word, true) => "words",
        (crate::attention::Level::Word, false) => "word",
    }
}

/// Column indices over two-column cells: one line of units, preceded by a line of tens when
/// there are more than ten columns. Each index in `dividers` gets a one-column gap before it.
fn index_header(numbers: &[usize], gutter: usize, dividers: &[usize]) -> Vec<String> {
    let line = |place: usize| {
        let mut s = " ".repeat(gutter);
        for (k, &n) in numbers.iter().enumerate() {
            if dividers.contains(&k) {
                s.push(' ');
            }
            s.push(' ');
            // Higher places only where a run of numbers starts a ten, or starts again after a
            // gap (a picture's band stands for many tokens).
            let starts = n.is_multiple_of(10) || k == 0 || numbers[k - 1] + 1 != n;
            let shown = place == 0 || (n >= 10usize.pow(place as u32) && starts);
            s.push(if shown {
                char::from(b'0' + (n / 10usize.pow(place as u32) % 10) as u8)
            } else {
                ' '
            });
        }
        s.trim_end().to_string()
    };
    let widest = numbers.iter().copied().max().unwrap_or(0);
    (0..digits(widest)).rev().map(line).collect()
}

/// The `k` largest of `(index, value)` entries, largest first; ties keep index order.
fn top_k(entries: &[(usize, f32)], k: usize) -> Vec<(usize, f32)> {
    let mut idx = entries.to_vec();
    idx.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    idx.truncate(k);
    idx
}

/// A weight with three decimals (tiny ones in exponent form), short enough for tables.
fn weight(v: f32) -> String {
    if v >= 0.0005 || v == 0.0 {
        format!("{v:.3}")
    } else {
        format!("{v:.0e}")
    }
}

fn digits(n: usize) -> usize {
    n.max(1).ilog10() as usize + 1
}

/// `s` cut to at most `max` terminal columns, with `…` when cut. Control characters and
/// bidirectional formatting characters are shown as escapes ([`escape_controls`]), so a token
/// can never move the cursor, start an escape sequence or reorder the line around it.
fn fit(s: &str, max: usize) -> String {
    let clean = escape_controls(s);
    if clean.width() <= max {
        return clean.into_owned();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in clean.chars() {
        let cw = c.width().unwrap_or(0);
        if used + cw + 1 > max {
            break;
        }
        out.push(c);
        used += cw;
    }
    out.push('…');
    out
}

/// `text` broken at spaces into lines of at most `width` terminal columns (a word wider than
/// that keeps a line of its own; [`fit`] cuts labels, this never drops text).
fn wrap_words(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        if !line.is_empty() && line.width() + 1 + word.width() > width {
            lines.push(std::mem::take(&mut line));
        } else if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    lines.push(line);
    lines
}

/// `s` padded with spaces to `width` terminal columns.
fn pad(s: &str, width: usize) -> String {
    let w = s.width();
    format!("{s}{}", " ".repeat(width.saturating_sub(w)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::fixtures::{sink_causal, synthetic};

    fn render(att: &Attention, head: HeadSel, opts: &TerminalOptions) -> String {
        let mut out = Vec::new();
        write_view(att, Selection::new(0, head), opts, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn shares_are_captioned_as_shares_of_the_row() {
        let mut att = synthetic(&["[CLS]", "a", "b", "[SEP]"], 1, 2);
        let caption = |att: &Attention| {
            render(att, HeadSel::Index(0), &TerminalOptions::default()).contains("share of the row")
        };
        assert!(!caption(&att));
        att.holds = crate::attention::Holds::ValueWeighted;
        assert!(caption(&att));
    }

    #[test]
    fn short_sentence_fits_80_columns_in_plain_text() {
        let tokens = [
            "[CLS]", "the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog", ".",
            "[SEP]",
        ];
        let att = synthetic(&tokens, 2, 4);
        let out = render(&att, HeadSel::Index(1), &TerminalOptions::default());
        assert!(!out.contains('\x1b'), "plain text has no escapes");
        for line in out.lines() {
            assert!(line.width() <= 80, "too wide ({}): {line}", line.width());
        }
        // synthetic head 1 of layer 0: query q peaks on key (q+1)%n
        let fox_line = out
            .lines()
            .find(|l| l.trim_start().starts_with("4 fox ") && l.contains('→'))
            .unwrap();
        assert!(fox_line.contains("jumps"), "{fox_line}");
        assert!(out.contains("layer 0") && out.contains("head 1"));
    }

    #[test]
    fn colour_uses_truecolor_escapes() {
        let att = synthetic(&["[CLS]", "a", "b", "[SEP]"], 1, 1);
        let opts = TerminalOptions {
            color: true,
            ..TerminalOptions::default()
        };
        let out = render(&att, HeadSel::Mean, &opts);
        assert!(out.contains("\x1b[48;2;"));
        // the brightest cell is viridis' top colour
        assert!(out.contains("\x1b[48;2;253;231;37m"));
        // Every row of the heatmap draws a coloured cell for each of its 4 keys.
        for q in 0..4 {
            let row = out
                .lines()
                .find(|l| l.starts_with(&format!("{q} ")) && !l.contains('→'))
                .unwrap_or_else(|| panic!("row {q} in {out:?}"));
            assert_eq!(row.matches("\x1b[48;2;").count(), 4, "{row:?}");
        }
    }

    #[test]
    fn long_input_gets_a_summary() {
        let tokens: Vec<String> = (0..300).map(|i| format!("t{i}")).collect();
        let refs: Vec<&str> = tokens.iter().map(String::as_str).collect();
        let att = synthetic(&refs, 1, 1);
        let out = render(&att, HeadSel::Index(0), &TerminalOptions::default());
        assert!(out.contains("summary"));
        assert!(out.lines().count() < 80, "{} lines", out.lines().count());
        for line in out.lines() {
            assert!(line.width() <= 80, "too wide ({}): {line}", line.width());
        }
        // head 0 of layer 0 puts 0.7 on the diagonal: those are the strongest links, ties in order
        assert!(out.contains("  0 t0             →   0 t0 "), "{out}");
        assert!(out.contains(" 11 t11            →  11 t11 "), "{out}");
    }

    #[test]
    fn strongest_links_leave_out_special_tokens() {
        // 300 tokens framed by [CLS] and [SEP]; every query puts 0.6 on [CLS], 0.3 on [SEP] and
        // 0.1 on the token after it: the list must show those 0.1 links, not "→ [CLS]".
        let n = 300;
        let tokens: Vec<String> = (0..n)
            .map(|i| match i {
                0 => "[CLS]".to_string(),
                i if i == n - 1 => "[SEP]".to_string(),
                i => format!("t{i}"),
            })
            .collect();
        let refs: Vec<&str> = tokens.iter().map(String::as_str).collect();
        let base = synthetic(&refs, 1, 1);
        let mut weights = vec![0f32; n * n];
        for q in 0..n {
            weights[q * n] += 0.6;
            weights[q * n + n - 1] += 0.3;
            weights[q * n + (q + 1) % n] += 0.1;
        }
        let att = Attention::new(
            base.model.clone(),
            base.text.clone(),
            None,
            base.queries().clone(),
            weights,
        )
        .unwrap();
        let out = render(&att, HeadSel::Index(0), &TerminalOptions::default());
        let links: Vec<&str> = out
            .lines()
            .skip_while(|l| !l.starts_with("Strongest links"))
            .skip(1)
            .take_while(|l| !l.is_empty())
            .collect();
        assert!(
            out.contains(
                "Strongest links between ordinary tokens (query → key; [CLS]/[SEP] left out)"
            ),
            "{out}"
        );
        assert_eq!(links.len(), 12, "{links:?}");
        for l in &links {
            assert!(!l.contains("[CLS]") && !l.contains("[SEP]"), "{l}");
            assert!(!l.starts_with("Strongest"), "{l}");
            assert!(l.ends_with("0.100"), "{l}");
        }
        // the first: query 1 (t1) → key 2 (t2)
        assert!(
            links[0].contains("1 t1") && links[0].contains("2 t2"),
            "{}",
            links[0]
        );
    }

    #[test]
    fn labels_are_cut_and_sanitised() {
        assert_eq!(fit("abc", 5), "abc");
        assert_eq!(fit("abcdefgh", 5), "abcd…");
        assert_eq!(fit("東京東京", 5), "東京…");
        assert_eq!(fit("a\x1b[2Jb", 20), "a<U+001B>[2Jb");
        // Bidirectional controls could reorder the rest of the line: shown as escapes too.
        for c in [
            '\u{202A}', '\u{202E}', '\u{2066}', '\u{2069}', '\u{200E}', '\u{200F}', '\u{061C}',
        ] {
            let shown = fit(&format!("x{c}y"), 20);
            assert_eq!(shown, format!("x<U+{:04X}>y", c as u32));
            assert!(!shown.chars().any(is_bidi_control));
        }
        // Ordinary right-to-left text is left alone.
        assert_eq!(fit("שלום", 20), "שלום");
    }

    #[test]
    fn masked_cells_are_blank_and_never_listed() {
        use crate::attention::MaskKind;
        // A causal head: each query spreads over the keys up to itself.
        let tokens = ["<s>", "ĠThe", "Ġcat", "Ġsat"];
        let n = tokens.len();
        let base = synthetic(&tokens, 1, 1);
        let mut weights = vec![0f32; n * n];
        for q in 0..n {
            for k in 0..=q {
                weights[q * n + k] = 1.0 / (q + 1) as f32;
            }
        }
        let att = Attention::new(
            base.model.clone(),
            base.text.clone(),
            None,
            base.queries().clone(),
            weights,
        )
        .unwrap()
        .with_mask(MaskKind::Causal);
        let out = render(&att, HeadSel::Index(0), &TerminalOptions::default());
        assert!(
            out.contains("blank cells are keys after the query"),
            "{out}"
        );
        let row0 = out.lines().find(|l| l.starts_with("0 <s>")).unwrap();
        // Query 0 sees key 0 only: one shaded cell, then three blank ones (two columns each).
        assert!(row0.ends_with("██"), "{row0:?}");
        let row1 = out
            .lines()
            .find(|l| l.starts_with("1 ĠThe") && !l.contains('→'))
            .unwrap();
        assert!(
            !row1.contains(" ·"),
            "a masked cell is not a zero weight: {row1:?}"
        );
        let top = out
            .lines()
            .find(|l| l.starts_with("0 <s>") && l.contains('→'))
            .unwrap();
        assert!(!top.contains("ĠThe"), "a masked key is never listed: {top}");
    }

    #[test]
    fn roberta_style_input_reads_like_bert() {
        let tokens = ["<s>", "ĠThe", "Ġqu", "ick", "Ġfox", "</s>"];
        let att = synthetic(&tokens, 1, 2);
        let out = render(&att, HeadSel::Mean, &TerminalOptions::default());
        assert!(
            out.contains("mean of 2 heads") && out.contains("6 tokens"),
            "{out}"
        );
        let words = crate::analysis::to_words(&att);
        let out = render(&words, HeadSel::Mean, &TerminalOptions::default());
        assert!(out.contains("5 words"), "{out}");
        assert!(out.lines().any(|l| l.starts_with("2 quick")), "{out}");
        let plain = crate::analysis::without_special(&att).unwrap();
        let out = render(&plain, HeadSel::Mean, &TerminalOptions::default());
        assert!(out.contains("special tokens hidden"), "{out}");
        assert!(!out.contains("<s>"), "{out}");
    }

    #[test]
    fn a_single_unit_is_counted_in_the_singular() {
        let att = synthetic(&["<s>", "Ġfox", "</s>"], 1, 1);
        let plain = crate::analysis::without_special(&att).unwrap();
        let out = render(&plain, HeadSel::Mean, &TerminalOptions::default());
        assert!(out.contains("· 1 token ·"), "{out}");
        assert!(out.contains("Most attended (top 1):"), "{out}");
    }

    #[test]
    fn causal_view_names_kv_head_sink_and_generated_tokens() {
        let tokens = ["ĠThe", "Ġcat", "Ġsat", "Ġon", "Ġthe", "Ġmat", "."];
        let att = sink_causal(&tokens, 6, 2, 5);
        let out = render(&att, HeadSel::Index(4), &TerminalOptions::default());
        for line in out.lines() {
            assert!(line.width() <= 80, "too wide ({}): {line}", line.width());
        }
        assert!(
            out.contains("head 4 (kv head 1)") && out.contains("· causal"),
            "{out}"
        );
        assert!(
            out.contains("grouped-query attention: heads 3, 4, 5 read key/value head 1"),
            "{out}"
        );
        assert!(out.contains("sink: 0 ĠThe: the first token"), "{out}");
        assert!(
            out.contains("generated by the model: tokens 5–6 (after the ┄ lines)"),
            "{out}"
        );
        // The dotted rule sits between rows 4 and 5, and every row has the dotted column
        // divider before key 5 (row 6 sees it, row 4 ends before it).
        let lines: Vec<&str> = out.lines().collect();
        let rule = lines
            .iter()
            .position(|l| l.trim_start().starts_with('┄'))
            .unwrap();
        assert!(lines[rule - 1].starts_with("4 Ġthe") && lines[rule + 1].starts_with("5 Ġmat"));
        assert!(lines[rule].contains('┼'));
        let row6 = lines
            .iter()
            .find(|l| l.starts_with("6 .") && !l.contains('→'))
            .unwrap();
        assert_eq!(row6.matches('┊').count(), 1, "{row6}");
        // The top-3 list marks the generated rows too.
        let top = lines
            .iter()
            .position(|l| l.starts_with("Most attended"))
            .unwrap();
        let list_rule = top
            + lines[top..]
                .iter()
                .position(|l| l.ends_with("┄ generated"))
                .unwrap();
        assert!(
            lines[list_rule - 1].starts_with("4 Ġthe")
                && lines[list_rule + 1].starts_with("5 Ġmat")
        );
        let mean = render(&att, HeadSel::Mean, &TerminalOptions::default());
        assert!(mean.contains("mean of 6 heads (2 kv heads)"), "{mean}");
        // Without grouped-query attention or generation, none of it.
        let plain = sink_causal(&tokens, 2, 2, tokens.len());
        let out = render(&plain, HeadSel::Index(1), &TerminalOptions::default());
        assert!(!out.contains("kv head") && !out.contains("generated") && !out.contains('┊'));
    }

    #[test]
    fn summary_of_a_long_causal_input_leaves_the_sink_out_of_the_strongest_links() {
        let tokens: Vec<String> = (0..200).map(|i| format!("Ġt{i}")).collect();
        let refs: Vec<&str> = tokens.iter().map(String::as_str).collect();
        let att = sink_causal(&refs, 2, 1, 190);
        let out = render(&att, HeadSel::Index(0), &TerminalOptions::default());
        assert!(out.contains("summary"), "{out}");
        assert!(
            out.contains(
                "Strongest links between ordinary tokens (query → key; the sink left out)"
            ),
            "{out}"
        );
        let links: Vec<&str> = out
            .lines()
            .skip_while(|l| !l.starts_with("Strongest links"))
            .skip(1)
            .take_while(|l| !l.is_empty())
            .collect();
        assert_eq!(links.len(), 12, "{links:?}");
        for l in &links {
            assert!(!l.contains(" 0 Ġt0 "), "the sink is never listed: {l}");
        }
        assert!(
            out.contains("generated by the model: tokens 190–199\n"),
            "{out}"
        );
        for line in out.lines() {
            assert!(line.width() <= 80, "too wide ({}): {line}", line.width());
        }
    }

    fn cross_of(source: &[&str], target: &[&str]) -> Attention {
        let set =
            crate::attention::fixtures::encoder_decoder(source, target, 1, 2, 2, target.len());
        set.cross().unwrap().clone()
    }

    #[test]
    fn cross_attention_is_an_alignment_of_target_to_source_tokens() {
        let att = cross_of(
            &["<s>", "Ġthe", "Ġcat", "Ġsat", ".", "</s>"],
            &["</s>", "Ġdie", "ĠKatze", "Ġsaß"],
        );
        let out = render(&att, HeadSel::Index(0), &TerminalOptions::default());
        assert!(out.starts_with("synthetic · cross · layer 0"), "{out}");
        assert!(
            out.contains("rows: target · decoder (attending from) · columns: source"),
            "{out}"
        );
        assert!(out.contains("4 × 6 tokens"), "{out}");
        // peaked(): row q of head 0, layer 0 puts 0.7 on source unit q.
        assert!(
            out.contains("alignment: share on the argmax source token 0.70"),
            "{out}"
        );
        let line = |label: &str| {
            out.lines()
                .rev()
                .find(|l| l.contains(label) && l.contains('→'))
                .unwrap_or_else(|| panic!("no alignment line for {label}: {out}"))
                .to_string()
        };
        let katze = line("ĠKatze");
        let after = katze.split('→').nth(1).unwrap();
        assert!(after.trim_start().starts_with("2 Ġcat"), "{katze}");
        assert!(after.contains("0.700"), "{katze}");
        for l in out.lines() {
            assert!(l.width() <= 80, "too wide ({}): {l}", l.width());
        }
    }

    #[test]
    fn a_long_source_is_listed_not_drawn_and_a_long_target_keeps_a_line_each() {
        let long: Vec<String> = (0..70).map(|i| format!("Ġw{i}")).collect();
        let mut source: Vec<&str> = vec!["<s>"];
        source.extend(long.iter().map(String::as_str));
        source.push("</s>");
        let att = cross_of(&source, &["</s>", "Ġkurz"]);
        let out = render(&att, HeadSel::Mean, &TerminalOptions::default());
        assert!(out.contains("the alignment only"), "{out}");
        assert!(!out.contains("summary"), "{out}");
        // The note that the matrix is left out, 81 columns as one line, wraps.
        for l in out.lines() {
            assert!(l.width() <= 80, "too wide ({}): {l}", l.width());
        }
        let aligned = |out: &str| {
            out.lines()
                .filter(|l| {
                    l.contains(" → ") && l.trim_start().starts_with(|c: char| c.is_ascii_digit())
                })
                .count()
        };
        assert_eq!(aligned(&out), 2, "{out}");
        // The reverse: a long target over a short source, drawn, one alignment line per row.
        let mut target: Vec<&str> = vec!["</s>"];
        target.extend(long[..40].iter().map(String::as_str));
        let att = cross_of(&["<s>", "Ġhi", "</s>"], &target);
        let out = render(&att, HeadSel::Index(1), &TerminalOptions::default());
        assert!(!out.contains("the alignment only"), "{out}");
        assert_eq!(aligned(&out), 41, "{out}");
        for l in out.lines() {
            assert!(l.width() <= 80, "too wide ({}): {l}", l.width());
        }
    }

    #[test]
    fn the_column_header_numbers_each_column_and_restarts_after_a_gap() {
        // Tokens 0–1, a band standing for tokens 2–9 (numbered 2), then tokens 10–11.
        assert_eq!(
            index_header(&[0, 1, 2, 10, 11], 2, &[]),
            ["         1", "   0 1 2 0 1"]
        );
        // A gap past a hundred shows every place where the run starts again.
        assert_eq!(
            index_header(&[8, 9, 600, 601], 0, &[]),
            ["     6", "     0", " 8 9 0 1"]
        );
        assert_eq!(index_header(&[0, 1, 2], 1, &[]), ["  0 1 2"]);
    }

    #[test]
    fn notes_wrap_at_spaces_to_the_width() {
        let text =
            "Strongest links between ordinary tokens (query → key; <pad> and the sink left out):";
        assert!(text.width() > 80);
        let lines = wrap_words(text, 80);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines.iter().all(|l| l.width() <= 80 && !l.starts_with(' ')));
        assert_eq!(lines.join(" "), text);
        // A word wider than the line keeps a line of its own; nothing is dropped.
        assert_eq!(wrap_words("a bbbbbb c", 4), ["a", "bbbbbb", "c"]);
        assert_eq!(wrap_words("short", 80), ["short"]);
    }
}
