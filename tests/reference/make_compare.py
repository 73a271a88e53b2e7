#!/usr/bin/env python3
"""Reference values for `attnviz diff` (crates/analysis/src/compare/): A − B per head and the per-head
Jensen–Shannon distance of two attention exports, computed here with numpy alone, written
independently of the Rust code from the rules in docs/compare.md.

    .cache/venv-ref/bin/python tests/reference/make_compare.py [--make-exports]

With --make-exports it first writes the inputs (attnviz JSON exports, format version 2) with the
release binary (`cargo build --release` first):

    minilm-cat.json      all-MiniLM-L6-v2 (bash scripts/fetch-minilm.sh), "The cat sat on the mat."
    minilm-dog.json      all-MiniLM-L6-v2, "The big dog sat on the unbelievably soft mat!"
    distilbert-cat.json  tests/fixtures/tiny-distilbert, "The cat sat on the mat."
    electra-cat.json     tests/fixtures/tiny-electra (the same vocab.txt as tiny-distilbert),
                         "The cat sat on the mat."
    roberta-cat.json     tests/fixtures/tiny-roberta (byte-level BPE), "The cat sat on the mat."
    gpt2-a.json          tests/fixtures/tiny-gpt2 (causal), "The cat sat on the mat."
    gpt2-b.json          tests/fixtures/tiny-gpt2, "A cat sat on a mat today."

Then, for each case in CASES, it reads the two exports, merges pieces into words where the case
compares words (rows of a word averaged, columns summed, as docs/render.md's `--words`), aligns
the units (longest common subsequence; tokens by label, words by lower-cased text, special
tokens by role), and writes tests/fixtures/compare/<case>.reference.json:

    basis, level, layers, heads, query_pairs, only_a, only_b,
    distance[layer][head] (null where no row compares), rows[layer][head],
    diff[layer][head][query][key] (A − B over the paired units, 0 where either side masks;
        where a side can attend keys the other cannot, its row is first taken as shares of
        the keys both can attend),
    ranked [[layer, head], ...] (farthest first; ties by layer, then head),
    masks_differ (whether A and B can attend different cells)

A row's distance needs at least two keys both sides can attend (one key holds the whole of
both rows: nothing to compare).

tests/suite/diff.rs checks attnviz's comparison of the same two files against these (1e-6).
"""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "fixtures" / "compare"
BIN = ROOT / "target" / "release" / "attnviz"

CAT = "The cat sat on the mat."
EXPORTS = {
    "minilm-cat.json": (".cache/models/all-MiniLM-L6-v2", CAT),
    "minilm-dog.json": (".cache/models/all-MiniLM-L6-v2", "The big dog sat on the unbelievably soft mat!"),
    "distilbert-cat.json": ("tests/fixtures/tiny-distilbert", CAT),
    "electra-cat.json": ("tests/fixtures/tiny-electra", CAT),
    "roberta-cat.json": ("tests/fixtures/tiny-roberta", CAT),
    "gpt2-a.json": ("tests/fixtures/tiny-gpt2", CAT),
    "gpt2-b.json": ("tests/fixtures/tiny-gpt2", "A cat sat on a mat today."),
}

# name: (A, B, compare at word level, compare only the shared layers/heads)
CASES = {
    "minilm-two-sentences": ("minilm-cat.json", "minilm-dog.json", False, False),
    "same-file": ("minilm-cat.json", "minilm-cat.json", False, False),
    "two-models-one-tokenizer": ("distilbert-cat.json", "electra-cat.json", False, False),
    "two-tokenizers": ("electra-cat.json", "roberta-cat.json", False, False),
    "causal-two-sentences": ("gpt2-a.json", "gpt2-b.json", False, False),
    "forced-words": ("minilm-cat.json", "minilm-dog.json", True, False),
    # A bidirectional encoder against a causal decoder: each side's own mask, compared over
    # the cells both can attend.
    "bidirectional-against-causal": ("minilm-cat.json", "gpt2-a.json", True, True),
}

SPECIAL = {"start", "end", "pad", "special"}


def make_exports():
    # Run from the repository root with the model's relative path, so that the export's model id
    # is that path, the same on every machine, not where this checkout happens to be.
    for name, (model, text) in EXPORTS.items():
        cmd = [str(BIN), "-m", model, text, "--json", str(OUT / name), "-q"]
        subprocess.run(cmd, check=True, cwd=ROOT)


