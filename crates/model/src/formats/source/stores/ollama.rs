//! Ollama's store: `manifests/HOST/NAMESPACE/MODEL/TAG` (a Docker-style manifest, JSON) names
//! its layers by digest, each a file `blobs/sha256-<hex>`. The model layer is a GGUF file; the
//! template, parameters and system layers are small texts; a projector layer is a
//! vision-language model's image encoder (GGUF too).

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::{existing_roots, Cause, Malformed, NameProblem};

use super::{
    cut, inside, is_gguf, plain, FileProblem, Listed, Searched, StoreError, StoreKind, StoreModel,
    MAX_LAYER_BYTES, MAX_LISTED, MAX_MANIFEST_BYTES,
};

/// The registry a bare name is pulled from.
const DEFAULT_HOST: &str = "registry.ollama.ai";
/// Its namespace for the library's models.
const DEFAULT_NAMESPACE: &str = "library";
/// The tag of a name that gives none.
const DEFAULT_TAG: &str = "latest";
/// The most layers a manifest may list (real ones have 2 to 6).
const MAX_LAYERS: usize = 64;

const MODEL: &str = "application/vnd.ollama.image.model";
const TEMPLATE: &str = "application/vnd.ollama.image.template";
const PARAMS: &str = "application/vnd.ollama.image.params";
const SYSTEM: &str = "application/vnd.ollama.image.system";
const PROJECTOR: &str = "application/vnd.ollama.image.projector";
const ADAPTER: &str = "application/vnd.ollama.image.adapter";

/// What an Ollama manifest keeps beside the model: read, bounded and checked against their
/// digests, reported (`attnviz models`, the run's notes) but not applied: the template is a Go
/// template (attnviz uses the GGUF file's own chat template), the parameters are sampling
/// settings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OllamaLayers {
    /// The template layer's text (a Go template).
    pub template: Option<String>,
    /// The parameters layer, as compact JSON (`{"stop":["<|im_end|>"],"temperature":0.7}`).
    pub parameters: Option<String>,
    /// The system layer's text (the default system prompt).
    pub system: Option<String>,
    /// The SHA-256 (hex) of the projector layer, when there is one.
    pub projector_sha256: Option<String>,
}

/// A name split into its parts.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Name {
    host: String,
    namespace: String,
    model: String,
    tag: String,
}

impl Name {
    /// `[HOST/][NAMESPACE/]MODEL[:TAG]`, each part a plain name (the host may hold a port).
    fn parse(text: &str) -> Result<Name, NameProblem> {
        let (path, tag) = match text.rsplit_once(':') {
            Some((p, t)) if !t.contains('/') => (p, t),
            _ => (text, DEFAULT_TAG),
        };
        plain(tag, &[], 128).map_err(|e| NameProblem::Tag(Box::new(e)))?;
        let parts: Vec<&str> = path.split('/').collect();
        let (host, namespace, model) = match parts.as_slice() {
            [m] => (DEFAULT_HOST, DEFAULT_NAMESPACE, *m),
            [n, m] => (DEFAULT_HOST, *n, *m),
            [h, n, m] => (*h, *n, *m),
            _ => {
                return Err(NameProblem::Parts(
                    "it has more than three parts (HOST/NAMESPACE/MODEL)",
                ))
            }
        };
        plain(host, &[':'], 253)?;
        plain(namespace, &[], 80)?;
        plain(model, &[], 80)?;
        Ok(Name {
            host: host.to_string(),
            namespace: namespace.to_string(),
            model: model.to_string(),
            tag: tag.to_string(),
        })
    }

    /// The manifest's path under `manifests/`.
    fn manifest(&self) -> PathBuf {
        [&self.host, &self.namespace, &self.model, &self.tag]
            .iter()
            .collect()
    }

    /// The shortest name that means it, as `ollama list` shows it, with the prefix
    /// (`ollama:qwen2.5:0.5b`, `ollama:me/tiny:latest`).
    fn full(&self) -> String {
        let path = if self.host != DEFAULT_HOST {
            format!("{}/{}/{}", self.host, self.namespace, self.model)
        } else if self.namespace != DEFAULT_NAMESPACE {
            format!("{}/{}", self.namespace, self.model)
        } else {
            self.model.clone()
        };
        format!("ollama:{path}:{}", self.tag)
    }
}

#[derive(Deserialize)]
struct Manifest {
    layers: Vec<Layer>,
}

#[derive(Deserialize)]
struct Layer {
    #[serde(rename = "mediaType")]
    media_type: String,
    digest: String,
    size: u64,
}

