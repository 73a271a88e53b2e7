//! `attnviz models --json`: the models this machine's stores and Hugging Face cache hold, each
//! with whether attnviz can run it (`docs/models.md`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `format` of the listing.
pub const MODELS_FORMAT: &str = "attnviz-models";

/// Version of the listing's layout; bumped on any incompatible change.
pub const MODELS_VERSION: u32 = 1;

/// Where a model is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Store {
    /// Ollama's store (`ollama:NAME[:TAG]`).
    Ollama,
    /// LM Studio's models folder (`lmstudio:PUBLISHER/MODEL/FILE`).
    Lmstudio,
    /// llama.cpp's cache (`llamacpp:NAME`).
    Llamacpp,
    /// The Hugging Face cache (`ORG/NAME`).
    Huggingface,
}

/// The listing.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[schemars(title = "attnviz models listing, format version 1")]
pub struct ModelsListing {
    /// Always `"attnviz-models"`.
    #[schemars(extend("const" = "attnviz-models"))]
    pub format: String,
    /// The layout's version.
    pub format_version: u32,
    /// Where each store was looked for, in the order searched.
    pub stores: Vec<SearchedStore>,
    /// The models found, by store then name.
    pub models: Vec<ListedModel>,
}

/// Where one store was looked for.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct SearchedStore {
    /// Which store.
    pub store: Store,
    /// The folders searched, in order (from its environment variable, else its defaults).
    pub folders: Vec<String>,
    /// Those that exist.
    pub found: Vec<String>,
}

/// One model.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct ListedModel {
    /// The name to give `-m` (`ollama:qwen2.5:0.5b`, `org/name`).
    pub name: String,
    /// Where it is kept.
    pub store: Store,
    /// The hub revision for `--revision` (the ref, else the commit); null outside the Hugging
    /// Face cache.
    pub revision: Option<String>,
    /// Its GGUF file or snapshot folder; null when its store's entry is unusable.
    pub path: Option<String>,
    /// `general.architecture` of a GGUF file, `model_type` of a config.json; null when unread.
    pub family: Option<String>,
    /// Bytes on disk; null when unknown.
    pub size_bytes: Option<u64>,
    /// A GGUF file's type (`Q4_K_M`) or most used tensor type; a safetensors checkpoint's most
    /// used dtype (`BF16`); null when unknown.
    pub quantization: Option<String>,
    /// Whether attnviz can run it.
    pub runnable: bool,
    /// Why not, in the one line a run would say; null when it can.
    pub reason: Option<String>,
    /// Ollama's template layer (a Go template, not applied: attnviz uses the GGUF file's chat
    /// template); null when there is none.
    pub template: Option<String>,
    /// Ollama's parameters layer (sampling settings, not applied); null when there is none.
    pub parameters: Option<serde_json::Value>,
    /// Ollama's system layer (a default system prompt, not applied); null when there is none.
    pub system: Option<String>,
    /// Whether it has a vision-language projector (Ollama's projector layer, an `mmproj` file).
    pub projector: bool,
}
