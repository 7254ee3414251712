# nodes: cp1
# stage: debs
# The .deb on a fresh Debian node, as an operator lives with it: install
# (nothing starts: the config is the example), the quick start from the
# package, the VIP served; then, under a request loop and three watches
# through the VIP, an upgrade (0.1.0 -> 0.1.1), a downgrade and a
# reinstall: 0 failed requests, the operator's conffile kept, vipproxy.socket
# never restarted. A new binary that refuses the existing config leaves the
# old daemon serving and says why. Removal takes the VIP off the node;
# purge leaves no VIP, drop-in, sysctl file, unit or config. Debian only
# (NixOS has the module). The two .debs are `make release` builds of this
# checkout (vm-tests/stage.sh, VM_STAGE_DEBS) on the staging disk, built
# for the guest's architecture: make vm-test-all runs this on amd64, arm64
# and riscv64 (Debian 13 there), make test on amd64.
import os
import shlex

VIP4 = "192.168.1.100"
NODE = "192.168.1.1"  # the only node is number 1
PKI = "/root/pki"
CURL = f"curl -sS --cacert {PKI}/ca.pem --cert {PKI}/client.pem --key {PKI}/client-key.pem"
DEBS = "/opt/vipproxy/debs"
OLD, NEW = "0.1.0", "0.1.1"
# The package's commands first: the staging disk's own vipproxy
# (/opt/vipproxy/bin, first in the test shell's PATH) is for the stand-in
# apiserver only. A `vipproxy keepalived` found there would render its path.
SH = "export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/opt/vipproxy/bin; "
# dpkg must never wait for an answer here (a conffile prompt): no stdin.
APT = "DEBIAN_FRONTEND=noninteractive apt-get -y"


def deb(version):
    """The staged .deb of version for the guest's architecture (Debian's
    name for it: amd64, arm64, riscv64), as `make release` names it."""
    return f"./vipproxy_{version}-1_{ARCH}.deb"


# What the operator writes into /etc/vipproxy/vipproxy.toml.
CONFIG = one_node_config(VIP4, NODE)

# The quick start of README.md for the .deb, in order (the operator's
# editor is $EDITOR).
REPO = os.environ.get("VM_REPO", os.getcwd())

UNITS = "vipproxy.socket vipproxy.service vipproxy-network.service vipproxy-announce.service"


# An apt run under TCG on a busy 2-core host took up to 250 s (2026-12-06,
# load 15-20): the timeouts only catch a hang.
def sh(command, timeout=900):
    return cp1.succeed(SH + command, timeout=timeout)


def show(unit, prop):
    return cp1.succeed(f"systemctl show -p {prop} --value {unit}").strip()


def socket_identity():
    """What changes when vipproxy.socket is started again."""
    return show("vipproxy.socket", "ActiveEnterTimestamp"), show("vipproxy.socket", "InvocationID")


def daemon():
    """vipproxy.service's main pid and the binary it runs ("(deleted)" once
    a package replaced it)."""
    pid = show("vipproxy.service", "MainPID")
    assert pid != "0", "vipproxy.service is not running"
    return pid, cp1.succeed(f"readlink /proc/{pid}/exe").strip()


def installed_version():
    return cp1.succeed("dpkg-query -W -f '${Version} ${db:Status-Abbrev}' vipproxy").strip()


def under_load(what, command):
    """Run one apt command under the loop and watches: every request
    answered, the watches connected again after it, the socket kept."""
    sock = socket_identity()
    t0 = float(cp1.succeed("date +%s.%N"))
    c0, e0 = watch_events(cp1)
    out = sh(f"cd {DEBS} && {command} </dev/null 2>&1")
    print(out)
    t1 = float(cp1.succeed("date +%s.%N"))
    try:
        cp1.wait_until_succeeds(f"test $(awk '$1 > {t1} + 0 && $2 == 0' /run/req.log | wc -l) -ge 3", timeout=300)
        cp1.wait_until_succeeds("for i in 1 2 3; do tail -n1 /run/watch$i.log | grep -q connect || exit 1; done", timeout=120)
    except Exception:
        print(cp1.execute("tail -n 30 /run/req.log; tail -n 5 /run/watch*.log; systemctl status vipproxy.service --no-pager | tail -n 30")[1])
        raise
    rows = [r.split() for r in cp1.succeed(f"awk '$1 > {t0}' /run/req.log").splitlines()]
    bad = [r for r in rows if r[1] != "0" or r[2] != "200"]
    c1, e1 = watch_events(cp1)
    print(f"RESULT {what}: {len(rows)} requests, {len(bad)} failed; watches closed {e1 - e0}, reconnected {c1 - c0}; vipproxy.socket {'kept' if socket_identity() == sock else 'RESTARTED'}")
    assert not bad, f"{what}: failed requests: {bad[:5]}"
    assert socket_identity() == sock, f"{what} restarted vipproxy.socket: {sock} -> {socket_identity()}"
    return out


