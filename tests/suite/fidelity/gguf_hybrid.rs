//! GGUF files of DeepSeek-V2/V3 (llama.cpp's `deepseek2`): latent attention under llama.cpp's
//! names (`attn_q_a`/`attn_q_b` or `attn_q`, `attn_kv_a_mqa`, and `attn_kv_b` whole or split into
//! `attn_k_b`/`attn_v_b` as the current converter writes it), shared experts (`ffn_*_shexp`), the
//! V3 router's bias (`exp_probs_b`), and the routed experts merged (`ffn_*_exps`), each expert a
//! slice kept in its block format, through `Model::from_gguf`.
//!
//! Every file, F32 and Q8_0 (and Q6_K on a 256-wide random V3, since K-quant rows are 256
//! values), is held to transformers run on the weights gguf-py dequantises from
//! that file (`tests/reference/make_gguf_hybrid.py`, `gguf-hybrid.{json,safetensors}`), as the
//! mixture-of-experts GGUF files are (`gguf_moe::check`: attention at every layer and head within
//! 1e-5, the chosen experts identical and in the same order, their weights and every expert's
//! score within 1e-5, logits within 1e-4, the same greedy generation). The F32 copies of V2 and
//! V2-Lite are also held to everything their safetensors are (`gguf_moe::check_f32`); V3's file
//! cannot state transformers' YaRN `mscale` (see the script), so its references are its own.
//!
//! Qwen3-Next (`qwen3next`): the gated delta layers' maps as llama.cpp's converter stores them
//! (`attn_qkv`/`attn_gate`, `ssm_ba`, `ssm_conv1d`, `ssm_a`, `ssm_dt`, `ssm_norm`, `ssm_out`),
//! norms stored as 1 + w, the shared expert and its gate (`ffn_*_shexp`, `ffn_gate_inp_shexp`),
//! held the same way (its F32 file also to the safetensors fixture's references and token
//! mixing: `fidelity::qwen3_next`).
//!
//! Qwen3.5 and Qwen3.5-MoE (`qwen35`, `qwen35moe`; `tests/reference/make_gguf_qwen3_5.py`,
//! `gguf-qwen3_5.{json,safetensors}`): Qwen3.5's four plain input maps (`attn_qkv`, `attn_gate`,
//! `ssm_beta`, `ssm_alpha`), the value heads in the converter's tiled order (2 key heads, 4 value
//! heads), which layers are recurrent from `attention.recurrent_layers`, the vision-language
//! checkpoint's language model alone; held the same way (no routers in Qwen3.5's), their F32
//! files also to the safetensors fixtures' references, and their token mixing (matrix, rule
//! output and values, heads in transformers' order) to the safetensors models' within 1e-5.
//!
//! `cargo test --release --test suite fidelity::gguf_hybrid -- --nocapture` prints each gap.

use candle_core::quantized::gguf_file::Value;

use super::gguf_moe::{check, check_f32, load_edited, load_edited_keeping, set};
use super::qwen3_next::{
    gguf_model, gguf_token_mixing_equals_the_safetensors_one, model_matches_hf,
    model_mixing_reproduces_hf,
};

#[test]
fn deepseek_v2_lite_gguf_with_one_attn_q_and_attn_kv_b_matches_transformers() {
    check_f32("tiny-deepseek_v2_lite.F32.gguf", "tiny-deepseek_v2_lite");
    check("gguf-hybrid", &["tiny-deepseek_v2_lite."]);
}

#[test]
fn deepseek_v2_gguf_with_low_rank_queries_and_expert_groups_matches_transformers() {
    check_f32("tiny-deepseek_v2.F32.gguf", "tiny-deepseek_v2");
    check("gguf-hybrid", &["tiny-deepseek_v2."]);
}

#[test]
fn deepseek_v3_gguf_with_split_kv_b_sigmoid_router_and_yarn_matches_transformers() {
    check("gguf-hybrid", &["tiny-deepseek_v3."]);
}

