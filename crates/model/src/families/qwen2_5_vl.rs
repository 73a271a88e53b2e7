//! Qwen2.5-VL (`Qwen2_5_VLForConditionalGeneration`, `model_type` `qwen2_5_vl`): its own vision
//! transformer ([`MergedVision`]: 14-px patches of two frames, a still picture repeated, through
//! a Conv3d; a 2-D rotary embedding; RMSNorm and a gated MLP with biases; layers attending
//! within windows of `window_size` pixels except `fullatt_block_indexes`; the merger of 2 × 2
//! patches into one image token) into a Qwen2 text model with multimodal rotary positions
//! (M-RoPE: `mrope_section` splits each head's frequencies between a temporal, a height and a
//! width position; a picture's tokens sit at its grid cells, the text after it counts on from
//! its largest position, as transformers' `get_rope_index`). The prompt marks a picture with
//! `<|vision_start|><|image_pad|><|vision_end|>`, whose `<|image_pad|>` the processor repeats
//! once per merged token. Mirrors transformers' `models/qwen2_5_vl/modeling_qwen2_5_vl.py`,
//! eager attention.
//!
//! Qwen2-VL (`Qwen2VLForConditionalGeneration`, `model_type` `qwen2_vl`) is the same model but
//! its tower's blocks: LayerNorm and an MLP with quick GELU (`embed_dim`, `mlp_ratio`; the
//! tower's `hidden_size` is its output width), no windows, a LayerNorm in the merger.
//!
//! Checkpoints spell the parts' prefixes as Qwen's repositories (`visual.`, the text model
//! under `model.`, `lm_head.`) or as transformers 5 saves them (`model.visual.`,
//! `model.language_model.`); config.json has the text model's fields at its top level (Qwen's)
//! or in `text_config` (transformers 5), its rotary type `mrope` or `default`.

use std::path::PathBuf;

use serde_json::Value;

use super::llama::{LlamaConfig, Variant};
use crate::attention::image::Cell;
use crate::attention::PositionScheme;
use crate::blocks::capture::SequenceCapture;
use crate::blocks::decoder::DecoderStack;
use crate::blocks::family::{Family, FamilyConfig, Quirks};
use crate::blocks::layers::{Linear, Norm};
use crate::blocks::merged_vision::{MergedVision, MergedVisionLayer, Merger, Mlp};
use crate::blocks::network::{Architecture, Multimodal, Network};
use crate::blocks::vision::{Vision, VisionAct};
use crate::error::Error;
use crate::formats::config::{ConfigError, ConfigFile, ConfigProblem, Expected, Field, FieldValue};
use crate::formats::validate::{self, ConfigCount, ConfigDim};
use crate::formats::weights::{Anchor, Checkpoint};
use crate::kernels::{Layout, Mask, Rope};

/// Qwen2.5-VL in the family registry.
pub static QWEN2_5_VL: Family = Family {
    name: "Qwen2.5-VL",
    model_types: &["qwen2_5_vl"],
    class_prefixes: &["Qwen2_5_VLForConditionalGeneration"],
    anchor: Anchor {
        tensor: "visual.merger.ln_q.weight",
        family: "Qwen2.5-VL",
        prefix: "model",
    },
    config: |file| Ok(Box::new(Qwen25VlConfig::read(file, Tower::Qwen25)?)),
    quirks: Quirks::NONE,
};

/// Qwen2-VL in the family registry.
pub static QWEN2_VL: Family = Family {
    name: "Qwen2-VL",
    model_types: &["qwen2_vl"],
    class_prefixes: &["Qwen2VLForConditionalGeneration"],
    anchor: Anchor {
        tensor: "visual.merger.ln_q.weight",
        family: "Qwen2-VL",
        prefix: "model",
    },
    config: |file| Ok(Box::new(Qwen25VlConfig::read(file, Tower::Qwen2)?)),
    quirks: Quirks::NONE,
};

/// Which tower's blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tower {
    /// Qwen2.5-VL's: RMSNorm, a gated MLP, windows.
    Qwen25,
    /// Qwen2-VL's: LayerNorm, an MLP with quick GELU, no windows.
    Qwen2,
}

