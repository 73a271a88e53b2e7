//! Every format and instruction set against an independent reference: candle's own
//! `GgmlType::to_float` (llama.cpp's dequantisation, ported) decoding the same bytes, then a
//! plain f64 dot product.

use candle_core::quantized::k_quants::{
    BlockQ2K, BlockQ3K, BlockQ4K, BlockQ4_0, BlockQ4_1, BlockQ5K, BlockQ5_0, BlockQ5_1, BlockQ6K,
    BlockQ8K, BlockQ8_0, BlockQ8_1,
};
use candle_core::quantized::{GgmlDType, GgmlType};

use super::super::activation::{gelu_erf, silu};
use super::super::testing::random;
use super::super::{isa_levels, with_isa};
use super::*;

const ALL: [GgmlDType; 15] = [
    GgmlDType::F32,
    GgmlDType::F16,
    GgmlDType::BF16,
    GgmlDType::Q4_0,
    GgmlDType::Q4_1,
    GgmlDType::Q5_0,
    GgmlDType::Q5_1,
    GgmlDType::Q8_0,
    GgmlDType::Q8_1,
    GgmlDType::Q2K,
    GgmlDType::Q3K,
    GgmlDType::Q4K,
    GgmlDType::Q5K,
    GgmlDType::Q6K,
    GgmlDType::Q8K,
];

/// A small deterministic generator of bytes (xorshift).
struct Bytes(u64);

impl Bytes {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn fill(&mut self, out: &mut [u8]) {
        for b in out {
            *b = (self.next() >> 32) as u8;
        }
    }

    /// A random finite f16 (any sign), its exponent within `lo..=hi` (biased, 0 = subnormal).
    fn f16(&mut self, lo: u16, hi: u16) -> [u8; 2] {
        let v = self.next();
        let exponent = lo + (v % (hi - lo + 1) as u64) as u16;
        let mantissa = ((v >> 8) & 0x3ff) as u16;
        let sign = ((v >> 20) & 1) as u16;
        ((sign << 15) | (exponent << 10) | mantissa).to_le_bytes()
    }
}

/// Byte offsets of each block's f16 scales (`d`, and `m`/`dmin`/`s` where there is one).
fn scale_offsets(dtype: GgmlDType) -> &'static [usize] {
    use GgmlDType as D;
    match dtype {
        D::Q4_0 | D::Q5_0 | D::Q8_0 => &[0],
        D::Q4_1 | D::Q5_1 | D::Q8_1 | D::Q4K | D::Q5K => &[0, 2],
        D::Q2K => &[80, 82],
        D::Q3K => &[108],
        D::Q6K => &[208],
        D::F32 | D::F16 | D::BF16 | D::Q8K => &[],
    }
}

/// `count` random blocks of `dtype` with finite scales: random bits everywhere, then each scale
/// a random finite f16 of magnitude 2⁻¹⁴…2⁻¹ (and now and then a subnormal or zero); float
/// formats get finite values of many magnitudes, subnormals included for f16 (for f32 and bf16
/// every finite magnitude with `wide`, else 2⁻²⁷…2¹², whose products stay finite).
fn random_blocks(dtype: GgmlDType, count: usize, seed: u64) -> Vec<u8> {
    blocks_of(dtype, count, seed, false)
}

