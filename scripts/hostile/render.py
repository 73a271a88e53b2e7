"""Write the hostile `attnviz render FILE` cases of issue 20 (requirement 14) into a folder, one
case folder each (the format of `scripts/measure-hostile.sh`'s header).

    python3 scripts/hostile/render.py OUT

Standard library only (the .npy arrays are written by hand: magic, header, data). Each case
folder holds the file and an `args` file (`render {case}/FILE ...`). The Rust tests
(tests/suite/render_hostile.rs) build the same cases at small sizes.

Files that declare 2**28 weights (1 GiB as f32) in 1 to 3 MB, as deflate squeezes a constant:

- npz-f32 / npz-f64 / npz-fortran: `attention` [1, 1, 16384, 16384] of 2**-14 (rows sum to 1),
  as f32, as f64 (2 GiB inflated), and as f32 in Fortran order; drawn in the terminal.
- npz-f32-html / npz-f32-png: the f32 file with `--html` / `--png`.
- npz-three: encoder, decoder and cross-attention of 2**28 weights each (3 GiB), `--kind
  encoder`, the terminal view.
- npz-three-json: the same with `--json` (every kind).
- npz-max-memory: the f32 file with `--max-memory 256M`.
- npz-f32-quiet / npz-f64-quiet / npz-fortran-quiet / npz-three-quiet: the same files with
  `-q` (no view: the weights alone fit the budget), read whole; the last decodes the encoder
  only.
- npz-wide-tokens: 16 tokens of 65,536 characters each declared (`<U65536`, 4 MiB), with a
  small attention: labels no view can show.

Metadata that lies (attnviz JSON, format version 2, 3 tokens):

- json-kv-head-over: `kv_head` [0, 7] for 2 heads.
- json-spans-past-end: word-level units whose last span ends at token 10**12.
- json-causal-lie: `"mask": "causal"` over a weight of 0.5 above the diagonal.
- json-word-ids-huge: word ids up to 10**18, drawn with `--words`.
- json-layer-numbers-huge: `layer_numbers` [10**18].
"""
import json
import os
import struct
import sys
import zipfile

N = 16384  # 1 x 1 x N x N = 2**28 weights
CHUNK = 1 << 20


