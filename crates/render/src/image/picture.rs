//! Attention drawn on the picture a vision model saw (the attention's
//! [`ImageInput`](crate::attention::image::ImageInput)): one query's attention over the patch
//! grid overlaid on the image with alpha, a layer's heads as a grid of overlays, the whole
//! model as layers × heads, and rollout over the image. The special tokens' shares (CLS,
//! distillation, registers) are listed beside each overlay, never dropped. Also the terminal's
//! version: the patch-grid heatmap beside a coarse rendering of the image.

use std::io::Write;
use std::path::Path;

use super::font;
use super::ImageError;
use crate::attention::image::{Cell, ImageInput, Pooling};
use crate::attention::{Attention, HeadSel};
use crate::colormap::{viridis, Rgb};
use crate::output::write_output;
use crate::pixels::{resample, Filter};
use crate::term::{Line, Paint, Term};

/// Which query's attention is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Query {
    /// The class token (or, for a model without one, the first token).
    #[default]
    Cls,
    /// The patch at `row`, `col`.
    Patch(usize, usize),
    /// The attention-pooling head's probe (SigLIP): its attention over the patches, one more
    /// attention after the last layer ([`crate::attention::image::Pooling`]).
    Pool,
}

/// `ROW,COL` (two numbers from 0) or `pool`, as a [`Query`].
impl std::str::FromStr for Query {
    type Err = String;

    fn from_str(s: &str) -> Result<Query, String> {
        let patch = s.split_once(',').and_then(|(r, c)| {
            Some((
                r.trim().parse::<usize>().ok()?,
                c.trim().parse::<usize>().ok()?,
            ))
        });
        match patch {
            Some((r, c)) => Ok(Query::Patch(r, c)),
            None if s.trim().eq_ignore_ascii_case("pool") => Ok(Query::Pool),
            None => Err(format!(
                "{s:?} is not ROW,COL (two numbers from 0, like 3,5) or pool"
            )),
        }
    }
}

/// The pooling head `query` draws: its own, or the default query's on a model without a class
/// token that has one (SigLIP: the pooling head is its summary of the image, as CLS is ViT's).
pub fn pooling_of(att: &Attention, query: Query) -> Result<Option<&Pooling>, ImageError> {
    let image = att.image.as_deref().ok_or_else(no_image)?;
    match (query, &image.pooling) {
        (Query::Pool, None) => Err(ImageError::Draw(super::paint::DrawError(
            "this model has no attention-pooling head; pick the class token or a patch".into(),
        ))),
        (Query::Pool, Some(p)) => Ok(Some(p)),
        (Query::Cls, Some(p)) if !image.cells.contains(&Cell::Class) => Ok(Some(p)),
        _ => Ok(None),
    }
}

/// The pooling head's row for `head`, spread over the model's tokens.
fn pooling_row(pooling: &Pooling, head: HeadSel) -> Vec<f32> {
    pooling.row(head).unwrap_or_default()
}

fn pooling_what(head: HeadSel) -> String {
    match head {
        HeadSel::Index(h) => format!("{} · head {h}", Pooling::LABEL),
        HeadSel::Mean => format!("{} · mean of heads", Pooling::LABEL),
    }
}

/// What a picture figure shows.
#[derive(Clone, Debug, PartialEq)]
pub enum PictureSpec<'a> {
    /// One head (or the mean of a layer's heads).
    Head {
        /// Captured layer index.
        layer: usize,
        /// Head or mean.
        head: HeadSel,
    },
    /// Every head of one layer.
    Layer {
        /// Captured layer index.
        layer: usize,
    },
    /// Every layer × head.
    Model,
    /// A rollout matrix `[n, n]` up to `layer`.
    Rollout {
        /// The layer it runs to.
        layer: usize,
        /// The matrix, over the attention's units.
        matrix: &'a [f32],
        /// How it was fused and how much was discarded
        /// ([`crate::analysis::fused_rollout`]), for the title; `None`: the plain rollout.
        fusion: Option<(crate::analysis::HeadFusion, f32)>,
    },
}

/// Why a picture cannot be drawn.
fn no_image() -> ImageError {
    ImageError::Draw(super::paint::DrawError(
        "this attention has no picture (it is not from a vision model)".into(),
    ))
}