/// The vision tower's config (`vision_config`, transformers' `Qwen2_5_VLVisionConfig`).
#[derive(Clone, Debug, PartialEq)]
pub struct QwenVisionConfig {
    /// Layers (`depth`).
    pub depth: usize,
    /// Width.
    pub hidden_size: usize,
    /// The MLP's width.
    pub intermediate_size: usize,
    /// Heads (`num_heads`).
    pub num_heads: usize,
    /// Image channels.
    pub in_channels: usize,
    /// Patch side in pixels.
    pub patch_size: usize,
    /// Frames per patch.
    pub temporal_patch_size: usize,
    /// Patches per side merged into one image token.
    pub spatial_merge_size: usize,
    /// A window's side in pixels.
    pub window_size: usize,
    /// The layers that attend over the whole picture.
    pub fullatt_block_indexes: Vec<usize>,
    /// The merger's output width (the text model's).
    pub out_hidden_size: usize,
    /// The MLP's activation (Qwen2.5-VL's gate's).
    pub hidden_act: VisionAct,
    /// Which blocks.
    pub tower: Tower,
    /// The rotary base.
    pub rope_theta: f64,
}

impl QwenVisionConfig {
    /// Read `vision_config`, with transformers' defaults (`Qwen2_5_VLVisionConfig`,
    /// `Qwen2VLVisionConfig`).
    pub fn read(file: &ConfigFile, tower: Tower) -> Result<QwenVisionConfig, ConfigError> {
        let depth = file.positive("depth", 32)?;
        let qwen2 = tower == Tower::Qwen2;
        let hidden_size = if qwen2 {
            file.positive("embed_dim", 1280)?
        } else {
            file.positive("hidden_size", 3584)?
        };
        let num_heads = file.positive("num_heads", 16)?;
        let head_dim = hidden_size / num_heads;
        if hidden_size % num_heads != 0 || head_dim % 4 != 0 {
            return Err(file.invalid(ConfigProblem::NotDivisible {
                field: "hidden_size",
                value: hidden_size,
                by_field: "4 × num_heads",
                by: 4 * num_heads,
            }));
        }
        let patch_size = file.positive("patch_size", 14)?;
        let spatial_merge_size = file.positive("spatial_merge_size", 2)?;
        let window_size = file.positive("window_size", 112)?;
        let unit = patch_size * spatial_merge_size;
        if window_size % unit != 0 {
            return Err(file.invalid(ConfigProblem::NotDivisible {
                field: "window_size",
                value: window_size,
                by_field: "patch_size × spatial_merge_size",
                by: unit,
            }));
        }
        let fullatt_block_indexes = match file.get("fullatt_block_indexes") {
            _ if qwen2 => (0..depth).collect(),
            None | Some(Value::Null) => vec![7, 15, 23, 31],
            Some(Value::Array(items)) if items.iter().all(|v| v.as_u64().is_some()) => items
                .iter()
                .filter_map(|v| v.as_u64().map(|n| n as usize))
                .collect(),
            Some(other) => {
                return Err(file.invalid(ConfigProblem::NotA {
                    field: Field::Top("fullatt_block_indexes"),
                    value: FieldValue::Json(other.clone()),
                    expected: Expected::WholeNumber,
                }))
            }
        };
        let rope_theta = match file.get("rope_parameters") {
            Some(Value::Object(p)) => p.get("rope_theta").and_then(Value::as_f64),
            _ => None,
        };
        let intermediate_size = if qwen2 {
            hidden_size * file.positive("mlp_ratio", 4)?
        } else {
            file.positive("intermediate_size", 3420)?
        };
        let hidden_act = match file.string("hidden_act")?.as_deref() {
            Some("quick_gelu") => VisionAct::QuickGelu,
            None if qwen2 => VisionAct::QuickGelu,
            _ => VisionAct::Kernel(file.activation("hidden_act", "silu")?),
        };
        Ok(QwenVisionConfig {
            depth,
            hidden_size,
            intermediate_size,
            num_heads,
            in_channels: file.positive("in_channels", 3)?,
            patch_size,
            temporal_patch_size: file.positive("temporal_patch_size", 2)?,
            spatial_merge_size,
            window_size,
            fullatt_block_indexes,
            out_hidden_size: if qwen2 {
                file.positive("hidden_size", 3584)?
            } else {
                file.positive("out_hidden_size", 3584)?
            },
            hidden_act,
            tower,
            rope_theta: rope_theta
                .filter(|t| t.is_finite() && *t > 0.0)
                .unwrap_or(10000.0),
        })
    }

