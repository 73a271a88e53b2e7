#!/usr/bin/env python3
"""PyTorch anchor for `cargo bench --bench engine`: HF transformers BertModel, eager attention,
output_attentions=True, float32 on the CPU, at a fixed thread count.

It runs as a child of the bench and answers one command per line on stdin with one JSON line on
stdout, so the bench can alternate its own timings with these in the same run:

    load NAME DIR          -> {"load_s": seconds}     (model and tokenizer, as attnviz loads both)
    time NAME N REPS       -> {"times": [seconds, ...], "cpu": [seconds, ...]}
                              (forward + attentions, N tokens; wall and process CPU time)
    quit

OpenMP's workers sleep while they wait (OMP_WAIT_POLICY=PASSIVE unless the caller sets it), as
rayon's do and as in benches/decoder_anchor.py: spinning workers on a shared 2-core machine hold
the core the other worker needs and make PyTorch's wall time 5-30x worse, which would flatter us.

On start it prints {"torch": version, "transformers": version, "threads": T, "isa": ...,
"omp_wait_policy": ...}, or
{"error": "..."} and exits when torch or transformers cannot be imported.
"""
import argparse
import json
import os
import sys
import time

from torch_setup import start_torch


def token_ids(n):
    """The same ids the Rust bench uses: [CLS] 1000+(37·i mod 20000) … [SEP]."""
    return [101] + [1000 + (37 * i) % 20000 for i in range(1, n - 1)] + [102]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, required=True)
    args = parser.parse_args()
    started = start_torch(args.threads)
    if started is None:
        return
    torch, transformers = started
    from transformers import AutoTokenizer, BertModel
    mkl = os.environ.get("MKL_ENABLE_INSTRUCTIONS")
    isa = f"ATen {torch.backends.cpu.get_cpu_capability()}" + (f", MKL {mkl}" if mkl else "")
    print(json.dumps({"torch": torch.__version__, "transformers": transformers.__version__,
                      "threads": torch.get_num_threads(), "isa": isa,
                      "omp_wait_policy": os.environ["OMP_WAIT_POLICY"]}), flush=True)
    models = {}
    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        if cmd[0] == "quit":
            break
        if cmd[0] == "load":
            start = time.perf_counter()
            model = BertModel.from_pretrained(cmd[2], attn_implementation="eager",
                                              dtype=torch.float32, add_pooling_layer=False)
            model.eval()
            AutoTokenizer.from_pretrained(cmd[2])
            models[cmd[1]] = model
            print(json.dumps({"load_s": time.perf_counter() - start}), flush=True)
        elif cmd[0] == "time":
            model, n, reps = models[cmd[1]], int(cmd[2]), int(cmd[3])
            ids = torch.tensor([token_ids(n)])
            types = torch.zeros_like(ids)
            mask = torch.ones_like(ids)
            times, cpu = [], []
            with torch.inference_mode():
                for _ in range(reps):
                    start, start_cpu = time.perf_counter(), time.process_time()
                    out = model(input_ids=ids, token_type_ids=types, attention_mask=mask,
                                output_attentions=True)
                    times.append(time.perf_counter() - start)
                    cpu.append(time.process_time() - start_cpu)
                    assert len(out.attentions) == model.config.num_hidden_layers
            print(json.dumps({"times": times, "cpu": cpu}), flush=True)
        else:
            print(json.dumps({"error": f"unknown command {cmd[0]}"}), flush=True)


if __name__ == "__main__":
    main()
