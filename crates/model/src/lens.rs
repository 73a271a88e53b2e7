//! The logit lens's pass over a model (nostalgebraist 2020): the residual stream at every
//! stage (the embeddings, then each layer's output) through the network's own unembedding
//! (`blocks::network::Unembedding`: final norm, head, soft cap), and at each stage and position
//! the `k` most probable tokens. The labelled view is `crate::analysis::lens`.
//!
//! It is a forward pass of its own that keeps no attention: the cost is one forward pass plus
//! one run of the head per stage (`layers + 1` times the final head's work).

use super::blocks::capture::SequenceCapture;
use super::blocks::network::{Batch, HeadOutputs};
use super::rerun::{Rerun, RerunCost, RerunLimit};
use super::{check_input, Error, ForwardError, InputError, Model};

/// The top tokens at every stage and position of one sequence.
#[derive(Clone, Debug, PartialEq)]
pub struct LensForward {
    /// Stages: the embeddings, then each layer's output (`layers + 1`).
    pub stages: usize,
    /// Positions (tokens of the input).
    pub positions: usize,
    /// Tokens kept per cell, most probable first.
    pub k: usize,
    /// Token ids `[stages, positions, k]`.
    pub ids: Vec<u32>,
    /// Their probabilities (softmax over the whole vocabulary), laid out as `ids`.
    pub probs: Vec<f32>,
}

impl Model {
    /// Whether this model has the head the logit lens reads (a decoder's language-model head, an
    /// encoder's masked-LM head).
    pub fn has_unembedding(&self) -> bool {
        self.network.unembedding().is_some()
    }

    /// Whether this model can take its heads apart at the output (per-head attribution,
    /// ablation): a decoder with a language-model head.
    pub fn has_head_interventions(&self) -> bool {
        self.network.interventions().is_some()
    }

    /// The logit lens over token `ids` (with their segment ids `types`, as the tokenizer gave
    /// them): the `k` most probable tokens (at least 1, at most the vocabulary) at every stage
    /// and position.
    pub fn logit_lens(&self, ids: &[u32], types: &[u32], k: usize) -> Result<LensForward, Error> {
        let arch = self.network.architecture();
        let Some(head) = self.network.unembedding() else {
            return Err(if arch.mask == crate::Mask::Bidirectional {
                InputError::NoMaskedLmHead {
                    model: self.info.name().to_string(),
                    family: arch.family,
                    class: masked_lm_class(arch.family),
                    example: masked_lm_example(arch.family),
                }
            } else if let Some((kind, _)) = self.network.non_softmax_layers() {
                InputError::LensOnHybrid {
                    model: self.info.name().to_string(),
                    family: arch.family,
                    kind,
                }
            } else {
                InputError::NoLmHeadForLens {
                    model: self.info.name().to_string(),
                }
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
        let k = k.clamp(1, arch.vocab_size);
        let mut captures =
            [SequenceCapture::for_layers(arch, n, n, false, &[]).with_residual(arch)];
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
        let residual = captures[0].residual.take().expect("asked for");
        let (hidden, vocab, stages) = (arch.hidden_size, arch.vocab_size, arch.layers + 1);
        let mut out = LensForward {
            stages,
            positions: n,
            k,
            ids: Vec::with_capacity(stages * n * k),
            probs: Vec::with_capacity(stages * n * k),
        };
        // Several stages' rows in one product (see LENS_LOGITS).
        let per_call = (LENS_LOGITS / vocab / n).max(1);
        for stages in residual.chunks(per_call * n * hidden) {
            let logits = head.logits(stages, stages.len() / hidden);
            let mut logits = logits;
            for row in logits.chunks_exact_mut(vocab) {
                let (ids, probs) = top_k_in_place(row, k)?;
                out.ids.extend(ids);
                out.probs.extend(probs);
            }
        }
        Ok(out)
    }
}

/// The class prefix of an encoder family's masked-LM checkpoints (`Bert` of
/// `BertForMaskedLM`).
fn masked_lm_class(family: &str) -> &'static str {
    match family {
        "RoBERTa" => "Roberta",
        "XLM-RoBERTa" => "XLMRoberta",
        "ALBERT" => "Albert",
        "DistilBERT" => "DistilBert",
        "ELECTRA" => "Electra",
        _ => "Bert",
    }
}

/// A public checkpoint of an encoder family that ships its masked-LM head.
fn masked_lm_example(family: &str) -> &'static str {
    match family {
        "RoBERTa" => "roberta-base",
        "XLM-RoBERTa" => "xlm-roberta-base",
        "ALBERT" => "albert-base-v2",
        "DistilBERT" => "distilbert-base-uncased",
        // The discriminator's head tells replaced tokens apart; the generator's fills masks.
        "ELECTRA" => "google/electra-small-generator, the generator",
        _ => "bert-base-uncased",
    }
}

/// How many logits the logit lens holds at once (128 MiB): the rows (stages × positions) it
/// unembeds in one product are as many as fit. Many rows run the unembedding (the largest matrix
/// of a small model) through the tiled kernel in one pass; SmolLM2 at 64 tokens gets 640 rows a
/// product, which took its lens from 2.4 s (one stage a product) to about 1.2 s of CPU.
const LENS_LOGITS: usize = 32 << 20;

/// The `k` largest of a softmax over `logits` (computed in f64), most probable first, ties in
/// id order: ids and probabilities. One pass keeps the `k` best so far, so a 50k–150k
/// vocabulary costs one comparison per logit for a small `k`.
fn top_k(logits: &[f32], k: usize) -> Result<(Vec<u32>, Vec<f32>), Error> {
    let ids = top_ids(logits, k)?;
    let max = logits.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)) as f64;
    let total: f64 = logits.iter().map(|&v| (v as f64 - max).exp()).sum();
    let probs = ids
        .iter()
        .map(|&i| ((logits[i as usize] as f64 - max).exp() / total) as f32)
        .collect();
    Ok((ids, probs))
}

