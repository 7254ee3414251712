package daemon_test

// The tests in this package run the real vipproxy binary over real
// sockets on loopback, with stand-in mTLS apiservers as backends.

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vipproxy/vipproxy/internal/standin"
	"github.com/vipproxy/vipproxy/internal/testpki"
	"github.com/vipproxy/vipproxy/internal/testutil"
)

var (
	binDir string
	pki    *testpki.Files
)

func TestMain(m *testing.M) {
	code, err := setup(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e setup:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func setup(m *testing.M) (int, error) {
	dir, err := os.MkdirTemp("", "vipproxy-e2e-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	defer testutil.RemoveBuilt()
	binDir = filepath.Join(dir, "bin")
	if prebuilt := os.Getenv("VIPPROXY_TEST_BIN"); prebuilt != "" {
		// A guest without Go (vm-tests/flood.py): the binaries built with
		// this test binary.
		binDir = prebuilt
	} else if err := buildBinaries(binDir); err != nil {
		return 0, err
	}
	if shared := os.Getenv("VIPPROXY_TEST_PKI"); shared != "" {
		// Stand-in apiservers outside this process (vm-tests/flood.py
		// runs them on the VM host) serve a PKI written there.
		pki = testpki.Load(shared)
	} else if pki, err = testpki.Write(filepath.Join(dir, "pki"), nil); err != nil {
		return 0, err
	}
	return m.Run(), nil
}

// The version and commit the test binaries are built with, set as the
// Makefile sets them (-ldflags -X main.version, -X main.commit).
const (
	testVersion = "v9.9.9-test"
	testCommit  = "0123456789abcdef0123456789abcdef01234567"
)

// buildBinaries builds vipproxy and vipproxy-apiserver into binDir.
func buildBinaries(binDir string) error {
	args := []string{"build", "-ldflags", "-X main.version=" + testVersion + " -X main.commit=" + testCommit, "-o", binDir + "/"}
	cgo := "CGO_ENABLED=0"
	if raceOn {
		// Under the race detector the daemon itself is instrumented too,
		// so reload, health and drain are race-checked in the real process.
		args, cgo = append(args, "-race"), "CGO_ENABLED=1"
	}
	build := exec.Command("go", append(args, "../../cmd/vipproxy", "../../cmd/vipproxy-apiserver")...)
	build.Env = append(os.Environ(), cgo)
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v\n%s", err, out)
	}
	return nil
}

// backend is an in-process stand-in apiserver.
func backend(t testing.TB, name string, mod ...func(*standin.Options)) *standin.Server {
	t.Helper()
	tlsConf, err := pki.ServerTLS()
	if err != nil {
		t.Fatal(err)
	}
	opts := standin.Options{Name: name, Listen: "127.0.0.1:0", TLS: tlsConf, Logger: slog.New(slog.DiscardHandler)}
	for _, f := range mod {
		f(&opts)
	}
	s, err := standin.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// settings is the part of a config file that tests vary.
type settings struct {
	Port     int
	Admin    string
	Backends []string
	Check    string // tcp (default), tls or https
	// Anonymous: a tls or https check without a client certificate.
	Anonymous bool
	Interval  string // default checkInterval (longer under qemu-user: testutil.CheckPeriod)
	// DrainIdle is timeouts.drain_idle; default the config's default.
	DrainIdle string
	// Drain is timeouts.drain; default 5s.
	Drain string
	// Dial is timeouts.dial; default 1s.
	Dial string
	// Mode is vip.mode; default the config's default (vrrp).
	Mode string
	// ServerName is health.server_name (tls and https checks).
	ServerName string
	Extra      string // appended TOML
}

func (s settings) toml() string {
	var b strings.Builder
	check := s.Check
	if check == "" {
		check = "tcp"
	}
	interval := s.Interval
	if interval == "" {
		interval = testutil.CheckPeriod(checkInterval)
	}
	fmt.Fprintf(&b, "[vip]\naddresses = [\"127.0.0.1\"]\nport = %d\n", s.Port)
	if s.Mode != "" {
		fmt.Fprintf(&b, "mode = %q\n", s.Mode)
	}
	b.WriteString("\n")
	for i, a := range s.Backends {
		fmt.Fprintf(&b, "[[backend]]\nname = \"b%d\"\naddress = %q\n\n", i, a)
	}
	fmt.Fprintf(&b, "[health]\ntype = %q\ninterval = %q\ntimeout = %q\nrise = 2\nfall = 2\n", check, interval, interval)
	switch {
	case check != "tcp" && s.Anonymous:
		fmt.Fprintf(&b, "ca_file = %q\n", pki.CA)
	case check != "tcp":
		fmt.Fprintf(&b, "ca_file = %q\ncert_file = %q\nkey_file = %q\n", pki.CA, pki.ClientCert, pki.ClientKey)
		if s.ServerName != "" {
			fmt.Fprintf(&b, "server_name = %q\n", s.ServerName)
		}
	}
	dial := s.Dial
	if dial == "" {
		dial = "1s"
	}
	drain := s.Drain
	if drain == "" {
		drain = "5s"
	}
	fmt.Fprintf(&b, "\n[timeouts]\ndial = %q\ndrain = %q\n", dial, drain)
	if s.DrainIdle != "" {
		fmt.Fprintf(&b, "drain_idle = %q\n", s.DrainIdle)
	}
	fmt.Fprintf(&b, "\n[admin]\nlisten = %q\n", s.Admin)
	b.WriteString(s.Extra)
	return b.String()
}

// proc is a running vipproxy.
type proc struct {
	t       testing.TB
	cmd     *exec.Cmd
	cfgPath string
	vip     string
	admin   string
	log     *testutil.Buffer
	exited  chan struct{}
	err     error
}

// runtimeDir is the env entry of a RUNTIME_DIRECTORY of its own, as
// systemd gives the unit: the daemon puts its control and probe sockets
// there, and `vipproxy probe` asks nothing else (see proc.probe).
func runtimeDir(t testing.TB) []string {
	return []string{"RUNTIME_DIRECTORY=" + t.TempDir()}
}

// probe runs `vipproxy probe` on the probe socket of p, a daemon started
// with runtimeDir, and returns its output.
func (p *proc) probe() (string, error) {
	var dir string
	for _, e := range p.cmd.Env {
		if d, ok := strings.CutPrefix(e, "RUNTIME_DIRECTORY="); ok {
			dir = d
		}
	}
	if dir == "" {
		p.t.Fatal("probe of a daemon started without runtimeDir: it has no probe socket")
	}
	out, err := exec.Command(filepath.Join(binDir, "vipproxy"), "probe", "--config", p.cfgPath, "--control", filepath.Join(dir, "probe.sock")).CombinedOutput()
	return string(out), err
}

// newSettings returns settings with fresh ports for the VIP and admin.
func newSettings(t testing.TB, backends ...string) settings {
	return settings{Port: testutil.FreePort(t), Admin: fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t)), Backends: backends}
}

// startVIPProxy writes the config and starts the binary, waiting until
// /readyz answers (any status). Extra env entries and a command prefix
// (e.g. prlimit, systemd-socket-activate) may be given.
func startVIPProxy(t testing.TB, s settings, env []string, prefix ...string) *proc {
	t.Helper()
	p := newProc(t, s)
	args := append(append([]string{}, prefix...), filepath.Join(binDir, "vipproxy"), "serve", "--config", p.cfgPath)
	p.cmd = exec.Command(args[0], args[1:]...)
	p.cmd.Env = append(os.Environ(), env...)
	p.start()
	return p
}

// newProc writes the config of s for a daemon not started yet.
func newProc(t testing.TB, s settings) *proc {
	t.Helper()
	return newProcConfig(t, s.toml(), fmt.Sprintf("127.0.0.1:%d", s.Port), s.Admin)
}

// newProcConfig is newProc with the whole config file given; vip is the
// address tests dial, admin the admin endpoint in the file.
func newProcConfig(t testing.TB, config, vip, admin string) *proc {
	t.Helper()
	cfgPath := filepath.Join(t.TempDir(), "vipproxy.toml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	return &proc{t: t, cfgPath: cfgPath, vip: vip, admin: admin, log: &testutil.Buffer{}, exited: make(chan struct{})}
}

// startConfig starts the daemon on a whole config file (see newProcConfig).
func startConfig(t testing.TB, config, vip, admin string, env []string) *proc {
	t.Helper()
	p := newProcConfig(t, config, vip, admin)
	p.cmd = exec.Command(filepath.Join(binDir, "vipproxy"), "serve", "--config", p.cfgPath)
	p.cmd.Env = append(os.Environ(), env...)
	p.start()
	return p
}

// start runs p.cmd in a process group of its own, killed with it when
// the test ends, and waits until the admin endpoint answers.
func (p *proc) start() {
	t := p.t
	t.Helper()
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
		if strings.Contains(p.log.String(), "WARNING: DATA RACE") {
			t.Error("the race detector found a data race in the daemon")
		}
		if t.Failed() {
			t.Logf("vipproxy (pid %d) log:\n%s", p.cmd.Process.Pid, p.log.String())
		}
	})
	p.waitFor(func() bool { _, err := p.get("/healthz"); return err == nil }, "admin endpoint up")
}

