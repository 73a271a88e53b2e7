//! What each instruction-set architecture does faster than the generic code, one folder per
//! architecture, as ggml keeps `ggml-cpu/arch/x86/quants.c` apart from its reference codecs.
//!
//! - [`x86`]: AVX2+FMA and AVX-512 vector operations for the few-rows kernel
//!   ([`super::small`]'s `Simd`), one input row decoded in registers ([`x86::fused`]), and
//!   F16C's conversion of halves.
//!
//! Everywhere else the generic code runs alone: the few-rows kernel on 4-lane arrays the
//! compiler vectorises (its `Portable`), the codecs' portable decoders, and gemm's own kernels
//! for long inputs. A port to another architecture (aarch64's NEON) adds a folder here with its
//! own `Simd` implementation and, where it pays, fused kernels, and a dispatch arm in
//! `small::band_for_cpu`; nothing else changes.

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;
