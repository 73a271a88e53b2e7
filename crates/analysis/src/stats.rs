//! Per-head statistics after Clark et al. (2019), "What Does BERT Look At? An Analysis of BERT's
//! Attention", section 3. Definitions, conventions and thresholds: `docs/stats.md`.
//!
//! Every statistic is a mean over the query rows of one head's matrix (each row is one query's
//! distribution over the keys). All rows count, the special tokens' rows included, as in Clark
//! et al.; the rows skipped are rows with no mass at all, which only special-token exclusion
//! can produce, and under a causal mask rows that see a single key (the first query has no
//! choice). Which keys are the sequence start and end comes from the units' roles (so the
//! shares mean the same for `[CLS]`/`[SEP]`, `<s>`/`</s>` and BOS/EOS); a causal mask changes
//! what "uniform" means for a row (see [`HeadStats::entropy_norm`]) and adds the share to the
//! attention sink ([`HeadStats::to_first`]). Sums run in f64; the `w ln w` terms of the entropy
//! use a vectorisable f32 logarithm (relative error about 1e-7), which keeps 144 heads × 512²
//! weights at tens of milliseconds.

use std::fmt;
use std::str::FromStr;

use rayon::prelude::*;
use serde::Serialize;
use unicode_categories::UnicodeCategories;

use crate::attention::{Attention, MaskKind, Role};
use attnviz_core::multiversion;

/// A head is positional (previous/next) when its share to that token is above this.
pub const POSITIONAL_THRESHOLD: f64 = 0.5;
/// A head is broad when its normalised entropy is at least this (its effective number of
/// attended keys, `exp(entropy)`, is at least `n^0.85`).
pub const BROAD_THRESHOLD: f64 = 0.85;
/// A head is a special-token sink when its share to the sequence start plus end tokens is above
/// this, and (causal models) a first-token sink when its share to the first token is.
pub const SINK_THRESHOLD: f64 = 0.5;

/// Statistics of one head, each a mean over its query rows. Field names are the JSON names.
///
/// A statistic the attention does not define is NaN (`null` in JSON); two `HeadStats` are equal
/// when every value is, an undefined one equal to an undefined one.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct HeadStats {
    /// Mean entropy of the rows, in nats: `−Σ_k a_qk ln a_qk` (with `0 ln 0 = 0`).
    pub entropy: f64,
    /// Normalised entropy: 0 when every query looks at one key, 1 when attention is uniform over
    /// the keys it can see. Bidirectionally `entropy / ln n` (0 when `n = 1`); under a causal
    /// mask the mean over rows of `H_q / ln(visible keys of q)` (`ln(q + 1)` for token `q`).
    pub entropy_norm: f64,
    /// Mean attention distance in units: `Σ_k a_qk |q − k|` (NaN for cross-attention, whose
    /// queries and keys are different units).
    pub distance: f64,
    /// Share of attention to the sequence start token (`[CLS]`, `<s>`, BOS: role start).
    pub to_start: f64,
    /// Share of attention to the separator/end tokens (`[SEP]`, `</s>`, EOS: role end; all of
    /// them, in a pair).
    pub to_end: f64,
    /// Share of attention to the first token, the attention sink of a causal model (see
    /// [`crate::attention::Attention::sink`]); NaN for bidirectional attention, cross-attention,
    /// and views without the first token.
    pub to_first: f64,
    /// Share of attention to punctuation units.
    pub to_punct: f64,
    /// Share of attention to the query itself (`a_qq`; NaN for cross-attention).
    pub to_self: f64,
    /// Share of attention to the previous unit (`a_q,q−1`; 0 for the first row; NaN for
    /// cross-attention).
    pub to_prev: f64,
    /// Share of attention to the next unit (`a_q,q+1`; 0 for the last row; NaN for
    /// cross-attention, and under a causal mask, which hides every next unit).
    pub to_next: f64,
    /// Previous-token score (TransformerLens's head detector): `Σ_q a_q,q−1 / Σ a` over every
    /// row, the first one included (NaN for cross-attention); see [`super::detectors`].
    pub prev_token_score: f64,
    /// Duplicate-token score (TransformerLens's head detector): the share of attention on other
    /// positions of the query's own token (NaN for cross-attention); see [`super::detectors`].
    pub duplicate_token_score: f64,
    /// Number of query rows averaged (rows with no mass, and under a causal mask rows that see
    /// a single key, are skipped).
    pub rows: usize,
    /// What the head clearly does, if anything.
    pub label: HeadLabel,
}

impl PartialEq for HeadStats {
    fn eq(&self, other: &Self) -> bool {
        let same = |a: f64, b: f64| a == b || (a.is_nan() && b.is_nan());
        self.rows == other.rows
            && self.label == other.label
            && Stat::ALL
                .into_iter()
                .all(|stat| same(stat.value(self), stat.value(other)))
    }
}

impl HeadStats {
    /// Statistics from each [`Stat`]'s value (`value(stat)`) and the rows behind them, labelled
    /// with [`HeadLabel::classify`]: how averaged statistics (corpus mode) are put together,
    /// whatever the order of the fields.
    pub fn from_values(value: impl Fn(Stat) -> f64, rows: usize) -> HeadStats {
        let mut s = HeadStats {
            entropy: value(Stat::Entropy),
            entropy_norm: value(Stat::EntropyNorm),
            distance: value(Stat::Distance),
            to_start: value(Stat::ToStart),
            to_end: value(Stat::ToEnd),
            to_first: value(Stat::ToFirst),
            to_punct: value(Stat::ToPunct),
            to_self: value(Stat::ToSelf),
            to_prev: value(Stat::ToPrev),
            to_next: value(Stat::ToNext),
            prev_token_score: value(Stat::PrevTokenScore),
            duplicate_token_score: value(Stat::DuplicateTokenScore),
            rows,
            label: HeadLabel::None,
        };
        s.label = HeadLabel::classify(&s);
        s
    }
}

