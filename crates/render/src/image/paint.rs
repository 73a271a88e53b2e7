//! Draw a [`Scene`] with plotters: into an RGB buffer encoded as PNG, or into an SVG string.

use plotters::coord::Shift;
use plotters::element::BitMapElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::{FontDesc, FontFamily, FontStyle, FontTransform};

use super::font;
use super::scene::{Align, Cells, Hatch, Item, Scene, Text, HATCH_PERIOD};
use super::theme::Rgb;
use crate::fonts::{self, FontError};

/// SVG draws a block of cells as one `<rect>` each up to this many cells in the whole figure,
/// so small heatmaps stay crisp vector graphics; beyond it, cells go in as an embedded PNG
/// (a 512-token head would otherwise be 262,144 elements, about 25 MB).
pub(crate) const SVG_MAX_VECTOR_CELLS: usize = 4096;

/// Error from plotters while drawing.
#[derive(Debug, thiserror::Error)]
#[error("drawing the image failed: {0}")]
pub struct DrawError(pub String);

fn draw_err(e: impl std::fmt::Display) -> DrawError {
    DrawError(e.to_string())
}

fn color(c: Rgb) -> RGBColor {
    RGBColor(c.0, c.1, c.2)
}

/// Render `scene` as raw RGB pixels at `factor` PNG pixels per layout pixel: returns the
/// pixels (`width × height × 3` bytes) and the size. Cells are written straight into the buffer
/// (nearest neighbour when scaled); boxes and text are drawn over them with plotters and our own
/// text rasteriser.
pub(crate) fn rgb_pixels(scene: &Scene, factor: f32) -> Result<(Vec<u8>, u32, u32), DrawError> {
    let (w, h) = scaled_size(scene, factor);
    let bg = scene.background;
    let mut buf = [bg.0, bg.1, bg.2].repeat(w as usize * h as usize);
    for item in &scene.items {
        if let Item::Cells(cells) = item {
            blit_cells(&mut buf, (w, h), cells, factor);
        }
    }
    {
        let root = BitMapBackend::with_buffer(&mut buf, (w, h)).into_drawing_area();
        for item in &scene.items {
            match item {
                Item::Fill(r, c) if r.x1 > r.x0 && r.y1 > r.y0 => {
                    let s = |v: i32| (v as f32 * factor).round() as i32;
                    let (x0, y0) = (s(r.x0), s(r.y0));
                    // a one-pixel line stays at least one pixel at any factor
                    let (x1, y1) = (s(r.x1).max(x0 + 1), s(r.y1).max(y0 + 1));
                    root.draw(&Rectangle::new([(x0, y0), (x1, y1)], color(*c).filled()))
                        .map_err(draw_err)?;
                }
                Item::Text(t) => paint_png_text(&root, t, factor)?,
                _ => {}
            }
        }
        root.present().map_err(draw_err)?;
    }
    Ok((buf, w, h))
}

/// The PNG size of `scene` at `factor` PNG pixels per layout pixel.
pub(crate) fn scaled_size(scene: &Scene, factor: f32) -> (u32, u32) {
    let s = |v: u32| ((v as f32 * factor).round() as u32).max(1);
    (s(scene.width), s(scene.height))
}

/// Write `cells` into the RGB buffer `buf` of size `(w, h)`, scaled by `factor` (each output
/// pixel takes the cell under its centre).
fn blit_cells(buf: &mut [u8], (w, h): (u32, u32), cells: &Cells, factor: f32) {
    let span = |from: i32, len: u32, limit: u32| {
        let a = ((from as f32 * factor).round() as i64).clamp(0, limit as i64) as usize;
        let b =
            (((from as f32 + len as f32) * factor).round() as i64).clamp(0, limit as i64) as usize;
        a..b
    };
    // the cell index of every output column and row
    let index = |p: usize, origin: i32, cell: u32, count: usize| {
        let source = ((p as f32 + 0.5) / factor).floor() as i64 - origin as i64;
        (source.max(0) as usize / cell as usize).min(count - 1)
    };
    let xs = span(cells.x, cells.width(), w);
    let ys = span(cells.y, cells.height(), h);
    let cols: Vec<usize> = xs
        .clone()
        .map(|x| index(x, cells.x, cells.cell_w, cells.cols))
        .collect();
    let mut row = Vec::with_capacity(cols.len() * 3);
    let mut last_row = usize::MAX;
    // Hatch lines keep their spacing and width at every scale factor.
    let period = (HATCH_PERIOD as f32 * factor).round().max(2.0) as i64;
    let width = factor.round().max(1.0) as i64;
    let mut hatched: Vec<usize> = Vec::new();
    for y in ys {
        let r = index(y, cells.y, cells.cell_h, cells.rows);
        if r != last_row {
            row.clear();
            hatched.clear();
            for (i, &c) in cols.iter().enumerate() {
                let Rgb(a, b, d) = cells.colors[r * cells.cols + c];
                row.extend_from_slice(&[a, b, d]);
                if cells.hatched(r * cells.cols + c) {
                    hatched.push(i);
                }
            }
            last_row = r;
        }
        let at = (y * w as usize + xs.start) * 3;
        buf[at..at + row.len()].copy_from_slice(&row);
        if let Some(hatch) = &cells.hatch {
            for &i in &hatched {
                let x = xs.start + i;
                let Rgb(a, b, d) = hatch.color_at(x as i64, y as i64, period, width);
                buf[at + i * 3..at + i * 3 + 3].copy_from_slice(&[a, b, d]);
            }
        }
    }
}

