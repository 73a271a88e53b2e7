//! The report's metadata: the JSON block the page reads (`meta` in `assets/report/data.js`,
//! documented in `docs/html.md`), built from the attention and the options. The page around it
//! (template, script, style, fonts, payload) is `render/html.rs`.

use std::borrow::Cow;

use base64::Engine;
use serde::Serialize;

use super::payload::{Payload, SectionMeta};
use super::HeadStatistic;
use super::{section_suffix, HtmlOptions, View, FORMAT_VERSION};
use crate::attention::image::{Cell, ImageInput};
use crate::attention::{Attention, AttentionKind, MaskKind, PositionScheme, Role};

/// The metadata block the page reads (`meta` in `assets/report/data.js`); its fields are
/// documented in `docs/html.md`. Any source of attention can fill it: nothing in it is specific
/// to a model family or to how the attention was computed. A report of one kind has that kind's
/// fields at the top level; a report of several kinds lists them in `kinds` instead, and the page
/// lays the chosen one over the top level.
#[derive(Serialize)]
pub(super) struct Meta<'a> {
    format: u32,
    generator: String,
    /// The page title (also the `<title>`).
    pub(super) title: String,
    text: &'a str,
    pair: Option<&'a str>,
    /// The teacher-forced target of an encoder–decoder run.
    target: Option<&'a str>,
    settings: &'a [(String, String)],
    payload: PayloadMeta,
    #[serde(flatten)]
    one: Option<KindMeta<'a>>,
    /// Every kind of a report of several, in selector order.
    kinds: Option<Vec<KindMeta<'a>>>,
    /// The kind the page opens on (a report of several kinds).
    open_kind: Option<AttentionKind>,
    /// A speech run's recording, words and player (the Speech tab; `html/speech.rs`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) speech: Option<&'a super::speech::SpeechMeta>,
}

/// What the page needs of one kind of attention.
#[derive(Serialize)]
struct KindMeta<'a> {
    kind: AttentionKind,
    model: ModelMeta<'a>,
    mask: MaskKind,
    /// Each captured layer's sliding window (`null`: none).
    windows: &'a [Option<usize>],
    positions: PositionScheme,
    sink: Option<usize>,
    kv_head: &'a [usize],
    layer_numbers: &'a [usize],
    level: &'static str,
    special_excluded: bool,
    /// The weights are each row's shares (value-weighted, norm-aware), not attention
    /// probabilities: the colour bars say "share of the row".
    shares: bool,
    #[serde(flatten)]
    queries: UnitsMeta<'a>,
    /// The key units when they are not the query units (cross-attention: the encoder's).
    keys: Option<UnitsMeta<'a>>,
    /// Names of this kind's payload sections.
    sections: SectionNames,
    /// The factor on q·k before the softmax, for the neuron view, where the model gives it
    /// (T5: 1); absent, the page uses `1/√head_dim`.
    scale: Option<f32>,
    initial: Initial,
    neuron: Neuron,
    analysis: Option<AnalysisMeta<'a>>,
    /// A vision model's picture (the image view draws on it), or a vision-language model's
    /// first picture.
    image: Option<ImageMeta<'a>>,
    /// For a vision-language model's picture: the unit of its first image token (its tokens
    /// follow, one per cell); absent for a vision model, whose tokens are the cells.
    #[serde(skip_serializing_if = "Option::is_none")]
    image_first: Option<usize>,
    /// For a picture cut into tiles or crops, drawn as its parts put back together: the unit of
    /// each of its cells, in order (they are not one run); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    image_units: Option<Vec<usize>>,
    /// What the parts put back together are, for people (`The picture's 2×2 tiles put back
    /// together; …`), with `image_units`.
    #[serde(skip_serializing_if = "Option::is_none")]
    image_parts: Option<String>,
    /// How many tokens at the start see each other in full (a prefix-LM mask); absent for none.
    #[serde(skip_serializing_if = "is_zero")]
    prefix_tokens: usize,
    /// A vision-language model's pictures, each a band of the matrix views
    /// (`assets/report/bands.js`); empty for any other model.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pictures: Vec<BandMeta>,
    /// A mixture-of-experts model's router (the Router tab); absent for any other model.
    #[serde(skip_serializing_if = "Option::is_none")]
    router: Option<RouterMeta<'a>>,
    /// A hybrid model's token mixing (the Mixing tab): its gated delta layers' exact mixing
    /// matrices, signed; absent for any other model and where they were not captured.
    #[serde(skip_serializing_if = "Option::is_none")]
    mixing: Option<MixingMeta<'a>>,
    /// The layers the statistics leave out, in words (a hybrid model's gated delta layers:
    /// token mixing, not probabilities); absent where every layer is in them.
    #[serde(skip_serializing_if = "Option::is_none")]
    stats_left_out: Option<String>,
}

