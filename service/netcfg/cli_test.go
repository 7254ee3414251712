package netcfg

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vipproxy/vipproxy/internal/testutil"
)

// cliHost is a namespace with uplink eth0 and a stand-in dummyvip0, plus a
// config for it.
func cliHost(t *testing.T) (*testNS, string, string) {
	n := newTestNS(t)
	n.veth(t, "eth0", "eth0-peer")
	n.veth(t, "dummyvip0", "dummyvip0-peer")
	cfg := writeConfig(t, testutil.NodeConfig([]string{"10.9.0.100", "2001:db8:9::100"}, "10.9.0.1:6443", []string{"eth0"}, ""))
	return n, vipproxyBin(t), cfg
}

// exitCode runs the binary in the namespace and returns output and status.
func exitCode(n *testNS, bin string, args ...string) (string, int) {
	out, err := n.exec(bin, args...)
	if ee, ok := err.(*exec.ExitError); ok {
		return out, ee.ExitCode()
	}
	if err != nil {
		return out + err.Error(), -1
	}
	return out, 0
}

func TestCLIApplyCheckRemove(t *testing.T) {
	n, bin, cfg := cliHost(t)
	root := t.TempDir()
	out, code := exitCode(n, bin, "network", "check", "--config", cfg)
	want := "link dummyvip0 lacks VIP 10.9.0.100/32\nlink dummyvip0 lacks VIP 2001:db8:9::100/128\nnet.ipv4.conf.eth0.arp_ignore is 0, want 1\nnet.ipv4.conf.eth0.arp_announce is 0, want 2\n"
	if code != 1 || !strings.HasSuffix(out, want) {
		t.Errorf("check before apply: exit %d\n%s\nwant exit 1 ending in\n%s", code, out, want)
	}
	if out, code = exitCode(n, bin, "network", "apply", "--netlink", "--config", cfg, "--root", root); code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, out)
	}
	for _, line := range []string{"wrote " + root + "/etc/systemd/network/60-vipproxy.netdev", "set net.ipv4.conf.eth0.arp_ignore=1", "ok: "} {
		if !strings.Contains(out, line) {
			t.Errorf("apply output lacks %q:\n%s", line, out)
		}
	}
	if out, code = exitCode(n, bin, "network", "apply", "--netlink", "--config", cfg, "--root", root); code != 0 || !strings.Contains(out, "nothing changed") {
		t.Errorf("second apply: exit %d\n%s\nwant exit 0 and nothing changed", code, out)
	}
	if out, code = exitCode(n, bin, "network", "check", "--config", cfg); code != 0 {
		t.Errorf("check after apply: exit %d\n%s", code, out)
	}
	if out, code = exitCode(n, bin, "network", "remove", "--netlink", "--config", cfg, "--root", root); code != 0 || !strings.Contains(out, "removed 10.9.0.100/32, 2001:db8:9::100/128 from dummyvip0") {
		t.Errorf("remove: exit %d\n%s", code, out)
	}
	for _, f := range []string{"etc/systemd/network/60-vipproxy.netdev", "etc/systemd/network/60-vipproxy.network", "etc/sysctl.d/60-vipproxy.conf"} {
		if _, err := os.Stat(filepath.Join(root, f)); !os.IsNotExist(err) {
			t.Errorf("%s still there after remove (%v)", f, err)
		}
	}
}

// TestCLIApplyBadInput: each bad input gives a clear error and writes nothing.
func TestCLIApplyBadInput(t *testing.T) {
	n, bin, cfg := cliHost(t)
	n.veth(t, "other0", "other0-peer")
	n.ip(t, "addr", "add", "2001:db8:9::100/128", "dev", "other0", "nodad")
	unknown := writeConfig(t, testutil.NodeConfig([]string{"10.9.0.100"}, "10.9.0.1:6443", []string{"eth0", "eth7"}, ""))
	cases := []struct {
		name   string
		args   []string
		code   int
		substr string
	}{
		{"unknown uplink", []string{"--netlink", "--config", unknown}, 2,
			unknown + ": network.uplinks[1]: uplink eth7 does not exist on this host"},
		{"VIP already on another interface", []string{"--netlink", "--config", cfg}, 2,
			cfg + ": vip.addresses[1]: 2001:db8:9::100 is already on interface other0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			out, code := exitCode(n, bin, append([]string{"network", "apply", "--root", root}, c.args...)...)
			if code != c.code || !strings.Contains(out, c.substr) {
				t.Errorf("exit %d\n%s\nwant exit %d and %q", code, out, c.code, c.substr)
			}
			if entries, _ := os.ReadDir(root); len(entries) != 0 {
				t.Errorf("wrote under the root before failing")
			}
		})
	}
	n.ip(t, "addr", "del", "2001:db8:9::100/128", "dev", "other0")
	root := t.TempDir()
	out, code := exitCode(n, bin, "network", "apply", "--config", cfg, "--root", root)
	if code != 1 || !strings.Contains(out, "systemd-networkd is not running") || !strings.Contains(out, "--netlink") {
		t.Errorf("apply without networkd: exit %d\n%s\nwant exit 1 saying networkd is not running and offering --netlink", code, out)
	}
	if entries, _ := os.ReadDir(root); len(entries) != 0 {
		t.Errorf("wrote files although networkd is not running")
	}
}

// TestCLIApplyReadOnlyTarget mounts the sysctl.d directory read-only (in
// the private mount namespace `ip netns exec` makes): the networkd files
// written first must get their old bytes back and nothing else changes.
func TestCLIApplyReadOnlyTarget(t *testing.T) {
	n, bin, cfg := cliHost(t)
	root := t.TempDir()
	old := map[string]string{
		filepath.Join(root, "etc/systemd/network/60-vipproxy.netdev"):  "# old netdev\n",
		filepath.Join(root, "etc/systemd/network/60-vipproxy.network"): "# old network\n",
	}
	for p, text := range old {
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sysctlDir := filepath.Join(root, "etc/sysctl.d")
	os.MkdirAll(sysctlDir, 0o755)
	script := `mount -t tmpfs -o ro tmpfs "$1" && exec "$2" network apply --netlink --config "$3" --root "$4"`
	out, err := n.exec("sh", "-c", script, "sh", sysctlDir, bin, cfg, root)
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 || !strings.Contains(out, sysctlDir+"/60-vipproxy.conf") || !strings.Contains(out, "read-only file system") || !strings.Contains(out, "restored") {
		t.Fatalf("apply into a read-only sysctl.d: %v\n%s\nwant exit 1 naming the file, read-only, restored", err, out)
	}
	for p, want := range old {
		if got, _ := os.ReadFile(p); string(got) != want {
			t.Errorf("%s: %q, want the old %q", p, got, want)
		}
	}
	if v, _ := n.sysctl().Get("eth0", "arp_ignore"); v != 0 {
		t.Errorf("eth0 arp_ignore changed to %d by a failed apply", v)
	}
	if out, code := exitCode(n, bin, "network", "check", "--config", cfg); code != 1 || !strings.Contains(out, "lacks VIP 10.9.0.100/32") {
		t.Errorf("the failed apply configured the link anyway:\n%s", out)
	}
}
