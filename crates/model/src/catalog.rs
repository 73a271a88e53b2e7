//! What models this machine has: every model in Ollama's, LM Studio's and llama.cpp's stores
//! ([`crate::formats::source::stores`]) and in the Hugging Face cache, each with its family, size,
//! quantisation, and whether attnviz can run it, decided by the loader's own checks on the
//! files' headers and config (never their weights: a listing of a dozen 5 GB models reads a few
//! megabytes).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::formats::config::ConfigFile;
use crate::formats::gguf::GgufFile;
use crate::formats::source::stores::{self, OllamaLayers, StoreKind, StoreModel, Stores};
use crate::formats::source::{self, Hub};
use crate::formats::{validate, weights::Checkpoint};
use crate::{families::registry, Error, SourceError};

/// Where a listed model is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Origin {
    /// In a program's store.
    Store(StoreKind),
    /// In the Hugging Face cache.
    HuggingFace,
}

impl Origin {
    /// Every origin, in the order a listing shows them.
    pub const ALL: [Origin; 4] = [
        Origin::Store(StoreKind::Ollama),
        Origin::Store(StoreKind::LmStudio),
        Origin::Store(StoreKind::LlamaCpp),
        Origin::HuggingFace,
    ];

    /// A short name (`ollama`, `lmstudio`, `llamacpp`, `huggingface`).
    pub fn key(self) -> &'static str {
        match self {
            Origin::Store(k) => k.prefix(),
            Origin::HuggingFace => "huggingface",
        }
    }

    /// The program's name (`Ollama`, `Hugging Face cache`).
    pub fn program(self) -> &'static str {
        match self {
            Origin::Store(k) => k.program(),
            Origin::HuggingFace => "Hugging Face cache",
        }
    }
}

/// One listed model.
#[derive(Debug)]
pub struct Entry {
    /// The name to give the loader (`ollama:tiny:latest`, `org/name`).
    pub name: String,
    /// Where it is kept.
    pub origin: Origin,
    /// The hub revision (a branch or commit) for the Hugging Face cache.
    pub revision: Option<String>,
    /// Its GGUF file, or its snapshot folder.
    pub path: Option<PathBuf>,
    /// Its family: `general.architecture` or config.json's `model_type` (what attnviz calls it
    /// when it runs it).
    pub family: Option<String>,
    /// Bytes on disk (the GGUF file, or every file of the snapshot).
    pub size: Option<u64>,
    /// A GGUF file's type (`Q4_K_M`), else its most used tensor type; a safetensors
    /// checkpoint's most used dtype (`BF16`).
    pub quantization: Option<String>,
    /// What an Ollama manifest keeps beside the model.
    pub layers: OllamaLayers,
    /// Whether it has a vision-language projector.
    pub projector: bool,
    /// `Ok` when attnviz can run it; else the one-line reason a run would give.
    pub verdict: Result<(), Error>,
}

/// One store searched.
#[derive(Clone, Debug)]
pub struct Searched {
    /// Which.
    pub origin: Origin,
    /// The folders searched.
    pub folders: Vec<PathBuf>,
    /// Those of them that exist.
    pub found: Vec<PathBuf>,
}

/// What [`list`] found.
#[derive(Debug)]
pub struct Listing {
    /// The models, by store then name.
    pub entries: Vec<Entry>,
    /// Where each store was searched.
    pub searched: Vec<Searched>,
}

/// Every model in `stores` and in `hub`'s cache folder, checked. With `verify`, the SHA-256 of
/// each blob an Ollama manifest names is checked too (reading every byte).
pub fn list(stores: &Stores, hub: &Hub, verify: bool) -> Listing {
    let mut entries = Vec::new();
    let mut searched = Vec::new();
    for kind in StoreKind::ALL {
        let (listed, found) = stores::list(kind, stores);
        searched.push(Searched {
            origin: Origin::Store(kind),
            folders: stores.folders(kind).to_vec(),
            found,
        });
        for l in listed {
            entries.push(match l.model {
                Ok(model) => store_entry(model, verify),
                Err(e) => Entry {
                    name: l.name,
                    origin: Origin::Store(kind),
                    revision: None,
                    path: None,
                    family: None,
                    size: None,
                    quantization: None,
                    layers: OllamaLayers::default(),
                    projector: false,
                    verdict: Err(SourceError::from(e).into()),
                },
            });
        }
    }
    let cache = &hub.cache_dir;
    searched.push(Searched {
        origin: Origin::HuggingFace,
        folders: vec![cache.clone()],
        found: if cache.is_dir() {
            vec![cache.clone()]
        } else {
            Vec::new()
        },
    });
    entries.extend(hub_entries(cache));
    Listing { entries, searched }
}

