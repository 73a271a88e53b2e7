//! Vision benchmark (issue 23, requirement 6), on a ViT-B/16 at 224×224 (12 layers × 12 heads,
//! 197 tokens; random weights of `google/vit-base-patch16-224`'s shapes, made by
//! `benches/vision_anchor.py --make`, since the hub cannot be reached here), beside the Python a
//! user writes today:
//!
//! 1. end to end: `attnviz -m DIR --image PHOTO --png OUT.png` against `benches/vision_job.py`
//!    (image processor, `AutoModel` with eager attention and `output_attentions=True`, the class
//!    token's mean-of-heads map over the picture with matplotlib), each a whole process: wall
//!    time, CPU time and peak memory (goal: at least 20× faster);
//! 2. in this process: preprocess + forward + capture of every head (`RunRequest` with an
//!    image), against the anchor's image processor + forward with `output_attentions=True`
//!    (goal: no slower than transformers).
//!
//! Prints figures; asserts nothing. Run: `cargo bench --bench vision`. Settings (environment):
//! - `BENCH_THREADS=N`: thread count for us and for torch (default: `attnviz::threads`' choice);
//! - `BENCH_QUICK=1`: fewer repetitions;
//! - `BENCH_IMAGE`: the photo (default: the 512×512 `tower.jpg` that the `jpeg-decoder` crate
//!   ships in the cargo registry);
//! - `PYTHON`: an interpreter with torch, transformers, Pillow and matplotlib (default `python3`;
//!   the anchor's parts are skipped without them).
//!
//! The machine is shared and noisy: our timings and the anchor's alternate round by round, and
//! each figure is the median (minimum) over its repetitions, with CPU time (user + system, every
//! thread) beside the wall time.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use attnviz::model::Model;
use attnviz::request::RunRequest;

#[path = "support/measure.rs"]
mod measure;

use measure::{cpu_seconds, env_usize, measure_runs, median, minimum, ratio, table_row, Anchor};

/// The speed-up of `ours` over `theirs` (theirs / ours), median and minimum.
fn speedup(ours: &[f64], theirs: &[f64]) -> String {
    if ours.is_empty() || theirs.is_empty() {
        return "-".into();
    }
    format!(
        "{:.1}× / {:.1}×",
        median(theirs) / median(ours),
        minimum(theirs) / minimum(ours)
    )
}

/// The photo: `BENCH_IMAGE`, else `tower.jpg` from the jpeg-decoder crate's sources.
fn photo() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("BENCH_IMAGE") {
        return Some(PathBuf::from(p));
    }
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))?;
    let src = std::fs::read_dir(home.join("registry/src")).ok()?;
    src.flatten()
        .map(|index| index.path().join("jpeg-decoder-0.3.2/benches/tower.jpg"))
        .find(|p| p.is_file())
}

