#!/usr/bin/env bash
# One of atoll's own benchmarks, `atoll bench NAME`, in the systemd guest
# (Debian 12, cgroup v2, 8 vCPUs, 2 NUMA nodes): boots the guest with
# `--test atollbench` (tests/vm-systemd/bench_atollbench.sh), which runs
# the bench with the plain cgroup2 backend (on netisland: classification by
# nftables), and brings its JSON back.
#
#   bench-systemd.sh --bench NAME [--kernel backports|stable] [--smp N]
#                    [--nodes N] [--vcpu-quota PCT | --no-throttle]
#                    [--timeout S] [-- BENCH OPTIONS...]
#
# NAME: netisland, slo, ... (what the guest image has the programs for:
# slo needs redis-server, scripts/vm/systemd/packages.txt). BENCH OPTIONS
# go to `atoll bench NAME` as they are, one word each (no spaces in a
# word; commas are kept: `--configs none,net`). --vcpu-quota, --no-throttle and --timeout are the VM benchmarks'
# (scripts/vm/bench-lib.sh; default 20 % of a host CPU per qemu thread,
# 1200 s in the guest).
#
# Root is required. ATOLL_BIN=PATH skips the cargo build (release).
# Output in vm/build/bench-NAME/ (bench-NAME-SCENARIO/ when the bench's
# options hold `--scenario SCENARIO`): NAME-<kernel>.json (the bench's report),
# table-<kernel>.txt (the table with the command, date, commit, kernel,
# throttle and the host's load), console-<kernel>.log, vm/ (the run's
# share and console); the table is printed on stdout. Exits with run.sh's
# status.
set -euo pipefail
# shellcheck source=scripts/vm/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
# shellcheck source=scripts/vm/bench-lib.sh
. "${VM_REPO_ROOT}/scripts/vm/bench-lib.sh"

name=""
smp=8
nodes=2
bench_args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --bench) name="$2"; shift 2 ;;
        --kernel) VM_KERNEL="$2"; shift 2 ;;
        --smp) smp="$2"; shift 2 ;;
        --nodes) nodes="$2"; shift 2 ;;
        --) shift; bench_args=("$@"); break ;;
        -h | --help) sed -n '2,25p' "$0"; exit 0 ;;
        --no-throttle) BENCH_QUOTA_PCT=0; shift ;;
        --vcpu-quota) BENCH_QUOTA_PCT="$2"; shift 2 ;;
        --timeout) BENCH_TIMEOUT="$2"; shift 2 ;;
        *) vm_die "unknown argument $1 (the bench's options go after --)" ;;
    esac
done
case "${VM_KERNEL}" in
    stable | backports) export VM_KERNEL ;;
    *) vm_die "--kernel ${VM_KERNEL}: expected stable or backports" ;;
esac
[[ "${name}" =~ ^[a-z0-9]+$ ]] || vm_die "--bench NAME is required (netisland, slo, ...)"
bench_check_options "${smp}" "${nodes}"
for a in "${bench_args[@]+"${bench_args[@]}"}"; do
    [[ "${a}" =~ ^[A-Za-z0-9.,_-]+$ ]] || vm_die "bench option '${a}': letters, digits, . , _ - only"
    case "${a}" in --json | --table) vm_die "bench option ${a}: the guest script sets it" ;; esac
done
[ "$(id -u)" = 0 ] || vm_die "bench-systemd.sh needs root (qemu, the image)"

# A scenario gets a directory of its own (bench-slo-tiers), so that its
# run does not replace the plain bench's output.
tag=""
prev=""
for a in "${bench_args[@]+"${bench_args[@]}"}"; do
    [ "${prev}" != --scenario ] || tag="-${a}"
    prev=${a}
done
BENCH_DIR="${VM_BUILD}/bench-${name}${tag}"
mkdir -p "${BENCH_DIR}"
BENCH_CONSOLE="${BENCH_DIR}/console-${VM_KERNEL}.log"
bench_atoll_bin
words="${bench_args[*]+"${bench_args[*]}"}"

# The run: systemd/run.sh (its share and console in BENCH_DIR), the vCPU
# throttle and the host's load while it runs: bench-lib.sh's bench_launch.
export VM_SD_RUN_DIR="${BENCH_DIR}/vm"
bench_launch "atollbench.name=${name} atollbench.args=${words// /+}" \
    bash "${VM_REPO_ROOT}/scripts/vm/systemd/run.sh" --test atollbench --atoll "${ATOLL_BIN}" \
    --smp "${smp}" --nodes "${nodes}" --timeout $((BENCH_TIMEOUT + 300))

json="${BENCH_DIR}/${name}-${VM_KERNEL}.json"
if [ -s "${BENCH_DIR}/vm/share/out/${name}.json" ]; then
    cp "${BENCH_DIR}/vm/share/out/${name}.json" "${json}"
else
    vm_log "the guest left no ${name}.json"
    rm -f "${json}"
fi
table="${BENCH_DIR}/table-${VM_KERNEL}.txt"
{
    echo "# scripts/vm/bench-systemd.sh --bench ${name} --smp ${smp} --nodes ${nodes}$([ "${BENCH_QUOTA_PCT}" -gt 0 ] && echo " --vcpu-quota ${BENCH_QUOTA_PCT}" || echo ' --no-throttle')${words:+ -- ${words}}"
    echo "# $(grep -m 1 -o 'vm-init: systemd [0-9]*.*kernel [^,]*' <<<"${BENCH_CLEAN}" | sed 's/ (.*)//'), VM_KERNEL=${VM_KERNEL}; throttle: ${BENCH_THROTTLE_NOTE}"
    echo "# host: ${BENCH_HOST_NOTE}"
    echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "${VM_REPO_ROOT}" rev-parse --short HEAD)"
    grep -E '^  \| ' <<<"${BENCH_CLEAN}" || true
    sed -n 's/^ATOLLBENCH //p' <<<"${BENCH_CLEAN}"
    grep -E '^VMTEST (PASS|FAIL)' <<<"${BENCH_CLEAN}" || true
    [ ! -s "${json}" ] || echo "# JSON: ${json}"
} >"${table}"
bench_finish "${table}"
