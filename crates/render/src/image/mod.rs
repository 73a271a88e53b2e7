//! PNG and SVG heatmaps of attention, drawn with plotters.
//!
//! Five figures ([`FigureSpec`]): one head (or the mean of a layer's heads) as a query × key
//! heatmap; all heads of a layer in a grid on one colour scale; the mean over a layer's heads; the
//! whole model as a layers × heads grid of thumbnails; and any `n × n` matrix over the tokens
//! (attention rollout goes through this one). Layers and heads are numbered from 0.
//!
//! Text uses the embedded DejaVu Sans, so rendering never needs system fonts. Rows are queries
//! (the token attending), columns keys (the token attended to). Images are deterministic: the
//! same input gives the same bytes. Sizes and limits are documented in `docs/images.md`.

mod canvas;
mod deflate;
pub(crate) mod font;
mod grid;
pub mod heads;
mod layout;
pub mod lens;
pub mod mixing;
pub mod on_picture;
pub(crate) mod paint;
pub mod picture;
pub mod router;
mod scale;
pub(crate) mod scene;
mod single;
pub mod speech;
pub(crate) mod theme;

use std::io::Write;
use std::path::Path;

pub use crate::colormap::Colormap;
pub use crate::fonts::FontError;
pub use paint::{DrawError, SvgError};
pub use scale::{ColorScale, LOG_DECADES};
pub use theme::Theme;

use crate::attention::{Attention, AttentionKind, HeadSel, Selection, SelectionError};
use crate::output::{write_output, OutputError};

use crate::colormap::Ramp;
use layout::{Axis, Sides};
use scene::Scene;
use theme::Palette;

/// Which figure to draw, by name (`--figure`): see [`FigureSpec`] for what each shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Figure {
    /// One head's query × key heatmap, or the mean over the layer's heads.
    #[default]
    Head,
    /// All heads of a layer in a grid with a shared colour scale.
    Layer,
    /// The mean over the heads of a layer.
    Mean,
    /// Every layer × head as labelled thumbnails.
    Model,
    /// Attention rollout (Abnar & Zuidema 2020) up to a layer.
    Rollout,
    /// ALTI (Ferrando et al. 2022) up to a layer (drawn from the run's ALTI as a matrix).
    Alti,
    /// Value zeroing (Mohebbi et al. 2023) up to a layer (drawn from the run's as a matrix).
    ValueZeroing,
    /// The logit lens (drawn from the run's lens, not from the attention: [`lens`]).
    Lens,
    /// Per-head direct logit attribution, layers × heads (drawn from the run: [`heads`]).
    Attribution,
    /// Head ablation, layers × heads (drawn from the run: [`heads`]).
    Ablation,
    /// A mixture-of-experts model's router at a layer: tokens × experts, the chosen experts
    /// outlined, and the expert load of every routed layer (drawn from the run: [`router`]).
    Router,
    /// A hybrid model's token mixing (Qwen3-Next's gated delta layers): the exact mixing matrix
    /// of each linear-attention layer feeding a layer, on a signed scale (drawn from the run:
    /// [`mixing`]).
    Mixing,
}

crate::choice!(Figure {
    Head => ("head", "One head's query × key heatmap (or the mean over the heads of its layer)"),
    Layer => ("layer", "All heads of a layer in a grid with a shared colour scale"),
    Mean => ("mean", "The mean over the heads of a layer"),
    Model => ("model", "Every layer × head as labelled thumbnails"),
    Rollout => ("rollout", "Attention rollout (Abnar & Zuidema 2020) up to a layer"),
    Alti => ("alti", "ALTI (Ferrando et al. 2022): each input token's contribution up to a layer"),
    ValueZeroing => ("value-zeroing", "Value zeroing (Mohebbi et al. 2023): each context token's share, rolled out up to a layer"),
    Lens => ("lens", "The logit lens: layers × positions, each cell its most probable token"),
    Attribution => ("attribution", "Each head's direct contribution to the target token's logit: layers × heads"),
    Ablation => ("ablation", "The change in the target token's log-probability when each head is removed: layers × heads"),
    Router => ("router", "A mixture-of-experts model's router at a layer: tokens × experts, the chosen experts outlined, and the expert load per layer"),
    Mixing => ("mixing", "A hybrid model's token mixing: each gated delta layer feeding a layer, its exact mixing matrix on a signed scale (not attention probabilities)"),
});

