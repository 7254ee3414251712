# nodes: cp1
# One-node smoke of the real binary and units (every architecture):
# networkd dummy link + VIP and uplink sysctls from `vipproxy network apply`,
# the socket unit from `vipproxy units write`, socket activation, and mTLS
# proxying to two stand-in apiservers on the node's IP, from the node itself
# and from a ptp-style pod (hairpin); and `network apply --netlink`, which
# creates the dummy link itself.
VIP4 = "192.168.1.100"
VIP6 = "2001:db8:1::100"
NODE = "192.168.1.1"  # the only node is number 1
BACKENDS = {"apiserver-a": 7443, "apiserver-b": 8443}

CONFIG = f"""
[vip]
addresses = ["{VIP4}", "{VIP6}"]
port = 6443

[health]
type = "https"
interval = "2s"
timeout = "2s"
ca_file = "{PKI}/ca.pem"
cert_file = "{PKI}/client.pem"
key_file = "{PKI}/client-key.pem"

{NETWORK_UNDER_RUN}""" + "".join(f'\n[[backend]]\nname = "{n}"\naddress = "{NODE}:{p}"\n' for n, p in BACKENDS.items())


def requests(prefix, url, count):
    out = cp1.succeed(f"for i in $(seq {count}); do {prefix} {CURL} --max-time 20 {url}/name || exit 1; echo; done", timeout=300)
    names = [l.strip() for l in out.splitlines() if l.strip()]
    assert len(names) == count, f"{len(names)} of {count} requests answered: {names}"
    return set(names)


start_all()

with subtest("boot"):
    cp1.wait_for_unit("multi-user.target")
    cp1.wait_until_succeeds(f"ip -4 addr show dev eth1 | grep -q {NODE}/24", timeout=60)

with subtest("transient units find no general tools through PATH (NixOS: systemd's bin/ only)"):
    cp1.fail("systemd-run --wait --quiet --collect /bin/sh -c 'command -v curl'")  # no PATH on purpose
    cp1.succeed(f"{RUN} --wait --quiet /bin/sh -c 'command -v curl'")

with subtest("stand-in apiservers with mTLS on the node IP"):
    cp1.succeed(f"vipproxy-apiserver pki --dir {PKI} --hosts {NODE},{VIP4},{VIP6}")
    cp1.succeed(f"chmod 0644 {PKI}/*")  # test keys: the DynamicUser= daemon reads the client key for health checks
    for name, port in BACKENDS.items():
        cp1.succeed(
            f"{RUN} --unit={name} vipproxy-apiserver --listen {NODE}:{port} --name {name}"
            f" --cert {PKI}/server.pem --key {PKI}/server-key.pem --client-ca {PKI}/ca.pem"
        )
        cp1.wait_for_open_port(port, addr=NODE, timeout=90)
    cp1.succeed(f"{CURL} --max-time 20 https://{NODE}:7443/readyz")
    cp1.fail(f"curl -sS --max-time 5 --cacert {PKI}/ca.pem https://{NODE}:7443/readyz")  # no client cert

with subtest("vipproxy network apply: networkd dummy link, VIP, uplink sysctls"):
    write_file(cp1, CONF, CONFIG)
    cp1.succeed(f"vipproxy check --config {CONF}")
    cp1.succeed(f"vipproxy network apply --config {CONF}")
    cp1.succeed(f"vipproxy network check --config {CONF}")
    cp1.succeed("networkctl status dummyvip0 | grep -q 'Network File: /run/systemd/network/'")
    cp1.succeed(f"ip -4 addr show dev dummyvip0 | grep -qw {VIP4}/32")
    cp1.succeed(f"ip -6 addr show dev dummyvip0 | grep -w {VIP6}/128 | grep -vq tentative")
    cp1.succeed("test $(sysctl -n net.ipv4.conf.eth1.arp_ignore) = 1")
    cp1.succeed("test $(sysctl -n net.ipv4.conf.eth1.arp_announce) = 2")
    cp1.succeed("test $(sysctl -n net.ipv4.conf.all.arp_ignore) = 0")

with subtest("socket activation: systemd owns VIP:6443, the first connection starts the service"):
    cp1.succeed(f"vipproxy units write --config {CONF}", "systemctl daemon-reload")
    cp1.succeed("systemctl start vipproxy.socket")
    cp1.succeed(f"ss -Hltn 'sport = :6443' | grep -q '{VIP4}:6443'")
    requests("", f"https://{VIP4}:6443", 1)
    cp1.wait_for_unit("vipproxy.service", timeout=90)

