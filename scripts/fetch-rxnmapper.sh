#!/usr/bin/env bash
# Fetch rxnmapper's ALBERT checkpoint (AlbertForMaskedLM: 12 layers sharing one set of weights,
# hidden 256, embedding 128, 8 heads, 591-token SMILES vocab.txt) without the Hugging Face hub.
#
# The model ships inside the PyPI package rxnmapper 0.4.3 as a pre-1.6 (non-zip) pickle
# pytorch_model.bin. This script downloads the wheel with `pip download --no-deps` into
# <repo>/.cache/pip, unpacks the checkpoint folder into <repo>/.cache/models/rxnmapper-albert (or
# $ATTNVIZ_RXNMAPPER_DIR when set), checks every file against the checksums below, and prints the
# folder on stdout (all other messages go to stderr). Idempotent.
#
# rxnmapper tokenizes a reaction SMILES with a regular expression and looks each match up whole in
# vocab.txt (no WordPiece splitting); tests/reference/README.md describes it.
set -euo pipefail

NAME=rxnmapper
PACKAGE=rxnmapper
VERSION=0.4.3
WHEEL=rxnmapper-${VERSION}-py3-none-any.whl
WHEEL_SHA256=27876a4286881aafd286fd6f24a6a56a4ca6ba22d68e035a0ea120106c541ba5
WHEEL_MB=3
MEMBER_PREFIX=rxnmapper/models/transformers/albert_heads_8_uspto_all_1310k/

declare -A SHA256=(
    [config.json]=ea0f3144af1d13a5d5928cff01abd8e7c14ab831ff7b6d73a14d4162864a876f
    [pytorch_model.bin]=8541f3f500dae71abe678d546bd035ca946e2d1c819f6b2cf41a97faedd7e6a2
    [vocab.txt]=399868a653e85549ce150af4a1f6cd2776240c6a3d951ced2120565f00f027fd
    [special_tokens_map.json]=303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3
    [tokenizer_config.json]=44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a
)

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${ATTNVIZ_RXNMAPPER_DIR:-$REPO/.cache/models/rxnmapper-albert}"

# shellcheck source=fetch-common.sh
source "$REPO/scripts/fetch-common.sh"
fetch_wheel_model
