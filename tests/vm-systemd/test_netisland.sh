# shellcheck shell=sh
# A network island on cgroup v2 (issue 17): the packaged daemon (systemd
# driver) gets, by `systemctl reload atoll`, a unit `netu` and a network
# island on the host end of a veth pair the test makes (its peer in a
# namespace of the test's own). atoll writes its HTB tree on the interface
# and classifies the unit's sockets with a rule in its own nftables table
# (`socket cgroupv2 ... meta priority set 1:10`): 20 UDP datagrams sent by
# a process `atoll run` puts in the unit are counted in class 1:10, and 20
# sent by a process outside it in the default class 1:2, with no
# SO_PRIORITY set by anyone. The shipped file put back and reloaded gives
# the interface back as found (the kernel's default root, no class), and
# `systemctl stop atoll` leaves no atoll table in the ruleset.
# shellcheck source=tests/vm-systemd/sdlib.sh
. "$VMT_DIR/sdlib.sh"

command -v nft >/dev/null || fail "no nft in the image (scripts/vm/systemd/packages.txt: nftables)"
[ -x "$PKG_ATOLL" ] || install_debs
[ "$(systemctl is-active atoll.service)" = active ] || systemctl start atoll.service ||
    fail "atoll.service could not be started"
conf=/etc/atoll/atoll.toml
cp "$conf" "$VMT_STATE/atoll.toml.netisland"
ruleset_before=$(nft list ruleset)

host=atlv0h
peer=atlv0p
ns=atlvn0
ip netns add "$ns" || fail "ip netns add $ns"
ip link add "$host" type veth peer name "$peer" || fail "ip link add $host"
ip link set "$peer" netns "$ns"
ip addr add 10.77.0.1/24 dev "$host"
ip link set "$host" up
ip -n "$ns" addr add 10.77.0.2/24 dev "$peer"
ip -n "$ns" link set "$peer" up
ip -n "$ns" link set lo up
qdisc_before=$(tc qdisc show dev "$host")
note "before: $qdisc_before"

island=$(timeout "$CMD_TIMEOUT" "$PKG_ATOLL" status --json | jq -r '.islands[0].name')
if [ -z "$island" ] || [ "$island" = null ]; then fail "no island in atoll status"; fi
printf '\n[unit.netu]\nisland = "%s"\n\n[network.wire]\ninterface = "%s"\nrate_mbit = 100\n\n[network.wire.units.netu]\nshare = 300\n' \
    "$island" "$host" >>"$conf"
out=$(timeout 120 systemctl reload atoll.service 2>&1) || fail "systemctl reload atoll: $out"
wait_for 30 "atoll's HTB root on $host" sh -c "tc qdisc show dev $host | grep -q '^qdisc htb 1: root'"

write_udp_sender "$VMT_STATE/send.sh" 10.77.0.2
in_10=$(class_packets "$host" 1:10)
in_2=$(class_packets "$host" 1:2)
bash "$VMT_STATE/send.sh" || fail "bash /dev/udp outside the unit"
assert_eq "$(($(class_packets "$host" 1:2) - in_2 >= 20))" 1 "datagrams from outside the unit in the default class 1:2"
assert_eq "$(class_packets "$host" 1:10)" "$in_10" "datagrams from outside the unit in class 1:10"

# With the systemd driver the unit's group (a scope) is made when `atoll
# run` starts its first process, and its rule is written at the epoch
# after: the process sends once the rule is in the ruleset.
rm -f "$VMT_STATE/go"
timeout 120 "$PKG_ATOLL" run --unit netu -- bash -c \
    "while [ ! -e $VMT_STATE/go ]; do sleep 0.1; done; bash $VMT_STATE/send.sh" >"$VMT_STATE/netu.log" 2>&1 &
runner=$!
wait_for 60 "a socket cgroupv2 rule in the ruleset" sh -c "nft list ruleset | grep -q 'socket cgroupv2 level'"
nft list ruleset | grep -m 1 'socket cgroupv2' | sed 's/^[[:space:]]*/  | nft: /'
touch "$VMT_STATE/go"
wait "$runner" || fail "atoll run --unit netu: $(cat "$VMT_STATE/netu.log")"
sent=$(($(class_packets "$host" 1:10) - in_10))
if [ "$sent" -lt 20 ]; then
    nft list ruleset | sed 's/^/  | nft: /'
    tc -s class show dev "$host" | sed 's/^/  | tc: /'
    timeout "$CMD_TIMEOUT" "$PKG_ATOLL" status | grep -i -A3 classif | sed 's/^/  | status: /'
    fail "only $sent of 20 datagrams from unit netu in class 1:10"
fi
note "20 datagrams from unit netu in class 1:10 ($sent packets counted)"

cp "$VMT_STATE/atoll.toml.netisland" "$conf"
out=$(timeout 120 systemctl reload atoll.service 2>&1) || fail "systemctl reload atoll (shipped file): $out"
wait_for 30 "$host given back" sh -c "[ \"\$(tc qdisc show dev $host)\" = \"$qdisc_before\" ]"
assert_eq "$(tc class show dev "$host" | wc -l)" 0 "classes left on $host"
systemctl stop atoll.service || fail "systemctl stop atoll"
assert_eq "$(nft list ruleset)" "$ruleset_before" "the ruleset after atoll stopped"
ip link del "$host"
ip netns del "$ns"
