//! A hybrid model's token mixing as a figure (Qwen3-Next's gated delta layers): one panel per
//! linear-attention layer, output tokens (rows) × source tokens (columns), one head's exact
//! mixing matrix or the heads' mean, on one diverging scale centred at 0 (red above, blue
//! below) whose colour bar carries the legend: token mixing, not attention probabilities.
//! Cells above the diagonal (the rule is causal) are hatched.

use std::io::Write;
use std::path::Path;

use super::font;
use super::paint;
use super::scene::{Align, Item, Scene, Text};
use super::theme::Palette;
use super::{ImageError, ImageOptions, SvgError};
use crate::attention::{layer_list, HeadSel, Mixing};
use crate::compare::diverging;
use crate::compare::image::{
    block, cells_for, colorbar, div_ticks, label_extent, labels, scene as laid_out, text, LABEL,
    MARGIN, SMALL, SUB, TITLE,
};
use crate::output::write_output;

/// The widest all panels together are drawn, in pixels, before their cells shrink.
const PANELS_W: i32 = 900;

/// The token-mixing figure of some of a model's linear-attention layers.
#[derive(Clone, Copy, Debug)]
pub struct MixingSpec<'a> {
    /// The captured mixing.
    pub mixing: &'a Mixing,
    /// The model's numbers of the layers to draw (each one of `mixing`'s); empty: all.
    pub layers: &'a [usize],
    /// One head, or the mean of the heads (a head past the layers' heads: the mean).
    pub head: HeadSel,
    /// Token labels (the attention's display texts), one per token.
    pub labels: Option<&'a [String]>,
}

/// The figure's scene.
fn scene(spec: &MixingSpec<'_>, title: &str, options: &ImageOptions) -> Result<Scene, ImageError> {
    let m = spec.mixing;
    let n = m.n();
    if n == 0 {
        return Err(ImageError::Empty);
    }
    let shown: Vec<_> = m
        .layers
        .iter()
        .filter(|l| spec.layers.is_empty() || spec.layers.contains(&l.layer))
        .collect();
    if shown.is_empty() {
        return Err(ImageError::NoMixing {
            layers: layer_list(&m.layer_numbers()),
        });
    }
    let pal = Palette::of(options.theme);
    let tokens: Vec<String> = spec
        .labels
        .filter(|l| l.len() == n)
        .unwrap_or(&m.tokens)
        .to_vec();
    let matrices: Vec<Vec<f32>> = shown.iter().map(|l| m.matrix(l, spec.head)).collect();
    let max = matrices
        .iter()
        .flatten()
        .fold(0f32, |a, &v| a.max(v.abs()))
        .max(1e-6);
    let which = match spec.head {
        HeadSel::Index(h) if h < m.heads => format!("head {h} of {}", m.heads),
        _ => format!("mean of {} heads", m.heads),
    };
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
    items.push(text(
        MARGIN,
        MARGIN + 36,
        format!("{} · {which}", m.legend()),
        SUB,
        pal.muted,
        Align::Start,
    ));
    let top = MARGIN + 60;
    let per_panel = (PANELS_W / shown.len() as i32).clamp(120, 420);
    let (cell, stride) = cells_for(n, per_panel);
    let x0 = MARGIN + label_extent(&tokens) + 8;
    let panel_w = n as i32 * cell;
    // Above the diagonal: the rule never reads a later token.
    let above: Vec<bool> = (0..n * n).map(|i| i % n > i / n).collect();
    let mut x = x0;
    for (layer, values) in shown.iter().zip(&matrices) {
        items.push(text(
            x + panel_w / 2,
            top,
            format!("layer {} ({})", layer.layer, m.kind),
            LABEL,
            pal.text,
            Align::Middle,
        ));
        let colors = values.iter().map(|&v| diverging(v / max)).collect();
        items.extend(block(
            x,
            top + 14,
            n,
            n,
            cell,
            colors,
            Some(above.clone()),
            &pal,
        ));
        items.extend(labels(
            &tokens,
            &tokens,
            x,
            top + 14,
            cell,
            stride,
            (x == x0, n),
            &pal,
        ));
        x += panel_w + 16;
    }
    let h = n as i32 * cell;
    let (bar, _) = colorbar(
        x,
        top + 14,
        h,
        (-max, max),
        &|v| diverging(v / max),
        &div_ticks(max),
        &m.legend(),
        &pal,
    );
    items.extend(bar);
    let y = top + 14 + h + label_extent(&tokens) + 24;
    items.push(text(
        MARGIN,
        y,
        font::label(
            "Rows: output token · columns: source token (out = Σ weight × value) · signed, rows \
             need not sum to 1 · red > 0, blue < 0",
            140,
        ),
        SMALL,
        pal.muted,
        Align::Start,
    ));
    Ok(laid_out(items, title.to_string(), &pal))
}

/// The token-mixing figure as PNG bytes.
pub fn render_png(
    spec: &MixingSpec<'_>,
    title: &str,
    options: &ImageOptions,
) -> Result<Vec<u8>, ImageError> {
    super::scene_png(&scene(spec, title, options)?, options.scale_factor)
}

/// The token-mixing figure as an SVG document.
pub fn render_svg(
    spec: &MixingSpec<'_>,
    title: &str,
    options: &ImageOptions,
) -> Result<String, ImageError> {
    paint::svg(&scene(spec, title, options)?).map_err(|e| match e {
        SvgError::Draw(e) => ImageError::Draw(e),
        SvgError::Font(e) => ImageError::Font(e),
    })
}

/// Write the token-mixing figure as a PNG file at `path` (atomically; `-` writes to stdout).
pub fn write_png(
    spec: &MixingSpec<'_>,
    title: &str,
    options: &ImageOptions,
    path: &Path,
) -> Result<(), ImageError> {
    let bytes = render_png(spec, title, options)?;
    write_output(path, |w: &mut dyn Write| w.write_all(&bytes))?;
    Ok(())
}

/// Write the token-mixing figure as an SVG file at `path`.
pub fn write_svg(
    spec: &MixingSpec<'_>,
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
    use crate::attention::MixingLayer;

    #[test]
    fn the_figure_carries_its_legend_and_a_signed_scale() {
        let m = Mixing {
            kind: "gated delta".into(),
            heads: 1,
            tokens: vec!["a".into(), "b".into()],
            layers: vec![MixingLayer {
                layer: 0,
                weights: vec![0.5, 0.0, -1.0, 0.25],
            }],
        };
        let spec = MixingSpec {
            mixing: &m,
            layers: &[],
            head: HeadSel::Mean,
            labels: None,
        };
        let s = scene(&spec, "Token mixing", &ImageOptions::default()).unwrap();
        let texts: Vec<&str> = s.texts().map(|t| t.text.as_str()).collect();
        let legend = "token mixing (gated delta), not attention probabilities";
        assert!(texts.contains(&legend), "{texts:?}");
        // The bar runs from −1 to 1.
        assert!(
            texts
                .iter()
                .any(|t| t.starts_with('−') || t.starts_with('-')),
            "{texts:?}"
        );
        assert!(render_svg(&spec, "Token mixing", &ImageOptions::default())
            .unwrap()
            .contains("not attention probabilities"));
        let none = MixingSpec {
            layers: &[5],
            ..spec
        };
        assert!(render_png(&none, "x", &ImageOptions::default())
            .unwrap_err()
            .to_string()
            .contains("captured ones here: 0"));
    }
}
