#!/usr/bin/env bash
# Regenerate every gallery image with the real CLI (the commands listed in README.md here).
# Run from the repository root after `cargo build --release` and `bash scripts/fetch-minilm.sh`
# (ATTNVIZ_BIN names another binary, e.g. one built into another CARGO_TARGET_DIR).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
attnviz() { "${ATTNVIZ_BIN:-./target/release/attnviz}" "$@"; }

attnviz -m .cache/models/all-MiniLM-L6-v2 "The quick brown fox jumps over the lazy dog." \
  --layer 2 --head 11 --png docs/gallery/head.png --svg docs/gallery/head.svg -q

attnviz -m .cache/models/all-MiniLM-L6-v2 "The cat sat on the mat." --pair "It was tired after the long day." \
  --layer 4 --head 9 --png docs/gallery/pair.png -q

attnviz -m .cache/models/all-MiniLM-L6-v2 "The quick brown fox jumps over the lazy dog." \
  --figure layer --layer 1 --png docs/gallery/layer.png -q

attnviz -m .cache/models/all-MiniLM-L6-v2 "The quick brown fox jumps over the lazy dog." \
  --figure mean --layer 0 --png docs/gallery/mean.png -q

attnviz -m .cache/models/all-MiniLM-L6-v2 "The quick brown fox jumps over the lazy dog." \
  --figure model --png docs/gallery/model.png -q

attnviz -m .cache/models/all-MiniLM-L6-v2 "The quick brown fox jumps over the lazy dog." \
  --figure rollout --layer 5 --png docs/gallery/rollout.png -q

attnviz -m .cache/models/all-MiniLM-L6-v2 "The cat sat on the mat." --pair "It was tired after the long day." \
  --figure layer --layer 2 --theme dark --colormap magma --png docs/gallery/dark-layer.png -q

attnviz -m .cache/models/all-MiniLM-L6-v2 "Café naïve — 東京 🍣 서울 🚀 مرحبا שלום नमस्ते สวัสดี Привет" \
  --layer 0 --head 3 --colormap cividis --png docs/gallery/scripts.png --svg docs/gallery/scripts.svg -q

attnviz -m .cache/models/all-MiniLM-L6-v2 - --layer 2 --head 11 --png docs/gallery/long.png -q \
  < docs/gallery/paragraph.txt

attnviz -m .cache/models/all-MiniLM-L6-v2 - --layer 5 --scale log --png docs/gallery/long-log.png -q \
  < docs/gallery/paragraph.txt

attnviz -m .cache/models/all-MiniLM-L6-v2 "Attention is all you need." --words --no-special \
  --layer 3 --png docs/gallery/small-words.png -q

# Where each generated token looked in a photo: the test suite's tiny random LLaVA (no real
# vision-language model ships in a package) on scikit-image's cat (scripts/fetch-photos.sh).
photos=$(bash scripts/fetch-photos.sh)
attnviz -m tests/fixtures/tiny-llava --image "$photos/chelsea.png" \
  "USER: <image>\nWhat is in this picture? ASSISTANT:" --generate 6 --query generated \
  --png docs/gallery/vlm-generated.png -q

# A mixture-of-experts model's router and gpt-oss's learned-sink column: the test suite's tiny
# random checkpoints (the README's families section shows both).
attnviz -m tests/fixtures/tiny-qwen3_moe "The fox jumps over the dog." --figure router --layer 0 \
  --png docs/gallery/router.png -q
attnviz -m tests/fixtures/tiny-gpt_oss "The fox jumps over the dog." --layer 2 --head 0 \
  --png docs/gallery/sink.png -q

# Needs Whisper tiny.en converted to transformers' layout and the recording (docs/gallery/README.md).
if [ -d .cache/models/whisper-tiny.en-hf ] && [ -f .cache/audio/beckett.wav ]; then
  attnviz -m .cache/models/whisper-tiny.en-hf --audio .cache/audio/beckett.wav \
    --png docs/gallery/whisper-words.png -q
fi