fn blocks_of(dtype: GgmlDType, count: usize, seed: u64, wide: bool) -> Vec<u8> {
    let (_, size) = block_layout(dtype);
    let mut g = Bytes(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut bytes = vec![0u8; count * size];
    g.fill(&mut bytes);
    for (i, block) in bytes.chunks_exact_mut(size).enumerate() {
        let special = i % 29 == 7;
        match dtype {
            GgmlDType::F16 => {
                let (lo, hi) = if special { (0, 30) } else { (9, 16) };
                block.copy_from_slice(&g.f16(lo, hi));
            }
            GgmlDType::BF16 => {
                // An f32's top half: exponent 2⁻⁸…2⁴ (or anything finite now and then).
                let v = g.next();
                let exponent = match (special, wide) {
                    (true, true) => v % 255,
                    (true, false) => 100 + v % 40,
                    _ => 119 + v % 13,
                } as u32;
                let bits =
                    (((v >> 9) & 1) as u32) << 15 | exponent << 7 | ((v >> 12) & 0x7f) as u32;
                block.copy_from_slice(&(bits as u16).to_le_bytes());
            }
            GgmlDType::F32 => {
                let v = g.next();
                let exponent = match (special, wide) {
                    (true, true) => v % 255,
                    (true, false) => 100 + v % 40,
                    _ => 119 + v % 13,
                } as u32;
                let bits = (((v >> 9) & 1) as u32 * 0x8000_0000)
                    | (exponent << 23)
                    | ((v >> 12) & 0x7f_ffff) as u32;
                block.copy_from_slice(&bits.to_le_bytes());
            }
            GgmlDType::Q8K => {
                let d = (((g.next() % 1000) as f32 + 1.0) * 1e-5).to_le_bytes();
                block[..4].copy_from_slice(&d);
            }
            _ => {
                for &at in scale_offsets(dtype) {
                    let s = if special && at == 0 {
                        g.f16(0, 1) // subnormal (or zero) scale
                    } else {
                        g.f16(1, 14)
                    };
                    block[at..at + 2].copy_from_slice(&s);
                }
            }
        }
    }
    bytes
}

/// candle's `to_float` on `bytes` (whole blocks of `T`), from an aligned copy.
fn candle_to_float<T: GgmlType>(bytes: &[u8]) -> Vec<f32> {
    let size = std::mem::size_of::<T>();
    assert_eq!(bytes.len() % size, 0);
    assert!(std::mem::align_of::<T>() <= 8);
    let mut aligned = vec![0u64; bytes.len().div_ceil(8)];
    // SAFETY: the u64 buffer holds at least bytes.len() bytes; any bytes are valid u64s.
    unsafe {
        std::ptr::copy_nonoverlapping(
            bytes.as_ptr(),
            aligned.as_mut_ptr().cast::<u8>(),
            bytes.len(),
        );
    }
    let count = bytes.len() / size;
    // SAFETY: 8-aligned (≥ T's alignment), `count` whole T's; every T here is plain data (f16,
    // f32, u8, i8 fields) for which any bits are a valid value.
    let blocks = unsafe { std::slice::from_raw_parts(aligned.as_ptr().cast::<T>(), count) };
    let mut out = vec![0f32; count * T::BLCK_SIZE];
    T::to_float(blocks, &mut out);
    out
}

/// The reference dequantisation of whole blocks of `dtype`.
fn reference(dtype: GgmlDType, bytes: &[u8]) -> Vec<f32> {
    use GgmlDType as D;
    match dtype {
        D::F32 => candle_to_float::<f32>(bytes),
        D::F16 => candle_to_float::<half::f16>(bytes),
        D::BF16 => candle_to_float::<half::bf16>(bytes),
        D::Q4_0 => candle_to_float::<BlockQ4_0>(bytes),
        D::Q4_1 => candle_to_float::<BlockQ4_1>(bytes),
        D::Q5_0 => candle_to_float::<BlockQ5_0>(bytes),
        D::Q5_1 => candle_to_float::<BlockQ5_1>(bytes),
        D::Q8_0 => candle_to_float::<BlockQ8_0>(bytes),
        D::Q8_1 => candle_to_float::<BlockQ8_1>(bytes),
        D::Q2K => candle_to_float::<BlockQ2K>(bytes),
        D::Q3K => candle_to_float::<BlockQ3K>(bytes),
        D::Q4K => candle_to_float::<BlockQ4K>(bytes),
        D::Q5K => candle_to_float::<BlockQ5K>(bytes),
        D::Q6K => candle_to_float::<BlockQ6K>(bytes),
        D::Q8K => candle_to_float::<BlockQ8K>(bytes),
    }
}

#[test]
fn block_layouts_are_candles() {
    for dtype in ALL {
        assert_eq!(
            block_layout(dtype),
            (dtype.block_size(), dtype.type_size()),
            "{dtype:?}"
        );
    }
}

#[test]
fn f16_conversion_is_exact_for_every_value() {
    for bits in 0..=u16::MAX {
        let want = half::f16::from_bits(bits).to_f32();
        let got = codecs::f16_to_f32(bits);
        if want.is_nan() {
            assert!(got.is_nan(), "{bits:#06x}");
        } else {
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "{bits:#06x}: {got} vs {want}"
            );
        }
    }
}

