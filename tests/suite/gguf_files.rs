//! The GGUF reader on small files: every quantisation type against gguf-py's dequantisation,
//! tiny Llama and Qwen2 checkpoints written in llama.cpp's layout against the transformers
//! fixtures they came from, and hostile files (one-line errors, no panic, bounded memory).
//!
//! The fixtures and references come from `tests/reference/make_gguf.py`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use attnviz::model::gguf::{hf_tensor_name, GgufError, GgufFile, RopeScaling};
use candle_core::{Device, Tensor};
use serde_json::Value;

use crate::support::cli::{fixture, repo};

fn gguf(name: &str) -> PathBuf {
    fixture("gguf").join(name)
}

fn open(path: &Path) -> GgufFile {
    GgufFile::open(path).unwrap_or_else(|e| panic!("{e}"))
}

fn load(path: PathBuf) -> HashMap<String, Tensor> {
    candle_core::safetensors::load(path, &Device::Cpu).unwrap()
}

fn values(t: &Tensor) -> Vec<f32> {
    t.flatten_all().unwrap().to_vec1().unwrap()
}

fn json(path: PathBuf) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Each type candle dequantises (and a file can hold) gives gguf-py's values.
#[test]
fn every_type_matches_gguf_py() {
    let gguf = open(&gguf("types.gguf"));
    let reference = load(repo().join("tests/reference/gguf-types.safetensors"));
    let types = [
        "F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K",
        "Q5_K", "Q6_K",
    ];
    assert_eq!(gguf.tensors().len(), types.len());
    for ty in types {
        let name = format!("t.{ty}");
        let info = gguf.tensor_info(&name).unwrap();
        assert_eq!(info.dtype, ty);
        assert_eq!(info.shape, [3, 512]);
        let ours = gguf.dequantize(&name).unwrap();
        let want = values(&reference[&name]);
        let diff = ours
            .data
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        let scale = want.iter().fold(0f32, |m, v| m.max(v.abs()));
        println!("{ty}: max |Δ| = {diff:.2e} (values up to {scale:.2})");
        // The same arithmetic in f32; K-quants may round a last bit differently.
        assert!(diff <= 1e-6 * scale.max(1.0), "{ty}: max |Δ| {diff}");
    }
}

#[test]
fn unsupported_type_names_type_and_tensor() {
    let err = GgufFile::open(&gguf("unsupported.gguf")).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, GgufError::Invalid { .. }), "{text}");
    assert!(text.contains("blk.0.attn_q.weight"), "{text}");
    assert!(text.contains("IQ4_NL"), "{text}");
    assert!(text.contains("Q4_K"), "names the supported types: {text}");
    assert!(!text.contains('\n'), "{text}");
}

/// tiny-llama.gguf is transformers' tiny Llama as llama.cpp's converter writes it (q/k rows
/// permuted): we must read back exactly the fixture's tensors, in transformers' layout, and the
/// config.
#[test]
fn tiny_llama_round_trips_to_transformers_weights() {
    let gguf = open(&gguf("tiny-llama.gguf"));
    let config = json(repo().join("tests/fixtures/tiny-llama/config.json"));
    let p = gguf.decoder_params().unwrap();
    assert_eq!(p.architecture, "llama");
    assert_eq!(
        p.num_hidden_layers as u64,
        config["num_hidden_layers"].as_u64().unwrap()
    );
    assert_eq!(
        p.hidden_size as u64,
        config["hidden_size"].as_u64().unwrap()
    );
    assert_eq!(
        p.intermediate_size as u64,
        config["intermediate_size"].as_u64().unwrap()
    );
    assert_eq!(
        p.num_attention_heads as u64,
        config["num_attention_heads"].as_u64().unwrap()
    );
    assert_eq!(
        p.num_key_value_heads as u64,
        config["num_key_value_heads"].as_u64().unwrap()
    );
    assert_eq!(p.head_dim as u64, config["head_dim"].as_u64().unwrap());
    assert_eq!(p.rope_theta, config["rope_theta"].as_f64().unwrap());
    assert_eq!(
        p.rope_scaling,
        Some(RopeScaling::Linear {
            factor: config["rope_scaling"]["factor"].as_f64().unwrap()
        })
    );
    // A float32 in the file: equal to the config's value at f32 precision.
    assert_eq!(
        p.rms_norm_eps as f32,
        config["rms_norm_eps"].as_f64().unwrap() as f32
    );
    assert_eq!(
        p.max_position_embeddings as u64,
        config["max_position_embeddings"].as_u64().unwrap()
    );
    assert_eq!(p.vocab_size as u64, config["vocab_size"].as_u64().unwrap());
    assert_eq!(
        p.tie_word_embeddings,
        config["tie_word_embeddings"].as_bool().unwrap()
    );
    assert!(!p.attention_bias);

    let weights = load(repo().join("tests/fixtures/tiny-llama/model.safetensors"));
    let all = gguf.dequantize_all().unwrap();
    assert_eq!(all.len(), weights.len());
    for (name, tensor) in &all {
        let hf = hf_tensor_name(name).unwrap();
        let want = &weights[&hf];
        assert_eq!(tensor.shape, want.dims(), "{name}");
        assert!(tensor.data == values(want), "{name} ({hf}) differs");
    }
    // As stored, q and k are permuted (the check above is not vacuous).
    let raw = gguf.dequantize_as_stored("blk.0.attn_k.weight").unwrap();
    assert!(raw.data != values(&weights["model.layers.0.self_attn.k_proj.weight"]));
}

