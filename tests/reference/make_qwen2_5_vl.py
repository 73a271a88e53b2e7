#!/usr/bin/env python3
"""A tiny random Qwen2.5-VL checkpoint (`Qwen2_5_VLForConditionalGeneration`, `model_type`
`qwen2_5_vl`: its own vision transformer with 2-D rotary positions, windowed and full-attention
layers and the 2x2 patch merger, and a Qwen2 text model with multimodal rotary positions, M-RoPE)
with its processor, and Hugging Face transformers' reference outputs for it (eager attention,
float32).

    /path/to/venv/bin/python tests/reference/make_qwen2_5_vl.py [--variant qwen2_vl]

It writes tests/fixtures/tiny-qwen2_5_vl/ (config.json, generation_config.json and
model.safetensors as transformers saves them; the processor as Qwen2_5_VLProcessor.save_pretrained
writes it, with the Qwen2.5-VL chat template) and tests/reference/tiny-qwen2_5_vl.{json,safetensors}:
for three prompts with pictures from tests/fixtures/images (one through the chat template), the
processor's pixels (flattened patches, in its merge-window order) and grid, the expanded token ids,
the language model's M-RoPE position ids, each picture's vision-tower attention per layer in patch
raster order (the windowed layers' calls, one per window, put back together: a patch outside a
query's window gets 0), the merged image features, the language model's attention over the whole
sequence, its last hidden state and the last position's logits; and one greedy generation.

`--variant qwen2_vl` writes tests/fixtures/tiny-qwen2_vl/ and tests/reference/tiny-qwen2_vl.*: the
same for Qwen2-VL (`Qwen2VLForConditionalGeneration`), whose tower has LayerNorm, a quick-GELU MLP
and no windows.

Weights are drawn as make_families.py draws them (its `randomise`, numpy PCG64 from a fixed seed),
so a re-run with the same versions rewrites every file byte for byte. The script checks itself: the
saved folder loads back (AutoModelForImageTextToText, AutoTokenizer, AutoImageProcessor) with no missing or unexpected
key and computes exactly what the model built in memory computes; the pictures are resized by
smart_resize (neither keeps its size); the windowed layers run more than one window; the tower
run picture by picture computes the features the model puts at the image tokens; the attention
caught inside eager attention equals `output_attentions`; generate() with and without its KV cache
picks the same tokens, and its per-step attention agrees with a re-run over the whole sequence.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import PIL
import torch
from PIL import Image
from transformers import (
    AutoImageProcessor,
    AutoTokenizer,
    Qwen2_5_VLConfig,
    Qwen2_5_VLForConditionalGeneration,
    Qwen2_5_VLProcessor,
    Qwen2VLConfig,
    Qwen2VLForConditionalGeneration,
    Qwen2VLProcessor,
)
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil, smart_resize
from transformers.processing_utils import ProcessorMixin
from transformers.vision_utils import get_vision_window_index

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_families import Gains, generate_vs_rerun, randomise, summarise_config  # noqa: E402
import vlmlib  # noqa: E402
from reflib import (  # noqa: E402
    FIXTURES,
    REFERENCE,
    AttentionCatcher,
    TensorStore,
    max_abs,
    rel,
    setup_determinism,
    versions,
    write_json,
)

SEED = 20261210
# `--variant qwen2_vl`: Qwen2-VL (tiny-qwen2_vl), whose tower has LayerNorm, a plain MLP with
# quick GELU and no windows, in front of the same text model.
ARGS = sys.argv[1:]
if ARGS not in ([], ["--variant", "qwen2_vl"]):
    sys.exit("usage: make_qwen2_5_vl.py [--variant qwen2_vl]")
VARIANT = "qwen2_vl" if ARGS == ["--variant", "qwen2_vl"] else "qwen2_5_vl"
QWEN2 = VARIANT == "qwen2_vl"
NAME = "tiny-qwen2_vl" if QWEN2 else "tiny-qwen2_5_vl"
CONFIG, MODEL, PROCESSOR = (
    (Qwen2VLConfig, Qwen2VLForConditionalGeneration, Qwen2VLProcessor)
    if QWEN2
    else (Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration, Qwen2_5_VLProcessor)
)
TARGET = FIXTURES / NAME
TOKENIZER_SOURCE = FIXTURES / "tiny-qwen2"
IMAGES = FIXTURES / "images"
PATCH, MERGE, TEMPORAL = 14, 2, 2
FACTOR = PATCH * MERGE
MIN_PIXELS, MAX_PIXELS = FACTOR * FACTOR * 4, FACTOR * FACTOR * 8
# 56 px: windows of 2 x 2 merged units (4 x 4 patches).
WINDOW = 56
FULL_LAYERS = [1]
GEN_TOKENS = 6
VISION = "<|vision_start|><|image_pad|><|vision_end|>"

CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "{% endif %}<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}{{ message['content'] }}"
    "<|im_end|>\n{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}{% if add_vision_id %}Picture {{ image_count.value }}: "
    "{% endif %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}{% set video_count.value = video_count.value + 1 %}"
    "{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

CASES = [
    dict(name="describe", text=VISION + "describe the red part", images=["big80x64.png"]),
    dict(name="two_images", text=VISION + "and" + VISION + "compare", images=["big80x64.png", "wide45x37.png"]),
    dict(name="chat", chat="what is red?", images=["wide45x37.png"]),
]
GENERATE_CASE = "describe"


def without_video() -> None:
    """Qwen2_5_VLProcessor checks every sub-processor's class, the video processor's too, whose
    base class needs torchvision (absent here): a missing video processor (None) is let through,
    as a processor for pictures alone."""
    original = ProcessorMixin.check_argument_for_proper_class

    def check(self, name, arg):
        if arg is None and name == "video_processor":
            return None
        return original(self, name, arg)

    ProcessorMixin.check_argument_for_proper_class = check


def make_processor():
    """tiny-qwen2's byte-level BPE with Qwen2.5-VL's vision tokens added as special tokens, and
    Qwen2-VL's PIL image processor (bicubic, CLIP mean and std, smart_resize between MIN_PIXELS
    and MAX_PIXELS)."""
    tok = AutoTokenizer.from_pretrained(TOKENIZER_SOURCE)
    tok.add_special_tokens(
        {"additional_special_tokens": ["<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]}
    )
    tok.model_max_length = 256
    images = Qwen2VLImageProcessorPil(
        size={"shortest_edge": MIN_PIXELS, "longest_edge": MAX_PIXELS},
        patch_size=PATCH,
        merge_size=MERGE,
        temporal_patch_size=TEMPORAL,
    )
    return PROCESSOR(image_processor=images, tokenizer=tok, chat_template=CHAT_TEMPLATE)


def make_config(tok):
    ids = tok.convert_tokens_to_ids
    vision = dict(
        depth=3,
        embed_dim=32,
        hidden_size=64,
        hidden_act="quick_gelu",
        mlp_ratio=2,
        num_heads=4,
        in_channels=3,
        patch_size=PATCH,
        spatial_merge_size=MERGE,
        temporal_patch_size=TEMPORAL,
    )
    config = CONFIG(
        vision_config=vision if QWEN2 else dict(
            depth=3,
            hidden_size=32,
            hidden_act="silu",
            intermediate_size=64,
            num_heads=4,
            in_channels=3,
            patch_size=PATCH,
            spatial_merge_size=MERGE,
            temporal_patch_size=TEMPORAL,
            tokens_per_second=2,
            window_size=WINDOW,
            out_hidden_size=64,
            fullatt_block_indexes=FULL_LAYERS,
        ),
        text_config=dict(
            vocab_size=len(tok),
            hidden_size=64,
            intermediate_size=96,
            num_hidden_layers=3,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=128,
            rms_norm_eps=1e-6,
            hidden_act="silu",
            rope_parameters=dict(rope_type="default", rope_theta=10000.0, mrope_section=[2, 3, 3]),
            tie_word_embeddings=True,
            bos_token_id=None,
            eos_token_id=tok.eos_token_id,
            pad_token_id=tok.pad_token_id,
        ),
        image_token_id=ids("<|image_pad|>"),
        video_token_id=ids("<|video_pad|>"),
        vision_start_token_id=ids("<|vision_start|>"),
        vision_end_token_id=ids("<|vision_end|>"),
        tie_word_embeddings=True,
    )
    config._attn_implementation = "eager"
    return config


def save(model, processor) -> None:
    if TARGET.exists():
        shutil.rmtree(TARGET)
    model.config.architectures = [MODEL.__name__]
    model.save_pretrained(TARGET)
    # The processor's parts one by one (its save_pretrained needs a video processor): the tokenizer
    # with the chat template, the image processor in preprocessor_config.json, as Qwen's
    # repositories have them.
    processor.tokenizer.chat_template = CHAT_TEMPLATE
    processor.tokenizer.save_pretrained(TARGET)
    processor.image_processor.save_pretrained(TARGET)


def load_processor():
    """The saved processor's parts read back (AutoTokenizer, AutoImageProcessor)."""
    tok = AutoTokenizer.from_pretrained(TARGET)
    images = AutoImageProcessor.from_pretrained(TARGET)
    return PROCESSOR(image_processor=images, tokenizer=tok, chat_template=tok.chat_template)


