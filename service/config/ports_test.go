package config

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// k0sShaped is a k0s control plane's VIP: the API, konnectivity and the
// controller join API, the last two checked with a TLS handshake.
const k0sShaped = `
[vip]
addresses = ["192.0.2.10", "2001:db8::10"]

[network]
uplinks = ["eth0"]

[health]
interval = "2s"
timeout = "500ms"

[[backend]]
name = "cp1"
address = "192.0.2.1"

[[backend]]
address = "2001:db8::2"

[[backend]]
address = "[2001:db8::3]"

[[port]]
name = "api"
port = 6443

[[port]]
name = "konnectivity"
port = 8132
backend_port = 8133
[port.health]
type = "tls"
interval = "500ms"

[[port]]
name = "join"
port = 9443
required = true
[port.health]
type = "tcp"
`

func TestPortsDefaultsAndOverrides(t *testing.T) {
	cfg, err := Parse("k0s.toml", []byte(k0sShaped))
	if err != nil {
		t.Fatal(err)
	}
	ports := cfg.ServedPorts()
	if len(ports) != 3 || cfg.VIP.Port != 0 {
		t.Fatalf("ports %+v, vip.port %d; want 3 ports and no vip.port", ports, cfg.VIP.Port)
	}
	want := []struct {
		name              string
		port, backendPort uint16
		required          bool
		check             CheckKind
		interval          time.Duration
	}{
		{"api", 6443, 6443, true, CheckHTTPS, 2 * time.Second},
		{"konnectivity", 8132, 8133, false, CheckTLS, 500 * time.Millisecond},
		{"join", 9443, 9443, true, CheckTCP, 2 * time.Second},
	}
	for i, w := range want {
		p := ports[i]
		if p.Name != w.name || p.Port != w.port || p.BackendPort != w.backendPort || p.IsRequired() != w.required ||
			p.Health.Type != w.check || p.Health.Interval.Duration != w.interval {
			t.Errorf("port[%d] = %+v (required %v); want %+v", i, p, p.IsRequired(), w)
		}
		// Keys the port does not set are [health]'s.
		if p.Health.Timeout.Duration != 500*time.Millisecond || p.Health.Path != "/readyz" || p.Health.Rise != 2 {
			t.Errorf("port[%d] health %+v does not inherit [health]", i, p.Health)
		}
	}
	for i, addr := range []string{"192.0.2.1:8133", "[2001:db8::2]:8133", "[2001:db8::3]:8133"} {
		if got := ports[1].BackendAddress(cfg.Backends[i]); got != addr {
			t.Errorf("BackendAddress(konnectivity, backend[%d]) = %q; want %q", i, got, addr)
		}
	}
	if got := cfg.DiscoveredBackend("192.0.2.7:6443"); got != (Backend{Name: "192.0.2.7", Address: "192.0.2.7"}) {
		t.Errorf("DiscoveredBackend = %+v; want the host alone", got)
	}
	if got := cfg.DiscoveryPort().Name; got != "api" {
		t.Errorf("DiscoveryPort = %s; want api", got)
	}
	assertRoundTrip(t, cfg)
}

