//! ViT (Dosovitskiy et al. 2021) and DeiT (Touvron et al. 2021): a class token (DeiT: and a
//! distillation token) before the image's patches, learned positions (interpolated for other
//! grids), pre-LayerNorm layers. Mirrors transformers' `models/vit/modeling_vit.py`
//! (`ViTModel`, `ViTForImageClassification`: `vit.` prefix, a classifier) and
//! `models/deit/modeling_deit.py` (`DeiTModel`, `deit.` prefix), eager attention.

use crate::attention::image::Cell;
use crate::blocks::family::{Family, FamilyConfig, Quirks};
use crate::blocks::layers::{Linear, Norm};
use crate::blocks::network::Network;
use crate::blocks::vision::{Specials, VisionConfig, VisionDefaults, VisionEncoder, VisionLayer};
use crate::error::Error;
use crate::formats::config::{ConfigError, ConfigFile, FieldValue, Instead, Unsupported};
use crate::formats::source::IMAGE_PROCESSOR;
use crate::formats::tensors::Name;
use crate::formats::validate::{ConfigCount, ConfigDim};
use crate::formats::weights::{Anchor, Checkpoint};

/// ViT in the family registry.
pub static VIT: Family = Family {
    name: "ViT",
    model_types: &["vit"],
    class_prefixes: &["ViT"],
    anchor: Anchor {
        tensor: "embeddings.cls_token",
        family: "ViT",
        prefix: "vit",
    },
    config: |file| Ok(Box::new(VitConfig::read(file, Variant::Vit)?)),
    quirks: Quirks {
        tokenizer_files: IMAGE_PROCESSOR,
        ..Quirks::NONE
    },
};

/// DeiT in the family registry.
pub static DEIT: Family = Family {
    name: "DeiT",
    model_types: &["deit"],
    class_prefixes: &["DeiT"],
    anchor: Anchor {
        tensor: "embeddings.distillation_token",
        family: "DeiT",
        prefix: "deit",
    },
    config: |file| Ok(Box::new(VitConfig::read(file, Variant::Deit)?)),
    quirks: Quirks {
        tokenizer_files: IMAGE_PROCESSOR,
        ..Quirks::NONE
    },
};

/// Which of the two.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// ViT: a class token.
    Vit,
    /// DeiT: class and distillation tokens.
    Deit,
}

/// transformers' `ViTConfig` defaults (DeiT's are the same).
const DEFAULTS: VisionDefaults = VisionDefaults {
    hidden_size: 768,
    num_hidden_layers: 12,
    num_attention_heads: 12,
    intermediate_size: Some(3072),
    image_size: 224,
    patch_size: 16,
    layer_norm_eps: 1e-12,
    hidden_act: "gelu",
};

/// A ViT or DeiT config.
#[derive(Clone, Debug, PartialEq)]
pub struct VitConfig {
    /// The shared fields.
    pub c: VisionConfig,
    /// ViT or DeiT.
    pub variant: Variant,
    /// `qkv_bias`.
    pub qkv_bias: bool,
}

impl VitConfig {
    /// Read config.json.
    pub fn read(file: &ConfigFile, variant: Variant) -> Result<VitConfig, ConfigError> {
        let qkv_bias = file.boolean("qkv_bias")?.unwrap_or(true);
        if !qkv_bias {
            return Err(file.unsupported(Unsupported::Value {
                field: "qkv_bias",
                value: Some(FieldValue::Json(false.into())),
                note: None,
                instead: Instead::Runs("attnviz runs ViT with query/key/value biases"),
            }));
        }
        Ok(VitConfig {
            c: VisionConfig::read(file, &DEFAULTS)?,
            variant,
            qkv_bias,
        })
    }

    fn specials(&self) -> usize {
        match self.variant {
            Variant::Vit => 1,
            Variant::Deit => 2,
        }
    }
}

/// ViT's tensor names (`embeddings.*`, `encoder.layer.{i}.*`, `layernorm`), which DeiT shares.
pub struct VitNames;

impl VitNames {
    fn embeddings() -> Name {
        Name::root().pp("embeddings")
    }

    /// The patch projection (a convolution).
    pub fn projection() -> Name {
        Self::embeddings().pp("patch_embeddings").pp("projection")
    }

    /// The class token.
    pub fn cls() -> String {
        Self::embeddings().pp("cls_token").to_string()
    }

    /// DeiT's distillation token.
    pub fn distillation() -> String {
        Self::embeddings().pp("distillation_token").to_string()
    }

    /// The position embeddings `[1, specials + patches, hidden]`.
    pub fn positions() -> String {
        Self::embeddings().pp("position_embeddings").to_string()
    }

