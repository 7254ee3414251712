# nodes: cp1
# vipproxy as a good neighbour on a real node, Debian only:
#  1. An ifupdown node (eth1 from /etc/network/interfaces, networkd not
#     running) with a CNI's routing state: Cilium-style `ip rule`s (fwmark
#     0x200/0xf00 lookup 2004) and table 2004, Calico/BIRD-style routes
#     (proto bird, a blackhole), a proto static route via the uplink and a
#     route on a cni0 bridge. `vipproxy-network` start (which starts
#     networkd through Wants=), `networkctl reload`, a restart of
#     vipproxy-network and of systemd-networkd leave `ip rule` and
#     `ip route show table all` (both families) exactly as they were, and
#     networkd manages dummyvip0 and nothing else.
#  2. Upgrades under a local request loop and three watches through the
#     VIP: the unit actions of `nixos-rebuild switch` (package change:
#     restart of vipproxy.service alone, the socket untouched; config
#     change: reload) and of an `apt` upgrade (restart of vipproxy-network
#     and vipproxy.service): 0 failed, 0 refused; the VIP never leaves
#     dummyvip0; a network restart, a reload and a daemon restart keep the
#     watches (a restart hands them to the next daemon through systemd's
#     file descriptor store, and the journal says how many it resumed).
#     A restart of the socket too is measured.
# The image has ifupdown with networking.service masked (guest/masks): the
# script unmasks it.
import re
from collections import Counter

VIP4 = "192.168.1.100"
VIP6 = "2001:db8:1::100"
NODE = "192.168.1.1"  # the only node is number 1
PEER = "192.168.1.3"  # a gateway that need not exist: routes are only looked at
BACKENDS = {"cp1a": 7443, "cp1b": 8443}
UNITS = "vipproxy-network.service vipproxy.socket vipproxy.service"

# Default paths (/etc/systemd/network, /etc/sysctl.d, the socket drop-in in
# /etc/systemd/system): what a Debian operator has.
CONFIG = f"""
[vip]
addresses = ["{VIP4}", "{VIP6}"]

[network]
uplinks = ["eth1"]

[health]
type = "tcp"
interval = "1s"
""" + "".join(f'\n[[backend]]\nname = "{n}"\naddress = "{NODE}:{p}"\n' for n, p in BACKENDS.items())

INTERFACES = f"""# eth1 by ifupdown, as on a Debian node installed without networkd
auto lo
iface lo inet loopback
auto eth1
iface eth1 inet static
    address {NODE}/24
    gateway 192.168.1.254
iface eth1 inet6 static
    address 2001:db8:1::1/64
    accept_ra 0
"""

# What the CNIs and a routing daemon put on a node (cilium/cilium#18706,
# flatcar/Flatcar#620: networkd removed exactly these).
NEIGHBOURS = neighbour_routes(PEER)


def state():
    return cp1.succeed(ROUTING_STATE)


def assert_unchanged(before, what):
    after = state()
    if after != before:
        # Counted: IPv4 and IPv6 rules print the same line.
        gone = sorted((Counter(before.splitlines()) - Counter(after.splitlines())).elements())
        new = sorted((Counter(after.splitlines()) - Counter(before.splitlines())).elements())
        print(f"RESULT neighbours after {what}: gone {gone}, new {new}")
        raise AssertionError(f"{what} changed the node's rules/routes: gone {gone}, new {new}")
    print(f"RESULT neighbours after {what}: {len(before.splitlines())} rules and routes, all unchanged")


def networkd_links():
    """networkctl's SETUP column by link name."""
    out = cp1.succeed("networkctl list --no-legend --no-pager")
    return {f[1]: f[4] for f in (line.split() for line in out.splitlines()) if len(f) >= 5}


def assert_only_dummy_managed(what):
    links = networkd_links()
    managed = sorted(n for n, setup in links.items() if setup != "unmanaged")
    print(f"RESULT networkd after {what}: manages {managed}; {links}")
    assert managed == ["dummyvip0"], f"after {what} networkd manages {managed}, want dummyvip0 alone: {links}"


