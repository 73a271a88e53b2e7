//! PNG and SVG figures of a [`Comparison`]: the layers × heads heatmap of Jensen–Shannon
//! distances with the farthest heads listed beside it; one head's A, B and A − B side by side;
//! and a layer's heads of A − B in a grid. A and B share one sequential colour scale; A − B is
//! drawn on a diverging one centred at 0 (red where A attends more, blue where B does), each
//! with its colour bar. A and B are each drawn with their own mask, A − B over the cells both
//! can attend; the cells a panel leaves out (a causal mask, a sliding window) are hatched.

use std::io::Write;
use std::path::Path;

use crate::colormap::{Ramp, Rgb};
use crate::image::font;
use crate::image::scene::{frame, Align, Cells, Hatch, Item, Rect, Scene, Text};
use crate::image::theme::Palette;
use crate::image::{paint, ImageError, ImageOptions, SvgError, MAX_PNG_PIXELS};
use crate::output::write_output;
use crate::scale_number;
use attnviz_analysis::compare::Comparison;

use super::{diverging, CompareFigure};

pub(crate) const MARGIN: i32 = 20;
pub(crate) const TITLE: f64 = 20.0;
pub(crate) const SUB: f64 = 14.5;
pub(crate) const LABEL: f64 = 13.0;
pub(crate) const SMALL: f64 = 12.0;
const LABEL_CHARS: usize = 16;
const BAR_W: i32 = 14;
pub(crate) const GAP: i32 = 28;

/// The most cells along one side of a matrix panel (pixels per side at most ~ 420).
const PANEL: i32 = 420;

/// Lay out `figure` of `c`.
fn build(c: &Comparison, figure: CompareFigure, opts: &ImageOptions) -> Result<Scene, ImageError> {
    if c.n_queries() == 0 || c.n_keys() == 0 {
        return Err(ImageError::Empty);
    }
    let pal = Palette::of(opts.theme);
    Ok(match figure {
        CompareFigure::Distance => distance_scene(c, opts, &pal),
        CompareFigure::Head { layer, head } => {
            check(c, layer, Some(head))?;
            head_scene(c, layer, head, opts, &pal)
        }
        CompareFigure::Layer { layer } => {
            check(c, layer, None)?;
            layer_scene(c, layer, opts, &pal)
        }
    })
}

fn check(c: &Comparison, layer: usize, head: Option<usize>) -> Result<(), ImageError> {
    use crate::attention::SelectionError;
    if layer >= c.layers {
        return Err(SelectionError::Layer {
            layer,
            layers: c.layers,
        }
        .into());
    }
    match head {
        Some(head) if head >= c.heads => Err(SelectionError::Head {
            head,
            heads: c.heads,
        }
        .into()),
        _ => Ok(()),
    }
}

/// Render `figure` of `c` as PNG bytes.
pub fn render_png(
    c: &Comparison,
    figure: CompareFigure,
    opts: &ImageOptions,
) -> Result<Vec<u8>, ImageError> {
    let scene = build(c, figure, opts)?;
    let factor = opts.scale_factor;
    if !(crate::image::MIN_SCALE_FACTOR..=crate::image::MAX_SCALE_FACTOR).contains(&factor) {
        return Err(ImageError::ScaleFactor(factor));
    }
    let (w, h) = paint::scaled_size(&scene, factor);
    if w as u64 * h as u64 > MAX_PNG_PIXELS {
        return Err(ImageError::TooManyPixels { factor, w, h });
    }
    Ok(paint::png(&scene, factor)?)
}

/// Render `figure` of `c` as an SVG document.
pub fn render_svg(
    c: &Comparison,
    figure: CompareFigure,
    opts: &ImageOptions,
) -> Result<String, ImageError> {
    paint::svg(&build(c, figure, opts)?).map_err(|e| match e {
        SvgError::Draw(e) => ImageError::Draw(e),
        SvgError::Font(e) => ImageError::Font(e),
    })
}

/// Write `figure` of `c` as a PNG file at `path` (atomically; `-` writes to stdout).
pub fn write_png(
    c: &Comparison,
    figure: CompareFigure,
    opts: &ImageOptions,
    path: &Path,
) -> Result<(), ImageError> {
    let bytes = render_png(c, figure, opts)?;
    write_output(path, |w: &mut dyn Write| w.write_all(&bytes))?;
    Ok(())
}

