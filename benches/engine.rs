//! Engine benchmark (issue 2, requirement 11): model load, forward + capture at 12, 128 and 512
//! tokens for all-MiniLM-L6-v2 and a bert-base-shaped model, and the end-to-end CLI's wall time
//! and peak memory, each beside PyTorch's figure from the same run. Prints figures; asserts
//! nothing.
//!
//! Run: `cargo bench --bench engine`. Settings (environment):
//! - `BENCH_THREADS=N`: thread count for us and for torch (default: `attnviz::threads`' choice);
//! - `BENCH_QUICK=1`: fewer repetitions (a rough figure in about a third of the time);
//! - `ATTNVIZ_MINILM_DIR`: the model (default `.cache/models/all-MiniLM-L6-v2`,
//!   `scripts/fetch-minilm.sh` fetches it);
//! - `PYTHON`: the interpreter for the anchors (default `python3`).
//!
//! PyTorch's figures come from `benches/torch_anchor.py` (HF transformers `BertModel`, eager
//! attention, `output_attentions=True`, `torch.set_num_threads(N)`), a child process that stays
//! up for the whole run so that its timings alternate with ours round by round: the machine is
//! noisy, and alternating spreads the noise over both columns. The end-to-end anchor is
//! `benches/bertviz_job.py` (transformers + bertviz, the job attnviz replaces).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use attnviz::model::Model;

#[path = "support/measure.rs"]
mod measure;

use measure::{env_usize, fmt_stats, load_average, machine, measure_runs, median, minimum, Anchor};

const SIZES: [usize; 3] = [12, 128, 512];
const SENTENCE: &str = "The quick brown fox jumps over the lazy dog.";

