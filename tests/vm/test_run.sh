# shellcheck shell=sh
# `atoll run --unit api -- CMD` runs CMD inside web/api and returns CMD's status.

ensure_daemon
ensure_api_sleep

p=$(api_sleep_pid)
assert_eq "$(cg_of "$p")" "/$ROOT/web/api" "cgroup of 'sleep 7777' (pid $p)"
# The kernel confines it to the island's CPUs (partition or not).
assert_eq "$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "/proc/$p/status")" 1-3 \
    "CPUs 'sleep 7777' (pid $p) may run on"

out=$(atoll_cli run --unit api -- cat /proc/self/cgroup) || fail "atoll run -- cat failed"
echo "$out" | grep -qx "0::/$ROOT/web/api" || fail "atoll run -- cat /proc/self/cgroup printed '$out'"

atoll_cli run --unit api -- sh -c 'exit 7'
assert_eq "$?" 7 "exit status of atoll run -- sh -c 'exit 7'"
