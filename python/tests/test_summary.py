"""attnviz.run(summarise=True): the summaries as numpy arrays equal the CLI's JSON ``summary``
section of the same request (one library RunRequest behind both), bit for bit, on the tiny
Llama fixture (causal, grouped heads) and the tiny BERT (bidirectional); bad keyword values
raise ValueError or TypeError naming the keyword."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import attnviz

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
BIN = Path(os.environ.get("ATTNVIZ_BIN", REPO / "target" / "release" / "attnviz"))
TEXT = "the quick brown fox jumps over the lazy dog"


def cli_summary(*args: str) -> dict:
    out = subprocess.run(
        [str(BIN), *args, "--summarise", "--json", "-", "--full-precision", "-q"],
        check=True,
        capture_output=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    return json.loads(out.stdout)["summary"]


@pytest.mark.parametrize("fixture", ["tiny-llama", "tiny-bert"])
def test_summary_arrays_equal_the_cli_json(fixture):
    model = str(FIXTURES / fixture)
    doc = cli_summary("-m", model, TEXT, "--top-keys", "5", "--query", "0,7", "--layers", "0,1")
    r = attnviz.run(TEXT, model=model, summarise=True, top_keys=5, rows=[7, 0], layers=[0, 1])
    s = r.summary
    assert s is not None
    for key in ("queries", "keys", "top_k", "pool", "distance_bins", "rows"):
        assert s[key] == doc[key], key
    assert s["layers"] == [layer["layer"] for layer in doc["layers"]]
    n = s["queries"]
    assert s["top_keys"].shape == (2, s["heads"], n, 5)
    for li, layer in enumerate(doc["layers"]):
        assert len(layer["heads"]) == s["heads"]
        for h, head in enumerate(layer["heads"]):
            for name in ("sink", "entropy", "distance"):
                assert np.array_equal(s[name][li, h], np.array(head[name], dtype=np.float32)), name
            assert np.array_equal(s["pooled"][li, h], np.array(head["pooled"], dtype=np.float32))
            assert np.array_equal(s["full_rows"][li, h], np.array(head["rows"], dtype=np.float32))
            for q in range(n):
                kept = s["top_keys"][li, h, q]
                real = kept[kept >= 0]
                assert real.tolist() == head["top_keys"][q], (li, h, q)
                assert np.array_equal(
                    s["top_weights"][li, h, q, : len(real)],
                    np.array(head["top_weights"][q], dtype=np.float32),
                )
                assert np.all(s["top_weights"][li, h, q, len(real):] == 0)
    assert s["learned_sink"] is None
    assert r.attention.shape[0] == 0, "a summarised run keeps no layer"


def test_summary_keywords_are_checked():
    model = str(FIXTURES / "tiny-llama")
    with pytest.raises(ValueError, match="top_keys=0"):
        attnviz.run("hi there", model=model, summarise=True, top_keys=0)
    with pytest.raises(TypeError, match="top_keys"):
        attnviz.run("hi there", model=model, summarise=True, top_keys="3")
    with pytest.raises(TypeError, match="rows"):
        attnviz.run("hi there", model=model, summarise=True, rows=["a"])
    with pytest.raises(ValueError, match="summarise=True"):
        attnviz.run("hi there", model=model, rows=[1])
    with pytest.raises(TypeError, match="summarise"):
        attnviz.run("hi there", model=model, summarise="yes")
    with pytest.raises(ValueError, match="summarised run"):
        attnviz.run("hi there", model=model, summarise=True, generate=2)
