#!/usr/bin/env python3
"""The tiny vision-language fixtures as llama.cpp's pair of files: the text model `.gguf` and the
projector `mmproj-*.gguf`.

    .cache/venv-ref/bin/python tests/reference/make_mmproj.py   # any Python with requirements.txt

Writes, under tests/fixtures/gguf/:

- tiny-llava.gguf + mmproj-tiny-llava.gguf, from tests/fixtures/tiny-llava (make_llava.py);
- tiny-gemma3-vlm.gguf + mmproj-tiny-gemma3-vlm.gguf, from tests/fixtures/tiny-gemma3-vlm
  (make_gemma3_vlm.py);
- tiny-smolvlm.gguf + mmproj-tiny-smolvlm.gguf, from tests/fixtures/tiny-smolvlm (projector type
  `idefics3`);
- tiny-qwen2_5_vl.gguf + mmproj-tiny-qwen2_5_vl.gguf, from tests/fixtures/tiny-qwen2_5_vl
  (make_qwen2_5_vl.py): the text model as Qwen2VLModel writes it (architecture `qwen2vl`,
  `qwen2vl.rope.dimension_sections` M-RoPE's sections padded to four, the byte-level BPE
  vocabulary with pre-tokenizer `qwen2`), the projector as Qwen2VLVisionModel writes it (projector
  type `qwen2.5vl_merger`; see `write_qwen2_5_vl_mmproj`), held to tests/reference/tiny-qwen2_5_vl.json;
- tiny-qwen2_vl.gguf + mmproj-tiny-qwen2_vl.gguf, Qwen2-VL's the same way (projector type
  `qwen2vl_merger`), held to tests/reference/tiny-qwen2_vl.json;
- tiny-gemma3-vlm.Q8_0.gguf + mmproj-tiny-gemma3-vlm.Q8_0.gguf: the same pair quantised as
  llama.cpp's tools store it (the text model's matrices Q8_0, as make_gguf_quantized.py's
  `store`; the tower's matrices Q8_0; the input projection F16, which Gemma3VisionModel forces;
  the rest F32), with tests/reference/tiny-gemma3-vlm-gguf.Q8_0.{json,safetensors}: transformers
  on the checkpoint's weights with those tensors replaced by gguf-py's dequantisation of them.

llama.cpp's own converter is not run here: its repository is too large to bring onto this
machine, so the layout is reproduced from its source (the facts, not its code), as
make_gguf.py's and make_gguf_quantized.py's files are:

- The text model: convert_hf_to_gguf.py's LlamaModel / Gemma3Model on the checkpoint's
  `language_model.` tensors (make_gguf_quantized.py's `write`: q/k rows permuted for Llama,
  Gemma's norms stored plus one), F32, with the SentencePiece vocabulary and the checkpoint's
  added tokens (`<image>`; `<start_of_image>`, `<end_of_image>`, `<image_soft_token>`) as
  control tokens, as `_set_vocab_sentencepiece` writes them from tokenizer_config.json's
  `added_tokens_decoder`, and the chat template.
- LLaVA-1.5's projector: tools/mtmd/legacy-models/convert_image_encoder_to_gguf.py with
  `--llava-projector` (convert_hf_to_gguf.py's LlavaVisionModel refuses `clip_vision_model`
  towers): `general.architecture` `clip`, `clip.projector_type` `mlp`, `clip.has_llava_projector`,
  the tower's sizes under `clip.vision.*`, `clip.vision.feature_layer` made non-negative
  (`vision_feature_layer` −2 of 3 layers: 2) and `block_count` its largest value (the layers past
  it dropped), `clip.use_gelu` false for `quick_gelu`, the tensor names of its `get_tensor_name`
  (fc1 written as `ffn_down`, fc2 as `ffn_up`: that script's naming, which clip.cpp swaps back
  when `ffn_down`'s first dimension is the tower's width), no `post_ln` (skipped for LLaVA),
  `mm.0` / `mm.2` for the MLP.
- Gemma 3's projector: convert_hf_to_gguf.py `--mmproj` (MmprojModel + Gemma3VisionModel):
  `clip.projector_type` `gemma3`, `clip.vision.projection_dim` the text model's width, image mean
  and std from preprocessor_config.json, `clip.use_gelu`, the layer-norm epsilon, and
  `clip.vision.projector.scale_factor` (here 2: 4 patches a side pooled to 2) because it is not
  4; tensor names from gguf-py's own tensor map for MODEL_ARCH.MMPROJ after the converter's
  `_weight` → `.weight` rename, `mm.soft_emb_norm.weight` stored plus one.

The F32 pairs write every tensor F32, where the converters would store the patch embedding
(legacy script) and Gemma 3's input projection as F16: the pair is then the safetensors
fixture's exact weights, held to the folders' transformers references (the quantised pair
exercises F16 and Q8_0).

The LLaVA pair is held to tests/reference/tiny-llava.json, the folder's reference (its tower's first
two layers: the file has no third). Gemma 3's text file reads differently from the checkpoint's
config under llama.cpp (which fixes the sliding-layer pattern and the local RoPE base), so the
script also writes tests/reference/tiny-gemma3-vlm-gguf.{json,safetensors}: make_gemma3_vlm.py's
cases run by transformers on the same weights with the config llama.cpp reads from the file.

The script checks itself: every tensor read back with gguf-py equals the safetensors weight after
the converter's transforms, and transformers loads the
LLaVA text file back to exactly the checkpoint's language model (its un-permutation is
llama.cpp's).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import safetensors.numpy
import torch

import gguf
from gguf import GGMLQuantizationType as Q

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_gguf import finish, permute  # noqa: E402
from make_gguf_quantized import write as write_text  # noqa: E402
from reflib import FIXTURES, setup_determinism  # noqa: E402

OUT = FIXTURES / "gguf"


def spm_with_added(writer: gguf.GGUFWriter, src: Path) -> None:
    """`_set_vocab_sentencepiece`: the SentencePiece pieces, then the checkpoint's added tokens
    (`added_tokens_decoder`, special ones as control tokens), padded to the vocabulary size."""
    from sentencepiece import SentencePieceProcessor

    sp = SentencePieceProcessor(model_file=str(src / "tokenizer.model"))
    config = json.loads((src / "config.json").read_text())
    size = config["text_config"]["vocab_size"]
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
    for i in range(len(tokens), size):
        tokens.append(f"[PAD{i}]".encode("utf-8"))
        scores.append(-1000.0)
        types.append(gguf.TokenType.UNUSED)
    added = json.loads((src / "tokenizer.json").read_text())["added_tokens"]
    for t in added:
        i = t["id"]
        if i < sp.vocab_size():
            continue
        tokens[i] = t["content"].encode("utf-8")
        scores[i] = -1000.0
        types[i] = gguf.TokenType.CONTROL if t["special"] else gguf.TokenType.USER_DEFINED
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
    # gguf-py's SpecialVocab: the checkpoint's chat template.
    if (src / "chat_template.jinja").exists():
        writer.add_chat_template((src / "chat_template.jinja").read_text())


def text_weights(weights: dict) -> dict:
    """The language model's tensors under a text checkpoint's names (what the converter's text
    classes do with `language_model.`, and with SmolVLM's `model.text_model.` and `lm_head.`)."""
    out = {}
    for name, value in weights.items():
        if name.startswith("language_model."):
            out[name.removeprefix("language_model.")] = value
        elif name.startswith("model.text_model."):
            out["model." + name.removeprefix("model.text_model.")] = value
        elif name == "lm_head.weight" and "model.connector.modality_projection.proj.weight" in weights:
            out[name] = value
    return out


def write_text_model(folder: str, qtype: Q = Q.F32) -> tuple[Path, dict]:
    src = FIXTURES / folder
    config = json.loads((src / "config.json").read_text())
    weights = safetensors.numpy.load_file(str(src / "model.safetensors"))
    text = config["text_config"]
    path = OUT / (f"{folder}.gguf" if qtype == Q.F32 else f"{folder}.{qtype.name}.gguf")
    write_text(path, text, text_weights(weights), spm_with_added, src, qtype)
    return path, text


def dequantised(text_path: Path, text: dict, mmproj_path: Path, expected: dict) -> dict:
    """The tensors the pair stores quantised (or in 16 bits), dequantised by gguf-py, under the
    checkpoint's names: what transformers runs to give the quantised pair's reference."""
    out = {}
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.GEMMA3, text["num_hidden_layers"])
    stored = {t.name: t for t in gguf.GGUFReader(str(text_path)).tensors}
    folder = FIXTURES / "tiny-gemma3-vlm"
    for hf, value in safetensors.numpy.load_file(str(folder / "model.safetensors")).items():
        if not hf.startswith("language_model."):
            continue
        t = stored[names.get_name(hf.removeprefix("language_model."), try_suffixes=(".weight", ".bias"))]
        if t.tensor_type != Q.F32:
            out[hf] = gguf.quants.dequantize(t.data, t.tensor_type).reshape(value.shape)
    for t in gguf.GGUFReader(str(mmproj_path)).tensors:
        hf, value, kind = expected[t.name]
        if kind != Q.F32:
            out[hf] = gguf.quants.dequantize(t.data, kind).reshape(value.shape).astype(np.float32)
    return out


