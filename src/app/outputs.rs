//! The outputs of a single run (or of `attnviz render`): the view the flags ask for, its
//! analyses, then every file (JSON, PNG/SVG, HTML, the report folder) and the terminal views.

use std::borrow::Cow;
use std::io::{self, IsTerminal, Write};
use std::mem::ManuallyDrop;
use std::path::Path;

use attnviz::analysis::detectors::Induction;
use attnviz::analysis::{self, Analysis, HeadStats, StatsSection};
use attnviz::attention::{Attention, AttentionSet, HeadSel, Selection};
use attnviz::output::{write_output, StagedFolder};
use attnviz::render::html::{
    alignment_statistics, induction_statistic, report_analysis, statistics_unit,
    write_html_kinds_file, HtmlOptions,
};
use attnviz::render::image::{self, Figure, FigureSpec, ImageError, ImageOptions};
use attnviz::render::json::{
    json_sections, write_set_json, JsonOptions, KindSections, MatrixSection,
};
use attnviz::render::stats_table::{token_names, write_stats_table, StatsTableOptions};
use attnviz::render::terminal::{write_matrix_view, write_view, MatrixText, TerminalOptions};

use super::flows::{note, Error};
use super::plan::{Single, REPORT_HTML, REPORT_JSON};
use super::words;

/// What a run measured beyond the attention, for the outputs that show it (none when the
/// attention was read from a file).
#[derive(Clone, Copy, Default)]
pub(super) struct FromModel<'a> {
    /// JSON sections of the run (`logit_lens`).
    pub sections: &'a [(&'static str, serde_json::Value)],
    /// The model's head detector probe, when it was run: it joins the statistics of its
    /// self-attention.
    pub induction: Option<&'a Induction>,
    /// The logit lens, for the HTML report's lens view.
    pub lens: Option<&'a attnviz::analysis::LogitLens>,
    /// ALTI of the primary value's tokens (`--alti`).
    pub alti: Option<&'a attnviz::analysis::Alti>,
    /// Value zeroing of the primary value's tokens (`--value-zeroing`).
    pub value_zeroing: Option<&'a attnviz::analysis::ValueZeroing>,
    /// Per-head direct logit attribution (`--attribution`), for the report's heads view.
    pub head_attribution: Option<&'a attnviz::analysis::HeadAttribution>,
    /// Head ablation (`--ablate`), for the report's heads view.
    pub head_ablation: Option<&'a attnviz::analysis::HeadAblation>,
}

/// ALTI mapped into the view's units: through each layer, and of each layer alone.
struct AltiView {
    aggregated: Vec<Vec<f32>>,
    per_layer: Vec<Vec<f32>>,
}

