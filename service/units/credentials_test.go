package units

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vipproxy/vipproxy/service/config"
)

// TestShippedCredentialDropIns: examples/credentials/NAME.conf is what
// units write writes for that distribution, one for each set.
func TestShippedCredentialDropIns(t *testing.T) {
	shipped, err := filepath.Glob("../../examples/credentials/*.conf")
	if err != nil {
		t.Fatal(err)
	}
	if len(shipped) != len(CredentialSets()) {
		t.Errorf("examples/credentials holds %v, want one file per set (%d)", shipped, len(CredentialSets()))
	}
	for _, s := range CredentialSets() {
		path := "../../examples/credentials/" + s.Distribution + ".conf"
		got, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%s: %v", s.Distribution, err)
			continue
		}
		if !bytes.Equal(got, s.Render()) {
			t.Errorf("%s is not what units write writes:\n%s\nwant:\n%s", path, got, s.Render())
		}
	}
}

// TestCredentialsDropInFollowsTheConfig: the shipped node-local example
// names kubeadm's credentials, so units write hands them over with
// kubeadm's drop-in; a config with names of no set is told what to write.
func TestCredentialsDropInFollowsTheConfig(t *testing.T) {
	cfg, err := config.Load("../../examples/node-local.toml", config.OutsideService)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	f, ok, err := Credentials(cfg, root)
	if err != nil || !ok {
		t.Fatalf("Credentials(node-local) = %v, %v", ok, err)
	}
	if f.Path != filepath.Join(root, CredentialsDropIn) || !strings.Contains(string(f.Data), "LoadCredential=kubelet-client.pem:/var/lib/kubelet/pki/kubelet-client-current.pem\n") {
		t.Errorf("Credentials(node-local) = %s:\n%s", f.Path, f.Data)
	}
	c := cfg.Config()
	c.Discovery.CAFile = config.CredentialDir + "/k3s-server-ca.crt"
	mixed, err := config.ValidateFiles(c, config.OutsideService)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Credentials(mixed, root); err == nil || !strings.Contains(err.Error(), "ca.crt") {
		t.Errorf("Credentials(kubeadm and k3s names) = %v, want an error naming them", err)
	}
}
