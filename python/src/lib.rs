//! `attnviz._native`: the Python package's bridge to the attnviz library. Everything is done by
//! the library (models, import checks, analyses, every renderer); this module only converts
//! Python values to the library's types and back. The public API is `python/attnviz/`.

#![deny(clippy::undocumented_unsafe_blocks)]

mod heads;
mod pixels;
mod summary;
mod tqdm;
mod words;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use numpy::ndarray::ArrayView4;
use numpy::{PyArray4, PyReadonlyArray4};
use pyo3::exceptions::{PyMemoryError, PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;

use attnviz::analysis::{self, reweighted, Analysis, ViewOptions, Weighting};
use attnviz::attention::{Attention, AttentionKind, AttentionSet, HeadSel, Selection};
use attnviz::choice::Choice;
use attnviz::import::{self, Arrays, ImportError, Tokens};
use attnviz::model::{InputError, Model};
use attnviz::render::html::{self, HtmlOptions, PrecisionChoice, View};
use attnviz::render::image::{self, ColorScale, Colormap, Figure, FigureSpec, ImageOptions, Theme};
use attnviz::render::json::{JsonOptions, JsonSection};
use attnviz::render::terminal::{escape_controls, write_view, TerminalOptions};
use attnviz::report::{self, Measured};
use attnviz::request::{RequestError, RunRequest};

/// A message for Python: quoted file contents, token labels and names reach a notebook or a
/// terminal's traceback with their control and bidirectional characters shown as escapes
/// (`<U+001B>`), as on the CLI's error line.
fn message(e: impl std::fmt::Display) -> String {
    escape_controls(&e.to_string()).into_owned()
}

fn value_error(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(message(e))
}

fn runtime_error(e: impl std::fmt::Display) -> PyErr {
    PyRuntimeError::new_err(message(e))
}

fn import_error(e: ImportError) -> PyErr {
    match e {
        ImportError::Io { .. } => PyOSError::new_err(message(e)),
        ImportError::NoTokens { ref field, .. } if field == "tokens" => {
            PyValueError::new_err(message(format!("{e} with tokens=[...]")))
        }
        ImportError::Check(_)
        | ImportError::Unreadable { .. }
        | ImportError::Json(_)
        | ImportError::File(_)
        | ImportError::Npz(_)
        | ImportError::Saved(_)
        | ImportError::TokenFile { .. }
        | ImportError::NoTokens { .. }
        | ImportError::TokensForEncoderDecoder { .. } => PyValueError::new_err(message(e)),
        ImportError::TooBig { .. } => {
            PyMemoryError::new_err(message(format!("{e} (max_memory=BYTES)")))
        }
    }
}

/// A library option type by name, or an error that lists the names.
fn choice<T: Choice>(what: &str, name: &str) -> PyResult<T> {
    T::from_name(name).ok_or_else(|| {
        value_error(format!(
            "{what} `{name}` is not one of: {}",
            T::ALL
                .iter()
                .map(|v| v.name())
                .collect::<Vec<_>>()
                .join(", ")
        ))
    })
}

/// Models loaded in this process, by (model, revision): a notebook runs many sentences through
/// one model, and loading it is most of a short run's time.
/// Loaded models by id, revision and whether they are named by their full path.
type ModelCache = Mutex<HashMap<(String, String, bool, Option<std::path::PathBuf>), Arc<Model>>>;

fn models() -> &'static ModelCache {
    static MODELS: OnceLock<ModelCache> = OnceLock::new();
    MODELS.get_or_init(|| Mutex::new(HashMap::new()))
}

/// How many models stay loaded (the oldest is dropped beyond this).
const MODEL_CACHE: usize = 4;

fn model(
    id: &str,
    revision: &str,
    full_path: bool,
    mmproj: Option<&std::path::Path>,
) -> Result<Arc<Model>, String> {
    let key = (
        id.to_string(),
        revision.to_string(),
        full_path,
        mmproj.map(std::path::Path::to_path_buf),
    );
    if let Some(m) = models().lock().map_err(|e| e.to_string())?.get(&key) {
        return Ok(m.clone());
    }
    // Downloads are shown with tqdm when it is installed.
    let hub = attnviz::model::Hub::from_env().with_progress(Arc::new(tqdm::Tqdm::default()));
    let loaded = Arc::new(
        Model::load_with_projector(id, revision, &hub, None, mmproj)
            .map_err(|e| words::model(&e))?
            .with_full_path(full_path),
    );
    let mut cache = models().lock().map_err(|e| e.to_string())?;
    if cache.len() >= MODEL_CACHE {
        let first = cache.keys().next().cloned();
        if let Some(k) = first {
            cache.remove(&k);
        }
    }
    cache.insert(key, loaded.clone());
    Ok(loaded)
}

/// Forget every loaded model (after changing a model folder on disk).
#[pyfunction]
fn clear_cache() -> PyResult<()> {
    models().lock().map_err(runtime_error)?.clear();
    Ok(())
}

/// Captured attention, with everything that labels it; the views are its methods.
#[pyclass(frozen, module = "attnviz._native", name = "Attention")]
struct PyAttention {
    /// One kind of attention, as a set of one (the library's outputs take a set).
    set: AttentionSet,
    /// What the run computed beside the attention, for the report's lens, heads and matrix
    /// views (none for attention from arrays or files).
    extras: Arc<Measured>,
}

impl PyAttention {
    fn of(att: Attention) -> Self {
        PyAttention {
            set: AttentionSet::single(att),
            extras: Arc::default(),
        }
    }

    fn att(&self) -> &Attention {
        self.set.primary()
    }
}

fn selection(att: &Attention, layer: Option<usize>, head: Option<usize>) -> PyResult<Selection> {
    let layer = layer.unwrap_or(att.layers().saturating_sub(1));
    let head = head.map_or(HeadSel::Mean, HeadSel::Index);
    att.model
        .check_selection(Selection::new(layer, head))
        .map_err(value_error)
}

fn view_options(words: bool, no_special: bool) -> ViewOptions {
    ViewOptions { words, no_special }
}

#[pymethods]
impl PyAttention {
    /// `(layers, heads, queries, keys)`.
    #[getter]
    fn shape(&self) -> (usize, usize, usize, usize) {
        let a = self.att();
        (a.layers(), a.heads(), a.n_queries(), a.n_keys())
    }

