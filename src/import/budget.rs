//! What reading and drawing a file may cost: the memory budget, what each weight costs the
//! outputs asked for, and the estimate checked from the file's headers before anything is
//! inflated or converted.
//!
//! A file states its arrays' shapes before their data (`.npy` headers, the safetensors header),
//! so the memory a file needs is known before it is read: a 1 MB `.npz` can declare 2²⁸ weights
//! that deflate inflates to 1 GiB, and every view after it takes more. The estimate adds, for
//! every array that will be read, what it takes once decoded (f32 weights, i64 integers, the
//! strings), what reading it holds meanwhile (a memory-mapped safetensors tensor), and what the
//! caller's outputs cost on top of each weight and of each cell of one matrix ([`Cost`], measured
//! per output by the caller). A file whose estimate exceeds the budget is refused with one line.

use std::fmt;

/// What the outputs cost beyond the f32 weights themselves, in bytes: per weight of every
/// decoded array (copies, the statistics, the HTML payload), and per cell of the largest
/// single matrix (views of one layer and head: the terminal's strongest links, a figure).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cost {
    /// Bytes per weight of every decoded array.
    pub per_weight: u64,
    /// Bytes per cell (query × key) of the largest matrix of one layer and head.
    pub per_cell: u64,
}

/// The memory budget of a read, and where it came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Bytes.
    pub bytes: u64,
    /// Whether the caller gave it (else it is [`default_budget`]).
    pub given: bool,
}

impl Budget {
    /// `given` bytes, or the default.
    pub fn new(given: Option<u64>) -> Budget {
        match given {
            Some(bytes) => Budget { bytes, given: true },
            None => Budget {
                bytes: default_budget(),
                given: false,
            },
        }
    }
}

impl fmt::Display for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let size = crate::model::format_bytes(self.bytes);
        if self.given {
            write!(f, "the memory budget of {size}")
        } else {
            write!(
                f,
                "the default memory budget of {size} (half of this machine's memory, or of this \
                 process's address-space limit)"
            )
        }
    }
}

/// Half of this machine's memory (the model runs' default capture budget), or half of the
/// process's address-space limit (`ulimit -v`) when that is lower: past it an allocation fails
/// and the process aborts.
pub fn default_budget() -> u64 {
    let machine = crate::model::default_capture_budget();
    match address_space_limit() {
        Some(limit) => machine.min(limit / 2),
        None => machine,
    }
}

/// The soft address-space limit (`RLIMIT_AS`), if one is set.
fn address_space_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes the limit into the struct we own and reads nothing else.
        if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut limit) } == 0
            && limit.rlim_cur != libc::RLIM_INFINITY
        {
            // rlim_t is u64 here, not on every target.
            #[allow(clippy::unnecessary_cast)]
            return Some(limit.rlim_cur as u64);
        }
    }
    None
}

/// What one array will take once read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Declared {
    /// Its shape, from the file's header.
    pub shape: Vec<usize>,
    /// Bytes once decoded (4 per float, 8 per integer, the strings' worst case).
    pub decoded: u64,
    /// Bytes held while it is read (a memory-mapped tensor's data, a stream's chunk).
    pub transient: u64,
}

impl Declared {
    /// Number of elements (saturating).
    pub fn count(&self) -> u64 {
        self.shape
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d as u64))
            .unwrap_or(u64::MAX)
    }
}

/// The memory estimate of a read, added up array by array.
#[derive(Clone, Debug, Default)]
pub struct Estimate {
    bytes: u64,
    /// Arrays are read one after the other: the most any one holds while it is read.
    transient: u64,
    weights: u64,
    cells: u64,
    largest: Option<(String, Vec<usize>)>,
}

impl Estimate {
    /// An array that is read but not drawn (tokens, roles, ids).
    pub fn add(&mut self, array: &Declared) {
        self.bytes = self.bytes.saturating_add(array.decoded);
        self.transient = self.transient.max(array.transient);
    }

