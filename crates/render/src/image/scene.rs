//! A figure as a list of things to draw, in pixels, independent of PNG or SVG.
//!
//! Layout code builds a [`Scene`]; `paint` draws it with plotters on either backend. Keeping the
//! two apart lets tests check the layout itself (labels inside the canvas, none overlapping).

#[cfg(test)]
use super::font;
use super::theme::Rgb;

/// Horizontal alignment of a label along its reading direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Align {
    Start,
    Middle,
    End,
}

/// A line of text. `(x, y)` is the anchor: along the reading direction it is where the text
/// starts, is centred or ends ([`Align`]); across it, the middle of the lower-case letters.
#[derive(Clone, Debug)]
pub(crate) struct Text {
    pub x: i32,
    pub y: i32,
    pub text: String,
    /// plotters' size: line height in pixels.
    pub size: f64,
    pub bold: bool,
    pub color: Rgb,
    pub align: Align,
    /// Rotated a quarter turn counter-clockwise (reads bottom to top).
    pub up: bool,
}

#[cfg(test)]
impl Text {
    /// The box the text occupies, measured with the embedded fonts on the text as PNG draws it:
    /// the union of its ink and of its advance box (a line height of `0.84 × size` centred on the
    /// anchor), so that neither a tall glyph nor a wide space escapes.
    pub(crate) fn bounds(&self) -> Rect {
        let text = font::drawable(&self.text);
        let start = super::paint::start(self);
        let len = font::advance(&text, self.size, self.bold);
        let half = (self.size * 0.42).ceil() as i32;
        let (mut a0, mut b0, mut a1, mut b1) = (
            start.floor() as i32,
            -half,
            (start + len).ceil() as i32,
            half,
        );
        if let Some((x0, y0, x1, y1)) = font::ink(&text, self.size, self.bold, start) {
            (a0, b0, a1, b1) = (a0.min(x0), b0.min(y0), a1.max(x1), b1.max(y1));
        }
        if self.up {
            // paint draws the pixel (x, y) of the text at (anchor.x + y, anchor.y - x)
            Rect::new(self.x + b0, self.y - a1 + 1, self.x + b1, self.y - a0 + 1)
        } else {
            Rect::new(self.x + a0, self.y + b0, self.x + a1, self.y + b1)
        }
    }
}

/// An axis-aligned box, `x0 <= x1`, `y0 <= y1`, end-exclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rect {
    pub x0: i32,
    pub y0: i32,
    pub x1: i32,
    pub y1: i32,
}

impl Rect {
    pub(crate) fn new(x0: i32, y0: i32, x1: i32, y1: i32) -> Self {
        Rect { x0, y0, x1, y1 }
    }

    /// Whether the two boxes share any area.
    #[cfg(test)]
    pub(crate) fn overlaps(&self, o: &Rect) -> bool {
        self.x0 < o.x1 && o.x0 < self.x1 && self.y0 < o.y1 && o.y0 < self.y1
    }

    /// Whether `o` lies entirely inside `self`.
    #[cfg(test)]
    pub(crate) fn contains(&self, o: &Rect) -> bool {
        o.x0 >= self.x0 && o.y0 >= self.y0 && o.x1 <= self.x1 && o.y1 <= self.y1
    }
}

/// A block of colour cells: `rows × cols` cells of `cell_w × cell_h` pixels each, drawn at
/// `(x, y)`. PNG draws them as pixels; SVG as one `<rect>` per cell when there are few, else as an
/// embedded image.
#[derive(Clone, Debug)]
pub(crate) struct Cells {
    pub x: i32,
    pub y: i32,
    pub rows: usize,
    pub cols: usize,
    pub cell_w: u32,
    pub cell_h: u32,
    /// Row-major, `rows × cols`.
    pub colors: Vec<Rgb>,
    /// Cells drawn hatched instead of in their colour (a causal mask's hidden cells).
    pub hatch: Option<Hatch>,
}

/// One hatch line every this many pixels (at scale factor 1).
pub(crate) const HATCH_PERIOD: u32 = 6;

