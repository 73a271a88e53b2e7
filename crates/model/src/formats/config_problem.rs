//! What is wrong with a config.json, as facts: the field, its value as written, what it must
//! be, the other field or limit it is checked against ([`ConfigProblem`]); what attnviz does
//! not run ([`Unsupported`]); and what a checkpoint holds where config.json disagrees with it
//! ([`Held`]). [`super::config::ConfigError`] carries them, and each displays as the sentence
//! of its message.

use std::fmt;
use std::path::PathBuf;

use crate::kernels::rotary::RopeFactorError;
use crate::kernels::{Activation, RopeScaling};

/// A field, as a message names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    /// A field of the object read (`hidden_size`).
    Top(&'static str),
    /// A key of the RoPE settings (`rope_parameters` or `rope_scaling`): `rope factor`.
    Rope(&'static str),
    /// An object of `rope_parameters` (Gemma 3's settings per layer type):
    /// `rope_parameters.full_attention`.
    RopeParameters(&'static str),
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Field::Top(name) => f.write_str(name),
            Field::Rope(key) => write!(f, "rope {key}"),
            Field::RopeParameters(key) => write!(f, "rope_parameters.{key}"),
        }
    }
}

/// A field's value, as a message shows it.
#[derive(Clone, Debug, PartialEq)]
pub enum FieldValue {
    /// The JSON as written in the file.
    Json(serde_json::Value),
    /// A number as read.
    Number(f64),
    /// A whole number as read.
    Count(usize),
    /// A name (a string), shown in single quotes.
    Name(String),
}

impl fmt::Display for FieldValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FieldValue::Json(v) => write!(f, "{v}"),
            FieldValue::Number(x) => write!(f, "{x}"),
            FieldValue::Count(n) => write!(f, "{n}"),
            FieldValue::Name(s) => write!(f, "'{s}'"),
        }
    }
}

/// What a field's value must be.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Expected {
    /// A JSON object.
    Object,
    /// A whole number ≥ 0 (`12`, or `12.0`).
    WholeNumber,
    /// Not below 0.
    NonNegative,
    /// Any number.
    Number,
    /// A finite number above 0.
    PositiveNumber,
    /// A string.
    String,
    /// `true` or `false`.
    Bool,
    /// A list of strings.
    Names,
    /// A list of 0s and 1s, one per layer (SmolLM3's `no_rope_layers`).
    Flags,
    /// A string.
    Name,
    /// A token id: a count that fits in 32 bits.
    TokenId,
    /// A number above `above` and at most `at_most`.
    Between {
        /// The bound it must be above.
        above: f64,
        /// The largest value allowed.
        at_most: f64,
    },
}

impl Expected {
    /// What follows "`field` is `value`; ": the rule the value breaks.
    pub fn rule(self) -> ExpectedRule {
        ExpectedRule(self)
    }
}

/// [`Expected`] as a noun phrase (`a positive number`, `in (0, 64]`).
impl fmt::Display for Expected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expected::Object => f.write_str("an object"),
            Expected::WholeNumber => f.write_str("a whole number such as 12"),
            Expected::NonNegative => f.write_str("a number that is not negative"),
            Expected::Number => f.write_str("a number"),
            Expected::PositiveNumber => f.write_str("a positive number"),
            Expected::String => f.write_str("a string"),
            Expected::Bool => f.write_str("true or false"),
            Expected::Names => f.write_str("a list of names"),
            Expected::Flags => f.write_str("a list of 0s and 1s"),
            Expected::Name => f.write_str("a name"),
            Expected::TokenId => f.write_str("a token id of 32 bits"),
            Expected::Between { above, at_most } => write!(f, "in ({above}, {at_most}]"),
        }
    }
}

/// [`Expected`] as a rule (`it must be a number`, `token ids fit in 32 bits`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ExpectedRule(Expected);

impl fmt::Display for ExpectedRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Expected::NonNegative => f.write_str("it must not be negative"),
            Expected::TokenId => f.write_str("token ids fit in 32 bits"),
            Expected::Between { above, at_most } => {
                write!(f, "it must be above {above} and at most {at_most}")
            }
            other => write!(f, "it must be {other}"),
        }
    }
}

