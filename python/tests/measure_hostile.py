"""Measure the Python package's hostile cases (issue 20, requirements 19 and 20; issue 40's pictures
in memory, requirement 4): each case is a
few lines run in a fresh interpreter under /usr/bin/time -v, limited to 8 GiB of address space
and 60 s as scripts/measure-hostile.sh limits the CLI; printed: the outcome (the exception's
type and the first 110 characters of its message, or "returned"), the exit status, the wall
time and the peak resident memory. python/tests/test_hostile.py asserts what each must do; this
prints what it costs, for docs/hostile.md.

    PYTHON=/path/to/venv/bin/python python3 python/tests/measure_hostile.py [NPZ_CASES]

PYTHON is an interpreter with the attnviz wheel installed (default: this one). NPZ_CASES is a
folder written by scripts/hostile/render.py: its npz-f32 file (2**28 weights declared in 1 MB)
is read through attnviz.render too.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PYTHON = os.environ.get("PYTHON", sys.executable)

PRELUDE = """
import os, sys, numpy as np, attnviz
def att(n, layers=2, heads=3):
    a = np.random.default_rng(0).random((layers, heads, n, n)).astype(np.float32) + 0.05
    return a / a.sum(-1, keepdims=True)
A, T = att(4), ["[CLS]", "a", "b", "[SEP]"]
TINY = {tiny!r}
DEIT = {deit!r}
PAIR = {pair!r}
TMP = {tmp!r}
ESC = "\\x1b]52;c;aGk=\\x07\\x1b[2J"
try:
{body}
    print("OUTCOME returned")
except BaseException as e:
    print("OUTCOME " + type(e).__name__ + ": " + repr(str(e))[1:-1][:110])
    sys.exit(1)
"""

CASES = {
    "tokens with markup, head_view": "attnviz.head_view(att(3), ['</script><script>x()</script>', "
    "'<img src=x onerror=y>', '\\u202eevil'], html_action='return').data",
    "broadcast 2**36 weights, head_view": "attnviz.head_view(np.broadcast_to(np.float32(1 / 4096), "
    "(64, 64, 4096, 4096)), ['t'] * 4096)",
    "layer=10**30, run": "attnviz.run('x', model=TINY, layer=10**30)",
    "layer=NaN, run": "attnviz.run('x', model=TINY, layer=float('nan'))",
    "head=-1, run": "attnviz.run('x', model=TINY, head=-1)",
    "text of 400 kB, run": "attnviz.run('x ' * 200_000, model=TINY)",
    "model path with ESC, run": "attnviz.run('x', model=os.path.join(TMP, 'nope' + ESC))",
    "sentence_b_start=2**70": "attnviz.head_view(A, T, sentence_b_start=2**70)",
    "include_layers=[0, 9]": "attnviz.head_view(A, T, include_layers=[0, 9])",
    "tokens as one string": "attnviz.head_view(A, 'abcd')",
    "scale_factor=NaN, png": "attnviz.head_view(A, T, html_action='return').png(os.path.join(TMP, 'x.png'), "
    "scale_factor=float('nan'))",
    "FIFO, render": "p = os.path.join(TMP, 'f.npz'); os.mkfifo(p); attnviz.render(p)",
    "max_memory=1000, render": "attnviz.render(PAIR, max_memory=1000)",
    "2**28 weights in 1 MB, render": "attnviz.render({big!r})",
    "broadcast 1e10 pixels, run(image=)": "attnviz.run(image=np.broadcast_to(np.uint8(7), "
    "(100_000, 100_000, 3)), model=DEIT)",
    "float64 9000x9000x3, run(image=)": "attnviz.run(image=np.full((9000, 9000, 3), 0.5), model=DEIT)",
    "float64 4000x4000x3, run(image=)": "attnviz.run(image=np.full((4000, 4000, 3), 0.5), model=DEIT)",
    "0x0 PIL image, run(image=)": "from PIL import Image; attnviz.run(image=Image.new('RGB', (0, 0)), "
    "model=DEIT)",
}


def main() -> None:
    cases = Path(sys.argv[1]) if len(sys.argv) > 1 else None
    big = str(cases / "npz-f32" / "a.npz") if cases else None
    print(f"{'case':<38} {'exit':>4} {'wall s':>7} {'RSS MiB':>8}  outcome")
    for name, body in CASES.items():
        if "{big" in body and not big:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            code = PRELUDE.format(
                tiny=str(REPO / "tests/fixtures/tiny-bert"),
                deit=str(REPO / "tests/fixtures/tiny-deit"),
                pair=str(REPO / "tests/fixtures/render/tiny-bert-pair.npz"),
                tmp=tmp,
                body="    " + body.format(big=big),
            )
            script = Path(tmp) / "case.py"
            script.write_text(code, encoding="utf-8")
            cmd = f"ulimit -v {8 << 20}; exec timeout 60 /usr/bin/time -v {PYTHON} {script}"
            p = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, cwd=tmp)
        out, err = p.stdout, p.stderr
        outcome = re.search(r"^OUTCOME (.*)$", out, re.M)
        outcome = outcome.group(1) if outcome else (err.strip().splitlines() or ["?"])[-1][:110]
        wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", err)
        rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", err)
        sig = re.search(r"Command terminated by signal (\d+)", err)
        status = f"sig{sig.group(1)}" if sig else str(p.returncode)
        if p.returncode == 124:
            status, outcome = "124", "killed after 60 s (timeout)"
        print(
            f"{name:<38} {status:>4} {wall.group(1) if wall else '-':>7} "
            f"{int(rss.group(1)) // 1024 if rss else 0:>8}  {outcome}"
        )


if __name__ == "__main__":
    main()
