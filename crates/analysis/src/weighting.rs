//! Attention weighted by what it moves (Kobayashi et al. 2020, "Attention is Not Only a
//! Weight"; 2021, "Incorporating Residual and Normalization Layers into Analysis of Masked
//! Language Models"). Formulas and when to trust them: `docs/analyses.md`.
//!
//! From the probabilities α of a captured [`Attention`] and the per-layer terms the forward
//! pass kept on request ([`LayerValues`]), for every layer, head, query i and key j:
//!
//! - **value-weighted**: ‖α_ij f_h(x_j)‖, f_h(x) = (x W_V^h + b_V^h) W_O^h, the size of the
//!   vector head h adds to token i's output from token j;
//! - **norm-aware**: the same contribution through the linear part of the normalisation that
//!   follows the attention block, with the residual x_i added on the diagonal (post-norm
//!   encoders: the LayerNorm after the residual sum; pre-norm decoders: the residual stream
//!   itself, the norm before attention being inside f already).
//!
//! Both are sizes of vectors, not distributions: [`NormWeights`] keeps them as they are (what the
//! JSON export holds), and [`reweighted`] makes a view of them whose rows are shares of the
//! row's total (what every attention view draws under the `value-weighted` and `norm-aware`
//! weightings).

use serde::Serialize;

use crate::attention::{Attention, Holds, ShapeError, ShapeProblem};
use crate::model::LayerValues;

/// Which weights the views draw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Weighting {
    /// The attention probabilities α.
    #[default]
    Raw,
    /// ‖α_ij f_h(x_j)‖, as shares of each row's total.
    ValueWeighted,
    /// With the residual and the normalisation after it, as shares of each row's total.
    NormAware,
}

crate::choice!(Weighting {
    Raw => ("raw", "The attention probabilities α"),
    ValueWeighted => ("value-weighted", "‖α·f(x)‖ (Kobayashi et al. 2020): attention times the size of what each token's value moves, as shares of each row"),
    NormAware => ("norm-aware", "Value-weighted with the residual and the normalisation after attention (Kobayashi et al. 2021), as shares of each row"),
});

impl Weighting {
    /// A short label for titles (`value-weighted ‖α·f(x)‖`).
    pub fn title(self) -> &'static str {
        match self {
            Weighting::Raw => "attention",
            Weighting::ValueWeighted => "value-weighted ‖α·f(x)‖",
            Weighting::NormAware => "norm-aware ‖N(α·f(x) + x)‖",
        }
    }
}

/// The norm-based weights of every captured layer and head, as sizes (not normalised).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NormWeights {
    /// The model's number of each layer.
    pub layers: Vec<usize>,
    /// Heads per layer.
    pub heads: usize,
    /// Query tokens (rows).
    pub queries: usize,
    /// Key tokens (columns).
    pub keys: usize,
    /// ‖f_h(x_j)‖, `[layers, heads, keys]`.
    pub value_norms: Vec<f32>,
    /// ‖α_ij f_h(x_j)‖, `[layers, heads, queries, keys]`.
    pub value_weighted: Vec<f32>,
    /// The norm-aware sizes, `[layers, heads, queries, keys]` (the residual on the diagonal;
    /// none for cross-attention).
    pub norm_aware: Vec<f32>,
}

/// The norm-based weights of `att` (token level, as captured) from the terms its forward pass
/// kept, one [`LayerValues`] per captured layer.
pub fn norm_weights(att: &Attention, values: &[LayerValues]) -> Result<NormWeights, ShapeError> {
    let (layers, heads) = (att.layers(), att.heads());
    let (nq, nk) = (att.n_queries(), att.n_keys());
    if values.len() != layers {
        return Err(ShapeProblem::TermsLayers {
            terms: values.len(),
            layers,
        }
        .into());
    }
    let with_residual = att.kind.is_self();
    for v in values {
        let ok = v.value_norms.len() == heads * nk
            && v.normed_norms.len() == heads * nk
            && v.value_scale.len() == nq
            && v.residual_scale.len() == nq
            && (!with_residual
                || (v.residual_dot.len() == heads * nq && v.residual_sq.len() == nq));
        if !ok {
            return Err(ShapeProblem::TermsShape {
                heads,
                queries: nq,
                keys: nk,
            }
            .into());
        }
    }
    let cells = nq * nk;
    let mut value_norms = Vec::with_capacity(layers * heads * nk);
    let mut value_weighted = vec![0f32; layers * heads * cells];
    let mut norm_aware = vec![0f32; layers * heads * cells];
    for (l, v) in values.iter().enumerate() {
        value_norms.extend_from_slice(&v.value_norms);
        for h in 0..heads {
            let probs = att.head(l, h);
            let at = (l * heads + h) * cells;
            for i in 0..nq {
                let s = v.value_scale[i] as f64;
                for j in 0..nk {
                    let a = probs[i * nk + j] as f64;
                    value_weighted[at + i * nk + j] = (a * v.value_norms[h * nk + j] as f64) as f32;
                    let n = v.normed_norms[h * nk + j] as f64;
                    norm_aware[at + i * nk + j] = if with_residual && i == j {
                        let t = v.residual_scale[i] as f64;
                        let dot = v.residual_dot[h * nq + i] as f64;
                        let sq = v.residual_sq[i] as f64;
                        (a * a * s * s * n * n + 2.0 * a * s * t * dot + t * t * sq)
                            .max(0.0)
                            .sqrt() as f32
                    } else {
                        (a * s * n) as f32
                    };
                }
            }
        }
    }
    Ok(NormWeights {
        layers: att.layer_numbers().to_vec(),
        heads,
        queries: nq,
        keys: nk,
        value_norms,
        value_weighted,
        norm_aware,
    })
}