fn main() {
    let threads = attnviz::threads::configure(env_usize("BENCH_THREADS"));
    let quick = std::env::var_os("BENCH_QUICK").is_some();
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());

    println!(
        "attnviz engine benchmark{}",
        if quick { " (quick)" } else { "" }
    );
    println!("machine: {}", machine());
    println!(
        "threads: {threads} (ours: RAYON_NUM_THREADS; PyTorch: torch.set_num_threads({threads}))"
    );
    println!("load average before: {}", load_average());
    println!("figures: median (min) over the runs shown; lower is better\n");

    let minilm = std::env::var_os("ATTNVIZ_MINILM_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| manifest.join(".cache/models/all-MiniLM-L6-v2"));
    let minilm = minilm
        .join("config.json")
        .is_file()
        .then_some(minilm)
        .or_else(|| {
            println!(
                "all-MiniLM-L6-v2 not found (run scripts/fetch-minilm.sh or set \
                 ATTNVIZ_MINILM_DIR): MiniLM figures skipped\n"
            );
            None
        });
    let scratch = tempfile::tempdir().expect("temporary folder");

    let base = scratch.path().join("bert-base-random");
    let started = Instant::now();
    write_random_bert_base(&base).expect("writing the random bert-base checkpoint");
    println!(
        "bert-base-shaped model: random weights written in {:.1} s (12 layers × 12 heads, \
         hidden 768, intermediate 3072)\n",
        started.elapsed().as_secs_f64()
    );

    // ── end to end ── (run first, while this process is small: a child's peak RSS as the
    // kernel reports it is at least the parent's peak at spawn time, since posix_spawn shares
    // the parent's memory until exec)
    let e2e = minilm
        .as_ref()
        .map(|dir| end_to_end(dir, &python, manifest, scratch.path(), threads, quick));

    let mut torch = Torch::spawn(&python, &manifest.join("benches/torch_anchor.py"), threads);
    match &torch {
        Ok(t) => println!(
            "PyTorch anchor: {}, eager attention, output_attentions=True\n",
            t.version
        ),
        Err(why) => println!("PyTorch anchor: n/a ({why})\n"),
    }

    let mut models: Vec<(&str, PathBuf)> = Vec::new();
    if let Some(dir) = &minilm {
        models.push(("MiniLM-L6", dir.clone()));
    }
    models.push(("bert-base", base.clone()));

    // ── model load ── The first load in a process is what a CLI run pays (fresh memory from
    // the kernel); later ones may reuse memory the allocator kept, so both are shown.
    println!(
        "model load (weights + tokenizer; transformers: BertModel + AutoTokenizer from_pretrained; \
         alternating; ratio: ours / transformers', of the medians after the first)"
    );
    println!(
        "{:<12} {:>10} {:>22}   {:>10} {:>22} {:>7}",
        "model", "ours first", "ours again", "tr. first", "transformers again", "ratio"
    );
    let mut loaded = Vec::new();
    let mut load_medians = Vec::new();
    for (name, dir) in &models {
        // Ours and transformers' alternate load by load, so that both sample the same moments
        // of a shared machine.
        let runs = if quick { 4 } else { 9 };
        let mut ours = Vec::new();
        let mut theirs: Option<Result<Vec<f64>, String>> = torch.as_ref().ok().map(|_| Ok(vec![]));
        let mut model = None;
        for _ in 0..runs {
            let start = Instant::now();
            let m = Model::from_dir(dir).expect("loading the model");
            ours.push(start.elapsed().as_secs_f64());
            model = Some(m);
            if let (Ok(t), Some(Ok(acc))) = (torch.as_mut(), theirs.as_mut()) {
                match torch_load(t, name, dir) {
                    Ok(s) => acc.push(s),
                    Err(e) => theirs = Some(Err(e)),
                }
            }
        }
        let (their_first, their_again, ratio) = match &theirs {
            Some(Ok(t)) => (
                format!("{:.1} ms", t[0] * 1e3),
                fmt_stats(&t[1..], 1e3, "ms"),
                format!("{:.2}", median(&ours[1..]) / median(&t[1..])),
            ),
            _ => (
                "-".into(),
                fmt_anchor(theirs.as_ref(), &torch, 1e3, "ms"),
                "-".into(),
            ),
        };
        println!(
            "{:<12} {:>10} {:>22}   {:>10} {:>22} {:>7}",
            name,
            format!("{:.1} ms", ours[0] * 1e3),
            fmt_stats(&ours[1..], 1e3, "ms"),
            their_first,
            their_again,
            ratio
        );
        loaded.push((*name, model.expect("at least one load")));
        load_medians.push(median(&ours[1..]));
    }

    // ── the NaN/inf check ── Every weight is scanned at load (part of the load above); here
    // the scan alone, over the same f32 values in memory, beside the load's median.
    println!(
        "\nNaN/inf check at load (validate::first_non_finite over every weight; part of the load)"
    );
    println!(
        "{:<12} {:>10} {:>22} {:>10}",
        "model", "weights", "scan", "of load"
    );
    for ((name, dir), load) in models.iter().zip(&load_medians) {
        let tensors = f32_tensors(&dir.join("model.safetensors"));
        let floats: usize = tensors.iter().map(Vec::len).sum();
        let mut times = Vec::new();
        for _ in 0..if quick { 5 } else { 15 } {
            let start = Instant::now();
            for t in &tensors {
                std::hint::black_box(attnviz::model::validate::first_non_finite(t));
            }
            times.push(start.elapsed().as_secs_f64());
        }
        println!(
            "{:<12} {:>7} MB {:>22} {:>9.1}%",
            name,
            floats * 4 / 1_000_000,
            fmt_stats(&times, 1e3, "ms"),
            100.0 * median(&times) / load
        );
    }

    // ── forward + capture ──
    println!("\nforward + capture (all layers' attention probabilities in one f32 buffer)");
    println!(
        "{:<12} {:>6} {:>22} {:>22} {:>13}",
        "model", "tokens", "ours", "PyTorch eager", "ratio med/min"
    );
    for (name, model) in &loaded {
        for &n in &SIZES {
            let (rounds, reps) = repetitions(name, n, quick);
            let ids = token_ids(n);
            let types = vec![0u32; n];
            // Warm up: first touch of the buffers, the pool's threads, the page cache.
            model.forward(&ids, &types, false).expect("forward");
            if let Ok(t) = torch.as_mut() {
                let _ = torch_time(t, name, n, 1);
            }
            let mut ours = Vec::new();
            let mut theirs: Option<Result<Vec<f64>, String>> =
                torch.as_ref().ok().map(|_| Ok(vec![]));
            for _ in 0..rounds {
                for _ in 0..reps {
                    let start = Instant::now();
                    let out = model.forward(&ids, &types, false).expect("forward");
                    std::hint::black_box(&out);
                    drop(out);
                    ours.push(start.elapsed().as_secs_f64());
                }
                if let (Ok(t), Some(Ok(acc))) = (torch.as_mut(), theirs.as_mut()) {
                    match torch_time(t, name, n, reps) {
                        Ok(times) => acc.extend(times),
                        Err(e) => theirs = Some(Err(e)),
                    }
                }
            }
            let ratio = match &theirs {
                Some(Ok(t)) if !t.is_empty() => format!(
                    "{:.2} / {:.2}",
                    median(&ours) / median(t),
                    minimum(&ours) / minimum(t)
                ),
                _ => "-".into(),
            };
            println!(
                "{:<12} {:>6} {:>22} {:>22} {:>13}",
                name,
                n,
                fmt_stats(&ours, 1e3, "ms"),
                fmt_anchor(theirs.as_ref(), &torch, 1e3, "ms"),
                ratio
            );
        }
    }
    println!(
        "(ratio: ours / PyTorch's, of the medians and of the minima; below 1 = we are faster)"
    );

    // ── the attention check ── Every captured row is checked (finite, sums to 1) inside the
    // forward pass above; here that check alone on a 512-token capture.
    println!(
        "\nattention row check at 512 tokens (validate::check_rows; part of the forward pass)"
    );
    for (name, model) in &loaded {
        let n = 512;
        let ids = token_ids(n);
        let out = model.forward(&ids, &vec![0; n], false).expect("forward");
        let info = model.info();
        let mut times = Vec::new();
        for _ in 0..if quick { 5 } else { 15 } {
            let start = Instant::now();
            attnviz::model::validate::check_rows(&out.weights, info.layers, info.heads, n)
                .expect("finite rows");
            times.push(start.elapsed().as_secs_f64());
        }
        println!(
            "{:<12} {:>6} MB {:>22}",
            name,
            out.weights.len() * 4 / 1_000_000,
            fmt_stats(&times, 1e3, "ms")
        );
    }
    drop(loaded);
    if let Ok(t) = torch.as_mut() {
        t.quit();
    }

    if let Some(e2e) = e2e {
        println!("{e2e}");
    }
    println!("\nload average after: {}", load_average());
}

