//! What a vision model's attention was computed over: the picture (its size, the preprocessing
//! applied, the pixels the model saw), the patch grid, and what each token is (a patch at a
//! grid position, or the class, distillation or a register token). Every view of an image reads
//! this, never the model.

use serde::{Deserialize, Serialize};

/// What one token of a vision model stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
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

/// A picture a vision-language model read: the run of image tokens that stands for it in the
/// language model's input, and the picture itself (its `cells` are those tokens', in order).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PictureTokens {
    /// Its first image token (a token index).
    pub first: usize,
    /// The picture, its preprocessing and what each of its tokens is.
    pub image: ImageInput,
    /// Whether its image tokens see each other in full under the causal mask, later ones
    /// included (Gemma 3), rather than only the ones before them (LLaVA).
    pub bidirectional: bool,
    /// Which tile of which picture it is, when the processor splits pictures into tiles
    /// (Idefics3, SmolVLM): then each tile, and the whole picture's global view, is a run of
    /// its own.
    pub tile: Option<Tile>,
}

impl PictureTokens {
    /// Its tokens, as token indices.
    pub fn tokens(&self) -> std::ops::Range<usize> {
        self.first..self.first + self.image.cells.len()
    }

    /// Which picture it is (from 0), `index` being its place among the runs: a tile's
    /// picture, else `index`.
    pub fn picture(&self, index: usize) -> usize {
        self.tile.map_or(index, |t| t.picture.saturating_sub(1))
    }

    /// Whether it shows the whole picture: not a tile, or a tiled picture's global view.
    pub fn is_whole(&self) -> bool {
        self.tile.is_none_or(|t| t.at.is_none())
    }

    /// What a person calls it, `index` being its place among the runs (from 0): `picture 2`,
    /// or for a tile `picture 1 · tile 1,2` and `picture 1 · whole`.
    pub fn name(&self, index: usize) -> String {
        match &self.tile {
            None => format!("picture {}", index + 1),
            Some(t) => format!("picture {} · {}", t.picture, t.label()),
        }
    }

    /// Its image tokens' label prefix, `index` being its place among the runs (from 0):
    /// `img2`, or for a tile `img1 r1c2`, a crop `img1 crop2` and a whole view `img1 whole`.
    pub fn token_prefix(&self, index: usize) -> String {
        match &self.tile {
            None => format!("img{}", index + 1),
            Some(t) => match (t.at, t.crop) {
                (Some(_), true) => format!("img{} crop{}", t.picture, t.number()),
                (Some([r, c]), false) => format!("img{} r{}c{}", t.picture, r + 1, c + 1),
                (None, _) => format!("img{} whole", t.picture),
            },
        }
    }
}

/// One picture as the figures draw it: an image, and for each of its cells the token (index)
/// that stands for it.
#[derive(Clone, Debug, PartialEq)]
pub struct PictureView {
    /// The image, its cells on one grid.
    pub image: ImageInput,
    /// The token of each cell, in the order of `image.cells`.
    pub tokens: Vec<usize>,
    /// Whether it is a cut picture's tiles (or crops) put back together.
    pub stitched: bool,
}

impl PictureView {
    /// Run `run` as it is.
    pub fn of(run: &PictureTokens) -> PictureView {
        PictureView {
            image: run.image.clone(),
            tokens: run.tokens().collect(),
            stitched: false,
        }
    }

    /// The whole view of picture `picture` (from 0) among the runs `pictures`: the picture
    /// itself, or a cut picture's global view.
    pub fn whole(pictures: &[PictureTokens], picture: usize) -> Option<PictureView> {
        pictures
            .iter()
            .enumerate()
            .find(|(i, p)| p.picture(*i) == picture && p.is_whole())
            .map(|(_, p)| PictureView::of(p))
    }

