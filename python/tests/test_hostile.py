"""The Python package under hostile input (issue 20, requirement 19): tokens that carry markup,
script end tags, quotes and bidirectional controls; arguments of the wrong type, out of range,
huge, negative or NaN; files that are FIFOs or over the memory budget; and messages quoting
control characters. Each must end in a Python exception with a one-line message that says what
was wrong (control characters shown as `<U+001B>`), or in a page that shows the text as text.

The browser half (the inline views opened in Chromium and Firefox) is
python/tests/hostile_page.mjs over the page hostile_page.py writes; python/tests/run.sh runs it.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import signal
import sys
import warnings
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

import attnviz
from attnviz import _native

sys.path.insert(0, str(Path(__file__).parent))
import hostile_page  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "render"
TINY = REPO / "tests" / "fixtures" / "tiny-bert"
ESC = "\x1b]52;c;aGk=\x07\x1b[2J"


def one_line(e: BaseException) -> str:
    text = str(e)
    assert "\n" not in text and "\r" not in text, repr(text)
    return text


def no_controls(text: str) -> None:
    assert not any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 or c in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c" for c in text), repr(text)


class Elements(HTMLParser):
    """Every start tag of a document, as the browser's parser sees them."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags = []
        self.srcdoc = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "iframe":
            self.srcdoc.append(dict(attrs).get("srcdoc"))


def elements(page: str) -> Elements:
    p = Elements()
    p.feed(page)
    return p


def meta_of(page: str) -> dict:
    return json.loads(re.search(r'<script type="application/json" id="attnviz-meta">(.*?)</script>', page, re.S).group(1))


# -- tokens that carry markup -----------------------------------------------------------------


def test_hostile_tokens_stay_text_in_the_page_and_the_frame():
    tokens = hostile_page.TOKENS
    att = hostile_page.attention(len(tokens))
    for make in (attnviz.head_view, attnviz.model_view):
        view = make(att, tokens, prettify_tokens=False, html_action="return")
        inline = view.data
        outer = elements(inline)
        # The notebook's page gets the wrappers and one frame, whatever the tokens hold.
        assert sorted(set(outer.tags)) == ["code", "div", "iframe"], outer.tags
        assert outer.tags.count("iframe") == 1
        # The frame's document is the report itself, byte for byte.
        (page,) = outer.srcdoc
        assert page == view.html()
        # In it, the tokens are data: the parser finds the very elements of a page of plain
        # tokens, and the tokens read back exactly.
        plain = make(att, [f"t{i}" for i in range(len(tokens))], prettify_tokens=False, html_action="return")
        assert elements(page).tags == elements(plain.html()).tags
        assert meta_of(page)["tokens"] == tokens
        # No token appears raw (the page's template may hold `<!--` itself: as often as a page
        # of plain tokens does).
        for t in tokens:
            if "<" in t or "\u2028" in t:
                assert page.count(t) == plain.html().count(t), f"{t!r} appears raw in the page"


def test_encoder_decoder_views_and_titles_keep_hostile_text_as_text():
    name, inline = hostile_page.outputs()[2]
    assert name == "encoder_decoder"
    (page,) = elements(inline).srcdoc
    meta = meta_of(page)
    assert [k["kind"] for k in meta["kinds"]] == ["encoder", "decoder", "cross"]
    assert meta["kinds"][2]["keys"]["tokens"] == hostile_page.TOKENS
    name, inline = hostile_page.outputs()[3]
    (page,) = elements(inline).srcdoc
    title = re.search(r"<title>(.*?)</title>", page, re.S).group(1)
    assert html.unescape(title) == hostile_page.TITLE
    assert "<img" not in page.split("</head>", 1)[1].split("<script", 1)[0]
    assert "dataset.pwned='setting'" in html.unescape(page) and "<img src=x onerror" not in page


# -- messages ---------------------------------------------------------------------------------


