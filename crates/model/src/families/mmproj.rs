//! llama.cpp's projector files (`mmproj-*.gguf`, the layout of its `tools/mtmd/clip.cpp`): a
//! vision tower and a projector beside a text model's GGUF file, joined here with that text
//! model into the vision-language network transformers' checkpoint would make.
//!
//! What the file says, under `general.architecture` `clip`: `clip.projector_type` (`mlp`:
//! LLaVA-1.5's two-layer MLP, `mm.0` and `mm.2`; `gemma3`: Gemma 3's average pool, soft-embedding
//! RMSNorm `mm.soft_emb_norm` and projection `mm.input_projection`), the tower's sizes
//! (`clip.vision.image_size`, `patch_size`, `embedding_length`, `feed_forward_length`,
//! `block_count`, `attention.head_count`, `attention.layer_norm_epsilon`), its activation
//! (`clip.use_gelu`, `clip.use_silu`, else CLIP's quick GELU), the normalisation of the pixels
//! (`clip.vision.image_mean`, `image_std`), LLaVA's `clip.vision.feature_layer` (the tower's
//! hidden states the projector reads, numbered as transformers' `hidden_states`; without it the
//! output of the second-to-last stored layer, as clip.cpp reads such files) and Gemma 3's
//! `clip.vision.projector.scale_factor` (patches a side pooled into one image token; 4 when
//! absent); `idefics3` (SmolVLM, Idefics3): the pixel shuffle by that scale factor and one map
//! `mm.model.fc`, with `clip.vision.preproc_image_size` the processor's longest edge (the
//! tower's image size when absent); `qwen2.5vl_merger` (Qwen2.5-VL) and `qwen2vl_merger`
//! (Qwen2-VL): below. Tensors: `v.patch_embd.weight` (and its bias), `v.class_embd`,
//! `v.position_embd.weight`, `v.pre_ln`, `v.blk.N.{ln1, attn_q, attn_k, attn_v, attn_out, ln2,
//! ffn_up, ffn_down}`, `v.post_ln`. The legacy LLaVA converter names the feed-forward maps the
//! other way round (fc1 `ffn_down`); as clip.cpp does, a `ffn_down` whose inputs are the
//! tower's width is read as the first map.
//!
//! Gemma 3's soft-embedding norm is stored with its `1 +` added (convert_hf_to_gguf.py), so it
//! is read as is. LLaVA's projector activation is transformers' `gelu` (the erf form, which
//! `projector_hidden_act` defaults to); clip.cpp runs ggml's tanh form there. The tower's own
//! `v.post_ln`, where a LLaVA file has one, is not applied: transformers' LLaVA reads the
//! hidden states before it.
//!
//! The pictures are prepared as transformers' processor for the family does it (CLIP's resize
//! of the shorter side and centre crop for LLaVA, Gemma 3's square resize, Idefics3's tiles of the
//! tower's size plus the global view), with the file's image size, mean and standard deviation.
//!
//! Qwen2.5-VL (`qwen2.5vl_merger`, convert_hf_to_gguf.py's Qwen2VLVisionModel) joins the
//! `qwen2vl` text file, whose `qwen2vl.rope.dimension_sections` are M-RoPE's sections (llama.cpp's
//! four, the last 0). Its tower is transformers' (`qwen2_5_vl.rs`): the Conv3d over two frames
//! stored as two kernels, `v.patch_embd.weight` and `v.patch_embd.weight.1` (the frames' halves,
//! put back together); q, k and v split from `qkv`; RMSNorms `ln1`, `ln2`; the gated MLP
//! `ffn_gate`, `ffn_up`, `ffn_down` with biases under `clip.use_silu`; the merger's `ln_q` as
//! `v.post_ln`, its MLP `mm.0`, `mm.2`. From the file: the sizes, the norms' epsilon (which the
//! converter copies from the config's `rms_norm_eps`), the merge (`clip.vision.spatial_merge_size`,
//! else 2), the full-attention layers (`clip.vision.wa_layer_indexes`, else every
//! `clip.vision.n_wa_pattern`-th, as clip.cpp reads them), the window (`clip.vision.window_size`,
//! else clip.cpp's 112, every released checkpoint's `window_size`: the converter does not write
//! it), the mean and standard deviation. The vision rotary base is transformers' 10,000. The
//! processor is Qwen's `smart_resize` (bicubic, multiples of patch × merge) between
//! `clip.vision.image_min_pixels` and `image_max_pixels` when the file has them, else the
//! released checkpoints' preprocessor_config.json bounds, 3,136 and 12,845,056 pixels, which the
//! converter does not carry over (clip.cpp itself runs 8 to 4,096 image tokens); the file's
//! `image_size` (the converter's 560) is not used.
//!
//! Qwen2-VL (`qwen2vl_merger`) is the same but its tower's blocks: LayerNorms with biases (`ln1`,
//! `ln2`, the merger's `v.post_ln`), the MLP `ffn_up`, `ffn_down` with quick GELU (no activation
//! key, clip.cpp's default), every layer over the whole picture. Its converter writes the
//! merger's width as `clip.vision.feed_forward_length`: the MLP's is read from `ffn_up`'s shape.

