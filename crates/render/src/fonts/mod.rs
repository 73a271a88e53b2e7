//! The fonts attnviz carries, shared by the PNG/SVG figures and the HTML report, so that every
//! script a user may type draws as itself on any machine, with or without system fonts.
//!
//! | font | draws | source |
//! | --- | --- | --- |
//! | DejaVu Sans 2.37, regular and bold | Latin, Greek, Cyrillic, symbols; the text of every figure | Debian `fonts-dejavu-core` |
//! | Noto Sans Arabic, Hebrew, Devanagari, Thai | those scripts (cut to them) | Debian `fonts-noto-core` |
//! | Nanum Gothic (Hangul cut) | Korean: syllables and jamo | Debian `fonts-nanum` |
//! | Droid Sans Fallback | Chinese, Japanese | Debian `fonts-droid-fallback` |
//! | Noto Emoji (monochrome outlines) | emoji | npm `@fontsource/noto-emoji` |
//!
//! `assets/fonts/README.md` records versions, licences and checksums; `scripts/make-fonts.sh`
//! rebuilds the folder. Every font is stored gzip-compressed (3.9 MB for all nine, against 5.5 MB
//! for the three uncompressed fonts before) and inflated on first use only, so a figure with
//! Latin labels never pays for the 4 MB CJK font. Beside each font, `NAME.cmap` lists the code
//! points it maps, so the font for a character is found without inflating anything
//! ([`font_for`]); a test checks those lists against the fonts.
//!
//! PNG text is shaped from these fonts (see `render::image`); SVG figures and HTML reports embed
//! subsets of them ([`subset_for`], [`font_face_css`]).

mod web;
mod woff;

use std::io::Read;
use std::ops::Range;
use std::sync::OnceLock;

use unicode_categories::UnicodeCategories;

pub use web::{font_face_css, font_family_list, subset_for, WebFont};

/// Error when an embedded font cannot be read or subset (a defect of the build, never of the
/// user's input: the tests read every embedded font).
#[derive(Debug, thiserror::Error)]
#[error("the embedded font {0} cannot be read or subset; this build of attnviz is broken")]
pub struct FontError(pub String);

/// One of the embedded fonts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FontId {
    /// DejaVu Sans.
    Sans,
    /// DejaVu Sans Bold.
    SansBold,
    /// Noto Sans Arabic.
    Arabic,
    /// Noto Sans Hebrew.
    Hebrew,
    /// Noto Sans Devanagari.
    Devanagari,
    /// Noto Sans Thai.
    Thai,
    /// Nanum Gothic, Hangul only.
    Hangul,
    /// Droid Sans Fallback (Chinese, Japanese).
    Cjk,
    /// Noto Emoji, monochrome.
    Emoji,
}

struct Spec {
    /// File stem in `assets/fonts/`.
    file: &'static str,
    /// The font, gzip-compressed.
    gz: &'static [u8],
    /// Code points the font maps, as hex ranges (`4e00-9fa5`), one a line.
    cmap: &'static str,
    /// CSS family name when embedded in SVG or HTML.
    family: &'static str,
    /// Embedded whole (it is small and cut to its script) rather than subset, so that the viewer
    /// can shape the script with the font's own layout tables.
    whole: bool,
}

macro_rules! spec {
    ($file:literal, $family:literal, $whole:literal) => {
        Spec {
            file: $file,
            gz: include_bytes!(concat!("../../assets/fonts/", $file, ".ttf.gz")),
            cmap: include_str!(concat!("../../assets/fonts/", $file, ".cmap")),
            family: $family,
            whole: $whole,
        }
    };
}

static SPECS: [Spec; 9] = [
    spec!("DejaVuSans", "attnviz-sans", false),
    spec!("DejaVuSans-Bold", "attnviz-sans", false),
    spec!("NotoSansArabic", "attnviz-arabic", true),
    spec!("NotoSansHebrew", "attnviz-hebrew", true),
    spec!("NotoSansDevanagari", "attnviz-devanagari", true),
    spec!("NotoSansThai", "attnviz-thai", true),
    spec!("NanumGothic-Hangul", "attnviz-hangul", false),
    spec!("DroidSansFallbackFull", "attnviz-cjk", false),
    spec!("NotoEmoji", "attnviz-emoji", false),
];