    /// The weights as a read-only numpy array over this object's own memory (no copy).
    fn weights<'py>(slf: Bound<'py, Self>) -> PyResult<Bound<'py, PyArray4<f32>>> {
        let this = slf.get();
        let view =
            ArrayView4::from_shape(this.shape(), this.att().weights()).map_err(value_error)?;
        // SAFETY: the array borrows `this.att`'s weights, which live as long as the Python
        // object `slf` (the array's base, kept alive by numpy) and never change: the class is
        // frozen and `Attention` has no mutating method reachable from Python. The array is
        // made read-only below, so numpy never writes through the shared pointer.
        let array = unsafe { PyArray4::borrow_from_array(&view, slf.clone().into_any()) };
        array.getattr("flags")?.setattr("writeable", false)?;
        Ok(array)
    }

    #[getter]
    fn kind(&self) -> &'static str {
        self.att().kind.as_str()
    }
    #[getter]
    fn mask(&self) -> &'static str {
        self.att().mask.as_str()
    }
    #[getter]
    fn windows(&self) -> Vec<Option<usize>> {
        self.att().windows().to_vec()
    }
    #[getter]
    fn level(&self) -> &'static str {
        self.att().level.as_str()
    }
    #[getter]
    fn text(&self) -> String {
        self.att().text.clone()
    }
    #[getter]
    fn pair(&self) -> Option<String> {
        self.att().pair.clone()
    }
    #[getter]
    fn tokens(&self) -> Vec<String> {
        self.att().queries().labels.clone()
    }
    /// A vision model's picture as JSON (the export's `image` object), or `None`.
    #[getter]
    fn image_json(&self) -> Option<String> {
        self.att()
            .image
            .as_deref()
            .and_then(|i| serde_json::to_string(i).ok())
    }
    /// The pictures a vision-language model read, as JSON: a list of `{first, count, grid,
    /// source, cells}`, with `tile` (`{picture, at, of, crop}`) for a tile, crop or whole view of a
    /// picture the processor split (Idefics3, SmolVLM); empty for other models.
    #[getter]
    fn pictures_json(&self) -> String {
        let pictures: Vec<serde_json::Value> = self
            .att()
            .pictures
            .iter()
            .map(|p| {
                let mut v = serde_json::json!({
                    "first": p.first,
                    "count": p.image.cells.len(),
                    "grid": p.image.grid,
                    "source": p.image.source,
                    "cells": p.image.cells,
                });
                if let Some(tile) = &p.tile {
                    v["tile"] = serde_json::json!(tile);
                }
                v
            })
            .collect();
        serde_json::to_string(&pictures).expect("pictures serialise to JSON")
    }
    #[getter]
    fn key_tokens(&self) -> Vec<String> {
        self.att().keys().labels.clone()
    }
    /// The tokens as a person reads them (`Ġquick` → `quick`, `Ċ` → `↵`).
    #[getter]
    fn display_tokens(&self) -> Vec<String> {
        self.att().queries().display.clone()
    }
    #[getter]
    fn key_display_tokens(&self) -> Vec<String> {
        self.att().keys().display.clone()
    }
    #[getter]
    fn roles(&self) -> Vec<&'static str> {
        self.att()
            .queries()
            .roles
            .iter()
            .map(|r| r.as_str())
            .collect()
    }
    #[getter]
    fn key_roles(&self) -> Vec<&'static str> {
        self.att().keys().roles.iter().map(|r| r.as_str()).collect()
    }
    /// Whether each query token was generated by the model rather than read.
    #[getter]
    fn generated(&self) -> Vec<bool> {
        let q = self.att().queries();
        (0..q.labels.len())
            .map(|i| q.generated.get(i).copied().unwrap_or(false))
            .collect()
    }
    #[getter]
    fn sentence_b_start(&self) -> Option<usize> {
        self.att().sentence_b_start()
    }
    /// A mixture-of-experts model's router decisions as JSON (`experts`, `top_k`,
    /// `renormalised`, `tokens`, and per routed layer `layer`, `probs` `[tokens × experts]`,
    /// `chosen` and `weights` `[tokens × top_k]`, flat), or `None` for any other model.
    #[getter]
    fn router_json(&self) -> Option<String> {
        self.att()
            .router
            .as_deref()
            .map(|r| serde_json::to_string(r).expect("the router serialises to JSON"))
    }
    /// A hybrid model's layers that mix tokens without a softmax, as the JSON export's
    /// `non_softmax` section (`kind`, `layers`, `legend`, and when captured `mixing`: `heads`,
    /// `tokens`, per layer `layer` and `weights` `[heads][tokens][tokens]`), or `None`.
    #[getter]
    fn mixing_json(&self) -> Option<String> {
        self.att().non_softmax.as_ref().map(|n| {
            serde_json::to_string(&attnviz::doc::mixing::NonSoftmaxDoc::of(n))
                .expect("the token mixing serialises to JSON")
        })
    }
    /// Each row's share on a learned attention sink, `[layers × heads × queries]` flat
    /// (gpt-oss), or `None`.
    #[getter]
    fn sink_shares(&self) -> Option<Vec<f32>> {
        self.att().sink_shares().map(<[f32]>::to_vec)
    }
    #[getter]
    fn model_id(&self) -> String {
        self.att().model.id.clone()
    }
    #[getter]
    fn model_name(&self) -> String {
        self.att().model.name().to_string()
    }
    #[getter]
    fn family(&self) -> String {
        self.att().model.family.clone()
    }

    /// Per-head statistics of the view, as the JSON export's `stats` object (a JSON string).
    #[pyo3(signature = (words=false, no_special=false))]
    fn stats(&self, py: Python<'_>, words: bool, no_special: bool) -> PyResult<String> {
        let att = self.att();
        py.detach(|| {
            let shown = analysis::view(att, view_options(words, no_special))?;
            let stats = analysis::head_stats(&shown);
            Ok::<_, analysis::AnalysisError>(
                serde_json::to_string(&analysis::StatsSection::new(&stats))
                    .expect("statistics serialise"),
            )
        })
        .map_err(value_error)
    }

    /// The self-contained HTML report, opened on `view` (head, model, matrix, neuron, stats).
    #[pyo3(signature = (view="head", layer=None, head=None, words=false, no_special=false,
        precision="auto", title=None, settings=Vec::new(), raw_tokens=false, query=None))]
    #[allow(clippy::too_many_arguments)]
    fn html(
        &self,
        py: Python<'_>,
        view: &str,
        layer: Option<usize>,
        head: Option<usize>,
        words: bool,
        no_special: bool,
        precision: &str,
        title: Option<String>,
        settings: Vec<(String, String)>,
        raw_tokens: bool,
        query: Option<String>,
    ) -> PyResult<String> {
        let att = self.att();
        let query = image_query(att, query.as_deref())?;
        let opened = view_of(view)?;
        check_view(opened, &self.extras, att.router.is_some())?;
        let precision: PrecisionChoice = choice("precision", precision)?;
        let layer = layer.unwrap_or(0);
        att.model
            .check_selection(Selection::new(layer, HeadSel::Index(head.unwrap_or(0))))
            .map_err(value_error)?;
        let bytes = py
            .detach(|| -> Result<Vec<u8>, String> {
                let html_opts = HtmlOptions {
                    query,
                    ..report_options(
                        &self.set,
                        &self.extras,
                        opened,
                        layer,
                        head,
                        words,
                        no_special,
                        precision,
                        raw_tokens,
                        title,
                        settings,
                    )?
                };
                let mut out = Vec::new();
                html::write_html(att, &html_opts, &mut out).map_err(|e| e.to_string())?;
                Ok(out)
            })
            .map_err(value_error)?;
        String::from_utf8(bytes).map_err(value_error)
    }

    /// Write a PNG or SVG figure to `path`.
    #[pyo3(signature = (path, format="png", figure="head", layer=None, head=None,
        words=false, no_special=false, colormap="viridis", theme="light", scale="auto",
        scale_factor=1.0, raw_tokens=false, expand_pictures=false, query=None))]
    #[allow(clippy::too_many_arguments)]
    fn image(
        &self,
        py: Python<'_>,
        path: PathBuf,
        format: &str,
        figure: &str,
        layer: Option<usize>,
        head: Option<usize>,
        words: bool,
        no_special: bool,
        colormap: &str,
        theme: &str,
        scale: &str,
        scale_factor: f32,
        raw_tokens: bool,
        expand_pictures: bool,
        query: Option<String>,
    ) -> PyResult<()> {
        let figure: Figure = choice("figure", figure)?;
        let on_picture = picture_query(self.att(), query.as_deref())?;
        let opts = ImageOptions {
            colormap: choice::<Colormap>("colormap", colormap)?,
            theme: choice::<Theme>("theme", theme)?,
            scale: choice::<ColorScale>("scale", scale)?,
            scale_factor,
            raw_tokens,
            expand_pictures,
        };
        if !(image::MIN_SCALE_FACTOR..=image::MAX_SCALE_FACTOR).contains(&scale_factor) {
            return Err(value_error(format!(
                "scale_factor {scale_factor} is not from {} to {}",
                image::MIN_SCALE_FACTOR,
                image::MAX_SCALE_FACTOR
            )));
        }
        let png = match format {
            "png" => true,
            "svg" => false,
            other => return Err(value_error(format!("format `{other}` is not png or svg"))),
        };
        let att = self.att();
        let Selection { layer, head } = selection(att, layer, head)?;
        py.detach(|| -> Result<(), String> {
            let (shown, analysis) = Analysis::compute_view(att, view_options(words, no_special))
                .map_err(|e| self::words::analysis(&e))?;
            let rollout = analysis.rollout.get(layer).map(Vec::as_slice);
            if let Some(query) = on_picture {
                use attnviz::render::image::picture::{self, PictureSpec};
                let spec = match figure {
                    Figure::Head | Figure::Mean => PictureSpec::Head { layer, head },
                    Figure::Layer => PictureSpec::Layer { layer },
                    Figure::Model => PictureSpec::Model,
                    Figure::Rollout => PictureSpec::Rollout {
                        layer,
                        matrix: rollout
                            .ok_or_else(|| self::words::image(&image::ImageError::NoRollout))?,
                        fusion: None,
                    },
                    _ => {
                        return Err("this figure does not draw on the picture; query= draws \
                                    head, mean, layer, model or rollout"
                            .to_string())
                    }
                };
                return if png {
                    picture::write_png(&shown, &spec, query, &opts, &path)
                } else {
                    picture::write_svg(&shown, &spec, query, &opts, &path)
                }
                .map_err(|e| self::words::image(&e));
            }
            if figure == Figure::Router {
                // Drawn from the run's router, its tokens labelled as the token-level
                // attention's (the router does not merge words).
                use attnviz::render::image::router::{self, RouterSpec};
                let r = att
                    .router
                    .as_deref()
                    .ok_or_else(|| self::words::image(&image::ImageError::NoRouter))?;
                let number = att.layer_number(layer);
                let spec = RouterSpec {
                    router: r,
                    layer: number,
                    labels: Some(att.queries().shown(raw_tokens)),
                };
                let title = format!("Router · layer {number} · {}", att.model.name());
                return if png {
                    router::write_png(&spec, &title, &opts, &path)
                } else {
                    router::write_svg(&spec, &title, &opts, &path)
                }
                .map_err(|e| self::words::image(&e));
            }
            if figure == Figure::Mixing {
                // Drawn from the run's token mixing (token level): the gated delta layers
                // that feed the layer, at the head, on a signed scale.
                use attnviz::render::image::mixing::{self, MixingSpec};
                let no = || {
                    self::words::image(&image::ImageError::NoMixing {
                        layers: "none".to_string(),
                    })
                };
                let m = att
                    .non_softmax
                    .as_ref()
                    .and_then(|n| n.mixing.as_deref())
                    .ok_or_else(no)?;
                let number = att.layer_number(layer);
                let layers =
                    match attnviz::render::mixing_table::feeding(m, att.layer_numbers(), number) {
                        f if f.is_empty() => m.layer_numbers(),
                        f => f,
                    };
                let spec = MixingSpec {
                    mixing: m,
                    layers: &layers,
                    head,
                    labels: Some(att.queries().shown(raw_tokens)),
                };
                let title = format!(
                    "Token mixing · layer{} {} (feeding layer {number}) · {}",
                    if layers.len() == 1 { "" } else { "s" },
                    attnviz::attention::layer_list(&layers),
                    att.model.name()
                );
                return if png {
                    mixing::write_png(&spec, &title, &opts, &path)
                } else {
                    mixing::write_svg(&spec, &title, &opts, &path)
                }
                .map_err(|e| self::words::image(&e));
            }
            let spec = FigureSpec::of(figure, layer, head, rollout).map_err(|e| e.to_string())?;
            if png {
                image::write_png(&shown, &spec, &opts, &path)
            } else {
                image::write_svg(&shown, &spec, &opts, &path)
            }
            .map_err(|e| self::words::image(&e))
        })
        .map_err(value_error)
    }

    /// The JSON export (`docs/json.md`) as a string.
    #[pyo3(signature = (full_precision=false, words=false, no_special=false, include=Vec::new()))]
    fn json(
        &self,
        py: Python<'_>,
        full_precision: bool,
        words: bool,
        no_special: bool,
        include: Vec<String>,
    ) -> PyResult<String> {
        let include = include
            .iter()
            .map(|n| choice::<JsonSection>("include", n))
            .collect::<PyResult<Vec<_>>>()?;
        let set = &self.set;
        let bytes = py
            .detach(|| -> Result<Vec<u8>, String> {
                // The library's JSON export of this one kind, in the view asked for; what the
                // run measured beside it is not part of it (Python reads those as arrays).
                let plan = report::Plan {
                    view: view_options(words, no_special),
                    json: report::JsonPlan {
                        format: JsonOptions { full_precision },
                        include,
                    },
                    keep_stats: true,
                    ..report::Plan::default()
                };
                let nothing = Measured::default();
                let run = finished(set, &nothing, Vec::new());
                let analysed = report::analyse(&plan, &run).map_err(|e| e.to_string())?;
                let mut out = Vec::new();
                report::write_json(&plan, &run, &analysed, &mut out).map_err(|e| e.to_string())?;
                Ok(out)
            })
            .map_err(value_error)?;
        String::from_utf8(bytes).map_err(value_error)
    }

    /// The terminal view of one layer and head (or the mean), as text.
    #[pyo3(signature = (layer=None, head=None, words=false, no_special=false, top=3, width=100, color=false, raw_tokens=false, expand_pictures=false))]
    #[allow(clippy::too_many_arguments)]
    fn terminal(
        &self,
        layer: Option<usize>,
        head: Option<usize>,
        words: bool,
        no_special: bool,
        top: usize,
        width: usize,
        color: bool,
        raw_tokens: bool,
        expand_pictures: bool,
    ) -> PyResult<String> {
        let sel = selection(self.att(), layer, head)?;
        let shown =
            analysis::view(self.att(), view_options(words, no_special)).map_err(value_error)?;
        let opts = TerminalOptions {
            color,
            width,
            top,
            raw_tokens,
            expand_pictures,
            ..TerminalOptions::default()
        };
        let mut out = Vec::new();
        write_view(&shown, sel, &opts, &mut out).map_err(value_error)?;
        String::from_utf8(out).map_err(value_error)
    }
}

