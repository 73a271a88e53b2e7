//! DINOv2 (Oquab et al. 2023): ViT's embeddings (class token, learned positions, interpolated
//! bicubically whenever the grid differs from training, which real checkpoints always do at
//! 224 px), pre-LayerNorm layers with per-channel layer scales. Mirrors transformers'
//! `models/dinov2/modeling_dinov2.py` (`Dinov2Model`; `dinov2.` prefix in
//! `Dinov2ForImageClassification`), eager attention. The SwiGLU variant (`use_swiglu_ffn`,
//! the giant model) is refused.
//!
//! DINOv2 with registers (Darcet et al. 2023, "Vision Transformers Need Registers";
//! `models/dinov2_with_registers/`): the same layers, with `num_register_tokens` learned
//! tokens inserted after the class token once positions are added (they have none), and the
//! positions interpolated with antialiasing (`antialias=True`), as that model does.

use crate::attention::image::Cell;
use crate::blocks::family::{Family, FamilyConfig, Quirks};
use crate::blocks::layers::{Linear, Norm};
use crate::blocks::network::Network;
use crate::blocks::vision::{Specials, VisionConfig, VisionDefaults, VisionEncoder, VisionLayer};
use crate::error::Error;
use crate::formats::config::{
    ConfigError, ConfigFile, ConfigProblem, FieldValue, Instead, Limit, Unsupported,
};
use crate::formats::source::IMAGE_PROCESSOR;
use crate::formats::tensors::Name;
use crate::formats::validate::{ConfigCount, ConfigDim};
use crate::formats::weights::{Anchor, Checkpoint};

/// DINOv2 in the family registry.
pub static DINOV2: Family = Family {
    name: "DINOv2",
    model_types: &["dinov2"],
    class_prefixes: &["Dinov2"],
    anchor: Anchor {
        tensor: "embeddings.cls_token",
        family: "DINOv2",
        prefix: "dinov2",
    },
    config: |file| Ok(Box::new(Dinov2Config::read(file)?)),
    quirks: Quirks {
        tokenizer_files: IMAGE_PROCESSOR,
        ..Quirks::NONE
    },
};

/// DINOv2 with registers in the family registry.
pub static DINOV2_REGISTERS: Family = Family {
    name: "DINOv2 with registers",
    model_types: &["dinov2_with_registers"],
    class_prefixes: &["Dinov2WithRegisters"],
    anchor: Anchor {
        tensor: "embeddings.register_tokens",
        family: "DINOv2 with registers",
        prefix: "dinov2_with_registers",
    },
    config: |file| Ok(Box::new(Dinov2Config::read_with_registers(file)?)),
    quirks: Quirks {
        tokenizer_files: IMAGE_PROCESSOR,
        ..Quirks::NONE
    },
};

/// The most register tokens a config may ask for (the released checkpoints have 4).
const MAX_REGISTERS: usize = 256;

/// transformers' `Dinov2Config` defaults (intermediate size: `mlp_ratio` 4 × hidden).
const DEFAULTS: VisionDefaults = VisionDefaults {
    hidden_size: 768,
    num_hidden_layers: 12,
    num_attention_heads: 12,
    intermediate_size: None,
    image_size: 224,
    patch_size: 14,
    layer_norm_eps: 1e-6,
    hidden_act: "gelu",
};

/// A DINOv2 config: the tower's, and its register tokens (0 for plain DINOv2).
#[derive(Clone, Debug, PartialEq)]
pub struct Dinov2Config(pub VisionConfig, pub usize);

impl Dinov2Config {
    /// Read a DINOv2 with registers config.json (`num_register_tokens`, default 4).
    pub fn read_with_registers(file: &ConfigFile) -> Result<Dinov2Config, ConfigError> {
        let Dinov2Config(c, _) = Self::read(file)?;
        let registers = file.positive("num_register_tokens", 4)?;
        if registers > MAX_REGISTERS {
            return Err(file.invalid(ConfigProblem::TooMany {
                field: "num_register_tokens",
                value: registers,
                limit: Limit::Number(MAX_REGISTERS),
            }));
        }
        Ok(Dinov2Config(c, registers))
    }

    /// Read config.json.
    pub fn read(file: &ConfigFile) -> Result<Dinov2Config, ConfigError> {
        if file.boolean("use_swiglu_ffn")? == Some(true) {
            return Err(file.unsupported(Unsupported::Value {
                field: "use_swiglu_ffn",
                value: Some(FieldValue::Json(true.into())),
                note: Some("DINOv2 giant's SwiGLU feed-forward"),
                instead: Instead::Nothing,
            }));
        }
        if file.boolean("qkv_bias")? == Some(false) {
            return Err(file.unsupported(Unsupported::Value {
                field: "qkv_bias",
                value: Some(FieldValue::Json(false.into())),
                note: None,
                instead: Instead::Nothing,
            }));
        }
        Ok(Dinov2Config(VisionConfig::read(file, &DEFAULTS)?, 0))
    }
}

fn layer(i: usize) -> Name {
    Name::root().pp("encoder").pp("layer").pp(i)
}