/// The unit index of `query`, or an error naming the grid.
pub fn query_unit(att: &Attention, query: Query) -> Result<usize, ImageError> {
    let image = att.image.as_deref().ok_or_else(no_image)?;
    let token = match query {
        // The pooling head's probe is no token; figures that need a token row (the layers of
        // the model figure) read the first one.
        Query::Pool => 0,
        Query::Cls => image
            .cells
            .iter()
            .position(|&c| c == Cell::Class)
            .unwrap_or(0),
        Query::Patch(r, c) => image.patch_token(r, c).ok_or_else(|| {
            ImageError::Draw(super::paint::DrawError(format!(
                "patch {r},{c} is outside the {}×{} patch grid (rows and columns from 0)",
                image.grid[0], image.grid[1]
            )))
        })?,
    };
    let spans = &att.queries().spans;
    spans.iter().position(|s| s.start == token).ok_or_else(|| {
        ImageError::Draw(super::paint::DrawError(format!(
            "the query token {} was left out of this view (special tokens excluded)",
            image.cells[token].label()
        )))
    })
}

/// One row over the keys, spread back over the model's tokens (a unit left out of the view
/// gets 0).
fn row_by_token(att: &Attention, row: &[f32], image: &ImageInput) -> Vec<f32> {
    let mut out = vec![0f32; image.cells.len()];
    for (k, s) in att.keys().spans.iter().enumerate() {
        if let Some(o) = out.get_mut(s.start) {
            *o = row[k];
        }
    }
    out
}

/// An RGB canvas.
struct Canvas {
    w: usize,
    h: usize,
    px: Vec<u8>,
}

impl Canvas {
    fn new(w: usize, h: usize) -> Canvas {
        Canvas {
            w,
            h,
            px: vec![255; w * h * 3],
        }
    }

    fn put(&mut self, x: i32, y: i32, rgb: [u8; 3], a: f32) {
        if x < 0 || y < 0 || x as usize >= self.w || y as usize >= self.h {
            return;
        }
        let i = (y as usize * self.w + x as usize) * 3;
        for (d, &s) in self.px[i..i + 3].iter_mut().zip(&rgb) {
            *d = (*d as f32 * (1.0 - a) + s as f32 * a).round() as u8;
        }
    }

    fn text(&mut self, s: &str, size: f64, x: i32, y: i32) {
        font::rasterize(s, size, false, 0.0, |dx, dy, c| {
            self.put(x + dx, y + dy, [20, 20, 20], c)
        });
    }

    fn rect(&mut self, x: i32, y: i32, w: i32, h: i32, rgb: [u8; 3]) {
        for yy in y..y + h {
            for xx in x..x + w {
                self.put(xx, yy, rgb, 1.0);
            }
        }
    }

    fn outline_thin(&mut self, x: i32, y: i32, w: i32, h: i32, rgb: [u8; 3]) {
        for xx in x..x + w {
            self.put(xx, y, rgb, 1.0);
            self.put(xx, y + h - 1, rgb, 1.0);
        }
        for yy in y..y + h {
            self.put(x, yy, rgb, 1.0);
            self.put(x + w - 1, yy, rgb, 1.0);
        }
    }

    fn outline(&mut self, x: i32, y: i32, w: i32, h: i32, rgb: [u8; 3]) {
        for t in 0..2 {
            for xx in x..x + w {
                self.put(xx, y + t, rgb, 1.0);
                self.put(xx, y + h - 1 - t, rgb, 1.0);
            }
            for yy in y..y + h {
                self.put(x + t, yy, rgb, 1.0);
                self.put(x + w - 1 - t, yy, rgb, 1.0);
            }
        }
    }
}

