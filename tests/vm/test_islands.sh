# shellcheck shell=sh
# The daemon builds the islands of examples/vm-8cpu.toml: web (CPUs 1-3,
# node 0) and batch (CPUs 4-7, node 1) as cpuset partitions, host keeps CPU 0,
# and unit api gets its CPU cap.
#
# What "partition" means depends on the kernel. atoll's islands sit under its
# root group, which is a member cgroup holding every CPU atoll manages:
# - with cpuset.cpus.exclusive (Linux 6.7+; 6.12 from bookworm-backports) an
#   island becomes a *remote* partition once its CPUs are claimed down the
#   chain: each island must read `root`, and its CPUs leave the rest of the
#   system (atoll's root and the top cgroup keep only CPU 0);
# - without it (6.1) a partition root needs a partition-root parent: the
#   kernel shows "root invalid (Parent is not a partition root)", atoll writes
#   `member` back and `status --json` must list that fallback, with the
#   kernel's reason, for each island. The CPUs are still confined (the
#   islands' cpuset.cpus.effective), only not exclusive.

ensure_daemon
for island in web batch; do
    [ -d "$CG/$ROOT/$island" ] || fail "no $CG/$ROOT/$island"
done

flat=$(status_flat) || fail "atoll status --json failed"
assert_eq "$(echo "$flat" | sed -n 's/^backend=//p')" cgroup2 "status backend"
for island in web batch; do
    echo "$flat" | grep -q "^islands\.[0-9]*\.name=$island\$" || fail "status lists no island $island"
done

# fallback_field ISLAND FIELD: FIELD of the fallback status lists for the
# cpuset.cpus.partition of ISLAND (empty if none).
fallback_field() {
    for _i in $(echo "$flat" | sed -n "s/^fallbacks\.\([0-9]*\)\.path=$1\$/\1/p"); do
        if echo "$flat" | grep -qx "fallbacks\.$_i\.knob=cpuset\.cpus\.partition"; then
            echo "$flat" | sed -n "s/^fallbacks\.$_i\.$2=//p" | sed 's/\\"/"/g'
            return 0
        fi
    done
}

if [ -e "$CG/$ROOT/cpuset.cpus.exclusive" ]; then
    note "kernel $(uname -r) has cpuset.cpus.exclusive: islands must be remote partitions"
    for spec in web:1-3 batch:4-7; do
        island=${spec%%:*} cpus=${spec#*:}
        part=$(cat "$CG/$ROOT/$island/cpuset.cpus.partition" 2>/dev/null)
        [ "$part" = root ] ||
            fail "$island cpuset.cpus.partition is '$part', not root (atoll's fallback reason: $(fallback_field "$island" reason))"
        assert_file_eq "$CG/$ROOT/$island/cpuset.cpus.exclusive.effective" "$cpus"
        [ -z "$(fallback_field "$island" reason)" ] ||
            fail "status lists a partition fallback for $island although it is root: $(fallback_field "$island" reason)"
    done
    # The islands' CPUs are taken from everyone else.
    assert_file_eq "$CG/$ROOT/cpuset.cpus.exclusive" 1-7
    assert_file_eq "$CG/$ROOT/cpuset.cpus.effective" 0
    assert_file_eq "$CG/cpuset.cpus.effective" 0
else
    note "kernel $(uname -r) has no cpuset.cpus.exclusive: islands must fall back to member"
    for island in web batch; do
        part=$(cat "$CG/$ROOT/$island/cpuset.cpus.partition" 2>/dev/null)
        assert_eq "$part" member "$island cpuset.cpus.partition after the fallback"
        reason=$(fallback_field "$island" reason)
        [ -n "$reason" ] || fail "status lists no fallback for $island cpuset.cpus.partition"
        assert_eq "$(fallback_field "$island" wanted)" root "wanted value of $island's partition fallback"
        assert_eq "$(fallback_field "$island" got)" member "got value of $island's partition fallback"
        # The kernel's own words, e.g. 'root invalid (Parent is not a partition root)'.
        case "$reason" in
            *"invalid ("*")"* | *"kernel refused"*) note "$island: $reason" ;;
            *) fail "$island's partition fallback does not give the kernel's reason: $reason" ;;
        esac
    done
    assert_file_eq "$CG/$ROOT/cpuset.cpus.effective" 0-7
fi

assert_file_eq "$CG/$ROOT/web/cpuset.cpus.effective" 1-3
assert_file_eq "$CG/$ROOT/web/cpuset.mems.effective" 0
assert_file_eq "$CG/$ROOT/batch/cpuset.cpus.effective" 4-7
assert_file_eq "$CG/$ROOT/batch/cpuset.mems.effective" 1
assert_file_eq "$CG/$ROOT/host/cpuset.cpus.effective" 0
assert_file_eq "$CG/$ROOT/web/api/cpuset.cpus.effective" 1-3
assert_file_eq "$CG/$ROOT/web/api/cpu.max" "200000 100000"
[ -d "$CG/$ROOT/batch/crunch" ] || fail "no cgroup for unit crunch"
assert_file_eq "$CG/$ROOT/batch/crunch/cpuset.cpus.effective" 4-7
