//! Pieces every figure shares: sizes, the token axis, titles, the colour bar, the A/B divider.

use super::font;
use super::scale::Scale;
use super::scene::{frame, Align, Cells, Hatch, Item, Rect, Text};
use super::theme::{Palette, Rgb};
use crate::colormap::Ramp;

/// Outer margin, pixels.
pub(crate) const MARGIN: i32 = 20;
/// Font sizes (plotters' unit: line height in pixels).
pub(crate) const TITLE_SIZE: f64 = 22.0;
pub(crate) const SUBTITLE_SIZE: f64 = 16.0;
pub(crate) const AXIS_TITLE_SIZE: f64 = 17.0;
pub(crate) const LABEL_SIZE: f64 = 15.5;
pub(crate) const SMALL_SIZE: f64 = 14.0;
/// Token labels at [`LABEL_SIZE`] get at least this many pixels each along an axis; denser axes
/// are thinned.
pub(crate) const LABEL_PITCH: u32 = 16;
/// The same for labels at [`SMALL_SIZE`].
pub(crate) const SMALL_PITCH: u32 = 14;
/// Longest token label, in characters, before it is cut with `…`.
pub(crate) const LABEL_CHARS: usize = 18;
/// Gap between a heatmap's edge and its labels.
pub(crate) const LABEL_GAP: i32 = 6;
/// Width of the colour bar.
const BAR_WIDTH: i32 = 18;
/// Shortest colour bar.
pub(crate) const MIN_BAR_HEIGHT: i32 = 180;

/// The tokens along one axis of a heatmap, as the figure labels them.
#[derive(Clone, Debug)]
pub(crate) struct Axis {
    /// Label of each unit (its display text, or its raw label).
    pub labels: Vec<String>,
    /// [`Axis::labels`] with the position of each label that repeats (`C₇`), for axes that
    /// label every unit.
    pub named: Vec<String>,
    /// Special tokens get muted labels.
    pub special: Vec<bool>,
    /// First unit of sentence B.
    pub b_start: Option<usize>,
    /// Reaction arrows (`>>` in reaction SMILES): a divider before each, as before sentence B.
    pub arrows: Vec<usize>,
    /// Units the model generated get labels in the palette's generated colour.
    pub generated: Vec<bool>,
    /// First generated unit, where a dashed line divides prompt and generation.
    pub gen_start: Option<usize>,
}

impl Axis {
    pub(crate) fn len(&self) -> usize {
        self.labels.len()
    }
}

/// The two axes of a heatmap and their titles: rows (the queries, attending from) and columns
/// (the keys, attended to); the same units for self-attention, the decoder's (target) and the
/// encoder's (source) units for cross-attention.
#[derive(Clone, Debug)]
pub(crate) struct Sides {
    pub rows: Axis,
    pub cols: Axis,
    /// Title of the row axis (read upwards at the left).
    pub row_title: String,
    /// Title of the column axis (under the columns).
    pub col_title: String,
    /// Rows and columns are different units (cross-attention).
    pub cross: bool,
}

impl Sides {
    /// Self-attention: one axis along both sides, titled by `side` (`""`, `"source "`,
    /// `"target "`).
    pub(crate) fn square(axis: Axis, side: &str) -> Sides {
        let cap = |s: &str| {
            let mut c = s.chars();
            c.next()
                .map(|f| f.to_uppercase().chain(c).collect::<String>())
                .unwrap_or_default()
        };
        Sides {
            rows: axis.clone(),
            cols: axis,
            row_title: cap(&format!("{side}{QUERY_TITLE_TAIL}")),
            col_title: cap(&format!("{side}{KEY_TITLE_TAIL}")),
            cross: false,
        }
    }

    /// Cross-attention: the decoder's (target) units along the rows, the encoder's (source)
    /// units along the columns.
    pub(crate) fn cross(rows: Axis, cols: Axis) -> Sides {
        Sides {
            rows,
            cols,
            row_title: "Target · decoder (attending from)".into(),
            col_title: "Source · encoder (attended to)".into(),
            cross: true,
        }
    }

