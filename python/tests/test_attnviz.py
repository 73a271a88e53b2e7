"""Tests of the attnviz Python package, run by scripts/test.sh in a fresh virtual environment
with the wheel installed (numpy and pytest only: no torch).

References:
- the CLI's JSON export (full precision) of the same model and text: the package must return
  the very same arrays;
- transformers' attention for the tiny BERT fixture, committed in tests/fixtures/render/
  (written by make_render_fixtures.py from tests/reference/tiny-bert.safetensors): head_view
  must keep and draw exactly those weights (the page's payload decoded here independently).
"""

from __future__ import annotations

import base64
import gzip
import html
import inspect
import json
import os
import re
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pytest

import attnviz

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "render"
TINY = REPO / "tests" / "fixtures" / "tiny-bert"
BIN = Path(os.environ.get("ATTNVIZ_BIN", REPO / "target" / "release" / "attnviz"))
MINILM = os.environ.get("ATTNVIZ_MINILM_DIR", str(REPO / ".cache" / "models" / "all-MiniLM-L6-v2"))


def cli_json(*args: str) -> dict:
    out = subprocess.run(
        [str(BIN), *args, "--json", "-", "--full-precision"],
        check=True,
        capture_output=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    return json.loads(out.stdout)


def as_array(nested) -> np.ndarray:
    return np.array(nested, dtype=np.float32)


def page_parts(page: str):
    """The report's metadata and decoded payload sections (crates/render/src/html/payload.rs)."""
    meta = json.loads(re.search(r'<script type="application/json" id="attnviz-meta">(.*?)</script>', page, re.S).group(1))
    blob = re.search(r'<script type="application/octet-stream" id="attnviz-data">(.*?)</script>', page, re.S).group(1)
    raw = base64.b64decode(blob.strip())
    if meta["payload"]["compression"] == "gzip":
        raw = gzip.decompress(raw)
    sections = {}
    for s in meta["payload"]["sections"]:
        n, at = s["length"], s["offset"]
        if s["dtype"] == "u16":
            lo_b = np.frombuffer(raw, np.uint8, n, at).astype(np.uint32)
            hi_b = np.frombuffer(raw, np.uint8, n, at + n).astype(np.uint32)
            q = lo_b | (hi_b << 8)
            values = s["lo"] + q / 65535.0 * (s["hi"] - s["lo"])
        elif s["dtype"] == "u8":
            values = s["lo"] + np.frombuffer(raw, np.uint8, n, at) / 255.0 * (s["hi"] - s["lo"])
        else:
            planes = [np.frombuffer(raw, np.uint8, n, at + i * n) for i in range(4)]
            values = np.stack(planes, axis=1).copy().view("<f4").reshape(n)
        sections[s["name"]] = (values, s["max_error"])
    return meta, sections


def srcdoc_of(inline: str) -> list:
    return [html.unescape(m) for m in re.findall(r'srcdoc="([^"]*)"', inline)]


def tiny_pair():
    z = np.load(FIXTURES / "tiny-bert-pair.npz")
    return z["attention"], [str(t) for t in z["tokens"]], int(z["sentence_b_start"])


# -- run() against the CLI --------------------------------------------------------------------


@pytest.mark.parametrize("model", ["tiny", "minilm"])
def test_run_returns_the_arrays_of_the_cli_json(model):
    path = str(TINY) if model == "tiny" else MINILM
    assert Path(path).is_dir(), f"{path} missing: run scripts/fetch-minilm.sh"
    text, pair = "The quick brown fox jumps over the lazy dog.", "It was not amused."
    doc = cli_json("-m", path, text, "-p", pair, "-q")
    r = attnviz.run(text, model=path, pair=pair)
    assert r.attention.dtype == np.float32
    assert np.array_equal(r.attention, as_array(doc["attention"])), "bit for bit"
    assert r.tokens == doc["tokens"]
    assert r.roles == doc["roles"]
    assert r.sentence_b_start == doc["sentence_b_start"]
    assert r.text == text and r.pair == pair
    for name in ("entropy", "to_start", "to_end", "distance"):
        assert np.allclose(r.stats[name], np.array(doc["stats"][name]), rtol=0, atol=1e-12), name
    # And the package's own JSON is the CLI's.
    mine = json.loads(r.json(full_precision=True))
    # The CLI's --json adds the head detectors' induction probe (a second run of the model);
    # the package's run does not make it yet.
    doc["stats"].pop("induction", None)
    for field in ("attention", "tokens", "roles", "segments", "word_ids", "stats", "kind", "mask"):
        assert mine[field] == doc[field], field


def test_a_local_model_is_named_by_its_folder_unless_full_paths(tmp_path):
    text = "Where is the model?"
    path = str(TINY)
    for full in (False, True):
        r = attnviz.run(text, model=path, full_paths=full)
        want = path if full else "tiny-bert"
        assert r.model == want
        mine = json.loads(r.json())
        assert mine["model"]["id"] == want
        page = r.html()
        meta, _ = page_parts(page)
        assert dict(meta["settings"])["model"] == want
        assert (path in page) == full and (path in r.json()) == full
        # As the CLI writes it.
        flag = ("--full-paths",) if full else ()
        assert cli_json("-m", path, text, "-q", *flag)["model"]["id"] == want
    # A file that does not name its model is named by the file.
    doc = cli_json("-m", path, text, "-q")
    del doc["model"]["id"]
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(doc))
    for full in (False, True):
        r = attnviz.render(bare, full_paths=full)
        want = str(bare) if full else "bare.json"
        assert r.model == want
        assert dict(page_parts(r.html())[0]["settings"])["source"] == want
    with pytest.raises(TypeError):
        attnviz.run(text, model=path, full_paths="yes")


