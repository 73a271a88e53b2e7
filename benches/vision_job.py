#!/usr/bin/env python3
"""The Python job a user writes today for attnviz's image figure (issue 23, requirement 6): the
class token's attention over the patches of the last layer (mean of its heads), drawn over the
picture with matplotlib, as vit-explain and the transformers forum answers do.

    python3 benches/vision_job.py MODEL_DIR IMAGE OUT.png THREADS

Loads the image processor and the model (eager attention, output_attentions), runs the picture,
and saves the overlay. `cargo bench --bench vision` times it as a whole process, beside
`attnviz -m MODEL_DIR --image IMAGE --png OUT.png`.
"""
import sys


def main():
    model_dir, image_path, out, threads = sys.argv[1:5]
    import os

    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import torch
    from PIL import Image
    from transformers import AutoImageProcessor, AutoModel

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    torch.set_num_threads(int(threads))
    processor = AutoImageProcessor.from_pretrained(model_dir)
    model = AutoModel.from_pretrained(model_dir, attn_implementation="eager")
    model.eval()
    image = Image.open(image_path).convert("RGB")
    inputs = processor(images=image, return_tensors="pt")
    with torch.no_grad():
        outputs = model(**inputs, output_attentions=True)
    attention = outputs.attentions[-1][0].mean(0)  # [tokens, tokens], mean of the heads
    side = model.config.image_size // model.config.patch_size
    cls_map = attention[0, 1:].reshape(side, side).numpy()
    shown = inputs["pixel_values"][0].permute(1, 2, 0).numpy() * 0.5 + 0.5
    fig, ax = plt.subplots(figsize=(6, 6))
    ax.imshow(shown.clip(0, 1))
    ax.imshow(cls_map, cmap="viridis", alpha=0.5, extent=(0, shown.shape[1], shown.shape[0], 0),
              interpolation="nearest")
    ax.set_title(f"layer {model.config.num_hidden_layers - 1}, CLS, mean of heads")
    ax.axis("off")
    fig.savefig(out, dpi=100, bbox_inches="tight")


if __name__ == "__main__":
    main()
