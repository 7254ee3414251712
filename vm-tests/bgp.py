# nodes: cp1 cp2 cp3 router
# BGP mode: three control-plane nodes announce the VIP by BGP
# through BIRD (vip.mode = "bgp", `vipproxy bird`, vipproxy-announce.service)
# to a router running BIRD with ECMP (merge paths, L4 multipath hash). The
# client sits behind the router on a segment of its own: a network
# namespace inside the router VM, routed by the router's kernel (a fifth VM
# would cost a minute of boot under TCG and prove nothing more). Each node's
# vipproxy balances over its own apiserver stand-in only, so the name that
# answers is the node that ECMP chose.
import time

VIP4 = "203.0.113.10"  # routed, in no node's subnet: only BGP brings clients to it
PORT = 6443
CPS = {"cp1": cp1, "cp2": cp2, "cp3": cp3}
IP = {"cp1": "192.168.1.1", "cp2": "192.168.1.2", "cp3": "192.168.1.3", "router": "192.168.1.4"}
CLIENT_NET, CLIENT_GW, CLIENT_IP = "198.51.100.0/24", "198.51.100.1", "198.51.100.2"
URL = f"https://{VIP4}:{PORT}"
# The documented bound (docs/bgp.md): vipproxy announce withdraws after 2
# failed checks 500 ms apart, BIRD at once; 3 s leaves room for a starved
# TCG guest.
WITHDRAW_BOUND = 3.0


def node_config(name):
    return f"""
[vip]
mode = "bgp"
addresses = ["{VIP4}"]
port = {PORT}

[health]
type = "tcp"
interval = "2s"
timeout = "2s"

[timeouts]
dial = "1s"
drain = "5s"

{NETWORK_UNDER_RUN}

[bgp]
local_as = 65001
router_id = "{IP[name]}"
peers = [{{name = "router", address = "{IP['router']}", as = 65000}}]

[[backend]]
name = "{name}"
address = "{IP[name]}:{PORT}"
"""


ROUTER_BIRD = f"""
log syslog all;
router id {IP['router']};
protocol device {{
}}
# ECMP: the three nodes' routes become one multipath route in the kernel.
protocol kernel {{
    ipv4 {{ export all; }};
    merge paths yes;
}}
template bgp node {{
    local as 65000;
    connect delay time 1;
    connect retry time 2;
    ipv4 {{ import all; export none; }};
}}
""" + "".join(f"protocol bgp {n} from node {{ neighbor {IP[n]} as 65001; }}\n" for n in CPS)

# One mTLS request at a time from the client, each on a new connection;
# a line per request: <start epoch> <end epoch> <curl exit> <answering node>
REQLOOP = r"""#!/bin/bash
log=$1
while :; do
    t=$(date +%s.%N)
    name=$(CURL --connect-timeout 5 --max-time 10 URL/name 2>/dev/null)
    rc=$?
    echo "$t $(date +%s.%N) $rc ${name:-none}" >> "$log"
    sleep 0.2
done
"""

# Records on the router's clock when a node's next hop leaves the VIP's
# route (<gone epoch>) and when it comes back: "<lo> <hi>", the last look
# that did not see it and the end of the first that did. Under TCG one
# look (ip, grep) takes a few tenths of a second, so the return lies
# anywhere in that window: a request cut by it may end before <hi>.
NEXTHOP_WATCH = r"""#!/bin/bash
via="via $1 "
until ! ip route show VIP | grep -q "$via"; do sleep 0.02; done
date +%s.%N > /run/nexthop.gone
lo=$(date +%s.%N)
until ip route show VIP | grep -q "$via"; do sleep 0.05; lo=$(date +%s.%N); done
echo "$lo $(date +%s.%N)" > /run/nexthop.back
"""


# Debian's bird.service runs /usr/lib/bird/prepare-environment (mkdir,
# chown ...) through the manager's PATH, which these NixOS-shaped nodes keep
# to systemd's own tools (vm-tests/README.md); a Debian manager has
# /usr/bin there. On NixOS the module's BIRD unit names its store paths.
BIRD_PATH = [
    "mkdir -p /run/systemd/system/bird.service.d",
    "printf '[Service]\\nEnvironment=PATH=/usr/sbin:/usr/bin:/sbin:/bin\\n' > /run/systemd/system/bird.service.d/50-debian-path.conf",
    "systemctl unmask bird.service",
    "systemctl daemon-reload",
]


