#!/usr/bin/env python3
"""A tiny random PaliGemma 2 checkpoint (`PaliGemmaForConditionalGeneration`, `model_type`
`paligemma`: a SigLIP vision tower, PaliGemmaMultiModalProjector's one linear map, and a Gemma 2
text model under a prefix-LM mask) with its processor, and Hugging Face transformers' reference
outputs for it (eager attention, float32).

    /path/to/venv/bin/python tests/reference/make_paligemma.py [--variant gemma1]

It writes tests/fixtures/tiny-paligemma/ (config.json, generation_config.json and model.safetensors
as transformers saves them; the processor as PaliGemmaProcessor.save_pretrained writes it, plus
tokenizer.model) and tests/reference/tiny-paligemma.{json,safetensors}: for three prompts with
pictures from tests/fixtures/images, the processor's pixels, expanded token ids and token_type_ids,
the vision tower's attention, the projected image features that replace the image tokens, the
language model's attention over the whole sequence (the image tokens and the prompt see each other
in full, as PaliGemma's prefix-LM mask lets them, the sliding window cutting nothing inside them),
its last hidden state and the last position's logits; and one greedy generation, whose new tokens
are causal.

Weights are drawn as make_families.py draws them (its `randomise`, numpy PCG64 from a fixed seed),
so a re-run with the same versions rewrites every file byte for byte. `--variant gemma1` writes
tests/fixtures/tiny-paligemma1/ and tests/reference/tiny-paligemma1.*: the same with the first
PaliGemma's Gemma (1) text model. The script checks itself: the
saved folder loads back (AutoModelForImageTextToText, AutoProcessor) with no missing or unexpected
key and computes exactly what the model built in memory computes; the attention caught inside
eager attention equals `output_attentions`; the image features are the projector applied to the
tower's last hidden state, and are what the language model receives at the image token positions;
every prompt token attends to every other prompt token, later ones and those further back than
the sliding window included, while the generated tokens see no later token and, on sliding
layers, nothing past the window; positions count from 1 (rotary positions are relative, so the
same run with positions from 0 differs by rounding only, but by up to 2e-5: recorded);
generate() with and without its KV cache picks the same tokens, and its per-step attention
agrees with a re-run over the whole sequence.
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
    Gemma2Config,
    GemmaConfig,
    PaliGemmaConfig,
    PaliGemmaForConditionalGeneration,
    PaliGemmaProcessor,
    SiglipVisionConfig,
)
from transformers.models.siglip.image_processing_pil_siglip import SiglipImageProcessorPil

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

SEED = 20261208
# The text model: PaliGemma 2's Gemma 2 (tiny-paligemma), or with `--variant gemma1` the first
# PaliGemma's Gemma (tiny-paligemma1: no sliding window, no soft-capping, no post-norms).
VARIANTS = {"gemma2": "tiny-paligemma", "gemma1": "tiny-paligemma1"}
ARGS = sys.argv[1:]
VARIANT = ARGS[1] if len(ARGS) == 2 and ARGS[0] == "--variant" and ARGS[1] in VARIANTS else "gemma2"
NAME = VARIANTS[VARIANT]
TARGET = FIXTURES / NAME
TOKENIZER_SOURCE = FIXTURES / "tiny-gemma2"
IMAGES = FIXTURES / "images"
IMAGE_TOKEN = "<image>"
IMAGE_SIZE, PATCH = 32, 8
TOKENS_PER_IMAGE = (IMAGE_SIZE // PATCH) ** 2
WINDOW = 6
GEN_TOKENS = 6

CASES = [
    dict(name="describe", text="caption en", images=["wide45x37.png"]),
    dict(name="marked", text="<image>answer en where is the red part?", images=["big80x64.png"]),
    dict(name="two_images", text="<image><image>compare the two", images=["wide45x37.png", "big80x64.png"]),
]
GENERATE_CASE = "describe"


def make_processor() -> PaliGemmaProcessor:
    """tiny-gemma2's tokenizer, to which PaliGemmaProcessor adds <image> (a special token) and
    the 1024 <locNNNN> and 128 <segNNN> tokens; SigLIP's PIL image processor at 32x32 (bicubic,
    mean = std = 0.5) with image_seq_length 16."""
    tok = AutoTokenizer.from_pretrained(TOKENIZER_SOURCE)
    tok.model_max_length = 128
    images = SiglipImageProcessorPil(
        size={"height": IMAGE_SIZE, "width": IMAGE_SIZE},
        resample=3,  # bicubic
        do_convert_rgb=True,
        image_mean=[0.5, 0.5, 0.5],
        image_std=[0.5, 0.5, 0.5],
    )
    images.image_seq_length = TOKENS_PER_IMAGE
    processor = PaliGemmaProcessor(image_processor=images, tokenizer=tok)
    return processor


def make_config(tok, image_token_id: int) -> PaliGemmaConfig:
    vision = SiglipVisionConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        image_size=IMAGE_SIZE,
        patch_size=PATCH,
        hidden_act="gelu_pytorch_tanh",
        layer_norm_eps=1e-6,
        vision_use_head=False,
    )
    if VARIANT == "gemma1":
        text = GemmaConfig(
            vocab_size=len(tok),
            hidden_size=64,
            intermediate_size=96,
            num_hidden_layers=3,
            num_attention_heads=4,
            num_key_value_heads=1,
            head_dim=16,
            max_position_embeddings=128,
            rms_norm_eps=1e-6,
            rope_parameters=dict(rope_type="default", rope_theta=10000.0),
            hidden_act="gelu_pytorch_tanh",
            tie_word_embeddings=True,
            bos_token_id=tok.bos_token_id,
            eos_token_id=tok.eos_token_id,
            pad_token_id=tok.pad_token_id,
        )
        return paligemma_config(vision, text, tok, image_token_id)
    text = Gemma2Config(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=128,
        rms_norm_eps=1e-6,
        rope_parameters=dict(rope_type="default", rope_theta=10000.0),
        query_pre_attn_scalar=16,
        sliding_window=WINDOW,
        attn_logit_softcapping=50.0,
        final_logit_softcapping=30.0,
        hidden_activation="gelu_pytorch_tanh",
        tie_word_embeddings=True,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    return paligemma_config(vision, text, tok, image_token_id)


def paligemma_config(vision, text, tok, image_token_id: int) -> PaliGemmaConfig:
    config = PaliGemmaConfig(
        vision_config=vision,
        text_config=text,
        image_token_index=image_token_id,
        projection_dim=64,
        hidden_size=64,
        vocab_size=len(tok),
        tie_word_embeddings=True,
    )
    config._attn_implementation = "eager"
    return config


def save(model, processor: PaliGemmaProcessor) -> None:
    if TARGET.exists():
        shutil.rmtree(TARGET)
    model.config.architectures = ["PaliGemmaForConditionalGeneration"]
    model.save_pretrained(TARGET)
    processor.save_pretrained(TARGET)
    # As google's repositories: the image processor in preprocessor_config.json too.
    processor.image_processor.save_pretrained(TARGET)
    shutil.copyfile(TOKENIZER_SOURCE / "tokenizer.model", TARGET / "tokenizer.model")


def encode(processor, case: dict) -> dict:
    pictures = [Image.open(IMAGES / name) for name in case["images"]]
    enc = processor(images=[pictures], text=[case["text"]], return_tensors="pt")
    return dict(text=case["text"], sizes=[list(p.size) for p in pictures], enc=enc)


class Runner:
    """One model's forward pass with everything the references need caught."""

    def __init__(self, model):
        self.model = model
        self.catcher = AttentionCatcher(model)
        inner = model.model
        self.hooks = vlmlib.Hooks(inner.language_model, positions=True)
        inner.vision_tower.register_forward_hook(self.hooks.store("vision_out"))



    @torch.no_grad()
    def run(self, ids: torch.Tensor, types: torch.Tensor, pixels: torch.Tensor, position_ids=None) -> dict:
        self.hooks.seen = {}
        dtype = next(self.model.parameters()).dtype
        with self.catcher.catching():
            out = self.model(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                token_type_ids=types,
                pixel_values=pixels.to(dtype),
                position_ids=position_ids,
                output_attentions=True,
                return_dict=True,
            )
        text = torch.stack([a[0] for a in out.attentions])
        features = out.image_outputs.pooler_output.flatten(0, 1)
        calls = self.catcher.calls
        vision_calls = [c["weights"] for c in calls if ".vision_tower." in c["name"]]
        text_calls = [c["weights"][0] for c in calls if ".language_model." in c["name"]]
        assert len(vision_calls) + len(text_calls) == len(calls), [c["name"] for c in calls]
        vision = torch.stack(vision_calls).transpose(0, 1)
        assert len(vision_calls) == self.model.config.vision_config.num_hidden_layers
        assert torch.equal(torch.stack(text_calls), text), "caught text weights differ"
        (last,) = self.hooks.seen["vision_out"]
        assert torch.equal(self.model.model.multi_modal_projector(last).flatten(0, 1), features)
        (embeds,) = self.hooks.seen["inputs_embeds"]
        at_image = ids[0] == self.model.config.image_token_id
        assert int(at_image.sum()) == features.shape[0], (int(at_image.sum()), features.shape)
        assert torch.equal(embeds[0][at_image], features)
        (positions,) = self.hooks.seen["position_ids"]
        (hidden,) = self.hooks.seen["lm_out"]
        return {
            "pixel_values": pixels,
            "vision_attentions": vision,
            "vision_last_hidden": last,
            "image_features": features,
            "attentions": text,
            "hidden": hidden[0],
            "logits_last": out.logits[0, -1],
            "position_ids": positions[0],
        }


