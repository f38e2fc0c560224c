# shellcheck shell=sh
# `systemctl stop atoll`: every atoll cgroup is gone, the machine is as it
# was before atoll started, and `systemctl --failed` lists nothing.
# shellcheck source=tests/vm-systemd/sdlib.sh
. "$VMT_DIR/sdlib.sh"

[ "$(systemctl is-active atoll.service)" = active ] || systemctl start atoll.service ||
    fail "atoll.service could not be started"
main=$(unit_prop atoll.service MainPID)
uptime_s
# shellcheck disable=SC2154 # set by uptime_s
t0=$_now
timeout 120 systemctl stop atoll.service || fail "systemctl stop atoll failed"
uptime_s
note "systemctl stop atoll returned after $((_now - t0))s"
st=$(systemctl is-active atoll.service)
[ "$st" = inactive ] || fail "atoll.service is $st after stop"
dead "$main" || fail "atoll's main pid $main still runs"
left=$(atoll_cgroups)
[ -z "$left" ] || fail "atoll cgroups left after stop: $(echo "$left" | tr '\n' ' ')"
[ ! -e "$CG/system.slice/atoll.service" ] || note "$CG/system.slice/atoll.service itself is still there (empty)"
journalctl -b -u atoll.service --no-pager -o cat | tail -n 4 | sed 's/^/  | journal: /'
if [ -r "$VMT_STATE/sd.before" ]; then
    sd_snapshot "$VMT_STATE/stop.after"
    diff=$(snapshot_changes "$VMT_STATE/sd.before" "$VMT_STATE/stop.after")
    [ -z "$diff" ] || fail "after systemctl stop atoll the machine is not as before: $diff$(kernel_hint)"
fi
systemctl stop atoll-affine.service 2>/dev/null || true
failed=$(systemctl --failed --no-legend --plain)
[ -z "$failed" ] || fail "systemctl --failed: $failed"
