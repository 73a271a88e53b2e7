//! The HTML report's options for each kind of a run.

use std::borrow::Cow;

use crate::analysis::{self, HeadStats, ViewOptions};
use crate::attention::{Attention, HeadSel, Selection};
use crate::render::html::{
    alignment_statistics, alti_matrices, induction_statistic, report_analysis, statistics_unit,
    zeroing_matrices, HtmlOptions, View,
};
use crate::render::image::picture::{query_unit, Query};

use super::write::shown_kind;
use super::{Analysed, Finished, Plan, ReportError};

/// The report's options for each kind of `run` (in the order of its set), and the kind it
/// opens on. The report gets the token-level attention (and rollout): the page merges words and
/// hides special tokens itself, reversibly, opening on the plan's view. An encoder–decoder's
/// report holds all three kinds, each at the selection (or, out of its range, its last layer
/// and the head mean), opening on the plan's kind.
pub fn html_kinds(
    plan: &Plan,
    run: &Finished<'_>,
    analysed: &Analysed<'_>,
) -> Result<(Vec<HtmlOptions>, usize), ReportError> {
    let (open, selection) = shown_kind(plan, run.set)?;
    let tokens = run.set;
    let single = !tokens.is_encoder_decoder();
    let measured = run.measured;
    let induction = measured.induction.as_ref().filter(|_| single);
    let kinds = tokens
        .iter()
        .enumerate()
        .map(|(i, kind_att)| {
            let kind_selection = if i == open {
                selection
            } else {
                plan.choose
                    .of(&kind_att.model, kind_att.kind)
                    .unwrap_or_else(|_| {
                        Selection::new(kind_att.layers().saturating_sub(1), HeadSel::Mean)
                    })
            };
            let token_rollout = match &analysed.analyses {
                _ if !run.every_layer || !kind_att.is_square() => Cow::Owned(Vec::new()),
                Some(a) if plan.view == ViewOptions::default() => Cow::Borrowed(&a[i].rollout),
                _ => Cow::Owned(analysis::rollout(kind_att)),
            };
            let mut opts = options(
                plan,
                kind_att,
                kind_selection,
                analysed.stats(i),
                &token_rollout,
                run.settings.clone(),
            );
            // Cross-attention's alignment figures lead its statistics.
            let view_att = analysed.shown.iter().nth(i).expect("one view per kind");
            let align = match analysed
                .analyses
                .as_ref()
                .and_then(|a| a[i].alignment.clone())
            {
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
            // The lens reads the primary value's tokens (a decoder's, an encoder's). A report
            // of a run with the lens opens on it.
            if i == 0 && single && measured.lens.is_some() {
                opts.analysis.lens = measured.lens.clone();
                opts.view = View::Lens;
            }
            // Head attribution and ablation read the primary value's last position; a report
            // of a run with them (and not the lens) opens on the heads view.
            if i == 0
                && single
                && (measured.head_attribution.is_some() || measured.head_ablation.is_some())
            {
                opts.analysis.head_attribution = measured.head_attribution.clone();
                opts.analysis.head_ablation = measured.head_ablation.clone();
                if measured.lens.is_none() {
                    opts.view = View::Heads;
                }
            }
            // ALTI beside rollout in the matrix view, per token (the page merges words and
            // drops special tokens as it does for the attention).
            if let (0, Some(a), true) = (i, &measured.alti, single) {
                opts.analysis.matrices.extend(alti_matrices(a));
            }
            if let (0, Some(v), true) = (i, &measured.value_zeroing, single) {
                opts.analysis.matrices.extend(zeroing_matrices(v));
            }
            opts
        })
        .collect();
    Ok((kinds, open))
}

/// One kind's options. Statistics are those of the plan's view.
fn options(
    plan: &Plan,
    att: &Attention,
    selection: Selection,
    stats: &[Vec<HeadStats>],
    rollout: &[Vec<f32>],
    mut settings: Vec<(String, String)>,
) -> HtmlOptions {
    let precision =
        plan.html
            .precision
            .resolve(att.layers(), att.heads(), att.n_queries(), att.n_keys());
    settings.push((
        "statistics computed on".to_string(),
        statistics_unit(att, plan.view),
    ));
    HtmlOptions {
        neuron: plan.html.neuron,
        precision,
        compress: plan.html.compress,
        layer: selection.layer,
        head: match selection.head {
            HeadSel::Index(h) => h,
            HeadSel::Mean => 0,
        },
        hide_special: plan.view.no_special,
        words: plan.view.words,
        raw_tokens: plan.html.raw_tokens,
        settings,
        analysis: report_analysis(att, plan.view, stats, rollout),
        // A vision model's report opens on the picture, at the plan's query (the class token
        // by default).
        // A vision-language model's report opens on its picture when a token was asked for.
        view: if att.image.is_some()
            || !att.pictures.is_empty()
                && matches!(plan.figure.query, Query::Token(_) | Query::Generated)
        {
            View::Image
        } else {
            View::Head
        },
        query: image_query(plan.figure.query, att),
        ..HtmlOptions::default()
    }
}

/// The token the image view draws first: the query, or the class token (`None`, where the
/// model has none: the page picks the centre patch).
fn image_query(query: Query, att: &Attention) -> Option<usize> {
    use crate::attention::image::Cell;
    if att.image.is_none() && !att.pictures.is_empty() {
        return crate::render::image::on_picture::query_unit(att, query).ok();
    }
    let image = att.image.as_deref()?;
    if query == Query::Cls && !image.cells.contains(&Cell::Class) {
        return None;
    }
    query_unit(att, query).ok()
}
