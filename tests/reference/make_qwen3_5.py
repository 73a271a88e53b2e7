#!/usr/bin/env python3
"""Tiny random Qwen3.5 checkpoints, dense and mixture-of-experts, and Hugging Face transformers'
reference outputs for them (eager attention, eager experts, the torch fallbacks of the gated delta
rule and the causal convolution, float32). Shares its weights' rules, its rule and router catchers
and its forward pass with make_qwen3_next.py.

    /tmp/venvref/bin/python tests/reference/make_qwen3_5.py

Writes, per model, tests/fixtures/<label>/ (save_pretrained with GPT-2's byte-level BPE, as make_qwen3_next.py) and
tests/reference/<label>.{json,safetensors}, with per case what make_qwen3_next.py writes
(attentions of the full layers, logits, last hidden state, the values the rule read and its
output, router choices and weights where the model routes) and

    <case>.mixing   [linear layers, value heads, n, n]  each gated delta layer's token-mixing
                                                       matrix, from the rule's own q, k, g and β
                                                       (caught at transformers' rule), in numpy
                                                       float64, forward in time: a value written
                                                       at s is carried to t by the state's
                                                       updates (M_r = α_r (I − β_r k_r k_rᵀ))
                                                       and read by q_t; the script checks that it
                                                       times the values gives the rule's output.

The models:
- tiny-qwen3_5: Qwen3_5ForConditionalGeneration (a one-block vision tower beside the language
  model, `model.language_model.` / `model.visual.`, the text model's fields in `text_config`):
  hidden 32, 4 layers (linear, full, linear, full by `layer_types`), 4 query heads over 2 of 16,
  partial rotary factor 0.25 with `mrope_section` [1, 1, 0], gated delta layers of 2 key heads
  and 4 value heads of 8, conv kernel 4, a dense gated MLP of 48 in every layer, its own head.
- tiny-qwen3_5_moe: Qwen3_5MoeForCausalLM (`model_type` qwen3_5_moe_text): the same shape with
  layers full, linear, linear, full; 4 experts of 16 (merged `gate_up_proj`), top 2 renormalised,
  a shared expert of 24 behind its sigmoid gate in every layer; the head tied to the embeddings.
Weights from numpy's PCG64 with fixed seeds; a re-run with the same versions rewrites every file
byte for byte.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import safetensors.torch
import torch
from transformers import (
    Qwen3_5Config,
    Qwen3_5ForConditionalGeneration,
    Qwen3_5MoeForCausalLM,
    Qwen3_5MoeTextConfig,
)
from transformers.models.qwen3_5 import modeling_qwen3_5 as m35
from transformers.models.qwen3_5_moe import modeling_qwen3_5_moe as m35moe

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_qwen3_next as base  # noqa: E402
import tiny_tokenizers as tt  # noqa: E402
from reflib import FIXTURES, REFERENCE, setup_determinism, versions, write_json  # noqa: E402

CASES = [
    ("short", "The cat sat on the mat."),
    ("long", "Linear attention keeps a state; the full layers look back at every token again."),
]

TEXT = dict(
    hidden_size=32,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    max_position_embeddings=64,
    rms_norm_eps=1e-6,
    rope_parameters=dict(
        rope_type="default",
        rope_theta=10000.0,
        partial_rotary_factor=0.25,
        mrope_section=[1, 1, 0],
        mrope_interleaved=True,
    ),
    linear_conv_kernel_dim=4,
    linear_key_head_dim=8,
    linear_value_head_dim=8,
    linear_num_key_heads=2,
    linear_num_value_heads=4,
)


class DeltaCatcher(base.RuleCatcher):
    """make_qwen3_next's catcher, keeping also the rule's q, k, g and β, from which it writes
    each layer's token-mixing matrix."""

    def __init__(self, rule):
        super().__init__(rule)
        self.mixing: list[torch.Tensor] = []

    def __call__(self, query, key, value, **kwargs):
        out, state = super().__call__(query, key, value, **kwargs)
        assert kwargs.get("use_qk_l2norm_in_kernel"), "Qwen3.5 normalises q and k in the rule"
        self.mixing.append(torch.from_numpy(mixing(query, key, kwargs["g"], kwargs["beta"], value.shape[2])))
        return out, state

    def extra(self) -> dict[str, torch.Tensor]:
        return {"mixing": torch.stack(self.mixing)}


