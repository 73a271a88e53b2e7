#!/usr/bin/env python3
"""Synthetic vision-language models with random weights, at the real shapes of Gemma-3-4B-it and
SmolVLM-256M-Instruct, for the memory and speed benchmark benches/vlm.rs (issue 42,
requirement 6). Not for CI: the Gemma pair is 3.3 GB. Written under .cache/synthetic-vlm/
(ignored by git):

    python3 scripts/make-synthetic-vlm.py [--only gemma3-4b|smolvlm-256m ...]

Needs numpy, gguf (gguf-py) and safetensors; the SmolVLM folder also transformers (for its
config, processor and tokenizer files). Each shape becomes llama.cpp's pair of files, as
convert_hf_to_gguf.py and llama-quantize make them:

- `NAME.Q4_K_M.gguf`, the text model in llama.cpp's Q4_K_M mix: Q4_K, with Q6_K for the output
  matrix (the token embedding when tied) and for attn_v / ffn_down on the layers llama.cpp's
  `use_more_bits` picks; a matrix whose rows are not a whole number of 256-value blocks falls
  back as llama.cpp's `llama_tensor_get_type` does (Q4_K to Q5_0, Q6_K to Q8_0: SmolVLM's width
  576). Norms F32.
- `mmproj-NAME.F16.gguf`, the projector as `convert_hf_to_gguf.py --mmproj --outtype f16` writes
  it: matrices F16, norms and biases F32, the embeddings (`.embeddings.`) F32 and Gemma 3's
  input projection F16 (the converter's `tensor_force_quant`), with its metadata keys.

and, for SmolVLM, `smolvlm-256m-hf/`: a transformers folder (Idefics3ForConditionalGeneration,
safetensors, processor and tokenizer) holding the same weights: the text model's quantized
blocks dequantized by gguf-py (q and k rows un-permuted, as transformers reads them), the
projector's F16 values widened to f32. That folder is what the Python job anchor
(benches/vlm_python_job.py) loads.

The tensor names come from gguf-py's own tensor map (`get_tensor_name_map`) applied to the
checkpoints' names, the metadata from GGUFWriter's methods, the block sizes from
`GGML_QUANT_SIZES`. gguf-py cannot quantize to the K types, so the quantized blocks are random
bytes with their f16 scales set to small finite values (as scripts/make-synthetic-gguf.py does);
the weights mean nothing, only their sizes and types are real.

Shapes (the published configs):
  gemma3-4b     text Gemma 3: 34 layers, hidden 2560, 8 heads / 4 KV heads, head 256, FFN 10240,
                vocab 262208, tied, sliding window 1024 (every 6th layer global), RoPE base 1e6
                with linear scaling 8; SigLIP so400m/14 at 896 px: 27 layers, hidden 1152,
                16 heads, FFN 4304; 4x4 average pooling to 256 image tokens.
  smolvlm-256m  text Llama (SmolLM2-135M): 30 layers, hidden 576, 9 heads / 3 KV heads, FFN
                1536, vocab 49280, untied, RoPE base 1e5; SigLIP base/16 at 512 px: 12 layers,
                hidden 768, 12 heads, FFN 3072; pixel shuffle by 4 to 64 tokens per 512-px tile;
                pictures resized to a longest edge of 2048 and split into 512-px tiles plus a
                global view.

Tokenizers: Gemma's 262,144-piece SentencePiece vocabulary is not on this machine, so the Gemma
file carries the tiny Gemma 3 fixture's vocabulary (tests/fixtures/gguf/tiny-gemma3-vlm.gguf,
with `<start_of_image>`, `<end_of_image>`, `<image_soft_token>`), padded to the embedding's rows
with `[PAD<i>]` tokens of type UNUSED as the converter pads a short vocabulary. SmolVLM's is
SmolLM2's (scripts/fetch-smollm2.sh; SmolVLM's text model is SmolLM2) with Idefics3's added
tokens (`<fake_token_around_image>`, `<image>`, `<end_of_utterance>`, `<global-img>`,
`<row_R_col_C>`) appended from id 49152, then padded to 49280.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

OUT = ".cache/synthetic-vlm"
SMOLLM2 = ".cache/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
TINY_GEMMA3 = "tests/fixtures/gguf/tiny-gemma3-vlm.gguf"

SHAPES = {
    "gemma3-4b": dict(
        arch="gemma3", hidden=2560, layers=34, heads=8, kv=4, head=256, ffn=10240, vocab=262208,
        tied=True, theta=1_000_000.0, rope_linear=8.0, sliding=1024, eps=1e-6, context=131072,
        v_image=896, v_patch=14, v_hidden=1152, v_layers=27, v_heads=16, v_ffn=4304,
        v_eps=1e-6, projector="gemma3", tokens_per_image=256,
    ),
    "smolvlm-256m": dict(
        arch="llama", hidden=576, layers=30, heads=9, kv=3, head=64, ffn=1536, vocab=49280,
        tied=False, theta=100_000.0, eps=1e-5, context=8192,
        v_image=512, v_patch=16, v_hidden=768, v_layers=12, v_heads=12, v_ffn=3072,
        v_eps=1e-6, projector="idefics3", scale_factor=4, longest_edge=2048,
    ),
}

# A scale for each type that keeps decoded weights around 1e-2.
SCALE = {T.Q4_K: 2e-4, T.Q6_K: 2e-5, T.Q5_0: 2e-3, T.Q8_0: 2e-4}
# Where a block keeps its f16 scales (llama.cpp's block structs: Q4_K's d and dmin first,
# Q6_K's d last, Q5_0's and Q8_0's d first).
SCALE_OFFSETS = {T.Q4_K: (0, 2), T.Q6_K: (208,), T.Q5_0: (0,), T.Q8_0: (0,)}
# llama_tensor_get_type's fallback for rows that are not whole 256-value blocks.
FALLBACK = {T.Q4_K: T.Q5_0, T.Q6_K: T.Q8_0}


def use_more_bits(i: int, n: int) -> bool:
    """llama.cpp's choice of layers that get more bits in the _M mixes."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def q4_k_m(kind: T, cols: int) -> T:
    block = gguf.GGML_QUANT_SIZES[kind][0]
    return FALLBACK[kind] if cols % block else kind