use std::path::Path;

use super::clip::CLIP_VISION;
use super::gemma3_vision::Gemma3Vision;
use super::idefics3::Idefics3;
use super::llava::{Llava, Selection};
use super::qwen2_5_vl::{Qwen25Vl, QwenVisionConfig, Tower, QWEN2_5_VL, QWEN2_VL};
use super::siglip::SIGLIP_VISION;
use crate::attention::image::Cell;
use crate::blocks::decoder::DecoderStack;
use crate::blocks::layers::{Linear, Norm};
use crate::blocks::merged_vision::{MergedVision, MergedVisionLayer, Merger, Mlp};
use crate::blocks::network::{Framing, Network};
use crate::blocks::vision::{Specials, VisionAct, VisionConfig, VisionEncoder, VisionLayer};
use crate::error::{Error, GgufMetadataProblem, InputError};
use crate::formats::gguf::{DecoderParams, GgufError, GgufFile, MetadataProblem, Representation};
use crate::formats::weights::{MatrixWeight, Weight};
use crate::kernels::{Activation, Layout, Rope};
use crate::pixels::ImageProcessor;

/// The projector types read, as `clip.projector_type` names them, with what they are.
pub const KNOWN_PROJECTORS: &[(&str, &str)] = &[
    ("mlp", "LLaVA"),
    ("gemma3", "Gemma 3"),
    ("idefics3", "SmolVLM, Idefics3"),
    ("qwen2.5vl_merger", "Qwen2.5-VL"),
    ("qwen2vl_merger", "Qwen2-VL"),
];

/// The text architectures each projector type joins.
const TEXT_ARCHITECTURES: &[(&str, &[&str])] = &[
    ("mlp", &["llama", "mistral", "qwen2"]),
    ("gemma3", &["gemma3"]),
    ("idefics3", &["llama"]),
    ("qwen2.5vl_merger", &["qwen2vl"]),
    ("qwen2vl_merger", &["qwen2vl"]),
];

/// Which projector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// LLaVA-1.5's MLP over CLIP's features.
    Mlp,
    /// Gemma 3's pool, norm and projection over SigLIP's last hidden state.
    Gemma3,
    /// Idefics3's pixel shuffle and one map over SigLIP's last hidden state, per tile.
    Idefics3,
    /// Qwen2.5-VL's own tower (windows, 2-D RoPE) and its merger of 2 × 2 patches.
    Qwen25Vl,
    /// Qwen2-VL's: the same tower with LayerNorms, a quick-GELU MLP and no windows.
    Qwen2Vl,
}

/// What a Qwen2.5-VL projector file says beyond the tower's sizes.
#[derive(Clone, Debug, PartialEq)]
struct QwenSettings {
    /// Patches a side merged into one image token (`clip.vision.spatial_merge_size`, else 2).
    merge: usize,
    /// A window's side in pixels (`clip.vision.window_size`, else 112).
    window: usize,
    /// The layers that attend over the whole picture.
    full: Vec<usize>,
    /// The processor's bounds on a picture's area (`clip.vision.image_min_pixels`,
    /// `image_max_pixels`).
    pixels: [usize; 2],
}

/// Qwen2.5-VL's `preprocessor_config.json` bounds (`min_pixels`, `max_pixels`), which the
/// converter does not carry into the file.
const QWEN_PIXELS: [usize; 2] = [3136, 12_845_056];

/// clip.cpp's window when the file states none: every released Qwen2.5-VL's `window_size`.
const QWEN_WINDOW: usize = 112;

/// A projector file's settings, read and checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Mmproj {
    kind: Kind,
    /// `clip.projector_type` as written.
    projector_type: String,
    tower: VisionConfig,
    mean: [f64; 3],
    std: [f64; 3],
    /// The hidden states the projector reads (LLaVA).
    feature_layers: Vec<usize>,
    /// Patches a side pooled into one image token (Gemma 3).
    scale: usize,
    /// The processor's longest edge (`clip.vision.preproc_image_size`, Idefics3).
    longest: usize,
    /// Qwen2.5-VL's merge, windows and picture bounds.
    qwen: Option<QwenSettings>,
    /// Named in errors.
    origin: String,
}

fn meta(file: &GgufFile, key: &str, problem: MetadataProblem) -> Error {
    Error::from(file.meta_err(key, problem))
}

