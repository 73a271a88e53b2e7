//! Checks of imported weights: size, values, row sums, and whether a mask is causal.

use std::fmt;
use std::ops::Range;

use rayon::prelude::*;

use crate::attention::MaskKind;

use super::{ImportError, MAX_WEIGHTS};

/// How far from 1 a row may sum before `row_sums` reports it, for f32 input: JSON rounded to
/// 6 significant digits stays within 1e-5 of f32; a model's own softmax within about 1e-6.
pub const ROW_SUM_TOLERANCE: f32 = 1e-3;

/// `[2, 3, 4, 4]`.
pub fn shape_str(shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    format!("[{}]", dims.join(", "))
}

/// Imported weights that attnviz cannot draw. Each variant displays as one line that says
/// what to do; `name` is the array (`file.npz: attention`).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum CheckError {
    /// More than [`MAX_WEIGHTS`] weights.
    #[error("{name} {} holds {} weights, more than attnviz draws ({} million, 1 GiB as f32); save fewer layers or a shorter input (a[:, :, :512, :512])", shape_str(.shape), human_count(.shape.iter().map(|&d| d as f64).product()), MAX_WEIGHTS / 1_000_000)]
    TooManyWeights {
        /// The array.
        name: String,
        /// Its shape.
        shape: Vec<usize>,
    },
    /// A weight that is not a probability.
    #[error("{name} holds {} at {at}{}; give {}", weight_words(*.weight), if .weight.is_finite() && *.weight > 1.0 { ", more than 1" } else { "" }, if .weight.is_finite() { "attention probabilities (after the softmax), not scores" } else { "finite attention probabilities" })]
    NotAProbability {
        /// The array.
        name: String,
        /// The weight.
        weight: f32,
        /// Where it is.
        at: At,
    },
    /// A causal mask stated for a matrix that is not square.
    #[error("{name} says its mask is causal, but it is {queries} queries × {keys} keys; a causal mask is square (drop \"mask\" or give \"bidirectional\")")]
    CausalNotSquare {
        /// The array.
        name: String,
        /// Queries.
        queries: usize,
        /// Keys.
        keys: usize,
    },
    /// A causal mask stated, and a weight on a later key.
    #[error("{name} says its mask is causal, but {at} attends to the later key {key} with weight {weight}; drawn as causal, that weight would be hidden: drop \"mask\" (it is found from the weights) or give \"bidirectional\"")]
    NotCausal {
        /// The array.
        name: String,
        /// The query (no key).
        at: At,
        /// The later key.
        key: usize,
        /// Its weight.
        weight: f32,
    },
    /// Sliding windows for another number of layers.
    #[error("{name}: {given} layer masks for {layers} layers; give one per layer")]
    WindowCount {
        /// The array.
        name: String,
        /// Windows given.
        given: usize,
        /// Layers.
        layers: usize,
    },
    /// Sliding windows without a causal mask.
    #[error("{name} gives sliding windows, which need causal self-attention (\"mask\": \"causal\", square matrices); drop the windows or give the causal mask")]
    WindowsNeedCausal {
        /// The array.
        name: String,
    },
    /// A weight outside a layer's sliding window.
    #[error("{name} says layer {layer} has a sliding window of {window}, but head {head}, query {query} attends to key {key}, outside it, with weight {weight}; drawn as masked, that weight would be hidden: drop that layer's window or give the right one")]
    OutsideWindow {
        /// The array.
        name: String,
        /// The layer.
        layer: usize,
        /// Its window.
        window: usize,
        /// The head.
        head: usize,
        /// The query.
        query: usize,
        /// The key.
        key: usize,
        /// The weight.
        weight: f32,
    },
    /// A key/value head that is not one of the heads.
    #[error("{name}: kv_head says head {head} reads key/value head {kv}, but there are {heads} heads (0 to {}); give each head's key/value head, or drop kv_head", .heads - 1)]
    KvHead {
        /// The array.
        name: String,
        /// The query head.
        head: usize,
        /// The key/value head it names.
        kv: usize,
        /// Heads.
        heads: usize,
    },
    /// A span that is empty, out of order or too long.
    #[error("{name}: span {index} of {field}, [{start}, {end}], {fault}; give each unit's tokens as [start, end), in order")]
    Span {
        /// The array.
        name: String,
        /// The tokens field.
        field: String,
        /// The unit.
        index: usize,
        /// Its first token.
        start: usize,
        /// One past its last.
        end: usize,
        /// What is wrong.
        fault: SpanFault,
    },
    /// A word id past the words the units can hold.
    #[error("{name}: unit {unit} of {field} has word id {id}, but {units} units hold at most {units} words (ids 0 to {}); give each unit's word index, or none for special tokens", .units.saturating_sub(1))]
    WordId {
        /// The array.
        name: String,
        /// The tokens field.
        field: String,
        /// The unit.
        unit: usize,
        /// Its word id.
        id: usize,
        /// Units.
        units: usize,
    },
}