/// The ids of [`top_k`], refusing a logit that is not finite.
fn top_ids(logits: &[f32], k: usize) -> Result<Vec<u32>, Error> {
    if logits.iter().any(|v| !v.is_finite()) {
        return Err(ForwardError::LensLogit.into());
    }
    if k * 8 > logits.len() {
        return Ok(top_ids_sorted(logits, k));
    }
    let mut best: Vec<(f32, u32)> = Vec::with_capacity(k + 1);
    for (i, &v) in logits.iter().enumerate() {
        if best.len() == k && v.total_cmp(&best[k - 1].0).is_le() {
            continue;
        }
        // After every kept value at least as large (an equal one has a smaller id).
        let at = best.partition_point(|&(b, _)| b.total_cmp(&v).is_ge());
        best.insert(at, (v, i as u32));
        best.truncate(k);
    }
    Ok(best.into_iter().map(|(_, i)| i).collect())
}

/// [`top_k`] over logits that may be overwritten: the ids chosen on the logits, then the
/// softmax computed in place by the vectorised kernel the attention uses (f32 throughout; 50k
/// libm `exp` calls per row were a third of the lens's time).
fn top_k_in_place(logits: &mut [f32], k: usize) -> Result<(Vec<u32>, Vec<f32>), Error> {
    let ids = top_ids(logits, k)?;
    let n = logits.len();
    crate::kernels::attention::softmax_rows(logits, n, n);
    let probs = ids.iter().map(|&i| logits[i as usize]).collect();
    Ok((ids, probs))
}

/// [`top_ids`] by a partial sort, for a `k` near the vocabulary's size.
fn top_ids_sorted(logits: &[f32], k: usize) -> Vec<u32> {
    let mut order: Vec<u32> = (0..logits.len() as u32).collect();
    let by = |a: &u32, b: &u32| {
        logits[*b as usize]
            .total_cmp(&logits[*a as usize])
            .then(a.cmp(b))
    };
    if k < order.len() {
        order.select_nth_unstable_by(k - 1, by);
        order.truncate(k);
    }
    order.sort_by(by);
    order
}

