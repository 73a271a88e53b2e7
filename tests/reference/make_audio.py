#!/usr/bin/env python3
"""Reference log-mel spectrograms for the audio input (crates/model/src/audio/).

    python3 tests/reference/make_audio.py

Writes small synthetic recordings into tests/reference/audio-inputs/ (WAV, FLAC, MP3, OGG/Vorbis,
made here with numpy and soundfile from a fixed seed) and, for each of them and for the real
recording beckett.wav (scripts/fetch-beckett.sh; $ATTNVIZ_AUDIO_DIR, else .cache/audio; the
script runs it when missing), what a transformers user gets:

    samples, rate = soundfile.read(path, dtype="float32")        # int16 / 32768
    samples = samples.mean(axis=1)                                 # stereo: librosa's to_mono
    samples = soxr.resample(samples, rate, 16000, "HQ")            # not 16 kHz: librosa's default
    WhisperFeatureExtractor(feature_size=...)(window, sampling_rate=16000).input_features[0]

on the extractor's numpy path (`_np_extract_fbank_features`, float64 throughout), one 30-second
window at a time (window i is samples[480000 i : 480000 (i + 1)], zero-padded by
the extractor). The resampled case also gets scipy's resample_poly, the other common choice, so
the distance between two standard resamplers is on record next to ours.

Writes tests/reference/audio-features.json (the cases, versions, checksums, what each window
stores) and tests/reference/audio-features.safetensors. To stay small, each window stores every
value of the frames that hold the recording (`frames` = [first, end)) and, for the frames outside
them, each mel bin's minimum and maximum (`rest_min`, `rest_max`: equal when those frames are the
padding's constant floor). Also the 80- and 128-bin Slaney filter banks (f32, [mels, 201]) and a
preprocessor_config.json as transformers saves it for large-v3's 128 bins. When torch is
installed, each window also records how far the extractor's torch path (the one transformers
takes by default then: float32 `torch.stft`) is from its numpy path
(`torch_path_vs_numpy_path_max_abs`), for scale.

Needs numpy, soundfile, soxr, scipy, safetensors and transformers (torch optional). A re-run with
the same versions rewrites every file byte for byte but tones16k.ogg, whose Ogg stream serial
number libsndfile draws at random (its decoded samples, and so every reference value, are the
same).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import safetensors.numpy
import scipy
import scipy.signal
import soundfile as sf
import soxr
import transformers
from transformers import WhisperFeatureExtractor
from transformers.models.whisper import feature_extraction_whisper as fe_module

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "tests" / "reference"
INPUTS = REFERENCE / "audio-inputs"
SEED = 44
N_SAMPLES = 480_000
HOP = 160


def chirp(t: np.ndarray, f0: float, f1: float) -> np.ndarray:
    """A logarithmic sweep from f0 to f1 Hz over t's span."""
    dur = t[-1] if t[-1] > 0 else 1.0
    k = (f1 / f0) ** (1.0 / dur)
    return np.sin(2 * np.pi * f0 * (k**t - 1) / np.log(k))


def to_int16(x: np.ndarray) -> np.ndarray:
    return np.clip(np.round(x * 32767), -32768, 32767).astype(np.int16)


