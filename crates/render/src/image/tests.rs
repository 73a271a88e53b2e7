//! Tests of what the pictures say: sizes, where the bright cells are, labels, the divider,
//! valid XML, identical bytes for identical input, and layouts where no text collides.

use super::*;
use crate::attention::fixtures::{as_decoder, one_hot, synthetic};

const TWELVE: [&str; 12] = [
    "[CLS]", "the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog", ".", "[SEP]",
];

/// A decoded PNG: width, height, RGB pixels.
struct Image {
    w: usize,
    h: usize,
    rgb: Vec<u8>,
}

impl Image {
    fn decode(bytes: &[u8]) -> Image {
        let decoder = png::Decoder::new(bytes);
        let mut reader = decoder.read_info().expect("PNG header decodes");
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).expect("PNG data decodes");
        assert_eq!(info.color_type, png::ColorType::Rgb);
        assert_eq!(info.bit_depth, png::BitDepth::Eight);
        buf.truncate(info.buffer_size());
        Image {
            w: info.width as usize,
            h: info.height as usize,
            rgb: buf,
        }
    }

    fn at(&self, x: usize, y: usize) -> [u8; 3] {
        let i = (y * self.w + x) * 3;
        [self.rgb[i], self.rgb[i + 1], self.rgb[i + 2]]
    }

    /// Bounding boxes `(x0, y0, x1, y1)` (end-exclusive) of the 4-connected regions whose pixels
    /// are exactly `color`, sorted by (y0, x0).
    fn regions(&self, color: [u8; 3]) -> Vec<(usize, usize, usize, usize)> {
        let mut seen = vec![false; self.w * self.h];
        let mut out = Vec::new();
        for start in 0..self.w * self.h {
            if seen[start] || self.at(start % self.w, start / self.w) != color {
                continue;
            }
            let mut stack = vec![start];
            seen[start] = true;
            let (mut x0, mut y0, mut x1, mut y1) = (usize::MAX, usize::MAX, 0, 0);
            while let Some(p) = stack.pop() {
                let (x, y) = (p % self.w, p / self.w);
                x0 = x0.min(x);
                y0 = y0.min(y);
                x1 = x1.max(x + 1);
                y1 = y1.max(y + 1);
                let mut push = |q: usize| {
                    if !seen[q] && self.at(q % self.w, q / self.w) == color {
                        seen[q] = true;
                        stack.push(q);
                    }
                };
                if x > 0 {
                    push(p - 1);
                }
                if x + 1 < self.w {
                    push(p + 1);
                }
                if y > 0 {
                    push(p - self.w);
                }
                if y + 1 < self.h {
                    push(p + self.w);
                }
            }
            out.push((x0, y0, x1, y1));
        }
        out.sort_by_key(|&(x0, y0, _, _)| (y0, x0));
        out
    }
}

fn rgb(c: theme::Rgb) -> [u8; 3] {
    [c.0, c.1, c.2]
}

/// The colour of the highest value under `options`.
fn top_color(options: &ImageOptions) -> [u8; 3] {
    rgb(Ramp::new(options.colormap, options.theme).at(1.0))
}

/// Square regions of the top colour at least `min` pixels wide: heatmap cells, not the
/// colour bar's top row.
fn bright_cells(
    img: &Image,
    options: &ImageOptions,
    min: usize,
) -> Vec<(usize, usize, usize, usize)> {
    img.regions(top_color(options))
        .into_iter()
        .filter(|&(x0, y0, x1, y1)| x1 - x0 >= min && y1 - y0 >= min)
        .collect()
}

#[test]
fn brightest_cell_is_where_the_weight_sits() {
    // Query q attends only to key perm[q]: the picture must have one bright 32-pixel cell per
    // row, in the column of that key, and the rows and columns in token order.
    let perm = [3usize, 0, 11, 5, 7, 1, 9, 2, 10, 4, 8, 6];
    let att = one_hot(&TWELVE, 2, 3, None, |l, h, q| {
        if (l, h) == (1, 2) {
            perm[q]
        } else {
            q
        }
    });
    for options in [
        ImageOptions::default(),
        ImageOptions {
            colormap: Colormap::Magma,
            theme: Theme::Dark,
            ..ImageOptions::default()
        },
        ImageOptions {
            colormap: Colormap::Greys,
            theme: Theme::Light,
            ..ImageOptions::default()
        },
    ] {
        let fig = FigureSpec::Head {
            layer: 1,
            head: HeadSel::Index(2),
        };
        let img = Image::decode(&render_png(&att, &fig, &options).unwrap());
        let cells = bright_cells(&img, &options, 8);
        assert_eq!(cells.len(), 12, "{options:?}: {cells:?}");
        let (left, top) = (
            cells.iter().map(|c| c.0).min().unwrap(),
            cells.iter().map(|c| c.1).min().unwrap(),
        );
        for (q, &(x0, y0, x1, y1)) in cells.iter().enumerate() {
            assert_eq!(
                (x1 - x0, y1 - y0),
                (32, 32),
                "cells are 32 px for 12 tokens"
            );
            assert_eq!((y0 - top) / 32, q, "row order");
            assert_eq!(
                (x0 - left) / 32,
                perm[q],
                "query {q} must light key {}",
                perm[q]
            );
        }
    }
}

#[test]
fn mean_figure_is_brightest_where_heads_agree() {
    // Three heads; all put query q on key q except head 1, which uses key 0. The mean is 1 on
    // the diagonal for q = 0 and 2/3 elsewhere on it, so exactly one cell has the top colour.
    let att = one_hot(&TWELVE, 1, 3, None, |_, h, q| if h == 1 { 0 } else { q });
    let options = ImageOptions::default();
    for fig in [
        FigureSpec::Mean { layer: 0 },
        FigureSpec::Head {
            layer: 0,
            head: HeadSel::Mean,
        },
    ] {
        let img = Image::decode(&render_png(&att, &fig, &options).unwrap());
        assert_eq!(bright_cells(&img, &options, 8).len(), 1);
    }
}

