//! Each problem displays as the sentence the library wrote before it held facts: the
//! expected text of each case is the old call site's `format!` string (quoted beside it),
//! filled with the same example values.

use std::path::Path;

use serde_json::json;

use super::*;
use crate::formats::config::{ConfigError, ConfigFile};

fn rope_factor(factor: f64) -> RopeFactorError {
    crate::kernels::rotary::rope_factor_in_range(factor).unwrap_err()
}

#[test]
fn problems_read_as_the_old_sentences() {
    let not_json = serde_json::from_str::<serde_json::Value>("{x").unwrap_err();
    let serde_words = not_json.to_string();
    let (field, v) = ("hidden_size", json!(-32));
    let (eps, ratio, partial, theta) = (0.0, 65.5, 1.5, -1.0);
    let cases: Vec<(ConfigProblem, String)> = vec![
        // config.rs: format!("not valid JSON ({e})")
        (
            ConfigProblem::NotJson(not_json),
            format!("not valid JSON ({serde_words})"),
        ),
        // config.rs: "not a JSON object"
        (ConfigProblem::NotAnObject, "not a JSON object".into()),
        // clip.rs, siglip.rs: "vision_config is not an object"
        (
            ConfigProblem::FieldNotAnObject {
                field: "vision_config",
            },
            "vision_config is not an object".into(),
        ),
        // config.rs (section): format!("{field} is {other}; it must be an object")
        (
            ConfigProblem::WrongType {
                field: Field::Top("text_config"),
                value: FieldValue::Json(json!(3)),
                expected: Expected::Object,
            },
            format!("{} is {}; it must be an object", "text_config", json!(3)),
        ),
        // config.rs (count): format!("{field} is {v}; it must be a whole number such as 12")
        (
            ConfigProblem::WrongType {
                field: Field::Top(field),
                value: FieldValue::Json(json!(1.5)),
                expected: Expected::WholeNumber,
            },
            format!(
                "{field} is {}; it must be a whole number such as 12",
                json!(1.5)
            ),
        ),
        // config.rs (count): format!("{field} is {v}; it must not be negative")
        (
            ConfigProblem::WrongType {
                field: Field::Top(field),
                value: FieldValue::Json(v.clone()),
                expected: Expected::NonNegative,
            },
            format!("{field} is {v}; it must not be negative"),
        ),
        // config.rs (number): format!("{field} is {v}; it must be a number")
        (
            ConfigProblem::WrongType {
                field: Field::Top(field),
                value: FieldValue::Json(json!("x")),
                expected: Expected::Number,
            },
            format!("{field} is {}; it must be a number", json!("x")),
        ),
        // config.rs (string): format!("{field} is {v}; it must be a string")
        (
            ConfigProblem::WrongType {
                field: Field::Top("model_type"),
                value: FieldValue::Json(json!(1)),
                expected: Expected::String,
            },
            format!("{} is {}; it must be a string", "model_type", json!(1)),
        ),
        // config.rs (boolean): format!("{field} is {v}; it must be true or false")
        (
            ConfigProblem::WrongType {
                field: Field::Top("qkv_bias"),
                value: FieldValue::Json(json!("yes")),
                expected: Expected::Bool,
            },
            format!(
                "{} is {}; it must be true or false",
                "qkv_bias",
                json!("yes")
            ),
        ),
        // config.rs (strings): format!("{field} is {v}; it must be a list of names")
        (
            ConfigProblem::WrongType {
                field: Field::Top("architectures"),
                value: FieldValue::Json(json!(7)),
                expected: Expected::Names,
            },
            format!(
                "{} is {}; it must be a list of names",
                "architectures",
                json!(7)
            ),
        ),
        // config.rs (strings): format!("{field} must be a list of names")
        (
            ConfigProblem::NotNames {
                field: "architectures",
            },
            format!("{} must be a list of names", "architectures"),
        ),
        // config.rs (token_id): format!("{field} is {id}; token ids fit in 32 bits")
        (
            ConfigProblem::WrongType {
                field: Field::Top("pad_token_id"),
                value: FieldValue::Count(1 << 33),
                expected: Expected::TokenId,
            },
            format!(
                "{} is {}; token ids fit in 32 bits",
                "pad_token_id",
                1u64 << 33
            ),
        ),
        // rope.rs: format!("rope {key} is {v}; it must be a positive number")
        (
            ConfigProblem::WrongType {
                field: Field::Rope("factor"),
                value: FieldValue::Json(json!(-2)),
                expected: Expected::PositiveNumber,
            },
            format!(
                "rope {} is {}; it must be a positive number",
                "factor",
                json!(-2)
            ),
        ),
        // rope.rs: format!("{theta_key} is {t}; it must be a positive number")
        (
            ConfigProblem::WrongType {
                field: Field::Top("rope_theta"),
                value: FieldValue::Number(theta),
                expected: Expected::PositiveNumber,
            },
            format!("{} is {theta}; it must be a positive number", "rope_theta"),
        ),
        // rope.rs: format!("rope_parameters/rope_scaling is {other}; it must be an object")
        (
            ConfigProblem::WrongType {
                field: Field::Top("rope_parameters/rope_scaling"),
                value: FieldValue::Json(json!([1])),
                expected: Expected::Object,
            },
            format!(
                "rope_parameters/rope_scaling is {}; it must be an object",
                json!([1])
            ),
        ),
        // gemma.rs: format!("rope_parameters.{key} is {other}; it must be an object")
        (
            ConfigProblem::WrongType {
                field: Field::RopeParameters("full_attention"),
                value: FieldValue::Json(json!(2)),
                expected: Expected::Object,
            },
            format!(
                "rope_parameters.{} is {}; it must be an object",
                "full_attention",
                json!(2)
            ),
        ),
        // phi3.rs: format!("partial_rotary_factor is {partial}; it must be above 0 and at most 1")
        (
            ConfigProblem::WrongType {
                field: Field::Top("partial_rotary_factor"),
                value: FieldValue::Number(partial),
                expected: Expected::Between {
                    above: 0.0,
                    at_most: 1.0,
                },
            },
            format!("partial_rotary_factor is {partial}; it must be above 0 and at most 1"),
        ),
        // config.rs (epsilon): format!("{field} {eps} is not a positive number")
        (
            ConfigProblem::NotA {
                field: Field::Top("layer_norm_eps"),
                value: FieldValue::Number(eps),
                expected: Expected::PositiveNumber,
            },
            format!("{} {eps} is not a positive number", "layer_norm_eps"),
        ),
        // config.rs (activation): format!("{field} {other} is not a name")
        (
            ConfigProblem::NotA {
                field: Field::Top("hidden_act"),
                value: FieldValue::Json(json!(3)),
                expected: Expected::Name,
            },
            format!("{} {} is not a name", "hidden_act", json!(3)),
        ),
        // rope.rs: format!("rope type {other} is not a name")
        (
            ConfigProblem::NotA {
                field: Field::Rope("type"),
                value: FieldValue::Json(json!(true)),
                expected: Expected::Name,
            },
            format!("rope type {} is not a name", json!(true)),
        ),
        // vision.rs: format!("mlp_ratio {ratio} is not in (0, 64]")
        (
            ConfigProblem::NotA {
                field: Field::Top("mlp_ratio"),
                value: FieldValue::Number(ratio),
                expected: Expected::Between {
                    above: 0.0,
                    at_most: 64.0,
                },
            },
            format!("mlp_ratio {ratio} is not in (0, 64]"),
        ),
        // config.rs (positive): format!("{field} is 0"); phi3.rs: "head_dim is 0"
        (
            ConfigProblem::Zero { field: "head_dim" },
            format!("{} is 0", "head_dim"),
        ),
        // encoder.rs: "hidden_size {} is not divisible by num_attention_heads {}"
        (
            ConfigProblem::NotDivisible {
                field: "hidden_size",
                value: 10,
                by_field: "num_attention_heads",
                by: 3,
            },
            format!(
                "hidden_size {} is not divisible by num_attention_heads {}",
                10, 3
            ),
        ),
        // llama.rs: "num_attention_heads {heads} is not a multiple of num_key_value_heads {kv}"
        (
            ConfigProblem::NotMultiple {
                field: "num_attention_heads",
                value: 8,
                of_field: "num_key_value_heads",
                of: 3,
            },
            format!(
                "num_attention_heads {} is not a multiple of num_key_value_heads {}",
                8, 3
            ),
        ),
        // llama.rs: "num_hidden_layers {layers} is more than the {MAX_LAYERS} layers attnviz runs"
        (
            ConfigProblem::TooMany {
                field: "num_hidden_layers",
                value: 70_000,
                limit: Limit::Layers(65_536),
            },
            format!(
                "num_hidden_layers {} is more than the {} layers attnviz runs",
                70_000, 65_536
            ),
        ),
        // llama.rs: "max_position_embeddings {max_position_embeddings} is more than the
        // {MAX_ROTARY_POSITIONS} positions attnviz runs a rotary model for"
        (
            ConfigProblem::TooMany {
                field: "max_position_embeddings",
                value: 1 << 21,
                limit: Limit::RotaryPositions(1 << 20),
            },
            format!(
                "max_position_embeddings {} is more than the {} positions attnviz runs a \
                 rotary model for",
                1 << 21,
                1 << 20
            ),
        ),
        // gemma.rs: "max_position_embeddings {max_position_embeddings} is more than attnviz
        // runs a rotary model for"
        (
            ConfigProblem::TooMany {
                field: "max_position_embeddings",
                value: 1 << 21,
                limit: Limit::RotaryModel(1 << 20),
            },
            format!(
                "max_position_embeddings {} is more than attnviz runs a rotary model for",
                1 << 21
            ),
        ),
        // distilbert.rs: "max_position_embeddings {} is more than the
        // {MAX_COMPUTED_POSITIONS} positions a sinusoidal table is computed for"
        (
            ConfigProblem::TooMany {
                field: "max_position_embeddings",
                value: 70_000,
                limit: Limit::SinusoidalPositions(65_536),
            },
            format!(
                "max_position_embeddings {} is more than the {} positions a sinusoidal \
                 table is computed for",
                70_000, 65_536
            ),
        ),
        // dinov2.rs: "num_register_tokens {registers} is more than {MAX_REGISTERS}"
        (
            ConfigProblem::TooMany {
                field: "num_register_tokens",
                value: 300,
                limit: Limit::Number(256),
            },
            format!("num_register_tokens {} is more than {}", 300, 256),
        ),
        // albert.rs: "num_hidden_groups {} is more than num_hidden_layers {}"
        (
            ConfigProblem::TooMany {
                field: "num_hidden_groups",
                value: 5,
                limit: Limit::Field {
                    field: "num_hidden_layers",
                    value: 4,
                },
            },
            format!(
                "num_hidden_groups {} is more than num_hidden_layers {}",
                5, 4
            ),
        ),
        // t5.rs: "relative_attention_num_buckets {} is below 4"
        (
            ConfigProblem::TooFew {
                field: "relative_attention_num_buckets",
                value: 2,
                min: 4,
            },
            format!("relative_attention_num_buckets {} is below 4", 2),
        ),
        // bart.rs, t5.rs: "decoder_start_token_id {} is not below vocab_size {}"
        (
            ConfigProblem::NotBelow {
                field: "decoder_start_token_id",
                value: 100,
                limit_field: "vocab_size",
                limit: 99,
            },
            format!(
                "decoder_start_token_id {} is not below vocab_size {}",
                100, 99
            ),
        ),
        // llama.rs, gemma.rs: "layer_types has {} entries for {layers} layers"
        (
            ConfigProblem::Entries {
                field: "layer_types",
                len: 3,
                layers: 4,
            },
            format!("layer_types has {} entries for {} layers", 3, 4),
        ),
        // vision.rs: "image_size {} and patch_size {} do not make a patch grid (image_size
        // at most {MAX_IMAGE_SIDE}, patch_size at most image_size)"
        (
            ConfigProblem::PatchGrid {
                image_size: 16,
                patch_size: 32,
                max_side: 1 << 14,
            },
            format!(
                "image_size {} and patch_size {} do not make a patch grid (image_size at \
                 most {}, patch_size at most image_size)",
                16,
                32,
                1 << 14
            ),
        ),
        // roberta.rs: "pad_token_id is null; RoBERTa's positions are counted from it"
        (
            ConfigProblem::NoPaddingToken,
            "pad_token_id is null; RoBERTa's positions are counted from it".into(),
        ),
        // roberta.rs: "max_position_embeddings {} leaves no position for a token after the
        // {} rows up to the padding row (pad_token_id {padding_idx})"
        (
            ConfigProblem::NoPositionAfterPadding {
                max_position_embeddings: 2,
                pad_token_id: 1,
            },
            format!(
                "max_position_embeddings {} leaves no position for a token after the {} \
                 rows up to the padding row (pad_token_id {})",
                2,
                1 + 1,
                1
            ),
        ),
        // t5.rs: "feed_forward_proj '{proj}' is not of the form 'gated-ACT' or 'ACT' (e.g.
        // 'gated-gelu', 'relu')"
        (
            ConfigProblem::FeedForwardProj {
                proj: "a-b-c".into(),
            },
            format!(
                "feed_forward_proj '{}' is not of the form 'gated-ACT' or 'ACT' (e.g. \
                 'gated-gelu', 'relu')",
                "a-b-c"
            ),
        ),
    ];
    for (problem, old) in cases {
        assert_eq!(problem.to_string(), old, "{problem:?}");
    }
}

