package netcfg

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vipproxy/vipproxy/internal/testutil"
)

// twoPorts is an RKE2-like config: the API and a second port, each served
// by its own socket unit (vipproxy.socket, vipproxy-port@sup.socket).
const twoPorts = `[[port]]
name = "api"
port = 16443
[[port]]
name = "sup"
port = 19345
required = false
[health]
type = "tcp"
`

// `vipproxy units write` installs the vipproxy-port@.socket template where
// systemd has none, and `vipproxy doctor` checks what listens on each
// configured VIP and port, not only the drop-ins: with the drop-ins written and nothing listening,
// drop-ins passes and listeners fails for each port, naming its socket
// unit and the fix; another program on a VIP port fails naming it; with
// the daemon listening both ports pass.
func TestDoctorListenersHeld(t *testing.T) {
	n, bin := newTestNS(t), vipproxyBin(t)
	n.veth(t, "dummyvip0", "dummyvip0-peer")
	n.ip(t, "addr", "add", "10.9.0.100/32", "dev", "dummyvip0")
	n.serveGreeting(t, "127.0.0.1:16443", "apiserver")
	n.serveGreeting(t, "127.0.0.1:19345", "supervisor")
	cfg := writeConfig(t, testutil.NodeConfig([]string{"10.9.0.100"}, "127.0.0.1", []string{"dummyvip0-peer"}, twoPorts))
	root := t.TempDir()
	for _, write := range [][]string{{"units", "write"}, {"network", "apply", "--netlink"}} {
		if out, code := exitCode(n, bin, append(write, "--config", cfg, "--root", root)...); code != 0 {
			t.Fatalf("%v: exit %d\n%s", write, code, out)
		}
	}
	doctor := func(only string) (string, int) {
		return exitCode(n, bin, "doctor", "--config", cfg, "--root", root, "--control", "", "--only", only)
	}
	// No template where systemd looks (a tarball install): units write
	// installed the shipped one.
	shipped, err := os.ReadFile("../../systemd/vipproxy-port@.socket")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(root, "etc/systemd/system/vipproxy-port@.socket")); err != nil || string(got) != string(shipped) {
		t.Errorf("units write with two ports did not install the shipped vipproxy-port@.socket: %v", err)
	}

	out, code := doctor("drop-ins,listeners")
	for _, want := range []string{
		"PASS drop-ins",
		"FAIL listeners  nothing listens on 10.9.0.100:16443 (port api): vipproxy.socket is not running",
		"FAIL listeners  nothing listens on 10.9.0.100:19345 (port sup): vipproxy-port@sup.socket is not running",
		"fix: vipproxy units write (it installs the vipproxy-port@.socket template where none is)",
	} {
		if code != 1 || !strings.Contains(out, want) {
			t.Errorf("drop-ins written, nothing listening: exit %d, want 1 and %q:\n%s", code, want, out)
		}
	}

	var squatter net.Listener
	if err := n.inNS(func() (err error) { squatter, err = net.Listen("tcp", "10.9.0.100:19345"); return err }); err != nil {
		t.Fatal(err)
	}
	comm, _ := os.ReadFile("/proc/self/comm")
	out, code = doctor("listeners")
	if want := "FAIL listeners  10.9.0.100:19345 (port sup) is held by 10.9.0.100:19345 (" + strings.TrimSpace(string(comm)); code != 1 || !strings.Contains(out, want) {
		t.Errorf("another program on the second port: exit %d, want 1 and %q:\n%s", code, want, out)
	}
	squatter.Close()

	startProxy(t, n, bin, cfg, "10.9.0.100:16443", "apiserver")
	out, code = doctor("listeners")
	for _, want := range []string{
		"PASS listeners  port api (16443): 10.9.0.100:16443 (vipproxy, pid ",
		"PASS listeners  port sup (19345): 10.9.0.100:19345 (vipproxy, pid ",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("the daemon listening: exit %d, want 0 and %q:\n%s", code, want, out)
		}
	}
}

// `vipproxy doctor` beside the operator's networkd (a netplan-style
// uplink) at its defaults: networkd-foreign fails naming the CNI's rule
// and BIRD's route and the fix; with the fix's drop-in it passes; with
// nothing foreign left it warns that a later CNI's rules would go.
func TestDoctorNetworkdForeign(t *testing.T) {
	needRuleDump(t)
	n, bin := newTestNS(t), vipproxyBin(t)
	n.veth(t, "up0", "up0-peer")
	cfg := writeConfig(t, testutil.NodeConfig([]string{"10.9.0.100"}, "127.0.0.1:16443", []string{"up0"}, ""))
	root := t.TempDir()
	testutil.WriteFile(t, root, "run/systemd/network/10-netplan-up0.network", netplanUplink)
	doctor := func() (string, int) {
		return exitCode(n, bin, "doctor", "--config", cfg, "--root", root, "--control", "", "--only", "networkd-foreign")
	}
	out, code := doctor()
	if code != 0 || !strings.Contains(out, "WARN networkd-foreign") || !strings.Contains(out, "added later go") {
		t.Errorf("networkd at its defaults, nothing foreign: exit %d, want 0 and a WARN:\n%s", code, out)
	}
	neighbours(t, n)
	out, code = doctor()
	for _, want := range append([]string{"FAIL networkd-foreign", "10-netplan-up0.network", "fix: printf '[Network]", ForeignFixFile, "network.allow_foreign_cleanup = true"}, atRisk...) {
		if code != 1 || !strings.Contains(out, want) {
			t.Errorf("networkd at its defaults, a CNI's rules and routes: exit %d, want 1 and %q:\n%s", code, want, out)
		}
	}
	testutil.WriteFile(t, root, ForeignFixFile, "[Network]\n"+strings.Join(foreignSettingLines(), "\n")+"\n")
	out, code = doctor()
	if code != 0 || !strings.Contains(out, "PASS networkd-foreign") || !strings.Contains(out, filepath.Join(root, ForeignFixFile)) {
		t.Errorf("with %s: exit %d, want 0 and a PASS naming it:\n%s", ForeignFixFile, code, out)
	}
}