/// Write every output `plan` asks for from the token-level attention `tokens` (one value, or an
/// encoder–decoder's three): the view (`--words`, `--no-special`), its analyses, the files and
/// the terminal views, of the kind `--kind` picks where an output shows one. `selection` was
/// checked against that kind; `every_layer`: whether every layer was captured (else there is no
/// rollout). `settings` go into the report's "About" panel; `from_model`, what the run measured
/// beyond the attention.
pub(super) fn write_outputs(
    plan: &Single,
    tokens: &AttentionSet,
    selection: Selection,
    every_layer: bool,
    settings: Vec<(String, String)>,
    from_model: &FromModel<'_>,
) -> Result<(), Error> {
    let FromModel {
        sections: run_sections,
        induction,
        lens,
        alti,
        head_attribution,
        head_ablation,
        value_zeroing,
    } = *from_model;
    let value_zeroing = value_zeroing.filter(|_| !tokens.is_encoder_decoder());
    // ALTI reads the primary value's own tokens (an encoder–decoder has none).
    let alti = alti.filter(|_| !tokens.is_encoder_decoder());
    // The probe scores a model's self-attention; an encoder–decoder's kinds get none.
    let induction = induction.filter(|_| !tokens.is_encoder_decoder());
    let Selection { layer, head } = selection;
    // The kind the terminal view, the table and the images show (--kind; default: the run's
    // primary one, cross-attention for an encoder–decoder), and the layer/head selection,
    // checked against that kind's own layers and heads.
    let shown_kind = tokens
        .get(plan.kind)
        .map_err(|e| Error::Usage(words::kind(&e)))?
        .kind;
    let shown_index = tokens
        .kinds()
        .iter()
        .position(|&k| k == shown_kind)
        .expect("the kind was found");
    let token_att = tokens.kind(shown_kind).expect("the kind was found");
    // --query ROW,COL off the grid is refused before anything is written, whichever outputs
    // were asked for (the HTML report and JSON too, not only the pictures).
    if let (Some(_), attnviz::render::image::picture::Query::Patch(..)) =
        (&token_att.image, plan.query)
    {
        attnviz::render::image::picture::query_unit(token_att, plan.query)?;
    }
    // --query (or a rollout's fusion) on `render` of a file without a picture.
    if token_att.image.is_none()
        && (plan.query != attnviz::render::image::picture::Query::Cls
            || plan.image_rollout.is_some())
    {
        return Err(Error::Usage(
            "--query, --head-fusion and --discard-ratio draw on a picture, and this attention has none (it is not an image run's JSON export); drop them"
                .into(),
        ));
    }
    // --query pool on a model without an attention-pooling head, likewise.
    if token_att.image.is_some() {
        attnviz::render::image::picture::pooling_of(token_att, plan.query)?;
    }

    // The view every output shows (word level and/or special tokens excluded), and the analyses
    // the requested outputs need, each computed once per kind.
    let view_opts = plan.view;
    let needs_rollout = plan.report.is_some()
        || !plan.json_include.is_empty()
        || (plan.figure == Figure::Rollout && (plan.png.is_some() || plan.svg.is_some()));
    let shown = ManuallyDrop::new(analysis::view_set(tokens, view_opts)?);
    let kept = ManuallyDrop::new(needs_rollout.then(|| {
        tokens
            .iter()
            .zip(shown.iter())
            .map(|(t, v)| Analysis::of_view(t, v, view_opts))
            .collect::<Vec<Analysis>>()
    }));
    let analyses: &Option<Vec<Analysis>> = &kept;
    let needs_stats = plan.json.is_some() || plan.html_report() || plan.stats;
    let stats: Vec<Cow<'_, [Vec<HeadStats>]>> = match &analyses {
        Some(all) => all
            .iter()
            .map(|a| Cow::Borrowed(a.stats.as_slice()))
            .collect(),
        None if needs_stats => shown
            .iter()
            .map(|v| Cow::Owned(analysis::head_stats(v)))
            .collect(),
        None => shown.iter().map(|_| Cow::Borrowed(&[][..])).collect(),
    };
    let att = shown.iter().nth(shown_index).expect("one view per kind");
    let rollout = analyses
        .as_ref()
        .filter(|_| every_layer)
        .and_then(|a| a[shown_index].rollout.get(layer))
        .filter(|m| !m.is_empty())
        .map(Vec::as_slice);
    let zeroing_view = value_zeroing.map(|a| {
        let primary = tokens.primary();
        AltiView {
            aggregated: analysis::map_to_view(primary, a.aggregated.clone(), view_opts),
            per_layer: analysis::map_to_view(primary, a.per_layer.clone(), view_opts),
        }
    });
    let alti_view = alti.map(|a| {
        let primary = tokens.primary();
        AltiView {
            aggregated: analysis::map_to_view(primary, a.aggregated.clone(), view_opts),
            per_layer: analysis::map_to_view(primary, a.per_layer.clone(), view_opts),
        }
    });
    if plan.figure == Figure::Rollout
        && (plan.png.is_some() || plan.svg.is_some())
        && rollout.is_none()
    {
        return Err(Error::Usage(format!(
            "--figure rollout follows the residual stream through one side's own units; {} \
             attention has none: choose --kind encoder or decoder, or another --figure",
            shown_kind.as_str()
        )));
    }

    let outputs = Outputs {
        stats: &stats[shown_index],
        set: &shown,
        all_stats: stats.iter().map(|s| &**s).collect(),
        analyses: analyses.as_deref(),
        every_layer,
        include: &plan.json_include,
        run_sections,
        json: plan.json_format,
        image: plan.image,
        induction,
        alti: alti_view.as_ref(),
        value_zeroing: zeroing_view.as_ref(),
    };
    if let Some(path) = &plan.json {
        outputs.json(path)?;
    }
    // The lens figure is drawn from the run's lens (`flows::lens_outputs`), not from here.
    let lens_figure = matches!(
        plan.figure,
        Figure::Lens | Figure::Attribution | Figure::Ablation
    );
    if lens_figure {
    } else if att.image.is_some() && (plan.png.is_some() || plan.svg.is_some()) {
        use attnviz::render::image::picture::{self, PictureSpec};
        // --head-fusion / --discard-ratio: vit-explain's rollout in place of the plain one.
        let fused = match (plan.figure, plan.image_rollout) {
            (Figure::Rollout, Some((fusion, ratio))) if every_layer => Some(
                attnviz::analysis::fused_rollout(att, fusion, ratio).map_err(|e| {
                    ImageError::Draw(attnviz::render::image::DrawError(e.to_string()))
                })?,
            ),
            _ => None,
        };
        let spec = match plan.figure {
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
                fusion: plan.image_rollout,
            },
            Figure::Alti
            | Figure::ValueZeroing
            | Figure::Lens
            | Figure::Attribution
            | Figure::Ablation => return Err(ImageError::LensNotAttention.into()),
        };
        if let Some(path) = &plan.png {
            picture::write_png(att, &spec, plan.query, &outputs.image, path)?;
        }
        if let Some(path) = &plan.svg {
            picture::write_svg(att, &spec, plan.query, &outputs.image, path)?;
        }
    } else if plan.png.is_some() || plan.svg.is_some() {
        let figure = match (plan.figure, &alti_view) {
            (Figure::ValueZeroing, _) => {
                let values = zeroing_view
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
            _ => FigureSpec::of(plan.figure, layer, head, rollout)?,
        };
        if let Some(path) = &plan.png {
            image::write_png(att, &figure, &outputs.image, path)?;
        }
        if let Some(path) = &plan.svg {
            image::write_svg(att, &figure, &outputs.image, path)?;
        }
    }
    // The report gets the token-level attention (and rollout): the page merges words and hides
    // special tokens itself, reversibly. An encoder–decoder's report holds all three kinds,
    // each at the selection (or, out of its range, its last layer), opening on the --kind one.
    let html: Vec<HtmlOptions> = if plan.html_report() {
        tokens
            .iter()
            .enumerate()
            .map(|(i, kind_att)| {
                let kind_selection = if i == shown_index {
                    selection
                } else {
                    plan.selection_of(&kind_att.model, kind_att.kind)
                        .unwrap_or_else(|_| {
                            Selection::new(kind_att.layers().saturating_sub(1), HeadSel::Mean)
                        })
                };
                let token_rollout = match &analyses {
                    _ if !every_layer || !kind_att.is_square() => Cow::Owned(Vec::new()),
                    Some(a) if view_opts == analysis::ViewOptions::default() => {
                        Cow::Borrowed(&a[i].rollout)
                    }
                    _ => Cow::Owned(analysis::rollout(kind_att)),
                };
                let mut opts = html_options(
                    plan,
                    kind_att,
                    kind_selection,
                    &stats[i],
                    &token_rollout,
                    settings.clone(),
                );
                // Cross-attention's alignment figures lead its statistics.
                let view_att = shown.iter().nth(i).expect("one view per kind");
                let align = match analyses.as_ref().and_then(|a| a[i].alignment.clone()) {
                    Some(a) => Some(a),
                    None => analysis::alignment_stats(view_att),
                };
                if let Some(align) = align {
                    let unit = statistics_unit(kind_att, plan.view);
                    let mut all = alignment_statistics(&align, &unit);
                    all.append(&mut opts.analysis.stats);
                    opts.analysis.stats = all;
                }
                if let Some(probe) = induction {
                    opts.analysis
                        .stats
                        .push(induction_statistic(probe, kind_att.layer_numbers()));
                }
                // The lens reads the primary value's tokens (a decoder's, an encoder's).
                // A report asked for with the lens opens on it.
                if i == 0 && !tokens.is_encoder_decoder() && lens.is_some() {
                    opts.analysis.lens = lens.cloned();
                    opts.view = attnviz::render::html::View::Lens;
                }
                // Head attribution and ablation read the primary value's last position; a
                // report asked for with them (and not the lens) opens on the heads view.
                if i == 0
                    && !tokens.is_encoder_decoder()
                    && (head_attribution.is_some() || head_ablation.is_some())
                {
                    opts.analysis.head_attribution = head_attribution.cloned();
                    opts.analysis.head_ablation = head_ablation.cloned();
                    if lens.is_none() {
                        opts.view = attnviz::render::html::View::Heads;
                    }
                }
                // ALTI beside rollout in the matrix view, per token (the page merges words and
                // drops special tokens as it does for the attention).
                if let (0, Some(a)) = (i, alti) {
                    opts.analysis
                        .matrices
                        .extend(attnviz::render::html::alti_matrices(a));
                }
                if let (0, Some(v)) = (i, value_zeroing) {
                    opts.analysis
                        .matrices
                        .extend(attnviz::render::html::zeroing_matrices(v));
                }
                opts
            })
            .collect()
    } else {
        Vec::new()
    };
    let html_kinds: Vec<(&Attention, &HtmlOptions)> = tokens.iter().zip(&html).collect();
    if let Some(path) = plan.html.as_ref().filter(|_| !html.is_empty()) {
        write_html_kinds_file(&html_kinds, shown_index, tokens.target(), path)?;
    }
    if let Some(dir) = plan.report.as_ref().filter(|_| !html.is_empty()) {
        // Built aside and moved into place whole: a failure or Ctrl-C leaves no partial folder.
        let staged = StagedFolder::create(dir)?;
        let build = || -> Result<(), Error> {
            outputs.report(staged.staging(), plan, selection)?;
            write_html_kinds_file(
                &html_kinds,
                shown_index,
                tokens.target(),
                &staged.staging().join(REPORT_HTML),
            )?;
            Ok(())
        };
        // Errors name the file in DIR, not in the hidden staging folder.
        build().map_err(|e| match e {
            Error::Output(o) => Error::Output(staged.rename_error(o)),
            Error::Image(ImageError::Output(o)) => {
                Error::Image(ImageError::Output(staged.rename_error(o)))
            }
            other => other,
        })?;
        let written = staged.commit()?;
        note(&format!(
            "wrote {} files into {}",
            written.len(),
            dir.display()
        ));
    }

    if plan.terminal_view && att.image.is_some() {
        let color = plan.color.enabled(io::stdout().is_terminal());
        let view =
            attnviz::render::image::picture::terminal_view(att, layer, head, plan.query, color)?;
        to_stdout(|w| w.write_all(view.as_bytes()))?;
    } else if plan.terminal_view {
        let opts = terminal_options(plan);
        to_stdout(|w| write_view(att, selection, &opts, w))?;
        let through = att.layer_number(layer);
        let matrices = [
            alti_view.as_ref().map(|a| {
                (
                    a,
                    format!(
                        "ALTI (Ferrando et al. 2022) through layer {through}: each row token's \
                         share from each input token, through the values, the residual and the \
                         norms of every layer up to this one (rows sum to 1)"
                    ),
                )
            }),
            zeroing_view.as_ref().map(|a| {
                (
                    a,
                    format!(
                        "Value zeroing (Mohebbi et al. 2023) through layer {through}: how far \
                         each row token's output moves when an input token's value vector is \
                         zeroed, as shares, rolled out through the layers up to this one (rows \
                         sum to 1)"
                    ),
                )
            }),
        ];
        for (view, title) in matrices.into_iter().flatten() {
            let Some(matrix) = view.aggregated.get(layer) else {
                continue;
            };
            let text = MatrixText {
                title,
                axes: "rows: token (after the layer) · columns: input token (its share)"
                    .to_string(),
                caption: "share".to_string(),
                top_heading: "Largest input shares (top {top}):".to_string(),
            };
            to_stdout(|w| {
                writeln!(w)?;
                write_matrix_view(att, matrix, &text, &opts, w)
            })?;
        }
    }
    if plan.stats {
        if plan.stdout_taken {
            // Standard output carries a file (`--json -`): the table goes to standard error.
            let opts = StatsTableOptions {
                stat: plan.stat,
                color: plan.color.enabled(io::stderr().is_terminal()),
                token_names: Some(token_names(token_att)),
                layer_numbers: Some(token_att.layer_numbers().to_vec()),
                induction: induction.map(|p| p.rows_for(token_att.layer_numbers())),
                ..StatsTableOptions::default()
            };
            let res = write_stats_table(outputs.stats, &opts, &mut io::stderr().lock());
            match res {
                Err(e) if e.kind() != io::ErrorKind::BrokenPipe => return Err(Error::Stdout(e)),
                _ => {}
            }
        } else {
            let opts = StatsTableOptions {
                token_names: Some(token_names(token_att)),
                layer_numbers: Some(token_att.layer_numbers().to_vec()),
                induction: induction.map(|p| p.rows_for(token_att.layer_numbers())),
                ..StatsTableOptions::for_stdout(plan.stat, plan.color)
            };
            let blank = plan.terminal_view;
            to_stdout(|w| {
                if blank {
                    writeln!(w)?;
                }
                write_stats_table(outputs.stats, &opts, w)
            })?;
        }
    }
    Ok(())
}

