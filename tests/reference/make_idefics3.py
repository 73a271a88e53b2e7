#!/usr/bin/env python3
"""A tiny random SmolVLM checkpoint (`SmolVLMForConditionalGeneration`, `model_type` `smolvlm`: a
SigLIP-style vision tower whose positions are bucketed for any patch grid, the connector's pixel
shuffle and one linear map, and a Llama text model) with its processor, and Hugging Face
transformers' reference outputs for it (eager attention, float32).

    /path/to/venv/bin/python tests/reference/make_idefics3.py [--variant idefics3]

It writes tests/fixtures/tiny-smolvlm/ (config.json, generation_config.json and model.safetensors
as transformers saves them; the processor as SmolVLMProcessor.save_pretrained writes it) and
tests/reference/tiny-smolvlm.{json,safetensors}: for three prompts with pictures (one marked, one
through the chat template, two pictures), the processor's pixels (each picture split into tiles
of the tower's size plus the whole picture at that size: the "global" view), expanded token ids,
each tile's vision-tower attention, the connector's image features that replace the image tokens,
the language model's attention over the whole sequence, its last hidden state and the last
position's logits; and one greedy generation. `--variant idefics3` writes tiny-idefics3 the same
with Idefics3ForConditionalGeneration and a processor that does not split pictures
(`do_image_splitting` false: each picture resized to one tile, its run framed as the global
view's).

It also records, for patch grids of 1 to 64 per side, the position ids transformers' vision
embeddings give a full tile (`bucketize` of float32 fractions against a float32 `arange`: not the
identity for some sides, e.g. 19, 25, 29), from the embeddings module itself.

Weights are drawn as make_families.py draws them (its `randomise`), so a re-run with the same
versions rewrites every file byte for byte. The script checks itself: the saved folder loads back
with no missing or unexpected key and computes what the model built in memory computes; the
attention caught inside eager attention equals `output_attentions`; the image features are the
connector applied to the tower's last hidden state and are what the language model receives at
the image tokens; generate() with and without its KV cache picks the same tokens, and its attention
agrees with a re-run over the whole sequence.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import PIL
import torch
from PIL import Image
from tokenizers import AddedToken
from transformers import (
    AutoProcessor,
    AutoTokenizer,
    Idefics3Config,
    Idefics3ForConditionalGeneration,
    Idefics3Processor,
    LlamaConfig,
    SmolVLMConfig,
    SmolVLMForConditionalGeneration,
)
from transformers.models.idefics3.configuration_idefics3 import Idefics3VisionConfig
from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil
from transformers.models.idefics3.modeling_idefics3 import Idefics3VisionEmbeddings
from transformers.models.smolvlm.configuration_smolvlm import SmolVLMVisionConfig
from transformers.models.smolvlm.image_processing_pil_smolvlm import SmolVLMImageProcessorPil

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

SEED = 20261209
VARIANTS = {
    "smolvlm": dict(
        name="tiny-smolvlm",
        config=SmolVLMConfig,
        vision=SmolVLMVisionConfig,
        model=SmolVLMForConditionalGeneration,
        # SmolVLMProcessor needs torchvision for its video processor (not installed here); its
        # image path is Idefics3Processor's, copied (modular_smolvlm.py), so that one writes it.
        processor=Idefics3Processor,
        images=SmolVLMImageProcessorPil,
        split=True,
    ),
    "idefics3": dict(
        name="tiny-idefics3",
        config=Idefics3Config,
        vision=Idefics3VisionConfig,
        model=Idefics3ForConditionalGeneration,
        processor=Idefics3Processor,
        images=Idefics3ImageProcessorPil,
        # The other layout: each picture resized to one tile, not split, written as the global
        # view's run alone.
        split=False,
    ),
}
ARGS = sys.argv[1:]
VARIANT = ARGS[1] if len(ARGS) == 2 and ARGS[0] == "--variant" and ARGS[1] in VARIANTS else "smolvlm"
V = VARIANTS[VARIANT]
NAME = V["name"]
TARGET = FIXTURES / NAME
TOKENIZER_SOURCE = FIXTURES / "tiny-llama"
IMAGES = FIXTURES / "images"
IMAGE_TOKEN = "<image>"
# The tower sees 32 x 32 tiles of 8 x 8 patches (a 4 x 4 grid); the connector's pixel shuffle
# (scale 2) makes each tile 2 x 2 = 4 image tokens. A picture's longest side becomes 64 first,
# so a wide picture is 2 x 2 tiles and a tall one 2 rows of 1.
TILE, PATCH, SCALE, LONGEST = 32, 8, 2, 64
TOKENS_PER_TILE = (TILE // PATCH) ** 2 // SCALE**2
GEN_TOKENS = 6
TALL = "tall24x60.png"

# SmolVLM-256M-Instruct's chat template (its chat_template.json).
TEMPLATE = (
    "<|im_start|>{% for message in messages %}{{message['role'] | capitalize}}{% if message['content'][0]"
    "['type'] == 'image' %}{{':'}}{% else %}{{': '}}{% endif %}{% for line in message['content'] %}{% if "
    "line['type'] == 'text' %}{{line['text']}}{% elif line['type'] == 'image' %}{{ '<image>' }}{% endif %}"
    "{% endfor %}<end_of_utterance>\n{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}"
)

CASES = [
    dict(name="marked", text="<image>describe the picture", images=["wide45x37.png"]),
    dict(
        name="chat",
        messages=[
            {
                "role": "user",
                "content": [{"type": "image"}, {"type": "text", "text": "What is in it?"}],
            }
        ],
        images=[TALL],
    ),
    dict(name="two_images", text="<image>one <image>two: compare them", images=["wide45x37.png", TALL]),
]
GENERATE_CASE = "marked"
# SmolVLM's tokenizer has these as special tokens (Idefics3Processor would add the first three
# itself; SmolVLMProcessor expects them).
EXTRA_TOKENS = ["<fake_token_around_image>", "<image>", "<end_of_utterance>", "<global-img>"] + [f"<row_{r}_col_{c}>" for r in range(1, 7) for c in range(1, 7)]


def make_tall_picture() -> None:
    """tests/fixtures/images/tall24x60.png: a 24 x 60 RGB gradient (a picture taller than wide,
    which the processor splits into rows of one tile)."""
    y, x = np.mgrid[0:60, 0:24]
    rgb = np.stack([(y * 4) % 256, (x * 10) % 256, ((x + y) * 3) % 256], axis=-1).astype(np.uint8)
    Image.fromarray(rgb, "RGB").save(IMAGES / TALL)


def make_processor():
    """tiny-llama's tokenizer with SmolVLM's image tokens, the PIL image processor (LANCZOS
    resize of the longest side to 64, splitting into 32-pixel tiles plus the global view,
    mean = std = 0.5 as SmolVLM's) and the processor with 4 image tokens per tile."""
    tok = AutoTokenizer.from_pretrained(TOKENIZER_SOURCE)
    tok.add_tokens([AddedToken(t, special=True, normalized=False) for t in EXTRA_TOKENS], special_tokens=True)
    tok.model_max_length = 256
    images = V["images"](
        size={"longest_edge": LONGEST},
        max_image_size={"longest_edge": TILE},
        resample=1,  # LANCZOS
        do_image_splitting=V["split"],
        image_mean=[0.5, 0.5, 0.5],
        image_std=[0.5, 0.5, 0.5],
    )
    return V["processor"](image_processor=images, tokenizer=tok, image_seq_len=TOKENS_PER_TILE, chat_template=TEMPLATE)


def make_config(tok, image_token_id: int):
    vision = V["vision"](
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        image_size=TILE,
        patch_size=PATCH,
        hidden_act="gelu_pytorch_tanh",
        layer_norm_eps=1e-6,
    )
    text = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        rms_norm_eps=1e-5,
        rope_parameters=dict(rope_type="default", rope_theta=100000.0),
        tie_word_embeddings=False,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
    )
    config = V["config"](
        vision_config=vision.to_dict(),
        text_config=text.to_dict(),
        image_token_id=image_token_id,
        scale_factor=SCALE,
        tie_word_embeddings=False,
    )
    config._attn_implementation = "eager"
    return config


