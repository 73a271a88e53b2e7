//! Matrix products on quantised and 16-bit weights (issue 22, requirement 3): attnviz's
//! `linear_quant` (weights decoded inside the kernel, activations in f32) beside candle's
//! quantised matmul (`QMatMul` on a `QTensor`: activations rounded to 8 bits, or to f16 for F16
//! weights, then integer dot products) and beside today's path (weights dequantised to f32 at
//! load, then our f32 kernel), on the linear maps of Llama-3.2-1B and Llama-3.1-8B, for one
//! input row (a generated token) and 512 (a prompt). Prints figures; asserts nothing.
//!
//! Run: `cargo bench --bench quant` (about 15 minutes on 2 cores). Each thread count runs in a
//! fresh child process (candle's thread pool reads its size once). Settings (environment):
//! - `BENCH_THREADS=1,2`: thread counts (ours: `RAYON_NUM_THREADS`; candle:
//!   `CANDLE_NUM_THREADS`);
//! - `BENCH_QUICK=1`: the 1B shapes only, fewer rounds;
//! - `BENCH_ROUNDS=N`: rounds per figure (default 15 at one row, 3 at 512);
//! - `BENCH_SHAPES=8B`, `BENCH_TYPES=Q4_K,F16`, `BENCH_ROWS=1,512`: subsets;
//! - `BENCH_SWEEP=1`: instead, both of our paths (few-rows kernel, tiled gemm) at 1–256 rows,
//!   to place `TILED_ROWS`.
//!
//! Method. Weights are Gaussian-like (σ 0.02, a trained Llama's scale), quantised by candle's
//! own quantiser (`QTensor::quantize`), so the blocks are what a GGUF converter writes; inputs
//! are uniform in [−1, 1]. Each round runs each way once, in turn (alternating, so the noise of
//! this shared machine falls on all of them); one-row rounds first read a 64 MiB buffer, so the
//! weights come from memory as they do when a model's layers follow one another, not from a
//! cache the previous round warmed. Wall time and CPU time (user + system of the whole process,
//! every thread: candle's pool spins before it sleeps, and that counts) per product, median
//! over the rounds. The error is measured on the first 4 rows × 256 outputs against an f64
//! product on candle's dequantised weights, as a fraction of the largest output there.

use std::io::Write;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use attnviz::model::kernels::linear::{linear, linear_gemm};
use attnviz::model::kernels::quant::{linear_quant_on, type_name, QuantMatrix, QuantPath};
use attnviz::model::kernels::{Activation, Layout, Matrix, Output};
use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{Device, Module, Tensor};

#[path = "support/measure.rs"]
mod measure;

use measure::{cpu_seconds, env_usize, load_average, machine, median};

/// The linear maps of the two models: (name, inputs, outputs).
const SHAPES: [(&str, usize, usize); 7] = [
    ("1B q/o 2048→2048", 2048, 2048),
    ("1B k/v 2048→512", 2048, 512),
    ("1B gate/up 2048→8192", 2048, 8192),
    ("1B down 8192→2048", 8192, 2048),
    ("8B q/o 4096→4096", 4096, 4096),
    ("8B gate/up 4096→14336", 4096, 14336),
    ("8B down 14336→4096", 14336, 4096),
];

const TYPES: [GgmlDType; 6] = [
    GgmlDType::Q4_0,
    GgmlDType::Q4K,
    GgmlDType::Q6K,
    GgmlDType::Q8_0,
    GgmlDType::F16,
    GgmlDType::BF16,
];

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--child") {
        child();
        return;
    }
    let threads: Vec<usize> = list("BENCH_THREADS").unwrap_or_else(|| vec![1, 2]);
    println!("attnviz quantised-weights benchmark");
    println!("machine: {}", machine());
    println!("load average before: {}", load_average());
    let exe = std::env::current_exe().expect("benchmark executable");
    for t in threads {
        println!("\n## {t} thread{}\n", if t == 1 { "" } else { "s" });
        std::io::stdout().flush().ok();
        let status = Command::new(&exe)
            .arg("--child")
            .env("RAYON_NUM_THREADS", t.to_string())
            .env("CANDLE_NUM_THREADS", t.to_string())
            .status()
            .expect("running the measurements");
        if !status.success() {
            println!("(the {t}-thread run failed: {status})");
        }
    }
    println!("\nload average after: {}", load_average());
}