    /// Picture `picture` (from 0) among the runs `pictures`, as a cut picture's tiles put back
    /// together in their grid (each tile's view where the tower saw it, its tokens' cells moved
    /// by the tile's place): `None` unless the picture was cut and every tile is there, on the
    /// same grid and size, with its view.
    pub fn stitched(pictures: &[PictureTokens], picture: usize) -> Option<PictureView> {
        let tiles: Vec<(&PictureTokens, [usize; 2], [usize; 2])> = pictures
            .iter()
            .enumerate()
            .filter(|(i, p)| p.picture(*i) == picture)
            .filter_map(|(_, p)| {
                let t = p.tile?;
                Some((p, t.at?, t.of))
            })
            .collect();
        let &(first, _, [rows, cols]) = tiles.first()?;
        if rows * cols != tiles.len() || rows * cols < 2 {
            return None;
        }
        let [tw, th] = first.image.input;
        let [gr, gc] = first.image.grid;
        let same = |p: &PictureTokens| {
            p.image.input == [tw, th]
                && p.image.grid == [gr, gc]
                && p.image.patch == first.image.patch
                && p.image.view.len() == tw * th * 3
        };
        if !tiles
            .iter()
            .all(|(p, _, of)| same(p) && *of == [rows, cols])
        {
            return None;
        }
        let (w, h) = (cols * tw, rows * th);
        let mut view = vec![0u8; w * h * 3];
        let mut cells = Vec::with_capacity(tiles.len() * gr * gc);
        let mut tokens = Vec::with_capacity(cells.capacity());
        let mut placed = vec![false; rows * cols];
        for &(p, [r, c], _) in &tiles {
            if r >= rows || c >= cols || std::mem::replace(&mut placed[r * cols + c], true) {
                return None;
            }
            for y in 0..th {
                let to = ((r * th + y) * w + c * tw) * 3;
                view[to..to + tw * 3].copy_from_slice(&p.image.view[y * tw * 3..][..tw * 3]);
            }
            for (k, cell) in p.image.cells.iter().enumerate() {
                let Cell::Patch { row, col } = *cell else {
                    return None;
                };
                cells.push(Cell::Patch {
                    row: r * gr + row,
                    col: c * gc + col,
                });
                tokens.push(p.first + k);
            }
        }
        // As the parts together were made from the picture: resized to their size as a whole
        // (tiles are cut from one resize; crops each resized from a part of the picture).
        let mut preprocessing = first.image.preprocessing.clone();
        preprocessing.resize = preprocessing.resize.map(|r| Resize {
            width: w,
            height: h,
            ..r
        });
        preprocessing.crop = None;
        Some(PictureView {
            image: ImageInput {
                input: [w, h],
                preprocessing,
                grid: [rows * gr, cols * gc],
                cells,
                norms: Vec::new(),
                pooling: None,
                windows: None,
                view,
                ..first.image.clone()
            },
            tokens,
            stitched: true,
        })
    }
}

/// Which part of a picture a run of image tokens is, when the processor splits pictures into
/// tiles plus a global view (Idefics3's and SmolVLM's `<row_r_col_c>` and `<global-img>`), or
/// gives a picture whole and then cut into crops (Gemma 3's pan-and-scan).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Tile {
    /// The picture, from 1, in the prompt's order.
    pub picture: usize,
    /// The tile's row and column, from 0 (the processor's `<row_{r+1}_col_{c+1}>`); absent for
    /// the global view (the whole picture resized to one tile).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<[usize; 2]>,
    /// The picture's rows and columns of tiles.
    pub of: [usize; 2],
    /// Whether the tiles are pan-and-scan crops (cut from the picture as given, each resized
    /// to the tower's input) rather than tiles of the resized picture.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub crop: bool,
}

impl Tile {
    /// `tile 1,2` (row and column from 1), `crop 2` (from 1, row by row), or `whole` for the
    /// global view.
    pub fn label(&self) -> String {
        match (self.at, self.crop) {
            (Some(_), true) => format!("crop {}", self.number()),
            (Some([r, c]), false) => format!("tile {},{}", r + 1, c + 1),
            (None, _) => "whole".into(),
        }
    }

