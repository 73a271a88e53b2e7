//! Qwen3.5 (`qwen3_5`) and Qwen3.5-MoE (`qwen3_5_moe`): the hybrid decoder of
//! [`crate::blocks::hybrid`], as Qwen3-Next's but for what transformers 5's
//! `models/qwen3_5/modeling_qwen3_5.py` and `models/qwen3_5_moe/modeling_qwen3_5_moe.py` change:
//!
//! - the gated delta layers' input projections are four plain maps (`in_proj_qkv`, `in_proj_z`,
//!   `in_proj_b`, `in_proj_a`), not Qwen3-Next's two grouped per key head;
//! - Qwen3.5 has a dense gated MLP in every layer (no experts); Qwen3.5-MoE routes every layer
//!   (no `decoder_sparse_step`, no `mlp_only_layers`) and always renormalises the top-k weights;
//! - the rotary embedding is multimodal (`mrope_section`, interleaved), which for text gives
//!   every section the same position: the plain (partial) rotary embedding;
//! - the defaults are `Qwen3_5TextConfig`'s and `Qwen3_5MoeTextConfig`'s;
//! - checkpoints are a causal LM's (`Qwen3_5ForCausalLM`: `model.`, config fields at the top,
//!   `model_type` `qwen3_5_text`) or the vision-language model's
//!   (`Qwen3_5ForConditionalGeneration`: `model.language_model.`, `model.visual.`, the text
//!   model's fields in `text_config`, `tie_word_embeddings` the outer config's). Of the latter
//!   the language model is read, for text; the vision tower is not run, so images are refused.
//!
//! Norms, the gated full attention, the gated delta rule and the gated RMSNorm are Qwen3-Next's.
//!
//! GGUF files of llama.cpp's `qwen35` and `qwen35moe` are read as Qwen3-Next's are
//! ([`crate::families::qwen3_next::from_gguf_as`]): the converter (`Qwen3_5TextModel`,
//! `Qwen3_5MoeTextModel`) writes the language model only, the four input maps as `attn_qkv`,
//! `attn_gate`, `ssm_beta` and `ssm_alpha`, which layers are recurrent as
//! `attention.recurrent_layers`, and, with fewer key heads than value heads, the value heads in
//! its tiled order (the gated delta layer reads them so: [`crate::blocks::gated_delta`]).

use crate::blocks::family::{Family, GgufReader, Quirks};
use crate::blocks::gated_delta::DeltaLayout;
use crate::blocks::hybrid::{HybridConfig, HybridDefaults, HybridSpec, Routing};
use crate::formats::config::{ConfigError, ConfigFile};
use crate::formats::source::TOKENIZERS_WITH_SETTINGS;
use crate::formats::weights::Anchor;

/// Qwen3.5 in the family registry.
pub static QWEN3_5: Family = Family {
    name: "Qwen3.5",
    model_types: &["qwen3_5", "qwen3_5_text"],
    class_prefixes: &["Qwen3_5For", "Qwen3_5Text"],
    anchor: Anchor {
        tensor: "embed_tokens.weight",
        family: "Qwen3.5",
        prefix: "model.language_model",
    },
    config: |file| Ok(Box::new(read(file, &SPEC)?)),
    quirks: Quirks {
        tokenizer_files: TOKENIZERS_WITH_SETTINGS,
        gguf: Some(GgufReader {
            architectures: &["qwen35"],
            config: |p, origin| {
                Ok(Box::new(crate::families::qwen3_next::from_gguf_as(
                    p, origin, &SPEC,
                )?))
            },
        }),
        ..Quirks::NONE
    },
};

/// Qwen3.5-MoE in the family registry.
pub static QWEN3_5_MOE: Family = Family {
    name: "Qwen3.5-MoE",
    model_types: &["qwen3_5_moe", "qwen3_5_moe_text"],
    class_prefixes: &["Qwen3_5Moe"],
    anchor: Anchor {
        tensor: "embed_tokens.weight",
        family: "Qwen3.5-MoE",
        prefix: "model.language_model",
    },
    config: |file| Ok(Box::new(read(file, &MOE_SPEC)?)),
    quirks: Quirks {
        tokenizer_files: TOKENIZERS_WITH_SETTINGS,
        gguf: Some(GgufReader {
            architectures: &["qwen35moe"],
            config: |p, origin| {
                Ok(Box::new(crate::families::qwen3_next::from_gguf_as(
                    p, origin, &MOE_SPEC,
                )?))
            },
        }),
        ..Quirks::NONE
    },
};

/// Qwen3.5's particulars, with `Qwen3_5TextConfig`'s defaults (the 9B's shape).
pub static SPEC: HybridSpec = HybridSpec {
    family: "Qwen3.5",
    model_type: "qwen3_5",
    defaults: HybridDefaults {
        vocab_size: 248_320,
        hidden_size: 4096,
        intermediate_size: 12_288,
        num_hidden_layers: 32,
        num_key_value_heads: 4,
        num_experts: 0,
        num_experts_per_tok: 1,
    },
    layout: DeltaLayout::Split,
    routing: Routing::Dense,
};