#[test]
fn matrix_figure_draws_the_given_values() {
    let att = synthetic(&TWELVE, 1, 1);
    let n = 12;
    let mut values = vec![0f32; n * n];
    values[5 * n + 9] = 0.8;
    values[2 * n + 2] = 0.3;
    let fig = FigureSpec::rollout(0, &values);
    let options = ImageOptions::default();
    let img = Image::decode(&render_png(&att, &fig, &options).unwrap());
    let cells = bright_cells(&img, &options, 8);
    assert_eq!(cells.len(), 1);
    // the 0.3 cell is 3 rows up and 7 columns left of the top cell
    let (x0, y0, _, _) = cells[0];
    let mid = rgb(Ramp::new(Colormap::Viridis, Theme::Light).at(0.3 / 0.8));
    assert_eq!(img.at(x0 - 7 * 32 + 16, y0 - 3 * 32 + 16), mid);
    let svg = render_svg(&att, &fig, &options).unwrap();
    assert!(svg.contains("attention rollout through layer 0"));
}

#[test]
fn png_and_svg_have_the_reported_size() {
    let short = synthetic(&TWELVE, 2, 3);
    let toks: Vec<String> = (0..200).map(|i| format!("t{i}")).collect();
    let toks: Vec<&str> = toks.iter().map(|s| s.as_str()).collect();
    let long = synthetic(&toks, 2, 2);
    let values = vec![0.5f32; 12 * 12];
    let options = ImageOptions::default();
    for (att, fig) in [
        (
            &short,
            FigureSpec::Head {
                layer: 1,
                head: HeadSel::Index(2),
            },
        ),
        (&short, FigureSpec::Layer { layer: 0 }),
        (&short, FigureSpec::Mean { layer: 1 }),
        (&short, FigureSpec::Model),
        (&short, FigureSpec::rollout(1, &values)),
        (
            &long,
            FigureSpec::Head {
                layer: 0,
                head: HeadSel::Index(0),
            },
        ),
        (&long, FigureSpec::Model),
    ] {
        let (w, h) = figure_size(att, &fig, &options).unwrap();
        let img = Image::decode(&render_png(att, &fig, &options).unwrap());
        assert_eq!((img.w, img.h), (w as usize, h as usize), "{fig:?}");
        let svg = render_svg(att, &fig, &options).unwrap();
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let root = doc.root_element();
        assert_eq!(root.attribute("width"), Some(w.to_string().as_str()));
        assert_eq!(root.attribute("height"), Some(h.to_string().as_str()));
    }
    // A 12-token head: 384-pixel heatmap plus labels and colour bar, well under a megapixel.
    let (w, h) = figure_size(
        &short,
        &FigureSpec::Head {
            layer: 0,
            head: HeadSel::Index(0),
        },
        &options,
    )
    .unwrap();
    assert!(
        (384..900).contains(&w) && (384..900).contains(&h),
        "{w}x{h}"
    );
}

/// Every `<text>` of an SVG, trimmed.
fn svg_texts(svg: &str) -> Vec<String> {
    let doc = roxmltree::Document::parse(svg).expect("SVG is well-formed XML");
    doc.descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| n.text().unwrap_or("").trim().to_string())
        .collect()
}

#[test]
fn svg_is_valid_xml_with_every_token_as_text() {
    let tokens = [
        "[CLS]", "<", "&", "\"", "'", "]]>", "</svg>", "a&amp;b", "<script>", "naïve", "東",
        "[SEP]",
    ];
    let mut att = synthetic(&tokens, 2, 2);
    att.text = "x < y & \"z\" \u{1} </title>".into();
    att.model.id = "org/<model>&\"".into();
    let options = ImageOptions::default();
    let values = vec![0.1f32; 144];
    for fig in [
        FigureSpec::Head {
            layer: 0,
            head: HeadSel::Index(1),
        },
        FigureSpec::Layer { layer: 1 },
        FigureSpec::Mean { layer: 0 },
        FigureSpec::Model,
        FigureSpec::rollout(1, &values),
    ] {
        let svg = render_svg(&att, &fig, &options).unwrap();
        let texts = svg_texts(&svg);
        if !matches!(fig, FigureSpec::Model) {
            for t in tokens {
                // once on each axis (the layer grid labels its left column and bottom row)
                let count = texts.iter().filter(|s| *s == t).count();
                assert!(
                    count >= 2,
                    "{fig:?}: token {t:?} appears {count} times in {texts:?}"
                );
            }
        }
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let title = doc
            .descendants()
            .find(|n| n.has_tag_name("title"))
            .and_then(|n| n.text())
            .unwrap();
        assert!(title.starts_with("org/<model>&\""), "{title}");
        // The control character is named, as in the tokens, and the rest is quoted as typed.
        assert!(
            texts
                .iter()
                .any(|t| t.contains("x < y & \"z\" ⟨U+0001⟩ </title>")),
            "{texts:?}"
        );
    }
}

#[test]
fn svg_of_a_long_input_embeds_its_cells_as_an_image() {
    let toks: Vec<String> = (0..300).map(|i| format!("w{i}")).collect();
    let toks: Vec<&str> = toks.iter().map(|s| s.as_str()).collect();
    let att = synthetic(&toks, 1, 1);
    let fig = FigureSpec::Head {
        layer: 0,
        head: HeadSel::Index(0),
    };
    let svg = render_svg(&att, &fig, &ImageOptions::default()).unwrap();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let images: Vec<_> = doc
        .descendants()
        .filter(|n| n.has_tag_name("image"))
        .collect();
    assert!(!images.is_empty());
    let href = images[0].attribute("href").unwrap();
    assert!(
        href.starts_with("data:image/png;base64,"),
        "{}",
        &href[..40]
    );
    assert!(svg.len() < 2_000_000, "{} bytes", svg.len());
    // labels are still text: every 2nd token of 300 at 6-pixel cells (3 cells per 16-pixel pitch)
    let texts = svg_texts(&svg);
    assert!(texts.iter().any(|t| t == "150 w150"), "{:?}", &texts[..10]);
}