def next_hops():
    """The nodes the router's kernel sends the VIP to."""
    out = router.succeed(f"ip route show {VIP4}")
    return sorted(n for n in CPS if f"via {IP[n]} " in out)


def client_requests(count):
    """count requests from the client netns; how often each node answered."""
    names = netns_requests(router, "client", URL, count)
    return {n: names.count(n) for n in sorted(set(names))}


def loop_rows():
    rows = []
    for line in router.succeed("cat /run/reqloop.log").splitlines():
        p = line.split()
        if len(p) == 4:
            rows.append((float(p[0]), float(p[1]), int(p[2]), p[3]))
    return rows


def now(node):
    return float(node.succeed("date +%s.%N"))


def back_window():
    """When the watched next hop came back: (lo, hi) on the router's clock."""
    lo, hi = router.succeed("cat /run/nexthop.back").split()
    return float(lo), float(hi)


start_all()

with subtest("boot: three nodes and the router on VLAN 1"):
    for m in machines:
        m.wait_for_unit("multi-user.target")
    for name, m in {**CPS, "router": router}.items():
        m.wait_until_succeeds(f"ip -4 addr show dev eth1 | grep -q {IP[name]}/24", timeout=60)

with subtest("router: BIRD with ECMP, the client behind it"):
    write_file(router, "/etc/bird/bird.conf", ROUTER_BIRD)
    router.succeed(
        "sysctl -qw net.ipv4.ip_forward=1",
        # Hash on ports too: one client's connections spread over the nodes.
        "sysctl -qw net.ipv4.fib_multipath_hash_policy=1",
        "ip netns add client",
        "ip link add cl0 type veth peer name eth0 netns client",
        f"ip addr add {CLIENT_GW}/24 dev cl0",
        "ip link set cl0 up",
        "ip -n client link set lo up",
        f"ip -n client addr add {CLIENT_IP}/24 dev eth0",
        "ip -n client link set eth0 up",
        f"ip -n client route add default via {CLIENT_GW}",
        *BIRD_PATH,
        "systemctl start bird.service",
    )

with subtest("nodes: apiserver stand-in, vipproxy in bgp mode, BIRD from vipproxy bird, vipproxy-announce"):
    cp1.succeed(f"vipproxy-apiserver pki --dir {PKI} --hosts {','.join(IP[n] for n in CPS)},{VIP4},kubernetes")
    cp1.succeed(f"chmod 0644 {PKI}/*")  # test keys: the DynamicUser= daemon reads them
    copy_dir(cp1, [cp2, cp3, router], PKI)
    for name, m in CPS.items():
        write_file(m, CONF, node_config(name))
        # Replies to the client go back through the router: the node's
        # default route, in the uplink's own .network as an operator's
        # gateway is (a route added by hand is foreign to networkd, which
        # would delete it, and network apply refuses to let it).
        m.succeed(
            "mkdir -p /etc/systemd/network/10-eth1.network.d",
            f"printf '[Network]\\nGateway={IP['router']}\\n' > /etc/systemd/network/10-eth1.network.d/50-gateway.conf",
            "networkctl reload",
            "networkctl reconfigure eth1",
        )
        m.wait_until_succeeds(f"ip route show default | grep -q 'via {IP['router']} dev eth1'", timeout=30)
        m.succeed(
            f"vipproxy check --quiet --config {CONF}",
            f"{RUN} --unit=apiserver vipproxy-apiserver --listen {IP[name]}:{PORT} --name {name}"
            f" --cert {PKI}/server.pem --key {PKI}/server-key.pem --client-ca {PKI}/ca.pem",
            f"vipproxy network apply --config {CONF}",
            f"vipproxy units write --config {CONF}",
            "systemctl daemon-reload",
            "systemctl start vipproxy.socket vipproxy.service",
            f"vipproxy bird write --config {CONF}",
            "echo 'include \"/etc/bird/vipproxy.conf\";' >> /etc/bird/bird.conf",
            *BIRD_PATH,
            "systemctl start bird.service",
        )
    for m in CPS.values():
        m.wait_for_unit("vipproxy.service", timeout=60)
        # The real unit: DynamicUser with CAP_NET_ADMIN and /dev/net/tun only.
        m.succeed("systemctl start vipproxy-announce.service")

