//! GGUF loading benchmark (issue 10, requirements 5 and 9): SmolLM2-135M-Instruct Q4_1 (98 MB),
//! opened, its tokenizer and chat prompt built, and all 272 tensors dequantised to f32, with the
//! wall time of each step and the process's peak resident memory. Prints figures; asserts
//! nothing.
//!
//! Run: `cargo bench --bench gguf`. Each round is a fresh child process (so that its peak RSS is
//! its own, and page-cache effects are the same each time: the file is in the page cache after
//! the first round, as it is for a user's second run). Settings (environment):
//! - `BENCH_THREADS=N`: thread count (default: `attnviz::threads`' choice: physical cores);
//! - `BENCH_ROUNDS=N`: rounds (default 9);
//! - `ATTNVIZ_SMOLLM2_DIR`: the model (default `.cache/models/smollm2`; `scripts/fetch-smollm2.sh`);
//! - `PYTHON`: an interpreter with the `gguf` package for the anchor (default `python3`; the
//!   anchor is skipped without it).
//!
//! The anchor is `benches/gguf_anchor.py`: gguf-py (llama.cpp's Python reader, which
//! transformers' GGUF loading uses) dequantising the same tensors with numpy, also in a fresh
//! process per round.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use attnviz::model::gguf::GgufFile;

#[path = "../tests/suite/support/models/smollm2.rs"]
mod smollm2;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        let path = PathBuf::from(&args[i + 1]);
        child(&path);
        return;
    }
    let threads = attnviz::threads::configure(env_usize("BENCH_THREADS"));
    let rounds = env_usize("BENCH_ROUNDS").unwrap_or(9).max(1);
    let path = smollm2::smollm2_gguf();
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());

    println!("attnviz GGUF loading benchmark: {}", path.display());
    println!("machine: {}", machine());
    println!("threads: {threads}; rounds: {rounds}, each a fresh process");
    println!("load average before: {}", load_average());
    println!("figures: median (min … max) over the rounds; lower is better\n");

    let exe = std::env::current_exe().expect("benchmark executable");
    let anchor = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/gguf_anchor.py");
    let mut ours: Vec<Vec<f64>> = Vec::new();
    let mut theirs: Vec<Vec<f64>> = Vec::new();
    for round in 0..rounds {
        // Alternate with the anchor round by round, so noise spreads over both columns.
        let out = Command::new(&exe)
            .arg("--child")
            .arg(&path)
            .env("RAYON_NUM_THREADS", threads.to_string())
            .output()
            .expect("running a round");
        assert!(
            out.status.success(),
            "round {round} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        ours.push(parse(&out.stdout));
        if let Ok(out) = Command::new(&python).arg(&anchor).arg(&path).output() {
            if out.status.success() {
                theirs.push(parse(&out.stdout));
            } else if round == 0 {
                println!(
                    "anchor skipped ({} could not run {}): {}",
                    python,
                    anchor.display(),
                    String::from_utf8_lossy(&out.stderr)
                        .lines()
                        .last()
                        .unwrap_or("")
                );
            }
        }
    }

    let labels = [
        ("open + parse metadata", 1e3, "ms"),
        ("tokenizer from metadata", 1e3, "ms"),
        ("chat template render", 1e3, "ms"),
        ("dequantise all tensors", 1e3, "ms"),
        ("total", 1e3, "ms"),
        ("peak RSS (VmHWM)", 1.0, "MB"),
    ];
    println!("{:<28} {:>32} {:>32}", "", "attnviz", "gguf-py (numpy)");
    for (k, (label, scale, unit)) in labels.iter().enumerate() {
        let column = |runs: &[Vec<f64>]| -> String {
            let xs: Vec<f64> = runs.iter().filter_map(|r| r.get(k).copied()).collect();
            if xs.is_empty() || xs.iter().any(|x| x.is_nan()) {
                return "—".into();
            }
            fmt_stats(&xs, *scale, unit)
        };
        println!("{label:<28} {:>32} {:>32}", column(&ours), column(&theirs));
    }
    println!("\nload average after: {}", load_average());
}

/// One round: the steps timed in this process, printed as `open tokenizer chat dequant total
/// peak_mb` (seconds, MB).
fn child(path: &Path) {
    let t0 = Instant::now();
    let gguf = GgufFile::open(path).unwrap_or_else(|e| panic!("{e}"));
    let t1 = Instant::now();
    let tokenizer = gguf.tokenizer().unwrap_or_else(|e| panic!("{e}"));
    let t2 = Instant::now();
    let prompt = gguf
        .chat_template()
        .and_then(|t| Ok(t.render_user_message("What is attention in a transformer?")?))
        .unwrap_or_else(|e| panic!("{e}"));
    let ids = tokenizer.tokenizer.encode(prompt.as_str(), true).unwrap();
    let t3 = Instant::now();
    let weights = gguf.dequantize_all().unwrap_or_else(|e| panic!("{e}"));
    let t4 = Instant::now();
    let values: usize = weights.values().map(|w| w.data.len()).sum();
    assert!(values > 0 && !ids.is_empty());
    let secs = |a: Instant, b: Instant| (b - a).as_secs_f64();
    println!(
        "{} {} {} {} {} {}",
        secs(t0, t1),
        secs(t1, t2),
        secs(t2, t3),
        secs(t3, t4),
        secs(t0, t4),
        peak_rss_mb()
    );
    drop(weights);
}

fn parse(stdout: &[u8]) -> Vec<f64> {
    String::from_utf8_lossy(stdout)
        .lines()
        .last()
        .unwrap_or("")
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(f64::NAN))
        .collect()
}

/// VmHWM of this process, in MB.
fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

fn fmt_stats(xs: &[f64], scale: f64, unit: &str) -> String {
    let lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!(
        "{:.1} {unit} ({:.1} … {:.1})",
        median(xs) * scale,
        lo * scale,
        hi * scale
    )
}

fn env_usize(name: &str) -> Option<usize> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

/// CPU model, physical and logical cores.
fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, m)| m.trim().to_string())
        .unwrap_or_else(|| std::env::consts::ARCH.to_string());
    format!(
        "{model}, {} physical cores, {} logical CPUs",
        num_cpus::get_physical(),
        num_cpus::get()
    )
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "n/a".into())
}
