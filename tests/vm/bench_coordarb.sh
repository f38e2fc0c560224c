# shellcheck shell=sh
# inTune section 5.3 (arbitration between two overlays borrowing from a
# third island) on the VM's 8 CPUs. A benchmark, not a test: it asserts no
# timing and fails only if something did not run.
#
# Platform (a fresh daemon per run; the host partition is CPU 0, where the
# daemon, the shell and the clients run; no adopt_all):
#   island x  CPU 1,    unit web   overlay webserver, priority 5
#   island y  CPU 2,    unit wc    overlay count,     priority 1
#   island z  CPUs 3-7, unit bs    (the lender: two CPUs busy, three idle)
# Both overlays have `react_utilization = 0.8` (an island using more than
# 80 % of the CPUs it holds borrows one; it gives them back once it would
# stay below 60 % without them) and a `throughput_floor` that nobody
# reports (a property is required; only the reactive policy acts). Every
# island has the run's `arbitration` ("round_robin" or "priority"); only z's
# matters, it is the only one with idle CPUs. With the host partition every
# island is a valid cpuset partition on 6.12 (without one, the last island
# cannot be one, and CPUs moved out of it break the borrower's partition).
#
# Workload: `atoll __worker spin --threads 2` in bs for the whole run (z
# uses two CPUs, so it may lend three: rule 4 keeps its lowest CPU), then J
# (default 2) cpujobs in web and J in wc, launched together (`atoll run
# --unit ... -- atoll __worker cpujob --work W`). Each island starts with
# one CPU for two busy jobs, so both overlays borrow at once, and each
# wants two CPUs more (with 3 CPUs, 2 jobs use 67 %, below 80 %); z has 3
# to lend, so after one CPU each they compete for the last one. In the
# paper, round robin gave that CPU to the lower-priority overlay and
# priority to the higher one. An overlay refused 5 times in a row is
# escalated to the platform manager, which takes from a lower-priority
# overlay (rule 9).
#
# Measured: once a second each island's CPUs (cpuset.cpus.effective) and
# CPU use; every 2 s `atoll overlay ls --json` (acked, nacked, loans); each
# job's completion time from the common launch; at the end the overlays,
# `atoll why` (the islands' cpuset changes by borrow, release and
# escalation, with their times) and the daemon log, run with
# ATOLL_LOG=info,atoll_daemon::coord=debug so that it names the reason of
# every refused reactive message.
#
# Kernel command line (scripts/vm/bench-coord.sh --scenario arbitration):
#   coord.work=W            work units per job (default 160)
#   coord.jobs=J            jobs per borrowing overlay (default 2)
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

JOBS=$(bench_param coord jobs 2)
POLICIES=$(bench_param coord policies round_robin,priority | tr ',' ' ')
# overlay:unit:island:priority, in name order.
OVERLAYS="count:wc:y:1 webserver:web:x:5"
X_CPUS=1
Y_CPUS=2
Z_CPUS=3-7
# CPUs each borrowing island owns; threads spinning in the lender.
OWN=1
BS_THREADS=2
# The reasons of refused reactive messages, in the daemon log.
export ATOLL_LOG=info,atoll_daemon::coord=debug

# --- capacity check (no daemon) ----------------------------------------------

capacity_check "$CA_DIR/capacity" "$WORK"

# --- one run --------------------------------------------------------------------

# write_config POLICY FILE
write_config() {
    {
        config_head "tests/vm/bench_coordarb.sh ($1)" "0"
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

# run_policy POLICY REP: one fresh daemon, the jobs, teardown. Appends
# per-overlay lines to $CA_DIR/results.
run_policy() {
    _pol=$1
    _rep=$2
    _d=$CA_DIR/$1.$2
    bench_begin "$_d" "$1" "$2"
    # shellcheck disable=SC2046 # one word per overlay
    overlays_registered "$_d" "$_pol" $(for _ov in $OVERLAYS; do echo "${_ov%%:*}"; done)
    for _i in x y z; do
        [ -d "$CG/$ROOT/$_i" ] || fail "$_pol: no island group $CG/$ROOT/$_i"
    done
    _bsg=$(unit_group bs)
    [ -n "$_bsg" ] || fail "$_pol: no cgroup for unit bs under $CG/$ROOT"

    # The lender's own load: one spinning thread for the whole run.
    spawn_job "$_d/bs" run_in_unit "$_d/bs" bs spin --threads "$BS_THREADS"
    _bs=$!
    wait_procs "$_bsg" "$_pol: the spin in unit bs"
    sampler "$_d" &
    _sampler=$!
    poller "$_d" &
    _poller=$!
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
    touch "$_d/stop"
    wait "$_sampler"
    wait "$_poller"
    overlays_json >"$_d/overlays-after.json" 2>&1 || true
    jflat <"$_d/overlays-after.json" >"$_d/overlays-after.flat"
    atoll_cli why --limit 4096 >"$_d/why.txt" 2>&1 || true
    # The lender's spin ends with SIGTERM (it reports and exits 0).
    while read -r _p; do kill "$_p" 2>/dev/null; done <"$_bsg/cgroup.procs"
    wait "$_bs"

    bench_daemon_stop "$_pol" "$_d"

    # The borrowing islands' cpuset changes made by coordination, from
    # `atoll why` (oldest first): "REL_S ISLAND NCPUS OVERLAY VERB", VERB
    # borrow, release or escalation (the overlay is the one served).
    awk -v off="$_off" -v t0="$_t0" '
        $2 == "set" && ($3 == "x:" || $3 == "y:") && $4 ~ /^cpuset\.cpus=/ && /because overlay / {
            at = $1; sub(/s$/, "", at)
            isl = $3; sub(/:$/, "", isl)
            c = $4; sub(/^cpuset\.cpus=/, "", c); sub(/,$/, "", c)
            n = 0; m = split(c, parts, ",")
            for (k = 1; k <= m; k++) { if (split(parts[k], r, "-") == 2) n += r[2] - r[1] + 1; else n++ }
            w = $0; sub(/.*because overlay /, "", w); ov = w; sub(/:.*/, "", ov)
            verb = (w ~ /: borrow cores/) ? "borrow" : (w ~ /: release cores/) ? "release" : (w ~ /: escalated after/) ? "escalation" : "other"
            printf "%.2f %s %d %s %s\n", at + off - t0, isl, n, ov, verb
        }' "$_d/why.txt" | sort -n >"$_d/events"
    note "$_pol: cpuset changes of x and y (s from the launch, island=CPUs, overlay served, why):$(awk '
        { printf " %+.1f %s=%d(%s %s)", $1, $2, $3, $4, $5 }' "$_d/events")"

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
    # Refusals other than the four counted kinds, as the log words them.
    grep ' refused: ' "$_d/daemon.log" | grep -v 'refused: lost arbitration\|refused: no idle capacity\|refused: escalated after\|refused: backing off' |
        sed 's/.*coordination: //; s/t=[0-9.]*s/t=T/g; s/cpu [0-9]*/cpu N/g' | sort | uniq -c | sed 's/^ */  | other refusal: /' | head -n 5
    bench_warnings "$_pol" "$_d"
}

bench_rounds run_policy "$POLICIES" "$REPS"

# --- the table ----------------------------------------------------------------

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
