//! Timing of the analyses, and of writing the JSON export and the HTML report (its payload) from
//! the same value, on a bert-base-shaped attention (12 layers × 12 heads) at 128 and 512 tokens,
//! random softmax rows. Prints figures; asserts nothing.
//!
//! Run: `cargo bench --bench analysis` (set RAYON_NUM_THREADS to pin the thread count).

use std::time::{Duration, Instant};

use attnviz::analysis::{self, Analysis, ViewOptions};
use attnviz::attention::{Role, Units};
use attnviz::render::html::{write_html, HtmlOptions};
use attnviz::render::json::{write_json, JsonOptions};
use attnviz::{Attention, ModelInfo};

fn random_attention(n: usize, layers: usize, heads: usize) -> Attention {
    let mut state = 0x9e3779b97f4a7c15u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 40) as f32 / (1u64 << 24) as f32
    };
    let mut weights = Vec::with_capacity(layers * heads * n * n);
    let mut row = vec![0f32; n];
    for _ in 0..layers * heads * n {
        row.iter_mut().for_each(|x| *x = (6.0 * next()).exp());
        let sum: f32 = row.iter().sum();
        weights.extend(row.iter().map(|x| x / sum));
    }
    // [CLS] w0 ##p w1 ##p … [SEP]: every other token continues a word
    let tokens: Vec<String> = (0..n)
        .map(|i| match i {
            0 => "[CLS]".into(),
            i if i == n - 1 => "[SEP]".into(),
            i if i % 2 == 0 => format!("##p{i}"),
            i => format!("w{i}"),
        })
        .collect();
    let roles = (0..n)
        .map(|i| match i {
            0 => Role::Start,
            i if i == n - 1 => Role::End,
            i if i % 2 == 0 => Role::Piece,
            _ => Role::Word,
        })
        .collect();
    let word_ids = (0..n)
        .map(|i| (i != 0 && i != n - 1).then_some((i - 1) / 2))
        .collect();
    let surfaces = tokens
        .iter()
        .map(|t| t.trim_start_matches('#').to_string())
        .collect();
    let units = Units::tokens(
        tokens,
        (0..n as u32).collect(),
        vec![0; n],
        vec![0; n],
        roles,
        word_ids,
        surfaces,
    );
    Attention::new(
        ModelInfo {
            id: "random".into(),
            revision: None,
            name: None,
            family: "BERT".into(),
            layers,
            heads,
            hidden_size: 768,
            head_dim: 64,
        },
        String::new(),
        None,
        units,
        weights,
    )
    .unwrap()
}

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
