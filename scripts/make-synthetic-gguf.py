#!/usr/bin/env python3
"""Synthetic GGUF files with random blocks, in the shapes of real 1B-8B decoders and of two
mixture-of-experts models, for the memory and speed benchmarks (benches/gguf_sizes.rs, issue 22,
reqs 4 and 7; benches/moe_sizes.rs, issue 43, req 6). Not for CI: the files are 0.7-12 GB. They
go under .cache/synthetic-gguf/ by default (ignored by git), or where --out says.

    .cache/venv-ref/bin/python scripts/make-synthetic-gguf.py [--only NAME-KIND ...] [--tokenizer F.gguf] [--out DIR]

`--dry-run` prints each file's size from its tensor plan and writes nothing (the only use of the
`qwen3-30b-a3b` shape below, 18.6 GB, written only when --only names it). The
mixture-of-experts files, as benches/moe_sizes.rs looks for them (12.1 GB and 4.2 GB, about
2 and 1 minutes on this machine's disk):

    .cache/venv-ref/bin/python scripts/make-synthetic-gguf.py --out .cache/synthetic \
        --only gpt-oss-20b-mxfp4 olmoe-1b-7b-q4km

Shapes (from the models' config.json):
  llama-3.2-1b  hidden 2048, 16 layers, 32 heads / 8 KV heads, head 64, FFN 8192, vocab 128256, tied
  qwen3-4b      hidden 2560, 36 layers, 32 heads / 8 KV heads, head 128, FFN 9728, vocab 151936, tied
                (the `qwen3` architecture, with its per-head q/k norms)
  llama-3.1-8b  hidden 4096, 32 layers, 32 heads / 8 KV heads, head 128, FFN 14336, vocab 128256,
                separate output matrix
  gpt-oss-20b   llama.cpp's `gpt-oss`: hidden 2880, 24 layers, 64 heads / 8 KV heads, head 64,
                32 experts (top 4) of inner 2880, vocab 201088, separate output matrix; q/k/v/o and
                expert biases, a learned sink per head, sliding window 128 on the even layers
                (llama.cpp's swa pattern 2), YaRN (factor 32 over 4096 positions, beta 32/1),
                rope base 150000, the SwiGLU clamp 7.0
  olmoe-1b-7b   llama.cpp's `olmoe`: hidden 2048, 16 layers, 16 heads / 16 KV heads, head 128,
                64 experts (top 8) of inner 1024, vocab 50304, separate output matrix; RMSNorm
                over the whole q and k projections
  qwen3-30b-a3b llama.cpp's `qwen3moe`: hidden 2048, 48 layers, 32 heads / 4 KV heads, head 128,
                128 experts (top 8) of inner 768, vocab 151936, separate output matrix
Types: `q4km` is llama.cpp's Q4_K_M mix (Q4_K everywhere, Q6_K for the output matrix and for
attn_v / ffn_down on the layers llama.cpp's `use_more_bits` picks); `q8_0` is Q8_0 everywhere.
`mxfp4` is how the released gpt-oss GGUF (llama.cpp's MOSTLY_MXFP4_MOE) stores it: the merged
expert tensors `ffn_{gate,up,down}_exps` in MXFP4, every other matrix (embedding, output,
q/k/v/o) in Q8_0 (12.1 GB in all, as the released file). Norms, biases, sinks and the routers
(`ffn_gate_inp`, which llama.cpp's quantiser never quantises) are F32. No `rope_freqs` tensor
(Llama 3.1's per-frequency factors change no cost).

Blocks are random bytes with their f16 scales set to small finite values (MXFP4: its E8M0 scale
byte set to 2^-9), so the network's numbers stay finite (the weights mean nothing; the
mixture-of-experts shapes' Q4_K blocks also get `dmin` = 7.5 `d`, so that their weights average
about zero). The routers are random normal (logits of standard deviation about 1), so the
tokens spread over the experts as in a real model rather than all choosing the same few;
sinks are random normal too, biases zero, norms one. The tokenizer (a real byte-level BPE and chat
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
    "gpt-oss-20b": dict(arch="gpt-oss", hidden=2880, layers=24, heads=64, kv=8, head=64,
                        ffn=2880, vocab=201088, tied=False, theta=150000.0, experts=32, top_k=4,
                        window=128, context=131072, yarn=(32.0, 4096, 32.0, 1.0),
                        kinds=("mxfp4",)),
    "olmoe-1b-7b": dict(arch="olmoe", hidden=2048, layers=16, heads=16, kv=16, head=128,
                        ffn=1024, vocab=50304, tied=False, theta=10000.0, experts=64, top_k=8,
                        context=4096, kinds=("q4km",)),
    # Sized only (--dry-run): how large a mixture-of-experts model fits a 24 GB machine.
    "qwen3-30b-a3b": dict(arch="qwen3moe", hidden=2048, layers=48, heads=32, kv=4, head=128,
                          ffn=768, vocab=151936, tied=False, theta=1000000.0, experts=128,
                          top_k=8, context=40960, kinds=("q4km",), only_when_named=True),
}

# (values per block, bytes per block, offsets of f16 scales inside a block)
BLOCKS = {
    T.Q4_K: (256, 144, (0, 2)),
    T.Q6_K: (256, 210, (208,)),
    T.Q8_0: (32, 34, (0,)),
    T.MXFP4: (32, 17, ()),  # its scale is one E8M0 byte at offset 0, set apart
}
# A scale for each type that keeps decoded weights around 1e-2.
SCALE = {T.Q4_K: 2e-4, T.Q6_K: 2e-5, T.Q8_0: 2e-4}
# MXFP4: E8M0 byte 119 is 2^-9 on ggml's doubled codes (0-12): |weights| about 9e-3 on average.
MXFP4_SCALE = 119


def use_more_bits(i, n):
    """llama.cpp's choice of layers that get more bits in the _M mixes."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def tensors(s, kind):
    """(name, shape, type, fill) of every tensor, in file order; shape in numpy's order (the
    last axis the row), fill one of "blocks", "ones", "zeros", "router", "sinks"."""
    h, q, kv = s["hidden"], s["heads"] * s["head"], s["kv"] * s["head"]
    n, arch = s["layers"], s["arch"]
    base = {"q8_0": T.Q8_0, "q4km": T.Q4_K, "mxfp4": T.Q8_0}[kind]
    f32 = lambda name, *shape, fill="ones": (name, shape, T.F32, fill)  # noqa: E731
    mat = lambda name, *shape, qtype=base: (name, shape, qtype, "blocks")  # noqa: E731
    out = [mat("token_embd.weight", s["vocab"], h)]
    for i in range(n):
        more = kind == "q4km" and use_more_bits(i, n)
        p = f"blk.{i}."
        out += [
            f32(p + "attn_norm.weight", h),
            mat(p + "attn_q.weight", q, h),
            mat(p + "attn_k.weight", kv, h),
            mat(p + "attn_v.weight", kv, h, qtype=T.Q6_K if more else base),
            mat(p + "attn_output.weight", h, q),
        ]
        if arch in ("qwen3", "qwen3moe"):
            out += [f32(p + "attn_q_norm.weight", s["head"]), f32(p + "attn_k_norm.weight", s["head"])]
        if arch == "olmoe":
            # OLMoE's q/k norms run over the whole projections, not per head.
            out += [f32(p + "attn_q_norm.weight", q), f32(p + "attn_k_norm.weight", kv)]
        if arch == "gpt-oss":
            out += [f32(p + "attn_q.bias", q, fill="zeros"), f32(p + "attn_k.bias", kv, fill="zeros"),
                    f32(p + "attn_v.bias", kv, fill="zeros"), f32(p + "attn_output.bias", h, fill="zeros"),
                    f32(p + "attn_sinks.weight", s["heads"], fill="sinks"),
                    f32(p + "post_attention_norm.weight", h)]
        else:
            out.append(f32(p + "ffn_norm.weight", h))
        if "experts" in s:
            e, ffn = s["experts"], s["ffn"]
            exps = T.MXFP4 if kind == "mxfp4" else base
            out += [
                f32(p + "ffn_gate_inp.weight", e, h, fill="router"),
                mat(p + "ffn_gate_exps.weight", e, ffn, h, qtype=exps),
                mat(p + "ffn_up_exps.weight", e, ffn, h, qtype=exps),
                mat(p + "ffn_down_exps.weight", e, h, ffn, qtype=T.Q6_K if more else exps),
            ]
            if arch == "gpt-oss":
                out += [f32(p + "ffn_gate_inp.bias", e, fill="zeros"),
                        f32(p + "ffn_gate_exps.bias", e, ffn, fill="zeros"),
                        f32(p + "ffn_up_exps.bias", e, ffn, fill="zeros"),
                        f32(p + "ffn_down_exps.bias", e, h, fill="zeros")]
        else:
            out += [
                mat(p + "ffn_gate.weight", s["ffn"], h),
                mat(p + "ffn_up.weight", s["ffn"], h),
                mat(p + "ffn_down.weight", h, s["ffn"], qtype=T.Q6_K if more else base),
            ]
    out.append(f32("output_norm.weight", h))
    if not s["tied"]:
        out.append(mat("output.weight", s["vocab"], h, qtype=T.Q6_K if kind == "q4km" else base))
    return out


