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
# 3. runs the Python example the same way, then the Python unit tests.
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

echo "== compile the C example"
example=crates/atoll-client-c/examples/report_latency.c
cflags=(-std=c99 -Wall -Wextra -Werror -I crates/atoll-client-c/include)
"$cc" "${cflags[@]}" "$example" -o "$work/report_latency" \
    -L"$lib" -latoll_client -Wl,-rpath,"$lib"
"$cc" "${cflags[@]}" "$example" -o "$work/report_latency_static" \
    "$lib/libatoll_client.a" -lgcc_s -lutil -lrt -lpthread -lm -ldl
if ldd "$work/report_latency_static" | grep -q libatoll_client; then
    fail "the static build links libatoll_client.so"
fi
pass "compiled (shared and static)"
# The C example is also compiled as C++: the header must be usable there.
if command -v c++ >/dev/null; then
    c++ -x c++ -fsyntax-only -Wall -Werror -I crates/atoll-client-c/include "$example" &&
        pass "header compiles as C++" || fail "header does not compile as C++"
fi

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

if [ "$failures" -gt 0 ]; then
    echo "clients/test.sh: $failures failure(s)" >&2
    exit 1
fi
echo "clients/test.sh: all passed"
