//! Idefics3 and SmolVLM (`Idefics3ForConditionalGeneration`, `SmolVLMForConditionalGeneration`;
//! `model_type` `idefics3`, `smolvlm`): a SigLIP vision tower over each tile of a picture, whose
//! position embeddings are bucketed for the tile's patch grid (Idefics3VisionEmbeddings, after
//! NaViT); the connector's pixel shuffle, which makes each `scale_factor × scale_factor` square of
//! patches one image token (their hidden states concatenated row by row), and one linear map
//! without a bias; and a Llama text model. The processor splits a picture into tiles of the
//! tower's size plus the whole picture at that size (the global view, [`crate::pixels::Tiles`]),
//! and writes each `<image>` mark out as the tiles' runs of image tokens, each behind
//! `<fake_token_around_image><row_r_col_c>`, a newline after each row, then the global view's
//! run between `<fake_token_around_image><global-img>` and `<fake_token_around_image>`. The
//! language model's mask stays causal. Mirrors transformers' `models/idefics3/modeling_idefics3.py`
//! and `processing_idefics3.py` (SmolVLM's are copies), eager attention.
//!
//! Checkpoints keep the parts under `model.vision_model.`, `model.connector.` and
//! `model.text_model.`, with the head at `lm_head.weight`.

use std::path::PathBuf;

use super::llama::{LlamaConfig, Variant};
use super::llava::{sub_prefix, TextTensors};
use super::siglip::SiglipVisionConfig;
use crate::attention::image::Cell;
use crate::blocks::capture::SequenceCapture;
use crate::blocks::decoder::DecoderStack;
use crate::blocks::family::{Family, FamilyConfig, Quirks};
use crate::blocks::layers::Linear;
use crate::blocks::network::{Architecture, Multimodal, Network};
use crate::blocks::vision::{Vision, VisionConfig, VisionDefaults, VisionEncoder};
use crate::error::Error;
use crate::formats::config::{ConfigError, ConfigFile, ConfigProblem, Instead, Unsupported};
use crate::formats::validate::{self, ConfigCount, ConfigDim};
use crate::formats::weights::{Anchor, Checkpoint};
use crate::kernels::{Activation, Layout};

/// Idefics3 and SmolVLM in the family registry.
pub static IDEFICS3: Family = Family {
    name: "Idefics3",
    model_types: &["idefics3", "smolvlm"],
    class_prefixes: &[
        "Idefics3ForConditionalGeneration",
        "SmolVLMForConditionalGeneration",
    ],
    anchor: Anchor {
        tensor: "connector.modality_projection.proj.weight",
        family: "Idefics3",
        prefix: "model",
    },
    config: |file| Ok(Box::new(Idefics3Config::read(file)?)),
    quirks: Quirks::NONE,
};

/// transformers' `Idefics3VisionConfig` defaults (SmolVLM's are the same).
const VISION_DEFAULTS: VisionDefaults = VisionDefaults {
    hidden_size: 1152,
    num_hidden_layers: 12,
    num_attention_heads: 16,
    intermediate_size: Some(3072),
    image_size: 224,
    patch_size: 32,
    layer_norm_eps: 1e-6,
    hidden_act: "gelu_pytorch_tanh",
};

/// An Idefics3 or SmolVLM config.json.
#[derive(Clone, Debug, PartialEq)]
pub struct Idefics3Config {
    /// `model_type`: `idefics3` or `smolvlm`.
    pub model_type: String,
    /// The vision tower's (`vision_config`), without a pooling head.
    pub vision: SiglipVisionConfig,
    /// The language model's (`text_config`, a Llama).
    pub text: LlamaConfig,
    /// The token of one image token (`image_token_id`).
    pub image_token: u32,
    /// The pixel shuffle's side (`scale_factor`): patches per side of one image token.
    pub scale: usize,
    /// config.json, named when its sizes do not fit the weights.
    pub path: PathBuf,
}

