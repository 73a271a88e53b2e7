//! Analyses of a captured [`Attention`]: per-head statistics, head means, attention rollout,
//! word-level merging and special-token exclusion. Pure functions of the attention; no model.
//!
//! The usual path (what the CLI does):
//!
//! ```no_run
//! # fn demo(att: &attnviz_core::Attention) -> Result<(), attnviz_analysis::AnalysisError> {
//! use attnviz_analysis::{Analysis, ViewOptions};
//! let opts = ViewOptions { words: true, no_special: false };
//! let (view, analysis) = Analysis::compute_view(att, opts)?;
//! // `view` is the Attention every renderer draws (words here); `analysis` holds its
//! // statistics `[layer][head]`, the per-layer head means and the rollout, all over view's units.
//! # Ok(()) }
//! ```
//!
//! Formulas, conventions and thresholds are documented in `docs/stats.md`.

pub mod compare;
#[cfg(test)]
mod derived_tests;

// The layers below, under the names this crate's code has always used.
use attnviz_core::{attention, choice};
use attnviz_model as model;

mod aggregate;
pub mod alti;
pub mod attribution;
pub mod detectors;
pub mod fused_rollout;
pub mod lens;
mod special;
pub mod stats;
pub mod value_zeroing;
pub mod weighting;
mod words;

use std::borrow::Cow;

use serde::Serialize;

pub use aggregate::{layer_means, rollout};
pub use alti::{alti, Alti};
pub use attribution::{HeadAblation, HeadAttribution};
pub use fused_rollout::{fused_rollout, fused_rollout_of, FusedRolloutError, HeadFusion};
pub use lens::LogitLens;
pub use special::without_special;
pub use stats::{
    alignment_stats, head_stats, most_focused_head, AlignmentStats, HeadLabel, HeadStats,
    KeyClasses, Stat,
};
pub use value_zeroing::ValueZeroing;
pub use weighting::{norm_weights, reweighted, NormWeights, Weighting};
pub use words::{merge_matrices, merge_units, to_words, word_groups, word_label};

use crate::attention::{Attention, AttentionSet, Level};

/// Error from an analysis.
#[derive(Debug, thiserror::Error)]
pub enum AnalysisError {
    /// Excluding special tokens would leave nothing.
    #[error("the input has no tokens besides its special tokens ({names}), so excluding them leaves nothing; keep the special tokens")]
    NothingLeft {
        /// The special tokens, as the views name them (`[CLS]/[SEP]`).
        names: String,
    },
    /// The views of an encoder–decoder's three attentions no longer fit together (a bug, not
    /// an input error: each view treats every side by its own units).
    #[error(transparent)]
    Shape(#[from] crate::attention::ShapeError),
}

/// Which view of the attention to show: word pieces merged into words, and/or special tokens
/// excluded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ViewOptions {
    /// Merge word pieces into words ([`to_words`]).
    pub words: bool,
    /// Drop the special tokens and renormalise the rows ([`without_special`]).
    pub no_special: bool,
}

/// Apply `opts` to `att`. When both are set, special tokens are excluded **first** (each token's
/// row is renormalised over the non-special tokens), and the words are merged after that, so a
/// word's row is exactly the mean of its pieces' renormalised rows. Borrows `att` when there is
/// nothing to do.
pub fn view(att: &Attention, opts: ViewOptions) -> Result<Cow<'_, Attention>, AnalysisError> {
    let mut out = Cow::Borrowed(att);
    if opts.no_special {
        out = Cow::Owned(without_special(&out)?);
    }
    if opts.words {
        out = Cow::Owned(to_words(&out));
    }
    Ok(out)
}

/// Apply `opts` to every value of `set` (see [`view`] and, for how each side of cross-attention
/// follows the encoder's and decoder's units, [`AttentionSet`]). Borrows `set` when there is
/// nothing to do.
pub fn view_set(
    set: &AttentionSet,
    opts: ViewOptions,
) -> Result<Cow<'_, AttentionSet>, AnalysisError> {
    if opts == ViewOptions::default() {
        return Ok(Cow::Borrowed(set));
    }
    Ok(Cow::Owned(
        set.try_map(|att| view(att, opts).map(Cow::into_owned))?,
    ))
}