// waitExit waits up to 15 s for vipproxy to exit after what, and wants
// exit code 0.
func (p *proc) waitExit(what string) {
	p.t.Helper()
	select {
	case <-p.exited:
	case <-time.After(testutil.Scaled(45 * time.Second)): // only a hang; a loaded machine is slow to drain
		p.t.Fatalf("vipproxy did not exit within 45 s of %s", what)
	}
	if p.err != nil {
		p.t.Errorf("exit after %s: %v, want exit code 0", what, p.err)
	}
}

// waitFor polls cond every 20 ms for up to 15 s (Slowdown times longer
// when emulated).
func (p *proc) waitFor(cond func() bool, what string) {
	p.t.Helper()
	// Generous: it fails only on a hang, never on a loaded machine (a race
	// build starting beside background jobs on 2 cores took over 15 s).
	for deadline := time.Now().Add(testutil.Scaled(90 * time.Second)); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		select {
		case <-p.exited:
			p.t.Fatalf("vipproxy exited (%v) while waiting for %s", p.err, what)
		default:
		}
		if cond() {
			return
		}
	}
	p.t.Fatalf("timed out waiting for %s", what)
}

// waitLog waits until the daemon's log has want: a line logged before a
// state the test saw may still be on its way through the output pipe,
// which another goroutine copies into p.log.
func (p *proc) waitLog(want string) {
	p.t.Helper()
	p.waitFor(func() bool { return strings.Contains(p.log.String(), want) }, "the log line "+want)
}

