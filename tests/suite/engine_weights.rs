//! Checkpoint reading: key layouts, formats, and the errors for broken checkpoints.

use crate::support::engine as engine_support;

use std::path::Path;

use attnviz::model::{Error, Model};
use engine_support::*;

/// A fixed input over the tiny vocabulary: [CLS] the cat sat on the mat . [SEP] it ran ! [SEP]
const IDS: [u32; 12] = [2, 5, 6, 7, 8, 5, 9, 13, 3, 17, 12, 3];
const TYPES: [u32; 12] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1];

fn load_err(dir: &Path) -> String {
    match Model::from_dir(dir) {
        Ok(_) => panic!("{} loaded", dir.display()),
        Err(e) => {
            let msg = e.to_string();
            assert_one_line(&msg);
            msg
        }
    }
}

#[test]
fn prefixed_gamma_beta_layout_loads_identically() {
    let tmp = tempfile::tempdir().unwrap();
    let tiny = Tiny::default();
    let tensors = tiny_tensors(&tiny, 1);
    let config = tiny_config(&tiny, "gelu");
    write_model(&tmp.path().join("plain"), &config, &tensors);
    write_model(
        &tmp.path().join("legacy"),
        &config,
        &legacy_layout(&tiny, &tensors),
    );
    let plain = Model::from_dir(&tmp.path().join("plain")).unwrap();
    let legacy = Model::from_dir(&tmp.path().join("legacy")).unwrap();
    let a = plain.forward(&IDS, &TYPES, true).unwrap();
    let b = legacy.forward(&IDS, &TYPES, true).unwrap();
    assert_eq!(
        a, b,
        "same numbers under another layout must give the same outputs"
    );

    // And the LayerNorm parameters really were read: a model without them differs.
    let mut flat = tensors.clone();
    for (name, t) in flat.iter_mut() {
        if name.contains("LayerNorm.weight") {
            *t = t.ones_like().unwrap();
        } else if name.contains("LayerNorm.bias") {
            *t = t.zeros_like().unwrap();
        }
    }
    write_model(&tmp.path().join("flat"), &config, &flat);
    let c = Model::from_dir(&tmp.path().join("flat"))
        .unwrap()
        .forward(&IDS, &TYPES, false)
        .unwrap();
    assert!(max_diff(&a.hidden, &c.hidden) > 1e-2);
}

#[test]
fn real_minilm_in_legacy_layout_matches() {
    // The real weights renamed to `bert.` + gamma/beta, with extras, give identical attention.
    let src = minilm_dir();
    let tmp = tempfile::tempdir().unwrap();
    let tensors =
        candle_core::safetensors::load(src.join("model.safetensors"), &candle_core::Device::Cpu)
            .unwrap();
    let renamed: std::collections::HashMap<String, candle_core::Tensor> = tensors
        .into_iter()
        .map(|(name, t)| {
            let name = format!("bert.{name}")
                .replace("LayerNorm.weight", "LayerNorm.gamma")
                .replace("LayerNorm.bias", "LayerNorm.beta");
            (name, t)
        })
        .chain([(
            "cls.predictions.bias".to_string(),
            candle_core::Tensor::zeros(30522, candle_core::DType::F32, &candle_core::Device::Cpu)
                .unwrap(),
        )])
        .collect();
    candle_core::safetensors::save(&renamed, tmp.path().join("model.safetensors")).unwrap();
    for f in ["config.json", "tokenizer.json"] {
        std::fs::copy(src.join(f), tmp.path().join(f)).unwrap();
    }
    let text = "The quick brown fox jumps over the lazy dog.";
    let opts = attnviz::model::EncodeOptions::default();
    let a = Model::from_dir(&src)
        .unwrap()
        .encode(text, None, &opts)
        .unwrap();
    let b = Model::from_dir(tmp.path())
        .unwrap()
        .encode(text, None, &opts)
        .unwrap();
    assert_eq!(a.attention.weights(), b.attention.weights());
    assert_eq!(a.hidden, b.hidden);
}

