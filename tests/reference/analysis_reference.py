#!/usr/bin/env python3
"""Independent numpy reference for attnviz's analyses (issue 5, requirement 7).

Reads the committed input attentions (written by make_analysis_inputs.py) and computes, with
numpy alone and straight from the definitions in docs/stats.md:

* per-head statistics after Clark et al. (2019), "What Does BERT Look At?";
* the mean over each layer's heads;
* attention rollout after Abnar & Zuidema (2020);
* word-level merging (attention TO a word sums its pieces, FROM a word averages them);
* special-token exclusion (drop [CLS]/[SEP] rows and columns, renormalise rows);

for five views of every input: token, word, no-special, no-special then word (the order the CLI
uses) and word then no-special. Also, for cross-attention ("cross_cases"), the alignment figures
(entropy, normalised entropy, share on the argmax source unit) and the shares of real tiny BART,
Marian and T5 cross-attentions (transformers eager, make_families.py), each side merged into words
by its own units, special tokens excluded on both sides. Also, for causal attention (a decoder's, where a query sees only
the keys up to its own position), the statistics of the real SmolLM2-135M attentions committed
in ../smollm2.safetensors (transformers' eager attention, see make_real.py), token and word
views, as "causal_cases". Writes

    tests/reference/analysis/expected.json          view metadata, statistics, labels
    tests/reference/analysis/expected.safetensors   "<case>/<view>/weights|layer_means|rollout|rollout_own"

("rollout" is the token-level rollout mapped into the view, for the four views the CLI can make;
"rollout_own" is the rollout of the view's own matrices.)

The Rust test `tests/suite/analysis_reference.rs` rebuilds each view with attnviz and compares to 1e-6.

This is deliberately written in matrix form (selection/averaging matrices, masks, einsum), not
as a transliteration of the Rust loops, so that the two implementations can disagree.

Usage: python3 tests/reference/analysis_reference.py      (needs numpy and safetensors)
"""

import json
import unicodedata
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file, save_file

HERE = Path(__file__).resolve().parent / "analysis"

# Label thresholds (docs/stats.md).
POSITIONAL = 0.5  # share to the previous / next token strictly above this
BROAD = 0.85  # normalised entropy at or above this
SINK = 0.5  # share to [CLS] + [SEP] strictly above this


# ---------------------------------------------------------------------------------------------
# Units: a "view" is (tokens/labels, per-unit metadata, attention [L, H, m, m]).


def is_bert_punctuation(ch):
    """BERT's BasicTokenizer rule: ASCII symbols and punctuation, or Unicode category P*."""
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def punctuation_mask(labels, special):
    return np.array(
        [
            (not s) and len(t) > 0 and all(is_bert_punctuation(c) for c in t)
            for t, s in zip(labels, special)
        ]
    )


def token_view(case, att):
    n = len(case["tokens"])
    return {
        "level": "token",
        "special_excluded": False,
        "tokens": list(case["tokens"]),
        "token_type_ids": list(case["token_type_ids"]),
        "special": list(case["special"]),
        "word_ids": list(case["word_ids"]),
        "spans": [[i, i + 1] for i in range(n)],
        "att": att.astype(np.float64),
    }


