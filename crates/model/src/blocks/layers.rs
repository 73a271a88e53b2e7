//! The weighted building blocks every family assembles: linear maps and normalisations, loaded
//! by name from a checkpoint and run through the shared [`crate::kernels`].
//!
//! Weights stay where the checkpoint has them ([`Weight`]: in place in the memory map of a
//! safetensors file). The one layout change is local to [`Linear`]: for long inputs it runs on a
//! copy packed `[in, out]` for gemm, made the second time such an input comes (the first runs gemm
//! in place through strides, so one run never pays for the copy; see
//! [`PACK_ROWS`]), with maps of the same input (query, key, value) side by side in one matrix;
//! weights that had to be converted into memory of our own anyway (`.bin` checkpoints, f16) are
//! stored that way from the start. Owned `[out, in]` weights (dequantised from GGUF) are never
//! copied: long inputs run gemm on them through strides (see [`kernels::linear::linear_gemm`]).
//! A later packing for a custom microkernel belongs here too.
//!
//! Matrices a file keeps in another storage format stay in it ([`MatrixWeight::Stored`]: a
//! GGUF file's block types, a safetensors file's f16 and bf16) and run through
//! [`kernels::quant::linear_quant`], which decodes them inside the product; they are never
//! packed or converted.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use crate::error::Error;
use crate::formats::tensors::{Name, Tensors};
use crate::formats::weights::{Checkpoint, MatrixWeight, Weight, WeightsError};
use crate::kernels::{self, Activation, Layout, Matrix, Operand, Output};

/// A linear kernel: [`kernels::linear`] or [`kernels::linear::linear_gemm`].
type LinearKernel = fn(&[f32], usize, Matrix<'_>, Option<&[f32]>, Output<'_>, Activation);
/// From this many rows on (tokens × sequences in one product), linear maps on `[out, in]`
/// weights run on a packed `[in, out]` copy through gemm; below, our dot-product kernel reads
/// the weights in place. Measured on bert-base shapes (768 → 768, 768 → 3072, 3072 → 768, two
/// threads): the in-place kernel is as fast as gemm on a transposed copy up to about 128 rows,
/// and 10–40 % slower at 512, where gemm's packing pays for itself (`docs/performance.md`).
pub const PACK_ROWS: usize = 128;

/// A linear map `y = x·Wᵀ + b`, possibly several maps of the same input side by side (the
/// query, key and value projections), which then run as one product on long inputs.
pub struct Linear {
    /// The maps, in the order their outputs sit side by side.
    parts: Vec<Part>,
    inputs: usize,
    /// All parts' outputs together.
    outputs: usize,
    /// `[in, out]` copy of all `[out, in]` parts side by side, with their biases, made for the
    /// second long input.
    packed: OnceLock<Packed>,
    /// Whether a long input has run in place already (the next one packs).
    ran_long: AtomicBool,
}

/// One map of a [`Linear`].
struct Part {
    weight: MatrixWeight,
    layout: Layout,
    bias: Option<Weight>,
    outputs: usize,
}

/// The parts of a [`Linear`] as one `[in, out]` matrix and one bias.
struct Packed {
    weight: Vec<f32>,
    bias: Option<Vec<f32>>,
}

impl Linear {
    /// `{name}.weight` as PyTorch's `nn.Linear` stores it (`[outputs, inputs]`) and
    /// `{name}.bias` (`[outputs]`).
    pub fn load(
        ckpt: &Checkpoint,
        name: &str,
        inputs: usize,
        outputs: usize,
    ) -> Result<Linear, WeightsError> {
        Linear::load_stacked(ckpt, &[name], inputs, outputs)
    }

