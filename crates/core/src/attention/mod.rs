//! The captured attention: the one value that flows from the encoder to every analysis and renderer.
//!
//! Numbering convention (used by the CLI, the JSON export and every view): **layers and heads are
//! numbered from 0**, as in Hugging Face's `outputs.attentions[layer][0, head]` and bertviz.
//! Query index is the row, key index the column: `weight(layer, head, query, key)`.
//!
//! The value is general enough for every kind of attention a Transformer has: the rows are
//! *query units* and the columns *key units* (the same list for self-attention, the decoder's and
//! the encoder's tokens for cross-attention), each unit with a [`Role`] from the tokenizer; a
//! [`MaskKind`] says which cells a query could not see (a causal decoder's future), an
//! [`AttentionKind`] which attention it is, and a query-head → key/value-head map describes
//! grouped-query attention. Renderers ask the value ([`Attention::is_masked`], the roles) rather
//! than assume a square bidirectional matrix of BERT tokens.
//!
//! One run gives an [`AttentionSet`]: one self-attention value, or an encoder–decoder's encoder,
//! decoder and cross-attention values, checked against each other (see [`set`](AttentionSet)).

pub mod display;
pub mod image;
pub mod mixing;
pub mod recording;
pub mod router;
mod set;
mod shape_error;
pub mod summary;
mod units;

use serde::{Deserialize, Serialize};

pub use display::LabelScheme;
pub use mixing::{Mixing, MixingLayer, MixingShapeError};
pub use recording::{RecordedWord, Recording, RecordingError};
pub use router::{Router, RouterLayer, RouterShapeError};
pub use set::{AttentionSet, KindError, ENCODER_DECODER_KINDS};
pub use shape_error::{ShapeError, ShapeProblem};
pub use units::{Role, Units, UnitsMismatch};

/// Which model produced an [`Attention`], and its shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelInfo {
    /// Hub repo id (`bert-base-uncased`), or a local folder's or file's name
    /// (`all-MiniLM-L6-v2`): where it is on this machine only when the loader was asked for
    /// the full path (`attnviz::model::Model::with_full_path`).
    pub id: String,
    /// Hub revision the files came from (a branch, tag or commit), `None` for a local folder.
    pub revision: Option<String>,
    /// Short name for titles, chosen when the model was loaded (see
    /// `attnviz::model::source::display_name`); `None`: derived from `id`.
    pub name: Option<String>,
    /// The model family's name (`BERT`, `RoBERTa`); empty when unknown (attention from
    /// elsewhere).
    pub family: String,
    /// Number of layers whose attention was captured.
    pub layers: usize,
    /// Attention heads per layer.
    pub heads: usize,
    /// Hidden size of the encoder.
    pub hidden_size: usize,
    /// Size of one head's query/key/value vectors (`hidden_size / heads`).
    pub head_dim: usize,
}

impl ModelInfo {
    /// Short name for titles: [`ModelInfo::name`]'s field when set; else a hub repo id as is,
    /// a local folder by its last path component.
    pub fn name(&self) -> &str {
        if let Some(name) = &self.name {
            return name;
        }
        if self.revision.is_some() {
            return &self.id;
        }
        let trimmed = self.id.trim_end_matches(['/', '\\']);
        trimmed
            .rsplit(['/', '\\'])
            .next()
            .filter(|s| !s.is_empty())
            .unwrap_or(&self.id)
    }
}

/// Whether the rows and columns of an [`Attention`] are word pieces or whole words.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// One unit per word piece, as the model saw them.
    #[default]
    Token,
    /// Word pieces merged into words: attention *to* a word is the sum over its pieces, attention
    /// *from* a word the mean over its pieces.
    Word,
}

impl Level {
    /// Lower-case name used in JSON and the HTML report.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Token => "token",
            Level::Word => "word",
        }
    }
}

/// Which head (or the mean over heads) a view shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeadSel {
    /// One head, 0-based.
    Index(usize),
    /// The mean over all heads of the layer.
    Mean,
}

/// A layer and a head (or the mean over the layer's heads): what the single-head views show.
///
/// Renderers check it against the attention they draw with [`ModelInfo::check_selection`] (one
/// check, one error type); the command line checks the user's `--layer`/`--head` once, before
/// anything is drawn, and words the error for its flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Selection {
    /// Layer, 0-based.
    pub layer: usize,
    /// Head, 0-based, or the mean.
    pub head: HeadSel,
}

impl Selection {
    /// `layer` and `head`.
    pub fn new(layer: usize, head: HeadSel) -> Self {
        Selection { layer, head }
    }
}

/// A [`Selection`] that names a layer or head the model does not have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SelectionError {
    /// The layer is out of range.
    #[error("layer {layer} does not exist: the model has layers 0–{} (numbered from 0)", layers.saturating_sub(1))]
    Layer {
        /// What was asked.
        layer: usize,
        /// How many there are.
        layers: usize,
    },
    /// The head is out of range.
    #[error("head {head} does not exist: the model has heads 0–{} per layer (numbered from 0)", heads.saturating_sub(1))]
    Head {
        /// What was asked.
        head: usize,
        /// How many there are per layer.
        heads: usize,
    },
}

impl ModelInfo {
    /// Check `selection` against this model's layers and heads.
    pub fn check_selection(&self, selection: Selection) -> Result<Selection, SelectionError> {
        if selection.layer >= self.layers {
            return Err(SelectionError::Layer {
                layer: selection.layer,
                layers: self.layers,
            });
        }
        if let HeadSel::Index(head) = selection.head {
            if head >= self.heads {
                return Err(SelectionError::Head {
                    head,
                    heads: self.heads,
                });
            }
        }
        Ok(selection)
    }
}

