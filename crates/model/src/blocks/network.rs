//! The seam every family's network sits behind: what it is ([`Architecture`]), what it runs
//! ([`Network::forward`] on a padded [`Batch`]), and, for the families that have them, its
//! next-token side ([`CausalLm`], with a [`KvCache`]) and its encoder–decoder side
//! ([`Seq2Seq`]). The rest of `model/` sees these and never a family's own types.

pub use super::architecture::{Architecture, SlidingWindow, MAX_LAYERS};
pub use super::capture::HeadOutputs;
use super::capture::SequenceCapture;
use super::generate::Generation;
use crate::attention::QueryKey;
use crate::error::Error;

/// One padded batch of token ids.
#[derive(Clone, Copy, Debug)]
pub struct Batch<'a> {
    /// Token ids `[sequences · tokens]`, each sequence right-padded to `tokens`.
    pub ids: &'a [u32],
    /// Segment ids, laid out as `ids`.
    pub types: &'a [u32],
    /// Each sequence's real length (at least 1).
    pub lengths: &'a [usize],
    /// The padded length.
    pub tokens: usize,
    /// Rows whose input embeddings are given rather than looked up (a vision-language model's
    /// image tokens); `None` for text alone.
    pub inserted: Option<&'a Inserted>,
}

/// Input embeddings put in place of some rows' token embeddings (after any embedding scale), as
/// a vision-language model scatters its projected image features over its image tokens.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Inserted {
    /// The rows replaced, ascending: indices into the batch's (or a step's) flattened rows.
    pub rows: Vec<usize>,
    /// Their embeddings, `[rows.len(), hidden]`.
    pub values: Vec<f32>,
    /// How many positions at the start of each sequence see each other in full, later ones
    /// included, whatever the sliding window (PaliGemma's prefix-LM mask over its pictures and
    /// prompt, transformers' `token_type_ids` 0); 0 for none. Positions count from the first
    /// cached one, so a step past the prefix sees it only causally.
    pub prefix: usize,
    /// Multimodal rotary positions (M-RoPE's temporal, height and width rows, transformers'
    /// `get_rope_index`), one per position of the sequence from the first: a picture's tokens
    /// at their grid cells, text counting on after the picture's largest position. Positions
    /// past them (generated tokens) continue from the largest + 1, the same three in each row
    /// ([`Inserted::rope_delta`]). Empty: a network with M-RoPE uses the plain positions.
    pub positions: Vec<[usize; 3]>,
}

impl Inserted {
    /// How far M-RoPE's positions after [`Inserted::positions`] are from the plain ones:
    /// their largest + 1 − their number (transformers' `rope_deltas`); 0 without them.
    pub fn rope_delta(&self) -> isize {
        match self.positions.iter().flatten().max() {
            Some(&max) => max as isize + 1 - self.positions.len() as isize,
            None => 0,
        }
    }

    /// Put the embeddings in place in `h` (rows of `width` values).
    pub fn apply(&self, h: &mut [f32], width: usize) {
        for (&r, v) in self.rows.iter().zip(self.values.chunks_exact(width)) {
            h[r * width..][..width].copy_from_slice(v);
        }
    }
}

/// A family's network with its weights.
pub trait Network: Send + Sync {
    /// Its shape, in family-independent terms.
    fn architecture(&self) -> &Architecture;

