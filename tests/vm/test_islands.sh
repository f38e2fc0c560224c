# shellcheck shell=sh
# The daemon builds the islands of examples/vm-8cpu.toml: web (CPUs 1-3, node 0)
# as a real cpuset partition, batch (CPUs 4-7, node 1), and unit api's CPU cap.

ensure_daemon
[ -d "$CG/$ROOT/web" ] || fail "no $CG/$ROOT/web"

part=$(cat "$CG/$ROOT/web/cpuset.cpus.partition" 2>/dev/null)
if [ "$part" != root ]; then
    # The reason atoll gives, if it reported a fallback for web's partition.
    flat=$(status_flat)
    i=$(echo "$flat" | sed -n 's/^fallbacks\.\([0-9]*\)\.path=web$/\1/p' | head -n 1)
    reason=$(echo "$flat" | sed -n "s/^fallbacks\.$i\.reason=//p")
    fail "web cpuset.cpus.partition is '$part', not root (atoll's fallback reason: ${reason:-none})"
fi
assert_file_eq "$CG/$ROOT/web/cpuset.cpus.effective" 1-3
assert_file_eq "$CG/$ROOT/web/cpuset.mems.effective" 0
assert_file_eq "$CG/$ROOT/batch/cpuset.cpus.effective" 4-7
assert_file_eq "$CG/$ROOT/batch/cpuset.mems.effective" 1
assert_file_eq "$CG/$ROOT/host/cpuset.cpus.effective" 0
assert_file_eq "$CG/$ROOT/web/api/cpu.max" "200000 100000"
[ -d "$CG/$ROOT/batch/crunch" ] || fail "no cgroup for unit crunch"

flat=$(status_flat) || fail "atoll status --json failed"
assert_eq "$(echo "$flat" | sed -n 's/^backend=//p')" cgroup2 "status backend"
for island in web batch; do
    echo "$flat" | grep -q "^islands\.[0-9]*\.name=$island\$" || fail "status lists no island $island"
done
