//! Renderers of a [`Comparison`] (two captures compared, `attnviz_analysis::compare`): PNG/SVG figures
//! ([`image`]), the comparison's numbers as JSON ([`json`]), a terminal view ([`terminal`]) and
//! a self-contained HTML page ([`html`]). None of them knows the model exists.

pub mod html;
pub mod image;
pub mod json;
pub mod terminal;

use crate::colormap::Rgb;
use attnviz_analysis::compare::Comparison;

/// Which comparison figure the PNG/SVG shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompareFigure {
    /// The layers × heads heatmap of Jensen–Shannon distances, the farthest heads listed beside
    /// it.
    Distance,
    /// One head's A, B and A − B side by side.
    Head {
        /// Compared layer (0-based index into the compared layers).
        layer: usize,
        /// Head, 0-based.
        head: usize,
    },
    /// Every head of one layer's A − B in a grid.
    Layer {
        /// Compared layer.
        layer: usize,
    },
}

/// matplotlib's RdBu, reversed: blue (−1) through near-white (0) to red (+1).
const RDBU_R: [[u8; 3]; 11] = [
    [0x05, 0x30, 0x61],
    [0x21, 0x66, 0xac],
    [0x43, 0x93, 0xc3],
    [0x92, 0xc5, 0xde],
    [0xd1, 0xe5, 0xf0],
    [0xf7, 0xf7, 0xf7],
    [0xfd, 0xdb, 0xc7],
    [0xf4, 0xa5, 0x82],
    [0xd6, 0x60, 0x4d],
    [0xb2, 0x18, 0x2b],
    [0x67, 0x00, 0x1f],
];

/// The diverging colour of `t` in [−1, 1] (clamped; NaN is 0): blue below 0, red above, the
/// centre's near-white at exactly 0.
pub(crate) fn diverging(t: f32) -> Rgb {
    let t = if t.is_nan() { 0.0 } else { t.clamp(-1.0, 1.0) };
    let pos = (t + 1.0) * 5.0;
    let i = (pos.floor() as usize).min(9);
    let f = pos - i as f32;
    let mix = |a: u8, b: u8| (a as f32 + (b as f32 - a as f32) * f).round() as u8;
    let (a, b) = (RDBU_R[i], RDBU_R[i + 1]);
    Rgb(mix(a[0], b[0]), mix(a[1], b[1]), mix(a[2], b[2]))
}

/// The hex colour (`#rrggbb`) of `diverging`, for the HTML page's legend.
pub fn diverging_hex(t: f32) -> String {
    let Rgb(r, g, b) = diverging(t);
    format!("#{r:02x}{g:02x}{b:02x}")
}

/// How a view names one side: `A: all-MiniLM-L6-v2 · “The cat sat.”`.
fn side_line(name: &str, side: &attnviz_analysis::compare::Side) -> String {
    let mut s = format!("{name}: {} · “{}”", side.model.name(), side.text);
    if let Some(pair) = &side.pair {
        s.push_str(&format!(" + “{pair}”"));
    }
    s
}

/// The two lines that say what A and B are.
pub fn side_lines(c: &Comparison) -> [String; 2] {
    [side_line("A", &c.a), side_line("B", &c.b)]
}

/// What a view says about how the units were matched and what was left out: one line, and a
/// line per side with units that had no partner; plus a line when only the shared layers and
/// heads were compared.
pub fn alignment_lines(c: &Comparison, raw: bool) -> Vec<String> {
    let what = match c.level {
        crate::attention::Level::Token => "tokens",
        crate::attention::Level::Word => "words",
    };
    let mut lines = vec![format!(
        "Compared: {} ({} of A's {} and {} of B's {} {what} paired)",
        c.basis.describe(),
        c.n_queries(),
        c.a.queries.len(),
        c.n_queries(),
        c.b.queries.len()
    )];
    let list = |v: Vec<String>| v.join(" ");
    let (ua, ub) = (c.unmatched_a(raw), c.unmatched_b(raw));
    if !ua.is_empty() {
        lines.push(format!("Only in A: {}", list(ua)));
    }
    if !ub.is_empty() {
        lines.push(format!("Only in B: {}", list(ub)));
    }
    if c.shared_only {
        lines.push(format!(
            "Only the shared layers and heads, by index: A has {} × {}, B {} × {}",
            c.a.model.layers, c.a.model.heads, c.b.model.layers, c.b.model.heads
        ));
    }
    lines
}

/// Everything a view says under its figures: [`alignment_lines`], then [`mask_lines`].
pub fn note_lines(c: &Comparison, raw: bool, drawn: bool) -> Vec<String> {
    let mut lines = alignment_lines(c, raw);
    lines.extend(mask_lines(c, drawn));
    lines
}

/// What a view says when A and B have different masks (none when they agree): which masks,
/// that only the cells both can attend are compared, and, where the view `drawn` matrices,
/// that each side is drawn with its own mask.
pub fn mask_lines(c: &Comparison, drawn: bool) -> Vec<String> {
    if !c.masks_differ() {
        return Vec::new();
    }
    let (a, b) = (c.a.mask_words(), c.b.mask_words());
    let masks = if a == b {
        // The same kind over units that hide different cells (other windows or spans).
        format!("A and B are both {a}, but hide different cells")
    } else {
        format!("A is {a}, B {b}")
    };
    let mut first = format!("Masks differ: {masks}");
    if drawn {
        first.push_str("; each is drawn with its own mask (hatched: cannot attend)");
    }
    first.push('.');
    vec![
        first,
        "A − B and the distances use only the cells both can attend, each row as shares of those keys."
            .to_string(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diverging_is_centred_and_monotone_at_the_ends() {
        assert_eq!(diverging(0.0), Rgb(0xf7, 0xf7, 0xf7));
        assert_eq!(diverging(-1.0), Rgb(0x05, 0x30, 0x61));
        assert_eq!(diverging(1.0), Rgb(0x67, 0x00, 0x1f));
        assert_eq!(diverging(f32::NAN), diverging(0.0));
        // Red grows with t above 0, blue below.
        assert!(diverging(0.5).2 < diverging(0.1).2);
        assert!(diverging(-0.5).0 < diverging(-0.1).0);
    }
}