/// The colour SVG's vector cells are first written in where they are hatched; [`finish_svg`]
/// fills them with the hatch pattern instead. No colour map or palette holds it (a unit test
/// checks), so nothing else is ever replaced.
pub(crate) const HATCH_SENTINEL: Rgb = Rgb(0x01, 0x02, 0x03);

/// The SVG pattern hatched cells are filled with: the same lines as the PNG's, one every
/// [`HATCH_PERIOD`] pixels along the figure's diagonals.
fn hatch_pattern(hatch: &Hatch) -> String {
    let p = HATCH_PERIOD;
    let hex = |c: Rgb| format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2);
    format!(
        "<pattern id=\"attnviz-masked\" patternUnits=\"userSpaceOnUse\" width=\"{p}\" height=\"{p}\">\
         <rect width=\"{p}\" height=\"{p}\" fill=\"{bg}\"/>\
         <path d=\"M0,{p} L{p},0 M-1,1 L1,-1 M{a},{b} L{b},{a}\" stroke=\"{line}\" stroke-width=\"1\"/>\
         </pattern>",
        bg = hex(hatch.background),
        line = hex(hatch.line),
        a = p - 1,
        b = p + 1,
    )
}

/// Render `scene` as a PNG file's bytes at `factor` PNG pixels per layout pixel, stating its
/// density as 96 × `factor` pixels per inch (pHYs), so a 2× image prints at the size of the 1×
/// one, with twice the detail. Deterministic: no timestamps, fixed compression. The image data
/// is deflated in parts at once ([`super::deflate`]).
pub(crate) fn png(scene: &Scene, factor: f32) -> Result<Vec<u8>, DrawError> {
    let (pixels, w, h) = rgb_pixels(scene, factor)?;
    let (width, height) = (w as usize, h as usize);
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, w, h);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let per_metre = (96.0 * factor as f64 / 0.0254).round() as u32;
        enc.set_pixel_dims(Some(png::PixelDimensions {
            xppu: per_metre,
            yppu: per_metre,
            unit: png::Unit::Meter,
        }));
        enc.add_text_chunk("Software".into(), "attnviz".into())
            .map_err(draw_err)?;
        enc.add_itxt_chunk("Title".into(), scene.title.clone())
            .map_err(draw_err)?;
        let mut w = enc.write_header().map_err(draw_err)?;
        let data = super::deflate::idat(&pixels, width, height).map_err(draw_err)?;
        w.write_chunk(png::chunk::IDAT, &data).map_err(draw_err)?;
        w.finish().map_err(draw_err)?;
    }
    Ok(out)
}

/// Render `scene` as an SVG document, with subsets of the embedded fonts for its text (see
/// [`fonts::subset_for`]): text stays searchable `<text>`, and every viewer that reads CSS
/// `@font-face` (browsers, and so most SVG viewers) draws the same glyphs as the PNG.
pub(crate) fn svg(scene: &Scene) -> Result<String, SvgError> {
    let webfonts = fonts::subset_for(scene.texts().map(|t| (t.text.as_str(), t.bold)))?;
    let family = match fonts::font_family_list(&webfonts) {
        list if list.is_empty() => font::FALLBACK_FAMILIES.to_string(),
        list => format!("{list}, {}", font::FALLBACK_FAMILIES),
    };
    let mut out = String::new();
    {
        let root =
            SVGBackend::with_string(&mut out, (scene.width, scene.height)).into_drawing_area();
        paint_svg(&root, scene, &family)?;
        root.present().map_err(draw_err)?;
    }
    let hatch = scene.items.iter().find_map(|i| match i {
        Item::Cells(c) => c.hatch.as_ref(),
        _ => None,
    });
    Ok(finish_svg(
        out,
        &scene.title,
        &fonts::font_face_css(&webfonts),
        hatch,
    ))
}

