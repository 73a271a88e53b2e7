"""attnviz.run's head attribution and ablation (attribution=, target_token=, contrast=, ablate=):
the same library run request as the CLI's --attribution, --target-token, --contrast and
--ablate. Each head's numbers on the tiny GPT-2 fixture equal transformers' with PyTorch hooks
(tests/reference/make_lens.py, committed in tests/reference/lens.json) to 1e-4, and the CLI's
JSON sections bit for bit; bad keyword values raise ValueError or TypeError naming the keyword."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

import attnviz

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
GPT2 = str(FIXTURES / "tiny-gpt2")
BERT = str(FIXTURES / "tiny-bert")
BIN = Path(os.environ.get("ATTNVIZ_BIN", REPO / "target" / "release" / "attnviz"))
TOL = 1e-4


def reference(name: str) -> dict:
    doc = json.loads((REPO / "tests" / "reference" / "lens.json").read_text())
    return next(c for c in doc["attributions"] if c["name"] == name)


def cli_json(*args: str) -> dict:
    out = subprocess.run(
        [str(BIN), *args, "--json", "-", "--full-precision", "-q"],
        check=True,
        capture_output=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    return json.loads(out.stdout)


def close(ours: np.ndarray, want, what: str) -> None:
    want = np.asarray(want, dtype=np.float64)
    assert ours.shape == want.shape, what
    err = np.abs(ours.astype(np.float64) - want) / np.maximum(1.0, np.abs(want))
    assert err.max() <= TOL, f"{what}: worst {err.max():.2e} at {np.unravel_index(err.argmax(), err.shape)}"


def test_attribution_matches_the_hooks_and_the_cli():
    ref = reference("tiny-gpt2")
    r = attnviz.run(ref["text"], model=GPT2, attribution=True)
    a = r.head_attribution
    assert r.head_ablation is None and r.lens is None
    assert a["target"]["id"] == ref["target"], "the default target is the model's own prediction"
    assert a["contrast"] is None and a["position"] == len(ref["input_ids"]) - 1
    assert a["per_head"].dtype == np.float32 and a["per_head"].shape == (a["layers"], a["heads"])
    close(a["per_head"], ref["per_head"], "per head")
    assert abs(a["logit"] - ref["logit"]) <= TOL * max(1.0, abs(ref["logit"]))
    # The parts sum to the logit of the whole residual.
    parts = a["embeddings"] + a["per_head"].astype(np.float64).sum() + sum(a["rest"]) + a["norm_bias"]
    assert abs(parts - a["logit"]) <= TOL * max(1.0, abs(a["logit"]))
    # The ranked list is the grid's heads by |value|.
    top = a["ranked"][0]
    assert a["per_head"][top["layer"], top["head"]] == top["value"]
    assert abs(top["value"]) == np.abs(a["per_head"]).max()
    doc = cli_json("-m", GPT2, ref["text"], "--attribution")
    assert np.array_equal(a["per_head"], np.asarray(doc["head_attribution"]["per_head"], dtype=np.float32))
    assert a["target"] == doc["head_attribution"]["target"]


def test_target_token_and_contrast():
    ref = reference("tiny-gpt2")
    # The reference's contrast token (id 269) as text; its per-head logit is the target's less
    # the difference's.
    r = attnviz.run(ref["text"], model=GPT2, target_token=" m")
    a = r.head_attribution
    assert a["target"] == {"id": ref["contrast"], "text": " m"} and r.head_ablation is None
    close(a["per_head"], np.asarray(ref["per_head"]) - np.asarray(ref["per_head_diff"]), "target ' m'")
    # A contrast is the difference of the two tokens' attributions.
    other = attnviz.run(ref["text"], model=GPT2, target_token=" the").head_attribution
    d = attnviz.run(ref["text"], model=GPT2, contrast=(" m", " the")).head_attribution
    assert d["target"]["text"] == " m" and d["contrast"]["text"] == " the"
    close(d["per_head"], a["per_head"].astype(np.float64) - other["per_head"], "contrast")
    doc = cli_json("-m", GPT2, ref["text"], "--contrast", " m, the")
    assert np.array_equal(d["per_head"], np.asarray(doc["head_attribution"]["per_head"], dtype=np.float32))


@pytest.mark.parametrize("mode", ["zero", "mean"])
def test_ablation_matches_the_hooks_and_the_cli(mode):
    ref = reference("tiny-gpt2")
    r = attnviz.run(ref["text"], model=GPT2, ablate=True if mode == "zero" else mode)
    b = r.head_ablation
    assert r.head_attribution is None, "ablation alone does not attribute"
    assert b["mode"] == mode and b["target"]["id"] == ref["target"]
    assert abs(b["base_log_prob"] - ref["base_log_prob"]) <= TOL
    close(b["delta"], ref[f"ablate_{mode}"], f"ablation {mode}")
    doc = cli_json("-m", GPT2, ref["text"], "--ablate", mode)
    assert np.array_equal(b["delta"], np.asarray(doc["head_ablation"]["delta"], dtype=np.float32))
    both = attnviz.run(ref["text"], model=GPT2, attribution=True, ablate=mode)
    assert both.head_attribution is not None and np.array_equal(both.head_ablation["delta"], b["delta"])


def test_bad_values_raise_naming_the_keyword():
    text = "the cat sat"
    with pytest.raises(ValueError, match="decoders with a language-model head"):
        attnviz.run(text, model=BERT, attribution=True)
    with pytest.raises(ValueError, match="target_token"):
        attnviz.run(text, model=GPT2, target_token="the cat sat on")
    with pytest.raises(ValueError, match="target_token is empty"):
        attnviz.run(text, model=GPT2, target_token="")
    with pytest.raises(TypeError, match=r"contrast must be two tokens \(A, B\)"):
        attnviz.run(text, model=GPT2, contrast=" m, the")
    with pytest.raises(TypeError, match=r"contrast\[1\]"):
        attnviz.run(text, model=GPT2, contrast=(" m", 3))
    with pytest.raises(ValueError, match="drop one of them"):
        attnviz.run(text, model=GPT2, target_token=" the", contrast=(" m", " the"))
    with pytest.raises(ValueError, match="ablate 'half' is not one of: zero, mean"):
        attnviz.run(text, model=GPT2, ablate="half")
    with pytest.raises(TypeError, match="ablate must be"):
        attnviz.run(text, model=GPT2, ablate=1)
    with pytest.raises(TypeError, match="attribution must be True or False"):
        attnviz.run(text, model=GPT2, attribution="yes")


def page_meta(page: str) -> dict:
    return json.loads(re.search(r'<script type="application/json" id="attnviz-meta">(.*?)</script>', page, re.S).group(1))


def cli_page(tmp_path: Path, *args: str) -> dict:
    out = tmp_path / "cli.html"
    subprocess.run(
        [str(BIN), *args, "--html", str(out), "-q"],
        check=True,
        capture_output=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    return page_meta(out.read_text())


def test_the_report_carries_the_lens_heads_alti_and_zeroing_views_as_the_cli(tmp_path):
    text = reference("tiny-gpt2")["text"]
    r = attnviz.run(text, model=GPT2, lens=True, attribution=True, ablate=True, alti=True, value_zeroing=True)
    mine = page_meta(r.html())
    cli = cli_page(
        tmp_path, "-m", GPT2, text, "--lens", "--attribution", "--ablate", "zero", "--alti", "--value-zeroing"
    )
    # Opened as the CLI's report is: on the lens, which it was asked for.
    assert mine["initial"]["view"] == cli["initial"]["view"] == "lens"
    for key in ("lens", "head_attribution", "head_ablation"):
        assert mine["analysis"][key] is not None, key
        assert mine["analysis"][key] == cli["analysis"][key], key
    ids = [m["id"] for m in mine["analysis"]["matrices"]]
    assert ids == [m["id"] for m in cli["analysis"]["matrices"]]
    assert {"alti", "alti_layer", "value_zeroing", "value_zeroing_layer"} <= set(ids)
    # The payload (the matrices' numbers) is the CLI's too.
    assert mine["payload"] == cli["payload"]
    assert page_meta(r.html(view="heads"))["initial"]["view"] == "heads"
    # Attribution alone opens on the heads view; a plain run on the head view.
    assert page_meta(attnviz.run(text, model=GPT2, ablate="mean").html())["initial"]["view"] == "heads"
    plain = attnviz.run(text, model=GPT2)
    assert page_meta(plain.html())["initial"]["view"] == "head"
    assert "lens" not in (page_meta(plain.html())["analysis"] or {})


def test_a_view_the_run_did_not_compute_is_refused():
    plain = attnviz.run("the cat sat", model=GPT2)
    with pytest.raises(ValueError, match=r"no lens view; it needs the logit lens: attnviz.run\(..., lens=True\)"):
        plain.html(view="lens")
    with pytest.raises(ValueError, match="no heads view; it needs head attribution or ablation"):
        plain.html(view="heads")
    with pytest.raises(ValueError, match="give attribution=True or ablate=True as well"):
        attnviz.run("the cat sat", model=GPT2, view="heads")
    with pytest.raises(ValueError, match="give lens=True as well"):
        attnviz.run("the cat sat", model=GPT2, view="lens")
    with pytest.raises(ValueError, match="view 'pie' is not one of"):
        attnviz.run("the cat sat", model=GPT2, view="pie")
