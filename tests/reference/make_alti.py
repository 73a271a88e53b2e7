#!/usr/bin/env python3
"""Reference ALTI (Ferrando et al. 2022, "Measuring the Mixing of Contextual Information in the
Transformer") from transformers with PyTorch hooks, for tests/suite/alti.rs.

    .cache/venv-ref/bin/python tests/reference/make_alti.py

Independent of attnviz: every per-token vector T_i(x_j) is built here in full, in float64,
from the modules' own tensors (the attention module's input through its value map, the output
projection's weight slice per head, α from output_attentions), and y_i is the attention
block's real output caught by a hook (post-norm: the LayerNorm after attention; pre-norm: the
layer's input plus the attention module's output), not the sum of the parts.

  f_h(x_j) = (x_j W_V^h + b_V^h) W_O^h               (x: the attention module's input)
  post-norm (BERT, MiniLM): T_i(x_j) = γ ⊙ centre(Σ_h α_ij^h f_h(x_j) + δ_ij r_i) / σ_i,
      r_i the layer's input, σ_i the spread of the LayerNorm's real input (pre-hook);
  pre-norm (GPT-2, Llama with grouped-query attention): T_i(x_j) = Σ_h α_ij^h f_h(x_j) + δ_ij r_i,
      r_i the residual stream entering the layer;
  c_ij = max(0, ‖y_i‖₁ − ‖y_i − T_i(x_j)‖₁), each row divided by its sum;
  aggregated: A_1 = C_1, A_l = C_l A_{l−1}.

Models: the tiny BERT, GPT-2 and Llama fixtures, and real all-MiniLM-L6-v2 and SmolLM2-135M-Instruct
(GGUF, dequantised by transformers) from .cache/models.
Writes tests/reference/alti.json.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModel, AutoModelForCausalLM, AutoTokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reflib import FIXTURES, REFERENCE, REPO, setup_determinism, versions, write_json  # noqa: E402

MODELS = [
    ("tiny-bert", FIXTURES / "tiny-bert", "bert", "the cat sat on the mat"),
    ("tiny-gpt2", FIXTURES / "tiny-gpt2", "gpt2", "the cat sat on the mat"),
    ("tiny-llama", FIXTURES / "tiny-llama", "llama", "the cat sat on the mat"),
    ("minilm", REPO / ".cache/models/all-MiniLM-L6-v2", "bert", "The cat sat on the mat."),
    ("smollm2", REPO / ".cache/models/smollm2", "llama", "The cat sat on the mat."),
]
SMOL_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def layers_of(model, kind):
    return {"bert": lambda: model.encoder.layer, "gpt2": lambda: model.transformer.h, "llama": lambda: model.model.layers}[kind]()


def attn_of(layer, kind):
    return {"bert": lambda: layer.attention.self, "gpt2": lambda: layer.attn, "llama": lambda: layer.self_attn}[kind]()


def first(args, kwargs):
    return args[0] if args else kwargs["hidden_states"]


@torch.no_grad()
def reference(name, folder, kind, text):
    extra = dict(gguf_file=SMOL_GGUF) if (folder / SMOL_GGUF).exists() else {}
    tok = AutoTokenizer.from_pretrained(folder, **extra)
    cls = AutoModel if kind == "bert" else AutoModelForCausalLM
    model = cls.from_pretrained(folder, attn_implementation="eager", dtype=torch.float32, **extra).eval()
    cfg = model.config
    heads = cfg.num_attention_heads
    kv_heads = getattr(cfg, "num_key_value_heads", None) or heads
    d = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    layers = layers_of(model, kind)
    seen = [dict() for _ in layers]

    def keep(l, what, output=False):
        if output:
            def f(_m, _a, out):
                o = out[0] if isinstance(out, tuple) else out
                seen[l][what] = o[0].detach().double().numpy()
            return f

        def g(_m, args, kwargs):
            seen[l][what] = first(args, kwargs)[0].detach().double().numpy()
        return g

    for l, layer in enumerate(layers):
        layer.register_forward_pre_hook(keep(l, "residual"), with_kwargs=True)
        attn = attn_of(layer, kind)
        attn.register_forward_pre_hook(keep(l, "attn_input"), with_kwargs=True)
        if kind == "bert":
            ln = layer.attention.output.LayerNorm
            ln.register_forward_pre_hook(keep(l, "norm_input"), with_kwargs=True)
            ln.register_forward_hook(keep(l, "y", output=True))
        else:
            attn.register_forward_hook(keep(l, "attn_output", output=True))
    ids = tok(text, return_tensors="pt")["input_ids"]
    out = model(input_ids=ids, attention_mask=torch.ones_like(ids), output_attentions=True)
    n = ids.shape[1]
    per_layer, aggregated = [], []
    for l, layer in enumerate(layers):
        s = seen[l]
        alpha = out.attentions[l][0].double().numpy()  # [heads, n, n]
        x = s["attn_input"]
        r = s["residual"]
        if kind == "bert":
            v = layer.attention.self.value(torch.from_numpy(x).float()).double().numpy()
            w_o = layer.attention.output.dense.weight.double().numpy()  # [out, in]
        elif kind == "gpt2":
            hid = x.shape[-1]
            w = layer.attn.c_attn.weight.double().numpy()
            b = layer.attn.c_attn.bias.double().numpy()
            v = x @ w[:, 2 * hid:] + b[2 * hid:]
            w_o = layer.attn.c_proj.weight.double().numpy().T
        else:
            v = layer.self_attn.v_proj(torch.from_numpy(x).float()).double().numpy()
            w_o = layer.self_attn.o_proj.weight.double().numpy()
        group = heads // kv_heads
        f = np.stack([v[:, (h // group) * d:(h // group + 1) * d] @ w_o[:, h * d:(h + 1) * d].T for h in range(heads)])
        # T[i, j] = Σ_h α_ij^h f_h(x_j) (+ r_i on the diagonal), then the frozen norm.
        t = np.einsum("hij,hjk->ijk", alpha, f)
        t[np.arange(n), np.arange(n)] += r
        if kind == "bert":
            ln = layer.attention.output.LayerNorm
            z = s["norm_input"]
            sigma = np.sqrt(z.var(axis=-1) + ln.eps)  # [n]
            gamma = ln.weight.double().numpy()
            t = gamma * (t - t.mean(axis=-1, keepdims=True)) / sigma[:, None, None]
            y = s["y"]
        else:
            y = r + s["attn_output"]
        dist = np.abs(y[:, None, :] - t).sum(-1)
        c = np.maximum(0.0, np.abs(y).sum(-1)[:, None] - dist)
        c = c / c.sum(-1, keepdims=True)
        per_layer.append(c)
        aggregated.append(c if not aggregated else c @ aggregated[-1])
    return dict(
        name=name,
        folder=str(folder.relative_to(REPO)),
        text=text,
        input_ids=ids[0].tolist(),
        heads=heads,
        kv_heads=kv_heads,
        post_norm=kind == "bert",
        per_layer=[m.tolist() for m in per_layer],
        aggregated=[m.tolist() for m in aggregated],
    )


def main():
    setup_determinism(20261203)
    cases = [reference(*m) for m in MODELS]
    write_json(
        REFERENCE / "alti.json",
        dict(
            versions=versions(),
            made_by="tests/reference/make_alti.py",
            method="transformers eager float32 forward with PyTorch hooks; ALTI built in float64 numpy",
            cases=cases,
        ),
    )
    for c in cases:
        print(c["name"], "n =", len(c["input_ids"]), "layers", len(c["per_layer"]), "kv", c["kv_heads"], "/", c["heads"])


if __name__ == "__main__":
    main()
