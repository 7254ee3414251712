package config

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode"
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
			_, err := Load(file, AllFiles)
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
			assertOneLine(t, err)
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

[keepalived]
interface = "eth0" # an IPv6 VIP needs no uplink (no ARP to fix), VRRP an interface
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
}

// TestIPv4NeedsUplink: an IPv4 VIP needs an uplink, whose ARP sysctls
// are set; the first uplink is then the VRRP interface.
func TestIPv4NeedsUplink(t *testing.T) {
	src := "[vip]\naddresses = [\"10.0.0.10\"]\n[[backend]]\naddress = \"10.0.0.1:6443\"\n"
	_, err := Parse("v4.toml", []byte(src))
	want := "v4.toml: network.uplinks: the IPv4 VIP 10.0.0.10 needs at least one uplink interface (its ARP sysctls are set there)\n" +
		"v4.toml: keepalived.interface: no VRRP interface: set keepalived.interface or network.uplinks"
	if err == nil || err.Error() != want {
		t.Fatalf("Parse = %v; want\n%s", err, want)
	}
	cfg, err := Parse("v4.toml", []byte(src+"[network]\nuplinks = [\"eth0\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Keepalived.Interface != "eth0" {
		t.Errorf("keepalived.interface = %q; want the first uplink", cfg.Keepalived.Interface)
	}
}

func TestExampleLoadsAndCoversEveryKey(t *testing.T) {
	exampleSetsKeys(t, "../../examples/vipproxy.toml", func(key string) bool {
		// The one-port VRRP form here; TestPortKeysDocumented, TestBGPKeysDocumented.
		return !strings.HasPrefix(key, "port[") && !strings.HasPrefix(key, "bgp.")
	})
}

// exampleSetsKeys fails the test for each schema key that covers selects
// and the example at path (which must load) does not set.
func exampleSetsKeys(t *testing.T, path string, covers func(key string) bool) {
	t.Helper()
	src := string(loadAndRead(t, path))
	for _, key := range allKeys(reflect.TypeFor[Config](), "") {
		if covers(key) && (keyLine(src, key) == 0 || !strings.Contains(src, lastPart(key)+" =")) {
			t.Errorf("%s does not set %s", path, key)
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
	cfg, err := Load("../../examples/vipproxy.toml", AllFiles)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Health.ServerName = "kubernetes.default.svc"
	cfg.Backends[0].Name = "cp \"one\" #1"
	cfg.Keepalived.UnicastPeers = []string{"192.0.2.2", "192.0.2.3"}
	assertRoundTrip(t, cfg)
}

func assertRoundTrip(t *testing.T, cfg *Valid) {
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
		wantKeyLine(t, src, key, want)
	}
}

func wantKeyLine(t *testing.T, src, key string, want int) {
	t.Helper()
	if got := keyLine(src, key); got != want {
		t.Errorf("keyLine(%s) = %d; want %d", key, got, want)
	}
}

// FuzzParse: no input panics, every error is an *Error, and every accepted
// config survives Encode and Parse unchanged. The seed corpus in
// testdata/fuzz/FuzzParse runs with plain `go test`.
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/bad/*.toml")
	seeds = append(seeds, "../../examples/vipproxy.toml", "testdata/good/ports.toml")
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
			assertOneLine(t, err)
			return
		}
		assertRoundTrip(t, cfg)
	})
}

// assertOneLine: every problem is one line (of `check`'s output, of the
// journal) whatever bytes the file held.
func assertOneLine(t *testing.T, err error) {
	t.Helper()
	for _, line := range strings.Split(err.Error(), "\n") {
		if strings.ContainsFunc(line, unicode.IsControl) || line == "" {
			t.Errorf("error %q: a problem spans lines or holds control characters", err)
		}
	}
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

// TestAdminListen: the admin endpoint has no authentication, so it listens
// on loopback unless admin.allow_remote says otherwise (admin.Listen takes
// what passes here without looking again).
func TestAdminListen(t *testing.T) {
	parse := func(listen string, remote bool) error {
		src := fmt.Sprintf("[vip]\naddresses = [\"192.0.2.10\"]\n[[backend]]\naddress = \"192.0.2.1:6443\"\n"+
			"[network]\nuplinks = [\"eth0\"]\n[admin]\nlisten = %q\nallow_remote = %t\n", listen, remote)
		_, err := Parse("admin.toml", []byte(src))
		return err
	}
	for _, addr := range []string{"0.0.0.0:6444", ":6444", "[::]:6444", "192.0.2.10:6444", "admin.example:6444"} {
		if err := parse(addr, false); err == nil || !strings.Contains(err.Error(), "admin.listen") || !strings.Contains(err.Error(), "allow_remote") {
			t.Errorf("listen %q = %v; want an admin.listen error naming allow_remote", addr, err)
		}
		if err := parse(addr, true); err != nil && addr != "admin.example:6444" {
			t.Errorf("listen %q with allow_remote: %v", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1", "127.0.0.1:99999", "127.0.0.1:http", "unix:relative"} {
		if err := parse(addr, false); err == nil {
			t.Errorf("listen %q accepted", addr)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "[::1]:6444", "localhost:6444", "127.1.2.3:6444", "unix:/run/vipproxy/admin.sock", ""} {
		if err := parse(addr, false); err != nil {
			t.Errorf("loopback %q refused: %v", addr, err)
		}
	}
}

// TestHostRules: the rules the renderers (netcfg, keepalived, units) once
// checked again on their own, each with the key and reason check reports.
func TestHostRules(t *testing.T) {
	base, err := Parse("/etc/vipproxy/vipproxy.toml", []byte("[vip]\naddresses = [\"10.0.0.100\"]\n"+
		"[[backend]]\naddress = \"192.0.2.1:6443\"\n[network]\nuplinks = [\"eth0\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		edit       func(c *Config)
		key, cause string
	}{
		"all as uplink":    {func(c *Config) { c.Network.Uplinks = []string{"all"} }, "network.uplinks[0]", "never on all"},
		"default uplink":   {func(c *Config) { c.Network.Uplinks = []string{"eth0", "default"} }, "network.uplinks[1]", "never on all"},
		"no uplinks":       {func(c *Config) { c.Network.Uplinks = nil }, "network.uplinks", "needs at least one uplink"},
		"long name":        {func(c *Config) { c.Network.Interface = "averyveryverylongname" }, "network.interface", "longer than 15"},
		"slash in name":    {func(c *Config) { c.Network.Uplinks = []string{"eth/0"} }, "network.uplinks[0]", "not an interface name"},
		"uplink is VIP if": {func(c *Config) { c.Network.Uplinks = []string{"dummyvip0"} }, "network.uplinks[0]", "VIP interface"},
		"duplicate":        {func(c *Config) { c.Network.Uplinks = []string{"eth0", "eth0"} }, "network.uplinks[1]", "twice"},
		"relative dir":     {func(c *Config) { c.Network.NetworkdDir = "network" }, "network.networkd_dir", "absolute"},
		"netdev ext":       {func(c *Config) { c.Network.NetdevFile = "60-x.conf" }, "network.netdev_file", ".netdev"},
		"sysctl ext":       {func(c *Config) { c.Network.SysctlFile = "/etc/sysctl.d/x" }, "network.sysctl_file", ".conf"},
		"socket dir":       {func(c *Config) { c.Network.SocketDropIn = "/etc/systemd/system/other.socket.d/x.conf" }, "network.socket_dropin", "vipproxy.socket.d"},
		"socket relative":  {func(c *Config) { c.Network.SocketDropIn = "vipproxy.socket.d/x.conf" }, "network.socket_dropin", "absolute"},
		"router id":        {func(c *Config) { c.Keepalived.RouterID = 256 }, "keepalived.router_id", "1..255"},
		"priority":         {func(c *Config) { c.Keepalived.Priority = 255 }, "keepalived.priority", "address owner"},
		"long pass":        {func(c *Config) { c.Keepalived.AuthPass = "123456789" }, "keepalived.auth_pass", "truncate"},
		"pass brace":       {func(c *Config) { c.Keepalived.AuthPass = "a{b" }, "keepalived.auth_pass", "# ! { or }"},
		"pass on IPv6": {func(c *Config) {
			c.VIP.Addresses = []netip.Addr{netip.MustParseAddr("2001:db8::1")}
			c.Keepalived.AuthPass = "x"
		}, "keepalived.auth_pass", "VRRPv2"},
		"peer family": {func(c *Config) { c.Keepalived.UnicastPeers = []string{"2001:db8::2"} }, "keepalived.unicast_peers[0]", "same family"},
		"source family": {func(c *Config) {
			c.Keepalived.UnicastSrcIP, c.Keepalived.UnicastPeers = "2001:db8::2", []string{"10.0.0.12"}
		}, "keepalived.unicast_src_ip", "same family"},
		"source without peers": {func(c *Config) { c.Keepalived.UnicastSrcIP = "10.0.0.11" }, "keepalived.unicast_src_ip", "without keepalived.unicast_peers"},
		"bad peer":             {func(c *Config) { c.Keepalived.UnicastPeers = []string{"node2"} }, "keepalived.unicast_peers[0]", "not an IP"},
		"quote":                {func(c *Config) { c.Keepalived.ProbeCommand = `vipproxy "probe"` }, "keepalived.probe_command", "without double quotes"},
		"config path":          {func(c *Config) { c.Path = `/etc/my\vipproxy.toml` }, "keepalived.probe_command", "config path"},
		"empty probe":          {func(c *Config) { c.Keepalived.ProbeCommand = "" }, "keepalived.probe_command", "is empty"},
		"instance slash":       {func(c *Config) { c.Keepalived.Instance = "vip/proxy" }, "keepalived.instance", "one word"},
		"no iface": {func(c *Config) {
			c.Network.Uplinks = nil
			c.VIP.Addresses = []netip.Addr{netip.MustParseAddr("2001:db8::1")}
			c.Keepalived.Interface = ""
		}, "keepalived.interface", "no VRRP interface"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := base.Config()
			tc.edit(&c)
			_, err := Validate(c)
			var cerr *Error
			if !errors.As(err, &cerr) || cerr.Key != tc.key || !strings.Contains(cerr.Reason, tc.cause) {
				t.Errorf("got %v, want key %s with %q", err, tc.key, tc.cause)
			}
		})
	}
}

// keepalivedWord is what keepalived takes unquoted: ^[A-Za-z0-9_.:-]+$,
// written as a loop (a regexp cost the binary about 150 KB).
func TestKeepalivedWord(t *testing.T) {
	for s, want := range map[string]bool{
		"vipproxy": true, "eth0.100": true, "VI_1": true, "a:b-c": true, "0": true,
		"": false, "a b": false, "x$": false, "é": false, "a\n": false, `a"`: false, "a{": false, "vip/proxy": false,
	} {
		if got := keepalivedWord(s); got != want {
			t.Errorf("keepalivedWord(%q) = %v, want %v", s, got, want)
		}
	}
}

// loadAndRead fails the test unless the config at path loads, and returns
// its text.
func loadAndRead(t *testing.T, path string) []byte {
	t.Helper()
	if _, err := Load(path, AllFiles); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// TestProbeCommandOf: the default probe_command carries this binary's path
// as one word of keepalived's script line (single-quoted when it holds a
// space, as TestProbeGetsTheConfigPath shows keepalived reads it), or is
// empty where the line cannot carry the path.
func TestProbeCommandOf(t *testing.T) {
	for exe, want := range map[string]string{
		"/usr/bin/vipproxy":                      "/usr/bin/vipproxy probe",
		"/nix/store/abc-vipproxy-1/bin/vipproxy": "/nix/store/abc-vipproxy-1/bin/vipproxy probe",
		"/opt/vip proxy/vipproxy":                "'/opt/vip proxy/vipproxy' probe",
		"/opt/it's/vipproxy":                     "",
		`/opt/a\b/vipproxy`:                      "",
		"/opt/a\tb/vipproxy":                     "",
	} {
		if got := probeCommandOf(exe); got != want {
			t.Errorf("probeCommandOf(%q) = %q, want %q", exe, got, want)
		}
	}
}
