//! Figures with many heatmaps: all heads of one layer, and every layer × head of the model.

use super::layout::{
    self, Grid, Sides, AXIS_TITLE_SIZE, LABEL_GAP, MARGIN, SMALL_PITCH, SMALL_SIZE,
};
use super::scale::{resample_grids, resample_mask_grids, Scale};
use super::scene::{Align, Item, Rect, Scene, Text};
use super::Style;

/// Smallest and largest side of a panel in the layer figure: panels grow from the smallest to
/// give every token a label, up to the largest (which holds 512 tokens at one pixel each).
pub(crate) const PANEL_SIDE: (u32, u32) = (288, 512);
/// Most pixels all panels of a row may take together.
const PANELS_WIDTH: u32 = 2048;
/// Target side of a thumbnail in the model figure.
pub(crate) const THUMB_SIDE: u32 = 112;
/// Most pixels the thumbnails of the model figure may take along either side.
const THUMBS_SPAN: u32 = 2048;
/// Gap between thumbnails.
const THUMB_GAP: u32 = 6;

/// Thumbnail side for a model of `layers × heads`: [`THUMB_SIDE`], smaller for models so large
/// that the grid would pass [`THUMBS_SPAN`] (bert-large's 24 layers get 79 pixels).
fn thumb_side(layers: usize, heads: usize) -> u32 {
    let k = layers.max(heads).max(1) as u32;
    THUMB_SIDE
        .min((THUMBS_SPAN - (k - 1).min(100) * THUMB_GAP) / k)
        .max(16)
}

/// The grid of one small heatmap of target side `target`: whole-pixel cells when at least
/// `min_cell` pixels fit per token, else exactly `target` pixels, each cell the largest weight of
/// its block (or, for few tokens, the token under it).
pub(crate) fn grid_for(n: usize, target: u32, min_cell: u32) -> Grid {
    let cell = target / n.max(1) as u32;
    if cell >= min_cell {
        Grid::new(n, n, cell, SMALL_PITCH)
    } else {
        Grid::new(n, target as usize, 1, SMALL_PITCH)
    }
}

/// The grid of a panel for `n` tokens in a layer figure `cols` panels wide: large enough to
/// label every token where it can, whole-pixel cells up to the largest panel, pooled beyond.
fn panel_grid(n: usize, cols: usize) -> Grid {
    let max = PANEL_SIDE.1.min(PANELS_WIDTH / cols.max(1) as u32);
    let target = (n as u32 * SMALL_PITCH).clamp(PANEL_SIDE.0.min(max), max);
    grid_for(n, target, 1)
}

/// Columns × rows for `heads` panels `aspect` times as wide as tall: the whole grid a little
/// wider than tall (square panels: 4 heads in 3 + 1, 12 in 4 × 3; cross-attention's wide
/// panels of a long source over a short target: 4 heads in 2 × 2).
fn arrangement(heads: usize, aspect: f64) -> (usize, usize) {
    let cols = ((heads as f64 * 4.0 / 3.0 / aspect).sqrt().ceil() as usize).clamp(1, heads.max(1));
    (cols, heads.div_ceil(cols))
}

/// The arrangement of panels over `nq` rows and `nk` columns of units: [`arrangement`] for
/// square panels; for oblong ones (cross-attention), the columns whose grid comes closest to a
/// little wider than tall, each empty slot counting against it (so 4 tall panels sit in one row
/// rather than 3 + 1, and 4 wide ones in 2 × 2).
fn panel_arrangement(heads: usize, nq: usize, nk: usize) -> (usize, usize) {
    if nq == nk || heads <= 1 {
        return arrangement(heads, 1.0);
    }
    let score = |cols: usize| {
        let rows = heads.div_ceil(cols);
        let (w, h) = (panel_grid(nk, cols).side(), panel_grid(nq, cols).side());
        let aspect = (cols as f64 * w.max(1) as f64) / (rows as f64 * h.max(1) as f64);
        let empty = (cols * rows - heads) as f64 / heads as f64;
        (aspect / (4.0 / 3.0)).ln().abs() + empty
    };
    let cols = (1..=heads)
        .min_by(|&a, &b| score(a).total_cmp(&score(b)))
        .unwrap_or(1);
    (cols, heads.div_ceil(cols))
}

