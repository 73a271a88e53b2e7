#!/usr/bin/env python3
"""GGUF copies of the tiny DeepSeek-V2/V3 models (llama.cpp's `deepseek2`) in F32 and Q8_0, and
transformers' reference outputs for each, router decisions included, run on the weights gguf-py
dequantises from that very file.

    /tmp/venvref/bin/python tests/reference/make_gguf_hybrid.py   # any Python with requirements.txt

Writes tests/fixtures/gguf/tiny-<model>.<TYPE>.gguf and tests/reference/gguf-hybrid.{json,safetensors}
in make_gguf_moe.py's manifest format (tests/suite/fidelity/gguf_moe.rs reads both).

Files are written as llama.cpp's convert_hf_to_gguf.py (`DeepseekV2Model`) writes them:
- `deepseek2.*` metadata: the generic keys (block_count, context_length, embedding_length,
  feed_forward_length, head_count, rope.freq_base, layer_norm_rms_epsilon, expert_count,
  expert_used_count, expert_group_count/expert_group_used_count from n_group/topk_group where
  set, YaRN's rope.scaling.type/factor/original_context_length/yarn_beta_fast/yarn_beta_slow)
  and DeepseekV2Model's own (leading_dense_block_count, vocab_size, attention.q_lora_rank where
  not null, attention.kv_lora_rank, expert_feed_forward_length, expert_shared_count,
  expert_weights_scale, expert_weights_norm where true, rope.dimension_count = qk_rope_head_dim,
  rope.scaling.yarn_log_multiplier = 0.1 · mscale_all_dim);
- the tensors under gguf-py's names (attn_q or attn_q_a/attn_q_a_norm/attn_q_b, attn_kv_a_mqa,
  attn_kv_a_norm, attn_output, ffn_gate_inp, exp_probs_b.bias (the converter's rename of
  e_score_correction_bias), ffn_{gate,up,down}_shexp, the dense layers' ffn_{gate,up,down}), each
  routed layer's experts merged into ffn_{gate,up,down}_exps as make_gguf_moe.py merges them.

Two attention layouts, both as a converter wrote them:
- tiny-deepseek_v3 as the current converter: head_count_kv 1, key_length kv_lora_rank + qk_rope,
  value_length kv_lora_rank, attention.key_length_mla/value_length_mla the real head sizes, and
  kv_b_proj split into attn_k_b (`[heads, kv_lora_rank, qk_nope]`, each head's key rows
  transposed) and attn_v_b (`[heads, v_head_dim, kv_lora_rank]`);
- tiny-deepseek_v2 and tiny-deepseek_v2_lite as converters before that split: attn_kv_b whole,
  head_count_kv = head_count, key_length qk_nope + qk_rope, value_length v_head_dim, no *_mla keys.

What the fixtures' configs (saved by transformers 5) do not say as the converter reads them:
- `scoring_func`: transformers 5 drops it; DeepSeek-V3's own config says "sigmoid" and
  DeepSeek-V2's "softmax", so the script writes expert_gating_func 2 (V3) and 1 (V2), which the
  converter writes from those configs (llama.cpp reads a missing key as softmax).
- V3's YaRN `mscale` 0.707: no GGUF key holds it. llama.cpp's deepseek2 graph scales the cosines
  and sines by rope.scaling.yarn_attn_factor (1 when absent) and the softmax by
  `(1 + yarn_log_multiplier · ln factor)²`, which is transformers' rule when mscale equals
  mscale_all_dim (as in DeepSeek-V3's own config). The reference for the V3 files therefore runs
  the fixture's config with mscale = mscale_all_dim = 1: what the file states.

Quantised files hold every matrix whose rows fit Q8_0's blocks of 32 in Q8_0, the others (rows of
8, 12, 16, 24 or 48 values) in F32, as make_gguf_moe.py falls back; norms, the router and its
bias stay F32 (the converter keeps FFN_GATE_INP and 1-D tensors in F32). A K-quant block is a row
of 256 values and these models' widest rows hold 64, so a 256-wide random DeepSeek-V3
(`wide_deepseek_v3`, the first seed from SEED whose rankings keep MIN_GAP in F32 and
QUANT_MIN_GAP in Q6_K) is written in Q6_K (make_gguf_quantized.py's `quantize_q6_k`; rows of 32
fall back to Q8_0). Qwen3-Next has no K-quant file (its tiny rows hold at most 64 values).

Reference: transformers (eager attention, eager experts, float32) on the weights gguf-py
dequantises from the file, the experts split back into transformers' per-expert names and
attn_k_b/attn_v_b joined back into kv_b_proj, loaded with from_pretrained from the fixture's
config (V3's mscale as above). For the F32 files the script asserts that these weights are the
fixture's exactly. Per file and case: attention at every layer and head, the last position's
logits, and at every routed layer the router's scores (`router_probs`: softmax V2, sigmoid V3),
chosen experts (best first by the score they were chosen by, as make_deepseek.py orders them)
and weights, plus a greedy generation; the smallest gap between neighbouring choice scores
(and group scores) in any ranking is asserted above MIN_GAP (make_deepseek.py's bound;
QUANT_MIN_GAP for Q8_0).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import safetensors.numpy
import torch

import gguf
from gguf import GGMLQuantizationType as Q

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_deepseek import choice_scores, is_router  # noqa: E402
from make_gguf import bpe_tokenizer, finish  # noqa: E402
import make_gguf_moe as moe  # noqa: E402
from make_gguf_moe import NEW_TOKENS, gpt2_tokenizer, load_model, store  # noqa: E402
from reflib import FIXTURES, REFERENCE, setup_determinism, versions, write_json  # noqa: E402

OUT = FIXTURES / "gguf"
SEED = 20261209
# make_deepseek.py's MIN_SCORE_GAP, on the same scores (softmax probabilities or sigmoids).
MIN_GAP = 1e-4
# The Q8_0 copies cannot re-draw their weights: a tenth of that, still a hundred times the float32
# rounding of the scores (~1e-7 here).
QUANT_MIN_GAP = 1e-5
# Qwen3-Next's rankings are of router logits (make_gguf_moe.py's run), which its fixture was not
# drawn to keep apart (its Q8_0 copy's closest pair is 9.7e-5 apart): fifty times the float32
# rounding of the logits (~1e-6 here).
QWEN3_NEXT_MIN_GAP = 5e-5

# transformers' name inside a layer → gguf-py's (`deepseek2`).
DEEPSEEK_PARTS = {
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.q_a_proj": "attn_q_a",
    "self_attn.q_a_layernorm": "attn_q_a_norm",
    "self_attn.q_b_proj": "attn_q_b",
    "self_attn.kv_a_proj_with_mqa": "attn_kv_a_mqa",
    "self_attn.kv_a_layernorm": "attn_kv_a_norm",
    "self_attn.kv_b_proj": "attn_kv_b",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
    "mlp.gate": "ffn_gate_inp",
    "mlp.shared_experts.gate_proj": "ffn_gate_shexp",
    "mlp.shared_experts.up_proj": "ffn_up_shexp",
    "mlp.shared_experts.down_proj": "ffn_down_shexp",
}
FIXED = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}
EXPERT_LEAVES = {"gate_proj": "ffn_gate_exps", "up_proj": "ffn_up_exps", "down_proj": "ffn_down_exps"}
# Which fixtures are written with kv_b_proj split (the current converter).
SPLIT_KV_B = {"deepseek_v3"}


def split_kv_b(w: np.ndarray, heads: int, nope: int, value: int) -> tuple[np.ndarray, np.ndarray]:
    """DeepseekV2Model.modify_tensors' split of kv_b_proj: (k_b [heads, rank, nope], v_b
    [heads, value, rank])."""
    kv = w.reshape(heads, nope + value, w.shape[-1])
    k_b, v_b = kv[:, :nope], kv[:, nope:]
    return np.ascontiguousarray(k_b.transpose(0, 2, 1)), np.ascontiguousarray(v_b)


def deepseek_tensors(name: str, cfg: dict, weights: dict) -> dict:
    heads, nope, value = cfg["num_attention_heads"], cfg["qk_nope_head_dim"], cfg["v_head_dim"]
    out: dict[str, np.ndarray] = {}
    experts: dict[tuple[int, str], dict[int, np.ndarray]] = {}
    for hf, w in weights.items():
        w = np.ascontiguousarray(w, dtype=np.float32)
        if hf in FIXED:
            out[FIXED[hf]] = w
            continue
        _, _, layer, rest = hf.split(".", 3)
        if int(layer) >= cfg["num_hidden_layers"]:
            continue  # multi-token-prediction layers: the converter skips them
        if rest == "mlp.gate.e_score_correction_bias":
            out[f"blk.{layer}.exp_probs_b.bias"] = w
            continue
        part, suffix = rest.rsplit(".", 1)
        if ".experts." in part:
            e, leaf = part.split(".experts.")[1].split(".")
            experts.setdefault((int(layer), EXPERT_LEAVES[leaf]), {})[int(e)] = w
            continue
        if part == "self_attn.kv_b_proj" and name in SPLIT_KV_B:
            k_b, v_b = split_kv_b(w, heads, nope, value)
            out[f"blk.{layer}.attn_k_b.weight"] = k_b
            out[f"blk.{layer}.attn_v_b.weight"] = v_b
            continue
        out[f"blk.{layer}.{DEEPSEEK_PARTS[part]}.{suffix}"] = w
    for (layer, merged), by_expert in experts.items():
        out[f"blk.{layer}.{merged}.weight"] = np.stack([by_expert[e] for e in range(len(by_expert))])
    return out


def write_deepseek(path: Path, name: str, cfg: dict, weights: dict, src: Path, qtype: Q) -> None:
    w = gguf.GGUFWriter(str(path), "deepseek2")
    v3 = cfg["model_type"] == "deepseek_v3"
    heads = cfg["num_attention_heads"]
    nope, rope, value = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
    w.add_name(path.stem)
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(heads)
    rp = cfg["rope_parameters"]
    if rp.get("rope_type") == "yarn":
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(rp["factor"])
        w.add_rope_scaling_orig_ctx_len(rp["original_max_position_embeddings"])
        if "beta_fast" in rp:
            w.add_rope_scaling_yarn_beta_fast(rp["beta_fast"])
        if "beta_slow" in rp:
            w.add_rope_scaling_yarn_beta_slow(rp["beta_slow"])
        if rp.get("mscale_all_dim") is not None:
            w.add_rope_scaling_yarn_log_mul(0.1 * rp["mscale_all_dim"])
    w.add_rope_freq_base(rp["rope_theta"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_expert_count(cfg["n_routed_experts"])
    w.add_expert_used_count(cfg["num_experts_per_tok"])
    if cfg.get("n_group") is not None:
        w.add_expert_group_count(cfg["n_group"])
    if cfg.get("topk_group") is not None:
        w.add_expert_group_used_count(cfg["topk_group"])
    w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID if v3 else gguf.ExpertGatingFuncType.SOFTMAX)
    w.add_leading_dense_block_count(cfg["first_k_dense_replace"])
    w.add_vocab_size(cfg["vocab_size"])
    if cfg.get("q_lora_rank") is not None:
        w.add_q_lora_rank(cfg["q_lora_rank"])
    w.add_kv_lora_rank(cfg["kv_lora_rank"])
    if name in SPLIT_KV_B:
        w.add_head_count_kv(1)
        w.add_key_length(cfg["kv_lora_rank"] + rope)
        w.add_value_length(cfg["kv_lora_rank"])
        w.add_key_length_mla(nope + rope)
        w.add_value_length_mla(value)
    else:
        w.add_head_count_kv(heads)
        w.add_key_length(nope + rope)
        w.add_value_length(value)
    w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
    w.add_expert_shared_count(cfg["n_shared_experts"])
    w.add_expert_weights_scale(cfg["routed_scaling_factor"])
    if cfg.get("norm_topk_prob"):
        w.add_expert_weights_norm(True)
    w.add_rope_dimension_count(rope)
    w.add_file_type({Q.F32: gguf.LlamaFileType.ALL_F32, Q.Q8_0: gguf.LlamaFileType.MOSTLY_Q8_0,
                     Q.Q6_K: gguf.LlamaFileType.MOSTLY_Q6_K}[qtype])
    if v3:
        bpe_tokenizer(w, src)
    else:
        gpt2_tokenizer(w, src)
    tensors = deepseek_tensors(name, cfg, weights)
    for t in sorted(tensors):
        data, kind = store(t, tensors[t], qtype)
        w.add_tensor(t, data, raw_dtype=kind)
    finish(w)


def dequantised_deepseek(path: Path, cfg: dict) -> dict:
    """The file's weights as gguf-py dequantises them, under transformers' names: experts split,
    attn_k_b/attn_v_b joined back into kv_b_proj."""
    parts = {v: k for k, v in DEEPSEEK_PARTS.items()}
    names = {v: k for k, v in FIXED.items()}
    leaves = {v: k for k, v in EXPERT_LEAVES.items()}
    out, split = {}, {}
    for t in gguf.GGUFReader(str(path)).tensors:
        shape = [int(d) for d in reversed(t.shape)]
        value = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32).reshape(shape)
        if t.name in names:
            out[names[t.name]] = value
            continue
        _, layer, part, suffix = t.name.split(".")
        prefix = f"model.layers.{layer}"
        if part == "exp_probs_b":
            out[f"{prefix}.mlp.gate.e_score_correction_bias"] = value
        elif part in leaves:
            for e in range(shape[0]):
                out[f"{prefix}.mlp.experts.{e}.{leaves[part]}.{suffix}"] = value[e]
        elif part in ("attn_k_b", "attn_v_b"):
            split.setdefault(layer, {})[part] = value
        else:
            out[f"{prefix}.{parts[part]}.{suffix}"] = value
    for layer, kv in split.items():
        k_b, v_b = kv["attn_k_b"], kv["attn_v_b"]
        joined = np.concatenate([k_b.transpose(0, 2, 1), v_b], axis=1)
        out[f"model.layers.{layer}.self_attn.kv_b_proj.weight"] = joined.reshape(-1, joined.shape[-1])
    return out

# transformers' name inside a layer → gguf-py's (`qwen3next`); the dense layer's MLP (layer 1,
# mlp_only_layers, which llama.cpp's qwen3next graph does not have) as ffn_gate/ffn_up/ffn_down.
QWEN3NEXT_PARTS = {
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "post_attention_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "self_attn.q_norm": "attn_q_norm",
    "self_attn.k_norm": "attn_k_norm",
    "linear_attn.in_proj_ba": "ssm_ba",
    "linear_attn.conv1d": "ssm_conv1d",
    "linear_attn.norm": "ssm_norm",
    "linear_attn.out_proj": "ssm_out",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
    "mlp.gate": "ffn_gate_inp",
    "mlp.shared_expert.gate_proj": "ffn_gate_shexp",
    "mlp.shared_expert.up_proj": "ffn_up_shexp",
    "mlp.shared_expert.down_proj": "ffn_down_shexp",
    "mlp.shared_expert_gate": "ffn_gate_inp_shexp",
}


def qkvz_split(w: np.ndarray, cfg: dict) -> tuple[np.ndarray, np.ndarray]:
    """Qwen3NextModel.modify_tensors' split of in_proj_qkvz ([q, k, v, z] per key head) into
    attn_qkv ([all q, all k, all v]) and attn_gate (all z)."""
    kd, vd = cfg["linear_key_head_dim"], cfg["linear_value_head_dim"]
    nk, nv = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
    hidden = cfg["hidden_size"]
    sizes = [kd, kd, nv // nk * vd, nv // nk * vd]
    t = w.T.reshape(hidden, nk, sum(sizes))
    q, k, v, z = np.split(t, np.cumsum(sizes)[:-1], axis=-1)
    flat = [x.reshape(hidden, -1) for x in (q, k, v, z)]
    return np.ascontiguousarray(np.concatenate(flat[:3], axis=-1).T), np.ascontiguousarray(flat[3].T)


def qkvz_join(qkv: np.ndarray, z: np.ndarray, cfg: dict) -> np.ndarray:
    """The inverse of qkvz_split."""
    kd, vd = cfg["linear_key_head_dim"], cfg["linear_value_head_dim"]
    nk, nv = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
    hidden = qkv.shape[1]
    q, k, v = np.split(qkv.T, [nk * kd, 2 * nk * kd], axis=-1)
    parts = [x.reshape(hidden, nk, -1) for x in (q, k, v, z.T)]
    return np.ascontiguousarray(np.concatenate(parts, axis=-1).reshape(hidden, -1).T)


def qwen3next_tensors(cfg: dict, weights: dict) -> dict:
    out: dict[str, np.ndarray] = {}
    experts: dict[tuple[int, str], dict[int, np.ndarray]] = {}
    for hf, w in weights.items():
        w = np.ascontiguousarray(w, dtype=np.float32)
        # Qwen3NextRMSNorm scales by 1 + w: the converter stores 1 + w (the gated norm is plain).
        if hf.endswith("norm.weight") and not hf.endswith("linear_attn.norm.weight"):
            w = w + np.float32(1)
        if hf in FIXED:
            out[FIXED[hf]] = w
            continue
        _, _, layer, rest = hf.split(".", 3)
        if rest == "linear_attn.A_log":
            out[f"blk.{layer}.ssm_a"] = -np.exp(w)
            continue
        if rest == "linear_attn.dt_bias":
            out[f"blk.{layer}.ssm_dt.bias"] = w
            continue
        if rest == "linear_attn.in_proj_qkvz.weight":
            qkv, z = qkvz_split(w, cfg)
            out[f"blk.{layer}.attn_qkv.weight"] = qkv
            out[f"blk.{layer}.attn_gate.weight"] = z
            continue
        part, suffix = rest.rsplit(".", 1)
        if ".experts." in part:
            e, leaf = part.split(".experts.")[1].split(".")
            experts.setdefault((int(layer), EXPERT_LEAVES[leaf]), {})[int(e)] = w
            continue
        if part == "linear_attn.conv1d":
            w = np.ascontiguousarray(w.squeeze(1))
        out[f"blk.{layer}.{QWEN3NEXT_PARTS[part]}.{suffix}"] = w
    for (layer, merged), by_expert in experts.items():
        out[f"blk.{layer}.{merged}.weight"] = np.stack([by_expert[e] for e in range(len(by_expert))])
    return out


def full_interval(cfg: dict) -> int:
    """The interval the fixture's layer_types follow (every interval-th layer full)."""
    types = cfg["layer_types"]
    full = [i for i, t in enumerate(types) if t == "full_attention"]
    interval = full[0] + 1
    assert full == [i for i in range(len(types)) if (i + 1) % interval == 0], types
    return interval


