//! The image front end and the pre-LayerNorm Transformer encoder of the vision families (ViT,
//! DeiT, DINOv2, CLIP's vision tower): pixels are cut into patches, each projected linearly
//! (the stride-`p` convolution of `patch_embeddings.projection`), the class token (and DeiT's
//! distillation token) put in front, position embeddings added — interpolated bicubically, as
//! transformers' `interpolate_pos_encoding` does, when the patch grid is not the one they were
//! trained on — then DINOv2's registers inserted after the class token; then
//! `h += attn(norm(h)); h += mlp(norm(h))` per layer, with DINOv2's layer scales, and SigLIP's
//! attention-pooling head over the last hidden state ([`PoolingHead`]). Names and
//! options come in as data; no family is named here.

use super::capture::SequenceCapture;
use super::layers::{part, Linear, Norm};
pub use super::network::Vision;
use super::network::{Architecture, Batch, Network};
use crate::attention::image::Cell;
use crate::formats::config::{
    ConfigError, ConfigFile, ConfigProblem, Expected, Field, FieldValue, Instead, Unsupported,
};
use crate::formats::weights::Weight;
use crate::kernels::{self, Activation, CaptureSink, Layout};

/// The feed-forward activation of a vision layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VisionAct {
    /// One of the shared kernels' activations.
    Kernel(Activation),
    /// CLIP's `quick_gelu`: `x · σ(1.702 x)`.
    QuickGelu,
}

impl VisionAct {
    /// `linear(x)` (`rows` rows) through the activation.
    pub fn through(self, linear: &Linear, x: &[f32], rows: usize) -> Vec<f32> {
        match self {
            VisionAct::Kernel(a) => linear.forward(x, rows, a),
            VisionAct::QuickGelu => {
                let mut out = linear.forward(x, rows, Activation::Identity);
                for v in &mut out {
                    *v *= 1.0 / (1.0 + (-1.702 * *v).exp());
                }
                out
            }
        }
    }
}

/// One pre-norm layer.
pub struct VisionLayer {
    /// LayerNorm before attention.
    pub norm1: Norm,
    /// Query, key and value projections side by side.
    pub qkv: Linear,
    /// Attention output projection.
    pub output: Linear,
    /// DINOv2's per-channel scale on the attention branch.
    pub scale1: Option<Weight>,
    /// LayerNorm before the feed-forward block.
    pub norm2: Norm,
    /// Expansion.
    pub fc1: Linear,
    /// Its activation.
    pub act: VisionAct,
    /// Projection back.
    pub fc2: Linear,
    /// DINOv2's per-channel scale on the feed-forward branch.
    pub scale2: Option<Weight>,
}

/// Tokens put before the patches.
pub struct Specials {
    /// Tokens before the patches that have position embeddings (the class token; DeiT's
    /// distillation token), each `[hidden]`.
    pub with_positions: Vec<(Cell, Vec<f32>)>,
    /// Tokens inserted after the first token once positions are added (DINOv2's registers).
    pub after_positions: Vec<(Cell, Vec<f32>)>,
}

/// A ViT-style encoder over patches.
pub struct VisionEncoder {
    /// Its shape.
    pub arch: Architecture,
    /// Patch side.
    pub patch: usize,
    /// Image channels.
    pub channels: usize,
    /// The patch projection `[hidden, channels · patch · patch]` (a convolution's weight read
    /// as a matrix) with its bias.
    pub projection: Linear,
    /// Special tokens.
    pub specials: Specials,
    /// Position embeddings `[specials with positions + trained rows · cols, hidden]`.
    pub positions: Vec<f32>,
    /// The grid the positions were trained on.
    pub trained: [usize; 2],
    /// Interpolate the positions with antialiasing (torch's `antialias=True`: PIL's bicubic,
    /// a = −0.5, widened when shrinking), as DINOv2 with registers does; else plain bicubic.
    pub antialias: bool,
    /// CLIP's LayerNorm before the first layer.
    pub pre_norm: Option<Norm>,
    /// The layers.
    pub layers: Vec<VisionLayer>,
    /// The final LayerNorm (last hidden state), when the model has one.
    pub final_norm: Option<Norm>,
    /// SigLIP's attention-pooling head over the last hidden state, when the model has one.
    pub pooling: Option<PoolingHead>,
}

