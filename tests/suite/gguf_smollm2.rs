//! The real SmolLM2-135M-Instruct Q4_1 GGUF against transformers loading the same file
//! (`tests/reference/smollm2.{json,safetensors}`, written by `tests/reference/make_real.py`):
//! hyper-parameters, tokenizer, chat template, and layer 0's query/key vectors computed from our
//! dequantised weights.
//!
//! Needs the model: `scripts/fetch-smollm2.sh` (or `ATTNVIZ_SMOLLM2_DIR`). The tests fail, never
//! skip, without it.

use std::collections::HashMap;
use std::sync::OnceLock;

use attnviz::model::gguf::{F32Tensor, GgufFile, GgufTokenizer};
use candle_core::{Device, Tensor};
use serde_json::Value;

use crate::support::models::smollm2::smollm2_gguf;

/// Largest |Δ| allowed for q/k vectors against transformers (README: q/k ≤ 1e-4).
const QUERY_KEY_TOL: f32 = 1e-4;

fn reference() -> &'static Value {
    static REF: OnceLock<Value> = OnceLock::new();
    REF.get_or_init(|| {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/reference/smollm2.json");
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    })
}

fn reference_tensors() -> HashMap<String, Tensor> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/reference/smollm2.safetensors"
    );
    candle_core::safetensors::load(path, &Device::Cpu).unwrap()
}

fn gguf() -> &'static GgufFile {
    static FILE: OnceLock<GgufFile> = OnceLock::new();
    FILE.get_or_init(|| GgufFile::open(&smollm2_gguf()).unwrap_or_else(|e| panic!("{e}")))
}

fn tokenizer() -> &'static GgufTokenizer {
    static TOK: OnceLock<GgufTokenizer> = OnceLock::new();
    TOK.get_or_init(|| gguf().tokenizer().unwrap_or_else(|e| panic!("{e}")))
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

use crate::support::data::strings;

#[test]
fn hyper_parameters_match_transformers_config() {
    let p = gguf().decoder_params().unwrap();
    let c = &reference()["config"];
    assert_eq!(p.architecture, "llama");
    assert_eq!(p.num_hidden_layers as u64, c["layers"].as_u64().unwrap());
    assert_eq!(p.num_attention_heads as u64, c["heads"].as_u64().unwrap());
    assert_eq!(
        p.num_key_value_heads as u64,
        c["kv_heads"].as_u64().unwrap()
    );
    assert_eq!(p.head_dim as u64, c["head_dim"].as_u64().unwrap());
    assert_eq!(p.hidden_size as u64, c["hidden_size"].as_u64().unwrap());
    assert_eq!(
        p.intermediate_size as u64,
        c["intermediate_size"].as_u64().unwrap()
    );
    assert_eq!(p.vocab_size as u64, c["vocab_size"].as_u64().unwrap());
    assert_eq!(
        p.rope_theta,
        c["rope_parameters"]["rope_theta"].as_f64().unwrap()
    );
    assert_eq!(c["rope_parameters"]["rope_type"], "default");
    assert_eq!(p.rope_scaling, None);
    assert!(!p.rope_freqs_tensor);
    // Bit for bit: the file's float32 1e-5, widened, as transformers reads it.
    assert_eq!(p.rms_norm_eps, c["rms_norm_eps"].as_f64().unwrap());
    assert_eq!(
        p.tie_word_embeddings,
        c["tie_word_embeddings"].as_bool().unwrap()
    );
    assert_eq!(p.bos_token_id.map(u64::from), c["bos_token_id"].as_u64());
    assert_eq!(p.eos_token_id.map(u64::from), c["eos_token_id"].as_u64());
    assert_eq!(p.pad_token_id.map(u64::from), c["pad_token_id"].as_u64());
    assert!(!p.attention_bias);
    assert_eq!(p.rope_dimension_count, p.head_dim);
    assert_eq!(p.max_position_embeddings, 8192);
    assert_eq!(p.sliding_window, None);
}

