//! attnviz's own JSON export (`docs/json.md`), format versions 1 to 3, read back. A version-3
//! document (an encoder–decoder run) holds one version-2 body per kind (`encoder`, `decoder`,
//! `cross`); each is read as a version-2 document would be.
//!
//! The document is deserialised in one streaming pass: the metadata into small structs, the
//! `attention` array straight into one flat `Vec<f32>` (its shape checked as it arrives, never
//! more than [`MAX_WEIGHTS`] values), and the optional sections (`stats`, `means`, `rollout`)
//! skipped without being built, since every view recomputes them.
//!
//! Version 1 (BERT only) has no roles: `[CLS]`/`[SEP]`/`[PAD]` marked `special` become the
//! start, end and padding tokens, other special tokens [`Role::Special`], and a token continues
//! a word when its word id is its predecessor's. Its `token_type_ids` are the segments.

use std::cell::Cell;
use std::fmt;
use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde::Deserialize;

use crate::attention::{
    AttentionKind, Holds, LabelScheme, Level, MaskKind, ModelInfo, PositionScheme, Role,
};
use crate::doc::{
    image::{ImageDoc, PictureDoc},
    LayerMaskDoc, LayerMaskKind, ModelDoc,
};

use super::budget::{Declared, Estimate};
use super::json_error::{DocProblem, JsonDocError, TextOverAllowance};
use super::store::Plan;
use super::{check, labels, Arrays, ImportError, Origin, Tokens, MAX_WEIGHTS, ROW_SUM_TOLERANCE};

/// The newest format version this reader knows.
const NEWEST: u32 = crate::doc::ENCODER_DECODER_VERSION;

/// Every field a document of versions 1 to 3 may hold, each optional (version 1 lacks most),
/// typed with the documents' own types ([`crate::doc`]) where they are objects or names. The
/// fields are those of the schemas (`doc_reads_every_field_the_schemas_name` checks it); a
/// field read but not kept is skipped without being built.
#[derive(Deserialize)]
struct Doc {
    format: Option<String>,
    format_version: Option<u32>,
    model: Option<ModelDoc>,
    kind: Option<AttentionKind>,
    mask: Option<MaskKind>,
    kv_head: Option<Vec<usize>>,
    text: Option<Text>,
    pair: Option<Text>,
    level: Option<Level>,
    special_excluded: Option<bool>,
    /// What `attention` holds; absent before it was written (then raw).
    attention_holds: Option<Holds>,
    /// What development builds wrote before `attention_holds` (true for either weighting).
    #[serde(default)]
    shares: Option<bool>,
    // The query units, field by field: `#[serde(flatten)]` buffered every field it did not
    // know (`display` among them) as serde's `Content` and copied the rest out of it.
    tokens: Option<Vec<Text>>,
    input_ids: Option<Vec<u32>>,
    token_type_ids: Option<Vec<u32>>,
    segments: Option<Vec<u32>>,
    roles: Option<Vec<Text>>,
    special: Option<Vec<bool>>,
    word_ids: Option<Vec<Option<usize>>>,
    surfaces: Option<Vec<Text>>,
    spans: Option<Vec<[usize; 2]>>,
    generated: Option<Vec<bool>>,
    label_scheme: Option<String>,
    #[serde(default)]
    key_tokens: Option<Vec<Text>>,
    #[serde(default)]
    key_input_ids: Option<Vec<u32>>,
    #[serde(default)]
    key_segments: Option<Vec<u32>>,
    #[serde(default)]
    key_token_type_ids: Option<Vec<u32>>,
    #[serde(default)]
    key_roles: Option<Vec<Text>>,
    #[serde(default)]
    key_special: Option<Vec<bool>>,
    #[serde(default)]
    key_word_ids: Option<Vec<Option<usize>>>,
    #[serde(default)]
    key_surfaces: Option<Vec<Text>>,
    #[serde(default)]
    key_spans: Option<Vec<[usize; 2]>>,
    #[serde(default)]
    key_generated: Option<Vec<bool>>,
    #[serde(default)]
    key_label_scheme: Option<String>,
    attention: Option<Flat>,
    // Skipped without building them.
    #[serde(default)]
    stats: Option<IgnoredAny>,
    #[serde(default)]
    means: Option<IgnoredAny>,
    #[serde(default)]
    rollout: Option<IgnoredAny>,
    image: Option<ChargedImage>,
    #[serde(default)]
    pictures: Option<Vec<ChargedPicture>>,
    #[serde(default)]
    prefix: usize,
    #[serde(default)]
    router: Option<crate::doc::router::RouterDoc>,
    #[serde(default)]
    non_softmax: Option<crate::doc::mixing::NonSoftmaxDoc>,
    #[serde(default)]
    sink_shares: Option<Vec<Vec<Vec<f32>>>>,
    /// A summarised run's section: its presence says why `attention` is empty.
    #[serde(default)]
    summary: Option<IgnoredAny>,
    positions: Option<String>,
    layer_numbers: Option<Vec<usize>>,
    #[serde(default)]
    layer_masks: Option<Vec<LayerMaskDoc>>,
    /// A speech run's section (the cross body's).
    #[serde(default)]
    speech: Option<crate::doc::speech::SpeechSection>,
    // Version 3: the teacher-forced target, and one body per kind.
    target: Option<Text>,
    generated_text: Option<Text>,
    encoder: Option<Box<Doc>>,
    decoder: Option<Box<Doc>>,
    cross: Option<Box<Doc>>,
}

