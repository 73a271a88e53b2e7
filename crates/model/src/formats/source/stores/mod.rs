//! Models other programs keep on this machine, found by name: Ollama's store
//! (`ollama:NAME[:TAG]`), LM Studio's folder (`lmstudio:PUBLISHER/MODEL[/FILE]`) and
//! llama.cpp's cache (`llamacpp:NAME`). Each keeps its models as GGUF files, which attnviz reads
//! ([`crate::Model::from_gguf`]); this module only finds the file, and what the store says
//! beside it (Ollama's template, parameters, system prompt and projector layers).
//!
//! A store is input like any other: its manifests are read bounded ([`MAX_MANIFEST_BYTES`]), a
//! name cannot climb out of the store (`ollama:../../x` is refused before any path is made), a
//! link that leads out of the store is refused, a blob must be a regular file of the size its
//! manifest states and start with GGUF's magic. The SHA-256 of a model blob (gigabytes) is
//! checked only when asked ([`verify`]): a run reads the header, never the whole file, and
//! hashing reads all of it (a 5 GB blob: about 3 s of SHA-256 at the 1.6 GB/s measured here,
//! and the disk's time to read 5 GB when it is not in the page cache). Nothing is ever written
//! in a store.

use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

mod llamacpp;
mod lmstudio;
mod ollama;

pub use ollama::OllamaLayers;

/// The largest Ollama manifest read (real ones are under 2 kB).
pub const MAX_MANIFEST_BYTES: u64 = 1 << 20;

/// The largest template, parameters or system layer read (real ones are a few kilobytes).
pub const MAX_LAYER_BYTES: u64 = 1 << 20;

/// The most entries a listing walks in one store folder, so a hostile store cannot make
/// `attnviz models` run for ever.
pub const MAX_LISTED: usize = 10_000;

/// Which program's store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StoreKind {
    /// Ollama: manifests naming `sha256-…` blobs.
    Ollama,
    /// LM Studio: `PUBLISHER/MODEL/FILE.gguf`.
    LmStudio,
    /// llama.cpp's download cache: `ORG_REPO_FILE.gguf`.
    LlamaCpp,
}

impl StoreKind {
    /// Every store, in the order listings show them.
    pub const ALL: [StoreKind; 3] = [StoreKind::Ollama, StoreKind::LmStudio, StoreKind::LlamaCpp];

    /// The prefix of a model named in it, without the colon (`ollama`).
    pub fn prefix(self) -> &'static str {
        match self {
            StoreKind::Ollama => "ollama",
            StoreKind::LmStudio => "lmstudio",
            StoreKind::LlamaCpp => "llamacpp",
        }
    }

    /// The program's name, for messages (`LM Studio`).
    pub fn program(self) -> &'static str {
        match self {
            StoreKind::Ollama => "Ollama",
            StoreKind::LmStudio => "LM Studio",
            StoreKind::LlamaCpp => "llama.cpp",
        }
    }

    /// The form of a name in it, for messages (`ollama:NAME[:TAG]`).
    pub fn form(self) -> &'static str {
        match self {
            StoreKind::Ollama => "ollama:NAME[:TAG]",
            StoreKind::LmStudio => "lmstudio:PUBLISHER/MODEL[/FILE]",
            StoreKind::LlamaCpp => "llamacpp:NAME",
        }
    }

    /// The environment variable that names its folder.
    pub fn variable(self) -> &'static str {
        match self {
            StoreKind::Ollama => "OLLAMA_MODELS",
            StoreKind::LmStudio => "LMSTUDIO_MODELS",
            StoreKind::LlamaCpp => "LLAMA_CACHE",
        }
    }
}

impl fmt::Display for StoreKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.program())
    }
}

/// The operating system whose default folders apply (a parameter, so every OS's defaults are
/// testable anywhere).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Os {
    /// Linux and other Unix.
    Linux,
    /// macOS.
    MacOs,
    /// Windows.
    Windows,
}

impl Os {
    /// The system this program was built for.
    pub fn this() -> Os {
        if cfg!(windows) {
            Os::Windows
        } else if cfg!(target_os = "macos") {
            Os::MacOs
        } else {
            Os::Linux
        }
    }
}

