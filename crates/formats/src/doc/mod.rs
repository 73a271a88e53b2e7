//! The JSON documents attnviz writes, as types: what the writers serialise, what the readers
//! deserialise, and what the JSON Schemas in the repository's `schema/` folder are generated
//! from ([`schemas`]; `docs/json.md` describes each field in words).
//!
//! The big numeric arrays (`attention`, `means`, `rollout`, a comparison's `diff`) are streamed
//! by their writers, a layer at a time, and never built as values; their place in a document is
//! held by shape types ([`Weights`], [`Matrices`]) whose schema says what the writer streams.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};

use crate::analysis::{HeadAblation, HeadAttribution, LogitLens, StatsSection};
use crate::attention::{
    AttentionKind, Holds, LabelScheme, Level, MaskKind, ModelInfo, PositionScheme, Role,
};

pub mod comparison;
pub mod corpus;
pub mod image;
pub mod lines;
pub mod mixing;
pub mod models;
pub mod router;
pub mod saved;
pub mod speech;
pub mod summary;

/// `format` of an attention document.
pub const ATTENTION_FORMAT: &str = "attnviz-attention";

/// Version of the JSON layout; bumped on any incompatible change. Version 2 (see `docs/json.md`
/// for what changed since 1) adds roles, segments, the attention kind, mask and head map, and
/// names the start/end statistics by role.
pub const FORMAT_VERSION: u32 = 2;

/// Version of the encoder–decoder layout (`docs/json.md`): one object per kind, each laid out as
/// a version-2 body. A single-kind document keeps [`FORMAT_VERSION`]'s layout and number, so
/// every reader of version 2 still reads it.
pub const ENCODER_DECODER_VERSION: u32 = 3;

/// `numbering` of every document: layers, heads and units are numbered from 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Numbering {
    /// Numbered from 0, as Hugging Face's `outputs.attentions[layer][0, head]`.
    #[default]
    #[serde(rename = "0-based")]
    ZeroBased,
}

/// `precision`: how the numbers of the big arrays were written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Precision {
    /// Rounded to 6 significant digits (relative error at most 5·10⁻⁶).
    #[default]
    #[serde(rename = "6 significant digits")]
    SixDigits,
    /// The shortest decimal that reads back as the same 32-bit float.
    #[serde(rename = "f32")]
    F32,
}

/// The four fields that open every attention document.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct Header {
    /// Always `"attnviz-attention"`.
    #[schemars(extend("const" = "attnviz-attention"))]
    pub format: String,
    /// 2 for one kind of attention, 3 for an encoder–decoder's three.
    pub format_version: u32,
    /// Always `"0-based"`.
    pub numbering: Numbering,
    /// How the numbers were written.
    pub precision: Precision,
}

impl Header {
    /// The header of a document of `version`.
    pub fn new(version: u32, full_precision: bool) -> Header {
        Header {
            format: ATTENTION_FORMAT.into(),
            format_version: version,
            numbering: Numbering::ZeroBased,
            precision: if full_precision {
                Precision::F32
            } else {
                Precision::SixDigits
            },
        }
    }
}

/// The `model` object of a one-kind body (and of a comparison's sides): the model that ran and
/// its shape. Written and read through this type; the reader takes every field as optional so
/// that version-1 documents (and saved captures' metadata, which state the layers saved) read.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ModelDoc {
    /// Its hub repo id, or a local folder's (or GGUF file's) name; the full path with
    /// `--full-paths`.
    pub id: Option<String>,
    /// Its name as every view titles it; with `--weighting` it ends with the weighting
    /// (`all-MiniLM-L6-v2 · value-weighted ‖α·f(x)‖`). Absent when not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Hub revision, null for a local folder.
    pub revision: Option<String>,
    /// The family that ran (`BERT`, `Llama`); empty for attention from arrays.
    #[schemars(required, extend("type" = "string"))]
    pub family: Option<String>,
    /// Layers whose attention was captured.
    #[schemars(required, extend("type" = "integer"))]
    pub layers: Option<usize>,
    /// Query heads per layer.
    #[schemars(required, extend("type" = "integer"))]
    pub heads: Option<usize>,
    /// Hidden size.
    #[schemars(required, extend("type" = "integer"))]
    pub hidden_size: Option<usize>,
    /// Size of one head's query/key vectors.
    #[schemars(required, extend("type" = "integer"))]
    pub head_dim: Option<usize>,
}

