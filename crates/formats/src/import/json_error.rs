//! What is wrong with an attnviz JSON export read back, as typed errors.

use crate::attention::AttentionKind;
use crate::doc::LayerMaskKind;

use super::check::shape_str;
use super::image::ImageSectionError;

/// A JSON document (or one kind's body of it, or a saved capture's metadata) that is not
/// attention attnviz can draw. Displays as `shown: problem`.
#[derive(Debug, thiserror::Error)]
#[error("{shown}: {problem}")]
pub struct JsonDocError {
    /// The file (and the kind's body), as messages name it.
    pub shown: String,
    /// What is wrong.
    pub problem: DocProblem,
}

/// What is wrong with a JSON document (displays after its name).
#[derive(Debug, thiserror::Error)]
pub enum DocProblem {
    /// Not attnviz's export.
    #[error("this JSON is not an attnviz export (no \"format\": \"attnviz-attention\"); give a file of attnviz's JSON export, or arrays in an .npz or .safetensors file")]
    NotAnExport,
    /// A version this reader does not know.
    #[error("format version {version} is not one this attnviz reads (1 to {newest}); a newer attnviz wrote it, so update attnviz")]
    Version {
        /// The version it claims.
        version: u32,
        /// The newest this reader knows.
        newest: u32,
    },
    /// A version-3 document without one of its bodies.
    #[error("a version-3 document holds `encoder`, `decoder` and `cross`; it has no `{}`", .kind.as_str())]
    NoBody {
        /// The kind missing.
        kind: AttentionKind,
    },
    /// A body of another kind than its place says.
    #[error("its `{}` object is of kind `{}`", .place.as_str(), .kind.as_str())]
    BodyKind {
        /// The body's place.
        place: AttentionKind,
        /// The kind it says it is.
        kind: AttentionKind,
    },
    /// No `attention`.
    #[error("it has no `attention` array")]
    NoAttention,
    /// An empty `attention`.
    #[error("its attention array is empty")]
    EmptyAttention,
    /// A summarised run's document: summaries, no matrix to draw.
    #[error("it holds a summarised run (its `summary` section), with no attention matrix to draw; its summaries are in that section")]
    Summarised,
    /// `attention` that is not four levels deep.
    #[error("its attention array is not [layers][heads][queries][keys]")]
    AttentionShape,
    /// No `model`.
    #[error("it has no `model`")]
    NoModel,
    /// A `model` of another shape than `attention`.
    #[error("`model` says {layers} layers × {heads} heads, but the attention array is {}", shape_str(.shape))]
    ModelShape {
        /// Layers `model` says.
        layers: usize,
        /// Heads it says.
        heads: usize,
        /// The attention's shape.
        shape: [usize; 4],
    },
    /// An unknown position scheme.
    #[error("positions `{0}` is not absolute, rotary or relative")]
    Positions(String),
    /// An `image` section that does not fit the attention.
    #[error(transparent)]
    Image(#[from] ImageSectionError),
    /// A `router` section whose parts do not fit together.
    #[error("its router section does not fit together ({0})")]
    Router(#[from] crate::doc::router::RouterDocError),
    /// A `non_softmax` section whose token mixing does not fit together.
    #[error("its non_softmax section does not fit together ({0})")]
    Mixing(#[from] crate::doc::mixing::MixingDocError),
    /// A prefix longer than the units.
    #[error("its prefix of {units} units that see each other is longer than the tokens")]
    PrefixUnits {
        /// Its `prefix`.
        units: usize,
    },
    /// A picture whose first unit is not one of the units.
    #[error("a picture's first unit {unit} is not one of the tokens")]
    PictureUnit {
        /// Its `first`.
        unit: usize,
    },
    /// A picture whose count is not its cells'.
    #[error("a picture's count {count} is not the {cells} cells of its image")]
    PictureCount {
        /// Its `count`.
        count: usize,
        /// Its cells.
        cells: usize,
    },
    /// `layer_masks` with another count than the layers.
    #[error(
        "`layer_masks` has {entries} entries for {layers} layers; give one per captured layer"
    )]
    LayerMasksCount {
        /// Its entries.
        entries: usize,
        /// The captured layers.
        layers: usize,
    },
    /// A `layer_masks` entry for another layer than its place's.
    #[error("`layer_masks` entry {entry} is for layer {layer}, but that captured layer is layer {number}")]
    LayerMaskLayer {
        /// The entry.
        entry: usize,
        /// The layer it names.
        layer: usize,
        /// The captured layer in its place.
        number: usize,
    },
    /// A `layer_masks` entry whose window does not go with its mask.
    #[error("`layer_masks` entry {entry} says mask {} with window {window:?}; a layer is `sliding_window` with a window of at least 1, or `causal` / `bidirectional` with none", serde_json::to_value(.mask).unwrap_or_default())]
    LayerMaskWindow {
        /// The entry.
        entry: usize,
        /// Its mask.
        mask: LayerMaskKind,
        /// Its window.
        window: Option<usize>,
    },
    /// No token labels.
    #[error("it has no `{prefix}tokens`")]
    NoTokens {
        /// `` or `key_`.
        prefix: &'static str,
    },
    /// A saved capture's metadata that is not a body.
    #[error("its metadata is not an attnviz body: {0}")]
    NotABody(#[source] serde_json::Error),
}

/// Kept text (token labels, texts) past the reading thread's allowance: the error the reader
/// stops the parse with.
#[derive(Debug, thiserror::Error)]
#[error("its token labels and texts take more than {bytes} bytes")]
pub struct TextOverAllowance {
    /// Bytes read.
    pub bytes: u64,
}
