# Named steps for the test scripts (sourced by scripts/test.sh and python/tests/run.sh).
#
#     source scripts/steps.sh
#     steps "fetch the models" "run the Rust suite" "run the Python tests"
#     step "fetch the models"; ...
#     step "run the Rust suite"; ...
#
# When the script exits with a failure, it says on stderr which step failed and which steps did
# not run because of it, e.g.
#
#     scripts/test.sh: step 2 of 3, "run the Rust suite", failed (exit status 101); not run: "run the Python tests"
#
# `at_exit CMD` adds a command to run when the script exits (the EXIT trap is this file's).

_steps_all=()
_steps_current=-1
_steps_at_exit=()
_steps_script=${0#./}

# The steps the script will run, in order.
steps() {
    _steps_all=("$@")
    _steps_current=-1
}

# The step that begins now (one of those given to `steps`).
step() {
    local i
    for i in "${!_steps_all[@]}"; do
        if [[ ${_steps_all[$i]} == "$1" ]]; then
            _steps_current=$i
            echo "${_steps_script}: step $((i + 1)) of ${#_steps_all[@]}: $1" >&2
            return 0
        fi
    done
    echo "${_steps_script}: \"$1\" is not one of the steps given to \`steps\`" >&2
    return 1
}

at_exit() {
    _steps_at_exit+=("$1")
}

_steps_on_exit() {
    local status=$? cmd
    for cmd in "${_steps_at_exit[@]}"; do
        eval "$cmd" || true
    done
    ((status == 0)) && return 0
    local n=${#_steps_all[@]}
    if ((_steps_current < 0)); then
        echo "${_steps_script}: failed (exit status $status) before its first step; not run: all $n steps" >&2
        return "$status"
    fi
    local failed=${_steps_all[$_steps_current]} not_run="" i
    for ((i = _steps_current + 1; i < n; i++)); do
        not_run+="${not_run:+, }\"${_steps_all[$i]}\""
    done
    [[ -n $not_run ]] || not_run="none (it was the last)"
    echo "${_steps_script}: step $((_steps_current + 1)) of $n, \"$failed\", failed (exit status $status); not run: $not_run" >&2
    return "$status"
}

trap _steps_on_exit EXIT
