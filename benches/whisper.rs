//! Whisper at work (issue 44, requirement 7): Whisper tiny.en on a 30-second recording, the
//! transcript written and every layer's attention captured (the encoder's, the decoder's and the
//! cross-attention), as whole processes from the sound file to a figure, beside
//!
//! - the Python job a user writes today (`benches/whisper_python_job.py`: transformers eager,
//!   `generate(output_attentions=True)`, the alignment heads' cross-attention drawn over the
//!   spectrogram with matplotlib), on the same weights in transformers' layout;
//! - CTranslate2 itself (`benches/whisper_ct2_anchor.py`, the anchor only: `pip install
//!   ctranslate2`), transcribing the same file from the same `model.bin` without attention.
//!
//! Prints figures; asserts nothing; not run in CI. Run: `cargo bench --bench whisper`. Each
//! measurement is a fresh process, the three sides alternating round by round, each given the
//! same threads. Settings (environment):
//! - `BENCH_MODEL`: the transformers folder attnviz and the Python job read (default
//!   `.cache/models/whisper-tiny.en-hf`, from `tests/reference/ct2_to_transformers.py`);
//! - `BENCH_CT2`: the CTranslate2 folder (default `.cache/models/whisper-tiny.en`, from
//!   `scripts/fetch-whisper-tiny.sh`); attnviz is timed on it too when it reads it;
//! - `BENCH_AUDIO`: the recording (default: `.cache/audio/beckett.wav`, 9.97 s, said three
//!   times over into a 29.9-second file under the temporary folder);
//! - `BENCH_ROUNDS=N` (default 3), `BENCH_THREADS=N` (default 2);
//! - `PYTHON`: an interpreter with torch, transformers and matplotlib (default `python3`);
//!   `CT2_PYTHON`: one with ctranslate2 and transformers (default `$PYTHON`). A side that cannot
//!   run says why and is left out.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

#[path = "support/measure.rs"]
mod measure;