def vip_on_dummy():
    cp1.succeed(f"ip -4 addr show dev dummyvip0 | grep -qw {VIP4}/32", f"ip -6 addr show dev dummyvip0 | grep -qw {VIP6}/128")


def vip_gaps():
    """How often the VIP was seen missing by the 0.1 s poller (vipwatch)."""
    return int(cp1.succeed("cat /run/vipwatch.log 2>/dev/null | grep -c missing || true"))


def settled(t1, what):
    """Wait for three requests answered after t1 (a TCG guest on a loaded
    host may take seconds for one) and every watch connected again; on a
    timeout show the logs."""
    try:
        cp1.wait_until_succeeds(f"test $(awk '$1 > {t1} + 0 && $2 == 0' /run/req.log | wc -l) -ge 3", timeout=300)
        cp1.wait_until_succeeds(
            "for i in 1 2 3; do tail -n1 /run/watch$i.log | grep -q connect || exit 1; done", timeout=120
        )
    except Exception:
        print(f"{what}: not settled; request log and watches:")
        print(cp1.execute("tail -n 30 /run/req.log; tail -n 5 /run/watch*.log; systemctl status reqloop vipproxy.service --no-pager | tail -n 30")[1])
        raise


def handed_over(since):
    """The connections the daemon started since `since` resumed (its
    journal line), after the old one handed them over."""
    line = cp1.succeed(f"journalctl -u vipproxy.service --since '{since}' -o cat | grep 'resumed the connections' | tail -n1 || true").strip()
    print(f"journal: {line}")
    for field in line.split():
        if field.startswith("resumed="):
            return int(field.split("=", 1)[1])
    return 0


BUSY_REQUESTS = 60


def busy_then_stop():
    """Stop vipproxy.socket and vipproxy.service while one connection
    through the VIP is busy: curl asks /name BUSY_REQUESTS times at 10 a
    second over one kept-alive connection (~6 s), logging each answer's
    status and the connections opened for it (on stderr: unbuffered, where
    stdout into a file shows nothing until curl exits); the stop starts in
    the same shell once 3 are answered. Returns the answers logged at the
    stop."""
    urls = " ".join([f"-o /dev/null https://{VIP4}:6443/name"] * BUSY_REQUESTS)
    cp1.succeed("rm -f /run/busy.log /run/busy.atstop")
    cp1.succeed(
        f"{RUN} --unit=busy bash -c '{CURL} --rate 10/s -w \"%{{stderr}}%{{http_code}} %{{num_connects}}\\n\" {urls} 2>> /run/busy.log; echo \"exit $?\" >> /run/busy.log'"
        " && for i in $(seq 1200); do [ \"$(grep -c '^200 ' /run/busy.log 2>/dev/null)\" -ge 3 ] && break; sleep 0.1; done"
        " && grep -c '^200 ' /run/busy.log > /run/busy.atstop && systemctl stop vipproxy.socket vipproxy.service",
        timeout=300,
    )
    return int(cp1.succeed("cat /run/busy.atstop").strip())


def busy_result():
    """(answered with 200, connections opened, curl's exit) of busy_start."""
    cp1.wait_until_succeeds("grep -q '^exit ' /run/busy.log", timeout=180)
    lines = cp1.succeed("cat /run/busy.log").splitlines()
    answered = sum(1 for l in lines if l.startswith("200 "))
    connects = sum(int(l.split()[1]) for l in lines if len(l.split()) == 2 and l.split()[1].isdigit())
    code = int(next(l.split()[1] for l in lines if l.startswith("exit ")))
    return answered, connects, code


