//! The embedded fonts: DejaVu Sans 2.37 (regular and bold), registered with plotters' `ab_glyph`
//! text backend, so PNG labels never depend on the fonts a machine happens to have; and Droid Sans
//! Fallback for the characters DejaVu lacks (Chinese and Japanese), chosen glyph by glyph.
//!
//! SVG files name the same family first (`font-family="DejaVu Sans, …, sans-serif"`) and leave the
//! glyphs to the viewer, so labels stay searchable text.

use std::sync::OnceLock;

use ab_glyph::{point, Font, FontRef, Glyph, PxScale, ScaleFont};
use plotters::style::{FontDesc, FontFamily, FontStyle};

/// Family name the renderer registers and asks for. plotters writes it verbatim into SVG
/// `font-family`, where it is a CSS font list: viewers with DejaVu Sans use it, others fall back.
pub(crate) const FAMILY: &str = "DejaVu Sans, Verdana, Helvetica, Arial, sans-serif";

static REGULAR: &[u8] = include_bytes!("../../../assets/fonts/DejaVuSans.ttf");
static BOLD: &[u8] = include_bytes!("../../../assets/fonts/DejaVuSans-Bold.ttf");
static FALLBACK: &[u8] = include_bytes!("../../../assets/fonts/DroidSansFallbackFull.ttf");

/// Error when the embedded font cannot be parsed (a build defect, never user input).
#[derive(Debug, thiserror::Error)]
#[error("the embedded font cannot be read; this build of attnviz is broken")]
pub struct FontError;

/// Register the embedded fonts with plotters (once per process).
pub(crate) fn ensure_registered() -> Result<(), FontError> {
    static DONE: OnceLock<bool> = OnceLock::new();
    let ok = *DONE.get_or_init(|| {
        plotters::style::register_font(FAMILY, FontStyle::Normal, REGULAR).is_ok()
            && plotters::style::register_font(FAMILY, FontStyle::Bold, BOLD).is_ok()
    });
    if ok {
        Ok(())
    } else {
        Err(FontError)
    }
}

/// One embedded face, sized the way plotters' SVG backend sizes text.
struct Face {
    font: FontRef<'static>,
    /// Height of a lower-case `x` as a fraction of the em.
    x_height: f32,
}

fn face(bold: bool) -> &'static Face {
    &faces()[bold as usize]
}

/// DejaVu Sans regular, bold, and Droid Sans Fallback.
fn faces() -> &'static [Face; 3] {
    static FACES: OnceLock<[Face; 3]> = OnceLock::new();
    FACES.get_or_init(|| {
        [REGULAR, BOLD, FALLBACK].map(|bytes| {
            let font = FontRef::try_from_slice(bytes).expect("embedded fonts parse");
            // Only DejaVu's x-height places text; the fallback's is never used.
            let x_height = font
                .outline(font.glyph_id('x'))
                .map_or(0.5, |x| x.bounds.max.y / font.units_per_em().unwrap_or(2048.0));
            Face { font, x_height }
        })
    })
}

/// The face that draws `c`: DejaVu Sans when it has the glyph, else Droid Sans Fallback when that
/// has it, else DejaVu Sans (whose missing-glyph box [`drawable`] keeps out of labels).
fn face_for(c: char, bold: bool) -> &'static Face {
    let primary = face(bold);
    let fallback = &faces()[2];
    if primary.font.glyph_id(c).0 == 0 && fallback.font.glyph_id(c).0 != 0 {
        fallback
    } else {
        primary
    }
}

/// plotters' SVG backend writes `font-size = size / 1.24`; PNG text uses the same em.
fn em(size: f64) -> f32 {
    (size / 1.24) as f32
}

fn px_scale(f: &Face, size: f64) -> PxScale {
    let units = f.font.units_per_em().unwrap_or(2048.0);
    PxScale::from(em(size) * f.font.height_unscaled() / units)
}

