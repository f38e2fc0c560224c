#!/usr/bin/env bash
# The coordination scenarios in the VM (8 CPUs): two of inTune (seed 000)
# and a multi-component application. Builds an initramfs holding only the
# scenario's guest script, boots the VM with `--test coordcap`, `coordarb`
# or `coordapp`, and prints the guest's table and its JSON line on stdout
# (progress on stderr).
#
#   bench-coord.sh --scenario cap|arbitration|app [--reps N] [--work W]
#                  [--jobs J] [--cap C] [--configs LIST]
#                  [--cap-period-ms MS] [--cap-interval-ms MS]
#                  [--policies round_robin,priority] [--contended]
#                  [--length S] [--threads T] [--load-on S] [--load-off S]
#                  [--rate R] [--seconds S] [--lua L] [--bound US] [--percentile P]
#                  [--report-ms M] [--conns C] [--backends N] [--hog H]
#                  [--react-util U] [--no-capacity]
#                  [--vcpu-quota PCT | --no-throttle] [--epoch-ms MS]
#                  [--timeout SECONDS]
#
# --scenario cap          section 5.1, a platform CPU cap under phased load
#                         (tests/vm/bench_coordcap.sh): configurations none,
#                         single, static, coord
# --scenario arbitration  section 5.3, two overlays borrowing from a third
#                         island (tests/vm/bench_coordarb.sh), once per
#                         arbitration policy of the islands
# --contended       arbitration: the simulator's contended shape
#                   (scenarios/arbitration.toml) instead of the paper's: x
#                   and y own 2 CPUs each and stay saturated, z lends its
#                   second CPU only while its periodic load is away and
#                   revokes it when the load returns, so both overlays ask
#                   for that one CPU in the same rounds
# --length S        contended: each run's length (default 60)
# --threads T       contended: spinning threads per borrower (default 4)
# --load-on S       contended: the lender's busy seconds (default 1)
# --load-off S      contended: its idle seconds between (default 2)
# --scenario app          Redis back ends tuned by their front end's
#                         latency reports (tests/vm/bench_coordapp.sh):
#                         configurations alone, static, coord, borrow; installs
#                         redis-server on the host (apt) if missing and
#                         copies it into the initramfs
# --reps N          rounds (default 1); the tables give mean and range
# --jobs J          cap: jobs per side and phase (default 4); arbitration:
#                   jobs per borrowing overlay (default 2)
# --cap C           cap: the platform CPU cap (default 4 of the 8 CPUs)
# --cap-period-ms MS, --cap-interval-ms MS
#                   cap: the cap overlay's cap_period_ms and cap_interval_ms
#                   (`single` and `coord`; default: the daemon's own)
# --configs LIST    cap: the configurations, in order (default
#                   none,single,static,coord); app: default static,coord,borrow
# --policies LIST   arbitration: the policies, in order
# --rate R          app: requests a second (default 30)
# --seconds S       app: the front end's run per configuration (default 30)
# --lua L           app: Lua loop iterations per request and back end
#                   (default 3000)
# --bound US        app: the overlay's latency_us (default 100000)
# --percentile P    app: its percentile (default 95)
# --report-ms M     app: the front end's report window (default 1000)
# --conns C         app: the front end's concurrent requests (default 4)
# --backends N      app: Redis servers (default 2)
# --hog H           app: spinning threads beside them (default 2)
# --react-util U    app: borrow's react_utilization (default 0.8)
# --timeout S       guest time limit for the benchmark (default 1200)
# The other options are the benchmarks' common ones, described in
# scripts/vm/bench-lib.sh (--work: cap and arbitration jobs, and every
# scenario's capacity check; --no-capacity, --vcpu-quota, --no-throttle,
# --epoch-ms).
#
# Root is required (as for the rest of the rig). ATOLL_BIN=PATH skips the
# cargo build; VM_KERNEL picks the kernel as everywhere in scripts/vm.
# Files: vm/build/coord-<scenario>/ (initramfs, console log, table). run.sh
# also writes its usual vm/build/serial-$VM_KERNEL.log.
set -euo pipefail
# shellcheck source=scripts/vm/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
# shellcheck source=scripts/vm/bench-lib.sh
. "${VM_REPO_ROOT}/scripts/vm/bench-lib.sh"

scenario=""
jobs=""
cap=4
cap_period=""
cap_interval=""
configs=""
policies=round_robin,priority
# arbitration --contended: name=value, in the kernel command line's words.
contended=0
declare -A arb=([seconds]=60 [threads]=4 [load_on]=1 [load_off]=2)
# app: name=value, in the kernel command line's words.
declare -A app=([rate]=30 [seconds]=30 [lua]=3000 [bound]=100000 [percentile]=95
    [report_ms]=1000 [conns]=4 [backends]=2 [hog]=2 [react_util]=0.8)