def to_words(view):
    """Merge word pieces into words: R @ A @ C.

    R (m x n) averages the rows of a word's pieces, C (n x m) sums their columns. A word is the set
    of non-special units sharing (segment, word id); every special unit is a word of its own.
    Rows without mass (possible only after special-token exclusion) are left out of the average,
    so R depends on the matrix: R[w, t] = 1 / (live pieces of w) for each live piece t.
    """
    n = len(view["tokens"])
    keys, members = [], {}
    for i in range(n):
        if view["special"][i]:
            key = ("special", i)
        else:
            key = ("word", view["token_type_ids"][i], view["word_ids"][i])
        if key not in members:
            keys.append(key)
            members[key] = []
        members[key].append(i)
    m = len(keys)
    M = np.zeros((m, n))  # membership: M[w, t] = 1 if token t belongs to word w
    for u, key in enumerate(keys):
        M[u, members[key]] = 1.0
    C = M.T
    live = (view["att"].sum(axis=-1) > 0).astype(np.float64)  # [L, H, n]
    summed = np.einsum("lhqk,kv->lhqv", view["att"], C)  # columns of each word added
    numer = np.einsum("wq,lhq,lhqv->lhwv", M, live, summed)
    count = np.einsum("wq,lhq->lhw", M, live)[..., None]
    att = np.divide(numer, count, out=np.zeros_like(numer), where=count > 0)

    def label(idx):
        pieces = [view["tokens"][i] for i in idx]
        return "".join(p[2:] if p.startswith("##") and j > 0 else p for j, p in enumerate(pieces))

    first = [members[k][0] for k in keys]
    return {
        "level": "word",
        "special_excluded": view["special_excluded"],
        "tokens": [label(members[k]) for k in keys],
        "token_type_ids": [view["token_type_ids"][i] for i in first],
        "special": [view["special"][i] for i in first],
        "word_ids": [view["word_ids"][i] for i in first],
        "spans": [[view["spans"][members[k][0]][0], view["spans"][members[k][-1]][1]] for k in keys],
        "att": att,
    }


def without_special(view):
    """Drop special units' rows and columns; divide each row by its remaining mass.

    A row with no remaining mass (all of it was on special units) stays all zeros.
    """
    keep = ~np.array(view["special"], dtype=bool)
    sub = view["att"][:, :, keep][:, :, :, keep]
    mass = sub.sum(axis=-1, keepdims=True)
    safe = np.where(mass > 0, mass, 1.0)
    att = np.where(mass > 0, sub / safe, 0.0)
    pick = lambda xs: [x for x, k in zip(xs, keep) if k]  # noqa: E731
    return {
        "level": view["level"],
        "special_excluded": True,
        "tokens": pick(view["tokens"]),
        "token_type_ids": pick(view["token_type_ids"]),
        "special": pick(view["special"]),
        "word_ids": pick(view["word_ids"]),
        "spans": pick(view["spans"]),
        "att": att,
    }


# ---------------------------------------------------------------------------------------------
# Statistics (Clark et al. 2019, section 3), one value per layer and head.


def head_statistics(view):
    att = view["att"]  # [L, H, m, m]
    L, H, m, _ = att.shape
    labels = view["tokens"]
    special = np.array(view["special"], dtype=bool)
    cls_cols = np.array([s and t == "[CLS]" for t, s in zip(labels, special)])
    sep_cols = np.array([s and t == "[SEP]" for t, s in zip(labels, special)])
    punct_cols = punctuation_mask(labels, special)

    row_mass = att.sum(axis=-1)  # [L, H, m]
    live = row_mass > 0  # rows that are a distribution at all
    n_live = live.sum(axis=-1)  # [L, H]

    def row_mean(per_row):  # mean over live query rows
        total = np.where(live, per_row, 0.0).sum(axis=-1)
        return np.divide(total, n_live, out=np.zeros_like(total), where=n_live > 0)

    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(att > 0, att * np.log(np.where(att > 0, att, 1.0)), 0.0)
    entropy = row_mean(-plogp.sum(axis=-1))
    entropy_norm = entropy / np.log(m) if m > 1 else np.zeros_like(entropy)

    q = np.arange(m)
    dist = np.abs(q[:, None] - q[None, :]).astype(np.float64)  # |i - j|
    distance = row_mean((att * dist).sum(axis=-1))

    shift = lambda k: np.eye(m, m, k)  # noqa: E731  1 where key = query + k
    share = {
        "cls": row_mean(att @ cls_cols.astype(np.float64)),
        "sep": row_mean(att @ sep_cols.astype(np.float64)),
        "punct": row_mean(att @ punct_cols.astype(np.float64)),
        "self": row_mean((att * shift(0)).sum(axis=-1)),
        "prev": row_mean((att * shift(-1)).sum(axis=-1)),
        "next": row_mean((att * shift(1)).sum(axis=-1)),
    }

    label = np.full((L, H), "none", dtype=object)
    for l in range(L):
        for h in range(H):
            if share["prev"][l, h] > POSITIONAL:
                label[l, h] = "positional-previous"
            elif share["next"][l, h] > POSITIONAL:
                label[l, h] = "positional-next"
            elif entropy_norm[l, h] >= BROAD:
                label[l, h] = "broad"
            elif share["cls"][l, h] + share["sep"][l, h] > SINK:
                label[l, h] = "special-sink"

    return {
        "entropy": entropy,
        "entropy_norm": entropy_norm,
        "distance": distance,
        "cls": share["cls"],
        "sep": share["sep"],
        "punct": share["punct"],
        "self": share["self"],
        "prev": share["prev"],
        "next": share["next"],
        "rows": n_live.astype(np.float64),
        "label": label.tolist(),
    }


