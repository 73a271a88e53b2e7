"""attnviz.run with every option of the CLI (one library RunRequest behind both): the arrays and
the generated flags equal the CLI's JSON for the same request, bit for bit, on the tiny BART,
GPT-2 and Qwen2 fixtures (teacher-forced target, generation, chat); bad keyword values raise
ValueError or TypeError naming the keyword."""

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
BART = str(FIXTURES / "tiny-bart")
GPT2 = str(FIXTURES / "tiny-gpt2")
QWEN2 = str(FIXTURES / "tiny-qwen2")
BERT = str(FIXTURES / "tiny-bert")
BIN = Path(os.environ.get("ATTNVIZ_BIN", REPO / "target" / "release" / "attnviz"))


def cli_json(*args: str) -> dict:
    out = subprocess.run(
        [str(BIN), *args, "--json", "-", "--full-precision", "-q"],
        check=True,
        capture_output=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    return json.loads(out.stdout)


def as_array(nested) -> np.ndarray:
    return np.array(nested, dtype=np.float32)


def test_encoder_decoder_target_gives_every_kind_as_the_cli():
    src, tgt = "The cat sat on the mat.", "Le chat est assis."
    doc = cli_json("-m", BART, src, "--target", tgt)
    r = attnviz.run(src, model=BART, target=tgt)
    for kind in ("encoder", "decoder", "cross"):
        mine = getattr(r, f"{kind}_attention")
        assert mine.dtype == np.float32 and not mine.flags.writeable, kind
        assert np.array_equal(mine, as_array(doc[kind]["attention"])), f"{kind}: bit for bit"
        assert r[kind].tokens == doc[kind]["tokens"], kind
    assert r.target == tgt == doc["target"]
    assert r.generated == doc["decoder"]["generated"] and not any(r.generated)
    with pytest.raises(AttributeError, match="cross_attention"):
        r.attention


def test_encoder_decoder_generation_flags_the_generated_tokens():
    src = "The cat sat on the mat."
    doc = cli_json("-m", BART, src, "--generate", "4")
    r = attnviz.run(src, model=BART, generate=4)
    assert np.array_equal(r.cross_attention, as_array(doc["cross"]["attention"]))
    assert np.array_equal(r.decoder_attention, as_array(doc["decoder"]["attention"]))
    assert r.generated == doc["decoder"]["generated"]
    assert r.generated[0] is False and all(r.generated[1:]), "the start token is read, the rest generated"
    assert r.target is None and r.generated_text == doc["generated_text"]


def test_encoder_decoder_default_generation_is_said():
    r = attnviz.run("The cat sat.", model=BART)
    assert r.default_generation is not None and r.default_generation > 0
    assert len(r.generated) <= r.default_generation + 1


def test_decoder_generates_as_the_cli():
    prompt = "Once upon a time"
    doc = cli_json("-m", GPT2, prompt, "--generate", "5")
    r = attnviz.run(prompt, model=GPT2, generate=5)
    assert np.array_equal(r.attention, as_array(doc["attention"])), "bit for bit"
    assert r.tokens == doc["tokens"]
    assert r.generated == doc["generated"]
    assert sum(r.generated) == 5 and not any(r.generated[: len(r.generated) - 5])
    assert r.encoder_attention is None and r.cross_attention is None


def test_chat_wraps_the_prompt_as_the_cli():
    doc = cli_json("-m", QWEN2, "hi", "--chat", "--generate", "3")
    r = attnviz.run("hi", model=QWEN2, chat=True, generate=3)
    assert np.array_equal(r.attention, as_array(doc["attention"]))
    assert r.tokens == doc["tokens"] and r.generated == doc["generated"]
    assert len(r.tokens) > len(attnviz.run("hi", model=QWEN2).tokens), "the template wraps the prompt"


def test_layers_and_max_memory_bound_the_capture_as_the_cli():
    text = "The quick brown fox jumps."
    doc = cli_json("-m", BERT, text, "--layers", "1", "--max-memory", "64M")
    for layers in ([1], 1, "1"):
        r = attnviz.run(text, model=BERT, layers=layers, max_memory="64M")
        assert r.shape[0] == 1
        assert np.array_equal(r.attention, as_array(doc["attention"])), layers
    with pytest.raises(RuntimeError, match="attention"):
        attnviz.run(text, model=BERT, max_memory=64)


@pytest.mark.parametrize(
    "kwargs, error, keyword",
    [
        (dict(model=BERT, target="x"), ValueError, "target="),
        (dict(model=BART, chat=True), ValueError, "chat=True"),
        (dict(model=BART, pair="x"), ValueError, "pair="),
        (dict(model=GPT2, pair="x"), ValueError, "pair="),
        (dict(model=BART, layers=[0]), ValueError, "layers="),
        (dict(model=BERT, layers=[99]), ValueError, "layers="),
        (dict(model=BART, target=" "), ValueError, "target="),
        (dict(model=GPT2, generate=0), ValueError, "generate=0"),
        (dict(model=GPT2, generate="3"), TypeError, "generate"),
        (dict(model=GPT2, generate=True), TypeError, "generate"),
        (dict(model=BERT, layers="1-x"), ValueError, "layers"),
        (dict(model=BERT, layers=[]), ValueError, "layers"),
        (dict(model=BERT, layers=[0.5]), TypeError, "layers"),
        (dict(model=BERT, max_memory="lots"), ValueError, "max_memory"),
        (dict(model=BERT, max_memory=True), TypeError, "max_memory"),
        (dict(model=BERT, chat="yes"), TypeError, "chat"),
        (dict(model=BERT, target=3), TypeError, "target"),
    ],
)
def test_bad_keywords_name_the_keyword(kwargs, error, keyword):
    with pytest.raises(error) as e:
        attnviz.run("The cat sat.", **kwargs)
    message = str(e.value)
    assert keyword in message, message
    assert "--" not in message, f"no CLI flag in a Python error: {message}"
    assert "\n" not in message


def test_generation_reports_through_tqdm(monkeypatch):
    import sys
    import types

    seen = []

    class FakeTqdm:
        def __init__(self, total=None, desc=None, unit=None, leave=None):
            seen.append(("start", desc, total))

        def update(self, n):
            seen.append(("update", n))

        def close(self):
            seen.append(("close",))

    auto = types.ModuleType("tqdm.auto")
    auto.tqdm = FakeTqdm
    monkeypatch.setitem(sys.modules, "tqdm", types.ModuleType("tqdm"))
    monkeypatch.setitem(sys.modules, "tqdm.auto", auto)
    r = attnviz.run("Once upon a time", model=GPT2, generate=4)
    assert seen[0] == ("start", "generating", 4) and seen[-1] == ("close",)
    steps = [s[1] for s in seen if s[0] == "update"]
    assert sum(steps) == sum(r.generated) == 4, seen


def test_no_tqdm_is_no_error(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "tqdm.auto", None)  # import fails
    r = attnviz.run("Once upon a time", model=GPT2, generate=2)
    assert sum(r.generated) == 2


# The decoder families of issue 22, through the package as through the CLI: safetensors and GGUF,
# generation (with the family's chat template where the tiny model's 48 positions hold it: the
# Gemma templates of these character-level tokenizers take 54), the sliding windows of each layer.
NEW_FAMILIES = [
    ("tiny-qwen3", True),
    ("tiny-gemma2", False),
    ("tiny-gemma3", False),
    ("tiny-gemma3-mm", False),
    ("tiny-phi3", True),
    ("gguf/tiny-gemma3.Q8_0.gguf", False),
    ("gguf/tiny-phi3.Q8_0.gguf", True),
]


@pytest.mark.parametrize("fixture,chat", NEW_FAMILIES)
def test_new_decoder_families_generate_as_the_cli(fixture, chat):
    model = str(FIXTURES / fixture)
    flags = ["--chat"] if chat else []
    doc = cli_json("-m", model, "hi there", *flags, "--generate", "3")
    r = attnviz.run("hi there", model=model, chat=chat, generate=3)
    assert np.array_equal(r.attention, as_array(doc["attention"])), "bit for bit"
    assert r.tokens == doc["tokens"] and r.generated == doc["generated"]
    assert sum(r.generated) == 3
    assert r.windows == [m["window"] for m in doc["layer_masks"]]
    assert len(r.windows) == r.attention.shape[0]


# (keyword, CLI flag, the JSON's sections for `aggregated` and `per_layer`)
LAYERED_MATRICES = [
    ("alti", "--alti", "alti", "alti_per_layer"),
    ("value_zeroing", "--value-zeroing", "value_zeroing", "value_zeroing_per_layer"),
]


@pytest.mark.parametrize("model", [BERT, GPT2])
@pytest.mark.parametrize("keyword,flag,aggregated,per_layer", LAYERED_MATRICES)
def test_alti_and_value_zeroing_are_the_clis_and_only_when_asked(model, keyword, flag, aggregated, per_layer):
    text = "the cat sat on the mat"
    doc = cli_json("-m", model, text, flag)
    r = attnviz.run(text, model=model, **{keyword: True})
    got = getattr(r, keyword)
    n = len(doc["tokens"])
    assert got["layers"] == doc["layer_numbers"]
    for key, section in (("aggregated", aggregated), ("per_layer", per_layer)):
        mine = got[key]
        assert mine.dtype == np.float32 and mine.shape == (len(doc["layer_numbers"]), n, n)
        assert np.array_equal(mine, as_array(doc[section])), f"{key}: bit for bit"
    assert np.allclose(got["aggregated"][-1].sum(axis=1), 1, atol=1e-5)
    assert getattr(attnviz.run(text, model=model), keyword) is None
    with pytest.raises(ValueError, match="every layer"):
        attnviz.run(text, model=model, layers=[0], **{keyword: True})
