//! The CTranslate2 reader on the real Whisper tiny.en and base `model.bin` files, against the
//! independent numpy reader in `tests/reference/ct2_to_transformers.py`
//! (`tests/reference/audio-ct2-{tiny.en,base}.json`): every variable's name (in file order),
//! shape, type, stored bytes (sha256), the sum and first values of its f32 form; the aliases.
//!
//! Needs `scripts/fetch-whisper-tiny.sh` and `scripts/fetch-whisper-base.sh` (or
//! `ATTNVIZ_WHISPER_TINY_DIR` / `ATTNVIZ_WHISPER_BASE_DIR`); fails, never skips, without them.

use std::path::{Path, PathBuf};

use attnviz_model::formats::ctranslate2::{read_config, read_vocabulary, Ct2Model};
use serde_json::Value;
use sha2::{Digest, Sha256};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn model_dir(env: &str, folder: &str, script: &str) -> PathBuf {
    let dir = match std::env::var_os(env) {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => repo().join(".cache/models").join(folder),
    };
    assert!(
        dir.join("model.bin").is_file(),
        "{folder} not found: {} is missing. Run scripts/{script} (or set {env} to a folder holding model.bin).",
        dir.join("model.bin").display()
    );
    dir
}

fn check_against_reference(dir: &Path, reference: &str) {
    let expected: Value = serde_json::from_slice(
        &std::fs::read(repo().join("tests/reference").join(reference)).unwrap(),
    )
    .unwrap();
    let m = Ct2Model::open(&dir.join("model.bin")).unwrap();
    assert_eq!(
        u64::from(m.binary_version),
        expected["binary_version"].as_u64().unwrap()
    );
    assert_eq!(m.spec, expected["spec"].as_str().unwrap());
    assert_eq!(
        u64::from(m.revision),
        expected["revision"].as_u64().unwrap()
    );
    let vars = expected["variables"].as_array().unwrap();
    assert_eq!(m.variables().len(), vars.len());
    let mut worst_sum = 0f64;
    for (ours, exp) in m.variables().iter().zip(vars) {
        let name = exp["name"].as_str().unwrap();
        assert_eq!(ours.name, name);
        let shape: Vec<usize> = exp["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap() as usize)
            .collect();
        assert_eq!(ours.shape, shape, "{name}");
        assert_eq!(ours.dtype.name(), exp["dtype"].as_str().unwrap(), "{name}");
        let sha: String = Sha256::digest(m.raw(ours))
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(sha, exp["sha256"].as_str().unwrap(), "{name}: stored bytes");
        let t = m.tensor(name).unwrap();
        let first: Vec<f64> = t.values.iter().take(4).map(|&v| f64::from(v)).collect();
        let exp_first: Vec<f64> = exp["first"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert_eq!(first, exp_first, "{name}: first values");
        // numpy sums pairwise, this sums in order: the f32 values are equal (the hashes and
        // first values say so), the sums differ only by f64 rounding.
        let sum: f64 = t.values.iter().map(|&v| f64::from(v)).sum();
        let exp_sum = exp["sum"].as_f64().unwrap();
        let diff = (sum - exp_sum).abs();
        worst_sum = worst_sum.max(diff);
        assert!(
            diff <= 1e-6 + 1e-9 * exp_sum.abs(),
            "{name}: sum {sum} vs {exp_sum}"
        );
    }
    let aliases: Vec<Vec<String>> = m
        .aliases()
        .iter()
        .map(|(a, t)| vec![a.clone(), t.clone()])
        .collect();
    let exp_aliases: Vec<Vec<String>> =
        serde_json::from_value(expected["aliases"].clone()).unwrap();
    assert_eq!(aliases, exp_aliases);
    // Through the alias, the tied output projection is the token embedding.
    assert_eq!(
        m.tensor("decoder/projection/weight").unwrap(),
        m.tensor("decoder/embeddings/weight").unwrap()
    );
    eprintln!(
        "{reference}: {} variables, sums within {worst_sum:.1e}",
        m.variables().len()
    );
}

#[test]
fn whisper_tiny_en_model_bin_matches_numpy_reader() {
    let dir = model_dir(
        "ATTNVIZ_WHISPER_TINY_DIR",
        "whisper-tiny.en",
        "fetch-whisper-tiny.sh",
    );
    check_against_reference(&dir, "audio-ct2-tiny.en.json");
    let m = Ct2Model::open(&dir.join("model.bin")).unwrap();
    assert_eq!(m.scalar_int("encoder/num_heads"), Some(6));
    let config = read_config(&dir).unwrap().expect("config.json");
    assert_eq!(config["alignment_heads"].as_array().unwrap().len(), 8);
    let vocab = read_vocabulary(&dir).unwrap().expect("vocabulary");
    // One token per row of the embedding, the last the 30-second timestamp.
    assert_eq!(
        vocab.len(),
        m.get("decoder/embeddings/weight").unwrap().shape[0]
    );
    assert_eq!(vocab.last().map(String::as_str), Some("<|30.00|>"));
}

#[test]
fn whisper_base_model_bin_matches_numpy_reader() {
    let dir = model_dir(
        "ATTNVIZ_WHISPER_BASE_DIR",
        "whisper-base",
        "fetch-whisper-base.sh",
    );
    check_against_reference(&dir, "audio-ct2-base.json");
}