def load(name):
    d = json.load(open(OUT / name))
    units = {
        "labels": d["tokens"],
        "display": d["display"],
        "roles": d["roles"],
        "word_ids": d["word_ids"],
        "segments": d["segments"],
        "generated": d["generated"],
        "spans": [tuple(s) for s in d["spans"]],
        "scheme": d["label_scheme"],
    }
    att = np.array(d["attention"], dtype=np.float64)
    windows = [m.get("window") for m in d["layer_masks"]]
    return {"units": units, "att": att, "mask": d["mask"], "windows": windows,
            "level": d["level"], "layer_numbers": d["layer_numbers"]}


def word_groups(u):
    groups = []
    for i in range(len(u["labels"])):
        joins = (
            i > 0
            and u["roles"][i] not in SPECIAL
            and u["roles"][i - 1] not in SPECIAL
            and u["word_ids"][i] is not None
            and u["word_ids"][i] == u["word_ids"][i - 1]
            and u["segments"][i] == u["segments"][i - 1]
            and u["generated"][i] == u["generated"][i - 1]
        )
        if joins:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def to_words(side):
    u = side["units"]
    groups = word_groups(u)
    att = side["att"]
    # Columns of a word summed, rows averaged over the pieces whose row has weight.
    cols = np.stack([att[..., g].sum(axis=-1) for g in groups], axis=-1)
    rows = []
    for g in groups:
        block = cols[..., g, :]  # [L, H, pieces, words]
        live = block.sum(axis=-1) > 0
        n = np.maximum(live.sum(axis=-1, keepdims=True), 1)
        rows.append((block * live[..., None]).sum(axis=-2) / n)
    merged = np.stack(rows, axis=-2)
    surf = lambda g: "".join(side["surfaces"][i] for i in g).strip()  # noqa: E731
    labels = []
    for g in groups:
        text = surf(g)
        labels.append(text if text else "".join(u["labels"][i] for i in g))
    words = {
        "labels": labels,
        "display": labels,
        "roles": [u["roles"][g[0]] for g in groups],
        "spans": [(u["spans"][g[0]][0], u["spans"][g[-1]][1]) for g in groups],
        "scheme": u["scheme"],
    }
    return dict(side, units=words, att=merged, level="word")


def key(u, i, level):
    if u["roles"][i] in SPECIAL:
        return "\x01" + u["roles"][i]
    return u["labels"][i] if level == "token" else u["labels"][i].strip().lower()


def align(a, b):
    p = 0
    while p < min(len(a), len(b)) and a[p] == b[p]:
        p += 1
    s = 0
    while s < min(len(a), len(b)) - p and a[len(a) - 1 - s] == b[len(b) - 1 - s]:
        s += 1
    ma, mb = a[p:len(a) - s], b[p:len(b) - s]
    n, m = len(ma), len(mb)
    lcs = np.zeros((n + 1, m + 1), dtype=np.int64)
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            lcs[i, j] = lcs[i + 1, j + 1] + 1 if ma[i] == mb[j] else max(lcs[i + 1, j], lcs[i, j + 1])
    pairs = [(i, i) for i in range(p)]
    only_a, only_b = [], []
    i = j = 0
    while i < n and j < m:
        if ma[i] == mb[j]:
            pairs.append((p + i, p + j))
            i += 1
            j += 1
        elif lcs[i + 1, j] >= lcs[i, j + 1]:
            only_a.append(p + i)
            i += 1
        else:
            only_b.append(p + j)
            j += 1
    only_a += [p + k for k in range(i, n)]
    only_b += [p + k for k in range(j, m)]
    pairs += [(len(a) - s + k, len(b) - s + k) for k in range(s)]
    return pairs, only_a, only_b


def masked(side, layer, q, k):
    qs, ks = side["units"]["spans"][q], side["units"]["spans"][k]
    if side["mask"] == "causal" and ks[0] >= qs[1]:
        return True
    w = side["windows"][layer]
    return w is not None and qs[0] >= (max(ks[1], 1) - 1) + w


def js_distance(p, q):
    """sqrt of the Jensen–Shannon divergence in bits, of two distributions (each summing to 1)."""
    m = 0.5 * (p + q)
    with np.errstate(divide="ignore", invalid="ignore"):
        kp = np.where(p > 0, p * np.log2(p / m), 0.0).sum()
        kq = np.where(q > 0, q * np.log2(q / m), 0.0).sum()
    return float(np.sqrt(np.clip(0.5 * kp + 0.5 * kq, 0.0, 1.0)))


