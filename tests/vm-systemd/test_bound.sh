# shellcheck shell=sh
# The packaged daemon with the systemd driver (--systemd on) and a config
# whose unit names nginx.service: atoll sets nginx's resources through
# systemd, never moving its processes. `systemctl show nginx.service`
# and nginx's cgroup files carry atoll's settings (AllowedCPUs 2-3, a CPU
# quota of one CPU, MemoryMax 300M, atoll's CPUWeight) while nginx keeps its
# processes, main pid and page; `atoll status` says "cgroup2 via systemd"
# and the unit is "through systemd unit nginx.service". systemctl kill -s
# KILL of atoll and its restart (Restart=on-failure) keep all of it; `atoll
# stop`, then `systemctl stop atoll` after a second start, each put nginx's
# own values back (the same `systemctl show` and cgroup files as before
# atoll). Last, `systemctl --failed` lists nothing. atoll.service runs with
# a drop-in in /run (removed at the end) for its command line. PostgreSQL's
# cluster unit is a second unit (its AllowedCPUs, MemoryMax, and psql
# answering). `systemctl reload atoll` with nginx's cap halved in the file
# halves its CPUQuota, moving nothing.
# shellcheck source=tests/vm-systemd/sdlib.sh
. "$VMT_DIR/sdlib.sh"

[ -x "$PKG_ATOLL" ] || install_debs
systemctl stop atoll.service 2>/dev/null
assert_active nginx.service
props=AllowedCPUs,AllowedMemoryNodes,CPUWeight,CPUQuotaPerSecUSec,MemoryHigh,MemoryMax
nginx_cg=$(cg_path nginx.service)
# nginx_view: what systemd and the kernel say of nginx's resources. A
# file the unit's cgroup does not have reads as the kernel's default: a
# controller systemd enabled for the unit because atoll set a property
# stays enabled after the original is put back (docs/systemd.md).
nginx_view() {
    systemctl show nginx.service -p "$props"
    nginx_file cpuset.cpus ""
    nginx_file cpu.max "max 100000"
    nginx_file cpu.weight 100
    nginx_file memory.high max
    nginx_file memory.max max
}
# nginx_file FILE DEFAULT: FILE=its content, or DEFAULT when it is absent.
nginx_file() {
    if [ -r "$nginx_cg/$1" ]; then
        echo "$1=$(cat "$nginx_cg/$1")"
    else
        echo "$1=$2"
    fi
}
nginx_view >"$VMT_STATE/nginx.before"
sed 's/^/  | nginx before atoll: /' "$VMT_STATE/nginx.before"
nginx_main=$(unit_prop nginx.service MainPID)
nginx_pids=$(sort -n "$nginx_cg/cgroup.procs" | tr '\n' ' ')

# PostgreSQL's cluster unit (postgresql.service is Debian's umbrella).
cluster=$(systemctl list-units --plain --no-legend 'postgresql@*' | awk '{ print $1; exit }')
[ -n "$cluster" ] || fail "no postgresql@*.service unit loaded"
db_before=$(systemctl show "$cluster" -p AllowedCPUs -p CPUWeight -p MemoryMax)
db_main=$(unit_prop "$cluster" MainPID)

config=/etc/atoll/bound.toml
mkdir -p /etc/atoll
cat >"$config" <<EOF
[host]
cpus = "0"

[island.web]
cpus = "2-3"
policy = "fair"

[unit.nginx]
island = "web"
cpus = 0.5
cpu_cap = 1
memory_max = "300M"
adopt = [{ systemd_unit = "nginx.service" }]

[unit.db]
island = "web"
weight = 300
memory_max = "400M"
adopt = [{ systemd_unit = "$cluster" }]
EOF
dropin=/run/systemd/system/atoll.service.d
mkdir -p "$dropin"
cat >"$dropin/bound.conf" <<EOF
[Service]
ExecStart=
ExecStart=/usr/bin/atoll daemon --config $config --systemd on
EOF
systemctl daemon-reload

# start_atoll: systemctl start atoll; the unit is active.
start_atoll() {
    timeout 120 systemctl start atoll.service || {
        systemctl status --no-pager atoll.service 2>&1 | tail -n 20 | sed 's/^/  | /'
        fail "systemctl start atoll ($1) failed"
    }
    assert_active atoll.service
}

