#!/usr/bin/env bash
# Run attnviz on every hostile model folder under /usr/bin/time and print, per case, the exit
# status, the wall time, the peak resident memory and the first line of the message.
#
#     python3 scripts/hostile_inputs.py /tmp/hostile && bash scripts/measure-hostile.sh /tmp/hostile [BINARY]
#
# Each run is limited to 60 s and (with ulimit -v) 8 GiB of address space, so that a reader
# without bounds fails here instead of taking the machine down.
set -uo pipefail
CASES=${1:?usage: measure-hostile.sh CASES_DIR [BINARY]}
BIN=${2:-target/release/attnviz}
printf '%-26s %4s %8s %9s %10s  %s\n' case exit "wall s" "RSS MiB" "file KiB" message
for dir in "$CASES"/*/; do
    name=$(basename "$dir")
    weights=$(ls "$dir" | grep -E 'safetensors$|\.bin$' | head -1)
    kib=$(( $(stat -c %s "$dir/$weights") / 1024 ))
    out=$(mktemp -d)
    ( ulimit -v $((8 << 20)); timeout 60 /usr/bin/time -v "$BIN" -m "$dir" "the cat sat on the mat" \
        --json "$out/a.json" >"$out/stdout" 2>"$out/stderr" )
    code=$(grep -oP 'Exit status: \K\d+' "$out/stderr" || echo "?")
    sig=$(grep -oP 'Command terminated by signal \K\d+' "$out/stderr" || true)
    [ -n "$sig" ] && code="sig$sig"
    wall=$(grep -oP 'Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): \K.*' "$out/stderr")
    rss=$(( $(grep -oP 'Maximum resident set size \(kbytes\): \K\d+' "$out/stderr") / 1024 ))
    msg=$(grep -v -E '^\s+(Command being timed|User time|System time|Percent|Elapsed|Average|Maximum|Major|Minor|Voluntary|Involuntary|Swaps|File system|Socket|Signals|Page size|Exit status|Command terminated)' "$out/stderr" | head -1 | cut -c1-150)
    printf '%-26s %4s %8s %9s %10s  %s\n' "$name" "$code" "$wall" "$rss" "$kib" "$msg"
    rm -rf "$out"
done
