#!/usr/bin/env python3
"""Hostile cases of corpus mode (issue 20, requirements 9, 10, 15, 16, 17, 18), one case folder
each, for scripts/measure-hostile.sh (see its header for what a case folder holds).

    python3 scripts/hostile/corpus.py OUT_DIR

Some cases need an earlier run's output folder (a finished run, a killed run's journal, shards'
partial files): the generator makes them with the attnviz binary in $ATTNVIZ_BIN (default
target/release/attnviz), so measure the binary that made them:

    ATTNVIZ_BIN=target/release/attnviz python3 scripts/hostile/corpus.py target/hostile-cases
    bash scripts/measure-hostile.sh --cases target/hostile-cases target/release/attnviz

Every case runs the tiny fixture model (tests/fixtures/tiny-bert, relative to the repository
root, where measure-hostile.sh runs) and writes only inside its case folder (`out/`) or `{out}`.
What each case shows, before and after the fix, is in docs/hostile.md ("Corpus mode").
"""

import gzip
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = "tests/fixtures/tiny-bert"
BIN = os.environ.get("ATTNVIZ_BIN", os.path.join(ROOT, "target/release/attnviz"))
LINES = "the cat sat on the mat .\nwhere did the dog go ?\nthe fox jumps .\n"


def case(out, name, args, files=None, setup=None, stdin=None):
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "args"), "w") as f:
        f.write("\n".join(args) + "\n")
    for rel, data in (files or {}).items():
        path = os.path.join(d, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data if isinstance(data, bytes) else data.encode())
    if setup:
        with open(os.path.join(d, "setup.sh"), "w") as f:
            f.write("set -e\n" + setup)
    if stdin is not None:
        with open(os.path.join(d, "stdin"), "wb") as f:
            f.write(stdin)
    return d


def corpus_args(*extra, inp="{case}/input.txt", out="{case}/out"):
    return ["-m", MODEL, "--input", inp, "--out-dir", out, "--threads", "1", "-q", *extra]


def run(args, **kw):
    return subprocess.run([BIN, *args], cwd=ROOT, capture_output=True, **kw)


def finished_run(d, extra=()):
    """A finished run of LINES into d/prior."""
    r = run(corpus_args(*extra, inp=os.path.join(d, "input.txt"), out=os.path.join(d, "prior")))
    assert r.returncode == 0, r.stderr.decode()