/// Which cells of an attention matrix a query could attend to.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum MaskKind {
    /// Every key (encoders, cross-attention).
    #[default]
    Bidirectional,
    /// Keys up to the query's own position (decoders): a key after the query is masked.
    Causal,
}

impl MaskKind {
    /// The name in JSON and the HTML report (`bidirectional`, `causal`).
    pub fn as_str(self) -> &'static str {
        match self {
            MaskKind::Bidirectional => "bidirectional",
            MaskKind::Causal => "causal",
        }
    }
}

/// How the model tells positions apart, as far as the views need to know: whether the query and
/// key vectors it captured carry the positions themselves.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum PositionScheme {
    /// Position vectors added to the token embeddings before the first layer (learned: BERT,
    /// GPT-2, BART; sinusoidal: Marian): a layer's queries and keys are projections of hidden
    /// states, with no rotation of their own.
    #[default]
    Absolute,
    /// Rotary position embeddings (RoPE: Llama, Qwen2, Mistral, SmolLM2): every layer rotates
    /// each query and key by its position before the dot product, so the captured vectors are
    /// the rotated ones, whose products the softmax saw.
    Rotary,
    /// A learned bias added to the scores by relative distance (T5): it is in neither q nor k.
    Relative,
}

impl PositionScheme {
    /// The name in JSON and the HTML report (`absolute`, `rotary`, `relative`).
    pub fn as_str(self) -> &'static str {
        match self {
            PositionScheme::Absolute => "absolute",
            PositionScheme::Rotary => "rotary",
            PositionScheme::Relative => "relative",
        }
    }
}

/// What an [`Attention`]'s weights are (the JSON documents' `attention_holds`): the model's
/// attention probabilities, or each row's shares of what reaches the query under a norm-based
/// weighting (Kobayashi et al. 2020, 2021). Both sum to 1 over a row; only the first is what the
/// softmax gave.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Default, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Holds {
    /// The attention probabilities α.
    #[default]
    Raw,
    /// ‖α_ij f_h(x_j)‖ as shares of each row's total.
    ValueWeighted,
    /// The norm-aware contributions (residual and normalisation included) as shares of each
    /// row's total.
    NormAware,
}

impl Holds {
    /// The name in JSON (`raw`, `value-weighted`, `norm-aware`).
    pub fn as_str(self) -> &'static str {
        match self {
            Holds::Raw => "raw",
            Holds::ValueWeighted => "value-weighted",
            Holds::NormAware => "norm-aware",
        }
    }

    /// Whether the weights are shares of a weighting rather than probabilities.
    pub fn is_shares(self) -> bool {
        self != Holds::Raw
    }
}

/// Which attention of the model a value holds.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
pub enum AttentionKind {
    /// The self-attention of an encoder-only or decoder-only model (BERT, GPT-2).
    #[default]
    #[serde(rename = "self")]
    SelfAttention,
    /// The encoder self-attention of an encoder–decoder model.
    #[serde(rename = "encoder")]
    Encoder,
    /// The decoder self-attention of an encoder–decoder model.
    #[serde(rename = "decoder")]
    Decoder,
    /// Cross-attention: decoder queries over encoder keys (not square).
    #[serde(rename = "cross")]
    Cross,
}

crate::choice!(AttentionKind {
    SelfAttention => ("self", "The self-attention of an encoder-only or decoder-only model"),
    Encoder => ("encoder", "An encoder–decoder's encoder self-attention"),
    Decoder => ("decoder", "An encoder–decoder's decoder self-attention (causal)"),
    Cross => ("cross", "Cross-attention: decoder tokens over encoder tokens"),
});

impl AttentionKind {
    /// The name in JSON and the HTML report (`self`, `encoder`, `decoder`, `cross`).
    pub fn as_str(self) -> &'static str {
        match self {
            AttentionKind::SelfAttention => "self",
            AttentionKind::Encoder => "encoder",
            AttentionKind::Decoder => "decoder",
            AttentionKind::Cross => "cross",
        }
    }

    /// Whether queries and keys are the same units (every kind but cross-attention).
    pub fn is_self(self) -> bool {
        self != AttentionKind::Cross
    }
}

/// Each head's query and key vectors, as the attention used them (before the 1/√d scaling).
///
/// Laid out over *tokens* (never words), row-major: queries `[layers, heads, query tokens,
/// head_dim]`, keys `[layers, kv_heads, key tokens, head_dim]`: with grouped-query attention
/// several query heads read one key head ([`Attention::kv_head`]).
#[derive(Clone, Debug, PartialEq)]
pub struct QueryKey {
    /// Query vectors, `[layers, heads, query tokens, head_dim]`.
    pub queries: Vec<f32>,
    /// Key vectors, `[layers, kv_heads, key tokens, head_dim]`.
    pub keys: Vec<f32>,
    /// The factor on `q·k` before the softmax when it is not `1/√head_dim` (T5 has none: 1);
    /// `None` for the usual `1/√head_dim`.
    pub scale: Option<f32>,
}