fn main() {
    let threads = attnviz::threads::configure(env_usize("BENCH_THREADS"));
    let quick = std::env::var_os("BENCH_QUICK").is_some();
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let dir = manifest.join(".cache/bench/vit-b16");
    let Some(image) = photo() else {
        println!("vision benchmark: no photo (set BENCH_IMAGE to a JPEG or PNG)");
        return;
    };
    if !dir.join("model.safetensors").is_file() {
        println!("making a random ViT-B/16 in {} …", dir.display());
        let made = Command::new(&python)
            .arg(manifest.join("benches/vision_anchor.py"))
            .arg("--make")
            .arg(&dir)
            .status();
        if !matches!(made, Ok(s) if s.success()) {
            println!("vision benchmark: could not make the model ({made:?}); it needs torch and transformers");
            return;
        }
    }

    println!(
        "attnviz vision benchmark: ViT-B/16 at 224×224 (12 layers × 12 heads, 197 tokens){}",
        if quick { " (quick)" } else { "" }
    );
    println!("photo: {}", image.display());
    println!("machine: {}", measure::machine());
    println!(
        "threads: {threads} (ours: RAYON_NUM_THREADS; PyTorch: torch.set_num_threads({threads}))"
    );
    println!("load average before: {}", measure::load_average());
    println!("figures: median (min) ×runs; lower is better\n");

    // ── end to end ── (whole processes, alternating)
    let out = std::env::temp_dir().join(format!("attnviz-vision-{}", std::process::id()));
    std::fs::create_dir_all(&out).expect("temporary folder");
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_attnviz"));
    let mut ours_cmd = Command::new(&exe);
    ours_cmd
        .arg("-m")
        .arg(&dir)
        .arg("--image")
        .arg(&image)
        .arg("--png")
        .arg(out.join("ours.png"))
        .arg("--threads")
        .arg(threads.to_string());
    let mut job_cmd = Command::new(&python);
    job_cmd
        .arg(manifest.join("benches/vision_job.py"))
        .arg(&dir)
        .arg(&image)
        .arg(out.join("job.png"))
        .arg(threads.to_string())
        .env("OMP_NUM_THREADS", threads.to_string());
    let (mut ours, mut job) = (Vec::new(), Vec::new());
    let rounds = if quick { 2 } else { 5 };
    for _ in 0..rounds {
        ours.push(measure_runs(&mut ours_cmd, 2, Duration::from_millis(300)));
        job.push(measure_runs(&mut job_cmd, 1, Duration::from_millis(300)));
    }
    let flat = |runs: &[measure::Runs], f: fn(&measure::Runs) -> &Vec<f64>| -> Vec<f64> {
        runs.iter().flat_map(|r| f(r).iter().copied()).collect()
    };
    let (our_wall, job_wall) = (flat(&ours, |r| &r.walls), flat(&job, |r| &r.walls));
    let (our_cpu, job_cpu) = (flat(&ours, |r| &r.cpus), flat(&job, |r| &r.cpus));
    let (our_rss, job_rss) = (flat(&ours, |r| &r.peaks_kib), flat(&job, |r| &r.peaks_kib));
    let mib = |xs: &[f64]| {
        if xs.is_empty() {
            "n/a".to_string()
        } else {
            format!("{:.0} MiB", median(xs) / 1024.0)
        }
    };
    println!("end to end, photo → PNG figure (whole process)");
    println!(
        "{:>6} {:>24} {:>24} {:>16}",
        "", "attnviz --png", "Python job", "speed-up med/min"
    );
    table_row("wall", &our_wall, &job_wall, &speedup(&our_wall, &job_wall));
    table_row("CPU", &our_cpu, &job_cpu, &speedup(&our_cpu, &job_cpu));
    println!(
        "{:>6} {:>24} {:>24}\n",
        "peak",
        mib(&our_rss),
        mib(&job_rss)
    );

    // ── in process: preprocess + forward + capture ──
    let mut anchor = Anchor::spawn(&python, &manifest.join("benches/vision_anchor.py"), threads);
    match &anchor {
        Ok(a) => println!(
            "PyTorch anchor: {}, eager attention, output_attentions=True",
            a.version
        ),
        Err(why) => println!("PyTorch anchor: n/a ({why})"),
    }
    let start = Instant::now();
    let model = Model::from_dir(&dir).expect("loading the ViT");
    let our_load = start.elapsed().as_secs_f64();
    let their_load = anchor
        .as_mut()
        .map_err(|e| e.clone())
        .and_then(|a| a.call(&format!("load {}", dir.display())))
        .and_then(|v| v["load_s"].as_f64().ok_or_else(|| format!("anchor: {v}")));
    println!(
        "load: ours {:.0} ms; transformers from_pretrained {}\n",
        our_load * 1e3,
        their_load
            .as_ref()
            .map_or_else(|e| format!("n/a ({e})"), |t| format!("{:.0} ms", t * 1e3))
    );
    if let (Err(e), Ok(a)) = (&their_load, anchor.as_mut()) {
        a.quit();
        anchor = Err(e.clone());
    }

    let request = RunRequest {
        images: vec![image.clone().into()],
        ..RunRequest::new("")
    };
    let run_once = || {
        let run = request
            .run(&model, &attnviz::progress::Silent)
            .expect("image run");
        std::hint::black_box(&run);
    };
    run_once();
    if let Ok(a) = anchor.as_mut() {
        let _ = a.call(&format!("forward {} 1", image.display()));
    }
    let (rounds, reps) = if quick { (2, 2) } else { (5, 4) };
    let (mut ours, mut our_cpu) = (Vec::new(), Vec::new());
    let (mut theirs, mut their_cpu) = (Vec::new(), Vec::new());
    let mut anchor_error = None;
    for _ in 0..rounds {
        for _ in 0..reps {
            let (start, start_cpu) = (Instant::now(), cpu_seconds());
            run_once();
            ours.push(start.elapsed().as_secs_f64());
            our_cpu.push(cpu_seconds() - start_cpu);
        }
        if let Ok(a) = anchor.as_mut() {
            match a.call(&format!("forward {} {reps}", image.display())) {
                Ok(v) => match Anchor::times(&v) {
                    Ok(t) => {
                        theirs.extend(t);
                        their_cpu.extend(Anchor::cpu(&v));
                    }
                    Err(e) => anchor_error = Some(e),
                },
                Err(e) => anchor_error = Some(e),
            }
        }
    }
    if let Some(e) = anchor_error {
        println!("  anchor: {e}");
    }
    println!("decode + preprocess + forward + capture of all 144 heads, in process");
    println!(
        "{:>6} {:>24} {:>24} {:>13}",
        "", "ours", "PyTorch eager", "ratio med/min"
    );
    table_row("wall", &ours, &theirs, &ratio(&ours, &theirs));
    table_row("CPU", &our_cpu, &their_cpu, &ratio(&our_cpu, &their_cpu));
    println!("\nload average after: {}", measure::load_average());
    println!("figures written to {}", out.display());
    if let Ok(a) = anchor.as_mut() {
        a.quit();
    }
}
