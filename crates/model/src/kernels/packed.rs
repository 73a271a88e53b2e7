//! Packed f32 matrix products for prompt-shaped inputs (hundreds of rows × a weight matrix),
//! BLIS-style: each operand is copied once per product into the order the microkernel reads it,
//! and the product runs on cache-sized blocks of those copies.
//!
//! - **Activations** (`x`, `[rows, k]`) are packed once per call, in parallel, into slivers of
//!   `MR` rows: sliver `i` holds `x[i·MR + r][p]` at `p·MR + r`, all of `k` contiguous (rows past
//!   the end are zeros). gemm packs the left-hand side again for every weight tile it is handed;
//!   here every task reads the one copy.
//! - **Weights** are packed per task, a panel of `KC` inputs × `NC` outputs at a time, into
//!   slivers of `NR` outputs (`W[k0 + p][n0 + j]` at `p·NR + j`). A quantised weight is decoded
//!   straight into that panel, `NR` rows of one `KC` stretch at a time through a buffer that stays
//!   in L1: no f32 copy of the whole matrix is ever made. Each weight value is packed exactly
//!   once per product.
//!
//!   Not once per model: the forward pass reads f32 weights in place from the checkpoint's memory
//!   map and quantised ones in their blocks, and the few-rows kernels (generation) need them in
//!   that form; a packed copy kept beside them would double the weights' memory. Packing costs
//!   one pass over the weight against `rows` multiply-adds per weight value (about 3 % of the
//!   samples of `cargo bench --bench packed` on the 1B shapes).
//!
//! Blocking, for this machine's caches (Zen 4: L1d 32 KiB, L2 1 MiB per core):
//! - `KC = 256` inputs: an activation sliver (`MR × KC`, 14 KiB for AVX-512's 14 rows) stays in
//!   L1 while the microkernel walks the weight panel's slivers (`KC × NR`, 32 KiB each, streamed
//!   from L2 at 128 bytes per 28 FMAs, far under L2's bandwidth). 256 is also a whole number of
//!   every ggml block (32 or 256 values), so a stretch decodes whole blocks.
//! - `NC ≤ 512` outputs: the weight panel (`KC × NC`, 512 KiB) stays in L2 while every
//!   activation sliver passes over it.
//! - `MC` is all the rows: the activations are packed once, and each task reads them sliver by
//!   sliver from L3 (512 KiB per panel).
//!
//! Microkernels, by [`super::isa`]: AVX-512 `14 × 32` (28 accumulators, two weight vectors and a
//! broadcast: 31 of 32 registers) and AVX2+FMA `6 × 16` (12 accumulators, two weight vectors, a
//! broadcast). The baseline instruction set has none: callers keep gemm there.
//!
//! Parallel over the output columns: each rayon task owns a range of output columns (a multiple
//! of `NR`), packs its own weight panels and writes only its own columns, so no task ever waits
//! for another.

use rayon::prelude::*;

use super::{Isa, Layout, Matrix, Output, SharedMut};

/// Inputs per packed panel (see the module's notes on blocking).
pub(crate) const KC: usize = 256;
/// Most outputs per packed panel.
const NC_MAX: usize = 512;

/// Where the weights come from: something that can write a `KC × NC` panel in packed order.
pub(crate) trait PanelSource: Sync {
    /// Inputs (`k`).
    fn inputs(&self) -> usize;
    /// Outputs (`n`).
    fn outputs(&self) -> usize;
    /// Writes `W[k0 + p][n0 + s·nr + j]` at `dst[s·kc·nr + p·nr + j]` for `p < kc`, every sliver
    /// `s` of `nr` outputs covering `n0..n0 + nc`, zeros for outputs past `n0 + nc`. `k0` is a
    /// multiple of `KC`, and `kc` is `KC` or the rest of the inputs. `scratch` is this thread's
    /// buffer, for sources that decode first.
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
    );
}

/// An f32 weight stored `[outputs, inputs]` (PyTorch's `nn.Linear`).
pub(crate) struct OutIn<'a> {
    pub data: &'a [f32],
    pub inputs: usize,
    pub outputs: usize,
}

impl PanelSource for OutIn<'_> {
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
        _: &mut Vec<f32>,
    ) {
        for (s, sliver) in dst.chunks_exact_mut(kc * nr).enumerate() {
            let o0 = s * nr;
            let rows = nr.min(nc - o0);
            let src = &self.data[(n0 + o0) * self.inputs + k0..];
            transpose_sliver(src, rows, kc, self.inputs, nr, sliver);
        }
    }
}

