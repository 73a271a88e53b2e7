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
    /// `{arch}.attention.key_length`, else `hidden_size / num_attention_heads` (llama.cpp's
    /// rule), else `{arch}.rope.dimension_count`.
    pub head_dim: usize,
    /// `{arch}.rope.dimension_count`: how many dimensions of each head RoPE rotates; `head_dim`
    /// when absent. Fewer than `head_dim` is partial rotary (Phi-3), which a Llama model never has.
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
    /// `{arch}.attn_logit_softcapping` (Gemma 2), when stated.
    pub attn_logit_softcapping: Option<f64>,
    /// `{arch}.final_logit_softcapping` (Gemma 2), when stated.
    pub final_logit_softcapping: Option<f64>,
    /// `{arch}.rope.scaling.yarn_beta_fast` (YaRN's high-frequency bound), when stated.
    pub rope_yarn_beta_fast: Option<f64>,
    /// `{arch}.rope.scaling.yarn_beta_slow` (YaRN's low-frequency bound), when stated.
    pub rope_yarn_beta_slow: Option<f64>,
    /// `{arch}.rope.scaling.attn_factor` (Phi-3's LongRoPE attention factor), when stated.
    pub rope_attn_factor: Option<f64>,
    /// `{arch}.rope.scaling.original_context_length`, when stated (Phi-3's LongRoPE switches
    /// from its short to its long factors beyond it).
    pub rope_original_context_length: Option<usize>,
    /// Whether the file has `rope_factors_long.weight` and `rope_factors_short.weight`: Phi-3's
    /// LongRoPE factors as llama.cpp's converter writes them.
    pub rope_factors_tensors: bool,
    /// `{arch}.rope.dimension_sections` (`qwen2vl`: M-RoPE's runs of frequencies for the
    /// temporal, height and width positions, padded to four with zeros); empty when absent.
    pub rope_sections: Vec<usize>,
    /// `{arch}.swiglu_clamp_exp`: per layer, the clamp of the experts' SwiGLU, when stated
    /// (llama.cpp's gpt-oss graph fixes it at 7.0); empty when absent.
    pub swiglu_clamp_exp: Vec<f64>,
    /// The routed experts of a mixture-of-experts decoder (`{arch}.expert_count` stated and
    /// not 0); `None` for a dense one.
    pub experts: Option<ExpertParams>,
    /// The keys of the architectures beyond a Llama-like decoder's (DeepSeek's latent attention
    /// and routing, Qwen3-Next's gated delta layers), each `None` where absent.
    pub extra: ExtraParams,
}