impl Mmproj {
    /// Read the settings of the projector file `file` (named `origin` in errors). Refuses a file
    /// that is not a projector, or holds a projector type not read here.
    pub fn read(file: &GgufFile, origin: &str) -> Result<Mmproj, Error> {
        let architecture = file.architecture()?;
        if architecture != "clip" {
            return Err(InputError::NotAProjector {
                origin: origin.to_string(),
                architecture: architecture.to_string(),
            }
            .into());
        }
        let projector_type = match file.get_str("clip.projector_type")? {
            Some(t) => t.to_string(),
            None => file
                .get_str("clip.vision.projector_type")?
                .ok_or_else(|| meta(file, "clip.projector_type", MetadataProblem::Missing))?
                .to_string(),
        };
        let kind = match projector_type.as_str() {
            "mlp" => Kind::Mlp,
            "gemma3" => Kind::Gemma3,
            "idefics3" => Kind::Idefics3,
            "qwen2.5vl_merger" => Kind::Qwen25Vl,
            "qwen2vl_merger" => Kind::Qwen2Vl,
            _ => {
                return Err(InputError::UnknownProjector {
                    origin: origin.to_string(),
                    projector: projector_type,
                    known: KNOWN_PROJECTORS,
                }
                .into())
            }
        };
        let size = |key: &str| -> Result<usize, Error> {
            match file.require_usize(key)? {
                0 => Err(meta(file, key, MetadataProblem::Zero)),
                n => Ok(n),
            }
        };
        let hidden = size("clip.vision.embedding_length")?;
        let heads = size("clip.vision.attention.head_count")?;
        if hidden % heads != 0 {
            return Err(meta(
                file,
                "clip.vision.attention.head_count",
                MetadataProblem::NoHeadSize { hidden, heads },
            ));
        }
        let layers = size("clip.vision.block_count")?;
        let image_size = size("clip.vision.image_size")?;
        let patch_size = size("clip.vision.patch_size")?;
        if image_size < patch_size {
            return Err(meta(
                file,
                "clip.vision.patch_size",
                MetadataProblem::Implausible(patch_size as u64),
            ));
        }
        let eps = file
            .get_f64("clip.vision.attention.layer_norm_epsilon")?
            .unwrap_or(1e-6);
        let act = if file.get_bool("clip.use_gelu")?.unwrap_or(false) {
            // The legacy LLaVA converter writes it for `gelu`; Gemma 3's SigLIP runs the tanh
            // form.
            VisionAct::Kernel(match kind {
                Kind::Mlp => Activation::GeluErf,
                Kind::Gemma3 | Kind::Idefics3 | Kind::Qwen25Vl | Kind::Qwen2Vl => {
                    Activation::GeluTanh
                }
            })
        } else if file.get_bool("clip.use_silu")?.unwrap_or(false) {
            VisionAct::Kernel(Activation::Silu)
        } else {
            VisionAct::QuickGelu
        };
        let triple = |key: &str| -> Result<[f64; 3], Error> {
            let values = file
                .get_f64_array(key)?
                .ok_or_else(|| meta(file, key, MetadataProblem::Missing))?;
            match values.as_slice() {
                &[a, b, c] => Ok([a, b, c]),
                _ => Err(meta(
                    file,
                    key,
                    MetadataProblem::Type {
                        found: format!("an array of {} values", values.len()),
                        expected: "an array of 3 numbers",
                    },
                )),
            }
        };
        let (mean, std) = (
            triple("clip.vision.image_mean")?,
            triple("clip.vision.image_std")?,
        );
        if let Some(&zero) = std.iter().find(|s| **s <= 0.0) {
            return Err(meta(
                file,
                "clip.vision.image_std",
                MetadataProblem::NotFinite(zero),
            ));
        }
        let feature_layers = match file.get_usize_array("clip.vision.feature_layer")? {
            Some(l) if !l.is_empty() => l,
            // clip.cpp: the output of the second-to-last stored layer.
            _ => vec![layers.saturating_sub(1).max(1)],
        };
        if feature_layers.len() > layers + 1 {
            return Err(meta(
                file,
                "clip.vision.feature_layer",
                MetadataProblem::Implausible(feature_layers.len() as u64),
            ));
        }
        if let Some(&l) = feature_layers.iter().find(|&&l| l > layers) {
            return Err(meta(
                file,
                "clip.vision.feature_layer",
                MetadataProblem::Implausible(l as u64),
            ));
        }
        let scale = file
            .get_usize("clip.vision.projector.scale_factor")?
            .unwrap_or(4);
        let side = image_size / patch_size;
        if matches!(kind, Kind::Gemma3 | Kind::Idefics3)
            && (scale == 0 || !side.is_multiple_of(scale))
        {
            return Err(meta(
                file,
                "clip.vision.projector.scale_factor",
                MetadataProblem::Implausible(scale as u64),
            ));
        }
        let qwen = match kind {
            Kind::Qwen25Vl => Some(qwen_settings(file, layers, patch_size, true)?),
            Kind::Qwen2Vl => Some(qwen_settings(file, layers, patch_size, false)?),
            _ => None,
        };
        Ok(Mmproj {
            kind,
            projector_type,
            tower: VisionConfig {
                hidden_size: hidden,
                num_hidden_layers: layers,
                num_attention_heads: heads,
                intermediate_size: size("clip.vision.feed_forward_length")?,
                image_size,
                patch_size,
                num_channels: 3,
                layer_norm_eps: eps,
                act,
            },
            mean,
            std,
            feature_layers,
            scale,
            longest: file
                .get_usize("clip.vision.preproc_image_size")?
                .filter(|&n| n > 0)
                .unwrap_or(image_size),
            qwen,
            origin: origin.to_string(),
        })
    }

