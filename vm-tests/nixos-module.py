# NixOS module test (vm-tests/nixos.nix, check vm-nixos-module): cp1..cp3 are
# set up only by services.vipproxy (units, networkd dummy link, per-uplink
# sysctls, keepalived); each runs the stand-in apiserver on its own IP. Not a
# shared scenario (no nodes header): its nodes exist only on NixOS.
import re

VIP = "192.168.1.100"
PKI = "/etc/vipproxy/pki"
CURL = f"curl -sS --max-time 5 --cacert {PKI}/ca.pem --cert {PKI}/client.pem --key {PKI}/client-key.pem"
CPS = {"cp1": cp1, "cp2": cp2, "cp3": cp3}
MAC_RE = re.compile(r"(?:[0-9a-f]{2}:){5}[0-9a-f]{2}", re.I)


HOLDS_VIP = f"ip -4 addr show dev eth1 | grep -qw {VIP}"


def names_via_vip(count):
    out = client.succeed(f"for i in $(seq {count}); do {CURL} https://{VIP}:6443/name; echo; done")
    return [line.strip() for line in out.splitlines() if line.strip()]


start_all()

with subtest("the module's units, dummy link and sysctls"):
    for name, m in CPS.items():
        m.wait_for_unit("vipproxy.socket")
        m.wait_for_unit("vipproxy.service")
        m.wait_for_unit("apiserver.service")
        m.wait_until_succeeds(f"ip -4 addr show dev dummyvip0 | grep -qw {VIP}/32", timeout=60)
        m.succeed(
            "test $(sysctl -n net.ipv4.conf.eth1.arp_ignore) = 1",
            "test $(sysctl -n net.ipv4.conf.eth1.arp_announce) = 2",
            "test $(sysctl -n net.ipv4.conf.all.arp_ignore) = 0",
            "test $(sysctl -n net.ipv4.conf.default.arp_ignore) = 0",
            "systemctl show -p FileDescriptorName vipproxy.socket | grep -qx FileDescriptorName=vip",
            "vipproxy check --config /etc/vipproxy/vipproxy.toml",
            "vipproxy network check --config /etc/vipproxy/vipproxy.toml",
        )
        m.wait_for_unit("keepalived.service")

with subtest("openFirewall: VRRP and the VIP port open in iptables (cp1, cp2) and nftables (cp3)"):
    for m in [cp1, cp2]:
        m.succeed("iptables -S nixos-fw | grep -Eq -- '-p (vrrp|112) .*-j nixos-fw-accept'")
    cp3.succeed("nft list ruleset | grep -Eq 'l4proto (vrrp|112) accept'")
    cp3.succeed("nft list ruleset | grep -Eq 'tcp dport .*6443.* accept'")

with subtest("VRRP: cp1 (priority 150) holds the VIP on eth1 and alone answers ARP"):
    cp1.wait_until_succeeds(HOLDS_VIP, timeout=60)
    cp2.fail(HOLDS_VIP)
    cp3.fail(HOLDS_VIP)
    mac = cp1.succeed("cat /sys/class/net/eth1/address").strip().lower()
    out = client.execute(f"arping -c 3 -w 5 -I eth1 {VIP} 2>&1")[1]
    answering = {m.lower() for m in MAC_RE.findall(out)}
    assert answering == {mac}, f"expected only cp1's MAC {mac}, got {answering}"

with subtest("doctor finds what NixOS runs and passes; the probe answers keepalived's script user"):
    for name, m in CPS.items():
        out = m.succeed("vipproxy doctor --config /etc/vipproxy/vipproxy.toml")
        assert "/etc/keepalived" not in out and "/nix/store/" in out, f"{name}: doctor:\n{out}"
        m.succeed("runuser -u nobody -- $(command -v vipproxy) probe --config /etc/vipproxy/vipproxy.toml")

with subtest("client -> VIP -> every apiserver, mTLS end to end"):
    seen = set(names_via_vip(12))
    assert seen == set(CPS), f"expected answers from {sorted(CPS)}, got {sorted(seen)}"

with subtest("hairpin from a backup node to the VIP"):
    out = cp2.succeed(f"{CURL} https://{VIP}:6443/name").strip()
    assert out in CPS, out

with subtest("reload keeps the daemon and the listener"):
    pid = cp1.succeed("systemctl show -p MainPID --value vipproxy.service").strip()
    cp1.succeed("systemctl reload vipproxy.service")
    cp1.wait_for_unit("vipproxy.service")
    assert cp1.succeed("systemctl show -p MainPID --value vipproxy.service").strip() == pid
    names_via_vip(3)

with subtest("a settings change reloads (same PID), the new backend set is used"):
    pid = cp1.succeed("systemctl show -p MainPID --value vipproxy.service").strip()
    cp1.succeed("/run/current-system/specialisation/fewer-backends/bin/switch-to-configuration test >&2")
    cp1.wait_for_unit("vipproxy.service")
    assert cp1.succeed("systemctl show -p MainPID --value vipproxy.service").strip() == pid, "vipproxy was restarted"
    cp1.succeed("grep -q cp2 /etc/vipproxy/vipproxy.toml", "! grep -q '\"cp1\"' /etc/vipproxy/vipproxy.toml")
    cp1.wait_until_succeeds("test $(journalctl -b -u vipproxy.service | grep -c Reloading) -ge 2", timeout=30)
    cp1.wait_until_succeeds("vipproxy probe --config /etc/vipproxy/vipproxy.toml", timeout=30)
    seen = set(names_via_vip(12))
    assert seen <= {"cp2", "cp3"} and seen, f"after the reload expected cp2/cp3 only, got {sorted(seen)}"

with subtest("failover: cp1 powered off, cp2 takes the VIP, requests resume"):
    cp1.crash()
    cp2.wait_until_succeeds(HOLDS_VIP, timeout=30)
    client.wait_until_succeeds(f"{CURL} https://{VIP}:6443/name", timeout=30)

with subtest("probe: nodes without a ready backend give the VIP up"):
    for m in [cp2, cp3]:
        m.succeed("systemctl stop apiserver.service")
    cp2.wait_until_fails(HOLDS_VIP, timeout=60)
    cp3.fail(HOLDS_VIP)
