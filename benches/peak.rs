//! What one core of this machine can do at best (issue 14, requirement 2): the clock it really
//! runs at, the f32 FMA throughput with 256-bit (AVX2) and 512-bit (AVX-512) vectors, and the
//! single-core read bandwidth from memory. These are the ceilings the forward-pass figures in
//! `docs/performance.md` are compared against. Prints figures; asserts nothing.
//!
//! Run: `cargo bench --bench peak` (one thread, about 10 s). Each figure is the best of several
//! repetitions (a ceiling, not a typical value), and the median beside it.
//!
//! - **Clock**: a chain of dependent integer additions, one per cycle on every x86 core since
//!   the Pentium Pro, so additions per second is cycles per second.
//! - **FMA**: 12 independent accumulators (more than the 2 units × 4 cycles of latency that keep
//!   two FMA pipes busy), `a = a·b + c`, nothing read from memory; 2 FLOP per lane.
//! - **Read bandwidth**: the sum of a 512 MiB f32 buffer (far beyond the caches), 8 vector
//!   accumulators, as a weight-streaming kernel reads its weights.

use std::time::Instant;

#[path = "support/measure.rs"]
mod measure;

use measure::{load_average, machine, median};

const REPS: usize = 9;

/// Best and median of `REPS` runs of `f`, which returns the amount of work it did; work/second.
fn rate(mut f: impl FnMut() -> f64) -> (f64, f64) {
    let mut rates: Vec<f64> = (0..REPS)
        .map(|_| {
            let start = Instant::now();
            let work = std::hint::black_box(f());
            work / start.elapsed().as_secs_f64()
        })
        .collect();
    rates.sort_by(f64::total_cmp);
    (rates[REPS - 1], median(&rates))
}

/// Dependent integer additions: returns how many ran.
fn add_chain(iters: u64) -> f64 {
    let mut x: u64 = std::hint::black_box(1);
    let step: u64 = std::hint::black_box(3);
    // SAFETY: plain register arithmetic; the asm reads and writes only the two named registers
    // and touches no memory or flags that the compiler relies on (`nostack`, `nomem`).
    unsafe {
        std::arch::asm!(
            "2:",
            "add {x}, {s}", "add {x}, {s}", "add {x}, {s}", "add {x}, {s}",
            "add {x}, {s}", "add {x}, {s}", "add {x}, {s}", "add {x}, {s}",
            "add {x}, {s}", "add {x}, {s}", "add {x}, {s}", "add {x}, {s}",
            "add {x}, {s}", "add {x}, {s}", "add {x}, {s}", "add {x}, {s}",
            "dec {n}",
            "jnz 2b",
            x = inout(reg) x,
            s = in(reg) step,
            n = inout(reg) iters => _,
            options(nostack, nomem),
        );
    }
    std::hint::black_box(x);
    (iters * 16) as f64
}

#[cfg(target_arch = "x86_64")]
#[path = "support/fma.rs"]
mod fma;

#[cfg(target_arch = "x86_64")]
mod bandwidth {
    use std::arch::x86_64::*;

    /// Sum of `data` with 8 AVX2 accumulators; returns the bytes read.
    #[target_feature(enable = "avx2,fma")]
    pub fn read(data: &[f32]) -> f64 {
        let mut acc = [_mm256_setzero_ps(); 8];
        let chunks = data.chunks_exact(64);
        for chunk in chunks {
            for (k, a) in acc.iter_mut().enumerate() {
                // SAFETY: `chunk` has 64 f32s, so lanes 8k..8k+8 (k < 8) are in bounds; loadu
                // has no alignment requirement.
                let v = unsafe { _mm256_loadu_ps(chunk.as_ptr().add(8 * k)) };
                *a = _mm256_add_ps(*a, v);
            }
        }
        std::hint::black_box(acc);
        std::mem::size_of_val(data) as f64
    }
}

fn main() {
    println!("attnviz peak benchmark: one core's ceilings (best (median) of {REPS} runs)");
    println!("machine: {}", machine());
    println!("load average before: {}", load_average());
    let (best, med) = rate(|| add_chain(200_000_000));
    println!(
        "clock (dependent adds):      {:>6.2} GHz ({:.2})",
        best / 1e9,
        med / 1e9
    );
    let clock = best;
    #[cfg(target_arch = "x86_64")]
    {
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            // SAFETY: the CPU has AVX2 and FMA (checked just above).
            let (best, med) = rate(|| unsafe { fma::avx2(50_000_000) });
            println!(
                "f32 FMA, AVX2 (256-bit):     {:>6.1} GFLOP/s ({:.1}), {:.1} FLOP/cycle",
                best / 1e9,
                med / 1e9,
                best / clock
            );
        }
        if is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F (checked just above).
            let (best, med) = rate(|| unsafe { fma::avx512(25_000_000) });
            println!(
                "f32 FMA, AVX-512 (512-bit):  {:>6.1} GFLOP/s ({:.1}), {:.1} FLOP/cycle",
                best / 1e9,
                med / 1e9,
                best / clock
            );
        }
        if is_x86_feature_detected!("avx2") {
            let data = vec![1.0f32; 128 << 20];
            // SAFETY: the CPU has AVX2 (checked just above).
            let (best, med) = rate(|| unsafe { bandwidth::read(&data) });
            println!(
                "read bandwidth, 512 MiB:     {:>6.1} GB/s ({:.1})",
                best / 1e9,
                med / 1e9
            );
        }
    }
}