def compare(a, b, words, shared):
    la, ha = a["att"].shape[:2]
    lb, hb = b["att"].shape[:2]
    if (la, ha) != (lb, hb) and not shared:
        raise SystemExit("shapes differ")
    schemes = {a["units"]["scheme"], b["units"]["scheme"]} - {"plain"}
    words = words or len(schemes) > 1 or "word" in (a["level"], b["level"])
    if words:
        a, b = to_words(a), to_words(b)
    level = "word" if words else "token"
    ka = [key(a["units"], i, level) for i in range(len(a["units"]["labels"]))]
    kb = [key(b["units"], i, level) for i in range(len(b["units"]["labels"]))]
    pairs, only_a, only_b = align(ka, kb)
    qa = [p[0] for p in pairs]
    qb = [p[1] for p in pairs]
    layers, heads = min(la, lb), min(ha, hb)

    def restrict(side, qs, dropped):
        m = side["att"][:layers, :heads][:, :, qs][:, :, :, qs]
        if dropped:
            s = m.sum(axis=-1, keepdims=True)
            m = np.where(s > 0, m / np.where(s > 0, s, 1), m)
        return m

    wa = restrict(a, qa, bool(only_a))
    wb = restrict(b, qb, bool(only_b))
    n = len(pairs)
    va = np.array([[[not masked(a, l, qa[q], qa[k]) for k in range(n)] for q in range(n)]
                   for l in range(layers)])
    vb = np.array([[[not masked(b, l, qb[q], qb[k]) for k in range(n)] for q in range(n)]
                   for l in range(layers)])
    vis = va & vb

    def compared(w, own):
        """Each row over the cells both see; as shares of them where this side sees more."""
        out = np.where(vis[:, None], w, 0.0)
        more = (own != vis).any(axis=-1)  # [L, n]: rows where this side sees more keys
        s = out.sum(axis=-1, keepdims=True)
        shares = np.where(s > 0, out / np.where(s > 0, s, 1), out)
        return np.where(more[:, None, :, None], shares, out)

    ca, cb = compared(wa, va), compared(wb, vb)
    distance, rows = [], []
    for l in range(layers):
        dl, rl = [], []
        for h in range(heads):
            ds = []
            for q in range(n):
                v = vis[l, q]
                p, r = wa[l, h, q][v], wb[l, h, q][v]
                if v.sum() >= 2 and p.sum() > 0 and r.sum() > 0:
                    ds.append(js_distance(p / p.sum(), r / r.sum()))
            dl.append(float(np.mean(ds)) if ds else None)
            rl.append(len(ds))
        distance.append(dl)
        rows.append(rl)
    diff = ca - cb
    ranked = sorted(((l, h) for l in range(layers) for h in range(heads) if distance[l][h] is not None),
                    key=lambda lh: (-distance[lh[0]][lh[1]], lh[0], lh[1]))
    same = not only_a and not only_b
    return {
        "basis": "words" if words else ("same_units" if same else "aligned_tokens"),
        "level": level,
        "layers": layers,
        "heads": heads,
        "query_pairs": pairs,
        "only_a": only_a,
        "only_b": only_b,
        "distance": distance,
        "rows": rows,
        "diff": diff.tolist(),
        "ranked": [list(x) for x in ranked],
        "masks_differ": bool((va != vb).any()),
    }


def main():
    if "--make-exports" in sys.argv:
        make_exports()
    for name, (fa, fb, words, shared) in CASES.items():
        a, b = load(fa), load(fb)
        for side, f in ((a, fa), (b, fb)):
            side["surfaces"] = json.load(open(OUT / f))["surfaces"]
        ref = compare(a, b, words, shared)
        ref.update({"a": fa, "b": fb, "words": words, "shared": shared})
        with open(OUT / f"{name}.reference.json", "w") as f:
            json.dump(ref, f)
        d = [x for r in ref["distance"] for x in r if x is not None]
        print(f"{name}: {ref['basis']}, {len(ref['query_pairs'])} units paired, "
              f"{ref['layers']}×{ref['heads']} heads, distance {min(d):.4f}–{max(d):.4f}")


if __name__ == "__main__":
    main()