impl Doc {
    /// The query units' fields, taken out of the document.
    fn take_queries(&mut self) -> UnitsJson {
        UnitsJson {
            tokens: texts(self.tokens.take()),
            input_ids: self.input_ids.take(),
            token_type_ids: self.token_type_ids.take(),
            segments: self.segments.take(),
            roles: texts(self.roles.take()),
            special: self.special.take(),
            word_ids: self.word_ids.take(),
            surfaces: texts(self.surfaces.take()),
            spans: self.spans.take(),
            generated: self.generated.take(),
            label_scheme: self.label_scheme.take(),
        }
    }
}

/// A string of the document that is kept (a token, a text), its bytes charged to the reading
/// thread's allowance as it is read (see [`charge_text`]).
pub(super) struct Text(pub(super) String);

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        charge_text(s.len()).map_err(de::Error::custom)?;
        Ok(Text(s))
    }
}

/// A vision model's `image` object, its `source` charged to the reading thread's allowance as
/// a [`Text`] is.
struct ChargedImage(ImageDoc);

impl<'de> Deserialize<'de> for ChargedImage {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let image = ImageDoc::deserialize(d)?;
        charge_text(image.source.len()).map_err(de::Error::custom)?;
        Ok(ChargedImage(image))
    }
}

/// One of a vision-language model's `pictures`, its `source` charged as [`ChargedImage`]'s.
struct ChargedPicture(PictureDoc);

impl<'de> Deserialize<'de> for ChargedPicture {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let picture = PictureDoc::deserialize(d)?;
        charge_text(picture.image.source.len()).map_err(de::Error::custom)?;
        Ok(ChargedPicture(picture))
    }
}

/// Charge `bytes` of kept text to the reading thread's allowance: they cost
/// [`TEXT_COST`] bytes each by the time every view has its labels.
fn charge_text(bytes: usize) -> Result<(), TextOverAllowance> {
    let cost = (bytes as u64).saturating_mul(TEXT_COST);
    let total = TEXT.with(|t| {
        let total = t.get().saturating_add(cost);
        t.set(total);
        total
    });
    if total > TEXT_ALLOWANCE.with(Cell::get) {
        TEXT_EXCEEDED.with(|e| e.set(true));
        return Err(TextOverAllowance {
            bytes: total / TEXT_COST,
        });
    }
    Ok(())
}

/// What each byte of a kept text (a token label, the input text, a surface) costs once read
/// and drawn: the string itself, its display label, the labels the views number and wrap, the
/// HTML report's escaped payload. Measured with one 50 MiB token, peak resident memory per byte
/// of it: 4.1 (`-q`), 6.2 (`--html`), 8.0 (`diff`), 11.3 (`--png`); rounded up
/// (`docs/hostile.md`).
pub const TEXT_COST: u64 = 16;

fn texts(v: Option<Vec<Text>>) -> Option<Vec<String>> {
    v.map(|v| v.into_iter().map(|t| t.0).collect())
}

fn text(v: Option<Text>) -> Option<String> {
    v.map(|t| t.0)
}

/// The bytes of kept text read on this thread since [`start_text_budget`], at [`TEXT_COST`]
/// each.
pub(super) fn text_charged() -> u64 {
    TEXT.with(Cell::get)
}

