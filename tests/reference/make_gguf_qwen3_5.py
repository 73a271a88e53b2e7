#!/usr/bin/env python3
"""GGUF copies of the tiny Qwen3.5 and Qwen3.5-MoE models (llama.cpp's `qwen35` and `qwen35moe`)
in F32 and Q8_0, and transformers' reference outputs for each, run on the weights gguf-py
dequantises from that very file.

    /tmp/venvref/bin/python tests/reference/make_gguf_qwen3_5.py   # any Python with requirements.txt

Writes tests/fixtures/gguf/tiny-qwen3_5{,_moe}.<TYPE>.gguf and
tests/reference/gguf-qwen3_5.{json,safetensors} in make_gguf_moe.py's manifest format
(tests/suite/fidelity/gguf_hybrid.rs reads both through gguf_moe.rs).

Files are written as llama.cpp's converter writes them (`Qwen3_5TextModel` and
`Qwen3_5MoeTextModel` in conversion/qwen.py: Qwen3NextModel's keys and tensors with the value
heads reordered, `_LinearAttentionVReorderBase`, and the multimodal rotary sections,
`_Qwen35MRopeMixin`):
- metadata: the generic keys (block_count, context_length, embedding_length, feed_forward_length
  where the config has intermediate_size (Qwen3.5-MoE's has none), head_count, head_count_kv,
  rope.freq_base, layer_norm_rms_epsilon, key_length/value_length = head_dim, expert_count and
  expert_used_count where the config has experts), Qwen2MoeModel's expert_feed_forward_length
  and expert_shared_feed_forward_length, Qwen3NextModel's ssm.conv_kernel, ssm.state_size,
  ssm.group_count, ssm.time_step_rank, ssm.inner_size, attention.recurrent_layers (one boolean
  per layer from layer_types: true for a gated delta layer), full_attention_interval
  (`full_attention_interval`, 4 when the config has none, as here) and rope.dimension_count =
  head_dim · partial_rotary_factor, and rope.dimension_sections (mrope_section padded to 4);
- the vision-language checkpoint's language model only (`model.language_model.` read as
  `model.`; `model.visual.` is the converter's separate mmproj file, not written here);
- tensors under gguf-py's names (attn_q (each head's query and gate, as stored), attn_k, attn_v,
  attn_output, attn_q_norm, attn_k_norm; attn_qkv = in_proj_qkv, attn_gate = in_proj_z,
  ssm_beta = in_proj_b, ssm_alpha = in_proj_a, ssm_conv1d (squeezed to [channels, kernel]),
  ssm_dt.bias = dt_bias, ssm_a = -exp(A_log), ssm_norm, ssm_out; ffn_* or the router, merged
  experts and the shared expert with its gate as make_gguf_hybrid.py writes Qwen3-Next's);
- every norm but the gated delta layers' (`linear_attn.norm`) stored as 1 + w;
- with fewer key heads than value heads (both fixtures: 2 and 4), the value heads reordered from
  transformers' grouped order (each key head's value heads together) to llama.cpp's tiled order
  (value head j of every key head, then j + 1): the v rows of attn_qkv, the rows of attn_gate,
  ssm_beta and ssm_alpha, the v channels of ssm_conv1d, ssm_a and ssm_dt, and the columns of
  ssm_out.

Quantised files hold every matrix whose rows fit Q8_0's blocks of 32 in Q8_0, the others in F32
(make_gguf_moe.py's `store`); norms, the routers and 1-D tensors stay F32. These models' rows
hold at most 48 values, so there is no K-quant file.

Reference: transformers (eager attention, eager experts, float32) on the weights gguf-py
dequantises from the file, every transformation above undone, loaded with from_pretrained as
the causal LM of the fixture's text config (`Qwen3_5ForCausalLM` for the vision-language
checkpoint). For the F32 files the script asserts that these weights are the fixture's (within
an ulp or two for 1 + w − 1 and ln(−(−exp(A_log)))). Per file and case: attention at every layer
and head, the last position's logits, a greedy generation and, for Qwen3.5-MoE, make_gguf_moe.py's
router decisions (router logits' softmax, chosen experts, weights), whose rankings' smallest gap
is asserted above MIN_GAP.
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
import make_gguf_moe as moe  # noqa: E402
from make_gguf import finish  # noqa: E402
from make_gguf_hybrid import EXPERT_LEAVES, FIXED, OUT, QWEN3NEXT_PARTS, record  # noqa: E402
from make_gguf_moe import NEW_TOKENS, gpt2_tokenizer, load_model, store  # noqa: E402
from reflib import FIXTURES, REFERENCE, setup_determinism, versions, write_json  # noqa: E402

SEED = 20261208
# make_gguf_hybrid.py's bound for Qwen3-Next's router logits, on the same kind of ranking.
MIN_GAP = 5e-5
ARCH = {"qwen3_5_text": "qwen35", "qwen3_5_moe_text": "qwen35moe"}

# transformers' name inside a layer → gguf-py's (`qwen35`, `qwen35moe`): Qwen3-Next's, with
# Qwen3.5's four plain input maps of the gated delta layers.
QWEN35_PARTS = {k: v for k, v in QWEN3NEXT_PARTS.items() if k != "linear_attn.in_proj_ba"} | {
    "linear_attn.in_proj_qkv": "attn_qkv",
    "linear_attn.in_proj_z": "attn_gate",
    "linear_attn.in_proj_b": "ssm_beta",
    "linear_attn.in_proj_a": "ssm_alpha",
}


def text_model(src: Path) -> tuple[dict, dict]:
    """The fixture's language model: its text config (the vision-language checkpoint's
    text_config, tied as the outer config says, as a causal LM's) and its weights under a causal
    LM's names (`model.language_model.` → `model.`, `model.visual.` left out)."""
    cfg = json.loads((src / "config.json").read_text())
    weights = safetensors.numpy.load_file(str(src / "model.safetensors"))
    if "text_config" in cfg:
        text = dict(cfg["text_config"], tie_word_embeddings=cfg.get("tie_word_embeddings", False),
                    architectures=["Qwen3_5ForCausalLM"])
        kept = {}
        for k, v in weights.items():
            if k.startswith("model.visual."):
                continue
            kept[k.replace("model.language_model.", "model.", 1)] = v
        return text, kept
    return cfg, weights


