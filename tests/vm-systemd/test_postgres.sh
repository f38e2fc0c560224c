# shellcheck shell=sh
# postgresql.service (Debian's umbrella unit) and its cluster unit
# postgresql@<version>-main are active; psql as postgres answers select 1.
# shellcheck source=tests/vm-systemd/sdlib.sh
. "$VMT_DIR/sdlib.sh"

assert_active postgresql.service
cluster=$(systemctl list-units --plain --no-legend 'postgresql@*' | awk '{ print $1; exit }')
[ -n "$cluster" ] || fail "no postgresql@*.service unit loaded"
assert_active "$cluster"
note "$cluster: $(unit_prop "$cluster" ControlGroup), main pid $(unit_prop "$cluster" MainPID)"
out=$(sudo -u postgres psql -tA -c 'select 1' 2>&1) || fail "sudo -u postgres psql failed: $out"
assert_eq "$out" 1 "sudo -u postgres psql -tA -c 'select 1'"
out=$(runuser -u postgres -- psql -tA -c 'select version()' 2>&1) || fail "runuser -u postgres psql failed: $out"
note "$out"
