# shellcheck shell=sh
# Helpers shared by the benchmarks' guest scripts (bench_*.sh), which
# source it after lib.sh: parameters from the kernel command line, jobs
# run in units with their exit status and end time, the capacity check,
# a fresh daemon per configuration, rounds in rotating order. POSIX sh for
# busybox ash; loops that run every second use shell builtins only (forks
# are slow under TCG).

# bench_param PREFIX NAME DEFAULT: the value of PREFIX.NAME= on the kernel
# command line, or DEFAULT.
bench_param() {
    _v=$(sed -n "s/.*$1\.$2=\([^ ]*\).*/\1/p" /proc/cmdline)
    echo "${_v:-$3}"
}

# bench_setup DIR PREFIX: DIR, emptied, for the benchmark's raw data; the
# parameters every benchmark takes from the kernel command line:
# PREFIX.work (WORK, default 160: the capacity check's and the jobs' work),
# PREFIX.reps (REPS, default 1), PREFIX.capacity (CAPACITY, default 1; 0
# skips the capacity check), PREFIX.epoch_ms (EPOCH_MS, default: the
# daemon's own).
# shellcheck disable=SC2034 # the benchmarks' parameters
bench_setup() {
    rm -rf "$1"
    mkdir -p "$1"
    WORK=$(bench_param "$2" work 160)
    REPS=$(bench_param "$2" reps 1)
    CAPACITY=$(bench_param "$2" capacity 1)
    EPOCH_MS=$(bench_param "$2" epoch_ms "")
}

# Times a refused `atoll run` (its command never started) is tried again.
RUN_TRIES=5

# now_s: seconds since boot with centiseconds, in $_t (no fork).
now_s() {
    read -r _t _ </proc/uptime
}

# job_elapsed_s FILE: the worker's elapsed_ms from its JSON report, in s.
job_elapsed_s() {
    sed -n 's/.*"elapsed_ms":\([0-9.]*\).*/\1/p' "$1" | awk '{ printf "%.2f", $1 / 1000 }'
}

# spawn_job OUT CMD...: runs CMD in the background, its stdout in OUT.json
# and stderr in OUT.err; OUT.rc gets its exit status, OUT.end the uptime it
# ended at. The subshell's pid is in $!.
spawn_job() {
    _out=$1
    shift
    (
        "$@" >"$_out.json" 2>"$_out.err"
        echo $? >"$_out.rc"
        read -r _e _ </proc/uptime
        echo "$_e" >"$_out.end"
    ) &
}

# run_in_unit OUT UNIT WORKER ARGS...: `atoll run --unit UNIT -- atoll
# __worker WORKER ARGS...`, tried again (up to RUN_TRIES times) while the
# daemon refuses it before the command started; OUT.tries gets the number
# of attempts. run_cmd_in_unit OUT UNIT CMD ARGS... does the same for any
# command.
run_in_unit() {
    _o=$1
    _un=$2
    shift 2
    run_cmd_in_unit "$_o" "$_un" "$ATOLL" __worker "$@"
}
run_cmd_in_unit() {
    _o=$1
    _un=$2
    shift 2
    _n=1
    while :; do
        echo "$_n" >"$_o.tries"
        "$ATOLL" run --socket "$SOCK" --unit "$_un" -- "$@" 2>"$_o.try.err"
        _rc=$?
        cat "$_o.try.err" >&2
        [ "$_rc" != 0 ] && [ "$_n" -lt "$RUN_TRIES" ] &&
            grep -q 'the command was not started' "$_o.try.err" || return "$_rc"
        _n=$((_n + 1))
    done
}

# check_job OUT WHAT [FIELD]: fails the benchmark if the job did not run to
# the end (exit status 0 and FIELD, default "elapsed_ms", in its report).
# BENCH_FAIL_HOOK, if set, names a function called with OUT first.
check_job() {
    _rc=$(cat "$1.rc" 2>/dev/null)
    if [ "$_rc" != 0 ] || ! grep -q "\"${3:-elapsed_ms}\"" "$1.json"; then
        note "$2: exit status '${_rc}', stdout: $(head -c 300 "$1.json" 2>/dev/null)"
        note "$2: stderr: $(head -c 300 "$1.err" 2>/dev/null)"
        [ -z "${BENCH_FAIL_HOOK:-}" ] || "$BENCH_FAIL_HOOK" "$1"
        fail "$2 did not complete (exit status '${_rc}')"
    fi
}

