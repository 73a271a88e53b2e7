//! Fonts for SVG figures and HTML reports: only the glyphs the document uses, as WOFF in
//! `@font-face` rules with `data:` URIs, so the document draws the same everywhere and stays
//! small.
//!
//! Subsetting uses `allsorts` (YesLogic, Apache-2.0, pure Rust, used in production by Prince).
//! Its `Minimal` profile with a Unicode cmap keeps exactly the tables a browser needs to accept a
//! font (cmap, head, hhea, hmtx, maxp, name, OS/2, post, glyf/loca or CFF). The alternatives:
//! `subsetter` (typst) removes the cmap on purpose (its output is for PDF only); fontations'
//! `klippa` is not published; `hb-subset` builds HarfBuzz's C++; `font-subset` is a new
//! one-person crate. allsorts does not subset layout tables (GSUB/GPOS), so the fonts of scripts
//! that need shaping (Arabic, Hebrew, Devanagari, Thai: each small and already cut to its script)
//! are embedded whole, layout tables and all; Latin, CJK, Hangul and emoji need no shaping for
//! the text we draw and are subset.

use std::collections::{BTreeMap, BTreeSet};

use allsorts::binary::read::ReadScope;
use allsorts::font_data::FontData;
use allsorts::subset::{subset, CmapTarget, SubsetProfile};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use rustybuzz::ttf_parser;

use super::{chain, runs, woff, FontError, FontId};

/// One font (or subset of one) to embed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebFont {
    /// The font it comes from.
    pub font: FontId,
    /// CSS family name (`attnviz-sans`, `attnviz-cjk`, …).
    pub family: &'static str,
    /// CSS weight: 700 for DejaVu Sans Bold, else 400.
    pub weight: u16,
    /// The font as WOFF 1.0.
    pub woff: Vec<u8>,
    /// The characters it is meant for (its `unicode-range`).
    pub chars: Vec<char>,
}

/// The fonts that draw `texts` (each with whether it is bold): for each embedded font that one of
/// the characters needs, a subset with just those characters (or, for the script fonts that need
/// shaping, the whole font). Characters no embedded font has are left to the viewer's fonts.
pub fn subset_for<'a>(
    texts: impl IntoIterator<Item = (&'a str, bool)>,
) -> Result<Vec<WebFont>, FontError> {
    let mut wanted: BTreeMap<FontId, BTreeSet<char>> = BTreeMap::new();
    for (text, bold) in texts {
        for run in runs(text, bold) {
            if let Some(font) = run.font {
                let chars = text[run.range].chars().filter(|&c| font.covers(c));
                wanted.entry(font).or_default().extend(chars);
            }
        }
    }
    // The space is in every line of text; the Latin fonts carry it so its width matches.
    for sans in [FontId::Sans, FontId::SansBold] {
        if let Some(chars) = wanted.get_mut(&sans) {
            chars.insert(' ');
        }
    }
    wanted
        .into_iter()
        .map(|(font, chars)| {
            let sfnt = if font.spec().whole {
                font.bytes().to_vec()
            } else {
                subset_font(font, &chars)?
            };
            let woff = woff::encode(&sfnt).ok_or_else(|| FontError(font.file().into()))?;
            Ok(WebFont {
                font,
                family: font.family(),
                weight: if font.is_bold() { 700 } else { 400 },
                woff,
                chars: chars.into_iter().collect(),
            })
        })
        .collect()
}

/// A TrueType/OpenType font with only the glyphs of `chars` (and `.notdef`).
fn subset_font(font: FontId, chars: &BTreeSet<char>) -> Result<Vec<u8>, FontError> {
    let err = |what: &dyn std::fmt::Display| FontError(format!("{} ({what})", font.file()));
    let face = ttf_parser::Face::parse(font.bytes(), 0).map_err(|e| err(&e))?;
    let mut glyphs = vec![0u16];
    for &c in chars {
        if let Some(g) = face.glyph_index(c) {
            if !glyphs.contains(&g.0) {
                glyphs.push(g.0);
            }
        }
    }
    let data = ReadScope::new(font.bytes())
        .read::<FontData<'_>>()
        .map_err(|e| err(&e))?;
    let provider = data.table_provider(0).map_err(|e| err(&e))?;
    subset(
        &provider,
        &glyphs,
        &SubsetProfile::Minimal,
        CmapTarget::Unicode,
    )
    .map_err(|e| err(&e))
}

/// `@font-face` rules for `fonts`, each with its WOFF as a `data:` URI and a `unicode-range` of
/// its characters. (A page that embeds them needs `font-src data:` in its Content-Security-Policy.)
pub fn font_face_css(fonts: &[WebFont]) -> String {
    let mut css = String::new();
    for f in fonts {
        css.push_str(&format!(
            "@font-face{{font-family:\"{}\";font-weight:{};font-style:normal;src:url(data:font/woff;base64,{}) format(\"woff\");unicode-range:{}}}\n",
            f.family,
            f.weight,
            STANDARD.encode(&f.woff),
            unicode_range(&f.chars),
        ));
    }
    css
}

