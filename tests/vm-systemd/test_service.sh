# shellcheck shell=sh
# `systemctl start atoll` with the packaged default config: the unit is
# active, the daemon lives in <unit>/supervisor and manages
# <unit>/managed, `atoll status` answers, and nothing on the machine
# changed: the top cgroup's CPUs, init's CPUs, every process's cgroup and
# CPUs, nginx's and postgres's cgroups, AllowedCPUs and EffectiveCPUs
# (the top cgroup's controllers are systemd's to enable for Delegate=).
# shellcheck source=tests/vm-systemd/sdlib.sh
. "$VMT_DIR/sdlib.sh"

[ -x "$PKG_ATOLL" ] || install_debs
# A process with a CPU mask of its own, in a unit of its own: enabling the
# cpuset controller above it (systemd does for Delegate=cpuset) must not
# reset it.
systemd-run --quiet --unit=atoll-affine -p CPUAffinity=2-3 sleep 9999 ||
    fail "systemd-run --unit=atoll-affine failed"
wait_for 30 "sleep 9999 of atoll-affine.service" find_pid_by_argv "sleep 9999"
affine=$(find_pid_by_argv "sleep 9999")
assert_eq "$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "/proc/$affine/status")" 2-3 "CPUs of atoll-affine's sleep"
sd_snapshot "$VMT_STATE/sd.before"
grep '^unit-' "$VMT_STATE/sd.before" | sed 's/^/  | before: /'
init_cpus=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/1/status)

uptime_s
# shellcheck disable=SC2154 # set by uptime_s
t0=$_now
timeout 120 systemctl start atoll.service || {
    systemctl status --no-pager atoll.service 2>&1 | tail -n 20 | sed 's/^/  | /'
    fail "systemctl start atoll failed"
}
uptime_s
note "systemctl start atoll returned after $((_now - t0))s"
assert_active atoll.service
top=$CG$(unit_prop atoll.service ControlGroup)
assert_eq "$top" "$CG/system.slice/atoll.service" "atoll.service's cgroup"
main=$(unit_prop atoll.service MainPID)
assert_eq "$(cg_of "$main")" /system.slice/atoll.service/supervisor "cgroup of atoll's main pid $main"
assert_eq "$(cat "$top/cgroup.procs")" "" "processes left in the delegated top itself"
[ -d "$top/managed/host" ] || fail "no $top/managed/host: $(atoll_cgroups | tr '\n' ' ')"
note "atoll's cgroups: $(atoll_cgroups | sed "s|$top/||" | tr '\n' ' ')"
note "$top/cgroup.subtree_control: $(cat "$top/cgroup.subtree_control")"
for c in cpuset cpu io memory; do
    grep -qw "$c" "$top/cgroup.subtree_control" || fail "$c is not enabled in $top/cgroup.subtree_control"
done

st=$(timeout "$CMD_TIMEOUT" "$PKG_ATOLL" status 2>&1) || fail "atoll status: $st"
echo "$st" | sed 's/^/  | status: /'
echo "$st" | grep -q "^root       $top/managed (delegated by systemd to atoll.service" ||
    fail "atoll status does not name $top/managed as delegated"
echo "$st" | grep -q "^effects    nothing is taken" || fail "atoll status does not say that nothing is taken"
json=$(timeout "$CMD_TIMEOUT" "$PKG_ATOLL" status --json) || fail "atoll status --json failed"
assert_eq "$(echo "$json" | jq -r .root)" system.slice/atoll.service/managed "status root"

# Some epochs and adoption scans, then compare.
sleep 3
sd_snapshot "$VMT_STATE/sd.during"
# The top cgroup's enabled controllers are systemd's: for Delegate= it
# enables the unit's controllers on the path from the top (and disables
# them again once the unit is gone, which svcstop checks).
note "top cgroup.subtree_control: $(sed -n 's/^top-subtree //p' "$VMT_STATE/sd.before") before, $(cat "$CG/cgroup.subtree_control") now (systemd, for Delegate=)"
diff=$(snapshot_changes "$VMT_STATE/sd.before" "$VMT_STATE/sd.during" "$main" | grep -v '^was "top-subtree ')
[ -z "$diff" ] || fail "starting atoll changed the machine: $diff$(kernel_hint)"
assert_eq "$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/1/status)" "$init_cpus" "init's CPUs while atoll runs"

note "systemctl status atoll --no-pager:"
systemctl status atoll --no-pager 2>&1 | sed 's/^/  | /'
journalctl -b -u atoll.service --no-pager -o cat | grep -m 3 'delegated\|platform from' | sed 's/^/  | journal: /'
