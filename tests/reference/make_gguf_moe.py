#!/usr/bin/env python3
"""GGUF copies of the tiny mixture-of-experts models (Mixtral, Qwen3-MoE, OLMoE) in F32 and Q8_0,
256-wide random ones in Q6_K, and transformers' reference outputs for each, router decisions
included, run on the weights gguf-py dequantises from that very file.

    .cache/venv-ref/bin/python tests/reference/make_gguf_moe.py   # any Python with requirements.txt

Writes tests/fixtures/gguf/<model>.<TYPE>.gguf and tests/reference/gguf-moe.{json,safetensors}.

Files are written as llama.cpp's convert_hf_to_gguf.py writes them:
- Mixtral under the `llama` architecture (llama.cpp has no `mixtral` one) with
  `llama.expert_count`/`expert_used_count`, its q/k rows permuted (`LlamaModel.permute`);
  Qwen3-MoE under `qwen3moe` (with `qwen3moe.expert_feed_forward_length`, its
  `moe_intermediate_size`) and OLMoE under `olmoe`, both unpermuted;
- each routed layer's experts merged into three 3-D tensors `blk.N.ffn_gate_exps.weight`,
  `ffn_up_exps` (`[experts, inner, hidden]`, ggml's ne reversed) and `ffn_down_exps`
  (`[experts, hidden, inner]`), expert e at index e, as the converter's `modify_tensors` stacks
  them; the router as `blk.N.ffn_gate_inp.weight`, always F32 (the converter keeps
  FFN_GATE_INP in F32); Qwen3-MoE's dense layer (mlp_only_layers [1]) as ffn_gate/ffn_up/ffn_down,
  which llama.cpp's own qwen3moe graph does not read but attnviz does.
Quantised files hold every matrix (and every expert tensor) whose rows fit the type's blocks in
that type, the others as make_gguf_quantized.py falls back (Q6_K → Q8_0 → F32); norms and the
router stay F32. K-quants need rows of 256 values, which the tiny models (64 wide) do not have:
the wide-<family> models here (seeded; hidden 256, 4 heads of 64 over 2 KV heads, 4 experts of
inner size 256, top-2, one routed layer) are written in Q6_K (quantised by make_gguf_quantized's
`quantize_q6_k`), each routed ranking checked free of near-ties.

Reference: transformers (eager attention, eager experts, float32) on the weights gguf-py
dequantises from the file, its q/k rows un-permuted (Mixtral), its experts split back into
transformers' per-expert names, loaded with from_pretrained from the fixture's config. For the
F32 files the script asserts that these weights are the fixture's exactly. Per file and case: the
attention at every layer and head, the last position's logits, and at every routed layer the
router's logits, probabilities, chosen experts and weights (caught at the `*TopKRouter` modules,
as make_moe.py does), plus a greedy generation of 8 tokens (fewer where the model's 48 positions
end first); the manifest records the smallest gap
between neighbouring router logits in any ranking (asserted above MIN_GAP; QUANT_MIN_GAP for the
tiny models' Q8_0 copies, whose weights are the fixtures' and cannot be re-drawn) and, for the
quantised files, the gap to transformers on the F32 weights (`vs_f32`: what the quantisation
itself moves, which no test can hold attnviz to).
"""

from __future__ import annotations

import json
import math
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import safetensors.numpy
import torch
from transformers import AutoConfig, AutoModelForCausalLM

import gguf
from gguf import GGMLQuantizationType as Q

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_gguf import bpe_tokenizer, finish, permute, spm_tokenizer  # noqa: E402
from make_gguf_quantized import quantize_q6_k  # noqa: E402
from reflib import FIXTURES, REFERENCE, setup_determinism, versions, write_json  # noqa: E402

OUT = FIXTURES / "gguf"
SEED = 20261208
ARCH = {"mixtral": "llama", "qwen3_moe": "qwen3moe", "olmoe": "olmoe"}
# As make_moe.py: no token's ranking of router logits may have two neighbours this close.
MIN_GAP = 1e-3
# The quantised copies of the tiny fixtures cannot re-draw their weights: their rankings are held
# to a tenth of that, still a hundred times the float32 rounding of the logits (~1e-6 here).
QUANT_MIN_GAP = 1e-4
ROUTER_GAIN = 2.0
NEW_TOKENS = 8