/// A multihead attention-pooling head (SigLIP's `SiglipMultiheadAttentionPoolingHead`, after
/// Lee et al. 2019): one learned probe query attends over the last hidden state with
/// `nn.MultiheadAttention`, the model's number of heads. Only its attention is computed here;
/// the pooled vector (its output projection, LayerNorm and MLP) feeds no attention.
pub struct PoolingHead {
    /// The probe `[hidden]`.
    pub probe: Vec<f32>,
    /// The query projection (the first third of `in_proj_weight`, with its bias).
    pub query: Linear,
    /// The key and value projections side by side (the other two thirds).
    pub key_value: Linear,
}

impl PoolingHead {
    /// The probe's attention over `n` tokens of `hidden` (the last hidden state), `[heads, n]`.
    pub fn attention(&self, hidden: &[f32], n: usize, arch: &Architecture) -> Vec<f32> {
        let d = arch.hidden_size;
        let q = self.query.forward(&self.probe, 1, Activation::Identity);
        let kv = self.key_value.forward(hidden, n, Activation::Identity);
        let spec = arch.attention(1, 1, n);
        let mut probs = vec![0f32; arch.heads * n];
        let mut context = vec![0f32; d];
        let mut sink = CaptureSink {
            probs: Some(&mut probs),
            query_key: None,
            summary: None,
        };
        kernels::attention(
            part(&q, 0, d),
            part(&kv, 0, 2 * d),
            part(&kv, d, 2 * d),
            &spec,
            &[1],
            &[n],
            std::slice::from_mut(&mut sink),
            &mut context,
        );
        probs
    }
}

impl VisionEncoder {
    /// A convolution weight `[hidden, channels, patch, patch]` as a linear map.
    pub fn projection(weight: Weight, bias: Option<Weight>) -> Linear {
        let s = weight.shape().to_vec();
        let inputs = s[1..].iter().product();
        let values = weight.to_vec();
        Linear::new(
            Weight::owned(values, vec![s[0], inputs]),
            Layout::OutIn,
            bias,
        )
    }

    fn embed(&self, pixels: &[f32], width: usize, height: usize) -> (Vec<f32>, usize) {
        let (p, c, hidden) = (self.patch, self.channels, self.arch.hidden_size);
        let (rows, cols) = (height / p, width / p);
        // Each patch's pixels in the convolution's order: channel, row, column.
        let mut patches = vec![0f32; rows * cols * c * p * p];
        for r in 0..rows {
            for q in 0..cols {
                let dst = &mut patches[(r * cols + q) * c * p * p..][..c * p * p];
                for ch in 0..c {
                    for i in 0..p {
                        let src = &pixels[ch * width * height + (r * p + i) * width + q * p..][..p];
                        dst[(ch * p + i) * p..][..p].copy_from_slice(src);
                    }
                }
            }
        }
        let projected = self
            .projection
            .forward(&patches, rows * cols, Activation::Identity);
        let lead = self.specials.with_positions.len();
        let n0 = lead + rows * cols;
        let mut x = Vec::with_capacity(n0 * hidden);
        for (_, v) in &self.specials.with_positions {
            x.extend_from_slice(v);
        }
        x.extend_from_slice(&projected);
        let pos = self.positions_for([rows, cols]);
        for (a, b) in x.iter_mut().zip(&pos) {
            *a += b;
        }
        if !self.specials.after_positions.is_empty() {
            let mut out = Vec::with_capacity((n0 + self.specials.after_positions.len()) * hidden);
            out.extend_from_slice(&x[..hidden]);
            for (_, v) in &self.specials.after_positions {
                out.extend_from_slice(v);
            }
            out.extend_from_slice(&x[hidden..]);
            x = out;
        }
        let n = x.len() / hidden;
        (x, n)
    }

    /// The position embeddings for a `grid` of patches, the special tokens' first.
    fn positions_for(&self, grid: [usize; 2]) -> Vec<f32> {
        let hidden = self.arch.hidden_size;
        let lead = self.specials.with_positions.len();
        if grid == self.trained {
            return self.positions.clone();
        }
        let mut out = self.positions[..lead * hidden].to_vec();
        let table = &self.positions[lead * hidden..];
        out.extend(if self.antialias {
            bicubic_grid_antialiased(table, self.trained, grid, hidden)
        } else {
            bicubic_grid(table, self.trained, grid, hidden)
        });
        out
    }
}

