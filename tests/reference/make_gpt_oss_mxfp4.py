#!/usr/bin/env python3
"""The tiny gpt-oss (tests/fixtures/tiny-gpt_oss, made by make_gpt_oss.py) with its experts in
MXFP4, as the released checkpoints store them, and as GGUF files of llama.cpp's `gpt-oss`
architecture; transformers' reference outputs for each, run on the weights that very file holds,
dequantised.

    python3 tests/reference/make_gpt_oss_mxfp4.py   # any Python with requirements.txt

Writes:
- tests/fixtures/tiny-gpt_oss-mxfp4/: the fixture's config with `quantization_config`
  `{"quant_method": "mxfp4"}` and a model.safetensors whose experts are
  `mlp.experts.gate_up_proj_blocks` `[4, 64, 2, 16]` / `gate_up_proj_scales` `[4, 64, 2]` and
  `down_proj_blocks` `[4, 64, 1, 16]` / `down_proj_scales` `[4, 64, 1]` (uint8; rows are
  transformers' `[out, in]`, gate and up interleaved; byte j of a block holds value 2j in its low
  nibble and 2j + 1 in its high one; scales E8M0, bias 127), biases as before, everything else the
  fixture's own float32 tensors; the tokenizer files copied.
- tests/fixtures/gguf/tiny-gpt_oss.{F32,Q8_0,MXFP4}.gguf: as convert_hf_to_gguf.py's
  `GptOssModel` writes them (`attn_sinks.weight`, `post_attention_norm`, the router
  `ffn_gate_inp` with its bias, the experts split into `ffn_gate_exps`/`ffn_up_exps` (the
  interleaved columns taken apart) and `ffn_down_exps`, each `[experts, out, in]` with a merged
  bias). F32: every tensor F32. Q8_0: every matrix whose rows are whole blocks of 32 in Q8_0
  (experts included), the router and 1-D tensors F32. MXFP4: the experts in MXFP4 (the
  safetensors blocks repacked, llama.cpp's `repack_mxfp4`), the rest F32. Metadata beyond what
  the converter writes: `gpt-oss.rope.scaling.yarn_beta_fast`/`yarn_beta_slow` (the fixture's
  8 and 1) and `gpt-oss.swiglu_clamp_exp` (its 1.5 per layer), which llama.cpp's keys name but its
  gpt-oss graph fixes (32, 1, 7.0).
- tests/fixtures/gguf/wide-gpt_oss.Q6_K.gguf: K-quant rows hold 256 values and the tiny model's
  are 32 or 64 wide, so a 256-wide random gpt-oss (1 layer, 4 experts of inner 256; the first
  seed from SEED whose rankings have no near-tie) in Q6_K, matrices of other widths in Q8_0.
- tests/reference/gpt_oss-mxfp4.{json,safetensors}: per file (the safetensors folder first)
  and case (make_gpt_oss.py's cases): the attention at every layer and head, each row's share on
  the learned sink (the column transformers' eager softmax drops), the last position's logits,
  every router's logits, probabilities, chosen experts and weights, and a greedy generation, in
  make_gguf_moe.py's manifest format.

The MXFP4 codes come from gguf-py's quantiser (`gguf.quants.quantize(..., MXFP4)`, ggml's
layout), moved into transformers' layout here; the script asserts that transformers' own
dequantiser (`integrations.mxfp4.convert_moe_packed_tensors`) on the safetensors blocks and
gguf-py's `dequantize` on the GGUF blocks give the same floats, so the two layouts are checked
against two independent decoders. Reference: transformers eager (attention and experts, float32)
on those dequantised weights (for the GGUF files: what gguf-py dequantises from the file,
mapped back to transformers' names), loaded with from_pretrained from the fixture's config.
transformers itself reading the MXFP4 folder (`Mxfp4Config(dequantize=True)`) is asserted to give
the same floats.

Also writes tests/reference/mxfp4-blocks.json: a few random ggml MXFP4 rows (every code and
scales from 0 to 127 among them) with an input row, each row's dot product with it in float64 from
gguf-py's dequantisation, and the dequantised values, for the kernels' unit test.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import safetensors.numpy
import torch
from transformers import GptOssConfig, GptOssForCausalLM, Mxfp4Config
from transformers.integrations.mxfp4 import convert_moe_packed_tensors
from transformers.models.gpt_oss import modeling_gpt_oss

import gguf
from gguf import GGMLQuantizationType as Q

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_gguf_moe as mgm  # noqa: E402
from make_gguf import finish  # noqa: E402
from make_gguf_quantized import quantize_q6_k  # noqa: E402
from make_gpt_oss import SoftmaxCatcher  # noqa: E402
from reflib import FIXTURES, REFERENCE, setup_determinism, versions, write_json  # noqa: E402

SEED = 20261207
SRC = FIXTURES / "tiny-gpt_oss"
OUT_DIR = FIXTURES / "tiny-gpt_oss-mxfp4"
GGUF_DIR = FIXTURES / "gguf"
ARCH = "gpt-oss"
NAME = "tiny-gpt_oss-mxfp4"
# Router rankings of the quantised weights cannot be re-drawn: as make_gguf_moe's QUANT_MIN_GAP.
MIN_GAP = 1e-4

LAYER_PARTS = {
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "post_attention_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.router": "ffn_gate_inp",
}
FIXED = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}
EXPERTS = ("gate_up_proj", "down_proj")


# ---------------------------------------------------------------- MXFP4, both layouts


def ggml_to_hf(ggml: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ggml `block_mxfp4` rows `[rows, blocks·17]` → transformers' `(blocks [rows, blocks, 16],
    scales [rows, blocks])`: the same codes, byte j holding values 2j (low) and 2j + 1 (high)
    instead of j and j + 16."""
    rows = ggml.shape[0]
    b = ggml.reshape(rows, -1, 17)
    scales = b[..., 0].copy()
    qs = b[..., 1:]
    codes = np.concatenate([qs & 0x0F, qs >> 4], axis=-1)  # [rows, blocks, 32], value order
    blocks = (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)
    return blocks, scales