def reorder_v(w: np.ndarray, axis: int, nk: int, per_k: int, head: int, to_tiled: bool) -> np.ndarray:
    """The value heads along `axis` from transformers' grouped order ([key head][its value
    head][head]) to llama.cpp's tiled one ([value head][key head][head]), or back."""
    shape = list(w.shape)
    split = [nk, per_k, head] if to_tiled else [per_k, nk, head]
    t = w.reshape(*shape[:axis], *split, *shape[axis + 1:])
    t = np.swapaxes(t, axis, axis + 1)
    return np.ascontiguousarray(t.reshape(shape))


def linear_reorder(rest: str, w: np.ndarray, cfg: dict, to_tiled: bool) -> np.ndarray:
    """_LinearAttentionVReorderBase's reordering of one gated delta tensor (`rest` is its name
    inside the layer, transformers' or, for ssm_a, after -exp), or its inverse."""
    nk, nv = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
    if nk == nv:
        return w
    kd, vd, r = cfg["linear_key_head_dim"], cfg["linear_value_head_dim"], nv // nk
    qk = 2 * nk * kd
    if rest in ("linear_attn.in_proj_qkv.weight", "linear_attn.conv1d.weight"):
        return np.concatenate([w[:qk], reorder_v(w[qk:], 0, nk, r, vd, to_tiled)], axis=0)
    if rest == "linear_attn.in_proj_z.weight":
        return reorder_v(w, 0, nk, r, vd, to_tiled)
    if rest in ("linear_attn.in_proj_a.weight", "linear_attn.in_proj_b.weight", "linear_attn.A_log",
                "linear_attn.dt_bias"):
        return reorder_v(w, 0, nk, r, 1, to_tiled)
    if rest == "linear_attn.out_proj.weight":
        return reorder_v(w, 1, nk, r, vd, to_tiled)
    return w


