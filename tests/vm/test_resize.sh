# shellcheck shell=sh
# Islands change CPUs across a daemon restart: kill -9, start with web on
# CPUs 1-2 and batch on 3-7, then kill -9 and start with the original config
# (web 1-3, batch 4-7). The existing groups are updated in place; on kernels
# with cpuset.cpus.exclusive the partitions stay `root` and their exclusive
# CPUs follow (going back, web can only grow once batch has given CPU 3 up,
# so it may take the daemon a second epoch), with no fallback left over.

ensure_daemon
ensure_api_sleep
p=$(api_sleep_pid)

resized=$VMT_STATE/resized.toml
sed -e 's/^cpus = "1-3"/cpus = "1-2"/' -e 's/^cpus = "4-7"/cpus = "3-7"/' "$(config_file)" >"$resized"
grep -q '^cpus = "3-7"' "$resized" || fail "could not rewrite the islands' CPUs in $(config_file)"

remote=no
[ -e "$CG/$ROOT/cpuset.cpus.exclusive" ] && remote=yes

# layout_is WEB BATCH: the islands have these CPUs, as partitions where the
# kernel has remote partitions, and status lists no cpuset fallback for them
# other than 6.1's partition fallback. On failure $why says what is off.
layout_is() {
    why=""
    for spec in "web:$1" "batch:$2"; do
        island=${spec%%:*} cpus=${spec#*:}
        d=$CG/$ROOT/$island
        eff=$(cat "$d/cpuset.cpus.effective")
        [ "$eff" = "$cpus" ] || { why="$island cpuset.cpus.effective is $eff, not $cpus"; return 1; }
        [ "$remote" = yes ] || continue
        part=$(cat "$d/cpuset.cpus.partition")
        [ "$part" = root ] || { why="$island cpuset.cpus.partition is '$part'"; return 1; }
        x=$(cat "$d/cpuset.cpus.exclusive.effective")
        [ "$x" = "$cpus" ] || { why="$island cpuset.cpus.exclusive.effective is $x, not $cpus"; return 1; }
    done
    if [ "$remote" = yes ]; then
        x=$(cat "$CG/$ROOT/cpuset.cpus.exclusive")
        [ "$x" = 1-7 ] || { why="$ROOT cpuset.cpus.exclusive is $x, not 1-7"; return 1; }
        flat=$(status_flat) || { why="atoll status --json failed"; return 1; }
        fb=$(echo "$flat" | grep '^fallbacks\.[0-9]*\.knob=cpuset' || true)
        [ -z "$fb" ] || { why="status lists fallbacks: $(echo "$flat" | grep '^fallbacks' | tr '\n' ' ')"; return 1; }
    fi
    return 0
}

# restart_with CONFIG WEB BATCH: kill -9 the daemon, start it with CONFIG and
# wait until the islands have the given CPUs.
restart_with() {
    old=$(daemon_pid)
    kill -9 "$old"
    wait_for 30 "daemon $old to die" dead "$old"
    start_daemon "$1"
    i=0
    until layout_is "$2" "$3"; do
        i=$((i + 1))
        [ "$i" -le 30 ] || fail "islands not web=$2 batch=$3 30s after restarting with $1: $why"
        sleep 1
    done
    for island in web batch; do
        d=$CG/$ROOT/$island
        note "$island: cpus $(cat "$d/cpuset.cpus"), effective $(cat "$d/cpuset.cpus.effective"), partition $(cat "$d/cpuset.cpus.partition")$(
            [ "$remote" = yes ] && echo ", exclusive $(cat "$d/cpuset.cpus.exclusive")") after ${i}s"
    done
    alive "$p" || fail "'sleep 7777' (pid $p) died"
    assert_eq "$(cg_of "$p")" "/$ROOT/web/api" "cgroup of pid $p"
    assert_eq "$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "/proc/$p/status")" "$2" \
        "CPUs 'sleep 7777' (pid $p) may run on"
}

restart_with "$resized" 1-2 3-7
restart_with "$(config_file)" 1-3 4-7