/// PyTorch's `interpolate(mode="bicubic", align_corners=False, antialias=True)` of a
/// `[rows · cols, dim]` table laid out on its grid, to `to`: separable, each output reading
/// the inputs within `2 · max(scale, 1)` of its centre with the cubic kernel (a = −0.5) at
/// `1 / max(scale, 1)`, the weights normalised (the same weights as PIL's resampling, in
/// floating point), columns first, then rows.
pub fn bicubic_grid_antialiased(
    table: &[f32],
    from: [usize; 2],
    to: [usize; 2],
    dim: usize,
) -> Vec<f32> {
    fn taps(inp: usize, out: usize) -> Vec<(usize, Vec<f64>)> {
        const A: f64 = -0.5;
        let cubic = |x: f64| {
            let x = x.abs();
            if x < 1.0 {
                ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0
            } else if x < 2.0 {
                (((x - 5.0) * x + 8.0) * x - 4.0) * A
            } else {
                0.0
            }
        };
        let scale = inp as f64 / out as f64;
        let support = 2.0 * scale.max(1.0);
        let inv = 1.0 / scale.max(1.0);
        (0..out)
            .map(|o| {
                let center = scale * (o as f64 + 0.5);
                let lo = ((center - support + 0.5) as i64).max(0) as usize;
                let hi = ((center + support + 0.5) as i64).min(inp as i64) as usize;
                let w: Vec<f64> = (lo..hi)
                    .map(|j| cubic((j as f64 - center + 0.5) * inv))
                    .collect();
                let total: f64 = w.iter().sum();
                (
                    lo,
                    w.into_iter()
                        .map(|v| if total != 0.0 { v / total } else { v })
                        .collect(),
                )
            })
            .collect()
    }
    let (ty, tx) = (taps(from[0], to[0]), taps(from[1], to[1]));
    // Columns: [from rows, to cols, dim].
    let mut mid = vec![0f64; from[0] * to[1] * dim];
    for r in 0..from[0] {
        for (oc, (lo, w)) in tx.iter().enumerate() {
            let dst = &mut mid[(r * to[1] + oc) * dim..][..dim];
            for (j, &wj) in w.iter().enumerate() {
                let src = &table[(r * from[1] + lo + j) * dim..][..dim];
                for (d, s) in dst.iter_mut().zip(src) {
                    *d += wj * *s as f64;
                }
            }
        }
    }
    let mut out = vec![0f32; to[0] * to[1] * dim];
    for (or, (lo, w)) in ty.iter().enumerate() {
        for c in 0..to[1] {
            let dst = &mut out[(or * to[1] + c) * dim..][..dim];
            for (d, dv) in dst.iter_mut().enumerate() {
                let mut acc = 0f64;
                for (j, &wj) in w.iter().enumerate() {
                    acc += wj * mid[((lo + j) * to[1] + c) * dim + d];
                }
                *dv = acc as f32;
            }
        }
    }
    out
}

/// PyTorch's `interpolate(mode="bicubic", align_corners=False)` (a = −0.75, edges clamped) of a
/// `[rows · cols, dim]` table laid out on its grid, to `to`.
pub fn bicubic_grid(table: &[f32], from: [usize; 2], to: [usize; 2], dim: usize) -> Vec<f32> {
    fn taps(inp: usize, out: usize) -> Vec<([usize; 4], [f64; 4])> {
        const A: f64 = -0.75;
        let c1 = |x: f64| ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0;
        let c2 = |x: f64| ((A * x - 5.0 * A) * x + 8.0 * A) * x - 4.0 * A;
        let scale = inp as f64 / out as f64;
        (0..out)
            .map(|o| {
                let src = (o as f64 + 0.5) * scale - 0.5;
                let i = src.floor();
                let t = src - i;
                let i = i as i64;
                let at = |d: i64| (i + d).clamp(0, inp as i64 - 1) as usize;
                (
                    [at(-1), at(0), at(1), at(2)],
                    [c2(t + 1.0), c1(t), c1(1.0 - t), c2(2.0 - t)],
                )
            })
            .collect()
    }
    let (ty, tx) = (taps(from[0], to[0]), taps(from[1], to[1]));
    let mut out = vec![0f32; to[0] * to[1] * dim];
    for (oy, (iy, wy)) in ty.iter().enumerate() {
        for (ox, (ix, wx)) in tx.iter().enumerate() {
            let dst = &mut out[(oy * to[1] + ox) * dim..][..dim];
            for d in 0..dim {
                let mut acc = 0f64;
                for a in 0..4 {
                    let mut row = 0f64;
                    for b in 0..4 {
                        row += wx[b] * table[(iy[a] * from[1] + ix[b]) * dim + d] as f64;
                    }
                    acc += wy[a] * row;
                }
                dst[d] = acc as f32;
            }
        }
    }
    out
}

