//! The weighted building blocks every family assembles: linear maps and normalisations, loaded
//! by name from a checkpoint and run through the shared [`super::kernels`].
//!
//! Weights stay where the checkpoint has them ([`Weight`]: in place in the memory map of a
//! safetensors file). The one layout change is local to [`Linear`]: for long inputs it runs on a
//! copy packed `[in, out]` for gemm, made the first time such an input comes (see
//! [`PACK_ROWS`]); weights that had to be converted into memory of our own anyway (`.bin`
//! checkpoints, f16) are stored `[in, out]` from the start by [`Linear::load`]. Owned `[out, in]`
//! weights (dequantised from GGUF) are never copied: long inputs run gemm on them through strides.
//! A later packing for a custom microkernel belongs here too.

use std::sync::OnceLock;

use super::kernels::{self, Activation, Layout, Matrix, Output};
use super::weights::{Checkpoint, Weight, WeightsError};

/// From this many rows on (tokens × sequences in one product), linear maps on `[out, in]`
/// weights run on a packed `[in, out]` copy through gemm; below, our dot-product kernel reads
/// the weights in place. Measured on bert-base shapes (768 → 768, 768 → 3072, 3072 → 768, two
/// threads): the in-place kernel is as fast as gemm on a transposed copy up to about 128 rows,
/// and 10–40 % slower at 512, where gemm's packing pays for itself (`docs/performance.md`).
pub const PACK_ROWS: usize = 128;

/// A linear map `y = x·Wᵀ + b`.
pub struct Linear {
    weight: Weight,
    layout: Layout,
    bias: Option<Weight>,
    inputs: usize,
    outputs: usize,
    /// `[in, out]` copy of an `[out, in]` weight, made for the first long input.
    packed: OnceLock<Vec<f32>>,
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
        let weight = ckpt.weight(&format!("{name}.weight"), &[outputs, inputs])?;
        let bias = ckpt.weight(&format!("{name}.bias"), &[outputs])?;
        if weight.is_mapped() {
            return Ok(Linear::new(weight, Layout::OutIn, Some(bias)));
        }
        // A weight that had to be converted (a `.bin`, f16) is a copy already: store it
        // transposed, which gemm reads fast for any number of rows, and never pack it again.
        let mut t = vec![0f32; weight.len()];
        kernels::transpose_into(&weight, outputs, inputs, &mut t, outputs, 0);
        drop(weight);
        Ok(Linear::new(
            Weight::owned(t, vec![inputs, outputs]),
            Layout::InOut,
            Some(bias),
        ))
    }

    /// A map from its parts: `weight` of shape `[outputs, inputs]` (`OutIn`) or
    /// `[inputs, outputs]` (`InOut`).
    pub fn new(weight: Weight, layout: Layout, bias: Option<Weight>) -> Linear {
        let (inputs, outputs) = match (layout, weight.shape()) {
            (Layout::OutIn, [o, i]) => (*i, *o),
            (Layout::InOut, [i, o]) => (*i, *o),
            (_, shape) => panic!("a linear map's weight is a matrix, not {shape:?}"),
        };
        assert!(
            bias.as_ref().is_none_or(|b| b.len() == outputs),
            "bias shape"
        );
        Linear {
            weight,
            layout,
            bias,
            inputs,
            outputs,
            packed: OnceLock::new(),
        }
    }

    /// Input size.
    pub fn inputs(&self) -> usize {
        self.inputs
    }

    /// Output size.
    pub fn outputs(&self) -> usize {
        self.outputs
    }

    /// `out[r][col0..col0 + outputs] = activation(x[r]·Wᵀ + b)` for the `rows` rows of `x`.
    pub fn forward_into(&self, x: &[f32], rows: usize, out: Output<'_>, activation: Activation) {
        if self.layout == Layout::OutIn && rows >= PACK_ROWS && !self.weight.is_mapped() {
            // Our own memory already (dequantised from GGUF): gemm reads it as it is rather
            // than through a second, packed copy (see `kernels::linear_gemm`).
            let matrix = Matrix {
                data: &self.weight,
                inputs: self.inputs,
                outputs: self.outputs,
                layout: Layout::OutIn,
            };
            return kernels::linear::linear_gemm(
                x,
                rows,
                matrix,
                self.bias.as_deref(),
                out,
                activation,
            );
        }
        let matrix = if self.layout == Layout::OutIn && rows >= PACK_ROWS {
            Matrix {
                data: self.packed(),
                inputs: self.inputs,
                outputs: self.outputs,
                layout: Layout::InOut,
            }
        } else {
            Matrix {
                data: &self.weight,
                inputs: self.inputs,
                outputs: self.outputs,
                layout: self.layout,
            }
        };
        kernels::linear(x, rows, matrix, self.bias.as_deref(), out, activation);
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

    /// The `[in, out]` copy, made on first use; the in-place pages it replaces for long inputs
    /// are dropped from this process (short inputs map them again when they need them).
    fn packed(&self) -> &[f32] {
        self.packed.get_or_init(|| {
            let mut t = vec![0f32; self.weight.len()];
            kernels::transpose_into(
                &self.weight,
                self.outputs,
                self.inputs,
                &mut t,
                self.outputs,
                0,
            );
            self.weight.release_pages();
            t
        })
    }
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
