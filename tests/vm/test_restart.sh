# shellcheck shell=sh
# kill -9 the daemon and start it again: the unit's process stays where it is
# and the new daemon finds it (status lists its pid in unit api).

ensure_daemon
ensure_api_sleep
p=$(api_sleep_pid)
old=$(daemon_pid)

kill -9 "$old"
wait_for 30 "daemon $old to die" dead "$old"
alive "$p" || fail "'sleep 7777' (pid $p) died with the daemon"
assert_eq "$(cg_of "$p")" "/$ROOT/web/api" "cgroup of pid $p after kill -9"

start_daemon
[ -s "$STATE_DIR/state.json" ] || fail "no $STATE_DIR/state.json"
alive "$p" || fail "'sleep 7777' (pid $p) died when the daemon restarted"
assert_eq "$(cg_of "$p")" "/$ROOT/web/api" "cgroup of pid $p after restart"

# unit_has_pid UNIT PID: status --json lists PID among UNIT's pids.
unit_has_pid() {
    flat=$(status_flat) || return 1
    i=$(echo "$flat" | sed -n "s/^units\.\([0-9]*\)\.name=$1\$/\1/p")
    [ -n "$i" ] && echo "$flat" | grep -qx "units\.$i\.pids\.[0-9]*=$2"
}
wait_for 30 "status to list pid $p in unit api" unit_has_pid api "$p"
