//! Images must render every label on a machine without fonts. The test re-runs itself in a child
//! process whose fontconfig is pointed at an empty configuration (no font folders, no cache), and
//! checks that the child's PNG has text and is byte-for-byte the one this process renders.

use std::process::Command;

use attnviz::render::image::{render_png, FigureSpec, ImageOptions};
use attnviz::{Attention, HeadSel};

const CHILD: &str = "ATTNVIZ_FONTLESS_CHILD_OUT";
const NAME: &str = "images_without_system_fonts::renders_identically_with_an_empty_fontconfig";

fn attention() -> Attention {
    let tokens = ["[CLS]", "fonts", "are", "embedded", "é", "[SEP]"];
    let text = "fonts are embedded é";
    crate::support::attention::random_attention(text, None, &tokens, None, (1, 1, 4), 7)
}

fn render() -> Vec<u8> {
    let fig = FigureSpec::Head {
        layer: 0,
        head: HeadSel::Index(0),
    };
    render_png(&attention(), &fig, &ImageOptions::default()).unwrap()
}

#[test]
fn renders_identically_with_an_empty_fontconfig() {
    if let Some(out) = std::env::var_os(CHILD) {
        std::fs::write(out, render()).unwrap();
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("fonts.conf");
    std::fs::write(
        &conf,
        "<?xml version=\"1.0\"?>\n<!DOCTYPE fontconfig SYSTEM \"fonts.dtd\">\n<fontconfig></fontconfig>\n",
    )
    .unwrap();
    let out = dir.path().join("child.png");
    let fontless = |cmd: &mut Command| {
        cmd.env("FONTCONFIG_FILE", &conf)
            .env("FONTCONFIG_PATH", dir.path())
            .env("XDG_DATA_HOME", dir.path())
            .env("XDG_CONFIG_HOME", dir.path())
            .env("XDG_CACHE_HOME", dir.path())
            .env("HOME", dir.path());
    };

    // Where fontconfig's own tools exist, show that this environment really sees no fonts.
    let mut fc = Command::new("fc-list");
    fontless(&mut fc);
    if let Ok(listing) = fc.output() {
        assert!(
            listing.stdout.is_empty(),
            "fc-list still finds fonts: {}",
            String::from_utf8_lossy(&listing.stdout)
        );
    }

    let mut child = Command::new(std::env::current_exe().unwrap());
    child
        .args([NAME, "--exact", "--test-threads=1"])
        .env(CHILD, &out);
    fontless(&mut child);
    let run = child.output().unwrap();
    assert!(
        run.status.success(),
        "child render failed: {}\n{}",
        run.status,
        String::from_utf8_lossy(&run.stderr)
    );

    let theirs = std::fs::read(&out).unwrap();
    let ours = render();
    assert!(theirs == ours, "the PNG differs without system fonts");
    assert_has_text(&theirs);
}

/// The strip left of the heatmap (axis title and token labels) holds dark text pixels.
fn assert_has_text(png_bytes: &[u8]) {
    let decoder = png::Decoder::new(png_bytes);
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let w = info.width as usize;
    let dark = (0..info.height as usize)
        .flat_map(|y| (0..90).map(move |x| (y * w + x) * 3))
        .filter(|&i| buf[i] < 90 && buf[i + 1] < 90 && buf[i + 2] < 90)
        .count();
    assert!(dark > 200, "only {dark} text pixels: labels did not render");
}
