#!/usr/bin/env python3
"""Hostile GGUF files (issue 20, requirements 9, 12, 13 and 18), one case folder each.

    python3 scripts/hostile/gguf.py OUT_DIR

Each case is a folder holding `model.gguf` and `args` (see scripts/measure-hostile.sh). Most
cases are tests/fixtures/gguf/tiny-llama.gguf with its metadata edited; the others are written
from scratch. Python's standard library only: GGUF is read and written here field by field.
"""

import os
import struct
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests/fixtures/gguf/tiny-llama.gguf"

# GGUF value types.
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
FIXED = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
         BOOL: "<?", U64: "<Q", I64: "<q", F64: "<d"}


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, fmt):
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return v

    def string(self):
        n = self.take("<Q")
        s = self.data[self.pos:self.pos + n].decode("utf-8", "surrogateescape")
        self.pos += n
        return s

    def value(self, kind):
        if kind == STRING:
            return self.string()
        if kind == ARRAY:
            inner, n = self.take("<I"), self.take("<Q")
            return (inner, [self.value(inner) for _ in range(n)])
        return self.take(FIXED[kind])


def read(path):
    """(metadata [(key, kind, value)], tensors [(name, dims, type, offset)], data bytes)."""
    r = Reader(Path(path).read_bytes())
    assert r.take("<I") == 0x46554747 and r.take("<I") == 3
    n_tensors, n_kv = r.take("<Q"), r.take("<Q")
    kv = []
    for _ in range(n_kv):
        key, kind = r.string(), r.take("<I")
        kv.append((key, kind, r.value(kind)))
    tensors = []
    for _ in range(n_tensors):
        name = r.string()
        dims = [r.take("<Q") for _ in range(r.take("<I"))]
        tensors.append((name, dims, r.take("<I"), r.take("<Q")))
    start = (r.pos + 31) // 32 * 32
    return kv, tensors, r.data[start:]


def encode_string(s):
    b = s.encode("utf-8", "surrogateescape")
    return struct.pack("<Q", len(b)) + b


def encode_value(kind, v):
    if kind == STRING:
        return encode_string(v)
    if kind == ARRAY:
        inner, items = v
        return struct.pack("<IQ", inner, len(items)) + b"".join(encode_value(inner, x) for x in items)
    return struct.pack(FIXED[kind], v)


def header(kv, tensors):
    out = [b"GGUF", struct.pack("<IQQ", 3, len(tensors), len(kv))]
    for key, kind, v in kv:
        out += [encode_string(key), struct.pack("<I", kind), encode_value(kind, v)]
    for name, dims, ty, offset in tensors:
        out += [encode_string(name), struct.pack("<I", len(dims))]
        out += [struct.pack("<Q", d) for d in dims]
        out.append(struct.pack("<IQ", ty, offset))
    h = b"".join(out)
    return h + b"\0" * ((-len(h)) % 32)


def write(path, kv, tensors, data=b"", sparse_to=None):
    """Write a GGUF; `sparse_to` extends the file with a hole to that many data bytes."""
    with open(path, "wb") as f:
        f.write(header(kv, tensors))
        f.write(data)
        if sparse_to is not None:
            f.truncate(f.tell() + sparse_to - len(data))


def case(out, name, model_args=None):
    d = out / name
    d.mkdir(parents=True, exist_ok=True)
    args = ["-m", "{case}/model.gguf", "the cat sat on the mat", "--json", "{out}/a.json"]
    (d / "args").write_text("\n".join(args + (model_args or [])) + "\n")
    return d / "model.gguf"


def edited(out, name, edit, model_args=None, source=FIXTURE):
    kv, tensors, data = read(source)
    kv = edit(kv) or kv
    write(case(out, name, model_args), kv, tensors, data)


def set_value(key, value):
    def edit(kv):
        return [(k, t, value if k == key else v) for k, t, v in kv]
    return edit


