#!/usr/bin/env bash
# The two coordination scenarios of inTune (seed 000) in the VM (8 CPUs):
# builds an initramfs holding only the scenario's guest script, boots the
# VM with `--test coordcap` or `--test coordarb`, and prints the guest's
# table and its JSON line on stdout (progress on stderr).
#
#   bench-coord.sh --scenario cap|arbitration [--reps N] [--work W] [--jobs J]
#                  [--cap C] [--configs none,single,static,coord]
#                  [--policies round_robin,priority] [--no-capacity]
#                  [--vcpu-quota PCT | --no-throttle] [--epoch-ms MS]
#                  [--timeout SECONDS]
#
# --scenario cap          section 5.1, a platform CPU cap under phased load
#                         (tests/vm/bench_coordcap.sh): configurations none,
#                         single, static, coord
# --scenario arbitration  section 5.3, two overlays borrowing from a third
#                         island (tests/vm/bench_coordarb.sh), once per
#                         arbitration policy of the islands
# --reps N          rounds (default 1); the tables give mean and range
# --work W          work units per job (`atoll __worker cpujob --work W`),
#                   default 160: about 7 s alone at the default vCPU cap
# --jobs J          cap: jobs per side and phase (default 4); arbitration:
#                   jobs per borrowing overlay (default 2)
# --cap C           cap: the platform CPU cap (default 4 of the 8 CPUs)
# --configs LIST    cap: the configurations, in order
# --policies LIST   arbitration: the policies, in order
# --no-capacity     skip the capacity check (one job alone, eight at once)
# --vcpu-quota PCT  host CPU each vCPU thread may use, % of one host CPU
#                   (default 20), so that the vCPUs act as independent CPUs
#                   of fixed speed (see scripts/vm/bench-pmake.sh and
#                   docs/isolation.md); a cgroup v1 `cpu` group per qemu
#                   thread under this script's own cpu cgroup, removed at exit
# --no-throttle     run the vCPUs uncapped
# --epoch-ms MS     the daemon's epoch_ms (default: its own, 30)
# --timeout S       guest time limit for the benchmark (default 1200)
#
# Root is required (as for the rest of the rig). ATOLL_BIN=PATH skips the
# cargo build; VM_KERNEL picks the kernel as everywhere in scripts/vm.
# Files: vm/build/coord-<scenario>/ (initramfs, console log, table). run.sh
# also writes its usual vm/build/serial-$VM_KERNEL.log.
set -euo pipefail
# shellcheck source=scripts/vm/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
here="${VM_REPO_ROOT}/scripts/vm"

scenario=""
reps=1
work=160
jobs=""
cap=4
configs=none,single,static,coord
policies=round_robin,priority
capacity=1
quota_pct=20
guest_timeout=1200
epoch_ms=""
while [ $# -gt 0 ]; do
    case "$1" in
        --scenario) scenario="$2"; shift 2 ;;
        --reps) reps="$2"; shift 2 ;;
        --work) work="$2"; shift 2 ;;
        --jobs) jobs="$2"; shift 2 ;;
        --cap) cap="$2"; shift 2 ;;
        --configs) configs="$2"; shift 2 ;;
        --policies) policies="$2"; shift 2 ;;
        --no-capacity) capacity=0; shift ;;
        --vcpu-quota) quota_pct="$2"; shift 2 ;;
        --no-throttle) quota_pct=0; shift ;;
        --timeout) guest_timeout="$2"; shift 2 ;;
        --epoch-ms) epoch_ms="$2"; shift 2 ;;
        -h | --help) sed -n '2,40p' "$0"; exit 0 ;;
        *) vm_die "unknown argument $1" ;;
    esac
done
case "${scenario}" in
    cap) test_name=coordcap; prefix=COORDCAP; jobs=${jobs:-4} ;;
    arbitration) test_name=coordarb; prefix=COORDARB; jobs=${jobs:-2} ;;
    "") vm_die "--scenario cap|arbitration is required" ;;
    *) vm_die "--scenario ${scenario}: expected cap or arbitration" ;;
esac
for v in "${work}" "${reps}" "${jobs}" "${quota_pct}" "${guest_timeout}" ${epoch_ms:+"${epoch_ms}"}; do
    [[ "${v}" =~ ^[0-9]+$ ]] || vm_die "not a whole number: ${v}"
done
[[ "${cap}" =~ ^[0-9]+(\.[0-9]+)?$ ]] || vm_die "--cap ${cap}: not a number"
[[ "${configs}" =~ ^(none|single|static|coord)(,(none|single|static|coord))*$ ]] ||
    vm_die "--configs ${configs}: a comma-separated list of none, single, static, coord"
