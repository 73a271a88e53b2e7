//! A figure with one heatmap: one head, the mean of a layer's heads, or any matrix over the
//! attention's units (`n_query × n_key`).

use super::layout::{self, Grid, Sides, AXIS_TITLE_SIZE, LABEL_GAP, LABEL_SIZE, MARGIN};
use super::scale::{resample2, resample_mask, Scale};
use super::scene::{Align, Item, Scene, Text};
use super::Style;

/// Largest heatmap side, in pixels. Longer inputs get 1-pixel cells, each the largest weight of its block.
pub(crate) const MAX_SIDE: u32 = 2048;

const PITCH: u32 = layout::LABEL_PITCH;

/// The gap between the heatmap and the learned attention sink's column.
const SINK_GAP: i32 = 10;

/// The sink column's label.
const SINK_LABEL: &str = "sink";

/// How an `n`-token heatmap is laid out: 32-pixel cells up to 32 tokens; then cells shrink to
/// keep the heatmap near 1024 pixels but never below 16 pixels (so every token keeps its label)
/// until that would pass [`MAX_SIDE`]; then as large as fits in [`MAX_SIDE`], labels thinned.
pub(crate) fn grid_for(n: usize) -> Grid {
    let n32 = n.max(1) as u32;
    if n32 <= 32 {
        Grid::new(n, n, 32, PITCH)
    } else if n32 * PITCH <= MAX_SIDE {
        Grid::new(n, n, (1024 / n32).max(PITCH), PITCH)
    } else if n32 <= MAX_SIDE {
        Grid::new(n, n, MAX_SIDE / n32, PITCH)
    } else {
        Grid::new(n, MAX_SIDE as usize, 1, PITCH)
    }
}

/// Lay out the figure: `values` is `nq × nk` row-major over the rows and columns of `sides`;
/// `caption` names what the colour bar measures.
pub(crate) fn scene(
    style: &Style,
    sides: &Sides,
    title: &str,
    caption: &str,
    values: &[f32],
) -> Scene {
    let pal = &style.palette;
    let (rows_axis, cols_axis) = (&sides.rows, &sides.cols);
    let (nq, nk) = (rows_axis.len(), cols_axis.len());
    let (rows, cols) = layout::grids(nq, nk, grid_for);
    let shown = resample2(values, (nq, nk), (rows.m, cols.m));
    let masked = style
        .masked
        .as_deref()
        .map(|m| resample_mask(m, (nq, nk), (rows.m, cols.m)));
    // A learned sink's share of each row: a column of its own, on the cells' colour scale.
    let sinks = style
        .sinks
        .as_deref()
        .filter(|s| s.len() == nq && !sides.cross)
        .map(|s| resample2(s, (nq, 1), (rows.m, 1)));
    let scale = Scale::up_to(shown.iter().chain(sinks.iter().flatten()), style.scale);
    let (w, h) = (cols.side() as i32, rows.side() as i32);
    let sink_cell = cols.cell.clamp(12, 32);
    // The gap and the column, when there is one.
    let sink_w = if sinks.is_some() {
        SINK_GAP + sink_cell as i32
    } else {
        0
    };

    let label_w = layout::label_extent(rows_axis, &rows, LABEL_SIZE);
    let col_label_w = layout::label_extent(cols_axis, &cols, LABEL_SIZE);
    let axis_title_w = AXIS_TITLE_SIZE as i32;
    let heat_x = MARGIN + axis_title_w + 12 + label_w + LABEL_GAP;
    let title_min_x = MARGIN + axis_title_w + 12;
    // The colour bar stands beside the heatmap. A key title wider than a narrow heatmap runs on
    // under the bar, unless a bar taller than the heatmap (a short one) reaches down to it.
    let key_right = layout::key_title_right((heat_x, heat_x + w), title_min_x, &sides.col_title);
    let key_top = h + LABEL_GAP + col_label_w + 14;
    let mask_key = if style.masked.is_some() { 16 + 24 } else { 0 };
    let bar_x = if h.max(layout::MIN_BAR_HEIGHT) + mask_key + 4 < key_top {
        heat_x + w + sink_w + 28
    } else {
        (heat_x + w + sink_w + 28).max(key_right + 16)
    };
    let content_w = (bar_x + layout::colorbar_width(&scale)).max(key_right) + MARGIN;
    let width = content_w.max(layout::title_width(title)).max(560);

    let (mut items, top) = layout::title_block(title, style, width, pal);
    // The band above the columns names the parts the column dividers separate.
    let col_gen = cols_axis.gen_start;
    let segment_band = if cols_axis.b_start.is_some() || col_gen.is_some() {
        24
    } else {
        0
    };
    let heat_y = top + segment_band;

    items.extend(layout::heatmap(
        &shown,
        masked.as_deref(),
        (&rows, &cols),
        heat_x,
        heat_y,
        &scale,
        &style.ramp,
        pal,
    ));
    // The band above the columns names the parts the dividers separate: the sentences of a
    // pair, or the prompt and what the model generated.
    let mut band: Vec<(i32, i32, &str, &str)> = Vec::new();
    items.extend(layout::dividers(
        (&rows, &cols),
        (rows_axis, cols_axis),
        !sides.cross,
        (heat_x, heat_y),
        5,
        pal,
    ));
    if let Some(b) = cols_axis.b_start.filter(|_| !sides.cross) {
        let at = cols.offset_of(b);
        band.extend([(0, at, "sentence A", "A"), (at, w, "sentence B", "B")]);
    }
    let row_gen = rows_axis.gen_start;
    if row_gen.is_some() || col_gen.is_some() {
        items.extend(layout::gen_divider(
            (&rows, &cols),
            (row_gen, col_gen),
            heat_x,
            heat_y,
            5,
            pal,
        ));
        if let (Some(g), true) = (col_gen, band.is_empty()) {
            let at = cols.offset_of(g);
            band.extend([(0, at, "prompt", "p"), (at, w, "generated", "g")]);
        }
    }
    for (i, (from, to, word, short)) in band.into_iter().enumerate() {
        let text = if layout::fit(word, layout::SMALL_SIZE, false, to - from) == word {
            word
        } else {
            short
        };
        let generated = cols_axis.b_start.is_none() && i == 1;
        items.push(Item::Text(Text {
            x: heat_x + (from + to) / 2,
            y: heat_y - 12,
            text: text.to_string(),
            size: layout::SMALL_SIZE,
            bold: false,
            color: if generated { pal.generated } else { pal.muted },
            align: Align::Middle,
            up: false,
        }));
    }
    if let Some(sinks) = &sinks {
        let x = heat_x + w + SINK_GAP;
        let column = layout::Grid::new(1, 1, sink_cell, PITCH);
        items.extend(layout::heatmap(
            sinks,
            None,
            (&rows, &column),
            x,
            heat_y,
            &scale,
            &style.ramp,
            pal,
        ));
        items.push(Item::Text(Text {
            x: x + sink_cell as i32 / 2,
            y: heat_y + h + LABEL_GAP,
            text: SINK_LABEL.to_string(),
            size: LABEL_SIZE,
            bold: true,
            color: pal.text,
            align: Align::End,
            up: true,
        }));
    }
    items.extend(layout::token_labels(
        rows_axis, &rows, heat_x, heat_y, true, LABEL_SIZE, pal, h,
    ));
    items.extend(layout::token_labels(
        cols_axis, &cols, heat_x, heat_y, false, LABEL_SIZE, pal, h,
    ));

    let below = heat_y + h + LABEL_GAP + col_label_w + 14;
    let (titles, mut bottom) = layout::axis_titles(
        MARGIN,
        (heat_y, heat_y + h),
        (heat_x, heat_x + w),
        below,
        title_min_x,
        pal,
        sides.titles(),
    );
    items.extend(titles);

    let bar_h = h.max(layout::MIN_BAR_HEIGHT);
    items.extend(layout::colorbar(
        bar_x,
        heat_y,
        bar_h,
        &scale,
        &style.ramp,
        &format!("{caption}{}", scale.caption_suffix()),
        pal,
    ));
    bottom = bottom.max(heat_y + bar_h);
    if style.masked.is_some() {
        let (key, below) = layout::mask_key(bar_x, heat_y + bar_h + 16, pal);
        items.extend(key);
        bottom = bottom.max(below);
    }

    let thinned = [(&rows, "target "), (&cols, "source ")]
        .into_iter()
        .filter_map(|(g, side)| thinning_note(g).map(|t| (t, side)))
        .map(|(t, side)| if sides.cross { format!("{side}{t}") } else { t })
        .collect::<Vec<_>>();
    let thinned = if sides.cross {
        thinned
    } else {
        thinned.into_iter().take(1).collect()
    };
    if !thinned.is_empty() {
        let (lines, below) = layout::notes(&thinned.join(" "), bottom + 12, width, pal);
        items.extend(lines);
        bottom = below;
    }

    Scene {
        width: width as u32,
        height: (bottom + MARGIN) as u32,
        background: pal.background,
        title: title.to_string(),
        items,
    }
}

