//! The PNG and SVG figures: the one a plan asks for, every figure of a report folder, and the
//! figures of the logit lens and of head attribution and ablation.

use std::path::Path;

use crate::analysis;
use crate::attention::{Attention, AttentionKind, HeadSel, Selection};
use crate::render::image::{self, Figure, FigureSpec, ImageError};

use super::{Analysed, Finished, Plan, ReportError};

/// The figure the plan asks for (`files.png`, `files.svg`) of the shown kind (`index` in the
/// set, at `selection`): a picture's figure drawn over the picture, any other as a matrix,
/// bars or the ALTI / value-zeroing matrix. The lens, attribution and ablation figures are
/// drawn by [`measured_figures`].
pub(super) fn figure(
    plan: &Plan,
    run: &Finished<'_>,
    analysed: &Analysed<'_>,
    index: usize,
    selection: Selection,
) -> Result<(), ReportError> {
    let Selection { layer, head } = selection;
    let fig = &plan.figure;
    let measured_figure = matches!(
        fig.figure,
        Figure::Lens | Figure::Attribution | Figure::Ablation
    );
    if measured_figure || !plan.figures() {
        return Ok(());
    }
    if fig.figure == Figure::Router {
        return router_figure(plan, run, index, layer);
    }
    if fig.figure == Figure::Mixing {
        return mixing_figure(plan, run, index, selection, false);
    }
    let att = analysed.shown.iter().nth(index).expect("one view per kind");
    let rollout = rollout_of(run, analysed, index, layer);
    let (png, svg) = (&plan.files.png, &plan.files.svg);
    if speech_figure(plan, run, index, selection)? {
        return Ok(());
    }
    // A vision-language model's attention is drawn on its picture for a token asked for by
    // number; otherwise as the matrix over the whole sequence.
    let on_picture = !att.pictures.is_empty()
        && matches!(
            fig.query,
            crate::render::image::picture::Query::Token(_)
                | crate::render::image::picture::Query::Generated
        );
    if att.image.is_some() || on_picture {
        use crate::render::image::picture::{self, PictureSpec};
        // A head fusion or discard ratio: vit-explain's rollout in place of the plain one.
        let fused = match (fig.figure, fig.image_rollout) {
            (Figure::Rollout, Some((fusion, ratio))) if run.every_layer => Some(
                analysis::fused_rollout(att, fusion, ratio)
                    .map_err(|e| ImageError::Draw(image::DrawError(e.to_string())))?,
            ),
            _ => None,
        };
        let spec = match fig.figure {
            Figure::Head | Figure::Mean => PictureSpec::Head { layer, head },
            Figure::Layer => PictureSpec::Layer { layer },
            Figure::Model => PictureSpec::Model,
            Figure::Rollout => PictureSpec::Rollout {
                layer,
                matrix: match &fused {
                    Some(f) => f.get(layer).map(Vec::as_slice),
                    None => rollout,
                }
                .ok_or(ImageError::NoRollout)?,
                fusion: fig.image_rollout,
            },
            Figure::Alti
            | Figure::ValueZeroing
            | Figure::Lens
            | Figure::Attribution
            | Figure::Ablation
            | Figure::Router
            | Figure::Mixing => return Err(ImageError::LensNotAttention.into()),
        };
        if let Some(path) = png {
            picture::write_png(att, &spec, fig.query, &fig.image, path)?;
        }
        if let Some(path) = svg {
            picture::write_svg(att, &spec, fig.query, &fig.image, path)?;
        }
        return Ok(());
    }
    let spec = match (fig.figure, &analysed.alti) {
        (Figure::ValueZeroing, _) => {
            let values = analysed
                .value_zeroing
                .as_ref()
                .and_then(|a| a.aggregated.get(layer))
                .ok_or(ImageError::LensNotAttention)?;
            FigureSpec::value_zeroing(att.layer_numbers()[layer], values)
        }
        (Figure::Alti, Some(a)) => {
            let values = a
                .aggregated
                .get(layer)
                .ok_or(ImageError::LensNotAttention)?;
            FigureSpec::alti(att.layer_numbers()[layer], values)
        }
        _ => FigureSpec::of(fig.figure, layer, head, rollout)?,
    };
    if let Some(path) = png {
        image::write_png(att, &spec, &fig.image, path)?;
    }
    if let Some(path) = svg {
        image::write_svg(att, &spec, &fig.image, path)?;
    }
    Ok(())
}

