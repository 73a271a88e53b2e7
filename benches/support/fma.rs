//! The f32 FMA loops that measure a core's peak (`benches/peak.rs`), shared with the benches
//! that state their figures against it (`benches/packed.rs`). Include with
//! `#[cfg(target_arch = "x86_64")] #[path = "support/fma.rs"] mod fma;`.

use std::arch::x86_64::*;

/// `iters` rounds of 12 independent 8-lane FMAs; returns the FLOPs done.
#[target_feature(enable = "avx2,fma")]
pub fn avx2(iters: usize) -> f64 {
    let b = _mm256_set1_ps(std::hint::black_box(0.999_999));
    let c = _mm256_set1_ps(std::hint::black_box(1e-7));
    let mut a = [_mm256_set1_ps(1.0); 12];
    for _ in 0..iters {
        for acc in a.iter_mut() {
            *acc = _mm256_fmadd_ps(*acc, b, c);
        }
    }
    std::hint::black_box(a);
    (iters * 12 * 8 * 2) as f64
}

/// `iters` rounds of 12 independent 16-lane FMAs; returns the FLOPs done.
#[target_feature(enable = "avx512f")]
pub fn avx512(iters: usize) -> f64 {
    let b = _mm512_set1_ps(std::hint::black_box(0.999_999));
    let c = _mm512_set1_ps(std::hint::black_box(1e-7));
    let mut a = [_mm512_set1_ps(1.0); 12];
    for _ in 0..iters {
        for acc in a.iter_mut() {
            *acc = _mm512_fmadd_ps(*acc, b, c);
        }
    }
    std::hint::black_box(a);
    (iters * 12 * 16 * 2) as f64
}
