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

/// What [`write()`] tells its caller as it goes.
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
pub(super) fn shown_kind(
    plan: &Plan,
    set: &AttentionSet,
) -> Result<(usize, Selection), ReportError> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::fixtures;
    use crate::render::image::picture::Query;
    use crate::report::Files;

    /// Writes into vectors; counts the notes.
    fn write_to(plan: &Plan, set: &AttentionSet) -> (Result<(), ReportError>, Vec<u8>, usize) {
        let (mut out, mut side, mut notes) = (Vec::new(), Vec::new(), 0);
        let measured = Measured::default();
        let run = Finished {
            set,
            measured: &measured,
            every_layer: true,
            settings: Vec::new(),
            model_name: "m".into(),
        };
        let mut sink = Sink {
            out: &mut out,
            side: &mut side,
            note: &mut |_| notes += 1,
        };
        let res = write(plan, &run, &mut sink).map(|_| ());
        (res, out, notes)
    }

    /// Every file a plan names, in `dir`.
    fn files_in(dir: &Path) -> Files {
        Files {
            json: Some(dir.join("a.json")),
            png: Some(dir.join("a.png")),
            svg: Some(dir.join("a.svg")),
            html: Some(dir.join("a.html")),
            report: Some(dir.join("rep")),
        }
    }

    #[test]
    fn a_refused_plan_writes_nothing_and_prints_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let text = AttentionSet::single(fixtures::synthetic(&["[CLS]", "a", "b", "[SEP]"], 2, 2));
        let picture = AttentionSet::single(fixtures::with_picture("cat.png"));
        let plan = |query, kind| Plan {
            files: files_in(dir.path()),
            figure: crate::report::FigurePlan {
                query,
                ..Default::default()
            },
            kind,
            terminal: crate::report::TerminalPlan {
                view: Some(crate::report::TerminalView {
                    color: false,
                    width: 80,
                    top: 3,
                    raw_tokens: false,
                    expand_pictures: false,
                }),
                ..Default::default()
            },
            ..Plan::default()
        };
        let cases = [
            // A patch of a picture the attention does not have.
            (plan(Query::Patch(0, 0), None), &text, "no picture"),
            // A patch off the picture's 2 × 3 grid.
            (plan(Query::Patch(5, 0), None), &picture, "off the grid"),
            // A pooled query without a pooling head.
            (plan(Query::Pool, None), &picture, "no pooling head"),
            // A kind the run does not hold.
            (
                plan(Query::Cls, Some(crate::attention::AttentionKind::Cross)),
                &text,
                "no such kind",
            ),
        ];
        for (plan, set, what) in cases {
            let (res, out, notes) = write_to(&plan, set);
            assert!(res.is_err(), "{what}: accepted");
            assert!(plan.check(set).is_err(), "{what}: check accepts it");
            assert!(out.is_empty() && notes == 0, "{what}: printed");
            let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
            assert!(left.is_empty(), "{what}: left {left:?}");
        }
        // The same plan with the class token writes every file of both.
        for set in [&text, &picture] {
            let (res, out, notes) = write_to(&plan(Query::Cls, None), set);
            res.unwrap();
            assert!(!out.is_empty() && notes == 1);
            for f in ["a.json", "a.png", "a.svg", "a.html", "rep/report.html"] {
                assert!(dir.path().join(f).is_file(), "{f}");
            }
            std::fs::remove_dir_all(dir.path().join("rep")).unwrap();
        }
    }

    #[test]
    fn the_json_export_is_the_one_write_json_gives() {
        // What corpus mode and Python write through `write_json` is the file `write` writes.
        let dir = tempfile::tempdir().unwrap();
        let set = fixtures::encoder_decoder(&["a", "b", "c"], &["x", "y"], 2, 3, 2, 2);
        let plan = Plan {
            files: Files {
                json: Some(dir.path().join("a.json")),
                ..Files::default()
            },
            json: crate::report::JsonPlan {
                include: vec![crate::render::json::JsonSection::Means],
                ..Default::default()
            },
            ..Plan::default()
        };
        write_to(&plan, &set).0.unwrap();
        let measured = Measured::default();
        let run = Finished {
            set: &set,
            measured: &measured,
            every_layer: true,
            settings: Vec::new(),
            model_name: "m".into(),
        };
        let analysed = analyse(&plan, &run).unwrap();
        let mut mine = Vec::new();
        write_json(&plan, &run, &analysed, &mut mine).unwrap();
        assert_eq!(std::fs::read(dir.path().join("a.json")).unwrap(), mine);
        assert!(String::from_utf8(mine).unwrap().contains("\"means\""));
    }
}