    /// The family's entry in the registry.
    fn family(&self) -> &'static Family {
        match self.tower {
            Tower::Qwen25 => &QWEN2_5_VL,
            Tower::Qwen2 => &QWEN2_VL,
        }
    }

    /// The tower's architecture (its layers and heads).
    pub(crate) fn architecture(&self) -> Architecture {
        let heads = self.num_heads;
        Architecture {
            family: self.family().name,
            model_type: format!("{}_vision", self.family().model_types[0]),
            layers: self.depth,
            heads,
            kv_heads: heads,
            kv_head: Architecture::identity_heads(heads),
            head_dim: self.hidden_size / heads,
            hidden_size: self.hidden_size,
            vocab_size: 0,
            max_positions: crate::blocks::rope::MAX_ROTARY_POSITIONS,
            token_types: 0,
            tokenizer_types: false,
            mask: Mask::Bidirectional,
            sliding_window: None,
            positions: PositionScheme::Rotary,
        }
    }

    /// The tower from the tensors under `visual.`.
    fn tower(&self, t: &Checkpoint) -> Result<MergedVision, Error> {
        let hidden = self.hidden_size;
        let inter = self.intermediate_size;
        let eps = 1e-6;
        // Qwen2.5-VL's RMSNorms, Qwen2-VL's LayerNorms.
        let rms = |name: &str| -> Result<Norm, Error> {
            Ok(match self.tower {
                Tower::Qwen25 => Norm::rms(t, name, hidden, eps)?,
                Tower::Qwen2 => Norm::layer(t, name, hidden, eps)?,
            })
        };
        let inputs =
            self.in_channels * self.temporal_patch_size * self.patch_size * self.patch_size;
        // The Conv3d's weight `[hidden, channels, frames, patch, patch]` read as a matrix.
        let conv = "patch_embed.proj.weight";
        let shape = [
            hidden,
            self.in_channels,
            self.temporal_patch_size,
            self.patch_size,
            self.patch_size,
        ];
        let weight = t.weight(conv, &shape)?;
        let projection = Linear::new(
            crate::formats::weights::Weight::owned(weight.to_vec(), vec![hidden, inputs]),
            Layout::OutIn,
            None,
        );
        let layers = (0..self.depth)
            .map(|i| {
                let b = format!("blocks.{i}");
                let load = |name: &str, inputs, outputs| {
                    Linear::load(t, &format!("{b}.mlp.{name}"), inputs, outputs)
                };
                let mlp = match (self.tower, self.hidden_act) {
                    (Tower::Qwen25, VisionAct::Kernel(act)) => Mlp::Gated {
                        gate: load("gate_proj", hidden, inter)?,
                        up: load("up_proj", hidden, inter)?,
                        down: load("down_proj", inter, hidden)?,
                        act,
                    },
                    (_, act) => Mlp::Plain {
                        fc1: load("fc1", hidden, inter)?,
                        fc2: load("fc2", inter, hidden)?,
                        act,
                    },
                };
                Ok(MergedVisionLayer {
                    norm1: rms(&format!("{b}.norm1"))?,
                    qkv: Linear::load(t, &format!("{b}.attn.qkv"), hidden, 3 * hidden)?,
                    output: Linear::load(t, &format!("{b}.attn.proj"), hidden, hidden)?,
                    norm2: rms(&format!("{b}.norm2"))?,
                    mlp,
                    windowed: !self.fullatt_block_indexes.contains(&i),
                })
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let m = self.spatial_merge_size;
        let merged = m * m * hidden;
        let merger = Merger {
            norm: rms("merger.ln_q")?,
            fc1: Linear::load(t, "merger.mlp.0", merged, merged)?,
            fc2: Linear::load(t, "merger.mlp.2", merged, self.out_hidden_size)?,
        };
        Ok(MergedVision {
            arch: self.architecture(),
            patch: self.patch_size,
            temporal: self.temporal_patch_size,
            channels: self.in_channels,
            merge: m,
            window: self.window_size / (self.patch_size * m),
            projection,
            rope: Rope::axial(hidden / self.num_heads, self.rope_theta),
            layers,
            merger,
        })
    }
}

/// A Qwen2.5-VL config.json.
#[derive(Clone, Debug, PartialEq)]
pub struct Qwen25VlConfig {
    /// The vision tower's (`vision_config`).
    pub vision: QwenVisionConfig,
    /// The language model's (`text_config`, or the top level), a Qwen2.
    pub text: LlamaConfig,
    /// M-RoPE's runs of frequencies for the temporal, height and width positions.
    pub mrope_section: Vec<usize>,
    /// `<|image_pad|>` (`image_token_id`).
    pub image_token: u32,
    /// `<|vision_start|>` and `<|vision_end|>`.
    pub vision_marks: [u32; 2],
    /// config.json, named when its sizes do not fit the weights.
    pub path: PathBuf,
}

impl Qwen25VlConfig {
    /// Read config.json, with transformers' `Qwen2_5_VLConfig` (`Qwen2VLConfig`) defaults.
    pub fn read(file: &ConfigFile, tower: Tower) -> Result<Qwen25VlConfig, ConfigError> {
        let types: &[&'static str] = match tower {
            Tower::Qwen25 => &["qwen2_5_vl", "qwen2_5_vl_vision"],
            Tower::Qwen2 => &["qwen2_vl", "qwen2_vl_vision"],
        };
        let vision = file.section_of("vision_config", types)?;
        let vision = QwenVisionConfig::read(&vision, tower)?;
        let text = match file.section("text_config")? {
            Some(t) => t,
            None => ConfigFile::parse("{}", file.path())?,
        };
        // Qwen's repositories keep the text model's fields at the top level.
        let text = if text.has_field("hidden_size") {
            text
        } else {
            ConfigFile::parse(
                &serde_json::to_string(&top_level(file)).unwrap_or_default(),
                file.path(),
            )?
        };
        // The rotary settings' `mrope` type (Qwen's `rope_scaling`) is the default rotation on
        // M-RoPE's positions; its runs come with it.
        let mut mrope_section = vec![16, 24, 24];
        let mut text = text;
        for key in ["rope_parameters", "rope_scaling"] {
            let Some(Value::Object(params)) = text.get(key) else {
                continue;
            };
            let mut params = params.clone();
            if let Some(v) = params.remove("mrope_section") {
                mrope_section = match v.as_array() {
                    Some(items) if items.iter().all(|x| x.as_u64().is_some()) => items
                        .iter()
                        .filter_map(|x| x.as_u64().map(|n| n as usize))
                        .collect(),
                    _ => {
                        return Err(text.invalid(ConfigProblem::NotA {
                            field: Field::Rope("mrope_section"),
                            value: FieldValue::Json(v),
                            expected: Expected::WholeNumber,
                        }))
                    }
                };
            }
            for kind in ["rope_type", "type"] {
                if params.get(kind).and_then(Value::as_str) == Some("mrope") {
                    params.insert(kind.to_string(), Value::String("default".to_string()));
                }
            }
            text = text.with(key, Value::Object(params));
        }
        let text_config = LlamaConfig::read(&text, Variant::Qwen2)?;
        let half = text_config.head_dim / 2;
        let sum: usize = mrope_section.iter().sum();
        if sum != half {
            return Err(text.invalid(ConfigProblem::Sections {
                field: "mrope_section",
                sections: mrope_section,
                sum,
                half,
            }));
        }
        let token = |field: &'static str, default: u32| -> Result<u32, ConfigError> {
            Ok(file.token_id(field)?.unwrap_or(default))
        };
        let image_token = token("image_token_id", 151_655)?;
        if image_token as usize >= text_config.vocab_size {
            return Err(file.invalid(ConfigProblem::NotBelow {
                field: "image_token_id",
                value: image_token as usize,
                limit_field: "vocab_size",
                limit: text_config.vocab_size,
            }));
        }
        Ok(Qwen25VlConfig {
            vision,
            text: text_config,
            mrope_section,
            image_token,
            vision_marks: [
                token("vision_start_token_id", 151_652)?,
                token("vision_end_token_id", 151_653)?,
            ],
            path: file.path().to_path_buf(),
        })
    }
}

