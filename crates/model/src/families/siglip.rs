//! SigLIP's vision tower (Zhai et al. 2023): no class token, patch embeddings (the convolution
//! with a bias) plus learned positions, pre-LayerNorm layers with GELU's tanh approximation,
//! `post_layernorm` on the last hidden state, and the multihead attention-pooling head: a
//! learned probe query attending over the patches with `nn.MultiheadAttention`, captured as one
//! more attention (one query, the model's heads). Mirrors transformers'
//! `models/siglip/modeling_siglip.py` (`SiglipVisionModel`), eager attention; positions are
//! interpolated (plain bicubic) for another patch grid as its `interpolate_pos_encoding` does.
//! A full `SiglipModel` checkpoint (`model_type` `siglip`) is read for its vision tower: the
//! settings nested in `vision_config`, the `vision_model.` tensors; the text tower is left unread.

use crate::blocks::family::{Family, FamilyConfig, Quirks};
use crate::blocks::layers::{Linear, Norm};
use crate::blocks::network::Network;
use crate::blocks::vision::{
    PoolingHead, Specials, VisionConfig, VisionDefaults, VisionEncoder, VisionLayer,
};
use crate::error::Error;
use crate::formats::config::{ConfigError, ConfigFile, ConfigProblem};
use crate::formats::source::IMAGE_PROCESSOR;
use crate::formats::tensors::Name;
use crate::formats::validate::{ConfigCount, ConfigDim};
use crate::formats::weights::{Anchor, Checkpoint, Weight};
use crate::kernels::Layout;

/// SigLIP's vision tower in the family registry.
pub static SIGLIP_VISION: Family = Family {
    name: "SigLIP vision",
    model_types: &["siglip_vision_model", "siglip"],
    class_prefixes: &["SiglipVision"],
    anchor: Anchor {
        tensor: "embeddings.patch_embedding.weight",
        family: "SigLIP vision",
        prefix: "vision_model",
    },
    config: |file| Ok(Box::new(SiglipVisionConfig::read(file)?)),
    quirks: Quirks {
        tokenizer_files: IMAGE_PROCESSOR,
        ..Quirks::NONE
    },
};

/// transformers' `SiglipVisionConfig` defaults.
const DEFAULTS: VisionDefaults = VisionDefaults {
    hidden_size: 768,
    num_hidden_layers: 12,
    num_attention_heads: 12,
    intermediate_size: Some(3072),
    image_size: 224,
    patch_size: 16,
    layer_norm_eps: 1e-6,
    hidden_act: "gelu_pytorch_tanh",
};

/// A SigLIP vision config.
#[derive(Clone, Debug, PartialEq)]
pub struct SiglipVisionConfig {
    /// The settings every vision tower has.
    pub vision: VisionConfig,
    /// `vision_use_head`: whether the tower has the attention-pooling head (default true).
    pub use_head: bool,
}

impl SiglipVisionConfig {
    /// Read config.json: a `SiglipVisionModel`'s, or a whole `SiglipModel`'s (`model_type`
    /// `siglip`), whose vision settings are its `vision_config`.
    pub fn read(file: &ConfigFile) -> Result<SiglipVisionConfig, ConfigError> {
        if file.model_type()?.as_deref() != Some("siglip") {
            return Self::of(file);
        }
        let nested = match file.get("vision_config") {
            None | Some(serde_json::Value::Null) => serde_json::Value::Object(Default::default()),
            Some(v @ serde_json::Value::Object(_)) => v.clone(),
            Some(_) => {
                return Err(file.invalid(ConfigProblem::FieldNotAnObject {
                    field: "vision_config",
                }))
            }
        };
        Self::of(&ConfigFile::parse(&nested.to_string(), file.path())?)
    }

    fn of(file: &ConfigFile) -> Result<SiglipVisionConfig, ConfigError> {
        Ok(SiglipVisionConfig {
            vision: VisionConfig::read(file, &DEFAULTS)?,
            use_head: file.boolean("vision_use_head")?.unwrap_or(true),
        })
    }
}

fn layer(i: usize) -> Name {
    Name::root().pp("encoder").pp("layers").pp(i)
}

fn embeddings() -> Name {
    Name::root().pp("embeddings")
}

fn head() -> Name {
    Name::root().pp("head")
}

impl FamilyConfig for SiglipVisionConfig {
    fn checks(&self) -> (Vec<ConfigDim>, Vec<ConfigCount>) {
        let c = &self.vision;
        let side = c.trained_side();
        let e = embeddings();
        let dims = vec![
            ConfigDim::new(
                "hidden_size",
                c.hidden_size,
                e.pp("patch_embedding").weight(),
                0,
            ),
            ConfigDim::new(
                "image_size",
                side * side,
                e.pp("position_embedding").weight(),
                0,
            ),
            ConfigDim::new(
                "patch_size",
                c.patch_size,
                e.pp("patch_embedding").weight(),
                2,
            ),
            ConfigDim::new(
                "intermediate_size",
                c.intermediate_size,
                layer(0).pp("mlp").pp("fc1").weight(),
                0,
            ),
        ];
        let counts = vec![ConfigCount::new(
            "num_hidden_layers",
            c.num_hidden_layers,
            "layer",
            |i| layer(i).pp("layer_norm1").weight(),
        )];
        (dims, counts)
    }