/// `{arch}.*` keys that only some architectures write (`deepseek2`, `qwen3next`), read as
/// stated: each family checks the ones it needs. The GGUF key each comes from is in its doc.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExtraParams {
    /// `{arch}.attention.q_lora_rank` (DeepSeek's low-rank queries; absent: one `attn_q`).
    pub q_lora_rank: Option<usize>,
    /// `{arch}.attention.kv_lora_rank`: the compressed key/value latent's size.
    pub kv_lora_rank: Option<usize>,
    /// `{arch}.attention.key_length_mla`: a query/key head's size before absorption
    /// (`qk_nope + qk_rope`).
    pub key_length_mla: Option<usize>,
    /// `{arch}.attention.value_length_mla`: a value head's size (`v_head_dim`).
    pub value_length_mla: Option<usize>,
    /// `{arch}.attention.value_length` (older DeepSeek files: the value head's size).
    pub value_length: Option<usize>,
    /// `{arch}.leading_dense_block_count`: the dense layers before the routed ones.
    pub leading_dense_block_count: Option<usize>,
    /// `{arch}.expert_shared_count`: shared experts every token runs through.
    pub expert_shared_count: Option<usize>,
    /// `{arch}.expert_shared_feed_forward_length`: the shared expert's inner size.
    pub expert_shared_feed_forward_length: Option<usize>,
    /// `{arch}.expert_weights_scale`: the routed weights' factor (`routed_scaling_factor`).
    pub expert_weights_scale: Option<f64>,
    /// `{arch}.expert_gating_func`: llama.cpp's `LLAMA_EXPERT_GATING_FUNC_TYPE` (1 softmax,
    /// 2 sigmoid).
    pub expert_gating_func: Option<u64>,
    /// `{arch}.expert_group_count` (`n_group`).
    pub expert_group_count: Option<usize>,
    /// `{arch}.expert_group_used_count` (`topk_group`).
    pub expert_group_used_count: Option<usize>,
    /// `{arch}.rope.scaling.yarn_log_multiplier` (DeepSeek: `0.1 · mscale_all_dim`).
    pub yarn_log_multiplier: Option<f64>,
    /// `{arch}.rope.scaling.yarn_attn_factor`.
    pub yarn_attn_factor: Option<f64>,
    /// `{arch}.rope.scaling.yarn_beta_fast`.
    pub yarn_beta_fast: Option<f64>,
    /// `{arch}.rope.scaling.yarn_beta_slow`.
    pub yarn_beta_slow: Option<f64>,
    /// `{arch}.ssm.conv_kernel`: the gated delta layers' convolution width.
    pub ssm_conv_kernel: Option<usize>,
    /// `{arch}.ssm.state_size`: a key head's size (`linear_key_head_dim`).
    pub ssm_state_size: Option<usize>,
    /// `{arch}.ssm.group_count`: key heads (`linear_num_key_heads`).
    pub ssm_group_count: Option<usize>,
    /// `{arch}.ssm.time_step_rank`: value heads (`linear_num_value_heads`).
    pub ssm_time_step_rank: Option<usize>,
    /// `{arch}.ssm.inner_size`: all value heads' width.
    pub ssm_inner_size: Option<usize>,
    /// `{arch}.full_attention_interval`: every how many layers one is full attention.
    pub full_attention_interval: Option<usize>,
    /// `{arch}.attention.recurrent_layers`: per layer, whether it is a recurrent (gated delta)
    /// layer rather than full attention (llama.cpp's converter writes it from `layer_types`;
    /// it takes precedence over `full_attention_interval`).
    pub recurrent_layers: Option<Vec<bool>>,
}

/// A mixture-of-experts decoder's routed experts, from `{arch}.expert_*` metadata and the
/// tensors of its layers. Each routed layer holds a router (`blk.{i}.ffn_gate_inp.weight`,
/// `[experts, hidden]`) and its experts merged into three 3-D tensors
/// (`ffn_gate_exps`/`ffn_up_exps` `[experts, inner, hidden]`, `ffn_down_exps`
/// `[experts, hidden, inner]`), each expert a slice of whole rows in the tensor's block format.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpertParams {
    /// `{arch}.expert_count`.
    pub count: usize,
    /// `{arch}.expert_used_count`: the experts chosen per token.
    pub used: usize,
    /// `{arch}.expert_feed_forward_length` (Qwen3-MoE's `moe_intermediate_size`), when stated.
    pub feed_forward_length: Option<usize>,
    /// `{arch}.expert_weights_norm`, when stated.
    pub weights_norm: Option<bool>,
    /// Which layers route: those with a router tensor (`blk.{i}.ffn_gate_inp.weight`); the
    /// others run a dense feed-forward block (`ffn_gate`, `ffn_up`, `ffn_down`).
    pub layers: Vec<bool>,
}

/// transformers' name for a llama.cpp tensor name (`blk.3.attn_q.weight` →
/// `model.layers.3.self_attn.q_proj.weight`), for the Llama-like architectures (Qwen3's
/// `attn_q_norm`/`attn_k_norm` included); `None` for a name outside that layout.
/// `rope_freqs.weight` (Llama 3.1's per-frequency divisors, which transformers computes from
/// its config instead) is kept as `model.rope_freqs.weight`. [`hf_tensor_name_for`] knows the
/// other architectures' layouts.
pub fn hf_tensor_name(gguf: &str) -> Option<String> {
    hf_tensor_name_for("llama", gguf)
}

/// The llama.cpp name of a transformers tensor name: the inverse of [`hf_tensor_name`].
pub fn gguf_tensor_name(hf: &str) -> Option<String> {
    gguf_tensor_name_for("llama", hf)
}

