//! Text in figures, with the embedded fonts of [`crate::fonts`]: DejaVu Sans for Latin,
//! Greek and Cyrillic, and per character the font of its script (Arabic, Hebrew, Devanagari,
//! Thai, Hangul, CJK, emoji), so PNG labels never depend on the fonts a machine happens to have.
//!
//! PNG text is shaped with rustybuzz (a port of HarfBuzz: Arabic letters join, Devanagari
//! clusters form, kerning applies), put in visual order by the Unicode bidirectional algorithm
//! (Arabic and Hebrew read right to left inside a left-to-right label), and rasterised with
//! ab_glyph at sub-pixel positions. SVG text stays text: the SVG embeds subsets of the same fonts
//! (see `paint`), so viewers draw the same glyphs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use ab_glyph::{point, Font, FontRef, GlyphId, PxScale};
use rustybuzz::{Direction, Script, ShapePlan, UnicodeBuffer};
use unicode_bidi::{Level, ParagraphBidiInfo};

use crate::fonts::{self, FontId};

/// The CSS font list SVG text names after the embedded families: viewers that ignore embedded
/// fonts (some desktop SVG editors) use DejaVu Sans when installed, else a close sans-serif.
pub(crate) const FALLBACK_FAMILIES: &str = "DejaVu Sans, Verdana, Helvetica, Arial, sans-serif";

/// One embedded font, ready to shape and rasterise.
struct Face {
    glyphs: FontRef<'static>,
    shaper: rustybuzz::Face<'static>,
    units_per_em: f32,
}

fn face(id: FontId) -> &'static Face {
    static FACES: [OnceLock<Face>; 9] = [const { OnceLock::new() }; 9];
    FACES[FontId::ALL.iter().position(|&f| f == id).unwrap_or(0)].get_or_init(|| {
        let bytes = id.bytes();
        let glyphs = FontRef::try_from_slice(bytes)
            .unwrap_or_else(|e| panic!("embedded font {} parses: {e}", id.file()));
        let shaper = rustybuzz::Face::from_slice(bytes, 0)
            .unwrap_or_else(|| panic!("embedded font {} parses", id.file()));
        let units_per_em = shaper.units_per_em() as f32;
        Face {
            glyphs,
            shaper,
            units_per_em,
        }
    })
}

/// The shaping plan for runs of `font` in one direction and script. Building a plan costs more
/// than shaping a label, and a figure shapes hundreds of labels in a few scripts: plans are kept.
fn plan(font: FontId, rtl: bool, script: Script) -> Arc<ShapePlan> {
    type Plans = HashMap<(FontId, bool, Script), Arc<ShapePlan>>;
    static PLANS: OnceLock<Mutex<Plans>> = OnceLock::new();
    let mut plans = PLANS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    plans
        .entry((font, rtl, script))
        .or_insert_with(|| {
            let direction = if rtl {
                Direction::RightToLeft
            } else {
                Direction::LeftToRight
            };
            Arc::new(ShapePlan::new(
                &face(font).shaper,
                direction,
                Some(script),
                None,
                &[],
            ))
        })
        .clone()
}

/// Height of DejaVu Sans' lower-case letters as a fraction of the em: the top of its `x`
/// (DejaVu's OS/2 table is too old to state an x-height).
fn x_height(bold: bool) -> f32 {
    let f = face(if bold { FontId::SansBold } else { FontId::Sans });
    let top = f.shaper.x_height().map(f32::from).or_else(|| {
        let x = f.shaper.glyph_index('x')?;
        Some(f32::from(f.shaper.glyph_bounding_box(x)?.y_max))
    });
    top.map_or(0.55, |h| h / f.units_per_em)
}

/// plotters' SVG backend writes `font-size = size / 1.24`; PNG text uses the same em.
pub(crate) fn em(size: f64) -> f32 {
    (size / 1.24) as f32
}

/// A shaped line: glyphs in visual order with their pen positions in pixels, x from the start of
/// the line, y = 0 on the baseline (down is positive).
struct Line {
    glyphs: Vec<Placed>,
    width: f32,
}

/// A glyph of a [`Line`].
struct Placed {
    font: FontId,
    id: u16,
    x: f32,
    y: f32,
    /// Byte offset in the text of the character (cluster) it draws.
    #[cfg_attr(not(test), allow(dead_code))]
    cluster: usize,
}

