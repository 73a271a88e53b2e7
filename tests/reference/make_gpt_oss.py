#!/usr/bin/env python3
"""A tiny random gpt-oss checkpoint (GptOssForCausalLM) and Hugging Face transformers' reference
outputs for it (eager attention, eager experts, float32), attention sinks and router decisions
included.

    python3 tests/reference/make_gpt_oss.py

Everything make_moe.py writes for a mixture-of-experts decoder (tests/fixtures/tiny-gpt_oss/ as
save_pretrained writes it, with a tokenizer; tests/reference/tiny-gpt_oss.{json,safetensors}:
attention at every layer and head, q/k, the last hidden state, logits, three greedy generations,
and every router's logits, probabilities, chosen experts and weights), through the same code,
plus per case and generation:

    <case>.sinks   [layers, heads, n]   each row's probability on the learned sink: the last
                                        column of the softmax transformers' eager attention takes
                                        over [scores | sink] before it drops that column

caught at the softmax call inside modeling_gpt_oss's eager_attention_forward, and checked to be
1 − the row's sum over the tokens. The q/k check recomputes every layer's attention in float64
from the stored q/k, the causal and sliding masks and the checkpoint's `self_attn.sinks`.

The model: 3 layers (sliding, full, sliding: transformers' default alternation) with a sliding
window of 4 tokens, shorter than every prompt; 4 query heads over 2 key/value heads of 16; YaRN
rotary embeddings (factor 4 over an original context of 12, beta_fast 8, beta_slow 1, truncate
false, as the released configs write it) so the ramp runs through the middle frequencies; 4
experts, top 2, of inner size 32, with `swiglu_limit` 1.5 (the released 7.0 is rarely reached
by random weights; 1.5 clamps a good share of the gate and up values, so the clamp is tested).
Sinks are drawn N(0.5, 1.5²) so that their share ranges from almost nothing to most of a row.
Weights come from numpy's PCG64 with a fixed seed (the first without a near-tie in any router
ranking, as make_moe.py picks it), so a re-run with the same versions rewrites every file byte
for byte.
"""

from __future__ import annotations

import math
import sys
import zlib
from pathlib import Path

import numpy as np
import safetensors.torch
import torch
from torch import nn
from transformers import GptOssConfig, GptOssForCausalLM
from transformers.models.gpt_oss import modeling_gpt_oss

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_families as mf  # noqa: E402
import make_moe as mm  # noqa: E402
import tiny_tokenizers as tt  # noqa: E402
from reflib import FIXTURES, REFERENCE, write_json  # noqa: E402

SINK_MEAN, SINK_STD = 0.5, 1.5
ROUTER_BIAS_STD = 0.5


def config(tok) -> GptOssConfig:
    cfg = GptOssConfig(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=32,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        num_local_experts=4,
        num_experts_per_tok=2,
        sliding_window=4,
        max_position_embeddings=48,
        rope_parameters=dict(
            rope_type="yarn",
            rope_theta=10000.0,
            factor=4.0,
            beta_fast=8.0,
            beta_slow=1.0,
            truncate=False,
            original_max_position_embeddings=12,
        ),
        rms_norm_eps=1e-5,
        swiglu_limit=1.5,
        tie_word_embeddings=False,
        attention_bias=True,
        **mf.special_ids(tok),
    )
    cfg._experts_implementation = "eager"
    return cfg


FAMILY = mf.Family(
    "gpt_oss",
    "decoder",
    GptOssForCausalLM,
    config,
    lambda f: tt.gpt2(f, 48),
    [mf.FULL_SAFE],
    notes=dict(
        experts="4 experts, top-2: the router (with a bias) takes the top 2 logits and "
        "softmaxes them; experts merged as mlp.experts.gate_up_proj [4, 64, 64] (gate and up "
        "interleaved) with gate_up_proj_bias, down_proj [4, 32, 64] with down_proj_bias; clamped "
        "SwiGLU with swiglu_alpha 1.702, swiglu_limit 1.5",
        sinks="self_attn.sinks [4] per layer, N(0.5, 1.5²): each row's attention over the tokens "
        "sums to 1 − its sink share (<case>.sinks)",
        layers="layer_types sliding, full, sliding; sliding_window 4",
        rope="yarn: rope_theta 10000, factor 4, original_max_position_embeddings 12, beta_fast 8, "
        "beta_slow 1, truncate false; cos/sin × (0.1·ln 4 + 1)",
    ),
)


@torch.no_grad()
def randomise(model: nn.Module, seed: int, gains: mf.Gains) -> None:
    """Every parameter in named_parameters order: norm weights 1 + 0.1·N; attention sinks
    N(SINK_MEAN, SINK_STD²); the router's weight N(0, ROUTER_GAIN²/hidden) and bias
    N(0, ROUTER_BIAS_STD²); merged expert matrices N(0, other²/fan_in) (fan_in: hidden for
    gate_up_proj [E, hidden, 2·inner], inner for down_proj [E, inner, hidden]) and their biases
    0.1·N; embeddings gains.embed·N; linear weights N(0, gain²/fan_in) (q/k: gains.qk) and their
    biases 0.1·N."""
    rng = np.random.default_rng(seed)

    def normal(shape, std, mean=0.0):
        return torch.from_numpy((mean + rng.standard_normal(tuple(shape)) * std).astype(np.float32))

    for name, param in model.named_parameters():
        module_name, _, leaf = name.rpartition(".")
        module = model.get_submodule(module_name)
        kind = type(module).__name__
        if mf.is_norm(module):
            value = 1.0 + normal(param.shape, 0.1)
        elif leaf == "sinks":
            value = normal(param.shape, SINK_STD, SINK_MEAN)
        elif kind.endswith("TopKRouter"):
            if leaf == "weight":
                value = normal(param.shape, mm.ROUTER_GAIN / math.sqrt(param.shape[1]))
            else:
                value = normal(param.shape, ROUTER_BIAS_STD)
        elif kind == "GptOssExperts":
            if leaf.endswith("_bias"):
                value = normal(param.shape, 0.1)
            else:
                value = normal(param.shape, gains.other / math.sqrt(param.shape[1]))
        elif isinstance(module, nn.Embedding):
            value = normal(param.shape, gains.embed)
        elif leaf == "bias":
            value = normal(param.shape, 0.1)
        elif param.dim() == 2:
            gain = gains.qk if module_name.rsplit(".", 1)[-1] in mf.QK_NAMES else gains.other
            value = normal(param.shape, gain / math.sqrt(param.shape[1]))
        else:
            raise ValueError(f"no rule for {name} {tuple(param.shape)} in {kind}")
        param.copy_(value)


