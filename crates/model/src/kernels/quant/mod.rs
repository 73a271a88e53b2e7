//! Linear maps on weights kept in their checkpoint's storage format: the ggml block formats of a
//! GGUF file (Q4_0 … Q8_0, Q2_K … Q6_K, Q8_K, MXFP4 ([`QuantType`]; gpt-oss's experts, from GGUF
//! or from its safetensors blocks moved into ggml's layout)) and 16-bit floats (F16, BF16), read in place from
//! the memory map and decoded inside the kernel, so a 4-bit model takes its file's size in memory
//! rather than eight times that in f32.
//!
//! [`linear_quant`] computes what [`super::linear`](fn@super::linear) computes on the dequantised matrix, up to the
//! order of the sums: the weights are decoded exactly as candle's `to_float` decodes them (see
//! `codecs`) and multiplied in f32 with the activations as they are. Activations are *not*
//! quantised, unlike candle's and llama.cpp's quantised products, which round each input row to
//! 8 bits per value first (`docs/performance.md`, "Quantized weights", measures what that costs).
//!
//! Laid out as ggml lays out its own: the reference codecs (`codecs`), the generic products
//! over them (`small`, `tiled`), and each architecture's faster kernels apart
//! (`arch`: x86's AVX2, AVX-512 and F16C), so a port to another architecture is a folder.
//!
//! Two ways to run, by the number of input rows (see [`TILED_ROWS`]):
//! - **Few rows** (a generated token, prompts of up to a few hundred tokens; `small`): each
//!   task owns a band of outputs; for each group of weight rows it decodes a stretch of them
//!   into a buffer that stays in L1, and a register-blocked f32 kernel runs every input row over
//!   it before the next stretch is decoded. Each weight is decoded once per call and read from
//!   memory once, in its compact form: 2–8× fewer bytes than f32 weights. For one row in the
//!   common formats on x86 with AVX2, `arch::x86::fused` decodes in registers instead, with no buffer
//!   between decoding and the multiply-adds.
//! - **Many rows** (long prompts; `tiled`): tiles of weight rows are decoded into an f32
//!   buffer and gemm multiplies them, as it does f32 weights; decoding costs one pass per weight
//!   against `rows` multiply-adds per weight.
//!
//! GGUF's F32 tensors need no decoding: they run through [`super::linear`](fn@super::linear) in place (when the
//! map puts them at an f32-aligned address, which GGUF's 32-byte alignment does).

mod arch;
pub(crate) mod codecs;
mod small;
mod tiled;

use candle_core::quantized::GgmlDType;

use super::{Activation, Layout, Matrix, Output};

/// A storage format the kernels decode: ggml's types as candle knows them ([`GgmlDType`]), and
/// MXFP4 (ggml type 39: 32 weights per block, one E8M0 scale byte and 16 bytes of 4-bit E2M1
/// codes; gpt-oss's experts), which candle's reader does not know. Variants are named as
/// candle's, so `QuantType::from(GgmlDType::Q4K)` is `QuantType::Q4K`.
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QuantType {
    /// 32-bit floats.
    F32,
    /// IEEE halves.
    F16,
    /// bfloat16.
    BF16,
    /// ggml's Q4_0.
    Q4_0,
    /// ggml's Q4_1.
    Q4_1,
    /// ggml's Q5_0.
    Q5_0,
    /// ggml's Q5_1.
    Q5_1,
    /// ggml's Q8_0.
    Q8_0,
    /// ggml's Q8_1.
    Q8_1,
    /// ggml's Q2_K.
    Q2K,
    /// ggml's Q3_K.
    Q3K,
    /// ggml's Q4_K.
    Q4K,
    /// ggml's Q5_K.
    Q5K,
    /// ggml's Q6_K.
    Q6K,
    /// ggml's Q8_K.
    Q8K,
    /// OCP microscaling FP4 as ggml stores it (`block_mxfp4`).
    Mxfp4,
}

impl From<GgmlDType> for QuantType {
    fn from(d: GgmlDType) -> QuantType {
        use GgmlDType as D;
        match d {
            D::F32 => QuantType::F32,
            D::F16 => QuantType::F16,
            D::BF16 => QuantType::BF16,
            D::Q4_0 => QuantType::Q4_0,
            D::Q4_1 => QuantType::Q4_1,
            D::Q5_0 => QuantType::Q5_0,
            D::Q5_1 => QuantType::Q5_1,
            D::Q8_0 => QuantType::Q8_0,
            D::Q8_1 => QuantType::Q8_1,
            D::Q2K => QuantType::Q2K,
            D::Q3K => QuantType::Q3K,
            D::Q4K => QuantType::Q4K,
            D::Q5K => QuantType::Q5K,
            D::Q6K => QuantType::Q6K,
            D::Q8K => QuantType::Q8K,
        }
    }
}

