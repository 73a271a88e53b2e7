//! A mixture-of-experts model's router as a figure: for one routed layer, tokens (rows) ×
//! experts (columns) coloured by the router's probability, each token's chosen experts outlined
//! with the weight their output was added with written inside; under it, the expert load of
//! every routed layer (layers × experts, the tokens that chose each expert), on the same
//! columns, the shown layer's row marked.

use std::io::Write;
use std::path::Path;

use super::font;
use super::paint;
use super::scene::{frame, Align, Cells, Item, Rect, Scene, Text};
use super::theme::{Palette, Rgb};
use super::{ImageError, ImageOptions, SvgError};
use crate::analysis::lens::readable;
use crate::attention::{Router, RouterLayer};
use crate::colormap::Ramp;
use crate::output::write_output;

const MARGIN: i32 = 16;
const CELL_H: u32 = 20;
const TEXT: f64 = 11.0;
const LABEL: f64 = 12.0;
const TITLE: f64 = 16.0;
/// The most characters of a token label.
const LABEL_CHARS: usize = 16;
/// The widest the heat maps are drawn, in pixels, before their cells shrink.
const HEAT_MAX_W: u32 = 760;
/// Cells at least this wide carry their number (a chosen expert's weight, a load).
const NUMBERED_W: u32 = 26;

/// The router figure of the model's layer `layer` (its number, from 0), its tokens labelled by
/// `labels` where given (one per token) or as the router recorded them.
#[derive(Clone, Copy, Debug)]
pub struct RouterSpec<'a> {
    /// The routers' decisions.
    pub router: &'a Router,
    /// The model's number of the layer whose tokens × experts map is drawn.
    pub layer: usize,
    /// Token labels (the attention's display texts), one per token.
    pub labels: Option<&'a [String]>,
}

/// A router figure asked of a layer without experts.
fn dense(router: &Router, layer: usize) -> ImageError {
    let routed: Vec<String> = router.layers.iter().map(|l| l.layer.to_string()).collect();
    ImageError::DenseLayer {
        layer,
        routed: routed.join(", "),
    }
}

