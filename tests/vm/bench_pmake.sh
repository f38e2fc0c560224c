# shellcheck shell=sh
# The unbalanced pmake scenario of seed 004 (section 4.2, figures 3-5) on
# the VM's 8 CPUs, once per isolation mode. A benchmark, not a test: it
# asserts no timing and fails only if something did not run.
#
# Platform (one per mode, fresh daemon each): no host partition, one island
# `all` on CPUs 0-7, units u1..u8 entitled to one CPU each. Workload: every
# job is `atoll run --unit uN -- atoll __worker cpujob --work W`; units u1-u4
# run one job, u5-u8 two, all twelve launched together. A unit's completion
# time runs from the common launch to the end of its last job.
#
# Before the modes, a capacity check without the daemon: one job alone,
# then eight at once (one per CPU). Their time ratio says whether the 8
# vCPUs behave as 8 independent CPUs (about 1) or as a shared, fixed
# amount of host CPU (about 8 / host CPUs); see docs/isolation.md.
#
# Kernel command line parameters (scripts/vm/bench-pmake.sh sets them):
#   pmake.work=W              work units per job (default 160)
#   pmake.modes=smp,quota,isolate   modes, in this order
#   pmake.reps=N              rounds over the modes (default 1)
#   pmake.capacity=0          skip the capacity check
#   pmake.epoch_ms=N          the daemon's epoch_ms (default: the daemon's own)
#
# Output: notes, the table (lines starting "PMAKE "), one "PMAKE_JSON {...}".
# Per-job reports, cpuset samples and status snapshots stay in /run/vmtest/pmake.

# shellcheck source=tests/vm/bench_lib.sh
. "$VMT_DIR/bench_lib.sh"

PM_DIR=$VMT_STATE/pmake
bench_setup "$PM_DIR" pmake

MODES=$(bench_param pmake modes smp,quota,isolate | tr ',' ' ')
UNITS="u1 u2 u3 u4 u5 u6 u7 u8"

# jobs_of UNIT: how many jobs the unit runs (u1-u4 one, u5-u8 two).
jobs_of() {
    case "$1" in
        u[1-4]) echo 1 ;;
        *) echo 2 ;;
    esac
}

# print_samples OUT: when a job failed, the last samples of its run.
print_samples() {
    if [ -s "${1%/*}/samples" ]; then
        note "samples (uptime, unit=cpus/cpu.idle, daemon=state/wchan/ticks):"
        tail -n 30 "${1%/*}/samples" | sed 's/^/  | /'
    fi
}
BENCH_FAIL_HOOK=print_samples

# --- capacity check (no daemon) ----------------------------------------------

capacity_check "$PM_DIR/capacity" "$WORK"

# --- one mode -----------------------------------------------------------------

# write_config MODE FILE
write_config() {
    {
        config_head "tests/vm/bench_pmake.sh ($1)" ""
        printf '[isolation]\nmode = "%s"\n\n' "$1"
        printf '[island.all]\ncpus = "0-7"\n'
        for u in $UNITS; do
            printf '\n[unit.%s]\nisland = "all"\ncpus = 1\n' "$u"
        done
    } >"$2"
}