/// Everything the renderers draw besides the attention itself, over the units of one view.
#[derive(Clone, Debug, PartialEq)]
pub struct Analysis {
    /// Number of units (side of every matrix below).
    pub n: usize,
    /// Per-head statistics, `[layer][head]`.
    pub stats: Vec<Vec<HeadStats>>,
    /// Mean over each layer's heads: `[layer]` → `n × n` row-major (row = query).
    pub layer_means: Vec<Vec<f32>>,
    /// Attention rollout up to and including each layer: `[layer]` → `n × n` row-major
    /// (row = unit after that layer, column = input unit); see [`rollout`]. Empty matrices for
    /// cross-attention, which has no residual path through its own units.
    pub rollout: Vec<Vec<f32>>,
    /// Cross-attention's alignment figures `[layer][head]` ([`alignment_stats`]); `None` for
    /// every other kind.
    pub alignment: Option<Vec<Vec<AlignmentStats>>>,
}

impl Analysis {
    /// Statistics, head means and rollout, all computed on `att`'s own matrices.
    ///
    /// Right for token-level attention with special tokens present. For a word-level or
    /// special-excluded view use [`Analysis::compute_view`], which computes the rollout at token
    /// level (where the identity stands for the residual connection) before mapping it to the view.
    pub fn compute(att: &Attention) -> Analysis {
        Analysis {
            n: att.len(),
            stats: head_stats(att),
            layer_means: layer_means(att),
            rollout: rollout(att),
            alignment: alignment_stats(att),
        }
    }

    /// Build the view `opts` of `att` (see [`view`]) and analyse it: statistics and head means
    /// are computed on the view's matrices; the rollout is computed on `att` and then mapped
    /// through the same steps as the attention (specials dropped and rows renormalised, then words
    /// merged: rows averaged, columns summed).
    pub fn compute_view(
        att: &Attention,
        opts: ViewOptions,
    ) -> Result<(Cow<'_, Attention>, Analysis), AnalysisError> {
        let shown = view(att, opts)?;
        let analysis = Analysis::of_view(att, &shown, opts);
        Ok((shown, analysis))
    }

    /// The analysis of `shown`, the view `opts` of the token-level `att` (as [`view`] made it):
    /// what [`Analysis::compute_view`] returns, for a view built already (each value of an
    /// [`AttentionSet`] after [`view_set`]).
    pub fn of_view(att: &Attention, shown: &Attention, opts: ViewOptions) -> Analysis {
        // Side by side: the rollout's chain of layer products is one thread's work.
        let ((stats, layer_means), rollout) = rayon::join(
            || (head_stats(shown), layer_means(shown)),
            || map_rollout(att, rollout(att), opts),
        );
        Analysis {
            n: shown.len(),
            stats,
            layer_means,
            rollout,
            alignment: alignment_stats(shown),
        }
    }

    /// The `stats` section of the JSON export (see `docs/stats.md`).
    pub fn stats_section(&self) -> StatsSection {
        StatsSection::new(&self.stats).with_alignment(self.alignment.as_deref())
    }
}

/// Map per-layer square matrices over `att`'s token units (attention rollout, ALTI) into the
/// units of `view(att, opts)`, through the same steps as the attention: special tokens' rows and
/// columns dropped and each row renormalised, then words merged (rows averaged, columns summed).
pub fn map_to_view(att: &Attention, per_layer: Vec<Vec<f32>>, opts: ViewOptions) -> Vec<Vec<f32>> {
    map_rollout(att, per_layer, opts)
}