/// The overlay of one attention row (by token) on the picture, `side` pixels on the longer side,
/// with the query patch outlined.
fn overlay(
    image: &ImageInput,
    row: &[f32],
    side: usize,
    query: Option<usize>,
) -> (Vec<u8>, usize, usize) {
    let [iw, ih] = image.input;
    let scale = side as f64 / iw.max(ih) as f64;
    let (w, h) = (
        ((iw as f64 * scale).round() as usize).max(1),
        ((ih as f64 * scale).round() as usize).max(1),
    );
    let base = resample::resize(&image.view, iw, ih, w, h, Filter::Bilinear);
    let grid = image.on_grid(row);
    let max = grid.iter().copied().fold(0f32, f32::max).max(1e-12);
    let [rows, cols] = image.grid;
    let p = image.patch as f64 * scale;
    let mut px = base;
    for y in 0..h {
        for x in 0..w {
            let (r, c) = ((y as f64 / p) as usize, (x as f64 / p) as usize);
            let i = (y * w + x) * 3;
            if r >= rows || c >= cols {
                // Pixels no patch covers (a side not a multiple of the patch): dimmed.
                for v in &mut px[i..i + 3] {
                    *v /= 3;
                }
                continue;
            }
            let t = grid[r * cols + c] / max;
            let crate::colormap::Rgb(cr, cg, cb) = viridis(t);
            let a = 0.25 + 0.5 * t;
            let gray =
                (px[i] as f32 * 0.3 + px[i + 1] as f32 * 0.59 + px[i + 2] as f32 * 0.11) * 0.85;
            for (k, col) in [cr, cg, cb].into_iter().enumerate() {
                px[i + k] = (gray * (1.0 - a) + col as f32 * a).round() as u8;
            }
        }
    }
    if let Some(Cell::Patch { row: qr, col: qc }) = query.and_then(|q| image.cell(q)) {
        let mut c = Canvas { w, h, px };
        let (x, y) = ((qc as f64 * p) as i32, (qr as f64 * p) as i32);
        c.outline(x, y, p.round() as i32, p.round() as i32, [255, 255, 255]);
        px = c.px;
    }
    (px, w, h)
}

fn blit(canvas: &mut Canvas, src: &[u8], w: usize, h: usize, x0: usize, y0: usize) {
    for y in 0..h {
        for x in 0..w {
            let (cx, cy) = (x0 + x, y0 + y);
            if cx < canvas.w && cy < canvas.h {
                let d = (cy * canvas.w + cx) * 3;
                canvas.px[d..d + 3].copy_from_slice(&src[(y * w + x) * 3..][..3]);
            }
        }
    }
}

/// A vertical colour bar at (`x`, `y`), `h` pixels tall: viridis from `top_label` (the top, the
/// overlay's largest patch weight) down to 0, with its caption under it (`caption` lines).
fn colour_bar(canvas: &mut Canvas, x: i32, y: i32, h: i32, top_label: &str, caption: &[&str]) {
    let w = 14;
    for yy in 0..h {
        let t = 1.0 - yy as f32 / (h - 1).max(1) as f32;
        let crate::colormap::Rgb(r, g, b) = viridis(t);
        canvas.rect(x, y + yy, w, 1, [r, g, b]);
    }
    canvas.outline_thin(x - 1, y - 1, w + 2, h + 2, [120, 120, 120]);
    canvas.text(top_label, 11.0, x + w + 5, y + 4);
    canvas.text("0", 11.0, x + w + 5, y + h - 1);
    for (i, line) in caption.iter().enumerate() {
        canvas.text(line, 10.0, x - 2, y + h + 16 + 13 * i as i32);
    }
}

/// The special tokens' shares of `row` in few words, for a small overlay: CLS and DIST each,
/// the registers together (`REG×4 0.31`), so none is dropped.
fn compact_specials(image: &ImageInput, row: &[f32]) -> Vec<String> {
    let mut out = Vec::new();
    let (mut regs, mut reg_sum) = (0, 0f32);
    for k in image.special_tokens() {
        let v = row.get(k).copied().unwrap_or(0.0);
        match image.cells[k] {
            Cell::Register { .. } => {
                regs += 1;
                reg_sum += v;
            }
            c => out.push(format!("{} {v:.2}", c.label())),
        }
    }
    if regs > 0 {
        out.push(format!("REG×{regs} {reg_sum:.2}"));
    }
    out
}

/// A colour scale end: three significant digits (`0.512`, `0.0213`), as the heatmaps' bars.
fn bar_number(v: f32) -> String {
    crate::scale_number(v)
}

/// The special tokens' shares of `row`, drawn as labelled bars from (`x`, `y`).
fn specials_panel(canvas: &mut Canvas, image: &ImageInput, row: &[f32], x: i32, y: i32, size: f64) {
    let step = (size * 1.9) as i32;
    for (i, (label, v)) in image.specials_of(row).into_iter().enumerate() {
        let yy = y + i as i32 * step;
        canvas.text(&format!("{label} {v:.3}"), size, x, yy);
        let bar = (v.clamp(0.0, 1.0) * 80.0).round() as i32;
        canvas.rect(
            x,
            yy + (size * 0.6) as i32,
            bar.max(1),
            (size * 0.4).max(2.0) as i32,
            [68, 1, 84],
        );
    }
}