# ------------------------------------------------------------------------------------------
# The text model
# ------------------------------------------------------------------------------------------


def text_plan(s: dict) -> list[tuple[str, tuple[int, ...], T]]:
    """(checkpoint name, numpy shape, type) of the text model's tensors, in file order."""
    h, q, kv, n = s["hidden"], s["heads"] * s["head"], s["kv"] * s["head"], s["layers"]
    gemma = s["arch"] == "gemma3"
    embd = T.Q6_K if s["tied"] else T.Q4_K
    out = [("model.embed_tokens.weight", (s["vocab"], h), q4_k_m(embd, h))]
    for i in range(n):
        more = use_more_bits(i, n)
        p = f"model.layers.{i}."
        out += [
            (p + "input_layernorm.weight", (h,), T.F32),
            (p + "self_attn.q_proj.weight", (q, h), q4_k_m(T.Q4_K, h)),
            (p + "self_attn.k_proj.weight", (kv, h), q4_k_m(T.Q4_K, h)),
            (p + "self_attn.v_proj.weight", (kv, h), q4_k_m(T.Q6_K if more else T.Q4_K, h)),
            (p + "self_attn.o_proj.weight", (h, q), q4_k_m(T.Q4_K, q)),
        ]
        if gemma:
            out += [
                (p + "self_attn.q_norm.weight", (s["head"],), T.F32),
                (p + "self_attn.k_norm.weight", (s["head"],), T.F32),
                (p + "post_attention_layernorm.weight", (h,), T.F32),
                (p + "pre_feedforward_layernorm.weight", (h,), T.F32),
            ]
        else:
            out.append((p + "post_attention_layernorm.weight", (h,), T.F32))
        out += [
            (p + "mlp.gate_proj.weight", (s["ffn"], h), q4_k_m(T.Q4_K, h)),
            (p + "mlp.up_proj.weight", (s["ffn"], h), q4_k_m(T.Q4_K, h)),
            (p + "mlp.down_proj.weight", (h, s["ffn"]), q4_k_m(T.Q6_K if more else T.Q4_K, s["ffn"])),
        ]
        if gemma:
            out.append((p + "post_feedforward_layernorm.weight", (h,), T.F32))
    out.append(("model.norm.weight", (h,), T.F32))
    if not s["tied"]:
        out.append(("lm_head.weight", (s["vocab"], h), q4_k_m(T.Q6_K, h)))
    return out