/// The model `text` names in the first of `folders` that has it.
pub(super) fn resolve(text: &str, folders: &[PathBuf]) -> Result<StoreModel, StoreError> {
    let name = Name::parse(text).map_err(|reason| StoreError::BadName {
        store: StoreKind::Ollama,
        name: cut(text, 200),
        reason,
    })?;
    let roots = existing_roots(StoreKind::Ollama, folders)?;
    for root in &roots {
        let manifest = root.join("manifests").join(name.manifest());
        if std::fs::symlink_metadata(&manifest).is_ok() {
            return read(root, &manifest, &name.full());
        }
    }
    // Other tags of the same model, as a hint.
    let mut near: Vec<String> = list(roots[0])
        .into_iter()
        .map(|l| l.name)
        .filter(|n| {
            n.trim_start_matches("ollama:")
                .rsplit_once(':')
                .is_some_and(|(m, _)| m.rsplit('/').next() == Some(name.model.as_str()))
        })
        .take(5)
        .collect();
    near.sort();
    let hint = if near.is_empty() {
        "; `ollama list` shows the names it has".to_string()
    } else {
        format!("; it has {}", near.join(", "))
    };
    Err(StoreError::NotFound {
        store: StoreKind::Ollama,
        name: name.full(),
        searched: Searched(roots.into_iter().cloned().collect()),
        hint,
    })
}

/// The blob a digest names: `blobs/sha256-<hex>`, for a digest of 64 hex digits only (a digest
/// is the manifest's text, and could otherwise climb out of `blobs/`).
fn blob(root: &Path, digest: &str) -> Option<(PathBuf, String)> {
    let hex = digest.strip_prefix("sha256:")?;
    (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then(|| {
        let hex = hex.to_ascii_lowercase();
        (root.join("blobs").join(format!("sha256-{hex}")), hex)
    })
}

/// Read the manifest at `path` in the store at `root`, and check the blobs it names.
fn read(root: &Path, path: &Path, name: &str) -> Result<StoreModel, StoreError> {
    let bad_manifest = |problem| StoreError::Manifest {
        name: name.to_string(),
        path: path.to_path_buf(),
        problem,
    };
    let real = inside(root, path).map_err(bad_manifest)?;
    let bytes = read_small(&real, MAX_MANIFEST_BYTES).map_err(bad_manifest)?;
    let manifest: Manifest = serde_json::from_slice(&bytes).map_err(|e| {
        bad_manifest(FileProblem::Malformed(Malformed::NotAManifest(Cause::of(
            e,
        ))))
    })?;
    if manifest.layers.len() > MAX_LAYERS {
        return Err(bad_manifest(FileProblem::Malformed(
            Malformed::TooManyLayers(manifest.layers.len()),
        )));
    }
    let mut model = None;
    let mut layers = OllamaLayers::default();
    let mut projector = None;
    for layer in &manifest.layers {
        let (file, hex) = blob(root, &layer.digest).ok_or_else(|| {
            bad_manifest(FileProblem::Malformed(Malformed::LayerDigest(cut(
                &layer.digest,
                80,
            ))))
        })?;
        let what = match layer.media_type.as_str() {
            MODEL => "model blob",
            TEMPLATE => "template layer",
            PARAMS => "parameters layer",
            SYSTEM => "system layer",
            PROJECTOR => "projector blob",
            ADAPTER => {
                return Err(StoreError::Adapter {
                    name: name.to_string(),
                })
            }
            // Licenses, messages and what later versions add: not needed to run it.
            _ => continue,
        };
        let bad = |problem| StoreError::File {
            name: name.to_string(),
            what,
            path: file.clone(),
            problem,
        };
        let real = inside(root, &file).map_err(bad)?;
        match layer.media_type.as_str() {
            MODEL | PROJECTOR => {
                check_gguf(&real, layer.size).map_err(bad)?;
                if layer.media_type == MODEL {
                    if model.is_some() {
                        return Err(bad_manifest(FileProblem::Malformed(Malformed::TwoModels)));
                    }
                    model = Some((real, layer.size, hex));
                } else {
                    projector = Some(real);
                    layers.projector_sha256 = Some(hex);
                }
            }
            _ => {
                // Small: read whole, and checked against their digests every time.
                let bytes = read_small(&real, MAX_LAYER_BYTES).map_err(bad)?;
                check_digest(&bytes, &hex).map_err(bad)?;
                let text = String::from_utf8(bytes)
                    .map_err(|_| bad(FileProblem::Malformed(Malformed::NotUtf8)))?;
                match layer.media_type.as_str() {
                    TEMPLATE => layers.template = Some(text),
                    SYSTEM => layers.system = Some(text),
                    _ => {
                        let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
                            bad(FileProblem::Malformed(Malformed::NotJson(Cause::of(e))))
                        })?;
                        layers.parameters = Some(json.to_string());
                    }
                }
            }
        }
    }
    let (gguf, size, hex) =
        model.ok_or_else(|| bad_manifest(FileProblem::Malformed(Malformed::NoModel(MODEL))))?;
    Ok(StoreModel {
        store: StoreKind::Ollama,
        name: name.to_string(),
        gguf,
        size,
        sha256: Some(hex),
        projector,
        layers,
        passed_over: Vec::new(),
    })
}

