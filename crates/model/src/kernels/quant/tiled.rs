//! The many-rows path: tiles of weight rows are decoded into an f32 buffer and gemm multiplies
//! each tile as it multiplies f32 weights (reading the `[out, in]` tile as Wᵀ through strides,
//! as [`crate::kernels::linear::linear_gemm`] does). Decoding takes one pass over each
//! weight; gemm then does `rows` multiply-adds per weight, so from a few dozen rows on the
//! product runs at gemm's f32 speed.

use rayon::prelude::*;

use super::codecs::{decode_with, Block, Fused, Split};
use super::{Cpu, Job};
use crate::kernels::gemm::{gemm, Parallelism};
use crate::kernels::packed;

/// Decoded values per tile: 16 MiB of f32. gemm packs the whole input (`rows × inputs`) on the
/// calling thread at every call, while the other threads wait, so fewer, larger tiles pack it
/// fewer times: a Qwen3-4B-shaped Q4_K_M prompt of 512 tokens with every layer captured
/// 21.5 s with 4 MiB tiles, 18.6 s with 16 MiB, 18.3 s with 32 MiB, 19.3 s with 64 MiB (2
/// threads; `cargo bench --bench gguf_sizes`). Still hundreds of weight rows for Llama's
/// widths, so gemm's own blocking works as on the whole matrix.
const TILE_VALUES: usize = 1 << 22;

#[cfg(test)]
thread_local! {
    /// A smaller tile for this thread's products, so that a test spans several tiles at sizes
    /// its f64 reference can afford.
    pub(super) static TEST_TILE_VALUES: std::cell::Cell<Option<usize>> =
        const { std::cell::Cell::new(None) };
}

/// [`TILE_VALUES`], or a test's smaller tile.
fn tile_values() -> usize {
    #[cfg(test)]
    if let Some(v) = TEST_TILE_VALUES.with(|t| t.get()) {
        return v;
    }
    TILE_VALUES
}

/// Runs the product of `job` into `out` (its checked `[rows, stride]` buffer): through the
/// packed kernels ([`crate::kernels::packed`]), which decode each weight straight into their
/// panels, where the instruction set has one; else decoded tiles through gemm.
pub(super) fn run<B: Block>(job: &Job<'_>, out: &mut [f32]) {
    let (rows, k, n) = (job.rows, job.w.inputs, job.w.outputs);
    let (stride, col0) = (job.stride, job.col0);
    if let Some(bias) = job.bias {
        for row in out.chunks_exact_mut(stride) {
            row[col0..col0 + n].copy_from_slice(bias);
        }
    }
    if packed::KC.is_multiple_of(B::VALUES) {
        let src = Panels::<B> {
            bytes: job.w.bytes,
            row_bytes: job.w.row_bytes(),
            inputs: k,
            outputs: n,
            cpu: Cpu::get(),
            block: std::marker::PhantomData,
        };
        if packed::product(job.x, rows, &src, out, stride, col0, job.bias.is_some()) {
            return;
        }
    }
    run_tiles::<B>(job, out)
}

/// The product of `job` through decoded tiles and gemm, whatever the instruction set.
pub(super) fn run_gemm<B: Block>(job: &Job<'_>, out: &mut [f32]) {
    if let Some(bias) = job.bias {
        for row in out.chunks_exact_mut(job.stride) {
            row[job.col0..job.col0 + job.w.outputs].copy_from_slice(bias);
        }
    }
    run_tiles::<B>(job, out)
}

/// A quantised weight as a source of packed panels: each sliver's rows are decoded, one `KC`
/// stretch of whole blocks at a time, into a buffer of `NR × KC` values (32 KiB at most, in
/// L1), then transposed into the panel.
struct Panels<'a, B: Block> {
    bytes: &'a [u8],
    row_bytes: usize,
    inputs: usize,
    outputs: usize,
    cpu: Cpu,
    block: std::marker::PhantomData<B>,
}