impl Idefics3Config {
    /// Read config.json, with transformers' `Idefics3Config` defaults.
    pub fn read(file: &ConfigFile) -> Result<Idefics3Config, ConfigError> {
        let model_type = file.model_type()?.unwrap_or_else(|| "idefics3".into());
        let vision = file.section_of("vision_config", &["idefics3_vision", "smolvlm_vision"])?;
        let vision = SiglipVisionConfig {
            vision: VisionConfig::read(&vision, &VISION_DEFAULTS)?,
            use_head: false,
        };
        let text = file.section_of("text_config", &["llama"])?;
        let mut text_config = LlamaConfig::read(&text, Variant::Llama)?;
        // Idefics3Config's default text config sets it.
        if !text.has_field("rms_norm_eps") {
            text_config.rms_norm_eps = 1e-5;
        }
        if !text.has_field("tie_word_embeddings") {
            text_config.tie_word_embeddings = file.boolean("tie_word_embeddings")?.unwrap_or(false);
        }
        let image_token = file.token_id("image_token_id")?.unwrap_or(128_257);
        if image_token as usize >= text_config.vocab_size {
            return Err(file.invalid(ConfigProblem::NotBelow {
                field: "image_token_id",
                value: image_token as usize,
                limit_field: "text_config.vocab_size",
                limit: text_config.vocab_size,
            }));
        }
        let scale = match file.get("scale_factor") {
            None => 2,
            Some(v) => match v.as_u64() {
                Some(s) if s >= 1 => s as usize,
                _ => {
                    return Err(file.unsupported(Unsupported::Value {
                        field: "scale_factor",
                        value: None,
                        note: None,
                        instead: Instead::Runs("give a whole number of at least 1"),
                    }))
                }
            },
        };
        let side = vision.vision.trained_side();
        if !side.is_multiple_of(scale) {
            return Err(file.unsupported(Unsupported::Value {
                field: "scale_factor",
                value: None,
                note: Some(
                    "it does not divide the tower's patches per side (image_size / patch_size)",
                ),
                instead: Instead::Runs("give a scale_factor that divides image_size / patch_size"),
            }));
        }
        Ok(Idefics3Config {
            model_type,
            vision,
            text: text_config,
            image_token,
            scale,
            path: file.path().to_path_buf(),
        })
    }

    /// The connector's input width: the tower's hidden size per patch of one image token.
    fn connector_inputs(&self) -> usize {
        self.vision.vision.hidden_size * self.scale * self.scale
    }
}

const CONNECTOR: &str = "connector.modality_projection.proj.weight";

impl FamilyConfig for Idefics3Config {
    fn checks(&self) -> (Vec<ConfigDim>, Vec<ConfigCount>) {
        let dims = vec![
            ConfigDim::new(
                "text_config.hidden_size",
                self.text.hidden_size,
                CONNECTOR.to_string(),
                0,
            ),
            ConfigDim::new(
                "vision_config.hidden_size · scale_factor²",
                self.connector_inputs(),
                CONNECTOR.to_string(),
                1,
            ),
        ];
        (dims, Vec::new())
    }

    fn build(&self, ckpt: &Checkpoint) -> Result<Box<dyn Network>, Error> {
        let vision = ckpt.at_first(
            &["vision_model.", "model.vision_model."],
            "embeddings.patch_embedding.weight",
        );
        let (dims, counts) = self.vision.checks();
        validate::config_matches(&self.path, &vision, &dims, &counts)?;
        let mut tower = self.vision.encoder(&vision)?;
        tower.arch.model_type = format!("{}_vision", self.model_type);
        let side = self.vision.vision.trained_side();
        tower.positions = bucketed_rows(&tower.positions, side, tower.arch.hidden_size);
        let text = ckpt.under(sub_prefix(
            ckpt,
            &["text_model.", "model.text_model."],
            "embed_tokens.weight",
        ));
        let (dims, counts) = self.text.checks();
        validate::config_matches(&self.path, &text, &dims, &counts)?;
        let mut stack = self.text.build_from(&TextTensors {
            ckpt: &text,
            head: "lm_head.weight".to_string(),
        })?;
        stack.arch.family = IDEFICS3.name;
        stack.arch.model_type = self.model_type.clone();
        let connector = ckpt.at_first(&["", "model."], CONNECTOR);
        let weight =
            connector.matrix(CONNECTOR, &[self.text.hidden_size, self.connector_inputs()])?;
        Ok(Box::new(Idefics3 {
            tower,
            scale: self.scale,
            projection: Linear::new(weight, Layout::OutIn, None),
            text: stack,
            image_token: self.image_token,
        }))
    }
}

/// The position-embedding rows a whole tile of `side × side` patches reads, row-major, as
/// Idefics3VisionEmbeddings computes them: each row's and column's index `i` becomes
/// `bucketize(i · (1 / side), arange(1 / side, 1, 1 / side), right = True)` in float32, which
/// is `i` for most sides but not all (for 19 patches per side, row 12 reads row 11's).
pub fn bucketed_positions(side: usize) -> Vec<usize> {
    let step = 1.0 / side as f64;
    // torch.arange over float32 (its CPU kernel): the length from the double bounds; the
    // values in runs of 8 (a vector's lanes) from a float32 base plus a double offset, the rest
    // one by one, each rounded to float32.
    let len = ((1.0 - step) / step).ceil().max(0.0) as usize;
    let vectored = len / 16 * 16;
    let boundaries: Vec<f32> = (0..len)
        .map(|i| {
            if i < vectored {
                let base = (step + step * (i / 8 * 8) as f64) as f32;
                (base as f64 + (i % 8) as f64 * step) as f32
            } else {
                (step + step * i as f64) as f32
            }
        })
        .collect();
    let frac_step = 1.0f32 / side as f32;
    let top = (1.0f64 - 1e-6) as f32;
    let bucket: Vec<usize> = (0..side)
        .map(|i| {
            let f = (i as f32 * frac_step).min(top);
            boundaries.iter().filter(|&&b| b <= f).count()
        })
        .collect();
    bucket
        .iter()
        .flat_map(|&r| bucket.iter().map(move |&c| r * side + c))
        .collect()
}