/// A comma-separated list of numbers from the environment.
fn list(name: &str) -> Option<Vec<usize>> {
    let v = std::env::var(name).ok()?;
    Some(v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
}

/// `n` Gaussian-like values (sum of four uniforms), standard deviation `sigma`.
fn gaussian(n: usize, seed: u64, sigma: f32) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut uniform = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    };
    // Four uniforms on [−½, ½) sum to variance 1/3.
    let scale = sigma * 3f32.sqrt();
    (0..n)
        .map(|_| (uniform() + uniform() + uniform() + uniform()) * scale)
        .collect()
}

fn uniform(n: usize, seed: u64) -> Vec<f32> {
    gaussian(n, seed, 1.0)
        .into_iter()
        .map(|v| (v / 2.0).clamp(-1.0, 1.0))
        .collect()
}

/// Reads a buffer larger than the last-level cache, so the next product's weights come from
/// memory.
struct Flush(Vec<u64>);

impl Flush {
    fn new() -> Flush {
        Flush(vec![1u64; 64 << 17])
    }

    fn run(&self) {
        let s: u64 = self.0.iter().fold(0u64, |a, &b| a.wrapping_add(b));
        std::hint::black_box(s);
    }
}

/// Wall and CPU seconds of `f`.
fn timed<R>(f: impl FnOnce() -> R) -> (f64, f64, R) {
    let (c0, t0) = (cpu_seconds(), Instant::now());
    let r = f();
    let wall = t0.elapsed().as_secs_f64();
    (wall, cpu_seconds() - c0, r)
}

