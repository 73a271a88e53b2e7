//! Attention drawn on the picture a vision model saw (the attention's
//! [`ImageInput`]): one query's attention over the patch
//! grid overlaid on the image with alpha, a layer's heads as a grid of overlays, the whole
//! model as layers × heads, and rollout over the image. The special tokens' shares (CLS,
//! distillation, registers) are listed beside each overlay, never dropped. Also the terminal's
//! version: the patch-grid heatmap beside a coarse rendering of the image.

use std::io::Write;
use std::path::Path;

use super::canvas::{Canvas, Look};
use super::font;
use super::scale::Scale;
use super::{ImageError, ImageOptions};
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
    /// Unit `N` of a vision-language model's input (as the views number them): its attention
    /// to the image tokens, drawn over the picture they stand for.
    Token(usize),
    /// Every token a vision-language model generated, each one's attention to the image tokens
    /// over the picture: a strip of small overlays, one per generated token.
    Generated,
}

/// `ROW,COL` (two numbers from 0) or `pool`, as a [`Query`].
impl std::str::FromStr for Query {
    type Err = ParseQueryError;

    fn from_str(s: &str) -> Result<Query, ParseQueryError> {
        let patch = s.split_once(',').and_then(|(r, c)| {
            Some((
                r.trim().parse::<usize>().ok()?,
                c.trim().parse::<usize>().ok()?,
            ))
        });
        match patch {
            Some((r, c)) => Ok(Query::Patch(r, c)),
            None if s.trim().eq_ignore_ascii_case("pool") => Ok(Query::Pool),
            None if s.trim().eq_ignore_ascii_case("generated") => Ok(Query::Generated),
            None => match s.trim().parse::<usize>() {
                Ok(n) => Ok(Query::Token(n)),
                Err(_) => Err(ParseQueryError(s.to_string())),
            },
        }
    }
}

/// Text that is not a [`Query`]: it holds the text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "{0:?} is not ROW,COL (two numbers from 0, like 3,5), pool, a token's number N or generated"
)]
pub struct ParseQueryError(pub String);

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
        /// ([`crate::analysis::fused_rollout`](fn@crate::analysis::fused_rollout)), for the title; `None`: the plain rollout.
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
        Query::Token(_) | Query::Generated => {
            return Err(ImageError::Draw(super::paint::DrawError(
                "a vision model's query is a patch ROW,COL, the class token or pool, not a \
                 token's number"
                    .into(),
            )))
        }
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

/// The overlay of one attention row (by token) on the picture, at most `side` layout pixels on
/// the longer side, with the query patch outlined: its pixels, their width and height, and its
/// layout width and height.
pub(super) struct Overlay {
    px: Vec<u8>,
    pw: usize,
    ph: usize,
    pub(super) w: usize,
    pub(super) h: usize,
}

pub(super) fn overlay(
    image: &ImageInput,
    row: &[f32],
    side: usize,
    query: Option<usize>,
    look: &Look,
) -> Overlay {
    let bar = look.scale_of(&image.on_grid(row));
    overlay_on(image, row, side, query, look, &bar)
}