    /// Run a batch whose ids, types and lengths the caller checked against
    /// [`Network::architecture`], filling one capture per sequence (sized by
    /// [`SequenceCapture::new`] for its length) in place. Returns the last hidden state,
    /// `[sequences · tokens, hidden_size]` (rows of padding included).
    fn forward(&self, batch: &Batch<'_>, captures: &mut [SequenceCapture]) -> Vec<f32>;

    /// The next-token side of a decoder (logits, a KV cache) for generation; `None` for
    /// encoders.
    fn causal_lm(&self) -> Option<&dyn CausalLm> {
        None
    }

    /// The encoder–decoder side (encoder, decoder with cross-attention, head) of BART, T5 and
    /// Marian; `None` for the others.
    fn seq2seq(&self) -> Option<&dyn Seq2Seq> {
        None
    }

    /// The speech side (an encoder over a log-mel spectrogram) of Whisper; `None` for the
    /// others.
    fn speech(&self) -> Option<&dyn Speech> {
        None
    }

    /// The vision side (a forward pass from pixels, the patch grid) of ViT, DeiT, DINOv2 and
    /// CLIP's vision tower; `None` for text models.
    fn vision(&self) -> Option<&dyn Vision> {
        None
    }

    /// The image side of a vision-language model (its vision tower and projector, which turn
    /// a picture into embeddings for its image tokens); `None` for the others.
    fn multimodal(&self) -> Option<&dyn Multimodal> {
        None
    }

    /// Whether its checkpoint carries a vision tower that is not run (a vision-language
    /// checkpoint read as its language model): an image is refused saying so.
    fn unread_vision_tower(&self) -> bool {
        false
    }

    /// The unembedding (final norm, head, soft cap) that turns its residual stream into
    /// logits, for the logit lens; `None` when the checkpoint has no head.
    fn unembedding(&self) -> Option<&dyn Unembedding> {
        None
    }

    /// Runs that take a decoder apart (per-head direct logit attribution, head ablation);
    /// `None` where the network has no such side or no head.
    fn interventions(&self) -> Option<&dyn Interventions> {
        None
    }

    /// One layer re-run with a token's value vectors zeroed (value zeroing, Mohebbi et al.
    /// 2023); `None` where the network has no such pass (encoder–decoders, vision).
    fn value_zeroing(&self) -> Option<&dyn ValueZeroing> {
        None
    }

    /// Whether some layer's softmax has a learned sink (gpt-oss): its rows then sum to 1 less
    /// the sink's share, which is `1 − Σ row` of the captured probabilities.
    fn attention_sinks(&self) -> bool {
        false
    }

    /// The layers that mix tokens without a softmax (Qwen3-Next's gated delta layers), with
    /// the exact token-mixing matrix each applies to its values for the sequence `ids`; empty
    /// where every layer is softmax attention.
    fn token_mixing(&self, _ids: &[u32]) -> Vec<TokenMixing> {
        Vec::new()
    }

    /// The model's number of each captured layer where the captured layers are not all of them
    /// (Qwen3-Next captures its full-attention layers only); `None`: layer `l` is the model's
    /// layer `l`.
    fn captured_layer_numbers(&self) -> Option<&[usize]> {
        None
    }

    /// Heads of each layer's token-mixing matrices ([`Network::token_mixing`]; the
    /// linear-attention layers' value heads); 0 where every layer is attention.
    fn mixing_heads(&self) -> usize {
        0
    }

    /// The model's layers that mix tokens without a softmax, and what they are (`gated
    /// delta`); `None` where every layer is attention.
    fn non_softmax_layers(&self) -> Option<(&'static str, Vec<usize>)> {
        None
    }
}

/// One linear-attention layer's token mixing for one sequence: not a softmax map (rows need not
/// sum to 1 and may be negative), but the exact linear map from the layer's values to its
/// output, `out[h, t] = Σ_{s≤t} matrix[h, t, s] · values[h, s]`.
#[derive(Clone, Debug, PartialEq)]
pub struct TokenMixing {
    /// The model's number of the layer.
    pub layer: usize,
    /// What mixes the tokens (`"gated delta"`).
    pub kind: &'static str,
    /// Heads (the layer's value heads).
    pub heads: usize,
    /// Tokens.
    pub tokens: usize,
    /// Size of one value vector.
    pub value_dim: usize,
    /// The mixing weights `[heads, tokens, tokens]`, row = output token, column = source token,
    /// zero above the diagonal.
    pub matrix: Vec<f32>,
    /// The values the matrix mixes, `[heads, tokens, value_dim]`.
    pub values: Vec<f32>,
    /// The layer's own output for those values (its recurrence), `[heads, tokens, value_dim]`.
    pub output: Vec<f32>,
}

/// One layer of a self-attention network re-run over copies of its input, each copy with one
/// token's value vector zeroed in every head (keys and queries untouched).
pub trait ValueZeroing: Sync {
    /// The outputs `[zero.len(), tokens, hidden]` of the network's layer `layer` (a depth:
    /// ALBERT's shared weights run at several) over `zero.len()` copies of `entering`, the
    /// residual stream `[tokens, hidden]` entering it, copy c with the value vector of token
    /// `zero[c]` zeroed: one batched run of that layer.
    fn zeroed_layer(
        &self,
        entering: &[f32],
        tokens: usize,
        layer: usize,
        zero: &[usize],
    ) -> Vec<f32>;
}

/// Interventions on a decoder's forward pass, for one sequence (no attention captured).
pub trait Interventions: Sync {
    /// The residual stream of `batch` (one sequence) at position `at`, taken apart by layer and
    /// head.
    fn head_outputs(&self, batch: &Batch<'_>, at: usize) -> HeadOutputs;

    /// The residual stream at every stage (`[layers + 1]` of `[n, hidden]`) of one sequence.
    fn stage(&self, ids: &[u32]) -> Vec<Vec<f32>>;

    /// Logits `[heads, vocab]` at position `at` with each head of `layer` ablated in turn
    /// (zeroed, or with `mean` replaced by its mean over the positions), from `entering`, the
    /// residual stream `[tokens, hidden]` entering that layer: one batched run of the layers
    /// from `layer` on over `heads` copies.
    fn ablated_logits(
        &self,
        entering: &[f32],
        tokens: usize,
        layer: usize,
        mean: bool,
        at: usize,
    ) -> Vec<f32>;
}

/// What turns a network's residual stream into next-token (or masked-token) logits: the final
/// normalisation, the head (tied to the token embeddings or not) and any soft cap on the logits
/// (Gemma 2). Networks without a head (bare base models, sentence encoders) have none.
pub trait Unembedding: Sync {
    /// Logits `[rows, vocab]` of residual-stream rows `[rows, hidden]`, one stage of the
    /// residual stream ([`SequenceCapture::with_residual`]).
    fn logits(&self, residual: &[f32], rows: usize) -> Vec<f32>;