/// A run request the model refused, worded with `run`'s keyword names.
fn request_error(e: RequestError) -> PyErr {
    let value = |s: String| PyValueError::new_err(message(s));
    match e {
        // What was given does not suit the model's kind (text with a vision model's picture,
        // a picture for a text model, marks that do not match the pictures): a bad value.
        RequestError::Model(e)
            if matches!(
                &e,
                attnviz::model::Error::Input(i) if matches!(
                    **i,
                    InputError::TextWithPicture { .. }
                        | InputError::TextToVision { .. }
                        | InputError::ImageToText { .. }
                        | InputError::VisionTowerNotRun { .. }
                        | InputError::ImageNeedsProjector { .. }
                        | InputError::StoreProjector { .. }
                        | InputError::NoPicture { .. }
                        | InputError::PanAndScan { .. }
                        | InputError::PictureMarks { .. }
                        | InputError::NeedsAudio { .. }
                        | InputError::AudioToText { .. }
                        | InputError::EnglishOnly { .. }
                        | InputError::UnknownLanguage { .. }
                        | InputError::SpeechTask { .. }
                        | InputError::NoTimestampTokens { .. }
                )
            ) =>
        {
            value(words::model(&e))
        }
        RequestError::Model(e) => runtime_error(words::model(&e)),
        RequestError::TargetNeedsEncoderDecoder {
            model,
            family,
            decoder,
        } => value(format!(
            "target= is for encoder–decoder models (BART, T5, Marian); {model} is a {family} \
             model: drop target={}",
            if decoder { ", or pass generate=N" } else { "" }
        )),
        RequestError::ChatForEncoderDecoder { model, family } => value(format!(
            "chat=True: {model} is an encoder–decoder model ({family}), with no chat template; \
             give the source as text and target= or generate="
        )),
        RequestError::PairForEncoderDecoder { model, family } => value(format!(
            "pair=: {model} is an encoder–decoder model ({family}), which reads one source text; \
             give the output with target="
        )),
        RequestError::PairForDecoder { model, family } => value(format!(
            "pair=: {model} is a decoder ({family}), which reads one text; sentence pairs are \
             for encoders such as BERT"
        )),
        RequestError::PairWithGeneration => value(
            "generate= and chat= are for decoder models, which read one text: drop pair=".into(),
        ),
        RequestError::EmptyTarget => {
            value("target= is empty; give the output to teacher-force".into())
        }
        RequestError::GenerateNothing => {
            value("generate=0 generates nothing; give the number of tokens to generate".into())
        }
        RequestError::LayersForEncoderDecoder { family } => value(format!(
            "layers= is not supported for encoder–decoder models ({family}): every layer of the \
             encoder and the decoder is captured"
        )),
        RequestError::LayerOutOfRange { layer, layers } => value(format!(
            "layers=: layer {layer} does not exist; the model has layers 0 to {}",
            layers.saturating_sub(1)
        )),
        RequestError::ValueWeightedForEncoderDecoder { family } => value(format!(
            "weighting=: value-weighted and norm-aware attention are not available for \
             encoder–decoder models ({family}) yet; leave weighting=\"raw\""
        )),
        // The package never streams a capture; the library's words are right if it ever does.
        e @ RequestError::StreamForEncoderDecoder { .. } => runtime_error(e),
        e @ RequestError::NotOneToken { .. } => value(format!(
            "target_token= / contrast=: {e}; give one token of the vocabulary"
        )),
        e @ RequestError::HeadsNeedDecoder { .. } => value(e.to_string()),
        RequestError::LensTopTooLarge { asked, max } => value(format!(
            "lens={asked} keeps more tokens per cell than the logit lens writes (at most {max}); \
             give lens={max} or fewer"
        )),
        RequestError::SeveralPictures {
            model,
            family,
            given,
        } => value(format!(
            "image= holds {given} pictures: {model} is a vision model ({family}), which reads \
             one; give one picture (vision-language models such as LLaVA take a list)"
        )),
        RequestError::TowerPictures { given } => value(format!(
            "tower=True runs the vision tower over one picture, and image= holds {given}; give \
             one picture"
        )),
        RequestError::TowerReadsThePicture => value(
            "tower=True runs the vision tower alone over the picture: generate=, chat= and head \
             attribution or ablation are the language model's; drop them, or tower=True"
                .to_string(),
        ),
        // A recording's refusals, in the library's words.
        e @ (RequestError::TextWithAudio { .. }
        | RequestError::SpeechSettingsWithoutAudio
        | RequestError::NoSuchWindow { .. }) => value(e.to_string()),
        e @ RequestError::Summarised(_) => value(e.to_string()),
        RequestError::Shape(e) => runtime_error(e),
    }
}

