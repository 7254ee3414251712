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
	static := []config.Backend{{Name: "cp1", Address: "192.0.2.1:6443"}, {Name: "192.0.2.9:6443", Address: "api.example:6443"}}
	members := []discovery.Member{
		{Addr: netip.MustParseAddrPort("192.0.2.1:6443"), Source: discovery.Discovered},
		{Addr: netip.MustParseAddrPort("192.0.2.2:6443"), Source: discovery.Remembered},
		{Addr: netip.MustParseAddrPort("192.0.2.3:6443"), Source: discovery.Discovered, DrainUntil: time.Now()},
		{Addr: netip.MustParseAddrPort("192.0.2.9:6443"), Source: discovery.Discovered},
	}
	list, sources, draining := backendSet(static, members)
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
