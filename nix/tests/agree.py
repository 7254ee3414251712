#!/usr/bin/env python3
"""Show that nix/lib.nix (the NixOS module) and the Go renderer derive the
same host setup from the same vipproxy TOML file: networkd .netdev/.network,
sysctl.d, the socket's ListenStream= values and keepalived's VRRP instance,
or in bgp mode the BIRD file.

usage: agree.py [--go-defaults DEFAULTS.json] VIPPROXY_BINARY CASE.toml...
       (exit 1 on any difference; DEFAULTS.json: service/config.Default() as
       TestWriteAgreeDefaults writes it, held to lib.nix's defaults)
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SYSTEMD = os.path.join(HERE, "..", "..", "systemd")


def run(*args):
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


def parse_unit(text):
    """systemd unit text -> sorted list of (section, sorted (key, value))."""
    sections, current = [], None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            current = (line[1:-1], [])
            sections.append(current)
            continue
        key, _, value = line.partition("=")
        current[1].append((key.strip(), value.strip()))
    return sorted((name, sorted(entries)) for name, entries in sections)


def nix_unit(sections):
    """lib.nix section attrs (a list value = repeated section) -> same form."""
    out = []
    for name, body in sections.items():
        for one in body if isinstance(body, list) else [body]:
            out.append((name, sorted((k, str(v)) for k, v in one.items())))
    return sorted(out)


def socket_settings(shipped, dropin, name):
    """A socket unit's [Socket] settings as systemd reads them: the shipped
    unit's lines (%i as name), the drop-in's over them; the command lines
    and ListenStream= (compared apart) left out."""
    out = {}
    for text in (shipped.replace("%i", name), dropin):
        for section, entries in parse_unit(text):
            for k, v in entries:
                if section == "Socket" and k != "ListenStream" and not k.startswith("Exec"):
                    out[k] = v
    return out


def parse_sysctl(text):
    out = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        key, _, value = line.partition("=")
        out[key.strip()] = value.strip()
    return out


def keepalived_blocks(text):
    """keepalived.conf text -> {block name: {keyword: [rest...]}} for the
    top-level vrrp_script/vrrp_instance blocks; nested blocks become
    keyword -> list of their lines."""
    blocks, stack = {}, []
    for raw in text.splitlines():
        line = raw.split("#")[0].split("!")[0].strip()
        if not line:
            continue
        if line.endswith("{"):
            head = line[:-1].strip()
            if not stack:
                stack.append(blocks.setdefault(head, {}))
            else:
                stack[-1][head] = []
                stack.append(stack[-1][head])
            continue
        if line == "}":
            stack.pop()
            continue
        if not stack:
            continue
        top = stack[-1]
        if isinstance(top, list):
            top.append(" ".join(line.split()))
        else:
            word, _, rest = line.partition(" ")
            top[word] = " ".join(rest.split())
    return blocks


def nixos_keepalived_text(name, inst, script_name, script):
    """The vrrp_* blocks the nixpkgs keepalived module writes for these
    option values (its template, reduced to the fields we set)."""
    lines = [f"vrrp_script {script_name} {{",
             f'  script "{script["script"]}"',
             f"  interval {script['interval']}",
             f"  timeout {script['timeout']}",
             f"  fall {script['fall']}",
             f"  rise {script['rise']}",
             "}",
             f"vrrp_instance {name} {{",
             f"  interface {inst['interface']}",
             f"  state {inst['state']}",
             f"  virtual_router_id {inst['virtualRouterId']}",
             f"  priority {inst['priority']}"]
    if inst["unicastSrcIp"] is not None:
        lines.append(f"  unicast_src_ip {inst['unicastSrcIp']}")
    if inst["unicastPeers"]:
        lines += ["  unicast_peer {"] + [f"    {p}" for p in inst["unicastPeers"]] + ["  }"]
    lines.append("  virtual_ipaddress {")
    lines += [f"    {ip['addr']} dev {ip['dev']}" for ip in inst["virtualIps"]]
    lines.append("  }")
    lines += ["  track_script {"] + [f"    {t}" for t in inst["trackScripts"]] + ["  }"]
    lines.append(inst["extraConfig"])
    lines.append("}")
    return "\n".join(lines)


def compare(case, what, go, nix, failures):
    if go != nix:
        failures.append(f"{case}: {what} differ\n  go:  {go}\n  nix: {nix}")


def check_case(binary, case, failures):
    nix = json.loads(run("nix-instantiate", "--eval", "--strict", "--json",
                         os.path.join(HERE, "render.nix"), "--arg", "file", os.path.abspath(case)))
    with tempfile.TemporaryDirectory() as root:
        run(binary, "network", "write", "--config", case, "--root", root)
        run(binary, "units", "write", "--config", case, "--root", root)
        bgp = nix["birdConfig"] is not None
        keepalived = "" if bgp else run(binary, "keepalived", "render", "--config", case)
        bird = run(binary, "bird", "render", "--config", case) if bgp else None
        written = {}
        for dirpath, _, files in os.walk(root):
            for f in files:
                with open(os.path.join(dirpath, f)) as fh:
                    written[os.path.relpath(os.path.join(dirpath, f), root)] = fh.read()

    def one(suffix):
        hits = [p for p in written if p.endswith(suffix)]
        if len(hits) != 1:
            failures.append(f"{case}: expected one {suffix} file from the Go renderer, got {hits}")
            return "", ""
        return hits[0], written[hits[0]]

    netdev_path, netdev = one(".netdev")
    network_path, network = one(".network")
    sysctl_path = [p for p in written if p.startswith("etc/sysctl.d/")]
    socket_path = [p for p in written if "vipproxy.socket.d" in p]

    compare(case, ".netdev file name", os.path.basename(netdev_path), nix["netdevName"] + ".netdev", failures)
    compare(case, ".network file name", os.path.basename(network_path), nix["networkName"] + ".network", failures)
    compare(case, ".netdev", parse_unit(netdev), nix_unit(nix["netdev"]), failures)
    compare(case, ".network", parse_unit(network), nix_unit(nix["network"]), failures)
    compare(case, "sysctl.d", parse_sysctl(written[sysctl_path[0]]) if sysctl_path else None,
            {k: str(v) for k, v in nix["sysctl"].items()}, failures)
    streams = [v for s, e in parse_unit(written[socket_path[0]]) for k, v in e if k == "ListenStream" and v] if socket_path else None
    compare(case, "ListenStream=", sorted(streams or []), sorted(nix["listenStreams"]), failures)
    names = [v for s, e in parse_unit(written[socket_path[0]]) for k, v in e if k == "FileDescriptorName"] if socket_path else []
    compare(case, "vipproxy.socket FileDescriptorName=", (names or ["vip"])[-1], nix["firstSocketName"], failures)
    # Every other port: its vipproxy-port@NAME.socket drop-in.
    go_ports = {}
    for path, text in written.items():
        unit = os.path.basename(os.path.dirname(path))
        if unit.startswith("vipproxy-port@") and unit.endswith(".socket.d"):
            go_ports[unit[:-len(".socket.d")]] = sorted(v for s, e in parse_unit(text) for k, v in e if k == "ListenStream" and v)
    nix_ports = {unit: sorted(v["listenStreams"]) for unit, v in nix["portSockets"].items()}
    compare(case, "port sockets", go_ports, nix_ports, failures)
    # Every socket's [Socket] settings (ReusePort= with vip.reuse_port):
    # systemd/'s unit with the Go drop-in, and the module's.
    with open(os.path.join(SYSTEMD, "vipproxy.socket")) as fh:
        shipped = {"vipproxy": fh.read()}
    with open(os.path.join(SYSTEMD, "vipproxy-port@.socket")) as fh:
        template = fh.read()
    dropins = {}
    for path, text in written.items():
        unit = os.path.basename(os.path.dirname(path))
        if unit == "vipproxy.socket.d" or (unit.startswith("vipproxy-port@") and unit.endswith(".socket.d")):
            dropins[unit[:-len(".socket.d")]] = text
    go_sockets = {u: socket_settings(shipped.get(u, template), text, u.partition("@")[2])
                  for u, text in dropins.items()}
    compare(case, "socket [Socket] settings", go_sockets, nix["socketConfigs"], failures)

    compare(case, "BIRD file (vipproxy bird)", bird, nix["birdConfig"], failures)
    if bgp:
        return nix
    go_k = keepalived_blocks(keepalived)
    nix_k = keepalived_blocks(nixos_keepalived_text(
        nix["instanceName"], nix["vrrpInstance"], nix["probeScriptName"], nix["vrrpScript"]))
    for block in sorted(set(go_k) | set(nix_k)):
        go_b, nix_b = dict(go_k.get(block, {})), dict(nix_k.get(block, {}))
        if block.startswith("vrrp_script"):
            # The command differs by design (store path vs probe_command).
            go_b.pop("script", None)
            nix_b.pop("script", None)
        compare(case, f"keepalived {block}", go_b, nix_b, failures)
    return nix


def check_defaults(go_defaults, failures):
    """lib.nix's defaults (the module's options read them too) are
    service/config.Default()'s, key by key; Go's TOML leaves an empty
    list out."""
    with open(go_defaults) as f:
        go = json.load(f)
    nix = json.loads(run("nix-instantiate", "--eval", "--strict", "--json", "-E",
                         f"(import {os.path.join(HERE, '..', 'lib.nix')}).defaults"))
    n = 0
    for table, keys in sorted(nix.items()):
        for key, value in sorted(keys.items()):
            want = go.get(table, {}).get(key, [] if value == [] else "<not in Go's defaults>")
            compare("lib.nix defaults", f"{table}.{key}", want, value, failures)
            n += 1
    return n


def main(argv):
    args = argv[1:]
    failures = []
    if args[:1] == ["--go-defaults"]:
        n = check_defaults(args[1], failures)
        if not failures:
            print(f"agree: lib.nix's {n} defaults are service/config's")
        for f in failures:
            print("FAIL", f)
        args = args[2:]
    binary, cases = args[0], args[1:]
    failed_defaults = len(failures)
    for case in cases:
        check_case(binary, case, failures)
    for f in failures[failed_defaults:]:
        print("FAIL", f)
    failed = {f.split(':')[0] for f in failures[failed_defaults:]}
    print(f"agree: {len(cases) - len(failed)} passed, {len(failed)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
