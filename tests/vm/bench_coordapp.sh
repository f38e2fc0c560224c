# shellcheck shell=sh
# A multi-component application on the VM's 8 CPUs: a front end whose
# view of its requests tunes its back ends (inTune's overlays, seed 000).
# A benchmark, not a test: it asserts no timing and fails only if
# something did not run.
#
# The application: N (default 2) Redis servers (`redis-server`, copied into
# the initramfs by scripts/vm/bench-coord.sh) and `atoll __worker kvfront`,
# which sends R requests a second (open loop, latency from each request's
# due time), each a GET and an EVAL of a Lua loop of L iterations on every
# Redis. Every report window it computes the P-th percentile of the
# window's latencies.
#
# Platform (a fresh daemon per run; no adopt_all):
#   host   CPU 0     the daemon, this shell
#   front  CPU 1     unit front: kvfront
#   kv     CPUs 2-3  units r1..rN: one redis-server each; unit hog: `atoll
#                    __worker spin --threads H` (default 2), so the
#                    back ends compete for CPU with a CPU-bound neighbour
#   spare  CPUs 4-7  unit batch: `spin --threads 1` (three CPUs idle: an
#                    island that can lend)
# Configurations, run one after the other:
#   alone   as static, without the hog: the application uncontended
#   static  the islands and units, no overlay
#   coord   `[overlay.app]` over front and r1..rN with `latency_us = B` at
#           `percentile = P`; kvfront reports every window's value
#           (`--overlay app`), and the proactive policy tunes (or
#           triggers) the most pressured unit
#   borrow  the same overlay with `react_utilization = U` (default 0.8)
#           as well, so that its islands borrow CPUs while they are busy
#
# Measured, per run: kvfront's report (throughput, p50/p95/p99/max over the
# whole run, each window's value); the share of windows over B; once a
# second the kv island's CPUs and the CPU use and cpu.weight of its units;
# `atoll why` (the overlay's tunes, triggers, borrows and releases, with
# their times) and `atoll overlay ls --json` (acks and nacks). The daemon
# runs with ATOLL_LOG=info,atoll_daemon::coord=debug, so its log names the
# reason of every refused reactive message.
#
# Kernel command line (scripts/vm/bench-coord.sh --scenario app sets them):
#   coord.rate=R          requests a second (default 30)
#   coord.seconds=S       kvfront's run, s (default 30)
#   coord.lua=L           Lua loop iterations per request and back end
#                         (default 3000)
#   coord.bound=B         the overlay's latency_us (default 100000)
#   coord.percentile=P    its percentile (default 95)
#   coord.report_ms=M     kvfront's window (default 1000)
#   coord.conns=C         kvfront's concurrent requests (default 4)
#   coord.backends=N      Redis servers (default 2)
#   coord.hog=H           spinning threads in the kv island (default 2)
#   coord.react_util=U    borrow's react_utilization (default 0.8)
#   coord.configs=a,b     alone,static,coord,borrow (default static,coord,borrow)
#   coord.reps=N          rounds over the configurations (default 1)
#   coord.work=W          the capacity check's cpujob (default 160)
#   coord.capacity=0      skip the capacity check
#   coord.epoch_ms=N      the daemon's epoch_ms (default: its own)
#
# Output: notes, the table (lines starting "COORDAPP "), one
# "COORDAPP_JSON {...}". Raw samples and logs stay in /run/vmtest/coordapp.

# shellcheck source=tests/vm/bench_lib.sh
. "$VMT_DIR/bench_lib.sh"

AP_DIR=$VMT_STATE/coordapp
bench_setup "$AP_DIR" coord

