//! Corpus-mode benchmark: a generated corpus (deterministic, `support/sentences.rs`) through the
//! release binary with all-MiniLM-L6-v2, printing wall time, sentences/second, CPU time, peak
//! RSS and bytes written, for each corpus size and per-sentence output; then (with
//! `strategies`) a comparison of the two ways to use the cores: one sentence per task vs
//! length-bucketed padded batches through `Model::forward_batch`.
//!
//! ```sh
//! cargo bench --bench corpus                  # 1,000 and 10,000 sentences, json and none
//! cargo bench --bench corpus -- 10000 json    # one size, one output kind
//! cargo bench --bench corpus -- strategies    # forward-pass strategies only
//! python3 benches/corpus_anchor.py target/corpus-bench/corpus-10000.txt   # PyTorch anchor
//! ```
//!
//! Needs the model at `$ATTNVIZ_MINILM_DIR` or `.cache/models/all-MiniLM-L6-v2`
//! (`scripts/fetch-minilm.sh`). The per-sentence JSON of 10,000 sentences is several GB; each
//! run's output folder is deleted after it is measured.

#[path = "support/sentences.rs"]
mod sentences;

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use attnviz::model::Model;
use rayon::prelude::*;

#[path = "../tests/suite/support/models/minilm.rs"]
mod minilm;
use minilm::minilm_dir as minilm;

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let model = minilm();
    let work = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/corpus-bench");
    fs::create_dir_all(&work).unwrap();
    println!("{}", machine());

    if args.iter().any(|a| a == "strategies") {
        for threads in [1, candle_core::utils::get_num_threads()] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            pool.install(|| strategies(&model, 400, 5));
        }
        return;
    }
    let sizes: Vec<usize> = {
        let given: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
        if given.is_empty() {
            vec![1000, 10_000]
        } else {
            given
        }
    };
    let kinds: Vec<&str> = {
        let given: Vec<&str> = args
            .iter()
            .map(String::as_str)
            .filter(|a| ["json", "none"].contains(a))
            .collect();
        if given.is_empty() {
            vec!["json", "none"]
        } else {
            given
        }
    };
    println!(
        "{:>9} {:>8} {:>8} {:>9} {:>9} {:>10} {:>8} {:>10}",
        "sentences", "output", "wall s", "sent/s", "tokens/s", "peak MiB", "CPU s", "written"
    );
    for &n in &sizes {
        let input = work.join(format!("corpus-{n}.txt"));
        fs::write(&input, sentences::corpus(n)).unwrap();
        for kind in &kinds {
            let out_dir = work.join(format!("out-{n}-{kind}"));
            let _ = fs::remove_dir_all(&out_dir);
            let run = run_binary(&model, &input, &out_dir, kind);
            let summary: serde_json::Value = serde_json::from_str(
                &fs::read_to_string(out_dir.join("corpus_stats.json")).unwrap(),
            )
            .unwrap();
            assert_eq!(summary["end"], "complete");
            let sentences = summary["sentences"].as_u64().unwrap();
            let tokens = summary["tokens"].as_u64().unwrap();
            let written = dir_bytes(&out_dir);
            println!(
                "{:>9} {:>8} {:>8.1} {:>9.1} {:>9.0} {:>10.0} {:>8.1} {:>9.2}G",
                sentences,
                kind,
                run.wall,
                sentences as f64 / run.wall,
                tokens as f64 / run.wall,
                run.peak_rss_kib as f64 / 1024.0,
                run.cpu,
                written as f64 / 1e9,
            );
            fs::remove_dir_all(&out_dir).unwrap();
        }
    }
}

struct Run {
    wall: f64,
    cpu: f64,
    peak_rss_kib: i64,
}

/// Run corpus mode and measure it (wall clock, the child's CPU time and peak RSS via wait4).
#[allow(clippy::zombie_processes)] // reaped by wait4, which also gives its resource usage
fn run_binary(model: &Path, input: &Path, out_dir: &Path, kind: &str) -> Run {
    let start = Instant::now();
    let child = Command::new(env!("CARGO_BIN_EXE_attnviz"))
        .arg("-m")
        .arg(model)
        .arg("--input")
        .arg(input)
        .arg("--out-dir")
        .arg(out_dir)
        .args(["--per-sentence", kind, "-q"])
        .spawn()
        .unwrap();
    let (status, cpu, peak_rss_kib) = wait_with_usage(child.id());
    let wall = start.elapsed().as_secs_f64();
    assert!(status, "attnviz failed");
    Run {
        wall,
        cpu,
        peak_rss_kib,
    }
}

#[cfg(unix)]
fn wait_with_usage(pid: u32) -> (bool, f64, i64) {
    let mut status = 0;
    // SAFETY: waiting for our own child; rusage is plain data.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid as libc::pid_t, &mut status, 0, &mut usage) };
    assert_eq!(r, pid as libc::pid_t, "wait4");
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let ok = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    (
        ok,
        secs(usage.ru_utime) + secs(usage.ru_stime),
        usage.ru_maxrss,
    )
}