impl ModelDoc {
    /// The `model` object of `m`.
    pub fn of(m: &ModelInfo) -> ModelDoc {
        ModelDoc {
            id: Some(m.id.clone()),
            name: m.name.clone(),
            revision: m.revision.clone(),
            family: Some(m.family.clone()),
            layers: Some(m.layers),
            heads: Some(m.heads),
            hidden_size: Some(m.hidden_size),
            head_dim: Some(m.head_dim),
        }
    }
}

/// `layer_masks[i]`'s `mask`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LayerMaskKind {
    /// Every query sees every key.
    Bidirectional,
    /// A query sees the keys up to its own position.
    Causal,
    /// A query sees its own token and the `window − 1` before it.
    SlidingWindow,
}

impl From<MaskKind> for LayerMaskKind {
    fn from(m: MaskKind) -> Self {
        match m {
            MaskKind::Bidirectional => LayerMaskKind::Bidirectional,
            MaskKind::Causal => LayerMaskKind::Causal,
        }
    }
}

/// One entry of `layer_masks`: a captured layer's mask as the model ran it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LayerMaskDoc {
    /// The model's number of the layer.
    pub layer: usize,
    /// Its mask.
    pub mask: LayerMaskKind,
    /// The sliding window's width (`sliding_window` only), else null.
    pub window: Option<usize>,
}

impl LayerMaskDoc {
    /// Layer `layer`'s entry: `sliding_window` with its width, else `mask`.
    pub fn new(layer: usize, mask: MaskKind, window: Option<usize>) -> LayerMaskDoc {
        LayerMaskDoc {
            layer,
            mask: if window.is_some() {
                LayerMaskKind::SlidingWindow
            } else {
                mask.into()
            },
            window,
        }
    }
}