    /// How pictures become the tower's input: transformers' image processor for the family, with
    /// the file's image size, mean and standard deviation.
    pub fn image_processor(&self) -> Result<ImageProcessor, Error> {
        let s = self.tower.image_size;
        let config = match self.kind {
            Kind::Mlp => serde_json::json!({
                "image_processor_type": "CLIPImageProcessor",
                "do_resize": true,
                "size": {"shortest_edge": s},
                "do_center_crop": true,
                "crop_size": {"height": s, "width": s},
                "resample": 3,
                "do_rescale": true,
                "rescale_factor": 1.0 / 255.0,
                "do_normalize": true,
                "image_mean": self.mean,
                "image_std": self.std,
                "do_convert_rgb": true,
            }),
            Kind::Gemma3 => serde_json::json!({
                "image_processor_type": "Gemma3ImageProcessor",
                "do_resize": true,
                "size": {"height": s, "width": s},
                "resample": 2,
                "do_rescale": true,
                "rescale_factor": 1.0 / 255.0,
                "do_normalize": true,
                "image_mean": self.mean,
                "image_std": self.std,
                "do_convert_rgb": true,
                "do_pan_and_scan": false,
            }),
            Kind::Idefics3 => serde_json::json!({
                "image_processor_type": "Idefics3ImageProcessor",
                "do_resize": true,
                "size": {"longest_edge": self.longest},
                "max_image_size": {"longest_edge": s},
                "do_image_splitting": true,
                "resample": 1,
                "do_rescale": true,
                "rescale_factor": 1.0 / 255.0,
                "do_normalize": true,
                "image_mean": self.mean,
                "image_std": self.std,
                "do_convert_rgb": true,
            }),
            Kind::Qwen25Vl | Kind::Qwen2Vl => {
                let q = self.qwen.as_ref().expect("read with the projector");
                serde_json::json!({
                    "image_processor_type": "Qwen2VLImageProcessor",
                    "do_resize": true,
                    "size": {"shortest_edge": q.pixels[0], "longest_edge": q.pixels[1]},
                    "patch_size": self.tower.patch_size,
                    "temporal_patch_size": 2,
                    "merge_size": q.merge,
                    "resample": 3,
                    "do_rescale": true,
                    "rescale_factor": 1.0 / 255.0,
                    "do_normalize": true,
                    "image_mean": self.mean,
                    "image_std": self.std,
                    "do_convert_rgb": true,
                })
            }
        };
        ImageProcessor::parse(&config.to_string()).map_err(|problem| {
            InputError::Image(crate::pixels::PixelsError::Config {
                path: self.origin.clone().into(),
                problem,
            })
            .into()
        })
    }