def save(model, processor) -> None:
    if TARGET.exists():
        shutil.rmtree(TARGET)
    model.config.architectures = [V["model"].__name__]
    model.save_pretrained(TARGET)
    processor.save_pretrained(TARGET)
    processor.image_processor.save_pretrained(TARGET)
    # As tiny-llava's: the SentencePiece model too (llama.cpp's converter reads it).
    shutil.copyfile(TOKENIZER_SOURCE / "tokenizer.model", TARGET / "tokenizer.model")


def prompt_of(processor, case: dict) -> str:
    if "messages" in case:
        return processor.apply_chat_template(case["messages"], add_generation_prompt=True, tokenize=False)
    return case["text"]


def encode(processor, case: dict) -> dict:
    text = prompt_of(processor, case)
    pictures = [Image.open(IMAGES / name).convert("RGB") for name in case["images"]]
    enc = processor(images=[pictures], text=[text], return_tensors="pt")
    # The processor drops each picture's tile rows and columns; its image processor gives them.
    info = processor.image_processor(images=[pictures], return_row_col_info=True)
    tiles = list(zip(info["rows"][0], info["cols"][0], strict=True))
    return dict(text=text, sizes=[list(p.size) for p in pictures], enc=enc, tiles=tiles)


class Runner:
    """One model's forward pass with everything the references need caught."""

    def __init__(self, model):
        self.model = model
        self.catcher = AttentionCatcher(model)
        inner = model.model
        self.hooks = vlmlib.Hooks(inner.text_model)
        inner.vision_model.register_forward_hook(self.hooks.store("vision_out"))

    @torch.no_grad()
    def run(self, ids: torch.Tensor, pixels: torch.Tensor, mask: torch.Tensor) -> dict:
        self.hooks.seen = {}
        dtype = next(self.model.parameters()).dtype
        with self.catcher.catching():
            out = self.model(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                pixel_values=pixels.to(dtype),
                pixel_attention_mask=mask,
                output_attentions=True,
                return_dict=True,
            )
        text = torch.stack([a[0] for a in out.attentions])
        calls = self.catcher.calls
        vision_calls = [c["weights"] for c in calls if ".vision_model." in c["name"]]
        text_calls = [c["weights"][0] for c in calls if ".text_model." in c["name"]]
        assert len(vision_calls) + len(text_calls) == len(calls), [c["name"] for c in calls]
        assert len(vision_calls) == self.model.config.vision_config.num_hidden_layers
        # [tiles, layers, heads, n, n]
        vision = torch.stack(vision_calls).transpose(0, 1)
        assert torch.equal(torch.stack(text_calls), text), "caught text weights differ"
        (last,) = self.hooks.seen["vision_out"]
        features = self.model.model.connector(last).flatten(0, 1)
        (embeds,) = self.hooks.seen["inputs_embeds"]
        at_image = ids[0] == self.model.config.image_token_id
        assert int(at_image.sum()) == features.shape[0], (int(at_image.sum()), features.shape)
        assert torch.equal(embeds[0][at_image], features)
        (hidden,) = self.hooks.seen["lm_out"]
        return {
            "pixel_values": pixels[0],
            "vision_attentions": vision,
            "vision_last_hidden": last,
            "image_features": features,
            "attentions": text,
            "hidden": hidden[0],
            "logits_last": out.logits[0, -1],
        }


