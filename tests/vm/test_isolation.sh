# shellcheck shell=sh
# Isolation on a real cgroup2 kernel: memory lending and revocation, and
# disk holds with real block traffic. Runs its own daemon (mode isolate,
# root atoll-iso) after the shared one is gone, and stops it at the end.
#
# Memory: `hog` (entitled to 1/8 of memory) touches 3/16 of memory in a
# loop; memory.high at its entitlement throttles it, memory PSI rises, and
# the daemon lends it idle memory of `lender` (entitled to 1/2): hog's
# memory.high rises above its entitlement and status shows it borrowing.
# Then `lender` fills most of its entitlement: the pool is gone and hog's
# limit comes back down (a revocation in status). memory.max is "max" for
# both: a lending unit's entitlement is held by memory.high.
#
# Disk: /dev/nullb0 (null_blk, loaded by the guest init) is a real block
# device. `io_a` reads it alone (never held: nobody else is active), then
# `io_b` starts reading too; io_a, far ahead, is held: its io.max gets the
# trickle limit on nullb0's device number, and the kernel enforces it (its
# read rate while held is far below its rate alone).

own_daemon iso
ISO_ROOT=$ROOT
ISO_DIR=$VMT_STATE/iso

[ -b /dev/nullb0 ] || fail "no /dev/nullb0: null_blk was not loaded by the guest init"
read -r NULLB_DEV </sys/block/nullb0/dev
mem_kb=$(sed -n 's/^MemTotal: *\([0-9]*\) kB/\1/p' /proc/meminfo)
[ -n "$mem_kb" ] || fail "no MemTotal in /proc/meminfo"
mem_mib=$((mem_kb / 1024))
HOG_E=$((mem_mib / 8))
LENDER_E=$((mem_mib / 2))
note "memory ${mem_mib} MiB: hog entitled to ${HOG_E} MiB, lender ${LENDER_E} MiB; nullb0 is ${NULLB_DEV}"

cfg=$ISO_DIR/isolate.toml
cat >"$cfg" <<EOF
[isolation]
mode = "isolate"

[host]
cpus = "0"
adopt_all = false

[island.all]
cpus = "1-7"

[unit.hog]
island = "all"
cpus = 1
memory_max = "${HOG_E}M"

[unit.lender]
island = "all"
cpus = 1
memory_max = "${LENDER_E}M"

[unit.io_a]
island = "all"
cpus = 1
share_memory = "none"

[unit.io_b]
island = "all"
cpus = 1
share_memory = "none"
EOF
start_daemon "$cfg"

G=$CG/$ISO_ROOT/all
# unit_iso UNIT FIELD: the unit's isolation.FIELD from status.
unit_iso() {
    status_flat | awk -F= -v u="$1" -v f="$2" '
        $1 ~ /^units\.[0-9]+\.name$/ { split($1, p, "."); names[p[2]] = $2 }
        $1 ~ ("^units\\.[0-9]+\\.isolation\\." f "$") { split($1, p, "."); vals[p[2]] = $2 }
        END { for (i in names) if (names[i] == u) print vals[i] }'
}
high_mib() { _h=$(cat "$G/$1/memory.high"); [ "$_h" = max ] && echo max || echo $((_h / 1048576)); }

