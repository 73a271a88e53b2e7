//! Per-head direct logit attribution and head ablation as figures: layers (rows) × heads
//! (columns), on a diverging colour scale centred at 0 (red above, blue below) with its colour
//! bar, the top-ranked heads numbered in their cells and listed beside the bar.

use std::io::Write;
use std::path::Path;

use super::font;
use super::paint;
use super::scene::{Align, Cells, Item, Rect, Scene, Text};
use super::theme::{Palette, Rgb};
use super::{ImageError, ImageOptions, SvgError};
use crate::analysis::attribution::{HeadAblation, HeadAttribution, RankedHead};
use crate::analysis::lens::quoted;
use crate::output::write_output;
use crate::render::compare::diverging;

const MARGIN: i32 = 16;
const LABEL: f64 = 12.0;
const TITLE: f64 = 16.0;
/// How many of the ranked heads are numbered in the figure.
pub const ANNOTATED: usize = 10;

/// What one heads figure draws.
struct Grid<'a> {
    title: &'a str,
    /// Lines under the title: what the numbers are.
    lines: Vec<String>,
    values: &'a [Vec<f32>],
    ranked: &'a [RankedHead],
    /// What the colour bar's numbers are.
    unit: &'static str,
}

fn scene(g: &Grid, options: &ImageOptions) -> Scene {
    let pal = Palette::of(options.theme);
    let layers = g.values.len();
    let heads = g.values.first().map_or(0, Vec::len);
    let cell = (480 / layers.max(heads).max(1) as i32).clamp(14, 36);
    let row_labels: Vec<String> = (0..layers).map(|l| format!("layer {l}")).collect();
    let label_w = row_labels
        .iter()
        .map(|l| font::width(l, LABEL, false) as i32)
        .max()
        .unwrap_or(0);
    let top = MARGIN + TITLE as i32 + 8 + g.lines.len() as i32 * (LABEL as i32 + 6) + 8;
    let heat_x = MARGIN + label_w + 8;
    let heat_y = top + LABEL as i32 + 6;
    let (w, h) = (heads as i32 * cell, layers as i32 * cell);
    let m = g
        .values
        .iter()
        .flatten()
        .fold(0f32, |m, v| if v.is_finite() { m.max(v.abs()) } else { m })
        .max(1e-6);

    let text = |x, y, s: String, color, align| {
        Item::Text(Text {
            x,
            y,
            text: s,
            size: LABEL,
            bold: false,
            color,
            align,
            up: false,
        })
    };
    let mut items = vec![Item::Text(Text {
        x: MARGIN,
        y: MARGIN + TITLE as i32 / 2,
        text: g.title.to_string(),
        size: TITLE,
        bold: true,
        color: pal.text,
        align: Align::Start,
        up: false,
    })];
    for (i, line) in g.lines.iter().enumerate() {
        let y = MARGIN + TITLE as i32 + 8 + i as i32 * (LABEL as i32 + 6) + LABEL as i32 / 2;
        items.push(text(MARGIN, y, line.clone(), pal.muted, Align::Start));
    }
    let colors: Vec<Rgb> = g
        .values
        .iter()
        .flatten()
        .map(|&v| diverging(v / m))
        .collect();
    items.push(Item::Cells(Cells {
        x: heat_x,
        y: heat_y,
        rows: layers,
        cols: heads,
        cell_w: cell as u32,
        cell_h: cell as u32,
        colors: colors.clone(),
        hatch: None,
    }));
    items.extend(super::scene::frame(
        Rect::new(heat_x, heat_y, heat_x + w, heat_y + h),
        pal.frame,
    ));
    // Head numbers above the columns (every one that fits), layers beside the rows.
    let step = (28 / cell).max(1) as usize;
    for head in (0..heads).step_by(step) {
        let x = heat_x + head as i32 * cell + cell / 2;
        items.push(text(
            x,
            top + LABEL as i32 / 2,
            head.to_string(),
            pal.text,
            Align::Middle,
        ));
    }
    let row_step = (14 / cell).max(1) as usize;
    for (l, label) in row_labels.iter().enumerate().step_by(row_step) {
        let y = heat_y + l as i32 * cell + cell / 2;
        items.push(text(heat_x - 6, y, label.clone(), pal.text, Align::End));
    }
    // The ranked heads, numbered in their cells.
    let annotated = &g.ranked[..g.ranked.len().min(ANNOTATED)];
    for (rank, r) in annotated.iter().enumerate() {
        let x = heat_x + r.head as i32 * cell + cell / 2;
        let y = heat_y + r.layer as i32 * cell + cell / 2;
        let on = super::text_on(colors[r.layer * heads + r.head]);
        items.push(Item::Text(Text {
            x,
            y,
            text: (rank + 1).to_string(),
            size: (cell as f64 * 0.55).clamp(8.0, 12.0),
            bold: true,
            color: on,
            align: Align::Middle,
            up: false,
        }));
    }
    // The colour bar: +m at the top, −m at the bottom, 0 in the middle.
    let bar_x = heat_x + w + 24;
    let steps = 101usize;
    let bar_h = h.max(160);
    let step_h = (bar_h as u32).div_ceil(steps as u32);
    items.push(Item::Cells(Cells {
        x: bar_x,
        y: heat_y,
        rows: steps,
        cols: 1,
        cell_w: 14,
        cell_h: step_h,
        colors: (0..steps)
            .map(|i| diverging(1.0 - 2.0 * i as f32 / (steps - 1) as f32))
            .collect(),
        hatch: None,
    }));
    let bar_end = heat_y + (step_h * steps as u32) as i32;
    items.extend(super::scene::frame(
        Rect::new(bar_x, heat_y, bar_x + 14, bar_end),
        pal.frame,
    ));
    let ticks = [
        (format!("{:+.3}", m), heat_y + 6),
        ("0".to_string(), (heat_y + bar_end) / 2),
        (format!("{:+.3}", -m), bar_end - 6),
    ];
    let mut tick_w = 0;
    for (value, y) in ticks {
        tick_w = tick_w.max(font::width(&value, LABEL, false) as i32);
        items.push(text(bar_x + 20, y, value, pal.text, Align::Start));
    }
    items.push(text(
        bar_x,
        top + LABEL as i32 / 2,
        g.unit.into(),
        pal.muted,
        Align::Start,
    ));
    let below = (heat_y + h).max(bar_end) + 8;
    items.push(text(
        heat_x,
        below + LABEL as i32 / 2,
        "columns: heads · numbers in cells: the heads ranked by |value|".into(),
        pal.muted,
        Align::Start,
    ));
    // The ranked list beside the bar.
    let list_x = bar_x + 20 + tick_w + 20;
    items.push(Item::Text(Text {
        x: list_x,
        y: heat_y + LABEL as i32 / 2,
        text: "ranked heads".into(),
        size: LABEL,
        bold: true,
        color: pal.text,
        align: Align::Start,
        up: false,
    }));
    let mut list_w = font::width("ranked heads", LABEL, true) as i32;
    for (rank, r) in annotated.iter().enumerate() {
        let line = format!("{:>2}. L{} H{}  {:+.4}", rank + 1, r.layer, r.head, r.value);
        list_w = list_w.max(font::width(&line, LABEL, false) as i32);
        let y = heat_y + (rank as i32 + 1) * (LABEL as i32 + 6) + LABEL as i32 / 2;
        items.push(text(list_x, y, line, pal.text, Align::Start));
    }
    let width = (list_x + list_w + MARGIN)
        .max(
            heat_x
                + font::width(
                    "columns: heads · numbers in cells: the heads ranked by |value|",
                    LABEL,
                    false,
                ) as i32
                + MARGIN,
        )
        .max(MARGIN * 2 + font::width(g.title, TITLE, true) as i32)
        .max(
            g.lines
                .iter()
                .map(|l| MARGIN * 2 + font::width(l, LABEL, false) as i32)
                .max()
                .unwrap_or(0),
        );
    let height = (below + LABEL as i32 + MARGIN)
        .max(heat_y + (annotated.len() as i32 + 1) * (LABEL as i32 + 6) + MARGIN);
    Scene {
        width: width as u32,
        height: height as u32,
        background: pal.background,
        title: g.title.to_string(),
        items,
    }
}