def expected_text(case_text: str, tiles: list[tuple[int, int]]) -> str:
    """The processor's expansion of each <image> mark, written here from its documented layout:
    per row, each tile as <fake_token_around_image><row_r_col_c> and its image tokens, a newline
    after each row, then a newline and the global view framed by <fake_token_around_image>."""
    parts = case_text.split(IMAGE_TOKEN)
    out = parts[0]
    for (rows, cols), part in zip(tiles, parts[1:], strict=True):
        run = IMAGE_TOKEN * TOKENS_PER_TILE
        text = ""
        for r in range(rows):
            for c in range(cols):
                text += f"<fake_token_around_image><row_{r + 1}_col_{c + 1}>{run}"
            text += "\n"
        if rows * cols:
            text += "\n"
        text += f"<fake_token_around_image><global-img>{run}<fake_token_around_image>"
        out += text + part
    return out


@torch.no_grad()
def position_table() -> dict:
    """For each side 1..64, the position ids of a full tile's patches (row-major), from
    Idefics3VisionEmbeddings: patch embeddings zeroed, position embedding i = i."""
    table = {}
    for side in range(1, 65):
        cfg = Idefics3VisionConfig(hidden_size=1, image_size=side, patch_size=1, num_attention_heads=1)
        emb = Idefics3VisionEmbeddings(cfg)
        emb.patch_embedding.weight.zero_()
        emb.patch_embedding.bias.zero_()
        emb.position_embedding.weight.copy_(torch.arange(side * side, dtype=torch.float32)[:, None])
        mask = torch.ones(1, side, side, dtype=torch.bool)
        ids = emb(torch.zeros(1, 3, side, side), mask)[0, :, 0].round().long().tolist()
        if ids != list(range(side * side)):
            table[str(side)] = ids
    return table