/// Every decoder, on every instruction set here, gives candle's values bit for bit, on random
/// blocks (every bit pattern of the quantised values, finite scales of every size).
#[test]
fn decoding_matches_candles_to_float_bit_for_bit() {
    for dtype in ALL {
        let (values, _) = block_layout(dtype);
        let count = 4096 / values + 3;
        let bytes = blocks_of(dtype, count, 11, true);
        let want = reference(dtype, &bytes);
        for isa in isa_levels() {
            let mut got = vec![f32::NAN; count * values];
            let m = QuantMatrix::new(&bytes, dtype, 1, count * values).unwrap();
            let rows = with_isa(isa, || m.dequantize_rows(0, &mut got));
            assert_eq!(rows, 1);
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(w.is_finite(), "{dtype:?}: reference value {i} is {w}");
                assert_eq!(
                    g.to_bits(),
                    w.to_bits(),
                    "{dtype:?} {isa:?} value {i}: {g} vs {w}"
                );
            }
        }
    }
}

#[test]
fn dequantize_rows_reads_the_rows_asked_for() {
    let (outputs, inputs) = (5, 512);
    let bytes = random_blocks(GgmlDType::Q4K, outputs * 2, 3);
    let m = QuantMatrix::new(&bytes, GgmlDType::Q4K, outputs, inputs).unwrap();
    let all = reference(GgmlDType::Q4K, &bytes);
    let mut two = vec![0f32; 2 * inputs];
    assert_eq!(m.dequantize_rows(2, &mut two), 2);
    assert_eq!(two, all[2 * inputs..4 * inputs]);
    // Past the end: only what is there.
    let mut three = vec![0f32; 3 * inputs];
    assert_eq!(m.dequantize_rows(4, &mut three), 1);
    assert_eq!(three[..inputs], all[4 * inputs..]);
    assert_eq!(m.dequantize_rows(5, &mut three), 0);
}

/// The product in f64 on the reference weights (`[outputs, inputs]`), and beside each value
/// `Σ|x·w| + |b|`, the scale any reordering of its f32 sums is measured against.
fn naive(
    x: &[f32],
    rows: usize,
    w: &[f32],
    bias: Option<&[f32]>,
    inputs: usize,
    outputs: usize,
) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(rows * outputs);
    for r in 0..rows {
        let xr = &x[r * inputs..][..inputs];
        for o in 0..outputs {
            let wr = &w[o * inputs..][..inputs];
            let b = bias.map_or(0.0, |b| b[o] as f64);
            let (mut dot, mut mag) = (b, b.abs());
            for (a, c) in xr.iter().zip(wr) {
                let p = *a as f64 * *c as f64;
                dot += p;
                mag += p.abs();
            }
            out.push((dot, mag));
        }
    }
    out
}

/// How far `got` is from `want`, as a fraction of the scale of its sums.
fn relative(got: f32, (want, mag): (f64, f64)) -> f64 {
    (got as f64 - want).abs() / mag.max(f64::MIN_POSITIVE)
}

/// One product through [`linear_quant`] into columns `col0..col0 + outputs` of a NaN-filled
/// `[rows, stride]` buffer, on `isa`; checks that every other column kept its NaN and returns
/// the product's own columns.
#[allow(clippy::too_many_arguments)]
fn product(
    isa: crate::kernels::Isa,
    path: QuantPath,
    x: &[f32],
    rows: usize,
    w: QuantMatrix<'_>,
    bias: Option<&[f32]>,
    col0: usize,
    stride: usize,
    activation: Activation,
) -> Vec<f32> {
    let outputs = w.outputs();
    let mut out = vec![f32::NAN; rows * stride];
    let o = Output {
        data: &mut out,
        stride,
        col0,
    };
    with_isa(isa, || {
        linear_quant_on(path, x, rows, w, bias, o, activation)
    })
    .unwrap();
    let mut mine = Vec::with_capacity(rows * outputs);
    for row in out.chunks_exact(stride) {
        for (c, v) in row.iter().enumerate() {
            let inside = (col0..col0 + outputs).contains(&c);
            assert_eq!(
                !inside,
                v.is_nan(),
                "column {c} of {stride} (product at {col0})"
            );
        }
        mine.extend_from_slice(&row[col0..col0 + outputs]);
    }
    mine
}