/// Start charging this thread's kept text against `budget` bytes.
pub(super) fn start_text_budget(budget: u64) {
    TEXT.with(|t| t.set(0));
    TEXT_ALLOWANCE.with(|a| a.set(budget));
    TEXT_EXCEEDED.with(|e| e.set(false));
}

/// Whether the text read since [`start_text_budget`] went past its budget (and stop charging
/// against it).
pub(super) fn end_text_budget() -> bool {
    TEXT_ALLOWANCE.with(|a| a.set(u64::MAX));
    TEXT_EXCEEDED.with(|e| e.replace(false))
}

#[derive(Deserialize, Default)]
struct UnitsJson {
    tokens: Option<Vec<String>>,
    input_ids: Option<Vec<u32>>,
    token_type_ids: Option<Vec<u32>>,
    segments: Option<Vec<u32>>,
    roles: Option<Vec<String>>,
    special: Option<Vec<bool>>,
    word_ids: Option<Vec<Option<usize>>>,
    surfaces: Option<Vec<String>>,
    spans: Option<Vec<[usize; 2]>>,
    generated: Option<Vec<bool>>,
    label_scheme: Option<String>,
}

/// The attention array, flattened as it is read: `[layers][heads][queries][keys]`.
struct Flat {
    values: Vec<f32>,
    /// The length found at each depth (the first list's; every later one must match).
    shape: [Option<usize>; 4],
}

impl<'de> Deserialize<'de> for Flat {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut flat = Flat {
            values: Vec::new(),
            shape: [None; 4],
        };
        d.deserialize_seq(Depth {
            flat: &mut flat,
            depth: 0,
        })?;
        Ok(flat)
    }
}

/// One depth of the nested array.
struct Depth<'a> {
    flat: &'a mut Flat,
    depth: usize,
}

impl<'de> DeserializeSeed<'de> for Depth<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Depth<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "a list at depth {} of attention[layer][head][query][key]",
            self.depth + 1
        )
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let depth = self.depth;
        let mut len = 0usize;
        if depth == 3 {
            let allowed = ALLOWANCE.with(|a| a.get());
            while let Some(v) = seq.next_element::<Option<f64>>()? {
                if len >= allowed {
                    EXCEEDED.with(|e| e.set(true));
                    return Err(de::Error::custom(format!(
                        "attention holds more than {MAX_WEIGHTS} weights, more than attnviz draws"
                    )));
                }
                // null: what the writer puts for a value that is not finite.
                self.flat.values.push(v.map_or(f32::NAN, |v| v as f32));
                len += 1;
            }
            ALLOWANCE.with(|a| a.set(allowed - len));
        } else {
            while seq
                .next_element_seed(Depth {
                    flat: &mut *self.flat,
                    depth: depth + 1,
                })?
                .is_some()
            {
                len += 1;
            }
        }
        match self.flat.shape[depth] {
            None => self.flat.shape[depth] = Some(len),
            Some(first) if first != len => {
                let what = [
                    "layers",
                    "heads per layer",
                    "queries per head",
                    "keys per query",
                ];
                return Err(de::Error::custom(format!(
                    "attention is ragged: one list has {len} {} where the first has {first}",
                    what[depth]
                )));
            }
            Some(_) => {}
        }
        Ok(())
    }
}

thread_local! {
    /// How many more weights the document being read on this thread may hold, all its bodies
    /// together: the fewer of [`MAX_WEIGHTS`] and what the memory budget pays for.
    static ALLOWANCE: Cell<usize> = const { Cell::new(MAX_WEIGHTS) };
    /// Whether the document held more than its allowance.
    static EXCEEDED: Cell<bool> = const { Cell::new(false) };
    /// The cost of the text kept so far ([`charge_text`]), and what it may reach.
    static TEXT: Cell<u64> = const { Cell::new(0) };
    static TEXT_ALLOWANCE: Cell<u64> = const { Cell::new(u64::MAX) };
    static TEXT_EXCEEDED: Cell<bool> = const { Cell::new(false) };
}