LAYER_PARTS = {
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
    "mlp.gate": "ffn_gate_inp",
    "block_sparse_moe.gate": "ffn_gate_inp",
}
FIXED = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}
# One expert's leaf in transformers' per-expert layout → the merged GGUF tensor.
EXPERT_LEAVES = {
    "gate_proj": "ffn_gate_exps",
    "up_proj": "ffn_up_exps",
    "down_proj": "ffn_down_exps",
    "w1": "ffn_gate_exps",
    "w3": "ffn_up_exps",
    "w2": "ffn_down_exps",
}


def gpt2_tokenizer(writer: gguf.GGUFWriter, src: Path) -> None:
    """What convert_hf_to_gguf.py's `_set_vocab_gpt2` writes for OLMoE's GPT-2-style BPE
    (pre-tokenizer `olmo`, llama.cpp's GPT-2 regex): no BOS added."""
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
    ids = {t["content"]: t["id"] for t in tokenizer["added_tokens"]}
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("olmo")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(ids[config["bos_token"]])
    writer.add_eos_token_id(ids[config["eos_token"]])
    writer.add_add_bos_token(False)


TOKENIZERS = {"mixtral": spm_tokenizer, "qwen3_moe": bpe_tokenizer, "olmoe": gpt2_tokenizer}


def store(name: str, value: np.ndarray, qtype: Q) -> tuple[np.ndarray, Q]:
    """`value` in `qtype`, or what it falls back to; norms and the router stay F32."""
    cols = value.shape[-1]
    if value.ndim < 2 or qtype == Q.F32 or "ffn_gate_inp" in name:
        return value, Q.F32
    flat = value.reshape(-1, cols)
    if qtype == Q.Q6_K and cols % 256 == 0:
        data, kind = quantize_q6_k(flat), Q.Q6_K
    elif qtype in (Q.Q6_K, Q.Q8_0) and cols % 32 == 0:
        data, kind = gguf.quants.quantize(flat, Q.Q8_0), Q.Q8_0
    else:
        return value, Q.F32
    return data.reshape(*value.shape[:-1], data.shape[-1]), kind


def gguf_tensors(cfg: dict, weights: dict) -> dict:
    """The fixture's weights under llama.cpp's names, experts merged, q/k permuted for `llama`."""
    arch = ARCH[cfg["model_type"]]
    heads, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    out: dict[str, np.ndarray] = {}
    experts: dict[tuple[int, str], dict[int, np.ndarray]] = {}
    for hf, value in weights.items():
        value = np.ascontiguousarray(value, dtype=np.float32)
        if hf in FIXED:
            out[FIXED[hf]] = value
            continue
        _, _, layer, rest = hf.split(".", 3)
        part, suffix = rest.rsplit(".", 1)
        if ".experts." in part:
            # mlp.experts.E.gate_proj / block_sparse_moe.experts.E.w1
            e, leaf = part.split(".experts.")[1].split(".")
            experts.setdefault((int(layer), EXPERT_LEAVES[leaf]), {})[int(e)] = value
            continue
        if arch == "llama" and part == "self_attn.q_proj":
            value = permute(value, heads, heads)
        elif arch == "llama" and part == "self_attn.k_proj":
            value = permute(value, heads, kv)
        out[f"blk.{layer}.{LAYER_PARTS[part]}.{suffix}"] = value
    for (layer, merged), by_expert in experts.items():
        out[f"blk.{layer}.{merged}.weight"] = np.stack([by_expert[e] for e in range(len(by_expert))])
    return out


