package cli

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vipproxy/vipproxy/internal/testutil"
)

// nobody is the unprivileged user keepalived's track script runs as on
// NixOS (services.vipproxy sets vrrpScripts.*.user = "nobody"), and the
// hostile local user of the tests below.
const nobody = 65534

// probeUser stands for a probe that cannot reach the control socket:
// vipproxy announce's dynamic user, or a script user other than nobody.
const probeUser = 65533

// probeHome is a directory as systemd leaves it for the tests that run
// processes as other users: the runtime directory (RuntimeDirectoryMode=
// 0711) and the programs in a world-readable place.
type probeHome struct {
	runDir, vipproxy, localuser string
}

func newProbeHome(t *testing.T) probeHome {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run processes as other users")
	}
	dir, err := os.MkdirTemp("", "vipproxy-probe-user-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	h := probeHome{runDir: filepath.Join(dir, "run"), vipproxy: filepath.Join(dir, "vipproxy"), localuser: filepath.Join(dir, "localuser")}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(h.runDir, 0o711); err != nil {
		t.Fatal(err)
	}
	testutil.CopyFile(t, vipproxyBin(t), h.vipproxy, 0o755)
	testutil.CopyFile(t, testutil.Build(t, "github.com/vipproxy/vipproxy/service/cli/testdata/localuser"), h.localuser, 0o755)
	return h
}

// asUser sets cmd to run as uid (its group the same number).
func asUser(cmd *exec.Cmd, uid uint32) *exec.Cmd {
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	return cmd
}

// runAs runs bin as uid and returns its stdout and stderr together, and
// its exit code.
func runAs(t *testing.T, uid uint32, bin string, args ...string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	cmd := asUser(exec.Command(bin, args...), uid)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return out.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), 0
}

// startLocalUser runs the localuser program as uid nobody until the test
// ends, and waits until it says it is ready.
func startLocalUser(t *testing.T, h probeHome, args ...string) {
	t.Helper()
	cmd := asUser(exec.Command(h.localuser, args...), nobody)
	var errOut testutil.Buffer
	cmd.Stderr = &errOut
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("localuser %q as uid %d: stderr %q", args, nobody, errOut.String())
		}
	})
	if s, _ := testutil.StartReady(t, cmd, 30*time.Second); s != "ready\n" {
		t.Fatalf("localuser %q as uid %d: %q, not ready", args, nobody, s)
	}
}

// waitReady runs the probe as root until it passes (the daemon's first
// health check).
func waitReady(t *testing.T, h probeHome, path string, logs func() string) {
	t.Helper()
	testutil.WaitFor(t, "the probe to pass", func() bool {
		_, code := runAs(t, 0, h.vipproxy, "probe", "--config", path, "--control", filepath.Join(h.runDir, "probe.sock"))
		return code == 0
	})
}

