"""Write the hostile model folders of issue 8 (item 4) into a folder, one sub-folder per case.

    python3 scripts/hostile_inputs.py OUT [--flood-mb 300]

Standard library only. Each case is a model folder that attnviz must refuse in one line, quickly
and with bounded memory; `scripts/measure-hostile.sh` runs attnviz on each under /usr/bin/time.
The integration tests build the same cases in Rust (tests/suite/hostile.rs); this script exists
to measure them through the CLI at full size (a 300 MB opcode flood, say).

- pickle-laughs-zip / pickle-laughs-legacy: a "billion laughs" pickle (a memo entry referenced
  twice, 40 times over) as the state dict of a zip or pre-1.6 `pytorch_model.bin`.
- pickle-flood-zip / pickle-flood-legacy: a pickle of nothing but NONE opcodes (on the stack);
  pickle-flood-list-zip: the same appended to a list in batches (into memory, off the stack);
  pickle-nesting-zip: a tuple nested a million levels deep.
- config-*: the tiny BERT with one config.json value replaced by a huge one.
- nan-* / inf-*: the tiny BERT with one weight replaced by NaN or +inf, as safetensors, as a zip
  `pytorch_model.bin` and as a legacy one.
- attention-overflow: finite weights, but the embedding of "cat" is 3e38 everywhere, so the
  attention of any sentence with "cat" overflows to NaN.
"""
import argparse
import io
import json
import math
import os
import pickle
import shutil
import struct
import zipfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = os.path.join(REPO, "tests", "fixtures", "tiny-bert")
FORMATS = os.path.join(REPO, "tests", "fixtures", "checkpoint_formats")
ELEMENT_SIZE = {"FloatStorage": 4, "LongStorage": 8, "HalfStorage": 2, "DoubleStorage": 8}
LEGACY_MAGIC = bytes.fromhex("80028a0a6cfc9c46f9206aa850192e")


def laughs(levels=40):
    """A pickle whose object graph doubles `levels` times through memo references: 2**levels
    leaves when expanded, a few hundred bytes on disk."""
    out = bytearray(b"\x80\x02]q\x00")  # PROTO 2, EMPTY_LIST, BINPUT 0
    for i in range(1, levels + 1):
        # MARK, BINGET i-1, BINGET i-1, TUPLE, BINPUT i  ->  memo[i] = (memo[i-1], memo[i-1])
        out += b"(h" + bytes([i - 1]) + b"h" + bytes([i - 1]) + b"tq" + bytes([i])
    # A dict {"x": memo[levels]}, so a reader looking for a state dict walks into it.
    out += b"}X\x01\x00\x00\x00xh" + bytes([levels]) + b"s."
    return bytes(out)


def flood(size):
    """PROTO 2, `size` NONE opcodes, STOP."""
    return b"\x80\x02" + b"N" * size + b"."


