package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	"github.com/coreos/go-systemd/v22/unit"
	"golang.org/x/sys/unix"

	"github.com/vipproxy/vipproxy/internal/testutil"
	"github.com/vipproxy/vipproxy/service/balance"
	"github.com/vipproxy/vipproxy/service/config"
	"github.com/vipproxy/vipproxy/service/health"
	"github.com/vipproxy/vipproxy/service/keepalived"
	"github.com/vipproxy/vipproxy/service/netcfg"
	"github.com/vipproxy/vipproxy/service/units"
)

// One truth per rule: `vipproxy check` passes a file exactly when every
// consumer of the config accepts it. The renderers and the daemon take a
// config.Valid, which only validation makes, so a file check refuses never
// reaches them; these tests prove the other half: what check passes, each
// of them (and the kernel under the daemon) takes.

// TestCheckAgreesWithEveryConsumer runs the property on every golden bad
// config, the example, and randomConfigs random ones.
func TestCheckAgreesWithEveryConsumer(t *testing.T) {
	inputs := agreeSeeds(t)
	r := rand.New(rand.NewPCG(17, 16))
	for i := range randomConfigs {
		inputs[fmt.Sprintf("random-%03d", i)] = randomConfig(r)
	}
	kc := newKeepalivedChecker(t)
	passed := 0
	for name, data := range inputs {
		if assertAgrees(t, name, data) {
			passed++
			cfg, _ := config.Parse("/etc/vipproxy/vipproxy.toml", data)
			if err := kc.check(cfg); err != nil {
				t.Errorf("%s: check passed, but %v\n%s", name, err, data)
			}
		}
	}
	// Both sides of the property must be exercised.
	if passed < len(inputs)/10 || passed == len(inputs) {
		t.Errorf("%d of %d configs passed check; the generator no longer covers both sides", passed, len(inputs))
	}
	t.Logf("%d of %d configs passed check, all accepted by every consumer", passed, len(inputs))
}

const randomConfigs = 400

// FuzzCheckAgrees is the same property on the fuzzer's configs:
// go test -fuzz=FuzzCheckAgrees ./service/cli
func FuzzCheckAgrees(f *testing.F) {
	for _, data := range agreeSeeds(f) {
		f.Add(data)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		f.Add(randomConfig(r))
	}
	f.Fuzz(func(t *testing.T, data []byte) { assertAgrees(t, "fuzz", data) })
}

func agreeSeeds(t testing.TB) map[string][]byte {
	files, _ := filepath.Glob("../config/testdata/bad/*.toml")
	files = append(files, "../../examples/vipproxy.toml", "../config/testdata/good/ports.toml")
	seeds := map[string][]byte{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		seeds[filepath.Base(f)] = data
	}
	return seeds
}

var violationLine = regexp.MustCompile(`^vipproxy: [^:]+(:\d+)?: (\S+: )?\S`)

// assertAgrees runs check on data and, when it passes, every consumer.
func assertAgrees(t *testing.T, name string, data []byte) (passed bool) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "vipproxy.toml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCheckCmd(t, "--config", path)
	if code != ExitOK {
		for _, line := range strings.Split(strings.TrimSuffix(stderr, "\n"), "\n") {
			if code != ExitUsage || !violationLine.MatchString(line) {
				t.Errorf("%s: check exit %d, line %q is not file:line: key: reason", name, code, line)
			}
		}
		return false
	}
	cfg, err := config.Load(path, config.AllFiles)
	if err != nil {
		t.Fatalf("%s: check passed, Load refused: %v", name, err)
	}
	for _, problem := range consumerProblems(cfg) {
		t.Errorf("%s: check passed, but %s\n%s", name, problem, data)
	}
	return true
}

// consumerProblems feeds cfg to every renderer and to the daemon's setup
// (the parts that need no root and bind nothing) and says what refused it.
func consumerProblems(cfg *config.Valid) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	for _, p := range cfg.ServedPorts() {
		var backends []config.Backend
		for _, b := range cfg.Backends {
			backends = append(backends, config.Backend{Name: b.Name, Address: p.BackendAddress(b)})
		}
		if _, err := balance.NewPool(cfg.Balance.Algorithm, backends, nil); err != nil {
			bad("port %s: the pool refused it: %v", p.Name, err)
		}
		if _, err := health.NewProber(p.Health); err != nil {
			bad("port %s: the health checker refused it: %v", p.Name, err)
		}
	}
	if err := kernelTakes(cfg); err != nil {
		bad("the kernel refused a socket option: %v", err)
	}
	files := netcfg.Render(cfg, "/")
	for _, f := range []struct {
		data []byte
		name string
	}{{files.Netdev.Data, cfg.Network.Interface}, {files.Network.Data, cfg.Network.Interface}} {
		secs, err := unit.DeserializeSections(bytes.NewReader(f.data))
		if err != nil || len(secs) == 0 || len(secs[0].Entries) == 0 || secs[0].Entries[0].Value != f.name {
			bad("networkd cannot read %q as naming the link %q literally (%v)", f.data, f.name, err)
		}
	}
	if err := sysctlLines(files.Sysctl.Data, cfg.Network.Uplinks); err != nil {
		bad("the sysctl.d file: %v", err)
	}
	if err := keepalivedBlocks(keepalived.Render(cfg), cfg.Keepalived.Interface); err != nil {
		bad("the keepalived snippet: %v", err)
	}
	for _, drop := range units.Sockets(cfg, "/") {
		opts, err := unit.DeserializeOptions(bytes.NewReader(drop.Data))
		listens := 0
		for _, o := range opts {
			if o.Name != "ListenStream" || o.Value == "" {
				continue
			}
			listens++
			if _, err := netip.ParseAddrPort(o.Value); err != nil {
				bad("ListenStream=%s: %v", o.Value, err)
			}
		}
		if err != nil || listens != len(cfg.VIP.Addresses) {
			bad("systemd cannot read the socket drop-in %q: %v", drop.Data, err)
		}
	}
	return problems
}

