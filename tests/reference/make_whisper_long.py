#!/usr/bin/env python3
"""transformers' transcripts of a recording longer than 30 s, for the long-recording test of the
real tiny.en (tests/suite/fidelity/whisper.rs, `real_whisper_tiny_en_reads_a_long_recording_*`).

    .cache/venv-ref/bin/python tests/reference/make_whisper_long.py

The recording is beckett.wav (scripts/fetch-beckett.sh) four times, one second of silence after
each (43.8 s), built here as the Rust test builds it. From the converted transformers folder
(.cache/models/whisper-tiny.en-hf, tests/reference/ct2_to_transformers.py), greedy and eager
float32, it writes tests/reference/whisper-tiny.en-long.json:

- `windows`: each fixed 30-second window's audio on its own ([0, 30 s), [30 s, 43.8 s)),
  transcribed by `generate` without timestamps (what attnviz's windows without timestamps
  must each give);
- `long_form`: transformers' own sequential long-form transcription of the whole recording
  (`generate(..., return_timestamps=True, condition_on_prev_tokens=False)` on features of the
  whole recording, openai-whisper's seek), the text decoded without special tokens.
"""

import json
from pathlib import Path

import numpy as np
import soundfile as sf
import torch
from tokenizers import Tokenizer
from transformers import WhisperFeatureExtractor, WhisperForConditionalGeneration

REPO = Path(__file__).resolve().parents[2]


def main() -> None:
    folder = REPO / ".cache" / "models" / "whisper-tiny.en-hf"
    samples, rate = sf.read(REPO / ".cache" / "audio" / "beckett.wav", dtype="float32")
    assert rate == 16000
    once = np.concatenate([samples, np.zeros(16000, np.float32)])
    recording = np.concatenate([once] * 4)
    model = WhisperForConditionalGeneration.from_pretrained(folder, attn_implementation="eager").eval()
    features = WhisperFeatureExtractor.from_pretrained(folder)
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    windows = []
    for start in range(0, len(recording), 480000):
        f = features(recording[start : start + 480000], sampling_rate=16000, return_tensors="pt")
        with torch.no_grad():
            ids = model.generate(f.input_features, do_sample=False, num_beams=1, max_new_tokens=120)
        text = tokenizer.decode(ids[0].tolist(), skip_special_tokens=True).strip()
        windows.append(dict(start=start / 16000, transcript=text))
    f = features(recording, sampling_rate=16000, return_tensors="pt", truncation=False,
                 padding="longest", return_attention_mask=True)
    with torch.no_grad():
        out = model.generate(f.input_features, attention_mask=f.attention_mask, do_sample=False,
                             num_beams=1, return_timestamps=True, condition_on_prev_tokens=False)
    long_form = tokenizer.decode(out[0].tolist(), skip_special_tokens=True).strip()
    path = REPO / "tests" / "reference" / "whisper-tiny.en-long.json"
    path.write_text(json.dumps(dict(seconds=len(recording) / 16000, windows=windows,
                                    long_form=long_form), indent=1) + "\n")
    print(path, windows, long_form)


if __name__ == "__main__":
    main()