// TestLegacyFormIsOnePortNamedAPI: a config without [[port]] serves one
// port "api" on vip.port, each backend at its own host:port, as before.
func TestLegacyFormIsOnePortNamedAPI(t *testing.T) {
	cfg, err := Parse("legacy.toml", []byte("[vip]\naddresses = [\"127.0.0.10\"]\nport = 7443\n"+
		"[[backend]]\naddress = \"127.0.0.1:6443\"\n[[backend]]\naddress = \"127.0.0.2:16443\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	ports := cfg.ServedPorts()
	if len(ports) != 1 || ports[0].Name != "api" || ports[0].Port != 7443 || !ports[0].IsRequired() || ports[0].Health != cfg.Health {
		t.Fatalf("served ports %+v; want one required port api on 7443 with [health]", ports)
	}
	if got := ports[0].BackendAddress(cfg.Backends[1]); got != "127.0.0.2:16443" {
		t.Errorf("BackendAddress = %q; want the backend's own host:port", got)
	}
	if got := cfg.DiscoveredBackend("127.0.0.7:6443"); got.Address != "127.0.0.7:6443" {
		t.Errorf("DiscoveredBackend = %+v; want host:port", got)
	}
	assertRoundTrip(t, cfg)
}

// backend_port = 0 written in a file is refused, not taken as left out
// (the port's own), which it stood for once decoded.
func TestBackendPortZeroRefused(t *testing.T) {
	_, err := Parse("zero.toml", []byte("[vip]\naddresses = [\"127.0.0.10\"]\n[[backend]]\naddress = \"127.0.0.1\"\n"+
		"[[port]]\nname = \"api\"\nport = 6443\n[[port]]\nname = \"join\"\nport = 9443\nbackend_port = 0\n"))
	var cerr *Error
	if !errors.As(err, &cerr) || cerr.Key != "port[1].backend_port" || cerr.Line != 11 || !strings.Contains(cerr.Reason, "must be between 1 and 65535") {
		t.Fatalf("backend_port = 0: %v; want an error at port[1].backend_port, line 11", err)
	}
}

// TestPortsInCode: a Config built in code gets the same defaults as a file.
func TestPortsInCode(t *testing.T) {
	c := Default()
	c.VIP.Addresses = []netip.Addr{netip.MustParseAddr("127.0.0.10")}
	c.Backends = []Backend{{Address: "127.0.0.1"}}
	c.Ports = []Port{{Name: "api", Port: 6443}, {Name: "join", Port: 9443}}
	if _, err := Validate(c); err == nil || !strings.Contains(err.Error(), "vip.port: is set together with [[port]]") {
		t.Fatalf("vip.port with ports: %v", err)
	}
	c.VIP.Port = 0
	v, err := Validate(c)
	if err != nil {
		t.Fatal(err)
	}
	ps := v.ServedPorts()
	if !ps[0].IsRequired() || ps[1].IsRequired() || ps[1].BackendPort != 9443 || ps[1].Health != c.Health {
		t.Errorf("ports %+v", ps)
	}
	if c.Ports[0].Required != nil {
		t.Errorf("Validate changed the caller's Config")
	}
}

// TestPortNameResolvingToVIPRefused: a backend name is checked at every
// port's backend_port that is one of our listeners.
func TestPortNameResolvingToVIPRefused(t *testing.T) {
	cfg, err := Parse("loop.toml", []byte("[vip]\naddresses = [\"127.0.0.10\"]\n[[backend]]\naddress = \"cp1.example\"\n"+
		"[[port]]\nname = \"api\"\nport = 6443\nbackend_port = 16443\n[[port]]\nname = \"join\"\nport = 9443\n"))
	if err != nil {
		t.Fatal(err)
	}
	lookup := func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.10")}, nil
	}
	err = cfg.checkNames(context.Background(), lookup)
	if err == nil || !strings.Contains(err.Error(), `"cp1.example:9443" resolves to 127.0.0.10, which reaches the VIP listener of port join`) {
		t.Fatalf("checkNames = %v; want the join port's loop", err)
	}
}

func TestKeyLineInPortHealth(t *testing.T) {
	for key, want := range map[string]int{
		"port[0].name":           23,
		"port[1].health.type":    31,
		"port[1].health.timeout": 30,
		"port[2].required":       37,
		"port[2].health.type":    39,
	} {
		wantKeyLine(t, k0sShaped, key, want)
	}
}

// TestPortKeysDocumented: every [[port]] key is set in the multi-port
// example (the reference example documents the one-port form, whose
// vip.port cannot stand beside [[port]] tables).
func TestPortKeysDocumented(t *testing.T) {
	exampleSetsKeys(t, "testdata/good/ports.toml", func(key string) bool { return strings.HasPrefix(key, "port[") })
}
