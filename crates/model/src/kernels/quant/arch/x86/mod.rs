//! x86-64: AVX2+FMA and AVX-512 kernels, and F16C's conversion of halves.

pub(crate) mod f16c;
pub(crate) mod fused;
pub(crate) mod simd;