# ------------------------------------------------------------------------------------------
# The legacy LLaVA projector (convert_image_encoder_to_gguf.py)
# ------------------------------------------------------------------------------------------


def legacy_name(name: str) -> str:
    """convert_image_encoder_to_gguf.py's `get_tensor_name` for a tower or projector tensor."""
    if name.startswith("multi_modal_projector"):
        return name.replace("multi_modal_projector", "mm").replace("linear_1", "0").replace("linear_2", "2")
    for old, new in [
        ("vision_model", "v"),
        ("encoder.layers", "blk"),
        ("embeddings.", ""),
        ("_proj", ""),
        ("self_attn.", "attn_"),
        ("layer_norm", "ln"),
        ("layernorm", "ln"),
        ("mlp.fc1", "ffn_down"),
        ("mlp.fc2", "ffn_up"),
        ("embedding", "embd"),
        ("final", "post"),
        ("layrnorm", "ln"),
    ]:
        name = name.replace(old, new)
    return name


def write_llava_mmproj(folder: str) -> tuple[Path, dict]:
    src = FIXTURES / folder
    config = json.loads((src / "config.json").read_text())
    pre = json.loads((src / "preprocessor_config.json").read_text())
    vision = config["vision_config"]
    weights = safetensors.numpy.load_file(str(src / "model.safetensors"))
    layers = vision["num_hidden_layers"]
    feature = config.get("vision_feature_layer", -2)
    feature = [feature] if isinstance(feature, int) else feature
    feature_layers = [f if f >= 0 else layers + f + 1 for f in feature]
    block_count = max(feature_layers)
    path = OUT / f"mmproj-{folder}.gguf"
    writer = gguf.GGUFWriter(str(path), "clip")
    writer.add_bool("clip.has_text_encoder", False)
    writer.add_bool("clip.has_vision_encoder", True)
    writer.add_bool("clip.has_llava_projector", True)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_name(folder)
    writer.add_description("image encoder for LLaVA")
    writer.add_string("clip.projector_type", "mlp")
    writer.add_uint32("clip.vision.image_size", vision["image_size"])
    writer.add_uint32("clip.vision.patch_size", vision["patch_size"])
    writer.add_uint32("clip.vision.embedding_length", vision["hidden_size"])
    writer.add_uint32("clip.vision.feed_forward_length", vision["intermediate_size"])
    writer.add_uint32("clip.vision.projection_dim", vision.get("projection_dim", 512))
    writer.add_uint32("clip.vision.attention.head_count", vision["num_attention_heads"])
    writer.add_float32("clip.vision.attention.layer_norm_epsilon", vision["layer_norm_eps"])
    writer.add_uint32("clip.vision.block_count", block_count)
    writer.add_array("clip.vision.feature_layer", feature_layers)
    writer.add_array("clip.vision.image_mean", pre["image_mean"])
    writer.add_array("clip.vision.image_std", pre["image_std"])
    writer.add_bool("clip.use_gelu", vision["hidden_act"] == "gelu")
    expected = {}
    for name in sorted(weights):
        if name.startswith("language_model."):
            continue
        # llava_surgery's CLIP model: the tower under `vision_model.`.
        hf = name.replace("vision_tower.vision_model.", "vision_model.").replace("vision_tower.", "vision_model.")
        if hf.startswith("vision_model.post_layernorm"):
            continue  # should_skip_tensor: unused by LLaVA
        if hf.startswith("vision_model.encoder.layers."):
            if int(hf.split(".")[3]) >= block_count:
                continue  # the layers past the deepest feature layer are dropped
        value = np.ascontiguousarray(weights[name], dtype=np.float32)
        expected[legacy_name(hf)] = (name, value, Q.F32)
        writer.add_tensor(legacy_name(hf), value)
    finish(writer)
    return path, expected