@torch.no_grad()
def generate(model, runner: Runner, tok, enc, store: TensorStore) -> dict:
    ids, pixels, mask = enc["input_ids"], enc["pixel_values"], enc["pixel_attention_mask"]
    kwargs = dict(input_ids=ids, attention_mask=torch.ones_like(ids), pixel_values=pixels, pixel_attention_mask=mask)
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
    full = runner.run(torch.tensor([seq]), pixels, mask)
    vs_rerun = generate_vs_rerun(cached, {"self.attentions": full["attentions"]}, False)["self"]
    assert vs_rerun < 1e-5, vs_rerun
    new = seq[len(prompt) :]
    key = f"gen_{GENERATE_CASE}"
    cfg = model.config.text_config
    return dict(
        name=key,
        case=GENERATE_CASE,
        prompt_len=len(prompt),
        generated_ids=new,
        generated_tokens=tok.convert_ids_to_tokens(new),
        generated_text=tok.decode(new, skip_special_tokens=False),
        sequence=seq,
        n=len(seq),
        stopped_at_eos=bool(new) and new[-1] == cfg.eos_token_id,
        same_without_cache=True,
        generate_vs_rerun_max_abs=vs_rerun,
        tensors={
            "attentions": store.put(f"{key}.attentions", full["attentions"]),
            "logits_last": store.put(f"{key}.logits_last", full["logits_last"]),
        },
    )


def image_runs(ids: list[int], image_token_id: int) -> list[list[int]]:
    runs = []
    for i, t in enumerate(ids):
        if t != image_token_id:
            continue
        if runs and runs[-1][0] + runs[-1][1] == i:
            runs[-1][1] += 1
        else:
            runs.append([i, 1])
    return runs


