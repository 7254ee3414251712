package keepalived

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"testing"
)

// mainConf includes the snippet as documented: keepalived.conf's
// global_defs turn on script security. (Used alone, keepalived still runs
// the probe as root but logs a SECURITY VIOLATION, and --config-test fails.)
const mainConf = `global_defs {
    enable_script_security
    script_user root
}
include vipproxy.conf
`

// TestGoldenPassesKeepalivedConfigTest runs keepalived's own parser
// (keepalived --config-test) on every golden case, inside a private network
// namespace that has the interfaces the snippets name.
func TestGoldenPassesKeepalivedConfigTest(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace")
	}
	if _, err := exec.LookPath("keepalived"); err != nil {
		t.Skip("keepalived not installed")
	}
	b := make([]byte, 4)
	rand.Read(b)
	ns := "vpk-" + hex.EncodeToString(b)
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Skipf("ip netns unusable: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	for _, pair := range [][2]string{{"eth1", "eth1p"}, {"eth2", "eth2p"}} {
		if out, err := exec.Command("ip", "-n", ns, "link", "add", pair[0], "type", "veth", "peer", "name", pair[1]).CombinedOutput(); err != nil {
			t.Fatalf("add %s: %v: %s", pair[0], err, out)
		}
	}
	for name, lines := range goldenCases {
		cfg := parseConfig(t, lines...)
		// keepalived disables a track script whose program does not exist,
		// and /usr/bin/vipproxy is not installed here.
		cfg.Keepalived.ProbeCommand = "/bin/true"
		data := Render(cfg)
		dir := t.TempDir()
		writeConf(t, dir, "vipproxy.conf", string(data))
		conf := writeConf(t, dir, "keepalived.conf", mainConf)
		out, err := exec.Command("ip", "netns", "exec", ns, "keepalived", "--config-test", "-f", conf).CombinedOutput()
		if err != nil {
			t.Errorf("keepalived --config-test (case %s): %v\n%s\n%s", name, err, out, data)
		}
	}
}
