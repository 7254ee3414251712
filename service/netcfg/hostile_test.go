package netcfg

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/vipproxy/vipproxy/internal/testutil/testconfig"
	"github.com/vipproxy/vipproxy/service/config"
)

// TestAcceptedHostileSysctlFilesPassSysctl renders the sysctl.d file of
// every value that check accepts out of the hostile ones tried in each
// field (config's TestHostileRenderedValuesRefused refuses the others) and
// loads it with procps's sysctl -p, as systemd-sysctl would at boot, in a
// private namespace whose uplinks exist: every line is taken and each
// uplink ends with the ARP settings.
func TestAcceptedHostileSysctlFilesPassSysctl(t *testing.T) {
	ns := newTestNS(t)
	links := map[string]bool{}
	seen := 0
	for a := range testconfig.Distinct(nil, func(cfg *config.Valid) []byte { return Render(cfg, "/").Sysctl.Data }) {
		seen++
		f, v, cfg, data := a.Field, a.Value, a.Config, a.Data
		for _, up := range cfg.Network.Uplinks {
			if !links[up] {
				links[up] = true
				ns.veth(t, up, fmt.Sprintf("sp%d", len(links)))
			}
		}
		file := filepath.Join(t.TempDir(), "60-vipproxy.conf")
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := ns.Exec("sysctl", "-p", file); err != nil {
			t.Errorf("%s = %.80q passes check, sysctl -p refuses its file: %v\n%s\n%s", f.Key, v, err, out, data)
			continue
		}
		for _, up := range cfg.Network.Uplinks {
			for _, set := range UplinkSettings {
				if got, err := ns.sysctl().Get(up, set.Name); err != nil || got != set.Value {
					t.Errorf("%s = %.80q: after sysctl -p, %s %s = %d, %v; want %d", f.Key, v, up, set.Name, got, err, set.Value)
				}
				if err := ns.sysctl().Set(up, set.Name, 0); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if len(links) < 5 {
		t.Errorf("only %d uplink names accepted; the test needs the hostile values check accepts", len(links))
	}
	t.Logf("sysctl -p loaded %d distinct files over %d uplink names", seen, len(links))
}
