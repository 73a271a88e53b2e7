#!/usr/bin/env python3
"""A tiny random Gemma 3 vision-language checkpoint (`Gemma3ForConditionalGeneration`, `model_type`
`gemma3` with a `vision_config`: a SigLIP vision tower, Gemma3MultiModalProjector's average pool,
soft-embedding RMSNorm and projection matrix, and a Gemma 3 text model) with its processor, and
Hugging Face transformers' reference outputs for it (eager attention, float32).

    /path/to/venv/bin/python tests/reference/make_gemma3_vlm.py [--variant pan-and-scan]

It writes tests/fixtures/tiny-gemma3-vlm/ (config.json, generation_config.json and
model.safetensors as transformers saves them; the processor as Gemma3Processor.save_pretrained
writes it, plus preprocessor_config.json and tokenizer.model) and
tests/reference/tiny-gemma3-vlm.{json,safetensors}: for three prompts with pictures from
tests/fixtures/images, the processor's pixels, expanded token ids and token_type_ids, the vision
tower's attention, the projected image features that replace the image tokens, the language
model's attention over the whole sequence (whose image tokens see each other in full: the
bidirectional block over each picture's tokens, on top of the causal mask and the sliding window),
its last hidden state and the last position's logits; and one greedy generation.

Weights are drawn as make_families.py draws them (its `randomise`, numpy PCG64 from a fixed seed),
so a re-run with the same versions rewrites every file byte for byte. The script checks itself: the
saved folder loads back (AutoModelForImageTextToText, AutoProcessor) with no missing or unexpected
key and computes exactly what the model built in memory computes; the attention caught inside
eager attention equals `output_attentions`; the image features are the projector applied to the
tower's last hidden state (after post_layernorm), and are what the language model receives at the
image token positions; each picture's image tokens attend to later image tokens of the same
picture (and to no later token outside it); generate() with and without its KV cache picks the
same tokens, and its per-step attention agrees with a re-run over the whole sequence.

`--variant pan-and-scan` writes tiny-gemma3-vlm-pas: the same weights with a processor that asks for
pan-and-scan (`do_pan_and_scan`, crops of at least 16 pixels so that the small test pictures are
cut): each picture wider or taller than 1.2 times the other side is given whole and then cut into
2 to 4 crops of the 8-bit picture, each resized as the whole is, and the processor writes its mark as
"Here is the original image <the whole's run> and here are some crops to help you see better <each
crop's run, space-separated>"; every run is a bidirectional block of its own.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import PIL
import torch
from PIL import Image
from transformers import (
    AutoProcessor,
    AutoTokenizer,
    Gemma3Config,
    Gemma3ForConditionalGeneration,
    Gemma3Processor,
    Gemma3TextConfig,
    SiglipVisionConfig,
)
from transformers.models.gemma3.image_processing_pil_gemma3 import Gemma3ImageProcessorPil

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

SEED = 20261207
ARGS = sys.argv[1:]
PAN_AND_SCAN = ARGS == ["--variant", "pan-and-scan"]
if ARGS and not PAN_AND_SCAN:
    sys.exit("usage: make_gemma3_vlm.py [--variant pan-and-scan]")
NAME = "tiny-gemma3-vlm-pas" if PAN_AND_SCAN else "tiny-gemma3-vlm"
TARGET = FIXTURES / NAME
TOKENIZER_SOURCE = FIXTURES / "tiny-gemma3"
IMAGES = FIXTURES / "images"
BOI, EOI, IMAGE_TOKEN = "<start_of_image>", "<end_of_image>", "<image_soft_token>"
TOKENS_PER_IMAGE = 4
GEN_TOKENS = 6

# Gemma 3's chat template, cut down: a turn's content is a string, or parts (an image is
# <start_of_image>, a text its trimmed text), as google/gemma-3-*-it's template renders them.
GEMMA3_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'assistant' %}{% set role = 'model' %}"
    "{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '\n' }}"
    "{% if message['content'] is string %}{{ message['content'] | trim }}{% else %}"
    "{% for item in message['content'] %}{% if item['type'] == 'image' %}{{ '<start_of_image>' }}"
    "{% elif item['type'] == 'text' %}{{ item['text'] | trim }}{% endif %}{% endfor %}{% endif %}"
    "{{ '<end_of_turn>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %}"
)

CASES = [
    dict(name="describe", text="<start_of_image>What is in this picture?", images=["wide45x37.png"]),
    dict(
        name="chat",
        messages=[
            {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Where is the red part?"}]}
        ],
        images=["big80x64.png"],
    ),
    dict(
        name="two_images",
        text="Compare <start_of_image> with <start_of_image> now.",
        images=["wide45x37.png", "big80x64.png"],
    ),
]
# Pan-and-scan: 45 x 37 (ratio 1.22) is cut into 2 crops side by side, 24 x 60 into 3 crops one
# above the other; the square 32 x 32 is not cut.
PAN_AND_SCAN_CASES = [
    CASES[0],
    dict(
        name="tall_and_square",
        text="Compare <start_of_image> with <start_of_image> now.",
        images=["tall24x60.png", "own32.png"],
    ),
]
if PAN_AND_SCAN:
    CASES = PAN_AND_SCAN_CASES
GENERATE_CASE = "describe"
# The pan-and-scan variant's settings: crops of 16 pixels at least (the processor's default is 256).
PAN_AND_SCAN_KWARGS = dict(
    do_pan_and_scan=True,
    pan_and_scan_min_crop_size=16,
    pan_and_scan_max_num_crops=4,
    pan_and_scan_min_ratio_to_activate=1.2,
)


def make_processor() -> Gemma3Processor:
    """tiny-gemma3's tokenizer with <start_of_image>, <end_of_image> and <image_soft_token> added
    as special tokens (the next ids, named as Gemma 3's tokenizer names them: boi_token, eoi_token,
    image_token), Gemma 3's PIL image processor at 32x32 (bilinear, no pan-and-scan), and
    Gemma3Processor with 4 image tokens per picture."""
    tok = AutoTokenizer.from_pretrained(
        TOKENIZER_SOURCE,
        extra_special_tokens={"boi_token": BOI, "eoi_token": EOI, "image_token": IMAGE_TOKEN},
    )
    assert [tok.boi_token_id, tok.eoi_token_id, tok.image_token_id] == [len(tok) - 3, len(tok) - 2, len(tok) - 1]
    tok.model_max_length = 128
    images = Gemma3ImageProcessorPil(
        size={"height": 32, "width": 32},
        resample=2,  # bilinear
        **(PAN_AND_SCAN_KWARGS if PAN_AND_SCAN else dict(do_pan_and_scan=False)),
        do_convert_rgb=True,
        image_mean=[0.5, 0.5, 0.5],
        image_std=[0.5, 0.5, 0.5],
    )
    return Gemma3Processor(
        image_processor=images, tokenizer=tok, chat_template=GEMMA3_TEMPLATE, image_seq_length=TOKENS_PER_IMAGE
    )


def make_config(tok) -> Gemma3Config:
    vision = SiglipVisionConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        image_size=32,
        patch_size=8,
        hidden_act="gelu_pytorch_tanh",
        layer_norm_eps=1e-6,
        vision_use_head=False,
    )
    text = Gemma3TextConfig(
        vocab_size=len(tok),
        hidden_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        num_hidden_layers=3,
        intermediate_size=96,
        max_position_embeddings=128,
        layer_types=["sliding_attention", "sliding_attention", "full_attention"],
        sliding_window=3,
        query_pre_attn_scalar=16,
        rms_norm_eps=1e-6,
        rope_parameters={
            "full_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": 1000.0},
        },
        tie_word_embeddings=True,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=None,
    )
    config = Gemma3Config(
        vision_config=vision,
        text_config=text,
        mm_tokens_per_image=TOKENS_PER_IMAGE,
        boi_token_index=tok.boi_token_id,
        eoi_token_index=tok.eoi_token_id,
        image_token_index=tok.image_token_id,
        tie_word_embeddings=True,
    )
    config._attn_implementation = "eager"
    return config


def save(model, processor: Gemma3Processor) -> None:
    if TARGET.exists():
        shutil.rmtree(TARGET)
    model.config.architectures = ["Gemma3ForConditionalGeneration"]
    model.save_pretrained(TARGET)
    processor.save_pretrained(TARGET)
    # As google's repositories: the image processor in preprocessor_config.json too.
    processor.image_processor.save_pretrained(TARGET)
    shutil.copyfile(TOKENIZER_SOURCE / "tokenizer.model", TARGET / "tokenizer.model")


def encode(processor, case: dict) -> dict:
    if "messages" in case:
        text = processor.apply_chat_template(case["messages"], add_generation_prompt=True, tokenize=False)
    else:
        text = case["text"]
    pictures = [Image.open(IMAGES / name) for name in case["images"]]
    # As processor.apply_chat_template(tokenize=True) does: no second BOS after the template's.
    specials = not text.startswith(processor.tokenizer.bos_token)
    # Gemma3Processor's own defaults (do_pan_and_scan False, crops of 256 pixels at least) override
    # what its image processor's file says: pan-and-scan is asked for in the call, with the file's
    # values (what attnviz reads from it).
    asked = PAN_AND_SCAN_KWARGS if PAN_AND_SCAN else {}
    enc = processor(images=pictures, text=text, return_tensors="pt", add_special_tokens=specials, **asked)
    # How many crops pan-and-scan cut from each picture (0: none), as the image processor says.
    crops = [int(n) for n in processor.image_processor(pictures, **asked)["num_crops"]]
    return dict(text=text, sizes=[list(p.size) for p in pictures], enc=enc, specials=specials, crops=crops)


class Runner:
    """One model's forward pass with everything the references need caught."""

    def __init__(self, model):
        self.model = model
        self.catcher = AttentionCatcher(model)
        inner = model.model
        self.hooks = vlmlib.Hooks(inner.language_model)
        inner.vision_tower.register_forward_hook(self.hooks.store("vision_out"))



    @torch.no_grad()
    def run(self, ids: torch.Tensor, types: torch.Tensor, pixels: torch.Tensor) -> dict:
        self.hooks.seen = {}
        dtype = next(self.model.parameters()).dtype
        with self.catcher.catching():
            out = self.model(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                token_type_ids=types,
                pixel_values=pixels.to(dtype),
                output_attentions=True,
                return_dict=True,
            )
        text = torch.stack([a[0] for a in out.attentions])
        features = torch.cat(list(out.image_outputs.pooler_output), dim=0)
        calls = self.catcher.calls
        vision_calls = [c["weights"] for c in calls if ".vision_tower." in c["name"]]
        text_calls = [c["weights"][0] for c in calls if ".language_model." in c["name"]]
        assert len(vision_calls) + len(text_calls) == len(calls), [c["name"] for c in calls]
        # Gemma3Model.get_image_features does not return the tower's attentions: they are the ones
        # caught inside its eager attention, [images, layers, heads, 16, 16].
        vision = torch.stack(vision_calls).transpose(0, 1)
        assert len(vision_calls) == self.model.config.vision_config.num_hidden_layers
        assert torch.equal(torch.stack(text_calls), text), "caught text weights differ"
        # The features are the projector applied to the tower's last hidden state (post_layernorm)
        # and are what the language model receives at the image token positions.
        (last,) = self.hooks.seen["vision_out"]
        assert torch.equal(self.model.model.multi_modal_projector(last).flatten(0, 1), features)
        (embeds,) = self.hooks.seen["inputs_embeds"]
        at_image = ids[0] == self.model.config.image_token_id
        assert int(at_image.sum()) == features.shape[0], (int(at_image.sum()), features.shape)
        assert torch.equal(embeds[0][at_image], features)
        (hidden,) = self.hooks.seen["lm_out"]
        return {
            "pixel_values": pixels,
            "vision_attentions": vision,
            "vision_last_hidden": last,
            "image_features": features,
            "attentions": text,
            "hidden": hidden[0],
            "logits_last": out.logits[0, -1],
        }


