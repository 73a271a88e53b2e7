//! Vision-language models at their real sizes (issue 42, requirement 6): one picture and a
//! 64-token prompt with every layer of the language model captured, on the synthetic
//! Gemma-3-4B- and SmolVLM-256M-shaped pairs (text Q4_K_M + mmproj F16, made by
//! `scripts/make-synthetic-vlm.py` under `.cache/synthetic-vlm/`), beside llama.cpp's
//! multimodal prompt on the same files and threads (`benches/llama_cpp_vlm_anchor.py`:
//! llama-cpp-python built from source, its binding of libmtmd), and, where the shape has a
//! transformers folder (SmolVLM), beside the Python job a user writes today
//! (`benches/vlm_python_job.py`: transformers eager, `output_attentions=True`, a matplotlib
//! overlay) as whole processes, picture and prompt to a PNG figure: the attnviz CLI on the GGUF
//! pair and on the job's own folder. Prints figures; asserts nothing; not run in CI.
//!
//! Run: `cargo bench --bench vlm`. Each measurement is a fresh process, ours and the anchor's
//! alternating round by round. Settings (environment):
//! - `BENCH_SHAPES`: shape names, comma-separated (default `gemma3-4b,smolvlm-256m`; a shape
//!   whose files are missing is skipped with a line saying so);
//! - `BENCH_IMAGE`: the picture (default `.cache/photos/chelsea.png`, from
//!   `scripts/fetch-photos.sh`);
//! - `BENCH_TOKENS=N`: the prompt's text tokens (default 64); `BENCH_ROUNDS=N` (default 3);
//!   `BENCH_THREADS=N`: threads for every side (default 2);
//! - `LLAMA_PYTHON`: an interpreter with `llama_cpp` (default `.cache/venv-llama/bin/python`);
//!   `PYTHON`: one with torch, transformers, Pillow and matplotlib for the Python job (default
//!   `python3`). A side that cannot run prints why and is left out.
//!
//! Figures per shape: the prompt's wall and CPU time (picture file to the last position's
//! logits: decoding, preprocessing, the vision tower and projector, the language model, and on
//! our side the capture of every layer and head), load time, the sequence's length, and peak
//! RSS (`VmHWM`) beside the bound `files + activations + capture + 300 MB`, each term printed.
//! Activations (f32 throughout, as attnviz computes): the larger of the two phases,
//! - the vision tower on one tile: the tiles' pixels, the tower's output for every tile, and
//!   one layer's buffers for one tile (the hidden state, its norm, q, k, v, the attention
//!   output, the feed-forward's hidden layer, and every head's scores `heads × p × p`, p the
//!   patches of a tile);
//! - the language model: its KV cache (`layers × 2 × n × kv_heads × head_dim`), the picture's
//!   projected tokens, and one layer's buffers (`n × (4 hidden + 3 heads·head_dim + 3 ffn)`
//!   plus every head's scores `heads × n × n`), as `benches/gguf_sizes.rs` counts them;
//!
//! and the capture is the returned attention, `layers × heads × n × n` f32. The vision tower's
//! own attention is not captured in such a run (`EncodeOptions::towers` is off).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

#[path = "support/measure.rs"]
mod measure;

use attnviz::model::gguf::GgufFile;
use attnviz::model::Model;
use attnviz::request::RunRequest;
use measure::{cpu_seconds, env_usize, load_average, machine, measure_runs, median, minimum};