#[test]
fn sizes_too_large_read_as_the_old_sentences() {
    let cases: Vec<(Oversize, String)> = vec![
        // gpt2.rs: format!("n_embd {n_embd} is too large")
        (
            Oversize::Field {
                field: "n_embd",
                value: usize::MAX,
            },
            format!("n_embd {} is too large", usize::MAX),
        ),
        // llama.rs: "num_attention_heads {heads} × head_dim {head_dim} is too large"
        (
            Oversize::Product {
                field: "num_attention_heads",
                value: 3,
                by_field: "head_dim",
                by: usize::MAX,
            },
            format!(
                "num_attention_heads {} × head_dim {} is too large",
                3,
                usize::MAX
            ),
        ),
        // phi3.rs: "num_attention_heads {heads} and num_key_value_heads {kv} × head_dim
        // {head_dim} is too large"
        (
            Oversize::FusedQkv {
                heads: 4,
                kv: 2,
                head_dim: usize::MAX,
            },
            format!(
                "num_attention_heads {} and num_key_value_heads {} × head_dim {} is too \
                 large",
                4,
                2,
                usize::MAX
            ),
        ),
        // bart.rs: "max_position_embeddings {} × d_model {d_model} is too large for a
        // sinusoidal position table (at most {MAX_SINUSOIDAL_POSITIONS} rows, 2²⁸ values)"
        (
            Oversize::SinusoidalTable {
                positions: 70_000,
                d_model: 512,
                max_rows: 65_536,
            },
            format!(
                "max_position_embeddings {} × d_model {} is too large for a sinusoidal \
                 position table (at most {} rows, 2²⁸ values)",
                70_000, 512, 65_536
            ),
        ),
        // albert.rs: "num_hidden_layers {} × inner_group_num {} is more than
        // {MAX_LAYER_RUNS} layer runs"
        (
            Oversize::LayerRuns {
                layers: 600,
                inner_group_num: 2,
                max: 1024,
            },
            format!(
                "num_hidden_layers {} × inner_group_num {} is more than {} layer runs",
                600, 2, 1024
            ),
        ),
    ];
    for (size, old) in cases {
        assert_eq!(ConfigProblem::from(size).to_string(), old, "{size:?}");
    }
}

