package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/vipproxy/vipproxy/internal/testpki"
)

// credentialRE is a file systemd hands vipproxy.service (LoadCredential=):
// it exists only inside the unit, so the test puts one in its place.
var credentialRE = regexp.MustCompile(`"/run/credentials/vipproxy\.service/([^"]+)"`)

// TestEveryExampleChecks: `vipproxy check` accepts every examples/*.toml,
// the distribution recipes among them (docs/distributions.md), given the
// credential files each names, as the unit would have them.
func TestEveryExampleChecks(t *testing.T) {
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
	creds := credentials(t)
	for _, e := range examples {
		t.Run(filepath.Base(e), func(t *testing.T) {
			text, err := os.ReadFile(e)
			if err != nil {
				t.Fatal(err)
			}
			local := credentialRE.ReplaceAllStringFunc(string(text), func(m string) string {
				return `"` + creds(credentialRE.FindStringSubmatch(m)[1]) + `"`
			})
			path := filepath.Join(t.TempDir(), filepath.Base(e))
			if err := os.WriteFile(path, []byte(local), 0o644); err != nil {
				t.Fatal(err)
			}
			if code, _, stderr := runCheckCmd(t, "--quiet", "--config", path); code != ExitOK {
				t.Errorf("vipproxy check %s: exit %d\n%s", e, code, stderr)
			}
		})
	}
}

// credentials returns where the test keeps the credential NAME: a CA for
// names with "ca", else a client certificate with its key in one PEM file
// (as the kubelet's kubelet-client-current.pem is).
func credentials(t *testing.T) func(name string) string {
	dir := t.TempDir()
	pki, err := testpki.Write(filepath.Join(dir, "pki"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return func(name string) string {
		var data []byte
		if strings.Contains(name, "ca") {
			data = readFile(t, pki.CA)
		} else {
			data = append(readFile(t, pki.ClientCert), readFile(t, pki.ClientKey)...)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