/// Shape `text` (one line) at `size`.
fn shape(text: &str, size: f64, bold: bool) -> Line {
    let em = em(size);
    let mut line = Line {
        glyphs: Vec::with_capacity(text.len()),
        width: 0.0,
    };
    // Labels are left-to-right lines (as in SVG, whose default direction is ltr): "##ر" keeps its
    // "##" on the left, while right-to-left words inside read right to left.
    let bidi = ParagraphBidiInfo::new(text, Some(Level::ltr()));
    let (levels, visual) = if bidi.has_rtl() {
        bidi.visual_runs(0..text.len())
    } else {
        (Vec::new(), std::iter::once(0..text.len()).collect())
    };
    for run in visual {
        let rtl = levels.get(run.start).is_some_and(|l| l.is_rtl());
        let mut pieces = fonts::runs(&text[run.clone()], bold);
        if rtl {
            pieces.reverse();
        }
        for piece in pieces {
            let Some(id) = piece.font else { continue };
            let f = face(id);
            let scale = em / f.units_per_em;
            let mut buffer = UnicodeBuffer::new();
            buffer.push_str(&text[run.start + piece.range.start..run.start + piece.range.end]);
            buffer.set_direction(if rtl {
                Direction::RightToLeft
            } else {
                Direction::LeftToRight
            });
            buffer.guess_segment_properties();
            let plan = plan(id, rtl, buffer.script());
            let shaped = rustybuzz::shape_with_plan(&f.shaper, &plan, buffer);
            let start = run.start + piece.range.start;
            for (info, pos) in shaped.glyph_infos().iter().zip(shaped.glyph_positions()) {
                line.glyphs.push(Placed {
                    font: id,
                    id: info.glyph_id as u16,
                    x: line.width + pos.x_offset as f32 * scale,
                    y: -(pos.y_offset as f32) * scale,
                    cluster: start + info.cluster as usize,
                });
                line.width += pos.x_advance as f32 * scale;
            }
        }
    }
    line
}

/// Width in pixels of `text` at `size`, as the PNG renderer draws it (sub-pixel, unrounded).
pub(crate) fn advance(text: &str, size: f64, bold: bool) -> f32 {
    shape(text, size, bold).width
}

/// Width in whole pixels of `text` at `size`, as the PNG renderer draws it.
pub(crate) fn width(text: &str, size: f64, bold: bool) -> u32 {
    advance(text, size, bold).ceil() as u32
}

/// The y of the baseline below the middle of the lower-case letters (where SVG's `dy="0.5ex"`
/// puts the anchor).
fn baseline(size: f64, bold: bool) -> f32 {
    0.5 * x_height(bold) * em(size)
}