def layering(text_cfg) -> tuple[int, list[str]]:
    """The sliding window and each layer's kind (Gemma 1: none slides)."""
    types = getattr(text_cfg, "layer_types", None) or ["full_attention"] * text_cfg.num_hidden_layers
    return getattr(text_cfg, "sliding_window", None) or text_cfg.max_position_embeddings, list(types)


def check_prefix(attn: torch.Tensor, prefix: int, n: int, window: int, layer_types: list[str]) -> int:
    """The first `prefix` tokens attend to the later ones among them, and on sliding layers to
    those further back than the window too (the prefix's block is ORed onto the windowed causal
    mask); no token attends to a later one outside them, nor past the window outside them.
    Returns how many (layer, head, query, later key) weights inside the prefix are above 0."""
    inside = torch.zeros(n, n, dtype=torch.bool)
    inside[:prefix, :prefix] = True
    future = torch.ones(n, n, dtype=torch.bool).triu(1)
    q = torch.arange(n)[:, None]
    k = torch.arange(n)[None, :]
    behind = k <= q - window
    later = 0

    def zero(a, where) -> bool:
        picked = a[:, where]
        return picked.numel() == 0 or float(picked.abs().max()) == 0.0

    for layer, kind in enumerate(layer_types):
        a = attn[layer]
        assert zero(a, future & ~inside), f"layer {layer} sees a later token outside the prefix"
        assert bool((a[:, future & inside] > 0).all()), f"layer {layer}: a prefix token does not see the prefix"
        if kind == "sliding_attention":
            assert zero(a, behind & ~inside), f"layer {layer} sees past its window outside the prefix"
            if bool((behind & inside).any()):
                assert bool((a[:, behind & inside] > 0).all()), f"layer {layer}: the window cuts the prefix"
        later += int((a[:, future & inside] > 0).sum())
    return later


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
    # As generate() extends them: the new tokens are the suffix (token type 1), causal.
    full_types = torch.cat([types, torch.ones(1, len(seq) - len(prompt), dtype=types.dtype)], dim=1)
    full = runner.run(torch.tensor([seq]), full_types, pixels)
    vs_rerun = generate_vs_rerun(cached, {"self.attentions": full["attentions"]}, False)["self"]
    assert vs_rerun < 1e-5, vs_rerun
    cfg = model.config.text_config
    check_prefix(full["attentions"], len(prompt), len(seq), *layering(cfg))
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
        stopped_at_eos=bool(new) and new[-1] == cfg.eos_token_id,
        same_without_cache=True,
        generate_vs_rerun_max_abs=vs_rerun,
        tensors={
            "attentions": store.put(f"{key}.attentions", full["attentions"]),
            "logits_last": store.put(f"{key}.logits_last", full["logits_last"]),
        },
    )


