//! Per-head statistics summed over a corpus in a fixed-size accumulator.
//!
//! Sums are kept in fixed point (i128, 64 fractional bits) rather than f64, so adding is exact
//! and associative: the result does not depend on the order in which parallel workers finish,
//! and the same corpus always gives the same bits in `corpus_stats.json`. Converting a
//! statistic to fixed point drops only what lies below 2⁻⁶⁴ (about 5·10⁻²⁰).
//!
//! A statistic a sentence does not define (NaN: the first-token share of a bidirectional model,
//! the next-token share under a causal mask, the distances of cross-attention) is left out of
//! that statistic's sums and counts, so each statistic is averaged over the sentences that define
//! it, and is NaN (`null` in JSON) where none does.

use crate::analysis::{HeadLabel, HeadStats, Stat};
use attnviz_formats::doc::corpus::{GridsByStat, SumsDoc};
use attnviz_formats::doc::router::ExpertLoadDoc;

pub use super::damage::{ImpossibleValue, SumsCell, SumsError, SumsField};

/// How many statistics each head sums.
const STATS: usize = Stat::ALL.len();

/// Fractional bits of the fixed-point sums.
const FRACTION_BITS: i32 = 64;

/// The largest value any statistic takes, with room to spare: a distance is at most the
/// sequence's length, an entropy at most its logarithm, a share at most 1; 2²⁴ positions is far
/// beyond any model's. Values read back (a journal) above it are refused, so sums cannot
/// overflow.
pub const MAX_STAT: f64 = (1u64 << 24) as f64;
/// The most query rows one head of one sentence can have (see [`MAX_STAT`]).
pub const MAX_ROWS: u64 = 1 << 24;
/// How far below 0 a statistic may fall through rounding: the entropy's `w ln w` uses an f32
/// logarithm, whose value at a weight of exactly 1 may be about −1.2·10⁻⁷ instead of 0.
pub const NEGATIVE_SLACK: f64 = 1e-6;

/// Why `v` cannot be the value of `stat` for one sentence (`None`: it can). NaN (undefined)
/// can; infinities, values below 0 (beyond rounding) and values over [`MAX_STAT`] cannot.
pub fn impossible_value(stat: Stat, v: f64) -> Option<ImpossibleValue> {
    if v.is_nan() || (-NEGATIVE_SLACK..=MAX_STAT).contains(&v) {
        return None;
    }
    Some(ImpossibleValue { stat, value: v })
}

/// `v` in fixed point (non-negative statistics; anything else is clamped into range).
fn fixed(v: f64) -> i128 {
    // `as` saturates and maps NaN to 0.
    (v * 2f64.powi(FRACTION_BITS)) as i128
}

fn float(x: i128) -> f64 {
    x as f64 / 2f64.powi(FRACTION_BITS)
}

/// Sums for one head.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct HeadSums {
    /// Sentences in which the head had at least one row with mass.
    sentences: u64,
    /// Query rows averaged over all those sentences.
    rows: u64,
    /// Σ over sentences of each statistic (order of [`Stat::ALL`]).
    sum: [i128; STATS],
    /// Σ over sentences of each statistic squared.
    sum_sq: [i128; STATS],
    /// Σ over sentences of `rows × statistic` (the token-weighted numerators).
    sum_rows: [i128; STATS],
    /// Sentences that define each statistic (not NaN): the denominators of `sum` and `sum_sq`.
    defined: [u64; STATS],
    /// Query rows of those sentences: the denominators of `sum_rows`.
    defined_rows: [u64; STATS],
}