# ------------------------------------------------------------------------------------------
# Gemma 3's projector (convert_hf_to_gguf.py --mmproj)
# ------------------------------------------------------------------------------------------


def write_gemma3_mmproj(folder: str, qtype: Q = Q.F32) -> tuple[Path, dict]:
    src = FIXTURES / folder
    config = json.loads((src / "config.json").read_text())
    pre = json.loads((src / "preprocessor_config.json").read_text())
    vision = config["vision_config"]
    weights = safetensors.numpy.load_file(str(src / "model.safetensors"))
    layers = vision["num_hidden_layers"]
    path = OUT / (f"mmproj-{folder}.gguf" if qtype == Q.F32 else f"mmproj-{folder}.{qtype.name}.gguf")
    writer = gguf.GGUFWriter(str(path), "clip")
    writer.add_type(gguf.GGUFType.MMPROJ)
    writer.add_name(folder)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32 if qtype == Q.F32 else gguf.LlamaFileType.MOSTLY_Q8_0)
    writer.add_clip_has_vision_encoder(True)
    writer.add_vision_projection_dim(config["text_config"]["hidden_size"])
    writer.add_vision_image_size(vision["image_size"])
    writer.add_vision_patch_size(vision["patch_size"])
    writer.add_vision_embedding_length(vision["hidden_size"])
    writer.add_vision_feed_forward_length(vision["intermediate_size"])
    writer.add_vision_block_count(layers)
    writer.add_vision_head_count(vision["num_attention_heads"])
    writer.add_vision_image_mean(pre["image_mean"])
    writer.add_vision_image_std(pre["image_std"])
    writer.add_clip_projector_type(gguf.VisionProjectorType.GEMMA3)
    writer.add_vision_attention_layernorm_eps(vision.get("layer_norm_eps", 1e-6))
    writer.add_vision_use_gelu(True)
    n_per_side = int(config.get("mm_tokens_per_image", 256) ** 0.5)
    scale = (vision["image_size"] // vision["patch_size"]) // n_per_side
    if scale > 0 and scale != 4:
        writer.add_vision_projector_scale_factor(scale)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.MMPROJ, layers)
    expected = {}
    for name in sorted(weights):
        if not name.startswith(("multi_modal_projector.", "vision_tower.")):
            continue
        hf = name.replace("_weight", ".weight")
        # The converter's names carry `vision_tower.vision_model.`.
        if hf.startswith("vision_tower.") and not hf.startswith("vision_tower.vision_model."):
            hf = hf.replace("vision_tower.", "vision_tower.vision_model.", 1)
        new = names.get_name(hf, try_suffixes=(".weight", ".bias"))
        assert new is not None, hf
        value = np.ascontiguousarray(weights[name], dtype=np.float32)
        if "soft_emb_norm.weight" in hf:
            value = value + 1
        kind = Q.F32
        if qtype != Q.F32 and new == "mm.input_projection.weight":
            kind = Q.F16  # Gemma3VisionModel.tensor_force_quant
        elif qtype != Q.F32 and new.startswith("v.blk.") and value.ndim == 2 and value.shape[1] % 32 == 0:
            kind = qtype
        data = value if kind == Q.F32 else gguf.quants.quantize(value, kind)
        expected[new] = (name, value, kind)
        writer.add_tensor(new, data, raw_dtype=kind)
    finish(writer)
    return path, expected