def load(dtype=torch.float32):
    return vlmlib.load(TARGET, PaliGemmaForConditionalGeneration, dtype)


def summary(cfg) -> dict:
    top = {k: getattr(cfg, k) for k in ("model_type", "image_token_index", "projection_dim")}
    vision = cfg.vision_config
    top["vision_config"] = vlmlib.vision_summary(vision, "vision_use_head")
    top["text_config"] = summarise_config(cfg.text_config)
    top["text_config"]["layer_types"] = layering(cfg.text_config)[1]
    top["text_config"]["use_bidirectional_attention"] = cfg.text_config.use_bidirectional_attention
    return top


@torch.no_grad()
def main() -> None:
    if ARGS and not (len(ARGS) == 2 and ARGS[0] == "--variant" and ARGS[1] in VARIANTS):
        sys.exit(f"usage: make_paligemma.py [--variant {'|'.join(VARIANTS)}]")
    setup_determinism(SEED)
    processor = make_processor()
    tok = processor.tokenizer
    built = PaliGemmaForConditionalGeneration(make_config(tok, processor.image_token_id)).eval()
    # Softer queries and keys than make_families.py's: Gemma's (1 + w) norms, applied four times a
    # layer, make the default gains' attention so peaked that float32 itself is 5e-5 from float64.
    randomise(built, SEED, Gains(qk=1.0))
    save(built, processor)

    processor = AutoProcessor.from_pretrained(TARGET)
    assert type(processor) is PaliGemmaProcessor, type(processor)
    assert type(processor.image_processor) is SiglipImageProcessorPil, type(processor.image_processor)
    tok = processor.tokenizer
    model, model64 = load(), load(torch.float64)
    cfg = model.config
    image_token_id = cfg.image_token_id
    assert image_token_id == processor.image_token_id
    keys = vlmlib.weight_keys(TARGET)
    runner, runner64 = Runner(model), Runner(model64)
    text_cfg = cfg.text_config

    store = TensorStore()
    cases, generations, spreads = [], [], []
    for case in CASES:
        encoded = encode(processor, case)
        enc = encoded["enc"]
        vlmlib.same_as_built(
            built,
            model,
            input_ids=enc["input_ids"],
            token_type_ids=enc["token_type_ids"],
            pixel_values=enc["pixel_values"],
        )
        ids, types = enc["input_ids"], enc["token_type_ids"]
        assert types.eq(0).all(), "a prompt without a suffix is all prefix"
        ref = runner.run(ids, types, enc["pixel_values"])
        ref64 = runner64.run(ids, types, enc["pixel_values"])
        id_list = ids[0].tolist()
        n = len(id_list)
        assert ref["position_ids"].tolist() == list(range(1, n + 1)), "PaliGemma's positions count from 1"
        from_zero = runner.run(ids, types, enc["pixel_values"], position_ids=torch.arange(n)[None])
        # Rotary positions are relative: counting from 1 moves the attention by rounding only, but
        # by up to 2e-5 (recorded), more than the suite's bound.
        positions = [i for i, t in enumerate(id_list) if t == image_token_id]
        n_images = len(case["images"])
        assert positions == list(range(TOKENS_PER_IMAGE * n_images)), case["name"]
        # The processor's text: the image tokens, BOS, the prompt and a newline.
        marks = case["text"].count(IMAGE_TOKEN)
        rest = case["text"].replace(IMAGE_TOKEN, "")
        expanded = IMAGE_TOKEN * (TOKENS_PER_IMAGE * n_images) + tok.bos_token + rest + "\n"
        assert marks in (0, n_images)
        assert tok(expanded, add_special_tokens=False)["input_ids"] == id_list, case["name"]
        later = check_prefix(ref["attentions"], n, n, *layering(text_cfg))
        image_runs = [[i * TOKENS_PER_IMAGE, TOKENS_PER_IMAGE] for i in range(n_images)]
        future = torch.ones(n, n, dtype=torch.bool).triu(1)
        in_runs = torch.zeros(n, n, dtype=torch.bool)
        for start, length in image_runs:
            in_runs[start : start + length, start : start + length] = True
        later_image = int((ref["attentions"][:, :, future & in_runs] > 0).sum())
        entry = dict(
            name=case["name"],
            text=encoded["text"],
            images=case["images"],
            image_sizes=encoded["sizes"],
            input_ids=id_list,
            token_type_ids=types[0].tolist(),
            tokens=tok.convert_ids_to_tokens(id_list),
            n=n,
            image_token_positions=positions,
            image_token_runs=image_runs,
            later_image_keys_seen=later_image,
            later_prefix_keys_seen=later,
            positions_from_zero_max_abs=max_abs(from_zero["attentions"], ref["attentions"]),
            tensors={
                what: store.put(f"{case['name']}.{what}", value)
                for what, value in ref.items()
                if what != "position_ids"
            },
            f32_vs_f64_max_abs={
                what: max_abs(ref[what], ref64[what]) for what in ref if what not in ("pixel_values", "position_ids")
            },
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
        generator="tests/reference/make_paligemma.py",
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
        image_token=dict(token=IMAGE_TOKEN, id=image_token_id, tokens_per_image=TOKENS_PER_IMAGE),
        processor=dict(
            cls=type(processor).__name__,
            image_processor=type(image_processor).__name__,
            image_seq_length=processor.image_seq_length,
            size=dict(image_processor.size),
            resample=int(image_processor.resample),
            image_mean=list(image_processor.image_mean),
            image_std=list(image_processor.image_std),
        ),
        notes=dict(NOTES, variant=VARIANT_NOTES[VARIANT]),
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
        f"later prefix keys seen {[c['later_prefix_keys_seen'] for c in cases]}; spread {spreads}",
        file=sys.stderr,
    )


