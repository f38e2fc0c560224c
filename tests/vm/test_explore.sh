# shellcheck shell=sh
# TEMPORARY exploration of cpuset partition rules (vm2).
show() {
    for g in "" /x /x/host /x/web /x/batch /x/web/api; do
        d=$CG$g
        [ -d "$d" ] || continue
        printf '  | %-12s cpus=%-5s eff=%-5s excl=%-5s xeff=%-5s part=%s\n' "${g:-/}" \
            "$(cat $d/cpuset.cpus 2>/dev/null)" "$(cat $d/cpuset.cpus.effective 2>/dev/null)" \
            "$(cat $d/cpuset.cpus.exclusive 2>/dev/null)" "$(cat $d/cpuset.cpus.exclusive.effective 2>/dev/null)" \
            "$(cat $d/cpuset.cpus.partition 2>/dev/null)"
    done
    [ -r $CG/cpuset.cpus.isolated ] && note "isolated: $(cat $CG/cpuset.cpus.isolated)"
}
w() { # w FILE VALUE
    if echo "$2" >"$CG/$1" 2>/tmp/err; then note "write $1 = '$2' ok"; else note "write $1 = '$2' FAILED: $(cat /tmp/err)"; fi
}
ls $CG | tr '\n' ' '; echo
w cgroup.subtree_control "+cpuset +cpu"
mkdir $CG/x
w x/cpuset.cpus 0-7
w x/cpuset.mems 0-1
w x/cgroup.subtree_control "+cpuset +cpu"
mkdir $CG/x/host $CG/x/web $CG/x/batch
w x/host/cpuset.cpus 0
w x/web/cpuset.cpus 1-3
w x/web/cpuset.mems 0
w x/batch/cpuset.cpus 4-7
w x/batch/cpuset.mems 1
show
note "--- web root without exclusive"
w x/web/cpuset.cpus.partition root
show
w x/web/cpuset.cpus.partition member
note "--- claim x excl 1-3, web excl 1-3, root"
w x/cpuset.cpus.exclusive 1-3
show
w x/web/cpuset.cpus.exclusive 1-3
show
w x/web/cpuset.cpus.partition root
show
note "--- x excl 1-7, batch excl 4-7 root"
w x/cpuset.cpus.exclusive 1-7
w x/batch/cpuset.cpus.exclusive 4-7
w x/batch/cpuset.cpus.partition root
show
note "--- put a process in host; api unit under web"
sleep 999 & sp=$!
w x/host/cgroup.procs $sp
w x/web/cgroup.subtree_control "+cpu +cpuset"
mkdir $CG/x/web/api
w x/web/api/cgroup.procs $sp
show
note "sleep affinity: $(grep Cpus_allowed_list /proc/$sp/status)"
w x/host/cgroup.procs $sp
note "--- change web cpus to 1-2 while root"
w x/web/cpuset.cpus 1-2
show
w x/web/cpuset.cpus 1-3
show
note "--- reapply: write x/cpuset.cpus 0-7 again, x excl again"
w x/cpuset.cpus 0-7
w x/cpuset.cpus.exclusive 1-7
show
note "--- isolated"
w x/batch/cpuset.cpus.partition isolated
show
w x/batch/cpuset.cpus.partition root
note "--- teardown: rmdir api, web (root) directly"
rmdir $CG/x/web/api && note rmdir api ok
rmdir $CG/x/web && note "rmdir web (root) ok" || note "rmdir web failed"
show
w x/batch/cpuset.cpus.partition member
show
w x/batch/cpuset.cpus.exclusive ""
w x/cpuset.cpus.exclusive ""
show
kill $sp
w cgroup.procs $sp
note "--- alt order: exclusive before cpus in fresh group"
mkdir $CG/x/web
w x/web/cpuset.cpus.exclusive 1-3
w x/web/cpuset.cpus.partition root
show
note "--- 2-level chain: x/y/web"
w x/web/cpuset.cpus.partition member
rmdir $CG/x/web
w x/cpuset.cpus.exclusive 1-7
mkdir $CG/x/y; w x/y/cpuset.cpus 1-3; w x/cgroup.subtree_control +cpuset; w x/y/cgroup.subtree_control +cpuset
mkdir $CG/x/y/z; w x/y/z/cpuset.cpus 1-2
w x/y/z/cpuset.cpus.exclusive 1-2
w x/y/cpuset.cpus.exclusive 1-3
w x/y/z/cpuset.cpus.exclusive 1-2
w x/y/z/cpuset.cpus.partition root
note "z: $(cat $CG/x/y/z/cpuset.cpus.partition) eff $(cat $CG/x/y/z/cpuset.cpus.effective)"
note "y: eff $(cat $CG/x/y/cpuset.cpus.effective)"