/// The folders each store may be in, in the order they are searched.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stores {
    /// Ollama's `models` folders (holding `manifests/` and `blobs/`).
    pub ollama: Vec<PathBuf>,
    /// LM Studio's models folders (holding `PUBLISHER/MODEL/`).
    pub lmstudio: Vec<PathBuf>,
    /// llama.cpp's cache folders.
    pub llamacpp: Vec<PathBuf>,
}

impl Stores {
    /// The folders from the environment of this process ([`Stores::from_vars`]).
    pub fn from_env() -> Stores {
        Self::from_vars(|k| std::env::var(k).ok(), Os::this())
    }

    /// The folders, with the variables looked up through `var` (an empty one counts as unset):
    ///
    /// - Ollama: `OLLAMA_MODELS`; else `~/.ollama/models` (`%USERPROFILE%\.ollama\models` on
    ///   Windows), then, on Linux, `/usr/share/ollama/.ollama/models` (the service install).
    /// - LM Studio: `LMSTUDIO_MODELS`; else the `downloadsFolder` of
    ///   `~/.lmstudio/settings.json`, `~/.lmstudio/models`, then the older
    ///   `~/.cache/lm-studio/models`.
    /// - llama.cpp: `LLAMA_CACHE`; else `$XDG_CACHE_HOME/llama.cpp` or `~/.cache/llama.cpp` on
    ///   Linux, `~/Library/Caches/llama.cpp` on macOS, `%LOCALAPPDATA%\llama.cpp` on Windows.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>, os: Os) -> Stores {
        let var = |k: &str| var(k).filter(|v| !v.is_empty()).map(PathBuf::from);
        let home = match os {
            Os::Windows => var("USERPROFILE").or_else(|| var("HOME")),
            _ => var("HOME"),
        };
        let under_home = |rel: &[&str]| {
            home.as_ref().map(|h| {
                let mut p = h.clone();
                p.extend(rel);
                p
            })
        };
        let ollama = match var("OLLAMA_MODELS") {
            Some(dir) => vec![dir],
            None => {
                let mut dirs: Vec<PathBuf> =
                    under_home(&[".ollama", "models"]).into_iter().collect();
                if os == Os::Linux {
                    dirs.push(PathBuf::from("/usr/share/ollama/.ollama/models"));
                }
                dirs
            }
        };
        let lmstudio = match var("LMSTUDIO_MODELS") {
            Some(dir) => vec![dir],
            None => {
                let mut dirs = Vec::new();
                if let Some(settings) = under_home(&[".lmstudio", "settings.json"]) {
                    dirs.extend(lmstudio::downloads_folder(&settings));
                }
                dirs.extend(under_home(&[".lmstudio", "models"]));
                dirs.extend(under_home(&[".cache", "lm-studio", "models"]));
                dirs.dedup();
                dirs
            }
        };
        let llamacpp = match var("LLAMA_CACHE") {
            Some(dir) => vec![dir],
            None => match os {
                Os::Linux => var("XDG_CACHE_HOME")
                    .map(|c| c.join("llama.cpp"))
                    .or_else(|| under_home(&[".cache", "llama.cpp"]))
                    .into_iter()
                    .collect(),
                Os::MacOs => under_home(&["Library", "Caches", "llama.cpp"])
                    .into_iter()
                    .collect(),
                Os::Windows => var("LOCALAPPDATA")
                    .map(|d| d.join("llama.cpp"))
                    .into_iter()
                    .collect(),
            },
        };
        Stores {
            ollama,
            lmstudio,
            llamacpp,
        }
    }

    /// The folders searched for `kind`.
    pub fn folders(&self, kind: StoreKind) -> &[PathBuf] {
        match kind {
            StoreKind::Ollama => &self.ollama,
            StoreKind::LmStudio => &self.lmstudio,
            StoreKind::LlamaCpp => &self.llamacpp,
        }
    }
}

