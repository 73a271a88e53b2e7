//! Load and forward + capture times of one model, as wall time and as this process's CPU time,
//! one line per run, for comparing two builds of attnviz on a shared, noisy machine.
//!
//!     cargo bench --bench forward_cpu -- DIR [LOADS [TOKENS:REPS ...]]
//!
//! prints `load WALL_MS CPU_MS` per load of `DIR` (weights and tokenizer; the first is what a
//! CLI run pays) and `fwd TOKENS WALL_MS CPU_MS` per forward pass (after one untimed warm-up per
//! size). Defaults: all-MiniLM-L6-v2 (`ATTNVIZ_MINILM_DIR` or `.cache/models`), 1 load,
//! `12:10 128:4 512:2`. `benches/compare_builds.py` runs two builds of this file alternately,
//! process by process, and tabulates them: when other work shares the cores, wall times swing
//! by 2–10× while one process's CPU time moves by a few per cent (single-threaded, it has no
//! spin-waiting to count), so CPU time is the figure to compare there. Asserts nothing.
//!
//! It uses only `Model::from_dir` and `Model::forward`, so the same file builds against older
//! revisions too (copy it, with its `[[bench]]` entry, into a worktree of the other revision).

use std::path::PathBuf;
use std::time::Instant;

use attnviz::model::Model;

/// User + system CPU time of this process so far, in milliseconds.
fn cpu_ms() -> f64 {
    // SAFETY: rusage is plain old data; all-zero is a valid value for getrusage to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid, writable rusage.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    assert_eq!(rc, 0, "getrusage");
    let ms = |t: libc::timeval| t.tv_sec as f64 * 1e3 + t.tv_usec as f64 / 1e3;
    ms(usage.ru_utime) + ms(usage.ru_stime)
}

/// The ids the engine bench uses: [CLS], 1000 + (37·i mod 20000) …, [SEP].
fn token_ids(n: usize) -> Vec<u32> {
    (0..n)
        .map(|i| match i {
            0 => 101,
            i if i == n - 1 => 102,
            i => 1000 + (37 * i as u32) % 20000,
        })
        .collect()
}

fn main() {
    // `cargo bench` passes `--bench`; everything else is ours.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let dir = args.first().map(PathBuf::from).unwrap_or_else(|| {
        std::env::var_os("ATTNVIZ_MINILM_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".cache/models/all-MiniLM-L6-v2")
            })
    });
    if !dir.join("config.json").is_file() {
        println!(
            "forward_cpu: no model at {} (give a folder, or run scripts/fetch-minilm.sh)",
            dir.display()
        );
        return;
    }
    let loads: usize = args.get(1).map_or(1, |a| a.parse().expect("LOADS"));
    let default_sizes = ["12:10", "128:4", "512:2"].map(String::from);
    let sizes = if args.len() > 2 {
        &args[2..]
    } else {
        &default_sizes[..]
    };
    attnviz::threads::configure(None);

    let mut model = None;
    for _ in 0..loads.max(1) {
        let (wall, cpu) = (Instant::now(), cpu_ms());
        let m = Model::from_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        println!(
            "load {:.2} {:.2}",
            wall.elapsed().as_secs_f64() * 1e3,
            cpu_ms() - cpu
        );
        model = Some(m);
    }
    let model = model.expect("one load");
    for spec in sizes {
        let (n, reps) = spec.split_once(':').expect("TOKENS:REPS");
        let (n, reps): (usize, usize) = (n.parse().expect("TOKENS"), reps.parse().expect("REPS"));
        let n = n.clamp(2, model.max_positions());
        let ids = token_ids(n);
        let types = vec![0u32; n];
        model.forward(&ids, &types, false).expect("forward");
        for _ in 0..reps {
            let (wall, cpu) = (Instant::now(), cpu_ms());
            let out = model.forward(&ids, &types, false).expect("forward");
            std::hint::black_box(&out);
            drop(out);
            println!(
                "fwd {n} {:.3} {:.3}",
                wall.elapsed().as_secs_f64() * 1e3,
                cpu_ms() - cpu
            );
        }
    }
}
