//! A vision transformer whose patches merge, `merge × merge` at a time, into a language model's
//! image tokens (Qwen2.5-VL's `Qwen2_5_VisionTransformerPretrainedModel`, Qwen2-VL's
//! `Qwen2VisionTransformerPretrainedModel`): each patch of `temporal` frames (a still picture
//! repeated, as the processor does) projected linearly (the Conv3d, no bias), no position
//! embeddings but a 2-D rotary embedding in every attention (the head's frequencies split
//! between the patch's row and its column), pre-norm layers (RMSNorm and a gated MLP with
//! biases for Qwen2.5-VL, LayerNorm and a plain MLP for Qwen2-VL), some attending within
//! windows of merged units and the others over the whole picture, then the merger: a norm,
//! each `merge × merge` square's patches side by side, and a two-layer MLP with GELU.
//!
//! transformers runs the tower with the merged units reordered window by window; attention is
//! the same whatever the order, so here the patches stay in raster order, a windowed layer
//! masking the keys outside the query's window (their weights are exactly 0, as transformers'
//! per-window attention gives none), and the captures come out in the order the other towers
//! give them. Names and options come in as data; no family is named here.

use super::capture::SequenceCapture;
use super::layers::{part, Linear, Norm};
use super::network::{Architecture, Vision};
use super::vision::VisionAct;
use crate::attention::image::Cell;
use crate::kernels::{self, Activation, Rope, ScoreBias};

/// One pre-norm layer.
pub struct MergedVisionLayer {
    /// The norm before attention.
    pub norm1: Norm,
    /// Query, key and value projections side by side.
    pub qkv: Linear,
    /// Attention output projection.
    pub output: Linear,
    /// The norm before the MLP.
    pub norm2: Norm,
    /// The MLP.
    pub mlp: Mlp,
    /// Whether it attends within windows (else over the whole picture).
    pub windowed: bool,
}

/// A layer's MLP.
pub enum Mlp {
    /// `down(act(gate(x)) · up(x))` (Qwen2.5-VL).
    Gated {
        /// The gate, its activation applied.
        gate: Linear,
        /// The up projection.
        up: Linear,
        /// The projection back.
        down: Linear,
        /// The gate's activation.
        act: Activation,
    },
    /// `fc2(act(fc1(x)))` (Qwen2-VL, quick GELU).
    Plain {
        /// Expansion.
        fc1: Linear,
        /// Projection back.
        fc2: Linear,
        /// Its activation.
        act: VisionAct,
    },
}

impl Mlp {
    fn forward(&self, h: &[f32], n: usize) -> Vec<f32> {
        match self {
            Mlp::Gated {
                gate,
                up,
                down,
                act,
            } => {
                let mut g = gate.forward(h, n, *act);
                let u = up.forward(h, n, Activation::Identity);
                g.iter_mut().zip(&u).for_each(|(g, u)| *g *= u);
                down.forward(&g, n, Activation::Identity)
            }
            Mlp::Plain { fc1, fc2, act } => {
                let inner = act.through(fc1, h, n);
                fc2.forward(&inner, n, Activation::Identity)
            }
        }
    }
}

/// The merger of `merge × merge` patches into one image token.
pub struct Merger {
    /// The norm over each patch (`ln_q`: RMSNorm, or Qwen2-VL's LayerNorm).
    pub norm: Norm,
    /// `[merge² · hidden → merge² · hidden]`, GELU after it.
    pub fc1: Linear,
    /// `[merge² · hidden → out]`.
    pub fc2: Linear,
}

/// The tower.
pub struct MergedVision {
    /// Its shape.
    pub arch: Architecture,
    /// Patch side in pixels.
    pub patch: usize,
    /// Frames per patch (`temporal_patch_size`): a picture's pixels repeated that many times.
    pub temporal: usize,
    /// Image channels.
    pub channels: usize,
    /// Patches per side merged into one image token.
    pub merge: usize,
    /// Merged units per side of a window.
    pub window: usize,
    /// `[hidden, channels · temporal · patch · patch]`, no bias.
    pub projection: Linear,
    /// The 2-D rotary frequencies ([`Rope::axial`]): the first half for the patch's row, the
    /// second for its column.
    pub rope: Rope,
    /// The layers.
    pub layers: Vec<MergedVisionLayer>,
    /// The merger.
    pub merger: Merger,
}

