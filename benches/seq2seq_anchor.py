#!/usr/bin/env python3
"""PyTorch anchor for `cargo bench --bench seq2seq`: transformers' T5ForConditionalGeneration on
the same t5-small-shaped random checkpoint the bench wrote, eager attention, on the CPU, at a
fixed thread count, with output_attentions=True (encoder, decoder and cross-attention).

    seq2seq_anchor.py --threads T --model DIR --source TEXT --target TEXT --reps R

prints one JSON line: versions, load_s (from_pretrained), and times (seconds per run of one
teacher-forced step: tokenize the source and the target as text_target, then one forward with
the labels shifted right, every attention returned), the decoder length, and the process's
wall time from start (imports included) to the end of its first run ("first_run_s"). With
torch or transformers missing it prints {"error": ...}.
"""
import argparse
import json
import os
import time

from torch_setup import start_torch

START = time.perf_counter()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--target", required=True)
    parser.add_argument("--reps", type=int, default=10)
    args = parser.parse_args()
    started = start_torch(args.threads)
    if started is None:
        return
    torch, transformers = started
    from transformers import AutoTokenizer, T5ForConditionalGeneration
    t0 = time.perf_counter()
    tok = AutoTokenizer.from_pretrained(args.model)
    model = T5ForConditionalGeneration.from_pretrained(
        args.model, attn_implementation="eager", dtype=torch.float32
    ).eval()
    load_s = time.perf_counter() - t0

    def run():
        enc = tok(args.source, return_tensors="pt")
        labels = tok(text_target=args.target, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            out = model(**enc, labels=labels, output_attentions=True)
        return out, labels.shape[1]

    _, m = run()
    first_run_s = time.perf_counter() - START
    times = []
    for _ in range(args.reps):
        t = time.perf_counter()
        run()
        times.append(time.perf_counter() - t)
    print(json.dumps({
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "threads": torch.get_num_threads(),
        "omp_wait_policy": os.environ["OMP_WAIT_POLICY"],
        "load_s": load_s,
        "first_run_s": first_run_s,
        "decoder_tokens": m,
        "times": times,
    }), flush=True)


if __name__ == "__main__":
    main()