def test_attention_is_a_read_only_view_without_copy():
    r = attnviz.run("The cat sat.", model=str(TINY))
    a, b = r.attention, r.attention
    assert not a.flags.writeable and not a.flags.owndata
    assert np.shares_memory(a, b), "both views read the report's own buffer"
    with pytest.raises(ValueError):
        a[0, 0, 0, 0] = 1.0
    del r
    assert float(a.sum()) > 0, "the view keeps the report alive"


def test_run_options_match_the_cli():
    text = "Unbelievably, the runners kept playing."
    doc = cli_json("-m", str(TINY), text, "--words", "--no-special", "-q")
    r = attnviz.run(text, model=str(TINY), words=True, no_special=True)
    mine = json.loads(r.json(full_precision=True))
    assert mine["tokens"] == doc["tokens"] and mine["level"] == "word"
    assert mine["attention"] == doc["attention"]
    page = r.html()
    meta, _ = page_parts(page)
    assert meta["initial"]["words"] and meta["initial"]["hide_special"]


def test_bad_model_is_one_clear_error():
    with pytest.raises(RuntimeError) as e:
        attnviz.run("x", model="/nonexistent/model/folder")
    assert "\n" not in str(e.value)


# -- head_view / model_view on transformers' arrays --------------------------------------------


def test_head_view_draws_transformers_weights():
    att, tokens, b = tiny_pair()
    outputs_attentions = tuple(att[l][None] for l in range(att.shape[0]))  # (1, heads, n, n) each
    v = attnviz.head_view(outputs_attentions, tokens, sentence_b_start=b, html_action="return")
    assert isinstance(v, attnviz.Report)
    assert np.array_equal(v.attention, att)
    assert v.tokens == tokens and v.sentence_b_start == b
    page = v.html()
    meta, sections = page_parts(page)
    drawn, max_error = sections["attention"]
    assert max_error <= 7.7e-6
    assert np.abs(drawn - att.reshape(-1)).max() <= max_error + 1e-9
    assert meta["tokens"] == tokens and meta["sentence_b_start"] == b
    assert meta["initial"]["view"] == "head"
    roles = meta["roles"]
    assert roles[0] == "start" and roles[b - 1] == "end"
    # The inline display is that same page, in an isolated frame.
    inline = v._repr_html_()
    assert srcdoc_of(inline) == [page]
    assert 'sandbox="allow-scripts allow-downloads"' in inline
    mv = attnviz.model_view(outputs_attentions, tokens, html_action="return")
    assert page_parts(mv.html())[0]["initial"]["view"] == "model"


class FakeTensor:
    """What head_view uses of a torch tensor (detach, cpu, float, numpy), without torch."""

    def __init__(self, a):
        self.a = a
        self.calls = []

    def detach(self):
        self.calls.append("detach")
        return self

    def cpu(self):
        self.calls.append("cpu")
        return self

    def float(self):
        self.calls.append("float")
        return FakeTensor(self.a.astype(np.float32))

    def numpy(self):
        return self.a


def test_head_view_takes_tensors_and_one_array():
    att, tokens, _ = tiny_pair()
    tensors = tuple(FakeTensor(att[l][None].astype(np.float16)) for l in range(att.shape[0]))
    v = attnviz.head_view(tensors, tokens, html_action="return")
    assert tensors[0].calls == ["detach", "cpu", "float"]
    assert np.abs(v.attention - att).max() < 1e-3
    v = attnviz.head_view(att, tokens, html_action="return")
    assert np.array_equal(v.attention, att)
    v = attnviz.head_view(att[:, None], tokens, html_action="return")
    assert np.array_equal(v.attention, att)
    # Outside IPython, html_action='view' returns the view instead of displaying it.
    assert attnviz.head_view(att, tokens) is not None


