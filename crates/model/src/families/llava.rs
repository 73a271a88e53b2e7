//! LLaVA-1.5 (Liu et al. 2023, `model_type` `llava`): a CLIP vision tower whose hidden state at
//! `vision_feature_layer` (its class token dropped under the `default` selection strategy) a
//! two-layer MLP projects into a Llama's embedding space, one embedding per image token. The
//! prompt's `<image>` token (`image_token_index`) stands for a picture; the processor repeats it
//! once per selected patch, and the projected features take those tokens' places in the input
//! embeddings. The language model's mask stays causal over the whole sequence. Mirrors
//! transformers' `models/llava/modeling_llava.py` (`LlavaForConditionalGeneration`), eager
//! attention.
//!
//! Checkpoints spell the parts' prefixes two ways, both read: llava-hf's (`vision_tower.
//! vision_model.`, `language_model.model.`, `language_model.lm_head`) and transformers 5's
//! (`vision_tower.` without `vision_model.`, or `model.language_model.` with a top-level
//! `lm_head`); the projector's `multi_modal_projector.` anchors them.

use std::path::PathBuf;

use super::clip::ClipVisionConfig;
use super::llama::{LlamaConfig, Variant};
use crate::attention::image::Cell;
use crate::blocks::capture::SequenceCapture;
use crate::blocks::decoder::DecoderStack;
use crate::blocks::family::{Family, FamilyConfig, Quirks};
use crate::blocks::layers::Linear;
use crate::blocks::network::{Architecture, Multimodal, Network};
use crate::blocks::vision::{Vision, VisionEncoder};
use crate::error::Error;
use crate::formats::config::{
    ConfigError, ConfigFile, ConfigProblem, Expected, Field, FieldValue, Instead, Unsupported,
};
use crate::formats::tensors::Tensors;
use crate::formats::validate::{self, ConfigCount, ConfigDim};
use crate::formats::weights::{Anchor, Checkpoint, MatrixWeight, Weight};
use crate::kernels::{Activation, Layout};

/// LLaVA in the family registry.
pub static LLAVA: Family = Family {
    name: "LLaVA",
    model_types: &["llava"],
    class_prefixes: &["LlavaForConditionalGeneration"],
    anchor: Anchor {
        tensor: "multi_modal_projector.linear_1.weight",
        family: "LLaVA",
        prefix: "model",
    },
    config: |file| Ok(Box::new(LlavaConfig::read(file)?)),
    quirks: Quirks::NONE,
};

/// Which of the tower's tokens the projector keeps (`vision_feature_select_strategy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Selection {
    /// `default`: every token but the class token.
    Patches,
    /// `full`: every token.
    All,
}

/// A LLaVA config.json.
#[derive(Clone, Debug, PartialEq)]
pub struct LlavaConfig {
    /// The vision tower's (`vision_config`).
    pub vision: ClipVisionConfig,
    /// The language model's (`text_config`).
    pub text: LlamaConfig,
    /// The token that stands for one image token (`image_token_index`).
    pub image_token: u32,
    /// The tower's hidden states the projector reads, as indices into transformers'
    /// `hidden_states` (0: the first layer's input; `l`: layer `l - 1`'s output), several
    /// concatenated feature-wise.
    pub feature_stages: Vec<usize>,
    /// Which tokens it keeps.
    pub selection: Selection,
    /// The projector's activation (`projector_hidden_act`).
    pub projector_act: Activation,
    /// Whether the projector's maps have biases (`multimodal_projector_bias`).
    pub projector_bias: bool,
    /// config.json, named when its sizes do not fit the weights.
    pub path: PathBuf,
}

