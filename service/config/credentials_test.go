package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCredentialsOutsideTheService: the shipped node-local example names
// credentials under /run/credentials/vipproxy.service/, which exist only
// inside that unit. Outside it they are checked as paths; inside it
// (AllFiles) they are opened, and here they are not there.
func TestCredentialsOutsideTheService(t *testing.T) {
	const example = "../../examples/node-local.toml"
	if _, err := os.Stat(CredentialDir); err == nil {
		t.Skipf("%s exists on this host: the test needs a host without it", CredentialDir)
	}
	cfg, err := Load(example, OutsideService)
	if err != nil {
		t.Fatalf("Load(%s) outside vipproxy.service: %v", example, err)
	}
	want := []Credential{
		{"discovery.ca_file", CredentialDir + "/ca.crt"},
		{"discovery.cert_file", CredentialDir + "/kubelet-client.pem"},
		{"discovery.key_file", CredentialDir + "/kubelet-client.pem"},
	}
	got := cfg.Credentials()
	if len(got) != len(want) {
		t.Fatalf("Credentials() = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("Credentials()[%d] = %v, want %v", i, got[i], want[i])
		}
	}
	if note := cfg.CredentialNote(); !strings.Contains(note, "discovery.ca_file, discovery.cert_file, discovery.key_file") || strings.Contains(note, "\n") {
		t.Errorf("CredentialNote() = %q, want one line naming the three keys", note)
	}
	_, err = Load(example, AllFiles)
	if err == nil || !strings.Contains(err.Error(), "discovery.ca_file") {
		t.Errorf("Load(%s) inside vipproxy.service without its credentials = %v, want the missing discovery.ca_file", example, err)
	}
}

// TestCredentialPathRefused: a path under the credential directory that
// LoadCredential= cannot create is refused outside the unit too, at its key.
func TestCredentialPathRefused(t *testing.T) {
	for _, tc := range []struct{ path, reason string }{
		{CredentialDir + "/pki/ca.crt", "is not directly in"},
		{CredentialDir + "/", "names no credential"},
		{CredentialDir + "/..", "names no credential"},
	} {
		src := "[vip]\naddresses = [\"127.0.0.1\"]\nport = 6443\nmode = \"node-local\"\n" +
			"[[backend]]\naddress = \"192.0.2.11:6443\"\n[health]\ntype = \"https\"\nca_file = \"" + tc.path + "\"\n"
		path := filepath.Join(t.TempDir(), "vipproxy.toml")
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(path, OutsideService)
		if err == nil || !strings.Contains(err.Error(), ":9: health.ca_file: "+tc.path+" "+tc.reason) {
			t.Errorf("ca_file = %q: Load = %v, want line 9, health.ca_file: %s", tc.path, err, tc.reason)
		}
	}
}

// TestFilesFor: only a process vipproxy.service started
// ($CREDENTIALS_DIRECTORY set) opens the credentials.
func TestFilesFor(t *testing.T) {
	in := func(k string) string {
		if k == "CREDENTIALS_DIRECTORY" {
			return CredentialDir
		}
		return ""
	}
	if got := FilesFor(in); got != AllFiles {
		t.Errorf("FilesFor(with $CREDENTIALS_DIRECTORY) = %v, want AllFiles", got)
	}
	if got := FilesFor(func(string) string { return "" }); got != OutsideService {
		t.Errorf("FilesFor(without) = %v, want OutsideService", got)
	}
}