def check_blocks(attn: torch.Tensor, runs: list[list[int]], n: int, window: int, layer_types: list[str]) -> int:
    """Each picture's image tokens attend to the later image tokens of their run (within the
    sliding window on sliding layers) and to no later token outside it. Returns how many
    (layer, head, query, later key) weights inside runs are above 0."""
    later = 0
    inside = torch.zeros(n, n, dtype=torch.bool)
    for start, length in runs:
        inside[start : start + length, start : start + length] = True
    future = torch.ones(n, n, dtype=torch.bool).triu(1)
    for layer, kind in enumerate(layer_types):
        a = attn[layer]
        assert float(a[:, future & ~inside].abs().max()) == 0.0, f"layer {layer} sees a later token outside a run"
        allowed = future & inside
        if kind == "sliding_attention":
            q = torch.arange(n)[:, None]
            k = torch.arange(n)[None, :]
            allowed = allowed & (k > q - window)
        assert bool((a[:, allowed] > 0).all()), f"layer {layer}: an image token does not see its run"
        later += int((a[:, future & inside] > 0).sum())
    return later


def runs(positions: list[int]) -> list[list[int]]:
    out: list[list[int]] = []
    for p in positions:
        if out and out[-1][0] + out[-1][1] == p:
            out[-1][1] += 1
        else:
            out.append([p, 1])
    return out


