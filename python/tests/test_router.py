"""A mixture-of-experts model's router and gpt-oss's learned-sink shares as arrays
(``Report.router``, ``Report.sink_shares``), against transformers' own (eager, float32), caught
at the TopKRouter modules by tests/reference/make_moe.py and make_gpt_oss.py and committed in
tests/reference/tiny-<model>.safetensors; and against the CLI's JSON of the same run.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

import attnviz

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "tests" / "reference"
FIXTURES = REPO / "tests" / "fixtures"
BIN = Path(os.environ.get("ATTNVIZ_BIN", REPO / "target" / "release" / "attnviz"))


def safetensors(path: Path) -> dict:
    """A safetensors file's float32 tensors, read by its documented layout (no library)."""
    raw = path.read_bytes()
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + size])
    out = {}
    for name, t in header.items():
        if name == "__metadata__" or t["dtype"] != "F32":
            continue
        a, b = t["data_offsets"]
        out[name] = np.frombuffer(raw[8 + size + a : 8 + size + b], "<f4").reshape(t["shape"])
    return out


def reference(model: str):
    meta = json.loads((REFERENCE / f"tiny-{model}.json").read_text())
    case = next(c for c in meta["cases"] if c["name"] == "single")
    return meta, case, safetensors(REFERENCE / f"tiny-{model}.safetensors")


@pytest.mark.parametrize("model", ["qwen3_moe", "gpt_oss", "mixtral", "olmoe"])
def test_router_arrays_are_transformers_own(model):
    meta, case, t = reference(model)
    r = attnviz.run(case["text"], model=str(FIXTURES / f"tiny-{model}"))
    router = r.router
    assert router is not None
    want = meta["router"]
    assert router["experts"] == want["experts"] and router["top_k"] == want["top_k"]
    assert router["layers"] == want["routed_layers"]
    assert router["tokens"] == r.tokens
    n, k, e = len(r.tokens), want["top_k"], want["experts"]
    layers = len(want["routed_layers"])
    assert router["chosen"].shape == (layers, n, k) and router["chosen"].dtype == np.int32
    assert router["probs"].shape == (layers, n, e) and router["probs"].dtype == np.float32
    chosen = t["single.router.chosen"].astype(np.int32)
    assert np.array_equal(router["chosen"], chosen), "the same experts, in the same order"
    assert np.abs(router["weights"] - t["single.router.weights"]).max() <= 1e-5
    assert np.abs(router["probs"] - t["single.router.probs"]).max() <= 1e-5
    # The load counts transformers' choices.
    for i in range(layers):
        assert np.array_equal(router["load"][i], np.bincount(chosen[i].ravel(), minlength=e))
    # The tokens routed to an expert, as the docstring says to find them.
    e0 = int(chosen[0, 0, 0])
    tokens = np.nonzero((router["chosen"][0] == e0).any(axis=1))[0]
    assert 0 in tokens and len(tokens) == router["load"][0][e0]


def test_sink_shares_are_transformers_own_and_explain_the_rows():
    _, case, t = reference("gpt_oss")
    r = attnviz.run(case["text"], model=str(FIXTURES / "tiny-gpt_oss"))
    shares = r.sink_shares
    assert shares is not None and shares.dtype == np.float32
    assert shares.shape == r.attention.shape[:3]
    assert np.abs(shares - t["single.sinks"]).max() <= 1e-5
    # Each row's weights and its share on the sink make 1.
    assert np.abs(r.attention.sum(axis=-1, dtype=np.float64) + shares - 1).max() <= 1e-5


def test_a_dense_model_has_no_router_and_no_sinks():
    r = attnviz.run("The quick brown fox", model=str(FIXTURES / "tiny-llama"))
    assert r.router is None and r.sink_shares is None
    with pytest.raises(ValueError, match="no router view"):
        r.html(view="router")


def test_the_report_opens_on_the_router_view():
    r = attnviz.run("The quick brown fox", model=str(FIXTURES / "tiny-olmoe"))
    page = r.html(view="router")
    meta = json.loads(page.split('id="attnviz-meta">', 1)[1].split("</script>", 1)[0])
    assert meta["initial"]["view"] == "router"
    assert [l["layer"] for l in meta["router"]["layers"]] == r.router["layers"]


def test_router_figure_and_the_cli_json_agree(tmp_path):
    text = "The quick brown fox jumps over the lazy dog"
    path = str(FIXTURES / "tiny-qwen3_moe")
    r = attnviz.run(text, model=path)
    out = subprocess.run(
        [str(BIN), "-m", path, text, "--json", "-", "--full-precision", "-q"],
        check=True,
        capture_output=True,
    )
    doc = json.loads(out.stdout)["router"]
    router = r.router
    assert router["layers"] == [l["layer"] for l in doc["layers"]]
    assert router["chosen"].tolist() == [l["chosen"] for l in doc["layers"]]
    assert router["load"].tolist() == [l["load"] for l in doc["layers"]]
    assert np.array_equal(router["weights"], np.array([l["weights"] for l in doc["layers"]], np.float32))
    # The router figure at a routed layer; a dense layer (Qwen3-MoE's layer 1 here) is refused
    # naming the routed ones.
    png = r.png(tmp_path / "router.png", figure="router", layer=0)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<svg" in r.svg(tmp_path / "router.svg", figure="router", layer=2).read_text()
    with pytest.raises(ValueError, match="layer 1 is dense"):
        r.png(tmp_path / "dense.png", figure="router", layer=1)
    dense = attnviz.run("The quick brown fox", model=str(FIXTURES / "tiny-llama"))
    with pytest.raises(ValueError, match="has none"):
        dense.png(tmp_path / "none.png", figure="router")
