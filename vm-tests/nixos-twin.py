# nodes: cp1
# doctor on the NixOS-shaped twin: one Debian node left the way
# services.vipproxy leaves a NixOS node (nix/module.nix): unit files linked
# from a store path with ListenStream= on the VIP (no drop-in), the dummy
# link from networkd files in /etc/systemd/network, the uplink sysctls in
# /etc/sysctl.d/60-nixos.conf, keepalived started as nixpkgs' keepalived
# module starts it (`keepalived -f /nix/store/...-keepalived.conf -p
# /run/keepalived.pid`, the probe's vrrp_script with `user nobody`) and
# admin.listen = "" (no TCP endpoint: the script user reaches the daemon
# through the probe socket or not at all). Healthy, the node holds the VIP
# and doctor passes without assuming a Debian path; broken, doctor fails
# with fixes in the system configuration.
VIP = "192.168.1.100"
NODE = "192.168.1.1"  # the only node is number 1
CONF = "/etc/vipproxy/vipproxy.toml"
PKI = "/etc/vipproxy/pki"
STORE = "/nix/store"
KCONF = f"{STORE}/00000000000000000000000000000000-keepalived.conf"
RUN = "systemd-run --setenv=PATH=$PATH --collect"
DEBIAN_WORDS = ["/etc/keepalived", "vipproxy network apply", "vipproxy-network", "vipproxy units write", "/usr/bin/"]

CONFIG = f"""
[vip]
addresses = ["{VIP}"]
port = 6443

[[backend]]
name = "cp1"
address = "{NODE}:7443"

[health]
type = "tcp"
interval = "1s"

[network]
uplinks = ["eth1"]

[keepalived]
priority = 150

[admin]
listen = ""
"""

NETDEV = "[NetDev]\nKind=dummy\nName=dummyvip0\n"
NETWORK = f"""[Match]
Name=dummyvip0

[Network]
ConfigureWithoutCarrier=yes
LinkLocalAddressing=no

[Address]
Address={VIP}/32
DuplicateAddressDetection=none

[Link]
RequiredForOnline=no
"""
SYSCTL = "net.ipv4.conf.eth1.arp_announce=2\nnet.ipv4.conf.eth1.arp_ignore=1\n"
KEEPALIVED_UNIT = f"""[Unit]
Description=Keepalive Daemon (LVS and VRRP)
After=network.target network-online.target

[Service]
Type=forking
PIDFile=/run/keepalived.pid
KillMode=process
RuntimeDirectory=keepalived
ExecStart=/usr/sbin/keepalived -f {KCONF} -p /run/keepalived.pid
ExecReload=/bin/kill -HUP $MAINPID
Restart=always
RestartSec=1s
"""


def write(path, text):
    cp1.succeed(f"mkdir -p $(dirname {path}) && cat > {path} <<'EOF'\n{text}EOF")


def store_link(unit, make):
    """A unit file in the store, made on the node by the shell command make
    (no file of several KB through the backdoor: it stalls), linked from
    /etc/systemd/system (as NixOS does)."""
    path = f"{STORE}/11111111111111111111111111111111-unit-{unit}/{unit}"
    cp1.succeed(f"mkdir -p $(dirname {path}) && {make} > {path}.new && mv {path}.new {path}")
    cp1.succeed(f"ln -sfn {path} /etc/systemd/system/{unit}")


def doctor():
    status, out = cp1.execute(f"vipproxy doctor --config {CONF} 2>&1")
    print(out)
    for word in DEBIAN_WORDS:
        assert word not in out, f"doctor on the NixOS-shaped node names {word!r}:\n{out}"
    return status, out


def line(out, check):
    """doctor's lines for one check (the result and its fix)."""
    lines = out.splitlines()
    for i, l in enumerate(lines):
        if l.split()[1:2] == [check]:
            return "\n".join(lines[i : i + 2])
    raise AssertionError(f"no {check} line in:\n{out}")


HOLDS_VIP = f"ip -4 addr show dev eth1 | grep -qw {VIP}"

start_all()

with subtest("boot"):
    cp1.wait_for_unit("multi-user.target")
    cp1.wait_until_succeeds(f"ip -4 addr show dev eth1 | grep -q {NODE}/24", timeout=60)

