//! Packed f32 matrix kernels against gemm (issue 46, requirement 1): the prompt-shaped products
//! (512 rows) of the 1B (Llama-3.2-1B: hidden 2048, MLP 8192, k/v 512), 4B (Qwen3-4B: 2560,
//! 9728, q 4096, k/v 1024) and 8B (Llama-3.1-8B: 4096, 14336, k/v 1024) shapes, in GFLOP/s and
//! in % of the FMA peak of the same threads, measured in the same process as
//! `benches/peak.rs` measures one core's (12 independent FMA chains per thread, nothing read
//! from memory), for:
//! - f32 weights `[out, in]`: the `gemm` crate (reading Wᵀ through strides, as the forward pass
//!   did) and the packed kernels;
//! - Q4_K and Q8_0 weights: decoded tiles through gemm (the many-rows path before) and the
//!   packed kernels decoding straight into their panels.
//!
//! Prints figures; asserts nothing. Run: `cargo bench --bench packed` (about two minutes on 2
//! cores); `ATTNVIZ_ISA=avx2` for the AVX2 kernels. Settings (environment):
//! - `BENCH_THREADS=2`: threads (rayon's pool, and the peak's);
//! - `BENCH_ROWS=512`: rows of the input;
//! - `BENCH_ROUNDS=3`: rounds; each figure is the best (and the median) over them, each round
//!   running every way once in turn, so the noise of this shared machine falls on all of them;
//! - `BENCH_SHAPES=1B,8B`, `BENCH_WAYS=f32,Q4_K`: subsets.
//!
//! The load average is printed before and after: figures taken while other builds ran are
//! not the machine's.

use std::time::Instant;

use attnviz::model::kernels::gemm::{gemm, Parallelism};
use attnviz::model::kernels::packed::linear_packed;
use attnviz::model::kernels::quant::{linear_quant_on, QuantMatrix, QuantPath};
use attnviz::model::kernels::{isa, Activation, Isa, Layout, Matrix, Output};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};

#[path = "support/measure.rs"]
mod measure;

use measure::{cpu_seconds, env_usize, load_average, machine, median};

/// (model, product, inputs, outputs).
const SHAPES: [(&str, &str, usize, usize); 13] = [
    ("1B", "q/o 2048→2048", 2048, 2048),
    ("1B", "k/v 2048→512", 2048, 512),
    ("1B", "gate/up 2048→8192", 2048, 8192),
    ("1B", "down 8192→2048", 8192, 2048),
    ("4B", "q 2560→4096", 2560, 4096),
    ("4B", "k/v 2560→1024", 2560, 1024),
    ("4B", "o 4096→2560", 4096, 2560),
    ("4B", "gate/up 2560→9728", 2560, 9728),
    ("4B", "down 9728→2560", 9728, 2560),
    ("8B", "q/o 4096→4096", 4096, 4096),
    ("8B", "k/v 4096→1024", 4096, 1024),
    ("8B", "gate/up 4096→14336", 4096, 14336),
    ("8B", "down 14336→4096", 14336, 4096),
];

/// A way to run a product: its name, and the weight format it reads.
#[derive(Clone, Copy, PartialEq)]
enum Way {
    F32Gemm,
    F32Packed,
    QuantGemm(GgmlDType),
    QuantPacked(GgmlDType),
}

impl Way {
    fn name(self) -> String {
        match self {
            Way::F32Gemm => "f32 gemm crate".into(),
            Way::F32Packed => "f32 packed".into(),
            Way::QuantGemm(d) => format!("{} tiles+gemm", type_name(d)),
            Way::QuantPacked(d) => format!("{} packed", type_name(d)),
        }
    }
    fn format(self) -> &'static str {
        match self {
            Way::F32Gemm | Way::F32Packed => "f32",
            Way::QuantGemm(d) | Way::QuantPacked(d) => type_name(d),
        }
    }
}

fn type_name(d: GgmlDType) -> &'static str {
    attnviz::model::kernels::quant::type_name(d)
}

#[cfg(target_arch = "x86_64")]
#[path = "support/fma.rs"]
mod fma;

/// The f32 FMA peak of `threads` threads running at once, on the instruction set the kernels
/// use: best (and median) of 9 runs, FLOP/s of wall time; and the best FLOP per CPU-second
/// (one core's peak, whatever else runs on the machine).
fn peak(threads: usize) -> (f64, f64, f64) {
    let one = || -> f64 {
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: `isa()` only reports an instruction set the CPU has.
            match isa() {
                Isa::Avx512 => return unsafe { fma::avx512(12_500_000) },
                Isa::Avx2 => return unsafe { fma::avx2(25_000_000) },
                Isa::Baseline => {}
            }
        }
        0.0
    };
    let mut per_cpu: f64 = 0.0;
    let mut rates: Vec<f64> = (0..9)
        .map(|_| {
            let (start, cpu) = (Instant::now(), cpu_seconds());
            let flops: f64 = std::thread::scope(|s| {
                let hs: Vec<_> = (0..threads).map(|_| s.spawn(one)).collect();
                hs.into_iter().map(|h| h.join().expect("peak thread")).sum()
            });
            per_cpu = per_cpu.max(flops / (cpu_seconds() - cpu));
            flops / start.elapsed().as_secs_f64()
        })
        .collect();
    rates.sort_by(f64::total_cmp);
    (rates[8], median(&rates), per_cpu)
}

/// Inputs uniform in [−1, 1] (a small xorshift).
fn uniform(count: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..count)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

