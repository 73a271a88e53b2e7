#!/usr/bin/env python3
"""Tiny random vision checkpoints (ViT, DeiT, DINOv2, the vision towers of CLIP and SigLIP) and Hugging Face
transformers' reference outputs for them: the preprocessed pixels of each test image (the PIL
image processors, `*ImageProcessorPil`) and every layer's and head's attention (eager, float32).

    .cache/venv-ref/bin/python tests/reference/make_vision.py            # every family
    .cache/venv-ref/bin/python tests/reference/make_vision.py vit        # some
    .cache/venv-ref/bin/python tests/reference/make_vision.py --rollout  # fused rollouts only

Writes tests/fixtures/tiny-<name>/ (config.json, model.safetensors, preprocessor_config.json),
tests/fixtures/images/*.png|jpg (synthetic images drawn from a fixed seed) and
tests/reference/tiny-<name>.{json,safetensors}. Each case records the image, the pixel values
transformers' processor made from it (`pixels`, [3, H, W]) and the attention from those pixels
(`attention`, [layers, heads, n, n]); for SigLIP also its attention-pooling head's
(`pooling`, [heads, n]: the probe's nn.MultiheadAttention weights over the last hidden state,
per head). `resize_effect` states how far the attention moves when
the same image is resized with torch's plain (non-antialiased) bilinear in place of PIL's: what a
resize that does not match PIL costs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import safetensors.torch
import torch
import transformers
from PIL import Image
from transformers import (
    CLIPConfig,
    CLIPModel,
    CLIPVisionConfig,
    CLIPVisionModel,
    DeiTConfig,
    DeiTModel,
    Dinov2Config,
    Dinov2Model,
    Dinov2WithRegistersConfig,
    Dinov2WithRegistersModel,
    SiglipConfig,
    SiglipModel,
    SiglipVisionConfig,
    SiglipVisionModel,
    ViTConfig,
    ViTForImageClassification,
    ViTModel,
)
from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil
from transformers.models.siglip.image_processing_pil_siglip import SiglipImageProcessorPil
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
# Added after the others, so their seeds (by position) stay.
# Four register tokens after the class token (Darcet et al. 2023); positions trained on 6×6,
# interpolated to 4×4 with transformers' antialiased bicubic (this family's own).
FAMILIES["dinov2-registers"] = (
    Dinov2WithRegistersConfig,
    Dinov2WithRegistersModel,
    dict(image_size=48, patch_size=8, num_register_tokens=4),
    CLIPImageProcessorPil,
    dict(size={"shortest_edge": 40}, crop_size={"height": 32, "width": 32}, do_center_crop=True, resample=3,
         image_mean=[0.485, 0.456, 0.406], image_std=[0.229, 0.224, 0.225]),
)
# A whole CLIPModel (text tower, projections and all; model_type "clip", the vision settings in
# vision_config): attnviz reads its vision tower. Its reference runs model.vision_model.
FAMILIES["clip-full"] = (
    CLIPConfig,
    CLIPModel,
    dict(image_size=32, patch_size=8, hidden_act="quick_gelu"),
    CLIPImageProcessorPil,
    dict(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}, do_center_crop=True, resample=3,
         image_mean=[0.48145466, 0.4578275, 0.40821073], image_std=[0.26862954, 0.26130258, 0.27577711]),
)

# SigLIP's vision tower (no class token, GELU-tanh, post_layernorm, the attention-pooling head),
# at the model's own size: 32×32, bicubic, mean and std 0.5, no crop.
FAMILIES["siglip"] = (
    SiglipVisionConfig,
    SiglipVisionModel,
    dict(image_size=32, patch_size=8),
    SiglipImageProcessorPil,
    dict(size={"height": 32, "width": 32}, resample=3, image_mean=[0.5] * 3, image_std=[0.5] * 3),
)
# A whole SiglipModel (model_type "siglip", the vision settings in vision_config; attnviz reads
# its vision tower, the reference runs model.vision_model) whose processor makes 48×48 with
# bilinear: a 6×6 grid from positions trained on 4×4, interpolated (plain bicubic).
FAMILIES["siglip-full"] = (
    SiglipConfig,
    SiglipModel,
    dict(image_size=32, patch_size=8),
    SiglipImageProcessorPil,
    dict(size={"height": 48, "width": 48}, resample=2, image_mean=[0.5] * 3, image_std=[0.5] * 3),
)


def pooling_attention(runner, pixels: torch.Tensor, interpolate: bool) -> torch.Tensor:
    """SigLIP's attention-pooling head: the probe's attention over the last hidden state (after
    post_layernorm), per head, as torch's nn.MultiheadAttention computes it, [heads, n]."""
    with torch.no_grad():
        last = runner(pixel_values=pixels, interpolate_pos_encoding=interpolate).last_hidden_state
        head = runner.head
        probe = head.probe.repeat(last.shape[0], 1, 1)
        _, weights = head.attention(probe, last, last, need_weights=True, average_attn_weights=False)
    return weights[0, :, 0]


