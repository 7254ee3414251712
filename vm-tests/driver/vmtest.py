"""A small NixOS-test-driver look-alike for Debian VMs under qemu.

It implements exactly the subset of the NixOS test driver API that the
scenario scripts in vm-tests/*.py use, so the same scripts run here and in
runNixOSTest:

  start_all(), subtest(name), machines, and per node (a global named after it):
  start, execute, succeed, fail, wait_until_succeeds, wait_until_fails,
  wait_for_unit, wait_for_open_port, wait_for_closed_port, crash, shutdown,
  sleep, log, name.

Each VM has a root shell on a virtconsole (the "backdoor", as in NixOS). A
command travels as one line `vm-run BASE64 TIMEOUT`; the guest answers with
one framed line holding the exit status and base64 stdout and stderr.

Network, as in NixOS tests: every node on VLAN 1 as eth1 with 192.168.1.N/24
and 2001:db8:1::N/64, N = 1-based alphabetical position of its name. The VMs'
taps hang on one bridge inside a private network namespace that this process
runs in (see run.py): nothing touches the host's interfaces.
"""

import base64
import contextlib
import ctypes
import glob
import os
import signal
import socket
import subprocess
import sys
import threading
import time

PR_SET_PDEATHSIG = 1
READY = b"__VM_BACKDOOR_READY__"
FRAME = b"__VM_RC__ "


# What collect_journals keeps of each VM after a failure: the end of its
# journal (keepalived's adverts left out), then the stacks of every
# goroutine of vipproxy.service, last because taking them ends the daemon:
# SIGQUIT makes a Go program write them to stderr (the journal) and exit.
JOURNAL_TAIL = "journalctl -b --no-pager -o short-monotonic | grep -v Keepalived_vrrp | tail -n 1500"
GOROUTINES = (
    "systemctl is-active -q vipproxy.service || { echo 'vipproxy.service is not running'; exit 0; }; "
    "since=$(date +%s); systemctl kill -s QUIT vipproxy.service; sleep 3; "
    "journalctl -u vipproxy.service --since @$since --no-pager -o cat"
)
# Each as NODE.NAME.log in the run directory, in this order.
COLLECTED = (("journal", JOURNAL_TAIL), ("goroutines", GOROUTINES))


class TestFailure(Exception):
    """A command's result was not what the script asked for."""


def _die_with_parent():
    # qemu must not outlive the driver, whatever kills the driver.
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    os.setpgrp()


class Arch:
    """How to boot one guest architecture with qemu (TCG)."""

    def __init__(self, name, image_dir):
        self.name = name
        self.image_dir = image_dir

    def qemu(self):
        return {
            "amd64": ["qemu-system-x86_64", "-M", "pc", "-cpu", "qemu64"],
            "arm64": ["qemu-system-aarch64", "-M", "virt", "-cpu", "max,pauth-impdef=on"],
            "riscv64": ["qemu-system-riscv64", "-M", "virt", "-bios", "default"],
        }[self.name]

    def console(self):
        return {"amd64": "ttyS0", "arm64": "ttyAMA0", "riscv64": "ttyS0"}[self.name]