/// The attention of every layer and head for one input, with everything a view needs to label it.
///
/// Weights are `[layers, heads, n_query, n_key]`, row-major; row = query unit, column = key unit.
/// Units are tokens (or words, see [`Level`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Attention {
    /// The model that produced it.
    pub model: ModelInfo,
    /// The text the user gave (sentence A).
    pub text: String,
    /// The second sentence of a pair, if any.
    pub pair: Option<String>,
    /// An encoder–decoder's decoder text, on its decoder and cross-attention values: the
    /// teacher-forced target, or what the model generated (decoded). `text` stays the source,
    /// the same on every kind of one run; views that quote what the rows read quote this.
    pub target_text: Option<String>,
    /// Which attention this is.
    pub kind: AttentionKind,
    /// Which cells a query could not see.
    pub mask: MaskKind,
    /// Each captured layer's sliding attention window under a causal mask (`None`: every
    /// earlier key), as the model ran it: a query sees only the `window` tokens ending at its
    /// own ([`Attention::is_masked_in`]).
    windows: Vec<Option<usize>>,
    /// How the model encodes positions: with [`PositionScheme::Rotary`] the query/key vectors
    /// are the rotated ones.
    pub positions: PositionScheme,
    /// Whether units are tokens or words.
    pub level: Level,
    /// Whether the special tokens were removed and the rows renormalised.
    pub special_excluded: bool,
    queries: Units,
    /// `None`: the keys are the queries (self-attention).
    keys: Option<Units>,
    /// The key/value head each query head reads.
    kv_head: Vec<usize>,
    /// The model's number of each captured layer (`0, 1, …` unless only some were captured).
    layer_numbers: Vec<usize>,
    /// Attention probabilities, `[layers, heads, n_query, n_key]` (each row sums to 1 over the
    /// keys it may see).
    weights: Vec<f32>,
    /// What the weights are: the attention probabilities, or each row's shares of what reaches
    /// the query under a norm-based weighting (`attnviz_analysis::reweighted`), which views
    /// caption "share of the row".
    pub holds: Holds,
    /// Query/key vectors, when the model was asked to keep them (token level only).
    pub query_key: Option<QueryKey>,
    /// The picture a vision model's attention was computed over: its patch grid, what each
    /// token is, the preprocessing; `None` for text.
    pub image: Option<std::sync::Arc<image::ImageInput>>,
    /// The pictures a vision-language model read, each a run of its image tokens, in order;
    /// empty for text alone.
    pub pictures: std::sync::Arc<Vec<image::PictureTokens>>,
    /// How many tokens at the start see each other in full under the causal mask, later ones
    /// included (a prefix-LM mask: PaliGemma's pictures and prompt); 0 for none.
    pub prefix: usize,
    /// What a mixture-of-experts model's routers decided for the input's tokens (token level
    /// whatever the attention's level, labelled by its own tokens); `None` for a dense model.
    pub router: Option<std::sync::Arc<Router>>,
    /// Each row's share on a learned attention sink, `[layers, heads, n_query]` (gpt-oss: a
    /// logit per head that takes part in the softmax without being a token), so that the row's
    /// weights over the keys sum to 1 less it; `None` for a softmax without a sink. See
    /// [`Attention::sink_shares`].
    sink_shares: Option<Vec<f32>>,
    /// What a speech model heard (its spectrogram, the words with their times, the samples),
    /// on every value of a speech run; `None` for text and pictures.
    pub recording: Option<std::sync::Arc<Recording>>,
    /// The model's layers that mix tokens without a softmax (Qwen3-Next's gated delta layers):
    /// they have no attention map, so none of the captured layers is one of them; `None` for a
    /// model whose every layer is attention.
    pub non_softmax: Option<NonSoftmaxLayers>,
}

/// The layers of a hybrid model that mix tokens without a softmax (linear attention): their
/// token mixing is a linear map of their values whose rows need not sum to 1 and may be
/// negative, not an attention map, so views draw it apart, on a signed scale, or say that it
/// was not captured.
#[derive(Clone, Debug, PartialEq)]
pub struct NonSoftmaxLayers {
    /// What mixes the tokens (`gated delta`).
    pub kind: String,
    /// The model's numbers of those layers, ascending.
    pub layers: Vec<usize>,
    /// Their exact token-mixing matrices for this input, when the run captured them (every
    /// layer captured, the matrices kept); `None`: not captured.
    pub mixing: Option<std::sync::Arc<Mixing>>,
}

impl NonSoftmaxLayers {
    /// One line for a view's title: `layers 0–2 — gated delta: token mixing, not softmax, no
    /// attention map` (or, with the matrices captured, `… not softmax, signed, drawn apart`).
    pub fn note(&self) -> String {
        let tail = if self.mixing.is_some() {
            "signed, drawn apart"
        } else {
            "no attention map"
        };
        format!(
            "layers {} — {}: token mixing, not softmax, {tail}",
            layer_list(&self.layers),
            self.kind
        )
    }

    /// The one line a statistic that assumes probabilities says of these layers: `layers 0, 2
    /// (gated delta: token mixing, not probabilities) left out`.
    pub fn skipped(&self) -> String {
        format!(
            "layers {} ({}: token mixing, not probabilities) left out",
            layer_list(&self.layers),
            self.kind
        )
    }
}

/// Layer numbers for people: `[0, 5, 10, 11, 12]` → `0, 5, 10–12`; `0–29` for a whole model.
pub fn layer_list(layers: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < layers.len() {
        let mut j = i;
        while j + 1 < layers.len() && layers[j + 1] == layers[j] + 1 {
            j += 1;
        }
        parts.push(match j - i {
            0 => layers[i].to_string(),
            1 => format!("{}, {}", layers[i], layers[j]),
            _ => format!("{}–{}", layers[i], layers[j]),
        });
        i = j + 1;
    }
    parts.join(", ")
}