with subtest("all three nodes announce: the router has a three-way ECMP route"):
    t0 = time.monotonic()
    router.wait_until_succeeds(
        f"ip route show {VIP4} | grep -c 'nexthop via' | grep -qx 3", timeout=180
    )
    print(f"RESULT announced: {VIP4} via {next_hops()} ({time.monotonic() - t0:.1f} s after the announcers started)")
    for name, m in CPS.items():
        assert "vipproxy_bgp_announced 1" in m.succeed("curl -sf http://127.0.0.1:6449/metrics"), f"{name}: vipproxy_bgp_announced is not 1"
        out = m.succeed("birdc show protocols vipproxy_router")
        assert "Established" in out, f"{name}: BGP session not established:\n{out}"

with subtest("the client reaches the VIP through all three nodes"):
    answered = client_requests(30)
    print(f"RESULT ECMP: 30 requests from the client answered by {answered}")
    assert set(answered) == set(CPS), f"not every node answered: {answered}"

with subtest("no node answers ARP for the VIP on the uplink"):
    out = router.execute(f"arping -c 1 -I eth1 {IP['cp1']} 2>&1", timeout=30)[1]
    assert "bytes from" in out or "Unicast reply" in out, f"arping hears no node at all (a broken probe proves nothing):\n{out}"
    out = router.execute(f"arping -c 3 -I eth1 {VIP4} 2>&1", timeout=30)[1]
    assert "Unicast reply" not in out and "bytes from" not in out, f"a node answered ARP for {VIP4}:\n{out}"
    print(f"RESULT ARP: no node answers for {VIP4} on the uplink (arp_ignore=1 on eth1; the VIP is on dummyvip0)")

with subtest("a pod on cp2 reaches the VIP (hairpin), served by its own node"):
    cp2.succeed(
        "sysctl -qw net.ipv4.ip_forward=1",
        *ptp_pod(2, IP["cp2"]),
    )
    names = netns_requests(cp2, "ptp", URL, 10)
    assert names == ["cp2"] * 10, f"pod requests: {names}"
    print("RESULT hairpin: 10/10 requests from a ptp pod on cp2 answered by cp2's own vipproxy")

with subtest("SIGKILL of vipproxy on cp1: withdrawn within the bound, no new connection fails"):
    write_file(router, "/root/reqloop.sh", REQLOOP.replace("CURL", CURL).replace("URL", URL))
    write_file(router, "/root/nexthop-watch.sh", NEXTHOP_WATCH.replace("VIP", VIP4))
    router.succeed("rm -f /run/reqloop.log /run/nexthop.gone /run/nexthop.back")
    router.succeed(f"{RUN} --unit=reqloop ip netns exec client bash /root/reqloop.sh /run/reqloop.log")
    router.succeed(f"{RUN} --unit=nexthop-watch bash /root/nexthop-watch.sh {IP['cp1']}")
    router.sleep(5)
    # No automatic restart for this measurement: "restart it" is a step of its own.
    cp1.succeed(
        "mkdir -p /run/systemd/system/vipproxy.service.d",
        "printf '[Service]\\nRestart=no\\n' > /run/systemd/system/vipproxy.service.d/50-test-norestart.conf",
        "systemctl daemon-reload",
    )
    # The guests' clocks are not one: the kill is timed on cp1's clock (and
    # the withdrawal there, by the announcer's journal), the next hop's end
    # on the router's. On the router's clock the kill fell between
    # router_before and the driver's round trip after it.
    t_a = time.monotonic()
    router_before = now(router)
    killed = float(cp1.succeed("date +%s.%N; systemctl kill --signal=KILL vipproxy.service").split()[0])
    round_trip = time.monotonic() - t_a
    router.wait_until_succeeds("test -s /run/nexthop.gone", timeout=30)
    gone = float(router.succeed("cat /run/nexthop.gone"))
    upper = gone - router_before
    lower = max(0.0, upper - round_trip)
    withdrawn_log = cp1.succeed("journalctl -u vipproxy-announce.service -o short-unix --no-pager | grep 'VIP withdrawn' | tail -1").split()[0]
    on_node = float(withdrawn_log) - killed
    print(f"RESULT SIGKILL to withdrawal: cp1's announcer withdrew {on_node:.2f} s after the kill (cp1's clock); "
          f"the router's kernel dropped cp1's next hop {lower:.2f}-{upper:.2f} s after the kill (router's clock; the range is the driver's round trip)")
    assert on_node <= WITHDRAW_BOUND, f"the announcer withdrew {on_node:.2f} s after the kill (bound {WITHDRAW_BOUND} s)"
    assert lower <= WITHDRAW_BOUND, f"the router dropped the next hop at least {lower:.2f} s after the kill (bound {WITHDRAW_BOUND} s)"
    assert next_hops() == ["cp2", "cp3"], next_hops()
    router.sleep(15)
    after = [r for r in loop_rows() if r[0] > gone]
    failed_after = [r for r in after if r[2] != 0]
    assert len(after) >= 5, f"only {len(after)} requests after the withdrawal"
    print(f"RESULT after the withdrawal: {len(after)} new connections, {len(failed_after)} failed, answered by {sorted(set(r[3] for r in after))}")
    assert not failed_after, f"requests after the withdrawal failed: {failed_after}"
    assert all(r[3] in ("cp2", "cp3") for r in after), after

