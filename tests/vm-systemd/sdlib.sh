# shellcheck shell=sh
# systemd helpers for the guest tests of the systemd VM rig (POSIX sh; load
# with `. "$VMT_DIR/sdlib.sh"` after tests/vm/lib.sh, which the runner
# loads). The share is $ATOLL_SHARE (/mnt/atoll): bin/ (atoll), debs/,
# etc/, tests/, out/ (files for the host).

# unit_prop UNIT PROPERTY: the value of one property (`systemctl show -P`).
unit_prop() { systemctl show -P "$2" "$1"; }

# assert_active UNIT...: each unit is active; fails with its status if not.
assert_active() {
    for _u in "$@"; do
        _st=$(systemctl is-active "$_u")
        if [ "$_st" != active ]; then
            systemctl status --no-pager "$_u" 2>&1 | tail -n 15 | sed 's/^/  | /'
            fail "$_u is $_st, not active"
        fi
    done
}

# wait_active SECONDS UNIT: polls until UNIT is active.
wait_active() { wait_for "$1" "$2 active" systemctl is-active --quiet "$2"; }

# install_debs [FILE...]: dpkg -i the given .debs (default: every .deb in
# $ATOLL_SHARE/debs, which scripts/vm/systemd/run.sh --deb fills). The
# guest has no network: dependencies must already be in the image
# (scripts/vm/systemd/packages.txt).
install_debs() {
    [ $# -gt 0 ] || set -- "$ATOLL_SHARE"/debs/*.deb
    [ -e "$1" ] || fail "no .deb to install in $ATOLL_SHARE/debs"
    _out=$(DEBIAN_FRONTEND=noninteractive dpkg -i "$@" 2>&1) || {
        echo "$_out" | tail -n 15 | sed 's/^/  | dpkg: /'
        fail "dpkg -i $* failed"
    }
}

# cg_path UNIT: the unit's cgroup directory under /sys/fs/cgroup.
cg_path() { echo "$CG$(unit_prop "$1" ControlGroup)"; }

# --- atoll as a service ---------------------------------------------------------

# The packaged binary (the share's bin/atoll comes first in PATH).
# shellcheck disable=SC2034 # used by the tests that load this file
PKG_ATOLL=/usr/bin/atoll

# sd_snapshot FILE: machine_snapshot (tests/vm/lib.sh: every process's
# cgroup and CPUs, the top cgroup's CPUs and controllers) plus, for nginx
# and the postgresql cluster, the main pid's cgroup and systemd's
# AllowedCPUs and EffectiveCPUs.
sd_snapshot() {
    machine_snapshot "$1"
    for _u in nginx.service "$(pg_cluster)"; do
        _p=$(unit_prop "$_u" MainPID)
        # Without the cpuset controller EffectiveCPUs is empty: every
        # online CPU, which is what it reads once systemd enables cpuset.
        _eff=$(unit_prop "$_u" EffectiveCPUs)
        echo "unit-$_u pid=$_p cg=$(cg_of "$_p") AllowedCPUs=$(unit_prop "$_u" AllowedCPUs) EffectiveCPUs=${_eff:-$(cat /sys/devices/system/cpu/online)}" >>"$1"
    done
}

# pg_cluster: the postgresql@VERSION-main unit.
pg_cluster() { systemctl list-units --plain --no-legend 'postgresql@*' | awk '{ print $1; exit }'; }

# write_udp_sender FILE ADDR: a bash script at FILE that sends 20 UDP
# datagrams to ADDR port 9 through bash's /dev/udp.
write_udp_sender() {
    # shellcheck disable=SC2016 # $i and $(seq) are the script's, not ours
    printf 'for i in $(seq 20); do echo "datagram $i" >/dev/udp/%s/9; done\n' "$2" >"$1"
}

# class_packets IFACE CLASS: packets sent through tc class CLASS on IFACE
# (0 if none).
class_packets() {
    tc -s class show dev "$1" |
        awk -v c="$2" '$1 == "class" { cur = ($3 == c) } cur && $1 == "Sent" { n = $4; exit } END { print n + 0 }'
}

# atoll_cgroups: every cgroup directory of atoll.service (one a line).
atoll_cgroups() {
    [ -d "$CG/system.slice/atoll.service" ] || return 0
    find "$CG/system.slice/atoll.service" -mindepth 1 -type d | sort
}

# kernel_hint: why CPU masks may have changed on this kernel, or nothing.
# Before Linux 6.2 a task's own affinity (sched_setaffinity, CPUAffinity=)
# is reset to its cpuset's CPUs when the task moves to a new cpuset, which
# is what enabling the cpuset controller above it does; systemd enables it
# on the path to a unit with Delegate=cpuset (systemd issue #23748).
kernel_hint() {
    _v=$(uname -r)
    _maj=${_v%%.*}
    _min=${_v#*.}
    _min=${_min%%[!0-9]*}
    if [ "$_maj" -lt 6 ] || { [ "$_maj" -eq 6 ] && [ "$_min" -lt 2 ]; }; then
        echo " (Linux $_v < 6.2 resets a process's own CPU mask when the cpuset controller is enabled above it, as systemd does for Delegate=cpuset)"
    fi
}