    /// The titles, rows first.
    pub(crate) fn titles(&self) -> (&str, &str) {
        (&self.row_title, &self.col_title)
    }
}

/// The grids of an `nq × nk` heatmap: one cell size for both axes (square cells), chosen by
/// `grid_for` for the longer side; where that side is pooled into fewer cells than units, each
/// axis is gridded on its own by `grid_for`.
pub(crate) fn grids(nq: usize, nk: usize, grid_for: impl Fn(usize) -> Grid) -> (Grid, Grid) {
    let g = grid_for(nq.max(nk));
    if nq == nk {
        return (g, g);
    }
    if g.m == g.n {
        let pitch = g.stride as u32 * g.cell;
        let axis = |n: usize| Grid {
            n,
            m: n,
            cell: g.cell,
            stride: pitch.div_ceil(g.cell).max(1) as usize,
            split: None,
        };
        (axis(nq), axis(nk))
    } else {
        (grid_for(nq), grid_for(nk))
    }
}

/// How an `n`-unit axis maps onto pixels: `m` display cells of `cell` pixels each, and which of
/// them carry a label (every `stride`-th).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Grid {
    pub n: usize,
    pub m: usize,
    pub cell: u32,
    pub stride: usize,
    /// `(u, p)`: units `0..u` fill cells `0..p` and units `u..n` cells `p..m`, each part evenly
    /// ([`Grid::segmented`]); `None`: all units evenly over all cells.
    pub split: Option<(usize, usize)>,
}

impl Grid {
    /// An axis of `n` units shown as `m` display cells of `cell` pixels (`m == n`: one cell per
    /// unit), labelled no denser than one label per `pitch` pixels.
    pub(crate) fn new(n: usize, m: usize, cell: u32, pitch: u32) -> Self {
        let stride = pitch.div_ceil(cell).max(1) as usize;
        Grid {
            n,
            m,
            cell,
            stride,
            split: None,
        }
    }

    /// An axis of `n` units over `side` one-pixel cells, the units before `at` (sentence A, a
    /// prompt) and from `at` on (sentence B, what was generated) each on their share of the
    /// pixels but never fewer than `min` of them: a three-token sentence B after 300 tokens of A
    /// keeps a strip a reader can see and point at, rather than a line that reads as a frame.
    /// `None` when `at` splits nothing or `side` has no room for two strips of `min`.
    pub(crate) fn segmented(
        n: usize,
        side: usize,
        at: usize,
        min: usize,
        pitch: u32,
    ) -> Option<Self> {
        if at == 0 || at >= n || side < 2 * min {
            return None;
        }
        let first = (side * at / n).clamp(min, side - min);
        Some(Grid {
            split: Some((at, first)),
            ..Grid::new(n, side, 1, pitch)
        })
    }

    /// The units display cell `p` covers (at least one).
    pub(crate) fn span(&self, p: usize) -> std::ops::Range<usize> {
        let a = self.unit_of(p);
        let b = if p + 1 >= self.m {
            self.n
        } else {
            self.unit_of(p + 1)
        };
        a..b.max(a + 1).min(self.n)
    }

    /// Side in pixels.
    pub(crate) fn side(&self) -> u32 {
        self.m as u32 * self.cell
    }

    /// Whether not every unit has its own cell or label.
    pub(crate) fn thinned(&self) -> bool {
        self.stride > 1 || self.m < self.n
    }

    /// First unit covered by display cell `p`.
    pub(crate) fn unit_of(&self, p: usize) -> usize {
        match self.split {
            Some((u, q)) if p >= q => u + (p - q) * (self.n - u) / (self.m - q),
            Some((u, q)) => p * u / q,
            None => p * self.n / self.m,
        }
    }