impl LlavaConfig {
    /// Read config.json, with transformers' `LlavaConfig` defaults.
    pub fn read(file: &ConfigFile) -> Result<LlavaConfig, ConfigError> {
        let empty = || ConfigFile::parse("{}", file.path());
        let vision = file.section_of("vision_config", &["clip_vision_model"])?;
        let vision = ClipVisionConfig::read(&vision)?;
        let text = match file.section("text_config")? {
            Some(t) => t,
            None => empty()?,
        };
        let variant = match text.model_type()?.as_deref() {
            None | Some("llama") => Variant::Llama,
            Some("mistral") => Variant::Mistral,
            Some("qwen2") => Variant::Qwen2,
            Some(other) => {
                return Err(text.unsupported(Unsupported::Value {
                    field: "model_type",
                    value: Some(FieldValue::Name(other.to_string())),
                    note: None,
                    instead: Instead::ModelTypes(vec!["llama", "mistral", "qwen2"]),
                }))
            }
        };
        let mut text_config = LlamaConfig::read(&text, variant)?;
        if !text.has_field("tie_word_embeddings") {
            if let Some(tied) = file.boolean("tie_word_embeddings")? {
                text_config.tie_word_embeddings = tied;
            }
        }
        let image_token = match file.token_id("image_token_index")? {
            Some(id) => id,
            None => file.token_id("image_token_id")?.unwrap_or(32000),
        };
        if image_token as usize >= text_config.vocab_size {
            return Err(file.invalid(ConfigProblem::NotBelow {
                field: "image_token_index",
                value: image_token as usize,
                limit_field: "text_config.vocab_size",
                limit: text_config.vocab_size,
            }));
        }
        let stages = vision.0.num_hidden_layers + 1;
        let layers: Vec<i64> = match file.get("vision_feature_layer") {
            None => vec![-2],
            Some(serde_json::Value::Number(n)) if n.as_i64().is_some() => {
                vec![n.as_i64().unwrap_or_default()]
            }
            Some(serde_json::Value::Array(items))
                if !items.is_empty() && items.iter().all(|v| v.as_i64().is_some()) =>
            {
                items.iter().filter_map(|v| v.as_i64()).collect()
            }
            Some(other) => {
                return Err(file.invalid(ConfigProblem::NotA {
                    field: Field::Top("vision_feature_layer"),
                    value: FieldValue::Json(other.clone()),
                    expected: Expected::WholeNumber,
                }))
            }
        };
        let mut feature_stages = Vec::with_capacity(layers.len());
        for layer in layers {
            // Python's indexing of `hidden_states` (layers + 1 entries).
            let at = if layer < 0 {
                stages as i64 + layer
            } else {
                layer
            };
            if !(0..stages as i64).contains(&at) {
                return Err(file.invalid(ConfigProblem::NotA {
                    field: Field::Top("vision_feature_layer"),
                    value: FieldValue::Json(serde_json::json!(layer)),
                    expected: Expected::Between {
                        above: -(stages as f64) - 1.0,
                        at_most: stages as f64 - 1.0,
                    },
                }));
            }
            feature_stages.push(at as usize);
        }
        let selection = match file.string("vision_feature_select_strategy")?.as_deref() {
            None | Some("default") => Selection::Patches,
            Some("full") => Selection::All,
            Some(other) => {
                return Err(file.unsupported(Unsupported::Value {
                    field: "vision_feature_select_strategy",
                    value: Some(FieldValue::Name(other.to_string())),
                    note: None,
                    instead: Instead::Runs("use 'default' or 'full'"),
                }))
            }
        };
        Ok(LlavaConfig {
            vision,
            text: text_config,
            image_token,
            feature_stages,
            selection,
            projector_act: file.activation("projector_hidden_act", "gelu")?,
            projector_bias: file.boolean("multimodal_projector_bias")?.unwrap_or(true),
            path: file.path().to_path_buf(),
        })
    }

    /// The projector's input width: the tower's hidden size once per feature stage.
    fn projector_inputs(&self) -> usize {
        self.vision.0.hidden_size * self.feature_stages.len()
    }
}

/// The projector's tensors.
fn projector(i: usize) -> String {
    format!("multi_modal_projector.linear_{i}")
}