/// The top level's fields but the vision config's (Qwen's layout of the text model's).
fn top_level(file: &ConfigFile) -> serde_json::Map<String, Value> {
    let mut out = serde_json::Map::new();
    for key in [
        "vocab_size",
        "hidden_size",
        "intermediate_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "hidden_act",
        "max_position_embeddings",
        "rms_norm_eps",
        "rope_theta",
        "rope_scaling",
        "rope_parameters",
        "tie_word_embeddings",
        "use_sliding_window",
        "sliding_window",
        "max_window_layers",
        "layer_types",
        "attention_dropout",
        "bos_token_id",
        "eos_token_id",
        "pad_token_id",
        "model_type",
    ] {
        if let Some(v) = file.get(key) {
            out.insert(key.to_string(), v.clone());
        }
    }
    out
}

impl FamilyConfig for Qwen25VlConfig {
    fn checks(&self) -> (Vec<ConfigDim>, Vec<ConfigCount>) {
        let merged = self.vision.spatial_merge_size.pow(2) * self.vision.hidden_size;
        let dims = vec![
            ConfigDim::new(
                "vision_config.out_hidden_size",
                self.vision.out_hidden_size,
                "visual.merger.mlp.2.weight",
                0,
            ),
            ConfigDim::new(
                "text_config.hidden_size",
                self.text.hidden_size,
                "visual.merger.mlp.2.weight",
                0,
            ),
            ConfigDim::new(
                "vision_config.hidden_size",
                merged,
                "visual.merger.mlp.0.weight",
                1,
            ),
        ];
        (dims, Vec::new())
    }