#[test]
fn rope_problems_read_as_the_old_sentences() {
    let (kind, key) = ("linear", "factor");
    let (low, high) = (4.0, 1.0);
    let (head_dim, partial, rotary_dim, hidden, heads) = (10, 0.3, 3, 40, 4);
    let factor = rope_factor(0.0);
    let cases: Vec<(RopeProblem, String)> = vec![
        // rope.rs: format!("rope type '{kind}' needs {key} in rope_parameters")
        (
            RopeProblem::Needs {
                rope_type: kind.into(),
                key,
            },
            format!("rope type '{kind}' needs {key} in rope_parameters"),
        ),
        // rope.rs: format!("rope_scaling.factor {why}")
        (
            RopeProblem::Factor(factor),
            format!("rope_scaling.factor {factor}"),
        ),
        // rope.rs: "llama3 rope scaling needs high_freq_factor ({high_freq_factor}) above
        // low_freq_factor ({low_freq_factor})"
        (
            RopeProblem::Llama3Frequencies { low, high },
            format!(
                "llama3 rope scaling needs high_freq_factor ({high}) above \
                 low_freq_factor ({low})"
            ),
        ),
        // phi3.rs: format!("longrope scaling needs {key}, a list of numbers")
        (
            RopeProblem::LongropeNeeds {
                key: "short_factor",
            },
            format!(
                "longrope scaling needs {}, a list of numbers",
                "short_factor"
            ),
        ),
        // phi3.rs: "{key} must hold {} positive numbers, half the {rotary_dim} rotated
        // values of head_dim {head_dim} (hidden_size {hidden} / num_attention_heads {heads}
        // unless head_dim is given) × partial_rotary_factor {partial}; it holds {}"
        (
            RopeProblem::LongropeFactors {
                key: "long_factor",
                len: 7,
                rotary_dim: 4,
                head_dim,
                hidden_size: hidden,
                heads,
                partial,
            },
            format!(
                "{} must hold {} positive numbers, half the {} rotated values of head_dim \
                 {head_dim} (hidden_size {hidden} / num_attention_heads {heads} unless \
                 head_dim is given) × partial_rotary_factor {partial}; it holds {}",
                "long_factor",
                4 / 2,
                4,
                7
            ),
        ),
        // phi3.rs: "head_dim {head_dim} × partial_rotary_factor {partial} = {rotary_dim}
        // rotated values; rotary embeddings rotate an even number of at least 2"
        (
            RopeProblem::RotatedValues {
                head_dim,
                partial,
                rotary_dim,
            },
            format!(
                "head_dim {head_dim} × partial_rotary_factor {partial} = {rotary_dim} \
                 rotated values; rotary embeddings rotate an even number of at least 2"
            ),
        ),
        // llama.rs: "head_dim {head_dim} is odd; rotary embeddings rotate pairs of dimensions"
        (
            RopeProblem::OddHeadDim { head_dim: 7 },
            format!(
                "head_dim {} is odd; rotary embeddings rotate pairs of dimensions",
                7
            ),
        ),
        // gemma.rs: "head_dim {head_dim} must be even and num_attention_heads × head_dim not
        // too large"
        (
            RopeProblem::HeadDim {
                head_dim: 7,
                heads: 8,
            },
            format!(
                "head_dim {} must be even and num_attention_heads × head_dim not too large",
                7
            ),
        ),
    ];
    for (problem, old) in cases {
        assert_eq!(
            ConfigProblem::from(problem.clone()).to_string(),
            old,
            "{problem:?}"
        );
    }
}

