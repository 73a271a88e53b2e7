#!/usr/bin/env python3
"""Benchmark of the Python package (issue 12, goal 5). Prints figures; asserts nothing.

    python python/bench/notebook_bench.py [--repeat 30]

1. ``attnviz.run`` on a short sentence with all-MiniLM-L6-v2 in a warm process (the model
   loaded by a first call, as in a notebook), goal <= 50 ms; with ``._repr_html_()`` too (what
   displaying the result costs).
2. ``head_view`` on 12 layers x 12 heads x 128 tokens from torch tensors (a tuple of
   ``(1, 12, 128, 128)`` float32 tensors, as ``outputs.attentions``) to the inline HTML, goal
   <= 0.5 s. Needs torch; without it the same arrays as numpy are timed and the line says so.
   Anchor: bertviz's ``head_view(..., html_action='return')`` on the same tensors, when bertviz
   is installed.

Timings are medians (and minima) of ``--repeat`` runs; the machine is shared, so compare in one
process.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np

import attnviz

REPO = Path(__file__).resolve().parents[2]
MINILM = os.environ.get("ATTNVIZ_MINILM_DIR", str(REPO / ".cache" / "models" / "all-MiniLM-L6-v2"))


def timed(f, repeat):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3, min(times) * 1e3


def attention_12x12x128(seed=0):
    rng = np.random.default_rng(seed)
    logits = rng.normal(0, 2.5, (12, 12, 128, 128)).astype(np.float32)
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)).astype(np.float32)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs; Python {platform.python_version()}; "
          f"attnviz {attnviz.__version__}; numpy {np.__version__}")

    text = "The quick brown fox jumps over the lazy dog."
    t = time.perf_counter()
    attnviz.run(text, model=MINILM)
    print(f"run, first call (loads the model): {(time.perf_counter() - t) * 1e3:.1f} ms")
    med, low = timed(lambda: attnviz.run(text, model=MINILM), args.repeat)
    print(f"run, warm, 12 tokens: median {med:.1f} ms, min {low:.1f} ms (goal <= 50 ms)")
    med, low = timed(lambda: attnviz.run(text, model=MINILM)._repr_html_(), args.repeat)
    print(f"run + inline HTML, warm: median {med:.1f} ms, min {low:.1f} ms")

    att = attention_12x12x128()
    tokens = ["[CLS]"] + [f"w{i}" for i in range(126)] + ["[SEP]"]
    try:
        import torch

        layers = tuple(torch.from_numpy(att[l][None].copy()) for l in range(12))
        source = f"torch {torch.__version__} tensors"
    except ImportError:
        layers = tuple(att[l][None] for l in range(12))
        source = "numpy arrays (torch is not installed)"
    repeat = max(5, args.repeat // 3)
    med, low = timed(lambda: attnviz.head_view(layers, tokens, html_action="return")._repr_html_(), repeat)
    html = attnviz.head_view(layers, tokens, html_action="return")._repr_html_()
    print(f"head_view 12x12x128 from {source} to inline HTML: median {med:.0f} ms, min {low:.0f} ms "
          f"(goal <= 500 ms); {len(html) / 1e6:.1f} MB of HTML")
    try:
        import bertviz

        med, low = timed(lambda: bertviz.head_view(layers, tokens, html_action="return"), 3)
        out = bertviz.head_view(layers, tokens, html_action="return")
        print(f"anchor: bertviz {getattr(bertviz, '__version__', '?')} head_view, same tensors: "
              f"median {med:.0f} ms, {len(out.data) / 1e6:.1f} MB of HTML (needs a CDN to draw)")
    except ImportError:
        print("anchor: bertviz not installed")


if __name__ == "__main__":
    main()