/// The names outside the layers, the same in every architecture: (GGUF, transformers).
/// Phi-3's LongRoPE factors (`rope_factors_long`/`_short`, which transformers reads from its
/// config) are kept under `model.` as `rope_freqs.weight` is.
const FIXED: [(&str, &str); 6] = [
    ("token_embd.weight", "model.embed_tokens.weight"),
    ("output_norm.weight", "model.norm.weight"),
    ("output.weight", "lm_head.weight"),
    ("rope_freqs.weight", "model.rope_freqs.weight"),
    ("rope_factors_long.weight", "model.rope_factors_long.weight"),
    (
        "rope_factors_short.weight",
        "model.rope_factors_short.weight",
    ),
];

/// A layer's tensors in architecture `arch`: (GGUF part, transformers part), as llama.cpp's
/// converter (gguf-py's `tensor_mapping.py`) names them. Gemma's `ffn_norm` is the norm before
/// the feed-forward block (`pre_feedforward_layernorm`), Llama's the one after the attention
/// (`post_attention_layernorm`); Phi-3's `ffn_up` is the fused `gate_up_proj`.
fn layer_parts(arch: &str) -> &'static [(&'static str, &'static str)] {
    const COMMON: [(&str, &str); 10] = [
        ("attn_norm", "input_layernorm"),
        ("attn_q", "self_attn.q_proj"),
        ("attn_k", "self_attn.k_proj"),
        ("attn_v", "self_attn.v_proj"),
        ("attn_output", "self_attn.o_proj"),
        ("attn_q_norm", "self_attn.q_norm"),
        ("attn_k_norm", "self_attn.k_norm"),
        ("ffn_gate", "mlp.gate_proj"),
        ("ffn_down", "mlp.down_proj"),
        ("ffn_up", "mlp.up_proj"),
    ];
    // The routed experts (Mixtral, Qwen3-MoE, OLMoE): the router, and the merged experts under
    // the names of transformers' merged layout's three maps (one expert each is a slice, see
    // [`gguf_expert_slice_for`]). Mixtral's `block_sparse_moe.gate` is read as `mlp.gate`'s
    // alias.
    const LLAMA: [(&str, &str); 16] = concat_parts(
        COMMON,
        [
            ("ffn_norm", "post_attention_layernorm"),
            ("ffn_gate_inp", "mlp.gate"),
            ("ffn_gate_inp", "block_sparse_moe.gate"),
            ("ffn_gate_exps", "mlp.experts.gate_proj"),
            ("ffn_up_exps", "mlp.experts.up_proj"),
            ("ffn_down_exps", "mlp.experts.down_proj"),
        ],
    );
    const GEMMA: [(&str, &str); 13] = concat_parts(
        COMMON,
        [
            ("ffn_norm", "pre_feedforward_layernorm"),
            ("post_attention_norm", "post_attention_layernorm"),
            ("post_ffw_norm", "post_feedforward_layernorm"),
        ],
    );
    const PHI3: [(&str, &str); 6] = [
        ("attn_norm", "input_layernorm"),
        ("attn_qkv", "self_attn.qkv_proj"),
        ("attn_output", "self_attn.o_proj"),
        ("ffn_norm", "post_attention_layernorm"),
        ("ffn_up", "mlp.gate_up_proj"),
        ("ffn_down", "mlp.down_proj"),
    ];
    // gpt-oss (llama.cpp's `gpt-oss`): biases on q/k/v/o and the experts, the learned sinks,
    // a norm after the attention, the router `mlp.router`.
    const GPT_OSS: [(&str, &str); 11] = [
        ("attn_norm", "input_layernorm"),
        ("attn_q", "self_attn.q_proj"),
        ("attn_k", "self_attn.k_proj"),
        ("attn_v", "self_attn.v_proj"),
        ("attn_output", "self_attn.o_proj"),
        ("attn_sinks", "self_attn.sinks"),
        ("post_attention_norm", "post_attention_layernorm"),
        ("ffn_gate_inp", "mlp.router"),
        ("ffn_gate_exps", "mlp.experts.gate_proj"),
        ("ffn_up_exps", "mlp.experts.up_proj"),
        ("ffn_down_exps", "mlp.experts.down_proj"),
    ];
    // DeepSeek-V2/V3 (llama.cpp's `deepseek2`): latent attention (`attn_q` or the low-rank
    // `attn_q_a`/`attn_q_b`; the key/value latent `attn_kv_a_mqa`, expanded by `attn_kv_b`, or by
    // the split `attn_k_b`/`attn_v_b` newer converters write, named here as transformers has no
    // such maps), the dense layers' and shared experts' MLPs, the router and merged experts.
    const DEEPSEEK2: [(&str, &str); 22] = [
        ("attn_norm", "input_layernorm"),
        ("attn_q", "self_attn.q_proj"),
        ("attn_q_a", "self_attn.q_a_proj"),
        ("attn_q_a_norm", "self_attn.q_a_layernorm"),
        ("attn_q_b", "self_attn.q_b_proj"),
        ("attn_kv_a_mqa", "self_attn.kv_a_proj_with_mqa"),
        ("attn_kv_a_norm", "self_attn.kv_a_layernorm"),
        ("attn_kv_b", "self_attn.kv_b_proj"),
        ("attn_k_b", "self_attn.k_b_proj"),
        ("attn_v_b", "self_attn.v_b_proj"),
        ("attn_output", "self_attn.o_proj"),
        ("ffn_norm", "post_attention_layernorm"),
        ("ffn_gate", "mlp.gate_proj"),
        ("ffn_down", "mlp.down_proj"),
        ("ffn_up", "mlp.up_proj"),
        ("ffn_gate_inp", "mlp.gate"),
        ("ffn_gate_exps", "mlp.experts.gate_proj"),
        ("ffn_up_exps", "mlp.experts.up_proj"),
        ("ffn_down_exps", "mlp.experts.down_proj"),
        ("ffn_gate_shexp", "mlp.shared_experts.gate_proj"),
        ("ffn_up_shexp", "mlp.shared_experts.up_proj"),
        ("ffn_down_shexp", "mlp.shared_experts.down_proj"),
    ];
    // Qwen3-Next (`qwen3next`): gated full attention as Qwen3's, the gated delta layers' maps as
    // llama.cpp's converter writes them (`in_proj_qkvz` split into `attn_qkv` and `attn_gate`,
    // named here as transformers has no such maps), the shared expert and its gate.
    const QWEN3NEXT: [(&str, &str); 25] = [
        ("attn_norm", "input_layernorm"),
        ("post_attention_norm", "post_attention_layernorm"),
        ("attn_q", "self_attn.q_proj"),
        ("attn_k", "self_attn.k_proj"),
        ("attn_v", "self_attn.v_proj"),
        ("attn_output", "self_attn.o_proj"),
        ("attn_q_norm", "self_attn.q_norm"),
        ("attn_k_norm", "self_attn.k_norm"),
        ("attn_qkv", "linear_attn.in_proj_qkv"),
        ("attn_gate", "linear_attn.in_proj_z"),
        ("ssm_ba", "linear_attn.in_proj_ba"),
        ("ssm_conv1d", "linear_attn.conv1d"),
        ("ssm_norm", "linear_attn.norm"),
        ("ssm_out", "linear_attn.out_proj"),
        ("ffn_gate", "mlp.gate_proj"),
        ("ffn_down", "mlp.down_proj"),
        ("ffn_up", "mlp.up_proj"),
        ("ffn_gate_inp", "mlp.gate"),
        ("ffn_gate_exps", "mlp.experts.gate_proj"),
        ("ffn_up_exps", "mlp.experts.up_proj"),
        ("ffn_down_exps", "mlp.experts.down_proj"),
        ("ffn_gate_shexp", "mlp.shared_expert.gate_proj"),
        ("ffn_up_shexp", "mlp.shared_expert.up_proj"),
        ("ffn_down_shexp", "mlp.shared_expert.down_proj"),
        ("ffn_gate_inp_shexp", "mlp.shared_expert_gate"),
    ];
    // Qwen3.5 and Qwen3.5-MoE (`qwen35`, `qwen35moe`): Qwen3-Next's, but for the gated delta
    // layers' four plain input maps (`attn_qkv`, `attn_gate`, `ssm_beta`, `ssm_alpha`).
    const QWEN35: [(&str, &str); 26] = [
        ("attn_norm", "input_layernorm"),
        ("post_attention_norm", "post_attention_layernorm"),
        ("attn_q", "self_attn.q_proj"),
        ("attn_k", "self_attn.k_proj"),
        ("attn_v", "self_attn.v_proj"),
        ("attn_output", "self_attn.o_proj"),
        ("attn_q_norm", "self_attn.q_norm"),
        ("attn_k_norm", "self_attn.k_norm"),
        ("attn_qkv", "linear_attn.in_proj_qkv"),
        ("attn_gate", "linear_attn.in_proj_z"),
        ("ssm_beta", "linear_attn.in_proj_b"),
        ("ssm_alpha", "linear_attn.in_proj_a"),
        ("ssm_conv1d", "linear_attn.conv1d"),
        ("ssm_norm", "linear_attn.norm"),
        ("ssm_out", "linear_attn.out_proj"),
        ("ffn_gate", "mlp.gate_proj"),
        ("ffn_down", "mlp.down_proj"),
        ("ffn_up", "mlp.up_proj"),
        ("ffn_gate_inp", "mlp.gate"),
        ("ffn_gate_exps", "mlp.experts.gate_proj"),
        ("ffn_up_exps", "mlp.experts.up_proj"),
        ("ffn_down_exps", "mlp.experts.down_proj"),
        ("ffn_gate_shexp", "mlp.shared_expert.gate_proj"),
        ("ffn_up_shexp", "mlp.shared_expert.up_proj"),
        ("ffn_down_shexp", "mlp.shared_expert.down_proj"),
        ("ffn_gate_inp_shexp", "mlp.shared_expert_gate"),
    ];
    match arch {
        "gemma2" | "gemma3" => &GEMMA,
        "phi3" => &PHI3,
        "gpt-oss" => &GPT_OSS,
        "deepseek2" => &DEEPSEEK2,
        "qwen3next" => &QWEN3NEXT,
        "qwen35" | "qwen35moe" => &QWEN35,
        _ => &LLAMA,
    }
}

