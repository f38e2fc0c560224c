# shellcheck shell=bash
# Shared by the VM benchmark drivers (bench-pmake.sh, bench-coord.sh,
# bench-systemd.sh; sourced after common.sh): their common options, the
# build of a benchmark's own initramfs, the vCPU throttle and the run.
#
# Common options (bench_option):
#   --reps N          rounds (default 1)
#   --work W          work units per job (`atoll __worker cpujob --work W`),
#                     default 160: about 7 s alone at the default vCPU cap
#   --no-capacity     skip the guest's capacity check (one job alone, eight
#                     at once)
#   --vcpu-quota PCT  host CPU each vCPU thread may use, % of one host CPU
#                     (default 20). TCG runs the 8 vCPUs as host threads; on
#                     a host with fewer CPUs than that, an unthrottled vCPU
#                     runs faster when fewer vCPUs are busy, so the guest's
#                     total CPU capacity is fixed and "using idle CPUs"
#                     gains nothing. Capping every qemu thread (a cgroup v1
#                     `cpu` group per thread, made under this script's own
#                     cpu cgroup and removed at exit) makes the vCPUs
#                     independent CPUs of fixed speed, as long as 8 x PCT
#                     fits the host.
#   --no-throttle     run the vCPUs uncapped
#   --epoch-ms MS     the daemon's epoch_ms (default: its own, 30)
#   --timeout S       guest time limit for the benchmark
#
# A driver: parses its options with bench_option, checks them with
# bench_check_options, calls bench_prepare, bench_run, then bench_report
# with what its table shows of the console.

# The BENCH_* variables are the drivers' too.
# shellcheck disable=SC2034
BENCH_REPS=1
BENCH_WORK=160
BENCH_CAPACITY=1
BENCH_QUOTA_PCT=20
BENCH_EPOCH_MS=""
BENCH_TIMEOUT=1200

# bench_option ARGS...: takes the common option at the front of ARGS; sets
# BENCH_SHIFT to the number of words it used. False if it is not one.
bench_option() {
    # shellcheck disable=SC2034 # the caller shifts by it
    BENCH_SHIFT=1
    case "$1" in
        --no-capacity) BENCH_CAPACITY=0; return 0 ;;
        --no-throttle) BENCH_QUOTA_PCT=0; return 0 ;;
        --reps | --work | --vcpu-quota | --timeout | --epoch-ms)
            [ $# -ge 2 ] || vm_die "$1 needs a value"
            BENCH_SHIFT=2
            ;;
        *) return 1 ;;
    esac
    case "$1" in
        --reps) BENCH_REPS="$2" ;;
        --work) BENCH_WORK="$2" ;;
        --vcpu-quota) BENCH_QUOTA_PCT="$2" ;;
        --timeout) BENCH_TIMEOUT="$2" ;;
        --epoch-ms) BENCH_EPOCH_MS="$2" ;;
    esac
}

# bench_check_options [NUMBER...]: the common options and the driver's own
# whole numbers are whole numbers; the quota is at most 100.
bench_check_options() {
    local v
    for v in "${BENCH_WORK}" "${BENCH_REPS}" "${BENCH_QUOTA_PCT}" "${BENCH_TIMEOUT}" \
        ${BENCH_EPOCH_MS:+"${BENCH_EPOCH_MS}"} "$@"; do
        [[ "${v}" =~ ^[0-9]+$ ]] || vm_die "not a whole number: ${v}"
    done
    [ "${BENCH_QUOTA_PCT}" -le 100 ] || vm_die "--vcpu-quota ${BENCH_QUOTA_PCT}: at most 100"
}

# bench_options_note: the common options as given, for the table's header.
bench_options_note() {
    printf '%s%s%s' "${BENCH_EPOCH_MS:+ --epoch-ms ${BENCH_EPOCH_MS}}" \
        "$([ "${BENCH_CAPACITY}" = 1 ] || echo ' --no-capacity')" \
        "$([ "${BENCH_QUOTA_PCT}" -gt 0 ] && echo " --vcpu-quota ${BENCH_QUOTA_PCT}" || echo ' --no-throttle')"
}

