package netcfg

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const nodeLocalConfig = `
[vip]
mode = "node-local"
addresses = ["127.0.0.1", "::1"]
port = 7445
[[backend]]
address = "127.0.0.1:16443"
`

// TestNodeLocalNetworkSetsUpNothing: on a worker-only node (vip.mode =
// "node-local") `network` renders, writes and applies nothing, and says
// why; what a vrrp setup left (drop-ins, the dummy link) fails write, apply,
// check and doctor with the command that removes it, and that command does.
func TestNodeLocalNetworkSetsUpNothing(t *testing.T) {
	n := newTestNS(t)
	n.veth(t, "eth0", "eth0-peer")
	bin, cfg := vipproxyBin(t), writeConfig(t, nodeLocalConfig)
	root := t.TempDir()

	out, code := exitCode(n, bin, "network", "render", "--config", cfg)
	if code != 0 || !strings.Contains(out, "nothing to render") || strings.Contains(out, "[NetDev]") {
		t.Errorf("render: exit %d\n%s\nwant exit 0, nothing rendered and why", code, out)
	}
	for _, sub := range []string{"write", "apply"} {
		out, code = exitCode(n, bin, "network", sub, "--config", cfg, "--root", root)
		if code != 0 || !strings.Contains(out, `nothing to do: vip.mode = "node-local"`) {
			t.Errorf("%s: exit %d\n%s\nwant exit 0 and nothing to do", sub, code, out)
		}
	}
	if files := filesUnder(t, root); len(files) > 0 {
		t.Errorf("node-local write/apply wrote %v", files)
	}
	if out, code = exitCode(n, bin, "network", "check", "--config", cfg); code != 0 || !strings.Contains(out, "ok: ") {
		t.Errorf("check: exit %d\n%s\nwant 0", code, out)
	}
	n.ip(t, "link", "set", "lo", "down")
	if out, code = exitCode(n, bin, "network", "check", "--config", cfg); code != 1 || !strings.Contains(out, "link lo is down") {
		t.Errorf("check with lo down: exit %d\n%s\nwant 1 naming lo", code, out)
	}
	n.ip(t, "link", "set", "lo", "up")

	// The node was a vrrp node before: its drop-ins and dummy link are there
	// (a veth stands in for the dummy link: this kernel has no dummy).
	_, _, vrrp := cliHost(t)
	n.veth(t, "dummyvip0", "dummyvip0-peer")
	if out, code = exitCode(n, bin, "network", "apply", "--netlink", "--config", vrrp, "--root", root); code != 0 {
		t.Fatalf("vrrp apply: exit %d\n%s", code, out)
	}
	out, code = exitCode(n, bin, "network", "apply", "--config", cfg, "--root", root)
	if code != 1 || !strings.Contains(out, "60-vipproxy.netdev") || !strings.Contains(out, "link dummyvip0") || !strings.Contains(out, "fix: vipproxy network remove") {
		t.Errorf("apply over a vrrp setup: exit %d\n%s\nwant 1 naming the leftovers and the fix", code, out)
	}
	out, _ = exitCode(n, bin, "doctor", "--only", "vip-link,arp,drop-ins,keepalived", "--config", cfg, "--root", root)
	for _, want := range []string{"FAIL vip-link", "link dummyvip0", "fix: vipproxy network remove", "SKIP arp", "FAIL drop-ins", "SKIP keepalived"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor over a vrrp setup lacks %q:\n%s", want, out)
		}
	}
	if out, code = exitCode(n, bin, "network", "remove", "--netlink", "--config", cfg, "--root", root); code != 0 || !strings.Contains(out, "removed "+root) {
		t.Errorf("remove: exit %d\n%s\nwant 0 and the drop-ins removed", code, out)
	}
	n.ip(t, "link", "del", "dummyvip0") // what remove does to a real dummy link
	if files := filesUnder(t, root); len(files) > 0 {
		t.Errorf("remove left %v", files)
	}
	if out, code = exitCode(n, bin, "network", "apply", "--config", cfg, "--root", root); code != 0 {
		t.Errorf("apply after remove: exit %d\n%s", code, out)
	}
	if out, code = exitCode(n, bin, "units", "write", "--config", cfg, "--root", root); code != 0 {
		t.Fatalf("units write: exit %d\n%s", code, out)
	}
	out, code = exitCode(n, bin, "doctor", "--only", "vip-link,arp,drop-ins,keepalived", "--config", cfg, "--root", root)
	if code != 0 || strings.Count(out, "PASS") != 2 || strings.Count(out, "SKIP") != 2 || !strings.Contains(out, "node-local: lo holds 127.0.0.1, ::1") {
		t.Errorf("doctor on a clean node-local node: exit %d\n%s\nwant 0, vip-link and drop-ins PASS, arp and keepalived SKIP", code, out)
	}
}

// TestNodeLocalHasNoKeepalived: `keepalived` refuses, writes nothing (not
// even an empty file) and names the fix.
func TestNodeLocalHasNoKeepalived(t *testing.T) {
	cfg := writeConfig(t, nodeLocalConfig)
	out := filepath.Join(t.TempDir(), "conf.d", "vipproxy.conf")
	b, err := exec.Command(vipproxyBin(t), "keepalived", "write", "--config", cfg, "--out", out).CombinedOutput()
	if err == nil || !strings.Contains(string(b), "runs no keepalived") || !strings.Contains(string(b), "systemctl disable --now keepalived.service") {
		t.Errorf("keepalived in node-local mode: %v\n%s\nwant a failure naming the fix", err, b)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("%s was written (%v)", out, err)
	}
}

func filesUnder(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	return files
}
