# shellcheck shell=sh
# inTune section 5.1 (a platform CPU cap kept as a sum of per-island caps)
# on the VM's 8 CPUs. A benchmark, not a test: it asserts no timing and
# fails only if something did not run.
#
# Workload, in three phases run back to back: phase 1 runs J jobs in unit
# ua (side A) while side B is idle, phase 2 runs J in ua and J in ub, phase
# 3 runs J in ub only. A job is `atoll run --unit uX -- atoll __worker
# cpujob --work W`; a phase ends when its last job ends. The platform
# property: the islands together use at most CAP CPUs.
#
# Configurations (a fresh daemon each, no host partition, no adopt_all):
#   none    one island `all` (CPUs 0-7) holding ua and ub, no cap: the
#           paper's NoIslands, a single scheduler that knows no platform
#           cap (shows the offered load)
#   single  the same island with `[overlay.power] cpu_cap = CAP`: a single
#           scheduler with the cap, which on Linux is one group's cpu.max
#   static  islands a (CPUs 0-3, unit ua) and b (4-7, unit ub), each unit
#           with `cpu_cap = CAP/2`: uncoordinated islands, each with a
#           fixed share of the cap, nothing moves
#   coord   islands a and b, units uncapped, `[overlay.power] cpu_cap =
#           CAP`: the platform manager splits the cap into the islands'
#           cpu.max and moves it every epoch from islands that leave theirs
#           unused to islands throttled at theirs (rule 10)
#
# Measured: each phase's completion time (launch to the end of its last
# job), the whole run, and once a second (shell builtins only) every island
# and unit group's cpu.stat (usage_usec, nr_throttled) and cpu.max; the
# platform's use is the sum of the islands' usage_usec deltas over the
# sample's interval. Before the configurations, a capacity check without
# the daemon (one job alone, then eight at once) tells whether the vCPUs
# behave as independent CPUs.
#
# Kernel command line (scripts/vm/bench-coord.sh --scenario cap sets them):
#   coord.work=W           work units per job (default 160)
#   coord.jobs=J           jobs per side and phase (default 4)
#   coord.cap=C            the platform cap, CPUs (default 4)
#   coord.reps=N           rounds over the configurations (default 1)
#   coord.configs=a,b      configurations, in this order (default
#                          none,single,static,coord)
#   coord.epoch_ms=N       the daemon's epoch_ms (default: its own)
#   coord.cap_period_ms=N  the cap overlay's cap_period_ms (default: the
#                          daemon's own)
#   coord.cap_interval_ms=N  its cap_interval_ms (default: the daemon's own)
#   coord.capacity=0       skip the capacity check
#
# Output: notes, the table (lines starting "COORDCAP "), one
# "COORDCAP_JSON {...}". Raw samples and logs stay in /run/vmtest/coordcap.

# shellcheck source=tests/vm/bench_lib.sh
. "$VMT_DIR/bench_lib.sh"

CC_DIR=$VMT_STATE/coordcap
bench_setup "$CC_DIR" coord

JOBS=$(bench_param coord jobs 4)
CAP=$(bench_param coord cap 4)
CONFIGS=$(bench_param coord configs none,single,static,coord | tr ',' ' ')
CAP_PERIOD_MS=$(bench_param coord cap_period_ms "")
CAP_INTERVAL_MS=$(bench_param coord cap_interval_ms "")
HALF=$(awk -v c="$CAP" 'BEGIN { printf "%g", c / 2 }')
# A 1 s sample counts as above the cap when the islands used more than
# CAP + TOL CPUs in it (the sampler's interval is measured, not exact).
TOL=0.1

# --- capacity check (no daemon) ----------------------------------------------

capacity_check "$CC_DIR/capacity" "$WORK"

# --- one configuration ----------------------------------------------------------