def random_blocks(rng, shape, qtype, centred=False):
    """Random blocks of `qtype` for a tensor of `shape` (values), as uint8 `[..., row bytes]`."""
    values, size, scales = BLOCKS[qtype]
    *lead, cols = shape
    n = int(np.prod(lead)) * (cols // values)
    blocks = np.frombuffer(bytearray(rng.bytes(n * size)), dtype=np.uint8).reshape(n, size)
    if qtype == T.MXFP4:
        blocks[:, 0] = MXFP4_SCALE
    scale = np.array([SCALE.get(qtype, 0.0)], dtype=np.float16).view(np.uint8)
    for off in scales:
        blocks[:, off:off + 2] = scale
    if centred and qtype == T.Q4_K:
        # value = d·sc·q − dmin·m with sc, m and q uniform: dmin = 7.5·d centres it on zero.
        blocks[:, 2:4] = np.array([SCALE[qtype] * 7.5], dtype=np.float16).view(np.uint8)
    return blocks.reshape(*lead, cols // values * size)


def fill_f32(rng, shape, fill):
    if fill == "ones":
        return np.ones(shape, dtype=np.float32)
    if fill == "zeros":
        return np.zeros(shape, dtype=np.float32)
    if fill == "router":  # logits of standard deviation about 1 on a normalised input
        return (rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32)
    if fill == "sinks":
        return rng.standard_normal(shape).astype(np.float32)
    raise ValueError(fill)


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
    w.add_context_length(s.get("context", 131072))
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
    if "experts" in s:
        w.add_expert_count(s["experts"])
        w.add_expert_used_count(s["top_k"])
        w.add_expert_feed_forward_length(s["ffn"])
    if "window" in s:
        w.add_sliding_window(s["window"])
    if "yarn" in s:
        factor, orig, fast, slow = s["yarn"]
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(factor)
        w.add_rope_scaling_orig_ctx_len(orig)
        w.add_rope_scaling_yarn_beta_fast(fast)
        w.add_rope_scaling_yarn_beta_slow(slow)
    if arch == "gpt-oss":
        w.add_swiglu_clamp_exp([7.0] * s["layers"])
    w.add_file_type({"q4km": gguf.LlamaFileType.MOSTLY_Q4_K_M, "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
                     "mxfp4": gguf.LlamaFileType.MOSTLY_MXFP4_MOE}[kind])
    copy_tokenizer(w, tokenizer, s["vocab"])
    plan = tensors(s, kind)
    for tname, shape, qtype, _ in plan:
        if qtype == T.F32:
            w.add_tensor_info(tname, list(shape), np.dtype(np.float32), int(np.prod(shape)) * 4)
        else:
            values, size, _ = BLOCKS[qtype]
            *lead, cols = shape
            byte_shape = [*lead, cols // values * size]
            w.add_tensor_info(tname, byte_shape, np.dtype(np.uint8), int(np.prod(byte_shape)),
                              raw_dtype=qtype)
    w.write_header_to_file(path)
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    rng = np.random.default_rng(22)
    centred = "experts" in s
    for tname, shape, qtype, fill in plan:
        if qtype == T.F32:
            w.write_tensor_data(fill_f32(rng, shape, fill))
        else:
            w.write_tensor_data(random_blocks(rng, shape, qtype, centred))
    w.close()
    return path


def planned_bytes(s, kind):
    """The tensors' bytes (the file adds its metadata and tokenizer, a few MB)."""
    total = 0
    for _, shape, qtype, _ in tensors(s, kind):
        if qtype == T.F32:
            total += int(np.prod(shape)) * 4
        else:
            values, size, _ = BLOCKS[qtype]
            total += int(np.prod(shape)) // values * size
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="NAME-KIND, e.g. llama-3.1-8b-q4km")
    ap.add_argument("--tokenizer", default=".cache/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--out", default=".cache/synthetic-gguf")
    ap.add_argument("--dry-run", action="store_true",
                    help="print each file's size from its tensor plan, write nothing")
    a = ap.parse_args()
    if not os.path.exists(a.tokenizer):
        sys.exit(f"no {a.tokenizer}: run scripts/fetch-smollm2.sh first, or pass --tokenizer")
    os.makedirs(a.out, exist_ok=True)
    for name in SHAPES:
        for kind in SHAPES[name].get("kinds", ("q4km", "q8_0")):
            if a.only and f"{name}-{kind}" not in a.only:
                continue
            if not a.only and SHAPES[name].get("only_when_named") and not a.dry_run:
                continue
            if a.dry_run:
                print(f"{name}-{kind}: {planned_bytes(SHAPES[name], kind) / 1e9:.2f} GB of tensors")
                continue
            t0 = time.time()
            path = write(name, kind, a.out, a.tokenizer)
            print(f"{path}: {os.path.getsize(path) / 2**20:,.0f} MiB in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
