package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vipproxy/vipproxy/internal/testutil"
)

// TestLowDescriptorLimitWarns runs `vipproxy serve` with a descriptor
// limit that its health checks and admin endpoint nearly fill (80 backends,
// `ulimit -n 256`): the derived connection cap is logged at WARN with the
// limit that would do, not at INFO. Measured before: with `ulimit -n 1024`
// and 450 backends the cap was 1, logged at INFO, and 1 of 5 clients was
// served.
func TestLowDescriptorLimitWarns(t *testing.T) {
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("no prlimit (util-linux; make deps installs it)")
	}
	closed := testutil.FreePort(t) // nothing listens there: each check is refused at once
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "[vip]\naddresses = [\"127.0.0.1\"]\nport = %d\n[admin]\nlisten = \"127.0.0.1:%d\"\n[health]\ntype = \"tcp\"\n",
		testutil.FreePort(t), testutil.FreePort(t))
	for i := range 80 {
		fmt.Fprintf(&cfg, "[[backend]]\naddress = \"127.0.1.%d:%d\"\n", i+1, closed)
	}
	path := filepath.Join(t.TempDir(), "vipproxy.toml")
	if err := os.WriteFile(path, []byte(cfg.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs testutil.Buffer
	cmd := exec.Command(prlimit, "--nofile=256:256", "--", vipproxyBin(t), "serve", "--config", path)
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitLogLine(t, logs.String, "level=WARN msg=\"the descriptor limit leaves few client connections")
	t.Log(lineWith(logs.String(), "descriptor limit"))
	if line := lineWith(logs.String(), "descriptor limit leaves few"); !strings.Contains(line, "nofile=256") || !strings.Contains(line, "nofile_for_it=") {
		t.Errorf("the warning does not name the limit and the one that would do:\n%s", line)
	}
}

func lineWith(text, part string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, part) {
			return l
		}
	}
	return ""
}