const MB: f64 = 1e6;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--prompt") {
        let model = Model::from_gguf(Path::new(&args[i + 1])).unwrap_or_else(|e| panic!("{e}"));
        println!("{}", prompt(&model, args[i + 2].parse().unwrap()));
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--child") {
        child(
            Path::new(&args[i + 1]),
            Path::new(&args[i + 2]),
            Path::new(&args[i + 3]),
            args[i + 4].parse().unwrap(),
        );
        return;
    }
    let threads = env_usize("BENCH_THREADS").unwrap_or(2);
    let tokens = env_usize("BENCH_TOKENS").unwrap_or(64);
    let rounds = env_usize("BENCH_ROUNDS").unwrap_or(3).max(1);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let shapes: Vec<String> = std::env::var("BENCH_SHAPES")
        .unwrap_or_else(|_| "gemma3-4b,smolvlm-256m".into())
        .split(',')
        .map(str::to_string)
        .collect();
    let image = std::env::var_os("BENCH_IMAGE")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join(".cache/photos/chelsea.png"));
    let llama = std::env::var_os("LLAMA_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join(".cache/venv-llama/bin/python"));
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    println!("attnviz vision-language benchmark: one picture and a {tokens}-token prompt, every layer captured");
    println!("picture: {}", image.display());
    println!("machine: {}", machine());
    println!(
        "threads: {threads} (every side); rounds: {rounds}, alternating, each a fresh process"
    );
    println!("load average before: {}\n", load_average());
    if !image.is_file() {
        println!(
            "no picture at {} (scripts/fetch-photos.sh, or set BENCH_IMAGE)",
            image.display()
        );
        return;
    }
    let exe = std::env::current_exe().expect("benchmark executable");
    let dir = root.join(".cache/synthetic-vlm");
    for shape in &shapes {
        let text = dir.join(format!("{shape}.Q4_K_M.gguf"));
        let mmproj = dir.join(format!("mmproj-{shape}.F16.gguf"));
        if !text.is_file() || !mmproj.is_file() {
            println!(
                "{shape}: no {} or {} (scripts/make-synthetic-vlm.py), skipped\n",
                text.display(),
                mmproj.display()
            );
            continue;
        }
        let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len()) as f64;
        println!(
            "{shape}: {} ({:.0} MB) + {} ({:.0} MB)",
            text.display(),
            size(&text) / MB,
            mmproj.display(),
            size(&mmproj) / MB
        );
        let mut ours: Vec<Vec<f64>> = Vec::new();
        let mut theirs: Vec<Vec<f64>> = Vec::new();
        let mut prompt = None;
        let (mut ours_failed, mut anchor_failed) = (false, false);
        for _ in 0..rounds {
            if !ours_failed {
                let out = Command::new(&exe)
                    .arg("--child")
                    .args([&text, &mmproj, &image])
                    .arg(tokens.to_string())
                    .env("RAYON_NUM_THREADS", threads.to_string())
                    .output()
                    .expect("running a round");
                if out.status.success() {
                    let stdout = String::from_utf8_lossy(&out.stdout);
                    let mut lines = stdout.lines();
                    prompt = lines.next().map(str::to_string);
                    ours.push(numbers(lines.last().unwrap_or("")));
                } else {
                    println!("  attnviz failed: {}", last_line(&out.stderr));
                    ours_failed = true;
                }
            }
            if anchor_failed {
                if ours_failed {
                    break;
                }
                continue;
            }
            let out = Command::new(&llama)
                .arg(root.join("benches/llama_cpp_vlm_anchor.py"))
                .args([&text, &mmproj, &image])
                .args([tokens.to_string(), threads.to_string()])
                .env("OMP_NUM_THREADS", threads.to_string())
                .output();
            match out {
                Ok(o) if o.status.success() => {
                    let s = String::from_utf8_lossy(&o.stdout);
                    theirs.push(numbers(s.lines().last().unwrap_or("")));
                }
                Ok(o) => {
                    println!("  llama.cpp anchor failed: {}", last_line(&o.stderr));
                    anchor_failed = true;
                }
                Err(e) => {
                    println!("  llama.cpp anchor not run ({}: {e})", llama.display());
                    anchor_failed = true;
                }
            }
        }
        report(&ours, &theirs);
        let folder = dir.join(format!("{shape}-hf"));
        if prompt.is_none() {
            // The text model alone cuts the prompt when the pair cannot be read.
            prompt = Command::new(&exe)
                .arg("--prompt")
                .arg(&text)
                .arg(tokens.to_string())
                .output()
                .ok()
                .filter(|o| o.status.success())
                .and_then(|o| {
                    let text = String::from_utf8_lossy(&o.stdout).trim_end().to_string();
                    (!text.is_empty()).then_some(text)
                });
        }
        if folder.is_dir() {
            end_to_end(
                &[&text, &mmproj],
                &folder,
                &image,
                prompt.as_deref(),
                tokens,
                threads,
                rounds,
                &python,
                root,
            );
        }
        println!();
    }
    println!("load average after: {}", load_average());
}