fn mean_heads(att: &Attention, layer: usize, unit: usize) -> Vec<f32> {
    let nk = att.n_keys();
    let mut out = vec![0f32; nk];
    for h in 0..att.heads() {
        let m = att.head(layer, h);
        for (o, v) in out.iter_mut().zip(&m[unit * nk..(unit + 1) * nk]) {
            *o += v / att.heads() as f32;
        }
    }
    out
}

fn head_row(att: &Attention, layer: usize, head: HeadSel, unit: usize) -> Vec<f32> {
    let nk = att.n_keys();
    match head {
        HeadSel::Index(h) => att.head(layer, h)[unit * nk..(unit + 1) * nk].to_vec(),
        HeadSel::Mean => mean_heads(att, layer, unit),
    }
}

/// One overlay (`row` by token) with the special tokens' panel and the colour bar beside it.
fn single_overlay(
    image: &ImageInput,
    row: &[f32],
    token: Option<usize>,
    title: &str,
    query: &str,
    rollout: bool,
) -> (Vec<u8>, usize, usize) {
    let (px, w, h) = overlay(image, row, 448, token);
    let panel = 170;
    let top = 34;
    let specials = image.special_tokens().len() as i32;
    let bar_y = top as i32 + 30 + specials * 23 + 16;
    let bar_h = 160;
    let mut c = Canvas::new(
        w + panel + 16,
        (h + top + 8).max(bar_y as usize + bar_h as usize + 50),
    );
    c.text(&format!("{title} · {query}"), 15.0, 8, 14);
    blit(&mut c, &px, w, h, 8, top);
    c.text(
        if specials > 0 {
            "special tokens"
        } else {
            "no special tokens"
        },
        12.0,
        (w + 18) as i32,
        top as i32 + 8,
    );
    specials_panel(&mut c, image, row, (w + 18) as i32, top as i32 + 30, 12.0);
    let max = image.on_grid(row).into_iter().fold(0f32, f32::max);
    let caption: &[&str] = if rollout {
        &["rollout weight", "on the patches"]
    } else {
        &["attention weight", "on the patches"]
    };
    colour_bar(
        &mut c,
        (w + 20) as i32,
        bar_y,
        bar_h,
        &bar_number(max),
        caption,
    );
    (c.px, c.w, c.h)
}

/// One overlay per head (`rows[h]` by token) in a grid, each on its own scale.
fn heads_grid(
    image: &ImageInput,
    rows_by_head: &[Vec<f32>],
    token: Option<usize>,
    title: &str,
) -> (Vec<u8>, usize, usize) {
    let heads = rows_by_head.len();
    let cols = (heads as f64).sqrt().ceil().max(1.0) as usize;
    let rows = heads.div_ceil(cols);
    let tile = 200;
    let label_h = 40;
    let top = 34;
    let grid_w = cols * (tile + 12) + 8;
    let mut c = Canvas::new(
        grid_w + 130,
        (top + rows * (tile + label_h + 8)).max(top + 260),
    );
    colour_bar(
        &mut c,
        grid_w as i32 + 8,
        top as i32 + 20,
        160,
        "max",
        &["each overlay: 0 to", "its largest patch", "weight"],
    );
    c.text(title, 15.0, 8, 14);
    for (h, row) in rows_by_head.iter().enumerate() {
        let (px, w, hh) = overlay(image, row, tile, token);
        let (x0, y0) = (
            8 + (h % cols) * (tile + 12),
            top + (h / cols) * (tile + label_h + 8),
        );
        c.text(&format!("head {h}"), 11.0, x0 as i32, y0 as i32 + 6);
        blit(&mut c, &px, w, hh, x0, y0 + 14);
        let specials = compact_specials(image, row);
        c.text(
            &specials.join("  "),
            10.0,
            x0 as i32,
            (y0 + 14 + hh + 10) as i32,
        );
    }
    (c.px, c.w, c.h)
}

