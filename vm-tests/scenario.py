# nodes: client cp1 cp2 cp3
# The ARP and hairpin scenario, NixOS-test style: the same script
# runs under runNixOSTest (vm-tests/scenario.nix) and the Debian harness
# (vm-tests/run.sh). Nodes cp1..cp3 run the stand-in apiserver on their own
# IP, vipproxy on the VIP and keepalived; the client is outside; pods are
# network namespaces inside a node. See vm-tests/README.md for what every
# node must provide.
import json
import os
import re
import time

VIP4 = "192.168.1.100"
VIP6 = "2001:db8:1::100"
PORT = 6443
CPS = {"cp1": cp1, "cp2": cp2, "cp3": cp3}
IP = {"client": "192.168.1.1", "cp1": "192.168.1.2", "cp2": "192.168.1.3", "cp3": "192.168.1.4"}
PRIORITY = {"cp1": 150, "cp2": 120, "cp3": 90}
MAC_RE = re.compile(r"(?:[0-9a-f]{2}:){5}[0-9a-f]{2}", re.I)
# Steps 10 (discovery) and 11 (k0s's ports) test HTTP, JSON and unit
# logic, the same on every architecture; every other step tests what the
# kernel, systemd and keepalived do on the node, which may differ. make
# test's vm-test-ci leaves 10 and 11 to amd64 (vm-tests/ci.sh sets
# VM_SKIP_ARCH_NEUTRAL=1 on the others: under TCG they were 453 s of
# arm64's 971, 2026-12-05); vm-test, vm-test-all and runNixOSTest run them
# everywhere.
ARCH_NEUTRAL_STEPS = os.environ.get("VM_SKIP_ARCH_NEUTRAL") != "1"
# The endpoints each stand-in publishes in its `kubernetes` EndpointSlice
# (step 10): one host:port a line, followed by vipproxy-apiserver.
ENDPOINTS = "/run/apiserver-endpoints"


def vipproxy_config(node, backends):
    """The node config: every path under /run so it also works where /etc
    is generated (NixOS)."""
    lines = [
        "[vip]",
        f'addresses = ["{VIP4}", "{VIP6}"]',
        f"port = {PORT}",
        "",
        "[health]",
        # TCP checks: a stopped apiserver refuses at once, and under TCG a
        # TLS handshake per check and backend would cost a third of a core.
        'type = "tcp"',
        'interval = "2s"',
        'timeout = "2s"',
        "rise = 2",
        "fall = 2",
        "",
        "[timeouts]",
        'dial = "1s"',
        'drain = "5s"',
        "",
        *NETWORK_UNDER_RUN.splitlines(),
        "",
        "[keepalived]",
        'interface = "eth1"',
        "router_id = 51",
        f"priority = {PRIORITY[node]}",
        "advert_int = 1",
        "",
    ]
    for name in backends:
        lines += ["[[backend]]", f'name = "{name}"', f'address = "{IP[name]}:{PORT}"', ""]
    return "\n".join(lines)


def macs_answering(ip, count=3):
    """MACs that answered the client's ARP requests for ip."""
    out = client.execute(f"arping -c {count} -I eth1 {ip} 2>&1", timeout=30)[1]
    return {m.lower() for m in MAC_RE.findall(out)}


def mac_of(node):
    return node.succeed("cat /sys/class/net/eth1/address").strip().lower()


def master():
    """The node holding the VIP on its uplink (the VRRP master)."""
    holders = [n for n, m in CPS.items() if m.execute(f"ip -4 addr show dev eth1 | grep -qw {VIP4}")[0] == 0]
    assert len(holders) == 1, f"expected one VRRP master, VIP on eth1 of {holders}"
    return holders[0]


def vip_held():
    """The nodes whose vipproxy says it holds the VIP (vipproxy_vip_held,
    what the alert on a VIP held by no node or by two sums)."""
    held = f'vipproxy_vip_held{{address="{VIP4}"}} 1'
    return sorted(n for n, m in CPS.items() if held in m.succeed("curl -sS --max-time 20 http://127.0.0.1:6449/metrics"))


def start_apiserver(name, endpoints=False):
    """The stand-in on the node IP; with endpoints it also serves the
    `kubernetes` EndpointSlices listed in ENDPOINTS (step 10)."""
    slices = f" --endpoints-file {ENDPOINTS}" if endpoints else ""
    CPS[name].succeed(
        f"{RUN} --unit=apiserver vipproxy-apiserver --listen {IP[name]}:{PORT} --name {name}"
        f" --cert {PKI}/server.pem --key {PKI}/server-key.pem --client-ca {PKI}/ca.pem{slices}"
    )
    CPS[name].wait_for_open_port(PORT, addr=IP[name], timeout=30)


def add_pods(node, name):
    """Two pods on the node: ptp-style (unnumbered veth, gateway = node IP)
    and calico-style (gateway 169.254.1.1 answered by proxy ARP)."""
    n = name[-1]
    node.succeed(
        # Kubernetes nodes forward and have a default route; proxy ARP for
        # 169.254.1.1 needs both (the route must leave by another interface).
        "sysctl -qw net.ipv4.ip_forward=1",
        "ip route replace default via 192.168.1.1 dev eth1 metric 4000",
        # ptp-style: the pod's only way out is the node's own address.
        *ptp_pod(n, IP[name]),
        f"ip -n ptp -6 addr add fd00:244:{n}::10/128 dev eth0 nodad",
        "ip addr add fe80::1/64 dev vptp nodad",
        "ip -n ptp -6 route add default via fe80::1 dev eth0",
        f"ip -6 route add fd00:244:{n}::10/128 dev vptp",
        # calico-style: a fixed link-local gateway the host answers by proxy ARP.
        "ip netns add calico",
        "ip link add vcali type veth peer name eth0 netns calico",
        "sysctl -qw net.ipv4.conf.vcali.proxy_arp=1 net.ipv4.neigh.vcali.proxy_delay=0",
        "ip link set vcali up",
        "ip -n calico link set lo up",
        f"ip -n calico addr add 10.244.{n}.20/32 dev eth0",
        "ip -n calico link set eth0 up",
        "ip -n calico route add 169.254.1.1 dev eth0 scope link",
        "ip -n calico route add default via 169.254.1.1 dev eth0",
        f"ip route add 10.244.{n}.20/32 dev vcali",
    )