with subtest("restart: cp1 announced again, its next hop back"):
    cp1.succeed("rm /run/systemd/system/vipproxy.service.d/50-test-norestart.conf", "systemctl daemon-reload")
    restarted = now(router)
    cp1.succeed("systemctl start vipproxy.service")
    router.wait_until_succeeds("test -s /run/nexthop.back", timeout=90)
    back_lo, back = back_window()
    router.sleep(5)
    router.succeed("systemctl stop reqloop")
    rows = loop_rows()
    window = [r for r in rows if r[0] >= router_before]
    fails = [r for r in window if r[2] != 0]
    at_kill = [r for r in fails if r[0] < gone]
    at_return = [r for r in fails if r[0] < back and r[1] > back_lo]
    print(f"RESULT restart: cp1 announced again {back - restarted:.1f} s after systemctl start (router clock); "
          f"loop over kill, withdrawal and return: {len(window)} requests, {len(fails)} failed "
          f"({len(at_kill)} started before the withdrawal, {len(at_return)} in flight when the next hop came back)")
    assert len(fails) == len(at_kill) + len(at_return), f"failures outside the route changes: {fails}"
    assert next_hops() == ["cp1", "cp2", "cp3"], next_hops()
    answered = client_requests(30)
    print(f"RESULT ECMP after the restart: 30 requests answered by {answered}")
    assert set(answered) == set(CPS), answered

with subtest("SIGKILL of vipproxy-announce itself: the link goes with it, BIRD withdraws, systemd restarts it"):
    router.succeed("rm -f /run/nexthop.gone /run/nexthop.back", f"{RUN} --unit=nexthop-watch2 bash /root/nexthop-watch.sh {IP['cp3']}")
    t_a = time.monotonic()
    router_before = now(router)
    cp3.succeed("systemctl kill --signal=KILL vipproxy-announce.service")
    round_trip = time.monotonic() - t_a
    router.wait_until_succeeds("test -s /run/nexthop.gone", timeout=30)
    gone = float(router.succeed("cat /run/nexthop.gone"))
    router.wait_until_succeeds("test -s /run/nexthop.back", timeout=60)
    _, back = back_window()
    upper = gone - router_before
    print(f"RESULT SIGKILL of the announcer: cp3's next hop gone {max(0.0, upper - round_trip):.2f}-{upper:.2f} s after (router's clock), back {back - gone:.1f} s later (Restart=always)")
    assert upper - round_trip <= WITHDRAW_BOUND

with subtest("vipproxy doctor on a healthy bgp node: every check passes, bgp among them"):
    cp2.wait_until_succeeds("curl -sf http://127.0.0.1:6449/metrics | grep -qx 'vipproxy_bgp_announced 1'", timeout=60)
    status, out = cp2.execute(f"vipproxy doctor --config {CONF}", timeout=120)
    print("RESULT doctor on cp2: " + " | ".join(l.strip() for l in out.splitlines() if l.startswith(("PASS bgp", "FAIL", "WARN"))))
    assert status == 0 and "PASS bgp" in out, f"doctor exit {status}:\n{out}"
