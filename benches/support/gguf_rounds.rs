//! What `benches/gguf_sizes.rs` and `benches/moe_sizes.rs` share: rounds of a fresh attnviz
//! process (load, a prompt with every layer captured, greedy generation) alternating with
//! llama.cpp's (`benches/llama_cpp_anchor.py`, no capture) on the same GGUF file and threads,
//! and the report of their medians beside the memory bound
//! "file + KV cache and activations + capture + 300 MB". Included with `#[path]`.
//!
//! Settings (environment): `BENCH_TOKENS=N` prompt length (default 512), `BENCH_GENERATE=N`
//! tokens generated (default 16), `BENCH_ROUNDS=N` rounds (default 3), `BENCH_THREADS=N`
//! threads for both (default 2), `LLAMA_PYTHON` an interpreter with `llama_cpp` (default
//! `.cache/venv-llama/bin/python` in the repository; the anchor is skipped without it).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use attnviz::model::{EncodeOptions, Model};

use crate::measure::{cpu_seconds, env_usize, load_average, machine, median};

/// Goals a report checks the medians against (issue 43, requirement 6), or none.
#[derive(Clone, Copy)]
pub struct Goals {
    /// attnviz's prompt wall time at most this many times llama.cpp's.
    pub prompt_ratio: f64,
    /// attnviz's generation tokens/s at least this share of llama.cpp's.
    pub generation_ratio: f64,
}