/// An f32 weight stored `[inputs, outputs]` (GPT-2's Conv1D, packed copies).
pub(crate) struct InOut<'a> {
    pub data: &'a [f32],
    pub inputs: usize,
    pub outputs: usize,
}

impl PanelSource for InOut<'_> {
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
        _: &mut Vec<f32>,
    ) {
        for (s, sliver) in dst.chunks_exact_mut(kc * nr).enumerate() {
            let o0 = s * nr;
            let w = nr.min(nc - o0);
            for p in 0..kc {
                let src = &self.data[(k0 + p) * self.outputs + n0 + o0..][..w];
                let d = &mut sliver[p * nr..][..nr];
                d[..w].copy_from_slice(src);
                d[w..].fill(0.0);
            }
        }
    }
}

/// Transposes `rows` rows of `kc` values (`src`, row `j` starting at `j·stride`) into a sliver
/// of `nr` columns (`dst[p·nr + j] = src[j·stride + p]`), zeros for `j ≥ rows`: packing an
/// `[outputs, inputs]` weight, read in place or decoded row by row.
pub(crate) fn transpose_sliver(
    src: &[f32],
    rows: usize,
    kc: usize,
    stride: usize,
    nr: usize,
    dst: &mut [f32],
) {
    // 8 rows at a time: each destination line gets 8 values per visit.
    let mut j0 = 0;
    while j0 < nr {
        let j1 = (j0 + 8).min(nr);
        for p in 0..kc {
            let d = &mut dst[p * nr + j0..p * nr + j1];
            for (jj, v) in d.iter_mut().enumerate() {
                let j = j0 + jj;
                *v = if j < rows { src[j * stride + p] } else { 0.0 };
            }
        }
        j0 = j1;
    }
}

/// The microkernel geometry of an instruction set.
#[derive(Clone, Copy)]
struct Kernel {
    mr: usize,
    nr: usize,
    /// `C[MR×NR] (+)= A-sliver · B-sliver` over `kc` inputs; `C` at `c` with row stride `ldc`,
    /// added to the product when `load` (after it: `C + Σ`, so its lines can arrive meanwhile).
    run: unsafe fn(usize, *const f32, *const f32, *mut f32, usize, bool),
}

impl Kernel {
    fn for_isa(isa: Isa) -> Option<Kernel> {
        #[cfg(target_arch = "x86_64")]
        match isa {
            Isa::Avx512 => {
                return Some(Kernel {
                    mr: x86::MR_512,
                    nr: 32,
                    run: x86::kernel_avx512,
                })
            }
            Isa::Avx2 => {
                return Some(Kernel {
                    mr: x86::MR_256,
                    nr: 16,
                    run: x86::kernel_avx2,
                })
            }
            Isa::Baseline => {}
        }
        let _ = isa;
        None
    }
}

/// Whether this CPU (as [`super::isa`] sees it) has a packed microkernel.
pub fn available() -> bool {
    Kernel::for_isa(super::isa()).is_some()
}

/// `out[r][col0..col0 + outputs] = x[r] · W` for the `rows` rows of `x` (`[rows, inputs]`,
/// row-major), `W` an f32 [`Matrix`] in either layout: the packed product alone, with no bias
/// or activation (benchmarks compare it with gemm). Returns `false`, having written nothing,
/// where the instruction set has no packed kernel.
///
/// # Panics
/// When the operands' sizes do not match (as [`super::linear`](fn@super::linear)).
pub fn linear_packed(x: &[f32], rows: usize, w: Matrix<'_>, out: Output<'_>) -> bool {
    assert_eq!(w.data.len(), w.inputs * w.outputs, "weight shape");
    let Output { data, stride, col0 } = out;
    match w.layout {
        Layout::OutIn => {
            let src = OutIn {
                data: w.data,
                inputs: w.inputs,
                outputs: w.outputs,
            };
            product(x, rows, &src, data, stride, col0, false)
        }
        Layout::InOut => {
            let src = InOut {
                data: w.data,
                inputs: w.inputs,
                outputs: w.outputs,
            };
            product(x, rows, &src, data, stride, col0, false)
        }
    }
}