    /// Several maps of the same input, each `{name}.weight` (`[outputs, inputs]`) and
    /// `{name}.bias`, with their outputs side by side: `[y₀ | y₁ | …]`. Long inputs run them as
    /// one product (one pass over the input instead of one per map).
    pub fn load_stacked(
        ckpt: &Checkpoint,
        names: &[&str],
        inputs: usize,
        outputs: usize,
    ) -> Result<Linear, WeightsError> {
        let mut parts = Vec::with_capacity(names.len());
        for name in names {
            parts.push(Part {
                weight: ckpt.matrix(&format!("{name}.weight"), &[outputs, inputs])?,
                layout: Layout::OutIn,
                bias: Some(ckpt.weight(&format!("{name}.bias"), &[outputs])?),
                outputs,
            });
        }
        if parts.iter().any(|p| p.weight.is_mapped()) {
            return Ok(Linear::from_parts(parts));
        }
        // Weights that had to be converted (a `.bin`) are copies already: store them
        // transposed and side by side, which gemm reads fast for any number of rows, and never
        // pack them again.
        let packed = pack(&parts, inputs);
        drop(parts);
        let total = names.len() * outputs;
        Ok(Linear::new(
            Weight::owned(packed.weight, vec![inputs, total]),
            Layout::InOut,
            packed.bias.map(|b| Weight::owned(b, vec![total])),
        ))
    }

    /// A map from its parts: `weight` of shape `[outputs, inputs]` (`OutIn`) or
    /// `[inputs, outputs]` (`InOut`; f32 only).
    pub fn new(weight: impl Into<MatrixWeight>, layout: Layout, bias: Option<Weight>) -> Linear {
        let weight = weight.into();
        assert!(
            layout == Layout::OutIn || weight.as_f32().is_some(),
            "stored matrices are [out, in]"
        );
        let outputs = match (layout, weight.shape().as_slice()) {
            (Layout::OutIn, [o, _]) | (Layout::InOut, [_, o]) => *o,
            (_, shape) => panic!("a linear map's weight is a matrix, not {shape:?}"),
        };
        Linear::from_parts(vec![Part {
            weight,
            layout,
            bias,
            outputs,
        }])
    }

    fn from_parts(parts: Vec<Part>) -> Linear {
        let inputs = match (parts[0].layout, parts[0].weight.shape().as_slice()) {
            (Layout::OutIn, [_, i]) | (Layout::InOut, [i, _]) => *i,
            (_, shape) => panic!("a linear map's weight is a matrix, not {shape:?}"),
        };
        for p in &parts {
            assert_eq!(p.weight.elements(), inputs * p.outputs, "weight shape");
            assert!(
                p.bias.as_ref().is_none_or(|b| b.len() == p.outputs),
                "bias shape"
            );
        }
        Linear {
            outputs: parts.iter().map(|p| p.outputs).sum(),
            parts,
            inputs,
            packed: OnceLock::new(),
            ran_long: AtomicBool::new(false),
        }
    }

    /// Several maps of the same input as one, their outputs side by side in the order given
    /// (a decoder's q, k and v projections).
    pub fn stack(maps: Vec<Linear>) -> Linear {
        let inputs = maps.first().map_or(0, |m| m.inputs);
        assert!(
            !maps.is_empty() && maps.iter().all(|m| m.inputs == inputs),
            "stacked maps share their input"
        );
        Linear::from_parts(maps.into_iter().flat_map(|m| m.parts).collect())
    }

    /// Input size.
    pub fn inputs(&self) -> usize {
        self.inputs
    }

    /// Output size (of all parts together).
    pub fn outputs(&self) -> usize {
        self.outputs
    }

    /// `out[r][col0..col0 + outputs] = activation(x[r]·Wᵀ + b)` for the `rows` rows of `x`.
    pub fn forward_into(&self, x: &[f32], rows: usize, out: Output<'_>, activation: Activation) {
        let in_place = self.parts.iter().any(|p| p.layout == Layout::OutIn);
        let owned = self.parts.iter().all(|p| !p.weight.is_mapped());
        let stored = self.parts.iter().any(|p| p.weight.as_stored().is_some());
        if stored {
            // Stored parts are decoded inside their kernel, which picks its own path by the
            // number of rows; f32 parts beside them run in place, through strides when long.
            let kernel: LinearKernel = if rows >= PACK_ROWS {
                kernels::linear::linear_gemm
            } else {
                kernels::linear
            };
            self.each_part(x, rows, out, activation, kernel);
            return;
        }
        let first_long =
            || self.packed.get().is_none() && !self.ran_long.swap(true, Ordering::Relaxed);
        if in_place && rows >= PACK_ROWS && (owned || first_long()) {
            // Our own memory already (dequantised from GGUF): gemm reads each part as it is
            // rather than through a second, packed copy of the whole model. A mapped weight
            // does so for its first long input too, and is packed for the second: one run (the
            // command line) never pays for the copy, which costs more than the ~10 % gemm gains
            // on it (ViT-B/16, 197 tokens: 405 → 300 ms end to end, `benches/vision.rs`).
            self.each_part(x, rows, out, activation, kernels::linear::linear_gemm);
            return;
        }
        if in_place && rows >= PACK_ROWS {
            let packed = self.packed();
            let matrix = Matrix {
                data: &packed.weight,
                inputs: self.inputs,
                outputs: self.outputs,
                layout: Layout::InOut,
            };
            kernels::linear(x, rows, matrix, packed.bias.as_deref(), out, activation);
            return;
        }
        self.each_part(x, rows, out, activation, kernels::linear);
    }