/// A model found in a store: its GGUF file and what the store keeps beside it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreModel {
    /// The store.
    pub store: StoreKind,
    /// Its name in full, as it can be typed (`ollama:qwen2.5:0.5b`, `ollama:tiny:latest`).
    pub name: String,
    /// The GGUF file attnviz reads.
    pub gguf: PathBuf,
    /// Its size in bytes.
    pub size: u64,
    /// The SHA-256 the store names it by (Ollama's digest, lower-case hex), checked by
    /// [`verify`].
    pub sha256: Option<String>,
    /// A vision-language model's projector (Ollama's projector layer, LM Studio's
    /// `mmproj-*.gguf` beside the model).
    pub projector: Option<PathBuf>,
    /// Ollama's template, parameters and system layers, read and checked.
    pub layers: OllamaLayers,
    /// The other GGUF files beside it when a name did not say which one and this one was taken
    /// (LM Studio's folders with several quantisations), by name.
    pub passed_over: Vec<String>,
}

/// Where a store was searched, for messages: its folders, joined.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Searched(pub Vec<PathBuf>);

impl fmt::Display for Searched {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("no folder (neither its variable nor HOME is set)");
        }
        let names: Vec<String> = self.0.iter().map(|p| p.display().to_string()).collect();
        f.write_str(&names.join(", "))
    }
}

/// What is wrong with a store's file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileProblem {
    /// Nothing is there.
    Missing,
    /// Something other than a regular file is (a folder, a FIFO, …).
    NotAFile(&'static str),
    /// It cannot be read: the system's reason.
    Unreadable(Cause),
    /// A symbolic link that leads out of the store, to `target`.
    OutsideStore {
        /// Where it leads.
        target: PathBuf,
    },
    /// Shorter or longer than the manifest says.
    WrongSize {
        /// Bytes the manifest states.
        expected: u64,
        /// Bytes on disk.
        actual: u64,
    },
    /// It does not start with GGUF's magic bytes.
    NotGguf,
    /// Its SHA-256 is not the one the manifest names it by.
    DigestMismatch {
        /// The manifest's (hex).
        expected: String,
        /// The file's (hex).
        actual: String,
    },
    /// Larger than such a file may be read (`limit` bytes).
    TooBig {
        /// The limit.
        limit: u64,
    },
    /// Not valid JSON or not the layout expected.
    Malformed(Malformed),
}

/// An error of the system or of a parser, shared so that the problems holding it stay `Clone`
/// and comparable (by what they say).
#[derive(Clone, Debug)]
pub struct Cause(std::sync::Arc<dyn std::error::Error + Send + Sync>);