    fn build(&self, ckpt: &Checkpoint) -> Result<Box<dyn Network>, Error> {
        let tower = self.vision.tower(&ckpt.under("visual."))?;
        let text = ckpt.at_first(
            &["model.language_model.", "language_model.", "model."],
            "embed_tokens.weight",
        );
        let (dims, counts) = self.text.checks();
        validate::config_matches(&self.path, &text, &dims, &counts)?;
        let mut stack = self.text.build_from(&text)?;
        stack.options.mrope_section = Some(self.mrope_section.clone());
        let family = self.vision.family();
        stack.arch.family = family.name;
        stack.arch.model_type = family.model_types[0].to_string();
        Ok(Box::new(Qwen25Vl {
            tower,
            text: stack,
            image_token: self.image_token,
            vision_marks: self.vision_marks,
        }))
    }
}

/// A Qwen2.5-VL (or Qwen2-VL) network: the tower with its merger, and the language model.
pub struct Qwen25Vl {
    pub(crate) tower: MergedVision,
    pub(crate) text: DecoderStack,
    pub(crate) image_token: u32,
    pub(crate) vision_marks: [u32; 2],
}

crate::blocks::network::vision_language_network!(Qwen25Vl);

impl Multimodal for Qwen25Vl {
    fn tower_architecture(&self) -> &Architecture {
        &self.tower.arch
    }

    fn tower(&self) -> &dyn Vision {
        &self.tower
    }

    fn image_token(&self) -> u32 {
        self.image_token
    }

    fn image_cells(&self, [rows, cols]: [usize; 2]) -> Vec<Cell> {
        let m = self.tower.merge;
        (0..rows / m)
            .flat_map(|row| (0..cols / m).map(move |col| Cell::Patch { row, col }))
            .collect()
    }

    fn pooling(&self) -> usize {
        self.tower.merge
    }

    fn wrapping(&self) -> Option<[u32; 2]> {
        Some(self.vision_marks)
    }

