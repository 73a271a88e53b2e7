//! The hyper-parameters a GGUF file states in its metadata (`{arch}.block_count`, …), under the
//! names transformers' `LlamaConfig` gives them, and the mapping between llama.cpp's tensor names
//! and transformers'.

/// RoPE scaling stated by `{arch}.rope.scaling.*` (or the older `{arch}.rope.scale_linear`).
#[derive(Clone, Debug, PartialEq)]
pub enum RopeScaling {
    /// Positions divided by `factor` (transformers' `rope_type: "linear"`).
    Linear {
        /// The divisor.
        factor: f64,
    },
    /// YaRN (transformers' `rope_type: "yarn"`).
    Yarn {
        /// The context extension factor.
        factor: f64,
        /// `{arch}.rope.scaling.original_context_length`, when stated.
        original_max_position_embeddings: Option<usize>,
    },
    /// Another type, by its GGUF name (`longrope`, …), for the model family to refuse by name.
    Other {
        /// `{arch}.rope.scaling.type` as written.
        kind: String,
        /// `{arch}.rope.scaling.factor`, when stated.
        factor: Option<f64>,
    },
}

/// A decoder's shape and constants from GGUF metadata, named as in transformers' `LlamaConfig`.
/// The GGUF key each comes from is in its doc; `{arch}` is [`DecoderParams::architecture`].
#[derive(Clone, Debug, PartialEq)]
pub struct DecoderParams {
    /// `general.architecture` (`llama`, `qwen2`, …): the prefix of every key below.
    pub architecture: String,
    /// `{arch}.block_count`.
    pub num_hidden_layers: usize,
    /// `{arch}.embedding_length`.
    pub hidden_size: usize,
    /// `{arch}.feed_forward_length`.
    pub intermediate_size: usize,
    /// `{arch}.attention.head_count`.
    pub num_attention_heads: usize,
    /// `{arch}.attention.head_count_kv`; the head count when absent (no GQA).
    pub num_key_value_heads: usize,
    /// `{arch}.attention.key_length`, else `{arch}.rope.dimension_count`, else
    /// `hidden_size / num_attention_heads`.
    pub head_dim: usize,
    /// `{arch}.rope.dimension_count`: how many dimensions of each head RoPE rotates; `head_dim`
    /// when absent. Fewer than `head_dim` is partial rotary, which a Llama model never has.
    pub rope_dimension_count: usize,
    /// `{arch}.rope.freq_base`; 10,000 when absent (llama.cpp's default).
    pub rope_theta: f64,
    /// `{arch}.rope.scaling.type` with `.factor` and `.original_context_length` (or the older
    /// `{arch}.rope.scale_linear`); `None` when absent or `none`.
    pub rope_scaling: Option<RopeScaling>,
    /// Whether the file has a `rope_freqs.weight` tensor: per-frequency divisors that llama.cpp's
    /// converter writes for Llama 3.1+'s `rope_type: "llama3"` (instead of metadata).
    pub rope_freqs_tensor: bool,
    /// `{arch}.attention.layer_norm_rms_epsilon` (a float32 in the file, widened exactly: SmolLM2's
    /// 1e-5 reads as 9.999999747378752e-06, as transformers reads it).
    pub rms_norm_eps: f64,
    /// `{arch}.context_length`.
    pub max_position_embeddings: usize,
    /// `{arch}.attention.sliding_window`, when stated (Mistral).
    pub sliding_window: Option<usize>,
    /// `{arch}.vocab_size`, else the length of `tokenizer.ggml.tokens`, else the rows of
    /// `token_embd.weight`.
    pub vocab_size: usize,
    /// No `output.weight` tensor: the LM head is the token embedding (llama.cpp writes the output
    /// projection only when it differs).
    pub tie_word_embeddings: bool,
    /// Whether the q/k/v projections have biases (`blk.0.attn_q.bias`: Qwen2).
    pub attention_bias: bool,
    /// `tokenizer.ggml.bos_token_id`.
    pub bos_token_id: Option<u32>,
    /// `tokenizer.ggml.eos_token_id`.
    pub eos_token_id: Option<u32>,
    /// `tokenizer.ggml.padding_token_id`.
    pub pad_token_id: Option<u32>,
}

