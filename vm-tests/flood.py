# nodes: cp1
# The fd flood (service/daemon TestFloodKeepsConnections) at the shipped
# unit's LimitNOFILE=65536 (VIPPROXY_FLOOD_NOFILE=unit), in a guest: this
# host's hard RLIMIT_NOFILE (20,000) cannot be raised without
# CAP_SYS_RESOURCE; root in the guest can. The test binary and the binaries
# it starts come from the staging disk (VM_GO_TESTS=./service/daemon), the
# unit it reads the limit from is the staged systemd/vipproxy.service.
# Debian harness only; slow under TCG: `make vm-test-flood` (3 GiB guest).
import re

T = "/root/t"
# The guest's one vCPU is emulated (TCG, -cpu qemu64): the test's 500 ms
# TLS checks failed there before the flood began (2026-12-01, all three
# backends down), and an mTLS handshake under qemu-user's TCG alone took
# 5x native (25 ms against 5 ms). 20x gives the checks 10 s, the /readyz
# probes 2 s apart (the hold: 100 s, 10 check intervals). It scales CPU
# time only: a check starved of descriptors fails at once either way.
SLOWDOWN = 20

start_all()

with subtest("boot"):
    cp1.wait_for_unit("multi-user.target")
    cp1.succeed("test -x /opt/vipproxy/tests/daemon.test")

with subtest("TestFloodKeepsConnections at the unit's LimitNOFILE"):
    limit = cp1.succeed("sed -n 's/^LimitNOFILE=//p' /opt/vipproxy/systemd/vipproxy.service").strip()
    # The test reads ../../systemd/vipproxy.service from its package directory.
    cp1.succeed(f"mkdir -p {T}/service/daemon {T}/systemd", f"cp /opt/vipproxy/systemd/vipproxy.service {T}/systemd/")
    rc, out = cp1.execute(
        f"cd {T}/service/daemon && VIPPROXY_FLOOD_NOFILE=unit VIPPROXY_TEST_SLOWDOWN={SLOWDOWN} VIPPROXY_TEST_BIN=/opt/vipproxy/bin"
        " /opt/vipproxy/tests/daemon.test -test.run '^TestFloodKeepsConnections$' -test.v -test.count=1 -test.timeout 40m 2>&1",
        timeout=2700,
    )
    # The summary comes first: a failure's daemon log follows it and is long.
    print(out if len(out) < 8000 else out[:3000] + "\n[...]\n" + out[-4000:])
    m = re.search(r"nofile (\d+), .*connection cap .*", out)
    assert m, "the flood test printed no summary line"
    print(f"RESULT flood at LimitNOFILE={limit}: {m.group(0)}")
    assert "--- SKIP" not in out, "the flood test skipped in the guest"
    assert rc == 0 and "--- PASS: TestFloodKeepsConnections" in out, f"the flood test failed (exit {rc})"
    assert m.group(1) == limit, f"ran at nofile {m.group(1)}, not the unit's {limit}"