/// The files a run can write, from one encoded input.
struct Outputs<'a> {
    /// The statistics of the value the views show (the `--kind` chosen).
    stats: &'a [Vec<HeadStats>],
    /// Every kind, in the view asked for.
    set: &'a AttentionSet,
    /// The statistics of every kind, in the order of `set`.
    all_stats: Vec<&'a [Vec<HeadStats>]>,
    /// The analyses of every kind, when they were computed (means, rollout).
    analyses: Option<&'a [Analysis]>,
    /// Whether every layer was captured (without, there is no rollout).
    every_layer: bool,
    /// Optional JSON sections (`--json-include`).
    include: &'a [attnviz::render::json::JsonSection],
    /// Sections of the whole run (the logit lens), written beside `stats` of a single-kind
    /// document.
    run_sections: &'a [(&'static str, serde_json::Value)],
    json: JsonOptions,
    image: ImageOptions,
    /// The model's induction probe, for the JSON's `stats.induction`.
    induction: Option<&'a Induction>,
    /// ALTI in the view's units (`--alti`), for the JSON's `alti` sections.
    alti: Option<&'a AltiView>,
    /// Value zeroing in the view's units, for the JSON's `value_zeroing` sections.
    value_zeroing: Option<&'a AltiView>,
}

impl Outputs<'_> {
    fn json(&self, path: &Path) -> Result<(), Error> {
        let sections: Vec<KindSections> = self
            .set
            .iter()
            .enumerate()
            .map(|(i, att)| {
                let analysis = self.analyses.map(|a| &a[i]);
                let alignment = match analysis {
                    Some(a) => a.alignment.clone(),
                    None => analysis::alignment_stats(att),
                };
                let section = serde_json::to_value(
                    StatsSection::new(self.all_stats[i])
                        .with_alignment(alignment.as_deref())
                        .with_induction(self.induction.cloned()),
                )
                .expect("statistics serialise to JSON");
                // Cross-attention has no rollout: its section is left out, not written empty.
                let matrices = json_sections(self.include, analysis)
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|m| m.layers.iter().all(|l| !l.is_empty()))
                    .collect();
                let mut extra = vec![("stats", section)];
                if !self.set.is_encoder_decoder() {
                    extra.extend(self.run_sections.iter().cloned());
                }
                let mut matrices: Vec<_> = matrices;
                if let (0, Some(a)) = (i, self.alti) {
                    matrices.push(MatrixSection {
                        name: "alti",
                        layers: &a.aggregated,
                    });
                    matrices.push(MatrixSection {
                        name: "alti_per_layer",
                        layers: &a.per_layer,
                    });
                }
                if let (0, Some(v)) = (i, self.value_zeroing) {
                    matrices.push(MatrixSection {
                        name: "value_zeroing",
                        layers: &v.aggregated,
                    });
                    matrices.push(MatrixSection {
                        name: "value_zeroing_per_layer",
                        layers: &v.per_layer,
                    });
                }
                KindSections { extra, matrices }
            })
            .collect();
        write_output(path, |w| write_set_json(self.set, &sections, self.json, w))?;
        Ok(())
    }

    /// The JSON export and every kind of figure as PNG and SVG, in one (staging) folder: the
    /// figures of the one attention of most models (`head.png`, …), of each kind of an
    /// encoder–decoder (`cross-head.png`, `encoder-head.png`, …; each at the selection, or its
    /// last layer and the head mean where the selection is out of its range).
    fn report(&self, dir: &Path, plan: &Single, selection: Selection) -> Result<(), Error> {
        self.json(&dir.join(REPORT_JSON))?;
        let several = self.set.is_encoder_decoder();
        for (i, att) in self.set.iter().enumerate() {
            let (prefix, selection) = if several {
                (
                    format!("{}-", att.kind.as_str()),
                    plan.selection_of(&att.model, att.kind).unwrap_or_else(|_| {
                        Selection::new(att.layers().saturating_sub(1), HeadSel::Mean)
                    }),
                )
            } else {
                (String::new(), selection)
            };
            let Selection { layer, head } = selection;
            let rollout = self
                .analyses
                .filter(|_| self.every_layer)
                .and_then(|a| a[i].rollout.get(layer))
                .filter(|m| !m.is_empty())
                .map(Vec::as_slice);
            // With `--head mean` the mean has its own figure: the head figure shows the layer's
            // most focused head (lowest mean entropy, sinks left out) instead, and says so, and
            // how it was picked, in its title.
            let focused = (head == HeadSel::Mean)
                .then(|| analysis::most_focused_head(self.all_stats[i], layer))
                .flatten();
            for (name, figure) in FigureSpec::all(layer, head, rollout) {
                let figure = match (name, focused) {
                    ("head", Some((h, how))) => FigureSpec::Matrix {
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
                    },
                    _ => figure,
                };
                image::write_png(
                    att,
                    &figure,
                    &self.image,
                    &dir.join(format!("{prefix}{name}.png")),
                )?;
                image::write_svg(
                    att,
                    &figure,
                    &self.image,
                    &dir.join(format!("{prefix}{name}.svg")),
                )?;
            }
        }
        Ok(())
    }
}

