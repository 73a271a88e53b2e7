//! Writing large outputs (issue 14, requirement 4): the JSON export to a file, in MB/s, and the
//! whole-model PNG, at 128 and 512 tokens for a MiniLM-shaped (6 × 12) and a bert-base-shaped
//! (12 × 12) attention. Goals: JSON at ≥ 500 MB/s, the whole-model PNG at 512 tokens in ≤ 0.3 s.
//! Prints figures; asserts nothing.
//!
//! Run: `cargo bench --bench outputs` (`BENCH_THREADS=N` for another thread count). The JSON
//! goes through `attnviz::output::write_output`, as the CLI writes it: a temporary file in a
//! scratch folder, renamed into place, not synced (the page cache absorbs it; what the disk
//! then does is the OS's business). The attention is synthetic (`banded_attention` of
//! tests/suite/support/attention.rs); times depend on the shape, not on the values. Columns: the JSON written to a file (wall time and
//! rate); the same JSON formatted into memory (the formatting alone); a plain write of as many
//! bytes to a file (the page cache's own rate here: a ceiling); and the formatting's megabytes
//! per CPU-second over all threads (on a busy machine, the figure that says what a quiet one
//! would do: divide by the threads to get per core).

use std::time::Instant;

use attnviz::output::write_output;
use attnviz::render::image::{render_png, FigureSpec, ImageOptions};
use attnviz::render::json::{write_json, JsonOptions};

#[path = "support/measure.rs"]
mod measure;
#[path = "../tests/suite/support/mod.rs"]
mod support;

use measure::{cpu_seconds, env_usize, load_average, machine};

/// Median and minimum of `runs` timings of `f`, in seconds.
fn time<T>(runs: usize, mut f: impl FnMut() -> T) -> (f64, f64, T) {
    let mut last = None;
    let mut t: Vec<f64> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            last = Some(std::hint::black_box(f()));
            start.elapsed().as_secs_f64()
        })
        .collect();
    t.sort_by(f64::total_cmp);
    (t[runs / 2], t[0], last.expect("runs ≥ 1"))
}

fn main() {
    let threads = attnviz::threads::configure(env_usize("BENCH_THREADS"));
    println!("attnviz outputs benchmark (release build; median (min) of runs)");
    println!("machine: {}", machine());
    println!(
        "threads: {threads}; load average before: {}",
        load_average()
    );
    let dir = tempfile::tempdir().expect("scratch folder");
    let path = dir.path().join("attention.json");
    println!(
        "\n{:<16} {:>6} {:>22} {:>9} {:>17} {:>19} {:>19} {:>12} {:>15}",
        "shape",
        "tokens",
        "JSON",
        "size",
        "to a file",
        "rate",
        "formatting alone",
        "plain copy",
        "per CPU-second"
    );
    let shapes = [("MiniLM 6x12", 6, 12), ("bert-base 12x12", 12, 12)];
    for (name, layers, heads) in shapes {
        for n in [128, 512] {
            let att = support::attention::banded_attention(n, layers, heads);
            for full_precision in [false, true] {
                let opts = JsonOptions { full_precision };
                let runs = if n >= 512 { 5 } else { 9 };
                let (med, min, ()) = time(runs, || {
                    write_output(&path, |w| write_json(&att, &[], opts, w)).expect("JSON written")
                });
                let bytes = std::fs::metadata(&path).map_or(0, |m| m.len()) as f64;
                // The same text into memory: the formatting alone, without the page cache.
                let cpu = cpu_seconds();
                let (mem_med, mem_min, _) = time(runs, || {
                    let mut out = Vec::with_capacity(bytes as usize + 4096);
                    write_json(&att, &[], opts, &mut out).expect("JSON formatted");
                    out.len()
                });
                let mem_cpu = (cpu_seconds() - cpu) / runs as f64;
                // A plain copy of as many bytes into a file: the page cache's own speed here.
                let (copy_med, _, ()) = time(runs, || {
                    write_output(&path, |w| {
                        let chunk = vec![b'0'; 1 << 20];
                        (0..bytes as usize >> 20).try_for_each(|_| w.write_all(&chunk))
                    })
                    .expect("bytes written")
                });
                let rate = |t: f64| bytes / 1e6 / t;
                println!(
                    "{name:<16} {n:>6} {:>22} {:>6.1} MB {:>7.3} ({:.3}) s {:>7.0} ({:.0}) MB/s \
                     {:>7.0} ({:.0}) MB/s {:>7.0} MB/s {:>10.0} MB/s",
                    if full_precision {
                        "full precision"
                    } else {
                        "6 digits"
                    },
                    bytes / 1e6,
                    med,
                    min,
                    rate(med),
                    rate(min),
                    rate(mem_med),
                    rate(mem_min),
                    rate(copy_med),
                    rate(mem_cpu),
                );
            }
        }
    }
    println!(
        "\n{:<16} {:>6} {:>17} {:>10}",
        "shape", "tokens", "model PNG", "size"
    );
    for (name, layers, heads) in shapes {
        for n in [128, 512] {
            let att = support::attention::banded_attention(n, layers, heads);
            let opts = ImageOptions::default();
            let (med, min, bytes) = time(5, || {
                render_png(&att, &FigureSpec::Model, &opts).expect("PNG rendered")
            });
            println!(
                "{name:<16} {n:>6} {:>7.3} ({:.3}) s {:>7} KB",
                med,
                min,
                bytes.len() / 1024
            );
        }
    }
    println!("\nload average after: {}", load_average());
}