/// The CSS family names of `fonts`, in the order the renderer tries them (so a CSS font list
/// that starts with them picks, per character, the same font as the PNG renderer), quoted and
/// comma-separated; empty when `fonts` is.
pub fn font_family_list(fonts: &[WebFont]) -> String {
    let mut names: Vec<&str> = Vec::new();
    for font in chain(false).into_iter().chain([FontId::SansBold]) {
        if fonts.iter().any(|f| f.font == font) && !names.contains(&font.family()) {
            names.push(font.family());
        }
    }
    names
        .iter()
        .map(|n| format!("\"{n}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `U+20,U+41-5A,…` for `chars` (sorted).
fn unicode_range(chars: &[char]) -> String {
    let mut ranges: Vec<(u32, u32)> = Vec::new();
    for &c in chars {
        let c = c as u32;
        match ranges.last_mut() {
            Some((_, end)) if *end + 1 == c => *end = c,
            _ => ranges.push((c, c)),
        }
    }
    ranges
        .iter()
        .map(|&(a, b)| {
            if a == b {
                format!("U+{a:X}")
            } else {
                format!("U+{a:X}-{b:X}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fonts::woff;

    /// The sfnt inside a web font, parsed as a browser would.
    fn parse(f: &WebFont) -> Vec<u8> {
        woff::decode(&f.woff).expect("valid WOFF")
    }

    #[test]
    fn subsets_hold_exactly_the_characters_used_with_a_working_cmap() {
        let fonts = subset_for([("Hi 東京 한국 🚀 naïve", false), ("Title", true)]).unwrap();
        let by_font: BTreeMap<FontId, &WebFont> = fonts.iter().map(|f| (f.font, f)).collect();
        assert_eq!(
            by_font.keys().copied().collect::<Vec<_>>(),
            [
                FontId::Sans,
                FontId::SansBold,
                FontId::Hangul,
                FontId::Cjk,
                FontId::Emoji
            ]
        );
        for f in &fonts {
            let sfnt = parse(f);
            let face = ttf_parser::Face::parse(&sfnt, 0).unwrap();
            // every character has a glyph with an outline (the space excepted), and the font
            // holds little more than those glyphs and .notdef
            for &c in &f.chars {
                let g = face
                    .glyph_index(c)
                    .unwrap_or_else(|| panic!("{c:?} in {f:?}"));
                assert!(c == ' ' || face.glyph_bounding_box(g).is_some(), "{c:?}");
            }
            assert!(
                (face.number_of_glyphs() as usize) <= f.chars.len() + 4,
                "{:?}: {} glyphs for {} chars",
                f.font,
                face.number_of_glyphs(),
                f.chars.len()
            );
            // the tables browsers require are all there
            for table in [
                b"cmap", b"head", b"hhea", b"hmtx", b"maxp", b"name", b"OS/2", b"post",
            ] {
                let tag = ttf_parser::Tag::from_bytes(table);
                assert!(
                    face.raw_face().table(tag).is_some(),
                    "{:?} lacks {tag}",
                    f.font
                );
            }
        }
        let cjk = by_font[&FontId::Cjk];
        assert_eq!(cjk.chars, ['京', '東']);
        assert!(
            cjk.woff.len() < 4000,
            "{} bytes for two CJK glyphs",
            cjk.woff.len()
        );
        assert_eq!(by_font[&FontId::SansBold].weight, 700);
    }

    #[test]
    fn shaping_scripts_are_embedded_whole() {
        let fonts = subset_for([("नमस्ते مرحبا", false)]).unwrap();
        let deva = fonts.iter().find(|f| f.font == FontId::Devanagari).unwrap();
        let sfnt = parse(deva);
        assert_eq!(sfnt.len(), FontId::Devanagari.bytes().len());
        let face = ttf_parser::Face::parse(&sfnt, 0).unwrap();
        assert!(face.tables().gsub.is_some(), "keeps its shaping rules");
        assert!(fonts.iter().any(|f| f.font == FontId::Arabic));
    }

    #[test]
    fn css_declares_each_font_with_its_range() {
        let fonts = subset_for([("AB 東", false)]).unwrap();
        let css = font_face_css(&fonts);
        assert_eq!(css.matches("@font-face").count(), 2);
        assert!(css.contains("font-family:\"attnviz-sans\";font-weight:400"));
        assert!(css.contains("unicode-range:U+20,U+41-42}"), "{css}");
        assert!(css.contains("unicode-range:U+6771}"));
        assert!(css.contains("src:url(data:font/woff;base64,d09GR"));
        assert_eq!(
            font_family_list(&fonts),
            "\"attnviz-sans\", \"attnviz-cjk\""
        );
        assert_eq!(font_family_list(&[]), "");
    }
}