def random_blocks(rng, shape: tuple[int, ...], kind: T) -> np.ndarray:
    values, size = gguf.GGML_QUANT_SIZES[kind]
    rows, cols = shape
    n = rows * (cols // values)
    blocks = np.frombuffer(bytearray(rng.bytes(n * size)), dtype=np.uint8).reshape(n, size)
    scale = np.array([SCALE[kind]], dtype=np.float16).view(np.uint8)
    for off in SCALE_OFFSETS[kind]:
        blocks[:, off:off + 2] = scale
    return blocks.reshape(rows, cols // values * size)


def copy_tokenizer(w: gguf.GGUFWriter, path: str, vocab: int, added: list[str]) -> dict[str, int]:
    """The tokenizer fields of `path`, with `added` appended as control tokens and the list
    padded to `vocab`; returns the added tokens' ids."""
    r = gguf.GGUFReader(path)
    ids = {}
    for key, field in r.fields.items():
        if not key.startswith("tokenizer."):
            continue
        vtype = field.types[0]
        value = field.contents()
        if key == "tokenizer.ggml.tokens":
            start = len(value)
            ids = {t: start + i for i, t in enumerate(added)}
            value = value + added + [f"[PAD{i}]" for i in range(start + len(added), vocab)]
        elif key == "tokenizer.ggml.token_type":
            value = value + [int(gguf.TokenType.CONTROL)] * len(added)
            value = value + [int(gguf.TokenType.UNUSED)] * (vocab - len(value))
        elif key == "tokenizer.ggml.scores":
            value = value + [-1000.0] * (vocab - len(value))
        if vtype == gguf.GGUFValueType.ARRAY:
            w.add_key_value(key, value, vtype, sub_type=field.types[-1])
        else:
            w.add_key_value(key, value, vtype)
    return ids


def write_text(name: str, s: dict, path: str, tokenizer: str, added: list[str]) -> dict:
    """The text GGUF; returns the checkpoint weights it holds when `s` asks for them (the
    quantized blocks dequantized), else {}."""
    arch = gguf.MODEL_ARCH.GEMMA3 if s["arch"] == "gemma3" else gguf.MODEL_ARCH.LLAMA
    names = gguf.get_tensor_name_map(arch, s["layers"])
    w = gguf.GGUFWriter(path, s["arch"])
    w.add_name(f"synthetic {name}")
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_K_M)
    w.add_block_count(s["layers"])
    w.add_context_length(s["context"])
    w.add_embedding_length(s["hidden"])
    w.add_feed_forward_length(s["ffn"])
    w.add_head_count(s["heads"])
    w.add_head_count_kv(s["kv"])
    w.add_layer_norm_rms_eps(s["eps"])
    w.add_rope_freq_base(s["theta"])
    if s["arch"] == "gemma3":
        # Gemma3Model.set_gguf_parameters
        w.add_key_length(s["head"])
        w.add_value_length(s["head"])
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(s["rope_linear"])
        w.add_sliding_window(s["sliding"])
    else:
        w.add_rope_dimension_count(s["head"])
        w.add_vocab_size(s["vocab"])
    ids = copy_tokenizer(w, tokenizer, s["vocab"], added)
    plan = text_plan(s)
    for hf, shape, kind in plan:
        new = names.get_name(hf, try_suffixes=(".weight", ".bias"))
        assert new is not None, hf
        if kind == T.F32:
            w.add_tensor_info(new, list(shape), np.dtype(np.float32), shape[0] * 4)
        else:
            values, size = gguf.GGML_QUANT_SIZES[kind]
            stored = [shape[0], shape[1] // values * size]
            w.add_tensor_info(new, stored, np.dtype(np.uint8), stored[0] * stored[1], raw_dtype=kind)
    w.write_header_to_file(path)
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    rng = np.random.default_rng(42)
    keep = s.get("hf_folder", False)
    weights = {}
    for hf, shape, kind in plan:
        if kind == T.F32:
            data = np.ones(shape, dtype=np.float32)
            w.write_tensor_data(data)
            if keep:
                weights[hf] = data
        else:
            data = random_blocks(rng, shape, kind)
            w.write_tensor_data(data)
            if keep:
                value = gguf.quants.dequantize(data, kind).reshape(shape).astype(np.float32)
                # convert_hf_to_gguf.py's LlamaModel permutes q and k rows for llama.cpp's RoPE;
                # transformers reads them un-permuted.
                if hf.endswith("q_proj.weight"):
                    value = unpermute(value, s["heads"])
                elif hf.endswith("k_proj.weight"):
                    value = unpermute(value, s["kv"])
                weights[hf] = value
    w.close()
    return {"weights": weights, "ids": ids}


def unpermute(w: np.ndarray, heads: int) -> np.ndarray:
    """The inverse of convert_hf_to_gguf.py's LlamaModel.permute."""
    return (w.reshape(heads, w.shape[0] // heads // 2, 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


# ------------------------------------------------------------------------------------------
# The projector
# ------------------------------------------------------------------------------------------


def vision_plan(s: dict, prefix: str) -> list[tuple[str, tuple[int, ...]]]:
    """(checkpoint name, shape) of the SigLIP tower's tensors."""
    d, f, p = s["v_hidden"], s["v_ffn"], s["v_patch"]
    e = prefix + "embeddings."
    out = [
        (e + "patch_embedding.weight", (d, 3, p, p)),
        (e + "patch_embedding.bias", (d,)),
        (e + "position_embedding.weight", ((s["v_image"] // p) ** 2, d)),
    ]
    for i in range(s["v_layers"]):
        b = f"{prefix}encoder.layers.{i}."
        out += [(b + "layer_norm1.weight", (d,)), (b + "layer_norm1.bias", (d,))]
        for m in ("q_proj", "k_proj", "v_proj", "out_proj"):
            out += [(b + f"self_attn.{m}.weight", (d, d)), (b + f"self_attn.{m}.bias", (d,))]
        out += [(b + "layer_norm2.weight", (d,)), (b + "layer_norm2.bias", (d,)),
                (b + "mlp.fc1.weight", (f, d)), (b + "mlp.fc1.bias", (f,)),
                (b + "mlp.fc2.weight", (d, f)), (b + "mlp.fc2.bias", (d,))]
    out += [(prefix + "post_layernorm.weight", (d,)), (prefix + "post_layernorm.bias", (d,))]
    return out


def write_mmproj(name: str, s: dict, path: str) -> dict:
    """The projector GGUF (F16); returns the checkpoint weights it holds, as f32."""
    w = gguf.GGUFWriter(path, "clip")
    w.add_type(gguf.GGUFType.MMPROJ)
    w.add_name(f"synthetic {name}")
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_clip_has_vision_encoder(True)
    w.add_vision_projection_dim(s["hidden"])
    w.add_vision_image_size(s["v_image"])
    w.add_vision_patch_size(s["v_patch"])
    w.add_vision_embedding_length(s["v_hidden"])
    w.add_vision_feed_forward_length(s["v_ffn"])
    w.add_vision_block_count(s["v_layers"])
    w.add_vision_head_count(s["v_heads"])
    w.add_vision_image_mean([0.5, 0.5, 0.5])
    w.add_vision_image_std([0.5, 0.5, 0.5])
    w.add_vision_attention_layernorm_eps(s["v_eps"])
    w.add_vision_use_gelu(True)
    if s["projector"] == "gemma3":
        # Gemma3VisionModel: the scale factor only when it is not 4.
        w.add_clip_projector_type(gguf.VisionProjectorType.GEMMA3)
        prefix = "vision_tower.vision_model."
        tower = vision_plan(s, prefix)
        projector = [("multi_modal_projector.mm_input_projection.weight", (s["v_hidden"], s["hidden"])),
                     ("multi_modal_projector.mm_soft_emb_norm.weight", (s["v_hidden"],))]
    else:
        # SmolVLMModel
        w.add_clip_projector_type(gguf.VisionProjectorType.IDEFICS3)
        w.add_vision_projector_scale_factor(s["scale_factor"])
        w.add_vision_preproc_image_size(s["longest_edge"])
        prefix = "model.vision_model."
        tower = vision_plan(s, prefix)
        projector = [("model.connector.modality_projection.proj.weight",
                      (s["hidden"], s["v_hidden"] * s["scale_factor"] ** 2))]
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.MMPROJ, s["v_layers"])
    rng = np.random.default_rng(7)
    weights = {}
    for hf, shape in tower + projector:
        new = names.get_name(hf, try_suffixes=(".weight", ".bias"))
        assert new is not None, hf
        if len(shape) == 1:
            # norms' weights one, biases zero
            value = (np.ones(shape) if hf.endswith(".weight") else np.zeros(shape)).astype(np.float32)
            if "soft_emb_norm" in hf:
                value = value + 1  # stored plus one, as Gemma3VisionModel.modify_tensors does
            data = value
        else:
            value = (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float16)
            # tensor_force_quant: the embeddings F32, the input projection F16.
            if ".embeddings." in hf:
                data = value.astype(np.float32)
            else:
                data = value
        w.add_tensor(new, data)
        if s.get("hf_folder"):
            weights[hf] = data.astype(np.float32)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return weights


# ------------------------------------------------------------------------------------------
# SmolVLM's transformers folder
# ------------------------------------------------------------------------------------------

IDEFICS3_TOKENS = (["<fake_token_around_image>", "<image>", "<end_of_utterance>", "<global-img>"]
                   + [f"<row_{r}_col_{c}>" for r in range(1, 7) for c in range(1, 7)])

CHAT_TEMPLATE = (
    "<|im_start|>{% for message in messages %}{{message['role'] | capitalize}}"
    "{% if message['content'][0]['type'] == 'image' %}{{':'}}{% else %}{{': '}}{% endif %}"
    "{% for line in message['content'] %}{% if line['type'] == 'text' %}{{line['text']}}"
    "{% elif line['type'] == 'image' %}{{ '<image>' }}{% endif %}{% endfor %}"
    "<end_of_utterance>\n{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}"
)


def write_hf_folder(s: dict, folder: str, text: dict, vision: dict, tokenizer: str) -> None:
    import safetensors.numpy
    from transformers import (AutoTokenizer, Idefics3Config, Idefics3ImageProcessor,
                              Idefics3Processor)

    os.makedirs(folder, exist_ok=True)
    weights = {}
    for hf, value in text["weights"].items():
        if hf.startswith("model."):
            hf = "model.text_model." + hf[len("model."):]
        weights[hf] = value
    weights.update(vision)
    safetensors.numpy.save_file(weights, os.path.join(folder, "model.safetensors"),
                                metadata={"format": "pt"})
    ids = text["ids"]
    config = Idefics3Config(
        image_token_id=ids["<image>"],
        scale_factor=s["scale_factor"],
        tie_word_embeddings=False,
        vision_config=dict(hidden_size=s["v_hidden"], intermediate_size=s["v_ffn"],
                           num_hidden_layers=s["v_layers"], num_attention_heads=s["v_heads"],
                           image_size=s["v_image"], patch_size=s["v_patch"],
                           layer_norm_eps=s["v_eps"], hidden_act="gelu_pytorch_tanh"),
        text_config=dict(model_type="llama", hidden_size=s["hidden"], intermediate_size=s["ffn"],
                         num_hidden_layers=s["layers"], num_attention_heads=s["heads"],
                         num_key_value_heads=s["kv"], vocab_size=s["vocab"],
                         rms_norm_eps=s["eps"], max_position_embeddings=s["context"],
                         rope_theta=s["theta"], tie_word_embeddings=False),
    )
    config.architectures = ["Idefics3ForConditionalGeneration"]
    config.save_pretrained(folder)
    tok = AutoTokenizer.from_pretrained(os.path.dirname(tokenizer),
                                        gguf_file=os.path.basename(tokenizer))
    tok.add_special_tokens({"additional_special_tokens": IDEFICS3_TOKENS})
    for t, i in ids.items():
        assert tok.convert_tokens_to_ids(t) == i, (t, i, tok.convert_tokens_to_ids(t))
    images = Idefics3ImageProcessor(size={"longest_edge": s["longest_edge"]},
                                    max_image_size={"longest_edge": s["v_image"]},
                                    image_mean=[0.5] * 3, image_std=[0.5] * 3)
    seq = (s["v_image"] // s["v_patch"]) ** 2 // s["scale_factor"] ** 2
    processor = Idefics3Processor(image_processor=images, tokenizer=tok, image_seq_len=seq,
                                  chat_template=CHAT_TEMPLATE)
    processor.save_pretrained(folder)
    # The published checkpoints ship the image processor's own file beside the processor's.
    images.save_pretrained(folder)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", choices=list(SHAPES))
    ap.add_argument("--out", default=OUT)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for name, s in SHAPES.items():
        if a.only and name not in a.only:
            continue
        t0 = time.time()
        if s["arch"] == "gemma3":
            tokenizer, added = TINY_GEMMA3, []
        else:
            tokenizer, added = SMOLLM2, IDEFICS3_TOKENS
            s = dict(s, hf_folder=True)
        if not os.path.exists(tokenizer):
            sys.exit(f"no {tokenizer}: run scripts/fetch-smollm2.sh first (or run from the repository root)")
        text_path = os.path.join(a.out, f"{name}.Q4_K_M.gguf")
        mmproj_path = os.path.join(a.out, f"mmproj-{name}.F16.gguf")
        text = write_text(name, s, text_path, tokenizer, added)
        vision = write_mmproj(name, s, mmproj_path)
        for p in (text_path, mmproj_path):
            print(f"{p}: {os.path.getsize(p) / 1e6:,.0f} MB")
        if s.get("hf_folder"):
            folder = os.path.join(a.out, f"{name}-hf")
            write_hf_folder(s, folder, text, vision, tokenizer)
            print(f"{folder}/: {os.path.getsize(os.path.join(folder, 'model.safetensors')) / 1e6:,.0f} MB")
        print(f"{name}: {time.time() - t0:.0f} s")
        sys.stdout.flush()
        del text, vision


if __name__ == "__main__":
    main()