# write_config CONF FILE
write_config() {
    {
        config_head "tests/vm/bench_coordcap.sh ($1)" ""
        case "$1" in
            none | single)
                printf '[island.all]\ncpus = "0-7"\n\n'
                printf '[unit.ua]\nisland = "all"\n\n[unit.ub]\nisland = "all"\n'
                ;;
            static)
                printf '[island.a]\ncpus = "0-3"\n\n[island.b]\ncpus = "4-7"\n\n'
                printf '[unit.ua]\nisland = "a"\ncpu_cap = %s\n\n' "$HALF"
                printf '[unit.ub]\nisland = "b"\ncpu_cap = %s\n' "$HALF"
                ;;
            coord)
                printf '[island.a]\ncpus = "0-3"\n\n[island.b]\ncpus = "4-7"\n\n'
                printf '[unit.ua]\nisland = "a"\n\n[unit.ub]\nisland = "b"\n'
                ;;
        esac
        case "$1" in
            single | coord)
                printf '\n[overlay.power]\ncpu_cap = %s\n' "$CAP"
                [ -z "$CAP_PERIOD_MS" ] || printf 'cap_period_ms = %s\n' "$CAP_PERIOD_MS"
                [ -z "$CAP_INTERVAL_MS" ] || printf 'cap_interval_ms = %s\n' "$CAP_INTERVAL_MS"
                ;;
        esac
    } >"$2"
}

# islands_of CONF: the island names.
islands_of() {
    case "$1" in
        none | single) echo all ;;
        *) echo a b ;;
    esac
}