/// The limit a value is more than.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// The layers attnviz runs.
    Layers(usize),
    /// The positions attnviz runs a rotary model for.
    RotaryPositions(usize),
    /// The positions attnviz runs a rotary model for, in Gemma's wording (which does not name
    /// the number).
    RotaryModel(usize),
    /// The positions a sinusoidal table is computed for.
    SinusoidalPositions(usize),
    /// A number.
    Number(usize),
    /// Another field.
    Field {
        /// Its name.
        field: &'static str,
        /// Its value.
        value: usize,
    },
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Limit::Layers(n) => write!(f, "the {n} layers attnviz runs"),
            Limit::RotaryPositions(n) => {
                write!(f, "the {n} positions attnviz runs a rotary model for")
            }
            Limit::RotaryModel(_) => f.write_str("attnviz runs a rotary model for"),
            Limit::SinusoidalPositions(n) => {
                write!(f, "the {n} positions a sinusoidal table is computed for")
            }
            Limit::Number(n) => write!(f, "{n}"),
            Limit::Field { field, value } => write!(f, "{field} {value}"),
        }
    }
}

/// Sizes whose product (a weight matrix, a table) would not fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Oversize {
    /// One size.
    #[error("{field} {value} is too large")]
    Field {
        /// The field.
        field: &'static str,
        /// Its value.
        value: usize,
    },
    /// Two sizes multiplied.
    #[error("{field} {value} × {by_field} {by} is too large")]
    Product {
        /// The first field.
        field: &'static str,
        /// Its value.
        value: usize,
        /// The second field.
        by_field: &'static str,
        /// Its value.
        by: usize,
    },
    /// Phi-3's fused query/key/value projection: (heads + 2 · kv heads) × head_dim.
    #[error("num_attention_heads {heads} and num_key_value_heads {kv} × head_dim {head_dim} is too large")]
    FusedQkv {
        /// `num_attention_heads`.
        heads: usize,
        /// `num_key_value_heads`.
        kv: usize,
        /// `head_dim`.
        head_dim: usize,
    },
    /// A sinusoidal position table (Marian's): positions × d_model.
    #[error("max_position_embeddings {positions} × d_model {d_model} is too large for a sinusoidal position table (at most {max_rows} rows, 2²⁸ values)")]
    SinusoidalTable {
        /// `max_position_embeddings`.
        positions: usize,
        /// `d_model`.
        d_model: usize,
        /// The most rows.
        max_rows: usize,
    },
    /// ALBERT's layer runs: layers × inner groups.
    #[error("num_hidden_layers {layers} × inner_group_num {inner_group_num} is more than {max} layer runs")]
    LayerRuns {
        /// `num_hidden_layers`.
        layers: usize,
        /// `inner_group_num`.
        inner_group_num: usize,
        /// The most layer runs.
        max: usize,
    },
}

/// RoPE settings that do not make a rotary embedding.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RopeProblem {
    /// A scaling type without one of its parameters.
    #[error("rope type '{rope_type}' needs {key} in rope_parameters")]
    Needs {
        /// The type (`linear`, `llama3`).
        rope_type: String,
        /// The parameter missing.
        key: &'static str,
    },
    /// A scaling factor out of range.
    #[error("rope_scaling.factor {0}")]
    Factor(RopeFactorError),
    /// llama3 frequency factors the wrong way round.
    #[error("llama3 rope scaling needs high_freq_factor ({high}) above low_freq_factor ({low})")]
    Llama3Frequencies {
        /// `low_freq_factor`.
        low: f64,
        /// `high_freq_factor`.
        high: f64,
    },
    /// LongRoPE without a list of factors.
    #[error("longrope scaling needs {key}, a list of numbers")]
    LongropeNeeds {
        /// `short_factor` or `long_factor`.
        key: &'static str,
    },
    /// A LongRoPE list of factors of another length than the rotated pairs, or with a value
    /// that is not a positive number.
    #[error("{key} must hold {} positive numbers, half the {rotary_dim} rotated values of head_dim {head_dim} (hidden_size {hidden_size} / num_attention_heads {heads} unless head_dim is given) × partial_rotary_factor {partial}; it holds {len}", .rotary_dim / 2)]
    LongropeFactors {
        /// `short_factor` or `long_factor`.
        key: &'static str,
        /// The entries it holds.
        len: usize,
        /// The values rotated in each head.
        rotary_dim: usize,
        /// `head_dim`.
        head_dim: usize,
        /// `hidden_size`.
        hidden_size: usize,
        /// `num_attention_heads`.
        heads: usize,
        /// `partial_rotary_factor`.
        partial: f64,
    },
    /// A part of each head to rotate that is not an even number of at least 2 values.
    #[error("head_dim {head_dim} × partial_rotary_factor {partial} = {rotary_dim} rotated values; rotary embeddings rotate an even number of at least 2")]
    RotatedValues {
        /// `head_dim`.
        head_dim: usize,
        /// `partial_rotary_factor`.
        partial: f64,
        /// The values it rotates.
        rotary_dim: usize,
    },
    /// An odd head size.
    #[error("head_dim {head_dim} is odd; rotary embeddings rotate pairs of dimensions")]
    OddHeadDim {
        /// `head_dim`.
        head_dim: usize,
    },
    /// Gemma's head size: odd, or too large with its heads.
    #[error("head_dim {head_dim} must be even and num_attention_heads × head_dim not too large")]
    HeadDim {
        /// `head_dim`.
        head_dim: usize,
        /// `num_attention_heads`.
        heads: usize,
    },
}