#[test]
fn missing_tensor_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let tiny = Tiny::default();
    let tensors: Vec<_> = tiny_tensors(&tiny, 2)
        .into_iter()
        .filter(|(n, _)| n != "encoder.layer.1.attention.self.key.bias")
        .collect();
    write_model(tmp.path(), &tiny_config(&tiny, "gelu"), &tensors);
    let msg = load_err(tmp.path());
    assert!(
        msg.contains("tensor encoder.layer.1.attention.self.key.bias is missing from"),
        "{msg}"
    );

    // With the `bert.` prefix, the message names the tensor as the file would.
    let tmp = tempfile::tempdir().unwrap();
    let tensors: Vec<_> = legacy_layout(&tiny, &tiny_tensors(&tiny, 2))
        .into_iter()
        .filter(|(n, _)| n != "bert.encoder.layer.0.output.LayerNorm.beta")
        .collect();
    write_model(tmp.path(), &tiny_config(&tiny, "gelu"), &tensors);
    let msg = load_err(tmp.path());
    assert!(
        msg.contains("tensor bert.encoder.layer.0.output.LayerNorm.bias (or .beta) is missing"),
        "{msg}"
    );
}

#[test]
fn misshaped_tensor_names_both_shapes() {
    let tmp = tempfile::tempdir().unwrap();
    let tiny = Tiny::default();
    let mut tensors = tiny_tensors(&tiny, 3);
    for (name, t) in tensors.iter_mut() {
        if name == "encoder.layer.0.intermediate.dense.weight" {
            *t = Rng::new(9).tensor(&[36, 32], 0.1, 0.0);
        }
    }
    write_model(tmp.path(), &tiny_config(&tiny, "gelu"), &tensors);
    let msg = load_err(tmp.path());
    assert!(
        msg.contains("intermediate_size is 37")
            && msg.contains("tensor encoder.layer.0.intermediate.dense.weight")
            && msg.contains("has shape [36, 32]"),
        "{msg}"
    );

    // A later layer, which config.json's sizes do not single out, is checked as it is read.
    let mut tensors = tiny_tensors(&tiny, 3);
    for (name, t) in tensors.iter_mut() {
        if name == "encoder.layer.1.intermediate.dense.weight" {
            *t = Rng::new(9).tensor(&[36, 32], 0.1, 0.0);
        }
    }
    write_model(tmp.path(), &tiny_config(&tiny, "gelu"), &tensors);
    let msg = load_err(tmp.path());
    assert!(
        msg.contains("tensor encoder.layer.1.intermediate.dense.weight")
            && msg.contains("has shape [36, 32], but config.json implies [37, 32]"),
        "{msg}"
    );

    // A config that disagrees with the weights: hidden size.
    let tmp = tempfile::tempdir().unwrap();
    let bigger = Tiny { hidden: 36, ..tiny };
    write_model(
        tmp.path(),
        &tiny_config(&bigger, "gelu"),
        &tiny_tensors(&tiny, 3),
    );
    let msg = load_err(tmp.path());
    assert!(
        msg.contains("embeddings.word_embeddings.weight") && msg.contains("[24, 32]"),
        "{msg}"
    );
}

#[test]
fn not_bert_and_corrupt_files() {
    let tiny = Tiny::default();
    let tmp = tempfile::tempdir().unwrap();
    let other = vec![(
        "transformer.wte.weight".to_string(),
        Rng::new(1).tensor(&[4, 4], 1.0, 0.0),
    )];
    write_model(tmp.path(), &tiny_config(&tiny, "gelu"), &other);
    let msg = load_err(tmp.path());
    assert!(
        msg.contains("has no tensor named embeddings.word_embeddings.weight"),
        "{msg}"
    );

    std::fs::write(
        tmp.path().join("model.safetensors"),
        b"\x10\x00\x00\x00garbage",
    )
    .unwrap();
    let msg = load_err(tmp.path());
    assert!(msg.contains("cannot read weights"), "{msg}");

    std::fs::remove_file(tmp.path().join("model.safetensors")).unwrap();
    std::fs::write(tmp.path().join("pytorch_model.bin"), b"not a checkpoint").unwrap();
    let msg = load_err(tmp.path());
    assert!(msg.contains("not a PyTorch checkpoint"), "{msg}");

    std::fs::write(tmp.path().join("pytorch_model.bin"), b"\x80\x02garbage").unwrap();
    let msg = load_err(tmp.path());
    assert!(
        msg.contains("legacy (pre-1.6) PyTorch pickle") && msg.contains("torch.save"),
        "{msg}"
    );
}

