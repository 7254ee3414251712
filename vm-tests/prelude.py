# What the scenario scripts share. Not a script itself (no `# nodes:`
# header): the Debian driver (driver/vmtest.py run_script) runs it before
# each script in the script's globals, and nixos.nix puts it in front of
# each testScript, so a script uses these names as if it defined them
# (make vm-lint gives pyflakes them as builtins).
CONF = "/etc/vipproxy/vipproxy.toml"
PKI = "/etc/vipproxy/pki"
CURL = f"curl -sS --cacert {PKI}/ca.pem --cert {PKI}/client.pem --key {PKI}/client-key.pem"
# Transient units get the manager's PATH, which on NixOS has no general
# tools (systemd.globalEnvironment reaches generated units only): pass the
# shell's own on (vm-tests/lint.py checks that every transient unit gets it).
RUN = "systemd-run --setenv=PATH=$PATH --collect"

# vipproxy's [network] table with every path it writes under /run: on
# NixOS /etc is generated.
NETWORK_UNDER_RUN = """[network]
interface = "dummyvip0"
uplinks = ["eth1"]
networkd_dir = "/run/systemd/network"
sysctl_file = "/run/sysctl.d/60-vipproxy.conf"
socket_dropin = "/run/systemd/system/vipproxy.socket.d/50-listen.conf"
"""

# reqloop URL LOG CONNECT_TIMEOUT MAX_TIME PAUSE: one mTLS request every
# PAUSE s, each on a new connection; a line per request:
#   <start epoch> <curl exit> <http code> <apiserver name>
# The request loops that must ride out a daemon restart in the socket's
# backlog. curl's connect timeout covers the TLS handshake, which waits for
# the new process: on a loaded TCG host the restart (the old process's
# drain, ExecStartPre, the new start) took 22 s, and a request with a 20 s
# connect timeout failed (neighbours.py in a two-lane vm-test-ci,
# 2026-12-02); on a real node it takes under a second.
BACKLOG_WAIT = {"connect_timeout": 60, "max_time": 90}


REQLOOP = r"""#!/bin/bash
url=$1 log=$2 ct=$3 mt=$4 pause=$5
body=$log.body
while :; do
    t=$(date +%s.%N)
    code=$(CURL --connect-timeout "$ct" --max-time "$mt" -o "$body" -w '%{http_code}' "$url/name" 2>/dev/null)
    rc=$?
    echo "$t $rc ${code:-000} $(cat "$body" 2>/dev/null)" >> "$log"
    rm -f "$body"
    sleep "$pause"
done
"""

# watch N URL: one watch stream, reconnected when it ends; /run/watchN.log
# gets "<epoch> connect" per connection and "<epoch> end <curl exit>" per end.
WATCH = r"""#!/bin/bash
n=$1 url=$2
while :; do
    echo "$(date +%s.%N) connect" >> /run/watch$n.log
    CURL -N --max-time 600 -o /dev/null "$url/watch" 2>/dev/null
    echo "$(date +%s.%N) end $?" >> /run/watch$n.log
    sleep 0.5
done
"""


def write_file(node, path, text):
    node.succeed(f"mkdir -p $(dirname {path}) && rm -f {path} && cat > {path} <<'__EOF__'\n{text}\n__EOF__")


def write_reqloop(node):
    """REQLOOP as /root/reqloop.sh on node, asking with CURL."""
    write_file(node, "/root/reqloop.sh", REQLOOP.replace("CURL", CURL))


def copy_dir(src, dst_nodes, path):
    """Copy a small directory between nodes through the driver."""
    blob = src.succeed(f"tar -C {path} -cz . | base64 -w0").strip()
    for node in dst_nodes:
        node.succeed(f"mkdir -p {path} && echo {blob} | base64 -d | tar -C {path} -xz")


def ptp_pod(n, node_ip):
    """The commands for a ptp-style pod `ptp` (10.244.N.10) on a node: an
    unnumbered veth whose only way out is the node's own address, what
    hairpin traffic to the VIP must survive."""
    return [
        "ip netns add ptp",
        "ip link add vptp type veth peer name eth0 netns ptp",
        "ip link set vptp up",
        "ip -n ptp link set lo up",
        f"ip -n ptp addr add 10.244.{n}.10/32 dev eth0",
        "ip -n ptp link set eth0 up",
        f"ip -n ptp route add {node_ip} dev eth0 scope link",
        f"ip -n ptp route add default via {node_ip} dev eth0",
        f"ip route add 10.244.{n}.10/32 dev vptp",
    ]


def netns_requests(node, netns, url, count):
    """count mTLS requests from a network namespace on node, each on a new
    connection with a full handshake (Connection: close, no TLS session
    reuse), by one curl: a process per request costs more than the request
    under TCG. The names that answered, in order."""
    urls = " ".join([f"{url}/name"] * count)
    out = node.succeed(
        f"ip netns exec {netns} {CURL} --fail-early --no-sessionid -H 'Connection: close' -w '\\n' --max-time 15 {urls}",
        timeout=300,
    )
    names = [l.strip() for l in out.splitlines() if l.strip()]
    assert len(names) == count, f"{node.name}/{netns}: {len(names)} of {count} requests answered: {names}"
    return names


def readme_quickstart(repo):
    """The README's quick start: the commands between its <!-- quickstart -->
    markers, comment lines left out (Debian scripts; repo is the checkout)."""
    import os
    import re
    text = open(os.path.join(repo, "README.md")).read()
    m = re.search(r"<!-- quickstart -->\s*```sh\n(.*?)```\s*<!-- end quickstart -->", text, re.S)
    assert m, "README.md has no <!-- quickstart --> sh block"
    return [line for line in m.group(1).splitlines() if line.strip() and not line.lstrip().startswith("#")]
