#!/usr/bin/env python3
"""Small GGUF fixtures, written with gguf-py (llama.cpp's own Python package), and their references.

    .cache/venv-ref/bin/python tests/reference/make_gguf.py     # any Python with requirements.txt
    .cache/venv-ref/bin/python tests/reference/make_gguf.py tiny-smollm3   # some files only

Writes, under tests/fixtures/gguf/:

- types.gguf: one 3 x 512 tensor per ggml type that candle dequantises and a GGUF file can hold:
  F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 quantised by gguf-py from seeded normal values;
  Q2_K, Q3_K, Q4_K, Q5_K and Q6_K as seeded random blocks whose f16 scales are set to sane
  values (gguf-py dequantises these types but cannot quantise them). The tensor `t.<TYPE>` holds
  type <TYPE>. Reference: tests/reference/gguf-types.safetensors, gguf-py's dequantisation of
  each tensor (float32, same names).
- unsupported.gguf: a tensor `blk.0.attn_q.weight` stored as IQ4_NL, a type candle cannot read.
- tiny-llama.gguf: tests/fixtures/tiny-llama (transformers' tiny random Llama: 2 layers, 4 heads
  over 2 KV heads, head_dim 16, linear rope scaling 2, untied) as llama.cpp's converter writes it:
  llama.cpp's tensor names, F32, the q/k rows permuted with convert_hf_to_gguf.py's `permute`,
  `llama.*` metadata, and the SentencePiece vocabulary (`tokenizer.ggml.model = "llama"`).
  Reference: the fixture's own model.safetensors and config.json.
- tiny-smollm3.gguf: tests/fixtures/tiny-smollm3 (SmolLM3: layer 3 of 5 without RoPE) as
  convert_hf_to_gguf.py's SmolLM3Model writes it: a LlamaModel (q/k permuted, F32) under the
  `smollm3` architecture, with no key for the layers without RoPE (llama.cpp fixes every fourth
  layer). Reference: tests/reference/tiny-smollm3.json (transformers has no smollm3 GGUF loader).
- tiny-qwen2.gguf: tests/fixtures/tiny-qwen2 (Qwen2: q/k/v biases, tied, no permutation) with its
  byte-level BPE vocabulary (`gpt2`, pre `qwen2`), special tokens as control tokens, and its chat
  template. Reference: tests/reference/tiny-qwen2.json (token ids, chat example) and the
  fixture's model.safetensors.

The script checks itself: transformers loads tiny-llama.gguf and tiny-qwen2.gguf back to exactly
the fixtures' weights (so the permutation is llama.cpp's, as transformers undoes it), and
transformers' tokenizer built from tiny-qwen2.gguf gives the fixture tokenizer's ids on the
reference texts. A re-run with the same versions rewrites every file byte for byte.
"""

from __future__ import annotations

import json
import sys
from importlib.metadata import version
from pathlib import Path

import numpy as np
import safetensors.numpy
import torch

import gguf
from gguf import GGMLQuantizationType as Q

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reflib import FIXTURES, REFERENCE, setup_determinism  # noqa: E402

OUT = FIXTURES / "gguf"
SEED = 20261203

QUANTISED = [Q.F32, Q.F16, Q.BF16, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0]
# Byte offsets of the f16 scales (d, and dmin where present) in each K-quant block of 256 values.
K_SCALES = {
    Q.Q2_K: (84, [80, 82]),
    Q.Q3_K: (110, [108]),
    Q.Q4_K: (144, [0, 2]),
    Q.Q5_K: (176, [0, 2]),
    Q.Q6_K: (210, [208]),
}
ROWS, COLS = 3, 512