/// The per-unit fields of one side of an attention (the queries; cross-attention's keys carry
/// the same fields prefixed `key_`, [`KeyUnitsDoc`]).
macro_rules! units_doc {
    ($(#[$doc:meta])* $name:ident, $tokens:literal, $display:literal, $scheme:literal,
     $ids:literal, $types:literal, $segments:literal, $roles:literal, $special:literal,
     $words:literal, $surfaces:literal, $spans:literal, $generated:literal, $b:literal) => {
        $(#[$doc])*
        #[derive(Clone, Debug, Serialize, JsonSchema)]
        pub struct $name<'a> {
            /// Each unit's label, as the tokenizer gave it (or a word's text).
            #[serde(rename = $tokens)]
            pub tokens: &'a [String],
            /// What a person reads for each unit.
            #[serde(rename = $display)]
            pub display: &'a [String],
            /// The kind of tokenizer that made the labels, which decides `display`.
            #[serde(rename = $scheme)]
            pub label_scheme: LabelScheme,
            /// Vocabulary ids (token level only, when known).
            #[serde(rename = $ids, skip_serializing_if = "Option::is_none")]
            pub input_ids: Option<&'a [u32]>,
            /// The tokenizer's token type ids.
            #[serde(rename = $types)]
            pub token_type_ids: &'a [u32],
            /// 0 for the text, 1 for the pair.
            #[serde(rename = $segments)]
            pub segments: &'a [u32],
            /// What each unit is.
            #[serde(rename = $roles)]
            pub roles: &'a [Role],
            /// Whether each unit is a special token.
            #[serde(rename = $special)]
            pub special: Vec<bool>,
            /// The word each unit belongs to; null for special tokens.
            #[serde(rename = $words)]
            pub word_ids: &'a [Option<usize>],
            /// The text each unit stands for.
            #[serde(rename = $surfaces)]
            pub surfaces: &'a [String],
            /// The tokens `[start, end)` each unit covers.
            #[serde(rename = $spans)]
            pub spans: Vec<[usize; 2]>,
            /// Whether the model generated the unit.
            #[serde(rename = $generated)]
            pub generated: &'a [bool],
            /// The first unit of the pair, null without one.
            #[serde(rename = $b)]
            pub sentence_b_start: Option<usize>,
        }

        impl<'a> $name<'a> {
            /// The fields of `units` at `level`.
            pub fn of(units: &'a crate::attention::Units, level: Level) -> Self {
                $name {
                    tokens: &units.labels,
                    display: &units.display,
                    label_scheme: units.scheme,
                    input_ids: (level == Level::Token && !units.ids.is_empty())
                        .then_some(units.ids.as_slice()),
                    token_type_ids: &units.type_ids,
                    segments: &units.segments,
                    roles: &units.roles,
                    special: units.roles.iter().map(|r| r.is_special()).collect(),
                    word_ids: &units.word_ids,
                    surfaces: &units.surfaces,
                    spans: units.spans.iter().map(|s| [s.start, s.end]).collect(),
                    generated: &units.generated,
                    sentence_b_start: units.segment_b_start(),
                }
            }
        }
    };
}

units_doc!(
    /// The query units' fields (every unit of self-attention).
    UnitsDoc, "tokens", "display", "label_scheme", "input_ids", "token_type_ids", "segments",
    "roles", "special", "word_ids", "surfaces", "spans", "generated", "sentence_b_start"
);
units_doc!(
    /// Cross-attention's key units (the encoder's), each field prefixed `key_`.
    KeyUnitsDoc, "key_tokens", "key_display", "key_label_scheme", "key_input_ids",
    "key_token_type_ids", "key_segments", "key_roles", "key_special", "key_word_ids",
    "key_surfaces", "key_spans", "key_generated", "key_sentence_b_start"
);

/// The metadata of one kind of attention: everything a version-2 body holds before its
/// sections and its `attention` array. A saved capture's metadata holds it for each kind.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct BodyMeta<'a> {
    /// The model and the shape of this kind's attention.
    pub model: ModelDoc,
    /// Which attention.
    pub kind: AttentionKind,
    /// Which cells a query could attend to.
    pub mask: MaskKind,
    /// How the model encodes positions.
    pub positions: PositionScheme,
    /// The attention sink of a causal model (the unit at the first position), else null.
    pub sink: Option<usize>,
    /// Key/value heads per layer.
    pub kv_heads: usize,
    /// The key/value head each query head reads.
    pub kv_head: &'a [usize],
    /// The model's number of each captured layer.
    pub layer_numbers: Cow<'a, [usize]>,
    /// Each captured layer's mask as the model ran it.
    pub layer_masks: Vec<LayerMaskDoc>,
    /// Sentence A as given.
    pub text: &'a str,
    /// Sentence B, or null.
    pub pair: Option<&'a str>,
    /// Tokens or words.
    pub level: Level,
    /// Whether the special tokens were removed and the rows renormalised.
    pub special_excluded: bool,
    /// What `attention` (and every section made from it) holds: the attention probabilities
    /// (`raw`), or each row's shares of a norm-based weighting (`value-weighted`,
    /// `norm-aware`). Rows sum to 1 either way.
    pub attention_holds: Holds,
    /// A vision model's picture: patch grid, cells, preprocessing, norms, the picture seen
    /// (`docs/json.md`, "Vision models").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<image::ImageDoc>,
    /// The pictures a vision-language model read with the prompt, each a run of image tokens
    /// (`docs/json.md`, "Vision-language models"); absent for text alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pictures: Vec<image::PictureDoc>,
    /// How many units at the start see each other in full under the causal mask, later ones
    /// included, whatever the sliding window (a prefix-LM mask: PaliGemma's pictures and
    /// prompt); absent for none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub prefix: usize,
    /// A mixture-of-experts model's router decisions per routed layer and token, and each
    /// expert's load (`docs/json.md`, "Router"); absent for a dense model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub router: Option<router::RouterDoc>,
    /// A hybrid model's layers that mix tokens without a softmax (Qwen3-Next's gated delta
    /// layers, none of them in `attention`) and, when captured, their exact token-mixing
    /// matrices, signed and not normalised (`docs/json.md`, "Token mixing"); absent for a
    /// model whose every layer is attention.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub non_softmax: Option<mixing::NonSoftmaxDoc>,
    /// Each row's share on a learned attention sink, `[layers][heads][queries]` (gpt-oss: a
    /// logit per head that takes part in the softmax without being a token): each row of
    /// `attention` sums to 1 less its share (`docs/json.md`, "Attention sinks"); absent for a
    /// softmax without one, and when the rows hold shares of a weighting.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sink_shares: Option<Vec<Vec<Vec<f32>>>>,
    /// The query units.
    #[serde(flatten)]
    pub queries: UnitsDoc<'a>,
    /// Cross-attention's key units; absent for self-attention.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub keys: Option<KeyUnitsDoc<'a>>,
}