    /// Each part's outputs by `kernel`, side by side from `out`'s first column.
    fn each_part(
        &self,
        x: &[f32],
        rows: usize,
        out: Output<'_>,
        activation: Activation,
        kernel: LinearKernel,
    ) {
        let Output {
            data,
            stride,
            mut col0,
        } = out;
        for p in &self.parts {
            let out = Output {
                data: &mut *data,
                stride,
                col0,
            };
            match &p.weight {
                MatrixWeight::F32(w) => {
                    let matrix = Matrix {
                        data: w,
                        inputs: self.inputs,
                        outputs: p.outputs,
                        layout: p.layout,
                    };
                    kernel(x, rows, matrix, p.bias.as_deref(), out, activation);
                }
                MatrixWeight::Stored(m) => {
                    kernels::quant::linear_quant(
                        x,
                        rows,
                        m.matrix(),
                        p.bias.as_deref(),
                        out,
                        activation,
                    )
                    .expect("sizes checked when the map was built");
                }
            }
            col0 += p.outputs;
        }
    }

    /// `activation(x·Wᵀ + b)` for the `rows` rows of `x`, as a new `[rows, outputs]` buffer.
    pub fn forward(&self, x: &[f32], rows: usize, activation: Activation) -> Vec<f32> {
        let mut out = vec![0f32; rows * self.outputs];
        self.forward_into(
            x,
            rows,
            Output {
                data: &mut out,
                stride: self.outputs,
                col0: 0,
            },
            activation,
        );
        out
    }

    /// Rows `ids` of the weight of a single `[outputs, inputs]` map, decoded, into `out`
    /// (`ids.len() × inputs`): a head's unembedding of a few tokens. `false` (nothing written)
    /// for a map stored otherwise.
    pub fn weight_rows(&self, ids: &[u32], out: &mut [f32]) -> bool {
        match self.parts.as_slice() {
            [p] if p.layout == Layout::OutIn => {
                p.weight.gather(ids, out);
                true
            }
            _ => false,
        }
    }

    /// The whole map's weight as one dense f32 matrix, in the layout that costs least to give:
    /// a single f32 part as it is stored (no copy), a single stored part (GGUF blocks, 16-bit
    /// floats) decoded as `[outputs, inputs]` rows, several parts side by side as
    /// [`Linear::dense_in_out`] gives them. What the analyses read an output projection's
    /// per-head slices from (`blocks::values`, head attribution); never called on the plain
    /// path.
    pub fn dense(&self) -> (Cow<'_, [f32]>, Layout) {
        if let [p] = self.parts.as_slice() {
            match &p.weight {
                MatrixWeight::F32(w) => return (Cow::Borrowed(&w[..]), p.layout),
                MatrixWeight::Stored(m) => {
                    let mut out = vec![0f32; self.outputs * self.inputs];
                    let rows = m.matrix().dequantize_rows(0, &mut out);
                    assert_eq!(rows, self.outputs, "rows of a stored matrix");
                    return (Cow::Owned(out), Layout::OutIn);
                }
            }
        }
        (Cow::Owned(self.dense_in_out()), Layout::InOut)
    }