def causal_head_statistics(view):
    """Statistics under a causal mask (docs/stats.md, "Kinds and masks").

    Key k is masked for query q when it starts at or after the end of q (token spans). A row that
    sees one key has no choice and is left out of every mean; the normalised entropy of row q is
    H_q / ln(keys q sees); the next-token share is not defined (always masked: NaN); the share
    to the first token (the unit starting at token 0, the attention sink) is.
    """
    att = view["att"]
    L, H, m, _ = att.shape
    starts = np.array([s[0] for s in view["spans"]])
    ends = np.array([s[1] for s in view["spans"]])
    visible = (starts[None, :] < ends[:, None]).sum(axis=-1)  # [m]
    assert np.all(np.where(starts[None, :] >= ends[:, None], att, 0.0) == 0.0), "masked mass"
    special = np.array(view["special"], dtype=bool)
    # A unit's text is its surface without surrounding whitespace, or its label when it has no
    # surface (docs/stats.md, "Which keys are which").
    texts = [s.strip() if s else t for s, t in zip(view["surfaces"], view["tokens"])]
    punct_cols = punctuation_mask(texts, special)
    first = (starts == 0).astype(np.float64)
    counted = (att.sum(axis=-1) > 0) & (visible > 1)[None, None, :]  # [L, H, m]
    n_rows = counted.sum(axis=-1)

    def row_mean(per_row):
        total = np.where(counted, per_row, 0.0).sum(axis=-1)
        return np.divide(total, n_rows, out=np.zeros_like(total), where=n_rows > 0)

    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(att > 0, att * np.log(np.where(att > 0, att, 1.0)), 0.0)
        row_h = -plogp.sum(axis=-1)
        norm_h = np.where(visible > 1, row_h / np.log(np.maximum(visible, 2)), 0.0)
    q = np.arange(m)
    dist = np.abs(q[:, None] - q[None, :]).astype(np.float64)
    shift = lambda k: np.eye(m, m, k)  # noqa: E731
    stats = {
        "entropy": row_mean(row_h),
        "entropy_norm": row_mean(norm_h),
        "distance": row_mean((att * dist).sum(axis=-1)),
        "cls": row_mean(att @ np.array([r == "start" for r in view["roles"]], dtype=np.float64)),
        "sep": row_mean(att @ np.array([r == "end" for r in view["roles"]], dtype=np.float64)),
        "first": row_mean(att @ first),
        "punct": row_mean(att @ punct_cols.astype(np.float64)),
        "self": row_mean((att * shift(0)).sum(axis=-1)),
        "prev": row_mean((att * shift(-1)).sum(axis=-1)),
        "next": np.full((L, H), np.nan),
    }
    label = np.full((L, H), "none", dtype=object)
    for l in range(L):
        for h in range(H):
            if stats["prev"][l, h] > POSITIONAL:
                label[l, h] = "positional-previous"
            elif stats["entropy_norm"][l, h] >= BROAD:
                label[l, h] = "broad"
            elif stats["first"][l, h] > SINK:
                label[l, h] = "first-token-sink"
            elif stats["cls"][l, h] + stats["sep"][l, h] > SINK:
                label[l, h] = "special-sink"
    stats["rows"] = n_rows.astype(np.float64)
    stats["label"] = label.tolist()
    return stats