/// Per-head direct logit attribution at the last position of one sequence (Elhage et al. 2021):
/// every component of the final residual stream projected on the unembedding of the target
/// (minus the contrast's), through the final norm frozen at the real residual. The components
/// sum to `total`.
#[derive(Clone, Debug, PartialEq)]
pub struct AttributionForward {
    /// Layers.
    pub layers: usize,
    /// Heads per layer.
    pub heads: usize,
    /// The token whose logit is taken apart.
    pub target: u32,
    /// The token whose logit is subtracted, if any.
    pub contrast: Option<u32>,
    /// Each head's direct logit (difference), `[layers, heads]`.
    pub per_head: Vec<f32>,
    /// The embeddings' share.
    pub embeddings: f32,
    /// Each layer's other writes (the output projection's bias and the feed-forward block),
    /// `[layers]`.
    pub rest: Vec<f32>,
    /// The final norm's bias through the head (0 for RMSNorm).
    pub norm_bias: f32,
    /// The logit (difference) of the whole residual stream, before any soft cap.
    pub total: f32,
    /// The model's soft cap on its final logits, which the components are not put through.
    pub softcap: Option<f32>,
}

/// Head ablation at the last position of one sequence (Michel et al. 2019): the change in the
/// target's log-probability when each head's output is removed.
#[derive(Clone, Debug, PartialEq)]
pub struct AblationForward {
    /// Layers.
    pub layers: usize,
    /// Heads per layer.
    pub heads: usize,
    /// The token whose log-probability is followed.
    pub target: u32,
    /// Whether each head was replaced by its mean over the positions (else zeroed).
    pub mean: bool,
    /// The target's log-probability without ablation.
    pub base: f32,
    /// log p(target | head ablated) − `base`, `[layers, heads]`.
    pub delta: Vec<f32>,
}

impl Model {
    fn interventions(
        &self,
        ids: &[u32],
        what: &str,
    ) -> Result<&dyn super::blocks::network::Interventions, Error> {
        let run = self.interventions_side(what)?;
        check_input(self.network.architecture(), 0, ids, &vec![0; ids.len()])?;
        Ok(run)
    }

    /// The network's interventions side, or the error that names `what` needs it.
    fn interventions_side(
        &self,
        what: &str,
    ) -> Result<&dyn super::blocks::network::Interventions, Error> {
        let arch = self.network.architecture();
        let Some(run) = self.network.interventions() else {
            return Err(InputError::NoInterventions {
                what: what.to_string(),
                model: self.info.name().to_string(),
                family: arch.family,
                headless_decoder: self.network.causal_lm().is_some(),
            }
            .into());
        };
        Ok(run)
    }

    fn check_token(&self, token: u32) -> Result<(), Error> {
        let vocab = self.network.architecture().vocab_size;
        if token as usize >= vocab {
            return Err(InputError::TokenOutsideVocabulary { token, vocab }.into());
        }
        Ok(())
    }

    fn check_tokens(&self, target: Option<u32>, contrast: Option<u32>) -> Result<(), Error> {
        for token in target.into_iter().chain(contrast) {
            self.check_token(token)?;
        }
        Ok(())
    }

    /// The most probable next token after `ids` (a decoder's own prediction at the last
    /// position).
    pub fn predicted_next(&self, ids: &[u32]) -> Result<u32, Error> {
        let run = self.interventions(ids, "predicting the next token")?;
        let head = self.network.unembedding().expect("a decoder with a head");
        let stages = run.stage(ids);
        let hidden = self.network.architecture().hidden_size;
        let last = &stages.last().expect("stages")[(ids.len() - 1) * hidden..][..hidden];
        let logits = head.logits(last, 1);
        Ok(top_k(&logits, 1)?.0[0])
    }

    /// Per-head direct logit attribution of `target` (minus `contrast`) at the last of `ids`.
    pub fn head_attribution(
        &self,
        ids: &[u32],
        target: u32,
        contrast: Option<u32>,
    ) -> Result<AttributionForward, Error> {
        self.head_attribution_of(ids, Some(target), contrast)
    }

