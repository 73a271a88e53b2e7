//! What makes an [`super::Attention`] (or a set of them, or what an analysis reads beside one)
//! inconsistent, as a typed error: each names the parts that disagree and their sizes.

use super::units::UnitsMismatch;
use super::AttentionKind;

/// An [`super::Attention`] built from parts that do not fit together, or terms an analysis was
/// given for another attention. Displays as `inconsistent attention: …`.
#[derive(Debug, thiserror::Error)]
#[error("inconsistent attention: {0}")]
pub struct ShapeError(pub ShapeProblem);

impl From<ShapeProblem> for ShapeError {
    fn from(p: ShapeProblem) -> Self {
        ShapeError(p)
    }
}

/// What does not fit (displays after `inconsistent attention: `).
#[derive(Debug, thiserror::Error)]
pub enum ShapeProblem {
    /// Unit lists of different lengths.
    #[error(transparent)]
    Units(#[from] UnitsMismatch),
    /// A router capture whose parts do not fit together or with the attention's tokens.
    #[error("router: {0}")]
    Router(String),
    /// Sink shares of another count than one per layer, head and query row.
    #[error("{len} attention-sink shares for {want} rows (one per layer, head and query)")]
    Sinks {
        /// Shares given.
        len: usize,
        /// Rows.
        want: usize,
    },
    /// A speech model's recording that does not fit the attention.
    #[error("recording: {0}")]
    Recording(String),
    /// Cross-attention without key units.
    #[error("cross-attention needs its own key units (the encoder's)")]
    CrossWithoutKeys,
    /// Self-attention given separate key units.
    #[error("self-attention has one list of units for queries and keys")]
    SelfWithKeys,
    /// A picture's image tokens that overlap another's or run past the input.
    #[error("a picture's image tokens {first}..{} do not fit in order inside the {tokens} tokens", first + count)]
    PictureTokens {
        /// Its first token.
        first: usize,
        /// Its tokens.
        count: usize,
        /// The attention's tokens.
        tokens: usize,
    },
    /// A prefix-LM prefix longer than the input.
    #[error(
        "a prefix of {prefix} tokens that see each other does not fit inside the {tokens} tokens"
    )]
    Prefix {
        /// The prefix's tokens.
        prefix: usize,
        /// The attention's tokens.
        tokens: usize,
    },
    /// A picture with another number of tokens than the attention.
    #[error("the image has {cells} tokens, the attention {tokens}")]
    ImageTokens {
        /// The picture's cells.
        cells: usize,
        /// The attention's tokens.
        tokens: usize,
    },
    /// Self-attention made cross-attention, or the other way.
    #[error("{} attention cannot become {} attention", .from.as_str(), .to.as_str())]
    KindChange {
        /// The kind it is.
        from: AttentionKind,
        /// The kind asked for.
        to: AttentionKind,
    },
    /// Weights of another count than the shape.
    #[error("weights hold {len} values, expected {layers} layers × {heads} heads × {queries} × {keys} = {}", .layers * .heads * .queries * .keys)]
    Weights {
        /// Values held.
        len: usize,
        /// Layers.
        layers: usize,
        /// Heads.
        heads: usize,
        /// Queries.
        queries: usize,
        /// Keys.
        keys: usize,
    },
    /// Layer numbers that do not name the captured layers.
    #[error("{} layer numbers {numbers:?} for {layers} captured layers (ascending, each once)", .numbers.len())]
    LayerNumbers {
        /// The numbers.
        numbers: Vec<usize>,
        /// Captured layers.
        layers: usize,
    },
    /// Sliding windows of another count than the layers.
    #[error("{windows} sliding windows for {layers} captured layers")]
    Windows {
        /// Windows given.
        windows: usize,
        /// Captured layers.
        layers: usize,
    },
    /// A sliding window where none can be.
    #[error("a sliding window needs causal self-attention and a width of at least 1")]
    WindowMask,
    /// A head map of another length than the heads.
    #[error("the head map has {entries} entries for {heads} heads")]
    HeadMap {
        /// Its entries.
        entries: usize,
        /// Heads.
        heads: usize,
    },
    /// Query/key vectors of another size than the shape.
    #[error("query/key vectors hold {queries}/{keys} values, expected {want_queries}/{want_keys}")]
    QueryKey {
        /// Query values held.
        queries: usize,
        /// Key values held.
        keys: usize,
        /// Query values expected.
        want_queries: usize,
        /// Key values expected.
        want_keys: usize,
    },
    /// An encoder–decoder set whose values are not encoder, decoder, cross in order.
    #[error("the {} attention of an encoder–decoder set is of kind {}", .place.as_str(), .kind.as_str())]
    SetKind {
        /// The place.
        place: AttentionKind,
        /// The kind found there.
        kind: AttentionKind,
    },
    /// A decoder self-attention that is not causal.
    #[error("the decoder's self-attention must be causal")]
    DecoderNotCausal,
    /// An encoder or cross-attention that does not see every key.
    #[error("encoder and cross-attention see every key (bidirectional mask)")]
    EncoderNotBidirectional,
    /// Cross-attention whose queries are not the decoder's units.
    #[error("cross-attention's queries ({cross} units) are not the decoder's units ({decoder})")]
    CrossQueries {
        /// Cross-attention's queries.
        cross: usize,
        /// The decoder's units.
        decoder: usize,
    },
    /// Cross-attention whose keys are not the encoder's units.
    #[error("cross-attention's keys ({cross} units) are not the encoder's units ({encoder})")]
    CrossKeys {
        /// Cross-attention's keys.
        cross: usize,
        /// The encoder's units.
        encoder: usize,
    },
    /// Three attentions of different models.
    #[error("the three attentions describe different models")]
    DifferentModels,
    /// Cross-attention of another shape than the decoder's layers.
    #[error("cross-attention has {cross_layers} layers × {cross_heads} heads, the decoder {decoder_layers} × {decoder_heads}: cross-attention sits in the decoder's layers")]
    CrossShape {
        /// Cross-attention's layers.
        cross_layers: usize,
        /// Its heads.
        cross_heads: usize,
        /// The decoder's layers.
        decoder_layers: usize,
        /// Its heads.
        decoder_heads: usize,
    },
    /// Three attentions at different levels.
    #[error("the three attentions are not at the same level, or not all with (or all without) special tokens")]
    DifferentLevels,
    /// Three attentions of different texts.
    #[error("the three attentions carry different source texts")]
    DifferentTexts,
    /// An encoder–decoder source with a pair.
    #[error("an encoder–decoder source has no pair")]
    PairInSource,
    /// A run that gave another number of attentions than an encoder–decoder's three.
    #[error("an encoder–decoder run gives three attentions")]
    NotThree,
    /// Value terms for another number of layers than captured.
    #[error("value terms for {terms} layers, {layers} layers captured")]
    TermsLayers {
        /// Layers of terms.
        terms: usize,
        /// Layers captured.
        layers: usize,
    },
    /// Value terms of another shape than the attention.
    #[error("value terms do not fit {heads} heads × {queries} queries × {keys} keys")]
    TermsShape {
        /// Heads.
        heads: usize,
        /// Queries.
        queries: usize,
        /// Keys.
        keys: usize,
    },
    /// Norm-based weights computed for another attention.
    #[error("the norm-based weights were computed for another attention")]
    OtherWeights,
    /// ALTI of a capture that left layers out.
    #[error("ALTI multiplies every layer's contributions; capture all layers for it")]
    AltiLayers,
    /// ALTI of anything but self-attention over one set of tokens.
    #[error("ALTI needs self-attention over one set of tokens in every layer")]
    AltiTokens,
}