/// Every format on every instruction set here, both paths (few rows, tiled) at every row count,
/// against f64 on
/// candle's dequantised weights: within 10⁻⁵ of the sums' scale `Σ|x·w| + |b|` (f32 rounding
/// in another order; the weights themselves are exact). Shapes with one block per row, a
/// single row, row counts that leave partial register blocks, output counts that leave
/// partial weight-row groups and bands, and bands that run in parallel.
#[test]
fn products_match_f64_on_candles_dequantised_weights() {
    for dtype in ALL {
        let (values, _) = block_layout(dtype);
        // Inputs: one block; several; for floats, lengths with a vector tail too.
        let widths: Vec<usize> = if values == 1 {
            vec![1, 37, 300, 1030]
        } else {
            vec![values, 3 * values, 4096 / values * values + values]
        };
        for (wi, &inputs) in widths.iter().enumerate() {
            for (rows, outputs) in [
                (1, 1),
                (1, 37),
                (2, 5),
                (3, 17),
                (5, 9),
                (7, 70),
                (TILED_ROWS - 1, 23),
                (TILED_ROWS, 23),
                (70, 41),
            ] {
                let seed = (wi * 100 + rows * 7 + outputs) as u64;
                let bytes = random_blocks(dtype, outputs * inputs / values, seed);
                let w = QuantMatrix::new(&bytes, dtype, outputs, inputs).unwrap();
                let wf = reference(dtype, &bytes);
                let x = random(rows * inputs, seed + 1, 1.0);
                let b = random(outputs, seed + 2, 0.5);
                let bias = (rows % 2 == 1).then_some(b.as_slice());
                let want = naive(&x, rows, &wf, bias, inputs, outputs);
                let ways = isa_levels()
                    .into_iter()
                    .flat_map(|isa| [(isa, QuantPath::FewRows), (isa, QuantPath::Tiled)]);
                for (isa, path) in ways {
                    let id = Activation::Identity;
                    let got = product(isa, path, &x, rows, w, bias, 3, outputs + 5, id);
                    for (i, (&g, &wv)) in got.iter().zip(&want).enumerate() {
                        let e = relative(g, wv);
                        assert!(
                            e <= 1e-5,
                            "{dtype:?} {isa:?} {path:?} {rows}×{inputs}→{outputs} [{}, {}]: {g} vs {} (error {e:.2e} of {:.3e})",
                            i / outputs,
                            i % outputs,
                            wv.0,
                            wv.1
                        );
                    }
                }
            }
        }
    }
}

