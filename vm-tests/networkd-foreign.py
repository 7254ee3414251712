# nodes: cp1
# First do no harm beside the operator's own systemd-networkd (Debian only):
# eth1 managed by a netplan-style .network file in /run/systemd/network,
# networkd.conf and its drop-ins at their defaults (ManageForeign* yes),
# and a CNI's and a routing daemon's state on the node: Cilium-style
# `ip rule`s (fwmark 0x200/0xf00 lookup 2004) and table 2004, BIRD routes
# via eth1 and a blackhole (proto bird), a proto static route via eth1 and
# a route on a cni0 bridge.
#  1. `systemctl start vipproxy-network` fails: `network apply` refuses
#     before reloading networkd, its journal names each rule and route at
#     risk and the networkd.conf.d drop-in that spares them; `doctor` FAILs
#     with that fix. 0 rules and routes lost.
#  2. With that drop-in and the networkd restart the fix names (its own
#     loss measured, the routes then added again as BIRD would), the start
#     succeeds, dummyvip0 holds the VIPs, `networkctl reload` and a restart
#     of vipproxy-network follow: 0 lost; `doctor` passes the check.
#  3. The control: without the drop-in and with
#     network.allow_foreign_cleanup = true, apply proceeds and networkd
#     deletes the rules and routes (counted): what 1 prevented.
from collections import Counter

VIP4 = "192.168.1.100"
VIP6 = "2001:db8:1::100"
NODE = "192.168.1.1"
PEER = "192.168.1.3"  # a gateway that need not exist: routes are only looked at
NETPLAN = "/run/systemd/network/10-netplan-eth1.network"
FIX = "/etc/systemd/networkd.conf.d/60-foreign.conf"

CONFIG = f"""
[vip]
addresses = ["{VIP4}", "{VIP6}"]

[network]
uplinks = ["eth1"]

[[backend]]
name = "cp1"
address = "{NODE}:7443"
"""

# What netplan writes for a static uplink (netplan generate, netplan 0.106).
NETPLAN_FILE = f"""[Match]
Name=eth1

[Link]
RequiredForOnline=no

[Network]
LinkLocalAddressing=ipv6
Address={NODE}/24
Address=2001:db8:1::1/64
IPv6AcceptRA=no
ConfigureWithoutCarrier=yes
"""

NEIGHBOURS = neighbour_routes(PEER)



def state():
    return cp1.succeed(ROUTING_STATE)


def lost(before):
    return sorted((Counter(before.splitlines()) - Counter(state().splitlines())).elements())


def assert_none_lost(before, what):
    gone = lost(before)
    print(f"RESULT networkd-foreign after {what}: {len(gone)} of {len(before.splitlines())} rules and routes lost {gone}")
    assert not gone, f"{what} lost {gone}"


start_all()

with subtest("boot: eth1 managed by a netplan-style file, networkd.conf at its defaults"):
    cp1.wait_for_unit("multi-user.target")
    cp1.succeed(
        "rm -f /etc/systemd/network/10-eth1.network",
        "rm -rf /etc/systemd/networkd.conf.d /run/systemd/networkd.conf.d /usr/lib/systemd/networkd.conf.d",
        "mkdir -p /run/systemd/network",
    )
    write_file(cp1, NETPLAN, NETPLAN_FILE)
    cp1.succeed("systemctl restart systemd-networkd.service")
    cp1.wait_until_succeeds("networkctl list --no-legend eth1 | grep -q configured", timeout=60)
    print("RESULT networkd.conf: " + cp1.succeed("systemd-analyze cat-config systemd/networkd.conf | grep -v '^#' | grep -v '^$' || true").strip())

with subtest("the CNI's and BIRD's rules and routes"):
    for cmd in NEIGHBOURS:
        cp1.succeed(cmd)
    before = state()
    for want in ["fwmark 0x200/0xf00 lookup 2004", "proto bird", "blackhole 10.244.0.0/26", "proto static", "dev cni0", "table 2004"]:
        assert want in before, f"{want!r} missing from the set-up state:\n{before}"
    write_file(cp1, CONF, CONFIG)
    cp1.succeed(f"vipproxy check --config {CONF}", "systemctl daemon-reload")