/// Write `figure` of `c` as an SVG file at `path` (atomically; `-` writes to stdout).
pub fn write_svg(
    c: &Comparison,
    figure: CompareFigure,
    opts: &ImageOptions,
    path: &Path,
) -> Result<(), ImageError> {
    let svg = render_svg(c, figure, opts)?;
    write_output(path, |w: &mut dyn Write| w.write_all(svg.as_bytes()))?;
    Ok(())
}

pub(crate) fn text(
    x: i32,
    y: i32,
    s: impl Into<String>,
    size: f64,
    color: Rgb,
    align: Align,
) -> Item {
    Item::Text(Text {
        x,
        y,
        text: s.into(),
        size,
        bold: false,
        color,
        align,
        up: false,
    })
}

pub(crate) fn width(s: &str, size: f64) -> i32 {
    font::width(&font::drawable(s), size, false) as i32
}

/// The title and the two quoted inputs; returns the items and the y below them.
fn header(c: &Comparison, title: &str, pal: &Palette) -> (Vec<Item>, i32) {
    let mut items = vec![Item::Text(Text {
        x: MARGIN,
        y: MARGIN + 10,
        text: title.to_string(),
        size: TITLE,
        bold: true,
        color: pal.text,
        align: Align::Start,
        up: false,
    })];
    let mut y = MARGIN + 36;
    for line in super::side_lines(c) {
        items.push(text(
            MARGIN,
            y,
            font::label(&line, 110),
            SUB,
            pal.muted,
            Align::Start,
        ));
        y += SUB as i32 + 5;
    }
    (items, y + 8)
}

/// Cell size and label stride for `n` units in at most `side` pixels.
pub(crate) fn cells_for(n: usize, side: i32) -> (i32, usize) {
    let cell = (side / n.max(1) as i32).clamp(2, 28);
    let stride = (13 / cell).max(1) as usize;
    (cell, if cell >= 13 { 1 } else { stride + 1 })
}

/// A heatmap of `colors` (`rows × cols`) at `(x, y)` with a frame; `hatched` cells hatched.
#[allow(clippy::too_many_arguments)]
pub(crate) fn block(
    x: i32,
    y: i32,
    rows: usize,
    cols: usize,
    cell: i32,
    colors: Vec<Rgb>,
    hatched: Option<Vec<bool>>,
    pal: &Palette,
) -> Vec<Item> {
    let hatch = hatched.filter(|h| h.iter().any(|&b| b)).map(|cells| Hatch {
        cells,
        background: pal.background,
        line: pal.hatch,
    });
    let mut items = vec![Item::Cells(Cells {
        x,
        y,
        rows,
        cols,
        cell_w: cell as u32,
        cell_h: cell as u32,
        colors,
        hatch,
    })];
    let (w, h) = (cols as i32 * cell, rows as i32 * cell);
    items.extend(frame(Rect::new(x, y, x + w, y + h), pal.frame));
    items
}

/// Row labels left of `x` and column labels (reading upwards) below `y_bottom`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn labels(
    rows: &[String],
    cols: &[String],
    x: i32,
    y: i32,
    cell: i32,
    stride: usize,
    (left, n_rows): (bool, usize),
    pal: &Palette,
) -> Vec<Item> {
    let mut items = Vec::new();
    if left {
        for (i, l) in rows.iter().enumerate().step_by(stride) {
            items.push(text(
                x - 5,
                y + i as i32 * cell + cell / 2,
                font::label(l, LABEL_CHARS),
                LABEL,
                pal.text,
                Align::End,
            ));
        }
    }
    let bottom = y + n_rows as i32 * cell;
    for (i, l) in cols.iter().enumerate().step_by(stride) {
        items.push(Item::Text(Text {
            x: x + i as i32 * cell + cell / 2,
            y: bottom + 5,
            text: font::label(l, LABEL_CHARS),
            size: LABEL,
            bold: false,
            color: pal.text,
            align: Align::End,
            up: true,
        }));
    }
    items
}

pub(crate) fn label_extent(labels: &[String]) -> i32 {
    labels
        .iter()
        .map(|l| width(&font::label(l, LABEL_CHARS), LABEL))
        .max()
        .unwrap_or(0)
}

