package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vipproxy/vipproxy/internal/testutil"
)

var hostTestConfig = testutil.NodeConfig([]string{"10.0.0.100", "2001:db8::100"}, "10.0.0.1:6443", []string{"eth1"}, "")

func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(context.Background(), Env{Stdout: &out, Stderr: &errOut}, args)
	return out.String(), errOut.String(), code
}

// hostFiles writes hostTestConfig and returns it and a root to write to.
func hostFiles(t *testing.T) (cfg, root string) {
	t.Helper()
	dir := t.TempDir()
	cfg = filepath.Join(dir, "vipproxy.toml")
	if err := os.WriteFile(cfg, []byte(hostTestConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg, filepath.Join(dir, "root")
}

func TestUnitsRenderAndKeepalivedOut(t *testing.T) {
	cfg, root := hostFiles(t)
	dropIn := filepath.Join(root, "etc/systemd/system/vipproxy.socket.d/50-listen.conf")
	if out, errOut, code := runCLI(t, "units", "write", "--config", cfg, "--root", root); code != 0 || !strings.Contains(out, "wrote "+dropIn) || !strings.Contains(out, "systemctl restart vipproxy.socket") {
		t.Fatalf("units render: %d %s %s", code, out, errOut)
	}
	data, _ := os.ReadFile(dropIn)
	if !strings.Contains(string(data), "ListenStream=\nListenStream=10.0.0.100:6443\nListenStream=[2001:db8::100]:6443\n") {
		t.Errorf("drop-in:\n%s", data)
	}
	if out, _, code := runCLI(t, "units", "write", "--config", cfg, "--root", root); code != 0 || !strings.Contains(out, "unchanged") {
		t.Errorf("second units render: %d %s, want unchanged", code, out)
	}

	ka := filepath.Join(t.TempDir(), "keepalived/vipproxy.conf")
	if out, errOut, code := runCLI(t, "keepalived", "write", "--config", cfg, "--out", ka); code != 0 || out != "wrote "+ka+"\n" || errOut != "" {
		t.Fatalf("keepalived write --out: %d %q %s", code, out, errOut)
	}
	stdout, _, _ := runCLI(t, "keepalived", "render", "--config", cfg)
	if written, _ := os.ReadFile(ka); string(written) != stdout || !strings.Contains(stdout, "10.0.0.100/32 dev eth1") {
		t.Errorf("write and render differ or lack the VIP:\n%s\n---\n%s", written, stdout)
	}
	// The form before render and write still works, and says it is deprecated.
	old := filepath.Join(t.TempDir(), "keepalived/vipproxy.conf")
	deprecated := "vipproxy keepalived: deprecated without a subcommand: use `vipproxy keepalived render`, or `vipproxy keepalived write [--out FILE] [--diff]`\n"
	if out, errOut, code := runCLI(t, "keepalived", "--config", cfg, "--out", old); code != 0 || out != "wrote "+old+"\n" || errOut != deprecated {
		t.Errorf("keepalived --out: %d %q %q", code, out, errOut)
	}
	if written, _ := os.ReadFile(old); string(written) != stdout {
		t.Errorf("keepalived --out wrote another file than render prints:\n%s", written)
	}
	if out, errOut, code := runCLI(t, "keepalived", "--config", cfg); code != 0 || out != stdout || errOut != deprecated {
		t.Errorf("keepalived without a subcommand: %d %q\n%s", code, errOut, out)
	}
	if _, errOut, code := runCLI(t, "units", "render", "--config", filepath.Join(t.TempDir(), "missing.toml")); code != ExitUsage || !strings.Contains(errOut, "missing.toml") {
		t.Errorf("missing config: %d %s", code, errOut)
	}
	if _, _, code := runCLI(t, "network", "bogus"); code != ExitUsage {
		t.Errorf("network bogus: exit %d, want %d", code, ExitUsage)
	}
}