def watch_ends_between(t0, t1):
    """Watch streams that ended between t0 and t1 with the server's close
    (a refused reconnect, curl exit 7, is not counted)."""
    out = cp1.succeed("cat /run/watch1.log /run/watch2.log /run/watch3.log")
    return sum(1 for l in out.splitlines() if len(l.split()) == 3 and l.split()[1] == "end" and t0 < float(l.split()[0]) <= t1 and l.split()[2] != "7")


def under_load(what, *commands):
    """Run the unit actions under the loop and watches; check the outcome."""
    t0 = float(cp1.succeed("date +%s.%N"))
    c0, e0 = watch_events(cp1)
    gaps0 = vip_gaps()
    for cmd in commands:
        cp1.succeed(cmd, timeout=120)
    settled(float(cp1.succeed("date +%s.%N")), what)
    rows = [l.split() for l in cp1.succeed(f"awk '$1 > {t0}' /run/req.log").splitlines()]
    bad = [r for r in rows if r[1] != "0" or r[2] != "200"]
    refused = [r for r in rows if r[1] == "7"]
    c1, e1 = watch_events(cp1)
    gaps = vip_gaps() - gaps0
    print(f"RESULT {what}: {len(rows)} requests, {len(bad)} failed, {len(refused)} refused; watches closed {e1 - e0}, reconnected {c1 - c0}; VIP missing from dummyvip0 in {gaps} polls")
    assert not refused, f"{what}: refused connections: {refused[:5]}"
    assert not bad, f"{what}: failed requests: {bad[:5]}"
    assert gaps == 0, f"{what}: the VIP left dummyvip0 ({gaps} polls)"
    return e1 - e0


start_all()

with subtest("boot"):
    cp1.wait_for_unit("multi-user.target")
    cp1.succeed("command -v ifup")

with subtest("an ifupdown node: eth1 from /etc/network/interfaces, networkd not running"):
    cp1.succeed(
        "systemctl disable --now systemd-networkd.socket systemd-networkd.service",
        "rm -f /etc/systemd/network/10-eth1.network",
        "ip addr flush dev eth1",
    )
    write_file(cp1, "/etc/network/interfaces", INTERFACES)
    cp1.succeed(
        "rm -f /etc/systemd/system/networking.service",  # the image masks it
        "systemctl daemon-reload",
        "systemctl start networking.service",
    )
    cp1.succeed(f"ip -4 addr show dev eth1 | grep -q {NODE}/24", "ip route show default | grep -q 'dev eth1'")
    cp1.fail("systemctl is-active systemd-networkd.service")

with subtest("the CNI's rules and routes"):
    for cmd in NEIGHBOURS:
        cp1.succeed(cmd)
    before = state()
    for want in ["fwmark 0x200/0xf00 lookup 2004", "proto bird", "blackhole 10.244.0.0/26", "proto static", "dev cni0", "table 2004"]:
        assert want in before, f"{want!r} missing from the set-up state:\n{before}"
    print(f"RESULT neighbours before: {len(before.splitlines())} rules and routes")

with subtest("stand-in apiservers, config, units written"):
    cp1.succeed(f"vipproxy-apiserver pki --dir {PKI} --hosts {NODE},{VIP4},{VIP6}", f"chmod 0644 {PKI}/*")
    start_standins(cp1, NODE, BACKENDS, "10s")
    write_file(cp1, CONF, CONFIG)
    cp1.succeed(f"vipproxy check --config {CONF}", f"vipproxy units write --config {CONF}", "systemctl daemon-reload")

with subtest("1a. start vipproxy-network (it starts networkd): rules and routes unchanged"):
    cp1.succeed("systemctl start vipproxy-network.service", timeout=120)
    cp1.succeed("systemctl is-active systemd-networkd.service")
    vip_on_dummy()
    assert_unchanged(before, "vipproxy-network start")
    assert_only_dummy_managed("vipproxy-network start")

with subtest("1b. networkctl reload: unchanged"):
    cp1.succeed("networkctl reload")
    cp1.sleep(2)
    vip_on_dummy()
    assert_unchanged(before, "networkctl reload")

