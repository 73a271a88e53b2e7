//! Checks that keep hostile or corrupt model files from costing unbounded time or memory, or
//! from producing silent garbage. They know no model family: a family describes which config
//! values are which tensor dimensions ([`ConfigDim`], [`ConfigCount`]), and the rest is generic.
//!
//! - Config values against the checkpoint: every size in config.json that decides an
//!   allocation must equal a dimension of a tensor that is really in the file, so that nothing is
//!   allocated from a number the file cannot back ([`config_matches`]).
//! - Finite weights: [`first_non_finite`] finds NaN or ±inf in a tensor at load.
//! - Captured attention: [`capture_bytes`] sizes the capture with checked arithmetic before it
//!   is allocated, and [`check_rows`] checks that every row is finite and sums to 1 before
//!   anything is written.

use std::path::Path;

use super::config::{ConfigError, Held};
use super::weights::Checkpoint;

/// A config.json value that must equal one dimension of a tensor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigDim {
    /// The field in config.json (`vocab_size`).
    pub field: &'static str,
    /// Its value.
    pub value: usize,
    /// The tensor, named as the family names it (without the checkpoint's prefix).
    pub tensor: String,
    /// Which dimension of the tensor it is.
    pub axis: usize,
}

impl ConfigDim {
    /// `field`'s `value` must be dimension `axis` of `tensor`.
    pub fn new(field: &'static str, value: usize, tensor: impl Into<String>, axis: usize) -> Self {
        ConfigDim {
            field,
            value,
            tensor: tensor.into(),
            axis,
        }
    }
}

/// A config.json count of numbered blocks (`num_hidden_layers`) whose tensors the checkpoint
/// must hold: block `i` is present when the tensor `tensor(i)` is.
pub struct ConfigCount {
    /// The field in config.json.
    pub field: &'static str,
    /// Its value.
    pub value: usize,
    /// What a block is called, singular (`layer`).
    pub block: &'static str,
    /// A tensor every block has, by block index (from the family's table of names).
    pub tensor: Box<dyn Fn(usize) -> String>,
}

impl ConfigCount {
    /// `field`'s `value` blocks, each called a `block`, must be in the checkpoint: block `i`
    /// has the tensor `tensor(i)`.
    pub fn new(
        field: &'static str,
        value: usize,
        block: &'static str,
        tensor: impl Fn(usize) -> String + 'static,
    ) -> Self {
        ConfigCount {
            field,
            value,
            block,
            tensor: Box::new(tensor),
        }
    }
}

/// Check `dims` and `counts` against the tensors in `ckpt`, before anything is allocated from
/// them. The first disagreement is an error naming the field, config.json and the weight file.
pub fn config_matches(
    config: &Path,
    ckpt: &Checkpoint,
    dims: &[ConfigDim],
    counts: &[ConfigCount],
) -> Result<(), ConfigError> {
    let mismatch = |field: &'static str, value: usize, held: Held| ConfigError::Mismatch {
        path: config.to_path_buf(),
        field,
        value,
        held: Box::new(held),
    };
    for d in dims {
        let Some((name, shape)) = ckpt.shape_of(&d.tensor) else {
            return Err(mismatch(
                d.field,
                d.value,
                Held::NoTensor {
                    weights: ckpt.path().to_path_buf(),
                    tensor: format!("{}{}", ckpt.prefix(), d.tensor),
                },
            ));
        };
        if shape.get(d.axis) != Some(&d.value) {
            return Err(mismatch(
                d.field,
                d.value,
                Held::Shape {
                    weights: ckpt.path().to_path_buf(),
                    tensor: name,
                    shape: shape.to_vec(),
                    axis: d.axis,
                },
            ));
        }
    }
    for c in counts {
        // Counting stops at the first block missing, and at most at the value itself, so a
        // count of 10¹⁸ costs no more than the blocks the file really has.
        let present = (0..c.value)
            .take_while(|&i| ckpt.shape_of(&(c.tensor)(i)).is_some())
            .count();
        if present < c.value {
            return Err(mismatch(
                c.field,
                c.value,
                Held::Blocks {
                    weights: ckpt.path().to_path_buf(),
                    block: c.block,
                    present,
                    missing: format!("{}{}", ckpt.prefix(), (c.tensor)(present)),
                },
            ));
        }
    }
    Ok(())
}

pub use crate::kernels::first_non_finite;

/// How far a row of attention probabilities may sum from 1 (f32 softmax over up to a few
/// thousand keys rounds to about 1e-5).
pub const ROW_SUM_TOLERANCE: f32 = 1e-3;

/// What is wrong with a row of attention weights.
#[derive(Clone, Copy, Debug, PartialEq, thiserror::Error)]
pub enum RowProblem {
    /// A value that is not finite (NaN or an infinity), at this key.
    #[error("holds {value} at key {key}")]
    NotFinite {
        /// The value.
        value: f32,
        /// Its key, from 0.
        key: usize,
    },
    /// Finite weights that do not sum to 1.
    #[error("sums to {0}, not 1")]
    Sum(f32),
}

