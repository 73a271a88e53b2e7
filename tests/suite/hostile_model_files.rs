//! Hostile model-side files of issue 20: GGUF files checked as a whole (req 12), tokenizer files
//! that cost what their size allows (req 13), small files that are FIFOs (req 15), numbers read
//! back (req 18) and GGUF text quoted in messages (req 9).
//!
//! Each case runs the CLI under `ulimit -v` 1 GiB and `timeout 60`, and checks exit status 1,
//! one line naming what is wrong, no panic and nothing written. Time and memory at full size are
//! measured by `scripts/measure-hostile.sh` (docs/hostile.md), not asserted here.

use std::path::{Path, PathBuf};

use crate::support::cli::{copy_fixture, fixture, mkfifo, run_model_limited};

use attnviz::model::gguf::GgufFile;
use candle_core::quantized::gguf_file::{self, Value};
use candle_core::Device;

/// Exit status 1, one line starting with `error:` naming every `mentions`, no panic, nothing
/// written; returns the line.
fn refused(model: &Path, extra: &[&str], mentions: &[&str]) -> String {
    let (out, wrote) = run_model_limited(model, extra);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{}: {err}", model.display());
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "not one line: {err}");
    assert!(err.starts_with("error: "), "{err}");
    for m in mentions {
        assert!(err.contains(m), "expected `{m}` in: {err}");
    }
    assert!(!wrote, "an output file was written: {err}");
    err
}

// ---------------------------------------------------------------- GGUF files rewritten

/// tiny-llama.gguf rewritten with its metadata edited by `edit` (candle's writer, so the
/// tensors are copied as they are).
fn edited_gguf(dir: &Path, edit: impl FnOnce(&mut Vec<(String, Value)>)) -> PathBuf {
    edited_gguf_of("tiny-llama.gguf", dir, edit)
}

/// [`edited_gguf`] of fixture `gguf/{name}`.
fn edited_gguf_of(name: &str, dir: &Path, edit: impl FnOnce(&mut Vec<(String, Value)>)) -> PathBuf {
    let src = fixture(&format!("gguf/{name}"));
    let mut file = std::fs::File::open(&src).unwrap();
    let content = gguf_file::Content::read(&mut file).unwrap();
    let mut metadata: Vec<(String, Value)> = content.metadata.clone().into_iter().collect();
    metadata.sort_by(|a, b| a.0.cmp(&b.0));
    edit(&mut metadata);
    let mut names: Vec<&String> = content.tensor_infos.keys().collect();
    names.sort();
    let tensors: Vec<(String, candle_core::quantized::QTensor)> = names
        .iter()
        .map(|n| {
            let t = content.tensor(&mut file, n, &Device::Cpu).unwrap();
            ((*n).clone(), t)
        })
        .collect();
    let path = dir.join("hostile.gguf");
    let mut out = std::fs::File::create(&path).unwrap();
    let md: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let ts: Vec<(&str, &candle_core::quantized::QTensor)> =
        tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    gguf_file::write(&mut out, &md, &ts).unwrap();
    path
}

fn set(metadata: &mut [(String, Value)], key: &str, value: Value) {
    let slot = metadata.iter_mut().find(|(k, _)| k == key).unwrap();
    slot.1 = value;
}

#[test]
fn an_unedited_rewrite_still_runs() {
    // The rewriting itself keeps the file usable, so each refusal below is its edit's.
    let dir = tempfile::tempdir().unwrap();
    let path = edited_gguf(dir.path(), |_| {});
    let (out, wrote) = run_model_limited(&path, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(wrote);
}

#[test]
fn duplicate_metadata_keys_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = edited_gguf(dir.path(), |md| {
        md.push(("llama.block_count".into(), Value::U32(7)));
    });
    refused(
        &path,
        &[],
        &["hostile.gguf", "\"llama.block_count\" appears twice"],
    );
}