/// The figure as RGB pixels `(pixels, width, height)`.
pub fn render_rgb(
    att: &Attention,
    spec: &PictureSpec,
    query: Query,
) -> Result<(Vec<u8>, usize, usize), ImageError> {
    let image = att.image.as_deref().ok_or_else(no_image)?;
    let pooling = pooling_of(att, query)?;
    let unit = query_unit(att, query)?;
    let token = att.queries().spans[unit].start;
    let qname = image.cells[token].label();
    let title_size = 15.0;
    if let Some(pooling) = pooling {
        match spec {
            PictureSpec::Rollout { .. } => {
                return Err(ImageError::Draw(super::paint::DrawError(
                    "rollout runs through the layers' token rows, and the attention-pooling head's probe is no token; pick a patch for the rollout".into(),
                )))
            }
            PictureSpec::Head { head, .. } => {
                return Ok(single_overlay(
                    image,
                    &pooling_row(pooling, *head),
                    None,
                    &format!("{} · {}", att.model.name(), pooling_what(*head)),
                    "query probe",
                    false,
                ))
            }
            PictureSpec::Layer { .. } => {
                let rows: Vec<Vec<f32>> = (0..pooling.heads)
                    .map(|h| pooling_row(pooling, HeadSel::Index(h)))
                    .collect();
                return Ok(heads_grid(
                    image,
                    &rows,
                    None,
                    &format!(
                        "{} · {} (after the last layer) · query probe",
                        att.model.name(),
                        Pooling::LABEL
                    ),
                ));
            }
            PictureSpec::Model => {}
        }
    }
    match spec {
        PictureSpec::Head { layer, .. } | PictureSpec::Rollout { layer, .. } => {
            let (row, what) = match spec {
                PictureSpec::Rollout {
                    matrix,
                    layer,
                    fusion,
                } => {
                    let nk = att.n_keys();
                    let how = match fusion {
                        Some((f, r)) => format!(
                            " ({} fusion{})",
                            crate::choice::Choice::name(*f),
                            if *r > 0.0 {
                                format!(", smallest {}% discarded", (r * 100.0).round())
                            } else {
                                String::new()
                            }
                        ),
                        None => String::new(),
                    };
                    (
                        matrix[unit * nk..(unit + 1) * nk].to_vec(),
                        format!("rollout{how} to layer {}", att.layer_number(*layer)),
                    )
                }
                _ => {
                    let head = match spec {
                        PictureSpec::Head { head, .. } => *head,
                        _ => HeadSel::Mean,
                    };
                    let what = match head {
                        HeadSel::Index(h) => format!("layer {} head {h}", att.layer_number(*layer)),
                        HeadSel::Mean => {
                            format!("layer {} mean of heads", att.layer_number(*layer))
                        }
                    };
                    (head_row(att, *layer, head, unit), what)
                }
            };
            let row = row_by_token(att, &row, image);
            Ok(single_overlay(
                image,
                &row,
                Some(token),
                &format!("{} · {what}", att.model.name()),
                &format!("query {qname}"),
                matches!(spec, PictureSpec::Rollout { .. }),
            ))
        }
        PictureSpec::Layer { layer } => {
            let rows: Vec<Vec<f32>> = (0..att.heads())
                .map(|h| row_by_token(att, &head_row(att, *layer, HeadSel::Index(h), unit), image))
                .collect();
            Ok(heads_grid(
                image,
                &rows,
                Some(token),
                &format!(
                    "{} · layer {} · query {qname}",
                    att.model.name(),
                    att.layer_number(*layer)
                ),
            ))
        }
        PictureSpec::Model => {
            let (layers, heads) = (att.layers(), att.heads());
            // The pooling head, where the model has one, as a last row under the layers.
            let pool = image.pooling.as_ref();
            let rows_drawn = layers + usize::from(pool.is_some());
            let tile = 96;
            let label_w = 60;
            let top = 50;
            let grid_w = label_w + heads * (tile + 6) + 8;
            let mut c = Canvas::new(
                grid_w + 130,
                (top + rows_drawn * (tile + 18) + 8).max(top + 260),
            );
            colour_bar(
                &mut c,
                grid_w as i32 + 8,
                top as i32 + 6,
                160,
                "max",
                &["each overlay: 0 to", "its largest patch", "weight"],
            );
            let title = match (pool, pooling.is_some()) {
                (Some(_), true) => format!(
                    "{} · every layer × head · layers: query {qname} · last row: {} (query probe)",
                    att.model.name(),
                    Pooling::LABEL
                ),
                (Some(_), false) => format!(
                    "{} · every layer × head · query {qname} · last row: {} (query probe)",
                    att.model.name(),
                    Pooling::LABEL
                ),
                _ => format!("{} · every layer × head · query {qname}", att.model.name()),
            };
            c.text(&title, title_size, 8, 14);
            for h in 0..heads {
                c.text(
                    &format!("H{h}"),
                    11.0,
                    (label_w + h * (tile + 6)) as i32,
                    top as i32 - 10,
                );
            }
            for l in 0..layers {
                let y0 = top + l * (tile + 18);
                c.text(
                    &format!("L{}", att.layer_number(l)),
                    11.0,
                    8,
                    (y0 + tile / 2) as i32,
                );
                for h in 0..heads {
                    let row = row_by_token(att, &head_row(att, l, HeadSel::Index(h), unit), image);
                    let (px, w, hh) = overlay(image, &row, tile, Some(token));
                    let x0 = label_w + h * (tile + 6);
                    blit(&mut c, &px, w, hh, x0, y0);
                    let cls = compact_specials(image, &row);
                    c.text(&cls.join(" "), 9.0, x0 as i32, (y0 + hh + 8) as i32);
                }
            }
            if let Some(pool) = pool {
                let y0 = top + layers * (tile + 18);
                c.text("pool", 11.0, 8, (y0 + tile / 2) as i32);
                for h in 0..pool.heads.min(heads) {
                    let row = pooling_row(pool, HeadSel::Index(h));
                    let (px, w, hh) = overlay(image, &row, tile, None);
                    blit(&mut c, &px, w, hh, label_w + h * (tile + 6), y0);
                }
            }
            Ok((c.px, c.w, c.h))
        }
    }
}

