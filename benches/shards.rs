//! Shards benchmark: a generated corpus (deterministic, `support/sentences.rs`) with
//! all-MiniLM-L6-v2 and `--per-sentence none`, run
//!
//! 1. as one process (`--threads T`, T = the machine's CPUs);
//! 2. as S shards in S parallel processes (`--shard k/S --threads 1` each), then `attnviz merge`;
//!
//! printing wall time, sentences/s and each process's CPU time and peak RSS (wait4), checking
//! that the merged summary equals the single run's in every statistic; then the time to merge
//! 1,000 partial files (copies of a real shard's partial file relabelled as shards 1..1000 of
//! 1000: the same bytes to read, parse and add as 1,000 real shards of this model).
//!
//! ```sh
//! cargo bench --bench shards                  # 100,000 sentences, 4 shards
//! cargo bench --bench shards -- 10000 4       # sentences, shards
//! cargo bench --bench shards -- fingerprint   # only: hashing the model's files
//! ```
//!
//! Needs the model at `$ATTNVIZ_MINILM_DIR` or `.cache/models/all-MiniLM-L6-v2`
//! (`scripts/fetch-minilm.sh`).

#[path = "support/sentences.rs"]
mod sentences;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

#[path = "../tests/suite/support/models/minilm.rs"]
mod minilm;
use minilm::minilm_dir as minilm;

