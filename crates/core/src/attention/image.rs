//! What a vision model's attention was computed over: the picture (its size, the preprocessing
//! applied, the pixels the model saw), the patch grid, and what each token is (a patch at a
//! grid position, or the class, distillation or a register token). Every view of an image reads
//! this, never the model.

use serde::{Deserialize, Serialize};

/// What one token of a vision model stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Cell {
    /// The patch at `row`, `col` of the grid (from the top left, numbered from 0).
    Patch {
        /// Grid row.
        row: usize,
        /// Grid column.
        col: usize,
    },
    /// The class token (`[CLS]`; CLIP's class embedding).
    Class,
    /// DeiT's distillation token.
    Distillation,
    /// Register token `index` (DINOv2 with registers).
    Register {
        /// Which register, from 0.
        index: usize,
    },
}

impl Cell {
    /// The token's label: `CLS`, `DIST`, `REG0`, or a patch's `row,col`.
    pub fn label(self) -> String {
        match self {
            Cell::Patch { row, col } => format!("{row},{col}"),
            Cell::Class => "CLS".into(),
            Cell::Distillation => "DIST".into(),
            Cell::Register { index } => format!("REG{index}"),
        }
    }

    /// Whether it is a special token (not a patch).
    pub fn is_special(self) -> bool {
        !matches!(self, Cell::Patch { .. })
    }
}

/// A resize step.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Resize {
    /// Width after it.
    pub width: usize,
    /// Height after it.
    pub height: usize,
    /// PIL's filter (`bilinear`, `bicubic`, …), with its support widened when shrinking.
    pub filter: &'static str,
}

/// The preprocessing applied, in order, as the model's `preprocessor_config.json` asked.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Preprocessing {
    /// The decoded image's colour type before conversion to RGB (`rgb8`, `l8`, `rgba8`, …).
    pub color: String,
    /// Resize, when one ran.
    pub resize: Option<Resize>,
    /// Centre crop `[width, height]`, when one ran (zero-padded where the image is smaller).
    pub crop: Option<[usize; 2]>,
    /// The factor on each 0–255 value (`1/255`), when rescaling ran.
    pub rescale: Option<f64>,
    /// Per-channel mean and standard deviation subtracted and divided, when normalising ran.
    pub normalize: Option<[[f64; 3]; 2]>,
    /// The position embeddings' grid as trained `[rows, cols]`, when it was interpolated
    /// (bicubic) to the image's grid.
    pub positions_from: Option<[usize; 2]>,
}

/// An attention-pooling head's attention: one learned query (the probe) over the model's
/// tokens, per head (SigLIP's `SiglipMultiheadAttentionPoolingHead`, `nn.MultiheadAttention`
/// over the last hidden state, after the last layer and `post_layernorm`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Pooling {
    /// What it is, for every view: `attention-pooling head`.
    pub label: &'static str,
    /// Its query: `probe`, a learned vector, not one of the model's tokens.
    pub query: &'static str,
    /// Heads.
    pub heads: usize,
    /// `weights[head][token]`: each head's attention over the model's tokens (in `cells`' order),
    /// each row summing to 1.
    pub weights: Vec<Vec<f32>>,
}

impl Pooling {
    /// The label every view shows the pooling head by.
    pub const LABEL: &'static str = "attention-pooling head";

    /// From `[heads, n]` weights.
    pub fn new(weights: &[f32], heads: usize) -> Pooling {
        let n = weights.len() / heads.max(1);
        Pooling {
            label: Pooling::LABEL,
            query: "probe",
            heads,
            weights: weights.chunks(n.max(1)).map(<[f32]>::to_vec).collect(),
        }
    }

    /// One head's row, or the mean over the heads.
    pub fn row(&self, head: crate::attention::HeadSel) -> Option<Vec<f32>> {
        match head {
            crate::attention::HeadSel::Index(h) => self.weights.get(h).cloned(),
            crate::attention::HeadSel::Mean => {
                let n = self.weights.first()?.len();
                let mut out = vec![0f32; n];
                for w in &self.weights {
                    for (o, v) in out.iter_mut().zip(w) {
                        *o += v / self.heads as f32;
                    }
                }
                Some(out)
            }
        }
    }
}

/// The image a vision model's attention was computed over.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ImageInput {
    /// Where it came from (a file name, or `image` for an in-memory picture).
    pub source: String,
    /// The image as given, `[width, height]`.
    pub original: [usize; 2],
    /// What the model saw, `[width, height]`.
    pub input: [usize; 2],
    /// Patch side in pixels.
    pub patch: usize,
    /// The patch grid, `[rows, cols]`.
    pub grid: [usize; 2],
    /// The steps that made the model's input from the image.
    pub preprocessing: Preprocessing,
    /// What each of the model's tokens is, in the model's order.
    pub cells: Vec<Cell>,
    /// `norms[layer][token]`: the L2 norm of each token's output of each captured layer (the
    /// residual stream after it, before a final LayerNorm), in the attention's layer order.
    /// Registers and the high-norm patches of large ViTs stand out here (Darcet et al. 2023).
    /// Empty when not computed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub norms: Vec<Vec<f32>>,
    /// The attention of the model's pooling head (SigLIP's probe query over the last hidden
    /// state), when it has one: one more attention beside the layers' self-attention.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pooling: Option<Pooling>,
    /// The pixels the model saw before rescaling and normalising: `input` RGB, row-major, for
    /// drawing on.
    #[serde(skip)]
    pub view: Vec<u8>,
}

impl ImageInput {
    /// The cell of token `token` (a unit's `spans[i].start` at token level).
    pub fn cell(&self, token: usize) -> Option<Cell> {
        self.cells.get(token).copied()
    }

    /// The token of the patch at `row`, `col`.
    pub fn patch_token(&self, row: usize, col: usize) -> Option<usize> {
        self.cells
            .iter()
            .position(|&c| c == Cell::Patch { row, col })
    }

    /// The tokens that are not patches, in order.
    pub fn special_tokens(&self) -> Vec<usize> {
        (0..self.cells.len())
            .filter(|&i| self.cells[i].is_special())
            .collect()
    }

    /// One attention row over the keys (`row[k]` for token `k`) laid out on the patch grid,
    /// `[rows · cols]`, row-major; special tokens are left out (see [`ImageInput::specials_of`]).
    pub fn on_grid(&self, row: &[f32]) -> Vec<f32> {
        let [rows, cols] = self.grid;
        let mut out = vec![0f32; rows * cols];
        for (k, cell) in self.cells.iter().enumerate() {
            if let (Cell::Patch { row: r, col: c }, Some(&v)) = (cell, row.get(k)) {
                out[r * cols + c] = v;
            }
        }
        out
    }

    /// The special tokens' share of one attention row, with their labels.
    pub fn specials_of(&self, row: &[f32]) -> Vec<(String, f32)> {
        self.special_tokens()
            .into_iter()
            .filter_map(|k| Some((self.cells[k].label(), *row.get(k)?)))
            .collect()
    }
}
