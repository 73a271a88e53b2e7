//! Qwen3-Next (`qwen3_next`): the hybrid decoder of [`crate::blocks::hybrid`] with
//! Qwen3-Next's config defaults (`Qwen3NextConfig`: the 80B-A3B's shape), its gated delta
//! projections grouped per key head (`in_proj_qkvz`, `in_proj_ba`) and its routing rule
//! (`decoder_sparse_step`, `mlp_only_layers`, `norm_topk_prob`). Mirrors transformers 5's
//! `models/qwen3_next/modeling_qwen3_next.py`. Checkpoints are `Qwen3NextForCausalLM`'s
//! (`model.` prefix, `lm_head.weight` outside it), or GGUF files of llama.cpp's `qwen3next`
//! ([`from_gguf`]).

use crate::blocks::experts::RouterSettings;
use crate::blocks::family::{Family, GgufReader, Quirks};
use crate::blocks::gated_delta::{DeltaLayout, LinearShape};
use crate::blocks::hybrid::{HybridConfig, HybridDefaults, HybridSpec, Routing, MAX_CONV_KERNEL};
use crate::blocks::network::MAX_LAYERS;
use crate::error::{Error, GgufMetadataProblem};
use crate::formats::gguf::{DecoderParams, RopeScaling as GgufRopeScaling};
use crate::formats::source::TOKENIZERS_WITH_SETTINGS;
use crate::formats::weights::Anchor;
use crate::kernels::RopeScaling;

/// Qwen3-Next in the family registry.
pub static QWEN3_NEXT: Family = Family {
    name: "Qwen3-Next",
    model_types: &["qwen3_next"],
    class_prefixes: &["Qwen3Next"],
    anchor: Anchor {
        tensor: "embed_tokens.weight",
        family: "Qwen3-Next",
        prefix: "model",
    },
    config: |file| Ok(Box::new(HybridConfig::read(file, &SPEC)?)),
    quirks: Quirks {
        tokenizer_files: TOKENIZERS_WITH_SETTINGS,
        gguf: Some(GGUF_QWEN3NEXT),
        ..Quirks::NONE
    },
};

/// Qwen3-Next's particulars, with `Qwen3NextConfig`'s defaults.
pub static SPEC: HybridSpec = HybridSpec {
    family: "Qwen3-Next",
    model_type: "qwen3_next",
    defaults: HybridDefaults {
        vocab_size: 151_936,
        hidden_size: 2048,
        intermediate_size: 5632,
        num_hidden_layers: 48,
        num_key_value_heads: 2,
        num_experts: 512,
        num_experts_per_tok: 10,
    },
    layout: DeltaLayout::Grouped,
    routing: Routing::Stepped,
};

/// GGUF files of llama.cpp's `qwen3next` architecture ([`from_gguf`]).
const GGUF_QWEN3NEXT: GgufReader = GgufReader {
    architectures: &["qwen3next"],
    config: |p, origin| Ok(Box::new(from_gguf(p, origin)?)),
};

/// The widest gated delta head, and the most of its heads, read from a GGUF file.
const MAX_LINEAR: usize = 4096;

/// The config a GGUF file of llama.cpp's `qwen3next` architecture describes, as llama.cpp's
/// converter writes one (`convert_hf_to_gguf.py`'s `Qwen3NextModel`): [`from_gguf_as`] with
/// Qwen3-Next's particulars.
pub fn from_gguf(p: &DecoderParams, origin: &str) -> Result<HybridConfig, Error> {
    from_gguf_as(p, origin, &SPEC)
}