    /// Pixel offset of the boundary before unit `u` (for the A/B divider).
    pub(crate) fn offset_of(&self, u: usize) -> i32 {
        // the first display cell whose block starts at or after u
        let p = match self.split {
            Some((s, q)) if u >= s => q + ((u - s) * (self.m - q)).div_ceil(self.n - s),
            Some((s, q)) => (u * q).div_ceil(s),
            None => (u * self.m).div_ceil(self.n),
        };
        (p as u32 * self.cell) as i32
    }

    /// The labelled display cells: `(cell index, unit index)`.
    pub(crate) fn labelled(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        (0..self.m)
            .step_by(self.stride)
            .map(move |p| (p, self.unit_of(p)))
    }
}

/// Label text of unit `u`: the token, prefixed by its index when the axis is thinned (a reader
/// cannot count to token 300), else followed by its index where its label repeats (`C₇`).
pub(crate) fn label_text(axis: &Axis, grid: &Grid, u: usize) -> String {
    if grid.thinned() {
        format!("{u} {}", font::label(&axis.labels[u], LABEL_CHARS))
    } else {
        font::label(&axis.named[u], LABEL_CHARS + 3)
    }
}

/// Width of the widest label a grid shows.
pub(crate) fn label_extent(axis: &Axis, grid: &Grid, size: f64) -> i32 {
    grid.labelled()
        .map(|(_, u)| font::width(&font::drawable(&label_text(axis, grid, u)), size, false) as i32)
        .max()
        .unwrap_or(0)
}

/// Token labels along the left edge (`rows`) or below the bottom edge (columns, rotated) of a
/// heatmap whose top-left corner is `(x, y)` and whose height is `height`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn token_labels(
    axis: &Axis,
    grid: &Grid,
    x: i32,
    y: i32,
    rows: bool,
    size: f64,
    pal: &Palette,
    height: i32,
) -> Vec<Item> {
    let side = height;
    grid.labelled()
        .map(|(p, u)| {
            let centre = (p as u32 * grid.cell + grid.cell / 2) as i32;
            let color = if axis.generated.get(u).copied().unwrap_or(false) {
                pal.generated
            } else if axis.special[u] {
                pal.muted
            } else {
                pal.text
            };
            let text = label_text(axis, grid, u);
            let t = if rows {
                Text {
                    x: x - LABEL_GAP,
                    y: y + centre,
                    text,
                    size,
                    bold: false,
                    color,
                    align: Align::End,
                    up: false,
                }
            } else {
                Text {
                    x: x + centre,
                    y: y + side + LABEL_GAP,
                    text,
                    size,
                    bold: false,
                    color,
                    align: Align::End,
                    up: true,
                }
            };
            Item::Text(t)
        })
        .collect()
}

/// A heatmap block: colour cells with a frame, at `(x, y)`. Cells `masked` marks (the query could
/// not see the key) are hatched, unlike any weight (0 included) in any colour map.
#[allow(clippy::too_many_arguments)]
pub(crate) fn heatmap(
    values: &[f32],
    masked: Option<&[bool]>,
    (grid, cols): (&Grid, &Grid),
    x: i32,
    y: i32,
    scale: &Scale,
    ramp: &Ramp,
    pal: &Palette,
) -> Vec<Item> {
    let colors = scale.colors(ramp, values);
    let hatch = masked.filter(|m| m.iter().any(|&b| b)).map(|m| Hatch {
        cells: m.to_vec(),
        background: pal.background,
        line: pal.hatch,
    });
    let mut items = vec![Item::Cells(Cells {
        x,
        y,
        rows: grid.m,
        cols: cols.m,
        cell_w: cols.cell,
        cell_h: grid.cell,
        colors,
        hatch,
    })];
    let (w, h) = (cols.side() as i32, grid.side() as i32);
    items.extend(frame(Rect::new(x, y, x + w, y + h), pal.frame));
    items
}