/// What is wrong with a span.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SpanFault {
    /// `start >= end`.
    #[error("is empty or reversed")]
    Empty,
    /// Starts before the unit before it ends.
    #[error("overlaps the unit before it")]
    Overlaps,
    /// Past [`super::MAX_TOKENS`].
    #[error("ends past the longest input attnviz reads (2^20 tokens)")]
    TooFar,
    /// More than one token at token level.
    #[error("covers more than one token at token level")]
    NotOneToken,
}

/// Where a weight is, as the views number it: `layer 0, head 1, query 2, key 3` (without the
/// key where it is named apart).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct At {
    /// The layer.
    pub layer: usize,
    /// The head.
    pub head: usize,
    /// The query.
    pub query: usize,
    /// The key, when named here.
    pub key: Option<usize>,
}

impl fmt::Display for At {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "layer {}, head {}, query {}",
            self.layer, self.head, self.query
        )?;
        match self.key {
            Some(key) => write!(f, ", key {key}"),
            None => Ok(()),
        }
    }
}

/// `NaN`, `infinity`, `a negative weight (-0.5)`, `1.5`: a weight that is no probability, as
/// the message names it.
fn weight_words(w: f32) -> String {
    if w.is_nan() {
        "NaN".into()
    } else if w.is_infinite() {
        "infinity".into()
    } else if w < 0.0 {
        format!("a negative weight ({w})")
    } else {
        w.to_string()
    }
}

/// Refuse a shape with more than [`MAX_WEIGHTS`] weights, before anything is allocated.
pub fn size(name: &str, shape: &[usize]) -> Result<(), ImportError> {
    let total = shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .filter(|&t| t <= MAX_WEIGHTS);
    match total {
        Some(_) => Ok(()),
        None => Err(CheckError::TooManyWeights {
            name: name.to_string(),
            shape: shape.to_vec(),
        }
        .into()),
    }
}

fn human_count(x: f64) -> String {
    if x >= 1e9 {
        format!("{:.1} billion", x / 1e9)
    } else {
        format!("{:.0} million", x / 1e6)
    }
}

/// Where `flat` falls in `shape`, as the views number it.
fn position(shape: &[usize; 4], flat: usize) -> At {
    let [_, h, q, k] = *shape;
    let (key, rest) = (flat % k, flat / k);
    let (query, rest) = (rest % q, rest / q);
    let (head, layer) = (rest % h, rest / h);
    At {
        layer,
        head,
        query,
        key: Some(key),
    }
}

/// Every weight finite and a probability (0 to 1, with a little room for rounding).
pub fn values(name: &str, shape: &[usize; 4], weights: &[f32]) -> Result<(), ImportError> {
    const ROOM: f32 = 1e-3;
    let bad = weights
        .par_iter()
        .position_first(|&w| !(w.is_finite() && (-ROOM..=1.0 + ROOM).contains(&w)));
    let Some(i) = bad else { return Ok(()) };
    Err(CheckError::NotAProbability {
        name: name.to_string(),
        weight: weights[i],
        at: position(shape, i),
    }
    .into())
}

