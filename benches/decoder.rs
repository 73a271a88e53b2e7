//! Decoder benchmark (issue 10, requirement 9), on the real SmolLM2-135M-Instruct (Q4_1 GGUF, 30
//! layers, 9 query heads over 3 key/value heads), beside transformers loading the same file:
//!
//! 1. end to end: `attnviz --model SmolLM2.gguf "<short prompt>"` (load and dequantise, tokenise,
//!    forward, terminal view), wall time and peak memory of the process;
//! 2. model load in this process (ours) and `from_pretrained(gguf_file=…)` (transformers);
//! 3. forward + capture of every layer's attention at 128 and 512 tokens, against transformers'
//!    base model with eager attention and `output_attentions=True`;
//! 4. greedy generation of 32 tokens with a KV cache, against transformers' `generate`
//!    (`do_sample=False`, `num_beams=1`), checking both produce the same tokens.
//!
//! Prints figures; asserts nothing. Run: `cargo bench --bench decoder`. Settings (environment):
//! - `BENCH_THREADS=N`: thread count for us and for torch (default: `attnviz::threads`' choice);
//! - `BENCH_QUICK=1`: fewer repetitions;
//! - `ATTNVIZ_SMOLLM2_DIR`: the model (default `.cache/models/smollm2`; `scripts/fetch-smollm2.sh`);
//! - `PYTHON`: an interpreter with torch, transformers and gguf for the anchor
//!   (`benches/decoder_anchor.py`; default `python3`, skipped without them).
//!
//! The machine is shared and noisy: our timings and the anchor's alternate round by round in
//! one run, and each figure is the median (minimum) over its repetitions. Beside the wall time,
//! forward and generation also print each side's CPU time over the same calls (user + system,
//! every thread, from `getrusage`): the work done, which other processes' load changes far less
//! than the wall time.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use attnviz::model::Model;

#[path = "support/measure.rs"]
mod measure;
#[path = "../tests/suite/support/models/smollm2.rs"]
mod smollm2;

use measure::{cpu_seconds, env_usize, fmt_stats, measure_runs, ratio, table_row, Anchor};

/// The end-to-end prompt.
const PROMPT: &str = "The capital of France is";
/// The generation prompt: SmolLM2 writes more than 32 tokens of code after it without an EOS.
const CODE_PROMPT: &str = "def fibonacci(n):";
const GENERATE: usize = 32;

/// The ids both sides run for an input of `n` tokens (the anchor builds the same).
fn token_ids(n: usize) -> Vec<u32> {
    (0..n).map(|i| 1000 + (37 * i as u32) % 40000).collect()
}