/// The pixels the model saw (`image.view`, after resize and crop, before normalising) as a PNG,
/// for a page or a document to draw on. `None` when the picture holds no pixels.
pub fn input_png(image: &ImageInput) -> Option<Vec<u8>> {
    let [w, h] = image.input;
    (w > 0 && h > 0 && image.view.len() == w * h * 3)
        .then(|| encode_png(&image.view, w, h).ok())
        .flatten()
}

fn encode_png(px: &[u8], w: usize, h: usize) -> Result<Vec<u8>, ImageError> {
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, w as u32, h as u32);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let draw = |e: png::EncodingError| ImageError::Draw(super::paint::DrawError(e.to_string()));
        let mut writer = enc.write_header().map_err(draw)?;
        writer.write_image_data(px).map_err(draw)?;
    }
    Ok(out)
}

/// Write the figure as PNG at `path` (atomically; `-`: standard output).
pub fn write_png(
    att: &Attention,
    spec: &PictureSpec,
    query: Query,
    path: &Path,
) -> Result<(), ImageError> {
    let (px, w, h) = render_rgb(att, spec, query)?;
    let bytes = encode_png(&px, w, h)?;
    write_output(path, |f: &mut dyn Write| f.write_all(&bytes))?;
    Ok(())
}

/// Write the figure as SVG at `path`: the drawing embedded as a PNG image (it is a picture).
pub fn write_svg(
    att: &Attention,
    spec: &PictureSpec,
    query: Query,
    path: &Path,
) -> Result<(), ImageError> {
    use base64::Engine;
    let (px, w, h) = render_rgb(att, spec, query)?;
    let bytes = encode_png(&px, w, h)?;
    let data = base64::engine::general_purpose::STANDARD.encode(bytes);
    let svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\"><image width=\"{w}\" height=\"{h}\" href=\"data:image/png;base64,{data}\"/></svg>\n"
    );
    write_output(path, |f: &mut dyn Write| f.write_all(svg.as_bytes()))?;
    Ok(())
}