/// Whether a square array is causal: more than one token, and every weight above the diagonal
/// exactly 0 (what a decoder's mask leaves).
pub fn is_causal(shape: &[usize; 4], weights: &[f32]) -> bool {
    let [_, _, q, k] = *shape;
    if q != k || q < 2 {
        return false;
    }
    weights.par_chunks(q * k).all(|m| {
        m.chunks_exact(k)
            .enumerate()
            .all(|(row, r)| r[row + 1..].iter().all(|&w| w == 0.0))
    })
}

/// A file that says its mask is causal must have nothing above the diagonal (but within the
/// runs of `open`, a bidirectional picture's image tokens, which see each other in full):
/// drawing such a mask hides those weights. `Ok` when `mask` is not causal or the weights agree.
pub fn stated_mask(
    name: &str,
    mask: Option<MaskKind>,
    shape: &[usize; 4],
    weights: &[f32],
    open: &[std::ops::Range<usize>],
) -> Result<(), ImportError> {
    if mask != Some(MaskKind::Causal) {
        return Ok(());
    }
    let [_, _, q, k] = *shape;
    if q != k {
        return Err(CheckError::CausalNotSquare {
            name: name.to_string(),
            queries: q,
            keys: k,
        }
        .into());
    }
    let above = weights
        .par_chunks(q * k)
        .enumerate()
        .find_map_first(|(m, matrix)| {
            matrix.chunks_exact(k).enumerate().find_map(|(row, r)| {
                let run = open.iter().find(|o| o.contains(&row));
                r[row + 1..]
                    .iter()
                    .enumerate()
                    .position(|(c, &w)| {
                        w != 0.0 && !run.is_some_and(|o| o.contains(&(row + 1 + c)))
                    })
                    .map(|c| (m, row, row + 1 + c, r[row + 1 + c]))
            })
        });
    match above {
        None => Ok(()),
        Some((m, row, key, w)) => Err(CheckError::NotCausal {
            name: name.to_string(),
            at: At {
                key: None,
                ..position(shape, (m * q + row) * k + key)
            },
            key,
            weight: w,
        }
        .into()),
    }
}

/// Sliding windows (one per layer of `shape`) need a causal mask, and every weight outside a
/// layer's window must be 0: a query `q` sees the keys `q − window + 1 ..= q`, but for a query
/// among the first `prefix` units (a prefix-LM mask's), which sees all of them. Drawn as
/// masked, a weight outside it would be hidden.
pub fn windows(
    name: &str,
    windows: &[Option<usize>],
    mask: MaskKind,
    shape: &[usize; 4],
    weights: &[f32],
    prefix: usize,
) -> Result<(), ImportError> {
    let [layers, heads, q, k] = *shape;
    if windows.len() != layers {
        return Err(CheckError::WindowCount {
            name: name.to_string(),
            given: windows.len(),
            layers,
        }
        .into());
    }
    if windows.iter().all(Option::is_none) {
        return Ok(());
    }
    if mask != MaskKind::Causal || q != k {
        return Err(CheckError::WindowsNeedCausal {
            name: name.to_string(),
        }
        .into());
    }
    let per_layer = heads * q * k;
    for (l, w) in windows.iter().enumerate() {
        let Some(w) = *w else { continue };
        let layer = &weights[l * per_layer..(l + 1) * per_layer];
        let outside = layer
            .par_chunks(q * k)
            .enumerate()
            .find_map_first(|(h, m)| {
                // The rows of a prefix-LM mask's prefix see all of it, window or not.
                (w.max(prefix)..q).find_map(|row| {
                    m[row * k..row * k + row + 1 - w]
                        .iter()
                        .position(|&x| x != 0.0)
                        .map(|c| (h, row, c, m[row * k + c]))
                })
            });
        if let Some((h, row, key, x)) = outside {
            return Err(CheckError::OutsideWindow {
                name: name.to_string(),
                layer: l,
                window: w,
                head: h,
                query: row,
                key,
                weight: x,
            }
            .into());
        }
    }
    Ok(())
}

