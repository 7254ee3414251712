package config

import (
	"reflect"
	"strings"
	"testing"
)

// TestBGPKeysDocumented: every [bgp] key is set in examples/bgp.toml (the
// reference example is a VRRP node, where [bgp] is refused).
func TestBGPKeysDocumented(t *testing.T) {
	exampleSetsKeys(t, "../../examples/bgp.toml", func(key string) bool { return strings.HasPrefix(key, "bgp.") })
}

const bgpBase = `[vip]
mode = "bgp"
addresses = ["192.0.2.10", "2001:db8::10"]
port = 6443
[[backend]]
address = "192.0.2.11:6443"
[network]
uplinks = ["eth0"]
[bgp]
local_as = 65001
router_id = "192.0.2.11"
peers = [{address = "192.0.2.1", as = 65000}, {name = "tor_v6", address = "2001:db8::1", as = 65000, bfd = true}]
`

func TestBGPDefaults(t *testing.T) {
	cfg, err := Parse("bgp.toml", []byte(bgpBase))
	if err != nil {
		t.Fatal(err)
	}
	b := cfg.BGP
	if b.Interface != "vipbgp0" || b.HoldTime != 9 || b.Peers[0].Name != "peer1" || b.Peers[1].Name != "tor_v6" {
		t.Errorf("defaults not applied: %+v", b)
	}
	if got := b.PeerProtocol(1); got != "vipproxy_tor_v6" {
		t.Errorf("PeerProtocol(1) = %q", got)
	}
	if cfg.Keepalived.Interface != "" {
		t.Errorf("keepalived.interface derived as %q in bgp mode (it is not read)", cfg.Keepalived.Interface)
	}
	// The effective config (vipproxy check) reads back to the same.
	var sb strings.Builder
	c := cfg.Config()
	if err := c.Encode(&sb); err != nil {
		t.Fatal(err)
	}
	again, err := Parse("bgp.toml", []byte(sb.String()))
	if err != nil {
		t.Fatalf("effective config does not parse: %v\n%s", err, sb.String())
	}
	if !reflect.DeepEqual(again.BGP, cfg.BGP) {
		t.Errorf("round trip: %+v; want %+v", again.BGP, cfg.BGP)
	}
}

// TestEffectiveConfigLeavesOutRefusedTables: the effective config has no
// table its mode refuses. Written out, [keepalived] carried
// probe_command, this binary's path, which the same file read by a binary
// elsewhere (an upgrade) took as written by hand and refused in bgp mode;
// [bgp] could only hold defaults in the other modes.
func TestEffectiveConfigLeavesOutRefusedTables(t *testing.T) {
	for _, tc := range []struct {
		file, absent, present string
	}{
		{"../../examples/bgp.toml", "[keepalived]", "[bgp]"},
		{"../../examples/vipproxy.toml", "[bgp]", "[keepalived]"},
	} {
		cfg, err := Load(tc.file, AllFiles)
		if err != nil {
			t.Fatal(err)
		}
		var sb strings.Builder
		if err := cfg.Encode(&sb); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(sb.String(), "\n"+tc.absent+"\n") || !strings.Contains(sb.String(), "\n"+tc.present+"\n") {
			t.Errorf("%s: effective config with %s or without %s:\n%s", tc.file, tc.absent, tc.present, sb.String())
		}
		assertRoundTrip(t, cfg)
	}
}