/// A hybrid model's token-mixing figure (`mixing.png` in a report folder `dir`, else the plan's
/// files): the gated delta layers feeding captured layer `selection.layer` of the `index`-th
/// kind (every one where none does), at `selection.head`, its tokens labelled as the
/// token-level attention's. `quiet`: a run without token mixing writes nothing (a report
/// folder) rather than refusing.
fn mixing_figure(
    plan: &Plan,
    run: &Finished<'_>,
    index: usize,
    selection: Selection,
    quiet: bool,
) -> Result<(), ReportError> {
    mixing_files(plan, run, index, selection, quiet, None)
}

/// [`mixing_figure`] into `dir` (`mixing.png`, `mixing.svg`) when given.
fn mixing_files(
    plan: &Plan,
    run: &Finished<'_>,
    index: usize,
    selection: Selection,
    quiet: bool,
    dir: Option<&Path>,
) -> Result<(), ReportError> {
    use crate::render::image::mixing::{self, MixingSpec};
    let att = run.set.iter().nth(index).expect("one value per kind");
    let Some(m) = att.non_softmax.as_ref().and_then(|n| n.mixing.as_deref()) else {
        if quiet {
            return Ok(());
        }
        return Err(ImageError::NoMixing {
            layers: "none".to_string(),
        }
        .into());
    };
    let look = &plan.figure.image;
    let number = att.layer_number(selection.layer);
    let feeding = match crate::render::mixing_table::feeding(m, att.layer_numbers(), number) {
        f if f.is_empty() => m.layer_numbers(),
        f => f,
    };
    let spec = MixingSpec {
        mixing: m,
        layers: &feeding,
        head: selection.head,
        labels: Some(att.queries().shown(look.raw_tokens)),
    };
    let title = format!(
        "Token mixing · layer{} {} (feeding layer {number}) · {}",
        if feeding.len() == 1 { "" } else { "s" },
        crate::attention::layer_list(&feeding),
        run.model_name
    );
    let (png, svg) = match dir {
        Some(dir) => (Some(dir.join("mixing.png")), Some(dir.join("mixing.svg"))),
        None => (plan.files.png.clone(), plan.files.svg.clone()),
    };
    if let Some(path) = png {
        mixing::write_png(&spec, &title, look, &path)?;
    }
    if let Some(path) = svg {
        mixing::write_svg(&spec, &title, look, &path)?;
    }
    Ok(())
}

/// A mixture-of-experts model's router figure at captured layer `layer` of the `index`-th kind,
/// its tokens labelled as the token-level attention's.
fn router_figure(
    plan: &Plan,
    run: &Finished<'_>,
    index: usize,
    layer: usize,
) -> Result<(), ReportError> {
    use crate::render::image::router::{self, RouterSpec};
    let att = run.set.iter().nth(index).expect("one value per kind");
    let r = att.router.as_deref().ok_or(ImageError::NoRouter)?;
    let look = &plan.figure.image;
    let number = att.layer_number(layer);
    let spec = RouterSpec {
        router: r,
        layer: number,
        labels: Some(att.queries().shown(look.raw_tokens)),
    };
    let title = format!("Router · layer {number} · {}", run.model_name);
    if let Some(path) = &plan.files.png {
        router::write_png(&spec, &title, look, path)?;
    }
    if let Some(path) = &plan.files.svg {
        router::write_svg(&spec, &title, look, path)?;
    }
    Ok(())
}