def byte_level_surfaces(tokens):
    """The text of each byte-level BPE token (GPT-2's byte-to-character table undone): a token
    holding only part of a character stands for no text of its own (empty), the one that
    completes it for the whole character."""
    chars = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(
        range(ord("®"), ord("ÿ") + 1))
    table, extra = {}, 0
    for b in range(256):
        if b in chars:
            table[chr(b)] = b
        else:
            table[chr(256 + extra)] = b
            extra += 1
    out, pending = [], b""
    for t in tokens:
        pending += bytes(table[c] for c in t)
        try:
            out.append(pending.decode("utf-8"))
            pending = b""
        except UnicodeDecodeError:
            out.append("")
    return out


CAUSAL_CASES = ["fox", "unicode"]


def causal_cases(tensors):
    real = json.loads((HERE.parent / "smollm2.json").read_text())
    weights = load_file(str(HERE.parent / "smollm2.safetensors"))
    cases = []
    for case in real["cases"]:
        if case["name"] not in CAUSAL_CASES:
            continue
        n = case["n"]
        att = weights[case["attentions"]["tensor"]].astype(np.float64)
        base = {
            "level": "token",
            "special_excluded": False,
            "tokens": case["tokens"],
            "token_type_ids": [0] * n,
            "special": [bool(s) for s in case["special_tokens_mask"]],
            "roles": ["special" if s else ("piece" if i > 0 and case["word_ids"][i] == case["word_ids"][i - 1] else "word")
                      for i, s in enumerate(case["special_tokens_mask"])],
            "word_ids": case["word_ids"],
            "surfaces": byte_level_surfaces(case["tokens"]),
            "spans": [[i, i + 1] for i in range(n)],
            "att": att,
        }
        views = {}
        for vname, fns in [("token", []), ("word", [to_words])]:
            v = base
            for fn in fns:
                v = fn(v)
            if vname == "word":
                groups = [[i for i in range(n) if base["spans"][i][0] >= s[0] and base["spans"][i][1] <= s[1]]
                          for s in v["spans"]]
                v["roles"] = [base["roles"][g[0]] for g in groups]
                v["surfaces"] = ["".join(base["surfaces"][i] for i in g).strip() for g in groups]
            stats = causal_head_statistics(v)
            views[vname] = {
                "level": v["level"],
                "spans": v["spans"],
                "stats": {k: (x if k == "label" else [[None if np.isnan(y) else y for y in row] for row in x.tolist()])
                          for k, x in stats.items()},
            }
            tensors[f"causal/{case['name']}/{vname}/weights"] = v["att"].astype(np.float32)
        cases.append({
            "name": case["name"],
            "source": "smollm2.safetensors " + case["attentions"]["tensor"],
            "text": case["text"],
            "tokens": case["tokens"],
            "input_ids": case["input_ids"],
            "word_ids": case["word_ids"],
            "roles": base["roles"],
            "surfaces": base["surfaces"],
            "model": {"layers": real["config"]["layers"], "heads": real["config"]["heads"],
                      "kv_heads": real["config"]["kv_heads"], "head_dim": real["config"]["head_dim"],
                      "hidden_size": real["config"]["hidden_size"]},
            "views": views,
        })
    return cases


# ---------------------------------------------------------------------------------------------
# Cross-attention (encoder–decoder models): decoder units (rows) over source units (columns).
# Real attentions of the tiny random BART, Marian and T5 checkpoints that transformers computed
# (make_families.py): teacher-forced, long source vs short target and the reverse.

