#!/usr/bin/env python3
"""Synthetic GGUF files with random blocks, in the shapes of real 1B-8B decoders, for the
memory and speed benchmarks (benches/gguf_sizes.rs; issue 22, reqs 4 and 7). Not for CI: the
files are 0.7-8.5 GB. They go under .cache/synthetic-gguf/ (ignored by git).

    .cache/venv-ref/bin/python scripts/make-synthetic-gguf.py [--only NAME ...] [--tokenizer F.gguf]

Shapes (from the models' config.json):
  llama-3.2-1b  hidden 2048, 16 layers, 32 heads / 8 KV heads, head 64, FFN 8192, vocab 128256, tied
  qwen3-4b      hidden 2560, 36 layers, 32 heads / 8 KV heads, head 128, FFN 9728, vocab 151936, tied
                (the `qwen3` architecture, with its per-head q/k norms)
  llama-3.1-8b  hidden 4096, 32 layers, 32 heads / 8 KV heads, head 128, FFN 14336, vocab 128256,
                separate output matrix
Types: `q4km` is llama.cpp's Q4_K_M mix (Q4_K everywhere, Q6_K for the output matrix and for
attn_v / ffn_down on the layers llama.cpp's `use_more_bits` picks); `q8_0` is Q8_0 everywhere.
Norms are F32. No `rope_freqs` tensor (Llama 3.1's per-frequency factors change no cost).

Blocks are random bytes with their f16 scales set to small finite values, so the network's
numbers stay finite (the weights mean nothing). The tokenizer (a real byte-level BPE and chat
template) is copied from SmolLM2's GGUF (scripts/fetch-smollm2.sh), its 49,152 tokens padded to
the embedding's rows with `[PAD<i>]` tokens of type UNUSED, as llama.cpp's converter pads a
vocabulary shorter than the model's (llama.cpp refuses a file whose vocabulary is shorter).
"""

import argparse
import os
import sys
import time

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

SHAPES = {
    "llama-3.2-1b": dict(arch="llama", hidden=2048, layers=16, heads=32, kv=8, head=64,
                         ffn=8192, vocab=128256, tied=True, theta=500000.0),
    "qwen3-4b": dict(arch="qwen3", hidden=2560, layers=36, heads=32, kv=8, head=128,
                     ffn=9728, vocab=151936, tied=True, theta=1000000.0),
    "llama-3.1-8b": dict(arch="llama", hidden=4096, layers=32, heads=32, kv=8, head=128,
                         ffn=14336, vocab=128256, tied=False, theta=500000.0),
}

# (values per block, bytes per block, offsets of f16 scales inside a block)
BLOCKS = {
    T.Q4_K: (256, 144, (0, 2)),
    T.Q6_K: (256, 210, (208,)),
    T.Q8_0: (32, 34, (0,)),
}
# A scale for each type that keeps decoded weights around 1e-2.
SCALE = {T.Q4_K: 2e-4, T.Q6_K: 2e-5, T.Q8_0: 2e-4}