def no_vip_left(what):
    cp1.wait_until_fails(f"ip -4 addr show | grep -qw {VIP4}", timeout=60)
    cp1.fail("ip link show dummyvip0")
    cp1.fail("ls /etc/systemd/network/ /etc/systemd/networkd.conf.d/ 2>/dev/null | grep -q vipproxy")
    cp1.fail("test -e /etc/sysctl.d/60-vipproxy.conf")
    print(f"RESULT {what}: no {VIP4} on any link, no dummyvip0, no networkd drop-in, no sysctl file")


start_all()

with subtest("a fresh Debian node; the stand-in apiserver on the node IP:6443"):
    cp1.wait_for_unit("multi-user.target")
    cp1.wait_until_succeeds(f"ip -4 addr show dev eth1 | grep -q {NODE}/24", timeout=60)
    # The harness installs this checkout's units for the other scripts; a
    # fresh node has none (the package brings them), nor a masked keepalived.
    cp1.succeed("rm -f /etc/systemd/system/vipproxy*", "systemctl unmask keepalived.service", "systemctl daemon-reload")
    cp1.fail("test -e /usr/bin/vipproxy")
    # The package for this guest's architecture, as dpkg names it.
    ARCH = cp1.succeed("dpkg --print-architecture").strip()
    cp1.succeed(f"test -f {DEBS}/{deb(OLD)} && test -f {DEBS}/{deb(NEW)}")
    cp1.succeed(f"vipproxy-apiserver pki --dir {PKI} --hosts {NODE},{VIP4}")
    cp1.succeed(
        f"{RUN} --unit=apiserver vipproxy-apiserver --listen {NODE}:6443 --name cp1 --watch-interval 10s"
        f" --cert {PKI}/server.pem --key {PKI}/server-key.pem --client-ca {PKI}/ca.pem"
    )
    cp1.wait_for_open_port(6443, addr=NODE, timeout=90)
    write_file(cp1, "/root/vipproxy.toml", CONFIG)
    write_file(cp1, "/root/edit-config", '#!/bin/sh\ncp /root/vipproxy.toml "$1"')
    cp1.succeed("chmod 755 /root/edit-config")

with subtest("the quick start from the package"):
    # The package installed, then the README's quick start verbatim.
    QUICKSTART = [f"{APT} install {deb(OLD)}"] + readme_quickstart(REPO)
    for i, command in enumerate(QUICKSTART):
        print(f"quickstart$ {command}")
        out = sh(f"cd {DEBS} && export EDITOR=/root/edit-config && bash -ec {shlex.quote(command)} </dev/null 2>&1")
        print(out)
        if i == 0:
            # Installed, nothing started or enabled: the config is the example.
            assert installed_version() == f"{OLD}-1 ii", installed_version()
            cp1.succeed("cmp /etc/vipproxy/vipproxy.toml /usr/share/doc/vipproxy/examples/vipproxy.toml")
            for unit in UNITS.split():
                cp1.fail(f"systemctl is-active --quiet {unit}")
                cp1.fail(f"systemctl is-enabled --quiet {unit}")
            cp1.fail("ip link show dummyvip0")
            assert OLD in sh("vipproxy version"), sh("vipproxy version")
            print("RESULT package install: vipproxy installed, no unit enabled or started, no link")
    sh("systemctl is-active vipproxy.socket vipproxy.service vipproxy-network.service keepalived.service")
    cp1.wait_until_succeeds(f"ip -4 addr show dev eth1 | grep -qw {VIP4}", timeout=90)
    assert sh(f"{CURL} --max-time 20 https://{VIP4}:6443/name").strip() == "cp1"
    cp1.succeed("test -d /var/lib/private/vipproxy")  # the state directory, for purge
    print(f"RESULT package quickstart: {len(QUICKSTART)} commands; the node holds {VIP4} and answers on it")