    /// Direct logits `[rows, tokens]` of the `tokens` for `parts` (rows of vectors that sum to
    /// the one residual row `residual`) through the final norm frozen at `residual` (its 1/σ
    /// from the whole row; a LayerNorm's centring applied to each part), without the soft cap;
    /// and the logits `[tokens]` of the norm's bias (zero for RMSNorm). `None` where the head
    /// is not linear once the norm is frozen (a masked-LM head's dense map and activation).
    fn direct(
        &self,
        residual: &[f32],
        parts: &[f32],
        rows: usize,
        tokens: &[u32],
    ) -> Option<(Vec<f32>, Vec<f32>)>;

    /// The soft cap on the final logits (Gemma 2), if any: `cap · tanh(logit / cap)`.
    fn softcap(&self) -> Option<f32>;
}

/// The vision side of a network: what its tokens are on a patch grid, and a forward pass from
/// pixels.
pub trait Vision: Sync {
    /// Patch side in pixels.
    fn patch_size(&self) -> usize;

    /// The grid `[rows, cols]` its position embeddings were trained on.
    fn trained_grid(&self) -> [usize; 2];

    /// Whether it has learned position embeddings of [`Vision::trained_grid`], interpolated
    /// to other grids; `false`: its positions (rotary) fit any grid.
    fn learned_positions(&self) -> bool {
        true
    }

    /// The windows its windowed layers attend within, when it has some (Qwen2.5-VL's tower):
    /// patches per side of a window, and for each of its layers whether it is windowed.
    fn windows(&self) -> Option<(usize, Vec<bool>)> {
        None
    }

    /// What each token is for an image of `grid` patches, in the model's order.
    fn cells(&self, grid: [usize; 2]) -> Vec<crate::attention::image::Cell>;