/// Everything an [`Attention`] is made of, for [`Attention::from_parts`].
#[derive(Clone, Debug)]
pub struct AttentionParts {
    /// Which model produced it (for attention from elsewhere, a description of the source).
    pub model: ModelInfo,
    /// Sentence A.
    pub text: String,
    /// Sentence B, if any.
    pub pair: Option<String>,
    /// Which attention it is.
    pub kind: AttentionKind,
    /// Which cells a query could not see.
    pub mask: MaskKind,
    /// How the model encodes positions.
    pub positions: PositionScheme,
    /// Whether units are tokens or words.
    pub level: Level,
    /// Whether special tokens were removed and rows renormalised.
    pub special_excluded: bool,
    /// The query units.
    pub queries: Units,
    /// The key units: `None` unless this is cross-attention.
    pub keys: Option<Units>,
    /// The key/value head of each query head; `None`: every head its own.
    pub kv_head: Option<Vec<usize>>,
    /// `[layers, heads, n_query, n_key]`, row-major.
    pub weights: Vec<f32>,
}

impl Attention {
    /// Self-attention over `units` (bidirectional, every head its own key/value head), checking
    /// that every per-unit vector has one entry per unit and that `weights` holds
    /// `layers × heads × n × n` values. Set the mask, kind, head map and vectors with the
    /// `with_*` methods.
    pub fn new(
        model: ModelInfo,
        text: String,
        pair: Option<String>,
        units: Units,
        weights: Vec<f32>,
    ) -> Result<Self, ShapeError> {
        Self::build(
            model,
            text,
            pair,
            AttentionKind::SelfAttention,
            units,
            None,
            weights,
        )
    }

    /// Cross-attention: `queries` (the decoder's units) over `keys` (the encoder's), weights
    /// `[layers, heads, queries, keys]`.
    pub fn cross(
        model: ModelInfo,
        text: String,
        pair: Option<String>,
        queries: Units,
        keys: Units,
        weights: Vec<f32>,
    ) -> Result<Self, ShapeError> {
        Self::build(
            model,
            text,
            pair,
            AttentionKind::Cross,
            queries,
            Some(keys),
            weights,
        )
    }

    /// A bidirectional, token-level value whose every head is its own key/value head.
    fn build(
        model: ModelInfo,
        text: String,
        pair: Option<String>,
        kind: AttentionKind,
        queries: Units,
        keys: Option<Units>,
        weights: Vec<f32>,
    ) -> Result<Self, ShapeError> {
        Self::from_parts(AttentionParts {
            model,
            text,
            pair,
            kind,
            mask: MaskKind::Bidirectional,
            positions: PositionScheme::Absolute,
            level: Level::Token,
            special_excluded: false,
            queries,
            keys,
            kv_head: None,
            weights,
        })
    }

    /// A value of any kind, level and mask from its parts (attention that was not computed here:
    /// a file, or arrays from Python; see `attnviz::import`), checked like [`Attention::new`].
    /// `keys` must be `None` for every kind but cross-attention. The one place a value is
    /// assembled ([`Attention::new`] and [`Attention::cross`] come through here).
    pub fn from_parts(parts: AttentionParts) -> Result<Self, ShapeError> {
        let (heads, layers) = (parts.model.heads, parts.model.layers);
        let att = Attention {
            model: parts.model,
            text: parts.text,
            pair: parts.pair,
            target_text: None,
            kind: parts.kind,
            mask: parts.mask,
            windows: vec![None; layers],
            positions: parts.positions,
            level: parts.level,
            special_excluded: parts.special_excluded,
            queries: parts.queries,
            keys: parts.keys,
            kv_head: parts.kv_head.unwrap_or_else(|| (0..heads).collect()),
            layer_numbers: (0..layers).collect(),
            weights: parts.weights,
            holds: Holds::Raw,
            query_key: None,
            image: None,
            pictures: Default::default(),
            prefix: 0,
            router: None,
            sink_shares: None,
            recording: None,
            non_softmax: None,
        };
        if att.kind == AttentionKind::Cross && att.keys.is_none() {
            return Err(ShapeProblem::CrossWithoutKeys.into());
        }
        att.check()?;
        Ok(att)
    }

    /// The same value with a mixture-of-experts model's router decisions (see
    /// [`Attention::router`]), checked to fit together.
    pub fn with_router(mut self, router: Option<Router>) -> Result<Self, ShapeError> {
        if let Some(r) = &router {
            r.check()
                .map_err(|e| ShapeError(ShapeProblem::Router(e.0)))?;
        }
        self.router = router.map(std::sync::Arc::new);
        Ok(self)
    }

    /// The same value with its decoder text (see [`Attention::target_text`]).
    pub fn with_target_text(mut self, target_text: Option<String>) -> Self {
        self.target_text = target_text;
        self
    }

    /// The same value with the display texts of its token-level units by the rules of the
    /// tokenizers that made them: `queries` for the rows, `keys` for the columns of
    /// cross-attention (an encoder–decoder's target and source tokenizers; the same for
    /// self-attention). Word-level units keep theirs (a word's text is what it shows).
    pub fn relabel(mut self, queries: LabelScheme, keys: LabelScheme) -> Self {
        if self.level == Level::Token {
            self.queries = self.queries.relabel(queries);
            self.keys = self.keys.map(|k| k.relabel(keys));
        }
        self
    }

