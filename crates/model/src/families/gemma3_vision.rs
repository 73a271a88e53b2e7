//! Gemma 3 with pictures (`Gemma3ForConditionalGeneration`, `model_type` `gemma3` with a
//! `vision_config`): a SigLIP vision tower whose last hidden state (after `post_layernorm`) the
//! projector average-pools from the patch grid to `mm_tokens_per_image` tokens, normalises
//! (Gemma's RMSNorm, `x·(1 + w)`) and maps into the text model's embedding space with one matrix
//! (`mm_input_projection_weight`, `[vision hidden, text hidden]`). The processor writes each
//! `<start_of_image>` of the prompt out as `"\n\n<start_of_image>"`, the picture's image tokens
//! (`image_token_index`) and `"<end_of_image>\n\n"`, and the language model's mask lets the
//! tokens of one picture see each other in full (transformers' `token_type_ids` mask) on top of
//! the causal mask and the sliding window. Mirrors transformers' `models/gemma3/
//! modeling_gemma3.py` (`Gemma3MultiModalProjector`, `create_masks_for_vision_model`), eager
//! attention.
//!
//! Checkpoints spell the parts' prefixes as google's repositories (`vision_tower.vision_model.`,
//! `multi_modal_projector.`, `language_model.model.`) or as transformers 5 saves them
//! (`vision_tower.` without `vision_model.`, or all of them under `model.`); the text model is
//! found by the Gemma anchor.

use std::path::PathBuf;

use super::gemma::GemmaConfig;
use super::siglip::SiglipVisionConfig;
use crate::attention::image::Cell;
use crate::blocks::capture::SequenceCapture;
use crate::blocks::decoder::DecoderStack;
use crate::blocks::family::FamilyConfig;
use crate::blocks::layers::{Linear, Norm};
use crate::blocks::network::{Architecture, Framing, Multimodal, Network};
use crate::blocks::vision::{Vision, VisionEncoder};
use crate::error::Error;
use crate::formats::config::{ConfigError, ConfigFile, ConfigProblem};
use crate::formats::config::{Expected, Field, FieldValue};
use crate::formats::validate::{ConfigCount, ConfigDim};
use crate::formats::weights::{Checkpoint, Weight};
use crate::kernels::{Activation, Layout};

/// A Gemma 3 config.json with a `vision_config`.
#[derive(Clone, Debug, PartialEq)]
pub struct Gemma3VisionConfig {
    /// The vision tower's (`vision_config`).
    pub vision: SiglipVisionConfig,
    /// The language model's (`text_config`).
    pub text: GemmaConfig,
    /// Image tokens per picture (`mm_tokens_per_image`), a square number.
    pub tokens_per_image: usize,
    /// The token of one image token (`image_token_index`).
    pub image_token: u32,
    /// `<start_of_image>` (`boi_token_index`).
    pub boi_token: u32,
    /// `<end_of_image>` (`eoi_token_index`).
    pub eoi_token: u32,
    /// config.json, named when its sizes do not fit the weights.
    pub path: PathBuf,
}

impl Gemma3VisionConfig {
    /// Read config.json, with transformers' `Gemma3Config` defaults.
    pub fn read(file: &ConfigFile) -> Result<Gemma3VisionConfig, ConfigError> {
        let vision = file.section_of("vision_config", &["siglip_vision_model"])?;
        let vision = SiglipVisionConfig::read(&vision)?;
        let text = GemmaConfig::read_gemma3(file)?;
        // Not checked against the vocabulary: transformers reads a config whose ids lie past it
        // (a text-only run never meets them; tiny-gemma3-mm's do).
        let token = |field: &'static str, default: u32| -> Result<u32, ConfigError> {
            Ok(file.token_id(field)?.unwrap_or(default))
        };
        let image_token = match file.token_id("image_token_index")? {
            Some(id) => id,
            None => token("image_token_id", 262_144)?,
        };
        let boi_token = token("boi_token_index", 255_999)?;
        let eoi_token = token("eoi_token_index", 256_000)?;
        let tokens_per_image = file.count("mm_tokens_per_image")?.unwrap_or(256);
        let side = (tokens_per_image as f64).sqrt().round() as usize;
        if side == 0 || side * side != tokens_per_image {
            return Err(file.invalid(ConfigProblem::NotA {
                field: Field::Top("mm_tokens_per_image"),
                value: FieldValue::Json(serde_json::json!(tokens_per_image)),
                expected: Expected::WholeNumber,
            }));
        }
        let patches = vision.vision.trained_side();
        if patches % side != 0 {
            return Err(file.invalid(ConfigProblem::NotDivisible {
                field: "vision_config.image_size / patch_size",
                value: patches,
                by_field: "√mm_tokens_per_image",
                by: side,
            }));
        }
        Ok(Gemma3VisionConfig {
            vision,
            text,
            tokens_per_image,
            image_token,
            boi_token,
            eoi_token,
            path: file.path().to_path_buf(),
        })
    }

    /// Patches per side that one image token averages.
    fn kernel(&self) -> usize {
        let side = (self.tokens_per_image as f64).sqrt().round() as usize;
        self.vision.vision.trained_side() / side
    }
}