#[test]
fn pair_shows_its_divider() {
    // Identity attention, with and without a pair boundary before token 5.
    let single = one_hot(&TWELVE, 1, 1, None, |_, _, q| q);
    let pair = one_hot(&TWELVE, 1, 1, Some(5), |_, _, q| q);
    let options = ImageOptions::default();
    let fig = FigureSpec::Head {
        layer: 0,
        head: HeadSel::Index(0),
    };
    let white = rgb(Palette::of(Theme::Light).divider);
    for (att, want) in [(&single, false), (&pair, true)] {
        let img = Image::decode(&render_png(att, &fig, &options).unwrap());
        let cells = bright_cells(&img, &options, 8);
        assert_eq!(cells.len(), 12);
        // The boundary is the left edge of key 5's cell (x) and the top edge of query 5's (y);
        // cell 0 is clear of the divider, so it fixes the grid.
        let (left, top) = (cells[0].0, cells[0].1);
        let (bx, by) = (left + 5 * 32, top + 5 * 32);
        let (right, bottom) = (left + 12 * 32, top + 12 * 32);
        let vertical = (top..bottom).all(|y| (bx - 1..=bx).any(|x| img.at(x, y) == white));
        let horizontal = (left..right).all(|x| (by - 1..=by).any(|y| img.at(x, y) == white));
        assert_eq!((vertical, horizontal), (want, want), "pair: {want}");
    }
    // SVG: the divider's white strokes, and the segment captions.
    let svg = render_svg(&pair, &fig, &options).unwrap();
    assert!(svg.contains("fill=\"#FFFFFF\""));
    let texts = svg_texts(&svg);
    assert!(texts.iter().any(|t| t == "sentence A") && texts.iter().any(|t| t == "sentence B"));
    let plain = render_svg(&single, &fig, &options).unwrap();
    assert!(!svg_texts(&plain).iter().any(|t| t.starts_with("sentence")));
}

#[test]
fn same_input_gives_the_same_bytes() {
    let att = synthetic(&TWELVE, 2, 3);
    let options = ImageOptions {
        colormap: Colormap::Plasma,
        theme: Theme::Dark,
        ..ImageOptions::default()
    };
    for fig in [
        FigureSpec::Head {
            layer: 0,
            head: HeadSel::Index(1),
        },
        FigureSpec::Layer { layer: 1 },
        FigureSpec::Model,
    ] {
        let a = render_png(&att, &fig, &options).unwrap();
        let b = render_png(&att, &fig, &options).unwrap();
        assert!(a == b, "{fig:?}: PNG differs between runs");
        assert_eq!(
            render_svg(&att, &fig, &options).unwrap(),
            render_svg(&att, &fig, &options).unwrap()
        );
    }
}

#[test]
fn labels_are_drawn_in_the_png() {
    // The label column left of the heatmap holds text-coloured pixels in the light theme and
    // light pixels in the dark theme; rendering with the embedded font needs no system fonts.
    let att = synthetic(&TWELVE, 1, 1);
    let fig = FigureSpec::Head {
        layer: 0,
        head: HeadSel::Index(0),
    };
    for theme in [Theme::Light, Theme::Dark] {
        let options = ImageOptions {
            colormap: Colormap::Viridis,
            theme,
            ..ImageOptions::default()
        };
        let img = Image::decode(&render_png(&att, &fig, &options).unwrap());
        let pal = Palette::of(theme);
        assert_eq!(img.at(0, 0), rgb(pal.background));
        let ink = (0..img.h)
            .flat_map(|y| (0..img.w / 4).map(move |x| (x, y)))
            .filter(|&(x, y)| img.at(x, y) == rgb(pal.text))
            .count();
        assert!(ink > 300, "{theme:?}: only {ink} text pixels");
    }
}

/// Check a scene's text: inside the canvas, clear of cells, frames and lines, and no two labels
/// overlapping.
fn assert_text_fits(scene: &Scene, what: &str) {
    let canvas = scene::Rect::new(0, 0, scene.width as i32, scene.height as i32);
    let boxes: Vec<_> = scene.texts().map(|t| (t, t.bounds())).collect();
    for item in &scene.items {
        let shape = match item {
            scene::Item::Cells(c) => {
                scene::Rect::new(c.x, c.y, c.x + c.width() as i32, c.y + c.height() as i32)
            }
            scene::Item::Fill(r, _) => *r,
            scene::Item::Text(_) => continue,
        };
        assert!(
            canvas.contains(&shape),
            "{what}: {shape:?} leaves the canvas"
        );
        for (t, b) in &boxes {
            assert!(
                !b.overlaps(&shape),
                "{what}: {:?} at {b:?} overlaps a shape at {shape:?}",
                t.text
            );
        }
    }
    for (t, b) in &boxes {
        assert!(
            canvas.contains(b),
            "{what}: {:?} at {b:?} leaves the {}x{} canvas",
            t.text,
            scene.width,
            scene.height
        );
    }
    for (i, (t, b)) in boxes.iter().enumerate() {
        for (u, c) in &boxes[i + 1..] {
            assert!(
                !b.overlaps(c),
                "{what}: {:?} {b:?} overlaps {:?} {c:?}",
                t.text,
                u.text
            );
        }
    }
}

fn tokens(n: usize, long_every: usize) -> Vec<String> {
    (0..n)
        .map(|i| match i {
            0 => "[CLS]".to_string(),
            i if i == n - 1 => "[SEP]".to_string(),
            i if long_every > 0 && i % long_every == 0 => "internationalisation".repeat(2),
            i => format!("##w{i}"),
        })
        .collect()
}

/// The largest side of any figure, as `docs/images.md` states it.
const MAX_PIXELS: u32 = 2450;

#[test]
fn layouts_keep_text_apart_and_inside_at_every_size() {
    let options = ImageOptions::default();
    for &(n, layers, heads, pair) in &[
        (1usize, 1usize, 1usize, false),
        (2, 1, 2, true),
        (12, 6, 12, false),
        (24, 2, 12, true),
        (33, 1, 5, false),
        (128, 2, 12, true),
        (129, 1, 1, false),
        (512, 1, 12, true),
        (700, 1, 1, false),
        (12, 24, 16, false),
        (2048, 1, 1, false),
        (3000, 1, 2, true),
    ] {
        let toks = tokens(n, 7);
        let toks: Vec<&str> = toks.iter().map(|s| s.as_str()).collect();
        let mut att = if pair {
            let mut att =
                crate::attention::fixtures::synthetic_pair(&toks, (n / 2).max(1), layers, heads);
            att.pair = Some("second sentence".into());
            att
        } else {
            synthetic(&toks, layers, heads)
        };
        att.text = "a long sentence ".repeat(40);
        // every other case as --words --no-special would make it: its note must show in full
        let noted = n % 2 == 0;
        if noted {
            att.level = crate::attention::Level::Word;
            att.special_excluded = true;
        }
        let values = att.head_mean(0);
        for fig in [
            FigureSpec::Head {
                layer: 0,
                head: HeadSel::Index(heads - 1),
            },
            FigureSpec::Layer { layer: 0 },
            FigureSpec::Model,
            FigureSpec::rollout(0, &values),
        ] {
            let scene = build(&att, &fig, &options).unwrap();
            let what = format!("{n} tokens, {layers}x{heads}, pair {pair}, {fig:?}");
            assert_text_fits(&scene, &what);
            if noted {
                let all: Vec<&str> = scene.texts().map(|t| t.text.as_str()).collect();
                let all = all.join(" ");
                assert!(
                    // (the automatic colour scale may add why it chose a square root)
                    all.contains(
                        "(words: word pieces merged; special tokens removed, rows renormalised"
                    ),
                    "{what}: note missing or cut in {all:?}"
                );
            }
            assert!(
                scene.width <= MAX_PIXELS && scene.height <= MAX_PIXELS,
                "{what}: {}x{}",
                scene.width,
                scene.height
            );
        }
    }
}