def make_inputs(rng: np.random.Generator) -> None:
    INPUTS.mkdir(exist_ok=True)
    # 3 s at 16 kHz mono: a sweep over Whisper's whole band, light noise, a silent gap.
    t = np.arange(3 * 16000) / 16000
    x = 0.4 * chirp(t, 50, 7500) + 0.03 * rng.standard_normal(t.size)
    x[20000:24000] = 0
    sf.write(INPUTS / "chirp16k.wav", to_int16(x), 16000, subtype="PCM_16")

    # Other sample formats, 0.5 s at 16 kHz: 24-bit and 8-bit PCM, 32-bit float.
    t = np.arange(8000) / 16000
    x = 0.45 * chirp(t, 300, 5000)
    sf.write(INPUTS / "chirp16k-24bit.wav", x, 16000, subtype="PCM_24")
    sf.write(INPUTS / "chirp16k-8bit.wav", x, 16000, subtype="PCM_U8")
    sf.write(INPUTS / "chirp16k-float.wav", x.astype(np.float32), 16000, subtype="FLOAT")

    # 1 s at 16 kHz, two channels: the mix is exact (no resampling).
    t = np.arange(16000) / 16000
    left = 0.3 * np.sin(2 * np.pi * 440 * t)
    right = 0.3 * np.sin(2 * np.pi * 1250 * t) + 0.02 * rng.standard_normal(t.size)
    sf.write(INPUTS / "stereo16k.wav", to_int16(np.stack([left, right], 1)), 16000, subtype="PCM_16")

    # 1.5 s at 44.1 kHz, two channels, with content above 8 kHz that resampling must remove.
    t = np.arange(int(1.5 * 44100)) / 44100
    left = 0.35 * chirp(t, 100, 15000)
    right = 0.25 * np.sin(2 * np.pi * 3000 * t) + 0.1 * np.sin(2 * np.pi * 11000 * t)
    sf.write(INPUTS / "stereo44k.flac", to_int16(np.stack([left, right], 1)), 44100, subtype="PCM_16")

    # 0.75 s at 48 kHz mono (the usual recording rate): harmonics of 220 Hz up to 7 kHz and a
    # sweep to 20 kHz.
    t = np.arange(36000) / 48000
    x = sum(0.5 / k * np.sin(2 * np.pi * 220 * k * t) for k in range(1, 32)) * 0.3 + 0.1 * chirp(t, 500, 20000)
    sf.write(INPUTS / "mono48k.wav", to_int16(x), 48000, subtype="PCM_16")

    # 35 s at 16 kHz: silence with a tone burst across the 30-second boundary and one after it,
    # so the second window must start exactly at 30 s.
    x = np.zeros(35 * 16000)
    t = np.arange(x.size) / 16000
    burst = (t >= 29.6) & (t < 30.4)
    x[burst] = 0.5 * np.sin(2 * np.pi * 1000 * t[burst])
    burst = (t >= 33.0) & (t < 33.5)
    x[burst] = 0.3 * np.sin(2 * np.pi * 2500 * t[burst])
    sf.write(INPUTS / "long16k.flac", to_int16(x), 16000, subtype="PCM_16")

    # Lossy formats, 2 s at 16 kHz mono: tones and a sweep.
    t = np.arange(2 * 16000) / 16000
    x = 0.3 * np.sin(2 * np.pi * 300 * t) + 0.2 * chirp(t, 200, 6000)
    sf.write(INPUTS / "tones16k.mp3", x.astype(np.float32), 16000, format="MP3", subtype="MPEG_LAYER_III")
    sf.write(INPUTS / "tones16k.ogg", x.astype(np.float32), 16000, format="OGG", subtype="VORBIS")

    WhisperFeatureExtractor(feature_size=128).save_pretrained(INPUTS / "large-v3")


def beckett() -> Path:
    env = os.environ.get("ATTNVIZ_AUDIO_DIR")
    folder = Path(env) if env else REPO / ".cache" / "audio"
    path = folder / "beckett.wav"
    if not path.is_file():
        subprocess.run(["bash", str(REPO / "scripts" / "fetch-beckett.sh")], check=True, stdout=subprocess.DEVNULL)
    return path


def read_mono(path: Path) -> tuple[np.ndarray, int, int]:
    """The file as soundfile gives it (float32, int16 / 32768), mixed as librosa's to_mono."""
    data, rate = sf.read(path, dtype="float32", always_2d=True)
    channels = data.shape[1]
    mono = data.mean(axis=1, dtype=np.float32) if channels > 1 else data[:, 0]
    return np.ascontiguousarray(mono, dtype=np.float32), rate, channels


