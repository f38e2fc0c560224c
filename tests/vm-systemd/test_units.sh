# shellcheck shell=sh
# systemctl show gives the cgroup properties atoll will read and set over
# D-Bus (ControlGroup, AllowedCPUs, CPUWeight), and the unit's cgroup exists.
# shellcheck source=tests/vm-systemd/sdlib.sh
. "$VMT_DIR/sdlib.sh"

props=$(systemctl show nginx.service -p ControlGroup,AllowedCPUs,CPUWeight,EffectiveCPUs,Delegate) ||
    fail "systemctl show nginx.service failed"
echo "$props" | sed 's/^/  | nginx.service: /'
echo "$props" | grep -qx 'ControlGroup=/system.slice/nginx.service' || fail "ControlGroup of nginx.service: $props"
echo "$props" | grep -q '^AllowedCPUs=' || fail "no AllowedCPUs property"
echo "$props" | grep -q '^CPUWeight=' || fail "no CPUWeight property"
[ -d "$(cg_path nginx.service)" ] || fail "no $(cg_path nginx.service)"
pid=$(unit_prop nginx.service MainPID)
assert_eq "$(cg_of "$pid")" /system.slice/nginx.service "cgroup of nginx's main pid $pid"
busctl get-property org.freedesktop.systemd1 /org/freedesktop/systemd1 \
    org.freedesktop.systemd1.Manager Version >/dev/null 2>&1 || fail "busctl: no systemd Version on the system bus"
note "D-Bus: systemd $(busctl get-property org.freedesktop.systemd1 /org/freedesktop/systemd1 org.freedesktop.systemd1.Manager Version)"
