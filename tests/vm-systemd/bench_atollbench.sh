# shellcheck shell=sh
# One of atoll's own benchmarks (`atoll bench NAME`) in the systemd guest
# (cgroup v2, 8 vCPUs): a benchmark, not a test (never part of "all"); it
# fails only if the bench did not run. scripts/vm/bench-systemd.sh boots
# the guest with `atoll.test=atollbench`, `atollbench.name=NAME` and the
# bench's options in `atollbench.args=--secs+20+--loads+10,50` (a plus
# between words: a word may hold commas).
#
# The benches start their own daemons (`atoll daemon --cgroup-root
# atoll-bench-...`), which would take the systemd driver here (systemd
# runs the guest and answers on the bus: `--systemd auto`). The bench runs
# in a mount namespace of its own where a tmpfs hides /run/systemd, so
# its daemons see no systemd and use the plain cgroup2 backend under a
# root of their own, /sys/fs/cgroup/atoll-bench-... (on `netisland`:
# classification by nftables). Nothing outside that namespace sees the
# tmpfs.
#
# Output: the bench's JSON in the share's out/NAME.json (the host driver
# copies it back), its table on the console, each line prefixed
# "ATOLLBENCH ", and the guest's load average before and after.
# shellcheck source=tests/vm-systemd/sdlib.sh
. "$VMT_DIR/sdlib.sh"

name=$(sed -n 's/.*atollbench\.name=\([a-z0-9]*\).*/\1/p' /proc/cmdline)
[ -n "$name" ] || fail "no atollbench.name= on the kernel command line"
args=$(sed -n 's/.*atollbench\.args=\([^ ]*\).*/\1/p' /proc/cmdline | tr '+' ' ')
for p in nft tc ip unshare; do
    command -v "$p" >/dev/null || fail "no $p in the guest image"
done
out=$ATOLL_SHARE/out/$name.json
bin=$(command -v "$ATOLL")
note "atoll bench $name --json $args ($bin, $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg))"
# shellcheck disable=SC2086 # $args: the bench's options, one word each
unshare --mount --propagation private sh -c \
    'mount -t tmpfs tmpfs /run/systemd && exec "$@"' sh \
    "$bin" bench "$name" --json $args >"$out" 2>"$VMT_STATE/atollbench.err" || {
    tr '\r' '\n' <"$VMT_STATE/atollbench.err" | grep -v '^ *$' | tail -n 20 | sed 's/^/  | bench: /'
    fail "atoll bench $name failed"
}
note "guest load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
[ -s "$out" ] || fail "no JSON from atoll bench $name"
# A scenario's report is read back by the scenario (`slo --scenario tiers`).
# shellcheck disable=SC2086 # $args: one word each
scenario=$(printf '%s\n' $args | sed -n '/^--scenario$/{n;p;}')
"$bin" bench "$name" ${scenario:+--scenario "$scenario"} --table "$out" | sed 's/^/ATOLLBENCH /'