#[test]
fn tensor_inventory_and_types() {
    let tensors = gguf().tensors();
    assert_eq!(tensors.len(), 272);
    let count = |t: &str| tensors.iter().filter(|i| i.dtype == t).count();
    assert_eq!((count("Q4_1"), count("Q8_0"), count("F32")), (210, 1, 61));
    let embd = gguf().tensor_info("token_embd.weight").unwrap();
    assert_eq!(
        (embd.dtype, embd.shape.as_slice()),
        ("Q8_0", &[49152, 576][..])
    );
    // transformers' [out, in] order for linear weights.
    assert_eq!(
        gguf().tensor_info("blk.0.attn_k.weight").unwrap().shape,
        [192, 576]
    );
    assert_eq!(
        gguf().tensor_info("blk.0.ffn_down.weight").unwrap().shape,
        [576, 1536]
    );
    assert!(!gguf().has_tensor("output.weight"));
}

/// The matrices the model runs on stay in their block format (Q4_1, the Q8_0 embeddings), and
/// decode to exactly what candle's dequantiser gives, in transformers' row order: q and k with
/// llama.cpp's permutation undone (their rows copied), the others in place in the map.
#[test]
fn stored_matrices_decode_to_the_dequantized_tensors() {
    for name in [
        "blk.0.attn_q.weight",
        "blk.0.attn_k.weight",
        "blk.0.attn_v.weight",
        "blk.29.ffn_down.weight",
        "token_embd.weight",
    ] {
        let stored = gguf().stored(name).unwrap();
        let want = gguf().dequantize(name).unwrap();
        let info = gguf().tensor_info(name).unwrap();
        assert_eq!(
            stored.bytes().len(),
            info.bytes,
            "{name} stays {}",
            info.dtype
        );
        assert_eq!(stored.shape().to_vec(), want.shape, "{name}");
        let mut got = vec![0f32; want.data.len()];
        assert_eq!(stored.matrix().dequantize_rows(0, &mut got), want.shape[0]);
        assert!(got == want.data, "{name} decodes to other values");
    }
    // A 1-D tensor is no matrix: one line that names it.
    let err = gguf().stored("output_norm.weight").unwrap_err().to_string();
    assert!(
        err.contains("output_norm.weight") && err.contains("not a matrix"),
        "{err}"
    );
}

/// Every text the reference tokenized: ids and tokens exactly transformers', and decoding gives
/// the text back.
#[test]
fn tokenizer_matches_transformers() {
    let r = reference();
    let tok = tokenizer();
    assert_eq!(tok.model, "gpt2");
    assert_eq!(tok.pre, "smollm");
    assert!(!tok.add_bos_token && !tok.add_eos_token);
    let special = &r["tokenizer"]["special_tokens"];
    assert_eq!(
        tok.bos_token_id.map(u64::from),
        special["bos_token"][1].as_u64()
    );
    assert_eq!(
        tok.eos_token_id.map(u64::from),
        special["eos_token"][1].as_u64()
    );
    assert_eq!(
        tok.unk_token_id.map(u64::from),
        special["unk_token"][1].as_u64()
    );
    assert_eq!(
        tok.pad_token_id.map(u64::from),
        special["pad_token"][1].as_u64()
    );
    assert_eq!(
        tok.tokenizer.get_vocab_size(true) as u64,
        r["tokenizer"]["vocab_size"].as_u64().unwrap()
    );

    let mut cases: Vec<&Value> = r["cases"].as_array().unwrap().iter().collect();
    cases.extend(r["tokenizer"]["tokenize_only"].as_array().unwrap());
    assert!(cases.len() >= 6);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let text = case["text"].as_str().unwrap();
        let enc = tok.tokenizer.encode(text, true).unwrap();
        assert_eq!(enc.get_ids(), ids(&case["input_ids"]), "{name}: ids");
        assert_eq!(enc.get_tokens(), strings(&case["tokens"]), "{name}: tokens");
        // Word ids: transformers' GGUF conversion splits with GPT-2's regex alone, so " 42" is
        // one word; we split digits first, as llama.cpp and SmolLM2's own tokenizer.json do
        // (the same ids: SmolLM2 has no merges between digits), so each digit is a word.
        let words: Vec<Option<u32>> = enc.get_word_ids().to_vec();
        if !text.chars().any(|c| c.is_numeric()) {
            let want: Vec<Option<u32>> = case["word_ids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|w| w.as_u64().map(|w| w as u32))
                .collect();
            assert_eq!(words, want, "{name}: word ids");
        }
        let decoded = tok.tokenizer.decode(enc.get_ids(), false).unwrap();
        assert_eq!(decoded, case["decoded"].as_str().unwrap(), "{name}: decode");
        assert_eq!(decoded, text, "{name}: round trip");
    }
    // The generation prompts, including the chat-wrapped one (special tokens written in text).
    for g in r["generations"].as_array().unwrap() {
        let enc = tok
            .tokenizer
            .encode(g["prompt_text"].as_str().unwrap(), true)
            .unwrap();
        assert_eq!(enc.get_ids(), ids(&g["prompt_ids"]), "{}", g["name"]);
        // transformers' greedy continuation decodes to the text it reports.
        let text = tok
            .tokenizer
            .decode(&ids(&g["generated_ids"]), false)
            .unwrap();
        assert_eq!(text, g["generated_text"].as_str().unwrap(), "{}", g["name"]);
    }
}

