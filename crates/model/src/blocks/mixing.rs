//! One layer's ALTI matrix (Ferrando et al. 2022, "Measuring the Mixing of Contextual
//! Information in the Transformer"), computed while the value vectors are at hand
//! ([`super::values::fill`] calls it for self-attention layers).
//!
//! The attention block's output for query i is split into one vector per source token j,
//! through the linear part of the normalisation that follows it (frozen at i's own scale):
//!
//! - post-norm (BERT, BART's encoder): y_i = LN(x_i + Σ_j Σ_h α_ij^h f_h(x_j) + b_O), so
//!   T_i(x_j) = s_i N(Σ_h α_ij^h f_h(x_j) + δ_ij x_i);
//! - pre-norm (GPT-2, Llama): the attention output is added to the residual stream without a
//!   norm after it (the norm before attention is inside f_h, per source token), so
//!   y_i = x_i + Σ_j Σ_h α_ij^h f_h(x_j) + b_O and T_i(x_j) = Σ_h α_ij^h f_h(x_j) + δ_ij x_i;
//! - a norm on the attention output alone (Gemma's post-attention norm):
//!   T_i(x_j) = s_i N(Σ_h α_ij^h f_h(x_j)) + δ_ij x_i.
//!
//! y_i is the sum of the T_i(x_j) plus what no token owns (s_i N(b_O) + β, or b_O), i.e. the
//! block's real output. The contribution is c_ij = max(0, ‖y_i‖₁ − ‖y_i − T_i(x_j)‖₁), each
//! row divided by its total. Grouped-query heads read their key/value head's vectors (the
//! caller's `f` rows are per query head already).

use rayon::prelude::*;

use super::layers::NormKind;

/// The linear part of a normalisation: γ, its kind and ε.
pub type NormPart<'a> = Option<(&'a [f32], NormKind, f32)>;

/// What one layer hands over for one sequence.
pub struct LayerTerms<'a> {
    /// Per query head, f_h(x_j) for every key token, `[keys, hidden]`.
    pub f: &'a [Vec<f32>],
    /// The attention probabilities `[heads, queries, keys]`.
    pub probs: &'a [f32],
    /// The residual rows x_i `[queries, hidden]`.
    pub residual: &'a [f32],
    /// The normalisation after the attention (None: pre-norm), and whether it normalises the
    /// residual sum (post-norm) rather than the attention output alone.
    pub norm: NormPart<'a>,
    /// Whether the residual goes through the norm too.
    pub residual_normed: bool,
    /// s_i, the norm's 1/σ_i per query row (1 without a norm).
    pub scale: &'a [f32],
    /// The output projection's bias b_O (zeros without one).
    pub out_bias: &'a [f32],
    /// The norm's β (zeros without one).
    pub beta: &'a [f32],
}

/// The layer's ALTI contributions `[queries, keys]`, rows summing to 1 (a row whose every
/// contribution is 0 stays 0). Query rows are independent and run in parallel.
pub fn alti_layer(t: &LayerTerms<'_>, queries: usize, keys: usize, hidden: usize) -> Vec<f32> {
    let mut out = vec![0f32; queries * keys];
    if keys == 0 {
        return out;
    }
    out.par_chunks_mut(keys).enumerate().for_each_init(
        || (vec![0f64; keys * hidden], vec![0f64; hidden]),
        |(parts, theta), (i, row)| alti_row(t, i, queries, hidden, parts, theta, row),
    );
    out
}

/// Row `i` of [`alti_layer`] into `row` (`keys` long), with `parts` (`keys × hidden`) and
/// `theta` (`hidden`) as scratch.
fn alti_row(
    t: &LayerTerms<'_>,
    i: usize,
    queries: usize,
    hidden: usize,
    parts: &mut [f64],
    theta: &mut [f64],
    row: &mut [f32],
) {
    let keys = row.len();
    let s = t.scale[i] as f64;
    let x = &t.residual[i * hidden..][..hidden];
    // What the residual brings, through the norm when the norm takes the residual sum.
    let mut x_part: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    if t.residual_normed {
        linear_norm(t.norm, &mut x_part, s);
    }
    for j in 0..keys {
        theta.fill(0.0);
        for (h, f) in t.f.iter().enumerate() {
            let a = t.probs[(h * queries + i) * keys + j] as f64;
            if a == 0.0 {
                continue;
            }
            for (o, &v) in theta.iter_mut().zip(&f[j * hidden..][..hidden]) {
                *o += a * v as f64;
            }
        }
        linear_norm(t.norm, theta, s);
        if j == i {
            for (o, v) in theta.iter_mut().zip(&x_part) {
                *o += v;
            }
        }
        parts[j * hidden..][..hidden].copy_from_slice(theta);
    }
    // y_i: every token's part and what no token owns.
    let mut y: Vec<f64> = t.out_bias.iter().map(|&b| b as f64).collect();
    linear_norm(t.norm, &mut y, s);
    for (o, &b) in y.iter_mut().zip(t.beta) {
        *o += b as f64;
    }
    for part in parts.chunks_exact(hidden) {
        for (o, v) in y.iter_mut().zip(part) {
            *o += v;
        }
    }
    let y_l1: f64 = y.iter().map(|v| v.abs()).sum();
    let c: Vec<f64> = parts
        .chunks_exact(hidden)
        .map(|part| {
            let d: f64 = y.iter().zip(part).map(|(a, b)| (a - b).abs()).sum();
            (y_l1 - d).max(0.0)
        })
        .collect();
    let total: f64 = c.iter().sum();
    if total > 0.0 {
        for (o, v) in row.iter_mut().zip(&c) {
            *o = (v / total) as f32;
        }
    }
}

/// `v ← s · γ ⊙ (v − mean v)` (LayerNorm), `s · γ ⊙ v` (RMSNorm); nothing without a norm.
fn linear_norm(norm: NormPart<'_>, v: &mut [f64], s: f64) {
    let Some((gamma, kind, _)) = norm else {
        return;
    };
    let mean = match kind {
        NormKind::Layer => v.iter().sum::<f64>() / v.len() as f64,
        NormKind::Rms => 0.0,
    };
    for (o, &g) in v.iter_mut().zip(gamma) {
        *o = (*o - mean) * g as f64 * s;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_token_takes_all_and_a_silent_token_takes_nothing() {
        // Pre-norm, 1 head, hidden 2: token 1's value is zero, so row 1 is all its residual.
        let f = vec![vec![1.0, 0.0, 0.0, 0.0]];
        let probs = vec![1.0, 0.0, 0.5, 0.5];
        let residual = vec![0.0, 1.0, 0.0, 1.0];
        let zeros = [0.0, 0.0];
        let terms = LayerTerms {
            f: &f,
            probs: &probs,
            residual: &residual,
            norm: None,
            residual_normed: false,
            scale: &[1.0, 1.0],
            out_bias: &zeros,
            beta: &zeros,
        };
        let c = alti_layer(&terms, 2, 2, 2);
        // Row 0: T_0(x_0) = (1, 1) = y_0, so all of it.
        assert_eq!(&c[..2], &[1.0, 0.0]);
        // Row 1: T_1(x_0) = (0.5, 0), T_1(x_1) = (0, 1), y = (0.5, 1): ‖y‖₁ = 1.5;
        // c_10 = 1.5 − 1 = 0.5, c_11 = 1.5 − 0.5 = 1: shares 1/3, 2/3.
        assert!((c[2] - 1.0 / 3.0).abs() < 1e-6 && (c[3] - 2.0 / 3.0).abs() < 1e-6);
    }
}