def write_qwen3next(path: Path, cfg: dict, weights: dict, src: Path, qtype: Q) -> None:
    w = gguf.GGUFWriter(str(path), "qwen3next")
    w.add_name(path.stem)
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_rope_freq_base(cfg["rope_parameters"]["rope_theta"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_expert_count(cfg["num_experts"])
    w.add_expert_used_count(cfg["num_experts_per_tok"])
    w.add_key_length(cfg["head_dim"])
    w.add_value_length(cfg["head_dim"])
    w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
    w.add_expert_shared_feed_forward_length(cfg["shared_expert_intermediate_size"])
    w.add_ssm_conv_kernel(cfg["linear_conv_kernel_dim"])
    w.add_ssm_state_size(cfg["linear_key_head_dim"])
    w.add_ssm_group_count(cfg["linear_num_key_heads"])
    w.add_ssm_time_step_rank(cfg["linear_num_value_heads"])
    w.add_ssm_inner_size(cfg["linear_value_head_dim"] * cfg["linear_num_value_heads"])
    w.add_full_attention_interval(full_interval(cfg))
    w.add_rope_dimension_count(int(cfg["head_dim"] * cfg["rope_parameters"]["partial_rotary_factor"]))
    w.add_vocab_size(cfg["vocab_size"])
    w.add_file_type(gguf.LlamaFileType.ALL_F32 if qtype == Q.F32 else gguf.LlamaFileType.MOSTLY_Q8_0)
    gpt2_tokenizer(w, src)
    tensors = qwen3next_tensors(cfg, weights)
    for t in sorted(tensors):
        data, kind = store(t, tensors[t], qtype)
        w.add_tensor(t, data, raw_dtype=kind)
    finish(w)


def dequantised_qwen3next(path: Path, cfg: dict) -> dict:
    """The file's weights as gguf-py dequantises them, under transformers' names: the norms' 1
    taken off, A_log = ln(-ssm_a), in_proj_qkvz joined back, the experts split."""
    parts = {v: k for k, v in QWEN3NEXT_PARTS.items()}
    names = {v: k for k, v in FIXED.items()}
    leaves = {v: k for k, v in EXPERT_LEAVES.items()}
    out, split = {}, {}
    for t in gguf.GGUFReader(str(path)).tensors:
        shape = [int(d) for d in reversed(t.shape)]
        value = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32).reshape(shape)
        if t.name in names:
            hf = names[t.name]
        else:
            _, layer, rest = t.name.split(".", 2)
            prefix = f"model.layers.{layer}"
            if rest == "ssm_a":
                out[f"{prefix}.linear_attn.A_log"] = np.log(-value)
                continue
            if rest == "ssm_dt.bias":
                out[f"{prefix}.linear_attn.dt_bias"] = value
                continue
            part, suffix = rest.split(".")
            if part in ("attn_qkv", "attn_gate"):
                split.setdefault(layer, {})[part] = value
                continue
            if part in leaves:
                for e in range(shape[0]):
                    out[f"{prefix}.mlp.experts.{e}.{leaves[part]}.{suffix}"] = value[e]
                continue
            if part == "ssm_conv1d":
                value = value[:, None, :]
            hf = f"{prefix}.{parts[part]}.{suffix}"
        if hf.endswith("norm.weight") and not hf.endswith("linear_attn.norm.weight"):
            value = value - np.float32(1)
        out[hf] = value
    for layer, p in split.items():
        out[f"model.layers.{layer}.linear_attn.in_proj_qkvz.weight"] = qkvz_join(p["attn_qkv"], p["attn_gate"], cfg)
    return out


class Routers:
    """Catches every DeepSeek router's output (logits, weights, indices)."""

    def __init__(self, model):
        self.caught: list[tuple] = []
        self.modules = [m for _n, m in model.named_modules() if is_router(m)]
        for m in self.modules:
            m.register_forward_hook(lambda _m, _i, out: self.caught.append(tuple(t.detach().clone() for t in out)))


@torch.no_grad()
def run(model, routers: Routers, cases: list[dict]) -> dict:
    out = {}
    top_k = model.config.num_experts_per_tok
    for case in cases:
        ids = case["input_ids"]
        routers.caught = []
        r = model(torch.tensor([ids]), output_attentions=True)
        caught = routers.caught
        assert len(caught) == len(routers.modules)
        probs, chosen, weights, gap = [], [], [], math.inf
        for router, (logits, w, idx) in zip(routers.modules, caught):
            scores, choice, group_scores = choice_scores(router, logits)
            picked = choice.gather(-1, idx)
            order = torch.argsort(idx, dim=-1, stable=True)
            idx, w, picked = idx.gather(-1, order), w.gather(-1, order), picked.gather(-1, order)
            order = torch.argsort(-picked, dim=-1, stable=True)
            idx, w = idx.gather(-1, order), w.gather(-1, order)
            probs.append(scores)
            chosen.append(idx)
            weights.append(w)
            ranked = choice.double().sort(dim=-1, descending=True).values[..., : top_k + 1]
            ranked = ranked.masked_fill(torch.isinf(ranked), float("nan"))
            diffs = (ranked[..., :-1] - ranked[..., 1:]).nan_to_num(nan=math.inf)
            gap = min(gap, float(diffs.min()))
            if group_scores is not None:
                g = group_scores.double().sort(dim=-1, descending=True).values[..., : router.topk_group + 1]
                gap = min(gap, float((g[..., :-1] - g[..., 1:]).min()))
        room = min(NEW_TOKENS, model.config.max_position_embeddings - len(ids))
        generated = list(ids)
        if room > 0:
            generated = model.generate(torch.tensor([ids]), max_new_tokens=room, do_sample=False)[0].tolist()
        out[case["name"]] = dict(
            attentions=torch.stack([a[0] for a in r.attentions]).numpy(),
            logits=r.logits[0, -1].numpy(),
            router_probs=torch.stack(probs).numpy(),
            router_weights=torch.stack(weights).numpy(),
            router_chosen=torch.stack(chosen).float().numpy(),
            gap=gap,
            sequence=generated,
        )
    return out


def as_file_states(cfg: dict) -> dict:
    """The config the file states (see the module documentation): V3's mscale = mscale_all_dim."""
    cfg = json.loads(json.dumps(cfg))
    rp = cfg.get("rope_parameters", {})
    if rp.get("rope_type") == "yarn" and rp.get("mscale_all_dim") is not None:
        rp["mscale"] = rp["mscale_all_dim"]
    return cfg


def record(manifest: dict, tensors: dict, path: Path, qtype: Q, cfg: dict, cases: list[dict], ref: dict,
           f32: dict | None, experts: int, bound: float) -> None:
    """The file's entry in the manifest (make_gguf_moe.py's format) and its reference tensors,
    its rankings' smallest gap asserted above `bound`."""
    gap = min(r["gap"] for r in ref.values())
    assert gap > bound, f"{path.name}: a near-tie in a router ranking ({gap:.2e})"
    entry = dict(file=path.name, type=qtype.name, model_type=cfg["model_type"], min_ranking_gap=gap,
                 experts=experts, top_k=cfg["num_experts_per_tok"], cases=[])
    for case in cases:
        r = ref[case["name"]]
        key = f"{path.name}/{case['name']}"
        for field in ("attentions", "logits", "router_probs", "router_weights", "router_chosen"):
            tensors[f"{key}/{field}"] = np.ascontiguousarray(r[field])
        item = dict(case, n=len(case["input_ids"]), sequence=r["sequence"],
                    routed_layers=int(r["router_chosen"].shape[0]))
        if qtype != Q.F32:
            g = f32[case["name"]]
            item["vs_f32"] = dict(
                attention=float(np.abs(r["attentions"] - g["attentions"]).max()),
                logits=float(np.abs(r["logits"] - g["logits"]).max()),
                same_experts=bool(np.array_equal(r["router_chosen"], g["router_chosen"])),
            )
        entry["cases"].append(item)
    manifest["files"].append(entry)
    print(path.name, path.stat().st_size, "bytes, min gap", f"{gap:.2e}",
          [c.get("vs_f32") for c in entry["cases"]])


def wide_deepseek_v3(src: Path, seed: int) -> tuple[dict, dict]:
    """A 256-wide random DeepSeek-V3 (seeded) with `src`'s vocabulary and YaRN, saved by
    transformers: 1 routed layer, 4 heads of qk_nope 32 + qk_rope 32 and v_head_dim 64,
    q_lora_rank and kv_lora_rank 256 (so every attention map but attn_k_b has rows of 256), 4
    routed experts in 2 groups keeping 1, top 2, and one shared expert, all of inner size 32
    (their gate/up rows 256 wide, their down rows 32: Q8_0); weights drawn as make_gguf_moe.py's
    wide models, the router bias as make_deepseek.py's."""
    from transformers import AutoConfig, AutoModelForCausalLM
    import tempfile
    base = as_file_states(json.loads((src / "config.json").read_text()))
    cfg = dict(base, hidden_size=256, intermediate_size=256, num_hidden_layers=1, num_attention_heads=4,
               num_key_value_heads=4, q_lora_rank=256, kv_lora_rank=256, qk_nope_head_dim=32,
               qk_rope_head_dim=32, qk_head_dim=64, head_dim=32, v_head_dim=64, moe_intermediate_size=32,
               n_routed_experts=4, n_group=2, topk_group=1, num_experts_per_tok=2, n_shared_experts=1,
               first_k_dense_replace=0, num_nextn_predict_layers=0)
    config = AutoConfig.for_model(**{k: v for k, v in cfg.items() if k not in ("architectures", "transformers_version", "dtype")})
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp)
        saved = safetensors.numpy.load_file(str(Path(tmp) / "model.safetensors"))
        cfg = json.loads((Path(tmp) / "config.json").read_text())
    rng = np.random.default_rng(seed)
    weights = {}
    for key in sorted(saved):
        shape = saved[key].shape
        if key.endswith("norm.weight"):
            w = 1.0 + rng.standard_normal(shape) * 0.1
        elif key.endswith("e_score_correction_bias"):
            w = rng.standard_normal(shape) * 0.05
        elif key.endswith("mlp.gate.weight"):
            w = rng.standard_normal(shape) * moe.ROUTER_GAIN / math.sqrt(shape[1])
        elif any(n in key for n in ("q_b_proj", "kv_b_proj")):
            w = rng.standard_normal(shape) * 1.7 / math.sqrt(shape[1])
        elif "embed_tokens" in key:
            w = rng.standard_normal(shape) * 0.5
        else:
            w = rng.standard_normal(shape) * 1.1 / math.sqrt(shape[-1])
        weights[key] = w.astype(np.float32)
    return cfg, weights


