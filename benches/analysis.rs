//! Timing of the analyses, and of writing the JSON export and the HTML report (its payload) from
//! the same value, on a bert-base-shaped attention (12 layers × 12 heads) at 128 and 512 tokens,
//! random softmax rows. Prints figures; asserts nothing.
//!
//! Run: `cargo bench --bench analysis` (set RAYON_NUM_THREADS to pin the thread count).

use std::time::{Duration, Instant};

use attnviz::analysis::{self, Analysis, ViewOptions};
use attnviz::render::html::{write_html, HtmlOptions};
use attnviz::render::json::{write_json, JsonOptions};

#[path = "../tests/suite/support/mod.rs"]
mod support;
use support::attention::random_rows_attention as random_attention;

fn median<T>(runs: usize, mut f: impl FnMut() -> T) -> Duration {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(f());
            t.elapsed()
        })
        .collect();
    times.sort();
    times[runs / 2]
}

fn main() {
    let threads = rayon::current_num_threads();
    println!("analysis timings, 12 layers x 12 heads, {threads} rayon threads, median of 5");
    for n in [128, 512] {
        let att = random_attention(n, 12, 12);
        let both = ViewOptions {
            words: true,
            no_special: true,
        };
        let rows: [(&str, Duration); 9] = [
            ("head_stats", median(5, || analysis::head_stats(&att))),
            ("layer_means", median(5, || analysis::layer_means(&att))),
            ("rollout", median(5, || analysis::rollout(&att))),
            ("to_words", median(5, || analysis::to_words(&att))),
            (
                "without_special",
                median(5, || analysis::without_special(&att)),
            ),
            ("Analysis::compute", median(5, || Analysis::compute(&att))),
            (
                "compute_view(words+no_special)",
                median(5, || Analysis::compute_view(&att, both)),
            ),
            (
                "write_json (6 digits, to memory)",
                median(5, || {
                    let mut out = Vec::with_capacity(64 << 20);
                    write_json(&att, &[], JsonOptions::default(), &mut out).unwrap();
                    out.len()
                }),
            ),
            (
                "write_html (16 bits, to memory)",
                median(5, || {
                    let mut out = Vec::with_capacity(16 << 20);
                    write_html(&att, &HtmlOptions::default(), &mut out).unwrap();
                    out.len()
                }),
            ),
        ];
        for (name, t) in rows {
            println!("  n={n:>3}  {name:<32} {:>8.1} ms", t.as_secs_f64() * 1e3);
        }
    }
}