CROSS_MODELS = ["tiny-bart", "tiny-marian", "tiny-t5"]
CROSS_CASES = ["long_source", "long_target"]


def sentencepiece_surfaces(tokens, special):
    return ["" if s else t.replace("\u2581", " ") for t, s in zip(tokens, special)]


def side(tokens, special, word_ids, surfaces):
    """One side's units at token level: roles by position (a special unit first in the sequence
    starts it, any other special unit ends it or pads it), words as given."""
    roles = []
    for i, (t, s) in enumerate(zip(tokens, special)):
        if not s:
            same = i > 0 and not special[i - 1] and word_ids[i] is not None and word_ids[i] == word_ids[i - 1]
            roles.append("piece" if same else "word")
        elif "pad" in t:
            roles.append("pad")
        else:
            roles.append("start" if i == 0 else "end")
    return {"tokens": list(tokens), "special": [bool(x) for x in special], "roles": roles,
            "word_ids": list(word_ids), "surfaces": list(surfaces),
            "spans": [[i, i + 1] for i in range(len(tokens))]}


def marker_word_ids(tokens, special, marker):
    """Word ids of target tokens: a token starting with the model's word marker (Ġ, ▁) starts a
    word, any other ordinary token continues the one before (a special token breaks words)."""
    out, word, prev = [], -1, False
    for t, s in zip(tokens, special):
        if s:
            out.append(None)
            prev = False
            continue
        if not prev or t.startswith(marker):
            word += 1
        out.append(word)
        prev = True
    return out


def membership(units):
    """M[w, t] = 1 when token t belongs to word w (a word: consecutive ordinary units with one
    word id; each special unit alone)."""
    groups = []
    for i in range(len(units["tokens"])):
        joins = (i > 0 and not units["special"][i] and not units["special"][i - 1]
                 and units["word_ids"][i] is not None and units["word_ids"][i] == units["word_ids"][i - 1])
        if joins:
            groups[-1].append(i)
        else:
            groups.append([i])
    M = np.zeros((len(groups), len(units["tokens"])))
    for w, g in enumerate(groups):
        M[w, g] = 1.0
    return M, groups


def merge_side(units, groups):
    return {
        "tokens": ["".join(units["surfaces"][i] for i in g).strip() or "".join(units["tokens"][i] for i in g)
                   for g in groups],
        "special": [units["special"][g[0]] for g in groups],
        "roles": [units["roles"][g[0]] for g in groups],
        "word_ids": [units["word_ids"][g[0]] for g in groups],
        "surfaces": ["".join(units["surfaces"][i] for i in g) for g in groups],
        "spans": [[units["spans"][g[0]][0], units["spans"][g[-1]][1]] for g in groups],
    }


def cross_to_words(view):
    """R_q · A · C_k with the rows merged by the decoder's words and the columns by the source's;
    piece rows without mass left out of their word's mean."""
    Mq, gq = membership(view["q"])
    Mk, gk = membership(view["k"])
    att = view["att"]
    live = (att.sum(axis=-1) > 0).astype(np.float64)
    summed = np.einsum("lhqk,wk->lhqw", att, Mk)
    numer = np.einsum("uq,lhq,lhqw->lhuw", Mq, live, summed)
    count = np.einsum("uq,lhq->lhu", Mq, live)[..., None]
    merged = np.divide(numer, count, out=np.zeros_like(numer), where=count > 0)
    return {"q": merge_side(view["q"], gq), "k": merge_side(view["k"], gk), "att": merged}


def cross_without_special(view):
    keep_q = ~np.array(view["q"]["special"])
    keep_k = ~np.array(view["k"]["special"])
    sub = view["att"][:, :, keep_q][:, :, :, keep_k]
    mass = sub.sum(axis=-1, keepdims=True)
    att = np.where(mass > 0, sub / np.where(mass > 0, mass, 1.0), 0.0)
    pick = lambda units, keep: {k: [x for x, f in zip(v, keep) if f] for k, v in units.items()}  # noqa: E731
    return {"q": pick(view["q"], keep_q), "k": pick(view["k"], keep_k), "att": att}