/// A windowed layer's mask: keys outside the query's window get −∞.
struct Windows(Vec<usize>);

impl ScoreBias for Windows {
    fn add(&self, _sequence: usize, _head: usize, query: usize, scores: &mut [f32]) {
        let own = self.0[query];
        for (s, &w) in scores.iter_mut().zip(&self.0) {
            if w != own {
                *s = f32::NEG_INFINITY;
            }
        }
    }
}

/// The window of each patch of a `[rows, cols]` grid whose windows are `side` patches square,
/// in raster order, numbered in transformers' window order (row-major over the windows; those
/// at the right and bottom edges cut short).
fn windows([rows, cols]: [usize; 2], side: usize) -> Vec<usize> {
    let across = cols.div_ceil(side);
    (0..rows)
        .flat_map(|r| (0..cols).map(move |c| (r / side) * across + c / side))
        .collect()
}

impl MergedVision {
    /// Each patch's vector `[channels · temporal · patch · patch]` (channel, frame, row,
    /// column; every frame the same picture) from `[channels, height, width]` pixels, patches
    /// in raster order.
    fn patches(&self, pixels: &[f32], width: usize, height: usize) -> (Vec<f32>, [usize; 2]) {
        let p = self.patch;
        let grid = [height / p, width / p];
        let len = self.channels * self.temporal * p * p;
        let mut out = vec![0f32; grid[0] * grid[1] * len];
        for (i, v) in out.chunks_exact_mut(len).enumerate() {
            let (r, c) = (i / grid[1], i % grid[1]);
            let mut at = 0;
            for ch in 0..self.channels {
                for _ in 0..self.temporal {
                    for y in 0..p {
                        let row = &pixels[(ch * height + r * p + y) * width + c * p..][..p];
                        v[at..at + p].copy_from_slice(row);
                        at += p;
                    }
                }
            }
        }
        (out, grid)
    }

    /// Run `[channels, height, width]` pixels through every layer, capturing into `capture`;
    /// the output of the last layer `[patches, hidden]` in raster order. `norms` gets each
    /// layer's token norms ([`Vision::forward_pixels`]). `None` when `cancel` was set (checked
    /// between layers).
    pub fn run(
        &self,
        pixels: &[f32],
        width: usize,
        height: usize,
        capture: &mut SequenceCapture,
        norms: &mut Vec<Vec<f32>>,
        cancel: &crate::cancel::Cancel,
    ) -> Option<Vec<f32>> {
        let (patches, grid) = self.patches(pixels, width, height);
        let n = grid[0] * grid[1];
        let mut x = self.projection.forward(&patches, n, Activation::Identity);
        let rows: Vec<usize> = (0..n).map(|i| i / grid[1]).collect();
        let cols: Vec<usize> = (0..n).map(|i| i % grid[1]).collect();
        let quarter = self.rope.inv_freq().len() / 2;
        let table = self
            .rope
            .table_sections(&[&rows, &cols], &[quarter, quarter]);
        let windows = Windows(windows(grid, self.merge * self.window));
        let hidden = self.arch.hidden_size;
        for (l, layer) in self.layers.iter().enumerate() {
            if cancel.is_cancelled() {
                return None;
            }
            let h = layer.norm1.forward(&x, None);
            let mut qkv = layer.qkv.forward(&h, n, Activation::Identity);
            let heads = self.arch.heads;
            table.rotate(&mut qkv, 3 * hidden, 0, heads);
            table.rotate(&mut qkv, 3 * hidden, hidden, heads);
            let mut spec = self.arch.attention(1, n, n);
            if layer.windowed {
                spec.bias = Some(&windows);
            }
            let third = |p: usize| part(&qkv, p * hidden, 3 * hidden);
            let mut context = vec![0f32; n * hidden];
            let mut sink = capture.layer(l);
            kernels::attention(
                third(0),
                third(1),
                third(2),
                &spec,
                &[n],
                &[n],
                std::slice::from_mut(&mut sink),
                &mut context,
            );
            let attended = layer.output.forward(&context, n, Activation::Identity);
            super::layers::add_in_place(&mut x, &attended);
            let h = layer.norm2.forward(&x, None);
            let out = layer.mlp.forward(&h, n);
            super::layers::add_in_place(&mut x, &out);
            norms.push(
                x.chunks_exact(hidden)
                    .map(|t| t.iter().map(|v| (*v as f64).powi(2)).sum::<f64>().sqrt() as f32)
                    .collect(),
            );
        }
        Some(x)
    }