/// A layer's tensors whose leaf is not `weight` or `bias` on one side: (GGUF name after
/// `blk.{i}.`, transformers name after `model.layers.{i}.`). DeepSeek-V3's router bias; Qwen3-Next's
/// and Qwen3.5's decay rates, which llama.cpp's converter stores as `-exp(A_log)` (named here as
/// transformers has no such tensor) and their `dt_bias`.
fn layer_leaves(arch: &str) -> &'static [(&'static str, &'static str)] {
    match arch {
        "deepseek2" => &[("exp_probs_b.bias", "mlp.gate.e_score_correction_bias")],
        "qwen3next" | "qwen35" | "qwen35moe" => &[
            ("ssm_a", "linear_attn.ssm_a"),
            ("ssm_dt.bias", "linear_attn.dt_bias"),
        ],
        _ => &[],
    }
}

const fn concat_parts<const A: usize, const B: usize, const N: usize>(
    a: [(&'static str, &'static str); A],
    b: [(&'static str, &'static str); B],
) -> [(&'static str, &'static str); N] {
    let mut out = [("", ""); N];
    let mut i = 0;
    while i < A {
        out[i] = a[i];
        i += 1;
    }
    while i < N {
        out[i] = b[i - A];
        i += 1;
    }
    out
}

/// [`hf_tensor_name`] for a file of architecture `arch` (`general.architecture`): Gemma 2/3's
/// four norms per layer and Phi-3's fused q/k/v and gate/up maps are named as transformers'
/// `Gemma2ForCausalLM`/`Gemma3ForCausalLM` and `Phi3ForCausalLM` name them.
pub fn hf_tensor_name_for(arch: &str, gguf: &str) -> Option<String> {
    if let Some((_, hf)) = FIXED.iter().find(|(g, _)| *g == gguf) {
        return Some(hf.to_string());
    }
    let rest = gguf.strip_prefix("blk.")?;
    let (layer, rest) = rest.split_once('.')?;
    layer.parse::<usize>().ok()?;
    if let Some((_, hf)) = layer_leaves(arch).iter().find(|(g, _)| *g == rest) {
        return Some(format!("model.layers.{layer}.{hf}"));
    }
    let (part, suffix) = rest.rsplit_once('.')?;
    if suffix != "weight" && suffix != "bias" {
        return None;
    }
    let (_, hf) = layer_parts(arch).iter().find(|(g, _)| *g == part)?;
    Some(format!("model.layers.{layer}.{hf}.{suffix}"))
}