while [ $# -gt 0 ]; do
    case "$1" in
        --scenario) scenario="$2"; shift 2 ;;
        --jobs) jobs="$2"; shift 2 ;;
        --cap) cap="$2"; shift 2 ;;
        --cap-period-ms) cap_period="$2"; shift 2 ;;
        --cap-interval-ms) cap_interval="$2"; shift 2 ;;
        --configs) configs="$2"; shift 2 ;;
        --policies) policies="$2"; shift 2 ;;
        --contended) contended=1; shift ;;
        --length | --threads | --load-on | --load-off)
            [ $# -ge 2 ] || vm_die "$1 needs a value"
            k="${1#--}"
            k="${k//-/_}"
            arb[${k/length/seconds}]="$2"
            shift 2
            ;;
        --rate | --seconds | --lua | --bound | --percentile | --report-ms | --conns | --backends | --hog | --react-util)
            [ $# -ge 2 ] || vm_die "$1 needs a value"
            k="${1#--}"
            app[${k//-/_}]="$2"
            shift 2
            ;;
        -h | --help) sed -n '2,67p' "$0"; exit 0 ;;
        *) bench_option "$@" || vm_die "unknown argument $1"; shift "${BENCH_SHIFT}" ;;
    esac
done
bins=()
case "${scenario}" in
    cap)
        test_name=coordcap; prefix=COORDCAP; jobs=${jobs:-4}; configs=${configs:-none,single,static,coord}
        [[ "${configs}" =~ ^(none|single|static|coord)(,(none|single|static|coord))*$ ]] ||
            vm_die "--configs ${configs}: a comma-separated list of none, single, static, coord"
        ;;
    arbitration)
        test_name=coordarb; prefix=COORDARB; jobs=${jobs:-2}
        for k in seconds threads load_on load_off; do
            [[ "${arb[${k}]}" =~ ^[1-9][0-9]*$ ]] ||
                vm_die "--${k//_/-} ${arb[${k}]}: not a whole number above 0"
        done
        ;;
    app)
        test_name=coordapp; prefix=COORDAPP; jobs=${jobs:-0}; configs=${configs:-static,coord,borrow}
        [[ "${configs}" =~ ^(alone|static|coord|borrow)(,(alone|static|coord|borrow))*$ ]] ||
            vm_die "--configs ${configs}: a comma-separated list of alone, static, coord, borrow"
        for k in rate seconds lua bound report_ms conns backends hog; do
            [[ "${app[${k}]}" =~ ^[1-9][0-9]*$ ]] ||
                vm_die "--${k//_/-} ${app[${k}]}: not a whole number above 0"
        done
        for k in percentile react_util; do
            [[ "${app[${k}]}" =~ ^[0-9]+(\.[0-9]+)?$ ]] || vm_die "--${k//_/-} ${app[${k}]}: not a number"
        done
        [ "${app[backends]}" -le 9 ] || vm_die "--backends ${app[backends]}: at most 9"
        vm_apt_install redis-server
        bins+=("$(command -v redis-server)")
        ;;
    "") vm_die "--scenario cap|arbitration|app is required" ;;
    *) vm_die "--scenario ${scenario}: expected cap, arbitration or app" ;;
esac
bench_check_options "${jobs}"
[[ "${cap}" =~ ^[0-9]+(\.[0-9]+)?$ ]] || vm_die "--cap ${cap}: not a number"
for v in "${cap_period}" "${cap_interval}"; do
    [[ -z "${v}" || "${v}" =~ ^[1-9][0-9]*$ ]] || vm_die "--cap-period-ms/--cap-interval-ms ${v}: not a whole number above 0"
done
[[ "${policies}" =~ ^(round_robin|priority)(,(round_robin|priority))*$ ]] ||
    vm_die "--policies ${policies}: a comma-separated list of round_robin, priority"

bench_prepare "coord-${scenario}" "${test_name}" "${bins[@]+"${bins[@]}"}"

params="coord.work=${BENCH_WORK} coord.reps=${BENCH_REPS} coord.jobs=${jobs} coord.capacity=${BENCH_CAPACITY}${BENCH_EPOCH_MS:+ coord.epoch_ms=${BENCH_EPOCH_MS}}"
opts="--scenario ${scenario} --reps ${BENCH_REPS} --work ${BENCH_WORK}"
case "${scenario}" in
    cap)
        params="${params} coord.cap=${cap} coord.configs=${configs}"
        opts="${opts} --jobs ${jobs} --cap ${cap} --configs ${configs}"
        if [ -n "${cap_period}" ]; then
            params="${params} coord.cap_period_ms=${cap_period}"
            opts="${opts} --cap-period-ms ${cap_period}"
        fi
        if [ -n "${cap_interval}" ]; then
            params="${params} coord.cap_interval_ms=${cap_interval}"
            opts="${opts} --cap-interval-ms ${cap_interval}"
        fi
        ;;
    arbitration)
        params="${params} coord.policies=${policies}"
        opts="${opts} --policies ${policies}"
        if [ "${contended}" = 1 ]; then
            params="${params} coord.contended=1"
            opts="${opts} --contended"
            for k in seconds threads load_on load_off; do
                params="${params} coord.${k}=${arb[${k}]}"
            done
            opts="${opts} --length ${arb[seconds]} --threads ${arb[threads]} --load-on ${arb[load_on]} --load-off ${arb[load_off]}"
        else
            opts="${opts} --jobs ${jobs}"
        fi
        ;;
    app)
        params="${params} coord.configs=${configs}"
        opts="${opts} --configs ${configs}"
        for k in rate seconds lua bound percentile report_ms conns backends hog react_util; do
            params="${params} coord.${k}=${app[${k}]}"
            opts="${opts} --${k//_/-} ${app[${k}]}"
        done
        ;;
esac
bench_run "${params}"

bench_report "scripts/vm/bench-coord.sh ${opts}" '^  \| capacity' "^${prefix}( |_JSON )"