#[test]
fn rope_factors_and_epsilons_out_of_range_name_the_field() {
    for (key, value, says) in [
        (
            "llama.rope.scaling.factor",
            Value::F32(0.0),
            "llama.rope.scaling.factor is 0",
        ),
        (
            "llama.rope.scaling.factor",
            Value::F32(-1e30),
            "llama.rope.scaling.factor is -1",
        ),
        (
            "llama.attention.layer_norm_rms_epsilon",
            Value::F32(-1.0),
            "layer_norm_rms_epsilon is -1",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = edited_gguf(dir.path(), |md| set(md, key, value));
        let err = refused(&path, &[], &[says]);
        assert!(!err.contains("overflow"), "{err}");
    }
}

#[test]
fn a_vocabulary_larger_than_the_embedding_is_refused_before_the_tokenizer_is_built() {
    let dir = tempfile::tempdir().unwrap();
    let path = edited_gguf(dir.path(), |md| {
        md.retain(|(k, _)| k != "llama.vocab_size");
        for (k, v) in md.iter_mut() {
            if let Value::Array(items) = v {
                if k.starts_with("tokenizer.ggml.") {
                    let last = items.last().unwrap().clone();
                    let extra = (0..5000).map(|i| match &last {
                        Value::String(_) => Value::String(format!("<extra_{i}>")),
                        other => other.clone(),
                    });
                    items.extend(extra.collect::<Vec<_>>());
                }
            }
        }
    });
    refused(
        &path,
        &[],
        &["tokenizer.ggml.tokens", "5400 tokens", "400 rows"],
    );
}

#[test]
fn the_architecture_quoted_in_a_message_cannot_reach_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let path = edited_gguf(dir.path(), |md| {
        set(
            md,
            "general.architecture",
            Value::String("x\u{1b}]52;c;aGk=\u{7}\nerror: forged".into()),
        );
    });
    let err = refused(&path, &[], &["hostile.gguf"]);
    assert!(!err.contains('\u{1b}') && !err.contains('\u{7}'), "{err:?}");
}

