# shellcheck shell=sh
# Not part of "all": checks the claim the unit file and the README make,
# without atoll. A service with CPUAffinity=2-3 runs; then a transient
# unit with Delegate=cpuset starts (systemd enables cpuset from the top
# down to it). Before Linux 6.2 the first service's mask must have been
# reset to every CPU; from 6.2 on it must have kept 2-3.
# shellcheck source=tests/vm-systemd/sdlib.sh
. "$VMT_DIR/sdlib.sh"

systemd-run --quiet --unit=reset-affine -p CPUAffinity=2-3 sleep 9997 || fail "systemd-run reset-affine failed"
wait_for 30 "sleep 9997" find_pid_by_argv "sleep 9997"
p=$(find_pid_by_argv "sleep 9997")
mask() { sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "/proc/$p/status"; }
assert_eq "$(mask)" 2-3 "mask of reset-affine's sleep before"
note "top cgroup.subtree_control before: $(cat "$CG/cgroup.subtree_control")"
systemd-run --quiet --unit=reset-delegate -p Delegate=cpuset sleep 9996 || fail "systemd-run reset-delegate failed"
sleep 2
note "top cgroup.subtree_control after: $(cat "$CG/cgroup.subtree_control")"
now=$(mask)
note "mask of reset-affine's sleep after a Delegate=cpuset unit started: $now ($(uname -r))"
if [ -n "$(kernel_hint)" ]; then
    assert_eq "$now" 0-7 "mask on a kernel before 6.2"
else
    assert_eq "$now" 2-3 "mask on a kernel from 6.2 on"
fi
systemctl stop reset-affine.service reset-delegate.service