def test_bertviz_signatures():
    # bertviz 1.4's parameter lists (bertviz/head_view.py, bertviz/model_view.py).
    assert list(inspect.signature(attnviz.head_view).parameters) == [
        "attention", "tokens", "sentence_b_start", "prettify_tokens", "layer", "heads",
        "encoder_attention", "decoder_attention", "cross_attention", "encoder_tokens",
        "decoder_tokens", "include_layers", "html_action",
    ]
    assert list(inspect.signature(attnviz.model_view).parameters) == [
        "attention", "tokens", "sentence_b_start", "prettify_tokens", "display_mode",
        "encoder_attention", "decoder_attention", "cross_attention", "encoder_tokens",
        "decoder_tokens", "include_layers", "include_heads", "html_action",
    ]


def test_prettify_tokens_and_layer_filters():
    att, _, _ = tiny_pair()
    n = att.shape[-1]
    tokens = ["<s>"] + ["Ġw%d" % i if i % 2 else "x%d" % i for i in range(1, n - 1)] + ["</s>"]
    v = attnviz.head_view(att, tokens, html_action="return")
    assert v.tokens[1] == " w1", "shown as bertviz shows them"
    assert v.roles[2] == "piece", "roles read before prettifying"
    raw = attnviz.head_view(att, tokens, prettify_tokens=False, html_action="return")
    assert raw.tokens[1] == "Ġw1"
    v = attnviz.head_view(att, tokens, layer=2, include_layers=[0, 2], html_action="return")
    assert v.shape[0] == 2 and np.array_equal(v.attention[1], att[2])
    assert page_parts(v.html())[0]["initial"]["layer"] == 1
    with pytest.raises(ValueError, match="not in include_layers"):
        attnviz.head_view(att, tokens, layer=1, include_layers=[0, 2])
    m = attnviz.model_view(att, tokens, include_heads=[1, 3], html_action="return")
    assert np.array_equal(m.attention, att[:, [1, 3]])


def test_bad_arrays_get_one_clear_error():
    att, tokens, _ = tiny_pair()
    cases = [
        (lambda: attnviz.head_view(att, tokens[:-1]), "16 queries but 15 tokens"),
        (lambda: attnviz.head_view(att[0], tokens), "3 dimensions"),
        (lambda: attnviz.head_view((att[0],) * 2 + (att[0][:2],), tokens), "different shapes"),
        (lambda: attnviz.head_view(tuple(att[:, None].repeat(2, 1)), tokens), "batch of 2"),
        (lambda: attnviz.head_view((), tokens), 'attn_implementation="eager"'),
        (lambda: attnviz.head_view((None, None), tokens), "output_attentions=True"),
        (lambda: attnviz.head_view(np.log(att), tokens), "not scores"),
        (lambda: attnviz.head_view(att, None), "'tokens' is required"),
        (lambda: attnviz.head_view(html_action="return"), "at least one attention"),
    ]
    for call, want in cases:
        with pytest.raises(ValueError) as e:
            call()
        assert want in str(e.value), str(e.value)
        assert "\n" not in str(e.value)
    nan = att.copy()
    nan[1, 2, 3, 4] = np.nan
    with pytest.raises(ValueError, match="NaN at layer 1, head 2, query 3, key 4"):
        attnviz.head_view(nan, tokens)
    with pytest.warns(attnviz.AttnvizWarning, match=r"rows don't sum to 1.*off by 1.00e-1"):
        attnviz.head_view(att * np.float32(0.9), tokens, html_action="return")