def features(samples: np.ndarray, feature_size: int, numpy_path: bool = True) -> list[np.ndarray]:
    """The extractor's output per window. transformers takes its torch path (float32
    `torch.stft`) whenever torch is installed; `numpy_path` makes it take the numpy one
    (`_np_extract_fbank_features`, float64), the reference, by hiding torch from that module."""
    fe = WhisperFeatureExtractor(feature_size=feature_size)
    saved = fe_module.is_torch_available
    fe_module.is_torch_available = (lambda: False) if numpy_path else saved
    try:
        n_windows = max(1, -(-samples.size // N_SAMPLES))
        out = []
        for w in range(n_windows):
            chunk = samples[w * N_SAMPLES : (w + 1) * N_SAMPLES]
            feats = fe(chunk, sampling_rate=16000, return_tensors="np").input_features[0]
            out.append(np.asarray(feats, dtype=np.float32))
        return out
    finally:
        fe_module.is_torch_available = saved


def sha256(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a, dtype="<f4").tobytes()).hexdigest()


def stored_frames(samples_in_window: int, frames: int) -> tuple[int, int]:
    """The frames that see the recording (each frame spans 400 samples centred on i·160)."""
    end = min(frames, -(-samples_in_window // HOP) + 2)
    return 0, end


def main() -> None:
    rng = np.random.default_rng(SEED)
    make_inputs(rng)
    tensors: dict[str, np.ndarray] = {}
    cases = []

    def add(name: str, path: Path, feature_size: int = 80, regions: list[tuple[int, int]] | None = None, **extra):
        samples, rate, channels = read_mono(path)
        entry = dict(
            name=name,
            file=str(path.relative_to(REPO)) if path.is_relative_to(REPO / "tests") else path.name,
            source_rate=rate,
            channels=channels,
            feature_size=feature_size,
        )
        if rate != 16000:
            want = 16000
            resampled = soxr.resample(samples, rate, want, "HQ").astype(np.float32)
            g = np.gcd(rate, want)
            poly = scipy.signal.resample_poly(samples, want // g, rate // g).astype(np.float32)
            tensors[f"{name}.soxr_samples"] = resampled
            tensors[f"{name}.poly_samples"] = poly
            poly_feats = features(poly, feature_size)
            entry["resampled_by"] = "soxr HQ (librosa's default); poly_samples: scipy resample_poly"
            entry["soxr_vs_poly_samples_max_abs"] = float(np.abs(resampled[: poly.size] - poly[: resampled.size]).max())
            samples = resampled
        else:
            poly_feats = None
        entry["n_samples"] = int(samples.size)
        entry["samples_sha256"] = sha256(samples)
        feats = features(samples, feature_size)
        torch_feats = features(samples, feature_size, numpy_path=False) if fe_module.is_torch_available() else None
        windows = []
        for w, f in enumerate(feats):
            in_window = max(0, min(N_SAMPLES, samples.size - w * N_SAMPLES))
            a, b = regions[w] if regions else stored_frames(in_window, f.shape[1])
            rest = np.concatenate([f[:, :a], f[:, b:]], axis=1)
            key = f"{name}.w{w}"
            tensors[f"{key}.frames"] = np.ascontiguousarray(f[:, a:b])
            tensors[f"{key}.rest_min"] = rest.min(axis=1) if rest.size else np.zeros(f.shape[0], np.float32)
            tensors[f"{key}.rest_max"] = rest.max(axis=1) if rest.size else np.zeros(f.shape[0], np.float32)
            win = dict(start_seconds=30 * w, frames=[a, b], n_frames=int(f.shape[1]), sha256=sha256(f))
            if torch_feats is not None:
                win["torch_path_vs_numpy_path_max_abs"] = float(np.abs(f - torch_feats[w]).max())
            if poly_feats is not None:
                win["soxr_vs_poly_features_max_abs"] = float(np.abs(f - poly_feats[w]).max())
            windows.append(win)
        entry["windows"] = windows
        entry.update(extra)
        cases.append(entry)

    add("chirp16k", INPUTS / "chirp16k.wav")
    add("chirp16k_128", INPUTS / "chirp16k.wav", feature_size=128)
    add("chirp16k_24bit", INPUTS / "chirp16k-24bit.wav")
    add("chirp16k_8bit", INPUTS / "chirp16k-8bit.wav")
    add("chirp16k_float", INPUTS / "chirp16k-float.wav")
    add("stereo16k", INPUTS / "stereo16k.wav")
    add("stereo44k", INPUTS / "stereo44k.flac")
    add("mono48k", INPUTS / "mono48k.wav")
    add("long16k", INPUTS / "long16k.flac", regions=[(2940, 3000), (0, 360)])
    add("tones16k_mp3", INPUTS / "tones16k.mp3", decoded_by=f"libsndfile {sf.__libsndfile_version__} (mpg123)")
    add("tones16k_ogg", INPUTS / "tones16k.ogg", decoded_by=f"libsndfile {sf.__libsndfile_version__} (libvorbis)")
    add("beckett", beckett(), source="moonshine-cpp 0.1.4's test-data/beckett.wav (scripts/fetch-beckett.sh)")

    for n_mels in (80, 128):
        fe = WhisperFeatureExtractor(feature_size=n_mels)
        tensors[f"mel_filters.{n_mels}"] = np.ascontiguousarray(fe.mel_filters.T, dtype=np.float32)

    safetensors.numpy.save_file(tensors, str(REFERENCE / "audio-features.safetensors"))
    manifest = dict(
        description="Whisper log-mel references (tests/reference/make_audio.py)",
        versions=dict(
            python=sys.version.split()[0],
            transformers=transformers.__version__,
            numpy=np.__version__,
            soundfile=sf.__version__,
            libsndfile=sf.__libsndfile_version__,
            soxr=soxr.__version__,
            scipy=scipy.__version__,
            torch=__import__("torch").__version__ if fe_module.is_torch_available() else None,
        ),
        cases=cases,
    )
    (REFERENCE / "audio-features.json").write_text(json.dumps(manifest, indent=2) + "\n")
    for c in cases:
        print(c["name"], c["n_samples"], [(w["frames"], w.get("torch_path_vs_numpy_path_max_abs"), w.get("soxr_vs_poly_features_max_abs")) for w in c["windows"]])


if __name__ == "__main__":
    main()
