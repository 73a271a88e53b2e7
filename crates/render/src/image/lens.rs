//! The logit lens as a figure: stages of the residual stream (rows: the embeddings, then each
//! layer) × positions (columns, labelled with the input token), each cell coloured by the
//! probability of its most probable token, which is written in the cell.

use std::io::Write;
use std::path::Path;

use super::font;
use super::paint;
use super::scene::{Align, Cells, Item, Rect, Scene, Text};
use super::theme::Palette;
use super::{ImageError, ImageOptions, SvgError};
use crate::analysis::lens::{readable, LogitLens};
use crate::colormap::Ramp;
use crate::output::write_output;

const MARGIN: i32 = 16;
const CELL_H: u32 = 22;
const TEXT: f64 = 12.0;
const LABEL: f64 = 12.0;
const TITLE: f64 = 16.0;
/// The most characters of a token written in a cell or under a column.
const CELL_CHARS: usize = 10;

/// The lens figure's scene, titled `title`.
fn scene(lens: &LogitLens, title: &str, options: &ImageOptions) -> Scene {
    let pal = Palette::of(options.theme);
    let ramp = Ramp::new(options.colormap, options.theme);
    let (rows, cols) = (lens.top.len(), lens.positions.len());
    let cell_text = |s: usize, p: usize| font::label(&readable(&lens.top1(s, p).text), CELL_CHARS);
    let widest = (0..rows)
        .flat_map(|s| (0..cols).map(move |p| (s, p)))
        .map(|(s, p)| font::width(&cell_text(s, p), TEXT, false))
        .max()
        .unwrap_or(0);
    let cell_w = (widest + 10).clamp(36, 110);
    let col_labels: Vec<String> = lens
        .positions
        .iter()
        .map(|t| font::label(&readable(t), CELL_CHARS))
        .collect();
    let row_labels = &lens.stages;
    let label_w = row_labels
        .iter()
        .map(|l| font::width(l, LABEL, false))
        .max()
        .unwrap_or(0) as i32;
    let col_label_h = col_labels
        .iter()
        .map(|l| font::width(l, LABEL, false))
        .max()
        .unwrap_or(0) as i32;
    let heat_x = MARGIN + label_w + 8;
    let heat_y = MARGIN + 2 * TITLE as i32 + 8;
    let (w, h) = (cols as u32 * cell_w, rows as u32 * CELL_H);
    let bar_x = heat_x + w as i32 + 24;
    let subtitle = format!(
        "most probable token through the model's own head (a decoder's: the next token); colour: its probability (top {} in the JSON and report)",
        lens.k
    );
    let width = (bar_x + 14 + 8 + font::width("1.0", LABEL, false) as i32 + MARGIN)
        .max(MARGIN * 2 + font::width(title, TITLE, true) as i32)
        .max(MARGIN * 2 + font::width(&subtitle, LABEL, false) as i32)
        .max(360);
    let height = heat_y + h as i32 + 8 + col_label_h + 14 + LABEL as i32 + MARGIN;

    let mut items = vec![Item::Text(Text {
        x: MARGIN,
        y: MARGIN + TITLE as i32 / 2,
        text: title.to_string(),
        size: TITLE,
        bold: true,
        color: pal.text,
        align: Align::Start,
        up: false,
    })];
    items.push(Item::Text(Text {
        x: MARGIN,
        y: MARGIN + TITLE as i32 + 10,
        text: subtitle.clone(),
        size: LABEL,
        bold: false,
        color: pal.muted,
        align: Align::Start,
        up: false,
    }));
    let mut colors = Vec::with_capacity(rows * cols);
    for s in 0..rows {
        for p in 0..cols {
            colors.push(ramp.at(lens.top1(s, p).prob));
        }
    }
    items.push(Item::Cells(Cells {
        x: heat_x,
        y: heat_y,
        rows,
        cols,
        cell_w,
        cell_h: CELL_H,
        colors: colors.clone(),
        hatch: None,
    }));
    for s in 0..rows {
        let y = heat_y + (s as u32 * CELL_H + CELL_H / 2) as i32;
        items.push(Item::Text(Text {
            x: heat_x - 8,
            y,
            text: row_labels[s].clone(),
            size: LABEL,
            bold: false,
            color: pal.text,
            align: Align::End,
            up: false,
        }));
        for p in 0..cols {
            items.push(Item::Text(Text {
                x: heat_x + (p as u32 * cell_w + cell_w / 2) as i32,
                y,
                text: cell_text(s, p),
                size: TEXT,
                bold: false,
                color: super::text_on(colors[s * cols + p]),
                align: Align::Middle,
                up: false,
            }));
        }
    }
    for (p, label) in col_labels.iter().enumerate() {
        items.push(Item::Text(Text {
            x: heat_x + (p as u32 * cell_w + cell_w / 2) as i32,
            y: heat_y + h as i32 + 8,
            text: label.clone(),
            size: LABEL,
            bold: false,
            color: pal.text,
            align: Align::End,
            up: true,
        }));
    }
    items.push(Item::Text(Text {
        x: heat_x,
        y: heat_y + h as i32 + 8 + col_label_h + 14,
        text: "input token at each position".into(),
        size: LABEL,
        bold: false,
        color: pal.muted,
        align: Align::Start,
        up: false,
    }));
    // The colour bar: probability 0 (bottom) to 1 (top).
    let steps = 100usize;
    let bar_h = h.max(120);
    items.push(Item::Cells(Cells {
        x: bar_x,
        y: heat_y,
        rows: steps,
        cols: 1,
        cell_w: 14,
        cell_h: bar_h.div_ceil(steps as u32),
        colors: (0..steps)
            .map(|i| ramp.at(1.0 - i as f32 / (steps - 1) as f32))
            .collect(),
        hatch: None,
    }));
    let bar_end = heat_y + (bar_h.div_ceil(steps as u32) * steps as u32) as i32;
    items.extend(super::scene::frame(
        Rect::new(bar_x, heat_y, bar_x + 14, bar_end),
        pal.frame,
    ));
    for (value, y) in [("1.0", heat_y + 6), ("0.0", bar_end - 6)] {
        items.push(Item::Text(Text {
            x: bar_x + 20,
            y,
            text: value.into(),
            size: LABEL,
            bold: false,
            color: pal.text,
            align: Align::Start,
            up: false,
        }));
    }
    Scene {
        width: width as u32,
        height: (height.max(bar_end + 8 + MARGIN)) as u32,
        background: pal.background,
        title: title.to_string(),
        items,
    }
}

