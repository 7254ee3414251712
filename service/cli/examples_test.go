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

// runMain runs vipproxy with args as the binary would.
func runMain(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = Main(context.Background(), Env{Stdout: &out, Stderr: &errOut, Version: "test"}, args)
	return code, out.String(), errOut.String()
}

// TestEveryExampleAsShipped: every examples/*.toml, the distribution
// recipes among them (docs/distributions.md), is accepted as shipped by
// the commands that run outside vipproxy.service on a node without its
// credential files: check, units render, network render, and doctor's
// vip-port check (vipproxy.socket's ExecStartPre=). The credentials some
// name under /run/credentials/vipproxy.service/ are checked as paths, and
// said so in one line.
func TestEveryExampleAsShipped(t *testing.T) {
	if _, err := os.Stat(config.CredentialDir); err == nil {
		t.Skipf("%s exists here: the test is of a node without it", config.CredentialDir)
	}
	t.Setenv("CREDENTIALS_DIRECTORY", "")
	examples, err := filepath.Glob("../../examples/*.toml")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"bgp", "k0s", "k3s", "kubeadm", "node-local", "rke2", "vipproxy"}
	var got []string
	for _, e := range examples {
		got = append(got, strings.TrimSuffix(filepath.Base(e), ".toml"))
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("examples are %v, want %v", got, want)
	}
	for _, e := range examples {
		t.Run(filepath.Base(e), func(t *testing.T) {
			text, err := os.ReadFile(e)
			if err != nil {
				t.Fatal(err)
			}
			// The one line, when a key names a credential; nothing else.
			wantErr := ""
			if strings.Contains(string(text), `= "`+config.CredentialDir+"/") {
				wantErr = "vipproxy: note: "
			}
			for _, args := range [][]string{
				{"check", "--config", e},
				{"units", "render", "--config", e},
				{"network", "render", "--config", e},
				{"doctor", "--only", "vip-port", "--root", t.TempDir(), "--config", e},
			} {
				code, _, stderr := runMain(args...)
				if code == ExitUsage || args[0] != "doctor" && code != ExitOK {
					t.Errorf("vipproxy %s: exit %d\n%s", strings.Join(args, " "), code, stderr)
				}
				if args[0] == "network" {
					continue // a node-local VIP has nothing to render, and says so
				}
				if strings.Count(stderr, "\n") > 1 || !strings.HasPrefix(stderr, wantErr) || wantErr == "" && stderr != "" {
					t.Errorf("vipproxy %s: stderr %q, want %q and nothing more", strings.Join(args, " "), stderr, wantErr)
				}
			}
			if code, _, stderr := runMain("check", "--quiet", "--config", e); code != ExitOK || stderr != "" {
				t.Errorf("vipproxy check --quiet %s: exit %d, stderr %q", e, code, stderr)
			}
		})
	}
}

// TestCheckInsideTheServiceOpensCredentials: as vipproxy.service's
// ExecStartPre= ($CREDENTIALS_DIRECTORY set), check opens the credentials,
// so one missing from the unit fails the start with its key.
func TestCheckInsideTheServiceOpensCredentials(t *testing.T) {
	if _, err := os.Stat(config.CredentialDir); err == nil {
		t.Skipf("%s exists here: the test is of a node without it", config.CredentialDir)
	}
	t.Setenv("CREDENTIALS_DIRECTORY", config.CredentialDir)
	code, _, stderr := runMain("check", "--quiet", "--config", "../../examples/node-local.toml")
	if code != ExitUsage || !strings.Contains(stderr, "discovery.ca_file: open "+config.CredentialDir+"/ca.crt") {
		t.Errorf("check inside vipproxy.service without its credentials: exit %d, stderr %q; want 2 naming discovery.ca_file", code, stderr)
	}
}