def write_idefics3_mmproj(folder: str) -> tuple[Path, dict]:
    """SmolVLM's projector as convert_hf_to_gguf.py `--mmproj` writes it (SmolVLMModel):
    `clip.projector_type` `idefics3`, `clip.vision.projector.scale_factor`, `clip.use_gelu`,
    `clip.vision.preproc_image_size` the processor's `size.longest_edge`, the tower's sizes, image
    mean and std; the tower's and the connector's tensors by gguf-py's map (`mm.model.fc`)."""
    src = FIXTURES / folder
    config = json.loads((src / "config.json").read_text())
    pre = json.loads((src / "preprocessor_config.json").read_text())
    vision = config["vision_config"]
    weights = safetensors.numpy.load_file(str(src / "model.safetensors"))
    layers = vision["num_hidden_layers"]
    path = OUT / f"mmproj-{folder}.gguf"
    writer = gguf.GGUFWriter(str(path), "clip")
    writer.add_type(gguf.GGUFType.MMPROJ)
    writer.add_name(folder)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_clip_has_vision_encoder(True)
    writer.add_vision_projection_dim(config["text_config"]["hidden_size"])
    writer.add_vision_image_size(vision["image_size"])
    writer.add_vision_patch_size(vision["patch_size"])
    writer.add_vision_embedding_length(vision["hidden_size"])
    writer.add_vision_feed_forward_length(vision["intermediate_size"])
    writer.add_vision_block_count(layers)
    writer.add_vision_head_count(vision["num_attention_heads"])
    writer.add_vision_image_mean(pre["image_mean"])
    writer.add_vision_image_std(pre["image_std"])
    writer.add_clip_projector_type(gguf.VisionProjectorType.IDEFICS3)
    writer.add_vision_attention_layernorm_eps(vision.get("layer_norm_eps", 1e-5))
    writer.add_vision_projector_scale_factor(config.get("scale_factor", 2))
    writer.add_vision_use_gelu(True)
    writer.add_vision_preproc_image_size(pre.get("size", {}).get("longest_edge", vision["image_size"]))
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.MMPROJ, layers)
    expected = {}
    for name in sorted(weights):
        if not name.startswith(("model.vision_model.", "model.connector.")):
            continue
        new = names.get_name(name, try_suffixes=(".weight", ".bias"))
        assert new is not None, name
        value = np.ascontiguousarray(weights[name], dtype=np.float32)
        expected[new] = (name, value, Q.F32)
        writer.add_tensor(new, value, raw_dtype=Q.F32)
    finish(writer)
    return path, expected