def run(model, pixels: torch.Tensor, interpolate: bool, norms: bool = False):
    kwargs = dict(output_attentions=True, output_hidden_states=norms)
    if interpolate:
        kwargs["interpolate_pos_encoding"] = True
    with torch.no_grad():
        out = model(pixel_values=pixels, **kwargs)
    # Classification models return logits; their attentions come from the base model.
    attn = torch.stack([a[0] for a in out.attentions])
    if not norms:
        return attn
    # Each layer's output per token (hidden_states[l + 1], before any final LayerNorm): its
    # L2 norm, [layers, n].
    return attn, torch.stack([h[0].double().norm(dim=-1) for h in out.hidden_states[1:]])


def make(name: str, images: dict[str, Path], seed: int) -> None:
    setup_determinism(seed)
    config_cls, model_cls, extra, proc_cls, proc_kw = FAMILIES[name]
    if config_cls is SiglipConfig:
        text = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, vocab_size=99,
                    bos_token_id=None, eos_token_id=None, pad_token_id=1)
        config = SiglipConfig(text_config=text, vision_config=dict(**TINY, **extra), attn_implementation="eager")
    elif config_cls is CLIPConfig:
        text = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, vocab_size=99)
        config = CLIPConfig(text_config=text, vision_config=dict(**TINY, **extra), projection_dim=16,
                            attn_implementation="eager")
        config.image_size = config.vision_config.image_size
        config.num_hidden_layers = config.vision_config.num_hidden_layers
        config.num_attention_heads = config.vision_config.num_attention_heads
    else:
        config = config_cls(**TINY, **extra, attn_implementation="eager")
    model = model_cls(config).eval()
    model.config._attn_implementation = "eager"
    randomise(model, seed)
    out_dir = FIXTURES / f"tiny-{name}"
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    processor = proc_cls(**proc_kw)
    processor.save_pretrained(out_dir)
    if name == "deit":
        # The same weights as a pickled PyTorch checkpoint (pytorch_model.bin), as older hub
        # repos ship them. Taken from the saved safetensors file, not model.state_dict():
        # transformers 5 names its modules differently inside (layers.0.attention.q_proj) and
        # converts to the checkpoint names (encoder.layer.0...) only when it saves.
        bin_dir = FIXTURES / "tiny-deit-bin"
        bin_dir.mkdir(parents=True, exist_ok=True)
        saved = safetensors.torch.load_file(out_dir / "model.safetensors")
        torch.save(saved, bin_dir / "pytorch_model.bin")
        again = torch.load(bin_dir / "pytorch_model.bin")
        assert saved.keys() == again.keys() and all(torch.equal(saved[k], again[k]) for k in saved)
        config.save_pretrained(bin_dir)
        processor.save_pretrained(bin_dir)
    size = processor.crop_size if getattr(processor, "do_center_crop", False) else processor.size
    vision_config = config.vision_config if config_cls is SiglipConfig else config
    interpolate = (size["height"], size["width"]) != (vision_config.image_size,) * 2

    store = TensorStore()
    cases = []
    for image_name in ("own32", "wide45x37", "big80x64", "gray45x37", "wide45x37_jpg"):
        path = images[image_name]
        image = Image.open(path)
        # The processors of ViT and DeiT leave do_convert_rgb unset, which fails on a gray image;
        # attnviz always converts to RGB (the models take 3 channels), as do_convert_rgb does.
        pixels = processor(images=image, return_tensors="pt", do_convert_rgb=True)["pixel_values"]
        runner = model.vision_model if isinstance(model, (CLIPModel, SiglipModel)) else model
        attn, norms = run(runner, pixels, interpolate, norms=True)
        case = dict(
            image=rel(path),
            image_size=list(image.size),
            pixels=store.put(f"{image_name}.pixels", pixels[0]),
            attention=store.put(f"{image_name}.attention", attn),
            norms=store.put(f"{image_name}.norms", norms),
        )
        if isinstance(runner, SiglipVisionModel):
            case["pooling"] = store.put(f"{image_name}.pooling", pooling_attention(runner, pixels, interpolate))
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
            moved = run(runner, other, interpolate)
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
        layers=vision_config.num_hidden_layers,
        heads=vision_config.num_attention_heads,
        cases=cases,
        versions=versions(),
    )
    store.save(REFERENCE / f"tiny-{name}.safetensors")
    write_json(REFERENCE / f"tiny-{name}.json", manifest)
    print(name, [(c["image"], c.get("resize_effect")) for c in cases])