/// What a head clearly does, following Clark et al. (2019). The first rule that holds wins, in
/// this order; see [`HeadLabel::classify`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum HeadLabel {
    /// More than half of the attention goes to the previous unit.
    PositionalPrevious,
    /// More than half of the attention goes to the next unit.
    PositionalNext,
    /// Attention close to uniform: normalised entropy at least [`BROAD_THRESHOLD`].
    Broad,
    /// Causal models: more than half of the attention goes to the first token, the attention
    /// sink (whether or not it is a BOS token).
    FirstTokenSink,
    /// More than half of the attention goes to the sequence start and end tokens.
    SpecialSink,
    /// None of the above.
    None,
}

impl HeadLabel {
    /// Every label, in rule order.
    pub const ALL: [HeadLabel; 6] = [
        HeadLabel::PositionalPrevious,
        HeadLabel::PositionalNext,
        HeadLabel::Broad,
        HeadLabel::FirstTokenSink,
        HeadLabel::SpecialSink,
        HeadLabel::None,
    ];

    /// Label statistics (also averaged ones, e.g. over a corpus):
    /// `to_prev > 0.5` → positional-previous, else `to_next > 0.5` → positional-next,
    /// else `entropy_norm ≥ 0.85` → broad, else `to_first > 0.5` → first-token-sink (causal
    /// models only: elsewhere `to_first` is NaN), else `to_start + to_end > 0.5` →
    /// special-sink, else none. Broad comes before the sinks so that a near-uniform head over a
    /// short input, where the start and end tokens are a large fraction of the units, is not
    /// called a sink; the first-token sink comes before the special sink because in a causal
    /// model a BOS token is the first token, and sinks by its position.
    pub fn classify(s: &HeadStats) -> HeadLabel {
        if s.to_prev > POSITIONAL_THRESHOLD {
            HeadLabel::PositionalPrevious
        } else if s.to_next > POSITIONAL_THRESHOLD {
            HeadLabel::PositionalNext
        } else if s.entropy_norm >= BROAD_THRESHOLD {
            HeadLabel::Broad
        } else if s.to_first > SINK_THRESHOLD {
            HeadLabel::FirstTokenSink
        } else if s.to_start + s.to_end > SINK_THRESHOLD {
            HeadLabel::SpecialSink
        } else {
            HeadLabel::None
        }
    }

    /// The JSON name (`positional-previous`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            HeadLabel::PositionalPrevious => "positional-previous",
            HeadLabel::PositionalNext => "positional-next",
            HeadLabel::Broad => "broad",
            HeadLabel::FirstTokenSink => "first-token-sink",
            HeadLabel::SpecialSink => "special-sink",
            HeadLabel::None => "none",
        }
    }

    /// One ASCII character for compact grids.
    pub fn symbol(self) -> char {
        match self {
            HeadLabel::PositionalPrevious => '<',
            HeadLabel::PositionalNext => '>',
            HeadLabel::Broad => 'B',
            HeadLabel::FirstTokenSink => 'F',
            HeadLabel::SpecialSink => 'S',
            HeadLabel::None => '.',
        }
    }

    /// A short human description.
    pub fn description(self) -> &'static str {
        match self {
            HeadLabel::PositionalPrevious => "previous token",
            HeadLabel::PositionalNext => "next token",
            HeadLabel::Broad => "broad",
            HeadLabel::FirstTokenSink => "first-token sink",
            HeadLabel::SpecialSink => "start/end sink",
            HeadLabel::None => "none of these",
        }
    }

    /// A tag short enough for a grid cell (`previous`, `sink`, `start/end`); empty for none.
    /// `sink` is the first-token sink: the views tag the first token of a causal model "sink",
    /// so a head tagged `sink` parks its attention on the token tagged so; a head that parks it on
    /// the start and end tokens is tagged `start/end`, whatever the model.
    pub fn tag(self) -> &'static str {
        match self {
            HeadLabel::PositionalPrevious => "previous",
            HeadLabel::PositionalNext => "next",
            HeadLabel::Broad => "broad",
            HeadLabel::FirstTokenSink => "sink",
            HeadLabel::SpecialSink => "start/end",
            HeadLabel::None => "",
        }
    }

    /// Whether the head parks most of its attention on one place (the first token, or the start
    /// and end tokens) rather than reading the input.
    pub fn is_sink(self) -> bool {
        matches!(self, HeadLabel::FirstTokenSink | HeadLabel::SpecialSink)
    }
}

impl fmt::Display for HeadLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The head a figure shows as a layer's "most focused": the head of `layer` with the lowest mean
/// entropy among those not tagged as a sink ([`HeadLabel::is_sink`]: a head that parks its
/// attention on the first token or the start and end tokens has low entropy and shows nothing of
/// the input), ties to the lowest number; when every head is a sink, the lowest entropy of all.
/// Returns the head and how it was picked, in words for a title.
pub fn most_focused_head(stats: &[Vec<HeadStats>], layer: usize) -> Option<(usize, &'static str)> {
    let heads = stats.get(layer)?;
    let lowest = |sinks_too: bool| {
        heads
            .iter()
            .enumerate()
            .filter(|(_, s)| sinks_too || !s.label.is_sink())
            .min_by(|(_, a), (_, b)| a.entropy.total_cmp(&b.entropy))
            .map(|(h, _)| h)
    };
    match lowest(false) {
        Some(h) => Some((h, "lowest entropy, sink heads left out")),
        None => lowest(true).map(|h| (h, "lowest entropy; every head is a sink")),
    }
}

/// One numeric statistic of [`HeadStats`], to colour a grid by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stat {
    /// [`HeadStats::entropy`].
    Entropy,
    /// [`HeadStats::entropy_norm`].
    EntropyNorm,
    /// [`HeadStats::distance`].
    Distance,
    /// [`HeadStats::to_start`].
    ToStart,
    /// [`HeadStats::to_end`].
    ToEnd,
    /// [`HeadStats::to_first`].
    ToFirst,
    /// [`HeadStats::to_punct`].
    ToPunct,
    /// [`HeadStats::to_self`].
    ToSelf,
    /// [`HeadStats::to_prev`].
    ToPrev,
    /// [`HeadStats::to_next`].
    ToNext,
    /// [`HeadStats::prev_token_score`].
    PrevTokenScore,
    /// [`HeadStats::duplicate_token_score`].
    DuplicateTokenScore,
}

