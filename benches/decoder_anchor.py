#!/usr/bin/env python3
"""PyTorch anchor for `cargo bench --bench decoder`: transformers' LlamaForCausalLM loaded from
the same SmolLM2 GGUF file (dequantised to float32), eager attention, on the CPU, at a fixed
thread count.

It runs as a child of the bench and answers one command per line on stdin with one JSON line on
stdout, so the bench can alternate its own timings with these in the same run:

    load FILE.gguf                 -> {"load_s": seconds}
    forward N REPS                 -> {"times": [...]}   forward with output_attentions=True
    generate NEW REPS ID,ID,...    -> {"times": [...], "ids": [...]}   greedy generate
    quit

On start it prints {"torch": version, "transformers": version, "threads": T}, or
{"error": "..."} and exits when torch, transformers or gguf cannot be imported.
"""
import argparse
import json
import os
import sys
import time


def token_ids(n):
    """The ids the Rust bench runs for an input of n tokens: 1000 + (37·i mod 40000)."""
    return [1000 + (37 * i) % 40000 for i in range(n)]


def main():
    # transformers' GGUF conversion draws a progress bar on stderr; the bench prints its own.
    os.environ.setdefault("TQDM_DISABLE", "1")
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, required=True)
    args = parser.parse_args()
    try:
        import gguf  # noqa: F401 - transformers needs it for GGUF files
        import torch
        import transformers
        from transformers import AutoModelForCausalLM
    except Exception as e:  # noqa: BLE001 - any import failure means "no anchor"
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}), flush=True)
        return
    torch.set_num_threads(args.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    print(json.dumps({"torch": torch.__version__, "transformers": transformers.__version__,
                      "threads": torch.get_num_threads()}), flush=True)
    model = None
    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        if cmd[0] == "quit":
            break
        if cmd[0] == "load":
            path = cmd[1]
            start = time.perf_counter()
            model = AutoModelForCausalLM.from_pretrained(
                os.path.dirname(path), gguf_file=os.path.basename(path),
                attn_implementation="eager", dtype=torch.float32)
            model.eval()
            print(json.dumps({"load_s": time.perf_counter() - start}), flush=True)
        elif cmd[0] == "forward":
            n, reps = int(cmd[1]), int(cmd[2])
            ids = torch.tensor([token_ids(n)])
            times = []
            with torch.inference_mode():
                for _ in range(reps):
                    start = time.perf_counter()
                    out = model.model(input_ids=ids, output_attentions=True)
                    times.append(time.perf_counter() - start)
                    assert len(out.attentions) == model.config.num_hidden_layers
            print(json.dumps({"times": times}), flush=True)
        elif cmd[0] == "generate":
            new, reps = int(cmd[1]), int(cmd[2])
            prompt = torch.tensor([[int(i) for i in cmd[3].split(",")]])
            times = []
            with torch.inference_mode():
                for _ in range(reps):
                    start = time.perf_counter()
                    out = model.generate(prompt, attention_mask=torch.ones_like(prompt),
                                         do_sample=False, num_beams=1, max_new_tokens=new,
                                         pad_token_id=model.config.eos_token_id)
                    times.append(time.perf_counter() - start)
            ids = out[0, prompt.shape[1]:].tolist()
            print(json.dumps({"times": times, "ids": ids}), flush=True)
        else:
            print(json.dumps({"error": f"unknown command {cmd[0]}"}), flush=True)


if __name__ == "__main__":
    main()