def cross_statistics(view):
    """Alignment figures (docs/stats.md, "Alignment") and the shares cross-attention defines."""
    att = view["att"]  # [L, H, m, n]
    n = att.shape[-1]
    live = att.sum(axis=-1) > 0
    n_live = live.sum(axis=-1)

    def row_mean(per_row):
        total = np.where(live, per_row, 0.0).sum(axis=-1)
        return np.divide(total, n_live, out=np.zeros_like(total), where=n_live > 0)

    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(att > 0, att * np.log(np.where(att > 0, att, 1.0)), 0.0)
    entropy = row_mean(-plogp.sum(axis=-1))
    k = view["k"]
    texts = [s.strip() if s else t for s, t in zip(k["surfaces"], k["tokens"])]
    punct = punctuation_mask(texts, k["special"]).astype(np.float64)
    start = np.array([r == "start" for r in k["roles"]], dtype=np.float64)
    end = np.array([r == "end" for r in k["roles"]], dtype=np.float64)
    return {
        "entropy": entropy,
        "entropy_norm": entropy / np.log(n) if n > 1 else np.zeros_like(entropy),
        "argmax_share": row_mean(att.max(axis=-1)),
        "to_start": row_mean(att @ start),
        "to_end": row_mean(att @ end),
        "to_punct": row_mean(att @ punct),
        "rows": n_live.astype(np.float64),
    }


CROSS_VIEWS = {
    "token": [],
    "word": [cross_to_words],
    "nospecial": [cross_without_special],
    "nospecial_word": [cross_without_special, cross_to_words],
}


def cross_cases(tensors):
    cases = []
    for model in CROSS_MODELS:
        meta = json.loads((HERE.parent / f"{model}.json").read_text())
        weights = load_file(str(HERE.parent / f"{model}.safetensors"))
        specials = {v[0] for k, v in meta["special_tokens"].items() if k != "unk_token"}
        byte_level = meta["family"] == "bart"
        for case in meta["cases"]:
            if case["name"] not in CROSS_CASES:
                continue
            src_special = [bool(x) for x in case["special_tokens_mask"]]
            tgt = case["decoder_tokens"]
            tgt_special = [t in specials for t in tgt]
            if byte_level:
                src_surf = [("" if s else x) for x, s in zip(byte_level_surfaces(case["tokens"]), src_special)]
                tgt_surf = [("" if s else x) for x, s in zip(byte_level_surfaces(tgt), tgt_special)]
                marker = "\u0120"
            else:
                src_surf = sentencepiece_surfaces(case["tokens"], src_special)
                tgt_surf = sentencepiece_surfaces(tgt, tgt_special)
                marker = "\u2581"
            base = {
                "q": side(tgt, tgt_special, marker_word_ids(tgt, tgt_special, marker), tgt_surf),
                "k": side(case["tokens"], src_special,
                          case["word_ids"] or marker_word_ids(case["tokens"], src_special, marker),
                          src_surf),
                "att": weights[f"{case['name']}.cross.attentions"].astype(np.float64),
            }
            name = f"{model}/{case['name']}"
            views = {}
            for vname, fns in CROSS_VIEWS.items():
                v = base
                for fn in fns:
                    v = fn(v)
                stats = cross_statistics(v)
                views[vname] = {
                    "queries": v["q"]["tokens"],
                    "keys": v["k"]["tokens"],
                    "stats": {k: x.tolist() for k, x in stats.items()},
                }
                tensors[f"cross/{name}/{vname}/weights"] = v["att"].astype(np.float32)
            cases.append({
                "name": name,
                "source": f"{model}.safetensors {case['name']}.cross.attentions",
                "layers": meta["config"]["decoder_layers"] if "decoder_layers" in meta["config"]
                else meta["config"].get("num_decoder_layers", meta["config"].get("num_layers")),
                "heads": int(base["att"].shape[1]),
                "decoder": base["q"],
                "encoder": base["k"],
                "views": views,
            })
    return cases