/// A GGUF blob: `size` bytes, starting with GGUF's magic.
fn check_gguf(path: &Path, size: u64) -> Result<(), FileProblem> {
    let actual = std::fs::metadata(path)
        .map_err(|e| FileProblem::Unreadable(Cause::of(e)))?
        .len();
    if actual != size {
        return Err(FileProblem::WrongSize {
            expected: size,
            actual,
        });
    }
    if !is_gguf(path)? {
        return Err(FileProblem::NotGguf);
    }
    Ok(())
}

fn read_small(path: &Path, limit: u64) -> Result<Vec<u8>, FileProblem> {
    let len = std::fs::metadata(path)
        .map_err(|e| FileProblem::Unreadable(Cause::of(e)))?
        .len();
    if len > limit {
        return Err(FileProblem::TooBig { limit });
    }
    crate::small_file::read_bytes(path, limit, "").map_err(|e| match e {
        crate::small_file::ReadError::NotFound => FileProblem::Missing,
        crate::small_file::ReadError::NotRegular(kind) => FileProblem::NotAFile(kind),
        crate::small_file::ReadError::TooLarge { .. } => FileProblem::TooBig { limit },
        e => FileProblem::Unreadable(Cause::of(e)),
    })
}

fn check_digest(bytes: &[u8], hex: &str) -> Result<(), FileProblem> {
    use sha2::Digest;
    let actual = super::hex(&sha2::Sha256::digest(bytes));
    if actual != hex {
        return Err(FileProblem::DigestMismatch {
            expected: hex.to_string(),
            actual,
        });
    }
    Ok(())
}

/// Every manifest under `root/manifests` (HOST/NAMESPACE/MODEL/TAG), read; folders that are
/// links are not followed.
pub(super) fn list(root: &Path) -> Vec<Listed> {
    let mut out = Vec::new();
    let mut budget = MAX_LISTED;
    let dirs = |dir: &Path, budget: &mut usize| -> Vec<(String, PathBuf, bool)> {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        let mut v = Vec::new();
        for e in entries.flatten() {
            if *budget == 0 {
                break;
            }
            *budget -= 1;
            let Ok(t) = e.file_type() else { continue };
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            v.push((name, e.path(), t.is_dir()));
        }
        v.sort();
        v
    };
    for (host, h, d1) in dirs(&root.join("manifests"), &mut budget) {
        for (ns, n, d2) in if d1 { dirs(&h, &mut budget) } else { vec![] } {
            for (model, m, d3) in if d2 { dirs(&n, &mut budget) } else { vec![] } {
                for (tag, path, d4) in if d3 { dirs(&m, &mut budget) } else { vec![] } {
                    if d4 {
                        continue;
                    }
                    let parsed = Name::parse(&format!("{host}/{ns}/{model}:{tag}"));
                    let Ok(name) = parsed else { continue };
                    let full = name.full();
                    out.push(Listed {
                        model: read(root, &path, &full),
                        name: full,
                    });
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_take_host_namespace_and_tag_as_ollama_does() {
        let n = Name::parse("qwen2.5:0.5b").unwrap();
        assert_eq!(
            (
                n.host.as_str(),
                n.namespace.as_str(),
                n.model.as_str(),
                n.tag.as_str()
            ),
            (DEFAULT_HOST, DEFAULT_NAMESPACE, "qwen2.5", "0.5b")
        );
        assert_eq!(n.full(), "ollama:qwen2.5:0.5b");
        assert_eq!(
            n.manifest(),
            Path::new("registry.ollama.ai/library/qwen2.5/0.5b")
        );
        assert_eq!(Name::parse("tiny").unwrap().full(), "ollama:tiny:latest");
        assert_eq!(
            Name::parse("me/tiny").unwrap().full(),
            "ollama:me/tiny:latest"
        );
        let n = Name::parse("localhost:5000/me/tiny:q8").unwrap();
        assert_eq!(n.host, "localhost:5000");
        assert_eq!(n.full(), "ollama:localhost:5000/me/tiny:q8");
        assert_eq!(Name::parse("localhost:5000/me/tiny").unwrap().tag, "latest");
        for (bad, says) in [
            ("../../x", "starts with a dot"),
            ("..", "starts with a dot"),
            ("a/b/c/d", "more than three parts"),
            ("", "empty"),
            ("x:", "empty"),
            ("x:../y", "holds ':'"),
            ("x/", "empty"),
            ("/etc/passwd", "empty"),
            ("a\\b", "'\\\\'"),
            ("tiny:.hidden", "starts with a dot"),
        ] {
            let e = Name::parse(bad).unwrap_err();
            assert!(e.to_string().contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn a_digest_names_a_blob_only_as_64_hex_digits() {
        let root = Path::new("/s");
        let hex = "ab".repeat(32);
        assert_eq!(
            blob(root, &format!("sha256:{hex}")),
            Some((root.join(format!("blobs/sha256-{hex}")), hex.clone()))
        );
        for bad in [
            "sha256:../../etc/passwd".to_string(),
            format!("sha512:{hex}"),
            format!("sha256:{}", &hex[1..]),
            format!("sha256:{}/x", &hex[2..]),
        ] {
            assert_eq!(blob(root, &bad), None, "{bad}");
        }
    }
}
