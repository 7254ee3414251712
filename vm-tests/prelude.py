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

# The stand-in apiserver wants a client certificate on every request (a
# real one answers /readyz anonymously): one_node_config's check is TCP
# unless a script names another.
TCP_CHECK = 'type = "tcp"'


def one_node_config(vip, node, health=TCP_CHECK):
    """What the operator of a one-node cluster writes into
    /etc/vipproxy/vipproxy.toml: the VIP, the node's own apiserver as the
    backend, eth1 as the uplink, and health, the [health] table's lines."""
    return f"""[vip]
addresses = ["{vip}"]

[[backend]]
name = "cp1"
address = "{node}:6443"

[network]
uplinks = ["eth1"]

[health]
{health}
"""


def neighbour_routes(peer):
    """Commands that give a node the rules and routes of its other
    tenants (Cilium's fwmark rule and local table, BIRD's and static
    routes via peer, a CNI bridge), which vipproxy must leave alone."""
    return [
        "ip rule add fwmark 0x200/0xf00 pref 9 lookup 2004",
        "ip -6 rule add fwmark 0x200/0xf00 pref 9 lookup 2004",
        "ip route add local 0.0.0.0/0 dev lo table 2004",
        "ip -6 route add local ::/0 dev lo table 2004",
        f"ip route add 10.244.1.0/24 via {peer} dev eth1 proto bird",
        "ip route add blackhole 10.244.0.0/26 proto bird",
        f"ip route add 10.96.0.0/12 via {peer} dev eth1 proto static",
        "ip link add cni0 type bridge",
        "ip addr add 10.244.0.1/24 dev cni0",
        "ip link set cni0 up",
        "ip route add 10.244.50.0/24 dev cni0",
    ]


# Every rule and route of both families, minus vipproxy's own link.
ROUTING_STATE = "{ ip rule; ip -6 rule; ip route show table all; ip -6 route show table all; } | grep -v dummyvip0 | sort"


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


def start_standins(node, address, backends, watch_interval):
    """The stand-in apiservers of backends ({name: port}) on address as
    transient units, each with mTLS (PKI) and a watch event every
    watch_interval; returns once each listens."""
    for name, port in backends.items():
        node.succeed(
            f"{RUN} --unit={name} vipproxy-apiserver --listen {address}:{port} --name {name} --watch-interval {watch_interval}"
            f" --cert {PKI}/server.pem --key {PKI}/server-key.pem --client-ca {PKI}/ca.pem"
        )
        node.wait_for_open_port(port, addr=address, timeout=90)


def load_start(node, vip):
    """Load through the VIP that a restart must ride out: a request loop
    (a new connection every 0.3 s, waiting in the socket's backlog) and
    three watches, /run/req.log and /run/watch{1,2,3}.log; returns once a
    request passed and every watch connected."""
    node.succeed("rm -f /run/req.log /run/watch*.log")
    write_reqloop(node)
    write_file(node, "/root/watch.sh", WATCH.replace("CURL", CURL))
    ct, mt = BACKLOG_WAIT["connect_timeout"], BACKLOG_WAIT["max_time"]
    node.succeed(f"{RUN} --unit=reqloop bash /root/reqloop.sh https://{vip}:6443 /run/req.log {ct} {mt} 0.3")
    for i in (1, 2, 3):
        node.succeed(f"{RUN} --unit=watch{i} bash /root/watch.sh {i} https://{vip}:6443")
    node.wait_until_succeeds("grep -q ' 0 200 ' /run/req.log", timeout=60)
    node.wait_until_succeeds("test $(cat /run/watch1.log /run/watch2.log /run/watch3.log | grep -c connect) -ge 3", timeout=30)


def watch_events(node):
    """(connects, ends) summed over load_start's three watches."""
    out = node.succeed("cat /run/watch1.log /run/watch2.log /run/watch3.log")
    return out.count("connect"), out.count(" end ")


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