def killed_run(d, lines, n):
    """A run reading standard input, killed (SIGKILL) once it wrote n sentences: its journal
    holds them, its partial file (written when it started) none."""
    prior = os.path.join(d, "prior")
    p = subprocess.Popen(
        [BIN, "-m", MODEL, "--input", "-", "--out-dir", prior, "--threads", "1", "-q"],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    p.stdin.write(lines.encode())
    p.stdin.flush()
    sentences = os.path.join(prior, "sentences")
    start = time.time()
    while True:
        done = [f for f in os.listdir(sentences)] if os.path.isdir(sentences) else []
        if len([f for f in done if not f.startswith(".")]) >= n:
            break
        assert time.time() - start < 120, "the run wrote no sentences"
        time.sleep(0.01)
    time.sleep(0.3)
    p.send_signal(signal.SIGKILL)
    p.wait()
    p.stdin.close()


def journal_set_inf(prior):
    """Set head 0's entropy in the first record of the journal to inf, with a valid CRC (the
    layout of crates/attnviz/src/corpus/journal.rs; version 2 has no input digest, version 3 has)."""
    names = sorted(f for f in os.listdir(prior) if f.startswith(".corpus_journal."))
    for name in names:
        path = os.path.join(prior, name)
        data = bytearray(open(path, "rb").read())
        if len(data) < 8:
            continue
        length, _ = struct.unpack_from("<II", data, 0)
        payload = 8
        version = data[payload]
        at = payload + 1 + 8 + (8 + 32 if version >= 3 else 0)
        assert data[at] == 0, "not a sentence record"
        at += 1
        (name_len,) = struct.unpack_from("<I", data, at)
        at += 4 + name_len + 1 + 8 + 8 + 4 + 4 + 8
        struct.pack_into("<d", data, at, float("inf"))
        struct.pack_into("<I", data, 4, zlib.crc32(bytes(data[8:8 + length])))
        open(path, "wb").write(bytes(data))
        return
    raise SystemExit("no journal record to damage")


def shards(d):
    """Shards 1/2 and 2/2 of LINES: their partial files as d/a.json and d/b.json."""
    for k, name in ((1, "a.json"), (2, "b.json")):
        out = os.path.join(d, f"shard-{k}")
        r = run(corpus_args("--per-sentence", "none", "--shard", f"{k}/2",
                            inp=os.path.join(d, "input.txt"), out=out))
        assert r.returncode == 0, r.stderr.decode()
        shutil.copy(os.path.join(out, "corpus_partial.json"), os.path.join(d, name))
        shutil.rmtree(out)


def edit_field(path, field, value):
    lines = open(path).read().split("\n")
    key = f'  "{field}": '
    for i, line in enumerate(lines):
        if line.startswith(key):
            lines[i] = key + value + ("," if line.endswith(",") else "")
            break
    else:
        raise SystemExit(f"no field {field} in {path}")
    open(path, "w").write("\n".join(lines))


def main(out):
    os.makedirs(out, exist_ok=True)
    victim = 'rm -rf out victim.txt victim-dir && echo "keep me" > victim.txt && mkdir victim-dir && mkdir -p out/sentences\n'

    # Requirement 10: links planted in the output folder.
    for name, target, flags in [
        ("corpus_stats.json", "victim.txt", []),
        ("corpus_stats.json", "victim.txt", ["--force"]),
        ("corpus_partial.json", "victim.txt", []),
        (".corpus_journal.0", "victim.txt", []),
        (".corpus.lock", "victim.txt", []),
        ("sentences", "victim-dir", []),
        ("sentences/000001.json", "victim.txt", ["--force"]),
    ]:
        label = name.replace("/", "-").lstrip(".") + ("-force" if flags else "")
        setup = victim + ("rmdir out/sentences\n" if name == "sentences" else "")
        setup += f'ln -s "$PWD/{target}" out/{name}\n'
        case(out, f"link-{label}", corpus_args(*flags), {"input.txt": LINES}, setup)

    # Requirement 15: a FIFO or a character device where the run reads or locks.
    prior_copy = "rm -rf out && cp -a prior out\n"
    d = case(out, "fifo-lock", corpus_args(), {"input.txt": LINES},
             "rm -rf out && mkdir out && mkfifo out/.corpus.lock\n")
    for node, label, make in [
        (".corpus_journal.0", "fifo-journal-resume", "mkfifo out/.corpus_journal.0"),
        (".corpus_journal.0", "chardev-journal-resume",
         "mknod out/.corpus_journal.0 c 1 5 2>/dev/null || mkfifo out/.corpus_journal.0"),
        ("corpus_partial.json", "fifo-partial-resume",
         "rm out/corpus_partial.json && mkfifo out/corpus_partial.json"),
        ("corpus_stats.json", "fifo-summary-force",
         "rm out/corpus_stats.json && mkfifo out/corpus_stats.json"),
    ]:
        flags = ["--force"] if label.endswith("force") else ["--resume"]
        d = case(out, label, corpus_args("--per-sentence", "none", *flags), {"input.txt": LINES},
                 prior_copy + make + "\n")
        finished_run(d, ["--per-sentence", "none"])

    # Requirement 16: --resume with another input than the killed run read.
    lines = "the cat sat .\nthe dog ran .\na fox .\nwhere is it ?\nthe end .\n"
    d = case(out, "resume-other-input", corpus_args("--resume", inp="{case}/changed.txt"),
             {"changed.txt": lines.replace("the end .", "the END ."),
              "same.txt": lines}, prior_copy)
    killed_run(d, lines, 5)
    # Requirement 18: a journal record holding inf.
    d = case(out, "journal-inf", corpus_args("--resume", inp="{case}/same.txt"),
             {"same.txt": lines}, prior_copy)
    killed_run(d, lines, 5)
    journal_set_inf(os.path.join(d, "prior"))

    # Requirement 17: 10^8 empty lines in 97 KB of gzip.
    d = case(out, "gzip-1e8-empty-lines",
             corpus_args("--per-sentence", "none", inp="{case}/empty.gz", out="{out}/o"))
    with gzip.open(os.path.join(d, "empty.gz"), "wb", compresslevel=9) as f:
        chunk = b"\n" * 10**7
        for _ in range(10):
            f.write(chunk)

    # Requirement 18: merge of partial files holding numbers no run writes.
    merge_args = ["merge", "{case}/a.json", "{case}/b.json", "--out", "{out}/merged.json", "-q"]
    for label, edits in [
        ("merge-lines-1e18", [("a.json", "lines", "1000000000000000000"),
                              ("b.json", "lines", "1000000000000000000")]),
        ("merge-lines-1e999", [("b.json", "lines", "1e999")]),
        ("merge-tokens-overflow", [("a.json", "tokens", "18446744073709551000"),
                                   ("b.json", "tokens", "18446744073709551000")]),
        ("merge-negative-sum", []),
        ("merge-shard-count-1e18", []),
    ]:
        d = case(out, label, merge_args, {"input.txt": LINES})
        shards(d)
        for file, field, value in edits:
            edit_field(os.path.join(d, file), field, value)
        if label == "merge-negative-sum":
            p = os.path.join(d, "b.json")
            v = json.load(open(p))
            v["sums"]["sum"]["entropy"][0][0] = "-18446744073709551616000"
            json.dump(v, open(p, "w"))
        if label == "merge-shard-count-1e18":
            for name in ("a.json", "b.json"):
                p = os.path.join(d, name)
                text = open(p).read().replace('"count":2,', '"count":1000000000000000000,')
                open(p, "w").write(text)

    # Requirement 9: a JSON Lines id holding terminal escapes (clipboard write, clear screen) and
    # a bidi override, quoted by the bad-id warning.
    case(out, "bad-id-escapes", corpus_args(inp="{case}/ids.jsonl", out="{out}/o"),
         {"ids.jsonl": '{"id": "ok-1", "text": "the cat sat ."}\n'
                       '{"id": "\\u001b]52;c;aGk=\\u0007\\u001b[2J", "text": "the dog ."}\n'
                       '{"id": "a\\u202eb", "text": "a fox ."}\n'})


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    main(sys.argv[1])