/// Qwen3.5-MoE's particulars, with `Qwen3_5MoeTextConfig`'s defaults (the 35B-A3B's shape).
pub static MOE_SPEC: HybridSpec = HybridSpec {
    family: "Qwen3.5-MoE",
    model_type: "qwen3_5_moe",
    defaults: HybridDefaults {
        vocab_size: 248_320,
        hidden_size: 2048,
        // Qwen3NextConfig's, inherited; no layer is dense.
        intermediate_size: 5632,
        num_hidden_layers: 40,
        num_key_value_heads: 2,
        num_experts: 256,
        num_experts_per_tok: 8,
    },
    layout: DeltaLayout::Split,
    routing: Routing::Every,
};

/// Read a Qwen3.5 config.json: a causal LM's (the text model's fields at the top), or the
/// vision-language model's (`model_type` `qwen3_5`/`qwen3_5_moe`), whose `text_config`
/// (transformers' defaults where it is absent) describes the language model and whose own
/// `tie_word_embeddings` (default false) says whether its head is the embedding matrix.
pub fn read(file: &ConfigFile, spec: &HybridSpec) -> Result<HybridConfig, ConfigError> {
    if file.model_type()?.as_deref() != Some(spec.model_type) {
        return HybridConfig::read(file, spec);
    }
    let text = match file.section("text_config")? {
        Some(text) => text,
        None => ConfigFile::parse("{}", file.path())?,
    };
    let mut config = HybridConfig::read(&text, spec)?;
    // Qwen3_5ForConditionalGeneration ties as its own config says.
    config.tie_word_embeddings = file.boolean("tie_word_embeddings")?.unwrap_or(false);
    config.vision_tower = true;
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn read_as(text: &str, spec: &HybridSpec) -> Result<HybridConfig, String> {
        let file = ConfigFile::parse(text, Path::new("config.json")).unwrap();
        read(&file, spec).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_are_qwen3_5_9b_s_and_35b_a3b_s() {
        let c = read_as("{}", &SPEC).unwrap();
        assert_eq!((c.hidden_size, c.num_hidden_layers), (4096, 32));
        assert_eq!((c.num_key_value_heads, c.rotary_dim), (4, 64));
        assert_eq!(c.full_layer_numbers(), [3, 7, 11, 15, 19, 23, 27, 31]);
        assert_eq!(c.router.experts, 0);
        assert!(c.sparse_layers.iter().all(|&s| !s));
        let m = read_as("{}", &MOE_SPEC).unwrap();
        assert_eq!((m.hidden_size, m.num_hidden_layers), (2048, 40));
        assert_eq!((m.router.experts, m.router.top_k), (256, 8));
        assert!(m.router.norm_topk_prob && m.sparse_layers.iter().all(|&s| s));
        assert_eq!(m.layout, DeltaLayout::Split);
    }

    #[test]
    fn the_text_config_of_a_vision_language_checkpoint_is_read() {
        let c = read_as(
            r#"{"model_type": "qwen3_5", "tie_word_embeddings": true,
                "text_config": {"model_type": "qwen3_5_text", "hidden_size": 64,
                                "num_hidden_layers": 2, "tie_word_embeddings": false,
                                "layer_types": ["linear_attention", "full_attention"],
                                "rope_parameters": {"rope_type": "default", "rope_theta": 1e7,
                                    "partial_rotary_factor": 0.25, "mrope_section": [11, 11, 10],
                                    "mrope_interleaved": true}}}"#,
            &SPEC,
        )
        .unwrap();
        assert_eq!((c.hidden_size, c.full_layer_numbers()), (64, vec![1]));
        assert!(c.tie_word_embeddings && c.vision_tower);
        assert_eq!(c.rope_theta, 1e7);
        assert_eq!(c.architecture().model_type, "qwen3_5");
        // A causal LM's config: the fields at the top.
        let c = read_as(
            r#"{"model_type": "qwen3_5_text", "hidden_size": 64, "num_hidden_layers": 4}"#,
            &SPEC,
        )
        .unwrap();
        assert_eq!((c.hidden_size, c.full_layer_numbers()), (64, vec![3]));
    }

    #[test]
    fn hostile_configs_are_refused_in_one_line() {
        for (text, field) in [
            (
                r#"{"model_type": "qwen3_5", "text_config": {"num_hidden_layers": 2,
                    "layer_types": ["full_attention"]}}"#,
                "layer_types",
            ),
            (
                r#"{"model_type": "qwen3_5", "text_config": {"num_hidden_layers": 1,
                    "layer_types": ["mamba"]}}"#,
                "layer_types",
            ),
            (
                r#"{"model_type": "qwen3_5", "text_config": 3}"#,
                "text_config",
            ),
            (
                r#"{"linear_num_key_heads": 3, "linear_num_value_heads": 4}"#,
                "linear_num_value_heads",
            ),
            (r#"{"head_dim": 4}"#, "partial_rotary_factor"),
            (
                r#"{"linear_conv_kernel_dim": 100000}"#,
                "linear_conv_kernel_dim",
            ),
            (r#"{"num_hidden_layers": 100000000}"#, "num_hidden_layers"),
        ] {
            let err = read_as(text, &SPEC).unwrap_err();
            assert!(err.contains(field) && !err.contains('\n'), "{text}: {err}");
        }
        for (text, field) in [
            (r#"{"num_experts": 0}"#, "num_experts"),
            (
                r#"{"num_experts": 4, "num_experts_per_tok": 5}"#,
                "num_experts_per_tok",
            ),
            (r#"{"num_experts": 100000}"#, "num_experts"),
        ] {
            let err = read_as(text, &MOE_SPEC).unwrap_err();
            assert!(err.contains(field) && !err.contains('\n'), "{text}: {err}");
        }
    }
}