# capacity_check DIR WORK: unless CAPACITY is 0, without the daemon, one
# `cpujob --work WORK` alone, then eight at once (one per CPU); their times
# (s) in T1 and T8 (the mean of the eight; both empty when skipped). About
# equal when the vCPUs act as independent CPUs; see docs/isolation.md.
capacity_check() {
    T1=""
    T8=""
    [ "${CAPACITY:-1}" != 0 ] || return 0
    mkdir -p "$1"
    spawn_job "$1/alone" "$ATOLL" __worker cpujob --work "$2"
    wait $!
    check_job "$1/alone" "capacity check: one job alone"
    T1=$(job_elapsed_s "$1/alone.json")
    _cpids=""
    for _i in 0 1 2 3 4 5 6 7; do
        spawn_job "$1/par$_i" "$ATOLL" __worker cpujob --work "$2"
        _cpids="$_cpids $!"
    done
    for _p in $_cpids; do wait "$_p"; done
    for _i in 0 1 2 3 4 5 6 7; do
        check_job "$1/par$_i" "capacity check: job $_i of 8"
        job_elapsed_s "$1/par$_i.json"
        echo
    done >"$1/par.txt"
    T8=$(awk '{ s += $1 } END { printf "%.2f", s / NR }' "$1/par.txt")
    note "capacity: one cpujob --work $2 alone ${T1}s; eight at once ${T8}s each (mean)"
}

# config_head WHAT HOST_CPUS: the start of a benchmark's daemon config: a
# comment naming WHAT, epoch_ms (if EPOCH_MS is set), the host partition
# on HOST_CPUS ("" for none), no adopt_all.
config_head() {
    echo "# Written by $1."
    [ -z "$EPOCH_MS" ] || printf 'epoch_ms = %s\n\n' "$EPOCH_MS"
    printf '[host]\ncpus = "%s"\nadopt_all = false\n\n' "$2"
}

# overlays_json: `atoll overlay ls --json` (atoll_cli puts --socket after
# the first word, which is not where `overlay ls` takes it).
overlays_json() {
    timeout "$CMD_TIMEOUT" "$ATOLL" overlay ls --socket "$SOCK" --json
}