/// Every f32 tensor of a safetensors file, copied out.
fn f32_tensors(path: &Path) -> Vec<Vec<f32>> {
    let bytes = std::fs::read(path).expect("reading the checkpoint");
    let st = safetensors::SafeTensors::deserialize(&bytes).expect("a safetensors file");
    st.tensors()
        .into_iter()
        .filter(|(_, v)| v.dtype() == safetensors::Dtype::F32)
        .map(|(_, v)| {
            v.data()
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect()
        })
        .collect()
}

/// The end-to-end table: our CLI and the Python job on one short sentence.
fn end_to_end(
    minilm: &Path,
    python: &str,
    manifest: &Path,
    scratch: &Path,
    threads: usize,
    quick: bool,
) -> String {
    let mut t = format!(
        "\nend to end, MiniLM, one short sentence ({}); bench process peak before: {}\n",
        quote(SENTENCE),
        own_peak()
    );
    t += &format!("{:<40} {:>22} {:>16}\n", "job", "wall", "peak RSS");
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_attnviz"));
    let runs = if quick { 4 } else { 10 };
    let mut cmd = Command::new(&exe);
    cmd.arg("--model")
        .arg(minilm)
        .arg("--threads")
        .arg(threads.to_string())
        .arg(SENTENCE);
    // Two seconds apart, as a person runs commands: back to back, a run reuses memory the last
    // one just freed, which is faster than what a first run gets.
    let ours = measure_runs(&mut cmd, runs, Duration::from_secs(2));
    t += &format!(
        "{:<40} {:>22} {:>16}\n",
        "attnviz (terminal view)",
        ours.wall(),
        ours.rss()
    );
    let out_dir = scratch.join("bertviz");
    std::fs::create_dir_all(&out_dir).expect("output folder");
    let mut cmd = Command::new(python);
    cmd.arg(manifest.join("benches/bertviz_job.py"))
        .arg(minilm)
        .arg(SENTENCE)
        .arg(&out_dir)
        .env("OMP_NUM_THREADS", threads.to_string());
    let theirs = measure_runs(&mut cmd, if quick { 2 } else { 3 }, Duration::from_secs(2));
    let label = match theirs.status {
        Some(0) => "Python: transformers + bertviz",
        Some(3) => "Python: transformers only (no bertviz)",
        _ => "Python: transformers + bertviz",
    };
    if theirs.status.is_some_and(|s| s == 0 || s == 3) {
        t += &format!("{:<40} {:>22} {:>16}", label, theirs.wall(), theirs.rss());
    } else {
        t += &format!(
            "{:<40} {:>22} {:>16}",
            label, "n/a (torch not installed)", "-"
        );
    }
    t
}