// kernelTakes sets the proxy's socket options as the proxy does
// (TCP_USER_TIMEOUT in milliseconds, keepalive idle and interval) on a
// real loopback connection.
func kernelTakes(cfg *config.Valid) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return err
	}
	defer c.Close()
	tc := c.(*net.TCPConn)
	ka := cfg.Timeouts.KeepAlive.Duration
	if err := tc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: ka, Interval: ka, Count: 3}); err != nil {
		return fmt.Errorf("keepalive %s: %w", ka, err)
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return err
	}
	ut := cfg.Timeouts.UserTimeout.Duration
	var serr error
	raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(ut.Milliseconds()))
	})
	if serr != nil {
		return fmt.Errorf("TCP_USER_TIMEOUT %s: %w", ut, serr)
	}
	return nil
}

// sysctlLines: every line is a comment or "key = value" for one uplink,
// as systemd-sysctl reads it (no glob in the key).
func sysctlLines(data []byte, uplinks []string) error {
	want := map[string]bool{}
	for _, up := range uplinks {
		want[up] = true
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, _, ok := strings.Cut(line, " = ")
		key = strings.ReplaceAll(key, "/", ".")
		parts := strings.Split(key, ".")
		if !ok || strings.ContainsAny(key, "*?[]!") || len(parts) < 5 {
			return fmt.Errorf("line %q", line)
		}
		if up := strings.Join(parts[3:len(parts)-1], "."); !want[up] {
			return fmt.Errorf("line %q names %q, not an uplink", line, up)
		}
	}
	return nil
}

// keepalivedChecker runs keepalived's own parser (--config-test) in a
// private network namespace holding every interface randomConfig names.
type keepalivedChecker struct {
	t  *testing.T
	ns string // "": keepalived or namespaces not available here
}

func newKeepalivedChecker(t *testing.T) *keepalivedChecker {
	kc := &keepalivedChecker{t: t}
	if _, err := exec.LookPath("keepalived"); err != nil || os.Geteuid() != 0 {
		t.Log("keepalived --config-test skipped: needs root and keepalived")
		return kc
	}
	ns, err := testutil.OpenNetNS(t, "vpagree")
	if err != nil {
		t.Logf("keepalived --config-test skipped: %v", err)
		return kc
	}
	for i, name := range []string{"eth0", "eth1", "eth0.100"} {
		ns.IP(t, "link", "add", name, "type", "veth", "peer", "name", fmt.Sprintf("peer%d", i))
	}
	kc.ns = ns.Name
	return kc
}

// check renders cfg's snippet (with a probe that exists) and has
// keepalived parse it.
func (kc *keepalivedChecker) check(cfg *config.Valid) error {
	if kc.ns == "" || cfg == nil {
		return nil
	}
	dir := kc.t.TempDir()
	snippet := bytes.ReplaceAll(keepalived.Render(cfg), []byte(cfg.Keepalived.ProbeCommand+" --config"), []byte("/bin/true --config"))
	main := "global_defs {\n    enable_script_security\n    script_user root\n}\ninclude vipproxy.conf\n"
	if err := os.WriteFile(filepath.Join(dir, "vipproxy.conf"), snippet, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "keepalived.conf"), []byte(main), 0o644); err != nil {
		return err
	}
	out, err := exec.Command("ip", "netns", "exec", kc.ns, "keepalived", "--config-test", "-f", filepath.Join(dir, "keepalived.conf")).CombinedOutput()
	if err != nil {
		return fmt.Errorf("keepalived --config-test: %v: %s\n%s", err, out, snippet)
	}
	return nil
}

// keepalivedBlocks: braces balance, and the instance runs on iface.
func keepalivedBlocks(data []byte, iface string) error {
	depth := 0
	for _, f := range strings.Fields(string(data)) {
		switch f {
		case "{":
			depth++
		case "}":
			depth--
		}
		if depth < 0 {
			return fmt.Errorf("a } closes nothing")
		}
	}
	if depth != 0 || !bytes.Contains(data, []byte("    interface "+iface+"\n")) {
		return fmt.Errorf("unbalanced or without interface %s:\n%s", iface, data)
	}
	return nil
}

