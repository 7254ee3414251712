package config

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden testdata/bad/*.err files")

// TestBadConfigs parses every testdata/bad/*.toml and compares the exact
// error text with the golden .err file beside it.
func TestBadConfigs(t *testing.T) {
	files, err := filepath.Glob("testdata/bad/*.toml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 20 {
		t.Fatalf("only %d bad configs; want at least 20", len(files))
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".toml"), func(t *testing.T) {
			_, err := Load(file)
			if err == nil {
				t.Fatalf("Load(%s) succeeded; want an error", file)
			}
			var cerr *Error
			if !errors.As(err, &cerr) {
				t.Fatalf("error %v is %T, not *config.Error", err, err)
			}
			if cerr.File != file || cerr.Reason == "" {
				t.Errorf("error %+v does not name the file %s and a reason", cerr, file)
			}
			golden := strings.TrimSuffix(file, ".toml") + ".err"
			if *update {
				if err := os.WriteFile(golden, []byte(err.Error()+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, rerr := os.ReadFile(golden)
			if rerr != nil {
				t.Fatalf("read golden: %v", rerr)
			}
			if got := err.Error(); got != strings.TrimSpace(string(want)) {
				t.Errorf("error text\n got: %s\nwant: %s", got, strings.TrimSpace(string(want)))
			}
		})
	}
}

func TestGoodConfigDefaults(t *testing.T) {
	cfg, err := Parse("good.toml", []byte(`
[vip]
addresses = ["2001:db8::10"]

[[backend]]
address = "[2001:db8::1]:6443"

[[backend]]
name = "cp2"
address = "cp2.example.org:6443"

[health]
type = "https"
interval = "500ms"
timeout = "250ms"
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Backends[0].Name; got != "[2001:db8::1]:6443" {
		t.Errorf("backend[0].name = %q; want the address", got)
	}
	if cfg.Health.Interval.Duration != 500*time.Millisecond || cfg.Health.Timeout.Duration != 250*time.Millisecond {
		t.Errorf("health interval/timeout = %s/%s", cfg.Health.Interval, cfg.Health.Timeout)
	}
	def := Default()
	if cfg.VIP.Port != def.VIP.Port || cfg.Health.Rise != def.Health.Rise || cfg.Admin.Listen != def.Admin.Listen {
		t.Errorf("defaults not applied: %+v", cfg)
	}
	// An IPv6 VIP needs no uplink: there is no ARP to fix.
	if err := cfg.ValidateNetwork(); err != nil {
		t.Errorf("ValidateNetwork on an IPv6-only config: %v", err)
	}
}

// TestValidateNetworkNeedsUplink: an IPv4 VIP without uplinks serves, but
// the network and keepalived commands refuse it.
func TestValidateNetworkNeedsUplink(t *testing.T) {
	src := "[vip]\naddresses = [\"10.0.0.10\"]\n[[backend]]\naddress = \"10.0.0.1:6443\"\n"
	cfg, err := Parse("v4.toml", []byte(src))
	if err != nil {
		t.Fatalf("serve must accept an IPv4 VIP without uplinks: %v", err)
	}
	err = cfg.ValidateNetwork()
	want := "v4.toml: network.uplinks: the IPv4 VIP 10.0.0.10 needs at least one uplink interface (its ARP sysctls are set there)"
	if err == nil || err.Error() != want {
		t.Fatalf("ValidateNetwork = %v; want %s", err, want)
	}
	cfg, err = Parse("v4.toml", []byte(src+"[network]\nuplinks = [\"eth0\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.ValidateNetwork(); err != nil {
		t.Fatalf("ValidateNetwork with an uplink: %v", err)
	}
	if cfg.Keepalived.Interface != "eth0" {
		t.Errorf("keepalived.interface = %q; want the first uplink", cfg.Keepalived.Interface)
	}
}

func TestExampleLoadsAndCoversEveryKey(t *testing.T) {
	const path = "../../examples/vipproxy.toml"
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.ValidateNetwork(); err != nil {
		t.Fatalf("the example must also suit the host commands: %v", err)
	}
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range allKeys(reflect.TypeFor[Config](), "") {
		if keyLine(string(src), key) == 0 || !strings.Contains(string(src), lastPart(key)+" =") {
			t.Errorf("the example does not set %s", key)
		}
	}
}

// allKeys lists every leaf key of the schema as a TOML path; arrays of
// tables are listed with index 0.
func allKeys(t reflect.Type, prefix string) []string {
	var keys []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("toml"), ",")
		if name == "" || name == "-" {
			continue
		}
		ft := t.Field(i).Type
		switch {
		case ft.Kind() == reflect.Struct && ft != durationType && ft != addrType:
			keys = append(keys, allKeys(ft, joinKey(prefix, name))...)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct && ft.Elem() != addrType:
			keys = append(keys, allKeys(ft.Elem(), joinKey(prefix, name)+"[0]")...)
		default:
			keys = append(keys, joinKey(prefix, name))
		}
	}
	return keys
}

func lastPart(key string) string { return key[strings.LastIndex(key, ".")+1:] }

// TestEncodeRoundTrip: the effective config re-parses to the same Config.
func TestEncodeRoundTrip(t *testing.T) {
	cfg, err := Load("../../examples/vipproxy.toml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Health.ServerName = "kubernetes.default.svc"
	cfg.Backends[0].Name = "cp \"one\" #1"
	cfg.Network.Uplinks = nil
	cfg.Keepalived.UnicastPeers = []string{"192.0.2.2", "2001:db8::2"}
	assertRoundTrip(t, cfg)
}

func assertRoundTrip(t *testing.T, cfg *Config) {
	t.Helper()
	var buf bytes.Buffer
	if err := cfg.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	again, err := Parse(cfg.Path, buf.Bytes())
	if err != nil {
		t.Fatalf("encoded config does not parse: %v\n%s", err, buf.String())
	}
	if !reflect.DeepEqual(cfg, again) {
		t.Fatalf("round trip changed the config:\n before %+v\n after  %+v\n%s", cfg, again, buf.String())
	}
}

func TestKeyLine(t *testing.T) {
	src := `# comment [x]
[vip]
addresses = ["10.0.0.10"] # [[backend]]

[[backend]]
address = "a:1"

[[backend]]
  "address" = "b:2"
health.interval = "1s"
`
	for key, want := range map[string]int{
		"vip.addresses":              3,
		"vip.port":                   2,
		"backend[0].address":         6,
		"backend[1].address":         9,
		"backend[1].name":            8,
		"backend[1].health.interval": 10,
		"log.level":                  0,
	} {
		if got := keyLine(src, key); got != want {
			t.Errorf("keyLine(%s) = %d; want %d", key, got, want)
		}
	}
}

// FuzzParse: no input panics, every error is an *Error, and every accepted
// config survives Encode and Parse unchanged. The seed corpus in
// testdata/fuzz/FuzzParse runs with plain `go test`.
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/bad/*.toml")
	seeds = append(seeds, "../../examples/vipproxy.toml")
	for _, s := range seeds {
		if data, err := os.ReadFile(s); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse("fuzz.toml", data)
		if err != nil {
			var cerr *Error
			if !errors.As(err, &cerr) || cerr.File != "fuzz.toml" {
				t.Fatalf("error %v (%T) is not a *config.Error naming the file", err, err)
			}
			return
		}
		assertRoundTrip(t, cfg)
	})
}

// TestDefaultProbeIsThisBinary: keepalived's track script runs the vipproxy
// that rendered it, never an assumed /usr/bin/vipproxy (NixOS has none: the
// script would not exist and keepalived would drop it).
func TestDefaultProbeIsThisBinary(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := Default().Keepalived.ProbeCommand, exe+" probe"; got != want {
		t.Errorf("default probe_command = %q; want %q", got, want)
	}
}
