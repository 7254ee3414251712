package netcfg

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `vipproxy doctor` on a broken host in a network namespace: a wildcard
// listener on the VIP port (a local apiserver's default), no VIP link
// setup, the naive all.arp_ignore=1, no drop-ins, no keepalived config. Each
// is a FAIL with its fix; after the fixes every check passes.
func TestDoctorBrokenHostThenFixed(t *testing.T) {
	n, bin, _ := cliHost(t)
	n.serveGreeting(t, "127.0.0.1:16443", "apiserver")
	cfg := writeConfig(t, `
[vip]
addresses = ["10.9.0.100"]
[[backend]]
address = "127.0.0.1:16443"
[network]
uplinks = ["eth0"]
`)
	var wild net.Listener
	if err := n.inNS(func() (err error) { wild, err = net.Listen("tcp4", "0.0.0.0:6443"); return err }); err != nil {
		t.Fatal(err)
	}
	defer wild.Close()
	if err := n.sysctl().Set("all", "arp_ignore", 1); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	kconf := filepath.Join(root, "keepalived.conf")
	args := []string{"doctor", "--config", cfg, "--root", root, "--keepalived-conf", kconf}

	out, code := exitCode(n, bin, args...)
	comm, _ := os.ReadFile("/proc/self/comm")
	for _, want := range []string{
		fmt.Sprintf("FAIL vip-port   port 6443 is held by *:6443 (%s, pid %d)", strings.TrimSpace(string(comm)), os.Getpid()),
		"FAIL vip-link   link dummyvip0 lacks VIP 10.9.0.100/32",
		"FAIL arp        net.ipv4.conf.eth0.arp_ignore is 0, want 1",
		"net.ipv4.conf.all.arp_ignore is 1, want 0",
		"breaks pod -> VIP hairpin",
		"FAIL drop-ins",
		"FAIL keepalived " + kconf + " is missing or empty",
		"PASS backends   all 1 backends accept TCP connections",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor on a broken host lacks %q", want)
		}
	}
	if code != 1 || strings.Count(out, "fix: ") != 5 {
		t.Errorf("doctor on a broken host: exit %d, want 1 with 5 fixes:\n%s", code, out)
	}

	wild.Close()
	if err := n.sysctl().Set("all", "arp_ignore", 0); err != nil {
		t.Fatal(err)
	}
	for _, fix := range [][]string{
		{"network", "apply", "--netlink", "--config", cfg, "--root", root},
		{"units", "write", "--config", cfg, "--root", root},
		{"keepalived", "--config", cfg, "--out", filepath.Join(root, "conf.d/vipproxy.conf")},
	} {
		if out, code := exitCode(n, bin, fix...); code != 0 {
			t.Fatalf("%v: exit %d\n%s", fix, code, out)
		}
	}
	if err := os.WriteFile(kconf, []byte("include conf.d/*.conf\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code = exitCode(n, bin, args...)
	if code != 0 || strings.Contains(out, "FAIL") || strings.Count(out, "PASS") != 6 {
		t.Errorf("doctor on the fixed host: exit %d, want 0 and 6 PASS:\n%s", code, out)
	}
}