/// Report options from the command line. The report gets the token-level attention and opens on
/// the `--words` / `--no-special` view, which the page can undo; statistics are those of that view.
fn html_options(
    plan: &Single,
    att: &Attention,
    selection: Selection,
    stats: &[Vec<HeadStats>],
    rollout: &[Vec<f32>],
    mut settings: Vec<(String, String)>,
) -> HtmlOptions {
    let precision =
        plan.html_precision
            .resolve(att.layers(), att.heads(), att.n_queries(), att.n_keys());
    settings.push((
        "statistics computed on".to_string(),
        statistics_unit(att, plan.view),
    ));
    HtmlOptions {
        neuron: plan.neuron,
        precision,
        layer: selection.layer,
        head: match selection.head {
            HeadSel::Index(h) => h,
            HeadSel::Mean => 0,
        },
        hide_special: plan.view.no_special,
        words: plan.view.words,
        raw_tokens: plan.raw_tokens,
        settings,
        analysis: report_analysis(att, plan.view, stats, rollout),
        // A vision model's report opens on the picture, at --query (CLS by default).
        view: if att.image.is_some() {
            attnviz::render::html::View::Image
        } else {
            attnviz::render::html::View::Head
        },
        query: image_query(plan, att),
        ..HtmlOptions::default()
    }
}