fn store_entry(model: StoreModel, verify: bool) -> Entry {
    let mut entry = gguf_entry(&model.gguf, model.name.clone(), Origin::Store(model.store));
    entry.size = Some(model.size);
    entry.projector = model.projector.is_some();
    if verify && entry.verdict.is_ok() {
        entry.verdict = stores::verify(&model).map_err(|e| SourceError::from(e).into());
    }
    entry.layers = model.layers;
    entry
}

/// A GGUF file's entry: what the loader checks before it reads a tensor.
pub fn gguf_entry(path: &Path, name: String, origin: Origin) -> Entry {
    let mut entry = Entry {
        name,
        origin,
        revision: None,
        path: Some(path.to_path_buf()),
        family: None,
        size: std::fs::metadata(path).ok().map(|m| m.len()),
        quantization: None,
        layers: OllamaLayers::default(),
        projector: false,
        verdict: Ok(()),
    };
    let file = match GgufFile::open(path) {
        Ok(f) => f,
        Err(e) => {
            entry.verdict = Err(e.into());
            return entry;
        }
    };
    entry.family = file.architecture().ok().map(str::to_string);
    entry.quantization = gguf_quantization(&file);
    let origin = path.display().to_string();
    entry.verdict = crate::gguf_checks(&file, &origin, None).map(|_| ());
    entry
}

/// The file type llama.cpp wrote (`general.file_type`, named as llama.cpp's `LLAMA_FTYPE_*`),
/// else the tensor type that takes the most bytes.
fn gguf_quantization(file: &GgufFile) -> Option<String> {
    if let Some(name) = file
        .get_u64("general.file_type")
        .ok()
        .flatten()
        .and_then(file_type_name)
    {
        return Some(name.to_string());
    }
    let mut bytes: BTreeMap<&str, usize> = BTreeMap::new();
    for t in file.tensors() {
        *bytes.entry(t.dtype).or_default() += t.bytes;
    }
    dominant(bytes)
}

fn dominant<K: Ord + ToString, V: Ord + Copy>(counts: BTreeMap<K, V>) -> Option<String> {
    counts
        .into_iter()
        .max_by_key(|(_, v)| *v)
        .map(|(k, _)| k.to_string())
}

/// llama.cpp's `enum llama_ftype` (llama.h), by number.
fn file_type_name(n: u64) -> Option<&'static str> {
    Some(match n {
        0 => "F32",
        1 => "F16",
        2 => "Q4_0",
        3 => "Q4_1",
        7 => "Q8_0",
        8 => "Q5_0",
        9 => "Q5_1",
        10 => "Q2_K",
        11 => "Q3_K_S",
        12 => "Q3_K_M",
        13 => "Q3_K_L",
        14 => "Q4_K_S",
        15 => "Q4_K_M",
        16 => "Q5_K_S",
        17 => "Q5_K_M",
        18 => "Q6_K",
        19 => "IQ2_XXS",
        20 => "IQ2_XS",
        21 => "Q2_K_S",
        22 => "IQ3_XS",
        23 => "IQ3_XXS",
        24 => "IQ1_S",
        25 => "IQ4_NL",
        26 => "IQ3_S",
        27 => "IQ3_M",
        28 => "IQ2_S",
        29 => "IQ2_M",
        30 => "IQ4_XS",
        31 => "IQ1_M",
        32 => "BF16",
        36 => "TQ1_0",
        37 => "TQ2_0",
        38 => "MXFP4_MOE",
        _ => return None,
    })
}