/// The segment A/B divider across a square heatmap at `(x, y)`: a white line with a black halo,
/// so it shows on every colour of every map, reaching `reach` pixels past the edges.
pub(crate) fn divider(
    grid: &Grid,
    b_start: usize,
    x: i32,
    y: i32,
    reach: i32,
    pal: &Palette,
) -> Vec<Item> {
    cross_lines(
        (grid, grid),
        (Some(b_start), Some(b_start)),
        (x, y),
        reach,
        None,
        pal,
    )
}

/// The solid dividers of a heatmap at `(x, y)`: before sentence B (square heatmaps) and before
/// each reaction arrow, on the rows of `rows` and the columns of `cols`, as [`divider`] draws.
pub(crate) fn dividers(
    (rows, cols): (&Grid, &Grid),
    (row_axis, col_axis): (&Axis, &Axis),
    square: bool,
    (x, y): (i32, i32),
    reach: i32,
    pal: &Palette,
) -> Vec<Item> {
    let mut items = Vec::new();
    if let Some(b) = col_axis.b_start.filter(|_| square) {
        items.extend(divider(cols, b, x, y, reach, pal));
    }
    for &a in &row_axis.arrows {
        items.extend(cross_lines(
            (rows, cols),
            (Some(a), None),
            (x, y),
            reach,
            None,
            pal,
        ));
    }
    for &a in &col_axis.arrows {
        items.extend(cross_lines(
            (rows, cols),
            (None, Some(a)),
            (x, y),
            reach,
            None,
            pal,
        ));
    }
    items
}

/// The dashed lines across a heatmap at `(x, y)` before the first generated row and column
/// (`None`: no line on that side): white dashes with a black halo, like the A/B divider but
/// broken, reaching `reach` pixels past the edges.
pub(crate) fn gen_divider(
    grids: (&Grid, &Grid),
    gen_start: (Option<usize>, Option<usize>),
    x: i32,
    y: i32,
    reach: i32,
    pal: &Palette,
) -> Vec<Item> {
    let dashes = if grids.0.side().min(grids.1.side()) >= 120 {
        (6, 4)
    } else {
        (3, 2)
    };
    cross_lines(grids, gen_start, (x, y), reach, Some(dashes), pal)
}

/// A horizontal line before row `at.0` and a vertical line before column `at.1` (either may be
/// absent) across the heatmap of `rows × cols` grids at `(x, y)`, white with a black halo, solid
/// or in `(dash, gap)` dashes, reaching `reach` pixels past the edges.
fn cross_lines(
    (rows, cols): (&Grid, &Grid),
    at: (Option<usize>, Option<usize>),
    (x, y): (i32, i32),
    reach: i32,
    dashes: Option<(i32, i32)>,
    pal: &Palette,
) -> Vec<Item> {
    let (w, h) = (cols.side() as i32, rows.side() as i32);
    let (halo, core) = if rows.cell.min(cols.cell) >= 6 {
        (2, 1)
    } else {
        (1, 0)
    };
    let mut items = Vec::new();
    // Halos first, then the white cores, so that where the lines cross both stay white.
    for (wd, color) in [(halo, pal.divider_halo), (core, pal.divider)] {
        // Along each line, from -reach to its length + reach, in dashes.
        let spans = |len: i32| {
            let (dash, gap) = dashes.unwrap_or((len + 2 * reach, 0));
            let mut out = Vec::new();
            let mut from = -reach;
            while from < len + reach {
                let to = (from + dash).min(len + reach);
                out.push((from, to));
                from = to + gap;
            }
            out
        };
        if let Some(c) = at.1 {
            let at = cols.offset_of(c);
            for (from, to) in spans(h) {
                items.push(Item::Fill(
                    Rect::new(x + at - wd, y + from, x + at + wd.max(1), y + to),
                    color,
                ));
            }
        }
        if let Some(r) = at.0 {
            let at = rows.offset_of(r);
            for (from, to) in spans(w) {
                items.push(Item::Fill(
                    Rect::new(x + from, y + at - wd, x + to, y + at + wd.max(1)),
                    color,
                ));
            }
        }
    }
    items
}

