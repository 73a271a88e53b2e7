#!/usr/bin/env python3
"""PyTorch anchor for the corpus benchmark (benches/corpus.rs).

Runs the same corpus file through Hugging Face transformers' all-MiniLM-L6-v2 (eager attention,
output_attentions=True) the way a Python user would, and prints sentences/second and peak RSS:

- per sentence: one forward pass per line;
- batched: lines sorted by length in windows of 256, batches of 32 with padding.

Only the forward pass with attentions is timed: no statistics, no files. attnviz's figures
include statistics and (for `json`) writing every attention matrix.

    python3 benches/corpus_anchor.py target/corpus-bench/corpus-10000.txt [MODEL_DIR]

The corpus file is written by `cargo bench --bench corpus`. MODEL_DIR defaults to
$ATTNVIZ_MINILM_DIR or .cache/models/all-MiniLM-L6-v2.
"""

import os

# OpenMP workers sleep while they wait, as rayon's do (see benches/torch_anchor.py); set before
# torch starts OpenMP.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import resource
import sys
import time

import torch
from transformers import AutoModel, AutoTokenizer


def main():
    corpus = sys.argv[1]
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    model_dir = (
        sys.argv[2]
        if len(sys.argv) > 2
        else os.environ.get(
            "ATTNVIZ_MINILM_DIR", os.path.join(here, ".cache/models/all-MiniLM-L6-v2")
        )
    )
    lines = [l.rstrip("\n").split("\t") for l in open(corpus, encoding="utf-8")]
    start = time.perf_counter()
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModel.from_pretrained(model_dir, attn_implementation="eager").eval()
    load = time.perf_counter() - start
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']}; "
        f"{len(lines)} lines; import+load {load:.1f} s"
    )

    enc = [tok(*parts[:2], truncation=True, max_length=512) for parts in lines]
    tokens = sum(len(e["input_ids"]) for e in enc)

    with torch.inference_mode():
        start, cpu = time.perf_counter(), time.process_time()
        for e in enc:
            ids = torch.tensor([e["input_ids"]])
            types = torch.tensor([e["token_type_ids"]])
            out = model(input_ids=ids, token_type_ids=types, output_attentions=True)
            assert len(out.attentions) == 6
        per_sentence, cpu = time.perf_counter() - start, time.process_time() - cpu
        print(
            f"per sentence: {per_sentence:.1f} s, {len(enc) / per_sentence:.1f} sentences/s, "
            f"{tokens / per_sentence:.0f} tokens/s; CPU {cpu:.1f} s, "
            f"{len(enc) / cpu:.1f} sentences per CPU-second"
        )

        start, cpu = time.perf_counter(), time.process_time()
        for w in range(0, len(enc), 256):
            window = sorted(enc[w : w + 256], key=lambda e: len(e["input_ids"]))
            for b in range(0, len(window), 32):
                batch = tok.pad(window[b : b + 32], return_tensors="pt")
                out = model(**batch, output_attentions=True)
                assert len(out.attentions) == 6
        batched, cpu = time.perf_counter() - start, time.process_time() - cpu
        print(
            f"batched (32, sorted): {batched:.1f} s, {len(enc) / batched:.1f} sentences/s, "
            f"{tokens / batched:.0f} tokens/s; CPU {cpu:.1f} s, "
            f"{len(enc) / cpu:.1f} sentences per CPU-second"
        )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {peak:.0f} MiB")


if __name__ == "__main__":
    main()