/// Rasterise `text` at `size`, starting `x0` pixels right of the anchor: calls `put(x, y,
/// coverage)` for each touched pixel, with (0, 0) the pixel right-below the anchor and the anchor
/// on the middle of the lower-case letters. Every glyph sits on DejaVu's baseline, so
/// mixed-script labels line up. (plotters' own ab_glyph text rounds every glyph to whole pixels,
/// which makes letter spacing visibly uneven at label sizes, so PNG text is drawn here.)
pub(crate) fn rasterize(
    text: &str,
    size: f64,
    bold: bool,
    x0: f32,
    mut put: impl FnMut(i32, i32, f32),
) {
    let base = baseline(size, bold);
    let em = em(size);
    for g in shape(text, size, bold).glyphs {
        let f = face(g.font);
        let scale = PxScale::from(em * f.glyphs.height_unscaled() / f.units_per_em);
        let glyph = GlyphId(g.id).with_scale_and_position(scale, point(x0 + g.x, base + g.y));
        if let Some(outline) = f.glyphs.outline_glyph(glyph) {
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

/// The pixels `text` inks, `(x0, y0, x1, y1)` end-exclusive, relative to the anchor as in
/// [`rasterize`]; `None` for text that draws nothing.
#[cfg(test)]
pub(crate) fn ink(text: &str, size: f64, bold: bool, x0: f32) -> Option<(i32, i32, i32, i32)> {
    let mut b: Option<(i32, i32, i32, i32)> = None;
    rasterize(text, size, bold, x0, |x, y, c| {
        if c > 0.02 {
            b = Some(match b {
                None => (x, y, x + 1, y + 1),
                Some((a, b0, c0, d)) => (a.min(x), b0.min(y), c0.max(x + 1), d.max(y + 1)),
            });
        }
    });
    b
}

/// Whether one of the embedded fonts has a glyph for `c`.
pub(crate) fn covers(c: char) -> bool {
    c == ' ' || fonts::font_for(c, false).is_some()
}

/// `text` as the PNG renderer draws it: characters no embedded font has (private-use characters,
/// scripts we carry no font for) become their code point (`U+E000`), so they read as something
/// rather than as empty boxes. SVG keeps the original characters and lets the viewer's fonts try.
pub(crate) fn drawable(text: &str) -> String {
    if text.chars().all(covers) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut after_code = false;
    for c in text.chars() {
        if covers(c) {
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
    fn only_characters_no_font_has_become_code_points() {
        assert!(covers('é') && covers('—'));
        for text in [
            "café",
            "東京",
            "##た!",
            "a🍣",
            "한국어",
            "🚀x",
            "مرحبا",
            "नमस्ते",
        ] {
            assert_eq!(drawable(text), text);
        }
        assert_eq!(drawable("a\u{E000}"), "a U+E000");
        assert_eq!(drawable("\u{E000}x"), "U+E000 x");
    }

    /// Ink pixels (coverage above one half) of `text`.
    fn ink_count(text: &str) -> usize {
        let mut n = 0;
        rasterize(text, 20.0, false, 0.0, |_, _, c| n += usize::from(c > 0.5));
        n
    }

    #[test]
    fn every_script_draws_glyphs() {
        // Each draws real ink, about an em wide per glyph; a missing glyph would draw nothing
        // (rustybuzz maps it to .notdef, an empty box in DejaVu) or far less.
        for text in ["東", "한", "🚀", "م", "ש", "न", "ส", "Ж"] {
            assert!(ink_count(text) > 15, "{text}: {} pixels", ink_count(text));
            assert!(width(text, 20.0, false) >= 5, "{text}");
        }
        assert!(width("東", 20.0, false) > width("x", 20.0, false));
    }

    #[test]
    fn arabic_joins_and_reads_right_to_left() {
        // Joined letters are narrower than the same letters apart, and the first letter of a
        // right-to-left word is drawn at its right end.
        let joined = advance("سلام", 20.0, false);
        let apart: f32 = "سلام"
            .chars()
            .map(|c| advance(&c.to_string(), 20.0, false))
            .sum();
        assert!(joined < apart * 0.9, "{joined} vs {apart}");
        let text = "ab سل";
        let line = shape(text, 20.0, false);
        let arabic: Vec<_> = line
            .glyphs
            .iter()
            .filter(|g| g.font == FontId::Arabic)
            .collect();
        assert_eq!(arabic.len(), 2);
        let rightmost = arabic.iter().max_by(|a, b| a.x.total_cmp(&b.x)).unwrap();
        assert_eq!(rightmost.cluster, text.find('س').unwrap());
        // and the Latin comes first, on the left
        assert_eq!(line.glyphs[0].cluster, 0);
        assert!(line.glyphs[0].x < arabic[0].x);
    }

    #[test]
    fn measures_with_the_embedded_font() {
        let narrow = width("iiii", 14.0, false);
        let wide = width("WWWW", 14.0, false);
        assert!(narrow > 0 && wide > 2 * narrow, "{narrow} {wide}");
        assert!(width("WWWW", 14.0, true) >= wide);
    }

    #[test]
    fn lower_case_letters_are_centred_on_the_anchor() {
        // "xo" has no ascender or descender: its ink is the x-height band, which must be centred
        // on y = 0 (within a pixel at every label size).
        for size in [14.0, 15.5, 17.0, 22.0, 31.0] {
            let (mut sum, mut weight) = (0.0f64, 0.0f64);
            rasterize("xoxo", size, false, 0.0, |_, y, c| {
                sum += (y as f64 + 0.5) * c as f64;
                weight += c as f64;
            });
            let centre = sum / weight;
            assert!(
                centre.abs() <= 0.5,
                "size {size}: ink centre at {centre:.2}"
            );
        }
    }
}

#[cfg(test)]
mod preview {
    /// Writes lines of text at a large size to $ATTNVIZ_TEXT_PREVIEW (a PNG), to look at.
    #[test]
    #[ignore]
    fn text_preview() {
        let Ok(path) = std::env::var("ATTNVIZ_TEXT_PREVIEW") else {
            return;
        };
        let lines = [
            "I love 🚀 rockets, 한국어, 東京 and naïve café",
            "text, مرحبا שלום end",
            "##ر ##ب سلام عليكم",
            "नमस्ते क्षि स्त्री",
            "สวัสดี ภาษาไทย",
            "👩‍🚀 👍🏽 🇫🇷 ❤️ ✓",
        ];
        let size = 40.0;
        let (w, lh) = (1400usize, 70usize);
        let h = lh * lines.len();
        let mut px = vec![255u8; w * h];
        for (i, line) in lines.iter().enumerate() {
            let cy = (i * lh + lh / 2) as i32;
            super::rasterize(line, size, false, 10.0, |x, y, c| {
                let (x, y) = (x, cy + y);
                if x >= 0 && y >= 0 && (x as usize) < w && (y as usize) < h {
                    let p = &mut px[y as usize * w + x as usize];
                    *p = (*p as f32 * (1.0 - c)) as u8;
                }
            });
            for x in 0..w {
                px[cy as usize * w + x] = px[cy as usize * w + x].min(200);
            }
        }
        let file = std::fs::File::create(path).unwrap();
        let mut enc = png::Encoder::new(file, w as u32, h as u32);
        enc.set_color(png::ColorType::Grayscale);
        enc.write_header().unwrap().write_image_data(&px).unwrap();
    }
}
