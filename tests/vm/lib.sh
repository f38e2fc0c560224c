# shellcheck shell=sh
# Helpers for the guest tests (POSIX sh, runs under busybox ash).
#
# Each test runs in its own shell (see runner.sh); state that outlives one
# test (the daemon's pid, the sleep started in unit api, the cgroups that
# processes had before atoll started) lives in files under $VMT_STATE, so a
# test can also run alone: the ensure_* helpers start what it needs.

# The tests use these variables.
# shellcheck disable=SC2034
{
VMT_DIR=${VMT_DIR:-/tests/vm}
VMT_STATE=${VMT_STATE:-/run/vmtest}
CG=/sys/fs/cgroup
ROOT=${ATOLL_ROOT:-atoll-vm}
SOCK=$VMT_STATE/atoll.sock
STATE_DIR=$VMT_STATE/state
DAEMON_LOG=$VMT_STATE/daemon.log
ATOLL=${ATOLL:-atoll}
# Seconds any one atoll client command may take.
CMD_TIMEOUT=60
}

mkdir -p "$VMT_STATE"

# --- reporting ----------------------------------------------------------------

# note MSG: a diagnostic line on the console.
note() { echo "  | $*"; }

# fail REASON: ends the current test; the runner prints REASON on the FAIL line.
fail() {
    echo "$*" >"$VMT_STATE/reason"
    if [ -s "$DAEMON_LOG" ]; then
        note "last daemon log lines:"
        tail -n 15 "$DAEMON_LOG" | sed 's/^/  | daemon: /'
    fi
    exit 1
}

assert_eq() { # assert_eq ACTUAL EXPECTED WHAT
    [ "$1" = "$2" ] || fail "$3: expected '$2', got '$1'"
}

in_list() { # in_list N LIST: whether CPU N is in the cpu list LIST (1-3,5)
    for _r in $(echo "$2" | tr ',' ' '); do
        [ "$1" -ge "${_r%-*}" ] && [ "$1" -le "${_r#*-}" ] && return 0
    done
    return 1
}

assert_file_eq() { # assert_file_eq FILE EXPECTED
    [ -r "$1" ] || fail "$1 does not exist"
    assert_eq "$(cat "$1")" "$2" "$1"
}

# uptime_s: whole seconds since boot, in $_now (no fork: loops stay cheap
# under TCG, where every fork costs tens of milliseconds).
uptime_s() {
    read -r _up _ </proc/uptime
    _now=${_up%%.*}
}

# wait_for SECONDS WHAT CMD [ARGS...]: polls CMD once a second until it
# succeeds; fails the test when SECONDS have passed.
wait_for() {
    _secs=$1 _what=$2
    shift 2
    uptime_s
    _deadline=$((_now + _secs))
    while ! "$@" >/dev/null 2>&1; do
        uptime_s
        [ "$_now" -le "$_deadline" ] || fail "timed out after ${_secs}s waiting for $_what"
        sleep 1
    done
}

# --- processes and cgroups ----------------------------------------------------

# alive PID: true if PID exists and is not a zombie.
alive() {
    _st=""
    { read -r _st <"/proc/$1/stat"; } 2>/dev/null
    _st=${_st##*) }
    [ -n "$_st" ] && [ "${_st%% *}" != Z ]
}
dead() { ! alive "$1"; }

# read_cg PID: sets $_cg to the process's cgroup v2 path ("/",
# "/atoll-vm/host", ...; empty if it is gone). cg_of PID prints it.
read_cg() {
    _cg=""
    { read -r _cg <"/proc/$1/cgroup"; } 2>/dev/null
    _cg=${_cg#0::}
}
cg_of() {
    read_cg "$1"
    echo "$_cg"
}

# cmdline_of PID: argv joined with spaces (empty for kernel threads).
cmdline_of() { { tr '\0' ' ' <"/proc/$1/cmdline"; } 2>/dev/null; }

# has_cmdline PID: true for user processes (kernel threads have no argv).
# `read` drops the NULs between arguments; good enough to test for empty.
has_cmdline() {
    _c=""
    { IFS= read -r _c <"/proc/$1/cmdline"; } 2>/dev/null
    [ -n "$_c" ]
}

# find_pid_by_argv "ARGV0 ARG...": the pid whose argv is exactly that
# (argv[0] may also be given as a path ending in /ARGV0).
find_pid_by_argv() {
    _squashed=$(echo "$1" | tr -d ' ')
    for _d in /proc/[0-9]*; do
        _c=""
        { IFS= read -r _c <"$_d/cmdline"; } 2>/dev/null
        case "$_c" in
            "$_squashed" | */"$_squashed") ;;
            *) continue ;;
        esac
        case "$(cmdline_of "${_d#/proc/}")" in
            "$1 " | */"$1 ") echo "${_d#/proc/}"; return 0 ;;
        esac
    done
    return 1
}