    /// The whole map as one dense `[inputs, outputs]` f32 matrix, parts side by side (a copy;
    /// stored block types are decoded).
    pub fn dense_in_out(&self) -> Vec<f32> {
        if let Some(p) = self.packed.get() {
            return p.weight.clone();
        }
        let mut weight = vec![0f32; self.inputs * self.outputs];
        let mut col0 = 0;
        for p in &self.parts {
            match (&p.weight, p.layout) {
                (MatrixWeight::F32(w), Layout::OutIn) => kernels::transpose_into(
                    w,
                    p.outputs,
                    self.inputs,
                    &mut weight,
                    self.outputs,
                    col0,
                ),
                (MatrixWeight::F32(w), Layout::InOut) => {
                    for (dst, src) in weight
                        .chunks_exact_mut(self.outputs)
                        .zip(w.chunks_exact(p.outputs))
                    {
                        dst[col0..col0 + p.outputs].copy_from_slice(src);
                    }
                }
                (stored @ MatrixWeight::Stored(_), _) => {
                    let ids: Vec<u32> = (0..p.outputs as u32).collect();
                    let mut rows = vec![0f32; p.outputs * self.inputs];
                    stored.gather(&ids, &mut rows);
                    kernels::transpose_into(
                        &rows,
                        p.outputs,
                        self.inputs,
                        &mut weight,
                        self.outputs,
                        col0,
                    )
                }
            }
            col0 += p.outputs;
        }
        weight
    }

    /// The `[in, out]` copy, made on first use; the in-place pages it replaces for long inputs
    /// are dropped from this process (short inputs map them again when they need them).
    fn packed(&self) -> &Packed {
        self.packed.get_or_init(|| {
            let packed = pack(&self.parts, self.inputs);
            for p in &self.parts {
                p.weight.release_pages();
            }
            packed
        })
    }
}

/// `parts` side by side as one `[inputs, Σ outputs]` matrix and bias (zeros for a part without
/// one, `None` when none has one).
fn pack(parts: &[Part], inputs: usize) -> Packed {
    let total: usize = parts.iter().map(|p| p.outputs).sum();
    let mut weight = vec![0f32; inputs * total];
    let mut col0 = 0;
    for p in parts {
        let w = p.weight.as_f32().expect("only f32 maps are packed");
        match p.layout {
            Layout::OutIn => {
                kernels::transpose_into(w, p.outputs, inputs, &mut weight, total, col0)
            }
            Layout::InOut => {
                for (dst, src) in weight
                    .chunks_exact_mut(total)
                    .zip(w.chunks_exact(p.outputs))
                {
                    dst[col0..col0 + p.outputs].copy_from_slice(src);
                }
            }
        }
        col0 += p.outputs;
    }
    let bias = parts.iter().any(|p| p.bias.is_some()).then(|| {
        parts
            .iter()
            .flat_map(|p| match &p.bias {
                Some(b) => b.to_vec(),
                None => vec![0.0; p.outputs],
            })
            .collect()
    });
    Packed { weight, bias }
}

/// What a normalisation computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NormKind {
    /// `(x − mean)/√(var + ε)·γ + β`.
    Layer,
    /// `x/√(mean(x²) + ε)·w` (no mean, no bias).
    Rms,
}

/// A normalisation over the last dimension, with its weights.
pub struct Norm {
    kind: NormKind,
    weight: Weight,
    bias: Option<Weight>,
    eps: f32,
}

impl Norm {
    /// A LayerNorm from `{name}.weight` and `{name}.bias` (or the TensorFlow port's `gamma`
    /// and `beta`).
    pub fn layer(
        ckpt: &Checkpoint,
        name: &str,
        size: usize,
        eps: f64,
    ) -> Result<Norm, WeightsError> {
        Ok(Norm {
            kind: NormKind::Layer,
            weight: ckpt.weight(&format!("{name}.weight"), &[size])?,
            bias: Some(ckpt.weight(&format!("{name}.bias"), &[size])?),
            eps: eps as f32,
        })
    }

    /// An RMSNorm from `{name}.weight`.
    pub fn rms(ckpt: &Checkpoint, name: &str, size: usize, eps: f64) -> Result<Norm, WeightsError> {
        Ok(Norm {
            kind: NormKind::Rms,
            weight: ckpt.weight(&format!("{name}.weight"), &[size])?,
            bias: None,
            eps: eps as f32,
        })
    }

