# nodes: cp1
# stage: upgrade
# A restart and a binary upgrade under 1,000 watches, with real systemd
# (Debian only: the upgrade installs a second build over the staged one).
# Two stand-in apiservers on the node send an event on every watch every
# EVENT_EVERY; `vipproxy-apiserver load` holds WATCHES watches through the
# VIP and opens a new connection (a full mTLS handshake and GET /name)
# every CONNECT_EVERY, each whether or not the one before was answered.
# Then
#  1. `systemctl restart vipproxy.service`;
#  2. a binary upgrade: another build of vipproxy (the same source, another
#     version stamped: stage.sh's upgrade/) takes the unit's binary path,
#     as a package upgrade replaces the file, and the service is restarted.
# Asserted, in every window (set-up, steady, restart, upgrade): 0 watches
# cut, 0 lines out of sequence (a stream that lost or repeated a byte),
# 0 failed new connections, every watch streaming at the end; the new
# daemon resumed every watch (its journal); after the upgrade the daemon
# is the other build. Measured and printed: the restart's own duration
# (systemctl restart, which returns once the new daemon is ready), each
# watch's longest silence, and the new connections' delay (connect to the
# answer's first line: p50, p99, max). The delay is asserted (p99 at most
# 200 ms) only on a quiet guest, where a steady window's p99 is under 20 ms:
# under TCG on a loaded host a handshake alone takes longer.
import json
import os
import time

VIP4 = "192.168.1.100"
NODE = "192.168.1.1"  # the only node is number 1
BACKENDS = {"cp1a": 7443, "cp1b": 8443}
# 1,000 watches, with an event on each every 2 s and a new connection
# every second, not every 100 ms: 1,000 watches at 100 ms are 10,000 TLS
# records a second through the daemon, which took 0.35 of a host core for
# the stand-in and the client alone (loopback, no proxy, host at load 20,
# 2026-12-06), and the TCG guest on that host completed about 5 mTLS
# handshakes a second in all (client and server in the guest): new
# connections every 100 ms waited 14 s (p50) in its queue. On a guest that
# can (KVM): VM_HANDOVER_EVENT_EVERY=100ms VM_HANDOVER_CONNECT_EVERY=100ms.
WATCHES = int(os.environ.get("VM_HANDOVER_WATCHES", "1000"))
EVENT_EVERY = os.environ.get("VM_HANDOVER_EVENT_EVERY", "2s")
CONNECT_EVERY = os.environ.get("VM_HANDOVER_CONNECT_EVERY", "1s")
STATUS = "/run/load-status.json"
REPORT = "/run/load-report.json"
# The unit's binary (stage.sh rewrites ExecStart= to the staging disk) and
# the other build.
BINARY = "/opt/vipproxy/bin/vipproxy"
UPGRADE = "/opt/vipproxy/upgrade/vipproxy"
# A steady window's p99 below this: a guest quiet enough for the bound.
QUIET_P99_MS = 20
BOUND_P99_MS = 200

CONFIG = f"""[vip]
addresses = ["{VIP4}"]

[network]
uplinks = ["eth1"]

[health]
type = "tcp"
interval = "1s"
""" + "".join(f'\n[[backend]]\nname = "{n}"\naddress = "{NODE}:{p}"\n' for n, p in BACKENDS.items())


def status():
    return json.loads(cp1.succeed(f"cat {STATUS}"))


def wait_status(what, ok, timeout):
    """Poll the load's status file until ok(status); bounded."""
    deadline = time.monotonic() + timeout
    while True:
        s = status()
        if ok(s):
            return s
        if time.monotonic() > deadline:
            print(cp1.execute("systemctl status load vipproxy.service --no-pager | tail -n 30; free -m; cat /proc/loadavg")[1])
            raise AssertionError(f"not {what} within {timeout} s: {s}")
        cp1.sleep(1)


def close_window(n):
    """End window n (SIGUSR1) and return its report."""
    cp1.succeed("systemctl kill --kill-whom=main -s USR1 load.service")
    cp1.wait_until_succeeds(f"grep -q '\"window\":{n},' {REPORT}", timeout=60)
    return json.loads(cp1.succeed(f"cat {REPORT}"))