@torch.no_grad()
def generate(model, runner: Runner, tok, enc, store: TensorStore) -> dict:
    ids, types, pixels = enc["input_ids"], enc["token_type_ids"], enc["pixel_values"]
    kwargs = dict(input_ids=ids, attention_mask=torch.ones_like(ids), token_type_ids=types, pixel_values=pixels)
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
    full_types = torch.cat([types, torch.zeros(1, len(seq) - len(prompt), dtype=types.dtype)], dim=1)
    full = runner.run(torch.tensor([seq]), full_types, pixels)
    vs_rerun = generate_vs_rerun(cached, {"self.attentions": full["attentions"]}, False)["self"]
    assert vs_rerun < 2e-6, vs_rerun
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
        n=len(seq),
        stopped_at_eos=bool(new) and new[-1] == model.config.text_config.eos_token_id,
        same_without_cache=True,
        generate_vs_rerun_max_abs=vs_rerun,
        tensors={
            "attentions": store.put(f"{key}.attentions", full["attentions"]),
            "logits_last": store.put(f"{key}.logits_last", full["logits_last"]),
        },
    )


# Picture sizes (width, height) whose crops the reference records, under the variant's settings
# and Gemma3Processor's defaults: square, barely long enough, long, tall, crops under the minimum.
BOX_SIZES = [(45, 37), (37, 45), (24, 60), (32, 32), (40, 34), (80, 64), (1000, 300), (300, 1000), (896, 896),
             (1200, 700), (2000, 500), (600, 200), (700, 260), (1031, 257), (5000, 300)]