/// Read the JSON export at `path`: its format version and its attention. The attention is
/// checked against `plan`'s budget as it streams in (every weight costs its 4 bytes and the
/// outputs' cost), and again with its shape once read.
pub fn read(path: &Path, shown: &str, plan: &Plan) -> Result<(u32, Vec<Arrays>), ImportError> {
    let file = File::open(path).map_err(|source| ImportError::Io {
        path: shown.to_string(),
        source,
    })?;
    let per_weight = 4u64.saturating_add(plan.cost.per_weight);
    let paid = usize::try_from(plan.budget.bytes / per_weight).unwrap_or(usize::MAX);
    let allowance = paid.min(MAX_WEIGHTS);
    ALLOWANCE.with(|a| a.set(allowance));
    EXCEEDED.with(|e| e.set(false));
    start_text_budget(plan.budget.bytes);
    let doc: Result<Doc, _> = serde_json::from_reader(BufReader::with_capacity(1 << 16, file));
    let exceeded = EXCEEDED.with(|e| e.replace(false));
    ALLOWANCE.with(|a| a.set(MAX_WEIGHTS));
    let text_exceeded = end_text_budget();
    let text_cost = text_charged();
    let doc = match doc {
        Err(_) if text_exceeded => {
            return Err(ImportError::TooBig {
                what: format!(
                    "{shown}: its token labels and texts (more than {})",
                    crate::model::format_bytes(text_cost / TEXT_COST)
                ),
                needs: text_cost,
                budget: plan.budget,
            })
        }
        Err(_) if exceeded && allowance < MAX_WEIGHTS => {
            return Err(ImportError::TooBig {
                what: format!(
                    "{shown}: its attention (more than {} weights)",
                    super::budget::human(allowance as u64)
                ),
                needs: (allowance as u64 + 1).saturating_mul(per_weight),
                budget: plan.budget,
            })
        }
        Err(source) => {
            return Err(ImportError::Unreadable {
                shown: shown.to_string(),
                source,
            })
        }
        Ok(doc) => doc,
    };
    let (version, arrays) = from_doc(doc, shown)?;
    let mut estimate = Estimate::default();
    for a in &arrays {
        let declared = Declared {
            shape: a.shape.to_vec(),
            decoded: 4 * a.weights.len() as u64,
            transient: 0,
        };
        let name = match arrays.len() {
            1 => "attention".to_string(),
            _ => format!("{} attention", a.kind.as_str()),
        };
        estimate.add_attention(&name, &declared);
    }
    estimate.add_text(text_cost);
    estimate.check(shown, plan.cost, plan.budget)?;
    Ok((version, arrays))
}

fn from_doc(mut doc: Doc, shown: &str) -> Result<(u32, Vec<Arrays>), ImportError> {
    let bad = |problem: DocProblem| -> ImportError {
        JsonDocError {
            shown: shown.to_string(),
            problem,
        }
        .into()
    };
    if doc.format.as_deref() != Some("attnviz-attention") {
        return Err(bad(DocProblem::NotAnExport));
    }
    let version = doc.format_version.unwrap_or(0);
    if version == 0 || version > NEWEST {
        return Err(bad(DocProblem::Version {
            version,
            newest: NEWEST,
        }));
    }
    if version >= 3 {
        let target = text(doc.target.take());
        let generated_text = text(doc.generated_text.take());
        let bodies = [
            (AttentionKind::Encoder, doc.encoder.take()),
            (AttentionKind::Decoder, doc.decoder.take()),
            (AttentionKind::Cross, doc.cross.take()),
        ];
        let mut arrays = Vec::new();
        for (kind, body) in bodies {
            let Some(mut body) = body else {
                return Err(bad(DocProblem::NoBody { kind }));
            };
            if let Some(found) = body.kind.filter(|&k| k != kind) {
                return Err(bad(DocProblem::BodyKind {
                    place: kind,
                    kind: found,
                }));
            }
            body.kind = Some(kind);
            let mut a = body_arrays(*body, version, &format!("{shown}: {}", kind.as_str()))?;
            if let Some(o) = a.origin.as_mut() {
                o.target = target.clone();
                o.generated_text = generated_text.clone();
            }
            arrays.push(a);
        }
        return Ok((version, arrays));
    }
    Ok((version, vec![body_arrays(doc, version, shown)?]))
}