# bench_atoll_bin: sets ATOLL_BIN to a release build of atoll (cargo
# build), unless it is set.
bench_atoll_bin() {
    [ -z "${ATOLL_BIN:-}" ] || return 0
    vm_log "cargo build --release -p atoll-cli"
    (cd "${VM_REPO_ROOT}" && cargo build --release -p atoll-cli)
    ATOLL_BIN="${CARGO_TARGET_DIR:-${VM_REPO_ROOT}/target}/release/atoll"
}

# bench_prepare DIR TEST [HOST_BINARY...]: prepares the host (setup.sh),
# builds atoll unless ATOLL_BIN is set, and builds an initramfs holding only
# the guest script TEST (and the host binaries given, with their
# libraries) in vm/build/DIR/. Sets BENCH_DIR, BENCH_TEST, BENCH_INITRD,
# BENCH_CONSOLE.
bench_prepare() {
    local bins=() b
    BENCH_DIR="${VM_BUILD}/$1"
    BENCH_TEST="$2"
    shift 2
    for b in "$@"; do bins+=(--bin "${b}"); done
    mkdir -p "${BENCH_DIR}"
    BENCH_CONSOLE="${BENCH_DIR}/console-${VM_KERNEL}.log"
    BENCH_INITRD="${BENCH_DIR}/initramfs-${VM_KERNEL}.cpio.gz"
    bash "${VM_REPO_ROOT}/scripts/vm/setup.sh"
    bench_atoll_bin
    VM_INITRAMFS_ROOT="${BENCH_DIR}/initramfs-root" \
        bash "${VM_REPO_ROOT}/scripts/vm/build-initramfs.sh" --atoll "${ATOLL_BIN}" \
        --tests "${BENCH_TEST}" --out "${BENCH_INITRD}" "${bins[@]+"${bins[@]}"}"
}

# --- vCPU throttle -------------------------------------------------------------

BENCH_CG_BASE=""
# The v1 cpu hierarchy and this process's place in it ("" if there is none).
BENCH_CPU_MNT=""
BENCH_CPU_PATH=""

# bench_throttle_setup: the cpu group the qemu threads' groups go into,
# when throttling (else BENCH_QUOTA_PCT becomes 0). Sets BENCH_THROTTLE_NOTE.
bench_throttle_setup() {
    BENCH_THROTTLE_NOTE="none (vCPU threads uncapped)"
    BENCH_CPU_MNT="$(awk '$3 == "cgroup" && $4 ~ /(^|,)cpu(,|$)/ { print $2; exit }' /proc/mounts)"
    BENCH_CPU_PATH="$(awk -F: '$2 ~ /(^|,)cpu(,|$)/ { print $3; exit }' /proc/self/cgroup)"
    [ "${BENCH_QUOTA_PCT}" -gt 0 ] || return 0
    if [ -n "${BENCH_CPU_MNT}" ] && [ -n "${BENCH_CPU_PATH}" ] &&
        [ -w "${BENCH_CPU_MNT}${BENCH_CPU_PATH%/}/" ]; then
        BENCH_CG_BASE="${BENCH_CPU_MNT}${BENCH_CPU_PATH%/}/atoll-${BENCH_DIR##*/}-vcpus-$$"
        mkdir "${BENCH_CG_BASE}"
        BENCH_THROTTLE_NOTE="each qemu thread capped at ${BENCH_QUOTA_PCT}% of a host CPU (cgroup v1 cpu, ${BENCH_CG_BASE})"
    else
        vm_log "no writable cgroup v1 cpu hierarchy: running the vCPUs uncapped"
        BENCH_QUOTA_PCT=0
    fi
}

# bench_throttle_threads PID: every thread of process PID gets a cpu group
# of its own with the quota; threads already placed are skipped.
bench_throttle_threads() {
    local pid=$1 t d
    for t in /proc/"${pid}"/task/*; do
        t=${t##*/}
        d="${BENCH_CG_BASE}/t${t}"
        [ -d "${d}" ] && continue
        mkdir "${d}" 2>/dev/null || continue
        echo 10000 >"${d}/cpu.cfs_period_us"
        echo $((BENCH_QUOTA_PCT * 100)) >"${d}/cpu.cfs_quota_us"
        echo "${t}" >"${d}/tasks" 2>/dev/null || rmdir "${d}"
    done
}

