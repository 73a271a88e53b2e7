//! Quantised GGUF tensors → f32, with candle's dequantisation kernels, straight from the memory
//! map into the final buffer (no intermediate copy of the quantised bytes), one row at a time so
//! that llama.cpp's q/k row permutation is undone on the way.

use candle_core::quantized::k_quants::{
    BlockQ2K, BlockQ3K, BlockQ4K, BlockQ4_0, BlockQ4_1, BlockQ5K, BlockQ5_0, BlockQ5_1, BlockQ6K,
    BlockQ8K, BlockQ8_0, BlockQ8_1,
};
use candle_core::quantized::GgmlType;

use crate::kernels::quant::{QuantMatrix, QuantType};
use rayon::prelude::*;

/// The ggml types attnviz dequantises (all those candle's CPU kernels cover), for messages.
pub(crate) const SUPPORTED: &str =
    "F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, MXFP4";

/// A dequantised tensor: row-major f32 values and their shape (transformers' order: a linear
/// weight is `[out_features, in_features]`).
#[derive(Clone, Debug, PartialEq)]
pub struct F32Tensor {
    /// Dimensions, outermost first.
    pub shape: Vec<usize>,
    /// `shape.iter().product()` values.
    pub data: Vec<f32>,
}

pub use crate::kernels::quant::type_name;

/// The row permutation llama.cpp's converter applies to the q and k projections of llama models
/// (so that its interleaved RoPE, on pairs (2i, 2i+1), computes what transformers' rotate_half
/// RoPE computes on pairs (i, i + d/2)), as a map from transformers' row to the stored row.
///
/// With `heads` heads of `d = rows / heads` rows each: transformers' row `h·d + j·d/2 + i`
/// (i < d/2, j ∈ {0, 1}) is stored at row `h·d + 2i + j`.
pub fn unpermute_rows(rows: usize, heads: usize) -> Option<Vec<usize>> {
    if heads == 0 || !rows.is_multiple_of(heads) || !(rows / heads).is_multiple_of(2) {
        return None;
    }
    let d = rows / heads;
    let half = d / 2;
    Some(
        (0..rows)
            .map(|r| {
                let (h, within) = (r / d, r % d);
                let (j, i) = (within / half, within % half);
                h * d + 2 * i + j
            })
            .collect(),
    )
}

/// Dequantise `bytes` (a whole tensor of `rows × cols` elements of `dtype`, validated by the
/// caller: `cols` a multiple of the block size, `bytes.len()` exactly the tensor's size) into a
/// new buffer. With a map (every entry below `rows`), the result has `row_map.len()` rows and
/// its row `r` is stored row `row_map[r]`.
pub(crate) fn dequantize(
    dtype: impl Into<QuantType>,
    bytes: &[u8],
    rows: usize,
    cols: usize,
    row_map: Option<&[usize]>,
) -> Vec<f32> {
    use QuantType as D;
    match dtype.into() {
        D::F32 => rows_to_f32::<f32>(bytes, rows, cols, row_map),
        D::F16 => rows_to_f32::<half::f16>(bytes, rows, cols, row_map),
        D::BF16 => rows_to_f32::<half::bf16>(bytes, rows, cols, row_map),
        D::Q4_0 => rows_to_f32::<BlockQ4_0>(bytes, rows, cols, row_map),
        D::Q4_1 => rows_to_f32::<BlockQ4_1>(bytes, rows, cols, row_map),
        D::Q5_0 => rows_to_f32::<BlockQ5_0>(bytes, rows, cols, row_map),
        D::Q5_1 => rows_to_f32::<BlockQ5_1>(bytes, rows, cols, row_map),
        D::Q8_0 => rows_to_f32::<BlockQ8_0>(bytes, rows, cols, row_map),
        D::Q8_1 => rows_to_f32::<BlockQ8_1>(bytes, rows, cols, row_map),
        D::Q2K => rows_to_f32::<BlockQ2K>(bytes, rows, cols, row_map),
        D::Q3K => rows_to_f32::<BlockQ3K>(bytes, rows, cols, row_map),
        D::Q4K => rows_to_f32::<BlockQ4K>(bytes, rows, cols, row_map),
        D::Q5K => rows_to_f32::<BlockQ5K>(bytes, rows, cols, row_map),
        D::Q6K => rows_to_f32::<BlockQ6K>(bytes, rows, cols, row_map),
        D::Q8K => rows_to_f32::<BlockQ8K>(bytes, rows, cols, row_map),
        D::Mxfp4 => mxfp4_rows(bytes, rows, cols, row_map),
    }
}

