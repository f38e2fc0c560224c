# shellcheck shell=sh
# Coordination on a real cgroup2 kernel: CPUs move between islands and
# back, tunes reach the kernel. Runs its own daemon (root atoll-coord) with
# islands web (1-3) and batch (4-7), units api and front (web) and crunch
# (batch), and an overlay shop over api and crunch; stops it at the end.
#
# - `atoll tune shop api up` acks and raises web/api's cpu.weight.
# - `atoll borrow shop --from batch --into web` acks; one CPU leaves batch's
#   cpuset and joins web's, in cpuset.cpus.effective; where the kernel has
#   remote partitions both islands stay valid `root` partitions; `atoll
#   overlay show shop --json` lists the loan; the moved CPU serves the
#   overlay's unit api only (front, outside it, keeps web's own CPUs).
# - `atoll trigger shop` (no unit) boosts api and crunch together.
# - `atoll release shop --lender batch --from web` gives it back.
# - Every change is a decision naming the overlay (`atoll why`).

own_daemon coord
CO_ROOT=$ROOT
CO_DIR=$VMT_STATE/coord

cfg=$CO_DIR/coord.toml
cat >"$cfg" <<'EOF'
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

[unit.front]
island = "web"

[unit.crunch]
island = "batch"

[overlay.shop]
priority = 5
units = ["api", "crunch"]
latency_us = 1000
EOF
start_daemon "$cfg"
W=$CG/$CO_ROOT/web
B=$CG/$CO_ROOT/batch
remote=no
[ -e "$CG/$CO_ROOT/cpuset.cpus.exclusive" ] && remote=yes

# cli OUT ARGS...: runs `atoll ARGS` against this daemon; OUT.rc gets the
# exit status (0 ack, 3 nack), OUT.txt the output.
cli() {
    _o=$1
    shift
    atoll_cli "$@" >"$_o.txt" 2>&1
    echo $? >"$_o.rc"
}
expect_ack() { # expect_ack OUT WHAT
    [ "$(cat "$1.rc")" = 0 ] || fail "$2: exit $(cat "$1.rc"): $(cat "$1.txt")"
    note "$2: $(head -c 300 "$1.txt")"
}

# --- tune -------------------------------------------------------------------
w0=$(cat "$W/api/cpu.weight")
cli "$CO_DIR/tune" tune shop api up
expect_ack "$CO_DIR/tune" "tune shop api up"
w1=$(cat "$W/api/cpu.weight")
[ "$w1" -gt "$w0" ] || fail "web/api cpu.weight $w0 -> $w1 after tune up"

# --- borrow -----------------------------------------------------------------
# batch must have reported its (idle) usage once before it can lend.
sleep 1
web0=$(cat "$W/cpuset.cpus.effective")
batch0=$(cat "$B/cpuset.cpus.effective")
assert_eq "$web0" "1-3" "web's CPUs before borrowing"
assert_eq "$batch0" "4-7" "batch's CPUs before borrowing"
tries=0
until cli "$CO_DIR/borrow" borrow shop --amount 1 --from batch --into web &&
    [ "$(cat "$CO_DIR/borrow.rc")" = 0 ]; do
    tries=$((tries + 1))
    [ "$tries" -lt 10 ] || fail "borrow refused 10 times: $(cat "$CO_DIR/borrow.txt")"
    sleep 1
done
expect_ack "$CO_DIR/borrow" "borrow shop --from batch --into web"
web1=$(cat "$W/cpuset.cpus.effective")
batch1=$(cat "$B/cpuset.cpus.effective")
note "after borrow: web $web1, batch $batch1"
[ "$web1" != "$web0" ] || fail "web's cpuset did not grow: $web1"
[ "$batch1" != "$batch0" ] || fail "batch's cpuset did not shrink: $batch1"
# The moved CPU: in web now, in batch no more.
for c in 4 5 6 7; do
    case ",$web1," in *"$c"*) moved=$c ;; esac
done
[ -n "${moved:-}" ] || fail "web $web1 holds none of batch's CPUs"
if [ "$remote" = yes ]; then
    for d in "$W" "$B"; do
        p=$(cat "$d/cpuset.cpus.partition")
        [ "$p" = root ] || fail "$d cpuset.cpus.partition is '$p' after the move"
    done
fi
# The loan serves the overlay's unit on web only: api gets the moved CPU,
# front (web's unit outside the overlay) does not.
api1=$(cat "$W/api/cpuset.cpus.effective")
front1=$(cat "$W/front/cpuset.cpus.effective")
note "after borrow: web/api $api1, web/front $front1"
in_list "$moved" "$api1" || fail "web/api ($api1) lacks the borrowed CPU $moved"
! in_list "$moved" "$front1" || fail "web/front ($front1) got the borrowed CPU $moved, lent to overlay shop only"
show=$(timeout "$CMD_TIMEOUT" "$ATOLL" overlay show shop --json --socket "$SOCK" | jflat)
echo "$show" | grep -q '^loans\.0\.borrower=web$' || fail "overlay show lists no loan to web: $(echo "$show" | grep loans | tr '\n' ' ')"
atoll_cli why batch 2>&1 | grep -q 'overlay shop' || fail "atoll why batch names no overlay decision"

# --- trigger naming the overlay ----------------------------------------------
# Every unit of shop (api on web, crunch on batch) is boosted together; the
# boost lasts 30 ms, so the decision log is what is checked.
cli "$CO_DIR/trigger" trigger shop
expect_ack "$CO_DIR/trigger" "trigger shop"
for u in api crunch; do
    atoll_cli why "$u" 2>&1 | grep -q 'because overlay shop: trigger' ||
        fail "atoll why $u names no trigger of overlay shop"
done
! atoll_cli why front 2>&1 | grep -q 'because overlay shop: trigger' ||
    fail "front, outside overlay shop, was triggered"

# --- release ----------------------------------------------------------------
cli "$CO_DIR/release" release shop --lender batch --from web
expect_ack "$CO_DIR/release" "release shop --lender batch --from web"
wait_for 10 "web back on 1-3" sh -c "[ \"\$(cat $W/cpuset.cpus.effective)\" = 1-3 ]"
wait_for 10 "batch back on 4-7" sh -c "[ \"\$(cat $B/cpuset.cpus.effective)\" = 4-7 ]"

atoll_cli stop >/dev/null 2>&1
wait_for 60 "the coordination daemon to stop" dead "$(daemon_pid)"
[ ! -e "$CG/$CO_ROOT" ] || fail "$CG/$CO_ROOT is still there after stop"