RATE=$(bench_param coord rate 30)
RUN_S=$(bench_param coord seconds 30)
LUA=$(bench_param coord lua 3000)
BOUND=$(bench_param coord bound 100000)
PCT=$(bench_param coord percentile 95)
REPORT_MS=$(bench_param coord report_ms 1000)
CONNS=$(bench_param coord conns 4)
NKV=$(bench_param coord backends 2)
HOG=$(bench_param coord hog 2)
REACT=$(bench_param coord react_util 0.8)
CONFIGS=$(bench_param coord configs static,coord,borrow | tr ',' ' ')
KV_UNITS=""
BACKENDS=""
_i=1
while [ "$_i" -le "$NKV" ]; do
    KV_UNITS="$KV_UNITS r$_i"
    BACKENDS="$BACKENDS${BACKENDS:+,}$((7000 + _i))"
    _i=$((_i + 1))
done
# The reasons of refused reactive messages, in the daemon log.
export ATOLL_LOG=info,atoll_daemon::coord=debug

command -v redis-server >/dev/null || fail "no redis-server in the guest (scripts/vm/bench-coord.sh --scenario app copies it in)"

capacity_check "$AP_DIR/capacity" "$WORK"

# --- one run --------------------------------------------------------------------

# write_config CONF FILE
write_config() {
    {
        config_head "tests/vm/bench_coordapp.sh ($1)" "0"
        printf '[island.front]\ncpus = "1"\n\n[island.kv]\ncpus = "2-3"\n\n[island.spare]\ncpus = "4-7"\n\n'
        printf '[unit.front]\nisland = "front"\n\n[unit.hog]\nisland = "kv"\n\n[unit.batch]\nisland = "spare"\n'
        _units='"front"'
        for _u in $KV_UNITS; do
            printf '\n[unit.%s]\nisland = "kv"\n' "$_u"
            _units="$_units, \"$_u\""
        done
        case "$1" in
            coord | borrow)
                printf '\n[overlay.app]\nunits = [%s]\nlatency_us = %s\npercentile = %s\n' "$_units" "$BOUND" "$PCT"
                ;;
        esac
        [ "$1" != borrow ] || printf 'react_utilization = %s\n' "$REACT"
    } >"$2"
}

# sampler DIR: once a second until DIR/stop exists, one line "UPTIME
# kv=NCPUS/USAGE_USEC UNIT=USAGE_USEC/WEIGHT ..." for the kv island and
# the units front, hog and r1..rN (builtins only).
sampler() {
    _sd=$1
    while [ ! -e "$_sd/stop" ]; do
        now_s
        island_sample kv
        _line="$_t kv=$_is"
        while read -r _n _g; do
            _u="?"
            _w="?"
            { read -r _k _u <"$_g/cpu.stat"; } 2>/dev/null
            { read -r _w <"$_g/cpu.weight"; } 2>/dev/null
            _line="$_line $_n=$_u/$_w"
        done <"$_sd/groups"
        echo "$_line" >>"$_sd/samples"
        sleep 1
    done
}

# stop_unit DIR UNIT: SIGTERM to the unit's processes; waits for its job.
stop_unit() {
    _sg=$(unit_group "$2")
    [ -z "$_sg" ] || while read -r _p; do kill "$_p" 2>/dev/null; done <"$_sg/cgroup.procs"
    read -r _sp <"$1/$2.pid"
    wait "$_sp"
}

# start_unit DIR UNIT CMD...: CMD in UNIT (atoll run), in the background;
# fails unless a process shows up in the unit's group within 60 s.
start_unit() {
    _sd=$1
    _su=$2
    shift 2
    spawn_job "$_sd/$_su" run_cmd_in_unit "$_sd/$_su" "$_su" "$@"
    echo $! >"$_sd/$_su.pid"
    _sg=$(unit_group "$_su")
    [ -n "$_sg" ] || fail "$_conf: no cgroup for unit $_su under $CG/$ROOT"
    echo "$_su $_sg" >>"$_sd/groups"
    wait_procs "$_sg" "$_conf: $1 in unit $_su"
}

