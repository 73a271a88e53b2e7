//! Opt-in capture of the residual stream for the logit lens (nostalgebraist 2020), and the seam
//! `network::Unembedding` (beside `Network`, which hands it out): how a network turns it into logits,: the final normalisation and the
//! language-model (or masked-LM) head, with a family's soft cap on the logits.
//!
//! Nothing here runs unless a capture asks for it ([`SequenceCapture::with_residual`]): a
//! network copies its residual stream into the capture at each stage (the embeddings, then
//! every layer's output) only then; the plain path checks one flag per layer.

use super::capture::SequenceCapture;
use super::layers::NormKind;
use super::values::LayerTaps;

/// Whether any of `captures` keeps the residual stream.
pub fn wanted(captures: &[SequenceCapture]) -> bool {
    captures.iter().any(|c| c.residual.is_some())
}

/// Copy stage `stage` of the residual stream (0: the embeddings; `l + 1`: the output of layer
/// `l`) from `h` (rows of a batch padded to `tokens`, `hidden` wide) into every capture that
/// keeps it.
pub fn keep(
    captures: &mut [SequenceCapture],
    stage: usize,
    h: &[f32],
    tokens: usize,
    hidden: usize,
) {
    for (s, capture) in captures.iter_mut().enumerate() {
        let n = capture.queries();
        if let Some(residual) = capture.residual.as_mut() {
            residual[stage * n * hidden..][..n * hidden]
                .copy_from_slice(&h[s * tokens * hidden..][..n * hidden]);
        }
    }
}

/// Apply the head ablation `taps` asks for to the output projection's input `context`
/// (`[rows, heads · head_dim]`, rows of `taps.ablate.len()` equal-length sequences): each
/// sequence's ablated head zeroed, or set to its mean over the sequence's positions.
pub fn edit_context(taps: &LayerTaps, context: &mut [f32], rows: usize, heads: usize, d: usize) {
    let seqs = taps.ablate.len();
    if seqs == 0 {
        return;
    }
    let (width, tokens) = (heads * d, rows / seqs);
    for (s, head) in taps.ablate.iter().enumerate() {
        let Some(h) = *head else { continue };
        let rows = s * tokens..(s + 1) * tokens;
        let mut mean = vec![0f32; d];
        if taps.ablate_mean {
            for r in rows.clone() {
                let v = &context[r * width + h * d..][..d];
                mean.iter_mut()
                    .zip(v)
                    .for_each(|(m, x)| *m += x / tokens as f32);
            }
        }
        for r in rows {
            context[r * width + h * d..][..d].copy_from_slice(&mean);
        }
    }
}

/// σ of a normalisation's input row: √(var + ε) for LayerNorm, √(mean(x²) + ε) for RMSNorm.
pub fn spread(row: &[f32], kind: NormKind, eps: f32) -> f32 {
    let n = row.len() as f64;
    let mean = match kind {
        NormKind::Layer => row.iter().map(|&x| x as f64).sum::<f64>() / n,
        NormKind::Rms => 0.0,
    };
    let var = row.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n;
    (var + eps as f64).sqrt() as f32
}
