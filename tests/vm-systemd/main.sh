#!/bin/bash
# Guest side of the systemd VM rig: /mnt/atoll/tests/main.sh, run by the
# image's /usr/local/sbin/atoll-vmtest (atoll-vmtest.service, output on the
# serial console) once multi-user.target is reached. Copied into the 9p
# share with the other tests by scripts/vm/systemd/run.sh, so it can change
# without a new image.
#
# Runs tests/vm/runner.sh over the tests named by atoll.test= on the kernel
# command line ("all" = VMT_ORDER below), each test_<name>.sh in its own
# /bin/sh with tests/vm/lib.sh loaded; they may load sdlib.sh (systemd
# helpers). Afterwards it leaves the journal and systemd-analyze's view in
# /mnt/atoll/out/ for the host. The unit powers the guest off after this.
share=/mnt/atoll
export ATOLL_SHARE=$share
export PATH="$share/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
export VMT_DIR=$share/tests
export VMT_STATE=/run/vmtest
# The order "all" runs in.
export VMT_ORDER="boot cgroup nginx postgres units atoll driver deb service reload netisland netv2 svckill svcstop bound"
mkdir -p "$share/out" "$VMT_STATE"

spec=$(sed -n 's/.*atoll\.test=\([^ ]*\).*/\1/p' /proc/cmdline)
echo "vm-init: $(systemctl --version | head -n 1), kernel $(uname -r), $(nproc --all) CPUs, up $(cut -d' ' -f1 /proc/uptime)s"
echo "vm-init: $(systemd-analyze time 2>/dev/null | head -n 1)"
sh "$VMT_DIR/runner.sh" "${spec:-all}"

# For the host (scripts/vm/systemd/run.sh points at them).
journalctl -b --no-pager -o short-monotonic >"$share/out/journal.txt" 2>&1
{
    systemd-analyze time
    echo
    systemd-analyze critical-chain atoll-vmtest.service
    echo
    systemd-analyze blame
} >"$share/out/systemd-analyze.txt" 2>&1