[[ "${policies}" =~ ^(round_robin|priority)(,(round_robin|priority))*$ ]] ||
    vm_die "--policies ${policies}: a comma-separated list of round_robin, priority"
[ "${quota_pct}" -le 100 ] || vm_die "--vcpu-quota ${quota_pct}: at most 100"

out_dir="${VM_BUILD}/coord-${scenario}"
mkdir -p "${out_dir}"
console="${out_dir}/console-${VM_KERNEL}.log"
initrd="${out_dir}/initramfs-${VM_KERNEL}.cpio.gz"

bash "${here}/setup.sh"
if [ -z "${ATOLL_BIN:-}" ]; then
    vm_log "cargo build --release -p atoll-cli"
    (cd "${VM_REPO_ROOT}" && cargo build --release -p atoll-cli)
    ATOLL_BIN="${CARGO_TARGET_DIR:-${VM_REPO_ROOT}/target}/release/atoll"
fi
VM_INITRAMFS_ROOT="${out_dir}/initramfs-root" \
    bash "${here}/build-initramfs.sh" --atoll "${ATOLL_BIN}" --tests "${test_name}" --out "${initrd}"

# --- vCPU throttle (as in bench-pmake.sh) --------------------------------------

cg_base=""
throttle_note="none (vCPU threads uncapped)"
# The v1 cpu hierarchy and this process's place in it ("" if there is none).
cpu_mnt="$(awk '$3 == "cgroup" && $4 ~ /(^|,)cpu(,|$)/ { print $2; exit }' /proc/mounts)"
cpu_path="$(awk -F: '$2 ~ /(^|,)cpu(,|$)/ { print $3; exit }' /proc/self/cgroup)"
if [ "${quota_pct}" -gt 0 ]; then
    if [ -n "${cpu_mnt}" ] && [ -n "${cpu_path}" ] && [ -w "${cpu_mnt}${cpu_path%/}/" ]; then
        cg_base="${cpu_mnt}${cpu_path%/}/atoll-coord-vcpus-$$"
        mkdir "${cg_base}"
        throttle_note="each qemu thread capped at ${quota_pct}% of a host CPU (cgroup v1 cpu, ${cg_base})"
    else
        vm_log "no writable cgroup v1 cpu hierarchy: running the vCPUs uncapped"
        quota_pct=0
    fi
fi

# Gives every thread of process $1 a cpu group of its own with the quota;
# threads already placed are skipped.
throttle_threads() {
    local pid=$1 t d
    for t in /proc/"${pid}"/task/*; do
        t=${t##*/}
        d="${cg_base}/t${t}"
        [ -d "${d}" ] && continue
        mkdir "${d}" 2>/dev/null || continue
        echo 10000 >"${d}/cpu.cfs_period_us"
        echo $((quota_pct * 100)) >"${d}/cpu.cfs_quota_us"
        echo "${t}" >"${d}/tasks" 2>/dev/null || rmdir "${d}"
    done
}

# Puts any thread still in our groups back where this script is, removes them.
cleanup_throttle() {
    [ -n "${cg_base}" ] && [ -d "${cg_base}" ] || return 0
    local d t
    for d in "${cg_base}"/t*; do
        [ -d "${d}" ] || continue
        while read -r t; do
            echo "${t}" >"${cpu_mnt}${cpu_path}/tasks" 2>/dev/null || true
        done <"${d}/tasks"
        rmdir "${d}" 2>/dev/null || true
    done
    rmdir "${cg_base}" 2>/dev/null || vm_log "could not remove ${cg_base}"
}