# ------------------------------------------------------------------------------------------
# Qwen2.5-VL (convert_hf_to_gguf.py's Qwen2VLModel and Qwen2VLVisionModel)
# ------------------------------------------------------------------------------------------

QWEN = "tiny-qwen2_5_vl"
QWEN2 = "tiny-qwen2_vl"


def qwen_bpe(writer: gguf.GGUFWriter, src: Path) -> None:
    """`_set_vocab_gpt2` for a Qwen2 tokenizer.json: the BPE vocabulary padded to the config's
    vocabulary size, added tokens as control tokens, the merges, pre-tokenizer `qwen2`, EOS and
    padding from tokenizer_config.json, no BOS added, the chat template."""
    tokenizer = json.loads((src / "tokenizer.json").read_text())
    config = json.loads((src / "tokenizer_config.json").read_text())
    size = json.loads((src / "config.json").read_text())["text_config"]["vocab_size"]
    tokens = [f"[PAD{i}]" for i in range(size)]
    types = [gguf.TokenType.UNUSED] * size
    for token, i in tokenizer["model"]["vocab"].items():
        tokens[i], types[i] = token, gguf.TokenType.NORMAL
    for t in tokenizer["added_tokens"]:
        tokens[t["id"]] = t["content"]
        types[t["id"]] = gguf.TokenType.CONTROL if t["special"] else gguf.TokenType.USER_DEFINED
    ids = {t["content"]: t["id"] for t in tokenizer["added_tokens"]}
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in tokenizer["model"]["merges"]])
    writer.add_eos_token_id(ids[config["eos_token"]])
    writer.add_pad_token_id(ids[config["pad_token"]])
    writer.add_add_bos_token(False)
    writer.add_chat_template((src / "chat_template.jinja").read_text())


def write_qwen_text(folder: str) -> tuple[Path, dict]:
    """Qwen2VLModel: the language model (`model.` without `visual.`) as architecture `qwen2vl`,
    q/k unpermuted, `qwen2vl.rope.dimension_sections` M-RoPE's sections padded to four."""
    src = FIXTURES / folder
    config = json.loads((src / "config.json").read_text())
    weights = safetensors.numpy.load_file(str(src / "model.safetensors"))
    text = config["text_config"]
    path = OUT / f"{folder}.gguf"
    language = {k: v for k, v in weights.items() if k.startswith("model.")}
    write_text(path, text, language, qwen_bpe, src, Q.F32)
    reader = gguf.GGUFReader(str(path))
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.QWEN2VL, text["num_hidden_layers"])
    stored = {t.name: np.asarray(t.data) for t in reader.tensors}
    for hf, value in language.items():
        name = names.get_name(hf, try_suffixes=(".weight", ".bias"))
        assert np.array_equal(stored[name].reshape(value.shape), value), f"{path.name}: {name}"
    assert set(stored) == {names.get_name(hf, try_suffixes=(".weight", ".bias")) for hf in language}
    sections = reader.fields["qwen2vl.rope.dimension_sections"]
    assert [int(sections.parts[i][0]) for i in sections.data] == [2, 3, 3, 0]
    print(path.name, len(stored), "tensors,", path.stat().st_size, "bytes")
    return path, text


