#!/usr/bin/env python3
"""Tiny random vision checkpoints (ViT, DeiT, DINOv2, CLIP's vision tower) and Hugging Face
transformers' reference outputs for them: the preprocessed pixels of each test image (the PIL
image processors, `*ImageProcessorPil`) and every layer's and head's attention (eager, float32).

    /work/venv-ref/bin/python tests/reference/make_vision.py            # every family
    /work/venv-ref/bin/python tests/reference/make_vision.py vit        # some

Writes tests/fixtures/tiny-<name>/ (config.json, model.safetensors, preprocessor_config.json),
tests/fixtures/images/*.png|jpg (synthetic images drawn from a fixed seed) and
tests/reference/tiny-<name>.{json,safetensors}. Each case records the image, the pixel values
transformers' processor made from it (`pixels`, [3, H, W]) and the attention from those pixels
(`attention`, [layers, heads, n, n]). `resize_effect` states how far the attention moves when
the same image is resized with torch's plain (non-antialiased) bilinear in place of PIL's: what a
resize that does not match PIL costs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch
import transformers
from PIL import Image
from transformers import (
    CLIPVisionConfig,
    CLIPVisionModel,
    DeiTConfig,
    DeiTModel,
    Dinov2Config,
    Dinov2Model,
    ViTConfig,
    ViTForImageClassification,
    ViTModel,
)
from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil
from transformers.models.vit.image_processing_pil_vit import ViTImageProcessorPil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reflib import FIXTURES, REFERENCE, TensorStore, rel, setup_determinism, versions, write_json  # noqa: E402

IMAGES = FIXTURES / "images"
TINY = dict(
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    num_channels=3,
)


def make_images() -> dict[str, Path]:
    """Synthetic photographs-in-miniature: smooth colour fields with edges and noise, so that a
    resize has work to do. Drawn from a fixed seed."""
    IMAGES.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(20261202)
    out = {}
    for name, (w, h) in dict(own32=(32, 32), wide45x37=(45, 37), big80x64=(80, 64)).items():
        y, x = np.mgrid[0:h, 0:w].astype(np.float64)
        r = 128 + 90 * np.sin(x / w * 5.0 + y / h * 1.3)
        g = 128 + 90 * np.cos(y / h * 4.0 - x / w * 2.1)
        b = np.where((x - w / 2) ** 2 + (y - h / 2) ** 2 < (min(w, h) / 3) ** 2, 220.0, 40.0)
        img = np.stack([r, g, b], -1) + rng.normal(0, 18, (h, w, 3))
        img = np.clip(np.round(img), 0, 255).astype(np.uint8)
        path = IMAGES / f"{name}.png"
        Image.fromarray(img, "RGB").save(path, optimize=False)
        out[name] = path
    # The same picture as JPEG (decoders may differ by a level) and as grayscale PNG.
    wide = Image.open(out["wide45x37"])
    wide.save(IMAGES / "wide45x37.jpg", quality=92)
    out["wide45x37_jpg"] = IMAGES / "wide45x37.jpg"
    wide.convert("L").save(IMAGES / "gray45x37.png")
    out["gray45x37"] = IMAGES / "gray45x37.png"
    return out


def randomise(model: torch.nn.Module, seed: int) -> None:
    """Weights large enough that attention is far from uniform (torch's init at this size gives
    nearly flat maps, which would test little)."""
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            shape = tuple(p.shape)
            if name.endswith("bias"):
                v = rng.normal(0, 0.1, shape)
            elif "norm" in name.lower() or "layernorm" in name or "pre_layrnorm" in name:
                v = 1 + rng.normal(0, 0.1, shape)
            elif "lambda1" in name:
                v = 0.5 + rng.normal(0, 0.1, shape)
            elif p.dim() >= 2 and "position" not in name:
                fan_in = int(np.prod(shape[1:]))
                v = rng.normal(0, 1.6 / np.sqrt(fan_in), shape)
            else:
                v = rng.normal(0, 0.5, shape)
            p.copy_(torch.from_numpy(v.astype(np.float32)))


FAMILIES = {
    # name: (config class, model class, config extras, processor, processor settings)
    "vit": (
        ViTConfig,
        ViTModel,
        dict(image_size=32, patch_size=8),
        ViTImageProcessorPil,
        dict(size={"height": 32, "width": 32}, resample=2, image_mean=[0.5] * 3, image_std=[0.5] * 3),
    ),
    # A classification checkpoint (`vit.` prefix, a classifier) whose processor makes 48×48:
    # a 6×6 grid from position embeddings trained on 4×4, interpolated.
    "vit-cls": (
        ViTConfig,
        ViTForImageClassification,
        dict(image_size=32, patch_size=8, num_labels=3),
        ViTImageProcessorPil,
        dict(size={"height": 48, "width": 48}, resample=3, image_mean=[0.485, 0.456, 0.406], image_std=[0.229, 0.224, 0.225]),
    ),
    "deit": (
        DeiTConfig,
        DeiTModel,
        dict(image_size=32, patch_size=8),
        ViTImageProcessorPil,
        dict(size={"height": 32, "width": 32}, resample=3, image_mean=[0.485, 0.456, 0.406], image_std=[0.229, 0.224, 0.225]),
    ),
    # As the real checkpoints: resize the shortest edge (bicubic), crop, trained at another size.
    "dinov2": (
        Dinov2Config,
        Dinov2Model,
        dict(image_size=48, patch_size=8),
        CLIPImageProcessorPil,
        dict(size={"shortest_edge": 40}, crop_size={"height": 32, "width": 32}, do_center_crop=True, resample=3,
             image_mean=[0.485, 0.456, 0.406], image_std=[0.229, 0.224, 0.225]),
    ),
    "clip": (
        CLIPVisionConfig,
        CLIPVisionModel,
        dict(image_size=32, patch_size=8, hidden_act="quick_gelu"),
        CLIPImageProcessorPil,
        dict(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}, do_center_crop=True, resample=3,
             image_mean=[0.48145466, 0.4578275, 0.40821073], image_std=[0.26862954, 0.26130258, 0.27577711]),
    ),
}


def run(model, pixels: torch.Tensor, interpolate: bool):
    kwargs = dict(output_attentions=True)
    if interpolate:
        kwargs["interpolate_pos_encoding"] = True
    with torch.no_grad():
        out = model(pixel_values=pixels, **kwargs)
    # Classification models return logits; their attentions come from the base model.
    attn = torch.stack([a[0] for a in out.attentions])
    return attn


def make(name: str, images: dict[str, Path], seed: int) -> None:
    setup_determinism(seed)
    config_cls, model_cls, extra, proc_cls, proc_kw = FAMILIES[name]
    config = config_cls(**TINY, **extra, attn_implementation="eager")
    model = model_cls(config).eval()
    model.config._attn_implementation = "eager"
    randomise(model, seed)
    out_dir = FIXTURES / f"tiny-{name}"
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    processor = proc_cls(**proc_kw)
    processor.save_pretrained(out_dir)
    size = processor.crop_size if getattr(processor, "do_center_crop", False) else processor.size
    interpolate = (size["height"], size["width"]) != (config.image_size,) * 2

    store = TensorStore()
    cases = []
    for image_name in ("own32", "wide45x37", "big80x64", "gray45x37", "wide45x37_jpg"):
        path = images[image_name]
        image = Image.open(path)
        # The processors of ViT and DeiT leave do_convert_rgb unset, which fails on a gray image;
        # attnviz always converts to RGB (the models take 3 channels), as do_convert_rgb does.
        pixels = processor(images=image, return_tensors="pt", do_convert_rgb=True)["pixel_values"]
        attn = run(model, pixels, interpolate)
        case = dict(
            image=rel(path),
            image_size=list(image.size),
            pixels=store.put(f"{image_name}.pixels", pixels[0]),
            attention=store.put(f"{image_name}.attention", attn),
        )
        if image_name == "wide45x37":
            # The same image through torch's plain bilinear/bicubic resize (no antialiasing),
            # then the same crop and normalisation: what a resize that is not PIL's moves.
            rgb = torch.from_numpy(np.asarray(image.convert("RGB"))).permute(2, 0, 1)[None].double()
            target = processor.size
            if "shortest_edge" in target:
                s = target["shortest_edge"]
                w, h = image.size
                hw = (s, int(s * w / h)) if h <= w else (int(s * h / w), s)
            else:
                hw = (target["height"], target["width"])
            mode = {2: "bilinear", 3: "bicubic"}[int(processor.resample)]
            plain = torch.nn.functional.interpolate(rgb, size=hw, mode=mode, align_corners=False)
            plain = plain.round().clamp(0, 255)[0].permute(1, 2, 0).numpy().astype(np.uint8)
            other = processor(images=Image.fromarray(plain), return_tensors="pt",
                              do_resize=False)["pixel_values"]
            moved = run(model, other, interpolate)
            case["resize_effect"] = dict(
                pixel_levels_max=float((other - pixels).abs().max() * 255 * max(processor.image_std)),
                attention_max=float((moved - attn).abs().max()),
            )
        cases.append(case)
    manifest = dict(
        family=name,
        model_type=config.model_type,
        checkpoint=rel(out_dir),
        tensors=f"tiny-{name}.safetensors",
        interpolate_pos_encoding=interpolate,
        layers=config.num_hidden_layers,
        heads=config.num_attention_heads,
        cases=cases,
        versions=versions(),
    )
    store.save(REFERENCE / f"tiny-{name}.safetensors")
    write_json(REFERENCE / f"tiny-{name}.json", manifest)
    print(name, [(c["image"], c.get("resize_effect")) for c in cases])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("families", nargs="*", default=list(FAMILIES))
    args = parser.parse_args()
    images = make_images()
    for i, name in enumerate(args.families):
        make(name, images, 7000 + 17 * list(FAMILIES).index(name))


if __name__ == "__main__":
    main()
