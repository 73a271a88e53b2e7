//! The masked-LM head of a BERT-style encoder (Devlin et al. 2019): `dense → activation →
//! LayerNorm → decoder + bias`, what turns the encoder's last hidden state into logits over the
//! vocabulary (transformers' `BertLMPredictionHead`, `RobertaLMHead`, `AlbertMLMHead`, ELECTRA's
//! generator head, DistilBERT's `vocab_*`). The dense map may narrow the hidden size to the
//! embedding width (ALBERT, the ELECTRA generator), and the decoder is the word embeddings
//! (tied, the usual case) or a matrix of its own.
//!
//! A family gives the tensors' names ([`MlmHeadNames`], stored outside the base model:
//! `cls.predictions.*` beside `bert.*`) and its settings ([`MlmHeadSpec`]); a checkpoint without
//! the head (a bare base model, a sentence encoder) loads as `None`. The encoder reads it for
//! the logit lens (`network::Unembedding`).

use super::layers::{Linear, Norm};
use crate::formats::weights::{Checkpoint, Weight, WeightsError};
use crate::kernels::{self, Activation, Layout, Matrix, Output};

/// Where a masked-LM head's tensors are: full names, outside any base-model prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MlmHeadNames {
    /// The dense map (module path; `.weight`, `.bias` appended), `[width, hidden]`.
    pub dense: &'static str,
    /// The LayerNorm after it (module path).
    pub norm: &'static str,
    /// The decoder (module path): its `.weight` `[vocab, width]` is read when the head is not
    /// tied to the word embeddings.
    pub decoder: &'static str,
    /// The tensors that may hold the output bias `[vocab]`, first found wins (BERT's
    /// `cls.predictions.bias`, which `cls.predictions.decoder.bias` shares).
    pub bias: &'static [&'static str],
}

/// A masked-LM head's settings, from the family's config.
#[derive(Clone, Copy, Debug)]
pub struct MlmHeadSpec {
    /// Its tensors.
    pub names: MlmHeadNames,
    /// The encoder's hidden size (the dense map's input).
    pub hidden: usize,
    /// The dense map's output and the LayerNorm's width: the embedding width.
    pub width: usize,
    /// Vocabulary size.
    pub vocab: usize,
    /// The activation after the dense map.
    pub activation: Activation,
    /// The LayerNorm's ε.
    pub eps: f64,
    /// Whether the decoder is the word embeddings (`tie_word_embeddings`).
    pub tied: bool,
}

/// The decoder of a masked-LM head.
pub enum Decoder {
    /// The word embeddings `[vocab, width]`, which the encoder holds.
    Tied,
    /// A matrix of its own, `[vocab, width]`.
    Separate(Weight),
}

/// A loaded masked-LM head.
pub struct MlmHead {
    dense: Linear,
    activation: Activation,
    norm: Norm,
    decoder: Decoder,
    bias: Weight,
    width: usize,
    vocab: usize,
}

impl MlmHead {
    /// The head `spec` names, or `None` when the checkpoint has no dense map of it (no head).
    /// Once the dense map is there, the rest must be.
    pub fn load(ckpt: &Checkpoint, spec: &MlmHeadSpec) -> Result<Option<MlmHead>, WeightsError> {
        let n = &spec.names;
        let (hidden, width, vocab) = (spec.hidden, spec.width, spec.vocab);
        let Some(dense) =
            ckpt.top_level_weight(&format!("{}.weight", n.dense), &[width, hidden])?
        else {
            return Ok(None);
        };
        let need = |name: String, shape: &[usize]| {
            ckpt.top_level_weight(&name, shape)?
                .ok_or_else(|| WeightsError::Missing {
                    name,
                    path: ckpt.path().to_path_buf(),
                })
        };
        let dense_bias = need(format!("{}.bias", n.dense), &[width])?;
        let norm = Norm::from_weights(
            need(format!("{}.weight", n.norm), &[width])?,
            Some(need(format!("{}.bias", n.norm), &[width])?),
            spec.eps,
        );
        let decoder = if spec.tied {
            Decoder::Tied
        } else {
            Decoder::Separate(need(format!("{}.weight", n.decoder), &[vocab, width])?)
        };
        let mut bias = None;
        for name in n.bias {
            if let Some(b) = ckpt.top_level_weight(name, &[vocab])? {
                bias = Some(b);
                break;
            }
        }
        let bias = match bias {
            Some(b) => b,
            None => need(n.bias[0].to_string(), &[vocab])?,
        };
        Ok(Some(MlmHead {
            dense: Linear::new(dense, Layout::OutIn, Some(dense_bias)),
            activation: spec.activation,
            norm,
            decoder,
            bias,
            width,
            vocab,
        }))
    }