def write_types(rng: np.random.Generator) -> None:
    writer = gguf.GGUFWriter(str(OUT / "types.gguf"), "attnviz-types")
    reference = {}
    for qtype in QUANTISED:
        values = rng.standard_normal((ROWS, COLS)).astype(np.float32)
        data = values if qtype == Q.F32 else gguf.quants.quantize(values, qtype)
        writer.add_tensor(f"t.{qtype.name}", data, raw_dtype=qtype)
        reference[f"t.{qtype.name}"] = gguf.quants.dequantize(data, qtype).astype(np.float32)
    for qtype, (block_bytes, scales) in K_SCALES.items():
        blocks = rng.integers(0, 256, (ROWS, COLS // 256, block_bytes), dtype=np.uint8)
        for at in scales:
            scale = rng.uniform(0.01, 0.1, (ROWS, COLS // 256)).astype(np.float16)
            blocks[:, :, at : at + 2] = scale.view(np.uint8).reshape(ROWS, COLS // 256, 2)
        data = blocks.reshape(ROWS, -1)
        writer.add_tensor(f"t.{qtype.name}", data, raw_dtype=qtype)
        reference[f"t.{qtype.name}"] = gguf.quants.dequantize(data, qtype).astype(np.float32)
    finish(writer)
    # Read back with gguf-py's reader: the stored tensors dequantise to the reference.
    for tensor in gguf.GGUFReader(str(OUT / "types.gguf")).tensors:
        back = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
        assert np.array_equal(back, reference[tensor.name]), tensor.name
        assert np.isfinite(back).all(), tensor.name
    safetensors.numpy.save_file(
        {k: np.ascontiguousarray(v) for k, v in sorted(reference.items())},
        str(REFERENCE / "gguf-types.safetensors"),
        metadata={"generator": "tests/reference/make_gguf.py", "gguf": version("gguf")},
    )

    writer = gguf.GGUFWriter(str(OUT / "unsupported.gguf"), "llama")
    blocks = rng.integers(0, 256, (2, 32 // 32 * 18 * 2), dtype=np.uint8)  # IQ4_NL: 18 bytes per 32
    writer.add_tensor("blk.0.attn_q.weight", blocks, raw_dtype=Q.IQ4_NL)
    finish(writer)


def finish(writer: gguf.GGUFWriter) -> None:
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def permute(weights: np.ndarray, n_head: int, n_head_kv: int | None) -> np.ndarray:
    """convert_hf_to_gguf.py's LlamaModel.permute: rows reordered for llama.cpp's interleaved RoPE."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (
        weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
        .swapaxes(1, 2)
        .reshape(weights.shape)
    )


GGUF_NAMES = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}
LAYER_NAMES = {
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "self_attn.q_norm": "attn_q_norm",
    "self_attn.k_norm": "attn_k_norm",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}


def gguf_name(hf: str) -> str:
    if hf in GGUF_NAMES:
        return GGUF_NAMES[hf]
    _, _, layer, rest = hf.split(".", 3)
    part, suffix = rest.rsplit(".", 1)
    return f"blk.{layer}.{LAYER_NAMES[part]}.{suffix}"


def llama3_rope_factors(config: dict) -> np.ndarray:
    """convert_hf_to_gguf.py's LlamaModel.generate_extra_tensors: Llama 3.1's `llama3` scaling as
    per-frequency divisors (`rope_freqs.weight`): 1 for high frequencies, `factor` for low ones,
    `1 / ((1 − smooth)/factor + smooth)` between."""
    import math

    rope = config["rope_parameters"]
    base = rope["rope_theta"]
    dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    freqs = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    factor, low, high = rope["factor"], rope["low_freq_factor"], rope["high_freq_factor"]
    old = rope["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old / low, old / high
    factors = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < high_wavelen:
            factors.append(1)
        elif wavelen > low_wavelen:
            factors.append(factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            factors.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(factors, dtype=np.float32)


def write_decoder(
    folder: str, arch: str, permute_qk: bool, tokenizer, name: str | None = None, check_load: bool = True
) -> dict:
    src = FIXTURES / folder
    config = json.loads((src / "config.json").read_text())
    weights = safetensors.numpy.load_file(str(src / "model.safetensors"))
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    path = OUT / f"{name or folder}.gguf"
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name(folder)
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    writer.add_rope_dimension_count(head_dim)
    if head_dim * heads != config["hidden_size"]:
        writer.add_key_length(head_dim)
        writer.add_value_length(head_dim)
    rope = config.get("rope_parameters") or {"rope_theta": config["rope_theta"], **(config.get("rope_scaling") or {})}
    writer.add_rope_freq_base(rope["rope_theta"])
    kind = rope.get("rope_type") or rope.get("type")
    if kind == "linear":
        writer.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        writer.add_rope_scaling_factor(rope["factor"])
    elif kind == "llama3":
        # As llama.cpp's converter: no scaling metadata, the factors as a tensor.
        writer.add_tensor("rope_freqs.weight", llama3_rope_factors(config))
    writer.add_layer_norm_rms_eps(config["rms_norm_eps"])
    writer.add_vocab_size(config["vocab_size"])
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    tokenizer(writer, src)
    for name in sorted(weights):
        value = weights[name]
        if permute_qk and name.endswith("q_proj.weight"):
            value = permute(value, heads, heads)
        elif permute_qk and name.endswith("k_proj.weight"):
            value = permute(value, heads, kv_heads)
        writer.add_tensor(gguf_name(name), np.ascontiguousarray(value, dtype=np.float32))
    finish(writer)
    if not check_load:
        return config

    # transformers loads the file back to the fixture's weights: the layout is llama.cpp's.
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(OUT, gguf_file=path.name, dtype=torch.float32)
    state = model.state_dict()
    for name, value in weights.items():
        assert np.array_equal(state[name].numpy(), value), f"{folder}: {name} differs after transformers' GGUF load"
    return config


def spm_tokenizer(writer: gguf.GGUFWriter, src: Path) -> None:
    """What convert_hf_to_gguf.py's `_set_vocab_sentencepiece` writes."""
    from sentencepiece import SentencePieceProcessor

    sp = SentencePieceProcessor(model_file=str(src / "tokenizer.model"))
    tokens, scores, types = [], [], []
    for i in range(sp.vocab_size()):
        tokens.append(sp.id_to_piece(i).encode("utf-8"))
        scores.append(sp.get_score(i))
        if sp.is_unknown(i):
            types.append(gguf.TokenType.UNKNOWN)
        elif sp.is_control(i):
            types.append(gguf.TokenType.CONTROL)
        elif sp.is_byte(i):
            types.append(gguf.TokenType.BYTE)
        else:
            types.append(gguf.TokenType.NORMAL)
    writer.add_tokenizer_model("llama")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(sp.bos_id())
    writer.add_eos_token_id(sp.eos_id())
    writer.add_unk_token_id(sp.unk_id())
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)


def bpe_tokenizer(writer: gguf.GGUFWriter, src: Path) -> None:
    """What convert_hf_to_gguf.py's `_set_vocab_gpt2` writes for a Qwen2 tokenizer."""
    vocab = json.loads((src / "vocab.json").read_text())
    tokenizer = json.loads((src / "tokenizer.json").read_text())
    added = {t["id"]: t for t in tokenizer["added_tokens"]}
    size = max([*vocab.values(), *added]) + 1
    tokens, types = [""] * size, [gguf.TokenType.NORMAL] * size
    for token, i in vocab.items():
        tokens[i] = token
    for i, t in added.items():
        tokens[i] = t["content"]
        types[i] = gguf.TokenType.CONTROL if t["special"] else gguf.TokenType.USER_DEFINED
    merges = [line for line in (src / "merges.txt").read_text().splitlines() if line and not line.startswith("#version")]
    config = json.loads((src / "tokenizer_config.json").read_text())
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    ids = {t["content"]: t["id"] for t in tokenizer["added_tokens"]}
    writer.add_eos_token_id(ids[config["eos_token"]])
    writer.add_pad_token_id(ids[config["pad_token"]])
    writer.add_add_bos_token(False)
    writer.add_chat_template((src / "chat_template.jinja").read_text())


def json_bpe_tokenizer(writer: gguf.GGUFWriter, src: Path) -> None:
    """What convert_hf_to_gguf.py's `_set_vocab_gpt2` writes for a Llama 3 tokenizer.json
    (`llama-bpe`): the BPE vocabulary and merges, added tokens as control tokens, BOS added."""
    tokenizer = json.loads((src / "tokenizer.json").read_text())
    vocab = tokenizer["model"]["vocab"]
    added = {t["id"]: t for t in tokenizer["added_tokens"]}
    size = max([*vocab.values(), *added]) + 1
    tokens, types = [""] * size, [gguf.TokenType.NORMAL] * size
    for token, i in vocab.items():
        tokens[i] = token
    for i, t in added.items():
        tokens[i] = t["content"]
        types[i] = gguf.TokenType.CONTROL if t["special"] else gguf.TokenType.USER_DEFINED
    merges = [m if isinstance(m, str) else " ".join(m) for m in tokenizer["model"]["merges"]]
    config = json.loads((src / "tokenizer_config.json").read_text())
    ids = {t["content"]: t["id"] for t in tokenizer["added_tokens"]}
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("llama-bpe")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(ids[config["bos_token"]])
    writer.add_eos_token_id(ids[config["eos_token"]])
    writer.add_add_bos_token(True)


def check_qwen2_tokenizer() -> None:
    """transformers' tokenizer from tiny-qwen2.gguf gives the reference ids (from tokenizer.json)."""
    from transformers import AutoTokenizer

    ref = json.loads((REFERENCE / "tiny-qwen2.json").read_text())
    tok = AutoTokenizer.from_pretrained(OUT, gguf_file="tiny-qwen2.gguf")
    for case in ref["cases"]:
        ids = tok(case["text"])["input_ids"]
        n = len(case["input_ids"])
        assert ids[:n] == case["input_ids"], case["name"]
        assert len(ids) == case["untruncated_len"], case["name"]
    example = ref["chat_example"]
    text = tok.apply_chat_template(example["messages"], tokenize=False, add_generation_prompt=True)
    assert text == example["text"]


def check_smollm3_layout(path: Path, folder: str) -> None:
    """transformers has no GGUF loader for smollm3: read the file back with gguf-py instead, undo
    the permutation and compare with the fixture's weights (exactly), and check that no key in
    the file states which layers skip RoPE (llama.cpp fixes it: every fourth layer)."""
    src = FIXTURES / folder
    config = json.loads((src / "config.json").read_text())
    weights = safetensors.numpy.load_file(str(src / "model.safetensors"))
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    step = 4
    assert config["no_rope_layers"] == [int((i + 1) % step != 0) for i in range(config["num_hidden_layers"])]
    reader = gguf.GGUFReader(str(path))
    assert not [k for k in reader.fields if "rope" in k and "layer" in k], "a no-rope key"
    stored = {t.name: np.array(t.data).reshape([int(d) for d in reversed(t.shape)]) for t in reader.tensors}
    assert sorted(stored) == sorted(gguf_name(n) for n in weights), sorted(stored)
    for name, value in weights.items():
        want = value
        if name.endswith("q_proj.weight"):
            want = permute(value, heads, heads)
        elif name.endswith("k_proj.weight"):
            want = permute(value, heads, kv_heads)
        assert np.array_equal(stored[gguf_name(name)], want), name


# Each file, by the name given on the command line: what writes it.
WRITERS = {
    "types": lambda: write_types(np.random.default_rng(SEED)),
    "tiny-llama": lambda: write_decoder("tiny-llama", "llama", True, spm_tokenizer),
    "tiny-qwen2": lambda: (write_decoder("tiny-qwen2", "qwen2", False, bpe_tokenizer), check_qwen2_tokenizer()),
    # qwen3: q/k norms; head_dim 128, which transformers' loader assumes for qwen3.
    "tiny-qwen3": lambda: write_decoder("tiny-qwen3-128", "qwen3", False, bpe_tokenizer, name="tiny-qwen3"),
    # Llama 3.1's scaling as rope_freqs.weight. transformers' GGUF loader ignores that tensor, so
    # the reference is the safetensors fixture with its llama3 rope_parameters (what the factors
    # were computed from): tests/reference/tiny-llama-tied.json.
    "tiny-llama-tied": lambda: write_decoder("tiny-llama-tied", "llama", True, json_bpe_tokenizer, check_load=False),
    # SmolLM3 as convert_hf_to_gguf.py's SmolLM3Model (a LlamaModel: q/k permuted, llama metadata
    # under smollm3.*). transformers has no GGUF loader for it: the reference is the safetensors
    # fixture's, tests/reference/tiny-smollm3.json.
    "tiny-smollm3": lambda: (
        write_decoder("tiny-smollm3", "smollm3", True, json_bpe_tokenizer, check_load=False),
        check_smollm3_layout(OUT / "tiny-smollm3.gguf", "tiny-smollm3"),
    ),
}


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", help=f"which to write (default: all): {sorted(WRITERS)}")
    args = parser.parse_args()
    unknown = [n for n in args.files if n not in WRITERS]
    if unknown:
        parser.error(f"unknown files {unknown}; choose from {sorted(WRITERS)}")
    setup_determinism(SEED)
    OUT.mkdir(parents=True, exist_ok=True)
    for name, write in WRITERS.items():
        if not args.files or name in args.files:
            write()
    for path in sorted(OUT.iterdir()):
        print(f"{path.relative_to(FIXTURES.parent.parent)}: {path.stat().st_size} bytes")


if __name__ == "__main__":
    main()