# The parent of process $1 (from /proc/PID/stat, after the command name).
ppid_of() {
    local st
    read -r st <"/proc/$1/stat" 2>/dev/null || return 1
    st=${st##*) }
    st=${st#* }
    echo "${st%% *}"
}

# The qemu process started below this script (its pid, or nothing yet).
find_qemu() {
    local p comm q
    for p in /proc/[0-9]*; do
        { read -r comm <"${p}/comm"; } 2>/dev/null || continue
        [ "${comm}" = qemu-system-x86 ] || continue
        q=${p#/proc/}
        while [ "${q}" -gt 1 ] 2>/dev/null; do
            q="$(ppid_of "${q}")" || break
            if [ "${q}" = $$ ]; then
                echo "${p#/proc/}"
                return 0
            fi
        done
    done
    return 1
}

run_pid=""
tail_pid=""
finish() {
    [ -z "${run_pid}" ] || kill "${run_pid}" 2>/dev/null || true
    [ -z "${tail_pid}" ] || kill "${tail_pid}" 2>/dev/null || true
    cleanup_throttle
}
trap finish EXIT
trap 'exit 130' INT TERM

# --- run ---------------------------------------------------------------------

params="coord.work=${work} coord.reps=${reps} coord.jobs=${jobs} coord.capacity=${capacity}${epoch_ms:+ coord.epoch_ms=${epoch_ms}}"
case "${scenario}" in
    cap) params="${params} coord.cap=${cap} coord.configs=${configs}" ;;
    arbitration) params="${params} coord.policies=${policies}" ;;
esac
load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
start=$(date +%s)
# Progress (the guest's notes and VMTEST lines) on stderr; all of it in $console.
VM_APPEND="${VM_APPEND:-} vmtest.timeout=${guest_timeout} ${params}" \
    bash "${here}/run.sh" --test "${test_name}" --timeout $((guest_timeout + 180)) --initrd "${initrd}" \
    >"${console}" 2>"${out_dir}/run.stderr" &
run_pid=$!
: >>"${console}"
tail -n +1 -f "${console}" 2>/dev/null | sed -u "s/\r//g" | grep --line-buffered -E '^(VMTEST|  \| |vm-init:)' >&2 &
tail_pid=$!
qemu=""
# The host's load average once a minute while the guest runs.
loads=()
last_load=${start}
while kill -0 "${run_pid}" 2>/dev/null; do
    if [ "${quota_pct}" -gt 0 ]; then
        [ -n "${qemu}" ] && [ -d "/proc/${qemu}" ] || qemu="$(find_qemu || true)"
        [ -z "${qemu}" ] || throttle_threads "${qemu}"
    fi
    if [ $(($(date +%s) - last_load)) -ge 60 ]; then
        last_load=$(date +%s)
        loads+=("$(cut -d' ' -f1 /proc/loadavg)")
    fi
    sleep 2
done
set +e
wait "${run_pid}"
rc=$?
set -e
run_pid=""
if [ -n "${cg_base}" ]; then
    # How many threads were capped, and how often the cap bit.
    throttle_note="${throttle_note}; $(cat "${cg_base}"/t*/cpu.stat 2>/dev/null |
        awk '$1 == "nr_periods" { n++; p += $2 } $1 == "nr_throttled" { t += $2; if ($2 > 0) b++ }
             END { printf "%d threads, %d of them throttled, in %d of %d periods", n, b, t, p }')"
fi
sleep 1
kill "${tail_pid}" 2>/dev/null || true
tail_pid=""
elapsed=$(($(date +%s) - start))
load_after="$(cut -d' ' -f1-3 /proc/loadavg)"

clean="$(tr -d '\r' <"${console}")"
table="${out_dir}/table-${VM_KERNEL}.txt"
{
    opts="--scenario ${scenario} --reps ${reps} --work ${work} --jobs ${jobs}"
    case "${scenario}" in
        cap) opts="${opts} --cap ${cap} --configs ${configs}" ;;
        arbitration) opts="${opts} --policies ${policies}" ;;
    esac
    echo "# scripts/vm/bench-coord.sh ${opts}${epoch_ms:+ --epoch-ms ${epoch_ms}}$([ "${capacity}" = 1 ] || echo ' --no-capacity')$([ "${quota_pct}" -gt 0 ] && echo " --vcpu-quota ${quota_pct}" || echo ' --no-throttle')"
    echo "# kernel $(sed -n 's/.*vm-init: kernel \([^,]*\),.*/\1/p' <<<"${clean}" | head -n 1), VM_KERNEL=${VM_KERNEL}; throttle: ${throttle_note}"
    echo "# host: $(nproc) CPUs, load average ${load_before} before, ${load_after} after (1-min load each minute: ${loads[*]:-none}); ${elapsed}s"
    grep -E '^  \| capacity' <<<"${clean}" || true
    grep -E "^${prefix}( |_JSON )" <<<"${clean}" || true
    grep -E '^VMTEST (PASS|FAIL)' <<<"${clean}" || true
} >"${table}"
cat "${table}"
tail -n 1 "${out_dir}/run.stderr" >&2 || true
if [ "${rc}" -ne 0 ]; then
    vm_log "run.sh failed (status ${rc}); console: ${console}, run.sh messages: ${out_dir}/run.stderr"
    tail -n 30 "${out_dir}/run.stderr" >&2 || true
fi
exit "${rc}"
