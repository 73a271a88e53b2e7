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

use attnviz_formats::doc::corpus::{FileHashDoc, ModelFilesDoc};
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

/// One file's name (without its folder), size and SHA-256, as `model_files` records it.
pub type FileHash = FileHashDoc;

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
pub fn fingerprint(files: &ModelFiles) -> io::Result<ModelFilesDoc> {
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
    Ok(ModelFilesDoc {
        config: Some(config),
        tokenizer,
        weights,
    })
}

/// The hash of a GGUF file, which holds the config, the weights and the tokenizer in one:
/// `{"config": null, "weights": [{file, bytes, sha256}], "tokenizer": []}`.
pub fn fingerprint_gguf(path: &Path) -> io::Result<ModelFilesDoc> {
    let file = hash_file(path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    Ok(ModelFilesDoc {
        config: None,
        tokenizer: Vec::new(),
        weights: vec![file],
    })
}

/// The first difference between two fingerprints (`None`: the same model; a fingerprint not
/// known, `None`, has no files).
pub fn difference(a: Option<&ModelFilesDoc>, b: Option<&ModelFilesDoc>) -> Option<Difference> {
    const PARTS: [&str; 3] = ["model config", "model weights", "tokenizer"];
    let part = |m: Option<&ModelFilesDoc>, i: usize| -> Vec<FileHash> {
        match (m, i) {
            (None, _) => Vec::new(),
            (Some(m), 0) => m.config.iter().cloned().collect(),
            (Some(m), 1) => m.weights.clone(),
            (Some(m), _) => m.tokenizer.clone(),
        }
    };
    let named = |files: Vec<FileHash>| -> Vec<(String, String)> {
        files
            .into_iter()
            .map(|f| {
                let start = f.sha256.chars().take(12).collect();
                (f.file, start)
            })
            .collect()
    };
    (0..PARTS.len())
        .find(|&i| part(a, i) != part(b, i))
        .map(|i| Difference {
            part: PARTS[i],
            ours: named(part(a, i)),
            theirs: named(part(b, i)),
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
            if files.is_empty() {
                return "none".to_string();
            }
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
        let hash = |file: &str, bytes, sha256: &str| FileHash {
            file: file.into(),
            bytes,
            sha256: sha256.into(),
        };
        let f = |sha: &str| ModelFilesDoc {
            config: Some(hash("config.json", 1, "aa")),
            tokenizer: Vec::new(),
            weights: vec![hash("model.safetensors", 9, sha)],
        };
        let (same, other) = (f("0123456789abcdef"), f("fedcba9876543210"));
        assert_eq!(difference(Some(&same), Some(&same)), None);
        let d = difference(Some(&same), Some(&other)).unwrap().to_string();
        assert!(
            d.contains("model weights") && d.contains("0123456789ab"),
            "{d}"
        );
    }
}
