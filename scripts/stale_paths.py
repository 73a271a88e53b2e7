#!/usr/bin/env python3
"""Stale-path check: every repository path that the docs, Cargo.toml, scripts, benches and the
sources' comments name must exist.

    python3 scripts/stale_paths.py          # exit 0: every named path exists; 1: lists the rest
    python3 scripts/stale_paths.py -v       # also says how many files and paths it looked at

Python 3 standard library only; it reads the repository's files once (well under a second).

What it reads: the files git tracks (and new files it does not ignore) among *.md anywhere,
Cargo.toml files, everything under scripts/ and benches/, the `//` comments of Rust files under
src/, tests/, examples/ and python/, and the `#` comments and docstrings of Python files under
tests/ and python/.

What counts as a path: a word that starts with one of the repository's top folders (`src/`,
`docs/`, `tests/`, `benches/`, `scripts/`, `python/`, `assets/`, `examples/`, `templates/`,
`.ci/`, `crates/`) and is not part of a longer path (`../src/x.rs`, a URL). It must exist as a
tracked file or folder, or a new file git does not ignore, from the repository root or, failing
that, from the folder of the file that names it (python/README.md may say `crates/attnviz/src/lib.rs`). A path
git ignores (tests/artifacts/…, written by the tests) is a generated output and passes.
Not checked: words with a glob or a placeholder in them (`crates/*/src`, `tests/reference/<case>.json`,
`src/{a,b}.rs`, `$DIR/x`, `…`), and the entries of IGNORE below, each with its reason.
CHANGELOG.md is history: it names files as they were then, so it is not read for paths.

Markdown links (`[text](target)`, `[text](target#anchor)`, `[text](#anchor)`) in every *.md,
CHANGELOG.md included, are checked too: the target relative to the linking file, and an anchor
against the target's headings as GitHub makes them (lower case, punctuation dropped, spaces to
hyphens, a repeated heading numbered -1, -2, ...).
"""

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TOPS = ("src", "docs", "tests", "benches", "scripts", "python", "assets", "examples", "templates",
        ".ci", "crates")

# (file that names it, path named) -> why it need not exist. "*" as the file: anywhere.
IGNORE = {
}

# Files read whole, and files of which only comments are read.
WHOLE = re.compile(r"(^|/)[^/]+\.md$|(^|/)Cargo\.toml$|^scripts/|^benches/")
COMMENTS_RS = re.compile(r"^(src|tests|examples|python)/.*\.rs$")
COMMENTS_PY = re.compile(r"^(tests|python)/.*\.py$")
NOT_READ = {"CHANGELOG.md"}

# A candidate: a top folder, then path characters. What may follow or precede it decides below.
CANDIDATE = re.compile(
    r"(?<![\w./~$-])(?:%s)/[\w.+/-]*" % "|".join(re.escape(t) for t in TOPS))
PLACEHOLDER_NEXT = set("*<{$…[%")
PLACEHOLDER_WORD = re.compile(r"(^|/)(N|NAME|X|XX|FILE|DIR|PATH|MODEL|CASE)(\.|/|$)")


def git(*args):
    out = subprocess.run(["git", "-C", ROOT, *args], check=True, capture_output=True, text=True)
    return out.stdout


def repository_files():
    """Tracked files plus new files git does not ignore, as repository-relative paths."""
    listed = git("ls-files", "-z", "--cached", "--others", "--exclude-standard")
    return sorted(p for p in set(listed.split("\0")) if p and os.path.exists(os.path.join(ROOT, p)))


def rust_comments(text):
    """The `//` comments of a Rust file (doc comments included), line by line; other lines empty,
    so line numbers stay. A `//` inside a string literal (a URL) is not a comment start."""
    lines = []
    for line in text.split("\n"):
        i = comment_start(line)
        lines.append(line[i:] if i >= 0 else "")
    return "\n".join(lines)


def comment_start(line):
    in_string = False
    i = 0
    while i < len(line) - 1:
        c = line[i]
        if in_string:
            if c == "\\":
                i += 2
                continue
            if c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c == "/" and line[i + 1] == "/":
            return i
        i += 1
    return -1


def python_comments(text):
    """`#` comments and triple-quoted strings (docstrings) of a Python file; other lines empty."""
    lines = text.split("\n")
    keep = [""] * len(lines)
    in_doc = None
    for n, line in enumerate(lines):
        if in_doc:
            keep[n] = line
            if in_doc in line:
                in_doc = None
            continue
        stripped = line.lstrip()
        for quote in ('"""', "'''"):
            if stripped.startswith(quote) or stripped.startswith("r" + quote):
                keep[n] = line
                if line.count(quote) == 1:
                    in_doc = quote
                break
        else:
            if "#" in line:
                keep[n] = line[line.index("#"):]
    return "\n".join(keep)