    /// Logits `[rows, vocab]` of hidden rows `[rows, hidden]`; `word`: the encoder's word
    /// embeddings `[vocab, width]`, the decoder when tied.
    pub fn logits(&self, hidden: &[f32], rows: usize, word: &Weight) -> Vec<f32> {
        let x = self.dense.forward(hidden, rows, self.activation);
        let x = self.norm.forward(&x, None);
        let decoder: &[f32] = match &self.decoder {
            Decoder::Tied => word,
            Decoder::Separate(w) => w,
        };
        let mut out = vec![0f32; rows * self.vocab];
        kernels::linear(
            &x,
            rows,
            Matrix {
                data: decoder,
                inputs: self.width,
                outputs: self.vocab,
                layout: Layout::OutIn,
            },
            Some(&self.bias),
            Output {
                data: &mut out,
                stride: self.vocab,
                col0: 0,
            },
            Activation::Identity,
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::weights::Anchor;
    use safetensors::{serialize_to_file, tensor::TensorView, Dtype};

    const HIDDEN: usize = 6;
    const WIDTH: usize = 4;
    const VOCAB: usize = 9;
    const NAMES: MlmHeadNames = MlmHeadNames {
        dense: "cls.predictions.transform.dense",
        norm: "cls.predictions.transform.LayerNorm",
        decoder: "cls.predictions.decoder",
        bias: &["cls.predictions.bias", "cls.predictions.decoder.bias"],
    };

    fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n as u32)
            .map(|i| ((i.wrapping_mul(2654435761) ^ seed) % 2001) as f32 / 1000.0 - 1.0)
            .collect()
    }