def encode(processor, case: dict) -> dict:
    pictures = [Image.open(IMAGES / name).convert("RGB") for name in case["images"]]
    if "chat" in case:
        content = [{"type": "image"} for _ in pictures] + [{"type": "text", "text": case["chat"]}]
        text = processor.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True)
    else:
        text = case["text"]
    enc = processor(images=pictures, text=[text], return_tensors="pt")
    return dict(text=text, sizes=[list(p.size) for p in pictures], enc=enc)


def raster_order(grid: list[int]) -> torch.Tensor:
    """For each token of the tower's sequence (merged units in window order, each unit's 2x2
    patches in row order), the patch's index in raster order of the patch grid."""
    t, h, w = grid
    cols = w // MERGE
    if QWEN2:
        window_index = torch.arange(t * (h // MERGE) * cols)
    else:
        window_index, _ = get_vision_window_index(
            torch.tensor([grid]), spatial_merge_size=MERGE, window_size=WINDOW, patch_size=PATCH
        )
    out = []
    for unit in window_index.tolist():
        bh, bw = divmod(unit, cols)
        for sub in range(MERGE * MERGE):
            mh, mw = divmod(sub, MERGE)
            out.append((bh * MERGE + mh) * w + bw * MERGE + mw)
    return torch.tensor(out)


def windows_of(grid: list[int]) -> list[int]:
    """The tower's windowed calls' lengths for one picture (Qwen2-VL: one, the picture)."""
    if QWEN2:
        return [grid[0] * grid[1] * grid[2]]
    _, cu = get_vision_window_index(torch.tensor([grid]), spatial_merge_size=MERGE, window_size=WINDOW, patch_size=PATCH)
    return (cu[1:] - cu[:-1]).tolist()


class Runner:
    """One model's forward pass with everything the references need caught."""

    def __init__(self, model):
        self.model = model
        self.catcher = AttentionCatcher(model)
        self.hooks = vlmlib.Hooks(model.model.language_model, positions=True)

    @torch.no_grad()
    def tower(self, pixels: torch.Tensor, grids: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
        """Each picture's tower attention [layers, heads, n, n] in raster order, and the merged
        features of all pictures, the tower run picture by picture."""
        visual = self.model.model.visual
        dtype = next(self.model.parameters()).dtype
        attentions, features, at = [], [], 0
        for grid in grids.tolist():
            n = grid[0] * grid[1] * grid[2]
            with self.catcher.catching():
                out = visual(pixels[at : at + n].to(dtype), grid_thw=torch.tensor([grid]))
            at += n
            features.append(out.pooler_output)
            calls = [c["weights"][0] for c in self.catcher.calls]
            sizes = windows_of(grid)
            assert QWEN2 or len(sizes) > 1, f"one window only for {grid}"
            order = raster_order(grid)
            layers = []
            for layer in range(self.model.config.vision_config.depth):
                full = torch.zeros(calls[0].shape[0], n, n, dtype=calls[0].dtype)
                chunks = [n] if QWEN2 or layer in FULL_LAYERS else sizes
                start = 0
                for size in chunks:
                    w = calls.pop(0)
                    assert w.shape[-1] == size, (layer, w.shape, size)
                    full[:, start : start + size, start : start + size] = w
                    start += size
                # Window order -> raster order.
                raster = torch.zeros_like(full)
                raster[:, order[:, None], order[None, :]] = full
                layers.append(raster)
            assert not calls
            attentions.append(torch.stack(layers))
        return attentions, torch.cat(features)

    @torch.no_grad()
    def run(self, enc: dict) -> dict:
        self.hooks.seen = {}
        model = self.model
        dtype = next(model.parameters()).dtype
        inputs = {k: v for k, v in enc.items()}
        inputs["pixel_values"] = inputs["pixel_values"].to(dtype)
        with self.catcher.catching():
            out = model(**inputs, output_attentions=True, return_dict=True)
        text = torch.stack([a[0] for a in out.attentions])
        calls = [c["weights"][0] for c in self.catcher.calls if ".language_model." in c["name"]]
        assert torch.equal(torch.stack(calls), text), "caught text weights differ"
        towers, features = self.tower(enc["pixel_values"], enc["image_grid_thw"])
        (embeds,) = self.hooks.seen["inputs_embeds"]
        ids = enc["input_ids"]
        at_image = ids[0] == model.config.image_token_id
        assert int(at_image.sum()) == features.shape[0], (int(at_image.sum()), features.shape)
        per_picture = max_abs(embeds[0][at_image], features)
        assert per_picture < 1e-6, per_picture
        (positions,) = self.hooks.seen["position_ids"]
        (hidden,) = self.hooks.seen["lm_out"]
        return {
            "pixel_values": enc["pixel_values"],
            "image_features": embeds[0][at_image],
            "attentions": text,
            "hidden": hidden[0],
            "logits_last": out.logits[0, -1],
            "position_ids": positions[:, 0] if positions.dim() == 3 else positions,
            "towers": towers,
        }


@torch.no_grad()
def generate(model, runner: Runner, tok, enc, store: TensorStore) -> dict:
    ids = enc["input_ids"]
    kwargs = dict(enc)
    cached = model.generate(
        **kwargs,
        generation_config=vlmlib.generation_config(model, True, GEN_TOKENS),
        output_attentions=True,
        return_dict_in_generate=True,
    )
    plain = model.generate(**kwargs, generation_config=vlmlib.generation_config(model, False, GEN_TOKENS))
    seq = cached.sequences[0].tolist()
    assert seq == plain[0].tolist(), (seq, plain[0].tolist())
    prompt = ids[0].tolist()
    assert seq[: len(prompt)] == prompt
    n = len(seq)
    full_enc = dict(enc)
    full_enc["input_ids"] = torch.tensor([seq])
    full_enc["attention_mask"] = torch.ones(1, n, dtype=enc["attention_mask"].dtype)
    types = enc["mm_token_type_ids"]
    full_enc["mm_token_type_ids"] = torch.cat([types, torch.zeros(1, n - len(prompt), dtype=types.dtype)], dim=1)
    full = runner.run(full_enc)
    vs_rerun = generate_vs_rerun(cached, {"self.attentions": full["attentions"]}, False)["self"]
    assert vs_rerun < 1e-5, vs_rerun
    cfg = model.config.text_config
    new = seq[len(prompt) :]
    key = f"gen_{GENERATE_CASE}"
    return dict(
        name=key,
        case=GENERATE_CASE,
        prompt_len=len(prompt),
        generated_ids=new,
        generated_tokens=tok.convert_ids_to_tokens(new),
        generated_text=tok.decode(new, skip_special_tokens=False),
        sequence=seq,
        n=n,
        position_ids=full["position_ids"].tolist(),
        stopped_at_eos=bool(new) and new[-1] == cfg.eos_token_id,
        same_without_cache=True,
        generate_vs_rerun_max_abs=vs_rerun,
        tensors={
            "attentions": store.put(f"{key}.attentions", full["attentions"]),
            "logits_last": store.put(f"{key}.logits_last", full["logits_last"]),
        },
    )


def summary(cfg) -> dict:
    top = {
        k: getattr(cfg, k)
        for k in ("model_type", "image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id")
    }
    v = cfg.vision_config
    fields = (
        ("depth", "embed_dim", "hidden_size", "mlp_ratio", "num_heads", "hidden_act")
        if QWEN2
        else (
            "depth",
            "hidden_size",
            "intermediate_size",
            "num_heads",
            "hidden_act",
            "window_size",
            "fullatt_block_indexes",
            "out_hidden_size",
        )
    )
    top["vision_config"] = {
        k: getattr(v, k) for k in fields + ("patch_size", "spatial_merge_size", "temporal_patch_size")
    }
    top["text_config"] = summarise_config(cfg.text_config)
    top["text_config"]["rope_parameters"] = dict(cfg.text_config.rope_parameters)
    return top


@torch.no_grad()
def main() -> None:
    setup_determinism(SEED)
    without_video()
    processor = make_processor()
    tok = processor.tokenizer
    built = MODEL(make_config(tok)).eval()
    randomise(built, SEED, Gains(qk=1.2))
    save(built, processor)

    processor = load_processor()
    assert type(processor) is PROCESSOR, type(processor)
    assert type(processor.image_processor) is Qwen2VLImageProcessorPil, type(processor.image_processor)
    tok = processor.tokenizer
    model = vlmlib.load(TARGET, MODEL)
    model64 = vlmlib.load(TARGET, MODEL, torch.float64)
    cfg = model.config
    image_token_id = cfg.image_token_id
    assert image_token_id == processor.image_token_id
    keys = vlmlib.weight_keys(TARGET)
    runner, runner64 = Runner(model), Runner(model64)

    store = TensorStore()
    cases, generations, spreads = [], [], []
    for case in CASES:
        encoded = encode(processor, case)
        enc = encoded["enc"]
        vlmlib.same_as_built(built, model, **enc)
        grids = enc["image_grid_thw"].tolist()
        for (w, h), grid in zip(encoded["sizes"], grids):
            rh, rw = smart_resize(h, w, FACTOR, MIN_PIXELS, MAX_PIXELS)
            assert (rh, rw) != (h, w) and [1, rh // PATCH, rw // PATCH] == grid, (w, h, grid)
        ref = runner.run(enc)
        ref64 = runner64.run(enc)
        id_list = enc["input_ids"][0].tolist()
        positions = [i for i, t in enumerate(id_list) if t == image_token_id]
        entry = dict(
            name=case["name"],
            text=encoded["text"],
            chat=case.get("chat"),
            images=case["images"],
            image_sizes=encoded["sizes"],
            image_grid_thw=grids,
            input_ids=id_list,
            tokens=tok.convert_ids_to_tokens(id_list),
            n=len(id_list),
            image_token_positions=positions,
            position_ids=ref["position_ids"].tolist(),
            windows=[windows_of(g) for g in grids],
            tensors={
                "pixel_values": store.put(f"{case['name']}.pixel_values", ref["pixel_values"]),
                "image_features": store.put(f"{case['name']}.image_features", ref["image_features"]),
                "attentions": store.put(f"{case['name']}.attentions", ref["attentions"]),
                "hidden": store.put(f"{case['name']}.hidden", ref["hidden"]),
                "logits_last": store.put(f"{case['name']}.logits_last", ref["logits_last"]),
                "vision_attentions": [
                    store.put(f"{case['name']}.vision_attentions.{i}", t) for i, t in enumerate(ref["towers"])
                ],
            },
            f32_vs_f64_max_abs=dict(
                image_features=max_abs(ref["image_features"], ref64["image_features"]),
                attentions=max_abs(ref["attentions"], ref64["attentions"]),
                hidden=max_abs(ref["hidden"], ref64["hidden"]),
                logits_last=max_abs(ref["logits_last"], ref64["logits_last"]),
                vision_attentions=max(max_abs(a, b) for a, b in zip(ref["towers"], ref64["towers"])),
            ),
        )
        spreads.append(
            dict(
                case=case["name"],
                vision=[vlmlib.spread(t) for t in ref["towers"]],
                text=vlmlib.spread(ref["attentions"]),
            )
        )
        cases.append(entry)
        if case["name"] == GENERATE_CASE:
            generations.append(generate(model, runner, tok, enc, store))

    image_processor = processor.image_processor
    manifest = dict(
        generator="tests/reference/make_qwen2_5_vl.py" + (" --variant qwen2_vl" if QWEN2 else ""),
        model=NAME,
        model_type=cfg.model_type,
        architectures=cfg.architectures,
        seed=SEED,
        fixture=dict(
            path=rel(TARGET),
            files=sorted(p.name for p in TARGET.iterdir()),
            weights="model.safetensors",
            keys=keys,
        ),
        config=summary(cfg),
        processor=dict(
            cls=type(processor).__name__,
            image_processor=type(image_processor).__name__,
            size=dict(image_processor.size),
            patch_size=image_processor.patch_size,
            merge_size=image_processor.merge_size,
            temporal_patch_size=image_processor.temporal_patch_size,
            resample=int(image_processor.resample),
            image_mean=list(image_processor.image_mean),
            image_std=list(image_processor.image_std),
        ),
        notes=dict(NOTES, variant=VARIANT_NOTE) if QWEN2 else NOTES,
        how=HOW,
        attention_spread=spreads,
        versions=dict(versions(), pillow=PIL.__version__),
        tensors=f"{NAME}.safetensors",
        cases=cases,
        generations=generations,
    )
    size = store.save(REFERENCE / f"{NAME}.safetensors")
    write_json(REFERENCE / f"{NAME}.json", manifest)
    counts = ", ".join(f"{c['name']} {c['n']}" for c in cases)
    print(
        f"{NAME}: {len(cases)} cases ({counts} tokens), {len(generations)} generation, {size / 1e3:.0f} kB; "
        f"spread {spreads}; f32 vs f64 {[c['f32_vs_f64_max_abs'] for c in cases]}",
        file=sys.stderr,
    )


NOTES = dict(
    layout=(
        "transformers 5.24 saves Qwen2_5_VLForConditionalGeneration as model.visual.* (patch_embed.proj, "
        "blocks.N.{norm1,attn.qkv,attn.proj,norm2,mlp.{gate,up,down}_proj}, merger.{ln_q,mlp.0,mlp.2}), "
        "model.language_model.* (a Qwen2) and lm_head tied to the embeddings"
    ),
    image_tokens=(
        "Qwen2_5_VLProcessor repeats each <|image_pad|> of the prompt once per merged unit (grid h/2 x w/2), "
        "between the <|vision_start|> and <|vision_end|> the prompt (or the chat template) wrote"
    ),
    pixels=(
        "Qwen2VLImageProcessorPil: smart_resize to multiples of 28 between min and max pixels, PIL bicubic, "
        "rescale, CLIP mean/std; pixel_values [patches, 3*2*14*14], the picture repeated over the 2 temporal "
        "frames, patches in merge-window order (grid rows/2, cols/2, 2, 2)"
    ),
    tower=(
        "vision_attentions.i [layers, heads, n, n] for picture i, patches in raster order of the patch grid; "
        f"layers {FULL_LAYERS} attend over the whole picture, the others within windows of {WINDOW} px "
        "(2 x 2 merged units): a key outside the query's window gets exactly 0"
    ),
    positions=(
        "position_ids [3, n]: M-RoPE's temporal, height and width rows (transformers' get_rope_index): text "
        "counts on from the last position, a picture's tokens take start + (0, row, col) and the text after it "
        "continues from start + max(rows, cols)"
    ),
)

VARIANT_NOTE = (
    "Qwen2-VL (Qwen2VLForConditionalGeneration, qwen2_vl): the tower has LayerNorm (with biases), an "
    "fc1/fc2 MLP with quick GELU (embed_dim 32, mlp_ratio 2) and no windows (every layer over the whole "
    "picture: what the notes say of windows does not apply); its merger's ln_q is a LayerNorm; weights "
    "model.visual.* as Qwen2.5-VL's"
)

HOW = (
    "AutoModelForImageTextToText.from_pretrained(attn_implementation='eager', dtype=float32), eval(); "
    "AutoProcessor(images=[...], text=[...]) (the chat case's text from apply_chat_template with the picture "
    "before the text), batch of one; every processor output to the model, output_attentions=True. The tower "
    "attention caught inside eager attention with the tower run picture by picture (its features equal what "
    "the model puts at the image tokens within 1e-6); image_features [image tokens, 64] what the language "
    "model receives there; attentions [text layers, heads, n, n]; hidden [n, 64] the language model's "
    "last_hidden_state (after the final norm); logits_last [vocab]. The generation: model.generate greedy "
    f"(max_new_tokens {GEN_TOKENS}, KV cache), the same without the cache, then one forward over prompt + "
    "generated tokens whose attentions and logits_last are stored"
)


if __name__ == "__main__":
    main()