def npy_header(descr, shape, fortran=False):
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    h = "{'descr': '%s', 'fortran_order': %s, 'shape': (%s), }" % (descr, fortran, dims)
    h += " " * ((64 - (10 + len(h) + 1) % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode("latin-1")


def write_constant(zf, name, descr, shape, value_bytes, fortran=False):
    """An array whose every element is `value_bytes`, streamed through deflate."""
    with zf.open(name + ".npy", "w", force_zip64=True) as f:
        f.write(npy_header(descr, shape, fortran))
        count = 1
        for d in shape:
            count *= d
        total = count * len(value_bytes)
        block = value_bytes * (CHUNK // len(value_bytes))
        while total > 0:
            n = min(total, len(block))
            f.write(block[:n])
            total -= n


def write_strings(zf, name, strings, width=None):
    width = width or max(len(s) for s in strings)
    with zf.open(name + ".npy", "w", force_zip64=True) as f:
        f.write(npy_header("<U%d" % width, (len(strings),)))
        for s in strings:
            f.write(s.encode("utf-32-le") + b"\0" * (4 * (width - len(s))))


def tokens(n, prefix="t"):
    return ["%s%d" % (prefix, i) for i in range(n)]


def big_npz(path, descr="<f4", fortran=False, kinds=("attention",)):
    value = struct.pack("<f", 2.0**-14) if descr == "<f4" else struct.pack("<d", 2.0**-14)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for kind in kinds:
            write_constant(zf, kind, descr, (1, 1, N, N), value, fortran)
        if kinds == ("attention",):
            write_strings(zf, "tokens", tokens(N))
        else:
            write_strings(zf, "encoder_tokens", tokens(N, "e"))
            write_strings(zf, "decoder_tokens", tokens(N, "d"))


MADE = {}


def case(out, name, args, files):
    """A case folder `name` with `args` and `files` (file name: a function that writes it; the
    same function's file is written once and hard-linked into every case that uses it)."""
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    for fname, make in files.items():
        path = os.path.join(d, fname)
        if make in MADE:
            os.link(MADE[make], path)
        else:
            make(path)
            MADE[make] = path
    with open(os.path.join(d, "args"), "w", encoding="utf-8") as f:
        f.write("\n".join(args) + "\n")


def doc(**fields):
    """A version-2 attnviz JSON export of 1 layer x 2 heads over 3 tokens, with `fields` laid
    over it."""
    lower = [[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.25, 0.25, 0.5]]
    d = {
        "format": "attnviz-attention",
        "format_version": 2,
        "model": {"id": "hostile", "family": "llama", "layers": 1, "heads": 2},
        "kind": "self",
        "mask": "causal",
        "tokens": ["<s>", "a", "b"],
        "roles": ["start", "word", "word"],
        "attention": [[lower, lower]],
    }
    d.update(fields)
    return d


def write_json(d):
    def make(path):
        with open(path, "w", encoding="utf-8") as f:
            json.dump(d, f)

    return make


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[2].strip())
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    r = ["render", "{case}/a.npz"]
    f64 = lambda p: big_npz(p, "<f8")  # noqa: E731
    fortran = lambda p: big_npz(p, fortran=True)  # noqa: E731
    three = ("encoder_attention", "decoder_attention", "cross_attention")
    enc_dec = lambda p: big_npz(p, kinds=three)  # noqa: E731
    case(out, "npz-f32", r, {"a.npz": big_npz})
    case(out, "npz-f64", r, {"a.npz": f64})
    case(out, "npz-fortran", r, {"a.npz": fortran})
    case(out, "npz-f32-html", r + ["--html", "{out}/a.html"], {"a.npz": big_npz})
    case(out, "npz-f32-png", r + ["--png", "{out}/a.png"], {"a.npz": big_npz})
    case(out, "npz-three", r + ["--kind", "encoder"], {"a.npz": enc_dec})
    case(out, "npz-three-json", r + ["--json", "{out}/a.json"], {"a.npz": enc_dec})
    case(out, "npz-max-memory", r + ["--max-memory", "256M"], {"a.npz": big_npz})
    # What fits: the weights alone (-q: no view), read in bounded memory.
    case(out, "npz-f32-quiet", r + ["-q"], {"a.npz": big_npz})
    case(out, "npz-f64-quiet", r + ["-q"], {"a.npz": f64})
    case(out, "npz-fortran-quiet", r + ["-q"], {"a.npz": fortran})
    case(out, "npz-three-quiet", r + ["--kind", "encoder", "-q"], {"a.npz": enc_dec})

    def wide(path):
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
            write_constant(zf, "attention", "<f4", (1, 1, 16, 16), struct.pack("<f", 1 / 16))
            write_strings(zf, "tokens", ["w"] * 16, width=65536)

    case(out, "npz-wide-tokens", r, {"a.npz": wide})

    j = ["render", "{case}/a.json"]
    case(out, "json-kv-head-over", j, {"a.json": write_json(doc(kv_head=[0, 7]))})
    spans = doc(level="word", spans=[[0, 1], [1, 2], [2, 10**12]])
    case(out, "json-spans-past-end", j, {"a.json": write_json(spans)})
    full = [[0.5, 0.5, 0.0], [0.5, 0.5, 0.0], [0.25, 0.25, 0.5]]
    case(out, "json-causal-lie", j, {"a.json": write_json(doc(attention=[[full, full]]))})
    words = doc(word_ids=[None, 10**18 - 1, 10**18])
    case(out, "json-word-ids-huge", j + ["--words"], {"a.json": write_json(words)})
    case(out, "json-layer-numbers-huge", j, {"a.json": write_json(doc(layer_numbers=[10**18]))})
    # Issue 40: a grid no input makes (it aborted on a 4e18-byte allocation), and one token of
    # 50 MiB (1.4 GiB in render and diff).
    image = {"source": "a.png", "original": [8, 4], "input": [8, 4], "patch": 4,
             "grid": [10**9, 10**9],
             "preprocessing": {"color": "rgb8", "resize": None, "crop": None, "rescale": None,
                               "normalize": None, "positions_from": None},
             "cells": [{"kind": "class"}, {"kind": "patch", "row": 0, "col": 0},
                       {"kind": "patch", "row": 0, "col": 1}]}
    case(out, "json-image-grid-1e9", j, {"a.json": write_json(doc(image=image))})
    long = doc(tokens=["<s>", "x" * (50 << 20), "b"])
    case(out, "json-token-50mib", j + ["-q"], {"a.json": write_json(long)})
    case(out, "json-token-50mib-html", j + ["--html", "{out}/a.html"], {"a.json": write_json(long)})
    for name in sorted(os.listdir(out)):
        print(name)


if __name__ == "__main__":
    main()
