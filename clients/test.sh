#!/usr/bin/env bash
# Tests of atoll's client libraries for applications.
#
#   bash clients/test.sh [CARGO_TARGET_DIR]   (default: ${CARGO_TARGET_DIR:-target})
#
# 1. builds libatoll_client (cargo build -p atoll-client-c) and checks that
#    the header declares exactly the functions the shared library exports;
# 2. compiles the C example against it, dynamically and statically, and runs
#    it against the fake daemon (clients/python/fake_daemon.py), which checks
#    every request line against clients/fixtures/wire.json; checks the
#    example's output and exit status;
# 3. compiles the reconfigurable-application example (awm_loop.c) the same
#    way and runs it against the fake daemon through a whole session
#    (register, new working mode, wait, resume, reports, done);
# 4. runs the Python example the same way, then the Python unit tests;
# 5. builds the sample reconfigurable application (the Rust example
#    awm_parallel) and runs it unmanaged and without a daemon.
# Exits non-zero on any failure.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
target=${1:-${CARGO_TARGET_DIR:-target}}
case $target in /*) ;; *) target=$root/$target ;; esac
lib=$target/debug
python=${PYTHON:-python3}
cc=${CC:-cc}

work=$(mktemp -d "${TMPDIR:-/tmp}/atoll-clients.XXXXXX")
fake_pid=
cleanup() {
    if [ -n "$fake_pid" ]; then
        kill "$fake_pid" 2>/dev/null || true
        wait "$fake_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

failures=0
fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}
pass() {
    echo "ok: $*"
}

echo "== build libatoll_client (target dir $target)"
CARGO_TARGET_DIR=$target cargo build -p atoll-client-c
[ -f "$lib/libatoll_client.so" ] || { echo "FAIL: no $lib/libatoll_client.so" >&2; exit 1; }
[ -f "$lib/libatoll_client.a" ] || { echo "FAIL: no $lib/libatoll_client.a" >&2; exit 1; }

echo "== header vs exported symbols"
header=crates/atoll-client-c/include/atoll.h
# The preprocessor drops the comments; what is left that names an atoll_*
# function followed by '(' is a declaration.
"$cc" -E -P -x c "$header" | grep -o '\batoll_[a-z_]*[[:space:]]*(' | tr -d '( \t' |
    sort -u >"$work/header.txt"
nm -D --defined-only "$lib/libatoll_client.so" | awk '$2 == "T" && $3 ~ /^atoll_/ { print $3 }' |
    sort -u >"$work/exported.txt"
if [ ! -s "$work/header.txt" ]; then
    fail "no functions found in $header"
elif diff -u "$work/header.txt" "$work/exported.txt"; then
    pass "$(wc -l <"$work/header.txt") functions declared and exported"
else
    fail "header (-) and libatoll_client.so (+) differ"
fi

echo "== compile the C examples"
cflags=(-std=c99 -Wall -Wextra -Werror -I crates/atoll-client-c/include)
for name in report_latency awm_loop; do
    example=crates/atoll-client-c/examples/$name.c
    "$cc" "${cflags[@]}" "$example" -o "$work/$name" \
        -L"$lib" -latoll_client -Wl,-rpath,"$lib"
    "$cc" "${cflags[@]}" "$example" -o "$work/${name}_static" \
        "$lib/libatoll_client.a" -lgcc_s -lutil -lrt -lpthread -lm -ldl
    if ldd "$work/${name}_static" | grep -q libatoll_client; then
        fail "the static build of $name links libatoll_client.so"
    fi
    pass "$name compiled (shared and static)"
    # The C examples are also compiled as C++: the header must be usable there.
    if command -v c++ >/dev/null; then
        c++ -x c++ -fsyntax-only -Wall -Werror -I crates/atoll-client-c/include "$example" &&
            pass "header compiles as C++ ($name)" || fail "header does not compile as C++ ($name)"
    fi
done

# run_case NAME STEPS EXPECT_STATUS EXPECT_STDOUT EXPECT_STDERR_SUBSTRING -- COMMAND...
# Starts the fake daemon with STEPS (comma-separated exchange names) on a
# fresh socket, runs COMMAND with @SOCK replaced by the socket, and checks
# the exit status, the exact stdout and a piece of stderr, and that the fake
# daemon saw exactly the expected requests.
run_case() {
    local name=$1 steps=$2 want_status=$3 want_out=$4 want_err=$5
    shift 6
    local sock=$work/$name.sock status=0 arg
    local cmd=()
    for arg in "$@"; do cmd+=("${arg//@SOCK/$sock}"); done
    "$python" clients/python/fake_daemon.py --socket "$sock" --steps "$steps" --timeout 20 \
        2>"$work/$name.fake" &
    fake_pid=$!
    for _ in $(seq 1 200); do
        [ -S "$sock" ] && break
        kill -0 "$fake_pid" 2>/dev/null || break
        sleep 0.05
    done
    if [ ! -S "$sock" ]; then
        fail "$name: the fake daemon did not start: $(cat "$work/$name.fake")"
        wait "$fake_pid" || true
        fake_pid=
        return
    fi
    "${cmd[@]}" >"$work/$name.out" 2>"$work/$name.err" || status=$?
    if ! wait "$fake_pid"; then
        fail "$name: fake daemon: $(cat "$work/$name.fake")"
    fi
    fake_pid=
    local ok=1
    if [ "$status" != "$want_status" ]; then
        fail "$name: exit status $status, want $want_status (stderr: $(cat "$work/$name.err"))"
        ok=0
    fi
    if [ "$(cat "$work/$name.out")" != "$want_out" ]; then
        fail "$name: stdout $(printf %q "$(cat "$work/$name.out")"), want $(printf %q "$want_out")"
        ok=0
    fi
    if [ -n "$want_err" ] && ! grep -qF -- "$want_err" "$work/$name.err"; then
        fail "$name: stderr $(printf %q "$(cat "$work/$name.err")") lacks $(printf %q "$want_err")"
        ok=0
    fi
    [ "$ok" = 1 ] && pass "$name"
    return 0
}

not_holding="does not hold: the property of overlay shop does not hold; tune CPU time up for unit api of overlay shop: ack: set weight of web/api to 125: overlay shop asked to tune CPU time up"

for variant in report_latency report_latency_static; do
    echo "== C example ($variant) against the fake daemon"
    bin=$work/$variant
    run_case "$variant-holds" report_holds 0 \
        "holds: the property of overlay shop holds" "" -- "$bin" -s @SOCK shop 1234.5
    run_case "$variant-not-holding" report_not_holding 0 "$not_holding" "" -- \
        "$bin" -s @SOCK shop 7500
    run_case "$variant-not-found" report_not_found 1 "" "error -13: not found: no overlay nosuch" -- \
        "$bin" -s @SOCK nosuch 1
done
status=0
"$work/report_latency" -s "$work/none.sock" shop 1 >/dev/null 2>"$work/none.err" || status=$?
if [ "$status" = 1 ] && grep -q "atoll daemon is not running" "$work/none.err"; then
    pass "report_latency-no-daemon"
else
    fail "report_latency-no-daemon: status $status, stderr $(cat "$work/none.err")"
fi

echo "== C reconfigurable application (awm_loop) against the fake daemon"
session=app_register_named,app_poll_up,app_poll_waiting,app_poll_resumed,app_report_2
session=$session,app_poll_same4,app_report_3,app_done
session_out="registered app 7
start: generation 1: mode 1 (t2) on island b, 2.00 CPUs on 0-7, 2 threads
cycle 1: generation 2: mode 2 (t4) on island b, 4.00 CPUs on 0-7, 4 threads
cycle 2: generation 3: waiting: priority level 0 needs the room
cycle 2: generation 4: mode 0 (t1) on island b, 1.00 CPUs on 0-7, 1 threads
reported 2 cycles: goal gap 0.25
reported 3 cycles: goal gap -0.10
done: 3 cycles, 3 changes, 1 suspensions"
for variant in awm_loop awm_loop_static; do
    run_case "$variant-session" "$session" 0 "$session_out" "" -- \
        "$work/$variant" -s @SOCK -n 3 -r 2 -g 30 -p 1 awm_parallel
done
inline_steps=app_register_inline$(printf ',app_poll_same%.0s' 1 2 3 4 5 6 7 8 9 10),app_report_no_goal,app_done
run_case awm_loop-inline "$inline_steps" 0 "registered app 7
start: generation 1: mode 1 (t2) on island b, 2.00 CPUs on 0-7, 2 threads
reported 10 cycles: goal gap 0.00
done: 10 cycles, 0 changes, 0 suspensions" "" -- \
    "$work/awm_loop" -s @SOCK -n 10 -r 10 -f clients/recipes/awm_parallel.toml
run_case awm_loop-unknown app_register_unknown 1 "" \
    "register: error -13: not found: no recipe named nosuch" -- "$work/awm_loop" -s @SOCK nosuch

echo "== Python example against the fake daemon"
py_example=clients/python/examples/report_latency.py
run_case py-holds report_holds 0 "holds: the property of overlay shop holds" "" -- \
    "$python" "$py_example" --socket @SOCK shop 1234.5
run_case py-not-holding report_not_holding 0 "$not_holding" "" -- \
    "$python" "$py_example" --socket @SOCK shop 7500
run_case py-not-found report_not_found 1 "" "not_found: no overlay nosuch" -- \
    "$python" "$py_example" --socket @SOCK nosuch 1

echo "== Python unit tests"
if "$python" -m unittest discover -s clients/python -p 'test_*.py'; then
    pass "python unittest"
else
    fail "python unittest"
fi

echo "== sample reconfigurable application (awm_parallel)"
CARGO_TARGET_DIR=$target cargo build -p atoll-client --example awm_parallel
awm=$target/debug/examples/awm_parallel
status=0
"$awm" --unmanaged --threads 2 --cycles 3 --work 16 >"$work/awm.out" 2>"$work/awm.err" || status=$?
if [ "$status" = 0 ] && "$python" -c '
import json, sys
s = json.load(open(sys.argv[1]))
assert (s["mode"], s["cycles"], s["threads_final"], s["reconfigurations"]) == ("unmanaged", 3, 2, 0), s
assert s["completion_s"] >= 0 and s["checksum"] > 0, s
' "$work/awm.out"; then
    pass "awm_parallel-unmanaged"
else
    fail "awm_parallel-unmanaged: status $status, stdout $(cat "$work/awm.out"), stderr $(cat "$work/awm.err")"
fi
status=0
"$awm" --socket "$work/none.sock" --cycles 1 >/dev/null 2>"$work/awm.err" || status=$?
if [ "$status" = 1 ] && grep -q "atoll daemon is not running" "$work/awm.err"; then
    pass "awm_parallel-no-daemon"
else
    fail "awm_parallel-no-daemon: status $status, stderr $(cat "$work/awm.err")"
fi

if [ "$failures" -gt 0 ]; then
    echo "clients/test.sh: $failures failure(s)" >&2
    exit 1
fi
echo "clients/test.sh: all passed"