/// The key to hatched cells, at `(x, y)`: a hatched square and "masked". Returns the items and
/// the y below them.
pub(crate) fn mask_key(x: i32, y: i32, pal: &Palette) -> (Vec<Item>, i32) {
    let side = BAR_WIDTH;
    let mut items = vec![Item::Cells(Cells {
        x,
        y,
        rows: 1,
        cols: 1,
        cell_w: side as u32,
        cell_h: side as u32,
        colors: vec![pal.background],
        hatch: Some(Hatch {
            cells: vec![true],
            background: pal.background,
            line: pal.hatch,
        }),
    })];
    items.extend(frame(Rect::new(x, y, x + side, y + side), pal.frame));
    items.push(Item::Text(Text {
        x: x + side + 6,
        y: y + side / 2,
        text: "masked".into(),
        size: SMALL_SIZE,
        bold: false,
        color: pal.text,
        align: Align::Start,
        up: false,
    }));
    (items, y + side)
}

/// Width of the colour bar with its ticks and caption.
pub(crate) fn colorbar_width(scale: &Scale) -> i32 {
    let ticks = scale.ticks();
    let widest = ticks
        .iter()
        .map(|(_, s)| font::width(s, SMALL_SIZE, false) as i32)
        .max()
        .unwrap_or(0);
    BAR_WIDTH + 5 + 4 + widest + 10 + SMALL_SIZE as i32
}

/// A vertical colour bar at `(x, y)`, `height` pixels tall, with ticks and the caption `caption`.
pub(crate) fn colorbar(
    x: i32,
    y: i32,
    height: i32,
    scale: &Scale,
    ramp: &Ramp,
    caption: &str,
    pal: &Palette,
) -> Vec<Item> {
    let h = height.max(2) as usize;
    let colors: Vec<Rgb> = (0..h)
        .map(|i| ramp.at(1.0 - i as f32 / (h - 1) as f32))
        .collect();
    let mut items = vec![Item::Cells(Cells {
        x,
        y,
        rows: h,
        cols: 1,
        cell_w: BAR_WIDTH as u32,
        cell_h: 1,
        colors,
        hatch: None,
    })];
    items.extend(frame(
        Rect::new(x, y, x + BAR_WIDTH, y + h as i32),
        pal.frame,
    ));
    let mut widest = 0;
    for (v, label) in scale.ticks() {
        let ty = y + ((1.0 - scale.unit(v)) * (h - 1) as f32).round() as i32;
        items.push(Item::Fill(
            Rect::new(x + BAR_WIDTH, ty, x + BAR_WIDTH + 5, ty + 1),
            pal.frame,
        ));
        widest = widest.max(font::width(&label, SMALL_SIZE, false) as i32);
        items.push(Item::Text(Text {
            x: x + BAR_WIDTH + 9,
            y: ty,
            text: label,
            size: SMALL_SIZE,
            bold: false,
            color: pal.text,
            align: Align::Start,
            up: false,
        }));
    }
    items.push(Item::Text(Text {
        x: x + BAR_WIDTH + 9 + widest + 10 + SMALL_SIZE as i32 / 2,
        y: y + h as i32 / 2,
        text: caption.to_string(),
        size: SMALL_SIZE,
        bold: false,
        color: pal.muted,
        align: Align::Middle,
        up: true,
    }));
    items
}

/// The query axis title after a side's name (`Query (attending from)`, `Source query
/// (attending from)`).
const QUERY_TITLE_TAIL: &str = crate::QUERY_AXIS;
/// The key title after a side's name.
const KEY_TITLE_TAIL: &str = crate::KEY_AXIS;