/// The router figure's scene.
fn scene(spec: &RouterSpec<'_>, title: &str, options: &ImageOptions) -> Result<Scene, ImageError> {
    let router = spec.router;
    let routed: &RouterLayer = router
        .layer(spec.layer)
        .ok_or_else(|| dense(router, spec.layer))?;
    let pal = Palette::of(options.theme);
    let ramp = Ramp::new(options.colormap, options.theme);
    let (n, e, k) = (router.tokens.len(), router.experts, router.top_k);
    let labels: Vec<String> = spec
        .labels
        .filter(|l| l.len() == n)
        .unwrap_or(&router.tokens)
        .iter()
        .enumerate()
        .map(|(i, t)| format!("{i} {}", font::label(&readable(t), LABEL_CHARS)))
        .collect();
    let layer_labels: Vec<String> = router
        .layers
        .iter()
        .map(|l| format!("layer {}", l.layer))
        .collect();
    let cell_w = (HEAT_MAX_W / e.max(1) as u32).clamp(4, 40);
    // Expert numbers under every column, or every few where the columns are narrow.
    let every = (1..)
        .find(|s| cell_w * s >= font::width(&format!("{}", e - 1), LABEL, false) + 6)
        .unwrap_or(1) as usize;
    let label_w = labels
        .iter()
        .chain(&layer_labels)
        .map(|l| font::width(l, LABEL, false))
        .max()
        .unwrap_or(0) as i32;
    let heat_x = MARGIN + label_w + 8;
    let subtitle = format!(
        "{e} experts, top {k} per token ({}); colour: the router's probability; outlined: the \
         chosen experts, with their weights",
        if router.renormalised {
            "weights renormalised to sum to 1"
        } else {
            "weights are the probabilities"
        }
    );
    let heat_y = MARGIN + 2 * TITLE as i32 + 14;
    let heat_w = e as u32 * cell_w;
    let heat_h = n as u32 * CELL_H;
    let text = |x, y, s: String, size, bold, color, align| {
        Item::Text(Text {
            x,
            y,
            text: s,
            size,
            bold,
            color,
            align,
            up: false,
        })
    };
    let mut items = vec![
        text(
            MARGIN,
            MARGIN + TITLE as i32 / 2,
            title.to_string(),
            TITLE,
            true,
            pal.text,
            Align::Start,
        ),
        text(
            MARGIN,
            MARGIN + TITLE as i32 + 10,
            subtitle.clone(),
            LABEL,
            false,
            pal.muted,
            Align::Start,
        ),
    ];
    // Tokens × experts.
    let colors: Vec<Rgb> = routed.probs.iter().map(|&p| ramp.at(p)).collect();
    items.push(Item::Cells(Cells {
        x: heat_x,
        y: heat_y,
        rows: n,
        cols: e,
        cell_w,
        cell_h: CELL_H,
        colors: colors.clone(),
        hatch: None,
    }));
    items.extend(frame(
        Rect::new(
            heat_x,
            heat_y,
            heat_x + heat_w as i32,
            heat_y + heat_h as i32,
        ),
        pal.frame,
    ));
    for (t, label) in labels.iter().enumerate() {
        let y = heat_y + (t as u32 * CELL_H + CELL_H / 2) as i32;
        items.push(text(
            heat_x - 8,
            y,
            label.clone(),
            LABEL,
            false,
            pal.text,
            Align::End,
        ));
        for (expert, weight) in routed.choices(t, k) {
            let x0 = heat_x + (expert * cell_w) as i32;
            let y0 = heat_y + (t as u32 * CELL_H) as i32;
            let cell = Rect::new(x0, y0, x0 + cell_w as i32, y0 + CELL_H as i32);
            // A dark ring inside the cell's edge and a white one inside it: seen on any colour.
            let inner = |d: i32| Rect::new(cell.x0 + d, cell.y0 + d, cell.x1 - d, cell.y1 - d);
            items.extend(frame(inner(1), pal.divider_halo));
            if cell_w >= 6 {
                items.extend(frame(inner(2), pal.divider));
            }
            if cell_w >= NUMBERED_W {
                let on = colors[t * e + expert as usize];
                items.push(text(
                    x0 + cell_w as i32 / 2,
                    y0 + CELL_H as i32 / 2,
                    format!("{weight:.2}"),
                    TEXT,
                    true,
                    super::text_on(on),
                    Align::Middle,
                ));
            }
        }
    }
    let ticks_y = heat_y + heat_h as i32 + 10;
    for x in (0..e).step_by(every) {
        items.push(text(
            heat_x + (x as u32 * cell_w + cell_w / 2) as i32,
            ticks_y,
            x.to_string(),
            LABEL,
            false,
            pal.text,
            Align::Middle,
        ));
    }
    items.push(text(
        heat_x,
        ticks_y + LABEL as i32 + 6,
        "expert".into(),
        LABEL,
        false,
        pal.muted,
        Align::Start,
    ));
    // The colour bar: probability 0 (bottom) to 1 (top), beside the tokens × experts map.
    let bar_x = heat_x + heat_w as i32 + 20;
    let steps = 100usize;
    let step_h = heat_h.max(100).div_ceil(steps as u32);
    items.push(Item::Cells(Cells {
        x: bar_x,
        y: heat_y,
        rows: steps,
        cols: 1,
        cell_w: 12,
        cell_h: step_h,
        colors: (0..steps)
            .map(|i| ramp.at(1.0 - i as f32 / (steps - 1) as f32))
            .collect(),
        hatch: None,
    }));
    let bar_end = heat_y + (step_h * steps as u32) as i32;
    items.extend(frame(
        Rect::new(bar_x, heat_y, bar_x + 12, bar_end),
        pal.frame,
    ));
    for (value, y) in [("1.0", heat_y + 6), ("0.0", bar_end - 6)] {
        items.push(text(
            bar_x + 18,
            y,
            value.into(),
            LABEL,
            false,
            pal.text,
            Align::Start,
        ));
    }
    // The load of every routed layer, on the same columns.
    let load_title_y = (ticks_y + 2 * LABEL as i32 + 18).max(bar_end + 18);
    items.push(text(
        MARGIN,
        load_title_y,
        format!("Expert load: tokens that chose each expert ({n} tokens × top {k} per layer)"),
        LABEL,
        true,
        pal.text,
        Align::Start,
    ));
    let load_y = load_title_y + LABEL as i32 + 4;
    let loads: Vec<Vec<usize>> = router.layers.iter().map(|l| l.load(e)).collect();
    let most = loads.iter().flatten().copied().max().unwrap_or(0).max(1);
    let load_colors: Vec<Rgb> = loads
        .iter()
        .flatten()
        .map(|&c| ramp.at(c as f32 / most as f32))
        .collect();
    let rows = router.layers.len();
    items.push(Item::Cells(Cells {
        x: heat_x,
        y: load_y,
        rows,
        cols: e,
        cell_w,
        cell_h: CELL_H,
        colors: load_colors.clone(),
        hatch: None,
    }));
    let load_h = rows as u32 * CELL_H;
    items.extend(frame(
        Rect::new(
            heat_x,
            load_y,
            heat_x + heat_w as i32,
            load_y + load_h as i32,
        ),
        pal.frame,
    ));
    for (r, l) in router.layers.iter().enumerate() {
        let y = load_y + (r as u32 * CELL_H + CELL_H / 2) as i32;
        let shown = l.layer == spec.layer;
        items.push(text(
            heat_x - 8,
            y,
            layer_labels[r].clone(),
            LABEL,
            shown,
            if shown { pal.text } else { pal.muted },
            Align::End,
        ));
        if shown {
            // The shown layer's row, framed.
            let y0 = load_y + (r as u32 * CELL_H) as i32;
            items.extend(frame(
                Rect::new(heat_x, y0, heat_x + heat_w as i32, y0 + CELL_H as i32),
                pal.generated,
            ));
        }
        if cell_w >= NUMBERED_W {
            for (x, &count) in loads[r].iter().enumerate() {
                items.push(text(
                    heat_x + (x as u32 * cell_w + cell_w / 2) as i32,
                    y,
                    count.to_string(),
                    TEXT,
                    false,
                    super::text_on(load_colors[r * e + x]),
                    Align::Middle,
                ));
            }
        }
    }
    let caption_y = load_y + load_h as i32 + 14;
    items.push(text(
        heat_x,
        caption_y,
        format!("colour: tokens, 0 to {most} (the most any expert got in any layer)"),
        LABEL,
        false,
        pal.muted,
        Align::Start,
    ));
    let width = (bar_x + 18 + font::width("1.0", LABEL, false) as i32 + MARGIN)
        .max(MARGIN * 2 + font::width(title, TITLE, true) as i32)
        .max(MARGIN * 2 + font::width(&subtitle, LABEL, false) as i32)
        .max(
            heat_x
                + font::width(
                    &format!("colour: tokens, 0 to {most} (the most any expert got in any layer)"),
                    LABEL,
                    false,
                ) as i32
                + MARGIN,
        )
        .max(360);
    Ok(Scene {
        width: width as u32,
        height: (caption_y + LABEL as i32 + MARGIN) as u32,
        background: pal.background,
        title: title.to_string(),
        items,
    })
}