    /// Run `[3, height, width]` pixels (each side at least one patch), capturing into
    /// `capture` (sized for `cells(grid).len()` tokens); the last hidden state `[n, hidden]`.
    /// `norms` gets, for every layer of the network in order, the L2 norm of each token's
    /// output of that layer (the residual stream after it, before any final LayerNorm): where
    /// registers' and high-norm patches' artifacts show (Darcet et al. 2023). `None` when
    /// `cancel` was set before the last layer (checked between layers).
    fn forward_pixels(
        &self,
        pixels: &[f32],
        width: usize,
        height: usize,
        capture: &mut SequenceCapture,
        norms: &mut Vec<Vec<f32>>,
        cancel: &crate::cancel::Cancel,
    ) -> Option<Vec<f32>>;

    /// The attention of the model's pooling head (SigLIP's probe query) over the tokens of the
    /// last hidden state `hidden` (`[n, hidden]`, as [`Vision::forward_pixels`] returned it),
    /// `[heads, n]`; `None` for a model without one.
    fn pooling(&self, _hidden: &[f32]) -> Option<Vec<f32>> {
        None
    }
}

/// The image side of a vision-language model: a vision tower whose hidden states a projector
/// maps into the language model's embedding space, one embedding per image token.
pub trait Multimodal: Sync {
    /// The vision tower's shape.
    fn tower_architecture(&self) -> &Architecture;

    /// The vision tower (patch size, trained grid, its tokens' cells).
    fn tower(&self) -> &dyn Vision;

    /// The token id that stands for one image token in the language model's input.
    fn image_token(&self) -> u32;

    /// What each image token is, for an image of `grid` patches, in order: the tower's tokens
    /// that the projector keeps.
    fn image_cells(&self, grid: [usize; 2]) -> Vec<crate::attention::image::Cell>;

    /// How the processor frames a picture's image tokens in the prompt, when it does (Gemma
    /// 3); `None`: the prompt marks each picture with the image token itself, which the
    /// processor repeats (LLaVA).
    fn framing(&self) -> Option<Framing> {
        None
    }

    /// Whether a picture's image tokens see each other in full in the language model (Gemma
    /// 3's `token_type_ids` mask); `false`: the causal mask alone (LLaVA).
    fn bidirectional_pictures(&self) -> bool {
        false
    }

    /// Whether the processor writes the pictures' image tokens first, then BOS, the prompt and
    /// a newline, and the language model sees that whole prompt in full (PaliGemma's prefix-LM
    /// mask, [`Inserted::prefix`]); `false`: the layout and mask of the methods above.
    fn prefix_lm(&self) -> bool {
        false
    }

    /// Whether the processor splits a picture into tiles plus a global view, each its own run
    /// of image tokens behind Idefics3's marks (`<fake_token_around_image><row_r_col_c>`,
    /// `<global-img>`), and the tower runs on each tile ([`crate::pixels::Tiles`]).
    fn tiled(&self) -> bool {
        false
    }

    /// Patches per side of the square that one image token covers (Gemma 3's projector
    /// average-pools the patch grid, Qwen2.5-VL's merger merges 2 × 2 patches); 1 where each
    /// image token is one of the tower's tokens.
    fn pooling(&self) -> usize {
        1
    }

    /// The tokens around a picture's image token where the prompt marks none (Qwen2.5-VL's
    /// `<|vision_start|>` and `<|vision_end|>`, as its chat template writes them); `None`: the
    /// image token alone (LLaVA).
    fn wrapping(&self) -> Option<[u32; 2]> {
        None
    }

    /// Whether the language model takes multimodal rotary positions (M-RoPE,
    /// [`Inserted::positions`]): a picture's tokens at its grid cells, the text after it on
    /// from its largest (Qwen2.5-VL); `false`: one position per token.
    fn multimodal_positions(&self) -> bool {
        false
    }