    /// A normalisation from weights already read: RMSNorm when `bias` is `None`, LayerNorm
    /// otherwise (both `[width]`).
    pub fn from_weights(weight: Weight, bias: Option<Weight>, eps: f64) -> Norm {
        assert!(
            bias.as_ref().is_none_or(|b| b.len() == weight.len()),
            "normalisation weights"
        );
        Norm {
            kind: if bias.is_some() {
                NormKind::Layer
            } else {
                NormKind::Rms
            },
            weight,
            bias,
            eps: eps as f32,
        }
    }

    /// Width of the rows it normalises.
    pub fn width(&self) -> usize {
        self.weight.len()
    }

    /// The scale γ (`[width]`), what normalisation it is and its ε: the linear part of the
    /// normalisation once a row's mean and spread are fixed, which the norm-aware analysis
    /// applies to each contribution (`blocks::values`).
    pub fn linear_part(&self) -> (&[f32], NormKind, f32) {
        (&self.weight, self.kind, self.eps)
    }

    /// LayerNorm's γ, β and ε, for kernels that fuse the normalisation in.
    pub fn layer_params(&self) -> Option<(&[f32], &[f32], f32)> {
        match (self.kind, &self.bias) {
            (NormKind::Layer, Some(b)) => Some((&self.weight, b, self.eps)),
            _ => None,
        }
    }

    /// `norm(x + residual)` (or `norm(x)`) as a new buffer of `x`'s shape.
    pub fn forward(&self, x: &[f32], residual: Option<&[f32]>) -> Vec<f32> {
        let mut out = vec![0f32; x.len()];
        match (self.kind, &self.bias) {
            (NormKind::Layer, Some(beta)) => {
                kernels::layer_norm(x, residual, &self.weight, beta, self.eps, &mut out)
            }
            _ => kernels::add_rms_norm(x, residual, &self.weight, self.eps, &mut out),
        }
        out
    }
}

/// A linear map on a weight stored `[outputs, inputs]` (PyTorch's `nn.Linear`), with an optional
/// bias.
pub fn out_in_linear(
    t: &dyn Tensors,
    name: &Name,
    inputs: usize,
    outputs: usize,
    bias: bool,
) -> Result<Linear, Error> {
    let weight = t.matrix(&name.weight(), &[outputs, inputs])?;
    let bias = if bias {
        Some(t.weight(&name.bias(), &[outputs])?)
    } else {
        None
    };
    Ok(Linear::new(weight, Layout::OutIn, bias))
}

/// `x·Wᵀ` into `out` for the `rows` rows of `x`, `W` an `[outputs, inputs]` matrix as the file
/// holds it, with no bias: a language-model head tied to the token embeddings.
pub fn matrix_forward(w: &MatrixWeight, x: &[f32], rows: usize, out: Output<'_>) {
    let [outputs, inputs] = <[usize; 2]>::try_from(w.shape()).expect("a matrix");
    match w {
        MatrixWeight::F32(data) => kernels::linear(
            x,
            rows,
            Matrix {
                data,
                inputs,
                outputs,
                layout: Layout::OutIn,
            },
            None,
            out,
            Activation::Identity,
        ),
        MatrixWeight::Stored(m) => {
            kernels::quant::linear_quant(x, rows, m.matrix(), None, out, Activation::Identity)
                .expect("a head of the hidden size, checked at load")
        }
    }
}

/// Reads one linear map of a block: `(name, inputs, outputs)` → the map, as the family stores it
/// (PyTorch's `nn.Linear`, GPT-2's Conv1D; with or without biases).
pub type LinearReader<'a> = &'a dyn Fn(&Name, usize, usize) -> Result<Linear, Error>;

/// Where a feed-forward block's tensors are (module paths).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FfnNames {
    /// `project(act(expand(x)))`.
    Plain {
        /// To the inner size.
        expand: Name,
        /// Back to the hidden size.
        project: Name,
    },
    /// `down(act(gate(x)) · up(x))`.
    Gated {
        /// The gate.
        gate: Name,
        /// The linear half.
        up: Name,
        /// Back to the hidden size.
        down: Name,
    },
}

impl FfnNames {
    /// The map into the inner size (`expand`, or `gate`), whose shape the config checks read.
    pub fn first(&self) -> &Name {
        match self {
            FfnNames::Plain { expand, .. } => expand,
            FfnNames::Gated { gate, .. } => gate,
        }
    }