# run_bg OUT UNIT CMD...: `atoll run --unit UNIT -- CMD` in the background.
run_bg() {
    _o=$1 _u=$2
    shift 2
    "$ATOLL" run --socket "$SOCK" --unit "$_u" -- "$@" >"$_o.out" 2>"$_o.err" &
    echo $! >"$_o.pid"
}
cleanup() {
    for f in "$ISO_DIR"/*.pid; do
        [ -e "$f" ] && kill "$(cat "$f")" 2>/dev/null
    done
    pkill -f "__worker memhog" 2>/dev/null
    pkill -f "if=/dev/nullb0" 2>/dev/null
    true
}
trap cleanup EXIT

# --- memory ---------------------------------------------------------------

wait_for 30 "hog's memory.high at its entitlement" \
    sh -c "[ \"\$(cat $G/hog/memory.high)\" = $((HOG_E * 1048576)) ]"
assert_file_eq "$G/hog/memory.max" max
run_bg "$ISO_DIR/hog" hog "$ATOLL" __worker memhog --mib $((mem_mib * 3 / 16)) --seconds 600
borrowed_hog() { b=$(unit_iso hog memory_borrowed); [ -n "$b" ] && [ "$b" -gt 0 ]; }
wait_for 90 "hog to borrow memory (memory.high $(high_mib hog) MiB)" borrowed_hog
h1=$(high_mib hog)
note "hog borrows $(($(unit_iso hog memory_borrowed) / 1048576)) MiB: memory.high ${h1} MiB"
[ "$h1" != max ] && [ "$h1" -gt "$HOG_E" ] || fail "hog's memory.high ${h1} MiB is not above its entitlement ${HOG_E} MiB"

run_bg "$ISO_DIR/lender" lender "$ATOLL" __worker memhog --mib $((LENDER_E * 15 / 16)) --seconds 600
revoked() { r=$(unit_iso hog memory_revocations); [ -n "$r" ] && [ "$r" -gt 0 ]; }
wait_for 90 "hog's borrowed memory to be taken back (memory.high $(high_mib hog) MiB)" revoked
h2=$(high_mib hog)
note "lender grew: hog's memory.high ${h1} -> ${h2} MiB, $(unit_iso hog memory_revocations) revocation(s)"
[ "$h2" -lt "$h1" ] || fail "hog's memory.high did not come down: ${h1} -> ${h2} MiB"
why=$(atoll_cli why hog 2>&1 | grep -c memory || true)
[ "$why" -gt 0 ] || fail "atoll why hog shows no memory decision"
kill "$(cat "$ISO_DIR/hog.pid")" "$(cat "$ISO_DIR/lender.pid")" 2>/dev/null
rm -f "$ISO_DIR/hog.pid" "$ISO_DIR/lender.pid"
pkill -f "__worker memhog" 2>/dev/null

# --- disk -----------------------------------------------------------------

# rbytes UNIT: bytes the unit read from nullb0 so far.
rbytes() {
    sed -n "s/^$NULLB_DEV rbytes=\([0-9]*\).*/\1/p" "$G/$1/io.stat"
}
reader() { run_bg "$ISO_DIR/$1" "$1" dd if=/dev/nullb0 of=/dev/null bs=1M count=1000000; }
reader io_a
wait_for 30 "io_a to read from nullb0" sh -c "grep -q '^$NULLB_DEV rbytes=[1-9]' $G/io_a/io.stat"
a0=$(rbytes io_a)
sleep 2
a1=$(rbytes io_a)
alone=$(((a1 - a0) / 2))
note "io_a alone reads $((alone / 1048576)) MiB/s"
[ "$(unit_iso io_a io_held)" = false ] || fail "io_a is held while alone on the disk"
reader io_b
# The two readers take turns being held (one slow step, a second, each).
# Sample both units' io.max and read counts every half second: a window
# that starts and ends with a unit held shows the kernel enforcing it.
# lim_of UNIT: the unit's io.max line for nullb0 (empty if none).
lim_of() { grep "^$NULLB_DEV " "$G/$1/io.max" 2>/dev/null || true; }
held_windows=0
slow_windows=0
i=0
while [ "$i" -lt 30 ]; do
    i=$((i + 1))
    for u in io_a io_b; do
        eval "l0_$u=\$(lim_of $u) r0_$u=\$(rbytes $u)"
    done
    sleep 0.5
    for u in io_a io_b; do
        l1=$(lim_of "$u")
        r1=$(rbytes "$u")
        eval "l0=\$l0_$u r0=\$r0_$u"
        case "$l0$l1" in
            *rbps=1048576*rbps=1048576*)
                held_windows=$((held_windows + 1))
                rate=$(((r1 - r0) * 2))
                note "$u held through a 0.5 s window: $((rate / 1024)) KiB/s (alone: $((alone / 1024)) KiB/s); io.max '$l1'"
                [ "$rate" -lt $((alone / 4)) ] && slow_windows=$((slow_windows + 1))
                ;;
        esac
    done
    [ "$slow_windows" -ge 2 ] && break
done
[ "$held_windows" -gt 0 ] || fail "no unit stayed held through a 0.5 s window in 15 s"
[ "$slow_windows" -gt 0 ] || fail "held units read at more than a quarter of the rate alone"
holds=$(atoll_cli why io_a 2>&1 | grep -ci hold || true)
[ "$holds" -gt 0 ] || fail "atoll why io_a shows no hold"

cleanup
atoll_cli stop >/dev/null 2>&1
wait_for 60 "the isolation daemon to stop" dead "$(daemon_pid)"
[ ! -e "$CG/$ISO_ROOT" ] || fail "$CG/$ISO_ROOT is still there after stop"