// get fetches an admin path and returns the body; non-200 is an error.
// Its 30 s timeout (Slowdown times longer when emulated) fails only a
// hang: /status of 2,001 backends on a loaded 2-core machine, and
// /metrics under a flood in a TCG guest (vm-tests/flood.py, 2026-12-01),
// took over the 2 s it was. Each GET has a connection of its own: a kept-
// alive one, which the admin endpoint closes after 10 s idle, was reused
// as it closed ("http: server closed idle connection", 2026-12-06, -race
// beside four busy CPU loops).
func (p *proc) get(path string) (string, error) {
	return p.getWith(&http.Client{Timeout: testutil.Scaled(30 * time.Second), Transport: &http.Transport{DisableKeepAlives: true}}, path)
}

// getWith is get through the client c.
func (p *proc) getWith(c *http.Client, path string) (string, error) {
	resp, err := c.Get("http://" + p.admin + path)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return string(b), nil
}

type backendStatus struct {
	Name            string `json:"name"`
	Port            string `json:"port"`
	Address         string `json:"address"`
	State           string `json:"state"`
	LastError       string `json:"last_error"`
	OpenConnections int64  `json:"open_connections"`
	Source          string `json:"source"`
	Draining        bool   `json:"draining"`
	Verified        bool   `json:"verified"`
	Unverified      string `json:"unverified"`
}

type portStatus struct {
	Name     string `json:"name"`
	Required bool   `json:"required"`
	Healthy  int    `json:"healthy"`
	Backends int    `json:"backends"`
}

type status struct {
	Ready           bool            `json:"ready"`
	Ports           []portStatus    `json:"ports"`
	Backends        []backendStatus `json:"backends"`
	OpenConnections int64           `json:"open_connections"`
	ConfigError     string          `json:"config_error"`
	Panic           bool            `json:"panic"`
	Reloads         uint64          `json:"reloads"` // done, accepted or refused
}

func (p *proc) status() status {
	p.t.Helper()
	body, err := p.get("/status")
	if err != nil {
		p.t.Fatalf("status: %v", err)
	}
	var st status
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		p.t.Fatalf("decode /status %q: %v", body, err)
	}
	return st
}

func (p *proc) state(name string) string {
	for _, b := range p.status().Backends {
		if b.Name == name {
			return b.State
		}
	}
	return "absent"
}

func (p *proc) waitState(name, want string) {
	p.t.Helper()
	p.waitFor(func() bool { return p.state(name) == want }, name+" "+want)
}

func (p *proc) signal(sig syscall.Signal) {
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
}

// rewrite replaces the config file atomically.
func (p *proc) rewrite(content string) {
	p.t.Helper()
	tmp := p.cfgPath + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		p.t.Fatal(err)
	}
	if err := os.Rename(tmp, p.cfgPath); err != nil {
		p.t.Fatal(err)
	}
}

// mtlsClient makes one new TLS connection per request.
func mtlsClient(t testing.TB, withCert bool) *http.Client {
	t.Helper()
	conf, err := pki.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	if !withCert {
		conf.Certificates = nil
	}
	// 30 s fails only a hang: 60 clients waiting in the backlog while a race
	// build started on a loaded 2-core machine waited over 5 s.
	return &http.Client{Timeout: testutil.Scaled(30 * time.Second), Transport: &http.Transport{TLSClientConfig: conf, DisableKeepAlives: true}}
}

// name asks the backend behind addr for its name over a new connection.
func name(c *http.Client, addr string) (string, error) {
	resp, err := c.Get("https://" + addr + "/name")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(b)), err
}

var _ = tls.VersionTLS13
