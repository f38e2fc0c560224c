#!/usr/bin/env bash
# The unbalanced pmake scenario of seed 004 in the VM (8 CPUs), once per
# isolation mode: builds an initramfs holding only tests/vm/bench_pmake.sh,
# boots the VM with `--test pmake`, and prints the guest's table and its
# PMAKE_JSON line on stdout (progress on stderr).
#
#   bench-pmake.sh [--work W] [--reps N] [--modes smp,quota,isolate]
#                  [--no-capacity] [--vcpu-quota PCT | --no-throttle]
#                  [--epoch-ms MS] [--timeout SECONDS]
#
# --modes LIST      the isolation modes, in order (default smp,quota,isolate)
# --reps N          rounds over the modes (default 1); the table averages them
# --timeout S       guest time limit for the benchmark (default 2400)
# The other options are the benchmarks' common ones, described in
# scripts/vm/bench-lib.sh (--work, --no-capacity, --vcpu-quota,
# --no-throttle, --epoch-ms); --no-throttle shows the fixed-capacity effect.
#
# Root is required (as for the rest of the rig). ATOLL_BIN=PATH skips the
# cargo build; VM_KERNEL picks the kernel as everywhere in scripts/vm.
# Files: vm/build/pmake/ (initramfs, console log, table). run.sh also
# writes its usual vm/build/serial-$VM_KERNEL.log.
set -euo pipefail
# shellcheck source=scripts/vm/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
# shellcheck source=scripts/vm/bench-lib.sh
. "${VM_REPO_ROOT}/scripts/vm/bench-lib.sh"

modes=smp,quota,isolate
BENCH_TIMEOUT=2400
while [ $# -gt 0 ]; do
    case "$1" in
        --modes) modes="$2"; shift 2 ;;
        -h | --help) sed -n '2,21p' "$0"; exit 0 ;;
        *) bench_option "$@" || vm_die "unknown argument $1"; shift "${BENCH_SHIFT}" ;;
    esac
done
# shellcheck disable=SC2119 # no numbers of its own
bench_check_options

bench_prepare pmake pmake
bench_run "pmake.work=${BENCH_WORK} pmake.reps=${BENCH_REPS} pmake.modes=${modes} pmake.capacity=${BENCH_CAPACITY}${BENCH_EPOCH_MS:+ pmake.epoch_ms=${BENCH_EPOCH_MS}}"

bench_report "scripts/vm/bench-pmake.sh --work ${BENCH_WORK} --reps ${BENCH_REPS} --modes ${modes}" \
    '^  \| (capacity|[a-z]+(: most CPUs|: CPUs of| \(round|: all jobs|: twelve|: daemon))' \
    '^PMAKE( |_JSON )' '^  \| (per unit:|[a-z]+ [0-9]+ u[0-9] )'