impl Stat {
    /// Every statistic, in the order of [`HeadStats`]'s fields.
    pub const ALL: [Stat; 12] = [
        Stat::Entropy,
        Stat::EntropyNorm,
        Stat::Distance,
        Stat::ToStart,
        Stat::ToEnd,
        Stat::ToFirst,
        Stat::ToPunct,
        Stat::ToSelf,
        Stat::ToPrev,
        Stat::ToNext,
        Stat::PrevTokenScore,
        Stat::DuplicateTokenScore,
    ];

    /// The value of this statistic in `s`.
    pub fn value(self, s: &HeadStats) -> f64 {
        match self {
            Stat::Entropy => s.entropy,
            Stat::EntropyNorm => s.entropy_norm,
            Stat::Distance => s.distance,
            Stat::ToStart => s.to_start,
            Stat::ToEnd => s.to_end,
            Stat::ToFirst => s.to_first,
            Stat::ToPunct => s.to_punct,
            Stat::ToSelf => s.to_self,
            Stat::ToPrev => s.to_prev,
            Stat::ToNext => s.to_next,
            Stat::PrevTokenScore => s.prev_token_score,
            Stat::DuplicateTokenScore => s.duplicate_token_score,
        }
    }

    /// The JSON field name, also accepted by [`Stat::from_str`].
    pub fn name(self) -> &'static str {
        match self {
            Stat::Entropy => "entropy",
            Stat::EntropyNorm => "entropy_norm",
            Stat::Distance => "distance",
            Stat::ToStart => "to_start",
            Stat::ToEnd => "to_end",
            Stat::ToFirst => "to_first",
            Stat::ToPunct => "to_punct",
            Stat::ToSelf => "to_self",
            Stat::ToPrev => "to_prev",
            Stat::ToNext => "to_next",
            Stat::PrevTokenScore => "prev_token_score",
            Stat::DuplicateTokenScore => "duplicate_token_score",
        }
    }

    /// A human title.
    pub fn title(self) -> &'static str {
        match self {
            Stat::Entropy => "entropy (nats)",
            Stat::EntropyNorm => "normalised entropy (entropy / ln n)",
            Stat::Distance => "mean attention distance |q - k|",
            Stat::ToStart => "share of attention to the sequence start token",
            Stat::ToEnd => "share of attention to the separator/end tokens",
            Stat::ToFirst => "share of attention to the first token (the attention sink)",
            Stat::ToPunct => "share of attention to punctuation",
            Stat::ToSelf => "share of attention to the token itself",
            Stat::ToPrev => "share of attention to the previous token",
            Stat::ToNext => "share of attention to the next token",
            Stat::PrevTokenScore => "previous-token score (head detector)",
            Stat::DuplicateTokenScore => "duplicate-token score (head detector)",
        }
    }

    /// Whether the statistic is a share or normalised, so always within 0..=1.
    pub fn is_unit_range(self) -> bool {
        !matches!(self, Stat::Entropy | Stat::Distance)
    }
}

/// Error for an unknown statistic name.
#[derive(Debug, thiserror::Error)]
#[error("unknown statistic `{0}`; use one of: entropy, entropy_norm, distance, to_start, to_end, to_first, to_punct, to_self, to_prev, to_next, prev_token_score, duplicate_token_score")]
pub struct UnknownStat(pub String);

impl FromStr for Stat {
    type Err = UnknownStat;

    /// Parse a JSON field name; the `to_` prefix may be left out (`start`, `prev`, …) and `-`
    /// may stand for `_`. The names of format version 1, `to_cls` and `to_sep` (`cls`, `sep`),
    /// still mean the start and end shares.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let norm = s.trim().to_ascii_lowercase().replace('-', "_");
        let norm = match norm.as_str() {
            "to_cls" | "cls" => "to_start".to_string(),
            "to_sep" | "sep" => "to_end".to_string(),
            _ => norm,
        };
        Stat::ALL
            .into_iter()
            .find(|st| st.name() == norm || st.name().strip_prefix("to_") == Some(norm.as_str()))
            .ok_or_else(|| UnknownStat(s.to_string()))
    }
}

/// Which keys are the sequence start, the separator/end tokens or punctuation, by index.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyClasses {
    /// Key units whose role is [`Role::Start`].
    pub start: Vec<usize>,
    /// Key units whose role is [`Role::End`].
    pub end: Vec<usize>,
    /// Ordinary key units whose text is all punctuation.
    pub punct: Vec<usize>,
}

impl KeyClasses {
    /// Classify the key units of `att` by role, and ordinary ones by the text they stand for
    /// (their surface, or their label where there is none): punctuation when every character is
    /// (see [`is_punctuation`]).
    pub fn of(att: &Attention) -> Self {
        let keys = att.keys();
        let mut classes = KeyClasses::default();
        for i in 0..keys.len() {
            match keys.roles[i] {
                Role::Start => classes.start.push(i),
                Role::End => classes.end.push(i),
                r if r.is_special() => {}
                _ => {
                    let text = if keys.surfaces[i].is_empty() {
                        keys.labels[i].as_str()
                    } else {
                        keys.surfaces[i].trim()
                    };
                    if !text.is_empty() && text.chars().all(is_punctuation) {
                        classes.punct.push(i);
                    }
                }
            }
        }
        classes
    }
}

/// How the rows of a head's matrix relate to its columns.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Geometry {
    /// Queries and keys are the same units (self-attention): position statistics are defined.
    pub square: bool,
    /// Under a causal mask, how many keys each query sees in this layer (its sliding window
    /// included); `None`: all of them.
    pub visible: Option<Vec<usize>>,
    /// The attention sink's key unit (causal models: the first token), if the view has it.
    pub sink: Option<usize>,
}