/// The tiled path over several tiles (a test tile of 2²⁰ decoded values, 64 rows at 16 384
/// inputs), with a bias and an activation applied to the product's columns only.
#[test]
fn tiled_products_span_several_tiles() {
    // 2²⁰ values a tile here (the product's own tile is 2²², 256 rows at 16 384 inputs): 64
    // rows, so 150 outputs are two whole tiles and part of a third.
    tiled::TEST_TILE_VALUES.with(|t| t.set(Some(1 << 20)));
    for dtype in [GgmlDType::Q4K, GgmlDType::Q8_0, GgmlDType::F16] {
        let (values, _) = block_layout(dtype);
        let (rows, inputs, outputs) = (TILED_ROWS + 1, 16_384, 150);
        let bytes = random_blocks(dtype, outputs * inputs / values, 5);
        let w = QuantMatrix::new(&bytes, dtype, outputs, inputs).unwrap();
        let wf = reference(dtype, &bytes);
        let x = random(rows * inputs, 6, 1.0);
        let b = random(outputs, 7, 0.5);
        let want = naive(&x, rows, &wf, Some(&b), inputs, outputs);
        for isa in isa_levels() {
            for activation in [Activation::Identity, Activation::Silu] {
                let got = product(
                    isa,
                    QuantPath::Auto,
                    &x,
                    rows,
                    w,
                    Some(&b),
                    2,
                    outputs + 3,
                    activation,
                );
                for (i, (&g, &(v, mag))) in got.iter().zip(&want).enumerate() {
                    let (v, mag) = match activation {
                        // silu's slope is below 1.1 everywhere, so the bound carries over.
                        Activation::Silu => (silu(v as f32) as f64, mag * 1.1 + 1e-6),
                        _ => (v, mag),
                    };
                    let e = relative(g, (v, mag));
                    assert!(
                        e <= 1e-5,
                        "{dtype:?} {isa:?} {activation:?} [{i}]: {g} vs {v}"
                    );
                }
            }
        }
    }
}

/// Weights as a real checkpoint's look (candle's quantiser on Gaussian-like values), a
/// Llama-3.2-1B-shaped slice (2048 inputs), one row and a prompt's worth: every output within
/// 10⁻⁵ of the largest output's size, and of its own sums' scale.
#[test]
fn realistic_weights_stay_within_1e_5() {
    use candle_core::quantized::QTensor;
    use candle_core::{Device, Tensor};
    let (inputs, outputs) = (2048, 96);
    // Sums of uniforms: roughly Gaussian, σ ≈ 0.02 (a trained Llama's weight scale).
    let u: Vec<f32> = random(outputs * inputs * 4, 9, 0.02);
    let wf32: Vec<f32> = u
        .chunks_exact(4)
        .map(|c| c.iter().sum::<f32>() * 0.87)
        .collect();
    for dtype in [
        GgmlDType::Q4_0,
        GgmlDType::Q4K,
        GgmlDType::Q6K,
        GgmlDType::Q8_0,
        GgmlDType::F16,
        GgmlDType::BF16,
    ] {
        let t = Tensor::from_slice(&wf32, (outputs, inputs), &Device::Cpu).unwrap();
        let q = QTensor::quantize(&t, dtype).unwrap();
        let bytes = q.data().unwrap().into_owned();
        let w = QuantMatrix::new(&bytes, dtype, outputs, inputs).unwrap();
        let wf = reference(dtype, &bytes);
        for rows in [1, 64] {
            let x = random(rows * inputs, 10 + rows as u64, 1.0);
            let want = naive(&x, rows, &wf, None, inputs, outputs);
            let largest = want.iter().map(|v| v.0.abs()).fold(0.0, f64::max);
            for isa in isa_levels() {
                let got = product(
                    isa,
                    QuantPath::Auto,
                    &x,
                    rows,
                    w,
                    None,
                    0,
                    outputs,
                    Activation::Identity,
                );
                let mut worst = 0f64;
                for (&g, &wv) in got.iter().zip(&want) {
                    assert!(relative(g, wv) <= 1e-5, "{dtype:?} {isa:?} {rows} rows");
                    worst = worst.max((g as f64 - wv.0).abs() / largest);
                }
                eprintln!(
                    "{dtype:?} {isa:?} {rows} rows: max error {worst:.2e} of the largest output"
                );
                assert!(worst <= 1e-5, "{dtype:?} {isa:?} {rows} rows: {worst:e}");
            }
        }
    }
}

