package units

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/coreos/go-systemd/v22/unit"

	"github.com/vipproxy/vipproxy/internal/testutil"
	"github.com/vipproxy/vipproxy/internal/testutil/testconfig"
	"github.com/vipproxy/vipproxy/service/atomicfile"
	"github.com/vipproxy/vipproxy/service/config"
)

const k0sPorts = `[[port]]
name = "api"
port = 6443
[[port]]
name = "konnectivity"
port = 8132
[[port]]
name = "join"
port = 9443`

// parse is a config with an uplink and one backend (host:port, or a host
// with [[port]] tables) after lines.
func parse(t *testing.T, backend string, lines ...string) *config.Valid {
	t.Helper()
	return testconfig.WithBackend(t, backend, append(slices.Clip(lines), `[network]`, `uplinks = ["eth0"]`)...)
}

func TestSocketDropInGolden(t *testing.T) {
	cases := map[string]struct {
		lines   []string
		backend string
	}{
		"ipv4":       {[]string{`[vip]`, `addresses = ["10.0.0.100"]`}, "192.0.2.1:6443"},
		"dual-stack": {[]string{`[vip]`, `addresses = ["10.0.0.100", "2001:db8:1::100"]`, `port = 443`}, "192.0.2.1:6443"},
		"k0s":        {[]string{`[vip]`, `addresses = ["10.0.0.100", "2001:db8:1::100"]`, k0sPorts}, "192.0.2.1"},
		// vip.reuse_port: every drop-in turns ReusePort= on.
		"rke2": {[]string{`[vip]`, `addresses = ["10.0.0.100"]`, `reuse_port = true`, "[[port]]\nname = \"api\"\nport = 6443\n[[port]]\nname = \"supervisor\"\nport = 9345"}, "192.0.2.1"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			files := Sockets(parse(t, tc.backend, tc.lines...), "/root-dir")
			if files[0].Path != "/root-dir/etc/systemd/system/vipproxy.socket.d/50-listen.conf" {
				t.Errorf("path %s", files[0].Path)
			}
			var all strings.Builder
			for _, f := range files {
				fmt.Fprintf(&all, "== %s\n%s", strings.TrimPrefix(f.Path, "/root-dir"), f.Data)
				// systemd's own syntax, read back: the reset comes first.
				opts, err := unit.DeserializeOptions(strings.NewReader(string(f.Data)))
				i := slices.IndexFunc(opts, func(o *unit.UnitOption) bool { return o.Section == "Socket" })
				if err != nil || i < 0 || opts[i].Name != "ListenStream" || opts[i].Value != "" || len(opts) < i+2 {
					t.Errorf("%s deserialized %v, %v: want an empty ListenStream= first", f.Path, opts, err)
				}
			}
			testutil.Golden(t, filepath.Join("testdata/golden", name+".conf"), []byte(all.String()))
		})
	}
}

// TestStalePortDropInsRemoved: a removed [[port]]'s drop-in is found and
// removed; the others stay.
func TestStalePortDropInsRemoved(t *testing.T) {
	root := t.TempDir()
	cfg := parse(t, "192.0.2.1", `[vip]`, `addresses = ["10.0.0.100"]`, k0sPorts)
	if _, err := atomicfile.WriteSet(Sockets(cfg, root), nil); err != nil {
		t.Fatal(err)
	}
	fewer := parse(t, "192.0.2.1", `[vip]`, `addresses = ["10.0.0.100"]`, "[[port]]\nname = \"api\"\nport = 6443\n[[port]]\nname = \"join\"\nport = 9443")
	stale := Stale(fewer, root)
	want := filepath.Join(root, "etc/systemd/system/vipproxy-port@konnectivity.socket.d/50-listen.conf")
	if len(stale) != 1 || stale[0] != want {
		t.Fatalf("stale = %v; want [%s]", stale, want)
	}
	if removed, err := RemoveStale(fewer, root); err != nil || len(removed) != 1 {
		t.Fatalf("RemoveStale = %v, %v", removed, err)
	}
	if _, err := os.Stat(filepath.Dir(want)); !os.IsNotExist(err) {
		t.Errorf("the empty drop-in directory stayed: %v", err)
	}
	for _, f := range Sockets(fewer, root) {
		if _, err := os.Stat(f.Path); err != nil {
			t.Errorf("a current drop-in went: %v", err)
		}
	}
	if s := Stale(fewer, root); len(s) != 0 {
		t.Errorf("still stale: %v", s)
	}
}