with subtest("a node as services.vipproxy leaves it"):
    cp1.succeed(f"vipproxy-apiserver pki --dir {PKI} --hosts {NODE},{VIP}", f"chmod 0644 {PKI}/*")
    cp1.succeed(
        f"{RUN} --unit=apiserver vipproxy-apiserver --listen {NODE}:7443 --name cp1"
        f" --cert {PKI}/server.pem --key {PKI}/server-key.pem --client-ca {PKI}/ca.pem"
    )
    write(CONF, CONFIG)
    # The units as the module writes them: the shipped text (make test-nix
    # holds lib.nix to it) with ListenStream= on the VIP, from the store.
    cp1.succeed("cp /etc/systemd/system/vipproxy.socket /etc/systemd/system/vipproxy.service /run/")
    cp1.succeed("rm -f /etc/systemd/system/vipproxy.socket /etc/systemd/system/vipproxy.service")
    store_link("vipproxy.socket", f"sed 's/^ListenStream=.*/ListenStream={VIP}:6443/' /run/vipproxy.socket")
    store_link("vipproxy.service", "cat /run/vipproxy.service")
    write("/etc/systemd/network/60-vipproxy.netdev", NETDEV)
    write("/etc/systemd/network/60-vipproxy.network", NETWORK)
    cp1.succeed("networkctl reload")
    write("/etc/sysctl.d/60-nixos.conf", SYSCTL)
    cp1.succeed("sysctl -q -p /etc/sysctl.d/60-nixos.conf")
    # nixpkgs renders each vrrp_script with its user (services.vipproxy: nobody).
    cp1.succeed(
        f"{{ printf 'global_defs {{\\n}}\\n'; vipproxy keepalived render --config {CONF} | sed '/^vrrp_script /a\\    user nobody'; }} > {KCONF}"
    )
    cp1.succeed(f"grep -q 'user nobody' {KCONF}", f"grep -q '^global_defs' {KCONF}")
    cp1.succeed("systemctl unmask keepalived.service")
    write("/run/keepalived.service", KEEPALIVED_UNIT)
    store_link("keepalived.service", "cat /run/keepalived.service")
    cp1.succeed("systemctl daemon-reload", "systemctl start vipproxy.socket vipproxy.service keepalived.service")
    cp1.wait_until_succeeds("ip -4 addr show dev dummyvip0 | grep -qw " + VIP + "/32", timeout=60)
    cp1.succeed("test ! -e /etc/keepalived/keepalived.conf")

with subtest("keepalived's script user (nobody) passes the probe: the node holds the VIP"):
    cp1.wait_until_succeeds("runuser -u nobody -- $(command -v vipproxy) probe --config " + CONF, timeout=60)
    try:
        cp1.wait_until_succeeds(HOLDS_VIP, timeout=90)
    except Exception:
        print(cp1.execute("journalctl -b --no-pager -u keepalived.service | tail -n 40; ip -4 addr")[1])
        raise
    cp1.fail("runuser -u nobody -- curl -sS --max-time 5 --unix-socket /run/vipproxy/control.sock http://vipproxy/status")

with subtest("doctor on the healthy NixOS-shaped node passes, from what runs"):
    status, out = doctor()
    assert status == 0, f"doctor failed on the healthy node:\n{out}"
    assert "NixOS" in line(out, "drop-ins") and f"{VIP}:6443" in line(out, "drop-ins"), out
    assert KCONF in line(out, "keepalived") and "running keepalived" in line(out, "keepalived"), out
    print("RESULT nixos-twin: doctor passes on the NixOS-shaped node (keepalived.conf found from the running keepalived)")

with subtest("doctor on a broken NixOS-shaped node fails with NixOS fixes"):
    write(KCONF, "global_defs {\n}\nvrrp_instance other {\n  interface eth1\n  virtual_router_id 9\n  virtual_ipaddress {\n    192.168.1.200/32\n  }\n}\n")
    cp1.succeed("systemctl restart keepalived.service")
    cp1.succeed("sysctl -q -w net.ipv4.conf.eth1.arp_ignore=0")
    cp1.succeed("ip link del dummyvip0")
    status, out = doctor()
    assert status == 1, f"doctor passed on the broken node:\n{out}"
    for check, fix in [
        ("keepalived", "services.vipproxy.keepalived.enable"),
        ("arp", "boot.kernel.sysctl"),
        ("vip-link", "systemd-networkd"),
    ]:
        got = line(out, check)
        assert got.startswith("FAIL") and fix in got and "nixos-rebuild switch" in got, f"{check}: {got}"
    print("RESULT nixos-twin: doctor fails keepalived, arp and vip-link with NixOS fixes, no Debian path named")
