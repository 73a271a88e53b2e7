//! What a damaged or edited partial file can hold that no run writes, as typed errors: each
//! displays as the words that name the field and say what is wrong with it.

use std::fmt;

use crate::analysis::Stat;

/// Where in `sums` a number is: a field, a statistic where the field has one per statistic,
/// and a head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SumsCell {
    /// `head_sentences`, `rows`, `defined`, `defined_rows`, `sum`, `sum_sq` or `sum_rows`.
    pub field: &'static str,
    /// The statistic, for the fields kept per statistic.
    pub stat: Option<Stat>,
    /// The layer.
    pub layer: usize,
    /// The head.
    pub head: usize,
}

impl fmt::Display for SumsCell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sums: {}", self.field)?;
        if let Some(stat) = self.stat {
            write!(f, ".{}", stat.name())?;
        }
        write!(f, " of layer {}, head {}", self.layer, self.head)
    }
}

/// A `sums` field with one grid per statistic (`defined.entropy`), or one grid (`rows`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SumsField {
    /// The field.
    pub field: &'static str,
    /// The statistic, for the fields kept per statistic.
    pub stat: Option<Stat>,
}

impl fmt::Display for SumsField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.field)?;
        if let Some(stat) = self.stat {
            write!(f, ".{}", stat.name())?;
        }
        Ok(())
    }
}

/// Sums that no run writes, or that cannot be added to others: read back from a partial file,
/// or merged.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SumsError {
    /// Another fixed point than this attnviz's.
    #[error("sums: fraction_bits is not {expected}")]
    FractionBits {
        /// The fraction bits this attnviz keeps.
        expected: i32,
    },
    /// No head, or more than any model has.
    #[error("sums: {layers} layers × {heads} heads")]
    Shape {
        /// Layers it claims.
        layers: usize,
        /// Heads it claims.
        heads: usize,
    },
    /// A grid without one row per layer.
    #[error("sums: {field} is not {layers} layers")]
    Layers {
        /// The grid.
        field: SumsField,
        /// The layers it should have.
        layers: usize,
    },
    /// A grid row without one value per head.
    #[error("sums: {field} is not {heads} heads per layer")]
    Heads {
        /// The grid.
        field: SumsField,
        /// The heads it should have.
        heads: usize,
    },
    /// A sum that is not an integer written as a string.
    #[error("sums: {field} holds {value:?}, not an integer string")]
    NotInteger {
        /// The grid.
        field: SumsField,
        /// What it holds.
        value: String,
    },
    /// More pairs or truncated sentences than sentences.
    #[error("{field} is {count}, more than the {sentences} sentences")]
    MoreThanSentences {
        /// `pairs` or `truncated`.
        field: &'static str,
        /// The count.
        count: u64,
        /// Sentences.
        sentences: u64,
    },
    /// A head in more sentences than there are.
    #[error("{at} is {count}, more than the {sentences} sentences")]
    HeadSentences {
        /// Where.
        at: SumsCell,
        /// The count.
        count: u64,
        /// Sentences.
        sentences: u64,
    },
    /// A statistic defined in more sentences than its head has.
    #[error("{at} is {count}, more than the head's {sentences} sentences")]
    Defined {
        /// Where.
        at: SumsCell,
        /// The count.
        count: u64,
        /// The head's sentences.
        sentences: u64,
    },
    /// A statistic defined over more rows than its head has.
    #[error("{at} is {count}, more than the head's {rows} rows")]
    DefinedRows {
        /// Where.
        at: SumsCell,
        /// The count.
        count: u64,
        /// The head's rows.
        rows: u64,
    },
    /// A sum below 0, beyond rounding.
    #[error("{at} is {sum}, below 0: no statistic is negative")]
    Negative {
        /// Where.
        at: SumsCell,
        /// The sum.
        sum: i128,
    },
    /// A sum larger than its count of values can reach.
    #[error("{at} is {sum}, more than its {count} sentences (or rows) can add up to")]
    Unreachable {
        /// Where.
        at: SumsCell,
        /// The sum.
        sum: i128,
        /// The sentences it is over.
        count: u64,
    },
    /// Sums of another model shape than the others'.
    #[error("sums: {layers} layers × {heads} heads, but the other files' are {others_layers} × {others_heads}")]
    OtherShape {
        /// Its layers.
        layers: usize,
        /// Its heads.
        heads: usize,
        /// The others' layers.
        others_layers: usize,
        /// The others' heads.
        others_heads: usize,
    },
    /// An expert load no run writes (rows that do not count `tokens × top_k`), or another
    /// model's.
    #[error("{0}")]
    ExpertLoad(String),
    /// A count whose sum over the files does not fit.
    #[error("{field}: the sum of the files' values overflows 64 bits")]
    CountOverflows {
        /// The count (`tokens`, `bad_lines.by_kind.tabs`).
        field: String,
    },
    /// A head's count whose sum over the files does not fit.
    #[error("{at}: the sum of the files' values overflows 64 bits")]
    HeadCountOverflows {
        /// Where.
        at: SumsCell,
    },
    /// A fixed-point sum whose sum over the files does not fit.
    #[error("{at}: the sum of the files' values overflows 128 bits")]
    SumOverflows {
        /// Where.
        at: SumsCell,
    },
}

/// A value no sentence's statistic takes: infinite, below 0 (beyond rounding), or larger than
/// any sequence allows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ImpossibleValue {
    /// The statistic.
    pub stat: Stat,
    /// The value.
    pub value: f64,
}

impl fmt::Display for ImpossibleValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let why = if self.value.is_infinite() {
            "not a finite number"
        } else if self.value < 0.0 {
            "below 0"
        } else {
            "larger than any sequence allows"
        };
        write!(f, "{} is {}: {why}", self.stat.name(), self.value)
    }
}

/// A sound journal record holding a number no sentence has.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ImpossibleRecord {
    /// More units than tokens, or more tokens than any sequence.
    #[error("{tokens} tokens and {units} units")]
    Counts {
        /// Tokens.
        tokens: u64,
        /// Units.
        units: u64,
    },
    /// An output name no line gets.
    #[error("the output name {name:?}")]
    Name {
        /// The name (cut to 40 bytes).
        name: String,
    },
    /// More rows than any sequence.
    #[error("rows of layer {layer}, head {head} is {rows}")]
    Rows {
        /// The layer.
        layer: usize,
        /// The head.
        head: usize,
        /// The rows.
        rows: u64,
    },
    /// A statistic's value no sentence has.
    #[error("{value} (layer {layer}, head {head})")]
    Value {
        /// The value.
        value: ImpossibleValue,
        /// The layer.
        layer: usize,
        /// The head.
        head: usize,
    },
}

/// A journal a resumed run cannot use (a torn or corrupt record is not one: what follows it is
/// computed again).
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// It is not a regular file, or cannot be opened.
    #[error("its journal {name} {source}")]
    Open {
        /// The journal's name.
        name: String,
        /// Why.
        source: std::io::Error,
    },
    /// Reading it failed.
    #[error("its journal {name}: cannot be read: {source}")]
    Read {
        /// The journal's name.
        name: String,
        /// Why.
        source: std::io::Error,
    },
    /// A sound record with a number no sentence has.
    #[error("its journal {name}: line {line}: {what}, which no sentence has; the journal is damaged or was edited")]
    Impossible {
        /// The journal's name.
        name: String,
        /// The line the record is of.
        line: usize,
        /// What it holds.
        what: ImpossibleRecord,
    },
}