/// Why an SVG could not be made.
#[derive(Debug, thiserror::Error)]
pub enum SvgError {
    /// plotters failed.
    #[error(transparent)]
    Draw(#[from] DrawError),
    /// An embedded font could not be subset.
    #[error(transparent)]
    Font(#[from] FontError),
}

/// Touch up plotters' SVG: add a `<title>`, the embedded fonts (`css`, `@font-face` rules), crisp
/// edges between cells, and fix its embedded images. plotters 0.3.7 writes
/// `href="data:png;base64,…"`, a media type browsers reject, and leaves them to be smoothed when
/// scaled; ours are colour cells, so they must stay square.
fn finish_svg(svg: String, title: &str, css: &str, hatch: Option<&Hatch>) -> String {
    let mut escaped = String::new();
    for c in title.chars() {
        match c {
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '&' => escaped.push_str("&amp;"),
            c => escaped.push(c),
        }
    }
    let open_end = "xmlns=\"http://www.w3.org/2000/svg\">\n";
    let sentinel = format!(
        "fill=\"#{:02X}{:02X}{:02X}\"",
        HATCH_SENTINEL.0, HATCH_SENTINEL.1, HATCH_SENTINEL.2
    );
    let pattern = hatch
        .filter(|_| svg.contains(&sentinel))
        .map(hatch_pattern)
        .unwrap_or_default();
    let style = if css.is_empty() {
        String::new()
    } else {
        // base64 and these rules hold no `<` or `&`, so no CDATA section is needed
        format!("<style>\n{css}</style>")
    };
    let defs = if style.is_empty() && pattern.is_empty() {
        String::new()
    } else {
        format!("<defs>{style}{pattern}</defs>\n")
    };
    let svg = svg.replacen(
        open_end,
        &format!(
            "xmlns=\"http://www.w3.org/2000/svg\" shape-rendering=\"crispEdges\">\n<title>{escaped}</title>\n{defs}"
        ),
        1,
    );
    let svg = svg.replace(&sentinel, "fill=\"url(#attnviz-masked)\"");
    // Token text is escaped (`"` becomes `&quot;`), so this attribute text cannot come from a label.
    svg.replace(
        "href=\"data:png;base64,",
        "style=\"image-rendering:pixelated\" href=\"data:image/png;base64,",
    )
}

fn paint_svg<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    scene: &Scene,
    family: &str,
) -> Result<(), DrawError> {
    root.fill(&color(scene.background)).map_err(draw_err)?;
    let vector_cells = scene.cell_count() <= SVG_MAX_VECTOR_CELLS;
    for item in &scene.items {
        match item {
            Item::Fill(r, c) => {
                if r.x1 > r.x0 && r.y1 > r.y0 {
                    root.draw(&Rectangle::new(
                        [(r.x0, r.y0), (r.x1, r.y1)],
                        color(*c).filled(),
                    ))
                    .map_err(draw_err)?;
                }
            }
            Item::Cells(cells) if vector_cells => paint_cell_rects(root, cells)?,
            Item::Cells(cells) => {
                let pixels = cells.pixels();
                let el = BitMapElement::with_ref(
                    (cells.x, cells.y),
                    (cells.width(), cells.height()),
                    &pixels,
                )
                .ok_or_else(|| DrawError("cell buffer has the wrong size".into()))?;
                root.draw(&el).map_err(draw_err)?;
            }
            Item::Text(t) => paint_svg_text(root, t, family)?,
        }
    }
    Ok(())
}

fn paint_cell_rects<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    cells: &Cells,
) -> Result<(), DrawError> {
    let (w, h) = (cells.cell_w as i32, cells.cell_h as i32);
    for r in 0..cells.rows {
        for c in 0..cells.cols {
            let x = cells.x + c as i32 * w;
            let y = cells.y + r as i32 * h;
            let i = r * cells.cols + c;
            let fill = if cells.hatched(i) {
                color(HATCH_SENTINEL).filled()
            } else {
                color(cells.colors[i]).filled()
            };
            root.draw(&Rectangle::new([(x, y), (x + w, y + h)], fill))
                .map_err(draw_err)?;
        }
    }
    Ok(())
}

/// Where PNG text starts relative to its anchor, in pixels along its reading direction.
pub(crate) fn start(t: &Text) -> f32 {
    let len = font::advance(&font::drawable(&t.text), t.size, t.bold);
    match t.align {
        Align::Start => 0.0,
        Align::Middle => -len / 2.0,
        Align::End => -len,
    }
}

fn paint_svg_text<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    t: &Text,
    family: &str,
) -> Result<(), DrawError> {
    let h = match t.align {
        Align::Start => HPos::Left,
        Align::Middle => HPos::Center,
        Align::End => HPos::Right,
    };
    let weight = if t.bold {
        FontStyle::Bold
    } else {
        FontStyle::Normal
    };
    let mut style = FontDesc::new(FontFamily::Name(family), t.size, weight)
        .color(&color(t.color))
        .pos(Pos::new(h, VPos::Center));
    if t.up {
        style = style.transform(FontTransform::Rotate270);
    }
    root.draw_text(&t.text, &style, (t.x, t.y))
        .map_err(draw_err)
}

/// Draw `t` into a PNG at `factor` PNG pixels per layout pixel.
fn paint_png_text<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    t: &Text,
    factor: f32,
) -> Result<(), DrawError> {
    let text = font::drawable(&t.text);
    let c = color(t.color);
    let (ax, ay) = (
        (t.x as f32 * factor).round() as i32,
        (t.y as f32 * factor).round() as i32,
    );
    let mut result = Ok(());
    let size = t.size * factor as f64;
    font::rasterize(&text, size, t.bold, start(t) * factor, |x, y, cov| {
        let at = if t.up {
            (ax + y, ay - x)
        } else {
            (ax + x, ay + y)
        };
        if result.is_ok() {
            result = root.draw_pixel(at, &c.mix(cov as f64));
        }
    });
    result.map_err(draw_err)
}