impl Geometry {
    /// The geometry of the matrices of `att`'s captured layer `layer`: the keys each query
    /// sees under the layer's real mask (causal, and its sliding window where it has one).
    pub fn of(att: &Attention, layer: usize) -> Self {
        Geometry {
            square: att.is_square(),
            visible: (att.mask == MaskKind::Causal).then(|| {
                (0..att.n_queries())
                    .map(|q| att.visible_keys_in(layer, q))
                    .collect()
            }),
            sink: att.sink(),
        }
    }

    /// A square bidirectional matrix (BERT's self-attention).
    pub fn square() -> Self {
        Geometry {
            square: true,
            visible: None,
            sink: None,
        }
    }

    /// A square causal matrix over `n` tokens: query `q` sees keys `0..=q`, key 0 is the sink.
    pub fn causal(n: usize) -> Self {
        Geometry {
            square: true,
            visible: Some((1..=n).collect()),
            sink: (n > 0).then_some(0),
        }
    }
}

/// BERT's punctuation rule (its basic tokenizer splits on exactly these): ASCII punctuation and
/// symbols (`!"#$%&'()*+,-./:;<=>?@[\]^_`{|}~`), or any character of Unicode category P*.
pub fn is_punctuation(c: char) -> bool {
    c.is_ascii_punctuation() || c.is_punctuation()
}

/// Statistics of every head of `att`, `[layer][head]`, computed in parallel.
pub fn head_stats(att: &Attention) -> Vec<Vec<HeadStats>> {
    let classes = KeyClasses::of(att);
    // Each layer's own mask: a sliding window changes how many keys a query sees.
    let geometry: Vec<Geometry> = (0..att.layers()).map(|l| Geometry::of(att, l)).collect();
    let groups = super::detectors::TokenGroups::of(att);
    let nk = att.n_keys();
    let heads = att.heads();
    let flat: Vec<HeadStats> = (0..att.layers() * heads)
        .into_par_iter()
        .map(|i| {
            let l = i / heads;
            let matrix = att.head(l, i % heads);
            let mut stats = matrix_stats(matrix, nk, &classes, &geometry[l]);
            // The head detectors' scores ([`super::detectors::token_scores`]).
            if let Some(groups) = &groups {
                (stats.prev_token_score, stats.duplicate_token_score) = groups.scores(matrix);
            }
            stats
        })
        .collect();
    flat.chunks(heads.max(1)).map(<[_]>::to_vec).collect()
}

/// Alignment figures of one cross-attention head: how sharply each decoder unit picks its
/// source units, as word-alignment studies read cross-attention (docs/stats.md, "Alignment").
/// Each is a mean over the decoder rows that have mass.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct AlignmentStats {
    /// Mean entropy of the rows over the source units, in nats: `−Σ_k a_qk ln a_qk`.
    pub entropy: f64,
    /// `entropy / ln n_source` (0 when there is one source unit): 0 when every output unit
    /// attends to one source unit, 1 when it spreads evenly.
    pub entropy_norm: f64,
    /// Mean over the rows of the largest weight, the share on the row's argmax source unit (the
    /// source unit a hard alignment would pick): 1 for one-hot rows, `1 / n_source` for uniform
    /// ones.
    pub argmax_share: f64,
    /// Number of rows averaged.
    pub rows: usize,
}

/// The alignment figures of every head of `att`, `[layer][head]`; `None` unless `att` is
/// cross-attention.
pub fn alignment_stats(att: &Attention) -> Option<Vec<Vec<AlignmentStats>>> {
    if att.kind != crate::attention::AttentionKind::Cross {
        return None;
    }
    let nk = att.n_keys();
    let heads = att.heads();
    let flat: Vec<AlignmentStats> = (0..att.layers() * heads)
        .into_par_iter()
        .map(|i| matrix_alignment(att.head(i / heads, i % heads), nk))
        .collect();
    Some(flat.chunks(heads.max(1)).map(<[_]>::to_vec).collect())
}

/// [`AlignmentStats`] of one row-major matrix of `nk` columns.
pub fn matrix_alignment(matrix: &[f32], nk: usize) -> AlignmentStats {
    let mut rows = 0usize;
    let (mut entropy, mut peak) = (0f64, 0f64);
    for row in matrix.chunks_exact(nk.max(1)) {
        let [mass, h, _] = row_moments(row, 0);
        if mass <= 0.0 {
            continue;
        }
        rows += 1;
        entropy += h;
        peak += row.iter().fold(0f32, |m, &w| m.max(w)) as f64;
    }
    let mean = |x: f64| if rows > 0 { x / rows as f64 } else { 0.0 };
    let entropy = mean(entropy);
    AlignmentStats {
        entropy,
        entropy_norm: if nk > 1 {
            entropy / (nk as f64).ln()
        } else {
            0.0
        },
        argmax_share: mean(peak),
        rows,
    }
}

/// Statistics of one row-major attention matrix of `nk` columns (row = query), with the key
/// classes and geometry of its attention.
pub fn matrix_stats(
    matrix: &[f32],
    nk: usize,
    keys: &KeyClasses,
    geometry: &Geometry,
) -> HeadStats {
    let n = nk;
    let mut sums = RowSums::default();
    sum_rows(matrix, nk, keys, geometry, &mut sums);
    let RowSums {
        sum,
        rows,
        norm_sum,
    } = sums;
    let mean = |i: usize| if rows > 0 { sum[i] / rows as f64 } else { 0.0 };
    // Position statistics need queries and keys to be the same units.
    let positional = |i: usize| if geometry.square { mean(i) } else { f64::NAN };
    let causal = geometry.visible.is_some();
    let entropy = mean(0);
    let entropy_norm = match causal {
        true if rows > 0 => norm_sum / rows as f64,
        true => 0.0,
        false if n > 1 => entropy / (n as f64).ln(),
        false => 0.0,
    };
    let mut stats = HeadStats {
        entropy,
        entropy_norm,
        distance: positional(1),
        to_start: mean(2),
        to_end: mean(3),
        to_first: if geometry.sink.is_some() {
            mean(4)
        } else {
            f64::NAN
        },
        to_punct: mean(5),
        to_self: positional(6),
        to_prev: positional(7),
        // Under a causal mask the next unit is always hidden: nothing to measure.
        to_next: if causal { f64::NAN } else { positional(8) },
        // The head detectors need the units: `head_stats` fills them in.
        prev_token_score: f64::NAN,
        duplicate_token_score: f64::NAN,
        rows,
        label: HeadLabel::None,
    };
    stats.label = HeadLabel::classify(&stats);
    stats
}