#[test]
fn what_attnviz_cannot_run_reads_as_the_old_sentences() {
    let hf = Activation::HF_NAMES;
    let types = vec!["bert", "gpt2", "t5"];
    let classes = vec!["WhisperModel".to_string()];
    let other = RopeScaling::Linear { factor: 2.0 };
    let cases: Vec<(Unsupported, String)> = vec![
        // config.rs: "{field} '{name}' is not supported; use {}", Activation::HF_NAMES
        (
            Unsupported::Value {
                field: "hidden_act",
                value: Some(FieldValue::Name("quick_gelu".into())),
                note: None,
                instead: Instead::Activations,
            },
            format!(
                "{} '{}' is not supported; use {hf}",
                "hidden_act", "quick_gelu"
            ),
        ),
        // encoder.rs: "position_embedding_type '{p}' is not supported; only 'absolute'
        // position embeddings are"
        (
            Unsupported::Value {
                field: "position_embedding_type",
                value: Some(FieldValue::Name("relative_key".into())),
                note: None,
                instead: Instead::Runs("only 'absolute' position embeddings are"),
            },
            format!(
                "position_embedding_type '{}' is not supported; only 'absolute' position \
                 embeddings are",
                "relative_key"
            ),
        ),
        // vision.rs: "num_channels {} is not supported; attnviz reads RGB images (3 channels)"
        (
            Unsupported::Value {
                field: "num_channels",
                value: Some(FieldValue::Count(1)),
                note: None,
                instead: Instead::Runs("attnviz reads RGB images (3 channels)"),
            },
            format!(
                "num_channels {} is not supported; attnviz reads RGB images (3 channels)",
                1
            ),
        ),
        // rope.rs: "partial_rotary_factor {f} (RoPE on part of each head) is not supported"
        (
            Unsupported::Value {
                field: "partial_rotary_factor",
                value: Some(FieldValue::Number(0.5)),
                note: Some("RoPE on part of each head"),
                instead: Instead::Nothing,
            },
            format!(
                "partial_rotary_factor {} (RoPE on part of each head) is not supported",
                0.5
            ),
        ),
        // rope.rs: "RoPE scaling type '{other}' is not supported; attnviz runs default,
        // linear and llama3 rotary embeddings"
        (
            Unsupported::Value {
                field: "RoPE scaling type",
                value: Some(FieldValue::Name("yarn".into())),
                note: None,
                instead: Instead::Runs("attnviz runs default, linear and llama3 rotary embeddings"),
            },
            format!(
                "RoPE scaling type '{}' is not supported; attnviz runs default, linear and \
                 llama3 rotary embeddings",
                "yarn"
            ),
        ),
        // vit.rs: "qkv_bias false is not supported; attnviz runs ViT with query/key/value
        // biases"
        (
            Unsupported::Value {
                field: "qkv_bias",
                value: Some(FieldValue::Json(false.into())),
                note: None,
                instead: Instead::Runs("attnviz runs ViT with query/key/value biases"),
            },
            "qkv_bias false is not supported; attnviz runs ViT with query/key/value biases".into(),
        ),
        // dinov2.rs: "qkv_bias false is not supported"
        (
            Unsupported::Value {
                field: "qkv_bias",
                value: Some(FieldValue::Json(false.into())),
                note: None,
                instead: Instead::Nothing,
            },
            "qkv_bias false is not supported".into(),
        ),
        // dinov2.rs: "use_swiglu_ffn true (DINOv2 giant's SwiGLU feed-forward) is not
        // supported"
        (
            Unsupported::Value {
                field: "use_swiglu_ffn",
                value: Some(FieldValue::Json(true.into())),
                note: Some("DINOv2 giant's SwiGLU feed-forward"),
                instead: Instead::Nothing,
            },
            "use_swiglu_ffn true (DINOv2 giant's SwiGLU feed-forward) is not supported".into(),
        ),
        // gemma.rs: "use_bidirectional_attention (an embedding model's encoder) is not
        // supported"
        (
            Unsupported::Value {
                field: "use_bidirectional_attention",
                value: None,
                note: Some("an embedding model's encoder"),
                instead: Instead::Nothing,
            },
            "use_bidirectional_attention (an embedding model's encoder) is not supported".into(),
        ),
        // registry.rs: "model_type '{t}' is not supported; attnviz runs model types {}",
        // supported() (the model types joined with ", ")
        (
            Unsupported::Value {
                field: "model_type",
                value: Some(FieldValue::Name("whisper".into())),
                note: None,
                instead: Instead::ModelTypes(types.clone()),
            },
            format!(
                "model_type '{}' is not supported; attnviz runs model types {}",
                "whisper",
                types.join(", ")
            ),
        ),
        // registry.rs: "it has no model_type, and architectures {classes:?} name no
        // supported family; attnviz runs model types {}", supported()
        (
            Unsupported::Architectures {
                classes: classes.clone(),
                supported: types.clone(),
            },
            format!(
                "it has no model_type, and architectures {classes:?} name no supported \
                 family; attnviz runs model types {}",
                types.join(", ")
            ),
        ),
        // gemma.rs: "attention_bias true (Gemma has no attention biases)"
        (
            Unsupported::Lacks {
                field: "attention_bias",
                value: true,
                why: "Gemma has no attention biases",
            },
            "attention_bias true (Gemma has no attention biases)".into(),
        ),
        // bart.rs: "share_encoder_decoder_embeddings is false: Marian models with separate
        // source and target embeddings are not supported"
        (
            Unsupported::Setting {
                field: "share_encoder_decoder_embeddings",
                value: false,
                why: "Marian models with separate source and target embeddings are not \
                      supported",
            },
            "share_encoder_decoder_embeddings is false: Marian models with separate \
             source and target embeddings are not supported"
                .into(),
        ),
        // gpt2.rs: "add_cross_attention is true: GPT-2 as the decoder of an encoder-decoder
        // model is not supported; attnviz runs GPT-2 language models"
        (
            Unsupported::Setting {
                field: "add_cross_attention",
                value: true,
                why: "GPT-2 as the decoder of an encoder-decoder model is not supported; \
                      attnviz runs GPT-2 language models",
            },
            "add_cross_attention is true: GPT-2 as the decoder of an encoder-decoder model \
             is not supported; attnviz runs GPT-2 language models"
                .into(),
        ),
        // encoder.rs: "embedding_size {e} differs from hidden_size {hidden_size}, but this
        // family's embeddings have the hidden size"
        (
            Unsupported::Differs {
                field: "embedding_size",
                value: 128,
                other: "hidden_size",
                other_value: 256,
                why: ", but this family's embeddings have the hidden size",
            },
            format!(
                "embedding_size {} differs from hidden_size {}, but this family's \
                 embeddings have the hidden size",
                128, 256
            ),
        ),
        // bart.rs: "decoder_vocab_size {v} differs from vocab_size {}: Marian models with
        // separate vocabularies are not supported"
        (
            Unsupported::Differs {
                field: "decoder_vocab_size",
                value: 10,
                other: "vocab_size",
                other_value: 12,
                why: ": Marian models with separate vocabularies are not supported",
            },
            format!(
                "decoder_vocab_size {} differs from vocab_size {}: Marian models with \
                 separate vocabularies are not supported",
                10, 12
            ),
        ),
        // encoder.rs: "it is configured as a decoder (is_decoder/add_cross_attention);
        // attnviz runs this family as a bidirectional encoder"
        (
            Unsupported::Decoder,
            "it is configured as a decoder (is_decoder/add_cross_attention); attnviz runs \
             this family as a bidirectional encoder"
                .into(),
        ),
        // t5.rs: "feed_forward_proj '{proj}': activation '{act}' is not supported; use {}",
        // Activation::HF_NAMES
        (
            Unsupported::FeedForwardActivation {
                proj: "gated-mish".into(),
                activation: "mish".into(),
            },
            format!(
                "feed_forward_proj '{}': activation '{}' is not supported; use {hf}",
                "gated-mish", "mish"
            ),
        ),
        // phi3.rs: "RoPE scaling {other:?} for Phi-3; attnviz runs its default and longrope
        // embeddings"
        (
            Unsupported::Phi3Scaling(other),
            format!(
                "RoPE scaling {other:?} for Phi-3; attnviz runs its default and longrope \
                 embeddings"
            ),
        ),
    ];
    for (what, old) in cases {
        assert_eq!(what.to_string(), old, "{what:?}");
    }
}