#[test]
fn deepseek_v3_gguf_in_q6_k_matches_transformers() {
    // K-quant rows are 256 values: a 256-wide random V3, its experts' gate/up maps and every
    // attention map but attn_k_b in Q6_K.
    use attnviz::model::gguf::GgufFile;
    let path = super::reference::repo().join("tests/fixtures/gguf/wide-deepseek_v3.Q6_K.gguf");
    let file = super::reference::ok(GgufFile::open(&path), "wide-deepseek_v3.Q6_K.gguf");
    for (name, dtype) in [
        ("blk.0.ffn_gate_exps.weight", "Q6_K"),
        ("blk.0.attn_q_b.weight", "Q6_K"),
        ("blk.0.attn_v_b.weight", "Q6_K"),
        ("blk.0.ffn_down_exps.weight", "Q8_0"),
    ] {
        assert_eq!(
            file.tensor_info(name).map(|t| t.dtype),
            Some(dtype),
            "{name}"
        );
    }
    check("gguf-hybrid", &["wide-deepseek_v3."]);
}

#[test]
fn deepseek_gguf_that_cannot_be_run_is_one_clear_line() {
    // The rewrite itself keeps the file usable, so each refusal below is its edit's.
    assert_eq!(load_edited("tiny-deepseek_v3.Q8_0.gguf", |_| {}), "");
    type Edit = fn(&mut Vec<(String, Value)>);
    let cases: [(Edit, &[&str]); 5] = [
        (
            |md| set(md, "deepseek2.attention.kv_lora_rank", Value::U32(0)),
            &["deepseek2.attention.kv_lora_rank is 0", "latent"],
        ),
        (
            |md| md.retain(|(k, _)| k != "deepseek2.attention.kv_lora_rank"),
            &["deepseek2.attention.kv_lora_rank is missing"],
        ),
        (
            // A rank other than the one stored: the tensor's shape says so.
            |md| set(md, "deepseek2.attention.q_lora_rank", Value::U32(32)),
            &["q_a_proj.weight has shape [24, 64], expected [32, 64]"],
        ),
        (
            |md| set(md, "deepseek2.expert_group_used_count", Value::U32(5)),
            &["deepseek2.expert_group_used_count is 5", "4 groups"],
        ),
        (
            |md| set(md, "deepseek2.expert_gating_func", Value::U32(7)),
            &[
                "deepseek2.expert_gating_func is 7",
                "softmax (1) or sigmoid (2)",
            ],
        ),
    ];
    for (edit, says) in cases {
        let err = load_edited("tiny-deepseek_v3.Q8_0.gguf", edit);
        assert!(!err.is_empty(), "loaded");
        assert!(!err.contains('\n'), "{err}");
        for s in says {
            assert!(err.contains(s), "expected `{s}` in: {err}");
        }
    }
    // A missing tensor is named by transformers' name.
    let err = load_edited_keeping(
        "tiny-deepseek_v3.Q8_0.gguf",
        |_| {},
        |n| n != "blk.1.exp_probs_b.bias",
    );
    assert!(!err.contains('\n'), "{err}");
    assert!(
        err.contains("layers.1.mlp.gate.e_score_correction_bias"),
        "{err}"
    );
    let err = load_edited_keeping(
        "tiny-deepseek_v3.Q8_0.gguf",
        |_| {},
        |n| n != "blk.2.attn_v_b.weight",
    );
    assert!(!err.contains('\n'), "{err}");
    assert!(err.contains("v_b_proj"), "{err}");
}

#[test]
fn qwen3_next_gguf_matches_transformers_on_its_weights() {
    check("gguf-hybrid", &["tiny-qwen3_next."]);
}

#[test]
fn qwen3_next_gguf_that_cannot_be_run_is_one_clear_line() {
    assert_eq!(load_edited("tiny-qwen3_next.Q8_0.gguf", |_| {}), "");
    type Edit = fn(&mut Vec<(String, Value)>);
    let cases: [(Edit, &[&str]); 3] = [
        (
            |md| set(md, "qwen3next.ssm.time_step_rank", Value::U32(3)),
            &[
                "qwen3next.ssm.time_step_rank is 3",
                "multiple of the 2 key heads",
            ],
        ),
        (
            |md| md.retain(|(k, _)| k != "qwen3next.ssm.conv_kernel"),
            &["qwen3next.ssm.conv_kernel is missing"],
        ),
        (
            |md| set(md, "qwen3next.full_attention_interval", Value::U32(0)),
            &["qwen3next.full_attention_interval is 0"],
        ),
    ];
    for (edit, says) in cases {
        let err = load_edited("tiny-qwen3_next.Q8_0.gguf", edit);
        assert!(!err.is_empty(), "loaded");
        assert!(!err.contains('\n'), "{err}");
        for s in says {
            assert!(err.contains(s), "expected `{s}` in: {err}");
        }
    }
    let err = load_edited_keeping("tiny-qwen3_next.Q8_0.gguf", |_| {}, |n| n != "blk.2.ssm_a");
    assert!(!err.contains('\n'), "{err}");
    assert!(err.contains("layers.2.linear_attn.ssm_a"), "{err}");
}