    /// Layer `i`'s module.
    pub fn layer(i: usize) -> Name {
        Name::root().pp("encoder").pp("layer").pp(i)
    }
}

impl FamilyConfig for VitConfig {
    fn checks(&self) -> (Vec<ConfigDim>, Vec<ConfigCount>) {
        let c = &self.c;
        let side = c.trained_side();
        let dims = vec![
            ConfigDim::new("hidden_size", c.hidden_size, VitNames::cls(), 2),
            ConfigDim::new(
                "image_size",
                self.specials() + side * side,
                VitNames::positions(),
                1,
            ),
            ConfigDim::new(
                "patch_size",
                c.patch_size,
                VitNames::projection().weight(),
                2,
            ),
            ConfigDim::new(
                "intermediate_size",
                c.intermediate_size,
                VitNames::layer(0).pp("intermediate").pp("dense").weight(),
                0,
            ),
        ];
        let counts = vec![ConfigCount::new(
            "num_hidden_layers",
            c.num_hidden_layers,
            "layer",
            |i| {
                VitNames::layer(i)
                    .pp("attention")
                    .pp("attention")
                    .pp("query")
                    .weight()
            },
        )];
        (dims, counts)
    }

    fn build(&self, ckpt: &Checkpoint) -> Result<Box<dyn Network>, Error> {
        let c = &self.c;
        let (hidden, p, side) = (c.hidden_size, c.patch_size, c.trained_side());
        let projection = VisionEncoder::projection(
            ckpt.weight(
                &VitNames::projection().weight(),
                &[hidden, c.num_channels, p, p],
            )?,
            Some(ckpt.weight(&VitNames::projection().bias(), &[hidden])?),
        );
        let mut with_positions = vec![(
            Cell::Class,
            ckpt.weight(&VitNames::cls(), &[1, 1, hidden])?.to_vec(),
        )];
        if self.variant == Variant::Deit {
            with_positions.push((
                Cell::Distillation,
                ckpt.weight(&VitNames::distillation(), &[1, 1, hidden])?
                    .to_vec(),
            ));
        }
        let rows = self.specials() + side * side;
        let positions = ckpt
            .weight(&VitNames::positions(), &[1, rows, hidden])?
            .to_vec();
        let eps = c.layer_norm_eps;
        let layers = (0..c.num_hidden_layers)
            .map(|i| {
                let l = VitNames::layer(i);
                let a = l.pp("attention");
                let s = a.pp("attention");
                Ok(VisionLayer {
                    norm1: Norm::layer(ckpt, &l.pp("layernorm_before"), hidden, eps)?,
                    qkv: Linear::load_stacked(
                        ckpt,
                        &[&s.pp("query"), &s.pp("key"), &s.pp("value")],
                        hidden,
                        hidden,
                    )?,
                    output: Linear::load(ckpt, &a.pp("output").pp("dense"), hidden, hidden)?,
                    scale1: None,
                    norm2: Norm::layer(ckpt, &l.pp("layernorm_after"), hidden, eps)?,
                    fc1: Linear::load(
                        ckpt,
                        &l.pp("intermediate").pp("dense"),
                        hidden,
                        c.intermediate_size,
                    )?,
                    act: c.act,
                    fc2: Linear::load(
                        ckpt,
                        &l.pp("output").pp("dense"),
                        c.intermediate_size,
                        hidden,
                    )?,
                    scale2: None,
                })
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let (name, model_type) = match self.variant {
            Variant::Vit => (VIT.name, "vit"),
            Variant::Deit => (DEIT.name, "deit"),
        };
        Ok(Box::new(VisionEncoder {
            arch: c.architecture(name, model_type, self.specials()),
            patch: p,
            channels: c.num_channels,
            projection,
            specials: Specials {
                with_positions,
                after_positions: Vec::new(),
            },
            positions,
            antialias: false,
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

    fn read(text: &str) -> Result<VitConfig, String> {
        VitConfig::read(
            &ConfigFile::parse(text, Path::new("config.json")).unwrap(),
            Variant::Vit,
        )
        .map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_are_vit_base_and_bad_sizes_are_refused() {
        let c = read("{}").unwrap();
        assert_eq!(
            (c.c.hidden_size, c.c.image_size, c.c.patch_size),
            (768, 224, 16)
        );
        assert_eq!(c.c.trained_side(), 14);
        assert!(read(r#"{"hidden_size": 10, "num_attention_heads": 3}"#)
            .unwrap_err()
            .contains("not divisible"));
        assert!(read(r#"{"image_size": 8, "patch_size": 16}"#)
            .unwrap_err()
            .contains("patch grid"));
        assert!(read(r#"{"qkv_bias": false}"#)
            .unwrap_err()
            .contains("qkv_bias"));
    }
}