/// What the attribution figure says under its title.
fn attribution_lines(a: &HeadAttribution) -> Vec<String> {
    let what = match &a.contrast {
        Some(c) => format!(
            "direct logit difference {} − {} ({:+.3} in all)",
            quoted(&a.target.text),
            quoted(&c.text),
            a.logit
        ),
        None => format!(
            "direct logit of {} (id {}, {:.3} in all)",
            quoted(&a.target.text),
            a.target.id,
            a.logit
        ),
    };
    vec![
        format!(
            "{what}, at position {} ({}), each head through the frozen final norm",
            a.position,
            quoted(&a.position_token)
        ),
        "red: the head raises it, blue: lowers it".to_string(),
    ]
}

/// What the ablation figure says under its title.
fn ablation_lines(a: &HeadAblation) -> Vec<String> {
    vec![
        format!(
            "Δ log p({}) at position {} ({}) when the head is {} ablated; with every head: {:.3}",
            quoted(&a.target.text),
            a.position,
            quoted(&a.position_token),
            a.mode,
            a.base_log_prob
        ),
        "blue: removing the head lowers it (the head helps), red: raises it".to_string(),
    ]
}

fn grid_of_attribution<'a>(a: &'a HeadAttribution, title: &'a str) -> Grid<'a> {
    Grid {
        title,
        lines: attribution_lines(a),
        values: &a.per_head,
        ranked: &a.ranked,
        unit: "logit",
    }
}

