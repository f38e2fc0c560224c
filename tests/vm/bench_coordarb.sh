# shellcheck shell=sh
# inTune section 5.3 (arbitration between two overlays borrowing from a
# third island) on the VM's 8 CPUs, in one of two shapes. A benchmark, not
# a test: it asserts no timing and fails only if something did not run.
#
# Both shapes: a fresh daemon per run; the host partition is where the
# daemon, the shell and the clients run; no adopt_all. Overlay `webserver`
# (priority 5, unit web on island x) and overlay `count` (priority 1, unit
# wc on island y) have `react_utilization = 0.8` (an island using more
# than 80 % of the CPUs it holds borrows one; it gives them back once it
# would stay below 60 % without them) and a `throughput_floor` that nobody
# reports (a property is required; only the reactive policy acts). Every
# island has the run's `arbitration` ("round_robin" or "priority"); only
# z's matters, it is the only one with idle CPUs. An overlay refused 5
# times in a row is escalated to the platform manager, which takes from a
# lower-priority overlay (rule 9). With the host partition every island is
# a valid cpuset partition on 6.12 (without one, the last island cannot be
# one, and CPUs moved out of it break the borrower's partition).
#
# The paper's shape (the default):
#   host      CPU 0
#   island x  CPU 1,    unit web   overlay webserver, priority 5
#   island y  CPU 2,    unit wc    overlay count,     priority 1
#   island z  CPUs 3-7, unit bs    (the lender: two CPUs busy, three idle)
# Workload: `atoll __worker spin --threads 2` in bs for the whole run (z
# uses two CPUs, so it may lend three: rule 4 keeps its lowest CPU), then J
# (default 2) cpujobs in web and J in wc, launched together (`atoll run
# --unit ... -- atoll __worker cpujob --work W`). Each island starts with
# one CPU for two busy jobs, so both overlays borrow at once, and each
# wants two CPUs more (with 3 CPUs, 2 jobs use 67 %, below 80 %); z has 3
# to lend, so after one CPU each they compete for the last one. In the
# paper, round robin gave that CPU to the lower-priority overlay and
# priority to the higher one. Measured: once a second each island's CPUs
# (cpuset.cpus.effective) and CPU use; every 2 s `atoll overlay ls --json`
# (acked, nacked, loans); each job's completion time from the common
# launch; at the end the overlays, `atoll why` (the islands' cpuset
# changes by borrow, release and escalation, with their times) and the
# daemon log, run with ATOLL_LOG=info,atoll_daemon::coord=debug so that it
# names the reason of every refused reactive message.
#
# The contended shape (coord.contended=1), the simulator's
# scenarios/arbitration.toml scaled to the VM: one scarce CPU that both
# overlays ask for in the same rounds.
#   host      CPUs 0,7
#   island x  CPUs 1-2, unit web   overlay webserver, priority 5
#   island y  CPUs 3-4, unit wc    overlay count,     priority 1
#   island z  CPUs 5-6, unit bs    (the lender: keeps CPU 5, lends CPU 6)
# Workload: `spin --threads T` (default 4) in web and in wc for S s
# (default 60): both islands are saturated the whole run, with or without
# the borrowed CPU, so both overlays ask for a CPU whenever they may. In bs,
# one shell runs the lender's periodic load: `spin --threads 2` for ON s
# (default 1), then idle for OFF s (default 2), over and over, starting
# with a burst before the borrowers start. While the load is away z lends
# CPU 6 (rule 4: never its lowest own CPU), so every idle window starts
# with both overlays asking for the same CPU; when the load returns z uses
# all of the one CPU it still holds and revokes the loan (REVOKE_ABOVE).
# Measured per overlay: the seconds its island held the scarce CPU (from
# the cpuset changes `atoll why` lists, with their times) and the seconds
# it had only its own 2 CPUs ("short"; its spin wanted more all along); in
# how many idle windows it was served first; its island's CPU time and
# utilization (1 s samples) and its spin's work (chunks); acked/nacked
# (`atoll overlay ls`); refusals of its borrows by reason (daemon log:
# lost arbitration, no idle capacity, last own CPU, damped, escalated with
# no victim, backing off); escalations won/lost; revokes of its loans. Per
# lender: bursts, bursts that began while a borrower held CPU 6, and the
# time from the burst's start to the revoke (the load ran on 1 CPU).
#
# Kernel command line (scripts/vm/bench-coord.sh --scenario arbitration
# [--contended]):
#   coord.contended=1       the contended shape (default 0: the paper's)
#   coord.work=W            work units per job (default 160; contended:
#                           the capacity check only)
#   coord.jobs=J            jobs per borrowing overlay (default 2; paper)
#   coord.seconds=S         each run's length (default 60; contended)
#   coord.threads=T         spinning threads per borrower (default 4;
#                           contended)
#   coord.load_on=ON        the lender's busy seconds (default 1; contended)
#   coord.load_off=OFF      the lender's idle seconds (default 2; contended)
#   coord.reps=N            rounds over the policies (default 1)
#   coord.policies=a,b      round_robin,priority (default), in this order
#   coord.epoch_ms=N        the daemon's epoch_ms (default: its own)
#   coord.capacity=0        skip the capacity check
#
# Output: notes, the table (lines starting "COORDARB "), one
# "COORDARB_JSON {...}". Raw samples and logs stay in /run/vmtest/coordarb.

# shellcheck source=tests/vm/bench_lib.sh
. "$VMT_DIR/bench_lib.sh"

CA_DIR=$VMT_STATE/coordarb
bench_setup "$CA_DIR" coord