def use_more_bits(i, n):
    """llama.cpp's choice of layers that get more bits in the _M mixes."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def tensors(s, kind):
    """(name, rows, cols, type) of every tensor, in file order."""
    h, q, kv = s["hidden"], s["heads"] * s["head"], s["kv"] * s["head"]
    n = s["layers"]
    base = T.Q8_0 if kind == "q8_0" else T.Q4_K
    out = [("token_embd.weight", s["vocab"], h, base)]
    for i in range(n):
        more = kind == "q4km" and use_more_bits(i, n)
        p = f"blk.{i}."
        out += [
            (p + "attn_norm.weight", 1, h, T.F32),
            (p + "attn_q.weight", q, h, base),
            (p + "attn_k.weight", kv, h, base),
            (p + "attn_v.weight", kv, h, T.Q6_K if more else base),
            (p + "attn_output.weight", h, q, base),
        ]
        if s["arch"] == "qwen3":
            out += [(p + "attn_q_norm.weight", 1, s["head"], T.F32),
                    (p + "attn_k_norm.weight", 1, s["head"], T.F32)]
        out += [
            (p + "ffn_norm.weight", 1, h, T.F32),
            (p + "ffn_gate.weight", s["ffn"], h, base),
            (p + "ffn_up.weight", s["ffn"], h, base),
            (p + "ffn_down.weight", h, s["ffn"], T.Q6_K if more else base),
        ]
    out.append(("output_norm.weight", 1, h, T.F32))
    if not s["tied"]:
        out.append(("output.weight", s["vocab"], h, T.Q6_K if kind == "q4km" else base))
    return out


def random_blocks(rng, rows, cols, qtype):
    values, size, scales = BLOCKS[qtype]
    n = rows * (cols // values)
    blocks = np.frombuffer(bytearray(rng.bytes(n * size)), dtype=np.uint8).reshape(n, size)
    scale = np.array([SCALE[qtype]], dtype=np.float16).view(np.uint8)
    for off in scales:
        blocks[:, off:off + 2] = scale
    return blocks.reshape(rows, cols // values * size)


def copy_tokenizer(w, path, vocab):
    r = gguf.GGUFReader(path)
    for key, field in r.fields.items():
        if not key.startswith("tokenizer."):
            continue
        vtype = field.types[0]
        value = field.contents()
        # Padded to the embedding's rows, as convert_hf_to_gguf.py pads a short vocabulary.
        if key == "tokenizer.ggml.tokens":
            value = value + [f"[PAD{i}]" for i in range(len(value), vocab)]
        elif key == "tokenizer.ggml.token_type":
            value = value + [int(gguf.TokenType.UNUSED)] * (vocab - len(value))
        elif key == "tokenizer.ggml.scores":
            value = value + [-1000.0] * (vocab - len(value))
        if vtype == gguf.GGUFValueType.ARRAY:
            w.add_key_value(key, value, vtype, sub_type=field.types[-1])
        else:
            w.add_key_value(key, value, vtype)


def write(name, kind, out_dir, tokenizer):
    s = SHAPES[name]
    path = os.path.join(out_dir, f"{name}-{kind}.gguf")
    arch = s["arch"]
    w = gguf.GGUFWriter(path, arch)
    w.add_name(f"synthetic {name} {kind}")
    w.add_block_count(s["layers"])
    w.add_context_length(131072)
    w.add_embedding_length(s["hidden"])
    w.add_feed_forward_length(s["ffn"])
    w.add_head_count(s["heads"])
    w.add_head_count_kv(s["kv"])
    w.add_key_length(s["head"])
    w.add_value_length(s["head"])
    w.add_rope_dimension_count(s["head"])
    w.add_rope_freq_base(s["theta"])
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(s["vocab"])
    copy_tokenizer(w, tokenizer, s["vocab"])
    plan = tensors(s, kind)
    for tname, rows, cols, qtype in plan:
        if qtype == T.F32:
            w.add_tensor_info(tname, [cols], np.dtype(np.float32), cols * 4)
        else:
            values, size, _ = BLOCKS[qtype]
            nbytes = rows * cols // values * size
            w.add_tensor_info(tname, [rows, cols // values * size], np.dtype(np.uint8), nbytes,
                              raw_dtype=qtype)
    w.write_header_to_file(path)
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    rng = np.random.default_rng(22)
    for tname, rows, cols, qtype in plan:
        if qtype == T.F32:
            w.write_tensor_data(np.ones(cols, dtype=np.float32))
        else:
            w.write_tensor_data(random_blocks(rng, rows, cols, qtype))
    w.close()
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="NAME-KIND, e.g. llama-3.1-8b-q4km")
    ap.add_argument("--tokenizer", default=".cache/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--out", default=".cache/synthetic-gguf")
    a = ap.parse_args()
    if not os.path.exists(a.tokenizer):
        sys.exit(f"no {a.tokenizer}: run scripts/fetch-smollm2.sh first, or pass --tokenizer")
    os.makedirs(a.out, exist_ok=True)
    for name in SHAPES:
        for kind in ("q4km", "q8_0"):
            if a.only and f"{name}-{kind}" not in a.only:
                continue
            t0 = time.time()
            path = write(name, kind, a.out, a.tokenizer)
            print(f"{path}: {os.path.getsize(path) / 2**20:,.0f} MiB in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