def pan_and_scan_boxes(image_processor) -> list[dict]:
    """The crops Gemma3ImageProcessorPil.pan_and_scan cuts from pictures of BOX_SIZES, as
    [x, y, width, height]: each picture's first two channels hold every pixel's column and row, so
    a crop's corner says where it was cut from."""
    import numpy as np

    out = []
    for settings in (PAN_AND_SCAN_KWARGS, dict(Gemma3Processor.images_kwargs)):
        kwargs = {k: settings[k] for k in settings if k.startswith("pan_and_scan_")}
        for w, h in BOX_SIZES:
            xs, ys = np.meshgrid(np.arange(w, dtype=np.int32), np.arange(h, dtype=np.int32))
            picture = np.stack([xs, ys, xs])
            crops = image_processor.pan_and_scan(image=picture, **kwargs)
            boxes = [[int(c[0, 0, 0]), int(c[1, 0, 0]), int(c.shape[2]), int(c.shape[1])] for c in crops]
            out.append(dict(size=[w, h], settings=kwargs, boxes=boxes))
    return out


@torch.no_grad()
def same_as_built(built, loaded, enc) -> None:
    kwargs = dict(
        input_ids=enc["input_ids"],
        token_type_ids=enc["token_type_ids"],
        pixel_values=enc["pixel_values"],
        output_attentions=True,
    )
    a, b = built(**kwargs), loaded(**kwargs)
    assert torch.equal(a.logits, b.logits), "the saved checkpoint computes something else"
    assert torch.equal(a.image_outputs.last_hidden_state, b.image_outputs.last_hidden_state)
    for x, y in zip(a.attentions, b.attentions, strict=True):
        assert torch.equal(x, y), "the saved checkpoint's attention differs"


def load(dtype=torch.float32):
    return vlmlib.load(TARGET, Gemma3ForConditionalGeneration, dtype)


def summary(cfg) -> dict:
    top = {
        k: getattr(cfg, k)
        for k in ("model_type", "mm_tokens_per_image", "boi_token_index", "eoi_token_index", "image_token_index")
    }
    vision = cfg.vision_config
    top["vision_config"] = vlmlib.vision_summary(vision, "vision_use_head")
    top["text_config"] = summarise_config(cfg.text_config)
    top["text_config"]["layer_types"] = list(cfg.text_config.layer_types)
    return top


