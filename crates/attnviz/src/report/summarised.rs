//! [`write_summarised`]: the outputs of a summarised run, whose attention holds no layer and
//! whose [`Measured::summary`](super::Measured::summary) holds what was kept of each: the JSON
//! export (the attention's metadata and units, an empty `attention`, and the `summary`
//! section), the HTML report of the summaries (`render::html::summary`: pooled maps that zoom
//! to the stored tokens, top-key links, statistics) and the terminal view. Figures and a report
//! folder draw matrices, which such a run does not have: [`Plan::check_summarised`] refuses
//! them before the run.

use crate::output::write_output;
use crate::render::html::summary::{write_summary_html, SummaryHtmlOptions};
use crate::render::json::{write_set_json, KindSections};
use crate::render::summary_table::{write_summary_view, SummaryViewOptions};

use super::{Finished, Plan, ReportError, Sink};

/// Write the outputs `plan` asks for of a summarised `run` (see the module's documentation);
/// `layer` is the summarised layer (its index among them) the terminal shows head by head and
/// the HTML report in detail.
pub fn write_summarised(
    plan: &Plan,
    run: &Finished<'_>,
    layer: usize,
    sink: &mut Sink<'_>,
) -> Result<(), ReportError> {
    let Some(summary) = &run.measured.summary else {
        return Err(ReportError::NotSummarised);
    };
    plan.check_summarised()?;
    if let Some(path) = &plan.files.json {
        let section = crate::doc::summary::SummarySection::of(summary);
        write_output(path, |w| {
            let extra = vec![(
                "summary",
                serde_json::to_value(&section).map_err(std::io::Error::from)?,
            )];
            let sections = [KindSections {
                extra,
                matrices: Vec::new(),
            }];
            write_set_json(run.set, &sections, plan.json.format, w)
        })?;
    }
    if let Some(path) = &plan.files.html {
        let head = match plan.choose.head {
            crate::attention::HeadSel::Index(h) => h.min(summary.heads.saturating_sub(1)),
            _ => 0,
        };
        let opts = SummaryHtmlOptions {
            title: None,
            layer,
            head,
            raw_tokens: plan.html.raw_tokens,
            compress: plan.html.compress,
            settings: run.settings.clone(),
        };
        write_output(path, |w| {
            write_summary_html(run.set.primary(), summary, &opts, w)
        })?;
    }
    if let Some(look) = &plan.terminal.view {
        let att = run.set.primary();
        let tokens = att.queries().shown(look.raw_tokens);
        let opts = SummaryViewOptions {
            layer,
            color: look.color,
        };
        super::terminal::to(sink.out, |w| write_summary_view(summary, tokens, opts, w))?;
    }
    Ok(())
}
