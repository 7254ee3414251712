package bird

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vipproxy/vipproxy/internal/testutil"
	"github.com/vipproxy/vipproxy/internal/testutil/testconfig"
	"github.com/vipproxy/vipproxy/service/config"
)

// parseConfig is a BGP node's lines plus an uplink and one backend.
func parseConfig(t *testing.T, lines ...string) *config.Valid {
	t.Helper()
	return testconfig.WithBackend(t, "192.0.2.21:6443", append(slices.Clip(lines), `[network]`, `uplinks = ["eth0"]`)...)
}

var goldenCases = map[string][]string{
	"minimal": {`[vip]`, `mode = "bgp"`, `addresses = ["192.0.2.10"]`, `port = 6443`,
		`[bgp]`, `local_as = 65001`, `router_id = "192.0.2.11"`, `peers = [{address = "192.0.2.1", as = 65000}]`},
	"dual-stack-bfd-communities": {`[vip]`, `mode = "bgp"`, `addresses = ["192.0.2.10", "2001:db8::10"]`, `port = 6443`,
		`[bgp]`, `local_as = 4200000001`, `router_id = "192.0.2.11"`, `interface = "vipannounce"`, `hold_time = 30`,
		`communities = ["65000:100", "4200000001:1:2"]`,
		`[[bgp.peers]]`, `name = "tor_a"`, `address = "192.0.2.1"`, `as = 65000`, `bfd = true`, `password = "s3cret"`,
		`[[bgp.peers]]`, `name = "tor_b"`, `address = "192.0.2.2"`, `as = 65000`,
		`[[bgp.peers]]`, `name = "tor_a6"`, `address = "2001:db8::1"`, `as = 65000`, `bfd = true`},
}

func TestRenderGolden(t *testing.T) {
	for name, lines := range goldenCases {
		t.Run(name, func(t *testing.T) {
			testutil.Golden(t, filepath.Join("testdata/golden", name+".conf"), Render(parseConfig(t, lines...)))
		})
	}
}

// debianMain is Debian bird2's /etc/bird/bird.conf without its comments,
// plus the include line the docs tell operators to add.
const debianMain = `log stderr all;
protocol device {
}
protocol direct {
	disabled;
	ipv4;
	ipv6;
}
protocol kernel {
	ipv4 { export all; };
}
protocol kernel {
	ipv6 { export all; };
}
protocol static {
	ipv4;
}
include "%s";
`

// TestRenderedParsesInBIRD: BIRD itself (bird -p) reads every rendered
// file, included from Debian's main file, as the docs say to install it.
func TestRenderedParsesInBIRD(t *testing.T) {
	birdBin, err := exec.LookPath("bird")
	if err != nil {
		t.Skip("no bird binary (apt-get install bird2; make deps installs it)")
	}
	for name, lines := range goldenCases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			snippet := filepath.Join(dir, "vipproxy.conf")
			main := filepath.Join(dir, "bird.conf")
			if err := os.WriteFile(snippet, Render(parseConfig(t, lines...)), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(main, []byte(strings.ReplaceAll(debianMain, "%s", snippet)), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(birdBin, "-p", "-c", main).CombinedOutput()
			if err != nil {
				t.Fatalf("bird -p rejects the rendered file: %v\n%s\n%s", err, out, Render(parseConfig(t, lines...)))
			}
		})
	}
}
