//! A vision model's `image` object (`docs/json.md`, "Vision models"): the type the writer
//! serialises and the reader deserialises (then checks against the attention it comes with,
//! `import::image`). The fields are in name order, the order every earlier version wrote them in.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::attention::image::{Cell, ImageInput, Pooling, Preprocessing, Tile};

/// The `image` object of a vision model's body.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ImageDoc {
    /// What each token is, in the attention's order: a patch at a grid position, or the class,
    /// distillation or a register token.
    pub cells: Vec<Cell>,
    /// The patch grid, `[rows, cols]`.
    pub grid: [usize; 2],
    /// The picture the model saw, `[width, height]`.
    pub input: [usize; 2],
    /// Each captured layer's token norms `[layer][token]` (the input of each layer), when
    /// measured.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub norms: Vec<Vec<f32>>,
    /// The picture as given, `[width, height]`.
    pub original: [usize; 2],
    /// The patch's side in pixels.
    pub patch: usize,
    /// SigLIP's attention-pooling head, when the model has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pooling: Option<PoolingDoc>,
    /// The preprocessing applied, as the model's `preprocessor_config.json` asked.
    pub preprocessing: PreprocessingDoc,
    /// Where the picture came from (its file name).
    pub source: String,
    /// The picture the model saw: a base64 PNG, 8-bit RGB, of the input's size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view_png: Option<String>,
    /// The windows some of a vision tower's layers attend within (Qwen2.5-VL), when it has
    /// them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub windows: Option<WindowsDoc>,
}

/// `image.windows`: squares of `side × side` patches, row by row from the top left (those at
/// the right and bottom edges cut short); on a windowed layer a patch's weights on the patches
/// outside its window are 0.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WindowsDoc {
    /// Per captured layer: whether it attends within windows (else over the whole picture).
    pub layers: Vec<bool>,
    /// Patches per side of a window.
    pub side: usize,
}

/// One entry of a vision-language model's `pictures`: a picture it read with the prompt, as a
/// run of its image tokens among the units.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PictureDoc {
    /// The unit of its first image token (an index into `tokens`); its tokens follow in the
    /// order of `image.cells`, one unit each.
    pub first: usize,
    /// How many image tokens it is (`image.cells`' length).
    pub count: usize,
    /// The picture: what each of its tokens is (the patch at a grid cell), the grid, the
    /// preprocessing and the picture the model saw, as a vision model's `image`.
    pub image: ImageDoc,
    /// Present and true when its image tokens see each other in full under the causal mask
    /// (Gemma 3): a row of the run weighs the run's later tokens too.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub bidirectional: bool,
    /// Present when the processor split the picture into tiles plus a global view (Idefics3,
    /// SmolVLM): which picture this run is part of (from 1), which tile (`at`, row and column
    /// from 0; absent for the global view, the whole picture resized to one tile) of how many
    /// (`of`, rows and columns).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tile: Option<Tile>,
}

/// `image.preprocessing`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PreprocessingDoc {
    /// The decoded image's colour type before conversion to RGB (`rgb8`, `l8`, `rgba8`, …).
    pub color: String,
    /// Centre crop `[width, height]`, or null.
    pub crop: Option<[usize; 2]>,
    /// Per-channel mean and standard deviation, or null.
    pub normalize: Option<[[f64; 3]; 2]>,
    /// The position embeddings' grid as trained `[rows, cols]` when it was interpolated, or
    /// null.
    pub positions_from: Option<[usize; 2]>,
    /// The factor on each 0–255 value, or null.
    pub rescale: Option<f64>,
    /// The resize step, or null.
    pub resize: Option<ResizeDoc>,
}

/// `image.preprocessing.resize`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ResizeDoc {
    /// PIL's filter.
    #[schemars(extend("enum" = ["nearest", "bilinear", "bicubic", "lanczos"]))]
    pub filter: String,
    /// Height after it.
    pub height: usize,
    /// Width after it.
    pub width: usize,
}

/// `image.pooling`: an attention-pooling head's attention over the model's tokens.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PoolingDoc {
    /// Heads.
    pub heads: usize,
    /// What it is: `attention-pooling head`.
    #[serde(default)]
    pub label: String,
    /// Its query: `probe`, a learned vector.
    #[serde(default)]
    pub query: String,
    /// `weights[head][token]`, each row summing to 1.
    pub weights: Vec<Vec<f32>>,
}

impl ImageDoc {
    /// The object of `image`, with the picture the model saw as `view_png` when there is one.
    pub fn of(image: &ImageInput, view_png: Option<String>) -> ImageDoc {
        ImageDoc {
            cells: image.cells.clone(),
            grid: image.grid,
            input: image.input,
            norms: image.norms.clone(),
            original: image.original,
            patch: image.patch,
            pooling: image.pooling.as_ref().map(PoolingDoc::of),
            preprocessing: PreprocessingDoc::of(&image.preprocessing),
            source: image.source.clone(),
            view_png,
            windows: image.windows.as_ref().map(|w| WindowsDoc {
                layers: w.layers.clone(),
                side: w.side,
            }),
        }
    }
}

impl PreprocessingDoc {
    fn of(p: &Preprocessing) -> PreprocessingDoc {
        PreprocessingDoc {
            color: p.color.clone(),
            crop: p.crop,
            normalize: p.normalize,
            positions_from: p.positions_from,
            rescale: p.rescale,
            resize: p.resize.as_ref().map(|r| ResizeDoc {
                filter: r.filter.to_string(),
                height: r.height,
                width: r.width,
            }),
        }
    }
}

impl PoolingDoc {
    fn of(p: &Pooling) -> PoolingDoc {
        PoolingDoc {
            heads: p.heads,
            label: p.label.to_string(),
            query: p.query.to_string(),
            weights: p.weights.clone(),
        }
    }
}