/// A speech run's head figure (the default figure) of its cross-attention or its encoder:
/// the words × time figure over the spectrogram (the alignment heads' mean unless a layer or
/// head was chosen), or the encoder's self-attention pooled into blocks of 200 ms, in place of
/// the matrices over 1,500 frames. Drawn from the run's token-level values, whatever the view
/// (a word's rows are numbered in tokens). Returns whether it drew one.
fn speech_figure(
    plan: &Plan,
    run: &Finished<'_>,
    index: usize,
    selection: Selection,
) -> Result<bool, ReportError> {
    use crate::render::image::speech;
    if run.set.recording().is_none() || !matches!(plan.figure.figure, Figure::Head | Figure::Mean) {
        return Ok(false);
    }
    let att = run.set.iter().nth(index).expect("one value per kind");
    let look = &plan.figure.image;
    let (png, svg) = match att.kind {
        AttentionKind::Cross => {
            let which = speech_heads(plan, selection);
            (
                plan.files
                    .png
                    .as_ref()
                    .map(|_| speech::words_png(att, which, look))
                    .transpose()?,
                plan.files
                    .svg
                    .as_ref()
                    .map(|_| speech::words_svg(att, which, look))
                    .transpose()?,
            )
        }
        AttentionKind::Encoder => {
            let Selection { layer, head } = selection;
            (
                plan.files
                    .png
                    .as_ref()
                    .map(|_| speech::pooled_png(att, layer, head, look))
                    .transpose()?,
                plan.files
                    .svg
                    .as_ref()
                    .map(|_| speech::pooled_svg(att, layer, head, look))
                    .transpose()?,
            )
        }
        _ => return Ok(false),
    };
    if let (Some(path), Some(bytes)) = (&plan.files.png, png) {
        speech::write_file(path, &bytes)?;
    }
    if let (Some(path), Some(text)) = (&plan.files.svg, svg) {
        speech::write_file(path, text.as_bytes())?;
    }
    Ok(true)
}

/// The heads a speech figure of the cross-attention shows: the alignment heads' mean when the
/// plan chose no layer and no head, else the selection.
pub(super) fn speech_heads(
    plan: &Plan,
    selection: Selection,
) -> crate::render::speech::SpeechHeads {
    use crate::render::speech::SpeechHeads;
    if plan.choose.layer.is_none() && plan.choose.head == HeadSel::Mean {
        SpeechHeads::Alignment
    } else {
        SpeechHeads::Head {
            layer: selection.layer,
            head: selection.head,
        }
    }
}

/// The rollout of the `index`-th kind at `layer`, when every layer was captured and the kind
/// has one.
pub(super) fn rollout_of<'b>(
    run: &Finished<'_>,
    analysed: &'b Analysed<'_>,
    index: usize,
    layer: usize,
) -> Option<&'b [f32]> {
    analysed
        .analyses
        .as_ref()
        .filter(|_| run.every_layer)
        .and_then(|a| a[index].rollout.get(layer))
        .filter(|m| !m.is_empty())
        .map(Vec::as_slice)
}