impl Cause {
    /// `e`, kept.
    pub fn of(e: impl std::error::Error + Send + Sync + 'static) -> Cause {
        Cause(std::sync::Arc::new(e))
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl PartialEq for Cause {
    fn eq(&self, other: &Self) -> bool {
        self.to_string() == other.to_string()
    }
}

impl Eq for Cause {}

/// What is wrong with a manifest or a small layer's content.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Malformed {
    /// Not an Ollama manifest.
    #[error("is not an Ollama manifest ({0})")]
    NotAManifest(Cause),
    /// More layers than a model has.
    #[error("lists {0} layers (a model has a handful)")]
    TooManyLayers(usize),
    /// A layer named by something other than a SHA-256 digest.
    #[error("names a layer by '{0}', not sha256:<64 hex digits>")]
    LayerDigest(String),
    /// Two model layers.
    #[error("lists two model layers")]
    TwoModels,
    /// No model layer.
    #[error("lists no model layer ({0})")]
    NoModel(&'static str),
    /// A text layer that is not UTF-8.
    #[error("is not UTF-8 text")]
    NotUtf8,
    /// A JSON layer that is not JSON.
    #[error("is not JSON ({0})")]
    NotJson(Cause),
}

/// Why a name cannot name a model in a store.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NameProblem {
    /// An empty part.
    #[error("a part of it is empty")]
    EmptyPart,
    /// A part longer than the store allows.
    #[error("'{start}…' is longer than {max} bytes")]
    TooLong {
        /// Its start.
        start: String,
        /// The most it may have.
        max: usize,
    },
    /// A hidden part.
    #[error("'{0}' starts with a dot")]
    Dot(String),
    /// A character no store uses.
    #[error("'{part}' holds {c:?}")]
    Char {
        /// The part.
        part: String,
        /// The character.
        c: char,
    },
    /// Another number of parts than the form has: which.
    #[error("{0}")]
    Parts(&'static str),
    /// A tag that is not a plain name.
    #[error("its tag {0}")]
    Tag(Box<NameProblem>),
}

impl fmt::Display for FileProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FileProblem::Missing => f.write_str("is missing"),
            FileProblem::NotAFile(what) => write!(f, "is {what}, not a file"),
            FileProblem::Unreadable(why) => write!(f, "cannot be read ({why})"),
            FileProblem::OutsideStore { target } => write!(
                f,
                "is a link out of the store (to {}), which is not followed",
                target.display()
            ),
            FileProblem::WrongSize { expected, actual } if actual < expected => write!(
                f,
                "is truncated: {actual} bytes of the {expected} its manifest states (an \
                 interrupted download?)"
            ),
            FileProblem::WrongSize { expected, actual } => write!(
                f,
                "is {actual} bytes, not the {expected} its manifest states"
            ),
            FileProblem::NotGguf => f.write_str("is not a GGUF file (no GGUF magic bytes)"),
            FileProblem::DigestMismatch { expected, actual } => write!(
                f,
                "does not match its digest: SHA-256 {}… where the manifest says {}… (damaged or \
                 replaced)",
                &actual[..actual.len().min(16)],
                &expected[..expected.len().min(16)]
            ),
            FileProblem::TooBig { limit } => {
                write!(f, "is larger than the {limit} bytes such a file may have")
            }
            FileProblem::Malformed(why) => why.fmt(f),
        }
    }
}

/// Why a model named in a store cannot be found or used. Each displays as one line.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The name cannot name a model in the store (a path in it, a character no store uses).
    #[error("'{prefix}:{name}' is not a valid {program} model name: {reason}; write {form}", prefix = .store.prefix(), program = .store.program(), form = .store.form())]
    BadName {
        /// The store.
        store: StoreKind,
        /// The name as given (after the prefix).
        name: String,
        /// What is wrong with it.
        reason: NameProblem,
    },
    /// None of the store's folders exists.
    #[error("found no {store} folder: looked in {searched}; set {var} to the folder that holds its models", var = .store.variable())]
    NoStore {
        /// The store.
        store: StoreKind,
        /// Where it looked.
        searched: Searched,
    },
    /// The store has no model of that name.
    #[error("{store} has no model '{name}' (looked in {searched}){hint}")]
    NotFound {
        /// The store.
        store: StoreKind,
        /// The name, in full.
        name: String,
        /// Where it looked.
        searched: Searched,
        /// A hint: names that come close, or how to list them.
        hint: String,
    },
    /// A name that matches several models.
    #[error("'{name}' matches {count} {store} models: {}; give more of the name", .candidates.join(", "))]
    Ambiguous {
        /// The store.
        store: StoreKind,
        /// The name as given.
        name: String,
        /// How many it matches.
        count: usize,
        /// What it matches (the first few).
        candidates: Vec<String>,
    },
    /// An Ollama manifest cannot be used.
    #[error("the manifest of {name} ({}) {problem}", .path.display())]
    Manifest {
        /// The model's name.
        name: String,
        /// The manifest file.
        path: PathBuf,
        /// What is wrong.
        problem: FileProblem,
    },
    /// A file the store names cannot be used (a blob, a GGUF file).
    #[error("the {what} of {name} ({}) {problem}", .path.display())]
    File {
        /// The model's name.
        name: String,
        /// What the file is (`model blob`, `template layer`).
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: FileProblem,
    },
    /// An Ollama model with a LoRA adapter layer, which attnviz does not apply.
    #[error("{name} has an adapter layer (a LoRA on top of its weights), which attnviz does not apply; its attention would be the base model's")]
    Adapter {
        /// The model's name.
        name: String,
    },
}