# run_config CONF REP: one fresh daemon, the application, teardown.
# Appends one line to $AP_DIR/results.
run_config() {
    _conf=$1
    _rep=$2
    _d=$AP_DIR/$1.$2
    bench_begin "$_d" "$1" "$2"
    : >"$_d/groups"
    case "$1" in
        alone | static) overlays_registered "$_d" "$1" ;;
        *) overlays_registered "$_d" "$1" app ;;
    esac
    for _i in front kv spare; do
        [ -d "$CG/$ROOT/$_i" ] || fail "$1: no island group $CG/$ROOT/$_i"
    done

    _port=7000
    for _u in $KV_UNITS; do
        _port=$((_port + 1))
        start_unit "$_d" "$_u" redis-server --port "$_port" --bind 127.0.0.1 --save '' \
            --appendonly no --daemonize no --dir /tmp
    done
    [ "$1" = alone ] || start_unit "$_d" hog "$ATOLL" __worker spin --threads "$HOG"
    start_unit "$_d" batch "$ATOLL" __worker spin --threads 1
    # The front's group exists from the start (a configured unit).
    echo "front $(unit_group front)" >>"$_d/groups"
    sampler "$_d" &
    _sampler=$!
    # Let the islands' use show before the front end starts.
    sleep 3
    daemon_clock_offset

    _ov="--overlay app"
    case "$1" in alone | static) _ov="" ;; esac
    # shellcheck disable=SC2086 # _ov: two words or none
    spawn_job "$_d/front" run_in_unit "$_d/front" front kvfront --backends "$BACKENDS" \
        --rate "$RATE" --seconds "$RUN_S" --work "$LUA" --conns "$CONNS" --keys 200 \
        --percentile "$PCT" --report-ms "$REPORT_MS" --socket "$SOCK" $_ov
    wait $!
    check_job "$_d/front" "$1 round $2: kvfront" throughput_per_s
    read -r _t1 <"$_d/front.end"
    sleep 1
    touch "$_d/stop"
    wait "$_sampler"
    overlays_json >"$_d/overlays-after.json" 2>&1 || true
    jflat <"$_d/overlays-after.json" >"$_d/overlays-after.flat"
    atoll_cli why --limit 4096 >"$_d/why.txt" 2>&1 || true
    for _u in $KV_UNITS hog batch; do
        [ ! -e "$_d/$_u.pid" ] || stop_unit "$_d" "$_u"
    done
    for _u in $KV_UNITS; do
        grep -q 'Ready to accept connections' "$_d/$_u.json" ||
            fail "$1: redis-server in $_u never accepted connections: $(tail -c 300 "$_d/$_u.json")"
    done
    # The daemon's CPU time (user + system ticks of /proc/PID/stat).
    _dst=""
    { read -r _dst <"/proc/$(daemon_pid)/stat"; } 2>/dev/null
    # shellcheck disable=SC2086 # split into fields
    stat_fields ${_dst##*) }
    _dticks=$_ticks
    bench_daemon_stop "$1" "$_d"

    jflat <"$_d/front.json" >"$_d/front.flat"
    _f() { sed -n "s/^$1=//p" "$_d/front.flat" | head -n 1; }
    _count=$(_f count)
    [ "${_count:-0}" -gt 0 ] || fail "$1: kvfront completed no request: $(head -c 300 "$_d/front.json")"
    # When the requests started (the front end prepares its data first).
    _t0=$(awk -v e="$_t1" -v x="$(_f elapsed_s)" 'BEGIN { printf "%.2f", e - x }')
    # Windows: the value of each, and how many were over the bound.
    sed -n 's/^windows\.\([0-9]*\)\.p_us=//p' "$_d/front.flat" >"$_d/windows"
    _over=$(awk -v b="$BOUND" '$1 != "null" { n++; if ($1 > b) o++ } END { printf "%d %d", o, n }' "$_d/windows")
    note "$1: window p$PCT values, ms:$(awk '{ printf " %s", ($1 == "null") ? "-" : sprintf("%.0f", $1 / 1000) }' "$_d/windows")"

    # From the samples while requests ran: the kv island's CPUs (most,
    # mean) and its units' CPU use (CPUs) and highest cpu.weight.
    _sm=$(awk -v a="$_t0" -v b="$_t1" -v kvu="$KV_UNITS" '
        {
            for (i = 2; i <= NF; i++) {
                split($i, kv, "="); split(kv[2], f, "/")
                if (kv[1] == "kv") { cpus = f[1]; u["kv"] = f[2] } else { u[kv[1]] = f[1]; w[kv[1]] = f[2] }
            }
            if ($1 >= a && $1 <= b) {
                n++; cs += cpus; if (cpus > cm) cm = cpus
                m = split(kvu, ks, " ")
                for (k = 1; k <= m; k++) if (w[ks[k]] + 0 > wm) wm = w[ks[k]] + 0
                if (w["front"] + 0 > wf) wf = w["front"] + 0
                if (pt != "" && $1 > pt) {
                    for (k = 1; k <= m; k++) r += (u[ks[k]] - pu[ks[k]]) / 1e6
                    h += (u["hog"] - pu["hog"]) / 1e6; fr += (u["front"] - pu["front"]) / 1e6
                    T += $1 - pt
                }
                pt = $1; for (k in u) pu[k] = u[k]
            }
        }
        END { if (T == 0) T = 1; printf "%d %.2f %.2f %.2f %.2f %d %d", cm, (n > 0) ? cs / n : 0, r / T, h / T, fr / T, wm, wf }' "$_d/samples")
    note "$1: kv island's CPUs per second while requests ran:$(awk -v a="$_t0" -v b="$_t1" '$1 >= a && $1 <= b { split($2, kv, "="); split(kv[2], f, "/"); printf " %s", f[1] }' "$_d/samples")"

    # The overlay's decisions from `atoll why` (oldest first): "REL_S WHAT
    # GROUP VALUE", WHAT tune+, tune-, trigger, unboost, borrow, release or
    # other; VALUE the knob's new value (cpu.weight=125, cpuset.cpus=2-3,5).
    awk -v off="$_off" -v t0="$_t0" '
        /because overlay app: / {
            at = $1; sub(/s$/, "", at); g = $3; sub(/:$/, "", g); val = $4; sub(/,$/, "", val)
            w = $0; sub(/.*because overlay app: /, "", w)
            what = (w ~ /^tune .* up/) ? "tune+" : (w ~ /^tune .* down/) ? "tune-" : (w ~ /^trigger/) ? "trigger" : (w ~ /^borrow cores/) ? "borrow" : (w ~ /^release cores/) ? "release" : (w ~ /^the boost ended/) ? "unboost" : "other"
            printf "%.2f %s %s %s\n", at + off - t0, what, g, val
        }' "$_d/why.txt" | sort -n >"$_d/events"
    # Counts: tunes up and down, triggers, and the moves of CPUs into and
    # out of the overlay's islands (the lender's own cpuset writes are not
    # counted); when the first borrow came; per unit, tunes up/triggers
    # and the highest weight a tune gave it ("r1:3/2/195", no spaces).
    _ev=$(awk '$3 != "spare" { c[$2]++ } $2 == "borrow" && $3 != "spare" && f == "" { f = $1 }
        $2 == "tune+" || $2 == "trigger" { u = $3; sub(/.*\//, "", u); if (!(u in seen)) { seen[u] = 1; ul[++nu] = u } }
        $2 == "tune+" { tu[u]++; v = $4; sub(/.*=/, "", v); if (v + 0 > wm[u]) wm[u] = v + 0 }
        $2 == "trigger" { tr[u]++ }
        END { s = ""; for (i = 1; i <= nu; i++) s = s ((i > 1) ? "," : "") ul[i] ":" tu[ul[i]] + 0 "/" tr[ul[i]] + 0 "/" ((wm[ul[i]] > 0) ? wm[ul[i]] : "-")
            printf "%d %d %d %d %d %s %s", c["tune+"], c["tune-"], c["trigger"], c["borrow"], c["release"], (f == "") ? "-" : f, (s == "") ? "-" : s }' "$_d/events")
    note "$1: the overlay's changes (s from the first request, what, group, value):$(awk '$2 != "unboost" && $3 != "spare" { printf " %+.1f %s %s %s", $1, $2, $3, $4 }' "$_d/events" | cut -c 1-1200)"
    # The utilization the reactive borrows and releases of kv went by.
    _ut=$(sed -n 's/.*set kv: cpuset.*because overlay app: \(borrow\|release\) cores (island kv utilization \([0-9.]*\).*/\1 \2/p' "$_d/why.txt" |
        awk '{ k = $1; v = $2 + 0; if (!(k in lo) || v < lo[k]) lo[k] = v; if (!(k in hi) || v > hi[k]) hi[k] = v; n[k]++ }
            END { for (k in n) printf " %s: %d, utilization %.2f to %.2f;", k, n[k], lo[k], hi[k] }')
    [ -z "$_ut" ] || note "$1: kv's moves by react_utilization (atoll why):$_ut"
    # What the daemon answered the front end's reports, by kind.
    sed -n 's/^windows\.[0-9]*\.action=//p' "$_d/front.flat" | sed 's/ for overlay app//; s/ ([^)]*)//g; s/[0-9][0-9.]*/N/g' |
        sort | uniq -c | sort -rn | head -n 6 | sed "s/^ */  | $1: report answered: /"
    _acked=$(sed -n 's/^0\.acked=//p' "$_d/overlays-after.flat")
    _nacked=$(sed -n 's/^0\.nacked=//p' "$_d/overlays-after.flat")
    # Refusals of the overlay's messages by reason (daemon log, debug).
    grep 'overlay app refused: \| refused: ' "$_d/daemon.log" | sed 's/.* refused: //; s/ until .*//; s/ (.*//; s/[0-9][0-9.]*/N/g' |
        sort | uniq -c | sort -rn | head -n 5 | sed "s/^ */  | $1: refused: /"
    bench_warnings "$1" "$_d"
    echo "$1 $2 $_count $(_f throughput_per_s) $(_f latency_us.p50) $(_f latency_us.p95) $(_f latency_us.p99) $(_f latency_us.max) $(_f errors) $(_f misses) $_over $_sm $_ev ${_acked:-0} ${_nacked:-0} $(_f reports.sent) $(_f reports.failed) $_dticks" >>"$AP_DIR/results"
}

bench_rounds run_config "$CONFIGS" "$REPS"

# --- the table ----------------------------------------------------------------

awk -v reps="$REPS" -v confs="$CONFIGS" -v rate="$RATE" -v secs="$RUN_S" -v lua="$LUA" -v bound="$BOUND" \
    -v pct="$PCT" -v rms="$REPORT_MS" -v nkv="$NKV" -v hog="$HOG" -v react="$REACT" -v t1="$T1" -v t8="$T8" \
    -v epoch="${EPOCH_MS:-default}" '
function mean(c, k) { return (n[c] > 0) ? s[c, k] / n[c] : 0 }
function span(c, k, fmt) { return sprintf(fmt "-" fmt, lo[c, k], hi[c, k]) }
# results: 1 CONF 2 REP 3 COUNT 4 TPUT 5 P50 6 P95 7 P99 8 MAX 9 ERRORS 10 MISSES 11 OVER 12 WINDOWS
#          13 KV_MAX 14 KV_MEAN 15 REDIS_CPUS 16 HOG_CPUS 17 FRONT_CPUS 18 REDIS_WMAX 19 FRONT_WMAX
#          20 TUNE_UP 21 TUNE_DOWN 22 TRIGGER 23 BORROW 24 RELEASE 25 FIRST_BORROW 26 PER_UNIT
#          27 ACKED 28 NACKED 29 REPORTS_SENT 30 REPORTS_FAILED 31 DAEMON_TICKS
{
    c = $1; n[c]++
    # 1 req/s, 2-5 p50/p95/p99/max ms, 6 windows over %, 7 errors, 8 kv CPUs mean, 9 redis CPUs,
    # 10 hog CPUs, 11 tunes up, 12 tunes down, 13 triggers, 14 borrows, 15 releases, 16 acked, 17 nacked,
    # 18 daemon CPU s
    v[1] = $4; v[2] = $5 / 1000; v[3] = $6 / 1000; v[4] = $7 / 1000; v[5] = $8 / 1000
    v[6] = ($12 > 0) ? 100 * $11 / $12 : 0; v[7] = $9; v[8] = $14; v[9] = $15; v[10] = $16
    v[11] = $20; v[12] = $21; v[13] = $22; v[14] = $23; v[15] = $24; v[16] = $27; v[17] = $28; v[18] = $31 / 100
    for (k = 1; k <= 18; k++) {
        s[c, k] += v[k]
        if (n[c] == 1 || v[k] < lo[c, k]) lo[c, k] = v[k]
        if (n[c] == 1 || v[k] > hi[c, k]) hi[c, k] = v[k]
    }
    if ($13 > kvm[c]) kvm[c] = $13
    if ($25 != "-") { fb[c] += $25; fbn[c]++ }
    pu[c] = pu[c] ((n[c] > 1) ? " " : "") $26
    r[c, n[c]] = sprintf("{\"throughput_per_s\":%s,\"p50_ms\":%.2f,\"p95_ms\":%.2f,\"p99_ms\":%.2f,\"max_ms\":%.2f,\"errors\":%d,\"windows_over\":%d,\"windows\":%d,\"kv_cpus_max\":%d,\"kv_cpus_mean\":%.2f,\"redis_cpus\":%.2f,\"hog_cpus\":%.2f,\"tunes_up\":%d,\"tunes_down\":%d,\"triggers\":%d,\"borrows\":%d,\"releases\":%d,\"first_borrow_s\":%s,\"units\":\"%s\",\"acked\":%d,\"nacked\":%d,\"reports_failed\":%d,\"daemon_cpu_s\":%.2f}",
        $4, v[2], v[3], v[4], v[5], $9, $11, $12, $13, $14, $15, $16, $20, $21, $22, $23, $24, ($25 == "-") ? "null" : $25, $26, $27, $28, $30, v[18])
}
END {
    nc = split(confs, cl, " ")
    printf "COORDAPP kvfront -> %d redis: %s req/s for %s s, Lua %s iterations a request and back end; bound p%s <= %.1f ms, %s ms windows;\n", nkv, rate, secs, lua, pct, bound / 1000, rms
    printf "COORDAPP  kv island CPUs 2-3 with a %d-thread spin; mean (min-max) of %d round(s); epoch_ms %s\n", hog, reps, epoch
    printf "COORDAPP %-7s %17s %17s %17s %17s %17s %15s\n", "config", "req/s", "p50 ms", "p95 ms", "p99 ms", "max ms", "windows over %"
    for (i = 1; i <= nc; i++) { c = cl[i]; if (!n[c]) continue
        printf "COORDAPP %-7s", c
        printf " %6.1f (%9s)", mean(c, 1), span(c, 1, "%.1f")
        for (k = 2; k <= 5; k++) printf " %6.1f (%9s)", mean(c, k), span(c, k, "%.0f")
        printf " %5.0f (%7s)\n", mean(c, 6), span(c, 6, "%.0f") }
    printf "COORDAPP what coordination did, mean per round:\n"
    printf "COORDAPP %-7s %6s %6s %6s %6s %6s %8s %6s %7s %6s %6s %6s %7s %8s  %s\n", "config", "tune+", "tune-", "trig", "borr", "rel", "1st-borr", "kv-max", "kv-mean", "redis", "hog", "acked", "nacked", "daemon-s", "per unit, each round: tunes up/triggers/highest tuned weight"
    for (i = 1; i <= nc; i++) { c = cl[i]; if (!n[c]) continue
        printf "COORDAPP %-7s %6.1f %6.1f %6.1f %6.1f %6.1f %8s %6d %7.2f %6.2f %6.2f %6.1f %7.1f %8.1f  %s\n", c,
            mean(c, 11), mean(c, 12), mean(c, 13), mean(c, 14), mean(c, 15), (fbn[c] > 0) ? sprintf("%.1f", fb[c] / fbn[c]) : "-",
            kvm[c], mean(c, 8), mean(c, 9), mean(c, 10), mean(c, 16), mean(c, 17), mean(c, 18), pu[c] }
    printf "COORDAPP (windows over: report windows whose p%s was above the bound; tune+/-, trig: the overlay'"'"'s tunes and triggers;\n", pct
    printf "COORDAPP  borr, rel: CPUs moved into and out of its islands (atoll why); 1st-borr: s from the first request to the\n"
    printf "COORDAPP  first borrow; kv-max/kv-mean: CPUs of the kv island (1 s samples); redis, hog: CPUs they used;\n"
    printf "COORDAPP  daemon-s: the daemon'"'"'s CPU time over the whole run, s)\n"
    j = sprintf("{\"scenario\":\"app\",\"backends\":%d,\"rate_per_s\":%s,\"seconds\":%s,\"lua\":%s,\"bound_us\":%s,\"percentile\":%s,\"report_ms\":%s,\"hog_threads\":%d,\"react_utilization\":%s,\"reps\":%d,\"epoch_ms\":\"%s\"",
        nkv, rate, secs, lua, bound, pct, rms, hog, react, reps, epoch)
    if (t1 != "") j = j sprintf(",\"capacity\":{\"one_alone_s\":%s,\"eight_at_once_s\":%s}", t1, t8)
    j = j ",\"configs\":{"
    for (i = 1; i <= nc; i++) { c = cl[i]; if (!n[c]) continue
        j = j sprintf("%s\"%s\":{\"throughput_per_s\":%.2f,\"p50_ms\":%.2f,\"p95_ms\":%.2f,\"p99_ms\":%.2f,\"max_ms\":%.2f,\"windows_over_pct\":%.1f,\"errors\":%.1f,\"tunes_up\":%.1f,\"tunes_down\":%.1f,\"triggers\":%.1f,\"borrows\":%.1f,\"releases\":%.1f,\"kv_cpus_mean\":%.2f,\"redis_cpus\":%.2f,\"hog_cpus\":%.2f,\"daemon_cpu_s\":%.2f,\"rounds\":[",
            (i > 1) ? "," : "", c, mean(c, 1), mean(c, 2), mean(c, 3), mean(c, 4), mean(c, 5), mean(c, 6), mean(c, 7), mean(c, 11), mean(c, 12), mean(c, 13), mean(c, 14), mean(c, 15), mean(c, 8), mean(c, 9), mean(c, 10), mean(c, 18))
        for (q = 1; q <= n[c]; q++) j = j ((q > 1) ? "," : "") r[c, q]
        j = j "]}" }
    print "COORDAPP_JSON " j "}}"
}' "$AP_DIR/results"

note "per run: config round count req/s p50 p95 p99 max (us) errors misses windows_over windows kv_max kv_mean redis_cpus hog_cpus front_cpus redis_wmax front_wmax tune+ tune- trigger borrow release first_borrow per_unit acked nacked reports_sent reports_failed daemon_ticks"
sed 's/^/  | /' "$AP_DIR/results"