impl VisionLayer {
    fn forward(&self, x: &mut [f32], n: usize, arch: &Architecture, sink: &mut CaptureSink<'_>) {
        let hidden = arch.hidden_size;
        let h = self.norm1.forward(x, None);
        let qkv = self.qkv.forward(&h, n, Activation::Identity);
        let spec = arch.attention(1, n, n);
        let third = |p: usize| part(&qkv, p * hidden, 3 * hidden);
        let mut context = vec![0f32; n * hidden];
        kernels::attention(
            third(0),
            third(1),
            third(2),
            &spec,
            &[n],
            &[n],
            std::slice::from_mut(sink),
            &mut context,
        );
        let attended = self.output.forward(&context, n, Activation::Identity);
        add_scaled(x, &attended, self.scale1.as_deref(), hidden);
        let h = self.norm2.forward(x, None);
        let inner = self.act.through(&self.fc1, &h, n);
        let out = self.fc2.forward(&inner, n, Activation::Identity);
        add_scaled(x, &out, self.scale2.as_deref(), hidden);
    }
}

/// `x += branch · scale` (per channel), or `x += branch`.
fn add_scaled(x: &mut [f32], branch: &[f32], scale: Option<&[f32]>, hidden: usize) {
    match scale {
        Some(s) => {
            for (xr, br) in x.chunks_exact_mut(hidden).zip(branch.chunks_exact(hidden)) {
                for ((a, b), g) in xr.iter_mut().zip(br).zip(s) {
                    *a += b * g;
                }
            }
        }
        None => {
            for (a, b) in x.iter_mut().zip(branch) {
                *a += b;
            }
        }
    }
}

impl VisionEncoder {
    /// Run `[3, height, width]` pixels through every layer, capturing into `capture`, and
    /// return the output of the last layer (before any final norm). `norms` gets each layer's
    /// token norms ([`Vision::forward_pixels`]); each `(stage, state)` of `states` gets the
    /// hidden state at `stage` as transformers numbers `hidden_states` (0: the input of the
    /// first layer, after any pre-norm; `l`: the output of layer `l - 1`). `None` when `cancel`
    /// was set (checked between layers).
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        &self,
        pixels: &[f32],
        width: usize,
        height: usize,
        capture: &mut SequenceCapture,
        norms: &mut Vec<Vec<f32>>,
        states: &mut [(usize, Vec<f32>)],
        cancel: &crate::cancel::Cancel,
    ) -> Option<Vec<f32>> {
        let (mut x, n) = self.embed(pixels, width, height);
        if let Some(norm) = &self.pre_norm {
            x = norm.forward(&x, None);
        }
        let keep = |x: &[f32], stage: usize, states: &mut [(usize, Vec<f32>)]| {
            for (s, state) in states.iter_mut() {
                if *s == stage {
                    *state = x.to_vec();
                }
            }
        };
        keep(&x, 0, states);
        let hidden = self.arch.hidden_size;
        for (l, layer) in self.layers.iter().enumerate() {
            if cancel.is_cancelled() {
                return None;
            }
            let mut sink = capture.layer(l);
            layer.forward(&mut x, n, &self.arch, &mut sink);
            norms.push(
                x.chunks_exact(hidden)
                    .map(|t| t.iter().map(|v| (*v as f64).powi(2)).sum::<f64>().sqrt() as f32)
                    .collect(),
            );
            keep(&x, l + 1, states);
        }
        Some(x)
    }

    /// [`VisionEncoder::run`]'s last hidden state after the final norm, if the tower has one
    /// (`post_layernorm`): what a vision-language projector reads (Gemma 3, PaliGemma).
    pub fn last_state(
        &self,
        pixels: &[f32],
        width: usize,
        height: usize,
        capture: &mut SequenceCapture,
        cancel: &crate::cancel::Cancel,
    ) -> Option<Vec<f32>> {
        let last = self.run(
            pixels,
            width,
            height,
            capture,
            &mut Vec::new(),
            &mut [],
            cancel,
        )?;
        Some(match &self.final_norm {
            Some(norm) => norm.forward(&last, None),
            None => last,
        })
    }
}