@torch.no_grad()
def main() -> None:
    if ARGS and not (len(ARGS) == 2 and ARGS[0] == "--variant" and ARGS[1] in VARIANTS):
        sys.exit(f"usage: make_idefics3.py [--variant {'|'.join(VARIANTS)}]")
    setup_determinism(SEED)
    make_tall_picture()
    processor = make_processor()
    tok = processor.tokenizer
    built = V["model"](make_config(tok, processor.image_token_id)).eval()
    randomise(built, SEED, Gains())
    save(built, processor)

    processor = AutoProcessor.from_pretrained(TARGET)
    assert type(processor) is V["processor"], type(processor)
    assert type(processor.image_processor) is V["images"], type(processor.image_processor)
    tok = processor.tokenizer
    model = vlmlib.load(TARGET, V["model"])
    model64 = vlmlib.load(TARGET, V["model"], torch.float64)
    cfg = model.config
    image_token_id = cfg.image_token_id
    assert image_token_id == processor.image_token_id
    runner, runner64 = Runner(model), Runner(model64)

    store = TensorStore()
    cases, generations, spreads = [], [], []
    for case in CASES:
        encoded = encode(processor, case)
        enc = encoded["enc"]
        vlmlib.same_as_built(
            built,
            model,
            input_ids=enc["input_ids"],
            pixel_values=enc["pixel_values"],
            pixel_attention_mask=enc["pixel_attention_mask"],
        )
        ids = enc["input_ids"]
        id_list = ids[0].tolist()
        tiles = encoded["tiles"]
        frames = sum(r * c + 1 for r, c in tiles)
        assert enc["pixel_values"].shape[1] == frames, (enc["pixel_values"].shape, tiles)
        assert bool(enc["pixel_attention_mask"].all()), "every tile is whole"
        want = tok(expected_text(encoded["text"], tiles))["input_ids"]
        assert want == id_list, (case["name"], tok.convert_ids_to_tokens(id_list))
        runs = image_runs(id_list, image_token_id)
        assert [r[1] for r in runs] == [TOKENS_PER_TILE] * frames, runs
        ref = runner.run(ids, enc["pixel_values"], enc["pixel_attention_mask"])
        ref64 = runner64.run(ids, enc["pixel_values"], enc["pixel_attention_mask"])
        n = len(id_list)
        entry = dict(
            name=case["name"],
            text=encoded["text"] if "messages" not in case else None,
            messages=case.get("messages"),
            prompt=encoded["text"],
            images=case["images"],
            image_sizes=encoded["sizes"],
            tiles=[list(t) for t in tiles],
            input_ids=id_list,
            tokens=tok.convert_ids_to_tokens(id_list),
            n=n,
            image_token_runs=runs,
            tensors={what: store.put(f"{case['name']}.{what}", value) for what, value in ref.items()},
            f32_vs_f64_max_abs={what: max_abs(ref[what], ref64[what]) for what in ref if what != "pixel_values"},
        )
        spreads.append(
            dict(case=case["name"], vision=vlmlib.spread(ref["vision_attentions"]), text=vlmlib.spread(ref["attentions"]))
        )
        cases.append(entry)
        if case["name"] == GENERATE_CASE:
            generations.append(generate(model, runner, tok, enc, store))

    image_processor = processor.image_processor
    top = {k: getattr(cfg, k) for k in ("model_type", "image_token_id", "scale_factor")}
    top["vision_config"] = vlmlib.vision_summary(cfg.vision_config)
    top["text_config"] = summarise_config(cfg.text_config)
    manifest = dict(
        generator="tests/reference/make_idefics3.py",
        model=NAME,
        model_type=cfg.model_type,
        architectures=cfg.architectures,
        seed=SEED,
        fixture=dict(
            path=rel(TARGET),
            files=sorted(p.name for p in TARGET.iterdir()),
            weights="model.safetensors",
            keys=vlmlib.weight_keys(TARGET),
        ),
        config=top,
        image_token=dict(token=IMAGE_TOKEN, id=image_token_id, tokens_per_tile=TOKENS_PER_TILE),
        processor=dict(
            cls=type(processor).__name__,
            image_processor=type(image_processor).__name__,
            image_seq_len=processor.image_seq_len,
            size=dict(image_processor.size),
            max_image_size=dict(image_processor.max_image_size),
            resample=int(image_processor.resample),
            image_mean=list(image_processor.image_mean),
            image_std=list(image_processor.image_std),
        ),
        chat_template=processor.chat_template,
        vision_position_ids_not_identity=position_table(),
        notes=NOTES,
        attention_spread=spreads,
        versions=dict(versions(), pillow=PIL.__version__),
        tensors=f"{NAME}.safetensors",
        cases=cases,
        generations=generations,
    )
    size = store.save(REFERENCE / f"{NAME}.safetensors")
    write_json(REFERENCE / f"{NAME}.json", manifest)
    counts = ", ".join(f"{c['name']} {c['n']}" for c in cases)
    print(f"{NAME}: {len(cases)} cases ({counts} tokens), {size / 1e3:.0f} kB; spread {spreads}", file=sys.stderr)


NOTES = dict(
    layout=(
        "transformers 5.24 saves the model as model.vision_model.* (embeddings, encoder, post_layernorm), "
        "model.connector.modality_projection.proj.weight (no bias), model.text_model.* (a LlamaModel) and "
        "lm_head.weight"
    ),
    processor=(
        "PIL LANCZOS resize of the longest side to size.longest_edge (the other side truncated, rounded up to "
        "even), then to multiples of max_image_size.longest_edge (LANCZOS again), split into tiles of that side "
        "row by row, plus the whole picture resized (LANCZOS) to one tile: the global view, last; rescale, "
        "normalise; every tile is whole (pixel_attention_mask all ones)"
    ),
    image_tokens=(
        "each <image> mark becomes, per row, <fake_token_around_image><row_r_col_c> and image_seq_len <image> for "
        "each tile, a newline after each row, then a newline, <fake_token_around_image><global-img>, the global "
        "view's image tokens and <fake_token_around_image>; the tokenizer adds BOS"
    ),
    connector=(
        "pixel shuffle with scale_factor 2 (each image token the 2 x 2 patches of its cell, concatenated row by "
        "row) then one Linear without bias"
    ),
    positions=(
        "vision position ids: bucketize(h / side, arange(1/side, 1, 1/side), right=True) per row and column, "
        "in float32; vision_position_ids_not_identity lists the sides 1..64 where a full tile's ids are not "
        "0..side^2-1"
    ),
)


if __name__ == "__main__":
    main()
