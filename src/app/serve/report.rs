//! The HTML report of one run, as `attnviz -m MODEL TEXT --html FILE` writes it with no other
//! flag: token level, every kind of the run, the statistics and (every layer captured) the
//! rollout, opening on the last layer's mean. The page the server sends is these bytes, so
//! "Save report" downloads exactly what the command line would have written.

use std::borrow::Cow;

use attnviz::analysis::{self, ViewOptions};
use attnviz::attention::{Attention, AttentionKind, AttentionSet, HeadSel, Selection};
use attnviz::render::html::{
    alignment_statistics, report_analysis, statistics_unit, write_html_kinds, HtmlOptions,
    PrecisionChoice,
};

/// The report of `set` (a run's token-level attention), with `settings` in its About panel.
pub fn report_html(set: &AttentionSet, settings: &[(String, String)]) -> Result<Vec<u8>, String> {
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
        .map(|(att, view_att)| options(att, view_att, view, settings.to_vec()))
        .collect();
    let kinds: Vec<(&Attention, &HtmlOptions)> = set.iter().zip(&options).collect();
    let mut out = Vec::new();
    write_html_kinds(&kinds, open, set.target(), &mut out).map_err(|e| e.to_string())?;
    Ok(out)
}

/// One kind's options, as the command line's defaults give them.
fn options(
    att: &Attention,
    view_att: &Attention,
    view: ViewOptions,
    mut settings: Vec<(String, String)>,
) -> HtmlOptions {
    let stats = analysis::head_stats(view_att);
    let every_layer = att.layer_numbers().iter().copied().eq(0..att.model.layers);
    let rollout: Cow<'_, [Vec<f32>]> = if every_layer && att.is_square() {
        Cow::Owned(analysis::rollout(att))
    } else {
        Cow::Owned(Vec::new())
    };
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