#[test]
fn what_a_checkpoint_holds_reads_as_the_old_sentences() {
    let weights = PathBuf::from("model.safetensors");
    let mismatch = |held: Held| {
        ConfigError::Mismatch {
            path: "config.json".into(),
            field: "num_hidden_layers",
            value: 4,
            held: Box::new(held),
        }
        .to_string()
    };
    let tail = "config.json does not describe these weights";
    // validate.rs: "{} has no tensor {}{} to check it against", ckpt.path().display(),
    // ckpt.prefix(), d.tensor
    assert_eq!(
        mismatch(Held::NoTensor {
            weights: weights.clone(),
            tensor: "bert.embeddings.word_embeddings.weight".into(),
        }),
        format!(
            "config.json: num_hidden_layers is 4, but {} has no tensor {}{} to check it \
             against; {tail}",
            weights.display(),
            "bert.",
            "embeddings.word_embeddings.weight"
        )
    );
    // validate.rs: "tensor {name} in {} has shape {shape:?}, whose dimension {} should be
    // {}", ckpt.path().display(), d.axis, d.field
    let shape = vec![30522, 128];
    assert_eq!(
        mismatch(Held::Shape {
            weights: weights.clone(),
            tensor: "w".into(),
            shape: shape.clone(),
            axis: 1,
        }),
        format!(
            "config.json: num_hidden_layers is 4, but tensor {} in {} has shape {shape:?}, \
             whose dimension {} should be {}; {tail}",
            "w",
            weights.display(),
            1,
            "num_hidden_layers"
        )
    );
    // validate.rs: "{} holds {has} (no tensor {}{})", with has "no {}s", "only {} 0" or
    // "only {}s 0–{}" (block, present − 1)
    for (present, has) in [
        (0, format!("no {}s", "layer")),
        (1, format!("only {} 0", "layer")),
        (3, format!("only {}s 0–{}", "layer", 3 - 1)),
    ] {
        assert_eq!(
            mismatch(Held::Blocks {
                weights: weights.clone(),
                block: "layer",
                present,
                missing: format!("layers.{present}.w"),
            }),
            format!(
                "config.json: num_hidden_layers is 4, but {} holds {has} (no tensor \
                 {}{}); {tail}",
                weights.display(),
                "",
                format_args!("layers.{present}.w")
            )
        );
    }
}