def main() -> None:
    setup_determinism(SEED)
    manifest = dict(generator="tests/reference/make_gguf_hybrid.py", versions=versions(), min_gap_asserted=MIN_GAP,
                    min_gap_asserted_tiny_q8_0=QUANT_MIN_GAP,
                    min_logit_gap_asserted_qwen3_next=QWEN3_NEXT_MIN_GAP,
                    new_tokens=NEW_TOKENS, files=[])
    tensors = {}
    for name in ("deepseek_v2_lite", "deepseek_v2", "deepseek_v3"):
        src = FIXTURES / f"tiny-{name}"
        cfg = json.loads((src / "config.json").read_text())
        weights = safetensors.numpy.load_file(str(src / "model.safetensors"))
        ref = json.loads((REFERENCE / f"tiny-{name}.json").read_text())
        cases = [dict(name=c["name"], text=c["text"], input_ids=c["input_ids"], max_len=c["max_len"],
                      truncate=c["truncate"]) for c in ref["cases"]]
        ref_cfg = as_file_states(cfg)
        f32 = None
        for qtype in (Q.F32, Q.Q8_0):
            path = OUT / f"tiny-{name}.{qtype.name}.gguf"
            write_deepseek(path, name, cfg, weights, src, qtype)
            back = dequantised_deepseek(path, cfg)
            kept = {k: v for k, v in weights.items()
                    if not k.startswith("model.layers.") or int(k.split(".")[2]) < cfg["num_hidden_layers"]}
            assert sorted(back) == sorted(kept), (path.name, sorted(set(back) ^ set(kept)))
            if qtype == Q.F32:
                for k, v in kept.items():
                    assert np.array_equal(back[k], v), f"{path.name}: {k} differs after the F32 round trip"
            model = load_model(back, ref_cfg, src)
            ref = run(model, Routers(model), cases)
            if qtype == Q.F32:
                f32 = ref
            record(manifest, tensors, path, qtype, cfg, cases, ref, f32, cfg["n_routed_experts"],
                   MIN_GAP if qtype == Q.F32 else QUANT_MIN_GAP)

    # A 256-wide DeepSeek-V3 in Q6_K (K-quant rows are 256 values): the first seed whose
    # rankings keep MIN_GAP in the F32 weights and QUANT_MIN_GAP in the Q6_K ones.
    src = FIXTURES / "tiny-deepseek_v3"
    ref = json.loads((REFERENCE / "tiny-deepseek_v3.json").read_text())
    cases = [dict(name=c["name"], text=c["text"], input_ids=c["input_ids"], max_len=c["max_len"],
                  truncate=c["truncate"]) for c in ref["cases"]]
    tmp = OUT / "tmp-hybrid-f32.gguf"
    path = OUT / "wide-deepseek_v3.Q6_K.gguf"
    for attempt in range(40):
        cfg, weights = wide_deepseek_v3(src, SEED + attempt)
        write_deepseek(tmp, "deepseek_v3", cfg, weights, src, Q.F32)
        back = dequantised_deepseek(tmp, cfg)
        assert all(np.array_equal(back[k], v) for k, v in weights.items())
        tmp.unlink()
        model = load_model(back, cfg, src)
        f32 = run(model, Routers(model), cases)
        if min(r["gap"] for r in f32.values()) <= MIN_GAP:
            continue
        write_deepseek(path, "deepseek_v3", cfg, weights, src, Q.Q6_K)
        model = load_model(dequantised_deepseek(path, cfg), cfg, src)
        q6 = run(model, Routers(model), cases)
        if min(r["gap"] for r in q6.values()) > QUANT_MIN_GAP:
            break
    else:
        raise SystemExit("wide-deepseek_v3: no seed without near-ties in 40")
    record(manifest, tensors, path, Q.Q6_K, cfg, cases, q6, f32, cfg["n_routed_experts"], QUANT_MIN_GAP)

    # Qwen3-Next: make_gguf_moe.py's run (routers caught at Qwen3NextTopKRouter, the top-k in
    # torch.topk's order, probabilities the softmax over all experts; near-ties on the logits).
    src = FIXTURES / "tiny-qwen3_next"
    cfg = json.loads((src / "config.json").read_text())
    weights = safetensors.numpy.load_file(str(src / "model.safetensors"))
    ref = json.loads((REFERENCE / "tiny-qwen3_next.json").read_text())
    cases = [dict(name=c["name"], text=c["text"], input_ids=c["input_ids"],
                  max_len=cfg["max_position_embeddings"], truncate=False) for c in ref["cases"]]
    f32 = None
    for qtype in (Q.F32, Q.Q8_0):
        path = OUT / f"tiny-qwen3_next.{qtype.name}.gguf"
        write_qwen3next(path, cfg, weights, src, qtype)
        back = dequantised_qwen3next(path, cfg)
        assert sorted(back) == sorted(weights), (path.name, sorted(set(back) ^ set(weights)))
        if qtype == Q.F32:
            for k, v in weights.items():
                # 1 + w − 1 and ln(−(−exp(A_log))) round in float32: equal within an ulp or two.
                assert np.allclose(back[k], v, rtol=0, atol=1e-6), f"{path.name}: {k} differs after the F32 round trip"
        model = load_model(back, cfg, src)
        ref = moe.run(model, moe.Routers(model), cases)
        if qtype == Q.F32:
            f32 = ref
        record(manifest, tensors, path, qtype, cfg, cases, ref, f32, cfg["num_experts"], QWEN3_NEXT_MIN_GAP)
    safetensors.numpy.save_file(tensors, str(REFERENCE / "gguf-hybrid.safetensors"),
                                metadata={"generator": "tests/reference/make_gguf_hybrid.py"})
    write_json(REFERENCE / "gguf-hybrid.json", manifest)


if __name__ == "__main__":
    main()