/// What `run` gives Python: every kind of the run, the teacher-forced target, the generated
/// text, and the default generation length an encoder–decoder used.
type RunResult = (
    Vec<PyAttention>,
    Option<String>,
    Option<String>,
    Option<usize>,
    Option<NormSizes>,
    Option<String>,
    Option<AltiArrays>,
    Option<AltiArrays>,
    HeadSections,
    SpeechSection,
    Option<Py<PyAny>>,
);

/// ALTI (or value zeroing) through each layer and of each layer alone, `[layers · n · n]` each,
/// the model's numbers of the layers, and n.
type AltiArrays = (Vec<f32>, Vec<f32>, Vec<usize>, usize);

/// A speech run's JSON section (`speech`: transcript, word timings, the window captured;
/// `docs/json.md`), as a JSON string the package reads.
type SpeechSection = Option<String>;

/// Head attribution's and ablation's JSON sections (`head_attribution`, `head_ablation`;
/// `docs/json.md`), as JSON strings the package reads.
type HeadSections = (Option<String>, Option<String>);

/// Value-weighted and norm-aware sizes `[layers · heads · queries · keys]` each, and that shape.
type NormSizes = (Vec<f32>, Vec<f32>, Vec<usize>);

/// Run `text` through `model` (a hub id or a local folder; loaded once per process) as the CLI
/// runs TEXT with the same options (a library `RunRequest`).
#[pyfunction]
#[pyo3(signature = (text, model, revision="main", pair=None, target=None, generate=None,
    chat=false, layers=None, max_memory=None, truncate=false, neuron=false, weighting="raw",
    images=None, lens=None, alti=false, value_zeroing=false, attribution=false, ablate=None,
    target_token=None, contrast=None, max_analysis_time=None, threads=None, full_paths=false,
    tower=false, mmproj=None, pan_and_scan=false, audio=None, language=None,
    task="transcribe", timestamps=false, window=None, summarise=None))]