    /// The same value with the picture a vision model read (one cell per token).
    pub fn with_image(mut self, image: image::ImageInput) -> Result<Self, ShapeError> {
        if image.cells.len() != self.queries.token_count() {
            return Err(ShapeProblem::ImageTokens {
                cells: image.cells.len(),
                tokens: self.queries.token_count(),
            }
            .into());
        }
        self.image = Some(std::sync::Arc::new(image));
        Ok(self)
    }

    /// The same value with the pictures a vision-language model read, each a run of its image
    /// tokens inside the token-level input, in order and apart.
    pub fn with_pictures(
        mut self,
        pictures: Vec<image::PictureTokens>,
    ) -> Result<Self, ShapeError> {
        let tokens = self.queries.token_count();
        let mut end = 0;
        for p in &pictures {
            let run = p.tokens();
            if run.start < end || run.end > tokens {
                return Err(ShapeProblem::PictureTokens {
                    first: run.start,
                    count: run.len(),
                    tokens,
                }
                .into());
            }
            end = run.end;
        }
        self.pictures = std::sync::Arc::new(pictures);
        Ok(self)
    }

    /// The same value with its first `prefix` tokens seeing each other in full under the causal
    /// mask (a prefix-LM mask); at most the token count.
    pub fn with_prefix(mut self, prefix: usize) -> Result<Self, ShapeError> {
        let tokens = self.queries.token_count();
        if prefix > tokens {
            return Err(ShapeProblem::Prefix { prefix, tokens }.into());
        }
        self.prefix = prefix;
        Ok(self)
    }

    /// The same value with `mask`.
    pub fn with_mask(mut self, mask: MaskKind) -> Self {
        self.mask = mask;
        self
    }

    /// The same value with each captured layer's sliding window (one entry per layer; a window
    /// needs a causal mask and square matrices).
    pub fn with_windows(mut self, windows: Vec<Option<usize>>) -> Result<Self, ShapeError> {
        self.windows = windows;
        self.check()?;
        Ok(self)
    }

    /// Captured layer `layer`'s sliding window, if it has one.
    pub fn window(&self, layer: usize) -> Option<usize> {
        self.windows.get(layer).copied().flatten()
    }

    /// Every captured layer's sliding window.
    pub fn windows(&self) -> &[Option<usize>] {
        &self.windows
    }

    /// Whether any captured layer has a sliding window.
    pub fn has_windows(&self) -> bool {
        self.windows.iter().any(Option::is_some)
    }

    /// The same value with the model's position scheme (say [`PositionScheme::Rotary`] for a
    /// model whose captured queries and keys are rotated).
    pub fn with_positions(mut self, positions: PositionScheme) -> Self {
        self.positions = positions;
        self
    }

    /// The same value as attention of `kind` (a cross-attention value stays cross, and only
    /// cross-attention may have different keys: use [`Attention::cross`]).
    pub fn with_kind(mut self, kind: AttentionKind) -> Result<Self, ShapeError> {
        if kind.is_self() != self.kind.is_self() {
            return Err(ShapeProblem::KindChange {
                from: self.kind,
                to: kind,
            }
            .into());
        }
        self.kind = kind;
        Ok(self)
    }

    /// The same value with query head `h` reading key/value head `kv_head[h]` (grouped-query
    /// attention); the identity by default.
    pub fn with_kv_heads(mut self, kv_head: Vec<usize>) -> Result<Self, ShapeError> {
        self.kv_head = kv_head;
        self.check()?;
        Ok(self)
    }

    /// The same value with its layers numbered as in the model (`--layers 0,5,10-12` captures
    /// layers 0, 5, 10, 11 and 12: matrix `i` is layer `numbers[i]`).
    pub fn with_layer_numbers(mut self, numbers: Vec<usize>) -> Result<Self, ShapeError> {
        self.layer_numbers = numbers;
        self.check()?;
        Ok(self)
    }

    /// The model's number of captured layer `i` (`i` itself unless only some were captured).
    pub fn layer_number(&self, i: usize) -> usize {
        self.layer_numbers[i]
    }

    /// The model's numbers of the captured layers, ascending.
    pub fn layer_numbers(&self) -> &[usize] {
        &self.layer_numbers
    }

    /// The same value with the query/key vectors the model used.
    pub fn with_query_key(mut self, query_key: Option<QueryKey>) -> Result<Self, ShapeError> {
        self.query_key = query_key;
        self.check()?;
        Ok(self)
    }

    /// A value derived from `self` (word level, special tokens excluded, …): the same model,
    /// text, kind, mask and head map with new units and weights. Query/key vectors are dropped:
    /// they only make sense per token. For self-attention `keys` must be `None`.
    pub fn derive(
        &self,
        level: Level,
        special_excluded: bool,
        queries: Units,
        keys: Option<Units>,
        weights: Vec<f32>,
    ) -> Result<Self, ShapeError> {
        let att = Attention {
            model: self.model.clone(),
            text: self.text.clone(),
            pair: self.pair.clone(),
            target_text: self.target_text.clone(),
            kind: self.kind,
            mask: self.mask,
            windows: self.windows.clone(),
            positions: self.positions,
            level,
            special_excluded,
            queries,
            keys,
            kv_head: self.kv_head.clone(),
            layer_numbers: self.layer_numbers.clone(),
            weights,
            holds: self.holds,
            query_key: None,
            image: self.image.clone(),
            pictures: self.pictures.clone(),
            prefix: self.prefix,
            router: self.router.clone(),
            sink_shares: None,
            recording: self.recording.clone(),
            non_softmax: self.non_softmax.clone(),
        };
        att.check()?;
        // The sink's share of a merged row is what its weights leave (a word's row is the mean
        // of its pieces' rows); renormalised rows leave nothing to explain.
        let sink_shares =
            (self.sink_shares.is_some() && !special_excluded).then(|| att.row_remainders());
        Ok(Attention { sink_shares, ..att })
    }

