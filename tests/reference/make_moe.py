#!/usr/bin/env python3
"""Tiny random mixture-of-experts checkpoints (Mixtral, Qwen3-MoE, OLMoE) and Hugging Face
transformers' reference outputs for them (eager attention, float32), router decisions included.

    python3 tests/reference/make_moe.py                 # every family
    python3 tests/reference/make_moe.py mixtral olmoe   # some (by name below)

Everything make_families.py writes for a decoder (tests/fixtures/tiny-<name>/ as save_pretrained
writes it, with a tokenizer; tests/reference/tiny-<name>.{json,safetensors}: attention at every
layer and head, q/k, the last hidden state, logits, three greedy generations), through the same
code, plus per case and generation the routers' decisions at every routed layer, caught at the
router modules (`*TopKRouter`, what the experts were run with):

    <case>.router.logits   [routed layers, n, experts]  the router's logits
    <case>.router.probs    [routed layers, n, experts]  softmax over all experts
    <case>.router.chosen   [routed layers, n, top_k]    expert numbers, best first (as float32)
    <case>.router.weights  [routed layers, n, top_k]    the weights their outputs are added with

The manifest's `router` section lists the routed layers, and the smallest gap between the logits
of neighbouring experts in each token's ranking down to the (top_k + 1)-th (asserted above
MIN_GAP: no near-tie, so the chosen experts are stable across implementations; the first seed
from the family's own without one is used).

tiny-qwen3_moe-merged/ holds the same Qwen3-MoE weights under transformers 5's in-memory names
(experts merged into 3-D `gate_up_proj`/`down_proj` tensors), checked to compute the same logits.
Weights are drawn with numpy's PCG64 from a fixed seed per family, as make_families.py draws them
(3-D expert tensors N(0, gain²/fan_in) with fan_in their last dimension), so a re-run with the same
versions rewrites every file byte for byte.
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import zlib
from pathlib import Path

import numpy as np
import safetensors.torch
import torch
from torch import nn
from transformers import (
    AutoModelForCausalLM,
    MixtralConfig,
    MixtralForCausalLM,
    OlmoeConfig,
    OlmoeForCausalLM,
    Qwen3MoeConfig,
    Qwen3MoeForCausalLM,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_families as mf  # noqa: E402
import tiny_tokenizers as tt  # noqa: E402
from reflib import FIXTURES, REFERENCE, write_json  # noqa: E402

SEED = 20261207
# The router's weights are drawn wider than the other maps so that probabilities spread out.
ROUTER_GAIN = 2.0
# The smallest gap allowed between neighbouring router logits in a token's ranking (down to the
# (top_k + 1)-th): far above the float32 rounding of the logits (~1e-6 here), so no faithful
# implementation can rank them otherwise.
MIN_GAP = 1e-3


def common(tok) -> dict:
    return dict(
        vocab_size=len(tok),
        hidden_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=48,
        rope_parameters=dict(rope_type="default", rope_theta=10000.0),
        tie_word_embeddings=False,
        hidden_act="silu",
        num_experts_per_tok=2,
    )


FAMILIES = [
    mf.Family(
        "mixtral",
        "decoder",
        MixtralForCausalLM,
        lambda tok: MixtralConfig(
            **common(tok),
            intermediate_size=32,
            num_hidden_layers=2,
            num_local_experts=8,
            rms_norm_eps=1e-5,
            **mf.special_ids(tok),
        ),
        lambda f: tt.llama2_sentencepiece(f, 48),
        [mf.FULL_SAFE],
        notes=dict(
            experts="8 experts, top-2: softmax over all, the top 2 renormalised to sum to 1; "
            "experts saved as block_sparse_moe.experts.{e}.w1/w3/w2",
        ),
    ),
    mf.Family(
        "qwen3_moe",
        "decoder",
        Qwen3MoeForCausalLM,
        lambda tok: Qwen3MoeConfig(
            **common(tok),
            head_dim=16,
            intermediate_size=48,
            moe_intermediate_size=32,
            num_hidden_layers=3,
            num_experts=8,
            norm_topk_prob=True,
            decoder_sparse_step=1,
            mlp_only_layers=[1],
            rms_norm_eps=1e-6,
            bos_token_id=None,
            eos_token_id=tok.eos_token_id,
            pad_token_id=tok.pad_token_id,
        ),
        lambda f: tt.qwen2(f, 48),
        [mf.FULL_SAFE],
        notes=dict(
            experts="8 experts, top-2, norm_topk_prob true; layer 1 is dense (mlp_only_layers [1], "
            "intermediate_size 48), layers 0 and 2 route (moe_intermediate_size 32)",
            qk_norm="q_norm and k_norm: RMSNorm over each head's 16 values, before RoPE",
        ),
    ),
    mf.Family(
        "olmoe",
        "decoder",
        OlmoeForCausalLM,
        lambda tok: OlmoeConfig(
            **common(tok),
            intermediate_size=32,
            num_hidden_layers=2,
            num_experts=8,
            norm_topk_prob=False,
            rms_norm_eps=1e-5,
            **mf.special_ids(tok),
        ),
        lambda f: tt.gpt2(f, 48),
        [mf.FULL_SAFE],
        notes=dict(
            experts="8 experts, top-2, norm_topk_prob false: the chosen experts' softmax "
            "probabilities as they are",
            qk_norm="q_norm over the whole q projection (64 values), k_norm over the whole k "
            "projection (32 values), before the heads are split and rotated",
        ),
    ),
]


@torch.no_grad()
def randomise(model: nn.Module, seed: int, gains: mf.Gains) -> None:
    """make_families.randomise's rules, plus 3-D expert tensors (transformers 5 keeps each
    layer's experts merged: gate_up_proj [experts, 2·inner, hidden], down_proj [experts, hidden,
    inner]) N(0, other²/fan_in), fan_in the last dimension; router weights (`*.gate.weight`
    under a TopKRouter) N(0, ROUTER_GAIN²/hidden)."""
    rng = np.random.default_rng(seed)

    def normal(shape, std):
        return torch.from_numpy((rng.standard_normal(tuple(shape)) * std).astype(np.float32))

    for name, param in model.named_parameters():
        module_name, _, leaf = name.rpartition(".")
        module = model.get_submodule(module_name)
        kind = type(module).__name__
        if mf.is_norm(module):
            value = 1.0 + normal(param.shape, 0.1) if leaf == "weight" else normal(param.shape, 0.05)
        elif kind.endswith("TopKRouter"):
            value = normal(param.shape, ROUTER_GAIN / math.sqrt(param.shape[1]))
        elif param.dim() == 3:
            value = normal(param.shape, gains.other / math.sqrt(param.shape[2]))
        elif isinstance(module, nn.Embedding):
            value = normal(param.shape, gains.embed)
        elif param.dim() == 2:
            gain = gains.qk if module_name.rsplit(".", 1)[-1] in mf.QK_NAMES else gains.other
            value = normal(param.shape, gain / math.sqrt(param.shape[1]))
        else:
            raise ValueError(f"no rule for {name} {tuple(param.shape)} in {kind}")
        param.copy_(value)


def eager_experts(config_of):
    """A family's config function whose configs run the experts through the modeling file's
    own loop (`experts_implementation="eager"`), not a grouped-matmul kernel."""

    def config(tok):
        cfg = config_of(tok)
        cfg._experts_implementation = "eager"
        return cfg

    return config


def load(family: mf.Family, folder: Path, dtype=torch.float32):
    """make_families.load with eager experts as well as eager attention."""
    model, info = AutoModelForCausalLM.from_pretrained(
        folder,
        attn_implementation="eager",
        experts_implementation="eager",
        dtype=dtype,
        output_loading_info=True,
    )
    assert not info["missing_keys"] and not info["mismatched_keys"], (folder, info)
    assert model.config._experts_implementation == "eager", folder
    return model.eval()


class RouterRunner(mf.Runner):
    """make_families' Runner, which also catches every router's output (logits, the weights and
    the expert numbers it handed the experts) and checks it against output_router_logits."""

    def __init__(self, family, model):
        super().__init__(family, model)
        self.routed: list[str] = []
        self.caught: list[tuple] = []
        for name, module in model.named_modules():
            if type(module).__name__.endswith("TopKRouter"):
                self.routed.append(name)
                module.register_forward_hook(self._catch)

    def _catch(self, _module, _inputs, output):
        self.caught.append(tuple(t.detach().clone() for t in output))

    @torch.no_grad()
    def run(self, ids, type_ids=None, decoder_ids=None) -> dict:
        self.caught = []
        result = super().run(ids, type_ids, decoder_ids)
        out = self.model(input_ids=torch.tensor([ids]), output_router_logits=True, return_dict=True)
        assert len(self.caught) == 2 * len(self.routed), (len(self.caught), self.routed)
        caught = self.caught[: len(self.routed)]
        logits = torch.stack([c[0] for c in caught])
        hf = torch.stack([r for r in out.router_logits if r is not None])
        assert torch.equal(logits, hf), "caught router logits differ from output_router_logits"
        result["router.logits"] = logits
        result["router.probs"] = torch.softmax(logits.float(), dim=-1)
        result["router.weights"] = torch.stack([c[1] for c in caught])
        result["router.chosen"] = torch.stack([c[2] for c in caught]).float()
        return result


def ranking_gap(result: dict, top_k: int) -> float:
    """The smallest gap between neighbouring router logits in any token's ranking down to the
    (top_k + 1)-th (the softmax keeps their order; a gap in logits is what an implementation's
    rounding must not close, whereas two small probabilities may be close in absolute terms
    however far apart their logits are)."""
    logits = result["router.logits"].double()
    top = logits.sort(dim=-1, descending=True).values[..., : top_k + 1]
    return float((top[..., :-1] - top[..., 1:]).min())


def routed_layers(cfg) -> list[int]:
    layers = range(cfg.num_hidden_layers)
    if cfg.model_type == "qwen3_moe":
        step = cfg.decoder_sparse_step
        return [i for i in layers if i not in cfg.mlp_only_layers and (i + 1) % step == 0]
    return list(layers)


def write_merged(family: mf.Family) -> None:
    """The Qwen3-MoE fixture under transformers 5's in-memory names (experts merged), checked
    to load and compute the same logits."""
    source = mf.folder_of(family, family.layouts[0])
    folder = source.parent / (source.name + "-merged")
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(source, folder)
    model = load(family, source)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    assert any(k.endswith("experts.gate_up_proj") for k in state), sorted(state)
    safetensors.torch.save_file(state, folder / "model.safetensors", metadata={"format": "pt"})
    merged = load(family, folder)
    ids = torch.tensor([[5, 9, 14, 3, 7, 21, 2]])
    assert torch.equal(model(input_ids=ids).logits, merged(input_ids=ids).logits), folder
    print(f"{folder.name}: experts merged, same logits", file=sys.stderr)


def annotate(family: mf.Family, runner_results: dict) -> None:
    """Add the router section to the manifest make_family wrote."""
    import json

    path = REFERENCE / f"tiny-{family.name}.json"
    manifest = json.loads(path.read_text())
    cfg = load(family, mf.folder_of(family, family.layouts[0])).config
    manifest["generator"] = "tests/reference/make_moe.py"
    top_k = cfg.num_experts_per_tok
    manifest["router"] = dict(
        experts=getattr(cfg, "num_local_experts", None) or cfg.num_experts,
        top_k=top_k,
        norm_topk_prob=getattr(cfg, "norm_topk_prob", True),
        routed_layers=routed_layers(cfg),
        router_gain=ROUTER_GAIN,
        min_ranking_gap=runner_results["gap"],
        min_gap_asserted=MIN_GAP,
        what="per case and generation: router.logits, router.probs (softmax over all experts), "
        "router.chosen (expert numbers, best first, stored as float32) and router.weights (what "
        "each chosen expert's output is multiplied by), [routed layers, n, ·], caught at the "
        "TopKRouter modules and checked equal to output_router_logits",
    )
    write_json(path, manifest)


class NearTie(Exception):
    """A token's router ranks two experts within MIN_GAP of each other (or the float64 run
    chose other experts)."""


def make_checked(family: mf.Family, seed: int, gaps: list[float]) -> None:
    """make_families.make_family, every run's router ranking checked before it is stored."""
    original_put = mf.put_result

    def put(store, entry, key, ref, ref64, qk=True):
        top_k = ref["router.chosen"].shape[-1]
        gaps.append(ranking_gap(ref, top_k))
        if gaps[-1] <= MIN_GAP:
            raise NearTie(f"{key}: gap {gaps[-1]:.2e}")
        if ref64 is not None and not torch.equal(ref["router.chosen"], ref64["router.chosen"]):
            raise NearTie(f"{key}: float64 chose other experts")
        original_put(store, entry, key, ref, ref64, qk)

    mf.put_result = put
    try:
        mf.make_family(family, seed)
    finally:
        mf.put_result = original_put


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("families", nargs="*", help="names to make (default: all)")
    args = parser.parse_args()
    names = [f.name for f in FAMILIES]
    unknown = [n for n in args.families if n not in names]
    if unknown:
        parser.error(f"unknown families {unknown}; choose from {names}")
    mf.randomise = randomise
    mf.load = load
    mf.Runner = RouterRunner
    FIXTURES.mkdir(parents=True, exist_ok=True)
    for family in FAMILIES:
        family.config = eager_experts(family.config)
        if args.families and family.name not in args.families:
            continue
        # The first seed from the family's own whose routers rank every token without a
        # near-tie (in every case and generation; the float64 run choosing the same experts).
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
        annotate(family, dict(gap=min(gaps)))
        if family.name == "qwen3_moe":
            write_merged(family)


if __name__ == "__main__":
    main()
