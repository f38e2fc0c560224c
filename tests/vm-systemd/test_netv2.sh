# shellcheck shell=sh
# A network island with the plain cgroup2 backend (issue 17): the packaged
# daemon runs as atoll.service with a drop-in in /run (removed at the end)
# for `--backend cgroup2 --systemd off`, so it builds its own hierarchy in
# the subtree systemd delegates to the unit (Delegate=,
# system.slice/atoll.service/managed) and no systemd driver is involved
# (unlike test_netisland.sh, where the unit is a scope systemd made). Its
# config has an island `net`, a unit `netu` and a network island on the
# host end of a veth pair the test makes (its peer in a namespace of the
# test's own). atoll writes its HTB tree on the interface and classifies the
# unit's group, managed/net/netu, with a rule in its own nftables table
# (`socket cgroupv2 level 5 "system.slice/atoll.service/managed/net/netu"
# meta priority set 1:10`): 20 UDP datagrams sent by a process outside the
# unit are counted in the default class 1:2 and none in 1:10; 20 sent by a
# process `atoll run` put in the unit (its /proc/self/cgroup says so) are
# counted in 1:10, with no SO_PRIORITY set by anyone. `systemctl stop
# atoll` gives everything back as found: the interface (`ip link show`),
# its qdiscs, classes and filters, the ruleset, and the cgroup tree (no
# directory left below atoll.service, none added or removed elsewhere).
# shellcheck source=tests/vm-systemd/sdlib.sh
. "$VMT_DIR/sdlib.sh"

command -v nft >/dev/null || fail "no nft in the image (scripts/vm/systemd/packages.txt: nftables)"
[ -x "$PKG_ATOLL" ] || install_debs
systemctl stop atoll.service 2>/dev/null

host=atlv2h
peer=atlv2p
ns=atlvn2
conf=/etc/atoll/netv2.toml
dropin=/run/systemd/system/atoll.service.d
# cleanup: whatever the test made, also when it fails half-way (the tests
# after this one start atoll.service with the shipped command line).
cleanup() {
    systemctl stop atoll.service 2>/dev/null
    rm -f "$dropin/netv2.conf" "$conf"
    systemctl daemon-reload
    ip link del "$host" 2>/dev/null
    ip netns del "$ns" 2>/dev/null
}
trap cleanup EXIT
trap 'exit 143' TERM

# cgroup_tree: every cgroup directory but those of other services, which
# systemd may start and stop meanwhile (atoll.service's is checked apart).
cgroup_tree() { find "$CG" -type d | grep -v "^$CG/system.slice/." | sort; }
cgroup_tree >"$VMT_STATE/netv2.cgroups.before"
ruleset_before=$(nft list ruleset)

