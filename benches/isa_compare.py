#!/usr/bin/env python3
"""Forward + capture, attnviz against PyTorch eager, side by side on one instruction set.

    python3 benches/isa_compare.py FORWARD_CPU_BIN --model minilm=DIR --model base=DIR \\
        [--isa native,avx2] [--threads 1,2] [--sizes 12,128,512] [--rounds 8] [--torch PYTHON]

FORWARD_CPU_BIN is the `benches/forward_cpu.rs` executable (`cargo bench --no-run --bench
forward_cpu` prints its path). `--isa` takes a comma-separated list of paths, alternated round by
round: `native` (each side's own best: AVX-512 here), and `avx2`, which runs ours with `ATTNVIZ_ISA=avx2` (every kernel and
gemm on AVX2+FMA, as on a CPU without AVX-512) and PyTorch with `ATEN_CPU_CAPABILITY=avx2`,
`MKL_ENABLE_INSTRUCTIONS=AVX2` and `ONEDNN_MAX_CPU_ISA=AVX2` (ATen's kernels, MKL's sgemm and
oneDNN on AVX2). Each round runs, per model, thread count and size, one fresh attnviz process
(`reps` forward passes after a warm-up) and then the same number of passes in a PyTorch process
that stays up (`benches/torch_anchor.py`), so both sample the same moments of a shared machine.
PyTorch's OpenMP workers sleep while waiting (OMP_WAIT_POLICY=PASSIVE, set by the anchor).
Prints, per path, median (min) milliseconds per forward pass of wall time and of CPU time (the
process's user + system time over all its threads: on a busy machine the steadier figure), and
ours/PyTorch of the medians, with the load average before and after.
"""
import argparse
import json
import os
import statistics
import subprocess

REPS = {12: 20, 128: 6, 512: 2}


def torch_env(isa, threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    if isa == "avx2":  # anything else: each library's own choice
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
    if isa and isa != "native":
        env["ATTNVIZ_ISA"] = isa
    out = subprocess.run([binary, model_dir, "1", f"{size}:{reps}"], env=env, check=True,
                         capture_output=True, text=True).stdout
    rows = [p.split() for p in out.splitlines() if p.startswith("fwd ")]
    return [float(r[2]) for r in rows], [float(r[3]) for r in rows]


def fmt(xs):
    return f"{statistics.median(xs):8.2f} ({min(xs):7.2f})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binary")
    ap.add_argument("--model", action="append", required=True, help="NAME=DIR")
    ap.add_argument("--isa", default="native")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--sizes", default="12,128,512")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--torch", default="python3")
    a = ap.parse_args()
    models = dict(m.split("=", 1) for m in a.model)
    threads = [int(t) for t in a.threads.split(",")]
    sizes = [int(s) for s in a.sizes.split(",")]
    isas = a.isa.split(",")
    load_before = open("/proc/loadavg").read().split()[:3]
    anchors = {(i, t): Torch(a.torch, i, t) for i in isas for t in threads}
    for (i, t), anchor in anchors.items():
        print(f"PyTorch {i}, {t} thread(s): {anchor.hello}", flush=True)
        for name, d in models.items():
            anchor.ask(f"load {name} {d}")
            for n in sizes:
                anchor.ask(f"time {name} {n} 1")  # warm-up
    res = {}
    for _ in range(a.rounds):
        for i in isas:
            for t in threads:
                for name, d in models.items():
                    for n in sizes:
                        reps = REPS.get(n, 2)
                        ow, oc, pw, pc = res.setdefault((i, name, t, n), ([], [], [], []))
                        wall, cpu = ours(a.binary, d, i, t, n, reps)
                        ow += wall
                        oc += cpu
                        r = anchors[(i, t)].ask(f"time {name} {n} {reps}")
                        pw += [x * 1e3 for x in r["times"]]
                        pc += [x * 1e3 for x in r["cpu"]]
    for anchor in anchors.values():
        anchor.close()
    load_after = open("/proc/loadavg").read().split()[:3]
    print(f"{a.rounds} rounds; load average before {load_before}, after {load_after}")
    print(f"{'isa':6} {'model':8} {'thr':>3} {'tokens':>6} {'attnviz wall ms':>20} "
          f"{'PyTorch wall ms':>20} ratio {'attnviz CPU ms':>20} {'PyTorch CPU ms':>20} ratio")
    for (i, name, t, n), (ow, oc, pw, pc) in res.items():
        rw = statistics.median(ow) / statistics.median(pw)
        rc = statistics.median(oc) / statistics.median(pc)
        print(f"{i:6} {name:8} {t:3} {n:6} {fmt(ow):>20} {fmt(pw):>20} {rw:5.2f} "
              f"{fmt(oc):>20} {fmt(pc):>20} {rc:5.2f}")

if __name__ == "__main__":
    main()