/// The store a `-m` value names and the rest of it, if it starts with a store's prefix
/// (`ollama:`, `lmstudio:`, `llamacpp:`).
pub fn split(spec: &str) -> Option<(StoreKind, &str)> {
    StoreKind::ALL
        .into_iter()
        .find_map(|k| Some((k, spec.strip_prefix(k.prefix())?.strip_prefix(':')?)))
}

/// The model `spec` names in a store, found in `stores`' folders; `Ok(None)` when `spec` names
/// no store (no prefix), or is the path of something that exists (a file named `ollama:x`).
pub fn resolve(spec: &str, stores: &Stores) -> Result<Option<StoreModel>, StoreError> {
    let Some((kind, name)) = split(spec) else {
        return Ok(None);
    };
    if std::fs::symlink_metadata(spec).is_ok() {
        return Ok(None);
    }
    let folders = stores.folders(kind);
    let found = match kind {
        StoreKind::Ollama => ollama::resolve(name, folders),
        StoreKind::LmStudio => lmstudio::resolve(name, folders),
        StoreKind::LlamaCpp => llamacpp::resolve(name, folders),
    }?;
    Ok(Some(found))
}

/// One entry of a store's listing: the model, or why the name it is listed under cannot be
/// used.
#[derive(Clone, Debug)]
pub struct Listed {
    /// Its name as it can be typed (`ollama:tiny:latest`).
    pub name: String,
    /// The model, or what is wrong with it.
    pub model: Result<StoreModel, StoreError>,
}

/// Every model in `kind`'s folders that exist (at most [`MAX_LISTED`] per folder), by name; the
/// folders that exist beside them.
pub fn list(kind: StoreKind, stores: &Stores) -> (Vec<Listed>, Vec<PathBuf>) {
    let mut all = Vec::new();
    let mut found = Vec::new();
    for folder in stores.folders(kind) {
        if !folder.is_dir() {
            continue;
        }
        found.push(folder.clone());
        let listed = match kind {
            StoreKind::Ollama => ollama::list(folder),
            StoreKind::LmStudio => lmstudio::list(folder),
            StoreKind::LlamaCpp => llamacpp::list(folder),
        };
        for entry in listed {
            // An earlier folder's model of the same name is the one a run would use.
            if !all.iter().any(|e: &Listed| e.name == entry.name) {
                all.push(entry);
            }
        }
    }
    all.sort_by(|a, b| a.name.cmp(&b.name));
    (all, found)
}

/// Check the SHA-256 of `model`'s GGUF file (and projector) against the digest its store names
/// it by, reading it in 1 MiB pieces (bounded memory; every byte is read). A model whose store
/// names no digest (LM Studio, llama.cpp) passes.
pub fn verify(model: &StoreModel) -> Result<(), StoreError> {
    let Some(expected) = &model.sha256 else {
        return Ok(());
    };
    let fail = |problem| StoreError::File {
        name: model.name.clone(),
        what: "model blob",
        path: model.gguf.clone(),
        problem,
    };
    let actual = sha256_of(&model.gguf).map_err(|e| fail(FileProblem::Unreadable(e)))?;
    if &actual != expected {
        return Err(fail(FileProblem::DigestMismatch {
            expected: expected.clone(),
            actual,
        }));
    }
    if let Some((projector, expected)) = model
        .projector
        .as_ref()
        .zip(model.layers.projector_sha256.as_ref())
    {
        let actual = sha256_of(projector).map_err(|e| StoreError::File {
            name: model.name.clone(),
            what: "projector blob",
            path: projector.clone(),
            problem: FileProblem::Unreadable(e),
        })?;
        if &actual != expected {
            return Err(StoreError::File {
                name: model.name.clone(),
                what: "projector blob",
                path: projector.clone(),
                problem: FileProblem::DigestMismatch {
                    expected: expected.clone(),
                    actual,
                },
            });
        }
    }
    Ok(())
}