class Machine:
    """One VM and its backdoor shell."""

    def __init__(self, driver, name, number, nodes, own_disk=False):
        self.driver = driver
        # A disk of its own (a sparse copy of the image, made at the first
        # start) keeps what the guest wrote across reboot(); None: the
        # shared image with snapshot=on, fresh at every start.
        self.own_disk = os.path.join(driver.run_dir, f"{name}.rootfs.ext4") if own_disk else None
        if self.own_disk is not None:
            with contextlib.suppress(FileNotFoundError):
                os.remove(self.own_disk)  # an older run's: every run starts from the image
        self.name = name
        self.number = number
        self.nodes = nodes
        self.proc = None
        self.listener = None
        self.conn = None
        self.buf = b""
        self.started_at = None
        self.boot_seconds = None
        self.tap = f"tap{number}"
        self.last_stderr = ""
        self.boot_thread = None
        self.boot_error = None

    def __repr__(self):
        return f"<Machine {self.name}>"

    # --- lifecycle -------------------------------------------------------

    def start(self):
        """Boot the VM; like NixOS, do not wait: the first command waits."""
        if self.proc is not None:
            return
        d = self.driver
        sock = os.path.join(d.run_dir, f"{self.name}.sock")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(sock)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(sock)
        self.listener.listen(1)
        img = d.arch.image_dir
        append = " ".join([
            # no_timer_check: on a loaded host the emulated 8254 timer can miss
            # the kernel's boot check ("IO-APIC + timer doesn't work", a panic;
            # seen on amd64 at load 16), which proves nothing about vipproxy.
            f"console={d.arch.console()}", "rw", "mitigations=off", "panic=-1", "loglevel=4", "no_timer_check",
            "systemd.show_status=auto", "systemd.log_level=warning", "systemd.firstboot=no",
            f"vm.name={self.name}", f"vm.n={self.number}", f"vm.nodes={','.join(self.nodes)}",
        ])
        mac = f"52:54:00:12:01:{self.number:02x}"
        cmd = d.arch.qemu() + [
            # Several vCPUs run on as many host threads (multi-threaded TCG).
            "-accel", "tcg,thread=multi" if d.smp > 1 else "tcg", "-smp", str(d.smp), "-m", str(d.memory_mib),
            "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
            "-kernel", os.path.join(img, "kernel"), "-initrd", os.path.join(img, "initrd"),
            "-append", append,
            "-chardev", f"file,id=con,path={os.path.join(d.run_dir, self.name + '.console.log')}",
            "-serial", "chardev:con",
            "-drive", self._root_drive(img),
            "-device", "virtio-blk-pci,drive=root",
            "-device", "virtio-serial-pci",
            "-chardev", f"socket,id=bd,path={sock}",
            "-device", "virtconsole,chardev=bd",
            "-netdev", f"tap,id=n1,ifname={self.tap},script=no,downscript=no",
            "-device", f"virtio-net-pci,netdev=n1,mac={mac}",
        ]
        if d.opt_image:
            cmd += ["-drive", f"file={d.opt_image},format=raw,if=none,id=opt,snapshot=on,readonly=off",
                    "-device", "virtio-blk-pci,drive=opt"]
        d.net_attach(self.tap)
        self.started_at = time.monotonic()
        log_path = os.path.join(d.run_dir, f"{self.name}.qemu.log")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=open(log_path, "wb"),
                                     stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        d.log(f"{self.name}: qemu started (pid {self.proc.pid})")
        # Wait for the shell in the background, so the boot time is measured
        # when the guest is ready, not when the script first needs the node.
        self.boot_error = None
        self.boot_thread = threading.Thread(target=self._wait_for_shell, daemon=True)
        self.boot_thread.start()

    def _root_drive(self, img):
        shared = os.path.join(img, "rootfs.ext4")
        if self.own_disk is None:
            return f"file={shared},format=raw,if=none,id=root,snapshot=on"
        if not os.path.exists(self.own_disk):
            subprocess.run(["cp", "--sparse=always", shared, self.own_disk], check=True)
        return f"file={self.own_disk},format=raw,if=none,id=root"

    def reboot(self):
        """Reboot the guest (systemctl reboot) and boot it again on the same
        disk, as NixOS's machine.reboot(): only for a node named in the
        script's `# reboots:` header, whose disk keeps what was written."""
        if self.own_disk is None:
            raise TestFailure(f"{self.name}: reboot() needs '# reboots: {self.name}' in the script's header (a disk of its own)")
        self.driver.log(f"{self.name}: reboot")
        self._connect()
        with contextlib.suppress(OSError):
            self.conn.sendall(b"systemctl reboot\n")
        try:
            self.proc.wait(300)  # -no-reboot: qemu exits when the guest resets
        except subprocess.TimeoutExpired:
            raise TestFailure(f"{self.name}: still running 300 s after systemctl reboot") from None
        self._stop(graceful=False)
        self.start()

    def _wait_for_shell(self, timeout=600):
        try:
            self._accept_shell(timeout)
        except Exception as e:  # handed to the first command
            self.boot_error = e

    def _connect(self):
        """Wait for the backdoor shell of a started VM."""
        if self.proc is None:
            raise TestFailure(f"{self.name}: not started")
        if self.boot_thread is not None:
            self.boot_thread.join()
            self.boot_thread = None
            if self.boot_error is not None:
                raise self.boot_error

    def _accept_shell(self, timeout):
        deadline = time.monotonic() + timeout
        self.listener.settimeout(timeout)
        try:
            self.conn, _ = self.listener.accept()
        except socket.timeout:
            raise TestFailure(f"{self.name}: qemu never connected its virtconsole") from None
        while READY not in self.buf:
            self.buf += self._recv(deadline, "boot")
        self.buf = self.buf.split(READY, 1)[1]
        self.boot_seconds = time.monotonic() - self.started_at
        self.driver.log(f"{self.name}: shell ready after {self.boot_seconds:.1f} s")
        self.driver.record_boot(self.name, self.boot_seconds)

    def _recv(self, deadline, what):
        left = deadline - time.monotonic()
        if left <= 0:
            raise TestFailure(f"{self.name}: timed out waiting for {what} (see {self.name}.console.log)")
        if self.proc.poll() is not None:
            raise TestFailure(f"{self.name}: qemu exited with {self.proc.returncode} during {what}")
        self.conn.settimeout(min(left, 1.0))
        try:
            data = self.conn.recv(65536)
        except socket.timeout:
            return b""
        if not data:
            raise TestFailure(f"{self.name}: backdoor closed during {what}")
        return data

    def crash(self):
        """Power the VM off at once (no shutdown)."""
        self.driver.log(f"{self.name}: crash")
        self._stop(graceful=False)

    def shutdown(self):
        """Shut the VM down cleanly and wait for qemu to exit."""
        self.driver.log(f"{self.name}: shutdown")
        if self.conn is not None:
            with contextlib.suppress(OSError):
                self.conn.sendall(b"systemctl poweroff\n")
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(60)
        self._stop(graceful=False)

    def _stop(self, graceful):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for s in (self.conn, self.listener):
            if s is not None:
                s.close()
        self.proc = self.conn = self.listener = None
        self.buf = b""
        self.driver.net_detach(self.tap)

    # --- commands --------------------------------------------------------

    def execute(self, command, check_return=True, check_output=True, timeout=900):
        """Run a shell command; return (exit status, stdout)."""
        self._connect()
        limit = 900 if timeout is None else int(timeout)
        self.conn.sendall(f"vmrun {_bash_quote(command)} {limit}\n".encode())
        deadline = time.monotonic() + limit + 20
        while True:
            i = self.buf.find(FRAME)
            if i >= 0:
                j = self.buf.find(b"\n", i)
                if j >= 0:
                    break
            self.buf += self._recv(deadline, f"command {command!r}")
        line = self.buf[i + len(FRAME):j].decode()
        self.buf = self.buf[j + 1:]
        parts = line.split(" ")
        status = int(parts[0])
        out = base64.b64decode(parts[1]).decode(errors="replace") if len(parts) > 1 else ""
        err = base64.b64decode(parts[2]).decode(errors="replace") if len(parts) > 2 else ""
        self.driver.log_command(self.name, command, status, out, err)
        self.last_stderr = err
        return status, out

    def succeed(self, *commands, timeout=None):
        """Run each command; fail the test unless each exits 0. Return stdouts."""
        output = ""
        for command in commands:
            status, out = self.execute(command, timeout=timeout)
            if status != 0:
                raise TestFailure(f"{self.name}: command `{command}` failed (exit code {status})"
                                  + _tail(self.last_stderr))
            output += out
        return output

    def fail(self, *commands, timeout=None):
        """Run each command; fail the test if any exits 0."""
        output = ""
        for command in commands:
            status, out = self.execute(command, timeout=timeout)
            if status == 0:
                raise TestFailure(f"{self.name}: command `{command}` unexpectedly succeeded")
            output += out
        return output

    def wait_until_succeeds(self, command, timeout=900):
        """Retry once a second until the command exits 0; return its stdout."""
        deadline = time.monotonic() + timeout
        while True:
            status, out = self.execute(command, timeout=max(1, int(deadline - time.monotonic())))
            if status == 0:
                return out
            if time.monotonic() >= deadline:
                raise TestFailure(f"{self.name}: `{command}` did not succeed within {timeout} s")
            time.sleep(1)

    def wait_until_fails(self, command, timeout=900):
        """Retry once a second until the command exits non-zero."""
        deadline = time.monotonic() + timeout
        while True:
            status, out = self.execute(command, timeout=max(1, int(deadline - time.monotonic())))
            if status != 0:
                return out
            if time.monotonic() >= deadline:
                raise TestFailure(f"{self.name}: `{command}` did not fail within {timeout} s")
            time.sleep(1)

    def wait_for_unit(self, unit, user=None, timeout=900):
        """Wait until a unit is active; fail at once if it failed."""
        if user is not None:
            raise TestFailure("wait_for_unit(user=...) is not supported by this driver")
        deadline = time.monotonic() + timeout
        while True:
            out = self.execute(f"systemctl show --property=ActiveState --property=LoadState {unit}")[1]
            props = dict(l.split("=", 1) for l in out.splitlines() if "=" in l)
            state = props.get("ActiveState")
            if state == "active":
                return
            if state == "failed":
                raise TestFailure(f"{self.name}: unit {unit} reached state failed")
            if props.get("LoadState") == "not-found":
                raise TestFailure(f"{self.name}: no unit {unit}")
            if time.monotonic() >= deadline:
                raise TestFailure(f"{self.name}: unit {unit} not active within {timeout} s ({props})")
            time.sleep(1)

    def wait_for_open_port(self, port, addr="localhost", timeout=900):
        self.wait_until_succeeds(_probe_port(addr, port), timeout=timeout)

    def wait_for_closed_port(self, port, addr="localhost", timeout=900):
        self.wait_until_fails(_probe_port(addr, port), timeout=timeout)

    def sleep(self, secs):
        time.sleep(secs)

    def log(self, msg):
        self.driver.log(f"{self.name}: {msg}")