/// tiny-llama.gguf carries the fixture's SentencePiece vocabulary (pieces, scores, types, as
/// llama.cpp's converter writes them): the tokenizer built from it must give transformers' ids
/// (tests/reference/tiny-llama.json, from the fixture's tokenizer.json), BOS included.
#[test]
fn tiny_llama_sentencepiece_tokenizer_matches_transformers() {
    let gguf = open(&gguf("tiny-llama.gguf"));
    let tok = gguf.tokenizer().unwrap();
    assert_eq!(tok.model, "llama");
    assert!(tok.add_bos_token && !tok.add_eos_token);
    assert_eq!((tok.bos_token_id, tok.eos_token_id), (Some(1), Some(2)));
    let reference = json(repo().join("tests/reference/tiny-llama.json"));
    for case in reference["cases"].as_array().unwrap() {
        let text = case["text"].as_str().unwrap();
        let enc = tok.tokenizer.encode(text, true).unwrap();
        let want: Vec<u32> = case["input_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect();
        let tokens: Vec<String> = case["tokens"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_str().unwrap().to_string())
            .collect();
        assert_eq!(&enc.get_ids()[..want.len()], want, "{}", case["name"]);
        assert_eq!(
            &enc.get_tokens()[..tokens.len()],
            tokens,
            "{}",
            case["name"]
        );
        assert_eq!(enc.len() as u64, case["untruncated_len"].as_u64().unwrap());
        assert_eq!(tok.tokenizer.decode(enc.get_ids(), true).unwrap(), text);
    }
    let text = gguf.chat_template().unwrap_err().to_string();
    assert!(
        text.contains("no chat template") && text.contains("tokenizer.chat_template"),
        "{text}"
    );
    assert!(!text.contains('\n'), "{text}");
}

/// tiny-qwen2.gguf: the qwen2 architecture (no q/k permutation, q/k/v biases, tied), its
/// byte-level BPE vocabulary with the `qwen2` pre-tokenizer and its chat template, against the
/// transformers fixture and tests/reference/tiny-qwen2.json.
#[test]
fn tiny_qwen2_weights_tokenizer_and_chat_template() {
    let gguf = open(&gguf("tiny-qwen2.gguf"));
    let p = gguf.decoder_params().unwrap();
    assert_eq!(p.architecture, "qwen2");
    assert!(p.attention_bias && p.tie_word_embeddings);
    assert_eq!(p.rope_theta, 1e6);
    let weights = load(repo().join("tests/fixtures/tiny-qwen2/model.safetensors"));
    for (name, tensor) in gguf.dequantize_all().unwrap() {
        let hf = hf_tensor_name(&name).unwrap();
        assert!(
            tensor.data == values(&weights[&hf]),
            "{name} ({hf}) differs"
        );
    }

    let reference = json(repo().join("tests/reference/tiny-qwen2.json"));
    let tok = gguf.tokenizer().unwrap();
    assert_eq!((tok.model.as_str(), tok.pre.as_str()), ("gpt2", "qwen2"));
    assert_eq!(tok.eos_token_id, Some(360));
    let ids = |v: &Value| -> Vec<u32> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect()
    };
    for case in reference["cases"].as_array().unwrap() {
        let text = case["text"].as_str().unwrap();
        let enc = tok.tokenizer.encode(text, true).unwrap();
        let want = ids(&case["input_ids"]);
        // The `truncated` case is cut at the model's 48 tokens; compare that prefix and the
        // untruncated length.
        assert_eq!(&enc.get_ids()[..want.len()], want, "{}", case["name"]);
        assert_eq!(enc.len() as u64, case["untruncated_len"].as_u64().unwrap());
        assert_eq!(tok.tokenizer.decode(enc.get_ids(), false).unwrap(), text);
    }
    let example = &reference["chat_example"];
    let content = example["messages"][0]["content"].as_str().unwrap();
    let text = gguf
        .chat_template()
        .unwrap()
        .render_user_message(content)
        .unwrap();
    assert_eq!(text, example["text"].as_str().unwrap());
    let enc = tok.tokenizer.encode(text.as_str(), true).unwrap();
    assert_eq!(enc.get_ids(), ids(&example["input_ids"]));
}