// randomConfig writes a config whose every key is drawn from values that
// are good, bad, or bad in a way a renderer or the kernel once noticed
// before check did. The first value is the usual one, picked 9 times in 10,
// so that about a fifth of the configs pass.
func randomConfig(r *rand.Rand) []byte {
	pick := func(vs ...string) string {
		if r.IntN(10) < 9 {
			return vs[0]
		}
		return vs[r.IntN(len(vs))]
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[vip]\naddresses = %s\nport = %s\n", pick(`["192.0.2.10"]`, `["2001:db8::10"]`, `["192.0.2.10", "2001:db8::10"]`, `["127.0.0.1"]`, `["::1"]`, `[]`), pick("6443", "7443", "6449"))
	for i := range 1 + r.IntN(3) {
		fmt.Fprintf(&b, "\n[[backend]]\naddress = %q\n", pick(fmt.Sprintf("192.0.2.%d:6443", i+1), "192.0.2.2:6443", "[2001:db8::1]:6443", "cp1.example.org:6443",
			"localhost:6449", "localhost:+17001", "localhost:017001", "localhost:17001", "192.0.2.10:6443", "0.0.0.0:6443", "192.0.2.3:0"))
	}
	fmt.Fprintf(&b, "\n[balance]\nalgorithm = %q\n", pick("round-robin", "least-connections", "random-two-choices", "weighted"))
	fmt.Fprintf(&b, "\n[health]\ntype = %q\ninterval = %q\nserver_name = %q\n", pick("tcp", "tls", "https"), pick("1s", "100ms", "50ms", "100000h"), pick("", "kubernetes", "api\r\nX: y", "10.0.0.1"))
	fmt.Fprintf(&b, "\n[timeouts]\nuser_timeout = %q\nkeepalive = %q\n", pick("30s", "0s", "597h", "596h", "500us"), pick("15s", "0s", "9h", "10h"))
	fmt.Fprintf(&b, "\n[network]\ninterface = %q\nuplinks = %s\n", pick("dummyvip0", "!dummyvip0", "vip*", "averyveryverylongname"),
		pick(`["eth0"]`, `[]`, `["eth0", "eth0.100"]`, `["*"]`, `["eth=0"]`, `["all"]`, `["1234"]`))
	fmt.Fprintf(&b, "\n[keepalived]\ninstance = %q\ninterface = %q\nunicast_peers = %s\nauth_pass = %q\n", pick("vipproxy", "vip/proxy", "vip_1"), pick("", "eth1", "eth 1"),
		pick(`[]`, `["192.0.2.20"]`, `["2001:db8::20"]`), pick("", "secret", "toolongpass"))
	fmt.Fprintf(&b, "\n[admin]\nlisten = %q\n", pick("127.0.0.1:6449", "127.0.0.1:+6449", "unix:/run/vipproxy/admin.sock", "0.0.0.0:6449"))
	return []byte(b.String())
}

// TestWriteAgreeCases writes agreeCases random configs that pass check to
// $VIPPROXY_AGREE_DIR, where nix/tests/agree.py holds nix/lib.nix to what
// the Go renderers make of them (make test-nix). Skipped without it.
func TestWriteAgreeCases(t *testing.T) {
	dir := os.Getenv("VIPPROXY_AGREE_DIR")
	if dir == "" {
		t.Skip("VIPPROXY_AGREE_DIR not set (make test-nix sets it)")
	}
	r := rand.New(rand.NewPCG(12, 17))
	n := 0
	for i := 0; n < agreeCases && i < 100*agreeCases; i++ {
		path := filepath.Join(dir, fmt.Sprintf("random-%02d.toml", n))
		if err := os.WriteFile(path, randomConfig(r), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := config.Load(path, config.AllFiles); err != nil {
			os.Remove(path)
			continue
		}
		n++
	}
	if n < agreeCases {
		t.Fatalf("only %d random configs passed check", n)
	}
}

const agreeCases = 24

// TestWriteAgreeDefaults writes config.Default() as a TOML file spells it
// (table, key, value; JSON) to $VIPPROXY_AGREE_DIR/defaults.json, where
// nix/tests/agree.py holds nix/lib.nix's defaults, which the NixOS
// module's options also read, to it. Skipped without it.
func TestWriteAgreeDefaults(t *testing.T) {
	dir := os.Getenv("VIPPROXY_AGREE_DIR")
	if dir == "" {
		t.Skip("VIPPROXY_AGREE_DIR not set (make test-nix sets it)")
	}
	var text bytes.Buffer
	if err := toml.NewEncoder(&text).Encode(config.Default()); err != nil {
		t.Fatal(err)
	}
	var tables map[string]any
	if _, err := toml.Decode(text.String(), &tables); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(tables)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "defaults.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}
