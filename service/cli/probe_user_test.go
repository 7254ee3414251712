package cli

import (
	"bytes"
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
// NixOS (services.vipproxy sets vrrpScripts.*.user = "nobody").
const nobody = 65534

// keepalived runs the probe as its script user, never as the daemon's
// dynamic user: with admin.listen = "" (no TCP endpoint to fall back on)
// that user must still get the daemon's answer, through the probe socket,
// while the control socket (status, drain) stays the daemon's own.
func TestProbeAnswersKeepalivedsScriptUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the probe as another user")
	}
	dir, err := os.MkdirTemp("", "vipproxy-probe-user-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// As systemd leaves them: the runtime directory with
	// RuntimeDirectoryMode=0711, the binary in a world-readable place.
	runDir := filepath.Join(dir, "run")
	bin := filepath.Join(dir, "vipproxy")
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(runDir, 0o711); err != nil {
		t.Fatal(err)
	}
	testutil.CopyFile(t, vipproxyBin(t), bin, 0o755)
	path, logs, _ := startDaemon(t, adminConfig(testutil.FreePort(t), testutil.ServeAddr(t, testutil.Close), "", false), "RUNTIME_DIRECTORY="+runDir)

	asNobody := func(socket string) (string, int) {
		var out bytes.Buffer
		cmd := exec.Command(bin, "probe", "--config", path, "--control", filepath.Join(runDir, socket))
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			return out.String(), ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return out.String(), 0
	}
	testutil.WaitFor(t, "the probe socket", func() bool {
		_, err := os.Stat(filepath.Join(runDir, "probe.sock"))
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
		info, err := os.Stat(filepath.Join(runDir, name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
		} else if info.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", name, info.Mode().Perm(), want)
		}
	}
}