/// A vertical colour bar at `(x, y)`, `h` tall, from `lo` to `hi`, with ticks and a caption;
/// returns the items and its width.
#[allow(clippy::too_many_arguments)]
pub(crate) fn colorbar(
    x: i32,
    y: i32,
    h: i32,
    (lo, hi): (f32, f32),
    color: &dyn Fn(f32) -> Rgb,
    ticks: &[f32],
    caption: &str,
    pal: &Palette,
) -> (Vec<Item>, i32) {
    let h = h.max(60);
    let colors: Vec<Rgb> = (0..h)
        .map(|i| color(hi - (hi - lo) * i as f32 / (h - 1) as f32))
        .collect();
    let mut items = vec![Item::Cells(Cells {
        x,
        y,
        rows: h as usize,
        cols: 1,
        cell_w: BAR_W as u32,
        cell_h: 1,
        colors,
        hatch: None,
    })];
    items.extend(frame(Rect::new(x, y, x + BAR_W, y + h), pal.frame));
    let mut widest = 0;
    for &t in ticks {
        let ty = y + ((hi - t) / (hi - lo) * (h - 1) as f32).round() as i32;
        items.push(Item::Fill(
            Rect::new(x + BAR_W, ty, x + BAR_W + 4, ty + 1),
            pal.frame,
        ));
        let s = scale_number(t);
        widest = widest.max(width(&s, SMALL));
        items.push(text(x + BAR_W + 7, ty, s, SMALL, pal.text, Align::Start));
    }
    let cx = x + BAR_W + 7 + widest + 8 + SMALL as i32 / 2;
    items.push(Item::Text(Text {
        x: cx,
        y: y + h / 2,
        text: caption.to_string(),
        size: SMALL,
        bold: false,
        color: pal.muted,
        align: Align::Middle,
        up: true,
    }));
    (items, cx + SMALL as i32 - x)
}

pub(crate) fn scene(items: Vec<Item>, title: String, pal: &Palette) -> Scene {
    // The figure's size: everything drawn, plus the margin.
    let (mut w, mut h) = (0, 0);
    for it in &items {
        let (x1, y1) = match it {
            Item::Cells(c) => (c.x + c.width() as i32, c.y + c.height() as i32),
            Item::Fill(r, _) => (r.x1, r.y1),
            Item::Text(t) => {
                let len = width(&t.text, t.size);
                if t.up {
                    (
                        t.x + t.size as i32,
                        t.y + if t.align == Align::End { len } else { len / 2 },
                    )
                } else {
                    let start = match t.align {
                        Align::Start => t.x,
                        Align::Middle => t.x - len / 2,
                        Align::End => t.x - len,
                    };
                    (start + len, t.y + t.size as i32 / 2)
                }
            }
        };
        w = w.max(x1);
        h = h.max(y1);
    }
    Scene {
        width: (w + MARGIN) as u32,
        height: (h + MARGIN) as u32,
        background: pal.background,
        title,
        items,
    }
}

/// Three ticks for a sequential bar from 0 to `max`.
fn seq_ticks(max: f32) -> Vec<f32> {
    vec![0.0, max / 2.0, max]
}

/// Five ticks for a diverging bar from −`m` to `m`.
pub(crate) fn div_ticks(m: f32) -> Vec<f32> {
    vec![-m, -m / 2.0, 0.0, m / 2.0, m]
}