/// The key/value head of each query head must be one of the heads.
pub fn kv_heads(name: &str, kv_head: &[usize], heads: usize) -> Result<(), ImportError> {
    match kv_head.iter().enumerate().find(|&(_, &g)| g >= heads) {
        None => Ok(()),
        Some((h, &g)) => Err(CheckError::KvHead {
            name: name.to_string(),
            head: h,
            kv: g,
            heads,
        }
        .into()),
    }
}

/// Spans (the tokens `[start, end)` each unit covers) must be non-empty, in order, apart, and
/// inside the longest input attnviz reads; at token level each covers one token.
pub fn spans(
    name: &str,
    field: &str,
    spans: &[Range<usize>],
    token_level: bool,
) -> Result<(), ImportError> {
    let mut end = 0usize;
    for (i, s) in spans.iter().enumerate() {
        let fault = if s.start >= s.end {
            SpanFault::Empty
        } else if s.start < end {
            SpanFault::Overlaps
        } else if s.end > super::MAX_TOKENS {
            SpanFault::TooFar
        } else if token_level && s.end - s.start != 1 {
            SpanFault::NotOneToken
        } else {
            end = s.end;
            continue;
        };
        return Err(CheckError::Span {
            name: name.to_string(),
            field: field.to_string(),
            index: i,
            start: s.start,
            end: s.end,
            fault,
        }
        .into());
    }
    Ok(())
}

/// Word ids index the words, of which there are at most as many as units.
pub fn word_ids(name: &str, field: &str, ids: &[Option<usize>]) -> Result<(), ImportError> {
    let n = ids.len();
    match ids
        .iter()
        .enumerate()
        .find(|(_, w)| w.is_some_and(|w| w >= n))
    {
        None => Ok(()),
        Some((i, w)) => Err(CheckError::WordId {
            name: name.to_string(),
            field: field.to_string(),
            unit: i,
            id: w.unwrap_or(0),
            units: n,
        }
        .into()),
    }
}

/// Rows that don't sum to 1: how many, and the furthest.
#[derive(Clone, Debug, PartialEq)]
pub struct RowSums {
    /// Rows further than the tolerance from 1.
    pub off: usize,
    /// All rows.
    pub rows: usize,
    /// The tolerance used.
    pub tolerance: f32,
    /// The furthest row: layer, head, query.
    pub worst: (usize, usize, usize),
    /// Its sum.
    pub worst_sum: f64,
}

impl fmt::Display for RowSums {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (l, h, q) = self.worst;
        write!(
            f,
            "{} of {} rows don't sum to 1 (by more than {}); the furthest, layer {l} head {h} \
             query {q}, sums to {:.6} (off by {:.2e}). They are drawn as given; softmax them if \
             they should be probabilities",
            self.off,
            self.rows,
            self.tolerance,
            self.worst_sum,
            (self.worst_sum - 1.0).abs()
        )
    }
}

