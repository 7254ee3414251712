package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vipproxy/vipproxy/service/config"
)

func runCheckCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Main(context.Background(), Env{Stdout: &out, Stderr: &errOut, Version: "test"}, append([]string{"check"}, args...))
	return code, out.String(), errOut.String()
}

func TestCheckPrintsEffectiveConfig(t *testing.T) {
	code, stdout, stderr := runCheckCmd(t, "--config", "../../examples/vipproxy.toml")
	if code != ExitOK || stderr != "" {
		t.Fatalf("check exit %d, stderr %q", code, stderr)
	}
	cfg, err := config.Parse("stdout", []byte(stdout))
	if err != nil {
		t.Fatalf("printed config does not parse: %v\n%s", err, stdout)
	}
	if len(cfg.Backends) != 3 || cfg.Backends[2].Name != "cp3" || cfg.Health.Interval.String() != "1s" {
		t.Errorf("printed config lost values: %+v", cfg)
	}
}

func TestCheckBadConfigExits2(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.toml")
	if err := os.WriteFile(path, []byte("[vip]\naddresses = [\"10.0.0.10\"]\n\n[health]\ninterval = \"soon\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCheckCmd(t, "--config", path)
	want := "vipproxy: " + path + ":5: health.interval: \"soon\" is not a duration (write e.g. \"1s\", \"250ms\")\n"
	if code != ExitUsage || stdout != "" || stderr != want {
		t.Fatalf("check = %d, stdout %q, stderr %q; want 2 and %q", code, stdout, stderr, want)
	}
}

func TestCheckKeepalivedConf(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "keepalived.conf")
	if err := os.WriteFile(conf, []byte("virtual_server 192.0.2.10 6443 {\n  lb_algo rr\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCheckCmd(t, "--config", "../../examples/vipproxy.toml", "--keepalived-conf", conf)
	if code != ExitUsage || !strings.Contains(stderr, conf+":1: virtual_server") || !strings.Contains(stderr, "192.0.2.10") {
		t.Fatalf("check = %d, stderr %q; want 2 naming the virtual_server", code, stderr)
	}
	// What else doctor's keepalived check rejects for cutting the VIP.
	for text, want := range map[string]string{
		"global_defs {\n  vrrp_strict\n}\n":                                                 ":2: vrrp_strict",
		"vrrp_instance VI_1 {\n  virtual_ipaddress {\n    192.0.2.10/24 dev eth0\n  }\n}\n": ":3: vrrp_instance: vrrp_instance VI_1 also holds the VIP 192.0.2.10",
		"vrrp_instance vipproxy {\n  state BACKUP\n}\n":                                     "",
	} {
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		code, _, stderr := runCheckCmd(t, "--config", "../../examples/vipproxy.toml", "--keepalived-conf", conf)
		if want == "" && code != ExitOK || want != "" && (code != ExitUsage || !strings.Contains(stderr, conf+want)) {
			t.Errorf("check on %q = %d, stderr %q; want %q", text, code, stderr, want)
		}
	}
}

func TestCheckMissingFileExits2(t *testing.T) {
	code, _, stderr := runCheckCmd(t, "--config", filepath.Join(t.TempDir(), "none.toml"))
	if code != ExitUsage || !strings.HasSuffix(stderr, "none.toml: read: no such file or directory\n") {
		t.Fatalf("check = %d, stderr %q", code, stderr)
	}
}