    /// `1 − Σ row` of every row, `[layers, heads, n_query]`, summed in f64.
    fn row_remainders(&self) -> Vec<f32> {
        self.weights
            .chunks_exact(self.n_keys().max(1))
            .map(|row| (1.0 - row.iter().map(|&w| w as f64).sum::<f64>()).max(0.0) as f32)
            .collect()
    }

    /// The same value with each row's share on a learned attention sink, `[layers, heads,
    /// n_query]` ([`Attention::sink_shares`]); `None`: the softmax had no sink.
    pub fn with_sink_shares(mut self, sinks: Option<Vec<f32>>) -> Result<Self, ShapeError> {
        if let Some(s) = &sinks {
            let want = self.model.layers * self.model.heads * self.n_queries();
            if s.len() != want {
                return Err(ShapeProblem::Sinks { len: s.len(), want }.into());
            }
        }
        self.sink_shares = sinks;
        Ok(self)
    }

    /// The same value with the sink shares its rows leave (`1 − Σ row`, the share a learned
    /// sink in the softmax took: gpt-oss's), or none (`with`: false).
    pub fn with_sinks_from_rows(self, with: bool) -> Self {
        let sink_shares = with.then(|| self.row_remainders());
        Attention {
            sink_shares,
            ..self
        }
    }

    /// Each row's share on the learned attention sink, `[layers, heads, n_query]`, when the
    /// model's softmax had one and the weights are its probabilities ([`Holds::Raw`]): the
    /// row's weights over the keys and this share sum to 1.
    pub fn sink_shares(&self) -> Option<&[f32]> {
        self.sink_shares
            .as_deref()
            .filter(|_| self.holds == Holds::Raw)
    }

    /// The sink's share of `query`'s row in `layer`/`head` (see [`Attention::sink_shares`]).
    pub fn sink_share(&self, layer: usize, head: usize, query: usize) -> Option<f32> {
        let n = self.n_queries();
        self.sink_shares()
            .map(|s| s[(layer * self.heads() + head) * n + query])
    }

    /// The sink's share of every row of `layer` for a head selection, `[n_query]`: one head's,
    /// or the mean over the layer's heads (as [`Attention::matrix`] means the rows).
    pub fn sink_share_row(&self, layer: usize, head: HeadSel) -> Option<Vec<f32>> {
        let s = self.sink_shares()?;
        let n = self.n_queries();
        let at = |h: usize| &s[(layer * self.heads() + h) * n..][..n];
        Some(match head {
            HeadSel::Index(h) => at(h).to_vec(),
            HeadSel::Mean => {
                let heads = self.heads();
                (0..n)
                    .map(|q| (0..heads).map(|h| at(h)[q]).sum::<f32>() / heads as f32)
                    .collect()
            }
        })
    }

    fn check(&self) -> Result<(), ShapeError> {
        let token_level = self.level == Level::Token;
        self.queries
            .check("query", token_level)
            .map_err(|e| ShapeError(e.into()))?;
        if let Some(keys) = &self.keys {
            if self.kind.is_self() {
                return Err(ShapeProblem::SelfWithKeys.into());
            }
            keys.check("key", token_level)
                .map_err(|e| ShapeError(e.into()))?;
        }
        let m = &self.model;
        let (nq, nk) = (self.n_queries(), self.n_keys());
        let want = m.layers * m.heads * nq * nk;
        if self.weights.len() != want {
            return Err(ShapeProblem::Weights {
                len: self.weights.len(),
                layers: m.layers,
                heads: m.heads,
                queries: nq,
                keys: nk,
            }
            .into());
        }
        if self.layer_numbers.len() != m.layers
            || self.layer_numbers.windows(2).any(|w| w[0] >= w[1])
        {
            return Err(ShapeProblem::LayerNumbers {
                numbers: self.layer_numbers.clone(),
                layers: m.layers,
            }
            .into());
        }
        if self.windows.len() != m.layers {
            return Err(ShapeProblem::Windows {
                windows: self.windows.len(),
                layers: m.layers,
            }
            .into());
        }
        if self.has_windows()
            && (self.mask != MaskKind::Causal
                || !self.is_square()
                || self.windows.contains(&Some(0)))
        {
            return Err(ShapeProblem::WindowMask.into());
        }
        if self.kv_head.len() != m.heads {
            return Err(ShapeProblem::HeadMap {
                entries: self.kv_head.len(),
                heads: m.heads,
            }
            .into());
        }
        if let Some(qk) = &self.query_key {
            let (tq, tk) = (self.queries.token_count(), self.keys().token_count());
            let want_q = m.layers * m.heads * tq * m.head_dim;
            let want_k = m.layers * self.kv_heads() * tk * m.head_dim;
            if qk.queries.len() != want_q || qk.keys.len() != want_k {
                return Err(ShapeProblem::QueryKey {
                    queries: qk.queries.len(),
                    keys: qk.keys.len(),
                    want_queries: want_q,
                    want_keys: want_k,
                }
                .into());
            }
        }
        Ok(())
    }

    /// The query units: the rows of every matrix.
    pub fn queries(&self) -> &Units {
        &self.queries
    }

    /// The key units: the columns (the query units themselves for self-attention).
    pub fn keys(&self) -> &Units {
        self.keys.as_ref().unwrap_or(&self.queries)
    }