/// The config a GGUF file of a hybrid architecture describes (`qwen3next`, `qwen35`,
/// `qwen35moe`), as llama.cpp's converter writes one (`Qwen3NextModel` and its Qwen3.5
/// subclasses): the full-attention heads (`attention.head_count`, `head_count_kv`,
/// `key_length`), of whose values `rope.dimension_count` rotate (Qwen3.5's
/// `rope.dimension_sections` give every section the same position for text, so they are not
/// read); the gated delta layers those `attention.recurrent_layers` marks, else all but every
/// `full_attention_interval`-th (4 when absent, as llama.cpp reads it), of `ssm.group_count` key
/// heads of `ssm.state_size` and `ssm.time_step_rank` value heads sharing `ssm.inner_size`,
/// convolved over `ssm.conv_kernel` tokens; and, as `spec`'s routing says, a dense MLP of
/// `feed_forward_length` in every layer (Qwen3.5), or routed experts of
/// `expert_feed_forward_length` in the layers with a router (Qwen3-Next; every layer for
/// Qwen3.5-MoE, the others dense), the top `expert_used_count` renormalised (llama.cpp's graphs
/// always do), and a shared expert of `expert_shared_feed_forward_length` behind its gate. The
/// network is the hybrid decoder's, reading the tensors as the converter stores them
/// ([`HybridConfig::gguf`]).
pub fn from_gguf_as(
    p: &DecoderParams,
    origin: &str,
    spec: &HybridSpec,
) -> Result<HybridConfig, Error> {
    crate::families::llama::check_gguf_shape(p, origin)?;
    let x = &p.extra;
    let arch = p.architecture.as_str();
    let refuse = |key: &str, value: String, why: &str| {
        crate::families::llama::gguf_value_error(p, origin, key, value, why)
    };
    let size = |key: &str, v: Option<usize>, max: usize| match v {
        Some(v) if v > 0 && v <= max => Ok(v),
        other => Err(refuse(
            key,
            other.map_or("missing".to_string(), |v| v.to_string()),
            &format!("a {arch} file states it, between 1 and {max}"),
        )),
    };
    let conv_kernel = size("ssm.conv_kernel", x.ssm_conv_kernel, MAX_CONV_KERNEL)?;
    let key_dim = size("ssm.state_size", x.ssm_state_size, MAX_LINEAR)?;
    let key_heads = size("ssm.group_count", x.ssm_group_count, MAX_LINEAR)?;
    let value_heads = size("ssm.time_step_rank", x.ssm_time_step_rank, MAX_LINEAR)?;
    if value_heads % key_heads != 0 {
        return Err(refuse(
            "ssm.time_step_rank",
            value_heads.to_string(),
            &format!(
                "the value heads are a multiple of the {key_heads} key heads (ssm.group_count)"
            ),
        ));
    }
    let inner = size("ssm.inner_size", x.ssm_inner_size, MAX_LINEAR * MAX_LINEAR)?;
    if inner % value_heads != 0 || inner / value_heads > MAX_LINEAR {
        return Err(refuse(
            "ssm.inner_size",
            inner.to_string(),
            &format!("it is the {value_heads} value heads' width, a multiple of them"),
        ));
    }
    let layers = p.num_hidden_layers;
    let full_layers = match &x.recurrent_layers {
        Some(recurrent) if recurrent.len() == layers => {
            recurrent.iter().map(|&r| !r).collect::<Vec<bool>>()
        }
        Some(recurrent) => {
            return Err(refuse(
                "attention.recurrent_layers",
                format!("an array of {} values", recurrent.len()),
                &format!(
                    "it says of each of the {layers} layers (block_count) whether it is recurrent"
                ),
            ))
        }
        None => {
            let interval = size(
                "full_attention_interval",
                Some(x.full_attention_interval.unwrap_or(4)),
                MAX_LAYERS,
            )?;
            (0..layers).map(|i| (i + 1) % interval == 0).collect()
        }
    };
    let rotary_dim = p.rope_dimension_count;
    if rotary_dim < 2 || !rotary_dim.is_multiple_of(2) || rotary_dim > p.head_dim {
        return Err(refuse(
            "rope.dimension_count",
            rotary_dim.to_string(),
            &format!(
                "RoPE rotates an even number of at least 2 and at most the head's {} values",
                p.head_dim
            ),
        ));
    }
    let rope_scaling = match &p.rope_scaling {
        None => RopeScaling::None,
        Some(GgufRopeScaling::Linear { factor }) => {
            crate::blocks::rope::rope_factor_in_range(*factor).map_err(|why| {
                refuse("rope.scaling.factor", factor.to_string(), &why.to_string())
            })?;
            RopeScaling::Linear { factor: *factor }
        }
        Some(other) => return Err(Error::from(crate::InputError::GgufMetadata {
            origin: origin.to_string(),
            problem: GgufMetadataProblem::RopeScaling {
                scaling: format!("{other:?}"),
                runs:
                    "; the Qwen3-Next and Qwen3.5 hybrids run default and linear rotary embeddings",
            },
        })),
    };
    let ffn_max = p.hidden_size.saturating_mul(64);
    let (router, moe, shared, sparse_layers) = if spec.routing == Routing::Dense {
        size("feed_forward_length", Some(p.intermediate_size), ffn_max)?;
        let none = RouterSettings {
            experts: 0,
            top_k: 1,
            norm_topk_prob: true,
        };
        (none, 0, 0, vec![false; layers])
    } else {
        let experts = p.experts.as_ref().ok_or_else(|| {
            refuse(
                "expert_count",
                "missing".to_string(),
                &format!("a {arch} file routes to experts"),
            )
        })?;
        let moe = size(
            "expert_feed_forward_length",
            experts.feed_forward_length,
            ffn_max,
        )?;
        let shared = size(
            "expert_shared_feed_forward_length",
            x.expert_shared_feed_forward_length,
            ffn_max,
        )?;
        let sparse = match spec.routing {
            // Every layer routes: a layer without its router is a missing tensor.
            Routing::Every => vec![true; layers],
            _ => experts.layers.clone(),
        };
        let router = RouterSettings {
            experts: experts.count,
            top_k: experts.used,
            norm_topk_prob: true,
        };
        (router, moe, shared, sparse)
    };
    Ok(HybridConfig {
        family: spec.family,
        model_type: spec.model_type,
        layout: spec.layout,
        vocab_size: p.vocab_size,
        hidden_size: p.hidden_size,
        intermediate_size: p.intermediate_size,
        num_hidden_layers: layers,
        num_attention_heads: p.num_attention_heads,
        num_key_value_heads: p.num_key_value_heads,
        head_dim: p.head_dim,
        rotary_dim,
        max_position_embeddings: p.max_position_embeddings,
        rms_norm_eps: p.rms_norm_eps,
        rope_theta: p.rope_theta,
        rope_scaling,
        tie_word_embeddings: p.tie_word_embeddings,
        attention_bias: false,
        full_layers,
        linear: LinearShape {
            key_heads,
            value_heads,
            key_dim,
            value_dim: inner / value_heads,
            conv_kernel,
        },
        router,
        moe_intermediate_size: moe,
        shared_expert_intermediate_size: shared,
        sparse_layers,
        vision_tower: false,
        gguf: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::config::ConfigFile;
    use std::path::Path;

    fn read(text: &str) -> Result<HybridConfig, String> {
        let file = ConfigFile::parse(text, Path::new("config.json")).unwrap();
        HybridConfig::read(&file, &SPEC).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_are_qwen3_next_80b_s() {
        let c = read("{}").unwrap();
        assert_eq!(
            (c.num_attention_heads, c.num_key_value_heads, c.head_dim),
            (16, 2, 256)
        );
        assert_eq!(c.rotary_dim, 64);
        assert_eq!(&c.full_layers[..4], &[false, false, false, true]);
        assert_eq!(c.architecture().layers, 12);
        assert_eq!((c.router.experts, c.router.top_k), (512, 10));
        assert_eq!((c.linear.key_heads, c.linear.value_heads), (16, 32));
    }

    #[test]
    fn layer_types_and_interval_pick_the_full_layers() {
        let c = read(r#"{"num_hidden_layers": 4, "full_attention_interval": 2}"#).unwrap();
        assert_eq!(c.full_layer_numbers(), [1, 3]);
        let c = read(
            r#"{"num_hidden_layers": 2, "layer_types": ["full_attention", "linear_attention"]}"#,
        )
        .unwrap();
        assert_eq!(c.full_layer_numbers(), [0]);
        let err =
            read(r#"{"num_hidden_layers": 1, "layer_types": ["sliding_attention"]}"#).unwrap_err();
        assert!(err.contains("layer_types") && !err.contains('\n'), "{err}");
        let err = read(r#"{"linear_num_key_heads": 3, "linear_num_value_heads": 4}"#).unwrap_err();
        assert!(err.contains("linear_num_value_heads"), "{err}");
    }
}