    /// A checkpoint holding `bert.embeddings.word_embeddings.weight` and the head tensors
    /// `names` (each `(name, shape)`), with values of their own.
    fn checkpoint(dir: &std::path::Path, names: &[(&str, Vec<usize>)]) -> Checkpoint {
        let mut tensors = vec![(
            "bert.embeddings.word_embeddings.weight".to_string(),
            vec![VOCAB, WIDTH],
        )];
        tensors.extend(names.iter().map(|(n, s)| (n.to_string(), s.clone())));
        let bytes: Vec<Vec<u8>> = tensors
            .iter()
            .enumerate()
            .map(|(i, (_, shape))| {
                values(shape.iter().product(), i as u32 * 13 + 5)
                    .iter()
                    .flat_map(|x| x.to_le_bytes())
                    .collect()
            })
            .collect();
        let views: Vec<(String, TensorView<'_>)> = tensors
            .iter()
            .zip(&bytes)
            .map(|((n, s), b)| {
                (
                    n.clone(),
                    TensorView::new(Dtype::F32, s.clone(), b).unwrap(),
                )
            })
            .collect();
        let path = dir.join("model.safetensors");
        serialize_to_file(views, None, &path).unwrap();
        let anchor = Anchor {
            tensor: "embeddings.word_embeddings.weight",
            family: "BERT",
            prefix: "bert",
        };
        Checkpoint::open(&[path], &anchor).unwrap()
    }

    fn spec(tied: bool) -> MlmHeadSpec {
        MlmHeadSpec {
            names: NAMES,
            hidden: HIDDEN,
            width: WIDTH,
            vocab: VOCAB,
            activation: Activation::Relu,
            eps: 1e-12,
            tied,
        }
    }

    fn read(ckpt: &Checkpoint, name: &str, shape: &[usize]) -> Vec<f32> {
        ckpt.top_level_weight(name, shape)
            .unwrap()
            .unwrap()
            .to_vec()
    }

    #[test]
    fn a_checkpoint_without_the_dense_map_has_no_head() {
        let dir = tempfile::tempdir().unwrap();
        let ckpt = checkpoint(dir.path(), &[("cls.predictions.bias", vec![VOCAB])]);
        assert!(MlmHead::load(&ckpt, &spec(true)).unwrap().is_none());
    }

    #[test]
    fn part_of_a_head_is_an_error_that_names_the_missing_tensor() {
        let dir = tempfile::tempdir().unwrap();
        let ckpt = checkpoint(
            dir.path(),
            &[
                (
                    "cls.predictions.transform.dense.weight",
                    vec![WIDTH, HIDDEN],
                ),
                ("cls.predictions.transform.dense.bias", vec![WIDTH]),
                ("cls.predictions.bias", vec![VOCAB]),
            ],
        );
        let err = MlmHead::load(&ckpt, &spec(true))
            .err()
            .expect("a head without its LayerNorm")
            .to_string();
        assert!(
            err.contains("cls.predictions.transform.LayerNorm.weight"),
            "{err}"
        );
    }

    #[test]
    fn an_untied_head_with_gamma_beta_names_equals_the_naive_sum() {
        let dir = tempfile::tempdir().unwrap();
        // A TensorFlow port's LayerNorm names, the bias only under the decoder, a decoder of
        // its own.
        let ckpt = checkpoint(
            dir.path(),
            &[
                (
                    "cls.predictions.transform.dense.weight",
                    vec![WIDTH, HIDDEN],
                ),
                ("cls.predictions.transform.dense.bias", vec![WIDTH]),
                ("cls.predictions.transform.LayerNorm.gamma", vec![WIDTH]),
                ("cls.predictions.transform.LayerNorm.beta", vec![WIDTH]),
                ("cls.predictions.decoder.weight", vec![VOCAB, WIDTH]),
                ("cls.predictions.decoder.bias", vec![VOCAB]),
            ],
        );
        let word = ckpt
            .weight("embeddings.word_embeddings.weight", &[VOCAB, WIDTH])
            .unwrap();
        let x = values(2 * HIDDEN, 99);
        let dense = read(
            &ckpt,
            "cls.predictions.transform.dense.weight",
            &[WIDTH, HIDDEN],
        );
        let dense_b = read(&ckpt, "cls.predictions.transform.dense.bias", &[WIDTH]);
        let gamma = read(
            &ckpt,
            "cls.predictions.transform.LayerNorm.weight",
            &[WIDTH],
        );
        let beta = read(&ckpt, "cls.predictions.transform.LayerNorm.bias", &[WIDTH]);
        let bias = read(&ckpt, "cls.predictions.decoder.bias", &[VOCAB]);
        for tied in [false, true] {
            let decoder = if tied {
                word.to_vec()
            } else {
                read(&ckpt, "cls.predictions.decoder.weight", &[VOCAB, WIDTH])
            };
            let head = MlmHead::load(&ckpt, &spec(tied)).unwrap().unwrap();
            let got = head.logits(&x, 2, &word);
            for r in 0..2 {
                let h: Vec<f64> = (0..WIDTH)
                    .map(|o| {
                        let dot: f64 = (0..HIDDEN)
                            .map(|i| x[r * HIDDEN + i] as f64 * dense[o * HIDDEN + i] as f64)
                            .sum();
                        (dot + dense_b[o] as f64).max(0.0)
                    })
                    .collect();
                let mean = h.iter().sum::<f64>() / WIDTH as f64;
                let var = h.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / WIDTH as f64;
                let normed: Vec<f64> = (0..WIDTH)
                    .map(|i| {
                        (h[i] - mean) / (var + 1e-12).sqrt() * gamma[i] as f64 + beta[i] as f64
                    })
                    .collect();
                for v in 0..VOCAB {
                    let want: f64 = (0..WIDTH)
                        .map(|i| normed[i] * decoder[v * WIDTH + i] as f64)
                        .sum::<f64>()
                        + bias[v] as f64;
                    let d = (got[r * VOCAB + v] as f64 - want).abs();
                    assert!(d < 1e-4, "tied {tied}, row {r}, token {v}: |Δ| {d}");
                }
            }
        }
    }
}
