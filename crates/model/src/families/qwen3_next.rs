//! Qwen3-Next (`qwen3_next`): the hybrid decoder of [`crate::blocks::hybrid`] with
//! Qwen3-Next's config defaults (`Qwen3NextConfig`: the 80B-A3B's shape), its gated delta
//! projections grouped per key head (`in_proj_qkvz`, `in_proj_ba`) and its routing rule
//! (`decoder_sparse_step`, `mlp_only_layers`, `norm_topk_prob`). Mirrors transformers 5's
//! `models/qwen3_next/modeling_qwen3_next.py`. Checkpoints are `Qwen3NextForCausalLM`'s
//! (`model.` prefix, `lm_head.weight` outside it).

use crate::blocks::family::{Family, Quirks};
use crate::blocks::gated_delta::DeltaLayout;
use crate::blocks::hybrid::{HybridConfig, HybridDefaults, HybridSpec, Routing};
use crate::formats::source::TOKENIZERS_WITH_SETTINGS;
use crate::formats::weights::Anchor;

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