/// This process's peak resident set (VmHWM).
fn own_peak() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .map(|v| v.trim().to_string())
        })
        .unwrap_or_else(|| "n/a".into())
}

/// Rounds × repetitions per round for one size. Many short rounds, so that both sides sample
/// the same moments of a noisy machine; about the same time for every line.
fn repetitions(model: &str, n: usize, quick: bool) -> (usize, usize) {
    let base = model == "bert-base";
    let (rounds, reps): (usize, usize) = match (n, base) {
        (0..=32, false) => (20, 5),
        (0..=32, true) => (20, 2),
        (33..=256, false) => (15, 2),
        (33..=256, true) => (15, 1),
        (_, false) => (15, 1),
        (_, true) => (6, 1),
    };
    if quick {
        (rounds.div_ceil(3), reps)
    } else {
        (rounds, reps)
    }
}

/// The ids both sides run: `[CLS] 1000+(37·i mod 20000) … [SEP]` (the anchor builds the same).
fn token_ids(n: usize) -> Vec<u32> {
    (0..n)
        .map(|i| match i {
            0 => 101,
            i if i == n - 1 => 102,
            i => 1000 + (37 * i as u32) % 20000,
        })
        .collect()
}

/// A bert-base-shaped BertModel with random weights (uniform, standard deviation 0.02, like
/// BERT's initialisation; LayerNorm γ = 1, β = 0) as `model.safetensors`, its config.json and a
/// made-up vocab.txt, in `dir`. The file is written tensor by tensor, so this process never holds
/// the 440 MB (its peak memory would otherwise show in the end-to-end figures).
fn write_random_bert_base(dir: &Path) -> anyhow::Result<()> {
    let (hidden, inter, layers, vocab, positions) = (768, 3072, 12, 30522, 512);
    std::fs::create_dir_all(dir)?;
    enum Fill {
        Random,
        Ones,
        Zeros,
    }
    let mut tensors: Vec<(String, Vec<usize>, Fill)> = vec![
        (
            "embeddings.word_embeddings.weight".into(),
            vec![vocab, hidden],
            Fill::Random,
        ),
        (
            "embeddings.position_embeddings.weight".into(),
            vec![positions, hidden],
            Fill::Random,
        ),
        (
            "embeddings.token_type_embeddings.weight".into(),
            vec![2, hidden],
            Fill::Random,
        ),
    ];
    let norm = |tensors: &mut Vec<(String, Vec<usize>, Fill)>, name: String| {
        tensors.push((format!("{name}.weight"), vec![hidden], Fill::Ones));
        tensors.push((format!("{name}.bias"), vec![hidden], Fill::Zeros));
    };
    norm(&mut tensors, "embeddings.LayerNorm".into());
    for l in 0..layers {
        let p = format!("encoder.layer.{l}");
        let mut linear = |name: String, inputs: usize, outputs: usize| {
            tensors.push((
                format!("{name}.weight"),
                vec![outputs, inputs],
                Fill::Random,
            ));
            tensors.push((format!("{name}.bias"), vec![outputs], Fill::Random));
        };
        for part in ["query", "key", "value"] {
            linear(format!("{p}.attention.self.{part}"), hidden, hidden);
        }
        linear(format!("{p}.attention.output.dense"), hidden, hidden);
        linear(format!("{p}.intermediate.dense"), hidden, inter);
        linear(format!("{p}.output.dense"), inter, hidden);
        norm(&mut tensors, format!("{p}.attention.output.LayerNorm"));
        norm(&mut tensors, format!("{p}.output.LayerNorm"));
    }
    // safetensors: u64 header length, JSON header (dtype, shape, byte range of each tensor),
    // then the little-endian data.
    let mut header = serde_json::Map::new();
    let mut offset = 0usize;
    for (name, shape, _) in &tensors {
        let bytes = 4 * shape.iter().product::<usize>();
        header.insert(
            name.clone(),
            serde_json::json!({"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + bytes]}),
        );
        offset += bytes;
    }
    let mut header = serde_json::to_string(&header)?;
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let file = std::fs::File::create(dir.join("model.safetensors"))?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
    out.write_all(&(header.len() as u64).to_le_bytes())?;
    out.write_all(header.as_bytes())?;
    let mut state = 0x2545_f491_4f6c_dd1du64;
    // Uniform on [−a, a] has standard deviation a/√3: a = 0.02·√3.
    let amplitude = 0.02f32 * 3f32.sqrt();
    let mut chunk = Vec::with_capacity(1 << 20);
    for (_, shape, fill) in &tensors {
        let mut left = shape.iter().product::<usize>();
        while left > 0 {
            let count = left.min(1 << 18);
            chunk.clear();
            for _ in 0..count {
                let v = match fill {
                    Fill::Ones => 1.0f32,
                    Fill::Zeros => 0.0,
                    Fill::Random => {
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        ((state >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * amplitude
                    }
                };
                chunk.extend_from_slice(&v.to_le_bytes());
            }
            out.write_all(&chunk)?;
            left -= count;
        }
    }
    out.flush()?;
    let config = serde_json::json!({
        "architectures": ["BertModel"],
        "model_type": "bert",
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": 12,
        "intermediate_size": inter,
        "hidden_act": "gelu",
        "max_position_embeddings": positions,
        "type_vocab_size": 2,
        "vocab_size": vocab,
        "layer_norm_eps": 1e-12,
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "initializer_range": 0.02,
        "pad_token_id": 0,
        "position_embedding_type": "absolute"
    });
    std::fs::write(
        dir.join("config.json"),
        serde_json::to_string_pretty(&config)?,
    )?;
    let mut words = vec!["[PAD]".to_string()];
    words.extend((1..100).map(|i| format!("[unused{i}]")));
    words.extend(["[UNK]", "[CLS]", "[SEP]", "[MASK]"].map(String::from));
    words.extend((words.len()..vocab).map(|i| format!("w{i}")));
    std::fs::write(dir.join("vocab.txt"), words.join("\n") + "\n")?;
    // Written out before anything is timed, so no write-back runs during the figures.
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
    Ok(())
}

/// The PyTorch anchor child (`benches/torch_anchor.py`): model load and timed forward passes.
type Torch = Anchor;

fn torch_load(t: &mut Torch, name: &str, dir: &Path) -> Result<f64, String> {
    let v = t.call(&format!("load {name} {}", dir.display()))?;
    v["load_s"].as_f64().ok_or_else(|| format!("anchor: {v}"))
}

fn torch_time(t: &mut Torch, name: &str, n: usize, reps: usize) -> Result<Vec<f64>, String> {
    let v = t.call(&format!("time {name} {n} {reps}"))?;
    Anchor::times(&v)
}

fn fmt_anchor(
    figures: Option<&Result<Vec<f64>, String>>,
    torch: &Result<Torch, String>,
    scale: f64,
    unit: &str,
) -> String {
    match (figures, torch) {
        (Some(Ok(xs)), _) if !xs.is_empty() => fmt_stats(xs, scale, unit),
        (Some(Err(e)), _) => format!("n/a ({e})"),
        (_, Err(why)) => format!("n/a ({why})"),
        _ => "n/a".into(),
    }
}

fn quote(s: &str) -> String {
    format!("\"{s}\"")
}
