#!/usr/bin/env bash
# The Python package's tests, as scripts/test.sh runs them (after the Rust suite):
#   1. build the wheel with maturin (installed into .cache/python/build, a venv kept between runs);
#   2. install it into a fresh venv (.cache/python/test) with pytest, nbconvert, ipykernel, mypy
#      (the stubs are checked against the built module) and pillow
#      (the PIL images run(image=...) takes) only
#      (no torch: the transformers arrays the tests compare with are committed fixtures);
#   3. pytest python/tests (arrays equal the CLI's JSON; head_view draws transformers' weights);
#   4. execute examples/quickstart.ipynb offline with nbconvert (the model is the local
#      all-MiniLM-L6-v2) and, unless ATTNVIZ_SKIP_BROWSER is set, open the executed notebook's
#      HTML in headless Chromium (tests/browser/notebook.mjs): the views are drawn and nothing is
#      requested from the network; and inline views over hostile tokens (python/tests/
#      hostile_page.py) in Chromium and Firefox: nothing in the tokens runs as markup or script.
# Needs: python3 with venv and pip, the release binary (cargo test --release builds it), the
# MiniLM model (scripts/fetch-minilm.sh), and for step 4's browser check chromium and
# tests/browser/node_modules (scripts/test.sh installs both).
#
# Each step is announced on stderr; when one fails, the last line says which, and which steps
# did not run because of it (scripts/steps.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source scripts/steps.sh
steps "build the attnviz binary" "build the wheel with maturin" \
    "install the wheel into a fresh venv" "run pytest on python/tests" \
    "execute examples/quickstart.ipynb" "open the notebook and the hostile page in browsers"
repo=$(pwd)
python=${PYTHON:-python3}
cache="$repo/.cache/python"
target=${CARGO_TARGET_DIR:-$repo/target}
export ATTNVIZ_BIN="$target/release/attnviz"
export ATTNVIZ_MINILM_DIR=${ATTNVIZ_MINILM_DIR:-$repo/.cache/models/all-MiniLM-L6-v2}
step "build the attnviz binary"
[[ -x $ATTNVIZ_BIN ]] || cargo build --release --bin attnviz

step "build the wheel with maturin"
start=$SECONDS
mkdir -p "$cache"
if [[ ! -x $cache/build/bin/maturin ]]; then
    "$python" -m venv "$cache/build"
    "$cache/build/bin/pip" install -q --disable-pip-version-check "maturin>=1.9,<2"
fi
rm -rf "$cache/wheels"
"$cache/build/bin/maturin" build --release --quiet -m python/Cargo.toml -o "$cache/wheels" >&2
wheel=$(ls "$cache"/wheels/attnviz-*.whl)
echo "python: built $(basename "$wheel") in $((SECONDS - start)) s" >&2

# A fresh environment every run: only what the wheel declares, plus the test tools.
step "install the wheel into a fresh venv"
rm -rf "$cache/test"
"$python" -m venv "$cache/test"
"$cache/test/bin/pip" install -q --disable-pip-version-check "$wheel" pytest nbconvert nbclient ipykernel pillow mypy==2.4.1
step "run pytest on python/tests"
# The tests' temporary files (pytest's tmp_path, anything the package might write) in a folder
# of this run's own, removed at the end: a test never sees another run's leftovers.
test_tmp=$(mktemp -d)
at_exit 'rm -rf "$test_tmp"'
TMPDIR="$test_tmp" "$cache/test/bin/python" -m pytest -q -p no:cacheprovider python/tests

# The example notebook, executed offline, then looked at in a browser.
step "execute examples/quickstart.ipynb"
run_dir=$(mktemp -d)
at_exit 'rm -rf "$run_dir"'
cp examples/quickstart.ipynb "$run_dir/"
(
    cd "$run_dir"
    ATTNVIZ_MODEL="$ATTNVIZ_MINILM_DIR" HF_HUB_OFFLINE=1 "$cache/test/bin/jupyter" nbconvert \
        --to html --execute quickstart.ipynb --ExecutePreprocessor.timeout=120 \
        --ExecutePreprocessor.kernel_name=python3 \
        --template "$repo/python/tests/offline_template" 2>&1 | grep -v "without encryption" >&2
)
echo "python: examples/quickstart.ipynb executed ($(wc -c <"$run_dir/quickstart.html") bytes of HTML)" >&2
step "open the notebook and the hostile page in browsers"
if [[ -z ${ATTNVIZ_SKIP_BROWSER:-} ]]; then
    shots="$repo/tests/artifacts/notebook"
    (cd tests/browser && node notebook.mjs "$run_dir/quickstart.html" "$shots")
    # Inline views over hostile tokens, in Chromium and Firefox (python/tests/hostile_page.*).
    "$cache/test/bin/python" python/tests/hostile_page.py "$run_dir/hostile.html"
    (cd tests/browser && node ../../python/tests/hostile_page.mjs "$run_dir/hostile.html" "$shots")
else
    echo "python: ATTNVIZ_SKIP_BROWSER is set: the executed notebook was NOT opened in Chromium" >&2
fi
echo "python: done in $((SECONDS - start)) s" >&2