// keepalived runs the probe as its script user, never as the daemon's
// dynamic user: with admin.listen = "" (no TCP endpoint to fall back on)
// that user must still get the daemon's answer, through the probe socket,
// while the control socket (status, drain) stays the daemon's own.
func TestProbeAnswersKeepalivedsScriptUser(t *testing.T) {
	h := newProbeHome(t)
	path, logs, _ := startDaemon(t, adminConfig(testutil.FreePort(t), testutil.ServeAddr(t, testutil.Close), "", false), "RUNTIME_DIRECTORY="+h.runDir)
	asNobody := func(socket string) (string, int) {
		return runAs(t, nobody, h.vipproxy, "probe", "--config", path, "--control", filepath.Join(h.runDir, socket))
	}
	testutil.WaitFor(t, "the probe socket", func() bool {
		_, err := os.Stat(filepath.Join(h.runDir, "probe.sock"))
		return err == nil
	})
	// Until the first health check passes (bounded: 200 x 50 ms).
	var out string
	for range 200 {
		o, code := asNobody("probe.sock")
		if out = o; code == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out != "ready: 1/1 backends healthy\n" {
		t.Fatalf("probe as uid %d through the probe socket: %q; daemon log:\n%s", nobody, out, logs())
	}
	if out, code := asNobody("control.sock"); code == 0 || !strings.Contains(out, "permission denied") {
		t.Errorf("the control socket answered uid %d (exit %d): %q", nobody, code, out)
	}
	for name, want := range map[string]os.FileMode{"probe.sock": 0o666, "control.sock": 0o660} {
		info, err := os.Stat(filepath.Join(h.runDir, name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
		} else if info.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", name, info.Mode().Perm(), want)
		}
	}
}

// A dead daemon is never ready: after the daemon is SIGKILLed, a local
// user (uid nobody) binds admin.listen's port and answers as vipproxy
// would. Before the probe asked only the daemon's own sockets, it fell
// back to that port and exited 0, and keepalived kept the VIP on a dead
// node (announce kept announcing it).
func TestProbeRefusesAnotherUsersAnswerForADeadDaemon(t *testing.T) {
	h := newProbeHome(t)
	adminAddr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	path, logs, cmd := startDaemon(t, adminConfig(testutil.FreePort(t), testutil.ServeAddr(t, testutil.Close), adminAddr, false), "RUNTIME_DIRECTORY="+h.runDir)
	waitReady(t, h, path, logs)
	cmd.Process.Kill()
	cmd.Wait()
	startLocalUser(t, h, "answer", "tcp", adminAddr)
	for _, uid := range []uint32{0, nobody, probeUser} {
		for _, args := range [][]string{
			{"--control", filepath.Join(h.runDir, "probe.sock")},
			{"--control", filepath.Join(h.runDir, "probe.sock"), "--admin", adminAddr},
		} {
			out, code := runAs(t, uid, h.vipproxy, append([]string{"probe", "--config", path}, args...)...)
			if code == 0 || strings.Contains(out, "ready: api 3/3") {
				t.Errorf("probe %q as uid %d of a dead daemon, uid %d on the admin port: exit %d, %q", args, uid, nobody, code, out)
			}
		}
	}
}

// A unix socket answers for the daemon only when the daemon's own process
// holds it: a socket a local user binds in a directory it made itself
// (in /tmp, where anyone may), or in a directory others may write to, is
// not the daemon's answer, whatever it says (SO_PEERCRED names that user,
// not the directory's owner).
func TestProbeRefusesASocketOfAnotherUser(t *testing.T) {
	h := newProbeHome(t)
	own, err := os.MkdirTemp("", "vipproxy-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(own) })
	open := filepath.Join(filepath.Dir(h.runDir), "open")
	if err := os.Chmod(own, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(own, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil { // past the umask
		t.Fatal(err)
	}
	for _, sock := range []string{filepath.Join(own, "probe.sock"), filepath.Join(open, "probe.sock")} {
		startLocalUser(t, h, "answer", "unix", sock)
		for _, uid := range []uint32{0, probeUser} {
			out, code := runAs(t, uid, h.vipproxy, "probe", "--control", sock, "--admin", "unix:"+sock)
			if code == 0 || !strings.Contains(out, "not the daemon's answer") && !strings.Contains(out, "proves nothing") {
				t.Errorf("probe as uid %d of %s, bound by uid %d: exit %d, %q", uid, sock, nobody, code, out)
			}
		}
	}
}

// Another user cannot starve the probe: 64 idle connections from uid
// nobody on the probe socket (before the socket answered at accept they
// held every slot of its HTTP server, 5 s each, and a 1 s probe failed
// 4 of 4) leave 5 of 5 probes passing with announce's budget, as a user
// that cannot reach the control socket, with no admin.listen to fall
// back on.
func TestProbeWithinBudgetWhileAnotherUserHoldsTheProbeSocket(t *testing.T) {
	h := newProbeHome(t)
	path, logs, _ := startDaemon(t, adminConfig(testutil.FreePort(t), testutil.ServeAddr(t, testutil.Close), "", false), "RUNTIME_DIRECTORY="+h.runDir)
	waitReady(t, h, path, logs)
	sock := filepath.Join(h.runDir, "probe.sock")
	startLocalUser(t, h, "hold", sock, "64")
	for i := range 5 {
		out, code := runAs(t, probeUser, h.vipproxy, "probe", "--config", path, "--control", sock, "--timeout", "1s")
		if code != 0 || out != "ready: 1/1 backends healthy\n" {
			t.Errorf("probe %d of 5 as uid %d while uid %d holds 64 connections: exit %d, %q", i+1, probeUser, nobody, code, out)
		}
	}
	// The daemon still serves the flood: each connection is answered.
	if b := testutil.UnixFirstLine(t, sock); b != "HTTP/1.1 200 OK\r\n" {
		t.Errorf("probe socket answered %q at connect; daemon log:\n%s", b, logs())
	}
}

// Nor for a person or systemd: after the daemon is SIGKILLed and uid
// nobody answers on admin.listen's port as vipproxy would (ready, and
// one more reload at each /status), `vipproxy status` and doctor's daemon
// check say the daemon is down, and `vipproxy reload` does not report a
// reload no daemon took. Before they asked the daemon's own sockets only,
// all three fell back to that port: status exit 0 "ready", doctor PASS,
// reload "reloaded". Over TCP they ask only an endpoint named with --admin.
func TestStatusDoctorReloadRefuseAnotherUsersAnswerForADeadDaemon(t *testing.T) {
	h := newProbeHome(t)
	adminAddr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	path, logs, cmd := startDaemon(t, adminConfig(testutil.FreePort(t), testutil.ServeAddr(t, testutil.Close), adminAddr, false), "RUNTIME_DIRECTORY="+h.runDir)
	waitReady(t, h, path, logs)
	control := filepath.Join(h.runDir, "control.sock")
	if out, code := runAs(t, 0, h.vipproxy, "status", "--config", path, "--control", "", "--admin", adminAddr); code != 0 {
		t.Errorf("status of the live daemon over TCP named with --admin: exit %d, %q", code, out)
	}
	if out, code := runAs(t, 0, h.vipproxy, "status", "--config", path, "--control", ""); code == 0 || !strings.Contains(out, "not asked: over TCP") {
		t.Errorf("status without its sockets asked admin.listen over TCP unasked: exit %d, %q", code, out)
	}
	cmd.Process.Kill()
	cmd.Wait()
	startLocalUser(t, h, "answer", "tcp", adminAddr)
	hupProof := exec.Command("sh", "-c", `trap "" HUP; exec sleep 600`) // stands for the daemon's pid
	if err := hupProof.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hupProof.Process.Kill(); hupProof.Wait() })
	for _, args := range [][]string{
		{"status"},
		{"doctor", "--only", "daemon"},
		{"reload", "--pid", fmt.Sprint(hupProof.Process.Pid), "--timeout", "5s"},
	} {
		out, code := runAs(t, 0, h.vipproxy, append(args, "--config", path, "--control", control)...)
		if code == 0 || strings.Contains(out, "PASS") || strings.Contains(out, "reloaded") || strings.Contains(out, "v9.9.9") {
			t.Errorf("%s of a dead daemon, uid %d on the admin port: exit %d, %q", args[0], nobody, code, out)
		}
	}
}