# ---------------------------------------------------------------------------------------------
# Aggregates.


def layer_means(att):
    return att.mean(axis=1)  # [L, m, m]


def rollout(att):
    """Abnar & Zuidema (2020): A_hat_l = rownorm(mean_h A_l + I); R_l = A_hat_l @ R_{l-1}, R_0 = A_hat_0."""
    L, _, m, _ = att.shape
    out = np.zeros((L, m, m))
    acc = np.eye(m)
    for l in range(L):
        a = att[l].mean(axis=0) + np.eye(m)
        a = a / a.sum(axis=-1, keepdims=True)
        acc = a @ acc
        out[l] = acc
    return out


def map_through(view_fns, token_view_, matrices):
    """Apply the same view transforms to per-layer token matrices [L, n, n] (as one-head layers)."""
    v = dict(token_view_)
    v["att"] = matrices[:, None, :, :]
    for fn in view_fns:
        v = fn(v)
    return v["att"][:, 0]


VIEWS = {
    "token": [],
    "word": [to_words],
    "nospecial": [without_special],
    "nospecial_word": [without_special, to_words],
    "word_nospecial": [to_words, without_special],
}

# Views the CLI can produce (--words, --no-special, both): their rollout is computed on the
# token-level attention and mapped through the same steps.
CLI_VIEWS = ["token", "word", "nospecial", "nospecial_word"]


def main():
    meta = json.loads((HERE / "inputs.json").read_text())
    inputs = load_file(str(HERE / "inputs.safetensors"))
    expected = {"source": "analysis_reference.py", "thresholds": {
        "positional": POSITIONAL, "broad": BROAD, "sink": SINK}, "cases": []}
    tensors = {}
    for case in meta["cases"]:
        name = case["name"]
        base = token_view(case, inputs[name])
        token_rollout = rollout(base["att"])
        views = {}
        for vname, fns in VIEWS.items():
            v = base
            for fn in fns:
                v = fn(v)
            stats = head_statistics(v)
            views[vname] = {
                "level": v["level"],
                "special_excluded": v["special_excluded"],
                "tokens": v["tokens"],
                "token_type_ids": v["token_type_ids"],
                "special": v["special"],
                "word_ids": v["word_ids"],
                "spans": v["spans"],
                "stats": {k: (x if k == "label" else x.tolist()) for k, x in stats.items()},
            }
            key = f"{name}/{vname}"
            tensors[f"{key}/weights"] = v["att"].astype(np.float32)
            tensors[f"{key}/layer_means"] = layer_means(v["att"])
            if vname in CLI_VIEWS:
                tensors[f"{key}/rollout"] = map_through(fns, base, token_rollout)
            tensors[f"{key}/rollout_own"] = rollout(v["att"])
        expected["cases"].append({"name": name, "views": views})
    expected["causal_cases"] = causal_cases(tensors)
    expected["cross_cases"] = cross_cases(tensors)
    with open(HERE / "expected.json", "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")
    save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()},
              str(HERE / "expected.safetensors"))
    (HERE / "expected.safetensors").chmod(0o644)
    for case in expected["cases"]:
        labels = case["views"]["token"]["stats"]["label"]
        counts = {}
        for row in labels:
            for lab in row:
                counts[lab] = counts.get(lab, 0) + 1
        print(case["name"], counts)
    for case in expected["causal_cases"]:
        counts = {}
        for row in case["views"]["token"]["stats"]["label"]:
            for lab in row:
                counts[lab] = counts.get(lab, 0) + 1
        print("causal", case["name"], counts)
    for case in expected["cross_cases"]:
        a = np.array(case["views"]["token"]["stats"]["argmax_share"])
        print("cross", case["name"], "argmax share %.3f-%.3f" % (a.min(), a.max()))


if __name__ == "__main__":
    main()