/// The row axis title, shortened until it fits along rows `span` pixels tall: the whole title
/// (`Target · decoder (attending from)`), without its parenthesis (`Target · decoder`), its first
/// part (`Target`). Returns the title and its length in pixels.
fn row_title_within(title: &str, span: i32) -> (String, i32) {
    let short = title.split(" (").next().unwrap_or(title);
    let shortest = short.split(" · ").next().unwrap_or(short);
    let mut last = (String::new(), 0);
    for candidate in [title, short, shortest] {
        let len = font::width(candidate, AXIS_TITLE_SIZE, false) as i32;
        last = (candidate.to_string(), len);
        if len + 4 <= span {
            break;
        }
    }
    last
}

/// The axis titles of a heatmap (or grid of them) whose rows span `rows` and columns `cols`:
/// the query title reads upwards at `x`, centred on the rows, shortened to fit along them (see
/// [`row_title_within`]; where even the shortest is longer than the rows, it starts at the top
/// row and runs on beside the column labels below, never up into the title block); the key title
/// sits centred under the columns at `below`, never left of `min_x`. Returns the items and the
/// lowest y they reach.
#[allow(clippy::too_many_arguments)]
pub(crate) fn axis_titles(
    x: i32,
    rows: (i32, i32),
    cols: (i32, i32),
    below: i32,
    min_x: i32,
    pal: &Palette,
    (q_title, k_title): (&str, &str),
) -> (Vec<Item>, i32) {
    let (q_title, q_len) = row_title_within(q_title, rows.1 - rows.0);
    let span = (rows.1 - rows.0).max(q_len + 4);
    let half = AXIS_TITLE_SIZE as i32 / 2;
    let items = vec![
        Item::Text(Text {
            x: x + half,
            y: rows.0 + span / 2,
            text: q_title,
            size: AXIS_TITLE_SIZE,
            bold: false,
            color: pal.text,
            align: Align::Middle,
            up: true,
        }),
        Item::Text(Text {
            x: key_title_centre(cols, min_x, k_title),
            y: below + half,
            text: k_title.into(),
            size: AXIS_TITLE_SIZE,
            bold: false,
            color: pal.text,
            align: Align::Middle,
            up: false,
        }),
    ];
    (items, (below + 2 * half).max(rows.0 + span))
}

/// Where the key axis title is centred: under the columns, but never starting left of `min_x`.
fn key_title_centre(cols: (i32, i32), min_x: i32, title: &str) -> i32 {
    let k_len = font::width(title, AXIS_TITLE_SIZE, false) as i32;
    ((cols.0 + cols.1) / 2).max(min_x + k_len / 2 + 2)
}

/// The right end of the key axis title (see [`axis_titles`]).
pub(crate) fn key_title_right(cols: (i32, i32), min_x: i32, title: &str) -> i32 {
    let k_len = font::width(title, AXIS_TITLE_SIZE, false) as i32;
    key_title_centre(cols, min_x, title) + k_len - k_len / 2
}

/// `text` cut with `…` so that it is at most `max_width` pixels wide at `size`.
pub(crate) fn fit(text: &str, size: f64, bold: bool, max_width: i32) -> String {
    let fits = |s: &str| fits(s, size, bold, max_width);
    if fits(text) {
        return text.to_string();
    }
    let chars: Vec<char> = text.chars().collect();
    let (mut lo, mut hi) = (0, chars.len());
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        let s: String = chars[..mid].iter().collect::<String>() + "…";
        if fits(&s) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    chars[..lo]
        .iter()
        .collect::<String>()
        .trim_end()
        .to_string()
        + "…"
}

/// What separates the two quotes of a subtitle (`A: “…”  ·  B: “…”`).
pub(crate) const SUBTITLE_PARTS: &str = "  ·  ";

/// Most lines the quoted input may take under the title; a longer quote ends in `…` (the figure
/// is not the place to read a 400-character input; the notes below it are never cut).
pub(crate) const SUBTITLE_LINES: usize = 4;

