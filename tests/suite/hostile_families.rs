//! Hostile config.json values for every family: each size that decides an allocation is checked
//! against the checkpoint's tensors (or bounded, where no tensor backs it) before anything is
//! allocated, so a huge value is one line of error, exit status 1, bounded time and memory, and
//! nothing written.

use std::path::Path;
use std::process::Command;

use crate::fidelity::reference::fixture;

/// Copy a fixture folder to `to`, with config.json's fields changed by `edit`.
fn variant(folder: &str, to: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(fixture(folder)).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
    let path = to.join("config.json");
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut config);
    std::fs::write(&path, config.to_string()).unwrap();
}

/// attnviz on `model`, limited to 1 GiB of address space and 60 s: refused with one line that
/// names `field`, and no output file.
fn assert_refused(model: &Path, field: &str) {
    let out_dir = tempfile::tempdir().unwrap();
    let json = out_dir.path().join("a.json");
    let out = Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 1048576; exec timeout 60 \"$@\"")
        .arg("sh")
        .arg(env!("CARGO_BIN_EXE_attnviz"))
        .arg("-m")
        .arg(model)
        .arg("the cat sat on the mat")
        .arg("--json")
        .arg(&json)
        .env("HF_HUB_OFFLINE", "1")
        .env_remove("ATTNVIZ_MODEL")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}: {err}", model.display());
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "not one line: {err}");
    // The folder's name carries the field: look for it in the message without the path.
    let message = err.replace(&model.display().to_string(), "");
    assert!(
        message.starts_with("error: ") && message.contains(field),
        "{field}: {err}"
    );
    assert!(!json.exists(), "an output was written: {err}");
}

fn huge_values_are_refused(folder: &str, heads_field: &str, fields: &[&str]) {
    let tmp = tempfile::tempdir().unwrap();
    for &field in fields {
        for value in [1_000_000_000u64, 1_000_000_000_000_000_000] {
            let dir = tmp.path().join(format!("{field}-{value}"));
            variant(folder, &dir, |c| {
                c[field] = value.into();
                // Keep the hidden size divisible by the heads, so the size itself is checked.
                c[heads_field] = 1.into();
            });
            assert_refused(&dir, field);
        }
    }
}

#[test]
fn roberta_sizes_are_checked_against_the_checkpoint() {
    huge_values_are_refused(
        "tiny-roberta-mlm",
        "num_attention_heads",
        &[
            "hidden_size",
            "intermediate_size",
            "vocab_size",
            "num_hidden_layers",
            "max_position_embeddings",
            "type_vocab_size",
        ],
    );
}

#[test]
fn distilbert_sizes_are_checked_against_the_checkpoint() {
    huge_values_are_refused(
        "tiny-distilbert",
        "n_heads",
        &[
            "dim",
            "hidden_dim",
            "vocab_size",
            "n_layers",
            "max_position_embeddings",
        ],
    );
}

#[test]
fn albert_sizes_are_checked_against_the_checkpoint_or_bounded() {
    huge_values_are_refused(
        "tiny-albert-groups",
        "num_attention_heads",
        &[
            "embedding_size",
            "hidden_size",
            "intermediate_size",
            "vocab_size",
            "num_hidden_layers",
            "num_hidden_groups",
            "inner_group_num",
            "max_position_embeddings",
            "type_vocab_size",
        ],
    );
}

#[test]
fn electra_sizes_are_checked_against_the_checkpoint() {
    huge_values_are_refused(
        "tiny-electra-mlm",
        "num_attention_heads",
        &[
            "embedding_size",
            "hidden_size",
            "intermediate_size",
            "vocab_size",
            "num_hidden_layers",
            "max_position_embeddings",
        ],
    );
}

#[test]
fn gpt2_sizes_are_checked_against_the_checkpoint() {
    huge_values_are_refused(
        "tiny-gpt2",
        "n_head",
        &["n_embd", "n_inner", "vocab_size", "n_layer", "n_positions"],
    );
}

#[test]
fn llama_sizes_are_checked_against_the_checkpoint_or_bounded() {
    // head_dim is explicit in tiny-llama, so a huge head count is checked against q_proj/k_proj
    // (with one key/value head, any head count divides).
    huge_values_are_refused(
        "tiny-llama",
        "num_key_value_heads",
        &[
            "hidden_size",
            "intermediate_size",
            "vocab_size",
            "num_hidden_layers",
            "num_attention_heads",
            "max_position_embeddings",
            "head_dim",
        ],
    );
    // Too many key/value heads for the query heads.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("kv");
    variant("tiny-qwen2", &dir, |c| {
        c["num_key_value_heads"] = 1_000_000_000u64.into();
    });
    assert_refused(&dir, "num_key_value_heads");
}

#[test]
fn qwen3_gemma_and_phi3_sizes_are_checked_against_the_checkpoint_or_bounded() {
    let fields = [
        "hidden_size",
        "intermediate_size",
        "vocab_size",
        "num_hidden_layers",
        "num_attention_heads",
        "max_position_embeddings",
        "head_dim",
    ];
    for folder in ["tiny-qwen3", "tiny-gemma2", "tiny-gemma3"] {
        huge_values_are_refused(folder, "num_key_value_heads", &fields);
    }
    // Phi-3's head size follows from hidden_size / heads unless stated, and its fused qkv_proj
    // has the key/value heads in its shape: a field no tensor depends on is set instead.
    huge_values_are_refused("tiny-phi3", "resid_pdrop", &fields[..6]);
}