#[test]
fn bad_requests_are_errors_not_panics() {
    let att = synthetic(&TWELVE, 2, 3);
    let options = ImageOptions::default();
    let err = render_png(&att, &FigureSpec::Layer { layer: 2 }, &options).unwrap_err();
    assert!(
        err.to_string().contains("layer 2 does not exist") && err.to_string().contains("0–1"),
        "{err}"
    );
    let err = render_svg(
        &att,
        &FigureSpec::Head {
            layer: 0,
            head: HeadSel::Index(3),
        },
        &options,
    )
    .unwrap_err();
    assert!(err.to_string().contains("head 3 does not exist"), "{err}");
    let short = vec![0.0; 10];
    let err = render_png(&att, &FigureSpec::rollout(0, &short), &options).unwrap_err();
    assert!(err.to_string().contains("144"), "{err}");
    let err = FigureSpec::of(Figure::Rollout, 0, HeadSel::Mean, None).unwrap_err();
    assert!(matches!(err, ImageError::NoRollout));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("missing").join("x.png");
    let err = write_png(&att, &FigureSpec::Model, &options, &path).unwrap_err();
    assert!(err.to_string().contains("missing"), "{err}");
}

#[test]
fn write_functions_write_what_render_returns() {
    let att = synthetic(&TWELVE, 1, 2);
    let options = ImageOptions::default();
    let fig = FigureSpec::of(Figure::Head, 0, HeadSel::Index(1), None).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let png_path = dir.path().join("head.png");
    let svg_path = dir.path().join("head.svg");
    write_png(&att, &fig, &options, &png_path).unwrap();
    write_svg(&att, &fig, &options, &svg_path).unwrap();
    assert_eq!(
        std::fs::read(&png_path).unwrap(),
        render_png(&att, &fig, &options).unwrap()
    );
    assert_eq!(
        std::fs::read_to_string(&svg_path).unwrap(),
        render_svg(&att, &fig, &options).unwrap()
    );
}

#[test]
fn model_names_are_short() {
    assert_eq!(model_name("bert-base-uncased"), "bert-base-uncased");
    assert_eq!(
        model_name("sentence-transformers/all-MiniLM-L6-v2"),
        "sentence-transformers/all-MiniLM-L6-v2"
    );
    assert_eq!(
        model_name("/home/me/models/all-MiniLM-L6-v2"),
        "all-MiniLM-L6-v2"
    );
    assert_eq!(model_name("./minilm/"), "minilm");
}

#[test]
fn a_report_holds_every_kind_of_figure() {
    let att = synthetic(&TWELVE, 2, 3);
    let rollout = att.head_mean(1);
    let all = FigureSpec::all(1, HeadSel::Index(2), Some(&rollout));
    let stems: Vec<&str> = all.iter().map(|(s, _)| *s).collect();
    assert_eq!(stems, ["head", "layer", "mean", "model", "rollout"]);
    for (stem, fig) in &all {
        let cli = match *stem {
            "head" => Figure::Head,
            "layer" => Figure::Layer,
            "mean" => Figure::Mean,
            "model" => Figure::Model,
            _ => Figure::Rollout,
        };
        assert_eq!(
            FigureSpec::of(cli, 1, HeadSel::Index(2), Some(&rollout)).unwrap(),
            *fig
        );
        render_png(&att, fig, &ImageOptions::default()).unwrap();
    }
    assert_eq!(FigureSpec::all(0, HeadSel::Mean, None).len(), 4);
}

#[test]
fn non_finite_weights_still_draw() {
    // A broken upstream value must not panic or poison the scale: NaN draws as the lowest
    // colour, infinities are left out of the scale and clamped.
    let mut values: Vec<f32> = synthetic(&TWELVE, 1, 1).head(0, 0).to_vec();
    values[3] = f32::NAN;
    values[7] = f32::INFINITY;
    values[9] = f32::NEG_INFINITY;
    let att = synthetic(&TWELVE, 1, 1);
    let fig = FigureSpec::Matrix {
        title: "broken".into(),
        values: &values,
        shares: false,
    };
    let options = ImageOptions::default();
    let img = Image::decode(&render_png(&att, &fig, &options).unwrap());
    // the finite maximum (0.7, the diagonal) still gets the top colour, and +inf clamps to it:
    // 12 + 1 cells
    assert_eq!(bright_cells(&img, &options, 8).len(), 13);
    roxmltree::Document::parse(&render_svg(&att, &fig, &options).unwrap()).unwrap();
}

#[test]
fn contribution_matrices_say_they_hold_shares_not_attention() {
    let att = synthetic(&TWELVE, 1, 1);
    let values = att.head(0, 0).to_vec();
    let options = ImageOptions::default();
    for (fig, shares) in [
        (FigureSpec::alti(0, &values), true),
        (FigureSpec::value_zeroing(0, &values), true),
        (FigureSpec::rollout(0, &values), false),
    ] {
        let svg = render_svg(&att, &fig, &options).unwrap();
        for words in [
            "Input token (its share)",
            "Token (after the layer)",
            "share of the row",
        ] {
            assert_eq!(svg.contains(words), shares, "{words}");
        }
        assert_eq!(svg.contains("attended to"), !shares);
    }
}