@torch.no_grad()
def main() -> None:
    setup_determinism(SEED)
    processor = make_processor()
    tok = processor.tokenizer
    built = Gemma3ForConditionalGeneration(make_config(tok)).eval()
    randomise(built, SEED, Gains())
    save(built, processor)

    processor = AutoProcessor.from_pretrained(TARGET)
    assert type(processor) is Gemma3Processor, type(processor)
    assert type(processor.image_processor) is Gemma3ImageProcessorPil, type(processor.image_processor)
    tok = processor.tokenizer
    model, model64 = load(), load(torch.float64)
    cfg = model.config
    image_token_id = cfg.image_token_id
    assert image_token_id == tok.image_token_id and cfg.boi_token_index == tok.boi_token_id
    keys = vlmlib.weight_keys(TARGET)
    runner, runner64 = Runner(model), Runner(model64)
    text_cfg = cfg.text_config

    store = TensorStore()
    cases, generations, spreads = [], [], []
    for case in CASES:
        encoded = encode(processor, case)
        enc = encoded["enc"]
        same_as_built(built, model, enc)
        ids, types = enc["input_ids"], enc["token_type_ids"]
        ref = runner.run(ids, types, enc["pixel_values"])
        ref64 = runner64.run(ids, types, enc["pixel_values"])
        id_list = ids[0].tolist()
        positions = [i for i, t in enumerate(id_list) if t == image_token_id]
        crops = encoded["crops"]
        frames = len(crops) + sum(crops)
        assert PAN_AND_SCAN or not any(crops), crops
        assert enc["pixel_values"].shape[0] == frames, (enc["pixel_values"].shape, crops)
        assert len(positions) == TOKENS_PER_IMAGE * frames == ref["image_features"].shape[0], case["name"]
        assert [i for i, t in enumerate(types[0].tolist()) if t == 1] == positions
        # The processor's text: each <start_of_image> written out as its framed run (a picture
        # cut by pan-and-scan: its whole run, then its crops' runs, in Gemma3Processor's words).
        full = f"\n\n{BOI}{IMAGE_TOKEN * TOKENS_PER_IMAGE}{EOI}\n\n"
        parts = encoded["text"].split(BOI)
        expanded = parts[0]
        for part, n in zip(parts[1:], crops, strict=True):
            if n:
                expanded += (
                    f"Here is the original image {full} and here are some crops to help you see better "
                    + " ".join([full] * n)
                )
            else:
                expanded += full
            expanded += part
        assert tok(expanded, add_special_tokens=encoded["specials"])["input_ids"] == id_list, case["name"]
        assert id_list.count(tok.bos_token_id) == 1, case["name"]
        image_runs = runs(positions)
        later = check_blocks(ref["attentions"], image_runs, len(id_list), text_cfg.sliding_window, text_cfg.layer_types)
        entry = dict(
            name=case["name"],
            text=encoded["text"],
            messages=case.get("messages"),
            images=case["images"],
            image_sizes=encoded["sizes"],
            crops=encoded["crops"],
            input_ids=id_list,
            token_type_ids=types[0].tolist(),
            tokens=tok.convert_ids_to_tokens(id_list),
            n=len(id_list),
            image_token_positions=positions,
            image_token_runs=image_runs,
            later_image_keys_seen=later,
            tensors={what: store.put(f"{case['name']}.{what}", value) for what, value in ref.items()},
            f32_vs_f64_max_abs={what: max_abs(ref[what], ref64[what]) for what in ref if what != "pixel_values"},
        )
        spreads.append(
            dict(
                case=case["name"],
                vision=vlmlib.spread(ref["vision_attentions"]),
                text=vlmlib.spread(ref["attentions"]),
            )
        )
        cases.append(entry)
        if case["name"] == GENERATE_CASE:
            generations.append(generate(model, runner, tok, enc, store))

    image_processor = processor.image_processor
    manifest = dict(
        generator="tests/reference/make_gemma3_vlm.py",
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
        image_token=dict(
            token=IMAGE_TOKEN,
            id=image_token_id,
            boi=[BOI, tok.boi_token_id],
            eoi=[EOI, tok.eoi_token_id],
            tokens_per_image=TOKENS_PER_IMAGE,
            full_image_sequence=processor.full_image_sequence,
        ),
        processor=dict(
            cls=type(processor).__name__,
            image_processor=type(image_processor).__name__,
            image_seq_length=processor.image_seq_length,
            size=dict(image_processor.size),
            resample=int(image_processor.resample),
            image_mean=list(image_processor.image_mean),
            image_std=list(image_processor.image_std),
            do_pan_and_scan=bool(image_processor.do_pan_and_scan),
            pan_and_scan_min_crop_size=image_processor.pan_and_scan_min_crop_size,
            pan_and_scan_max_num_crops=image_processor.pan_and_scan_max_num_crops,
            pan_and_scan_min_ratio_to_activate=image_processor.pan_and_scan_min_ratio_to_activate,
        ),
        chat_template=processor.chat_template,
        notes=NOTES,
        how=HOW,
        attention_spread=spreads,
        versions=dict(versions(), pillow=PIL.__version__),
        tensors=f"{NAME}.safetensors",
        cases=cases,
        generations=generations,
    )
    if PAN_AND_SCAN:
        manifest["pan_and_scan_boxes"] = pan_and_scan_boxes(image_processor)
    size = store.save(REFERENCE / f"{NAME}.safetensors")
    write_json(REFERENCE / f"{NAME}.json", manifest)
    counts = ", ".join(f"{c['name']} {c['n']}" for c in cases)
    print(
        f"{NAME}: {len(cases)} cases ({counts} tokens), {len(generations)} generation, {size / 1e3:.0f} kB; "
        f"later image keys seen {[c['later_image_keys_seen'] for c in cases]}; spread {spreads}",
        file=sys.stderr,
    )