/// The router figure as PNG bytes.
pub fn render_png(
    spec: &RouterSpec<'_>,
    title: &str,
    options: &ImageOptions,
) -> Result<Vec<u8>, ImageError> {
    super::scene_png(&scene(spec, title, options)?, options.scale_factor)
}

/// The router figure as an SVG document.
pub fn render_svg(
    spec: &RouterSpec<'_>,
    title: &str,
    options: &ImageOptions,
) -> Result<String, ImageError> {
    paint::svg(&scene(spec, title, options)?).map_err(|e| match e {
        SvgError::Draw(e) => ImageError::Draw(e),
        SvgError::Font(e) => ImageError::Font(e),
    })
}

/// Write the router figure as a PNG file at `path` (atomically; `-` writes to stdout).
pub fn write_png(
    spec: &RouterSpec<'_>,
    title: &str,
    options: &ImageOptions,
    path: &Path,
) -> Result<(), ImageError> {
    let bytes = render_png(spec, title, options)?;
    write_output(path, |w: &mut dyn Write| w.write_all(&bytes))?;
    Ok(())
}

/// Write the router figure as an SVG file at `path`.
pub fn write_svg(
    spec: &RouterSpec<'_>,
    title: &str,
    options: &ImageOptions,
    path: &Path,
) -> Result<(), ImageError> {
    let svg = render_svg(spec, title, options)?;
    write_output(path, |w: &mut dyn Write| w.write_all(svg.as_bytes()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::RouterLayer;

    fn router() -> Router {
        Router {
            experts: 4,
            top_k: 2,
            renormalised: true,
            tokens: vec!["The".into(), " fox".into(), " jumps".into()],
            layers: vec![
                RouterLayer {
                    layer: 1,
                    probs: vec![0.1, 0.2, 0.3, 0.4, 0.5, 0.3, 0.1, 0.1, 0.2, 0.2, 0.5, 0.1],
                    chosen: vec![3, 2, 0, 1, 2, 0],
                    weights: vec![0.57, 0.43, 0.625, 0.375, 0.7, 0.3],
                },
                RouterLayer {
                    layer: 3,
                    probs: vec![0.25; 12],
                    chosen: vec![0, 1, 0, 1, 0, 1],
                    weights: vec![0.5; 6],
                },
            ],
        }
    }

    #[test]
    fn the_chosen_experts_are_outlined_and_weighed_and_the_load_counted() {
        let r = router();
        let spec = RouterSpec {
            router: &r,
            layer: 1,
            labels: None,
        };
        let s = scene(&spec, "Router", &ImageOptions::default()).unwrap();
        let texts: Vec<&str> = s.texts().map(|t| t.text.as_str()).collect();
        // Each token's chosen weights are written (cells are wide with 4 experts).
        for w in ["0.57", "0.43", "0.62", "0.38", "0.70", "0.30"] {
            assert!(texts.contains(&w), "{w} in {texts:?}");
        }
        assert!(texts.contains(&"1 fox"), "{texts:?}");
        // Layer 1's load is [2, 1, 2, 1]; layer 3's [3, 3, 0, 0].
        let numbers: Vec<&str> = texts
            .iter()
            .copied()
            .filter(|t| t.len() == 1 && t.chars().all(|c| c.is_ascii_digit()))
            .collect();
        // Four expert ticks, then the two layers' loads.
        assert_eq!(
            numbers,
            ["0", "1", "2", "3", "2", "1", "2", "1", "3", "3", "0", "0"]
        );
        // Two rings per chosen cell (four sides each), six chosen cells.
        let fills = s
            .items
            .iter()
            .filter(
                |i| matches!(i, Item::Fill(_, c) if *c == Palette::of(Default::default()).divider),
            )
            .count();
        assert_eq!(fills, 6 * 4);
        // Every label inside the canvas, none overlapping another.
        let canvas = Rect::new(0, 0, s.width as i32, s.height as i32);
        let boxes: Vec<Rect> = s.texts().map(Text::bounds).collect();
        for (i, b) in boxes.iter().enumerate() {
            assert!(canvas.contains(b), "{:?} outside", s.texts().nth(i));
            for o in &boxes[i + 1..] {
                assert!(!b.overlaps(o), "{b:?} overlaps {o:?}");
            }
        }
        assert!(render_png(&spec, "Router", &ImageOptions::default()).is_ok());
        assert!(render_svg(&spec, "Router", &ImageOptions::default())
            .unwrap()
            .contains("0.57"));
    }

    #[test]
    fn a_dense_layer_is_refused_naming_the_routed_ones() {
        let r = router();
        let spec = RouterSpec {
            router: &r,
            layer: 2,
            labels: None,
        };
        let err = render_png(&spec, "Router", &ImageOptions::default()).unwrap_err();
        assert!(err.to_string().contains("routed layers are 1, 3"), "{err}");
    }
}
