# shellcheck shell=sh
# `systemctl reload atoll` (ExecReload=atoll reload) while the service
# runs: a unit added to /etc/atoll/atoll.toml appears with its cap, a file
# that does not parse makes the reload fail with the line and changes
# nothing (the service stays active, same main pid), and the shipped file
# put back removes the unit again.
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
unit=$top/managed/$island/reloaded
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
out=$(timeout 120 systemctl reload atoll.service 2>&1) || fail "systemctl reload atoll (shipped file): $out"
[ ! -e "$unit" ] || fail "$unit is still there after the shipped file came back"
assert_eq "$(unit_prop atoll.service MainPID)" "$main" "atoll's main pid after the reloads"