fn main() {
    let threads = attnviz::threads::configure(env_usize("BENCH_THREADS"));
    let quick = std::env::var_os("BENCH_QUICK").is_some();
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let gguf = smollm2::smollm2_gguf();

    println!(
        "attnviz decoder benchmark: SmolLM2-135M-Instruct Q4_1{}",
        if quick { " (quick)" } else { "" }
    );
    println!("machine: {}", measure::machine());
    println!(
        "threads: {threads} (ours: RAYON_NUM_THREADS; PyTorch: torch.set_num_threads({threads}))"
    );
    println!("load average before: {}", measure::load_average());
    println!("figures: median (min) ×runs; lower is better; ratio = ours / PyTorch\n");

    // ── end to end ── (first, while this process is small)
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_attnviz"));
    let mut cmd = Command::new(&exe);
    cmd.arg("--model")
        .arg(&gguf)
        .arg("--threads")
        .arg(threads.to_string())
        .arg(PROMPT);
    let runs = measure_runs(&mut cmd, if quick { 4 } else { 10 }, Duration::from_secs(1));
    println!(
        "end to end, `attnviz --model {} \"{PROMPT}\"` (terminal view): {}, CPU {}, peak {}\n",
        gguf.file_name().unwrap_or_default().to_string_lossy(),
        runs.wall(),
        runs.cpu(),
        runs.rss()
    );

    let mut anchor = Anchor::spawn(
        &python,
        &manifest.join("benches/decoder_anchor.py"),
        threads,
    );
    match &anchor {
        Ok(a) => println!(
            "PyTorch anchor: {}, eager attention, output_attentions=True\n",
            a.version
        ),
        Err(why) => println!("PyTorch anchor: n/a ({why})\n"),
    }

    // ── load ──
    let mut ours = Vec::new();
    let mut model = None;
    for _ in 0..if quick { 2 } else { 4 } {
        let start = Instant::now();
        let m = Model::from_gguf(&gguf).expect("loading SmolLM2");
        ours.push(start.elapsed().as_secs_f64());
        model = Some(m);
    }
    let model = model.expect("loaded");
    let theirs = anchor
        .as_mut()
        .map_err(|e| e.clone())
        .and_then(|a| a.call(&format!("load {}", gguf.display())))
        .and_then(|v| v["load_s"].as_f64().ok_or_else(|| format!("anchor: {v}")));
    println!(
        "load (dequantise to f32, tokenizer): ours {}; transformers from_pretrained(gguf_file) {}\n",
        fmt_stats(&ours, 1e3, "ms"),
        theirs
            .as_ref()
            .map_or_else(|e| format!("n/a ({e})"), |t| format!("{t:.1} s"))
    );
    if let (Err(e), Ok(a)) = (&theirs, anchor.as_mut()) {
        a.quit();
        anchor = Err(e.clone());
    }

    // ── forward + capture ──
    println!("forward + capture (every layer's attention, 30 × 9 heads)");
    println!(
        "{:>6} {:>24} {:>24} {:>13}",
        "tokens", "ours", "PyTorch eager", "ratio med/min"
    );
    for n in [128usize, 512] {
        let (rounds, reps) = match (n, quick) {
            (_, true) => (2, 2),
            (128, false) => (5, 4),
            _ => (5, 2),
        };
        let ids = token_ids(n);
        let types = vec![0u32; n];
        model.forward(&ids, &types, false).expect("forward");
        let mut ours = Vec::new();
        let (mut our_cpu, mut their_cpu) = (Vec::new(), Vec::new());
        let mut theirs: Result<Vec<f64>, String> = Ok(Vec::new());
        if let Ok(a) = anchor.as_mut() {
            let _ = a.call(&format!("forward {n} 1"));
        }
        for _ in 0..rounds {
            for _ in 0..reps {
                let (start, start_cpu) = (Instant::now(), cpu_seconds());
                let out = model.forward(&ids, &types, false).expect("forward");
                std::hint::black_box(&out);
                drop(out);
                ours.push(start.elapsed().as_secs_f64());
                our_cpu.push(cpu_seconds() - start_cpu);
            }
            match (anchor.as_mut(), theirs.as_mut()) {
                (Ok(a), Ok(acc)) => {
                    match a.call(&format!("forward {n} {reps}")).and_then(|v| {
                        their_cpu.extend(Anchor::cpu(&v));
                        Anchor::times(&v)
                    }) {
                        Ok(t) => acc.extend(t),
                        Err(e) => theirs = Err(e),
                    }
                }
                (Err(e), _) => theirs = Err(e.clone()),
                _ => {}
            }
        }
        let theirs = theirs.unwrap_or_else(|e| {
            println!("  anchor: {e}");
            Vec::new()
        });
        table_row(&n.to_string(), &ours, &theirs, &ratio(&ours, &theirs));
        table_row("CPU", &our_cpu, &their_cpu, &ratio(&our_cpu, &their_cpu));
    }

    // ── generation ──
    let prompt = model
        .tokenizer()
        .encode(CODE_PROMPT, None, model.max_positions(), false)
        .expect("tokenize")
        .ids;
    println!(
        "\ngreedy generation of {GENERATE} tokens after \"{CODE_PROMPT}\" ({} tokens), KV cache",
        prompt.len()
    );
    let (rounds, reps) = if quick { (2, 1) } else { (5, 2) };
    let mut ours = Vec::new();
    let (mut our_cpu, mut their_cpu) = (Vec::new(), Vec::new());
    let mut our_ids = Vec::new();
    let mut theirs: Result<Vec<f64>, String> = Ok(Vec::new());
    let mut their_ids = Vec::new();
    let csv = prompt
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",");
    for _ in 0..rounds {
        for _ in 0..reps {
            let (start, start_cpu) = (Instant::now(), cpu_seconds());
            let g = model
                .generate(&prompt, GENERATE, &mut |_| {})
                .expect("generate");
            ours.push(start.elapsed().as_secs_f64());
            our_cpu.push(cpu_seconds() - start_cpu);
            our_ids = g.generated().to_vec();
        }
        if let (Ok(a), Ok(acc)) = (anchor.as_mut(), theirs.as_mut()) {
            match a.call(&format!("generate {GENERATE} {reps} {csv}")) {
                Ok(v) => {
                    their_cpu.extend(Anchor::cpu(&v));
                    their_ids = v["ids"]
                        .as_array()
                        .map(|a| {
                            a.iter()
                                .filter_map(|i| i.as_u64())
                                .map(|i| i as u32)
                                .collect()
                        })
                        .unwrap_or_default();
                    match Anchor::times(&v) {
                        Ok(t) => acc.extend(t),
                        Err(e) => theirs = Err(e),
                    }
                }
                Err(e) => theirs = Err(e),
            }
        }
    }
    let theirs = theirs.unwrap_or_else(|e| {
        println!("  anchor: {e}");
        Vec::new()
    });
    println!(
        "{:>6} {:>24} {:>24} {:>13}",
        "", "ours", "transformers generate", "ratio med/min"
    );
    table_row(
        &format!("{}", our_ids.len()),
        &ours,
        &theirs,
        &ratio(&ours, &theirs),
    );
    table_row("CPU", &our_cpu, &their_cpu, &ratio(&our_cpu, &their_cpu));
    let text = model
        .tokenizer()
        .decode(&our_ids)
        .unwrap_or_else(|e| format!("({e})"));
    println!(
        "generated ({} tokens; {}): {text:?}",
        our_ids.len(),
        if their_ids.is_empty() {
            "no anchor to compare".to_string()
        } else if their_ids == our_ids {
            "the same as transformers'".to_string()
        } else {
            format!("transformers' differ: {their_ids:?}")
        }
    );
    println!("\nload average after: {}", measure::load_average());
    if let Ok(a) = anchor.as_mut() {
        a.quit();
    }
}