#[allow(clippy::too_many_arguments)]
fn run(
    py: Python<'_>,
    text: &str,
    model: &str,
    revision: &str,
    pair: Option<String>,
    target: Option<String>,
    generate: Option<usize>,
    chat: bool,
    layers: Option<Vec<usize>>,
    max_memory: Option<u64>,
    truncate: bool,
    neuron: bool,
    weighting: &str,
    images: Option<Vec<Bound<'_, PyAny>>>,
    lens: Option<usize>,
    alti: bool,
    value_zeroing: bool,
    attribution: bool,
    ablate: Option<String>,
    target_token: Option<String>,
    contrast: Option<String>,
    max_analysis_time: Option<f64>,
    threads: Option<usize>,
    full_paths: bool,
    tower: bool,
    mmproj: Option<std::path::PathBuf>,
    pan_and_scan: bool,
    audio: Option<std::path::PathBuf>,
    language: Option<String>,
    task: &str,
    timestamps: bool,
    window: Option<usize>,
    summarise: Option<(usize, Vec<usize>)>,
) -> PyResult<RunResult> {
    let translate = match task {
        "transcribe" => false,
        "translate" => true,
        other => {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "task={other:?} is not one of 'transcribe', 'translate'"
            )))
        }
    };
    let weighting: Weighting = choice("weighting", weighting)?;
    let analysis_time = match max_analysis_time {
        None => None,
        Some(s) if s.is_finite() && (0.0..=1e9).contains(&s) => {
            Some(std::time::Duration::from_secs_f64(s))
        }
        Some(s) => {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "max_analysis_time must be a number of seconds from 0 to 1e9, not {s}"
            )))
        }
    };
    let ablate = ablate.as_deref().map(heads::ablation_mode).transpose()?;
    // The pictures: each a file, or an array checked here, before the model is even loaded.
    let images = images.unwrap_or_default();
    let several = images.len() > 1;
    let images = images
        .iter()
        .enumerate()
        .map(|(i, picture)| {
            if let Ok(path) = picture.extract::<std::path::PathBuf>() {
                return Ok(attnviz::pixels::ImageSource::File(path));
            }
            Ok(attnviz::pixels::ImageSource::Pixels {
                // An array is named `image` in the views, `image1`, `image2`, … of several.
                name: if several {
                    format!("image{}", i + 1)
                } else {
                    "image".to_string()
                },
                pixels: attnviz::pixels::SharedPixels(Arc::new(pixels::image_array(picture)?)),
            })
        })
        .collect::<PyResult<Vec<_>>>()?;
    // Every field is set today; the update keeps fields added later at their defaults.
    #[allow(clippy::needless_update)]
    let request = RunRequest {
        // A vision model reads its picture alone (the library refuses text with it); a
        // vision-language model reads the text as its prompt.
        text: text.to_string(),
        pair,
        target,
        generate,
        chat,
        layers: layers.map(|mut l| {
            l.sort_unstable();
            l.dedup();
            l
        }),
        max_memory,
        truncate,
        query_key: neuron,
        value_weighted: weighting != Weighting::Raw,
        // A file, or an array read a row at a time where it lies.
        images,
        tower,
        pan_and_scan,
        mmproj,
        lens,
        alti,
        value_zeroing,
        attribution,
        ablate,
        target_token,
        contrast,
        analysis_time,
        audio: audio.map(attnviz::request::AudioSource::File),
        language,
        translate,
        timestamps,
        window,
        // The keys kept per query and the queries whose full rows are kept.
        summary: summarise.map(|(top_k, mut rows)| {
            rows.sort_unstable();
            rows.dedup();
            attnviz::attention::summary::SummarySpec { top_k, rows }
        }),
        ..RunRequest::default()
    };
    let pool = threads.map(pool_of).transpose()?;
    let run = py.detach(|| -> PyResult<attnviz::request::Run> {
        let m = self::model(model, revision, full_paths, request.mmproj.as_deref())
            .map_err(runtime_error)?;
        let run = || {
            request
                .run(&m, &tqdm::Tqdm::default())
                .map_err(request_error)
        };
        match &pool {
            Some(pool) => pool.install(run),
            None => run(),
        }
    })?;
    let target = run.set.target().map(str::to_string);
    let mut kinds: Vec<PyAttention> = run
        .set
        .iter()
        .map(|att| PyAttention::of(att.clone()))
        .collect();
    let sizes = run.value_weighted.as_ref().map(|w| {
        let shape = vec![w.layers.len(), w.heads, w.queries, w.keys];
        (w.value_weighted.clone(), w.norm_aware.clone(), shape)
    });
    if let (Some(w), [only]) = (&run.value_weighted, kinds.as_mut_slice()) {
        // What every view of the report draws: the weighting's shares of each row.
        only.set =
            AttentionSet::single(reweighted(only.att(), w, weighting).map_err(runtime_error)?);
    }
    let head_sections = heads::sections(&run);
    // The analyses read the primary kind's tokens (a decoder's, an encoder's); an
    // encoder–decoder has none of them.
    if let [first] = kinds.as_mut_slice() {
        first.extras = Arc::new(run.measured.clone());
    }
    Ok((
        kinds,
        target,
        run.generated_text,
        run.default_generation,
        sizes,
        // The logit lens as its JSON section (`docs/json.md`), which the package reads.
        run.measured
            .lens
            .as_ref()
            .map(|l| serde_json::to_string(l).expect("the lens serialises to JSON")),
        run.measured.alti.as_ref().map(|a| {
            (
                a.aggregated.concat(),
                a.per_layer.concat(),
                a.layers.clone(),
                a.tokens,
            )
        }),
        run.measured.value_zeroing.as_ref().map(|v| {
            (
                v.aggregated.concat(),
                v.per_layer.concat(),
                v.layers.clone(),
                v.tokens,
            )
        }),
        head_sections,
        run.measured
            .speech
            .as_ref()
            .map(|s| serde_json::to_string(s).expect("the speech section serialises to JSON")),
        run.measured
            .summary
            .as_ref()
            .map(|s| summary::summary_dict(py, s))
            .transpose()?,
    ))
}