fn distance_scene(c: &Comparison, opts: &ImageOptions, pal: &Palette) -> Scene {
    let title = "Jensen–Shannon distance per head, A vs B";
    let (mut items, top) = header(c, title, pal);
    let ramp = Ramp::new(opts.colormap, opts.theme);
    let max = c.max_distance().max(1e-6) as f32;
    let cell = (PANEL / c.layers.max(c.heads) as i32).clamp(12, 40);
    let rows: Vec<String> = (0..c.layers)
        .map(|l| format!("layer {}", c.layer_name(l)))
        .collect();
    let cols: Vec<String> = (0..c.heads).map(|h| h.to_string()).collect();
    let x = MARGIN + label_extent(&rows) + 8;
    let mut colors = Vec::with_capacity(c.layers * c.heads);
    let mut none = Vec::with_capacity(c.layers * c.heads);
    for l in 0..c.layers {
        for h in 0..c.heads {
            let d = c.distance(l, h);
            colors.push(ramp.at(d.unwrap_or(0.0) as f32 / max));
            none.push(d.is_none());
        }
    }
    items.extend(block(
        x,
        top,
        c.layers,
        c.heads,
        cell,
        colors,
        Some(none),
        pal,
    ));
    let stride = if cell >= 13 { 1 } else { 2 };
    items.extend(labels(
        &rows,
        &cols,
        x,
        top,
        cell,
        stride,
        (true, c.layers),
        pal,
    ));
    let bottom = top + c.layers as i32 * cell;
    items.push(text(
        x + c.heads as i32 * cell / 2,
        bottom + label_extent(&cols) + 20,
        "head",
        LABEL,
        pal.muted,
        Align::Middle,
    ));
    let bx = x + c.heads as i32 * cell + GAP;
    let (bar, bw) = colorbar(
        bx,
        top,
        c.layers as i32 * cell,
        (0.0, max),
        &|v| ramp.at(v / max),
        &seq_ticks(max),
        "JS distance (0 same, 1 disjoint)",
        pal,
    );
    items.extend(bar);
    // The ranking beside it.
    let lx = bx + bw + GAP;
    items.push(Item::Text(Text {
        x: lx,
        y: top + 6,
        text: "Farthest apart".into(),
        size: LABEL,
        bold: true,
        color: pal.text,
        align: Align::Start,
        up: false,
    }));
    for (i, hd) in c.ranked().iter().take(12).enumerate() {
        items.push(text(
            lx,
            top + 26 + i as i32 * 18,
            format!(
                "{:>2}. layer {} head {}   {:.3}",
                i + 1,
                c.layer_name(hd.layer),
                hd.head,
                hd.distance
            ),
            LABEL,
            pal.text,
            Align::Start,
        ));
    }
    let mut y = (bottom + label_extent(&cols) + 40).max(top + 26 + 12 * 18);
    for line in super::note_lines(c, opts.raw_tokens, false) {
        items.push(text(
            MARGIN,
            y,
            font::label(&line, 120),
            SUB,
            pal.muted,
            Align::Start,
        ));
        y += SUB as i32 + 5;
    }
    scene(items, title.to_string(), pal)
}

fn head_scene(
    c: &Comparison,
    layer: usize,
    head: usize,
    opts: &ImageOptions,
    pal: &Palette,
) -> Scene {
    let title = format!(
        "Layer {} head {}: A, B and A − B{}",
        c.layer_name(layer),
        head,
        c.distance(layer, head)
            .map(|d| format!("  ·  JS distance {d:.3}"))
            .unwrap_or_default()
    );
    let (mut items, top) = header(c, &title, pal);
    let (nq, nk) = (c.n_queries(), c.n_keys());
    let rows = c.query_labels(opts.raw_tokens);
    let cols = c.key_labels(opts.raw_tokens);
    let (cell, stride) = cells_for(nq.max(nk), 300);
    let ramp = Ramp::new(opts.colormap, opts.theme);
    let (a, b, d) = (
        c.a_head(layer, head),
        c.b_head(layer, head),
        c.diff(layer, head),
    );
    // Each side with its own mask; A − B over the cells both can attend.
    let (va, vb) = (c.a_visible_layer(layer), c.b_visible_layer(layer));
    let hidden = |vis: &[bool]| -> Vec<bool> { vis.iter().map(|v| !v).collect() };
    let max = a
        .iter()
        .chain(b)
        .zip(va.iter().chain(vb))
        .filter(|(_, &v)| v)
        .fold(0f32, |m, (&w, _)| m.max(w))
        .max(1e-6);
    let dmax = d.iter().fold(0f32, |m, &v| m.max(v.abs())).max(1e-6);
    let x0 = MARGIN + label_extent(&rows) + 8;
    let panel_w = nk as i32 * cell;
    let col_labels = label_extent(&cols);
    let mut x = x0;
    for (name, values, vis) in [("A", a, va), ("B", b, vb)] {
        items.push(text(
            x + panel_w / 2,
            top,
            name,
            LABEL,
            pal.text,
            Align::Middle,
        ));
        let colors = values.iter().map(|&v| ramp.at(v / max)).collect();
        items.extend(block(
            x,
            top + 14,
            nq,
            nk,
            cell,
            colors,
            Some(hidden(vis)),
            pal,
        ));
        items.extend(labels(
            &rows,
            &cols,
            x,
            top + 14,
            cell,
            stride,
            (x == x0, nq),
            pal,
        ));
        x += panel_w + 16;
    }
    let h = nq as i32 * cell;
    let (bar, bw) = colorbar(
        x,
        top + 14,
        h,
        (0.0, max),
        &|v| ramp.at(v / max),
        &seq_ticks(max),
        crate::WEIGHT_CAPTION,
        pal,
    );
    items.extend(bar);
    x += bw + GAP + x0 - MARGIN;
    items.push(text(
        x + panel_w / 2,
        top,
        "A − B",
        LABEL,
        pal.text,
        Align::Middle,
    ));
    let colors = d.iter().map(|&v| diverging(v / dmax)).collect();
    items.extend(block(
        x,
        top + 14,
        nq,
        nk,
        cell,
        colors,
        Some(hidden(c.visible_layer(layer))),
        pal,
    ));
    items.extend(labels(
        &rows,
        &cols,
        x,
        top + 14,
        cell,
        stride,
        (true, nq),
        pal,
    ));
    x += panel_w + 16;
    let (bar, _) = colorbar(
        x,
        top + 14,
        h,
        (-dmax, dmax),
        &|v| diverging(v / dmax),
        &div_ticks(dmax),
        "A − B (red: A more, blue: B more)",
        pal,
    );
    items.extend(bar);
    let mut y = top + 14 + h + col_labels + 24;
    items.push(text(
        MARGIN,
        y,
        "Rows: query (attending from) · columns: key (attended to)",
        SMALL,
        pal.muted,
        Align::Start,
    ));
    y += SUB as i32 + 6;
    for line in super::note_lines(c, opts.raw_tokens, true) {
        items.push(text(
            MARGIN,
            y,
            font::label(&line, 120),
            SUB,
            pal.muted,
            Align::Start,
        ));
        y += SUB as i32 + 5;
    }
    scene(items, title, pal)
}

