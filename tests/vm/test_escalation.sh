# shellcheck shell=sh
# The proactive policy's escalation on a real cgroup2 kernel: an overlay's
# latency reported above its bound tunes first; when every unit's tune is
# refused at the island's capacity it moves on to borrow_preferred and
# borrows a CPU from the overlay's other island; a report with room to
# spare releases it and steps back to tune. Runs its own daemon (root
# atoll-esc) with islands web (1-3, unit api alone) and batch (4-7, unit
# crunch alone) and overlay shop over api and crunch; stops it at the end.

own_daemon esc
ES_ROOT=$ROOT
ES_DIR=$VMT_STATE/esc

cfg=$ES_DIR/esc.toml
cat >"$cfg" <<'TOML'
[host]
cpus = "0"
adopt_all = false

[island.web]
cpus = "1-3"
exclusive = true

[island.batch]
cpus = "4-7"
exclusive = true

[unit.api]
island = "web"

[unit.crunch]
island = "batch"

[overlay.shop]
priority = 5
units = ["api", "crunch"]
latency_us = 1000
TOML
start_daemon "$cfg"
W=$CG/$ES_ROOT/web

# report VALUE: `atoll report shop VALUE`; the policy's action in $ES_DIR/r.txt.
report() {
    atoll_cli report shop "$1" >"$ES_DIR/r.txt" 2>&1 || fail "report shop $1: $(cat "$ES_DIR/r.txt")"
    note "report $1: $(head -c 400 "$ES_DIR/r.txt")"
}

assert_eq "$(cat "$W/cpuset.cpus.effective")" "1-3" "web's CPUs before"
# batch must have reported its (idle) use before it can lend.
sleep 1
tries=0
until report 1500 && grep -q 'borrow 1 cores from island batch for overlay shop: ack' "$ES_DIR/r.txt"; do
    tries=$((tries + 1))
    [ "$tries" -lt 10 ] || fail "no borrow after 10 reports above the bound"
    sleep 1
done
web1=$(cat "$W/cpuset.cpus.effective")
note "after the escalation: web $web1"
[ "$web1" != "1-3" ] || fail "web's cpuset did not grow"
atoll_cli why web 2>&1 | grep -q 'borrow_preferred after tuning reached the island' ||
    fail "atoll why web gives no borrow_preferred reason"

# Room to spare: the CPU goes back and the stage steps back to tune.
report 300
grep -q 'release cores of overlay shop to island batch: ack' "$ES_DIR/r.txt" ||
    fail "no release on a report with room to spare"
grep -q 'borrow_preferred -> tune' "$ES_DIR/r.txt" || fail "the stage did not step back to tune"
wait_for 10 "web back on 1-3" sh -c "[ \"\$(cat $W/cpuset.cpus.effective)\" = 1-3 ]"

atoll_cli stop >/dev/null 2>&1
wait_for 60 "the escalation daemon to stop" dead "$(daemon_pid)"
[ ! -e "$CG/$ES_ROOT" ] || fail "$CG/$ES_ROOT is still there after stop"