# --- atoll --------------------------------------------------------------------

# atoll_cli SUBCOMMAND [ARGS...]: runs a client command against the test daemon.
atoll_cli() {
    _sub=$1
    shift
    timeout "$CMD_TIMEOUT" "$ATOLL" "$_sub" --socket "$SOCK" "$@"
}

# jflat: flattens JSON on stdin to path=value lines (see jflat.awk).
jflat() { awk -f "$VMT_DIR/jflat.awk"; }

# status_flat: `atoll status --json`, flattened.
status_flat() { atoll_cli status --json | jflat; }

# The config the daemon runs with: examples/vm-8cpu.toml if the initramfs has
# it, else the equivalent written here.
config_file() {
    if [ -r /etc/atoll/vm-8cpu.toml ]; then
        echo /etc/atoll/vm-8cpu.toml
        return
    fi
    if [ ! -r "$VMT_STATE/vm-8cpu.toml" ]; then
        cat >"$VMT_STATE/vm-8cpu.toml" <<'EOF'
# Fallback written by tests/vm/lib.sh (examples/vm-8cpu.toml was missing).
[host]
cpus = "0"
adopt_all = true

[island.web]
cpus = "1-3"
exclusive = true

[island.batch]
cpus = "4-7"
exclusive = true

[unit.api]
island = "web"
cpus = 1.5
cpu_cap = 2

[unit.crunch]
island = "batch"
weight = 50
EOF
    fi
    echo "$VMT_STATE/vm-8cpu.toml"
}

daemon_pid() { cat "$VMT_STATE/daemon.pid" 2>/dev/null; }
daemon_alive() { _p=$(daemon_pid) && [ -n "$_p" ] && alive "$_p"; }

# own_daemon NAME: for a test that runs a daemon of its own: root group
# atoll-NAME, socket, state dir and log NAME.* under $VMT_STATE, and the
# directory $VMT_STATE/NAME for the test's files; stops the daemon the
# tests before it left running.
own_daemon() {
    ROOT=atoll-$1
    SOCK=$VMT_STATE/$1.sock
    STATE_DIR=$VMT_STATE/$1-state
    DAEMON_LOG=$VMT_STATE/$1-daemon.log
    mkdir -p "$VMT_STATE/$1"
    stop_earlier_daemon
}

# stop_earlier_daemon: for a test that runs a daemon of its own, stops the
# one the tests before it left running (by the API, else by a signal).
stop_earlier_daemon() {
    daemon_alive || return 0
    atoll_cli stop >/dev/null 2>&1 || kill "$(daemon_pid)"
    wait_for 60 "the earlier daemon to stop" dead "$(daemon_pid)"
}
# status_ok: the daemon answers `status --json` with a status report.
status_ok() { atoll_cli status --json 2>/dev/null | grep -q '"backend"'; }

# record_original PID: remembers the cgroup PID is in before atoll runs.
record_original() {
    [ -e "$VMT_STATE/orig.$1" ] || cg_of "$1" >"$VMT_STATE/orig.$1"
}
original_of() { cat "$VMT_STATE/orig.$1"; }

# start_markers: a process atoll must adopt and later give back, started
# before the daemon; its pid and original cgroup (and init's) are recorded.
start_markers() {
    [ -e "$VMT_STATE/marker.pid" ] && return 0
    sleep 8888 &
    echo $! >"$VMT_STATE/marker.pid"
    record_original $!
    record_original 1
}
marker_pid() { cat "$VMT_STATE/marker.pid"; }