WATCHES = r"""#!/bin/bash
# watches URL: three /watch streams, a second apart (round-robin spreads
# them over the backends); /run/watchN.log gets the lines (each starts with
# the apiserver's name), /run/watchN.rc "<curl exit> <epoch>" when it ends.
for i in 1 2 3; do
    (CURL -N --max-time 600 "$1/watch" > /run/watch$i.log 2>/dev/null; echo "$? $(date +%s.%N)" > /run/watch$i.rc) &
    sleep 1
done
wait
"""


# The request loops of the steps that assert "no request fails" at a
# backend's fault (6, 10, 11; not how fast one resumes, 5; step 7 rides out a
# restart: BACKLOG_WAIT) give each request this long: under TCG, on a CI machine
# running two VM lanes, the client's curl alone has taken over 6 s (a
# request before any fault timed out at 6 s, 2026-12-02), and the in-flight
# window at a fault is as long as a request may last.
PATIENT = {"connect_timeout": 10, "max_time": 20}


def loop_start(url, log, connect_timeout=3, max_time=6, unit="reqloop"):
    """Requests from the client in a transient unit. Short timeouts measure
    failover; long ones let a request wait in the socket's backlog while the
    daemon restarts (what a real client does)."""
    write_reqloop(client)
    client.succeed(f"rm -f {log}", f"{RUN} --unit={unit} bash /root/reqloop.sh {url} {log} {connect_timeout} {max_time} 0.5")
    client.wait_until_succeeds(f"grep -q ' 0 200 ' {log}", timeout=90)  # setup, not a measured figure: a starved TCG host is slow


def loop_stop(log, unit="reqloop"):
    client.succeed(f"systemctl stop {unit}")
    rows = []
    for line in client.succeed(f"cat {log}").splitlines():
        parts = line.split()
        if len(parts) >= 3:
            rows.append((float(parts[0]), int(parts[1]), parts[2], parts[3] if len(parts) > 3 else ""))
    return rows


def failed(rows):
    return [r for r in rows if r[1] != 0 or r[2] != "200"]


def backend_is(name, up):
    """A command that succeeds when the local vipproxy reports backend name up (1) or down (0)."""
    return (
        "curl -sf http://127.0.0.1:6449/metrics | "
        f"grep -Eq '^vipproxy_backend_up[{{][^}}]*\"{name}\"[^}}]*[}}] {up}$'"
    )


def proxy_status(node):
    """The local vipproxy's /status, backends by address."""
    st = json.loads(node.succeed("curl -sf --max-time 20 http://127.0.0.1:6449/status"))
    st["by_addr"] = {b["address"]: b for b in st["backends"]}
    return st


