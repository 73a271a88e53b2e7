#!/usr/bin/env bash
# Regenerate every gallery image with the real CLI (the commands listed in README.md here).
# Run from the repository root after `cargo build --release` and `bash scripts/fetch-minilm.sh`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
attnviz() { ./target/release/attnviz "$@"; }

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

attnviz -m .cache/models/all-MiniLM-L6-v2 "Café naïve résumé — 東京で寿司を食べた 🍣!" \
  --layer 0 --head 3 --colormap cividis --png docs/gallery/accents.png -q
attnviz -m .cache/models/all-MiniLM-L6-v2 - --layer 2 --head 11 --png docs/gallery/long.png -q \
  < docs/gallery/paragraph.txt