/// Resident memory of this process, in bytes.
fn rss() -> usize {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<usize>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// One way to run a product, and what it measured.
#[derive(Default)]
struct Way {
    walls: Vec<f64>,
    cpus: Vec<f64>,
    error: f64,
}

impl Way {
    fn ms(&self) -> String {
        fmt_ms(&self.walls)
    }
    fn cpu_ms(&self) -> String {
        fmt_ms(&self.cpus)
    }
}

fn fmt_ms(xs: &[f64]) -> String {
    if xs.is_empty() {
        return "n/a".into();
    }
    let m = median(xs) * 1e3;
    if m < 10.0 {
        format!("{m:.2}")
    } else {
        format!("{m:.1}")
    }
}

fn ratio(a: &[f64], b: &[f64]) -> String {
    if a.is_empty() || b.is_empty() {
        return "n/a".into();
    }
    format!("{:.2}", median(a) / median(b))
}

/// The f64 product on the first `sr` rows and a spread of up to 256 outputs; the sample's
/// output indices and values.
fn reference(
    x: &[f32],
    w: &[f32],
    inputs: usize,
    outputs: usize,
    sr: usize,
) -> (Vec<usize>, Vec<f64>) {
    let step = outputs.div_ceil(256).max(1);
    let cols: Vec<usize> = (0..outputs).step_by(step).collect();
    let mut vals = Vec::new();
    for r in 0..sr {
        for &o in &cols {
            let xr = &x[r * inputs..][..inputs];
            let wr = &w[o * inputs..][..inputs];
            vals.push(xr.iter().zip(wr).map(|(a, b)| *a as f64 * *b as f64).sum());
        }
    }
    (cols, vals)
}

/// Largest |got − want| over the sample, as a fraction of the largest |want|.
fn error(got: &[f32], outputs: usize, cols: &[usize], want: &[f64], sr: usize) -> f64 {
    let largest = want.iter().fold(0f64, |m, v| m.max(v.abs()));
    let mut worst = 0f64;
    let mut k = 0;
    for r in 0..sr {
        for &o in cols {
            worst = worst.max((got[r * outputs + o] as f64 - want[k]).abs());
            k += 1;
        }
    }
    worst / largest
}

fn child() {
    let threads = rayon::current_num_threads();
    let quick = std::env::var_os("BENCH_QUICK").is_some();
    let sweep = std::env::var_os("BENCH_SWEEP").is_some();
    let shape_filter = std::env::var("BENCH_SHAPES").unwrap_or_default();
    let types: Vec<GgmlDType> = match std::env::var("BENCH_TYPES") {
        Ok(v) => TYPES
            .into_iter()
            .filter(|t| v.split(',').any(|s| s.trim() == type_name(*t)))
            .collect(),
        Err(_) => TYPES.to_vec(),
    };
    let rows_list = list("BENCH_ROWS").unwrap_or_else(|| {
        if sweep {
            vec![1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256]
        } else {
            vec![1, 512]
        }
    });
    let shapes: Vec<_> = SHAPES
        .into_iter()
        .filter(|s| !quick || s.0.starts_with("1B"))
        .filter(|s| s.0.contains(shape_filter.as_str()))
        .collect();
    println!(
        "threads: ours {threads} (rayon), candle {} (CANDLE_NUM_THREADS); figures in ms per \
         product, median over the rounds; ratios of the medians (below 1: ours is faster)",
        std::env::var("CANDLE_NUM_THREADS").unwrap_or_else(|_| "default".into())
    );
    let flush = Flush::new();
    if sweep {
        println!(
            "\n| shape | type | rows | few-rows kernel | tiled gemm | few-rows / tiled | \
             few-rows CPU | tiled CPU | CPU ratio |"
        );
        println!("|---|---|--:|--:|--:|--:|--:|--:|--:|");
    } else {
        println!(
            "\n| shape | type | rows | ours | candle QMatMul | f32 (dequantised) | ours / candle | \
             ours / f32 | ours CPU | candle CPU | f32 CPU | error ours | error candle | error f32 | \
             candle's extra memory |"
        );
        println!("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
    }
    std::io::stdout().flush().ok();
    let Some(&first_shape) = shapes.first() else {
        println!("no shape matches BENCH_SHAPES={shape_filter:?}");
        return;
    };
    for (name, inputs, outputs) in shapes {
        let w32 = gaussian(inputs * outputs, 1, 0.02);
        let t = Tensor::from_slice(&w32, (outputs, inputs), &Device::Cpu).expect("tensor");
        drop(w32);
        for &dtype in &types {
            let qt = QTensor::quantize(&t, dtype).expect("quantising");
            let bytes = qt.data().expect("blocks").into_owned();
            let deq: Vec<f32> = qt
                .dequantize(&Device::Cpu)
                .and_then(|d| d.flatten_all()?.to_vec1())
                .expect("dequantising");
            let ours = QuantMatrix::new(&bytes, dtype, outputs, inputs).expect("matrix");
            let qmm = QMatMul::QTensor(Arc::new(qt));
            for &rows in &rows_list {
                let x = uniform(rows * inputs, 2 + rows as u64);
                let mut out = vec![0f32; rows * outputs];
                let run_ours = |path: QuantPath, out: &mut [f32]| {
                    let o = Output {
                        data: out,
                        stride: outputs,
                        col0: 0,
                    };
                    linear_quant_on(path, &x, rows, ours, None, o, Activation::Identity)
                        .expect("product");
                };
                let rounds = env_usize("BENCH_ROUNDS").unwrap_or(match (rows, quick) {
                    (1, false) => 15,
                    (1, true) => 7,
                    (_, false) => 3,
                    (_, true) => 2,
                });
                if sweep {
                    let mut few = Way::default();
                    let mut tiled = Way::default();
                    run_ours(QuantPath::FewRows, &mut out);
                    run_ours(QuantPath::Tiled, &mut out);
                    for _ in 0..rounds.max(3) {
                        for (way, path) in [
                            (&mut few, QuantPath::FewRows),
                            (&mut tiled, QuantPath::Tiled),
                        ] {
                            if rows <= 16 {
                                flush.run();
                            }
                            std::thread::sleep(Duration::from_millis(2));
                            let (wall, cpu, ()) = timed(|| run_ours(path, &mut out));
                            way.walls.push(wall);
                            way.cpus.push(cpu);
                        }
                    }
                    println!(
                        "| {name} | {} | {rows} | {} | {} | {} | {} | {} | {} |",
                        type_name(dtype),
                        few.ms(),
                        tiled.ms(),
                        ratio(&few.walls, &tiled.walls),
                        few.cpu_ms(),
                        tiled.cpu_ms(),
                        ratio(&few.cpus, &tiled.cpus)
                    );
                    std::io::stdout().flush().ok();
                    continue;
                }
                let xt = Tensor::from_slice(&x, (rows, inputs), &Device::Cpu).expect("input");
                let sr = rows.min(4);
                let (cols, want) = reference(&x, &deq, inputs, outputs, sr);
                let f32_matrix = Matrix {
                    data: &deq,
                    inputs,
                    outputs,
                    layout: Layout::OutIn,
                };
                // What `Linear` runs today on dequantised GGUF weights.
                let run_f32 = |out: &mut [f32]| {
                    let o = Output {
                        data: out,
                        stride: outputs,
                        col0: 0,
                    };
                    if rows >= 128 {
                        linear_gemm(&x, rows, f32_matrix, None, o, Activation::Identity)
                    } else {
                        linear(&x, rows, f32_matrix, None, o, Activation::Identity)
                    }
                };
                let mut mine = Way::default();
                let mut theirs = Way::default();
                let mut today = Way::default();
                // Warm-up, and each way's error; candle's first product also builds its
                // repacked copy of the weights (Q4_K always, Q6_K and Q8_0 for several rows).
                run_ours(QuantPath::Auto, &mut out);
                mine.error = error(&out, outputs, &cols, &want, sr);
                run_f32(&mut out);
                today.error = error(&out, outputs, &cols, &want, sr);
                // candle's F16/BF16 product with many rows runs one scalar-sized dot product
                // per output (19 s for 2048 → 2048 at 512 rows here): measured on the first
                // shape only.
                let slow = matches!(dtype, GgmlDType::F16 | GgmlDType::BF16) && rows >= 128;
                let skip = slow && (inputs, outputs) != (first_shape.1, first_shape.2);
                let (mut first, mut extra) = (f64::INFINITY, 0);
                if !skip {
                    let before = rss();
                    let (t, _, y) = timed(|| qmm.forward(&xt).expect("candle"));
                    extra = rss().saturating_sub(before);
                    first = t;
                    let y: Vec<f32> = y.flatten_all().and_then(|y| y.to_vec1()).expect("output");
                    theirs.error = error(&y, outputs, &cols, &want, sr);
                } else {
                    theirs.error = f64::NAN;
                }
                let candle_ok = first < 30.0;
                for _ in 0..rounds {
                    for way in 0..3 {
                        if rows == 1 {
                            flush.run();
                        }
                        // Let both pools' workers go to sleep between ways.
                        std::thread::sleep(Duration::from_millis(2));
                        let (sink, wall, cpu) = match way {
                            0 => {
                                let (w, c, ()) = timed(|| run_ours(QuantPath::Auto, &mut out));
                                (&mut mine, w, c)
                            }
                            1 if candle_ok => {
                                let (w, c, y) = timed(|| qmm.forward(&xt).expect("candle"));
                                drop(y);
                                (&mut theirs, w, c)
                            }
                            1 => continue,
                            _ => {
                                let (w, c, ()) = timed(|| run_f32(&mut out));
                                (&mut today, w, c)
                            }
                        };
                        sink.walls.push(wall);
                        sink.cpus.push(cpu);
                    }
                }
                println!(
                    "| {name} | {} | {rows} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1e} | {:.1e} | {:.1e} | {} |",
                    type_name(dtype),
                    mine.ms(),
                    match (candle_ok, skip) {
                        (true, _) => theirs.ms(),
                        (false, false) => format!("{:.0} (once)", first * 1e3),
                        (false, true) => "skipped (slow: see 1B q/o)".into(),
                    },
                    today.ms(),
                    ratio(&mine.walls, &theirs.walls),
                    ratio(&mine.walls, &today.walls),
                    mine.cpu_ms(),
                    theirs.cpu_ms(),
                    today.cpu_ms(),
                    mine.error,
                    theirs.error,
                    today.error,
                    if extra >= 1 << 20 {
                        format!("{:.0} MB", extra as f64 / 1e6)
                    } else {
                        "—".into()
                    },
                );
                std::io::stdout().flush().ok();
            }
        }
    }
}
