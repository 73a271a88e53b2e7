//! The exact token mixing of a hybrid model's linear-attention layers (Qwen3-Next's gated delta
//! layers), captured beside its attention: per layer and head, the matrix `A` with `out_t =
//! Σ_{s≤t} A[t, s] · v_s`. It is not an attention map: rows need not sum to 1 and entries may be
//! negative, so views draw it on a signed scale under [`Mixing::legend`], and statistics that
//! assume probabilities leave it out. Token level, labelled by its own tokens, whatever the
//! attention's level.

use super::HeadSel;

/// Every captured linear-attention layer's token-mixing matrices for one input.
#[derive(Clone, Debug, PartialEq)]
pub struct Mixing {
    /// What mixes the tokens (`gated delta`).
    pub kind: String,
    /// Heads per layer (the layers' value heads, not the attention's heads).
    pub heads: usize,
    /// The tokens, as the attention's token-level units label them.
    pub tokens: Vec<String>,
    /// The layers, ascending.
    pub layers: Vec<MixingLayer>,
}

/// One layer's token mixing.
#[derive(Clone, Debug, PartialEq)]
pub struct MixingLayer {
    /// The model's number of the layer (from 0).
    pub layer: usize,
    /// `[heads, tokens, tokens]` row-major: row = output token, column = source token, zero
    /// above the diagonal.
    pub weights: Vec<f32>,
}

/// A mixing capture whose parts do not fit together.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("inconsistent token-mixing capture: {0}")]
pub struct MixingShapeError(pub String);

impl Mixing {
    /// Tokens (rows and columns of each matrix).
    pub fn n(&self) -> usize {
        self.tokens.len()
    }

    /// The legend every view shows beside these matrices: `token mixing (gated delta), not
    /// attention probabilities`.
    pub fn legend(&self) -> String {
        format!("token mixing ({}), not attention probabilities", self.kind)
    }

    /// Check that every layer holds `heads × tokens × tokens` finite values, layers ascending.
    pub fn check(&self) -> Result<(), MixingShapeError> {
        let n = self.n();
        if self.layers.windows(2).any(|w| w[0].layer >= w[1].layer) {
            return Err(MixingShapeError("layers out of order".to_string()));
        }
        for l in &self.layers {
            if l.weights.len() != self.heads * n * n {
                return Err(MixingShapeError(format!(
                    "layer {}: {} weights for {} heads of {n}×{n}",
                    l.layer,
                    l.weights.len(),
                    self.heads
                )));
            }
            if l.weights.iter().any(|w| !w.is_finite()) {
                return Err(MixingShapeError(format!(
                    "layer {}: a weight that is not a finite number",
                    l.layer
                )));
            }
        }
        Ok(())
    }

    /// The layer with the model's number `layer`.
    pub fn layer(&self, layer: usize) -> Option<&MixingLayer> {
        self.layers.iter().find(|l| l.layer == layer)
    }

    /// The model's numbers of the layers.
    pub fn layer_numbers(&self) -> Vec<usize> {
        self.layers.iter().map(|l| l.layer).collect()
    }

    /// One head's `[tokens, tokens]` matrix of `layer`, or the mean over the heads (a head past
    /// the layer's heads is the mean too).
    pub fn matrix(&self, layer: &MixingLayer, head: HeadSel) -> Vec<f32> {
        let nn = self.n() * self.n();
        match head {
            HeadSel::Index(h) if h < self.heads => layer.weights[h * nn..][..nn].to_vec(),
            _ => {
                let mut sum = vec![0f64; nn];
                for m in layer.weights.chunks_exact(nn.max(1)) {
                    for (s, &w) in sum.iter_mut().zip(m) {
                        *s += w as f64;
                    }
                }
                let k = self.heads.max(1) as f64;
                sum.into_iter().map(|s| (s / k) as f32).collect()
            }
        }
    }

    /// The largest magnitude over every layer and head (the half-width of a signed scale), at
    /// least a tiny positive number.
    pub fn max_abs(&self) -> f32 {
        self.layers
            .iter()
            .flat_map(|l| &l.weights)
            .fold(0f32, |m, &w| m.max(w.abs()))
            .max(1e-6)
    }

    /// The captured layers among `layers` (the model's numbers), in order.
    pub fn among<'a>(&'a self, layers: &'a [usize]) -> impl Iterator<Item = &'a MixingLayer> {
        self.layers.iter().filter(|l| layers.contains(&l.layer))
    }
}

/// The bytes `[layers, heads, tokens, tokens]` f32 mixing matrices take, or `None` on overflow.
pub fn mixing_bytes(layers: usize, heads: usize, tokens: usize) -> Option<u64> {
    (layers as u64)
        .checked_mul(heads as u64)?
        .checked_mul((tokens as u64).checked_mul(tokens as u64)?)?
        .checked_mul(4)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mixing() -> Mixing {
        Mixing {
            kind: "gated delta".into(),
            heads: 2,
            tokens: vec!["a".into(), "b".into()],
            layers: vec![MixingLayer {
                layer: 0,
                weights: vec![1.0, 0.0, -0.5, 0.25, 3.0, 0.0, 0.5, -0.75],
            }],
        }
    }

    #[test]
    fn heads_and_their_mean_are_read_and_misfits_refused() {
        let m = mixing();
        m.check().unwrap();
        let l = m.layer(0).unwrap();
        assert_eq!(m.matrix(l, HeadSel::Index(1)), vec![3.0, 0.0, 0.5, -0.75]);
        assert_eq!(m.matrix(l, HeadSel::Mean), vec![2.0, 0.0, 0.0, -0.25]);
        assert_eq!(m.max_abs(), 3.0);
        assert_eq!(
            m.legend(),
            "token mixing (gated delta), not attention probabilities"
        );
        let mut bad = mixing();
        bad.layers[0].weights.pop();
        assert!(bad.check().unwrap_err().to_string().contains("layer 0"));
        let mut bad = mixing();
        bad.layers[0].weights[0] = f32::NAN;
        assert!(bad.check().is_err());
        assert_eq!(mixing_bytes(2, 3, 4), Some(384));
    }
}
