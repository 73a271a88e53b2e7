#!/usr/bin/env python3
"""Tiny random DeepSeek-V2 and DeepSeek-V3 checkpoints (multi-head latent attention, shared and
routed experts, group-limited routing) and Hugging Face transformers' reference outputs for them
(eager attention, eager experts, float32), router decisions included.

    python3 tests/reference/make_deepseek.py                  # all three
    python3 tests/reference/make_deepseek.py deepseek_v3      # some (by name below)

Everything make_moe.py writes for a mixture-of-experts decoder (tests/fixtures/tiny-<name>/ as
save_pretrained writes it, with a tokenizer; tests/reference/tiny-<name>.{json,safetensors}:
attention at every layer and head, q/k, the last hidden state, logits, three greedy generations,
and every routed layer's router logits, scores, chosen experts and weights), through the same
code, with DeepSeek's routers (`DeepseekV2TopkRouter`, `DeepseekV3TopkRouter`) caught:

    <case>.router.logits   [routed layers, n, experts]  the router's logits
    <case>.router.probs    [routed layers, n, experts]  its scores: softmax over all experts (V2),
                                                        each logit's sigmoid (V3, before the
                                                        correction bias)
    <case>.router.chosen   [routed layers, n, top_k]    the experts it handed the experts module
                                                        (torch.topk(sorted=False): put in order
                                                        here, best first by the score they were
                                                        chosen by: V2 the masked score, V3 the
                                                        sigmoid plus e_score_correction_bias)
    <case>.router.weights  [routed layers, n, top_k]    their weights (routed_scaling_factor in)

The three models (3 layers, hidden 64, 4 heads; qk_nope 8 + qk_rope 8 per query/key head,
v_head_dim 12; kv_lora_rank 16; 8 routed experts, top 2, of inner size 16):

- deepseek_v2_lite: q_lora_rank null (one q_proj, as V2-Lite), topk_method greedy, 2 shared
  experts, first_k_dense_replace 0 (every layer routed);
- deepseek_v2: q_lora_rank 24 (q_a_proj → q_a_layernorm → q_b_proj), group_limited_greedy over
  4 groups keeping 2, routed_scaling_factor 1.5, 1 shared expert, first_k_dense_replace 1;
- deepseek_v3: q_lora_rank 24, sigmoid scores with a random e_score_correction_bias (N(0, 0.05²)),
  noaux_tc over 4 groups keeping 2, norm_topk_prob, routed_scaling_factor 2.5, 1 shared expert,
  first_k_dense_replace 1, YaRN rotary embeddings (factor 4 over an original context of 16,
  mscale 0.707, mscale_all_dim 1: the cosines and sines scaled by get_mscale(4, 0.707) /
  get_mscale(4, 1), the softmax scale by get_mscale(4, 1)²).

**q/k layout.** The stored query and key are what eager_attention_forward received
([nope | rotary] per head). V3 (rope_interleave) hands it the rotary values already gathered
from interleaved pairs into halves; V2's complex multiplication leaves them interleaved, and the
script gathers them the same way (x0, x2, … | x1, x3, …) so that every reference has one layout:
a fixed permutation of the head's last qk_rope values, which changes no dot product (the q/k
check recomputes the attention from the stored vectors).

Router weights are drawn N(0, ROUTER_GAIN²/hidden) as make_moe.py draws them; the latent
projections q_b_proj, q_proj and kv_b_proj get make_families' query/key gain. Near-ties are
refused as make_moe.py refuses them, on the router's scores: no two neighbouring scores in a
token's choice ranking (down to the (top_k + 1)-th kept one) nor group scores (down to the
(topk_group + 1)-th) within MIN_SCORE_GAP, and the float64 run choosing the same experts.
"""

from __future__ import annotations

import argparse
import math
import sys
import zlib
from pathlib import Path