/// The SHA-256 of the file at `path`, in lower-case hex, streamed.
pub fn sha256_of(path: &Path) -> Result<String, Cause> {
    use sha2::Digest;
    let mut file = crate::small_file::open_regular(path).map_err(Cause::of)?;
    let mut hasher = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(Cause::of)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `name` is one plain path component a store may use: letters, digits, `-`, `_`,
/// `.` (and `extra`), not `.` or `..`, not hidden, at most `max` bytes.
pub(super) fn plain(name: &str, extra: &[char], max: usize) -> Result<(), NameProblem> {
    if name.is_empty() {
        return Err(NameProblem::EmptyPart);
    }
    if name.len() > max {
        return Err(NameProblem::TooLong {
            start: cut(name, 24),
            max,
        });
    }
    if name.starts_with('.') {
        return Err(NameProblem::Dot(cut(name, 40)));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') || extra.contains(c)))
    {
        return Err(NameProblem::Char {
            part: cut(name, 40),
            c,
        });
    }
    Ok(())
}

/// The folders of `folders` that exist, or the error that names every one looked in.
pub(super) fn existing_roots(
    store: StoreKind,
    folders: &[PathBuf],
) -> Result<Vec<&PathBuf>, StoreError> {
    let roots: Vec<&PathBuf> = folders.iter().filter(|f| f.is_dir()).collect();
    if roots.is_empty() {
        return Err(StoreError::NoStore {
            store,
            searched: Searched(folders.to_vec()),
        });
    }
    Ok(roots)
}

/// At most `n` characters of `s`, for messages.
pub(super) fn cut(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

/// Where `path` leads, checked to stay inside `root`: the canonical path, or the problem
/// (missing, a link out of the store, not a regular file).
pub(super) fn inside(root: &Path, path: &Path) -> Result<PathBuf, FileProblem> {
    let real_root =
        std::fs::canonicalize(root).map_err(|e| FileProblem::Unreadable(Cause::of(e)))?;
    let real = match std::fs::canonicalize(path) {
        Ok(p) => p,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(match std::fs::symlink_metadata(path) {
                Ok(_) => FileProblem::NotAFile("a broken link"),
                Err(_) => FileProblem::Missing,
            })
        }
        Err(e) => return Err(FileProblem::Unreadable(Cause::of(e))),
    };
    if !real.starts_with(&real_root) {
        return Err(FileProblem::OutsideStore { target: real });
    }
    let meta = std::fs::metadata(&real).map_err(|e| FileProblem::Unreadable(Cause::of(e)))?;
    if !meta.is_file() {
        return Err(FileProblem::NotAFile(super::local::file_kind(
            &meta.file_type(),
        )));
    }
    Ok(real)
}

/// Whether the regular file at `path` starts with GGUF's magic bytes.
pub(super) fn is_gguf(path: &Path) -> Result<bool, FileProblem> {
    let mut file =
        crate::small_file::open_regular(path).map_err(|e| FileProblem::Unreadable(Cause::of(e)))?;
    let mut magic = [0u8; 4];
    match file.read_exact(&mut magic) {
        Ok(()) => Ok(&magic == b"GGUF"),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(false),
        Err(e) => Err(FileProblem::Unreadable(Cause::of(e))),
    }
}

/// The GGUF files (`*.gguf`, not a projector's `*mmproj*.gguf`) in `dir`, by name, and its
/// projector, if it has one; at most [`MAX_LISTED`] entries are looked at.
pub(super) fn gguf_files(dir: &Path) -> (Vec<String>, Option<String>) {
    let mut models = Vec::new();
    let mut projector = None;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return (models, projector);
    };
    for entry in entries.flatten().take(MAX_LISTED) {
        let name = entry.file_name().to_string_lossy().into_owned();
        let lower = name.to_ascii_lowercase();
        if !lower.ends_with(".gguf") || name.starts_with('.') {
            continue;
        }
        if lower.contains("mmproj") {
            if projector.as_ref().is_none_or(|p: &String| name < *p) {
                projector = Some(name);
            }
        } else {
            models.push(name);
        }
    }
    models.sort();
    (models, projector)
}

#[cfg(test)]
mod tests;
