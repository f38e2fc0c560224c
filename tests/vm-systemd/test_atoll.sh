# shellcheck shell=sh
# The atoll binary from the share runs in the guest: --version, and
# `atoll topology` sees 8 CPUs in 2 NUMA nodes.
# shellcheck source=tests/vm-systemd/sdlib.sh
. "$VMT_DIR/sdlib.sh"

command -v "$ATOLL" >/dev/null || fail "no $ATOLL in PATH ($PATH)"
ver=$("$ATOLL" --version 2>&1) || fail "atoll --version: $ver"
note "$(command -v "$ATOLL"): $ver"
topo=$(timeout "$CMD_TIMEOUT" "$ATOLL" topology 2>&1) || fail "atoll topology: $topo"
note "$(echo "$topo" | head -n 1)"
json=$(timeout "$CMD_TIMEOUT" "$ATOLL" topology --json) || fail "atoll topology --json failed"
assert_eq "$(echo "$json" | jq '.cpus | length')" 8 "CPUs in atoll topology --json"
assert_eq "$(echo "$json" | jq '.nodes | length')" 2 "NUMA nodes in atoll topology --json"
assert_eq "$(echo "$json" | jq -r '.cpus["5"].node')" 1 "node of CPU 5 in atoll topology --json"
assert_eq "$(echo "$json" | jq -r '.nodes[1].cpus')" 4-7 "CPUs of node 1 in atoll topology --json"
