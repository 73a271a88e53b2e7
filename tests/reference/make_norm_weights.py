#!/usr/bin/env python3
"""Reference value-weighted and norm-aware attention (Kobayashi et al. 2020, 2021), from
transformers with PyTorch hooks, for tests/suite/norm_weights.rs.

    .cache/venv-ref/bin/python tests/reference/make_norm_weights.py

Independent of attnviz's formulas: each contribution vector is built here in full from the
module's own tensors (the values from the attention module's input through its value map, the
output projection's weight slice per head, the LayerNorm's input caught by a pre-hook) and its
norm taken directly, where attnviz expands the square of the diagonal term.

For every layer l, head h, query i and key j (α from output_attentions):
  f_h(x_j)      = (x_j W_V^h + b_V^h) W_O^h             (x: the attention module's input)
  value-weighted  ‖α_ij f_h(x_j)‖
  norm-aware      ‖g_i(α_ij f_h(x_j) + δ_ij x_i)‖
    post-norm (BERT, MiniLM): g_i(v) = γ ⊙ (v − mean v) / σ_i, σ_i the spread of the
      LayerNorm's real input (caught by a pre-hook), x_i the layer's input;
    pre-norm (GPT-2, Llama, SmolLM2): g = identity, x_i the residual stream entering the layer.

Models: the tiny BERT, GPT-2 and Llama (grouped-query attention, RoPE) fixtures, and real
all-MiniLM-L6-v2 and SmolLM2-135M-Instruct (GGUF, dequantised by transformers) from .cache/models.
Writes tests/reference/norm_weights.json (real models: three layers each, to keep it small).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from transformers import AutoModel, AutoModelForCausalLM, AutoTokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reflib import FIXTURES, REFERENCE, REPO, setup_determinism, versions, write_json  # noqa: E402

SMOL_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"

MODELS = [
    # name, folder, kind, text, layers kept (None: all)
    ("tiny-bert", FIXTURES / "tiny-bert", "bert", "the cat sat on the mat", None),
    ("tiny-gpt2", FIXTURES / "tiny-gpt2", "gpt2", "the cat sat on the mat", None),
    ("tiny-llama", FIXTURES / "tiny-llama", "llama", "the cat sat on the mat", None),
    ("minilm", REPO / ".cache/models/all-MiniLM-L6-v2", "bert", "The cat sat on the mat.", [0, 3, 5]),
    ("smollm2", REPO / ".cache/models/smollm2", "llama", "The cat sat on the mat.", [0, 15, 29]),
]


def load(folder: Path, kind: str):
    extra = dict(gguf_file=SMOL_GGUF) if (folder / SMOL_GGUF).exists() else {}
    tok = AutoTokenizer.from_pretrained(folder, **extra)
    cls = AutoModel if kind == "bert" else AutoModelForCausalLM
    model = cls.from_pretrained(folder, attn_implementation="eager", dtype=torch.float32, **extra).eval()
    return tok, model


def layers_of(model, kind: str):
    if kind == "bert":
        return model.encoder.layer
    if kind == "gpt2":
        return model.transformer.h
    return model.model.layers


class Catch:
    """Per layer: the layer's input (residual), the attention module's input, and (post-norm)
    the input of the LayerNorm after attention."""

    def __init__(self, model, kind: str):
        self.kind = kind
        self.layers = layers_of(model, kind)
        self.seen: list[dict] = [dict() for _ in self.layers]
        for l, layer in enumerate(self.layers):
            layer.register_forward_pre_hook(self.hook(l, "residual"), with_kwargs=True)
            attn = {"bert": lambda m: m.attention.self, "gpt2": lambda m: m.attn, "llama": lambda m: m.self_attn}[kind](layer)
            attn.register_forward_pre_hook(self.hook(l, "attn_input"), with_kwargs=True)
            if kind == "bert":
                layer.attention.output.LayerNorm.register_forward_pre_hook(self.hook(l, "norm_input"), with_kwargs=True)

    def hook(self, l: int, what: str):
        def f(_module, args, kwargs):
            x = args[0] if args else kwargs["hidden_states"]
            self.seen[l][what] = x[0].detach().clone()

        return f


def head_values(layer, kind: str, x: torch.Tensor, heads: int, kv_heads: int, d: int) -> torch.Tensor:
    """f_h(x_j) for every head: [heads, n, hidden]."""
    if kind == "bert":
        v = layer.attention.self.value(x)
        w_o = layer.attention.output.dense.weight  # [out, in]
    elif kind == "gpt2":
        hidden = x.shape[-1]
        w, b = layer.attn.c_attn.weight, layer.attn.c_attn.bias  # Conv1D [in, 3·hidden]
        v = x @ w[:, 2 * hidden:] + b[2 * hidden:]
        w_o = layer.attn.c_proj.weight.T  # Conv1D [in, out] → [out, in]
    else:
        v = layer.self_attn.v_proj(x)
        w_o = layer.self_attn.o_proj.weight
    group = heads // kv_heads
    out = []
    for h in range(heads):
        kv = h // group
        v_h = v[:, kv * d:(kv + 1) * d]
        out.append(v_h @ w_o[:, h * d:(h + 1) * d].T)
    return torch.stack(out)


def norm_map(layer, kind: str):
    """γ ⊙ centring of the LayerNorm after attention, and its ε (post-norm); None for pre-norm."""
    if kind != "bert":
        return None
    ln = layer.attention.output.LayerNorm
    return ln.weight, ln.eps


@torch.no_grad()
def reference(name: str, folder: Path, kind: str, text: str, keep) -> dict:
    tok, model = load(folder, kind)
    cfg = model.config
    heads = cfg.num_attention_heads
    kv_heads = getattr(cfg, "num_key_value_heads", None) or heads
    d = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    catch = Catch(model, kind)
    enc = tok(text, return_tensors="pt")
    ids = enc["input_ids"]
    out = model(input_ids=ids, attention_mask=torch.ones_like(ids), output_attentions=True)
    n = ids.shape[1]
    keep = keep if keep is not None else list(range(len(catch.layers)))
    value_weighted, norm_aware = [], []
    for l in keep:
        layer, seen = catch.layers[l], catch.seen[l]
        alpha = out.attentions[l][0].double()  # [heads, n, n]
        f = head_values(layer, kind, seen["attn_input"], heads, kv_heads, d).double()  # [heads, n, hidden]
        x = seen["residual"].double()
        vw = alpha * f.norm(dim=-1)[:, None, :]
        g = norm_map(layer, kind)
        na = torch.zeros_like(vw)
        for h in range(heads):
            for i in range(n):
                for j in range(n):
                    c = alpha[h, i, j] * f[h, j]
                    if i == j:
                        c = c + x[i]
                    if g is not None:
                        gamma, eps = g
                        z = seen["norm_input"][i].double()
                        sigma = torch.sqrt(z.var(unbiased=False) + eps)
                        c = gamma.double() * (c - c.mean()) / sigma
                    na[h, i, j] = c.norm()
        value_weighted.append(vw.tolist())
        norm_aware.append(na.tolist())
    return dict(
        name=name,
        folder=str(folder.relative_to(REPO)),
        text=text,
        input_ids=ids[0].tolist(),
        layers=keep,
        heads=heads,
        kv_heads=kv_heads,
        post_norm=kind == "bert",
        value_weighted=value_weighted,
        norm_aware=norm_aware,
    )


def main() -> None:
    setup_determinism(20261202)
    cases = [reference(*m) for m in MODELS]
    write_json(
        REFERENCE / "norm_weights.json",
        dict(
            versions=versions(),
            made_by="tests/reference/make_norm_weights.py",
            method="transformers eager float32 forward with PyTorch hooks; contributions built in float64",
            cases=cases,
        ),
    )
    for c in cases:
        print(c["name"], "n =", len(c["input_ids"]), "layers", c["layers"])


if __name__ == "__main__":
    main()