# count_cpus LIST: the number of CPUs in a kernel CPU list, in $_nc.
count_cpus() {
    _nc=0
    _rest=$1
    while [ -n "$_rest" ]; do
        _part=${_rest%%,*}
        if [ "$_part" = "$_rest" ]; then _rest=""; else _rest=${_rest#*,}; fi
        case "$_part" in
            *-*) _nc=$((_nc + ${_part#*-} - ${_part%-*} + 1)) ;;
            ?*) _nc=$((_nc + 1)) ;;
        esac
    done
}

# island_sample ISLAND: the island group's CPUs and CPU time now, as
# "NCPUS/USAGE_USEC" in $_is (builtins only).
island_sample() {
    _c=""
    { read -r _c <"$CG/$ROOT/$1/cpuset.cpus.effective"; } 2>/dev/null
    count_cpus "$_c"
    _u="?"
    { read -r _k _u <"$CG/$ROOT/$1/cpu.stat"; } 2>/dev/null
    _is="$_nc/$_u"
}

# stat_fields FIELDS...: from /proc/PID/stat after the command name, the
# state in $_state and user+system CPU ticks in $_ticks.
stat_fields() {
    _state=${1:-?}
    shift 11
    _ticks=$((${1:-0} + ${2:-0}))
}

# unit_group UNIT: the unit's cgroup directory under the daemon's root.
unit_group() {
    for _g in "$CG/$ROOT"/*/"$1" "$CG/$ROOT/$1"; do
        [ -d "$_g" ] && { echo "$_g"; return 0; }
    done
    find "$CG/$ROOT" -type d -name "$1" 2>/dev/null | head -n 1
}

# bench_begin DIR CONF ROUND: the run's directory DIR, its config
# (write_config CONF DIR/config.toml: each benchmark has its own) and a
# fresh daemon (no saved state) with it; $_log0 is where its part of the
# daemon log starts.
bench_begin() {
    mkdir -p "$1"
    write_config "$2" "$1/config.toml"
    rm -rf "$STATE_DIR"
    _log0=0
    [ ! -f "$DAEMON_LOG" ] || _log0=$(wc -l <"$DAEMON_LOG")
    note "$2 (round $3): starting the daemon"
    start_daemon "$1/config.toml"
    sleep 2
}

# overlays_registered DIR WHAT [NAME...]: `atoll overlay ls --json` into
# DIR/overlays-before.json; fails unless it answers and lists every NAME.
overlays_registered() {
    _od=$1
    _ow=$2
    shift 2
    overlays_json >"$_od/overlays-before.json" 2>&1 ||
        fail "$_ow: atoll overlay ls failed: $(head -c 300 "$_od/overlays-before.json")"
    for _on in "$@"; do
        grep -q "\"$_on\"" "$_od/overlays-before.json" ||
            fail "$_ow: overlay $_on is not registered: $(head -c 300 "$_od/overlays-before.json")"
    done
}

# wait_procs GROUP WHAT: fails unless a process shows up in the cgroup
# GROUP within 60 s.
wait_procs() {
    uptime_s
    # shellcheck disable=SC2154 # _now: set by uptime_s (lib.sh)
    _deadline=$((_now + 60))
    # (cgroup files have no size: read one line)
    until { read -r _x <"$1/cgroup.procs"; } 2>/dev/null; do
        uptime_s
        [ "$_now" -le "$_deadline" ] || fail "$2 did not start within 60s"
        sleep 1
    done
}

# bench_daemon_stop WHAT DIR: `atoll stop`; fails unless the daemon exits
# and removes its cgroups. DIR/daemon.log gets its part of the log.
bench_daemon_stop() {
    _dp=$(daemon_pid)
    atoll_cli stop >/dev/null || fail "$1: atoll stop failed"
    wait_for 60 "daemon $_dp to exit after atoll stop ($1)" dead "$_dp"
    [ ! -e "$CG/$ROOT" ] || fail "$1: $CG/$ROOT still exists after atoll stop"
    rm -f "$VMT_STATE/daemon.pid"
    tail -n +$((_log0 + 1)) "$DAEMON_LOG" >"$2/daemon.log"
}

# daemon_clock_offset: the guest uptime (s) at which the daemon's clock
# (the times of its decisions, `atoll why`) read 0, in $_off.
daemon_clock_offset() {
    now_s
    _s0=$_t
    _um=$(atoll_cli status --json | sed -n 's/.*"uptime_ms": *\([0-9]*\).*/\1/p' | head -n 1)
    now_s
    _off=$(awk -v a="$_s0" -v b="$_t" -v m="${_um:-0}" 'BEGIN { printf "%.3f", (a + b) / 2 - m / 1000 }')
}

# bench_warnings WHAT DIR: the warnings in DIR/daemon.log: their number in
# $_warn, the first five on the console.
bench_warnings() {
    _warn=$(grep -c 'WARN' "$2/daemon.log")
    if [ "$_warn" -gt 0 ]; then
        note "$1: daemon log: $_warn warnings, the first:"
        grep 'WARN' "$2/daemon.log" | head -n 5 | sed 's/^/  | daemon: /'
    fi
}

# bench_rounds FUNC LIST REPS: FUNC ITEM ROUND for every item of LIST
# (space separated), REPS rounds; each round starts one item later, so
# that a drift in the host's load does not always hit the same one.
bench_rounds() {
    _br_f=$1
    _br_order=$2
    _br_reps=$3
    _br_n=1
    while [ "$_br_n" -le "$_br_reps" ]; do
        for _br_i in $_br_order; do
            "$_br_f" "$_br_i" "$_br_n"
        done
        case "$_br_order" in
            *" "*) _br_order="${_br_order#* } ${_br_order%% *}" ;;
        esac
        _br_n=$((_br_n + 1))
    done
}