/// Under grouped-query attention, one row of panels per key/value head, when the heads that
/// share one are neighbours and few enough (2 to 8) to fill a row: columns × rows.
fn grouped_arrangement(kv: &[usize]) -> Option<(usize, usize)> {
    let groups = kv.iter().max()? + 1;
    let size = kv.len() / groups;
    let neighbours = kv.iter().enumerate().all(|(h, &g)| g == h / size.max(1));
    (size * groups == kv.len() && (2..=8).contains(&size) && neighbours).then_some((size, groups))
}

/// All heads of a layer, with one colour scale. `heads[h]` is head `h`'s `n × n` matrix.
/// With grouped-query attention, `kv[h]` is the key/value head head `h` reads, named in its
/// panel's title.
pub(crate) fn layer_scene(
    style: &Style,
    sides: &Sides,
    title: &str,
    heads: &[Vec<f32>],
    kv: Option<&[usize]>,
) -> Scene {
    let pal = &style.palette;
    let (nq, nk) = (sides.rows.len(), sides.cols.len());
    let (cols, rows) = kv
        .and_then(grouped_arrangement)
        .unwrap_or_else(|| panel_arrangement(heads.len(), nq, nk));
    // Each side spans the panel on its own (cells may be oblong), so that a short side never
    // makes panels too narrow for their titles.
    let (grid, col_grid) = with_strips(sides, (panel_grid(nq, cols), panel_grid(nk, cols)));
    let shown: Vec<Vec<f32>> = heads
        .iter()
        .map(|m| resample_grids(m, (&grid, &col_grid)))
        .collect();
    let masked = style
        .masked
        .as_deref()
        .map(|m| resample_mask_grids(m, (&grid, &col_grid)));
    let scale = Scale::up_to(shown.iter().flatten(), style.scale);
    // Panel width (columns) and height (rows).
    let (side, panel_h) = (col_grid.side() as i32, grid.side() as i32);

    let label_w = layout::label_extent(&sides.rows, &grid, SMALL_SIZE);
    let col_label_w = layout::label_extent(&sides.cols, &col_grid, SMALL_SIZE);
    let gap_x = 18;
    let head_band = 22;
    let gap_y = head_band + 10;
    let grid_x = MARGIN + AXIS_TITLE_SIZE as i32 + 12 + label_w + LABEL_GAP;
    let grid_w = cols as i32 * side + (cols as i32 - 1) * gap_x;
    let bar_x = grid_x + grid_w + 28;
    let width = (bar_x + layout::colorbar_width(&scale) + MARGIN)
        .max(layout::title_width(title))
        .max(560);

    let (mut items, top) = layout::title_block(title, style, width, pal);
    let grid_y = top + head_band;
    // The x labels of the bottom row hang below it; rows above need room for theirs only when
    // the row below has a gap under that column (last row not full).
    let row_pitch = panel_h + gap_y;
    for (h, values) in shown.iter().enumerate() {
        let (c, r) = (h % cols, h / cols);
        let x = grid_x + c as i32 * (side + gap_x);
        let y = grid_y + r as i32 * row_pitch;
        items.push(Item::Text(Text {
            x: x + side / 2,
            y: y - head_band / 2 - 1,
            text: match kv {
                Some(kv) => format!("head {h} · kv head {}", kv[h]),
                None => format!("head {h}"),
            },
            size: SMALL_SIZE,
            bold: true,
            color: pal.text,
            align: Align::Middle,
            up: false,
        }));
        items.extend(layout::heatmap(
            values,
            masked.as_deref(),
            (&grid, &col_grid),
            x,
            y,
            &scale,
            &style.ramp,
            pal,
        ));
        items.extend(dividers(sides, (&grid, &col_grid), x, y, pal));
        if c == 0 {
            items.extend(layout::token_labels(
                &sides.rows,
                &grid,
                x,
                y,
                true,
                SMALL_SIZE,
                pal,
                panel_h,
            ));
        }
        let last_in_column = h + cols >= heads.len();
        if last_in_column {
            items.extend(layout::token_labels(
                &sides.cols,
                &col_grid,
                x,
                y,
                false,
                SMALL_SIZE,
                pal,
                panel_h,
            ));
        }
    }
    let last_row_y = grid_y + (rows as i32 - 1) * row_pitch;
    let grid_h = last_row_y + panel_h - grid_y;
    // Columns whose last panel is in the row above the bottom one hang their labels into the
    // bottom row's band; make the bottom row's labels the lowest thing.
    let below = last_row_y + panel_h + LABEL_GAP + col_label_w + 14;
    let (titles, mut bottom) = layout::axis_titles(
        MARGIN,
        (grid_y, grid_y + grid_h),
        (grid_x, grid_x + grid_w),
        below,
        MARGIN + AXIS_TITLE_SIZE as i32 + 12,
        pal,
        sides.titles(),
    );
    items.extend(titles);
    let bar_h = grid_h.max(layout::MIN_BAR_HEIGHT);
    items.extend(layout::colorbar(
        bar_x,
        grid_y,
        bar_h,
        &scale,
        &style.ramp,
        &format!("{}{}", style.caption, scale.caption_suffix()),
        pal,
    ));
    bottom = bottom.max(grid_y + bar_h);
    if style.masked.is_some() {
        let (key, below) = layout::mask_key(bar_x, grid_y + bar_h + 16, pal);
        items.extend(key);
        bottom = bottom.max(below);
    }
    if let Some(text) =
        super::single::thinning_note(&grid).or_else(|| super::single::thinning_note(&col_grid))
    {
        let (lines, below) = layout::notes(&text, bottom + 12, width, pal);
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

/// Every layer × head as thumbnails on one colour scale. `matrices[l][h]` is `n × n`.
///
/// With grouped-query attention, `kv[h]` is the key/value head head `h` reads: a band above the
/// head numbers brackets the heads that share one.
pub(crate) fn model_scene(
    style: &Style,
    sides: &Sides,
    title: &str,
    matrices: &[Vec<&[f32]>],
    kv: Option<&[usize]>,
) -> Scene {
    let pal = &style.palette;
    let (nq, nk) = (sides.rows.len(), sides.cols.len());
    let layers = matrices.len();
    let heads = matrices.first().map_or(0, |l| l.len());
    let target = thumb_side(layers, heads);
    // Each side spans the thumbnail on its own (cells may be oblong): thumbnails keep one size.
    let (grid, col_grid) = with_strips(sides, (grid_for(nq, target, 2), grid_for(nk, target, 2)));
    let shown: Vec<Vec<Vec<f32>>> = matrices
        .iter()
        .map(|layer| {
            layer
                .iter()
                .map(|m| resample_grids(m, (&grid, &col_grid)))
                .collect()
        })
        .collect();
    let masked = style
        .masked
        .as_deref()
        .map(|m| resample_mask_grids(m, (&grid, &col_grid)));
    // Layers with a sliding window hatch their own cells.
    let layer_masked: Vec<Option<Vec<bool>>> = style
        .layer_masked
        .iter()
        .map(|m| {
            m.as_deref()
                .map(|m| resample_mask_grids(m, (&grid, &col_grid)))
        })
        .collect();
    let scale = Scale::up_to(shown.iter().flatten().flatten(), style.scale);
    // Thumbnail width (columns) and height (rows).
    let (side, thumb_h) = (col_grid.side() as i32, grid.side() as i32);
    let gap = THUMB_GAP as i32;
    let row_label_w = (0..layers)
        .map(|l| {
            let number = style.layer_numbers.get(l).copied().unwrap_or(l);
            crate::image::font::width(&format!("layer {number}"), SMALL_SIZE, false) as i32
        })
        .max()
        .unwrap_or(0);
    let grid_x = MARGIN + row_label_w + 10;
    let grid_w = heads as i32 * side + (heads as i32 - 1).max(0) * gap;
    let bar_x = grid_x + grid_w + 24;
    let width = (bar_x + layout::colorbar_width(&scale) + MARGIN)
        .max(layout::title_width(title))
        .max(560);
    let (mut items, top) = layout::title_block(title, style, width, pal);
    let col_band = 20;
    let kv_band = if kv.is_some() { 22 } else { 0 };
    let grid_y = top + kv_band + col_band;
    if let Some(kv) = kv {
        // One bracket per run of neighbouring heads that read the same key/value head.
        let mut h = 0;
        while h < heads {
            let g = kv[h];
            let end = (h..heads).take_while(|&j| kv[j] == g).last().unwrap_or(h);
            let x0 = grid_x + h as i32 * (side + gap);
            let x1 = grid_x + end as i32 * (side + gap) + side;
            let y = top + kv_band - 4;
            items.push(Item::Fill(Rect::new(x0 + 2, y, x1 - 2, y + 1), pal.muted));
            let label = format!("kv head {g}");
            let text = if layout::fit(&label, SMALL_SIZE, false, x1 - x0) == label {
                label
            } else {
                format!("kv {g}")
            };
            items.push(Item::Text(Text {
                x: (x0 + x1) / 2,
                y: y - 9,
                text,
                size: SMALL_SIZE,
                bold: false,
                color: pal.muted,
                align: Align::Middle,
                up: false,
            }));
            h = end + 1;
        }
    }
    for h in 0..heads {
        items.push(Item::Text(Text {
            x: grid_x + h as i32 * (side + gap) + side / 2,
            y: grid_y - col_band / 2 - 1,
            text: format!("head {h}"),
            size: SMALL_SIZE,
            bold: false,
            color: pal.text,
            align: Align::Middle,
            up: false,
        }));
    }
    for (l, layer) in shown.iter().enumerate() {
        let y = grid_y + l as i32 * (thumb_h + gap);
        items.push(Item::Text(Text {
            x: grid_x - 10,
            y: y + thumb_h / 2,
            text: format!("layer {}", style.layer_numbers.get(l).copied().unwrap_or(l)),
            size: SMALL_SIZE,
            bold: false,
            color: pal.text,
            align: Align::End,
            up: false,
        }));
        let masked = match layer_masked.get(l) {
            Some(m) => m.as_deref(),
            None => masked.as_deref(),
        };
        for (h, values) in layer.iter().enumerate() {
            let x = grid_x + h as i32 * (side + gap);
            items.extend(layout::heatmap(
                values,
                masked,
                (&grid, &col_grid),
                x,
                y,
                &scale,
                &style.ramp,
                pal,
            ));
            items.extend(dividers(sides, (&grid, &col_grid), x, y, pal));
        }
    }
    let grid_h = layers as i32 * (thumb_h + gap) - gap;
    let bar_h = grid_h.max(layout::MIN_BAR_HEIGHT);
    items.extend(layout::colorbar(
        bar_x,
        grid_y,
        bar_h,
        &scale,
        &style.ramp,
        &format!("{}{}", style.caption, scale.caption_suffix()),
        pal,
    ));
    let mut bottom = grid_y + grid_h.max(bar_h) + 10;
    if style.masked.is_some() {
        let (key, below) = layout::mask_key(bar_x, grid_y + bar_h + 16, pal);
        items.extend(key);
        bottom = bottom.max(below + 10);
    }
    let mut explain = String::from(if sides.cross {
        "In each thumbnail, rows are target (decoder) tokens (attending from), columns source \
         (encoder) tokens (attended to)"
    } else {
        "In each thumbnail, rows are query tokens (attending from), columns key tokens (attended to)"
    });
    for (axis, g) in [(&sides.rows, &grid), (&sides.cols, &col_grid)] {
        if g.split.is_some() && !(sides.cross && std::ptr::eq(axis, &sides.cols)) {
            let what = if axis.b_start.is_some() && !sides.cross {
                "sentence B keeps"
            } else {
                "the generated tokens keep"
            };
            explain.push_str(&format!(
                "; {what} a strip of at least {STRIP_MIN} pixels, wider than its share"
            ));
            break;
        }
    }
    if grid.split.is_none()
        && col_grid.split.is_none()
        && (grid.m < grid.n || col_grid.m < col_grid.n)
    {
        let (pr, pc) = (
            grid.n as f64 / grid.m as f64,
            col_grid.n as f64 / col_grid.m as f64,
        );
        explain.push_str(&format!(
            "; each pixel shows the largest weight among about {pr:.1} × {pc:.1} tokens"
        ));
    }
    explain.push('.');
    let (lines, bottom) = layout::notes(&explain, bottom, width, pal);
    items.extend(lines);
    Scene {
        width: width as u32,
        height: (bottom + MARGIN) as u32,
        background: pal.background,
        title: title.to_string(),
        items,
    }
}

/// The fewest pixels a thumbnail or panel gives a segment (sentence B, the generated tokens).
const STRIP_MIN: usize = 12;

/// `grids` for a figure's small heatmaps, each axis that a divider splits (sentence B, or where
/// generation starts) given a strip of at least [`STRIP_MIN`] pixels per side of the divider
/// ([`Grid::segmented`]) where its share would be less.
fn with_strips(sides: &Sides, (rows, cols): (Grid, Grid)) -> (Grid, Grid) {
    let strip = |axis: &layout::Axis, g: Grid| {
        let at = if sides.cross {
            axis.gen_start
        } else {
            axis.b_start.or(axis.gen_start)
        };
        let Some(at) = at else { return g };
        let side = g.side() as usize;
        let smaller = at.min(g.n - at.min(g.n)) * side / g.n.max(1);
        if smaller >= STRIP_MIN {
            return g;
        }
        Grid::segmented(g.n, side, at, STRIP_MIN, SMALL_PITCH).unwrap_or(g)
    };
    (strip(&sides.rows, rows), strip(&sides.cols, cols))
}

/// The dividers of one panel or thumbnail at `(x, y)`: sentence B's (self-attention) and the
/// generated units' (rows and columns of self-attention; the rows of cross-attention, whose
/// columns, the source, the model read).
fn dividers(
    sides: &Sides,
    grids: (&Grid, &Grid),
    x: i32,
    y: i32,
    pal: &super::Palette,
) -> Vec<Item> {
    let mut items = layout::dividers(
        grids,
        (&sides.rows, &sides.cols),
        !sides.cross,
        (x, y),
        0,
        pal,
    );
    let (row_gen, col_gen) = (sides.rows.gen_start, sides.cols.gen_start);
    if row_gen.is_some() || col_gen.is_some() {
        items.extend(layout::gen_divider(grids, (row_gen, col_gen), x, y, 0, pal));
    }
    items
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_are_arranged_a_little_wider_than_tall() {
        assert_eq!(arrangement(12, 1.0), (4, 3));
        assert_eq!(arrangement(16, 1.0), (5, 4));
        assert_eq!(arrangement(8, 1.0), (4, 2));
        assert_eq!(arrangement(1, 1.0), (1, 1));
        assert_eq!(arrangement(3, 1.0), (2, 2));
        // Self-attention's panels are square whatever the length.
        assert_eq!(panel_arrangement(12, 40, 40), (4, 3));
        // Cross-attention: wide panels (a long source) stack in fewer columns, tall ones (a
        // long target) spread over more; the panels themselves keep their shapes.
        assert_eq!(panel_arrangement(4, 8, 32), (2, 2));
        assert_eq!(panel_arrangement(4, 32, 8), (4, 1));
        assert_eq!(panel_arrangement(8, 8, 60), (3, 3));
        assert_eq!(panel_arrangement(12, 8, 60), (3, 4));
        assert_eq!(panel_arrangement(8, 60, 8), (4, 2));
        // Grouped-query attention: a row per key/value head (SmolLM2: 9 heads over 3).
        let kv: Vec<usize> = (0..9).map(|h| h / 3).collect();
        assert_eq!(grouped_arrangement(&kv), Some((3, 3)));
        let kv: Vec<usize> = (0..32).map(|h| h / 4).collect();
        assert_eq!(grouped_arrangement(&kv), Some((4, 8)));
        // Too many per group, or groups that are not neighbours: the usual arrangement.
        assert_eq!(grouped_arrangement(&[0; 16]), None);
        assert_eq!(grouped_arrangement(&[0, 1, 0, 1]), None);
    }

    #[test]
    fn panels_pool_only_when_cells_would_be_too_small() {
        let panel = |n| panel_grid(n, 4);
        assert_eq!(panel(12).side(), 288);
        // 24 tokens: panels grow so that every token keeps its label
        assert_eq!((panel(24).side(), panel(24).stride), (336, 1));
        assert_eq!((panel(32).side(), panel(32).stride), (448, 1));
        assert_eq!((panel(128).side(), panel(128).cell), (512, 4));
        assert_eq!((panel(300).side(), panel(300).cell), (300, 1));
        let g = panel(512);
        assert_eq!((g.m, g.cell), (512, 1));
        // five columns (16 heads) keep the row of panels within 2048 pixels
        let g = panel_grid(512, 5);
        assert_eq!((g.m, g.cell), (409, 1));
        assert_eq!(panel_grid(12, 8).side(), 252);
        assert_eq!(thumb_side(6, 12), 112);
        assert_eq!(thumb_side(24, 16), 79);
        let g = grid_for(512, THUMB_SIDE, 2);
        assert_eq!((g.m, g.cell), (112, 1));
    }
}
