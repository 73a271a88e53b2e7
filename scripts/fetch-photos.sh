#!/usr/bin/env bash
# Fetch a real photo for the gallery: scikit-image 0.26.0's `chelsea.png` (a cat, 451 × 300, in
# the public domain as the package's data) without the network beyond the package registry. The
# wheel is downloaded with `pip download --no-deps` into <repo>/.cache/pip, the photo unpacked
# into <repo>/.cache/photos (checksum-checked), and that folder printed on stdout:
#
#     attnviz -m MODEL --image "$(scripts/fetch-photos.sh)/chelsea.png" "What is this?"
#
# The wheel is CPython 3.11's (manylinux, x86_64): $PYTHON must be a 3.11 on that platform, or
# pip fetches another file than the one checked here. Idempotent: a second run only re-checks.
set -euo pipefail

NAME=photos
PACKAGE=scikit-image
VERSION=0.26.0
WHEEL=scikit_image-${VERSION}-cp311-cp311-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl
WHEEL_SHA256=74aa5518ccea28121f57a95374581d3b979839adc25bb03f289b1bc9b99c58af
WHEEL_MB=14
MEMBER_PREFIX=skimage/data/

declare -A SHA256=(
    [chelsea.png]=596aa1e7cb875eb79f437e310381d26b338a81c2da23439704a73c4651e8c4bb
)

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="$REPO/.cache/photos"

# shellcheck source=fetch-common.sh
source "$REPO/scripts/fetch-common.sh"

fetch_wheel_model