/// What a reader must know when not every token has its own cell or label.
pub(crate) fn thinning_note(grid: &Grid) -> Option<String> {
    if grid.m < grid.n {
        let per = grid.n as f64 / grid.m as f64;
        Some(format!(
            "{} tokens: each cell shows the largest weight among about {per:.1} × {per:.1} tokens; every {}th cell is labelled with its first token's index.",
            grid.n, grid.stride
        ))
    } else if grid.stride > 1 {
        Some(format!(
            "{} tokens: every {} token is labelled, with its index.",
            grid.n,
            ordinal(grid.stride)
        ))
    } else {
        None
    }
}

fn ordinal(k: usize) -> String {
    let suffix = match (k % 10, k % 100) {
        (1, 11) | (2, 12) | (3, 13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{k}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cell_size_follows_the_documented_rule() {
        let g = |n| {
            let g = grid_for(n);
            (g.m, g.cell, g.stride)
        };
        assert_eq!(g(1), (1, 32, 1));
        assert_eq!(g(12), (12, 32, 1));
        assert_eq!(g(32), (32, 32, 1));
        assert_eq!(g(40), (40, 25, 1));
        assert_eq!(g(64), (64, 16, 1));
        assert_eq!(g(128), (128, 16, 1));
        assert_eq!(g(129), (129, 15, 2));
        assert_eq!(g(512), (512, 4, 4));
        assert_eq!(g(2048), (2048, 1, 16));
        assert_eq!(g(4096), (2048, 1, 16));
        for n in 1..3000 {
            assert!(grid_for(n).side() <= MAX_SIDE, "{n}");
        }
    }

    #[test]
    fn ordinals() {
        assert_eq!(ordinal(2), "2nd");
        assert_eq!(ordinal(3), "3rd");
        assert_eq!(ordinal(4), "4th");
        assert_eq!(ordinal(11), "11th");
        assert_eq!(ordinal(22), "22nd");
    }
}
