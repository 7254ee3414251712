# nodes: cp1
# The README's Debian quick start, followed verbatim on a fresh Debian node:
# the commands are taken from README.md between <!-- quickstart --> and
# <!-- end quickstart -->, so they cannot drift. The node gets what the quick
# start assumes: the files the package installs (the binary in /usr/bin,
# the units in /lib/systemd/system, the config in /etc/vipproxy) from this
# checkout, and an apiserver on its own IP:6443 (the stand-in). The
# operator's edit of the config is $EDITOR.
# Then the node must hold the VIP and answer on it. Debian only: a NixOS
# node is set up by the module (vm-tests/nixos-module.py).
import base64
import os
import shlex

VIP4 = "192.168.1.100"
NODE = "192.168.1.1"  # the only node is number 1
PKI = "/root/pki"
CURL = f"curl -sS --max-time 20 --cacert {PKI}/ca.pem --cert {PKI}/client.pem --key {PKI}/client-key.pem"
RUN = "systemd-run --setenv=PATH=$PATH --collect"
REPO = os.environ.get("VM_REPO", os.getcwd())

# What the operator writes into /etc/vipproxy/vipproxy.toml.
CONFIG = one_node_config(VIP4, NODE)


def put(path, data, mode="0644"):
    """Copy a file to the node in pieces: a command line of several KB
    stalls the backdoor shell."""
    blob = base64.b64encode(data).decode()
    cp1.succeed(f"mkdir -p $(dirname {path}) && : > {path}.b64")
    for i in range(0, len(blob), 1024):
        cp1.succeed(f"echo {blob[i:i + 1024]} >> {path}.b64")
    cp1.succeed(f"base64 -d {path}.b64 > {path} && rm {path}.b64 && chmod {mode} {path}")


start_all()

with subtest("boot; the stand-in apiserver on the node IP:6443"):
    cp1.wait_for_unit("multi-user.target")
    cp1.wait_until_succeeds(f"ip -4 addr show dev eth1 | grep -q {NODE}/24", timeout=60)
    cp1.succeed(f"vipproxy-apiserver pki --dir {PKI} --hosts {NODE},{VIP4}")
    cp1.succeed(
        f"{RUN} --unit=apiserver vipproxy-apiserver --listen {NODE}:6443 --name cp1"
        f" --cert {PKI}/server.pem --key {PKI}/server-key.pem --client-ca {PKI}/ca.pem"
    )
    cp1.wait_for_open_port(6443, addr=NODE, timeout=90)

with subtest("the package's files, as the quick start assumes them"):
    # Where the package puts them, and nothing in /etc/systemd/system (the
    # harness stages its own copies of the units there: not the package's).
    cp1.succeed("install -m755 /opt/vipproxy/bin/vipproxy /usr/bin/vipproxy")
    for unit in ["vipproxy.socket", "vipproxy.service", "vipproxy-network.service", "vipproxy-announce.service"]:
        cp1.succeed(f"rm -f /etc/systemd/system/{unit}")
        put(f"/lib/systemd/system/{unit}", open(os.path.join(REPO, "systemd", unit), "rb").read())
    put("/etc/vipproxy/vipproxy.toml", open(os.path.join(REPO, "examples", "vipproxy.toml"), "rb").read())
    cp1.succeed("systemctl daemon-reload")
    put("/root/vipproxy.toml", CONFIG.encode())
    put("/root/edit-config", b"#!/bin/sh\ncp /root/vipproxy.toml \"$1\"\n", mode="0755")
    cp1.fail("test -s /etc/keepalived/keepalived.conf")  # Debian 12 ships only a sample
    # The test image masks keepalived.service (the other scripts run it as a
    # transient unit); a fresh Debian has it unmasked, merely not started.
    cp1.succeed("systemctl unmask keepalived.service")

with subtest("the README's quick start, verbatim"):
    commands = readme_quickstart(REPO)
    assert any("keepalived" in c for c in commands), commands
    for command in commands:
        print(f"quickstart$ {command}")
        # Quoted for the node's shell as written: the command's own ${...}
        # expand in the bash that runs it, where EDITOR is set.
        out = cp1.succeed(f"cd /root && export EDITOR=/root/edit-config && bash -ec {shlex.quote(command)} 2>&1", timeout=300)
        print(out)
    print(f"RESULT quickstart: {len(commands)} README commands ran, the last was `{commands[-1]}`")

with subtest("a working node: it holds the VIP and answers on it"):
    if cp1.execute(f"ip -4 addr show dev eth1 | grep -qw {VIP4}")[0] != 0:
        cp1.sleep(10)
        print(cp1.execute("/usr/bin/vipproxy probe --config /etc/vipproxy/vipproxy.toml 2>&1")[1])
        print(cp1.execute("vipproxy status 2>&1; journalctl -u vipproxy.service --no-pager -o cat | tail -n 30")[1])
    cp1.wait_until_succeeds(f"ip -4 addr show dev eth1 | grep -qw {VIP4}", timeout=90)
    name = cp1.succeed(f"{CURL} https://{VIP4}:6443/name").strip()
    assert name == "cp1", f"via the VIP: {name!r}"
    out = cp1.succeed("vipproxy status")
    print(out)
    assert f"VIP {VIP4}:6443: held by this node on eth1" in out and "keepalived.service: active" in out, out
    cp1.succeed("systemctl is-active vipproxy.socket vipproxy.service keepalived.service vipproxy-network.service")
    print(f"RESULT quickstart: the node holds {VIP4} and answers on it (backend cp1)")

with subtest("systemctl reload reports a refused config; the old one keeps serving"):
    cp1.succeed("cp /etc/vipproxy/vipproxy.toml /root/good.toml")
    cp1.succeed("printf '[limits]\\nmax_connections = -1\\n' >> /etc/vipproxy/vipproxy.toml")
    cp1.fail("systemctl reload vipproxy.service")
    cp1.succeed("journalctl -u vipproxy.service --no-pager | grep -q 'limits.max_connections'")
    cp1.succeed(f"{CURL} https://{VIP4}:6443/name")
    cp1.succeed("cp /root/good.toml /etc/vipproxy/vipproxy.toml", "systemctl reload vipproxy.service")
    print("RESULT reload: a bad file fails `systemctl reload`, the old config serves on; a good one reloads")