# sampler DIR: once a second until DIR/stop exists, one line
# "UPTIME u1=CPUS/IDLE ... daemon=STATE/WCHAN/TICKS": each unit's
# cpuset.cpus.effective and cpu.idle, and the daemon's state, wait channel
# and CPU ticks (shell builtins only: forks are slow under TCG).
sampler() {
    _sd=$1
    read -r _dp <"$_sd/daemon.pid"
    _gl=""
    for u in $UNITS; do
        read -r _g <"$_sd/group.$u"
        _gl="$_gl $u=$_g"
    done
    while [ ! -e "$_sd/stop" ]; do
        now_s
        _line=$_t
        for _ug in $_gl; do
            _c=""
            _i=""
            { read -r _c <"${_ug#*=}/cpuset.cpus.effective"; } 2>/dev/null
            { read -r _i <"${_ug#*=}/cpu.idle"; } 2>/dev/null
            _line="$_line ${_ug%%=*}=${_c:-?}/${_i:-?}"
        done
        _st=""
        _wc=""
        { read -r _st <"/proc/$_dp/stat"; } 2>/dev/null
        { read -r _wc <"/proc/$_dp/wchan"; } 2>/dev/null
        # shellcheck disable=SC2086 # split into fields
        stat_fields ${_st##*) }
        echo "$_line daemon=$_state/${_wc:-?}/$_ticks" >>"$_sd/samples"
        sleep 1
    done
}

# run_mode MODE REP: one fresh daemon, the twelve jobs, teardown. Appends
# "MODE REP UNIT JOBS COMPLETION_S JOB_S..." lines to $PM_DIR/results.
run_mode() {
    _mode=$1
    _d=$PM_DIR/$1.$2
    bench_begin "$_d" "$1" "$2"
    atoll_cli status --json >"$_d/status-before.json" || fail "$1: atoll status failed"
    jflat <"$_d/status-before.json" >"$_d/status-before.flat"
    grep -qx "isolation_mode=$1" "$_d/status-before.flat" ||
        fail "$1: status reports $(grep '^isolation_mode=' "$_d/status-before.flat" || echo 'no isolation_mode'), not $1"
    for u in $UNITS; do
        g=$(unit_group "$u")
        [ -n "$g" ] || fail "$1: no cgroup for unit $u under $CG/$ROOT"
        echo "$g" >"$_d/group.$u"
        sed -n 's/^usage_usec //p' "$g/cpu.stat" >"$_d/usage0.$u"
    done
    daemon_pid >"$_d/daemon.pid"
    sampler "$_d" &
    _sampler=$!

    now_s
    _t0=$_t
    _pids=""
    for u in $UNITS; do
        j=1
        while [ "$j" -le "$(jobs_of "$u")" ]; do
            spawn_job "$_d/$u.j$j" run_in_unit "$_d/$u.j$j" "$u" cpujob --work "$WORK"
            _pids="$_pids $!"
            j=$((j + 1))
        done
    done
    now_s
    note "$1: twelve jobs launched in $(awk -v a="$_t0" -v b="$_t" 'BEGIN { printf "%.2f", b - a }')s"
    for p in $_pids; do wait "$p"; done
    now_s
    _tend=$_t
    touch "$_d/stop"
    wait "$_sampler"
    atoll_cli status --json >"$_d/status-after.json" || true

    for u in $UNITS; do
        _last=$_t0
        _jt=""
        _adm=""
        _extra=0
        j=1
        while [ "$j" -le "$(jobs_of "$u")" ]; do
            check_job "$_d/$u.j$j" "$1: unit $u job $j"
            read -r _e <"$_d/$u.j$j.end"
            read -r _n <"$_d/$u.j$j.tries"
            _extra=$((_extra + _n - 1))
            _last=$(awk -v a="$_last" -v b="$_e" 'BEGIN { print (b > a) ? b : a }')
            _el=$(job_elapsed_s "$_d/$u.j$j.json")
            _jt="$_jt $_el"
            # When the worker started, after the launch: the admission delay.
            _adm="$_adm $(awk -v a="$_t0" -v e="$_e" -v x="$_el" 'BEGIN { printf "%.2f", e - x - a }')"
            j=$((j + 1))
        done
        read -r _g <"$_d/group.$u"
        read -r _u0 <"$_d/usage0.$u"
        _u1=$(sed -n 's/^usage_usec //p' "$_g/cpu.stat")
        _c=$(awk -v a="$_t0" -v b="$_last" -v u0="$_u0" -v u1="$_u1" \
            'BEGIN { printf "%.2f %.2f", b - a, (u1 - u0) / 1e6 }')
        _a=$(echo "$_adm" | awk '{ for (i = 1; i <= NF; i++) s += $i; printf "%.2f", s / NF }')
        echo "$1 $2 $u $(jobs_of "$u") $_c $_extra $_a$_jt" >>"$PM_DIR/results"
    done
    note "$1: all jobs done after $(awk -v a="$_t0" -v b="$_tend" 'BEGIN { printf "%.2f", b - a }')s"
    # From the samples: the most CPUs each unit had at once, the seconds it
    # was cpu.idle, and the daemon's CPU time.
    awk '{ for (i = 2; i < NF; i++) { split($i, kv, "="); split(kv[2], ci, "/"); n = 0
             m = split(ci[1], parts, ",")
             for (k = 1; k <= m; k++) { if (split(parts[k], r, "-") == 2) n += r[2] - r[1] + 1; else if (parts[k] ~ /^[0-9]+$/) n++ }
             if (n > max[kv[1]]) max[kv[1]] = n
             if (ci[2] == 1) idle[kv[1]]++ }
           split($NF, f, "/"); if (NR == 1) d0 = f[3]; d1 = f[3] }
         END { s = ""; for (u = 1; u <= 8; u++) s = s sprintf(" u%d:%d%s", u, max["u" u], idle["u" u] ? "(idle " idle["u" u] "s)" : "")
               print s; printf "%.2f\n", (d1 - d0) / 100
               for (u = 1; u <= 8; u++) { if (u <= 4) { if (max["u" u] > ml) ml = max["u" u] } else if (max["u" u] > mh) mh = max["u" u] }
               print ml + 0, mh + 0 }' "$_d/samples" >"$_d/sampled"
    note "$1: most CPUs per unit in the 1 s samples (seconds with cpu.idle=1):$(sed -n 1p "$_d/sampled")"
    note "$1: daemon CPU time while the jobs ran: $(sed -n 2p "$_d/sampled")s"
    # The same samples as a timeline: per second, each unit's CPU count (u1..u8).
    note "$1: CPUs of u1..u8, one group per second:$(awk '{ g = ""
        for (i = 2; i < NF; i++) { split($i, kv, "="); split(kv[2], ci, "/"); n = 0
            m = split(ci[1], parts, ",")
            for (k = 1; k <= m; k++) { if (split(parts[k], r, "-") == 2) n += r[2] - r[1] + 1; else if (parts[k] ~ /^[0-9]+$/) n++ }
            g = g ((n > 9) ? "+" : n) }
        printf " %s", g }' "$_d/samples")"

    bench_daemon_stop "$1" "$_d"
    # Lends and take-backs (by the owner or returned by the borrower) logged.
    awk '{ l += gsub(/lend CPUs/, ""); r += gsub(/back from unit/, "") } END { print l + 0, r + 0 }' \
        "$_d/daemon.log" >"$_d/lends"
    read -r _l _r <"$_d/lends"
    note "$1: daemon log: $_l CPU lends, $_r take-backs"
    echo "$1 $2 $(sed -n 2p "$_d/sampled") $_l $_r $(sed -n 3p "$_d/sampled")" >>"$PM_DIR/modeinfo"
}