/// Every kind of figure as PNG and SVG into the (staging) folder `dir`: the figures of the one
/// attention of most models (`head.png`, …), of each kind of an encoder–decoder
/// (`cross-head.png`, `encoder-head.png`, …; each at the selection, or its last layer and the
/// head mean where the selection is out of its range).
pub(super) fn folder_figures(
    plan: &Plan,
    run: &Finished<'_>,
    analysed: &Analysed<'_>,
    selection: Selection,
    dir: &Path,
) -> Result<(), ReportError> {
    let set = &*analysed.shown;
    let several = set.is_encoder_decoder();
    for (i, att) in set.iter().enumerate() {
        let (prefix, selection) = if several {
            (
                format!("{}-", att.kind.as_str()),
                plan.choose.of(&att.model, att.kind).unwrap_or_else(|_| {
                    Selection::new(att.layers().saturating_sub(1), HeadSel::Mean)
                }),
            )
        } else {
            (String::new(), selection)
        };
        let Selection { layer, head } = selection;
        let rollout = rollout_of(run, analysed, i, layer);
        // With the head mean selected the mean has its own figure: the head figure shows the
        // layer's most focused head (lowest mean entropy, sinks left out) instead, and says so,
        // and how it was picked, in its title.
        let focused = (head == HeadSel::Mean)
            .then(|| analysis::most_focused_head(analysed.stats(i), layer))
            .flatten();
        for (name, spec) in FigureSpec::all(layer, head, rollout) {
            let spec = match (name, focused) {
                ("head", Some((h, how))) => focused_head(att, layer, h, how),
                _ => spec,
            };
            let look = &plan.figure.image;
            image::write_png(att, &spec, look, &dir.join(format!("{prefix}{name}.png")))?;
            image::write_svg(att, &spec, look, &dir.join(format!("{prefix}{name}.svg")))?;
        }
    }
    // A speech run's own figures: the words over the recording, the encoder pooled.
    if run.set.recording().is_some() {
        use crate::render::image::speech;
        let look = &plan.figure.image;
        for att in run.set.iter() {
            let Ok(sel) = plan.choose.of(&att.model, att.kind) else {
                continue;
            };
            let (stem, png, svg) = match att.kind {
                AttentionKind::Cross => {
                    let which = speech_heads(plan, sel);
                    (
                        "speech",
                        speech::words_png(att, which, look)?,
                        speech::words_svg(att, which, look)?,
                    )
                }
                AttentionKind::Encoder => (
                    "encoder-pooled",
                    speech::pooled_png(att, sel.layer, sel.head, look)?,
                    speech::pooled_svg(att, sel.layer, sel.head, look)?,
                ),
                _ => continue,
            };
            speech::write_file(&dir.join(format!("{stem}.png")), &png)?;
            speech::write_file(&dir.join(format!("{stem}.svg")), svg.as_bytes())?;
        }
    }
    // A hybrid model's token mixing (`mixing.png`, `mixing.svg`): the gated delta layers that
    // feed the selected layer.
    if run.set.iter().next().is_some() {
        mixing_files(plan, run, 0, selection, true, Some(dir))?;
    }
    // A mixture-of-experts model's router (`router.png`, `router.svg`): at the selected layer
    // where it is routed, else at the last routed layer.
    if let Some(att) = run.set.iter().next() {
        if let Some(r) = att.router.as_deref() {
            use crate::render::image::router::{self, RouterSpec};
            let asked = att.layer_number(selection.layer);
            let Some(number) = r.layer(asked).or(r.layers.last()).map(|l| l.layer) else {
                return Ok(());
            };
            let look = &plan.figure.image;
            let spec = RouterSpec {
                router: r,
                layer: number,
                labels: Some(att.queries().shown(look.raw_tokens)),
            };
            let title = format!("Router · layer {number} · {}", run.model_name);
            router::write_png(&spec, &title, look, &dir.join("router.png"))?;
            router::write_svg(&spec, &title, look, &dir.join("router.svg"))?;
        }
    }
    Ok(())
}

fn focused_head<'a>(att: &'a Attention, layer: usize, h: usize, how: &str) -> FigureSpec<'a> {
    FigureSpec::Matrix {
        title: format!(
            "layer {} · head {h} (most focused: {how}{})",
            att.layer_number(layer),
            if att.is_grouped() {
                format!(", kv head {}", att.kv_head()[h])
            } else {
                String::new()
            }
        ),
        values: att.head(layer, h),
        shares: false,
    }
}

/// The figures of what the run measured beyond the attention: the logit lens, head
/// attribution and ablation, when the plan's figure is one of them.
pub(super) fn measured_figures(plan: &Plan, run: &Finished<'_>) -> Result<(), ReportError> {
    use crate::render::image::heads;
    use crate::render::image::lens;
    let (png, svg) = (&plan.files.png, &plan.files.svg);
    let look = &plan.figure.image;
    let name = &run.model_name;
    let m = run.measured;
    match (
        plan.figure.figure,
        &m.head_attribution,
        &m.head_ablation,
        &m.lens,
    ) {
        (Figure::Attribution, Some(a), _, _) => {
            let title = format!("Direct logit attribution per head · {name}");
            if let Some(path) = png {
                heads::write_file(path, &heads::attribution_png(a, &title, look)?)?;
            }
            if let Some(path) = svg {
                let svg = heads::attribution_svg(a, &title, look)?;
                heads::write_file(path, svg.as_bytes())?;
            }
        }
        (Figure::Ablation, _, Some(a), _) => {
            let title = format!("Head ablation · {name}");
            if let Some(path) = png {
                heads::write_file(path, &heads::ablation_png(a, &title, look)?)?;
            }
            if let Some(path) = svg {
                let svg = heads::ablation_svg(a, &title, look)?;
                heads::write_file(path, svg.as_bytes())?;
            }
        }
        (Figure::Lens, _, _, Some(l)) => {
            let title = format!("Logit lens · {name}");
            if let Some(path) = png {
                lens::write_png(l, &title, look, path)?;
            }
            if let Some(path) = svg {
                lens::write_svg(l, &title, look, path)?;
            }
        }
        _ => {}
    }
    Ok(())
}