impl PartialEq<GgmlDType> for QuantType {
    fn eq(&self, other: &GgmlDType) -> bool {
        *self == QuantType::from(*other)
    }
}

impl QuantType {
    /// candle's type for it; `None` for MXFP4, which candle does not know.
    pub fn ggml(self) -> Option<GgmlDType> {
        use GgmlDType as D;
        Some(match self {
            QuantType::F32 => D::F32,
            QuantType::F16 => D::F16,
            QuantType::BF16 => D::BF16,
            QuantType::Q4_0 => D::Q4_0,
            QuantType::Q4_1 => D::Q4_1,
            QuantType::Q5_0 => D::Q5_0,
            QuantType::Q5_1 => D::Q5_1,
            QuantType::Q8_0 => D::Q8_0,
            QuantType::Q8_1 => D::Q8_1,
            QuantType::Q2K => D::Q2K,
            QuantType::Q3K => D::Q3K,
            QuantType::Q4K => D::Q4K,
            QuantType::Q5K => D::Q5K,
            QuantType::Q6K => D::Q6K,
            QuantType::Q8K => D::Q8K,
            QuantType::Mxfp4 => return None,
        })
    }
}
use codecs::with_block;

/// From this many input rows on, [`linear_quant`] decodes tiles for gemm; below, the few-rows
/// kernel runs. `BENCH_SWEEP=1 cargo bench --bench quant` (`docs/performance.md`, "Quantized
/// weights"): the few-rows kernel took 0.5–0.8× the tiled path's CPU time from 1 to 256 rows
/// on 2048 → 2048 and 4096 → 4096 (Q4_0, Q4_K, Q6_K, Q8_0, F16; 1 and 2 threads); at 512
/// rows it was 1.2–1.5× slower on 4096 inputs (its stretch of every row's input, 2 MiB, no
/// longer stays in L2) and 0.9× on 2048.
pub const TILED_ROWS: usize = 384;

/// From this many rows on, GGUF's F32 matrices run through gemm rather than the f32 dot
/// kernel: the f32 kernels' own switch (`layers::PACK_ROWS`, measured on bert-base shapes).
const F32_GEMM_ROWS: usize = 128;

/// A weight matrix of a map `inputs → outputs` in a ggml storage format, borrowed (typically
/// from a memory-mapped GGUF file): `outputs` rows of `inputs` weights each, row-major, as GGUF
/// stores linear weights (`[out, in]`, PyTorch's `nn.Linear.weight` order).
///
/// Made only through [`QuantMatrix::new`], which checks the byte count, so every kernel can
/// rely on it.
#[derive(Clone, Copy, Debug)]
pub struct QuantMatrix<'a> {
    bytes: &'a [u8],
    dtype: QuantType,
    outputs: usize,
    inputs: usize,
}

/// Why a quantised matrix or product was refused: a shape that does not fit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantError {
    /// A row's length is not a whole number of blocks.
    #[error("a {dtype} matrix row holds whole blocks of {block} weights, and {inputs} is not a multiple of {block}")]
    PartialBlock {
        dtype: &'static str,
        block: usize,
        inputs: usize,
    },
    /// The bytes given are not the matrix's size.
    #[error(
        "a {outputs} × {inputs} {dtype} matrix takes {expected} bytes, but {actual} were given"
    )]
    ByteCount {
        dtype: &'static str,
        outputs: usize,
        inputs: usize,
        expected: usize,
        actual: usize,
    },
    /// A size that does not fit in memory's address range.
    #[error("a {outputs} × {inputs} matrix is larger than this machine can address")]
    TooLarge { outputs: usize, inputs: usize },
    /// An operand of [`linear_quant`] of the wrong size.
    #[error("the {what} of a {inputs} → {outputs} product over {rows} rows holds {actual} values, not {expected}")]
    Operand {
        what: &'static str,
        rows: usize,
        inputs: usize,
        outputs: usize,
        expected: usize,
        actual: usize,
    },
    /// An output column range that does not fit in its rows.
    #[error("{outputs} outputs from column {col0} do not fit in output rows of {stride} values")]
    Columns {
        outputs: usize,
        col0: usize,
        stride: usize,
    },
}

/// The name llama.cpp gives a ggml type (`Q4_K`, not candle's `Q4K`).
pub fn type_name(dtype: impl Into<QuantType>) -> &'static str {
    use QuantType as D;
    match dtype.into() {
        D::F32 => "F32",
        D::F16 => "F16",
        D::BF16 => "BF16",
        D::Q4_0 => "Q4_0",
        D::Q4_1 => "Q4_1",
        D::Q5_0 => "Q5_0",
        D::Q5_1 => "Q5_1",
        D::Q8_0 => "Q8_0",
        D::Q8_1 => "Q8_1",
        D::Q2K => "Q2_K",
        D::Q3K => "Q3_K",
        D::Q4K => "Q4_K",
        D::Q5K => "Q5_K",
        D::Q6K => "Q6_K",
        D::Q8K => "Q8_K",
        D::Mxfp4 => "MXFP4",
    }
}

