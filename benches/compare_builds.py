#!/usr/bin/env python3
"""Compare two builds of attnviz's engine on a shared machine: `benches/forward_cpu.rs` built
from each revision, run alternately process by process, and tabulated as median (min) of wall
time and of CPU time, with the after/before ratio.

    python3 benches/compare_builds.py BEFORE_BIN AFTER_BIN --model minilm=DIR --model base=DIR \\
        [--rounds 8] [--threads 1,2] [--sizes 12:10,128:4,512:2] [--torch PYTHON]

BEFORE_BIN and AFTER_BIN are forward_cpu bench executables. To build one for another revision:

    git worktree add ../attnviz-before REV
    cp benches/forward_cpu.rs ../attnviz-before/benches/   # and its [[bench]] entry in Cargo.toml
    (cd ../attnviz-before && cargo bench --no-run --bench forward_cpu)

(`cargo bench --no-run` prints the executable's path.) Each round runs, for every model and
thread count, BEFORE then AFTER, so both sample the same moments of the machine. With one
thread, CPU time is the steadier figure: other processes stretch the wall time but barely the
work a single-threaded process does. "load" is the first load in a fresh process (weights and
tokenizer), as a CLI run pays it. With `--torch PYTHON` (an interpreter with torch and
transformers), each round also loads each model once in a fresh `benches/torch_anchor.py`
process (after its imports; `BertModel` + `AutoTokenizer.from_pretrained`, as the engine bench
does), printed as the anchor's first load beside ours.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys


def run(binary, model_dir, threads, sizes):
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads))
    out = subprocess.run([binary, model_dir, "1", *sizes], env=env, check=True,
                         capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        parts = line.split()
        if parts[:1] == ["load"]:
            rows.append(("load", float(parts[1]), float(parts[2])))
        elif parts[:1] == ["fwd"]:
            rows.append((int(parts[1]), float(parts[2]), float(parts[3])))
    return rows


def torch_first_load(python, model_dir, threads):
    """Seconds → ms of one transformers load in a fresh anchor process (wall only)."""
    anchor = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_anchor.py")
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    out = subprocess.run([python, anchor, "--threads", str(threads)], env=env, check=True,
                         input=f"load m {model_dir}\nquit\n", capture_output=True,
                         text=True).stdout.splitlines()
    hello, answer = json.loads(out[0]), json.loads(out[1])
    if "load_s" not in answer:
        raise SystemExit(f"torch anchor: {hello} {answer}")
    return answer["load_s"] * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--model", action="append", required=True, metavar="NAME=DIR")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--sizes", default="12:10,128:4,512:2")
    parser.add_argument("--torch", metavar="PYTHON")
    args = parser.parse_args()
    models = [m.split("=", 1) for m in args.model]
    threads = [int(t) for t in args.threads.split(",")]
    sizes = args.sizes.split(",")
    samples = {}  # (model, threads, what, build) -> [(wall, cpu)]
    with open("/proc/loadavg") as f:
        print("load average before:", " ".join(f.read().split()[:3]), file=sys.stderr)
    for r in range(args.rounds):
        for name, model_dir in models:
            for t in threads:
                for build, binary in (("before", args.before), ("after", args.after)):
                    for what, wall, cpu in run(binary, model_dir, t, sizes):
                        samples.setdefault((name, t, what, build), []).append((wall, cpu))
                if args.torch:
                    ms = torch_first_load(args.torch, model_dir, t)
                    samples.setdefault((name, t, "load", "torch"), []).append((ms, ms))
        print(f"round {r + 1}/{args.rounds}", file=sys.stderr)
    with open("/proc/loadavg") as f:
        print("load average after:", " ".join(f.read().split()[:3]), file=sys.stderr)

    def stats(xs):
        return f"{statistics.median(xs):9.2f} ({min(xs):8.2f})"

    print(f"{'model':<8} {'thr':>3} {'what':>5} {'runs':>5} | {'wall before':>20} "
          f"{'wall after':>20} {'ratio':>5} | {'CPU before':>20} {'CPU after':>20} {'ratio':>5}")
    print("(milliseconds, median (min); ratio: after/before of the medians)")
    keys = sorted({k[:3] for k in samples}, key=lambda k: (k[0], k[1], str(k[2]).zfill(6)))
    for name, t, what in keys:
        b = samples.get((name, t, what, "before"), [])
        a = samples.get((name, t, what, "after"), [])
        if not a or not b:
            continue
        cols = []
        for i in (0, 1):
            xb, xa = [s[i] for s in b], [s[i] for s in a]
            ratio = statistics.median(xa) / statistics.median(xb)
            cols.append(f"{stats(xb):>20} {stats(xa):>20} {ratio:5.2f}")
        print(f"{name:<8} {t:>3} {what:>5} {len(a):>5} | {cols[0]} | {cols[1]}")
        tr = [s[0] for s in samples.get((name, t, what, "torch"), [])]
        if tr:
            ratio = statistics.median([s[0] for s in a]) / statistics.median(tr)
            print(f"{'':<8} {'':>3} {'':>5} {len(tr):>5} | transformers first load (wall) "
                  f"{stats(tr)}; after/transformers {ratio:.2f}")


if __name__ == "__main__":
    main()
