# shellcheck shell=sh
# The unified cgroup v2 hierarchy, as systemd mounted it: cgroup2 at
# /sys/fs/cgroup (no hybrid /sys/fs/cgroup/unified), the kernel command line
# asks for it, and the root offers cpuset cpu io memory.
# shellcheck source=tests/vm-systemd/sdlib.sh
. "$VMT_DIR/sdlib.sh"

grep -qw 'systemd.unified_cgroup_hierarchy=1' /proc/cmdline ||
    fail "systemd.unified_cgroup_hierarchy=1 missing from /proc/cmdline"
assert_eq "$(stat -f -c %T "$CG")" cgroup2fs "file system type of $CG"
[ ! -e "$CG/unified" ] || fail "$CG/unified exists: hybrid hierarchy"
grep -q "^cgroup2 $CG cgroup2 " /proc/mounts || fail "no cgroup2 mount at $CG"
controllers=$(cat "$CG/cgroup.controllers")
note "cgroup.controllers: $controllers"
note "cgroup.subtree_control: $(cat "$CG/cgroup.subtree_control")"
for c in cpuset cpu io memory; do
    case " $controllers " in
        *" $c "*) ;;
        *) fail "controller $c missing from cgroup.controllers ($controllers)" ;;
    esac
done
assert_eq "$(cg_of $$)" /system.slice/atoll-vmtest.service "this test's cgroup"
