//! CLIP's vision tower (Radford et al. 2021): a class embedding before the patches (the patch
//! convolution has no bias), learned positions, a LayerNorm *before* the first layer
//! (`pre_layrnorm`), pre-LayerNorm layers with quick GELU. Mirrors transformers'
//! `models/clip/modeling_clip.py` (`CLIPVisionModel`, `vision_model.` prefix), eager
//! attention. The last hidden state is the encoder's (`post_layernorm` only normalises the
//! pooled class token). A full `CLIPModel` checkpoint (`model_type` `clip`) is read for its
//! vision tower: the settings nested in `vision_config`, the `vision_model.` tensors; the text
//! tower and the projections are left unread.

use crate::attention::image::Cell;
use crate::blocks::family::{Family, FamilyConfig, Quirks};
use crate::blocks::layers::{Linear, Norm};
use crate::blocks::network::Network;
use crate::blocks::vision::{Specials, VisionConfig, VisionDefaults, VisionEncoder, VisionLayer};
use crate::error::Error;
use crate::formats::config::{ConfigError, ConfigFile, ConfigProblem};
use crate::formats::source::IMAGE_PROCESSOR;
use crate::formats::tensors::Name;
use crate::formats::validate::{ConfigCount, ConfigDim};
use crate::formats::weights::{Anchor, Checkpoint};

/// CLIP's vision tower in the family registry.
pub static CLIP_VISION: Family = Family {
    name: "CLIP vision",
    model_types: &["clip_vision_model", "clip"],
    class_prefixes: &["CLIPVision"],
    anchor: Anchor {
        tensor: "embeddings.class_embedding",
        family: "CLIP vision",
        prefix: "vision_model",
    },
    config: |file| Ok(Box::new(ClipVisionConfig::read(file)?)),
    quirks: Quirks {
        tokenizer_files: IMAGE_PROCESSOR,
        ..Quirks::NONE
    },
};

/// transformers' `CLIPVisionConfig` defaults.
const DEFAULTS: VisionDefaults = VisionDefaults {
    hidden_size: 768,
    num_hidden_layers: 12,
    num_attention_heads: 12,
    intermediate_size: Some(3072),
    image_size: 224,
    patch_size: 32,
    layer_norm_eps: 1e-5,
    hidden_act: "quick_gelu",
};

/// A CLIP vision config.
#[derive(Clone, Debug, PartialEq)]
pub struct ClipVisionConfig(pub VisionConfig);

impl ClipVisionConfig {
    /// Read config.json: a `CLIPVisionModel`'s, or a whole `CLIPModel`'s (`model_type` `clip`),
    /// whose vision settings are its `vision_config`.
    pub fn read(file: &ConfigFile) -> Result<ClipVisionConfig, ConfigError> {
        if file.model_type()?.as_deref() != Some("clip") {
            return Ok(ClipVisionConfig(VisionConfig::read(file, &DEFAULTS)?));
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
        let vision = ConfigFile::parse(&nested.to_string(), file.path())?;
        Ok(ClipVisionConfig(VisionConfig::read(&vision, &DEFAULTS)?))
    }
}

fn layer(i: usize) -> Name {
    Name::root().pp("encoder").pp("layers").pp(i)
}

fn embeddings() -> Name {
    Name::root().pp("embeddings")
}

impl FamilyConfig for ClipVisionConfig {
    fn checks(&self) -> (Vec<ConfigDim>, Vec<ConfigCount>) {
        let c = &self.0;
        let side = c.trained_side();
        let e = embeddings();
        let dims = vec![
            ConfigDim::new(
                "hidden_size",
                c.hidden_size,
                e.pp("class_embedding").to_string(),
                0,
            ),
            ConfigDim::new(
                "image_size",
                1 + side * side,
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

impl ClipVisionConfig {
    /// The vision tower from `ckpt` (its names inside `vision_model.`), as
    /// [`FamilyConfig::build`] builds it, unboxed: a vision-language model runs it for its
    /// hidden states.
    pub fn encoder(&self, ckpt: &Checkpoint) -> Result<VisionEncoder, Error> {
        let c = &self.0;
        let (hidden, p, side) = (c.hidden_size, c.patch_size, c.trained_side());
        let e = embeddings();
        let projection = VisionEncoder::projection(
            ckpt.weight(
                &e.pp("patch_embedding").weight(),
                &[hidden, c.num_channels, p, p],
            )?,
            None,
        );
        let cls = ckpt
            .weight(&e.pp("class_embedding").to_string(), &[hidden])?
            .to_vec();
        let positions = ckpt
            .weight(
                &e.pp("position_embedding").weight(),
                &[1 + side * side, hidden],
            )?
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
        Ok(VisionEncoder {
            arch: c.architecture(CLIP_VISION.name, "clip_vision_model", 1),
            patch: p,
            channels: c.num_channels,
            projection,
            specials: Specials {
                with_positions: vec![(Cell::Class, cls)],
                after_positions: Vec::new(),
            },
            positions,
            antialias: false,
            trained: [side, side],
            pre_norm: Some(Norm::layer(
                ckpt,
                &Name::root().pp("pre_layrnorm"),
                hidden,
                eps,
            )?),
            layers,
            final_norm: None,
            pooling: None,
        })
    }
}
