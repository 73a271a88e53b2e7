//! The comparison document (`attnviz diff --json`, `"format": "attnviz-comparison"`; fields in
//! `docs/json.md`, "Comparison").

use schemars::JsonSchema;
use serde::Serialize;

use super::ModelDoc;
use crate::attention::{AttentionKind, Holds, Level, MaskKind, Role};

/// `format` of a comparison.
pub const FORMAT: &str = "attnviz-comparison";
/// Bumped on any incompatible change.
pub const FORMAT_VERSION: u32 = 1;

/// One side of a comparison.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct SideDoc {
    /// The file it was read from, null when it was not a file.
    pub source: Option<String>,
    /// The model.
    pub model: ModelDoc,
    /// What its `attention` held: a comparison is only made between sides that hold the same.
    pub attention_holds: Holds,
    /// Sentence A.
    pub text: String,
    /// Sentence B, or null.
    pub pair: Option<String>,
    /// The model's number of each captured layer.
    pub layer_numbers: Vec<usize>,
    /// Its units' labels at the level compared.
    pub tokens: Vec<String>,
    /// What a person reads for each unit.
    pub display: Vec<String>,
    /// What each unit is.
    pub roles: Vec<Role>,
    /// Its mask.
    pub mask: MaskKind,
    /// Each captured layer's sliding window, null for none.
    pub windows: Vec<Option<usize>>,
}

/// A unit with no partner on the other side.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct Unpaired {
    /// Its index on its side.
    pub index: usize,
    /// Its label.
    pub label: String,
}

/// How the units of the two sides were paired.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct AlignmentDoc {
    /// `[a, b]`: a unit of A and its partner in B.
    pub pairs: Vec<[usize; 2]>,
    /// A's units with no partner.
    pub only_a: Vec<Unpaired>,
    /// B's units with no partner.
    pub only_b: Vec<Unpaired>,
}

/// One entry of `ranked`.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct RankedDoc {
    /// The compared layer's index.
    pub layer: usize,
    /// The head.
    pub head: usize,
    /// Its Jensen–Shannon distance.
    pub distance: f64,
    /// The rows it is the mean over.
    pub rows: usize,
}

/// How the units were matched.
#[derive(Clone, Copy, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// The same units on both sides.
    SameUnits,
    /// Tokens aligned by the text they cover.
    AlignedTokens,
    /// Words.
    Words,
}

/// The comparison document, as written (`diff` streamed last unless left out).
#[derive(JsonSchema)]
#[schemars(
    title = "attnviz comparison document, format version 1",
    extend("additionalProperties" = false)
)]
#[allow(dead_code)]
pub struct ComparisonSchema {
    /// Always `"attnviz-comparison"`.
    #[schemars(extend("const" = "attnviz-comparison"))]
    format: String,
    /// 1.
    #[schemars(extend("const" = 1))]
    format_version: u32,
    /// Always `"0-based"`.
    numbering: super::Numbering,
    /// Side A.
    a: SideDoc,
    /// Side B.
    b: SideDoc,
    /// The attention kind compared.
    kind: AttentionKind,
    /// Tokens or words.
    level: Level,
    /// How the units were matched.
    basis: Basis,
    /// Whether only the layers and heads both sides have were compared.
    shared_only: bool,
    /// Whether A and B can attend different cells.
    masks_differ: bool,
    /// Compared layers.
    layers: usize,
    /// Compared heads.
    heads: usize,
    /// `[a, b]` model layer numbers of each compared layer.
    layer_numbers: Vec<[usize; 2]>,
    /// How the query units were paired.
    queries: AlignmentDoc,
    /// Each compared row's label.
    labels: Vec<String>,
    /// How the key units were paired (cross-attention).
    #[serde(skip_serializing_if = "Option::is_none")]
    keys: Option<AlignmentDoc>,
    /// Each compared column's label (cross-attention).
    #[serde(skip_serializing_if = "Option::is_none")]
    key_labels: Option<Vec<String>>,
    /// `[layer][head]` Jensen–Shannon distance; null where no row could be compared.
    distance: Vec<Vec<Option<f64>>>,
    /// `[layer][head]` the rows each distance is the mean over.
    rows: Vec<Vec<usize>>,
    /// Every head, farthest first.
    ranked: Vec<RankedDoc>,
    /// `[layer][head][query][key]` A − B (left out with `--no-diff`).
    #[serde(skip_serializing_if = "Option::is_none")]
    diff: Option<super::Weights>,
}