/// Map per-layer matrices over `att`'s units (square: the rollout) into the units of
/// `view(att, opts)`, through the same steps as the attention.
fn map_rollout(att: &Attention, per_layer: Vec<Vec<f32>>, opts: ViewOptions) -> Vec<Vec<f32>> {
    let layers = per_layer.len();
    if per_layer.iter().all(Vec::is_empty) {
        // Nothing to map: cross-attention has no rollout.
        return per_layer;
    }
    let mut units = att.queries().clone();
    let mut stack: Vec<f32> = per_layer.into_iter().flatten().collect();
    if opts.no_special {
        let keep: Vec<usize> = (0..units.len()).filter(|&i| !units.is_special(i)).collect();
        if keep.len() < units.len() {
            let n = units.len();
            stack = special::drop_matrices(&stack, n, n, &keep, &keep);
            units = units.select(&keep);
        }
    }
    if opts.words && att.level != Level::Word {
        let groups = words::word_groups(&units);
        let n = units.len();
        stack = words::merge_matrices(&stack, n, n, &groups, &groups);
        units = words::merge_units(&units, &groups);
    }
    let n2 = units.len() * units.len();
    if n2 == 0 {
        return vec![Vec::new(); layers];
    }
    stack.chunks(n2).map(<[f32]>::to_vec).collect()
}

/// The `stats` section of the JSON export: thresholds, and each statistic as a
/// `[layer][head]` array (so `numpy.array(doc["stats"]["entropy"])` is a layers × heads matrix).
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct StatsSection {
    /// Where the definitions come from.
    pub reference: &'static str,
    /// Label thresholds.
    pub thresholds: Thresholds,
    /// [`HeadStats::entropy`], `[layer][head]`.
    #[schemars(with = "Vec<Vec<Option<f64>>>")]
    pub entropy: Vec<Vec<f64>>,
    /// [`HeadStats::entropy_norm`].
    #[schemars(with = "Vec<Vec<Option<f64>>>")]
    pub entropy_norm: Vec<Vec<f64>>,
    /// [`HeadStats::distance`].
    #[schemars(with = "Vec<Vec<Option<f64>>>")]
    pub distance: Vec<Vec<f64>>,
    /// [`HeadStats::to_start`].
    #[schemars(with = "Vec<Vec<Option<f64>>>")]
    pub to_start: Vec<Vec<f64>>,
    /// [`HeadStats::to_end`].
    #[schemars(with = "Vec<Vec<Option<f64>>>")]
    pub to_end: Vec<Vec<f64>>,
    /// [`HeadStats::to_first`] (NaN, written as null, unless the mask is causal).
    #[schemars(with = "Vec<Vec<Option<f64>>>")]
    pub to_first: Vec<Vec<f64>>,
    /// [`HeadStats::to_punct`].
    #[schemars(with = "Vec<Vec<Option<f64>>>")]
    pub to_punct: Vec<Vec<f64>>,
    /// [`HeadStats::to_self`].
    #[schemars(with = "Vec<Vec<Option<f64>>>")]
    pub to_self: Vec<Vec<f64>>,
    /// [`HeadStats::to_prev`].
    #[schemars(with = "Vec<Vec<Option<f64>>>")]
    pub to_prev: Vec<Vec<f64>>,
    /// [`HeadStats::to_next`].
    #[schemars(with = "Vec<Vec<Option<f64>>>")]
    pub to_next: Vec<Vec<f64>>,
    /// [`HeadStats::prev_token_score`] (null for cross-attention).
    #[schemars(with = "Vec<Vec<Option<f64>>>")]
    pub prev_token_score: Vec<Vec<f64>>,
    /// [`HeadStats::duplicate_token_score`] (null for cross-attention).
    #[schemars(with = "Vec<Vec<Option<f64>>>")]
    pub duplicate_token_score: Vec<Vec<f64>>,
    /// [`HeadStats::rows`].
    pub rows: Vec<Vec<usize>>,
    /// [`HeadStats::label`].
    pub label: Vec<Vec<HeadLabel>>,
    /// Cross-attention only: its alignment figures ([`AlignmentStats`]), each `[layer][head]`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alignment: Option<AlignmentSection>,
    /// The model's induction scores on its repeated random-token probe, when they were measured
    /// ([`detectors::Induction`]: a property of the model, not of this input).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub induction: Option<detectors::Induction>,
}