    /// Run `[3, height, width]` pixels through the tower, capturing its attention into
    /// `capture` (sized for the tower's `cells(grid)`), and project the features it selects:
    /// `[image_cells(grid).len(), hidden]` embeddings for the language model. `None` when
    /// `cancel` was set (checked between layers).
    fn image_embeddings(
        &self,
        pixels: &[f32],
        width: usize,
        height: usize,
        capture: &mut SequenceCapture,
        cancel: &crate::cancel::Cancel,
    ) -> Option<Vec<f32>>;
}

/// How a processor writes a picture into the prompt text before tokenizing (Gemma 3's
/// `full_image_sequence`): each `mark` in the prompt becomes `around`, the mark, the picture's
/// image tokens, `close` and `around` again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Framing {
    /// The token that marks a picture in the prompt and opens its run (`<start_of_image>`).
    pub mark: u32,
    /// The token after the run (`<end_of_image>`).
    pub close: u32,
    /// The text on either side (`"\n\n"`).
    pub around: &'static str,
    /// The words before a picture's whole view and before its crops, when the processor cuts
    /// pictures into crops (Gemma 3's pan-and-scan: `"Here is the original image "` and
    /// `" and here are some crops to help you see better "`, the crops' runs joined by
    /// spaces).
    pub crops: Option<[&'static str; 2]>,
}

/// One layer's cached keys and values, `[capacity, kv_heads · head_dim]` each.
pub struct LayerCache {
    pub(crate) keys: Vec<f32>,
    pub(crate) values: Vec<f32>,
}

impl LayerCache {
    /// Copy the keys and values of `rows` tokens after the `past` cached ones from `qkv`
    /// (rows of `width` values, each holding `kv_width` key values from `keys_at` on and as
    /// many value values right after them).
    pub(crate) fn store(
        &mut self,
        past: usize,
        qkv: &[f32],
        width: usize,
        keys_at: usize,
        kv_width: usize,
    ) {
        for (r, row) in qkv.chunks_exact(width).enumerate() {
            let at = (past + r) * kv_width;
            self.keys[at..at + kv_width].copy_from_slice(&row[keys_at..][..kv_width]);
            self.values[at..at + kv_width].copy_from_slice(&row[keys_at + kv_width..][..kv_width]);
        }
    }
}

/// The keys and values of the tokens a sequence has run so far, every layer, after the rotary
/// embedding (a KV cache).
pub struct KvCache {
    pub(crate) layers: Vec<LayerCache>,
    pub(crate) len: usize,
    pub(crate) capacity: usize,
    /// The token ids cached, for a network that must run them again (Phi-3's LongRoPE, when a
    /// sequence grows past its original context).
    pub(crate) ids: Vec<u32>,
    /// M-RoPE's offset of later positions, from the prompt's [`Inserted::positions`].
    pub(crate) rope_delta: isize,
}

impl KvCache {
    /// An empty cache of `layers` layers for up to `capacity` tokens of `width` key (and
    /// value) values each.
    pub fn new(layers: usize, capacity: usize, width: usize) -> KvCache {
        KvCache {
            layers: (0..layers)
                .map(|_| LayerCache {
                    keys: vec![0f32; capacity * width],
                    values: vec![0f32; capacity * width],
                })
                .collect(),
            len: 0,
            capacity,
            ids: Vec::new(),
            rope_delta: 0,
        }
    }

    /// Tokens cached.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no token is cached.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The most tokens it can hold.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

/// A decoder that can predict the next token, one step at a time against a [`KvCache`].
pub trait CausalLm: Sync {
    /// An empty cache for up to `capacity` tokens.
    fn new_cache(&self, capacity: usize) -> KvCache;

    /// Run `ids` (at least one; together with those cached at most the cache's capacity and
    /// the model's positions) after the tokens in `cache`, adding theirs to it, and return the
    /// logits `[vocab]` that follow the last of them. Fails when the model has no
    /// language-model head.
    fn step(&self, ids: &[u32], cache: &mut KvCache) -> Result<Vec<f32>, Error> {
        self.step_with(ids, None, cache)
    }

