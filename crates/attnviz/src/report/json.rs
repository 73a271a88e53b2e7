//! The JSON export of a run (`docs/json.md`).

use std::io::{self, Write};

use crate::analysis::{self, StatsSection};
use crate::attention::AttentionKind;
use crate::render::json::{json_sections, write_set_json, KindSections, MatrixSection};

use super::{Analysed, Finished, Plan};

/// Write `run`'s JSON export as `plan` asks (number format, optional sections) from its
/// analyses `analysed`: every kind in the plan's view with its `stats` (cross-attention's
/// alignment, the model's induction scores), the sections of the whole run of a single-kind
/// document (the logit lens, head attribution and ablation), and the matrix sections.
pub fn write_json(
    plan: &Plan,
    run: &Finished<'_>,
    analysed: &Analysed<'_>,
    w: &mut dyn Write,
) -> io::Result<()> {
    let set = &*analysed.shown;
    let single = !set.is_encoder_decoder();
    // The probe scores a model's self-attention; an encoder–decoder's kinds get none.
    let induction = run.measured.induction.as_ref().filter(|_| single);
    let run_sections = if single {
        run.measured.sections()
    } else {
        Vec::new()
    };
    let sections: Vec<KindSections> = set
        .iter()
        .enumerate()
        .map(|(i, att)| {
            let analysis = analysed.analyses.as_ref().map(|a| &a[i]);
            let alignment = match analysis {
                Some(a) => a.alignment.clone(),
                None => analysis::alignment_stats(att),
            };
            let section = serde_json::to_value(
                StatsSection::new(analysed.stats(i))
                    .with_alignment(alignment.as_deref())
                    .with_induction(induction.cloned()),
            )
            .expect("statistics serialise to JSON");
            // Cross-attention has no rollout: its section is left out, not written empty.
            let mut matrices: Vec<MatrixSection> = json_sections(&plan.json.include, analysis)
                .unwrap_or_default()
                .into_iter()
                .filter(|m| m.layers.iter().all(|l| !l.is_empty()))
                .collect();
            let mut extra = vec![("stats", section)];
            extra.extend(run_sections.iter().cloned());
            if let (AttentionKind::Cross, Some(speech)) = (att.kind, &run.measured.speech) {
                extra.push((
                    "speech",
                    serde_json::to_value(speech).expect("the speech section serialises to JSON"),
                ));
            }
            if let (0, Some(summary)) = (i, &run.measured.summary) {
                extra.push((
                    "summary",
                    serde_json::to_value(crate::doc::summary::SummarySection::of(summary))
                        .expect("the summary section serialises to JSON"),
                ));
            }
            if let (0, Some(a)) = (i, &analysed.alti) {
                matrices.push(MatrixSection {
                    name: "alti",
                    layers: &a.aggregated,
                });
                matrices.push(MatrixSection {
                    name: "alti_per_layer",
                    layers: &a.per_layer,
                });
            }
            if let (0, Some(v)) = (i, &analysed.value_zeroing) {
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
    write_set_json(set, &sections, plan.json.format, w)
}
