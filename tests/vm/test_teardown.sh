# shellcheck shell=sh
# `atoll stop`: the daemon exits, every process goes back to the cgroup it
# had before atoll (all of them were in / here), and /<root> is gone.

ensure_daemon
ensure_api_sleep
p=$(api_sleep_pid)
m=$(marker_pid)
d=$(daemon_pid)

atoll_cli stop || fail "atoll stop failed"
wait_for 60 "daemon $d to exit after atoll stop" dead "$d"

if [ -e "$CG/$ROOT" ]; then
    fail "$CG/$ROOT still exists: $(find "$CG/$ROOT" -type d | tr '\n' ' ')"
fi
alive "$p" || fail "'sleep 7777' (pid $p) died in teardown"
alive "$m" || fail "marker sleep (pid $m) died in teardown"
# The unit's sleep was launched from the test shell, which was in init's
# original cgroup before atoll adopted everything.
assert_eq "$(cg_of "$p")" "$(original_of 1)" "cgroup of 'sleep 7777' after teardown"
assert_eq "$(cg_of "$m")" "$(original_of "$m")" "cgroup of the marker sleep after teardown"
assert_eq "$(cg_of 1)" "$(original_of 1)" "cgroup of init after teardown"
# The partitions' CPUs are back with everyone (and in the processes' masks).
assert_file_eq "$CG/cpuset.cpus.effective" 0-7
assert_eq "$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "/proc/$p/status")" 0-7 \
    "CPUs 'sleep 7777' (pid $p) may run on after teardown"

kill "$p" "$m"
rm -f "$VMT_STATE/api_sleep.pid" "$VMT_STATE/marker.pid"
