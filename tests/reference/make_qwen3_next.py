#!/usr/bin/env python3
"""A tiny random Qwen3-Next checkpoint (Qwen3NextForCausalLM) and Hugging Face transformers'
reference outputs for it (eager attention, eager experts, the torch fallbacks of the gated delta
rule and the causal convolution, float32).

    /tmp/venvref/bin/python tests/reference/make_qwen3_next.py

Writes tests/fixtures/tiny-qwen3_next/ (save_pretrained with a GPT-2-style tokenizer) and
tests/reference/tiny-qwen3_next.{json,safetensors}: per case

    <case>.attentions  [full layers, heads, n, n]  the full-attention layers' probabilities
                                                    (transformers' output_attentions: eager)
    <case>.logits      [n, vocab]                   every position's logits
    <case>.hidden      [n, hidden]                  the last hidden state (after the final norm)
    <case>.values      [linear layers, value heads, n, head_v_dim]  each gated delta layer's
                                                    values after the causal conv and SiLU (what
                                                    the delta rule reads), caught at the rule
    <case>.core        [linear layers, value heads, n, head_v_dim]  the rule's output (before
                                                    the gated RMSNorm), from transformers'
                                                    torch_chunk_gated_delta_rule
    <case>.router_chosen / <case>.router_weights   [layers, n, top_k] each router's choices

The model: 4 layers (full_attention_interval 2: linear, full, linear, full); 4 query heads over 2
key/value heads of 16, partial rotary factor 0.25 (4 of 16 dims rotated); gated delta layers of
2 key heads (dim 8) and 4 value heads (dim 8), conv kernel 4; 4 experts top-2 of inner size 16
with a shared expert of 24 behind its sigmoid gate; layer 1 dense (mlp_only_layers [1]).
Zero-centred norms (Qwen3NextRMSNorm: 1 + w) get w ~ 0.1·N; the gated norm's plain weight 1 +
0.1·N; A_log, dt_bias drawn so decays exp(g) spread over (0, 1). Weights from numpy's PCG64 with
a fixed seed; a re-run with the same versions rewrites every file byte for byte.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import safetensors.torch
import torch
from torch import nn
from transformers import Qwen3NextConfig, Qwen3NextForCausalLM
from transformers.models.qwen3_next import modeling_qwen3_next as mq

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tiny_tokenizers as tt  # noqa: E402
from reflib import FIXTURES, REFERENCE, setup_determinism, versions, write_json  # noqa: E402

LABEL = "tiny-qwen3_next"
SEED = 3_2025
CASES = [
    ("short", "The cat sat on the mat."),
    ("long", "Linear attention keeps a state; the full layers look back at every token again."),
]


def config(tok) -> Qwen3NextConfig:
    cfg = Qwen3NextConfig(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=64,
        rms_norm_eps=1e-6,
        rope_parameters=dict(rope_type="default", rope_theta=10000.0, partial_rotary_factor=0.25),
        linear_conv_kernel_dim=4,
        linear_key_head_dim=8,
        linear_value_head_dim=8,
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        decoder_sparse_step=1,
        moe_intermediate_size=16,
        shared_expert_intermediate_size=24,
        num_experts_per_tok=2,
        num_experts=4,
        norm_topk_prob=True,
        mlp_only_layers=[1],
        full_attention_interval=2,
        tie_word_embeddings=False,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
    )
    cfg._attn_implementation = "eager"
    cfg._experts_implementation = "eager"
    return cfg


@torch.no_grad()
def randomise(model: nn.Module, seed: int) -> None:
    rng = np.random.default_rng(seed)

    def normal(shape, std, mean=0.0):
        return torch.from_numpy((mean + rng.standard_normal(tuple(shape)) * std).astype(np.float32))

    for name, param in model.named_parameters():
        module_name, _, leaf = name.rpartition(".")
        module = model.get_submodule(module_name)
        kind = type(module).__name__
        if kind.endswith("RMSNorm"):  # Qwen3NextRMSNorm, Qwen3_5RMSNorm, Qwen3_5MoeRMSNorm
            value = normal(param.shape, 0.1)  # applied as 1 + w
        elif kind.endswith("RMSNormGated"):
            value = normal(param.shape, 0.1, 1.0)
        elif leaf == "A_log":
            value = torch.from_numpy(np.log(rng.uniform(0.05, 1.5, param.shape)).astype(np.float32))
        elif leaf == "dt_bias":
            value = normal(param.shape, 0.5)
        elif kind == "Conv1d":
            value = normal(param.shape, 0.5)
        elif kind.endswith("Experts"):
            value = normal(param.shape, 1.0 / math.sqrt(param.shape[-1]))
        elif isinstance(module, nn.Embedding):
            value = normal(param.shape, 1.0)
        elif param.dim() == 2:
            gain = 1.7 if module_name.rsplit(".", 1)[-1] in ("q_proj", "k_proj") else 1.0
            value = normal(param.shape, gain / math.sqrt(param.shape[1]))
        elif module_name.startswith("model.visual."):  # Qwen3.5's vision tower (not read)
            value = normal(param.shape, 0.02, 1.0 if leaf == "weight" and "norm" in module_name else 0.0)
        else:
            raise ValueError(f"no rule for {name} {tuple(param.shape)} in {kind}")
        param.copy_(value)


class RuleCatcher:
    """Wraps transformers' own torch_chunk_gated_delta_rule: keeps what it read (the values) and
    what it returned."""

    def __init__(self, rule):
        self.rule = rule
        self.values: list[torch.Tensor] = []
        self.core: list[torch.Tensor] = []

    def __call__(self, query, key, value, **kwargs):
        out, state = self.rule(query, key, value, **kwargs)
        self.values.append(value[0].transpose(0, 1).detach().clone())  # [heads, n, dv]
        self.core.append(out[0].transpose(0, 1).detach().clone())
        return out, state

    def extra(self) -> dict[str, torch.Tensor]:
        """More reference tensors (none here)."""
        return {}


class RouterCatcher:
    def __init__(self):
        self.chosen: list[torch.Tensor] = []
        self.weights: list[torch.Tensor] = []

    def hook(self, module, inputs, output):
        _, scores, indices = output
        self.chosen.append(indices.detach().clone())
        self.weights.append(scores.detach().clone())


@torch.no_grad()
def run(model, ids: list[int], modeling=mq, router_type=None, catcher=RuleCatcher, layer_types=None):
    """transformers' outputs for `ids`, with the gated delta rule of `modeling` (the model's
    modeling module) caught by `catcher` and the routers of `router_type` hooked."""
    rules = catcher(modeling.torch_chunk_gated_delta_rule)
    routers = RouterCatcher()
    router_type = router_type or getattr(modeling, "Qwen3NextTopKRouter", ())
    handles = [m.register_forward_hook(routers.hook) for m in model.modules() if isinstance(m, router_type)]
    modeling.torch_chunk_gated_delta_rule = rules
    try:
        out = model(torch.tensor([ids]), output_attentions=True, output_hidden_states=True, use_cache=False)
    finally:
        for h in handles:
            h.remove()
        modeling.torch_chunk_gated_delta_rule = rules.rule
    layer_types = layer_types or model.config.layer_types
    assert len(rules.core) == sum(t == "linear_attention" for t in layer_types), "rule calls"
    if not routers.chosen:
        return {
            "attentions": torch.stack([a[0] for a in out.attentions]),
            "logits": out.logits[0],
            "hidden": out.hidden_states[-1][0],
            "values": torch.stack(rules.values),
            "core": torch.stack(rules.core),
            **rules.extra(),
        }
    return {
        "attentions": torch.stack([a[0] for a in out.attentions]),
        "logits": out.logits[0],
        "hidden": out.hidden_states[-1][0],
        "values": torch.stack(rules.values),
        "core": torch.stack(rules.core),
        "router_chosen": torch.stack(routers.chosen).to(torch.float32),
        "router_weights": torch.stack(routers.weights),
        **rules.extra(),
    }


def main() -> None:
    setup_determinism(SEED)
    folder = FIXTURES / LABEL
    folder.mkdir(parents=True, exist_ok=True)
    tok = tt.gpt2(folder, 64)
    cfg = config(tok)
    model = Qwen3NextForCausalLM(cfg).eval()
    randomise(model, SEED)
    model.save_pretrained(folder, safe_serialization=True)
    reloaded = Qwen3NextForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
    reloaded.config._experts_implementation = "eager"
    tensors: dict[str, torch.Tensor] = {}
    cases = []
    for name, text in CASES:
        ids = tok(text)["input_ids"]
        result = run(reloaded, ids)
        again = run(model, ids)
        gap = float((result["logits"] - again["logits"]).abs().max())
        assert gap < 1e-5, f"reload changed the model: {gap:.2e}"
        print(f"{name}: reloaded vs built logits max diff {gap:.2e}")
        # Independent check of the recurrence: transformers' own token-by-token rule on the same
        # inputs gives the chunked rule's output.
        refs = {}
        for key, value in result.items():
            tensors[f"{name}.{key}"] = value.contiguous()
            refs[key] = dict(tensor=f"{name}.{key}", shape=list(value.shape))
        cases.append(dict(name=name, text=text, input_ids=ids, tensors=refs))
    safetensors.torch.save_file(tensors, REFERENCE / f"{LABEL}.safetensors")
    write_json(
        REFERENCE / f"{LABEL}.json",
        dict(
            generator="tests/reference/make_qwen3_next.py",
            versions=versions(),
            model_type="qwen3_next",
            layer_types=cfg.layer_types,
            tensors=f"{LABEL}.safetensors",
            cases=cases,
        ),
    )
    print(f"{LABEL}: {len(cases)} cases; layer_types {cfg.layer_types}")


if __name__ == "__main__":
    main()
