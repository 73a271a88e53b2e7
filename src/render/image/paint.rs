//! Draw a [`Scene`] with plotters: into an RGB buffer encoded as PNG, or into an SVG string.

use plotters::coord::Shift;
use plotters::element::BitMapElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::{FontDesc, FontFamily, FontStyle, FontTransform};

use super::font;
use super::scene::{Align, Cells, Item, Scene, Text};
use super::theme::Rgb;
use crate::render::fonts::{self, FontError};

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

#[derive(Clone, Copy, PartialEq, Eq)]
enum Target<'a> {
    Png,
    /// SVG, with the CSS font list of its text.
    Svg(&'a str),
}

/// Render `scene` as raw RGB pixels, `width × height × 3` bytes.
pub(crate) fn rgb_pixels(scene: &Scene) -> Result<Vec<u8>, DrawError> {
    let mut buf = vec![0u8; scene.width as usize * scene.height as usize * 3];
    {
        let root =
            BitMapBackend::with_buffer(&mut buf, (scene.width, scene.height)).into_drawing_area();
        paint(&root, scene, Target::Png)?;
        root.present().map_err(draw_err)?;
    }
    Ok(buf)
}

/// Render `scene` as a PNG file's bytes. Deterministic: no timestamps, fixed compression.
pub(crate) fn png(scene: &Scene) -> Result<Vec<u8>, DrawError> {
    let pixels = rgb_pixels(scene)?;
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, scene.width, scene.height);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        enc.set_compression(png::Compression::Default);
        enc.add_text_chunk("Software".into(), "attnviz".into())
            .map_err(draw_err)?;
        enc.add_itxt_chunk("Title".into(), scene.title.clone())
            .map_err(draw_err)?;
        let mut w = enc.write_header().map_err(draw_err)?;
        w.write_image_data(&pixels).map_err(draw_err)?;
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
        paint(&root, scene, Target::Svg(&family))?;
        root.present().map_err(draw_err)?;
    }
    Ok(finish_svg(
        out,
        &scene.title,
        &fonts::font_face_css(&webfonts),
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
fn finish_svg(svg: String, title: &str, css: &str) -> String {
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
    let svg = svg.replacen(
        open_end,
        &format!(
            "xmlns=\"http://www.w3.org/2000/svg\" shape-rendering=\"crispEdges\">\n<title>{escaped}</title>\n{}",
            if css.is_empty() {
                String::new()
            } else {
                // base64 and these rules hold no `<` or `&`, so no CDATA section is needed
                format!("<defs><style>\n{css}</style></defs>\n")
            }
        ),
        1,
    );
    // Token text is escaped (`"` becomes `&quot;`), so this attribute text cannot come from a label.
    svg.replace(
        "href=\"data:png;base64,",
        "style=\"image-rendering:pixelated\" href=\"data:image/png;base64,",
    )
}

fn paint<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    scene: &Scene,
    target: Target,
) -> Result<(), DrawError> {
    root.fill(&color(scene.background)).map_err(draw_err)?;
    let vector_cells =
        matches!(target, Target::Svg(_)) && scene.cell_count() <= SVG_MAX_VECTOR_CELLS;
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
            Item::Text(t) => paint_text(root, t, target)?,
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
            let fill = color(cells.colors[r * cells.cols + c]).filled();
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

fn paint_text<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    t: &Text,
    target: Target,
) -> Result<(), DrawError> {
    match target {
        Target::Svg(family) => {
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
        Target::Png => {
            let text = font::drawable(&t.text);
            let c = color(t.color);
            let mut result = Ok(());
            font::rasterize(&text, t.size, t.bold, start(t), |x, y, cov| {
                let at = if t.up {
                    (t.x + y, t.y - x)
                } else {
                    (t.x + x, t.y + y)
                };
                if result.is_ok() {
                    result = root.draw_pixel(at, &c.mix(cov as f64));
                }
            });
            result.map_err(draw_err)
        }
    }
}
