//! Fidelity of DeepSeek-V2 and DeepSeek-V3 against Hugging Face transformers, on the tiny
//! random checkpoints `tests/reference/make_deepseek.py` made (eager attention and experts,
//! float32): multi-head latent attention (one `q_proj` or the low-rank `q_a_proj`/`q_b_proj`,
//! the compressed key/value latent, the shared rotary key, value heads narrower than query/key
//! heads), shared plus routed experts after `first_k_dense_replace` dense layers, V2's softmax
//! routers (greedy and group-limited) and V3's sigmoid router with its correction bias and
//! `noaux_tc` groups, V3 under YaRN with `mscale` in the softmax scale. Held to what every
//! mixture-of-experts decoder is held to (`decoders::check_decoder`: every layer and head within
//! 1e-5, q/k, hidden state, logits, greedy generation; `moe::check_router`: the chosen experts
//! identical and in the same order, their weights and every expert's score within 1e-5).
//!
//! `cargo test --release --test suite fidelity::deepseek -- --nocapture` prints max |Δ| per case.

use super::decoders::check_decoder;
use super::moe::check_router;

#[test]
fn tiny_deepseek_v2_lite_with_one_q_proj_matches_hf() {
    check_decoder("tiny-deepseek_v2_lite", "tiny-deepseek_v2_lite");
    check_router("tiny-deepseek_v2_lite", "tiny-deepseek_v2_lite");
}

#[test]
fn tiny_deepseek_v2_with_low_rank_queries_and_group_limited_routing_matches_hf() {
    check_decoder("tiny-deepseek_v2", "tiny-deepseek_v2");
    check_router("tiny-deepseek_v2", "tiny-deepseek_v2");
}

#[test]
fn tiny_deepseek_v3_with_noaux_tc_groups_yarn_and_a_dense_layer_matches_hf() {
    check_decoder("tiny-deepseek_v3", "tiny-deepseek_v3");
    check_router("tiny-deepseek_v3", "tiny-deepseek_v3");
}