import numpy as np
import torch
from torch import nn
from transformers import (
    DeepseekV2Config,
    DeepseekV2ForCausalLM,
    DeepseekV3Config,
    DeepseekV3ForCausalLM,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_families as mf  # noqa: E402
import make_moe as mm  # noqa: E402
import tiny_tokenizers as tt  # noqa: E402
from reflib import FIXTURES, REFERENCE, write_json  # noqa: E402

SEED = 20261207
BIAS_STD = 0.05
# Scores are probabilities or sigmoids (rounding ~1e-7 in float32).
MIN_SCORE_GAP = 1e-4
LATENT_QK = {"q_proj", "q_b_proj", "kv_b_proj"}


def common(tok) -> dict:
    return dict(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=48,
        moe_intermediate_size=16,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=4,
        kv_lora_rank=16,
        qk_nope_head_dim=8,
        qk_rope_head_dim=8,
        v_head_dim=12,
        n_routed_experts=8,
        num_experts_per_tok=2,
        max_position_embeddings=64,
        tie_word_embeddings=False,
        hidden_act="silu",
        rms_norm_eps=1e-6,
        **mf.special_ids(tok),
    )


FAMILIES = [
    mf.Family(
        "deepseek_v2_lite",
        "decoder",
        DeepseekV2ForCausalLM,
        lambda tok: DeepseekV2Config(
            **common(tok),
            q_lora_rank=None,
            topk_method="greedy",
            n_shared_experts=2,
            first_k_dense_replace=0,
            routed_scaling_factor=1.0,
            norm_topk_prob=False,
            rope_parameters=dict(rope_type="default", rope_theta=10000.0),
        ),
        lambda f: tt.gpt2(f, 64),
        [mf.FULL_SAFE],
        notes=dict(
            attention="q_lora_rank null: one q_proj; kv through kv_a_proj_with_mqa, kv_a_layernorm, "
            "kv_b_proj; rotary values interleaved (complex multiplication)",
            experts="8 experts, top-2 greedy over the softmax, 2 shared experts, every layer routed",
        ),
    ),
    mf.Family(
        "deepseek_v2",
        "decoder",
        DeepseekV2ForCausalLM,
        lambda tok: DeepseekV2Config(
            **common(tok),
            q_lora_rank=24,
            topk_method="group_limited_greedy",
            n_group=4,
            topk_group=2,
            n_shared_experts=1,
            first_k_dense_replace=1,
            routed_scaling_factor=1.5,
            norm_topk_prob=False,
            rope_parameters=dict(rope_type="default", rope_theta=10000.0),
        ),
        lambda f: tt.gpt2(f, 64),
        [mf.FULL_SAFE],
        notes=dict(
            attention="q_lora_rank 24: q_a_proj, q_a_layernorm, q_b_proj",
            experts="8 experts in 4 groups, the 2 groups of best single softmax score kept, top-2 "
            "of the rest, times 1.5; 1 shared expert; layer 0 dense",
        ),
    ),
    mf.Family(
        "deepseek_v3",
        "decoder",
        DeepseekV3ForCausalLM,
        lambda tok: DeepseekV3Config(
            **common(tok),
            q_lora_rank=24,
            n_group=4,
            topk_group=2,
            n_shared_experts=1,
            first_k_dense_replace=1,
            routed_scaling_factor=2.5,
            norm_topk_prob=True,
            rope_interleave=True,
            rope_parameters=dict(
                rope_type="yarn",
                rope_theta=10000.0,
                factor=4.0,
                original_max_position_embeddings=16,
                mscale=0.707,
                mscale_all_dim=1.0,
                beta_fast=32.0,
                beta_slow=1.0,
            ),
        ),
        lambda f: tt.qwen2(f, 64),
        [mf.FULL_SAFE],
        notes=dict(
            attention="q_lora_rank 24; YaRN (factor 4, original 16, mscale 0.707, mscale_all_dim 1)",
            experts="8 experts in 4 groups: sigmoid scores + e_score_correction_bias, the 2 groups "
            "whose two best sum highest kept, top-2 of the rest, weights the sigmoids normalised, "
            "times 2.5; 1 shared expert; layer 0 dense",
        ),
    ),
]


def is_router(module) -> bool:
    return type(module).__name__.lower().endswith("topkrouter")


@torch.no_grad()
def randomise(model: nn.Module, seed: int, gains: mf.Gains) -> None:
    """make_moe.randomise's rules (DeepSeek's routers are `*TopkRouter`), q_proj/q_b_proj/kv_b_proj
    with the query/key gain, then every router's e_score_correction_bias N(0, BIAS_STD²)."""
    rng = np.random.default_rng(seed)

    def normal(shape, std):
        return torch.from_numpy((rng.standard_normal(tuple(shape)) * std).astype(np.float32))

    for name, param in model.named_parameters():
        module_name, _, leaf = name.rpartition(".")
        module = model.get_submodule(module_name)
        if mf.is_norm(module):
            value = 1.0 + normal(param.shape, 0.1) if leaf == "weight" else normal(param.shape, 0.05)
        elif is_router(module):
            value = normal(param.shape, mm.ROUTER_GAIN / math.sqrt(param.shape[1]))
        elif param.dim() == 3:
            value = normal(param.shape, gains.other / math.sqrt(param.shape[2]))
        elif isinstance(module, nn.Embedding):
            value = normal(param.shape, gains.embed)
        elif leaf == "bias" or param.dim() == 1:
            value = normal(param.shape, 0.1)
        elif param.dim() == 2:
            gain = gains.qk if module_name.rsplit(".", 1)[-1] in LATENT_QK else gains.other
            value = normal(param.shape, gain / math.sqrt(param.shape[1]))
        else:
            raise ValueError(f"no rule for {name} {tuple(param.shape)}")
        param.copy_(value)
    for name, buf in model.named_buffers():
        if name.endswith("e_score_correction_bias"):
            buf.copy_(normal(buf.shape, BIAS_STD))


def choice_scores(router, logits: torch.Tensor):
    """(scores, choice scores with the group mask, group scores or None), as the router computes
    them, in the logits' dtype."""
    v3 = hasattr(router, "e_score_correction_bias")
    scores = logits.sigmoid() if v3 else logits.softmax(dim=-1)
    choice = scores + router.e_score_correction_bias.to(scores.dtype) if v3 else scores.clone()
    groups = router.num_group if (v3 or router.topk_method == "group_limited_greedy") else None
    if not groups:
        return scores, choice, None
    e = choice.shape[-1]
    grouped = choice.view(*choice.shape[:-1], groups, e // groups)
    group_scores = grouped.topk(2, dim=-1)[0].sum(-1) if v3 else grouped.max(dim=-1).values
    keep = group_scores.topk(router.topk_group, dim=-1)[1]
    mask = torch.zeros_like(group_scores).scatter_(-1, keep, 1).bool()
    mask = mask.unsqueeze(-1).expand(*mask.shape, e // groups).reshape(choice.shape)
    choice = choice.masked_fill(~mask, float("-inf") if v3 else 0.0)
    return scores, choice, group_scores


class DeepseekRunner(mf.Runner):
    """make_families' Runner, also catching every router's output (logits, weights, indices)
    and checking its logits against output_router_logits; V2's q/k rotary values gathered from
    pairs into halves (see the module documentation)."""

    def __init__(self, family, model):
        super().__init__(family, model)
        self.routers = []
        self.caught: list[tuple] = []
        for _name, module in model.named_modules():
            if is_router(module):
                self.routers.append(module)
                module.register_forward_hook(self._catch)
        self.gap = math.inf

    def _catch(self, _module, _inputs, output):
        self.caught.append(tuple(t.detach().clone() for t in output))

    @torch.no_grad()
    def run(self, ids, type_ids=None, decoder_ids=None) -> dict:
        self.caught = []
        result = super().run(ids, type_ids, decoder_ids)
        cfg = self.model.config
        if cfg.model_type == "deepseek_v2":
            nope, rope = cfg.qk_nope_head_dim, cfg.qk_rope_head_dim
            for what in ("self.query", "self.key"):
                t = result[what]
                pe = t[..., nope:]
                result[what] = torch.cat([t[..., :nope], pe[..., 0::2], pe[..., 1::2]], dim=-1)
        out = self.model(input_ids=torch.tensor([ids]), output_router_logits=True, return_dict=True)
        routed = len(self.routers)
        assert len(self.caught) == 2 * routed, (len(self.caught), routed)
        caught = self.caught[:routed]
        logits = torch.stack([c[0] for c in caught])
        hf = torch.stack([r for r in out.router_logits if r is not None])
        assert torch.equal(logits, hf), "caught router logits differ from output_router_logits"
        probs, chosen, weights = [], [], []
        gap = math.inf
        top_k = cfg.num_experts_per_tok
        for router, (layer_logits, w, idx) in zip(self.routers, caught):
            scores, choice, group_scores = choice_scores(router, layer_logits)
            picked = choice.gather(-1, idx)
            # Best first by the choice score; equal scores: the lower expert first.
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
                g = group_scores.double().sort(dim=-1, descending=True).values
                g = g[..., : router.topk_group + 1]
                gap = min(gap, float((g[..., :-1] - g[..., 1:]).min()))
        self.gap = gap
        result["router.logits"] = logits
        result["router.probs"] = torch.stack(probs)
        result["router.weights"] = torch.stack(weights)
        result["router.chosen"] = torch.stack(chosen).float()
        return result


class NearTie(Exception):
    """A token's router ranks two experts (or groups) within MIN_SCORE_GAP of each other, or the
    float64 run chose other experts."""



def make_checked(family: mf.Family, seed: int, gaps: list[float]) -> None:
    """make_families.make_family, every run's router ranking checked before it is stored."""
    original_put = mf.put_result

    def put(store, entry, key, ref, ref64, qk=True):
        gaps.append(LAST_GAP[0])
        if gaps[-1] <= MIN_SCORE_GAP:
            raise NearTie(f"{key}: gap {gaps[-1]:.2e}")
        if ref64 is not None and not torch.equal(ref["router.chosen"], ref64["router.chosen"]):
            raise NearTie(f"{key}: float64 chose other experts")
        original_put(store, entry, key, ref, ref64, qk)

    mf.put_result = put
    try:
        mf.make_family(family, seed)
    finally:
        mf.put_result = original_put


# The float32 runner's gap of its latest run (make_family runs float32, then float64, then stores).
LAST_GAP = [math.inf]


class Float32GapRunner(DeepseekRunner):
    def run(self, ids, type_ids=None, decoder_ids=None) -> dict:
        result = super().run(ids, type_ids, decoder_ids)
        if self.model.dtype == torch.float32:
            LAST_GAP[0] = self.gap
        return result


def routed_layers(cfg) -> list[int]:
    return list(range(cfg.first_k_dense_replace, cfg.num_hidden_layers))


def annotate(family: mf.Family, gap: float) -> None:
    """Add the router section to the manifest make_family wrote."""
    import json

    path = REFERENCE / f"tiny-{family.name}.json"
    manifest = json.loads(path.read_text())
    cfg = mm.load(family, mf.folder_of(family, family.layouts[0])).config
    manifest["generator"] = "tests/reference/make_deepseek.py"
    v3 = cfg.model_type == "deepseek_v3"
    manifest["router"] = dict(
        experts=cfg.n_routed_experts,
        top_k=cfg.num_experts_per_tok,
        # transformers' V2 router never normalises (it does not read norm_topk_prob).
        norm_topk_prob=bool(v3 and cfg.norm_topk_prob),
        routed_layers=routed_layers(cfg),
        scoring="sigmoid" if v3 else "softmax",
        router_gain=mm.ROUTER_GAIN,
        min_score_gap=gap,
        min_gap_asserted=MIN_SCORE_GAP,
        what="per case and generation: router.logits, router.probs (the router's scores: softmax "
        "over all experts for V2, each logit's sigmoid for V3), router.chosen (expert numbers, best "
        "first by the score they were chosen by, stored as float32) and router.weights (what each "
        "chosen expert's output is multiplied by, routed_scaling_factor included), [routed layers, "
        "n, ·], caught at the TopkRouter modules and checked equal to output_router_logits",
    )
    manifest["qk_layout"] = (
        "per head [qk_nope | qk_rope], the rotary values gathered from interleaved pairs into "
        "halves (V3 as eager_attention_forward receives them; V2 permuted so by this script)"
    )
    write_json(path, manifest)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("families", nargs="*", help="names to make (default: all)")
    args = parser.parse_args()
    names = [f.name for f in FAMILIES]
    unknown = [n for n in args.families if n not in names]
    if unknown:
        parser.error(f"unknown families {unknown}; choose from {names}")
    mf.randomise = randomise
    mf.load = mm.load
    mf.Runner = Float32GapRunner
    FIXTURES.mkdir(parents=True, exist_ok=True)
    for family in FAMILIES:
        family.config = mm.eager_experts(family.config)
        if args.families and family.name not in args.families:
            continue
        seed = SEED + zlib.crc32(family.name.encode())
        for _attempt in range(40):
            mf.setup_determinism(seed)
            gaps: list[float] = []
            try:
                make_checked(family, seed, gaps)
                break
            except NearTie as tie:
                print(f"{family.name}: seed {seed} has a near-tie ({tie}); next seed", file=sys.stderr)
                seed += 1
        else:
            raise SystemExit(f"{family.name}: no seed without near-ties in 40")
        annotate(family, min(gaps))


if __name__ == "__main__":
    main()