/// The token the image view draws first: `--query ROW,COL`, or the class token (`None`, where
/// the model has none: the page picks the centre patch).
fn image_query(plan: &Single, att: &Attention) -> Option<usize> {
    use attnviz::attention::image::Cell;
    use attnviz::render::image::picture::{query_unit, Query};
    let image = att.image.as_deref()?;
    if plan.query == Query::Cls && !image.cells.contains(&Cell::Class) {
        return None;
    }
    query_unit(att, plan.query).ok()
}

/// Write to standard output; a reader that stops early (`| head`) is not an error.
pub(super) fn to_stdout(write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<(), Error> {
    let stdout = io::stdout();
    let mut out = stdout.lock();
    match write(&mut out).and_then(|_| out.flush()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(Error::Stdout(e)),
        _ => Ok(()),
    }
}

fn terminal_options(plan: &Single) -> TerminalOptions {
    let is_tty = io::stdout().is_terminal();
    let color = plan.color.enabled(is_tty);
    let width = terminal_size::terminal_size()
        .map(|(w, _)| w.0 as usize)
        .filter(|_| is_tty)
        .or_else(|| std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok()))
        .unwrap_or(80);
    TerminalOptions {
        color,
        width,
        top: plan.top,
        raw_tokens: plan.raw_tokens,
        ..TerminalOptions::default()
    }
}
