# shellcheck shell=sh
# `systemctl reload atoll` (ExecReload=atoll reload) while the service
# runs: a unit added to /etc/atoll/atoll.toml appears with its cap, a file
# that does not parse makes the reload fail with the line and changes
# nothing (the service stays active, same main pid), and the shipped file
# put back removes the unit again. With the systemd driver the unit is a
# scope in atoll.slice, started by a process `atoll run` puts in it.
# shellcheck source=tests/vm-systemd/sdlib.sh
. "$VMT_DIR/sdlib.sh"

[ -x "$PKG_ATOLL" ] || install_debs
[ "$(systemctl is-active atoll.service)" = active ] || systemctl start atoll.service ||
    fail "atoll.service could not be started"
conf=/etc/atoll/atoll.toml
cp "$conf" "$VMT_STATE/atoll.toml.shipped"
main=$(unit_prop atoll.service MainPID)
top=$CG$(unit_prop atoll.service ControlGroup)
island=$(timeout "$CMD_TIMEOUT" "$PKG_ATOLL" status --json | jq -r '.islands[0].name')
[ -n "$island" ] && [ "$island" != null ] || fail "no island in atoll status"

printf '\n[unit.reloaded]\nisland = "%s"\ncpu_cap = 0.5\n' "$island" >>"$conf"
out=$(timeout 120 systemctl reload atoll.service 2>&1) || fail "systemctl reload atoll: $out"
manager=$(timeout "$CMD_TIMEOUT" "$PKG_ATOLL" status --json | jq -r '.service_manager // empty')
if [ -n "$manager" ]; then
    # With the systemd driver (atoll daemon --systemd auto finds systemd)
    # the unit is a scope of its own, started by its first process.
    scope=atoll-$island-reloaded.scope
    note "atoll sets resources through $manager: unit reloaded is $scope"
    "$PKG_ATOLL" run --unit reloaded -- sleep 7777 >"$VMT_STATE/reloaded.log" 2>&1 &
    wait_for 60 "sleep 7777 in unit reloaded" find_pid_by_argv "sleep 7777"
    sleeper=$(find_pid_by_argv "sleep 7777")
    unit=$CG/atoll.slice/$scope
    wait_for 60 "$unit" test -d "$unit"
    assert_eq "$(cg_of "$sleeper")" "/atoll.slice/$scope" "cgroup of the sleep in unit reloaded"
else
    unit=$top/managed/$island/reloaded
fi
[ -d "$unit" ] || fail "no $unit after the reload: $(atoll_cgroups | tr '\n' ' ')"
assert_eq "$(cat "$unit/cpu.max")" "50000 100000" "cpu.max of the reloaded unit"
journalctl -b -u atoll.service --no-pager -o cat | grep -m 2 'reload' | sed 's/^/  | journal: /'

printf '\n[unit.broken]\nisland = 7\n' >>"$conf"
if out=$(timeout 120 systemctl reload atoll.service 2>&1); then
    fail "systemctl reload with a bad file succeeded"
fi
assert_active atoll.service
assert_eq "$(unit_prop atoll.service MainPID)" "$main" "atoll's main pid after a failed reload"
[ -d "$unit" ] || fail "a failed reload removed $unit"
journalctl -b -u atoll.service --no-pager -o cat | grep -m 1 'atoll.toml:[0-9]*:' |
    sed 's/^/  | journal: /' | grep -q . || fail "the journal does not give the bad line"

cp "$VMT_STATE/atoll.toml.shipped" "$conf"
# A scope's process goes back only into a delegated unit, which the
# test's service is not: it would stay in the scope, which ends with it.
[ -z "${sleeper:-}" ] || kill "$sleeper"
out=$(timeout 120 systemctl reload atoll.service 2>&1) || fail "systemctl reload atoll (shipped file): $out"
wait_for 30 "$unit to go" test ! -e "$unit"
assert_eq "$(unit_prop atoll.service MainPID)" "$main" "atoll's main pid after the reloads"