    fn build(&self, ckpt: &Checkpoint) -> Result<Box<dyn Network>, Error> {
        Ok(Box::new(self.encoder(ckpt)?))
    }
}

impl SiglipVisionConfig {
    /// The vision tower from `ckpt` (its names inside `vision_model.`), as
    /// [`FamilyConfig::build`] builds it, unboxed: a vision-language model runs it for its
    /// hidden states.
    pub fn encoder(&self, ckpt: &Checkpoint) -> Result<VisionEncoder, Error> {
        self.build_encoder(ckpt)
    }

    /// The tower of a vision-language checkpoint whose projector reads its last hidden state
    /// (Gemma 3, PaliGemma): found under google's prefix (`vision_tower.vision_model.`) or
    /// transformers 5's (`vision_tower.`, or either under `model.`), its sizes checked against
    /// `config` (the file named in errors), built without the pooling head, which such a model
    /// does not use.
    pub fn language_tower(
        &self,
        ckpt: &Checkpoint,
        config: &std::path::Path,
    ) -> Result<VisionEncoder, Error> {
        let vision = ckpt.at_first(
            &[
                "vision_tower.vision_model.",
                "vision_tower.",
                "model.vision_tower.vision_model.",
                "model.vision_tower.",
            ],
            "embeddings.patch_embedding.weight",
        );
        let (dims, counts) = self.checks();
        crate::formats::validate::config_matches(config, &vision, &dims, &counts)?;
        SiglipVisionConfig {
            use_head: false,
            ..self.clone()
        }
        .build_encoder(&vision)
    }

    fn build_encoder(&self, ckpt: &Checkpoint) -> Result<VisionEncoder, Error> {
        let c = &self.vision;
        let (hidden, p, side) = (c.hidden_size, c.patch_size, c.trained_side());
        let e = embeddings();
        let patch = e.pp("patch_embedding");
        let projection = VisionEncoder::projection(
            ckpt.weight(&patch.weight(), &[hidden, c.num_channels, p, p])?,
            Some(ckpt.weight(&patch.bias(), &[hidden])?),
        );
        let positions = ckpt
            .weight(&e.pp("position_embedding").weight(), &[side * side, hidden])?
            .to_vec();
        let eps = c.layer_norm_eps;
        let i = c.intermediate_size;
        let layers = (0..c.num_hidden_layers)
            .map(|n| {
                let l = layer(n);
                let s = l.pp("self_attn");
                Ok(VisionLayer {
                    norm1: Norm::layer(ckpt, &l.pp("layer_norm1"), hidden, eps)?,
                    qkv: Linear::load_stacked(
                        ckpt,
                        &[&s.pp("q_proj"), &s.pp("k_proj"), &s.pp("v_proj")],
                        hidden,
                        hidden,
                    )?,
                    output: Linear::load(ckpt, &s.pp("out_proj"), hidden, hidden)?,
                    scale1: None,
                    norm2: Norm::layer(ckpt, &l.pp("layer_norm2"), hidden, eps)?,
                    fc1: Linear::load(ckpt, &l.pp("mlp").pp("fc1"), hidden, i)?,
                    act: c.act,
                    fc2: Linear::load(ckpt, &l.pp("mlp").pp("fc2"), i, hidden)?,
                    scale2: None,
                })
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let pooling = if self.use_head {
            Some(pooling_head(ckpt, hidden)?)
        } else {
            None
        };
        Ok(VisionEncoder {
            arch: c.architecture(SIGLIP_VISION.name, "siglip_vision_model", 0),
            patch: p,
            channels: c.num_channels,
            projection,
            specials: Specials {
                with_positions: Vec::new(),
                after_positions: Vec::new(),
            },
            positions,
            antialias: false,
            trained: [side, side],
            pre_norm: None,
            layers,
            final_norm: Some(Norm::layer(
                ckpt,
                &Name::root().pp("post_layernorm"),
                hidden,
                eps,
            )?),
            pooling,
        })
    }
}

/// The pooling head's probe and `nn.MultiheadAttention`'s packed input projection
/// (`in_proj_weight` `[3 · hidden, hidden]`: query, key, value), split into the probe's query
/// map and the tokens' key and value maps.
fn pooling_head(ckpt: &Checkpoint, hidden: usize) -> Result<PoolingHead, Error> {
    let h = head();
    let probe = ckpt
        .weight(&h.pp("probe").to_string(), &[1, 1, hidden])?
        .to_vec();
    let a = h.pp("attention");
    let w = ckpt
        .weight(&a.pp("in_proj_weight").to_string(), &[3 * hidden, hidden])?
        .to_vec();
    let b = ckpt
        .weight(&a.pp("in_proj_bias").to_string(), &[3 * hidden])?
        .to_vec();
    let map = |rows: std::ops::Range<usize>| {
        let n = rows.len();
        Linear::new(
            Weight::owned(
                w[rows.start * hidden..rows.end * hidden].to_vec(),
                vec![n, hidden],
            ),
            Layout::OutIn,
            Some(Weight::owned(b[rows].to_vec(), vec![n])),
        )
    };
    Ok(PoolingHead {
        probe,
        query: map(0..hidden),
        key_value: map(hidden..3 * hidden),
    })
}