def test_encoder_decoder_arguments():
    z = np.load(FIXTURES / "tiny-bart-single.npz")
    enc, dec, cross = z["encoder_attention"], z["decoder_attention"], z["cross_attention"]
    et, dt = [str(t) for t in z["encoder_tokens"]], [str(t) for t in z["decoder_tokens"]]
    layers = lambda a: tuple(a[l][None] for l in range(a.shape[0]))
    v = attnviz.head_view(
        encoder_attention=layers(enc), decoder_attention=layers(dec), cross_attention=layers(cross),
        encoder_tokens=et, decoder_tokens=dt, html_action="return",
    )
    assert isinstance(v, attnviz.Views)
    assert np.array_equal(v["Encoder"].attention, enc)
    assert v["Decoder"].mask == "causal"
    assert v["Cross"].shape == (3, 4, 32, 30) and v["Cross"].key_tokens[0] == et[0]
    inline = v._repr_html_()
    pages = srcdoc_of(inline)
    assert len(pages) == 1, "one page holds every kind"
    meta, sections = page_parts(pages[0])
    assert [k["kind"] for k in meta["kinds"]] == ["encoder", "decoder", "cross"]
    assert meta["open_kind"] == "cross"
    ck = meta["kinds"][2]
    # Decoder rows, encoder columns (the tokens prettified as the reports show them).
    assert ck["tokens"] == v["Cross"].tokens and len(ck["tokens"]) == len(dt) == 32
    assert ck["keys"]["tokens"] == v["Cross"].key_tokens and len(ck["keys"]["tokens"]) == len(et) == 30
    # transformers' cross-attention, stored within the documented error.
    values, max_error = sections["attention:cross"]
    assert values.shape == (3 * 4 * 32 * 30,) == (cross.size,)
    assert np.abs(values - cross.reshape(-1)).max() <= max_error * (1 + 1e-6)
    assert [s["id"] for s in ck["analysis"]["stats"]][0] == "argmax_share"
    only_cross = attnviz.model_view(
        cross_attention=layers(cross), encoder_tokens=et, decoder_tokens=dt, html_action="return"
    )
    meta, _ = page_parts(srcdoc_of(only_cross._repr_html_())[0])
    assert meta["kind"] == "cross" and meta["initial"]["view"] == "model"
    assert meta["keys"]["tokens"] == v["Cross"].key_tokens, "one kind alone: a page of that kind"
    with pytest.raises(ValueError, match="may not specify any encoder-decoder"):
        attnviz.head_view(enc, et, encoder_attention=enc)
    with pytest.raises(ValueError, match="decoder_tokens"):
        attnviz.head_view(cross_attention=layers(cross), encoder_tokens=et)


def test_several_views_are_isolated_and_offline():
    att, tokens, _ = tiny_pair()
    a = attnviz.head_view(att, tokens, html_action="return")._repr_html_()
    b = attnviz.model_view(att, tokens, html_action="return")._repr_html_()
    for inline in (a, b):
        assert inline.count("<iframe") == 1 and "sandbox=" in inline
        outside = re.sub(r'srcdoc="[^"]*"', "", inline)
        assert "<script" not in outside, "nothing outside the frame needs JavaScript"
        assert "Trust Notebook" in outside, "an untrusted notebook says what to do"
        page = srcdoc_of(inline)[0]
        assert "default-src 'none'" in page
        assert not re.search(r'(src|href)="(https?:)?//', page), "no external resource"


# -- files ----------------------------------------------------------------------------------------


def test_render_reads_every_format(tmp_path):
    att, tokens, b = tiny_pair()
    for name in ("tiny-bert-pair.npz", "tiny-bert-pair.safetensors"):
        r = attnviz.render(FIXTURES / name)
        assert np.array_equal(r.attention, att) and r.tokens == tokens
    v1 = attnviz.render(FIXTURES / "tiny-bert-pair-v1.json")
    doc = json.loads((FIXTURES / "tiny-bert-pair-v1.json").read_text())
    assert np.array_equal(v1.attention, as_array(doc["attention"]))
    cross = attnviz.render(FIXTURES / "tiny-bart-single.npz", kind="cross")
    assert cross.kind == "cross"
    every = attnviz.render(FIXTURES / "tiny-bart-single.npz")
    assert isinstance(every, attnviz.Views)
    assert np.array_equal(every["Cross"].attention, cross.attention)
    meta, _ = page_parts(every.html())
    assert [k["kind"] for k in meta["kinds"]] == ["encoder", "decoder", "cross"]
    with pytest.raises(OSError):
        attnviz.render(tmp_path / "missing.npz")


def test_report_writes_files(tmp_path):
    r = attnviz.run("The cat sat on the mat.", model=str(TINY))
    assert r.save(tmp_path / "page.html").read_text().startswith("<!DOCTYPE html>")
    assert (r.png(tmp_path / "h.png", figure="model")).read_bytes().startswith(b"\x89PNG")
    assert "<svg" in r.svg(tmp_path / "h.svg", layer=1, head=2).read_text()
    r.json(tmp_path / "a.json")
    assert json.loads((tmp_path / "a.json").read_text())["format_version"] == 2
    assert "layer 2" in str(r)
    assert not list(tmp_path.glob(".*attnviz-tmp"))
    with pytest.raises(ValueError, match="figure `nope` is not one of"):
        r.png(tmp_path / "x.png", figure="nope")
    with pytest.raises(ValueError, match="layer 7 does not exist"):
        r.png(tmp_path / "x.png", layer=7)
