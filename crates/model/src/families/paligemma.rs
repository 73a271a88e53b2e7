//! PaliGemma (`PaliGemmaForConditionalGeneration`, `model_type` `paligemma`): a SigLIP vision
//! tower whose last hidden state (after `post_layernorm`) one linear map with a bias
//! (`multi_modal_projector.linear`) takes into a Gemma text model (the first PaliGemma's Gemma
//! 1, PaliGemma 2's Gemma 2). Every patch is one image token. The processor
//! writes the picture's image tokens first, then BOS, the prompt and a newline, and the
//! language model's mask is a prefix-LM mask: that whole prompt, pictures and text, sees
//! itself in full (transformers' `token_type_ids` 0, `block_sequence_ids`), ORed onto the
//! causal mask after the sliding window, so the window does not cut inside it; what the model
//! generates is causal. Positions count from 1 (`position_ids + 1`). Mirrors
//! transformers' `models/paligemma/modeling_paligemma.py` and `processing_paligemma.py`, eager
//! attention.
//!
//! Checkpoints spell the parts' prefixes as google's repositories (`vision_tower.vision_model.`,
//! `multi_modal_projector.`, `language_model.model.`) or as transformers 5 saves them
//! (`vision_tower.` without `vision_model.`, or all of them under `model.`).

use std::path::PathBuf;

use super::gemma::{GemmaConfig, Variant};
use super::siglip::SiglipVisionConfig;
use crate::attention::image::Cell;
use crate::blocks::capture::SequenceCapture;
use crate::blocks::decoder::DecoderStack;
use crate::blocks::family::{Family, FamilyConfig, Quirks};
use crate::blocks::layers::Linear;
use crate::blocks::network::{Architecture, Multimodal, Network};
use crate::blocks::vision::{Vision, VisionEncoder};
use crate::error::Error;
use crate::formats::config::{ConfigError, ConfigFile};
use crate::formats::source::TOKENIZERS_WITH_SETTINGS;
use crate::formats::validate::{self, ConfigCount, ConfigDim};
use crate::formats::weights::{Anchor, Checkpoint};
use crate::kernels::{Activation, Layout};

/// PaliGemma in the family registry.
pub static PALIGEMMA: Family = Family {
    name: "PaliGemma",
    model_types: &["paligemma"],
    class_prefixes: &["PaliGemmaForConditionalGeneration"],
    anchor: Anchor {
        tensor: "multi_modal_projector.linear.weight",
        family: "PaliGemma",
        prefix: "model",
    },
    config: |file| Ok(Box::new(PaliGemmaConfig::read(file)?)),
    quirks: Quirks {
        tokenizer_files: TOKENIZERS_WITH_SETTINGS,
        ..Quirks::NONE
    },
};

/// A PaliGemma config.json.
#[derive(Clone, Debug, PartialEq)]
pub struct PaliGemmaConfig {
    /// The vision tower's (`vision_config`).
    pub vision: SiglipVisionConfig,
    /// The language model's (`text_config`, a Gemma 2).
    pub text: GemmaConfig,
    /// The token of one image token (`image_token_index`).
    pub image_token: u32,
    /// config.json, named when its sizes do not fit the weights.
    pub path: PathBuf,
}

impl PaliGemmaConfig {
    /// Read config.json, with transformers' `PaliGemmaConfig` defaults.
    pub fn read(file: &ConfigFile) -> Result<PaliGemmaConfig, ConfigError> {
        let vision = file.section_of("vision_config", &["siglip_vision_model"])?;
        let vision = SiglipVisionConfig::read(&vision)?;
        let text = file.section_of("text_config", &["gemma", "gemma2"])?;
        // transformers' default text_config is the first PaliGemma's Gemma.
        let variant = match text.model_type()?.as_deref() {
            Some("gemma2") => Variant::Gemma2,
            _ => Variant::Gemma1,
        };
        // PaliGemmaConfig sets it for the text model, whose mask the outer model makes: the
        // prefix-LM mask below, not an encoder's.
        let text = text.without("use_bidirectional_attention");
        let mut text = GemmaConfig::read(&text, variant)?;
        if let Some(tied) = file.boolean("tie_word_embeddings")? {
            text.tie_word_embeddings = tied;
        }
        let image_token = match file.token_id("image_token_index")? {
            Some(id) => id,
            None => file.token_id("image_token_id")?.unwrap_or(256_000),
        };
        Ok(PaliGemmaConfig {
            vision,
            text,
            image_token,
            path: file.path().to_path_buf(),
        })
    }
}

