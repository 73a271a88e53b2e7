//! Encoder–decoder benchmark (issue 11, requirement 7): a random model shaped as `t5-small`
//! (6 + 6 layers, 8 heads, d_model 512, d_ff 2048, vocabulary 32,128, relative positions, ReLU,
//! tied head; 60 M parameters, 242 MB of f32), written at bench time from a seeded RNG (nothing
//! is committed), with the tiny T5 fixture's tokenizer (its ids are below the vocabulary). On a
//! short sentence with a 10-token target (teacher-forced):
//!
//! 1. end to end: `attnviz -m DIR SOURCE --target TARGET` (load, tokenize, forward with encoder,
//!    decoder and cross-attention captured, terminal view of the cross-attention), wall time and
//!    peak memory of the process, beside the anchor's process from start (Python imports
//!    included) to the end of its first run;
//! 2. in this process: load, and one teacher-forced run (tokenize source and target, forward,
//!    all three captures), beside transformers' `from_pretrained` and one `model(...,
//!    labels=..., output_attentions=True)` with tokenization (eager attention).
//!
//! Prints figures; asserts nothing. Run: `cargo bench --bench seq2seq`. Settings (environment):
//! `BENCH_THREADS=N` (ours and torch's), `BENCH_QUICK=1`, `PYTHON` (an interpreter with torch and
//! transformers for `benches/seq2seq_anchor.py`; default `python3`, skipped without them).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use attnviz::model::encdec::DecoderInput;
use attnviz::model::{EncodeOptions, Model};
use safetensors::{serialize_to_file, tensor::TensorView, Dtype};

#[path = "support/measure.rs"]
mod measure;

use measure::{env_usize, fmt_stats, measure_runs, median, minimum};

const SOURCE: &str = "The quick brown fox jumps over the lazy dog.";
/// Ten labels with the tiny T5 tokenizer (`</s>` included): ten decoder tokens.
const TARGET: &str = "Der Fuchs springt";

const VOCAB: usize = 32128;
const D_MODEL: usize = 512;
const D_FF: usize = 2048;
const HEADS: usize = 8;
const D_KV: usize = 64;
const LAYERS: usize = 6;
const BUCKETS: usize = 32;

/// Deterministic values in ±scale (xorshift64*).
struct Rng(u64);

impl Rng {
    fn fill(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n)
            .map(|_| {
                self.0 ^= self.0 >> 12;
                self.0 ^= self.0 << 25;
                self.0 ^= self.0 >> 27;
                let x = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40;
                ((x as f32 / (1u64 << 24) as f32) * 2.0 - 1.0) * scale
            })
            .collect()
    }
}

/// The t5-small-shaped checkpoint in `dir` (written once; kept between runs).
fn write_model(dir: &Path) {
    if dir.join("model.safetensors").is_file() {
        return;
    }
    std::fs::create_dir_all(dir).unwrap();
    let mut rng = Rng(0x5eed_7505_3a11);
    let inner = HEADS * D_KV;
    let mut tensors: Vec<(String, Vec<usize>, Vec<f32>)> = Vec::new();
    let mut push = |name: String, shape: Vec<usize>, scale: f32| {
        let n = shape.iter().product();
        tensors.push((name, shape, rng.fill(n, scale)));
    };
    push("shared.weight".into(), vec![VOCAB, D_MODEL], 1.0);
    for stack in ["encoder", "decoder"] {
        for i in 0..LAYERS {
            let p = format!("{stack}.block.{i}.layer");
            for m in ["q", "k", "v"] {
                push(
                    format!("{p}.0.SelfAttention.{m}.weight"),
                    vec![inner, D_MODEL],
                    0.04,
                );
            }
            push(
                format!("{p}.0.SelfAttention.o.weight"),
                vec![D_MODEL, inner],
                0.04,
            );
            push(format!("{p}.0.layer_norm.weight"), vec![D_MODEL], 1.0);
            if i == 0 {
                push(
                    format!("{p}.0.SelfAttention.relative_attention_bias.weight"),
                    vec![BUCKETS, HEADS],
                    1.0,
                );
            }
            let mut f = 1;
            if stack == "decoder" {
                for m in ["q", "k", "v"] {
                    push(
                        format!("{p}.1.EncDecAttention.{m}.weight"),
                        vec![inner, D_MODEL],
                        0.04,
                    );
                }
                push(
                    format!("{p}.1.EncDecAttention.o.weight"),
                    vec![D_MODEL, inner],
                    0.04,
                );
                push(format!("{p}.1.layer_norm.weight"), vec![D_MODEL], 1.0);
                f = 2;
            }
            push(
                format!("{p}.{f}.DenseReluDense.wi.weight"),
                vec![D_FF, D_MODEL],
                0.04,
            );
            push(
                format!("{p}.{f}.DenseReluDense.wo.weight"),
                vec![D_MODEL, D_FF],
                0.02,
            );
            push(format!("{p}.{f}.layer_norm.weight"), vec![D_MODEL], 1.0);
        }
        push(
            format!("{stack}.final_layer_norm.weight"),
            vec![D_MODEL],
            1.0,
        );
    }
    let bytes: Vec<(String, Vec<usize>, Vec<u8>)> = tensors
        .into_iter()
        .map(|(n, s, v)| (n, s, v.iter().flat_map(|x| x.to_le_bytes()).collect()))
        .collect();
    let views: Vec<(String, TensorView)> = bytes
        .iter()
        .map(|(n, s, b)| {
            (
                n.clone(),
                TensorView::new(Dtype::F32, s.clone(), b).unwrap(),
            )
        })
        .collect();
    serialize_to_file(views, None, &dir.join("model.safetensors")).unwrap();
    let config = serde_json::json!({
        "architectures": ["T5ForConditionalGeneration"],
        "model_type": "t5",
        "vocab_size": VOCAB, "d_model": D_MODEL, "d_kv": D_KV, "d_ff": D_FF,
        "num_layers": LAYERS, "num_decoder_layers": LAYERS, "num_heads": HEADS,
        "relative_attention_num_buckets": BUCKETS, "relative_attention_max_distance": 128,
        "feed_forward_proj": "relu", "layer_norm_epsilon": 1e-6, "tie_word_embeddings": true,
        "pad_token_id": 0, "eos_token_id": 1, "decoder_start_token_id": 0,
    });
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiny-t5");
    for f in ["tokenizer.json", "special_tokens_map.json", "spiece.model"] {
        std::fs::copy(fixture.join(f), dir.join(f)).unwrap();
    }
    // The fixture's tokenizer_config.json says model_max_length 32; t5-small's says 512.
    let mut tc: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixture.join("tokenizer_config.json")).unwrap(),
    )
    .unwrap();
    tc["model_max_length"] = 512.into();
    std::fs::write(dir.join("tokenizer_config.json"), tc.to_string()).unwrap();
}