/// Value-weighted and norm-aware attention ([`crate::analysis::reweighted`]) holds each row's
/// shares of what reaches the query: every figure's colour bar says so.
#[test]
fn reweighted_attention_is_captioned_as_shares_of_the_row() {
    let mut att = synthetic(&TWELVE, 2, 4);
    let options = ImageOptions::default();
    let figures = [
        FigureSpec::Head {
            layer: 0,
            head: HeadSel::Index(1),
        },
        FigureSpec::Mean { layer: 1 },
        FigureSpec::Layer { layer: 0 },
        FigureSpec::Model,
    ];
    for shares in [false, true] {
        att.holds = if shares {
            crate::attention::Holds::NormAware
        } else {
            crate::attention::Holds::Raw
        };
        for fig in &figures {
            let svg = render_svg(&att, fig, &options).unwrap();
            assert_eq!(svg.contains("share of the row"), shares, "{fig:?}");
            assert_eq!(svg.contains("attention weight"), !shares, "{fig:?}");
        }
    }
}

#[test]
fn small_figures_show_the_whole_sentence_and_notes() {
    // The defect: a 2-token figure is 560 px wide, and the subtitle and its "(words; …)" note were
    // cut with "…". Now they wrap: every word of the sentence and of the note is on the canvas,
    // and no line is wider than the canvas.
    let sentence = "Attention is all you need, said the paper, and then everyone \
                    drew heatmaps of it for years";
    for n in [1usize, 2, 5] {
        let toks = tokens(n.max(2), 0);
        let toks: Vec<&str> = toks.iter().map(|s| s.as_str()).collect();
        let mut att = synthetic(&toks[..n], 2, 2);
        att.text = sentence.into();
        att.level = crate::attention::Level::Word;
        att.special_excluded = true;
        let values = att.head_mean(0);
        for fig in [
            FigureSpec::Head {
                layer: 0,
                head: HeadSel::Index(1),
            },
            FigureSpec::Layer { layer: 1 },
            FigureSpec::Model,
            FigureSpec::rollout(0, &values),
        ] {
            let scene = build(&att, &fig, &ImageOptions::default()).unwrap();
            let what = format!("{n} tokens, {fig:?}");
            assert_text_fits(&scene, &what);
            let texts: Vec<&str> = scene.texts().map(|t| t.text.as_str()).collect();
            assert!(
                !texts.iter().any(|t| t.contains('…')),
                "{what}: something was cut: {texts:?}"
            );
            // (the automatic colour scale may add why it chose a square root, after a `;`)
            let bare = |w: &str| w.trim_end_matches([';', ')']).to_string();
            let words: Vec<String> = texts.iter().flat_map(|t| t.split(' ')).map(bare).collect();
            let quote = format!("“{sentence}”");
            let notes = "(words: word pieces merged; special tokens removed, rows renormalised)";
            for w in quote.split(' ').chain(notes.split(' ')).map(bare) {
                assert!(words.contains(&w), "{what}: {w:?} missing from {texts:?}");
            }
        }
    }
}

#[test]
fn png_label_ink_is_centred_on_its_cell() {
    // The defect: PNG labels sat 4-5 px above the centre of their cells (the SVGs were right).
    // Tokens without ascenders or descenders ink exactly the x-height band, whose middle must be
    // the middle of the cell: rows on the left (horizontal text), columns below (rotated text).
    let toks = ["xo", "nu", "ma", "ox", "ran", "sox", "ewe", "zoo"];
    let att = synthetic(&toks, 1, 1);
    let options = ImageOptions::default();
    let fig = FigureSpec::Head {
        layer: 0,
        head: HeadSel::Index(0),
    };
    let scene = build(&att, &fig, &options).unwrap();
    let img = Image::decode(&render_png(&att, &fig, &options).unwrap());
    let cells = scene
        .items
        .iter()
        .find_map(|i| match i {
            scene::Item::Cells(c) if c.rows == toks.len() => Some(c.clone()),
            _ => None,
        })
        .unwrap();
    let bg = rgb(Palette::of(Theme::Light).background);
    // darkness of a pixel against the background, 0..=1
    let ink = |x: usize, y: usize| {
        let p = img.at(x, y);
        (0..3)
            .map(|i| (bg[i] as f64 - p[i] as f64).abs())
            .sum::<f64>()
            / (3.0 * 255.0)
    };
    let cell = cells.cell_h as usize;
    let (x0, y0) = (cells.x as usize, cells.y as usize);
    let side = cell * toks.len();
    for (i, tok) in toks.iter().enumerate() {
        // row label: left of the heatmap, within the row's band
        let (mut sum, mut w) = (0.0, 0.0);
        for y in y0 + i * cell..y0 + (i + 1) * cell {
            for x in x0 - 36..x0 - 2 {
                sum += (y as f64 + 0.5) * ink(x, y);
                w += ink(x, y);
            }
        }
        let centre = (y0 + i * cell) as f64 + cell as f64 / 2.0;
        assert!(w > 5.0, "row {i}: no ink");
        assert!(
            (sum / w - centre).abs() <= 1.0,
            "row {i} ({tok}): ink centre {:.2}, cell centre {centre}",
            sum / w
        );
        // column label: below the heatmap, within the column's band
        let (mut sum, mut w) = (0.0, 0.0);
        for x in x0 + i * cell..x0 + (i + 1) * cell {
            for y in y0 + side + 2..y0 + side + 60 {
                sum += (x as f64 + 0.5) * ink(x, y);
                w += ink(x, y);
            }
        }
        let centre = (x0 + i * cell) as f64 + cell as f64 / 2.0;
        assert!(w > 5.0, "column {i}: no ink");
        assert!(
            (sum / w - centre).abs() <= 1.0,
            "column {i} ({tok}): ink centre {:.2}, cell centre {centre}",
            sum / w
        );
    }
}

