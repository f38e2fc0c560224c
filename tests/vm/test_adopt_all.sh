# shellcheck shell=sh
# host.adopt_all: every user process outside a unit lands in /<root>/host.
# Kernel threads (empty cmdline) cannot be moved and are skipped.

ensure_daemon

# strays: prints "pid(cmdline)@cgroup" for each process in the wrong place.
strays() {
    for d in /proc/[0-9]*; do
        pid=${d#/proc/}
        cmd=$(cmdline_of "$pid")
        [ -n "$cmd" ] || continue
        cg=$(cg_of "$pid")
        [ -n "$cg" ] || continue
        case "$cg" in
            "/$ROOT/host") ;;
            "/$ROOT/host/"*) echo "$pid($cmd)@$cg" ;;
            "/$ROOT/"*/*) ;;
            *) echo "$pid($cmd)@$cg" ;;
        esac
    done
}
no_strays() { [ -z "$(strays)" ]; }

i=0
until no_strays; do
    i=$((i + 1))
    [ "$i" -le 30 ] || fail "not in /$ROOT/host after 30s: $(strays | tr '\n' ' ')"
    sleep 1
done
assert_eq "$(cg_of 1)" "/$ROOT/host" "cgroup of init"
assert_eq "$(cg_of "$(marker_pid)")" "/$ROOT/host" "cgroup of the marker sleep"
