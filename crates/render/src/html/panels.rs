//! The analysis panels every full report carries (the CLI's `--html` and the Python package's
//! views): the statistics grid with a tag per head, and attention rollout in the matrix view.

use crate::analysis::detectors::Induction;
use crate::analysis::{AlignmentStats, Alti, HeadStats, Stat, ValueZeroing, ViewOptions};
use crate::attention::{Attention, Role};

use super::{ExtraMatrix, HeadStatistic, HtmlAnalysis};

/// What the statistics were computed on, in words (`tokens, [CLS]/[SEP] included`).
pub fn statistics_unit(att: &Attention, view: ViewOptions) -> String {
    format!(
        "{}, {} {}",
        if view.words { "words" } else { "tokens" },
        att.special_names(),
        if view.no_special {
            "excluded"
        } else {
            "included"
        }
    )
}

fn capitalise(s: &str) -> String {
    let mut chars = s.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// The statistics panel (every [`Stat`], `stats[layer][head]` computed on the `view` of `att`),
/// the head tags, and the rollout (`rollout[layer]`, over `att`'s tokens) for the matrix view;
/// statistics this attention does not define (all NaN) are left out, and so is an empty
/// rollout (not every layer captured).
pub fn report_analysis(
    att: &Attention,
    view: ViewOptions,
    stats: &[Vec<HeadStats>],
    rollout: &[Vec<f32>],
) -> HtmlAnalysis {
    let unit = statistics_unit(att, view);
    let (start, end) = (att.role_name(Role::Start), att.role_name(Role::End));
    // Which tokens the sink tag counts (SmolLM2 and GPT-2 inputs often have neither).
    let sink_tokens = match (&start, &end) {
        (None, None) => "this input has neither".to_string(),
        (s, e) => format!(
            "{}, {}",
            s.as_deref().unwrap_or("no start token"),
            e.as_deref().unwrap_or("no end token")
        ),
    };
    let (start, end) = (
        start.unwrap_or_else(|| "the start token".into()),
        end.unwrap_or_else(|| "the end token".into()),
    );
    let first = att
        .sink()
        .map(|k| {
            format!(
                ", sink = over half on the first token ({}), the attention sink the head view \
                 tags so",
                att.queries().display[k]
            )
        })
        .unwrap_or_default();
    let statistics = Stat::ALL
        .iter()
        // Only what this attention defines: no next-token share under a causal mask, no
        // first-token share without one.
        .filter(|&&stat| stats.iter().flatten().any(|s| !stat.value(s).is_nan()))
        .map(|&stat| HeadStatistic {
            id: stat.name().to_string(),
            label: match stat {
                Stat::ToStart => format!("share of attention to the start token ({start})"),
                Stat::ToEnd => format!("share of attention to the end tokens ({end})"),
                _ => stat.title().to_string(),
            },
            description: format!(
                "{}, averaged over the query rows ({unit}). Tags: previous/next = over half \
                 the attention on the previous/next token{first}, start/end = over half on the \
                 start and end tokens ({sink_tokens}), broad = entropy near uniform.",
                capitalise(stat.title())
            ),
            values: stats
                .iter()
                .map(|l| l.iter().map(|s| stat.value(s) as f32).collect())
                .collect(),
        })
        .collect();
    let head_labels = stats
        .iter()
        .map(|l| l.iter().map(|s| s.label.tag().to_string()).collect())
        .collect();
    // No rollout without every layer (`--layers`).
    let matrices = if rollout.is_empty() {
        Vec::new()
    } else {
        vec![ExtraMatrix {
            id: "rollout".to_string(),
            label: "Attention rollout".to_string(),
            description: "Abnar & Zuidema 2020: heads averaged, identity added, rows \
                renormalised, multiplied through the layers up to this one"
                .to_string(),
            layers: rollout.to_vec(),
            shares: false,
        }]
    };
    HtmlAnalysis {
        stats: statistics,
        head_labels: Some(head_labels),
        matrices,
        lens: None,
        head_attribution: None,
        head_ablation: None,
    }
}

/// ALTI's two matrices for the matrix view: aggregated through the layers, and each layer
/// alone (per token; the page merges words and drops special tokens as it does for attention).
pub fn alti_matrices(a: &Alti) -> [ExtraMatrix; 2] {
    [
        ExtraMatrix {
            id: "alti".to_string(),
            label: "ALTI".to_string(),
            description: "Ferrando et al. 2022: each input token's share in each token after \
                this layer, through the values, the residual and the norms, multiplied through \
                the layers up to this one"
                .to_string(),
            layers: a.aggregated.clone(),
            shares: true,
        },
        ExtraMatrix {
            id: "alti_layer".to_string(),
            label: "ALTI, this layer alone".to_string(),
            description: "Ferrando et al. 2022: each token's share in each token's output of \
                this layer alone (its attention block, residual and norm)"
                .to_string(),
            layers: a.per_layer.clone(),
            shares: true,
        },
    ]
}

/// Value zeroing's two matrices for the report's matrix view, over the tokens.
pub fn zeroing_matrices(v: &ValueZeroing) -> [ExtraMatrix; 2] {
    [
        ExtraMatrix {
            id: "value_zeroing".to_string(),
            label: "Value zeroing".to_string(),
            description: "Mohebbi et al. 2023: how far each token's output moves when a \
                context token's value vector is zeroed (1 − cosine, rows as shares), rolled out \
                through the layers up to this one"
                .to_string(),
            layers: v.aggregated.clone(),
            shares: true,
        },
        ExtraMatrix {
            id: "value_zeroing_layer".to_string(),
            label: "Value zeroing, this layer alone".to_string(),
            description: "Mohebbi et al. 2023: each context token's share in how far this \
                layer's output of each token moves when that token's value vector is zeroed"
                .to_string(),
            layers: v.per_layer.clone(),
            shares: true,
        },
    ]
}

/// Cross-attention's alignment figure that the statistics of every kind lack, for the stats panel,
/// from `align[layer][head]` (computed on the view described by `unit`, see
/// [`statistics_unit`]): the share on each output unit's argmax source unit (what a hard
/// alignment keeps). The entropy over the source, plain and normalised, is among every kind's
/// statistics already.
pub fn alignment_statistics(align: &[Vec<AlignmentStats>], unit: &str) -> Vec<HeadStatistic> {
    let grid = |f: fn(&AlignmentStats) -> f64| -> Vec<Vec<f32>> {
        align
            .iter()
            .map(|l| l.iter().map(|a| f(a) as f32).collect())
            .collect()
    };
    vec![HeadStatistic {
        id: "argmax_share".into(),
        label: "alignment: share on the argmax source token".into(),
        description: format!(
            "Mean over the decoder (target) rows of the largest weight, the share each \
                 output unit gives the one source unit a hard alignment would pick: 1 for a \
                 sharp alignment, 1 / source units for uniform rows ({unit})."
        ),
        values: grid(|a| a.argmax_share),
    }]
}

/// The model's induction score for the stats panel, one row per layer of `numbers` (the
/// report's captured layers): measured on the head detector's repeated random-token probe, not
/// on the report's input, and said so.
pub fn induction_statistic(probe: &Induction, numbers: &[usize]) -> HeadStatistic {
    HeadStatistic {
        id: "induction_score".into(),
        label: "induction score (head detector, on a repeated random sequence)".into(),
        description: format!(
            "TransformerLens's head detector: the share of all attention that goes to the \
             token after an earlier copy of the current token, measured on {} random tokens \
             repeated twice (the model's own probe, not this input). A perfect induction head \
             scores just under one half: the first copy has nothing to look back at.",
            probe.period
        ),
        values: probe
            .rows_for(numbers)
            .iter()
            .map(|l| l.iter().map(|&v| v as f32).collect())
            .collect(),
    }
}