/// The title, the quoted input (wrapped, at most [`SUBTITLE_LINES`]) and the notes on what the
/// figure shows (wrapped, in full) at the top left; returns the items and the y below them.
pub(crate) fn title_block(
    title: &str,
    style: &super::Style,
    width: i32,
    pal: &Palette,
) -> (Vec<Item>, i32) {
    let max = width - 2 * MARGIN;
    let mut y = MARGIN + (TITLE_SIZE / 2.0) as i32;
    let mut items = vec![Item::Text(Text {
        x: MARGIN,
        y,
        text: fit(title, TITLE_SIZE, true, max),
        size: TITLE_SIZE,
        bold: true,
        color: pal.text,
        align: Align::Start,
        up: false,
    })];
    y += (TITLE_SIZE / 2.0) as i32 + 8;
    let line_h = SUBTITLE_SIZE as i32 + 4;
    // At most `most` lines of `text`, the last cut with `…` when there were more.
    let wrap_at_most = |text: &str, most: usize| {
        let mut lines = wrap(text, SUBTITLE_SIZE, false, max);
        if lines.len() > most {
            lines.truncate(most);
            let last = lines.pop().unwrap_or_default();
            lines.push(fit(&format!("{last} …"), SUBTITLE_SIZE, false, max));
        }
        lines
    };
    // Two quotes (a pair's sentences, an encoder–decoder's target and source) that do not fit on
    // one line start a line each and share the lines, so that a long one cannot push the other
    // out; unless that takes more lines than running them on.
    let run_on = wrap(&style.subtitle, SUBTITLE_SIZE, false, max).len();
    let parts: Vec<&str> = style.subtitle.split(SUBTITLE_PARTS).collect();
    let share = (SUBTITLE_LINES / parts.len()).max(1);
    let apart: Vec<String> = parts
        .iter()
        .flat_map(|part| wrap_at_most(part, share))
        .collect();
    let mut lines = if run_on > 1 && parts.len() > 1 && apart.len() <= run_on.min(SUBTITLE_LINES) {
        apart
    } else {
        wrap_at_most(&style.subtitle, SUBTITLE_LINES)
    };
    lines.extend(wrap(&style.notes, SUBTITLE_SIZE, false, max));
    for line in lines {
        items.push(Item::Text(Text {
            x: MARGIN,
            y: y + line_h / 2,
            text: line,
            size: SUBTITLE_SIZE,
            bold: false,
            color: pal.muted,
            align: Align::Start,
            up: false,
        }));
        y += line_h;
    }
    (items, y + 12)
}

/// Width the title needs to show in full.
pub(crate) fn title_width(title: &str) -> i32 {
    font::width(&font::drawable(title), TITLE_SIZE, true) as i32 + 2 * MARGIN
}

/// Whether `text` fits in `max_width` pixels at `size`.
fn fits(text: &str, size: f64, bold: bool, max_width: i32) -> bool {
    font::width(&font::drawable(text), size, bold) as i32 <= max_width
}

