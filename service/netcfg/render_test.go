package netcfg

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vipproxy/vipproxy/service/config"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// parseConfig builds a config from TOML lines plus one backend.
func parseConfig(t *testing.T, lines ...string) *config.Config {
	t.Helper()
	text := strings.Join(lines, "\n") + "\n[[backend]]\naddress = \"192.0.2.1:6443\"\n"
	cfg, err := config.Parse("/etc/vipproxy/vipproxy.toml", []byte(text))
	if err != nil {
		t.Fatalf("parse config: %v", err)
	}
	return cfg
}

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
			files, err := Render(parseConfig(t, lines...), "/")
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range files.List() {
				golden := filepath.Join("testdata/golden", name, f.Path)
				if *update {
					if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(golden, f.Data, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("read golden (run go test -update): %v", err)
				}
				if string(want) != string(f.Data) {
					t.Errorf("%s differs from %s:\n--- got\n%s--- want\n%s", f.Path, golden, f.Data, want)
				}
			}
		})
	}
}

// TestRenderRejectsBadNetworkKeys covers Render's own checks, which hold
// even for a config that did not come through config.Parse.
func TestRenderRejectsBadNetworkKeys(t *testing.T) {
	cases := map[string]struct {
		edit       func(n *config.Network)
		key, cause string
	}{
		"all as uplink":    {func(n *config.Network) { n.Uplinks = []string{"all"} }, "network.uplinks[0]", "breaks hairpin"},
		"default uplink":   {func(n *config.Network) { n.Uplinks = []string{"eth0", "default"} }, "network.uplinks[1]", "all/default"},
		"no uplinks":       {func(n *config.Network) { n.Uplinks = nil }, "network.uplinks", "at least one"},
		"long name":        {func(n *config.Network) { n.Interface = "averyveryverylongname" }, "network.interface", "longer than 15"},
		"slash in name":    {func(n *config.Network) { n.Uplinks = []string{"eth/0"} }, "network.uplinks[0]", "'/'"},
		"uplink is VIP if": {func(n *config.Network) { n.Uplinks = []string{"dummyvip0"} }, "network.uplinks[0]", "VIP link itself"},
		"duplicate":        {func(n *config.Network) { n.Uplinks = []string{"eth0", "eth0"} }, "network.uplinks[1]", "twice"},
		"relative dir":     {func(n *config.Network) { n.NetworkdDir = "network" }, "network.networkd_dir", "absolute"},
		"netdev ext":       {func(n *config.Network) { n.NetdevFile = "60-x.conf" }, "network.netdev_file", ".netdev"},
		"sysctl ext":       {func(n *config.Network) { n.SysctlFile = "/etc/sysctl.d/x" }, "network.sysctl_file", ".conf"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := parseConfig(t, `[vip]`, `addresses = ["10.0.0.100"]`, `[network]`, `uplinks = ["eth0"]`)
			c.edit(&cfg.Network)
			_, err := Render(cfg, "/")
			cerr, ok := err.(*config.Error)
			if !ok {
				t.Fatalf("got %v, want a *config.Error", err)
			}
			if cerr.Key != c.key || !strings.Contains(cerr.Reason, c.cause) || cerr.File != "/etc/vipproxy/vipproxy.toml" {
				t.Errorf("got %q, want key %s and reason containing %q", err, c.key, c.cause)
			}
		})
	}
}