/// MXFP4 rows (which candle does not know) through the kernels' own decoder.
fn mxfp4_rows(bytes: &[u8], rows: usize, cols: usize, row_map: Option<&[usize]>) -> Vec<f32> {
    let out_rows = row_map.map_or(rows, <[usize]>::len);
    let mut out = vec![0f32; out_rows * cols];
    // The caller checked the byte size, so the matrix is well formed.
    let Ok(m) = QuantMatrix::new(bytes, QuantType::Mxfp4, rows, cols) else {
        return out;
    };
    if cols == 0 {
        return out;
    }
    for (r, dst) in out.chunks_exact_mut(cols).enumerate() {
        m.dequantize_rows(row_map.map_or(r, |map| map[r]), dst);
    }
    out
}

/// Rows per parallel work item: about 64k output values, so small tensors stay on one thread.
fn rows_per_task(cols: usize) -> usize {
    (65_536 / cols.max(1)).max(1)
}

fn rows_to_f32<T: GgmlType>(
    bytes: &[u8],
    rows: usize,
    cols: usize,
    row_map: Option<&[usize]>,
) -> Vec<f32> {
    let blocks_per_row = cols / T::BLCK_SIZE;
    let total_blocks = rows * blocks_per_row;
    debug_assert_eq!(bytes.len(), total_blocks * std::mem::size_of::<T>());

    // The blocks are read in place when the mapping puts them at a suitable address (always, for
    // a well-formed file: the data section and every tensor are 32-byte aligned). Otherwise they
    // are first copied into a buffer aligned for any block type.
    let aligned: Vec<u64>;
    let source: &[u8] = if (bytes.as_ptr() as usize).is_multiple_of(std::mem::align_of::<T>()) {
        bytes
    } else {
        let mut buffer = vec![0u64; bytes.len().div_ceil(8)];
        // SAFETY: the u64 buffer holds at least `bytes.len()` bytes, and any byte pattern is a
        // valid u64.
        let view = unsafe {
            std::slice::from_raw_parts_mut(buffer.as_mut_ptr().cast::<u8>(), bytes.len())
        };
        view.copy_from_slice(bytes);
        aligned = buffer;
        // SAFETY: as above; `aligned` lives until the end of this function.
        unsafe { std::slice::from_raw_parts(aligned.as_ptr().cast::<u8>(), bytes.len()) }
    };
    debug_assert!(std::mem::align_of::<T>() <= 8);
    // SAFETY: `source` is aligned for `T` (checked above, or an 8-aligned copy) and holds exactly
    // `total_blocks` blocks of `size_of::<T>()` bytes (the caller checked the tensor's byte size).
    // Every `T` here is a `repr(C)` struct of f16/f32/u8/i8 fields or a plain float, for which
    // any bit pattern is a valid value.
    let blocks: &[T] =
        unsafe { std::slice::from_raw_parts(source.as_ptr().cast::<T>(), total_blocks) };

    let out_rows = row_map.map_or(rows, <[usize]>::len);
    let mut out = vec![0f32; out_rows * cols];
    prefault(&mut out);
    if cols == 0 {
        return out;
    }
    out.par_chunks_mut(cols * rows_per_task(cols))
        .enumerate()
        .for_each(|(task, chunk)| {
            let first = task * rows_per_task(cols);
            for (k, dst) in chunk.chunks_exact_mut(cols).enumerate() {
                let row = first + k;
                let src = row_map.map_or(row, |map| map[row]);
                T::to_float(&blocks[src * blocks_per_row..][..blocks_per_row], dst);
            }
        });
    out
}