/// The llama.cpp name of a transformers tensor name in architecture `arch`: the inverse of
/// [`hf_tensor_name_for`].
pub fn gguf_tensor_name_for(arch: &str, hf: &str) -> Option<String> {
    if let Some((gguf, _)) = FIXED.iter().find(|(_, h)| *h == hf) {
        return Some(gguf.to_string());
    }
    let rest = hf.strip_prefix("model.layers.")?;
    let (layer, rest) = rest.split_once('.')?;
    layer.parse::<usize>().ok()?;
    if let Some((gguf, _)) = layer_leaves(arch).iter().find(|(_, h)| *h == rest) {
        return Some(format!("blk.{layer}.{gguf}"));
    }
    let (part, suffix) = rest.rsplit_once('.')?;
    if suffix != "weight" && suffix != "bias" {
        return None;
    }
    let (gguf, _) = layer_parts(arch).iter().find(|(_, h)| *h == part)?;
    Some(format!("blk.{layer}.{gguf}.{suffix}"))
}

/// The leaf names of one expert's maps in transformers' per-expert layout (`gate_proj`, …;
/// Mixtral's `w1`, `w3`, `w2`) and the merged GGUF tensor each is a slice of.
const EXPERT_LEAVES: [(&str, &str); 6] = [
    ("gate_proj", "ffn_gate_exps"),
    ("up_proj", "ffn_up_exps"),
    ("down_proj", "ffn_down_exps"),
    ("w1", "ffn_gate_exps"),
    ("w3", "ffn_up_exps"),
    ("w2", "ffn_down_exps"),
];