/// What a figure shows.
#[derive(Clone, Debug, PartialEq)]
pub enum FigureSpec<'a> {
    /// One head's query × key heatmap, or (with [`HeadSel::Mean`]) the mean of the layer's heads.
    Head {
        /// Layer, 0-based.
        layer: usize,
        /// Head, 0-based, or the mean over the layer's heads.
        head: HeadSel,
    },
    /// All heads of one layer in a grid, on one shared colour scale.
    Layer {
        /// Layer, 0-based.
        layer: usize,
    },
    /// The mean over one layer's heads (the same picture as `Head` with `HeadSel::Mean`).
    Mean {
        /// Layer, 0-based.
        layer: usize,
    },
    /// Every layer × head, as labelled thumbnails on one colour scale.
    Model,
    /// Any `n × n` matrix over the attention's units (e.g. attention rollout), row-major with
    /// rows as queries; drawn like a head, titled `title`.
    Matrix {
        /// What the matrix is, e.g. "attention rollout through layer 5".
        title: String,
        /// `n × n` values, row-major.
        values: &'a [f32],
        /// The rows are each token's shares from the input tokens (ALTI, value zeroing), not
        /// attention: the axes and the colour bar say so.
        shares: bool,
    },
}

impl<'a> FigureSpec<'a> {
    /// The figure `figure` of `layer` and `head`. `rollout` is the rollout matrix through
    /// `layer` (needed only for [`Figure::Rollout`]).
    pub fn of(
        figure: Figure,
        layer: usize,
        head: HeadSel,
        rollout: Option<&'a [f32]>,
    ) -> Result<Self, ImageError> {
        Ok(match figure {
            Figure::Head => FigureSpec::Head { layer, head },
            Figure::Layer => FigureSpec::Layer { layer },
            Figure::Mean => FigureSpec::Mean { layer },
            Figure::Model => FigureSpec::Model,
            Figure::Rollout => FigureSpec::rollout(layer, rollout.ok_or(ImageError::NoRollout)?),
            Figure::Alti
            | Figure::ValueZeroing
            | Figure::Lens
            | Figure::Attribution
            | Figure::Ablation
            | Figure::Router
            | Figure::Mixing => return Err(ImageError::LensNotAttention),
        })
    }

    /// Value zeroing (Mohebbi et al. 2023) rolled out through `layer`, drawn as a matrix figure.
    pub fn value_zeroing(layer: usize, values: &'a [f32]) -> Self {
        FigureSpec::Matrix {
            title: format!("Value zeroing, rolled out through layer {layer}"),
            values,
            shares: true,
        }
    }

    /// ALTI (Ferrando et al. 2022) through `layer`, drawn as a matrix figure.
    pub fn alti(layer: usize, values: &'a [f32]) -> Self {
        FigureSpec::Matrix {
            title: format!("ALTI contributions through layer {layer}"),
            values,
            shares: true,
        }
    }

    /// Every kind of figure, each with a file stem, for a report folder (`--report DIR`):
    /// `head` (layer `layer`, head `head`), `layer`, `mean`, `model`, and `rollout` when the
    /// rollout through `layer` is given.
    pub fn all(
        layer: usize,
        head: HeadSel,
        rollout: Option<&'a [f32]>,
    ) -> Vec<(&'static str, FigureSpec<'a>)> {
        let mut figures = vec![
            ("head", FigureSpec::Head { layer, head }),
            ("layer", FigureSpec::Layer { layer }),
            ("mean", FigureSpec::Mean { layer }),
            ("model", FigureSpec::Model),
        ];
        if let Some(values) = rollout {
            figures.push(("rollout", FigureSpec::rollout(layer, values)));
        }
        figures
    }