    /// [`CausalLm::step`] with some rows' embeddings given (`inserted`'s rows index `ids`).
    fn step_with(
        &self,
        ids: &[u32],
        inserted: Option<&Inserted>,
        cache: &mut KvCache,
    ) -> Result<Vec<f32>, Error>;
}

/// Raw forward outputs for one sequence.
#[derive(Clone, Debug, PartialEq)]
pub struct Forward {
    /// Attention probabilities `[layers, heads, n, n]`, row-major; row = query, column = key.
    pub weights: Vec<f32>,
    /// Last hidden state `[n, hidden]`.
    pub hidden: Vec<f32>,
    /// Query/key vectors `[layers, heads, n, head_dim]`, when asked for.
    pub query_key: Option<QueryKey>,
    /// Each routed layer's number and its router's decisions for the `n` tokens (a
    /// mixture-of-experts decoder; empty otherwise).
    pub routing: Vec<(usize, super::experts::Routing)>,
}

/// The raw outputs of one encoder–decoder run over token ids.
#[derive(Clone, Debug, PartialEq)]
pub struct Seq2SeqForward {
    /// Encoder self-attention `[layers, heads, n, n]`, the encoder's output `[n, hidden]`.
    pub encoder: Forward,
    /// Decoder self-attention `[layers, heads, m, m]`, the decoder's output `[m, hidden]`.
    pub decoder: Forward,
    /// Cross-attention `[layers, heads, m, n]` (no hidden state); query vectors are the
    /// decoder's, key vectors the encoder's.
    pub cross: Forward,
    /// The logits `[vocab]` after the last decoder token.
    pub logits: Vec<f32>,
}

/// The encoder–decoder side of a network: its two shapes, teacher-forced runs with every
/// attention captured, and greedy generation.
pub trait Seq2Seq: Sync {
    /// The encoder's shape (what [`Network::architecture`] reports: its forward pass runs the
    /// encoder alone).
    fn encoder_architecture(&self) -> &Architecture;

    /// The decoder's shape (mask causal); cross-attention has the decoder's layers and heads.
    fn decoder_architecture(&self) -> &Architecture;

    /// The token the decoder starts from (`decoder_start_token_id`).
    fn decoder_start(&self) -> u32;

    /// The longest decoder input (its positions; T5's relative positions have no limit).
    fn decoder_positions(&self) -> usize;

    /// Run `source` ids through the encoder and `decoder` ids through the decoder (teacher
    /// forcing: the decoder input as given), capturing all three kinds of attention, each row
    /// checked to be a distribution. The caller checked the ids and the capture's size.
    fn forward_ids(
        &self,
        source: &[u32],
        decoder: &[u32],
        capture_query_key: bool,
    ) -> Result<Seq2SeqForward, Error>;

    /// Greedy decoding of up to `max_new_tokens` after the decoder start token, with the
    /// decoder's self-attention and cross-attention keys and values cached; stops after any of
    /// `eos` (kept). `forced` is (`forced_bos_token_id`, `forced_eos_token_id`): the first
    /// token, and a last one at the length limit, as transformers' logits processors force
    /// them. The ids start with the start token (`prompt_len` 1).
    fn greedy(
        &self,
        source: &[u32],
        max_new_tokens: usize,
        eos: &[u32],
        forced: (Option<u32>, Option<u32>),
        progress: &mut (dyn FnMut(usize) + Send),
    ) -> Result<Generation, Error>;
}

/// The speech side of an encoder–decoder whose encoder reads a log-mel spectrogram (Whisper)
/// rather than tokens: the shape of its input, teacher-forced runs with every attention
/// captured, and greedy generation under a rule on each step's logits.
pub trait Speech: Sync {
    /// Mel bins per frame (`num_mel_bins`).
    fn mel_bins(&self) -> usize;

    /// Make now what greedy decoding reads besides the weights (the head's 8-bit screen), so
    /// that the first transcription does not wait for it; made when first needed otherwise.
    fn prepare_decoding(&self) {}

    /// Mel frames of one window (twice the encoder's positions: the second convolution has
    /// stride 2).
    fn window_frames(&self) -> usize;

    /// Run `features` (`[mel_bins, window_frames]`, bin-major as the feature extractor writes
    /// them) through the encoder, once for every decoder pass that follows: its
    /// self-attention captured when `capture` is set (each row checked to be a distribution;
    /// the caller checked the capture's size).
    fn encode_features(
        &self,
        features: &[f32],
        capture: bool,
        capture_query_key: bool,
    ) -> Result<EncodedSource, Error>;