CONTENDED=$(bench_param coord contended 0)
POLICIES=$(bench_param coord policies round_robin,priority | tr ',' ' ')
# overlay:unit:island:priority, in name order.
OVERLAYS="count:wc:y:1 webserver:web:x:5"
# Threads spinning in the lender (the paper's shape: all along; contended:
# in each burst).
BS_THREADS=2
if [ "$CONTENDED" = 1 ]; then
    HOST_CPUS=0,7
    X_CPUS=1-2
    Y_CPUS=3-4
    Z_CPUS=5-6
    # CPUs each borrowing island owns.
    OWN=2
    RUN_S=$(bench_param coord seconds 60)
    THREADS=$(bench_param coord threads 4)
    LOAD_ON=$(bench_param coord load_on 1)
    LOAD_OFF=$(bench_param coord load_off 2)
else
    JOBS=$(bench_param coord jobs 2)
    HOST_CPUS=0
    X_CPUS=1
    Y_CPUS=2
    Z_CPUS=3-7
    OWN=1
fi
# The reasons of refused reactive messages, in the daemon log.
export ATOLL_LOG=info,atoll_daemon::coord=debug

# --- capacity check (no daemon) ----------------------------------------------

capacity_check "$CA_DIR/capacity" "$WORK"

# --- one run, either shape ---------------------------------------------------------

# write_config POLICY FILE
write_config() {
    {
        config_head "tests/vm/bench_coordarb.sh ($1)" "$HOST_CPUS"
        printf '[island.x]\ncpus = "%s"\narbitration = "%s"\n\n' "$X_CPUS" "$1"
        printf '[island.y]\ncpus = "%s"\narbitration = "%s"\n\n' "$Y_CPUS" "$1"
        printf '[island.z]\ncpus = "%s"\narbitration = "%s"\n\n' "$Z_CPUS" "$1"
        printf '[unit.web]\nisland = "x"\n\n[unit.wc]\nisland = "y"\n\n[unit.bs]\nisland = "z"\n'
        for _ov in $OVERLAYS; do
            IFS=: read -r _on _ou _oi _op <<EOF
$_ov
EOF
            printf '\n[overlay.%s]\npriority = %s\nunits = ["%s"]\n' "$_on" "$_op" "$_ou"
            printf 'throughput_floor = 1\nreact_utilization = 0.8\n'
        done
    } >"$2"
}

# sampler DIR: once a second until DIR/stop exists, one line
# "UPTIME x=NCPUS/USAGE_USEC y=... z=..." (builtins only).
sampler() {
    _sd=$1
    while [ ! -e "$_sd/stop" ]; do
        now_s
        _line=$_t
        for _i in x y z; do
            island_sample "$_i"
            _line="$_line $_i=$_is"
        done
        echo "$_line" >>"$_sd/samples"
        sleep 1
    done
}

# poller DIR: every 2 s until DIR/stop exists, `atoll overlay ls --json`
# flattened into DIR/ov.UPTIME.
poller() {
    _pd=$1
    while [ ! -e "$_pd/stop" ]; do
        now_s
        overlays_json 2>/dev/null | jflat >"$_pd/ov.$_t"
        sleep 2
    done
}

# ov_field FLAT OVERLAY FIELD: a field of one overlay in flattened
# `overlay ls --json` output ("" if absent).
ov_field() {
    _idx=$(sed -n "s/^\([0-9]*\)\.name=$2\$/\1/p" "$1")
    [ -n "$_idx" ] || return 0
    sed -n "s/^$_idx\.$3=//p" "$1"
}

# ov_loans FLAT OVERLAY: the loans an overlay holds.
ov_loans() {
    _idx=$(sed -n "s/^\([0-9]*\)\.name=$2\$/\1/p" "$1")
    [ -n "$_idx" ] || { echo 0; return 0; }
    grep -c "^$_idx\.loans\.[0-9]*\.cpu=" "$1"
}

# run_open POLICY ROUND: the run's directory in $_d, a fresh daemon with
# the policy, its overlays and groups checked; unit bs's group in $_bsg.
run_open() {
    _d=$CA_DIR/$1.$2
    bench_begin "$_d" "$1" "$2"
    # shellcheck disable=SC2046 # one word per overlay
    overlays_registered "$_d" "$1" $(for _ov in $OVERLAYS; do echo "${_ov%%:*}"; done)
    for _i in x y z; do
        [ -d "$CG/$ROOT/$_i" ] || fail "$1: no island group $CG/$ROOT/$_i"
    done
    _bsg=$(unit_group bs)
    [ -n "$_bsg" ] || fail "$1: no cgroup for unit bs under $CG/$ROOT"
}

# watch_start: the sampler and the poller of $_d, in the background.
watch_start() {
    sampler "$_d" &
    _sampler=$!
    poller "$_d" &
    _poller=$!
}

# end_procs GROUP: SIGTERM to every process in GROUP (a spin reports and
# exits 0) until none is left, for up to 10 s.
end_procs() {
    _k=0
    while { read -r _x <"$1/cgroup.procs"; } 2>/dev/null && [ "$_k" -lt 20 ]; do
        while read -r _p; do kill "$_p" 2>/dev/null; done <"$1/cgroup.procs"
        sleep 0.5
        _k=$((_k + 1))
    done
}