/// Every snapshot with a config.json in the Hugging Face cache at `cache`
/// (`models--ORG--NAME/snapshots/REV`), named by the ref that points to it (`main`) or its
/// commit.
fn hub_entries(cache: &Path) -> Vec<Entry> {
    let mut out = Vec::new();
    let Ok(repos) = std::fs::read_dir(cache) else {
        return out;
    };
    let mut repos: Vec<(String, PathBuf)> = repos
        .flatten()
        .take(stores::MAX_LISTED)
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let id = name.strip_prefix("models--")?.replacen("--", "/", 1);
            Some((id, e.path()))
        })
        .collect();
    repos.sort();
    for (id, repo) in repos {
        // Refs name commits; the snapshot each names is listed under the ref's name.
        let mut refs: BTreeMap<String, String> = BTreeMap::new();
        for r in std::fs::read_dir(repo.join("refs"))
            .into_iter()
            .flatten()
            .flatten()
        {
            let ref_name = r.file_name().to_string_lossy().into_owned();
            if let Ok(commit) = crate::small_file::read_text(&r.path(), 1024, "") {
                refs.entry(commit.trim().to_string()).or_insert(ref_name);
            }
        }
        let mut snapshots: Vec<PathBuf> = std::fs::read_dir(repo.join("snapshots"))
            .into_iter()
            .flatten()
            .flatten()
            .take(stores::MAX_LISTED)
            .map(|e| e.path())
            .filter(|p| p.join("config.json").is_file())
            .collect();
        snapshots.sort();
        for snapshot in snapshots {
            let commit = snapshot
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let revision = refs.get(&commit).cloned().unwrap_or(commit);
            out.push(folder_entry(&snapshot, &id, revision));
        }
    }
    out
}

/// A model folder's entry: its files found as the loader finds them, its config read and its
/// checkpoint's headers checked against it.
fn folder_entry(dir: &Path, id: &str, revision: String) -> Entry {
    let mut entry = Entry {
        name: id.to_string(),
        origin: Origin::HuggingFace,
        revision: Some(revision),
        path: Some(dir.to_path_buf()),
        family: None,
        size: Some(folder_size(dir)),
        quantization: None,
        layers: OllamaLayers::default(),
        projector: false,
        verdict: Ok(()),
    };
    let config = ConfigFile::load(&dir.join("config.json"));
    if let Ok(c) = &config {
        entry.family = c.model_type().ok().flatten();
    }
    entry.verdict = (|| {
        let config = config?;
        let family = registry::family_of(&config)?;
        let files = source::from_dir_with(dir, id, &registry::tokenizer_files)?;
        // A quantised checkpoint says its method (gpt-oss's `mxfp4`); its blocks are bytes.
        let method = config
            .section("quantization_config")
            .ok()
            .flatten()
            .and_then(|q| q.string("quant_method").ok().flatten())
            .map(|m| m.to_uppercase());
        entry.quantization = method
            .or_else(|| checkpoint_dtype(&files.weights))
            .or_else(|| config.string("torch_dtype").ok().flatten());
        let family_config = (family.config)(&config)?;
        let ckpt = Checkpoint::open(&files.weights, &family.anchor)?;
        let (dims, counts) = family_config.checks();
        validate::config_matches(config.path(), &ckpt, &dims, &counts)?;
        Ok::<(), Error>(())
    })();
    entry
}

/// The dtype that takes the most bytes in safetensors files (read from their headers).
fn checkpoint_dtype(weights: &[PathBuf]) -> Option<String> {
    let mut bytes: BTreeMap<String, usize> = BTreeMap::new();
    for path in weights {
        if path.extension().is_none_or(|e| e != "safetensors") {
            return None;
        }
        let file = crate::small_file::open_regular(path).ok()?;
        // SAFETY: mapped read-only; only the header's pages are touched.
        let map = unsafe { memmap2::Mmap::map(&file) }.ok()?;
        let (_, meta) = safetensors::SafeTensors::read_metadata(&map).ok()?;
        for info in meta.tensors().values() {
            let (start, end) = info.data_offsets;
            *bytes.entry(format!("{:?}", info.dtype)).or_default() += end.saturating_sub(start);
        }
    }
    dominant(bytes)
}

/// The bytes of every file in `dir` (links followed: the cache's snapshots link to blobs).
fn folder_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .take(stores::MAX_LISTED)
        .filter_map(|e| std::fs::metadata(e.path()).ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_most_used_type_names_an_unlabelled_file() {
        let mut m = BTreeMap::new();
        m.insert("F32", 10usize);
        m.insert("Q4_K", 900);
        m.insert("Q6_K", 200);
        assert_eq!(dominant(m), Some("Q4_K".to_string()));
        assert_eq!(file_type_name(15), Some("Q4_K_M"));
        assert_eq!(file_type_name(4), None);
    }
}