# mono_ns: CLOCK_MONOTONIC in ns into $_ns, from /proc/timer_list's "now
# at N nsecs" (builtins only); /proc/uptime (10 ms steps) without it.
mono_ns() {
    _ns=""
    { while read -r _a _b _c _; do
        if [ "$_a $_b" = "now at" ]; then
            _ns=$_c
            break
        fi
    done <"/proc/timer_list"; } 2>/dev/null
    if [ -z "$_ns" ]; then
        read -r _ns _ </proc/uptime
        _c=${_ns#*.}
        _ns=$((${_ns%.*} * 1000000000 + ${_c#0} * 10000000))
    fi
}

# sampler DIR GROUPS...: once a second until DIR/stop exists, one line
# "SECONDS PHASE w=SPAN name=USAGE_USEC/NR_THROTTLED/QUOTA/PERIOD ..." for
# each group (NAME=PATH); QUOTA is "max" when uncapped. Builtins only. The
# clock is read just before and just after the groups' files (SPAN ns
# apart), and the sample's time is the middle: it is within SPAN/2 of
# every read. DIR/spread holds the widest span so far, ns.
sampler() {
    _sd=$1
    shift
    _spread=0
    while [ ! -e "$_sd/stop" ]; do
        read -r _ph <"$_sd/phase"
        mono_ns
        _t0=$_ns
        _line=""
        for _g in "$@"; do
            _u="?"
            _n="?"
            _q="?"
            _p="?"
            while read -r _k _v; do
                case "$_k" in
                    usage_usec) _u=$_v ;;
                    nr_throttled) _n=$_v ;;
                esac
            done <"${_g#*=}/cpu.stat"
            { read -r _q _p <"${_g#*=}/cpu.max"; } 2>/dev/null
            _line="$_line ${_g%%=*}=$_u/$_n/$_q/$_p"
        done
        mono_ns
        _w=$((_ns - _t0))
        _m=$((_t0 + _w / 2))
        _frac=$((_m % 1000000000))
        _frac=000000000$_frac
        _frac=${_frac#"${_frac%?????????}"}
        echo "$((_m / 1000000000)).$_frac $_ph w=$_w$_line" >>"$_sd/samples"
        if [ "$_w" -gt "$_spread" ]; then
            _spread=$_w
            echo "$_spread" >"$_sd/spread"
        fi
        sleep 1
    done
}

# launch_jobs DIR PHASE UNIT...: J jobs in each UNIT; their subshell pids
# are appended to $_pids.
launch_jobs() {
    _ld=$1
    _lp=$2
    shift 2
    for _u in "$@"; do
        _j=1
        while [ "$_j" -le "$JOBS" ]; do
            spawn_job "$_ld/p$_lp.$_u.j$_j" run_in_unit "$_ld/p$_lp.$_u.j$_j" "$_u" cpujob --work "$WORK"
            _pids="$_pids $!"
            _j=$((_j + 1))
        done
    done
}

# run_config CONF REP: one fresh daemon, the three phases, teardown.
# Appends "CONF REP PHASE ELAPSED_S JOBRUN_MEAN_S REFUSED" to $CC_DIR/phases
# and the per-second usage to $CC_DIR/usage.
run_config() {
    _conf=$1
    _rep=$2
    _d=$CC_DIR/$1.$2
    bench_begin "$_d" "$1" "$2"
    case "$1" in
        single | coord) overlays_registered "$_d" "$1" power ;;
        *) overlays_registered "$_d" "$1" ;;
    esac
    _groups=""
    for _i in $(islands_of "$1"); do
        [ -d "$CG/$ROOT/$_i" ] || fail "$1: no island group $CG/$ROOT/$_i"
        _groups="$_groups $_i=$CG/$ROOT/$_i"
    done
    for _u in ua ub; do
        _g=$(unit_group "$_u")
        [ -n "$_g" ] || fail "$1: no cgroup for unit $_u under $CG/$ROOT"
        _groups="$_groups $_u=$_g"
    done
    echo "$_groups" >"$_d/groups"
    echo 0 >"$_d/phase"
    # shellcheck disable=SC2086 # one argument per group
    sampler "$_d" $_groups &
    _sampler=$!
    sleep 2

    now_s
    _run0=$_t
    for _ph in 1 2 3; do
        echo "$_ph" >"$_d/phase"
        # Where the daemon log stands, to count its cap writes per phase.
        echo "$_ph $(wc -l <"$DAEMON_LOG")" >>"$_d/logmarks"
        _pids=""
        now_s
        _p0=$_t
        case "$_ph" in
            1) launch_jobs "$_d" 1 ua ;;
            2) launch_jobs "$_d" 2 ua ub ;;
            3) launch_jobs "$_d" 3 ub ;;
        esac
        for _p in $_pids; do wait "$_p"; done
        now_s
        _p1=$_t
        _jr=""
        _ref=0
        _ea=""
        _eb=""
        for _f in "$_d"/p"$_ph".*.rc; do
            _o=${_f%.rc}
            check_job "$_o" "$1 round $2 phase $_ph: ${_o##*/}"
            _jr="$_jr $(job_elapsed_s "$_o.json")"
            read -r _n <"$_o.tries"
            _ref=$((_ref + _n - 1))
            read -r _e <"$_o.end"
            case "${_o##*/}" in
                *.ua.*) _ea="$_ea $_e" ;;
                *.ub.*) _eb="$_eb $_e" ;;
            esac
        done
        _el=$(awk -v a="$_p0" -v b="$_p1" 'BEGIN { printf "%.2f", b - a }')
        _jm=$(echo "$_jr" | awk '{ for (i = 1; i <= NF; i++) s += $i; printf "%.2f", s / NF }')
        # When each side's last job ended, s after the phase started.
        _sa=$(echo "$_ea" | awk -v a="$_p0" '{ m = ""; for (i = 1; i <= NF; i++) if (m == "" || $i > m) m = $i
            if (m == "") print "-"; else printf "%.2f", m - a }')
        _sb=$(echo "$_eb" | awk -v a="$_p0" '{ m = ""; for (i = 1; i <= NF; i++) if (m == "" || $i > m) m = $i
            if (m == "") print "-"; else printf "%.2f", m - a }')
        echo "$1 $2 $_ph $_el $_jm $_ref $_sa $_sb" >>"$CC_DIR/phases"
        note "$1: phase $_ph done in ${_el}s (side A's last job ${_sa}s, side B's ${_sb}s; jobs ran ${_jm}s each on average)"
    done
    now_s
    _run1=$_t
    echo "$1 $2 0 $(awk -v a="$_run0" -v b="$_run1" 'BEGIN { printf "%.2f", b - a }') 0 0 - -" >>"$CC_DIR/phases"
    echo 4 >"$_d/phase"
    echo "4 $(wc -l <"$DAEMON_LOG")" >>"$_d/logmarks"
    sleep 2
    touch "$_d/stop"
    wait "$_sampler"
    overlays_json >"$_d/overlays-after.json" 2>&1 || true

    # Per interval between two samples: the islands' CPUs used (sum and
    # each), each side's cap in force (the lower of its island's and its
    # unit's cpu.max), throttling, and the sum's measurement error (each
    # end's time is within half its span of the reads, so the interval is
    # known to (w0 + w1) / 2). "CONF REP REL_T PHASE SUM a-or-all b ... ERR".
    awk -v conf="$1" -v rep="$2" -v t0="$_run0" -v isl="$(islands_of "$1")" '
        function cap(q, p) { return (q == "max" || q == "?" || p + 0 == 0) ? -1 : q / p }
        function lower(x, y) { if (x < 0) return y; if (y < 0) return x; return (x < y) ? x : y }
        {
            t = $1; ph = $2; delete u; delete q; delete n; w = 0
            for (i = 3; i <= NF; i++) {
                split($i, kv, "=")
                if (kv[1] == "w") { w = kv[2] / 1e9; continue }
                split(kv[2], f, "/")
                u[kv[1]] = f[1]; n[kv[1]] = f[2]; q[kv[1]] = cap(f[3], f[4])
            }
            if (NR > 1 && t > pt) {
                dt = t - pt; s = 0; line = ""
                ni = split(isl, il, " ")
                for (k = 1; k <= ni; k++) { x = (u[il[k]] - pu[il[k]]) / 1e6 / dt; s += x }
                ua = (u["ua"] - pu["ua"]) / 1e6 / dt; ub = (u["ub"] - pu["ub"]) / 1e6 / dt
                if (ni == 1) { ca = lower(q["all"], q["ua"]); cb = lower(q["all"], q["ub"]); ct = q["all"] }
                else { ca = lower(q["a"], q["ua"]); cb = lower(q["b"], q["ub"]); ct = (ca < 0 || cb < 0) ? -1 : ca + cb }
                th = 0; for (k in n) if (n[k] != "?" && pn[k] != "?" && n[k] > pn[k]) th = 1
                err = s * (pw + w) / 2 / dt
                printf "%s %s %.2f %s %.3f %.3f %.3f %.2f %.2f %.2f %d %.4f\n", conf, rep, pt - t0, ph, s, ua, ub, ca, cb, ct, th, err
            }
            pt = t; pw = w; for (k in u) pu[k] = u[k]; for (k in n) pn[k] = n[k]
        }' "$_d/samples" >"$_d/usage"
    cat "$_d/usage" >>"$CC_DIR/usage"
    # The caps as they changed (relative time: side A / side B caps in CPUs).
    note "$1: cap in force A/B (CPUs; -1 = none) when it changed, s since the run started:$(awk '
        { c = $8 "/" $9; if (c != last) { printf " %.0f:%s", $3, c; last = c } }' "$_d/usage")"
    note "$1: CPUs the islands used, per second (phase 1 | 2 | 3):$(awk '
        $4 >= 1 && $4 <= 3 { if (p != "" && $4 != p) printf " |"; printf " %.1f", $5; p = $4 }' "$_d/usage")"

    _dp=$(daemon_pid)
    # The daemon's CPU time (user + system ticks of /proc/PID/stat).
    _dst=""
    { read -r _dst <"/proc/$_dp/stat"; } 2>/dev/null
    # shellcheck disable=SC2086 # split into fields
    stat_fields ${_dst##*) }
    _dcpu=$_ticks
    bench_daemon_stop "$1" "$_d"
    # Cap writes of the platform manager's rebalancing (a receiving and a
    # giving island each get a cpu.max write), per phase; warnings.
    _moves=$(grep -c 'CPUs: received\|gave [0-9.]* CPUs to throttled' "$_d/daemon.log")
    _pm=$(awk -v base="$_log0" 'FILENAME ~ /logmarks$/ { m[$1] = $2 - base; next }
        /CPUs: received|CPUs to throttled/ { for (p = 1; p <= 3; p++) if (FNR > m[p] && FNR <= m[p + 1]) c[p]++ }
        END { printf "%d %d %d", c[1], c[2], c[3] }' "$_d/logmarks" "$_d/daemon.log")
    note "$_conf: daemon log: $_moves cap rebalancing writes (phase 1/2/3: $_pm)"
    bench_warnings "$_conf" "$_d"
    note "$_conf: daemon CPU time $((_dcpu / 100)).$((_dcpu % 100 / 10))s"
    echo "$_conf $_rep $_moves $_warn $_dcpu $_pm" >>"$CC_DIR/confinfo"
}

bench_rounds run_config "$CONFIGS" "$REPS"

# --- the table ----------------------------------------------------------------

awk -v work="$WORK" -v jobs="$JOBS" -v cap="$CAP" -v tol="$TOL" -v reps="$REPS" -v t1="$T1" -v t8="$T8" \
    -v confs="$CONFIGS" -v epoch="${EPOCH_MS:-default}" -v cperiod="${CAP_PERIOD_MS:-default}" -v cinterval="${CAP_INTERVAL_MS:-default}" '
function mean(s, n) { return (n > 0) ? s / n : 0 }
function span(c, k,    i, lo, hi, v) {
    lo = ""; hi = ""
    for (i = 1; i <= reps; i++) { v = el[c, k, i]; if (v == "") continue
        if (lo == "" || v < lo) lo = v; if (hi == "" || v > hi) hi = v }
    return sprintf("%.1f-%.1f", lo, hi)
}
# phases: CONF REP PHASE ELAPSED JOBRUN REFUSED (phase 0 = the whole run)
# confinfo: CONF REP CAP_WRITES WARNINGS DAEMON_TICKS WRITES_P1 WRITES_P2 WRITES_P3
FILENAME ~ /confinfo$/ { cw[$1] += $3; dt[$1] += $5; cwp[$1, 1] += $6; cwp[$1, 2] += $7; cwp[$1, 3] += $8; cn[$1]++; next }
# (SIDE_A_DONE SIDE_B_DONE: when the last job of each side ended, s after the phase started)
FILENAME ~ /phases$/ { el[$1, $3, $2] = $4; es[$1, $3] += $4; en[$1, $3]++; if ($3 > 0) { jr[$1, $3] += $5; rf[$1] += $6 }
    if ($3 == 2) { da[$1] += $7; db[$1] += $8 }; next }
# usage: CONF REP T PHASE SUM UA UB CAPA CAPB CAPT THROTTLED ERR
FILENAME ~ /usage$/ {
    if ($4 < 1 || $4 > 3) { run = ""; next }
    c = $1; s = $5
    n[c]++; sum[c] += s; if (s > mx[c]) mx[c] = s; if (s > cap + tol) over[c]++
    # Above the cap by more than its own measurement error.
    if (s - $12 > cap) overe[c]++; if ($12 > mxe[c]) mxe[c] = $12; if (s - $12 > mxl[c]) mxl[c] = s - $12
    # The mean of the last 5 samples of the same run (jobs running).
    if ($1 SUBSEP $2 != run) { run = $1 SUBSEP $2; w = 0 }
    win[w % 5] = s; w++
    if (w >= 5) { m5 = (win[0] + win[1] + win[2] + win[3] + win[4]) / 5; if (m5 > mx5[c]) mx5[c] = m5 }
    pn[c, $4]++; ps[c, $4] += s; if (s > pmx[c, $4]) pmx[c, $4] = s
    pa[c, $4] += $6; pb[c, $4] += $7
    if ($8 >= 0) { ca[c, $4] += $8; cna[c, $4]++ }
    if ($9 >= 0) { cb[c, $4] += $9; cnb[c, $4]++ }
    if ($10 >= 0 && $10 > ctmx[c]) ctmx[c] = $10
    next
}
END {
    nc = split(confs, cl, " ")
    printf "COORDCAP completion time, s: mean (min-max) of %d round(s); %d jobs per side and phase, work %d, cap %s CPUs, epoch_ms %s, cap_period_ms %s, cap_interval_ms %s\n", reps, jobs, work, cap, epoch, cperiod, cinterval
    printf "COORDCAP %-7s %16s %16s %16s %16s\n", "config", "phase1(A)", "phase2(A+B)", "phase3(B)", "whole run"
    for (i = 1; i <= nc; i++) { c = cl[i]
        printf "COORDCAP %-7s", c
        for (k = 1; k <= 3; k++) printf " %6.2f (%7s)", mean(es[c, k], en[c, k]), span(c, k)
        printf " %6.2f (%7s)\n", mean(es[c, 0], en[c, 0]), span(c, 0) }
    printf "COORDCAP phase 2, when each side finished (s after the phase started, mean):"
    for (i = 1; i <= nc; i++) { c = cl[i]; printf " %s A %.2f B %.2f%s", c, mean(da[c], en[c, 2]), mean(db[c], en[c, 2]), (i < nc) ? ";" : "" }
    printf "\n"
    printf "COORDCAP platform CPU use vs the cap of %s CPUs (1 s samples while jobs ran; max5: highest mean of 5 samples in a row;\n", cap
    printf "COORDCAP  over: samples above %s + %s; over-err: samples above %s by more than their measurement error; err: the largest\n", cap, tol, cap
    printf "COORDCAP  error of a sample, CPUs; max-err: the highest sample less its error; cap-sum: the most the caps in force added up to)\n"
    printf "COORDCAP %-7s %6s %6s %6s %9s %9s %9s %8s %8s %6s %7s %9s\n", "config", "max", "max5", "mean", "p1-mean", "p2-mean", "p3-mean", "over", "over-err", "err", "max-err", "cap-sum"
    for (i = 1; i <= nc; i++) { c = cl[i]
        printf "COORDCAP %-7s %6.2f %6.2f %6.2f", c, mx[c], mx5[c], mean(sum[c], n[c])
        for (k = 1; k <= 3; k++) printf " %9.2f", mean(ps[c, k], pn[c, k])
        printf " %4d/%-3d %4d/%-3d %6.3f %7.2f %9s\n", over[c], n[c], overe[c], n[c], mxe[c], mxl[c], (ctmx[c] > 0) ? sprintf("%.2f", ctmx[c]) : "none" }
    printf "COORDCAP per phase: CPUs used by A / B, and the cap in force on A / B (mean of the samples; - = no cap)\n"
    printf "COORDCAP %-7s %15s %15s %15s\n", "config", "phase1", "phase2", "phase3"
    for (i = 1; i <= nc; i++) { c = cl[i]
        printf "COORDCAP %-7s", c
        for (k = 1; k <= 3; k++) printf " %7s", sprintf("%.1f/%.1f", mean(pa[c, k], pn[c, k]), mean(pb[c, k], pn[c, k]))
        printf "  caps"
        for (k = 1; k <= 3; k++) printf " %9s", (cna[c, k] ? sprintf("%.2f", ca[c, k] / cna[c, k]) : "-") "/" (cnb[c, k] ? sprintf("%.2f", cb[c, k] / cnb[c, k]) : "-")
        printf "\n" }
    printf "COORDCAP cap rebalancing writes per round (phase 1/2/3) and daemon CPU s per round:"
    for (i = 1; i <= nc; i++) { c = cl[i]; printf " %s %.0f (%.0f/%.0f/%.0f) %.1fs%s", c, mean(cw[c], cn[c]), mean(cwp[c, 1], cn[c]), mean(cwp[c, 2], cn[c]), mean(cwp[c, 3], cn[c]), mean(dt[c], cn[c]) / 100, (i < nc) ? ";" : "" }
    printf "\n"
    printf "COORDCAP (job runs, mean s: "
    for (i = 1; i <= nc; i++) { c = cl[i]; printf "%s%s", (i > 1) ? "; " : "", c
        for (k = 1; k <= 3; k++) printf " %.2f", mean(jr[c, k], en[c, k]); if (rf[c]) printf " (%d refused runs retried)", rf[c] }
    printf ")\n"
    j = sprintf("{\"scenario\":\"cap\",\"work\":%d,\"jobs\":%d,\"cap\":%s,\"reps\":%d,\"epoch_ms\":\"%s\",\"cap_period_ms\":\"%s\",\"cap_interval_ms\":\"%s\",\"tolerance\":%s", work, jobs, cap, reps, epoch, cperiod, cinterval, tol)
    if (t1 != "") j = j sprintf(",\"capacity\":{\"one_alone_s\":%s,\"eight_at_once_s\":%s}", t1, t8)
    j = j ",\"configs\":{"
    for (i = 1; i <= nc; i++) { c = cl[i]
        j = j sprintf("%s\"%s\":{\"phase_s\":[%.2f,%.2f,%.2f],\"run_s\":%.2f,\"rounds\":[", (i > 1) ? "," : "", c,
            mean(es[c, 1], en[c, 1]), mean(es[c, 2], en[c, 2]), mean(es[c, 3], en[c, 3]), mean(es[c, 0], en[c, 0]))
        for (r = 1; r <= reps; r++) j = j sprintf("%s[%s,%s,%s,%s]", (r > 1) ? "," : "", el[c, 1, r], el[c, 2, r], el[c, 3, r], el[c, 0, r])
        j = j sprintf("],\"used_max\":%.2f,\"used_max5\":%.2f,\"used_mean\":%.2f,\"over_cap_samples\":%d,\"over_cap_beyond_error\":%d,\"samples\":%d,\"phase_used_mean\":[%.2f,%.2f,%.2f]", mx[c], mx5[c], mean(sum[c], n[c]), over[c], overe[c], n[c],
            mean(ps[c, 1], pn[c, 1]), mean(ps[c, 2], pn[c, 2]), mean(ps[c, 3], pn[c, 3]))
        j = j sprintf(",\"cap_writes\":%.1f,\"daemon_cpu_s\":%.1f", mean(cw[c], cn[c]), mean(dt[c], cn[c]) / 100)
        j = j sprintf(",\"phase2_side_done_s\":[%.2f,%.2f],\"refused_runs\":%d}", mean(da[c], en[c, 2]), mean(db[c], en[c, 2]), rf[c]) }
    print "COORDCAP_JSON " j "}}"
}' "$CC_DIR/confinfo" "$CC_DIR/phases" "$CC_DIR/usage"