// --- Hostile files -----------------------------------------------------------------------------

/// A GGUF v3 file built field by field.
#[derive(Default)]
struct Builder {
    kv: Vec<u8>,
    kv_count: u64,
    tensors: Vec<u8>,
    tensor_count: u64,
    data: Vec<u8>,
}

impl Builder {
    fn string(out: &mut Vec<u8>, s: &str) {
        out.extend((s.len() as u64).to_le_bytes());
        out.extend(s.as_bytes());
    }
    fn kv_u32(mut self, key: &str, value: u32) -> Self {
        Self::string(&mut self.kv, key);
        self.kv.extend(4u32.to_le_bytes());
        self.kv.extend(value.to_le_bytes());
        self.kv_count += 1;
        self
    }
    fn kv_str(mut self, key: &str, value: &str) -> Self {
        Self::string(&mut self.kv, key);
        self.kv.extend(8u32.to_le_bytes());
        Self::string(&mut self.kv, value);
        self.kv_count += 1;
        self
    }
    fn kv_strs(mut self, key: &str, values: &[&str]) -> Self {
        Self::string(&mut self.kv, key);
        self.kv.extend(9u32.to_le_bytes());
        self.kv.extend(8u32.to_le_bytes());
        self.kv.extend((values.len() as u64).to_le_bytes());
        for v in values {
            Self::string(&mut self.kv, v);
        }
        self.kv_count += 1;
        self
    }
    fn kv_raw(mut self, key: &str, kind: u32, value: &[u8]) -> Self {
        Self::string(&mut self.kv, key);
        self.kv.extend(kind.to_le_bytes());
        self.kv.extend(value);
        self.kv_count += 1;
        self
    }
    /// A tensor record (dims innermost first, as GGUF stores them).
    fn tensor(mut self, name: &str, dims: &[u64], kind: u32, offset: u64) -> Self {
        Self::string(&mut self.tensors, name);
        self.tensors.extend((dims.len() as u32).to_le_bytes());
        for d in dims {
            self.tensors.extend(d.to_le_bytes());
        }
        self.tensors.extend(kind.to_le_bytes());
        self.tensors.extend(offset.to_le_bytes());
        self.tensor_count += 1;
        self
    }
    fn data(mut self, bytes: &[u8]) -> Self {
        self.data.extend(bytes);
        self
    }
    fn bytes(&self) -> Vec<u8> {
        let mut out = b"GGUF".to_vec();
        out.extend(3u32.to_le_bytes());
        out.extend(self.tensor_count.to_le_bytes());
        out.extend(self.kv_count.to_le_bytes());
        out.extend(&self.kv);
        out.extend(&self.tensors);
        // Padding to the data section; a file without tensors may end right after its header.
        if self.tensor_count > 0 {
            out.resize(out.len().div_ceil(32) * 32, 0);
        }
        out.extend(&self.data);
        out
    }
}

/// Opening `bytes` fails with one line that contains every one of `needles`.
fn rejects(bytes: &[u8], needles: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hostile.gguf");
    std::fs::write(&path, bytes).unwrap();
    let text = match GgufFile::open(&path) {
        Ok(_) => panic!("accepted a hostile file; expected an error with {needles:?}"),
        Err(e) => e.to_string(),
    };
    assert!(!text.contains('\n'), "not one line: {text}");
    assert!(text.contains("hostile.gguf"), "names the file: {text}");
    for needle in needles {
        assert!(text.contains(needle), "{text:?} lacks {needle:?}");
    }
}