#[test]
fn activations_apply_to_the_product() {
    let (rows, inputs, outputs) = (3, 64, 10);
    let bytes = random_blocks(GgmlDType::Q8_0, outputs * 2, 12);
    let w = QuantMatrix::new(&bytes, GgmlDType::Q8_0, outputs, inputs).unwrap();
    let wf = reference(GgmlDType::Q8_0, &bytes);
    let x = random(rows * inputs, 13, 1.0);
    let want = naive(&x, rows, &wf, None, inputs, outputs);
    let isa = isa_levels()[0];
    let gelu = product(
        isa,
        QuantPath::Auto,
        &x,
        rows,
        w,
        None,
        0,
        outputs,
        Activation::GeluErf,
    );
    let relu = product(
        isa,
        QuantPath::Tiled,
        &x,
        rows,
        w,
        None,
        1,
        outputs + 1,
        Activation::Relu,
    );
    for ((g, r), (v, _)) in gelu.iter().zip(&relu).zip(&want) {
        assert!((g - gelu_erf(*v as f32)).abs() <= 1e-5 * v.abs().max(1.0) as f32);
        assert!((r - v.max(0.0) as f32).abs() <= 1e-5 * v.abs().max(1.0) as f32);
    }
}

/// Every wrong size is an error that says what was wrong, and nothing is written.
#[test]
fn bad_shapes_are_errors_not_panics() {
    let bytes = random_blocks(GgmlDType::Q4_0, 6, 1); // 6 blocks: 3 rows of 64, or 2 of 96
    let e = QuantMatrix::new(&bytes, GgmlDType::Q4_0, 3, 48).unwrap_err();
    assert!(
        matches!(
            e,
            QuantError::PartialBlock {
                block: 32,
                inputs: 48,
                ..
            }
        ),
        "{e}"
    );
    let e = QuantMatrix::new(&bytes, GgmlDType::Q4_0, 4, 64).unwrap_err();
    assert_eq!(
        e.to_string(),
        "a 4 × 64 Q4_0 matrix takes 144 bytes, but 108 were given"
    );
    let e = QuantMatrix::new(&bytes, GgmlDType::Q4_0, usize::MAX, 64).unwrap_err();
    assert!(matches!(e, QuantError::TooLarge { .. }), "{e}");
    let e = QuantMatrix::new(&bytes, GgmlDType::Q4K, usize::MAX / 2, 256).unwrap_err();
    assert!(matches!(e, QuantError::TooLarge { .. }), "{e}");
    assert!(QuantMatrix::new(&bytes[..0], GgmlDType::Q4_0, 0, 64).is_ok());

    let w = QuantMatrix::new(&bytes, GgmlDType::Q4_0, 3, 64).unwrap();
    let x = vec![1.0f32; 2 * 64];
    let bias = vec![0.0f32; 3];
    let mut out = vec![7.0f32; 2 * 5];
    let run = |out: &mut [f32], x: &[f32], rows, bias: Option<&[f32]>, len: usize, stride, col0| {
        linear_quant(
            x,
            rows,
            w,
            bias,
            Output {
                data: &mut out[..len],
                stride,
                col0,
            },
            Activation::Identity,
        )
    };
    let o = &mut out;
    let e = run(o, &x[..100], 2, None, 10, 5, 0).unwrap_err();
    assert_eq!(
        e.to_string(),
        "the input of a 64 → 3 product over 2 rows holds 100 values, not 128"
    );
    let e = run(o, &x, 3, None, 10, 5, 0);
    assert!(matches!(e, Err(QuantError::Operand { what: "input", .. })));
    let e = run(o, &x, 2, Some(&bias[..2]), 10, 5, 0);
    assert!(matches!(e, Err(QuantError::Operand { what: "bias", .. })));
    let e = run(o, &x, 2, None, 10, 5, 3);
    assert!(matches!(e, Err(QuantError::Columns { .. })));
    let e = run(o, &x, 2, None, 10, 5, usize::MAX);
    assert!(matches!(e, Err(QuantError::Columns { .. })));
    let e = run(o, &x, 2, None, 9, 5, 0);
    assert!(matches!(e, Err(QuantError::Operand { what: "output", .. })));
    let e = run(o, &x, usize::MAX, None, 10, 5, 0);
    assert!(matches!(e, Err(QuantError::Operand { .. })));
    assert!(o.iter().all(|&v| v == 7.0), "nothing written on error");
    // The same call with the right sizes runs.
    run(o, &x, 2, Some(&bias), 10, 5, 2).unwrap();
    assert!(out.iter().any(|&v| v != 7.0));
}

