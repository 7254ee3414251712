#!/usr/bin/env python3
"""Offline checks of what a VM run would find only on a NixOS node.

usage: lint.py [--vipproxy BIN] SCRIPT.py...

- Every `systemd-run` in a script passes PATH on (--setenv=PATH=$PATH):
  transient units get the manager's PATH, which on NixOS holds systemd's
  own bin/ and no general tools (systemd.globalEnvironment reaches only
  generated units), so a loop calling curl or date through PATH finds nothing.
- Every property `systemctl show -p NAME` reads exists in systemd's D-Bus
  API (org.freedesktop.systemd1(5)): for an unknown name systemctl prints
  nothing and exits 0, so the check after it fails for the wrong reason.
- With --vipproxy: what that binary renders (keepalived or BIRD, networkd, sysctl.d,
  the socket drop-in) from every config in nix/tests/cases names no
  /usr/bin, /bin or /sbin path: NixOS has none of them for vipproxy, and the
  binary lives wherever the package put it.
Exits 1 on any finding.
"""
import gzip
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(HERE, "..", "nix", "tests", "cases")
DBUS_MAN = "/usr/share/man/man5/org.freedesktop.systemd1.5.gz"

TRANSIENT = re.compile(r"systemd-run\b(?! --setenv=PATH=\$PATH\b)(?!.*# no PATH on purpose)")
SHOW_PROPERTY = re.compile(r"systemctl show\b[^\"'\n]*?(?:-p |--property=)([A-Za-z,]+)")
FHS_PATH = re.compile(r"(?<![\w./-])/(?:usr/)?s?bin/[\w.-]+")


def transient_units(path, text):
    return [
        f"{path}:{text.count(chr(10), 0, m.start()) + 1}: systemd-run without --setenv=PATH=$PATH: "
        "on NixOS a transient unit's PATH has no general tools"
        for m in TRANSIENT.finditer(text)
    ]


def dbus_properties():
    """Property names of org.freedesktop.systemd1 (None when the man page is absent)."""
    if not os.path.exists(DBUS_MAN):
        return None
    with gzip.open(DBUS_MAN, "rt", errors="replace") as f:
        return set(re.findall(r"^\s*(?:readonly|readwrite)\s+\S+\s+(\w+)\s*=", f.read(), re.M))


def unknown_properties(path, text, known):
    out = []
    for m in SHOW_PROPERTY.finditer(text):
        for name in m.group(1).split(","):
            if name not in known:
                line = text.count("\n", 0, m.start()) + 1
                out.append(f"{path}:{line}: systemctl show: {name} is not a systemd property "
                           "(org.freedesktop.systemd1(5)); systemctl prints nothing for it")
    return out


def rendered_files(binary):
    """Render every case with binary from a directory outside /usr: findings."""
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "store", "bin", "vipproxy")
        os.makedirs(os.path.dirname(exe))
        shutil.copy(binary, exe)
        for case in sorted(os.listdir(CASES)):
            conf = os.path.join(CASES, case)
            root = os.path.join(tmp, "root-" + case)
            bgp = 'mode = "bgp"' in open(conf).read()
            # A bgp-mode node has no keepalived (the command refuses): its BIRD file instead.
            texts = {"bird" if bgp else "keepalived": run(exe, "bird" if bgp else "keepalived", "render", "--config", conf)}
            run(exe, "network", "render", "--config", conf, "--root", root)
            run(exe, "units", "render", "--config", conf, "--root", root)
            for dirpath, _, files in os.walk(root):
                for f in files:
                    with open(os.path.join(dirpath, f)) as fh:
                        texts[os.path.relpath(os.path.join(dirpath, f), root)] = fh.read()
            for name, text in texts.items():
                for m in FHS_PATH.finditer(text):
                    out.append(f"{case}: rendered {name} names {m.group(0)}: the binary is {exe}")
            if not bgp and exe + " probe" not in texts["keepalived"] and "probe_command" not in open(conf).read():
                out.append(f"{case}: the rendered vrrp_script does not run {exe} probe")
    return out


def run(*args):
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


def self_test():
    """Each check finds the break it exists for (a planted one)."""
    misses = []
    if not transient_units("planted", 'm.succeed("systemd-run --unit=loop --collect bash loop.sh")'):
        misses.append("a transient unit without PATH")
    if transient_units("fixed", 'RUN = "systemd-run --setenv=PATH=$PATH --collect"'):
        misses.append("a transient unit with PATH was reported")
    known = dbus_properties()
    if known is not None and not unknown_properties("planted", '"systemctl show -p FileDescriptorNames x.socket"', known):
        misses.append("systemctl show -p FileDescriptorNames")
    if not FHS_PATH.search('script "/usr/bin/vipproxy probe --config /etc/vipproxy/vipproxy.toml"'):
        misses.append("a rendered /usr/bin/vipproxy")
    if FHS_PATH.search('script "/nix/store/abc-vipproxy/bin/vipproxy probe"'):
        misses.append("a store path was reported")
    for m in misses:
        print("lint: self-test FAIL: missed", m, file=sys.stderr)
    return misses


def main(argv):
    if self_test():
        return 1
    binary = None
    if argv[:1] == ["--vipproxy"]:
        binary, argv = argv[1], argv[2:]
    findings = []
    known = dbus_properties()
    if known is None:
        print(f"lint: {DBUS_MAN} missing (man pages not installed): systemctl property names not checked")
    for path in argv:
        with open(path) as f:
            text = f.read()
        findings += transient_units(path, text)
        if known is not None:
            findings += unknown_properties(path, text, known)
    if binary:
        findings += rendered_files(binary)
    for f in findings:
        print("lint: FAIL:", f, file=sys.stderr)
    what = "transient units, systemctl properties" + (", rendered files" if binary else "")
    print(f"lint: {len(argv)} scripts ({what}): {len(findings)} findings")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
