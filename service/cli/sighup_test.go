package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/vipproxy/vipproxy/internal/testutil"
)

// A SIGHUP that comes while the daemon starts must not kill it (Go's
// default for SIGHUP is to exit): it is a reload, done once started.
// Here the start is held before READY by a backend whose TLS check hangs
// (the daemon waits for a first result for timeout+interval+1s, 7 s);
// `vipproxy reload` right after READY met the same gap between READY and
// the daemon's signal handler, wide under qemu-user (see
// TestReloadReportsTheDaemonsVerdict).
func TestSIGHUPWhileStartingIsAReload(t *testing.T) {
	runDir := t.TempDir()
	control := filepath.Join(runDir, "control.sock")
	cfg := fmt.Sprintf("[vip]\naddresses = [\"127.0.0.1\"]\nport = %d\n[[backend]]\naddress = %q\n[health]\ntype = \"tls\"\ninterval = \"3s\"\ntimeout = \"3s\"\n",
		testutil.FreePort(t), testutil.ServeAddr(t, testutil.Silent))
	path, logs, cmd := startDaemon(t, cfg, "RUNTIME_DIRECTORY="+runDir)
	testutil.WaitFor(t, "the daemon to answer on its control socket, not ready yet", func() bool {
		out, _, _ := runBin(t, "status", "--json", "--config", path, "--control", control)
		var rep statusReport
		return json.Unmarshal([]byte(out), &rep) == nil && rep.Daemon != nil && !rep.Daemon.Ready
	})
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the reload after the start", func() bool {
		return strings.Contains(logs(), "msg=reloaded") || exited(cmd.Process.Pid)
	})
	if exited(cmd.Process.Pid) {
		t.Fatalf("a SIGHUP while starting ended the daemon; log:\n%s", logs())
	}
}

// exited reports whether process pid has ended (a zombie not yet waited
// for counts as ended).
func exited(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	_, after, _ := strings.Cut(string(stat), ") ")
	return strings.HasPrefix(after, "Z") || strings.HasPrefix(after, "X")
}