/// A matrix with no inputs gives its bias (or zeros), as `linear` does; no rows or no outputs
/// write nothing.
#[test]
fn empty_shapes() {
    let w = QuantMatrix::new(&[], GgmlDType::Q4K, 3, 0).unwrap();
    let bias = [1.0f32, 2.0, 3.0];
    let mut out = vec![9.0f32; 2 * 4];
    let o = Output {
        data: &mut out,
        stride: 4,
        col0: 1,
    };
    linear_quant(&[], 2, w, Some(&bias), o, Activation::Identity).unwrap();
    assert_eq!(out, [9.0, 1.0, 2.0, 3.0, 9.0, 1.0, 2.0, 3.0]);
    let w = QuantMatrix::new(&[], GgmlDType::Q8_0, 0, 64).unwrap();
    let mut none: Vec<f32> = vec![];
    let o = Output {
        data: &mut none,
        stride: 0,
        col0: 0,
    };
    linear_quant(&[0.0; 128], 2, w, None, o, Activation::Identity).unwrap();
}

/// F32 tensors at an odd address (a map never puts them there, but a caller may) take the
/// decoding path and give what the aligned, in-place path gives.
#[test]
fn misaligned_f32_weights_are_decoded() {
    let (rows, inputs, outputs) = (2, 40, 6);
    let w = random(outputs * inputs, 14, 0.5);
    let x = random(rows * inputs, 15, 1.0);
    let want = naive(&x, rows, &w, None, inputs, outputs);
    // The same bytes at an f32-aligned address and one byte further.
    let aligned: Vec<u8> = w.iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut shifted = vec![0u8; aligned.len() + 8];
    let offset = (1..8)
        .find(|o| !(shifted.as_ptr() as usize + o).is_multiple_of(4))
        .unwrap();
    shifted[offset..offset + aligned.len()].copy_from_slice(&aligned);
    let mut copy = vec![0f32; w.len()];
    copy.copy_from_slice(&w);
    // SAFETY: a Vec<f32>'s buffer viewed as its bytes (u8 has no alignment or validity needs).
    let in_place =
        unsafe { std::slice::from_raw_parts(copy.as_ptr().cast::<u8>(), copy.len() * 4) };
    for bytes in [in_place, &shifted[offset..offset + aligned.len()]] {
        let m = QuantMatrix::new(bytes, GgmlDType::F32, outputs, inputs).unwrap();
        assert_eq!(
            m.as_f32().is_some(),
            (bytes.as_ptr() as usize).is_multiple_of(4)
        );
        for isa in isa_levels() {
            let got = product(
                isa,
                QuantPath::Auto,
                &x,
                rows,
                m,
                None,
                0,
                outputs,
                Activation::Identity,
            );
            for (&g, &wv) in got.iter().zip(&want) {
                assert!(relative(g, wv) <= 1e-5, "{g} vs {}", wv.0);
            }
        }
    }
}

/// The one-row kernels' 64-byte-aligned copy of the input row holds the row, every length.
#[cfg(target_arch = "x86_64")]
#[test]
fn aligned_copy_of_the_input_row_is_the_row() {
    for len in [0, 1, 15, 16, 17, 37, 2048] {
        let x: Vec<f32> = (0..len).map(|i| i as f32 * 0.5 - 3.0).collect();
        let copy = super::arch::x86::fused::Aligned::of(&x);
        assert_eq!(copy.as_slice(), x.as_slice(), "length {len}");
        assert_eq!(copy.as_slice().as_ptr().align_offset(64), 0, "length {len}");
    }
}

