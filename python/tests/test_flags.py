"""docs/python-flags.md, the table of the CLI's flags and their Python names, against the package:
every Python name it gives is a keyword of that function (or, through ``**options``, of the native
method it forwards to) or an attribute of the result, and every keyword of ``run`` has a row. The
Rust side (src/app/cli.rs, ``every_flag_has_a_python_name_or_a_reason``) checks the table against
the CLI's flags. Then the keywords the table added work as their flags do: ``threads=``,
``kind=``, ``query=`` and ``report.png(dpi=)``."""

from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

import attnviz
from attnviz import _native

REPO = Path(__file__).resolve().parents[2]
TABLE = REPO / "docs" / "python-flags.md"
FIXTURES = REPO / "tests" / "fixtures"
BERT = str(FIXTURES / "tiny-bert")
BART = str(FIXTURES / "tiny-bart")
DEIT = str(FIXTURES / "tiny-deit")
PICTURE = FIXTURES / "images" / "big80x64.png"
BIN = Path(os.environ.get("ATTNVIZ_BIN", REPO / "target" / "release" / "attnviz"))

#: Report methods whose ``**options`` go to a native method of the attention.
FORWARDS = {"png": "image", "svg": "image", "save": "html", "html": "html"}
#: ``run``'s keywords that are no CLI flag (the table says so in its closing lines). Keywords
#: with a leading underscore (``_image``, ``_pixels``: what ``image=`` became) are the
#: package's own, not its API.
PYTHON_ONLY = {"view"}


def rows() -> list:
    """``(cli, python)`` for each row of the table's flags and subcommands."""
    out = []
    for line in TABLE.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 3 and re.fullmatch(r"`[^`]+`", cells[1]):
            out.append((cells[1].strip("`"), cells[2]))
    return out


def accepts(func, name: str, forward: str | None = None) -> bool:
    params = inspect.signature(func).parameters
    if name in params:
        return True
    if forward and any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return name in inspect.signature(getattr(_native.Attention, forward)).parameters
    return False


@pytest.fixture(scope="module")
def report():
    return attnviz.run("The cat sat.", model=BERT)


def test_the_table_has_the_flags():
    flags = [cli for cli, _ in rows()]
    assert "TEXT" in flags and "--threads" in flags and "--input" in flags and "attnviz render" in flags
    assert len(flags) == len(set(flags)), "one row per flag"


def test_every_python_name_in_the_table_exists(report):
    checked = 0
    for cli, python in rows():
        if python.startswith("CLI only"):
            assert len(python) > len("CLI only: ") + 5, f"{cli}: say why"
            continue
        spans = re.findall(r"`([^`]+)`", python)
        names = [s for s in spans if re.match(r"(run|report\.\w+|attnviz\.\w+)\b", s)]
        assert names, f"{cli}: no Python name in {python!r}"
        for name in names:
            call = re.fullmatch(r"(run|report\.(\w+)|attnviz\.(\w+))\((\w+)=?\)", name)
            if call:
                _, method, function, keyword = call.groups()
                if method:
                    func = getattr(attnviz.Report, method)
                elif function:
                    func = getattr(attnviz, function)
                else:
                    func = attnviz.run
                assert accepts(func, keyword, FORWARDS.get(method)), f"{cli}: {name} is not a keyword"
            else:
                attribute = re.fullmatch(r"report\.(\w+)(\[[^\]]*\])?", name)
                assert attribute, f"{cli}: cannot read {name!r}"
                assert hasattr(report, attribute.group(1)), f"{cli}: the result has no {name}"
            checked += 1
    assert checked > 40


def test_every_keyword_of_run_has_a_row():
    named = set()
    for _, python in rows():
        named.update(re.findall(r"run\((\w+)=?\)", python))
    for name in inspect.signature(attnviz.run).parameters:
        if name.startswith("_"):
            continue
        assert name in named or name in PYTHON_ONLY, f"run({name}=) has no row in {TABLE.name}"


