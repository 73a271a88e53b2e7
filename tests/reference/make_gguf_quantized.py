#!/usr/bin/env python3
"""GGUF copies of the tiny Gemma 2, Gemma 3, Phi-3, Qwen3 and Llama models in F32, Q8_0 and Q6_K,
and transformers' reference outputs for each, loaded by transformers from that GGUF file.

    .cache/venv-ref/bin/python tests/reference/make_gguf_quantized.py   # any Python with requirements.txt

Writes tests/fixtures/gguf/<model>.<TYPE>.gguf and tests/reference/gguf-quantized.{json,safetensors}.

Files are written as llama.cpp's convert_hf_to_gguf.py writes them (tensor names from gguf-py's
own tensor map; Gemma's norm weights stored plus one; Llama's q/k rows permuted; Phi-3's fused
attn_qkv and ffn_up kept fused, its LongRoPE factors as rope_factors_short/long tensors with
rope.scaling.original_context_length and attn_factor). Quantised files hold every matrix whose
rows fit the type's blocks in that type, the others as llama.cpp falls back (Q6_K → Q8_0 → F32);
norms and factors stay F32. gguf-py quantises Q8_0; Q6_K (which gguf-py only dequantises) is
quantised here by `quantize_q6_k`, checked against gguf-py's dequantisation.

Models:
- tiny-gemma2, tiny-gemma3, tiny-phi3 (32 wide) from tests/fixtures/<name>: F32 and Q8_0.
- tiny-qwen3-128 and tiny-llama from tests/fixtures: Q8_0 (their F32 copies are make_gguf.py's).
- wide-<family>: 256-wide random models made here (seeded; 2 heads of 64 over 1 KV head, one
  layer, two for Gemma 2), because K-quant blocks are 256 wide: Q6_K for all five families (the
  matrices 128 wide fall back to Q8_0), and an F32 copy, not kept, to compare with.

Reference: for every file, transformers (eager, float32) loads the GGUF (gguf-py's
dequantisation, transformers' own un-permutation and norm shift) with the config llama.cpp reads
from that file's metadata: transformers' GGUF reader ignores some of the keys written here
(softcapping, sliding windows, LongRoPE, Gemma 3's RoPE scaling), and llama.cpp fixes what the
metadata does not say (Gemma's scores scaled by head_dim^-1/2, Gemma 3's local RoPE base 10,000,
the sliding-layer patterns), so the script passes that config explicitly. For each input it
records the attention at every layer and head and the logits at the last position, and for the
quantised files the gap to the same model's F32 file (`vs_f32`): what the quantisation itself
changes, which a test cannot hold attnviz to, only to the dequantised model.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import safetensors.numpy
import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

import gguf
from gguf import GGMLQuantizationType as Q

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_gguf import bpe_tokenizer, finish, permute, spm_tokenizer  # noqa: E402
from reflib import FIXTURES, REFERENCE, setup_determinism, versions, write_json  # noqa: E402

OUT = FIXTURES / "gguf"
SEED = 20261204
ARCH = {
    "gemma2": "gemma2",
    "gemma3_text": "gemma3",
    "phi3": "phi3",
    "qwen3": "qwen3",
    "llama": "llama",
    "qwen2_5_vl_text": "qwen2vl",
    "qwen2_vl_text": "qwen2vl",
}
ARCH_ENUM = {
    "gemma2": gguf.MODEL_ARCH.GEMMA2,
    "gemma3": gguf.MODEL_ARCH.GEMMA3,
    "phi3": gguf.MODEL_ARCH.PHI3,
    "qwen3": gguf.MODEL_ARCH.QWEN3,
    "llama": gguf.MODEL_ARCH.LLAMA,
    "qwen2vl": gguf.MODEL_ARCH.QWEN2VL,
}
TEXTS = {
    "short": "The cat sat.",
    "long": "The quick brown fox jumps over a dog.",
}


def quantize_q6_k(values: np.ndarray) -> np.ndarray:
    """Q6_K blocks (ggml's block_q6_K: ql[128], qh[64], int8 scales[16], f16 d) for rows of 256k
    values: a scale per 16 values, 6-bit weights in -32..31. The layout is the inverse of
    gguf-py's `Q6_K.dequantize_blocks`."""
    rows, cols = values.shape
    x = values.reshape(-1, 16, 16).astype(np.float32)  # blocks of 256 as 16 sub-blocks of 16
    n = x.shape[0]
    amax = np.abs(x).max(axis=2)  # [n, 16]
    sub = amax / 31.0
    d = (sub.max(axis=1) / 127.0).astype(np.float16).astype(np.float32)  # [n]
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(d[:, None] > 0, np.round(sub / d[:, None]), 0).clip(-128, 127).astype(np.int8)
        step = d[:, None] * sc.astype(np.float32)  # [n, 16]
        q = np.where(step[:, :, None] > 0, np.round(x / step[:, :, None]), 0)
    q = (q.clip(-32, 31) + 32).astype(np.uint8).reshape(n, 256)
    i = np.arange(256)
    h, m, l = i // 128, (i % 128) // 32, i % 32
    ql = np.zeros((n, 128), np.uint8)
    qh = np.zeros((n, 64), np.uint8)
    for k in range(256):
        s, j = m[k] // 2, (m[k] % 2) * 32 + l[k]
        ql[:, h[k] * 64 + j] |= ((q[:, k] & 0xF) << (4 * s)).astype(np.uint8)
        qh[:, h[k] * 32 + l[k]] |= (((q[:, k] >> 4) & 3) << (2 * m[k])).astype(np.uint8)
    blocks = np.concatenate(
        [ql, qh, sc.view(np.uint8), d.astype(np.float16).view(np.uint8).reshape(n, 2)], axis=1
    )
    out = blocks.reshape(rows, cols // 256 * 210)
    back = gguf.quants.dequantize(out, Q.Q6_K)
    # Every value within half a step of its sub-block (plus d's f16 rounding).
    bound = (np.repeat(step, 16, axis=1).reshape(rows, cols) * 0.5 + 1e-6) * 1.001
    assert (np.abs(back - values) <= bound + np.abs(values) * 1e-3).all(), "Q6_K round trip"
    return out


def store(value: np.ndarray, qtype: Q) -> tuple[np.ndarray, Q]:
    """`value` in `qtype`, or the type llama.cpp falls back to when its rows do not fit."""
    cols = value.shape[-1]
    if value.ndim != 2 or qtype == Q.F32:
        return value, Q.F32
    if qtype == Q.Q6_K and cols % 256 == 0:
        return quantize_q6_k(value), Q.Q6_K
    if qtype in (Q.Q6_K, Q.Q8_0) and cols % 32 == 0:
        return gguf.quants.quantize(value, Q.Q8_0), Q.Q8_0
    return value, Q.F32


def write(path: Path, cfg: dict, weights: dict, tokenizer, src: Path, qtype: Q) -> None:
    """The GGUF file llama.cpp's converter writes for `cfg` and `weights` (then quantised)."""
    model_type = cfg["model_type"]
    arch = ARCH[model_type]
    heads, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hidden = cfg["hidden_size"]
    head_dim = cfg.get("head_dim") or hidden // heads
    rope = cfg.get("rope_parameters") or {}
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name(path.stem)
    writer.add_context_length(cfg["max_position_embeddings"])
    writer.add_embedding_length(hidden)
    writer.add_block_count(cfg["num_hidden_layers"])
    writer.add_feed_forward_length(cfg["intermediate_size"])
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv)
    writer.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    writer.add_vocab_size(cfg["vocab_size"])
    writer.add_file_type(gguf.LlamaFileType.ALL_F32 if qtype == Q.F32 else gguf.LlamaFileType.MOSTLY_Q8_0)
    if arch in ("gemma2", "gemma3") or head_dim * heads != hidden:
        writer.add_key_length(head_dim)
        writer.add_value_length(head_dim)
    extra = {}
    if arch == "gemma2":
        writer.add_rope_freq_base(rope.get("rope_theta", 10000.0))
        writer.add_attn_logit_softcapping(cfg["attn_logit_softcapping"])
        writer.add_final_logit_softcapping(cfg["final_logit_softcapping"])
        writer.add_sliding_window(cfg["sliding_window"])
    elif arch == "gemma3":
        full = rope["full_attention"]
        writer.add_rope_freq_base(full["rope_theta"])
        if full.get("rope_type") == "linear":
            writer.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
            writer.add_rope_scaling_factor(full["factor"])
        writer.add_sliding_window(cfg["sliding_window"])
    elif arch == "phi3":
        rotary = int(head_dim * rope.get("partial_rotary_factor", 1.0))
        writer.add_rope_dimension_count(rotary)
        writer.add_rope_freq_base(rope["rope_theta"])
        if cfg.get("sliding_window"):
            writer.add_sliding_window(cfg["sliding_window"])
        if rope.get("rope_type") == "longrope":
            orig = rope["original_max_position_embeddings"]
            scale = cfg["max_position_embeddings"] / orig
            # convert_hf_to_gguf.py's Phi3MiniModel: the attention factor and both factor lists.
            attn = 1.0 if scale <= 1.0 else math.sqrt(1 + math.log(scale) / math.log(orig))
            writer.add_rope_scaling_attn_factors(attn)
            writer.add_rope_scaling_orig_ctx_len(orig)
            extra["rope_factors_long.weight"] = np.array(rope["long_factor"], np.float32)
            extra["rope_factors_short.weight"] = np.array(rope["short_factor"], np.float32)
    else:
        writer.add_rope_dimension_count(head_dim)
        params = rope or {"rope_theta": cfg.get("rope_theta", 10000.0), **(cfg.get("rope_scaling") or {})}
        writer.add_rope_freq_base(params["rope_theta"])
        if (params.get("rope_type") or params.get("type")) == "linear":
            writer.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
            writer.add_rope_scaling_factor(params["factor"])
        if arch == "qwen2vl":
            # Qwen2VLModel: M-RoPE's sections, padded to llama.cpp's four.
            sections = list(params["mrope_section"])
            writer.add_rope_dimension_sections(sections + [0] * max(0, 4 - len(sections)))
    tokenizer(writer, src)
    if (src / "chat_template.jinja").exists() and tokenizer is spm_tokenizer:
        writer.add_chat_template((src / "chat_template.jinja").read_text())
    names = gguf.get_tensor_name_map(ARCH_ENUM[arch], cfg["num_hidden_layers"])
    tensors = dict(extra)
    for hf in sorted(weights):
        value = np.ascontiguousarray(weights[hf], dtype=np.float32)
        if arch in ("gemma2", "gemma3") and hf.endswith("norm.weight"):
            value = value + 1.0
        if arch == "llama" and hf.endswith("q_proj.weight"):
            value = permute(value, heads, heads)
        elif arch == "llama" and hf.endswith("k_proj.weight"):
            value = permute(value, heads, kv)
        name = names.get_name(hf, try_suffixes=(".weight", ".bias"))
        assert name is not None, hf
        tensors[name] = value
    for name in sorted(tensors):
        data, kind = store(tensors[name], qtype if not name.startswith("rope_factors") else Q.F32)
        writer.add_tensor(name, data, raw_dtype=kind)
    finish(writer)


def llama_cpp_config(cfg: dict) -> dict:
    """The config llama.cpp reads from the file `write` makes of `cfg` (see the module doc)."""
    cfg = {k: v for k, v in cfg.items() if k not in ("architectures", "transformers_version", "dtype")}
    layers = cfg["num_hidden_layers"]
    if cfg["model_type"] == "gemma2":
        cfg["query_pre_attn_scalar"] = cfg["head_dim"]
        cfg["layer_types"] = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(layers)]
    if cfg["model_type"] == "gemma3_text":
        cfg["query_pre_attn_scalar"] = cfg["head_dim"]
        cfg["layer_types"] = ["sliding_attention" if i % 6 < 5 else "full_attention" for i in range(layers)]
        cfg["rope_parameters"] = dict(
            cfg["rope_parameters"], sliding_attention={"rope_type": "default", "rope_theta": 10000.0}
        )
    return cfg