/// The whole benchmark: `--child FILE TOKENS GENERATE` runs one attnviz round; otherwise every
/// file of `files` gets its alternating rounds and a report.
pub fn bench_main(title: &str, files: Vec<PathBuf>, goals: Option<Goals>) {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        child(
            Path::new(&args[i + 1]),
            args[i + 2].parse().unwrap(),
            args[i + 3].parse().unwrap(),
        );
        return;
    }
    let threads = env_usize("BENCH_THREADS").unwrap_or(2);
    let tokens = env_usize("BENCH_TOKENS").unwrap_or(512);
    let generate = env_usize("BENCH_GENERATE").unwrap_or(16);
    let rounds = env_usize("BENCH_ROUNDS").unwrap_or(3).max(1);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = std::env::var_os("LLAMA_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join(".cache/venv-llama/bin/python"));
    let anchor = root.join("benches/llama_cpp_anchor.py");
    println!("{title}: {tokens}-token prompt, every layer captured; {generate} tokens generated");
    println!("machine: {}", machine());
    println!("threads: {threads} (both); rounds: {rounds}, alternating, each a fresh process");
    println!("load average before: {}\n", load_average());
    let exe = std::env::current_exe().expect("benchmark executable");
    for file in &files {
        if !file.exists() {
            println!("{}: missing, skipped", file.display());
            continue;
        }
        let size = std::fs::metadata(file).unwrap().len();
        println!("{} ({:.2} GB)", file.display(), size as f64 / 1e9);
        let mut ours: Vec<Vec<f64>> = Vec::new();
        let mut theirs: Vec<Vec<f64>> = Vec::new();
        for round in 0..rounds {
            let out = Command::new(&exe)
                .args(["--child", &file.display().to_string()])
                .args([tokens.to_string(), generate.to_string()])
                .env("RAYON_NUM_THREADS", threads.to_string())
                .output()
                .expect("running a round");
            if !out.status.success() {
                println!(
                    "  attnviz failed: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                );
                break;
            }
            ours.push(numbers(&out.stdout));
            let out = Command::new(&python)
                .arg(&anchor)
                .arg(file)
                .args([
                    tokens.to_string(),
                    generate.to_string(),
                    threads.to_string(),
                ])
                .output();
            match out {
                Ok(o) if o.status.success() => theirs.push(numbers(&o.stdout)),
                Ok(o) => {
                    let err = String::from_utf8_lossy(&o.stderr);
                    let last = match err.trim().lines().last() {
                        Some(line) => line.to_string(),
                        None => format!("{} with nothing on stderr", o.status),
                    };
                    if theirs.is_empty() {
                        println!("  llama.cpp anchor failed: {last}");
                    }
                }
                Err(e) => {
                    if theirs.is_empty() {
                        println!("  llama.cpp anchor not run ({}: {e})", python.display());
                    }
                }
            }
            println!(
                "  round {} done; load average {}",
                round + 1,
                load_average()
            );
        }
        report(&ours, &theirs, goals);
    }
    println!("\nload average after: {}", load_average());
}

/// The numbers a child prints on its last line, space-separated.
fn numbers(stdout: &[u8]) -> Vec<f64> {
    let text = String::from_utf8_lossy(stdout);
    let line = text.lines().last().unwrap_or("");
    line.split_whitespace()
        .map(|x| x.parse().unwrap_or(f64::NAN))
        .collect()
}

fn column(rows: &[Vec<f64>], i: usize) -> Vec<f64> {
    rows.iter().filter_map(|r| r.get(i).copied()).collect()
}

/// Ours: load s, prompt wall s, prompt CPU s, tokens, gen wall s, gen CPU s, generated,
/// peak bytes, bound bytes, file bytes, KV cache and activations bytes, capture bytes.
/// Theirs: load s, prompt wall s, prompt CPU s, tokens, gen wall s, gen CPU s, generated,
/// peak bytes.
fn report(ours: &[Vec<f64>], theirs: &[Vec<f64>], goals: Option<Goals>) {
    if ours.is_empty() {
        return;
    }
    let m = |rows: &[Vec<f64>], i| median(&column(rows, i));
    let best = |rows: &[Vec<f64>], i| column(rows, i).into_iter().fold(f64::INFINITY, f64::min);
    let has = !theirs.is_empty();
    let vs = |a: f64, b: f64| {
        if has {
            format!("  (llama.cpp {:.3} s; ×{:.2})", b, a / b)
        } else {
            String::new()
        }
    };
    println!(
        "  load: {:.2} s{}",
        m(ours, 0),
        vs(m(ours, 0), m(theirs, 0))
    );
    println!(
        "  prompt {} tokens, all layers captured: wall {:.3} s (best {:.3}){}",
        m(ours, 3),
        m(ours, 1),
        best(ours, 1),
        vs(m(ours, 1), m(theirs, 1))
    );
    println!(
        "                                         CPU  {:.3} s{}",
        m(ours, 2),
        vs(m(ours, 2), m(theirs, 2))
    );
    let tps = |rows: &[Vec<f64>], wall: usize| {
        let t: Vec<f64> = rows.iter().map(|r| r[6] / r[wall]).collect();
        median(&t)
    };
    let (ow, oc) = (tps(ours, 4), tps(ours, 5));
    if has {
        let (tw, tc) = (tps(theirs, 4), tps(theirs, 5));
        println!(
            "  generation: {ow:.2} tokens/s wall, {oc:.2} per CPU s (llama.cpp {tw:.2} and {tc:.2}; ×{:.2} wall, ×{:.2} CPU)",
            ow / tw,
            oc / tc
        );
    } else {
        println!("  generation: {ow:.2} tokens/s wall, {oc:.2} per CPU s");
    }
    let gb = |b: f64| b / 1e9;
    let (peak, bound) = (m(ours, 7), m(ours, 8));
    println!(
        "  peak RSS: {:.2} GB (bound {:.2} GB = file {:.2} + KV cache and activations {:.2} + capture {:.2} + 0.30){}",
        gb(peak),
        gb(bound),
        gb(m(ours, 9)),
        gb(m(ours, 10)),
        gb(m(ours, 11)),
        if has {
            format!("; llama.cpp {:.2} GB", gb(m(theirs, 7)))
        } else {
            String::new()
        }
    );
    if let Some(g) = goals {
        let verdict = |ok: bool| if ok { "met" } else { "MISSED" };
        println!("  memory bound: {}", verdict(peak <= bound));
        if has {
            let p = m(ours, 1) / m(theirs, 1);
            let t = ow / tps(theirs, 4);
            println!(
                "  prompt ≤ {:.1}× llama.cpp: ×{p:.2}, {}; generation ≥ {:.1}× llama.cpp: ×{t:.2}, {}",
                g.prompt_ratio,
                verdict(p <= g.prompt_ratio),
                g.generation_ratio,
                verdict(t >= g.generation_ratio)
            );
        }
    }
}

/// One round: load, prompt with capture, generation; prints the figures on one line.
fn child(path: &Path, tokens: usize, generate: usize) {
    let start = Instant::now();
    let model = Model::from_gguf(path).unwrap_or_else(|e| panic!("{e}"));
    let load = start.elapsed().as_secs_f64();
    let text = prompt(&model, tokens);
    let opts = EncodeOptions::default();
    let (w0, c0) = (Instant::now(), cpu_seconds());
    let enc = model
        .encode(&text, None, &opts)
        .unwrap_or_else(|e| panic!("{e}"));
    let (prompt_wall, prompt_cpu) = (w0.elapsed().as_secs_f64(), cpu_seconds() - c0);
    let n = enc.attention.tokens().len();
    // The capture: the attention, each row's sink share (gpt-oss) and the routers' decisions
    // (probabilities, choices and weights of every routed layer).
    let sinks = enc.attention.sink_shares().map_or(0, std::mem::size_of_val);
    let routed = enc.attention.router.as_ref().map_or(0, |r| {
        r.layers
            .iter()
            .map(|l| {
                std::mem::size_of_val(&l.probs[..])
                    + std::mem::size_of_val(&l.chosen[..])
                    + std::mem::size_of_val(&l.weights[..])
            })
            .sum()
    });
    let captured = std::mem::size_of_val(enc.attention.weights()) + sinks + routed;
    drop(enc);
    let ids = model.tokenizer().encode_plain(&text).unwrap();
    let ids = &ids[..ids.len().min(32)];
    let (w1, c1) = (Instant::now(), cpu_seconds());
    let gen = model.generate(ids, generate, &mut |_| {}).unwrap();
    let (gen_wall, gen_cpu) = (w1.elapsed().as_secs_f64(), cpu_seconds() - c1);
    let generated = gen.generated().len().max(1);
    let arch = model.architecture();
    let size = std::fs::metadata(path).unwrap().len() as usize;
    // KV cache (f32 k and v per layer), the largest activations of one layer (the hidden state
    // and its norm, q/k/v, the feed-forward's gate and up and the scores of all heads: each
    // f32), and the capture. A mixture-of-experts layer instead holds the router's logits and
    // probabilities, and for the expert at work its rows' inputs, gate, up and output (at most
    // every row: `blocks::experts`), beside the layer's output.
    let f = 4;
    let kv = arch.layers * 2 * n * arch.kv_heads * arch.head_dim * f;
    let params = attnviz::model::gguf::GgufFile::open(path).and_then(|g| g.decoder_params());
    let (ffn, experts) = match &params {
        Ok(p) => (
            p.experts
                .as_ref()
                .and_then(|e| e.feed_forward_length)
                .unwrap_or(p.intermediate_size),
            p.experts.as_ref().map(|e| e.count),
        ),
        Err(_) => (4 * arch.hidden_size, None),
    };
    let ffn_act = match experts {
        Some(e) => 2 * e + 2 * arch.hidden_size + 2 * ffn,
        None => 3 * ffn,
    };
    let act = n * (4 * arch.hidden_size + 3 * arch.heads * arch.head_dim + ffn_act) * f
        + arch.heads * n * n * f;
    let bound = size + kv + act + captured + 300_000_000;
    println!(
        "{load} {prompt_wall} {prompt_cpu} {n} {gen_wall} {gen_cpu} {generated} {} {bound} {size} {} {captured}",
        peak_rss(),
        kv + act
    );
}

/// Text that the model's tokenizer cuts into `tokens` tokens: common words, one token each.
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
