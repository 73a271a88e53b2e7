#!/usr/bin/env python3
"""Read a capture saved by `attnviz --save-attention` with the `safetensors` package and with
transformers' own checkpoint loader, and compare it with the JSON export of the same run.

Usage: python tests/reference/check_saved_capture.py SAVED.safetensors EXPORT.json [TOL]

Checks: every layer of `layer_numbers` is a tensor `<kind>.layer.<n>.attention` of shape
[heads, queries, keys]; the metadata's strings are JSON and say the format, version, kinds and
tokens (as people read them: the JSON's `display`); each tensor equals the JSON's attention
(within TOL, 0 for f32 saved from a --full-precision export); transformers' loader gives the same
tensors. Exits 1 with one line on the first difference; prints "ok" and the figures otherwise.
"""

import json
import sys

import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def main():
    saved, export = sys.argv[1], sys.argv[2]
    tol = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
    doc = json.load(open(export))
    with safe_open(saved, framework="np") as f:
        meta = f.metadata()
        names = set(f.keys())
    if meta.get("format") != "attnviz-attention-layers" or meta.get("format_version") != "1":
        fail(f"format {meta.get('format')} version {meta.get('format_version')}")
    kinds = json.loads(meta["kinds"])
    docs = {k: doc[k] for k in kinds} if doc["format_version"] >= 3 else {kinds[0]: doc}
    tensors = load_file(saved)
    worst = 0.0
    for kind in kinds:
        body = json.loads(meta[kind])
        want = docs[kind]
        for field in ["tokens", "display", "roles", "generated", "layer_numbers", "layer_masks"]:
            if body.get(field) != want.get(field):
                fail(f"{kind}.{field}: {body.get(field)} vs the JSON's {want.get(field)}")
        att = np.array(want["attention"], dtype=np.float32)
        for i, layer in enumerate(body["layer_numbers"]):
            name = f"{kind}.layer.{layer}.attention"
            if name not in names:
                fail(f"no tensor {name}")
            t = tensors[name].astype(np.float32)
            if t.shape != att[i].shape:
                fail(f"{name} shape {t.shape}, the JSON's {att[i].shape}")
            worst = max(worst, float(np.abs(t - att[i]).max()))
    if worst > tol:
        fail(f"largest difference {worst:.3e} > {tol:.1e}")
    primary = kinds[-1]
    if json.loads(meta["tokens"]) != docs[primary]["display"]:
        fail("metadata tokens are not the JSON's display texts")
    try:
        from transformers.modeling_utils import load_state_dict
    except ImportError:
        load_state_dict = None
    if load_state_dict is not None:
        state = load_state_dict(saved)
        if set(state) != names:
            fail("transformers' loader sees other tensors")
        for name, t in state.items():
            if not np.array_equal(t.float().numpy(), tensors[name].astype(np.float32)):
                fail(f"transformers' loader reads {name} differently")
    print(f"ok: {len(names)} tensors, kinds {kinds}, max |diff| vs JSON {worst:.2e}, "
          f"transformers loader {'checked' if load_state_dict else 'not installed'}")


if __name__ == "__main__":
    main()