/// [`overlay`] on the colour scale `bar` (one shared by several overlays).
fn overlay_on(
    image: &ImageInput,
    row: &[f32],
    side: usize,
    query: Option<usize>,
    look: &Look,
    bar: &Scale,
) -> Overlay {
    let [iw, ih] = image.input;
    let fit = side as f64 / iw.max(ih) as f64;
    let (w, h) = (
        ((iw as f64 * fit).round() as usize).max(1),
        ((ih as f64 * fit).round() as usize).max(1),
    );
    let (pw, ph) = (look.px(w), look.px(h));
    let scale = pw as f64 / iw as f64;
    let base = resample::resize(&image.view, iw, ih, pw, ph, Filter::Bilinear);
    let grid = image.on_grid(row);
    let [rows, cols] = image.grid;
    let p = image.patch as f64 * scale;
    let mut px = base;
    for y in 0..ph {
        for x in 0..pw {
            let (r, c) = ((y as f64 / p) as usize, (x as f64 / p) as usize);
            let i = (y * pw + x) * 3;
            if r >= rows || c >= cols {
                // Pixels no patch covers (a side not a multiple of the patch): dimmed.
                for v in &mut px[i..i + 3] {
                    *v /= 3;
                }
                continue;
            }
            let t = bar.unit(grid[r * cols + c]);
            let Rgb(cr, cg, cb) = look.ramp.at(t);
            let a = 0.25 + 0.5 * t;
            let gray =
                (px[i] as f32 * 0.3 + px[i + 1] as f32 * 0.59 + px[i + 2] as f32 * 0.11) * 0.85;
            for (k, col) in [cr, cg, cb].into_iter().enumerate() {
                px[i + k] = (gray * (1.0 - a) + col as f32 * a).round() as u8;
            }
        }
    }
    if let Some(Cell::Patch { row: qr, col: qc }) = query.and_then(|q| image.cell(q)) {
        // A white frame two layout pixels thick round the query patch.
        let (x0, y0) = ((qc as f64 * p) as usize, (qr as f64 * p) as usize);
        let (x1, y1) = (
            ((x0 as f64 + p).round() as usize).min(pw),
            ((y0 as f64 + p).round() as usize).min(ph),
        );
        let t = look.px(2);
        for y in y0..y1 {
            for x in x0..x1 {
                if x < x0 + t || x + t >= x1 || y < y0 + t || y + t >= y1 {
                    px[(y * pw + x) * 3..][..3].copy_from_slice(&[255, 255, 255]);
                }
            }
        }
    }
    Overlay { px, pw, ph, w, h }
}

impl Canvas {
    pub(super) fn overlay_at(&mut self, o: &Overlay, x: usize, y: usize) {
        self.blit(&o.px, o.pw, o.ph, x as i32, y as i32);
    }
}

/// The colour bar's caption: what its values are, on which scale.
fn caption_of(what: &str, scale: &Scale) -> Vec<String> {
    let mut lines = vec![what.to_string(), "on the patches".to_string()];
    let suffix = scale.caption_suffix().trim();
    if !suffix.is_empty() {
        lines.push(suffix.to_string());
    }
    lines
}