/// The lens figure as PNG bytes.
pub fn render_png(
    lens: &LogitLens,
    title: &str,
    options: &ImageOptions,
) -> Result<Vec<u8>, ImageError> {
    let scene = scene(lens, title, options);
    super::scene_png(&scene, options.scale_factor)
}

/// The lens figure as an SVG document.
pub fn render_svg(
    lens: &LogitLens,
    title: &str,
    options: &ImageOptions,
) -> Result<String, ImageError> {
    paint::svg(&scene(lens, title, options)).map_err(|e| match e {
        SvgError::Draw(e) => ImageError::Draw(e),
        SvgError::Font(e) => ImageError::Font(e),
    })
}

/// Write the lens figure as a PNG file at `path` (atomically; `-` writes to stdout).
pub fn write_png(
    lens: &LogitLens,
    title: &str,
    options: &ImageOptions,
    path: &Path,
) -> Result<(), ImageError> {
    let bytes = render_png(lens, title, options)?;
    write_output(path, |w: &mut dyn Write| w.write_all(&bytes))?;
    Ok(())
}

/// Write the lens figure as an SVG file at `path`.
pub fn write_svg(
    lens: &LogitLens,
    title: &str,
    options: &ImageOptions,
    path: &Path,
) -> Result<(), ImageError> {
    let svg = render_svg(lens, title, options)?;
    write_output(path, |w: &mut dyn Write| w.write_all(svg.as_bytes()))?;
    Ok(())
}
