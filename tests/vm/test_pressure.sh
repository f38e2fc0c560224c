# shellcheck shell=sh
# react_pressure on PSI triggers, on a real cgroup2 kernel. Runs its own
# daemon (root atoll-psi) with islands web (1-3) and batch (4-7), units api
# and front (web: api alone on it could not be given more) and crunch
# (batch), and an overlay shop over api with react_pressure = 20; stops it
# at the end.
#
# - Idle: `status --json` says pressure source `triggers` with api's
#   trigger armed (armed=1), none fired, and web/api's cpu.weight is the
#   default.
# - Six busy loops in api (on its three CPUs): the trigger fires (fired>=1),
#   api is tuned up (cpu.weight above the default) and `atoll why api`
#   names the CPU pressure that led to it.
# - The loops end: api is tuned back down (to its weight before, or one
#   step below it) and waits on its trigger again (armed=1).

own_daemon psi
PS_ROOT=$ROOT
PS_DIR=$VMT_STATE/psi

cfg=$PS_DIR/psi.toml
cat >"$cfg" <<'EOF'
[host]
cpus = "0"
adopt_all = false

[island.web]
cpus = "1-3"

[island.batch]
cpus = "4-7"

[unit.api]
island = "web"

[unit.front]
island = "web"

[unit.crunch]
island = "batch"

[overlay.shop]
priority = 5
units = ["api"]
latency_us = 1000
react_pressure = 20
EOF
# The coordination's debug lines (refused messages) go to the log too.
export ATOLL_LOG=info,atoll_daemon::coord=debug
start_daemon "$cfg"
unset ATOLL_LOG
A=$CG/$PS_ROOT/web/api

# pressure_is KEY=VALUE...: the status's pressure fields hold these values.
pressure_is() {
    _s=$(status_flat | grep '^pressure\.')
    for _kv in "$@"; do
        echo "$_s" | grep -qx "pressure\.$_kv" || return 1
    done
}
# fired_some: at least one trigger fired.
fired_some() { status_flat | grep -q '^pressure\.fired=[1-9]'; }
# diag: what the status, the kernel and the decisions say, on the console.
diag() {
    note "status: $(status_flat | grep '^pressure\.' | tr '\n' ' ')"
    note "$A/cpu.pressure: $(tr '\n' ' ' <"$A/cpu.pressure")"
    note "$A: $(wc -l <"$A/cgroup.procs") processes, cpu.weight $(cat "$A/cpu.weight")"
    atoll_cli why api 2>&1 | tail -n 5 | sed 's/^/  | why api: /'
}
# weight_above N: web/api's cpu.weight is above N.
weight_above() { [ "$(cat "$A/cpu.weight")" -gt "$1" ]; }
weight_at_most() { [ "$(cat "$A/cpu.weight")" -le "$1" ]; }

wait_for 30 "api's trigger armed" pressure_is source=triggers armed=1
status_flat | grep '^pressure\.' | tr '\n' ' ' | sed 's/^/  | idle: /'
echo
pressure_is fired=0 || fail "a trigger fired while idle: $(status_flat | grep '^pressure\.' | tr '\n' ' ')"
w0=$(cat "$A/cpu.weight")
# From here on a failure also shows what the status, the kernel and the
# decisions say.
fail() {
    echo "$*" >"$VMT_STATE/reason"
    diag
    note "last daemon log lines:"
    tail -n 15 "$DAEMON_LOG" | sed 's/^/  | daemon: /'
    exit 1
}

# Six busy loops in api, on its three CPUs: each waits about half the time.
atoll_cli run --unit api -- sh -c \
    'for i in 1 2 3 4 5 6; do (while :; do :; done) & done; echo $$ >'"$PS_DIR"'/hog.pid; wait' \
    >"$PS_DIR/hog.log" 2>&1 &
wait_for 30 "the busy loops in api" sh -c "[ -s $PS_DIR/hog.pid ]"
hog=$(cat "$PS_DIR/hog.pid")
assert_eq "$(cg_of "$hog")" "/$PS_ROOT/web/api" "cgroup of the busy loops' shell"

wait_for 60 "api's trigger to fire" fired_some
wait_for 60 "api tuned up (cpu.weight above $w0)" weight_above "$w0"
note "api cpu.weight $w0 -> $(cat "$A/cpu.weight"); $(status_flat | grep '^pressure\.' | tr '\n' ' ')"
atoll_cli why api 2>&1 | grep -q 'CPU pressure of api' ||
    fail "atoll why api names no CPU pressure: $(atoll_cli why api 2>&1 | tail -n 3)"

# The loops end: tuned back down, then armed again.
kill "$hog" 2>/dev/null
for p in $(cat "$A/cgroup.procs"); do kill "$p" 2>/dev/null; done
wait_for 60 "the busy loops to end" sh -c "[ -z \"\$(cat $A/cgroup.procs)\" ]"
# Tuned down step by step (x 0.8 from the top, so it may end a step below
# the weight it started at).
wait_for 60 "api tuned back down (cpu.weight at most $w0)" weight_at_most "$w0"
wait_for 60 "api's trigger armed again" pressure_is source=triggers armed=1
note "after: $(status_flat | grep '^pressure\.' | tr '\n' ' ')"

atoll_cli stop >/dev/null 2>&1
wait_for 60 "the pressure daemon to stop" dead "$(daemon_pid)"
[ ! -e "$CG/$PS_ROOT" ] || fail "$CG/$PS_ROOT is still there after stop"