def write(path: Path, cfg: dict, weights: dict, src: Path, qtype: Q) -> None:
    model_type = cfg["model_type"]
    arch = ARCH[model_type]
    heads, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hidden = cfg["hidden_size"]
    head_dim = cfg.get("head_dim") or hidden // heads
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name(path.stem)
    writer.add_context_length(cfg["max_position_embeddings"])
    writer.add_embedding_length(hidden)
    writer.add_block_count(cfg["num_hidden_layers"])
    writer.add_feed_forward_length(cfg["intermediate_size"])
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv)
    if head_dim * heads != hidden:
        writer.add_key_length(head_dim)
        writer.add_value_length(head_dim)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(cfg["rope_parameters"]["rope_theta"])
    writer.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    writer.add_vocab_size(cfg["vocab_size"])
    writer.add_expert_count(cfg.get("num_local_experts") or cfg["num_experts"])
    writer.add_expert_used_count(cfg["num_experts_per_tok"])
    if model_type == "qwen3_moe":
        writer.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
    writer.add_file_type(gguf.LlamaFileType.ALL_F32 if qtype == Q.F32 else gguf.LlamaFileType.MOSTLY_Q8_0)
    TOKENIZERS[model_type](writer, src)
    tensors = gguf_tensors(cfg, weights)
    for name in sorted(tensors):
        data, kind = store(name, tensors[name], qtype)
        writer.add_tensor(name, data, raw_dtype=kind)
    finish(writer)


def dequantised(path: Path, cfg: dict) -> dict:
    """The file's weights as gguf-py dequantises them, under transformers' per-expert names, the
    q/k permutation undone (`llama`)."""
    arch = ARCH[cfg["model_type"]]
    heads, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    names = {v: k for k, v in FIXED.items()}
    parts = {v: k for k, v in LAYER_PARTS.items() if k != "block_sparse_moe.gate"}
    if cfg["model_type"] == "mixtral":
        parts["ffn_gate_inp"] = "block_sparse_moe.gate"
    module = "block_sparse_moe" if cfg["model_type"] == "mixtral" else "mlp"
    leaves = (
        {"ffn_gate_exps": "w1", "ffn_up_exps": "w3", "ffn_down_exps": "w2"}
        if cfg["model_type"] == "mixtral"
        else {"ffn_gate_exps": "gate_proj", "ffn_up_exps": "up_proj", "ffn_down_exps": "down_proj"}
    )
    out = {}
    for t in gguf.GGUFReader(str(path)).tensors:
        shape = [int(d) for d in reversed(t.shape)]
        value = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32).reshape(shape)
        if t.name in names:
            out[names[t.name]] = value
            continue
        _, layer, part, suffix = t.name.split(".")
        if part in leaves:
            for e in range(shape[0]):
                out[f"model.layers.{layer}.{module}.experts.{e}.{leaves[part]}.{suffix}"] = value[e]
            continue
        if arch == "llama" and part == "attn_q":
            value = unpermute(value, heads)
        elif arch == "llama" and part == "attn_k":
            value = unpermute(value, kv)
        out[f"model.layers.{layer}.{parts[part]}.{suffix}"] = value
    return out


def unpermute(w: np.ndarray, n_head: int) -> np.ndarray:
    """The inverse of make_gguf.permute (transformers' GGUF loader's `reverse_permute_weights`)."""
    dim = w.shape[0] // n_head // 2
    return w.reshape(n_head, dim, 2, *w.shape[1:]).swapaxes(2, 1).reshape(w.shape)


def load_model(weights: dict, cfg: dict, src: Path):
    """transformers' model of `cfg` with `weights` (per-expert names), eager attention and eager
    experts, loaded as make_moe.load loads a fixture."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "config.json").write_text(json.dumps(cfg))
        if (src / "generation_config.json").exists():
            shutil.copy(src / "generation_config.json", folder / "generation_config.json")
        safetensors.numpy.save_file({k: np.ascontiguousarray(v) for k, v in weights.items()},
                                    str(folder / "model.safetensors"), metadata={"format": "pt"})
        model, info = AutoModelForCausalLM.from_pretrained(
            folder, attn_implementation="eager", experts_implementation="eager",
            dtype=torch.float32, output_loading_info=True,
        )
    assert not info["missing_keys"] and not info["mismatched_keys"] and not info["unexpected_keys"], info
    return model.eval()


class Routers:
    """Catches every router's output (logits, weights, chosen experts), as make_moe.py does."""

    def __init__(self, model):
        self.caught: list[tuple] = []
        self.count = 0
        for _name, module in model.named_modules():
            if type(module).__name__.endswith("TopKRouter"):
                self.count += 1
                module.register_forward_hook(lambda _m, _i, out: self.caught.append(tuple(t.detach().clone() for t in out)))


