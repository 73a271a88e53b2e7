#!/usr/bin/env python3
"""Forward + capture, attnviz against PyTorch eager, side by side on one instruction set.

    python3 benches/isa_compare.py FORWARD_CPU_BIN --model minilm=DIR --model base=DIR \\
        [--isa avx2|avx512] [--threads 1,2] [--sizes 12,128,512] [--rounds 8] [--torch PYTHON]

FORWARD_CPU_BIN is the `benches/forward_cpu.rs` executable (`cargo bench --no-run --bench
forward_cpu` prints its path). `--isa avx2` runs ours with `ATTNVIZ_ISA=avx2` (every kernel and
gemm on AVX2+FMA, as on a CPU without AVX-512) and PyTorch with `ATEN_CPU_CAPABILITY=avx2`,
`MKL_ENABLE_INSTRUCTIONS=AVX2` and `ONEDNN_MAX_CPU_ISA=AVX2` (ATen's kernels, MKL's sgemm and
oneDNN on AVX2). Each round runs, per model, thread count and size, one fresh attnviz process
(`reps` forward passes after a warm-up) and then the same number of passes in a PyTorch process
that stays up (`benches/torch_anchor.py`), so both sample the same moments of a shared machine.
Prints median (min) milliseconds of wall time per forward pass and ours/PyTorch of the medians.
"""
import argparse
import json
import os
import statistics
import subprocess

REPS = {12: 20, 128: 6, 512: 2}


def torch_env(isa, threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    if isa == "avx2":
        env.update(ATEN_CPU_CAPABILITY="avx2", MKL_ENABLE_INSTRUCTIONS="AVX2",
                   ONEDNN_MAX_CPU_ISA="AVX2")
    return env


class Torch:
    def __init__(self, python, isa, threads):
        anchor = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_anchor.py")
        self.p = subprocess.Popen([python, anchor, "--threads", str(threads)],
                                  env=torch_env(isa, threads), stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        self.hello = self.ask(None)

    def ask(self, line):
        if line is not None:
            self.p.stdin.write(line + "\n")
            self.p.stdin.flush()
        return json.loads(self.p.stdout.readline())

    def close(self):
        self.p.stdin.write("quit\n")
        self.p.stdin.close()
        self.p.wait()


def ours(binary, model_dir, isa, threads, size, reps):
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads))
    if isa:
        env["ATTNVIZ_ISA"] = isa
    out = subprocess.run([binary, model_dir, "1", f"{size}:{reps}"], env=env, check=True,
                         capture_output=True, text=True).stdout
    return [float(p.split()[2]) for p in out.splitlines() if p.startswith("fwd ")]


def fmt(xs):
    return f"{statistics.median(xs):8.2f} ({min(xs):7.2f})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binary")
    ap.add_argument("--model", action="append", required=True, help="NAME=DIR")
    ap.add_argument("--isa", default="")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--sizes", default="12,128,512")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--torch", default="python3")
    a = ap.parse_args()
    models = dict(m.split("=", 1) for m in a.model)
    threads = [int(t) for t in a.threads.split(",")]
    sizes = [int(s) for s in a.sizes.split(",")]
    anchors = {t: Torch(a.torch, a.isa, t) for t in threads}
    for t, anchor in anchors.items():
        print(f"PyTorch {t} thread(s): {anchor.hello}")
        for name, d in models.items():
            anchor.ask(f"load {name} {d}")
            for n in sizes:
                anchor.ask(f"time {name} {n} 1")  # warm-up
    res = {}
    for _ in range(a.rounds):
        for t in threads:
            for name, d in models.items():
                for n in sizes:
                    reps = REPS.get(n, 2)
                    key = (name, t, n)
                    o, p = res.setdefault(key, ([], []))
                    o += [x for x in ours(a.binary, d, a.isa, t, n, reps)]
                    p += [x * 1e3 for x in anchors[t].ask(f"time {name} {n} {reps}")["times"]]
    for anchor in anchors.values():
        anchor.close()
    print(f"isa {a.isa or 'native'}; load average {open('/proc/loadavg').read().split()[:3]}")
    print(f"{'model':8} {'thr':>3} {'tokens':>6} {'attnviz ms':>20} {'PyTorch ms':>20} ratio")
    for (name, t, n), (o, p) in res.items():
        r = statistics.median(o) / statistics.median(p)
        print(f"{name:8} {t:3} {n:6} {fmt(o):>20} {fmt(p):>20} {r:5.2f}")


if __name__ == "__main__":
    main()
