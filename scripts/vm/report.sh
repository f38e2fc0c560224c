# shellcheck shell=bash
# Boots a test VM and reports its guest tests' results (sourced by run.sh and
# systemd/run.sh, after common.sh).
#
#   vm_boot_report LOG TIMEOUT_S QEMU_ARGV...
#
# Runs QEMU_ARGV under `timeout`, echoes the serial console (qemu's stdout)
# and saves it to LOG, then reads the guest's lines:
#   VMTEST BEGIN <name>
#   VMTEST PASS <name>            or   VMTEST FAIL <name>: <reason>
#   VMTEST DONE passed=N failed=M
# Returns 0 only if the guest printed "VMTEST DONE passed=N failed=0" with
# N > 0. The last line it prints is always "vm: N passed, M failed". A
# guest kernel panic before any test failed gets one more boot (see below).
# If the caller defines vm_before_boot, it runs before each boot (the
# systemd rig makes a fresh disk overlay there).
# After it returns: vm_elapsed (seconds of the last boot), vm_clean (its
# console without CRs).

vm_boot_report() {
    local log=$1 timeout_s=$2
    shift 2
    local rc=0 start done_line seen_pass seen_fail passed failed ok=0 panic
    # One boot: sets rc, vm_elapsed, vm_clean, done_line.
    vm_boot_once() {
        if declare -F vm_before_boot >/dev/null; then vm_before_boot; fi
        start=$(date +%s)
        set +e
        timeout --kill-after=10 "${timeout_s}" "$@" </dev/null 2>&1 | tee "${log}"
        rc=${PIPESTATUS[0]}
        set -e
        vm_elapsed=$(($(date +%s) - start))
        vm_clean="$(tr -d '\r' <"${log}")"
        done_line="$(printf '%s\n' "${vm_clean}" | grep -E '^VMTEST DONE passed=[0-9]+ failed=[0-9]+' | tail -n 1 || true)"
    }

    vm_boot_once "$@"
    # A guest kernel that panics before any test failed gets one more boot:
    # under TCG the guest kernel has died of an "int3" Oops while patching
    # its own code (static keys), a fault of the emulation, not of a test.
    # The first log is kept; a panic that comes back fails the run as usual.
    if [ -z "${done_line}" ] && grep -q 'Kernel panic' <<<"${vm_clean}" &&
        ! grep -q '^VMTEST FAIL ' <<<"${vm_clean}"; then
        cp "${log}" "${log%.log}.first.log"
        vm_log "guest $(grep -m 1 'Kernel panic' <<<"${vm_clean}" | sed 's/^.*\] //') before any test failed: booting once more (first log: ${log%.log}.first.log)"
        vm_boot_once "$@"
    fi
    seen_pass=$(printf '%s\n' "${vm_clean}" | grep -c '^VMTEST PASS ' || true)
    seen_fail=$(printf '%s\n' "${vm_clean}" | grep -c '^VMTEST FAIL ' || true)

    if [ -n "${done_line}" ]; then
        passed="$(sed -n 's/.*passed=\([0-9]*\).*/\1/p' <<<"${done_line}")"
        failed="$(sed -n 's/.*failed=\([0-9]*\).*/\1/p' <<<"${done_line}")"
        [ "${failed}" -eq 0 ] && [ "${passed}" -gt 0 ] && ok=1
    else
        # No DONE line: the guest crashed, hung or was killed. Count what it
        # reported and one more failure for the run itself.
        passed=${seen_pass}
        failed=$((seen_fail + 1))
        if [ "${rc}" -eq 124 ] || [ "${rc}" -eq 137 ]; then
            vm_log "timed out after ${timeout_s}s with no VMTEST DONE line"
        else
            vm_log "qemu exited with status ${rc} and no VMTEST DONE line"
        fi
        panic="$(printf '%s\n' "${vm_clean}" | grep -m 1 'Kernel panic' || true)"
        [ -z "${panic}" ] || vm_log "guest ${panic#*] }"
        vm_log "last serial lines (${log}):"
        printf '%s\n' "${vm_clean}" | tail -n 40 | sed 's/^/  serial| /' >&2
    fi
    if [ "${ok}" = 1 ]; then
        vm_log "guest finished in ${vm_elapsed}s"
    else
        printf '%s\n' "${vm_clean}" | grep '^VMTEST FAIL ' | sed 's/^/  /' >&2 || true
    fi
    echo "vm: ${passed} passed, ${failed} failed"
    [ "${ok}" = 1 ]
}