const PROJECTOR: &str = "multi_modal_projector.linear";

impl FamilyConfig for PaliGemmaConfig {
    fn checks(&self) -> (Vec<ConfigDim>, Vec<ConfigCount>) {
        let dims = vec![
            ConfigDim::new(
                "text_config.hidden_size",
                self.text.hidden_size,
                format!("{PROJECTOR}.weight"),
                0,
            ),
            ConfigDim::new(
                "vision_config.hidden_size",
                self.vision.vision.hidden_size,
                format!("{PROJECTOR}.weight"),
                1,
            ),
        ];
        (dims, Vec::new())
    }

    fn build(&self, ckpt: &Checkpoint) -> Result<Box<dyn Network>, Error> {
        let tower = self.vision.language_tower(ckpt, &self.path)?;
        let text = ckpt.at_first(
            &[
                "language_model.model.",
                "model.language_model.",
                "language_model.",
            ],
            "embed_tokens.weight",
        );
        let (dims, counts) = self.text.checks();
        validate::config_matches(&self.path, &text, &dims, &counts)?;
        let mut stack = self.text.build_from(&text)?;
        stack.options.rope_from = 1;
        stack.arch.family = PALIGEMMA.name;
        stack.arch.model_type = "paligemma".to_string();
        let (width, hidden) = (self.vision.vision.hidden_size, self.text.hidden_size);
        let weight = ckpt.matrix(&format!("{PROJECTOR}.weight"), &[hidden, width])?;
        let bias = ckpt.weight(&format!("{PROJECTOR}.bias"), &[hidden])?;
        Ok(Box::new(PaliGemma {
            tower,
            projector: Linear::new(weight, Layout::OutIn, Some(bias)),
            text: stack,
            image_token: self.image_token,
        }))
    }
}

/// A PaliGemma network: the tower, the projector and the language model.
pub struct PaliGemma {
    tower: VisionEncoder,
    projector: Linear,
    text: DecoderStack,
    image_token: u32,
}

crate::blocks::network::vision_language_network!(PaliGemma);

impl Multimodal for PaliGemma {
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
        self.tower.cells(grid)
    }

    fn prefix_lm(&self) -> bool {
        true
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
        let rows = last.len() / self.tower.arch.hidden_size;
        Some(self.projector.forward(&last, rows, Activation::Identity))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn read(text: &str) -> Result<PaliGemmaConfig, String> {
        let file = ConfigFile::parse(text, Path::new("config.json")).map_err(|e| e.to_string())?;
        PaliGemmaConfig::read(&file).map_err(|e| e.to_string())
    }

    #[test]
    fn a_text_model_other_than_gemma_is_refused_in_one_line() {
        let err = read(r#"{"text_config": {"model_type": "llama"}}"#).unwrap_err();
        assert!(err.contains("gemma2") && err.contains("llama"), "{err}");
        assert!(!err.contains('\n'), "{err}");
        let first = read(r#"{"text_config": {"model_type": "gemma"}}"#).unwrap();
        assert_eq!(first.text.variant, Variant::Gemma1);
    }

    #[test]
    fn the_text_models_bidirectional_flag_is_the_outer_masks() {
        let c = read(
            r#"{"image_token_index": 7, "text_config": {"model_type": "gemma2",
                "use_bidirectional_attention": true}}"#,
        )
        .unwrap();
        assert_eq!(c.image_token, 7);
        assert_eq!(c.text.variant, Variant::Gemma2);
    }
}