/// What [`matrix_stats`] sums over a matrix's rows: the nine per-row figures (entropy,
/// distance, the start, end, first-token and punctuation shares, self, previous, next), the
/// rows counted, and (causal) each row's entropy over the log of the keys it sees.
#[derive(Default)]
struct RowSums {
    sum: [f64; 9],
    rows: usize,
    norm_sum: f64,
}

multiversion! {
    /// [`matrix_stats`]' sums over the rows, compiled for each instruction set (the same sums
    /// on each).
    fn sum_rows(
        matrix: &[f32],
        nk: usize,
        keys: &KeyClasses,
        geometry: &Geometry,
        out: &mut RowSums,
    ) {
        let nq = matrix.len().checked_div(nk).unwrap_or(0);
        let n = nk;
        let RowSums {
            sum,
            rows,
            norm_sum,
        } = out;
        for q in 0..nq {
            // A row that sees a single key has no choice (causal: the first query): skipped.
            let visible = geometry.visible.as_ref().map(|v| v[q]);
            if visible.is_some_and(|v| v <= 1) {
                continue;
            }
            let row = &matrix[q * n..(q + 1) * n];
            let [mass, entropy, distance] = row_moments_portable(without_trailing_zeros(row), q);
            if mass <= 0.0 {
                continue;
            }
            *rows += 1;
            if let Some(v) = visible {
                *norm_sum += entropy / (v as f64).ln();
            }
            let share = |idx: &[usize]| idx.iter().map(|&k| row[k] as f64).sum::<f64>();
            let at = |k: Option<usize>| k.filter(|&k| k < n).map_or(0.0, |k| row[k] as f64);
            let values = [
                entropy,
                distance,
                share(&keys.start),
                share(&keys.end),
                at(geometry.sink),
                share(&keys.punct),
                at(Some(q)),
                at(q.checked_sub(1)),
                at(Some(q + 1)),
            ];
            for (s, v) in sum.iter_mut().zip(values) {
                *s += v;
            }
        }
    }
}

/// `[Σ w, −Σ w ln w, Σ w |q − k|]` over one row, accumulated in f64.
///
/// The hot loop of the statistics (`n²` per head): written over fixed-width lanes with a
/// branch-free logarithm so that it vectorises; `std`'s `ln` would be a libm call per element.
fn row_moments(row: &[f32], q: usize) -> [f64; 3] {
    let mut moments = [0.0; 3];
    row_moments_into(row, q, &mut moments);
    moments
}

multiversion! {
    /// [`row_moments`], compiled for each instruction set (`ATTNVIZ_ISA`; the same sums on
    /// each: the lanes are explicit).
    fn row_moments_into(row: &[f32], q: usize, moments: &mut [f64; 3]) {
        *moments = row_moments_portable(row, q);
    }
}

/// `row` less the zeros it ends with (a causal row's masked keys), to a whole number of
/// [`row_moments`]' lanes where the row has them: sums over a row are the same without those
/// zeros, to the bit (each lane adds its values in the same order, and adding ±0 changes
/// nothing), and their logarithms were half of a causal head's statistics.
pub(crate) fn without_trailing_zeros(row: &[f32]) -> &[f32] {
    let live = row.iter().rposition(|&w| w != 0.0).map_or(0, |k| k + 1);
    &row[..live.next_multiple_of(MOMENT_LANES).min(row.len())]
}

/// Lanes of [`row_moments`]' partial sums.
const MOMENT_LANES: usize = 8;

#[inline(always)]
fn row_moments_portable(row: &[f32], q: usize) -> [f64; 3] {
    const LANES: usize = MOMENT_LANES;
    let mut mass = [0f64; LANES];
    let mut plogp = [0f64; LANES];
    let mut dist = [0f64; LANES];
    let qf = q as f64;
    let chunks = row.chunks_exact(LANES);
    let rest = chunks.remainder();
    for (c, chunk) in chunks.enumerate() {
        let base = (c * LANES) as f64;
        for i in 0..LANES {
            let w = chunk[i];
            mass[i] += w as f64;
            plogp[i] += (w * ln_f32(w)) as f64;
            dist[i] += w as f64 * (base + i as f64 - qf).abs();
        }
    }
    let start = row.len() - rest.len();
    for (i, &w) in rest.iter().enumerate() {
        mass[i] += w as f64;
        plogp[i] += (w * ln_f32(w)) as f64;
        dist[i] += w as f64 * ((start + i) as f64 - qf).abs();
    }
    let total = |a: [f64; LANES]| a.iter().sum::<f64>();
    [total(mass), -total(plogp), total(dist)]
}