/// Weights per block and bytes per block of `dtype` (1 and 4 for F32, 32 and 18 for Q4_0, 256
/// and 144 for Q4_K).
pub fn block_layout(dtype: impl Into<QuantType>) -> (usize, usize) {
    codecs::layout(dtype.into())
}

impl<'a> QuantMatrix<'a> {
    /// `outputs` rows of `inputs` weights of `dtype` in `bytes`: `inputs` must be a whole number
    /// of blocks and `bytes` exactly `outputs × inputs / block values × block bytes` long.
    pub fn new(
        bytes: &'a [u8],
        dtype: impl Into<QuantType>,
        outputs: usize,
        inputs: usize,
    ) -> Result<QuantMatrix<'a>, QuantError> {
        let dtype = dtype.into();
        let (values, block_bytes) = block_layout(dtype);
        if !inputs.is_multiple_of(values) {
            return Err(QuantError::PartialBlock {
                dtype: type_name(dtype),
                block: values,
                inputs,
            });
        }
        let expected = (inputs / values)
            .checked_mul(block_bytes)
            .and_then(|row| row.checked_mul(outputs))
            .filter(|&n| n <= isize::MAX as usize)
            .ok_or(QuantError::TooLarge { outputs, inputs })?;
        if bytes.len() != expected {
            return Err(QuantError::ByteCount {
                dtype: type_name(dtype),
                outputs,
                inputs,
                expected,
                actual: bytes.len(),
            });
        }
        Ok(QuantMatrix {
            bytes,
            dtype,
            outputs,
            inputs,
        })
    }

    /// The storage format.
    pub fn dtype(&self) -> QuantType {
        self.dtype
    }

    /// Output size (rows of the matrix).
    pub fn outputs(&self) -> usize {
        self.outputs
    }

    /// Input size (weights per row).
    pub fn inputs(&self) -> usize {
        self.inputs
    }

    /// The stored bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Bytes per row.
    pub fn row_bytes(&self) -> usize {
        // `new` checked that outputs × this fits; with no outputs it is still the row size.
        let (values, block_bytes) = block_layout(self.dtype);
        self.inputs / values * block_bytes
    }

    /// Decodes rows `first..first + out.len() / inputs` into `out` (whole rows of f32, as
    /// candle's `to_float` gives them). An embedding lookup's gather reads one row this way.
    /// Returns how many rows were decoded: `out.len() / inputs`, fewer if the matrix ends first.
    pub fn dequantize_rows(&self, first: usize, out: &mut [f32]) -> usize {
        if self.inputs == 0 || first >= self.outputs {
            return 0;
        }
        let rows = (out.len() / self.inputs).min(self.outputs - first);
        let rb = self.row_bytes();
        let src = &self.bytes[first * rb..(first + rows) * rb];
        with_block!(self.dtype, B => tiled::decode_rows::<B>(src, &mut out[..rows * self.inputs]));
        rows
    }

    /// The weights as one f32 slice, when they are f32 at an f32-aligned address (GGUF aligns
    /// tensors to 32 bytes) on a little-endian machine: then no decoding is needed.
    fn as_f32(&self) -> Option<&'a [f32]> {
        if self.dtype != QuantType::F32 || cfg!(target_endian = "big") {
            return None;
        }
        // SAFETY: every bit pattern is a valid f32; `align_to` puts only whole, aligned f32s in
        // the middle part, and the check below accepts it only when it covers every byte.
        let (head, values, tail) = unsafe { self.bytes.align_to::<f32>() };
        (head.is_empty() && tail.is_empty()).then_some(values)
    }
}

/// Which of [`linear_quant`]'s two ways to run a product.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuantPath {
    /// The few-rows kernel below [`TILED_ROWS`] rows, decoded tiles through gemm from there.
    Auto,
    /// The few-rows kernel (decode a stretch into L1, register-blocked f32 multiply-adds; for
    /// one row, decoded in registers where there is a kernel for the format).
    FewRows,
    /// The many-rows path: weights decoded straight into the packed kernels' panels
    /// ([`crate::kernels::packed`]) where the instruction set has them, else [`QuantPath::Gemm`].
    Tiled,
    /// Decoded tiles through gemm (the many-rows path before the packed kernels; benchmarks
    /// compare them).
    Gemm,
}