    /// Whether the keys are the query units themselves (every kind but cross-attention), so
    /// matrices are square and unit `i` is the same on both sides.
    pub fn is_square(&self) -> bool {
        self.keys.is_none()
    }

    /// Number of query units (rows).
    pub fn n_queries(&self) -> usize {
        self.queries.len()
    }

    /// Number of key units (columns).
    pub fn n_keys(&self) -> usize {
        self.keys().len()
    }

    /// Number of query units: the side of every matrix of a self-attention value.
    pub fn len(&self) -> usize {
        self.queries.len()
    }

    /// Whether there are no units at all.
    pub fn is_empty(&self) -> bool {
        self.queries.is_empty() || self.keys().is_empty()
    }

    /// Labels of the query units (for self-attention, of every unit).
    pub fn tokens(&self) -> &[String] {
        &self.queries.labels
    }

    /// Whether query unit `query` could not see key unit `key`: a causal mask hides every key
    /// that starts after the query ends (in token positions, so merged words and excluded
    /// special tokens keep the model's order), except within a picture whose image tokens see
    /// each other in full ([`image::PictureTokens::bidirectional`]). Renderers ask this rather than assume every cell
    /// is visible; a masked cell holds 0.
    pub fn is_masked(&self, query: usize, key: usize) -> bool {
        match self.mask {
            MaskKind::Bidirectional => false,
            MaskKind::Causal => {
                let (q, k) = (&self.queries.spans[query], &self.keys().spans[key]);
                // A picture whose image tokens see each other in full (Gemma 3).
                let together = || {
                    self.pictures.iter().any(|p| {
                        let run = p.tokens();
                        p.bidirectional && run.contains(&q.start) && run.contains(&k.start)
                    })
                };
                k.start >= q.end && !together() && !self.in_prefix(query, key)
            }
        }
    }

    /// Whether query unit `query` could not see key unit `key` in captured layer `layer`: the
    /// mask of [`Attention::is_masked`], or the layer's sliding window, which hides every key
    /// whose last token is `window` or more tokens before the query's first (Mistral, Gemma,
    /// Qwen with `use_sliding_window`). Renderers drawing one layer ask this; a masked cell
    /// holds 0.
    /// Inside a prefix-LM mask's prefix the window does not apply (transformers ORs the
    /// prefix's block onto the windowed causal mask).
    pub fn is_masked_in(&self, layer: usize, query: usize, key: usize) -> bool {
        self.is_masked(query, key)
            || !self.in_prefix(query, key)
                && self.window(layer).is_some_and(|w| {
                    let (q, k) = (&self.queries.spans[query], &self.keys().spans[key]);
                    q.start >= (k.end.max(1) - 1) + w
                })
    }

    /// Whether `key` is hidden from `query` in every captured layer (what a figure over all
    /// layers, or their mean, may draw as masked).
    pub fn is_masked_everywhere(&self, query: usize, key: usize) -> bool {
        self.is_masked(query, key) || (0..self.layers()).all(|l| self.is_masked_in(l, query, key))
    }

    /// Whether query unit `query` and key unit `key` both start inside the prefix
    /// ([`Attention::prefix`]).
    fn in_prefix(&self, query: usize, key: usize) -> bool {
        self.prefix > 0
            && self.queries.spans[query].start < self.prefix
            && self.keys().spans[key].start < self.prefix
    }

    /// How many keys query unit `query` could see.
    pub fn visible_keys(&self, query: usize) -> usize {
        match self.mask {
            MaskKind::Bidirectional => self.n_keys(),
            MaskKind::Causal if self.prefix > 0 || !self.pictures.is_empty() => (0..self.n_keys())
                .filter(|&k| !self.is_masked(query, k))
                .count(),
            MaskKind::Causal => {
                let end = self.queries.spans[query].end;
                self.keys().spans.iter().filter(|s| s.start < end).count()
            }
        }
    }

    /// How many keys query unit `query` could see in captured layer `layer`: those of
    /// [`Attention::visible_keys`] that the layer's sliding window, if any, keeps
    /// ([`Attention::is_masked_in`]).
    pub fn visible_keys_in(&self, layer: usize, query: usize) -> usize {
        if self.window(layer).is_none() {
            return self.visible_keys(query);
        }
        (0..self.n_keys())
            .filter(|&k| !self.is_masked_in(layer, query, k))
            .count()
    }

    /// Number of layers.
    pub fn layers(&self) -> usize {
        self.model.layers
    }

    /// Number of (query) heads per layer.
    pub fn heads(&self) -> usize {
        self.model.heads
    }

    /// The key/value head each query head reads: `kv_head()[h]` (the identity unless the model
    /// uses grouped-query attention).
    pub fn kv_head(&self) -> &[usize] {
        &self.kv_head
    }

    /// Number of key/value heads per layer.
    pub fn kv_heads(&self) -> usize {
        self.kv_head.iter().max().map_or(0, |&m| m + 1)
    }

    /// Whether several query heads share a key/value head (grouped- or multi-query attention).
    pub fn is_grouped(&self) -> bool {
        self.kv_heads() < self.heads()
    }

    /// The query heads that read key/value head `kv`, in order.
    pub fn heads_of_kv(&self, kv: usize) -> Vec<usize> {
        (0..self.heads())
            .filter(|&h| self.kv_head[h] == kv)
            .collect()
    }