fn main() {
    let threads = env_usize("BENCH_THREADS").unwrap_or(2);
    let rows = env_usize("BENCH_ROWS").unwrap_or(512);
    let rounds = env_usize("BENCH_ROUNDS").unwrap_or(3).max(1);
    let shapes_filter = std::env::var("BENCH_SHAPES").ok();
    let ways_filter = std::env::var("BENCH_WAYS").ok();
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_global()
        .expect("thread pool");
    println!("attnviz packed-kernel benchmark: {rows} rows, {threads} threads, best (median) of {rounds} rounds");
    println!("machine: {}", machine());
    println!("load average before: {}", load_average());
    let (peak_best, peak_med, peak_cpu) = peak(threads);
    println!(
        "FMA peak, {threads} threads: {:.1} GFLOP/s ({:.1}); 75 % = {:.1}; per CPU-second {:.1}",
        peak_best / 1e9,
        peak_med / 1e9,
        0.75 * peak_best / 1e9,
        peak_cpu / 1e9
    );
    println!(
        "(% peak: of the wall-time peak above; cpu %: FLOP per CPU-second against the peak's, \
         which other processes' share of the cores does not change)"
    );
    let ways: Vec<Way> = [
        Way::F32Gemm,
        Way::F32Packed,
        Way::QuantGemm(GgmlDType::Q4K),
        Way::QuantPacked(GgmlDType::Q4K),
        Way::QuantGemm(GgmlDType::Q8_0),
        Way::QuantPacked(GgmlDType::Q8_0),
    ]
    .into_iter()
    .filter(|w| {
        ways_filter
            .as_ref()
            .is_none_or(|f| f.split(',').any(|x| x.eq_ignore_ascii_case(w.format())))
    })
    .collect();
    println!(
        "{:<4} {:<20} {:<16} {:>10} {:>10} {:>7} {:>7} {:>7}",
        "", "product", "way", "GFLOP/s", "(median)", "% peak", "(med)", "cpu %"
    );
    for (model, what, inputs, outputs) in SHAPES {
        if shapes_filter
            .as_ref()
            .is_some_and(|f| !f.split(',').any(|x| x.eq_ignore_ascii_case(model)))
        {
            continue;
        }
        let x = uniform(rows * inputs, 1, 1.0);
        let w = uniform(inputs * outputs, 2, 0.02);
        let mut quant: Vec<(GgmlDType, Vec<u8>)> = Vec::new();
        for way in &ways {
            if let Way::QuantGemm(d) = way {
                let t = Tensor::from_slice(&w, (outputs, inputs), &Device::Cpu).expect("tensor");
                let qt = QTensor::quantize(&t, *d).expect("quantising");
                quant.push((*d, qt.data().expect("blocks").into_owned()));
            }
        }
        let mut out = vec![0f32; rows * outputs];
        let flops = 2.0 * (rows * inputs * outputs) as f64;
        let mut times: Vec<Vec<f64>> = vec![Vec::new(); ways.len()];
        let mut cpus: Vec<Vec<f64>> = vec![Vec::new(); ways.len()];
        for _ in 0..rounds {
            for (i, way) in ways.iter().enumerate() {
                let (start, cpu) = (Instant::now(), cpu_seconds());
                match *way {
                    Way::F32Gemm => {
                        // SAFETY: out [rows, outputs], x [rows, inputs], w [outputs, inputs]
                        // read as Wᵀ (column stride inputs, row stride 1), as the forward pass
                        // called gemm.
                        unsafe {
                            gemm(
                                rows,
                                outputs,
                                inputs,
                                out.as_mut_ptr(),
                                1,
                                outputs as isize,
                                false,
                                x.as_ptr(),
                                1,
                                inputs as isize,
                                w.as_ptr(),
                                inputs as isize,
                                1,
                                1.0,
                                1.0,
                                Parallelism::Rayon(0),
                            )
                        }
                    }
                    Way::F32Packed => {
                        let m = Matrix {
                            data: &w,
                            inputs,
                            outputs,
                            layout: Layout::OutIn,
                        };
                        let o = Output {
                            data: &mut out,
                            stride: outputs,
                            col0: 0,
                        };
                        if !linear_packed(&x, rows, m, o) {
                            println!("no packed kernel on this instruction set");
                            return;
                        }
                    }
                    Way::QuantGemm(d) | Way::QuantPacked(d) => {
                        let bytes = &quant.iter().find(|q| q.0 == d).expect("quantised").1;
                        let qm = QuantMatrix::new(bytes, d, outputs, inputs).expect("matrix");
                        let path = if matches!(way, Way::QuantGemm(_)) {
                            QuantPath::Gemm
                        } else {
                            QuantPath::Tiled
                        };
                        let o = Output {
                            data: &mut out,
                            stride: outputs,
                            col0: 0,
                        };
                        linear_quant_on(path, &x, rows, qm, None, o, Activation::Identity)
                            .expect("product");
                    }
                }
                std::hint::black_box(&out);
                times[i].push(start.elapsed().as_secs_f64());
                cpus[i].push(cpu_seconds() - cpu);
            }
        }
        for ((way, t), c) in ways.iter().zip(&times).zip(&cpus) {
            let best = flops / t.iter().copied().fold(f64::INFINITY, f64::min);
            let med = flops / median(t);
            let per_cpu = flops / c.iter().copied().fold(f64::INFINITY, f64::min);
            println!(
                "{model:<4} {what:<20} {:<16} {:>10.1} {:>10.1} {:>6.1}% {:>6.1}% {:>6.1}%",
                way.name(),
                best / 1e9,
                med / 1e9,
                100.0 * best / peak_best,
                100.0 * med / peak_best,
                100.0 * per_cpu / peak_cpu
            );
        }
    }
    println!("load average after: {}", load_average());
}