const PROJECTION: &str = "mm_input_projection_weight";

/// Gemma3Processor's words around a picture cut by pan-and-scan: before its whole view's run,
/// and between that and its crops' runs.
pub(crate) const GEMMA3_CROP_WORDS: [&str; 2] = [
    "Here is the original image ",
    " and here are some crops to help you see better ",
];

impl FamilyConfig for Gemma3VisionConfig {
    fn checks(&self) -> (Vec<ConfigDim>, Vec<ConfigCount>) {
        self.text.checks()
    }

    fn build(&self, ckpt: &Checkpoint) -> Result<Box<dyn Network>, Error> {
        let tower = self.vision.language_tower(ckpt, &self.path)?;
        let mut text = self.text.build_from(ckpt)?;
        text.options.image_blocks = true;
        let projector = ckpt.at_first(
            &["multi_modal_projector.", "model.multi_modal_projector."],
            PROJECTION,
        );
        let (width, hidden) = (self.vision.vision.hidden_size, self.text.hidden_size);
        let projection = projector.matrix(PROJECTION, &[width, hidden])?;
        let w = projector.weight("mm_soft_emb_norm.weight", &[width])?;
        // Gemma3RMSNorm: `(1 + w)`, the sum in f32.
        let plus_one = Weight::owned(w.iter().map(|x| 1.0 + x).collect(), vec![width]);
        Ok(Box::new(Gemma3Vision {
            tower,
            kernel: self.kernel(),
            norm: Norm::from_weights(plus_one, None, self.vision.vision.layer_norm_eps),
            projection: Linear::new(projection, Layout::InOut, None),
            text,
            image_token: self.image_token,
            framing: Framing {
                mark: self.boi_token,
                close: self.eoi_token,
                around: "\n\n",
                crops: Some(GEMMA3_CROP_WORDS),
            },
        }))
    }
}

/// A Gemma 3 network with its vision tower and projector.
pub struct Gemma3Vision {
    pub(crate) tower: VisionEncoder,
    /// Patches per side averaged into one image token.
    pub(crate) kernel: usize,
    pub(crate) norm: Norm,
    pub(crate) projection: Linear,
    pub(crate) text: DecoderStack,
    pub(crate) image_token: u32,
    pub(crate) framing: Framing,
}

crate::blocks::network::vision_language_network!(Gemma3Vision);

impl Multimodal for Gemma3Vision {
    fn tower_architecture(&self) -> &Architecture {
        &self.tower.arch
    }

    fn tower(&self) -> &dyn Vision {
        &self.tower
    }

    fn image_token(&self) -> u32 {
        self.image_token
    }

    fn image_cells(&self, grid: [usize; 2]) -> Vec<Cell> {
        let (rows, cols) = (grid[0] / self.kernel, grid[1] / self.kernel);
        (0..rows)
            .flat_map(|row| (0..cols).map(move |col| Cell::Patch { row, col }))
            .collect()
    }

    fn framing(&self) -> Option<Framing> {
        Some(self.framing)
    }

    fn pooling(&self) -> usize {
        self.kernel
    }

    fn bidirectional_pictures(&self) -> bool {
        self.text.options.image_blocks
    }

    fn image_embeddings(
        &self,
        pixels: &[f32],
        width: usize,
        height: usize,
        capture: &mut SequenceCapture,
        cancel: &crate::cancel::Cancel,
    ) -> Option<Vec<f32>> {
        let last = self
            .tower
            .last_state(pixels, width, height, capture, cancel)?;
        let w = self.tower.arch.hidden_size;
        let p = self.tower.patch_size();
        let (gh, gw) = (height / p, width / p);
        let k = self.kernel;
        let (rows, cols) = (gh / k, gw / k);
        // AvgPool2d(k, stride k) over the patch grid, token by token in row-major order.
        let mut pooled = vec![0f32; rows * cols * w];
        let share = 1.0 / (k * k) as f32;
        for r in 0..rows {
            for c in 0..cols {
                let out = &mut pooled[(r * cols + c) * w..][..w];
                for a in 0..k {
                    for b in 0..k {
                        let patch = (r * k + a) * gw + c * k + b;
                        for (o, x) in out.iter_mut().zip(&last[patch * w..][..w]) {
                            *o += x;
                        }
                    }
                }
                out.iter_mut().for_each(|o| *o *= share);
            }
        }
        let normed = self.norm.forward(&pooled, None);
        Some(
            self.projection
                .forward(&normed, rows * cols, Activation::Identity),
        )
    }
}