fn layer_scene(c: &Comparison, layer: usize, opts: &ImageOptions, pal: &Palette) -> Scene {
    let title = format!("Layer {}: A − B for every head", c.layer_name(layer));
    let (mut items, top) = header(c, &title, pal);
    let (nq, nk) = (c.n_queries(), c.n_keys());
    let per_row = (c.heads as f64).sqrt().ceil() as usize;
    let grid_rows = c.heads.div_ceil(per_row);
    let (cell, _) = cells_for(nq.max(nk), 150);
    let diffs: Vec<Vec<f32>> = (0..c.heads).map(|h| c.diff(layer, h)).collect();
    let dmax = diffs
        .iter()
        .flatten()
        .fold(0f32, |m, &v| m.max(v.abs()))
        .max(1e-6);
    let hidden: Vec<bool> = c.visible_layer(layer).iter().map(|v| !v).collect();
    let (pw, ph) = (nk as i32 * cell, nq as i32 * cell);
    let (rows, cols) = (
        c.query_labels(opts.raw_tokens),
        c.key_labels(opts.raw_tokens),
    );
    let stride = if cell >= 13 {
        1
    } else {
        (13 / cell.max(1)) as usize + 1
    };
    let left = MARGIN + label_extent(&rows) + 8;
    let below = label_extent(&cols) + 10;
    for (h, d) in diffs.iter().enumerate() {
        let (gx, gy) = ((h % per_row) as i32, (h / per_row) as i32);
        let x = left + gx * (pw + 24);
        let y = top + gy * (ph + 34);
        // Row labels on the first column, column labels under the last panel of each column.
        let last = h + per_row >= c.heads;
        let none: [String; 0] = [];
        items.extend(labels(
            if gx == 0 { &rows } else { &none },
            if last { &cols } else { &none },
            x,
            y + 18,
            cell,
            stride,
            (gx == 0, nq),
            pal,
        ));
        let caption = match c.distance(layer, h) {
            Some(js) => format!("head {h} · JS {js:.3}"),
            None => format!("head {h}"),
        };
        items.push(text(x, y + 8, caption, SMALL, pal.text, Align::Start));
        let colors = d.iter().map(|&v| diverging(v / dmax)).collect();
        items.extend(block(
            x,
            y + 18,
            nq,
            nk,
            cell,
            colors,
            Some(hidden.clone()),
            pal,
        ));
    }
    let bx = left + per_row as i32 * (pw + 24) + 8;
    let gh = grid_rows as i32 * (ph + 34) - 16 + below;
    let (bar, _) = colorbar(
        bx,
        top + 18,
        gh.min(360),
        (-dmax, dmax),
        &|v| diverging(v / dmax),
        &div_ticks(dmax),
        "A − B (red: A more, blue: B more)",
        pal,
    );
    items.extend(bar);
    let mut y = top + gh + 40;
    for line in super::note_lines(c, opts.raw_tokens, false) {
        items.push(text(
            MARGIN,
            y,
            font::label(&line, 120),
            SUB,
            pal.muted,
            Align::Start,
        ));
        y += SUB as i32 + 5;
    }
    scene(items, title, pal)
}
