"""Run NixOS-test-style scenario scripts on Debian VMs.

usage: run.py --arch amd64 --image DIR [--opt opt.ext4] --run-dir DIR SCRIPT.py

The script names its nodes in a header line `# nodes: client cp1 cp2 cp3`
(the runNixOSTest .nix file declares the same nodes).

Isolation: run.py re-executes itself in a new network namespace
(`unshare --net --fork --kill-child`): the bridge and the taps live only
there, and the namespace disappears with the last process in it. qemu runs
with PR_SET_PDEATHSIG=SIGKILL, so nothing outlives the driver even on
SIGKILL; SIGINT/SIGTERM/normal exit stop every VM explicitly first.
"""

import argparse
import os
import re
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vmtest  # noqa: E402

INSIDE = "VIPPROXY_VM_NETNS"


def nodes_of(script):
    for line in open(script):
        m = re.match(r"#\s*nodes:\s*(.+)", line)
        if m:
            return m.group(1).split()
    raise SystemExit(f"{script}: no '# nodes: ...' header line")


def reboots_of(script):
    """The nodes the script reboots (`# reboots: cp1`): each gets a disk of
    its own that keeps what the guest wrote across reboots, as a NixOS test
    VM's does; the others boot from the shared image, snapshot=on."""
    for line in open(script):
        m = re.match(r"#\s*reboots:\s*(.+)", line)
        if m:
            return m.group(1).split()
    return []


def reexec_in_netns():
    env = dict(os.environ, **{INSIDE: str(os.getpid())})
    argv = ["unshare", "--net", "--fork", "--kill-child", "--", sys.executable, *sys.argv]
    os.execvpe("unshare", argv, env)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--arch", default="amd64", choices=["amd64", "arm64", "riscv64"])
    p.add_argument("--image", required=True, help="directory made by image.sh")
    p.add_argument("--opt", help="ext4 image mounted at /opt/vipproxy (made by stage.sh)")
    p.add_argument("--run-dir", required=True)
    p.add_argument("--memory", type=int, default=384)
    p.add_argument("--smp", type=int, default=1, help="vCPUs per VM (multi-threaded TCG)")
    p.add_argument("script")
    a = p.parse_args()

    if os.environ.get(INSIDE) is None:
        reexec_in_netns()

    os.makedirs(a.run_dir, exist_ok=True)

    def on_signal(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)

    driver = vmtest.Driver(vmtest.Arch(a.arch, os.path.abspath(a.image)), os.path.abspath(a.run_dir),
                           nodes_of(a.script), opt_image=a.opt and os.path.abspath(a.opt),
                           memory_mib=a.memory, smp=a.smp, reboots=reboots_of(a.script))
    ok, error = False, "interrupted"
    try:
        ok, error = vmtest.run_script(driver, a.script)
    except KeyboardInterrupt as e:
        error = f"interrupted ({e})"
    finally:
        driver.cleanup()
        driver.summary(ok, error)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
