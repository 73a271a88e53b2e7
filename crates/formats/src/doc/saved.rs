//! A saved capture's `__metadata__` (`docs/save.md`): safetensors allows only strings there, so
//! every value but the format's name is itself JSON text; [`SavedMetadata`] describes the
//! object, and each kind's string holds a [`super::BodyMeta`] (a version-2 body without its
//! attention).

use schemars::JsonSchema;

/// `__metadata__["format"]` of a saved capture.
pub const FORMAT: &str = "attnviz-attention-layers";
/// `__metadata__["format_version"]`: bumped on any incompatible change.
pub const FORMAT_VERSION: u32 = 1;

/// The `__metadata__` object of a saved capture. The kinds' bodies are JSON text (strings);
/// parsed, each is a body's metadata (`saved-body.schema.json`).
#[derive(JsonSchema)]
#[schemars(
    title = "attnviz saved capture metadata (safetensors __metadata__), format version 1",
    extend("additionalProperties" = false)
)]
#[allow(dead_code)]
pub struct SavedMetadata {
    /// Always `"attnviz-attention-layers"`.
    #[schemars(extend("const" = "attnviz-attention-layers"))]
    format: String,
    /// `"1"`.
    #[schemars(extend("const" = "1"))]
    format_version: String,
    /// `"0-based"`.
    #[schemars(extend("const" = "0-based"))]
    numbering: String,
    /// `"F32"` or `"F16"`.
    #[schemars(extend("enum" = ["F32", "F16"]))]
    dtype: String,
    /// The kinds saved, as JSON text: `["self"]` or `["encoder", "decoder", "cross"]`.
    kinds: String,
    /// Fields of the whole run, as JSON text (an encoder–decoder's target and generated text).
    document: String,
    /// The last kind's tokens as people read them (JSON text of a list of strings).
    tokens: String,
    /// The body of self-attention, as JSON text.
    #[serde(rename = "self", skip_serializing_if = "Option::is_none")]
    self_: Option<String>,
    /// The encoder's body, as JSON text.
    #[serde(skip_serializing_if = "Option::is_none")]
    encoder: Option<String>,
    /// The decoder's body, as JSON text.
    #[serde(skip_serializing_if = "Option::is_none")]
    decoder: Option<String>,
    /// Cross-attention's body, as JSON text.
    #[serde(skip_serializing_if = "Option::is_none")]
    cross: Option<String>,
}

/// The schema of one kind's body in a saved capture, once its string is parsed: a version-2
/// body's metadata.
#[derive(JsonSchema)]
#[schemars(
    title = "attnviz saved capture: one kind's body (a __metadata__ value, parsed)",
    extend("additionalProperties" = false)
)]
#[allow(dead_code)]
pub struct SavedBody {
    #[serde(flatten)]
    meta: super::BodyMeta<'static>,
}