/// A hybrid model's token-mixing matrices for the Mixing tab (`assets/report/mixing_view.js`).
#[derive(Serialize)]
struct MixingMeta<'a> {
    /// What mixes the tokens (`gated delta`).
    kind: &'a str,
    /// What the matrices are, as the tab's legend says: not attention probabilities.
    legend: String,
    /// Heads per layer.
    heads: usize,
    /// The tokens (token level).
    tokens: &'a [String],
    layers: Vec<MixingLayerMeta<'a>>,
}

/// One layer's mixing matrices, `[heads, tokens, tokens]` flat.
#[derive(Serialize)]
struct MixingLayerMeta<'a> {
    /// The model's number of the layer.
    layer: usize,
    weights: &'a [f32],
}

impl<'a> MixingMeta<'a> {
    fn of(m: &'a crate::attention::Mixing) -> Self {
        MixingMeta {
            kind: &m.kind,
            legend: m.legend(),
            heads: m.heads,
            tokens: &m.tokens,
            layers: m
                .layers
                .iter()
                .map(|l| MixingLayerMeta {
                    layer: l.layer,
                    weights: &l.weights,
                })
                .collect(),
        }
    }
}

/// One picture of a vision-language model as the matrix views band it: its image tokens and
/// its label ([`crate::band::band_label`]).
#[derive(Serialize)]
struct BandMeta {
    /// The unit of its first image token (its units follow).
    first: usize,
    /// How many units its image tokens are.
    count: usize,
    /// `picture 1 · 24×24`.
    label: String,
    /// The patch grid, `[rows, cols]`.
    grid: [usize; 2],
    /// Whether its image tokens see each other in full under the causal mask (Gemma 3).
    bidirectional: bool,
    /// Which picture it is (from 0): a tiled picture's runs share one.
    picture: usize,
    /// `picture 2`, `picture 1 · tile 1,2`.
    name: String,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// What the image view needs: the grid, what each token is, the sizes and the preprocessing
/// (as in the JSON export's `image`), and the pixels the model saw as a `data:` PNG.
#[derive(Serialize)]
struct ImageMeta<'a> {
    #[serde(flatten)]
    input: Cow<'a, ImageInput>,
    /// `data:image/png;base64,…` of the model's input pixels; `null` when there are none.
    picture: Option<String>,
    /// How the picture was fitted to the model's input, for people (`stretched from 4:3 to
    /// 1:1`, `cropped to the centre …`; [`ImageInput::framing`]); empty when only scaled.
    framing: Vec<String>,
}

impl<'a> ImageMeta<'a> {
    fn of(input: Cow<'a, ImageInput>) -> Self {
        let picture = crate::image::picture::input_png(&input).map(|png| {
            format!(
                "data:image/png;base64,{}",
                base64::engine::general_purpose::STANDARD.encode(png)
            )
        });
        let framing = input.framing();
        ImageMeta {
            input,
            picture,
            framing,
        }
    }
}

/// How the page labels a vision model's tokens: a patch by its grid position, `r3c5` (row 3,
/// column 5, from the top left), the special tokens by name (`CLS`, `DIST`, `REG0`).
fn image_display(input: &ImageInput) -> Vec<String> {
    input
        .cells
        .iter()
        .map(|c| match *c {
            Cell::Patch { row, col } => format!("r{row}c{col}"),
            c => c.label(),
        })
        .collect()
}

