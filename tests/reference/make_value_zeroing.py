#!/usr/bin/env python3
"""Reference value zeroing (Mohebbi, Zuidema, Chrupała and Alishahi 2023, "Quantifying Context
Mixing in Transformers") from transformers with PyTorch hooks, for tests/suite/value_zeroing.rs.

    .cache/venv-ref/bin/python tests/reference/make_value_zeroing.py

Independent of attnviz: for each layer l and token j, the whole model runs again with a forward
hook on layer l's value projection that sets token j's row of its output to 0 (every head; the
query and key projections untouched; GPT-2's fused c_attn: its value third), and a forward hook
on layer l itself keeps its output x̃^{¬j}. The real output x comes from a plain run, hooked the
same way. Then, in float64 numpy:

  d_ij = 1 − cos(x̃_i^{¬j}, x_i)      (the layer's whole output, after its feed-forward block)
  C_ij = d_ij / Σ_k d_ik              (as the paper's code normalises)
  aggregated: A_1 = C_1, A_l = C_l A_{l−1}   (rollout without an added identity)

Nothing is set to zero by hand: in a causal model the rows before j do not move (d ≈ 0).
Models: the tiny BERT, GPT-2 and Llama (grouped-query) fixtures, and real all-MiniLM-L6-v2 and
SmolLM2-135M-Instruct (GGUF, dequantised by transformers) from .cache/models.
Writes tests/reference/value_zeroing.json.
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


def value_map(layer, kind):
    """The module whose output holds the value vectors, and where in its last axis they are."""
    if kind == "bert":
        return layer.attention.self.value, lambda width: slice(0, width)
    if kind == "gpt2":
        return layer.attn.c_attn, lambda width: slice(2 * width // 3, width)
    return layer.self_attn.v_proj, lambda width: slice(0, width)


@torch.no_grad()
def reference(name, folder, kind, text):
    extra = dict(gguf_file=SMOL_GGUF) if (folder / SMOL_GGUF).exists() else {}
    tok = AutoTokenizer.from_pretrained(folder, **extra)
    cls = AutoModel if kind == "bert" else AutoModelForCausalLM
    model = cls.from_pretrained(folder, attn_implementation="eager", dtype=torch.float32, **extra).eval()
    layers = layers_of(model, kind)
    ids = tok(text, return_tensors="pt")["input_ids"]
    mask = torch.ones_like(ids)
    n = ids.shape[1]
    kept = {}

    def keep(l):
        def f(_m, _a, out):
            o = out[0] if isinstance(out, tuple) else out
            kept[l] = o[0].detach().double().numpy()
        return f

    for l, layer in enumerate(layers):
        layer.register_forward_hook(keep(l))
    model(input_ids=ids, attention_mask=mask)
    real = dict(kept)
    per_layer, aggregated = [], []
    for l, layer in enumerate(layers):
        module, cols = value_map(layer, kind)
        d = np.zeros((n, n))
        for j in range(n):
            def zero(_m, _a, out, j=j):
                out = out.clone()
                out[0, j, cols(out.shape[-1])] = 0.0
                return out
            handle = module.register_forward_hook(zero)
            model(input_ids=ids, attention_mask=mask)
            handle.remove()
            x, y = kept[l], real[l]
            cos = (x * y).sum(-1) / (np.linalg.norm(x, axis=-1) * np.linalg.norm(y, axis=-1))
            d[:, j] = 1.0 - cos
        c = d / d.sum(-1, keepdims=True)
        per_layer.append(c)
        aggregated.append(c if not aggregated else c @ aggregated[-1])
    return dict(
        name=name,
        folder=str(folder.relative_to(REPO)),
        text=text,
        input_ids=ids[0].tolist(),
        causal=kind != "bert",
        per_layer=[m.tolist() for m in per_layer],
        aggregated=[m.tolist() for m in aggregated],
    )


def main():
    setup_determinism(20261203)
    cases = [reference(*m) for m in MODELS]
    write_json(
        REFERENCE / "value_zeroing.json",
        dict(
            versions=versions(),
            made_by="tests/reference/make_value_zeroing.py",
            method="transformers eager float32 forward per (layer, token) with a hook zeroing the "
            "value projection's row; distances, normalisation and rollout in float64 numpy",
            cases=cases,
        ),
    )
    for c in cases:
        print(c["name"], "n =", len(c["input_ids"]), "layers", len(c["per_layer"]))


if __name__ == "__main__":
    main()