#[test]
fn bart_mbart_and_marian_sizes_are_checked_against_the_checkpoint_or_bounded() {
    let fields = [
        "d_model",
        "encoder_ffn_dim",
        "decoder_ffn_dim",
        "vocab_size",
        "encoder_layers",
        "decoder_layers",
        "decoder_attention_heads",
        "max_position_embeddings",
    ];
    huge_values_are_refused("tiny-bart", "encoder_attention_heads", &fields);
    huge_values_are_refused("tiny-mbart", "encoder_attention_heads", &fields);
    // Marian's sinusoidal table has no tensor behind it: its size is bounded.
    huge_values_are_refused("tiny-marian", "encoder_attention_heads", &fields);
}

#[test]
fn t5_sizes_are_checked_against_the_checkpoint_or_bounded() {
    for folder in ["tiny-t5", "tiny-t5-v1_1"] {
        // No divisibility to keep: the heads are checked against relative_attention_bias.
        huge_values_are_refused(
            folder,
            "dropout_rate",
            &[
                "d_model",
                "d_kv",
                "d_ff",
                "vocab_size",
                "num_layers",
                "num_decoder_layers",
                "relative_attention_num_buckets",
            ],
        );
    }
}

#[test]
fn deepseek_sizes_are_checked_against_the_checkpoint_or_bounded() {
    // DeepSeek has no key/value head count of its own (every head expands from the latent): a
    // field no tensor depends on is set in place of the heads.
    huge_values_are_refused(
        "tiny-deepseek_v3",
        "attention_dropout",
        &[
            "hidden_size",
            "intermediate_size",
            "vocab_size",
            "num_hidden_layers",
            "max_position_embeddings",
            "q_lora_rank",
            "kv_lora_rank",
            "n_routed_experts",
        ],
    );
    // Sizes that only products or sums of tensor dimensions back (heads × head sizes, the
    // experts' inner size): refused in one line, by whichever tensor shows them wrong.
    let tmp = tempfile::tempdir().unwrap();
    for field in [
        "num_attention_heads",
        "qk_nope_head_dim",
        "qk_rope_head_dim",
        "v_head_dim",
        "moe_intermediate_size",
        "n_shared_experts",
    ] {
        for value in [1_000_000_000u64, 1_000_000_000_000_000_000] {
            let dir = tmp.path().join(format!("{field}-{value}"));
            variant("tiny-deepseek_v2", &dir, |c| c[field] = value.into());
            assert_refused(&dir, "");
        }
    }
}

/// The object holding the text model's fields: `text_config` where `nested`, else the config.
fn text_of(c: &mut serde_json::Value, nested: bool) -> &mut serde_json::Value {
    if nested {
        &mut c["text_config"]
    } else {
        c
    }
}

#[test]
fn qwen3_5_sizes_and_layer_types_are_checked_against_the_checkpoint_or_bounded() {
    let tmp = tempfile::tempdir().unwrap();
    // The dense fixture is a vision-language checkpoint (the text model's fields in
    // text_config); the mixture-of-experts one a causal LM's (its fields at the top).
    for (folder, nested, own) in [
        ("tiny-qwen3_5", true, &["intermediate_size"][..]),
        (
            "tiny-qwen3_5_moe",
            false,
            &[
                "num_experts",
                "moe_intermediate_size",
                "shared_expert_intermediate_size",
            ][..],
        ),
    ] {
        // Sizes a tensor's dimension or a bound names: refused saying which.
        let named = [
            "hidden_size",
            "vocab_size",
            "num_hidden_layers",
            "max_position_embeddings",
            "linear_conv_kernel_dim",
        ];
        // Sizes only products of dimensions back: refused by whichever tensor shows them wrong.
        let shown = [
            "num_attention_heads",
            "num_key_value_heads",
            "head_dim",
            "linear_num_key_heads",
            "linear_num_value_heads",
            "linear_key_head_dim",
            "linear_value_head_dim",
        ];
        for (fields, name) in [(&named[..], true), (&shown[..], false), (own, false)] {
            for &field in fields {
                for value in [1_000_000_000u64, 1_000_000_000_000_000_000] {
                    let dir = tmp.path().join(format!("{folder}-{field}-{value}"));
                    variant(folder, &dir, |c| text_of(c, nested)[field] = value.into());
                    assert_refused(&dir, if name { field } else { "" });
                }
            }
        }
        // layer_types of the wrong length, or naming a layer kind the hybrids do not have.
        for (i, types) in [
            serde_json::json!(["full_attention"]),
            serde_json::json!([
                "full_attention",
                "sliding_attention",
                "linear_attention",
                "full_attention"
            ]),
            serde_json::json!("full_attention"),
        ]
        .into_iter()
        .enumerate()
        {
            let dir = tmp.path().join(format!("{folder}-layer_types-{i}"));
            variant(folder, &dir, |c| text_of(c, nested)["layer_types"] = types);
            assert_refused(&dir, "layer_types");
        }
    }
}