    /// The vision-language network: `text` (the text model `model` of GGUF architecture
    /// `architecture`) with the tower and projector of `file`; `token` looks a token up in the
    /// text model's vocabulary. Refuses a text model of another architecture than the
    /// projector's, a projector of another output width, and a vocabulary without the tokens
    /// that stand for a picture.
    pub fn join(
        &self,
        file: &GgufFile,
        mut text: DecoderStack,
        model: &str,
        params: &DecoderParams,
        token: &dyn Fn(&str) -> Option<u32>,
    ) -> Result<Box<dyn Network>, Error> {
        let architecture = params.architecture.as_str();
        let goes_with = TEXT_ARCHITECTURES
            .iter()
            .find(|(t, _)| *t == self.projector_type)
            .map_or(&[][..], |(_, a)| *a);
        if !goes_with.contains(&architecture) {
            return Err(InputError::ProjectorText {
                origin: self.origin.clone(),
                projector: self.projector_type.clone(),
                goes_with,
                model: model.to_string(),
                architecture: architecture.to_string(),
            }
            .into());
        }
        let t = Tensors {
            file,
            origin: &self.origin,
        };
        let hidden = text.arch.hidden_size;
        let width = self.tower.hidden_size;
        let find = |name: &'static str| {
            token(name).ok_or_else(|| {
                Error::from(InputError::NoPictureToken {
                    model: model.to_string(),
                    token: name,
                })
            })
        };
        match self.kind {
            Kind::Mlp => {
                let inputs = width * self.feature_layers.len();
                let first = t.shape("mm.0.weight")?;
                let out = first.first().copied().unwrap_or(0);
                if out != hidden {
                    return Err(self.width_error(out, model, hidden));
                }
                let linear_1 = t.linear("mm.0", hidden, inputs, true)?;
                let linear_2 = t.linear("mm.2", hidden, hidden, true)?;
                let tower = self.tower(&t, true)?;
                text.arch.family = super::llava::LLAVA.name;
                text.arch.model_type = "llava".to_string();
                Ok(Box::new(Llava {
                    tower,
                    stages: self.feature_layers.clone(),
                    selection: Selection::Patches,
                    linear_1,
                    act: Activation::GeluErf,
                    linear_2,
                    text,
                    image_token: find("<image>")?,
                }))
            }
            Kind::Gemma3 => {
                let shape = t.shape("mm.input_projection.weight")?;
                let out = shape.get(1).copied().unwrap_or(0);
                if out != hidden {
                    return Err(self.width_error(out, model, hidden));
                }
                // `[vision width, text width]`, used as `x · W` (transformers' layout too).
                let projection = t.dense("mm.input_projection.weight", &[width, hidden])?;
                let norm = t.vector("mm.soft_emb_norm.weight", width)?;
                let tower = self.tower(&t, false)?;
                text.options.image_blocks = true;
                Ok(Box::new(Gemma3Vision {
                    tower,
                    kernel: self.scale,
                    norm: Norm::from_weights(norm, None, self.tower.layer_norm_eps),
                    projection: Linear::new(projection, Layout::InOut, None),
                    text,
                    image_token: find("<image_soft_token>")?,
                    framing: Framing {
                        mark: find("<start_of_image>")?,
                        close: find("<end_of_image>")?,
                        around: "\n\n",
                        crops: Some(super::gemma3_vision::GEMMA3_CROP_WORDS),
                    },
                }))
            }
            Kind::Idefics3 => {
                let inputs = width * self.scale * self.scale;
                let shape = t.shape("mm.model.fc.weight")?;
                let out = shape.first().copied().unwrap_or(0);
                if out != hidden {
                    return Err(self.width_error(out, model, hidden));
                }
                let projection = t.linear("mm.model.fc", hidden, inputs, false)?;
                let mut tower = self.tower(&t, false)?;
                let side = self.tower.trained_side();
                tower.positions = super::idefics3::bucketed_rows(&tower.positions, side, width);
                text.arch.family = super::idefics3::IDEFICS3.name;
                text.arch.model_type = "idefics3".to_string();
                Ok(Box::new(Idefics3 {
                    tower,
                    scale: self.scale,
                    projection,
                    text,
                    image_token: find("<image>")?,
                }))
            }
            Kind::Qwen25Vl | Kind::Qwen2Vl => {
                let q = self.qwen.as_ref().expect("read with the projector");
                let shape = t.shape("mm.2.weight")?;
                let out = shape.first().copied().unwrap_or(0);
                if out != hidden {
                    return Err(self.width_error(out, model, hidden));
                }
                text.options.mrope_section = Some(self.sections(params, model, &text)?);
                let family = if self.kind == Kind::Qwen2Vl {
                    &QWEN2_VL
                } else {
                    &QWEN2_5_VL
                };
                let tower = self.merged_tower(&t, q, hidden)?;
                text.arch.family = family.name;
                text.arch.model_type = family.model_types[0].to_string();
                Ok(Box::new(Qwen25Vl {
                    tower,
                    text,
                    image_token: find("<|image_pad|>")?,
                    vision_marks: [find("<|vision_start|>")?, find("<|vision_end|>")?],
                }))
            }
        }
    }

    /// M-RoPE's sections from the text file (`qwen2vl.rope.dimension_sections`, llama.cpp's
    /// four with the unused last 0), which must fill half a head.
    fn sections(
        &self,
        params: &DecoderParams,
        model: &str,
        text: &DecoderStack,
    ) -> Result<Vec<usize>, Error> {
        let mut sections = params.rope_sections.clone();
        while sections.len() > 3 && sections.last() == Some(&0) {
            sections.pop();
        }
        let half = text.arch.head_dim / 2;
        if sections.len() != 3 || sections.iter().sum::<usize>() != half {
            return Err(InputError::GgufMetadata {
                origin: model.to_string(),
                problem: GgufMetadataProblem::RopeSections {
                    architecture: params.architecture.clone(),
                    found: if params.rope_sections.is_empty() {
                        "missing".to_string()
                    } else {
                        format!("{:?}", params.rope_sections)
                    },
                    half,
                },
            }
            .into());
        }
        Ok(sections)
    }

    /// Qwen2.5-VL's tower: the two frames' kernels as the Conv3d's matrix, RMSNorms, q/k/v, a
    /// gated MLP with biases, windows but on the full layers, the merger (`v.post_ln` its
    /// `ln_q`, `mm.0`, `mm.2` into the text model's width `out`).
    fn merged_tower(
        &self,
        t: &Tensors<'_>,
        q: &QwenSettings,
        out: usize,
    ) -> Result<MergedVision, Error> {
        let c = &self.tower;
        let qwen2 = self.kind == Kind::Qwen2Vl;
        let (hidden, p, eps) = (c.hidden_size, c.patch_size, c.layer_norm_eps);
        // Qwen2-VL's converter writes the merger's width as `feed_forward_length`; the MLP's
        // is its first map's (as clip.cpp reads it).
        let inner = if qwen2 {
            t.shape("v.blk.0.ffn_up.weight")?
                .first()
                .copied()
                .unwrap_or(0)
        } else {
            c.intermediate_size
        };
        let channels = c.num_channels;
        let shape = [hidden, channels, p, p];
        let frames = [
            t.tensor("v.patch_embd.weight", &shape)?,
            t.tensor("v.patch_embd.weight.1", &shape)?,
        ];
        // transformers' Conv3d weight `[hidden, channels, frames, patch, patch]` as a matrix.
        let area = p * p;
        let mut conv = Vec::with_capacity(hidden * channels * 2 * area);
        for row in 0..hidden * channels {
            for frame in &frames {
                conv.extend_from_slice(&frame[row * area..][..area]);
            }
        }
        let projection = Linear::new(
            Weight::owned(conv, vec![hidden, channels * 2 * area]),
            Layout::OutIn,
            None,
        );
        // Qwen2.5-VL's RMSNorms, Qwen2-VL's LayerNorms.
        let rms = |name: &str| -> Result<Norm, Error> {
            let bias = if qwen2 {
                Some(t.vector(&format!("{name}.bias"), hidden)?)
            } else {
                None
            };
            Ok(Norm::from_weights(
                t.vector(&format!("{name}.weight"), hidden)?,
                bias,
                eps,
            ))
        };
        let layers = (0..c.num_hidden_layers)
            .map(|n| {
                let b = format!("v.blk.{n}");
                Ok(MergedVisionLayer {
                    norm1: rms(&format!("{b}.ln1"))?,
                    qkv: Linear::stack(vec![
                        t.linear(&format!("{b}.attn_q"), hidden, hidden, true)?,
                        t.linear(&format!("{b}.attn_k"), hidden, hidden, true)?,
                        t.linear(&format!("{b}.attn_v"), hidden, hidden, true)?,
                    ]),
                    output: t.linear(&format!("{b}.attn_out"), hidden, hidden, true)?,
                    norm2: rms(&format!("{b}.ln2"))?,
                    mlp: match c.act {
                        VisionAct::Kernel(act) if !qwen2 => Mlp::Gated {
                            gate: t.linear(&format!("{b}.ffn_gate"), inner, hidden, true)?,
                            up: t.linear(&format!("{b}.ffn_up"), inner, hidden, true)?,
                            down: t.linear(&format!("{b}.ffn_down"), hidden, inner, true)?,
                            act,
                        },
                        act => Mlp::Plain {
                            fc1: t.linear(&format!("{b}.ffn_up"), inner, hidden, true)?,
                            fc2: t.linear(&format!("{b}.ffn_down"), hidden, inner, true)?,
                            act,
                        },
                    },
                    windowed: !q.full.contains(&n),
                })
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let merged = q.merge * q.merge * hidden;
        let merger = Merger {
            norm: rms("v.post_ln")?,
            fc1: t.linear("mm.0", merged, merged, true)?,
            fc2: t.linear("mm.2", out, merged, true)?,
        };
        let config = QwenVisionConfig {
            depth: c.num_hidden_layers,
            hidden_size: hidden,
            intermediate_size: inner,
            num_heads: c.num_attention_heads,
            in_channels: channels,
            patch_size: p,
            temporal_patch_size: 2,
            spatial_merge_size: q.merge,
            window_size: q.window,
            fullatt_block_indexes: q.full.clone(),
            out_hidden_size: out,
            hidden_act: c.act,
            tower: if qwen2 { Tower::Qwen2 } else { Tower::Qwen25 },
            rope_theta: 10_000.0,
        };
        Ok(MergedVision {
            arch: config.architecture(),
            patch: p,
            temporal: 2,
            channels,
            merge: q.merge,
            window: q.window / (p * q.merge),
            projection,
            rope: Rope::axial(hidden / c.num_attention_heads, config.rope_theta),
            layers,
            merger,
        })
    }

    fn width_error(&self, width: usize, model: &str, hidden: usize) -> Error {
        InputError::ProjectorWidth {
            origin: self.origin.clone(),
            width,
            model: model.to_string(),
            hidden,
        }
        .into()
    }

    /// The tower: CLIP's (a class token, `pre_ln`, LLaVA) or SigLIP's (a patch bias,
    /// `post_ln`, Gemma 3).
    fn tower(&self, t: &Tensors<'_>, clip: bool) -> Result<VisionEncoder, Error> {
        let c = &self.tower;
        let (hidden, p, side, inner) = (
            c.hidden_size,
            c.patch_size,
            c.trained_side(),
            c.intermediate_size,
        );
        let specials = usize::from(clip);
        let patch = t.tensor("v.patch_embd.weight", &[hidden, c.num_channels, p, p])?;
        let bias = t.optional_vector("v.patch_embd.bias", hidden)?;
        let projection = VisionEncoder::projection(patch, bias);
        let positions = t
            .tensor("v.position_embd.weight", &[specials + side * side, hidden])?
            .to_vec();
        let eps = c.layer_norm_eps;
        let norm = |name: &str| -> Result<Option<Norm>, Error> {
            match t.optional_vector(&format!("{name}.weight"), hidden)? {
                Some(w) => Ok(Some(Norm::from_weights(
                    w,
                    Some(t.vector(&format!("{name}.bias"), hidden)?),
                    eps,
                ))),
                None => Ok(None),
            }
        };
        let need = |name: &str| -> Result<Norm, Error> {
            norm(name)?.ok_or_else(|| t.missing(&format!("{name}.weight")))
        };
        let layers = (0..c.num_hidden_layers)
            .map(|n| {
                let b = format!("v.blk.{n}");
                // The legacy LLaVA converter's names: fc1 as `ffn_down`, fc2 as `ffn_up`.
                let down = t.shape(&format!("{b}.ffn_down.weight"))?;
                let swapped = down.get(1) == Some(&hidden) && inner != hidden;
                let (first, second) = if swapped {
                    ("ffn_down", "ffn_up")
                } else {
                    ("ffn_up", "ffn_down")
                };
                Ok(VisionLayer {
                    norm1: need(&format!("{b}.ln1"))?,
                    qkv: Linear::stack(vec![
                        t.linear(&format!("{b}.attn_q"), hidden, hidden, true)?,
                        t.linear(&format!("{b}.attn_k"), hidden, hidden, true)?,
                        t.linear(&format!("{b}.attn_v"), hidden, hidden, true)?,
                    ]),
                    output: t.linear(&format!("{b}.attn_out"), hidden, hidden, true)?,
                    scale1: None,
                    norm2: need(&format!("{b}.ln2"))?,
                    fc1: t.linear(&format!("{b}.{first}"), inner, hidden, true)?,
                    act: c.act,
                    fc2: t.linear(&format!("{b}.{second}"), hidden, inner, true)?,
                    scale2: None,
                })
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let (family, model_type) = if clip {
            (CLIP_VISION.name, "clip_vision_model")
        } else {
            (SIGLIP_VISION.name, "siglip_vision_model")
        };
        let with_positions = if clip {
            vec![(Cell::Class, t.vector("v.class_embd", hidden)?.to_vec())]
        } else {
            Vec::new()
        };
        Ok(VisionEncoder {
            arch: c.architecture(family, model_type, specials),
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
            pre_norm: norm("v.pre_ln")?,
            layers,
            // LLaVA reads the hidden states before it (see the module doc).
            final_norm: if clip { None } else { Some(need("v.post_ln")?) },
            pooling: None,
        })
    }
}

/// The projector file's tensors by their GGUF names: matrices kept as stored (any type the text
/// models' files may hold), the rest dequantised, every one checked for its shape and finite.
struct Tensors<'a> {
    file: &'a GgufFile,
    origin: &'a str,
}

impl Tensors<'_> {
    fn missing(&self, name: &str) -> Error {
        InputError::NoTensor {
            origin: self.origin.to_string(),
            name: name.to_string(),
        }
        .into()
    }

    fn shape(&self, name: &str) -> Result<Vec<usize>, Error> {
        self.file
            .tensor_info(name)
            .map(|t| t.shape)
            .ok_or_else(|| self.missing(name))
    }

    fn check(&self, name: &str, shape: &[usize]) -> Result<(), Error> {
        let found = self.shape(name)?;
        if found != shape {
            return Err(InputError::TensorShape {
                origin: self.origin.to_string(),
                name: name.to_string(),
                shape: found,
                expected: shape.to_vec(),
            }
            .into());
        }
        Ok(())
    }

    fn not_finite(&self, name: &str, index: usize, value: f32) -> Error {
        InputError::TensorNotFinite {
            origin: self.origin.to_string(),
            name: name.to_string(),
            value,
            index,
        }
        .into()
    }

    /// Tensor `name` of `shape`, dequantised.
    fn tensor(&self, name: &str, shape: &[usize]) -> Result<Weight, Error> {
        self.check(name, shape)?;
        let t = self.file.dequantize(name).map_err(gguf_error)?;
        if let Some((i, &v)) = t.data.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(self.not_finite(name, i, v));
        }
        Ok(Weight::owned(t.data, shape.to_vec()))
    }

    fn vector(&self, name: &str, len: usize) -> Result<Weight, Error> {
        self.tensor(name, &[len])
    }

    fn optional_vector(&self, name: &str, len: usize) -> Result<Option<Weight>, Error> {
        if self.file.has_tensor(name) {
            self.vector(name, len).map(Some)
        } else {
            Ok(None)
        }
    }

    /// Matrix `name` (`shape`) in f32, for a product that takes it `[in, out]`.
    fn dense(&self, name: &str, shape: &[usize]) -> Result<Weight, Error> {
        self.tensor(name, shape)
    }

    /// `{name}.weight` (`[outputs, inputs]`, kept as stored) and `{name}.bias`.
    fn linear(
        &self,
        name: &str,
        outputs: usize,
        inputs: usize,
        bias: bool,
    ) -> Result<Linear, Error> {
        let w = format!("{name}.weight");
        self.check(&w, &[outputs, inputs])?;
        let m = self.file.stored(&w).map_err(gguf_error)?;
        if let Some((i, v)) = m.first_non_finite() {
            return Err(self.not_finite(&w, i, v));
        }
        let bias = if bias {
            Some(self.vector(&format!("{name}.bias"), outputs)?)
        } else {
            None
        };
        Ok(Linear::new(MatrixWeight::Stored(m), Layout::OutIn, bias))
    }
}

