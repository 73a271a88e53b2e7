//! [`write`]: the one function from a finished run to its outputs.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::attention::{Attention, AttentionSet, Selection};
use crate::output::{write_output, StagedFolder};
use crate::render::html::{write_html_kinds_file, HtmlOptions};
use crate::render::image::{Figure, ImageError};

use super::{analyse, figures, html_kinds, terminal, write_json, Analysed, Measured, Plan};
use super::{ReportError, REPORT_HTML, REPORT_JSON};

/// A finished run, as its outputs need it.
pub struct Finished<'a> {
    /// Every attention of the run, token level: one value, or an encoder–decoder's three (as
    /// the outputs draw them: weighted, when the run was).
    pub set: &'a AttentionSet,
    /// What the run measured beyond the attention.
    pub measured: &'a Measured,
    /// Whether every layer was captured (without, there is no rollout).
    pub every_layer: bool,
    /// What the report's "About" panel lists (the model, its revision, the run's settings).
    pub settings: Vec<(String, String)>,
    /// The model's name, for the titles of the lens, attribution and ablation figures.
    pub model_name: String,
}

/// Where the text of a run goes.
pub struct Sink<'a> {
    /// Standard output: the terminal view and the tables.
    pub out: &'a mut dyn Write,
    /// Where the tables go when standard output carries a file (standard error).
    pub side: &'a mut dyn Write,
    /// Told what was written, as it is.
    pub note: &'a mut dyn FnMut(Note),
}

/// What [`write`] tells its caller as it goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Note {
    /// A report folder was written, holding this many files.
    WroteFolder {
        /// How many files it holds.
        files: usize,
        /// The folder.
        dir: PathBuf,
    },
}

/// The index in `set` of the kind the plan shows, and the selection checked against it.
pub(super) fn shown_kind(plan: &Plan, set: &AttentionSet) -> Result<(usize, Selection), ReportError> {
    let att = set.get(plan.kind)?;
    let index = set
        .kinds()
        .iter()
        .position(|&k| k == att.kind)
        .expect("the kind was found");
    Ok((index, plan.choose.for_attention(att)?))
}

/// Write every output `plan` asks for of `run`: [`Plan::check`] first, then the view and the
/// analyses its outputs need, each computed once per kind; then the JSON export, the figure,
/// the HTML report and the report folder; then the terminal view and the tables into `sink`;
/// then the figures and tables of what the run measured beyond the attention. Returns the
/// analyses (a caller about to exit may leave them for the system to reclaim, a caller that
/// keeps statistics reads them there).
pub fn write<'a>(
    plan: &Plan,
    run: &Finished<'a>,
    sink: &mut Sink<'_>,
) -> Result<Analysed<'a>, ReportError> {
    plan.check(run.set)?;
    let (index, selection) = shown_kind(plan, run.set)?;
    let analysed = analyse(plan, run)?;
    if plan.figure.figure == Figure::Rollout
        && plan.figures()
        && figures::rollout_of(run, &analysed, index, selection.layer).is_none()
    {
        return Err(ReportError::RolloutWithoutOwnUnits {
            kind: run.set.kinds()[index],
        });
    }
    if let Some(path) = &plan.files.json {
        write_output(path, |w| write_json(plan, run, &analysed, w))?;
    }
    figures::figure(plan, run, &analysed, index, selection)?;
    if plan.html_report() {
        let (html, open) = html_kinds(plan, run, &analysed)?;
        let kinds: Vec<(&Attention, &HtmlOptions)> = run.set.iter().zip(&html).collect();
        if let Some(path) = &plan.files.html {
            write_html_kinds_file(&kinds, open, run.set.target(), path)?;
        }
        if let Some(dir) = &plan.files.report {
            let files = folder(plan, run, &analysed, selection, &kinds, open, dir)?;
            (sink.note)(Note::WroteFolder {
                files,
                dir: dir.clone(),
            });
        }
    }
    terminal::views(plan, run, &analysed, index, selection, sink)?;
    figures::measured_figures(plan, run)?;
    terminal::measured_tables(plan, run, sink)?;
    Ok(analysed)
}

/// The report folder, built aside and moved into place whole (a failure or Ctrl-C leaves no
/// partial folder): the JSON export, every figure and the HTML report. Returns how many files
/// it holds.
fn folder(
    plan: &Plan,
    run: &Finished<'_>,
    analysed: &Analysed<'_>,
    selection: Selection,
    kinds: &[(&Attention, &HtmlOptions)],
    open: usize,
    dir: &Path,
) -> Result<usize, ReportError> {
    let staged = StagedFolder::create(dir)?;
    let build = || -> Result<(), ReportError> {
        let staging = staged.staging();
        write_output(&staging.join(REPORT_JSON), |w| {
            write_json(plan, run, analysed, w)
        })?;
        figures::folder_figures(plan, run, analysed, selection, staging)?;
        write_html_kinds_file(kinds, open, run.set.target(), &staging.join(REPORT_HTML))?;
        Ok(())
    };
    // Errors name the file in DIR, not in the hidden staging folder.
    build().map_err(|e| match e {
        ReportError::Output(o) => ReportError::Output(staged.rename_error(o)),
        ReportError::Image(ImageError::Output(o)) => {
            ReportError::Image(ImageError::Output(staged.rename_error(o)))
        }
        other => other,
    })?;
    Ok(staged.commit()?.len())
}