NOTES = dict(
    layout=(
        "transformers 5.24 saves Gemma3ForConditionalGeneration as language_model.model.*, vision_tower.* "
        "(SigLIP without its vision_model. level) and multi_modal_projector.* (mm_input_projection_weight "
        "[vision hidden, text hidden], mm_soft_emb_norm.weight); the head is tied to the embeddings"
    ),
    image_tokens=(
        "Gemma3Processor replaces each <start_of_image> in the text by '\\n\\n<start_of_image>' + 4 x "
        "<image_soft_token> + '<end_of_image>\\n\\n' and then tokenizes the whole text (so the blank lines "
        "merge with the text around them as the tokenizer splits it); token_type_ids is 1 at the image tokens"
    ),
    projector=(
        "the tower's last_hidden_state (after post_layernorm; no pooling head), reshaped to its 4x4 patch "
        "grid, AvgPool2d(2, 2) to 2x2 = mm_tokens_per_image tokens (row-major), Gemma3RMSNorm (x (1 + w), "
        "eps vision layer_norm_eps), then matmul with mm_input_projection_weight"
    ),
    mask=(
        "with token_type_ids the language model's masks are create_masks_for_vision_model's: full layers "
        "causal OR same image run; sliding layers (window 3) that AND the window (kv > q - 3). generate() "
        "passes token_type_ids at the prefill only; later steps' queries are never in a run"
    ),
    processor=(
        "Without torchvision AutoProcessor picks Gemma3ImageProcessorPil: PIL bilinear resize to 32x32 "
        "(no crop, no pan-and-scan), rescale, normalise with mean = std = 0.5"
    ),
)
if PAN_AND_SCAN:
    NOTES["processor"] = (
        "Without torchvision AutoProcessor picks Gemma3ImageProcessorPil. With do_pan_and_scan: a picture "
        "whose longer side is at least 1.2 times the other is cut (before any resize, on the 8-bit picture, "
        "channels first) into num crops along its longer side, num = round-half-up(ratio) capped by "
        "floor(side / pan_and_scan_min_crop_size) and kept within [2, pan_and_scan_max_num_crops], each "
        "ceil(side / num) wide (the last one cut short by the edge), none when a crop side falls under "
        "the minimum; pixel_values holds the whole picture then its crops, each PIL bilinear resized to "
        "32x32, rescaled and normalised with mean = std = 0.5"
    )
    NOTES["image_tokens"] += (
        "; a picture with crops is written 'Here is the original image ' + its run + ' and here are some "
        "crops to help you see better ' + its crops' runs joined by spaces"
    )

HOW = (
    "AutoModelForImageTextToText.from_pretrained(attn_implementation='eager', dtype=float32), eval(); "
    "AutoProcessor(images=..., text=...) on the case's text (the chat template's for 'chat'), batch of one, "
    "no padding; input_ids, token_type_ids and pixel_values to the model, output_attentions=True. "
    "vision_attentions [images, vision layers, heads, 16, 16]; vision_last_hidden [images, 16, 32] the tower's "
    "last_hidden_state; image_features [images*4, 64] the projector's output in the order the image tokens "
    "take them; attentions [text layers, heads, n, n] over the whole expanded sequence; hidden [n, 64] the "
    "language model's last_hidden_state (after the final norm); logits_last [vocab]. The generation: "
    f"model.generate greedy (max_new_tokens {GEN_TOKENS}, KV cache) with the case's pixels and token_type_ids, "
    "the same without the cache, then one forward over prompt + generated tokens (token_type_ids 0 for the "
    "new ones) whose attentions and logits_last are stored"
)


if __name__ == "__main__":
    main()