NOTES = dict(
    layout=(
        "transformers 5.24 saves PaliGemmaForConditionalGeneration as model.vision_tower.* (SigLIP without "
        "its vision_model. level), model.multi_modal_projector.linear.{weight,bias} and "
        "model.language_model.*; the head is tied to the embeddings"
    ),
    image_tokens=(
        "PaliGemmaProcessor writes 16 x <image> per picture, then <bos>, the prompt without its <image> "
        "marks, and '\\n', and tokenizes that without adding specials; token_type_ids is 0 everywhere (no "
        "suffix)"
    ),
    projector="the tower's last_hidden_state (after post_layernorm; no pooling head) through one Linear with bias",
    positions="position_ids = arange(n) + 1: PaliGemma's positions count from 1, in generate() too",
    mask=(
        "with token_type_ids the prefix (token type 0: every prompt token) sees itself in full "
        "(block_sequence_ids 0), ORed onto the sliding layers' windowed causal mask, so the window (6) cuts "
        "nothing inside the prefix; the generated tokens (type 1) are causal and windowed. generate() passes "
        "token_type_ids at the prefill only"
    ),
    processor="SiglipImageProcessorPil: PIL bicubic resize to 32x32, rescale, normalise with mean = std = 0.5",
)

VARIANT_NOTES = dict(
    gemma2="PaliGemma 2: a Gemma 2 text model (sliding window 6 on layers 0 and 2, soft-capping, post-norms)",
    gemma1="the first PaliGemma: a Gemma (1) text model, no sliding window (what the notes say of one does "
    "not apply), no soft-capping, no post-norms, 4 query heads over 1 key/value head",
)

HOW = (
    "AutoModelForImageTextToText.from_pretrained(attn_implementation='eager', dtype=float32), eval(); "
    "AutoProcessor(images=[[...]], text=[...]), batch of one, no padding; input_ids, token_type_ids and "
    "pixel_values to the model, output_attentions=True. vision_attentions [images, vision layers, heads, 16, "
    "16]; vision_last_hidden [images, 16, 32]; image_features [images*16, 64]; attentions [text layers, heads, "
    "n, n] over the whole expanded sequence; hidden [n, 64] the language model's last_hidden_state (after "
    f"the final norm); logits_last [vocab]. The generation: model.generate greedy (max_new_tokens {GEN_TOKENS}, "
    "KV cache) with the case's pixels and token_type_ids, the same without the cache, then one forward over "
    "prompt + generated tokens (token_type_ids 1 for the new ones) whose attentions and logits_last are stored"
)


if __name__ == "__main__":
    main()