def reference(path: Path, cfg: dict, src: Path) -> dict:
    """transformers on the GGUF file's dequantised weights, under llama.cpp's reading of it."""
    config = AutoConfig.for_model(**llama_cpp_config(cfg))
    config._attn_implementation = "eager"
    model = AutoModelForCausalLM.from_pretrained(
        OUT, gguf_file=path.name, config=config, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    tok = AutoTokenizer.from_pretrained(src)
    out = {}
    for case, text in TEXTS.items():
        ids = tok(text)["input_ids"]
        with torch.no_grad():
            r = model(torch.tensor([ids]), output_attentions=True)
        out[case] = dict(
            input_ids=ids,
            attentions=torch.stack([a[0] for a in r.attentions]).numpy(),
            logits=r.logits[0, -1].numpy(),
        )
    return out


def wide(model_type: str, src: Path) -> tuple[dict, dict]:
    """A 256-wide random model of `model_type` (seeded), with `src`'s vocabulary."""
    base = json.loads((src / "config.json").read_text())
    cfg = dict(
        base,
        hidden_size=256,
        intermediate_size=128,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=64,
        # Gemma 2 needs two to have a global layer after its sliding one.
        num_hidden_layers=2 if model_type == "gemma2" else 1,
        tie_word_embeddings=True,
    )
    cfg.pop("layer_types", None)
    if model_type == "phi3":
        # Phi3Config's head_dim is hidden / heads.
        cfg.update(num_attention_heads=4, num_key_value_heads=2)
        cfg["rope_parameters"] = dict(base["rope_parameters"], short_factor=[1.0 + i / 16 for i in range(16)],
                                      long_factor=[2.0 + i / 8 for i in range(16)])
    if model_type == "qwen3":
        cfg.update(use_sliding_window=False, sliding_window=None, max_window_layers=2)
    config = AutoConfig.for_model(**llama_cpp_config(cfg))
    torch.manual_seed(SEED)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    rng = np.random.default_rng(SEED)
    weights = {}
    for name, value in model.state_dict().items():
        if name == "lm_head.weight" and cfg.get("tie_word_embeddings"):
            continue
        shape = tuple(value.shape)
        w = rng.standard_normal(shape).astype(np.float32) * (0.2 if len(shape) == 2 else 0.1)
        weights[name] = w
    return cfg, weights


def main() -> None:
    setup_determinism(SEED)
    manifest = dict(generator="tests/reference/make_gguf_quantized.py", versions=versions(), files=[])
    tensors = {}
    jobs = []  # (file stem, cfg, weights, tokenizer, src, types)
    for folder in ("tiny-gemma2", "tiny-gemma3", "tiny-phi3"):
        src = FIXTURES / folder
        cfg = json.loads((src / "config.json").read_text())
        weights = safetensors.numpy.load_file(str(src / "model.safetensors"))
        jobs.append((folder, cfg, weights, spm_tokenizer, src, [Q.F32, Q.Q8_0]))
    for folder, tokenizer in (("tiny-qwen3-128", bpe_tokenizer), ("tiny-llama", spm_tokenizer)):
        src = FIXTURES / folder
        cfg = json.loads((src / "config.json").read_text())
        weights = safetensors.numpy.load_file(str(src / "model.safetensors"))
        jobs.append((folder, cfg, weights, tokenizer, src, [Q.F32, Q.Q8_0]))
    for folder, tokenizer in (
        ("tiny-gemma2", spm_tokenizer),
        ("tiny-gemma3", spm_tokenizer),
        ("tiny-phi3", spm_tokenizer),
        ("tiny-qwen3", bpe_tokenizer),
        ("tiny-llama", spm_tokenizer),
    ):
        src = FIXTURES / folder
        cfg = json.loads((src / "config.json").read_text())
        cfg, weights = wide(cfg["model_type"], src)
        jobs.append((folder.replace("tiny-", "wide-"), cfg, weights, tokenizer, src, [Q.F32, Q.Q6_K]))

    tmp = OUT / "tmp-f32.gguf"
    for stem, cfg, weights, tokenizer, src, types in jobs:
        f32 = None
        for qtype in types:
            keep = qtype != Q.F32 or stem.startswith("tiny-") and stem not in ("tiny-qwen3-128", "tiny-llama")
            path = OUT / f"{stem}.{qtype.name}.gguf" if keep else tmp
            write(path, cfg, weights, tokenizer, src, qtype)
            ref = reference(path, cfg, src)
            if qtype == Q.F32:
                f32 = ref
            if not keep:
                path.unlink()
                continue
            entry = dict(file=path.name, type=qtype.name, cases=[])
            for case, r in ref.items():
                key = f"{path.name}/{case}"
                tensors[f"{key}/attentions"] = np.ascontiguousarray(r["attentions"])
                tensors[f"{key}/logits"] = np.ascontiguousarray(r["logits"])
                item = dict(name=case, text=TEXTS[case], input_ids=r["input_ids"], n=len(r["input_ids"]))
                if qtype != Q.F32:
                    item["vs_f32"] = dict(
                        attention=float(np.abs(r["attentions"] - f32[case]["attentions"]).max()),
                        logits=float(np.abs(r["logits"] - f32[case]["logits"]).max()),
                    )
                entry["cases"].append(item)
            manifest["files"].append(entry)
            print(path.name, path.stat().st_size, "bytes",
                  [c.get("vs_f32") for c in entry["cases"]])
    safetensors.numpy.save_file(tensors, str(REFERENCE / "gguf-quantized.safetensors"),
                                metadata={"generator": "tests/reference/make_gguf_quantized.py"})
    write_json(REFERENCE / "gguf-quantized.json", manifest)


if __name__ == "__main__":
    main()