def write_qwen2_5_vl_mmproj(folder: str) -> tuple[Path, dict]:
    """Qwen2.5-VL's projector as convert_hf_to_gguf.py `--mmproj` writes it (Qwen2VLVisionModel):
    `clip.projector_type` `qwen2.5vl_merger`, `clip.use_silu`, `clip.vision.n_wa_pattern` (the
    first full-attention layer plus one, the full layers evenly spaced), the layer-norm epsilon
    (the text config's `rms_norm_eps`), `clip.vision.image_size` 560 (the config has none), the
    tower's sizes (`num_heads`, `depth`), image mean and std; q/k/v split from `attn.qkv`, the
    Conv3d's two frames as `v.patch_embd.weight` and `v.patch_embd.weight.1`, the rest by
    gguf-py's map (`ffn_gate`/`ffn_up`/`ffn_down`, `v.post_ln` the merger's `ln_q`, `mm.0`, `mm.2`).

    One key more than the converter writes: `clip.vision.window_size`, the checkpoint's 56 px.
    The converter leaves it out and clip.cpp then runs 112 (every released Qwen2.5-VL's); without
    it this file would be another model than the checkpoint.

    Qwen2-VL's (`tiny-qwen2_vl`): projector type `qwen2vl_merger`, no activation key (clip.cpp's
    quick GELU), no windows, the tower's width `embed_dim` and `feed_forward_length` the config's
    `hidden_size` (the converter's renaming; clip.cpp reads the width from the tensors), the
    LayerNorms' biases."""
    src = FIXTURES / folder
    config = json.loads((src / "config.json").read_text())
    pre = json.loads((src / "preprocessor_config.json").read_text())
    vision = dict(config["vision_config"])
    qwen2 = "embed_dim" in vision
    if qwen2:
        vision["intermediate_size"] = vision["hidden_size"]
        vision["hidden_size"] = vision["embed_dim"]
    weights = safetensors.numpy.load_file(str(src / "model.safetensors"))
    layers = vision["depth"]
    path = OUT / f"mmproj-{folder}.gguf"
    writer = gguf.GGUFWriter(str(path), "clip")
    writer.add_type(gguf.GGUFType.MMPROJ)
    writer.add_name(folder)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_clip_has_vision_encoder(True)
    writer.add_vision_projection_dim(config["text_config"]["hidden_size"])
    writer.add_vision_image_size(vision.get("image_size", 560))
    writer.add_vision_patch_size(vision["patch_size"])
    writer.add_vision_embedding_length(vision["hidden_size"])
    writer.add_vision_feed_forward_length(vision["intermediate_size"])
    writer.add_vision_block_count(layers)
    writer.add_vision_head_count(vision["num_heads"])
    writer.add_vision_image_mean(pre["image_mean"])
    writer.add_vision_image_std(pre["image_std"])
    if qwen2:
        writer.add_clip_projector_type(gguf.VisionProjectorType.QWEN2VL)
    else:
        writer.add_clip_projector_type(gguf.VisionProjectorType.QWEN25VL)
        writer.add_vision_use_silu(True)
        full = vision["fullatt_block_indexes"]
        pattern = full[0] + 1
        assert all(b - a == pattern for a, b in zip(full, full[1:])), full
        writer.add_vision_n_wa_pattern(pattern)
    writer.add_vision_attention_layernorm_eps(config.get("rms_norm_eps", 1e-6))
    if not qwen2:
        writer.add_vision_window_size(vision["window_size"])
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.MMPROJ, layers)
    expected = {}

    def add(new: str, hf: str, value: np.ndarray) -> None:
        value = np.ascontiguousarray(value, dtype=np.float32)
        expected[new] = (hf, value, Q.F32)
        writer.add_tensor(new, value, raw_dtype=Q.F32)

    for name in sorted(weights):
        if not name.startswith("visual."):
            continue
        value = weights[name]
        if ".qkv." in name:
            c = value.shape[0] // 3
            for i, part in enumerate("qkv"):
                split = name.replace("qkv", part)
                add(names.get_name(split, try_suffixes=(".weight", ".bias")), name, value[i * c : (i + 1) * c])
        elif name.endswith("patch_embed.proj.weight"):
            assert value.shape[2] == 2, value.shape
            add("v.patch_embd.weight", name, value[:, :, 0])
            add("v.patch_embd.weight.1", name, value[:, :, 1])
        else:
            new = names.get_name(name, try_suffixes=(".weight", ".bias"))
            assert new is not None, name
            add(new, name, value)
    finish(writer)
    return path, expected


def qwen_transform(name: str, original: np.ndarray) -> np.ndarray:
    """The converter's transform of a Qwen2.5-VL tower tensor, from its GGUF name."""
    if name == "v.patch_embd.weight":
        return original[:, :, 0]
    if name == "v.patch_embd.weight.1":
        return original[:, :, 1]
    for i, part in enumerate(("attn_q.", "attn_k.", "attn_v.")):
        if part in name:
            c = original.shape[0] // 3
            return original[i * c : (i + 1) * c]
    return original


# ------------------------------------------------------------------------------------------
# Checks
# ------------------------------------------------------------------------------------------


def check_mmproj(path: Path, expected: dict, folder: str) -> None:
    """Every tensor read back equals the checkpoint's weight after the converter's transform."""
    weights = safetensors.numpy.load_file(str(FIXTURES / folder / "model.safetensors"))
    reader = gguf.GGUFReader(str(path))
    seen = set()
    for t in reader.tensors:
        hf, value, kind = expected[t.name]
        assert t.tensor_type == kind, t.name
        if kind != Q.F32:
            # Stored quantised: within the type's rounding of what was meant.
            back = gguf.quants.dequantize(t.data, kind).reshape(value.shape)
            assert np.abs(back - value).max() <= np.abs(value).max() / 100, f"{path.name}: {t.name}"
            seen.add(t.name)
            continue
        back = np.asarray(t.data).reshape(value.shape)
        assert np.array_equal(back, value), f"{path.name}: {t.name}"
        # The converter's transform applied to the checkpoint's weight gives what is stored.
        original = weights[hf].astype(np.float32)
        want = original + 1 if t.name == "mm.soft_emb_norm.weight" else original
        if folder in (QWEN, QWEN2):
            want = qwen_transform(t.name, original)
        assert np.array_equal(back, want), f"{path.name}: {t.name} vs {hf}"
        seen.add(t.name)
    assert seen == set(expected), f"{path.name}: {set(expected) - seen}"
    print(path.name, len(seen), "tensors,", path.stat().st_size, "bytes")