/// What a failed child said: a panic's message, else its last line.
fn last_line(stderr: &[u8]) -> String {
    let err = String::from_utf8_lossy(stderr);
    let lines: Vec<&str> = err.trim().lines().collect();
    let panic = lines.iter().position(|l| l.contains("panicked at"));
    match panic.and_then(|i| lines.get(i + 1)).or(lines.last()) {
        Some(line) => line.to_string(),
        None => "(nothing on stderr)".to_string(),
    }
}

fn numbers(line: &str) -> Vec<f64> {
    line.split_whitespace()
        .map(|x| x.parse().unwrap_or(f64::NAN))
        .collect()
}

fn column(rows: &[Vec<f64>], i: usize) -> Vec<f64> {
    rows.iter().filter_map(|r| r.get(i).copied()).collect()
}

/// "median (min)" of column `i`, in seconds.
fn secs(rows: &[Vec<f64>], i: usize) -> String {
    let c = column(rows, i);
    format!("{:.2} ({:.2}) s", median(&c), minimum(&c))
}

/// Ours: load, prompt wall, prompt CPU, tokens, peak, files, activations, capture, bound.
/// Theirs: load, prompt wall, prompt CPU, tokens, peak.
fn report(ours: &[Vec<f64>], theirs: &[Vec<f64>]) {
    if ours.is_empty() {
        if !theirs.is_empty() {
            println!(
                "  llama.cpp alone: {} tokens; load {}; prompt wall {}, CPU {}; peak RSS {:.0} MB",
                median(&column(theirs, 3)),
                secs(theirs, 0),
                secs(theirs, 1),
                secs(theirs, 2),
                median(&column(theirs, 4)) / MB
            );
        }
        return;
    }
    let m = |rows: &[Vec<f64>], i| median(&column(rows, i));
    let has = !theirs.is_empty();
    println!(
        "  sequence: {} tokens{}",
        m(ours, 3),
        if has {
            format!(" (llama.cpp: {})", m(theirs, 3))
        } else {
            String::new()
        }
    );
    println!(
        "  load: {}{}",
        secs(ours, 0),
        if has {
            format!("; llama.cpp {}", secs(theirs, 0))
        } else {
            String::new()
        }
    );
    for (label, i) in [("wall", 1), ("CPU ", 2)] {
        if has {
            println!(
                "  prompt {label}: {}; llama.cpp {}; ratio ×{:.2}",
                secs(ours, i),
                secs(theirs, i),
                m(ours, i) / m(theirs, i)
            );
        } else {
            println!("  prompt {label}: {}", secs(ours, i));
        }
    }
    println!(
        "  peak RSS: {:.0} MB, bound {:.0} MB = files {:.0} + activations {:.0} + capture {:.0} + 300{}",
        m(ours, 4) / MB,
        m(ours, 8) / MB,
        m(ours, 5) / MB,
        m(ours, 6) / MB,
        m(ours, 7) / MB,
        if has {
            format!("; llama.cpp {:.0} MB", m(theirs, 4) / MB)
        } else {
            String::new()
        }
    );
}