/// `out[r][col0 + o] (+)= Σ_p x[r][p] · W[p][o]` for `rows` rows: added onto what `out`
/// holds when `accumulate` (the caller wrote the bias there), written otherwise. `x` is `[rows,
/// k]` row-major, `out` rows of `stride` values. Returns `false`, having done nothing, when the
/// instruction set has no packed kernel (the caller then runs gemm).
pub(crate) fn product<S: PanelSource>(
    x: &[f32],
    rows: usize,
    w: &S,
    out: &mut [f32],
    stride: usize,
    col0: usize,
    accumulate: bool,
) -> bool {
    let Some(kernel) = Kernel::for_isa(super::isa()) else {
        return false;
    };
    let (k, n) = (w.inputs(), w.outputs());
    assert_eq!(x.len(), rows * k, "input shape");
    assert!(
        col0 + n <= stride && out.len() == rows * stride,
        "output shape"
    );
    if rows == 0 || n == 0 {
        return true;
    }
    if k == 0 {
        if !accumulate {
            for row in out.chunks_exact_mut(stride) {
                row[col0..col0 + n].fill(0.0);
            }
        }
        return true;
    }
    let (mr, nr) = (kernel.mr, kernel.nr);
    let slivers = rows.div_ceil(mr);

    // The activations, packed once (a reused per-thread buffer: the caller's).
    let mut a_buf = A_BUFFER.with(|b| b.take());
    let a = aligned(&mut a_buf, slivers * mr * k);
    a.par_chunks_mut(mr * k)
        .enumerate()
        .for_each(|(i, sliver)| pack_rows(x, k, i * mr, rows, mr, sliver));
    let a: &[f32] = a;

    // Output column ranges: at least four per thread, so that a thread slowed by other work on
    // this shared machine is made up for by stealing, and at most NC_MAX wide.
    let threads = rayon::current_num_threads().max(1);
    let chunks = n.div_ceil(NC_MAX).max(4 * threads);
    let nc = n.div_ceil(chunks).next_multiple_of(nr).min(NC_MAX);
    let chunks = n.div_ceil(nc);
    let dst = SharedMut(out.as_mut_ptr());
    let task = |t: usize| {
        let n0 = t * nc;
        let ncw = nc.min(n - n0);
        let (mut b_buf, mut scratch) = B_BUFFER.with(|b| b.take());
        let b = aligned(&mut b_buf, KC * ncw.next_multiple_of(nr));
        let mut k0 = 0;
        while k0 < k {
            let kc = KC.min(k - k0);
            let panel = &mut b[..kc * ncw.next_multiple_of(nr)];
            w.pack(n0, ncw, k0, kc, nr, panel, &mut scratch);
            let load = accumulate || k0 > 0;
            for i in 0..slivers {
                let a_sl = &a[i * mr * k + k0 * mr..][..kc * mr];
                let r0 = i * mr;
                let rn = mr.min(rows - r0);
                for (s, b_sl) in panel.chunks_exact(kc * nr).enumerate() {
                    let c0 = s * nr;
                    let cn = nr.min(ncw - c0);
                    // SAFETY: this task writes only rows r0..r0 + rn, columns col0 + n0 + c0 ..
                    // + cn of `out` ([rows, stride], col0 + n ≤ stride, checked above), a
                    // region no other task touches (column ranges are disjoint); the slivers hold
                    // kc·mr and kc·nr values; the kernel was chosen for this CPU.
                    unsafe {
                        let c = dst.ptr().add(r0 * stride + col0 + n0 + c0);
                        if rn == mr && cn == nr {
                            (kernel.run)(kc, a_sl.as_ptr(), b_sl.as_ptr(), c, stride, load);
                        } else {
                            edge(kernel, kc, a_sl, b_sl, c, stride, load, rn, cn);
                        }
                    }
                }
            }
            k0 += kc;
        }
        B_BUFFER.with(|cell| cell.set((b_buf, scratch)));
    };
    (0..chunks).into_par_iter().for_each(task);
    A_BUFFER.with(|b| b.set(a_buf));
    true
}

/// A partial tile (fewer than `MR` rows or `NR` columns left): the kernel runs on a full tile
/// in a local buffer, and only the part inside the matrix is copied in and out.
///
/// # Safety
/// `c` must address `rn` rows (stride `ldc`) of `cn` writable values.
#[allow(clippy::too_many_arguments)]
unsafe fn edge(
    kernel: Kernel,
    kc: usize,
    a: &[f32],
    b: &[f32],
    c: *mut f32,
    ldc: usize,
    load: bool,
    rn: usize,
    cn: usize,
) {
    let mut tile = [0f32; 14 * 32];
    let nr = kernel.nr;
    // SAFETY: the caller vouches for c's rn × cn block; the tile holds MR × NR ≤ 14 × 32.
    unsafe {
        if load {
            for r in 0..rn {
                for j in 0..cn {
                    tile[r * nr + j] = *c.add(r * ldc + j);
                }
            }
        }
        (kernel.run)(kc, a.as_ptr(), b.as_ptr(), tile.as_mut_ptr(), nr, load);
        for r in 0..rn {
            for j in 0..cn {
                *c.add(r * ldc + j) = tile[r * nr + j];
            }
        }
    }
}