    /// Kept text (token labels, texts) or a parsed header, already costed in bytes.
    pub fn add_text(&mut self, bytes: u64) {
        self.bytes = self.bytes.saturating_add(bytes);
    }

    /// An attention array `name` of `[layers, heads, queries, keys]` (or with a batch axis).
    pub fn add_attention(&mut self, name: &str, array: &Declared) {
        self.add(array);
        let count = array.count();
        self.weights = self.weights.saturating_add(count);
        let cells = match array.shape.as_slice() {
            [.., q, k] => (*q as u64).saturating_mul(*k as u64),
            _ => count,
        };
        self.cells = self.cells.max(cells);
        let bigger = self
            .largest
            .as_ref()
            .is_none_or(|(_, s)| s.iter().map(|&d| d as u64).product::<u64>() < count);
        if bigger {
            self.largest = Some((name.to_string(), array.shape.clone()));
        }
    }

    /// The estimate with the outputs' `cost`.
    pub fn total(&self, cost: Cost) -> u64 {
        self.bytes
            .saturating_add(self.transient)
            .saturating_add(self.weights.saturating_mul(cost.per_weight))
            .saturating_add(self.cells.saturating_mul(cost.per_cell))
    }

    /// Refuse the read when it needs more than `budget`, naming `file` and the largest array.
    pub fn check(&self, file: &str, cost: Cost, budget: Budget) -> Result<(), super::ImportError> {
        let needs = self.total(cost);
        if needs <= budget.bytes {
            return Ok(());
        }
        let what = match &self.largest {
            Some((name, shape)) => format!(
                "{file}: its attention ({} weights, {name} {})",
                human(self.weights),
                super::check::shape_str(shape)
            ),
            None => format!("{file}: its arrays"),
        };
        Err(super::ImportError::TooBig {
            what,
            needs,
            budget,
        })
    }
}

/// `268 million`, `1.2 billion`.
pub fn human(n: u64) -> String {
    let x = n as f64;
    if x >= 1e9 {
        format!("{:.1} billion", x / 1e9)
    } else if x >= 1e6 {
        format!("{:.0} million", x / 1e6)
    } else {
        n.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn declared(shape: &[usize], decoded: u64) -> Declared {
        Declared {
            shape: shape.to_vec(),
            decoded,
            transient: 0,
        }
    }

    #[test]
    fn estimates_add_arrays_weights_and_the_largest_matrix() {
        let mut e = Estimate::default();
        e.add_attention("a", &declared(&[2, 3, 4, 4], 96 * 4));
        e.add_attention("b", &declared(&[1, 1, 8, 5], 40 * 4));
        e.add(&declared(&[4], 100));
        let cost = Cost {
            per_weight: 10,
            per_cell: 1000,
        };
        // 384 + 160 + 100 bytes, 136 weights × 10, the largest matrix 8 × 5 = 40 cells × 1000.
        assert_eq!(e.total(cost), 644 + 1360 + 40_000);
        assert_eq!(e.total(Cost::default()), 644);
        assert!(e
            .check(
                "f",
                cost,
                Budget {
                    bytes: 42_004,
                    given: true
                }
            )
            .is_ok());
        let err = e
            .check(
                "f",
                cost,
                Budget {
                    bytes: 42_003,
                    given: true,
                },
            )
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("f: its attention (136 weights, a [2, 3, 4, 4]) needs about"),
            "{err}"
        );
        assert!(err.contains("more than the memory budget of"), "{err}");
    }

    #[test]
    fn budgets_say_where_they_came_from() {
        let given = Budget::new(Some(256 << 20));
        assert_eq!((given.bytes, given.given), (256 << 20, true));
        assert_eq!(given.to_string(), "the memory budget of 268 MB");
        let default = Budget::new(None);
        assert!(!default.given);
        assert!(default
            .to_string()
            .contains("half of this machine's memory"));
    }
}