/// Natural logarithm for `x ≥ 0`, branch-free so loops over it vectorise (Cephes `logf`:
/// relative error about 1e-7 on normal numbers). For `x = 0` it returns about −88, so
/// `x · ln x` is 0 as entropy wants; for subnormal `x` the result is off, but `x · ln x` is
/// then below 1e-36 either way.
#[inline(always)]
fn ln_f32(x: f32) -> f32 {
    const SQRT_HALF: f32 = std::f32::consts::FRAC_1_SQRT_2;
    let bits = x.to_bits();
    // x = m · 2^e with m in [0.5, 1)
    let e = ((bits >> 23) & 0xff) as i32 - 126;
    let m = f32::from_bits((bits & 0x007f_ffff) | 0x3f00_0000);
    let small = m < SQRT_HALF;
    let e = (e - small as i32) as f32;
    let x = if small { m + m - 1.0 } else { m - 1.0 };
    let z = x * x;
    let p = ((((((((7.037_683_6e-2 * x - 1.151_461_1e-1) * x + 1.167_699_9e-1) * x
        - 1.242_014_1e-1)
        * x
        + 1.424_932_3e-1)
        * x
        - 1.666_805_8e-1)
        * x
        + 2.000_071_5e-1)
        * x
        - 2.499_999_4e-1)
        * x
        + 3.333_333e-1)
        * x
        * z;
    let y = p - 2.121_944_4e-4 * e - 0.5 * z;
    x + y + 0.693_359_4 * e
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::fixtures::synthetic;

    fn uniform(n: usize) -> Vec<f32> {
        vec![1.0 / n as f32; n * n]
    }

    #[test]
    fn uniform_attention_is_broad_with_entropy_ln_n() {
        let s = matrix_stats(&uniform(8), 8, &KeyClasses::default(), &Geometry::square());
        assert!((s.entropy - 8f64.ln()).abs() < 1e-6);
        assert!((s.entropy_norm - 1.0).abs() < 1e-6);
        assert_eq!(s.label, HeadLabel::Broad);
        // mean |q-k| over a uniform 8x8: (1/8) * sum_q mean_k |q-k| = 21/8
        assert!((s.distance - 2.625).abs() < 1e-6, "{}", s.distance);
    }

    #[test]
    fn shifted_identity_is_positional() {
        let n = 6;
        let mut prev = vec![0f32; n * n];
        let mut next = vec![0f32; n * n];
        for q in 0..n {
            prev[q * n + q.saturating_sub(1)] = 1.0;
            next[q * n + (q + 1).min(n - 1)] = 1.0;
        }
        let keys = KeyClasses::default();
        let p = matrix_stats(&prev, n, &keys, &Geometry::square());
        assert!((p.to_prev - 5.0 / 6.0).abs() < 1e-12);
        assert!((p.to_self - 1.0 / 6.0).abs() < 1e-12);
        assert_eq!(p.entropy, 0.0);
        assert_eq!(p.label, HeadLabel::PositionalPrevious);
        let x = matrix_stats(&next, n, &keys, &Geometry::square());
        assert!((x.to_next - 5.0 / 6.0).abs() < 1e-12);
        assert_eq!(x.label, HeadLabel::PositionalNext);
    }

    #[test]
    fn all_on_cls_is_a_sink_and_zero_rows_are_skipped() {
        let att = synthetic(&["[CLS]", "hello", ",", "world", "[SEP]"], 1, 1);
        let keys = KeyClasses::of(&att);
        assert_eq!(keys.start, [0]);
        assert_eq!(keys.end, [4]);
        assert_eq!(keys.punct, [2]);
        let n = 5;
        let mut m = vec![0f32; n * n];
        for q in 0..4 {
            m[q * n] = 1.0;
        }
        let s = matrix_stats(&m, n, &keys, &Geometry::square());
        assert_eq!(s.rows, 4);
        assert_eq!(s.to_start, 1.0);
        assert!((s.distance - 1.5).abs() < 1e-12); // (0 + 1 + 2 + 3) / 4
        assert_eq!(s.label, HeadLabel::SpecialSink);
    }

    #[test]
    fn the_most_focused_head_is_never_a_sink() {
        let head = |entropy: f64, to_first: f64| {
            HeadStats::from_values(
                |s| match s {
                    Stat::Entropy => entropy,
                    Stat::EntropyNorm => 0.3,
                    Stat::ToFirst => to_first,
                    _ => 0.0,
                },
                10,
            )
        };
        // Head 0 is the sharpest, but it is a first-token sink; head 2 is the sharpest reader.
        let layer = vec![
            head(0.1, 0.9),
            head(1.5, 0.1),
            head(0.8, 0.2),
            head(0.8, 0.0),
        ];
        assert_eq!(layer[0].label, HeadLabel::FirstTokenSink);
        let stats = vec![layer];
        assert_eq!(
            most_focused_head(&stats, 0),
            Some((2, "lowest entropy, sink heads left out"))
        );
        // Every head a sink: the lowest entropy of them all, said so.
        let sinks = vec![vec![head(0.5, 0.9), head(0.2, 0.8)]];
        assert_eq!(
            most_focused_head(&sinks, 0),
            Some((1, "lowest entropy; every head is a sink"))
        );
        assert_eq!(most_focused_head(&stats, 3), None);
    }

    #[test]
    fn labels_follow_rule_order() {
        let base = matrix_stats(&uniform(4), 4, &KeyClasses::default(), &Geometry::square());
        let with = |f: fn(&mut HeadStats)| {
            let mut s = base;
            f(&mut s);
            HeadLabel::classify(&s)
        };
        assert_eq!(with(|_| {}), HeadLabel::Broad);
        assert_eq!(
            with(|s| {
                s.to_start = 0.4;
                s.to_end = 0.2
            }),
            HeadLabel::Broad
        );
        assert_eq!(
            with(|s| {
                s.entropy_norm = 0.5;
                s.to_start = 0.4;
                s.to_end = 0.2
            }),
            HeadLabel::SpecialSink
        );
        assert_eq!(with(|s| s.to_prev = 0.51), HeadLabel::PositionalPrevious);
        assert_eq!(with(|s| s.to_next = 0.51), HeadLabel::PositionalNext);
        assert_eq!(with(|s| s.entropy_norm = 0.5), HeadLabel::None);
    }

    #[test]
    fn alignment_of_one_hot_and_uniform_rows() {
        // 2 decoder rows over 4 source units: one one-hot, one uniform.
        let m = [0.0, 1.0, 0.0, 0.0, 0.25, 0.25, 0.25, 0.25];
        let a = matrix_alignment(&m, 4);
        assert_eq!(a.rows, 2);
        assert!((a.argmax_share - (1.0 + 0.25) / 2.0).abs() < 1e-12);
        assert!((a.entropy - 4f64.ln() / 2.0).abs() < 1e-6);
        assert!((a.entropy_norm - 0.5).abs() < 1e-6);
        // A row without mass (special tokens excluded) is skipped.
        let a = matrix_alignment(&[0.0, 0.0, 0.5, 0.5], 2);
        assert_eq!(a.rows, 1);
        assert!((a.argmax_share - 0.5).abs() < 1e-12);
        assert!((a.entropy_norm - 1.0).abs() < 1e-6);
    }

    #[test]
    fn alignment_is_defined_for_cross_attention_only() {
        let set = crate::attention::fixtures::encoder_decoder(
            &["<s>", "Ġa", "Ġb", "</s>"],
            &["</s>", "Ġx", "Ġy"],
            1,
            2,
            3,
            3,
        );
        assert!(alignment_stats(set.encoder().unwrap()).is_none());
        assert!(alignment_stats(set.decoder().unwrap()).is_none());
        let cross = set.cross().unwrap();
        let a = alignment_stats(cross).unwrap();
        assert_eq!((a.len(), a[0].len()), (2, 3));
        // peaked(): every row puts 0.7 on one source unit, 0.1 on each of the 3 others.
        let want_h = -(0.7f64 * 0.7f64.ln() + 3.0 * 0.1 * 0.1f64.ln());
        for s in a.iter().flatten() {
            assert_eq!(s.rows, 3);
            assert!((s.argmax_share - 0.7).abs() < 1e-6);
            assert!((s.entropy - want_h).abs() < 1e-5);
        }
    }

    #[test]
    fn fast_ln_is_accurate() {
        let mut worst = 0f64;
        let mut x = 1e-30f32;
        while x <= 1.0 {
            let want = (x as f64).ln();
            let rel = ((ln_f32(x) as f64 - want) / want.abs().max(1e-3)).abs();
            worst = worst.max(rel);
            x *= 1.000_37;
        }
        assert!(worst < 3e-7, "worst relative error {worst:e}");
        assert_eq!(0.0 * ln_f32(0.0), 0.0);
    }

    #[test]
    fn row_moments_match_plain_sums() {
        let row: Vec<f32> = (0..37).map(|k| ((k * 7919) % 31) as f32 / 500.0).collect();
        let q = 11;
        let [mass, entropy, dist] = row_moments(&row, q);
        let w = row.iter().map(|&w| w as f64);
        assert!((mass - w.clone().sum::<f64>()).abs() < 1e-12);
        let want: f64 = w.clone().filter(|&w| w > 0.0).map(|w| -w * w.ln()).sum();
        assert!((entropy - want).abs() < 1e-6, "{entropy} vs {want}");
        let want: f64 = w.enumerate().map(|(k, w)| w * k.abs_diff(q) as f64).sum();
        assert!((dist - want).abs() < 1e-12);
    }

    #[test]
    fn trailing_zeros_change_no_moment() {
        let mut row: Vec<f32> = (0..37).map(|k| ((k * 7919) % 31) as f32 / 500.0).collect();
        for (k, w) in row.iter_mut().enumerate().skip(13) {
            *w = if k % 2 == 0 { 0.0 } else { -0.0 };
        }
        let live = without_trailing_zeros(&row);
        assert_eq!(live.len(), 16);
        for q in [0, 5, 12, 30] {
            let (a, b) = (row_moments(&row, q), row_moments(live, q));
            assert_eq!(a.map(f64::to_bits), b.map(f64::to_bits), "query {q}");
        }
        assert!(without_trailing_zeros(&[0.0, -0.0]).is_empty());
        assert_eq!(without_trailing_zeros(&[0.0, f32::NAN, 0.0]).len(), 3);
        assert_eq!(without_trailing_zeros(&[1.0; 9]).len(), 9);
    }

    #[test]
    fn punctuation_follows_bert() {
        assert!(is_punctuation(',') && is_punctuation('$') && is_punctuation('¿'));
        assert!(is_punctuation('—') && is_punctuation('「'));
        assert!(!is_punctuation('a') && !is_punctuation('7') && !is_punctuation('é'));
    }

    #[test]
    fn stat_names_round_trip() {
        for s in Stat::ALL {
            assert_eq!(s.name().parse::<Stat>().unwrap(), s);
        }
        assert_eq!("prev".parse::<Stat>().unwrap(), Stat::ToPrev);
        // Version 1's names still work.
        assert_eq!("to_cls".parse::<Stat>().unwrap(), Stat::ToStart);
        assert_eq!("sep".parse::<Stat>().unwrap(), Stat::ToEnd);
        assert_eq!("Entropy-Norm".parse::<Stat>().unwrap(), Stat::EntropyNorm);
        assert!("bogus".parse::<Stat>().is_err());
    }

    #[test]
    fn head_stats_is_layer_major() {
        let att = synthetic(&["[CLS]", "a", "b", "c", "[SEP]"], 2, 3);
        let stats = head_stats(&att);
        assert_eq!((stats.len(), stats[0].len()), (2, 3));
        let keys = KeyClasses::of(&att);
        // The head detectors' scores need the units, so `head_stats` adds them to what
        // `matrix_stats` measures of the matrix alone.
        let mut expected = matrix_stats(att.head(1, 2), 5, &keys, &Geometry::square());
        let (prev, duplicate) = super::super::detectors::token_scores(&att).unwrap()[1][2];
        expected.prev_token_score = prev;
        expected.duplicate_token_score = duplicate;
        assert!(prev.is_finite() && duplicate.is_finite());
        assert_eq!(stats[1][2], expected);
    }

    #[test]
    fn start_and_end_shares_follow_roles_whatever_the_labels() {
        // RoBERTa-style labels, and GPT-2 style with none: the same roles give the same classes.
        let roberta = synthetic(&["<s>", "ĠHello", ",", "Ġworld", "</s>"], 1, 1);
        let keys = KeyClasses::of(&roberta);
        assert_eq!(
            (keys.start, keys.end, keys.punct),
            (vec![0], vec![4], vec![2])
        );
        let gpt2 = synthetic(&["ĠHello", "Ġ,", "Ġworld"], 1, 1);
        let keys = KeyClasses::of(&gpt2);
        assert!(keys.start.is_empty() && keys.end.is_empty());
        assert_eq!(
            keys.punct,
            [1],
            "a byte-level comma with its space is punctuation"
        );
        // An ordinary token labelled like a special token is not one.
        let mut att = synthetic(&["[CLS]", "a", "[SEP]"], 1, 1);
        let mut units = att.queries().clone();
        units.roles[2] = Role::Word;
        att = att
            .derive(att.level, false, units, None, att.weights().to_vec())
            .unwrap();
        assert!(KeyClasses::of(&att).end.is_empty());
    }

    #[test]
    fn causal_rows_normalise_entropy_by_what_they_see() {
        // Uniform over the visible keys: every row (but the first, which sees one key and is
        // left out) has normalised entropy 1.
        let n = 5;
        let mut m = vec![0f32; n * n];
        for q in 0..n {
            for k in 0..=q {
                m[q * n + k] = 1.0 / (q + 1) as f32;
            }
        }
        let s = matrix_stats(&m, n, &KeyClasses::default(), &Geometry::causal(n));
        assert!((s.entropy_norm - 1.0).abs() < 1e-6, "{}", s.entropy_norm);
        assert_eq!(s.rows, n - 1);
        // ln 2 + ln 3 + ln 4 + ln 5 over the four rows that had a choice.
        let want = (2f64.ln() + 3f64.ln() + 4f64.ln() + 5f64.ln()) / 4.0;
        assert!((s.entropy - want).abs() < 1e-6, "{}", s.entropy);
        // Bidirectionally the same matrix is far from uniform, and every row counts.
        let b = matrix_stats(&m, n, &KeyClasses::default(), &Geometry::square());
        assert!(b.entropy_norm < 0.7, "{}", b.entropy_norm);
        assert_eq!(b.rows, n);
        assert!(b.to_first.is_nan(), "no sink without a causal mask");
    }

    #[test]
    fn causal_first_token_share_and_sink_label() {
        // Every query but the first puts 0.8 on the first token and the rest on itself.
        let n = 6;
        let mut m = vec![0f32; n * n];
        m[0] = 1.0;
        for q in 1..n {
            m[q * n] = 0.8;
            m[q * n + q] = 0.2;
        }
        let s = matrix_stats(&m, n, &KeyClasses::default(), &Geometry::causal(n));
        assert_eq!(s.rows, n - 1, "the first row has no choice and is left out");
        assert!((s.to_first - 0.8).abs() < 1e-6, "{}", s.to_first);
        assert!((s.to_self - 0.2).abs() < 1e-6, "{}", s.to_self);
        assert!(s.to_next.is_nan(), "a causal mask hides every next token");
        assert_eq!(s.label, HeadLabel::FirstTokenSink);
        // The same first token as a BOS start token: the first-token sink comes first.
        let keys = KeyClasses {
            start: vec![0],
            ..KeyClasses::default()
        };
        let bos = matrix_stats(&m, n, &keys, &Geometry::causal(n));
        assert!((bos.to_start - 0.8).abs() < 1e-6);
        assert_eq!(bos.label, HeadLabel::FirstTokenSink);
        // Without the sink in the view (special tokens removed) there is no share to it.
        let without = Geometry {
            sink: None,
            ..Geometry::causal(n)
        };
        let s = matrix_stats(&m, n, &KeyClasses::default(), &without);
        assert!(s.to_first.is_nan());
        assert_ne!(s.label, HeadLabel::FirstTokenSink);
    }

    #[test]
    fn causal_geometry_comes_from_the_value() {
        use crate::attention::MaskKind;
        let att = synthetic(&["Ġa", "b", "Ġc", "Ġd"], 1, 1).with_mask(MaskKind::Causal);
        let g = Geometry::of(&att, 0);
        assert_eq!(g, Geometry::causal(4));
        let words = crate::to_words(&att);
        let g = Geometry::of(&words, 0);
        // "ab" covers tokens 0–1: it sees only itself, "c" sees two words, "d" three.
        assert_eq!(g.visible, Some(vec![1, 2, 3]));
        assert_eq!(g.sink, Some(0));
        assert_eq!(Geometry::of(&synthetic(&["a", "b"], 1, 1), 0).sink, None);
    }

    #[test]
    fn a_sliding_window_counts_only_the_keys_inside_it() {
        use crate::attention::MaskKind;
        let att = synthetic(&["Ġa", "Ġb", "Ġc", "Ġd", "Ġe"], 2, 1)
            .with_mask(MaskKind::Causal)
            .with_windows(vec![Some(2), None])
            .unwrap();
        // Layer 0 sees its own token and the one before; layer 1 every earlier one.
        assert_eq!(Geometry::of(&att, 0).visible, Some(vec![1, 2, 2, 2, 2]));
        assert_eq!(Geometry::of(&att, 1), Geometry::causal(5));
    }

    #[test]
    fn cross_attention_has_no_position_statistics() {
        let geometry = Geometry {
            square: false,
            visible: None,
            sink: None,
        };
        // 2 queries over 3 keys.
        let m = [0.5, 0.5, 0.0, 0.0, 0.0, 1.0];
        let s = matrix_stats(&m, 3, &KeyClasses::default(), &geometry);
        assert_eq!(s.rows, 2);
        assert!(s.distance.is_nan() && s.to_prev.is_nan() && s.to_self.is_nan());
        assert!((s.entropy - 2f64.ln() / 2.0).abs() < 1e-6);
    }
}
