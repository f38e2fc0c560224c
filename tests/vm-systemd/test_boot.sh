# shellcheck shell=sh
# systemd is PID 1 and the boot finished: `systemctl is-system-running
# --wait` says running (or degraded: the failed units are listed as notes);
# the machine has 8 CPUs in 2 NUMA nodes.
# shellcheck source=tests/vm-systemd/sdlib.sh
. "$VMT_DIR/sdlib.sh"

assert_eq "$(cat /proc/1/comm)" systemd "PID 1"
state=$(timeout 180 systemctl is-system-running --wait 2>&1)
note "is-system-running: $state; $(systemd-analyze time 2>/dev/null | head -n 1)"
case "$state" in
    running) ;;
    degraded)
        systemctl --failed --no-legend --plain --no-pager | sed 's/^/  | failed: /'
        ;;
    *)
        systemctl list-jobs --no-pager | sed 's/^/  | job: /'
        fail "systemd did not reach running or degraded: $state"
        ;;
esac

assert_file_eq /sys/devices/system/cpu/online 0-7
set -- /sys/devices/system/node/node[0-9]*
assert_eq "$#" 2 "NUMA nodes ($*)"
assert_file_eq /sys/devices/system/node/node0/cpulist 0-3
assert_file_eq /sys/devices/system/node/node1/cpulist 4-7