# start_daemon [CONFIG]: starts `atoll daemon` (with CONFIG, default
# config_file) in the background and waits until it answers `status`; fails
# the test if it exits first.
# shellcheck disable=SC2120 # CONFIG is optional (test_resize.sh passes one)
start_daemon() {
    _cfg=${1:-$(config_file)}
    echo "--- daemon start $(cut -d' ' -f1 /proc/uptime)s" >>"$DAEMON_LOG"
    NO_COLOR=1 "$ATOLL" daemon --config "$_cfg" --backend cgroup2 --cgroup-root "$ROOT" \
        --socket "$SOCK" --state-dir "$STATE_DIR" >>"$DAEMON_LOG" 2>&1 &
    echo $! >"$VMT_STATE/daemon.pid"
    uptime_s
    _deadline=$((_now + 90))
    until status_ok; do
        daemon_alive || fail "atoll daemon exited before answering status (config $_cfg)"
        uptime_s
        [ "$_now" -le "$_deadline" ] || fail "atoll daemon did not answer status within 90s"
        sleep 1
    done
}

# ensure_daemon: the daemon is running (markers started first).
ensure_daemon() {
    daemon_alive && return 0
    start_markers
    # shellcheck disable=SC2119 # the default config
    start_daemon
}

api_sleep_pid() { cat "$VMT_STATE/api_sleep.pid" 2>/dev/null; }

# ensure_api_sleep: `atoll run --unit api -- sleep 7777` is running; its
# pid (the sleep itself, not the client) is in $VMT_STATE/api_sleep.pid.
ensure_api_sleep() {
    _p=$(api_sleep_pid) && [ -n "$_p" ] && alive "$_p" && return 0
    # Not atoll_cli: no time limit on this one, it lives until teardown.
    "$ATOLL" run --socket "$SOCK" --unit api -- sleep 7777 >>"$VMT_STATE/run.log" 2>&1 &
    _client=$!
    uptime_s
    _deadline=$((_now + 60))
    until find_pid_by_argv "sleep 7777" >"$VMT_STATE/api_sleep.pid"; do
        if dead "$_client"; then
            note "atoll run output:"
            tail -n 5 "$VMT_STATE/run.log" | sed 's/^/  | run: /'
            fail "atoll run --unit api exited before its 'sleep 7777' showed up"
        fi
        uptime_s
        [ "$_now" -le "$_deadline" ] || fail "no 'sleep 7777' 60s after atoll run --unit api"
        sleep 1
    done
}

# --- what atoll must leave alone ----------------------------------------------

# machine_snapshot FILE: "pid cgroup cpus" for every process with a command
# line, then the top cgroup's effective CPUs ("top-effective ...") and
# enabled controllers ("top-subtree ..."). Only shell builtins per process
# (a fork costs tens of milliseconds under TCG).
machine_snapshot() {
    : >"$1"
    for _d in /proc/[0-9]*; do
        _pid=${_d#/proc/}
        has_cmdline "$_pid" || continue
        read_cg "$_pid"
        _cpus=""
        while read -r _k _v; do
            [ "$_k" = Cpus_allowed_list: ] && _cpus=$_v
        done <"/proc/$_pid/status" 2>/dev/null
        [ -n "$_cg" ] && echo "$_pid $_cg $_cpus" >>"$1"
    done
    echo "top-effective $(cat "$CG/cpuset.cpus.effective")" >>"$1"
    echo "top-subtree $(cat "$CG/cgroup.subtree_control")" >>"$1"
}

# snapshot_changes BEFORE NOW [PID]: one line per process alive in both
# snapshots whose cgroup or CPUs differ, and per other line that differs;
# PID (the daemon, say) is skipped.
snapshot_changes() {
    awk -v skip="${3:-}" 'NR == FNR { was[$1] = $0; next }
        $1 == skip { next }
        ($1 in was) && was[$1] != $0 { print "was \"" was[$1] "\", now \"" $0 "\"" }' "$1" "$2"
}
