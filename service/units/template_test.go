package units

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestPortTemplateInstalledWhereSystemdHasNone: with more than one port
// and no vipproxy-port@.socket where systemd looks, units write installs
// the shipped template in /etc/systemd/system; where the package put one
// (/lib/systemd/system), or with one port, nothing.
func TestPortTemplateInstalledWhereSystemdHasNone(t *testing.T) {
	shipped, err := os.ReadFile("../../systemd/vipproxy-port@.socket")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if _, ok := PortTemplate(parse(t, "192.0.2.1:6443", `[vip]`, `addresses = ["10.0.0.100"]`), root); ok {
		t.Error("one port: a template to install")
	}
	k0s := parse(t, "192.0.2.1", `[vip]`, `addresses = ["10.0.0.100"]`, k0sPorts)
	f, ok := PortTemplate(k0s, root)
	if want := filepath.Join(root, "etc/systemd/system/vipproxy-port@.socket"); !ok || f.Path != want || !bytes.Equal(f.Data, shipped) || f.Perm != 0o644 {
		t.Fatalf("three ports, no template: %s (%v, %d bytes), want the shipped file at %s", f.Path, ok, len(f.Data), want)
	}
	deb := filepath.Join(root, "lib/systemd/system/vipproxy-port@.socket")
	if err := os.MkdirAll(filepath.Dir(deb), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(deb, shipped, 0o644); err != nil {
		t.Fatal(err)
	}
	if f, ok := PortTemplate(k0s, root); ok || FindPortTemplate(root) != deb {
		t.Errorf("the package's template in /lib/systemd/system: would install %s; found %q", f.Path, FindPortTemplate(root))
	}
}