def flood_list(size):
    """PROTO 2, EMPTY_LIST, then batches of MARK, 999 NONE, APPENDS, up to `size` bytes."""
    batch = b"(" + b"N" * 999 + b"e"
    return b"\x80\x02]" + batch * (size // len(batch)) + b"."


def nesting(depth):
    """PROTO 2, NONE wrapped in `depth` one-element tuples (TUPLE1)."""
    return b"\x80\x02N" + b"\x85" * depth + b"."


def pickle_int(n):
    return b"\x80\x02M" + struct.pack("<H", n) + b"."


def legacy(state_pickle):
    """A pre-1.6 torch.save stream: magic, protocol 1001, sys_info, the state pickle, keys."""
    sys_info = b"\x80\x02}(X\r\x00\x00\x00little_endian\x88u."
    return LEGACY_MAGIC + pickle_int(1001) + sys_info + state_pickle + b"\x80\x02]."


def torch_zip(path, entries):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for name, data in entries:
            z.writestr(name, data)


def copy_side_files(src, dst):
    os.makedirs(dst, exist_ok=True)
    for f in os.listdir(src):
        if f in ("config.json", "vocab.txt", "tokenizer_config.json", "tokenizer.json"):
            shutil.copy(os.path.join(src, f), os.path.join(dst, f))


def poke_safetensors(src, dst, tensor, value):
    data = bytearray(open(src, "rb").read())
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    start = 8 + n + header[tensor]["data_offsets"][0]
    data[start : start + 4] = struct.pack("<f", value)
    open(dst, "wb").write(data)


class _Records(pickle.Unpickler):
    """Unpickles a torch state dict without torch: rebuild functions become records of
    (storage key, element offset, shape); storages become their keys. Runs no code."""

    def find_class(self, module, name):
        if name.startswith("_rebuild_tensor"):
            return lambda storage, offset, size, *rest: ("tensor", storage, offset, size)
        if name == "_rebuild_parameter":
            return lambda data, *rest: data
        if name == "OrderedDict":
            return dict
        return name  # storage classes: only their names are needed

    def persistent_load(self, pid):
        return (pid[2], pid[1])  # (key, storage class name)


def _query_weight(records):
    name = next(k for k in records if k.endswith("encoder.layer.0.attention.self.query.weight"))
    _, (key, _cls), offset, _size = records[name]
    return key, offset


def poke_bin(src, dst, value):
    """Replace the first element of layer 0's query weight in a .bin (zip or legacy)."""
    raw = open(src, "rb").read()
    if raw[:4] == b"PK\x03\x04":
        with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
            pkl = next(n for n in zin.namelist() if n.endswith("data.pkl"))
            key, offset = _query_weight(_Records(io.BytesIO(zin.read(pkl))).load())
            target = pkl[: -len("data.pkl")] + "data/" + key
            for info in zin.infolist():
                data = bytearray(zin.read(info.filename))
                if info.filename == target:
                    data[offset * 4 : offset * 4 + 4] = struct.pack("<f", value)
                zout.writestr(info.filename, bytes(data))
        return
    f = io.BytesIO(raw)
    f.read(len(LEGACY_MAGIC))
    for _ in range(2):  # protocol version, sys_info
        _Records(f).load()
    records = _Records(f).load()
    key, offset = _query_weight(records)
    elem = {r[1][0]: ELEMENT_SIZE[r[1][1]] for r in records.values() if isinstance(r, tuple)}
    data = bytearray(raw)
    for k in _Records(f).load():
        (count,) = struct.unpack("<q", f.read(8))
        start = f.tell()
        if k == key:
            at = start + offset * 4
            data[at : at + 4] = struct.pack("<f", value)
        f.seek(start + count * elem[k])
    open(dst, "wb").write(data)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--flood-mb", type=int, default=300)
    args = ap.parse_args()
    out = args.out
    os.makedirs(out, exist_ok=True)
    zip_base = os.path.join(FORMATS, "zip")

    d = os.path.join(out, "pickle-laughs-zip")
    copy_side_files(zip_base, d)
    torch_zip(os.path.join(d, "pytorch_model.bin"), [("archive/data.pkl", laughs()), ("archive/version", b"3\n")])
    d = os.path.join(out, "pickle-laughs-legacy")
    copy_side_files(zip_base, d)
    open(os.path.join(d, "pytorch_model.bin"), "wb").write(legacy(laughs()))

    size = args.flood_mb << 20
    d = os.path.join(out, "pickle-flood-zip")
    copy_side_files(zip_base, d)
    torch_zip(os.path.join(d, "pytorch_model.bin"), [("archive/data.pkl", flood(size)), ("archive/version", b"3\n")])
    d = os.path.join(out, "pickle-flood-legacy")
    copy_side_files(zip_base, d)
    open(os.path.join(d, "pytorch_model.bin"), "wb").write(legacy(flood(size)))

    d = os.path.join(out, "pickle-flood-list-zip")
    copy_side_files(zip_base, d)
    torch_zip(os.path.join(d, "pytorch_model.bin"), [("archive/data.pkl", flood_list(size)), ("archive/version", b"3\n")])
    d = os.path.join(out, "pickle-nesting-zip")
    copy_side_files(zip_base, d)
    torch_zip(os.path.join(d, "pytorch_model.bin"), [("archive/data.pkl", nesting(1 << 20)), ("archive/version", b"3\n")])

    d = os.path.join(out, "attention-overflow")
    copy_side_files(TINY, d)
    vocab = open(os.path.join(TINY, "vocab.txt")).read().split("\n")
    data = bytearray(open(os.path.join(TINY, "model.safetensors"), "rb").read())
    (n,) = struct.unpack("<Q", data[:8])
    entry = json.loads(data[8 : 8 + n])["embeddings.word_embeddings.weight"]
    hidden = entry["shape"][1]
    start = 8 + n + entry["data_offsets"][0] + vocab.index("cat") * hidden * 4
    data[start : start + hidden * 4] = struct.pack("<f", 3e38) * hidden
    open(os.path.join(d, "model.safetensors"), "wb").write(data)

    base_cfg = json.load(open(os.path.join(TINY, "config.json")))
    for field, value in [
        ("hidden_size", 10**9),
        ("intermediate_size", 10**12),
        ("vocab_size", 10**17),
        ("num_hidden_layers", 10**18),
    ]:
        d = os.path.join(out, f"config-{field}")
        copy_side_files(TINY, d)
        shutil.copy(os.path.join(TINY, "model.safetensors"), d)
        cfg = dict(base_cfg, **{field: value})
        if field == "hidden_size":
            cfg["num_attention_heads"] = 1
        json.dump(cfg, open(os.path.join(d, "config.json"), "w"))

    for name, value in [("nan", math.nan), ("inf", math.inf)]:
        d = os.path.join(out, f"{name}-safetensors")
        copy_side_files(TINY, d)
        poke_safetensors(
            os.path.join(TINY, "model.safetensors"),
            os.path.join(d, "model.safetensors"),
            "encoder.layer.0.attention.self.query.weight",
            value,
        )
        for fmt in ("zip", "legacy"):
            d = os.path.join(out, f"{name}-bin-{fmt}")
            copy_side_files(os.path.join(FORMATS, fmt), d)
            poke_bin(os.path.join(FORMATS, fmt, "pytorch_model.bin"), os.path.join(d, "pytorch_model.bin"), value)
    print(out)


if __name__ == "__main__":
    main()