#[test]
fn scale_factor_doubles_pixels_with_the_same_layout() {
    let att = one_hot(&TWELVE, 1, 1, None, |_, _, q| (q + 1) % 12);
    let fig = FigureSpec::Head {
        layer: 0,
        head: HeadSel::Index(0),
    };
    let one = ImageOptions::default();
    let two = ImageOptions {
        scale_factor: 2.0,
        ..one
    };
    let a = Image::decode(&render_png(&att, &fig, &one).unwrap());
    let b = Image::decode(&render_png(&att, &fig, &two).unwrap());
    assert_eq!((b.w, b.h), (2 * a.w, 2 * a.h));
    // the same cells, twice the size, in the same place
    let ca = bright_cells(&a, &one, 8);
    let cb = bright_cells(&b, &two, 16);
    assert_eq!(ca.len(), 12);
    assert_eq!(
        cb,
        ca.iter()
            .map(|&(x0, y0, x1, y1)| (2 * x0, 2 * y0, 2 * x1, 2 * y1))
            .collect::<Vec<_>>()
    );
    // pHYs states 96 and 192 pixels per inch
    let density = |bytes: &[u8]| {
        let reader = png::Decoder::new(bytes).read_info().unwrap();
        let d = reader.info().pixel_dims.unwrap();
        assert_eq!(d.unit, png::Unit::Meter);
        (d.xppu as f64 * 0.0254).round() as u32
    };
    assert_eq!(density(&render_png(&att, &fig, &one).unwrap()), 96);
    assert_eq!(density(&render_png(&att, &fig, &two).unwrap()), 192);
    // out of range, or too many pixels: a clear error, no huge allocation
    for f in [0.1, 4.5, f32::NAN] {
        let err = render_png(
            &att,
            &fig,
            &ImageOptions {
                scale_factor: f,
                ..one
            },
        )
        .unwrap_err();
        assert!(err.to_string().contains("out of range"), "{err}");
    }
    let toks: Vec<String> = (0..2048).map(|i| format!("t{i}")).collect();
    let toks: Vec<&str> = toks.iter().map(|s| s.as_str()).collect();
    let big = synthetic(&toks, 1, 1);
    let err = render_png(
        &big,
        &fig,
        &ImageOptions {
            scale_factor: 4.0,
            ..one
        },
    )
    .unwrap_err();
    assert!(err.to_string().contains("million pixels"), "{err}");
}

#[test]
fn log_and_sqrt_scales_colour_weak_links() {
    // One strong link per row (0.9) and the rest spread evenly: on a linear scale the weak cells
    // are the lowest colour; on sqrt and log scales they are visibly lifted, and the colour bar
    // says which scale it is.
    let n = 12;
    let mut values = vec![0.1f32 / (n - 1) as f32; n * n];
    for q in 0..n {
        values[q * n + q] = 0.9;
    }
    let att = synthetic(&TWELVE, 1, 1);
    let fig = FigureSpec::rollout(0, &values);
    let weak = |scale: ColorScale| {
        let options = ImageOptions {
            scale,
            ..ImageOptions::default()
        };
        let scene = build(&att, &fig, &options).unwrap();
        let cells = scene
            .items
            .iter()
            .find_map(|i| match i {
                scene::Item::Cells(c) if c.rows == n => Some(c.clone()),
                _ => None,
            })
            .unwrap();
        let captions: Vec<String> = scene.texts().map(|t| t.text.clone()).collect();
        (cells.colors[1], captions)
    };
    let ramp = Ramp::new(Colormap::Viridis, Theme::Light);
    let (linear, _) = weak(ColorScale::Linear);
    let (sqrt, sqrt_texts) = weak(ColorScale::Sqrt);
    let (log, log_texts) = weak(ColorScale::Log);
    let v = 0.1 / 11.0 / 0.9f32;
    assert_eq!(linear, ramp.at(v));
    assert_eq!(sqrt, ramp.at(v.sqrt()));
    assert_eq!(log, ramp.at(1.0 + v.log10() / LOG_DECADES as f32));
    assert!(sqrt_texts
        .iter()
        .any(|t| t == "attention weight (square-root scale)"));
    assert!(log_texts
        .iter()
        .any(|t| t == "attention weight (log scale)"));
    assert!(log_texts.iter().any(|t| t == "0.001"), "{log_texts:?}");
}

/// The distinct colours inside the cell centred at `(x, y)`, `half` pixels each way.
fn cell_colours(img: &Image, (x, y): (usize, usize), half: usize) -> Vec<[u8; 3]> {
    let mut out: Vec<[u8; 3]> = Vec::new();
    for yy in y - half..=y + half {
        for xx in x - half..=x + half {
            let c = img.at(xx, yy);
            if !out.contains(&c) {
                out.push(c);
            }
        }
    }
    out.sort_unstable();
    out
}

#[test]
fn masked_cells_are_hatched_unlike_any_weight() {
    // A causal head attending to itself: the cells above the diagonal are masked (hatched: the
    // background crossed by grey lines), those below hold a weight of 0 (the colour map's
    // lowest colour, one flat colour). With greys on white, that lowest colour is the
    // background itself: the hatch still tells them apart.
    let att =
        one_hot(&TWELVE, 1, 1, None, |_, _, q| q).with_mask(crate::attention::MaskKind::Causal);
    for colormap in [Colormap::Viridis, Colormap::Greys] {
        for theme in [Theme::Light, Theme::Dark] {
            let options = ImageOptions {
                colormap,
                theme,
                ..ImageOptions::default()
            };
            let fig = FigureSpec::Head {
                layer: 0,
                head: HeadSel::Index(0),
            };
            let img = Image::decode(&render_png(&att, &fig, &options).unwrap());
            let diagonal = bright_cells(&img, &options, 20);
            assert_eq!(diagonal.len(), 12, "{diagonal:?}");
            let centre =
                |(x0, y0, x1, y1): (usize, usize, usize, usize)| ((x0 + x1) / 2, (y0 + y1) / 2);
            let pal = Palette::of(theme);
            let mut hatch = vec![rgb(pal.background), rgb(pal.hatch)];
            hatch.sort_unstable();
            let lowest = rgb(Ramp::new(colormap, theme).at(0.0));
            for q in 0..12 {
                for k in 0..12 {
                    let at = (centre(diagonal[k]).0, centre(diagonal[q]).1);
                    let want = match k.cmp(&q) {
                        std::cmp::Ordering::Greater => hatch.clone(),
                        std::cmp::Ordering::Less => vec![lowest],
                        std::cmp::Ordering::Equal => vec![top_color(&options)],
                    };
                    assert_eq!(
                        cell_colours(&img, at, 10),
                        want,
                        "{colormap:?} {theme:?} cell ({q}, {k})"
                    );
                }
            }
            // The key beside the colour bar says what the hatch means.
            let scene = build(&att, &fig, &options).unwrap();
            assert!(scene.texts().any(|t| t.text == "masked"));
            let all: Vec<&str> = scene.texts().map(|t| t.text.as_str()).collect();
            assert!(
                all.join(" ")
                    .contains("causal mask: hatched cells are keys after the query"),
                "{all:?}"
            );
        }
    }
    // Without the mask the same weights draw every off-diagonal cell in the lowest colour, and
    // there is no key.
    let options = ImageOptions::default();
    let open = one_hot(&TWELVE, 1, 1, None, |_, _, q| q);
    let fig = FigureSpec::Head {
        layer: 0,
        head: HeadSel::Index(0),
    };
    let img = Image::decode(&render_png(&open, &fig, &options).unwrap());
    let diagonal = bright_cells(&img, &options, 20);
    let at = (
        (diagonal[11].0 + diagonal[11].2) / 2,
        (diagonal[0].1 + diagonal[0].3) / 2,
    );
    let lowest = rgb(Ramp::new(options.colormap, options.theme).at(0.0));
    assert_eq!(cell_colours(&img, at, 10), vec![lowest]);
    assert!(!build(&open, &fig, &options)
        .unwrap()
        .texts()
        .any(|t| t.text == "masked"));
}