class SoftmaxCatcher:
    """Stands in for `torch.nn.functional` inside modeling_gpt_oss while a forward runs: every
    softmax call there (only eager_attention_forward's over [scores | sink]) is recorded."""

    def __init__(self):
        self.caught: list[torch.Tensor] = []

    def __getattr__(self, name):
        return getattr(torch.nn.functional, name)

    def softmax(self, *args, **kwargs):
        out = torch.nn.functional.softmax(*args, **kwargs)
        self.caught.append(out.detach().clone())
        return out


class SinkRunner(mm.RouterRunner):
    """make_moe's RouterRunner, which also keeps each layer's sink column."""

    @torch.no_grad()
    def run(self, ids, type_ids=None, decoder_ids=None) -> dict:
        catcher = SoftmaxCatcher()
        original = modeling_gpt_oss.F
        modeling_gpt_oss.F = catcher
        try:
            result = super().run(ids, type_ids, decoder_ids)
        finally:
            modeling_gpt_oss.F = original
        layers = self.model.config.num_hidden_layers
        # The attention forward comes first (the router's own forward follows it).
        probs = catcher.caught[:layers]
        sinks = torch.stack([p[0, :, :, -1] for p in probs])  # [layers, heads, n]
        attn = result["self.attentions"]
        assert torch.equal(torch.stack([p[0, :, :, :-1] for p in probs]), attn), "caught softmax"
        gap = float((1.0 - attn.double().sum(-1) - sinks.double()).abs().max())
        assert gap < 1e-5, f"sink column is not 1 − the row sum: {gap:.2e}"
        result["sinks"] = sinks
        return result


def check_qk(family: mf.Family, ref: dict, cfg) -> None:
    """softmax([q·kᵀ·scaling + causal/window mask | sink]) in float64 from the stored q/k and the
    checkpoint's sinks must give the stored attention and sink columns."""
    state = safetensors.torch.load_file(mf.folder_of(family, family.layouts[0]) / "model.safetensors")
    windows = mf.layer_windows(cfg)
    q, k = ref["self.query"].double(), ref["self.key"].double()
    k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
    scores = q @ k.transpose(-1, -2) * ref["self.scaling"]
    n = scores.shape[-1]
    scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    for layer, w in enumerate(windows):
        if w is not None:
            far = torch.ones(n, n, dtype=torch.bool).tril(-w)
            scores[layer] = scores[layer].masked_fill(far, float("-inf"))
    sinks = torch.stack(
        [state[f"model.layers.{i}.self_attn.sinks"].double() for i in range(cfg.num_hidden_layers)]
    )
    column = sinks[:, :, None, None].expand(-1, -1, n, 1)
    probs = torch.cat([scores, column], dim=-1).softmax(-1)
    assert mf.max_abs(probs[..., :-1], ref["self.attentions"]) < 1e-5, "q/k attention"
    assert mf.max_abs(probs[..., -1], ref["sinks"]) < 1e-5, "q/k sinks"


def annotate_sinks() -> None:
    import json

    path = REFERENCE / "tiny-gpt_oss.json"
    manifest = json.loads(path.read_text())
    manifest["generator"] = "tests/reference/make_gpt_oss.py"
    manifest["sinks"] = dict(
        what="per case and generation: <case>.sinks [layers, heads, n], each row's softmax share "
        "on the learned sink (the column transformers' eager attention concatenates to the scores "
        "and drops after the softmax), caught at that softmax; every row of <case>.attentions sums "
        "to 1 − it",
        sink_mean=SINK_MEAN,
        sink_std=SINK_STD,
    )
    write_json(path, manifest)


def main() -> None:
    mf.randomise = randomise
    mf.load = mm.load
    mf.Runner = SinkRunner
    mf.check_qk = check_qk
    FIXTURES.mkdir(parents=True, exist_ok=True)
    seed = mm.SEED + zlib.crc32(FAMILY.name.encode())
    for _attempt in range(40):
        mf.setup_determinism(seed)
        gaps: list[float] = []
        try:
            mm.make_checked(FAMILY, seed, gaps)
            break
        except mm.NearTie as tie:
            print(f"gpt_oss: seed {seed} has a near-tie ({tie}); next seed", file=sys.stderr)
            seed += 1
    else:
        raise SystemExit("gpt_oss: no seed without near-ties in 40")
    mm.annotate(FAMILY, dict(gap=min(gaps)))
    annotate_sinks()


if __name__ == "__main__":
    main()
