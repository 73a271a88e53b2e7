#!/usr/bin/env python3
"""Hostile tokenizer and small model files (issue 20, requirements 13, 15 and 18), one model
folder per case.

    python3 scripts/hostile/tokenizer.py OUT_DIR

Each case is a copy of a tiny fixture model (tests/fixtures/) with one file made hostile; it
runs as `attnviz -m CASE "the cat sat on the mat" --json OUT` (see scripts/measure-hostile.sh).
FIFOs cannot be committed, so those cases make theirs in `setup.sh`. Standard library only.
"""

import base64
import json
import shutil
import struct
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests/fixtures"


def model(out, name, fixture):
    d = out / name
    if d.exists():
        shutil.rmtree(d)
    shutil.copytree(FIXTURES / fixture, d)
    return d


def edit_json(path, edit):
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def charsmap_case(out, name, charsmap, wrap=False):
    d = model(out, name, "tiny-t5")
    normalizer = {"type": "Precompiled",
                  "precompiled_charsmap": base64.b64encode(charsmap).decode()}
    if wrap:
        normalizer = {"type": "Sequence", "normalizers": [normalizer]}
    edit_json(d / "tokenizer.json", lambda t: t.__setitem__("normalizer", normalizer))


def main():
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)

    # Req 13: precompiled charsmaps that panicked spm_precompiled (exit 101).
    t5 = json.loads((FIXTURES / "tiny-t5/tokenizer.json").read_text())
    real = bytearray(base64.b64decode(t5["normalizer"]["precompiled_charsmap"]))
    units = struct.unpack_from("<I", real)[0] // 4
    charsmap_case(out, "charsmap-empty-trie", struct.pack("<I", 0))
    charsmap_case(out, "charsmap-trie-past-end", struct.pack("<I", 1_000_000))
    far = bytearray(real)
    struct.pack_into("<I", far, 4, 0x3FFFFF << 10)
    charsmap_case(out, "charsmap-root-offset-far", bytes(far))
    bad = bytearray(real)
    for i in range(units):
        (u,) = struct.unpack_from("<I", bad, 4 + 4 * i)
        if u >> 31:
            struct.pack_into("<I", bad, 4 + 4 * i, (1 << 31) | 0x7FFFFFF0)
    charsmap_case(out, "charsmap-value-past-strings", bytes(bad))
    charsmap_case(out, "charsmap-empty-trie-in-sequence", struct.pack("<I", 0), wrap=True)

    # Req 13: a Replace normalizer expanding "a" to 1 MiB.
    d = model(out, "replace-a-to-1mib", "tiny-t5")
    edit_json(d / "tokenizer.json", lambda t: t.__setitem__("normalizer", {
        "type": "Replace", "pattern": {"String": "a"}, "content": "x" * (1 << 20)}))

    # Req 13: 10^7 merges, and a 10^7-line vocab.txt.
    d = model(out, "merges-1e7", "tiny-gpt2")
    edit_json(d / "tokenizer.json",
              lambda t: t["model"].__setitem__("merges", ["a b"] * 10_000_000))
    d = model(out, "vocab-txt-1e7-lines", "tiny-bert")
    (d / "tokenizer.json").unlink(missing_ok=True)
    with open(d / "vocab.txt", "a") as f:
        f.write("x\n" * 10_000_000)

    # Req 15: FIFOs as the small files the loader reads (made by setup.sh, before each run).
    for name in ["generation_config.json", "tokenizer_config.json", "special_tokens_map.json",
                 "chat_template.jinja", "tokenizer.json"]:
        d = model(out, "fifo-" + name.replace(".", "-"), "tiny-llama")
        (d / "setup.sh").write_text(f"rm -f {name}\nmkfifo {name}\n")

    # Req 18: generation_config.json and config.json numbers.
    for name, text in [
        ("generation-config-unparseable", '{"eos_token_id": '),
        ("generation-config-eos-out-of-vocab", '{"eos_token_id": 123456}'),
        ("generation-config-forced-bos-out-of-vocab", '{"forced_bos_token_id": 99999}'),
        ("generation-config-forced-eos-negative", '{"forced_eos_token_id": -3}'),
    ]:
        d = model(out, name, "tiny-bart")
        (d / "generation_config.json").write_text(text)
    for name, factor in [("config-rope-factor-0", 0.0), ("config-rope-factor-neg-1e30", -1e30)]:
        d = model(out, name, "tiny-llama")
        edit_json(d / "config.json", lambda c, f=factor: c.__setitem__(
            "rope_scaling", {"rope_type": "linear", "factor": f}))
    print(f"wrote {len(list(out.iterdir()))} tokenizer cases to {out}")


if __name__ == "__main__":
    main()
