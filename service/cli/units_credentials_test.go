package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vipproxy/vipproxy/service/units"
)

// TestUnitsWriteCredentials: for the shipped node-local example (kubeadm's
// credential names) units write installs the shipped kubeadm drop-in, and
// leaves one the operator wrote as it is.
func TestUnitsWriteCredentials(t *testing.T) {
	t.Setenv("CREDENTIALS_DIRECTORY", "")
	root := t.TempDir()
	code, stdout, stderr := runMain("units", "write", "--root", root, "--config", "../../examples/node-local.toml")
	if code != ExitOK {
		t.Fatalf("units write: exit %d\n%s%s", code, stdout, stderr)
	}
	path := filepath.Join(root, units.CredentialsDropIn)
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("../../examples/credentials/kubeadm.conf")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) || !strings.Contains(stdout, "systemctl restart vipproxy (its credentials") {
		t.Errorf("units write wrote %s:\n%s\nsaid %q; want examples/credentials/kubeadm.conf and the restart", path, got, stdout)
	}
	own := "[Service]\nLoadCredential=ca.crt:/etc/my-ca.crt\nLoadCredential=kubelet-client.pem:/etc/my-client.pem\n"
	if err := os.WriteFile(path, []byte(own), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runMain("units", "write", "--root", root, "--config", "../../examples/node-local.toml")
	if got, _ := os.ReadFile(path); code != ExitOK || string(got) != own || !strings.Contains(stderr, "left "+path) {
		t.Errorf("units write over the operator's drop-in: exit %d, stderr %q, file now:\n%s", code, stderr, got)
	}
}