#[test]
fn a_section_is_named_before_its_problem() {
    let err = ConfigError::Invalid {
        path: "config.json".into(),
        within: Some("text_config".into()),
        problem: Box::new(ConfigProblem::Zero {
            field: "hidden_size",
        }),
    };
    // config.rs (in_section): format!("in {name}: {reason}")
    assert_eq!(
        err.to_string(),
        format!(
            "config.json is not a valid model config: in {}: {}",
            "text_config", "hidden_size is 0"
        )
    );
    let err = ConfigError::Unsupported {
        path: "config.json".into(),
        within: None,
        what: Box::new(Unsupported::Decoder),
    };
    assert!(err
        .to_string()
        .starts_with("config.json describes a model attnviz cannot run: it is configured"));
}

#[test]
fn a_family_reading_its_config_gives_the_facts() {
    // A multimodal Gemma 3 whose text_config groups 8 query heads into 3 key/value heads.
    let text = r#"{"model_type": "gemma3",
                   "text_config": {"num_attention_heads": 8, "num_key_value_heads": 3}}"#;
    let file = ConfigFile::parse(text, Path::new("config.json")).unwrap();
    let err = crate::families::gemma::GemmaConfig::read_gemma3(&file).unwrap_err();
    let ConfigError::Invalid {
        within: Some(section),
        problem,
        ..
    } = &err
    else {
        panic!("{err:?}");
    };
    assert_eq!(section, "text_config");
    assert!(
        matches!(
            **problem,
            ConfigProblem::NotMultiple {
                field: "num_attention_heads",
                value: 8,
                of_field: "num_key_value_heads",
                of: 3,
            }
        ),
        "{problem:?}"
    );

    // A model type attnviz does not run: the type, and the types it runs, as data.
    let file =
        ConfigFile::parse(r#"{"model_type": "wav2vec2"}"#, Path::new("config.json")).unwrap();
    let err = crate::families::registry::family_of(&file)
        .err()
        .expect("wav2vec2 is refused");
    let ConfigError::Unsupported { what, .. } = &err else {
        panic!("{err:?}");
    };
    let Unsupported::Value {
        field: "model_type",
        value: Some(FieldValue::Name(t)),
        instead: Instead::ModelTypes(types),
        ..
    } = what.as_ref()
    else {
        panic!("{what:?}");
    };
    assert_eq!(t, "wav2vec2");
    assert!(
        types.contains(&"bert") && types.contains(&"gemma3") && types.contains(&"whisper"),
        "{types:?}"
    );

    // Not JSON: serde's error itself.
    let err = ConfigFile::parse("{x", Path::new("config.json")).unwrap_err();
    assert!(
        matches!(
            &err,
            ConfigError::Invalid { problem, within: None, .. }
                if matches!(problem.as_ref(), ConfigProblem::NotJson(e) if e.is_syntax())
        ),
        "{err:?}"
    );
}

#[test]
fn a_file_that_is_not_there_says_so_as_a_read_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = ConfigFile::load(&dir.path().join("config.json")).unwrap_err();
    assert!(
        matches!(
            &err,
            ConfigError::Read {
                source: crate::small_file::ReadError::NotFound,
                ..
            }
        ),
        "{err:?}"
    );
    // config.rs: "cannot read {}: {reason}"
    assert_eq!(
        err.to_string(),
        format!(
            "cannot read {}: {}",
            dir.path().join("config.json").display(),
            "no such file"
        )
    );
}