impl FontId {
    /// Every embedded font.
    pub const ALL: [FontId; 9] = [
        FontId::Sans,
        FontId::SansBold,
        FontId::Arabic,
        FontId::Hebrew,
        FontId::Devanagari,
        FontId::Thai,
        FontId::Hangul,
        FontId::Cjk,
        FontId::Emoji,
    ];

    fn index(self) -> usize {
        self as usize
    }

    fn spec(self) -> &'static Spec {
        &SPECS[self.index()]
    }

    /// The font's file name in `assets/fonts/` (without `.ttf.gz`).
    pub fn file(self) -> &'static str {
        self.spec().file
    }

    /// The CSS family name the font has when embedded in SVG or HTML.
    pub fn family(self) -> &'static str {
        self.spec().family
    }

    /// Whether the font is bold.
    pub fn is_bold(self) -> bool {
        self == FontId::SansBold
    }

    /// The compressed size of the font in the binary.
    pub fn compressed_len(self) -> usize {
        self.spec().gz.len()
    }

    /// The font file (TrueType), inflated on first use.
    pub fn bytes(self) -> &'static [u8] {
        static DATA: [OnceLock<Vec<u8>>; 9] = [const { OnceLock::new() }; 9];
        DATA[self.index()].get_or_init(|| self.inflate())
    }

    /// Inflate the font afresh (what [`FontId::bytes`] does once; for benchmarks).
    pub fn inflate(self) -> Vec<u8> {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(self.spec().gz)
            .read_to_end(&mut out)
            .unwrap_or_else(|e| panic!("embedded font {} inflates: {e}", self.file()));
        out
    }

    /// The code point ranges the font maps (from its `.cmap` list, without inflating the font).
    pub fn coverage(self) -> &'static [(u32, u32)] {
        static RANGES: [OnceLock<Vec<(u32, u32)>>; 9] = [const { OnceLock::new() }; 9];
        RANGES[self.index()].get_or_init(|| parse_ranges(self.spec().cmap))
    }

    /// Whether the font has a glyph for `c`.
    pub fn covers(self, c: char) -> bool {
        let c = c as u32;
        let ranges = self.coverage();
        let i = ranges.partition_point(|&(_, end)| end < c);
        ranges.get(i).is_some_and(|&(start, _)| start <= c)
    }
}

fn parse_ranges(text: &str) -> Vec<(u32, u32)> {
    text.lines()
        .filter_map(|line| {
            let (a, b) = line.trim().split_once('-')?;
            Some((
                u32::from_str_radix(a, 16).ok()?,
                u32::from_str_radix(b, 16).ok()?,
            ))
        })
        .collect()
}

/// The order fonts are tried in for a character: the script fonts first (each covers only its
/// script, and draws it with its own shaping rules even where DejaVu has the letters), then
/// DejaVu Sans, then Hangul, CJK and emoji.
fn chain(bold: bool) -> [FontId; 8] {
    let sans = if bold { FontId::SansBold } else { FontId::Sans };
    [
        FontId::Arabic,
        FontId::Hebrew,
        FontId::Devanagari,
        FontId::Thai,
        sans,
        FontId::Hangul,
        FontId::Cjk,
        FontId::Emoji,
    ]
}

/// The embedded font that draws `c` (bold text prefers DejaVu Sans Bold), or `None` when no
/// embedded font has it.
pub fn font_for(c: char, bold: bool) -> Option<FontId> {
    // Joiners and marks alone (outside a run) go to the first font with them, like anything else.
    chain(bold).into_iter().find(|f| f.covers(c))
}

/// Whether `c` belongs to the character before it: a combining mark, a joiner, a variation
/// selector, an emoji modifier or tag. Such characters stay in the font of their base character
/// when it has them (or when they draw nothing), so a cluster is shaped by one font.
fn continues_cluster(c: char) -> bool {
    c.is_mark()
        || c.is_other_format()
        || matches!(c as u32, 0xFE00..=0xFE0F | 0xE0100..=0xE01EF | 0x1F3FB..=0x1F3FF | 0xE0020..=0xE007F)
}