/// transformers' name for a llama.cpp tensor name (`blk.3.attn_q.weight` →
/// `model.layers.3.self_attn.q_proj.weight`), for the Llama-like architectures (Qwen3's
/// `attn_q_norm`/`attn_k_norm` included); `None` for a name outside that layout.
/// `rope_freqs.weight` (Llama 3.1's per-frequency divisors, which transformers computes from
/// its config instead) is kept as `model.rope_freqs.weight`.
pub fn hf_tensor_name(gguf: &str) -> Option<String> {
    let fixed = match gguf {
        "token_embd.weight" => Some("model.embed_tokens.weight"),
        "output_norm.weight" => Some("model.norm.weight"),
        "output.weight" => Some("lm_head.weight"),
        "rope_freqs.weight" => Some("model.rope_freqs.weight"),
        _ => None,
    };
    if let Some(name) = fixed {
        return Some(name.to_string());
    }
    let rest = gguf.strip_prefix("blk.")?;
    let (layer, rest) = rest.split_once('.')?;
    layer.parse::<usize>().ok()?;
    let (part, suffix) = rest.rsplit_once('.')?;
    if suffix != "weight" && suffix != "bias" {
        return None;
    }
    let hf = match part {
        "attn_norm" => "input_layernorm",
        "ffn_norm" => "post_attention_layernorm",
        "attn_q" => "self_attn.q_proj",
        "attn_k" => "self_attn.k_proj",
        "attn_v" => "self_attn.v_proj",
        "attn_output" => "self_attn.o_proj",
        "attn_q_norm" => "self_attn.q_norm",
        "attn_k_norm" => "self_attn.k_norm",
        "ffn_gate" => "mlp.gate_proj",
        "ffn_up" => "mlp.up_proj",
        "ffn_down" => "mlp.down_proj",
        _ => return None,
    };
    Some(format!("model.layers.{layer}.{hf}.{suffix}"))
}

/// The llama.cpp name of a transformers tensor name: the inverse of [`hf_tensor_name`].
pub fn gguf_tensor_name(hf: &str) -> Option<String> {
    let fixed = match hf {
        "model.embed_tokens.weight" => Some("token_embd.weight"),
        "model.norm.weight" => Some("output_norm.weight"),
        "lm_head.weight" => Some("output.weight"),
        "model.rope_freqs.weight" => Some("rope_freqs.weight"),
        _ => None,
    };
    if let Some(name) = fixed {
        return Some(name.to_string());
    }
    let rest = hf.strip_prefix("model.layers.")?;
    let (layer, rest) = rest.split_once('.')?;
    layer.parse::<usize>().ok()?;
    let (part, suffix) = rest.rsplit_once('.')?;
    if suffix != "weight" && suffix != "bias" {
        return None;
    }
    let gguf = match part {
        "input_layernorm" => "attn_norm",
        "post_attention_layernorm" => "ffn_norm",
        "self_attn.q_proj" => "attn_q",
        "self_attn.k_proj" => "attn_k",
        "self_attn.v_proj" => "attn_v",
        "self_attn.o_proj" => "attn_output",
        "self_attn.q_norm" => "attn_q_norm",
        "self_attn.k_norm" => "attn_k_norm",
        "mlp.gate_proj" => "ffn_gate",
        "mlp.up_proj" => "ffn_up",
        "mlp.down_proj" => "ffn_down",
        _ => return None,
    };
    Some(format!("blk.{layer}.{gguf}.{suffix}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensor_names_map_both_ways() {
        for (gguf, hf) in [
            ("token_embd.weight", "model.embed_tokens.weight"),
            ("output_norm.weight", "model.norm.weight"),
            ("output.weight", "lm_head.weight"),
            (
                "blk.0.attn_norm.weight",
                "model.layers.0.input_layernorm.weight",
            ),
            (
                "blk.29.ffn_norm.weight",
                "model.layers.29.post_attention_layernorm.weight",
            ),
            ("blk.7.attn_q.bias", "model.layers.7.self_attn.q_proj.bias"),
            (
                "blk.12.attn_output.weight",
                "model.layers.12.self_attn.o_proj.weight",
            ),
            (
                "blk.3.ffn_down.weight",
                "model.layers.3.mlp.down_proj.weight",
            ),
            (
                "blk.2.attn_k_norm.weight",
                "model.layers.2.self_attn.k_norm.weight",
            ),
            ("rope_freqs.weight", "model.rope_freqs.weight"),
        ] {
            assert_eq!(hf_tensor_name(gguf).as_deref(), Some(hf));
            assert_eq!(gguf_tensor_name(hf).as_deref(), Some(gguf));
        }
        for odd in [
            "blk.x.attn_q.weight",
            "blk.0.attn_q.scale",
            "blk.0.unknown.weight",
            "blk.0",
        ] {
            assert_eq!(hf_tensor_name(odd), None, "{odd}");
        }
        assert_eq!(
            gguf_tensor_name("model.layers.0.self_attn.rotary_emb.inv_freq"),
            None
        );
    }
}
