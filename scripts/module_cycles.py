#!/usr/bin/env python3
"""Import circles among the files of one part of the crate, counted from their `use` lines.

    python3 scripts/module_cycles.py                   # the circles in crates/model/src
    python3 scripts/module_cycles.py src model --max 3 # and fail above 3 files
    python3 scripts/module_cycles.py --every src crates/*/src --max 3   # every folder (CI)

Two files are in a circle when each reaches the other through `use` paths (and inline `crate::` /
`super::` paths) outside `#[cfg(test)]` modules, directly or around a loop. A path counts as an
import of the deepest file it names: `use super::weights::Checkpoint` in `model/formats/config.rs`
imports `model/formats/weights.rs`; `use crate::model::Error` imports `model/mod.rs` (what it
re-exports does not count, which is why files inside `model/` import by the defining file's path).

Prints the size of every circle of more than one file, largest first ("0" when there is none), and
the files of the largest. With `--max N`, exits with status 1 when a circle has more than N files
(CI runs it so: `docs/architecture.md`, "Layers"). Based on the project's shared
tools/module_cycles.py.
"""

import argparse
import collections
import os
import re
import sys


def module_path(src: str, path: str) -> tuple:
    """With `src` = `crates/model/src`: `formats/mod.rs` -> ('formats',); `blocks/capture.rs` ->
    ('blocks', 'capture')."""
    parts = os.path.relpath(path, src)[:-3].split(os.sep)
    return tuple(parts[:-1] if parts[-1] == "mod" else parts)


def expand(tree: str) -> list:
    """'a::{b, c::{d, e}}' -> ['a::b', 'a::c::d', 'a::c::e']."""
    tree = tree.strip()
    i = tree.find("{")
    if i < 0:
        return [tree]
    head, body = tree[:i], tree[i + 1 : tree.rfind("}")]
    parts, depth, cur = [], 0, ""
    for ch in body:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    parts.append(cur)
    return [x for p in parts if p.strip() for x in expand(head + p.strip())]


def imports(src: str, files: list) -> dict:
    """File -> the files of the subtree it imports."""
    mods = {module_path(src, f): f for f in files}
    edges = collections.defaultdict(set)
    for f in files:
        with open(f, encoding="utf-8") as handle:
            text = handle.read()
        # Code before the first test module (test modules sit at the end of a file).
        text = re.split(r"#\[cfg\(test\)\]\s*(?:pub\s+)?mod\s+\w+\s*\{", text)[0]
        text = re.sub(r"//[^\n]*", "", text)
        here = module_path(src, f)
        paths = []
        for m in re.finditer(r"\buse\s+([^;]+);", text):
            paths += expand(m.group(1))
        paths += [m.group(0) for m in re.finditer(r"\b(?:crate|super)(?:::\w+)+", text)]
        for p in paths:
            p = re.sub(r"\s+as\s+\w+$", "", p.strip())
            segs = [s for s in p.split("::") if s]
            if not segs:
                continue
            if segs[0] == "crate":
                base, rest = [], segs[1:]
            elif segs[0] == "super":
                base, rest = list(here), segs
                while rest and rest[0] == "super":
                    base, rest = base[:-1], rest[1:]
            elif segs[0] == "self":
                base, rest = list(here), segs[1:]
            else:
                continue
            path = base + rest
            for k in range(len(path), 0, -1):
                target = mods.get(tuple(path[:k]))
                if target is not None:
                    if target != f:
                        edges[f].add(target)
                    break
    return edges


def circles(files: list, edges: dict) -> list:
    """Strongly connected components of more than one file (Tarjan), largest first."""
    sys.setrecursionlimit(100000)
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            found.append(component)

    for v in files:
        if v not in index:
            visit(v)
    return sorted((c for c in found if len(c) > 1), key=len, reverse=True)


def rust_files(root: str) -> list:
    return sorted(
        os.path.join(folder, name)
        for folder, _, names in os.walk(root)
        for name in names
        if name.endswith(".rs")
    )


def every(sources: list, limit) -> int:
    """Each folder of each crate source folder in `sources` (the source folder itself included),
    checked as its own part: one line per folder with a circle, then how many folders were
    checked; status 1 when a circle has more than `limit` files."""
    checked, failed = 0, 0
    for src in sources:
        if not os.path.isdir(src):
            print(f"error: {src} is not a folder", file=sys.stderr)
            return 2
        for folder, _, _ in sorted(os.walk(src)):
            files = rust_files(folder)
            if not files:
                continue
            checked += 1
            found = circles(files, imports(src, files))
            if not found:
                continue
            sizes = " ".join(str(len(c)) for c in found)
            print(f"{folder}: {sizes} ({' '.join(sorted(os.path.relpath(x, src) for x in found[0]))})")
            if limit is not None and len(found[0]) > limit:
                failed += 1
    print(f"{checked} folders checked; {failed} with a circle of more than {limit} files")
    if failed:
        print(
            f"error: {failed} folders have files that import each other in a circle of more than "
            f"{limit}; import from the file that defines an item, not through a mod.rs that "
            "re-exports it, and keep shared code below the files that use it",
            file=sys.stderr,
        )
        return 1
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src", nargs="?", default="src", help="the crate's source folder (src)")
    parser.add_argument("subtree", nargs="?", default="model", help="the part to check (model)")
    parser.add_argument("--max", type=int, help="fail when a circle has more files than this")
    parser.add_argument(
        "--every",
        nargs="+",
        metavar="SRC",
        help="check every folder of each of these crate source folders",
    )
    args = parser.parse_args()
    if args.every:
        return every(args.every, args.max)
    root = os.path.join(args.src, args.subtree)
    if not os.path.isdir(root):
        print(f"error: {root} is not a folder", file=sys.stderr)
        return 2
    files = rust_files(root)
    found = circles(files, imports(args.src, files))
    print(" ".join(str(len(c)) for c in found) or "0")
    if found:
        print(" ".join(sorted(os.path.relpath(x, args.src) for x in found[0])))
    if args.max is not None and found and len(found[0]) > args.max:
        print(
            f"error: {len(found[0])} files in {root} import each other in a circle (at most "
            f"{args.max} allowed); import from the file that defines an item, not through a mod.rs "
            "that re-exports it, and keep shared code below the files that use it",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