#[test]
fn integer_weights_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let tiny = Tiny::default();
    let mut tensors = tiny_tensors(&tiny, 4);
    for (name, t) in tensors.iter_mut() {
        if name == "embeddings.token_type_embeddings.weight" {
            *t = t.to_dtype(candle_core::DType::I64).unwrap();
        }
    }
    write_model(tmp.path(), &tiny_config(&tiny, "gelu"), &tensors);
    let msg = load_err(tmp.path());
    assert!(
        msg.contains("embeddings.token_type_embeddings.weight")
            && msg.contains("not floating point"),
        "{msg}"
    );
}

#[test]
fn half_precision_weights_are_widened() {
    let tmp = tempfile::tempdir().unwrap();
    let tiny = Tiny::default();
    // Round through f16 first, so the f32 and f16 files hold the same values.
    let tensors: Vec<_> = tiny_tensors(&tiny, 5)
        .into_iter()
        .map(|(n, t)| {
            let t = t
                .to_dtype(candle_core::DType::F16)
                .unwrap()
                .to_dtype(candle_core::DType::F32)
                .unwrap();
            (n, t)
        })
        .collect();
    let half: Vec<_> = tensors
        .iter()
        .map(|(n, t)| (n.clone(), t.to_dtype(candle_core::DType::F16).unwrap()))
        .collect();
    write_model(
        &tmp.path().join("f32"),
        &tiny_config(&tiny, "gelu"),
        &tensors,
    );
    write_model(&tmp.path().join("f16"), &tiny_config(&tiny, "gelu"), &half);
    engine_support::assert_same_tensors(&tmp.path().join("f32"), &tmp.path().join("f16"));
    let a = Model::from_dir(&tmp.path().join("f32")).unwrap();
    let b = Model::from_dir(&tmp.path().join("f16")).unwrap();
    engine_support::assert_same_forward(
        &a.forward(&IDS, &TYPES, true).unwrap(),
        &b.forward(&IDS, &TYPES, true).unwrap(),
        "f16",
    );
}

#[test]
fn errors_are_typed() {
    let tmp = tempfile::tempdir().unwrap();
    match Model::from_dir(tmp.path()) {
        Err(Error::Source(e)) => {
            let msg = e.to_string();
            assert!(msg.contains("has no config.json"), "{msg}");
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("an empty folder loaded"),
    }
}

#[test]
fn sharded_safetensors_load_like_one_file() {
    let tmp = tempfile::tempdir().unwrap();
    let tiny = Tiny::default();
    let tensors = tiny_tensors(&tiny, 6);
    let config = tiny_config(&tiny, "gelu");
    write_model(&tmp.path().join("one"), &config, &tensors);

    let dir = tmp.path().join("sharded");
    write_model(&dir, &config, &[]);
    std::fs::remove_file(dir.join("model.safetensors")).unwrap();
    let (first, second) = tensors.split_at(tensors.len() / 2);
    let mut weight_map = serde_json::Map::new();
    for (shard, part) in [
        ("model-00001-of-00002.safetensors", first),
        ("model-00002-of-00002.safetensors", second),
    ] {
        let map: std::collections::HashMap<_, _> = part.iter().cloned().collect();
        candle_core::safetensors::save(&map, dir.join(shard)).unwrap();
        for (name, _) in part {
            weight_map.insert(name.clone(), shard.into());
        }
    }
    let index = serde_json::json!({ "metadata": {}, "weight_map": weight_map });
    std::fs::write(dir.join("model.safetensors.index.json"), index.to_string()).unwrap();

    let a = Model::from_dir(&tmp.path().join("one")).unwrap();
    let b = Model::from_dir(&dir).unwrap();
    assert_eq!(
        a.forward(&IDS, &TYPES, false).unwrap(),
        b.forward(&IDS, &TYPES, false).unwrap()
    );

    std::fs::remove_file(dir.join("model-00002-of-00002.safetensors")).unwrap();
    let msg = load_err(&dir);
    assert!(msg.contains("model-00002-of-00002.safetensors"), "{msg}");
}
