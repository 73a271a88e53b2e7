#!/usr/bin/env python3
"""Expected statistics of a sliding-window decoder's heads, with numpy alone (issue 22, req 2).

Reads transformers' eager attention of the tiny Mistral with a window of 6 on both layers
(tests/reference/tiny-mistral-window.safetensors, written by make_families.py) for the case
"single" (32 tokens, longer than the window), and computes per head, from the definitions in
docs/stats.md, with each query's visible keys counted under the layer's real mask (the causal
mask *and* the window: query q sees keys max(0, q - W + 1) ..= q):

    entropy, entropy_norm (mean of H_q / ln(visible_q) over rows that see more than one key),
    distance, to_first, to_self, to_prev, rows

and, for comparison, entropy_norm as a causal-only count (ln(q + 1)) would give it, which the
test uses to show the two differ. Writes tests/reference/analysis/windowed.json.

Usage: .cache/venv-ref/bin/python tests/reference/windowed_stats.py   (numpy, safetensors)
"""

import json
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file

HERE = Path(__file__).resolve().parent
NAME = "tiny-mistral-window"


def main():
    manifest = json.loads((HERE / f"{NAME}.json").read_text())
    windows = manifest["layer_windows"]
    case = next(c for c in manifest["cases"] if c["name"] == "single")
    att = load_file(str(HERE / f"{NAME}.safetensors"))[case["tensors"]["attentions"]["tensor"]]
    att = att.astype(np.float64)
    layers, heads, n, _ = att.shape
    q = np.arange(n)[:, None]
    k = np.arange(n)[None, :]
    out = {"model": NAME, "case": "single", "text": case["text"], "windows": windows,
           "layers": []}
    for l in range(layers):
        w = windows[l]
        visible_mask = (k <= q) & ((q - k) < w if w is not None else True)
        visible = visible_mask.sum(axis=1)  # [n]
        # The cells outside the mask are exactly 0 in transformers' output.
        outside = np.abs(att[l][:, ~visible_mask]).max()
        assert outside == 0.0, (l, outside)
        counted = visible > 1
        per_head = []
        for h in range(heads):
            a = att[l, h]
            with np.errstate(divide="ignore", invalid="ignore"):
                plogp = np.where(a > 0, a * np.log(a), 0.0)
            ent = -plogp.sum(axis=1)
            rows = counted & (a.sum(axis=1) > 0)
            mean = lambda x: float(x[rows].mean())
            per_head.append({
                "entropy": mean(ent),
                "entropy_norm": mean(ent / np.log(np.maximum(visible, 2))),
                "entropy_norm_causal_only": mean(ent / np.log(np.maximum(np.arange(n) + 1, 2))),
                "distance": mean((a * np.abs(q - k)).sum(axis=1)),
                "to_first": mean(a[:, 0]),
                "to_self": mean(np.diag(a)),
                "to_prev": mean(np.concatenate([[0.0], np.diag(a, -1)])),
                "rows": int(rows.sum()),
                "visible": visible.tolist(),
            })
        out["layers"].append(per_head)
    dest = HERE / "analysis" / "windowed.json"
    dest.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {dest}")


if __name__ == "__main__":
    main()