/// How hatched cells look: the background crossed by one-pixel diagonal lines (`/`), continuous
/// from cell to cell (they follow the figure's pixel grid), so a block of masked cells reads as
/// one textured area that no colour of any colour map can be mistaken for.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Hatch {
    /// Row-major, `rows × cols`: which cells are hatched.
    pub cells: Vec<bool>,
    /// Between the lines.
    pub background: Rgb,
    /// The lines.
    pub line: Rgb,
}

impl Hatch {
    /// The colour of figure pixel `(x, y)` inside a hatched cell, with lines every `period`
    /// pixels, `width` pixels wide.
    pub(crate) fn color_at(&self, x: i64, y: i64, period: i64, width: i64) -> Rgb {
        if (x + y).rem_euclid(period.max(1)) < width {
            self.line
        } else {
            self.background
        }
    }
}

impl Cells {
    pub(crate) fn width(&self) -> u32 {
        self.cols as u32 * self.cell_w
    }
    pub(crate) fn height(&self) -> u32 {
        self.rows as u32 * self.cell_h
    }

    /// Whether cell `i` (row-major) is hatched.
    pub(crate) fn hatched(&self, i: usize) -> bool {
        self.hatch.as_ref().is_some_and(|h| h.cells[i])
    }

    /// The cells as `width × height` RGB pixels (hatched cells hatched in figure coordinates).
    pub(crate) fn pixels(&self) -> Vec<u8> {
        let (w, h) = (self.width() as usize, self.height() as usize);
        let mut out = Vec::with_capacity(w * h * 3);
        let mut row = Vec::with_capacity(w * 3);
        for r in 0..self.rows {
            row.clear();
            for c in &self.colors[r * self.cols..(r + 1) * self.cols] {
                for _ in 0..self.cell_w {
                    row.extend_from_slice(&[c.0, c.1, c.2]);
                }
            }
            let hatched: Vec<usize> = (0..self.cols)
                .filter(|&c| self.hatched(r * self.cols + c))
                .collect();
            for py in 0..self.cell_h {
                let start = out.len();
                out.extend_from_slice(&row);
                if let Some(hatch) = &self.hatch {
                    let y = self.y as i64 + (r as u32 * self.cell_h + py) as i64;
                    for &c in &hatched {
                        for px in 0..self.cell_w {
                            let x = c as u32 * self.cell_w + px;
                            let Rgb(a, b, d) =
                                hatch.color_at(self.x as i64 + x as i64, y, HATCH_PERIOD as i64, 1);
                            let at = start + x as usize * 3;
                            out[at..at + 3].copy_from_slice(&[a, b, d]);
                        }
                    }
                }
            }
        }
        out
    }
}

/// One thing to draw. Every line in these figures is axis-aligned, so lines and frames are
/// filled boxes: crisp and identical in PNG and SVG.
#[derive(Clone, Debug)]
pub(crate) enum Item {
    Cells(Cells),
    /// A filled box.
    Fill(Rect, Rgb),
    Text(Text),
}

/// The four one-pixel sides of a frame drawn just outside `r`.
pub(crate) fn frame(r: Rect, color: Rgb) -> [Item; 4] {
    let o = Rect::new(r.x0 - 1, r.y0 - 1, r.x1 + 1, r.y1 + 1);
    [
        Item::Fill(Rect::new(o.x0, o.y0, o.x1, r.y0), color),
        Item::Fill(Rect::new(o.x0, r.y1, o.x1, o.y1), color),
        Item::Fill(Rect::new(o.x0, r.y0, r.x0, r.y1), color),
        Item::Fill(Rect::new(r.x1, r.y0, o.x1, r.y1), color),
    ]
}

/// A whole figure.
#[derive(Clone, Debug)]
pub(crate) struct Scene {
    pub width: u32,
    pub height: u32,
    pub background: Rgb,
    /// Title, for the SVG `<title>` and PNG metadata.
    pub title: String,
    pub items: Vec<Item>,
}

impl Scene {
    /// The texts of the scene.
    pub(crate) fn texts(&self) -> impl Iterator<Item = &Text> {
        self.items.iter().filter_map(|i| match i {
            Item::Text(t) => Some(t),
            _ => None,
        })
    }

    /// How many colour cells the scene holds.
    pub(crate) fn cell_count(&self) -> usize {
        self.items
            .iter()
            .map(|i| match i {
                Item::Cells(c) => c.rows * c.cols,
                _ => 0,
            })
            .sum()
    }
}