/// Fault in a fresh output buffer's pages with one system call (Linux's
/// `MADV_POPULATE_WRITE`, 5.14+) instead of one page fault per 4 KiB as the values are written.
/// Materialising SmolLM2's 538 MB of f32 is mostly the kernel's work (0.3 s system time against
/// 0.1 s user time); populating up front took the dequantisation from about 370 to 270 ms
/// (median of 6 fresh processes each, alternating, 2 cores). Huge pages were faster at the
/// median but took up to 1 s on this VM now and then (see `kernels::capture_buffer`), so no.
/// Where the advice is unknown (older kernels, other systems) the pages fault in as usual.
fn prefault(buf: &mut [f32]) {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        const PAGE: usize = 4096;
        if std::mem::size_of_val(buf) < 64 * PAGE {
            return;
        }
        let start = (buf.as_mut_ptr() as usize).next_multiple_of(PAGE);
        let end = (buf.as_mut_ptr() as usize + std::mem::size_of_val(buf)) / PAGE * PAGE;
        if end > start {
            // SAFETY: advice on whole pages inside our own writable allocation; populating them
            // for writing changes no contents (they are zero, and stay zero).
            unsafe {
                libc::madvise(
                    start as *mut libc::c_void,
                    end - start,
                    libc::MADV_POPULATE_WRITE,
                );
            }
        }
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let _ = buf;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unpermute_matches_the_reference_formula_for_head_dim_64() {
        // tests/reference/README.md: HF row h·64 + j·32 + i is GGUF row h·64 + 2i + j.
        let map = unpermute_rows(3 * 64, 3).unwrap();
        for h in 0..3 {
            for j in 0..2 {
                for i in 0..32 {
                    assert_eq!(map[h * 64 + j * 32 + i], h * 64 + 2 * i + j);
                }
            }
        }
    }

    /// llama.cpp's converter: `w.reshape(heads, 2, d/2, ...).swapaxes(1, 2).reshape(w.shape)`,
    /// i.e. stored row `h·d + 2i + j` holds HF row `h·d + j·d/2 + i`. Applying it and then our
    /// map must give back every row, for any head size.
    #[test]
    fn unpermute_inverts_llama_cpp_permutation() {
        for (rows, heads) in [(8, 1), (16, 4), (48, 3), (128, 2), (576, 9)] {
            let d = rows / heads;
            let mut stored = vec![usize::MAX; rows];
            for h in 0..heads {
                for j in 0..2 {
                    for i in 0..d / 2 {
                        stored[h * d + 2 * i + j] = h * d + j * (d / 2) + i;
                    }
                }
            }
            let map = unpermute_rows(rows, heads).unwrap();
            let recovered: Vec<usize> = map.iter().map(|&s| stored[s]).collect();
            assert_eq!(
                recovered,
                (0..rows).collect::<Vec<_>>(),
                "{rows} rows, {heads} heads"
            );
        }
    }

    #[test]
    fn unpermute_rejects_shapes_without_even_heads() {
        assert!(unpermute_rows(10, 0).is_none());
        assert!(unpermute_rows(10, 3).is_none());
        assert!(unpermute_rows(9, 3).is_none());
    }

    #[test]
    fn f32_rows_are_copied_and_reordered() {
        let values: Vec<f32> = (0..12).map(|v| v as f32).collect();
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let out = dequantize(QuantType::F32, &bytes, 3, 4, Some(&[2, 0, 1]));
        assert_eq!(
            out,
            [8., 9., 10., 11., 0., 1., 2., 3., 4., 5., 6., 7.].to_vec()
        );
        // An odd start address takes the aligned-copy path and gives the same values.
        let mut shifted = vec![0u8];
        shifted.extend_from_slice(&bytes);
        let out = dequantize(QuantType::F32, &shifted[1..], 3, 4, None);
        assert_eq!(out, values);
    }
}