with subtest("upgrade, downgrade and reinstall under requests and watches"):
    edited = cp1.succeed("sha256sum /etc/vipproxy/vipproxy.toml")
    sock = socket_identity()
    net = show("vipproxy-network.service", "ActiveEnterTimestampMonotonic")
    load_start(cp1, VIP4)
    for what, version, command in [
        (f"upgrade {OLD} -> {NEW}", NEW, f"{APT} install {deb(NEW)}"),
        (f"downgrade {NEW} -> {OLD}", OLD, f"{APT} install --allow-downgrades {deb(OLD)}"),
        (f"reinstall {OLD}", OLD, f"{APT} install --reinstall {deb(OLD)}"),
    ]:
        before = daemon()
        out = under_load(what, command)
        assert installed_version() == f"{version}-1 ii", installed_version()
        after = daemon()
        assert after[0] != before[0] and not after[1].endswith("(deleted)"), f"{what}: the daemon was not restarted: {before} -> {after}"
        assert version in sh("vipproxy version")
        assert "vipproxy.socket keeps the VIP listener" in out, out
        assert cp1.succeed("sha256sum /etc/vipproxy/vipproxy.toml") == edited, f"{what} changed the operator's config"
    assert show("vipproxy-network.service", "ActiveEnterTimestampMonotonic") != net, "vipproxy-network.service was not restarted"
    assert socket_identity() == sock
    print(f"RESULT package upgrades: the operator's config kept, vipproxy.socket started once ({sock[0]})")

with subtest("a new binary that refuses the config: the old daemon serves on and the package says why"):
    cp1.succeed("cp /etc/vipproxy/vipproxy.toml /root/good.toml")
    # The operator's edit, not yet reloaded: the running daemon has the old file.
    cp1.succeed("printf '[limits]\\nmax_connections = -1\\n' >> /etc/vipproxy/vipproxy.toml")
    before = daemon()
    out = under_load(f"upgrade {OLD} -> {NEW} with a refused config", f"{APT} install {deb(NEW)}")
    assert installed_version() == f"{NEW}-1 ii", installed_version()
    assert "NOT restarted" in out and "limits.max_connections" in out, out
    after = daemon()
    assert after == (before[0], "/usr/bin/vipproxy (deleted)"), f"the old daemon was replaced: {before} -> {after}"
    assert sh(f"{CURL} --max-time 20 https://{VIP4}:6443/name").strip() == "cp1"
    print(f"RESULT package refused config: {NEW} installed, the {OLD} daemon (pid {after[0]}) serves on; the package said: "
          + " / ".join(line for line in out.splitlines() if "NOT restarted" in line))
    # What the message says to do, once the file is fixed.
    cp1.succeed("cp /root/good.toml /etc/vipproxy/vipproxy.toml")
    sh("vipproxy check --quiet --config /etc/vipproxy/vipproxy.toml")
    under_load("the operator restarts after fixing the file", "systemctl restart vipproxy-network.service vipproxy.service")
    assert not daemon()[1].endswith("(deleted)")
    cp1.succeed("systemctl stop reqloop watch1 watch2 watch3")

with subtest("remove: the units stopped, the VIP off the node, the config kept"):
    print(sh(f"{APT} remove vipproxy </dev/null 2>&1"))
    for unit in UNITS.split():
        cp1.fail(f"systemctl is-active --quiet {unit}")
    no_vip_left("package remove")
    cp1.succeed("test -f /etc/vipproxy/vipproxy.toml")
    cp1.fail(f"{CURL} --max-time 10 https://{VIP4}:6443/name")

with subtest("purge: nothing of vipproxy left"):
    print(sh(f"{APT} purge vipproxy </dev/null 2>&1"))
    status = cp1.execute("dpkg-query -W -f '${db:Status-Abbrev}' vipproxy 2>/dev/null")[1].strip()
    assert status in ("", "un", "pn"), f"dpkg still knows vipproxy: {status!r}"
    cp1.fail("test -e /etc/vipproxy")
    cp1.fail("test -e /var/lib/vipproxy || test -e /var/lib/private/vipproxy")
    left = cp1.succeed("find /etc/systemd /lib/systemd /usr/lib/systemd /run/systemd/system /etc/keepalived -name '*vipproxy*'").strip()
    assert not left, f"purge left {left}"
    cp1.succeed("systemctl daemon-reload")
    units = cp1.succeed("systemctl list-unit-files --no-legend 'vipproxy*'; systemctl list-units --all --no-legend 'vipproxy*'").strip()
    assert not units, f"units after purge: {units}"
    no_vip_left("package purge")
    print("RESULT package purge: no config, state, unit, drop-in, sysctl file or VIP left")
