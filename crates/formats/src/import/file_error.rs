//! What makes a file, or the arrays in it, something attnviz cannot draw: the facts, worded in
//! one line each that says what to do.

use crate::attention::ShapeError;

use super::check::shape_str;

/// A file, or the arrays and tokens in it, that attnviz cannot draw. `file` is the file as
/// shown; `name` an array in it (`file.npz: attention`).
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// A folder.
    #[error("{file} is a folder; give an attnviz JSON export, an .npz or a .safetensors file")]
    Folder {
        /// The path.
        file: String,
    },
    /// A FIFO, a device: only regular files are read.
    #[error(
        "{file} is not a regular file; give an attnviz JSON export, an .npz or a .safetensors file"
    )]
    NotRegular {
        /// The path.
        file: String,
    },
    /// A single `.npy` array, which has no room for the tokens.
    #[error("{file} is a single .npy array: save the attention and its tokens together with np.savez(FILE, attention=a, tokens=np.array(tokens))")]
    SingleNpy {
        /// The file.
        file: String,
    },
    /// None of the formats attnviz reads.
    #[error("{file} is not an attnviz JSON export, an .npz or a .safetensors file (it starts with neither `{{`, a zip header nor a safetensors header)")]
    UnknownFormat {
        /// The file.
        file: String,
    },
    /// Some layers asked of a file that holds its attention as one array.
    #[error("{file} ({format}) holds its attention as one array, read whole; reading some layers only is for a capture saved layer by layer")]
    LayersOfWhole {
        /// The file.
        file: String,
        /// Its format, as the import names it (`.npz`).
        format: String,
    },
    /// Both self-attention and encoder–decoder arrays.
    #[error("{file} holds both `attention` and `{name}`: give a self-attention model's `attention`, or an encoder–decoder's encoder/decoder/cross arrays, not both")]
    BothKinds {
        /// The file.
        file: String,
        /// The encoder–decoder array found.
        name: &'static str,
    },
    /// No attention array.
    #[error("{file} has no `attention` array (nor encoder_attention, decoder_attention or cross_attention); store the weights as `attention` [layers, heads, queries, keys]")]
    NoAttention {
        /// The file.
        file: String,
    },
    /// Attention stored as integers or strings.
    #[error("{file}: {name} holds integers or strings; give float attention probabilities")]
    NotFloats {
        /// The file.
        file: String,
        /// The array.
        name: String,
    },
    /// A batch of more than one input.
    #[error("{file}: {name} {} holds a batch of {} inputs; save one: a[:, 0]", shape_str(.shape), .shape[1])]
    Batch {
        /// The file.
        file: String,
        /// The array.
        name: String,
        /// Its shape (rank 5).
        shape: Vec<usize>,
    },
    /// Another rank than 4 (or 5 with a batch of 1).
    #[error("{file}: {name} has rank {} (shape {}); give [layers, heads, queries, keys]{}", .shape.len(), shape_str(.shape), if .shape.len() == 3 { " (one layer: a[None])" } else { "" })]
    Rank {
        /// The file.
        file: String,
        /// The array.
        name: String,
        /// Its shape.
        shape: Vec<usize>,
    },
    /// A text field that is not one string.
    #[error("{file}: `{name}` must be one string")]
    NotOneString {
        /// The file.
        file: String,
        /// The field.
        name: String,
    },
    /// A tokens field that is not strings.
    #[error("{file}: `{name}` must be a 1-D array of strings (np.array(tokens, dtype=str))")]
    NotStrings {
        /// The file.
        file: String,
        /// The field.
        name: String,
    },
    /// An integer field that is not integers.
    #[error("{file}: `{name}` must be integers")]
    NotIntegers {
        /// The file.
        file: String,
        /// The field.
        name: String,
    },
    /// An input id that is no token id.
    #[error("{file}: `{prefix}input_ids` holds a value that is not a token id")]
    NotATokenId {
        /// The file.
        file: String,
        /// The side's prefix (`encoder_`, or nothing).
        prefix: String,
    },
    /// `sentence_b_start` that is not one non-negative integer.
    #[error("{file}: `sentence_b_start` must be one non-negative integer")]
    SentenceBField {
        /// The file.
        file: String,
    },
    /// A role name attnviz does not know.
    #[error("{file}: role `{role}` is not one of start, end, pad, special, word, piece")]
    Role {
        /// The file.
        file: String,
        /// The name.
        role: String,
    },
    /// A safetensors file that cannot be read.
    #[error("{file} is not a readable .safetensors file: {source}")]
    Safetensors {
        /// The file.
        file: String,
        /// The reader's error.
        source: safetensors::SafeTensorError,
    },
    /// Weights of a type attnviz does not read.
    #[error("{file}: {name} is {dtype}; give F32, F16, BF16 or F64 weights")]
    Dtype {
        /// The file.
        file: String,
        /// The tensor.
        name: String,
        /// Its type, as safetensors names it.
        dtype: String,
    },
    /// Fewer or more values than the shape.
    #[error("{name} holds {values} values, not the {} its shape {} needs", .shape.iter().product::<usize>(), shape_str(.shape))]
    ValueCount {
        /// The array.
        name: String,
        /// Values it holds.
        values: usize,
        /// Its shape.
        shape: [usize; 4],
    },
    /// No weights.
    #[error("{name} is empty (shape {}): nothing to draw", shape_str(.shape))]
    Empty {
        /// The array.
        name: String,
        /// Its shape.
        shape: [usize; 4],
    },
    /// Self-attention that is not square.
    #[error("{name} is {queries} queries × {keys} keys, but {kind} attention has the same tokens on both sides; give a square array (or cross_attention for decoder × encoder)")]
    NotSquare {
        /// The array.
        name: String,
        /// Queries.
        queries: usize,
        /// Keys.
        keys: usize,
        /// Its kind (`self`, `encoder`, `decoder`).
        kind: &'static str,
    },
    /// Parts that do not make an attention.
    #[error("{name}: {source}")]
    Shape {
        /// The array.
        name: String,
        /// What does not fit.
        source: ShapeError,
    },
    /// Another number of tokens than rows (or columns).
    #[error("{name} has {n} {side} but {given} {field} are given; give one token per row{}", if *.side == "keys" { " and column" } else { "" })]
    TokenCount {
        /// The array.
        name: String,
        /// Rows (or columns).
        n: usize,
        /// `queries` or `keys`.
        side: &'static str,
        /// Tokens given.
        given: usize,
        /// The tokens field.
        field: String,
    },
    /// A per-token field of another length than the tokens.
    #[error("{field}: {len} {what} for {n} tokens; give one per token")]
    PerToken {
        /// The tokens field.
        field: String,
        /// Its length.
        len: usize,
        /// The per-token field (`roles`, `word_ids`, …).
        what: &'static str,
        /// Tokens.
        n: usize,
    },
    /// `sentence_b_start` outside the tokens.
    #[error("sentence_b_start {start} is not inside the {n} tokens: give the index of the first token of sentence B (1 to {})", .n.saturating_sub(1))]
    SentenceB {
        /// The index given.
        start: usize,
        /// Tokens.
        n: usize,
    },
}