/// One row on the fused kernels gives the same bits from an input row at any address (the
/// kernel copies a misaligned row to a 64-byte boundary first).
#[test]
fn one_row_products_do_not_depend_on_the_input_rows_address() {
    let (inputs, outputs) = (512, 40);
    for dtype in [GgmlDType::Q4K, GgmlDType::Q6K, GgmlDType::Q8_0] {
        let (values, _) = block_layout(dtype);
        let bytes = random_blocks(dtype, outputs * inputs / values, 5);
        let w = QuantMatrix::new(&bytes, dtype, outputs, inputs).unwrap();
        let wide = random(inputs + 16, 6, 1.0);
        let run = |x: &[f32]| {
            let mut out = vec![0f32; outputs];
            let o = Output {
                data: &mut out,
                stride: outputs,
                col0: 0,
            };
            linear_quant(x, 1, w, None, o, Activation::Identity).unwrap();
            out
        };
        let first = run(&wide[..inputs]);
        for shift in 1..16 {
            let x: Vec<f32> = wide[..inputs].to_vec();
            let mut shifted = vec![0f32; shift];
            shifted.extend_from_slice(&x);
            assert_eq!(
                run(&shifted[shift..]),
                first,
                "{dtype:?}, input {shift} floats on"
            );
        }
    }
}

/// MXFP4 rows made and dequantised by gguf-py (`tests/reference/make_gpt_oss_mxfp4.py` writes
/// `mxfp4-blocks.json`: every code in both nibbles, scales from 2⁻¹²⁸ up): the codec gives
/// gguf-py's values bit for bit, and products on both paths and every instruction set give its
/// f64 dot products within 10⁻⁵ of the sums' scale.
#[test]
fn mxfp4_matches_gguf_py_values_and_dot_products() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/reference/mxfp4-blocks.json");
    let text = std::fs::read_to_string(&path).expect("mxfp4-blocks.json");
    let s: serde_json::Value = serde_json::from_str(&text).unwrap();
    let (rows, cols) = (
        s["rows"].as_u64().unwrap() as usize,
        s["cols"].as_u64().unwrap() as usize,
    );
    let list = |key: &str| -> Vec<f64> {
        s[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect()
    };
    let bytes: Vec<u8> = list("bytes").iter().map(|&b| b as u8).collect();
    let (values, x, dots) = (list("values"), list("x"), list("dots"));
    let x: Vec<f32> = x.iter().map(|&v| v as f32).collect();
    let w = QuantMatrix::new(&bytes, QuantType::Mxfp4, rows, cols).unwrap();
    assert_eq!(block_layout(QuantType::Mxfp4), (32, 17));
    let mut decoded = vec![0f32; rows * cols];
    assert_eq!(w.dequantize_rows(0, &mut decoded), rows);
    for (i, (&a, &b)) in decoded.iter().zip(&values).enumerate() {
        assert_eq!(
            a as f64,
            b,
            "value {i} (row {}, column {})",
            i / cols,
            i % cols
        );
    }
    // Each row's sums' scale, from gguf-py's values.
    let mags: Vec<f64> = values
        .chunks_exact(cols)
        .map(|r| r.iter().zip(&x).map(|(v, &a)| (v * a as f64).abs()).sum())
        .collect();
    for n in [1, 3] {
        let xs: Vec<f32> = (0..n).flat_map(|_| x.iter().copied()).collect();
        let ways = isa_levels()
            .into_iter()
            .flat_map(|isa| [(isa, QuantPath::FewRows), (isa, QuantPath::Tiled)]);
        for (isa, path) in ways {
            let got = product(isa, path, &xs, n, w, None, 0, rows, Activation::Identity);
            for (i, &g) in got.iter().enumerate() {
                let o = i % rows;
                let e = relative(g, (dots[o], mags[o]));
                assert!(
                    e <= 1e-5,
                    "{isa:?} {path:?} {n} rows, output {o}: {g} vs {} (error {e:.2e})",
                    dots[o]
                );
            }
        }
    }
}

/// A truncated MXFP4 matrix is refused in one line naming the type.
#[test]
fn mxfp4_byte_counts_are_checked() {
    let bytes = vec![0u8; 2 * 17 - 1];
    let err = QuantMatrix::new(&bytes, QuantType::Mxfp4, 1, 64).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("MXFP4") && text.contains("34"), "{text}");
    assert!(!text.contains('\n'));
    let err = QuantMatrix::new(&[0u8; 17], QuantType::Mxfp4, 1, 16).unwrap_err();
    assert!(err.to_string().contains("multiple of 32"), "{err}");
}