#[test]
fn a_valid_hand_built_file_opens() {
    // The builder itself writes a file the reader accepts: the rejections below are real.
    let file = Builder::default()
        .kv_str("general.architecture", "llama")
        .tensor("w", &[32, 2], 0, 0)
        .data(&[0u8; 256]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ok.gguf");
    std::fs::write(&path, file.bytes()).unwrap();
    let gguf = GgufFile::open(&path).unwrap();
    assert_eq!(gguf.dequantize("w").unwrap().shape, [2, 32]);
    let text = gguf.decoder_params().unwrap_err().to_string();
    assert!(
        text.contains("metadata llama.block_count is missing"),
        "{text}"
    );
    let text = gguf.dequantize("nope").unwrap_err().to_string();
    assert!(text.contains("has no tensor named nope"), "{text}");
}

/// Not a file: a folder, a missing path, a FIFO (which must not block waiting for a writer).
#[test]
fn non_files_are_rejected_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let text = GgufFile::open(dir.path()).unwrap_err().to_string();
    assert!(text.contains("not a regular file"), "{text}");
    let text = GgufFile::open(&dir.path().join("missing.gguf"))
        .unwrap_err()
        .to_string();
    assert!(
        text.starts_with("cannot read") && text.contains("missing.gguf"),
        "{text}"
    );
    let fifo = dir.path().join("fifo.gguf");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if made.is_ok_and(|s| s.success()) {
        let text = GgufFile::open(&fifo).unwrap_err().to_string();
        assert!(text.contains("not a regular file"), "{text}");
    }
}

#[test]
fn hostile_headers_are_rejected() {
    rejects(b"", &["empty"]);
    rejects(b"GGML\x03\x00\x00\x00", &["not a GGUF file"]);
    rejects(b"GGUF\x09\x00\x00\x00", &["version 9"]);
    rejects(b"GGUF\x03\x00\x00\x00\x01", &["tensor count"]);
    // Counts far beyond what the file can hold.
    let mut huge = b"GGUF\x03\x00\x00\x00".to_vec();
    huge.extend((1u64 << 40).to_le_bytes());
    huge.extend(0u64.to_le_bytes());
    rejects(&huge, &["1099511627776 tensors", "more than the file"]);
    // A string claiming 2^60 bytes.
    let mut long = Builder::default().kv_str("k", "v").bytes();
    long[24..32].copy_from_slice(&(1u64 << 60).to_le_bytes());
    rejects(&long, &["metadata key", "needs 1152921504606846976 bytes"]);
}

#[test]
fn hostile_metadata_is_rejected() {
    // general.alignment = 0: candle would divide by it.
    rejects(
        &Builder::default().kv_u32("general.alignment", 0).bytes(),
        &["general.alignment is 0"],
    );
    rejects(
        &Builder::default().kv_u32("general.alignment", 48).bytes(),
        &["general.alignment is 48", "power of two"],
    );
    // An array of a billion u8 values in a tiny file.
    let mut array = 0u32.to_le_bytes().to_vec();
    array.extend(1_000_000_000u64.to_le_bytes());
    rejects(
        &Builder::default().kv_raw("big", 9, &array).bytes(),
        &["metadata big", "1000000000 elements"],
    );
    // Eight million one-byte values: within the file's size but past the value cap (each
    // would cost 32 bytes in candle's parsed form).
    let mut many = 0u32.to_le_bytes().to_vec();
    many.extend((9_000_000u64).to_le_bytes());
    many.extend(vec![0u8; 9_000_000]);
    rejects(
        &Builder::default().kv_raw("many", 9, &many).bytes(),
        &["metadata many", "at most 8388608 values"],
    );
    // Arrays nested past the depth limit.
    let mut nested = Vec::new();
    for _ in 0..20 {
        nested.extend(9u32.to_le_bytes());
        nested.extend(1u64.to_le_bytes());
    }
    nested.extend(4u32.to_le_bytes());
    nested.extend(0u64.to_le_bytes());
    rejects(
        &Builder::default().kv_raw("deep", 9, &nested).bytes(),
        &["metadata deep", "nested"],
    );
    rejects(
        &Builder::default().kv_raw("flag", 7, &[2]).bytes(),
        &["metadata flag", "neither 0 nor 1"],
    );
    rejects(
        &Builder::default().kv_raw("odd", 77, &[0; 8]).bytes(),
        &["metadata odd", "unknown value type 77"],
    );
}

#[test]
fn hostile_tensor_records_are_rejected() {
    rejects(
        &Builder::default()
            .tensor("w", &[1 << 40, 1 << 40], 0, 0)
            .bytes(),
        &["tensor w", "overflows"],
    );
    rejects(
        &Builder::default()
            .tensor("w", &[33, 2], 2, 0)
            .data(&[0; 64])
            .bytes(),
        &["tensor w", "not a multiple of Q4_0's block of 32"],
    );
    rejects(
        &Builder::default()
            .tensor("w", &[64, 64], 0, 0)
            .data(&[0; 64])
            .bytes(),
        &["tensor w", "needs 16384 bytes", "truncated"],
    );
    rejects(
        &Builder::default()
            .tensor("w", &[8], 0, 1 << 50)
            .data(&[0; 64])
            .bytes(),
        &["tensor w", "beyond the end"],
    );
    rejects(
        &Builder::default()
            .tensor("w", &[1, 1, 1, 1, 1], 0, 0)
            .bytes(),
        &["tensor w", "5 dimensions"],
    );
    rejects(
        &Builder::default()
            .tensor("w", &[32], 16, 0)
            .data(&[0; 64])
            .bytes(),
        &["tensor w", "IQ2_XXS"],
    );
}