#[test]
fn qwen3_5_gguf_matches_transformers_on_its_weights() {
    check("gguf-qwen3_5", &["tiny-qwen3_5."]);
}

#[test]
fn qwen3_5_moe_gguf_matches_transformers_on_its_weights() {
    check("gguf-qwen3_5", &["tiny-qwen3_5_moe."]);
}

/// The F32 copies against the safetensors fixtures' transformers references (every layer and
/// head, the hidden state, every position's logits, the routers, the gated delta layers'
/// values and recurrence), and their token mixing against the safetensors models'.
#[test]
fn qwen3_5_f32_gguf_matches_the_safetensors_model() {
    for label in ["tiny-qwen3_5", "tiny-qwen3_5_moe"] {
        let model = gguf_model(label);
        model_matches_hf(label, &model);
        model_mixing_reproduces_hf(label, &model);
        gguf_token_mixing_equals_the_safetensors_one(label);
    }
}

#[test]
fn qwen3_5_gguf_that_cannot_be_run_is_one_clear_line() {
    assert_eq!(load_edited("tiny-qwen3_5.Q8_0.gguf", |_| {}), "");
    assert_eq!(load_edited("tiny-qwen3_5_moe.Q8_0.gguf", |_| {}), "");
    type Edit = fn(&mut Vec<(String, Value)>);
    let cases: [(&str, Edit, &[&str]); 5] = [
        (
            "tiny-qwen3_5.Q8_0.gguf",
            |md| md.retain(|(k, _)| k != "qwen35.ssm.group_count"),
            &["qwen35.ssm.group_count is missing"],
        ),
        (
            "tiny-qwen3_5.Q8_0.gguf",
            |md| set(md, "qwen35.ssm.time_step_rank", Value::U32(3)),
            &[
                "qwen35.ssm.time_step_rank is 3",
                "multiple of the 2 key heads",
            ],
        ),
        (
            "tiny-qwen3_5.Q8_0.gguf",
            |md| {
                let three = vec![Value::Bool(true); 3];
                set(md, "qwen35.attention.recurrent_layers", Value::Array(three))
            },
            &["qwen35.attention.recurrent_layers", "each of the 4 layers"],
        ),
        (
            "tiny-qwen3_5.Q8_0.gguf",
            |md| md.retain(|(k, _)| k != "qwen35.feed_forward_length"),
            &["qwen35.feed_forward_length is missing"],
        ),
        (
            "tiny-qwen3_5_moe.Q8_0.gguf",
            |md| md.retain(|(k, _)| k != "qwen35moe.expert_shared_feed_forward_length"),
            &["qwen35moe.expert_shared_feed_forward_length is missing"],
        ),
    ];
    for (file, edit, says) in cases {
        let err = load_edited(file, edit);
        assert!(!err.is_empty(), "{file}: loaded");
        assert!(!err.contains('\n'), "{err}");
        for s in says {
            assert!(err.contains(s), "expected `{s}` in: {err}");
        }
    }
    // A missing tensor is named by transformers' name.
    for (file, tensor, says) in [
        (
            "tiny-qwen3_5.Q8_0.gguf",
            "blk.0.ssm_beta.weight",
            "layers.0.linear_attn.in_proj_b",
        ),
        (
            "tiny-qwen3_5.Q8_0.gguf",
            "blk.2.ssm_a",
            "layers.2.linear_attn.ssm_a",
        ),
        (
            "tiny-qwen3_5_moe.Q8_0.gguf",
            "blk.3.ffn_gate_inp.weight",
            "layers.3.mlp.gate",
        ),
    ] {
        let err = load_edited_keeping(file, |_| {}, |n| n != tensor);
        assert!(!err.is_empty(), "{file} without {tensor}: loaded");
        assert!(!err.contains('\n'), "{err}");
        assert!(err.contains(says), "expected `{says}` in: {err}");
    }
}
