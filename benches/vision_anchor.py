#!/usr/bin/env python3
"""PyTorch anchor for `cargo bench --bench vision`, and the maker of its model.

    python3 benches/vision_anchor.py --make DIR

writes a ViT-B/16 at 224×224 with random weights (the shapes and preprocessor_config.json of
`google/vit-base-patch16-224`: 12 layers × 12 heads, hidden 768, 197 tokens) into DIR, since the
hub cannot be reached here; the speed depends on the shapes, not on the values.

    python3 benches/vision_anchor.py --threads T

runs as a child of the bench and answers one command per line on stdin with one JSON line:

    load DIR               -> {"load_s": seconds}
    forward IMAGE REPS     -> {"times": [...], "cpu": [...]}   image processor + forward with
                              output_attentions=True (eager), per repetition
    quit

On start it prints {"torch": version, "transformers": version, "threads": T}, or
{"error": "..."} when torch or transformers cannot be imported.
"""
import argparse
import json
import os
import resource
import sys
import time

from torch_setup import start_torch


def cpu_seconds():
    """CPU time of this process so far, every thread, user + system."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def make(folder):
    import torch
    from transformers import ViTConfig, ViTForImageClassification, ViTImageProcessor

    torch.manual_seed(0)
    config = ViTConfig(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                       intermediate_size=3072, image_size=224, patch_size=16, num_labels=1000,
                       qkv_bias=True, hidden_act="gelu", layer_norm_eps=1e-12)
    model = ViTForImageClassification(config).eval()
    model.save_pretrained(folder, safe_serialization=True)
    ViTImageProcessor(do_resize=True, size={"height": 224, "width": 224}, resample=2,
                      do_rescale=True, rescale_factor=1 / 255, do_normalize=True,
                      image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5]).save_pretrained(folder)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int)
    parser.add_argument("--make")
    args = parser.parse_args()
    if args.make:
        make(args.make)
        return
    started = start_torch(args.threads)
    if started is None:
        return
    torch, transformers = started
    from PIL import Image
    from transformers import AutoImageProcessor, AutoModel

    print(json.dumps({"torch": torch.__version__, "transformers": transformers.__version__,
                      "threads": torch.get_num_threads(),
                      "omp_wait_policy": os.environ["OMP_WAIT_POLICY"]}), flush=True)
    model = processor = None
    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        if cmd[0] == "quit":
            break
        if cmd[0] == "load":
            start = time.perf_counter()
            processor = AutoImageProcessor.from_pretrained(cmd[1])
            model = AutoModel.from_pretrained(cmd[1], attn_implementation="eager").eval()
            print(json.dumps({"load_s": time.perf_counter() - start}), flush=True)
        elif cmd[0] == "forward":
            path, reps = cmd[1], int(cmd[2])
            times, cpu = [], []
            with torch.inference_mode():
                for _ in range(reps):
                    start, start_cpu = time.perf_counter(), cpu_seconds()
                    image = Image.open(path).convert("RGB")
                    inputs = processor(images=image, return_tensors="pt")
                    out = model(**inputs, output_attentions=True)
                    times.append(time.perf_counter() - start)
                    cpu.append(cpu_seconds() - start_cpu)
                    assert len(out.attentions) == model.config.num_hidden_layers
            print(json.dumps({"times": times, "cpu": cpu}), flush=True)
        else:
            print(json.dumps({"error": f"unknown command {cmd[0]}"}), flush=True)


if __name__ == "__main__":
    main()