    /// The map back to the hidden size (`project`, or `down`).
    pub fn last(&self) -> &Name {
        match self {
            FfnNames::Plain { project, .. } => project,
            FfnNames::Gated { down, .. } => down,
        }
    }
}

/// The position-wise feed-forward block.
pub enum FeedForward {
    /// `project(act(expand(x)))` (GPT-2's `c_fc`, `c_proj`).
    Plain {
        /// To the inner size, with the activation.
        expand: Linear,
        /// Its activation.
        activation: Activation,
        /// Back to the hidden size.
        project: Linear,
    },
    /// `down(act(gate(x)) · up(x))` (SwiGLU: Llama's `gate_proj`, `up_proj`, `down_proj`).
    Gated {
        /// The gate, through the activation.
        gate: Linear,
        /// The linear half.
        up: Linear,
        /// The gate's activation.
        activation: Activation,
        /// Back to the hidden size.
        down: Linear,
    },
    /// Routed experts: each token through the few experts its router chooses
    /// ([`super::experts`]: Mixtral, Qwen3-MoE, OLMoE).
    Routed(Box<super::experts::Experts>),
}

impl FeedForward {
    /// The block `names` gives, `hidden → inner → hidden` with `activation`, each map read by
    /// `linear`.
    pub fn load(
        names: &FfnNames,
        hidden: usize,
        inner: usize,
        activation: Activation,
        linear: LinearReader<'_>,
    ) -> Result<FeedForward, Error> {
        Ok(match names {
            FfnNames::Plain { expand, project } => FeedForward::Plain {
                expand: linear(expand, hidden, inner)?,
                activation,
                project: linear(project, inner, hidden)?,
            },
            FfnNames::Gated { gate, up, down } => FeedForward::Gated {
                gate: linear(gate, hidden, inner)?,
                up: linear(up, hidden, inner)?,
                activation,
                down: linear(down, inner, hidden)?,
            },
        })
    }

    /// `rows` rows of `x` through the block.
    pub fn forward(&self, x: &[f32], rows: usize) -> Vec<f32> {
        match self {
            FeedForward::Plain {
                expand,
                activation,
                project,
            } => {
                let inner = expand.forward(x, rows, *activation);
                project.forward(&inner, rows, Activation::Identity)
            }
            FeedForward::Gated {
                gate,
                up,
                activation,
                down,
            } => {
                let mut g = gate.forward(x, rows, Activation::Identity);
                let u = up.forward(x, rows, Activation::Identity);
                kernels::activation::gate(&mut g, &u, *activation);
                drop(u);
                down.forward(&g, rows, Activation::Identity)
            }
            FeedForward::Routed(experts) => experts.forward(x, rows).0,
        }
    }
}

/// An operand of the attention kernel: rows of `stride` values, heads from `offset` on.
pub(crate) fn part(data: &[f32], offset: usize, stride: usize) -> Operand<'_> {
    Operand {
        data,
        offset,
        stride,
    }
}