#[test]
fn special_tokens_are_recognised_and_skippable() {
    let tok = tokenizer();
    let enc = tok
        .tokenizer
        .encode("<|im_start|>user\nHi<|im_end|><|endoftext|>", true)
        .unwrap();
    assert_eq!(enc.get_ids(), [1, 4093, 198, 26843, 2, 0]);
    let plain = tok.tokenizer.decode(enc.get_ids(), true).unwrap();
    assert_eq!(plain, "user\nHi");
    // Control tokens other than BOS/EOS/UNK (token_type 3) are special too.
    let enc = tok.tokenizer.encode("<file_sep>x", true).unwrap();
    assert_eq!(enc.get_ids()[0], 5);
    assert_eq!(tok.token(5).as_deref(), Some("<file_sep>"));
}

#[test]
fn chat_template_renders_as_transformers() {
    let r = &reference()["tokenizer"];
    let template = gguf().chat_template().unwrap();
    assert_eq!(template.source(), r["chat_template"].as_str().unwrap());
    let example = &r["chat_example"];
    let messages = example["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0]["role"], "user");
    assert_eq!(example["add_generation_prompt"], true);
    let text = template
        .render_user_message(messages[0]["content"].as_str().unwrap())
        .unwrap();
    assert_eq!(text, example["text"].as_str().unwrap());
    let enc = tokenizer().tokenizer.encode(text.as_str(), true).unwrap();
    assert_eq!(enc.get_ids(), ids(&example["input_ids"]));
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// `x · wᵀ` for `x` `[n, k]` and `w` `[m, k]`, in f64.
fn project(x: &[f64], n: usize, w: &F32Tensor) -> Vec<f64> {
    let (m, k) = (w.shape[0], w.shape[1]);
    let mut out = vec![0.0; n * m];
    for i in 0..n {
        for j in 0..m {
            out[i * m + j] = (0..k)
                .map(|t| x[i * k + t] * f64::from(w.data[j * k + t]))
                .sum();
        }
    }
    out
}

/// transformers' rotate_half RoPE (pairs (i, i + d/2)) on `[n, heads·d]` at positions 0..n.
fn rope(x: &mut [f64], n: usize, heads: usize, d: usize, theta: f64) {
    for pos in 0..n {
        for h in 0..heads {
            let v = &mut x[(pos * heads + h) * d..][..d];
            for i in 0..d / 2 {
                let inv_freq = 1.0 / theta.powf((2 * i) as f64 / d as f64);
                let (sin, cos) = (pos as f64 * inv_freq).sin_cos();
                let (a, b) = (v[i], v[i + d / 2]);
                v[i] = a * cos - b * sin;
                v[i + d / 2] = b * cos + a * sin;
            }
        }
    }
}

/// Layer 0's queries and keys from our dequantised weights (Q8_0 embedding, F32 norm, Q4_1 q/k
/// with llama.cpp's permutation undone): embedding → RMSNorm → projection → RoPE, against the
/// vectors transformers captured. A wrong permutation moves values between the two RoPE halves
/// and fails by far more than the tolerance.
#[test]
fn layer0_query_key_match_transformers() {
    let r = reference();
    let case = &r["cases"][0];
    assert_eq!(case["name"], "fox");
    assert_eq!(case["qk_layers"][0], 0);
    let input = ids(&case["input_ids"]);
    let n = input.len();
    let p = gguf().decoder_params().unwrap();
    let (hidden, d) = (p.hidden_size, p.head_dim);

    let embd = gguf().dequantize("token_embd.weight").unwrap();
    // The lookup of a few rows gives the same values without the whole table.
    let some = gguf()
        .dequantize_rows("token_embd.weight", &[input[3] as usize, input[0] as usize])
        .unwrap();
    assert_eq!(some.shape, [2, hidden]);
    assert_eq!(
        some.data[..hidden],
        embd.data[input[3] as usize * hidden..][..hidden]
    );
    assert_eq!(
        some.data[hidden..],
        embd.data[input[0] as usize * hidden..][..hidden]
    );
    let q_rows = gguf()
        .dequantize_rows("blk.0.attn_q.weight", &[5, 40])
        .unwrap();
    let q = gguf().dequantize("blk.0.attn_q.weight").unwrap();
    assert_eq!(q_rows.data[..hidden], q.data[5 * hidden..][..hidden]);
    assert_eq!(q_rows.data[hidden..], q.data[40 * hidden..][..hidden]);
    let err = gguf()
        .dequantize_rows("token_embd.weight", &[49152])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("has 49152 rows; row 49152 does not exist"),
        "{err}"
    );
    let norm = gguf().dequantize("blk.0.attn_norm.weight").unwrap();
    let mut x = vec![0.0f64; n * hidden];
    for (i, &id) in input.iter().enumerate() {
        let row = &embd.data[id as usize * hidden..][..hidden];
        let ms = row.iter().map(|&v| f64::from(v).powi(2)).sum::<f64>() / hidden as f64;
        let scale = 1.0 / (ms + p.rms_norm_eps).sqrt();
        for t in 0..hidden {
            x[i * hidden + t] = f64::from(row[t]) * scale * f64::from(norm.data[t]);
        }
    }

    let tensors = reference_tensors();
    for (name, heads, stored) in [
        ("attn_q", p.num_attention_heads, "fox.query"),
        ("attn_k", p.num_key_value_heads, "fox.key"),
    ] {
        let w = gguf().dequantize(&format!("blk.0.{name}.weight")).unwrap();
        let mut y = project(&x, n, &w);
        rope(&mut y, n, heads, d, p.rope_theta);
        // Reference: [qk_layers, heads, n, d]; layer 0 is the first.
        let want = tensors[stored].get(0).unwrap();
        let want: Vec<f32> = want.flatten_all().unwrap().to_vec1().unwrap();
        let mut ours = vec![0f32; heads * n * d];
        for pos in 0..n {
            for h in 0..heads {
                for i in 0..d {
                    ours[(h * n + pos) * d + i] = y[(pos * heads + h) * d + i] as f32;
                }
            }
        }
        let diff = max_abs_diff(&ours, &want);
        let scale = want.iter().fold(0f32, |m, v| m.max(v.abs()));
        println!("layer 0 {name}: max |Δ| = {diff:.3e} (values up to {scale:.2})");
        assert!(
            diff <= QUERY_KEY_TOL,
            "{name}: max |Δ| {diff} > {QUERY_KEY_TOL}"
        );

        // Without the un-permutation the same computation is far off: the check has teeth.
        let raw = gguf()
            .dequantize_as_stored(&format!("blk.0.{name}.weight"))
            .unwrap();
        let mut y = project(&x, n, &raw);
        rope(&mut y, n, heads, d, p.rope_theta);
        let wrong: Vec<f32> = (0..heads * n * d)
            .map(|k| {
                let (h, rest) = (k / (n * d), k % (n * d));
                let (pos, i) = (rest / d, rest % d);
                y[(pos * heads + h) * d + i] as f32
            })
            .collect();
        assert!(max_abs_diff(&wrong, &want) > 0.1);
    }
}

/// Every tensor dequantises, to finite values, in the shapes the hyper-parameters imply.
#[test]
fn dequantize_all_tensors() {
    let p = gguf().decoder_params().unwrap();
    let all = gguf().dequantize_all().unwrap();
    assert_eq!(all.len(), 2 + 9 * p.num_hidden_layers);
    let (h, kv, f) = (
        p.hidden_size,
        p.num_key_value_heads * p.head_dim,
        p.intermediate_size,
    );
    let per_layer = 2 * h + 2 * h * h + 2 * h * kv + 3 * h * f;
    let params: usize = all.values().map(|t| t.data.len()).sum();
    assert_eq!(
        params,
        p.vocab_size * h + h + p.num_hidden_layers * per_layer
    );
    for (name, t) in &all {
        assert_eq!(t.data.len(), t.shape.iter().product::<usize>(), "{name}");
        assert!(t.data.iter().all(|v| v.is_finite()), "{name}");
    }
}