/// One kind's attention from a version-1/2 document, or a version-3 document's body of one kind
/// (`shown` names it in messages).
fn body_arrays(mut doc: Doc, version: u32, shown: &str) -> Result<Arrays, ImportError> {
    let bad = |problem: DocProblem| -> ImportError {
        JsonDocError {
            shown: shown.to_string(),
            problem,
        }
        .into()
    };
    let query_fields = doc.take_queries();
    let Some(flat) = doc.attention else {
        return Err(bad(DocProblem::NoAttention));
    };
    let shape = match flat.shape {
        [Some(l), Some(h), Some(q), Some(k)] => [l, h, q, k],
        [Some(0), ..] | [_, Some(0), ..] | [_, _, Some(0), _] if doc.summary.is_some() => {
            return Err(bad(DocProblem::Summarised))
        }
        [Some(0), ..] | [_, Some(0), ..] | [_, _, Some(0), _] => {
            return Err(bad(DocProblem::EmptyAttention))
        }
        _ => return Err(bad(DocProblem::AttentionShape)),
    };
    check::size(&format!("{shown}: attention"), &shape)?;
    let model = doc.model.ok_or_else(|| bad(DocProblem::NoModel))?;
    if model.layers.is_some_and(|l| l != shape[0]) || model.heads.is_some_and(|h| h != shape[1]) {
        return Err(bad(DocProblem::ModelShape {
            layers: model.layers.unwrap_or(0),
            heads: model.heads.unwrap_or(0),
            shape,
        }));
    }
    let level = doc.level.unwrap_or_default();
    let kind = doc.kind.unwrap_or_default();
    let queries = units(query_fields, version, shown, "")?;
    let keys = if kind == AttentionKind::Cross {
        let k = UnitsJson {
            tokens: texts(doc.key_tokens),
            input_ids: doc.key_input_ids,
            token_type_ids: doc.key_token_type_ids,
            segments: doc.key_segments,
            roles: texts(doc.key_roles),
            special: doc.key_special,
            word_ids: doc.key_word_ids,
            surfaces: texts(doc.key_surfaces),
            spans: doc.key_spans,
            generated: doc.key_generated,
            label_scheme: doc.key_label_scheme,
        };
        Some(units(k, version, shown, "key_")?)
    } else {
        None
    };
    let _ = (doc.stats, doc.means, doc.rollout);
    let source = model.id.clone().unwrap_or_else(|| shown.to_string());
    let holds = match (doc.attention_holds, doc.shares) {
        (Some(holds), _) => holds,
        (None, Some(true)) => Holds::ValueWeighted,
        (None, _) => Holds::Raw,
    };
    let origin = Origin {
        model: ModelInfo {
            id: source.clone(),
            revision: model.revision,
            name: model.name,
            family: model.family.unwrap_or_default(),
            layers: shape[0],
            heads: shape[1],
            hidden_size: model.hidden_size.unwrap_or(0),
            head_dim: model.head_dim.unwrap_or(0),
        },
        level,
        special_excluded: doc.special_excluded.unwrap_or(false),
        holds,
        kv_head: doc.kv_head,
        positions: match doc.positions.as_deref() {
            None | Some("absolute") => PositionScheme::Absolute,
            Some("rotary") => PositionScheme::Rotary,
            Some("relative") => PositionScheme::Relative,
            Some(other) => return Err(bad(DocProblem::Positions(other.to_string()))),
        },
        windows: layer_windows(
            doc.layer_masks,
            doc.layer_numbers.as_deref(),
            shape[0],
            shown,
        )?,
        image: None,
        pictures: Vec::new(),
        prefix: 0,
        router: match doc.router {
            Some(r) => Some(r.router().map_err(|e| bad(DocProblem::Router(e)))?),
            None => None,
        },
        non_softmax: match doc.non_softmax {
            Some(m) => Some(m.layers().map_err(|e| bad(DocProblem::Mixing(e)))?),
            None => None,
        },
        layer_numbers: doc.layer_numbers,
        sink_shares: doc
            .sink_shares
            .map(|layers| layers.into_iter().flatten().flatten().collect()),
        target: None,
        generated_text: None,
        speech: doc.speech,
    };
    let mut origin = origin;
    if let Some(ChargedImage(image)) = doc.image {
        // The cells are the model's tokens; a view without the special tokens (or by words)
        // still names them by their spans.
        let tokens = queries
            .spans
            .as_ref()
            .and_then(|s| s.iter().map(|r| r.end).max())
            .unwrap_or(shape[2]);
        let image =
            super::image::input(image, tokens, shape[0]).map_err(|e| bad(DocProblem::Image(e)))?;
        origin.image = Some(image);
    }
    if doc.prefix > 0 {
        // In tokens: up to the end of the prefix's last unit.
        origin.prefix = match &queries.spans {
            Some(spans) => spans.get(doc.prefix - 1).map(|s| s.end),
            None => (doc.prefix <= shape[2]).then_some(doc.prefix),
        }
        .ok_or_else(|| bad(DocProblem::PrefixUnits { units: doc.prefix }))?;
    }
    for ChargedPicture(p) in doc.pictures.into_iter().flatten() {
        // `first` is a unit; the picture's tokens start where that unit's span does.
        let first = match &queries.spans {
            Some(spans) => spans.get(p.first).map(|s| s.start),
            None => Some(p.first),
        }
        .ok_or_else(|| bad(DocProblem::PictureUnit { unit: p.first }))?;
        if p.count != p.image.cells.len() {
            return Err(bad(DocProblem::PictureCount {
                count: p.count,
                cells: p.image.cells.len(),
            }));
        }
        let image = super::image::input(p.image, p.count, shape[0])
            .map_err(|e| bad(DocProblem::Image(e)))?;
        origin
            .pictures
            .push(crate::attention::image::PictureTokens {
                first,
                image,
                bidirectional: p.bidirectional,
                tile: p.tile,
            });
    }
    let arrays = Arrays {
        name: format!("{shown}: attention"),
        kind,
        shape,
        weights: flat.values,
        queries,
        keys,
        mask: Some(doc.mask.unwrap_or_default()),
        text: text(doc.text),
        pair: text(doc.pair),
        source,
        tolerance: ROW_SUM_TOLERANCE,
        origin: Some(origin),
    };
    Ok(arrays)
}

