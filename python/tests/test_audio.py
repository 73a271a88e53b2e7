"""attnviz.run(audio=...) on the tiny random Whisper (tests/reference/make_whisper.py writes it) and
a small WAV written here: the three attentions, the transcript, the word timings and the whole
speech section are the CLI's for `--audio` with the same settings (bit for bit); the settings
(language, task, timestamps) reach the library, and what cannot run raises ValueError or
TypeError in the library's words."""

from __future__ import annotations

import json
import math
import os
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

import attnviz

REPO = Path(__file__).resolve().parents[2]
WHISPER = str(REPO / "tests" / "fixtures" / "tiny-whisper")
BERT = str(REPO / "tests" / "fixtures" / "tiny-bert")
BIN = Path(os.environ.get("ATTNVIZ_BIN", REPO / "target" / "release" / "attnviz"))


def write_wav(path: Path, seconds: float = 1.0) -> Path:
    """A 16-bit mono WAV at 16 kHz: a 440 Hz tone, then as much silence."""
    n = int(seconds * 16000)
    samples = [int(0.4 * math.sin(2 * math.pi * 440 * i / 16000) * 32767) for i in range(n)]
    samples += [0] * n
    data = struct.pack(f"<{len(samples)}h", *samples)
    header = b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVEfmt "
    header += struct.pack("<IHHIIHH", 16, 1, 1, 16000, 32000, 2, 16)
    path.write_bytes(header + b"data" + struct.pack("<I", len(data)) + data)
    return path


def cli_json(*args: str) -> dict:
    out = subprocess.run(
        [str(BIN), *args, "--json", "-", "--full-precision", "-q"],
        check=True,
        capture_output=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    return json.loads(out.stdout)


@pytest.mark.parametrize("timestamps", [False, True])
def test_audio_gives_the_cli_attention_transcript_and_word_timings(tmp_path, timestamps):
    wav = write_wav(tmp_path / "tone.wav")
    flags = ["--timestamps"] if timestamps else []
    doc = cli_json("-m", WHISPER, "--audio", str(wav), "--language", "en", "--generate", "8", *flags)
    views = attnviz.run(model=WHISPER, audio=wav, language="en", generate=8, timestamps=timestamps)
    speech = doc["cross"]["speech"]
    assert views.speech == speech
    assert views.transcript == speech["transcript"]
    assert views.words == speech["words"] and views.words, "word timings"
    assert speech["timestamps"] is timestamps and speech["audio"] == "tone.wav"
    for word in views.words:
        assert 0 <= word["start"] <= word["end"] <= 2.0
    for kind in ("encoder", "decoder", "cross"):
        ours = getattr(views, f"{kind}_attention")
        theirs = np.array(doc[kind]["attention"], dtype=np.float32)
        assert np.array_equal(ours, theirs), f"{kind}: bit for bit"
    # One kind alone carries the same speech section.
    cross = attnviz.run(model=WHISPER, audio=str(wav), language="en", generate=8,
                        timestamps=timestamps, kind="cross")
    assert cross.speech == speech and cross.transcript == speech["transcript"]


def test_a_text_run_has_no_speech():
    r = attnviz.run("The cat sat.", model=BERT)
    assert r.transcript is None and r.words is None and r.speech is None


def test_what_cannot_run_raises_in_the_library_words(tmp_path):
    wav = write_wav(tmp_path / "tone.wav")
    with pytest.raises(ValueError, match="its languages are de, en, fr"):
        attnviz.run(model=WHISPER, audio=wav, language="xx", generate=4)
    with pytest.raises(ValueError, match="task='summarise' is not one of"):
        attnviz.run(model=WHISPER, audio=wav, task="summarise", generate=4)
    with pytest.raises(ValueError, match="drop TEXT|reads the recording alone"):
        attnviz.run("Hello", model=WHISPER, audio=wav, generate=4)
    with pytest.raises(ValueError, match="give a recording to a speech model"):
        attnviz.run("The cat sat.", model=BERT, language="en")
    with pytest.raises(TypeError, match="audio must be a path"):
        attnviz.run(model=WHISPER, audio=3)
    with pytest.raises(TypeError, match="timestamps must be True or False"):
        attnviz.run(model=WHISPER, audio=wav, timestamps="yes")
    with pytest.raises(ValueError, match="reads a recording, not text; give it an audio file"):
        attnviz.run("Hello", model=WHISPER)
    with pytest.raises(ValueError, match="does not read audio"):
        attnviz.run(model=BERT, audio=wav)
    with pytest.raises(ValueError, match="window 9 is not one of them"):
        attnviz.run(model=WHISPER, audio=wav, language="en", generate=2, window=9)


def test_a_long_recording_is_read_in_windows_and_window_picks_the_attention(tmp_path):
    # 8 s: three windows of the tiny checkpoint's 3 s.
    wav = write_wav(tmp_path / "long.wav", seconds=4.0)
    doc = cli_json("-m", WHISPER, "--audio", str(wav), "--language", "en", "--generate", "6", "--window", "2")
    views = attnviz.run(model=WHISPER, audio=wav, language="en", generate=6, window=2)
    assert views.speech == doc["cross"]["speech"]
    assert views.speech["windows"] == 3 and views.speech["window"] == 2
    assert views.speech["window_start"] == 6.0
    assert {w["window"] for w in views.words} <= {0, 1, 2}
    assert np.array_equal(views.cross_attention, np.array(doc["cross"]["attention"], dtype=np.float32))
    first = attnviz.run(model=WHISPER, audio=wav, language="en", generate=6)
    assert first.transcript == views.transcript and first.words == views.words
    assert first.speech["window"] == 0