def named_paths(text):
    """(line number, path) for every repository path the text names."""
    for m in CANDIDATE.finditer(text):
        path = m.group(0)
        after = text[m.end():m.end() + 1]
        if after in PLACEHOLDER_NEXT:
            continue
        # Prose ends sentences with a full stop: "see docs/json.md." names docs/json.md.
        path = path.rstrip(".-")
        if path.endswith("/..") or "/../" in path or "//" in path:
            continue
        if PLACEHOLDER_WORD.search(path) or path.rstrip("/") in TOPS:
            continue
        line = text.count("\n", 0, m.start()) + 1
        yield line, path


LINK = re.compile(r"\]\(([^()\s]*)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")


def anchors(text):
    """The anchors GitHub gives a Markdown file's headings (fenced code blocks skipped)."""
    seen = {}
    out = set()
    fenced = False
    for line in text.split("\n"):
        if FENCE.match(line):
            fenced = not fenced
            continue
        m = None if fenced else HEADING.match(line)
        if not m:
            continue
        title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", m.group(2))  # a link: its text
        slug = "".join(c for c in title.lower() if c.isalnum() or c in " -_").replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def broken_links(f, text, known, read_text):
    """(line, link) for each Markdown link of file f whose target or anchor does not exist."""
    for m in LINK.finditer(text):
        target = m.group(1)
        if not target or re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue  # a URL (https:, mailto:, data:)
        path, _, anchor = target.partition("#")
        line = text.count("\n", 0, m.start()) + 1
        resolved = os.path.normpath(os.path.join(os.path.dirname(f), path)) if path else f
        if resolved not in known:
            yield line, target
        elif anchor and resolved.endswith(".md") and anchor not in anchors(read_text(resolved)):
            yield line, target


def main():
    verbose = "-v" in sys.argv[1:]
    files = repository_files()
    known = set(files)
    for f in files:
        parts = f.split("/")
        for i in range(1, len(parts)):
            known.add("/".join(parts[:i]))

    texts = {}

    def read_text(f):
        if f not in texts:
            with open(os.path.join(ROOT, f), encoding="utf-8") as fh:
                texts[f] = fh.read()
        return texts[f]

    links = []
    for f in files:
        if f.endswith(".md"):
            links.extend((f, line, target) for line, target in broken_links(f, read_text(f), known, read_text))

    # A path that exists only relative to the naming file, or that git ignores, is looked up
    # once more below; collect those first.
    found = []
    read = 0
    for f in files:
        if f in NOT_READ:
            continue
        whole = WHOLE.search(f)
        if not (whole or COMMENTS_RS.search(f) or COMMENTS_PY.search(f)):
            continue
        try:
            text = read_text(f)
        except (UnicodeDecodeError, IsADirectoryError):
            continue
        read += 1
        if not whole:
            text = rust_comments(text) if f.endswith(".rs") else python_comments(text)
        for line, path in named_paths(text):
            found.append((f, line, path))

    def exists(naming_file, path):
        bare = path.rstrip("/")
        if bare in known:
            return True
        folder = os.path.dirname(naming_file)
        while folder:
            if os.path.normpath(os.path.join(folder, bare)) in known:
                return True
            folder = os.path.dirname(folder)
        return False

    missing = [(f, line, p) for f, line, p in found
               if not exists(f, p) and (f, p) not in IGNORE and ("*", p) not in IGNORE]
    # Generated outputs: paths git ignores.
    if missing:
        asked = sorted({p for _, _, p in missing})
        ignored = subprocess.run(
            ["git", "-C", ROOT, "check-ignore", "--no-index", "--stdin"],
            input="\n".join(asked) + "\n", capture_output=True, text=True).stdout.split("\n")
        ignored = {p.rstrip("/") for p in ignored if p}
        missing = [(f, line, p) for f, line, p in missing if p.rstrip("/") not in ignored]

    if verbose:
        print(f"read {read} files, {len(found)} named paths, {len(set(p for _, _, p in found))} distinct")
    if links:
        print(f"{len(links)} Markdown links lead nowhere (no such file, or no such heading):")
        for f, line, target in links:
            print(f"  {f}:{line}: ({target})")
    if missing:
        print(f"{len(missing)} named paths do not exist:")
        for f, line, p in missing:
            print(f"  {f}:{line}: {p}")
        print("Point each to the file it means, reword it, or add it to IGNORE in "
              "scripts/stale_paths.py with the reason.")
    if links or missing:
        return 1
    if verbose:
        print("every named path exists")
    return 0


if __name__ == "__main__":
    sys.exit(main())
