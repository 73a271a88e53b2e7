//! What a mixture-of-experts model's routers decided for one input, captured beside its
//! attention: per routed layer and token, the probability of every expert (the softmax over all
//! of them), the experts chosen and the weights their outputs were added with. It is token
//! level and labelled by its own tokens, so views read it whatever the attention's level.

use serde::{Deserialize, Serialize};

/// Every routed layer's decisions for one input's tokens.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Router {
    /// Experts per routed layer.
    pub experts: usize,
    /// Experts chosen per token.
    pub top_k: usize,
    /// Whether the chosen experts' weights are their probabilities divided by the chosen ones'
    /// sum (Mixtral; Qwen3-MoE and OLMoE with `norm_topk_prob`), rather than the probabilities.
    pub renormalised: bool,
    /// The tokens, as the attention's token-level units label them.
    pub tokens: Vec<String>,
    /// The routed layers, ascending (a model's dense layers have none).
    pub layers: Vec<RouterLayer>,
}

/// One routed layer's decisions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RouterLayer {
    /// The model's number of the layer (from 0).
    pub layer: usize,
    /// The probability of every expert for every token, `[tokens, experts]` row-major.
    pub probs: Vec<f32>,
    /// The chosen experts, `[tokens, top_k]`, most probable first.
    pub chosen: Vec<u32>,
    /// The weight of each chosen expert's output, `[tokens, top_k]`.
    pub weights: Vec<f32>,
}

/// A router capture whose parts do not fit together.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("inconsistent router capture: {0}")]
pub struct RouterShapeError(pub String);

impl Router {
    /// Check that every layer holds `tokens × experts` probabilities and `tokens × top_k`
    /// choices (each a valid expert) and weights, layers ascending, `top_k` within the experts.
    pub fn check(&self) -> Result<(), RouterShapeError> {
        let (n, e, k) = (self.tokens.len(), self.experts, self.top_k);
        if e == 0 || k == 0 || k > e {
            return Err(RouterShapeError(format!(
                "top_k {k} of {e} experts (need 1 ≤ top_k ≤ experts)"
            )));
        }
        if self.layers.windows(2).any(|w| w[0].layer >= w[1].layer) {
            return Err(RouterShapeError("layers out of order".to_string()));
        }
        for l in &self.layers {
            if l.probs.len() != n * e || l.chosen.len() != n * k || l.weights.len() != n * k {
                return Err(RouterShapeError(format!(
                    "layer {}: {} probabilities, {} choices and {} weights for {n} tokens, \
                     {e} experts, top_k {k}",
                    l.layer,
                    l.probs.len(),
                    l.chosen.len(),
                    l.weights.len()
                )));
            }
            if let Some(bad) = l.chosen.iter().find(|&&c| c as usize >= e) {
                return Err(RouterShapeError(format!(
                    "layer {}: expert {bad} of {e}",
                    l.layer
                )));
            }
        }
        Ok(())
    }

    /// The routed layer with the model's number `layer`.
    pub fn layer(&self, layer: usize) -> Option<&RouterLayer> {
        self.layers.iter().find(|l| l.layer == layer)
    }
}

impl RouterLayer {
    /// Token `t`'s chosen experts and their weights, most probable first.
    pub fn choices(&self, t: usize, top_k: usize) -> impl Iterator<Item = (u32, f32)> + '_ {
        let at = t * top_k;
        self.chosen[at..at + top_k]
            .iter()
            .copied()
            .zip(self.weights[at..at + top_k].iter().copied())
    }

    /// How many tokens chose each of `experts` experts (the expert load).
    pub fn load(&self, experts: usize) -> Vec<usize> {
        let mut load = vec![0; experts];
        for &c in &self.chosen {
            load[c as usize] += 1;
        }
        load
    }

    /// The tokens that chose `expert`, with the weight it got from each.
    pub fn tokens_of(&self, expert: u32, top_k: usize) -> Vec<(usize, f32)> {
        self.chosen
            .iter()
            .zip(&self.weights)
            .enumerate()
            .filter(|(_, (&c, _))| c == expert)
            .map(|(i, (_, &w))| (i / top_k, w))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn router() -> Router {
        Router {
            experts: 3,
            top_k: 2,
            renormalised: true,
            tokens: vec!["a".into(), "b".into()],
            layers: vec![RouterLayer {
                layer: 1,
                probs: vec![0.5, 0.3, 0.2, 0.1, 0.1, 0.8],
                chosen: vec![0, 1, 2, 0],
                weights: vec![0.625, 0.375, 0.9, 0.1],
            }],
        }
    }

    #[test]
    fn load_and_tokens_per_expert_count_the_choices() {
        let r = router();
        r.check().unwrap();
        let l = r.layer(1).unwrap();
        assert_eq!(l.load(3), vec![2, 1, 1]);
        assert_eq!(l.tokens_of(0, 2), vec![(0, 0.625), (1, 0.1)]);
        assert_eq!(
            l.choices(1, 2).collect::<Vec<_>>(),
            vec![(2, 0.9), (0, 0.1)]
        );
        assert!(r.layer(0).is_none());
    }

    #[test]
    fn misfitting_parts_are_refused() {
        let mut r = router();
        r.layers[0].chosen[3] = 3;
        assert!(r.check().unwrap_err().to_string().contains("expert 3 of 3"));
        let mut r = router();
        r.layers[0].weights.pop();
        assert!(r.check().is_err());
        let mut r = router();
        r.top_k = 4;
        assert!(r.check().is_err());
    }
}