/// Bad tokenizer or chat-template metadata: one line from `tokenizer()` / `chat_template()`,
/// naming the key.
#[test]
fn hostile_tokenizer_metadata_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let check = |file: Builder, tokenizer: bool, needles: &[&str]| {
        let path = dir.path().join("vocab.gguf");
        std::fs::write(&path, file.bytes()).unwrap();
        // A vocabulary-only file (no tensors, no padding after the header) opens.
        let gguf = GgufFile::open(&path).unwrap_or_else(|e| panic!("{e}"));
        let text = if tokenizer {
            gguf.tokenizer().map(|_| ()).unwrap_err().to_string()
        } else {
            gguf.chat_template()
                .and_then(|t| Ok(t.render_user_message("hi")?))
                .unwrap_err()
                .to_string()
        };
        assert!(!text.contains('\n'), "{text}");
        assert!(text.contains("vocab.gguf"), "{text}");
        for needle in needles {
            assert!(text.contains(needle), "{text:?} lacks {needle:?}");
        }
    };
    let gpt2 = || {
        Builder::default()
            .kv_str("tokenizer.ggml.model", "gpt2")
            .kv_str("tokenizer.ggml.pre", "smollm")
            .kv_strs("tokenizer.ggml.tokens", &["a", "b", "ab"])
    };
    check(
        Builder::default().kv_str("tokenizer.ggml.model", "bert"),
        true,
        &["tokenizer.ggml.model is \"bert\"", "WordPiece"],
    );
    check(
        Builder::default(),
        true,
        &["tokenizer.ggml.model is missing"],
    );
    check(
        gpt2().kv_strs("tokenizer.ggml.merges", &["a b", "b c"]),
        true,
        &["BPE from tokenizer.ggml.tokens and merges"],
    );
    check(
        gpt2().kv_strs("tokenizer.ggml.merges", &["ab"]),
        true,
        &["tokenizer.ggml.merges entry 0"],
    );
    check(gpt2(), true, &["tokenizer.ggml.merges is missing"]);
    check(
        gpt2()
            .kv_strs("tokenizer.ggml.merges", &["a b"])
            .kv_u32("tokenizer.ggml.bos_token_id", 7),
        true,
        &["tokenizer.ggml.bos_token_id is 7, outside the 3 tokens"],
    );
    check(
        Builder::default()
            .kv_str("tokenizer.ggml.model", "gpt2")
            .kv_str("tokenizer.ggml.pre", "martian"),
        true,
        &["tokenizer.ggml.pre is \"martian\""],
    );
    check(
        Builder::default()
            .kv_str("tokenizer.ggml.model", "llama")
            .kv_strs("tokenizer.ggml.tokens", &["a"]),
        true,
        &["tokenizer.ggml.scores is missing"],
    );
    check(
        Builder::default().kv_u32("tokenizer.ggml.model", 3),
        true,
        &["metadata tokenizer.ggml.model is the integer 3, expected a string"],
    );
    check(
        Builder::default().kv_str("tokenizer.chat_template", "{% for m in messages %}"),
        false,
        &["(tokenizer.chat_template): the chat template does not compile"],
    );
    check(
        Builder::default().kv_str(
            "tokenizer.chat_template",
            "{% for i in range(99999) %}{% for j in range(99999) %}x{% endfor %}{% endfor %}",
        ),
        false,
        &["failed to render", "fuel"],
    );
    check(
        Builder::default().kv_str(
            "tokenizer.chat_template",
            "{{ raise_exception('no system role') }}",
        ),
        false,
        &["raised an exception: no system role"],
    );
}

/// A real file cut short: the tensor that no longer fits is named.
#[test]
fn truncated_file_names_the_tensor() {
    let bytes = std::fs::read(gguf("tiny-llama.gguf")).unwrap();
    rejects(&bytes[..bytes.len() - 100], &["tensor ", "truncated"]);
    rejects(
        &bytes[..5000],
        &["is not a valid GGUF file", "metadata tokenizer.ggml"],
    );
}