/// Each captured layer's sliding window from `layer_masks` (`None` when the document has none,
/// as before format version 2 recorded them), checked against `layer_numbers`.
fn layer_windows(
    masks: Option<Vec<LayerMaskDoc>>,
    numbers: Option<&[usize]>,
    layers: usize,
    shown: &str,
) -> Result<Option<Vec<Option<usize>>>, ImportError> {
    let bad = |problem: DocProblem| -> ImportError {
        JsonDocError {
            shown: shown.to_string(),
            problem,
        }
        .into()
    };
    let Some(masks) = masks else {
        return Ok(None);
    };
    if masks.len() != layers {
        return Err(bad(DocProblem::LayerMasksCount {
            entries: masks.len(),
            layers,
        }));
    }
    let mut windows = Vec::with_capacity(layers);
    for (i, m) in masks.into_iter().enumerate() {
        let number = numbers.map_or(i, |n| n.get(i).copied().unwrap_or(i));
        if m.layer != number {
            return Err(bad(DocProblem::LayerMaskLayer {
                entry: i,
                layer: m.layer,
                number,
            }));
        }
        match (m.mask, m.window) {
            (LayerMaskKind::SlidingWindow, Some(w)) if w >= 1 => windows.push(Some(w)),
            (LayerMaskKind::Causal | LayerMaskKind::Bidirectional, None) => windows.push(None),
            (mask, window) => {
                return Err(bad(DocProblem::LayerMaskWindow {
                    entry: i,
                    mask,
                    window,
                }));
            }
        }
    }
    Ok(Some(windows))
}