    /// [`Model::head_attribution`], of the model's own prediction at the last position when
    /// `target` is `None` (read from the same pass, so it costs no forward of its own; the
    /// result's `target` says which token it was).
    pub fn head_attribution_of(
        &self,
        ids: &[u32],
        target: Option<u32>,
        contrast: Option<u32>,
    ) -> Result<AttributionForward, Error> {
        let run = self.interventions(ids, "head attribution")?;
        self.check_tokens(target, contrast)?;
        let n = ids.len();
        let zeros = vec![0; n];
        let out = run.head_outputs(
            &Batch {
                ids,
                types: &zeros,
                lengths: &[n],
                tokens: n,
                inserted: None,
            },
            n - 1,
        );
        self.head_attribution_from(&out, target, contrast)
    }

    /// [`Model::head_attribution_of`] from head outputs a forward pass kept at the position
    /// (the last, for [`EncodeOptions::head_outputs`](crate::EncodeOptions)): no pass of
    /// its own, only the final norm and the head on one row when `target` is `None` (the
    /// model's own prediction there).
    pub fn head_attribution_from(
        &self,
        out: &HeadOutputs,
        target: Option<u32>,
        contrast: Option<u32>,
    ) -> Result<AttributionForward, Error> {
        self.interventions_side("head attribution")?;
        self.check_tokens(target, contrast)?;
        let head = self.network.unembedding().expect("a decoder with a head");
        let arch = self.network.architecture();
        let (layers, heads, hidden) = (arch.layers, arch.heads, arch.hidden_size);
        if out.heads.len() != layers * heads * hidden
            || out.rest.len() != layers * hidden
            || out.residual.len() != (layers + 1) * hidden
        {
            return Err(InputError::HeadOutputsShape {
                model: self.info.name().to_string(),
                layers,
                heads,
                hidden,
            }
            .into());
        }
        let last = &out.residual[layers * hidden..];
        let target = match target {
            Some(t) => t,
            None => top_k(&head.logits(last, 1), 1)?.0[0],
        };
        // Rows: the embeddings, every head, every layer's rest, then the whole residual.
        let mut parts = Vec::with_capacity((2 + layers * heads + layers) * hidden);
        parts.extend_from_slice(&out.residual[..hidden]);
        parts.extend_from_slice(&out.heads);
        parts.extend_from_slice(&out.rest);
        parts.extend_from_slice(last);
        let rows = parts.len() / hidden;
        let tokens: Vec<u32> = std::iter::once(target).chain(contrast).collect();
        let Some((direct, bias)) = head.direct(last, &parts, rows, &tokens) else {
            return Err(InputError::HeadNotLinear {
                model: self.info.name().to_string(),
            }
            .into());
        };
        let t = tokens.len();
        let value = |r: usize| direct[r * t] - if t == 2 { direct[r * t + 1] } else { 0.0 };
        let bias_value = bias[0] - if t == 2 { bias[1] } else { 0.0 };
        Ok(AttributionForward {
            layers,
            heads,
            target,
            contrast,
            per_head: (1..1 + layers * heads).map(value).collect(),
            embeddings: value(0),
            rest: (1 + layers * heads..1 + layers * heads + layers)
                .map(value)
                .collect(),
            norm_bias: bias_value,
            total: value(rows - 1) + bias_value,
            softcap: head.softcap(),
        })
    }

    /// Head ablation: the change in `target`'s log-probability after `ids` when each head is
    /// zeroed (or, with `mean`, replaced by its mean over the positions) in turn. One batched
    /// run per layer of the layers from it on over a copy per head: Σ_l (layers − l) × heads
    /// sequence-layers, about layers × heads / 2 forward passes.
    pub fn head_ablation(
        &self,
        ids: &[u32],
        target: u32,
        mean: bool,
    ) -> Result<AblationForward, Error> {
        let unlimited = RerunLimit {
            given: Some(std::time::Duration::MAX),
        };
        self.head_ablation_within(ids, target, mean, unlimited, &crate::progress::Silent)
    }