/// The first of `subs` under which the checkpoint holds `probe`, else the first.
pub(super) fn sub_prefix(ckpt: &Checkpoint, subs: &[&'static str], probe: &str) -> &'static str {
    subs.iter()
        .copied()
        .find(|s| ckpt.has_full(&format!("{}{s}{probe}", ckpt.prefix())))
        .unwrap_or(subs[0])
}

impl FamilyConfig for LlavaConfig {
    fn checks(&self) -> (Vec<ConfigDim>, Vec<ConfigCount>) {
        let hidden = self.text.hidden_size;
        let dims = vec![
            ConfigDim::new(
                "text_config.hidden_size",
                hidden,
                projector(1) + ".weight",
                0,
            ),
            ConfigDim::new(
                "vision_config.hidden_size",
                self.projector_inputs(),
                projector(1) + ".weight",
                1,
            ),
            ConfigDim::new(
                "text_config.hidden_size",
                hidden,
                projector(2) + ".weight",
                0,
            ),
        ];
        (dims, Vec::new())
    }

    fn build(&self, ckpt: &Checkpoint) -> Result<Box<dyn Network>, Error> {
        let vision = ckpt.under(sub_prefix(
            ckpt,
            &["vision_tower.vision_model.", "vision_tower."],
            "embeddings.class_embedding",
        ));
        let (dims, counts) = self.vision.checks();
        validate::config_matches(&self.path, &vision, &dims, &counts)?;
        let tower = self.vision.encoder(&vision)?;
        let text = ckpt.under(sub_prefix(
            ckpt,
            &["language_model.model.", "language_model."],
            "embed_tokens.weight",
        ));
        let (dims, counts) = self.text.checks();
        validate::config_matches(&self.path, &text, &dims, &counts)?;
        let head = ["language_model.lm_head.weight", "lm_head.weight"]
            .into_iter()
            .map(|h| format!("{}{h}", ckpt.prefix()))
            .find(|h| ckpt.has_full(h))
            .unwrap_or_else(|| "lm_head.weight".to_string());
        let mut stack = self.text.build_from(&TextTensors { ckpt: &text, head })?;
        stack.arch.family = LLAVA.name;
        stack.arch.model_type = "llava".to_string();
        let (inputs, hidden) = (self.projector_inputs(), self.text.hidden_size);
        let map = |i: usize, inputs: usize| -> Result<Linear, Error> {
            let name = projector(i);
            let weight = ckpt.matrix(&format!("{name}.weight"), &[hidden, inputs])?;
            let bias = if self.projector_bias {
                Some(ckpt.weight(&format!("{name}.bias"), &[hidden])?)
            } else {
                None
            };
            Ok(Linear::new(weight, Layout::OutIn, bias))
        };
        Ok(Box::new(Llava {
            tower,
            stages: self.feature_stages.clone(),
            selection: self.selection,
            linear_1: map(1, inputs)?,
            act: self.projector_act,
            linear_2: map(2, hidden)?,
            text: stack,
            image_token: self.image_token,
        }))
    }
}

/// The language model's tensors, with its head wherever the checkpoint keeps it.
pub(super) struct TextTensors<'a> {
    pub(super) ckpt: &'a Checkpoint,
    /// The head's full name.
    pub(super) head: String,
}

impl Tensors for TextTensors<'_> {
    fn weight(&self, name: &str, shape: &[usize]) -> Result<Weight, Error> {
        Tensors::weight(self.ckpt, name, shape)
    }

    fn shape(&self, name: &str) -> Option<Vec<usize>> {
        Tensors::shape(self.ckpt, name)
    }

    fn matrix(&self, name: &str, shape: &[usize]) -> Result<MatrixWeight, Error> {
        Tensors::matrix(self.ckpt, name, shape)
    }

    fn lm_head(&self, shape: &[usize]) -> Result<Option<MatrixWeight>, Error> {
        Ok(self
            .ckpt
            .top_level_weight(&self.head, shape)?
            .map(MatrixWeight::F32))
    }
}

/// A LLaVA network: the tower, the projector and the language model.
pub struct Llava {
    pub(crate) tower: VisionEncoder,
    /// The tower's hidden states read (transformers' `hidden_states` indices).
    pub(crate) stages: Vec<usize>,
    pub(crate) selection: Selection,
    pub(crate) linear_1: Linear,
    pub(crate) act: Activation,
    pub(crate) linear_2: Linear,
    pub(crate) text: DecoderStack,
    pub(crate) image_token: u32,
}

crate::blocks::network::vision_language_network!(Llava);

impl Multimodal for Llava {
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
        let cells = self.tower.cells(grid);
        match self.selection {
            Selection::All => cells,
            Selection::Patches => cells.into_iter().skip(1).collect(),
        }
    }

    fn image_embeddings(
        &self,
        pixels: &[f32],
        width: usize,
        height: usize,
        capture: &mut SequenceCapture,
        cancel: &crate::cancel::Cancel,
    ) -> Option<Vec<f32>> {
        let mut states: Vec<(usize, Vec<f32>)> =
            self.stages.iter().map(|&s| (s, Vec::new())).collect();
        self.tower.run(
            pixels,
            width,
            height,
            capture,
            &mut Vec::new(),
            &mut states,
            cancel,
        )?;
        let width_in = self.tower.arch.hidden_size;
        let n = states[0].1.len() / width_in;
        let skip = match self.selection {
            Selection::All => 0,
            Selection::Patches => 1,
        };
        let rows = n - skip;
        let inputs = width_in * states.len();
        // The selected stages side by side, feature-wise, as transformers' `torch.cat(dim=-1)`.
        let mut features = vec![0f32; rows * inputs];
        for (s, (_, state)) in states.iter().enumerate() {
            for r in 0..rows {
                features[r * inputs + s * width_in..][..width_in]
                    .copy_from_slice(&state[(r + skip) * width_in..][..width_in]);
            }
        }
        let inner = self.linear_1.forward(&features, rows, self.act);
        Some(self.linear_2.forward(&inner, rows, Activation::Identity))
    }
}