/// The sections a body may hold beside its attention, each optional (`--json-include`,
/// `--stats`, the analyses that run the model). Matrix sections are streamed after `attention`.
#[derive(JsonSchema)]
#[allow(dead_code)]
pub struct Sections {
    /// Per-head statistics (`docs/stats.md`).
    #[serde(skip_serializing_if = "Option::is_none")]
    stats: Option<StatsSection>,
    /// Each head's direct logit attribution (decoders).
    #[serde(skip_serializing_if = "Option::is_none")]
    head_attribution: Option<HeadAttribution>,
    /// The change in the target's log-probability when each head is removed (decoders).
    #[serde(skip_serializing_if = "Option::is_none")]
    head_ablation: Option<HeadAblation>,
    /// The logit lens (`--lens`).
    #[serde(skip_serializing_if = "Option::is_none")]
    logit_lens: Option<LogitLens>,
    /// A speech model's recording, transcript and word timings (cross-attention's kind).
    #[serde(skip_serializing_if = "Option::is_none")]
    speech: Option<speech::SpeechSection>,
    /// A summarised run's layers (long inputs; its `attention` is then empty).
    #[serde(skip_serializing_if = "Option::is_none")]
    summary: Option<summary::SummarySection>,
    /// `attention[layer][head][query][key]`.
    attention: Weights,
    /// Each layer's mean over its heads.
    #[serde(skip_serializing_if = "Option::is_none")]
    means: Option<Matrices>,
    /// Attention rollout through each layer.
    #[serde(skip_serializing_if = "Option::is_none")]
    rollout: Option<Matrices>,
    /// ALTI through each layer.
    #[serde(skip_serializing_if = "Option::is_none")]
    alti: Option<Matrices>,
    /// Each layer's own ALTI contributions.
    #[serde(skip_serializing_if = "Option::is_none")]
    alti_per_layer: Option<Matrices>,
    /// Value zeroing rolled out through each layer.
    #[serde(skip_serializing_if = "Option::is_none")]
    value_zeroing: Option<Matrices>,
    /// Each layer's own value-zeroing scores.
    #[serde(skip_serializing_if = "Option::is_none")]
    value_zeroing_per_layer: Option<Matrices>,
}

/// One kind's body: its metadata, sections and attention (a version-2 document without its
/// header; a version-3 document's `encoder`, `decoder` and `cross`).
#[derive(JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
#[allow(dead_code)]
pub struct KindBody {
    #[serde(flatten)]
    meta: BodyMeta<'static>,
    #[serde(flatten)]
    sections: Sections,
}

/// A version-2 document: one kind of attention (encoder-only and decoder-only models, vision
/// models, attention rendered from files).
#[derive(JsonSchema)]
#[schemars(
    title = "attnviz attention document, format version 2",
    extend("additionalProperties" = false)
)]
#[allow(dead_code)]
pub struct AttentionV2 {
    #[serde(flatten)]
    header: Header,
    #[serde(flatten)]
    meta: BodyMeta<'static>,
    #[serde(flatten)]
    sections: Sections,
}

/// The `model` object of a version-3 document: the model and each side's shape.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct ModelV3Doc {
    /// As [`ModelDoc::id`].
    pub id: String,
    /// As [`ModelDoc::name`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Hub revision, null for a local folder.
    pub revision: Option<String>,
    /// The family that ran.
    pub family: String,
    /// Hidden size.
    pub hidden_size: usize,
    /// Size of one head's query/key vectors.
    pub head_dim: usize,
    /// The encoder's captured layers.
    pub encoder_layers: usize,
    /// The encoder's heads per layer.
    pub encoder_heads: usize,
    /// The decoder's captured layers (cross-attention sits in them).
    pub decoder_layers: usize,
    /// The decoder's heads per layer.
    pub decoder_heads: usize,
}

/// The fields of a version-3 document before its three bodies.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct SetMeta<'a> {
    /// The model and each side's shape.
    pub model: ModelV3Doc,
    /// The source, as given.
    pub text: &'a str,
    /// The teacher-forced target, or null when the decoder generated.
    pub target: Option<&'a str>,
    /// What the decoder generated, or null with a target.
    pub generated_text: Option<&'a str>,
    /// Tokens or words, for every kind.
    pub level: Level,
    /// Whether the special tokens were removed, for every kind.
    pub special_excluded: bool,
    /// The kinds whose objects follow, in order.
    pub kinds: Vec<AttentionKind>,
}

