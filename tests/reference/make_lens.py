#!/usr/bin/env python3
"""Reference logit lens (nostalgebraist 2020) from transformers with PyTorch hooks, for
tests/suite/lens.rs.

    .cache/venv-ref/bin/python tests/reference/make_lens.py

Independent of attnviz: the residual stream is caught by hooks on transformers' own modules
(the input of the first decoder layer: the embeddings, as the model scaled them; the output of
every decoder layer), then put through the model's own final norm (`ln_f`, `norm`) and head
(`lm_head`), with Gemma 2's soft cap on the final logits, and a softmax in float64. The last
stage equals the model's logits (checked here).

Models: the tiny GPT-2, Llama (grouped-query attention, RoPE, separate head) and Gemma 2 (soft
cap, tied head) fixtures, and real SmolLM2-135M-Instruct (GGUF, dequantised by transformers)
from .cache/models. Writes tests/reference/lens.json: per stage and position the TOP most
probable token ids and their probabilities.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reflib import FIXTURES, REFERENCE, REPO, setup_determinism, versions, write_json  # noqa: E402

SMOL_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
TOP = 10

MODELS = [
    ("tiny-gpt2", FIXTURES / "tiny-gpt2", "the cat sat on the mat"),
    ("tiny-llama", FIXTURES / "tiny-llama", "the cat sat on the mat"),
    ("tiny-gemma2", FIXTURES / "tiny-gemma2", "the cat sat on the mat"),
    ("smollm2", REPO / ".cache/models/smollm2", "The capital of France is"),
]


def load(folder: Path):
    extra = dict(gguf_file=SMOL_GGUF) if (folder / SMOL_GGUF).exists() else {}
    tok = AutoTokenizer.from_pretrained(folder, **extra)
    model = AutoModelForCausalLM.from_pretrained(
        folder, attn_implementation="eager", dtype=torch.float32, **extra
    ).eval()
    return tok, model


def parts(model):
    """(decoder layers, final norm, head)."""
    if hasattr(model, "transformer"):  # GPT-2
        return model.transformer.h, model.transformer.ln_f, model.lm_head
    return model.model.layers, model.model.norm, model.lm_head


@torch.no_grad()
def reference(name: str, folder: Path, text: str) -> dict:
    tok, model = load(folder)
    layers, norm, head = parts(model)
    stages: list[torch.Tensor] = []

    def before_first(_m, args, kwargs):
        stages.append((args[0] if args else kwargs["hidden_states"])[0].detach().clone())

    def after(_m, _args, output):
        out = output[0] if isinstance(output, tuple) else output
        stages.append(out[0].detach().clone())

    layers[0].register_forward_pre_hook(before_first, with_kwargs=True)
    for layer in layers:
        layer.register_forward_hook(after)
    ids = tok(text, return_tensors="pt")["input_ids"]
    out = model(input_ids=ids, attention_mask=torch.ones_like(ids))
    assert len(stages) == len(layers) + 1
    cap = getattr(model.config, "final_logit_softcapping", None)
    top_ids, top_probs = [], []
    for s, h in enumerate(stages):
        logits = head(norm(h[None]))[0]
        if cap:
            logits = torch.tanh(logits / cap) * cap
        if s == len(layers):
            assert torch.allclose(logits, out.logits[0], atol=1e-5), "last stage ≠ the model's logits"
        probs = torch.softmax(logits.double(), dim=-1)
        p, i = probs.topk(TOP, dim=-1)
        top_ids.append(i.tolist())
        top_probs.append(p.tolist())
    return dict(
        name=name,
        folder=str(folder.relative_to(REPO)),
        text=text,
        input_ids=ids[0].tolist(),
        stages=len(stages),
        top_ids=top_ids,
        top_probs=top_probs,
        top1_text=[[tok.decode([row[0]]) for row in stage] for stage in top_ids],
    )


def attn_out_proj(layer):
    """The attention block's output projection and whether it is GPT-2's Conv1D ([in, out])."""
    if hasattr(layer, "attn"):
        return layer.attn.c_proj, True
    return layer.self_attn.o_proj, False


def head_share(proj, conv1d: bool, x_h: torch.Tensor, h: int, d: int) -> torch.Tensor:
    """Head h's share of the output projection for its slice x_h of the projection's input."""
    if conv1d:
        return x_h @ proj.weight[h * d:(h + 1) * d, :]
    return x_h @ proj.weight[:, h * d:(h + 1) * d].T


def frozen_norm(norm, residual: torch.Tensor, part: torch.Tensor) -> torch.Tensor:
    """The final norm as a linear map frozen at `residual`: γ ⊙ centre(part) / σ(residual)."""
    if isinstance(norm, torch.nn.LayerNorm):
        sigma = torch.sqrt(residual.var(unbiased=False) + norm.eps)
        return norm.weight * (part - part.mean()) / sigma
    eps = getattr(norm, "variance_epsilon", None) or getattr(norm, "eps")
    sigma = torch.sqrt(residual.pow(2).mean() + eps)
    return norm.weight * part / sigma


@torch.no_grad()
def attribution(name: str, folder: Path, text: str) -> dict:
    """Per-head direct logit attribution at the last position, and head ablation (zero and mean
    over the positions) by PyTorch hooks on the output projections' inputs."""
    tok, model = load(folder)
    layers, norm, head = parts(model)
    cfg = model.config
    heads = cfg.num_attention_heads
    d = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    ids = tok(text, return_tensors="pt")["input_ids"]
    n = ids.shape[1]
    seen: dict[int, torch.Tensor] = {}
    last_out: list[torch.Tensor] = []
    hooks = []
    for l, layer in enumerate(layers):
        proj, _ = attn_out_proj(layer)

        def catch(_m, args, l=l):
            seen[l] = args[0][0].detach().clone()

        hooks.append(proj.register_forward_pre_hook(catch))
    hooks.append(layers[-1].register_forward_hook(
        lambda _m, _a, o: last_out.append((o[0] if isinstance(o, tuple) else o)[0, -1].detach().clone())))
    out = model(input_ids=ids, attention_mask=torch.ones_like(ids))
    for h in hooks:
        h.remove()
    logits = out.logits[0, -1]
    order = torch.argsort(logits, descending=True)
    target, contrast = int(order[0]), int(order[1])
    residual = last_out[0].double()
    w_u = head.weight.double()  # [vocab, hidden]
    cap = getattr(cfg, "final_logit_softcapping", None)
    per_head, per_head_diff = [], []
    for l, layer in enumerate(layers):
        proj, conv1d = attn_out_proj(layer)
        row_t, row_d = [], []
        for h in range(heads):
            c = head_share(proj, conv1d, seen[l][-1, h * d:(h + 1) * d], h, d).double()
            nc = frozen_norm(norm, residual, c)
            row_t.append(float(nc @ w_u[target]))
            row_d.append(float(nc @ (w_u[target] - w_u[contrast])))
        per_head.append(row_t)
        per_head_diff.append(row_d)
    # Pre-cap logit of the whole residual (the model's logits are capped after).
    full = head(norm(last_out[0][None, None]))[0, 0]
    pre_cap_logit = float(full[target])

    def ablated(l: int, h: int, mean: bool) -> float:
        proj, _ = attn_out_proj(layers[l])

        def edit(_m, args):
            x = args[0].clone()
            x[0, :, h * d:(h + 1) * d] = x[0, :, h * d:(h + 1) * d].mean(dim=0) if mean else 0.0
            return (x,)

        hook = proj.register_forward_pre_hook(edit)
        lp = torch.log_softmax(model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits[0, -1].double(), -1)
        hook.remove()
        return float(lp[target])

    base = float(torch.log_softmax(logits.double(), -1)[target])
    zero = [[ablated(l, h, False) - base for h in range(heads)] for l in range(len(layers))]
    mean = [[ablated(l, h, True) - base for h in range(heads)] for l in range(len(layers))]
    return dict(
        name=name,
        text=text,
        input_ids=ids[0].tolist(),
        target=target,
        contrast=contrast,
        softcap=cap,
        per_head=per_head,
        per_head_diff=per_head_diff,
        logit=pre_cap_logit,
        base_log_prob=base,
        ablate_zero=zero,
        ablate_mean=mean,
    )