/// What is wrong with a config.json (the file, or a field of it). Each displays as the
/// sentence of the message, after `… is not a valid model config: `.
#[derive(Debug, thiserror::Error)]
pub enum ConfigProblem {
    /// The text is not JSON.
    #[error("not valid JSON ({0})")]
    NotJson(#[source] serde_json::Error),
    /// The file holds JSON other than an object.
    #[error("not a JSON object")]
    NotAnObject,
    /// A field that must hold an object holds something else.
    #[error("{field} is not an object")]
    FieldNotAnObject {
        /// The field.
        field: &'static str,
    },
    /// A value of the wrong type or out of range: "`field` is `value`; it must be …".
    #[error("{field} is {value}; {}", .expected.rule())]
    WrongType {
        /// The field.
        field: Field,
        /// Its value.
        value: FieldValue,
        /// What it must be.
        expected: Expected,
    },
    /// The same, worded "`field` `value` is not …".
    #[error("{field} {value} is not {expected}")]
    NotA {
        /// The field.
        field: Field,
        /// Its value.
        value: FieldValue,
        /// What it must be.
        expected: Expected,
    },
    /// A list with an entry that is not a string.
    #[error("{field} must be a list of names")]
    NotNames {
        /// The field.
        field: &'static str,
    },
    /// A size of 0.
    #[error("{field} is 0")]
    Zero {
        /// The field.
        field: &'static str,
    },
    /// A size another does not divide.
    #[error("{field} {value} is not divisible by {by_field} {by}")]
    NotDivisible {
        /// The field divided.
        field: &'static str,
        /// Its value.
        value: usize,
        /// The divisor's field.
        by_field: &'static str,
        /// Its value.
        by: usize,
    },
    /// A count that is not a multiple of another (query heads of key/value heads).
    #[error("{field} {sections:?} sums to {sum}, not to half the head size ({half})")]
    Sections {
        field: &'static str,
        sections: Vec<usize>,
        sum: usize,
        half: usize,
    },
    #[error("{field} {value} is not a multiple of {of_field} {of}")]
    NotMultiple {
        /// The field.
        field: &'static str,
        /// Its value.
        value: usize,
        /// The field it must be a multiple of.
        of_field: &'static str,
        /// Its value.
        of: usize,
    },
    /// A count above what attnviz runs, or above another field.
    #[error("{field} {value} is more than {limit}")]
    TooMany {
        /// The field.
        field: &'static str,
        /// Its value.
        value: usize,
        /// What it is more than.
        limit: Limit,
    },
    /// A count below its least value.
    #[error("{field} {value} is below {min}")]
    TooFew {
        /// The field.
        field: &'static str,
        /// Its value.
        value: usize,
        /// The least value.
        min: usize,
    },
    /// A value that must be below another field's (a token id below the vocabulary's size).
    #[error("{field} {value} is not below {limit_field} {limit}")]
    NotBelow {
        /// The field.
        field: &'static str,
        /// Its value.
        value: usize,
        /// The field it must be below.
        limit_field: &'static str,
        /// Its value.
        limit: usize,
    },
    /// Sizes whose product would not fit.
    #[error(transparent)]
    Oversize(#[from] Oversize),
    /// A per-layer list of another length than the layers.
    #[error("{field} has {len} entries for {layers} layers")]
    Entries {
        /// The list's field.
        field: &'static str,
        /// Its entries.
        len: usize,
        /// `num_hidden_layers`.
        layers: usize,
    },
    /// RoPE settings that do not make a rotary embedding.
    #[error(transparent)]
    Rope(#[from] RopeProblem),
    /// An image size and patch size that make no patch grid.
    #[error("image_size {image_size} and patch_size {patch_size} do not make a patch grid (image_size at most {max_side}, patch_size at most image_size)")]
    PatchGrid {
        /// `image_size`.
        image_size: usize,
        /// `patch_size`.
        patch_size: usize,
        /// The largest image side.
        max_side: usize,
    },
    /// No padding token where positions are counted from it (RoBERTa's).
    #[error("pad_token_id is null; RoBERTa's positions are counted from it")]
    NoPaddingToken,
    /// No position left for a token after the rows up to the padding row (RoBERTa's
    /// positions are counted from the padding token).
    #[error("max_position_embeddings {max_position_embeddings} leaves no position for a token after the {} rows up to the padding row (pad_token_id {pad_token_id})", u64::from(*.pad_token_id) + 1)]
    NoPositionAfterPadding {
        /// `max_position_embeddings`.
        max_position_embeddings: usize,
        /// `pad_token_id`.
        pad_token_id: u32,
    },
    /// T5's `feed_forward_proj` in another form than `gated-ACT` or `ACT`.
    #[error("feed_forward_proj '{proj}' is not of the form 'gated-ACT' or 'ACT' (e.g. 'gated-gelu', 'relu')")]
    FeedForwardProj {
        /// The value.
        proj: String,
    },
}

/// What attnviz does instead, after a value it does not run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Instead {
    /// Nothing said.
    Nothing,
    /// What it runs instead.
    Runs(&'static str),
    /// The activations it runs ([`Activation::HF_NAMES`]).
    Activations,
    /// The model types it runs, in the registry's order.
    ModelTypes(Vec<&'static str>),
}

impl fmt::Display for Instead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Instead::Nothing => Ok(()),
            Instead::Runs(what) => write!(f, "; {what}"),
            Instead::Activations => write!(f, "; use {}", Activation::HF_NAMES),
            Instead::ModelTypes(types) => write!(f, "{}", RunsModelTypes(types)),
        }
    }
}

/// What a config describes that attnviz cannot run exactly. Each displays as the sentence
/// of the message, after `… describes a model attnviz cannot run: `.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum Unsupported {
    /// A value attnviz does not run: "`field` `value` (`note`) is not supported; `instead`".
    #[error("{field}{}{} is not supported{instead}", Spaced(.value.as_ref()), Noted(*.note))]
    Value {
        /// The field (or what it sets, such as `RoPE scaling type`).
        field: &'static str,
        /// Its value, where the message shows it.
        value: Option<FieldValue>,
        /// What the value means.
        note: Option<&'static str>,
        /// What attnviz runs instead.
        instead: Instead,
    },
    /// A switch set to what the family cannot be: "`field` is `value`: `why`".
    #[error("{field} is {value}: {why}")]
    Setting {
        /// The field.
        field: &'static str,
        /// Its value.
        value: bool,
        /// Why that is not run.
        why: &'static str,
    },
    /// A switch for what the family does not have: "`field` `value` (`why`)".
    #[error("{field} {value} ({why})")]
    Lacks {
        /// The field.
        field: &'static str,
        /// Its value.
        value: bool,
        /// What the family lacks.
        why: &'static str,
    },
    /// A size that differs from another where the family has one size for both.
    /// `why` starts with its own punctuation (`, but …`, `: …`).
    #[error("{field} {value} differs from {other} {other_value}{why}")]
    Differs {
        /// The field.
        field: &'static str,
        /// Its value.
        value: usize,
        /// The field it differs from.
        other: &'static str,
        /// That field's value.
        other_value: usize,
        /// Why that is not run.
        why: &'static str,
    },
    /// An encoder family configured as a decoder (`is_decoder`, `add_cross_attention`).
    #[error("it is configured as a decoder (is_decoder/add_cross_attention); attnviz runs this family as a bidirectional encoder")]
    Decoder,
    /// No `model_type`, and class names of no family attnviz runs.
    #[error("it has no model_type, and architectures {classes:?} name no supported family{}", RunsModelTypes(.supported))]
    Architectures {
        /// `architectures`.
        classes: Vec<String>,
        /// The model types attnviz runs.
        supported: Vec<&'static str>,
    },
    /// T5's feed-forward activation.
    #[error(
        "feed_forward_proj '{proj}': activation '{activation}' is not supported{}",
        Instead::Activations
    )]
    FeedForwardActivation {
        /// `feed_forward_proj`.
        proj: String,
        /// The activation it names.
        activation: String,
    },
    /// Phi-3 with RoPE scaling other than its own.
    #[error("RoPE scaling {0:?} for Phi-3; attnviz runs its default and longrope embeddings")]
    Phi3Scaling(RopeScaling),
}

