# shellcheck shell=sh
# atoll's systemd driver against systemd itself. systemd-probe (the example
# of crates/atoll-systemd, built by scripts/vm/systemd-test.sh) binds a
# group to a transient service, sets every resource property through
# systemd's D-Bus API and checks `systemctl show` and the cgroup files, the
# monitor, idle and freezing, a refusal that must leave everything as it
# was, the crash records (a second driver ends the first one's binding) and
# that every original is back; then it starts a scope in atoll.slice with
# two processes, attaches the second, gives them back (one moves into a
# delegated service, the other stays: its origin is not delegated), and
# leaves the scope to end with its process. The probe's lines are shown;
# the first FAIL is the reason.
# shellcheck source=tests/vm-systemd/sdlib.sh
. "$VMT_DIR/sdlib.sh"

probe=$ATOLL_SHARE/bin/systemd-probe
[ -x "$probe" ] || fail "no $probe (scripts/vm/systemd-test.sh builds it; run.sh --bin PATH)"
unit=atoll-probe.service
systemctl stop "$unit" >/dev/null 2>&1
systemctl reset-failed "$unit" >/dev/null 2>&1
systemd-run --quiet --unit="$unit" --description="atoll driver probe" sleep 1000 ||
    fail "systemd-run --unit=$unit failed"
wait_active 60 "$unit"
out=$(timeout 180 "$probe" "$unit" 2>&1)
rc=$?
echo "$out" | sed 's/^/  | /'
# What the probe made, should it have stopped half-way.
systemctl stop "$unit" atoll-probe-origin.service atoll-probe-job.scope >/dev/null 2>&1
if [ "$rc" != 0 ]; then
    first=$(echo "$out" | grep -m 1 '^FAIL')
    fail "systemd-probe exited $rc: ${first:-$(echo "$out" | tail -n 1)}"
fi
note "$(echo "$out" | tail -n 1)"