# cpus_from_atoll: nginx's AllowedCPUs are atoll's.
cpus_from_atoll() { [ "$(unit_prop nginx.service AllowedCPUs)" = 2-3 ]; }

# restarted: atoll.service is active with another main pid than $old.
restarted() {
    _p=$(unit_prop atoll.service MainPID)
    [ "$_p" != 0 ] && [ "$_p" != "$old" ] && systemctl is-active --quiet atoll.service
}

# nginx_is_atolls WHEN: nginx carries atoll's settings, keeps its
# processes, and atoll says it manages it through systemd.
nginx_is_atolls() {
    assert_eq "$(unit_prop nginx.service AllowedCPUs)" 2-3 "nginx's AllowedCPUs ($1)"
    assert_eq "$(unit_prop nginx.service CPUQuotaPerSecUSec)" 1s "nginx's CPUQuotaPerSecUSec ($1)"
    assert_eq "$(unit_prop nginx.service MemoryMax)" 314572800 "nginx's MemoryMax ($1)"
    _w=$(unit_prop nginx.service CPUWeight)
    case "$_w" in
        '' | *[!0-9]*) fail "nginx's CPUWeight is $_w, not atoll's ($1)" ;;
    esac
    assert_eq "$(cat "$nginx_cg/cpuset.cpus")" 2-3 "$nginx_cg/cpuset.cpus ($1)"
    assert_eq "$(cat "$nginx_cg/cpu.max")" "100000 100000" "$nginx_cg/cpu.max ($1)"
    assert_eq "$(cat "$nginx_cg/memory.max")" 314572800 "$nginx_cg/memory.max ($1)"
    assert_eq "$(cat "$nginx_cg/cpu.weight")" "$_w" "$nginx_cg/cpu.weight ($1)"
    assert_eq "$(unit_prop nginx.service MainPID)" "$nginx_main" "nginx's main pid ($1)"
    assert_eq "$(sort -n "$nginx_cg/cgroup.procs" | tr '\n' ' ')" "$nginx_pids" "nginx's processes ($1)"
    curl -s --max-time 30 http://localhost/ | grep -q "Welcome to nginx" || fail "nginx does not serve its page ($1)"
    _st=$(timeout "$CMD_TIMEOUT" "$PKG_ATOLL" status 2>&1) || fail "atoll status ($1): $_st"
    echo "$_st" | head -n 1 | grep -q " on cgroup2 via systemd 2[0-9][0-9] " ||
        fail "atoll status does not say cgroup2 via systemd ($1): $(echo "$_st" | head -n 1)"
    echo "$_st" | grep -qx "       through systemd unit nginx.service" || {
        echo "$_st" | sed 's/^/  | status: /'
        fail "atoll status does not show unit nginx through nginx.service ($1)"
    }
    _json=$(timeout "$CMD_TIMEOUT" "$PKG_ATOLL" status --json) || fail "atoll status --json ($1)"
    assert_eq "$(echo "$_json" | jq -r .backend)" cgroup2 "status backend ($1)"
    assert_eq "$(echo "$_json" | jq -r '.units[] | select(.name == "nginx") | .service.bound')" true "nginx bound ($1)"
    assert_eq "$(echo "$_json" | jq -r '.units[] | select(.name == "nginx") | .pids | sort | map(tostring) | join(" ")') " \
        "$nginx_pids" "pids of unit nginx in atoll status ($1)"
}

# db_is_atolls WHEN: PostgreSQL's cluster carries atoll's settings, keeps
# its main pid and answers.
db_is_atolls() {
    assert_eq "$(unit_prop "$cluster" AllowedCPUs)" 2-3 "$cluster's AllowedCPUs ($1)"
    assert_eq "$(unit_prop "$cluster" MemoryMax)" 419430400 "$cluster's MemoryMax ($1)"
    assert_eq "$(unit_prop "$cluster" MainPID)" "$db_main" "$cluster's main pid ($1)"
    _out=$(runuser -u postgres -- psql -tA -c 'select 1' 2>&1) || fail "psql ($1): $_out"
    assert_eq "$_out" 1 "psql select 1 ($1)"
}