impl Vision for VisionEncoder {
    fn patch_size(&self) -> usize {
        self.patch
    }

    fn trained_grid(&self) -> [usize; 2] {
        self.trained
    }

    fn cells(&self, [rows, cols]: [usize; 2]) -> Vec<Cell> {
        let lead = &self.specials.with_positions;
        let mut cells: Vec<Cell> = lead.iter().take(1).map(|(c, _)| *c).collect();
        cells.extend(self.specials.after_positions.iter().map(|(c, _)| *c));
        cells.extend(lead.iter().skip(1).map(|(c, _)| *c));
        for row in 0..rows {
            for col in 0..cols {
                cells.push(Cell::Patch { row, col });
            }
        }
        cells
    }

    fn forward_pixels(
        &self,
        pixels: &[f32],
        width: usize,
        height: usize,
        capture: &mut SequenceCapture,
        norms: &mut Vec<Vec<f32>>,
        cancel: &crate::cancel::Cancel,
    ) -> Option<Vec<f32>> {
        let x = self.run(pixels, width, height, capture, norms, &mut [], cancel)?;
        Some(match &self.final_norm {
            Some(norm) => norm.forward(&x, None),
            None => x,
        })
    }

    fn pooling(&self, hidden: &[f32]) -> Option<Vec<f32>> {
        let n = hidden.len() / self.arch.hidden_size;
        Some(self.pooling.as_ref()?.attention(hidden, n, &self.arch))
    }
}

impl Network for VisionEncoder {
    fn architecture(&self) -> &Architecture {
        &self.arch
    }

    /// A vision model reads pixels ([`Vision::forward_pixels`]); `Model` refuses token ids for
    /// it before they get here, so this only keeps the trait's contract: zeros.
    fn forward(&self, batch: &Batch<'_>, _captures: &mut [SequenceCapture]) -> Vec<f32> {
        vec![0.0; batch.ids.len() * self.arch.hidden_size]
    }

    fn vision(&self) -> Option<&dyn Vision> {
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bicubic_keeps_a_grid_of_the_same_size_and_a_constant() {
        let table: Vec<f32> = (0..3 * 3 * 2).map(|i| i as f32).collect();
        let same = bicubic_grid(&table, [3, 3], [3, 3], 2);
        for (a, b) in same.iter().zip(&table) {
            assert!((a - b).abs() < 1e-5);
        }
        let flat = vec![2.5f32; 4 * 4];
        assert!(bicubic_grid(&flat, [4, 4], [7, 5], 1)
            .iter()
            .all(|&v| (v - 2.5).abs() < 1e-5));
    }
}

/// The config.json fields every vision tower has, with a family's defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct VisionConfig {
    /// Hidden size.
    pub hidden_size: usize,
    /// Layers.
    pub num_hidden_layers: usize,
    /// Heads per layer.
    pub num_attention_heads: usize,
    /// Feed-forward inner size.
    pub intermediate_size: usize,
    /// Image side the position embeddings were trained for.
    pub image_size: usize,
    /// Patch side.
    pub patch_size: usize,
    /// Image channels.
    pub num_channels: usize,
    /// LayerNorm ε.
    pub layer_norm_eps: f64,
    /// Feed-forward activation.
    pub act: VisionAct,
}