/// A captured attention row that is not a probability distribution.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("the attention of layer {layer}, head {head}, row {row} {problem}; the model's weights overflow on this input, so its attention means nothing")]
pub struct BadRow {
    /// Layer, from 0.
    pub layer: usize,
    /// Head, from 0.
    pub head: usize,
    /// Row (query token), from 0.
    pub row: usize,
    /// What is wrong: "holds NaN", "sums to 0.5, not 1".
    pub problem: RowProblem,
}

/// Check `probs` (`[layers, heads, n, n]`, row-major) row by row: every value finite and each
/// row summing to 1 within [`ROW_SUM_TOLERANCE`]. Returns the first bad row.
///
/// One pass: each row is summed in eight lanes (which vectorises); NaN or ±inf anywhere makes
/// the sum NaN or infinite, so only a row whose sum is off is looked at again, to say why.
/// Heads are checked in parallel.
pub fn check_rows(probs: &[f32], layers: usize, heads: usize, n: usize) -> Result<(), BadRow> {
    check_rect_rows(probs, layers, heads, n, n)
}

/// [`check_rows`] for `[layers, heads, queries, keys]` (cross-attention: decoder queries over
/// encoder keys).
pub fn check_rect_rows(
    probs: &[f32],
    layers: usize,
    heads: usize,
    queries: usize,
    keys: usize,
) -> Result<(), BadRow> {
    check_rows_of(probs, [layers, heads, queries, keys], false)
}

/// [`check_rect_rows`] for attention with a learned sink in its softmax (gpt-oss): each row
/// sums to at most 1 (within [`ROW_SUM_TOLERANCE`]), the rest being the sink's share.
pub fn check_rows_with_sinks(
    probs: &[f32],
    layers: usize,
    heads: usize,
    queries: usize,
    keys: usize,
) -> Result<(), BadRow> {
    check_rows_of(probs, [layers, heads, queries, keys], true)
}

fn check_rows_of(probs: &[f32], shape: [usize; 4], sinks: bool) -> Result<(), BadRow> {
    use rayon::prelude::*;
    let [layers, heads, queries, keys] = shape;
    if queries == 0 || keys == 0 {
        return Ok(());
    }
    let len = (layers * heads * queries * keys).min(probs.len());
    let bad = probs[..len]
        .par_chunks(queries * keys)
        .enumerate()
        .find_map_first(|(h, head)| {
            head.chunks_exact(keys)
                .enumerate()
                .find_map(|(row, values)| {
                    let sum = lane_sum(values);
                    let fits = if sinks {
                        (0.0..=1.0 + ROW_SUM_TOLERANCE).contains(&sum)
                    } else {
                        (sum - 1.0).abs() <= ROW_SUM_TOLERANCE
                    };
                    if fits {
                        return None;
                    }
                    let problem = match first_non_finite(values) {
                        Some(key) => RowProblem::NotFinite {
                            value: values[key],
                            key,
                        },
                        None => RowProblem::Sum(sum),
                    };
                    Some(BadRow {
                        layer: h / heads,
                        head: h % heads,
                        row,
                        problem,
                    })
                })
        });
    bad.map_or(Ok(()), Err)
}

/// The sum of `values`, accumulated in eight lanes.
fn lane_sum(values: &[f32]) -> f32 {
    let mut lanes = [0f32; 8];
    let chunks = values.chunks_exact(8);
    let tail: f32 = chunks.remainder().iter().sum();
    for c in chunks {
        for (l, v) in lanes.iter_mut().zip(c) {
            *l += v;
        }
    }
    lanes.iter().sum::<f32>() + tail
}

/// What one sequence's capture holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CaptureShape {
    /// Layers.
    pub layers: usize,
    /// Heads per layer.
    pub heads: usize,
    /// Size of one head's query and key vectors.
    pub head_dim: usize,
    /// Whether query and key vectors are kept too.
    pub query_key: bool,
}

/// Bytes the captures of sequences of `lengths` tokens take (`layers × heads × n²` f32
/// probabilities each, plus `2 × layers × heads × n × head_dim` for query/key vectors), or
/// `None` if the count overflows.
pub fn capture_bytes(shape: CaptureShape, lengths: &[usize]) -> Option<u64> {
    let per_head = |n: u64| -> Option<u64> {
        let probs = n.checked_mul(n)?;
        let qk = if shape.query_key {
            n.checked_mul(shape.head_dim as u64)?.checked_mul(2)?
        } else {
            0
        };
        probs.checked_add(qk)
    };
    lengths.iter().try_fold(0u64, |total, &n| {
        let floats = per_head(n as u64)?
            .checked_mul(shape.layers as u64)?
            .checked_mul(shape.heads as u64)?;
        total.checked_add(floats.checked_mul(4)?)
    })
}