/// A version-3 document: an encoder–decoder's three attentions.
#[derive(JsonSchema)]
#[schemars(
    title = "attnviz attention document, format version 3 (encoder–decoder)",
    extend("additionalProperties" = false)
)]
#[allow(dead_code)]
pub struct AttentionV3 {
    #[serde(flatten)]
    header: Header,
    #[serde(flatten)]
    meta: SetMeta<'static>,
    /// The encoder's self-attention.
    encoder: KindBody,
    /// The decoder's causal self-attention.
    decoder: KindBody,
    /// Cross-attention: decoder units (rows) over encoder units (columns).
    cross: KindBody,
}

/// The shape of `attention`: `float[layers][heads][queries][keys]`, streamed by the writer
/// (`null` for a value that is not finite).
#[derive(Clone, Copy, Debug)]
pub struct Weights;

/// The writers stream the numbers themselves; a document type holds no `Weights` to serialise.
impl Serialize for Weights {
    fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
        Err(serde::ser::Error::custom(
            "attention weights are streamed by the writer, not serialised from a document type",
        ))
    }
}

/// The shape of a matrix section: `float[layers][queries][keys]`, streamed by the writer.
pub struct Matrices;

fn nested_numbers(depth: usize, what: &str) -> Schema {
    let mut items = serde_json::json!({"type": ["number", "null"]});
    for _ in 0..depth {
        items = serde_json::json!({"type": "array", "items": items});
    }
    items["description"] = what.into();
    Schema::try_from(items).expect("an object")
}

impl JsonSchema for Weights {
    fn schema_name() -> Cow<'static, str> {
        "Weights".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        nested_numbers(
            4,
            "attention[layer][head][query][key]; null for a value that is not finite",
        )
    }
}

impl JsonSchema for Matrices {
    fn schema_name() -> Cow<'static, str> {
        "Matrices".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        nested_numbers(
            3,
            "[layer][query][key]; null for a value that is not finite",
        )
    }
}

/// Every document kind's schema: `(file name in schema/, schema)`, in a fixed order.
pub fn schemas() -> Vec<(&'static str, serde_json::Value)> {
    fn of<T: JsonSchema>() -> serde_json::Value {
        schemars::generate::SchemaSettings::draft2020_12()
            .into_generator()
            .into_root_schema_for::<T>()
            .to_value()
    }
    vec![
        ("attention-v2.schema.json", of::<AttentionV2>()),
        ("attention-v3.schema.json", of::<AttentionV3>()),
        ("comparison.schema.json", of::<comparison::ComparisonDoc>()),
        ("saved-metadata.schema.json", of::<saved::SavedMetadata>()),
        ("saved-body.schema.json", of::<saved::SavedBody>()),
        ("corpus-stats.schema.json", of::<corpus::CorpusStats>()),
        ("corpus-partial.schema.json", of::<corpus::CorpusPartial>()),
        ("models.schema.json", of::<models::ModelsListing>()),
    ]
}

/// [`schemas`] as the files' bytes: pretty-printed, ending with a newline.
pub fn schema_files() -> Vec<(&'static str, String)> {
    schemas()
        .into_iter()
        .map(|(name, v)| {
            let mut text = serde_json::to_string_pretty(&v).expect("a schema serialises");
            text.push('\n');
            (name, text)
        })
        .collect()
}

/// The field names a derived `Deserialize` struct reads, as the derive hands them to
/// `deserialize_struct` (a test's check that a reader knows every field a schema names).
#[cfg(test)]
pub(crate) fn fields_of<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    use serde::de::{self, Visitor};
    struct Names;
    #[derive(Debug)]
    struct Found(&'static [&'static str]);
    impl std::fmt::Display for Found {
        fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            write!(f, "{:?}", self.0)
        }
    }
    impl std::error::Error for Found {}
    impl de::Error for Found {
        fn custom<M: std::fmt::Display>(_: M) -> Self {
            Found(&[])
        }
    }
    impl<'de> de::Deserializer<'de> for Names {
        type Error = Found;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Found> {
            Err(Found(&[]))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Found> {
            Err(Found(fields))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
            byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
            identifier ignored_any
        }
    }
    match T::deserialize(Names) {
        Err(Found(fields)) => fields,
        Ok(_) => &[],
    }
}

#[cfg(test)]
mod tests;

fn is_zero(n: &usize) -> bool {
    *n == 0
}