/// Packs rows `r0..r0 + mr` of `x` (`[rows, k]`; rows past `rows` as zeros) into `dst`
/// (`p·mr + r`).
fn pack_rows(x: &[f32], k: usize, r0: usize, rows: usize, mr: usize, dst: &mut [f32]) {
    for r in 0..mr {
        if r0 + r < rows {
            let src = &x[(r0 + r) * k..][..k];
            for (p, &v) in src.iter().enumerate() {
                dst[p * mr + r] = v;
            }
        } else {
            for p in 0..k {
                dst[p * mr + r] = 0.0;
            }
        }
    }
}

thread_local! {
    /// The packed activations of this thread's last product, kept for the next one.
    static A_BUFFER: std::cell::Cell<Vec<f32>> = const { std::cell::Cell::new(Vec::new()) };
    /// This thread's weight panel and decoding buffer, kept between tasks.
    static B_BUFFER: std::cell::Cell<(Vec<f32>, Vec<f32>)> =
        const { std::cell::Cell::new((Vec::new(), Vec::new())) };
}

/// `len` values of `buf` starting at a 64-byte boundary (a cache line, so that no vector load
/// of a packed sliver straddles two), growing it when needed.
fn aligned(buf: &mut Vec<f32>, len: usize) -> &mut [f32] {
    if buf.len() < len + 16 {
        *buf = vec![0.0; len + 16];
    }
    let skip = buf.as_ptr().align_offset(64).min(15);
    &mut buf[skip..skip + len]
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// Asks for the `rows × lines` cache lines of a tile of `C` (row stride `ldc` values) to be
    /// brought into L1 while the kernel runs over the inputs, so that adding it at the end does
    /// not wait for them: with outputs thousands of values wide its rows lie a multiple of 4 KiB
    /// apart, in one L1 set, and are rarely still there.
    #[inline(always)]
    fn prefetch_tile(c: *const f32, ldc: usize, rows: usize, lines: usize) {
        for r in 0..rows {
            for l in 0..lines {
                // SAFETY: a prefetch is a hint that never faults; the address is computed with
                // wrapping arithmetic.
                unsafe {
                    _mm_prefetch::<_MM_HINT_T0>(c.wrapping_add(r * ldc + 16 * l) as *const i8)
                }
            }
        }
    }

    /// Rows of the AVX-512 tile.
    pub(super) const MR_512: usize = 14;
    /// Rows of the AVX2 tile.
    pub(super) const MR_256: usize = 6;

    /// `C[14 × 32] (+)= A · B` over `kc` inputs: 28 zmm accumulators; per input, two weight
    /// vectors and 14 broadcasts of an activation.
    ///
    /// # Safety
    /// `a` holds `kc × 14`, `b` `kc × 32` values, `c` 14 rows of 32 writable values at stride
    /// `ldc`; the CPU has AVX-512F.
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::needless_range_loop)]
    pub(super) unsafe fn kernel_avx512(
        kc: usize,
        a: *const f32,
        b: *const f32,
        c: *mut f32,
        ldc: usize,
        load: bool,
    ) {
        const MR: usize = MR_512;
        // SAFETY: every access stays inside the blocks the caller vouched for.
        unsafe {
            let mut acc = [[_mm512_setzero_ps(); 2]; MR];
            if load {
                prefetch_tile(c, ldc, MR, 2);
            }
            let (mut a, mut b) = (a, b);
            for _ in 0..kc {
                let b0 = _mm512_load_ps(b);
                let b1 = _mm512_load_ps(b.add(16));
                for r in 0..MR {
                    let av = _mm512_set1_ps(*a.add(r));
                    acc[r][0] = _mm512_fmadd_ps(av, b0, acc[r][0]);
                    acc[r][1] = _mm512_fmadd_ps(av, b1, acc[r][1]);
                }
                a = a.add(MR);
                b = b.add(32);
            }
            for r in 0..MR {
                let (c0, c1) = (c.add(r * ldc), c.add(r * ldc + 16));
                if load {
                    acc[r][0] = _mm512_add_ps(_mm512_loadu_ps(c0), acc[r][0]);
                    acc[r][1] = _mm512_add_ps(_mm512_loadu_ps(c1), acc[r][1]);
                }
                _mm512_storeu_ps(c0, acc[r][0]);
                _mm512_storeu_ps(c1, acc[r][1]);
            }
        }
    }

    /// `C[6 × 16] (+)= A · B` over `kc` inputs: 12 ymm accumulators; per input, two weight
    /// vectors and 6 broadcasts.
    ///
    /// # Safety
    /// `a` holds `kc × 6`, `b` `kc × 16` values (32-byte aligned), `c` 6 rows of 16 writable
    /// values at stride `ldc`; the CPU has AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::needless_range_loop)]
    pub(super) unsafe fn kernel_avx2(
        kc: usize,
        a: *const f32,
        b: *const f32,
        c: *mut f32,
        ldc: usize,
        load: bool,
    ) {
        const MR: usize = MR_256;
        // SAFETY: every access stays inside the blocks the caller vouched for.
        unsafe {
            let mut acc = [[_mm256_setzero_ps(); 2]; MR];
            if load {
                prefetch_tile(c, ldc, MR, 1);
            }
            let (mut a, mut b) = (a, b);
            for _ in 0..kc {
                let b0 = _mm256_load_ps(b);
                let b1 = _mm256_load_ps(b.add(8));
                for r in 0..MR {
                    let av = _mm256_broadcast_ss(&*a.add(r));
                    acc[r][0] = _mm256_fmadd_ps(av, b0, acc[r][0]);
                    acc[r][1] = _mm256_fmadd_ps(av, b1, acc[r][1]);
                }
                a = a.add(MR);
                b = b.add(16);
            }
            for r in 0..MR {
                let (c0, c1) = (c.add(r * ldc), c.add(r * ldc + 8));
                if load {
                    acc[r][0] = _mm256_add_ps(_mm256_loadu_ps(c0), acc[r][0]);
                    acc[r][1] = _mm256_add_ps(_mm256_loadu_ps(c1), acc[r][1]);
                }
                _mm256_storeu_ps(c0, acc[r][0]);
                _mm256_storeu_ps(c1, acc[r][1]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::random;
    use super::*;

    /// `x · W` in f64, `W` given `[outputs, inputs]`.
    fn reference(x: &[f32], rows: usize, w: &[f32], k: usize, n: usize) -> Vec<f64> {
        let mut out = vec![0.0; rows * n];
        for r in 0..rows {
            for o in 0..n {
                out[r * n + o] = (0..k)
                    .map(|p| x[r * k + p] as f64 * w[o * k + p] as f64)
                    .sum();
            }
        }
        out
    }

    /// Both weight layouts, written and accumulated, into a column range of a wider output, on
    /// every instruction set with a packed kernel, at sizes that leave partial tiles in every
    /// direction (m, n, k not multiples of the tile; k = 1; m = 1; k over several panels).
    #[test]
    fn packed_products_match_f64_on_odd_sizes() {
        for (m, k, n) in [
            (1, 1, 1),
            (1, 300, 70),
            (15, 1, 33),
            (29, 257, 65),
            (14, 256, 32),
            (6, 16, 16),
            (100, 600, 531),
            (3, 5, 1100),
        ] {
            let x = random(m * k, 11, 1.0);
            let w = random(n * k, 12, 1.0);
            let mut wt = vec![0.0; n * k];
            for o in 0..n {
                for p in 0..k {
                    wt[p * n + o] = w[o * k + p];
                }
            }
            let want = reference(&x, m, &w, k, n);
            let (stride, col0) = (n + 7, 3);
            for isa in super::super::isa_levels() {
                for accumulate in [false, true] {
                    for in_out in [false, true] {
                        let init = random(m * stride, 13, 1.0);
                        let mut out = init.clone();
                        let done = super::super::with_isa(isa, || {
                            if in_out {
                                let src = InOut {
                                    data: &wt,
                                    inputs: k,
                                    outputs: n,
                                };
                                product(&x, m, &src, &mut out, stride, col0, accumulate)
                            } else {
                                let src = OutIn {
                                    data: &w,
                                    inputs: k,
                                    outputs: n,
                                };
                                product(&x, m, &src, &mut out, stride, col0, accumulate)
                            }
                        });
                        if !done {
                            assert_eq!(isa, Isa::Baseline);
                            assert_eq!(out, init, "nothing written without a kernel");
                            continue;
                        }
                        for r in 0..m {
                            for c in 0..stride {
                                let got = out[r * stride + c] as f64;
                                let before = init[r * stride + c] as f64;
                                let want = if (col0..col0 + n).contains(&c) {
                                    want[r * n + c - col0] + if accumulate { before } else { 0.0 }
                                } else {
                                    before
                                };
                                let tol = 1e-6 * (k as f64).sqrt() * 8.0 + 1e-6;
                                assert!(
                                    (got - want).abs() <= tol,
                                    "{isa:?} in_out {in_out} acc {accumulate} {m}×{k}×{n} \
                                     [{r}, {c}]: {got} vs {want}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}