def test_exception_messages_show_control_characters_as_escapes(tmp_path):
    att, tokens = hostile_page.attention(3), ["a", "b", "c"]
    cases = []
    with pytest.raises(ValueError) as e:
        _native.from_arrays(att, tokens, roles=["start", "word", ESC])
    cases.append(e.value)
    with pytest.raises(ValueError) as e:
        _native.from_arrays(att, tokens, kind=ESC)
    cases.append(e.value)
    bad = tmp_path / f"bad{ESC}.npz"
    shutil.copy(FIXTURES / "bad-nan.npz", bad)
    with pytest.raises(ValueError) as e:
        attnviz.render(bad)
    cases.append(e.value)
    with pytest.raises(OSError) as e:
        attnviz.render(tmp_path / f"missing{ESC}.npz")
    cases.append(e.value)
    with pytest.raises(RuntimeError) as e:
        attnviz.run("x", model=str(tmp_path / f"nope{ESC}"))
    cases.append(e.value)
    for err in cases:
        text = one_line(err)
        no_controls(text)
    assert "<U+001B>]52;c;aGk=<U+0007><U+001B>[2J" in str(cases[0]), str(cases[0])
    # Warnings too: a file name in the row-sum warning.
    rows = tmp_path / f"rows{ESC}.npz"
    shutil.copy(FIXTURES / "bad-rows.npz", rows)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        attnviz.render(rows)
    (w,) = [w for w in caught if issubclass(w.category, attnviz.AttnvizWarning)]
    assert "<U+001B>" in str(w.message)
    no_controls(str(w.message))


# -- arguments --------------------------------------------------------------------------------


def test_run_refuses_hostile_arguments_with_a_clear_exception():
    tiny = str(TINY)
    cases = [
        (lambda: attnviz.run(123, model=tiny), TypeError, None),
        (lambda: attnviz.run("x", model=123), TypeError, None),
        (lambda: attnviz.run("x", model=tiny, layer=-1), ValueError, "layer -1 does not exist: there are 3 layers (0 to 2)"),
        (lambda: attnviz.run("x", model=tiny, layer=10**30), ValueError, "does not exist"),
        (lambda: attnviz.run("x", model=tiny, layer=float("nan")), ValueError, "must be an integer index, not float"),
        (lambda: attnviz.run("x", model=tiny, layer=True), ValueError, "not bool"),
        (lambda: attnviz.run("x", model=tiny, head=4), ValueError, "head 4 does not exist: there are 4 heads"),
        (lambda: attnviz.run("x", model=tiny, view="<script>"), ValueError, "is not one of"),
        (lambda: attnviz.run("x", model=tiny, revision=None), TypeError, None),
        (lambda: attnviz.run("\ud800", model=tiny), UnicodeEncodeError, None),
        (lambda: attnviz.run("x " * 200_000, model=tiny), RuntimeError, None),
    ]
    for call, kind, want in cases:
        with pytest.raises(kind) as e:
            call()
        text = one_line(e.value)
        if want:
            assert want in text, text


def test_run_bounds_the_lens_and_the_analyses_that_re_run_the_model():
    # lens= at the vocabulary's size cost 3.6 GiB per input token; value zeroing and ablation
    # ran for minutes without a word.
    llama = str(REPO / "tests" / "fixtures" / "tiny-llama")
    for k in (101, 49152, 10**30):
        with pytest.raises(ValueError) as e:
            attnviz.run("the cat sat", model=llama, lens=k)
        assert f"lens={k} keeps more tokens per cell than the logit lens writes (at most 100)" in one_line(e.value)
    report = attnviz.run("the cat sat", model=llama, lens=100)
    assert report.lens["k"] == 100 and report.lens["ids"].shape[-1] == 100
    for keyword, name in (({"value_zeroing": True}, "value zeroing of"), ({"ablate": True}, "head ablation of")):
        with pytest.raises(RuntimeError) as e:
            attnviz.run("the cat sat", model=llama, max_analysis_time=0, **keyword)
        text = one_line(e.value)
        assert name in text and "more than the given time limit of 0.00 s" in text, text
        assert "or allow it with max_analysis_time=1 (seconds)" in text, text
        attnviz.run("the cat sat", model=llama, **keyword)
    with pytest.raises(TypeError):
        attnviz.run("x", model=llama, value_zeroing=True, max_analysis_time="soon")
    with pytest.raises(ValueError):
        attnviz.run("x", model=llama, value_zeroing=True, max_analysis_time=-1)