# bench_throttle_cleanup: puts any thread still in our groups back where
# this script is and removes the groups.
bench_throttle_cleanup() {
    [ -n "${BENCH_CG_BASE}" ] && [ -d "${BENCH_CG_BASE}" ] || return 0
    local d t
    for d in "${BENCH_CG_BASE}"/t*; do
        [ -d "${d}" ] || continue
        while read -r t; do
            echo "${t}" >"${BENCH_CPU_MNT}${BENCH_CPU_PATH}/tasks" 2>/dev/null || true
        done <"${d}/tasks"
        rmdir "${d}" 2>/dev/null || true
    done
    rmdir "${BENCH_CG_BASE}" 2>/dev/null || vm_log "could not remove ${BENCH_CG_BASE}"
}

# bench_ppid PID: the parent of process PID (from /proc/PID/stat, after the
# command name).
bench_ppid() {
    local st
    read -r st <"/proc/$1/stat" 2>/dev/null || return 1
    st=${st##*) }
    st=${st#* }
    echo "${st%% *}"
}

# bench_find_qemu: the qemu process started below this script (its pid, or
# nothing yet).
bench_find_qemu() {
    local p comm q
    for p in /proc/[0-9]*; do
        { read -r comm <"${p}/comm"; } 2>/dev/null || continue
        [ "${comm}" = qemu-system-x86 ] || continue
        q=${p#/proc/}
        while [ "${q}" -gt 1 ] 2>/dev/null; do
            q="$(bench_ppid "${q}")" || break
            if [ "${q}" = $$ ]; then
                echo "${p#/proc/}"
                return 0
            fi
        done
    done
    return 1
}

# --- the run -------------------------------------------------------------------

BENCH_RUN_PID=""
BENCH_TAIL_PID=""
bench_cleanup() {
    [ -z "${BENCH_RUN_PID}" ] || kill "${BENCH_RUN_PID}" 2>/dev/null || true
    [ -z "${BENCH_TAIL_PID}" ] || kill "${BENCH_TAIL_PID}" 2>/dev/null || true
    bench_throttle_cleanup
}

# bench_launch PARAMS COMMAND...: boots a guest by running COMMAND (run.sh
# or systemd/run.sh with its options) with PARAMS (and vmtest.timeout)
# added to VM_APPEND, the console in BENCH_CONSOLE and COMMAND's messages
# in BENCH_DIR/run.stderr; echoes the guest's notes and VMTEST lines on
# stderr, throttles the vCPUs, and waits. Sets BENCH_RC (COMMAND's
# status), BENCH_CLEAN (the console without CRs), BENCH_THROTTLE_NOTE,
# BENCH_HOST_NOTE (host CPUs, load, time). The one guest launch of every
# VM benchmark driver (bench_run below, bench-systemd.sh).
bench_launch() {
    local params=$1 start load_before loads=() last_load qemu=""
    shift
    trap bench_cleanup EXIT
    trap 'exit 130' INT TERM
    bench_throttle_setup
    load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
    start=$(date +%s)
    # Emptied first, so that the tail below never shows an older run.
    : >"${BENCH_CONSOLE}"
    # Progress (the guest's notes and VMTEST lines) on stderr; all of it in
    # the console log.
    VM_APPEND="${VM_APPEND:-} vmtest.timeout=${BENCH_TIMEOUT} ${params}" \
        "$@" >"${BENCH_CONSOLE}" 2>"${BENCH_DIR}/run.stderr" &
    BENCH_RUN_PID=$!
    tail -n +1 -f "${BENCH_CONSOLE}" 2>/dev/null | sed -u "s/\r//g" |
        grep --line-buffered -E '^(VMTEST|  \| |vm-init:)' >&2 &
    BENCH_TAIL_PID=$!
    # The host's load average once a minute while the guest runs.
    last_load=${start}
    while kill -0 "${BENCH_RUN_PID}" 2>/dev/null; do
        if [ "${BENCH_QUOTA_PCT}" -gt 0 ]; then
            [ -n "${qemu}" ] && [ -d "/proc/${qemu}" ] || qemu="$(bench_find_qemu || true)"
            [ -z "${qemu}" ] || bench_throttle_threads "${qemu}"
        fi
        if [ $(($(date +%s) - last_load)) -ge 60 ]; then
            last_load=$(date +%s)
            loads+=("$(cut -d' ' -f1 /proc/loadavg)")
        fi
        sleep 2
    done
    set +e
    wait "${BENCH_RUN_PID}"
    BENCH_RC=$?
    set -e
    BENCH_RUN_PID=""
    if [ -n "${BENCH_CG_BASE}" ]; then
        # How many threads were capped, and how often the cap bit.
        BENCH_THROTTLE_NOTE="${BENCH_THROTTLE_NOTE}; $(cat "${BENCH_CG_BASE}"/t*/cpu.stat 2>/dev/null |
            awk '$1 == "nr_periods" { n++; p += $2 } $1 == "nr_throttled" { t += $2; if ($2 > 0) b++ }
                 END { printf "%d threads, %d of them throttled, in %d of %d periods", n, b, t, p }')"
    fi
    sleep 1
    kill "${BENCH_TAIL_PID}" 2>/dev/null || true
    BENCH_TAIL_PID=""
    BENCH_HOST_NOTE="$(nproc) CPUs, load average ${load_before} before, $(cut -d' ' -f1-3 /proc/loadavg) after (1-min load each minute: ${loads[*]:-none}); $(($(date +%s) - start))s"
    BENCH_CLEAN="$(tr -d '\r' <"${BENCH_CONSOLE}")"
}

# bench_run PARAMS: boots the busybox VM (run.sh) with `--test $BENCH_TEST`,
# the initramfs of bench_prepare and PARAMS on the kernel command line
# (bench_launch).
bench_run() {
    bench_launch "$1" bash "${VM_REPO_ROOT}/scripts/vm/run.sh" --test "${BENCH_TEST}" \
        --timeout $((BENCH_TIMEOUT + 180)) --initrd "${BENCH_INITRD}"
}

# bench_header COMMAND: the table's first lines: the command, the kernel
# and throttle, the host.
bench_header() {
    echo "# $1$(bench_options_note)"
    echo "# kernel $(sed -n 's/.*vm-init: kernel \([^,]*\),.*/\1/p' <<<"${BENCH_CLEAN}" | head -n 1), VM_KERNEL=${VM_KERNEL}; throttle: ${BENCH_THROTTLE_NOTE}"
    echo "# host: ${BENCH_HOST_NOTE}"
}

# bench_report COMMAND REGEX...: writes the table (bench_header, then the
# console lines matching each REGEX in turn, then the VMTEST lines) to
# vm/build/<dir>/table-$VM_KERNEL.txt, prints it and exits (bench_finish).
bench_report() {
    local table="${BENCH_DIR}/table-${VM_KERNEL}.txt" cmd=$1 re
    shift
    {
        bench_header "${cmd}"
        for re in "$@" '^VMTEST (PASS|FAIL)'; do
            grep -E "${re}" <<<"${BENCH_CLEAN}" || true
        done
    } >"${table}"
    bench_finish "${table}"
}

# bench_finish TABLE: prints the table file, run.sh's last words, and exits
# with run.sh's status.
bench_finish() {
    cat "$1"
    tail -n 1 "${BENCH_DIR}/run.stderr" >&2 || true
    if [ "${BENCH_RC}" -ne 0 ]; then
        vm_log "run.sh failed (status ${BENCH_RC}); console: ${BENCH_CONSOLE}, run.sh messages: ${BENCH_DIR}/run.stderr"
        tail -n 30 "${BENCH_DIR}/run.stderr" >&2 || true
    fi
    exit "${BENCH_RC}"
}
