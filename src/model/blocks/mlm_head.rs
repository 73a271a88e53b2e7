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
use crate::model::formats::weights::{Checkpoint, Weight, WeightsError};
use crate::model::kernels::{self, Activation, Layout, Matrix, Output};

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
