//! The HTML report of one run, as `attnviz -m MODEL TEXT --html FILE` writes it with no other
//! flag: token level, every kind of the run, the statistics and (every layer captured) the
//! rollout, opening on the last layer's mean (a picture's, `--image FILE --html`'s: on its image
//! view, at the class token). The page the server sends is these bytes, so
//! "Save report" downloads exactly what the command line would have written.

use attnviz::attention::{Attention, AttentionSet};
use attnviz::render::html::{html_kinds_data, write_html_kinds, HtmlOptions, ReportData};
use attnviz::report::{self, Finished, HtmlPlan, Measured, Plan};

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

/// `f` on the kinds of `set` with the report options of the command line's default plan (the
/// library's [`report::html_kinds`], as `--html FILE` alone gets them), opening as it does.
fn with_kinds<T>(
    set: &AttentionSet,
    settings: &[(String, String)],
    compress: bool,
    f: impl FnOnce(&[(&Attention, &HtmlOptions)], usize, Option<&str>) -> std::io::Result<T>,
) -> Result<T, String> {
    let plan = Plan {
        html: HtmlPlan {
            compress,
            ..HtmlPlan::default()
        },
        // The report's statistics, with no file named here.
        keep_stats: true,
        ..Plan::default()
    };
    let run = Finished {
        set,
        measured: &Measured::default(),
        every_layer: set
            .iter()
            .all(|a| a.layer_numbers().iter().copied().eq(0..a.model.layers)),
        settings: settings.to_vec(),
        model_name: set.primary().model.name().to_string(),
    };
    let analysed = report::analyse(&plan, &run).map_err(|e| e.to_string())?;
    let (options, open) = report::html_kinds(&plan, &run, &analysed).map_err(|e| e.to_string())?;
    let kinds: Vec<(&Attention, &HtmlOptions)> = set.iter().zip(&options).collect();
    f(&kinds, open, set.target()).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use attnviz::attention::fixtures;

    /// What `attnviz ... --html FILE` writes through the library's one function.
    fn written(set: &AttentionSet, settings: &[(String, String)]) -> Vec<u8> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.html");
        let plan = Plan {
            files: report::Files {
                html: Some(path.clone()),
                ..report::Files::default()
            },
            ..Plan::default()
        };
        let measured = Measured::default();
        let run = Finished {
            set,
            measured: &measured,
            every_layer: true,
            settings: settings.to_vec(),
            model_name: "m".into(),
        };
        let (mut out, mut side) = (Vec::new(), Vec::new());
        let mut sink = report::Sink {
            out: &mut out,
            side: &mut side,
            note: &mut |_| {},
        };
        report::write(&plan, &run, &mut sink).unwrap();
        std::fs::read(path).unwrap()
    }

    #[test]
    fn the_served_report_is_the_one_the_html_plan_writes() {
        let settings = vec![("model".to_string(), "m".to_string())];
        for set in [
            AttentionSet::single(fixtures::synthetic(&["[CLS]", "a", "b", "[SEP]"], 3, 2)),
            AttentionSet::single(fixtures::with_picture("cat.png")),
            fixtures::encoder_decoder(&["a", "b", "c"], &["x", "y"], 2, 3, 2, 2),
        ] {
            let served = report_html(&set, &settings).unwrap();
            assert!(served.starts_with(b"<!DOCTYPE html>"));
            assert_eq!(served, written(&set, &settings), "{:?}", set.kinds());
        }
    }
}
