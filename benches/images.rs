//! Image rendering benchmark: prints how long each figure takes at 12, 128 and 512 tokens, for a
//! MiniLM-shaped (6 layers × 12 heads) and a bert-base-shaped (12 × 12) attention, and the
//! file sizes. Run with `cargo bench --bench images`. Goal (issue 3): the whole-model grid at 512
//! tokens in under 3 s.
//!
//! The attention is synthetic but shaped like real heads (a [CLS] sink, a diagonal band, noise,
//! rows summing to 1): rendering time depends on the token count and figure, not on the values.

use std::hint::black_box;
use std::time::{Duration, Instant};

use attnviz::render::fonts::{subset_for, FontId};
use attnviz::render::image::{render_png, render_svg, FigureSpec, ImageOptions};
use attnviz::render::image::{Colormap, Theme};
use attnviz::HeadSel;

#[path = "../tests/suite/support/mod.rs"]
mod support;

use support::attention::banded_attention as attention;

/// Median of `runs` timings of `f`, and the last result's size.
fn time(runs: usize, mut f: impl FnMut() -> usize) -> (Duration, usize) {
    let mut times = Vec::with_capacity(runs);
    let mut size = 0;
    for _ in 0..runs {
        let t = Instant::now();
        size = black_box(f());
        times.push(t.elapsed());
    }
    times.sort();
    (times[runs / 2], size)
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let threads = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{cpu}, {threads} hardware threads available; rendering is single-threaded")
}

/// What the embedded fonts cost: each font's size in the binary, the time to inflate it (paid
/// once per process, on first use), and the size of the font subsets an SVG or report embeds for
/// a few inputs.
fn fonts() {
    println!(
        "{:<24} {:>10} {:>10} {:>12}",
        "font", "in binary", "inflated", "inflate time"
    );
    let mut total = 0;
    for f in FontId::ALL {
        let (t, len) = time(5, || f.inflate().len());
        total += f.compressed_len();
        println!(
            "{:<24} {:>7} KB {:>7} KB {:>9.1} ms",
            f.file(),
            f.compressed_len() / 1024,
            len / 1024,
            t.as_secs_f64() * 1e3
        );
    }
    println!("{:<24} {:>7} KB", "all fonts", total / 1024);
    println!("{:<44} {:>9} {:>12}", "text", "subsets", "time");
    for text in [
        "The quick brown fox jumps over the lazy dog.",
        "東京は日本の首都です。",
        "서울은 한국의 수도입니다.",
        "I love 🚀 rockets and 🍣.",
        "مرحبا بالعالم",
        "नमस्ते दुनिया",
    ] {
        let (t, len) = time(5, || {
            subset_for([(text, false)])
                .unwrap()
                .iter()
                .map(|f| f.woff.len())
                .sum()
        });
        println!(
            "{text:<44} {:>6} KB {:>9.1} ms",
            len.div_ceil(1024),
            t.as_secs_f64() * 1e3
        );
    }
}

fn main() {
    println!("attnviz image benchmark (release build, median of runs)");
    println!("machine: {}", machine());
    fonts();
    if std::env::var_os("ATTNVIZ_BENCH_FONTS_ONLY").is_some() {
        return;
    }
    println!(
        "{:<22} {:>6} {:>9} {:>12} {:>11} {:>12} {:>11}",
        "shape", "tokens", "figure", "PNG time", "PNG size", "SVG time", "SVG size"
    );
    let options = ImageOptions {
        colormap: Colormap::Viridis,
        theme: Theme::Light,
        ..ImageOptions::default()
    };
    for (name, layers, heads) in [("MiniLM 6x12", 6, 12), ("bert-base 12x12", 12, 12)] {
        for n in [12, 128, 512] {
            let att = attention(n, layers, heads);
            let rollout = att.head_mean(layers - 1);
            let figures = [
                (
                    "head",
                    FigureSpec::Head {
                        layer: 0,
                        head: HeadSel::Index(0),
                    },
                ),
                ("layer", FigureSpec::Layer { layer: 0 }),
                ("mean", FigureSpec::Mean { layer: 0 }),
                ("model", FigureSpec::Model),
                ("rollout", FigureSpec::rollout(layers - 1, &rollout)),
            ];
            let runs = if n >= 512 { 3 } else { 7 };
            for (fig_name, fig) in &figures {
                let (png_t, png_len) =
                    time(runs, || render_png(&att, fig, &options).unwrap().len());
                let (svg_t, svg_len) =
                    time(runs, || render_svg(&att, fig, &options).unwrap().len());
                println!(
                    "{name:<22} {n:>6} {fig_name:>9} {:>9.1} ms {:>8} KB {:>9.1} ms {:>8} KB",
                    png_t.as_secs_f64() * 1e3,
                    png_len / 1024,
                    svg_t.as_secs_f64() * 1e3,
                    svg_len / 1024
                );
            }
        }
    }
}
