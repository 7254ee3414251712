# nodes: cp1
# reboots: cp1
# The check's credentials handed over as docs/distributions.md says: the
# config names /run/credentials/vipproxy.service/..., `vipproxy units write`
# installs the distribution's LoadCredential= drop-in, and the source files
# are root's alone (no copy the service's dynamic user could read). The
# stand-in apiserver wants a client certificate on every request, so a
# backend is up only while the check has the credentials. Every step of a
# boot that runs outside vipproxy.service (vipproxy.socket's
# ExecStartPre=vipproxy doctor, vipproxy-network.service's network apply)
# must pass without the files: the VIP is served after a real reboot, and
# doctor passes. First kubeadm's one PEM file, then k3s's certificate and
# key. Debian only (the node installs the units as the quick start does).

VIP4 = "192.168.1.100"
NODE = "192.168.1.1"
PKI = "/root/pki"
CREDS = "/run/credentials/vipproxy.service"
CURL = f"curl -sS --max-time 20 --cacert {PKI}/ca.pem --cert {PKI}/client.pem --key {PKI}/client-key.pem"
HOLDS_VIP = f"ip -4 addr show dev eth1 | grep -qw {VIP4}"

# Where each distribution keeps the kubelet's client certificate and the
# CA (examples/credentials/), filled from the test PKI, root's only.
SOURCES = {
    "kubeadm": [
        ("/etc/kubernetes/pki/ca.crt", "ca.pem"),
        ("/var/lib/kubelet/pki/kubelet-client-current.pem", "client.pem client-key.pem"),
    ],
    "k3s": [
        ("/var/lib/rancher/k3s/agent/server-ca.crt", "ca.pem"),
        ("/var/lib/rancher/k3s/agent/client-kubelet.crt", "client.pem"),
        ("/var/lib/rancher/k3s/agent/client-kubelet.key", "client-key.pem"),
    ],
}

HEALTH = {
    "kubeadm": ("ca.crt", "kubelet-client.pem", "kubelet-client.pem"),
    "k3s": ("k3s-server-ca.crt", "k3s-client-kubelet.crt", "k3s-client-kubelet.key"),
}


def config(dist):
    ca, cert, key = HEALTH[dist]
    health = f"""type = "https"
ca_file = "{CREDS}/{ca}"
cert_file = "{CREDS}/{cert}"
key_file = "{CREDS}/{key}"
"""
    return one_node_config(VIP4, NODE, health)


def install_config(dist):
    cp1.succeed(f"cat > /etc/vipproxy/vipproxy.toml <<'EOF'\n{config(dist)}EOF")


def served(what):
    """The VIP held here and answered through it by the backend, whose
    check has its client certificate (verified readiness)."""
    cp1.wait_until_succeeds(HOLDS_VIP, timeout=120)
    cp1.wait_until_succeeds(f"{CURL} https://{VIP4}:6443/name | grep -qx cp1", timeout=120)
    cp1.wait_until_succeeds("vipproxy status | grep -E '^cp1 .* up ' | grep -qv unverified", timeout=60)
    out = cp1.succeed("vipproxy doctor 2>&1")  # exit 0: no check failed
    print(out)
    # The test PKI's certificates live 7 days: the credentials check warns
    # that the kubelet's ends within 30 (a real one, a year, passes).
    assert "PASS credentials" in out or "WARN credentials health.cert_file (" in out, out
    print(f"RESULT credentials: {what}: the VIP answers through cp1, readiness verified, doctor passes")


start_all()

with subtest("boot; the stand-in apiserver (client certificates required) as an enabled unit"):
    cp1.wait_for_unit("multi-user.target")
    cp1.wait_until_succeeds(f"ip -4 addr show dev eth1 | grep -q {NODE}/24", timeout=60)
    cp1.succeed(f"vipproxy-apiserver pki --dir {PKI} --hosts {NODE},{VIP4}")
    cp1.succeed(
        "cat > /etc/systemd/system/apiserver.service <<'EOF'\n[Unit]\nAfter=network-online.target\n"
        f"[Service]\nExecStart=/opt/vipproxy/bin/vipproxy-apiserver --listen {NODE}:6443 --name cp1"
        f" --cert {PKI}/server.pem --key {PKI}/server-key.pem --client-ca {PKI}/ca.pem\n"
        "Restart=always\nRestartSec=1\n[Install]\nWantedBy=multi-user.target\nEOF",
        "systemctl daemon-reload && systemctl enable --now apiserver.service",
    )
    cp1.wait_for_open_port(6443, addr=NODE, timeout=90)
    cp1.succeed("systemctl unmask keepalived.service")

with subtest("kubeadm's files, root's only; the config names the credentials"):
    for dist, files in SOURCES.items():
        for path, parts in files:
            src = " ".join(f"{PKI}/{p}" for p in parts.split())
            cp1.succeed(f"install -d -m700 $(dirname {path}) && cat {src} > {path} && chmod 600 {path}")
    cp1.succeed("install -m755 /opt/vipproxy/bin/vipproxy /usr/bin/vipproxy", "mkdir -p /etc/vipproxy")
    install_config("kubeadm")
    # Outside vipproxy.service the files are not there, and not opened.
    cp1.fail(f"test -e {CREDS}")
    out = cp1.succeed("vipproxy check 2>&1 >/dev/null")
    assert "note: health.ca_file, health.cert_file, health.key_file name credentials of vipproxy.service" in out, out
    cp1.succeed("vipproxy check --quiet", "vipproxy network render >/dev/null", "vipproxy units render >/dev/null")

with subtest("installed as the quick start does; units write adds the credentials drop-in"):
    cp1.succeed(
        "vipproxy keepalived --out /etc/keepalived/conf.d/vipproxy.conf",
        "echo 'include /etc/keepalived/conf.d/*.conf' >> /etc/keepalived/keepalived.conf",
        "vipproxy units write",
        "grep -qx 'LoadCredential=kubelet-client.pem:/var/lib/kubelet/pki/kubelet-client-current.pem'"
        " /etc/systemd/system/vipproxy.service.d/credentials.conf",
        "systemctl daemon-reload",
        "systemctl enable --now vipproxy-network.service vipproxy.socket vipproxy.service",
        "systemctl enable keepalived.service && systemctl restart keepalived.service",
    )
    served("kubeadm's one PEM file")
    # The service's dynamic user reads its copies, and nothing else of root's.
    cp1.fail("runuser -u nobody -- cat /var/lib/kubelet/pki/kubelet-client-current.pem")

with subtest("a real reboot: the socket, the network unit and the service start without the files outside the unit"):
    cp1.reboot()
    cp1.wait_for_unit("multi-user.target")
    served("after a reboot")
    cp1.succeed("systemctl is-active vipproxy.socket vipproxy-network.service vipproxy.service keepalived.service")
    cp1.fail("journalctl -b -u vipproxy.socket -u vipproxy-network.service --no-pager | grep -Ei 'failed|exit 2'")

with subtest("k3s: certificate and key in two files"):
    install_config("k3s")
    cp1.succeed(
        "vipproxy units write",
        "grep -qx 'LoadCredential=k3s-client-kubelet.key:/var/lib/rancher/k3s/agent/client-kubelet.key'"
        " /etc/systemd/system/vipproxy.service.d/credentials.conf",
        "systemctl daemon-reload && systemctl restart vipproxy.service",
    )
    served("k3s's certificate and key")