/// `h[i] += delta[i]` (the residual connection; transformers adds in the same order, and f32
/// addition is commutative, so the sums agree bit for bit).
pub(crate) fn add_in_place(h: &mut [f32], delta: &[f32]) {
    assert_eq!(h.len(), delta.len(), "residual shapes");
    for (a, b) in h.iter_mut().zip(delta) {
        *a += b;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::weights::Anchor;
    use safetensors::{serialize_to_file, tensor::TensorView, Dtype};

    const INPUTS: usize = 40;
    const OUTPUTS: usize = 24;
    const NAMES: [&str; 3] = ["q", "k", "v"];

    fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n as u32)
            .map(|i| ((i.wrapping_mul(2654435761) ^ seed) % 2001) as f32 / 1000.0 - 1.0)
            .collect()
    }

    /// A checkpoint with three maps `q`, `k`, `v` (`[OUTPUTS, INPUTS]` + bias), as f32 or bf16
    /// (both read in place; bf16 biases converted).
    fn checkpoint(dir: &std::path::Path, bf16: bool) -> Checkpoint {
        let mut tensors: Vec<(String, Vec<f32>, Vec<usize>)> =
            vec![("anchor".into(), vec![0.0; 4], vec![4])];
        for (i, name) in NAMES.iter().enumerate() {
            let w = values(OUTPUTS * INPUTS, i as u32 * 7 + 1);
            let b = values(OUTPUTS, i as u32 * 7 + 2);
            tensors.push((format!("{name}.weight"), w, vec![OUTPUTS, INPUTS]));
            tensors.push((format!("{name}.bias"), b, vec![OUTPUTS]));
        }
        let bytes: Vec<Vec<u8>> = tensors
            .iter()
            .map(|(_, v, _)| {
                v.iter()
                    .flat_map(|&x| {
                        if bf16 {
                            // bf16: the upper half of the f32 (rounded toward zero).
                            ((x.to_bits() >> 16) as u16).to_le_bytes().to_vec()
                        } else {
                            x.to_le_bytes().to_vec()
                        }
                    })
                    .collect()
            })
            .collect();
        let dtype = if bf16 { Dtype::BF16 } else { Dtype::F32 };
        let views: Vec<(String, TensorView<'_>)> = tensors
            .iter()
            .zip(&bytes)
            .map(|((name, _, shape), b)| {
                (
                    name.clone(),
                    TensorView::new(dtype, shape.clone(), b).unwrap(),
                )
            })
            .collect();
        let path = dir.join("model.safetensors");
        serialize_to_file(views, None, &path).unwrap();
        let anchor = Anchor {
            tensor: "anchor",
            family: "test",
            prefix: "test",
        };
        Checkpoint::open(&[path], &anchor).unwrap()
    }

    /// `[x·W_qᵀ + b_q | x·W_kᵀ + b_k | x·W_vᵀ + b_v]` in f64, from the checkpoint's values.
    fn naive(ckpt: &Checkpoint, x: &[f32], rows: usize) -> Vec<f64> {
        let maps: Vec<(Weight, Weight)> = NAMES
            .iter()
            .map(|name| {
                let w = ckpt.weight(&format!("{name}.weight"), &[OUTPUTS, INPUTS]);
                let b = ckpt.weight(&format!("{name}.bias"), &[OUTPUTS]);
                (w.unwrap(), b.unwrap())
            })
            .collect();
        let mut out = Vec::new();
        for r in 0..rows {
            for (w, b) in &maps {
                for o in 0..OUTPUTS {
                    let dot: f64 = (0..INPUTS)
                        .map(|i| x[r * INPUTS + i] as f64 * w[o * INPUTS + i] as f64)
                        .sum();
                    out.push(dot + b[o] as f64);
                }
            }
        }
        out
    }

    #[test]
    fn stacked_maps_equal_their_parts_side_by_side_in_place_packed_and_converted() {
        for bf16 in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let ckpt = checkpoint(dir.path(), bf16);
            let stacked = Linear::load_stacked(&ckpt, &NAMES, INPUTS, OUTPUTS).unwrap();
            assert_eq!(stacked.outputs(), 3 * OUTPUTS);
            // f32 stays in the map until a long input packs it; bf16 stays bf16, in the map,
            // decoded inside the kernel, and is never packed.
            assert_eq!(stacked.parts.len(), 3);
            assert_eq!(
                stacked.parts.iter().all(|p| p.weight.as_stored().is_some()),
                bf16
            );
            // Short inputs (in place), then long ones (the first in place through gemm's
            // strides, the second packed for f32; tiled bf16), then short again (in place
            // after the pages were released).
            let mut long_seen = 0;
            for rows in [1, 5, PACK_ROWS - 1, PACK_ROWS, PACK_ROWS + 9, 7] {
                let x = values(rows * INPUTS, rows as u32);
                let got = stacked.forward(&x, rows, Activation::Identity);
                let want = naive(&ckpt, &x, rows);
                let worst = got
                    .iter()
                    .zip(&want)
                    .map(|(&g, &w)| (g as f64 - w).abs())
                    .fold(0.0, f64::max);
                assert!(worst < 1e-4, "bf16 {bf16}, {rows} rows: max |Δ| {worst}");
                long_seen += usize::from(rows >= PACK_ROWS);
                assert_eq!(stacked.packed.get().is_some(), !bf16 && long_seen >= 2);
            }
        }
    }
}