fn gguf_error(e: GgufError) -> Error {
    Error::from(e)
}

/// A Qwen2.5-VL file's merge, windows, full-attention layers and picture bounds (see the module
/// doc for where each comes from).
fn qwen_settings(
    file: &GgufFile,
    layers: usize,
    patch: usize,
    windows: bool,
) -> Result<QwenSettings, Error> {
    let merge = file
        .get_usize("clip.vision.spatial_merge_size")?
        .unwrap_or(2);
    let window = file
        .get_usize("clip.vision.window_size")?
        .unwrap_or(QWEN_WINDOW);
    if merge == 0 || merge > 8 {
        return Err(meta(
            file,
            "clip.vision.spatial_merge_size",
            MetadataProblem::Implausible(merge as u64),
        ));
    }
    if window == 0 || !window.is_multiple_of(patch * merge) {
        return Err(meta(
            file,
            "clip.vision.window_size",
            MetadataProblem::Implausible(window as u64),
        ));
    }
    let full = match file.get_usize_array("clip.vision.wa_layer_indexes")? {
        Some(full) => {
            if let Some(&l) = full.iter().find(|&&l| l >= layers) {
                return Err(meta(
                    file,
                    "clip.vision.wa_layer_indexes",
                    MetadataProblem::Implausible(l as u64),
                ));
            }
            full
        }
        // Qwen2-VL: every layer over the whole picture.
        None if !windows => (0..layers).collect(),
        // clip.cpp: layer `n` attends over the whole picture when `(n + 1) % pattern == 0`;
        // a pattern of 0, on every layer.
        None => match file.require_usize("clip.vision.n_wa_pattern")? {
            0 => (0..layers).collect(),
            pattern => (0..layers).filter(|n| (n + 1) % pattern == 0).collect(),
        },
    };
    let bound = |key: &str, default: usize| -> Result<usize, Error> {
        match file.get_usize(key)? {
            Some(0) => Err(meta(file, key, MetadataProblem::Zero)),
            n => Ok(n.unwrap_or(default)),
        }
    };
    let pixels = [
        bound("clip.vision.image_min_pixels", QWEN_PIXELS[0])?,
        bound("clip.vision.image_max_pixels", QWEN_PIXELS[1])?,
    ];
    Ok(QwenSettings {
        merge,
        window,
        full,
        pixels,
    })
}

/// Open the projector file at `path` and read its settings, refusing it before a tensor is read
/// when its tower and projector would take more than `max_memory` bytes (`None`: the memory
/// this process may use), as the text models' files are.
pub fn open(path: &Path, max_memory: Option<u64>) -> Result<(GgufFile, Mmproj), Error> {
    let file = GgufFile::open(path)?;
    let mmproj = Mmproj::read(&file, &path.display().to_string())?;
    let used = |name: &str| name.starts_with("v.") || name.starts_with("mm.");
    file.check_memory(used, Representation::InPlace, max_memory)?;
    Ok((file, mmproj))
}