/// `query=` of an image run: the unit the report's image view opens on, from `"ROW,COL"` or
/// `"pool"` (checked as the CLI's `--query` is); `None`: the page's default (the class token).
fn image_query(att: &Attention, query: Option<&str>) -> PyResult<Option<usize>> {
    use attnviz::render::image::picture::{self, Query};
    let Some(query) = query else {
        return Ok(None);
    };
    if att.image.is_none() && !att.pictures.is_empty() {
        // A vision-language model's: a token's number, or the generated tokens.
        let query = picture_query(att, Some(query))?;
        return Ok(query.and_then(|q| image::on_picture::query_unit(att, q).ok()));
    }
    let query: Query = query
        .parse()
        .map_err(|e| value_error(format!("query={e}")))?;
    if att.image.is_none() {
        return Err(value_error(
            "query= picks a patch of a picture, and this attention has none; run with image=",
        ));
    }
    let wrong = |e: image::ImageError| value_error(format!("query=: {}", words::image(&e)));
    picture::pooling_of(att, query).map_err(wrong)?;
    picture::query_unit(att, query).map(Some).map_err(wrong)
}

/// `query=` of a figure of a vision-language model's run: a token's number `N` (as the views
/// number them) or `"generated"`, whose attention to the pictures the figure draws over them;
/// `None` without one (the matrix over the whole sequence).
fn picture_query(
    att: &Attention,
    query: Option<&str>,
) -> PyResult<Option<attnviz::render::image::picture::Query>> {
    use attnviz::render::image::picture::Query;
    let Some(query) = query else {
        return Ok(None);
    };
    if att.pictures.is_empty() {
        return Err(value_error(
            "query= of a figure draws a vision-language model's token over its pictures, and \
             this run read none; run with image=",
        ));
    }
    match query.parse::<Query>() {
        Ok(q @ Query::Token(n)) if n < att.n_queries() => Ok(Some(q)),
        Ok(Query::Token(n)) => Err(value_error(format!(
            "query={n} is past the last token ({}); tokens count from 0",
            att.n_queries() - 1
        ))),
        Ok(Query::Generated) if att.first_generated().is_some() => Ok(Some(Query::Generated)),
        Ok(Query::Generated) => Err(value_error(
            "query=\"generated\" shows the generated tokens, and this run generated none; run \
             with generate=N",
        )),
        _ => Err(value_error(format!(
            "query={query:?}: of a vision-language model, give a token's number N or \"generated\""
        ))),
    }
}

/// A pool of `threads` workers (capped at [`attnviz::threads::max_threads`], as the CLI's
/// `--threads` is) for `run(threads=N)`: the forward pass's matrix products and kernels run on
/// the pool they are started from. Built once per count and kept.
fn pool_of(threads: usize) -> PyResult<Arc<rayon::ThreadPool>> {
    static POOLS: OnceLock<Mutex<HashMap<usize, Arc<rayon::ThreadPool>>>> = OnceLock::new();
    if threads == 0 {
        return Err(value_error("threads=0 runs nothing; give 1 or more"));
    }
    let threads = threads.min(attnviz::threads::max_threads());
    let mut pools = POOLS
        .get_or_init(Default::default)
        .lock()
        .map_err(runtime_error)?;
    if let Some(pool) = pools.get(&threads) {
        return Ok(Arc::clone(pool));
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(runtime_error)?;
    Ok(Arc::clone(pools.entry(threads).or_insert(Arc::new(pool))))
}

/// Refuse a picture in memory of `width × height` pixels over the library's caps (or empty),
/// before any of it is converted: a ValueError in the library's words.
#[pyfunction]
fn check_image_size(width: usize, height: usize) -> PyResult<()> {
    attnviz::pixels::check_array_size(width, height).map_err(value_error)
}

/// The head detector's induction scores of `model` (its repeated random-token probe,
/// `docs/stats.md`), as the JSON's `stats.induction` object (a JSON string); `None` for models
/// the probe does not apply to (encoder–decoders, vision models).
#[pyfunction]
#[pyo3(signature = (model, revision="main"))]
fn induction(py: Python<'_>, model: &str, revision: &str) -> PyResult<Option<String>> {
    let probe = py.detach(|| -> PyResult<_> {
        let m = self::model(model, revision, false, None).map_err(runtime_error)?;
        attnviz::request::induction_probe(&m).map_err(request_error)
    })?;
    probe
        .map(|p| serde_json::to_string(&p).map_err(runtime_error))
        .transpose()
}

fn tokens(
    labels: Vec<String>,
    roles: Option<Vec<String>>,
    sentence_b_start: Option<usize>,
) -> PyResult<Tokens> {
    let roles = match roles {
        None => None,
        Some(names) => Some(
            names
                .iter()
                .map(|n| {
                    attnviz::attention::Role::from_name(n).ok_or_else(|| {
                        value_error(format!(
                            "role `{n}` is not one of start, end, pad, special, word, piece"
                        ))
                    })
                })
                .collect::<PyResult<Vec<_>>>()?,
        ),
    };
    Ok(Tokens {
        labels,
        roles,
        sentence_b_start,
        ..Tokens::default()
    })
}

/// Attention from arrays: `weights` [layers, heads, queries, keys] (copied once, into the
/// value), checked like a file's. Returns the value and the row-sum warning, if any.
#[pyfunction]
#[pyo3(signature = (weights, tokens, kind="self", key_tokens=None, sentence_b_start=None,
    roles=None, key_roles=None, source="arrays", text=None, pair=None, name="attention",
    prettify=false))]
