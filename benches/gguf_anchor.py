#!/usr/bin/env python3
"""Anchor for benches/gguf.rs: gguf-py (llama.cpp's Python GGUF reader, which transformers' GGUF
loading uses) opens the file and dequantises every tensor to float32 with numpy.

    python3 benches/gguf_anchor.py FILE.gguf

Prints one line as the Rust child does: open, tokenizer, chat, dequantise, total (seconds; the
tokenizer and chat steps are not measured here: nan) and the peak RSS in MB.
"""

import resource
import sys
import time

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

t0 = time.perf_counter()
reader = GGUFReader(sys.argv[1])
t1 = time.perf_counter()
out = {t.name: np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32) for t in reader.tensors}
t2 = time.perf_counter()
assert sum(v.size for v in out.values()) > 0
peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(f"{t1 - t0} nan nan {t2 - t1} {t2 - t0} {peak_mb}")