/// `table` (`[side², hidden]` position embeddings) with its rows in the order a whole tile
/// reads them ([`bucketed_positions`]).
pub(crate) fn bucketed_rows(table: &[f32], side: usize, hidden: usize) -> Vec<f32> {
    bucketed_positions(side)
        .into_iter()
        .flat_map(|row| table[row * hidden..][..hidden].iter().copied())
        .collect()
}

/// An Idefics3 or SmolVLM network: the tower, the connector and the language model.
pub struct Idefics3 {
    pub(crate) tower: VisionEncoder,
    /// Patches per side of one image token.
    pub(crate) scale: usize,
    pub(crate) projection: Linear,
    pub(crate) text: DecoderStack,
    pub(crate) image_token: u32,
}

crate::blocks::network::vision_language_network!(Idefics3);

impl Multimodal for Idefics3 {
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
        let (rows, cols) = (grid[0] / self.scale, grid[1] / self.scale);
        (0..rows)
            .flat_map(|row| (0..cols).map(move |col| Cell::Patch { row, col }))
            .collect()
    }

    fn tiled(&self) -> bool {
        true
    }

    fn pooling(&self) -> usize {
        self.scale
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
        let s = self.scale;
        let (rows, cols) = (gh / s, gw / s);
        // The pixel shuffle: image token (r, c) is its square's patches, row by row, side by
        // side feature-wise.
        let inputs = w * s * s;
        let mut shuffled = vec![0f32; rows * cols * inputs];
        for r in 0..rows {
            for c in 0..cols {
                let out = &mut shuffled[(r * cols + c) * inputs..][..inputs];
                for a in 0..s {
                    for b in 0..s {
                        let patch = (r * s + a) * gw + c * s + b;
                        out[(a * s + b) * w..][..w].copy_from_slice(&last[patch * w..][..w]);
                    }
                }
            }
        }
        Some(
            self.projection
                .forward(&shuffled, rows * cols, Activation::Identity),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn whole_tiles_read_the_position_rows_transformers_reads() {
        // tests/reference/make_idefics3.py records, from Idefics3VisionEmbeddings itself, each
        // side of 1 to 64 patches whose position ids are not 0..side², with the ids.
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/reference/tiny-smolvlm.json");
        let text = std::fs::read_to_string(path).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let table = v["vision_position_ids_not_identity"].as_object().unwrap();
        assert!(
            table.contains_key("19") && table.contains_key("25"),
            "{table:?}"
        );
        for side in 1..=64usize {
            let ours = bucketed_positions(side);
            match table.get(&side.to_string()) {
                Some(ids) => {
                    let want: Vec<usize> = ids
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|x| x.as_u64().unwrap() as usize)
                        .collect();
                    assert_eq!(ours, want, "side {side}");
                }
                None => assert_eq!(ours, (0..side * side).collect::<Vec<_>>(), "side {side}"),
            }
        }
    }

    fn read(text: &str) -> Result<Idefics3Config, String> {
        let file = ConfigFile::parse(text, Path::new("config.json")).map_err(|e| e.to_string())?;
        Idefics3Config::read(&file).map_err(|e| e.to_string())
    }

    #[test]
    fn a_scale_that_does_not_divide_the_grid_is_refused() {
        let c = read(
            r#"{"model_type": "smolvlm", "vision_config": {"image_size": 512, "patch_size": 16},
                "text_config": {"vocab_size": 200000}}"#,
        )
        .unwrap();
        assert_eq!(c.scale, 2);
        assert_eq!(c.image_token, 128_257);
        assert_eq!(c.text.rms_norm_eps, 1e-5);
        assert_eq!(c.vision.vision.trained_side(), 32);
        let e = read(
            r#"{"scale_factor": 3, "vision_config": {"image_size": 64, "patch_size": 8},
                "text_config": {"vocab_size": 200000}}"#,
        )
        .unwrap_err();
        assert!(
            e.contains("scale_factor") && e.contains("does not divide"),
            "{e}"
        );
        let e = read(
            r#"{"vision_config": {"image_size": 64, "patch_size": 8}, "text_config": {"vocab_size": 100}}"#,
        )
        .unwrap_err();
        assert!(e.contains("image_token_id"), "{e}");
    }
}