def hf_to_ggml(blocks: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """The inverse of ggml_to_hf (llama.cpp's `transform_nibble_layout` + `repack_mxfp4`):
    `[..., blocks, 16]`, `[..., blocks]` → `[..., blocks·17]`."""
    codes = np.stack([blocks & 0x0F, blocks >> 4], axis=-1).reshape(*blocks.shape[:-1], 32)
    qs = (codes[..., :16] | (codes[..., 16:] << 4)).astype(np.uint8)
    out = np.concatenate([scales[..., None], qs], axis=-1)
    return out.reshape(*blocks.shape[:-2], -1)


def quantise_expert(w_out_in: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`[E, out, in]` float → transformers' MXFP4 blocks and scales (gguf-py's quantiser)."""
    e, rows, cols = w_out_in.shape
    ggml = gguf.quants.quantize(w_out_in.reshape(e * rows, cols).astype(np.float32), Q.MXFP4)
    blocks, scales = ggml_to_hf(ggml)
    assert np.array_equal(hf_to_ggml(blocks, scales), ggml), "layout round trip"
    return blocks.reshape(e, rows, cols // 32, 16), scales.reshape(e, rows, cols // 32)


def hf_dequantised(blocks: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """transformers' own dequantiser, in float32: `[E, in, out]` (its in-memory layout)."""
    t = convert_moe_packed_tensors(torch.from_numpy(blocks), torch.from_numpy(scales), dtype=torch.float32)
    return t.numpy()


# ---------------------------------------------------------------- the checkpoints


def write_safetensors(cfg: dict, weights: dict) -> tuple[dict, dict]:
    """The MXFP4 fixture; returns the stored tensors and the dequantised float weights."""
    stored, floats = {}, {}
    for k, v in weights.items():
        leaf = k.rsplit(".", 1)[-1]
        if ".mlp.experts." in k and leaf in EXPERTS:
            # transformers' in-memory [E, in, out] → stored rows [E, out, in].
            blocks, scales = quantise_expert(np.ascontiguousarray(v.transpose(0, 2, 1)))
            stored[f"{k}_blocks"] = blocks
            stored[f"{k}_scales"] = scales
            floats[k] = hf_dequantised(blocks, scales)
        else:
            stored[k] = v
            floats[k] = v
    if OUT_DIR.exists():
        shutil.rmtree(OUT_DIR)
    OUT_DIR.mkdir(parents=True)
    for f in SRC.iterdir():
        if f.name not in ("model.safetensors", "config.json"):
            shutil.copy(f, OUT_DIR / f.name)
    qcfg = dict(cfg, quantization_config=dict(
        quant_method="mxfp4",
        modules_to_not_convert=["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"],
    ))
    (OUT_DIR / "config.json").write_text(json.dumps(qcfg, indent=2, sort_keys=True) + "\n")
    safetensors.numpy.save_file({k: np.ascontiguousarray(stored[k]) for k in sorted(stored)},
                                str(OUT_DIR / "model.safetensors"), metadata={"format": "pt"})
    return stored, floats


def gguf_tensors(weights: dict, stored: dict, qtype: Q) -> dict[str, tuple[np.ndarray, Q]]:
    """The model under llama.cpp's names, each tensor with the type it is written in."""
    out: dict[str, tuple[np.ndarray, Q]] = {}

    def put(name: str, value: np.ndarray, matrix: bool) -> None:
        value = np.ascontiguousarray(value, dtype=np.float32)
        cols = value.shape[-1]
        quantised = matrix and "ffn_gate_inp" not in name
        if quantised and qtype == Q.Q6_K and cols % 256 == 0:
            flat, kind = quantize_q6_k(value.reshape(-1, cols)), Q.Q6_K
        elif quantised and qtype in (Q.Q6_K, Q.Q8_0) and cols % 32 == 0:
            flat, kind = gguf.quants.quantize(value.reshape(-1, cols), Q.Q8_0), Q.Q8_0
        else:
            out[name] = (value, Q.F32)
            return
        out[name] = (flat.reshape(*value.shape[:-1], flat.shape[-1]), kind)

    for hf, value in weights.items():
        if hf in FIXED:
            put(FIXED[hf], value, True)
            continue
        _, _, layer, rest = hf.split(".", 3)
        part, leaf = rest.rsplit(".", 1)
        blk = f"blk.{layer}"
        if part == "self_attn" and leaf == "sinks":
            put(f"{blk}.attn_sinks.weight", value, False)
        elif part == "mlp.experts":
            if leaf == "gate_up_proj_bias":
                put(f"{blk}.ffn_gate_exps.bias", value[:, 0::2], False)
                put(f"{blk}.ffn_up_exps.bias", value[:, 1::2], False)
            elif leaf == "down_proj_bias":
                put(f"{blk}.ffn_down_exps.bias", value, False)
            elif leaf == "gate_up_proj" and qtype == Q.MXFP4:
                ggml = hf_to_ggml(stored[f"{hf}_blocks"], stored[f"{hf}_scales"])  # [E, 2·inner, …]
                out[f"{blk}.ffn_gate_exps.weight"] = (np.ascontiguousarray(ggml[:, 0::2]), Q.MXFP4)
                out[f"{blk}.ffn_up_exps.weight"] = (np.ascontiguousarray(ggml[:, 1::2]), Q.MXFP4)
            elif leaf == "down_proj" and qtype == Q.MXFP4:
                ggml = hf_to_ggml(stored[f"{hf}_blocks"], stored[f"{hf}_scales"])
                out[f"{blk}.ffn_down_exps.weight"] = (np.ascontiguousarray(ggml), Q.MXFP4)
            elif leaf == "gate_up_proj":
                t = value.transpose(0, 2, 1)  # [E, 2·inner, hidden]
                put(f"{blk}.ffn_gate_exps.weight", t[:, 0::2], True)
                put(f"{blk}.ffn_up_exps.weight", t[:, 1::2], True)
            elif leaf == "down_proj":
                put(f"{blk}.ffn_down_exps.weight", value.transpose(0, 2, 1), True)
            else:
                raise ValueError(hf)
        else:
            put(f"{blk}.{LAYER_PARTS[part]}.{leaf}", value, leaf == "weight")
    return out


def write_gguf(path: Path, cfg: dict, weights: dict, stored: dict, qtype: Q) -> None:
    heads, kv, d = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    rope = cfg["rope_parameters"]
    layers = cfg["num_hidden_layers"]
    w = gguf.GGUFWriter(str(path), ARCH)
    w.add_name(path.stem)
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(layers)
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_key_length(d)
    w.add_value_length(d)
    w.add_rope_dimension_count(d)
    w.add_rope_freq_base(rope["rope_theta"])
    w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    w.add_rope_scaling_factor(rope["factor"])
    w.add_rope_scaling_orig_ctx_len(rope["original_max_position_embeddings"])
    w.add_float32(gguf.Keys.Rope.SCALING_YARN_BETA_FAST.format(arch=ARCH), rope["beta_fast"])
    w.add_float32(gguf.Keys.Rope.SCALING_YARN_BETA_SLOW.format(arch=ARCH), rope["beta_slow"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_vocab_size(cfg["vocab_size"])
    w.add_expert_count(cfg["num_local_experts"])
    w.add_expert_used_count(cfg["num_experts_per_tok"])
    w.add_expert_feed_forward_length(cfg["intermediate_size"])
    w.add_sliding_window(cfg["sliding_window"])
    w.add_swiglu_clamp_exp([float(cfg["swiglu_limit"])] * layers)
    w.add_file_type({Q.F32: gguf.LlamaFileType.ALL_F32, Q.Q8_0: gguf.LlamaFileType.MOSTLY_Q8_0,
                     Q.Q6_K: gguf.LlamaFileType.MOSTLY_Q6_K,
                     Q.MXFP4: gguf.LlamaFileType.MOSTLY_MXFP4_MOE}[qtype])
    mgm.gpt2_tokenizer(w, SRC)
    tensors = gguf_tensors(weights, stored, qtype)
    for name in sorted(tensors):
        data, kind = tensors[name]
        w.add_tensor(name, data, raw_dtype=kind)
    finish(w)


def dequantised(path: Path, cfg: dict) -> dict:
    """The file's weights as gguf-py dequantises them, under transformers' names and layout."""
    back = {v: k for k, v in FIXED.items()}
    parts = {v: k for k, v in LAYER_PARTS.items()}
    out, experts = {}, {}
    for t in gguf.GGUFReader(str(path)).tensors:
        shape = [int(x) for x in reversed(t.shape)]
        value = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32).reshape(shape)
        if t.name in back:
            out[back[t.name]] = value
            continue
        _, layer, part, suffix = t.name.split(".")
        pre = f"model.layers.{layer}"
        if part == "attn_sinks":
            out[f"{pre}.self_attn.sinks"] = value
        elif part.endswith("_exps"):
            experts[(layer, part, suffix)] = value
        else:
            out[f"{pre}.{parts[part]}.{suffix}"] = value
    for layer in sorted({k[0] for k in experts}):
        pre = f"model.layers.{layer}.mlp.experts"
        gate, up = experts[(layer, "ffn_gate_exps", "weight")], experts[(layer, "ffn_up_exps", "weight")]
        gu = np.empty((gate.shape[0], 2 * gate.shape[1], gate.shape[2]), np.float32)
        gu[:, 0::2], gu[:, 1::2] = gate, up
        out[f"{pre}.gate_up_proj"] = np.ascontiguousarray(gu.transpose(0, 2, 1))
        gb = experts[(layer, "ffn_gate_exps", "bias")]
        gub = np.empty((gb.shape[0], 2 * gb.shape[1]), np.float32)
        gub[:, 0::2], gub[:, 1::2] = gb, experts[(layer, "ffn_up_exps", "bias")]
        out[f"{pre}.gate_up_proj_bias"] = gub
        out[f"{pre}.down_proj"] = np.ascontiguousarray(experts[(layer, "ffn_down_exps", "weight")].transpose(0, 2, 1))
        out[f"{pre}.down_proj_bias"] = experts[(layer, "ffn_down_exps", "bias")]
    return out


# ---------------------------------------------------------------- reference runs


@torch.no_grad()
def sinks(model, ids: list[int]) -> np.ndarray:
    """Each row's share on the learned sink, `[layers, heads, n]`, caught at the eager softmax."""
    catcher = SoftmaxCatcher()
    original = modeling_gpt_oss.F
    modeling_gpt_oss.F = catcher
    try:
        r = model(torch.tensor([ids]), output_attentions=True)
    finally:
        modeling_gpt_oss.F = original
    layers = model.config.num_hidden_layers
    probs = catcher.caught[:layers]
    attn = torch.stack([a[0] for a in r.attentions])
    assert torch.equal(torch.stack([p[0, :, :, :-1] for p in probs]), attn), "caught softmax"
    return torch.stack([p[0, :, :, -1] for p in probs]).numpy()


def reference(label: str, kind: str, floats: dict, cfg: dict, cases: list[dict], tensors: dict) -> dict:
    model = mgm.load_model(floats, cfg, SRC)
    ref = mgm.run(model, mgm.Routers(model), cases)
    gap = min(r["gap"] for r in ref.values())
    assert gap > MIN_GAP, f"{label}: a near-tie in a router ranking ({gap:.2e})"
    entry = dict(file=label, type=kind, model_type="gpt_oss", min_ranking_gap=gap,
                 experts=cfg["num_local_experts"], top_k=cfg["num_experts_per_tok"], cases=[])
    for case in cases:
        r = ref[case["name"]]
        key = f"{label}/{case['name']}"
        for field in ("attentions", "logits", "router_logits", "router_probs", "router_weights", "router_chosen"):
            tensors[f"{key}/{field}"] = np.ascontiguousarray(r[field])
        s = sinks(model, case["input_ids"])
        gap_rows = np.abs(1.0 - r["attentions"].astype(np.float64).sum(-1) - s).max()
        assert gap_rows < 1e-5, f"{key}: sink column is not 1 − the row sum ({gap_rows:.2e})"
        tensors[f"{key}/sinks"] = np.ascontiguousarray(s)
        entry["cases"].append(dict(case, n=len(case["input_ids"]), sequence=r["sequence"],
                                   routed_layers=int(r["router_chosen"].shape[0])))
    print(label, kind, "min gap", f"{gap:.2e}")
    return entry


def wide(seed: int) -> tuple[dict, dict]:
    """A 256-wide random gpt-oss (seeded; 1 sliding layer, 4 heads of 64 over 2,
    4 experts of inner 256, top 2), tiny-gpt_oss's vocabulary, YaRN and clamp: K-quant rows."""
    base = json.loads((SRC / "config.json").read_text())
    cfg = dict(base, hidden_size=256, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
               intermediate_size=256, num_hidden_layers=1,
               layer_types=["sliding_attention"])
    config = GptOssConfig(**{k: v for k, v in cfg.items() if k not in ("architectures", "transformers_version", "dtype")})
    torch.manual_seed(seed)
    model = GptOssForCausalLM(config)
    rng = np.random.default_rng(seed)
    weights = {}
    for key, t in sorted(model.state_dict().items()):
        shape = tuple(t.shape)
        leaf = key.rsplit(".", 1)[-1]
        if key.endswith("norm.weight"):
            w = 1.0 + rng.standard_normal(shape) * 0.1
        elif leaf == "sinks":
            w = 0.5 + rng.standard_normal(shape) * 1.5
        elif ".router." in key and leaf == "weight":
            w = rng.standard_normal(shape) * mgm.ROUTER_GAIN / np.sqrt(shape[1])
        elif leaf == "bias" or leaf.endswith("_bias"):
            w = rng.standard_normal(shape) * 0.1
        elif "q_proj" in key or "k_proj" in key:
            w = rng.standard_normal(shape) * 1.7 / np.sqrt(shape[1])
        elif "embed_tokens" in key:
            w = rng.standard_normal(shape) * 0.5
        else:
            w = rng.standard_normal(shape) * 1.1 / np.sqrt(shape[-2] if len(shape) == 3 else shape[1])
        weights[key] = w.astype(np.float32)
    cfg = json.loads(config.to_json_string())
    cfg["architectures"] = ["GptOssForCausalLM"]
    return cfg, weights


def block_samples() -> None:
    """Random ggml MXFP4 rows, every code and the extreme scales among them, with an input row
    and each row's dot product in float64 from gguf-py's dequantisation."""
    rng = np.random.default_rng(SEED)
    rows, cols = 6, 96
    raw = rng.integers(0, 256, size=(rows, cols // 32, 17), dtype=np.uint8)
    # Scales from 2^-128 to 2^-100 and 2^100 to 2^126: no product overflows f32 (|k| ≤ 12).
    raw[..., 0] = rng.integers(0, 28, size=(rows, cols // 32)) + np.where(
        rng.random((rows, cols // 32)) < 0.5, 0, 100)
    raw[0, 0, 0], raw[0, 1, 0], raw[1, 0, 0] = 0, 1, 127
    raw[1, 1, 1:] = np.arange(16, dtype=np.uint8) * 17  # every code, in both nibbles
    raw[2, :, 0] = rng.integers(120, 136, size=cols // 32)  # ordinary scales
    raw = raw.reshape(rows, -1)
    values = gguf.quants.dequantize(raw, Q.MXFP4).astype(np.float64).reshape(rows, cols)
    x = rng.standard_normal(cols).astype(np.float32)
    # Ordinary rows only in the dot products: huge scales would make f32 sums meaningless.
    dots = [float(values[r] @ x.astype(np.float64)) for r in range(rows)]
    write_json(REFERENCE / "mxfp4-blocks.json", dict(
        generator="tests/reference/make_gpt_oss_mxfp4.py",
        what="ggml MXFP4 rows (block_mxfp4: scale byte, 16 code bytes) with their values as gguf-py's "
             "dequantize gives them, an input row, and each row's dot product with it in float64",
        rows=rows, cols=cols, bytes=[int(b) for b in raw.reshape(-1)],
        values=[float(v) for v in values.reshape(-1)],
        x=[float(v) for v in x], dots=dots,
    ))


def main() -> None:
    setup_determinism(SEED)
    cfg = json.loads((SRC / "config.json").read_text())
    weights = safetensors.numpy.load_file(str(SRC / "model.safetensors"))
    ref = json.loads((REFERENCE / "tiny-gpt_oss.json").read_text())
    cases = [dict(name=c["name"], text=c["text"], input_ids=c["input_ids"], max_len=c["max_len"],
                  truncate=c["truncate"]) for c in ref["cases"]]
    stored, floats = write_safetensors(cfg, weights)
    # transformers reads the MXFP4 fixture itself (dequantising it) to the same floats.
    direct = GptOssForCausalLM.from_pretrained(OUT_DIR, quantization_config=Mxfp4Config(dequantize=True),
                                               dtype=torch.float32).state_dict()
    for k, v in floats.items():
        assert np.array_equal(direct[k].numpy(), v), f"{k}: transformers reads the fixture differently"
    manifest = dict(generator="tests/reference/make_gpt_oss_mxfp4.py", versions=versions(),
                    min_gap_asserted=MIN_GAP, new_tokens=mgm.NEW_TOKENS, files=[])
    tensors: dict[str, np.ndarray] = {}
    manifest["files"].append(reference(NAME, "MXFP4 (safetensors)", floats, cfg, cases, tensors))
    for qtype in (Q.F32, Q.Q8_0, Q.MXFP4):
        path = GGUF_DIR / f"tiny-gpt_oss.{qtype.name}.gguf"
        write_gguf(path, cfg, weights, stored, qtype)
        back = dequantised(path, cfg)
        assert sorted(back) == sorted(weights), sorted(set(back) ^ set(weights))
        if qtype == Q.F32:
            for k, v in weights.items():
                assert np.array_equal(back[k], v), f"{k} differs after the F32 round trip"
        if qtype == Q.MXFP4:
            # gguf-py's decoder on the repacked blocks gives transformers' decoder's floats.
            for k, v in floats.items():
                assert np.array_equal(back[k], v), f"{k}: the two MXFP4 decoders disagree"
        manifest["files"].append(reference(path.name, qtype.name, back, cfg, cases, tensors))
        print(path.name, path.stat().st_size, "bytes")
    # A K-quant (Q6_K) on a 256-wide model: the first seed whose rankings have no near-tie (and
    # whose weights make_gguf_quantized's quantiser takes within its own round-trip bound).
    path = GGUF_DIR / "wide-gpt_oss.Q6_K.gguf"
    for attempt in range(40):
        wcfg, wweights = wide(SEED + attempt)
        try:
            write_gguf(path, wcfg, wweights, {}, Q.Q6_K)
        except AssertionError as e:  # quantize_q6_k's own round-trip bound missed: next seed
            print(f"wide-gpt_oss: seed {SEED + attempt}: {e}", file=sys.stderr)
            continue
        back = dequantised(path, wcfg)
        model = mgm.load_model(back, wcfg, SRC)
        if min(r["gap"] for r in mgm.run(model, mgm.Routers(model), cases).values()) > 1e-3:
            break
    else:
        raise SystemExit("wide-gpt_oss: no seed without near-ties in 40")
    manifest["files"].append(reference(path.name, "Q6_K", back, wcfg, cases, tensors))
    print(path.name, path.stat().st_size, "bytes, seed", SEED + attempt)
    safetensors.numpy.save_file(tensors, str(REFERENCE / "gpt_oss-mxfp4.safetensors"),
                                metadata={"generator": "tests/reference/make_gpt_oss_mxfp4.py"})
    write_json(REFERENCE / "gpt_oss-mxfp4.json", manifest)
    block_samples()


if __name__ == "__main__":
    main()