/// Check that every row sums to 1 within `tolerance`; `None` when they all do.
pub fn row_sums(shape: &[usize; 4], weights: &[f32], tolerance: f32) -> Option<RowSums> {
    let [_, h, q, k] = *shape;
    let tol = f64::from(tolerance);
    // (off, index of the worst row, its sum)
    let (off, worst, worst_sum) = weights
        .par_chunks(k)
        .enumerate()
        .map(|(row, r)| {
            let s: f64 = r.iter().map(|&w| f64::from(w)).sum();
            (usize::from((s - 1.0).abs() > tol), row, s)
        })
        .reduce(
            || (0, 0, 1.0),
            |a, b| {
                let worse = if (b.2 - 1.0).abs() > (a.2 - 1.0).abs() {
                    b
                } else {
                    a
                };
                (a.0 + b.0, worse.1, worse.2)
            },
        );
    (off > 0).then(|| RowSums {
        off,
        rows: weights.len() / k.max(1),
        tolerance,
        worst: (worst / (h * q), worst / q % h, worst % q),
        worst_sum,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_name_where_and_what() {
        let shape = [2, 2, 2, 2];
        let mut w = vec![0.5f32; 16];
        assert!(values("attention", &shape, &w).is_ok());
        w[13] = f32::NAN;
        let e = values("attention", &shape, &w).unwrap_err().to_string();
        assert_eq!(
            e,
            "attention holds NaN at layer 1, head 1, query 0, key 1; give finite attention \
             probabilities"
        );
        w[13] = f32::INFINITY;
        assert!(values("a", &shape, &w)
            .unwrap_err()
            .to_string()
            .contains("infinity"));
        w[13] = -0.5;
        assert!(values("a", &shape, &w)
            .unwrap_err()
            .to_string()
            .contains("not scores"));
        w[13] = 3.0;
        assert!(values("a", &shape, &w)
            .unwrap_err()
            .to_string()
            .contains("more than 1"));
    }

    #[test]
    fn row_sums_report_the_furthest_row() {
        let shape = [1, 2, 2, 2];
        let mut w = vec![0.5f32; 8];
        assert_eq!(row_sums(&shape, &w, 1e-3), None);
        w[6] = 0.2; // layer 0, head 1, query 1 sums to 0.7
        w[0] = 0.49; // layer 0, head 0, query 0 sums to 0.99
        let s = row_sums(&shape, &w, 1e-3).unwrap();
        assert_eq!((s.off, s.rows, s.worst), (2, 4, (0, 1, 1)));
        assert!((s.worst_sum - 0.7).abs() < 1e-6);
        let text = s.to_string();
        assert!(text.starts_with("2 of 4 rows don't sum to 1"), "{text}");
        assert!(text.contains("off by 3.00e-1"), "{text}");
    }

    #[test]
    fn causal_means_nothing_above_the_diagonal() {
        let shape = [1, 1, 3, 3];
        let causal = [1.0, 0.0, 0.0, 0.5, 0.5, 0.0, 0.2, 0.3, 0.5];
        assert!(is_causal(&shape, &causal));
        let mut full = causal;
        full[2] = 0.1;
        assert!(!is_causal(&shape, &full));
        assert!(!is_causal(&[1, 1, 1, 1], &[1.0]));
    }

    #[test]
    fn sizes_beyond_the_limit_are_refused_without_overflow() {
        assert!(size("a", &[12, 12, 512, 512]).is_ok());
        let e = size("a", &[32, 32, 4096, 4096]).unwrap_err().to_string();
        assert!(e.contains("17.2 billion weights"), "{e}");
        assert!(size("a", &[usize::MAX, 2, 2, 2]).is_err());
    }

    /// The wording each kind of bad weight had when the message was a formatted string.
    #[test]
    fn each_weight_that_is_no_probability_is_named_as_before() {
        let say = |w: f32| {
            values("a", &[1, 1, 1, 2], &[0.5, w])
                .unwrap_err()
                .to_string()
        };
        let at = "at layer 0, head 0, query 0, key 1";
        assert_eq!(
            say(f32::NAN),
            format!("a holds NaN {at}; give finite attention probabilities")
        );
        for inf in [f32::INFINITY, f32::NEG_INFINITY] {
            assert_eq!(
                say(inf),
                format!("a holds infinity {at}; give finite attention probabilities")
            );
        }
        assert_eq!(
            say(-0.5),
            format!(
                "a holds a negative weight (-0.5) {at}; give attention probabilities (after the \
                 softmax), not scores"
            )
        );
        assert_eq!(
            say(1.5),
            format!(
                "a holds 1.5 {at}, more than 1; give attention probabilities (after the \
                 softmax), not scores"
            )
        );
    }
}