#[cfg(not(unix))]
fn wait_with_usage(_pid: u32) -> (bool, f64, i64) {
    unimplemented!("the corpus benchmark measures peak RSS with wait4 (Unix)")
}

fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    for entry in fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let meta = entry.metadata().unwrap();
        total += if meta.is_dir() {
            dir_bytes(&entry.path())
        } else {
            meta.len()
        };
    }
    total
}

/// CPU model, CPUs, memory and load, for the record.
fn machine() -> String {
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|l| l.trim_start_matches([' ', '\t', ':']).to_string())
        .unwrap_or_else(|| "unknown CPU".into());
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem = fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").parse::<f64>().ok())
        .map_or_else(
            || "?".into(),
            |kb| format!("{:.0} GiB", kb / 1024.0 / 1024.0),
        );
    let load = fs::read_to_string("/proc/loadavg").unwrap_or_default();
    format!(
        "machine: {cpu}, {cpus} CPUs, {mem}; load average {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    )
}

/// Forward passes only (tokenized beforehand), `rounds` alternating rounds of each strategy on
/// the first `n` corpus lines; medians of wall and CPU time. Batches are formed as a streaming
/// run would: windows of 256 lines, sorted by length, cut into batches.
fn strategies(model_dir: &Path, n: usize, rounds: usize) {
    let model = Model::from_dir(model_dir).unwrap();
    let text = sentences::corpus(n);
    let encs: Vec<_> = text
        .lines()
        .map(|l| {
            let (a, b) = match l.split_once('\t') {
                Some((a, b)) => (a, Some(b)),
                None => (l, None),
            };
            model.tokenizer().encode(a, b, 512, false).unwrap()
        })
        .collect();
    let lens: Vec<usize> = encs.iter().map(|e| e.ids.len()).collect();
    let tokens: usize = lens.iter().sum();
    println!(
        "forward passes only: {n} sentences, {tokens} tokens (mean {:.1}), {} threads, {rounds} alternating rounds",
        tokens as f64 / n as f64,
        rayon::current_num_threads()
    );
    let batches = |size: usize| -> Vec<Vec<usize>> {
        let mut out = Vec::new();
        let all: Vec<usize> = (0..n).collect();
        for window in all.chunks(256) {
            let mut w = window.to_vec();
            w.sort_by_key(|&i| lens[i]);
            out.extend(w.chunks(size).map(<[usize]>::to_vec));
        }
        out
    };
    let run_batch = |b: &Vec<usize>| {
        let items: Vec<(&[u32], &[u32])> = b
            .iter()
            .map(|&i| (encs[i].ids.as_slice(), encs[i].type_ids.as_slice()))
            .collect();
        model.forward_batch(&items, false).unwrap().len()
    };
    let (b8, b16, b32) = (batches(8), batches(16), batches(32));
    type Strategy<'a> = (&'a str, Box<dyn Fn() -> usize + Sync + 'a>);
    let all: Vec<Strategy> = vec![
        (
            "one sentence per task",
            Box::new(|| {
                encs.par_iter()
                    .map(|e| {
                        model
                            .forward(&e.ids, &e.type_ids, false)
                            .unwrap()
                            .weights
                            .len()
                    })
                    .count()
            }),
        ),
        (
            "batches of 8",
            Box::new(|| b8.par_iter().map(run_batch).sum()),
        ),
        (
            "batches of 16",
            Box::new(|| b16.par_iter().map(run_batch).sum()),
        ),
        (
            "batches of 32",
            Box::new(|| b32.par_iter().map(run_batch).sum()),
        ),
    ];
    let mut times: Vec<Vec<(f64, f64)>> = vec![Vec::new(); all.len()];
    for _ in 0..rounds {
        for (i, (_, f)) in all.iter().enumerate() {
            let (t, c) = (Instant::now(), cpu_seconds());
            std::hint::black_box(f());
            times[i].push((t.elapsed().as_secs_f64(), cpu_seconds() - c));
        }
    }
    println!(
        "{:>24} {:>12} {:>10} {:>14}",
        "strategy", "wall median", "sent/s", "CPU ms/sent"
    );
    for (i, (name, _)) in all.iter().enumerate() {
        let median = |pick: fn(&(f64, f64)) -> f64| {
            let mut v: Vec<f64> = times[i].iter().map(pick).collect();
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let (wall, cpu) = (median(|t| t.0), median(|t| t.1));
        println!(
            "{name:>24} {wall:>11.2}s {:>10.1} {:>14.2}",
            n as f64 / wall,
            cpu * 1000.0 / n as f64
        );
    }
}

/// This process's user + system CPU time.
#[cfg(unix)]
fn cpu_seconds() -> f64 {
    // SAFETY: plain data out-parameter.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

#[cfg(not(unix))]
fn cpu_seconds() -> f64 {
    0.0
}
