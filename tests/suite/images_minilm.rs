//! Every figure drawn from the real all-MiniLM-L6-v2's attention on real sentences (a pair with
//! punctuation and quotes, and accented/CJK/emoji text): the PNG decodes at the reported size,
//! the SVG parses with every token as text, the brightest cell sits at the head's largest weight,
//! and the pair shows its divider.

use crate::support::engine as engine_support;

use std::sync::OnceLock;

use attnviz::model::{EncodeOptions, Model};
use attnviz::render::image::{figure_size, render_png, render_svg, FigureSpec, ImageOptions};
use attnviz::render::image::{Colormap, Theme};
use attnviz::{Attention, HeadSel};
use engine_support::minilm_dir;

fn model() -> &'static Model {
    static MODEL: OnceLock<Model> = OnceLock::new();
    MODEL.get_or_init(|| Model::from_dir(&minilm_dir()).unwrap())
}

fn encode(text: &str, pair: Option<&str>) -> Attention {
    model()
        .encode(text, pair, &EncodeOptions::default())
        .unwrap()
        .attention
}

struct Png {
    w: usize,
    h: usize,
    rgb: Vec<u8>,
}

fn decode(bytes: &[u8]) -> Png {
    let mut reader = png::Decoder::new(bytes).read_info().unwrap();
    let mut rgb = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut rgb).unwrap();
    Png {
        w: info.width as usize,
        h: info.height as usize,
        rgb,
    }
}

impl Png {
    fn at(&self, x: usize, y: usize) -> [u8; 3] {
        let i = (y * self.w + x) * 3;
        [self.rgb[i], self.rgb[i + 1], self.rgb[i + 2]]
    }
}

#[test]
fn every_figure_of_real_attention_renders_and_says_what_it_should() {
    let pair = encode(
        "The cat sat on the mat.",
        Some("It was tired & hungry, said \"Bob\" <again>."),
    );
    let accents = encode("Café naïve résumé — 東京で寿司を食べた 🍣!", None);
    assert!(pair.sentence_b_start().is_some());
    for att in [&pair, &accents] {
        let rollout = att.head_mean(5);
        for options in [
            ImageOptions::default(),
            ImageOptions {
                colormap: Colormap::Inferno,
                theme: Theme::Dark,
                ..ImageOptions::default()
            },
        ] {
            for fig in [
                FigureSpec::Head {
                    layer: 2,
                    head: HeadSel::Index(5),
                },
                FigureSpec::Layer { layer: 3 },
                FigureSpec::Mean { layer: 0 },
                FigureSpec::Model,
                FigureSpec::rollout(5, &rollout),
            ] {
                let (w, h) = figure_size(att, &fig, &options).unwrap();
                let img = decode(&render_png(att, &fig, &options).unwrap());
                assert_eq!((img.w, img.h), (w as usize, h as usize));
                let svg = render_svg(att, &fig, &options).unwrap();
                let doc = roxmltree::Document::parse(&svg).expect("valid XML");
                let texts: Vec<&str> = doc
                    .descendants()
                    .filter(|n| n.has_tag_name("text"))
                    .filter_map(|n| n.text())
                    .map(str::trim)
                    .collect();
                if !matches!(fig, FigureSpec::Model) {
                    // Each token as the axes name it: its display text, with its position
                    // where the text repeats (`the₇`).
                    for token in att.queries().named(false) {
                        assert!(
                            texts.contains(&token.as_str()),
                            "{fig:?}: token {token:?} is not a <text>"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn brightest_cell_of_a_real_head_is_its_largest_weight() {
    // A 12-token sentence draws 32-pixel cells. Find the frame's inside corner from the top-left
    // cell's colour, then the cell with the colour map's top colour, and compare with the argmax.
    let att = encode("The quick brown fox jumps over the lazy dog.", None);
    let n = att.len();
    let options = ImageOptions::default();
    for (layer, head) in [(0, 0), (2, 11), (5, 7)] {
        let m = att.head(layer, head);
        let (best, _) =
            m.iter().enumerate().fold(
                (0, f32::MIN),
                |acc, (i, &v)| if v > acc.1 { (i, v) } else { acc },
            );
        let fig = FigureSpec::Head {
            layer,
            head: HeadSel::Index(head),
        };
        let img = decode(&render_png(&att, &fig, &options).unwrap());
        let top = [0xfd, 0xe7, 0x25]; // viridis at 1.0
        let hits: Vec<(usize, usize)> = (0..img.h)
            .flat_map(|y| (0..img.w).map(move |x| (x, y)))
            .filter(|&(x, y)| img.at(x, y) == top)
            .collect();
        // 32×32 pixels of the top cell, plus the colour bar's top row, which has no top-coloured
        // pixel below it
        let cell: Vec<_> = hits
            .iter()
            .filter(|&&(x, y)| img.at(x, y + 1) == top || img.at(x, y - 1) == top)
            .collect();
        assert_eq!(cell.len(), 32 * 32, "layer {layer} head {head}");
        let (x0, y0) = (
            cell.iter().map(|p| p.0).min().unwrap(),
            cell.iter().map(|p| p.1).min().unwrap(),
        );
        // The heatmap frame: the first frame-coloured pixel left of row y0's cells and above.
        let frame = [0x5a, 0x5a, 0x5a];
        let left = (0..x0).rev().find(|&x| img.at(x, y0) == frame).unwrap() + 1;
        let top_edge = (0..y0).rev().find(|&y| img.at(x0, y) == frame).unwrap() + 1;
        let (q, k) = ((y0 - top_edge) / 32, (x0 - left) / 32);
        assert_eq!(
            q * n + k,
            best,
            "layer {layer} head {head}: bright cell ({q}, {k})"
        );
    }
}
