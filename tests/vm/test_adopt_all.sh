# shellcheck shell=sh
# host.adopt_all: every user process outside a unit lands in /<root>/host.
# Kernel threads (empty cmdline) cannot be moved and are skipped.

ensure_daemon

# strays: prints "pid(cmdline)@cgroup" for each process in the wrong place.
# Only shell builtins per process: a fork per process is slow under TCG.
strays() {
    for d in /proc/[0-9]*; do
        pid=${d#/proc/}
        has_cmdline "$pid" || continue
        read_cg "$pid"
        # shellcheck disable=SC2154 # set by read_cg
        cg=$_cg
        case "$cg" in
            "" | "/$ROOT/host") ;;
            "/$ROOT/host/"*) echo "$pid($(cmdline_of "$pid"))@$cg" ;;
            "/$ROOT/"*/*) ;;
            *) echo "$pid($(cmdline_of "$pid"))@$cg" ;;
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
