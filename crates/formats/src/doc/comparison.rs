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

// Fields in name order: the order every earlier version wrote them in.

/// One side of a comparison.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct SideDoc {
    /// What its `attention` held: a comparison is only made between sides that hold the same.
    pub attention_holds: Holds,
    /// What a person reads for each unit.
    pub display: Vec<String>,
    /// The model's number of each captured layer.
    pub layer_numbers: Vec<usize>,
    /// Its mask.
    pub mask: MaskKind,
    /// The model.
    pub model: ModelDoc,
    /// Sentence B, or null.
    pub pair: Option<String>,
    /// What each unit is.
    pub roles: Vec<Role>,
    /// The file it was read from, null when it was not a file.
    pub source: Option<String>,
    /// Sentence A.
    pub text: String,
    /// Its units' labels at the level compared.
    pub tokens: Vec<String>,
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
    /// A's units with no partner.
    pub only_a: Vec<Unpaired>,
    /// B's units with no partner.
    pub only_b: Vec<Unpaired>,
    /// `[a, b]`: a unit of A and its partner in B.
    pub pairs: Vec<[usize; 2]>,
}

/// One entry of `ranked`.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct RankedDoc {
    /// Its Jensen–Shannon distance; null where no row could be compared.
    #[schemars(required)]
    pub distance: Option<f64>,
    /// The head.
    pub head: usize,
    /// The compared layer's index.
    pub layer: usize,
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

/// The comparison document: what the writer serialises, then streams `diff` after (unless
/// left out).
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[schemars(
    title = "attnviz comparison document, format version 1",
    extend("additionalProperties" = false)
)]
pub struct ComparisonDoc {
    /// Side A.
    pub a: SideDoc,
    /// Side B.
    pub b: SideDoc,
    /// How the units were matched.
    pub basis: Basis,
    /// `[layer][head]` Jensen–Shannon distance; null where no row could be compared.
    pub distance: Vec<Vec<Option<f64>>>,
    /// Always `"attnviz-comparison"`.
    #[schemars(extend("const" = "attnviz-comparison"))]
    pub format: String,
    /// 1.
    #[schemars(extend("const" = 1))]
    pub format_version: u32,
    /// Compared heads.
    pub heads: usize,
    /// Each compared column's label (cross-attention).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_labels: Option<Vec<String>>,
    /// How the key units were paired (cross-attention).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keys: Option<AlignmentDoc>,
    /// The attention kind compared.
    pub kind: AttentionKind,
    /// Each compared row's label.
    pub labels: Vec<String>,
    /// `[a, b]` model layer numbers of each compared layer.
    pub layer_numbers: Vec<[usize; 2]>,
    /// Compared layers.
    pub layers: usize,
    /// Tokens or words.
    pub level: Level,
    /// Whether A and B can attend different cells.
    pub masks_differ: bool,
    /// Always `"0-based"`.
    pub numbering: super::Numbering,
    /// How the query units were paired.
    pub queries: AlignmentDoc,
    /// Every head, farthest first.
    pub ranked: Vec<RankedDoc>,
    /// `[layer][head]` the rows each distance is the mean over.
    pub rows: Vec<Vec<usize>>,
    /// Whether only the layers and heads both sides have were compared.
    pub shared_only: bool,
    /// `[layer][head][query][key]` A − B (left out with `--no-diff`): streamed by the writer
    /// after the other fields, never held here (always `None`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<super::Weights>,
}