fn main() {
    let threads = attnviz::threads::configure(env_usize("BENCH_THREADS"));
    let quick = std::env::var_os("BENCH_QUICK").is_some();
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"));
    let dir = target_dir.join("bench-models/t5-small-random");
    write_model(&dir);

    println!(
        "attnviz encoder–decoder benchmark: t5-small-shaped random model{}",
        if quick { " (quick)" } else { "" }
    );
    println!("machine: {}", measure::machine());
    println!(
        "threads: {threads} (ours: RAYON_NUM_THREADS; PyTorch: torch.set_num_threads({threads}))"
    );
    println!("load average before: {}", measure::load_average());
    println!("source: {SOURCE:?}; target: {TARGET:?}\n");

    // ── end to end ──
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_attnviz"));
    let mut cmd = Command::new(&exe);
    cmd.arg("-m")
        .arg(&dir)
        .arg("--threads")
        .arg(threads.to_string())
        .arg(SOURCE)
        .arg("--target")
        .arg(TARGET);
    let runs = measure_runs(
        &mut cmd,
        if quick { 4 } else { 10 },
        Duration::from_millis(300),
    );
    println!(
        "end to end, `attnviz -m t5-small-random SOURCE --target TARGET` (terminal view): {}, peak {}",
        runs.wall(),
        runs.rss()
    );

    // ── in process ──
    let mut loads = Vec::new();
    let mut model = None;
    for _ in 0..if quick { 2 } else { 4 } {
        let start = Instant::now();
        model = Some(Model::from_dir(&dir).expect("loading"));
        loads.push(start.elapsed().as_secs_f64());
    }
    let model = model.expect("loaded");
    let opts = EncodeOptions::default();
    let run = || {
        model
            .encode_seq2seq(SOURCE, DecoderInput::Target(TARGET), &opts, &mut |_| {})
            .expect("run")
    };
    let first = run();
    let (n, m) = (first.attentions[0].len(), first.attentions[1].len());
    let mut ours = Vec::new();
    for _ in 0..if quick { 5 } else { 20 } {
        let start = Instant::now();
        std::hint::black_box(run());
        ours.push(start.elapsed().as_secs_f64());
    }
    println!("load: {}", fmt_stats(&loads, 1e3, "ms"));
    println!(
        "teacher-forced run ({n} source × {m} decoder tokens; tokenize, forward, encoder + decoder + cross captures): {}",
        fmt_stats(&ours, 1e3, "ms")
    );

    // ── anchor ──
    let out = Command::new(&python)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/seq2seq_anchor.py"))
        .args([
            "--threads",
            &threads.to_string(),
            "--source",
            SOURCE,
            "--target",
            TARGET,
        ])
        .arg("--model")
        .arg(&dir)
        .args(["--reps", if quick { "5" } else { "20" }])
        .output();
    let anchor: Result<serde_json::Value, String> = match out {
        Ok(o) => serde_json::from_slice(&o.stdout)
            .map_err(|e| format!("{e}: {}", String::from_utf8_lossy(&o.stderr).trim())),
        Err(e) => Err(e.to_string()),
    };
    match anchor {
        Ok(v) if v.get("error").is_none() => {
            let times: Vec<f64> = v["times"]
                .as_array()
                .map(|a| a.iter().filter_map(|t| t.as_f64()).collect())
                .unwrap_or_default();
            println!(
                "\nPyTorch anchor: torch {} transformers {}, {} threads, eager attention, output_attentions=True",
                v["torch"], v["transformers"], v["threads"]
            );
            println!(
                "  process start to first run done (imports, load, run): {:.2} s; from_pretrained {:.0} ms",
                v["first_run_s"].as_f64().unwrap_or(f64::NAN),
                v["load_s"].as_f64().unwrap_or(f64::NAN) * 1e3
            );
            println!(
                "  teacher-forced run ({} decoder tokens; tokenize, forward): {}",
                v["decoder_tokens"],
                fmt_stats(&times, 1e3, "ms")
            );
            println!(
                "ratio ours / PyTorch, teacher-forced run: {:.2} (median) / {:.2} (min); end to end: {:.2}",
                median(&ours) / median(&times),
                minimum(&ours) / minimum(&times),
                median(&runs.walls) / v["first_run_s"].as_f64().unwrap_or(f64::NAN)
            );
        }
        Ok(v) => println!("\nPyTorch anchor: n/a ({})", v["error"]),
        Err(e) => println!("\nPyTorch anchor: n/a ({e})"),
    }
}