def check_text(path: Path, folder: str, text: dict) -> None:
    """gguf-py reads the text file back to the language model's weights after the converter's
    transforms; transformers loads a Llama back to them exactly."""
    weights = text_weights(safetensors.numpy.load_file(str(FIXTURES / folder / "model.safetensors")))
    reader = gguf.GGUFReader(str(path))
    arch = "gemma3" if text["model_type"] == "gemma3_text" else "llama"
    names = gguf.get_tensor_name_map(
        gguf.MODEL_ARCH.GEMMA3 if arch == "gemma3" else gguf.MODEL_ARCH.LLAMA, text["num_hidden_layers"]
    )
    stored = {t.name: np.asarray(t.data) for t in reader.tensors}
    heads, kv = text["num_attention_heads"], text["num_key_value_heads"]
    for hf, value in weights.items():
        want = value.astype(np.float32)
        if arch == "gemma3" and hf.endswith("norm.weight"):
            want = want + 1.0
        if arch == "llama" and hf.endswith("q_proj.weight"):
            want = permute(want, heads, heads)
        elif arch == "llama" and hf.endswith("k_proj.weight"):
            want = permute(want, heads, kv)
        name = names.get_name(hf, try_suffixes=(".weight", ".bias"))
        assert np.array_equal(stored[name].reshape(want.shape), want), f"{path.name}: {name}"
    if arch == "llama":
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(OUT, gguf_file=path.name, dtype=torch.float32)
        state = model.state_dict()
        for hf, value in weights.items():
            assert np.array_equal(state[hf].numpy(), value), f"{path.name}: {hf} after transformers' load"
    print(path.name, len(stored), "tensors,", path.stat().st_size, "bytes")


# ------------------------------------------------------------------------------------------
# Gemma 3's reference under llama.cpp's reading of the pair
# ------------------------------------------------------------------------------------------


@torch.no_grad()
def gemma3_generate(g, model, runner, enc, store) -> dict:
    """make_gemma3_vlm.py's greedy generation, with and without the KV cache (the same tokens),
    and one forward over prompt + generated tokens whose attention is stored. (Its check of the
    cached steps' attention against that forward does not apply: with every layer sliding,
    transformers' cache keeps only the window.)"""
    ids, types, pixels = enc["input_ids"], enc["token_type_ids"], enc["pixel_values"]
    kwargs = dict(input_ids=ids, attention_mask=torch.ones_like(ids), token_type_ids=types, pixel_values=pixels)
    import vlmlib

    cached = model.generate(**kwargs, generation_config=vlmlib.generation_config(model, True, g.GEN_TOKENS))
    plain = model.generate(**kwargs, generation_config=vlmlib.generation_config(model, False, g.GEN_TOKENS))
    seq = plain[0].tolist()
    assert seq == cached[0].tolist(), (seq, cached[0].tolist())
    prompt = ids[0].tolist()
    assert seq[: len(prompt)] == prompt
    full_types = torch.cat([types, torch.zeros(1, len(seq) - len(prompt), dtype=types.dtype)], dim=1)
    full = runner.run(torch.tensor([seq]), full_types, pixels)
    key = f"gen_{g.GENERATE_CASE}"
    return dict(
        name=key,
        case=g.GENERATE_CASE,
        prompt_len=len(prompt),
        generated_ids=seq[len(prompt) :],
        sequence=seq,
        n=len(seq),
        tensors={
            "attentions": store.put(f"{key}.attentions", full["attentions"]),
            "logits_last": store.put(f"{key}.logits_last", full["logits_last"]),
        },
    )


