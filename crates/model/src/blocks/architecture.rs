//! What a network is, in terms every family shares ([`Architecture`]): what callers need to size,
//! check and label its inputs and captures, and the sliding window of the layers that have one.
//! A leaf of `blocks/`: the seam ([`super::network`]) and the captures both read it.

use crate::attention::PositionScheme;
use crate::kernels::{AttentionSpec, Mask};

/// What a network is, in terms every family shares: what callers need to size, check and label
/// its inputs and captures.
#[derive(Clone, Debug, PartialEq)]
pub struct Architecture {
    /// The family's name (`ALBERT`).
    pub family: &'static str,
    /// config.json's `model_type` (`albert`).
    pub model_type: String,
    /// Attention maps captured per input: one per layer run (ALBERT runs `inner_group_num`
    /// layers per hidden layer, and each counts).
    pub layers: usize,
    /// Query heads per layer.
    pub heads: usize,
    /// Key/value heads per layer (`heads` unless grouped-query attention).
    pub kv_heads: usize,
    /// The key/value head each query head reads (the identity unless grouped-query attention).
    pub kv_head: Vec<usize>,
    /// Size of one head's vectors.
    pub head_dim: usize,
    /// Width of the hidden state.
    pub hidden_size: usize,
    /// Vocabulary size: token ids must be below it.
    pub vocab_size: usize,
    /// The longest input in tokens, special tokens included.
    pub max_positions: usize,
    /// Segment (token type) ids the model takes; 0 when it has none (DistilBERT).
    pub token_types: usize,
    /// Whether the model gets the tokenizer's segment ids: where it was pre-trained with
    /// segments and has segment embeddings to tell two sentences apart (BERT, ELECTRA; ALBERT
    /// with `type_vocab_size` 2, though transformers 5's tokenizer no longer returns them).
    /// When not (RoBERTa and XLM-R, pre-trained without them; DistilBERT, which has none), the
    /// model sees zeros, as in transformers.
    pub tokenizer_types: bool,
    /// Which keys a query sees.
    pub mask: Mask,
    /// The sliding attention window of a decoder that has one (Mistral, Gemma 2/3, Qwen with
    /// `use_sliding_window`): on the layers it covers, a query sees at most this many keys.
    pub sliding_window: Option<SlidingWindow>,
    /// How the model encodes positions (rotary: the captured q and k are the rotated ones).
    pub positions: PositionScheme,
}

/// The most layers a config may describe before its per-layer settings (which layers slide) are
/// laid out: no tensor has been checked yet when they are read, and real models have at most a
/// few hundred.
pub const MAX_LAYERS: usize = 1 << 16;

/// A sliding attention window and the layers that use it (the others attend over every earlier
/// key: Gemma 2 alternates, Gemma 3 has one global layer in six).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlidingWindow {
    /// How many keys a query sees, its own included.
    pub size: usize,
    /// Per layer (as [`Architecture::layers`]), whether it is windowed.
    pub layers: Vec<bool>,
}

impl SlidingWindow {
    /// `size` on every one of `layers` layers (Mistral).
    pub fn every(size: usize, layers: usize) -> SlidingWindow {
        SlidingWindow {
            size,
            layers: vec![true; layers],
        }
    }
}

impl Architecture {
    /// The sliding window of layer `layer`, if it has one.
    pub fn window(&self, layer: usize) -> Option<usize> {
        self.sliding_window
            .as_ref()
            .filter(|w| w.layers.get(layer).copied().unwrap_or(false))
            .map(|w| w.size)
    }

    /// `heads` query heads, each with its own key/value head.
    pub fn identity_heads(heads: usize) -> Vec<usize> {
        (0..heads).collect()
    }

    /// Whether the model can tell the two sentences of a pair apart: by segment ids, or by the
    /// separators its tokenizer puts between them when it takes no segment ids.
    pub fn accepts_pairs(&self) -> bool {
        self.mask == Mask::Bidirectional && (!self.tokenizer_types || self.token_types >= 2)
    }

    /// The longest input the network runs exactly: its positions (a sliding window is
    /// computed, so it bounds nothing).
    pub fn longest_input(&self) -> usize {
        self.max_positions
    }

    /// The attention kernel's settings for `batch` sequences of `queries` query tokens over
    /// `keys` key tokens with every head of this shape: its mask, scores scaled by
    /// `1/√head_dim`, no bias. A block with another scale, mask or bias sets those over it
    /// (`AttentionSpec { scale, ..arch.attention(b, n, n) }`).
    pub fn attention(&self, batch: usize, queries: usize, keys: usize) -> AttentionSpec<'_> {
        AttentionSpec {
            batch,
            query_tokens: queries,
            key_tokens: keys,
            heads: self.heads,
            kv_heads: self.kv_heads,
            kv_head: &self.kv_head,
            head_dim: self.head_dim,
            scale: 1.0 / (self.head_dim as f32).sqrt(),
            mask: self.mask,
            bias: None,
            window: None,
            softcap: None,
            blocks: &[],
            sink_logits: None,
        }
    }
}
