#!/usr/bin/env python3
"""CTranslate2 Whisper files → transformers' layout, and a reference summary of the model.bin.

    python3 tests/reference/ct2_to_transformers.py            # tiny.en and base
    python3 tests/reference/ct2_to_transformers.py tiny.en    # or: base
    python3 tests/reference/ct2_to_transformers.py tiny.en --check   # also transcribe beckett.wav

For each model (scripts/fetch-whisper-tiny.sh → .cache/models/whisper-tiny.en, or
$ATTNVIZ_WHISPER_TINY_DIR; scripts/fetch-whisper-base.sh → .cache/models/whisper-base, or
$ATTNVIZ_WHISPER_BASE_DIR; the fetch script runs when the folder is missing):

1. Reads model.bin with the small numpy reader below, written from CTranslate2's format
   (CTranslate2's models/model.cc reads it, its ctranslate2/specs/model_spec.py writes it), independent
   of the Rust reader in crates/model/src/formats/ctranslate2.rs, and writes
   tests/reference/audio-ct2-<name>.json: version, spec, revision, every variable's name, shape,
   dtype, the sha256 of its stored bytes, the float64 sum of its values as float32 (int8/int16
   weights dequantised with `<name>_scale` as CTranslate2 does) and its first four values; and the
   aliases. crates/model/tests/ctranslate2.rs holds the Rust reader to it.
2. Writes <folder>-hf/ (next to the model folder, not committed): model.safetensors with
   WhisperForConditionalGeneration's names (float32; the fused q/k/v and k/v projections split
   back, the key projection's zero bias dropped as transformers has none, the output projection
   tied to the token embeddings), config.json, generation_config.json (alignment heads,
   suppressed tokens and language ids from CTranslate2's config.json; special token ids from
   tokenizer.json), preprocessor_config.json, tokenizer.json and a tokenizer_config.json.
   transformers must load it with no missing or unexpected weight.
3. With --check, transcribes beckett.wav (scripts/fetch-beckett.sh) greedily with transformers
   (eager attention, float32) from the converted folder and prints the text.

Needs numpy and safetensors; with transformers and torch installed, the folder is also loaded back
and checked (and --check needs them).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "tests" / "reference"
MODELS = {
    "tiny.en": ("ATTNVIZ_WHISPER_TINY_DIR", "whisper-tiny.en", "fetch-whisper-tiny.sh"),
    "base": ("ATTNVIZ_WHISPER_BASE_DIR", "whisper-base", "fetch-whisper-base.sh"),
}
DTYPES = {0: "float32", 1: "int8", 2: "int16", 3: "int32", 4: "float16", 5: "bfloat16"}
NUMPY = {"float32": "<f4", "int8": "i1", "int16": "<i2", "int32": "<i4", "float16": "<f2", "bfloat16": "<u2"}


# ---- the reader -------------------------------------------------------------------------------


class Ct2File:
    """A model.bin: header, variables as numpy arrays (stored dtype), aliases."""

    def __init__(self, path: Path):
        self.data = path.read_bytes()
        self.pos = 0
        self.version = self._u("I")
        if not 1 <= self.version <= 6:
            raise ValueError(f"binary version {self.version}")
        if self.version >= 2:
            self.spec = self._string()
            self.revision = self._u("I")
        else:
            self.spec, self.revision = "", 1
        self.variables: dict[str, tuple[str, np.ndarray, bytes]] = {}
        for _ in range(self._u("I")):
            name = self._string()
            rank = self._u("B")
            shape = tuple(self._u("I") for _ in range(rank))
            if self.version >= 4:
                dtype = DTYPES[self._u("B")]
                nbytes = self._u("I")
            else:
                size = self._u("B")
                dtype = {4: "float32", 2: "int16", 1: "int8"}[size]
                nbytes = self._u("I") * size
            raw = self.data[self.pos : self.pos + nbytes]
            if len(raw) != nbytes:
                raise ValueError(f"{name}: truncated")
            self.pos += nbytes
            array = np.frombuffer(raw, dtype=NUMPY[dtype]).reshape(shape)
            if int(np.prod(shape, dtype=np.int64)) * array.itemsize != nbytes:
                raise ValueError(f"{name}: payload size")
            self.variables[name] = (dtype, array, raw)
        self.aliases: list[tuple[str, str]] = []
        if self.version >= 3:
            for _ in range(self._u("I")):
                self.aliases.append((self._string(), self._string()))
        if self.pos != len(self.data):
            raise ValueError(f"{len(self.data) - self.pos} trailing bytes")

    def _u(self, fmt: str) -> int:
        (v,) = struct.unpack_from("<" + fmt, self.data, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return v

    def _string(self) -> str:
        n = self._u("H")
        raw = self.data[self.pos : self.pos + n]
        self.pos += n
        assert n >= 1 and raw[-1] == 0
        return raw[:-1].decode("utf-8")

    def resolve(self, name: str) -> str:
        return dict(self.aliases).get(name, name)

    def f32(self, name: str) -> np.ndarray:
        """The variable as float32, as CTranslate2 turns it into float32."""
        dtype, a, _ = self.variables[self.resolve(name)]
        if dtype == "float32":
            return a.astype(np.float32)
        if dtype == "float16":
            return a.astype(np.float32)
        if dtype == "bfloat16":
            return (a.astype(np.uint32) << 16).view(np.float32)
        if dtype == "int32" or a.ndim == 0:
            return a.astype(np.float32)
        scale_name = self.resolve(name) + "_scale"
        if scale_name in self.variables:
            scale = self.f32(scale_name).reshape(-1)
        elif dtype == "int16":
            scale = np.array([1000.0], np.float32)
        else:
            raise ValueError(f"{scale_name} missing")
        rows = a.reshape(scale.size, -1).astype(np.float32)
        r = (np.float32(1.0) / scale).astype(np.float32)
        return (rows * r[:, None]).reshape(a.shape)


def summary(ct2: Ct2File) -> dict:
    variables = []
    for name, (dtype, a, raw) in ct2.variables.items():
        values = ct2.f32(name).reshape(-1)
        variables.append(
            dict(
                name=name,
                shape=list(a.shape),
                dtype=dtype,
                sha256=hashlib.sha256(raw).hexdigest(),
                sum=float(values.astype(np.float64).sum()),
                first=[float(v) for v in values[:4]],
            )
        )
    return dict(
        binary_version=ct2.version,
        spec=ct2.spec,
        revision=ct2.revision,
        variables=variables,
        aliases=[list(p) for p in ct2.aliases],
    )


# ---- conversion -------------------------------------------------------------------------------


def layer_count(ct2: Ct2File, side: str) -> int:
    n = 0
    while f"{side}/layer_{n}/ffn/linear_0/weight" in ct2.variables:
        n += 1
    return n


def convert(ct2: Ct2File, src: Path, out: Path) -> None:
    from safetensors.numpy import save_file

    t: dict[str, np.ndarray] = {}

    def put(hf: str, ct: str) -> np.ndarray:
        t[hf] = np.ascontiguousarray(ct2.f32(ct))
        return t[hf]

    def linear(hf: str, ct: str) -> None:
        put(hf + ".weight", ct + "/weight")
        put(hf + ".bias", ct + "/bias")

    def norm(hf: str, ct: str) -> None:
        put(hf + ".weight", ct + "/gamma")
        put(hf + ".bias", ct + "/beta")

    def split(hf: str, names: list[str], ct: str) -> None:
        w = ct2.f32(ct + "/weight")
        b = ct2.f32(ct + "/bias")
        parts = len(names)
        for i, n in enumerate(names):
            t[f"{hf}.{n}.weight"] = np.ascontiguousarray(np.split(w, parts, axis=0)[i])
            bias = np.split(b, parts)[i]
            if n == "k_proj":
                # transformers' key projections have no bias; CTranslate2 fuses a zero one.
                assert not bias.any(), f"{ct}: non-zero key bias"
            else:
                t[f"{hf}.{n}.bias"] = np.ascontiguousarray(bias)

    d = ct2.f32("encoder/conv1/weight").shape[0]
    n_mels = ct2.f32("encoder/conv1/weight").shape[1]
    enc_layers, dec_layers = layer_count(ct2, "encoder"), layer_count(ct2, "decoder")
    for side, n in (("encoder", enc_layers), ("decoder", dec_layers)):
        hf = f"model.{side}"
        put(f"{hf}.embed_positions.weight", f"{side}/position_encodings/encodings")
        norm(f"{hf}.layer_norm", f"{side}/layer_norm")
        for i in range(n):
            L, C = f"{hf}.layers.{i}", f"{side}/layer_{i}"
            split(f"{L}.self_attn", ["q_proj", "k_proj", "v_proj"], f"{C}/self_attention/linear_0")
            linear(f"{L}.self_attn.out_proj", f"{C}/self_attention/linear_1")
            norm(f"{L}.self_attn_layer_norm", f"{C}/self_attention/layer_norm")
            if side == "decoder":
                linear(f"{L}.encoder_attn.q_proj", f"{C}/attention/linear_0")
                split(f"{L}.encoder_attn", ["k_proj", "v_proj"], f"{C}/attention/linear_1")
                linear(f"{L}.encoder_attn.out_proj", f"{C}/attention/linear_2")
                norm(f"{L}.encoder_attn_layer_norm", f"{C}/attention/layer_norm")
            linear(f"{L}.fc1", f"{C}/ffn/linear_0")
            linear(f"{L}.fc2", f"{C}/ffn/linear_1")
            norm(f"{L}.final_layer_norm", f"{C}/ffn/layer_norm")
    linear("model.encoder.conv1", "encoder/conv1")
    linear("model.encoder.conv2", "encoder/conv2")
    emb = put("model.decoder.embed_tokens.weight", "decoder/embeddings/weight")
    assert ct2.resolve("decoder/projection/weight") == "decoder/embeddings/weight", "untied projection"

    cfg = json.loads((src / "config.json").read_text())
    tok = json.loads((src / "tokenizer.json").read_text())
    ids = {a["content"]: a["id"] for a in tok["added_tokens"]}
    vocab = emb.shape[0]
    multilingual = vocab >= 51865
    ffn = ct2.f32("encoder/layer_0/ffn/linear_0/weight").shape[0]
    eot = ids["<|endoftext|>"]
    config = dict(
        architectures=["WhisperForConditionalGeneration"],
        model_type="whisper",
        vocab_size=vocab,
        num_mel_bins=n_mels,
        d_model=d,
        encoder_layers=enc_layers,
        decoder_layers=dec_layers,
        encoder_attention_heads=int(ct2.variables["encoder/num_heads"][1]),
        decoder_attention_heads=int(ct2.variables["decoder/num_heads"][1]),
        encoder_ffn_dim=ffn,
        decoder_ffn_dim=ffn,
        max_source_positions=ct2.f32("encoder/position_encodings/encodings").shape[0],
        max_target_positions=ct2.f32("decoder/position_encodings/encodings").shape[0],
        activation_function="gelu",
        scale_embedding=False,
        tie_word_embeddings=True,
        bos_token_id=eot,
        eos_token_id=eot,
        pad_token_id=eot,
        decoder_start_token_id=ids["<|startoftranscript|>"],
        suppress_tokens=cfg.get("suppress_ids", []),
        begin_suppress_tokens=cfg.get("suppress_ids_begin", []),
        torch_dtype="float32",
    )
    generation = dict(
        alignment_heads=cfg.get("alignment_heads"),
        begin_suppress_tokens=cfg.get("suppress_ids_begin", []),
        suppress_tokens=cfg.get("suppress_ids", []),
        bos_token_id=eot,
        eos_token_id=eot,
        pad_token_id=eot,
        decoder_start_token_id=ids["<|startoftranscript|>"],
        no_timestamps_token_id=ids["<|notimestamps|>"],
        prev_sot_token_id=ids.get("<|startofprev|>"),
        is_multilingual=multilingual,
        max_initial_timestamp_index=50,
        max_length=config["max_target_positions"],
        return_timestamps=False,
    )
    if multilingual:
        by_id = {v: k for k, v in ids.items()}
        generation["lang_to_id"] = {by_id[i]: i for i in cfg.get("lang_ids", [])}
        generation["task_to_id"] = {"transcribe": ids["<|transcribe|>"], "translate": ids["<|translate|>"]}
        # As openai's multilingual checkpoints have it: the language detected, then transcribe
        # (without it transformers leaves the task token out and the decoder loops).
        generation["forced_decoder_ids"] = [[1, None], [2, ids["<|transcribe|>"]]]

    out.mkdir(parents=True, exist_ok=True)
    save_file(t, str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    (out / "generation_config.json").write_text(json.dumps(generation, indent=2) + "\n")
    (out / "tokenizer.json").write_bytes((src / "tokenizer.json").read_bytes())
    tokenizer_config = dict(
        tokenizer_class="WhisperTokenizer",
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        unk_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        model_max_length=1024,
    )
    (out / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2) + "\n")
    # What WhisperFeatureExtractor(feature_size=n_mels).save_pretrained writes (transformers 5.24),
    # so that the conversion needs numpy and safetensors only (scripts/test.sh runs it so).
    features = dict(
        chunk_length=30,
        dither=0.0,
        feature_extractor_type="WhisperFeatureExtractor",
        feature_size=n_mels,
        hop_length=160,
        n_fft=400,
        n_samples=480000,
        nb_max_frames=3000,
        padding_side="right",
        padding_value=0.0,
        return_attention_mask=False,
        sampling_rate=16000,
    )
    (out / "preprocessor_config.json").write_text(json.dumps(features, indent=2, sort_keys=True) + "\n")
    try:
        from transformers import WhisperFeatureExtractor, WhisperForConditionalGeneration
    except ImportError:
        print("transformers is not installed: the folder is not loaded back to check it", file=sys.stderr)
        return
    import tempfile

    with tempfile.TemporaryDirectory() as saved:
        WhisperFeatureExtractor(feature_size=n_mels).save_pretrained(saved)
        written = json.loads((Path(saved) / "preprocessor_config.json").read_text())
    assert written == features, (written, features)

    model, info = WhisperForConditionalGeneration.from_pretrained(out, output_loading_info=True)
    missing = [k for k in info["missing_keys"] if k != "proj_out.weight"]
    assert not missing and not info["unexpected_keys"] and not info["mismatched_keys"], info
    assert np.array_equal(model.proj_out.weight.detach().numpy(), emb), "proj_out not tied"


def check(out: Path) -> str:
    import soundfile as sf
    import torch
    from tokenizers import Tokenizer
    from transformers import WhisperFeatureExtractor, WhisperForConditionalGeneration

    env = os.environ.get("ATTNVIZ_AUDIO_DIR")
    wav = (Path(env) if env else REPO / ".cache" / "audio") / "beckett.wav"
    if not wav.is_file():
        subprocess.run(["bash", str(REPO / "scripts" / "fetch-beckett.sh")], check=True, stdout=subprocess.DEVNULL)
    samples, rate = sf.read(wav, dtype="float32")
    assert rate == 16000
    model = WhisperForConditionalGeneration.from_pretrained(out, attn_implementation="eager").eval()
    fe = WhisperFeatureExtractor.from_pretrained(out)
    feats = torch.from_numpy(fe(samples, sampling_rate=16000, return_tensors="np").input_features)
    with torch.no_grad():
        ids = model.generate(feats, do_sample=False, num_beams=1, max_new_tokens=200)
    return Tokenizer.from_file(str(out / "tokenizer.json")).decode(ids[0].tolist(), skip_special_tokens=True)


def model_dir(name: str) -> Path:
    env, folder, script = MODELS[name]
    path = Path(os.environ[env]) if os.environ.get(env) else REPO / ".cache" / "models" / folder
    if not (path / "model.bin").is_file():
        subprocess.run(["bash", str(REPO / "scripts" / script)], check=True, stdout=subprocess.DEVNULL)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="*", choices=[*MODELS, []], default=list(MODELS))
    ap.add_argument("--check", action="store_true", help="transcribe beckett.wav with transformers")
    args = ap.parse_args()
    for name in args.models or list(MODELS):
        src = model_dir(name)
        ct2 = Ct2File(src / "model.bin")
        (REFERENCE / f"audio-ct2-{name}.json").write_text(json.dumps(summary(ct2), indent=1) + "\n")
        out = src.parent / (src.name + "-hf")
        convert(ct2, src, out)
        print(f"{name}: {len(ct2.variables)} variables, {ct2.spec} rev {ct2.revision}; transformers folder {out}")
        if args.check:
            print(f"{name} on beckett.wav: {check(out)!r}")


if __name__ == "__main__":
    sys.exit(main())