def wait_status(node, cond, what, timeout):
    """Poll /status until cond(status) holds, at most timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        st = proxy_status(node)
        if cond(st):
            return st
        assert time.monotonic() < deadline, f"{what} not seen within {timeout} s: {json.dumps(st['backends'])}"
        node.sleep(0.5)


def now(node):
    return float(node.succeed("date +%s.%N"))


def discovery_events(node, backend, since):
    """The daemon's journal entries about one backend since the epoch since,
    by message (the last of each): fields as journald keeps them, and "at",
    when the daemon sent the entry, in seconds: journald's
    _SOURCE_REALTIME_TIMESTAMP (the datagram's kernel time stamp), not
    __REALTIME_TIMESTAMP (when journald got round to it: 3.3 s later than
    sent for the draining entry of a TCG amd64 run, 2026-12-02, whose drain
    then measured 6.7 s for a grace the daemon kept to 10.03 s)."""
    out = node.succeed(f"journalctl -u vipproxy.service -o json --since @{int(since) - 1} BACKEND={backend}")
    events = {}
    for line in out.splitlines():
        e = json.loads(line)
        e["at"] = int(e.get("_SOURCE_REALTIME_TIMESTAMP", e["__REALTIME_TIMESTAMP"])) / 1e6
        # MESSAGE is the message, then the attributes as " key=value".
        events[re.split(r" [a-z_.]+=", e["MESSAGE"], maxsplit=1)[0]] = e
    return events


def probe_budget(node):
    """How long the VIP survives a probe that fails from now on: keepalived
    gives it up after fall failed probes in a row, every interval seconds
    (vipproxy keepalived renders both: service/keepalived/render.go), so the
    last of them comes (fall - 1) * interval after the first. Rendered
    again: the file keepalived read lives in /run/vipproxy, which systemd
    removes with the service's runtime directory when it stops."""
    conf = node.succeed(f"vipproxy keepalived render --config {CONF}")
    interval = int(re.search(r"^\s*interval (\d+)", conf, re.M).group(1))
    fall = int(re.search(r"^\s*fall (\d+)", conf, re.M).group(1))
    return (fall - 1) * interval


def restart_gap(node, since):
    """Seconds from the old daemon's "stopping" (its /readyz fails from
    then on) to the new one's "serving", from the journal since the epoch
    since, by when each entry was sent (as discovery_events)."""
    out = node.succeed(f"journalctl -u vipproxy.service -o json --since @{int(since) - 1}")
    stopping = serving = None
    for line in out.splitlines():
        e = json.loads(line)
        at = int(e.get("_SOURCE_REALTIME_TIMESTAMP", e["__REALTIME_TIMESTAMP"])) / 1e6
        msg = e.get("MESSAGE", "")
        if stopping is None and msg.startswith("stopping:"):
            stopping = at
        elif stopping is not None and serving is None and msg.startswith("serving "):
            serving = at
    assert stopping is not None and serving is not None, f"no stopping/serving pair in the journal since {since}"
    return serving - stopping


def vrrp_faults(node):
    """How often keepalived on node gave up the VIP because the probe failed."""
    return int(node.succeed("journalctl -u vrrp -o cat | grep -c 'Entering FAULT STATE' || true"))


start_all()

with subtest("boot: four nodes on VLAN 1"):
    for m in [client, cp1, cp2, cp3]:
        m.wait_for_unit("multi-user.target")
    for name, m in CPS.items():
        m.wait_until_succeeds(f"ip -4 addr show dev eth1 | grep -q {IP[name]}/24", timeout=60)
    client.wait_until_succeeds(f"ping -c1 -W1 {IP['cp3']}", timeout=60)
    MAC = {name: mac_of(m) for name, m in CPS.items()}

with subtest("PKI, stand-in apiservers on each node IP, config"):
    cp1.succeed(f"vipproxy-apiserver pki --dir {PKI} --hosts {','.join(IP[n] for n in CPS)},{VIP4},{VIP6},kubernetes")
    cp1.succeed(f"chmod 0644 {PKI}/*")  # test keys: the DynamicUser= daemon reads the client key for health checks
    copy_dir(cp1, [cp2, cp3, client], PKI)
    for name, m in CPS.items():
        write_file(m, CONF, vipproxy_config(name, list(CPS)))
        m.succeed(f"vipproxy check --config {CONF}")
        start_apiserver(name)
    client.succeed(f"{CURL} https://{IP['cp2']}:{PORT}/readyz")

with subtest("1. ARP flux reproduced: VIP on dummyvip0 everywhere, default sysctls"):
    for m in CPS.values():
        m.succeed(
            "ip link add dummyvip0 type dummy", "ip link set dummyvip0 up", f"ip addr add {VIP4}/32 dev dummyvip0"
        )
    answering = macs_answering(VIP4)
    print(f"RESULT ARP flux: {len(answering)} MACs answer for {VIP4} with default sysctls")
    assert len(answering) >= 2, f"expected ARP flux (answers from >= 2 MACs), got {answering}"
    assert answering <= set(MAC.values()), f"unexpected MACs {answering}"
    for m in CPS.values():
        m.succeed("ip link del dummyvip0")

with subtest("2. ARP fixed: vipproxy network apply + keepalived, one MAC answers"):
    for name, m in CPS.items():
        m.succeed(f"vipproxy network apply --config {CONF}")
        m.succeed(f"vipproxy network check --config {CONF}")
        m.succeed("test $(sysctl -n net.ipv4.conf.eth1.arp_ignore) = 1")
        m.succeed("test $(sysctl -n net.ipv4.conf.eth1.arp_announce) = 2")
        m.succeed("test $(sysctl -n net.ipv4.conf.all.arp_ignore) = 0")
        m.succeed(f"ip -4 addr show dev dummyvip0 | grep -qw {VIP4}")
        m.succeed(f"vipproxy units write --config {CONF}", "systemctl daemon-reload")
        m.succeed("systemctl start vipproxy.socket vipproxy.service")
        m.wait_for_unit("vipproxy.service", timeout=60)
        m.succeed(f"mkdir -p /run/vipproxy && vipproxy keepalived write --config {CONF} --out /run/vipproxy/keepalived.conf")
        m.succeed(f"{RUN} --unit=vrrp keepalived --dont-fork --log-console -f /run/vipproxy/keepalived.conf")
    cp1.wait_until_succeeds(f"ip -4 addr show dev eth1 | grep -qw {VIP4}", timeout=120)
    assert master() == "cp1"
    assert vip_held() == ["cp1"], f"vipproxy_vip_held is 1 on {vip_held()}, want the master cp1 only"
    answering = macs_answering(VIP4)
    print(f"RESULT ARP fixed: {len(answering)} MAC answers for {VIP4} (the master's)")
    assert answering == {MAC["cp1"]}, f"expected only cp1's {MAC['cp1']}, got {answering}"
    # One request, given PATIENT's time: a TCG arm64 lane beside another
    # took over 5 s for this first mTLS handshake and request (2026-12-02
    # 14:12 UTC: keepalived's probe script itself overran its interval).
    client.succeed(f"{CURL} --connect-timeout {PATIENT['connect_timeout']} --max-time {PATIENT['max_time']} https://{VIP4}:{PORT}/name")

with subtest("3. hairpin: ptp and calico pods on master and backup, 30 mTLS requests each"):
    for name in ["cp1", "cp2"]:
        add_pods(CPS[name], name)
    for name in ["cp1", "cp2"]:
        for pod in ["ptp", "calico"]:
            seen = set(netns_requests(CPS[name], pod, f"https://{VIP4}:{PORT}", 30))
            print(f"RESULT hairpin {name}/{pod}: 30/30 ok, answered by {sorted(seen)}")
            assert seen == set(CPS), f"{name}/{pod}: expected all of {sorted(CPS)}, got {sorted(seen)}"

with subtest("4. negative control: all.arp_ignore=1 breaks the ptp pod"):
    cp2.succeed("sysctl -qw net.ipv4.conf.all.arp_ignore=1", "ip -n ptp neigh flush all")
    cp2.fail(f"ip netns exec ptp {CURL} --connect-timeout 3 --max-time 4 https://{VIP4}:{PORT}/name")
    print("RESULT negative control: with all.arp_ignore=1 the ptp pod cannot reach the VIP")
    cp2.succeed("sysctl -qw net.ipv4.conf.all.arp_ignore=0", "ip -n ptp neigh flush all")
    netns_requests(cp2, "ptp", f"https://{VIP4}:{PORT}", 3)

with subtest("5. VRRP failover: master powered off, one MAC answers, requests resume"):
    loop_start(f"https://{VIP4}:{PORT}", "/root/failover.log")
    t_crash = now(client)
    cp1.crash()
    del CPS["cp1"]
    cp2.wait_until_succeeds(f"ip -4 addr show dev eth1 | grep -qw {VIP4}", timeout=30)
    client.wait_until_succeeds(f"test $(awk '$1 > {t_crash} && $2 == 0' /root/failover.log | wc -l) -ge 5", timeout=180)
    rows = loop_stop("/root/failover.log")
    after = [r for r in rows if r[0] > t_crash]
    first_ok = min(r[0] for r in after if r[1] == 0 and r[2] == "200")
    resume = first_ok - t_crash
    lost = len(failed(after))
    print(f"RESULT VRRP failover: requests resumed {resume:.2f} s after the master was powered off ({lost} requests failed meanwhile)")
    assert master() == "cp2"
    assert vip_held() == ["cp2"], f"after failover vipproxy_vip_held is 1 on {vip_held()}, want cp2 only"
    answering = macs_answering(VIP4)
    assert answering == {MAC["cp2"]}, f"after failover expected only cp2's MAC, got {answering}"
    # VRRP takes over in ~3.6 s (three adverts missed); on a quiet host the
    # loop resumes in 4-6 s. A request in flight at the crash first waits
    # its max_time (6 s), then the loaded client needs seconds to start the
    # next one: 10.8 s with two VM lanes at load 6 (2026-12-02). Without the
    # new master's gratuitous ARP the client would mostly wait longer: its
    # neighbour entry stays reachable for up to 15-45 s after the last
    # confirmation, then 5 s of delay and probes.
    assert resume <= 15, f"requests resumed only after {resume:.1f} s"

with subtest("6. apiserver failure under load: no failed request, marked down and up"):
    loop_start(f"https://{VIP4}:{PORT}", "/root/apiserver.log", **PATIENT)
    t_before = now(client)
    cp3.succeed("systemctl stop apiserver")
    t_after = now(client)
    cp2.wait_until_succeeds(backend_is("cp3", 0), timeout=30)
    client.sleep(3)
    start_apiserver("cp3")
    cp2.wait_until_succeeds(backend_is("cp3", 1), timeout=30)
    # Until a request after the restart was answered by cp3 (round robin
    # over three: a few requests; a TCG guest on a loaded host sends one
    # every second or two), not for a fixed time.
    client.wait_until_succeeds(f"awk '$1 > {t_after} && $2 == 0 && $4 == \"cp3\"' /root/apiserver.log | grep -q .", timeout=120)
    rows = loop_stop("/root/apiserver.log")
    # An L4 proxy can retry a connection only before it carries data: a
    # request in flight at the very moment of the kill may be cut. Every
    # request started after the kill must succeed.
    inflight = [r for r in failed(rows) if t_before - PATIENT["max_time"] <= r[0] <= t_after]
    bad = [r for r in failed(rows) if r not in inflight]
    print(f"RESULT apiserver failure: {len(rows)} requests, {len(bad)} failed, {len(inflight)} cut in flight at the kill")
    assert not bad, f"failed requests: {bad[:5]}"
    assert {"cp3"} <= {r[3] for r in rows if r[0] > t_after}, "cp3 not used again after its restart"

with subtest("7. restart and reload under load: no refused connection"):
    loop_start(f"https://{VIP4}:{PORT}", "/root/restart.log", **BACKLOG_WAIT)
    faults, budget = vrrp_faults(cp2), probe_budget(cp2)
    t_restart = now(cp2)
    cp2.succeed("systemctl restart vipproxy.service")
    cp2.wait_for_unit("vipproxy.service", timeout=60)
    client.sleep(2)
    # Reload with a new backend set, cp3 alone: every answer after it shows it.
    write_file(cp2, CONF, vipproxy_config("cp2", ["cp3"]))
    cp2.succeed("systemctl reload vipproxy.service")
    cp2.wait_until_succeeds(
        "curl -sf http://127.0.0.1:6449/metrics | grep -q '^vipproxy_reloads_total{result=\"ok\"} 1$'", timeout=30
    )
    t_reload = now(client)
    # Six requests after the reload, whatever their result (the asserts
    # below judge them): a bound for a slow host, not a measured figure.
    client.wait_until_succeeds(f"test $(awk '$1 > {t_reload}' /root/restart.log | wc -l) -ge 6", timeout=240)
    rows = loop_stop("/root/restart.log")
    bad = failed(rows)
    refused = [r for r in rows if r[1] == 7]
    used = {r[3] for r in rows if r[0] > t_reload and r[1] == 0}
    faults = vrrp_faults(cp2) - faults
    gap = restart_gap(cp2, t_restart)
    print(f"RESULT restart+reload: {len(rows)} requests, {len(bad)} failed, {len(refused)} refused; after the reload answered by {sorted(used)}; VIP given up {faults} times; the new daemon served {gap:.1f} s after the old one stopped (probe budget {budget} s)")
    # The socket stays with systemd across the restart: keepalived's probe
    # must ride it out, since moving the VIP resets every connection. It
    # can only while the restart takes less than the probe's budget: on a
    # real node it takes well under a second; a starved TCG arm64 guest
    # took 10.4 s from the old daemon's stop to the new one's start
    # (2026-12-03, two fresh runs of three), and keepalived then did what
    # it must. So a VIP move (and the requests it resets) fails the step
    # only when the restart was within the budget.
    if faults and gap > budget:
        print(f"RESULT restart: {gap:.1f} s on this emulated host, past the probe's {budget} s: the VIP move and {len(bad)} reset request(s) not judged")
    else:
        assert faults == 0 and master() == "cp2", f"the restart moved the VIP ({faults} FAULT states, master now {master()}) though it took {gap:.1f} s, within the probe's {budget} s"
        assert not bad, f"failed requests: {bad[:5]}"
    assert master() == "cp2", f"master now {master()}, not cp2"
    assert not refused, f"refused connections: {refused[:5]}"
    assert used == {"cp3"}, f"after the reload expected cp3 alone, got {sorted(used)}"

with subtest("8. IPv6 VIP: reachable from client and pods, one node answers NDP"):
    client.wait_until_succeeds(f"{CURL} --max-time 5 https://[{VIP6}]:{PORT}/name", timeout=30)
    out = client.succeed(f"ndisc6 -m -n -r 3 -w 1000 {VIP6} eth1 || true")
    answering = {m.lower() for m in MAC_RE.findall(out)}
    print(f"RESULT IPv6: {len(answering)} MAC answers neighbour discovery for {VIP6}")
    assert answering == {MAC["cp2"]}, f"expected only cp2's MAC for {VIP6}, got {answering}"
    seen = set(netns_requests(cp2, "ptp", f"https://[{VIP6}]:{PORT}", 10))
    print(f"RESULT IPv6 hairpin cp2/ptp: 10/10 ok, answered by {sorted(seen)}")

with subtest("9. the local apiserver on *:6443: named with the fix (socket, daemon log and STATUS=, doctor); the recipe fixes it"):
    # cp3 is a backup: its apiserver moves to the wildcard, the default of
    # kubeadm, k3s, k0s and NixOS, and vipproxy can no longer bind VIP:6443.
    cp3.succeed("systemctl stop vipproxy.service vipproxy.socket apiserver")
    cp3.succeed(
        f"{RUN} --unit=apiserver vipproxy-apiserver --listen 0.0.0.0:{PORT} --name cp3"
        f" --cert {PKI}/server.pem --key {PKI}/server-key.pem --client-ca {PKI}/ca.pem"
    )
    cp3.wait_for_open_port(PORT, addr=IP["cp3"], timeout=30)
    # Go (like kube-apiserver) listens on "0.0.0.0:6443" with one dual-stack [::] socket.
    held = f"port {PORT} is held by [::]:{PORT} (vipproxy-apiser, pid "
    fix = "fix: bind the local apiserver to this node's own IP"
    cp3.fail("systemctl start vipproxy.socket")
    log = cp3.succeed("journalctl -u vipproxy.socket --no-pager -o cat")
    assert held in log and fix in log, f"vipproxy.socket's journal does not name the holder and the fix:\n{log[-2000:]}"
    # Without socket activation the daemon binds the VIP itself: its log and STATUS= say the same.
    cp3.fail(f"systemd-run --setenv=PATH=$PATH --wait -p Type=notify --unit=vpx-direct vipproxy serve --config {CONF}")
    status = cp3.succeed("systemctl show -p StatusText --value vpx-direct")
    log = cp3.succeed("journalctl -u vpx-direct --no-pager -o cat")
    cp3.succeed("systemctl reset-failed vpx-direct")
    assert status.startswith("VIP listener: ") and held in status and fix in status, f"STATUS=: {status}"
    assert held in log and fix in log, f"daemon log:\n{log[-2000:]}"
    out = cp3.fail(f"vipproxy doctor --only vip-port --config {CONF}")
    assert f"FAIL vip-port   {held}" in out and fix in out, out
    print(f"RESULT apiserver on *:{PORT}: the socket, the daemon (log and STATUS=) and doctor name it and the fix")
    # RKE2's recipe (docs/distributions.md): the apiserver stays on every
    # address, sharing the port (--permit-port-sharing=true, SO_REUSEPORT),
    # and vipproxy shares it too (vip.reuse_port: ReusePort=yes on the
    # socket). The socket starts beside it (its ExecStartPre doctor passes),
    # and connections to the VIP reach vipproxy, not the apiserver.
    cp3.succeed("systemctl stop apiserver")
    cp3.succeed(
        f"{RUN} --unit=apiserver vipproxy-apiserver --listen 0.0.0.0:{PORT} --name cp3 --permit-port-sharing"
        f" --cert {PKI}/server.pem --key {PKI}/server-key.pem --client-ca {PKI}/ca.pem"
    )
    cp3.wait_for_open_port(PORT, addr=IP["cp3"], timeout=30)
    unshared = cp3.succeed(f"cat {CONF}")
    write_file(cp3, CONF, unshared.replace(f"port = {PORT}\n", f"port = {PORT}\nreuse_port = true\n", 1))
    cp3.succeed(f"vipproxy units write --config {CONF}", "systemctl daemon-reload", "systemctl start vipproxy.socket vipproxy.service")
    cp3.wait_for_unit("vipproxy.service", timeout=60)
    out = cp3.succeed(f"vipproxy doctor --only vip-port --config {CONF}")
    assert f"shared (vip.reuse_port, SO_REUSEPORT) with [::]:{PORT} (vipproxy-apiser" in out, out
    for _ in range(3):
        cp3.succeed(f"{CURL} --max-time 10 https://{VIP4}:{PORT}/name")
    proxied = int(cp3.succeed("curl -sf http://127.0.0.1:6449/metrics | awk '/^vipproxy_connections_total/ {s += $NF} END {print s + 0}'"))
    assert proxied >= 3, f"3 requests to the VIP, {proxied} proxied by vipproxy: the apiserver's wildcard took them"
    print(f"RESULT apiserver on *:{PORT} with SO_REUSEPORT, vip.reuse_port: vipproxy.socket starts beside it, doctor passes it as shared, {proxied} of 3 requests to the VIP proxied")
    cp3.succeed("systemctl stop vipproxy.service vipproxy.socket")
    write_file(cp3, CONF, unshared)
    cp3.succeed(f"vipproxy units write --config {CONF}", "systemctl daemon-reload")
    # The recipe of docs/distributions.md: the apiserver on the node's own IP.
    cp3.succeed("systemctl stop apiserver")
    start_apiserver("cp3")
    cp3.succeed("systemctl start vipproxy.socket vipproxy.service")
    cp3.wait_for_unit("vipproxy.service", timeout=60)
    out = cp3.succeed(f"vipproxy doctor --only vip-port --config {CONF}")
    assert f"also listening on other addresses: {IP['cp3']}:{PORT} (vipproxy-apiser" in out, out
    cp3.succeed(f"{CURL} --max-time 10 https://{VIP4}:{PORT}/name")
    print(f"RESULT apiserver on {IP['cp3']}:{PORT}: vipproxy.socket starts, doctor passes, the VIP answers on cp3")

if not ARCH_NEUTRAL_STEPS:
    print("RESULT steps 10 and 11 (the same on every architecture) not run here: VM_SKIP_ARCH_NEUTRAL=1")

if ARCH_NEUTRAL_STEPS:
    with subtest("10. discovery: the static list names cp2 only, cp1 and cp3 come from the kubernetes EndpointSlice; cp1 leaves under the loop, is drained, no failed request"):
        # cp1 (powered off in step 5) comes back as a fresh node running only
        # its apiserver; every stand-in publishes the same slice, as
        # apiservers sharing etcd do.
        cp1.start()
        cp1.wait_for_unit("multi-user.target")
        cp1.wait_until_succeeds(f"ip -4 addr show dev eth1 | grep -q {IP['cp1']}/24", timeout=60)
        copy_dir(cp2, [cp1], PKI)
        CPS["cp1"] = cp1
        members = {n: f"{IP[n]}:{PORT}" for n in ["cp1", "cp2", "cp3"]}
        for m in CPS.values():
            write_file(m, ENDPOINTS, "\n".join(members.values()))
        GRACE = 10
        discovery = [
            "[discovery]",
            "enable = true",
            f'ca_file = "{PKI}/ca.pem"',
            f'cert_file = "{PKI}/client.pem"',
            f'key_file = "{PKI}/client-key.pem"',
            f'grace = "{GRACE}s"',
        ]
        want = {members["cp2"]: "static", members["cp1"]: "discovered", members["cp3"]: "discovered"}

        def all_found(st):
            return {a: b.get("source") for a, b in st["by_addr"].items()} == want and all(
                b["state"] == "up" for b in st["backends"]
            )

        # cp2's pool is cp3 alone (step 7): restart the stand-ins so that cp2's
        # pool never goes empty (keepalived's probe would give the VIP up).
        start_apiserver("cp1", endpoints=True)
        cp2.succeed("systemctl stop apiserver")
        start_apiserver("cp2", endpoints=True)
        write_file(cp2, CONF, vipproxy_config("cp2", ["cp2"]) + "\n".join(discovery))
        cp2.succeed(f"vipproxy check --quiet --config {CONF}", "systemctl reload vipproxy.service")
        wait_status(cp2, all_found, "cp2 static, cp1 and cp3 discovered, all up", timeout=60)
        cp3.succeed("systemctl stop apiserver")
        start_apiserver("cp3", endpoints=True)
        st = wait_status(cp2, all_found, "cp3 up again with its slice", timeout=60)
        print(f"RESULT discovery: static {members['cp2']}, discovered {sorted(a for a, s in want.items() if s == 'discovered')}, all up; watch {st['discovery']['state']}")
        # Long-lived connections through the VIP (round-robin: one lands on
        # each apiserver): the one on cp1 must outlive cp1's leaving by the grace.
        write_file(client, "/root/watches.sh", WATCHES.replace("CURL", CURL))
        client.succeed("rm -f /run/watch*", f"{RUN} --unit=watches bash /root/watches.sh https://{VIP4}:{PORT}")
        wait_status(cp2, lambda st: st["by_addr"][members["cp1"]]["open_connections"] >= 1, "a watch open on cp1", timeout=30)
        loop_start(f"https://{VIP4}:{PORT}", "/root/discovery.log", **PATIENT)
        client.sleep(2)
        # cp1's apiserver leaves the cluster: its endpoint is removed from the slice.
        t_leave = now(client)
        since = now(cp2)
        for m in CPS.values():
            write_file(m, ENDPOINTS, "\n".join([members["cp2"], members["cp3"]]))
        # The drain starts once the change reaches the daemon (the stand-in it
        # watches may see its file written before the others are: a TCG arm64
        # run, 2026-12-02, drained and dropped cp1 between two polls of
        # /status). So wait for the drop, then read the drain from the journal.
        wait_status(cp2, lambda st: members["cp1"] not in st["by_addr"], "cp1 dropped", timeout=GRACE + 90)
        t_dropped = now(client)
        events = discovery_events(cp2, members["cp1"], since)
        drained = events.get("discovered backend draining")
        dropped = events.get("discovered backend dropped")
        closed = events.get("closed connections to a backend the cluster no longer lists, after its grace")
        assert drained and dropped, f"cp1's drain and drop not in cp2's journal: {events}"
        assert dropped["REASON"] == "grace over", f"cp1 dropped for {dropped['REASON']!r}, not at the grace's end"
        drain_s = dropped["at"] - drained["at"]
        assert drain_s >= GRACE - 0.5, f"cp1 drained {drain_s:.1f} s, not the grace of {GRACE} s: {events}"
        open_at_drain = int(closed["CLOSED"]) if closed else 0
        client.sleep(3)
        rows = loop_stop("/root/discovery.log")
        client.succeed("systemctl stop watches")
        # The watch that was on cp1 (its lines carry cp1's name) ended after the grace.
        cut = None
        for i in (1, 2, 3):
            if client.execute(f"grep -q '^cp1' /run/watch{i}.log")[0] == 0:
                rc = client.execute(f"cat /run/watch{i}.rc")[1].split()
                cut = float(rc[1]) - t_leave if len(rc) == 2 else None
        bad = failed(rows)
        late = [r for r in rows if r[0] > t_dropped and r[3] == "cp1"]
        used = {r[3] for r in rows}
        print(f"RESULT discovery drain: cp1 left the slice: {len(rows)} requests, {len(bad)} failed, answered by {sorted(used)}; drained {drain_s:.1f} s, {open_at_drain} connection(s) kept to the grace's end, cp1's watch closed {cut if cut is None else round(cut, 1)} s after it left (grace {GRACE} s), then cp1 dropped")
        assert not bad, f"failed requests: {bad[:5]}"
        assert not late, f"cp1 answered after it was dropped: {late[:5]}"
        assert open_at_drain >= 1, f"no connection kept on cp1 to the grace's end: {events}"
        assert cut is not None and cut >= GRACE - 1, f"cp1's watch closed {cut} s after it left, before the grace of {GRACE} s"
        # Back to step 7's config (cp3 alone, no discovery) for any later step.
        write_file(cp2, CONF, vipproxy_config("cp2", ["cp3"]))
        cp2.succeed("systemctl reload vipproxy.service")
        client.succeed(f"{CURL} --max-time 10 https://{VIP4}:{PORT}/name")


# Step 11: a k0s VIP, three ports: 6443 (API), 8132 (konnectivity), 9443
# (controller join API), each with its own pool and health state.
K0S_PORTS = {"api": PORT, "konnectivity": 8132, "join": 9443}


def k0s_config(node):
    """The node config with [[port]] tables: backends are hosts."""
    base = vipproxy_config(node, []).replace(f"port = {PORT}\n", "", 1)
    lines = [base]
    for name in ["cp1", "cp2", "cp3"]:
        lines += ["[[backend]]", f'name = "{name}"', f'address = "{IP[name]}"', ""]
    for port, number in K0S_PORTS.items():
        lines += ["[[port]]", f'name = "{port}"', f"port = {number}", ""]
    return "\n".join(lines)


def start_stand_in(name, port, number):
    """A TLS stand-in for a k0s port on the node IP, as its own unit."""
    CPS[name].succeed(
        f"{RUN} --unit=standin-{port} vipproxy-apiserver --listen {IP[name]}:{number} --name {name}-{port}"
        f" --cert {PKI}/server.pem --key {PKI}/server-key.pem --client-ca {PKI}/ca.pem"
    )
    CPS[name].wait_for_open_port(number, addr=IP[name], timeout=30)


def settled_master(names, faults_before, timeout=90):
    """The node VRRP settles on once every named node is ready again: the one
    of highest priority (keepalived preempts). These restarts stop the socket
    (new ports), and where one outlasts the probe's five failures (8-10 s; a
    starved riscv64 TCG VM, CI 2026-12-02) the node goes to FAULT: the VIP
    moves and, once the node is back, moves back. Read once, eth1 may then
    show the VIP on neither node; so wait, and say how often it moved."""
    want = max(names, key=lambda n: PRIORITY[n])
    deadline = time.monotonic() + timeout
    seen = []
    while True:
        holders = [n for n in names if CPS[n].execute(f"ip -4 addr show dev eth1 | grep -qw {VIP4}")[0] == 0]
        seen.append(holders)
        # Both nodes are ready (readyz above), so no new FAULT comes; twice
        # in a row, 2 s apart, so the overlap of a preemption (the old
        # holder not yet gone) is not taken for the end of it.
        if seen[-2:] == [[want], [want]]:
            break
        assert time.monotonic() < deadline, f"the VIP did not settle on {want}'s eth1 within {timeout} s; held by, every 2 s: {seen}"
        CPS[want].sleep(2)
    faults = {n: vrrp_faults(CPS[n]) - faults_before[n] for n in names}
    print(f"RESULT k0s restarts: the VIP settled on {want}; VRRP faults during the restarts: {faults}")
    return want


def port_states(node, port):
    """Backend name -> state in one port's pool of the node's vipproxy."""
    st = json.loads(node.succeed("curl -sf --max-time 20 http://127.0.0.1:6449/status"))
    return {b["name"]: b["state"] for b in st["backends"] if b.get("port") == port}


if ARCH_NEUTRAL_STEPS:
    with subtest("11. k0s ports: 6443, 8132 and 9443 on the VIP, a socket unit each; stopping cp2's konnectivity moves only konnectivity's new connections, no new one fails"):
        for name, m in CPS.items():
            if m.execute("systemctl is-active apiserver")[0] != 0:
                start_apiserver(name)
            for port, number in K0S_PORTS.items():
                if port != "api":
                    start_stand_in(name, port, number)
        # cp2 and cp3 run vipproxy and keepalived (cp1 came back in step 10 as
        # an apiserver only); the backup first, so the VIP stays served.
        faults_before = {n: vrrp_faults(CPS[n]) for n in ["cp2", "cp3"]}
        for name in ["cp3", "cp2"]:
            m = CPS[name]
            write_file(m, CONF, k0s_config(name))
            m.succeed(f"vipproxy check --quiet --config {CONF}", f"vipproxy units write --config {CONF}", "systemctl daemon-reload")
            m.succeed("systemctl stop vipproxy.service vipproxy.socket", "systemctl start vipproxy.socket vipproxy.service")
            m.wait_for_unit("vipproxy.service", timeout=60)
            for port in ["konnectivity", "join"]:
                m.succeed(f"systemctl is-active vipproxy-port@{port}.socket")
                m.succeed(f"systemctl show -p FileDescriptorName vipproxy-port@{port}.socket | grep -qx FileDescriptorName={port}")
            m.wait_until_succeeds(
                "curl -sf http://127.0.0.1:6449/readyz | grep -q 'api 3/3, konnectivity 3/3 (optional), join 3/3 (optional)'", timeout=60
            )
            # Journal-native log: the fields are ACTIVATED=, PORTS=..., the notes in MESSAGE=.
            log = m.succeed("journalctl -u vipproxy.service -o verbose --since -2min")
            assert "ACTIVATED=true" in log and "passed no socket" not in log and "systemd passed a socket named" not in log, (
                f"{name}: the ports' sockets were not all passed:\n{log[-3000:]}"
            )
            m.succeed(f"vipproxy doctor --only vip-port --config {CONF}")
        master_node = CPS[settled_master(["cp2", "cp3"], faults_before)]
        for port, number in K0S_PORTS.items():
            names = client.succeed(f"{CURL} --no-sessionid -H 'Connection: close' -w '\\n' --max-time 15 " + " ".join([f"https://{VIP4}:{number}/name"] * 6))
            seen = {l.strip() for l in names.splitlines() if l.strip()}
            assert seen == {f"{n}-{port}" if port != "api" else n for n in CPS}, f"port {port} answered by {seen}"
        loop_start(f"https://{VIP4}:{PORT}", "/root/k0s-api.log", unit="reqloop-api", **PATIENT)
        loop_start(f"https://{VIP4}:8132", "/root/k0s-konn.log", unit="reqloop-konn", **PATIENT)
        t_stop = now(client)
        cp2.succeed("systemctl stop standin-konnectivity")
        t_stopped = now(client)
        deadline = time.monotonic() + 60
        while port_states(master_node, "konnectivity").get("cp2") != "down":
            assert time.monotonic() < deadline, f"cp2 not down in konnectivity's pool within 60 s: {port_states(master_node, 'konnectivity')}"
            master_node.sleep(0.5)
        t_down = now(client)
        # Requests on both ports after the mark-down (two each; a bound for a
        # slow host, not a measured figure).
        for log in ["/root/k0s-api.log", "/root/k0s-konn.log"]:
            client.wait_until_succeeds(f"test $(awk '$1 > {t_down}' {log} | wc -l) -ge 2", timeout=120)
        api_rows = loop_stop("/root/k0s-api.log", unit="reqloop-api")
        konn_rows = loop_stop("/root/k0s-konn.log", unit="reqloop-konn")
        assert port_states(master_node, "api")["cp2"] == "up", "cp2 left the API pool with its konnectivity"
        assert port_states(master_node, "join")["cp2"] == "up", "cp2 left the join pool with its konnectivity"
        # As in step 6: an L4 proxy can retry a connection only before it
        # carries data, so a konnectivity request cp2 was serving when its
        # server stopped may be cut (the stand-in closes its connections). A
        # request starts at most max_time before the stop; every request
        # started after it must succeed, and the API loop must not notice.
        inflight = [r for r in failed(konn_rows) if t_stop - PATIENT["max_time"] <= r[0] <= t_stopped]
        bad = failed(api_rows) + [r for r in failed(konn_rows) if r not in inflight]
        konn_after = {r[3] for r in konn_rows if r[0] > t_down}
        api_after = {r[3] for r in api_rows if r[0] > t_down}
        print(f"RESULT k0s ports: cp2's konnectivity stopped under two request loops: {len(api_rows)} api + {len(konn_rows)} konnectivity requests, "
              f"{len(bad)} failed, {len(inflight)} konnectivity cut in flight at the stop; marked down {t_down - t_stop:.1f} s after; konnectivity then answered by {sorted(konn_after)}, api by {sorted(api_after)} (loop)")
        assert not bad, f"failed requests: {bad[:5]}"
        assert len(inflight) <= 1, f"one loop has one request in flight, yet {len(inflight)} were cut: {inflight}"
        assert "cp2-konnectivity" not in konn_after, f"cp2's konnectivity answered after its mark-down: {konn_after}"
        # Six new API connections (round-robin over three up backends: two each)
        # still reach cp2; the loop's few requests after the mark-down may not.
        names = client.succeed(f"{CURL} --no-sessionid -H 'Connection: close' -w '\\n' --max-time 15 " + " ".join([f"https://{VIP4}:{PORT}/name"] * 6))
        api_now = {l.strip() for l in names.splitlines() if l.strip()}
        assert "cp2" in api_now, f"cp2 no longer serves the API after its konnectivity stopped: {api_now}"
        master_node.succeed(f"vipproxy probe --config {CONF}")