def qwen35_tensors(cfg: dict, weights: dict) -> dict:
    out: dict[str, np.ndarray] = {}
    experts: dict[tuple[int, str], dict[int, np.ndarray]] = {}
    for hf, w in weights.items():
        w = np.ascontiguousarray(w, dtype=np.float32)
        # Qwen3_5RMSNorm scales by 1 + w: the converter stores 1 + w (the gated norm is plain).
        if hf.endswith("norm.weight") and not hf.endswith("linear_attn.norm.weight"):
            w = w + np.float32(1)
        if hf in FIXED:
            out[FIXED[hf]] = w
            continue
        _, _, layer, rest = hf.split(".", 3)
        if rest == "linear_attn.conv1d.weight":
            w = np.ascontiguousarray(w.squeeze(1))
        w = linear_reorder(rest, w, cfg, to_tiled=True)
        if rest == "linear_attn.A_log":
            out[f"blk.{layer}.ssm_a"] = -np.exp(w)
            continue
        if rest == "linear_attn.dt_bias":
            out[f"blk.{layer}.ssm_dt.bias"] = w
            continue
        part, suffix = rest.rsplit(".", 1)
        if ".experts." in part:
            e, leaf = part.split(".experts.")[1].split(".")
            experts.setdefault((int(layer), EXPERT_LEAVES[leaf]), {})[int(e)] = w
            continue
        out[f"blk.{layer}.{QWEN35_PARTS[part]}.{suffix}"] = w
    for (layer, merged), by_expert in experts.items():
        out[f"blk.{layer}.{merged}.weight"] = np.stack([by_expert[e] for e in range(len(by_expert))])
    return out


