//! The HTML report of one run, as `attnviz -m MODEL TEXT --html FILE` writes it with no other
//! flag: token level, every kind of the run, the statistics and (every layer captured) the
//! rollout, opening on the last layer's mean (a picture's, `--image FILE --html`'s: on its image
//! view, at the class token). The page the server sends is these bytes, so
//! "Save report" downloads exactly what the command line would have written.

use attnviz::analysis::{self, ViewOptions};
use attnviz::attention::{Attention, AttentionKind, AttentionSet, HeadSel, Selection};
use attnviz::render::html::{
    alignment_statistics, html_kinds_data, report_analysis, statistics_unit, write_html_kinds,
    HtmlOptions, PrecisionChoice, ReportData, View,
};

/// The report of `set` (a run's token-level attention), with `settings` in its About panel.
pub fn report_html(set: &AttentionSet, settings: &[(String, String)]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    with_kinds(set, settings, true, |kinds, open, target| {
        write_html_kinds(kinds, open, target, &mut out)
    })?;
    Ok(out)
}

/// What a frame already showing a report of the same shell needs to draw this one in place:
/// [`report_html`]'s metadata and payload, the payload not compressed (it travels on loopback,
/// and gzip is most of the server's own time on a longer input).
pub fn report_data(
    set: &AttentionSet,
    settings: &[(String, String)],
) -> Result<ReportData, String> {
    // On one of rayon's threads: the statistics, the rollout and the payload each go
    // parallel, and from a thread outside the pool every one of them would wait for a
    // handover and a wake-up.
    rayon::scope(|_| with_kinds(set, settings, false, html_kinds_data))
}

/// `f` on the kinds of `set` with the command line's default options, opening as it does.
fn with_kinds<T>(
    set: &AttentionSet,
    settings: &[(String, String)],
    compress: bool,
    f: impl FnOnce(&[(&Attention, &HtmlOptions)], usize, Option<&str>) -> std::io::Result<T>,
) -> Result<T, String> {
    let view = ViewOptions::default();
    let shown = analysis::view_set(set, view).map_err(|e| e.to_string())?;
    let open_kind = set
        .get(None)
        .or_else(|_| set.get(Some(AttentionKind::Cross)))
        .map_err(|e| e.to_string())?
        .kind;
    let open = set
        .kinds()
        .iter()
        .position(|&k| k == open_kind)
        .unwrap_or(0);
    let options: Vec<HtmlOptions> = set
        .iter()
        .zip(shown.iter())
        .map(|(att, view_att)| HtmlOptions {
            compress,
            ..options(att, view_att, view, settings.to_vec())
        })
        .collect();
    let kinds: Vec<(&Attention, &HtmlOptions)> = set.iter().zip(&options).collect();
    f(&kinds, open, set.target()).map_err(|e| e.to_string())
}

/// One kind's options, as the command line's defaults give them.
fn options(
    att: &Attention,
    view_att: &Attention,
    view: ViewOptions,
    mut settings: Vec<(String, String)>,
) -> HtmlOptions {
    let every_layer = att.layer_numbers().iter().copied().eq(0..att.model.layers);
    // Side by side: the rollout's chain of products is one thread's work.
    let (stats, rollout) = rayon::join(
        || analysis::head_stats(view_att),
        || {
            if every_layer && att.is_square() {
                analysis::rollout(att)
            } else {
                Vec::new()
            }
        },
    );
    let selection = Selection::new(att.layers().saturating_sub(1), HeadSel::Mean);
    let precision = PrecisionChoice::default().resolve(
        att.layers(),
        att.heads(),
        att.n_queries(),
        att.n_keys(),
    );
    settings.push((
        "statistics computed on".to_string(),
        statistics_unit(att, view),
    ));
    let mut opts = HtmlOptions {
        precision,
        layer: selection.layer,
        head: 0,
        settings,
        analysis: report_analysis(att, view, &stats, &rollout),
        // A vision model's report opens on the picture, at its class token (none: the page
        // picks the centre patch), as `--image FILE --html` does.
        view: if att.image.is_some() {
            View::Image
        } else {
            View::Head
        },
        query: class_query(att),
        ..HtmlOptions::default()
    };
    if let Some(align) = analysis::alignment_stats(view_att) {
        let unit = statistics_unit(att, view);
        let mut all = alignment_statistics(&align, &unit);
        all.append(&mut opts.analysis.stats);
        opts.analysis.stats = all;
    }
    opts
}

/// The token a picture's image view draws first: its class token, where it has one.
fn class_query(att: &Attention) -> Option<usize> {
    use attnviz::attention::image::Cell;
    use attnviz::render::image::picture::{query_unit, Query};
    let image = att.image.as_deref()?;
    if !image.cells.contains(&Cell::Class) {
        return None;
    }
    query_unit(att, Query::Cls).ok()
}