@torch.no_grad()
def run(model, routers: Routers, cases: list[dict]) -> dict:
    out = {}
    for case in cases:
        ids = case["input_ids"]
        routers.caught = []
        r = model(torch.tensor([ids]), output_attentions=True)
        caught = routers.caught
        assert len(caught) == routers.count
        logits = torch.stack([c[0] for c in caught]).double()
        top_k = caught[0][2].shape[-1]
        top = logits.sort(dim=-1, descending=True).values[..., : top_k + 1]
        routers.caught = []
        # As many new tokens as fit the model's positions (none after a 48-token prompt).
        room = min(NEW_TOKENS, model.config.max_position_embeddings - len(ids))
        generated = list(ids)
        if room > 0:
            generated = model.generate(torch.tensor([ids]), max_new_tokens=room, do_sample=False)[0].tolist()
        out[case["name"]] = dict(
            attentions=torch.stack([a[0] for a in r.attentions]).numpy(),
            logits=r.logits[0, -1].numpy(),
            router_logits=torch.stack([c[0] for c in caught]).numpy(),
            router_probs=torch.softmax(torch.stack([c[0] for c in caught]).float(), dim=-1).numpy(),
            router_weights=torch.stack([c[1] for c in caught]).numpy(),
            router_chosen=torch.stack([c[2] for c in caught]).float().numpy(),
            gap=float((top[..., :-1] - top[..., 1:]).min()),
            sequence=generated,
        )
    return out


def wide(name: str, src: Path, seed: int) -> tuple[dict, dict]:
    """A 256-wide random model of the family (seeded), with `src`'s vocabulary, saved by
    transformers in its per-expert layout."""
    base = json.loads((src / "config.json").read_text())
    cfg = dict(base, hidden_size=256, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
               intermediate_size=256, num_hidden_layers=1, **{"num_experts_per_tok": 2})
    if "num_local_experts" in cfg:
        cfg["num_local_experts"] = 4
    if "num_experts" in cfg:
        cfg["num_experts"] = 4
    if name == "qwen3_moe":
        cfg.update(moe_intermediate_size=256, mlp_only_layers=[])
    if name == "mixtral":
        cfg["head_dim"] = None
    config = AutoConfig.for_model(**{k: v for k, v in cfg.items() if k not in ("architectures", "transformers_version", "dtype")})
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp)
        saved = safetensors.numpy.load_file(str(Path(tmp) / "model.safetensors"))
        cfg = json.loads((Path(tmp) / "config.json").read_text())
    rng = np.random.default_rng(seed)
    weights = {}
    for key in sorted(saved):
        shape = saved[key].shape
        if key.endswith("norm.weight"):
            w = 1.0 + rng.standard_normal(shape) * 0.1
        elif key.endswith(".gate.weight"):
            w = rng.standard_normal(shape) * ROUTER_GAIN / math.sqrt(shape[1])
        elif "q_proj" in key or "k_proj" in key:
            w = rng.standard_normal(shape) * 1.7 / math.sqrt(shape[1])
        elif "embed_tokens" in key:
            w = rng.standard_normal(shape) * 0.5
        else:
            w = rng.standard_normal(shape) * 1.1 / math.sqrt(shape[1])
        weights[key] = w.astype(np.float32)
    return cfg, weights


