//! The few-rows kernel's vector operations ([`crate::kernels::quant::small`]'s `Simd`) on x86's
//! registers: AVX2 with FMA (8 lanes) and AVX-512 (16 lanes).

use std::arch::x86_64::*;

use crate::kernels::quant::small::Simd;

/// 8 lanes of AVX2 with FMA. The methods carry the target features themselves (an
/// intrinsic is inlined only into a function compiled with its features; without them,
/// each would stay a call that passes vectors through memory).
pub(crate) struct Avx2;

// SAFETY: AVX2 and FMA instructions only; the kernels dispatch here only on a CPU that has
// them (`isa()`), from functions compiled with them.
unsafe impl Simd for Avx2 {
    const LANES: usize = 8;
    type M = crate::kernels::quant::codecs::Fused;
    type V = __m256;
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn zero() -> __m256 {
        _mm256_setzero_ps()
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn load(p: *const f32) -> __m256 {
        // SAFETY: 8 readable values at p (the caller's contract); unaligned load.
        unsafe { _mm256_loadu_ps(p) }
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn store(p: *mut f32, v: __m256) {
        // SAFETY: 8 writable values at p (the caller's contract); unaligned store.
        unsafe { _mm256_storeu_ps(p, v) }
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn mul_add(a: __m256, b: __m256, c: __m256) -> __m256 {
        _mm256_fmadd_ps(a, b, c)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn add(a: __m256, b: __m256) -> __m256 {
        _mm256_add_ps(a, b)
    }
}

/// 16 lanes of AVX-512.
pub(crate) struct Avx512;

// SAFETY: AVX-512F instructions only; dispatched here only on a CPU that has them.
unsafe impl Simd for Avx512 {
    const LANES: usize = 16;
    type M = crate::kernels::quant::codecs::Fused;
    type V = __m512;
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn zero() -> __m512 {
        _mm512_setzero_ps()
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn load(p: *const f32) -> __m512 {
        // SAFETY: 16 readable values at p (the caller's contract); unaligned load.
        unsafe { _mm512_loadu_ps(p) }
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn store(p: *mut f32, v: __m512) {
        // SAFETY: 16 writable values at p (the caller's contract); unaligned store.
        unsafe { _mm512_storeu_ps(p, v) }
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn mul_add(a: __m512, b: __m512, c: __m512) -> __m512 {
        _mm512_fmadd_ps(a, b, c)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn add(a: __m512, b: __m512) -> __m512 {
        _mm512_add_ps(a, b)
    }
}