    /// Attention rollout (Abnar & Zuidema 2020) through `layer`, drawn as a matrix figure.
    pub fn rollout(layer: usize, values: &'a [f32]) -> Self {
        FigureSpec::Matrix {
            title: format!("attention rollout through layer {layer}"),
            values,
            shares: false,
        }
    }
}

/// How figures look.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ImageOptions {
    /// Colour map of the cells (viridis by default).
    pub colormap: Colormap,
    /// Light or dark background.
    pub theme: Theme,
    /// How values map to colours (linear by default).
    pub scale: ColorScale,
    /// PNG pixels per layout pixel: 2 doubles the pixels of every side with the same layout,
    /// for print ([`MIN_SCALE_FACTOR`] to [`MAX_SCALE_FACTOR`]; 1 by default). The PNG states
    /// its density as 96 × this many pixels per inch. SVG is unaffected.
    pub scale_factor: f32,
    /// Label the axes with the tokenizer's own pieces (`Ġquick`) rather than the display texts
    /// (`quick`; see [`crate::attention::display`]).
    pub raw_tokens: bool,
    /// Draw a vision-language model's pictures token by token (`<img1 r,c>`) rather than each
    /// as one band of the matrix (see [`crate::band`]).
    pub expand_pictures: bool,
}

impl Default for ImageOptions {
    fn default() -> Self {
        ImageOptions {
            colormap: Colormap::Viridis,
            theme: Theme::Light,
            scale: ColorScale::Auto,
            scale_factor: 1.0,
            raw_tokens: false,
            expand_pictures: false,
        }
    }
}

/// Smallest [`ImageOptions::scale_factor`].
pub const MIN_SCALE_FACTOR: f32 = 0.5;
/// Largest [`ImageOptions::scale_factor`].
pub const MAX_SCALE_FACTOR: f32 = 4.0;
/// Most pixels a PNG may have (whatever the scale factor): 64 million, 192 MB of RGB.
pub const MAX_PNG_PIXELS: u64 = 64_000_000;

