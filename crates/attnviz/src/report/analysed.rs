//! [`Analysed`]: the view a plan asks for and the analyses its outputs need, computed once.

use std::borrow::Cow;

use crate::analysis::{self, Analysis, HeadStats};
use crate::attention::AttentionSet;

use super::{Finished, Plan, ReportError};

/// A run's attention in the plan's view, with the analyses the plan's outputs need: each kind's
/// means and rollout when an output shows them, its statistics when one shows them, and ALTI and
/// value zeroing mapped into the view's units.
pub struct Analysed<'a> {
    /// Every kind, in the plan's view.
    pub shown: Cow<'a, AttentionSet>,
    /// Every kind's analysis (statistics, means, rollout), when the outputs need the rollout.
    pub analyses: Option<Vec<Analysis>>,
    /// Every kind's statistics when they were computed without the rest of the analysis.
    own_stats: Vec<Vec<Vec<HeadStats>>>,
    /// ALTI in the view's units (the primary value's; none for an encoder–decoder).
    pub alti: Option<InView>,
    /// Value zeroing in the view's units (likewise).
    pub value_zeroing: Option<InView>,
}

/// A per-token analysis (ALTI, value zeroing) mapped into the view's units.
pub struct InView {
    /// Through each layer.
    pub aggregated: Vec<Vec<f32>>,
    /// Of each layer alone.
    pub per_layer: Vec<Vec<f32>>,
}

impl Analysed<'_> {
    /// The statistics of the `i`-th kind (empty when no output needed them).
    pub fn stats(&self, i: usize) -> &[Vec<HeadStats>] {
        match &self.analyses {
            Some(all) => &all[i].stats,
            None => self.own_stats.get(i).map_or(&[][..], Vec::as_slice),
        }
    }
}

/// The view `plan` asks for of `run`'s attention, and the analyses its outputs need.
pub fn analyse<'a>(plan: &Plan, run: &Finished<'a>) -> Result<Analysed<'a>, ReportError> {
    let tokens = run.set;
    let view = plan.view;
    let shown = analysis::view_set(tokens, view)?;
    let analyses = plan.needs_rollout().then(|| {
        tokens
            .iter()
            .zip(shown.iter())
            .map(|(t, v)| Analysis::of_view(t, v, view))
            .collect::<Vec<Analysis>>()
    });
    let own_stats = if analyses.is_none() && plan.needs_stats() {
        shown.iter().map(analysis::head_stats).collect()
    } else {
        Vec::new()
    };
    // ALTI and value zeroing read the primary value's own tokens (an encoder–decoder has none).
    let in_view = |aggregated: &Vec<Vec<f32>>, per_layer: &Vec<Vec<f32>>| {
        let primary = tokens.primary();
        InView {
            aggregated: analysis::map_to_view(primary, aggregated.clone(), view),
            per_layer: analysis::map_to_view(primary, per_layer.clone(), view),
        }
    };
    let single = !tokens.is_encoder_decoder();
    let m = run.measured;
    Ok(Analysed {
        alti: m
            .alti
            .as_ref()
            .filter(|_| single)
            .map(|a| in_view(&a.aggregated, &a.per_layer)),
        value_zeroing: m
            .value_zeroing
            .as_ref()
            .filter(|_| single)
            .map(|a| in_view(&a.aggregated, &a.per_layer)),
        shown,
        analyses,
        own_stats,
    })
}