/// The ticks of a bar for overlays each on its own scale: shares of each overlay's largest patch
/// weight (`max`, `0.5 max`, …) where [`Scale::ticks`] of a bar up to 1 puts them.
fn relative_ticks(scale: &Scale) -> (Scale, Vec<(f32, String)>) {
    let unit = Scale {
        max: 1.0,
        kind: scale.kind,
    };
    let ticks = unit
        .ticks()
        .into_iter()
        .map(|(v, label)| {
            let label = match label.as_str() {
                "1" | "1.0" => "max".to_string(),
                "0" | "0.0" => "0".to_string(),
                _ => format!("{label} max"),
            };
            (v, label)
        })
        .collect();
    (unit, ticks)
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

/// The special tokens' shares of `row`, drawn as labelled bars from (`x`, `y`).
#[allow(clippy::too_many_arguments)]
fn specials_panel(
    canvas: &mut Canvas,
    image: &ImageInput,
    row: &[f32],
    x: i32,
    y: i32,
    size: f64,
    look: &Look,
) {
    let step = (size * 1.9) as i32;
    for (i, (label, v)) in image.specials_of(row).into_iter().enumerate() {
        let yy = y + i as i32 * step;
        canvas.text(&format!("{label} {v:.3}"), size, x, yy, look.pal.text);
        let bar = (v.clamp(0.0, 1.0) * 80.0).round() as i32;
        canvas.rect(
            x,
            yy + (size * 0.6) as i32,
            bar.max(1),
            (size * 0.4).max(2.0) as i32,
            look.ramp.at(0.85),
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

pub(super) fn head_row(att: &Attention, layer: usize, head: HeadSel, unit: usize) -> Vec<f32> {
    let nk = att.n_keys();
    match head {
        HeadSel::Index(h) => att.head(layer, h)[unit * nk..(unit + 1) * nk].to_vec(),
        HeadSel::Mean => mean_heads(att, layer, unit),
    }
}

/// The line under a picture figure's title: which picture, at what size, and whether fitting
/// it to the model's input stretched, cropped or padded it.
fn picture_line(image: &ImageInput) -> String {
    let [ow, oh] = image.original;
    let [iw, ih] = image.input;
    let mut line = format!(
        "{}, {ow}×{oh} px, as the model saw it: {iw}×{ih} px",
        image.source
    );
    let framing = image.framing();
    if !framing.is_empty() {
        line.push_str(&format!(", {}", framing.join("; ")));
    } else if [ow, oh] != [iw, ih] {
        line.push_str(", scaled");
    }
    font::label(&line, 140)
}

/// The title and the picture's line at the top of a figure; returns the y below them.
pub(super) fn heading(c: &mut Canvas, title: &str, image: &ImageInput, look: &Look) -> usize {
    c.text(title, 15.0, 8, 14, look.pal.text);
    c.text(&picture_line(image), 11.0, 8, 32, look.pal.muted);
    48
}

/// How wide the heading needs the figure to be.
pub(super) fn heading_width(title: &str, image: &ImageInput) -> usize {
    let w = |s: &str, size: f64| font::width(&font::drawable(s), size, false) as usize;
    w(title, 15.0).max(w(&picture_line(image), 11.0)) + 16
}

/// One overlay (`row` by token) with the special tokens' panel and the colour bar beside it.
#[allow(clippy::too_many_arguments)]
pub(super) fn single_overlay(
    image: &ImageInput,
    row: &[f32],
    token: Option<usize>,
    title: &str,
    query: &str,
    what: &str,
    look: &Look,
) -> Result<Canvas, ImageError> {
    let o = overlay(image, row, 448, token, look);
    let title = format!("{title} · {query}");
    let panel = 170;
    let top = 52;
    let specials = image.special_tokens().len() as i32;
    let bar_y = top as i32 + 30 + specials * 23 + 16;
    let bar_h = 160;
    let mut c = Canvas::new(
        (o.w + panel + 16).max(heading_width(&title, image)),
        (o.h + top + 8).max(bar_y as usize + bar_h as usize + 64),
        look,
    )?;
    heading(&mut c, &title, image, look);
    c.overlay_at(&o, 8, top);
    c.text(
        if specials > 0 {
            "special tokens"
        } else {
            "no special tokens"
        },
        12.0,
        (o.w + 18) as i32,
        top as i32 + 8,
        look.pal.text,
    );
    specials_panel(
        &mut c,
        image,
        row,
        (o.w + 18) as i32,
        top as i32 + 30,
        12.0,
        look,
    );
    let scale = look.scale_of(&image.on_grid(row));
    c.colour_bar(
        look,
        ((o.w + 20) as i32, bar_y, bar_h),
        &scale,
        &scale.ticks(),
        &caption_of(what, &scale),
    );
    Ok(c)
}

/// Two overlays of one row side by side on one colour scale, each with its label above it: a
/// cut picture's tiles put back together (`tiles`, the larger) and its whole view (`whole`).
/// Each is `(image, row by its cells, label)`.
pub(super) fn pair_overlay(
    tiles: (&ImageInput, &[f32], &str),
    whole: (&ImageInput, &[f32], &str),
    title: &str,
    what: &str,
    look: &Look,
) -> Result<Canvas, ImageError> {
    let grids = [tiles.0.on_grid(tiles.1), whole.0.on_grid(whole.1)];
    let scale = look.scale_of(grids.iter().flatten());
    let big = overlay_on(tiles.0, tiles.1, 448, None, look, &scale);
    let small = overlay_on(whole.0, whole.1, 224, None, look, &scale);
    let (top, gap, panel) = (52, 16, 150);
    let bar_h = 160;
    let width = 8 + big.w + gap + small.w + panel;
    let mut c = Canvas::new(
        width.max(heading_width(title, tiles.0)),
        (top + 22 + big.h.max(small.h) + 8).max(top + 22 + bar_h + 64),
        look,
    )?;
    heading(&mut c, title, tiles.0, look);
    c.text(tiles.2, 12.0, 8, top as i32 + 8, look.pal.text);
    c.overlay_at(&big, 8, top + 22);
    let x = 8 + big.w + gap;
    c.text(whole.2, 12.0, x as i32, top as i32 + 8, look.pal.text);
    c.overlay_at(&small, x, top + 22);
    c.colour_bar(
        look,
        ((x + small.w + 20) as i32, top as i32 + 22, bar_h as i32),
        &scale,
        &scale.ticks(),
        &caption_of(what, &scale),
    );
    Ok(c)
}

/// One overlay per head (`rows[h]` by token) in a grid, each on its own scale.
pub(super) fn heads_grid(
    image: &ImageInput,
    rows_by_head: &[Vec<f32>],
    token: Option<usize>,
    title: &str,
    look: &Look,
) -> Result<Canvas, ImageError> {
    let heads = rows_by_head.len();
    let cols = (heads as f64).sqrt().ceil().max(1.0) as usize;
    let rows = heads.div_ceil(cols);
    let tile = 200;
    let label_h = 40;
    let top = 52;
    let grid_w = cols * (tile + 12) + 8;
    let mut c = Canvas::new(
        (grid_w + 130).max(heading_width(title, image)),
        (top + rows * (tile + label_h + 8)).max(top + 280),
        look,
    )?;
    own_scale_bar(&mut c, (grid_w as i32 + 8, top as i32 + 20), look);
    heading(&mut c, title, image, look);
    for (h, row) in rows_by_head.iter().enumerate() {
        let o = overlay(image, row, tile, token, look);
        let (x0, y0) = (
            8 + (h % cols) * (tile + 12),
            top + (h / cols) * (tile + label_h + 8),
        );
        c.text(
            &format!("head {h}"),
            11.0,
            x0 as i32,
            y0 as i32 + 6,
            look.pal.text,
        );
        c.overlay_at(&o, x0, y0 + 14);
        let specials = compact_specials(image, row);
        c.text(
            &specials.join("  "),
            10.0,
            x0 as i32,
            (y0 + 14 + o.h + 10) as i32,
            look.pal.text,
        );
    }
    Ok(c)
}

/// The colour bar of figures whose every overlay is on its own scale.
pub(super) fn own_scale_bar(c: &mut Canvas, (x, y): (i32, i32), look: &Look) {
    let (unit, ticks) = relative_ticks(&look.scale_of(&[1.0]));
    let mut caption = vec![
        "each overlay on its".to_string(),
        "own scale, up to its".to_string(),
        "largest patch weight".to_string(),
    ];
    let suffix = unit.caption_suffix().trim();
    if !suffix.is_empty() {
        caption.push(suffix.to_string());
    }
    c.colour_bar(look, (x, y, 160), &unit, &ticks, &caption);
}

/// The figure as RGB pixels `(pixels, width, height)`, drawn as `opts` asks (colour map,
/// theme, scale, scale factor).
pub fn render_rgb(
    att: &Attention,
    spec: &PictureSpec,
    query: Query,
    opts: &ImageOptions,
) -> Result<(Vec<u8>, usize, usize), ImageError> {
    let factor = opts.scale_factor;
    if !(super::MIN_SCALE_FACTOR..=super::MAX_SCALE_FACTOR).contains(&factor) {
        return Err(ImageError::ScaleFactor(factor));
    }
    let look = Look::of(opts);
    let c = draw(att, spec, query, &look)?;
    Ok((c.px, c.w, c.h))
}

fn draw(
    att: &Attention,
    spec: &PictureSpec,
    query: Query,
    look: &Look,
) -> Result<Canvas, ImageError> {
    if att.image.is_none() && !att.pictures.is_empty() {
        return super::on_picture::draw(att, spec, query, look);
    }
    let image = att.image.as_deref().ok_or_else(no_image)?;
    let pooling = pooling_of(att, query)?;
    let unit = query_unit(att, query)?;
    let token = att.queries().spans[unit].start;
    let qname = image.cells[token].label();
    let weight = crate::weight_caption(att);
    if let Some(pooling) = pooling {
        match spec {
            PictureSpec::Rollout { .. } => {
                return Err(ImageError::Draw(super::paint::DrawError(
                    "rollout runs through the layers' token rows, and the attention-pooling head's probe is no token; pick a patch for the rollout".into(),
                )))
            }
            PictureSpec::Head { head, .. } => {
                return single_overlay(
                    image,
                    &pooling_row(pooling, *head),
                    None,
                    &format!("{} · {}", att.model.name(), pooling_what(*head)),
                    "query probe",
                    crate::WEIGHT_CAPTION,
                    look,
                )
            }
            PictureSpec::Layer { .. } => {
                let rows: Vec<Vec<f32>> = (0..pooling.heads)
                    .map(|h| pooling_row(pooling, HeadSel::Index(h)))
                    .collect();
                return heads_grid(
                    image,
                    &rows,
                    None,
                    &format!(
                        "{} · {} (after the last layer) · query probe",
                        att.model.name(),
                        Pooling::LABEL
                    ),
                    look,
                );
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
            let rollout = matches!(spec, PictureSpec::Rollout { .. });
            single_overlay(
                image,
                &row,
                Some(token),
                &format!("{} · {what}", att.model.name()),
                &format!("query {qname}"),
                if rollout { "rollout weight" } else { weight },
                look,
            )
        }
        PictureSpec::Layer { layer } => {
            let rows: Vec<Vec<f32>> = (0..att.heads())
                .map(|h| row_by_token(att, &head_row(att, *layer, HeadSel::Index(h), unit), image))
                .collect();
            heads_grid(
                image,
                &rows,
                Some(token),
                &format!(
                    "{} · layer {} · query {qname}",
                    att.model.name(),
                    att.layer_number(*layer)
                ),
                look,
            )
        }
        PictureSpec::Model => {
            let (layers, heads) = (att.layers(), att.heads());
            // The pooling head, where the model has one, as a last row under the layers.
            let pool = image.pooling.as_ref();
            let rows_drawn = layers + usize::from(pool.is_some());
            let tile = 96;
            let label_w = 60;
            let top = 66;
            let grid_w = label_w + heads * (tile + 6) + 8;
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
            let mut c = Canvas::new(
                (grid_w + 130).max(heading_width(&title, image)),
                (top + rows_drawn * (tile + 18) + 8).max(top + 280),
                look,
            )?;
            own_scale_bar(&mut c, (grid_w as i32 + 8, top as i32 + 6), look);
            heading(&mut c, &title, image, look);
            for h in 0..heads {
                c.text(
                    &format!("H{h}"),
                    11.0,
                    (label_w + h * (tile + 6)) as i32,
                    top as i32 - 10,
                    look.pal.text,
                );
            }
            for l in 0..layers {
                let y0 = top + l * (tile + 18);
                c.text(
                    &format!("L{}", att.layer_number(l)),
                    11.0,
                    8,
                    (y0 + tile / 2) as i32,
                    look.pal.text,
                );
                for h in 0..heads {
                    let row = row_by_token(att, &head_row(att, l, HeadSel::Index(h), unit), image);
                    let o = overlay(image, &row, tile, Some(token), look);
                    let x0 = label_w + h * (tile + 6);
                    c.overlay_at(&o, x0, y0);
                    let cls = compact_specials(image, &row);
                    c.text(
                        &cls.join(" "),
                        9.0,
                        x0 as i32,
                        (y0 + o.h + 8) as i32,
                        look.pal.text,
                    );
                }
            }
            if let Some(pool) = pool {
                let y0 = top + layers * (tile + 18);
                c.text("pool", 11.0, 8, (y0 + tile / 2) as i32, look.pal.text);
                for h in 0..pool.heads.min(heads) {
                    let row = pooling_row(pool, HeadSel::Index(h));
                    let o = overlay(image, &row, tile, None, look);
                    c.overlay_at(&o, label_w + h * (tile + 6), y0);
                }
            }
            Ok(c)
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
    opts: &ImageOptions,
    path: &Path,
) -> Result<(), ImageError> {
    let (px, w, h) = render_rgb(att, spec, query, opts)?;
    let bytes = encode_png(&px, w, h)?;
    write_output(path, |f: &mut dyn Write| f.write_all(&bytes))?;
    Ok(())
}

/// Write the figure as SVG at `path`: the drawing embedded as a PNG image (it is a picture).
pub fn write_svg(
    att: &Attention,
    spec: &PictureSpec,
    query: Query,
    opts: &ImageOptions,
    path: &Path,
) -> Result<(), ImageError> {
    use base64::Engine;
    // The SVG shows the picture at its layout size, whatever the scale factor's pixels.
    let (px, w, h) = render_rgb(att, spec, query, opts)?;
    let k = opts.scale_factor as f64;
    let (lw, lh) = (
        (w as f64 / k).round() as usize,
        (h as f64 / k).round() as usize,
    );
    let bytes = encode_png(&px, w, h)?;
    let data = base64::engine::general_purpose::STANDARD.encode(bytes);
    let svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{lw}\" height=\"{lh}\" viewBox=\"0 0 {lw} {lh}\"><image width=\"{lw}\" height=\"{lh}\" href=\"data:image/png;base64,{data}\"/></svg>\n"
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
    Ok(terminal_grid(
        att.model.name(),
        image,
        &row,
        token,
        &format!("{at} · query {qname}"),
        None,
        color,
    ))
}

/// The patch-grid heatmap of `row` (by token, in `image.cells`' order) beside the picture, with
/// `token`'s patch marked (`usize::MAX`: none), under a line naming `model`, the picture and
/// `what`; `note` goes under the grid in place of the special tokens' shares.
pub(super) fn terminal_grid(
    model: &str,
    image: &ImageInput,
    row: &[f32],
    token: usize,
    what: &str,
    note: Option<&str>,
    color: bool,
) -> String {
    let grid = image.on_grid(row);
    let [rows, cols] = image.grid;
    let max = grid.iter().copied().fold(0f32, f32::max).max(1e-12);
    let framing: String = image.framing().iter().map(|f| format!(", {f}")).collect();
    // Into memory: the writes cannot fail.
    let mut out = Vec::new();
    let mut term = Term::new(&mut out, color);
    let _ = term.say(&format!(
        "{model} · {} · {what} · {}×{} patches of {}px (image {}×{} → {}×{}{framing})",
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
    let specials = image.specials_of(row);
    if let Some(note) = note {
        term.text(&format!("patch attention max {max:.4}; {note}"));
    } else if specials.is_empty() {
        term.text(&format!("patch attention max {max:.4}; no special tokens"));
    } else {
        term.text(&format!("patch attention max {max:.4}; special tokens:"));
    }
    for (label, v) in specials {
        term.text(&format!("  {label} {v:.4}"));
    }
    let _ = term.end_line();
    drop(term);
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::fixtures::synthetic;
    use crate::attention::image::{Preprocessing, Resize};
    use crate::image::{ColorScale, Colormap, Theme};

    /// CLS and a 2 × 3 grid of 4-pixel patches over a 12 × 8 input, resized from a 45 × 37
    /// photo (stretched); the last patch holds most of CLS's attention, the rest a little each.
    fn pictured() -> Attention {
        let labels = ["CLS", "0,0", "0,1", "0,2", "1,0", "1,1", "1,2"];
        let n = labels.len();
        let mut att = synthetic(&labels, 1, 1);
        let mut cells = vec![Cell::Class];
        for row in 0..2 {
            for col in 0..3 {
                cells.push(Cell::Patch { row, col });
            }
        }
        let mut weights = vec![1.0 / n as f32; n * n];
        weights[..n].copy_from_slice(&[0.0, 0.01, 0.01, 0.01, 0.01, 0.01, 0.95]);
        att = att
            .derive(att.level, false, att.queries().clone(), None, weights)
            .unwrap();
        att.with_image(ImageInput {
            source: "photo.jpg".into(),
            original: [45, 37],
            input: [12, 8],
            patch: 4,
            grid: [2, 3],
            preprocessing: Preprocessing {
                color: "rgb8".into(),
                resize: Some(Resize {
                    width: 12,
                    height: 8,
                    filter: "bilinear",
                }),
                crop: None,
                rescale: None,
                normalize: None,
                positions_from: None,
            },
            cells,
            norms: Vec::new(),
            pooling: None,
            windows: None,
            view: vec![128; 12 * 8 * 3],
        })
        .unwrap()
    }

    fn draw_with(att: &Attention, opts: &ImageOptions) -> (Vec<u8>, usize, usize) {
        let spec = PictureSpec::Head {
            layer: 0,
            head: HeadSel::Index(0),
        };
        render_rgb(att, &spec, Query::Cls, opts).unwrap()
    }

    /// The colour of the overlay's pixel over patch (row, col) of the 448-pixel overlay drawn at
    /// (8, 52): 448 / 12 pixels per input pixel, 4 input pixels per patch.
    fn patch_pixel(px: &[u8], w: usize, k: usize, row: usize, col: usize) -> [u8; 3] {
        let side = 448.0 / 12.0 * 4.0;
        let (x, y) = (
            ((8.0 + side * (col as f64 + 0.5)) * k as f64) as usize,
            ((52.0 + side * (row as f64 + 0.5)) * k as f64) as usize,
        );
        let i = (y * w + x) * 3;
        [px[i], px[i + 1], px[i + 2]]
    }

    #[test]
    fn picture_figures_follow_theme_colour_map_scale_and_scale_factor() {
        let att = pictured();
        let plain = ImageOptions::default();
        let (px, w, h) = draw_with(&att, &plain);
        // Light: a white background; the weak patch is a dim viridis, the strong one bright.
        assert_eq!(&px[..3], &[255, 255, 255]);
        let weak = patch_pixel(&px, w, 1, 0, 0);
        // Dark theme: the background of the dark palette.
        let (dark, ..) = draw_with(
            &att,
            &ImageOptions {
                theme: Theme::Dark,
                ..plain
            },
        );
        assert_eq!(&dark[..3], &[0x16, 0x18, 0x1c]);
        // Another colour map colours the patches otherwise.
        let (magma, ..) = draw_with(
            &att,
            &ImageOptions {
                colormap: Colormap::Magma,
                ..plain
            },
        );
        assert_ne!(patch_pixel(&magma, w, 1, 0, 0), weak);
        // A square root lifts the weak patches (0.01 of a 0.95 peak: a tenth of the way up
        // instead of a hundredth), so they take more of the map's colour over the grey picture.
        let (sqrt, ..) = draw_with(
            &att,
            &ImageOptions {
                scale: ColorScale::Sqrt,
                ..plain
            },
        );
        let lifted = patch_pixel(&sqrt, w, 1, 0, 0);
        assert_ne!(lifted, weak);
        assert_eq!(patch_pixel(&sqrt, w, 1, 1, 2), patch_pixel(&px, w, 1, 1, 2));
        // Twice the pixels along each side, the same drawing.
        let (big, bw, bh) = draw_with(
            &att,
            &ImageOptions {
                scale_factor: 2.0,
                ..plain
            },
        );
        assert_eq!((bw, bh), (2 * w, 2 * h));
        assert_eq!(patch_pixel(&big, bw, 2, 0, 0), weak);
    }

    #[test]
    fn picture_figures_name_the_picture_and_how_it_was_fitted() {
        let att = pictured();
        assert_eq!(
            picture_line(att.image.as_deref().unwrap()),
            "photo.jpg, 45×37 px, as the model saw it: 12×8 px, stretched from 1.22:1 to 3:2"
        );
    }
}