def cli_json(*args: str) -> dict:
    out = subprocess.run(
        [str(BIN), *args, "--json", "-", "--full-precision", "-q"],
        check=True,
        capture_output=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    return json.loads(out.stdout)


def test_threads_runs_on_that_many_workers():
    doc = cli_json("-m", BERT, "The cat sat on the mat.", "--threads", "1")
    one = attnviz.run("The cat sat on the mat.", model=BERT, threads=1)
    assert np.array_equal(one.attention, np.array(doc["attention"], dtype=np.float32))
    three = attnviz.run("The cat sat on the mat.", model=BERT, threads=3)
    assert np.allclose(one.attention, three.attention, rtol=1e-6, atol=1e-7)
    with pytest.raises(ValueError, match="threads=0"):
        attnviz.run("x", model=BERT, threads=0)
    with pytest.raises(TypeError, match="threads"):
        attnviz.run("x", model=BERT, threads="2")


def test_kind_picks_one_kind_as_a_report():
    src, tgt = "The cat sat on the mat.", "Le chat est assis."
    every = attnviz.run(src, model=BART, target=tgt)
    for kind in ("encoder", "decoder", "cross"):
        one = attnviz.run(src, model=BART, target=tgt, kind=kind)
        assert isinstance(one, attnviz.Report) and one.kind == kind
        assert np.array_equal(one.attention, getattr(every, f"{kind}_attention"))
    assert attnviz.run("The cat sat.", model=BERT, kind="self").kind == "self"
    with pytest.raises(ValueError, match="kind='cross'.*'self'"):
        attnviz.run("The cat sat.", model=BERT, kind="cross")
    with pytest.raises(ValueError, match="kind='crosss' is not one of"):
        attnviz.run("The cat sat.", model=BERT, kind="crosss")


def initial(page: str) -> dict:
    """The state a report page opens in (its meta's ``initial`` object)."""
    match = re.search(r'"initial":(\{[^{}]*\})', page)
    assert match, "the page names what it opens on"
    return json.loads(match.group(1))


def test_query_opens_the_image_view_on_that_patch(tmp_path):
    html = tmp_path / "cli.html"
    subprocess.run(
        [str(BIN), "-m", DEIT, "--image", str(PICTURE), "--query", "1,2", "--html", str(html), "-q"],
        check=True,
        capture_output=True,
    )
    want = initial(html.read_text(encoding="utf-8"))["query"]
    # DeiT's units: CLS, DIST, then the 4 × 4 patches row by row.
    assert want == 2 + 1 * 4 + 2
    for query in ("1,2", (1, 2), [1, 2]):
        r = attnviz.run(image=PICTURE, model=DEIT, query=query)
        assert initial(r.html())["query"] == want, query
    with pytest.raises(ValueError, match="outside the 4×4 patch grid"):
        attnviz.run(image=PICTURE, model=DEIT, query=(9, 0)).html()
    with pytest.raises(ValueError, match="no attention-pooling head"):
        attnviz.run(image=PICTURE, model=DEIT, query="pool").html()
    with pytest.raises(ValueError, match="is not ROW,COL"):
        attnviz.run(image=PICTURE, model=DEIT, query="middle").html()
    with pytest.raises(ValueError, match="image="):
        attnviz.run("The cat sat.", model=BERT, query=(0, 0))
    with pytest.raises(TypeError, match="query"):
        attnviz.run(image=PICTURE, model=DEIT, query=(1, 2, 3))


def test_dpi_is_the_scale_factor_times_96(report, tmp_path):
    a, b = tmp_path / "dpi.png", tmp_path / "scale.png"
    report.png(a, dpi=192)
    report.png(b, scale_factor=2.0)
    assert a.read_bytes() == b.read_bytes()
    with pytest.raises(ValueError, match="48 to 384"):
        report.png(a, dpi=1000)
    with pytest.raises(ValueError, match="not both"):
        report.png(a, dpi=192, scale_factor=2.0)