/// `text` broken into lines of at most `max_width` pixels at `size`: between words where it can,
/// inside a word only when the word alone is too wide (a long token, or a script written without
/// spaces such as Chinese). Nothing is dropped; empty text gives no lines.
pub(crate) fn wrap(text: &str, size: f64, bold: bool, max_width: i32) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let joined = if line.is_empty() {
            word.to_string()
        } else {
            format!("{line} {word}")
        };
        if fits(&joined, size, bold, max_width) {
            line = joined;
            continue;
        }
        if !line.is_empty() {
            lines.push(std::mem::take(&mut line));
        }
        // the word alone: as many characters per line as fit (at least one)
        let mut rest: Vec<char> = word.chars().collect();
        loop {
            let (mut lo, mut hi) = (1, rest.len());
            while lo < hi {
                let mid = (lo + hi).div_ceil(2);
                if fits(
                    &rest[..mid].iter().collect::<String>(),
                    size,
                    bold,
                    max_width,
                ) {
                    lo = mid;
                } else {
                    hi = mid - 1;
                }
            }
            let head: String = rest.drain(..lo).collect();
            if rest.is_empty() {
                line = head;
                break;
            }
            lines.push(head);
        }
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// A note in small muted text, wrapped to the canvas `width`, its first line's top at `top`.
/// Returns the items and the y below the last line.
pub(crate) fn notes(text: &str, top: i32, width: i32, pal: &Palette) -> (Vec<Item>, i32) {
    let max = width - 2 * MARGIN;
    let line_h = SMALL_SIZE as i32 + 4;
    let items = wrap(text, SMALL_SIZE, false, max)
        .into_iter()
        .enumerate()
        .map(|(i, line)| {
            Item::Text(Text {
                x: MARGIN,
                y: top + line_h / 2 + i as i32 * line_h,
                text: line,
                size: SMALL_SIZE,
                bold: false,
                color: pal.muted,
                align: Align::Start,
                up: false,
            })
        })
        .collect::<Vec<_>>();
    let bottom = top + items.len() as i32 * line_h;
    (items, bottom)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_maps_units_to_pixels() {
        let g = Grid::new(12, 12, 32, 16);
        assert_eq!((g.side(), g.stride, g.thinned()), (384, 1, false));
        assert_eq!(g.offset_of(5), 160);
        let g = Grid::new(512, 512, 4, 16);
        assert_eq!((g.side(), g.stride, g.thinned()), (2048, 4, true));
        assert_eq!(g.labelled().nth(2), Some((8, 8)));
        // 3000 units pooled into 1500 cells of 1 px: cell p starts at unit 2p
        let g = Grid::new(3000, 1500, 1, 16);
        assert_eq!(g.unit_of(10), 20);
        assert_eq!(g.offset_of(21), 11);
    }

    #[test]
    fn a_short_segment_keeps_a_strip_of_its_own() {
        // 300 tokens of A, 3 of B over 112 pixels: evenly, B would get 1 pixel; it gets 11.
        let g = Grid::segmented(303, 112, 300, 11, 14).unwrap();
        assert_eq!(g.offset_of(300), 101);
        assert_eq!(
            (g.span(100), g.span(101), g.span(111)),
            (297..300, 300..301, 302..303)
        );
        // every unit is under some cell, in order
        let covered: Vec<usize> = (0..g.m).flat_map(|p| g.span(p)).collect();
        assert!(covered.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!((covered[0], *covered.last().unwrap()), (0, 302));
        for u in 0..303 {
            assert!(covered.contains(&u), "unit {u}");
        }
        assert!(Grid::segmented(10, 112, 0, 11, 14).is_none());
        assert!(Grid::segmented(10, 20, 5, 11, 14).is_none());
    }

    #[test]
    fn fit_cuts_to_width() {
        let long = "word ".repeat(100);
        let cut = fit(&long, 14.0, false, 200);
        assert!(cut.ends_with('…'));
        assert!(font::width(&cut, 14.0, false) <= 200);
        assert!(font::width(&cut, 14.0, false) > 150, "{cut}");
        assert_eq!(fit("short", 14.0, false, 200), "short");
    }

    #[test]
    fn notes_wrap_to_the_canvas() {
        let pal = Palette::of(crate::image::Theme::Light);
        let text = "attention ".repeat(60);
        let (items, bottom) = notes(text.trim(), 100, 600, &pal);
        assert!(items.len() >= 4, "{} lines", items.len());
        assert_eq!(bottom, 100 + items.len() as i32 * (SMALL_SIZE as i32 + 4));
        for item in &items {
            let Item::Text(t) = item else { panic!() };
            assert!(font::width(&t.text, SMALL_SIZE, false) as i32 <= 600 - 2 * MARGIN);
        }
        let words: usize = items
            .iter()
            .map(|i| match i {
                Item::Text(t) => t.text.split(' ').count(),
                _ => 0,
            })
            .sum();
        assert_eq!(words, 60, "no word lost");
    }
}
