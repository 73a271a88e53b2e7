"""attnviz.merge: the shards' partial statistics merged in Python equal ``attnviz merge``'s
file, byte for byte, whatever the order and whether given as paths, folders or dicts."""

from __future__ import annotations

import json
import os
import subprocess
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import attnviz

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "tests" / "fixtures" / "tiny-bert"
BIN = Path(os.environ.get("ATTNVIZ_BIN", REPO / "target" / "release" / "attnviz"))
SHARDS = 3


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if k != "ATTNVIZ_MODEL"}
    env.update(HF_HUB_OFFLINE="1", NO_COLOR="1")
    return env


def _run_shard(corpus: Path, out: Path, k: int) -> Path:
    folder = out / f"shard-{k}"
    subprocess.run(
        [str(BIN), "-m", str(TINY), "--input", str(corpus), "--out-dir", str(folder),
         "--shard", f"{k}/{SHARDS}", "--threads", "1", "--per-sentence", "none", "-q"],
        check=True, env=_env(), capture_output=True,
    )
    return folder


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> tuple[list[Path], bytes]:
    """Three shards of a small corpus, run in parallel (concurrent.futures standing in for Ray
    or Dask), and the summary ``attnviz merge`` writes from them."""
    d = tmp_path_factory.mktemp("shards")
    corpus = d / "corpus.txt"
    corpus.write_text(
        "".join(f"the cat number {i} sat on the mat .\n" for i in range(20))
        + "a dog ran .\n\n" + "x" * 300 + "\n"
    )
    with ThreadPoolExecutor(max_workers=SHARDS) as pool:
        folders = list(pool.map(lambda k: _run_shard(corpus, d, k), range(1, SHARDS + 1)))
    cli = d / "cli.json"
    subprocess.run(
        [str(BIN), "merge", *map(str, folders), "--out", str(cli), "-q"],
        check=True, env=_env(), capture_output=True,
    )
    return folders, cli.read_bytes()


def test_any_order_gives_the_same_summary_as_the_cli_byte_for_byte(shards, tmp_path):
    folders, cli = shards
    files = [f / "corpus_partial.json" for f in folders]
    forward = attnviz.merge(files, out=tmp_path / "a.json")
    backward = attnviz.merge(list(reversed(folders)), out=tmp_path / "b.json")
    assert (tmp_path / "a.json").read_bytes() == cli
    assert (tmp_path / "b.json").read_bytes() == cli
    assert forward == backward == json.loads(cli)
    assert forward["shard"] is None and forward["end"] == "complete"
    # Dicts (what json.load gives a worker that received the partials) merge alike.
    dicts = [json.loads(f.read_text()) for f in [files[1], files[2], files[0]]]
    assert attnviz.merge(dicts, out=tmp_path / "c.json") == forward
    assert (tmp_path / "c.json").read_bytes() == cli


def test_a_merge_that_does_not_add_up_is_refused_in_one_line(shards, tmp_path):
    folders, _ = shards
    files = [f / "corpus_partial.json" for f in folders]
    with pytest.raises(ValueError, match=r"1 of the 3 shards is missing: 3/3") as e:
        attnviz.merge(files[:2])
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match=r"shard 2/3 is given twice"):
        attnviz.merge([files[0], files[1], files[1], files[2]])
    damaged = json.loads(files[0].read_text())
    damaged["format"] = "something else"
    with pytest.raises(ValueError, match=r"partials\[0\]: not an attnviz partial-statistics file"):
        attnviz.merge([damaged, files[1], files[2]])
    with pytest.raises(ValueError, match=r"is one of the partial files"):
        attnviz.merge(files, out=files[0])
    with pytest.raises(TypeError, match="not one"):
        attnviz.merge(str(files[0]))
    with pytest.raises(TypeError, match="not int"):
        attnviz.merge([1, 2])
    with pytest.raises(ValueError, match="give the partial files"):
        attnviz.merge([])
    # Nothing written by a refused merge.
    assert not (tmp_path / "x.json").exists()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        attnviz.merge(files)
