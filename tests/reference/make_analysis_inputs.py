#!/usr/bin/env python3
"""Write the committed input attentions for the analysis reference tests.

Runs all-MiniLM-L6-v2 through Hugging Face transformers (eager attention, output_attentions=True)
on a few short inputs chosen to exercise the analyses: a sentence pair, words split into many
word pieces, and punctuation. Writes

    tests/reference/analysis/inputs.json          tokens, ids, segments, special mask, word ids
    tests/reference/analysis/inputs.safetensors   "<case>" -> f32 [layers, heads, n, n]

plus one small synthetic case (seeded numpy) with a row whose mass lies entirely on [CLS]/[SEP],
for the special-token exclusion edge case. `analysis_reference.py` then computes the expected
outputs from these files with numpy alone.

Usage: python3 tests/reference/make_analysis_inputs.py [MODEL_DIR]
MODEL_DIR defaults to $ATTNVIZ_MINILM_DIR, else <repo>/.cache/models/all-MiniLM-L6-v2.
Needs torch, transformers, safetensors, numpy.
"""

import json
import os
import sys
from pathlib import Path

import numpy as np
import torch
from safetensors.numpy import save_file
from transformers import AutoModel, AutoTokenizer

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
OUT = HERE / "analysis"

CASES = [
    ("single", "The unbelievably quick brown fox jumps over the lazy dog, doesn't it?", None),
    ("pair", "Tokenization splits uncommonly long words into pieces.", "Does it, really?"),
    ("long_word", "Pneumonoultramicroscopicsilicovolcanoconiosis: a word, isn't it!", None),
]


def model_dir():
    if len(sys.argv) > 1:
        return Path(sys.argv[1])
    env = os.environ.get("ATTNVIZ_MINILM_DIR")
    if env:
        return Path(env)
    return REPO / ".cache" / "models" / "all-MiniLM-L6-v2"


def synthetic_case():
    """A tiny random attention: 2 layers x 3 heads over 7 tokens, rows drawn from a Dirichlet.

    In layer 1, head 2, the row of token 2 puts all its mass on [CLS] and [SEP] (exact zeros
    elsewhere), so excluding special tokens leaves that row with nothing to renormalise.
    """
    rng = np.random.default_rng(20190611)
    tokens = ["[CLS]", "sun", "##light", ",", "ok", "[SEP]", "[SEP]"]
    n = len(tokens)
    att = rng.dirichlet(np.full(n, 0.7), size=(2, 3, n)).astype(np.float32)
    row = np.zeros(n, dtype=np.float32)
    row[0], row[5], row[6] = 0.5, 0.25, 0.25
    att[1, 2, 2] = row
    meta = {
        "name": "synthetic",
        "model": {"id": "synthetic", "layers": 2, "heads": 3, "hidden_size": 12, "head_dim": 4},
        "text": "sunlight, ok",
        "pair": None,
        "tokens": tokens,
        "input_ids": list(range(n)),
        "token_type_ids": [0, 0, 0, 0, 0, 0, 1],
        "special": [True, False, False, False, False, True, True],
        "word_ids": [None, 0, 0, 1, 2, None, None],
    }
    return meta, att


def main():
    mdir = model_dir()
    tok = AutoTokenizer.from_pretrained(mdir)
    model = AutoModel.from_pretrained(mdir, attn_implementation="eager")
    model.eval()
    cfg = model.config
    cases, tensors = [], {}
    for name, text, pair in CASES:
        enc = tok(text, pair, return_tensors="pt", return_special_tokens_mask=True)
        with torch.no_grad():
            out = model(
                input_ids=enc["input_ids"],
                token_type_ids=enc["token_type_ids"],
                attention_mask=enc["attention_mask"],
                output_attentions=True,
            )
        att = torch.stack([a[0] for a in out.attentions]).numpy().astype(np.float32)
        ids = enc["input_ids"][0].tolist()
        cases.append({
            "name": name,
            "model": {
                "id": "all-MiniLM-L6-v2",
                "layers": cfg.num_hidden_layers,
                "heads": cfg.num_attention_heads,
                "hidden_size": cfg.hidden_size,
                "head_dim": cfg.hidden_size // cfg.num_attention_heads,
            },
            "text": text,
            "pair": pair,
            "tokens": tok.convert_ids_to_tokens(ids),
            "input_ids": ids,
            "token_type_ids": enc["token_type_ids"][0].tolist(),
            "special": [bool(s) for s in enc["special_tokens_mask"][0].tolist()],
            # word index within its own sequence (sentence B restarts at 0), None for specials
            "word_ids": enc.word_ids(0),
        })
        tensors[name] = np.ascontiguousarray(att)
    meta, att = synthetic_case()
    cases.append(meta)
    tensors["synthetic"] = att

    OUT.mkdir(parents=True, exist_ok=True)
    with open(OUT / "inputs.json", "w") as f:
        json.dump({"source": "make_analysis_inputs.py", "cases": cases}, f, indent=1)
        f.write("\n")
    save_file(tensors, str(OUT / "inputs.safetensors"))
    os.chmod(OUT / "inputs.safetensors", 0o644)
    for c in cases:
        print(f"{c['name']}: {len(c['tokens'])} tokens")


if __name__ == "__main__":
    main()
