package config_test

import (
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/vipproxy/vipproxy/internal/testutil/testconfig"
	"github.com/vipproxy/vipproxy/service/config"
)

// TestHostileRenderedValuesRefused sets every field that vipproxy writes
// into another program's file to hostile values (a newline, a NUL, a
// keepalived directive in an IPv6 zone, 5000 bytes ...): check refuses
// each at the file, line and key it was written at. Whatever it accepts
// the renderers' packages give to keepalived, bird and systemd-analyze.
func TestHostileRenderedValuesRefused(t *testing.T) {
	for _, f := range testconfig.Fields {
		t.Run(f.Base+"/"+f.Key, func(t *testing.T) {
			if _, err := config.Parse("/etc/vipproxy/vipproxy.toml", []byte(f.Config(f.Prefix+f.Good))); err != nil {
				t.Fatalf("the good value %q is refused: %v", f.Good, err)
			}
			accepted := 0
			for _, v := range f.Values() {
				_, err := config.Parse("/etc/vipproxy/vipproxy.toml", []byte(f.Config(v)))
				if err == nil {
					accepted++
					if mustRefuse(v) {
						t.Errorf("%s = %.80q (%d bytes) passes check", f.Key, v, len(v))
					}
					continue
				}
				var ce *config.Error
				if !errors.As(err, &ce) || ce.Key != f.Key || ce.Line == 0 {
					t.Errorf("%s = %.80q: %.300v, want the first error at line:%s", f.Key, v, err, f.Key)
				}
			}
			t.Logf("%d of %d values accepted", accepted, len(f.Values()))
		})
	}
}

func mustRefuse(v string) bool {
	for _, h := range testconfig.MustRefuse {
		if strings.Contains(v, h) {
			return true
		}
	}
	return false
}

// TestInjectionThroughZoneRefused is the attack as it was written:
// a unicast peer whose zone ends the block and adds a root notify_master.
func TestInjectionThroughZoneRefused(t *testing.T) {
	src := `[vip]
addresses = ["2001:db8::10"]
[network]
uplinks = ["eth1"]
[keepalived]
unicast_peers = ["2001:db8::2%x\n }\n notify_master \"/usr/local/sbin/evil\"\n unicast_peer {"]
[[backend]]
address = "192.0.2.21:6443"
`
	_, err := config.Parse("/etc/vipproxy/vipproxy.toml", []byte(src))
	want := `/etc/vipproxy/vipproxy.toml:6: keepalived.unicast_peers[0]: "2001:db8::2%x\n }\n notify_master \"/usr/local/sbin/evil\"\n unicast_peer {" has a zone`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("got %v\nwant %s...", err, want)
	}
	_, err = config.Parse("/etc/vipproxy/vipproxy.toml", []byte(strings.Replace(src, `2001:db8::2%x\n }\n notify_master \"/usr/local/sbin/evil\"\n unicast_peer {`, `fe80::2%eth1`, 1)))
	if err == nil || !strings.Contains(err.Error(), "keepalived.unicast_peers[0]: \"fe80::2%eth1\" has a zone") {
		t.Errorf("a link-local peer with a zone (keepalived falls back to multicast): %v", err)
	}
}

// TestEveryRenderedFieldIsTried: each key the renderers write (config's
// list of typed fields) is among the fields the hostile tests set.
func TestEveryRenderedFieldIsTried(t *testing.T) {
	tried := map[string]bool{}
	for _, f := range testconfig.Fields {
		tried[f.Key] = true
	}
	for _, f := range testconfig.Fields {
		cfg, err := config.Parse("/etc/vipproxy/vipproxy.toml", []byte(f.Config(f.Prefix+f.Good)))
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range config.RenderedKeys(cfg) {
			if !tried[key] {
				t.Errorf("%s is written into another program's file but no hostile value is tried in it (testconfig.Fields)", key)
			}
		}
	}
}

// TestEveryWrittenTableKeyHasAType: every text key of the tables the
// renderers write from ([network], [keepalived], [bgp] and its peers,
// [[port]] names, the VIPs) is among the fields the hostile tests set, so
// a key added later is written nowhere without a field type.
func TestEveryWrittenTableKeyHasAType(t *testing.T) {
	tried := map[string]bool{}
	for _, f := range testconfig.Fields {
		tried[indexless(f.Key)] = true
	}
	enums := map[string]bool{"keepalived.state": true, "vip.mode": true} // decoded as one of their names
	var c config.Config
	for table, v := range map[string]any{"network": c.Network, "keepalived": c.Keepalived, "bgp": c.BGP, "bgp.peers": config.BGPPeer{}, "port": config.Port{}, "vip": c.VIP} {
		rt := reflect.TypeOf(v)
		for i := range rt.NumField() {
			f := rt.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
			key := table + "." + name
			text := f.Type.Kind() == reflect.String || f.Type == reflect.TypeOf(netip.Addr{}) ||
				f.Type.Kind() == reflect.Slice && (f.Type.Elem().Kind() == reflect.String || f.Type.Elem() == reflect.TypeOf(netip.Addr{}))
			if text && !tried[key] && !enums[key] {
				t.Errorf("%s is text written into another program's file but has no hostile values tried (testconfig.Fields) and perhaps no field type (config/fields.go)", key)
			}
		}
	}
}

// indexless drops the indexes of a key: bgp.peers[0].name is bgp.peers.name.
func indexless(key string) string {
	for {
		i := strings.Index(key, "[")
		if i < 0 {
			return key
		}
		key = key[:i] + key[strings.Index(key, "]")+1:]
	}
}