impl<B: Block> packed::PanelSource for Panels<'_, B> {
    fn inputs(&self) -> usize {
        self.inputs
    }
    fn outputs(&self) -> usize {
        self.outputs
    }
    #[allow(clippy::too_many_arguments)]
    fn pack(
        &self,
        n0: usize,
        nc: usize,
        k0: usize,
        kc: usize,
        nr: usize,
        dst: &mut [f32],
        scratch: &mut Vec<f32>,
    ) {
        // k0 and kc are whole blocks: k0 a multiple of KC, which B::VALUES divides, and kc KC or
        // the rest of a row of whole blocks.
        let (b0, b1) = (k0 / B::VALUES * B::BYTES, (k0 + kc) / B::VALUES * B::BYTES);
        scratch.resize(nr * kc, 0.0);
        for (s, sliver) in dst.chunks_exact_mut(kc * nr).enumerate() {
            let o0 = n0 + s * nr;
            let rn = nr.min(n0 + nc - o0);
            for j in 0..rn {
                let row = &self.bytes[(o0 + j) * self.row_bytes..][b0..b1];
                decode_rows_on::<B>(self.cpu, row, &mut scratch[j * kc..(j + 1) * kc]);
            }
            packed::transpose_sliver(scratch, rn, kc, kc, nr, sliver);
        }
    }
}

/// The product of `job` through decoded tiles and gemm, onto the bias already in `out`.
fn run_tiles<B: Block>(job: &Job<'_>, out: &mut [f32]) {
    let (rows, k, n) = (job.rows, job.w.inputs, job.w.outputs);
    let (stride, col0) = (job.stride, job.col0);
    // Tile rows: a multiple of 16 (gemm's column blocks), at least 16.
    let tile = (tile_values() / k).max(16) / 16 * 16;
    let tile = tile.min(n);
    let mut decoded = vec![0f32; tile * k];
    let row_bytes = job.w.row_bytes();
    // Chosen here, on the calling thread (a test's forced choice is per thread).
    let cpu = Cpu::get();
    let mut t0 = 0;
    while t0 < n {
        let tn = (n - t0).min(tile);
        let src = &job.w.bytes[t0 * row_bytes..(t0 + tn) * row_bytes];
        let buf = &mut decoded[..tn * k];
        // About 64 KiB of decoded values per task.
        let per_task = (16_384 / k).max(1);
        buf.par_chunks_mut(per_task * k)
            .zip(src.par_chunks(per_task * row_bytes))
            .for_each(|(dst, src)| decode_rows_on::<B>(cpu, src, dst));
        // SAFETY: dst addresses rows of `stride` values from column col0 + t0, tn wide
        // (col0 + n ≤ stride and t0 + tn ≤ n, checked by `linear_quant`), inside `out`
        // ([rows, stride]); lhs is x, [rows, k] row-major; rhs is the decoded tile [tn, k]
        // row-major read as its transpose (column stride k, row stride 1). No overlap: the
        // tile and x are not `out`.
        unsafe {
            gemm(
                rows,
                tn,
                k,
                out.as_mut_ptr().add(col0 + t0),
                1,
                stride as isize,
                job.bias.is_some(),
                job.x.as_ptr(),
                1,
                k as isize,
                buf.as_ptr(),
                k as isize,
                1,
                1.0,
                1.0,
                Parallelism::Rayon(0),
            );
        }
        t0 += tn;
    }
}

/// Decodes whole blocks of `src` into `out` (see [`Block::decode`]), on the instruction set
/// the kernels use.
pub(super) fn decode_rows<B: Block>(src: &[u8], out: &mut [f32]) {
    decode_rows_on::<B>(Cpu::get(), src, out)
}

/// [`decode_rows`] on `cpu`.
fn decode_rows_on<B: Block>(cpu: Cpu, src: &[u8], out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::kernels::Isa;

        #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
        unsafe fn avx512<B: Block>(f16c: bool, src: &[u8], out: &mut [f32]) {
            decode_with::<B, Fused>(f16c, src, out)
        }
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2<B: Block>(f16c: bool, src: &[u8], out: &mut [f32]) {
            decode_with::<B, Fused>(f16c, src, out)
        }
        match cpu.isa {
            // SAFETY: `Cpu::get` checked at run time that the CPU has these features (and
            // F16C, where `f16c` says so).
            Isa::Avx512 => return unsafe { avx512::<B>(cpu.f16c, src, out) },
            // SAFETY: as above.
            Isa::Avx2 => return unsafe { avx2::<B>(cpu.f16c, src, out) },
            Isa::Baseline => {}
        }
    }
    decode_with::<B, Split>(cpu.f16c, src, out)
}