def show(what, r):
    secs = r["to"] - r["from"]
    rate = r["events"] / secs / WATCHES if secs > 0 else 0
    print(
        f"RESULT {what}: {r['up']} of {r['watches']} watches streaming, {r['cut']} cut {r.get('cut_by') or ''}, "
        f"{r['corrupt']} out of sequence, {r['events']} events in {secs:.1f} s ({rate:.2f}/s per watch, one every {EVENT_EVERY} sent); "
        f"longest silence per watch p50 {r['gap_p50_ms']:.0f} ms, p99 {r['gap_p99_ms']:.0f} ms, max {r['gap_max_ms']:.0f} ms; "
        f"new connections {r['connections']}, {r['failed']} failed{' (' + r['first_error'] + ')' if r.get('first_error') else ''}, "
        f"delay p50 {r['delay_p50_ms']:.0f} ms, p99 {r['delay_p99_ms']:.0f} ms, max {r['delay_max_ms']:.0f} ms"
    )


def assert_kept(what, r):
    show(what, r)
    assert r["cut"] == 0, f"{what}: {r['cut']} watches cut: {r.get('cut_by')}"
    assert r["corrupt"] == 0, f"{what}: {r['corrupt']} watch lines out of sequence"
    assert r["failed"] == 0, f"{what}: {r['failed']} new connections failed: {r.get('first_error')}"
    assert r["up"] == WATCHES, f"{what}: {r['up']} of {WATCHES} watches streaming"


def journal_field(since, message, field):
    line = cp1.succeed(f"journalctl -u vipproxy.service --since '{since}' -o cat | grep '{message}' | tail -n1 || true").strip()
    for f in line.split():
        if f.startswith(field + "="):
            return line, int(f.split("=", 1)[1])
    return line, 0


def phases(since):
    """The restart's phases from the daemons' journal: the old one storing
    its connections, systemd starting the new one, the new one taking them."""
    marks = {}
    out = cp1.succeed(f"journalctl -u vipproxy.service --since '{since}' -o short-unix")
    for line in out.splitlines():
        for key, msg in (("stop", "stopping: no longer accepting"), ("stored", "handed connections over"),
                         ("started", "connection cap"), ("resumed", "resumed the connections")):
            if msg in line and key not in marks:
                marks[key] = float(line.split()[0])
    if len(marks) < 4:
        return f"journal marks missing: {marks}"
    return (f"storing {marks['stored'] - marks['stop']:.1f} s, new daemon started after {marks['started'] - marks['stored']:.1f} s, "
            f"taking the connections {marks['resumed'] - marks['started']:.1f} s")


def restart(what, window):
    """Restart vipproxy.service under the load; window n covers it."""
    since = cp1.succeed("date '+%Y-%m-%d %H:%M:%S'").strip()
    t0, t1 = map(float, cp1.succeed(
        "t0=$(date +%s.%N); systemctl restart vipproxy.service; echo $t0 $(date +%s.%N)", timeout=300).split())
    print(f"RESULT {what}: systemctl restart took {t1 - t0:.2f} s")
    # Settled: every watch has streamed after the restart returned, and a
    # new connection started 2 s after it was answered.
    wait_status(f"settled after the {what}", lambda s: s["oldest_event"] > t1 and s["last_answered"] > t1 + 2, timeout=300)
    r = close_window(window)
    assert_kept(what, r)
    old, handed = journal_field(since, "handed connections over", "handed_over")
    new, resumed = journal_field(since, "resumed the connections", "resumed")
    print(f"RESULT {what}: journal: {old} / {new}; {phases(since)}")
    assert handed >= WATCHES and resumed >= WATCHES, f"{what}: handed over {handed}, resumed {resumed}, want the {WATCHES} watches at least"
    return t1 - t0, r


start_all()