with subtest("proxying with mTLS passed through, over both backends"):
    seen = requests("", f"https://{VIP4}:6443", 10)
    assert seen == set(BACKENDS), f"expected answers from {sorted(BACKENDS)}, got {sorted(seen)}"
    seen6 = requests("", f"https://[{VIP6}]:6443", 4)
    print(f"RESULT smoke: 10/10 IPv4 and 4/4 IPv6 requests via the VIP, answered by {sorted(seen | seen6)}")

with subtest("hairpin from a ptp-style pod"):
    cp1.succeed(
        "ip netns add ptp",
        "ip link add vptp type veth peer name eth0 netns ptp",
        "ip link set vptp up",
        "ip -n ptp link set lo up",
        "ip -n ptp addr add 10.244.1.10/32 dev eth0",
        "ip -n ptp link set eth0 up",
        f"ip -n ptp route add {NODE} dev eth0 scope link",
        f"ip -n ptp route add default via {NODE} dev eth0",
        "ip route add 10.244.1.10/32 dev vptp",
    )
    seen = requests("ip netns exec ptp", f"https://{VIP4}:6443", 6)
    assert seen == set(BACKENDS), f"pod: expected {sorted(BACKENDS)}, got {sorted(seen)}"

with subtest("the socket outlives the service: stop, connect, started again"):
    cp1.succeed("systemctl stop vipproxy.service")
    cp1.succeed(f"ss -Hltn 'sport = :6443' | grep -q '{VIP4}:6443'")
    requests("", f"https://{VIP4}:6443", 2)
    cp1.wait_for_unit("vipproxy.service", timeout=90)

with subtest("network apply --netlink: the dummy link made without networkd, then removed"):
    # A second link and VIP, files under a scratch root: the path for hosts
    # without systemd-networkd, where vipproxy creates the dummy itself.
    cp1.succeed(
        f"sed -e 's/dummyvip0/dummyvip1/' -e 's/{VIP4}/192.168.1.101/' -e 's/{VIP6}/2001:db8:1::101/' {CONF} > /run/netlink.toml",
        "vipproxy network apply --netlink --config /run/netlink.toml --root /run/netlink-root",
    )
    cp1.succeed(
        "ip -d link show dummyvip1 | grep -qw dummy",
        "ip -4 addr show dev dummyvip1 | grep -qw 192.168.1.101",
        "ip -6 addr show dev dummyvip1 | grep -qw 2001:db8:1::101",
    )
    cp1.fail("ip -6 addr show dev dummyvip1 | grep -q fe80")  # no link-local: the link holds the VIP only
    cp1.succeed("vipproxy network remove --netlink --config /run/netlink.toml --root /run/netlink-root")
    cp1.fail("ip link show dummyvip1")

with subtest("metrics: vipproxy_vip_held read by netlink inside the hardened unit"):
    # On the dummy link only, every node has the VIP: held is 0. On an uplink
    # (where keepalived puts it on the VRRP master) it is 1.
    METRICS = "curl -sS --max-time 20 http://127.0.0.1:6449/metrics"
    cp1.succeed(f"{METRICS} | grep -qx 'vipproxy_vip_held{{address=\"{VIP4}\"}} 0'")
    cp1.succeed(f"ip addr add {VIP4}/32 dev eth1")
    cp1.succeed(f"{METRICS} | grep -qx 'vipproxy_vip_held{{address=\"{VIP4}\"}} 1'")
    cp1.succeed(f"ip addr del {VIP4}/32 dev eth1")
    cp1.succeed(f"{METRICS} | grep -q '^vipproxy_build_info{{'")

with subtest("journald: a backend going down is a warning with its own fields"):
    # vipproxy speaks journald's native protocol when stderr is the journal:
    # the priority follows the level and BACKEND= is a field of its own.
    cp1.succeed("systemctl stop apiserver-b.service")
    cp1.wait_until_succeeds(
        "journalctl -u vipproxy.service -p warning -o json BACKEND=apiserver-b | grep -q '\"PRIORITY\":\"4\"'", timeout=90
    )
    warnings = cp1.succeed("journalctl -u vipproxy.service -p warning -o cat")
    assert "apiserver-b" in warnings, f"journalctl -p warning shows no backend down: {warnings}"
    cp1.fail("journalctl -u vipproxy.service -p info -o cat BACKEND=apiserver-a | grep -q apiserver-b")
    cp1.fail("journalctl -u vipproxy.service -o cat | grep -q 'time='")  # journald keeps the time
    print(f"RESULT journald: journalctl -p warning shows: {warnings.strip().splitlines()[-1]}")
