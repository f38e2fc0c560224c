# shellcheck shell=sh
# The VM itself, no daemon: 8 CPUs, 2 NUMA nodes, cgroup v2 controllers,
# cpuset partitions, PSI; and `atoll topology --json` if the binary has it.

assert_file_eq /sys/devices/system/cpu/online 0-7
set -- /sys/devices/system/node/node[0-9]*
assert_eq "$#" 2 "NUMA nodes ($*)"
assert_file_eq /sys/devices/system/node/node0/cpulist 0-3
assert_file_eq /sys/devices/system/node/node1/cpulist 4-7

grep -q "^cgroup2 $CG cgroup2 " /proc/mounts || fail "no cgroup2 mount at $CG"
controllers=$(cat "$CG/cgroup.controllers")
for c in cpuset cpu io memory; do
    case " $controllers " in
        *" $c "*) ;;
        *) fail "controller $c missing from cgroup.controllers ($controllers)" ;;
    esac
done

[ -r /proc/pressure/cpu ] || fail "/proc/pressure/cpu missing"
grep -q '^some avg10=' /proc/pressure/cpu || fail "/proc/pressure/cpu: $(cat /proc/pressure/cpu)"

# A cpuset partition: enable cpuset for the children of the root, make one,
# and undo all of it (the daemon must enable what it needs by itself).
g=$CG/vmtest-smoke
had_cpuset=no
grep -qw cpuset "$CG/cgroup.subtree_control" && had_cpuset=yes
cleanup() {
    [ -d "$g" ] && { echo member >"$g/cpuset.cpus.partition"; rmdir "$g"; } 2>/dev/null
    [ "$had_cpuset" = yes ] || echo -cpuset >"$CG/cgroup.subtree_control" 2>/dev/null
}
trap cleanup EXIT
echo +cpuset >"$CG/cgroup.subtree_control" || fail "cannot enable cpuset in $CG"
mkdir "$g" || fail "mkdir $g"
echo 2-3 >"$g/cpuset.cpus" || fail "cpuset.cpus=2-3 refused"
echo root >"$g/cpuset.cpus.partition" || fail "cpuset.cpus.partition=root refused"
assert_file_eq "$g/cpuset.cpus.partition" root
assert_file_eq "$g/cpuset.cpus.effective" 2-3

# The binary runs in the guest (libraries and loader present).
command -v "$ATOLL" >/dev/null || fail "no $ATOLL in PATH"
if topo=$(timeout "$CMD_TIMEOUT" "$ATOLL" topology --json 2>/dev/null) && [ -n "$topo" ]; then
    flat=$(echo "$topo" | jflat)
    assert_eq "$(echo "$flat" | grep -c '^cpus\.[0-9]*\.id=')" 8 "CPUs in atoll topology --json"
    assert_eq "$(echo "$flat" | grep -c '^nodes\.[0-9]*\.id=')" 2 "nodes in atoll topology --json"
    assert_eq "$(echo "$flat" | grep -c '^packages\.[0-9]*\.id=')" 2 "packages in atoll topology --json"
    assert_eq "$(echo "$flat" | sed -n 's/^cpus\.5\.node=//p')" 1 "node of CPU 5 in atoll topology --json"
    assert_eq "$(echo "$flat" | sed -n 's/^nodes\.1\.cpus=//p')" 4-7 "CPUs of node 1 in atoll topology --json"
else
    note "atoll topology --json gave nothing (CLI not built yet?): topology check skipped"
fi