/// Per-head statistics of many sentences, summed; `layers × heads` entries whatever the number
/// of sentences.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CorpusStats {
    layers: usize,
    heads: usize,
    sums: Vec<HeadSums>,
    /// Sentences (lines) added.
    pub sentences: u64,
    /// Of which tab-separated pairs.
    pub pairs: u64,
    /// Of which truncated to the model's maximum (`--truncate`).
    pub truncated: u64,
    /// Tokens, special tokens included, over all sentences.
    pub tokens: u64,
    /// Units of the analysed view (tokens, or words with `--words`; without the special tokens with
    /// `--no-special`) over all sentences.
    pub units: u64,
    /// A mixture-of-experts model's expert load over the sentences added (`None`: no router).
    pub expert_load: Option<ExpertLoadDoc>,
}

/// What one sentence adds besides its statistics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SentenceCounts {
    /// The line was a pair.
    pub pair: bool,
    /// The line was truncated.
    pub truncated: bool,
    /// Word-piece tokens.
    pub tokens: usize,
    /// Units of the analysed view.
    pub units: usize,
}

impl CorpusStats {
    /// An empty accumulator for a model of `layers × heads`.
    pub fn new(layers: usize, heads: usize) -> Self {
        CorpusStats {
            layers,
            heads,
            sums: vec![HeadSums::default(); layers * heads],
            sentences: 0,
            pairs: 0,
            truncated: 0,
            tokens: 0,
            units: 0,
            expert_load: None,
        }
    }

    /// Add one sentence's expert load (a mixture-of-experts model's). Every sentence of a
    /// model has the same routed layers and experts.
    ///
    /// # Panics
    /// If `load` is another router's than the sentences added before.
    pub fn add_load(&mut self, load: &ExpertLoadDoc) {
        match &mut self.expert_load {
            Some(sum) => sum.merge(load).expect("one model's routers"),
            None => self.expert_load = Some(load.clone()),
        }
    }

    /// Add one sentence's statistics (`[layer][head]`, as [`crate::analysis::head_stats`] gives
    /// them). A head with no rows in this sentence (possible only after special-token
    /// exclusion) contributes nothing to that head.
    ///
    /// # Panics
    /// If `stats` is not `layers × heads`: a model gives every sentence the same shape.
    pub fn add(&mut self, stats: &[Vec<HeadStats>], counts: SentenceCounts) {
        assert_eq!(stats.len(), self.layers, "layers");
        self.sentences += 1;
        self.pairs += counts.pair as u64;
        self.truncated += counts.truncated as u64;
        self.tokens += counts.tokens as u64;
        self.units += counts.units as u64;
        for (layer, row) in stats.iter().enumerate() {
            assert_eq!(row.len(), self.heads, "heads");
            for (head, s) in row.iter().enumerate() {
                if s.rows == 0 {
                    continue;
                }
                let acc = &mut self.sums[layer * self.heads + head];
                acc.sentences += 1;
                acc.rows += s.rows as u64;
                for (i, stat) in Stat::ALL.into_iter().enumerate() {
                    let v = stat.value(s);
                    if v.is_nan() {
                        continue;
                    }
                    acc.defined[i] += 1;
                    acc.defined_rows[i] += s.rows as u64;
                    acc.sum[i] = acc.sum[i].saturating_add(fixed(v));
                    acc.sum_sq[i] = acc.sum_sq[i].saturating_add(fixed(v * v));
                    acc.sum_rows[i] = acc.sum_rows[i].saturating_add(fixed(v * s.rows as f64));
                }
            }
        }
    }