/// The glyphs of `text` laid out on one line from x = 0, each with the face that draws it, with
/// sub-pixel advances and kerning (between glyphs of the same face).
fn layout(text: &str, size: f64, bold: bool) -> (Vec<(&'static Face, Glyph)>, f32) {
    let mut x = 0f32;
    let mut prev: Option<(*const Face, ab_glyph::GlyphId)> = None;
    let mut glyphs = Vec::with_capacity(text.len());
    for c in text.chars() {
        let f = face_for(c, bold);
        let scaled = f.font.as_scaled(px_scale(f, size));
        let id = scaled.glyph_id(c);
        if let Some((pf, p)) = prev {
            if std::ptr::eq(pf, f) {
                x += scaled.kern(p, id);
            }
        }
        glyphs.push((f, id.with_scale_and_position(scaled.scale(), point(x, 0.0))));
        x += scaled.h_advance(id);
        prev = Some((f as *const Face, id));
    }
    (glyphs, x)
}

/// Width in pixels of `text` at `size`, as the PNG renderer draws it.
pub(crate) fn width(text: &str, size: f64, bold: bool) -> u32 {
    layout(text, size, bold).1.ceil() as u32
}

/// Rasterise `text` at `size`: calls `put(x, y, coverage)` for each touched pixel, with x from
/// the start of the text and y = 0 at the middle of the lower-case letters (where SVG's
/// `dy="0.5ex"` puts it). plotters' own ab_glyph text rounds every glyph to whole pixels, which
/// makes letter spacing visibly uneven at label sizes, so PNG text is drawn here.
pub(crate) fn rasterize(text: &str, size: f64, bold: bool, mut put: impl FnMut(i32, i32, f32)) {
    // Every glyph sits on DejaVu's baseline, so mixed-script labels line up.
    let baseline = 0.5 * face(bold).x_height * em(size);
    let (glyphs, _) = layout(text, size, bold);
    for (f, mut g) in glyphs {
        g.position.y = baseline;
        if let Some(outline) = f.font.outline_glyph(g) {
            let b = outline.px_bounds();
            outline.draw(|x, y, c| {
                if c > 0.0 {
                    put(
                        b.min.x as i32 + x as i32,
                        b.min.y as i32 + y as i32,
                        c.min(1.0),
                    );
                }
            });
        }
    }
}

/// The plotters font for `size` (plotters' size unit: the line height in pixels).
pub(crate) fn desc(size: f64, bold: bool) -> FontDesc<'static> {
    let style = if bold {
        FontStyle::Bold
    } else {
        FontStyle::Normal
    };
    FontDesc::new(FontFamily::Name(FAMILY), size, style)
}

/// Whether one of the embedded fonts has a glyph for `c`.
pub(crate) fn covers(c: char) -> bool {
    faces().iter().any(|f| f.font.glyph_id(c).0 != 0)
}

/// `text` as the PNG renderer draws it: characters neither embedded font has (emoji, …) become
/// their code point (`U+1F363`), so they read as something rather than as empty boxes.
/// SVG keeps the original characters and lets the viewer's fonts draw them.
pub(crate) fn drawable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut after_code = false;
    for c in text.chars() {
        if c == ' ' || covers(c) {
            if after_code && c.is_alphanumeric() {
                out.push(' ');
            }
            out.push(c);
            after_code = false;
        } else {
            if after_code || out.chars().last().is_some_and(char::is_alphanumeric) {
                out.push(' ');
            }
            out.push_str(&format!("U+{:04X}", c as u32));
            after_code = true;
        }
    }
    out
}

/// Clean user text for a label: control characters (which XML cannot carry) become U+FFFD,
/// runs of whitespace become one space, and anything longer than `max_chars` is cut with `…`.
pub(crate) fn label(text: &str, max_chars: usize) -> String {
    let clean: Vec<char> = text
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .map(|c| if c.is_control() { '\u{FFFD}' } else { c })
        .collect();
    if clean.len() <= max_chars {
        clean.into_iter().collect()
    } else {
        let mut out: String = clean[..max_chars.saturating_sub(1)].iter().collect();
        out.push('…');
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_cleaned_and_cut() {
        assert_eq!(label("  the \n quick\tfox ", 40), "the quick fox");
        assert_eq!(label("a\u{1}b", 40), "a\u{FFFD}b");
        assert_eq!(label("abcdefgh", 5), "abcd…");
        assert_eq!(label("abcde", 5), "abcde");
        assert_eq!(label("", 5), "");
    }

    #[test]
    fn missing_glyphs_become_code_points() {
        assert!(covers('é') && covers('—'));
        assert_eq!(drawable("café"), "café");
        // CJK comes from the fallback font; emoji from neither.
        assert_eq!(drawable("東京"), "東京");
        assert_eq!(drawable("##た!"), "##た!");
        assert_eq!(drawable("a🍣"), "a U+1F363");
        assert_eq!(drawable("🍣x"), "U+1F363 x");
    }

    #[test]
    fn cjk_is_drawn_by_the_fallback_font() {
        // A CJK glyph covers pixels (the fallback draws it) and is about an em wide, wider than
        // a Latin letter; DejaVu alone would draw nothing there.
        let mut ink = 0;
        rasterize("東", 20.0, false, |_, _, c| {
            if c > 0.5 {
                ink += 1;
            }
        });
        assert!(ink > 20, "{ink} pixels of ink");
        assert!(width("東", 20.0, false) > width("x", 20.0, false));
        assert!(std::ptr::eq(face_for('東', false), &faces()[2]));
        assert!(std::ptr::eq(face_for('x', false), face(false)));
    }

    #[test]
    fn measures_with_the_embedded_font() {
        ensure_registered().unwrap();
        let narrow = width("iiii", 14.0, false);
        let wide = width("WWWW", 14.0, false);
        assert!(narrow > 0 && wide > 2 * narrow, "{narrow} {wide}");
        assert!(width("WWWW", 14.0, true) >= wide);
    }
}