/// One side's units (the queries' or the keys').
#[derive(Serialize)]
struct UnitsMeta<'a> {
    tokens: &'a [String],
    /// What a person reads for each unit ([`crate::attention::display`]; a patch's grid
    /// position, `r3c5`, in a vision model's report).
    display: Cow<'a, [String]>,
    label_scheme: &'static str,
    /// Units before which the views draw a reaction divider (`>>` in reaction SMILES).
    arrows: Vec<usize>,
    input_ids: &'a [u32],
    type_ids: &'a [u32],
    segments: &'a [u32],
    roles: &'a [Role],
    word_ids: &'a [Option<usize>],
    surfaces: &'a [String],
    generated: &'a [bool],
    sentence_b_start: Option<usize>,
}

impl<'a> UnitsMeta<'a> {
    fn of(units: &'a crate::attention::Units) -> Self {
        UnitsMeta {
            tokens: &units.labels,
            display: Cow::Borrowed(&units.display),
            label_scheme: units.scheme.as_str(),
            arrows: units.reaction_arrows(),
            input_ids: &units.ids,
            type_ids: &units.type_ids,
            segments: &units.segments,
            roles: &units.roles,
            word_ids: &units.word_ids,
            surfaces: &units.surfaces,
            generated: &units.generated,
            sentence_b_start: units.segment_b_start(),
        }
    }
}

#[derive(Serialize)]
struct SectionNames {
    attention: String,
    query: String,
    key: String,
    /// Each row's share on a learned attention sink, `[layers, heads, queries]` (gpt-oss);
    /// absent without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    sinks: Option<String>,
    /// A mixture-of-experts model's router probabilities, `[routed layers, tokens, experts]`;
    /// absent without a router.
    #[serde(skip_serializing_if = "Option::is_none")]
    router: Option<String>,
}

/// A mixture-of-experts model's router decisions for the Router tab (its probabilities are the
/// payload section `sections.router`).
#[derive(Serialize)]
struct RouterMeta<'a> {
    experts: usize,
    top_k: usize,
    renormalised: bool,
    /// The tokens the decisions are for (token level).
    tokens: &'a [String],
    layers: Vec<RouterLayerMeta<'a>>,
}

/// One routed layer's choices.
#[derive(Serialize)]
struct RouterLayerMeta<'a> {
    /// The model's number of the layer.
    layer: usize,
    /// Chosen experts, `[tokens, top_k]` flat, most probable first.
    chosen: &'a [u32],
    /// Their weights, `[tokens, top_k]` flat.
    weights: &'a [f32],
    /// Tokens per expert.
    load: Vec<usize>,
}

impl<'a> RouterMeta<'a> {
    fn of(r: &'a crate::attention::Router) -> Self {
        RouterMeta {
            experts: r.experts,
            top_k: r.top_k,
            renormalised: r.renormalised,
            tokens: &r.tokens,
            layers: r
                .layers
                .iter()
                .map(|l| RouterLayerMeta {
                    layer: l.layer,
                    chosen: &l.chosen,
                    weights: &l.weights,
                    load: l.load(r.experts),
                })
                .collect(),
        }
    }
}

#[derive(Serialize)]
struct ModelMeta<'a> {
    id: &'a str,
    /// How the page names the model: a hub id, or a local folder's or file's name, never the
    /// whole local path.
    name: &'a str,
    revision: Option<&'a str>,
    family: &'a str,
    layers: usize,
    heads: usize,
    hidden_size: usize,
    head_dim: usize,
}

#[derive(Serialize)]
struct Initial {
    view: View,
    layer: usize,
    head: usize,
    threshold: f32,
    hide_special: bool,
    words: bool,
    raw_tokens: bool,
    /// The token the image view draws the attention of first (`null`: the class token).
    query: Option<usize>,
}

#[derive(Serialize)]
struct Neuron {
    available: bool,
    /// Why the vectors are missing, for the neuron view to say.
    reason: Option<&'static str>,
}

#[derive(Serialize)]
struct PayloadMeta {
    compression: &'static str,
    raw_bytes: usize,
    sections: Vec<SectionMeta>,
}