bench_rounds run_mode "$MODES" "$REPS"

# --- the table ----------------------------------------------------------------

awk -v work="$WORK" -v reps="$REPS" -v t1="$T1" -v t8="$T8" -v modes="$MODES" -v epoch="${EPOCH_MS:-default}" '
# modeinfo: MODE ROUND DAEMON_CPU_S LENDS TAKEBACKS MAXCPUS_1JOB MAXCPUS_2JOB
FNR == NR { dc[$1] += $3; le[$1] += $4; tb[$1] += $5; if ($7 > bh[$1]) bh[$1] = $7; next }
# results: MODE ROUND UNIT JOBS COMPLETION_S CPU_S REFUSED ADMISSION_S JOB_S...
{
    m = $1; c = $5
    if ($4 == 1) { ls[m] += c; ln[m]++ } else { hs[m] += c; hn[m]++ }
    as[m] += c; an[m]++
    if (c > mxr[m, $2]) mxr[m, $2] = c
    us[m, $3] += c; un[m, $3]++
    rf[m] += $7
    # per round: completion sums and the guest CPU time of all jobs
    rl[m, $2] += ($4 == 1) ? c : 0; rh[m, $2] += ($4 == 1) ? 0 : c; rc[m, $2] += $6
    ad[m] += $8 * $4; adn[m] += $4
    for (k = 9; k <= NF; k++) { if ($4 == 1) { lj[m] += $k; ljn[m]++ } else { hj[m] += $k; hjn[m]++ } }
}
function r(a, b) { return (b > 0) ? sprintf("%.2f", a / b) : "null" }
END {
    nm = split(modes, ml, " ")
    for (i = 1; i <= nm; i++) {
        m = ml[i]
        for (k = 1; k <= reps; k++) mx[m] += mxr[m, k]
        mx[m] /= reps
        L[m] = ls[m] / ln[m]; H[m] = hs[m] / hn[m]; A[m] = as[m] / an[m]
    }
    printf "PMAKE completion time, s (from the common launch to the end of the last job of a unit; mean of %d round(s), work %d, epoch_ms %s)\n", reps, work, epoch
    printf "PMAKE %-8s %8s %8s %8s %8s\n", "mode", "1-job", "2-job", "all", "max"
    for (i = 1; i <= nm; i++) {
        m = ml[i]
        printf "PMAKE %-8s %8.2f %8.2f %8.2f %8.2f\n", m, L[m], H[m], A[m], mx[m]
    }
    printf "PMAKE %-8s %9s %9s %9s %8s %9s %6s %8s\n", "mode", "job-run-1", "job-run-2", "admission", "refused", "daemon-s", "lends", "2j-cpus"
    for (i = 1; i <= nm; i++) {
        m = ml[i]
        printf "PMAKE %-8s %9.2f %9.2f %9.2f %8d %9.1f %6d %8d\n", m, lj[m] / ljn[m], hj[m] / hjn[m], ad[m] / adn[m], rf[m], dc[m] / reps, le[m], bh[m]
    }
    printf "PMAKE (job-run-N: mean time one job of an N-job unit ran, from the worker; admission: mean launch-to-worker-start;\n"
    printf "PMAKE  refused: atoll run refusals retried; daemon-s: daemon CPU s per round; lends: CPU lends logged; 2j-cpus: most CPUs a 2-job unit had)\n"
    # Slowdown: guest CPU seconds the 12 jobs used / 12 x the lone job time
    # of the capacity check. The work is fixed, so above 1 means the vCPUs
    # ran slower than when the capacity was checked (host contention).
    if (t1 > 0) {
        printf "PMAKE per round (1-job and 2-job means, max, slowdown = guest CPU s of the 12 jobs / (12 x lone job %ss))\n", t1
        for (k = 1; k <= reps; k++)
            for (i = 1; i <= nm; i++) {
                m = ml[i]
                sl[m, k] = rc[m, k] / (12 * t1); slm[m] += sl[m, k] / reps
                printf "PMAKE round %d %-8s %8.2f %8.2f %8.2f   slowdown %.2f\n", k, m, rl[m, k] / 4, rh[m, k] / 4, mxr[m, k], sl[m, k]
            }
    }
    if ("quota" in L) {
        printf "PMAKE ratio to quota (below 1 = faster than quota)\n"
        for (i = 1; i <= nm; i++) {
            m = ml[i]
            printf "PMAKE %-8s %8s %8s %8s %8s\n", m, r(L[m], L["quota"]), r(H[m], H["quota"]), r(A[m], A["quota"]), r(mx[m], mx["quota"])
        }
    }
    j = sprintf("{\"work\":%d,\"reps\":%d,\"epoch_ms\":\"%s\",\"units\":8,\"cpus\":8", work, reps, epoch)
    if (t1 != "") j = j sprintf(",\"capacity\":{\"one_alone_s\":%s,\"eight_at_once_s\":%s,\"ratio\":%s}", t1, t8, r(t8, t1))
    j = j ",\"modes\":{"
    for (i = 1; i <= nm; i++) {
        m = ml[i]
        j = j sprintf("%s\"%s\":{\"one_job_mean_s\":%.2f,\"two_job_mean_s\":%.2f,\"mean_s\":%.2f,\"max_s\":%.2f", (i > 1) ? "," : "", m, L[m], H[m], A[m], mx[m])
        if (t1 > 0) {
            j = j sprintf(",\"slowdown\":%.2f,\"rounds\":[", slm[m])
            for (k = 1; k <= reps; k++)
                j = j sprintf("%s{\"one_job_mean_s\":%.2f,\"two_job_mean_s\":%.2f,\"max_s\":%.2f,\"slowdown\":%.2f}", (k > 1) ? "," : "", rl[m, k] / 4, rh[m, k] / 4, mxr[m, k], sl[m, k])
            j = j "]"
        }
        j = j sprintf(",\"job_run_one_job_s\":%.2f,\"job_run_two_job_s\":%.2f,\"admission_s\":%.2f", lj[m] / ljn[m], hj[m] / hjn[m], ad[m] / adn[m])
        j = j sprintf(",\"refused_runs\":%d,\"daemon_cpu_s\":%.2f,\"cpu_lends\":%d,\"cpu_takebacks\":%d,\"max_cpus_two_job_unit\":%d,\"units\":{", rf[m], dc[m] / reps, le[m], tb[m], bh[m])
        for (u = 1; u <= 8; u++)
            j = j sprintf("%s\"u%d\":%.2f", (u > 1) ? "," : "", u, (un[m, "u" u] > 0) ? us[m, "u" u] / un[m, "u" u] : 0)
        j = j "}"
        if ("quota" in L)
            j = j sprintf(",\"vs_quota\":{\"one_job\":%s,\"two_job\":%s,\"mean\":%s,\"max\":%s}", r(L[m], L["quota"]), r(H[m], H["quota"]), r(A[m], A["quota"]), r(mx[m], mx["quota"]))
        j = j "}"
    }
    print "PMAKE_JSON " j "}}"
}' "$PM_DIR/modeinfo" "$PM_DIR/results"

note "per unit: mode round unit jobs completion_s cpu_s refused_runs admission_s job_s..."
sed 's/^/  | /' "$PM_DIR/results"
