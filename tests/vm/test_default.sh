# shellcheck shell=sh
# The default daemon (no --config, no --cgroup-root: the embedded default
# under /sys/fs/cgroup/atoll) changes nothing it was not told to: the top
# cgroup keeps all its CPUs, init keeps its CPU mask, and every process
# that was running keeps its cgroup and its mask, while the daemon runs and
# after `atoll stop`. Runs before the tests that start the adopt_all daemon.

daemon_alive && fail "the test daemon is already running: run 'default' before the others"
D_SOCK=$VMT_STATE/default.sock
D_LOG=$VMT_STATE/default.log
D_ROOT=$CG/atoll

sleep 6666 &
marker=$!
# Another manager's cgroup with a process that set its own CPU mask: atoll
# enabling cpuset at the top moves it to a new cpuset, which must not cost
# it its mask.
mkdir -p "$CG/other"
taskset -c 2-3 sleep 6667 &
affine=$!
echo "$affine" >"$CG/other/cgroup.procs" || fail "could not move the sleep into $CG/other"
assert_eq "$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "/proc/$affine/status")" 2-3 "CPUs of the taskset sleep"
machine_snapshot "$VMT_STATE/default.before"
grep -q "^top-effective 0-7$" "$VMT_STATE/default.before" ||
    fail "the top cgroup does not have CPUs 0-7 before the daemon: $(grep top- "$VMT_STATE/default.before")"
init_cpus=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/1/status)

NO_COLOR=1 "$ATOLL" daemon --socket "$D_SOCK" --state-dir "$VMT_STATE/default-state" >>"$D_LOG" 2>&1 &
d=$!
i=0
until "$ATOLL" status --socket "$D_SOCK" >"$VMT_STATE/default.status" 2>/dev/null; do
    alive "$d" || fail "the default daemon exited: $(tail -n 3 "$D_LOG" | tr '\n' ' ')"
    i=$((i + 1))
    [ "$i" -le 90 ] || fail "the default daemon did not answer status within 90s"
    sleep 1
done
grep '^root\|^effects\|^host\|^island' "$VMT_STATE/default.status" | sed 's/^/  | status: /'
[ -d "$D_ROOT/host" ] || fail "no $D_ROOT/host: the daemon built nothing ($(cd "$CG" && echo */))"
grep -q "^root       $D_ROOT\$" "$VMT_STATE/default.status" || fail "status does not say the root is $D_ROOT"
grep -q "^effects    nothing is taken" "$VMT_STATE/default.status" ||
    fail "status does not say that nothing is taken: $(grep '^effects' "$VMT_STATE/default.status")"
# Some epochs (adoption scans included) before looking.
sleep 3
machine_snapshot "$VMT_STATE/default.during"
diff=$(snapshot_changes "$VMT_STATE/default.before" "$VMT_STATE/default.during" "$d" | grep -v '^was "top-subtree')
[ -z "$diff" ] || fail "the default daemon changed the machine: $diff"
# Enabling controllers at the top is the one change outside its root.
note "top cgroup.subtree_control: '$(cat "$CG/cgroup.subtree_control")' (was '$(sed -n 's/^top-subtree //p' "$VMT_STATE/default.before")')"
assert_eq "$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/1/status)" "$init_cpus" "init's CPUs while the daemon runs"

"$ATOLL" stop --socket "$D_SOCK" || fail "atoll stop failed"
wait_for 60 "the default daemon to exit" dead "$d"
[ ! -e "$D_ROOT" ] || fail "$D_ROOT still exists after atoll stop"
machine_snapshot "$VMT_STATE/default.after"
diff=$(snapshot_changes "$VMT_STATE/default.before" "$VMT_STATE/default.after" "$d")
[ -z "$diff" ] || fail "after atoll stop the machine is not as before: $diff"
alive "$marker" || fail "the marker sleep died"
kill "$marker" "$affine"
wait_for 10 "the taskset sleep to exit" dead "$affine"
rmdir "$CG/other"
