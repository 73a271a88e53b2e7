//! Value zeroing's pass over a model (Mohebbi et al. 2023, "Quantifying Context Mixing in
//! Transformers"): for each layer l and token j, layer l re-run on its real input with j's value
//! vector zeroed in every head (queries and keys untouched), and how far each token's output
//! moved, C_ij = 1 − cos(x̃_i^{¬j}, x_i), x_i the layer's real output (after the feed-forward
//! block and its norm). The labelled view is `crate::analysis::value_zeroing`.
//!
//! One forward pass keeps the residual stream at every stage; then each layer runs once over
//! n copies of its input (in batches of at most [`ZEROING_ROWS`] rows): n + 1 forward passes
//! in all for n tokens.

use super::blocks::capture::SequenceCapture;
use super::blocks::network::Batch;
use std::time::Instant;

use super::rerun::{Rerun, RerunCost, RerunLimit};
use super::{check_input, Error, Model};
use crate::progress::Progress;

/// The most rows (copies × tokens) one batched re-run of a layer takes, bounding its memory.
pub const ZEROING_ROWS: usize = 8192;

/// Each layer's value-zeroing scores of one sequence.
#[derive(Clone, Debug, PartialEq)]
pub struct ZeroingForward {
    /// Tokens (rows and columns).
    pub tokens: usize,
    /// Per layer of the network, `[tokens × tokens]` row-major: row i the output token,
    /// column j the token whose value was zeroed, 1 − cos(x̃_i^{¬j}, x_i), 0 where j > i in a
    /// causal model; not normalised.
    pub distances: Vec<Vec<f32>>,
}

impl Model {
    /// Whether this model has value zeroing's pass (self-attention of encoders and decoders).
    pub fn has_value_zeroing(&self) -> bool {
        self.network.value_zeroing().is_some()
    }

    /// Value zeroing over token `ids` (with their segment ids `types`, as the tokenizer gave
    /// them): every layer, every token zeroed in turn.
    pub fn value_zeroing(&self, ids: &[u32], types: &[u32]) -> Result<ZeroingForward, Error> {
        let unlimited = RerunLimit {
            given: Some(std::time::Duration::MAX),
        };
        self.value_zeroing_within(ids, types, unlimited, &crate::progress::Silent)
    }

    /// [`Model::value_zeroing`], refused with [`TooSlow`](super::rerun::TooSlow) before its
    /// re-runs when their estimate ([`RerunCost`]) is over `limit`; a long estimate is told to
    /// `progress` first.
    pub fn value_zeroing_within(
        &self,
        ids: &[u32],
        types: &[u32],
        limit: RerunLimit,
        progress: &dyn Progress,
    ) -> Result<ZeroingForward, Error> {
        let arch = self.network.architecture();
        let Some(pass) = self.network.value_zeroing() else {
            return Err(crate::InputError::NoValueZeroing {
                model: self.info.name().to_string(),
                family: arch.family,
            }
            .into());
        };
        let zeros;
        let types = if arch.tokenizer_types {
            types
        } else {
            zeros = vec![0; ids.len()];
            &zeros
        };
        check_input(arch, 0, ids, types)?;
        let n = ids.len();
        let hidden = arch.hidden_size;
        let mut captures =
            [SequenceCapture::for_layers(arch, n, n, false, &[]).with_residual(arch)];
        let started = Instant::now();
        self.network.forward(
            &Batch {
                ids,
                types,
                lengths: &[n],
                tokens: n,
                inserted: None,
            },
            &mut captures,
        );
        let cost = RerunCost {
            analysis: Rerun::ValueZeroing,
            tokens: n,
            passes: Rerun::ValueZeroing.passes(n, arch.layers, arch.heads),
            pass: started.elapsed(),
        };
        cost.check(limit)?;
        if let Some(line) = cost.notice() {
            progress.message(&line);
        }
        let residual = captures[0].residual.take().expect("asked for");
        let causal = arch.mask == crate::Mask::Causal;
        let stage = |s: usize| &residual[s * n * hidden..][..n * hidden];
        let per_call = (ZEROING_ROWS / n).max(1);
        let mut distances = Vec::with_capacity(arch.layers);
        for l in 0..arch.layers {
            let (entering, real) = (stage(l), stage(l + 1));
            let mut c = vec![0f32; n * n];
            let all: Vec<usize> = (0..n).collect();
            for chunk in all.chunks(per_call) {
                let out = pass.zeroed_layer(entering, n, l, chunk);
                for (copy, &j) in chunk.iter().enumerate() {
                    for i in 0..n {
                        if causal && j > i {
                            continue;
                        }
                        let x = &out[(copy * n + i) * hidden..][..hidden];
                        let y = &real[i * hidden..][..hidden];
                        c[i * n + j] = cosine_distance(x, y);
                    }
                }
            }
            distances.push(c);
        }
        Ok(ZeroingForward {
            tokens: n,
            distances,
        })
    }
}

/// 1 − cos(x, y), in f64; 0 when either is the zero vector.
fn cosine_distance(x: &[f32], y: &[f32]) -> f32 {
    let (mut xy, mut xx, mut yy) = (0f64, 0f64, 0f64);
    for (&a, &b) in x.iter().zip(y) {
        let (a, b) = (a as f64, b as f64);
        xy += a * b;
        xx += a * a;
        yy += b * b;
    }
    if xx == 0.0 || yy == 0.0 {
        return 0.0;
    }
    (1.0 - xy / (xx.sqrt() * yy.sqrt())) as f32
}

#[cfg(test)]
mod tests {
    use super::cosine_distance;

    #[test]
    fn cosine_distance_is_zero_for_parallel_and_one_for_orthogonal_rows() {
        assert!(cosine_distance(&[1.0, 2.0], &[2.0, 4.0]).abs() < 1e-7);
        assert!((cosine_distance(&[1.0, 0.0], &[0.0, 3.0]) - 1.0).abs() < 1e-7);
        assert!((cosine_distance(&[1.0, 0.0], &[-1.0, 0.0]) - 2.0).abs() < 1e-7);
    }
}
