//! A model from the Hugging Face hub: the cache laid out as Python's `huggingface_hub` writes
//! it, the file list asked for with short timeouts, and downloads through hf-hub watched for
//! stalls and reported to a [`Progress`].

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use super::local::{from_dir_with, shard_names};
use super::{describe, first_way, DownloadProblem, HubProblem, ModelFiles, SourceError};
use super::{TokenizerFilesOf, WEIGHT_FILES};
use crate::progress::{Progress, Stage};

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

/// `models--ORG--NAME` inside the cache.
pub(super) fn repo_folder(hub: &Hub, model: &str) -> PathBuf {
    hub.cache_dir
        .join(format!("models--{}", model.replace('/', "--")))
}

/// The snapshot folder of `revision` in the cache, if the cache knows it: `refs/<revision>` holds
/// a commit hash, or `revision` is itself a commit with a snapshot folder.
pub(super) fn cached_snapshot(hub: &Hub, model: &str, revision: &str) -> Option<PathBuf> {
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

pub(super) fn from_hub(
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
pub(super) struct Listing {
    sha: String,
    files: Vec<String>,
}

/// Ask the hub which files `model` has at `revision`. This is the first network access; its
/// short timeouts make an unreachable hub fail fast.
pub(super) fn list_repo(
    model: &str,
    revision: &str,
    hub: &Hub,
    endpoint: &str,
) -> Result<Listing, SourceError> {
    let unreachable = |reason: HubProblem| SourceError::Unreachable {
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
    let mut response = request.call().map_err(|e| {
        unreachable(HubProblem::Request {
            cause: short_reason(&e),
        })
    })?;
    let status = response.status().as_u16();
    if matches!(status, 401 | 403 | 404) {
        return Err(SourceError::NotFound {
            model: model.to_string(),
            revision: revision.to_string(),
            status,
        });
    }
    if status != 200 {
        return Err(unreachable(HubProblem::Status(status)));
    }
    let mut body = String::new();
    response
        .body_mut()
        .as_reader()
        .take(16 << 20)
        .read_to_string(&mut body)
        .map_err(|e| unreachable(HubProblem::Body(e)))?;
    let json: serde_json::Value =
        serde_json::from_str(&body).map_err(|_| unreachable(HubProblem::UnexpectedAnswer))?;
    let sha = json
        .get("sha")
        .and_then(|s| s.as_str())
        .filter(|s| !s.is_empty() && !s.contains(['/', '\\', '.']))
        .ok_or_else(|| unreachable(HubProblem::NoCommit))?
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
pub(super) fn short_reason(e: &ureq::Error) -> String {
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
pub(super) struct Downloader {
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
            reason: DownloadProblem::Client {
                cause: first_line(&e.to_string()),
            },
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
        let failed = |reason: DownloadProblem| SourceError::Download {
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
                Ok(result) => {
                    return result.map_err(|e| {
                        failed(DownloadProblem::Client {
                            cause: first_line(&e.to_string()),
                        })
                    })
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(failed(DownloadProblem::ThreadStopped))
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let now = start.elapsed().as_millis() as u64;
                    let idle = now.saturating_sub(last_ms.load(Ordering::Relaxed));
                    if idle > self.stall_timeout.as_millis() as u64 {
                        return Err(failed(DownloadProblem::Stalled(self.stall_timeout)));
                    }
                }
            }
        }
    }
}

/// Progress for hf-hub: reported to a [`Progress`], and the time of the last byte received.
pub(super) struct Watch {
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

pub(super) fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().to_string()
}