fn main() {
    if std::env::args().any(|a| a == "fingerprint") {
        fingerprint();
        return;
    }
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let n = args.first().copied().unwrap_or(100_000);
    let shards = args.get(1).copied().unwrap_or(4);
    let model = minilm();
    let work = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/shards-bench");
    let _ = fs::remove_dir_all(&work);
    fs::create_dir_all(&work).unwrap();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("{}", machine());
    let input = work.join(format!("corpus-{n}.txt"));
    fs::write(&input, sentences::corpus(n)).unwrap();
    println!(
        "corpus: {n} lines, {:.1} MB; model all-MiniLM-L6-v2; --per-sentence none",
        fs::metadata(&input).unwrap().len() as f64 / 1e6
    );

    // One process.
    let single = work.join("single");
    let start = Instant::now();
    let pid = spawn(&model, &input, &single, None, cpus);
    let one = wait(pid);
    let single_wall = start.elapsed().as_secs_f64();
    let sentences = summary(&single)["sentences"].as_u64().unwrap();
    println!(
        "\none process, {cpus} threads: wall {single_wall:.1} s, {:.1} sentences/s, CPU {:.1} s, \
         peak RSS {:.0} MiB",
        sentences as f64 / single_wall,
        one.cpu,
        one.peak_mib
    );

    // S shards in parallel, then the merge.
    let start = Instant::now();
    let pids: Vec<(usize, u32)> = (1..=shards)
        .map(|k| {
            let dir = work.join(format!("shard-{k}"));
            (k, spawn(&model, &input, &dir, Some((k, shards)), 1))
        })
        .collect();
    let mut usages = Vec::new();
    for (k, pid) in pids {
        usages.push((k, wait(pid)));
    }
    let shards_wall = start.elapsed().as_secs_f64();
    let merged = work.join("merged.json");
    let start = Instant::now();
    let status = Command::new(env!("CARGO_BIN_EXE_attnviz"))
        .arg("merge")
        .args((1..=shards).map(|k| work.join(format!("shard-{k}"))))
        .arg("--out")
        .arg(&merged)
        .arg("-q")
        .status()
        .unwrap();
    assert!(status.success(), "merge failed");
    let merge_wall = start.elapsed().as_secs_f64();
    let total = shards_wall + merge_wall;
    println!(
        "{shards} shards in parallel, 1 thread each: wall {shards_wall:.1} s + merge \
         {merge_wall:.2} s = {total:.1} s, {:.1} sentences/s ({:.2}x the single process)",
        sentences as f64 / total,
        single_wall / total
    );
    for (k, u) in &usages {
        println!(
            "  shard {k}/{shards}: CPU {:.1} s, peak RSS {:.0} MiB",
            u.cpu, u.peak_mib
        );
    }
    let a = summary(&single);
    let b: serde_json::Value = serde_json::from_slice(&fs::read(&merged).unwrap()).unwrap();
    let worst = max_diff(&a["stats"], &b["stats"]);
    println!(
        "merged vs single run: sentences {} / {}, largest difference in any statistic {worst:.1e} \
         (the engine's matrix products round differently with 1 and {cpus} threads; with equal \
         --threads the files are identical, see tests/suite/corpus_shards.rs)",
        b["sentences"], a["sentences"]
    );

    // Merging 1,000 partial files.
    let parts = work.join("partials");
    fs::create_dir_all(&parts).unwrap();
    let text = fs::read_to_string(work.join("shard-1/corpus_partial.json")).unwrap();
    let mut paths: Vec<PathBuf> = Vec::new();
    for k in 1..=1000 {
        let relabelled = text.replacen(
            &format!("\"shard\": {{\"count\":{shards},\"index\":1}}"),
            &format!("\"shard\": {{\"count\":1000,\"index\":{k}}}"),
            1,
        );
        assert_ne!(relabelled, text, "shard field not found");
        let p = parts.join(format!("p{k}.json"));
        fs::write(&p, relabelled).unwrap();
        paths.push(p);
    }
    let size: u64 = paths.iter().map(|p| fs::metadata(p).unwrap().len()).sum();
    let mut times = Vec::new();
    for _ in 0..3 {
        let start = Instant::now();
        let status = Command::new(env!("CARGO_BIN_EXE_attnviz"))
            .arg("merge")
            .args(&paths)
            .arg("--out")
            .arg(work.join("merged-1000.json"))
            .arg("-q")
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
        times.push(start.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    println!(
        "merge of 1,000 partial files ({:.1} MB): {:.2} s (median of 3; min {:.2} s)",
        size as f64 / 1e6,
        times[1],
        times[0]
    );
    let _ = fs::remove_dir_all(&work);
}

/// How long the partial file's provenance costs: SHA-256 of MiniLM's config, weights and
/// tokenizer files (page cache warm after the first round).
fn fingerprint() {
    let dir = minilm();
    let files = attnviz::model::source::from_dir(&dir, "all-MiniLM-L6-v2").unwrap();
    let bytes: u64 = files
        .weights
        .iter()
        .chain([&files.config])
        .map(|p| fs::metadata(p).unwrap().len())
        .sum();
    println!("{}", machine());
    for round in 0..5 {
        let start = Instant::now();
        let v = attnviz::corpus::provenance::fingerprint(&files).unwrap();
        let secs = start.elapsed().as_secs_f64();
        println!(
            "round {round}: fingerprint of {:.1} MB in {:.3} s ({:.0} MB/s); weights sha256 {}",
            bytes as f64 / 1e6,
            secs,
            bytes as f64 / 1e6 / secs,
            v.weights[0].sha256
        );
    }
}

fn summary(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&fs::read(dir.join("corpus_stats.json")).unwrap()).unwrap()
}

fn spawn(
    model: &Path,
    input: &Path,
    out: &Path,
    shard: Option<(usize, usize)>,
    threads: usize,
) -> u32 {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_attnviz"));
    cmd.arg("-m")
        .arg(model)
        .arg("--input")
        .arg(input)
        .arg("--out-dir")
        .arg(out)
        .args(["--per-sentence", "none", "-q", "--threads"])
        .arg(threads.to_string())
        .env_remove("RAYON_NUM_THREADS");
    if let Some((k, n)) = shard {
        cmd.arg("--shard").arg(format!("{k}/{n}"));
    }
    // Reaped by `wait` (wait4), which also gives its resource usage.
    #[allow(clippy::zombie_processes)]
    let child = cmd.spawn().unwrap();
    child.id()
}

struct Usage {
    cpu: f64,
    peak_mib: f64,
}

#[cfg(unix)]
fn wait(pid: u32) -> Usage {
    let mut status = 0;
    // SAFETY: waiting for our own child; rusage is plain data.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let r = unsafe { libc::wait4(pid as libc::pid_t, &mut status, 0, &mut usage) };
    assert_eq!(r, pid as libc::pid_t, "wait4");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "attnviz failed"
    );
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Usage {
        cpu: secs(usage.ru_utime) + secs(usage.ru_stime),
        peak_mib: usage.ru_maxrss as f64 / 1024.0,
    }
}

#[cfg(not(unix))]
fn wait(_pid: u32) -> Usage {
    unimplemented!("the shards benchmark measures peak RSS with wait4 (Unix)")
}

fn max_diff(a: &serde_json::Value, b: &serde_json::Value) -> f64 {
    use serde_json::Value;
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => (x.as_f64().unwrap() - y.as_f64().unwrap()).abs(),
        (Value::Array(x), Value::Array(y)) => x
            .iter()
            .zip(y)
            .map(|(x, y)| max_diff(x, y))
            .fold(0.0, f64::max),
        (Value::Object(x), Value::Object(y)) => x
            .iter()
            .map(|(k, v)| max_diff(v, &y[k]))
            .fold(0.0, f64::max),
        _ => 0.0,
    }
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
    let load = fs::read_to_string("/proc/loadavg").unwrap_or_default();
    format!(
        "machine: {cpu}, {cpus} CPUs; load average {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    )
}