# db_is_its_own WHEN: the cluster is as before atoll.
db_is_its_own() {
    assert_eq "$(systemctl show "$cluster" -p AllowedCPUs -p CPUWeight -p MemoryMax)" "$db_before" "$cluster's resources ($1)"
    assert_eq "$(unit_prop "$cluster" MainPID)" "$db_main" "$cluster's main pid ($1)"
}

# nginx_is_its_own WHEN: nginx is as before atoll.
nginx_is_its_own() {
    nginx_view >"$VMT_STATE/nginx.after"
    _d=$(diff "$VMT_STATE/nginx.before" "$VMT_STATE/nginx.after") || {
        echo "$_d" | sed 's/^/  | /'
        fail "nginx's resources are not its own again ($1)"
    }
    assert_eq "$(unit_prop nginx.service MainPID)" "$nginx_main" "nginx's main pid ($1)"
    assert_active nginx.service
}

start_atoll "first"
wait_for 60 "nginx's AllowedCPUs from atoll" cpus_from_atoll
nginx_is_atolls "atoll started"
db_is_atolls "atoll started"
nginx_view | sed 's/^/  | nginx with atoll: /'
note "systemctl show nginx.service -p AllowedCPUs,CPUWeight:"
systemctl show nginx.service -p AllowedCPUs,CPUWeight | sed 's/^/  |   /'
note "systemctl status atoll --no-pager:"
systemctl status atoll --no-pager 2>&1 | head -n 12 | sed 's/^/  |   /'
journalctl -b -u atoll.service --no-pager -o cat | grep -m 2 'via systemd\|nginx.service' | sed 's/^/  | journal: /'

# A crash: systemd restarts atoll (Restart=on-failure); the new daemon
# takes nginx over from its state file.
old=$(unit_prop atoll.service MainPID)
systemctl kill -s KILL atoll.service || fail "systemctl kill -s KILL atoll failed"
wait_for 30 "atoll's main pid $old to die" dead "$old"
wait_for 60 "atoll to be restarted" restarted
note "restarted: $(systemctl show -p MainPID -p NRestarts atoll.service | tr '\n' ' ')"
nginx_is_atolls "after kill -9 and the restart"
db_is_atolls "after kill -9 and the restart"

# systemctl reload with a changed entitlement: nginx's cap goes from one CPU
# to half of one through systemd, nothing else moves; then back.
sed -i 's/^cpu_cap = 1$/cpu_cap = 0.5/' "$config"
out=$(timeout 120 systemctl reload atoll.service 2>&1) || fail "systemctl reload atoll: $out"
assert_eq "$(unit_prop nginx.service CPUQuotaPerSecUSec)" 500ms "nginx's CPUQuotaPerSecUSec after the reload"
assert_eq "$(cat "$nginx_cg/cpu.max")" "50000 100000" "$nginx_cg/cpu.max after the reload"
assert_eq "$(sort -n "$nginx_cg/cgroup.procs" | tr '\n' ' ')" "$nginx_pids" "nginx's processes after the reload"
db_is_atolls "after the reload"
sed -i 's/^cpu_cap = 0.5$/cpu_cap = 1/' "$config"
out=$(timeout 120 systemctl reload atoll.service 2>&1) || fail "systemctl reload atoll (back): $out"
nginx_is_atolls "after reloading the first config"

# `atoll stop`: the daemon gives everything back and exits (no restart).
main=$(unit_prop atoll.service MainPID)
out=$(timeout 120 "$PKG_ATOLL" stop 2>&1) || fail "atoll stop: $out"
wait_for 60 "atoll's main pid $main to exit" dead "$main"
nginx_is_its_own "after atoll stop"
db_is_its_own "after atoll stop"
journalctl -b -u atoll.service --no-pager -o cat | grep 'nginx.service: .* put back' | tail -n 6 | sed 's/^/  | journal: /'

# Again, ended by systemctl stop atoll.
start_atoll "second"
wait_for 60 "nginx's AllowedCPUs from atoll" cpus_from_atoll
nginx_is_atolls "second start"
timeout 120 systemctl stop atoll.service || fail "systemctl stop atoll failed"
nginx_is_its_own "after systemctl stop atoll"
db_is_its_own "after systemctl stop atoll"

rm -f "$dropin/bound.conf" "$config"
systemctl daemon-reload
failed=$(systemctl --failed --no-legend --plain)
[ -z "$failed" ] || fail "systemctl --failed: $failed"