@torch.no_grad()
def gemma3_reference(qtype: Q = Q.F32, weights: dict | None = None) -> None:
    """tests/reference/tiny-gemma3-vlm-gguf.{json,safetensors}: make_gemma3_vlm.py's cases and
    generation, run by transformers on the same weights with the text config llama.cpp reads from
    tiny-gemma3-vlm.gguf (make_gguf_quantized.py's `llama_cpp_config`: every fifth of six layers
    sliding, the local RoPE base 10,000), which the checkpoint's own config does not match (its
    last layer is full, its local base 1,000). The tower, the projector and the pixels are the
    checkpoint's."""
    import make_gemma3_vlm as g
    from make_gguf_quantized import llama_cpp_config
    from reflib import REFERENCE, TensorStore, rel, versions, write_json
    from transformers import AutoConfig, AutoModelForImageTextToText, AutoProcessor

    setup_determinism(g.SEED)
    folder = FIXTURES / g.NAME
    config = AutoConfig.from_pretrained(folder)
    text = llama_cpp_config(config.text_config.to_dict())
    config.text_config.layer_types = text["layer_types"]
    config.text_config.rope_parameters = text["rope_parameters"]
    config.text_config.query_pre_attn_scalar = text["query_pre_attn_scalar"]
    model = AutoModelForImageTextToText.from_pretrained(
        folder, config=config, attn_implementation="eager", dtype=torch.float32
    ).eval()
    if weights:
        # Each checkpoint tensor replaced by its dequantised copy; found among the model's
        # parameters by its values (random weights: each is unique).
        original = safetensors.numpy.load_file(str(folder / "model.safetensors"))
        params = dict(model.named_parameters())
        for hf, value in weights.items():
            want = torch.from_numpy(original[hf])
            matches = [p for p in params.values() if p.shape == want.shape and torch.equal(p.detach(), want)]
            assert len(matches) >= 1, hf
            for p in matches:  # the tied head is the embedding itself
                p.data.copy_(torch.from_numpy(np.ascontiguousarray(value)))
    processor = AutoProcessor.from_pretrained(folder)
    tok = processor.tokenizer
    runner = g.Runner(model)
    store = TensorStore()
    cases, generations = [], []
    for case in g.CASES:
        encoded = g.encode(processor, case)
        enc = encoded["enc"]
        ids, types = enc["input_ids"], enc["token_type_ids"]
        ref = runner.run(ids, types, enc["pixel_values"])
        id_list = ids[0].tolist()
        positions = [i for i, t in enumerate(id_list) if t == config.image_token_id]
        image_runs = g.runs(positions)
        later = g.check_blocks(
            ref["attentions"], image_runs, len(id_list), config.text_config.sliding_window, text["layer_types"]
        )
        cases.append(
            dict(
                name=case["name"],
                text=encoded["text"],
                messages=case.get("messages"),
                images=case["images"],
                input_ids=id_list,
                image_token_runs=image_runs,
                later_image_keys_seen=later,
                tensors={what: store.put(f"{case['name']}.{what}", value) for what, value in ref.items()},
            )
        )
        if case["name"] == g.GENERATE_CASE:
            generations.append(gemma3_generate(g, model, runner, enc, store))
    suffix = "" if qtype == Q.F32 else f".{qtype.name}"
    name = f"{g.NAME}-gguf{suffix}"
    manifest = dict(
        generator="tests/reference/make_mmproj.py",
        model=g.NAME,
        files=[rel(OUT / f"{g.NAME}{suffix}.gguf"), rel(OUT / f"mmproj-{g.NAME}{suffix}.gguf")],
        weights="the checkpoint's" if not weights else "the checkpoint's, with the pair's quantised tensors dequantised by gguf-py",
        text_config=dict(layer_types=text["layer_types"], rope_parameters=text["rope_parameters"]),
        how=g.HOW + "; the text config as llama.cpp reads it from the GGUF file (see the generator's doc)",
        versions=versions(),
        tensors=f"{name}.safetensors",
        cases=cases,
        generations=generations,
    )
    size = store.save(REFERENCE / f"{name}.safetensors")
    write_json(REFERENCE / f"{name}.json", manifest)
    print(f"{name}: {len(cases)} cases, {len(generations)} generation, {size / 1e3:.0f} kB")


def main() -> None:
    setup_determinism(0)
    for folder, mmproj in (
        ("tiny-llava", write_llava_mmproj),
        ("tiny-gemma3-vlm", write_gemma3_mmproj),
        ("tiny-smolvlm", write_idefics3_mmproj),
    ):
        path, text = write_text_model(folder)
        check_text(path, folder, text)
        path, expected = mmproj(folder)
        check_mmproj(path, expected, folder)
    for folder in (QWEN, QWEN2):
        write_qwen_text(folder)
        path, expected = write_qwen2_5_vl_mmproj(folder)
        check_mmproj(path, expected, folder)
    gemma3_reference()
    # The Gemma 3 pair quantised as llama.cpp's tools store it: the text model's matrices Q8_0
    # (make_gguf_quantized.py's `store`), the tower's Q8_0, the input projection F16 (the
    # converter forces it), the rest F32; held to transformers on the dequantised weights.
    text_path, text = write_text_model("tiny-gemma3-vlm", Q.Q8_0)
    mm_path, expected = write_gemma3_mmproj("tiny-gemma3-vlm", Q.Q8_0)
    check_mmproj(mm_path, expected, "tiny-gemma3-vlm")
    gemma3_reference(Q.Q8_0, dequantised(text_path, text, mm_path, expected))


if __name__ == "__main__":
    main()