    /// Add everything `other` holds: exactly, or not at all. Another model shape, or a count or
    /// sum that would overflow (only a damaged or edited partial file holds such numbers), is
    /// refused naming the field, and `self` is left as it was.
    pub fn merge(&mut self, other: &CorpusStats) -> Result<(), SumsError> {
        if (self.layers, self.heads) != (other.layers, other.heads) {
            return Err(SumsError::OtherShape {
                layers: other.layers,
                heads: other.heads,
                others_layers: self.layers,
                others_heads: self.heads,
            });
        }
        let mut out = self.clone();
        let add = |a: &mut u64, b: u64, field: &str| {
            *a = a.checked_add(b).ok_or_else(|| SumsError::CountOverflows {
                field: field.to_string(),
            })?;
            Ok::<(), SumsError>(())
        };
        add(&mut out.sentences, other.sentences, "sentences")?;
        add(&mut out.pairs, other.pairs, "pairs")?;
        add(&mut out.truncated, other.truncated, "truncated")?;
        add(&mut out.tokens, other.tokens, "tokens")?;
        add(&mut out.units, other.units, "units")?;
        match (&mut out.expert_load, &other.expert_load) {
            (Some(a), Some(b)) => a
                .merge(b)
                .map_err(|e| SumsError::ExpertLoad(e.to_string()))?,
            (a @ None, Some(b)) => *a = Some(b.clone()),
            _ => {}
        }
        let heads = self.heads.max(1);
        for (cell, (a, b)) in out.sums.iter_mut().zip(&other.sums).enumerate() {
            let at = |field: &'static str, i: Option<usize>| SumsCell {
                field,
                stat: i.map(|i| Stat::ALL[i]),
                layer: cell / heads,
                head: cell % heads,
            };
            let add = |x: &mut u64, y: u64, at: SumsCell| {
                *x = x
                    .checked_add(y)
                    .ok_or(SumsError::HeadCountOverflows { at })?;
                Ok::<(), SumsError>(())
            };
            add(&mut a.sentences, b.sentences, at("head_sentences", None))?;
            add(&mut a.rows, b.rows, at("rows", None))?;
            for i in 0..STATS {
                add(&mut a.defined[i], b.defined[i], at("defined", Some(i)))?;
                add(
                    &mut a.defined_rows[i],
                    b.defined_rows[i],
                    at("defined_rows", Some(i)),
                )?;
                for (field, x, y) in [
                    ("sum", &mut a.sum[i], b.sum[i]),
                    ("sum_sq", &mut a.sum_sq[i], b.sum_sq[i]),
                    ("sum_rows", &mut a.sum_rows[i], b.sum_rows[i]),
                ] {
                    *x = x.checked_add(y).ok_or(SumsError::SumOverflows {
                        at: at(field, Some(i)),
                    })?;
                }
            }
        }
        *self = out;
        Ok(())
    }

    /// Layers and heads.
    pub fn shape(&self) -> (usize, usize) {
        (self.layers, self.heads)
    }

    /// The exact sums, for a partial-statistics file: each `[layer][head]`; the fixed-point sums
    /// as decimal strings (JSON numbers hold 53 bits exactly, these hold 128), the counts as
    /// numbers. The sentence counts (`sentences`, `pairs`, …) are the caller's to write.
    pub fn sums_doc(&self) -> SumsDoc {
        fn grid<T>(stats: &CorpusStats, f: impl Fn(&HeadSums) -> T) -> Vec<Vec<T>> {
            stats
                .sums
                .chunks(stats.heads.max(1))
                .map(|l| l.iter().map(&f).collect())
                .collect()
        }
        fn by_stat<T>(stats: &CorpusStats, cell: impl Fn(&HeadSums, usize) -> T) -> GridsByStat<T> {
            Stat::ALL
                .into_iter()
                .enumerate()
                .map(|(i, stat)| (stat.name().to_string(), grid(stats, |h| cell(h, i))))
                .collect()
        }
        SumsDoc {
            defined: by_stat(self, |h, i| h.defined[i]),
            defined_rows: by_stat(self, |h, i| h.defined_rows[i]),
            fraction_bits: i64::from(FRACTION_BITS),
            head_sentences: grid(self, |h| h.sentences),
            heads: self.heads,
            layers: self.layers,
            rows: grid(self, |h| h.rows),
            sum: by_stat(self, |h, i| h.sum[i].to_string()),
            sum_rows: by_stat(self, |h, i| h.sum_rows[i].to_string()),
            sum_sq: by_stat(self, |h, i| h.sum_sq[i].to_string()),
            expert_load: self.expert_load.clone(),
        }
    }

    /// Read back what [`CorpusStats::sums_doc`] wrote, with the sentence counts, and check that
    /// the numbers can be those of a run ([`CorpusStats::check`]).
    pub fn from_sums(sums: &SumsDoc, counts: [u64; 5]) -> Result<CorpusStats, SumsError> {
        let out = Self::parse_sums(sums, counts)?;
        out.check()?;
        Ok(out)
    }

    /// Refuse numbers no run writes (a damaged or edited partial file), naming the field: more
    /// pairs or truncated sentences than sentences, a head in more sentences than there are, a
    /// statistic defined more often than its head has sentences (or rows), and sums below 0 (beyond
    /// rounding) or above `MAX_STAT` times their count.
    pub fn check(&self) -> Result<(), SumsError> {
        for (field, count) in [("pairs", self.pairs), ("truncated", self.truncated)] {
            if count > self.sentences {
                return Err(SumsError::MoreThanSentences {
                    field,
                    count,
                    sentences: self.sentences,
                });
            }
        }
        let heads = self.heads.max(1);
        let limit = |per: f64, count: u64| -> (i128, Option<i128>) {
            let one = fixed(per);
            let low = -(fixed(NEGATIVE_SLACK) + 1).saturating_mul(i128::from(count));
            (low, one.checked_mul(i128::from(count)))
        };
        for (cell, h) in self.sums.iter().enumerate() {
            let at = |field: &'static str, i: Option<usize>| SumsCell {
                field,
                stat: i.map(|i| Stat::ALL[i]),
                layer: cell / heads,
                head: cell % heads,
            };
            if h.sentences > self.sentences {
                return Err(SumsError::HeadSentences {
                    at: at("head_sentences", None),
                    count: h.sentences,
                    sentences: self.sentences,
                });
            }
            for i in 0..STATS {
                if h.defined[i] > h.sentences {
                    return Err(SumsError::Defined {
                        at: at("defined", Some(i)),
                        count: h.defined[i],
                        sentences: h.sentences,
                    });
                }
                if h.defined_rows[i] > h.rows {
                    return Err(SumsError::DefinedRows {
                        at: at("defined_rows", Some(i)),
                        count: h.defined_rows[i],
                        rows: h.rows,
                    });
                }
                let (low, high) = limit(MAX_STAT, h.defined[i]);
                let (_, high_sq) = limit(MAX_STAT * MAX_STAT, h.defined[i]);
                let (low_rows, high_rows) = limit(MAX_STAT, h.defined_rows[i]);
                for (field, sum, low, high) in [
                    ("sum", h.sum[i], low, high),
                    ("sum_sq", h.sum_sq[i], 0, high_sq),
                    ("sum_rows", h.sum_rows[i], low_rows, high_rows),
                ] {
                    if sum < low {
                        return Err(SumsError::Negative {
                            at: at(field, Some(i)),
                            sum,
                        });
                    }
                    if high.is_some_and(|high| sum > high) {
                        return Err(SumsError::Unreachable {
                            at: at(field, Some(i)),
                            sum,
                            count: h.defined[i],
                        });
                    }
                }
            }
        }
        Ok(())
    }

    fn parse_sums(sums: &SumsDoc, counts: [u64; 5]) -> Result<CorpusStats, SumsError> {
        if sums.fraction_bits != i64::from(FRACTION_BITS) {
            return Err(SumsError::FractionBits {
                expected: FRACTION_BITS,
            });
        }
        let (layers, heads) = (sums.layers, sums.heads);
        if layers == 0 || heads == 0 || layers.saturating_mul(heads) > 1 << 20 {
            return Err(SumsError::Shape { layers, heads });
        }
        let mut out = CorpusStats::new(layers, heads);
        [
            out.sentences,
            out.pairs,
            out.truncated,
            out.tokens,
            out.units,
        ] = counts;
        if let Some(load) = &sums.expert_load {
            if !load.is_consistent() {
                return Err(SumsError::ExpertLoad(
                    "expert_load: its rows do not each count tokens × top_k choices".into(),
                ));
            }
            out.expert_load = Some(load.clone());
        }
        // Each grid's cells in head order, checked to be `layers` rows of `heads`.
        fn cells<T>(
            grid: Option<&Vec<Vec<T>>>,
            field: SumsField,
            layers: usize,
            heads: usize,
        ) -> Result<impl Iterator<Item = &T>, SumsError> {
            let rows = grid
                .filter(|r| r.len() == layers)
                .ok_or(SumsError::Layers { field, layers })?;
            if rows.iter().any(|r| r.len() != heads) {
                return Err(SumsError::Heads { field, heads });
            }
            Ok(rows.iter().flatten())
        }
        let plain = |field| SumsField { field, stat: None };
        for (h, &n) in out.sums.iter_mut().zip(cells(
            Some(&sums.head_sentences),
            plain("head_sentences"),
            layers,
            heads,
        )?) {
            h.sentences = n;
        }
        for (h, &n) in
            out.sums
                .iter_mut()
                .zip(cells(Some(&sums.rows), plain("rows"), layers, heads)?)
        {
            h.rows = n;
        }
        type Counts = fn(&mut HeadSums) -> &mut [u64; STATS];
        for (field, grids, pick) in [
            ("defined", &sums.defined, (|h| &mut h.defined) as Counts),
            ("defined_rows", &sums.defined_rows, |h| &mut h.defined_rows),
        ] {
            for (k, stat) in Stat::ALL.into_iter().enumerate() {
                let at = SumsField {
                    field,
                    stat: Some(stat),
                };
                let values = cells(grids.get(stat.name()), at, layers, heads)?;
                for (h, &n) in out.sums.iter_mut().zip(values) {
                    pick(h)[k] = n;
                }
            }
        }
        type Sums = fn(&mut HeadSums) -> &mut [i128; STATS];
        for (field, grids, pick) in [
            ("sum", &sums.sum, (|h| &mut h.sum) as Sums),
            ("sum_sq", &sums.sum_sq, |h| &mut h.sum_sq),
            ("sum_rows", &sums.sum_rows, |h| &mut h.sum_rows),
        ] {
            for (k, stat) in Stat::ALL.into_iter().enumerate() {
                let at = SumsField {
                    field,
                    stat: Some(stat),
                };
                let values = cells(grids.get(stat.name()), at, layers, heads)?;
                for (h, text) in out.sums.iter_mut().zip(values) {
                    pick(h)[k] = text.parse::<i128>().map_err(|_| SumsError::NotInteger {
                        field: at,
                        value: text.clone(),
                    })?;
                }
            }
        }
        Ok(out)
    }

    /// The sentence counts in the order [`CorpusStats::from_sums`] takes them: sentences,
    /// pairs, truncated, tokens, units.
    pub fn counts(&self) -> [u64; 5] {
        [
            self.sentences,
            self.pairs,
            self.truncated,
            self.tokens,
            self.units,
        ]
    }

    /// Per-sentence means (each sentence weighs the same, as in Clark et al. 2019), `[layer][head]`,
    /// labelled with [`HeadLabel::classify`]. `rows` is the number of query rows behind each
    /// head's figures over the whole corpus.
    pub fn mean_per_sentence(&self) -> Vec<Vec<HeadStats>> {
        self.grid(|acc, i| float(acc.sum[i]) / acc.defined[i] as f64)
    }

    /// Standard deviation over sentences (population, `ddof = 0`) of each statistic; `label` is
    /// [`HeadLabel::None`] and `rows` as in [`CorpusStats::mean_per_sentence`].
    pub fn sd_per_sentence(&self) -> Vec<Vec<HeadStats>> {
        let mut grid = self.grid(|acc, i| {
            let n = acc.defined[i] as f64;
            let mean = float(acc.sum[i]) / n;
            (float(acc.sum_sq[i]) / n - mean * mean).max(0.0).sqrt()
        });
        for s in grid.iter_mut().flatten() {
            s.label = HeadLabel::None;
        }
        grid
    }

    /// Means over every query row of the corpus (each sentence weighs by its rows, so long
    /// sentences count more), labelled with [`HeadLabel::classify`].
    pub fn mean_per_row(&self) -> Vec<Vec<HeadStats>> {
        self.grid(|acc, i| float(acc.sum_rows[i]) / acc.defined_rows[i] as f64)
    }

    /// Sentences behind each head's figures, `[layer][head]` (equal to [`CorpusStats::sentences`]
    /// except for heads with rows without mass).
    pub fn sentences_per_head(&self) -> Vec<Vec<u64>> {
        self.sums
            .chunks(self.heads.max(1))
            .map(|l| l.iter().map(|a| a.sentences).collect())
            .collect()
    }

    /// Each head's statistics from `value(sums, index of the statistic)`, NaN for a statistic no
    /// sentence defined.
    fn grid(&self, value: impl Fn(&HeadSums, usize) -> f64) -> Vec<Vec<HeadStats>> {
        self.sums
            .chunks(self.heads.max(1))
            .map(|layer| {
                layer
                    .iter()
                    .map(|acc| {
                        let v = |i: usize| {
                            if acc.defined[i] == 0 || acc.defined_rows[i] == 0 {
                                f64::NAN
                            } else {
                                value(acc, i)
                            }
                        };
                        HeadStats::from_values(
                            |stat| v(Stat::ALL.iter().position(|&s| s == stat).unwrap_or(0)),
                            acc.rows as usize,
                        )
                    })
                    .collect()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn sums_json(acc: &CorpusStats) -> Value {
        serde_json::to_value(acc.sums_doc()).unwrap()
    }

    /// Sums read back from JSON, the error in words.
    fn from_sums_json(v: &Value, counts: [u64; 5]) -> Result<CorpusStats, String> {
        let doc: SumsDoc = serde_json::from_value(v.clone()).map_err(|e| e.to_string())?;
        CorpusStats::from_sums(&doc, counts).map_err(|e| e.to_string())
    }

    fn stats(v: f64, rows: usize) -> HeadStats {
        HeadStats {
            entropy: v,
            entropy_norm: v / 10.0,
            distance: 2.0 * v,
            to_start: 0.1,
            to_end: v / 100.0,
            to_first: 0.2,
            to_punct: 0.0,
            to_self: 0.3,
            to_prev: 0.6,
            to_next: 1e-9 * v,
            prev_token_score: 1e-10 * v,
            duplicate_token_score: 1e-11 * v,
            rows,
            label: HeadLabel::None,
        }
    }

    #[test]
    fn fields_follow_stat_order() {
        // `grid` fills HeadStats by position; it must match Stat::ALL's order.
        let s = stats(3.0, 5);
        let mut acc = CorpusStats::new(1, 1);
        acc.add(&[vec![s]], SentenceCounts::default());
        let mean = acc.mean_per_sentence()[0][0];
        for stat in Stat::ALL {
            assert!(
                (stat.value(&mean) - stat.value(&s)).abs()
                    <= (1e-15 * stat.value(&s).abs()).max(6e-20),
                "{}",
                stat.name()
            );
        }
    }

    #[test]
    fn means_sds_and_row_weighting_follow_their_definitions() {
        let sentences = [(1.5, 4usize), (2.0, 10), (4.25, 7)];
        let mut acc = CorpusStats::new(1, 2);
        for &(v, rows) in &sentences {
            let counts = SentenceCounts {
                tokens: rows,
                units: rows,
                ..Default::default()
            };
            acc.add(&[vec![stats(v, rows), stats(1.0, rows)]], counts);
        }
        let n = sentences.len() as f64;
        let mean: f64 = sentences.iter().map(|s| s.0).sum::<f64>() / n;
        let sd = (sentences.iter().map(|s| (s.0 - mean).powi(2)).sum::<f64>() / n).sqrt();
        let rows: usize = sentences.iter().map(|s| s.1).sum();
        let weighted: f64 = sentences.iter().map(|s| s.0 * s.1 as f64).sum::<f64>() / rows as f64;
        let m = &acc.mean_per_sentence()[0][0];
        assert!((m.entropy - mean).abs() < 1e-14);
        assert!((m.distance - 2.0 * mean).abs() < 1e-14);
        // Fixed point keeps 2⁻⁶⁴ absolute: three terms of at most 5.4e-20 error each.
        assert!((m.to_next - 1e-9 * mean).abs() < 2e-19);
        assert_eq!(m.rows, rows);
        assert_eq!(m.label, HeadLabel::PositionalPrevious);
        let s = &acc.sd_per_sentence()[0][0];
        assert!((s.entropy - sd).abs() < 1e-12);
        assert!(s.to_start.abs() < 1e-9, "constant statistic has sd 0");
        let w = &acc.mean_per_row()[0][0];
        assert!((w.entropy - weighted).abs() < 1e-14);
        assert_eq!(acc.sentences, 3);
        assert_eq!(acc.tokens, rows as u64);
        assert_eq!(acc.sentences_per_head(), vec![vec![3, 3]]);
    }

    #[test]
    fn sums_do_not_depend_on_order_or_grouping() {
        let values: Vec<f64> = (0..200)
            .map(|i| 0.1 + (i as f64 * 0.7371).sin().abs())
            .collect();
        let mut forward = CorpusStats::new(1, 1);
        for &v in &values {
            forward.add(&[vec![stats(v, 3)]], SentenceCounts::default());
        }
        let mut halves = [CorpusStats::new(1, 1), CorpusStats::new(1, 1)];
        for (i, &v) in values.iter().enumerate().rev() {
            halves[i % 2].add(&[vec![stats(v, 3)]], SentenceCounts::default());
        }
        let mut merged = halves[1].clone();
        merged.merge(&halves[0]).unwrap();
        assert_eq!(merged, forward);
    }

    #[test]
    fn sums_survive_a_round_trip_through_json_exactly() {
        let mut acc = CorpusStats::new(2, 3);
        for v in [0.1, 7.25, 1e-12, 3.0] {
            let row: Vec<HeadStats> = (0..3).map(|h| stats(v + h as f64, 4 + h)).collect();
            let counts = SentenceCounts {
                pair: v > 1.0,
                truncated: v > 5.0,
                tokens: 9,
                units: 7,
            };
            acc.add(&[row.clone(), row], counts);
        }
        let text = sums_json(&acc).to_string();
        let back = from_sums_json(&serde_json::from_str(&text).unwrap(), acc.counts()).unwrap();
        assert_eq!(back, acc);
        assert!(text.contains(&format!("\"{}\"", acc.sums[0].sum[0])));
        let mut broken: Value = serde_json::from_str(&text).unwrap();
        broken["sum"]["entropy"][1][2] = json!("1.5");
        let e = from_sums_json(&broken, acc.counts()).unwrap_err();
        assert!(e.contains("sum.entropy"), "{e}");
    }

    #[test]
    fn merging_refuses_to_wrap_and_sums_read_back_are_checked() {
        let mut a = CorpusStats::new(1, 1);
        a.add(&[vec![stats(1.0, 3)]], SentenceCounts::default());
        let mut b = a.clone();
        b.tokens = u64::MAX;
        a.tokens = 2;
        let before = a.clone();
        let e = a.merge(&b).unwrap_err().to_string();
        assert_eq!(e, "tokens: the sum of the files' values overflows 64 bits");
        assert_eq!(a, before, "a refused merge adds nothing");
        let mut c = before.clone();
        c.sums[0].sum[0] = i128::MAX;
        let mut d = before.clone();
        let e = d.merge(&c).unwrap_err().to_string();
        assert!(e.starts_with("sums: sum.entropy of layer 0, head 0"), "{e}");
        let e = a.merge(&CorpusStats::new(2, 1)).unwrap_err().to_string();
        assert!(e.contains("2 layers × 1 heads"), "{e}");
        // Read back: a negative sum, a sum its count cannot reach, more pairs than sentences.
        for ((field, stat, value), words) in [
            (("sum", "to_self", "-1000000000000000000000"), "below 0"),
            (
                ("sum", "distance", "1000000000000000000000000000000000"),
                "can add up to",
            ),
            (("sum_sq", "entropy", "-1"), "below 0"),
        ] {
            let mut v = sums_json(&before);
            v[field][stat][0][0] = json!(value);
            let e = from_sums_json(&v, before.counts()).unwrap_err();
            assert!(e.contains(words) && e.contains(stat), "{e}");
        }
        let e = from_sums_json(&sums_json(&before), [1, 2, 0, 3, 3]).unwrap_err();
        assert_eq!(e, "pairs is 2, more than the 1 sentences");
        // What a sentence cannot hold.
        assert!(impossible_value(Stat::Entropy, f64::INFINITY).is_some());
        assert!(impossible_value(Stat::ToSelf, -0.1).is_some());
        assert!(impossible_value(Stat::Distance, 1e30).is_some());
        assert!(
            impossible_value(Stat::Entropy, -1e-7).is_none(),
            "rounding below 0"
        );
        assert!(
            impossible_value(Stat::ToFirst, f64::NAN).is_none(),
            "undefined"
        );
    }

    #[test]
    fn heads_without_rows_are_left_out_of_their_mean() {
        let mut acc = CorpusStats::new(1, 1);
        acc.add(&[vec![stats(2.0, 5)]], SentenceCounts::default());
        acc.add(&[vec![stats(9.0, 0)]], SentenceCounts::default());
        assert_eq!(acc.sentences, 2);
        assert_eq!(acc.sentences_per_head(), vec![vec![1]]);
        assert!((acc.mean_per_sentence()[0][0].entropy - 2.0).abs() < 1e-15);
    }

    #[test]
    fn undefined_statistics_are_left_out_of_their_own_means_only() {
        let mut acc = CorpusStats::new(1, 2);
        let mut bidirectional = stats(2.0, 4);
        bidirectional.to_first = f64::NAN;
        let causal = stats(4.0, 6);
        let mut never = stats(1.0, 3);
        never.to_first = f64::NAN;
        acc.add(&[vec![bidirectional, never]], SentenceCounts::default());
        acc.add(&[vec![causal, never]], SentenceCounts::default());
        let mean = &acc.mean_per_sentence()[0];
        // Entropy averages both sentences, the first-token share only the one that defines it.
        assert!((mean[0].entropy - 3.0).abs() < 1e-15);
        assert!((mean[0].to_first - 0.2).abs() < 1e-15);
        assert!(
            mean[1].to_first.is_nan(),
            "no sentence defined it: NaN, not 0"
        );
        let per_row = &acc.mean_per_row()[0];
        assert!((per_row[0].entropy - (2.0 * 4.0 + 4.0 * 6.0) / 10.0).abs() < 1e-14);
        assert!((per_row[0].to_first - 0.2).abs() < 1e-15);
        assert!(per_row[1].to_first.is_nan());
        let sd = &acc.sd_per_sentence()[0];
        assert!(sd[0].to_first.abs() < 1e-9, "one value: sd 0");
        assert!(sd[1].to_first.is_nan());
        assert_eq!(mean[0].rows, 10);
        // The counts survive the partial file, so a merge averages the same way.
        let back = from_sums_json(&sums_json(&acc), acc.counts()).unwrap();
        assert_eq!(back, acc);
        let summary = serde_json::to_value(mean[1]).unwrap();
        assert_eq!(summary["to_first"], Value::Null);
    }
}