def main() -> None:
    setup_determinism(SEED)
    manifest = dict(generator="tests/reference/make_gguf_moe.py", versions=versions(), min_gap_asserted=MIN_GAP,
                    min_gap_asserted_tiny_q8_0=QUANT_MIN_GAP,
                    new_tokens=NEW_TOKENS, files=[])
    tensors = {}
    jobs = []
    for name in ("mixtral", "qwen3_moe", "olmoe"):
        src = FIXTURES / f"tiny-{name}"
        cfg = json.loads((src / "config.json").read_text())
        weights = safetensors.numpy.load_file(str(src / "model.safetensors"))
        ref = json.loads((REFERENCE / f"tiny-{name}.json").read_text())
        cases = [dict(name=c["name"], text=c["text"], input_ids=c["input_ids"], max_len=c["max_len"],
                      truncate=c["truncate"]) for c in ref["cases"]]
        jobs.append((f"tiny-{name}", name, cfg, weights, src, cases, [Q.F32, Q.Q8_0]))
    for name in ("mixtral", "qwen3_moe", "olmoe"):
        src = FIXTURES / f"tiny-{name}"
        cases = [c for j in jobs if j[1] == name for c in j[5]]
        # The first seed whose routers rank every token of every case without a near-tie, in
        # the F32 weights and the Q6_K ones.
        for attempt in range(40):
            seed = SEED + attempt
            cfg, weights = wide(name, src, seed)
            model = load_model(weights, cfg, src)
            gaps = [r["gap"] for r in run(model, Routers(model), cases).values()]
            if min(gaps) > MIN_GAP:
                break
        else:
            raise SystemExit(f"wide-{name}: no seed without near-ties in 40")
        jobs.append((f"wide-{name}", name, cfg, weights, src, cases, [Q.F32, Q.Q6_K]))

    tmp = OUT / "tmp-moe-f32.gguf"
    for stem, name, cfg, weights, src, cases, types in jobs:
        f32 = None
        for qtype in types:
            keep = qtype != Q.F32 or stem.startswith("tiny-")
            path = OUT / f"{stem}.{qtype.name}.gguf" if keep else tmp
            write(path, cfg, weights, src, qtype)
            back = dequantised(path, cfg)
            assert sorted(back) == sorted(weights), (stem, sorted(set(back) ^ set(weights)))
            if qtype == Q.F32:
                for k, v in weights.items():
                    assert np.array_equal(back[k], v), f"{stem}: {k} differs after the F32 round trip"
            model = load_model(back, cfg, src)
            ref = run(model, Routers(model), cases)
            if qtype == Q.F32:
                f32 = ref
            if not keep:
                path.unlink()
                continue
            gap = min(r["gap"] for r in ref.values())
            bound = MIN_GAP if qtype == Q.F32 or stem.startswith("wide-") else QUANT_MIN_GAP
            assert gap > bound, f"{path.name}: a near-tie in a router ranking ({gap:.2e})"
            entry = dict(file=path.name, type=qtype.name, model_type=cfg["model_type"], min_ranking_gap=gap,
                         experts=cfg.get("num_local_experts") or cfg["num_experts"], top_k=cfg["num_experts_per_tok"],
                         cases=[])
            for case in cases:
                r = ref[case["name"]]
                key = f"{path.name}/{case['name']}"
                for field in ("attentions", "logits", "router_logits", "router_probs", "router_weights", "router_chosen"):
                    tensors[f"{key}/{field}"] = np.ascontiguousarray(r[field])
                item = dict(case, n=len(case["input_ids"]), sequence=r["sequence"],
                            routed_layers=int(r["router_chosen"].shape[0]))
                if qtype != Q.F32:
                    g = f32[case["name"]]
                    item["vs_f32"] = dict(
                        attention=float(np.abs(r["attentions"] - g["attentions"]).max()),
                        logits=float(np.abs(r["logits"] - g["logits"]).max()),
                        same_experts=bool(np.array_equal(r["router_chosen"], g["router_chosen"])),
                    )
                entry["cases"].append(item)
            manifest["files"].append(entry)
            print(path.name, path.stat().st_size, "bytes, min gap", f"{gap:.2e}",
                  [c.get("vs_f32") for c in entry["cases"]])
    safetensors.numpy.save_file(tensors, str(REFERENCE / "gguf-moe.safetensors"),
                                metadata={"generator": "tests/reference/make_gguf_moe.py"})
    write_json(REFERENCE / "gguf-moe.json", manifest)


if __name__ == "__main__":
    main()