    /// One teacher-forced run capturing all three kinds of attention:
    /// [`Speech::encode_features`], then [`Speech::decode_encoded`].
    fn forward_features(
        &self,
        features: &[f32],
        decoder: &[u32],
        capture_query_key: bool,
    ) -> Result<Seq2SeqForward, Error> {
        let source = self.encode_features(features, true, capture_query_key)?;
        let pass = self.decode_encoded(&source, decoder, capture_query_key)?;
        Ok(Seq2SeqForward {
            encoder: source.encoder,
            decoder: pass.decoder,
            cross: pass.cross,
            logits: pass.logits,
        })
    }

    /// A teacher-forced pass of `decoder` ids against `source`, capturing the decoder's
    /// self-attention and the cross-attention. The caller checked the ids and the capture's
    /// size.
    fn decode_encoded(
        &self,
        source: &EncodedSource,
        decoder: &[u32],
        capture_query_key: bool,
    ) -> Result<DecoderPass, Error>;

    /// Greedy decoding of up to `max_new_tokens` after `prompt` against `source`, with the
    /// decoder's keys and values cached; `rule` sees the ids so far and may change the next
    /// token's logits in place (suppressed tokens, timestamp rules) before the largest is
    /// taken; stops after any of `eos` (kept). `masks_only` says that `rule` only sets
    /// logits to −∞, whatever their values (the head may then be screened).
    #[allow(clippy::too_many_arguments)]
    fn greedy_encoded(
        &self,
        source: &EncodedSource,
        prompt: &[u32],
        max_new_tokens: usize,
        eos: &[u32],
        rule: &mut (dyn FnMut(&[u32], &mut [f32]) + Send),
        masks_only: bool,
        progress: &mut (dyn FnMut(usize) + Send),
    ) -> Result<Generation, Error>;
}

/// An encoder pass kept for the decoder passes that read it (a speech window transcribed,
/// then captured): the encoder's output and self-attention, and each decoder layer's
/// cross-attention keys and values.
pub struct EncodedSource {
    /// The encoder's self-attention `[layers, heads, n, n]` (empty when not captured) and its
    /// output `[n, hidden]`.
    pub encoder: Forward,
    /// Per decoder layer, `[n, 2 · heads · head_dim]`: k | v.
    pub(crate) cross: std::sync::Arc<Vec<Vec<f32>>>,
    /// The encoder's rows `n`.
    pub(crate) source: usize,
}

/// One teacher-forced decoder pass against an [`EncodedSource`].
#[derive(Clone, Debug, PartialEq)]
pub struct DecoderPass {
    /// Decoder self-attention `[layers, heads, m, m]`, the decoder's output `[m, hidden]`.
    pub decoder: Forward,
    /// Cross-attention `[layers, heads, m, n]` (no hidden state).
    pub cross: Forward,
    /// The logits `[vocab]` after the last decoder token.
    pub logits: Vec<f32>,
}

/// `impl Network` for a vision-language network that is its own [`Multimodal`] and whose
/// language model is its `text` field (a [`DecoderStack`](super::decoder::DecoderStack)): every
/// text-side call goes to `text` (LLaVA, Gemma 3 with pictures, PaliGemma).
macro_rules! vision_language_network {
    ($network:ty) => {
        impl $crate::blocks::network::Network for $network {
            fn architecture(&self) -> &$crate::blocks::network::Architecture {
                &self.text.arch
            }

            fn forward(
                &self,
                batch: &$crate::blocks::network::Batch<'_>,
                captures: &mut [$crate::blocks::capture::SequenceCapture],
            ) -> Vec<f32> {
                $crate::blocks::network::Network::forward(&self.text, batch, captures)
            }

            fn causal_lm(&self) -> Option<&dyn $crate::blocks::network::CausalLm> {
                self.text.causal_lm()
            }

            fn multimodal(&self) -> Option<&dyn $crate::blocks::network::Multimodal> {
                Some(self)
            }

            fn unembedding(&self) -> Option<&dyn $crate::blocks::network::Unembedding> {
                self.text.unembedding()
            }

            fn interventions(&self) -> Option<&dyn $crate::blocks::network::Interventions> {
                self.text.interventions()
            }

            fn value_zeroing(&self) -> Option<&dyn $crate::blocks::network::ValueZeroing> {
                self.text.value_zeroing()
            }
        }
    };
}
pub(crate) use vision_language_network;