with subtest("1c. restart vipproxy-network: unchanged, the VIP stays"):
    cp1.succeed("systemctl restart vipproxy-network.service", timeout=120)
    vip_on_dummy()
    assert_unchanged(before, "vipproxy-network restart")
    assert_only_dummy_managed("vipproxy-network restart")

with subtest("1d. restart systemd-networkd: unchanged"):
    cp1.succeed("systemctl restart systemd-networkd.service")
    cp1.wait_until_succeeds("networkctl list --no-legend dummyvip0 | grep -q configured", timeout=30)
    vip_on_dummy()
    assert_unchanged(before, "systemd-networkd restart")
    assert_only_dummy_managed("systemd-networkd restart")

with subtest("2. upgrades under a request loop and three watches through the VIP"):
    cp1.succeed("systemctl start vipproxy.socket vipproxy.service", timeout=120)
    cp1.wait_until_succeeds(f"{CURL} --max-time 10 https://{VIP4}:6443/name", timeout=60)
    # The VIP on dummyvip0, polled every 0.1 s from here on.
    cp1.succeed(
        f"{RUN} --unit=vipwatch bash -c 'while :; do ip -4 addr show dev dummyvip0 2>/dev/null | grep -qw {VIP4} || echo \"$(date +%s.%N) missing\" >> /run/vipwatch.log; sleep 0.1; done'"
    )
    load_start(cp1, VIP4)
    # nixos-rebuild switch, new package: vipproxy.service restarted alone
    # (stopIfChanged = false: the socket is never stopped); networkd
    # restarted only when its files change, which they do not here.
    t0 = cp1.succeed("date '+%Y-%m-%d %H:%M:%S'").strip()
    closed = under_load("nixos-rebuild switch, package change: restart vipproxy.service", "systemctl restart vipproxy.service")
    assert closed == 0, f"a daemon restart hands the watches over, {closed} closed"
    resumed = handed_over(t0)
    assert resumed >= 3, f"the new daemon resumed {resumed} connections, want the 3 watches at least"
    told = cp1.succeed(f"journalctl -u vipproxy.service --since '{t0}' -o cat | grep -E 'job \"|hands its connections' || true").strip()
    print(f"RESULT restart, ExecStop= said: {told}")
    assert 'job "restart"' in told and "hands its connections over" in told, f"ExecStop= did not report the restart: {told!r}"
    print(f"RESULT restart vipproxy.service: {resumed} connections handed over and resumed")
    # nixos-rebuild switch, settings change: reloadTriggers reload the daemon.
    cp1.succeed(f"sed -i 's/interval = \"1s\"/interval = \"2s\"/' {CONF}")
    closed = under_load("config change: systemctl reload vipproxy.service", "systemctl reload vipproxy.service")
    assert closed == 0, f"a reload keeps the watches, {closed} closed"
    closed = under_load("vipproxy-network restart alone", "systemctl restart vipproxy-network.service")
    assert closed == 0, f"a network restart keeps the watches, {closed} closed"
    # apt (dh_installsystemd, debhelper compat >= 10): postinst restarts the
    # package's units; vipproxy.socket's file changes only with the VIP, so
    # the package leaves it running (dh_installsystemd --no-stop-on-upgrade
    # vipproxy.socket, docs/operations.md#upgrades).
    closed = under_load("apt upgrade: systemctl restart vipproxy-network.service vipproxy.service",
                        "systemctl restart vipproxy-network.service vipproxy.service")
    assert closed == 0, f"apt's restart hands the watches over, {closed} closed"
    # Restarting the socket too closes the listener: measured, not asserted.
    t0 = float(cp1.succeed("date +%s.%N"))
    cp1.succeed(f"systemctl restart {UNITS}", timeout=120)
    settled(float(cp1.succeed("date +%s.%N")), "restart of all three units")
    rows = [l.split() for l in cp1.succeed(f"awk '$1 > {t0}' /run/req.log").splitlines()]
    bad = [r for r in rows if r[1] != "0" or r[2] != "200"]
    print(f"RESULT restart of all three units (the socket too): {len(rows)} requests, {len(bad)} failed ({sorted({r[1] for r in bad})} curl exits), {len([r for r in bad if r[1] == '7'])} refused")
    # What switch-to-configuration did before stopIfChanged = false: stop
    # the socket and the service, activate, start the socket: measured. A
    # stop empties systemd's file descriptor store, so the daemon drains:
    # ExecStop=+ (`vipproxy prestop`, as root) asks systemd for the job and
    # tells the daemon, which the daemon's dynamic user could not ask itself
    # (the bus call below, from a user as sandboxed as the daemon). Asserted:
    # a busy stream (a request every 0.1 s on one kept-alive connection)
    # finishes during the drain, and the idle watches are closed.
    bus = cp1.execute(
        f"{RUN} --wait --quiet -p DynamicUser=yes -p PrivateUsers=yes -p ProtectSystem=strict"
        " busctl --system call org.freedesktop.systemd1 /org/freedesktop/systemd1 org.freedesktop.systemd1.Manager ListJobs 2>&1"
    )
    print(f"RESULT system bus from a sandboxed dynamic user: exit {bus[0]}: {bus[1].strip()[:200]}; dbus: {cp1.execute('systemctl is-active dbus.socket dbus.service')[1].split()}")
    t0 = float(cp1.succeed("date +%s.%N"))
    since = cp1.succeed("date '+%Y-%m-%d %H:%M:%S'").strip()
    at_stop = busy_then_stop()
    t_stopped = float(cp1.succeed("date +%s.%N"))
    cp1.succeed("sleep 2", "systemctl start vipproxy.socket", timeout=120)
    journal = cp1.succeed(f"journalctl -u vipproxy.service --since '{since}' -o cat")
    stop = [l for l in journal.splitlines() if re.search("prestop|job|connections drain|drained|drain timeout|closed idle|handed connections over|handing", l)]
    print("RESULT systemctl stop, the journal:\n  " + "\n  ".join(stop))
    assert 'job "stop"' in journal and "the daemon drains its connections" in journal, f"ExecStop= did not report a stop job: {stop}"
    assert "connections drain: they are not handed over" in journal and re.search("(?m)^drained ", journal), f"a stop did not drain: {stop}"
    assert "handing connections over" not in journal and "drain timeout" not in journal, f"a stop handed over or timed out: {stop}"
    answered, connects, code = busy_result()
    idle_closed = watch_ends_between(t0, t_stopped)
    print(f"RESULT systemctl stop drains: the busy stream {at_stop} answered when the stop began, {answered}/{BUSY_REQUESTS} in all over {connects} connection(s), curl exit {code}; idle watches closed by the drain: {idle_closed}")
    assert at_stop < BUSY_REQUESTS, f"the busy stream had ended ({at_stop} answered) before the stop"
    assert code == 0 and answered == BUSY_REQUESTS and connects == 1, f"the busy stream was cut: {answered} answered, {connects} connections, exit {code}"
    assert idle_closed >= 1 and "draining: closed idle connections" in journal, f"the drain closed {idle_closed} idle watches"
    settled(float(cp1.succeed("date +%s.%N")), "switch with stopIfChanged = true")
    rows = [l.split() for l in cp1.succeed(f"awk '$1 > {t0}' /run/req.log").splitlines()]
    bad = [r for r in rows if r[1] != "0" or r[2] != "200"]
    print(f"RESULT switch with stopIfChanged = true (socket stopped, drain, 2 s activation, socket started): {len(rows)} requests, {len(bad)} failed, {len([r for r in bad if r[1] == '7'])} refused")
    assert_unchanged(before, "the upgrades")
    cp1.succeed("systemctl stop reqloop watch1 watch2 watch3 vipwatch")
