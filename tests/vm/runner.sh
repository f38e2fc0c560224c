#!/bin/sh
# Guest test runner: runner.sh SPEC, where SPEC is "all", one test name or a
# comma-separated list (from atoll.test= on the kernel command line).
#
# Prints, on the serial console:
#   VMTEST BEGIN <name>
#   VMTEST PASS <name>            or   VMTEST FAIL <name>: <reason>
#   VMTEST DONE passed=N failed=M
# Each test is test_<name>.sh, run in its own shell with lib.sh loaded and a
# time limit; a test fails by calling `fail REASON` (or exiting non-zero).
# A name with no test_<name>.sh runs bench_<name>.sh instead (benchmarks:
# never part of "all"). `vmtest.timeout=SECONDS` on the kernel command line
# replaces the per-test limit.
VMT_DIR=${VMT_DIR:-/tests/vm}
VMT_STATE=${VMT_STATE:-/run/vmtest}
# The order "all" runs in; later tests reuse the daemon the earlier ones
# started. VMT_ORDER replaces it (the systemd rig: tests/vm-systemd/main.sh).
ORDER=${VMT_ORDER:-"smoke default islands run adopt_all restart resize teardown isolation coordination escalation pressure"}
TEST_TIMEOUT=${TEST_TIMEOUT:-240}
_t=$(sed -n 's/.*vmtest\.timeout=\([0-9][0-9]*\).*/\1/p' /proc/cmdline 2>/dev/null)
[ -z "$_t" ] || TEST_TIMEOUT=$_t

spec=${1:-all}
if [ "$spec" = all ]; then
    tests=""
    for t in $ORDER; do
        [ -r "$VMT_DIR/test_$t.sh" ] && tests="$tests $t"
    done
else
    tests=$(echo "$spec" | tr ',' ' ')
fi

mkdir -p "$VMT_STATE"
passed=0
failed=0
for t in $tests; do
    echo "VMTEST BEGIN $t"
    rm -f "$VMT_STATE/reason"
    f=$VMT_DIR/test_$t.sh
    [ -r "$f" ] || f=$VMT_DIR/bench_$t.sh
    if [ ! -r "$f" ]; then
        echo "VMTEST FAIL $t: no test named $t in $VMT_DIR"
        failed=$((failed + 1))
        continue
    fi
    timeout "$TEST_TIMEOUT" sh -c ". '$VMT_DIR/lib.sh' && . '$f'"
    rc=$?
    if [ "$rc" = 0 ]; then
        echo "VMTEST PASS $t"
        passed=$((passed + 1))
    else
        if [ -s "$VMT_STATE/reason" ]; then
            reason=$(cat "$VMT_STATE/reason")
        elif [ "$rc" = 143 ]; then
            reason="timed out after ${TEST_TIMEOUT}s"
        else
            reason="exited with status $rc"
        fi
        echo "VMTEST FAIL $t: $reason"
        failed=$((failed + 1))
    fi
done
echo "VMTEST DONE passed=$passed failed=$failed"