def write_qwen35(path: Path, cfg: dict, weights: dict, src: Path, qtype: Q) -> None:
    w = gguf.GGUFWriter(str(path), ARCH[cfg["model_type"]])
    rp = cfg["rope_parameters"]
    w.add_name(path.stem)
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    if cfg.get("intermediate_size") is not None:
        w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_rope_dimension_sections((list(rp["mrope_section"]) + [0, 0, 0, 0])[:4])
    w.add_rope_freq_base(rp["rope_theta"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    if cfg.get("num_experts"):
        w.add_expert_count(cfg["num_experts"])
        w.add_expert_used_count(cfg["num_experts_per_tok"])
    w.add_key_length(cfg["head_dim"])
    w.add_value_length(cfg["head_dim"])
    if cfg.get("moe_intermediate_size") is not None:
        w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
    if cfg.get("shared_expert_intermediate_size") is not None:
        w.add_expert_shared_feed_forward_length(cfg["shared_expert_intermediate_size"])
    w.add_ssm_conv_kernel(cfg["linear_conv_kernel_dim"])
    w.add_ssm_state_size(cfg["linear_key_head_dim"])
    w.add_ssm_group_count(cfg["linear_num_key_heads"])
    w.add_ssm_time_step_rank(cfg["linear_num_value_heads"])
    w.add_ssm_inner_size(cfg["linear_value_head_dim"] * cfg["linear_num_value_heads"])
    # gguf-py 0.19 has no add_recurrent_layers: the converter's key, written as it writes it.
    w.add_array(f"{w.arch}.attention.recurrent_layers", [t == "linear_attention" for t in cfg["layer_types"]])
    w.add_full_attention_interval(cfg.get("full_attention_interval", 4))
    w.add_rope_dimension_count(int(cfg["head_dim"] * rp.get("partial_rotary_factor", 0.25)))
    w.add_file_type(gguf.LlamaFileType.ALL_F32 if qtype == Q.F32 else gguf.LlamaFileType.MOSTLY_Q8_0)
    gpt2_tokenizer(w, src)
    tensors = qwen35_tensors(cfg, weights)
    for t in sorted(tensors):
        data, kind = store(t, tensors[t], qtype)
        w.add_tensor(t, data, raw_dtype=kind)
    finish(w)


def dequantised_qwen35(path: Path, cfg: dict) -> dict:
    """The file's weights as gguf-py dequantises them, under transformers' names: the norms' 1
    taken off, A_log = ln(-ssm_a), the value heads back in grouped order, the experts split."""
    parts = {v: k for k, v in QWEN35_PARTS.items()}
    names = {v: k for k, v in FIXED.items()}
    leaves = {v: k for k, v in EXPERT_LEAVES.items()}
    out = {}
    for t in gguf.GGUFReader(str(path)).tensors:
        shape = [int(d) for d in reversed(t.shape)]
        value = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32).reshape(shape)
        if t.name in names:
            hf = names[t.name]
        else:
            _, layer, rest = t.name.split(".", 2)
            prefix = f"model.layers.{layer}"
            if rest == "ssm_a":
                out[f"{prefix}.linear_attn.A_log"] = linear_reorder("linear_attn.A_log", np.log(-value), cfg, False)
                continue
            if rest == "ssm_dt.bias":
                out[f"{prefix}.linear_attn.dt_bias"] = linear_reorder("linear_attn.dt_bias", value, cfg, False)
                continue
            part, suffix = rest.split(".")
            if part in leaves:
                for e in range(shape[0]):
                    out[f"{prefix}.mlp.experts.{e}.{leaves[part]}.{suffix}"] = value[e]
                continue
            inner = f"{parts[part]}.{suffix}"
            value = linear_reorder(inner, value, cfg, to_tiled=False)
            if part == "ssm_conv1d":
                value = value[:, None, :]
            hf = f"{prefix}.{inner}"
        if hf.endswith("norm.weight") and not hf.endswith("linear_attn.norm.weight"):
            value = value - np.float32(1)
        out[hf] = value
    return out


@torch.no_grad()
def run_dense(model, cases: list[dict]) -> dict:
    """make_gguf_moe.py's run for a model without routers (empty router tensors, no ranking)."""
    out = {}
    for case in cases:
        ids = case["input_ids"]
        r = model(torch.tensor([ids]), output_attentions=True)
        room = min(NEW_TOKENS, model.config.max_position_embeddings - len(ids))
        generated = list(ids)
        if room > 0:
            generated = model.generate(torch.tensor([ids]), max_new_tokens=room, do_sample=False)[0].tolist()
        empty = np.zeros((0,), dtype=np.float32)
        out[case["name"]] = dict(
            attentions=torch.stack([a[0] for a in r.attentions]).numpy(),
            logits=r.logits[0, -1].numpy(),
            router_probs=empty, router_weights=empty, router_chosen=np.zeros((0, 0), dtype=np.float32),
            gap=math.inf, sequence=generated,
        )
    return out


def main() -> None:
    setup_determinism(SEED)
    manifest = dict(generator="tests/reference/make_gguf_qwen3_5.py", versions=versions(),
                    min_logit_gap_asserted=MIN_GAP, new_tokens=NEW_TOKENS, files=[])
    tensors = {}
    for name in ("qwen3_5", "qwen3_5_moe"):
        src = FIXTURES / f"tiny-{name}"
        cfg, weights = text_model(src)
        ref = json.loads((REFERENCE / f"tiny-{name}.json").read_text())
        cases = [dict(name=c["name"], text=c["text"], input_ids=c["input_ids"],
                      max_len=cfg["max_position_embeddings"], truncate=False) for c in ref["cases"]]
        routed = bool(cfg.get("num_experts"))
        f32 = None
        for qtype in (Q.F32, Q.Q8_0):
            path = OUT / f"tiny-{name}.{qtype.name}.gguf"
            write_qwen35(path, cfg, weights, src, qtype)
            back = dequantised_qwen35(path, cfg)
            kept = {k: v for k, v in weights.items() if not (cfg["tie_word_embeddings"] and k == "lm_head.weight")}
            assert sorted(back) == sorted(kept), (path.name, sorted(set(back) ^ set(kept)))
            if qtype == Q.F32:
                for k, v in kept.items():
                    # 1 + w − 1 and ln(−(−exp(A_log))) round in float32: equal within an ulp or two.
                    assert np.allclose(back[k], v, rtol=0, atol=1e-6), f"{path.name}: {k} differs after the F32 round trip"
            model = load_model(back, cfg, src)
            out = moe.run(model, moe.Routers(model), cases) if routed else run_dense(model, cases)
            if qtype == Q.F32:
                f32 = out
            entry_cfg = dict(cfg, num_experts_per_tok=cfg.get("num_experts_per_tok", 0) if routed else 0)
            record(manifest, tensors, path, qtype, entry_cfg, cases, out, f32,
                   cfg.get("num_experts", 0) if routed else 0, MIN_GAP if routed else -math.inf)
            if not routed:
                manifest["files"][-1]["min_ranking_gap"] = None
    safetensors.numpy.save_file(tensors, str(REFERENCE / "gguf-qwen3_5.safetensors"),
                                metadata={"generator": "tests/reference/make_gguf_qwen3_5.py"})
    write_json(REFERENCE / "gguf-qwen3_5.json", manifest)


if __name__ == "__main__":
    main()