/// Where one expert's matrix lies in a GGUF file of architecture `arch`: for a transformers name
/// of the per-expert layout (`model.layers.3.mlp.experts.5.gate_proj.weight`, Mixtral's
/// `model.layers.3.block_sparse_moe.experts.5.w1.weight`), the merged 3-D tensor
/// (`blk.3.ffn_gate_exps.weight`) and the expert's index in it (5). `None` for any other name, and
/// for Gemma's and Phi-3's layouts, which have no experts.
pub fn gguf_expert_slice_for(arch: &str, hf: &str) -> Option<(String, usize)> {
    if matches!(arch, "gemma2" | "gemma3" | "phi3") {
        return None;
    }
    let rest = hf.strip_prefix("model.layers.")?;
    let (layer, rest) = rest.split_once('.')?;
    layer.parse::<usize>().ok()?;
    let rest = rest
        .strip_prefix("mlp.experts.")
        .or_else(|| rest.strip_prefix("block_sparse_moe.experts."))?;
    let (expert, rest) = rest.split_once('.')?;
    let expert = expert.parse::<usize>().ok()?;
    let leaf = rest.strip_suffix(".weight")?;
    let (_, merged) = EXPERT_LEAVES.iter().find(|(l, _)| *l == leaf)?;
    Some((format!("blk.{layer}.{merged}.weight"), expert))
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

    #[test]
    fn routed_experts_map_to_the_merged_tensors_and_their_slices() {
        for arch in ["llama", "qwen3moe", "olmoe"] {
            for (gguf, hf) in [
                (
                    "blk.1.ffn_gate_inp.weight",
                    "model.layers.1.mlp.gate.weight",
                ),
                (
                    "blk.0.ffn_gate_exps.weight",
                    "model.layers.0.mlp.experts.gate_proj.weight",
                ),
                (
                    "blk.2.ffn_down_exps.weight",
                    "model.layers.2.mlp.experts.down_proj.weight",
                ),
            ] {
                assert_eq!(hf_tensor_name_for(arch, gguf).as_deref(), Some(hf));
                assert_eq!(gguf_tensor_name_for(arch, hf).as_deref(), Some(gguf));
            }
            // Mixtral's router name is an alias of the same tensor.
            assert_eq!(
                gguf_tensor_name_for(arch, "model.layers.1.block_sparse_moe.gate.weight")
                    .as_deref(),
                Some("blk.1.ffn_gate_inp.weight")
            );
            for (hf, gguf, e) in [
                (
                    "model.layers.3.mlp.experts.5.gate_proj.weight",
                    "blk.3.ffn_gate_exps.weight",
                    5,
                ),
                (
                    "model.layers.0.mlp.experts.0.up_proj.weight",
                    "blk.0.ffn_up_exps.weight",
                    0,
                ),
                (
                    "model.layers.1.block_sparse_moe.experts.7.w2.weight",
                    "blk.1.ffn_down_exps.weight",
                    7,
                ),
                (
                    "model.layers.1.block_sparse_moe.experts.2.w3.weight",
                    "blk.1.ffn_up_exps.weight",
                    2,
                ),
            ] {
                assert_eq!(
                    gguf_expert_slice_for(arch, hf),
                    Some((gguf.to_string(), e)),
                    "{hf}"
                );
            }
        }
        for odd in [
            "model.layers.0.mlp.experts.x.gate_proj.weight",
            "model.layers.0.mlp.experts.1.gate_proj.bias",
            "model.layers.0.mlp.experts.1.w4.weight",
            "model.layers.0.mlp.gate_proj.weight",
            "model.layers.0.mlp.experts.gate_up_proj",
        ] {
            assert_eq!(gguf_expert_slice_for("llama", odd), None, "{odd}");
        }
        assert_eq!(
            gguf_expert_slice_for("phi3", "model.layers.0.mlp.experts.1.gate_proj.weight"),
            None
        );
    }

    #[test]
    fn gpt_oss_names_its_sinks_norms_router_and_experts() {
        for (gguf, hf) in [
            (
                "blk.0.attn_sinks.weight",
                "model.layers.0.self_attn.sinks.weight",
            ),
            (
                "blk.2.post_attention_norm.weight",
                "model.layers.2.post_attention_layernorm.weight",
            ),
            ("blk.1.ffn_gate_inp.bias", "model.layers.1.mlp.router.bias"),
            (
                "blk.1.ffn_up_exps.bias",
                "model.layers.1.mlp.experts.up_proj.bias",
            ),
            (
                "blk.0.attn_output.bias",
                "model.layers.0.self_attn.o_proj.bias",
            ),
        ] {
            assert_eq!(hf_tensor_name_for("gpt-oss", gguf).as_deref(), Some(hf));
            assert_eq!(gguf_tensor_name_for("gpt-oss", hf).as_deref(), Some(gguf));
        }
        assert_eq!(
            gguf_expert_slice_for("gpt-oss", "model.layers.2.mlp.experts.3.down_proj.weight"),
            Some(("blk.2.ffn_down_exps.weight".to_string(), 3))
        );
        // gpt-oss has no ffn_norm (its norm after the attention is post_attention_norm).
        assert_eq!(hf_tensor_name_for("gpt-oss", "blk.0.ffn_norm.weight"), None);
    }

    #[test]
    fn deepseek2_qwen3next_and_qwen35_layouts_map_both_ways() {
        for (arch, gguf, hf) in [
            (
                "deepseek2",
                "blk.1.attn_q_a_norm.weight",
                "model.layers.1.self_attn.q_a_layernorm.weight",
            ),
            (
                "deepseek2",
                "blk.0.attn_kv_a_mqa.weight",
                "model.layers.0.self_attn.kv_a_proj_with_mqa.weight",
            ),
            (
                "deepseek2",
                "blk.2.attn_k_b.weight",
                "model.layers.2.self_attn.k_b_proj.weight",
            ),
            (
                "deepseek2",
                "blk.2.exp_probs_b.bias",
                "model.layers.2.mlp.gate.e_score_correction_bias",
            ),
            (
                "deepseek2",
                "blk.1.ffn_down_shexp.weight",
                "model.layers.1.mlp.shared_experts.down_proj.weight",
            ),
            (
                "qwen3next",
                "blk.0.ssm_a",
                "model.layers.0.linear_attn.ssm_a",
            ),
            (
                "qwen3next",
                "blk.0.ssm_dt.bias",
                "model.layers.0.linear_attn.dt_bias",
            ),
            (
                "qwen3next",
                "blk.2.attn_gate.weight",
                "model.layers.2.linear_attn.in_proj_z.weight",
            ),
            (
                "qwen3next",
                "blk.3.post_attention_norm.weight",
                "model.layers.3.post_attention_layernorm.weight",
            ),
            (
                "qwen3next",
                "blk.0.ffn_gate_inp_shexp.weight",
                "model.layers.0.mlp.shared_expert_gate.weight",
            ),
            (
                "qwen35",
                "blk.0.ssm_beta.weight",
                "model.layers.0.linear_attn.in_proj_b.weight",
            ),
            (
                "qwen35",
                "blk.0.ssm_alpha.weight",
                "model.layers.0.linear_attn.in_proj_a.weight",
            ),
            (
                "qwen35",
                "blk.1.attn_qkv.weight",
                "model.layers.1.linear_attn.in_proj_qkv.weight",
            ),
            ("qwen35", "blk.2.ssm_a", "model.layers.2.linear_attn.ssm_a"),
            (
                "qwen35moe",
                "blk.3.ffn_up_shexp.weight",
                "model.layers.3.mlp.shared_expert.up_proj.weight",
            ),
        ] {
            assert_eq!(
                hf_tensor_name_for(arch, gguf).as_deref(),
                Some(hf),
                "{arch}"
            );
            assert_eq!(
                gguf_tensor_name_for(arch, hf).as_deref(),
                Some(gguf),
                "{arch}"
            );
        }
        assert_eq!(
            gguf_expert_slice_for("deepseek2", "model.layers.1.mlp.experts.3.up_proj.weight"),
            Some(("blk.1.ffn_up_exps.weight".to_string(), 3))
        );
        // Each architecture's own leaves only.
        assert_eq!(hf_tensor_name_for("llama", "blk.0.exp_probs_b.bias"), None);
        assert_eq!(hf_tensor_name_for("deepseek2", "blk.0.ssm_a"), None);
        // Qwen3.5 has no grouped `ssm_ba`, Qwen3-Next no `ssm_beta`.
        assert_eq!(hf_tensor_name_for("qwen35", "blk.0.ssm_ba.weight"), None);
        assert_eq!(
            hf_tensor_name_for("qwen3next", "blk.0.ssm_beta.weight"),
            None
        );
    }

    #[test]
    fn gemma_and_phi3_layouts_are_their_own() {
        for (arch, gguf, hf) in [
            (
                "gemma2",
                "blk.1.ffn_norm.weight",
                "model.layers.1.pre_feedforward_layernorm.weight",
            ),
            (
                "gemma3",
                "blk.0.post_attention_norm.weight",
                "model.layers.0.post_attention_layernorm.weight",
            ),
            (
                "gemma2",
                "blk.0.post_ffw_norm.weight",
                "model.layers.0.post_feedforward_layernorm.weight",
            ),
            (
                "gemma3",
                "blk.4.attn_k_norm.weight",
                "model.layers.4.self_attn.k_norm.weight",
            ),
            (
                "phi3",
                "blk.2.attn_qkv.weight",
                "model.layers.2.self_attn.qkv_proj.weight",
            ),
            (
                "phi3",
                "blk.0.ffn_up.weight",
                "model.layers.0.mlp.gate_up_proj.weight",
            ),
            (
                "phi3",
                "blk.0.ffn_norm.weight",
                "model.layers.0.post_attention_layernorm.weight",
            ),
            (
                "phi3",
                "rope_factors_long.weight",
                "model.rope_factors_long.weight",
            ),
        ] {
            assert_eq!(
                hf_tensor_name_for(arch, gguf).as_deref(),
                Some(hf),
                "{arch}"
            );
            assert_eq!(
                gguf_tensor_name_for(arch, hf).as_deref(),
                Some(gguf),
                "{arch}"
            );
        }
        // Each layout has only its own names.
        assert_eq!(
            hf_tensor_name_for("llama", "blk.0.post_ffw_norm.weight"),
            None
        );
        assert_eq!(hf_tensor_name_for("phi3", "blk.0.attn_q.weight"), None);
        assert_eq!(
            gguf_tensor_name_for("gemma2", "model.layers.0.mlp.gate_up_proj.weight"),
            None
        );
    }
}