#[test]
fn weights_over_the_memory_limit_are_refused_before_they_are_read() {
    // What the tensors take as loaded: kept as stored (their bytes, as the file lists them).
    let path = fixture("gguf/tiny-llama.gguf");
    let file = GgufFile::open(&path).unwrap();
    let bytes: usize = file.tensors().iter().map(|t| t.bytes).sum();
    let kb = bytes as f64 / 1e3;
    let err = refused(
        &path,
        &["--max-memory", "100K"],
        &[
            &format!("its 21 tensors take {kb:.0} KB as stored"),
            "more than the memory limit given (102 KB)",
        ],
    );
    assert!(!err.contains("--max-memory"), "{err}");
    // Under the limit it runs.
    let (out, _) = run_model_limited(&path, &["--max-memory", "100M"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_one_megabyte_piece_rebuilds_its_merges_in_linear_time() {
    // Quadratic before: a 1 MB piece did not finish in 60 s. The run ends (in any way but
    // the timeout's 124) and does not panic.
    let dir = tempfile::tempdir().unwrap();
    let path = edited_gguf(dir.path(), |md| {
        for (k, v) in md.iter_mut() {
            if k == "tokenizer.ggml.tokens" {
                if let Value::Array(items) = v {
                    items[300] = Value::String("\u{2581}".repeat(1 << 18) + "ab");
                }
            }
        }
    });
    let (out, _) = run_model_limited(&path, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
}

// ---------------------------------------------------------------- GGUF files as bytes

/// A GGUF v3 file: metadata given as raw (key, type, value bytes), tensors as
/// (name, dims innermost first, ggml type, offset), then `data`.
fn raw_gguf(
    kv: &[(&str, u32, Vec<u8>)],
    tensors: &[(&str, &[u64], u32, u64)],
    data: &[u8],
) -> Vec<u8> {
    let string = |out: &mut Vec<u8>, s: &str| {
        out.extend((s.len() as u64).to_le_bytes());
        out.extend(s.as_bytes());
    };
    let mut out = b"GGUF".to_vec();
    out.extend(3u32.to_le_bytes());
    out.extend((tensors.len() as u64).to_le_bytes());
    out.extend((kv.len() as u64).to_le_bytes());
    for (key, kind, value) in kv {
        string(&mut out, key);
        out.extend(kind.to_le_bytes());
        out.extend(value);
    }
    for (name, dims, kind, offset) in tensors {
        string(&mut out, name);
        out.extend((dims.len() as u32).to_le_bytes());
        for d in *dims {
            out.extend(d.to_le_bytes());
        }
        out.extend(kind.to_le_bytes());
        out.extend(offset.to_le_bytes());
    }
    out.resize(out.len().div_ceil(32) * 32, 0);
    out.extend(data);
    out
}

fn open_err(bytes: &[u8]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hostile.gguf");
    std::fs::write(&path, bytes).unwrap();
    match GgufFile::open(&path) {
        Ok(_) => panic!("accepted"),
        Err(e) => {
            let text = e.to_string();
            assert!(!text.contains('\n'), "{text}");
            text
        }
    }
}

#[test]
fn overlapping_and_duplicate_tensors_are_refused_at_open() {
    let arch = ("general.architecture", 8, {
        let mut v = 5u64.to_le_bytes().to_vec();
        v.extend(b"llama");
        v
    });
    let data = vec![0u8; 256];
    // Two records over one 256-byte block: each may be read, but not both.
    let err = open_err(&raw_gguf(
        std::slice::from_ref(&arch),
        &[("a.weight", &[64], 0, 0), ("b.weight", &[32], 0, 128)],
        &data,
    ));
    assert!(
        err.contains("\"a.weight\" and \"b.weight\" overlap"),
        "{err}"
    );
    // The shared bytes are b's 128 (file positions, after the header).
    let span = err
        .split("(bytes ")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap();
    let (from, to) = span.split_once('–').unwrap();
    let (from, to): (u64, u64) = (from.parse().unwrap(), to.parse().unwrap());
    assert_eq!(to - from, 128, "{err}");
    // A second record with the first one's name (candle kept the last).
    let err = open_err(&raw_gguf(
        std::slice::from_ref(&arch),
        &[("a.weight", &[32], 0, 0), ("a.weight", &[32], 0, 128)],
        &data,
    ));
    assert!(err.contains("tensor \"a.weight\" appears twice"), "{err}");
    // Side by side is fine.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ok.gguf");
    std::fs::write(
        &path,
        raw_gguf(
            &[arch],
            &[("a.weight", &[32], 0, 0), ("b.weight", &[32], 0, 128)],
            &data,
        ),
    )
    .unwrap();
    let file = GgufFile::open(&path).unwrap();
    assert_eq!(file.tensors().len(), 2);
}

// ---------------------------------------------------------------- tokenizer files

/// tiny-t5 with its tokenizer.json's normalizer replaced by `normalizer`.
fn t5_with_normalizer(normalizer: serde_json::Value) -> tempfile::TempDir {
    let dir = copy_fixture("tiny-t5");
    let path = dir.path().join("tokenizer.json");
    let mut json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    json["normalizer"] = normalizer;
    std::fs::write(&path, json.to_string()).unwrap();
    dir
}

fn charsmap(bytes: &[u8]) -> serde_json::Value {
    use base64::Engine;
    serde_json::json!({"type": "Precompiled",
        "precompiled_charsmap": base64::engine::general_purpose::STANDARD.encode(bytes)})
}

#[test]
fn broken_precompiled_charsmaps_are_one_line_not_a_panic() {
    let real = {
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(fixture("tiny-t5/tokenizer.json")).unwrap())
                .unwrap();
        use base64::Engine;
        base64::engine::general_purpose::STANDARD
            .decode(json["normalizer"]["precompiled_charsmap"].as_str().unwrap())
            .unwrap()
    };
    let mut root_far = real.clone();
    root_far[4..8].copy_from_slice(&(0x3f_ffffu32 << 10).to_le_bytes());
    let mut bad_value = real.clone();
    // Every leaf value pointing past the string table.
    let units = u32::from_le_bytes(real[..4].try_into().unwrap()) as usize / 4;
    for i in 0..units {
        let at = 4 + 4 * i;
        let u = u32::from_le_bytes(bad_value[at..at + 4].try_into().unwrap());
        if u >> 31 == 1 {
            bad_value[at..at + 4].copy_from_slice(&((1u32 << 31) | 0x7fff_fff0).to_le_bytes());
        }
    }
    let cases: [(&str, Vec<u8>, &str); 4] = [
        ("empty trie", 0u32.to_le_bytes().to_vec(), "empty trie"),
        (
            "trie past the end",
            1_000_000u32.to_le_bytes().to_vec(),
            "only 0 follow",
        ),
        ("root offset far away", root_far, "past its"),
        ("replacement past the table", bad_value, "string table"),
    ];
    for (what, bytes, says) in cases {
        let dir = t5_with_normalizer(charsmap(&bytes));
        let err = refused(
            dir.path(),
            &[],
            &["tokenizer.json", "precompiled_charsmap", says],
        );
        assert!(!err.contains("panick"), "{what}: {err}");
    }
    // In a sequence too.
    let dir = t5_with_normalizer(serde_json::json!({"type": "Sequence",
        "normalizers": [charsmap(&0u32.to_le_bytes())]}));
    refused(dir.path(), &[], &["empty trie"]);
}

#[test]
fn a_replace_normalizer_that_expands_is_refused() {
    let dir = t5_with_normalizer(serde_json::json!({"type": "Replace",
        "pattern": {"String": "a"}, "content": "x".repeat(1 << 20)}));
    refused(
        dir.path(),
        &[],
        &["tokenizer.json", "Replace content of 1048576 bytes"],
    );
}

#[test]
fn more_merges_than_any_tokenizer_needs_are_refused_unread() {
    let dir = copy_fixture("tiny-gpt2");
    let path = dir.path().join("tokenizer.json");
    let mut json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let merges = vec![serde_json::Value::String("a b".into()); (1 << 21) + 1];
    json["model"]["merges"] = merges.into();
    std::fs::write(&path, json.to_string()).unwrap();
    refused(
        dir.path(),
        &[],
        &["tokenizer.json", "model.merges has 2097153 entries"],
    );
}

#[test]
fn a_vocab_txt_longer_than_any_vocabulary_is_refused() {
    let dir = copy_fixture("tiny-bert");
    let _ = std::fs::remove_file(dir.path().join("tokenizer.json"));
    let mut vocab = std::fs::read_to_string(dir.path().join("vocab.txt")).unwrap();
    vocab.push_str(&"x\n".repeat(1 << 21));
    std::fs::write(dir.path().join("vocab.txt"), vocab).unwrap();
    refused(
        dir.path(),
        &[],
        &["vocab.txt", "entries, more than the 2097152"],
    );
}

// ---------------------------------------------------------------- small files that are FIFOs

#[test]
fn fifos_as_small_model_files_are_refused_at_once() {
    for name in [
        "generation_config.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "chat_template.jinja",
        "tokenizer.json",
        "config.json",
    ] {
        let dir = copy_fixture("tiny-llama");
        mkfifo(&dir.path().join(name));
        refused(dir.path(), &[], &[name, "FIFO", "not a"]);
    }
}

// ---------------------------------------------------------------- generation_config.json

#[test]
fn generation_config_ids_and_syntax_are_checked() {
    let cases: [(&str, &str, &[&str]); 5] = [
        (
            "{\"eos_token_id\": ",
            "generation_config.json",
            &["not valid JSON"],
        ),
        (
            "{\"eos_token_id\": 123456}",
            "generation_config.json",
            &["eos_token_id is 123456", "vocabulary"],
        ),
        (
            "{\"eos_token_id\": [2, -1]}",
            "generation_config.json",
            &["eos_token_id is -1"],
        ),
        (
            "{\"forced_bos_token_id\": 99999}",
            "generation_config.json",
            &["forced_bos_token_id is 99999"],
        ),
        (
            "{\"forced_eos_token_id\": \"two\"}",
            "generation_config.json",
            &["forced_eos_token_id is \"two\""],
        ),
    ];
    for (text, file, says) in cases {
        let dir = copy_fixture("tiny-bart");
        std::fs::write(dir.path().join(file), text).unwrap();
        let mut mentions = vec![file];
        mentions.extend_from_slice(says);
        refused(dir.path(), &[], &mentions);
    }
}

#[test]
fn rope_factors_out_of_range_in_config_json_name_the_field() {
    for factor in ["0", "-1e30"] {
        let dir = copy_fixture("tiny-llama");
        let path = dir.path().join("config.json");
        let mut json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        json["rope_scaling"] =
            serde_json::json!({"rope_type": "linear", "factor": factor.parse::<f64>().unwrap()});
        std::fs::write(&path, json.to_string()).unwrap();
        let err = refused(dir.path(), &[], &["config.json", "rope factor is"]);
        assert!(!err.contains("overflow"), "{err}");
    }
}

#[test]
fn a_sliding_window_or_a_block_count_of_zero_is_refused_for_every_family() {
    // A window of 0 tokens panicked building the mask of llama, qwen2 and qwen3 files (Gemma
    // and Phi-3 refused it); 0 layers said "--layer 0 is out of range" with no --layer given.
    let dir = tempfile::tempdir().unwrap();
    for (file, arch) in [
        ("tiny-llama.gguf", "llama"),
        ("tiny-qwen2.gguf", "qwen2"),
        ("tiny-qwen3.gguf", "qwen3"),
        ("tiny-phi3.F32.gguf", "phi3"),
        ("tiny-gemma2.F32.gguf", "gemma2"),
        ("tiny-gemma3.F32.gguf", "gemma3"),
    ] {
        let window = format!("{arch}.attention.sliding_window");
        let path = edited_gguf_of(file, dir.path(), |md| {
            md.retain(|(k, _)| *k != window);
            md.push((window.clone(), Value::U32(0)));
        });
        refused(&path, &[], &["hostile.gguf", &window, "is 0"]);
        let layers = format!("{arch}.block_count");
        let path = edited_gguf_of(file, dir.path(), |md| set(md, &layers, Value::U32(0)));
        let err = refused(&path, &[], &["hostile.gguf", &layers, "is 0"]);
        assert!(!err.contains("--layer"), "{err}");
    }
}
