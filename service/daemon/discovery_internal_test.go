package daemon

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/vipproxy/vipproxy/service/config"
	"github.com/vipproxy/vipproxy/service/discovery"
)

// The static list comes first and wins over a discovered member with the
// same address or name; members keep their source and drain state.
func TestBackendSet(t *testing.T) {
	cfg, err := config.Parse("t.toml", []byte(`[vip]
addresses = ["127.0.0.10"]
[[backend]]
name = "cp1"
address = "192.0.2.1:6443"
[[backend]]
name = "192.0.2.9:6443"
address = "api.example:6443"
`))
	if err != nil {
		t.Fatal(err)
	}
	members := []discovery.Member{
		{Addr: netip.MustParseAddrPort("192.0.2.1:6443"), Source: discovery.Discovered},
		{Addr: netip.MustParseAddrPort("192.0.2.2:6443"), Source: discovery.Remembered},
		{Addr: netip.MustParseAddrPort("192.0.2.3:6443"), Source: discovery.Discovered, DrainUntil: time.Now()},
		{Addr: netip.MustParseAddrPort("192.0.2.9:6443"), Source: discovery.Discovered},
	}
	list, sources, draining := backendSet(cfg, members)
	var names []string
	for _, b := range list {
		names = append(names, b.Name)
	}
	if want := []string{"cp1", "192.0.2.9:6443", "192.0.2.2:6443", "192.0.2.3:6443"}; !slices.Equal(names, want) {
		t.Fatalf("backends %v, want %v", names, want)
	}
	if sources["cp1"] != discovery.Static || sources["192.0.2.2:6443"] != discovery.Remembered || !draining["192.0.2.3:6443"] || draining["192.0.2.2:6443"] {
		t.Fatalf("sources %v draining %v", sources, draining)
	}
}

// With [[port]] tables a discovered apiserver is a host, added to every
// port's pool; the static host wins over its discovered self.
func TestBackendSetWithPorts(t *testing.T) {
	cfg, err := config.Parse("t.toml", []byte(`[vip]
addresses = ["127.0.0.10"]
[[backend]]
name = "cp1"
address = "192.0.2.1"
[[port]]
name = "api"
port = 6443
[[port]]
name = "konnectivity"
port = 8132
`))
	if err != nil {
		t.Fatal(err)
	}
	members := []discovery.Member{
		{Addr: netip.MustParseAddrPort("192.0.2.1:6443"), Source: discovery.Discovered},
		{Addr: netip.MustParseAddrPort("192.0.2.2:6443"), Source: discovery.Discovered},
	}
	list, sources, _ := backendSet(cfg, members)
	if want := []config.Backend{{Name: "cp1", Address: "192.0.2.1"}, {Name: "192.0.2.2", Address: "192.0.2.2"}}; !slices.Equal(list, want) {
		t.Fatalf("backends %v, want %v", list, want)
	}
	if sources["192.0.2.2"] != discovery.Discovered {
		t.Errorf("sources %v", sources)
	}
	if got := cfg.ServedPorts()[1].BackendAddress(list[1]); got != "192.0.2.2:8132" {
		t.Errorf("konnectivity reaches the discovered host at %s", got)
	}
}

func TestStatePath(t *testing.T) {
	env := func(v string) func(string) string { return func(string) string { return v } }
	for _, c := range []struct{ dir, env, want string }{
		{"/var/lib/vipproxy", "", "/var/lib/vipproxy/discovered.json"},
		{"/var/lib/vipproxy", "/var/lib/private/vipproxy:/var/lib/other", "/var/lib/private/vipproxy/discovered.json"},
		{"", "", ""},
	} {
		if got := statePath(c.dir, env(c.env)); got != c.want {
			t.Errorf("statePath(%q, %q) = %q, want %q", c.dir, c.env, got, c.want)
		}
	}
}
