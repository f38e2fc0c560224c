#!/usr/bin/env bash
# Tests of atoll's client libraries for applications.
#
#   bash clients/test.sh [CARGO_TARGET_DIR]   (default: ${CARGO_TARGET_DIR:-target})
#
# 1. builds libatoll_client (cargo build -p atoll-client-c) and checks that
#    the header declares exactly the functions the shared library exports,
#    and that its soname is libatoll_client.so.MAJOR;
# 2. installs it into a temp prefix (crates/atoll-client-c/install.sh: the
#    soname symlinks, the header, atoll.pc); compiles the C example and a
#    version check (header and library agree) from there with `pkg-config
#    --cflags --libs atoll`, dynamically and statically; runs the example
#    against the fake daemon (clients/python/tests/fake_daemon.py), which
#    checks every request line against clients/fixtures/wire.json; checks
#    the example's output and exit status;
# 3. compiles the reconfigurable-application example (awm_loop.c) the same
#    way and runs it against the fake daemon through a whole session
#    (register, new working mode, wait, resume, reports, done);
# 4. installs the Python package (pip install --no-index clients/python:
#    offline) into a fresh virtual environment in a temp dir and runs the
#    Python example and the unit tests (clients/python/tests) with it, from
#    outside the source tree, so that they test the installed package;
# 5. builds the sample reconfigurable application (the Rust example
#    awm_parallel) and runs it unmanaged and without a daemon;
# 6. as root with 2+ CPUs: starts the real daemon (cgroups under a root of
#    this run's own, atoll-test-clients-<pid>-<ns>) and runs the C loop, the
#    Python AppRuntime and the Rust sample application against it, then
#    checks that the daemon removed its groups.
# Exits non-zero on any failure.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
target=${1:-${CARGO_TARGET_DIR:-target}}
case $target in /*) ;; *) target=$root/$target ;; esac
lib=$target/debug
python=${PYTHON:-python3}
fake_daemon=clients/python/tests/fake_daemon.py
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
version=$(sed -n 's/^#define ATOLL_VERSION_STRING "\(.*\)"$/\1/p' "$header")
major=${version%%.*}
soname=$(readelf -d "$lib/libatoll_client.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
if [ -n "$version" ] && [ "$soname" = "libatoll_client.so.$major" ]; then
    pass "soname $soname (version $version)"
else
    fail "soname '$soname', want libatoll_client.so.MAJOR of version '$version'"
fi

echo "== install into a prefix"
# C programs link against an installed copy: the library's soname is
# libatoll_client.so.MAJOR, which only an install provides (as a symlink).
command -v pkg-config >/dev/null || { echo "FAIL: pkg-config is not installed" >&2; exit 1; }
prefix=$work/prefix
pkglib=$prefix/lib
if ! bash crates/atoll-client-c/install.sh --no-build --prefix "$prefix" 2>"$work/install.err"; then
    echo "FAIL: install.sh: $(cat "$work/install.err")" >&2
    exit 1
fi
for f in libatoll_client.so "libatoll_client.so.$major" "libatoll_client.so.$version" \
    libatoll_client.a pkgconfig/atoll.pc; do
    [ -e "$pkglib/$f" ] || fail "install: no $pkglib/$f"
done
[ -f "$prefix/include/atoll.h" ] || fail "install: no $prefix/include/atoll.h"
if [ "$(readlink "$pkglib/libatoll_client.so")" = "libatoll_client.so.$major" ] &&
    [ "$(readlink "$pkglib/libatoll_client.so.$major")" = "libatoll_client.so.$version" ]; then
    pass "installed: libatoll_client.so -> .so.$major -> .so.$version"
else
    fail "install: the soname symlinks are wrong: $(ls -l "$pkglib")"
fi
export PKG_CONFIG_PATH=$pkglib/pkgconfig
pc_version=$(pkg-config --modversion atoll)
[ "$pc_version" = "$version" ] || fail "pkg-config --modversion atoll: '$pc_version', want $version"
read -ra pc_shared <<<"$(pkg-config --cflags --libs atoll) -Wl,-rpath,$(pkg-config --variable=libdir atoll)"
# Static: the library's archive, with the system libraries it needs
# (Libs.private), which stay shared.
pc_static=(-Wl,-Bstatic -latoll_client -Wl,-Bdynamic)
for w in $(pkg-config --cflags --static --libs atoll); do
    [ "$w" = -latoll_client ] || pc_static+=("$w")
done
unset PKG_CONFIG_PATH

echo "== compile the C examples with pkg-config (shared and static)"
cflags=(-std=c99 -Wall -Wextra -Werror)
cat >"$work/version.c" <<'C'
#include <stdio.h>
#include <string.h>
#include <atoll.h>
int main(void) {
    printf("header %s (%d.%d.%d), library %s\n", ATOLL_VERSION_STRING, ATOLL_VERSION_MAJOR,
           ATOLL_VERSION_MINOR, ATOLL_VERSION_PATCH, atoll_version());
    return strcmp(ATOLL_VERSION_STRING, atoll_version()) != 0;
}
C
for name in version report_latency awm_loop; do
    example=crates/atoll-client-c/examples/$name.c
    [ "$name" = version ] && example=$work/version.c
    "$cc" "${cflags[@]}" "$example" -o "$work/$name" "${pc_shared[@]}"
    "$cc" "${cflags[@]}" "$example" -o "$work/${name}_static" "${pc_static[@]}"
    needed=$(readelf -d "$work/$name" | sed -n 's/.*(NEEDED).*\[\(libatoll[^]]*\)\]/\1/p')
    loaded=$(ldd "$work/$name" | awk '/libatoll_client/ { print $3 }')
    if [ "$needed" != "libatoll_client.so.$major" ]; then
        fail "$name needs '$needed', want libatoll_client.so.$major"
    elif [ "$loaded" != "$pkglib/libatoll_client.so.$major" ]; then
        fail "$name loads '$loaded', not $pkglib/libatoll_client.so.$major"
    elif ldd "$work/${name}_static" | grep -q libatoll_client; then
        fail "the static build of $name links libatoll_client.so"
    else
        pass "$name compiled (shared: needs $needed; static)"
    fi
    # The C examples are also compiled as C++: the header must be usable there.
    if command -v c++ >/dev/null; then
        c++ -x c++ -fsyntax-only -Wall -Werror -I "$prefix/include" "$example" &&
            pass "header compiles as C++ ($name)" || fail "header does not compile as C++ ($name)"
    fi
done
for v in version version_static; do
    status=0
    out=$("$work/$v") || status=$?
    if [ "$status" = 0 ] && [ "$out" = "header $version ($version), library $version" ]; then
        pass "$v: $out"
    else
        fail "$v: status $status, '$out'"
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
    "$python" "$fake_daemon" --socket "$sock" --steps "$steps" --timeout 20 \
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

echo "== install the Python package into a fresh virtual environment"
# Offline: the build backend (clients/python/build_backend) needs only the
# standard library, so pip has nothing to fetch (--no-index).
venv=$work/venv
if "$python" -m venv "$venv" >"$work/venv.log" 2>&1 &&
    "$venv/bin/python" -m pip install --no-index clients/python >>"$work/venv.log" 2>&1; then
    python=$venv/bin/python
    where=$(cd "$work" && "$python" -c 'import atoll_client; print(atoll_client.__file__)')
    case $where in
        "$venv"/*) pass "pip install clients/python: atoll_client from $where" ;;
        *) fail "the venv imports atoll_client from $where" ;;
    esac
else
    fail "pip install clients/python in a fresh venv: $(tail -20 "$work/venv.log")"
fi

echo "== Python example against the fake daemon"
py_example=clients/python/examples/report_latency.py
run_case py-holds report_holds 0 "holds: the property of overlay shop holds" "" -- \
    "$python" "$py_example" --socket @SOCK shop 1234.5
run_case py-not-holding report_not_holding 0 "$not_holding" "" -- \
    "$python" "$py_example" --socket @SOCK shop 7500
run_case py-not-found report_not_found 1 "" "not_found: no overlay nosuch" -- \
    "$python" "$py_example" --socket @SOCK nosuch 1

echo "== Python unit tests (the installed package, run from $work)"
if (cd "$work" && "$python" -m unittest discover -s "$root/clients/python/tests" -p 'test_*.py'); then
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

echo "== the three libraries against the real daemon"
# Root only, with at least 2 CPUs: the daemon runs on real cgroups under a
# root group of this run's own (atoll-test-clients-<pid>-<ns>), with the
# host partition on the first CPU and an island "apps" on the last; the
# only processes it moves are the clients this script starts.
ncpus=$(nproc)
if [ "$(id -u)" != 0 ] || [ "$ncpus" -lt 2 ]; then
    echo "skipped: needs root and 2 CPUs (uid $(id -u), $ncpus CPUs)"
else
    CARGO_TARGET_DIR=$target cargo build -p atoll-cli
    atoll=$target/debug/atoll
    cg_root=atoll-test-clients-$$-$(date +%s%N)
    sock=$work/real.sock
    last=$((ncpus - 1))
    cat >"$work/real.toml" <<TOML
[host]
cpus = "0"
adopt_all = false

[island.apps]
cpus = "$last"

[apps]

[recipe.awm_parallel]
priority = 2

[[recipe.awm_parallel.mode]]
id = 0
name = "t1"
value = 0.2
cpu_quota = 1.0
threads = 1
TOML
    "$atoll" check-config "$work/real.toml" >"$work/check.out" 2>&1 ||
        fail "real daemon: its config is refused: $(cat "$work/check.out")"
    "$atoll" daemon --config "$work/real.toml" --cgroup-root "$cg_root" --socket "$sock" \
        --state-dir "$work/state" >"$work/daemon.log" 2>&1 &
    daemon_pid=$!
    stop_daemon() {
        if [ -n "${daemon_pid:-}" ]; then
            kill -TERM "$daemon_pid" 2>/dev/null || true
            wait "$daemon_pid" 2>/dev/null || true
            daemon_pid=
        fi
    }
    trap 'stop_daemon; cleanup' EXIT
    for _ in $(seq 1 200); do
        [ -S "$sock" ] && break
        kill -0 "$daemon_pid" 2>/dev/null || break
        sleep 0.05
    done
    if [ ! -S "$sock" ]; then
        fail "real daemon did not start: $(tail -5 "$work/daemon.log")"
    else
        # C: the named recipe of the config (its one mode that fits the
        # island's one CPU); the loop runs to the end and leaves.
        status=0
        "$work/awm_loop" -s "$sock" -n 20 -r 5 -p 5 awm_parallel >"$work/real-c.out" \
            2>"$work/real-c.err" || status=$?
        if [ "$status" = 0 ] && head -1 "$work/real-c.out" | grep -Eq '^registered app [0-9]+$' &&
            grep -q 'mode 0 (t1) on island apps, 1.00 CPUs on '"$last"', 1 threads' "$work/real-c.out" &&
            tail -1 "$work/real-c.out" | grep -q '^done: 20 cycles'; then
            pass "C awm_loop against the real daemon"
        else
            fail "C awm_loop against the real daemon: status $status, stdout $(cat "$work/real-c.out"), stderr $(cat "$work/real-c.err")"
        fi
        # Python: AppRuntime with an inline recipe: run 10 cycles as told, leave.
        if "$python" - "$sock" "$last" >"$work/real-py.out" 2>&1 <<'PY'
import sys
from atoll_client import AppRuntime, Client, load_recipe
sock, last = sys.argv[1], sys.argv[2]
recipe = load_recipe("clients/recipes/awm_parallel.toml")
# The island has one CPU: the modes that need more cannot run there.
recipe["modes"] = [m for m in recipe["modes"] if m["needs"]["cpu_quota"] <= 1]
with Client(sock) as c:
    rt = AppRuntime(c, recipe, poll_every=0.01, report_every=0.05)
    kinds, granted = [], None
    while kinds.count("run") < 10:
        step = rt.next_step()
        kinds.append(step.kind)
        if step.kind == "configure":
            granted = step.assignment
        elif step.kind == "run":
            rt.cycles_done(1)
    assert granted is not None, kinds
    assert (granted.island, granted.cpus, granted.mode, granted.parallelism) == ("apps", last, 0, 1), granted
    assert [x["app"] for x in c.apps()].count(rt.app) == 1, c.apps()
    summary = rt.done()
    assert summary.cycles == 10, summary
    assert all(x["app"] != rt.app for x in c.apps()), c.apps()
print("ok", kinds[:3])
PY
        then
            pass "Python client against the real daemon"
        else
            fail "Python client against the real daemon: $(cat "$work/real-py.out")"
        fi
        # Rust: the sample application, managed, with the inline recipe.
        status=0
        "$awm" --socket "$sock" --max-cpus 1 --cycles 5 --work 16 --poll-ms 5 \
            >"$work/real-rs.out" 2>"$work/real-rs.err" || status=$?
        if [ "$status" = 0 ] && "$python" -c '
import json, sys
s = json.load(open(sys.argv[1]))
assert (s["mode"], s["cycles"], s["threads_final"]) == ("managed", 5, 1), s
' "$work/real-rs.out"; then
            pass "Rust awm_parallel against the real daemon"
        else
            fail "Rust awm_parallel against the real daemon: status $status, stdout $(cat "$work/real-rs.out"), stderr $(cat "$work/real-rs.err")"
        fi
    fi
    stop_daemon
    left=$(find /sys/fs/cgroup -maxdepth 3 -type d -name "$cg_root" 2>/dev/null || true)
    if [ -n "$left" ]; then
        fail "the daemon left its groups behind: $left"
        for d in $left; do find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true; done
    else
        pass "the daemon removed its groups ($cg_root)"
    fi
fi

if [ "$failures" -gt 0 ]; then
    echo "clients/test.sh: $failures failure(s)" >&2
    exit 1
fi
echo "clients/test.sh: all passed"