#[derive(Serialize)]
struct AnalysisMeta<'a> {
    stats: &'a [HeadStatistic],
    head_labels: Option<&'a [Vec<String>]>,
    matrices: Vec<MatrixMeta<'a>>,
    /// The logit lens, as the JSON export's `logit_lens` (docs/json.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    lens: Option<&'a crate::analysis::LogitLens>,
    /// Per-head direct logit attribution, as the JSON export's `head_attribution`.
    #[serde(skip_serializing_if = "Option::is_none")]
    head_attribution: Option<&'a crate::analysis::HeadAttribution>,
    /// Head ablation, as the JSON export's `head_ablation`.
    #[serde(skip_serializing_if = "Option::is_none")]
    head_ablation: Option<&'a crate::analysis::HeadAblation>,
}

#[derive(Serialize)]
struct MatrixMeta<'a> {
    id: &'a str,
    label: &'a str,
    description: &'a str,
    per_layer: bool,
    shares: bool,
    section: String,
}

impl<'a> Meta<'a> {
    /// The metadata of a report of `kinds`, opening on `kinds[open]`.
    pub(super) fn new(
        kinds: &[(&'a Attention, &'a HtmlOptions)],
        open: usize,
        target: Option<&'a str>,
        payload: &Payload,
    ) -> Self {
        let (att, opts) = kinds[open];
        let title = opts.title.clone().unwrap_or_else(|| {
            let mut t: String = att.text.chars().take(80).collect();
            if att.text.chars().count() > 80 {
                t.push('…');
            }
            format!("attnviz — {t}")
        });
        let several = kinds.len() > 1;
        let mut list: Vec<KindMeta<'a>> = kinds
            .iter()
            .map(|&(a, o)| KindMeta::new(a, o, several))
            .collect();
        let (one, kinds_meta) = if several {
            (None, Some(list))
        } else {
            (list.pop(), None)
        };
        Meta {
            format: FORMAT_VERSION,
            generator: format!("attnviz {}", env!("CARGO_PKG_VERSION")),
            title,
            text: &att.text,
            pair: att.pair.as_deref(),
            target,
            settings: &opts.settings,
            payload: PayloadMeta {
                compression: if opts.compress { "gzip" } else { "none" },
                raw_bytes: payload.raw_len(),
                sections: payload.meta(),
            },
            one,
            kinds: kinds_meta,
            open_kind: several.then_some(att.kind),
            speech: None,
        }
    }
}