/// `att` with its weights replaced by `which` of `weights`, each row divided by its total (a
/// share of what reaches the query), so every view, statistic and export reads it as it reads
/// attention. [`Weighting::Raw`] gives `att` itself.
pub fn reweighted(
    att: &Attention,
    weights: &NormWeights,
    which: Weighting,
) -> Result<Attention, ShapeError> {
    let sizes = match which {
        Weighting::Raw => return Ok(att.clone()),
        Weighting::ValueWeighted => &weights.value_weighted,
        Weighting::NormAware => &weights.norm_aware,
    };
    if sizes.len() != att.weights().len() || weights.layers != att.layer_numbers() {
        return Err(ShapeProblem::OtherWeights.into());
    }
    let nk = att.n_keys();
    let mut shares = sizes.clone();
    for row in shares.chunks_exact_mut(nk) {
        let total: f64 = row.iter().map(|&x| x as f64).sum();
        if total > 0.0 {
            for x in row.iter_mut() {
                *x = (*x as f64 / total) as f32;
            }
        }
    }
    let keys = (!att.kind.is_self()).then(|| att.keys().clone());
    let mut out = att.derive(
        att.level,
        att.special_excluded,
        att.queries().clone(),
        keys,
        shares,
    )?;
    out.query_key = att.query_key.clone();
    out.holds = match which {
        Weighting::NormAware => Holds::NormAware,
        _ => Holds::ValueWeighted,
    };
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::{ModelInfo, Units};

    fn attention(probs: Vec<f32>, n: usize) -> Attention {
        let info = ModelInfo {
            id: "m".into(),
            revision: None,
            name: None,
            family: "test".into(),
            layers: 1,
            heads: 1,
            hidden_size: 2,
            head_dim: 2,
        };
        let units = Units::tokens(
            (0..n).map(|i| format!("t{i}")).collect(),
            (0..n as u32).collect(),
            vec![0; n],
            vec![0; n],
            vec![crate::attention::Role::Word; n],
            (0..n).map(Some).collect(),
            (0..n).map(|i| format!("t{i}")).collect(),
        );
        Attention::new(info, "x".into(), None, units, probs).unwrap()
    }

    #[test]
    fn value_weighted_and_norm_aware_follow_their_formulas() {
        // Two tokens; α row 0 = [0.5, 0.5], row 1 = [0.25, 0.75].
        let att = attention(vec![0.5, 0.5, 0.25, 0.75], 2);
        let values = LayerValues {
            value_norms: vec![2.0, 4.0],
            normed_norms: vec![1.0, 3.0],
            residual_dot: vec![0.5, -1.0],
            residual_sq: vec![9.0, 16.0],
            value_scale: vec![0.5, 2.0],
            residual_scale: vec![0.5, 2.0],
            mixing: vec![],
        };
        let w = norm_weights(&att, &[values]).unwrap();
        assert_eq!(w.value_weighted, vec![1.0, 2.0, 0.5, 3.0]);
        // Off the diagonal α·s·‖N f‖; on it √(α²s²‖Nf‖² + 2αst⟨Nf, Mx⟩ + t²‖Mx‖²).
        let d0 = (0.25f64 * 0.25 + 2.0 * 0.5 * 0.25 * 0.5 + 0.25 * 9.0).sqrt();
        let d1 = (0.75f64 * 0.75 * 4.0 * 9.0 - 2.0 * 0.75 * 4.0 + 4.0 * 16.0).sqrt();
        let want = [d0, 0.5 * 0.5 * 3.0, 0.25 * 2.0 * 1.0, d1];
        for (g, w) in w.norm_aware.iter().zip(want) {
            assert!((*g as f64 - w).abs() < 1e-6, "{g} vs {w}");
        }
        let shown = reweighted(&att, &w, Weighting::ValueWeighted).unwrap();
        assert!(shown.holds == Holds::ValueWeighted && att.holds == Holds::Raw);
        assert_eq!(
            shown.weights(),
            &[1.0 / 3.0, 2.0 / 3.0, 0.5 / 3.5, 3.0 / 3.5]
        );
        assert_eq!(reweighted(&att, &w, Weighting::Raw).unwrap(), att);
    }

    #[test]
    fn terms_of_another_shape_are_refused() {
        let att = attention(vec![1.0], 1);
        let values = LayerValues {
            value_norms: vec![1.0, 2.0],
            normed_norms: vec![1.0],
            residual_dot: vec![0.0],
            residual_sq: vec![1.0],
            value_scale: vec![1.0],
            residual_scale: vec![1.0],
            mixing: vec![],
        };
        assert!(norm_weights(&att, &[values]).is_err());
        assert!(norm_weights(&att, &[]).is_err());
    }
}