/// This machine's memory in bytes: `MemTotal` in /proc/meminfo (which a container's limits
/// may lower), else the physical memory the system reports.
pub fn total_memory() -> Option<u64> {
    let from_meminfo = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            kib.checked_mul(1024)
        });
    from_meminfo.or_else(physical_memory)
}

/// This machine's physical memory in bytes, where the system says.
pub fn physical_memory() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: sysinfo fills the zeroed struct we pass and reads nothing else.
        let mut info: libc::sysinfo = unsafe { std::mem::zeroed() };
        // SAFETY: `info` is a valid, writable sysinfo struct.
        if unsafe { libc::sysinfo(&mut info) } == 0 {
            return (info.totalram as u64).checked_mul(info.mem_unit.max(1) as u64);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_first_non_finite_value() {
        let mut v = vec![0.5f32; 10_000];
        assert_eq!(first_non_finite(&v), None);
        v[7777] = f32::NAN;
        assert_eq!(first_non_finite(&v), Some(7777));
        v[300] = f32::NEG_INFINITY;
        assert_eq!(first_non_finite(&v), Some(300));
        v[0] = f32::INFINITY;
        assert_eq!(first_non_finite(&v), Some(0));
        // Past the first block of 64 Ki values.
        let mut big = vec![1.0f32; 3 << 16];
        big[(2 << 16) + 5] = f32::NAN;
        assert_eq!(first_non_finite(&big), Some((2 << 16) + 5));
        // The largest finite values and subnormals are finite.
        assert_eq!(
            first_non_finite(&[f32::MAX, f32::MIN, f32::MIN_POSITIVE / 2.0, -0.0]),
            None
        );
        assert_eq!(first_non_finite(&[]), None);
    }

    #[test]
    fn rows_must_be_distributions() {
        // 2 layers × 2 heads × 3 × 3, every row [0.2, 0.3, 0.5].
        let good: Vec<f32> = [0.2, 0.3, 0.5].repeat(12);
        assert_eq!(check_rows(&good, 2, 2, 3), Ok(()));

        let mut nan = good.clone();
        // layer 1, head 0, row 2, key 1: index ((1·2 + 0)·3 + 2)·3 + 1 = 25.
        nan[25] = f32::NAN;
        let err = check_rows(&nan, 2, 2, 3).unwrap_err();
        assert_eq!((err.layer, err.head, err.row), (1, 0, 2));
        assert!(err.problem.to_string().contains("NaN at key 1"), "{err}");

        let mut off = good.clone();
        // layer 0, head 1, row 0.
        off[9] = 0.0;
        let err = check_rows(&off, 2, 2, 3).unwrap_err();
        assert_eq!((err.layer, err.head, err.row), (0, 1, 0));
        assert!(err.problem.to_string().contains("sums to 0.8"), "{err}");
        let msg = err.to_string();
        assert!(msg.starts_with("the attention of layer 0, head 1, row 0"));
        assert!(!msg.contains('\n'));

        // Rows of 21 (eight-lane sums and a tail), 3 layers × 4 heads; bad rows in two heads:
        // the first by position is reported.
        let n = 21;
        let mut long = vec![1.0 / n as f32; 3 * 4 * n * n];
        assert_eq!(check_rows(&long, 3, 4, n), Ok(()));
        let at = |l: usize, h: usize, r: usize, k: usize| ((l * 4 + h) * n + r) * n + k;
        long[at(2, 1, 5, 20)] = f32::INFINITY;
        long[at(1, 3, 7, 2)] = -f32::INFINITY;
        let err = check_rows(&long, 3, 4, n).unwrap_err();
        assert_eq!((err.layer, err.head, err.row), (1, 3, 7), "{err}");
        assert!(err.problem.to_string().contains("-inf at key 2"), "{err}");
        long[at(1, 3, 7, 2)] = 1.0 / n as f32;
        let err = check_rows(&long, 3, 4, n).unwrap_err();
        assert_eq!((err.layer, err.head, err.row), (2, 1, 5), "{err}");
        assert!(err.problem.to_string().contains("inf at key 20"), "{err}");
    }

    #[test]
    fn capture_sizes_use_checked_arithmetic() {
        let shape = CaptureShape {
            layers: 6,
            heads: 12,
            head_dim: 32,
            query_key: false,
        };
        // MiniLM at 512 tokens: 6·12·512²·4 bytes = 75.5 MB.
        assert_eq!(capture_bytes(shape, &[512]), Some(75_497_472));
        let qk = CaptureShape {
            query_key: true,
            ..shape
        };
        assert_eq!(
            capture_bytes(qk, &[10, 20]),
            Some(6 * 12 * 4 * (100 + 2 * 10 * 32 + 400 + 2 * 20 * 32))
        );
        let huge = CaptureShape {
            layers: usize::MAX / 2,
            ..shape
        };
        assert_eq!(capture_bytes(huge, &[512]), None);
        assert_eq!(capture_bytes(shape, &[usize::MAX]), None);
    }
}
