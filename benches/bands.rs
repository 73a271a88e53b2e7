//! What a vision-language model's picture bands cost (`attnviz_render::band`): collapsing a
//! LLaVA-1.5-shaped capture (576 image tokens of a 24 × 24 grid among 620 tokens, 32 heads) into
//! bands, and the head figure drawn with bands and token by token. Run with
//! `cargo bench --bench bands`. Prints the median of 3 runs of each.

use std::hint::black_box;
use std::time::{Duration, Instant};

use attnviz::attention::image::{Cell, ImageInput, PictureTokens, Preprocessing};
use attnviz::attention::MaskKind;
use attnviz::render::band::banded;
use attnviz::render::image::{render_png, FigureSpec, ImageOptions};
use attnviz::HeadSel;

#[path = "../tests/suite/support/mod.rs"]
mod support;

use support::attention::banded_attention as attention;

fn median(mut f: impl FnMut() -> usize) -> Duration {
    let mut times: Vec<Duration> = (0..3)
        .map(|_| {
            let t = Instant::now();
            black_box(f());
            t.elapsed()
        })
        .collect();
    times.sort();
    times[1]
}

fn main() {
    let (n, heads, first, side) = (620, 32, 5, 24);
    let image = ImageInput {
        source: "photo.jpg".into(),
        original: [336, 336],
        input: [336, 336],
        patch: 14,
        grid: [side, side],
        preprocessing: Preprocessing {
            color: "rgb8".into(),
            resize: None,
            crop: None,
            rescale: None,
            normalize: None,
            positions_from: None,
        },
        cells: (0..side * side)
            .map(|i| Cell::Patch {
                row: i / side,
                col: i % side,
            })
            .collect(),
        norms: Vec::new(),
        pooling: None,
        windows: None,
        view: Vec::new(),
    };
    println!(
        "LLaVA-1.5-shaped: {n} tokens, {} image tokens, {heads} heads",
        side * side
    );
    for layers in [1, 8] {
        let att = attention(n, layers, heads)
            .with_mask(MaskKind::Causal)
            .with_pictures(vec![PictureTokens {
                first,
                image: image.clone(),
                bidirectional: false,
                tile: None,
            }])
            .expect("the picture fits");
        let band = median(|| banded(&att).map_or(0, |b| b.attention.len()));
        let figure = FigureSpec::Head {
            layer: layers - 1,
            head: HeadSel::Mean,
        };
        let png = |expand_pictures| {
            let options = ImageOptions {
                expand_pictures,
                ..ImageOptions::default()
            };
            median(|| render_png(&att, &figure, &options).map_or(0, |p| p.len()))
        };
        println!(
            "{layers:>2} layers: banding {:>7.1} ms · head figure with bands {:>7.1} ms, token by token {:>7.1} ms",
            band.as_secs_f64() * 1e3,
            png(false).as_secs_f64() * 1e3,
            png(true).as_secs_f64() * 1e3
        );
    }
}