#[allow(clippy::too_many_arguments)]
fn from_arrays(
    py: Python<'_>,
    weights: PyReadonlyArray4<'_, f32>,
    tokens: Vec<String>,
    kind: &str,
    key_tokens: Option<Vec<String>>,
    sentence_b_start: Option<usize>,
    roles: Option<Vec<String>>,
    key_roles: Option<Vec<String>>,
    source: &str,
    text: Option<String>,
    pair: Option<String>,
    name: &str,
    prettify: bool,
) -> PyResult<(PyAttention, Option<String>)> {
    let kind: AttentionKind = choice("kind", kind)?;
    let view = weights.as_array();
    let dims = view.shape();
    let shape = [dims[0], dims[1], dims[2], dims[3]];
    import::check_size(name, &shape).map_err(import_error)?;
    let values: Vec<f32> = match weights.as_slice() {
        Ok(s) => s.to_vec(),
        Err(_) => view.iter().copied().collect(),
    };
    let mut queries = self::tokens(tokens, roles, sentence_b_start)?;
    queries.prettify = prettify;
    let keys = match key_tokens {
        Some(k) => {
            let mut k = self::tokens(k, key_roles, None)?;
            k.prettify = prettify;
            Some(k)
        }
        None => None,
    };
    let arrays = Arrays {
        name: name.to_string(),
        kind,
        shape,
        weights: values,
        queries,
        keys,
        mask: None,
        text,
        pair,
        source: source.to_string(),
        tolerance: import::ROW_SUM_TOLERANCE,
        origin: None,
    };
    let (att, warning) = py.detach(|| import::build(arrays)).map_err(import_error)?;
    Ok((PyAttention::of(att), warning.map(message)))
}

/// Read a file (attnviz JSON, .npz, .safetensors): one value per kind, the warnings, and what
/// kind of file it was.
#[pyfunction]
#[pyo3(signature = (path, tokens=None, max_memory=None, full_paths=false))]
fn read(
    py: Python<'_>,
    path: PathBuf,
    tokens: Option<Vec<String>>,
    max_memory: Option<u64>,
    full_paths: bool,
) -> PyResult<(Vec<PyAttention>, Vec<String>, String, String)> {
    let imported = py
        .detach(|| {
            import::read(
                &path,
                &import::ReadOptions {
                    tokens,
                    max_memory,
                    full_path: full_paths,
                    ..import::ReadOptions::default()
                },
            )
        })
        .map_err(import_error)?;
    // How the report's About panel names the file, as the CLI's `render` does.
    let source = if full_paths {
        attnviz::model::source::full_path(&path)
    } else {
        attnviz::model::source::local_name(&path)
    };
    Ok((
        imported.kinds.into_iter().map(PyAttention::of).collect(),
        imported.warnings.iter().map(message).collect(),
        imported.format,
        source,
    ))
}

/// Merge corpus shards' partial statistics (`corpus_partial.json` files, shards' output
/// folders, or such files' bytes), exactly as `attnviz merge` does: the corpus summary's JSON
/// text and the merge's notes; the summary written to `out` too when given (the bytes `attnviz
/// merge --out` writes).
#[pyfunction]
#[pyo3(signature = (partials, out=None))]
fn merge(
    py: Python<'_>,
    partials: Vec<Bound<'_, PyAny>>,
    out: Option<PathBuf>,
) -> PyResult<(String, Vec<String>)> {
    use attnviz::corpus::merge::{self, PartialSource};
    let mut sources = Vec::with_capacity(partials.len());
    for (i, p) in partials.iter().enumerate() {
        sources.push(match p.cast::<pyo3::types::PyBytes>() {
            Ok(bytes) => PartialSource::Bytes {
                label: format!("partials[{i}]"),
                bytes: bytes.as_bytes().to_vec(),
            },
            Err(_) => PartialSource::File(p.extract::<PathBuf>().map_err(|_| {
                value_error(format!(
                    "partials[{i}] is a {}, not a path, a shard's output folder or a partial \
                     file's dict",
                    p.get_type().name().map_or("?".into(), |n| n.to_string())
                ))
            })?),
        });
    }
    if let Some(out) = &out {
        let target = attnviz::output::absolute(out);
        let over_input = sources
            .iter()
            .any(|s| matches!(s, PartialSource::File(p) if attnviz::output::absolute(p) == target));
        if over_input {
            return Err(value_error(format!(
                "out={} is one of the partial files; write the summary elsewhere",
                out.display()
            )));
        }
        if out.is_dir() {
            return Err(value_error(format!(
                "out={} is a folder; give the file to write, e.g. {}",
                out.display(),
                out.join("corpus_stats.json").display()
            )));
        }
    }
    let (text, notes) = py
        .detach(|| -> Result<(Vec<u8>, Vec<String>), merge::MergeError> {
            let merged = merge::merge_sources(&sources)?;
            if let Some(out) = &out {
                merge::write_summary(&merged, out)?;
            }
            Ok((merge::summary_bytes(&merged), merged.notes))
        })
        .map_err(value_error)?;
    Ok((
        String::from_utf8(text).map_err(runtime_error)?,
        notes.iter().map(message).collect(),
    ))
}