#[test]
fn svg_fills_masked_cells_with_the_hatch_pattern() {
    let causal =
        one_hot(&TWELVE, 1, 1, None, |_, _, q| q).with_mask(crate::attention::MaskKind::Causal);
    let fig = FigureSpec::Head {
        layer: 0,
        head: HeadSel::Index(0),
    };
    let svg = render_svg(&causal, &fig, &ImageOptions::default()).unwrap();
    let doc = roxmltree::Document::parse(&svg).expect("valid XML");
    assert_eq!(
        doc.descendants()
            .filter(|n| n.has_tag_name("pattern"))
            .count(),
        1
    );
    // 66 masked cells above the diagonal, and the key's square.
    let hatched = doc
        .descendants()
        .filter(|n| n.attribute("fill") == Some("url(#attnviz-masked)"))
        .count();
    assert_eq!(hatched, 66 + 1);
    let sentinel = paint::HATCH_SENTINEL;
    assert!(!svg.contains(&format!(
        "#{:02X}{:02X}{:02X}",
        sentinel.0, sentinel.1, sentinel.2
    )));
    let open = one_hot(&TWELVE, 1, 1, None, |_, _, q| q);
    let svg = render_svg(&open, &fig, &ImageOptions::default()).unwrap();
    assert!(!svg.contains("<pattern") && !svg.contains("attnviz-masked"));
}

#[test]
fn the_hatch_sentinel_is_no_colour_a_figure_uses() {
    use crate::choice::Choice;
    let sentinel = paint::HATCH_SENTINEL;
    for &map in Colormap::ALL {
        for theme in [Theme::Light, Theme::Dark] {
            let ramp = Ramp::new(map, theme);
            for i in 0..=255 {
                assert_ne!(ramp.at(i as f32 / 255.0), sentinel, "{map:?} {theme:?} {i}");
            }
            let p = Palette::of(theme);
            for c in [
                p.background,
                p.text,
                p.muted,
                p.frame,
                p.divider_halo,
                p.divider,
                p.hatch,
                p.generated,
            ] {
                assert_ne!(c, sentinel);
            }
        }
    }
}

#[test]
fn decoder_figures_name_kv_heads_and_mark_generated_tokens() {
    let toks = ["ĠThe", "Ġcat", "Ġsat", "Ġon", "Ġthe", "Ġmat", "."];
    let att = as_decoder(synthetic(&toks, 2, 6), 3, 5);
    let options = ImageOptions::default();
    let pal = Palette::of(options.theme);
    let head = build(
        &att,
        &FigureSpec::Head {
            layer: 1,
            head: HeadSel::Index(4),
        },
        &options,
    )
    .unwrap();
    assert!(
        head.title.ends_with("layer 1 · head 4 (kv head 1)"),
        "{}",
        head.title
    );
    // Generated tokens' labels (rows and columns) in the generated colour, the others not.
    for t in head.texts() {
        match t.text.as_str() {
            "Ġmat" | "." => assert_eq!(t.color, pal.generated, "{}", t.text),
            "Ġsat" | "ĠThe" => assert_ne!(t.color, pal.generated, "{}", t.text),
            _ => {}
        }
    }
    let texts: Vec<&str> = head.texts().map(|t| t.text.as_str()).collect();
    assert!(
        texts.contains(&"prompt") && texts.contains(&"generated"),
        "{texts:?}"
    );
    assert!(
        texts
            .join(" ")
            .contains("tokens 5–6, in orange after the dashed line, generated by the model"),
        "{texts:?}"
    );
    let mean = build(&att, &FigureSpec::Mean { layer: 0 }, &options).unwrap();
    assert!(
        mean.title.ends_with("mean of 6 heads (2 kv heads)"),
        "{}",
        mean.title
    );
    let layer = build(&att, &FigureSpec::Layer { layer: 0 }, &options).unwrap();
    let texts: Vec<&str> = layer.texts().map(|t| t.text.as_str()).collect();
    assert!(texts.contains(&"head 4 · kv head 1"), "{texts:?}");
    let model = build(&att, &FigureSpec::Model, &options).unwrap();
    let texts: Vec<&str> = model.texts().map(|t| t.text.as_str()).collect();
    assert!(
        texts.contains(&"kv head 0") && texts.contains(&"kv head 1"),
        "{texts:?}"
    );
    // The dashed divider: on the generated boundary, broken into dashes (more boxes than the
    // A/B divider's four).
    let single = build(&synthetic(&toks, 1, 1), &FigureSpec::Model, &options).unwrap();
    let marked = build(
        &as_decoder(synthetic(&toks, 1, 1), 1, 5),
        &FigureSpec::Model,
        &options,
    )
    .unwrap();
    let fills = |s: &Scene| {
        s.items
            .iter()
            .filter(|i| matches!(i, scene::Item::Fill(_, c) if *c == pal.divider))
            .count()
    };
    assert_eq!(fills(&single), 0);
    assert!(fills(&marked) > 8, "{}", fills(&marked));
}

#[test]
fn decoder_layouts_keep_text_apart_and_inside() {
    let options = ImageOptions::default();
    for &(n, layers, heads, group, generated) in &[
        (1usize, 1usize, 1usize, 1usize, 0usize),
        (2, 1, 2, 2, 1),
        (10, 30, 9, 3, 7),
        (24, 2, 14, 7, 20),
        (130, 1, 8, 4, 100),
        (600, 1, 4, 2, 590),
    ] {
        let toks: Vec<String> = (0..n)
            .map(|i| {
                if i % 9 == 0 {
                    "Ġinternationalisation".to_string()
                } else {
                    format!("Ġw{i}")
                }
            })
            .collect();
        let toks: Vec<&str> = toks.iter().map(String::as_str).collect();
        let att = as_decoder(synthetic(&toks, layers, heads), group, generated);
        for fig in [
            FigureSpec::Head {
                layer: 0,
                head: HeadSel::Index(heads - 1),
            },
            FigureSpec::Mean { layer: 0 },
            FigureSpec::Layer { layer: 0 },
            FigureSpec::Model,
        ] {
            let scene = build(&att, &fig, &options).unwrap();
            let what =
                format!("{n} tokens, {layers}x{heads}/{group}, generated {generated}, {fig:?}");
            assert_text_fits(&scene, &what);
            assert!(
                scene.width <= MAX_PIXELS && scene.height <= MAX_PIXELS,
                "{what}: {}x{}",
                scene.width,
                scene.height
            );
        }
    }
}