/// `out[r][col0..col0 + outputs] = activation(x[r] · Wᵀ + bias)` for the `rows` rows of `x`
/// (`[rows, inputs]`, row-major), `W` a [`QuantMatrix`]: the contract of [`super::linear`](fn@super::linear),
/// with the weights decoded on the fly. Sizes are checked, and a mismatch is an error, never a
/// panic; nothing is written then.
pub fn linear_quant(
    x: &[f32],
    rows: usize,
    w: QuantMatrix<'_>,
    bias: Option<&[f32]>,
    out: Output<'_>,
    activation: Activation,
) -> Result<(), QuantError> {
    linear_quant_on(QuantPath::Auto, x, rows, w, bias, out, activation)
}

/// [`linear_quant`] on the path given (benchmarks compare them; both compute the same thing).
pub fn linear_quant_on(
    path: QuantPath,
    x: &[f32],
    rows: usize,
    w: QuantMatrix<'_>,
    bias: Option<&[f32]>,
    out: Output<'_>,
    activation: Activation,
) -> Result<(), QuantError> {
    check(x, rows, &w, bias, &out)?;
    let tiled = |switch: usize| match path {
        QuantPath::Auto => rows >= switch,
        QuantPath::FewRows => false,
        QuantPath::Tiled | QuantPath::Gemm => true,
    };
    let (inputs, outputs) = (w.inputs, w.outputs);
    if rows == 0 || outputs == 0 {
        return Ok(());
    }
    if let Some(data) = w.as_f32() {
        let matrix = Matrix {
            data,
            inputs,
            outputs,
            layout: Layout::OutIn,
        };
        // The f32 kernels' own choice: dot kernel for few rows, gemm through strides for many.
        if tiled(F32_GEMM_ROWS) {
            super::linear::linear_gemm(x, rows, matrix, bias, out, activation);
        } else {
            super::linear(x, rows, matrix, bias, out, activation);
        }
        return Ok(());
    }
    let Output { data, stride, col0 } = out;
    if inputs == 0 {
        for row in data.chunks_exact_mut(stride) {
            let dst = &mut row[col0..col0 + outputs];
            match bias {
                Some(b) => dst.copy_from_slice(b),
                None => dst.fill(0.0),
            }
        }
    } else {
        let job = Job {
            x,
            rows,
            w,
            bias,
            stride,
            col0,
        };
        with_block!(w.dtype, B => {
            if path == QuantPath::Gemm {
                tiled::run_gemm::<B>(&job, data);
            } else if tiled(TILED_ROWS) {
                tiled::run::<B>(&job, data);
            } else {
                small::run::<B>(&job, data);
            }
        });
    }
    if col0 == 0 && stride == outputs {
        activation.apply(data);
    } else if activation != Activation::Identity {
        for row in data.chunks_exact_mut(stride) {
            activation.apply(&mut row[col0..col0 + outputs]);
        }
    }
    Ok(())
}

/// The instruction set [`super::isa`] picked, and whether the CPU converts halves (F16C,
/// used on the vector paths only), read once per product on the calling thread and handed to
/// its tasks (a test's choice, [`super::with_isa`], holds for its own thread only).
#[derive(Clone, Copy)]
struct Cpu {
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    isa: super::Isa,
    f16c: bool,
}

impl Cpu {
    fn get() -> Cpu {
        let isa = super::isa();
        #[cfg(target_arch = "x86_64")]
        let f16c = isa != super::Isa::Baseline && std::is_x86_feature_detected!("f16c");
        #[cfg(not(target_arch = "x86_64"))]
        let f16c = false;
        Cpu { isa, f16c }
    }
}

/// The operands of one product, checked.
#[derive(Clone, Copy)]
struct Job<'a> {
    x: &'a [f32],
    rows: usize,
    w: QuantMatrix<'a>,
    bias: Option<&'a [f32]>,
    stride: usize,
    col0: usize,
}

fn check(
    x: &[f32],
    rows: usize,
    w: &QuantMatrix<'_>,
    bias: Option<&[f32]>,
    out: &Output<'_>,
) -> Result<(), QuantError> {
    let (inputs, outputs) = (w.inputs, w.outputs);
    let operand = |what, expected: Option<usize>, actual: usize| match expected {
        Some(e) if e == actual => Ok(()),
        _ => Err(QuantError::Operand {
            what,
            rows,
            inputs,
            outputs,
            expected: expected.unwrap_or(usize::MAX),
            actual,
        }),
    };
    operand("input", rows.checked_mul(inputs), x.len())?;
    if let Some(b) = bias {
        operand("bias", Some(outputs), b.len())?;
    }
    if out
        .col0
        .checked_add(outputs)
        .is_none_or(|end| end > out.stride)
    {
        return Err(QuantError::Columns {
            outputs,
            col0: out.col0,
            stride: out.stride,
        });
    }
    operand("output", rows.checked_mul(out.stride), out.data.len())
}

#[cfg(test)]
mod tests;