def _tail(text, lines=6):
    text = text.strip()
    return "\n  stderr: " + "\n          ".join(text.splitlines()[-lines:]) if text else ""


def _bash_quote(s):
    """Quote s as a bash $'...' string: one line, any byte."""
    out = []
    for b in s.encode():
        c = chr(b)
        if c in "\\'":
            out.append("\\" + c)
        elif 32 <= b < 127:
            out.append(c)
        else:
            out.append(f"\\x{b:02x}")
    return "$'" + "".join(out) + "'"


def _probe_port(addr, port):
    host = addr.strip("[]")
    return f"timeout 2 bash -c 'exec 3<>/dev/tcp/{host}/{port}'"


class Driver:
    """Owns the VMs, the bridge, the log and the summary of one run."""

    def __init__(self, arch, run_dir, nodes, opt_image=None, memory_mib=384, smp=1, reboots=()):
        self.arch = arch
        self.run_dir = run_dir
        self.opt_image = opt_image
        self.memory_mib = memory_mib
        self.smp = smp
        self.t0 = time.monotonic()
        self.steps = []  # (name, status, seconds, error)
        self.results = []  # lines the script printed starting with "RESULT"
        self.boots = {}
        self.command_log = open(os.path.join(run_dir, "commands.log"), "w")
        for name, _ in COLLECTED:
            for stale in glob.glob(os.path.join(run_dir, f"*.{name}.log")):
                os.remove(stale)  # collected on failure: none may be left from an older run
        self.bridge_up()
        names = sorted(nodes)
        self.machines = [Machine(self, n, i + 1, names, own_disk=n in reboots) for i, n in enumerate(names)]

    # --- network (inside the private netns that run.py made) -------------

    def _ip(self, *args):
        subprocess.run(["ip", *args], check=True)

    def bridge_up(self):
        self._ip("link", "set", "lo", "up")
        self._ip("link", "add", "br0", "type", "bridge", "forward_delay", "0", "mcast_snooping", "0")
        with open("/proc/sys/net/ipv6/conf/br0/disable_ipv6", "w") as f:
            f.write("1")
        self._ip("link", "set", "br0", "up")

    def net_attach(self, tap):
        self._ip("tuntap", "add", tap, "mode", "tap")
        self._ip("link", "set", tap, "master", "br0", "up")

    def net_detach(self, tap):
        subprocess.run(["ip", "link", "del", tap], stderr=subprocess.DEVNULL)

    # --- logging and summary ---------------------------------------------

    def log(self, msg):
        print(f"[{time.monotonic() - self.t0:7.1f}s] {msg}", flush=True)

    def log_command(self, node, command, status, out, err):
        t = time.monotonic() - self.t0
        self.command_log.write(f"[{t:7.1f}s] {node} $ {command}\n  -> exit {status}\n")
        for name, text in (("stdout", out), ("stderr", err)):
            if text:
                self.command_log.write(f"  {name}:\n" + "".join(f"    {l}\n" for l in text.splitlines()[-40:]))
        self.command_log.flush()
        if status != 0 and os.environ.get("VM_VERBOSE"):
            self.log(f"{node}: exit {status}: {command[:120]!r} {err.strip()[-300:]}")

    def record_boot(self, name, seconds):
        self.boots[name] = seconds

    def script_print(self, *args, **kwargs):
        """print() for the script: also keeps the RESULT lines for the summary."""
        text = " ".join(str(a) for a in args)
        if text.startswith("RESULT"):
            self.results.append(text[len("RESULT"):].strip(" :"))
        self.log(text)

    @contextlib.contextmanager
    def subtest(self, name):
        self.log(f"subtest: {name}")
        start = time.monotonic()
        try:
            yield
        except BaseException as e:
            self.steps.append((name, "FAIL", time.monotonic() - start, str(e) or type(e).__name__))
            raise
        self.steps.append((name, "ok", time.monotonic() - start, ""))

    def start_all(self):
        for m in self.machines:
            m.start()

    def globals(self):
        g = {
            "start_all": self.start_all,
            "subtest": self.subtest,
            "machines": self.machines,
            "driver": self,
            "print": self.script_print,
        }
        for m in self.machines:
            g[m.name.replace("-", "_")] = m
        return g

    def summary(self, ok, error=None):
        lines = ["", "=" * 72, f"VM test summary ({self.arch.name})", "-" * 72]
        for name in sorted(self.boots):
            lines.append(f"  boot {name:<10} shell ready in {self.boots[name]:6.1f} s")
        for name, status, secs, err in self.steps:
            lines.append(f"  [{status:>4}] {name:<52} {secs:6.1f} s")
            if err:
                lines.append(f"         {err[:300]}")
        for r in self.results:
            lines.append(f"  result: {r}")
        lines.append("-" * 72)
        verdict = "PASS" if ok else f"FAIL: {error}"
        lines.append(f"  {verdict}   total {time.monotonic() - self.t0:.1f} s   logs: {self.run_dir}")
        lines.append("=" * 72)
        print("\n".join(lines), flush=True)

    def collect_journals(self):
        """After a failure: each running VM's journal into the run directory
        (NAME.journal.log), then the daemon's goroutines (NAME.goroutines.log,
        GOROUTINES): where a connection that timed out was waiting. Without
        them a failure of 2026-12-02 (a TLS handshake through the VIP that
        never finished) could not be told from a slow VM."""
        for m in self.machines:
            if m.conn is None:
                continue
            for name, command in COLLECTED:
                try:
                    _, out = m.execute(command, timeout=120)
                except Exception as e:  # a broken VM must not hide the real failure
                    out = f"{name} unavailable: {e}"
                with open(os.path.join(self.run_dir, f"{m.name}.{name}.log"), "w") as f:
                    f.write(out)

    def cleanup(self):
        for m in self.machines:
            with contextlib.suppress(Exception):
                m._stop(graceful=False)
        with contextlib.suppress(Exception):
            subprocess.run(["ip", "link", "del", "br0"], stderr=subprocess.DEVNULL)
        self.command_log.close()


# What every script shares, run before it in its globals (nixos.nix puts
# it in front of each testScript).
PRELUDE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "prelude.py")


def run_script(driver, path):
    """Run one scenario script with the driver's globals; True if it passed."""
    prelude = compile(open(PRELUDE).read(), PRELUDE, "exec")
    code = compile(open(path).read(), path, "exec")
    try:
        scope = driver.globals()
        exec(prelude, scope)
        exec(code, scope)
    except Exception as e:  # the script failed: report it, never crash the summary
        import traceback
        traceback.print_exc(file=sys.stdout)
        driver.collect_journals()
        return False, f"{type(e).__name__}: {e}"
    return True, None
