//! [`Measured`]: what a run measured beyond the attention.

use crate::analysis::detectors::Induction;
use crate::analysis::{Alti, HeadAblation, HeadAttribution, LogitLens, ValueZeroing};

/// What a run measured beyond its attention, for the outputs that show it: the logit lens,
/// ALTI, value zeroing, head attribution and ablation (each when the request asked for it), and
/// the model's induction scores on the head detector's probe. Empty for attention read from a
/// file.
#[derive(Clone, Debug, Default)]
pub struct Measured {
    /// The logit lens of the primary value's tokens.
    pub lens: Option<LogitLens>,
    /// ALTI of the primary value's tokens.
    pub alti: Option<Alti>,
    /// Value zeroing of the primary value's tokens.
    pub value_zeroing: Option<ValueZeroing>,
    /// Per-head direct logit attribution at the last position.
    pub head_attribution: Option<HeadAttribution>,
    /// Head ablation at the last position.
    pub head_ablation: Option<HeadAblation>,
    /// The model's induction scores (its head detector probe): they join the statistics of its
    /// self-attention.
    pub induction: Option<Induction>,
    /// A speech model's recording, transcript and word timings (written with the
    /// cross-attention).
    pub speech: Option<crate::doc::speech::SpeechSection>,
    /// A summarised run's summaries of its layers (its attention holds none).
    pub summary: Option<crate::attention::summary::AttentionSummary>,
}

impl Measured {
    /// The sections of the whole run a single-kind JSON document carries beside `stats`
    /// (`logit_lens`, `head_attribution`, `head_ablation`), in that order.
    pub fn sections(&self) -> Vec<(&'static str, serde_json::Value)> {
        let mut out = Vec::new();
        if let Some(lens) = &self.lens {
            out.push((
                "logit_lens",
                serde_json::to_value(lens).expect("the lens serialises to JSON"),
            ));
        }
        if let Some(a) = &self.head_attribution {
            out.push((
                "head_attribution",
                serde_json::to_value(a).expect("the attribution serialises to JSON"),
            ));
        }
        if let Some(a) = &self.head_ablation {
            out.push((
                "head_ablation",
                serde_json::to_value(a).expect("the ablation serialises to JSON"),
            ));
        }
        out
    }
}
