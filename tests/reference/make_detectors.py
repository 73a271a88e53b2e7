#!/usr/bin/env python3
"""Reference head-detector scores (TransformerLens's head_detector, "mul" measure) from
transformers' attentions, for tests/suite/detectors.rs.

    .cache/venv-ref/bin/python tests/reference/make_detectors.py

TransformerLens is not installed here; its detection patterns are ported to numpy line by line
(transformer_lens/head_detector.py: get_previous_token_head_detection_pattern,
get_duplicate_token_head_detection_pattern, get_induction_head_detection_pattern,
compute_head_attention_similarity_score with error_measure="mul", exclude_bos=False,
exclude_current_token=False): score = (A * P).sum() / A.sum().

attnviz's duplicate-token score counts both sides for bidirectional attention (TransformerLens
keeps only earlier copies, the tril of its pattern); for the encoder case the pattern here is the
full one, built separately. For causal models the two are the same (later keys carry no weight),
and the pattern used is TransformerLens's.

Induction: the probe attnviz builds (docs/stats.md, "Head detectors"): SplitMix64 from seed 0,
`x mod vocab_size`, kept when the id is a real, non-special token not drawn before, until 25
ids (fewer for a short context: (max_positions - specials) // 2); the ids twice, between the
special tokens the tokenizer puts around a text (those around "x"). Reimplemented here from that
description, and checked against attnviz's ids by the test.

Models: tiny GPT-2, tiny Llama (grouped-query attention, RoPE), tiny BERT (bidirectional) and
real SmolLM2-135M-Instruct (GGUF, dequantised by transformers) from .cache/models.
Writes tests/reference/detectors.json.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModel, AutoModelForCausalLM, AutoTokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reflib import FIXTURES, REFERENCE, REPO, setup_determinism, versions, write_json  # noqa: E402

SMOL_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
PERIOD = 25
SEED = 0
MASK64 = (1 << 64) - 1

MODELS = [
    # name, folder, causal, text
    ("tiny-gpt2", FIXTURES / "tiny-gpt2", True, "the cat sat on the mat and the cat sat on the hat"),
    ("tiny-llama", FIXTURES / "tiny-llama", True, "the cat sat on the mat and the cat sat on the hat"),
    ("tiny-bert", FIXTURES / "tiny-bert", False, "the cat sat on the mat and the cat sat on the hat"),
    ("smollm2", REPO / ".cache/models/smollm2", True, "The cat sat on the mat. The cat sat on the mat again."),
]


def load(folder: Path, causal: bool):
    extra = dict(gguf_file=SMOL_GGUF) if (folder / SMOL_GGUF).exists() else {}
    tok = AutoTokenizer.from_pretrained(folder, **extra)
    cls = AutoModelForCausalLM if causal else AutoModel
    model = cls.from_pretrained(folder, attn_implementation="eager", dtype=torch.float32, **extra).eval()
    return tok, model


# --- TransformerLens's detection patterns, in numpy ------------------------------------------


def previous_token_pattern(tokens: np.ndarray) -> np.ndarray:
    n = len(tokens)
    p = np.zeros((n, n))
    p[1:, :-1] = np.eye(n - 1)
    return np.tril(p)


def duplicate_token_pattern(tokens: np.ndarray) -> np.ndarray:
    token_pattern = np.tile(tokens, (len(tokens), 1))
    eq_mask = np.equal(token_pattern, token_pattern.T).astype(int)
    np.fill_diagonal(eq_mask, 0)
    return np.tril(eq_mask.astype(float))


def duplicate_token_pattern_both_sides(tokens: np.ndarray) -> np.ndarray:
    """attnviz's extension for bidirectional attention: every other copy, earlier or later."""
    eq = np.equal(tokens[:, None], tokens[None, :]).astype(float)
    np.fill_diagonal(eq, 0)
    return eq


def induction_pattern(tokens: np.ndarray) -> np.ndarray:
    duplicate = duplicate_token_pattern(tokens)
    shifted = np.roll(duplicate, 1, axis=1)
    result = np.concatenate([np.zeros((len(tokens), 1)), shifted[:, 1:]], axis=1)
    return np.tril(result)


def mul_score(attention: np.ndarray, pattern: np.ndarray) -> float:
    return float((attention * pattern).sum() / attention.sum())


# --- the probe ---------------------------------------------------------------------------------


def splitmix64(state: int):
    while True:
        state = (state + 0x9E3779B97F4A7C15) & MASK64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        yield z ^ (z >> 31)


def probe_ids(tok, vocab: int, max_positions: int) -> tuple[list[int], int]:
    wrapped = tok("x", add_special_tokens=True)["input_ids"]
    plain = tok("x", add_special_tokens=False)["input_ids"]
    # The special tokens around "x": what is left of the wrapped ids around the plain ones.
    start = next(i for i in range(len(wrapped)) if wrapped[i : i + len(plain)] == plain)
    lead, trail = wrapped[:start], wrapped[start + len(plain) :]
    period = min(PERIOD, (max_positions - len(lead) - len(trail)) // 2)
    special = set(tok.all_special_ids) | {i for i, t in tok.added_tokens_decoder.items() if t.special}
    drawn: list[int] = []
    rng = splitmix64(SEED)
    tries = 0
    while len(drawn) < period and tries < 64 * max(vocab, period):
        tries += 1
        i = next(rng) % vocab
        if i in special or i in drawn or tok.convert_ids_to_tokens(i) is None:
            continue
        drawn.append(i)
    return lead + drawn + drawn + trail, period


@torch.no_grad()
def attentions(model, ids: list[int]) -> list[np.ndarray]:
    t = torch.tensor([ids])
    out = model(input_ids=t, attention_mask=torch.ones_like(t), output_attentions=True)
    return [a[0].double().numpy() for a in out.attentions]


def reference(name: str, folder: Path, causal: bool, text: str) -> dict:
    tok, model = load(folder, causal)
    cfg = model.config
    ids = tok(text)["input_ids"]
    tokens = np.array(ids)
    prev_p = previous_token_pattern(tokens)
    dup_p = duplicate_token_pattern(tokens) if causal else duplicate_token_pattern_both_sides(tokens)
    prev, dup = [], []
    for a in attentions(model, ids):
        prev.append([mul_score(a[h], prev_p) for h in range(a.shape[0])])
        dup.append([mul_score(a[h], dup_p) for h in range(a.shape[0])])
    max_positions = getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "n_positions")
    probe, period = probe_ids(tok, cfg.vocab_size, max_positions)
    ind_p = induction_pattern(np.array(probe))
    induction = [[mul_score(a[h], ind_p) for h in range(a.shape[0])] for a in attentions(model, probe)]
    return dict(
        name=name,
        folder=str(folder.relative_to(REPO)),
        causal=causal,
        text=text,
        input_ids=ids,
        prev_token_score=prev,
        duplicate_token_score=dup,
        probe_ids=probe,
        period=period,
        induction_score=induction,
    )


def main() -> None:
    setup_determinism(20261202)
    cases = [reference(*m) for m in MODELS]
    write_json(
        REFERENCE / "detectors.json",
        dict(
            versions=versions(),
            made_by="tests/reference/make_detectors.py",
            method="transformers eager float32 attentions; TransformerLens head_detector patterns "
            "ported to numpy, mul measure, float64",
            cases=cases,
        ),
    )
    for c in cases:
        best = max(max(r) for r in c["induction_score"])
        print(c["name"], "n =", len(c["input_ids"]), "probe", len(c["probe_ids"]), "max induction", round(best, 4))


if __name__ == "__main__":
    main()