/// Why an image could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// The layer or head asked for does not exist.
    #[error(transparent)]
    Selection(#[from] SelectionError),
    /// A matrix figure got a matrix of the wrong size.
    #[error("the matrix for \"{title}\" has {got} values, but {queries} × {keys} units need {}", queries * keys)]
    MatrixShape {
        /// The figure's title.
        title: String,
        /// Values given.
        got: usize,
        /// Query units (rows) of the attention.
        queries: usize,
        /// Key units (columns).
        keys: usize,
    },
    /// The rollout figure was asked for without a rollout matrix.
    #[error("the rollout figure needs the attention rollout, which was not computed")]
    NoRollout,
    /// The router figure asked of a model without experts.
    #[error("the router figure draws a mixture-of-experts model's router, and this model has none; choose another figure")]
    NoRouter,
    /// The token-mixing figure asked of a run without token mixing, or of layers without it.
    #[error("the mixing figure draws a hybrid model's token-mixing layers, captured when every layer is; the captured ones here: {layers}")]
    NoMixing {
        /// The layers whose mixing was captured (`none` for none).
        layers: String,
    },
    /// The router figure asked of a layer without a router.
    #[error("layer {layer} is dense (it has no router); the routed layers are {routed}: choose one of them")]
    DenseLayer {
        /// The model's number of the layer asked for.
        layer: usize,
        /// The routed layers' numbers, comma separated.
        routed: String,
    },
    /// The scale factor is outside the supported range.
    #[error("scale factor {0} is out of range: use {MIN_SCALE_FACTOR} to {MAX_SCALE_FACTOR}")]
    ScaleFactor(f32),
    /// The PNG would be too large.
    #[error("a scale factor of {factor} would make a {w} × {h} pixel PNG, more than the {} million pixels allowed; use a smaller scale factor, or SVG", MAX_PNG_PIXELS / 1_000_000)]
    TooManyPixels {
        /// The factor asked for.
        factor: f32,
        /// Width it would give.
        w: u32,
        /// Height it would give.
        h: u32,
    },
    /// The input has no tokens.
    #[error("nothing to draw: the input has no tokens")]
    Empty,
    /// The embedded font could not be loaded.
    #[error(transparent)]
    Font(#[from] FontError),
    /// plotters failed.
    #[error(transparent)]
    Draw(#[from] DrawError),
    /// The lens figure asked of an attention (it is drawn from a run's logit lens).
    #[error("the ALTI, logit lens, attribution, ablation, router and mixing figures are drawn from a model's run, not from its attention")]
    LensNotAttention,
    /// The output file could not be written.
    #[error(transparent)]
    Output(#[from] OutputError),
    /// A speech figure asked of attention that is not a speech run's.
    #[error(transparent)]
    Speech(#[from] crate::speech::SpeechViewError),
}

/// Everything about the look of a figure that does not depend on which figure it is.
pub(crate) struct Style {
    pub ramp: Ramp,
    /// How values map to colours.
    pub scale: ColorScale,
    pub palette: Palette,
    /// The input text, shown under the title.
    pub subtitle: String,
    /// What the figure shows differently from plain token attention (word level, special
    /// tokens removed), shown in full under the subtitle; empty when nothing.
    pub notes: String,
    /// Cells the query could not see (`n × n`, row-major), drawn in the background colour;
    /// `None` when every cell is visible. For a figure of one layer, that layer's (its sliding
    /// window included); otherwise the cells masked in every layer.
    pub masked: Option<Vec<bool>>,
    /// Each captured layer's masked cells, for the figure of every layer; empty when the layers
    /// all have the mask of `masked`.
    pub layer_masked: Vec<Option<Vec<bool>>>,
    /// The model's number of each captured layer (`--layers`), for labels.
    pub layer_numbers: Vec<usize>,
    /// The colour bar's caption of the attention's own weights: "attention weight", or "share
    /// of the row" for value-weighted and norm-aware attention.
    pub caption: &'static str,
    /// Each row's share on a learned attention sink (gpt-oss), drawn as a column of its own
    /// beside the heatmap of one head or one layer's mean; `None` without one.
    pub sinks: Option<Vec<f32>>,
}

/// Render `figure` of `att` as PNG bytes.
pub fn render_png(
    att: &Attention,
    figure: &FigureSpec,
    options: &ImageOptions,
) -> Result<Vec<u8>, ImageError> {
    let scene = build(att, figure, options)?;
    scene_png(&scene, options.scale_factor)
}

/// Render `figure` of `att` as an SVG document.
pub fn render_svg(
    att: &Attention,
    figure: &FigureSpec,
    options: &ImageOptions,
) -> Result<String, ImageError> {
    paint::svg(&build(att, figure, options)?).map_err(|e| match e {
        SvgError::Draw(e) => ImageError::Draw(e),
        SvgError::Font(e) => ImageError::Font(e),
    })
}

/// Width and height in layout pixels that `figure` of `att` will have: the SVG's size, and the
/// PNG's at scale factor 1 (the PNG has `scale_factor` times as many pixels along each side).
pub fn figure_size(
    att: &Attention,
    figure: &FigureSpec,
    options: &ImageOptions,
) -> Result<(u32, u32), ImageError> {
    let scene = build(att, figure, options)?;
    Ok((scene.width, scene.height))
}

/// Write `figure` of `att` as a PNG file at `path` (atomically; `-` writes to stdout).
pub fn write_png(
    att: &Attention,
    figure: &FigureSpec,
    options: &ImageOptions,
    path: &Path,
) -> Result<(), ImageError> {
    let bytes = render_png(att, figure, options)?;
    write_output(path, |w: &mut dyn Write| w.write_all(&bytes))?;
    Ok(())
}

/// Write `figure` of `att` as an SVG file at `path` (atomically; `-` writes to stdout).
pub fn write_svg(
    att: &Attention,
    figure: &FigureSpec,
    options: &ImageOptions,
    path: &Path,
) -> Result<(), ImageError> {
    let svg = render_svg(att, figure, options)?;
    write_output(path, |w: &mut dyn Write| w.write_all(svg.as_bytes()))?;
    Ok(())
}

/// Lay out `figure`, checking what it asks for against `att`: a vision-language model's
/// matrix with each picture as one band ([`crate::band::banded`]) unless the options expand
/// them.
fn build(
    att: &Attention,
    figure: &FigureSpec,
    options: &ImageOptions,
) -> Result<Scene, ImageError> {
    let Some(banded) = (!options.expand_pictures)
        .then(|| crate::band::banded(att))
        .flatten()
    else {
        return build_view(att, figure, options, None);
    };
    let values;
    let figure = match figure {
        FigureSpec::Matrix {
            title,
            values: matrix,
            shares,
        } => {
            values = banded
                .matrix(matrix)
                .filter(|_| matrix.len() == att.n_queries() * att.n_keys())
                .ok_or_else(|| ImageError::MatrixShape {
                    title: title.clone(),
                    got: matrix.len(),
                    queries: att.n_queries(),
                    keys: att.n_keys(),
                })?;
            FigureSpec::Matrix {
                title: title.clone(),
                values: &values,
                shares: *shares,
            }
        }
        other => other.clone(),
    };
    build_view(&banded.attention, &figure, options, Some(banded.note()))
}

/// [`build`] of the view `att` as it is drawn, with `band_note` (what a picture's band holds)
/// among the notes.
fn build_view(
    att: &Attention,
    figure: &FigureSpec,
    options: &ImageOptions,
    band_note: Option<String>,
) -> Result<Scene, ImageError> {
    if att.is_empty() {
        return Err(ImageError::Empty);
    }
    let check_layer = |layer: usize| {
        att.model
            .check_selection(Selection::new(layer, HeadSel::Mean))
            .map(|_| ())
    };
    let banded = band_note.is_some();
    let mut notes = notes(att, banded);
    notes.extend(band_note);
    let style_with = |scale: ColorScale, why: Option<String>| {
        let mut notes = notes.clone();
        if let Some(why) = why {
            notes.push(format!("square-root colour scale: {why}"));
        }
        Style {
            ramp: Ramp::new(options.colormap, options.theme),
            scale,
            palette: Palette::of(options.theme),
            subtitle: subtitle(att),
            notes: if notes.is_empty() {
                String::new()
            } else {
                format!("({})", notes.join("; "))
            },
            masked: cell_mask(att, None),
            layer_masked: Vec::new(),
            layer_numbers: att.layer_numbers().to_vec(),
            caption: crate::weight_caption(att),
            sinks: None,
        }
    };
    // A figure of one layer hatches what that layer could not see.
    let for_layer = |mut style: Style, layer: usize| {
        style.masked = cell_mask(att, Some(layer));
        style
    };
    // The scale a figure of these matrices is drawn on (`--scale auto` decides per figure).
    let unit = match att.level {
        crate::attention::Level::Token => "token",
        crate::attention::Level::Word => "word",
    };
    let style_for = |matrices: &[&[f32]]| {
        let (scale, why) = options.scale.resolve(
            matrices.iter().copied(),
            (att.n_queries(), att.n_keys()),
            unit,
        );
        style_with(scale, why)
    };
    let raw = options.raw_tokens;
    // With bands a unit is numbered by its first token, as `--query N` numbers them.
    let named = |units: &crate::attention::Units| {
        if banded {
            let first: Vec<usize> = units.spans.iter().map(|s| s.start).collect();
            crate::attention::display::positioned(units.shown(raw), &first)
        } else {
            units.named(raw)
        }
    };
    let axis_of = |units: &crate::attention::Units| Axis {
        labels: units.shown(raw).to_vec(),
        named: named(units),
        special: (0..units.len()).map(|i| units.is_special(i)).collect(),
        b_start: units
            .segment_b_start()
            .filter(|&b| b > 0 && b < units.len()),
        arrows: units.reaction_arrows(),
        generated: units.generated.clone(),
        gen_start: units.first_generated().filter(|&g| g > 0),
    };
    // Rows and columns, titled by side: an encoder–decoder's encoder reads the source, its
    // decoder the target, and cross-attention has target rows over source columns.
    let sides = match att.kind {
        AttentionKind::Cross => Sides::cross(axis_of(att.queries()), axis_of(att.keys())),
        AttentionKind::Encoder => Sides::square(axis_of(att.queries()), "source "),
        AttentionKind::Decoder => Sides::square(axis_of(att.queries()), "target "),
        AttentionKind::SelfAttention => Sides::square(axis_of(att.queries()), ""),
    };
    let model = match att.kind {
        AttentionKind::SelfAttention => {
            model_name(att.model.name.as_deref().unwrap_or(&att.model.id))
        }
        AttentionKind::Cross => format!(
            "{} · cross-attention",
            model_name(att.model.name.as_deref().unwrap_or(&att.model.id))
        ),
        kind => format!(
            "{} · {}",
            model_name(att.model.name.as_deref().unwrap_or(&att.model.id)),
            kind.as_str()
        ),
    };
    // A hybrid model's linear-attention layers have no map: the title says so.
    let model = match &att.non_softmax {
        Some(other) => format!("{model} [{}]", other.note()),
        None => model,
    };
    let heads = att.heads();
    // Grouped-query attention: each head says which key/value head it reads.
    let kv = att.is_grouped().then(|| att.kv_head().to_vec());
    let mean_of = if att.is_grouped() {
        format!("mean of {heads} heads ({} kv heads)", att.kv_heads())
    } else {
        format!("mean of {heads} heads")
    };
    let scene = match figure {
        FigureSpec::Head { layer, head } => {
            att.model.check_selection(Selection::new(*layer, *head))?;
            let number = att.layer_number(*layer);
            let title = match (head, &kv) {
                (HeadSel::Index(h), Some(kv)) => {
                    format!("{model} · layer {number} · head {h} (kv head {})", kv[*h])
                }
                (HeadSel::Index(h), None) => format!("{model} · layer {number} · head {h}"),
                (HeadSel::Mean, _) => format!("{model} · layer {number} · {mean_of}"),
            };
            let values = att.matrix(*layer, *head);
            let style = Style {
                sinks: att.sink_share_row(*layer, *head),
                ..for_layer(style_for(&[&values]), *layer)
            };
            single::scene(&style, &sides, &title, style.caption, &values)
        }
        FigureSpec::Mean { layer } => {
            check_layer(*layer)?;
            let number = att.layer_number(*layer);
            let title = format!("{model} · layer {number} · {mean_of}");
            let values = att.head_mean(*layer);
            let style = Style {
                sinks: att.sink_share_row(*layer, HeadSel::Mean),
                ..for_layer(style_for(&[&values]), *layer)
            };
            single::scene(&style, &sides, &title, style.caption, &values)
        }
        FigureSpec::Layer { layer } => {
            check_layer(*layer)?;
            let number = att.layer_number(*layer);
            let title = match &kv {
                Some(_) => format!(
                    "{model} · layer {number} · all {heads} heads over {} kv heads",
                    att.kv_heads()
                ),
                None => format!("{model} · layer {number} · all {heads} heads"),
            };
            let matrices: Vec<Vec<f32>> =
                (0..heads).map(|h| att.head(*layer, h).to_vec()).collect();
            let style = for_layer(
                style_for(&matrices.iter().map(Vec::as_slice).collect::<Vec<_>>()),
                *layer,
            );
            grid::layer_scene(&style, &sides, &title, &matrices, kv.as_deref())
        }
        FigureSpec::Model => {
            let title = if att.layer_numbers().iter().enumerate().all(|(i, &l)| i == l) {
                format!("{model} · all {} layers × {heads} heads", att.layers())
            } else {
                format!(
                    "{model} · layers {} × {heads} heads",
                    crate::attention::layer_list(att.layer_numbers())
                )
            };
            let matrices: Vec<Vec<&[f32]>> = (0..att.layers())
                .map(|l| (0..heads).map(|h| att.head(l, h)).collect())
                .collect();
            let mut style = style_for(&matrices.concat());
            if att.has_windows() {
                style.layer_masked = (0..att.layers()).map(|l| cell_mask(att, Some(l))).collect();
            }
            grid::model_scene(&style, &sides, &title, &matrices, kv.as_deref())
        }
        FigureSpec::Matrix {
            title,
            values,
            shares,
        } => {
            let (queries, keys) = (att.n_queries(), att.n_keys());
            if values.len() != queries * keys {
                return Err(ImageError::MatrixShape {
                    title: title.clone(),
                    got: values.len(),
                    queries,
                    keys,
                });
            }
            let title = format!("{model} · {}", font::label(title, 120));
            let style = style_for(&[values]);
            if *shares {
                let sides = Sides {
                    row_title: "Token (after the layer)".into(),
                    col_title: "Input token (its share)".into(),
                    ..sides
                };
                single::scene(&style, &sides, &title, crate::SHARE_CAPTION, values)
            } else {
                single::scene(&style, &sides, &title, style.caption, values)
            }
        }
    };
    Ok(scene)
}

/// How a figure names the model: a hub id as is, a local folder by its last component.
fn model_name(id: &str) -> String {
    let looks_like_path =
        id.starts_with(['/', '.', '~']) || id.contains('\\') || Path::new(id).is_dir();
    let name = if looks_like_path {
        Path::new(id)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| id.to_string())
    } else {
        id.to_string()
    };
    font::label(&name, 60)
}

/// `text` for a quote in a figure: line feeds and tabs shown (`↵`, `⇥`), control and format
/// characters as `⟨U+XXXX⟩` (as every view shows them in tokens), runs of spaces one space, cut
/// at `max_chars`.
fn quote(text: &str, max_chars: usize) -> String {
    font::label(
        &crate::attention::display::escape_invisible(text),
        max_chars,
    )
}

/// What a decoder-only model generated: the text of its generated units (a special token by its
/// label), or `None` when it generated nothing.
pub(crate) fn generated_text(att: &Attention) -> Option<String> {
    let g = att.first_generated()?;
    let units = att.queries();
    let text: String = (g..units.len())
        .filter(|&i| units.generated[i])
        .map(|i| {
            if units.is_special(i) {
                units.labels[i].as_str()
            } else {
                units.surfaces[i].as_str()
            }
        })
        .collect::<Vec<_>>()
        .join(if att.level == crate::attention::Level::Word {
            " "
        } else {
            ""
        });
    Some(text.trim().to_string())
}

/// The input text for the subtitle: the sentence, or both sentences of a pair; a decoder that
/// generated, the prompt and what it generated. An encoder–decoder's figures quote what their
/// axes read: the encoder's the source, the decoder's the target (or what was generated),
/// cross-attention's both, target (the rows) first.
fn subtitle(att: &Attention) -> String {
    let text = quote(&att.text, 400);
    let source = || format!("source: “{text}”");
    let target = || {
        let side = if att.first_generated().is_some() {
            "generated"
        } else {
            "target"
        };
        att.target_text
            .as_deref()
            .map(|t| format!("{side}: “{}”", quote(t, 400)))
    };
    match (&att.pair, att.kind) {
        (Some(pair), _) => format!("A: “{text}”  ·  B: “{}”", quote(pair, 400)),
        (None, AttentionKind::SelfAttention) if text.is_empty() => String::new(),
        (None, AttentionKind::SelfAttention) => match generated_text(att) {
            Some(generated) => format!(
                "prompt: “{text}”{}generated: “{}”",
                layout::SUBTITLE_PARTS,
                quote(&generated, 400)
            ),
            None => format!("“{text}”"),
        },
        (None, AttentionKind::Encoder) => source(),
        (None, AttentionKind::Decoder) => target().unwrap_or_default(),
        (None, AttentionKind::Cross) => match target() {
            Some(t) => format!("{t}  ·  {}", source()),
            None => source(),
        },
    }
}

/// Which cells of `att`'s matrices the query could not see in captured layer `layer` (its
/// sliding window included), or with `None` in every layer; `None` when all are visible.
fn cell_mask(att: &Attention, layer: Option<usize>) -> Option<Vec<bool>> {
    let (nq, nk) = (att.n_queries(), att.n_keys());
    let mask: Vec<bool> = (0..nq * nk)
        .map(|i| match layer {
            Some(l) => att.is_masked_in(l, i / nk, i % nk),
            None => att.is_masked_everywhere(i / nk, i % nk),
        })
        .collect();
    mask.iter().any(|&m| m).then_some(mask)
}

/// The notes under the subtitle: how the attention shown differs from the model's, and how to
/// read what a causal model's or an encoder–decoder's figure adds (hatched cells, generated
/// tokens, rows that are decoder inputs, reaction arrows).
fn notes(att: &Attention, banded: bool) -> Vec<String> {
    let mut notes = Vec::new();
    let unit = if att.level == crate::attention::Level::Word {
        "word"
    } else {
        "token"
    };
    if att.level == crate::attention::Level::Word {
        notes.push("words: word pieces merged".to_string());
    }
    if att.special_excluded {
        notes.push("special tokens removed, rows renormalised".to_string());
    }
    if att.sink_shares().is_some() {
        notes.push(
            "learned attention sinks: the 'sink' column beside a head's heatmap is each row's \
             share on its sink, which the row's cells leave (together they sum to 1)"
                .to_string(),
        );
    }
    if matches!(att.kind, AttentionKind::Cross | AttentionKind::Decoder) {
        notes.push(format!(
            "rows are the decoder's inputs, the target shifted right by one: row i reads {unit} \
             i and predicts the next"
        ));
    }
    if att.mask == crate::attention::MaskKind::Causal {
        notes.push(
            "causal mask: hatched cells are keys after the query, which it cannot see".into(),
        );
        if att.pictures.iter().any(|p| p.bidirectional) {
            notes.push("except within a picture: its image tokens see each other in full".into());
        }
        if att.prefix > 0 {
            notes.push(prefix_note(att.prefix));
        }
    }
    let windows: Vec<String> = att
        .windows()
        .iter()
        .enumerate()
        .filter_map(|(l, w)| w.map(|w| (att.layer_number(l), w)))
        .map(|(n, w)| format!("{n}: {w}"))
        .collect();
    if !windows.is_empty() {
        notes.push(format!(
            "sliding windows (layer: tokens) {}: hatched cells before the diagonal are outside              the window",
            windows.join(", ")
        ));
    }
    if let Some(g) = att.first_generated() {
        let last = att.n_queries() - 1;
        // With bands a unit is numbered by its first token.
        let number = |u: usize| {
            if banded {
                att.queries().spans[u].start
            } else {
                u
            }
        };
        let which = if last > g {
            format!("{unit}s {}–{}", number(g), number(last))
        } else {
            format!("{unit} {}", number(g))
        };
        notes.push(format!(
            "{which}, in orange after the dashed line, generated by the model"
        ));
    }
    if !att.queries().reaction_arrows().is_empty() || !att.keys().reaction_arrows().is_empty() {
        notes.push("reaction: a line before >> divides reactants from products".into());
    }
    notes
}

#[cfg(test)]
mod tests;

/// `scene` as PNG bytes at `factor` pixels per layout pixel, within the scale and pixel bounds
/// every figure keeps.
pub(crate) fn scene_png(scene: &Scene, factor: f32) -> Result<Vec<u8>, ImageError> {
    if !(MIN_SCALE_FACTOR..=MAX_SCALE_FACTOR).contains(&factor) {
        return Err(ImageError::ScaleFactor(factor));
    }
    let (w, h) = paint::scaled_size(scene, factor);
    if w as u64 * h as u64 > MAX_PNG_PIXELS {
        return Err(ImageError::TooManyPixels { factor, w, h });
    }
    Ok(paint::png(scene, factor)?)
}

/// Black or white, whichever reads better as text on `c`.
pub(crate) fn text_on(c: theme::Rgb) -> theme::Rgb {
    let l = 0.299 * c.0 as f32 + 0.587 * c.1 as f32 + 0.114 * c.2 as f32;
    if l > 140.0 {
        theme::Rgb(0x10, 0x10, 0x10)
    } else {
        theme::Rgb(0xff, 0xff, 0xff)
    }
}

/// The mask note of a prefix-LM mask over the first `tokens` tokens (the same words in every
/// view).
pub fn prefix_note(tokens: usize) -> String {
    format!(
        "except within the prompt's first {tokens} tokens (its pictures and text): a prefix-LM \
         mask, where they see each other in full, whatever the sliding window"
    )
}