/// The `stats.alignment` section of cross-attention (`docs/stats.md`, "Alignment"): each
/// figure as a `[layer][head]` array.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct AlignmentSection {
    /// [`AlignmentStats::entropy`].
    #[schemars(with = "Vec<Vec<Option<f64>>>")]
    pub entropy: Vec<Vec<f64>>,
    /// [`AlignmentStats::entropy_norm`].
    #[schemars(with = "Vec<Vec<Option<f64>>>")]
    pub entropy_norm: Vec<Vec<f64>>,
    /// [`AlignmentStats::argmax_share`].
    #[schemars(with = "Vec<Vec<Option<f64>>>")]
    pub argmax_share: Vec<Vec<f64>>,
    /// [`AlignmentStats::rows`].
    pub rows: Vec<Vec<usize>>,
}

impl AlignmentSection {
    /// Columnar form of `stats` (`[layer][head]`).
    pub fn new(stats: &[Vec<AlignmentStats>]) -> Self {
        let grid = |f: fn(&AlignmentStats) -> f64| -> Vec<Vec<f64>> {
            stats.iter().map(|l| l.iter().map(f).collect()).collect()
        };
        AlignmentSection {
            entropy: grid(|s| s.entropy),
            entropy_norm: grid(|s| s.entropy_norm),
            argmax_share: grid(|s| s.argmax_share),
            rows: stats
                .iter()
                .map(|l| l.iter().map(|s| s.rows).collect())
                .collect(),
        }
    }
}

/// The label thresholds, as written into the JSON.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Thresholds {
    /// [`stats::POSITIONAL_THRESHOLD`].
    pub positional: f64,
    /// [`stats::BROAD_THRESHOLD`].
    pub broad: f64,
    /// [`stats::SINK_THRESHOLD`].
    pub sink: f64,
}

impl StatsSection {
    /// Columnar form of `stats` (`[layer][head]`).
    pub fn new(stats: &[Vec<HeadStats>]) -> Self {
        let grid = |f: fn(&HeadStats) -> f64| -> Vec<Vec<f64>> {
            stats.iter().map(|l| l.iter().map(f).collect()).collect()
        };
        StatsSection {
            reference: "Clark et al. 2019, What Does BERT Look At? (see docs/stats.md)",
            thresholds: Thresholds {
                positional: stats::POSITIONAL_THRESHOLD,
                broad: stats::BROAD_THRESHOLD,
                sink: stats::SINK_THRESHOLD,
            },
            entropy: grid(|s| s.entropy),
            entropy_norm: grid(|s| s.entropy_norm),
            distance: grid(|s| s.distance),
            to_start: grid(|s| s.to_start),
            to_end: grid(|s| s.to_end),
            to_first: grid(|s| s.to_first),
            to_punct: grid(|s| s.to_punct),
            to_self: grid(|s| s.to_self),
            to_prev: grid(|s| s.to_prev),
            to_next: grid(|s| s.to_next),
            prev_token_score: grid(|s| s.prev_token_score),
            duplicate_token_score: grid(|s| s.duplicate_token_score),
            rows: stats
                .iter()
                .map(|l| l.iter().map(|s| s.rows).collect())
                .collect(),
            label: stats
                .iter()
                .map(|l| l.iter().map(|s| s.label).collect())
                .collect(),
            alignment: None,
            induction: None,
        }
    }

    /// The same section with the model's induction scores (`None`: not measured).
    pub fn with_induction(mut self, induction: Option<detectors::Induction>) -> Self {
        self.induction = induction;
        self
    }

