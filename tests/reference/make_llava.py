#!/usr/bin/env python3
"""A tiny random LLaVA-1.5 checkpoint (`LlavaForConditionalGeneration`, `model_type` `llava`: a
CLIP vision tower, a two-layer GELU projector and a Llama language model) with its processor, and
Hugging Face transformers' reference outputs for it (eager attention, float32).

    .cache/venv-ref/bin/python tests/reference/make_llava.py [--variant full]

It writes tests/fixtures/tiny-llava/ (config.json, generation_config.json and model.safetensors as
transformers saves them; the processor as LlavaProcessor.save_pretrained writes it, plus the files
a llava-hf/llava-1.5-*-hf repository has beside them: preprocessor_config.json, tokenizer.model,
added_tokens.json, special_tokens_map.json) and tests/reference/tiny-llava.{json,safetensors}:
for three prompts with pictures from tests/fixtures/images, the processor's pixels and expanded
token ids, the vision tower's attention, the projected image features that replace the `<image>`
tokens, the language model's attention over the whole sequence, its last hidden state and the last
position's logits; and one greedy generation. tests/reference/README.md describes the files.

Weights are drawn as make_families.py draws them (its `randomise`, numpy PCG64 from a fixed seed),
so a re-run with the same versions rewrites every file byte for byte. The script checks itself:
the saved folder loads back (AutoModelForImageTextToText, AutoProcessor) with no missing or
unexpected key and computes exactly what the model built in memory computes; the attention caught
inside eager attention equals `output_attentions`; the image features are the projector applied
to the output of vision layer `vision_feature_layer` without CLS, and are what the language model
receives at the `<image>` positions; generate() with and without its KV cache picks the same
tokens, and its per-step attention agrees with a re-run over the whole sequence.

`--variant full` writes tests/fixtures/tiny-llava-full/ and tests/reference/tiny-llava-full.*
instead: the other code paths of LLaVA, as llava-hf-style checkpoints combine them. The
`full` selection strategy (the class token kept: 17 image tokens per picture), two feature layers
concatenated feature-wise (`vision_feature_layer` [-3, -1]), a projector without biases, a Mistral
language model whose `sliding_window` (16) is shorter than the sequences, and the weights in
llava-hf's key layout (`vision_tower.vision_model.*`; the script renames them after saving and
checks that the renamed file loads with no missing or unexpected key and computes the same). Two
cases (one picture, two pictures), no generation.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import PIL
import torch
from PIL import Image
from transformers import (
    AutoImageProcessor,
    AutoModelForImageTextToText,
    AutoProcessor,
    AutoTokenizer,
    CLIPVisionConfig,
    LlamaConfig,
    LlavaConfig,
    LlavaForConditionalGeneration,
    LlavaProcessor,
    MistralConfig,
)
from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil
from tokenizers import AddedToken

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

SEED = 20261203
NAME = "tiny-llava"
TARGET = FIXTURES / NAME
TOKENIZER_SOURCE = FIXTURES / "tiny-llama"
IMAGES = FIXTURES / "images"
IMAGE_TOKEN = "<image>"
GEN_TOKENS = 8
# The tokenizer_config.json settings of tiny-llama that transformers 5 leaves out when it saves
# (without them tokenizer.model alone adds no BOS), written back as make_families.py does.
KEPT_TOKENIZER_SETTINGS = ("add_bos_token", "add_eos_token", "legacy")

# llava-hf/llava-1.5-7b-hf's chat template (its chat_template.json): images first, then text.
LLAVA_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] != 'system' %}{{ message['role'].upper() + ': '}}"
    "{% endif %}{# Render all images first #}{% for content in message['content'] | selectattr('type', "
    "'equalto', 'image') %}{{ '<image>\n' }}{% endfor %}{# Render all text next #}{% if message['role'] != "
    "'assistant' %}{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
    "{{ content['text'] + ' '}}{% endfor %}{% else %}{% for content in message['content'] | "
    "selectattr('type', 'equalto', 'text') %}{% generation %}{{ content['text'] + ' '}}{% endgeneration %}"
    "{% endfor %}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ 'ASSISTANT:' }}{% endif %}"
)

CASES = [
    dict(name="describe", text="USER: <image>\nWhat is in this picture? ASSISTANT:", images=["wide45x37.png"]),
    dict(
        name="chat",
        messages=[
            {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Where is the red part?"}]}
        ],
        images=["big80x64.png"],
    ),
    dict(
        name="two_images",
        text="USER: <image>\n<image>\nCompare them. ASSISTANT:",
        images=["wide45x37.png", "big80x64.png"],
    ),
]
GENERATE_CASE = "describe"


@dataclass(frozen=True)
class Variant:
    """What distinguishes one tiny LLaVA from the other."""

    name: str
    strategy: str
    feature_layer: int | list[int]
    projector_bias: bool
    text_type: str
    # llava-hf's key layout (vision_tower.vision_model.*) rather than the one 5.24 saves.
    hub_layout: bool
    cases: tuple[str, ...]
    generate_case: str | None

    @property
    def tokens_per_image(self) -> int:
        # (32/8)^2 patches + the class token, which the 'default' strategy drops.
        return 16 + 1 - (self.strategy == "default")

    @property
    def skip(self) -> int:
        return 1 if self.strategy == "default" else 0


VARIANTS = {
    "default": Variant(
        name="tiny-llava",
        strategy="default",
        feature_layer=-2,
        projector_bias=True,
        text_type="llama",
        hub_layout=False,
        cases=("describe", "chat", "two_images"),
        generate_case=GENERATE_CASE,
    ),
    "full": Variant(
        name="tiny-llava-full",
        strategy="full",
        feature_layer=[-3, -1],
        projector_bias=False,
        text_type="mistral",
        hub_layout=True,
        cases=("describe", "two_images"),
        generate_case=None,
    ),
}
V = VARIANTS["default"]
SLIDING_WINDOW = 16


# --------------------------------------------------------------------------------------------
# Building
# --------------------------------------------------------------------------------------------


def make_processor() -> LlavaProcessor:
    """tiny-llama's tokenizer with `<image>` added as a special token (the next id, as llava-hf
    adds it after Llama's 32000), CLIP's PIL image processor at 32 px, and LlavaProcessor's
    settings of llava-1.5 (patch size, CLS counted then dropped)."""
    tok = AutoTokenizer.from_pretrained(TOKENIZER_SOURCE)
    added = tok.add_tokens([AddedToken(IMAGE_TOKEN, special=True, normalized=False)], special_tokens=True)
    assert added == 1 and tok.convert_tokens_to_ids(IMAGE_TOKEN) == len(tok) - 1
    tok.model_max_length = 128
    images = CLIPImageProcessorPil(
        size={"shortest_edge": 32},
        crop_size={"height": 32, "width": 32},
        resample=3,  # bicubic
        do_center_crop=True,
        do_convert_rgb=True,
    )
    return LlavaProcessor(
        image_processor=images,
        tokenizer=tok,
        patch_size=8,
        vision_feature_select_strategy=V.strategy,
        num_additional_image_tokens=1,
        chat_template=LLAVA_TEMPLATE,
    )


def make_config(image_token_id: int, vocab_size: int) -> LlavaConfig:
    vision = CLIPVisionConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=3,
        num_attention_heads=4,
        image_size=32,
        patch_size=8,
        hidden_act="quick_gelu",
        layer_norm_eps=1e-5,
    )
    text_class = {"llama": LlamaConfig, "mistral": MistralConfig}[V.text_type]
    extra = {"sliding_window": SLIDING_WINDOW} if V.text_type == "mistral" else {}
    text = text_class(
        vocab_size=vocab_size,
        hidden_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        num_hidden_layers=2,
        intermediate_size=96,
        max_position_embeddings=128,
        rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": 20000.0},
        tie_word_embeddings=False,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=None,
        **extra,
    )
    config = LlavaConfig(
        vision_config=vision,
        text_config=text,
        image_token_index=image_token_id,
        image_seq_length=V.tokens_per_image,
        projector_hidden_act="gelu",
        vision_feature_select_strategy=V.strategy,
        vision_feature_layer=V.feature_layer,
        multimodal_projector_bias=V.projector_bias,
        tie_word_embeddings=False,
    )
    config._attn_implementation = "eager"
    return config


def save(model, processor: LlavaProcessor) -> None:
    if TARGET.exists():
        shutil.rmtree(TARGET)
    model.config.architectures = ["LlavaForConditionalGeneration"]
    model.save_pretrained(TARGET)
    processor.save_pretrained(TARGET)
    # transformers 5 nests the image processor in processor_config.json; llava-hf's repositories
    # (written by 4.x) have it in preprocessor_config.json, which 5.24 still reads.
    processor.image_processor.save_pretrained(TARGET)
    tok = processor.tokenizer
    shutil.copyfile(TOKENIZER_SOURCE / "tokenizer.model", TARGET / "tokenizer.model")
    write_json(TARGET / "added_tokens.json", {IMAGE_TOKEN: tok.convert_tokens_to_ids(IMAGE_TOKEN)})
    source = json.loads((TOKENIZER_SOURCE / "tokenizer_config.json").read_text(encoding="utf-8"))
    saved = json.loads((TARGET / "tokenizer_config.json").read_text(encoding="utf-8"))
    missing = {k: source[k] for k in KEPT_TOKENIZER_SETTINGS if k in source and k not in saved}
    if missing:
        write_json(TARGET / "tokenizer_config.json", dict(sorted({**saved, **missing}.items())))
    special = {k: v for k, v in sorted(tok.special_tokens_map.items()) if v is not None and v != []}
    write_json(TARGET / "special_tokens_map.json", special)
    if V.hub_layout:
        from safetensors.torch import load_file, save_file

        weights = TARGET / "model.safetensors"
        save_file(relayout(load_file(weights), hub=True), weights, metadata={"format": "pt"})


def relayout(tensors: dict, hub: bool) -> dict:
    """The weights with the vision tower's keys in llava-hf's layout (`vision_tower.vision_model.*`,
    hub) or in the one transformers 5.24 saves (`vision_tower.*`)."""
    old, new = ("vision_tower.", "vision_tower.vision_model.")
    if not hub:
        old, new = new, old
    out = {}
    for k, v in tensors.items():
        if k.startswith(old) and (not hub or not k.startswith(new)):
            k = new + k[len(old):]
        out[k] = v
    return out


# --------------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------------


def encode(processor, case: dict) -> dict:
    """The prompt text (the chat template's, for a case with messages) and the processor's output."""
    if "messages" in case:
        text = processor.apply_chat_template(case["messages"], add_generation_prompt=True, tokenize=False)
    else:
        text = case["text"]
    pictures = [Image.open(IMAGES / name) for name in case["images"]]
    enc = processor(images=pictures, text=text, return_tensors="pt")
    return dict(text=text, sizes=[list(p.size) for p in pictures], enc=enc)


class Runner:
    """One model's forward pass with everything the references need caught."""

    def __init__(self, model):
        self.model = model
        self.catcher = AttentionCatcher(model)
        inner = model.model
        self.hooks = vlmlib.Hooks(inner.language_model)
        feature_layer = model.config.vision_feature_layer
        feature_layers = [feature_layer] if isinstance(feature_layer, int) else list(feature_layer)
        layers = inner.vision_tower.encoder.layers
        # hidden_states[0] is the encoder's input (embeddings after pre_layrnorm), [i + 1] layer i's
        # output: index -2 of 1 + L states is layer L - 2's output.
        states = len(layers) + 1
        self.feature_keys = []
        for f in feature_layers:
            index = (f % states) - 1
            assert 0 <= index < len(layers), feature_layer
            key = f"vision_layer_{index}"
            if key not in self.feature_keys:
                layers[index].register_forward_hook(self.hooks.store(key))
            self.feature_keys.append(key)



    @torch.no_grad()
    def run(self, ids: torch.Tensor, pixels: torch.Tensor) -> dict:
        self.hooks.seen = {}
        dtype = next(self.model.parameters()).dtype
        with self.catcher.catching():
            out = self.model(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                pixel_values=pixels.to(dtype),
                output_attentions=True,
                return_dict=True,
            )
        vision = torch.stack([a for a in out.image_outputs.attentions]).transpose(0, 1)  # [images, layers, ...]
        text = torch.stack([a[0] for a in out.attentions])
        features = torch.cat(list(out.image_outputs.pooler_output), dim=0)
        calls = self.catcher.calls
        vision_calls = [c["weights"] for c in calls if ".vision_tower." in c["name"]]
        text_calls = [c["weights"][0] for c in calls if ".language_model." in c["name"]]
        assert len(vision_calls) + len(text_calls) == len(calls), [c["name"] for c in calls]
        assert torch.equal(torch.stack(vision_calls).transpose(0, 1), vision), "caught vision weights differ"
        assert torch.equal(torch.stack(text_calls), text), "caught text weights differ"
        # The image features are the projector applied to the chosen layers' outputs (side by side,
        # without CLS under 'default'), and are what the language model receives at the image token
        # positions.
        chosen = []
        for key in self.feature_keys:
            (state,) = self.hooks.seen[key]
            chosen.append(state[:, V.skip :])
        # (one stage is not copied, as transformers does not: a copy could round differently)
        selected = chosen[0] if len(chosen) == 1 else torch.cat(chosen, dim=-1)
        assert torch.equal(self.model.model.multi_modal_projector(selected).flatten(0, 1), features)
        (embeds,) = self.hooks.seen["inputs_embeds"]
        at_image = ids[0] == self.model.config.image_token_id
        assert int(at_image.sum()) == features.shape[0], (int(at_image.sum()), features.shape)
        assert torch.equal(embeds[0][at_image], features)
        assert torch.equal(embeds[0][~at_image], self.model.get_input_embeddings()(ids[0][~at_image]))
        (hidden,) = self.hooks.seen["lm_out"]
        return {
            "pixel_values": pixels,
            "vision_attentions": vision,
            "vision_features": selected,
            "image_features": features,
            "attentions": text,
            "hidden": hidden[0],
            "logits_last": out.logits[0, -1],
        }


@torch.no_grad()
def generate(model, runner: Runner, tok, ids, pixels, store: TensorStore) -> dict:
    """Greedy generation with the KV cache, checked against generation without it and against
    one forward pass over the whole sequence (whose attention and logits are stored)."""
    kwargs = dict(input_ids=ids, attention_mask=torch.ones_like(ids), pixel_values=pixels)
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
    full = runner.run(torch.tensor([seq]), pixels)
    vs_rerun = generate_vs_rerun(cached, {"self.attentions": full["attentions"]}, False)["self"]
    assert vs_rerun < 2e-6, vs_rerun
    new = seq[len(prompt):]
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


# --------------------------------------------------------------------------------------------
# Checks of the saved folder
# --------------------------------------------------------------------------------------------


@torch.no_grad()
def same_as_built(built, loaded, enc) -> None:
    kwargs = dict(input_ids=enc["input_ids"], pixel_values=enc["pixel_values"], output_attentions=True)
    a, b = built(**kwargs), loaded(**kwargs)
    assert torch.equal(a.logits, b.logits), "the saved checkpoint computes something else"
    for x, y in zip(a.attentions + a.image_outputs.attentions, b.attentions + b.image_outputs.attentions, strict=True):
        assert torch.equal(x, y), "the saved checkpoint's attention differs"


def check_processor_files(processor, cases: list[dict]) -> None:
    """The hub-style files alone give the processor's output: preprocessor_config.json (no
    processor_config.json) the pixels, tokenizer.model + added_tokens.json (no tokenizer.json)
    the ids."""
    with tempfile.TemporaryDirectory() as tmp:
        for path in TARGET.iterdir():
            if path.name not in ("tokenizer.json", "processor_config.json"):
                shutil.copyfile(path, Path(tmp) / path.name)
        raw = AutoTokenizer.from_pretrained(tmp)
        images = AutoImageProcessor.from_pretrained(tmp)
    assert type(images) is CLIPImageProcessorPil, type(images)
    for case in cases:
        enc = encode(processor, case)
        pictures = [Image.open(IMAGES / name) for name in case["images"]]
        assert torch.equal(images(pictures, return_tensors="pt")["pixel_values"], enc["enc"]["pixel_values"])
        # The processor expands each <image> to 16 (17 under 'full') and tokenizes: the raw files
        # give those ids.
        expanded = enc["text"].replace(IMAGE_TOKEN, IMAGE_TOKEN * V.tokens_per_image)
        assert raw(expanded)["input_ids"] == enc["enc"]["input_ids"][0].tolist(), case["name"]
        assert raw(enc["text"])["input_ids"] == processor.tokenizer(enc["text"])["input_ids"], case["name"]


def hub_layout_loads(loaded, keys: list[str]) -> bool:
    """llava-hf's checkpoints (written by transformers 4.x) spell the vision tower
    `vision_tower.vision_model.*`; 5.24 saves `vision_tower.*`. Both must load to the same model
    (the fixture is in one layout, the check renames it to the other)."""
    from safetensors.torch import load_file, save_file

    tensors = load_file(TARGET / "model.safetensors")
    renamed = relayout(tensors, hub=not V.hub_layout)
    assert renamed.keys() != tensors.keys()
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copyfile(TARGET / "config.json", Path(tmp) / "config.json")
        save_file(renamed, Path(tmp) / "model.safetensors", metadata={"format": "pt"})
        hub, info = AutoModelForImageTextToText.from_pretrained(
            tmp, attn_implementation="eager", dtype=torch.float32, output_loading_info=True
        )
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
    hub_keys = renamed if not V.hub_layout else tensors
    assert sum(k.startswith("vision_tower.vision_model.") for k in hub_keys) == sum(
        k.startswith("vision_tower.") for k in keys
    )
    a, b = loaded.state_dict(), hub.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    return True


def load(dtype=torch.float32):
    return vlmlib.load(TARGET, LlavaForConditionalGeneration, dtype)


# --------------------------------------------------------------------------------------------
# The references
# --------------------------------------------------------------------------------------------


def summary(cfg) -> dict:
    top = {
        k: getattr(cfg, k)
        for k in (
            "model_type",
            "image_token_index",
            "image_seq_length",
            "vision_feature_layer",
            "vision_feature_select_strategy",
            "projector_hidden_act",
            "multimodal_projector_bias",
            "tie_word_embeddings",
        )
    }
    vision = cfg.vision_config
    top["vision_config"] = vlmlib.vision_summary(vision)
    top["text_config"] = summarise_config(cfg.text_config)
    return top


@torch.no_grad()
def main() -> None:
    global V, NAME, TARGET
    args = sys.argv[1:]
    if args and args[0] == "--variant" and len(args) == 2 and args[1] in VARIANTS:
        V = VARIANTS[args[1]]
    elif args:
        sys.exit(f"usage: make_llava.py [--variant {'|'.join(VARIANTS)}]")
    NAME, TARGET = V.name, FIXTURES / V.name
    setup_determinism(SEED)
    processor = make_processor()
    tok = processor.tokenizer
    image_token_id = tok.convert_tokens_to_ids(IMAGE_TOKEN)
    built = LlavaForConditionalGeneration(make_config(image_token_id, len(tok))).eval()
    randomise(built, SEED, Gains())
    save(built, processor)

    processor = AutoProcessor.from_pretrained(TARGET)
    assert type(processor) is LlavaProcessor, type(processor)
    assert type(processor.image_processor) is CLIPImageProcessorPil, type(processor.image_processor)
    assert processor.image_token_id == image_token_id and processor.chat_template == LLAVA_TEMPLATE
    tok = processor.tokenizer
    model, model64 = load(), load(torch.float64)
    cfg = model.config
    assert cfg.image_token_id == cfg.image_token_index == image_token_id
    keys = vlmlib.weight_keys(TARGET)
    if V.hub_layout:
        prefixes = ("vision_tower.vision_model.", "language_model.model.", "multi_modal_projector.")
        assert all(k.startswith(prefixes) or k == "language_model.lm_head.weight" for k in keys), keys
        assert "language_model.lm_head.weight" in keys
    hub_ok = hub_layout_loads(model, keys)
    cases_run = [c for c in CASES if c["name"] in V.cases]
    check_processor_files(processor, cases_run)
    runner, runner64 = Runner(model), Runner(model64)

    store = TensorStore()
    cases, generations, spreads = [], [], []
    for case in cases_run:
        encoded = encode(processor, case)
        enc = encoded["enc"]
        same_as_built(built, model, enc)
        ids = enc["input_ids"]
        ref, ref64 = runner.run(ids, enc["pixel_values"]), runner64.run(ids, enc["pixel_values"])
        id_list = ids[0].tolist()
        positions = [i for i, t in enumerate(id_list) if t == image_token_id]
        n_images = len(case["images"])
        per_image = V.tokens_per_image
        assert len(positions) == per_image * n_images == ref["image_features"].shape[0], (case["name"], positions)
        entry = dict(
            name=case["name"],
            text=encoded["text"],
            messages=case.get("messages"),
            images=case["images"],
            image_sizes=encoded["sizes"],
            input_ids=id_list,
            tokens=tok.convert_ids_to_tokens(id_list),
            n=len(id_list),
            image_token_positions=positions,
            image_token_runs=runs(positions),
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
        if case["name"] == V.generate_case:
            generations.append(generate(model, runner, tok, ids, enc["pixel_values"], store))

    manifest = dict(
        generator="tests/reference/make_llava.py",
        model=NAME,
        model_type=cfg.model_type,
        architectures=cfg.architectures,
        seed=SEED,
        fixture=dict(
            path=rel(TARGET),
            files=sorted(p.name for p in TARGET.iterdir()),
            weights="model.safetensors",
            keys=keys,
            hub_layout_loads=hub_ok,
        ),
        config=summary(cfg),
        image_token=dict(
            token=IMAGE_TOKEN,
            id=image_token_id,
            config_key="image_token_index",
            tokens_per_image=V.tokens_per_image,
        ),
        processor=dict(
            cls=type(processor).__name__,
            image_processor=type(processor.image_processor).__name__,
            patch_size=processor.patch_size,
            vision_feature_select_strategy=processor.vision_feature_select_strategy,
            num_additional_image_tokens=processor.num_additional_image_tokens,
            size=dict(processor.image_processor.size),
            crop_size=dict(processor.image_processor.crop_size),
            resample=int(processor.image_processor.resample),
            image_mean=list(processor.image_processor.image_mean),
            image_std=list(processor.image_processor.image_std),
        ),
        special_tokens={
            name: [token, tok.convert_tokens_to_ids(token)]
            for name, token in sorted(tok.special_tokens_map.items())
            if isinstance(token, str)
        },
        chat_template=processor.chat_template,
        notes=NOTES if V.name == "tiny-llava" else {**NOTES, **NOTES_FULL},
        how=HOW if V.name == "tiny-llava" else HOW_FULL,
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
        f"{NAME}: {len(cases)} cases ({counts} tokens), "
        f"{len(generations)} generation, {size / 1e3:.0f} kB; max-weight spread {spreads}",
        file=sys.stderr,
    )


def runs(positions: list[int]) -> list[list[int]]:
    """[start, length] of each run of consecutive image token positions (one per image)."""
    out: list[list[int]] = []
    for p in positions:
        if out and out[-1][0] + out[-1][1] == p:
            out[-1][1] += 1
        else:
            out.append([p, 1])
    return out


NOTES = dict(
    layout=(
        "transformers 5.24 saves LLaVA in the 4.x checkpoint layout for the language model "
        "(language_model.model.*, language_model.lm_head.weight) and projector (multi_modal_projector.*), "
        "but the CLIP tower without its vision_model. level: vision_tower.embeddings.*, "
        "vision_tower.encoder.layers.N.*, vision_tower.pre_layrnorm.*, vision_tower.post_layernorm.* "
        "(llava-hf's repositories: vision_tower.vision_model.*; transformers loads both, checked). In memory "
        "the modules are model.language_model.*, model.vision_tower.*, model.multi_modal_projector.*, lm_head."
    ),
    image_token=(
        "config.json holds image_token_index (LlavaConfig maps the attribute image_token_id to it); "
        "the processor expands each <image> in the text to (32/8)^2 + 1 - 1 = 16 copies of the token "
        "(num_additional_image_tokens 1 for CLS, minus 1 for the 'default' strategy), and the model "
        "replaces the embeddings at those positions, in order, with the image features"
    ),
    vision_feature_layer=(
        "-2 indexes the vision tower's hidden_states, of which there are layers + 1: [0] the encoder's "
        "input (patch + CLS embeddings + positions, after pre_layrnorm), [i + 1] the output of layer i. "
        "With 3 layers, -2 is layer 1's output (the last layer runs but is not used; neither is "
        "post_layernorm). 'default' drops CLS: the 16 patch rows go through linear_1, GELU (erf), linear_2"
    ),
    processor=(
        "transformers 5.24's LlavaProcessor.save_pretrained nests the image processor in "
        "processor_config.json and writes no preprocessor_config.json; the script writes that file too, "
        "as llava-hf's repositories have it. Without torchvision AutoProcessor picks CLIPImageProcessorPil "
        "(PIL's bicubic resize of the shortest edge to 32, centre crop 32x32), which wrote these pixels"
    ),
    positions=(
        "the language model numbers every position of the expanded sequence 0..n-1, image tokens included; "
        "its attention is causal over all of them"
    ),
)

HOW = (
    "AutoModelForImageTextToText.from_pretrained(attn_implementation='eager', dtype=float32), eval(); "
    "AutoProcessor(images=..., text=...) on the case's text (the chat template's for 'chat'), batch of one, "
    "no padding; output_attentions=True. pixel_values [images, 3, 32, 32] the processor's; vision_attentions "
    "[images, vision layers, heads, 17, 17] (all 3 layers, CLS first); vision_features [images, 16, 32] the "
    "chosen vision layer's output without CLS; image_features [images*16, 64] the projector's output, in "
    "the order the <image> positions take them; attentions [text layers, heads, n, n] the language model's "
    "over the whole expanded sequence; hidden [n, 64] the language model's last_hidden_state (after the "
    "final RMSNorm); logits_last [vocab] the LM head at the last position. The generation: "
    f"model.generate greedy (do_sample False, num_beams 1, max_new_tokens {GEN_TOKENS}, KV cache) with the "
    "case's pixels, the same ids without the cache, then one forward over prompt + generated tokens "
    "(gen_describe.attentions and .logits_last come from that re-run)"
)

NOTES_FULL = dict(
    layout=(
        "the fixture's model.safetensors is in llava-hf's layout: vision_tower.vision_model.*, "
        "language_model.model.*, language_model.lm_head.weight, multi_modal_projector.* (the script renames "
        "the vision keys of what save_pretrained writes; the renamed file loads with no missing or unexpected "
        "key and computes exactly what the built model computes, and 5.24's own layout loads to the same "
        "weights, checked)"
    ),
    image_token=(
        "the processor expands each <image> in the text to (32/8)^2 + 1 = 17 copies of the token "
        "(num_additional_image_tokens 1 for CLS, kept by the 'full' strategy): the class token's feature "
        "first, then the 16 patches row by row"
    ),
    vision_feature_layer=(
        "[-3, -1] index the vision tower's hidden_states (layers + 1 = 4): -3 is layer 0's output, -1 layer 2's "
        "(the last layer's, before post_layernorm, which is not used). 'full' keeps CLS: both stages' 17 rows, "
        "concatenated feature-wise in the list's order ([..., 64]), go through linear_1 (64 -> 64, no bias), "
        "GELU (erf), linear_2 (no bias)"
    ),
    text_model=(
        f"text_config.model_type mistral with sliding_window {SLIDING_WINDOW}: each query attends to itself and "
        f"the {SLIDING_WINDOW - 1} positions before it (transformers' create_sliding_window_causal_mask), image "
        "tokens included, so rows past position 15 have zeros before the window"
    ),
)

HOW_FULL = (
    "as tiny-llava's, with 17 image tokens per picture: vision_features [images, 17, 64] the two chosen "
    "stages' outputs side by side (CLS kept); image_features [images*17, 64]; attentions under Mistral's "
    "sliding window; no generation"
)


if __name__ == "__main__":
    main()