/// A stretch of text drawn with one font.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    /// Byte range in the text.
    pub range: Range<usize>,
    /// The font, or `None` for characters no embedded font has.
    pub font: Option<FontId>,
}

/// `text` cut into runs of one font each, in logical order: each character goes to
/// [`font_for`], except that marks, joiners and selectors stay with their base character's font.
pub fn runs(text: &str, bold: bool) -> Vec<Run> {
    let mut out: Vec<Run> = Vec::new();
    for (i, c) in text.char_indices() {
        let prev = out.last().map(|r| r.font);
        let font = match prev {
            Some(Some(f)) if continues_cluster(c) && (f.covers(c) || c.is_other_format()) => {
                Some(f)
            }
            // spaces, ASCII digits and punctuation come from DejaVu whatever the script around
            // them (the emoji and CJK fonts' spaces are an em wide)
            _ if c == ' ' || c.is_ascii_punctuation() || c.is_ascii_digit() => {
                Some(if bold { FontId::SansBold } else { FontId::Sans })
            }
            _ => font_for(c, bold),
        };
        match out.last_mut() {
            Some(r) if r.font == font => r.range.end = i + c.len_utf8(),
            _ => out.push(Run {
                range: i..i + c.len_utf8(),
                font,
            }),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustybuzz::ttf_parser;

    #[test]
    fn every_font_inflates_parses_and_maps_what_its_list_says() {
        for f in FontId::ALL {
            let face = ttf_parser::Face::parse(f.bytes(), 0)
                .unwrap_or_else(|e| panic!("{}: {e}", f.file()));
            let mut mapped = Vec::new();
            for sub in face.tables().cmap.unwrap().subtables {
                if sub.is_unicode() {
                    sub.codepoints(|c| {
                        if c >= 0x20 && sub.glyph_index(c).is_some_and(|g| g.0 != 0) {
                            mapped.push(c)
                        }
                    });
                }
            }
            mapped.sort_unstable();
            mapped.dedup();
            let listed: Vec<u32> = f.coverage().iter().flat_map(|&(a, b)| a..=b).collect();
            assert_eq!(mapped, listed, "{}: cmap list out of date", f.file());
        }
    }

    #[test]
    fn each_script_finds_its_font() {
        let cases = [
            ('a', FontId::Sans),
            ('é', FontId::Sans),
            ('Ж', FontId::Sans),
            ('λ', FontId::Sans),
            ('م', FontId::Arabic),
            ('ש', FontId::Hebrew),
            ('न', FontId::Devanagari),
            ('ส', FontId::Thai),
            ('한', FontId::Hangul),
            ('\u{1161}', FontId::Hangul),
            ('ㅎ', FontId::Hangul),
            ('東', FontId::Cjk),
            ('た', FontId::Cjk),
            ('🚀', FontId::Emoji),
            ('🍣', FontId::Emoji),
        ];
        for (c, want) in cases {
            assert_eq!(font_for(c, false), Some(want), "{c:?}");
        }
        assert_eq!(font_for('a', true), Some(FontId::SansBold));
        assert_eq!(font_for('東', true), Some(FontId::Cjk));
        // a private-use character has no glyph anywhere
        assert_eq!(font_for('\u{E000}', false), None);
    }

    #[test]
    fn marks_and_joiners_stay_with_their_base() {
        // Devanagari: consonant + virama + consonant + vowel sign is one run of one font
        let r = runs("क्षि", false);
        assert_eq!(r.len(), 1, "{r:?}");
        assert_eq!(r[0].font, Some(FontId::Devanagari));
        // an emoji ZWJ sequence stays in the emoji font; the space after it is DejaVu's
        let text = "👩\u{200D}🚀 x";
        let r = runs(text, false);
        assert_eq!(r[0].font, Some(FontId::Emoji));
        assert_eq!(&text[r[0].range.clone()], "👩\u{200D}🚀");
        assert_eq!(r[1].font, Some(FontId::Sans));
        // mixed text: Latin, Hangul, Latin
        let fonts: Vec<_> = runs("ab 한국 cd", false)
            .into_iter()
            .map(|r| r.font)
            .collect();
        assert_eq!(
            fonts,
            [Some(FontId::Sans), Some(FontId::Hangul), Some(FontId::Sans)]
        );
    }
}
