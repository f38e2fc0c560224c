# shellcheck shell=sh
# `systemctl kill -s KILL atoll`, then `systemctl start atoll`: a new daemon
# runs in the same places, nothing stranded (no atoll cgroup without its
# daemon, no process left in the old hierarchy), nothing lost (every
# process outside atoll.service still alive, in its cgroup, with its CPUs).
# shellcheck source=tests/vm-systemd/sdlib.sh
. "$VMT_DIR/sdlib.sh"

[ "$(systemctl is-active atoll.service)" = active ] || systemctl start atoll.service ||
    fail "atoll.service could not be started"
old=$(unit_prop atoll.service MainPID)
top=$CG/system.slice/atoll.service
sd_snapshot "$VMT_STATE/kill.before"
# A process in one of atoll's units: systemd counts it as atoll.service's.
"$PKG_ATOLL" run --unit probe -- sleep 5555 >"$VMT_STATE/probe.log" 2>&1 &
wait_for 60 "sleep 5555 in unit probe" find_pid_by_argv "sleep 5555"
probe=$(find_pid_by_argv "sleep 5555")
note "probe sleep $probe in $(cg_of "$probe")"

systemctl kill -s KILL atoll.service || fail "systemctl kill -s KILL atoll failed"
wait_for 30 "atoll's main pid $old to die" dead "$old"
note "after the kill: $(systemctl is-active atoll.service), $(systemctl show -p Result -p NRestarts atoll.service | tr '\n' ' ')"
timeout 120 systemctl start atoll.service || {
    systemctl status --no-pager atoll.service 2>&1 | tail -n 20 | sed 's/^/  | /'
    fail "systemctl start atoll after the kill failed"
}
assert_active atoll.service
new=$(unit_prop atoll.service MainPID)
[ "$new" != "$old" ] || fail "atoll's main pid is still $old"
assert_eq "$(cg_of "$new")" /system.slice/atoll.service/supervisor "cgroup of the new main pid $new"
st=$(timeout "$CMD_TIMEOUT" "$PKG_ATOLL" status 2>&1) || fail "atoll status after the restart: $st"
[ -d "$top/managed/host" ] || fail "no $top/managed/host after the restart"
if alive "$probe"; then
    note "the probe sleep $probe survived, in $(cg_of "$probe")"
else
    note "the probe sleep $probe was killed: it was in atoll.service, whose processes systemctl kill signals (and KillMode=mixed kills what is left once the main process is gone)"
fi

# Nothing stranded: every process in atoll.service's cgroups is the new
# daemon or, if it survived, the probe; every cgroup is the new hierarchy's.
for d in $(atoll_cgroups); do
    while read -r p; do
        [ "$p" = "$new" ] || [ "$p" = "$probe" ] || fail "process $p ($(cmdline_of "$p")) stranded in $d"
    done <"$d/cgroup.procs"
done
note "atoll's cgroups after the restart: $(atoll_cgroups | sed "s|$top/||" | tr '\n' ' ')"
# Nothing lost: everything outside atoll.service as before.
sd_snapshot "$VMT_STATE/kill.after"
lost=$(awk 'NR == FNR { if ($1 ~ /^[0-9]+$/ && $2 !~ /^\/system.slice\/atoll.service/) want[$1] = $0; next }
    { have[$1] = 1 } END { for (p in want) if (!(p in have)) print want[p] }' \
    "$VMT_STATE/kill.before" "$VMT_STATE/kill.after")
# Processes that ended on their own (the test's own helpers) are not lost:
# only long-lived service processes are checked by pid below.
diff=$(snapshot_changes "$VMT_STATE/kill.before" "$VMT_STATE/kill.after" "$old" | grep -v "/system.slice/atoll.service\|^was \"top-subtree ")
[ -z "$diff" ] || fail "after the kill and restart the machine changed: $diff"
for u in nginx.service "$(pg_cluster)"; do
    grep -q "^unit-$u pid=$(unit_prop "$u" MainPID) " "$VMT_STATE/kill.before" ||
        fail "$u's main pid changed across atoll's kill and restart"
done
[ -z "$lost" ] || note "gone since the kill (short-lived test helpers): $(echo "$lost" | awk '{print $1}' | tr '\n' ' ')"
kill "$probe" 2>/dev/null || true
