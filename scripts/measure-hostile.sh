#!/usr/bin/env bash
# Replay every hostile case under /usr/bin/time and print, per case, the exit status, the wall
# time, the peak resident memory, the input's size and the first line of the message.
#
#     bash scripts/measure-hostile.sh [BINARY]             # make every case in a temp folder, run them
#     bash scripts/measure-hostile.sh --cases DIR [BINARY] # run cases made before
#
# Cases come from the generators: scripts/hostile_inputs.py (broken model folders) and every
# scripts/hostile/*.py (one per input surface: GGUF, render files, corpus, chat templates, …).
# Each generator takes an output folder and writes one sub-folder per case. A case folder may
# hold `args`: the attnviz arguments, one per line, where `{case}` stands for the case folder and
# `{out}` for an empty output folder made for the run; without it the case is a model folder, run
# as `attnviz -m {case} "the cat sat on the mat" --json {out}/a.json`. A case may also hold
# `stdin` (fed to the run) and `setup.sh` (run with the case folder as its working directory
# just before, to make what cannot be committed: FIFOs, links).
#
# Each run is limited to 60 s and (with ulimit -v) 8 GiB of address space, so that a reader
# without bounds fails here instead of taking the machine down.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
CASES=""
if [[ ${1:-} == --cases ]]; then
    CASES=${2:?usage: measure-hostile.sh --cases DIR [BINARY]}
    shift 2
fi
BIN=$(realpath "${1:-target/release/attnviz}")
if [[ -z $CASES ]]; then
    CASES=$(mktemp -d)
    trap 'rm -rf "$CASES"' EXIT
    python3 scripts/hostile_inputs.py "$CASES/model" >/dev/null
    for gen in scripts/hostile/*.py; do
        [[ -e $gen ]] || continue
        python3 "$gen" "$CASES/$(basename "$gen" .py)" >/dev/null
    done
fi
printf '%-40s %4s %8s %9s %10s  %s\n' case exit "wall s" "RSS MiB" "input KiB" message
for dir in $(find "$CASES" -mindepth 2 -maxdepth 2 -type d | sort); do
    name=$(basename "$(dirname "$dir")")/$(basename "$dir")
    kib=$(( $(du -sk --apparent-size "$dir" | cut -f1) ))
    out=$(mktemp -d)
    run=$(mktemp -d)
    args=()
    if [[ -f $dir/args ]]; then
        while IFS= read -r line; do
            line=${line//\{case\}/$dir}
            args+=("${line//\{out\}/$run}")
        done <"$dir/args"
    else
        args=(-m "$dir" "the cat sat on the mat" --json "$run/a.json")
    fi
    [[ -f $dir/setup.sh ]] && (cd "$dir" && bash setup.sh)
    stdin=/dev/null
    [[ -f $dir/stdin ]] && stdin=$dir/stdin
    ( ulimit -v $((8 << 20)); timeout 60 /usr/bin/time -v "$BIN" "${args[@]}" \
        <"$stdin" >"$out/stdout" 2>"$out/stderr" )
    code=$(grep -oP 'Exit status: \K\d+' "$out/stderr" || echo "?")
    sig=$(grep -oP 'Command terminated by signal \K\d+' "$out/stderr" || true)
    [ -n "$sig" ] && code="sig$sig"
    wall=$(grep -oP 'Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): \K.*' "$out/stderr")
    rss=$(( $(grep -oP 'Maximum resident set size \(kbytes\): \K\d+' "$out/stderr" || echo 0) / 1024 ))
    # The message as the terminal would show it, with control characters made visible.
    msg=$(grep -v -E '^\s+(Command being timed|User time|System time|Percent|Elapsed|Average|Maximum|Major|Minor|Voluntary|Involuntary|Swaps|File system|Socket|Signals|Page size|Exit status|Command terminated)' "$out/stderr" | head -1 | cut -c1-150 | cat -v)
    printf '%-40s %4s %8s %9s %10s  %s\n' "$name" "$code" "$wall" "$rss" "$kib" "$msg"
    rm -rf "$out" "$run"
done
