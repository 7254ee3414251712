package netcfg

import (
	"path/filepath"
	"testing"

	"github.com/vipproxy/vipproxy/internal/testutil"
	"github.com/vipproxy/vipproxy/internal/testutil/testconfig"
)

var goldenCases = map[string][]string{
	"ipv4":       {`[vip]`, `addresses = ["10.0.0.100"]`, `[network]`, `uplinks = ["eth0"]`},
	"ipv6":       {`[vip]`, `addresses = ["2001:db8:1::100"]`, `[network]`, `uplinks = ["eth0"]`},
	"dual-stack": {`[vip]`, `addresses = ["10.0.0.100", "2001:db8:1::100"]`, `[network]`, `uplinks = ["eth1"]`},
	"several-uplinks": {`[vip]`, `addresses = ["10.0.0.100"]`, `[network]`,
		`uplinks = ["eth0", "bond0", "eth0.100", "enp1s0f1"]`},
	"custom-names": {`[vip]`, `addresses = ["172.16.5.5"]`, `[network]`, `interface = "kubevip"`,
		`uplinks = ["ens3"]`, `networkd_dir = "/run/systemd/network"`, `netdev_file = "10-kubevip.netdev"`,
		`network_file = "10-kubevip.network"`, `sysctl_file = "/run/sysctl.d/10-kubevip.conf"`},
}

// TestRenderGolden compares every rendered file, path included, with
// testdata/golden/<case>/; run with -update to rewrite them.
func TestRenderGolden(t *testing.T) {
	for name, lines := range goldenCases {
		t.Run(name, func(t *testing.T) {
			files := Render(testconfig.WithBackend(t, "192.0.2.1:6443", lines...), "/")
			for _, f := range files.List() {
				testutil.Golden(t, filepath.Join("testdata/golden", name, f.Path), f.Data)
			}
		})
	}
}
