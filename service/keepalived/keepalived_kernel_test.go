package keepalived

import (
	"os/exec"
	"testing"

	"github.com/vipproxy/vipproxy/internal/testutil"
	"github.com/vipproxy/vipproxy/internal/testutil/testconfig"
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
	if _, err := exec.LookPath("keepalived"); err != nil {
		t.Skip("keepalived not installed")
	}
	ns := testutil.NewNetNS(t, "vpk")
	ns.Veth(t, "eth1", "eth1p")
	ns.Veth(t, "eth2", "eth2p")
	for name, lines := range goldenCases {
		cfg := testconfig.WithBackend(t, "192.168.1.1:6443", lines...)
		// keepalived disables a track script whose program does not exist,
		// and /usr/bin/vipproxy is not installed here.
		cfg.Keepalived.ProbeCommand = "/bin/true"
		data := Render(cfg)
		dir := t.TempDir()
		writeConf(t, dir, "vipproxy.conf", string(data))
		conf := writeConf(t, dir, "keepalived.conf", mainConf)
		out, err := ns.Exec("keepalived", "--config-test", "-f", conf)
		if err != nil {
			t.Errorf("keepalived --config-test (case %s): %v\n%s\n%s", name, err, out, data)
		}
	}
}
