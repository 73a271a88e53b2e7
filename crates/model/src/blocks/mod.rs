//! The middle layer of `model/`: the pieces every family's network is assembled from, and the
//! seam they sit behind. A block reads its settings and its tensors' names as data a family
//! gives it; no block names a family.
//!
//! - [`network`]: the seam ([`network::Network`], [`network::CausalLm`], [`network::Seq2Seq`])
//!   and what crosses it ([`network::Batch`], the raw outputs);
//! - [`architecture`]: what a network is ([`architecture::Architecture`]), which every block reads;
//! - [`layers`]: linear maps, norms and the feed-forward block, loaded by name;
//! - [`experts`]: the routed-experts feed-forward block of mixture-of-experts decoders;
//! - [`gated_delta`], [`hybrid`]: the gated delta rule (linear attention) and the hybrid decoder
//!   of Qwen3-Next and Qwen3.5 that mixes it with gated full attention;
//! - [`latent`]: multi-head latent attention's query, key and value projections (DeepSeek);
//! - [`encoder`], [`decoder`], [`seq2seq`]: the post-LN encoder, the pre-norm decoder and the
//!   encoder–decoder stack;
//! - [`mlm_head`]: an encoder's masked-LM head (dense, activation, LayerNorm, decoder), for the
//!   logit lens;
//! - [`rope`]: the rotary embedding's settings read from a config;
//! - [`capture`]: the buffers a forward pass writes the attention into;
//! - [`values`]: the opt-in capture the norm-based analyses read (value norms, residual terms);
//! - [`generate`]: greedy decoding (one loop for decoders and encoder–decoders) and what a
//!   checkpoint says about generating;
//! - [`family`]: what a family is ([`family::Family`], [`family::FamilyConfig`]), as data the
//!   shared code reads.

pub mod architecture;
pub mod capture;
pub mod decoder;
pub mod encoder;
pub mod experts;
pub mod family;
pub mod gated_delta;
pub mod generate;
pub mod hybrid;
pub mod latent;
pub mod layers;
pub mod lens;
pub mod merged_vision;
pub mod mixing;
pub mod mlm_head;
pub mod network;
pub mod rope;
pub mod seq2seq;
pub mod values;
pub mod vision;