fn embeddings() -> Name {
    Name::root().pp("embeddings")
}

impl FamilyConfig for Dinov2Config {
    fn checks(&self) -> (Vec<ConfigDim>, Vec<ConfigCount>) {
        let c = &self.0;
        let side = c.trained_side();
        let e = embeddings();
        let mut dims = vec![
            ConfigDim::new(
                "hidden_size",
                c.hidden_size,
                e.pp("cls_token").to_string(),
                2,
            ),
            ConfigDim::new(
                "image_size",
                1 + side * side,
                e.pp("position_embeddings").to_string(),
                1,
            ),
            ConfigDim::new(
                "patch_size",
                c.patch_size,
                e.pp("patch_embeddings").pp("projection").weight(),
                2,
            ),
            ConfigDim::new(
                "mlp_ratio",
                c.intermediate_size,
                layer(0).pp("mlp").pp("fc1").weight(),
                0,
            ),
        ];
        if self.1 > 0 {
            dims.push(ConfigDim::new(
                "num_register_tokens",
                self.1,
                e.pp("register_tokens").to_string(),
                1,
            ));
        }
        let counts = vec![ConfigCount::new(
            "num_hidden_layers",
            c.num_hidden_layers,
            "layer",
            |i| layer(i).pp("norm1").weight(),
        )];
        (dims, counts)
    }

    fn build(&self, ckpt: &Checkpoint) -> Result<Box<dyn Network>, Error> {
        let (c, registers) = (&self.0, self.1);
        let (hidden, p, side) = (c.hidden_size, c.patch_size, c.trained_side());
        let e = embeddings();
        let proj = e.pp("patch_embeddings").pp("projection");
        let projection = VisionEncoder::projection(
            ckpt.weight(&proj.weight(), &[hidden, c.num_channels, p, p])?,
            Some(ckpt.weight(&proj.bias(), &[hidden])?),
        );
        let cls = ckpt
            .weight(&e.pp("cls_token").to_string(), &[1, 1, hidden])?
            .to_vec();
        let positions = ckpt
            .weight(
                &e.pp("position_embeddings").to_string(),
                &[1, 1 + side * side, hidden],
            )?
            .to_vec();
        let eps = c.layer_norm_eps;
        let i = c.intermediate_size;
        let layers = (0..c.num_hidden_layers)
            .map(|n| {
                let l = layer(n);
                let a = l.pp("attention");
                let s = a.pp("attention");
                let scale = |k: &str| ckpt.weight(&l.pp(k).pp("lambda1").to_string(), &[hidden]);
                Ok(VisionLayer {
                    norm1: Norm::layer(ckpt, &l.pp("norm1"), hidden, eps)?,
                    qkv: Linear::load_stacked(
                        ckpt,
                        &[&s.pp("query"), &s.pp("key"), &s.pp("value")],
                        hidden,
                        hidden,
                    )?,
                    output: Linear::load(ckpt, &a.pp("output").pp("dense"), hidden, hidden)?,
                    scale1: Some(scale("layer_scale1")?),
                    norm2: Norm::layer(ckpt, &l.pp("norm2"), hidden, eps)?,
                    fc1: Linear::load(ckpt, &l.pp("mlp").pp("fc1"), hidden, i)?,
                    act: c.act,
                    fc2: Linear::load(ckpt, &l.pp("mlp").pp("fc2"), i, hidden)?,
                    scale2: Some(scale("layer_scale2")?),
                })
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let after_positions = if registers > 0 {
            let all = ckpt
                .weight(
                    &e.pp("register_tokens").to_string(),
                    &[1, registers, hidden],
                )?
                .to_vec();
            all.chunks_exact(hidden)
                .enumerate()
                .map(|(index, v)| (Cell::Register { index }, v.to_vec()))
                .collect()
        } else {
            Vec::new()
        };
        let (name, model_type) = if registers > 0 {
            (DINOV2_REGISTERS.name, "dinov2_with_registers")
        } else {
            (DINOV2.name, "dinov2")
        };
        Ok(Box::new(VisionEncoder {
            arch: c.architecture(name, model_type, 1 + registers),
            patch: p,
            channels: c.num_channels,
            projection,
            specials: Specials {
                with_positions: vec![(Cell::Class, cls)],
                after_positions,
            },
            positions,
            antialias: registers > 0,
            trained: [side, side],
            pre_norm: None,
            layers,
            final_norm: Some(Norm::layer(
                ckpt,
                &Name::root().pp("layernorm"),
                hidden,
                eps,
            )?),
            pooling: None,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn defaults_follow_transformers_and_swiglu_is_refused() {
        let read = |t: &str| {
            Dinov2Config::read(&ConfigFile::parse(t, Path::new("c.json")).unwrap())
                .map_err(|e| e.to_string())
        };
        let c = read("{}").unwrap().0;
        assert_eq!(
            (c.patch_size, c.intermediate_size, c.layer_norm_eps),
            (14, 3072, 1e-6)
        );
        assert!(read(r#"{"use_swiglu_ffn": true}"#)
            .unwrap_err()
            .contains("SwiGLU"));
    }
}