def test_views_refuse_hostile_arguments_before_drawing(tmp_path):
    att, tokens = hostile_page.attention(4), ["[CLS]", "a", "b", "[SEP]"]
    cases = [
        (lambda: attnviz.head_view(att, tokens, sentence_b_start=-1), "sentence_b_start -1 does not exist"),
        (lambda: attnviz.head_view(att, tokens, sentence_b_start=2**70), "does not exist"),
        (lambda: attnviz.head_view(att, tokens, sentence_b_start=1.5), "must be an integer index"),
        (lambda: attnviz.head_view(att, tokens, heads=[99]), "head 99 does not exist"),
        (lambda: attnviz.head_view(att, tokens, heads=[-1]), "head -1 does not exist"),
        (lambda: attnviz.head_view(att, tokens, layer=-1), "layer -1 does not exist"),
        (lambda: attnviz.head_view(att, tokens, include_layers=[0, 9]), "include_layers 9 does not exist: there are 2 layers"),
        (lambda: attnviz.model_view(att, tokens, include_heads=[-1]), "include_heads -1 does not exist"),
        (lambda: attnviz.model_view(att, tokens, include_heads=["0"]), "must be an integer index, not str"),
        (lambda: attnviz.head_view(att, "abcd"), "must be a list of strings, one per token, not one string"),
        (lambda: attnviz.head_view(np.full_like(att, np.inf), tokens), "holds infinity"),
        (lambda: attnviz.head_view(np.full(att.shape, "x"), tokens), "could not convert string to float"),
        (lambda: attnviz.head_view(att, tokens, html_action="<x>"), "html_action '<x>'"),
        (lambda: attnviz.model_view(att, tokens, display_mode=None), "display_mode None"),
        (lambda: attnviz.render(FIXTURES / "tiny-bert-pair.npz", max_memory=-1), "max_memory must be a number of bytes"),
        (lambda: attnviz.render(FIXTURES / "tiny-bert-pair.npz", max_memory=float("nan")), "max_memory must be"),
        (lambda: attnviz.render(FIXTURES / "tiny-bert-pair.npz", kind="<b>"), "holds no <b> attention"),
    ]
    for call, want in cases:
        with pytest.raises(ValueError) as e:
            call()
        text = one_line(e.value)
        if want:
            assert want in text, text
    report = attnviz.head_view(att, tokens, html_action="return")
    for bad in (float("nan"), float("inf"), -1.0, 1e30):
        with pytest.raises(ValueError, match="scale_factor"):
            report.png(tmp_path / "x.png", scale_factor=bad)
    with pytest.raises(ValueError, match="colormap `<x>` is not one of"):
        report.png(tmp_path / "x.png", colormap="<x>")
    with pytest.raises(ValueError, match="format `gif` is not png or svg"):
        report._native.image(str(tmp_path / "x.gif"), format="gif")
    assert not list(tmp_path.iterdir()), "nothing written"


def test_huge_arrays_are_refused_before_they_are_copied():
    # A broadcast view of 2**36 weights takes no memory until it is copied: refused first.
    huge = np.broadcast_to(np.float32(1 / 4096), (64, 64, 4096, 4096))
    for call in (
        lambda: attnviz.head_view(huge, ["t"] * 4096),
        lambda: attnviz.head_view(tuple(huge[:, None]), ["t"] * 4096),
        lambda: attnviz.model_view(huge, ["t"] * 4096, include_heads=list(range(64))),
    ):
        with pytest.raises(ValueError) as e:
            call()
        assert "holds 68.7 billion weights, more than attnviz draws" in one_line(e.value), str(e.value)


# -- files ------------------------------------------------------------------------------------


def test_files_that_are_not_regular_or_too_big_are_refused(tmp_path):
    fifo = tmp_path / "a.npz"
    os.mkfifo(fifo)
    # A FIFO would block the reader forever: refused at once (an alarm fails the test instead of
    # hanging it).
    signal.alarm(20)
    try:
        with pytest.raises(ValueError) as e:
            attnviz.render(fifo)
    finally:
        signal.alarm(0)
    assert "is not a regular file" in one_line(e.value)
    with pytest.raises(ValueError, match="is a folder"):
        attnviz.render(tmp_path)
    with pytest.raises(MemoryError) as e:
        attnviz.render(FIXTURES / "tiny-bert-pair.npz", max_memory=1000)
    text = one_line(e.value)
    assert "tiny-bert-pair.npz: its attention (3072 weights, attention [3, 4, 16, 16]) needs about" in text, text
    assert "more than the memory budget of 1 kB" in text and text.endswith("(max_memory=BYTES)"), text
    assert attnviz.render(FIXTURES / "tiny-bert-pair.npz", max_memory=1 << 20).shape == (3, 4, 16, 16)
    # Writing over a FIFO replaces it with the file (written aside, then renamed): no hang.
    report = attnviz.render(FIXTURES / "tiny-bert-pair.npz")
    out = tmp_path / "page.html"
    os.mkfifo(out)
    signal.alarm(20)
    try:
        report.save(out)
    finally:
        signal.alarm(0)
    assert out.is_file() and out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
