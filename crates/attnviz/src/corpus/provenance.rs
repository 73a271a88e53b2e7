//! Which model a run used, exactly: the SHA-256 of each of its files.
//!
//! The weights are identified by the SHA-256 of every byte of each weight file, streamed once.
//! Cheaper fingerprints were considered and rejected: a safetensors header with the file size
//! and modification time is the same for two fine-tunings of one architecture (same names,
//! shapes and offsets) and changes when a file is merely copied (mtime); sampling blocks can
//! miss a changed tensor. The full hash is what `sha256sum model.safetensors` prints and what
//! the Hugging Face hub lists as the file's LFS object id, so a user can check it by hand. It
//! costs one read of the weights, done on a thread of its own while the model loads (measured
//! in docs/corpus.md: well under the load itself for MiniLM; about 1.5 GB/s with the CPU's SHA
//! instructions).
//!
//! The config (`config.json`) and every tokenizer file present are hashed too: either changes
//! what the statistics mean. A GGUF file holds all three, and is hashed once.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::lines::hex;
use crate::model::ModelFiles;

/// Files that can define a tokenizer, hashed when present in the tokenizer folder.
pub const TOKENIZER_FILES: [&str; 10] = [
    "tokenizer.json",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "sentencepiece.bpe.model",
    "spiece.model",
    "tokenizer.model",
];

/// One file's name (without its folder), size and SHA-256.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileHash {
    /// File name.
    pub file: String,
    /// Size in bytes.
    pub bytes: u64,
    /// SHA-256, lower-case hex.
    pub sha256: String,
}

impl FileHash {
    fn json(&self) -> Value {
        json!({"file": self.file, "bytes": self.bytes, "sha256": self.sha256})
    }
}

/// Hash the file at `path`, streaming it.
pub fn hash_file(path: &Path) -> io::Result<FileHash> {
    let mut file = File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut bytes = 0u64;
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buf[..n]);
        bytes += n as u64;
    }
    Ok(FileHash {
        file: path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        bytes,
        sha256: hex(&hasher.finalize()),
    })
}

/// The hashes of a model's config, weights and tokenizer files, as the partial file records
/// them: `{"config": {file, bytes, sha256}, "weights": [...], "tokenizer": [...]}`.
pub fn fingerprint(files: &ModelFiles) -> io::Result<Value> {
    let named = |path: &Path| {
        hash_file(path).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
    };
    let config = named(&files.config)?;
    let weights = files
        .weights
        .iter()
        .map(|p| named(p))
        .collect::<io::Result<Vec<_>>>()?;
    let mut tokenizer = Vec::new();
    for name in TOKENIZER_FILES {
        let path = files.tokenizer_dir.join(name);
        if path.is_file() {
            tokenizer.push(named(&path)?);
        }
    }
    Ok(json!({
        "config": config.json(),
        "weights": weights.iter().map(FileHash::json).collect::<Vec<_>>(),
        "tokenizer": tokenizer.iter().map(FileHash::json).collect::<Vec<_>>(),
    }))
}

/// The hash of a GGUF file, which holds the config, the weights and the tokenizer in one:
/// `{"config": null, "weights": [{file, bytes, sha256}], "tokenizer": []}`.
pub fn fingerprint_gguf(path: &Path) -> io::Result<Value> {
    let file = hash_file(path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    Ok(json!({"config": null, "weights": [file.json()], "tokenizer": []}))
}

/// The first difference between two fingerprints (`None`: the same model).
pub fn difference(a: &Value, b: &Value) -> Option<Difference> {
    let files = |v: &Value| -> Vec<(String, String)> {
        let items: Vec<&Value> = match v {
            Value::Array(items) => items.iter().collect(),
            other => vec![other],
        };
        items
            .iter()
            .map(|f| {
                (
                    f["file"].as_str().unwrap_or("?").to_string(),
                    f["sha256"]
                        .as_str()
                        .map_or("?", |s| &s[..s.len().min(12)])
                        .to_string(),
                )
            })
            .collect()
    };
    ["config", "weights", "tokenizer"]
        .into_iter()
        .find(|part| a[part] != b[part])
        .map(|part| Difference {
            part: match part {
                "config" => "model config",
                "weights" => "model weights",
                _ => "tokenizer",
            },
            ours: files(&a[part]),
            theirs: files(&b[part]),
        })
}

/// Which of two models' files differ: the first part (config, weights, tokenizer) that does,
/// with each side's files and the start of their SHA-256.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Difference {
    /// `model config`, `model weights` or `tokenizer`.
    pub part: &'static str,
    /// The first model's files of that part: (name, SHA-256's first 12 digits).
    pub ours: Vec<(String, String)>,
    /// The second model's.
    pub theirs: Vec<(String, String)>,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list = |files: &[(String, String)]| {
            files
                .iter()
                .map(|(file, sha)| format!("{file} sha256 {sha}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        write!(
            f,
            "another {} ({} against {})",
            self.part,
            list(&self.ours),
            list(&self.theirs)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_hashes_are_sha256_of_the_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("w.bin");
        std::fs::write(&p, b"abc").unwrap();
        let h = hash_file(&p).unwrap();
        assert_eq!(h.file, "w.bin");
        assert_eq!(h.bytes, 3);
        // FIPS 180-2's example: SHA-256("abc").
        assert_eq!(
            h.sha256,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn a_different_file_is_named() {
        let f = |sha: &str| {
            json!({"config": {"file": "config.json", "bytes": 1, "sha256": "aa"},
            "weights": [{"file": "model.safetensors", "bytes": 9, "sha256": sha}], "tokenizer": []})
        };
        assert_eq!(
            difference(&f("0123456789abcdef"), &f("0123456789abcdef")),
            None
        );
        let d = difference(&f("0123456789abcdef"), &f("fedcba9876543210"))
            .unwrap()
            .to_string();
        assert!(
            d.contains("model weights") && d.contains("0123456789ab"),
            "{d}"
        );
    }
}