    /// The merger over the last layer's output `[patches, hidden]` (raster order, a grid of
    /// `[rows, cols]` patches): one embedding per `merge × merge` square, the squares in
    /// raster order of the merged grid.
    pub fn merge(&self, last: &[f32], [rows, cols]: [usize; 2]) -> Vec<f32> {
        let (m, hidden) = (self.merge, self.arch.hidden_size);
        let normed = self.merger.norm.forward(last, None);
        let (mr, mc) = (rows / m, cols / m);
        let width = m * m * hidden;
        let mut grouped = vec![0f32; mr * mc * width];
        for (u, out) in grouped.chunks_exact_mut(width).enumerate() {
            let (br, bc) = (u / mc, u % mc);
            for a in 0..m {
                for b in 0..m {
                    let patch = (br * m + a) * cols + bc * m + b;
                    out[(a * m + b) * hidden..][..hidden]
                        .copy_from_slice(&normed[patch * hidden..][..hidden]);
                }
            }
        }
        let inner = self
            .merger
            .fc1
            .forward(&grouped, mr * mc, Activation::GeluErf);
        self.merger
            .fc2
            .forward(&inner, mr * mc, Activation::Identity)
    }
}

impl Vision for MergedVision {
    fn patch_size(&self) -> usize {
        self.patch
    }

    /// It has no position embeddings to have been trained on a grid: any grid is its own.
    fn trained_grid(&self) -> [usize; 2] {
        [0, 0]
    }

    fn learned_positions(&self) -> bool {
        false
    }

    fn windows(&self) -> Option<(usize, Vec<bool>)> {
        let layers: Vec<bool> = self.layers.iter().map(|l| l.windowed).collect();
        layers
            .contains(&true)
            .then_some((self.merge * self.window, layers))
    }

    fn cells(&self, [rows, cols]: [usize; 2]) -> Vec<Cell> {
        (0..rows)
            .flat_map(|row| (0..cols).map(move |col| Cell::Patch { row, col }))
            .collect()
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
        self.run(pixels, width, height, capture, norms, cancel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_cover_merge_squares_row_major_and_cut_at_the_edge() {
        // Windows of 2 x 2 merged units of 2 x 2 patches: 4 x 4 patches each; a 4 x 6 grid has
        // one full window and one of 4 x 2 patches beside it, as transformers' window index.
        let w = windows([4, 6], 4);
        assert_eq!(&w[..6], &[0, 0, 0, 0, 1, 1]);
        assert_eq!(w.iter().filter(|&&x| x == 0).count(), 16);
        assert_eq!(w.iter().filter(|&&x| x == 1).count(), 8);
        // 9 x 9 patches (windows of 4): 3 across, 3 down.
        let w = windows([9, 9], 4);
        assert_eq!((w[8], w[4 * 9], w[80]), (2, 3, 8));
        let mut scores = vec![0f32; 24];
        Windows(w.clone()).add(0, 0, 5, &mut scores);
        for (k, s) in scores.iter().enumerate() {
            assert_eq!(*s == f32::NEG_INFINITY, w[k] != 1, "key {k}");
        }
    }
}