/// The terminal view: the query's attention on the patch grid (one cell per patch, two
/// columns wide, coloured by viridis) beside a coarse rendering of the picture (half blocks,
/// two pixel rows per line), then the special tokens' shares. `color`: ANSI truecolour.
pub fn terminal_view(
    att: &Attention,
    layer: usize,
    head: HeadSel,
    query: Query,
    color: bool,
) -> Result<String, ImageError> {
    let image = att.image.as_deref().ok_or_else(no_image)?;
    let pooling = pooling_of(att, query)?;
    let unit = query_unit(att, query)?;
    // The query patch to mark; none for the pooling head's probe.
    let token = match pooling {
        Some(_) => usize::MAX,
        None => att.queries().spans[unit].start,
    };
    let row = match pooling {
        Some(p) => pooling_row(p, head),
        None => row_by_token(att, &head_row(att, layer, head, unit), image),
    };
    let grid = image.on_grid(&row);
    let [rows, cols] = image.grid;
    let max = grid.iter().copied().fold(0f32, f32::max).max(1e-12);
    let what = match head {
        HeadSel::Index(h) => format!("head {h}"),
        HeadSel::Mean => "mean of heads".into(),
    };
    let (at, qname) = match pooling {
        Some(_) => (format!("{} {what}", Pooling::LABEL), "probe".to_string()),
        None => (
            format!("layer {} {what}", att.layer_number(layer)),
            image.cells[token].label(),
        ),
    };
    // Into memory: the writes cannot fail.
    let mut out = Vec::new();
    let mut term = Term::new(&mut out, color);
    let _ = term.say(&format!(
        "{} · {} · {at} · query {qname} · {}×{} patches of {}px (image {}×{} → {}×{})",
        att.model.name(),
        image.source,
        rows,
        cols,
        image.patch,
        image.original[0],
        image.original[1],
        image.input[0],
        image.input[1]
    ));
    // The picture at cols·2 characters wide, rows lines high (two pixel rows per line).
    let [iw, ih] = image.input;
    let (pw, ph) = (cols * 2, rows * 2);
    let small = resample::resize(&image.view, iw, ih, pw, ph, Filter::Bilinear);
    let shades = [' ', '░', '▒', '▓', '█'];
    // Without colour, each character is the mean brightness of its two pixels, stretched over
    // the picture's own range so that a dim photo (dusk, a dark scan) still uses every shade.
    let luma = |x: usize, r: usize| -> u32 {
        let px = |y: usize| &small[(y * pw + x) * 3..][..3];
        px(2 * r)
            .iter()
            .chain(px(2 * r + 1))
            .map(|&v| u32::from(v))
            .sum::<u32>()
    };
    let (lo, hi) = (0..rows)
        .flat_map(|r| (0..pw).map(move |x| (x, r)))
        .map(|(x, r)| luma(x, r))
        .fold((u32::MAX, 0), |(lo, hi), l| (lo.min(l), hi.max(l)));
    let span = hi.saturating_sub(lo).max(1);
    let white = Rgb(255, 255, 255);
    for r in 0..rows {
        let mut line = Line::new();
        for c in 0..cols {
            let t = grid[r * cols + c] / max;
            let is_q = image.cell(token) == Some(Cell::Patch { row: r, col: c });
            let mark = if is_q { "<>" } else { "  " };
            if color {
                line.paint(
                    Paint::On {
                        fg: white,
                        bg: viridis(t),
                    },
                    mark,
                );
            } else if is_q {
                line.push(mark);
            } else {
                line.push(
                    &shades[((t * 4.0).round() as usize).min(4)]
                        .to_string()
                        .repeat(2),
                );
            }
        }
        line.push("   ");
        for x in 0..pw {
            if color {
                let px = |y: usize| {
                    let p = &small[(y * pw + x) * 3..][..3];
                    Rgb(p[0], p[1], p[2])
                };
                line.paint(
                    Paint::On {
                        fg: px(2 * r),
                        bg: px(2 * r + 1),
                    },
                    "▀",
                );
            } else {
                let t = (luma(x, r) - lo) as usize * 5 / (span as usize + 1);
                line.push(&shades[t.min(4)].to_string());
            }
        }
        let _ = term.line(&line);
    }
    let specials = image.specials_of(&row);
    if specials.is_empty() {
        term.text(&format!("patch attention max {max:.4}; no special tokens"));
    } else {
        term.text(&format!("patch attention max {max:.4}; special tokens:"));
    }
    for (label, v) in specials {
        term.text(&format!("  {label} {v:.4}"));
    }
    let _ = term.end_line();
    drop(term);
    Ok(String::from_utf8_lossy(&out).into_owned())
}