fn units(
    u: UnitsJson,
    version: u32,
    shown: &str,
    prefix: &'static str,
) -> Result<Tokens, ImportError> {
    let bad = |problem: DocProblem| -> ImportError {
        JsonDocError {
            shown: shown.to_string(),
            problem,
        }
        .into()
    };
    let labels_ = u
        .tokens
        .ok_or_else(|| bad(DocProblem::NoTokens { prefix }))?;
    let n = labels_.len();
    let roles = match (u.roles, version) {
        (Some(names), _) => Some(super::store::parse_roles(shown, &names)?),
        // Version 1: BERT's special tokens, by the `special` flag; words by word id.
        (None, 1) => u.special.as_ref().map(|special| {
            (0..n)
                .map(|i| {
                    if special.get(i).copied().unwrap_or(false) {
                        match labels::is_special_label(&labels_[i]).then_some(labels_[i].as_str()) {
                            Some("[PAD]") => Role::Pad,
                            Some("[SEP]") => Role::End,
                            Some("[CLS]") => Role::Start,
                            _ if i == 0 => Role::Start,
                            _ => Role::Special,
                        }
                    } else {
                        let wid = u
                            .word_ids
                            .as_ref()
                            .and_then(|w| w.get(i).copied().flatten());
                        let prev = i.checked_sub(1).and_then(|p| {
                            u.word_ids
                                .as_ref()
                                .and_then(|w| w.get(p).copied().flatten())
                        });
                        if wid.is_some() && wid == prev && !special[i - 1] {
                            Role::Piece
                        } else {
                            Role::Word
                        }
                    }
                })
                .collect()
        }),
        (None, _) => None,
    };
    let segments = u.segments.or(if version == 1 {
        u.token_type_ids.clone()
    } else {
        None
    });
    let sentence_b_start = segments
        .as_ref()
        .and_then(|s| s.iter().position(|&x| x != 0));
    Ok(Tokens {
        labels: labels_,
        roles,
        word_ids: u.word_ids,
        ids: u.input_ids,
        type_ids: u.token_type_ids,
        surfaces: u.surfaces,
        sentence_b_start,
        spans: u.spans.map(|s| s.into_iter().map(|[a, b]| a..b).collect()),
        generated: u.generated,
        prettify: false,
        // An unknown name (a later attnviz's) shows the labels as they are.
        scheme: u.label_scheme.as_deref().and_then(LabelScheme::from_name),
    })
}

/// One kind's metadata body of a saved capture (`crate::save`): a version-2 body without
/// `attention`, parsed once (its texts charged as [`read`] charges them).
pub(super) struct SavedBody {
    doc: Doc,
}

impl SavedBody {
    /// Parse `body` (the JSON string of the header's metadata); `shown` names the kind.
    pub(super) fn parse(body: &str, shown: &str) -> Result<SavedBody, ImportError> {
        let doc: Doc = serde_json::from_str(body).map_err(|e| JsonDocError {
            shown: shown.to_string(),
            problem: DocProblem::NotABody(e),
        })?;
        Ok(SavedBody { doc })
    }

    /// The model's numbers of the layers saved.
    pub(super) fn layer_numbers(&self) -> Option<&[usize]> {
        self.doc.layer_numbers.as_deref()
    }

    /// Heads per layer (`model.heads`).
    pub(super) fn heads(&self) -> Option<usize> {
        self.doc.model.as_ref().and_then(|m| m.heads)
    }

    /// How many query tokens it labels.
    pub(super) fn queries(&self) -> Option<usize> {
        self.doc.tokens.as_ref().map(Vec::len)
    }

    /// How many key tokens it labels (cross-attention).
    pub(super) fn keys(&self) -> Option<usize> {
        self.doc.key_tokens.as_ref().map(Vec::len)
    }

    /// The body with the weights read from the file's tensors, `shape` `[layers kept, heads,
    /// queries, keys]`; `keep` are the indices, among the body's layers, of the layers read.
    /// `shown` names the kind in messages.
    pub(super) fn into_arrays(
        self,
        shown: &str,
        shape: [usize; 4],
        weights: Vec<f32>,
        keep: &[usize],
    ) -> Result<Arrays, ImportError> {
        let mut doc = self.doc;
        doc.layer_numbers = doc
            .layer_numbers
            .map(|v| keep.iter().filter_map(|&i| v.get(i).copied()).collect());
        doc.layer_masks = doc.layer_masks.map(|masks| {
            let mut masks: Vec<Option<LayerMaskDoc>> = masks.into_iter().map(Some).collect();
            keep.iter()
                .filter_map(|&i| masks.get_mut(i).and_then(Option::take))
                .collect()
        });
        if let Some(m) = doc.model.as_mut() {
            m.layers = None;
        }
        doc.attention = Some(Flat {
            values: weights,
            shape: shape.map(Some),
        });
        body_arrays(doc, crate::json::FORMAT_VERSION, shown)
    }

    /// The query tokens and text of a kind whose weights are not read.
    pub(super) fn into_tokens(self, shown: &str) -> Result<(Tokens, Option<String>), ImportError> {
        let mut doc = self.doc;
        let text = text(doc.text.take());
        Ok((
            units(doc.take_queries(), crate::json::FORMAT_VERSION, shown, "")?,
            text,
        ))
    }
}

/// The names of every field [`Doc`] reads, as serde's derive lists them.
#[cfg(test)]
pub(crate) fn doc_fields() -> &'static [&'static str] {
    crate::doc::fields_of::<Doc>()
}
