#!/usr/bin/env python3
"""PyTorch anchor for `cargo bench --bench decoder`: transformers' LlamaForCausalLM loaded from
the same SmolLM2 GGUF file (dequantised to float32), eager attention, on the CPU, at a fixed
thread count.

It runs as a child of the bench and answers one command per line on stdin with one JSON line on
stdout, so the bench can alternate its own timings with these in the same run:

    load FILE.gguf                 -> {"load_s": seconds}
    forward N REPS                 -> {"times": [...], "cpu": [...]}   forward, output_attentions=True
    generate NEW REPS ID,ID,...    -> {"times": [...], "cpu": [...], "ids": [...]}   greedy generate

`times` are wall seconds, `cpu` the process's CPU seconds (user + system, all threads) over the
same calls.
    quit

On start it prints {"torch": version, "transformers": version, "threads": T}, or
{"error": "..."} and exits when torch, transformers or gguf cannot be imported.
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
    except Exception as e:  # noqa: BLE001 - any import failure means "no anchor"
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}), flush=True)
        return
    # OpenMP's workers sleep while they wait: a 128x576x576 matmul at 2 threads on the busy
    # machine took 12-30 ms with spinning workers against 2.3-3.0 ms (see torch_setup.py).
    started = start_torch(args.threads)
    if started is None:
        return
    torch, transformers = started
    from transformers import AutoModelForCausalLM
    print(json.dumps({"torch": torch.__version__, "transformers": transformers.__version__,
                      "threads": torch.get_num_threads(),
                      "omp_wait_policy": os.environ["OMP_WAIT_POLICY"]}), flush=True)
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
            times, cpu = [], []
            with torch.inference_mode():
                for _ in range(reps):
                    start, start_cpu = time.perf_counter(), cpu_seconds()
                    out = model.model(input_ids=ids, output_attentions=True)
                    times.append(time.perf_counter() - start)
                    cpu.append(cpu_seconds() - start_cpu)
                    assert len(out.attentions) == model.config.num_hidden_layers
            print(json.dumps({"times": times, "cpu": cpu}), flush=True)
        elif cmd[0] == "generate":
            new, reps = int(cmd[1]), int(cmd[2])
            prompt = torch.tensor([[int(i) for i in cmd[3].split(",")]])
            times, cpu = [], []
            with torch.inference_mode():
                for _ in range(reps):
                    start, start_cpu = time.perf_counter(), cpu_seconds()
                    out = model.generate(prompt, attention_mask=torch.ones_like(prompt),
                                         do_sample=False, num_beams=1, max_new_tokens=new,
                                         pad_token_id=model.config.eos_token_id)
                    times.append(time.perf_counter() - start)
                    cpu.append(cpu_seconds() - start_cpu)
            ids = out[0, prompt.shape[1]:].tolist()
            print(json.dumps({"times": times, "cpu": cpu, "ids": ids}), flush=True)
        else:
            print(json.dumps({"error": f"unknown command {cmd[0]}"}), flush=True)


if __name__ == "__main__":
    main()