use measure::{env_usize, load_average, machine, measure_runs, median, minimum, Runs};

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let threads = env_usize("BENCH_THREADS").unwrap_or(2);
    let rounds = env_usize("BENCH_ROUNDS").unwrap_or(3).max(1);
    let path = |var: &str, default: &str| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join(default))
    };
    let folder = path("BENCH_MODEL", ".cache/models/whisper-tiny.en-hf");
    let ct2 = path("BENCH_CT2", ".cache/models/whisper-tiny.en");
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let ct2_python = std::env::var("CT2_PYTHON").unwrap_or_else(|_| python.clone());
    let out = std::env::temp_dir().join(format!("attnviz-whisper-{}", std::process::id()));
    std::fs::create_dir_all(&out).expect("temporary folder");
    let audio = match std::env::var_os("BENCH_AUDIO") {
        Some(p) => PathBuf::from(p),
        None => {
            let beckett = root.join(".cache/audio/beckett.wav");
            if !beckett.is_file() {
                println!("no {} (scripts/fetch-beckett.sh)", beckett.display());
                return;
            }
            let wav = out.join("beckett-x3.wav");
            three_times(&beckett, &wav);
            wav
        }
    };
    println!("attnviz Whisper benchmark: a recording transcribed, every layer captured");
    println!("recording: {}", audio.display());
    println!(
        "model: {} (CTranslate2: {})",
        folder.display(),
        ct2.display()
    );
    println!("machine: {}", machine());
    println!(
        "threads: {threads} (every side); rounds: {rounds}, alternating, each a fresh process"
    );
    println!("load average before: {}\n", load_average());
    if !folder.join("model.safetensors").is_file() {
        println!(
            "no {} (tests/reference/ct2_to_transformers.py tiny.en)",
            folder.display()
        );
        return;
    }

    let attnviz = |model: &Path, png: &str| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_attnviz"));
        cmd.arg("-m")
            .arg(model)
            .arg("--audio")
            .arg(&audio)
            .arg("--png")
            .arg(out.join(png))
            .arg("--threads")
            .arg(threads.to_string());
        cmd
    };
    let mut sides: Vec<(&str, Command)> = vec![("attnviz CLI (transformers folder)", {
        attnviz(&folder, "ours.png")
    })];
    if ct2.join("model.bin").is_file() {
        sides.push((
            "attnviz CLI (CTranslate2 folder)",
            attnviz(&ct2, "ours-ct2.png"),
        ));
    }
    let mut job = Command::new(&python);
    job.arg(root.join("benches/whisper_python_job.py"))
        .arg(&folder)
        .arg(&audio)
        .arg(out.join("job.png"))
        .arg(threads.to_string())
        .env("OMP_NUM_THREADS", threads.to_string());
    sides.push(("Python job (transformers eager)", job));
    let mut anchor = Command::new(&ct2_python);
    anchor
        .arg(root.join("benches/whisper_ct2_anchor.py"))
        .arg(&ct2)
        .arg(&audio)
        .arg(threads.to_string())
        .env("OMP_NUM_THREADS", threads.to_string());
    sides.push(("CTranslate2 (no attention)", anchor));

    let mut runs: Vec<Vec<Runs>> = sides.iter().map(|_| Vec::new()).collect();
    let mut failed = vec![false; sides.len()];
    for _ in 0..rounds {
        for (i, (label, cmd)) in sides.iter_mut().enumerate() {
            if failed[i] {
                continue;
            }
            let r = measure_runs(cmd, 1, Duration::from_millis(300));
            if r.walls.is_empty() {
                println!("  {label}: did not run (status {:?})", r.status);
                failed[i] = true;
            }
            runs[i].push(r);
        }
    }
    let flat = |rs: &[Runs], f: fn(&Runs) -> &Vec<f64>| -> Vec<f64> {
        rs.iter().flat_map(|r| f(r).iter().copied()).collect()
    };
    let walls: Vec<Vec<f64>> = runs.iter().map(|r| flat(r, |r| &r.walls)).collect();
    let cpus: Vec<Vec<f64>> = runs.iter().map(|r| flat(r, |r| &r.cpus)).collect();
    println!("whole processes, recording → transcript (and figure): median (min)");
    for (i, (label, _)) in sides.iter().enumerate() {
        if walls[i].is_empty() {
            continue;
        }
        let rss = flat(&runs[i], |r| &r.peaks_kib);
        println!(
            "  {label}: wall {:.2} ({:.2}) s, CPU {:.2} ({:.2}) s, peak {:.0} MiB",
            median(&walls[i]),
            minimum(&walls[i]),
            median(&cpus[i]),
            minimum(&cpus[i]),
            median(&rss) / 1024.0
        );
    }
    let (job, anchor) = (sides.len() - 2, sides.len() - 1);
    for i in 0..job {
        let label = sides[i].0;
        if walls[i].is_empty() {
            continue;
        }
        if !walls[job].is_empty() {
            println!(
                "  {label} vs the Python job: ×{:.1} faster in wall time, ×{:.1} in CPU time",
                median(&walls[job]) / median(&walls[i]),
                median(&cpus[job]) / median(&cpus[i])
            );
            // Each round's two processes ran back to back, under the same load: their ratio
            // drifts less with the machine than the medians' ratio does.
            let mut paired: Vec<f64> = walls[job]
                .iter()
                .zip(&walls[i])
                .map(|(j, a)| j / a)
                .collect();
            paired.sort_by(f64::total_cmp);
            if let (Some(lo), Some(hi)) = (paired.first(), paired.last()) {
                println!(
                    "    round by round, wall: median ×{:.1}, from ×{lo:.1} to ×{hi:.1} ({} rounds)",
                    median(&paired),
                    paired.len()
                );
            }
        }
        if !walls[anchor].is_empty() {
            println!(
                "  {label} vs CTranslate2: ×{:.2} its wall time, ×{:.2} its CPU time",
                median(&walls[i]) / median(&walls[anchor]),
                median(&cpus[i]) / median(&cpus[anchor])
            );
        }
    }
    println!("load average after: {}", load_average());
    let _ = std::fs::remove_dir_all(&out);
}

/// `wav` said three times over, written as 16-bit PCM at 16 kHz (the rate Whisper reads, so no
/// side resamples).
fn three_times(wav: &Path, to: &Path) {
    let sound = attnviz::model::audio::load(wav, &attnviz::model::audio::AudioLimits::default())
        .unwrap_or_else(|e| panic!("{e}"));
    let samples: Vec<i16> = std::iter::repeat_n(&sound.samples, 3)
        .flatten()
        .map(|&s| (s.clamp(-1.0, 1.0) * 32767.0).round() as i16)
        .collect();
    let data = (samples.len() * 2) as u32;
    let mut bytes = Vec::with_capacity(44 + data as usize);
    bytes.extend_from_slice(b"RIFF");
    bytes.extend_from_slice(&(36 + data).to_le_bytes());
    bytes.extend_from_slice(b"WAVEfmt ");
    // PCM, mono, 16 kHz, 32000 bytes a second, 2-byte frames, 16 bits.
    for field in [16u32, 1 | 1 << 16, 16_000, 32_000, 2 | 16 << 16] {
        bytes.extend_from_slice(&field.to_le_bytes());
    }
    bytes.extend_from_slice(b"data");
    bytes.extend_from_slice(&data.to_le_bytes());
    for s in samples {
        bytes.extend_from_slice(&s.to_le_bytes());
    }
    std::fs::write(to, bytes).expect("writing the recording");
}