# run_close POLICY: stops the sampler and the poller, keeps the overlays
# and `atoll why`, ends unit bs's processes and the daemon ($_bs: the job
# that ran them). $_d/events gets the cpuset changes of x and y made by
# coordination, from `atoll why` (oldest first): "REL_S ISLAND NCPUS
# OVERLAY VERB", REL_S from the launch ($_t0), VERB borrow, release,
# revoke or escalation (the overlay is the one served; for a revoke, the
# one whose loan ended).
run_close() {
    _pol=$1
    touch "$_d/stop"
    wait "$_sampler"
    wait "$_poller"
    overlays_json >"$_d/overlays-after.json" 2>&1 || true
    jflat <"$_d/overlays-after.json" >"$_d/overlays-after.flat"
    atoll_cli why --limit 4096 >"$_d/why.txt" 2>&1 || true
    end_procs "$_bsg"
    wait "$_bs"

    bench_daemon_stop "$_pol" "$_d"

    awk -v off="$_off" -v t0="$_t0" '
        $2 == "set" && ($3 == "x:" || $3 == "y:") && $4 ~ /^cpuset\.cpus=/ && /because overlay / {
            at = $1; sub(/s$/, "", at)
            isl = $3; sub(/:$/, "", isl)
            c = $4; sub(/^cpuset\.cpus=/, "", c); sub(/,$/, "", c)
            n = 0; m = split(c, parts, ",")
            for (k = 1; k <= m; k++) { if (split(parts[k], r, "-") == 2) n += r[2] - r[1] + 1; else n++ }
            w = $0; sub(/.*because overlay /, "", w); ov = w; sub(/:.*/, "", ov)
            verb = (w ~ /: borrow cores/) ? "borrow" : (w ~ /: release cores/) ? "release" : (w ~ /: escalated after/) ? "escalation" : (w ~ /: island [^ ]* revoked the cores it lent/) ? "revoke" : "other"
            printf "%.2f %s %d %s %s\n", at + off - t0, isl, n, ov, verb
        }' "$_d/why.txt" | sort -n >"$_d/events"
    note "$_pol: cpuset changes of x and y (s from the launch, island=CPUs, overlay served, why):$(awk '
        { printf " %+.1f %s=%d(%s %s)", $1, $2, $3, $4, $5 }' "$_d/events")"
}

# run_notes: per second the CPUs of x/y/z, the acks and nacks every 2 s,
# the refusals of kinds not counted, the daemon's warnings.
run_notes() {
    # Timeline: per second, the CPUs of x/y/z.
    note "$_pol: CPUs of x/y/z per second from the launch:$(awk -v a="$_t0" '$1 >= a - 0.5 {
        s = ""; for (i = 2; i <= NF; i++) { split($i, kv, "="); split(kv[2], f, "/"); s = s ((i > 2) ? "/" : "") f[1] }
        printf " %s", s }' "$_d/samples")"
    # Acks and nacks over time, from the 2 s polls.
    _tl=""
    for _f in "$_d"/ov.*; do
        [ -s "$_f" ] || continue
        _ts=${_f##*/ov.}
        _rel=$(awk -v a="$_t0" -v b="$_ts" 'BEGIN { printf "%.0f", b - a }')
        [ "$_rel" -ge 0 ] || continue
        _tl="$_tl $_rel:"
        for _ov in $OVERLAYS; do
            _on=${_ov%%:*}
            _tl="$_tl$(ov_field "$_f" "$_on" acked)/$(ov_field "$_f" "$_on" nacked)/$(ov_loans "$_f" "$_on")"
            [ "$_on" = "${OVERLAYS##* }" ] || _tl="$_tl,"
        done
    done
    note "$_pol: s:acked/nacked/loans of count,webserver every 2 s:$_tl"
    # Refusals other than the four kinds the paper's table counts, as the
    # log words them.
    grep ' refused: ' "$_d/daemon.log" | grep -v 'refused: lost arbitration\|refused: no idle capacity\|refused: escalated after\|refused: backing off' |
        sed 's/.*coordination: //; s/t=[0-9.]*s/t=T/g; s/cpu [0-9]*/cpu N/g' | sort | uniq -c | sed 's/^ */  | other refusal: /' | head -n 5
    bench_warnings "$_pol" "$_d"
}

# --- the paper's shape ------------------------------------------------------------