ip netns add "$ns" || fail "ip netns add $ns"
ip link add "$host" type veth peer name "$peer" || fail "ip link add $host"
ip link set "$peer" netns "$ns"
# The counts below are exact, so the host end sends nothing but the test's
# datagrams: no IPv6 (router solicitations, MLD) and permanent neighbour
# entries on both ends, so neither side sends an ARP request or re-probe
# and the host end no ARP reply (the peer answers each datagram to its
# closed port with an ICMP error, for which it needs the host's address;
# any such packet goes to the default class 1:2 like all unclassified).
sysctl -qw "net.ipv6.conf.$host.disable_ipv6=1" || fail "disable IPv6 on $host"
ip addr add 10.78.0.1/24 dev "$host"
ip link set "$host" up
ip -n "$ns" addr add 10.78.0.2/24 dev "$peer"
ip -n "$ns" link set "$peer" up
ip -n "$ns" link set lo up
peer_mac=$(ip -n "$ns" -o link show dev "$peer" | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')
host_mac=$(ip -o link show dev "$host" | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')
if [ -z "$peer_mac" ] || [ -z "$host_mac" ]; then fail "no MAC address on $peer or $host"; fi
ip neigh replace 10.78.0.2 lladdr "$peer_mac" dev "$host" nud permanent || fail "ip neigh replace 10.78.0.2"
ip -n "$ns" neigh replace 10.78.0.1 lladdr "$host_mac" dev "$peer" nud permanent ||
    fail "ip -n $ns neigh replace 10.78.0.1"
# iface_view: what atoll must give back on the interface.
iface_view() {
    ip link show dev "$host" | sed 's/ state [A-Z]* / /'
    tc qdisc show dev "$host"
    tc class show dev "$host"
    tc filter show dev "$host"
}
iface_view >"$VMT_STATE/netv2.iface.before"
note "before: $(tc qdisc show dev "$host")"

mkdir -p /etc/atoll
cat >"$conf" <<EOF
[host]
cpus = "0"

[island.net]
cpus = "1-3"
policy = "fair"

[unit.netu]
island = "net"

[network.wire]
interface = "$host"
rate_mbit = 100

[network.wire.units.netu]
share = 300
EOF
mkdir -p "$dropin"
cat >"$dropin/netv2.conf" <<EOF
[Service]
ExecStart=
ExecStart=/usr/bin/atoll daemon --config $conf --backend cgroup2 --systemd off
EOF
systemctl daemon-reload
timeout 120 systemctl start atoll.service || {
    systemctl status --no-pager atoll.service 2>&1 | tail -n 20 | sed 's/^/  | /'
    fail "systemctl start atoll (--backend cgroup2 --systemd off) failed"
}
assert_active atoll.service

json=$(timeout "$CMD_TIMEOUT" "$PKG_ATOLL" status --json) || fail "atoll status --json"
assert_eq "$(echo "$json" | jq -r .backend)" cgroup2 "status backend"
assert_eq "$(echo "$json" | jq -r '.service_manager // "none"')" none "status service_manager (no systemd driver)"
svc_cg=$(cg_path atoll.service)
group=$svc_cg/managed/net/netu
[ -d "$group" ] || {
    find "$svc_cg" -type d | sed 's/^/  | cgroup: /'
    fail "no group $group for unit netu in atoll.service's delegated subtree"
}
rel=${group#"$CG"/}
level=$(echo "$rel" | awk -F/ '{ print NF }')
wait_for 30 "atoll's HTB root on $host" sh -c "tc qdisc show dev $host | grep -q '^qdisc htb 1: root'"
# The unit's group exists from the start: its rule comes with the first
# epochs, before any process is in it.
wait_for 60 "the rule for $rel in the ruleset" sh -c "nft list ruleset | grep -qF 'socket cgroupv2 level $level \"$rel\"'"
nft list ruleset | grep -m 1 'socket cgroupv2' | sed 's/^[[:space:]]*/  | nft: /'

write_udp_sender "$VMT_STATE/netv2-send.sh" 10.78.0.2
in_10=$(class_packets "$host" 1:10)
in_2=$(class_packets "$host" 1:2)
bash "$VMT_STATE/netv2-send.sh" || fail "bash /dev/udp outside the unit"
out_2=$(($(class_packets "$host" 1:2) - in_2))
assert_eq "$out_2" 20 "datagrams from outside the unit in the default class 1:2"
assert_eq "$(class_packets "$host" 1:10)" "$in_10" "datagrams from outside the unit in class 1:10"
note "20 datagrams from outside unit netu in the default class 1:2 ($out_2 packets counted), none in 1:10"

in_2=$(class_packets "$host" 1:2)
timeout 120 "$PKG_ATOLL" run --unit netu -- bash -c \
    "cat /proc/self/cgroup >$VMT_STATE/netv2.cg; bash $VMT_STATE/netv2-send.sh" >"$VMT_STATE/netv2.log" 2>&1 ||
    fail "atoll run --unit netu: $(cat "$VMT_STATE/netv2.log")"
assert_eq "$(cat "$VMT_STATE/netv2.cg")" "0::/$rel" "the cgroup of the process atoll run started in unit netu"
sent=$(($(class_packets "$host" 1:10) - in_10))
if [ "$sent" -lt 20 ]; then
    nft list ruleset | sed 's/^/  | nft: /'
    tc -s class show dev "$host" | sed 's/^/  | tc: /'
    timeout "$CMD_TIMEOUT" "$PKG_ATOLL" status | grep -i -A3 classif | sed 's/^/  | status: /'
    fail "only $sent of 20 datagrams from unit netu in class 1:10"
fi
assert_eq "$(class_packets "$host" 1:2)" "$in_2" "datagrams from unit netu in the default class 1:2"
note "20 datagrams from unit netu in class 1:10 ($sent packets counted), none in 1:2"

timeout 120 systemctl stop atoll.service || fail "systemctl stop atoll"
iface_view >"$VMT_STATE/netv2.iface.after"
if ! cmp -s "$VMT_STATE/netv2.iface.before" "$VMT_STATE/netv2.iface.after"; then
    diff "$VMT_STATE/netv2.iface.before" "$VMT_STATE/netv2.iface.after" | sed 's/^/  | /'
    fail "$host (link, qdiscs, classes, filters) not as found after atoll stopped"
fi
assert_eq "$(nft list ruleset)" "$ruleset_before" "the ruleset after atoll stopped"
[ ! -d "$svc_cg" ] || {
    find "$svc_cg" -type d | sed 's/^/  | left: /'
    fail "$svc_cg still there after atoll stopped"
}
cgroup_tree >"$VMT_STATE/netv2.cgroups.after"
if ! cmp -s "$VMT_STATE/netv2.cgroups.before" "$VMT_STATE/netv2.cgroups.after"; then
    diff "$VMT_STATE/netv2.cgroups.before" "$VMT_STATE/netv2.cgroups.after" | sed 's/^/  | /'
    fail "the cgroup tree after atoll stopped is not as found"
fi
note "after systemctl stop atoll: $host, its qdiscs, the ruleset and the cgroup tree as found"
