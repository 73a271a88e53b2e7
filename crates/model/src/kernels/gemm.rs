//! The one entry to the `gemm` crate's f32 matrix product, on the instruction set [`super::isa`]
//! picked, so that `ATTNVIZ_ISA=avx2` runs every product of the forward pass on the AVX2
//! kernels an AVX2-only CPU would get.
//!
//! `gemm::gemm` chooses its kernels by itself (AVX-512 when the CPU has it and the `x86-v4`
//! feature is on, else AVX2+FMA, else scalar), with no switch. It is assembled from public
//! parts, though: `gemm_common`'s driver and `gemm_f32`'s microkernels for each instruction set.
//! For AVX2 and the baseline this module calls that same driver with the same kernels gemm would
//! pick on such a CPU; for AVX-512 it calls `gemm::gemm` itself.

pub use gemm::Parallelism;

/// `dst ← α·dst + β·lhs·rhs` (α read only when `read_dst`), for `m × k` times `k × n` f32
/// matrices given by pointers and (column, row) strides, as `gemm::gemm`.
///
/// # Safety
/// As `gemm::gemm`: every pointer/stride pair must address valid memory for its whole matrix,
/// and `dst` must not overlap the operands.
#[allow(clippy::too_many_arguments)]
#[inline]
pub unsafe fn gemm(
    m: usize,
    n: usize,
    k: usize,
    dst: *mut f32,
    dst_cs: isize,
    dst_rs: isize,
    read_dst: bool,
    lhs: *const f32,
    lhs_cs: isize,
    lhs_rs: isize,
    rhs: *const f32,
    rhs_cs: isize,
    rhs_rs: isize,
    alpha: f32,
    beta: f32,
    parallelism: Parallelism,
) {
    #[cfg(target_arch = "x86_64")]
    {
        use gemm_common::gemm::gemm_basic_generic;
        use gemm_common::simd::{Scalar, V3};
        match super::isa() {
            super::Isa::Avx512 => {}
            super::Isa::Avx2 => {
                use gemm_f32::microkernel::fma::f32 as ukr;
                // `isa()` saw AVX2 and FMA, so V3 (x86-64-v3) is available.
                let simd = V3::try_new().expect("AVX2 and FMA detected");
                // SAFETY: forwarded from the caller; the kernels are gemm's own AVX2+FMA ones,
                // the ones `gemm::gemm` runs on a CPU without AVX-512.
                unsafe {
                    gemm_basic_generic::<
                        _,
                        f32,
                        8,
                        { ukr::MR_DIV_N * 8 },
                        { ukr::NR },
                        { ukr::MR_DIV_N },
                        { ukr::H_M },
                        { ukr::H_N },
                    >(
                        simd,
                        m,
                        n,
                        k,
                        dst,
                        dst_cs,
                        dst_rs,
                        read_dst,
                        lhs,
                        lhs_cs,
                        lhs_rs,
                        rhs,
                        rhs_cs,
                        rhs_rs,
                        alpha,
                        beta,
                        false,
                        false,
                        false,
                        |a, b, c| a * b + c,
                        &ukr::UKR,
                        &ukr::H_UKR,
                        false,
                        parallelism,
                    )
                };
                return;
            }
            super::Isa::Baseline => {
                use gemm_f32::microkernel::scalar::f32 as ukr;
                // SAFETY: as above, with gemm's scalar kernels.
                unsafe {
                    gemm_basic_generic::<
                        _,
                        f32,
                        1,
                        { ukr::MR_DIV_N },
                        { ukr::NR },
                        { ukr::MR_DIV_N },
                        { ukr::H_M },
                        { ukr::H_N },
                    >(
                        Scalar,
                        m,
                        n,
                        k,
                        dst,
                        dst_cs,
                        dst_rs,
                        read_dst,
                        lhs,
                        lhs_cs,
                        lhs_rs,
                        rhs,
                        rhs_cs,
                        rhs_rs,
                        alpha,
                        beta,
                        false,
                        false,
                        false,
                        |a, b, c| a * b + c,
                        &ukr::UKR,
                        &ukr::H_UKR,
                        false,
                        parallelism,
                    )
                };
                return;
            }
        }
    }
    // SAFETY: forwarded from the caller.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst,
            dst_cs,
            dst_rs,
            read_dst,
            lhs,
            lhs_cs,
            lhs_rs,
            rhs,
            rhs_cs,
            rhs_rs,
            alpha,
            beta,
            false,
            false,
            false,
            parallelism,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::random;
    use super::super::Isa;
    use super::*;

    /// Every instruction set this CPU has gives the same product as f64 loops, for shapes with
    /// and without edge blocks, strided operands and `read_dst`.
    #[test]
    fn every_instruction_set_matches_f64_loops() {
        for (m, n, k) in [
            (1, 1, 1),
            (7, 13, 5),
            (64, 96, 48),
            (130, 70, 300),
            (3, 1000, 17),
        ] {
            let a = random(m * k, 1, 1.0); // [m, k] row-major
            let b = random(n * k, 2, 1.0); // [n, k] row-major: read as Bᵀ through strides
            let c0 = random(m * n, 3, 1.0);
            let mut want = vec![0f64; m * n];
            for i in 0..m {
                for j in 0..n {
                    let dot: f64 = (0..k)
                        .map(|p| a[i * k + p] as f64 * b[j * k + p] as f64)
                        .sum();
                    want[i * n + j] = 0.5 * c0[i * n + j] as f64 + 2.0 * dot;
                }
            }
            for isa in super::super::isa_levels() {
                let mut c = c0.clone();
                super::super::with_isa(isa, || {
                    // SAFETY: c is [m, n] row-major, a [m, k] row-major, b read as [k, n] with
                    // column stride k and row stride 1 inside its n × k values.
                    unsafe {
                        gemm(
                            m,
                            n,
                            k,
                            c.as_mut_ptr(),
                            1,
                            n as isize,
                            true,
                            a.as_ptr(),
                            1,
                            k as isize,
                            b.as_ptr(),
                            k as isize,
                            1,
                            0.5,
                            2.0,
                            Parallelism::Rayon(0),
                        )
                    }
                });
                for (idx, (&got, &w)) in c.iter().zip(&want).enumerate() {
                    let tol = 1e-5 * (k as f64).sqrt() * 4.0 + 1e-6;
                    assert!(
                        (got as f64 - w).abs() <= tol * w.abs().max(1.0),
                        "{isa:?} {m}×{n}×{k} [{idx}]: {got} vs {w}"
                    );
                }
            }
            let _ = Isa::Baseline;
        }
    }
}