# paper_run POLICY ROUND: one fresh daemon, the jobs, teardown. Appends
# per-overlay lines to $CA_DIR/results.
paper_run() {
    _pol=$1
    _rep=$2
    run_open "$1" "$2"

    # The lender's own load: spinning threads for the whole run.
    spawn_job "$_d/bs" run_in_unit "$_d/bs" bs spin --threads "$BS_THREADS"
    _bs=$!
    wait_procs "$_bsg" "$_pol: the spin in unit bs"
    watch_start
    # Let z's busy CPUs show in its usage before the borrowers start.
    sleep 3
    daemon_clock_offset

    now_s
    _t0=$_t
    echo "$_t0" >"$_d/t0"
    _pids=""
    _j=1
    while [ "$_j" -le "$JOBS" ]; do
        for _ov in $OVERLAYS; do
            _u=${_ov#*:}
            _u=${_u%%:*}
            spawn_job "$_d/$_u.j$_j" run_in_unit "$_d/$_u.j$_j" "$_u" cpujob --work "$WORK"
            _pids="$_pids $!"
        done
        _j=$((_j + 1))
    done
    for _p in $_pids; do wait "$_p"; done
    now_s
    _t1=$_t
    note "$_pol: all jobs done after $(awk -v a="$_t0" -v b="$_t1" 'BEGIN { printf "%.2f", b - a }')s"
    sleep 2
    run_close "$_pol"

    # The jobs, and per overlay what coordination did for it.
    for _ov in $OVERLAYS; do
        IFS=: read -r _on _ou _oi _op <<EOF
$_ov
EOF
        _ends=""
        _runs=""
        _ref=0
        _j=1
        while [ "$_j" -le "$JOBS" ]; do
            check_job "$_d/$_ou.j$_j" "$_pol round $_rep: $_ou job $_j"
            read -r _e <"$_d/$_ou.j$_j.end"
            _ends="$_ends $_e"
            _runs="$_runs $(job_elapsed_s "$_d/$_ou.j$_j.json")"
            read -r _n <"$_d/$_ou.j$_j.tries"
            _ref=$((_ref + _n - 1))
            _j=$((_j + 1))
        done
        _cm=$(echo "$_ends" | awk -v a="$_t0" '{ for (i = 1; i <= NF; i++) { d = $i - a; s += d; if (d > m) m = d }
            printf "%.2f %.2f", s / NF, m }')
        _rm=$(echo "$_runs" | awk '{ for (i = 1; i <= NF; i++) s += $i; printf "%.2f", s / NF }')
        # CPUs the island held: most at once, and borrowed CPU-seconds
        # (CPUs beyond its own, summed over the 1 s samples while jobs ran).
        _held=$(awk -v isl="$_oi" -v a="$_t0" -v b="$_t1" -v own="$OWN" '
            $1 >= a && $1 <= b { for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] != isl) continue
                split(kv[2], f, "/"); if (f[1] > m) m = f[1]; if (NR > 1 && pt != "") bs += (f[1] - own) * ($1 - pt) } pt = $1 }
            END { printf "%d %.1f", m, bs }' "$_d/samples")
        _acked=$(ov_field "$_d/overlays-after.flat" "$_on" acked)
        _nacked=$(ov_field "$_d/overlays-after.flat" "$_on" nacked)
        _loans=$(ov_loans "$_d/overlays-after.flat" "$_on")
        # From the events: borrows and releases of its island, escalations
        # it won (its island grew) and lost (its island shrank for another
        # overlay), when its island first held own + 2 CPUs, and how often
        # its island lent a CPU onward to the other overlay's borrow.
        _ev=$(awk -v isl="$_oi" -v ov="$_on" -v want=$((OWN + 2)) '
            $2 == isl && $4 == ov && $5 == "borrow" { b++ }
            $2 == isl && $4 == ov && $5 == "release" { r++ }
            $2 == isl && $4 == ov && $5 == "escalation" { w++ }
            $2 == isl && $4 != ov && $5 == "escalation" { l++ }
            $2 == isl && $4 != ov && $5 == "borrow" { o++ }
            $2 == isl && $3 >= want && t == "" { t = sprintf("%.2f", $1) }
            END { printf "%d %d %d %d %s %d", b, r, w, l, (t == "") ? "-" : t, o }' "$_d/events")
        # Refusals of its reactive messages by reason (daemon log, debug).
        _nr=$(grep "overlay $_on refused: " "$_d/daemon.log" | awk '
            /refused: lost arbitration/ { a++; next }
            /refused: no idle capacity/ { i++; next }
            /refused: escalated after/ { p++; next }
            /refused: backing off/ { b++; next }
            { o++ }
            END { printf "%d %d %d %d %d", a, i, p, b, o }')
        echo "$_pol $_rep $_on $_op $JOBS $_cm $_rm $_held ${_acked:-0} ${_nacked:-0} $_loans $_ev $_nr $_ref" >>"$CA_DIR/results"
    done

    run_notes
}

# paper_table: the paper shape's table and JSON line from $CA_DIR/results.
paper_table() {
    awk -v work="$WORK" -v jobs="$JOBS" -v reps="$REPS" -v t1="$T1" -v t8="$T8" -v pols="$POLICIES" \
        -v epoch="${EPOCH_MS:-default}" '
    function mean(s, n) { return (n > 0) ? s / n : 0 }
    # results: POLICY REP OVERLAY PRIO JOBS DONE_MEAN DONE_MAX RUN_MEAN MAXCPUS BORROWED_CPU_S ACKED NACKED LOANS
    #          BORROWS RELEASES ESC_WON ESC_LOST FULL_AT LENT_ONWARD NACK_LOST NACK_NOIDLE NACK_PLATFORM NACK_BACKOFF NACK_OTHER REFUSED
    {
        k = $1 SUBSEP $3; n[k]++; pr[$3] = $4
        dm[k] += $6; dx[k] += $7; rm[k] += $8; if ($9 > mc[k]) mc[k] = $9; bc[k] += $10
        ac[k] += $11; na[k] += $12; lo[k] += $13; bo[k] += $14; rl[k] += $15; ew[k] += $16; el[k] += $17
        if ($18 != "-") { fa[k] += $18; fn[k]++ }
        lw[k] += $19; nl[k] += $20; ni[k] += $21; npf[k] += $22; nb[k] += $23; nx[k] += $24; rf[k] += $25
        if (!($3 in seen)) { seen[$3] = 1; ol[++no] = $3 }
        r[$1, $2, $3] = sprintf("{\"done_mean_s\":%.2f,\"done_max_s\":%.2f,\"max_cpus\":%d,\"borrowed_cpu_s\":%.1f,\"acked\":%d,\"nacked\":%d,\"loans_at_end\":%d,\"borrows\":%d,\"releases\":%d,\"escalations_won\":%d,\"escalations_lost\":%d,\"full_at_s\":%s,\"lent_onward\":%d,\"nacks\":{\"lost_arbitration\":%d,\"no_idle_capacity\":%d,\"platform_refused\":%d,\"backing_off\":%d,\"other\":%d}}",
            $6, $7, $9, $10, $11, $12, $13, $14, $15, $16, $17, ($18 == "-") ? "null" : $18, $19, $20, $21, $22, $23, $24)
    }
    END {
        np = split(pols, pl, " ")
        printf "COORDARB two overlays borrowing from island z (3 CPUs to lend); mean of %d round(s), %d jobs per overlay, work %d, epoch_ms %s\n", reps, jobs, work, epoch
        printf "COORDARB %-11s %-9s %4s %6s %6s %6s %4s %6s %8s %6s %6s %5s %5s %5s %7s\n", "policy", "overlay", "prio", "done", "last", "run", "cpus", "cpu-s", "full-at", "acked", "nacked", "borr", "rel", "lent", "esc+/-"
        for (i = 1; i <= np; i++) for (o = 1; o <= no; o++) {
            p = pl[i]; k = p SUBSEP ol[o]
            printf "COORDARB %-11s %-9s %4d %6.2f %6.2f %6.2f %4d %6.1f %8s %6.1f %6.1f %5.1f %5.1f %5.1f %7s\n", p, ol[o], pr[ol[o]],
                mean(dm[k], n[k]), mean(dx[k], n[k]), mean(rm[k], n[k]), mc[k], mean(bc[k], n[k]),
                (fn[k] > 0) ? sprintf("%.2f/%d", fa[k] / fn[k], fn[k]) : "-", mean(ac[k], n[k]), mean(na[k], n[k]),
                mean(bo[k], n[k]), mean(rl[k], n[k]), mean(lw[k], n[k]), sprintf("%.1f/%.1f", mean(ew[k], n[k]), mean(el[k], n[k]))
        }
        printf "COORDARB refusals of the reactive messages by reason, mean per round:\n"
        printf "COORDARB %-11s %-9s %5s %7s %9s %8s %6s\n", "policy", "overlay", "lost", "no-idle", "platform", "backoff", "other"
        for (i = 1; i <= np; i++) for (o = 1; o <= no; o++) {
            p = pl[i]; k = p SUBSEP ol[o]
            printf "COORDARB %-11s %-9s %5.1f %7.1f %9.1f %8.1f %6.1f\n", p, ol[o], mean(nl[k], n[k]), mean(ni[k], n[k]), mean(npf[k], n[k]), mean(nb[k], n[k]), mean(nx[k], n[k])
        }
        printf "COORDARB (done/last: s from the common launch to the end of a job, mean and last; run: mean job run time (worker);\n"
        printf "COORDARB  cpus: most CPUs its island held (1 its own); cpu-s: borrowed CPU-seconds while jobs ran (1 s samples);\n"
        printf "COORDARB  full-at: s from the launch until its island first held 3 CPUs / in how many rounds it did;\n"
        printf "COORDARB  acked/nacked: atoll overlay ls at the end; borr/rel: borrows and releases of its island (atoll why);\n"
        printf "COORDARB  lent: times its island lent a CPU onward to the other overlay (a borrowed CPU, rule 5);\n"
        printf "COORDARB  esc+/-: escalations won / lost (atoll why); lost: lost arbitration; platform: escalated, no lower-priority victim)\n"
        j = sprintf("{\"scenario\":\"arbitration\",\"work\":%d,\"jobs\":%d,\"reps\":%d,\"epoch_ms\":\"%s\"", work, jobs, reps, epoch)
        if (t1 != "") j = j sprintf(",\"capacity\":{\"one_alone_s\":%s,\"eight_at_once_s\":%s}", t1, t8)
        j = j ",\"policies\":{"
        for (i = 1; i <= np; i++) { p = pl[i]
            j = j sprintf("%s\"%s\":{", (i > 1) ? "," : "", p)
            for (o = 1; o <= no; o++) { k = p SUBSEP ol[o]
                j = j sprintf("%s\"%s\":{\"priority\":%d,\"done_mean_s\":%.2f,\"done_max_s\":%.2f,\"max_cpus\":%d,\"borrowed_cpu_s\":%.1f,\"acked\":%.1f,\"nacked\":%.1f,\"rounds\":[", (o > 1) ? "," : "", ol[o], pr[ol[o]],
                    mean(dm[k], n[k]), mean(dx[k], n[k]), mc[k], mean(bc[k], n[k]), mean(ac[k], n[k]), mean(na[k], n[k]))
                for (q = 1; q <= reps; q++) j = j ((q > 1) ? "," : "") r[p, q, ol[o]]
                j = j "]}" }
            j = j "}" }
        print "COORDARB_JSON " j "}}"
    }' "$CA_DIR/results"

    note "per overlay: policy round overlay priority jobs done_mean_s done_max_s job_run_s max_cpus borrowed_cpu_s acked nacked loans borrows releases esc_won esc_lost full_at_s lent_onward nacks(lost noidle platform backoff other) refused_runs"
    sed 's/^/  | /' "$CA_DIR/results"
}

# --- the contended shape ----------------------------------------------------------

# lender_script FILE: the lender's periodic load, run by one shell in unit
# bs as `sh FILE ATOLL THREADS ON OFF PREFIX`: a spin of ON s, OFF s idle,
# until PREFIX.stop exists; PREFIX.log gets "on UPTIME" and "off UPTIME"
# around each spin, PREFIX.json each spin's report.
lender_script() {
    cat >"$1" <<'EOS'
while [ ! -e "$5.stop" ]; do
    read -r _t _ </proc/uptime
    echo "on $_t" >>"$5.log"
    "$1" __worker spin --threads "$2" --seconds "$3" >>"$5.json" 2>>"$5.err"
    read -r _t _ </proc/uptime
    echo "off $_t" >>"$5.log"
    [ -e "$5.stop" ] || sleep "$4"
done
EOS
}

# contended_run POLICY ROUND: one fresh daemon, the lender's periodic load,
# the two saturated borrowers for RUN_S s, teardown. Appends per-overlay
# lines to $CA_DIR/cresults and the lender's line to $CA_DIR/lresults.
contended_run() {
    _pol=$1
    _rep=$2
    run_open "$1" "$2"

    # The lender's load starts with a burst, so that its first idle window
    # opens while both borrowers are already saturated.
    lender_script "$_d/lender.sh"
    spawn_job "$_d/bs" run_cmd_in_unit "$_d/bs" bs /bin/sh "$_d/lender.sh" \
        "$ATOLL" "$BS_THREADS" "$LOAD_ON" "$LOAD_OFF" "$_d/lender"
    _bs=$!
    wait_procs "$_bsg" "$_pol: the lender's load in unit bs"
    watch_start
    daemon_clock_offset

    now_s
    _t0=$_t
    echo "$_t0" >"$_d/t0"
    _pids=""
    for _ov in $OVERLAYS; do
        _u=${_ov#*:}
        _u=${_u%%:*}
        spawn_job "$_d/$_u" run_in_unit "$_d/$_u" "$_u" spin --threads "$THREADS" --seconds "$RUN_S"
        _pids="$_pids $!"
    done
    for _p in $_pids; do wait "$_p"; done
    now_s
    _t1=$_t
    note "$_pol: both spins done after $(awk -v a="$_t0" -v b="$_t1" 'BEGIN { printf "%.2f", b - a }')s"
    touch "$_d/lender.stop"
    run_close "$_pol"

    # The lender's bursts, s from the launch: "START END". START is the
    # spin's end less its run time (it began after the shell logged "on").
    awk -v t0="$_t0" 'FNR == NR { if ($1 == "off") off[++n] = $2; next }
        { e = $0; sub(/.*"elapsed_s":/, "", e); sub(/[,}].*/, "", e); k++
          if (k <= n) printf "%.2f %.2f\n", off[k] - e - t0, off[k] - t0 }' \
        "$_d/lender.log" "$_d/lender.json" >"$_d/bursts"
    note "$_pol: the lender's bursts (s from the launch):$(awk '{ printf " %.1f-%.1f", $1, $2 }' "$_d/bursts")"
    # From the bursts and the cpuset changes, within [0, RUN_S]: per
    # borrowing island "ISLAND HELD_S FIRST REVOKED", the seconds it held
    # more than its own CPUs, the idle windows of the lender in which it
    # was the first to borrow, the revokes of its loans; then "lender
    # BURSTS LENT REVOKED LAT_MEAN_MS LAT_MAX_MS SHORT_S NOBODY WINDOWS":
    # bursts that began in the run, how many began while a borrower held
    # z's CPU and how many of those a revoke ended before the burst did,
    # the time from the burst's start to that revoke, its sum (z's load on
    # one CPU), windows in which nobody borrowed, windows.
    awk -v own="$OWN" -v len="$RUN_S" '
        FNR == NR { bs[++nb] = $1; be[nb] = $2; next }
        { ne++; et[ne] = $1; ei[ne] = $2; en[ne] = $3; ev[ne] = $5 }
        function clamp(t) { return (t < 0) ? 0 : (t > len) ? len : t }
        END {
            split("x y", isl, " ")
            for (j = 1; j <= 2; j++) {
                i = isl[j]; n = own; prev = 0; held[i] = 0
                for (e = 1; e <= ne; e++) {
                    if (ei[e] != i) continue
                    t = clamp(et[e]); if (n > own) held[i] += t - prev; prev = t; n = en[e]
                    if (ev[e] == "revoke" && et[e] >= 0 && et[e] <= len) rev[i]++
                }
                if (n > own) held[i] += len - prev
            }
            windows = 0; nobody = 0
            for (k = 1; k <= nb; k++) {
                ws = be[k]; we = (k < nb) ? bs[k + 1] : len
                if (ws < 0 || ws >= len) continue
                windows++; who = ""
                for (e = 1; e <= ne && who == ""; e++)
                    if (ev[e] == "borrow" && et[e] >= ws && et[e] < we) who = ei[e]
                if (who == "") nobody++; else first[who]++
            }
            bursts = 0; lent = 0; revoked = 0; lsum = 0; lmax = 0
            for (k = 1; k <= nb; k++) {
                if (bs[k] < 0 || bs[k] >= len) continue
                bursts++; nx = own; ny = own
                for (e = 1; e <= ne && et[e] <= bs[k]; e++) { if (ei[e] == "x") nx = en[e]; else ny = en[e] }
                if (nx <= own && ny <= own) continue
                lent++
                for (; e <= ne && et[e] <= be[k]; e++) if (ev[e] == "revoke") break
                if (e <= ne && et[e] <= be[k]) { l = et[e] - bs[k]; revoked++; lsum += l; if (l > lmax) lmax = l }
            }
            for (j = 1; j <= 2; j++) printf "%s %.2f %d %d\n", isl[j], held[isl[j]], first[isl[j]], rev[isl[j]]
            printf "lender %d %d %d %.0f %.0f %.2f %d %d\n", bursts, lent, revoked,
                (revoked > 0) ? lsum * 1000 / revoked : 0, lmax * 1000, lsum, nobody, windows
        }' "$_d/bursts" "$_d/events" >"$_d/shares"

    _b=$(awk -v a="$_t0" -v l="$RUN_S" 'BEGIN { printf "%.2f", a + l }')
    _rnack=0
    for _ov in $OVERLAYS; do
        IFS=: read -r _on _ou _oi _op <<EOF
$_ov
EOF
        check_job "$_d/$_ou" "$_pol round $_rep: the spin in $_ou" chunks
        _chunks=$(sed -n 's/.*"chunks":\([0-9]*\).*/\1/p' "$_d/$_ou.json")
        read -r _x _held _first _revoked <<EOF
$(grep "^$_oi " "$_d/shares")
EOF
        _short=$(awk -v l="$RUN_S" -v h="$_held" 'BEGIN { printf "%.2f", l - h }')
        # Its island's CPU time within [0, RUN_S] and its utilization
        # (CPU time over the CPU-seconds it held), from the 1 s samples.
        _cpu=$(awk -v isl="$_oi" -v a="$_t0" -v b="$_b" '
            $1 >= a && $1 <= b { for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] != isl) continue
                split(kv[2], f, "/"); if (f[2] == "?") continue
                if (pt != "") hs += pn * ($1 - pt); else u0 = f[2]
                u1 = f[2]; pt = $1; pn = f[1] } }
            END { c = (u1 - u0) / 1e6; printf "%.1f %.2f", c, (hs > 0) ? c / hs : 0 }' "$_d/samples")
        _acked=$(ov_field "$_d/overlays-after.flat" "$_on" acked)
        _nacked=$(ov_field "$_d/overlays-after.flat" "$_on" nacked)
        _ev=$(awk -v isl="$_oi" -v ov="$_on" '
            $2 == isl && $4 == ov && $5 == "borrow" { b++ }
            $2 == isl && $4 == ov && $5 == "escalation" { w++ }
            $2 == isl && $4 != ov && $5 == "escalation" { l++ }
            END { printf "%d %d %d", b, w, l }' "$_d/events")
        # Refusals of its borrows by reason, and of the lender's revokes of
        # its loans (daemon log, debug).
        _nr=$(grep "for overlay $_on refused: " "$_d/daemon.log" | awk '
            /coordination: revoke / { rv++; next }
            /refused: lost arbitration/ { a++; next }
            /refused: no idle capacity/ { i++; next }
            /refused: island [^ ]* never lends its last own CPU/ { c++; next }
            /refused: damped/ { d++; next }
            /refused: escalated after/ { p++; next }
            /refused: backing off/ { b++; next }
            { o++ }
            END { printf "%d %d %d %d %d %d %d %d", a, i, c, d, p, b, o, rv }')
        _rnack=$((_rnack + ${_nr##* }))
        echo "$_pol $_rep $_on $_op $_held $_short $_first $_revoked $_cpu ${_chunks:-0} ${_acked:-0} ${_nacked:-0} $_ev ${_nr% *}" >>"$CA_DIR/cresults"
    done
    _zcpu=$(awk -v a="$_t0" -v b="$_b" '
        $1 >= a && $1 <= b { for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] != "z") continue
            split(kv[2], f, "/"); if (f[2] == "?") continue; if (u0 == "") u0 = f[2]; u1 = f[2] } }
        END { printf "%.1f", (u1 - u0) / 1e6 }' "$_d/samples")
    echo "$_pol $_rep $(grep '^lender ' "$_d/shares" | cut -d' ' -f2-) $_rnack $_zcpu" >>"$CA_DIR/lresults"
    run_notes
}

# contended_table: the contended shape's table and JSON line from
# $CA_DIR/cresults and $CA_DIR/lresults.
contended_table() {
    awk -v reps="$REPS" -v t1="$T1" -v t8="$T8" -v pols="$POLICIES" -v len="$RUN_S" -v thr="$THREADS" \
        -v on="$LOAD_ON" -v off="$LOAD_OFF" -v epoch="${EPOCH_MS:-default}" '
    function mean(s, n) { return (n > 0) ? s / n : 0 }
    # cresults: POLICY REP OVERLAY PRIO HELD_S SHORT_S FIRST REVOKED CPU_S UTIL CHUNKS ACKED NACKED BORROWS
    #           ESC_WON ESC_LOST NACK_LOST NACK_NOIDLE NACK_LASTCORE NACK_DAMPED NACK_PLATFORM NACK_BACKOFF NACK_OTHER
    # lresults: POLICY REP BURSTS LENT REVOKED LAT_MEAN_MS LAT_MAX_MS SHORT_S NOBODY WINDOWS REVOKE_NACKS Z_CPU_S
    FILENAME ~ /lresults$/ {
        p = $1; ln[p]++; lb[p] += $3; ll[p] += $4; lr[p] += $5; lm[p] += $6 * $5; if ($7 > lx[p]) lx[p] = $7
        ls[p] += $8; lo[p] += $9; lw[p] += $10; lk[p] += $11; lz[p] += $12
        lj[p, $2] = sprintf("{\"bursts\":%d,\"lent_at_start\":%d,\"revoked\":%d,\"revoke_ms_mean\":%s,\"revoke_ms_max\":%s,\"short_s\":%.2f,\"windows\":%d,\"windows_nobody\":%d,\"revoke_nacks\":%d,\"cpu_s\":%.1f}",
            $3, $4, $5, ($5 > 0) ? $6 : "null", ($5 > 0) ? $7 : "null", $8, $10, $9, $11, $12)
        next
    }
    {
        k = $1 SUBSEP $3; n[k]++; pr[$3] = $4
        he[k] += $5; sh[k] += $6; fi[k] += $7; rv[k] += $8; cs[k] += $9; ut[k] += $10; ch[k] += $11
        ac[k] += $12; na[k] += $13; bo[k] += $14; ew[k] += $15; el[k] += $16
        nl[k] += $17; ni[k] += $18; nc[k] += $19; ndm[k] += $20; npf[k] += $21; nb[k] += $22; nx[k] += $23
        if (!($3 in seen)) { seen[$3] = 1; ol[++no] = $3 }
        r[$1, $2, $3] = sprintf("{\"held_s\":%.2f,\"short_s\":%.2f,\"first\":%d,\"revoked\":%d,\"cpu_s\":%.1f,\"utilization\":%.2f,\"chunks\":%d,\"acked\":%d,\"nacked\":%d,\"borrows\":%d,\"escalations_won\":%d,\"escalations_lost\":%d,\"nacks\":{\"lost_arbitration\":%d,\"no_idle_capacity\":%d,\"last_core\":%d,\"damped\":%d,\"platform_refused\":%d,\"backing_off\":%d,\"other\":%d}}",
            $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23)
    }
    END {
        np = split(pols, pl, " ")
        printf "COORDARB contended: x 1-2 (webserver, prio 5) and y 3-4 (count, prio 1), %d spinning threads each; z 5-6 lends CPU 6 while its load (2 threads, %s s in every %s s) is away\n", thr, on, on + off
        printf "COORDARB %d s per run, mean of %d round(s), epoch_ms %s\n", len, reps, epoch
        printf "COORDARB %-11s %-9s %4s %6s %7s %5s %6s %5s %8s %6s %6s %5s %7s %5s\n", "policy", "overlay", "prio", "held-s", "short-s", "first",
            "cpu-s", "util", "kchunks", "acked", "nacked", "borr", "esc+/-", "rvkd"
        for (i = 1; i <= np; i++) for (o = 1; o <= no; o++) {
            p = pl[i]; k = p SUBSEP ol[o]
            printf "COORDARB %-11s %-9s %4d %6.2f %7.2f %5.1f %6.1f %5.2f %8.0f %6.1f %6.1f %5.1f %7s %5.1f\n", p, ol[o], pr[ol[o]],
                mean(he[k], n[k]), mean(sh[k], n[k]), mean(fi[k], n[k]), mean(cs[k], n[k]), mean(ut[k], n[k]), mean(ch[k], n[k]) / 1000,
                mean(ac[k], n[k]), mean(na[k], n[k]), mean(bo[k], n[k]), sprintf("%.1f/%.1f", mean(ew[k], n[k]), mean(el[k], n[k])), mean(rv[k], n[k])
        }
        printf "COORDARB refusals of the borrows by reason, mean per round:\n"
        printf "COORDARB %-11s %-9s %5s %7s %8s %6s %9s %8s %6s\n", "policy", "overlay", "lost", "no-idle", "lastcore", "damped", "platform", "backoff", "other"
        for (i = 1; i <= np; i++) for (o = 1; o <= no; o++) {
            p = pl[i]; k = p SUBSEP ol[o]
            printf "COORDARB %-11s %-9s %5.1f %7.1f %8.1f %6.1f %9.1f %8.1f %6.1f\n", p, ol[o], mean(nl[k], n[k]), mean(ni[k], n[k]),
                mean(nc[k], n[k]), mean(ndm[k], n[k]), mean(npf[k], n[k]), mean(nb[k], n[k]), mean(nx[k], n[k])
        }
        printf "COORDARB the lender z, mean per round:\n"
        printf "COORDARB %-11s %6s %6s %7s %9s %8s %7s %7s %8s %6s\n", "policy", "bursts", "lent", "revoked", "rvk-ms", "rvk-max", "short", "windows", "nobody", "cpu-s"
        for (i = 1; i <= np; i++) { p = pl[i]
            printf "COORDARB %-11s %6.1f %6.1f %7.1f %9s %8.0f %7.2f %7.1f %8.1f %6.1f\n", p, mean(lb[p], ln[p]), mean(ll[p], ln[p]), mean(lr[p], ln[p]),
                (lr[p] > 0) ? sprintf("%.0f", lm[p] / lr[p]) : "-", lx[p], mean(ls[p], ln[p]), mean(lw[p], ln[p]), mean(lo[p], ln[p]), mean(lz[p], ln[p])
        }
        printf "COORDARB (held-s: s its island held the CPU z lends (atoll why); short-s: s it had only its own 2 CPUs, its spin wanting more;\n"
        printf "COORDARB  first: idle windows of z in which it borrowed first; cpu-s, util: CPU time of its island and its use of the CPUs held (1 s samples);\n"
        printf "COORDARB  kchunks: work done by its spin; acked/nacked: atoll overlay ls at the end; borr: borrows; esc+/-: escalations won/lost;\n"
        printf "COORDARB  rvkd: revokes of its loans; lost: lost arbitration; platform: escalated, no lower-priority victim;\n"
        printf "COORDARB  lender: bursts begun in the run, of which lent: the CPU of z was lent when it began, revoked: a revoke ended the loan within the burst;\n"
        printf "COORDARB  rvk-ms: mean (max) ms from the start of the burst to the revoke; short: their sum (the load of z on one CPU); nobody: windows nobody borrowed in)\n"
        j = sprintf("{\"scenario\":\"arbitration-contended\",\"seconds\":%d,\"threads\":%d,\"load_on_s\":%s,\"load_off_s\":%s,\"reps\":%d,\"epoch_ms\":\"%s\"", len, thr, on, off, reps, epoch)
        if (t1 != "") j = j sprintf(",\"capacity\":{\"one_alone_s\":%s,\"eight_at_once_s\":%s}", t1, t8)
        j = j ",\"policies\":{"
        for (i = 1; i <= np; i++) { p = pl[i]
            j = j sprintf("%s\"%s\":{", (i > 1) ? "," : "", p)
            for (o = 1; o <= no; o++) { k = p SUBSEP ol[o]
                j = j sprintf("%s\"%s\":{\"priority\":%d,\"held_s\":%.2f,\"short_s\":%.2f,\"cpu_s\":%.1f,\"chunks\":%.0f,\"rounds\":[", (o > 1) ? "," : "", ol[o], pr[ol[o]],
                    mean(he[k], n[k]), mean(sh[k], n[k]), mean(cs[k], n[k]), mean(ch[k], n[k]))
                for (q = 1; q <= reps; q++) j = j ((q > 1) ? "," : "") r[p, q, ol[o]]
                j = j "]}" }
            j = j ",\"lender\":["
            for (q = 1; q <= reps; q++) j = j ((q > 1) ? "," : "") lj[p, q]
            j = j "]}" }
        print "COORDARB_JSON " j "}}"
    }' "$CA_DIR/cresults" "$CA_DIR/lresults"

    note "per overlay: policy round overlay priority held_s short_s first revoked cpu_s util chunks acked nacked borrows esc_won esc_lost nacks(lost noidle lastcore damped platform backoff other)"
    sed 's/^/  | /' "$CA_DIR/cresults"
    note "lender: policy round bursts lent revoked revoke_ms_mean revoke_ms_max short_s nobody windows revoke_nacks cpu_s"
    sed 's/^/  | /' "$CA_DIR/lresults"
}

# --- the rounds ---------------------------------------------------------------------

if [ "$CONTENDED" = 1 ]; then
    bench_rounds contended_run "$POLICIES" "$REPS"
    contended_table
else
    bench_rounds paper_run "$POLICIES" "$REPS"
    paper_table
fi