def fused_rollout(att: np.ndarray, fusion: str, ratio: float, as_written: bool = False) -> np.ndarray:
    """vit-explain's rollout (jacobgil/vit-explain, vit_rollout.py), in numpy, through every layer
    of `att` ([layers, heads, n, n], float64): fuse the heads, zero the `int(n² · ratio)` smallest
    fused weights (a stable sort; entry 0, the first token's attention to itself, is never
    zeroed), add the identity, halve, divide by the row sums, and multiply, later layers on the
    left. `as_written` divides as the script's `a / a.sum(dim=-1)` does in torch: entry (i, j)
    by row j's sum (broadcast along the columns); attnviz divides each row by its own sum."""
    n = att.shape[-1]
    result = np.eye(n)
    out = []
    for layer in att:
        fused = {"mean": layer.mean(0), "max": layer.max(0), "min": layer.min(0)}[fusion].copy()
        flat = fused.reshape(-1)
        k = int(flat.size * ratio)
        drop = np.argsort(flat, kind="stable")[:k]
        flat[drop[drop != 0]] = 0.0
        a = (fused + np.eye(n)) / 2
        a = a / (a.sum(-1)[None, :] if as_written else a.sum(-1, keepdims=True))
        result = a @ result
        out.append(result)
    return np.stack(out)


ROLLOUTS = [("mean", 0.0), ("mean", 0.9), ("max", 0.5), ("min", 0.25), ("max", 0.9)]


def make_rollouts() -> None:
    """Fused rollouts of transformers' DeiT attention on big80x64 (read from the committed
    tiny-deit reference), for tests/suite/fidelity/vision.rs to compare ours with."""
    import safetensors.numpy

    ref = safetensors.numpy.load_file(REFERENCE / "tiny-deit.safetensors")
    att = ref["big80x64.attention"].astype(np.float64)
    store = TensorStore()
    cases = []
    for fusion, ratio in ROLLOUTS:
        # The ratio as attnviz holds it (f32), so both count the same entries to drop.
        r32 = float(np.float32(ratio))
        ours = fused_rollout(att, fusion, r32)
        written = fused_rollout(att, fusion, r32, as_written=True)
        key = f"{fusion}-{ratio}"
        cases.append(dict(
            fusion=fusion,
            discard_ratio=ratio,
            rollout=store.put(key, ours),
            # How far vit-explain's column-wise division moves the CLS row (stated, not tested).
            as_written_cls_row_max_difference=float(np.abs(written[:, 0] - ours[:, 0]).max()),
        ))
    store.save(REFERENCE / "vision-rollout.safetensors")
    write_json(REFERENCE / "vision-rollout.json", dict(
        attention="tiny-deit.safetensors:big80x64.attention",
        cases=cases,
        versions=versions(),
    ))
    print("rollouts", [(c["fusion"], c["discard_ratio"], c["as_written_cls_row_max_difference"]) for c in cases])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("families", nargs="*", default=list(FAMILIES))
    parser.add_argument("--rollout", action="store_true",
                        help="only the fused rollouts, from the committed tiny-deit reference")
    args = parser.parse_args()
    if args.rollout:
        make_rollouts()
        return
    images = make_images()
    for i, name in enumerate(args.families):
        make(name, images, 7000 + 17 * list(FAMILIES).index(name))
    make_rollouts()


if __name__ == "__main__":
    main()