    /// Its number among the picture's tiles, from 1, row by row (0 for the global view).
    pub fn number(&self) -> usize {
        self.at.map_or(0, |[r, c]| r * self.of[1] + c + 1)
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
    /// The windows some of a vision tower's layers attend within (Qwen2.5-VL), when it has
    /// them: on those layers a patch's weights on the patches outside its window are 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub windows: Option<Windows>,
    /// The pixels the model saw before rescaling and normalising: `input` RGB, row-major, for
    /// drawing on.
    #[serde(skip)]
    pub view: Vec<u8>,
}

/// The windows a vision tower's windowed layers attend within: squares of `side × side`
/// patches of the grid, row by row from the top left (those at the right and bottom edges cut
/// short); a query sees the patches of its own window only.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Windows {
    /// Patches per side of a window.
    pub side: usize,
    /// Per captured layer, in the attention's layer order: whether it attends within windows
    /// (else over the whole picture).
    pub layers: Vec<bool>,
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

    /// How the picture was fitted to the model's input, from its preprocessing, for people:
    /// `stretched from 4:3 to 1:1` when the resize changed its shape (more than rounding to
    /// whole pixels does), `cropped to the centre 224×224 (32 px of its width cut off)` when the
    /// crop cut some of it, `padded with black to 224×224` when the crop was larger; empty when it
    /// was only scaled (or left as it was).
    pub fn framing(&self) -> Vec<String> {
        let [ow, oh] = self.original;
        let mut out = Vec::new();
        let (mut w, mut h) = (ow, oh);
        if let Some(r) = &self.preprocessing.resize {
            // The shape is kept when one side is within a pixel of the other side scaled.
            let (fw, fh) = (ow as f64, oh as f64);
            let (rw, rh) = (r.width as f64, r.height as f64);
            let kept = ow == 0
                || oh == 0
                || (rw - fw * rh / fh).abs() < 1.0
                || (rh - fh * rw / fw).abs() < 1.0;
            if !kept {
                out.push(format!(
                    "stretched from {} to {}",
                    aspect(ow, oh),
                    aspect(r.width, r.height)
                ));
            }
            (w, h) = (r.width, r.height);
        }
        if let Some([cw, ch]) = self.preprocessing.crop {
            let cut: Vec<String> = [(w, cw, "width"), (h, ch, "height")]
                .into_iter()
                .filter(|&(have, keep, _)| keep < have)
                .map(|(have, keep, side)| format!("{} px of its {side}", have - keep))
                .collect();
            if !cut.is_empty() {
                out.push(format!(
                    "cropped to the centre {cw}×{ch} ({} cut off)",
                    cut.join(" and ")
                ));
            }
            if cw > w || ch > h {
                out.push(format!("padded with black to {cw}×{ch}"));
            }
        }
        out
    }
}