/// What a checkpoint holds where a config.json value disagrees with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Held {
    /// No tensor to check the value against.
    NoTensor {
        /// The weight file.
        weights: PathBuf,
        /// The tensor looked for, as stored (with the checkpoint's prefix).
        tensor: String,
    },
    /// A tensor whose dimension is another size.
    Shape {
        /// The weight file.
        weights: PathBuf,
        /// The tensor, as stored.
        tensor: String,
        /// Its shape.
        shape: Vec<usize>,
        /// The dimension that should be the value.
        axis: usize,
    },
    /// Fewer numbered blocks (layers) than the value.
    Blocks {
        /// The weight file.
        weights: PathBuf,
        /// What a block is called (`layer`).
        block: &'static str,
        /// Blocks present, from 0.
        present: usize,
        /// The first tensor missing, as stored.
        missing: String,
    },
}

impl Held {
    /// The words after "`field` is `value`, but ".
    pub fn against(&self, field: &'static str) -> HeldAgainst<'_> {
        HeldAgainst { held: self, field }
    }
}

/// [`Held`] as words about `field` ([`Held::against`]).
#[derive(Clone, Copy, Debug)]
pub struct HeldAgainst<'a> {
    held: &'a Held,
    field: &'static str,
}

impl fmt::Display for HeldAgainst<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.held {
            Held::NoTensor { weights, tensor } => write!(
                f,
                "{} has no tensor {tensor} to check it against",
                weights.display()
            ),
            Held::Shape {
                weights,
                tensor,
                shape,
                axis,
            } => write!(
                f,
                "tensor {tensor} in {} has shape {shape:?}, whose dimension {axis} should be {}",
                weights.display(),
                self.field
            ),
            Held::Blocks {
                weights,
                block,
                present,
                missing,
            } => {
                write!(f, "{} holds ", weights.display())?;
                match present {
                    0 => write!(f, "no {block}s")?,
                    1 => write!(f, "only {block} 0")?,
                    n => write!(f, "only {block}s 0–{}", n - 1)?,
                }
                write!(f, " (no tensor {missing})")
            }
        }
    }
}

/// `in {name}: ` before a message about a section of the file; nothing for the file itself.
pub(crate) struct InSection<'a>(pub(crate) Option<&'a str>);

impl fmt::Display for InSection<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(name) => write!(f, "in {name}: "),
            None => Ok(()),
        }
    }
}

/// ` {value}` when there is one; nothing otherwise.
struct Spaced<'a>(Option<&'a FieldValue>);

impl fmt::Display for Spaced<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(v) => write!(f, " {v}"),
            None => Ok(()),
        }
    }
}

/// ` ({note})` when there is one; nothing otherwise.
struct Noted(Option<&'static str>);

impl fmt::Display for Noted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(n) => write!(f, " ({n})"),
            None => Ok(()),
        }
    }
}

/// `; attnviz runs model types bert, roberta, …`.
struct RunsModelTypes<'a>(&'a [&'static str]);

impl fmt::Display for RunsModelTypes<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("; attnviz runs model types ")?;
        for (i, t) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(t)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
