#!/usr/bin/env python3
"""The Python job a user writes today to see where a vision-language model looks (issue 42,
requirement 6): transformers with eager attention and `output_attentions=True`, then the last
prompt token's attention to the picture's tokens (last layer, mean of the heads) drawn over the
picture with matplotlib, as the answers to LLaVA's and Qwen-VL's attention questions do.

    python3 benches/vlm_python_job.py MODEL_DIR IMAGE OUT.png THREADS TOKENS

MODEL_DIR is a transformers folder with its processor (scripts/make-synthetic-vlm.py writes the
SmolVLM-256M-shaped one); the prompt is the picture followed by common words cut to TOKENS
tokens by the model's tokenizer, the rule of benches/llama_cpp_vlm_anchor.py and the attnviz
side. The processor splits the picture as the model's processor does (SmolVLM: 512-px tiles
and a global view). The overlay is the global view's tokens, a square grid, over the picture.
`cargo bench --bench vlm` times it as a whole process beside the attnviz CLI. Prints the
sequence's length on stderr.
"""
import sys

WORDS = ["the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be",
         "by", "on", "not"]


def prompt_text(count, tokens):
    text, i = "", 0
    while True:
        nxt = WORDS[0] if not text else f"{text} {WORDS[(i * 7 + i // 16) % 16]}"
        n = count(nxt)
        if n > tokens:
            return text
        text, i = nxt, i + 1
        if n == tokens:
            return text


def main():
    model_dir, image_path, out, threads, tokens = sys.argv[1:6]
    import os

    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import torch
    from PIL import Image
    from transformers import AutoModelForImageTextToText, AutoProcessor

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    torch.set_num_threads(int(threads))
    processor = AutoProcessor.from_pretrained(model_dir)
    model = AutoModelForImageTextToText.from_pretrained(
        model_dir, attn_implementation="eager", dtype=torch.float32)
    model.eval()
    tok = processor.tokenizer
    words = prompt_text(lambda s: len(tok(s, add_special_tokens=False)["input_ids"]), int(tokens))
    image = Image.open(image_path).convert("RGB")
    inputs = processor(text=f"<image>{words}", images=[image], return_tensors="pt")
    with torch.no_grad():
        outputs = model(**inputs, output_attentions=True)
    ids = inputs["input_ids"][0]
    print(f"{len(ids)} tokens, {len(outputs.attentions)} layers captured", file=sys.stderr)
    last = outputs.attentions[-1][0].mean(0)[-1]  # the last token's row, mean of the heads
    where = (ids == model.config.image_token_id).nonzero().flatten()
    per_view = processor.image_seq_len
    side = int(per_view ** 0.5)
    heat = last[where[-per_view:]].reshape(side, side).numpy()
    fig, ax = plt.subplots(figsize=(6, 6))
    ax.imshow(image)
    ax.imshow(heat, cmap="viridis", alpha=0.5, extent=(0, image.width, image.height, 0),
              interpolation="bilinear")
    ax.set_title(f"last layer, last token, mean of heads: {words.split()[-1]!r}")
    ax.axis("off")
    fig.savefig(out, dpi=100, bbox_inches="tight")


if __name__ == "__main__":
    main()