    fn multimodal_positions(&self) -> bool {
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
            .run(pixels, width, height, capture, &mut Vec::new(), cancel)?;
        let p = self.tower.patch;
        Some(self.tower.merge(&last, [height / p, width / p]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn read(text: &str) -> Result<Qwen25VlConfig, String> {
        let file = ConfigFile::parse(text, Path::new("config.json")).map_err(|e| e.to_string())?;
        Qwen25VlConfig::read(&file, Tower::Qwen25).map_err(|e| e.to_string())
    }

    #[test]
    fn qwen_s_flat_layout_with_its_mrope_type_reads_as_transformers_5_s() {
        let flat = read(
            r#"{"model_type": "qwen2_5_vl", "hidden_size": 64, "num_attention_heads": 4,
                "image_token_id": 300,
                "num_key_value_heads": 2, "vocab_size": 400, "rope_theta": 500.0,
                "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]},
                "vision_config": {"hidden_size": 32, "num_heads": 4, "window_size": 56,
                                  "fullatt_block_indexes": [1], "depth": 3}}"#,
        )
        .unwrap();
        let nested = read(
            r#"{"model_type": "qwen2_5_vl", "image_token_id": 300,
                "text_config": {"hidden_size": 64, "num_attention_heads": 4,
                    "num_key_value_heads": 2, "vocab_size": 400,
                    "rope_parameters": {"rope_type": "default", "rope_theta": 500.0,
                                        "mrope_section": [2, 3, 3]}},
                "vision_config": {"hidden_size": 32, "num_heads": 4, "window_size": 56,
                                  "fullatt_block_indexes": [1], "depth": 3}}"#,
        )
        .unwrap();
        assert_eq!(flat.mrope_section, vec![2, 3, 3]);
        assert_eq!(flat.text.rope_theta, 500.0);
        assert_eq!(flat.text.head_dim, nested.text.head_dim);
        assert_eq!(flat.text.rope_theta, nested.text.rope_theta);
        assert_eq!(flat.vision, nested.vision);
        assert_eq!((flat.image_token, nested.image_token), (300, 300));
        assert_eq!(flat.vision_marks, [151_652, 151_653]);
    }

    #[test]
    fn qwen2_vl_s_tower_reads_its_own_fields() {
        let file = ConfigFile::parse(
            r#"{"model_type": "qwen2_vl", "image_token_id": 300,
                "text_config": {"hidden_size": 64, "num_attention_heads": 4, "vocab_size": 400,
                    "rope_parameters": {"rope_type": "default", "mrope_section": [2, 3, 3]}},
                "vision_config": {"embed_dim": 32, "hidden_size": 64, "mlp_ratio": 2,
                                  "num_heads": 4, "depth": 3, "model_type": "qwen2_vl_vision"}}"#,
            Path::new("config.json"),
        )
        .unwrap();
        let c = Qwen25VlConfig::read(&file, Tower::Qwen2).unwrap();
        let v = &c.vision;
        assert_eq!(
            (v.hidden_size, v.out_hidden_size, v.intermediate_size),
            (32, 64, 64)
        );
        assert_eq!(v.hidden_act, VisionAct::QuickGelu);
        assert_eq!(v.fullatt_block_indexes, vec![0, 1, 2]);
        // A Qwen2.5-VL tower is not Qwen2-VL's.
        let err = Qwen25VlConfig::read(&file, Tower::Qwen25).unwrap_err();
        assert!(err.to_string().contains("qwen2_vl_vision"), "{err}");
    }

    #[test]
    fn sections_that_do_not_fill_half_a_head_and_ragged_windows_are_refused_in_one_line() {
        let err = read(
            r#"{"text_config": {"hidden_size": 64, "num_attention_heads": 4, "vocab_size": 400,
                "rope_parameters": {"rope_type": "default", "mrope_section": [2, 3, 2]}}}"#,
        )
        .unwrap_err();
        assert!(err.contains("mrope_section") && err.contains('8'), "{err}");
        assert!(!err.contains('\n'), "{err}");
        let err = read(r#"{"vision_config": {"window_size": 100}}"#).unwrap_err();
        assert!(err.contains("window_size"), "{err}");
    }
}
