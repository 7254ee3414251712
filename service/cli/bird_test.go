package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vipproxy/vipproxy/internal/testutil"
)

var (
	bgpNodeConfig = testutil.BGPNodeConfig([]string{"192.0.2.10"}, "192.0.2.11:6443", []string{"eth0"}, `[bgp]
local_as = 65001
router_id = "192.0.2.11"
peers = [{name = "tor1", address = "192.0.2.1", as = 65000}]
`)
	vrrpNodeConfig = testutil.NodeConfig([]string{"192.0.2.10"}, "192.0.2.11:6443", []string{"eth0"}, "")
)

// TestBirdAndKeepalivedByMode: in bgp mode `bird` renders and writes the
// BIRD file and `keepalived` refuses; in vrrp mode the reverse, and
// `announce` refuses too. A refusal
// writes nothing, not even an empty file, and says why.
func TestBirdAndKeepalivedByMode(t *testing.T) {
	dir := t.TempDir()
	bgp, vrrp := filepath.Join(dir, "bgp.toml"), filepath.Join(dir, "vrrp.toml")
	for path, text := range map[string]string{bgp: bgpNodeConfig, vrrp: vrrpNodeConfig} {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, code := runBin(t, "bird", "render", "--config", bgp)
	if code != 0 || !strings.Contains(out, "protocol bgp vipproxy_tor1 {") || !strings.Contains(out, "if net ~ [ 192.0.2.10/32 ]") {
		t.Errorf("bird in bgp mode: exit %d\n%s%s", code, out, errOut)
	}
	written := filepath.Join(dir, "bird", "vipproxy.conf")
	if _, _, code := runBin(t, "bird", "write", "--config", bgp, "--out", written); code != 0 {
		t.Errorf("bird write --out: exit %d", code)
	} else if b, err := os.ReadFile(written); err != nil || string(b) != out {
		t.Errorf("bird write --out wrote %q (%v); want what render prints", b, err)
	}
	refused := []struct{ cmd, cfg, want string }{
		{"keepalived", bgp, "BIRD announces the VIP by BGP"},
		{"bird", vrrp, `vip.mode = "vrrp" announces no VIP by BGP`},
	}
	for _, r := range refused {
		target := filepath.Join(dir, r.cmd+"-refused.conf")
		_, errOut, code := runBin(t, r.cmd, "write", "--config", r.cfg, "--out", target)
		if code != 1 || !strings.Contains(errOut, r.want) || !strings.Contains(errOut, "fix: ") {
			t.Errorf("%s --config %s: exit %d\n%s\nwant 1, %q and the fix", r.cmd, r.cfg, code, errOut, r.want)
		}
		if _, err := os.Stat(target); !os.IsNotExist(err) {
			t.Errorf("%s wrote %s (%v)", r.cmd, target, err)
		}
	}
	// announce would hold a link that no BIRD exports, and that says the
	// node announces: it refuses at once.
	_, errOut, code = runBin(t, "announce", "--config", vrrp)
	if code != 1 || !strings.Contains(errOut, "announces no VIP by BGP") || !strings.Contains(errOut, "systemctl disable --now vipproxy-announce.service") {
		t.Errorf("announce in vrrp mode: exit %d\n%s\nwant 1 and the fix", code, errOut)
	}
}