def main():
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)

    # Req 12: duplicates, overlaps, and weights too big for memory.
    edited(out, "duplicate-metadata-key",
           lambda kv: kv + [("llama.block_count", U32, 7)])
    kv, tensors, data = read(FIXTURE)
    write(case(out, "duplicate-tensor-name"), kv, tensors + [tensors[-1]], data)
    # tiny-llama plus 1,000 records over one 8 MB block: 8.9 MB of file, 8 GB dequantised
    # (the old reader dequantised every tensor, used or not).
    block = 2 * 1024 * 1024  # f32 values
    at = len(data) + (-len(data)) % 32
    records = [(f"extra.{i}.weight", [block], 0, at) for i in range(1000)]
    padded = data + b"\0" * (at - len(data))
    write(case(out, "tensors-overlapping-1000x"), kv, tensors + records,
          padded + b"\0" * (4 * block))
    # An 8B-shaped Q4_0 file (Llama 3 8B's shapes), its data a hole: 4.6 GB on paper, 32 GB
    # as f32.
    kv = [("general.architecture", STRING, "llama"), ("llama.block_count", U32, 32),
          ("llama.context_length", U32, 8192), ("llama.embedding_length", U32, 4096),
          ("llama.feed_forward_length", U32, 14336), ("llama.attention.head_count", U32, 32),
          ("llama.attention.head_count_kv", U32, 8), ("llama.rope.freq_base", F32, 500000.0),
          ("llama.attention.layer_norm_rms_epsilon", F32, 1e-5), ("llama.vocab_size", U32, 128256)]
    shapes = [("token_embd.weight", [4096, 128256]), ("output.weight", [4096, 128256]),
              ("output_norm.weight", [4096])]
    for i in range(32):
        shapes += [(f"blk.{i}.attn_norm.weight", [4096]), (f"blk.{i}.ffn_norm.weight", [4096]),
                   (f"blk.{i}.attn_q.weight", [4096, 4096]), (f"blk.{i}.attn_k.weight", [4096, 1024]),
                   (f"blk.{i}.attn_v.weight", [4096, 1024]),
                   (f"blk.{i}.attn_output.weight", [4096, 4096]),
                   (f"blk.{i}.ffn_gate.weight", [4096, 14336]),
                   (f"blk.{i}.ffn_up.weight", [4096, 14336]),
                   (f"blk.{i}.ffn_down.weight", [14336, 4096])]
    tensors, offset = [], 0
    for name, dims in shapes:
        n = dims[0] * (dims[1] if len(dims) > 1 else 1)
        ty, size = (0, 4 * n) if len(dims) == 1 else (2, n // 32 * 18)  # F32 norms, Q4_0 rest
        tensors.append((name, dims, ty, offset))
        offset += (size + 31) // 32 * 32
    write(case(out, "q4_0-8b-shaped-sparse"), kv, tensors, sparse_to=offset)

    # Req 18: numbers out of range.
    edited(out, "rope-scaling-factor-0", set_value("llama.rope.scaling.factor", 0.0))
    edited(out, "rope-scaling-factor-neg-1e30", set_value("llama.rope.scaling.factor", -1e30))
    edited(out, "rms-epsilon-neg-1", set_value("llama.attention.layer_norm_rms_epsilon", -1.0))

    # Req 9: control characters in a quoted field.
    edited(out, "architecture-esc52-newline",
           set_value("general.architecture", "x\x1b]52;c;aGk=\x07\nerror: forged"))

    # Req 13: a 4M-token vocabulary over a 400-row embedding, and a 1 MB SentencePiece piece.
    def big_vocab(kv):
        res = []
        for k, t, v in kv:
            # token_type is optional; without it tokens and scores stay under the header
            # walk's 2^23 values.
            if k in ("llama.vocab_size", "tokenizer.ggml.token_type"):
                continue
            if k.startswith("tokenizer.ggml.") and t == ARRAY:
                inner, items = v
                extra = [f"<x{i}>" if inner == STRING else items[-1] for i in range(4_000_000 - len(items))]
                v = (inner, items + extra)
            res.append((k, t, v))
        return res
    edited(out, "vocab-4m-tokens-400-rows", big_vocab)

    def long_piece(kv):
        res = []
        for k, t, v in kv:
            if k == "tokenizer.ggml.tokens":
                inner, items = v
                items = list(items)
                items[300] = "\u2581" * 349_525 + "ab"  # 1 MB of UTF-8
                v = (inner, items)
            res.append((k, t, v))
        return res
    edited(out, "sentencepiece-piece-1mb", long_piece)
    # Issue 40, requirement 6: a window or a layer count of 0 (llama, qwen2 and qwen3 panicked
    # on the window; 0 layers said "--layer 0 is out of range" with no --layer given).
    for arch in ("llama", "qwen2", "qwen3"):
        source = REPO / f"tests/fixtures/gguf/tiny-{arch}.gguf"
        key = f"{arch}.attention.sliding_window"
        edited(out, f"{arch}-sliding-window-0",
               lambda kv, key=key: [(k, t, v) for k, t, v in kv if k != key] + [(key, U32, 0)],
               source=source)
    edited(out, "block-count-0", set_value("llama.block_count", 0))
    print(f"wrote {len(list(out.iterdir()))} GGUF cases to {out}")


if __name__ == "__main__":
    main()