ATTRIBUTION = [
    ("tiny-gpt2", FIXTURES / "tiny-gpt2", "the cat sat on the mat"),
    ("tiny-llama", FIXTURES / "tiny-llama", "the cat sat on the mat"),
    ("smollm2", REPO / ".cache/models/smollm2", "The capital of France is"),
]


def main() -> None:
    setup_determinism(20261202)
    cases = [reference(*m) for m in MODELS]
    attributions = [attribution(*m) for m in ATTRIBUTION]
    write_json(
        REFERENCE / "lens.json",
        dict(
            versions=versions(),
            made_by="tests/reference/make_lens.py",
            method="transformers eager float32 forward; residual stream from hooks on the decoder "
            "layers, through the model's final norm and lm_head (and final soft cap); softmax in float64",
            top=TOP,
            cases=cases,
            attribution_method="pre-hooks on each attention block's output projection catch its input; "
            "head h's share is its slice times W_O's columns of h, through the final norm frozen at the "
            "last layer's real output (1/σ of the whole residual), dotted with lm_head's row of the target "
            "(the model's own top token; contrast: its second); ablation edits that input (zero, or the "
            "mean over positions) and reruns the model",
            attributions=attributions,
        ),
    )
    for c in cases:
        print(c["name"], "n =", len(c["input_ids"]), "stages", c["stages"], "last top1", c["top1_text"][-1])
    for a in attributions:
        print(a["name"], "target", a["target"], "logit", a["logit"], "Σ heads", sum(map(sum, a["per_head"])))


if __name__ == "__main__":
    main()