/// A family's defaults for [`VisionConfig`] (transformers' `*Config.__init__`).
pub struct VisionDefaults {
    /// `hidden_size`.
    pub hidden_size: usize,
    /// `num_hidden_layers`.
    pub num_hidden_layers: usize,
    /// `num_attention_heads`.
    pub num_attention_heads: usize,
    /// `intermediate_size`; `None`: `mlp_ratio` × hidden (DINOv2).
    pub intermediate_size: Option<usize>,
    /// `image_size`.
    pub image_size: usize,
    /// `patch_size`.
    pub patch_size: usize,
    /// `layer_norm_eps`.
    pub layer_norm_eps: f64,
    /// `hidden_act`.
    pub hidden_act: &'static str,
}

/// The largest image side a config may train its positions for.
const MAX_IMAGE_SIDE: usize = 1 << 14;

impl VisionConfig {
    /// Read `file` with `d`'s defaults, refusing sizes that do not divide.
    pub fn read(file: &ConfigFile, d: &VisionDefaults) -> Result<VisionConfig, ConfigError> {
        let hidden_size = file.positive("hidden_size", d.hidden_size)?;
        let intermediate_size = match d.intermediate_size {
            Some(i) => file.positive("intermediate_size", i)?,
            None => {
                let ratio = file.number("mlp_ratio")?.unwrap_or(4.0);
                if !(ratio > 0.0 && ratio <= 64.0) {
                    return Err(file.invalid(ConfigProblem::NotA {
                        field: Field::Top("mlp_ratio"),
                        value: FieldValue::Number(ratio),
                        expected: Expected::Between {
                            above: 0.0,
                            at_most: 64.0,
                        },
                    }));
                }
                (hidden_size as f64 * ratio) as usize
            }
        };
        let act_name = match file.get("hidden_act") {
            Some(serde_json::Value::String(s)) => s.clone(),
            _ => d.hidden_act.to_string(),
        };
        let act = if act_name == "quick_gelu" {
            VisionAct::QuickGelu
        } else {
            VisionAct::Kernel(file.activation("hidden_act", d.hidden_act)?)
        };
        let c = VisionConfig {
            hidden_size,
            num_hidden_layers: file.positive("num_hidden_layers", d.num_hidden_layers)?,
            num_attention_heads: file.positive("num_attention_heads", d.num_attention_heads)?,
            intermediate_size,
            image_size: file.positive("image_size", d.image_size)?,
            patch_size: file.positive("patch_size", d.patch_size)?,
            num_channels: file.positive("num_channels", 3)?,
            layer_norm_eps: file.epsilon("layer_norm_eps", d.layer_norm_eps)?,
            act,
        };
        if !c.hidden_size.is_multiple_of(c.num_attention_heads) {
            return Err(file.invalid(ConfigProblem::NotDivisible {
                field: "hidden_size",
                value: c.hidden_size,
                by_field: "num_attention_heads",
                by: c.num_attention_heads,
            }));
        }
        if c.image_size > MAX_IMAGE_SIDE || c.patch_size > c.image_size {
            return Err(file.invalid(ConfigProblem::PatchGrid {
                image_size: c.image_size,
                patch_size: c.patch_size,
                max_side: MAX_IMAGE_SIDE,
            }));
        }
        if c.num_channels != 3 {
            return Err(file.unsupported(Unsupported::Value {
                field: "num_channels",
                value: Some(FieldValue::Count(c.num_channels)),
                note: None,
                instead: Instead::Runs("attnviz reads RGB images (3 channels)"),
            }));
        }
        Ok(c)
    }

    /// Patches a side at the trained size.
    pub fn trained_side(&self) -> usize {
        self.image_size / self.patch_size
    }

    /// The architecture of a tower of this config with `specials` tokens beside the patches.
    pub fn architecture(
        &self,
        family: &'static str,
        model_type: &str,
        specials: usize,
    ) -> Architecture {
        let heads = self.num_attention_heads;
        Architecture {
            family,
            model_type: model_type.to_string(),
            layers: self.num_hidden_layers,
            heads,
            kv_heads: heads,
            kv_head: Architecture::identity_heads(heads),
            head_dim: self.hidden_size / heads,
            hidden_size: self.hidden_size,
            vocab_size: 0,
            max_positions: specials + self.trained_side() * self.trained_side(),
            token_types: 0,
            tokenizer_types: false,
            mask: kernels::Mask::Bidirectional,
            sliding_window: None,
            positions: crate::attention::PositionScheme::Absolute,
        }
    }
}