    /// [`Model::head_ablation`], refused with [`TooSlow`](super::rerun::TooSlow) before its
    /// re-runs when their estimate ([`RerunCost`]) is over `limit`; a long estimate is told to
    /// `progress` first.
    pub fn head_ablation_within(
        &self,
        ids: &[u32],
        target: u32,
        mean: bool,
        limit: RerunLimit,
        progress: &dyn crate::progress::Progress,
    ) -> Result<AblationForward, Error> {
        let run = self.interventions(ids, "head ablation")?;
        self.check_token(target)?;
        let head = self.network.unembedding().expect("a decoder with a head");
        let arch = self.network.architecture();
        let (layers, heads, hidden, vocab, n) = (
            arch.layers,
            arch.heads,
            arch.hidden_size,
            arch.vocab_size,
            ids.len(),
        );
        let started = std::time::Instant::now();
        let stages = run.stage(ids);
        let cost = RerunCost {
            analysis: Rerun::HeadAblation,
            tokens: n,
            passes: Rerun::HeadAblation.passes(n, layers, heads),
            pass: started.elapsed(),
        };
        cost.check(limit)?;
        if let Some(line) = cost.notice() {
            progress.message(&line);
        }
        let last = &stages[layers][(n - 1) * hidden..][..hidden];
        let base = log_prob(&head.logits(last, 1), target);
        let mut delta = Vec::with_capacity(layers * heads);
        for (l, entering) in stages.iter().take(layers).enumerate() {
            let logits = run.ablated_logits(entering, n, l, mean, n - 1);
            for row in logits.chunks_exact(vocab) {
                delta.push(log_prob(row, target) - base);
            }
        }
        Ok(AblationForward {
            layers,
            heads,
            target,
            mean,
            base,
            delta,
        })
    }
}

/// log softmax(logits)[token], in f64.
fn log_prob(logits: &[f32], token: u32) -> f32 {
    let max = logits.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)) as f64;
    let total: f64 = logits.iter().map(|&v| (v as f64 - max).exp()).sum();
    (logits[token as usize] as f64 - max - total.ln()) as f32
}

#[cfg(test)]
mod tests {
    use super::top_k;

    #[test]
    fn top_k_is_the_softmax_s_largest_in_order() {
        let logits = [1.0f32, 3.0, 2.0, 3.0, -1.0];
        let (ids, probs) = top_k(&logits, 3).unwrap();
        // ties: the lower id first
        assert_eq!(ids, [1, 3, 2]);
        let z: f64 = logits.iter().map(|&v| (v as f64).exp()).sum();
        for (i, p) in ids.iter().zip(&probs) {
            assert!((*p as f64 - (logits[*i as usize] as f64).exp() / z).abs() < 1e-7);
        }
        assert!(top_k(&[f32::NAN, 1.0], 1).is_err());
    }

    #[test]
    fn the_one_pass_top_k_equals_the_sort_ties_and_all() {
        // 2000 logits on a coarse grid (many ties), the largest values repeated.
        let logits: Vec<f32> = (0..2000u32)
            .map(|i| ((i.wrapping_mul(2654435761) >> 7) % 40) as f32 * 0.25 - 5.0)
            .collect();
        for k in [1, 3, 5, 20, 100] {
            let (ids, want_probs) = top_k(&logits, k).unwrap();
            let want_ids = super::top_ids_sorted(&logits, k);
            assert_eq!(ids, want_ids, "k {k}");
            // The f64 softmax, from scratch.
            let max = logits.iter().fold(f64::MIN, |m, &v| m.max(v as f64));
            let z: f64 = logits.iter().map(|&v| (v as f64 - max).exp()).sum();
            for (&i, &p) in ids.iter().zip(&want_probs) {
                let exact = (logits[i as usize] as f64 - max).exp() / z;
                assert!(
                    (p as f64 - exact).abs() < 1e-7,
                    "k {k}: {p} against {exact}"
                );
            }
            let (in_place_ids, in_place_probs) =
                super::top_k_in_place(&mut logits.clone(), k).unwrap();
            assert_eq!(in_place_ids, want_ids, "k {k}");
            for (p, w) in in_place_probs.iter().zip(&want_probs) {
                assert!((p - w).abs() < 1e-6 * w.max(1e-3), "k {k}: {p} against {w}");
            }
        }
    }
}