with subtest("1. vipproxy-network refuses: nothing lost, the journal and doctor name the fix"):
    cp1.fail("systemctl start vipproxy-network.service", timeout=120)
    journal = cp1.succeed("journalctl -u vipproxy-network.service --no-pager -o cat")
    print(journal)
    for want in ["not reloading systemd-networkd", NETPLAN, "fwmark 0x200/0xf00 lookup 2004", "proto bird", "proto static", FIX, "network.allow_foreign_cleanup"]:
        assert want in journal, f"the refusal does not name {want!r}:\n{journal}"
    assert_none_lost(before, "the refused vipproxy-network start")
    status, out = cp1.execute(f"vipproxy doctor --config {CONF} --only networkd-foreign")
    print(out)
    assert status == 1 and "FAIL networkd-foreign" in out and FIX in out, f"doctor exit {status}:\n{out}"
    cp1.fail("ip link show dummyvip0")

with subtest("2. the fix: the drop-in and a networkd restart; then start, reload, restart: nothing lost"):
    cp1.succeed(
        "mkdir -p /etc/systemd/networkd.conf.d",
        f"printf '[Network]\\nManageForeignRoutingPolicyRules=no\\nManageForeignRoutes=no\\n' > {FIX}",
        "systemctl restart systemd-networkd.service",
    )
    cp1.wait_until_succeeds("networkctl list --no-legend eth1 | grep -q configured", timeout=60)
    # networkd's own restart, which the fix needs (networkd.conf is read at
    # start only), is measured, not asserted: on 2026-12-06 (networkd 252)
    # it dropped the routes via eth1 once; the rules and the blackhole
    # stayed. The routing daemon adds its routes again; so does this.
    gone = lost(before)
    print(f"RESULT networkd-foreign: networkd's own restart with the drop-in: {len(gone)} of {len(before.splitlines())} lost {gone}")
    for cmd in NEIGHBOURS:
        cp1.execute(cmd)
    assert_none_lost(before, "adding them again")
    cp1.succeed("systemctl start vipproxy-network.service", timeout=120)
    cp1.succeed(f"ip -4 addr show dev dummyvip0 | grep -qw {VIP4}/32", f"ip -6 addr show dev dummyvip0 | grep -qw {VIP6}/128")
    assert_none_lost(before, "vipproxy-network start")
    cp1.succeed("networkctl reload")
    cp1.wait_until_succeeds("networkctl list --no-legend dummyvip0 | grep -q configured", timeout=60)
    assert_none_lost(before, "networkctl reload")
    cp1.succeed("systemctl restart vipproxy-network.service", timeout=120)
    assert_none_lost(before, "vipproxy-network restart")
    out = cp1.succeed(f"vipproxy doctor --config {CONF} --only networkd-foreign")
    print(out)
    assert "PASS networkd-foreign" in out and FIX in out, out

with subtest("3. control: accepted by network.allow_foreign_cleanup, networkd deletes them"):
    cp1.succeed(f"vipproxy network remove --config {CONF}", "systemctl stop vipproxy-network.service", f"rm {FIX}")
    cp1.succeed("systemctl restart systemd-networkd.service")
    cp1.wait_until_succeeds("networkctl list --no-legend eth1 | grep -q configured", timeout=60)
    for cmd in NEIGHBOURS:  # networkd's start at yes may have taken some already
        cp1.execute(cmd)
    before = state()
    write_file(cp1, CONF, CONFIG.replace('uplinks = ["eth1"]', 'uplinks = ["eth1"]\nallow_foreign_cleanup = true'))
    cp1.succeed("systemctl start vipproxy-network.service", timeout=120)
    cp1.wait_until_succeeds("networkctl list --no-legend dummyvip0 | grep -q configured", timeout=60)
    journal = cp1.succeed("journalctl -u vipproxy-network.service --no-pager -o cat | tail -n 5")
    assert "network.allow_foreign_cleanup = true: networkd deletes" in journal, journal
    gone = lost(before)
    print(f"RESULT networkd-foreign control (allow_foreign_cleanup = true, no drop-in): {len(gone)} of {len(before.splitlines())} rules and routes lost {gone}")
    assert gone, "with ManageForeign* at yes networkd deleted nothing: the test would prove nothing"