/// Cross-attention figures: target rows over source columns, both axes labelled by side, for a
/// long source over a short target and the reverse, in every figure; nothing overlaps.
#[test]
fn cross_attention_figures_label_both_sides_for_long_and_short_inputs() {
    let words: Vec<String> = (0..40).map(|i| format!("Ġw{i}")).collect();
    let long: Vec<&str> = std::iter::once("<s>")
        .chain(words.iter().map(String::as_str))
        .chain(std::iter::once("</s>"))
        .collect();
    let short = ["</s>", "Ġein", "ĠSatz"];
    for (source, target) in [(&long[..], &short[..]), (&short[..], &long[..])] {
        let set =
            crate::attention::fixtures::encoder_decoder(source, target, 2, 3, 4, target.len());
        let cross = set.cross().unwrap();
        for figure in [
            FigureSpec::Head {
                layer: 1,
                head: HeadSel::Index(2),
            },
            FigureSpec::Mean { layer: 2 },
            FigureSpec::Layer { layer: 0 },
            FigureSpec::Model,
        ] {
            let scene = build(cross, &figure, &ImageOptions::default()).unwrap();
            let texts: Vec<&str> = scene
                .items
                .iter()
                .filter_map(|i| match i {
                    scene::Item::Text(t) => Some(t.text.as_str()),
                    _ => None,
                })
                .collect();
            assert!(scene.title.contains("cross-attention"), "{}", scene.title);
            if !matches!(figure, FigureSpec::Model) {
                // The row title in full along long rows, shortened along a single heatmap's
                // three short ones (a grid's rows of panels are tall enough for it).
                let single = matches!(figure, FigureSpec::Head { .. } | FigureSpec::Mean { .. });
                let row_title = if target.len() > source.len() || !single {
                    "Target · decoder (attending from)"
                } else {
                    "Target"
                };
                assert!(texts.contains(&row_title), "{texts:?}");
                assert!(
                    texts.contains(&"Source · encoder (attended to)"),
                    "{texts:?}"
                );
                assert!(texts.contains(&"w39") || texts.iter().any(|t| t.ends_with("w39")));
            }
            // The subtitle quotes what both axes read: the target (rows), then the source.
            let all = texts.join(" ");
            let (t, s) = (all.find("target: “"), all.find("source: “"));
            assert!(t.is_some() && s.is_some() && t < s, "{texts:?}");
            // Both on one line, or the source starts a line of its own.
            assert!(
                texts
                    .iter()
                    .any(|t| t.starts_with("source: “") || t.contains("” · source: “")),
                "{texts:?}"
            );
            // Every cell block is target rows × source columns.
            let cells = scene
                .items
                .iter()
                .find_map(|i| match i {
                    scene::Item::Cells(c) if c.rows > 1 || c.cols > 1 => Some(c),
                    _ => None,
                })
                .unwrap();
            assert_eq!((cells.rows, cells.cols), (target.len(), source.len()));
            if matches!(figure, FigureSpec::Head { .. } | FigureSpec::Mean { .. }) {
                assert_eq!(cells.cell_w, cells.cell_h, "square cells");
                // The row title reads along the rows: centred on them when it fits, else
                // starting at the top row (never up into the title block).
                let title = scene
                    .texts()
                    .find(|t| t.up && t.text.starts_with("Target"))
                    .expect("a row title");
                let b = title.bounds();
                let (top, bottom) = (cells.y, cells.y + cells.height() as i32);
                assert!(
                    b.y0 >= top - 2,
                    "{figure:?}: {b:?} above rows {top}..{bottom}"
                );
                if b.y1 - b.y0 <= bottom - top {
                    let (mid, rows_mid) = ((b.y0 + b.y1) / 2, (top + bottom) / 2);
                    assert!(
                        (mid - rows_mid).abs() <= 3,
                        "{figure:?}: {b:?} vs {top}..{bottom}"
                    );
                }
            }
            assert_text_fits(
                &scene,
                &format!("{figure:?} {}×{}", target.len(), source.len()),
            );
            render_png(cross, &figure, &ImageOptions::default()).unwrap();
            render_svg(cross, &figure, &ImageOptions::default()).unwrap();
        }
        let enc = build(
            set.encoder().unwrap(),
            &FigureSpec::Model,
            &ImageOptions::default(),
        );
        assert!(enc.unwrap().title.contains("· encoder"));
    }
}

/// An encoder–decoder's figures quote what their rows read: the encoder's the source, the
/// decoder's the target (or what the model generated), cross-attention's the target, then the
/// source its columns read.
#[test]
fn each_kind_quotes_the_text_its_rows_read() {
    let source = ["<s>", "Ġa", "Ġcat", "</s>"];
    let target = ["</s>", "Ġeine", "ĠKatze"];
    let set = crate::attention::fixtures::encoder_decoder(&source, &target, 2, 2, 2, 3);
    let src = "source: “<s> Ġa Ġcat </s>”";
    let tgt = "target: “</s> Ġeine ĠKatze”";
    assert_eq!(subtitle(set.encoder().unwrap()), src);
    assert_eq!(subtitle(set.decoder().unwrap()), tgt);
    assert_eq!(subtitle(set.cross().unwrap()), format!("{tgt}  ·  {src}"));
    // A generation: the decoded tokens, named as generated.
    let set = crate::attention::fixtures::encoder_decoder(&source, &target, 2, 2, 2, 1);
    let generated = set
        .decoder()
        .unwrap()
        .clone()
        .with_target_text(Some("eine Katze".into()));
    assert_eq!(subtitle(&generated), "generated: “eine Katze”");
    // No decoder text (attention read from a file without one): nothing is quoted rather than
    // the source, which is not what the rows read.
    assert_eq!(subtitle(set.decoder().unwrap()), "");
    assert_eq!(subtitle(set.cross().unwrap()), src);
}