/// A picture's shape as people say it: `1:1`, `4:3`, `16:9`, else its ratio to two decimals
/// (`1.22:1`).
fn aspect(w: usize, h: usize) -> String {
    fn gcd(a: usize, b: usize) -> usize {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    let g = gcd(w, h).max(1);
    let (a, b) = (w / g, h / g);
    if a <= 32 && b <= 32 {
        format!("{a}:{b}")
    } else {
        format!("{:.2}:1", w as f64 / h.max(1) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 1 × 2 grid of 8-pixel patches (16 × 8 px) whose every pixel is `shade`.
    fn tile(first: usize, at: Option<[usize; 2]>, of: [usize; 2], shade: u8) -> PictureTokens {
        let mut image = crate::attention::fixtures::two_patch_picture();
        image.view = vec![shade; 16 * 8 * 3];
        PictureTokens {
            first,
            image,
            bidirectional: false,
            tile: Some(Tile {
                picture: 1,
                at,
                of,
                crop: false,
            }),
        }
    }

    /// Four tiles (2 × 2, given out of order, a text token between runs) and the global view:
    /// stitched into one 32 × 16 picture whose quarters are the tiles' views, each token's cell
    /// moved by its tile's place; the whole view is the global view's run.
    #[test]
    fn a_cut_picture_is_stitched_back_from_its_tiles() {
        let runs = vec![
            tile(1, Some([0, 0]), [2, 2], 10),
            tile(4, Some([1, 1]), [2, 2], 40),
            tile(7, Some([0, 1]), [2, 2], 20),
            tile(10, Some([1, 0]), [2, 2], 30),
            tile(13, None, [2, 2], 99),
        ];
        let v = PictureView::stitched(&runs, 0).expect("four tiles stitch");
        assert!(v.stitched);
        assert_eq!(v.image.input, [32, 16]);
        assert_eq!(v.image.grid, [2, 4]);
        let px = |x: usize, y: usize| v.image.view[(y * 32 + x) * 3];
        assert_eq!(
            [px(0, 0), px(31, 0), px(0, 15), px(31, 15), px(16, 8)],
            [10, 20, 30, 40, 40]
        );
        // Tile (1, 1)'s tokens 4 and 5 are the grid's row 1, columns 2 and 3.
        let at = |t: usize| v.image.cells[v.tokens.iter().position(|&x| x == t).unwrap()];
        assert_eq!(at(4), Cell::Patch { row: 1, col: 2 });
        assert_eq!(at(5), Cell::Patch { row: 1, col: 3 });
        assert_eq!(at(11), Cell::Patch { row: 1, col: 1 });
        assert_eq!(v.tokens.len(), 8);
        let whole = PictureView::whole(&runs, 0).unwrap();
        assert_eq!((whole.tokens, whole.stitched), (vec![13, 14], false));
        // A tile missing, two in one place, or one of another size: not stitched.
        assert_eq!(PictureView::stitched(&runs[1..], 0), None);
        let mut twice = runs.clone();
        twice[1].tile = Some(Tile {
            at: Some([0, 0]),
            ..twice[1].tile.unwrap()
        });
        assert_eq!(PictureView::stitched(&twice, 0), None);
        let mut other = runs.clone();
        other[2].image.view.pop();
        assert_eq!(PictureView::stitched(&other, 0), None);
        // A picture that was not cut has no stitched view.
        let plain = PictureTokens {
            tile: None,
            ..runs[0].clone()
        };
        assert_eq!(PictureView::stitched(&[plain], 0), None);
    }

    fn picture(
        original: [usize; 2],
        resize: Option<[usize; 2]>,
        crop: Option<[usize; 2]>,
    ) -> ImageInput {
        ImageInput {
            source: "cat.png".into(),
            original,
            input: crop.or(resize).unwrap_or(original),
            patch: 16,
            grid: [1, 1],
            preprocessing: Preprocessing {
                color: "rgb8".into(),
                resize: resize.map(|[width, height]| Resize {
                    width,
                    height,
                    filter: "bilinear",
                }),
                crop,
                rescale: None,
                normalize: None,
                positions_from: None,
            },
            cells: vec![Cell::Patch { row: 0, col: 0 }],
            norms: Vec::new(),
            pooling: None,
            windows: None,
            view: Vec::new(),
        }
    }

    #[test]
    fn framing_says_when_a_picture_was_stretched_cropped_or_padded() {
        // A fixed 224 × 224 resize of a 4:3 photo changes its shape.
        assert_eq!(
            picture([640, 480], Some([224, 224]), None).framing(),
            ["stretched from 4:3 to 1:1"]
        );
        assert_eq!(
            picture([45, 37], Some([224, 224]), None).framing(),
            ["stretched from 1.22:1 to 1:1"]
        );
        // Scaling alone (a square picture, or the shortest edge with the long side truncated to
        // whole pixels: 640 × 427 → 383 × 256) says nothing.
        assert!(picture([500, 500], Some([224, 224]), None)
            .framing()
            .is_empty());
        assert!(picture([640, 427], Some([383, 256]), None)
            .framing()
            .is_empty());
        assert!(picture([224, 224], None, None).framing().is_empty());
        // DINOv2's shortest edge 256 then a 224 crop.
        assert_eq!(
            picture([640, 480], Some([341, 256]), Some([224, 224])).framing(),
            ["cropped to the centre 224×224 (117 px of its width and 32 px of its height cut off)"]
        );
        assert_eq!(
            picture([100, 50], None, Some([80, 80])).framing(),
            [
                "cropped to the centre 80×80 (20 px of its width cut off)",
                "padded with black to 80×80"
            ]
        );
        assert_eq!(aspect(1000, 817), "1.22:1");
    }
}