fn grid_of_ablation<'a>(a: &'a HeadAblation, title: &'a str) -> Grid<'a> {
    Grid {
        title,
        lines: ablation_lines(a),
        values: &a.delta,
        ranked: &a.ranked,
        unit: "Δ log p",
    }
}

fn png(g: &Grid, options: &ImageOptions) -> Result<Vec<u8>, ImageError> {
    let scene = scene(g, options);
    super::scene_png(&scene, options.scale_factor)
}

fn svg(g: &Grid, options: &ImageOptions) -> Result<String, ImageError> {
    paint::svg(&scene(g, options)).map_err(|e| match e {
        SvgError::Draw(e) => ImageError::Draw(e),
        SvgError::Font(e) => ImageError::Font(e),
    })
}

/// The attribution figure as PNG bytes.
pub fn attribution_png(
    a: &HeadAttribution,
    title: &str,
    options: &ImageOptions,
) -> Result<Vec<u8>, ImageError> {
    png(&grid_of_attribution(a, title), options)
}

/// The attribution figure as an SVG document.
pub fn attribution_svg(
    a: &HeadAttribution,
    title: &str,
    options: &ImageOptions,
) -> Result<String, ImageError> {
    svg(&grid_of_attribution(a, title), options)
}

/// The ablation figure as PNG bytes.
pub fn ablation_png(
    a: &HeadAblation,
    title: &str,
    options: &ImageOptions,
) -> Result<Vec<u8>, ImageError> {
    png(&grid_of_ablation(a, title), options)
}

/// The ablation figure as an SVG document.
pub fn ablation_svg(
    a: &HeadAblation,
    title: &str,
    options: &ImageOptions,
) -> Result<String, ImageError> {
    svg(&grid_of_ablation(a, title), options)
}

/// Write PNG `bytes` (or an SVG document) to `path` (atomically; `-` writes to stdout).
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<(), ImageError> {
    write_output(path, |w: &mut dyn Write| w.write_all(bytes))?;
    Ok(())
}