    /// How a view names query head `head` under grouped-query attention: `"kv head 1, shared
    /// with heads 3, 5"`; `None` when every head has its own key/value head.
    pub fn kv_note(&self, head: usize) -> Option<String> {
        if !self.is_grouped() {
            return None;
        }
        let kv = self.kv_head[head];
        let others: Vec<String> = self
            .heads_of_kv(kv)
            .into_iter()
            .filter(|&h| h != head)
            .map(|h| h.to_string())
            .collect();
        Some(match others.len() {
            0 => format!("kv head {kv}, its own"),
            1 => format!("kv head {kv}, shared with head {}", others[0]),
            _ => format!("kv head {kv}, shared with heads {}", others.join(", ")),
        })
    }

    /// The attention sink: under a causal mask, the unit at the model's first position (token
    /// 0), whatever token it is (a BOS token, or GPT-2's first word). Every query can see it,
    /// and causal models learn to park there the attention a head does not need (Xiao et al.
    /// 2023, "Efficient Streaming Language Models with Attention Sinks", arXiv:2309.17453: the
    /// effect follows the position, not the token). `None` for bidirectional attention and
    /// cross-attention, and when that unit was removed (special tokens excluded).
    pub fn sink(&self) -> Option<usize> {
        if self.mask != MaskKind::Causal || !self.is_square() {
            return None;
        }
        self.queries.spans.iter().position(|s| s.start == 0)
    }

    /// The first unit the model generated rather than read (generated units follow the
    /// prompt), if any.
    pub fn first_generated(&self) -> Option<usize> {
        self.queries.first_generated()
    }

    /// All weights, `[layers, heads, n_query, n_key]` row-major.
    pub fn weights(&self) -> &[f32] {
        &self.weights
    }

    /// Size of one head's matrix.
    fn matrix_len(&self) -> usize {
        self.n_queries() * self.n_keys()
    }

    /// One layer's weights, `[heads, n_query, n_key]` row-major.
    pub fn layer(&self, layer: usize) -> &[f32] {
        let size = self.heads() * self.matrix_len();
        &self.weights[layer * size..(layer + 1) * size]
    }

    /// One head's `n_query × n_key` matrix, row = query, column = key.
    pub fn head(&self, layer: usize, head: usize) -> &[f32] {
        let size = self.matrix_len();
        let start = (layer * self.heads() + head) * size;
        &self.weights[start..start + size]
    }

    /// One attention weight: how much `query` attends to `key` in `layer`/`head`.
    pub fn weight(&self, layer: usize, head: usize, query: usize, key: usize) -> f32 {
        self.head(layer, head)[query * self.n_keys() + key]
    }

    /// The mean over the heads of `layer`, `n_query × n_key` row-major.
    pub fn head_mean(&self, layer: usize) -> Vec<f32> {
        let mut mean = vec![0f32; self.matrix_len()];
        for h in 0..self.heads() {
            for (m, w) in mean.iter_mut().zip(self.head(layer, h)) {
                *m += w;
            }
        }
        let scale = 1.0 / self.heads() as f32;
        mean.iter_mut().for_each(|m| *m *= scale);
        mean
    }

    /// The matrix for a head selection: one head's weights, or the mean over the layer's heads.
    pub fn matrix(&self, layer: usize, head: HeadSel) -> Vec<f32> {
        match head {
            HeadSel::Index(h) => self.head(layer, h).to_vec(),
            HeadSel::Mean => self.head_mean(layer),
        }
    }

    /// Query vector of query token `token` in `layer`/`head`, if vectors were captured.
    pub fn query(&self, layer: usize, head: usize, token: usize) -> Option<&[f32]> {
        let qk = self.query_key.as_ref()?;
        let d = self.model.head_dim;
        let tokens = self.queries.token_count();
        let at = ((layer * self.heads() + head) * tokens + token) * d;
        Some(&qk.queries[at..at + d])
    }

    /// Key vector that query head `head` uses for key token `token` in `layer` (its key/value
    /// head's), if vectors were captured.
    pub fn key(&self, layer: usize, head: usize, token: usize) -> Option<&[f32]> {
        let qk = self.query_key.as_ref()?;
        let d = self.model.head_dim;
        let tokens = self.keys().token_count();
        let at = ((layer * self.kv_heads() + self.kv_head[head]) * tokens + token) * d;
        Some(&qk.keys[at..at + d])
    }

    /// The index of the first query unit of the pair's second sentence, if any.
    pub fn sentence_b_start(&self) -> Option<usize> {
        self.queries.segment_b_start()
    }

    /// How the view names the units with `role`: their distinct labels joined with `/`
    /// (`[CLS]`, `<s>`), over queries and keys; `None` when no unit has it.
    pub fn role_name(&self, role: Role) -> Option<String> {
        let mut labels = self.queries.labels_of(role);
        for l in self.keys().labels_of(role) {
            if !labels.contains(&l) {
                labels.push(l);
            }
        }
        (!labels.is_empty()).then(|| labels.join("/"))
    }

    /// The model's special tokens as a view names them (`[CLS]/[SEP]`, `<s>/</s>`), or
    /// "special tokens" when there are none or many kinds.
    pub fn special_names(&self) -> String {
        let names: Vec<String> = [Role::Start, Role::End, Role::Pad, Role::Special]
            .into_iter()
            .filter_map(|r| self.role_name(r))
            .collect();
        if names.is_empty() || names.len() > 3 {
            "special tokens".to_string()
        } else {
            names.join("/")
        }
    }
}

/// Synthetic values for the tests of the crates above (compiled always, not behind a feature:
/// see `simd::with_isa`).
#[doc(hidden)]
pub mod fixtures;
#[cfg(test)]
mod tests;
