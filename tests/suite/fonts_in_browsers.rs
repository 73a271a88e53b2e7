//! The fonts embedded in SVG figures and HTML reports, in real browsers: writes an SVG and a report
//! whose tokens cover every script attnviz carries a font for into `tests/artifacts/fonts/`, then
//! runs `tests/browser/fonts.test.mjs` (headless Chromium and Firefox), which checks that every
//! `@font-face` loads (browsers' font sanitizers drop malformed fonts silently) and covers its
//! script's sample character.
//!
//! `#[ignore]`d like the other browser suites; `scripts/test.sh` runs it with `--include-ignored`.

use std::path::PathBuf;

use attnviz::render::fonts::{font_for, FontId};
use attnviz::render::html::{write_html_file, HtmlOptions};
use attnviz::render::image::{write_svg, FigureSpec, ImageOptions};
use attnviz::HeadSel;

use crate::support::attention::random_attention;
use crate::support::cli::{assert_browsers_ready, node_test};

/// One sample per embedded font that a non-ASCII character calls for: the character that must
/// draw from it (the report embeds fonts for non-ASCII characters only).
const SAMPLES: [&str; 8] = ["é", "م", "ש", "न", "ส", "한", "東", "🚀"];

#[test]
#[ignore = "browser suite: scripts/test.sh runs it with --include-ignored"]
fn embedded_fonts_load_in_chromium_and_firefox() {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dir = repo.join("tests/artifacts/fonts");
    std::fs::create_dir_all(&dir).unwrap();
    let tokens = [
        "[CLS]",
        "naïve",
        "Привет",
        "مرحبا",
        "שלום",
        "नमस्ते",
        "สวัสดี",
        "한국",
        "東京",
        "🚀",
        "[SEP]",
    ];
    let text = tokens[1..tokens.len() - 1].join(" ");
    let att = random_attention(&text, None, &tokens, None, (1, 2, 8), 7);
    let fig = FigureSpec::Head {
        layer: 0,
        head: HeadSel::Index(1),
    };
    write_svg(
        &att,
        &fig,
        &ImageOptions::default(),
        &dir.join("scripts.svg"),
    )
    .unwrap();
    write_html_file(&att, &HtmlOptions::default(), &dir.join("scripts.html")).unwrap();
    // family → sample, from the same font choice the renderers make (the SVG also has the bold
    // DejaVu face of its title; the report only non-ASCII characters)
    let mut samples = serde_json::Map::new();
    for s in SAMPLES {
        let c = s.chars().next().unwrap();
        let font: FontId = font_for(c, false).unwrap();
        samples.insert(font.family().to_string(), serde_json::Value::from(s));
    }
    std::fs::write(
        dir.join("samples.json"),
        serde_json::to_string(&samples).unwrap(),
    )
    .unwrap();

    assert_browsers_ready(&[
        ("/usr/bin/chromium", "chromium"),
        ("/usr/bin/firefox-esr", "firefox-esr"),
    ]);
    node_test("fonts.test.mjs", &[("ATTNVIZ_FONT_ARTIFACTS", &dir)]);
}