with subtest("boot, stand-in apiservers, config, units"):
    cp1.wait_for_unit("multi-user.target")
    cp1.succeed(f"vipproxy-apiserver pki --dir {PKI} --hosts {NODE},{VIP4}", f"chmod 0644 {PKI}/*")
    start_standins(cp1, NODE, BACKENDS, EVENT_EVERY)
    write_file(cp1, CONF, CONFIG)
    cp1.succeed(f"vipproxy check --config {CONF}", f"vipproxy units write --config {CONF}", "systemctl daemon-reload")
    cp1.succeed(f"systemctl show -p ExecStart vipproxy.service | grep -q 'path={BINARY} '")
    cp1.succeed("systemctl start vipproxy-network.service vipproxy.socket vipproxy.service", timeout=180)
    cp1.wait_until_succeeds(f"{CURL} --max-time 20 https://{VIP4}:6443/name", timeout=120)
    cp1.succeed("journalctl -u vipproxy.service -o cat | grep -q 'hands the connections over through the file descriptor store'")

with subtest(f"{WATCHES} watches through the VIP and new connections every {CONNECT_EVERY}"):
    cp1.succeed(
        f"{RUN} --unit=load vipproxy-apiserver load --target {VIP4}:6443 --ca {PKI}/ca.pem --cert {PKI}/client.pem"
        f" --key {PKI}/client-key.pem --watches {WATCHES} --connect-every {CONNECT_EVERY} --status {STATUS} --report {REPORT}"
    )
    cp1.wait_until_succeeds(f"test -s {STATUS}", timeout=60)
    t = time.monotonic()
    wait_status(f"{WATCHES} watches streaming", lambda s: s["up"] == WATCHES and s["oldest_event"] > 0, timeout=900)
    print(f"RESULT set-up: {WATCHES} watches streaming after {time.monotonic() - t:.0f} s")
    assert_kept("set-up", close_window(0))
    # A steady window of 30 new connections, the reference for the delay.
    wait_status("30 new connections answered", lambda s: s["connections"] >= 30, timeout=600)
    steady = close_window(1)
    assert_kept("steady", steady)
    print(cp1.succeed("cat /proc/loadavg; free -m; ps -o rss,pcpu,comm -C vipproxy,vipproxy-apiser"))

with subtest("1. systemctl restart vipproxy.service"):
    took_restart, r_restart = restart("restart", 2)

with subtest("2. binary upgrade: another build installed, then restarted"):
    old = cp1.succeed("vipproxy status | head -n 3")
    new_version = cp1.succeed(f"{UPGRADE} --version").split()[1]  # "vipproxy VERSION"
    assert new_version not in old, f"the running daemon is already {new_version}: {old}"
    # The unit's binary path now holds the other build (a new file at the
    # path, as dpkg's rename or a new store path gives); the running
    # daemon keeps the old one.
    cp1.succeed(f"mount --bind {UPGRADE} {BINARY}", f"{BINARY} --version | grep -qw {new_version}")
    took_upgrade, r_upgrade = restart("upgrade", 3)
    cp1.succeed(f"vipproxy status | grep -qw {new_version}")
    print(f"RESULT upgrade: the daemon is now {new_version}")

with subtest("figures"):
    print(
        f"RESULT handover under {WATCHES} watches: restart {took_restart:.2f} s, new connections delayed p99 "
        f"{r_restart['delay_p99_ms']:.0f} ms, max {r_restart['delay_max_ms']:.0f} ms; upgrade {took_upgrade:.2f} s, p99 "
        f"{r_upgrade['delay_p99_ms']:.0f} ms, max {r_upgrade['delay_max_ms']:.0f} ms; steady p99 {steady['delay_p99_ms']:.0f} ms; "
        "0 watches cut, 0 failed"
    )
    if steady["delay_p99_ms"] <= QUIET_P99_MS:
        for what, r in (("restart", r_restart), ("upgrade", r_upgrade)):
            assert r["delay_p99_ms"] <= BOUND_P99_MS, f"{what}: new connections delayed {r['delay_p99_ms']} ms at p99 on a quiet guest"
    else:
        print(f"RESULT delay bound ({BOUND_P99_MS} ms at p99) not asserted: a steady window's p99 is {steady['delay_p99_ms']:.0f} ms, over {QUIET_P99_MS} ms (a loaded or emulated guest)")
    cp1.succeed("systemctl stop load cp1a cp1b")