/// The whole CLI run beside the Python job, as processes: picture and prompt to a PNG figure.
#[allow(clippy::too_many_arguments)]
fn end_to_end(
    files: &[&Path; 2],
    folder: &Path,
    image: &Path,
    prompt: Option<&str>,
    tokens: usize,
    threads: usize,
    rounds: usize,
    python: &str,
    root: &Path,
) {
    let out = std::env::temp_dir().join(format!("attnviz-vlm-{}", std::process::id()));
    std::fs::create_dir_all(&out).expect("temporary folder");
    let mut ours_cmd = Command::new(env!("CARGO_BIN_EXE_attnviz"));
    ours_cmd
        .arg("-m")
        .arg(files[0])
        .arg("--mmproj")
        .arg(files[1])
        .arg("--image")
        .arg(image)
        .arg(prompt.unwrap_or_default())
        .arg("--png")
        .arg(out.join("ours.png"))
        .arg("--threads")
        .arg(threads.to_string());
    let mut job_cmd = Command::new(python);
    job_cmd
        .arg(root.join("benches/vlm_python_job.py"))
        .arg(folder)
        .arg(image)
        .arg(out.join("job.png"))
        .arg(threads.to_string())
        .arg(tokens.to_string())
        .env("OMP_NUM_THREADS", threads.to_string());
    // attnviz on the Python job's own folder too (the same weights, f32).
    let mut folder_cmd = Command::new(env!("CARGO_BIN_EXE_attnviz"));
    folder_cmd
        .arg("-m")
        .arg(folder)
        .arg("--image")
        .arg(image)
        .arg(prompt.unwrap_or_default())
        .arg("--png")
        .arg(out.join("folder.png"))
        .arg("--threads")
        .arg(threads.to_string());
    let (mut ours, mut job, mut on_folder) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        // Without a prompt (not even the text model could be read) attnviz is not run.
        if prompt.is_some() {
            ours.push(measure_runs(&mut ours_cmd, 1, Duration::from_millis(300)));
            on_folder.push(measure_runs(&mut folder_cmd, 1, Duration::from_millis(300)));
        }
        job.push(measure_runs(&mut job_cmd, 1, Duration::from_millis(300)));
    }
    let flat = |runs: &[measure::Runs], f: fn(&measure::Runs) -> &Vec<f64>| -> Vec<f64> {
        runs.iter().flat_map(|r| f(r).iter().copied()).collect()
    };
    let (ow, jw) = (flat(&ours, |r| &r.walls), flat(&job, |r| &r.walls));
    let (oc, jc) = (flat(&ours, |r| &r.cpus), flat(&job, |r| &r.cpus));
    let (orss, jrss) = (flat(&ours, |r| &r.peaks_kib), flat(&job, |r| &r.peaks_kib));
    println!("  end to end, picture and prompt → PNG figure (whole processes):");
    let line = |label: &str, w: &[f64], c: &[f64], rss: &[f64]| {
        if w.is_empty() {
            println!("    {label}: did not run");
        } else {
            println!(
                "    {label}: wall {:.2} ({:.2}) s, CPU {:.2} ({:.2}) s, peak {:.0} MiB",
                median(w),
                minimum(w),
                median(c),
                minimum(c),
                median(rss) / 1024.0
            );
        }
    };
    line("attnviz CLI (GGUF pair)", &ow, &oc, &orss);
    let (fw, fc, frss) = (
        flat(&on_folder, |r| &r.walls),
        flat(&on_folder, |r| &r.cpus),
        flat(&on_folder, |r| &r.peaks_kib),
    );
    line("attnviz CLI (transformers folder)", &fw, &fc, &frss);
    line("Python job (transformers folder)", &jw, &jc, &jrss);
    for (label, w, c) in [("GGUF pair", &ow, &oc), ("folder", &fw, &fc)] {
        if !w.is_empty() && !jw.is_empty() {
            println!(
                "    speed-up of attnviz ({label}) over the job: wall ×{:.1}, CPU ×{:.1}",
                median(&jw) / median(w),
                median(&jc) / median(c)
            );
        }
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// One round: load the pair, run the picture and the prompt with every layer captured; prints
/// the prompt on its first line and the figures on its last.
fn child(text: &Path, mmproj: &Path, image: &Path, tokens: usize) {
    let start = Instant::now();
    let model = Model::from_gguf_pair(text, Some(mmproj), None).unwrap_or_else(|e| panic!("{e}"));
    let load = start.elapsed().as_secs_f64();
    let words = prompt(&model, tokens);
    println!("{words}");
    let request = RunRequest {
        images: vec![image.to_path_buf().into()],
        ..RunRequest::new(words.clone())
    };
    let (w0, c0) = (Instant::now(), cpu_seconds());
    let run = request
        .run(&model, &attnviz::progress::Silent)
        .unwrap_or_else(|e| panic!("{e}"));
    let (wall, cpu) = (w0.elapsed().as_secs_f64(), cpu_seconds() - c0);
    let attention = run.set.primary();
    let n = attention.tokens().len();
    let capture = std::mem::size_of_val(attention.weights()) as f64;
    drop(run);
    let arch = model.architecture();
    let files =
        (std::fs::metadata(text).unwrap().len() + std::fs::metadata(mmproj).unwrap().len()) as f64;
    let f = 4.0;
    // The language model's phase.
    let ffn = GgufFile::open(text)
        .and_then(|g| g.decoder_params())
        .map_or(4 * arch.hidden_size, |p| p.intermediate_size) as f64;
    let (h, heads, hd, nf) = (
        arch.hidden_size as f64,
        arch.heads as f64,
        arch.head_dim as f64,
        n as f64,
    );
    let kv = arch.layers as f64 * 2.0 * nf * arch.kv_heads as f64 * hd * f;
    let layer = nf * (4.0 * h + 3.0 * heads * hd + 3.0 * ffn) * f + heads * nf * nf * f;
    // The vision tower's phase, from the projector file's sizes.
    let g = GgufFile::open(mmproj).expect("projector file");
    let key = |k: &str| g.get_u64(k).ok().flatten().unwrap_or(0) as f64;
    let (side, patch, d, vf, vh) = (
        key("clip.vision.image_size"),
        key("clip.vision.patch_size"),
        key("clip.vision.embedding_length"),
        key("clip.vision.feed_forward_length"),
        key("clip.vision.attention.head_count"),
    );
    let scale = match key("clip.vision.projector.scale_factor") {
        0.0 => 4.0,
        s => s,
    };
    let p = (side / patch).powi(2);
    let per_tile = p / (scale * scale);
    let image_tokens = (nf - tokens as f64).max(per_tile);
    let tiles = (image_tokens / per_tile).floor().max(1.0);
    let picture = tiles * per_tile * h * f;
    let tower =
        tiles * 3.0 * side * side * f + tiles * p * d * f + p * (7.0 * d + vf) * f + vh * p * p * f;
    let activations = tower.max(kv + layer + picture);
    let bound = files + activations + capture + 300e6;
    println!(
        "{load} {wall} {cpu} {n} {} {files} {activations} {capture} {bound}",
        peak_rss()
    );
}

/// Text that the model's tokenizer cuts into `tokens` tokens: common words, one token each
/// (the rule of `benches/gguf_sizes.rs` and of the anchors).
fn prompt(model: &Model, tokens: usize) -> String {
    const WORDS: [&str; 16] = [
        "the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be", "by",
        "on", "not",
    ];
    let mut text = String::new();
    let mut i = 0;
    loop {
        let next = if text.is_empty() {
            WORDS[0].to_string()
        } else {
            format!("{text} {}", WORDS[(i * 7 + i / 16) % 16])
        };
        let n = model.tokenizer().encode_plain(&next).unwrap().len();
        if n > tokens {
            return text;
        }
        text = next;
        i += 1;
        if n == tokens {
            return text;
        }
    }
}

/// This process's peak resident set (`VmHWM`), in bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}