impl<'a> KindMeta<'a> {
    fn new(att: &'a Attention, opts: &'a HtmlOptions, several: bool) -> Self {
        let m = &att.model;
        let stitched = att
            .image
            .is_none()
            .then(|| crate::attention::image::PictureView::stitched(&att.pictures, 0))
            .flatten();
        let suffix = section_suffix(att, several);
        let neuron = match (opts.neuron, &att.query_key) {
            (true, Some(_)) => Neuron {
                available: true,
                reason: None,
            },
            (false, _) => Neuron {
                available: false,
                reason: Some(
                    "query/key vectors were not embedded; write the report with the neuron view to see them",
                ),
            },
            (true, None) => Neuron {
                available: false,
                reason: Some(
                    if att.level == crate::attention::Level::Word || att.special_excluded {
                        "query/key vectors exist per token only: write the report at token level, with the special tokens, to see them"
                    } else {
                        "the attention carries no query/key vectors (they were not captured)"
                    },
                ),
            },
        };
        let a = &opts.analysis;
        let analysis = (!a.is_empty()).then(|| AnalysisMeta {
            stats: &a.stats,
            head_labels: a.head_labels.as_deref(),
            matrices: a
                .matrices
                .iter()
                .map(|x| MatrixMeta {
                    id: &x.id,
                    label: &x.label,
                    description: &x.description,
                    per_layer: x.layers.len() == att.layers() && att.layers() > 1,
                    shares: x.shares,
                    section: format!("matrix:{}{suffix}", x.id),
                })
                .collect(),
            lens: a.lens.as_ref(),
            head_attribution: a.head_attribution.as_ref(),
            head_ablation: a.head_ablation.as_ref(),
        });
        KindMeta {
            kind: att.kind,
            model: ModelMeta {
                id: &m.id,
                name: m.name(),
                revision: m.revision.as_deref(),
                family: &m.family,
                layers: m.layers,
                heads: m.heads,
                hidden_size: m.hidden_size,
                head_dim: m.head_dim,
            },
            mask: att.mask,
            windows: att.windows(),
            positions: att.positions,
            sink: att.sink(),
            kv_head: att.kv_head(),
            layer_numbers: att.layer_numbers(),
            level: att.level.as_str(),
            special_excluded: att.special_excluded,
            shares: att.holds.is_shares(),
            queries: {
                let mut q = UnitsMeta::of(att.queries());
                if let Some(image) = att
                    .image
                    .as_deref()
                    .filter(|i| i.cells.len() == q.tokens.len())
                {
                    q.display = Cow::Owned(image_display(image));
                }
                q
            },
            keys: (!att.is_square()).then(|| UnitsMeta::of(att.keys())),
            scale: att.query_key.as_ref().and_then(|qk| qk.scale),
            sections: SectionNames {
                attention: format!("attention{suffix}"),
                query: format!("query{suffix}"),
                key: format!("key{suffix}"),
                sinks: att.sink_shares().map(|_| format!("sinks{suffix}")),
                router: att.router.as_ref().map(|_| format!("router{suffix}")),
            },
            initial: Initial {
                view: match opts.view {
                    View::Stats if a.stats.is_empty() => View::Head,
                    View::Image if att.image.is_none() && att.pictures.is_empty() => View::Head,
                    View::Lens if a.lens.is_none() => View::Head,
                    View::Router if att.router.is_none() => View::Head,
                    View::Heads if a.head_attribution.is_none() && a.head_ablation.is_none() => {
                        View::Head
                    }
                    v => v,
                },
                query: opts.query,
                layer: opts.layer,
                head: opts.head,
                threshold: opts.threshold_for(att.n_queries().max(att.n_keys())),
                hide_special: opts.hide_special,
                words: opts.words,
                raw_tokens: opts.raw_tokens,
            },
            neuron,
            analysis,
            // A cut picture's image view is its parts put back together; a tiled picture
            // whose parts cannot be, its global view (the whole picture).
            image: match (&att.image, &stitched) {
                (Some(image), _) => Some(ImageMeta::of(Cow::Borrowed(&**image))),
                (None, Some(view)) => Some(ImageMeta::of(Cow::Owned(view.image.clone()))),
                (None, None) => att
                    .pictures
                    .iter()
                    .find(|p| p.is_whole())
                    .map(|p| ImageMeta::of(Cow::Borrowed(&p.image))),
            },
            image_parts: stitched.as_ref().and_then(|_| {
                let t = att.pictures.iter().find_map(|p| p.tile)?;
                let parts = if t.crop { "crops" } else { "tiles" };
                Some(format!(
                    "The picture's {}×{} {parts} put back together; its whole view's tokens count \
                     in the picture's share.",
                    t.of[0], t.of[1]
                ))
            }),
            image_units: stitched.as_ref().and_then(|view| {
                let spans = &att.queries().spans;
                view.tokens
                    .iter()
                    .map(|&t| spans.iter().position(|s| s.start == t))
                    .collect()
            }),
            image_first: att
                .image
                .is_none()
                .then(|| att.pictures.iter().find(|p| p.is_whole()))
                .flatten()
                .and_then(|p| att.queries().spans.iter().position(|s| s.start == p.first)),
            prefix_tokens: att.prefix,
            pictures: att
                .pictures
                .iter()
                .enumerate()
                .filter_map(|(i, p)| {
                    let spans = &att.queries().spans;
                    let run = p.tokens();
                    Some(BandMeta {
                        first: spans.iter().position(|s| s.start == p.first)?,
                        count: spans.iter().filter(|s| run.contains(&s.start)).count(),
                        label: crate::band::band_label(i, p),
                        grid: p.image.grid,
                        bidirectional: p.bidirectional,
                        picture: p.picture(i),
                        name: p.name(i),
                    })
                })
                .collect(),
            router: att.router.as_deref().map(RouterMeta::of),
            mixing: att
                .non_softmax
                .as_ref()
                .and_then(|n| n.mixing.as_deref())
                .map(MixingMeta::of),
            stats_left_out: att.non_softmax.as_ref().map(|n| n.skipped()),
        }
    }
}