    /// The same section with cross-attention's alignment figures (`None`: other kinds).
    pub fn with_alignment(mut self, alignment: Option<&[Vec<AlignmentStats>]>) -> Self {
        self.alignment = alignment.map(AlignmentSection::new);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::fixtures::synthetic;
    use crate::attention::Level;

    #[test]
    fn view_without_options_borrows() {
        let att = synthetic(&["[CLS]", "a", "[SEP]"], 1, 1);
        assert!(matches!(
            view(&att, ViewOptions::default()).unwrap(),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn cli_order_is_specials_first_then_words() {
        let att = synthetic(&["[CLS]", "un", "##bel", "fox", "[SEP]"], 2, 2);
        let opts = ViewOptions {
            words: true,
            no_special: true,
        };
        let shown = view(&att, opts).unwrap();
        assert_eq!(*shown, to_words(&without_special(&att).unwrap()));
        assert_eq!(shown.tokens(), ["unbel", "fox"]);
        assert_eq!(shown.level, Level::Word);
    }

    #[test]
    fn rollout_of_token_view_equals_compute() {
        let att = synthetic(&["[CLS]", "un", "##bel", "fox", "[SEP]"], 3, 2);
        let (shown, a) = Analysis::compute_view(&att, ViewOptions::default()).unwrap();
        assert_eq!(a, Analysis::compute(&shown));
    }

    #[test]
    fn rollout_maps_to_word_units_with_rows_summing_to_one() {
        let att = synthetic(&["[CLS]", "un", "##bel", "fox", "[SEP]"], 3, 2);
        let opts = ViewOptions {
            words: true,
            no_special: true,
        };
        let (shown, a) = Analysis::compute_view(&att, opts).unwrap();
        assert_eq!(a.n, 2);
        assert_eq!(shown.len(), 2);
        assert_eq!(a.rollout.len(), 3);
        assert_eq!(a.layer_means.len(), 3);
        for m in &a.rollout {
            assert_eq!(m.len(), 4);
            for row in m.chunks(2) {
                assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-5);
            }
        }
    }

    #[test]
    fn views_of_an_encoder_decoder_keep_its_sides_consistent() {
        let set = crate::attention::fixtures::encoder_decoder(
            &["<s>", "Ġa", "Ġc", "at", "</s>"],
            &["</s>", "Ġei", "ne", "ĠKat", "ze"],
            2,
            1,
            2,
            5,
        );
        for (words, no_special) in [(true, false), (false, true), (true, true)] {
            let opts = ViewOptions { words, no_special };
            let shown = view_set(&set, opts).unwrap();
            let (enc, dec, cross) = (
                shown.encoder().unwrap(),
                shown.decoder().unwrap(),
                shown.cross().unwrap(),
            );
            assert_eq!(cross.queries(), dec.queries());
            assert_eq!(cross.keys(), enc.queries());
            let want_src: &[&str] = match (words, no_special) {
                (true, false) => &["<s>", "a", "cat", "</s>"],
                (false, true) => &["Ġa", "Ġc", "at"],
                _ => &["a", "cat"],
            };
            assert_eq!(enc.tokens(), want_src);
            let want_tgt: &[&str] = match (words, no_special) {
                (true, false) => &["</s>", "eine", "Katze"],
                (false, true) => &["Ġei", "ne", "ĠKat", "ze"],
                _ => &["eine", "Katze"],
            };
            assert_eq!(dec.tokens(), want_tgt);
            // Every cross row still sums to 1 over the source units it kept.
            for row in cross.head(0, 1).chunks(cross.n_keys()) {
                assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-5);
            }
        }
        assert!(matches!(
            view_set(&set, ViewOptions::default()).unwrap(),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn stats_section_is_columnar() {
        let att = synthetic(&["[CLS]", "a", "b", "[SEP]"], 2, 3);
        let a = Analysis::compute(&att);
        let json = serde_json::to_value(a.stats_section()).unwrap();
        assert_eq!(json["entropy"].as_array().unwrap().len(), 2);
        assert_eq!(json["entropy"][1].as_array().unwrap().len(), 3);
        assert_eq!(
            json["entropy"][1][2].as_f64().unwrap(),
            a.stats[1][2].entropy
        );
        assert_eq!(
            json["label"][1][2].as_str().unwrap(),
            a.stats[1][2].label.as_str()
        );
        assert_eq!(json["thresholds"]["broad"].as_f64().unwrap(), 0.85);
    }
}