def mixing(query, key, g, beta, value_heads: int) -> np.ndarray:
    """[value heads, n, n] float32: A[t, s] = q_tᵀ M_t ⋯ M_{s+1} β_s k_s, in float64."""
    q = query[0].double().numpy()  # [n, key heads, dk]
    k = key[0].double().numpy()
    g = g[0].double().numpy()  # [n, value heads]
    b = beta[0].double().numpy()
    n, key_heads, dk = q.shape
    r = value_heads // key_heads
    out = np.zeros((value_heads, n, n))
    for h in range(value_heads):
        kq = q[:, h // r, :] / np.sqrt((q[:, h // r, :] ** 2).sum(-1, keepdims=True) + 1e-6)
        kq = kq / np.sqrt(dk)
        kk = k[:, h // r, :] / np.sqrt((k[:, h // r, :] ** 2).sum(-1, keepdims=True) + 1e-6)
        alpha = np.exp(g[:, h])
        for s in range(n):
            w = b[s, h] * kk[s]  # the key a value written at s is stored under
            out[h, s, s] = kq[s] @ w
            for t in range(s + 1, n):
                w = alpha[t] * (w - b[t, h] * kk[t] * (kk[t] @ w))
                out[h, t, s] = kq[t] @ w
    return out.astype(np.float32)


def dense_model(tok):
    vision = dict(
        depth=1,
        hidden_size=16,
        intermediate_size=32,
        num_heads=2,
        patch_size=4,
        spatial_merge_size=2,
        temporal_patch_size=2,
        out_hidden_size=32,
        num_position_embeddings=16,
    )
    text = dict(
        TEXT,
        vocab_size=len(tok),
        intermediate_size=48,
        layer_types=["linear_attention", "full_attention", "linear_attention", "full_attention"],
        tie_word_embeddings=False,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
    )
    cfg = Qwen3_5Config(text_config=text, vision_config=vision, tie_word_embeddings=False)
    cfg._attn_implementation = "eager"
    cfg.text_config._attn_implementation = "eager"
    cfg.vision_config._attn_implementation = "eager"
    return cfg, Qwen3_5ForConditionalGeneration, m35, None


def moe_model(tok):
    cfg = Qwen3_5MoeTextConfig(
        **TEXT,
        vocab_size=len(tok),
        layer_types=["full_attention", "linear_attention", "linear_attention", "full_attention"],
        moe_intermediate_size=16,
        shared_expert_intermediate_size=24,
        num_experts_per_tok=2,
        num_experts=4,
        tie_word_embeddings=True,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
    )
    cfg._attn_implementation = "eager"
    cfg._experts_implementation = "eager"
    return cfg, Qwen3_5MoeForCausalLM, m35moe, m35moe.Qwen3_5MoeTopKRouter


def make(label: str, seed: int, build) -> None:
    setup_determinism(seed)
    folder = FIXTURES / label
    folder.mkdir(parents=True, exist_ok=True)
    tok = tt.gpt2(folder, 64)
    cfg, cls, modeling, router = build(tok)
    model = cls(cfg).eval()
    base.randomise(model, seed)
    model.save_pretrained(folder, safe_serialization=True)
    reloaded = cls.from_pretrained(folder, attn_implementation="eager").eval()
    reloaded.config._experts_implementation = "eager"
    layer_types = getattr(cfg, "text_config", cfg).layer_types
    tensors: dict[str, torch.Tensor] = {}
    cases = []
    for name, text in CASES:
        ids = tok(text)["input_ids"]
        result = base.run(reloaded, ids, modeling, router, DeltaCatcher, layer_types)
        again = base.run(model, ids, modeling, router, DeltaCatcher, layer_types)
        gap = float((result["logits"] - again["logits"]).abs().max())
        assert gap < 1e-5, f"reload changed the model: {gap:.2e}"
        # The matrix is the map the rule applies: times its values, its output.
        mixed = torch.einsum("lhts,lhsd->lhtd", result["mixing"].double(), result["values"].double())
        worst = float((mixed - result["core"].double()).abs().max())
        assert worst < 1e-5, f"mixing × values vs the rule: {worst:.2e}"
        print(f"{label} {name}: reloaded vs built logits {gap:.2e}; mixing × values vs rule {worst:.2e}")
        refs = {}
        for key, value in result.items():
            tensors[f"{name}.{key}"] = value.contiguous()
            refs[key] = dict(tensor=f"{name}.{key}", shape=list(value.shape))
        cases.append(dict(name=name, text=text, input_ids=ids, tensors=refs))
    safetensors.torch.save_file(tensors, REFERENCE / f"{label}.safetensors")
    write_json(
        REFERENCE / f"{label}.json",
        dict(
            generator="tests/reference/make_qwen3_5.py",
            versions=versions(),
            model_type=cfg.model_type,
            layer_types=layer_types,
            tensors=f"{label}.safetensors",
            cases=cases,
        ),
    )
    print(f"{label}: {len(cases)} cases; layer_types {layer_types}")


def main() -> None:
    make("tiny-qwen3_5", 3_5001, dense_model)
    make("tiny-qwen3_5_moe", 3_5002, moe_model)


if __name__ == "__main__":
    main()