/// Refuse to open on a view whose analysis the run did not compute (the page would fall back
/// to the head view without a word).
fn check_view(opened: View, extras: &Measured, router: bool) -> PyResult<()> {
    let missing = match opened {
        View::Router if !router => {
            "a router: a mixture-of-experts model (Mixtral, Qwen3-MoE, OLMoE, gpt-oss)"
        }
        View::Lens if extras.lens.is_none() => "the logit lens: attnviz.run(..., lens=True)",
        View::Heads if extras.head_attribution.is_none() && extras.head_ablation.is_none() => {
            "head attribution or ablation: attnviz.run(..., attribution=True) or ablate=True"
        }
        _ => return Ok(()),
    };
    Err(value_error(format!(
        "this report has no {}; it needs {missing}",
        match opened {
            View::Lens => "lens view",
            View::Router => "router view",
            _ => "heads view",
        }
    )))
}

fn view_of(view: &str) -> PyResult<View> {
    Ok(match view {
        "head" => View::Head,
        "model" => View::Model,
        "matrix" => View::Matrix,
        "neuron" => View::Neuron,
        "stats" => View::Stats,
        "image" => View::Image,
        "lens" => View::Lens,
        "heads" => View::Heads,
        "router" => View::Router,
        other => {
            return Err(value_error(format!(
            "view `{other}` is not one of: head, model, matrix, neuron, stats, image, lens, heads, router"
        )))
        }
    })
}

/// A kind's attention as the library's outputs take it: every layer it holds is rolled out
/// (a report from Python has always rolled out the layers a capture holds).
fn finished<'a>(
    set: &'a AttentionSet,
    measured: &'a Measured,
    settings: Vec<(String, String)>,
) -> report::Finished<'a> {
    report::Finished {
        set,
        measured,
        every_layer: true,
        settings,
        model_name: set.primary().model.name().to_string(),
    }
}

/// The report's options for `set` (one kind) from the library's [`report::html_kinds`] (its
/// analysis on the `words`/`no_special` view, with what the run measured beside it), opened
/// on `opened` at `layer` and `head`, with `title`.
#[allow(clippy::too_many_arguments)]
fn report_options(
    set: &AttentionSet,
    extras: &Measured,
    opened: View,
    layer: usize,
    head: Option<usize>,
    words: bool,
    no_special: bool,
    precision: PrecisionChoice,
    raw_tokens: bool,
    title: Option<String>,
    settings: Vec<(String, String)>,
) -> Result<HtmlOptions, String> {
    let plan = report::Plan {
        view: view_options(words, no_special),
        html: report::HtmlPlan {
            precision,
            raw_tokens,
            ..report::HtmlPlan::default()
        },
        keep_stats: true,
        ..report::Plan::default()
    };
    let run = finished(set, extras, settings);
    let analysed = report::analyse(&plan, &run).map_err(|e| match e {
        report::ReportError::Analysis(e) => words::analysis(&e),
        e => e.to_string(),
    })?;
    let (mut kinds, _) = report::html_kinds(&plan, &run, &analysed).map_err(|e| e.to_string())?;
    let opts = kinds.pop().ok_or("no attention")?;
    Ok(HtmlOptions {
        title,
        neuron: set.primary().query_key.is_some(),
        layer,
        head: head.unwrap_or(0),
        view: opened,
        // The page's default (the class token), or the query asked for: set by the caller.
        query: None,
        ..opts
    })
}

/// One report holding several kinds (an encoder–decoder's encoder, decoder and
/// cross-attention), opened on `kinds[open]`, with an Encoder / Decoder / Cross selector; each
/// kind at `layer` (clamped to its own layers) and `head`.
#[pyfunction]
#[pyo3(signature = (kinds, open=0, target=None, view="head", layer=None, head=None, words=false,
    no_special=false, precision="auto", title=None, settings=Vec::new(), raw_tokens=false))]
#[allow(clippy::too_many_arguments)]
fn html_kinds(
    py: Python<'_>,
    kinds: Vec<PyRef<'_, PyAttention>>,
    open: usize,
    target: Option<String>,
    view: &str,
    layer: Option<usize>,
    head: Option<usize>,
    words: bool,
    no_special: bool,
    precision: &str,
    title: Option<String>,
    settings: Vec<(String, String)>,
    raw_tokens: bool,
) -> PyResult<String> {
    let opened = view_of(view)?;
    if let Some(k) = kinds.get(open) {
        check_view(opened, &k.extras, k.att().router.is_some())?;
    }
    let precision: PrecisionChoice = choice("precision", precision)?;
    let atts: Vec<(&AttentionSet, &Measured)> =
        kinds.iter().map(|k| (&k.set, &*k.extras)).collect();
    let bytes = py
        .detach(|| -> Result<Vec<u8>, String> {
            let opts = atts
                .iter()
                .map(|&(set, extras)| {
                    let att = set.primary();
                    let l = layer.unwrap_or(0).min(att.layers().saturating_sub(1));
                    let h = head.map(|h| h.min(att.heads().saturating_sub(1)));
                    report_options(
                        set,
                        extras,
                        opened,
                        l,
                        h,
                        words,
                        no_special,
                        precision,
                        raw_tokens,
                        title.clone(),
                        settings.clone(),
                    )
                })
                .collect::<Result<Vec<_>, String>>()?;
            let pairs: Vec<(&Attention, &HtmlOptions)> =
                atts.iter().map(|&(a, _)| a.primary()).zip(&opts).collect();
            let mut out = Vec::new();
            html::write_html_kinds(&pairs, open, target.as_deref(), &mut out)
                .map_err(|e| e.to_string())?;
            Ok(out)
        })
        .map_err(value_error)?;
    String::from_utf8(bytes).map_err(value_error)
}

/// Refuse a `[layers, heads, queries, keys]` shape with more weights than attnviz draws, before
/// anything is copied (the same check and words as for a file).
#[pyfunction]
fn check_size(name: &str, shape: Vec<usize>) -> PyResult<()> {
    import::check_size(name, &shape).map_err(import_error)
}

/// The attnviz version this module was built from.
#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyAttention>()?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(induction, m)?)?;
    m.add_function(wrap_pyfunction!(from_arrays, m)?)?;
    m.add_function(wrap_pyfunction!(check_image_size, m)?)?;
    m.add_function(wrap_pyfunction!(read, m)?)?;
    m.add_function(wrap_pyfunction!(merge, m)?)?;
    m.add_function(wrap_pyfunction!(html_kinds, m)?)?;
    m.add_function(wrap_pyfunction!(clear_cache, m)?)?;
    m.add_function(wrap_pyfunction!(check_size, m)?)?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    Ok(())
}
